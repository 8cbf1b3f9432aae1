#!/usr/bin/env python3
"""The profiles and JSON views of recorded programs, against what cap_views.c says it did.

- summary.txt counts the bytes of every call that moves bytes: fwrite and fread (items
  times size), malloc, calloc (nmemb times size) and realloc, each row's count and bytes
  equal to the program's own totals (rank 1 does only the malloc family); timed calls
  have a duration, the malloc family (not timed by the capture) prints "-".
- stacks.folded of a program with backtraces: every event once, at its backtrace root
  first (main, stacks, outer_a, leaf_alloc), the counts of the two call paths the
  program's, the whole summing to the rank's events.
- A backtrace cut at --backtrace-depth starts with [truncated] in backtraces.txt,
  allocs.folded, stacks.folded, leaks.folded and heap.txt; a shallow one does not.
- events.jsonl at the root is the ranks' events.jsonl end to end.
- valloc, pvalloc (freed and leaked) and a mapping moved and shrunk by mremap: trace.txt names
  every call with its id (the mapping keeps its id, a write from it names it), heap.txt
  counts the heap calls and the leak, summary.txt the calls.
- info.json is typed: pid an integer equal to the program's, dropped_events and
  backtrace_depth integers, streams sorted by (rank, thread), every rank's threads sorted.
Output is TAP.

  check_views.py --tracefs T --prog CAP_VIEWS
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

DEPTH = 12  # --backtrace-depth of the deep case
DEEP = 40   # cap_views deep's recursion: far deeper than DEPTH


def run(cmd):
    e = dict(os.environ)
    for k in ("TFS_CAPTURE", "TFS_OUTPUT", "TFS_SPOOL", "TFS_TIMING", "TFS_TRACE"):
        e.pop(k, None)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e,
                       stdin=subprocess.DEVNULL, timeout=300)
    return p.returncode, p.stdout, p.stderr


class Trace:
    def __init__(self, tracefs, path):
        self.tracefs, self.path = tracefs, path

    def cat(self, vpath):
        rc, out, err = run([self.tracefs, "cat", self.path, vpath])
        return out if rc == 0 else None

    def text(self, vpath):
        out = self.cat(vpath)
        return out.decode(errors="replace") if out is not None else ""


def record(tap, a, tmp, name, argv, opts=()):
    """Record @argv; (Trace, the program's JSON line) or (None, None)."""
    out = os.path.join(tmp, name + ".trace")
    rc, sout, err = run([a.tracefs, "record", "-o", out] + list(opts) + ["--", a.prog] + argv)
    ok = tap.ok(rc == 0 and os.path.exists(out), "record cap_views %s" % " ".join(argv),
                err.decode(errors="replace")[-2000:])
    if not ok:
        return None, None
    return Trace(a.tracefs, out), json.loads(sout.decode().strip().splitlines()[-1])


def summary_rows(text):
    """kind name -> (count, total_ns or None, bytes)."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"kind\s+(\d+)\s+(\d+|-)\s+(\d+|-)\s+(\d+)\s+(\S+)$", line)
        if m:
            rows[m.group(5)] = (int(m.group(1)),
                                None if m.group(2) == "-" else int(m.group(2)),
                                int(m.group(4)))
    return rows


def check_bytes(tap, a, tmp):
    t, prog = record(tap, a, tmp, "bytes", ["bytes", os.path.join(tmp, "data.bin")])
    if not t:
        return
    r0, r1 = summary_rows(t.text("ranks/0/summary.txt")), summary_rows(
        t.text("ranks/1/summary.txt"))
    for kind in ("fwrite", "fread"):
        got = r0.get(kind)
        tap.ok(got is not None and (got[0], got[2]) == tuple(prog[kind]) and got[1] > 0,
               "summary.txt: %s count and bytes are the program's %r, with a duration" %
               (kind, prog[kind]), (got, t.text("ranks/0/summary.txt")))
    for kind in ("malloc", "calloc", "realloc", "free"):
        got = r1.get(kind)
        tap.ok(got is not None and (got[0], got[2]) == tuple(prog[kind]) and got[1] is None,
               "summary.txt of the child: %s count and bytes are the program's %r, "
               "untimed as '-'" % (kind, prog[kind]), (got, t.text("ranks/1/summary.txt")))
    whole = summary_rows(t.text("summary.txt"))
    tap.ok(all(whole.get(k, (0, 0, -1))[2] == r0.get(k, (0, 0, 0))[2] + r1.get(k, (0, 0, 0))[2]
               for k in ("fwrite", "fread", "calloc", "realloc")),
           "summary.txt of the whole trace adds the ranks' bytes", t.text("summary.txt"))

    # events.jsonl at the root: the ranks' end to end
    root = t.cat("events.jsonl")
    ranks = [t.cat("ranks/%d/events.jsonl" % r) for r in (0, 1)]
    rc, ls, _ = run([a.tracefs, "ls", t.path])
    size = re.search(rb"(?m)^f\s+(\d+) events\.jsonl$", ls)
    tap.ok(root is not None and None not in ranks and root == b"".join(ranks) and
           size is not None and int(size.group(1)) == len(root) and len(ranks[1]) > 0,
           "events.jsonl: ranks/0's then ranks/1's, byte for byte, its ls size exact (%d)" %
           len(root or b""), ls.decode(errors="replace"))

    # info.json: typed, sorted
    info = json.loads(t.cat("info.json") or b"{}")
    meta = info.get("meta", {})
    procs = {p.get("rank"): p for p in info.get("processes", [])}
    tap.ok(type(meta.get("pid")) is int and meta.get("pid") == prog["pid"] and
           type(meta.get("dropped_events")) is int and meta.get("dropped_events") == 0 and
           type(meta.get("backtrace_depth")) is int and meta.get("backtrace_depth") > 0 and
           type(meta.get("backtraces")) is int and
           procs.get(1, {}).get("pid") == prog["child_pid"] and
           all(type(v) is str for k, v in meta.items()
               if k.split(".")[0] not in ("pid", "ppid", "dropped_events", "backtrace_depth",
                                          "backtraces")),
           "info.json: metadata pid (the program's %d), dropped_events, backtrace_depth and "
           "backtraces are integers, the rest strings" % prog["pid"], meta)
    pid1 = [v for k, v in meta.items() if k.startswith("pid.rank")]
    tap.ok(pid1 == [prog["child_pid"]] and meta.get("ppid.rank1") == prog["pid"],
           "info.json: rank 1's pid and ppid are integers, the child's and the parent's",
           meta)


def frames_of(line):
    return line.rsplit(" ", 1)[0].split(";")


def check_stacks(tap, a, tmp):
    t, prog = record(tap, a, tmp, "stacks", ["stacks"])
    if not t:
        return
    folded = t.text("ranks/0/stacks.folded")
    info = json.loads(t.cat("info.json") or b"{}")
    n_events = sum(s["events"] for s in info.get("streams", []) if s["rank"] == 0)
    counts = {}
    total = 0
    for line in folded.splitlines():
        fr, n = frames_of(line), int(line.rsplit(" ", 1)[1])
        total += n
        if fr[-4:] in (["main", "stacks", "outer_a", "leaf_alloc"],
                       ["main", "stacks", "outer_b", "leaf_alloc"]):
            counts[fr[-2]] = counts.get(fr[-2], 0) + n
    tap.ok(counts == {"outer_a": 7, "outer_b": 5},
           "stacks.folded: main;stacks;outer_a;leaf_alloc counts the program's 7 mallocs, "
           "main;stacks;outer_b;leaf_alloc its 5, root first", folded)
    tap.ok(total == n_events and n_events > 12 and
           all(line.startswith("rank 0;thread ") for line in folded.splitlines()),
           "stacks.folded: counts sum to the rank's %d events, each under rank;thread" %
           n_events, folded)
    readme = t.text("README.txt")
    tap.ok("until traces carry backtraces" not in readme.lower() and
           "For a rank with backtraces, n counts events" in readme,
           "README.txt describes stacks.folded of traces with backtraces", readme[-4000:])

    streams = [(s["rank"], s["thread"]) for s in info.get("streams", [])]
    threads = [r.get("threads") for r in info.get("ranks", [])]
    tap.ok(len(streams) == 4 and streams == sorted(streams) and
           all(type(s["index"]) is int for s in info["streams"]) and
           threads == [sorted(threads[0])] and len(threads[0]) == 4 and
           type(info["meta"].get("pid")) is int and info["meta"]["pid"] == prog["pid"],
           "info.json: 4 streams sorted by (rank, thread), the rank's threads sorted, pid %d" %
           prog["pid"], json.dumps({k: info.get(k) for k in ("streams", "ranks", "meta")}))


def check_truncated(tap, a, tmp):
    t, prog = record(tap, a, tmp, "deep", ["deep", str(DEEP)],
                     ["--backtrace-depth=%d" % DEPTH])
    if not t:
        return
    bt = t.text("ranks/0/backtraces.txt")
    stacks = re.split(r"(?m)^stack#\d+\n", bt)[1:]
    deep = [s.splitlines() for s in stacks if "rec (" in s]
    tap.ok(deep and all(s[0] == "  [truncated]" and len(s) == DEPTH + 1 for s in deep) and
           all(s[0] != "  [truncated]" for s in (x.splitlines() for x in stacks)
               if len(s) < DEPTH),
           "backtraces.txt: the stacks of rec() (deeper than %d) start with [truncated], "
           "then %d frames; shorter ones do not" % (DEPTH, DEPTH), bt)
    rx = re.compile(r"^(rank 0;thread 0;)?\[truncated\];rec(;rec){%d} \d+$" % (DEPTH - 1))
    for name in ("allocs.folded", "stacks.folded", "leaks.folded"):
        text = t.text("ranks/0/" + name)
        lines = [line for line in text.splitlines() if ";rec" in line]
        tap.ok(lines and all(rx.match(line) for line in lines) and
               all("[truncated]" not in line for line in text.splitlines()
                   if ";rec" not in line),
               "%s: the cut stacks start with [truncated] (%d lines), no other does" %
               (name, len(lines)), text)
    leaks = t.cat("ranks/0/leaks.folded") or b""
    tap.ok(re.search(rb"\[truncated\];rec(;rec)* 4321\n", leaks) is not None,
           "leaks.folded: the leaked 4321 bytes under the cut stack", leaks)
    heap = t.text("ranks/0/heap.txt")
    tap.ok(re.search(r"(?m)^\s+4321\s+1\s+\[truncated\];rec", heap) is not None,
           "heap.txt: the leak's stack starts with [truncated]", heap)
    info = json.loads(t.cat("info.json") or b"{}")
    tap.ok(info.get("meta", {}).get("backtrace_depth") == DEPTH,
           "info.json: backtrace_depth is the integer %d" % DEPTH, info.get("meta"))


def check_maps(tap, a, tmp):
    """valloc, pvalloc, mmap, mremap and munmap recorded, the heap and the mappings right."""
    t, prog = record(tap, a, tmp, "maps", ["maps"])
    if not t:
        return
    text = t.text("ranks/0/trace.txt")
    ev = [re.sub(r"^\s*[0-9.]+\s+\d+\s+T\d+\s+", "", line) for line in text.splitlines()]
    leaked, mapped, moved = (int(prog[k], 16) for k in ("leaked", "mapped", "moved"))

    def find(rx):
        for e in ev:
            m = re.match(rx, e)
            if m:
                return m
        return None

    va = find(r"valloc\(size=5000, id=(\d+), stack=stack#\d+\) = (0x[0-9a-f]+)$")
    pv = find(r"pvalloc\(size=100, id=(\d+), stack=stack#\d+\) = (0x[0-9a-f]+)$")
    vl = find(r"valloc\(size=300, id=(\d+), stack=stack#\d+\) = 0x%x$" % leaked)
    ok = va and pv and vl and len({va.group(1), pv.group(1), vl.group(1)}) == 3
    tap.ok(ok, "trace.txt: valloc and pvalloc with their sizes, ids, stacks and blocks", text)
    if ok:
        tap.ok(all(find(r"free\(ptr=%s, id=%s\)$" % (m.group(2), m.group(1))) for m in (va, pv)),
               "trace.txt: the frees of valloc's and pvalloc's blocks name their ids", text)
    mm = find(r"mmap\(addr=0x0, length=8192, .*id=(\d+), errno=0\) = 0x%x$" % mapped)
    ok = mm is not None
    tap.ok(ok, "trace.txt: the mmap with its id", text)
    if ok:
        i = mm.group(1)
        tap.ok(find(r"mremap\(old_address=0x%x, old_size=8192, new_size=1048576, flags=0x1, "
                    r"new_address=0x0, id=%s, errno=0\) = 0x%x$" % (mapped, i, moved)) and
               find(r"mremap\(old_address=0x%x, old_size=1048576, new_size=4096, flags=0x0, "
                    r"new_address=0x0, id=%s, errno=0\) = 0x%x$" % (moved, i, moved)),
               "trace.txt: both mremaps, the mapping keeping its id moved and shrunk", text)
        tap.ok(find(r"write\(fd=\d+</dev/null>, count=10, buf=alloc#%s\+0x1000, errno=0\) "
                    r"= 10$" % i),
               "trace.txt: a write from the moved mapping names it and the offset", text)
        tap.ok(find(r"munmap\(addr=0x%x, length=4096, errno=0\) = 0$" % moved),
               "trace.txt: the munmap of the moved mapping", text)
    heap = t.text("ranks/0/heap.txt")
    tap.ok(re.search(r"(?m)^allocations 3 calls, 5400 bytes$", heap) and
           re.search(r"(?m)^frees 2 calls \(0 of blocks not seen allocated\)$", heap) and
           re.search(r"(?m)^leaked 300 bytes in 1 blocks ", heap) and
           re.search(r"(?m)^peak 5400 bytes in 3 blocks ", heap),
           "heap.txt: 3 allocations (5400 bytes), 2 frees all of known blocks, 300 bytes "
           "leaked, peak 5400 in 3 blocks; the mappings not counted", heap)
    rows = summary_rows(t.text("ranks/0/summary.txt"))
    tap.ok(rows.get("valloc", (0,))[0] == 2 and rows.get("pvalloc", (0,))[0] == 1 and
           rows.get("mremap", (0,))[0] == 2 and rows.get("munmap", (0,))[0] == 1,
           "summary.txt: 2 valloc, 1 pvalloc, 2 mremap, 1 munmap", rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--prog", required=True)
    a = ap.parse_args()
    tap = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        check_bytes(tap, a, tmp)
        check_stacks(tap, a, tmp)
        check_truncated(tap, a, tmp)
        check_maps(tap, a, tmp)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
