#!/usr/bin/env python3
"""Real-mount tests of `tracefs mount`: the kernel's view of a mounted trace.

synth_demo writes a multi-rank, multi-thread, multi-phase trace (and a JSON dump of its
events); the trace is mounted and everything a user does with files is checked against
`tracefs cat`, `tracefs ls` and the independent FORMAT.md §9 model of tests/cli/check_cli.py:
the tree, sizes, bytes, JSON, tail/head/dd slices, mmap, cp, parallel readers, EROFS for every
write, stable inodes and times, refusals with one-line messages, `mount -f`, and that the
daemon is gone after unmounting. Output is TAP; exit 77 only when /dev/fuse is absent.
Every mount is undone however the script ends (finally, atexit, signals, a watchdog).

  check_mount.py --tracefs T --demo D --timing none|lossless|lossy:0.1 [--seed S] [--big N]
"""

import argparse
import atexit
import errno
import json
import mmap
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import check_cli  # noqa: E402  (the independent model and the CLI helpers)
import tree_checks  # noqa: E402  (files.txt from events.jsonl)
from check_cli import Tap, Cli, Model, run, first_diff, lossy_times  # noqa: E402

DIAG_RE = check_cli.DIAG_RE
TIMEOUT = 120


# ---- mounts that are always undone ----

def unescape_mount(field):
    return re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), field)


def mountinfo():
    """{mount point (bytes): (major:minor, fstype)} from /proc/self/mountinfo."""
    out = {}
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            left, right = line.split(b" - ", 1)
            fields = left.split()
            out[unescape_mount(fields[4])] = (fields[2].decode(), right.split()[0].decode())
    return out


def is_mounted(mp):
    return os.fsencode(mp) in mountinfo()


def daemon_pids(mp, rel=None):
    """Processes whose command line is `tracefs mount ... MP`, or `... REL` for a daemon
    started on the relative mount point @rel. Exact names only: mount tests run side by
    side, each in its own work directory, and must not see each other's daemons (a
    relative name is made unique to its work directory, see check_daemon_life)."""
    pids = []
    want = {os.fsencode(mp)} | ({os.fsencode(rel)} if rel else set())
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        argv = [a for a in argv if a]
        if len(argv) < 3 or not argv[0].endswith(b"tracefs") or argv[1] != b"mount":
            continue
        if argv[-1] in want:
            pids.append(int(d))
    return pids


def wait_for(cond, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


class Mounts:
    """Every mount point this script made; undo() unmounts whatever is still mounted."""

    def __init__(self, tracefs):
        self.tracefs = tracefs
        self.points = []
        self.lock = threading.Lock()

    def add(self, mp):
        with self.lock:
            if mp not in self.points:
                self.points.append(mp)

    def mount(self, trace, mp, opts=(), cwd=None):
        self.add(mp)
        return run([self.tracefs, "mount"] + list(opts) + [trace, mp], timeout=TIMEOUT) \
            if cwd is None else self._run_in(cwd, [self.tracefs, "mount"] + list(opts) +
                                             [trace, mp])

    @staticmethod
    def _run_in(cwd, cmd):
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           stdin=subprocess.DEVNULL, timeout=TIMEOUT)
        return p.returncode, p.stdout, p.stderr

    def abort(self, mp):
        """Fail every request still pending on a hung mount, so unmounting can finish."""
        dev = mountinfo().get(os.fsencode(os.path.abspath(mp)))
        if dev and dev[1].startswith("fuse"):
            try:
                with open("/sys/fs/fuse/connections/%s/abort" % dev[0].split(":")[1],
                          "w") as f:
                    f.write("1")
            except OSError:
                pass

    def force_umount(self, mp):
        for cmd in ([self.tracefs, "umount", mp], ["fusermount3", "-u", "-z", mp],
                    ["umount", "-l", mp]):
            if not is_mounted(mp):
                return
            try:
                subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=20)
            except (OSError, subprocess.SubprocessError):
                pass

    def undo(self, hung=False):
        with self.lock:
            points = list(reversed(self.points))
        for mp in points:
            if is_mounted(mp):
                if hung:
                    self.abort(mp)
                self.force_umount(mp)


MOUNTS = None
WORKDIR = None


def cleanup(hung=False):
    """Unmount everything; then, and only then, remove the work directory."""
    if MOUNTS is not None:
        MOUNTS.undo(hung)
        if WORKDIR and not any(is_mounted(mp) for mp in MOUNTS.points):
            shutil.rmtree(WORKDIR, ignore_errors=True)


def on_signal(signum, frame):
    cleanup(hung=True)
    print("Bail out! signal %d" % signum, flush=True)
    os._exit(128 + signum)


def watchdog(seconds):
    """If the script hangs inside a syscall on a stuck mount, abort and unmount anyway."""
    def fire():
        print("# watchdog: %d s passed, aborting the mounts" % seconds, flush=True)
        cleanup(hung=True)
        print("Bail out! watchdog", flush=True)
        os._exit(1)
    t = threading.Timer(seconds, fire)
    t.daemon = True
    t.start()


# ---- helpers ----

def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def fs_walk(root, rel=b""):
    """{relative path: (is_dir, st_size, st_ino, mtime_ns)} by readdir + lstat."""
    out = {}
    base = os.path.join(root, rel) if rel else root
    with os.scandir(base) as it:
        for e in it:
            sub = os.path.join(rel, e.name) if rel else e.name
            st = os.lstat(os.path.join(root, sub))
            out[sub] = (stat.S_ISDIR(st.st_mode), st.st_size, st.st_ino, st.st_mtime_ns,
                        e.inode())
            if stat.S_ISDIR(st.st_mode):
                out.update(fs_walk(root, sub))
    return out


def cli_tree(cli, path=b""):
    """{path: (is_dir, size)} from `tracefs ls`, recursively."""
    out = {}
    for is_dir, size, name in cli.ls(path):
        sub = path + b"/" + name if path else name
        out[sub] = (is_dir, size if not is_dir else 0)
        if is_dir:
            out.update(cli_tree(cli, sub))
    return out


def ls_r(mp):
    """Paths that `ls -R` prints, relative to the mount point."""
    env = dict(os.environ, LC_ALL="C")
    p = subprocess.run(["ls", "-R", "-1", "--quoting-style=literal", mp], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
    paths, cur = set(), None
    mpb = os.fsencode(mp)
    for line in p.stdout.split(b"\n"):
        if line.endswith(b":") and (line[:-1] == mpb or line.startswith(mpb + b"/")):
            cur = line[len(mpb) + 1:-1]
        elif line and cur is not None:
            paths.add(cur + b"/" + line if cur else line)
    return p.returncode, paths, p.stderr


def sh(cmd, timeout=TIMEOUT):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def one_line(err):
    return err.count(b"\n") == 1 and err.startswith(b"tracefs: ") and \
        not err.rstrip(b"\n").endswith(b".")


def drop_cache(path):
    """Evict a mounted file's pages so the next reads reach the daemon."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


# ---- the checks on one mounted trace ----

class MountedTrace:
    def __init__(self, tap, args, workdir, trace, model, info, mp):
        self.tap, self.args, self.workdir = tap, args, workdir
        self.trace, self.model, self.info, self.mp = trace, model, info, mp
        self.cli = Cli(args.tracefs, trace)
        self.rng = random.Random(args.seed)
        self.full = {}   # path -> bytes from `tracefs cat`

    def p(self, rel):
        return os.path.join(os.fsencode(self.mp), rel)

    def check_tree(self):
        tap = self.tap
        expected = cli_tree(self.cli)
        walked = fs_walk(os.fsencode(self.mp))
        got = {k: (v[0], v[1] if not v[0] else 0) for k, v in walked.items()}
        tap.ok(got == expected, "readdir + stat of the mount equals `tracefs ls` (%d nodes)"
               % len(expected), "only ls: %r\nonly mount: %r" % (
                   sorted(set(expected.items()) - set(got.items()))[:5],
                   sorted(set(got.items()) - set(expected.items()))[:5]))
        rc, paths, err = ls_r(self.mp)
        tap.ok(rc == 0 and paths == set(expected), "`ls -R` lists the %d nodes of `tracefs ls`"
               % len(expected), "rc=%d %r\nonly ls: %r\nonly ls -R: %r" % (
                   rc, err, sorted(set(expected) - paths)[:5], sorted(paths - set(expected))[:5]))
        return walked

    def check_files(self, walked):
        tap = self.tap
        model_files = check_cli.expected_files(self.model, self.info)
        files = sorted(k for k, v in walked.items() if not v[0])
        bad = []
        for rel in files:
            rc, cat, err = self.cli.cat(rel)
            data = read_file(self.p(rel))
            size = os.stat(self.p(rel)).st_size
            self.full[rel] = cat
            if rc != 0 or err or data != cat or size != len(data):
                bad.append("%s: rc=%d stat=%d read=%d cat=%d %s" % (
                    rel.decode(), rc, size, len(data), len(cat),
                    "" if data == cat else first_diff(data, cat)))
        tap.ok(not bad and files, "all %d files: stat size == bytes read == `tracefs cat`, "
               "byte for byte" % len(files), "\n".join(bad))
        bad = []
        starts = {}  # (rank, thread) -> reconstructed starts, for the line before a phase
        if self.model.timing == check_cli.TIMING_LOSSY:
            starts = {k: [t[0] for t in v] for k, v in
                      (check_cli.stream_times(tap, self.cli, self.model) or {}).items()}
        for rel in sorted(model_files):
            rank, thread, first, n = model_files[rel]
            view = rel.rsplit(b"/", 1)[1].decode()
            data = read_file(self.p(rel))
            times = None
            if self.model.timing == check_cli.TIMING_LOSSY:
                evs = self.model.streams[(rank, thread)][first:first + n]
                prev = starts.get((rank, thread), [None] * first)[first - 1] if first else None
                times = lossy_times(self.tap, data, evs, view, self.model.header["rel_err"],
                                    rel, prev)
                if times is None:
                    bad.append("%s: times beyond the lossy bound" % rel.decode())
                    continue
            want = self.model.view(rank, thread, first, n, view, times)
            if data != want:
                bad.append("%s: %s" % (rel.decode(), first_diff(data, want)))
        tap.ok(not bad and set(model_files) <= set(files),
               "the %d view files equal the FORMAT.md §9 model" % len(model_files),
               "\n".join(bad[:3]))
        bad, n = [], 0
        for r in sorted(self.model.backtraces):
            for name, want in ((b"backtraces.txt", self.model.backtraces_txt(r)),
                               (b"allocs.folded", self.model.allocs_folded(r))):
                rel = b"ranks/%d/%s" % (r, name)
                n += 1
                data = read_file(self.p(rel)) if rel in set(files) else None
                if data != want:
                    bad.append("%s: %s" % (rel.decode(), "missing" if data is None
                                           else first_diff(data, want)))
        tap.ok(n and not bad, "the %d backtraces.txt and allocs.folded files equal the model"
               % n, "\n".join(bad[:3]))
        bad, ranks = [], sorted({r for r, _ in self.model.streams})
        for r in ranks:
            rel = b"ranks/%d/files.txt" % r
            data = read_file(self.p(rel)) if rel in set(files) else None
            want = tree_checks.files_txt(self.model, r,
                                         read_file(self.p(b"ranks/%d/events.jsonl" % r)))
            if data != want:
                bad.append("%s: %s" % (rel.decode(), "missing" if data is None
                                       else first_diff(data, want)))
        tap.ok(ranks and not bad, "the %d files.txt equal what the mounted events.jsonl say"
               % len(ranks), "\n".join(bad[:3]))
        # README.txt: the root's events.jsonl is every rank's, in rank order
        root = read_file(self.p(b"events.jsonl"))
        parts = b"".join(read_file(self.p(b"ranks/%d/events.jsonl" % r)) for r in ranks)
        tap.ok(root == parts and root == self.full.get(b"events.jsonl") and
               os.stat(self.p(b"events.jsonl")).st_size == len(root) and root,
               "the mounted events.jsonl is the %d ranks' end to end, as `tracefs cat` gives "
               "it, its stat size exact (%d bytes)" % (len(ranks), len(root)),
               None if root == parts else first_diff(root, parts))

    def check_json(self, jq):
        tap = self.tap
        jsonl = sorted(k for k in self.full if k.endswith(b".jsonl"))
        bad = []
        for rel in jsonl:
            lines = read_file(self.p(rel)).split(b"\n")
            if lines[-1] != b"":
                bad.append("%s: no final newline" % rel.decode())
            for i, line in enumerate(lines[:-1]):
                try:
                    obj = json.loads(line)
                    if not isinstance(obj, dict) or "name" not in obj:
                        raise ValueError("not an event object")
                except ValueError as e:
                    bad.append("%s line %d: %s" % (rel.decode(), i + 1, e))
                    break
        tap.ok(not bad and jsonl, "every line of the %d events.jsonl files parses with "
               "json.loads" % len(jsonl), "\n".join(bad))
        if jq:
            bad = []
            for rel in jsonl:
                rc, out, err = sh([jq, "-c", ".", self.p(rel)])
                n = self.full[rel].count(b"\n")
                if rc != 0 or out.count(b"\n") != n:
                    bad.append("%s: rc=%d lines=%d/%d %r" % (rel.decode(), rc,
                                                             out.count(b"\n"), n, err[:200]))
            tap.ok(not bad, "jq -c . reads every mounted events.jsonl", "\n".join(bad))
        try:
            with open(self.p(b"info.json"), "rb") as f:
                ok = json.load(f) == self.info
            err = None
        except ValueError as e:
            ok, err = False, e
        tap.ok(ok, "info.json parses and is `tracefs info --json`", err)

    def slice_targets(self):
        """The largest trace.txt, events.jsonl, phase view and views of one call
        (calls/<name>/), and the generated files."""
        big = sorted(self.full, key=lambda k: (-len(self.full[k]), k))
        pick = [[k for k in big if k.endswith(b"trace.txt")][0],
                [k for k in big if k.endswith(b".jsonl")][0],
                [k for k in big if b"/phases/" in k][0], b"info.json", b"README.txt"]
        pick += [k for k in big if b"/calls/" in k and k.endswith(b"trace.txt")][:1]
        pick += [k for k in big if b"/calls/" in k and k.endswith(b".jsonl")][:1]
        return list(dict.fromkeys(pick))

    def check_slices(self):
        tap, rng = self.tap, self.rng
        bad = []
        n_checks = 0
        for rel in self.slice_targets():
            path, full = self.p(rel), self.full[rel]
            size = len(full)
            lines = full.split(b"\n")[:-1]
            for _ in range(4):
                n = rng.randint(0, size + 10)
                k = rng.randint(0, max(len(lines) + 3, 1))
                b = rng.choice([1, 7, 512, 4096, 65536, 131072, 1 << 20])
                skip = rng.randint(0, size // b + 1)
                count = rng.randint(0, 4)
                off = rng.randint(0, size + 5)
                cases = [
                    (["tail", "-c", str(n), path], full[max(size - n, 0):]),
                    (["tail", "-n", str(k), path],
                     b"".join(x + b"\n" for x in lines[max(len(lines) - k, 0):])),
                    (["head", "-c", str(n), path], full[:n]),
                    (["dd", "if=" + os.fsdecode(path), "of=/dev/stdout", "bs=%d" % b,
                      "skip=%d" % skip, "count=%d" % count, "status=none"],
                     full[skip * b:skip * b + count * b]),
                    (["dd", "if=" + os.fsdecode(path), "of=/dev/stdout", "bs=%d" % b,
                      "skip=%d" % off, "count=%d" % n, "iflag=skip_bytes,count_bytes",
                      "status=none"], full[off:off + n]),
                ]
                for cmd, want in cases:
                    n_checks += 1
                    rc, out, err = sh(cmd)
                    if rc != 0 or out != want:
                        bad.append("%s: rc=%d got %d bytes, want %d %r" % (
                            " ".join(os.fsdecode(c) for c in cmd), rc, len(out), len(want),
                            err[:200]))
                # pread at a random offset, also across and past the end
                with open(path, "rb", buffering=0) as f:
                    for o in (off, size - 1, size, size + 4096, rng.randint(0, size)):
                        ln = rng.randint(1, 300000)
                        n_checks += 1
                        got = os.pread(f.fileno(), ln, max(o, 0))
                        if got != full[max(o, 0):max(o, 0) + ln]:
                            bad.append("%s: pread(%d, %d) wrong" % (rel.decode(), o, ln))
        tap.ok(not bad, "%d tail -c/-n, head -c, dd skip/count and pread slices at seeded "
               "random offsets equal the file's bytes" % n_checks, "\n".join(bad[:10]))

    def check_tools(self):
        tap = self.tap
        for rel in self.slice_targets()[:3]:
            path, full = self.p(rel), self.full[rel]
            with open(path, "rb") as f:
                if full:
                    with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
                        got = m[:]
                        tail = m[len(full) - 1:]
                else:
                    got, tail = b"", b""
            tap.ok(got == full and tail == full[-1:], "mmap of %s equals its bytes"
                   % rel.decode())
            dst = os.path.join(self.workdir, "copy")
            rc, _, err = sh(["cp", path, dst])
            tap.ok(rc == 0 and read_file(dst) == full, "cp %s" % rel.decode(), err)
            os.unlink(dst)
            rc, out, err = sh(["cat", path])
            tap.ok(rc == 0 and out == full, "cat %s" % rel.decode(), err)
            with open(path, "r", encoding="latin-1", newline="") as f:
                text = f.read()
            tap.ok(text.encode("latin-1") == full, "Python open().read() of %s"
                   % rel.decode())

    def parallel(self, rels, share_fd, what, rounds=40):
        """8 threads, each reading random slices of its file and comparing them."""
        errors = []
        for rel in set(rels):
            drop_cache(self.p(rel))
        shared = {rel: os.open(self.p(rel), os.O_RDONLY) for rel in set(rels)} \
            if share_fd else {}
        seeds = [self.rng.randrange(1 << 30) for _ in rels]

        def reader(i, rel):
            r = random.Random(seeds[i])
            full = self.full[rel]
            fd = shared[rel] if share_fd else os.open(self.p(rel), os.O_RDONLY)
            try:
                for _ in range(rounds):
                    off = r.randint(0, len(full))
                    ln = r.choice([1, 100, 4096, 65536, 200000, 1 << 20])
                    got = os.pread(fd, ln, off)
                    if got != full[off:off + ln]:
                        errors.append("%s: pread(%d, %d) got %d bytes" % (
                            rel.decode(), off, ln, len(got)))
                        return
            except OSError as e:
                errors.append("%s: %s" % (rel.decode(), e))
            finally:
                if not share_fd:
                    os.close(fd)
        threads = [threading.Thread(target=reader, args=(i, rel)) for i, rel in enumerate(rels)]
        for t in threads:
            t.start()
        # one deadline for them all, generous: 8 readers of 1 MiB slices of a big timed
        # view share two cores with the rest of the suite (once over 120 s under CI's load)
        deadline = time.monotonic() + 5 * TIMEOUT
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        for fd in shared.values():
            os.close(fd)
        late = sum(t.is_alive() for t in threads)
        self.tap.ok(not errors and not late,
                    "8 parallel readers %s, random offsets, all correct" % what,
                    "\n".join(errors[:5] + ["%d readers not done in time" % late] * bool(late)))

    def sequential(self, rels, what):
        """8 threads each reading its file on from the start with read(), so the daemon
        decodes ahead of them (fs/prefetch.c); each seeks somewhere in the middle and reads
        on to the end from there, then reads the whole file once more."""
        errors = []
        for rel in set(rels):
            drop_cache(self.p(rel))
        seeds = [self.rng.randrange(1 << 30) for _ in rels]

        def reader(i, rel):
            r = random.Random(seeds[i])
            full = self.full[rel]
            try:
                with open(self.p(rel), "rb", buffering=0) as f:
                    got, seek_at = bytearray(), r.randint(0, len(full))
                    while len(got) < seek_at:
                        b = f.read(r.choice([4096, 65536, 131072, 1 << 20]))
                        if not b:
                            break
                        got += b
                    to = r.randint(0, len(full))
                    f.seek(to)
                    rest = f.read()
                    f.seek(0)
                    again = f.read()
                if bytes(got) != full[:len(got)] or rest != full[to:] or again != full:
                    errors.append("%s: read %d then from %d: %d, %d bytes; whole: %d" % (
                        rel.decode(), len(got), to, len(rest), len(full), len(again)))
            except OSError as e:
                errors.append("%s: %s" % (rel.decode(), e))
        threads = [threading.Thread(target=reader, args=(i, rel)) for i, rel in enumerate(rels)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        self.tap.ok(not errors and not any(t.is_alive() for t in threads),
                    "8 sequential readers %s (decoded ahead), with a seek in the middle, "
                    "all correct" % what, "\n".join(errors[:5]))

    def parallel_processes(self, rel):
        """8 dd processes on one file at once, each a different slice."""
        full, size = self.full[rel], len(self.full[rel])
        drop_cache(self.p(rel))
        jobs = []
        for _ in range(8):
            off, n = self.rng.randint(0, size), self.rng.randint(1, 1 << 20)
            p = subprocess.Popen(["dd", "if=" + os.fsdecode(self.p(rel)), "of=/dev/stdout",
                                  "bs=65536", "skip=%d" % off, "count=%d" % n,
                                  "iflag=skip_bytes,count_bytes", "status=none"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            jobs.append((p, full[off:off + n]))
        bad = 0
        for p, want in jobs:
            out, _ = p.communicate(timeout=TIMEOUT)
            bad += p.returncode != 0 or out != want
        self.tap.ok(bad == 0, "8 parallel dd processes on %s" % rel.decode(), "%d wrong" % bad)

    def check_parallel(self):
        views = sorted((k for k in self.full if k.endswith(b".txt") or k.endswith(b".jsonl")),
                       key=lambda k: -len(self.full[k]))
        self.parallel(views[:8], False, "on 8 different files")
        self.parallel([views[0]] * 8, False, "on one file, 8 handles")
        self.parallel([views[0]] * 8, True, "on one file, one shared handle")
        self.parallel_processes(views[0])

    def check_erofs(self):
        tap = self.tap
        f = self.p(sorted(k for k in self.full if k.endswith(b"trace.txt"))[0])
        d = os.path.dirname(f)
        new = os.path.join(d, b"new")
        ops = [
            ("open for write", lambda: os.open(f, os.O_WRONLY)),
            ("open for read+write", lambda: os.open(f, os.O_RDWR)),
            ("open for append", lambda: os.open(f, os.O_WRONLY | os.O_APPEND)),
            ("open with O_TRUNC", lambda: os.open(f, os.O_RDONLY | os.O_TRUNC)),
            ("create", lambda: os.open(new, os.O_WRONLY | os.O_CREAT, 0o644)),
            ("create read-only", lambda: os.open(new, os.O_RDONLY | os.O_CREAT, 0o644)),
            ("mkdir", lambda: os.mkdir(new)),
            ("rmdir", lambda: os.rmdir(d)),
            ("unlink", lambda: os.unlink(f)),
            ("rename", lambda: os.rename(f, new)),
            ("symlink", lambda: os.symlink(b"x", new)),
            ("link", lambda: os.link(f, new)),
            ("truncate", lambda: os.truncate(f, 0)),
            ("chmod", lambda: os.chmod(f, 0o644)),
            ("chown", lambda: os.chown(f, 1, 1)),
            ("utime", lambda: os.utime(f, (0, 0))),
            ("mknod", lambda: os.mknod(new, 0o644 | stat.S_IFREG)),
            ("setxattr", lambda: os.setxattr(f, "user.x", b"1")),
            ("removexattr", lambda: os.removexattr(f, "user.x")),
        ]
        bad = []
        for what, op in ops:
            try:
                fd = op()
                if isinstance(fd, int):
                    os.close(fd)
                bad.append("%s succeeded" % what)
            except OSError as e:
                if e.errno != errno.EROFS:
                    bad.append("%s: %s instead of EROFS" % (what, errno.errorcode.get(e.errno)))
        tap.ok(not bad, "%d kinds of write attempt fail with EROFS" % len(ops), "\n".join(bad))
        tap.ok(not os.path.exists(new) and os.path.getsize(f) == len(self.full[os.path.relpath(
            f, os.fsencode(self.mp))]), "nothing changed after the write attempts")
        sv = os.statvfs(self.mp)
        tap.ok(sv.f_flag & os.ST_RDONLY, "statvfs says read-only")
        try:
            got = os.listxattr(f)
            xerr = None
        except OSError as e:
            got, xerr = None, e
        tap.ok(got == [], "listxattr is empty", xerr)

    def check_inodes(self, walked):
        tap = self.tap
        again = fs_walk(os.fsencode(self.mp))
        inos = {k: v[2] for k, v in walked.items()}
        tap.ok(inos == {k: v[2] for k, v in again.items()} and
               all(v[2] == v[4] for v in walked.values()),
               "inode numbers are stable across stat calls and equal readdir's d_ino",
               [k for k, v in walked.items() if v[2] != v[4]][:5])
        root = os.stat(self.mp).st_ino
        tap.ok(len(set(inos.values()) | {root}) == len(inos) + 1, "inode numbers are unique")
        mtimes = {v[3] for v in walked.values()} | {os.stat(self.mp).st_mtime_ns}
        tap.ok(len(mtimes) == 1, "one mtime for every node: %r" % sorted(mtimes)[:3])
        st = os.stat(self.mp)
        tap.ok(st.st_mtime_ns == st.st_ctime_ns == st.st_atime_ns, "atime == mtime == ctime")


def check_daemon_gone(tap, pids, mp, what):
    gone = wait_for(lambda: not any(os.path.exists("/proc/%d" % p) for p in pids) and
                    not daemon_pids(mp))
    tap.ok(pids and gone and not is_mounted(mp), "%s: the daemon (pid %s) exits" %
           (what, ",".join(map(str, pids))), "still there: %r" % daemon_pids(mp))


def mount_ok(tap, trace, mp, opts=(), cwd=None):
    rc, out, err = MOUNTS.mount(trace, mp, opts, cwd)
    ready = is_mounted(os.path.join(cwd, mp) if cwd else mp)
    ok = rc == 0 and not err and ready
    if ok:
        try:
            os.stat(os.path.join(cwd or "", mp, "info.json"))
        except OSError as e:
            ok, err = False, str(e).encode()
    tap.ok(ok, "tracefs mount %sreturns with the mount ready" % "".join(o + " " for o in opts),
           "rc=%d mounted=%r %r" % (rc, ready, err))
    return ok


def umount_ok(tap, mp, what="tracefs umount"):
    pids = daemon_pids(mp)
    rc, out, err = run([MOUNTS.tracefs, "umount", mp], timeout=TIMEOUT)
    tap.ok(rc == 0 and not err and not is_mounted(mp), "%s exits 0 and unmounts" % what,
           "rc=%d %r" % (rc, err))
    check_daemon_gone(tap, pids, mp, what)


# ---- refusals and the daemon's life ----

def check_refusals(tap, args, workdir, trace, info):
    tracefs = args.tracefs
    data = read_file(trace)
    grammar = [s for s in info["sections"] if s["type"] == "grammar" and s["stored_bytes"] > 0]
    bad_grammar = bytearray(data)
    if grammar:
        g = dict(grammar[len(grammar) // 2], name="grammar")
    else:
        # every grammar is small and packed into the section table (FORMAT.md §2): a flip
        # there is the table's damage, reported at the table's offset
        t = info["section_totals"]["table"]
        g = {"offset": len(data) - t["stored_bytes"], "stored_bytes": t["stored_bytes"],
             "name": "table"}
    bad_grammar[g["offset"] + g["stored_bytes"] // 2] ^= 0x10
    cases = {"flipped.trace": bytes(bad_grammar), "truncated.trace": data[:len(data) * 2 // 3]}
    for name, blob in cases.items():
        with open(os.path.join(workdir, name), "wb") as f:
            f.write(blob)
    mp = os.path.join(workdir, "refused")
    os.mkdir(mp)
    afile = os.path.join(workdir, "afile")
    open(afile, "w").close()

    def refused(cmd, what, diag=False, was_mounted=False):
        MOUNTS.add(cmd[-1])
        rc, out, err = run([tracefs] + cmd, timeout=TIMEOUT)
        ok = 0 < rc < 128 and one_line(err) and (not diag or DIAG_RE.match(err.rstrip(b"\n")))
        ok = ok and (cmd[0] != "mount" or is_mounted(cmd[-1]) == was_mounted)
        tap.ok(ok, "%s is refused with one line and exit %d" % (what, rc),
               "rc=%d stderr=%r" % (rc, err))
        return err

    err = refused(["mount", os.path.join(workdir, "flipped.trace"), mp],
                  "a trace with a flipped grammar byte", True)
    tap.ok(b"section=%s offset=%d" % (g["name"].encode(), g["offset"]) in err,
           "the message names the %s section at offset %d" % (g["name"], g["offset"]), err)
    refused(["mount", os.path.join(workdir, "truncated.trace"), mp], "a truncated trace", True)
    refused(["mount", os.path.join(workdir, "missing.trace"), mp], "a missing trace")
    refused(["mount", workdir, mp], "a directory as the trace")
    refused(["mount", trace, os.path.join(workdir, "no-such-dir")], "a missing mountpoint")
    refused(["mount", trace, afile], "a mountpoint that is a file")
    # unreadable: root reads anything, so the refusal is checked as an unprivileged user
    secret = os.path.join(workdir, "secret.trace")
    shutil.copy(trace, secret)
    os.chmod(secret, 0)
    os.chmod(workdir, 0o755)
    if shutil.which("setpriv") and os.geteuid() == 0:
        MOUNTS.add(mp)
        rc, out, err = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            tracefs, "mount", secret, mp], timeout=TIMEOUT)
        tap.ok(0 < rc < 128 and one_line(err) and b"ermission denied" in err and
               not is_mounted(mp), "an unreadable trace is refused (as uid 65534)",
               "rc=%d %r" % (rc, err))
    else:
        tap.ok(True, "# SKIP an unreadable trace: not root or no setpriv")
    # libfuse refuses an unknown -o option: one line of ours that names it, no mount
    for opts, bad in (("bogus", b"bogus"), ("ro,nosuchopt=1", b"nosuchopt=1"),
                      ("allow_other,max_read=many", b"max_read=many")):
        err = refused(["mount", "-o", opts, trace, mp], "mount -o %s" % opts)
        tap.ok(err.endswith(b": unknown or malformed mount option " + bad + b"\n"),
               "the message names the unknown option %s and only it" % bad.decode(), err)
    refused(["umount", mp], "umount of a directory that is not a mount point")
    refused(["umount", os.path.join(workdir, "no-such-dir")], "umount of a missing path")
    # a mount that is not tracefs's must survive `tracefs umount`
    other = os.path.join(workdir, "tmpfs")
    os.mkdir(other)
    if os.geteuid() == 0 and sh(["mount", "-t", "tmpfs", "none", other])[0] == 0:
        MOUNTS.add(other)
        refused(["umount", other], "umount of a mount that is not tracefs")
        tap.ok(is_mounted(other), "the other file system stays mounted")
        sh(["umount", other])
    # mount twice: the second is refused, the first still serves
    if mount_ok(tap, trace, mp):
        refused(["mount", trace, mp], "mounting on an already mounted point", was_mounted=True)
        tap.ok(read_file(os.path.join(mp, "info.json")) == run(
            [tracefs, "cat", trace, "info.json"])[1], "the first mount still serves")
        umount_ok(tap, mp)
        refused(["umount", mp], "a second umount")


def check_owner_and_nonempty(tap, args, workdir, trace):
    """A mountpoint that holds files is refused (the mount would hide them) unless -o
    nonempty; files belong to the mounting user, or to -o uid=,gid=."""
    mp = os.path.join(workdir, "full")
    os.mkdir(mp)
    with open(os.path.join(mp, "mine.txt"), "w") as f:
        f.write("keep me\n")
    MOUNTS.add(mp)
    rc, out, err = run([args.tracefs, "mount", trace, mp], timeout=TIMEOUT)
    tap.ok(0 < rc < 128 and one_line(err) and b"not empty" in err and not is_mounted(mp),
           "a mountpoint that holds a file is refused with one line", "rc=%d %r" % (rc, err))
    if mount_ok(tap, trace, mp, ("-o", "nonempty")):
        tap.ok(not os.path.exists(os.path.join(mp, "mine.txt")) and
               os.path.exists(os.path.join(mp, "info.json")), "-o nonempty mounts over it")
        umount_ok(tap, mp)
    tap.ok(read_file(os.path.join(mp, "mine.txt")) == b"keep me\n",
           "the hidden file is there again after the unmount")
    empty = os.path.join(workdir, "owned")
    os.mkdir(empty)
    if mount_ok(tap, trace, empty, ("-o", "uid=1234,gid=5678")):
        st = [os.stat(os.path.join(empty, p)) for p in ("", "info.json", "ranks")]
        tap.ok(all((s.st_uid, s.st_gid) == (1234, 5678) for s in st),
               "-o uid=1234,gid=5678: every file and directory is theirs",
               [(s.st_uid, s.st_gid) for s in st])
        umount_ok(tap, empty)
    others_rw = os.path.exists("/dev/fuse") and os.stat("/dev/fuse").st_mode & 0o006 == 0o006
    if not others_rw:
        # libfuse opens /dev/fuse itself before it would try fusermount3: a user mounts only
        # where the device is open to everyone (Debian's default, not every container's)
        tap.ok(True, "# SKIP an unprivileged mount: /dev/fuse is not open to other users")
    elif os.geteuid() == 0 and shutil.which("setpriv") and shutil.which("fusermount3"):
        user = os.path.join(workdir, "user-mp")
        os.mkdir(user)
        os.chown(user, 65534, 65534)
        os.chmod(trace, 0o644)
        MOUNTS.add(user)
        rc, out, err = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            args.tracefs, "mount", trace, user], timeout=TIMEOUT)
        if tap.ok(rc == 0 and is_mounted(user), "an unprivileged user (65534) mounts",
                  "rc=%d %r" % (rc, err)):
            # its files are its own, not root's (root may stat a FUSE mount of another
            # user's only with allow_other: ask as that user)
            rc, out, err = run(["setpriv", "--reuid=65534", "--regid=65534",
                                "--clear-groups", "stat", "-c", "%u:%g",
                                os.path.join(user, "info.json")], timeout=TIMEOUT)
            tap.ok(out == b"65534:65534\n", "that user's mount: files owned by 65534:65534",
                   out + err)
            run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                 args.tracefs, "umount", user], timeout=TIMEOUT)
            tap.ok(wait_for(lambda: not is_mounted(user)), "and unmounts it")
    else:
        tap.ok(True, "# SKIP an unprivileged mount: not root, or no setpriv or fusermount3")


def check_foreground(tap, args, workdir, trace):
    mp = os.path.join(workdir, "fg")
    os.mkdir(mp)
    MOUNTS.add(mp)
    want = run([args.tracefs, "cat", trace, "ranks/1/threads/2/trace.txt"])[1]
    for how in ("umount", "SIGTERM", "SIGINT"):
        p = subprocess.Popen([args.tracefs, "mount", "-f", trace, mp], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        up = wait_for(lambda: is_mounted(mp) or p.poll() is not None)
        ok = up and p.poll() is None and is_mounted(mp)
        tap.ok(ok, "mount -f stays in the foreground with the mount up (then %s)" % how,
               "exited %r" % p.poll())
        if ok:
            tap.ok(read_file(os.path.join(mp, "ranks/1/threads/2/trace.txt")) == want,
                   "a read through the foreground mount")
            if how == "umount":
                rc, _, err = run([args.tracefs, "umount", mp])
            else:
                p.send_signal(getattr(signal, how))
                rc, err = 0, b""
        try:
            code = p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            code = p.wait()
        err = p.stderr.read()
        tap.ok(rc == 0 and code == 0 and not is_mounted(mp) and not err,
               "after %s the foreground process exits 0 and the mount is gone" % how,
               "rc=%r code=%r mounted=%r stderr=%r" % (rc, code, is_mounted(mp), err))
        MOUNTS.undo()


def check_daemon_life(tap, args, workdir, trace):
    # a relative mountpoint, then the daemon is killed: it must unmount what it mounted
    # (named for the work directory, so that no other run's daemon has the same argv)
    rel = "rel-" + os.path.basename(workdir)
    mp = os.path.join(workdir, rel)
    os.mkdir(mp)
    if mount_ok(tap, trace, rel, cwd=workdir):
        pids = daemon_pids(mp, rel)
        tap.ok(len(pids) == 1, "one daemon process serves the mount (pid %r)" % pids)
        for pid in pids:
            os.kill(pid, signal.SIGTERM)
        gone = wait_for(lambda: not is_mounted(mp) and
                        not any(os.path.exists("/proc/%d" % p) for p in pids))
        tap.ok(gone, "SIGTERM to the daemon of a relative mountpoint unmounts it and exits",
               "mounted=%r" % is_mounted(mp))
    MOUNTS.add(mp)
    MOUNTS.undo()
    # a busy mount: umount refuses while a file is open, works once it is closed
    if mount_ok(tap, trace, mp):
        f = open(os.path.join(mp, "README.txt"), "rb")
        rc, out, err = run([args.tracefs, "umount", mp])
        tap.ok(rc != 0 and one_line(err) and is_mounted(mp),
               "umount of a busy mount is refused with one line", "rc=%d %r" % (rc, err))
        f.close()
        umount_ok(tap, mp, "umount once the file is closed")
    # -o rw cannot make it writable
    if mount_ok(tap, trace, mp, ["-o", "rw"]):
        try:
            os.close(os.open(os.path.join(mp, "README.txt"), os.O_WRONLY))
            e = None
        except OSError as ex:
            e = ex.errno
        tap.ok(e == errno.EROFS, "-o rw still refuses writes with EROFS", errno.errorcode.get(e))
        umount_ok(tap, mp)
    # many directory entries: readdir continues across several replies
    big = os.path.join(workdir, "wide.trace")
    rc, _, err = run([args.demo, "-o", big, "--events", "20000", "--ranks", "300",
                      "--threads", "1", "--timing", "none"], timeout=TIMEOUT)
    if tap.ok(rc == 0, "synth_demo --ranks 300", err) and mount_ok(tap, big, mp):
        names = os.listdir(os.path.join(mp, "ranks"))
        want = [e[2].decode() for e in Cli(args.tracefs, big).ls(b"ranks")]
        rc, out, _ = sh(["ls", "-1", "-U", os.path.join(mp, "ranks")])
        tap.ok(names == want and out.decode().split() == want,
               "a directory of %d entries lists each once, in order" % len(want),
               "got %d names, %d unique" % (len(names), len(set(names))))
        umount_ok(tap, mp)


def read_errno(path):
    """Read @path whole: (bytes, None) or (None, errno)."""
    try:
        with open(path, "rb") as f:
            return f.read(), None
    except OSError as e:
        return None, e.errno


def check_trace_changed(tap, args, workdir):
    """The trace file changing under a mount: a file renamed over it leaves the mount as it
    was; one shortened or rewritten in place makes reads fail with EIO, never kills the
    daemon (a shortened mapping faults with SIGBUS)."""
    orig = os.path.join(workdir, "chg-orig.trace")
    rc, _, err = run([args.demo, "-o", orig, "--events", "100000", "--ranks", "2",
                      "--threads", "4", "--seed", "7"], timeout=TIMEOUT)
    if not tap.ok(rc == 0, "synth_demo for the changed-trace cases", err):
        return
    mp = os.path.join(workdir, "chg")
    os.mkdir(mp)
    trace = os.path.join(workdir, "chg.trace")
    view = "ranks/1/threads/%d/trace.txt"
    cli = Cli(args.tracefs, orig)
    # renamed over: the mount keeps the file it opened
    shutil.copyfile(orig, trace)
    if mount_ok(tap, trace, mp):
        other = os.path.join(workdir, "chg-other.trace")
        rc, _, err = run([args.demo, "-o", other, "--events", "5000", "--seed", "8"],
                         timeout=TIMEOUT)
        os.rename(other, trace)
        got, e = read_errno(os.path.join(mp, view % 0))
        crc, want, _ = cli.cat((view % 0).encode())
        tap.ok(rc == 0 and crc == 0 and e is None and got == want and len(want) > 0,
               "a trace renamed over the mounted one: the mount reads the file it opened, "
               "byte for byte as tracefs cat", errno.errorcode.get(e))
        umount_ok(tap, mp, "umount after the rename")
    # shortened, then rewritten in place
    for how in ("shortened to a quarter", "rewritten in place"):
        shutil.copyfile(orig, trace)
        if not mount_ok(tap, trace, mp):
            continue
        pids = daemon_pids(mp)
        # opened before: the reads reach the daemon, which then meets the change (a
        # shortened file faults there), not the check at open
        files = [open(os.path.join(mp, view % th), "rb", buffering=0) for th in (1, 2, 3)]
        if how.startswith("shortened"):
            os.truncate(trace, os.path.getsize(trace) // 4)
        else:
            with open(trace, "r+b") as f:
                f.seek(os.path.getsize(trace) // 2)
                b = f.read(1)
                f.seek(-1, os.SEEK_CUR)
                f.write(b)  # the same byte: only the file's time says it changed
            st = os.stat(trace)
            os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns + 1000))
        errs = []
        for f in files:
            try:
                f.read()
                errs.append(None)
            except OSError as e:
                errs.append(e.errno)
            f.close()
        errs.append(read_errno(os.path.join(mp, view % 0))[1])  # opened after
        alive = os.path.isdir(os.path.join(mp, "ranks")) and \
            all(os.path.exists("/proc/%d" % p) for p in pids)
        tap.ok(errs == [errno.EIO] * 4 and alive,
               "trace %s while mounted: reads of files opened before and after fail with "
               "EIO, the daemon lives on" % how, [errno.errorcode.get(e) for e in errs])
        umount_ok(tap, mp, "umount after the trace was %s" % how)


def big_suite(tap, args, workdir):
    """A larger trace: whole views and parallel readers that reach the daemon."""
    trace = os.path.join(workdir, "big.trace")
    rc, _, err = run([args.demo, "-o", trace, "--events", str(args.big), "--timing",
                      args.timing, "--seed", str(args.seed), "--ranks", "2", "--threads", "4"],
                     timeout=TIMEOUT)
    mp = os.path.join(workdir, "big")
    os.mkdir(mp)
    if not tap.ok(rc == 0, "synth_demo --events %d" % args.big, err) or \
            not mount_ok(tap, trace, mp):
        return
    mt = MountedTrace(tap, args, workdir, trace, None, None, mp)
    tree = cli_tree(mt.cli)
    views = sorted((k for k, v in tree.items() if not v[0] and k.startswith(b"ranks/") and
                    b"/phases/" not in k), key=lambda k: (-tree[k][1], k))[:8]
    bad = []
    for rel in views:
        rc, cat, err = mt.cli.cat(rel)
        mt.full[rel] = cat
        data = read_file(mt.p(rel))
        if rc != 0 or data != cat or len(data) != tree[rel][1]:
            bad.append("%s: rc=%d read=%d cat=%d ls=%d" % (rel.decode(), rc, len(data),
                                                          len(cat), tree[rel][1]))
    tap.ok(not bad, "%d whole views (%.1f MB) read through the mount equal `tracefs cat`" % (
        len(views), sum(len(v) for v in mt.full.values()) / 1e6), "\n".join(bad))
    mt.parallel(views, False, "on 8 large files", rounds=60)
    mt.parallel([views[0]] * 8, False, "on one large file, 8 handles", rounds=60)
    mt.parallel([views[0]] * 8, True, "on one large file, one shared handle", rounds=60)
    mt.sequential(views, "of 8 large files")
    mt.sequential([views[0]] * 8, "of one large file")
    umount_ok(tap, mp)


# ---- main ----

def views_suite(tap, args, workdir):
    trace = os.path.join(workdir, "demo.trace")
    dump = os.path.join(workdir, "demo.jsonl")
    rc, out, err = run([args.demo, "-o", trace, "--dump", dump, "--events", str(args.events),
                        "--timing", args.timing, "--seed", str(args.seed), "--ranks", "2",
                        "--threads", "4", "--odd-phases"], timeout=TIMEOUT)
    if not tap.ok(rc == 0, "synth_demo: 2 ranks, 4 threads, phases, timing %s" % args.timing,
                  err):
        return
    model = Model(dump)
    rc, out, err = run([args.tracefs, "info", "--json", trace])
    info = json.loads(out)
    tap.ok(len(info["phases"]) >= 3 and info["n_streams"] >= 6,
           "the trace has %d streams and %d phases" % (info["n_streams"], len(info["phases"])))
    if model.timing != check_cli.TIMING_NONE:
        model.set_times(info["timing"]["max_ts_ns"], info["timing"]["max_dur_ns"])
    mp = os.path.join(workdir, "mnt")
    os.mkdir(mp)
    if not mount_ok(tap, trace, mp):
        return
    pids = daemon_pids(mp)
    mt = MountedTrace(tap, args, workdir, trace, model, info, mp)
    walked = mt.check_tree()
    mt.check_files(walked)
    mt.check_json(shutil.which("jq"))
    mt.check_slices()
    mt.check_tools()
    mt.check_parallel()
    mt.check_erofs()
    mt.check_inodes(walked)
    tap.ok(daemon_pids(mp) == pids and len(pids) == 1, "the same single daemon served it all")
    umount_ok(tap, mp)
    check_refusals(tap, args, workdir, trace, info)
    check_owner_and_nonempty(tap, args, workdir, trace)
    check_foreground(tap, args, workdir, trace)
    check_daemon_life(tap, args, workdir, trace)
    check_trace_changed(tap, args, workdir)
    if args.big:
        big_suite(tap, args, workdir)


def main():
    global MOUNTS, WORKDIR
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--demo", required=True)
    ap.add_argument("--timing", default="lossless")
    ap.add_argument("--events", type=int, default=60000)
    ap.add_argument("--big", type=int, default=0, help="also a trace of this many events")
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--watchdog", type=int, default=540)
    args = ap.parse_args()
    args.tracefs = os.path.abspath(args.tracefs)
    args.demo = os.path.abspath(args.demo)
    if not os.path.exists("/dev/fuse"):
        print("1..0 # SKIP /dev/fuse is absent")
        return 77
    tap = Tap()
    tap.diag("seed %d (rerun with --seed %d)" % (args.seed, args.seed))
    MOUNTS = Mounts(args.tracefs)
    atexit.register(cleanup)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(s, on_signal)
    watchdog(args.watchdog)
    workdir = WORKDIR = tempfile.mkdtemp(prefix="tracefs-mount-")
    try:
        views_suite(tap, args, workdir)
    finally:
        MOUNTS.undo()
        leftover = [mp for mp in MOUNTS.points if is_mounted(mp)]
        tap.ok(not leftover, "no mount left behind", leftover)
        WORKDIR = workdir
        cleanup()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
