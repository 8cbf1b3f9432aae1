#!/usr/bin/env python3
"""Names and paths with every byte FORMAT.md §9.1 escapes, in every view that prints one.

mknames writes a trace whose file names, fopen mode, processes (program, images, end),
phase name and symbol hold C0 controls and a newline, DEL, the C1 controls as UTF-8
(U+0085) and as raw bytes, bytes of no UTF-8 between valid UTF-8, '"', '\\', '>' and ';'.
Each text view must print them as trace.txt prints a string (§9.1, without the quotes): one
line per line, nothing a terminal acts on. The expected bytes are written out below by hand,
not computed, so that they check the escaper rather than restate it. With --mount the same
files are read through a real mount (exit 77 when /dev/fuse is absent).
"""

import argparse
import atexit
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

# the strings of mknames.c
FILE_A = b"/tmp/a\tb\nc\x01\x1b[0m\x7f d\xc2\x85e\x85f\xc3\xa9g\"h\\i>j;k"
FILE_B = b"\xc3\xa9\xff\xc3\xa9 caf\xc3"
PHASE = b"ph\xc2\x85\x85"

# ... as the text views print them: \t \n \" \\ and \xHH for C0, DEL, C1 (as UTF-8 or raw)
# and bytes of no UTF-8; é (valid UTF-8) as it is
FILE_A_TEXT = b"/tmp/a\\tb\\nc\\x01\\x1b[0m\\x7f d\\xc2\\x85e\\x85f\xc3\xa9g\\\"h\\\\i>j;k"
FILE_B_TEXT = b"\xc3\xa9\\xff\xc3\xa9 caf\\xc3"
PROGRAM_TEXT = b"prog\\nname\\xc2\\x85\\x9b\xc3\xa9\\xff"
FUNCTION_TEXT = b"fn\\n\\xc2\\x85<x>;y\\x9b"
SRCFILE_TEXT = b"/src/a\\tb\\xc2\\x85.c"

FILES_HEAD = (b"# files of rank %d: 2 file ids, timing none (first, last: T<thread>:<event>)\n"
              b"#    id kind         calls           read        written              first"
              b"               last flags                    name\n")


def files_txt(rank):
    """README.txt's columns; the fopen mode "r e\\x01" is a flags word: space as \\x20."""
    return (FILES_HEAD % rank +
            b"      1 file             2            100              0               T0:0"
            b"               T0:1 r\\x20e\\x01               " + FILE_A_TEXT + b"\n" +
            b"      2 file             1              7              0               T0:2"
            b"               T0:2 -                        " + FILE_B_TEXT + b"\n")


def expected():
    """{path: (what, bytes)}: the bytes the file holds, its first line(s), or (lines) a
    block of lines in it. A path may end in a space, to check another part of a file."""
    folded = b"0x400000;fn\\n\\xc2\\x85<x>\\x3by\\x9b"
    return {
        b"ranks/0/files.txt": ("whole", files_txt(0)),
        b"ranks/1/files.txt": ("whole", files_txt(1)),
        b"ranks/0/backtraces.txt": ("whole", b"stack#0\n  0x400000\n  " + FUNCTION_TEXT +
                                    b" (" + SRCFILE_TEXT + b":7)\n"),
        b"ranks/0/allocs.folded": ("whole", folded + b" 64\n"),
        b"ranks/0/leaks.folded": ("whole", folded + b" 64\n"),
        b"ranks/0/heap.txt": ("first line", b"# heap of rank 0 (" + PROGRAM_TEXT +
                              b" (pid 100)): the malloc family, replayed in the order calls "
                              b"returned\n"),
        b"ranks/0/phases/" + PHASE + b"/summary.txt": (
            "first line", b"# summary of rank 0 phase directory ph\\xc2\\x85\\x85: 2 events, "
                          b"timing none\n"),
        b"README.txt ": ("lines", b"Processes (a rank each, along the fork tree)\n"
                                  b"  rank 0  " + PROGRAM_TEXT + b" (ran sh -> " +
                                  PROGRAM_TEXT + b"), pid 100: exited 0\\nforged line\n"
                                  b"  rank 1  child\\x1b]0;t\\x07, pid 101, started by "
                                  b"rank 0: killed\\r\n\n"),
        b"README.txt": ("first lines", b"tracefs view of n\\xc2\\x85\\x01.trace\n\nThis tree is "
                        b"generated from one compressed trace file; nothing in it is stored "
                        b"as text.\n  program   " + PROGRAM_TEXT + b"\n"),
    }


# ... as the JSON views have them: valid UTF-8 (U+0085, é) as it is, each byte of no UTF-8
# (raw 0x85, 0x9b, 0xff) U+FFFD; JSON escapes the controls
PROGRAM_JSON = "prog\nname\u0085\ufffd\u00e9\ufffd"
PHASE_JSON = "ph\u0085\ufffd"


def json_names(obj, path):
    """The names a JSON file holds, to compare with json_expected()."""
    if path == b"info.json":
        return {"program": obj["program"], "meta.program": obj["meta"]["program"],
                "meta.images": obj["meta"]["images"], "meta.end": obj["meta"]["end"],
                "phase name": obj["phases"][0]["name"], "phase dir": obj["phases"][0]["dir"]}
    return {"process_name %d" % o["pid"]: o["args"]["name"] for o in obj
            if isinstance(o, dict) and o.get("name") == "process_name"}


def json_expected(path):
    if path == b"info.json":
        return {"program": PROGRAM_JSON, "meta.program": PROGRAM_JSON,
                "meta.images": "sh -> " + PROGRAM_JSON, "meta.end": "exited 0\nforged line",
                "phase name": PHASE_JSON, "phase dir": PHASE_JSON}
    want = {"process_name 0": PROGRAM_JSON + " (pid 100)"}
    if path == b"trace.json":
        want["process_name 1"] = "child\x1b]0;t\x07 (pid 101)"
    return want


JSON_FILES = (b"info.json", b"trace.json", b"ranks/0/trace.json")


def compare_json(tap, how, path, data):
    try:
        obj = json.loads(data)
        got = json_names(obj, path)
    except (ValueError, KeyError, IndexError, TypeError) as e:
        got = "not JSON of the expected shape: %s" % e
    tap.ok(got == json_expected(path), "%s %s: names valid UTF-8, U+FFFD for each byte of no "
           "UTF-8" % (how, path.decode()), "got  %r\nwant %r" % (got, json_expected(path)))


def compare(tap, how, path, data, want):
    what, exp = want
    if what == "lines":  # the block that starts as the expected bytes do
        at = data.find(exp[:exp.index(b"\n") + 1])
        got = data[at:at + len(exp)] if at >= 0 else b""
    elif what == "first line":
        got = data[:data.index(b"\n") + 1] if b"\n" in data else data
    elif what == "first lines":
        got = data[:len(exp)]
    else:
        got = data
    tap.ok(got == exp, "%s %s: the %s as §9.1 escapes its names" %
           (how, path.decode("ascii", "backslashreplace"), what),
           "got  %r\nwant %r" % (got, exp))


def check_cat(tap, tracefs, trace):
    for path, want in expected().items():
        p = subprocess.run([tracefs, "cat", trace, path.rstrip()], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        if tap.ok(p.returncode == 0 and not p.stderr, "tracefs cat %r" % path, p.stderr):
            compare(tap, "cat", path, p.stdout, want)
    for path in JSON_FILES:
        p = subprocess.run([tracefs, "cat", trace, path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        compare_json(tap, "cat", path, p.stdout)
    p = subprocess.run([tracefs, "info", "--json", trace], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    compare_json(tap, "info --json:", b"info.json", p.stdout)
    # the human summary prints the same strings as every text file prints a name
    p = subprocess.run([tracefs, "info", trace], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    for line in (b"program           prog\\nname\\xc2\\x85\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\n",
                 b"images            sh -> prog\\nname\\xc2\\x85\xef\xbf\xbd\xc3\xa9"
                 b"\xef\xbf\xbd\n",
                 b"end.rank1         killed\\r\n",
                 b"            2 ph\\xc2\\x85\xef\xbf\xbd\n"):
        tap.ok(p.returncode == 0 and line in p.stdout, "info prints %r" % line,
               p.stdout.decode("ascii", "backslashreplace"))
    tap.ok(re.search(rb"(?m)^trace: +/.*/n\\xc2\\x85\\x01\.trace$", p.stdout),
           "info prints the trace's path escaped", p.stdout[:200])


def is_mounted(mp):
    with open("/proc/self/mountinfo", "rb") as f:
        return any(line.split()[4] == os.fsencode(mp) for line in f)


def check_mount(tap, tracefs, trace, mp):
    os.mkdir(mp)

    def undo():
        for cmd in ([tracefs, "umount", mp], ["fusermount3", "-u", "-z", mp]):
            if is_mounted(mp):
                subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=60)
    atexit.register(undo)
    p = subprocess.run([tracefs, "mount", trace, mp], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    if not tap.ok(p.returncode == 0 and is_mounted(mp), "tracefs mount", p.stderr):
        return
    try:
        for path, want in expected().items():
            with open(os.path.join(os.fsencode(mp), path.rstrip()), "rb") as f:
                compare(tap, "mounted", path, f.read(), want)
        for path in JSON_FILES:
            with open(os.path.join(os.fsencode(mp), path), "rb") as f:
                compare_json(tap, "mounted", path, f.read())
    finally:
        p = subprocess.run([tracefs, "umount", mp], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        tap.ok(p.returncode == 0 and not is_mounted(mp), "tracefs umount", p.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--mk", required=True, help="the mknames program")
    ap.add_argument("--mount", action="store_true", help="read through a real mount")
    args = ap.parse_args()
    if args.mount and not os.path.exists("/dev/fuse"):
        print("1..0 # SKIP /dev/fuse is absent")
        return 77
    tap = Tap()
    work = tempfile.mkdtemp(prefix="tracefs-names-")
    try:
        trace = os.path.join(os.fsencode(work), b"n\xc2\x85\x01.trace")  # a name too
        p = subprocess.run([args.mk, trace], stderr=subprocess.PIPE, timeout=120)
        if not tap.ok(p.returncode == 0, "mknames writes the trace", p.stderr):
            return tap.done()
        if args.mount:
            check_mount(tap, os.path.abspath(args.tracefs), trace, os.path.join(work, "mp"))
        else:
            check_cat(tap, args.tracefs, trace)
    finally:
        if not is_mounted(os.path.join(work, "mp")):
            shutil.rmtree(work, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
