#!/usr/bin/env python3
"""End-to-end tests of the LD_PRELOAD interposers of libtfscapture.so (TAP).

1. cap_io.c, a program with exactly known calls, traced with `tracefs record`, built twice
   three times (with _FILE_OFFSET_BITS=64 it calls open64, pread64, fopen64...; cap_io32
   calls the plain names; cap_io_fortified calls __read_chk, __pread64_chk, __fread_chk)
   and holding the same expectation: the events
   `tracefs cat TRACE ranks/0/threads/0/trace.txt` decodes are compared line by line with an
   expectation written here from cap_io.c's description (sizes, offsets, flags from Python's
   os module, symbolic file ids in order of first use, results, errno values). Pointers
   cannot be known in advance: each allocation's result is bound at its first appearance
   and every later use (free, realloc) must repeat it; alignments are checked.
2. 16 threads, each 10 x {malloc, write, free}: one stream each, in creation order.
3. Real programs nobody here wrote: `gzip -c` and `sort` on generated files. Their output
   traced is byte-identical to untraced; the trace verifies; gzip's traced read/write calls
   equal strace's count minus the dynamic loader's reads of shared objects (made before any
   library constructor runs, so no preload can see them); sort's traced allocations and frees
   equal valgrind's "total heap usage" with --run-libc-freeres=no (by default valgrind calls
   glibc's __libc_freeres at exit, which frees glibc-internal memory a native run never frees);
   sort's freads and fwrites (coreutils calls fread_unlocked, fwrite_unlocked) move exactly
   its input's and its output's bytes.
4. errno is preserved, --trace=zones,mem records no calls, TFS_TRACE selects categories
   in-process; a descriptor the program did not open (gzip's stdout) is declared once with
   its /proc/self/fd path by an fd_file event.
5. Allocation ids and buffers: `cap_io bufs` with exact ids and offsets (heap buffer at
   offset 0 and inside, stack buffer, realloc that moved, anonymous and file mappings, a
   munmap that splits a mapping); `cap_io seqread` whose two read loops are one grammar rule
   with stride-predicted values; `cap_io churn`, 16 threads allocating, preading into their
   blocks and freeing at once: every id allocated once, every free and every buffer names
   the right live block, output byte-identical to untraced; TFS_ALLOC_IDS=0 turns ids off.
6. A closefrom loop (`cap_io closefrom N`: close(3) to close(N - 1), one number inherited
   open): every number not open is the one file "(not open)", declared once, the call
   signatures and the trace do not grow with N, each close is in trace.txt with its number
   and errno, the inherited descriptor is named from /proc/self/fd, and no number but that
   one costs a readlink of /proc/self/fd.

  check_interpose.py --tracefs T --capio C --capio32 C32 --capio-fortified CF --lib LIB
"""

import argparse
import errno
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

LINE = re.compile(r"^\s*(?:[0-9.]+\s+\d+\s+)?T\d+\s+(.*?)\s*$")  # timing none: no ts, dur
STACK_ARG = re.compile(r", stack=stack#\d+")
ALLOC_KINDS = ("malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc",
               "memalign", "mmap", "munmap")
# valgrind and the trace may differ by allocations made before the preload constructor runs
# (none seen on Debian 12 with glibc 2.36): the tolerance allows for a few
ALLOC_TOLERANCE = 2



def run(cmd, env=None, timeout=300, cwd=None, stdout=subprocess.PIPE):
    e = dict(os.environ)
    for k in ("TFS_CAPTURE", "TFS_OUTPUT", "TFS_SPOOL", "TFS_TIMING", "TFS_TRACE", "LD_PRELOAD"):
        e.pop(k, None)
    e.update(env or {})
    p = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, env=e, timeout=timeout,
                       cwd=cwd, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def cat_events(tracefs, trace, thread):
    rc, out, err = run([tracefs, "cat", trace, "ranks/0/threads/%d/trace.txt" % thread])
    if rc != 0:
        raise RuntimeError("cat thread %d: %s" % (thread, err.decode(errors="replace")))
    ev = []
    for line in out.decode().splitlines():
        m = LINE.match(line)
        if m:
            # allocation backtraces are check_backtrace.py's: their stack ids are left out
            ev.append(STACK_ARG.sub("", m.group(1)))
    return ev


def kind(e):
    return e.split("(", 1)[0]


def n_streams(tracefs, trace):
    rc, out, _ = run([tracefs, "info", trace])
    m = re.search(rb"^streams:\s+(\d+)", out, re.M)
    return int(m.group(1)) if m else 0


class Binder:
    """Matches an expected line with {NAME} placeholders (a hex pointer or a decimal number)
    against an actual one: a name bound once must match the same text everywhere."""

    def __init__(self):
        self.vals = {}

    def match(self, exp, act):
        parts = re.split(r"\{(\w+)\}", exp)
        rx = ""
        names = []
        for i, p in enumerate(parts):
            if i % 2:
                rx += r"(0x[0-9a-f]+|\d+)"
                names.append(p)
            else:
                rx += re.escape(p)
        m = re.fullmatch(rx, act)
        if not m:
            return False
        for name, val in zip(names, m.groups()):
            if name in self.vals and self.vals[name] != val:
                return False
        for name, val in zip(names, m.groups()):
            self.vals[name] = val
        return True


def compare(exp, act):
    """None when they match, else a description of the first difference."""
    b = Binder()
    for i in range(max(len(exp), len(act))):
        e = exp[i] if i < len(exp) else "(nothing)"
        a = act[i] if i < len(act) else "(nothing)"
        if not b.match(e, a):
            return "event %d: expected %s\n          got %s" % (i, e, a), b
    return None, b


# ---- the expectation, from cap_io.c's description ----

def ok_call(name, args, ret, err=0):
    return "%s(%s, errno=%d) = %s" % (name, args, err, ret)


def expect_allocs():
    """Allocation ids count from 1: nothing is allocated before main."""
    ev = ["malloc(size=64, id=%d) = {P%d}" % (i + 1, i) for i in range(100)]
    ev += ["free(ptr={P%d}, id=%d)" % (i, i + 1) for i in range(100)]
    # realloc may grow the block in place (same id, nothing freed) or move it: checked after
    ev += ["calloc(nmemb=10, size=100, bytes=1000, id=101) = {C}",
           "realloc(ptr={C}, size=2000, id={RID}, freed={RFREED}) = {R}",
           "free(ptr={R}, id={RID})",
           "posix_memalign(alignment=64, size=1000, ptr={M64}, id={I1}) = 0",
           "free(ptr={M64}, id={I1})",
           "aligned_alloc(alignment=128, size=256, id={I2}) = {A128}",
           "free(ptr={A128}, id={I2})",
           "memalign(alignment=32, size=100, id={I3}) = {A32}",
           "free(ptr={A32}, id={I3})",
           "free(ptr=0x0, id=0)"]
    return ev


def realloc_ids_ok(v):
    """The realloc of expect_allocs kept block 101 in place, or moved it to a new id 102."""
    moved = v["R"] != v["C"]
    rid, freed = int(v["RID"]), int(v["RFREED"])
    nxt = 103 if moved else 102
    return ((rid, freed) == ((102, 101) if moved else (101, 0))
            and [int(v["I%d" % i]) for i in (1, 2, 3)] == [nxt, nxt + 1, nxt + 2])


def expect_io(d):
    f_data, f_fd3, f_c, f_v, f_text, f_missing = range(6)  # file ids, in order of first use
    # the name of each, as the views attach it to a descriptor
    name = {f_data: d + "/data", f_fd3: "(not open)", f_c: d + "/c", f_v: d + "/v",
            f_text: d + "/text"}
    rw = os.O_RDWR | os.O_CREAT | os.O_TRUNC
    # every buffer is the program's static one: in no allocation, its address as the offset
    sb = "buf={B}"
    ev = ['open(path="%s/data", flags=0x%x, mode=0x%x, file=file#%d, errno=0) = 3'
          % (d, rw, 0o600, f_data)]
    ev += [ok_call("write", "fd=3<%s>, count=4096, %s" % (name[f_data], sb), 4096)] * 10
    ev += [ok_call("lseek", "fd=3<%s>, offset=0, whence=%d" % (name[f_data], os.SEEK_SET), 0)]
    ev += [ok_call("read", "fd=3<%s>, count=4096, %s" % (name[f_data], sb), 4096)] * 10
    ev += [ok_call("read", "fd=3<%s>, count=4096, %s" % (name[f_data], sb), 0)]
    ev += [ok_call("pread", "fd=3<%s>, count=512, offset=%d, %s" % (name[f_data], i * 4096, sb),
                   512) for i in range(4)]
    ev += [ok_call("pwrite", "fd=3<%s>, count=100, offset=40960, %s" % (name[f_data], sb), 100),
           ok_call("ftruncate", "fd=3<%s>, length=8192" % name[f_data], 0),
           ok_call("fsync", "fd=3<%s>" % name[f_data], 0),
           ok_call("fdatasync", "fd=3<%s>" % name[f_data], 0),
           ok_call("close", "fd=3<%s>" % name[f_data], 0),
           # fd 3 is closed: the one id of every descriptor not open, named once
           'fd_file(fd=-1, path="(not open)", file=file#%d)' % f_fd3,
           ok_call("read", "fd=3<%s>, count=1, %s" % (name[f_fd3], sb), -1, errno.EBADF),
           'creat(path="%s/c", mode=0x%x, file=file#%d, errno=0) = 3' % (d, 0o644, f_c),
           ok_call("write", "fd=3<%s>, count=10, %s" % (name[f_c], sb), 10),
           ok_call("close", "fd=3<%s>" % name[f_c], 0),
           'open(path="%s/v", flags=0x%x, mode=0x%x, file=file#%d, errno=0) = 3'
           % (d, os.O_RDWR | os.O_CREAT, 0o600, f_v),
           ok_call("writev", "fd=3<%s>, iovcnt=2, %s" % (name[f_v], sb), 30),
           ok_call("lseek", "fd=3<%s>, offset=0, whence=%d" % (name[f_v], os.SEEK_SET), 0),
           ok_call("readv", "fd=3<%s>, iovcnt=2, %s" % (name[f_v], sb), 30),
           ok_call("close", "fd=3<%s>" % name[f_v], 0),
           # the same path again: the same file id
           'openat(dirfd=-100, path="%s/data", flags=0x%x, mode=0x0, file=file#%d, errno=0) = 3'
           % (d, os.O_RDONLY, f_data),
           ok_call("close", "fd=3<%s>" % name[f_data], 0),
           'fopen(path="%s/text", opentype="w", file=file#%d, errno=0) = 3' % (d, f_text),
           ok_call("fwrite", "fd=3<%s>, size=1, nmemb=1000, %s, bytes=1000"
                   % (name[f_text], sb), 1000),
           ok_call("fwrite", "fd=3<%s>, size=100, nmemb=3, %s, bytes=300"
                   % (name[f_text], sb), 3),
           ok_call("fflush", "fd=3<%s>" % name[f_text], 0),
           ok_call("fseek", "fd=3<%s>, offset=0, whence=%d" % (name[f_text], os.SEEK_END), 0),
           ok_call("fclose", "fd=3<%s>" % name[f_text], 0),
           'fopen(path="%s/data", opentype="r", file=file#%d, errno=0) = 3' % (d, f_data),
           ok_call("fread", "fd=3<%s>, size=4096, nmemb=2, %s, bytes=8192"
                   % (name[f_data], sb), 2),
           ok_call("fclose", "fd=3<%s>" % name[f_data], 0),
           'fopen(path="%s/missing/x", opentype="r", file=file#%d, errno=%d) = -1'
           % (d, f_missing, errno.ENOENT),
           'open(path="%s/c", flags=0x%x, mode=0x0, file=file#%d, errno=0) = 3'
           % (d, os.O_RDONLY, f_c),
           'fdopen(fd=3<%s>, opentype="r", errno=0) = 3' % name[f_c],
           ok_call("fclose", "fd=3<%s>" % name[f_c], 0),
           'rename(oldpath="%s/text", newpath="%s/text2", errno=0) = 0' % (d, d),
           'unlink(path="%s/text2", errno=0) = 0' % d,
           'unlink(path="%s/text2", errno=%d) = -1' % (d, errno.ENOENT)]
    return ev


def test_known_calls(tap, args, work):
    known_calls(tap, args, work, args.capio, "calls")
    known_calls(tap, args, work, args.capio32, "calls (plain names)")
    known_calls(tap, args, work, args.capio_fortified, "calls (fortified)")


def known_calls(tap, args, work, prog, what):
    d = tempfile.mkdtemp(dir=work)
    out = os.path.join(work, "calls.trace")
    rc, sout, serr = run([args.tracefs, "record", "-o", out, "--", prog, "calls", d])
    if not tap.ok(rc == 0 and sout == b"", "%s: traced program exits 0, prints nothing" % what,
                  serr):
        return
    tap.ok(run([args.tracefs, "verify", out])[0] == 0, "%s: trace verifies" % what)
    ev = cat_events(args.tracefs, out, 0)
    # the allocations of the program come first (nothing allocates before main)...
    exp_a = expect_allocs()
    diff, b = compare(exp_a, ev[:len(exp_a)])
    tap.ok(diff is None, "%s: %d allocation events exactly as the program made them"
           % (what, len(exp_a)), diff)
    if diff is None:
        ptrs = [int(b.vals["P%d" % i], 16) for i in range(100)]
        tap.ok(len(set(ptrs)) == 100 and all(p % 16 == 0 for p in ptrs)
               and int(b.vals["M64"], 16) % 64 == 0 and int(b.vals["A128"], 16) % 128 == 0
               and int(b.vals["A32"], 16) % 32 == 0,
               "%s: 100 live blocks distinct, alignments honoured" % what, b.vals)
        tap.ok(realloc_ids_ok(b.vals), "%s: realloc keeps the id in place, else a new id and "
               "the old one freed; later ids consecutive" % what, b.vals)
    # ...then I/O; the allocations stdio makes for its FILEs and buffers are glibc's (their
    # sizes are not the program's to know): left out of the comparison, checked to balance
    rest = ev[len(exp_a):]
    io = [e for e in rest if kind(e) not in ALLOC_KINDS]
    diff, _ = compare(expect_io(d), io)
    tap.ok(diff is None, "%s: %d I/O events with exact sizes, offsets, file ids, results, "
           "errno" % (what, len(expect_io(d))), diff)
    live = set()
    for e in rest:
        m = re.match(r"(malloc|calloc)\(.*\) = (0x[0-9a-f]+)$", e)
        if m:
            live.add(m.group(2))
        m = re.match(r"free\(ptr=(0x[0-9a-f]+), id=\d+\)$", e)
        if m and m.group(1) != "0x0":
            live.discard(m.group(1))
    tap.ok(not live, "%s: stdio's own allocations are all freed by fclose" % what, live)


def test_threads(tap, args, work, n=16):
    d = tempfile.mkdtemp(dir=work)
    out = os.path.join(work, "threads.trace")
    rc, _, serr = run([args.tracefs, "record", "-o", out, "--", args.capio, "threads", d,
                       str(n)])
    if not tap.ok(rc == 0 and b" 0 dropped" in serr, "threads: %d threads traced, none dropped"
                  % n, serr):
        return
    tap.ok(run([args.tracefs, "verify", out])[0] == 0, "threads: trace verifies")
    tap.ok(n_streams(args.tracefs, out) == n + 1, "threads: %d streams" % (n + 1))
    fl = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    exp_main = ['open(path="%s/t", flags=0x%x, mode=0x180, file=file#0, errno=0) = 3' % (d, fl)]
    exp_main += ["pthread_create(thread=thread#%d) = 0" % t for t in range(1, n + 1)]
    exp_main += ["pthread_join(thread=thread#%d) = 0" % t for t in range(1, n + 1)]
    exp_main += ["close(fd=3<%s/t>, errno=0) = 0" % d]
    # pthread_create allocates the new thread's TLS vector through calloc: glibc's, left out
    main = [e for e in cat_events(args.tracefs, out, 0) if kind(e) not in ALLOC_KINDS]
    diff, _ = compare(exp_main, main)
    tap.ok(diff is None, "threads: main opens, creates and joins thread#1..%d in order" % n, diff)
    exp = []
    for i in range(10):
        exp += ["malloc(size=32, id={I%d}) = {P}" % i,
                "write(fd=3<%s/t>, count=16, buf=alloc#{I%d}+0x%x, errno=0) = 16" % (d, i, i),
                "free(ptr={P}, id={I%d})" % i]
    bad = []
    ids = []
    for t in range(1, n + 1):
        diff, b = compare(exp, cat_events(args.tracefs, out, t))
        if diff:
            bad.append("thread %d: %s" % (t, diff))
        else:
            ids += [int(b.vals["I%d" % i]) for i in range(10)]
    tap.ok(not bad, "threads: each of %d threads has exactly its 30 events, each write from "
           "the block just allocated" % n, "\n".join(bad))
    tap.ok(len(ids) == 10 * n and len(set(ids)) == len(ids) and 0 not in ids,
           "threads: %d allocation ids, all distinct" % (10 * n), sorted(ids))
    with open(os.path.join(d, "t"), "rb") as f:
        tap.ok(len(f.read()) == n * 160, "threads: the file holds every write")


def gen_text(path, n_lines, seed):
    rnd = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota"]
    with open(path, "w") as f:
        for i in range(n_lines):
            f.write(" ".join(rnd.choice(words) for _ in range(rnd.randint(1, 12))))
            f.write(" %d\n" % rnd.randint(0, 10 ** 9))


def count_kinds(tracefs, trace):
    counts = {}
    ev = []
    for t in range(n_streams(tracefs, trace)):
        ev += cat_events(tracefs, trace, t)
    for e in ev:
        counts[kind(e)] = counts.get(kind(e), 0) + 1
    return counts, ev


def strace_counts(cmd, work):
    """{syscall: calls} from strace -f -c -e trace=read,write, and the loader's reads."""
    sfile = os.path.join(work, "strace.c")
    rc, _, err = run(["strace", "-f", "-c", "-e", "trace=read,write", "-o", sfile] + cmd,
                     stdout=subprocess.DEVNULL)
    if rc != 0:
        raise RuntimeError("strace: %s" % err.decode(errors="replace"))
    counts = {}
    with open(sfile) as f:
        for line in f:
            tok = line.split()
            if len(tok) >= 5 and tok[-1] in ("read", "write") and tok[3].isdigit():
                counts[tok[-1]] = int(tok[3])
    # the dynamic loader reads each shared object's ELF header before any constructor runs
    yfile = os.path.join(work, "strace.y")
    run(["strace", "-f", "-y", "-e", "trace=read", "-o", yfile] + cmd, stdout=subprocess.DEVNULL)
    with open(yfile) as f:
        loader = sum(1 for line in f if re.search(r"read\(\d+</[^>]*\.so(\.[0-9.]+)?>", line))
    return counts, loader


def test_gzip(tap, args, work):
    gzip = shutil.which("gzip")
    if not gzip or not shutil.which("strace"):
        tap.skip("gzip against strace", "gzip or strace missing")
        return
    src = os.path.join(work, "words.txt")
    gen_text(src, 200000, 1)
    rc, plain, _ = run([gzip, "-c", src])
    out = os.path.join(work, "gzip.trace")
    rc2, traced, serr = run([args.tracefs, "record", "-o", out, "--", gzip, "-c", src])
    tap.ok(rc == 0 and rc2 == 0 and traced == plain and len(plain) > 0,
           "gzip: traced output byte-identical to untraced (%d bytes)" % len(plain), serr)
    tap.ok(run([args.tracefs, "verify", out])[0] == 0, "gzip: trace verifies")
    counts, ev = count_kinds(args.tracefs, out)
    # stdout (a pipe here) was opened by the test, not by gzip: its path is stored once (the
    # input, opened relative to its directory's descriptor, is named by an fd_file too)
    decl = [e for e in ev if kind(e) == "fd_file" and "(fd=1," in e]
    m = re.fullmatch(r'fd_file\(fd=1, path="(pipe:\[\d+\])", file=file#\d+\)', decl[0]) \
        if len(decl) == 1 else None
    tap.ok(m is not None and all("fd=1<%s>," % m.group(1) in e
                                 for e in ev if kind(e) == "write"),
           "gzip: stdout declared once by fd_file, every write on its file id", decl)
    st, loader = strace_counts([gzip, "-c", src], work)
    tap.ok(counts.get("read", 0) == st.get("read", -1) - loader and loader > 0,
           "gzip: traced reads %d = strace's %d - %d by the dynamic loader"
           % (counts.get("read", 0), st.get("read", -1), loader), counts)
    tap.ok(counts.get("write", 0) == st.get("write", -1),
           "gzip: traced writes %d = strace's %d" % (counts.get("write", 0), st.get("write", -1)),
           counts)


def stdio_bytes(ev, name, path):
    """Bytes moved by the fread or fwrite calls (size x result) on the file of @path (or
    whose name starts so: a pipe), as the views name it on each line."""
    total = 0
    for e in ev:
        m = re.fullmatch(name + r"\(fd=-?\d+<([^>]*)>, size=(\d+), .*\) = (\d+)", e)
        if m and (m.group(1) == path or m.group(1).startswith(path)):
            total += int(m.group(2)) * int(m.group(3))
    return total


def test_sort(tap, args, work):
    sort = shutil.which("sort")
    if not sort:
        tap.skip("sort against valgrind", "sort missing")
        return
    src = os.path.join(work, "lines.txt")
    gen_text(src, 100000, 2)
    env = {"LC_ALL": "C"}
    # a 1 MiB buffer: sort spills sorted runs to temporary files and merges them
    cmd = [sort, "-S", "1M", "-T", tempfile.mkdtemp(dir=work), src]
    rc, plain, _ = run(cmd, env=env)
    out = os.path.join(work, "sort.trace")
    rc2, traced, serr = run([args.tracefs, "record", "-o", out, "--"] + cmd, env=env)
    tap.ok(rc == 0 and rc2 == 0 and traced == plain and len(plain) > 0,
           "sort: traced output byte-identical to untraced (%d bytes)" % len(plain), serr)
    tap.ok(run([args.tracefs, "verify", out])[0] == 0, "sort: trace verifies")
    # coreutils does its stdio through the _unlocked names (fread_unlocked, fwrite_unlocked)
    counts, ev = count_kinds(args.tracefs, out)
    tap.ok(stdio_bytes(ev, "fread", src) == os.path.getsize(src),
           "sort: its freads of the input add up to the input's %d bytes"
           % os.path.getsize(src), "got %d" % stdio_bytes(ev, "fread", src))
    tap.ok(stdio_bytes(ev, "fwrite", "pipe:[") == len(plain),
           "sort: its fwrites to stdout add up to the output's %d bytes" % len(plain),
           "got %d" % stdio_bytes(ev, "fwrite", "pipe:["))
    if not shutil.which("valgrind"):
        tap.skip("sort against valgrind", "valgrind missing")
        return
    allocs = sum(1 for e in ev if re.match(r"(malloc|calloc|realloc|aligned_alloc|memalign)\(.*"
                                           r" = 0x[0-9a-f]*[1-9a-f][0-9a-f]*$", e))
    allocs += sum(1 for e in ev if re.match(r"posix_memalign\(.*\) = 0$", e))
    frees = sum(1 for e in ev if re.match(r"free\(ptr=0x[0-9a-f]*[1-9a-f]", e))
    frees += sum(1 for e in ev if re.match(r"realloc\(ptr=0x[0-9a-f]*[1-9a-f]", e))
    rc, _, err = run(["valgrind", "--trace-children=no", "--run-libc-freeres=no",
                      "--run-cxx-freeres=no"] + cmd, env=env, stdout=subprocess.DEVNULL)
    m = re.search(rb"total heap usage: ([\d,]+) allocs, ([\d,]+) frees", err)
    if not tap.ok(m is not None, "sort: valgrind reports heap usage", err[-2000:]):
        return
    va, vf = (int(x.replace(b",", b"")) for x in m.groups())
    tap.ok(abs(allocs - va) <= ALLOC_TOLERANCE and abs(frees - vf) <= ALLOC_TOLERANCE,
           "sort: traced %d allocs, %d frees; valgrind %d allocs, %d frees (tolerance %d)"
           % (allocs, frees, va, vf, ALLOC_TOLERANCE))


def test_errno_and_selection(tap, args, work):
    out = os.path.join(work, "errno.trace")
    rc, _, serr = run([args.tracefs, "record", "-o", out, "--", args.capio, "errno"])
    tap.ok(rc == 0, "errno: every traced call leaves errno as the real call does", serr)
    d = tempfile.mkdtemp(dir=work)
    out = os.path.join(work, "nocalls.trace")
    rc, _, serr = run([args.tracefs, "record", "--trace=zones,mem", "-o", out, "--",
                       args.capio, "calls", d])
    counts, _ = count_kinds(args.tracefs, out) if rc == 0 else ({"?": 1}, [])
    tap.ok(rc == 0 and not counts, "--trace=zones,mem: no call recorded", counts)
    d = tempfile.mkdtemp(dir=work)
    out = os.path.join(work, "io-only.trace")
    rc, _, serr = run([args.capio, "calls", d],
                      env={"LD_PRELOAD": args.lib, "TFS_TRACE": "io", "TFS_OUTPUT": out})
    counts, _ = count_kinds(args.tracefs, out) if rc == 0 else ({}, [])
    tap.ok(rc == 0 and counts.get("write") == 11 and not any(k in counts for k in ALLOC_KINDS),
           "TFS_TRACE=io in-process: I/O recorded, allocations not", counts)


# ---- allocation ids and buffers ----

def expect_bufs(d):
    """cap_io bufs, from its description in cap_io.c."""
    w = lambda buf, count, ret=None, err=0: ok_call(  # noqa: E731
        "write", "fd=3<%s/b>, count=%d, %s" % (d, count, buf), count if ret is None else ret,
        err)
    return ['open(path="%s/b", flags=0x%x, mode=0x180, file=file#0, errno=0) = 3'
            % (d, os.O_RDWR | os.O_CREAT | os.O_TRUNC),
            "malloc(size=8192, id=1) = {P}",
            "malloc(size=100, id=2) = {PIN}",
            w("buf=alloc#1+0x0", 4096),
            w("buf=alloc#1+0x64", 50),
            w("buf={STACK}", 10),
            "realloc(ptr={P}, size=%d, id=3, freed=1) = {Q}" % (4 << 20),
            w("buf=alloc#3+0x3e8", 10),
            "free(ptr={Q}, id=3)",
            "free(ptr={PIN}, id=2)",
            "mmap(addr=0x0, length=16384, prot=0x%x, flags=0x%x, file=-1, "
            "offset=0, id=4, errno=0) = {M}" % (PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS),
            w("buf=alloc#4+0x1008", 8),
            "munmap(addr={M1}, length=4096, errno=0) = 0",
            w("buf=alloc#4+0x2010", 8),
            w("buf={M1D}", 8, -1, errno.EFAULT),
            "munmap(addr={M}, length=4096, errno=0) = 0",
            "munmap(addr={M2}, length=8192, errno=0) = 0",
            "mmap(addr=0x0, length=8192, prot=0x1, flags=0x%x, file=file#0, offset=0, id=5, "
            "errno=0) = {F}" % MAP_PRIVATE,
            w("buf=alloc#5+0xa", 5),
            "munmap(addr={F}, length=8192, errno=0) = 0",
            "close(fd=3<%s/b>, errno=0) = 0" % d]


PROT_RW = 0x3          # PROT_READ | PROT_WRITE
MAP_PRIVATE = 0x2
MAP_ANONYMOUS = 0x20   # Linux, every architecture Debian builds tracefs for


def test_bufs(tap, args, work):
    d = tempfile.mkdtemp(dir=work)
    out = os.path.join(work, "bufs.trace")
    rc, _, serr = run([args.tracefs, "record", "-o", out, "--", args.capio, "bufs", d])
    if not tap.ok(rc == 0, "bufs: traced program exits 0 (its realloc moved, mmap worked)",
                  serr):
        return
    tap.ok(run([args.tracefs, "verify", out])[0] == 0, "bufs: trace verifies")
    ev = cat_events(args.tracefs, out, 0)
    diff, b = compare(expect_bufs(d), ev)
    tap.ok(diff is None, "bufs: ids and offsets of heap, stack and mapped buffers exact", diff)
    if diff is None:
        m = int(b.vals["M"], 16)
        tap.ok(int(b.vals["M1"], 16) == m + 4096 and int(b.vals["M1D"], 16) == m + 4096
               and int(b.vals["M2"], 16) == m + 8192,
               "bufs: the unmapped middle page is no allocation (id 0, its address); the "
               "pages either side keep id 4 and offsets from the original start", b.vals)
    rc, jsonl, err = run([args.tracefs, "cat", out, "ranks/0/threads/0/events.jsonl"])
    maps = [json.loads(ln)["args"] for ln in jsonl.decode().splitlines()
            if '"name":"mmap"' in ln] if rc == 0 else err
    tap.ok([(a.get("file"), a.get("length")) for a in maps] == [(None, 16384), ("file#0", 8192)],
           "bufs: events.jsonl gives the anonymous mapping file null, the file-backed one "
           "file#0", maps)
    rc, sig, err = run([args.tracefs, "cat", out, "signatures.txt"])
    tap.ok(rc == 0 and b"file=-1," in sig and b"file#4294967295" not in sig,
           "bufs: signatures.txt shows the anonymous mapping's file as -1", sig + err)


def test_seqread(tap, args, work, n=3000):
    d = tempfile.mkdtemp(dir=work)
    out = os.path.join(work, "seq.trace")
    rc, _, serr = run([args.tracefs, "record", "--timing=none", "-o", out, "--", args.capio,
                       "seqread", d, str(n)])
    if not tap.ok(rc == 0, "seqread: traced program exits 0", serr):
        return
    ev = cat_events(args.tracefs, out, 0)
    reads = [e for e in ev if kind(e) == "read"]
    exp = ["read(fd=3<%s/s>, count=512, buf=alloc#1+0x%x, errno=0) = 512" % (d, i * 512)
           for i in range(n)]
    exp += ["read(fd=3<%s/s>, count=512, buf=alloc#1+0x0, errno=0) = 512" % d] * n
    tap.ok(reads == exp, "seqread: %d reads walking through block 1, %d into its start"
           % (n, n), (reads[:3], reads[n:n + 3]))
    rc, sigs, _ = run([args.tracefs, "cat", out, "signatures.txt"])
    m = re.search(rb"^\s*(\d+)\s+(\d+)\s+read\(", sigs, re.M)
    tap.ok(m is not None and int(m.group(2)) == 2 * n,
           "seqread: every read shares one call signature", sigs)
    if m is None:
        return
    t = "t%d" % int(m.group(1))
    rc, gram, _ = run([args.tracefs, "cat", out, "grammar.txt"])
    uses = re.findall(rb"\b" + t.encode() + rb"(\^\d+)?\b", gram)
    tap.ok(uses == [b"^%d" % n], "seqread: both loops are one grammar element %s^%d (a rule "
           "used twice)" % (t, n), gram)
    rc, info, _ = run([args.tracefs, "cat", out, "info.json"])
    vb = re.search(rb'"values_bytes":\s*(\d+)', info)
    # five VAL fields per read: unpredicted offsets alone would need 2 bytes per read
    tap.ok(vb is not None and int(vb.group(1)) < n // 10,
           "seqread: stride prediction: %s values bytes for %d reads"
           % (vb.group(1).decode() if vb else "?", 2 * n), info[:400])


ALLOC_RX = re.compile(r"(malloc|calloc|realloc|mmap|posix_memalign|aligned_alloc|memalign)"
                      r"\((.*)\) = (0x[0-9a-f]+|-?\d+)$")


def fields(e):
    return dict(kv.split("=", 1) for kv in e[e.index("(") + 1:e.rindex(")")].split(", "))


def parse_buf(v):
    """(allocation id, offset) of a buffer as FORMAT.md §9.3 prints it: `alloc#N+0xOFF`, or
    `0xADDR` in no allocation (id 0)."""
    m = re.fullmatch(r"(?:alloc#(\d+)\+)?0x([0-9a-f]+)", v)
    return (int(m.group(1) or 0), int(m.group(2), 16))


def churn_check(streams):
    """Problems found in `cap_io churn` streams ([] when consistent), the blocks, the reads
    into them, and how many of a thread's new ids follow its previous one (allocs_i.h: a
    thread takes its ids in batches), against how many new ids there were."""
    bad, owner, freed, n_heap_reads, n_next, n_new = [], {}, set(), 0, 0, 0
    for t, ev in enumerate(streams):
        live = {}  # id -> (ptr, size) of this thread's live blocks
        last = 0  # the thread's last new id
        for e in ev:
            k, f = kind(e), fields(e)
            m = ALLOC_RX.match(e)
            if m:
                i, ptr = int(f["id"]), m.group(3)
                if k == "realloc" and i in live and live[i][0] == ptr == f["ptr"]:
                    del owner[i]  # grown in place: the same block, the same id
                elif last:
                    n_new += 1
                    n_next += i == last + 1
                    if i <= last:
                        bad.append("T%d: id %d after %d: a thread's ids go up" % (t, i, last))
                if i not in live:
                    last = max(last, i)
                if i in owner:
                    bad.append("T%d: id %d allocated twice: %s" % (t, i, e))
                if k == "realloc" and int(f["freed"]):
                    live.pop(int(f["freed"]), None)
                    freed.add(int(f["freed"]))
                size = int(f.get("length", f.get("size", 0)))
                owner[i] = (t, ptr)
                live[i] = (ptr, size)
            elif k in ("free", "munmap"):
                ptr = f.get("ptr", f.get("addr"))
                hit = [i for i, (p, _) in live.items() if p == ptr]
                if k == "free" and int(f["id"]) != (hit[0] if hit else 0) and ptr != "0x0":
                    bad.append("T%d: free names id %s, live block at %s is %s"
                               % (t, f["id"], ptr, hit))
                for i in hit:
                    del live[i]
                    freed.add(i)
            elif k == "pread" and parse_buf(f["buf"])[0]:
                n_heap_reads += 1
                i, off = parse_buf(f["buf"])
                if i not in live or off != live[i][1] // 2:
                    bad.append("T%d: %s: not the middle of a live block of this thread (%s)"
                               % (t, e, live.get(i)))
            elif k == "pread" and f["offset"] != "0":
                bad.append("T%d: a read into a live block recorded as no allocation: %s" % (t, e))
    return bad, len(owner), n_heap_reads, n_next, n_new


def test_churn(tap, args, work, n=16, rounds=1500):
    d = tempfile.mkdtemp(dir=work)
    out = os.path.join(work, "churn.trace")
    cmd = [args.capio, "churn", d, str(n), str(rounds)]
    rc, plain, _ = run(cmd)
    rc2, traced, serr = run([args.tracefs, "record", "-o", out, "--"] + cmd)
    if not tap.ok(rc == 0 and rc2 == 0 and traced == plain and b" 0 dropped" in serr,
                  "churn: %d threads, output byte-identical to untraced, none dropped" % n,
                  serr):
        return
    tap.ok(run([args.tracefs, "verify", out])[0] == 0, "churn: trace verifies")
    streams = [cat_events(args.tracefs, out, t) for t in range(1, n + 1)]
    bad, n_ids, n_reads, n_next, n_new = churn_check(streams)
    tap.ok(not bad and n_reads == n * rounds,
           "churn: %d ids each allocated once, frees and %d buffers name the right live block"
           % (n_ids, n_reads), "\n".join(bad[:20]))
    # from a batch of its own, a thread's next id is its last plus one but at a batch's end
    tap.ok(n_new > 1000 and n_next * 100 >= n_new * 97,
           "churn: %d of %d new ids of a thread follow its last one" % (n_next, n_new))


def test_forks(tap, args, work, n=200):
    d = tempfile.mkdtemp(dir=work)
    out = os.path.join(work, "forks.trace")
    try:
        rc, _, serr = run([args.tracefs, "record", "-o", out, "--", args.capio, "forks", d,
                           str(n)], timeout=120)
    except subprocess.TimeoutExpired:
        rc, serr = -1, b"timed out: a child hung on a lock held at fork"
    tap.ok(rc == 0, "forks: %d forks while 4 threads allocate, every child allocates, writes "
           "and exits" % n, serr)
    if rc == 0:
        writes = [e for e in cat_events(args.tracefs, out, 0) if kind(e) == "write"]
        tap.ok(len(writes) == 1, "forks: children's calls stay out of the parent's trace",
               writes)


def record_closefrom(args, work, n, inherited, strace=None):
    """`cap_io closefrom N` recorded with descriptor @inherited open on a file the capture
    never saw opened: (rc, stderr, trace path)."""
    out = os.path.join(work, "closefrom%d.trace" % n)
    cmd = [args.tracefs, "record", "--timing=none", "-o", out, "--", args.capio, "closefrom",
           str(n)]
    if strace:
        cmd = ["strace", "-f", "-e", "trace=readlink", "-o", strace] + cmd
    e = dict(os.environ)
    for k in ("TFS_CAPTURE", "TFS_OUTPUT", "TFS_SPOOL", "TFS_TIMING", "TFS_TRACE", "LD_PRELOAD"):
        e.pop(k, None)
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=e,
                       timeout=300, stdin=subprocess.DEVNULL, pass_fds=(inherited,))
    return p.returncode, p.stderr, out


def test_closefrom(tap, args, work, inherited=7):
    """A closefrom loop, close(3) ... close(N - 1) of numbers never opened but one inherited:
    one file id "(not open)" for them all and one call signature, not one per number."""
    path = os.path.join(work, "inherited")
    f = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.dup2(f, inherited, inheritable=True)
    os.close(f)
    try:
        runs = {n: record_closefrom(args, work, n, inherited) for n in (1000, 5000)}
    finally:
        os.close(inherited)
    if not tap.ok(all(r[0] == 0 for r in runs.values()),
                  "closefrom: traced programs exit 0", [r[1] for r in runs.values()]):
        return
    n = 5000
    out = runs[n][2]
    rc, files, _ = run([args.tracefs, "cat", out, "ranks/0/files.txt"])
    # id kind calls read written first last flags name (which may hold spaces)
    names = [line.split(None, 8)[-1] for line in files.decode().splitlines()
             if line.strip() and not line.startswith("#")]
    tap.ok(names.count("(not open)") == 1 and path in names and len(names) == 2,
           "closefrom: files.txt has one not-open row for %d numbers, and the inherited "
           "file" % (n - 4), names[:6])
    ev = cat_events(args.tracefs, out, 0)
    exp = ['fd_file(fd=-1, path="(not open)", file=file#0)']
    for fd in range(3, n):
        if fd == inherited:
            exp += ['fd_file(fd=%d, path="%s", file=file#1)' % (fd, path),
                    "close(fd=%d<%s>, errno=0) = 0" % (fd, path)]
        else:
            exp.append("close(fd=%d<(not open)>, errno=%d) = -1" % (fd, errno.EBADF))
    tap.ok(ev == exp, "closefrom: trace.txt shows every close with its number and errno, the "
           "inherited descriptor named from /proc", [e for e in ev if e not in exp][:4])
    n_sigs = {}
    for k, r in runs.items():
        rc, sigs, _ = run([args.tracefs, "cat", r[2], "signatures.txt"])
        m = re.match(rb"# (\d+) call signatures", sigs)
        n_sigs[k] = int(m.group(1)) if m else -1
    tap.ok(n_sigs[1000] == n_sigs[5000] and 0 < n_sigs[5000] <= 5,
           "closefrom: the call signatures do not grow with the numbers closed", n_sigs)
    size = {k: os.path.getsize(r[2]) for k, r in runs.items()}
    # one signature per number made it about 12 bytes per close
    tap.ok(size[5000] - size[1000] < 4000 // 4,
           "closefrom: 4000 closes more add %d bytes to the trace"
           % (size[5000] - size[1000]), size)
    if not shutil.which("strace"):
        tap.skip("closefrom: no readlink per number", "strace missing")
        return
    log = os.path.join(work, "closefrom.strace")
    f = os.open(path, os.O_RDWR)
    os.dup2(f, inherited, inheritable=True)
    os.close(f)
    try:
        rc, serr, _ = record_closefrom(args, work, n, inherited, strace=log)
    finally:
        os.close(inherited)
    with open(log) as lf:
        links = [line for line in lf if 'readlink("/proc/self/fd/' in line]
    tap.ok(rc == 0 and len(links) <= 3,
           "closefrom: %d readlinks of /proc/self/fd for %d closes (the inherited one's)"
           % (len(links), n - 3), links[:5] or serr)


def test_ids_off(tap, args, work):
    d = tempfile.mkdtemp(dir=work)
    out = os.path.join(work, "noids.trace")
    rc, _, serr = run([args.tracefs, "record", "-o", out, "--", args.capio, "bufs", d],
                      env={"TFS_ALLOC_IDS": "0"})
    ev = cat_events(args.tracefs, out, 0) if rc == 0 else []
    ids = [fields(e).get("id", str(parse_buf(fields(e).get("buf", "0x0"))[0])) for e in ev
           if kind(e) in ("malloc", "realloc", "mmap", "write", "free")]
    tap.ok(rc == 0 and len(ids) == 15 and set(ids) == {"0"},
           "TFS_ALLOC_IDS=0: every id recorded is 0", ev)


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--tracefs", "--capio", "--capio32", "--capio-fortified", "--lib"):
        ap.add_argument(opt, required=True)
    args = ap.parse_args()
    for k in ("tracefs", "capio", "capio32", "capio_fortified", "lib"):
        setattr(args, k, os.path.abspath(getattr(args, k)))
    tap = Tap()
    with tempfile.TemporaryDirectory(prefix="tfs-interpose.") as work:
        for test in (test_known_calls, test_threads, test_gzip, test_sort,
                     test_errno_and_selection, test_bufs, test_seqread, test_churn,
                     test_forks, test_ids_off, test_closefrom):
            try:
                test(tap, args, work)
            except Exception as e:  # a crash of the checker is a failure, not an abort
                tap.ok(False, "%s raised %s: %s" % (test.__name__, type(e).__name__, e))
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
