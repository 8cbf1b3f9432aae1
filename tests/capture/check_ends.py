#!/usr/bin/env python3
"""How traced processes end, and what they are called (cap_ends.c under `tracefs record`).

- A program killed by a signal (abort, a segfault, SIGKILL of itself): `tracefs record`
  saves the trace and dies of the same signal, so Python's returncode is the untraced one;
  with cores on, the program's end says `core dumped` and tracefs dumps none of its own.
- A fatal signal is a `fatal_signal` event with the signal, code and fault address, whose
  backtrace (backtraces.txt) ends in the faulting function; SIGKILL leaves none.
- A program catching its own faults (sigsetjmp/siglongjmp) behaves as untraced: the same
  output (its signal action and alternate stack as it set them) and exit status; its
  sigaction calls are recorded, the faults it caught are not fatal_signal events.
- Every rank of a fork tree has its directory (ranks/<r>, `tracefs ls`, info.json's ranks),
  one that recorded no event too, with empty views and its process. Every rank has its end: children reaped by their parent (waitpid, wait,
  waitid) with an exit status, _exit, a signal; an orphan reaped by the recorder; a child
  reaped inside libc (system()) has an end "unknown: <why>" and end_known false.
- An exec's argv is whole up to 8192 bytes, and cut with a visible ...[+N bytes] mark past.
- The recorded command line (metadata cmdline) is whole, 10,000 bytes of argument included;
  the name of a descriptor inherited open (read from /proc) is cut at 900 bytes with the
  same visible mark.
- The frees and mallocs of a program's thread-specific-data destructors at thread exit
  (joined and detached threads, destructors setting a value again) are in the trace; those
  of glibc's last round, after the capture's own teardown, are counted as dropped.
- trace.json names processes `<program> (pid N)` (the program exec'd last) and threads
  `<name> (thread N)` as the program named them; info.json lists each rank's program, pid,
  parent rank and end; a recording of one process has its ppid (the recorder) too.
Output is TAP.

  check_ends.py --tracefs T --ends CAP_ENDS
"""

import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

ARGV_LIMIT = 8192  # capture/calls_i.h CALL_MAX_ARGV, as README.md documents it
STR_LIMIT = 900  # capture/calls_i.h CALL_MAX_STR: a string argument, as capture.h says


def run(cmd, env=None):
    e = dict(os.environ)
    for k in ("TFS_CAPTURE", "TFS_OUTPUT", "TFS_SPOOL", "TFS_TIMING", "TFS_TRACE"):
        e.pop(k, None)
    e.update(env or {})
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e,
                       stdin=subprocess.DEVNULL, timeout=300)
    return p.returncode, p.stdout, p.stderr


class Trace:
    def __init__(self, tracefs, path):
        self.tracefs, self.path = tracefs, path
        rc, out, err = run([tracefs, "info", "--json", path])
        if rc != 0:
            raise RuntimeError(err.decode(errors="replace"))
        self.info = json.loads(out)

    def cat(self, vpath):
        rc, out, _ = run([self.tracefs, "cat", self.path, vpath])
        return out.decode(errors="replace") if rc == 0 else ""

    def events(self, rank, name=None):
        out = []
        for s in self.info["streams"]:
            if s["rank"] != rank:
                continue
            for line in self.cat("ranks/%d/threads/%d/events.jsonl" % (rank, s["thread"])) \
                    .splitlines():
                e = json.loads(line)
                if name is None or e["name"] == name:
                    out.append(e)
        return out

    def chrome_meta(self):
        return [e for e in json.loads(self.cat("trace.json")) if e.get("ph") == "M"]

    def stack(self, rank, sid):
        """The frame lines of stack#sid in ranks/<rank>/backtraces.txt, outermost first."""
        text = self.cat("ranks/%d/backtraces.txt" % rank)
        m = re.search(r"^stack#%d\n((?:  .*\n?)*)" % sid, text, re.M)
        return [line.strip() for line in m.group(1).splitlines()] if m else []


def record(a, work, name, args):
    out = os.path.join(work, name + ".trace")
    rc, sout, serr = run([a.tracefs, "record", "-o", out, "--", a.ends] + args,
                         env={"TFS_SPOOL": os.path.join(work, "spools", name)})
    return rc, out, sout, serr


def untraced(a, args):
    return run([a.ends] + args)


def stack_id(e):
    """The backtrace of event @e (events.jsonl prints a symbolic id as "stack#N", or null)."""
    s = e["args"].get("stack")
    return int(s[len("stack#"):]) if s else None


def same_end(got, want):
    """@got is the end @want, with or without the core dump the system chose."""
    return got in (want, want + ", core dumped")


def signal_deaths(tap, a, work):
    for mode, sig in (("abort", signal.SIGABRT), ("segv", signal.SIGSEGV),
                      ("kill9", signal.SIGKILL)):
        plain, _, _ = untraced(a, [mode])
        rc, out, _, serr = record(a, work, mode, [mode])
        name = signal.Signals(sig).name
        tap.ok(plain == -sig and rc == plain,
               "%s: returncode %d traced as untraced (%d)" % (mode, rc, plain), serr)
        ok = os.path.exists(out) and run([a.tracefs, "verify", out])[0] == 0
        tap.ok(ok and ("killed by signal %d (%s)" % (sig, name)).encode() in serr,
               "%s: the trace is saved, verifies, and the summary names %s" % (mode, name),
               serr)
        if not ok:
            continue
        t = Trace(a.tracefs, out)
        ev = t.events(0, "fatal_signal")
        if sig == signal.SIGKILL:
            tap.ok(ev == [], "kill9: SIGKILL leaves no fatal_signal event", ev)
            continue
        tap.ok(len(ev) == 1 and ev[0]["args"]["signo"] == sig,
               "%s: one fatal_signal event, signal %d" % (mode, sig), ev)
        if not ev:
            continue
        args = ev[0]["args"]
        if mode == "segv":
            frames = t.stack(0, stack_id(ev[0]))
            tap.ok(args["code"] == 1 and args["addr"] == 0 and args["sender"] == 0 and
                   args["pc"] != 0,
                   "segv: SEGV_MAPERR at address 0, raised by the kernel, at a known pc", args)
            tap.ok(len(frames) >= 2 and re.fullmatch(r"crash_here \(.*cap_ends\.c:\d+\)",
                                                     frames[-1]) is not None and
                   frames[-2].startswith("main ("),
                   "segv: its backtrace ends in crash_here (cap_ends.c), called by main",
                   frames)
        else:
            pid = int(t.info["meta"]["pid"])
            tap.ok(args["code"] < 0 and args["sender"] == pid and args["addr"] == 0,
                   "abort: sent by the process itself (code %d, sender its pid)"
                   % args["code"], args)


def core_dump(tap, a, work):
    """With cores on, the program's end says `core dumped` and the one core is its own:
    tracefs dies of the signal without dumping one."""
    with open("/proc/sys/kernel/core_pattern") as f:
        pattern = f.read().strip()
    hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
    if pattern.startswith("|") or "/" in pattern or hard == 0:
        tap.skip("segv with cores on: the program's core, none of tracefs",
                 "cores go elsewhere here (core_pattern %r, hard limit %r)" % (pattern, hard))
        return
    d = tempfile.mkdtemp(dir=work)
    out = os.path.join(work, "core.trace")

    def cores_on():
        resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))

    p = subprocess.run([a.tracefs, "record", "-o", out, "--", a.ends, "segv"], cwd=d,
                       preexec_fn=cores_on, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300,
                       env=dict(os.environ, TFS_SPOOL=os.path.join(work, "spools", "core")))
    cores = [f for f in os.listdir(d) if f.startswith("core")]
    end = Trace(a.tracefs, out).info["meta"].get("end") if os.path.exists(out) else None
    tap.ok(p.returncode == -signal.SIGSEGV and
           end == "killed by signal 11 (SIGSEGV), core dumped" and len(cores) == 1,
           "segv with cores on: its end says core dumped, one core (the program's), "
           "tracefs dies of SIGSEGV", (p.returncode, end, cores, p.stderr[-500:]))
    shutil.rmtree(d)


def own_handler(tap, a, work):
    plain_rc, plain_out, _ = untraced(a, ["catch"])
    rc, out, sout, serr = record(a, work, "catch", ["catch"])
    tap.ok(rc == plain_rc == 4 and sout == plain_out and b"caught 11" in sout,
           "a program catching its own faults: same output and exit status as untraced",
           (rc, plain_rc, sout, plain_out, serr))
    tap.ok(b"before: default 1, flags 0\nalternate stack: none\n" in sout,
           "it sees the default action and no alternate stack, as untraced", sout)
    t = Trace(a.tracefs, out)
    acts = [e["args"] for e in t.events(0, "sigaction") if e["args"]["signo"] == 11]
    tap.ok([x["action"] for x in acts] == [0, 3, 0, 1, 0] and
           t.events(0, "fatal_signal") == [],
           "its sigaction calls are recorded (query, handler, query, SIG_DFL, query); the "
           "faults it caught are no fatal_signal", acts)


def by_pid(t):
    return {p["pid"]: p for p in t.info.get("processes", [])}


def fork_tree(tap, a, work):
    rc, out, sout, serr = record(a, work, "tree", ["tree"])
    pids = {m.group(1): int(m.group(2))
            for m in re.finditer(r"^([A-G]) (\d+)$", sout.decode(), re.M)}
    if not tap.ok(rc == 0 and len(pids) == 6, "fork tree: recorded, six children",
                  (rc, sout, serr)):
        return
    t = Trace(a.tracefs, out)
    procs = by_pid(t)
    want = {"A": "exited with status 3", "B": "exited with status 5",
            "C": "killed by signal 11 (SIGSEGV)", "D": "exited with status 0",
            "G": "exited with status 7", "E": "killed by signal 9 (SIGKILL)"}
    got = {k: procs.get(pid, {}).get("end") for k, pid in pids.items()}
    tap.ok(len(procs) == 7 and procs[int(t.info["meta"]["pid"])]["end"] ==
           "exited with status 0" and all(same_end(got[k], want[k]) for k in want) and
           all(p["end_known"] for p in procs.values()),
           "fork tree: every rank's end (waitpid, _exit, wait(NULL), an orphan the recorder "
           "reaps, waitid after SIGKILL)", (got, t.info.get("processes")))
    root = procs[int(t.info["meta"]["pid"])]["rank"]
    d_rank = procs.get(pids["D"], {}).get("rank")
    tap.ok(all(procs[pids[k]]["parent_rank"] == root for k in "ABCDE") and
           procs[pids["G"]]["parent_rank"] == d_rank and procs[pids["G"]]["ppid"] == pids["D"],
           "fork tree: each rank's parent rank (the orphan's is its forker, D)",
           t.info.get("processes"))
    c_rank = procs[pids["C"]]["rank"]
    ev = t.events(c_rank, "fatal_signal")
    tap.ok(len(ev) == 1 and ev[0]["args"]["signo"] == 11 and
           t.stack(c_rank, stack_id(ev[0]))[-1].startswith("crash_here ("),
           "fork tree: the crashing child's fatal_signal names crash_here", ev)
    waits = [e["args"] for e in t.events(root, "wait") if e["args"]["child"] > 0]
    tap.ok(sorted(w["child"] for w in waits) == sorted(pids[k] for k in "ABCDE"),
           "fork tree: the parent's wait calls are recorded with the child each reaped",
           waits)
    readme = t.cat("README.txt")
    line = re.search(r"^  rank %d  cap_ends, pid %d, started by rank %d: exited with "
                     r"status 7$" % (procs[pids["G"]]["rank"], pids["G"], d_rank), readme, re.M)
    tap.ok(line is not None, "README.txt lists the orphan with its pid, parent and end",
           readme[:3000])
    rank_dirs(tap, a, t, procs[pids["B"]])


def rank_dirs(tap, a, t, quiet):
    """Every rank counted has its directory, @quiet (a child that only _exit()ed) too."""
    n = t.info["n_ranks"]
    rc, out, err = run([a.tracefs, "ls", t.path, "ranks"])
    listed = sorted(int(line.split()[-1]) for line in out.decode().splitlines())
    tap.ok(rc == 0 and listed == list(range(n)) and
           [r["rank"] for r in t.info["ranks"]] == list(range(n)),
           "fork tree: `tracefs ls ranks` and info.json's ranks hold every rank counted, "
           "one without events too", (n, listed, t.info["ranks"], err))
    r = quiet["rank"]
    entry = [e for e in t.info["ranks"] if e["rank"] == r]
    rc, out, err = run([a.tracefs, "ls", t.path, "ranks/%d" % r])
    names = [line.split()[-1] for line in out.decode().splitlines()]
    heap = t.cat("ranks/%d/heap.txt" % r)
    tap.ok(rc == 0 and entry == [{"rank": r, "threads": []}] and
           {"trace.txt", "events.jsonl", "summary.txt", "heap.txt"} <= set(names) and
           t.events(r) == [] and t.cat("ranks/%d/trace.txt" % r) == "" and
           heap.startswith("# heap of rank %d (cap_ends (pid %d))" % (r, quiet["pid"])),
           "fork tree: the rank of a child that recorded nothing has its directory, empty "
           "views and its process", (rc, entry, names, err, heap[:200]))


def unknown_end(tap, a, work):
    rc, out, sout, serr = record(a, work, "system", ["system"])
    t = Trace(a.tracefs, out) if rc == 0 else None
    procs = t.info.get("processes", []) if t else []
    sh = [p for p in procs if p["rank"] > 0]
    tap.ok(rc == 0 and sout == b"system: exited 1, status 6\n" and len(sh) >= 1 and
           all(not p["end_known"] and p["end"].startswith("unknown: its parent reaped it "
                                                          "outside the recorded wait calls")
               for p in sh) and procs[0]["end_known"],
           "a child reaped inside libc (system()): its end is unknown, and says why",
           (rc, sout, serr, procs))


def exec_argv(tap, a, work):
    for n, cut in ((ARGV_LIMIT - 5 - 100, False), (ARGV_LIMIT - 5, False),
                   (ARGV_LIMIT - 4, True), (20000, True)):
        rc, out, _, serr = record(a, work, "exec%d" % n, ["exec", str(n)])
        t = Trace(a.tracefs, out) if rc == 0 else None
        ev = t.events(0, "exec") if t else []
        argv = ev[0]["args"]["argv"] if ev else ""
        total = len("true ") + n
        want = ("true " + "a" * n)[:ARGV_LIMIT] + \
            ("...[+%d bytes]" % (total - ARGV_LIMIT) if cut else "")
        tap.ok(len(ev) == 1 and argv == want,
               "exec with an argv of %d bytes: %s" % (
                   total, "cut at %d bytes with a visible mark" % ARGV_LIMIT if cut
                   else "whole"), (rc, serr, len(argv), argv[-40:]))
        if t and n == 20000:
            p = t.info.get("processes", [{}])[0]
            names = [e["args"]["name"] for e in t.chrome_meta()
                     if e["name"] == "process_name"]
            tap.ok(p.get("program") == "true" and p.get("images") == "cap_ends -> true" and
                   names == ["true (pid %s)" % t.info["meta"]["pid"]],
                   "the exec'd rank is named for the program it ran last, and says what ran "
                   "before", (p, names))


def long_names(tap, a, work):
    """A command line of 10,000 bytes and more kept whole; a descriptor inherited open on a
    path of 1,500 bytes and more named from /proc with its cut made visible."""
    d = os.path.join(work, "long")
    for i in range(7):
        d = os.path.join(d, "%d" % i + "d" * 220)
    os.makedirs(d)
    path = os.path.join(d, "f")
    with open(path, "w") as f:
        f.write("0123456789")
    fd = os.open(path, os.O_RDONLY)
    os.dup2(fd, 9, inheritable=True)
    os.close(fd)
    out = os.path.join(work, "long.trace")
    argv = [a.ends, "readfd", "9", "x" * 10000, "y"]
    e = dict(os.environ)
    for k in ("TFS_CAPTURE", "TFS_OUTPUT", "TFS_SPOOL", "TFS_TIMING", "TFS_TRACE"):
        e.pop(k, None)
    try:
        p = subprocess.run([a.tracefs, "record", "-o", out, "--"] + argv, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=e, stdin=subprocess.DEVNULL,
                           timeout=300, pass_fds=(9,))
    finally:
        os.close(9)
    if not tap.ok(p.returncode == 0 and p.stdout == b"readfd 10\n", "readfd: recorded",
                  p.stderr):
        return
    t = Trace(a.tracefs, out)
    cmdline = t.info["meta"].get("cmdline", "")
    tap.ok(cmdline == " ".join(argv),
           "the command line of %d bytes is recorded whole" % len(" ".join(argv)),
           (len(cmdline), cmdline[-40:]))
    want = path[:STR_LIMIT] + "...[+%d bytes]" % (len(path) - STR_LIMIT)
    named = [ev["args"]["path"] for ev in t.events(0, "fd_file") if ev["args"]["fd"] == 9]
    tap.ok(named == [want],
           "an inherited descriptor's name of %d bytes from /proc: cut at %d with a visible "
           "mark" % (len(path), STR_LIMIT), [n[-40:] for n in named])


def one_process_ppid(tap, a, work):
    """A recording of one process has its ppid, the recorder, as one of several does."""
    out = os.path.join(work, "one.trace")
    e = dict(os.environ)
    for k in ("TFS_CAPTURE", "TFS_OUTPUT", "TFS_SPOOL", "TFS_TIMING", "TFS_TRACE"):
        e.pop(k, None)
    p = subprocess.Popen([a.tracefs, "record", "-o", out, "--", a.ends, "readfd", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e,
                         stdin=subprocess.DEVNULL)
    _, serr = p.communicate(timeout=300)
    if not tap.ok(p.returncode == 0, "one process: recorded", serr):
        return
    t = Trace(a.tracefs, out)
    procs = t.info.get("processes", [])
    tap.ok(len(procs) == 1 and procs[0].get("ppid") == p.pid and
           t.info["meta"].get("ppid") == p.pid and procs[0].get("parent_rank") is None,
           "one process: info.json has its ppid, the recorder's pid %d, and no parent rank"
           % p.pid, (procs, t.info["meta"].get("ppid")))


def names(tap, a, work):
    rc, out, _, serr = record(a, work, "names", ["names"])
    if not tap.ok(rc == 0, "names: recorded", serr):
        return
    t = Trace(a.tracefs, out)
    meta = t.chrome_meta()
    procs = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    threads = {e["tid"]: e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    tap.ok(procs == {0: "cap_ends (pid %s)" % t.info["meta"]["pid"]},
           "trace.json: the process is `cap_ends (pid N)`", procs)
    tap.ok(threads == {0: "mainly (thread 0)", 1: "worker-1 (thread 1)",
                       2: "worker-2 (thread 2)"},
           "trace.json: threads named as the program named them (prctl, "
           "pthread_setname_np of itself and of another thread)", threads)
    sets = [(e["args"]["thread"], e["args"]["name"], e["args"]["result"])
            for e in t.events(0, "setname")]
    tap.ok(sorted(sets) == [("thread#0", "mainly", 0), ("thread#1", "worker-1", 0),
                           ("thread#2", "worker-2", 0)],
           "the naming calls are setname events", sets)
    p = t.info.get("processes", [{}])[0]
    tap.ok(p.get("program") == "cap_ends" and p.get("pid") == int(t.info["meta"]["pid"]) and
           p.get("parent_rank") is None and p.get("end") == "exited with status 0" and
           p.get("end_known") is True,
           "info.json: the rank's program, pid, parent and end", p)


TSD_THREADS = 40


def tsd_destructors(tap, a, work):
    """Frees and mallocs of the program's thread-specific-data destructors at thread exit."""
    n = TSD_THREADS
    for how in ("join", "detach", "rearm"):
        rc, out, sout, serr = record(a, work, "tsd-" + how, ["tsd", str(n), how])
        m = re.search(rb"tsd mallocs (\d+) frees (\d+)", sout)
        if not tap.ok(rc == 0 and m, "tsd %s: recorded" % how, (rc, sout, serr)):
            continue
        mallocs, frees = int(m.group(1)), int(m.group(2))
        t = Trace(a.tracefs, out)
        made, freed = {}, []
        for e in t.events(0):
            if e["name"] == "malloc" and e["args"]["size"] in (1000, 1001, 1002):
                made[e["args"]["id"]] = e["args"]["size"]
            elif e["name"] == "free" and e["args"].get("id"):
                freed.append(e["args"]["id"])
        ours = [i for i in freed if i in made]
        dropped = t.info["meta"]["dropped_events"]
        if how != "rearm":
            tap.ok(mallocs == 2 * n and frees == 2 * n and len(made) == mallocs and
                   sorted(ours) == sorted(made),
                   "tsd %s: every block of the program's, made by its threads or in their "
                   "destructors, is freed in the trace, as many as it made" % how,
                   (mallocs, frees, len(made), len(ours)))
            heap = t.cat("ranks/0/heap.txt")
            leaks = heap.split("# leaked", 1)[-1].split("\n# ", 1)[0]
            tap.ok("tsd_worker" not in leaks and "tsd_dtor" not in leaks and
                   "tsd_alloc" not in leaks,
                   "tsd %s: heap.txt leaks nothing of the program's" % how, leaks)
            if how == "join":
                tap.ok(dropped == 0, "tsd join: nothing dropped", dropped)
            continue
        # glibc's last round runs after the capture's state is torn down: each thread's
        # free and malloc there are counted as dropped, none vanishes
        tap.ok(mallocs == 5 * n and frees == 4 * n and len(made) == 4 * n and
               len(ours) == 3 * n and dropped == 2 * n and
               len(made) + len(ours) + dropped == mallocs + frees,
               "tsd rearm: the destructors' calls of the rounds before the last are in "
               "the trace, those of the last counted as dropped",
               (mallocs, frees, len(made), len(ours), dropped))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--ends", required=True)
    a = ap.parse_args()
    a.tracefs, a.ends = os.path.abspath(a.tracefs), os.path.abspath(a.ends)
    tap = Tap()
    work = tempfile.mkdtemp(prefix="tfs-ends-")
    os.mkdir(os.path.join(work, "spools"))
    for case in (signal_deaths, core_dump, own_handler, fork_tree, unknown_end, exec_argv,
                 long_names, one_process_ppid, names, tsd_destructors):
        try:
            case(tap, a, work)
        except Exception as e:  # a crash of the checker is a failure, not an abort
            tap.ok(False, "%s: the checker ran to its end" % case.__name__, repr(e))
    left = os.listdir(os.path.join(work, "spools"))
    tap.ok(left == [], "no spool left behind", left)
    shutil.rmtree(work)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
