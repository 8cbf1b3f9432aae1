#!/usr/bin/env python3
"""Real-mount test of the rank directories of a recording: one for every rank counted.

`tracefs record` of cap_ends's fork tree (tests/capture/cap_ends.c: child B only _exit()s,
so its rank records no event) is mounted; ranks/ must list every rank 0 .. n_ranks - 1 as
`tracefs ls` does, and B's directory must open, list its views and read them as `tracefs cat`
does. Output is TAP; exit 77 only when /dev/fuse is absent. Every mount is undone however the
script ends (check_mount.py's Mounts, cleanup and watchdog).

  check_mount_ranks.py --tracefs T --ends CAP_ENDS
"""

import argparse
import atexit
import json
import os
import re
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_mount  # noqa: E402  (mounts that are always undone)
from check_mount import Tap, run, mount_ok, umount_ok, is_mounted, TIMEOUT  # noqa: E402


def record_tree(args, workdir):
    out = os.path.join(workdir, "tree.trace")
    env = {k: v for k, v in os.environ.items()
           if k not in ("TFS_CAPTURE", "TFS_OUTPUT", "TFS_SPOOL", "TFS_TIMING", "TFS_TRACE")}
    env["TFS_SPOOL"] = os.path.join(workdir, "spool")
    p = subprocess.run([args.tracefs, "record", "-o", out, "--", args.ends, "tree"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=TIMEOUT, env=env)
    rc, sout, serr = p.returncode, p.stdout, p.stderr
    pids = {m.group(1): int(m.group(2))
            for m in re.finditer(r"^([A-G]) (\d+)$", sout.decode(), re.M)}
    return rc, out, pids, serr


def check_ranks(tap, args, workdir):
    rc, trace, pids, serr = record_tree(args, workdir)
    if not tap.ok(rc == 0 and "B" in pids, "cap_ends tree: recorded", (rc, serr)):
        return
    rc, out, err = run([args.tracefs, "info", "--json", trace], timeout=TIMEOUT)
    info = json.loads(out)
    quiet = [p["rank"] for p in info["processes"] if p["pid"] == pids["B"]]
    mp = os.path.join(workdir, "mnt")
    os.mkdir(mp)
    if not mount_ok(tap, trace, mp):
        return
    try:
        listed = sorted(int(n) for n in os.listdir(os.path.join(mp, "ranks")))
        tap.ok(listed == list(range(info["n_ranks"])),
               "ls ranks/ of the mount: every rank counted, one without events too",
               (listed, info["n_ranks"]))
        rank = "ranks/%d" % (quiet[0] if quiet else -1)
        names = sorted(os.listdir(os.path.join(mp, rank))) if quiet else []
        rc, out, _ = run([args.tracefs, "ls", trace, rank], timeout=TIMEOUT)
        tap.ok(quiet and names == sorted(line.split()[-1] for line in out.decode().splitlines())
               and "heap.txt" in names,
               "ls %s of the mount: the views `tracefs ls` lists" % rank, (names, out))
        same = []
        for name in ("heap.txt", "summary.txt", "trace.txt", "events.jsonl"):
            with open(os.path.join(mp, rank, name), "rb") as f:
                got = f.read()
            rc, want, _ = run([args.tracefs, "cat", trace, rank + "/" + name], timeout=TIMEOUT)
            same.append((name, rc == 0 and got == want))
        tap.ok(quiet and all(ok for _, ok in same),
               "the mount's views of the rank read as `tracefs cat` reads them", same)
    finally:
        umount_ok(tap, mp)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--ends", required=True)
    ap.add_argument("--watchdog", type=int, default=300)
    args = ap.parse_args()
    args.tracefs, args.ends = os.path.abspath(args.tracefs), os.path.abspath(args.ends)
    if not os.path.exists("/dev/fuse"):
        print("1..0 # SKIP /dev/fuse is absent")
        return 77
    tap = Tap()
    check_mount.MOUNTS = check_mount.Mounts(args.tracefs)
    atexit.register(check_mount.cleanup)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(s, check_mount.on_signal)
    check_mount.watchdog(args.watchdog)
    workdir = tempfile.mkdtemp(prefix="tracefs-mount-ranks-")
    try:
        check_ranks(tap, args, workdir)
    except Exception as e:  # a crash of the checker is a failure, not an abort
        tap.ok(False, "the checker ran to its end", repr(e))
    finally:
        check_mount.MOUNTS.undo()
        leftover = [mp for mp in check_mount.MOUNTS.points if is_mounted(mp)]
        tap.ok(not leftover, "no mount left behind", leftover)
        check_mount.WORKDIR = workdir
        check_mount.cleanup()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
