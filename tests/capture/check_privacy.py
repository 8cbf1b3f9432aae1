#!/usr/bin/env python3
"""The spool is private (TAP): each `tracefs record` keeps its spools in a directory of its
own, made by mkdtemp with mode 0700 under TFS_SPOOL's prefix, takes in only regular files
of its own user there, and removes only what its own user's recordings made.

1. A relative TFS_SPOOL is taken from the directory tracefs starts in: a program that
   changes directory and then forks loses no child, and nothing is left behind, neither in
   the spool directory nor where the relative path would point after the cd.
2. Another user (setpriv --reuid 65534, root only) against a root recording whose prefix
   is in a world-writable sticky directory, as /dev/shm is:
   - squats names next to the prefix before it starts (the prefix itself, names of its
     form, links to elsewhere): the recording starts in a new directory all the same and
     leaves every one of them as it was;
   - leaves a stale-looking recording directory of its own (a first spool with the spool
     magic, old, unlocked): the root recording's sweep leaves it, and removes a stale one
     of root's beside it (so the sweep did run);
   - tries, while the recording runs, to list its directory, create a spool in it, open
     its first spool, remove or rename it: each attempt fails;
   - a copy of a live process's spool, valid header and all but owned by that user, put
     into the directory (as root: no other user can): the recorder does not take it in
     (no extra rank) and does not remove it.
   The recording completes: the program's output as untraced, its two ranks, 0 dropped.

  check_privacy.py --tracefs T
"""

import argparse
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

NOBODY = 65534
SPOOL_MAGIC = b"TFSP"  # spool_i.h SPOOL_MAGIC, little-endian


def env_without(extra=None):
    e = dict(os.environ)
    for k in ("TFS_CAPTURE", "TFS_OUTPUT", "TFS_SPOOL", "TFS_TIMING", "TFS_TRACE",
              "LD_PRELOAD"):
        e.pop(k, None)
    e.update(extra or {})
    return e


def run(cmd, env=None, cwd=None, timeout=300):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_without(env),
                       cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def info(tracefs, trace):
    rc, out, err = run([tracefs, "info", "--json", trace])
    if rc != 0:
        raise RuntimeError(err.decode())
    return json.loads(out)


def files_under(d):
    return sorted(os.path.relpath(os.path.join(t, f), d) for t, _, fs in os.walk(d) for f in fs)


def test_relative(tap, a, work):
    """TFS_SPOOL=spools/rel from @work/top; the program cd's into sub, where spools/ exists
    too, and forks: the child's spool must be in the recording's directory."""
    top = os.path.join(work, "top")
    for d in ("spools", "sub/spools"):
        os.makedirs(os.path.join(top, d))
    out = os.path.join(work, "rel.trace")
    rc, sout, serr = run([a.tracefs, "record", "-o", out, "--", "sh", "-c",
                          "cd sub && /bin/true && echo ok"], env={"TFS_SPOOL": "spools/rel"},
                         cwd=top)
    t = info(a.tracefs, out) if rc == 0 else {}
    meta = t.get("meta", {})
    tap.ok(rc == 0 and sout == b"ok\n" and t.get("n_ranks") == 2 and
           meta.get("program.rank1", meta.get("program")) == "true" and
           b"not recorded" not in serr and b"unreadable" not in serr,
           "relative TFS_SPOOL, a program that cd's and forks: both processes are ranks, "
           "/bin/true's with its program", (rc, sout, serr, t.get("n_ranks"), meta))
    tap.ok(rc == 0 and files_under(os.path.join(top, "spools")) == [] and
           os.listdir(os.path.join(top, "spools")) == [] and
           files_under(os.path.join(top, "sub")) == [],
           "relative TFS_SPOOL: nothing left in the spool directory, nothing made where the "
           "path points after the cd", (files_under(top), serr))


# Run by the other user: every attempt on the recording's directory, as JSON
# {attempt: "ok" or the error's name}.
ATTACK = r"""
import errno, json, os, sys
rdir, base = sys.argv[1], sys.argv[2]
res = {}
def attempt(name, f):
    try:
        f()
        res[name] = "ok"
    except OSError as e:
        res[name] = errno.errorcode.get(e.errno, str(e.errno))
attempt("list", lambda: os.listdir(rdir))
attempt("create a spool", lambda: open(os.path.join(rdir, "spool.77777"), "xb").close())
attempt("open the first spool", lambda: open(os.path.join(rdir, "spool"), "r+b").close())
attempt("remove the first spool", lambda: os.unlink(os.path.join(rdir, "spool")))
attempt("rename the directory", lambda: os.rename(rdir, os.path.join(base, "stolen")))
attempt("remove the directory", lambda: os.rmdir(rdir))
print(json.dumps(res))
"""

# Run by the other user before the recording: squatted names and a stale-looking recording
# directory of its own, listed as JSON.
SQUAT = r"""
import json, os, sys, time
base = sys.argv[1]
made = []
def mk(path, kind):
    if kind == "file":
        open(path, "wb").write(b"squat")
    elif kind == "dir":
        os.mkdir(path, 0o700)
    else:
        os.symlink("/etc", path)
    made.append(path)
mk(os.path.join(base, "rec"), "file")
for i in range(64):
    mk(os.path.join(base, "rec.%06d" % i), ("file", "dir", "link")[i % 3])
stale = os.path.join(base, "rec.NOBODY")
os.mkdir(stale, 0o700)
for name in ("spool", "spool.1"):
    with open(os.path.join(stale, name), "wb") as f:
        f.write(b"TFSP" + b"\0" * 4092)
    old = time.time() - 3600
    os.utime(os.path.join(stale, name), (old, old))
made += [stale, os.path.join(stale, "spool"), os.path.join(stale, "spool.1")]
print(json.dumps(made))
"""


def as_nobody(script, *args):
    return run(["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups",
                sys.executable, "-c", script] + list(args), timeout=60)


def root_stale(base):
    """A directory root's killed recording would leave: its spool unlocked and old."""
    d = os.path.join(base, "rec.ROOTxx")
    os.mkdir(d, 0o700)
    with open(os.path.join(d, "spool"), "wb") as f:
        f.write(SPOOL_MAGIC + b"\0" * 8188)
    old = time.time() - 3600
    os.utime(os.path.join(d, "spool"), (old, old))
    return d


def find_recording(base, skip, timeout=60):
    """The recording's directory: the root-owned `rec.XXXXXX` with a first spool, not @skip."""
    end = time.time() + timeout
    while time.time() < end:
        for n in os.listdir(base):
            p = os.path.join(base, n)
            try:
                st = os.lstat(p)
            except FileNotFoundError:  # swept meanwhile
                continue
            if p != skip and re.fullmatch(r"rec\.[A-Za-z0-9]{6}", n) and \
                    stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and \
                    os.path.exists(os.path.join(p, "spool")):
                return p
        time.sleep(0.02)
    return None


def live_child_spool(rdir, timeout=60):
    """The spool of the program's `sleep` child, once it exists."""
    end = time.time() + timeout
    while time.time() < end:
        for n in os.listdir(rdir):
            m = re.fullmatch(r"spool\.(\d+)", n)
            try:
                with open("/proc/%s/cmdline" % (m.group(1) if m else "0"), "rb") as f:
                    if f.read().startswith(b"sleep\0"):
                        return os.path.join(rdir, n)
            except OSError:  # not a process's spool, or the process is gone
                pass
        time.sleep(0.02)
    return None


def test_other_user(tap, a, work):
    what = "another user against a root recording"
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        tap.skip(what, "needs root and setpriv")
        return
    base = tempfile.mkdtemp(prefix="tfs-privacy.", dir="/tmp")
    try:
        os.chmod(base, 0o1777)  # world-writable and sticky, as /dev/shm
        rc, out, err = as_nobody(SQUAT, base)
        if not tap.ok(rc == 0, what + ": the other user squats names and leaves a stale "
                      "directory", err):
            return
        squatted = json.loads(out)
        before = {p: os.lstat(p) for p in squatted}
        mine = root_stale(base)
        fifo = os.path.join(work, "go")
        os.mkfifo(fifo)
        trace = os.path.join(work, "private.trace")
        p = subprocess.Popen([a.tracefs, "record", "-o", trace, "--", "sh", "-c",
                              "sleep 600 & s=$!; read x < %s; kill $s; wait $s; echo done"
                              % fifo], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL,
                             env=env_without({"TFS_SPOOL": os.path.join(base, "rec")}))
        try:
            rdir = find_recording(base, mine)
            child = live_child_spool(rdir) if rdir else None
            st = os.stat(rdir) if rdir else None
            tap.ok(rdir and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o700 and
                   rdir not in before and child,
                   what + ": the recording's directory is new, root's, mode 0700",
                   (rdir, st, sorted(os.listdir(base))))
            res = json.loads(as_nobody(ATTACK, rdir or base, base)[1] or b"{}")
            tap.ok(len(res) == 6 and all(v in ("EACCES", "EPERM") for v in res.values()),
                   what + ": listing, creating in, opening, removing and renaming it all "
                   "fail", res)
            forged = None
            if child:
                forged = child + ".1"  # a name the recorder lists: a moved-aside spool
                # made beside, then renamed in: never root's under a name the recorder lists
                tmp = os.path.join(base, "forged.tmp")
                shutil.copyfile(child, tmp)
                os.chown(tmp, NOBODY, NOBODY)
                os.rename(tmp, forged)
                time.sleep(0.3)  # scanned every 20 ms
        finally:
            with open(fifo, "w") as f:
                f.write("go\n")
            sout, serr = p.communicate(timeout=120)
        t = info(a.tracefs, trace) if p.returncode == 0 else {}
        tap.ok(p.returncode == 0 and sout == b"done\n" and t.get("n_ranks") == 2 and
               re.search(rb"; 0 dropped\n", serr) and
               b"unreadable" not in serr,
               what + ": the recording completes with its two ranks; the other user's copy "
               "of a spool is not taken in", (p.returncode, sout, serr, t.get("n_ranks")))
        tap.ok(forged and os.path.exists(forged) and os.stat(forged).st_uid == NOBODY and
               sorted(os.listdir(rdir)) == [os.path.basename(forged)],
               what + ": the other user's file survives; only it is left in the directory",
               sorted(os.listdir(rdir)) if rdir and os.path.isdir(rdir) else rdir)
        kept = [q for q in squatted if not os.path.lexists(q) or
                os.lstat(q).st_ino != before[q].st_ino or
                os.lstat(q).st_mtime != before[q].st_mtime]
        tap.ok(not kept, what + ": every name the other user squatted, and its stale-looking "
               "directory, are as they were", kept)
        m = re.search(rb"removed (\d+) spools? \(\d+ KiB\) left in (\S+) by recordings",
                      serr)
        tap.ok(not os.path.exists(mine) and m and int(m.group(1)) == 1 and
               m.group(2) == os.fsencode(base),
               what + ": the sweep removed root's stale directory only", serr)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracefs", required=True)
    a = ap.parse_args()
    a.tracefs = os.path.abspath(a.tracefs)
    tap = Tap()
    with tempfile.TemporaryDirectory(prefix="tfs-privacy.") as work:
        os.chmod(work, 0o755)
        for test in (test_relative, test_other_user):
            try:
                test(tap, a, work)
            except Exception as e:  # a crash of the checker is a failure, not an abort
                tap.ok(False, "%s raised %s: %s" % (test.__name__, type(e).__name__, e))
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
