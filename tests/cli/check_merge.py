#!/usr/bin/env python3
"""End-to-end test of `tracefs merge`: synth_demo writes traces, the merged trace's ranks
must serve what the inputs' ranks serve, repeated merges must give the same bytes, merged
merges the same ranks as one merge of everything, and bad input must fail with one line
naming the file and the offset, exit status 1 or 2, and no output file. An input still
being saved (reserved: an empty file its writer holds locked, as an MPI rank's recorder
leaves it until its trace is saved) is waited for, bounded by TFS_SAVE_WAIT. Output is TAP.

  check_merge.py --tracefs T --demo D
"""

import argparse
import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

DIAG_RE = re.compile(rb"^tracefs: cannot (merge|open) (\S+): section=[^=]+ offset=(\d+): \S.*\n$")


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=600)
    return p.returncode, p.stdout, p.stderr


def unpad(b):
    """Lines without the spaces that pad them to their terminal's length (FORMAT.md §9):
    a rank argument's width depends on the rank count, which a merge changes."""
    return b"\n".join(line.rstrip(b" ") for line in b.split(b"\n"))


class Ctx:
    def __init__(self, tracefs, tap):
        self.tracefs = tracefs
        self.tap = tap

    def info(self, trace):
        rc, out, err = run([self.tracefs, "info", "--json", trace])
        if rc != 0:
            raise RuntimeError(err.decode())
        return json.loads(out)

    def cat(self, trace, path):
        rc, out, err = run([self.tracefs, "cat", trace, path])
        return out if rc == 0 else err

    def merge(self, out, *inputs):
        return run([self.tracefs, "merge", "-o", out] + list(inputs))


def same_ranks(c, merged, sources, desc):
    """Rank r of @merged serves what rank r' of the source it came from serves: its names
    (FORMAT.md §12) travel with it, so trace.txt shows the same paths and files.txt the same
    files."""
    t = c.tap
    bad = []
    for r, (src, sr) in enumerate(sources):
        for f in ("trace.txt", "events.jsonl", "threads/0/trace.txt", "threads/1/trace.txt",
                  "files.txt"):
            got = c.cat(merged, "ranks/%d/%s" % (r, f))
            want = c.cat(src, "ranks/%d/%s" % (sr, f))
            if f == "files.txt":  # but the first line, which names the rank
                got, want = got.split(b"\n", 1)[-1], want.split(b"\n", 1)[-1]
            if f == "events.jsonl":  # but the "rank" member, which is the rank
                got, want = (re.sub(rb'"rank":\d+', b'"rank":#', x) for x in (got, want))
            if unpad(got) != unpad(want) or not want:
                bad.append("rank %d %s differs from %s rank %d" % (r, f, src, sr))
    t.ok(not bad, desc, "\n".join(bad[:10]))


def sources_of(c, inputs):
    out = []
    for i in inputs:
        out += [(i, r) for r in range(c.info(i)["n_ranks"])]
    return out


def reserve(path):
    """Reserve @path as tfs_file_reserve() does: an empty file, locked before it is renamed
    into place. @return the descriptor holding the lock"""
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp.test")
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.rename(tmp, path)
    return fd


def check_reserved(c, d, A, B):
    """Inputs still being saved: merge, info, compare, grep and mount wait for them (one line
    says so), up to TFS_SAVE_WAIT seconds, then fail naming the file; an abandoned
    reservation (empty, not locked) is refused at once as too short."""
    t = c.tap
    R, X = os.path.join(d, "r.trace"), os.path.join(d, "rx.trace")
    fd = reserve(R)
    p = subprocess.Popen([c.tracefs, "merge", "-o", X, A, R], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    time.sleep(1)
    waited = p.poll() is None
    tmp = os.path.join(d, ".r.trace.tmp.saved")
    open(tmp, "wb").write(open(B, "rb").read())
    os.rename(tmp, R)
    os.close(fd)
    out, err = p.communicate(timeout=300)
    t.ok(waited and p.returncode == 0 and b": 2 traces merged: 5 ranks," in out,
         "merge waits for an input being saved, then merges it", (out + err).decode())
    t.ok(err.decode() == "tracefs: waiting for %s: its recorder is still saving it (up to 600 s, "
         "TFS_SAVE_WAIT)\n" % R, "merge says once what it waits for", err.decode())
    os.unlink(X)

    fd = reserve(R)
    env = dict(os.environ, TFS_SAVE_WAIT="1")
    mnt = os.path.join(d, "mnt")
    os.makedirs(mnt, exist_ok=True)
    # (grep exits 2 on an error, as GNU grep does; the mount fails before it mounts anything)
    for cmd, status in ((["merge", "-o", X, A, R], 1), (["info", R], 1), (["compare", A, R], 1),
                        (["grep", "-c", "malloc", R, "ranks/0/trace.txt"], 2),
                        (["mount", R, mnt], 1)):
        q = subprocess.run([c.tracefs] + cmd, capture_output=True, env=env, timeout=300)
        lines = q.stderr.decode().splitlines()
        t.ok(q.returncode == status and len(lines) == 2
             and lines[0].startswith("tracefs: waiting for")
             and lines[1].startswith("tracefs: cannot open %s: still being saved after 1 s" % R),
             "%s gives up after TFS_SAVE_WAIT seconds, naming the file" % cmd[0],
             q.stderr.decode())
    os.rmdir(mnt)
    env["TFS_SAVE_WAIT"] = "0"
    q = subprocess.run([c.tracefs, "info", R], capture_output=True, env=env, timeout=300)
    t.ok(q.returncode == 1 and q.stderr.count(b"\n") == 1 and b"still being saved" in q.stderr,
         "TFS_SAVE_WAIT=0: no wait, one line", q.stderr.decode())
    os.close(fd)
    rc, _, err = c.merge(X, A, R)
    m = DIAG_RE.match(err)
    t.ok(rc == 1 and m is not None and m.group(2) == R.encode() and b"too short" in err,
         "an abandoned reservation is refused at once", err.decode())
    t.ok(not os.path.exists(X), "no output after the waits that failed")
    os.unlink(R)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--demo", required=True)
    a = ap.parse_args()
    t = Tap()
    c = Ctx(a.tracefs, t)
    d = tempfile.mkdtemp(prefix="tfs-merge-")
    A, B, N = os.path.join(d, "a.trace"), os.path.join(d, "b.trace"), os.path.join(d, "n.trace")
    for path, ranks, seed, timing in ((A, 2, 1, "lossless"), (B, 3, 2, "lossless"),
                                      (N, 1, 3, "none")):
        rc, _, err = run([a.demo, "-o", path, "--events", "6000", "--ranks", str(ranks),
                          "--threads", "2", "--seed", str(seed), "--timing", timing])
        if rc != 0:
            t.ok(False, "synth_demo writes %s" % path, err.decode())
            return t.done()

    # merging: ranks one after the other, each serving its source's files
    M = os.path.join(d, "m.trace")
    rc, out, err = c.merge(M, A, B, A)
    t.ok(rc == 0 and err == b"", "merge of three traces succeeds quietly", err.decode())
    t.ok(re.match(rb"^\S+m\.trace: 3 traces merged: 7 ranks, 14 streams, \d+ events, \d+ bytes\n$",
                  out) is not None, "merge prints one summary line", out.decode())
    mi = c.info(M)
    t.ok(mi["n_ranks"] == 7 and mi["format"] == "2.3", "merged trace has 7 ranks, format 2.3",
         "%s %s" % (mi["n_ranks"], mi["format"]))
    ai, bi = c.info(A), c.info(B)
    t.ok(mi["events"] == 2 * ai["events"] + bi["events"], "events add up")
    t.ok(mi["n_phases"] == 2 * ai["n_phases"] + bi["n_phases"], "phases add up")
    rc, out, err = run([c.tracefs, "verify", M])
    t.ok(rc == 0, "merged trace verifies", err.decode())
    same_ranks(c, M, sources_of(c, [A, B, A]), "every merged rank serves its source rank's views")
    t.ok(not [f for f in os.listdir(d) if ".tmp." in f], "no temporary file left behind")

    # the same inputs give the same bytes; merging merges gives the ranks of one merge
    M2 = os.path.join(d, "m2.trace")
    c.merge(M2, A, B, A)
    t.ok(open(M, "rb").read() == open(M2, "rb").read(), "merging is deterministic")
    AB, BA = os.path.join(d, "ab.trace"), os.path.join(d, "ba.trace")
    c.merge(AB, A, B)
    rc, _, err = c.merge(BA, AB, A)
    t.ok(rc == 0, "a merged trace merges again", err.decode())
    bad = [r for r in range(7) if c.cat(BA, "ranks/%d/trace.txt" % r) != c.cat(M, "ranks/%d/trace.txt" % r)]
    t.ok(not bad, "merge(merge(a, b), a) serves what merge(a, b, a) serves", "ranks %s" % bad)

    # ten copies store one copy's grammars and values
    many = os.path.join(d, "many.trace")
    rc, _, err = c.merge(many, *([A] * 10))
    size_a, size_many = os.path.getsize(A), os.path.getsize(many)
    t.ok(rc == 0 and size_many < size_a * 2, "ten copies take less than twice one copy",
         "one %d bytes, ten %d bytes" % (size_a, size_many))
    same = c.info(many)["sections"]
    t.ok(len(same) <= len(c.info(A)["sections"]) + 10 * 4,
         "copies share sections", "%d sections" % len(same))

    # the output may be one of the inputs: it is replaced atomically
    C = os.path.join(d, "c.trace")
    open(C, "wb").write(open(A, "rb").read())
    rc, _, err = c.merge(C, C, B)
    t.ok(rc == 0 and c.info(C)["n_ranks"] == 5, "merge into one of its inputs", err.decode())

    # errors: one line, the file and the offset, status 1; no output left
    X = os.path.join(d, "x.trace")
    raw = bytearray(open(B, "rb").read())
    vals = [s for s in bi["sections"] if s["type"] == "values"][0]
    raw[vals["offset"] + vals["stored_bytes"] - 2] ^= 0x40
    bad_b = os.path.join(d, "bad.trace")
    open(bad_b, "wb").write(raw)
    rc, _, err = c.merge(X, A, bad_b)
    m = DIAG_RE.match(err)
    t.ok(rc == 1 and m is not None and m.group(1) == b"merge" and
         m.group(2) == bad_b.encode() and int(m.group(3)) == vals["offset"],
         "a damaged value block is refused naming the file and the section offset", err.decode())
    t.ok(not os.path.exists(X), "no output after a failed merge")
    trunc = os.path.join(d, "trunc.trace")
    open(trunc, "wb").write(open(B, "rb").read()[:-30])
    rc, _, err = c.merge(X, A, trunc)
    m = DIAG_RE.match(err)
    t.ok(rc == 1 and m is not None and m.group(1) == b"open" and
         m.group(2) == trunc.encode(), "a truncated input is refused by name",
         err.decode())
    rc, _, err = c.merge(X, A, N)
    t.ok(rc == 1 and err.count(b"\n") == 1 and b"timing" in err,
         "mixed timing refused in one line", err.decode())
    rc, _, err = c.merge(X, A, os.path.join(d, "missing.trace"))
    t.ok(rc == 1 and err.startswith(b"tracefs: cannot open ") and b"missing.trace" in err,
         "a missing input is named", err.decode())
    for args, desc in (([A], "no -o"), (["-o", X], "no input"), (["--bogus", "-o", X, A],
                                                                  "unknown option")):
        rc, _, err = run([c.tracefs, "merge"] + args)
        t.ok(rc == 2 and err.count(b"\n") == 1 and err.startswith(b"tracefs: merge: "),
             "usage error: %s" % desc, err.decode())
    t.ok(not os.path.exists(X), "no output after the failed merges")
    rc, out, _ = run([c.tracefs, "--help"])
    t.ok(b"merge -o OUT TRACE..." in out, "--help describes merge")

    check_reserved(c, d, A, B)

    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    os.rmdir(d)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
