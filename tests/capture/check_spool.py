#!/usr/bin/env python3
"""End-to-end tests of the spool's back-pressure, growth and backtrace sampling (TAP).

cap_storm makes exactly N malloc/free pairs on each of T threads, malloc i asking for
16 + (i * 37) % 1000 bytes, and nothing else the capture records on those threads. Checked:

- with the default options (backtraces, 64 MiB spool, --when-full=wait), 8 threads in a
  storm: nothing dropped, every thread's stream holds exactly its 2N events, the malloc and
  free counts of summary.txt are exactly the program's; the same in-process on a 1 MiB spool;
- --when-full=drop (and TFS_WHEN_FULL=drop) drops, counts and says so, and the trace opens;
- the bounded wait: with the recorder stopped, the program still runs to its end, its
  threads give up waiting, the drops are counted and said (summary line, metadata, stderr);
- every spool starts small: a traced shell's own spool holds under 1 MiB, and a traced
  program's peak RSS is within a few MiB of its untraced one (the 64 MiB are a cap);
- sampling: --sample=N, --sample-bytes=N and TFS_SAMPLE_BYTES give a backtrace to exactly
  the allocations the rule names (the count, or the bytes, of the thread crossing a multiple
  of N) and stack -1 to the others, in a forked process too; metadata and summary.txt say so.

  check_spool.py --tracefs T --storm S --lib L
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

CLEAN = ("TFS_CAPTURE", "TFS_OUTPUT", "TFS_SPOOL", "TFS_TIMING", "TFS_TRACE", "TFS_SPOOL_MB",
         "TFS_WHEN_FULL", "TFS_SAMPLE", "TFS_SAMPLE_BYTES", "TFS_WAIT_LIMIT_MS",
         "TFS_BACKTRACE_DEPTH", "LD_PRELOAD")

SUMMARY_RE = re.compile(
    rb"^tracefs: \S+: (?P<events>\d+) events, .*; (?P<dropped>\d+) dropped"
    rb"(?:, (?P<gave_up>\d+) waits? for a free chunk gave up)?"
    rb"(?:; threads waited (?P<waited>[\d.]+) s in all for the recorder)?$", re.M)


def run(cmd, env=None, timeout=600):
    e = {k: v for k, v in os.environ.items() if k not in CLEAN}
    e.update(env or {})
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def size(i):
    return 16 + (i * 37) % 1000


class Trace:
    def __init__(self, tracefs, path):
        self.tracefs, self.path = tracefs, path
        rc, out, err = run([tracefs, "info", "--json", path])
        if rc != 0:
            raise RuntimeError("info failed: %s" % err.decode(errors="replace"))
        self.info = json.loads(out)

    def meta(self, key):
        return self.info.get("meta", {}).get(key)

    def streams(self, rank=0):
        return {s["thread"]: s["events"] for s in self.info["streams"] if s["rank"] == rank}

    def cat(self, vpath):
        rc, out, err = run([self.tracefs, "cat", self.path, vpath])
        if rc != 0:
            raise RuntimeError("cat %s: %s" % (vpath, err.decode(errors="replace")))
        return out.decode()

    def kind_counts(self):
        """Event kind -> count, from summary.txt."""
        counts = {}
        for line in self.cat("summary.txt").splitlines():
            m = re.match(r"kind\s+(\d+)\s+(?:\d+\s+\d+|-\s+-)\s+\d+\s+(\S+)$", line)
            if m:
                counts[m.group(2)] = int(m.group(1))
        return counts

    def mallocs(self, thread, rank=0):
        """(size, has a real stack) of each malloc of @thread, in order."""
        out = []
        for line in self.cat("ranks/%d/threads/%d/trace.txt" % (rank, thread)).splitlines():
            m = re.search(r" malloc\(size=(\d+), id=\d+, stack=(stack#\d+|-1)\)", line)
            if m:
                out.append((int(m.group(1)), m.group(2) != "-1"))
        return out

    def verify(self):
        return run([self.tracefs, "verify", self.path])


def worker_threads(t, n_threads, n, rank=0):
    """The streams of the storm's threads: the ones of exactly 2n events."""
    return sorted(th for th, ev in t.streams(rank).items() if ev == 2 * n)


def test_storm_default(tap, args, work, n=300000, threads=8):
    """The issue's case: 8 threads allocating with backtraces, default options."""
    out = os.path.join(work, "storm.trace")
    rc, sout, serr = run([args.tracefs, "record", "-o", out, "--", args.storm, str(n),
                          str(threads)])
    m = SUMMARY_RE.search(serr)
    if not tap.ok(rc == 0 and sout == b"storm %d x %d done\n" % (threads, n) and m,
                  "storm, %d threads x %d, default options: runs" % (threads, n), serr):
        return
    tap.diag(m.group(0).decode())
    t = Trace(args.tracefs, out)
    tap.ok(m.group("dropped") == b"0" and t.meta("dropped_events") == 0 and
           t.meta("when_full") == "wait" and t.meta("backtrace_sampling") == "all",
           "storm, default options: nothing dropped; metadata when_full wait, sampling all",
           (m.group(0), t.info.get("meta")))
    streams = t.streams()
    tap.ok(len(worker_threads(t, threads, n)) == threads and len(streams) == threads + 1,
           "storm: each of the %d threads' streams holds exactly its %d events" %
           (threads, 2 * n), streams)
    main = t.cat("ranks/0/threads/0/trace.txt")
    main_malloc = len(re.findall(r" malloc\(", main))
    main_free = len(re.findall(r" free\(", main))
    counts = t.kind_counts()
    tap.ok(counts.get("malloc", 0) - main_malloc == threads * n and
           counts.get("free", 0) - main_free == threads * n,
           "storm: summary.txt counts exactly the program's %d mallocs and frees" % (threads * n),
           (counts, main_malloc, main_free))


def test_storm_inprocess(tap, args, work, n=100000, threads=4):
    """In-process: the consumer thread of the program itself, a 1 MiB spool."""
    out = os.path.join(work, "storm-inproc.trace")
    rc, sout, serr = run([args.storm, str(n), str(threads)],
                         env={"LD_PRELOAD": args.lib, "TFS_TRACE": "alloc", "TFS_OUTPUT": out,
                              "TFS_SPOOL_MB": "1"})
    if not tap.ok(rc == 0 and os.path.exists(out) and b"dropped" not in serr,
                  "in-process storm on a 1 MiB spool: runs, nothing said dropped", serr):
        return
    t = Trace(args.tracefs, out)
    tap.ok(t.meta("dropped_events") == 0 and t.meta("when_full") == "wait" and
           t.meta("capture") == "in-process" and
           len(worker_threads(t, threads, n)) == threads,
           "in-process storm: nothing dropped, each thread's %d events" % (2 * n),
           (t.info.get("meta"), t.streams()))


def test_drop_policy(tap, args, work, n=200000, threads=4):
    """--when-full=drop, the recorder stopped: the spool fills for certain, nobody waits."""
    out = os.path.join(work, "drop.trace")
    rc, sout, serr = run([args.tracefs, "record", "--when-full=drop", "--spool-size=1", "-o",
                          out, "--", args.storm, str(n), str(threads), "stop"])
    m = SUMMARY_RE.search(serr)
    if not tap.ok(rc == 0 and sout == b"storm %d x %d done\n" % (threads, n) and m,
                  "--when-full=drop, recorder stopped: the program runs to its end", serr):
        return
    tap.diag(m.group(0).decode())
    t = Trace(args.tracefs, out)
    dropped = int(m.group("dropped"))
    kept = sum(ev for th, ev in t.streams().items() if th != 0)
    tap.ok(dropped > 0 and t.meta("dropped_events") == dropped and
           t.meta("when_full") == "drop",
           "--when-full=drop: drops counted, the same in the summary line and the metadata "
           "(when_full drop)", (m.group(0), t.info.get("meta")))
    tap.ok(kept < 2 * n * threads <= kept + dropped and not m.group("waited") and
           not m.group("gave_up") and b"dropping events" not in serr,
           "--when-full=drop: the threads' events kept and dropped add up, nobody waited",
           (kept, dropped, serr))
    rc, _, err = t.verify()
    tap.ok(rc == 0, "--when-full=drop: the trace verifies", err)
    # in-process
    out = os.path.join(work, "drop-inproc.trace")
    rc, _, serr = run([args.storm, str(n), str(threads)],
                      env={"LD_PRELOAD": args.lib, "TFS_TRACE": "alloc", "TFS_OUTPUT": out,
                           "TFS_SPOOL_MB": "1", "TFS_WHEN_FULL": "drop"})
    t = Trace(args.tracefs, out) if rc == 0 and os.path.exists(out) else None
    dropped = int(t.meta("dropped_events")) if t else -1
    said = re.search(rb"(\d+) events dropped \(spool full\)", serr)
    tap.ok(t and t.meta("when_full") == "drop" and
           (int(said.group(1)) == dropped if said else dropped == 0),
           "TFS_WHEN_FULL=drop in-process: metadata when_full drop, drops said as counted",
           (serr, t.info.get("meta") if t else None))


def test_bounded_wait(tap, args, work, n=200000, threads=4):
    """The recorder stopped while the program fills its spool (default policy and wait
    limit): the threads wait, give up, drop; the program ends; all of it is said."""
    out = os.path.join(work, "stalled.trace")
    rc, sout, serr = run([args.tracefs, "record", "--spool-size=1", "-o", out, "--",
                          args.storm, str(n), str(threads), "stop"])
    m = SUMMARY_RE.search(serr)
    if not tap.ok(rc == 0 and sout == b"storm %d x %d done\n" % (threads, n) and m,
                  "recorder stopped, --when-full=wait: the program runs to its end", serr):
        return
    tap.diag(m.group(0).decode())
    t = Trace(args.tracefs, out)
    dropped = int(m.group("dropped"))
    tap.ok(dropped > 0 and t.meta("dropped_events") == dropped and
           t.meta("when_full") == "wait" and m.group("gave_up") and m.group("waited"),
           "recorder stopped: waits gave up, drops counted in the summary line and the "
           "metadata", (m.group(0), t.info.get("meta")))
    said = re.findall(rb"tracefs: process \d+: the consumer freed no chunk of the full "
                      rb"spool in 5000 ms: dropping events while it frees none", serr)
    tap.ok(len(said) == 1, "recorder stopped: the program says once that it drops", serr)
    rc, _, err = t.verify()
    tap.ok(rc == 0, "recorder stopped: the trace verifies", err)


def test_small_spool(tap, args, work):
    """A spool costs what it holds: the first process's starts at 256 KiB (not 64 MiB)."""
    rc, sout, serr = run([args.tracefs, "record", "-o", os.path.join(work, "sh.trace"), "--",
                          "sh", "-c", 'stat -c "%b %B" "$TFS_SPOOL"'])
    blocks = sout.split()
    held = int(blocks[0]) * int(blocks[1]) if rc == 0 and len(blocks) == 2 else -1
    tap.ok(0 < held < 1 << 20, "the traced shell's spool holds %d bytes (< 1 MiB)" % held,
           (sout, serr))
    status = "grep VmHWM /proc/self/status"
    rc, plain, _ = run(["sh", "-c", "exec " + status])
    rc2, traced, serr = run([args.tracefs, "record", "-o", os.path.join(work, "grep.trace"),
                             "--", "sh", "-c", "exec " + status])
    kb = [int(re.search(rb"(\d+) kB", o).group(1)) if re.search(rb"(\d+) kB", o) else -1
          for o in (plain, traced)]
    tap.diag("peak RSS of grep: untraced %d KiB, traced %d KiB" % tuple(kb))
    tap.ok(rc == 0 and rc2 == 0 and kb[0] > 0 and kb[1] - kb[0] < 24 << 10,
           "a traced program's peak RSS is within 24 MiB of its untraced one (spool 64 MiB)",
           (kb, serr))


def expect_sampled(sizes, every, by_bytes):
    """The rule of spool_i.h: the thread's count (or bytes) crosses a multiple of every."""
    total, out = 0, []
    for s in sizes:
        before, total = total, total + (s if by_bytes else 1)
        out.append(total // every != before // every)
    return out


def check_sampled(tap, t, n, threads, every, by_bytes, what, rank=0):
    workers = worker_threads(t, threads, n, rank)
    good = len(workers) == threads
    got_n = []
    for th in workers:
        got = t.mallocs(th, rank)
        sizes = [s for s, _ in got]
        want = expect_sampled(sizes, every, by_bytes)
        got_n.append(sum(st for _, st in got))
        good &= sizes == [size(i) for i in range(n)] and [st for _, st in got] == want
    tap.ok(good and got_n and all(g > 0 for g in got_n),
           "%s: exactly the allocations the rule names have a stack (%s of %d per thread), "
           "the others -1" % (what, got_n, n), (workers, got_n))


def test_sampling(tap, args, work, n=20000, threads=2):
    cases = (("--sample=100", 100, False, "1 in 100 allocations (per thread)"),
             ("--sample-bytes=4k", 4096, True, "1 per 4096 bytes allocated (per thread)"))
    for opt, every, by_bytes, said in cases:
        out = os.path.join(work, "sampled.trace")
        rc, _, serr = run([args.tracefs, "record", opt, "-o", out, "--", args.storm, str(n),
                           str(threads)])
        if not tap.ok(rc == 0 and b" 0 dropped" in serr, "record %s: runs" % opt, serr):
            continue
        t = Trace(args.tracefs, out)
        check_sampled(tap, t, n, threads, every, by_bytes, "record " + opt)
        summary = t.cat("summary.txt")
        folded = t.cat("ranks/0/allocs.folded")
        tap.ok(t.meta("backtrace_sampling") == said and
               "# allocation backtraces sampled: %s;" % said in summary and
               re.search(r"^\[not sampled\] \d+$", folded, re.M),
               "record %s: metadata, summary.txt and allocs.folded say sampled" % opt,
               (t.meta("backtrace_sampling"), summary[:400], folded[-200:]))
    out = os.path.join(work, "sampled-inproc.trace")
    rc, _, serr = run([args.storm, str(n), str(threads)],
                      env={"LD_PRELOAD": args.lib, "TFS_TRACE": "alloc", "TFS_OUTPUT": out,
                           "TFS_SAMPLE_BYTES": "4k"})
    if tap.ok(rc == 0 and os.path.exists(out), "in-process TFS_SAMPLE_BYTES=4k: runs", serr):
        t = Trace(args.tracefs, out)
        check_sampled(tap, t, n, threads, 4096, True, "in-process TFS_SAMPLE_BYTES=4k")
        tap.ok(t.meta("backtrace_sampling") == cases[1][3],
               "in-process TFS_SAMPLE_BYTES=4k: metadata says sampled", t.info.get("meta"))
    # not sampled: every allocation has its backtrace, nothing says sampled
    out = os.path.join(work, "unsampled.trace")
    rc, _, serr = run([args.tracefs, "record", "-o", out, "--", args.storm, "2000", "1"])
    t = Trace(args.tracefs, out) if rc == 0 else None
    ok = t is not None and t.meta("backtrace_sampling") == "all"
    if ok:
        got = t.mallocs(worker_threads(t, 1, 2000)[0])
        ok = len(got) == 2000 and all(st for _, st in got) and \
            "sampled" not in t.cat("summary.txt")
    tap.ok(ok, "without sampling: every allocation has its stack, nothing says sampled", serr)
    # a forked process samples by the same rule, in a spool of its own
    out = os.path.join(work, "sampled-fork.trace")
    rc, _, serr = run([args.tracefs, "record", "--sample=10", "-o", out, "--", "sh", "-c",
                       '"$0" 2000 1; echo', args.storm])
    if tap.ok(rc == 0 and os.path.exists(out), "record --sample=10 of a shell: runs", serr):
        t = Trace(args.tracefs, out)
        ranks = sorted({s["rank"] for s in t.info["streams"]})
        rank = next((r for r in ranks if worker_threads(t, 1, 2000, r)), None)
        if tap.ok(rank is not None and rank > 0, "the storm is a rank of its own", ranks):
            check_sampled(tap, t, 2000, 1, 10, False, "a forked and exec'd process", rank)


def test_usage(tap, args, work):
    for opts, what in ((["--when-full=sometimes"], "--when-full=sometimes"),
                       (["--sample=0"], "--sample=0"),
                       (["--sample-bytes=12q"], "--sample-bytes=12q"),
                       (["--sample=10", "--sample-bytes=10"], "both --sample options")):
        rc, _, err = run([args.tracefs, "record"] + opts + ["--", "true"])
        tap.ok(rc == 2 and err.count(b"\n") == 1, "record %s: usage error" % what, err)


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--tracefs", "--storm", "--lib"):
        ap.add_argument(opt, required=True)
    ap.add_argument("--only", help="run only this test function (test_...)")
    args = ap.parse_args()
    for k in ("tracefs", "storm", "lib"):
        setattr(args, k, os.path.abspath(getattr(args, k)))
    tap = Tap()
    with tempfile.TemporaryDirectory(prefix="tfs-spool.") as work:
        for test in (test_usage, test_small_spool, test_sampling, test_drop_policy,
                     test_bounded_wait, test_storm_inprocess, test_storm_default):
            if args.only and test.__name__ != args.only:
                continue
            try:
                test(tap, args, work)
            except Exception as e:  # a crash of the checker is a failure, not an abort
                tap.ok(False, "%s raised %s: %s" % (test.__name__, type(e).__name__, e))
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
