#!/usr/bin/env python3
"""Process following in `tracefs record`: every forked or spawned process is a rank of its
own (rank 0 the program, then along the fork tree) with its pid, ppid and end in the metadata;
an exec'd image goes on in its rank after an exec event, with new thread ids; a child that
crashes keeps its events; vfork, `sh -c` and system() are followed; two recordings with
--timing=none serve the same bytes; no spool is left behind. Shared memory follows the
processes alive: 500 short children in turn are 502 ranks with their events while the
spools' allocated bytes stay under a few spools' worth; a process that cannot make a spool
(a spool path too long) says so, is counted in the recorder's warning, and runs on, as do
its own children. A statically linked launcher's children are ranks under their own pids,
rank 0 the first to take the first spool, the launcher (no rank) their parent; under a
traced program, that program is. A child that execs a static program is named after it,
as not traced. A process given the pid of an ended one whose spool is
still unread (clone3 with set_tid, or fork after setting ns_last_pid: root only) records
into a spool of its own, and the ended one keeps its events. Output is TAP.

  check_fork.py --tracefs T --fork CAP_FORK
"""

import argparse
import json
import os
import platform
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402


FORK_RE = re.compile(rb"fork\(errno=0\) = \d+ *\n")
# a wait for a child: the pid waited for, the child reaped, the result
WAIT_RE = re.compile(rb"wait\(pid=\d+, (options=\S+) child=\d+, (.*)\) = \d+ *\n")


ALLOC_CALLS = ("malloc", "calloc", "realloc", "free", "aligned_alloc", "posix_memalign",
               "memalign")


def without_pids(text):
    """@text (a rank's trace.txt) with the children's pids, which vary, as PID."""
    text = FORK_RE.sub(b"fork(errno=0) = PID\n", text)
    return WAIT_RE.sub(rb"wait(pid=PID, \1 child=PID, \2) = PID\n", text)


def run(cmd, cwd=None, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=300, cwd=cwd,
                       env=dict(os.environ, **env) if env else None)
    return p.returncode, p.stdout, p.stderr


class Trace:
    def __init__(self, tracefs, path):
        self.tracefs, self.path = tracefs, path
        rc, out, err = run([tracefs, "info", "--json", path])
        if rc != 0:
            raise RuntimeError(err.decode())
        self.info = json.loads(out)
        self.meta = self.info.get("meta", {})

    def cat(self, vpath):
        rc, out, err = run([self.tracefs, "cat", self.path, vpath])
        return out if rc == 0 else b""

    def events(self, rank, allocs=False):
        """(thread, name, args) of every event of @rank but allocations (unless @allocs), in
        stream order."""
        out = []
        for s in sorted(self.info["streams"], key=lambda s: s["thread"]):
            if s["rank"] != rank:
                continue
            data = self.cat("ranks/%d/threads/%d/events.jsonl" % (rank, s["thread"]))
            for line in data.decode().splitlines():
                e = json.loads(line)
                if e["name"] == "fd_file" and e["args"]["path"].startswith("/tmp/bash_jobs"):
                    continue
                if allocs or e["name"] not in ALLOC_CALLS:
                    out.append((s["thread"], e["name"], e["args"]))
        return out

    def rank_meta(self, key, rank):
        best, best_r = self.meta.get(key), -1
        for k, v in self.meta.items():
            if k.startswith(key + ".rank") and k[len(key) + 5:].isdigit():
                r = int(k[len(key) + 5:])
                if best_r < r <= rank:
                    best, best_r = v, r
        return best


def heap_by_image(events):
    """From (thread, name, args) in the order the calls took effect: the peak live bytes,
    an exec ending every block live (the image replaced) unless an exec_failed of its
    thread follows it, and (bytes, blocks) left live at the end and at the execs, blocks
    known by allocation id."""
    def failed(i):
        th = events[i][0]
        for t, name, _ in events[i + 1:]:
            if t == th and name in ("exec", "exec_failed"):
                return name == "exec_failed"
        return False

    live, peak, at_exec = {}, 0, [0, 0]
    for i, (_, name, a) in enumerate(events):
        if name == "exec" and failed(i):
            continue
        if name == "exec":
            at_exec[0] += sum(live.values())
            at_exec[1] += len(live)
            live = {}
            continue
        if name == "free":
            live.pop(a.get("id"), None)
            continue
        if name == "realloc" and a.get("freed"):
            live.pop(a["freed"], None)
        if name in ("malloc", "calloc", "realloc", "aligned_alloc", "memalign",
                    "posix_memalign") and a.get("id"):
            live[a["id"]] = a.get("bytes", a.get("size", 0))
            peak = max(peak, sum(live.values()))
    return {"peak": peak, "leaked": (sum(live.values()), len(live)), "exec": tuple(at_exec)}


def opens(events, path):
    return [e for e in events if e[1] == "open" and e[2].get("path") == path]


def writes(events):
    return [e for e in events if e[1] == "write"]


def record(tap, a, work, name, *args, timing=None, no_aslr=False, spool=None, cwd=None):
    """Record with the spools in work/spools (not /dev/shm, which other runs share)."""
    out = os.path.join(work, name + ".trace")
    cmd = [a.tracefs, "record", "-o", out] + (["--timing=" + timing] if timing else []) + \
        ["--"] + list(args)
    if no_aslr:  # buffers outside the heap are recorded by address
        cmd = ["setarch", platform.machine(), "-R"] + cmd
    rc, sout, serr = run(cmd, env={"TFS_SPOOL": spool or os.path.join(work, "spools", name)},
                         cwd=cwd)
    return rc, out, sout, serr


def spooled_bytes(d):
    """Bytes allocated to the files under @d (what the spools there hold of memory or disk:
    each recording keeps them in a directory of its own there)."""
    total = 0
    for top, _, files in os.walk(d):
        for f in files:
            try:
                total += os.stat(os.path.join(top, f)).st_blocks * 512
            except FileNotFoundError:  # removed meanwhile
                pass
    return total


def record_sampling(a, work, name, spool_dir, *args):
    """record() with the spools in @spool_dir, sampling their allocated bytes meanwhile."""
    out = os.path.join(work, name + ".trace")
    cmd = [a.tracefs, "record", "-o", out, "--"] + list(args)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL,
                         env=dict(os.environ, TFS_SPOOL=os.path.join(spool_dir, name)))
    peak = 0
    while p.poll() is None:
        peak = max(peak, spooled_bytes(spool_dir))
        time.sleep(0.01)
    sout, serr = p.communicate()
    return p.returncode, out, sout, serr, peak


def many_children(tap, a, work):
    """500 short children in turn: all recorded, memory held by the live ones only."""
    n = 500
    # on tmpfs when there is one: where the spools normally are, and the memory measured
    base = "/dev/shm" if os.path.isdir("/dev/shm") else work
    spool_dir = tempfile.mkdtemp(prefix="tfs-fork-many-", dir=base)
    try:
        rc, out, _, serr, peak = record_sampling(
            a, work, "many", spool_dir, "sh", "-c", "for i in $(seq %d); do /bin/true; done" % n)
        left = os.listdir(spool_dir)
    finally:
        shutil.rmtree(spool_dir, ignore_errors=True)
    t = Trace(a.tracefs, out) if rc == 0 else None
    ranks = t.info["n_ranks"] if t else 0
    # sh, the $(seq) subshell, one per /bin/true: each exec'd with its events
    execs = [r for r in range(ranks) if any(e[1] == "exec" and e[2].get("path") == "/bin/true"
                                           for e in t.events(r))] if t else []
    tap.ok(rc == 0 and ranks == n + 2 and len(execs) == n and b"unreadable" not in serr and
           b"not recorded" not in serr and b"not in the trace" not in serr,
           "%d children in turn: %d ranks, each /bin/true's with its exec event, no warning"
           % (n, n + 2), (rc, ranks, len(execs), serr[-2000:]))
    # before, every child kept a whole (64 MiB) spool until the end: 500 of them, 32 GiB
    bound = 4 * 64 << 20
    tap.ok(0 < peak < bound and left == [],
           "%d children: the spools' peak is %d MiB (under %d MiB: the first process's "
           "spool and the live children's), none left" % (n, peak >> 20, bound >> 20),
           (peak, left))


def address_limit(tap, a, work):
    """60 children under a 2 GiB address-space limit: room for about 30 spools at once."""
    n = 60
    out = os.path.join(work, "aslimit.trace")

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    p = subprocess.run([a.tracefs, "record", "-o", out, "--", "sh", "-c",
                        "for i in $(seq %d); do /bin/true; done" % n],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                       timeout=300, preexec_fn=limit,
                       env=dict(os.environ, TFS_SPOOL=os.path.join(work, "spools", "aslimit")))
    ranks = Trace(a.tracefs, out).info["n_ranks"] if p.returncode == 0 else 0
    # before, the recorder kept every spool mapped: the later ones were skipped, unreadable
    tap.ok(p.returncode == 0 and ranks == n + 2 and b"unreadable" not in p.stderr,
           "%d children under a 2 GiB address-space limit: all %d ranks, none skipped"
           % (n, n + 2), (p.returncode, ranks, p.stderr[-2000:]))


def nested(tap, a, work):
    """A `tracefs record` the recorded program runs makes its own recording of its command
    (it recorded nothing, said so and exited 0 without a trace: the capture gave the exec'd
    command the outer recording's spool in place of the one the inner recorder set)."""
    d = tempfile.mkdtemp(dir=work)
    with open(os.path.join(d, "f"), "w") as fh:
        fh.write("x")
    inner = os.path.join(d, "inner.trace")
    rc, out, sout, serr = record(tap, a, work, "nested", a.tracefs, "record", "-o", inner,
                                 "--", "cat", os.path.join(d, "f"))
    inner_opens = opens(Trace(a.tracefs, inner).events(0), d + "/f") \
        if os.path.exists(inner) else []
    t = Trace(a.tracefs, out) if rc == 0 else None
    outer_opens = [r for r in range(t.info["n_ranks"]) if opens(t.events(r), d + "/f")] \
        if t else None
    tap.ok(rc == 0 and sout == b"x" and len(inner_opens) == 1 and outer_opens == [],
           "tracefs record run by a recorded program: its command's events are in its own "
           "trace, not the outer one", (rc, serr, inner_opens, outer_opens))


def launched(sout):
    """(launcher pid, its ppid, [child pids]) from cap_launch's lines in @sout."""
    launcher, children = (None, None), []
    for line in sout.decode(errors="replace").splitlines():
        w = line.split()
        if len(w) == 3 and w[0] == "launcher":
            launcher = (int(w[1]), int(w[2]))
        elif len(w) == 2 and w[0] == "child":
            children.append(int(w[1]))
    return launcher[0], launcher[1], children


def static_launcher(tap, a, work):
    """A statically linked launcher (cap_launch: the capture never loads in it) that forks 3
    children at once, each exec'ing a dynamic program: the first child to attach takes the
    first spool and is rank 0, under its own pid (not the launcher's, the pid the recorder
    started); the other two are ranks of their own too, with the launcher, which is no rank,
    as their parent, as rank 0's, not the child that took the first spool (they are its
    siblings). A traced program that spawns the same launcher: the children's parent is
    that program, their nearest traced ancestor, the launcher between them being no rank."""
    what = "a static launcher forking 3 children that exec a dynamic program"
    if not a.launcher:
        tap.skip(what, a.no_launcher or "no --launcher given")
        tap.skip("a traced program spawning a static launcher", a.no_launcher or "no --launcher")
        return
    rc, out, sout, serr = record(tap, a, work, "launcher", a.launcher, "3", "true")
    launcher, _, children = launched(sout)
    t = Trace(a.tracefs, out) if rc == 0 else None
    n = t.info["n_ranks"] if t else 0
    pids = [t.rank_meta("pid", r) for r in range(n)]
    ppids = [t.rank_meta("ppid", r) for r in range(n)]
    procs = t.info.get("processes", []) if t else []
    tap.ok(rc == 0 and n == 3 and len(children) == 3 and sorted(pids) == sorted(children),
           what + ": each child is a rank of its own, under its own pid",
           (rc, serr, sout, pids, t and t.meta))
    tap.ok(n == 3 and pids[0] in children and launcher not in pids,
           "rank 0 is the child that took the first spool, not the launcher the recorder "
           "started", (launcher, pids))
    tap.ok(n == 3 and ppids == [launcher] * 3 and not set(ppids) & set(pids) and
           [p.get("parent_rank") for p in procs] == [None] * 3,
           "every child's parent is the launcher (no rank), none is another's parent",
           (launcher, pids, ppids, procs))
    tap.ok(n == 3 and [t.rank_meta("images", r) for r in range(n)] == ["true"] * 3,
           "no child is said to have run another child's image", t and t.meta)

    # the launcher between a traced program and the processes it starts
    py = ("import os, sys\n_, st = os.waitpid(os.posix_spawn(%r, [%r, '2', 'true'], "
          "os.environ), 0)\nsys.exit(os.waitstatus_to_exitcode(st))\n"
          % (a.launcher, a.launcher))
    rc, out, sout, serr = record(tap, a, work, "launcher_spawned", sys.executable, "-c", py)
    launcher, launcher_ppid, children = launched(sout)
    t = Trace(a.tracefs, out) if rc == 0 else None
    n = t.info["n_ranks"] if t else 0
    pids = [t.rank_meta("pid", r) for r in range(n)]
    ppids = [t.rank_meta("ppid", r) for r in range(n)]
    tap.ok(rc == 0 and n == 3 and pids[0] == launcher_ppid and
           sorted(pids[1:]) == sorted(children) and ppids[1:] == [pids[0]] * 2,
           "a traced program spawning a static launcher: the launcher's children are ranks "
           "whose parent is the program (rank 0), their nearest traced ancestor",
           (rc, serr, sout, launcher, pids, ppids))


def static_exec(tap, a, work):
    """A traced child that execs a statically linked program (cap_launch: the capture never
    loads in it) is named after that program, not the one it forked from: its exec call
    names it, and its images say it was not traced; a child of the static program that
    execs a dynamic one names it among its images; a child whose exec failed keeps its name
    (it was named after the shell before)."""
    what = "a child exec'ing a statically linked program"
    if not a.launcher:
        tap.skip(what, a.no_launcher or "no --launcher given")
        return
    name = os.path.basename(a.launcher)
    rc, out, sout, serr = record(tap, a, work, "static_exec", "sh", "-c",
                                 "%s 1 true; /nonexistent/x; true" % a.launcher)
    launcher, _, children = launched(sout)
    t = Trace(a.tracefs, out) if rc == 0 else None
    procs = {p["pid"]: p for p in t.info.get("processes", [])} if t else {}
    st, gc = procs.get(launcher, {}), procs.get(children[0] if children else None, {})
    failed = [p for p in procs.values() if p["end"] == "exited with status 127"]
    tap.ok(st.get("program") == name and st.get("images") == "sh -> %s (not traced)" % name,
           what + ": info.json names it after the static program, not traced",
           (rc, serr, procs))
    rank = st.get("rank", -1)
    readme = t.cat("README.txt").decode() if t else ""
    heap = t.cat("ranks/%d/heap.txt" % rank).decode() if t else ""
    tap.ok(("  rank %d  %s (ran sh -> %s (not traced)), pid %d" % (rank, name, name, launcher))
           in readme and ("(%s (pid %d))" % (name, launcher)) in heap.split("\n")[0],
           "README.txt's Processes and heap.txt's header name the static program",
           (readme, heap[:200]))
    tap.ok(gc.get("program") == "true" and gc.get("images") == "sh -> %s -> true" % name and
           len(failed) == 1 and failed[0]["program"] == "sh" and failed[0]["images"] == "sh",
           "its own child exec'ing true ran sh -> %s -> true; a failed exec keeps sh" % name,
           (gc, failed))


def bad_exec(tap, a, work):
    """exec and spawn given pointers that are no address fail with EFAULT, traced as
    untraced (the capture read their strings first and crashed the program): cap_fork
    badexec prints each result; the trace names what it could not read "(bad address)"."""
    rc0, plain, _ = run([a.fork, work, "badexec"])
    rc, out, sout, serr = record(tap, a, work, "badexec", a.fork, work, "badexec")
    text = Trace(a.tracefs, out).cat("ranks/0/trace.txt").decode(errors="replace") \
        if rc == 0 else ""
    tap.ok(rc0 == 0 and rc == 0 and sout == plain and b"execve-path -1 14" in plain and
           'path="(bad address)"' in text,
           "exec and spawn of strings at no address: EFAULT traced as untraced, recorded as "
           "\"(bad address)\"", (rc0, plain, rc, sout, serr[-800:], text[-1500:]))


def no_readv(tap, a, work):
    """With process_vm_readv refused (a seccomp filter, cap_fork noreadv), an exec's strings
    cannot be checked: they are taken as readable, as before the check, so the exec'd child
    is followed and named (the check had made every exec "(bad address)" and unfollowed)."""
    d = tempfile.mkdtemp(dir=work)
    rc, out, sout, serr = record(tap, a, work, "noreadv", a.fork, d, "noreadv")
    t = Trace(a.tracefs, out) if rc == 0 else None
    ranks = range(t.info["n_ranks"]) if t else []
    text = "".join(t.cat("ranks/%d/trace.txt" % r).decode(errors="replace") for r in ranks)
    cats = [r for r in ranks if opens(t.events(r), d + "/parent")]
    tap.ok(rc == 0 and 'exec(path="cat"' in text and "(bad address)" not in text and
           len(cats) >= 2,
           "process_vm_readv refused: an exec is still recorded by its name and its child "
           "followed", (rc, serr[-800:], cats, text[-1200:]))


def unrecorded(tap, a, work):
    """Spool paths too long for a child's `<spool>.<pid>`: the children run unrecorded."""
    d = os.path.join(work, "long")
    os.mkdir(d)
    while len(d) < 4000:  # PATH_MAX 4096: room for the spool, not for its `.<pid>`
        d = os.path.join(d, "d" * min(200, 4000 - len(d)))
        os.mkdir(d)
    # the first spool is `<TFS_SPOOL>.XXXXXX/spool`, 13 bytes more: 4094, no room for ".<pid>"
    spool = os.path.join(d, "s" * (4080 - len(d)))
    # the subshell cannot record; its own child (true) must neither crash nor record
    rc, out, sout, serr = record(tap, a, work, "unrec", "sh", "-c",
                                 "(/bin/true && echo sub-ok); echo ok", spool=spool)
    t = Trace(a.tracefs, out) if rc == 0 else None
    tap.ok(rc == 0 and sout == b"sub-ok\nok\n" and t and t.info["n_ranks"] == 1,
           "children that cannot make a spool run as without tracing; the shell is recorded",
           (rc, sout, serr))
    # the subshell at its fork; true at its fork (its parent has no spool) and after its exec
    m = re.search(rb"warning: (\d+) times a process the program started could not make its "
                  rb"spool", serr)
    tap.ok(serr.count(b"is not recorded: cannot create its spool (ENAMETOOLONG)") == 2 and
           serr.count(b"is not recorded: the process it was forked from is not") == 1 and
           m and int(m.group(1)) == 3,
           "each says it is not recorded and why; the recorder counts them", serr)
    tap.ok(os.listdir(d) == [], "no spool left behind", os.listdir(d))
    shutil.rmtree(os.path.join(work, "long"))


def record_watched(a, work, name, *args):
    """record() of a program that stops the recorder for a while (cap_fork pidreuse): should
    the program die before it resumes it, the recorder is resumed here after a minute."""
    out = os.path.join(work, name + ".trace")
    p = subprocess.Popen([a.tracefs, "record", "-o", out, "--"] + list(args),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         env=dict(os.environ, TFS_SPOOL=os.path.join(work, "spools", name)))
    try:
        sout, serr = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGCONT)
        sout, serr = p.communicate(timeout=240)
        serr += b"\n(the recorder had to be resumed by the test)"
    return p.returncode, out, sout, serr


def pid_reuse(tap, a, work):
    """A process given the pid of an ended one whose spool is still unread: two ranks."""
    cases = (("pid reuse", ["pidreuse"], "parent"),
             ("pid reuse after the first spool was read", ["pidreuse", "late"], "parent"),
             ("pid reuse met in the fork handler", ["forkreuse"], "childB"))
    for what, words, b_file in cases:
        d = tempfile.mkdtemp(dir=work)
        rc, out, sout, serr = record_watched(a, work, "".join(words), a.fork, d, *words)
        if rc == 77:
            tap.skip(what + ": cannot choose a pid here (needs root)", serr)
            continue
        t = Trace(a.tracefs, out)
        n = t.info["n_ranks"]
        forks = [e for e in t.events(0) if e[1] == "fork"]
        pid_a = int(forks[2][2]["result"]) if len(forks) > 2 else None
        same = [r for r in range(n) if t.rank_meta("pid", r) == pid_a]
        ev = {r: t.events(r) for r in same}
        has_a = [r for r in same if len(opens(ev[r], d + "/childA")) == 1 and
                 len([e for e in writes(ev[r]) if e[2].get("count") == 6]) == 2]
        has_b = [r for r in same if len(opens(ev[r], d + "/" + b_file)) == 1]
        tap.ok(rc == 0 and sout == (b"parent" * 2 if b_file == "parent" else b"") and
               n >= 5 and len(same) == 2 and len(has_a) == 1 and len(has_b) == 1 and
               has_a != has_b and not opens(ev[has_a[0]], d + "/" + b_file) and
               not opens(ev[has_b[0]], d + "/childA"),
               what + ": the ended process and the one given its pid are two ranks, "
               "each with its own events", (rc, sout, serr, n, pid_a, same, ev))
        tap.ok(run([a.tracefs, "verify", out])[0] == 0 and b"warning" not in serr and
               b"resumed by the test" not in serr,
               what + ": the trace verifies, no spool was unreadable", serr)


def open_race(tap, a, work):
    """The recorder stat()s a process's spool, then, before it opens it, the process ends
    and one given its pid moves that spool aside and makes its own under the name (forced:
    tests/capture/hold_open.c holds the recorder's open until cap_fork openrace has done
    so). The recorder must take in the file it mapped: both processes, each once."""
    d = tempfile.mkdtemp(dir=work)
    spool = os.path.join(work, "spools", "openrace")
    out = os.path.join(work, "openrace.trace")
    rc, sout, serr = run([a.tracefs, "record", "-o", out, "--", a.fork, d, "openrace"],
                         env={"TFS_SPOOL": spool, "LD_PRELOAD": os.path.abspath(a.hold_open),
                              "TFS_TEST_HOLD_OPEN": spool, "TFS_TEST_HOLD_DIR": d})
    what = "a spool swapped between the recorder's stat and open"
    if rc == 77:
        tap.skip(what, "cannot choose a pid here (needs root)")
        return
    if not tap.ok(rc == 0 and os.path.exists(os.path.join(d, "held")),
                  what + ": recorded, the recorder was held at its open", (rc, serr)):
        return
    t = Trace(a.tracefs, out)
    n = t.info["n_ranks"]
    ev = {r: t.events(r) for r in range(1, n)}
    a_ranks = [r for r in ev if opens(ev[r], d + "/childA")]
    b_ranks = [r for r in ev if opens(ev[r], d + "/childB")]
    pid_a = t.rank_meta("pid", a_ranks[0]) if a_ranks else None
    same = [r for r in range(n) if pid_a and t.rank_meta("pid", r) == pid_a]
    tap.ok(n == 3 and len(same) == 2 and len(a_ranks) == 1 and len(b_ranks) == 1 and a_ranks != b_ranks and
           t.rank_meta("pid", b_ranks[0]) == pid_a and
           len([e for e in writes(ev[a_ranks[0]]) if e[2].get("count") == 6]) == 2 and
           len(opens(ev[a_ranks[0]], d + "/childA")) == 1 and
           len(opens(ev[b_ranks[0]], d + "/childB")) == 1,
           what + ": the ended process and the one given its pid are one rank each, "
           "none lost, none read twice", (serr, n, a_ranks, b_ranks, ev))
    tap.ok(run([a.tracefs, "verify", out])[0] == 0 and b"warning" not in serr,
           what + ": the trace verifies, no spool was unreadable", serr)


def file_names(tap, a, work):
    """A descriptor's calls name the file behind it across an exec and in a forked child:
    an exec'd image numbers its files after its predecessor's, a child names what it
    inherited in its own rank (both once printed another file's name, or none)."""
    d = tempfile.mkdtemp(dir=work)
    for n in ("A", "B"):
        with open(os.path.join(d, n), "w") as f:
            f.write(n * 3 + "\n")
    rc, out, sout, _ = record(tap, a, work, "names_exec", "sh", "-c",
                              "read x < A; exec cat B", cwd=d)
    t = Trace(a.tracefs, out)
    ev = t.events(0)
    reads = [e[2].get("path") for e in ev if e[0] == 0 and e[1] == "read"]
    cats = [e[2].get("path") for e in ev if e[0] == 1 and e[1] in ("read", "copy_file_range")]
    tap.ok(rc == 0 and sout == b"BBB\n" and reads and set(reads) == {"A"} and
           "B" in (cats + [e[2].get("in_path") for e in ev if e[0] == 1]),
           "sh's reads of A name A, not a file the exec'd cat named alike", (reads, cats))
    # a descriptor the exec'd image inherits is the file it was before the exec: cat's reads
    # of the stdin sh opened were a second file /.../A, and each pipe of a shell pipeline
    # was listed twice in its rank's files.txt
    rc, out, sout, _ = record(tap, a, work, "names_exec_fd", "sh", "-c",
                              "exec 0<A; exec cat", cwd=d)
    t = Trace(a.tracefs, out)
    ev = t.events(0)
    sh_open = [e[2]["file"] for e in ev if e[0] == 0 and e[1] == "open" and
               e[2]["path"] == "A"]
    cats = [e[2].get("path") for e in ev if e[0] == 1 and e[1] in ("read", "copy_file_range")]
    names = [line.split()[-1] for line in t.cat("ranks/0/files.txt").decode().splitlines()
             if not line.startswith("#")]
    tap.ok(rc == 0 and sout == b"AAA\n" and len(sh_open) == 1 and cats and
           set(cats) == {"A"} and names.count("A") == 1 and
           not any(n.endswith("/A") for n in names),
           "the exec'd cat reads the stdin sh opened as the same file A", (cats, names))
    # allocation ids too: the exec'd cat's blocks are not sh's (heap.txt took a block of
    # cat's for sh's block of the same id and lost sh's from its leaks)
    ids = [[e[2]["id"] for e in t.events(0, allocs=True) if e[0] == th and e[1] == "malloc"]
           for th in (0, 1)]
    tap.ok(ids[0] and ids[1] and min(ids[1]) > max(ids[0]),
           "the exec'd image's allocation ids follow its predecessor's", ids)
    # heap.txt: sh's blocks live at the exec are leaks of sh, and cat's peak does not count
    # them (it did), replayed here from the events by allocation id
    want = heap_by_image(t.events(0, allocs=True))
    heap = t.cat("ranks/0/heap.txt").decode()
    got = {k: re.search(r"^%s (\d+) bytes in (\d+) blocks" % k, heap, re.M)
           for k in ("peak", "leaked")}
    at_exec = re.search(r"^  of which (\d+) bytes in (\d+) blocks live at an exec", heap, re.M)
    tap.ok(all(got.values()) and at_exec and want["exec"][0] > 0 and
           (int(got["peak"].group(1)), int(got["leaked"].group(1)),
            int(got["leaked"].group(2))) == (want["peak"], want["leaked"][0] + want["exec"][0],
                                             want["leaked"][1] + want["exec"][1]) and
           (int(at_exec.group(1)), int(at_exec.group(2))) == want["exec"],
           "heap.txt across an exec: the peak of one image at a time, the blocks live at the "
           "exec among the leaks", (want, heap[:600]))
    # an exec that fails ends nothing: the blocks made before it are freed after it
    py = ("import os\nb = bytearray(5000)\ntry: os.execv('/nonexistent/x', ['x'])\n"
          "except OSError: pass\nc = bytearray(7000)\ndel b, c")
    rc, out, _, serr = record(tap, a, work, "heap_execfail", sys.executable, "-c", py, cwd=d)
    t = Trace(a.tracefs, out)
    ev = t.events(0, allocs=True)
    want = heap_by_image(ev)
    heap = t.cat("ranks/0/heap.txt").decode()
    got = {k: re.search(r"^%s (\d+) bytes in (\d+) blocks" % k, heap, re.M)
           for k in ("peak", "leaked")}
    tap.ok(rc == 0 and [e[1] for e in ev].count("exec_failed") == 1 and all(got.values()) and
           (int(got["peak"].group(1)), int(got["leaked"].group(1))) ==
           (want["peak"], want["leaked"][0]) and want["exec"] == (0, 0) and
           "live at an exec" not in heap and "not seen allocated)" in heap and
           re.search(r"^frees \d+ calls \(0 of blocks not seen", heap, re.M),
           "heap.txt: an exec that failed ends no block", (want, serr, heap[:600]))
    # one relative name in two working directories is two files (one id counted both)
    for sub in ("c1", "c2"):
        os.mkdir(os.path.join(d, sub))
        with open(os.path.join(d, sub, "x"), "w") as f:
            f.write(sub * 2)
    py = ("import os\nfor s in ('c1', '../c2'):\n"
          "    os.chdir(s); fd = os.open('x', os.O_RDONLY); os.read(fd, 9); os.close(fd)")
    rc, out, _, serr = record(tap, a, work, "names_cwd", sys.executable, "-c", py, cwd=d)
    t = Trace(a.tracefs, out)
    xs = [e[2]["file"] for e in t.events(0) if e[1] == "open" and e[2]["path"] == "x"]
    tap.ok(rc == 0 and len(xs) == 2 and xs[0] != xs[1],
           "one relative name opened in two working directories gets two file ids", (xs, serr))
    # a file opened relative to a directory descriptor is named by its whole path: tar's
    # walk of d1/x and d2/x printed both as "x"
    for sub in ("d1", "d2"):
        os.mkdir(os.path.join(d, sub))
        with open(os.path.join(d, sub, "x"), "w") as f:
            f.write(sub)
    py = ("import os\nfor s in ('d1', 'd2'):\n"
          "    dfd = os.open(s, os.O_RDONLY); fd = os.open('x', os.O_RDONLY, dir_fd=dfd)\n"
          "    os.read(fd, 9); os.close(fd); os.close(dfd)")
    rc, out, _, serr = record(tap, a, work, "names_dirfd", sys.executable, "-c", py, cwd=d)
    t = Trace(a.tracefs, out)
    reads = [e[2].get("path") for e in t.events(0) if e[1] == "read"][-2:]
    real = os.path.realpath(d)
    tap.ok(rc == 0 and reads == [real + "/d1/x", real + "/d2/x"],
           "files opened relative to a directory descriptor are named by their whole path",
           (reads, serr))
    # /dev/fd/63 (bash's process substitution) reopens a pipe: the read names that pipe,
    # and the same alias for two pipes is two files (both were one file "/dev/fd/63")
    py = ("import os\nfor data in (b'one', b'two'):\n"
          "    r, w = os.pipe(); os.dup2(r, 63); os.close(r); os.write(w, data); os.close(w)\n"
          "    fd = os.open('/dev/fd/63', os.O_RDONLY); os.read(fd, 9); os.close(fd)\n"
          "    os.close(63)")
    rc, out, _, serr = record(tap, a, work, "names_devfd", sys.executable, "-c", py, cwd=d)
    t = Trace(a.tracefs, out)
    reads = [e[2].get("path") for e in t.events(0) if e[1] == "read"][-2:]
    tap.ok(rc == 0 and len(reads) == 2 and all(p.startswith("pipe:[") for p in reads) and
           reads[0] != reads[1],
           "a read of /dev/fd/63 names the pipe behind it, another pipe each time",
           (reads, serr))
    py = ("import os, sys; fd = os.open('A', os.O_RDONLY); pid = os.fork()\n"
          "if pid == 0: os.read(fd, 1); os._exit(0)\n"
          "os.waitpid(pid, 0); os.read(fd, 1)")
    rc, out, _, serr = record(tap, a, work, "names_fork", sys.executable, "-c", py, cwd=d)
    t = Trace(a.tracefs, out)
    child = [e[2].get("path") for e in t.events(1) if e[1] == "read"] \
        if t.info["n_ranks"] == 2 else []
    # the child learns it from /proc/self/fd: the whole path
    tap.ok(rc == 0 and child == [os.path.realpath(os.path.join(d, "A"))],
           "a forked child's read of an inherited descriptor names its file", (child, serr))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--fork", required=True)
    ap.add_argument("--hold-open", help="tests/capture/hold_open.c, preloaded into the "
                    "recorder by open_race")
    ap.add_argument("--launcher", help="tests/capture/cap_launch.c, linked -static")
    ap.add_argument("--no-launcher", help="why there is no --launcher (skip its cases)")
    ap.add_argument("--only", help="run only this case (open_race, file_names, "
                    "static_launcher)")
    a = ap.parse_args()
    a.tracefs = os.path.abspath(a.tracefs)  # file_names records in another directory
    tap = Tap()
    work = tempfile.mkdtemp(prefix="tfs-fork-")
    os.mkdir(os.path.join(work, "spools"))
    if a.only == "open_race":
        open_race(tap, a, work)
        left = os.listdir(os.path.join(work, "spools"))
        tap.ok(left == [], "no spool left behind", left)
        shutil.rmtree(work)
        return tap.done()
    if a.only == "static_launcher":
        static_launcher(tap, a, work)
        static_exec(tap, a, work)
        shutil.rmtree(work)
        return tap.done()
    if a.only == "file_names":
        file_names(tap, a, work)
        shutil.rmtree(work)
        return tap.done()

    # two children doing I/O
    d = tempfile.mkdtemp(dir=work)
    rc, out, _, serr = record(tap, a, work, "plain", a.fork, d)
    tap.ok(rc == 0 and b"in 3 processes (ranks)" in serr, "record of a program forking twice",
           serr.decode())
    t = Trace(a.tracefs, out)
    tap.ok(t.info["n_ranks"] == 3 and run([a.tracefs, "verify", out])[0] == 0,
           "three ranks, the trace verifies", t.info["n_ranks"])
    r0, r1, r2 = t.events(0), t.events(1), t.events(2)
    forks = [e for e in r0 if e[1] == "fork"]
    tap.ok(len(opens(r0, d + "/parent")) == 2 and len(writes(r0)) == 2 and len(forks) == 2,
           "rank 0: the parent's two opens and writes, two forks", r0)
    tap.ok(len(opens(r1, d + "/child1")) == 1 and len(writes(r1)) == 2 and
           not opens(r1, d + "/parent"), "rank 1: the first child's open and two writes", r1)
    tap.ok(len(opens(r2, d + "/child2")) == 1 and len(writes(r2)) == 3,
           "rank 2: the second child's open and three writes", r2)
    pids = [t.rank_meta("pid", r) for r in range(3)]
    tap.ok([int(f[2]["result"]) for f in forks] == pids[1:] and
           t.rank_meta("ppid", 1) == pids[0] and t.rank_meta("ppid", 2) == pids[0],
           "fork results are the children's pids, their ppid the parent's", (forks, t.meta))
    tap.ok(t.rank_meta("end", 0) == "exited with status 0" and
           t.rank_meta("end", 1) == "exited with status 0" and
           t.rank_meta("end", 2) == "exited with status 0",
           "each rank says how its process ended (the children: as their parent reaped them)",
           t.meta)
    tap.ok(open(d + "/child2").read() == "child2" * 3, "the program ran as without tracing")
    # a forked child announces its objects to its own spool: the backtrace of the block
    # child 1 allocates in main is symbolised
    bts = t.cat("ranks/1/backtraces.txt").decode()
    tap.ok(b"malformed" not in serr and re.search(r"\bmain \(.*cap_fork\.c:\d+\)", bts),
           "the child's allocation backtraces are whole and name cap_fork.c's main", (serr, bts))

    # a crashing child keeps its rank and events
    d = tempfile.mkdtemp(dir=work)
    rc, out, _, serr = record(tap, a, work, "crash", a.fork, d, "crash")
    t = Trace(a.tracefs, out)
    r2 = t.events(2) if t.info["n_ranks"] == 3 else []
    tap.ok(rc == 0 and len(opens(r2, d + "/child2")) == 1 and len(writes(r2)) == 3,
           "a child killed by SIGABRT: its rank keeps its events", (rc, serr, r2))
    tap.ok((t.rank_meta("end", 2) or "").startswith("killed by signal 6 (SIGABRT)"),
           "its end is the signal that killed it, as its parent reaped it", t.meta)

    # exec: the new image goes on in the same rank, with new thread ids; vfork as fork
    d = tempfile.mkdtemp(dir=work)
    rc, out, sout, serr = record(tap, a, work, "exec", a.fork, d, "exec", "vfork")
    t = Trace(a.tracefs, out)
    r1 = t.events(1) if t.info["n_ranks"] == 3 else []
    ex = [e for e in r1 if e[1] == "exec"]
    cat_open = opens(r1, d + "/parent")
    tap.ok(rc == 0 and sout == b"parent" and len(ex) == 1 and ex[0][0] == 0 and
           ex[0][2] == {"path": "cat", "argv": "cat " + d + "/parent"},
           "vfork + execlp: an exec event with path and argv in the child's rank", (r1, serr))
    tap.ok(len(cat_open) == 1 and cat_open[0][0] > 0 and r1.index(ex[0]) < r1.index(cat_open[0]),
           "the exec'd image's events follow in the same rank, on a new thread id", r1)
    # the child maps nothing before its exec: the capture's own mapping of the exec's
    # strings is no event of the program's
    maps = [e for e in r1 if e[0] == 0 and e[1] in ("mmap", "munmap")]
    tap.ok(ex and maps == [],
           "the exec'ing child shows no mmap or munmap of the capture's own", maps)
    # the child allocates nothing before its exec: the array execlp's arguments are gathered
    # into is the capture's own, no block of the program's
    pre = [e for e in t.events(1, allocs=True) if e[0] == 0 and e[1] in ALLOC_CALLS]
    tap.ok(ex and pre == [],
           "the exec'ing child shows no allocation of the capture's own (execlp's argv)", pre)

    # an exec past the interposers, with the inherited environment: the image finds its spool
    d = tempfile.mkdtemp(dir=work)
    rc, out, sout, serr = record(tap, a, work, "rawexec", a.fork, d, "rawexec")
    t = Trace(a.tracefs, out)
    r1 = t.events(1) if t.info["n_ranks"] == 3 else []
    mine, cat_open = opens(r1, d + "/child1"), opens(r1, d + "/parent")
    tap.ok(rc == 0 and sout == b"parent" and len(mine) == 1 and len(cat_open) == 1 and
           mine[0][0] == 0 and cat_open[0][0] > 0 and r1.index(mine[0]) < r1.index(cat_open[0]),
           "a raw execve: the new image goes on in the child's rank after its own events",
           (t.info["n_ranks"], r1, serr))

    # sh -c running two commands: fork + exec each
    d = tempfile.mkdtemp(dir=work)
    for f in ("a", "b"):
        with open(os.path.join(d, f), "w") as fh:
            fh.write(f)
    rc, out, sout, serr = record(tap, a, work, "sh", "sh", "-c",
                                 "cat %s/a >/dev/null; cat %s/b" % (d, d))
    t = Trace(a.tracefs, out)
    where = {}
    for r in range(t.info["n_ranks"]):
        ev = t.events(r)
        for f in ("a", "b"):
            if opens(ev, "%s/%s" % (d, f)) and any(e[1] == "exec" for e in ev):
                where.setdefault(f, []).append(r)
    tap.ok(rc == 0 and sout == b"b" and t.info["n_ranks"] >= 2 and len(where.get("a", [])) == 1
           and len(where.get("b", [])) == 1 and where["a"] != where["b"],
           "sh -c 'cat a; cat b': each cat in a rank of its own after its exec",
           (t.info["n_ranks"], where, serr))

    # system() spawns through posix_spawn: the shell is followed too
    d = tempfile.mkdtemp(dir=work)
    rc, out, _, serr = record(tap, a, work, "system", a.fork, d, "system")
    t = Trace(a.tracefs, out)
    reads = [r for r in range(3, t.info["n_ranks"]) if opens(t.events(r), d + "/child2")]
    tap.ok(rc == 0 and t.info["n_ranks"] >= 4 and reads,
           "system(): the spawned shell and its cat are ranks after the forks",
           (t.info["n_ranks"], serr))

    # posix_spawn called by the program: the capture's mapping of the spawn's strings, made
    # and unmade around the event, is no event of the program's
    py = "import os\nos.waitpid(os.posix_spawn('/bin/true', ['true'], {}), 0)\n"
    rc, out, _, serr = record(tap, a, work, "spawn_maps", sys.executable, "-c", py)
    ev = [e for e in Trace(a.tracefs, out).events(0) if e[0] == 0] if rc == 0 else []
    at = [i for i, e in enumerate(ev) if e[1] == "posix_spawn"]
    near = [ev[j][1] for i in at for j in (i - 1, i + 1) if 0 <= j < len(ev)]
    tap.ok(len(at) == 1 and "mmap" not in near and "munmap" not in near,
           "posix_spawn: no mmap or munmap of the capture's own beside the event",
           (rc, serr, near))

    # the same program twice, untimed, without address randomisation: the same bytes
    d = os.path.join(work, "same")
    texts = []
    for i in range(2):
        shutil.rmtree(d, ignore_errors=True)
        os.mkdir(d)
        rc, out, _, _ = record(tap, a, work, "same%d" % i, a.fork, d, timing="none",
                               no_aslr=True)
        t = Trace(a.tracefs, out)
        texts.append([without_pids(t.cat("ranks/%d/trace.txt" % r))
                      for r in range(t.info["n_ranks"])])
    tap.ok(len(texts[0]) == 3 and texts[0] == texts[1],
           "two untimed recordings: every rank's trace.txt byte for byte the same "
           "(but the children's pids)",
           [len(x) for x in texts])

    file_names(tap, a, work)
    pid_reuse(tap, a, work)
    if a.hold_open:
        open_race(tap, a, work)
    many_children(tap, a, work)
    address_limit(tap, a, work)
    unrecorded(tap, a, work)
    nested(tap, a, work)
    static_launcher(tap, a, work)
    static_exec(tap, a, work)
    bad_exec(tap, a, work)
    no_readv(tap, a, work)

    left = os.listdir(os.path.join(work, "spools"))
    tap.ok(left == [], "no spool left behind", left)
    shutil.rmtree(work)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
