#!/usr/bin/env python3
"""Every I/O function libtfscapture.so interposes, recorded exactly (TAP).

1. cap_calls.c calls every io function of capture/calls.txt by its own name (open64,
   __read_chk, fputc_unlocked, __isoc99_fscanf, __fxstatat64...) with known arguments; the
   events `tracefs record` stores for it are compared line by line with an expectation
   written here from cap_calls.c's description: arguments, results, errno, bytes, and the
   file behind every descriptor (a read after dup2 names the new file, one after a close
   and reopen names its path, one on a closed descriptor names none).
2. The table and the test stay together: every io `sym` of calls.txt is called by
   cap_calls.c, so a function added to the table without a test fails here.
3. The program's own output (stdout, the files it wrote) is byte-identical to untraced.
4. `cap_calls DIR wide`: sync, setlocale and the wide-character stdio functions (a process
   of its own: a stream is wide or narrow from its first use), in C.UTF-8, on a file, stdout
   and stdin: the same three checks, and files.txt counts the bytes the characters make in
   UTF-8; `cap_calls DIR wbytes`: the wide printf family writing characters outside ASCII,
   its bytes those of UTF-8, files.txt's the file's size.

  check_calls.py --tracefs T --calls-prog cap_calls --calls calls.txt
"""

import argparse
import locale
import errno
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402
from check_interpose import Binder, compare  # noqa: E402

LINE = re.compile(r"^\s*(?:[0-9.]+\s+\d+\s+)?T\d+\s+(.*?)\s*$")
ALLOC_KINDS = ("malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc",
               "memalign", "mmap", "munmap")
STDIN = b"7 8 9 10\n"
O = os.O_RDONLY, os.O_WRONLY, os.O_RDWR
O_CREAT, O_TRUNC, O_APPEND, O_DIRECTORY = os.O_CREAT, os.O_TRUNC, os.O_APPEND, 0x10000
O_CLOEXEC, O_LARGEFILE = 0x80000, 0x8000
F_DUPFD, F_GETFL, F_SETFL = 0, 3, 4
SEEK_SET, SEEK_END = 0, 2
AF_UNIX, AF_INET, SOCK_STREAM = 1, 2, 1


def run(cmd, env=None, timeout=300, stdin=None):
    e = dict(os.environ)
    for k in ("TFS_CAPTURE", "TFS_OUTPUT", "TFS_SPOOL", "TFS_TIMING", "TFS_TRACE", "LD_PRELOAD"):
        e.pop(k, None)
    e.update(env or {})
    p = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


class Exp:
    """The expected events, with unique placeholders for values no one can know in advance
    (the address of a string literal)."""

    def __init__(self):
        self.ev = []
        self.n = 0

    def lit(self):
        self.n += 1
        return "buf={L%d}" % self.n

    def add(self, line):
        self.ev.append(line)

    def call(self, name, args, ret, err=0, after=""):
        """`name(args, [after, ]errno=err) = ret`: after holds what follows the result."""
        self.ev.append("%s(%s%s, errno=%d) = %s" % (name, args, after, err, ret))


SB = "buf={B}"  # the program's static buffer


def fmtarg(text):
    """The format string argument of the printf and scanf families, as the text view quotes
    it (@text already escaped)."""
    return ', format="%s"' % text


def att(name):
    """A file's name as the text view attaches it: its `>` escaped (FORMAT.md §9)."""
    return name.replace(">", "\\x3e")


def fd(n, name):
    """A descriptor and the name of the file behind it, as the text view attaches it."""
    return "fd=%d<%s>" % (n, att(name))


def expect(d, tmps):
    """@tmps: the names cap_calls' mkstemp calls and mkdtemp chose, as it told them."""
    e = Exp()
    # the name of each file id, in order of first use (pipes and sockets: bound placeholders)
    N = {0: d + "/a", 1: d + "/b", 2: "(not open)", 3: d + "/c", 4: "pipe:[{P1}]",
         5: "pipe:[{P2}]", 6: "socket:[{S1}]", 7: "socket:[{S2}]", 8: "socket:[{T1}]",
         9: "tcp:127.0.0.1:{PORT}", 10: "socket:[{T2}]",
         11: "tcp:127.0.0.1:{Q}->127.0.0.1:{PORT}", 12: "tcp:127.0.0.1:{PORT}->127.0.0.1:{Q}", 13: "socket:[{T3}]",
         14: "tcp:127.0.0.1:{R}->127.0.0.1:{PORT}", 15: "tcp:127.0.0.1:{PORT}->127.0.0.1:{R}",
         16: d + "/d", 17: d + "/d/f1",
         18: d + "/d/f2", 19: d + "/s", 20: "pipe:[{OUT}]", 21: "(all streams)",
         22: d + "/i", 23: "pipe:[{IN}]", 24: d + "/t", 25: d + "/u", 26: "pipe:[{P3}]",
         27: "anon_inode:[eventpoll]", 28: "anon_inode:[eventfd]", 29: "pipe:[{P4}]",
         30: d + "/k", 31: d + "/m", 41: "pipe:[{P5}]", 42: "socket:[{T4}]"}
    for i, name in enumerate(tmps[:8]):
        N[32 + i] = name
    # ---- descriptors: a = file#0, b = file#1, every one not open = file#2
    e.add('open(path="%s/a", flags=0x%x, mode=0x180, file=file#0, errno=0) = 3'
          % (d, O[2] | O_CREAT | O_TRUNC))
    e.call("write", fd(3, N[0]) + ", count=100, " + SB, 100)
    e.call("dup", fd(3, N[0]), 4)
    e.call("dup2", fd(3, N[0]) + ", newfd=10", 10)
    e.call("dup3", fd(3, N[0]) + ", newfd=11, flags=0x%x" % O_CLOEXEC, 11)
    e.call("fcntl", fd(3, N[0]) + ", cmd=%d, arg=20" % F_DUPFD, 20)
    e.call("fcntl", fd(3, N[0]) + ", cmd=%d, arg=%d" % (F_SETFL, O_APPEND), 0)
    e.call("pread", fd(10, N[0]) + ", count=10, offset=0, " + SB, 10)
    e.call("lseek", fd(20, N[0]) + ", offset=0, whence=%d" % SEEK_SET, 0)
    e.call("read", fd(20, N[0]) + ", count=50, " + SB, 50)
    for n in (4, 10, 11, 20):
        e.call("close", fd(n, N[0]), 0)
    e.add('open(path="%s/b", flags=0x%x, mode=0x1a4, file=file#1, errno=0) = 4'
          % (d, O[2] | O_CREAT | O_TRUNC))
    e.call("dup2", fd(4, N[1]) + ", newfd=3", 3)
    e.call("pwrite", fd(3, N[1]) + ", count=5, offset=0, " + SB, 5)  # 3 is b now
    e.call("pread", fd(3, N[1]) + ", count=5, offset=0, " + SB, 5)
    e.call("close", fd(3, N[1]), 0)
    e.call("close", fd(4, N[1]), 0)
    e.add('open(path="%s/a", flags=0x0, mode=0x0, file=file#0, errno=0) = 3' % d)
    e.call("read", fd(3, N[0]) + ", count=10, " + SB, 10)  # a again, by its path
    e.call("close_range", "first=3, last=3, flags=0x0", 0)
    e.add('fd_file(fd=-1, path="(not open)", file=file#2)')
    e.call("read", fd(3, N[2]) + ", count=1, " + SB, -1, errno.EBADF)
    # CLOSE_RANGE_CLOEXEC (4) closes nothing now: 3 is still a, with no fd_file again
    e.add('open(path="%s/a", flags=0x0, mode=0x0, file=file#0, errno=0) = 3' % d)
    e.call("close_range", "first=3, last=3, flags=0x4", 0)
    e.call("read", fd(3, N[0]) + ", count=1, " + SB, 1)
    e.call("close", fd(3, N[0]), 0)
    e.add('open(path="%s/a", flags=0x0, mode=0x0, file=file#0, errno=0) = 3' % d)
    e.add("closefrom(lowfd=3)")
    e.call("read", fd(3, N[2]) + ", count=1, " + SB, -1, errno.EBADF)
    # ---- the other names: c = file#3
    c = '"%s/c"' % d
    e.add("open(path=%s, flags=0x%x, mode=0x180, file=file#3, errno=0) = 3" % (c, O[2] | O_CREAT))
    for n in (4, 5):
        e.add("open(path=%s, flags=0x0, mode=0x0, file=file#3, errno=0) = %d" % (c, n))
    for n in (6, 7, 8, 9):
        e.add("openat(dirfd=-100, path=%s, flags=0x0, mode=0x0, file=file#3, errno=0) = %d"
              % (c, n))
    for n in (10, 11):
        e.add("creat(path=%s, mode=0x180, file=file#3, errno=0) = %d" % (c, n))
    e.call("write", fd(3, N[3]) + ", count=16, " + SB, 16)
    e.call("read", fd(4, N[3]) + ", count=8, " + SB, 8)
    for n, off in ((5, 2), (6, 4), (7, 8)):
        e.call("pread", fd(n, N[3]) + ", count=4, offset=%d, " % off + SB, 4)
    e.call("pwrite", fd(3, N[3]) + ", count=2, offset=20, " + SB, 2)
    e.call("readv", fd(8, N[3]) + ", iovcnt=2, " + SB, 22)
    e.call("writev", fd(3, N[3]) + ", iovcnt=2, " + SB, 7)
    e.call("lseek", fd(3, N[3]) + ", offset=0, whence=%d" % SEEK_END, 23)
    e.call("fsync", fd(3, N[3]), 0)
    e.call("fdatasync", fd(3, N[3]), 0)
    e.call("ftruncate", fd(3, N[3]) + ", length=10", 0)
    e.call("ftruncate", fd(3, N[3]) + ", length=12", 0)
    e.call("fcntl", fd(3, N[3]) + ", cmd=%d, arg=0" % F_GETFL, O[2] | O_LARGEFILE)
    for n in range(3, 12):
        e.call("close", fd(n, N[3]), 0)
    # ---- pipes: file#4, file#5 (one id per pipe, both ends)
    for n, f in ((3, 4), (4, 4)):
        e.add('fd_file(fd=%d, path="pipe:[{P1}]", file=file#%d)' % (n, f))
    e.call("pipe", "flags=0x0, rd_fd=3<%s>, wr_fd=4<%s>" % (N[4], N[4]), 0)
    e.call("write", fd(4, N[4]) + ", count=5, " + e.lit(), 5)
    e.call("read", fd(3, N[4]) + ", count=5, " + SB, 5)
    for n in (5, 6):
        e.add('fd_file(fd=%d, path="pipe:[{P2}]", file=file#5)' % n)
    e.call("pipe2", "flags=0x%x, rd_fd=5<%s>, wr_fd=6<%s>" % (O_CLOEXEC, N[5], N[5]), 0)
    for n, f in ((3, 4), (4, 4), (5, 5), (6, 5)):
        e.call("close", fd(n, N[f]), 0)
    # ---- a socket pair: file#6, file#7
    e.add('fd_file(fd=3, path="socket:[{S1}]", file=file#6)')
    e.add('fd_file(fd=4, path="socket:[{S2}]", file=file#7)')
    e.call("socketpair", "domain=%d, type=0x%x, protocol=0, rd_fd=3<%s>, wr_fd=4<%s>"
           % (AF_UNIX, SOCK_STREAM, N[6], N[7]), 0)
    for name, n, f, buf, ret in (("send", 3, 6, e.lit(), 4), ("recv", 4, 7, SB, 4),
                                 ("sendto", 3, 6, e.lit(), 3), ("recvfrom", 4, 7, SB, 3),
                                 ("send", 3, 6, e.lit(), 2), ("recv", 4, 7, SB, 2)):
        e.call(name, fd(n, N[f]) + ", len=%d, flags=0x0, %s" % (ret, buf), ret)
    e.call("sendmsg", fd(3, N[6]) + ", flags=0x0", 6)
    e.call("recvmsg", fd(4, N[7]) + ", flags=0x0", 6)
    e.call("sendto", fd(3, N[6]) + ", len=5, flags=0x0, " + e.lit(), 5)
    e.call("recvfrom", fd(4, N[7]) + ", len=5, flags=0x0, " + SB, 5)
    e.call("shutdown", fd(3, N[6]) + ", how=1", 0)
    e.call("close", fd(3, N[6]), 0)
    e.call("close", fd(4, N[7]), 0)
    # ---- TCP: socket:[..] until bound or connected, then by address
    tcp = "domain=%d, type=0x%x, protocol=0" % (AF_INET, SOCK_STREAM)
    e.add('fd_file(fd=3, path="socket:[{T1}]", file=file#8)')
    e.call("socket", tcp, "3<%s>" % N[8])
    e.add('fd_file(fd=3, path="tcp:127.0.0.1:{PORT}", file=file#9)')
    e.call("bind", fd(3, N[8]) + ', sockaddr="tcp:127.0.0.1:0"', 0)
    e.call("listen", fd(3, N[9]) + ", backlog=4", 0)
    e.add('fd_file(fd=4, path="socket:[{T2}]", file=file#10)')
    e.call("socket", tcp, "4<%s>" % N[10])
    # a connection is named by both ends, apart from the listener whose address it reached
    e.add('fd_file(fd=4, path="%s", file=file#11)' % N[11])
    e.call("connect", fd(4, N[10]) + ', sockaddr="tcp:127.0.0.1:{PORT}"', 0)
    e.add('fd_file(fd=5, path="%s", file=file#12)' % N[12])
    e.call("accept", fd(3, N[9]) + ", flags=0x0", "5<%s>" % att(N[12]))
    e.add('fd_file(fd=6, path="socket:[{T3}]", file=file#13)')
    e.call("socket", tcp, "6<%s>" % N[13])
    e.add('fd_file(fd=6, path="%s", file=file#14)' % N[14])
    e.call("connect", fd(6, N[13]) + ', sockaddr="tcp:127.0.0.1:{PORT}"', 0)
    e.add('fd_file(fd=7, path="%s", file=file#15)' % N[15])
    e.call("accept4", fd(3, N[9]) + ", flags=0x%x" % O_CLOEXEC, "7<%s>" % att(N[15]))
    e.call("write", fd(4, N[11]) + ", count=3, " + e.lit(), 3)
    e.call("read", fd(5, N[12]) + ", count=3, " + SB, 3)
    e.call("poll", "nfds=1, timeout=0", 0)
    e.call("poll", "nfds=1, timeout=0", 0)
    e.call("select", "nfds=8, timeout_us=1000", 0)
    for n, f in ((3, 9), (4, 11), (5, 12), (6, 14), (7, 15)):
        e.call("close", fd(n, N[f]), 0)
    # ---- paths: d = file#16
    dd = '"%s/d"' % d
    e.call("mkdir", "path=%s, mode=0x1ed" % dd, 0)
    e.call("mkdirat", 'dirfd=-100, path="%s/e", mode=0x1c0' % d, 0)
    e.call("rmdir", 'path="%s/e"' % d, 0)
    for name in ("stat", "lstat"):
        for _ in range(4):
            e.call(name, "path=" + dd, 0)
    e.add("open(path=%s, flags=0x%x, mode=0x0, file=file#16, errno=0) = 3" % (dd, O_DIRECTORY))
    for _ in range(4):
        e.call("fstat", fd(3, N[16]), 0)
    for _ in range(4):
        e.call("fstatat", 'dirfd=3, path=".", flags=0x0', 0)
    e.call("statx", "dirfd=-100, path=%s, flags=0x0, mask=0x200" % dd, 0)
    e.call("access", "path=%s, mode=0x0" % dd, 0)
    e.call("access", 'path="%s/missing", mode=0x0' % d, -1, errno.ENOENT)
    e.call("faccessat", "dirfd=-100, path=%s, mode=0x4, flags=0x0" % dd, 0)
    e.call("fchdir", fd(3, N[16]), 0)
    e.call("chdir", 'path="%s"' % d, 0)
    e.call("close", fd(3, N[16]), 0)
    e.call("truncate", 'path="%s/a", length=4' % d, 0)
    e.call("truncate", 'path="%s/a", length=6' % d, 0)
    e.call("rename", 'oldpath="%s/a", newpath="%s/a2"' % (d, d), 0)
    e.call("unlink", 'path="%s/a2"' % d, 0)
    e.call("unlink", 'path="%s/a2"' % d, -1, errno.ENOENT)
    for name, f in (("f1", 17), ("f2", 18)):
        e.add('creat(path="%s/d/%s", mode=0x180, file=file#%d, errno=0) = 3' % (d, name, f))
        e.call("close", fd(3, N[f]), 0)
    e.add("opendir(path=%s, file=file#16, errno=0) = 3" % dd)
    for ret in (1, 1, 1, 1, 0):  # ., .., f1, f2, the end
        e.call("readdir", fd(3, N[16]), ret)
    e.call("closedir", fd(3, N[16]), 0)
    e.add("open(path=%s, flags=0x0, mode=0x0, file=file#16, errno=0) = 3" % dd)
    e.call("fdopendir", fd(3, N[16]), 3)
    for ret in (1, 1, 1, 1, 0):
        e.call("readdir", fd(3, N[16]), ret)
    e.call("closedir", fd(3, N[16]), 0)
    # ---- links and modes in d (AT_FDCWD -100, RENAME_NOREPLACE 1, AT_REMOVEDIR 0x200)
    def two(old, new, flags=0):
        return ('olddirfd=-100, oldpath="%s/d/%s", newdirfd=-100, newpath="%s/d/%s", '
                'flags=0x%x' % (d, old, d, new, flags))
    e.call("link", two("f1", "f3"), 0)
    e.call("link", two("f1", "f4"), 0)
    for target, name in (("f1", "s1"), ("f2", "s2")):
        e.call("symlink", 'target="%s", newdirfd=-100, linkpath="%s/d/%s"' % (target, d, name),
               0)
    e.call("renameat", two("f3", "f5"), 0)
    e.call("renameat", two("f4", "f5", 1), -1, errno.EEXIST)
    e.call("chmod", 'dirfd=-100, path="%s/d/f1", mode=0x1a0, flags=0x0' % d, 0)
    e.call("chmod", 'dirfd=-100, path="%s/d/f2", mode=0x180, flags=0x0' % d, 0)
    e.add('open(path="%s/d/f1", flags=0x0, mode=0x0, file=file#17, errno=0) = 3' % d)
    e.call("fchmod", fd(3, N[17]) + ", mode=0x180", 0)
    e.call("close", fd(3, N[17]), 0)
    e.call("unlinkat", 'dirfd=-100, path="%s/d/s1", flags=0x0' % d, 0)
    e.call("unlinkat", 'dirfd=-100, path="%s/e", flags=0x200' % d, -1, errno.ENOENT)
    # ---- stdio output: s = file#19, stdout = file#20, every stream = file#21
    e.add('fopen(path="%s/s", opentype="w", file=file#19, errno=0) = 3' % d)
    for fmt, ret in (("%d\\n", 6), ("%s", 2), ("%05d", 5), ("%c", 1)):
        e.call("fprintf", fd(3, N[19]) + fmtarg(fmt), ret)
    e.call("fputs", fd(3, N[19]) + ", bytes=3", "{NN1}")  # a non-negative number
    e.call("fputs", fd(3, N[19]) + ", bytes=2", "{NN2}")
    for name, ch in (("fputc", "x"), ("fputc", "y"), ("putc", "p"), ("putc", "q"),
                     ("putc", "r")):
        e.call(name, fd(3, N[19]) + ", bytes=1", ord(ch))
    e.call("fwrite", fd(3, N[19]) + ", size=1, nmemb=10, %s, bytes=10" % SB, 10)
    e.call("fwrite", fd(3, N[19]) + ", size=2, nmemb=3, %s, bytes=6" % SB, 3)
    e.call("fflush", fd(3, N[19]), 0)
    e.call("fflush", fd(3, N[19]), 0)
    for whence in (SEEK_END, SEEK_SET, SEEK_END):
        e.call("fseek", fd(3, N[19]) + ", offset=0, whence=%d" % whence, 0)
    e.call("fclose", fd(3, N[19]), 0)
    e.add('fd_file(fd=1, path="pipe:[{OUT}]", file=file#20)')
    for fmt, ret in (("%s\\n", 4), ("%d", 1), ("%x", 2), ("!", 1)):
        e.call("printf", fd(1, N[20]) + fmtarg(fmt), ret)
    e.call("puts", fd(1, N[20]) + ", bytes=4", "{NN3}")
    e.call("putchar", fd(1, N[20]) + ", bytes=1", ord("A"))
    e.call("putchar", fd(1, N[20]) + ", bytes=1", ord("B"))
    e.add('fd_file(fd=-1, path="(all streams)", file=file#21)')
    e.call("fflush", fd(-1, N[21]), 0)
    for fmt, ret in (("%d", 2), ("ab", 2), ("c", 1), ("de", 2),
                     ("(built at run time)", 1)):  # a format not in read-only data
        e.call("dprintf", fd(1, N[20]) + fmtarg(fmt), ret)
    # ---- stdio input: i = file#22, stdin = file#23
    e.add('open(path="%s/i", flags=0x%x, mode=0x180, file=file#22, errno=0) = 3'
          % (d, O[1] | O_CREAT | O_TRUNC))
    e.call("write", fd(3, N[22]) + ", count=28, " + e.lit(), 28)
    e.call("close", fd(3, N[22]), 0)
    e.add('fopen(path="%s/i", opentype="r", file=file#22, errno=0) = 3' % d)
    e.call("fscanf", fd(3, N[22]) + fmtarg("%d"), 1)
    e.call("fscanf", fd(3, N[22]) + fmtarg("%d"), 1)
    e.call("fgetc", fd(3, N[22]) + ", bytes=1", ord("\n"))
    for size, ret in ((100, 9), (3, 2), (100, 4), (100, 2)):
        e.call("fgets", fd(3, N[22]) + ", size=%d, %s" % (size, SB), ret)
    for name in ("fgetc", "getc", "getc", "getc"):
        e.call(name, fd(3, N[22]) + ", bytes=1", ord("r"))
    e.call("ungetc", fd(3, N[22]) + ", c=%d, back=1" % ord("r"), ord("r"))  # 'r' just read
    e.call("getline", fd(3, N[22]), 2)
    e.call("getline", fd(3, N[22]), -1)  # the end of the file: no error
    e.call("fclose", fd(3, N[22]), 0)
    e.add('fopen(path="%s/i", opentype="r", file=file#22, errno=0) = 3' % d)
    e.call("getdelim", fd(3, N[22]) + ", delim=%d" % ord(" "), 3)
    e.call("getdelim", fd(3, N[22]) + ", delim=%d" % ord("\n"), 3)
    e.call("fscanf", fd(3, N[22]) + fmtarg("%s"), 1)
    e.call("fscanf", fd(3, N[22]) + fmtarg("%s"), 1)
    for size, nmemb, ret in ((1, 4, 4), (2, 3, 3), (1, 2, 2), (1, 100, 2)):
        e.call("fread", fd(3, N[22]) + ", size=%d, nmemb=%d, %s, bytes=%d"
               % (size, nmemb, SB, size * ret), ret)
    e.call("fclose", fd(3, N[22]), 0)
    e.add('fopen(path="%s/i", opentype="r", file=file#22, errno=0) = 3' % d)
    e.call("__uflow", fd(3, N[22]) + ", buffered=28", ord("1"))
    e.call("fclose", fd(3, N[22]), 0)
    e.add('fopen(path="%s/i", opentype="a", file=file#22, errno=0) = 3' % d)
    e.call("putc", fd(3, N[22]) + ", bytes=1", ord("y"))
    e.call("__overflow", fd(3, N[22]) + ", pending=1", ord("x"))
    e.call("fclose", fd(3, N[22]), 0)
    e.add('fd_file(fd=0, path="pipe:[{IN}]", file=file#23)')
    e.call("scanf", fd(0, N[23]) + fmtarg("%d"), 1)
    e.call("scanf", fd(0, N[23]) + fmtarg("%d"), 1)
    e.call("getchar", fd(0, N[23]) + ", bytes=1", ord(" "))
    e.call("getchar", fd(0, N[23]) + ", bytes=1", ord("9"))
    e.call("scanf", fd(0, N[23]) + fmtarg("%d"), 1)
    e.call("scanf", fd(0, N[23]) + fmtarg("%d"), -1)
    # ---- streams made otherwise, copies: t = file#24, u = file#25, a pipe = file#26
    e.add('open(path="%s/i", flags=0x0, mode=0x0, file=file#22, errno=0) = 3' % d)
    e.call("fdopen", fd(3, N[22]) + ', opentype="r"', 3)
    e.call("freopen", 'path="%s/t", opentype="w", old_fd=3<%s>, file=file#24' % (d, N[22]), 3)
    e.call("freopen", 'path="%s/t", opentype="a", old_fd=3<%s>, file=file#24' % (d, N[24]), 3)
    e.call("fclose", fd(3, N[24]), 0)
    e.add('open(path="%s/i", flags=0x0, mode=0x0, file=file#22, errno=0) = 3' % d)
    e.add('open(path="%s/u", flags=0x%x, mode=0x180, file=file#25, errno=0) = 4'
          % (d, O[1] | O_CREAT | O_TRUNC))
    for _ in range(2):
        e.call("sendfile", "out_fd=4<%s>, in_fd=3<%s>, offset=-1, count=5" % (N[25], N[22]), 5)
    for n in (5, 6):
        e.add('fd_file(fd=%d, path="pipe:[{P3}]", file=file#26)' % n)
    e.call("pipe", "flags=0x0, rd_fd=5<%s>, wr_fd=6<%s>" % (N[26], N[26]), 0)
    e.call("splice", "in_fd=3<%s>, out_fd=6<%s>, len=4, flags=0x0" % (N[22], N[26]), 4)
    e.call("splice", "in_fd=5<%s>, out_fd=4<%s>, len=4, flags=0x0" % (N[26], N[25]), 4)
    e.call("copy_file_range", "in_fd=3<%s>, out_fd=4<%s>, len=3" % (N[22], N[25]), 3)
    for n, f in ((3, 22), (4, 25), (5, 26), (6, 26)):
        e.call("close", fd(n, N[f]), 0)
    # ---- waiting: epoll = file#27 (both epoll descriptors), the eventfd = file#28, a pipe =
    # file#29 (EPOLL_CLOEXEC 0x80000, EFD_NONBLOCK 0x800, EPOLL_CTL_ADD 1, EPOLL_CTL_DEL 2,
    # EPOLLIN 1, FIONREAD 0x541b, TCGETS 0x5401, ENOENT 2, EFAULT 14, ENOTTY 25); the DEL with a
    # pointer that is no address and the failed ADD name no events: the capture reads none
    e.add('fd_file(fd=3, path="anon_inode:[eventpoll]", file=file#27)')
    e.call("epoll_create1", "flags=0x80000", "3<%s>" % N[27])
    e.add('fd_file(fd=4, path="anon_inode:[eventpoll]", file=file#27)')
    e.call("epoll_create", "size=4", "4<%s>" % N[27])
    e.add('fd_file(fd=5, path="anon_inode:[eventfd]", file=file#28)')
    e.call("eventfd", "initval=5, flags=0x800", "5<%s>" % N[28])
    ep, efd = "ep_fd=3<%s>, " % N[27], fd(5, N[28])
    e.call("epoll_ctl", ep + "op=1, " + efd + ", events=0x1", 0)
    for _ in range(2):
        e.call("epoll_wait", ep + "maxevents=8, timeout=0", 1)
    # epoll_pwait2's timeout, read after the call: not when it failed with EFAULT (-2)
    e.call("epoll_pwait2", ep + "maxevents=8, timeout_ns=0", 1)
    e.call("epoll_pwait2", ep + "maxevents=8, timeout_ns=-2", -1, err=14)
    e.call("ppoll", "nfds=1, timeout_ns=1000", 1)
    e.call("ppoll", "nfds=1, timeout_ns=%d" % (2**63 - 1), 1)  # 9.3e9 s: the most there is
    e.call("ppoll", "nfds=1, timeout_ns=1000", 1)
    e.call("pselect", "nfds=6, timeout_ns=1000", 1)
    e.call("epoll_ctl", ep + "op=2, " + efd + ", events=0x0", 0)
    e.call("epoll_ctl", "ep_fd=4<%s>, op=2, " % N[27] + efd + ", events=0x0", -1, err=2)
    e.call("epoll_ctl", "ep_fd=4<%s>, op=1, " % N[27] + efd + ", events=0x0", -1, err=14)
    for n in (6, 7):
        e.add('fd_file(fd=%d, path="pipe:[{P4}]", file=file#29)' % n)
    e.call("pipe", "flags=0x0, rd_fd=6<%s>, wr_fd=7<%s>" % (N[29], N[29]), 0)
    e.call("write", fd(7, N[29]) + ", count=3, " + e.lit(), 3)
    e.call("ioctl", fd(6, N[29]) + ", request=0x541b", 0)
    e.call("ioctl", fd(6, N[29]) + ", request=0x5401", -1, err=25)
    for n, f in ((3, 27), (4, 27), (5, 28), (6, 29), (7, 29)):
        e.call("close", fd(n, N[f]), 0)
    # ---- locks: k = file#30 (F_GETLK 5, F_SETLK 6, F_SETLKW 7, F_OFD_GETLK 36, F_OFD_SETLK
    # 37; F_RDLCK 0, F_WRLCK 1, F_UNLCK 2; LOCK_EX 2, LOCK_UN 8; F_ULOCK 0, F_LOCK 1; EAGAIN
    # 11). A GETLK's fields are its answer; a call that failed with EFAULT reads none (-1)
    e.add('open(path="%s/k", flags=0x%x, mode=0x180, file=file#30, errno=0) = 3'
          % (d, O[2] | O_CREAT))
    k = fd(3, N[30])

    def lock(cmd, typ, whence, start, length, pid):
        return k + ", cmd=%d, type=%d, whence=%d, start=%d, len=%d, pid=%s" % (
            cmd, typ, whence, start, length, pid)
    e.call("fcntl_lock", lock(6, 1, 0, 0, 100, 0), 0)
    e.call("fcntl_lock", lock(5, 2, 0, 10, 5, 0), 0)
    e.call("fcntl_lock", lock(36, 1, 0, 0, 100, "{PID}"), 0)
    e.call("fcntl_lock", lock(37, 1, 0, 50, 10, 0), -1, err=11)
    e.call("fcntl_lock", lock(7, 2, 0, 0, 0, 0), 0)
    e.call("fcntl_lock", lock(6, -1, -1, -1, -1, -1), -1, err=14)
    e.call("flock", k + ", op=2", 0)
    e.call("flock", k + ", op=8", 0)
    e.call("lockf", k + ", cmd=1, len=10", 0)
    e.call("lockf", k + ", cmd=0, len=10", 0)
    e.call("close", k, 0)
    # ---- more on files: m = file#31 (POSIX_FADV_NORMAL 0, POSIX_FADV_SEQUENTIAL 2, EINVAL
    # 22, EFAULT 14, AT_SYMLINK_NOFOLLOW 0x100, O_APPEND 0x400)
    e.add('open(path="%s/m", flags=0x%x, mode=0x180, file=file#31, errno=0) = 3'
          % (d, O[2] | O_CREAT | O_TRUNC))
    m = fd(3, N[31])
    for name, last in (("pwritev", 12), ("preadv", -1)):  # -1: from the descriptor's offset
        for cnt, off, ret in ((2, 0, 8), (1, 8, 2), (1, 10, 2), (1, last, 2)):
            e.call(name, m + ", iovcnt=%d, offset=%d, flags=0x0, %s" % (cnt, off, SB), ret)
    e.call("fallocate", m + ", mode=0x0, offset=-1, len=10", -1, err=22)
    e.call("fallocate", m + ", mode=0x0, offset=0, len=0", -1, err=22)
    for n in (100, 200):
        e.add("posix_fallocate(%s, offset=0, len=%d) = 0" % (m, n))
    for advice, ret in ((2, 0), (0, 0), (99, 22)):
        e.add("posix_fadvise(%s, offset=0, len=0, advice=%d) = %d" % (m, advice, ret))
    for _ in range(4):
        e.call("fstatfs", m, 0)
    for _ in range(4):
        e.call("statfs", 'path="%s/m"' % d, 0)
    # UTIME_NOW 2^30 - 1 (what NULL means), UTIME_OMIT 2^30 - 2; times not read: 0 s, -1 ns
    now, omit, unread = (0, 2**30 - 1), (0, 2**30 - 2), (0, -1)

    def times(a, b):
        return "atime_s=%d, atime_nsec=%d, mtime_s=%d, mtime_nsec=%d" % (a + b)
    e.call("futimens", m + ", " + times((1, 2), (3, 4)), 0)
    e.call("futimens", m + ", " + times(now, now), 0)
    e.call("utimensat", 'dirfd=-100, path="%s/m", %s, flags=0x0' % (d, times((5, 0), omit)), 0)
    e.call("utimensat", 'dirfd=-100, path="%s/m", %s, flags=0x0' % (d, times(unread, unread)),
           -1, err=14)
    e.call("utimensat", 'dirfd=-100, path="", %s, flags=0x0' % times(unread, unread), -1, err=22)
    e.call("utimensat", 'dirfd=-100, path="%s/missing", %s, flags=0x0'
           % (d, times((100, 0), (200, 0))), -1, err=2)  # failed: its times read all the same
    e.call("fchown", m + ", owner=-1, group=-1", 0)
    for flags in (0, 0x100, 0):
        e.call("chown", 'dirfd=-100, path="%s/m", owner=-1, group=-1, flags=0x%x' % (d, flags), 0)
    e.call("close", m, 0)
    e.call("symlink", 'target="m", newdirfd=-100, linkpath="%s/ml"' % d, 0)
    for _ in range(4):
        e.call("readlink", 'dirfd=-100, path="%s/ml", bufsiz=100, target="m"' % d, 1)
    e.call("readlink", 'dirfd=-100, path="%s/m", bufsiz=100, target=""' % d, -1, err=22)
    for i in range(8):  # O_RDWR|O_CREAT|O_EXCL 0xc2, and the call's O_APPEND
        e.add('mkstemp(path="%s", flags=0x%x, file=file#%d, errno=0) = 3'
              % (N[32 + i], 0x4c2 if i in (2, 3, 6, 7) else 0xc2, 32 + i))
        e.call("close", fd(3, N[32 + i]), 0)
    e.add('mkstemp(path="%s/bad", flags=0xc2, file=file#40, errno=22) = -1' % d)
    e.call("mkdtemp", 'path="%s"' % (tmps[8] if len(tmps) > 8 else "?"), 0)
    e.add('fd_file(fd=3, path="pipe:[{P5}]", file=file#41)')
    e.call("popen", 'command="exit 3", opentype="r"', "3<%s>" % N[41])
    e.call("pclose", fd(3, N[41]), 768)
    e.add('open(path="%s/m", flags=0x0, mode=0x0, file=file#31, errno=0) = 3' % d)
    e.call("close", fd(3, N[31]), 0)
    e.call("popen", 'command="true", opentype="x"', -1, err=22)
    e.call("system", 'command="exit 5"', 1280)
    e.call("getcwd", 'size=4096, path="%s"' % d, 0)
    e.call("getcwd", 'size=4096, path="%s"' % d, 0)
    e.call("getcwd", 'size=0, path="%s"' % d, 0)
    e.add("umask(mask=0x3f, old={U})")  # the mask the test began with, then set again
    e.add("umask(mask={U}, old=0x3f)")
    e.add('fd_file(fd=3, path="socket:[{T4}]", file=file#42)')
    e.call("socket", "domain=%d, type=0x%x, protocol=0" % (AF_INET, SOCK_STREAM),
           "3<%s>" % N[42])
    t = fd(3, N[42])
    e.call("setsockopt", t + ", level=1, optname=2, optlen=4, value=1", 0)  # SO_REUSEADDR
    e.call("getsockopt", t + ", level=1, optname=2, value=1", 0)
    e.call("getsockopt", t + ", level=1, optname=3, value=1", 0)  # SO_TYPE: SOCK_STREAM
    e.call("setsockopt", t + ", level=1, optname=2, optlen=4, value=-1", -1, err=14)
    e.call("close", t, 0)
    # strings at no address, after calls that failed with EFAULT: read safely
    e.call("stat", 'path="(bad address)"', -1, err=14)
    e.add('open(path="(bad address)", flags=0x0, mode=0x0, file=file#43, errno=14) = -1')
    e.add('open(path="aaaaaaaaaa...[memory ends]", flags=0x0, mode=0x0, file=file#44, '
          'errno=14) = -1')
    # ---- sleeps, syncs and datagrams: y = file#45, the datagram pair file#46, file#47
    # (CLOCK_MONOTONIC 1, TIMER_ABSTIME 1, SYNC_FILE_RANGE_WRITE 2, MS_SYNC 4, SOCK_DGRAM 2,
    # MSG_DONTWAIT 0x40; EFAULT 14, EINVAL 22, ENOMEM 12, EAGAIN 11); a time at no address
    # is -2, one the kernel refuses the least i64
    e.call("nanosleep", "req_ns=1000", 0)
    e.call("nanosleep", "req_ns=-2", -1, err=14)
    e.call("nanosleep", "req_ns=%d" % -2**63, -1, err=22)
    e.add("clock_nanosleep(clock=1, flags=0x0, req_ns=1000) = 0")
    e.add("clock_nanosleep(clock=1, flags=0x1, req_ns=0) = 0")
    e.add("clock_nanosleep(clock=99, flags=0x0, req_ns=1000) = 22")
    e.add("sleep(seconds=0) = 0")
    e.call("usleep", "usec=1", 0)
    e.add('open(path="%s/y", flags=0x%x, mode=0x180, file=file#45, errno=0) = 3'
          % (d, O[2] | O_CREAT))
    y = fd(3, "%s/y" % d)
    e.call("write", y + ", count=4, " + e.lit(), 4)
    e.call("syncfs", y, 0)
    e.call("sync_file_range", y + ", offset=0, nbytes=4, flags=0x2", 0)
    e.call("msync", "addr={MAP}, length=4096, flags=0x4", 0)
    e.call("msync", "addr=0x0, length=4096, flags=0x4", -1, err=12)
    e.call("close", y, 0)
    e.add('fd_file(fd=3, path="socket:[{D1}]", file=file#46)')
    e.add('fd_file(fd=4, path="socket:[{D2}]", file=file#47)')
    d1, d2 = fd(3, "socket:[{D1}]"), fd(4, "socket:[{D2}]")
    e.call("socketpair", "domain=%d, type=0x2, protocol=0, rd_fd=3<socket:[{D1}]>, "
           "wr_fd=4<socket:[{D2}]>" % AF_UNIX, 0)
    e.call("sendmmsg", d1 + ", vlen=2, flags=0x0, bytes=7", 2)
    e.call("recvmmsg", d2 + ", vlen=2, flags=0x40, timeout_ns=-1, bytes=7", 2)
    e.call("recvmmsg", d2 + ", vlen=2, flags=0x40, timeout_ns=1000, bytes=0", -1, err=11)
    e.call("close", d1, 0)
    e.call("close", d2, 0)
    return e.ev


def io_events(a, trace):
    """The calls of @trace's thread 0 but the malloc family's, as trace.txt prints them, and
    that trace.txt whole."""
    _, out, _ = run([a.tracefs, "cat", trace, "ranks/0/threads/0/trace.txt"])
    ev = []
    for line in out.decode().splitlines():
        m = LINE.match(line)
        if m and m.group(1).split("(", 1)[0] not in ALLOC_KINDS:
            ev.append(m.group(1))
    return ev, out


def expect_wide(d):
    """cap_calls.c wide(): sync, then wide characters on DIR/w (file#0), stdout (file#1) and
    stdin (file#2); a character's bytes are its UTF-8 ones (e-acute 2, euro 3)."""
    e = Exp()
    w, out, inp = fd(3, d + "/w"), fd(1, "pipe:[{OUT}]"), fd(0, "pipe:[{IN}]")
    e.add("sync()")
    e.call("setlocale", 'category=%d, query=0, locale="C.UTF-8"' % locale.LC_CTYPE, 0)
    e.add('fopen(path="%s/w", opentype="w", file=file#0, errno=0) = 3' % d)
    for fmt, ret in (("%d\\n", 6), ("%ls", 2), ("%05d", 5), ("%lc", 1)):
        e.call("fwprintf", w + fmtarg(fmt) + ", bytes=%d" % ret, ret)
    e.call("fputws", w + ", bytes=3", "{NN1}")  # a non-negative number
    e.call("fputws", w + ", bytes=3", "{NN2}")
    for name, ch, n in (("fputwc", "x", 1), ("fputwc", "\u00fc", 2), ("putwc", "p", 1),
                        ("putwc", "\u20ac", 3)):
        e.call(name, w + ", bytes=%d" % n, ord(ch))
    e.call("fclose", w, 0)
    e.add('fopen(path="%s/w", opentype="r", file=file#0, errno=0) = 3' % d)
    for size, ret in ((4, 3), (16, 3), (5, 4), (4, 3)):
        e.call("fgetws", w + ", size=%d, buf={WB}" % size, ret)
    for name, ch in (("fgetwc", "z"), ("fgetwc", "a"), ("getwc", "b"), ("getwc", "c")):
        e.call(name, w + ", bytes=1", ord(ch))
    e.call("ungetwc", w + ", c=99, back=1", 99)  # the character just read: put back
    e.call("fgetws", w + ", size=16, buf={WB}", 11)  # "cd", e-acute, "x", u-umlaut, "p", euro
    e.call("fgetwc", w + ", bytes=0", -1)  # end of file
    e.call("fputwc", w + ", bytes=0", -1, err=errno.EBADF)  # a stream opened to read
    e.call("fclose", w, 0)
    e.add('fd_file(fd=1, path="pipe:[{OUT}]", file=file#1)')
    for fmt, ret in (("%ls\\n", 4), ("%d", 1), ("%x", 2), ("!", 1)):
        e.call("wprintf", out + fmtarg(fmt) + ", bytes=%d" % ret, ret)
    e.call("fwprintf", out + fmtarg("%d") + ", bytes=1", 1)
    e.call("putwchar", out + ", bytes=1", ord("A"))
    e.call("putwchar", out + ", bytes=2", 0xe9)
    e.call("fputws", out + ", bytes=3", "{NN3}")
    e.call("fputwc", out + ", bytes=1", ord("B"))
    e.call("putwc", out + ", bytes=1", ord("C"))
    e.add('fd_file(fd=0, path="pipe:[{IN}]", file=file#2)')
    for name, ch in (("getwchar", "7"), ("getwchar", " "), ("fgetwc", "8"), ("getwc", " ")):
        e.call(name, inp + ", bytes=1", ord(ch))
    e.call("ungetwc", inp + ", c=120, back=0", 120)  # another than the one read
    e.call("fgetws", inp + ", size=16, buf={WB}", 6)
    return e.ev


def check_wide(tap, a, work):
    """Section 4: `cap_calls DIR wide`, untraced and traced."""
    plain_dir, traced_dir = os.path.join(work, "wplain"), os.path.join(work, "wtraced")
    os.mkdir(plain_dir)
    os.mkdir(traced_dir)
    rc, plain, plain_err = run([a.calls_prog, plain_dir, "wide"], stdin=STDIN)
    known = "out\n7ff!5A\u00e9\u00fc\nBC".encode()
    tap.ok(rc == 0 and plain == known,
           "cap_calls wide untraced: exit 0 and its known output", (rc, plain, plain_err))
    trace = os.path.join(work, "wide.trace")
    rc, traced, err = run([a.tracefs, "record", "--timing=none", "-o", trace, "--",
                           a.calls_prog, traced_dir, "wide"], stdin=STDIN)
    tap.ok(rc == 0 and traced == plain, "wide traced: exit 0, output byte-identical", err)
    hashes = [re.search(rb"^errno \d+$", x, re.M) for x in (plain_err, err)]
    tap.ok(all(hashes) and hashes[0].group(0) == hashes[1].group(0),
           "wide traced: every call leaves errno as it does untraced", (plain_err, err))
    written = [open(os.path.join(x, "w"), "rb").read() for x in (plain_dir, traced_dir)]
    tap.ok(written[0] == written[1] and len(written[1]) == 27,
           "wide traced: the file it wrote is byte-identical to untraced", written)
    ev, _ = io_events(a, trace)
    exp = expect_wide(traced_dir)
    diff, b = compare(exp, ev)
    tap.ok(diff is None, "%d sync and wide-character events exactly as cap_calls.c describes "
           "them" % len(exp), diff)
    rc, ftxt, err = run([a.tracefs, "cat", trace, "ranks/0/files.txt"])
    rows = {}
    for line in ftxt.decode().splitlines():
        tok = line.split()
        if not line.startswith("#") and len(tok) >= 9:
            rows[tok[-1]] = (int(tok[3]), int(tok[4]))
    # w: what fgetws, fgetwc, getwc took (the character pushed back counted twice, as
    # ungetc's); the stdout pipe: the 17 bytes above; stdin: "7 8 " and "x9 10\n"
    want = {os.path.join(traced_dir, "w"): (3 + 3 + 4 + 3 + 4 + 11, 27),
            "OUT": (0, 17), "IN": (10, 0)}
    got = {os.path.join(traced_dir, "w"): rows.get(os.path.join(traced_dir, "w"))}
    if b is not None:
        got["OUT"] = rows.get("pipe:[%s]" % b.vals.get("OUT"))
        got["IN"] = rows.get("pipe:[%s]" % b.vals.get("IN"))
    tap.ok(rc == 0 and got == want, "files.txt: the bytes the wide calls read and wrote, "
           "in UTF-8", "got %r" % got)


def check_wide_bytes(tap, a, work):
    """`cap_calls DIR wbytes`: the wide printf family writing characters outside ASCII
    records the bytes they make in UTF-8, not the wide characters it returns (it recorded
    those: 7 bytes for the euro signs' 3 characters), and files.txt's bytes are the file's
    size and the output's length."""
    d = os.path.join(work, "wbytes")
    os.mkdir(d)
    trace = os.path.join(work, "wbytes.trace")
    rc, out, err = run([a.tracefs, "record", "--timing=none", "-o", trace, "--",
                        a.calls_prog, d, "wbytes"])
    wb = os.path.join(d, "wb")
    text = "\u20ac\u20ac\n\u00e95\u00e0"
    tap.ok(rc == 0 and out == text.encode() and
           open(wb, "rb").read() == "d\u00e9j\u00e0 \u20ac\n\u00e9t\u00e9\u00fc42\u20ac".encode(),
           "wbytes traced: exit 0, its output and file as written", (rc, out, err))
    ev = io_events(a, trace)[0] if rc == 0 else []
    got = [(m.group(1), int(m.group(2)), int(m.group(3))) for m in
           (re.match(r"(\w+)\(.*, bytes=(\d+), errno=0\) = (\d+)$", x) for x in ev)
           if m and "printf" in m.group(1)]
    want = [("fwprintf", 11, 7), ("fwprintf", 5, 3), ("fwprintf", 4, 3), ("fwprintf", 3, 1),
            ("wprintf", 7, 3), ("wprintf", 2, 1), ("wprintf", 1, 1), ("wprintf", 2, 1)]
    tap.ok(got == want, "the wide printf family's bytes are UTF-8 bytes, its results the "
           "characters", (got, ev))
    rc, ftxt, _ = run([a.tracefs, "cat", trace, "ranks/0/files.txt"])
    rows = {}
    for line in ftxt.decode().splitlines():
        tok = line.split()
        if not line.startswith("#") and len(tok) >= 9:
            rows[tok[-1] if not tok[-1].startswith("pipe:") else "OUT"] = int(tok[4])
    tap.ok(rc == 0 and rows.get(wb) == os.path.getsize(wb) == 23 and
           rows.get("OUT") == len(out),
           "files.txt: the bytes written are the file's size and the output's length", rows)


def io_syms(calls):
    """The sym names of the io kinds of calls.txt that are not custom."""
    names, io = [], False
    with open(calls) as f:
        for line in f:
            tok = line.split()
            if line.startswith("kind "):
                io = tok[2] == "io" and "custom" not in tok[3:]
            elif tok and tok[0] == "sym" and io:
                names.append(re.match(r"\s*sym\s+[^(]*?\b(\w+)\s*\(", line).group(1))
    return names


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--tracefs", "--calls-prog", "--calls", "--src"):
        ap.add_argument(opt, required=True)
    a = ap.parse_args()
    tap = Tap()
    with open(a.src) as f:
        src = f.read()
    missing = [n for n in io_syms(a.calls)
               if not re.search(r"\b(CALL\(|v\w*\(|vscan\w*\()%s\b" % re.escape(n), src)]
    tap.ok(not missing, "cap_calls.c calls every io function of calls.txt (%d)"
           % len(io_syms(a.calls)), missing)
    with tempfile.TemporaryDirectory(prefix="tfs-calls.") as work:
        plain_dir, traced_dir = os.path.join(work, "plain"), os.path.join(work, "traced")
        os.mkdir(plain_dir)
        os.mkdir(traced_dir)
        rc, plain, plain_err = run([a.calls_prog, plain_dir], stdin=STDIN)
        tap.ok(rc == 0 and plain == b"out\n7ff!abc\nAB99abcde5",
               "cap_calls untraced: exit 0 and its known output", (rc, plain, plain_err))
        trace = os.path.join(work, "calls.trace")
        rc, traced, err = run([a.tracefs, "record", "--timing=none", "-o", trace, "--",
                               a.calls_prog, traced_dir], stdin=STDIN)
        tap.ok(rc == 0 and traced == plain, "traced: exit 0, output byte-identical", err)
        err_rec = err
        hashes = [re.search(rb"^errno \d+$", x, re.M) for x in (plain_err, err)]
        tap.ok(all(hashes) and hashes[0].group(0) == hashes[1].group(0),
               "traced: every call leaves errno as it does untraced", (plain_err, err))
        same = all(open(os.path.join(plain_dir, f), "rb").read() ==
                   open(os.path.join(traced_dir, f), "rb").read()
                   for f in ("b", "c", "i", "s", "t", "u"))
        tap.ok(same and os.path.getsize(os.path.join(traced_dir, "s")) == 40,
               "traced: the files it wrote are byte-identical to untraced")
        ev, out = io_events(a, trace)
        exp = expect(traced_dir, [m.group(1).decode() for m in
                                  re.finditer(rb"^tmp (.*)$", err_rec, re.M)])
        diff, b = compare(exp, ev)
        tap.ok(diff is None, "%d I/O events exactly as cap_calls.c describes them" % len(exp),
               diff)
        if diff is None:
            nn = [int(b.vals["NN%d" % i]) for i in (1, 2, 3)]
            tap.ok(all(v >= 0 for v in nn), "fputs and puts returned non-negative values", nn)
            pid = re.search(rb"^pid (\d+)$", err_rec, re.M)
            tap.ok(pid and b.vals["PID"] == pid.group(1).decode(),
                   "F_OFD_GETLK names the process whose lock is in the way",
                   (b.vals["PID"], err_rec))
            ports = {b.vals["PORT"], b.vals["Q"], b.vals["R"]}
            tap.ok(len(ports) == 3 and "0" not in ports,
                   "the server, and each accepted connection, are told apart by port", ports)
        check_wide(tap, a, work)
        check_wide_bytes(tap, a, work)
        # popen's descriptor is a new file even where one was closed unseen (a raw close)
        prog = ("import ctypes, os\nlibc = ctypes.CDLL(None)\n"
                "libc.popen.restype = ctypes.c_void_p\n"
                "libc.pclose.argtypes = [ctypes.c_void_p]\n"
                "fd = os.open('/dev/null', os.O_RDONLY)\nlibc.syscall(3, fd)\n"
                "print(fd, libc.pclose(libc.popen(b'exit 0', b'r')))\n")
        ptrace = os.path.join(work, "popen.trace")
        rc, pout, err = run([a.tracefs, "record", "-o", ptrace, "--", sys.executable, "-c",
                             prog])
        rc2, ptxt, _ = run([a.tracefs, "cat", ptrace, "ranks/0/threads/0/trace.txt"])
        got = [ln for ln in ptxt.decode().splitlines() if " popen(" in ln]
        fdn = pout.split()[0].decode() if pout.split() else "?"
        tap.ok(rc == 0 and rc2 == 0 and len(got) == 1 and
               ("= %s<pipe:[" % fdn) in got[0] and "/dev/null" not in got[0],
               "popen's descriptor names its pipe, not a file closed unseen before", got or err)
        # files.txt: the bytes each file gave and took, from cap_calls.c's description
        rc, ftxt, err = run([a.tracefs, "cat", trace, "ranks/0/files.txt"])
        rows = {}
        for line in ftxt.decode().splitlines():
            tok = line.split()
            if line.startswith("#") or len(tok) < 9:
                continue
            rows[tok[-1]] = (int(tok[3]), int(tok[4]))
        want = {"a": (10 + 50 + 10 + 1, 100), "b": (5, 5),
                "c": (8 + 4 + 4 + 4 + 22, 16 + 2 + 7), "s": (0, 40),
                # fgetc, fgets, getc, getline, getdelim, fread; then sendfile, splice,
                # copy_file_range take from it; write, then putc_unlocked give to it
                # (__uflow's and __overflow's buffers count as neither)
                "i": (1 + 17 + 4 + 2 + 6 + 14 + 10 + 4 + 3, 28 + 1),
                "u": (0, 5 + 5 + 4 + 3), "t": (0, 0)}
        got = {f: rows.get(os.path.join(traced_dir, f)) for f in want}
        tap.ok(rc == 0 and got == want, "files.txt: bytes read from and written to each file",
               "got %r" % got)
        # a failed open opened nothing: cp probes its target as a directory first
        probe = os.path.join(work, "probe.txt")
        prog = ("import os, sys\np = sys.argv[1]\n"
                "try:\n    os.open(p, os.O_RDONLY | os.O_DIRECTORY)\n"
                "except FileNotFoundError:\n    pass\n"
                "fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)\n"
                "os.write(fd, b'x' * 7)\nos.close(fd)\n")
        ftrace = os.path.join(work, "probe.trace")
        rc, _, err = run([a.tracefs, "record", "-o", ftrace, "--", sys.executable, "-c", prog,
                          probe])
        rc2, ftxt, _ = run([a.tracefs, "cat", ftrace, "ranks/0/files.txt"])
        row = [line.split() for line in ftxt.decode().splitlines()
               if not line.startswith("#") and line.split() and line.split()[-1] == probe]
        tap.ok(rc == 0 and rc2 == 0 and len(row) == 1 and row[0][1] == "file" and
               row[0][-2] == "O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC" and row[0][4] == "7",
               "files.txt: a file's kind and flags come from the open that opened it, not "
               "from one that failed before", row or err)
        # layers: fclose frees the FILE and its buffer inside itself; by default those frees
        # are plain events, with `nested` they say where they were made
        plain_frees = [line for line in out.decode().splitlines() if " free(" in line]
        nested_dir = os.path.join(work, "nested")
        os.mkdir(nested_dir)
        ntrace = os.path.join(work, "nested.trace")
        rc, _, err = run([a.tracefs, "record", "--timing=none", "--trace=all,nested", "-o",
                          ntrace, "--", a.calls_prog, nested_dir], stdin=STDIN)
        rc2, nout, _ = run([a.tracefs, "cat", ntrace, "ranks/0/threads/0/trace.txt"])
        marked = [line for line in nout.decode().splitlines()
                  if re.search(r" free\(.*, depth=1, in=\"fclose\"\)", line)]
        tap.ok(rc == 0 and rc2 == 0 and len(marked) >= 4 and
               not any("depth=" in line for line in plain_frees),
               "nested: the frees fclose makes are marked depth=1, in=\"fclose\" (%d), and "
               "by default nothing is marked" % len(marked), err)
        # without backtraces every allocation record takes the capture's short path, which
        # must leave a nested one to the general body: fopen's mallocs are marked as well
        bt0_dir = os.path.join(work, "nested_bt0")
        os.mkdir(bt0_dir)
        bt0_trace = os.path.join(work, "nested_bt0.trace")
        rc, _, err = run([a.tracefs, "record", "--timing=none", "--trace=all,nested",
                          "--backtrace-depth=0", "-o", bt0_trace, "--", a.calls_prog, bt0_dir],
                         stdin=STDIN)
        rc2, bout, _ = run([a.tracefs, "cat", bt0_trace, "ranks/0/threads/0/trace.txt"])
        lines = bout.decode().splitlines()
        in_fopen = [line for line in lines if re.search(r" malloc\(.*, depth=1, in=\"fopen\"\)",
                                                        line)]
        in_fclose = [line for line in lines if re.search(r" free\(.*, depth=1, in=\"fclose\"\)",
                                                         line)]
        tap.ok(rc == 0 and rc2 == 0 and in_fopen and len(in_fclose) == len(marked),
               "nested, --backtrace-depth=0: fopen's mallocs (%d) and fclose's frees (%d) "
               "are marked as with backtraces" % (len(in_fopen), len(in_fclose)), err)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
