#!/usr/bin/env python3
"""Programs nobody here wrote, recorded against strace (TAP).

tar (creating and listing an archive), gzip, sqlite3 reading SQL from its stdin and
python3 printing, making pipes, a socket pair, a socket and a dup2, each run twice:
- under `strace -f -k` (a backtrace per system call), untraced. A call is made through a
  libc wrapper when its innermost frame is a libc entry point (not a `*_nocancel` one) and
  the frame that called it lies outside libc and the dynamic loader; the others are
  explained: the loader's (reading shared objects before any preload runs) and libc's own
  (stdio flushing its buffers, fopen opening its file, opendir, locale files), which no
  preload can see because they never go through the PLT;
- under `tracefs record`: the counts of read, write, openat (open and openat), creat,
  close, dup2, pipe2 (pipe and pipe2) and socket events must equal strace's counts of the
  calls made through wrappers, exactly. The loader's and libc's own calls are printed.
Then the stdio layer against an independent expectation: every byte the program put on its
stdout is accounted for by exactly one event on descriptor 1 (a write, or a stdio call's
bytes: printf, fputs, fwrite...), and sqlite3's stdio reads of its stdin add up to its
input. Output traced is byte-identical to untraced.

  check_strace.py --tracefs T
"""

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

SYSCALLS = ("read", "write", "openat", "creat", "close", "dup2", "pipe2", "socket")
# the syscall each event kind makes (glibc 2.36, x86-64: open() is openat, pipe() pipe2)
KIND_SYSCALL = {"read": "read", "write": "write", "open": "openat", "openat": "openat",
                "creat": "creat", "close": "close", "dup2": "dup2", "pipe": "pipe2",
                "pipe2": "pipe2", "socket": "socket"}
# the kinds whose bytes went to the descriptor they name: what the program wrote
OUT_KINDS = {"write", "printf", "fprintf", "dprintf", "puts", "fputs", "fputc", "putc",
             "putchar", "fwrite", "pwrite", "writev", "send", "sendto"}
IN_STDIO = {"fgets", "fgetc", "getc", "getchar", "getline", "getdelim", "fread"}


def run(cmd, stdin=None, cwd=None, timeout=600):
    e = dict(os.environ)
    for k in ("TFS_CAPTURE", "TFS_OUTPUT", "TFS_SPOOL", "TFS_TIMING", "TFS_TRACE", "LD_PRELOAD"):
        e.pop(k, None)
    e["LC_ALL"] = "C"
    p = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=e, cwd=cwd, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def strace_classes(cmd, work, stdin=None, cwd=None):
    """{(syscall, class): count}, class one of wrapper, loader, libc."""
    out = os.path.join(work, "strace.k")
    rc, _, err = run(["strace", "-f", "-k", "-qq", "-o", out, "-e",
                      "trace=" + ",".join(SYSCALLS + ("open", "pipe", "dup3"))] + cmd,
                     stdin=stdin, cwd=cwd)
    if rc != 0:
        raise RuntimeError("strace: %s" % err.decode(errors="replace"))
    counts = collections.Counter()
    cur, frames = None, []

    def flush():
        if cur is None:
            return
        f0 = frames[0] if frames else ""
        f1 = frames[1] if len(frames) > 1 else ""
        if "ld-linux" in f0:
            c = "loader"
        elif "libc.so" in f0 and ("_nocancel" in f0 or "libc.so" in f1 or "ld-linux" in f1):
            c = "libc"
        elif "libc.so" in f0:
            c = "wrapper"
        else:
            c = "unknown"
        counts[(cur, c)] += 1

    with open(out) as f:
        for line in f:
            m = re.match(r"^\d+ +(\w+)\(", line)
            if m:
                flush()
                cur, frames = m.group(1), []
            elif line.startswith(" > "):
                frames.append(line)
    flush()
    return counts


def traced_events(tracefs, cmd, work, stdin=None, cwd=None):
    trace = os.path.join(work, "t.trace")
    rc, out, err = run([tracefs, "record", "--timing=none", "-o", trace, "--"] + cmd,
                       stdin=stdin, cwd=cwd)
    if rc != 0:
        raise RuntimeError("record: %s" % err.decode(errors="replace"))
    rc, info, err = run([tracefs, "info", "--json", trace])
    ev = []
    for s in json.loads(info)["streams"]:
        rc, text, err = run([tracefs, "cat", trace, "ranks/%d/threads/%d/events.jsonl"
                             % (s["rank"], s["thread"])])
        ev += [json.loads(line) for line in text.decode().splitlines()]
    return out, ev


def check(tap, a, name, cmd, work, stdin=None, cwd=None, stdin_bytes=False, inline_nl=False):
    rc, plain, err = run(cmd, stdin=stdin, cwd=cwd)
    if not tap.ok(rc == 0, "%s: runs untraced" % name, err):
        return
    st = strace_classes(cmd, work, stdin=stdin, cwd=cwd)
    out, ev = traced_events(a.tracefs, cmd, work, stdin=stdin, cwd=cwd)
    tap.ok(out == plain, "%s: traced output byte-identical (%d bytes)" % (name, len(plain)))
    ours = collections.Counter(KIND_SYSCALL[e["name"]] for e in ev if e["name"] in KIND_SYSCALL)
    wrap = {s: st[(s, "wrapper")] + (st[("open", "wrapper")] if s == "openat" else 0)
            + (st[("pipe", "wrapper")] if s == "pipe2" else 0) for s in SYSCALLS}
    diff = {s: (ours[s], wrap[s]) for s in SYSCALLS if ours[s] != wrap[s]}
    unknown = {k: v for k, v in st.items() if k[1] == "unknown"}
    tap.ok(not diff and not unknown, "%s: events = strace's calls through libc wrappers: %s"
           % (name, ", ".join("%s %d" % (s, wrap[s]) for s in SYSCALLS if wrap[s])),
           "differ (ours, strace's): %s; unclassified: %s" % (diff, unknown))
    tap.diag("%s: explained, not interposable: loader %s; libc's own %s" % (
        name, dict((k[0], v) for k, v in st.items() if k[1] == "loader"),
        dict((k[0], v) for k, v in st.items() if k[1] == "libc")))
    put = 0
    for e in ev:
        ar = e["args"]
        if e["name"] in OUT_KINDS and ar.get("fd") == 1 and ar.get("result", -1) >= 0:
            put += ar["bytes"] if "bytes" in ar else ar["result"]
    if inline_nl:
        # tar ends each line with putc_unlocked, which <stdio.h> inlines into the program
        # when optimising: a store into the FILE's buffer, no call for anyone to see
        put += plain.count(b"\n")
    tap.ok(put == len(plain), "%s: stdout's %d bytes = the bytes of the events on fd 1%s"
           % (name, len(plain), " and one inline newline per line" if inline_nl else ""),
           "got %d" % put)
    if stdin_bytes:
        got = sum(e["args"].get("bytes", max(e["args"]["result"], 0)) for e in ev
                  if e["name"] in IN_STDIO and e["args"].get("fd") == 0)
        tap.ok(got == len(stdin), "%s: its stdio reads of stdin add up to the input's %d bytes"
               % (name, len(stdin)), "got %d" % got)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracefs", required=True)
    a = ap.parse_args()
    a.tracefs = os.path.abspath(a.tracefs)
    tap = Tap()
    if not shutil.which("strace"):
        tap.skip("programs against strace", "strace is not installed")
        return tap.done()
    with tempfile.TemporaryDirectory(prefix="tfs-strace.") as work:
        src = os.path.join(work, "src")
        os.mkdir(src)
        for i in range(20):
            with open(os.path.join(src, "f%02d.txt" % i), "w") as f:
                f.write(("line %d of file %d\n" % (i, i)) * (50 * i + 1))
        tar = os.path.join(work, "a.tar")
        progs = []
        if shutil.which("tar"):
            progs.append(("tar -c", ["tar", "-cf", tar, "-C", src, "."], None, False))
            progs.append(("tar -tv", ["tar", "-tvf", tar], None, "inline_nl"))
        if shutil.which("gzip"):
            progs.append(("gzip", ["gzip", "-c", os.path.join(src, "f19.txt")], None, False))
        if shutil.which("sqlite3"):
            sql = ["CREATE TABLE t(a INTEGER, b TEXT);", "BEGIN;"]
            sql += ["INSERT INTO t VALUES(%d, 'row %d');" % (i, i) for i in range(300)]
            sql += ["COMMIT;", "SELECT count(*), sum(a) FROM t;",
                    "SELECT b FROM t WHERE a % 50 = 0;"]
            progs.append(("sqlite3", ["sqlite3", ":memory:"],
                          ("\n".join(sql) + "\n").encode(), "stdin_bytes"))
        else:
            tap.skip("sqlite3 against strace", "sqlite3 is not installed")
        py = ("import os, socket\n"
              "r, w = os.pipe(); os.write(w, b'x'); os.read(r, 1); os.close(r); os.close(w)\n"
              "a, b = socket.socketpair(); a.send(b'y'); b.recv(1); a.close(); b.close()\n"
              "s = socket.socket(); s.close()\n"
              "fd = os.open('/etc/hostname', os.O_RDONLY); os.dup2(fd, 100)\n"
              "os.read(100, 10); os.close(100); os.close(fd)\n"
              "for i in range(200): print('line', i)\n")
        progs.append(("python3", ["/usr/bin/python3", "-S", "-c", py], None, False))
        for name, cmd, stdin, how in progs:
            try:
                check(tap, a, name, cmd, work, stdin=stdin, cwd=work,
                      stdin_bytes=how == "stdin_bytes", inline_nl=how == "inline_nl")
            except Exception as e:  # a crash of the checker is a failure, not an abort
                tap.ok(False, "%s raised %s: %s" % (name, type(e).__name__, e))
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
