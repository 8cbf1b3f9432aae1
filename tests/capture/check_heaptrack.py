#!/usr/bin/env python3
"""heap.txt and leaks.folded agree with heaptrack on the same program (cap_heap.c), and
heap.txt's lifetime histogram with one computed here from events.jsonl.

cap_heap runs once under `tracefs record` and once under heaptrack. heaptrack_print's
flame-graph stacks (allocations, temporary, peak and leaked costs) are summed over the
stacks through cap_heap's main, since heaptrack also counts allocations its own injected
library makes at load time, before main; tracefs's numbers of the rank must equal those
sums, and leaks.folded's bytes per innermost function those of heaptrack. Skipped, with the
reason, where heaptrack is not installed (.ci/setup installs it).

The lifetime histogram (heaptrack's GUI draws one; heaptrack_print prints none to compare
with) is checked without heaptrack: cap_heap recorded with timing and without, each freed
block's lifetime is taken from events.jsonl by allocation id (the allocating call's `id`,
free's `id`, realloc's `freed`; a realloc in place ends its block and makes another), in ns
between the calls' ends, or untimed in heap calls between them, and bucketed by log2; the
blocks and bytes per bucket must equal heap.txt's. Output is TAP.

  check_heaptrack.py --tracefs T --prog CAP_HEAP
"""

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

COSTS = ("allocations", "temporary", "peak", "leaked")


def run(cmd, timeout=600):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def heaptrack_costs(work, prog):
    """{cost: {innermost function: sum}} over heaptrack's stacks through main, or an error."""
    rc, out, err = run(["heaptrack", "-o", os.path.join(work, "ht"), prog])
    data = [f for f in os.listdir(work) if f.startswith("ht.")]
    if rc != 0 or not data:
        return None, "heaptrack failed (%d): %s" % (rc, (out + err)[-2000:])
    got = {}
    for cost in COSTS:
        fg = os.path.join(work, "fg." + cost)
        rc, out, err = run(["heaptrack_print", "-f", os.path.join(work, data[0]),
                            "--flamegraph-cost-type", cost, "-F", fg])
        if rc != 0:
            return None, "heaptrack_print failed (%d): %s" % (rc, err[-2000:])
        by_fn = collections.Counter()
        with open(fg) as f:
            for line in f:
                stack, _, n = line.rstrip("\n").rpartition(" ")
                frames = [s.split(" (")[0] for s in stack.rstrip(";").split(";")]
                if "main" in frames:
                    by_fn[frames[-1]] += int(n)
        got[cost] = by_fn
    return got, None


HEAP_CALLS = ("malloc", "calloc", "realloc", "free", "aligned_alloc", "posix_memalign",
              "memalign")


def lifetimes(events, timed):
    """{bucket: [blocks, bytes]} of the freed blocks' lifetimes, from events.jsonl lines
    (one thread, in its order). Bucket 0 holds lifetime 0, bucket k [2^(k-1), 2^k)."""
    live, hist, step = {}, collections.defaultdict(lambda: [0, 0]), 0

    def end(ident, now):
        born, size = live.pop(ident)
        k = max(0, now - born).bit_length()
        hist[k][0] += 1
        hist[k][1] += size

    for e in events:
        if e["name"] not in HEAP_CALLS:
            continue
        now = e["ts"] + e["dur"] if timed else step
        step += 1
        a = e["args"]
        if e["name"] == "free":
            if a.get("id") in live:
                end(a["id"], now)
            continue
        if e["name"] == "realloc" and a.get("freed") in live:
            end(a["freed"], now)
        # §9: the result is "result", a number; posix_memalign's is 0 and its block "ptr"
        ret = a.get("result", 0)
        made = ret if e["name"] != "posix_memalign" else ret == 0 and a.get("ptr", 0)
        if not made or not a.get("id"):
            continue
        if a["id"] in live:  # a realloc in place: the block ends, another begins
            end(a["id"], now)
        live[a["id"]] = (now, a.get("size", 0) * a.get("nmemb", 1))
    return dict(hist)


def heap_lifetimes(heap):
    """heap.txt's histogram as lifetimes() gives it."""
    got = {}
    for m in re.finditer(r"^lifetime +(\d+) +(\d+) +(\d+) +(\d+)$", heap, re.M):
        lo, hi, blocks, size = map(int, m.groups())
        k = lo.bit_length()
        if hi != (1 << k if k < 64 else (1 << 64) - 1):
            return "bad bucket %s" % m.group(0)
        got[k] = [blocks, size]
    return got


def check_lifetimes(tap, args, work):
    for timing in ("lossless", "none"):
        trace = os.path.join(work, "life-%s.trace" % timing)
        rc, out, err = run([args.tracefs, "record", "--timing=" + timing, "-o", trace, "--",
                            args.prog])
        if not tap.ok(rc == 0, "tracefs record --timing=%s cap_heap" % timing, out + err):
            continue
        rc, heap, err = run([args.tracefs, "cat", trace, "ranks/0/heap.txt"])
        rc2, evs, err2 = run([args.tracefs, "cat", trace, "ranks/0/threads/0/events.jsonl"])
        if not tap.ok(rc == 0 and rc2 == 0, "timing %s: heap.txt, events.jsonl" % timing,
                      err + err2):
            continue
        want = lifetimes([json.loads(line) for line in evs.splitlines()],
                         timing != "none")
        got = heap_lifetimes(heap)
        blocks = sum(v[0] for v in want.values())
        # cap_heap frees 4 kept blocks, 250 churned ones, the big one, and grows one
        tap.ok(got == want and blocks >= 256 and len(want) >= 2,
               "timing %s: heap.txt's lifetime histogram (%d blocks in %d buckets) equals "
               "one from events.jsonl's ids" % (timing, blocks, len(want)),
               "got  %r\nwant %r" % (got, want))


def check_dropped(tap, args, work):
    """cap_heap churning on a 1 MiB spool with --when-full=drop: heap.txt says how many
    events were dropped, as many as the trace's metadata, since its leaks and unmatched frees
    then come from the drops (it said nothing, and reported the blocks whose free was
    dropped as leaked)."""
    trace = os.path.join(work, "drop.trace")
    rc, out, err = run([args.tracefs, "record", "--when-full=drop", "--spool-size=1",
                        "--backtrace-depth=0", "-o", trace, "--", args.prog, "3000000"])
    rc2, info, err2 = run([args.tracefs, "info", "--json", trace])
    if not tap.ok(rc == 0 and rc2 == 0, "cap_heap on a full spool: recorded", err + err2):
        return
    dropped = int(json.loads(info)["meta"].get("dropped_events", 0))
    if dropped == 0:
        tap.skip("heap.txt says how many events were dropped", "the recorder kept up")
        return
    rc, heap, err = run([args.tracefs, "cat", trace, "ranks/0/heap.txt"])
    m = re.search(r"^dropped (\d+) events", heap, re.M)
    tap.ok(rc == 0 and m and int(m.group(1)) == dropped,
           "heap.txt says the %d events dropped" % dropped, heap[:1500])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--prog", required=True)
    args = ap.parse_args()
    tap = Tap()
    names = ["allocations", "temporary allocations", "peak bytes", "leaked bytes",
             "leaks.folded by function"]
    work = tempfile.mkdtemp(prefix="tfs-heaptrack-")
    try:
        check_lifetimes(tap, args, work)
        check_dropped(tap, args, work)
        if not (shutil.which("heaptrack") and shutil.which("heaptrack_print")):
            for n in names:
                tap.skip("heap.txt %s equal heaptrack's" % n,
                         "no heaptrack (apt-get install heaptrack)")
            return tap.done()
        ht, why = heaptrack_costs(work, args.prog)
        if not tap.ok(ht is not None, "heaptrack records cap_heap", why):
            return tap.done()
        trace = os.path.join(work, "h.trace")
        rc, out, err = run([args.tracefs, "record", "-o", trace, "--", args.prog])
        if not tap.ok(rc == 0, "tracefs record cap_heap", out + err):
            return tap.done()
        rc, heap, err = run([args.tracefs, "cat", trace, "ranks/0/heap.txt"])
        rc2, folded, err2 = run([args.tracefs, "cat", trace, "ranks/0/leaks.folded"])
        if not tap.ok(rc == 0 and rc2 == 0, "tracefs cat heap.txt, leaks.folded", err + err2):
            return tap.done()
        mine = {}
        for key, pat in (("allocations", r"allocations (\d+) calls"),
                         ("temporary", r"temporary (\d+) allocations"),
                         ("peak", r"peak (\d+) bytes"), ("leaked", r"leaked (\d+) bytes")):
            m = re.search(pat, heap)
            mine[key] = int(m.group(1)) if m else None
        for cost, n in zip(COSTS, names):
            want = sum(ht[cost].values())
            tap.ok(mine[cost] == want and want > 0,
                   "heap.txt %s %s equal heaptrack's %d" % (n, mine[cost], want), heap)
        leaks = collections.Counter()
        for line in folded.splitlines():
            stack, _, n = line.rpartition(" ")
            leaks[stack.split(";")[-1]] += int(n)
        want = {f: n for f, n in ht["leaked"].items() if n}
        tap.ok(dict(leaks) == want and len(want) >= 3,
               "leaks.folded %r equals heaptrack's leaked bytes by function %r"
               % (dict(leaks), want), folded)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
