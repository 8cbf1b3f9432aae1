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
   glibc's __libc_freeres at exit, which frees glibc-internal memory a native run never frees).
4. errno is preserved, --trace=zones,mem records no calls, TFS_TRACE selects categories
   in-process; a descriptor the program did not open (gzip's stdout) is declared once with
   its /proc/self/fd path by an fd_file event.

  check_interpose.py --tracefs T --capio C --capio32 C32 --capio-fortified CF --lib LIB
"""

import argparse
import errno
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

LINE = re.compile(r"^\s*[0-9.]+\s+\d+\s+T\d+\s+(.*?)\s*$")
STACK_ARG = re.compile(r", stack=stack#\d+")
ALLOC_KINDS = ("malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc",
               "memalign")
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
    """Matches an expected line with {NAME} placeholders for pointers against an actual one."""

    def __init__(self):
        self.vals = {}

    def match(self, exp, act):
        parts = re.split(r"\{(\w+)\}", exp)
        rx = ""
        names = []
        for i, p in enumerate(parts):
            if i % 2:
                rx += r"(0x[0-9a-f]+)"
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
    ev = ["malloc(size=64) = {P%d}" % i for i in range(100)]
    ev += ["free(ptr={P%d})" % i for i in range(100)]
    ev += ["calloc(nmemb=10, size=100) = {C}",
           "realloc(ptr={C}, size=2000) = {R}",
           "free(ptr={R})",
           "posix_memalign(alignment=64, size=1000, ptr={M64}) = 0",
           "free(ptr={M64})",
           "aligned_alloc(alignment=128, size=256) = {A128}",
           "free(ptr={A128})",
           "memalign(alignment=32, size=100) = {A32}",
           "free(ptr={A32})",
           "free(ptr=0x0)"]
    return ev


def expect_io(d):
    f_data, f_fd3, f_c, f_v, f_text, f_missing = range(6)  # file ids, in order of first use
    rw = os.O_RDWR | os.O_CREAT | os.O_TRUNC
    ev = ['open(path="%s/data", flags=0x%x, mode=0x%x, file=file#%d, errno=0) = 3'
          % (d, rw, 0o600, f_data)]
    ev += [ok_call("write", "file=file#%d, count=4096" % f_data, 4096)] * 10
    ev += [ok_call("lseek", "file=file#%d, offset=0, whence=%d" % (f_data, os.SEEK_SET), 0)]
    ev += [ok_call("read", "file=file#%d, count=4096" % f_data, 4096)] * 10
    ev += [ok_call("read", "file=file#%d, count=4096" % f_data, 0)]
    ev += [ok_call("pread", "file=file#%d, count=512, offset=%d" % (f_data, i * 4096), 512)
           for i in range(4)]
    ev += [ok_call("pwrite", "file=file#%d, count=100, offset=40960" % f_data, 100),
           ok_call("ftruncate", "file=file#%d, length=8192" % f_data, 0),
           ok_call("fsync", "file=file#%d" % f_data, 0),
           ok_call("fdatasync", "file=file#%d" % f_data, 0),
           ok_call("close", "file=file#%d" % f_data, 0),
           # fd 3 is closed: it gets an id of its own, without a path
           ok_call("read", "file=file#%d, count=1" % f_fd3, -1, errno.EBADF),
           'creat(path="%s/c", mode=0x%x, file=file#%d, errno=0) = 3' % (d, 0o644, f_c),
           ok_call("write", "file=file#%d, count=10" % f_c, 10),
           ok_call("close", "file=file#%d" % f_c, 0),
           'open(path="%s/v", flags=0x%x, mode=0x%x, file=file#%d, errno=0) = 3'
           % (d, os.O_RDWR | os.O_CREAT, 0o600, f_v),
           ok_call("writev", "file=file#%d, iovcnt=2" % f_v, 30),
           ok_call("lseek", "file=file#%d, offset=0, whence=%d" % (f_v, os.SEEK_SET), 0),
           ok_call("readv", "file=file#%d, iovcnt=2" % f_v, 30),
           ok_call("close", "file=file#%d" % f_v, 0),
           # the same path again: the same file id
           'openat(dirfd=-100, path="%s/data", flags=0x%x, mode=0x0, file=file#%d, errno=0) = 3'
           % (d, os.O_RDONLY, f_data),
           ok_call("close", "file=file#%d" % f_data, 0),
           'fopen(path="%s/text", mode="w", file=file#%d, errno=0) = 3' % (d, f_text),
           ok_call("fwrite", "file=file#%d, size=1, nmemb=1000" % f_text, 1000),
           ok_call("fwrite", "file=file#%d, size=100, nmemb=3" % f_text, 3),
           ok_call("fflush", "file=file#%d" % f_text, 0),
           ok_call("fseek", "file=file#%d, offset=0, whence=%d" % (f_text, os.SEEK_END), 0),
           ok_call("fclose", "file=file#%d" % f_text, 0),
           'fopen(path="%s/data", mode="r", file=file#%d, errno=0) = 3' % (d, f_data),
           ok_call("fread", "file=file#%d, size=4096, nmemb=2" % f_data, 2),
           ok_call("fclose", "file=file#%d" % f_data, 0),
           'fopen(path="%s/missing/x", mode="r", file=file#%d, errno=%d) = -1'
           % (d, f_missing, errno.ENOENT),
           'open(path="%s/c", flags=0x%x, mode=0x0, file=file#%d, errno=0) = 3'
           % (d, os.O_RDONLY, f_c),
           'fdopen(file=file#%d, mode="r", errno=0) = 3' % f_c,
           ok_call("fclose", "file=file#%d" % f_c, 0),
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
        m = re.match(r"free\(ptr=(0x[0-9a-f]+)\)$", e)
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
    exp_main += ["close(file=file#0, errno=0) = 0"]
    # pthread_create allocates the new thread's TLS vector through calloc: glibc's, left out
    main = [e for e in cat_events(args.tracefs, out, 0) if kind(e) not in ALLOC_KINDS]
    diff, _ = compare(exp_main, main)
    tap.ok(diff is None, "threads: main opens, creates and joins thread#1..%d in order" % n, diff)
    exp = []
    for _ in range(10):
        exp += ["malloc(size=32) = {P}", "write(file=file#0, count=16, errno=0) = 16",
                "free(ptr={P})"]
    bad = []
    for t in range(1, n + 1):
        diff, _ = compare(exp, cat_events(args.tracefs, out, t))
        if diff:
            bad.append("thread %d: %s" % (t, diff))
    tap.ok(not bad, "threads: each of %d threads has exactly its 30 events" % n, "\n".join(bad))
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
    # stdout (a pipe here) was opened by the test, not by gzip: its path is stored once
    decl = [e for e in ev if kind(e) == "fd_file"]
    m = re.fullmatch(r'fd_file\(fd=1, path="pipe:\[\d+\]", (file=file#\d+)\)', decl[0]) \
        if len(decl) == 1 else None
    tap.ok(m is not None and all(m.group(1) in e for e in ev if kind(e) == "write"),
           "gzip: stdout declared once by fd_file, every write on its file id", decl)
    st, loader = strace_counts([gzip, "-c", src], work)
    tap.ok(counts.get("read", 0) == st.get("read", -1) - loader and loader > 0,
           "gzip: traced reads %d = strace's %d - %d by the dynamic loader"
           % (counts.get("read", 0), st.get("read", -1), loader), counts)
    tap.ok(counts.get("write", 0) == st.get("write", -1),
           "gzip: traced writes %d = strace's %d" % (counts.get("write", 0), st.get("write", -1)),
           counts)


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
    if not shutil.which("valgrind"):
        tap.skip("sort against valgrind", "valgrind missing")
        return
    counts, ev = count_kinds(args.tracefs, out)
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
                     test_errno_and_selection):
            try:
                test(tap, args, work)
            except Exception as e:  # a crash of the checker is a failure, not an abort
                tap.ok(False, "%s raised %s: %s" % (test.__name__, type(e).__name__, e))
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
