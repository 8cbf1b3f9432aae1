#!/usr/bin/env python3
"""Ranks follow the fork tree, not the time processes began: cap_forktree (4 children forked
back to back, 2 grandchildren each, 2 spawned processes; each process known by its number of
writes) is recorded 5 times; each recording has every process after its parent and a
parent's children in the order it started them (depth first), the map rank -> (parent rank,
process) is the same in all of them, and `tracefs compare` finds every pair the same. Before
ranks followed the fork tree, the racing children swapped ranks from run to run. Output is
TAP.

  check_forktree.py --tracefs T --prog CAP_FORKTREE [--runs N]
"""

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402


def run(cmd, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=300,
                       env=dict(os.environ, **env) if env else None)
    return p.returncode, p.stdout, p.stderr


def tags(tracefs, path, info):
    """Per rank, its process's tag: its number of writes (cap_forktree.c)."""
    n = [0] * info["n_ranks"]
    for s in info["streams"]:
        rc, out, _ = run([tracefs, "cat", path,
                          "ranks/%d/threads/%d/events.jsonl" % (s["rank"], s["thread"])])
        for line in out.decode().splitlines():
            if json.loads(line)["name"] == "write":
                n[s["rank"]] += 1
    return n


# (parent's tag, own tag) by rank, depth first: the program (no writes), then child k and
# its grandchildren, then the spawned processes
EXPECT = [(None, 0)]
for k in range(4):
    EXPECT.append((0, 1 + k))
    EXPECT += [(1 + k, 10 + 2 * k + j) for j in range(2)]
EXPECT += [(0, 30), (0, 31)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--prog", required=True)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    tap = Tap()
    work = tempfile.mkdtemp(prefix="tfs-forktree-")
    os.mkdir(os.path.join(work, "spools"))
    maps, paths = [], []
    for i in range(a.runs):
        out = os.path.join(work, "r%d.trace" % i)
        rc, _, serr = run([a.tracefs, "record", "-o", out, "--", a.prog],
                          env={"TFS_SPOOL": os.path.join(work, "spools", "r%d" % i)})
        info = json.loads(run([a.tracefs, "info", "--json", out])[1] or b"{}") if rc == 0 \
            else {}
        procs = info.get("processes", [])
        tg = tags(a.tracefs, out, info) if info else []
        m = [(tg[p["parent_rank"]] if p.get("parent_rank") is not None else None, tg[r])
             for r, p in enumerate(procs)] if len(procs) == len(tg) else []
        tap.ok(rc == 0 and m == EXPECT,
               "recording %d: ranks depth first along the fork tree, children in the order "
               "their parent started them" % i,
               "rc=%d %s\nrank -> (parent tag, tag): %s" % (rc, serr.decode()[-1500:], m))
        maps.append(m)
        paths.append(out)
    tap.ok(all(m == maps[0] for m in maps), "rank -> (parent, process) the same in every "
           "recording", "\n".join(str(m) for m in maps))
    bad = []
    for x, y in itertools.combinations(range(a.runs), 2):
        rc, out, _ = run([a.tracefs, "compare", paths[x], paths[y]])
        if rc != 0:
            bad.append("%d vs %d: %s" % (x, y, out.decode()[-600:]))
    tap.ok(not bad, "tracefs compare: every pair of recordings makes the same calls",
           "\n".join(bad))
    left = os.listdir(os.path.join(work, "spools"))
    tap.ok(left == [], "no spool left behind", left)
    shutil.rmtree(work)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
