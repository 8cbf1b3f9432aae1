#!/usr/bin/env python3
"""heap.txt and leaks.folded agree with heaptrack on the same program (cap_heap.c).

cap_heap runs once under `tracefs record` and once under heaptrack. heaptrack_print's
flame-graph stacks (allocations, temporary, peak and leaked costs) are summed over the
stacks through cap_heap's main, since heaptrack also counts allocations its own injected
library makes at load time, before main; tracefs's numbers of the rank must equal those
sums, and leaks.folded's bytes per innermost function those of heaptrack. Skipped, with the
reason, where heaptrack is not installed (.ci/setup installs it). Output is TAP.

  check_heaptrack.py --tracefs T --prog CAP_HEAP
"""

import argparse
import collections
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--prog", required=True)
    args = ap.parse_args()
    tap = Tap()
    names = ["allocations", "temporary allocations", "peak bytes", "leaked bytes",
             "leaks.folded by function"]
    if not (shutil.which("heaptrack") and shutil.which("heaptrack_print")):
        for n in names:
            tap.skip("heap.txt %s equal heaptrack's" % n,
                     "no heaptrack (apt-get install heaptrack)")
        return tap.done()
    work = tempfile.mkdtemp(prefix="tfs-heaptrack-")
    try:
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
