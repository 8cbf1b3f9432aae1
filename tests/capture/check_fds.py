#!/usr/bin/env python3
"""The capture's own descriptors (libunwind's pipe, moved near the top of RLIMIT_NOFILE) and
a program that walks every descriptor up to its limit (cap_fds.c), traced and untraced,
with allocation backtraces by the capture's walk and by libunwind alone (TFS_UNWIND): its
fcntl() of every number finds nothing open, as untraced (else a program clearing O_NONBLOCK
or setting close-on-exec everywhere changed libunwind's pipe); its close() of every number closes what it closes untraced (it closed the capture's pipe,
whose numbers became the program's next files: libunwind reads and closes its pipe); dup2
onto every number and opening files until EMFILE find two numbers fewer (the capture keeps
them: README.md), close_range and closefrom leave them open; every file it opened stays
open at offset 0 and unwritten; the recording
keeps every allocation and its backtrace. Output is TAP.

  check_fds.py --tracefs T --prog cap_fds
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

LIMIT = 256


def limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def run(cmd, env=None):
    e = {k: v for k, v in os.environ.items()
         if k not in ("TFS_CAPTURE", "TFS_SPOOL", "TFS_TRACE", "TFS_UNWIND", "LD_PRELOAD")}
    e.update(env or {})
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=300, env=e, preexec_fn=limit)
    return p.returncode, p.stdout, p.stderr


def seen(out):
    """cap_fds' lines as {word: number}."""
    got = {}
    for line in out.decode(errors="replace").splitlines():
        w = line.split()
        for k in range(0, len(w) - 1, 2):
            if w[k + 1].lstrip("-").isdigit():
                got[w[k]] = int(w[k + 1])
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--prog", required=True)
    a = ap.parse_args()
    tap = Tap()
    with tempfile.TemporaryDirectory(prefix="tfs-fds.") as work:
        victim = os.path.join(work, "victim")
        open(victim, "w").close()
        rc, out, err = run([a.prog, victim])
        plain = seen(out)
        tap.ok(rc == 0 and plain.get("opened", 0) > 200 and plain.get("closed") == 0,
               "cap_fds untraced: exit 0, nothing open above 2, files up to the limit",
               (rc, out, err))
        # everything recorded (the interposers' recording path), then allocations alone
        for how, env, what in (("the capture's walk", {}, "all"),
                               ("libunwind", {"TFS_UNWIND": "libunwind"}, "alloc")):
            trace = os.path.join(work, "fds.trace")
            rc, out, err = run([a.tracefs, "record", "--trace=" + what, "-o", trace, "--",
                                a.prog, victim], env=env)
            got = seen(out)
            what = "traced (backtraces by %s)" % how
            tap.ok(rc == 0 and got.get("closed") == plain["closed"],
                   what + ": closing every number closes what it closes untraced",
                   (plain, got, err))
            tap.ok(got.get("fcntl") == plain["fcntl"] == 0,
                   what + ": fcntl of every number (close-on-exec, status flags cleared) "
                   "finds nothing open, as untraced: the capture's two are not the program's",
                   (plain, got))
            tap.ok(got.get("dup2") == plain["dup2"] - 2 and
                   got.get("opened") == plain["opened"] - 2 and got.get("errno") == 24,
                   what + ": dup2 onto every number and opening until EMFILE find the "
                   "capture's two descriptors, no more", (plain, got))
            tap.ok(got.get("reopened") == got.get("opened") and
                   got.get("refilled") == got.get("opened"),
                   what + ": close_range of every number from its first file, and "
                   "closefrom(3), leave the capture's two open", (plain, got))
            tap.ok(got.get("intact") == got.get("opened") and got.get("range") == 0 and
                   got.get("size") == 0 and os.path.getsize(victim) == 0,
                   what + ": every file it opened is still open, unread and unwritten",
                   (got, os.path.getsize(victim)))
            p = subprocess.run([a.tracefs, "cat", trace, "ranks/0/heap.txt"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            heap = p.stdout.decode(errors="replace")
            first = [ln for ln in heap.splitlines() if ln.startswith("allocations ")]
            n = int(first[0].split()[1]) if first else 0
            p = subprocess.run([a.tracefs, "cat", trace, "ranks/0/backtraces.txt"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            tap.ok(n >= 1100 and b"churn" in p.stdout,
                   what + ": the recording keeps every allocation and its backtrace",
                   (first, p.stdout[:500]))
            os.unlink(trace)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
