#!/usr/bin/env python3
"""What a trace of 10^6 ranks of one regular program costs to open, list and read.

gen_ranks writes the merged trace of an MPI job of RANKS ranks (rank 0 writes a file, every
other rank runs the same loop), a trace of about 1 KB. Each command runs as a child whose
peak memory and CPU time come from wait4()'s rusage; they must stay within the bounds that
issue #16 sets for 10^6 ranks (200 MB, where main took 2 GB to 3.9 GB) and within a CPU
time limit that only a per-rank cost breaks (main took 13 s to 94 s). With --mount the
trace is mounted in the foreground (the test owns the daemon's pid): `ls ranks/<last>`, a
4 KiB read of its trace.txt and the daemon's peak RSS (VmHWM). The outputs are checked too:
the last rank's files equal rank 2's, and info's runs of streams add up to every stream.
With --phases every rank marks its loop as a phase: info's runs of phases add up to every
rank's, and the last rank's phase directory lists what rank 2's does.
With --sparse the trace counts 2^32 - 1 ranks (the most the format allows) but has streams
in the first and the last only, as a trace whose other ranks recorded nothing: ls ranks/,
info.json's ranks, a rank's heap.txt and `tracefs compare` of the trace with itself show
the two ranks, within the same bounds (main gave "cannot allocate memory" for the first
three and compared every rank in turn); its replay proxy's guess of its buffers' room
stays bounded at 2^32 - 2 ranks too.
Output is TAP; exit 77 only for --mount without /dev/fuse.

  check_ranks.py --tracefs T --gen G [--ranks N] [--mount] [--phases | --sparse]
"""

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

MAX_RSS_KB = 200 * 1024
MAX_CPU_S = 10.0  # generous: a loaded machine stays far below it, a per-rank cost does not
TIMEOUT = 600
MAX_OUT = 64 << 20


def limits():
    """In the child: files it writes (its output) at most MAX_OUT bytes, CPU time bounded."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_OUT, MAX_OUT))
    resource.setrlimit(resource.RLIMIT_CPU, (TIMEOUT, TIMEOUT))


def measured(cmd):
    """Run @cmd; return (status, stdout, stderr, peak RSS in KB, CPU seconds). A command that
    writes more than MAX_OUT bytes or runs past TIMEOUT CPU seconds is stopped (a per-rank
    line or loop over 2^32 ranks must fail the test, not fill the disk or hang it)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                             preexec_fn=limits)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return p.returncode, out.read(), err.read(), ru.ru_maxrss, ru.ru_utime + ru.ru_stime


def bounded(tap, what, cmd):
    rc, out, err, rss_kb, cpu = measured(cmd)
    tap.ok(rc == 0 and rss_kb < MAX_RSS_KB and cpu < MAX_CPU_S,
           "%s: peak RSS %.1f MB (< %d), CPU %.2f s (< %g)" %
           (what, rss_kb / 1024, MAX_RSS_KB // 1024, cpu, MAX_CPU_S),
           b"rc=%d " % rc + err[:2000])
    return out if rc == 0 else None


def check_info(tap, info, ranks, phases):
    streams, rank_runs = info.get("streams", []), info.get("ranks", [])
    covered = sum(s.get("count", 1) for s in streams)
    rank_cover = sum(r.get("count", 1) for r in rank_runs)
    tap.ok(info.get("n_ranks") == ranks and info.get("n_streams") == ranks and
           covered == ranks and rank_cover == ranks and len(streams) <= 4,
           "info --json: %d stream entries stand for %d streams, %d rank entries for %d ranks" %
           (len(streams), covered, len(rank_runs), rank_cover),
           json.dumps({k: info.get(k) for k in ("n_ranks", "n_streams", "ranks")})[:2000] +
           "\n" + json.dumps(streams[:4]))
    if not phases:
        return
    ph = info.get("phases", [])
    per_rank = {}
    for p in ph:
        for r in range(p["rank"], p["rank"] + p.get("count", 1)):
            per_rank[r] = per_rank.get(r, 0) + 1
    tap.ok(info.get("n_phases") == ranks and len(per_rank) == ranks and
           set(per_rank.values()) == {1} and len(ph) <= 4 and
           all(p["name"] == "solve" and p["dir"] == "solve" for p in ph),
           "info --json: %d phase entries stand for one phase \"solve\" on each of %d ranks" %
           (len(ph), len(per_rank)), json.dumps(ph[:4]))


def check_cli(tap, args, trace):
    last = "ranks/%d" % (args.ranks - 1)
    out = bounded(tap, "info of %d ranks" % args.ranks, [args.tracefs, "info", trace])
    tap.ok(out is not None and b"ranks 2-%d" % (args.ranks - 1) in out,
           "info shows ranks 2-%d as one run of copies" % (args.ranks - 1), (out or b"")[:3000])
    out = bounded(tap, "info --json of %d ranks" % args.ranks,
                  [args.tracefs, "info", "--json", trace])
    if out is not None:
        check_info(tap, json.loads(out), args.ranks, args.phases)
    listing = bounded(tap, "ls %s" % last, [args.tracefs, "ls", trace, last])
    want = subprocess.run([args.tracefs, "ls", trace, "ranks/2"], stdout=subprocess.PIPE,
                          timeout=TIMEOUT).stdout
    names = [line.split()[-1] for line in (listing or b"").splitlines()]
    tap.ok(names == [line.split()[-1] for line in want.splitlines()] and b"trace.txt" in names,
           "ls %s lists the files of ranks/2" % last, (listing or b"") + b"\n--\n" + want)
    text = bounded(tap, "cat %s/trace.txt" % last, [args.tracefs, "cat", trace,
                                                     last + "/trace.txt"])
    want = subprocess.run([args.tracefs, "cat", trace, "ranks/2/trace.txt"],
                          stdout=subprocess.PIPE, timeout=TIMEOUT).stdout
    tap.ok(text is not None and text == want and len(text) > 4096,
           "%s/trace.txt equals ranks/2's (%d bytes)" % (last, len(want)), (text or b"")[:500])
    bounded(tap, "ls ranks (every rank's directory)", [args.tracefs, "ls", trace, "ranks"])
    if args.phases:
        listing = bounded(tap, "ls %s/phases/solve" % last,
                          [args.tracefs, "ls", trace, last + "/phases/solve"])
        want = subprocess.run([args.tracefs, "ls", trace, "ranks/2/phases/solve"],
                              stdout=subprocess.PIPE, timeout=TIMEOUT).stdout
        names = [line.split()[-1] for line in (listing or b"").splitlines()]
        tap.ok(names and names == [line.split()[-1] for line in want.splitlines()],
               "ls %s/phases/solve lists what ranks/2's does" % last, listing)


def vm_hwm_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def check_mount(tap, args, trace, workdir):
    mp = os.path.join(workdir, "mnt")
    os.mkdir(mp)
    last = os.path.join(mp, "ranks", str(args.ranks - 1))
    daemon = subprocess.Popen([args.tracefs, "mount", "-f", trace, mp],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not os.path.ismount(mp) and daemon.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if not tap.ok(os.path.ismount(mp), "mount of %d ranks is ready" % args.ranks,
                      daemon.stderr.read() if daemon.poll() is not None else "not mounted"):
            return
        names = sorted(os.listdir(last))
        tap.ok("trace.txt" in names and "events.jsonl" in names,
               "ls ranks/%d in the mount: %s" % (args.ranks - 1, " ".join(names)), names)
        fd = os.open(os.path.join(last, "trace.txt"), os.O_RDONLY)
        try:
            head = os.pread(fd, 4096, 0)
        finally:
            os.close(fd)
        with open(os.path.join(mp, "ranks", "2", "trace.txt"), "rb") as f:
            want = f.read(4096)
        tap.ok(len(head) == 4096 and head == want,
               "a 4 KiB read of ranks/%d/trace.txt equals rank 2's" % (args.ranks - 1), head[:300])
        ranks_dir = os.path.join(mp, "ranks")
        entries = os.listdir(ranks_dir)
        step = max(1, args.ranks // 1000)
        dirs = sum(os.path.isdir(os.path.join(ranks_dir, str(r)))
                   for r in range(0, args.ranks, step))
        tap.ok(len(entries) == args.ranks and dirs == len(range(0, args.ranks, step)),
               "ranks/ lists %d entries; %d of them stat as directories" % (len(entries), dirs),
               "%d entries" % len(entries))
        hwm = vm_hwm_kb(daemon.pid)
        tap.ok(0 < hwm < MAX_RSS_KB, "daemon peak RSS %.1f MB (< %d)" %
               (hwm / 1024, MAX_RSS_KB // 1024), "VmHWM %d kB" % hwm)
    finally:
        subprocess.run([args.tracefs, "umount", mp], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=TIMEOUT)
        if os.path.ismount(mp):
            subprocess.run(["fusermount3", "-u", "-z", mp], timeout=TIMEOUT)
        try:
            daemon.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
    tap.ok(daemon.returncode == 0 and not os.path.ismount(mp),
           "the daemon exits 0 once unmounted", "rc=%r" % daemon.returncode)


def check_sparse(tap, args, trace):
    last = (1 << 32) - 2
    out = bounded(tap, "sparse: ls ranks", [args.tracefs, "ls", trace, "ranks"])
    listed = [line.split()[-1] for line in out.decode().splitlines()] if out else None
    tap.ok(listed == ["0", str(last)], "sparse: ranks/ lists the two ranks with streams",
           repr(listed))
    out = bounded(tap, "sparse: info.json", [args.tracefs, "cat", trace, "info.json"])
    info = json.loads(out) if out else {}
    tap.ok(info.get("n_ranks") == last + 1 and
           info.get("ranks") == [{"rank": 0, "threads": [0]}, {"rank": last, "threads": [0]}],
           "sparse: info.json counts every rank and lists the two with streams",
           json.dumps({k: info.get(k) for k in ("n_ranks", "ranks")}))
    out = bounded(tap, "sparse: heap.txt of the last rank",
                  [args.tracefs, "cat", trace, "ranks/%d/heap.txt" % last])
    tap.ok(out is not None and out.startswith(b"# heap of rank %d " % last) and
           b"\nallocations 13 calls, 53248 bytes\n" in out,
           "sparse: the last rank's heap.txt replays its allocations", out and out[:300])
    out = bounded(tap, "sparse: compare with itself", [args.tracefs, "compare", trace, trace])
    tap.ok(out is not None and out.decode().splitlines() == [
        "rank 0: same calls (50 events, 1 thread)",
        "rank %d: same calls (52 events, 1 thread)" % last,
        "the traces make the same calls (%d ranks)" % (last + 1)],
        "sparse: compare names the ranks with streams and counts every rank",
        out and out[:500])


# the most a proxy's buffer guess asks malloc for (fs/vreplay_mpi.c BUF_GUESS_MAX), plus the
# page it adds and the buffer's offset (gen_ranks: 4096)
GUESS_MAX = (1 << 30) + 4096 + 4096


def check_sparse_proxy(tap, args, workdir):
    """The proxy of a sparse trace whose collective has buffers in an allocation: its guess
    of how far the buffers reach, room for every rank's data, stays bounded whatever the rank
    count (main asked malloc for 2 TiB at 2^32 - 2 ranks; at 2^32 - 1 its count wrapped)."""
    for ranks in ((1 << 32) - 2, (1 << 32) - 1, 1 << 20):
        trace = os.path.join(workdir, "proxy%d.trace" % ranks)
        p = subprocess.run([args.gen, trace, str(ranks), "50", "lossless", "sparse"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
        if p.returncode == 0:
            p = subprocess.run([args.tracefs, "cat", trace, "replay/proxy.c"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
        src = p.stdout.decode() if p.returncode == 0 else ""
        sizes = [int(n) for n in re.findall(r"rt_bind\(1, malloc\((\d+)\)\);", src)]
        tap.ok(sizes and "rt_mbuf(0, UINT64_C(1), UINT64_C(0)" in src and
               all(4096 < n <= GUESS_MAX for n in sizes),
               "sparse, %d ranks: the proxy's allocation for the collective's buffers asks "
               "for at most 1 GiB and a page" % ranks, (p.stderr, sizes))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--gen", required=True)
    ap.add_argument("--ranks", type=int, default=1000000)
    ap.add_argument("--mount", action="store_true")
    ap.add_argument("--phases", action="store_true")
    ap.add_argument("--sparse", action="store_true")
    args = ap.parse_args()
    if args.mount and not os.path.exists("/dev/fuse"):
        print("1..0 # SKIP /dev/fuse is absent")
        return 77
    tap = Tap()
    with tempfile.TemporaryDirectory(prefix="tfs-ranks-") as workdir:
        trace = os.path.join(workdir, "ranks.trace")
        if args.sparse:
            p = subprocess.run([args.gen, trace, str((1 << 32) - 1), "50", "lossless",
                                "sparse"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=TIMEOUT)
            if tap.ok(p.returncode == 0, "gen_ranks: a sparse trace", p.stderr):
                check_sparse(tap, args, trace)
            check_sparse_proxy(tap, args, workdir)
            return tap.done()
        p = subprocess.run([args.gen, trace, str(args.ranks), "120", "lossless"] +
                           (["phases"] if args.phases else []),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
        size = os.path.getsize(trace) if p.returncode == 0 else 0
        # a phase is a record of its rank's stream: about a byte a rank once compressed
        limit = 4096 + (2 * args.ranks if args.phases else 0)
        if tap.ok(p.returncode == 0 and 0 < size < limit,
                  "gen_ranks: %d ranks in %d bytes" % (args.ranks, size), p.stderr):
            if args.mount:
                check_mount(tap, args, trace, workdir)
            else:
                check_cli(tap, args, trace)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
