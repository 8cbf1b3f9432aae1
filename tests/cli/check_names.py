#!/usr/bin/env python3
"""Names and paths with every byte FORMAT.md §9.1 escapes, in every view that prints one.

mknames writes a trace whose file names, fopen mode, processes (program, images, end),
phase names and symbol hold C0 controls and a newline, DEL, the C1 controls as UTF-8
(U+0085) and as raw bytes, bytes of no UTF-8 between valid UTF-8, '"', '\\', '>' and ';',
what ends a C comment (a trigraph too) and what XML refuses (U+FFFE), a program of 1000
bytes and a phase name longer than a directory name may be.
Each text view must print them as trace.txt prints a string (§9.1, without the quotes): one
line per line, nothing a terminal acts on. The expected bytes are written out below by hand,
not computed, so that they check the escaper rather than restate it. Every phase directory
is where info.json's "dir" says (tracefs ls, cat, the mount's listing), `tracefs ls` prints
a line per entry, every timeline.svg is well-formed XML and replay/proxy.c compiles (with
trigraphs on). With --mount the same files are read through a real mount (exit 77 when
/dev/fuse is absent).
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
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

# the strings of mknames.c
FILE_A = b"/tmp/a\tb\nc\x01\x1b[0m\x7f d\xc2\x85e\x85f\xc3\xa9g\"h\\i>j;k"
FILE_B = b"\xc3\xa9\xff\xc3\xa9 caf\xc3"
PHASE = b"ph\xc2\x85\x85"
E = b"\xc3\xa9"  # e-acute, two bytes: a cut at an odd byte would split it
LONG_PROGRAM = E * 500

# ... as the text views print them: \t \n \" \\ and \xHH for C0, DEL, C1 (as UTF-8 or raw)
# and bytes of no UTF-8; é (valid UTF-8) as it is
FILE_A_TEXT = b"/tmp/a\\tb\\nc\\x01\\x1b[0m\\x7f d\\xc2\\x85e\\x85f\xc3\xa9g\\\"h\\\\i>j;k"
FILE_B_TEXT = b"\xc3\xa9\\xff\xc3\xa9 caf\\xc3"
PROGRAM_TEXT = b"prog\\nname\\xc2\\x85\\x9b\xc3\xa9\\xff */ *??/\\n/"
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
        b"ranks/2/files.txt": ("whole", files_txt(2)),
        b"ranks/0/backtraces.txt": ("whole", b"stack#0\n  0x400000\n  " + FUNCTION_TEXT +
                                    b" (" + SRCFILE_TEXT + b":7)\n"),
        b"ranks/0/allocs.folded": ("whole", folded + b" 64\n"),
        b"ranks/0/leaks.folded": ("whole", folded + b" 64\n"),
        b"ranks/0/heap.txt": ("first line", b"# heap of rank 0 (" + PROGRAM_TEXT +
                              b" (pid 100)): the malloc family, replayed in the order calls "
                              b"returned\n"),
        # 1000 bytes of program: cut between two characters, marked, the pid kept
        b"ranks/2/heap.txt": ("first line", b"# heap of rank 2 (" + E * 136 +
                              b"...[+728 bytes] (pid 102)): the malloc family, replayed in "
                              b"the order calls returned\n"),
        b"ranks/0/phases/ph%C2%85%85/summary.txt": (
            "first line", b"# summary of rank 0 phase directory ph%C2%85%85: 2 events, "
                          b"timing none\n"),
        b"README.txt ": ("lines", b"Processes (a rank each, along the fork tree)\n"
                                  b"  rank 0  " + PROGRAM_TEXT + b" (ran sh -> " +
                                  PROGRAM_TEXT + b"), pid 100: exited 0\\nforged line\n"
                                  b"  rank 1  child\\x1b]0;t\\x07, pid 101, started by "
                                  b"rank 0: killed\\r\n"
                                  b"  rank 2  " + LONG_PROGRAM + b", pid 102, started by "
                                  b"rank 0: exited 2\n\n"),
        b"README.txt": ("first lines", b"tracefs view of n\\xc2\\x85\\x01.trace\n\nThis tree is "
                        b"generated from one compressed trace file; nothing in it is stored "
                        b"as text.\n  program   " + PROGRAM_TEXT + b"\n"),
    }


# ... as the JSON views have them: valid UTF-8 (U+0085, é) as it is, each byte of no UTF-8
# (raw 0x85, 0x9b, 0xff) U+FFFD; JSON escapes the controls
PROGRAM_JSON = "prog\nname\u0085\ufffd\u00e9\ufffd */ *??/\n/"
PHASE_JSON = "ph\u0085\ufffd"
# the phase directories: what the text views escape as %XX (so UTF-8 that info.json holds
# exactly), '/' too; U+FFFE, '"', '\\' as they are; the long name cut between characters
PHASE_DIRS = ["ph%C2%85%85", "c*%2F\"q\\??%2F%0Az\ufffe&<]]>", "x" + "\u00e9" * 119 + "~2"]


def json_names(obj, path):
    """The names a JSON file holds, to compare with json_expected()."""
    if path == b"info.json":
        return {"program": obj["program"], "meta.program": obj["meta"]["program"],
                "meta.images": obj["meta"]["images"], "meta.end": obj["meta"]["end"],
                "phase name": obj["phases"][0]["name"],
                "phase dirs": [p["dir"] for p in obj["phases"]]}
    return {"process_name %d" % o["pid"]: o["args"]["name"] for o in obj
            if isinstance(o, dict) and o.get("name") == "process_name"}


def json_expected(path):
    if path == b"info.json":
        return {"program": PROGRAM_JSON, "meta.program": PROGRAM_JSON,
                "meta.images": "sh -> " + PROGRAM_JSON, "meta.end": "exited 0\nforged line",
                "phase name": PHASE_JSON, "phase dirs": PHASE_DIRS}
    want = {"process_name 0": PROGRAM_JSON + " (pid 100)"}
    if path == b"trace.json":
        want["process_name 1"] = "child\x1b]0;t\x07 (pid 101)"
        want["process_name 2"] = "\u00e9" * 286 + "...[+428 bytes] (pid 102)"
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
    # (the trace's bytes, escaped: no U+FFFD)
    for line in (b"\nprogram           " + PROGRAM_TEXT + b"\n",
                 b"\nimages            sh -> " + PROGRAM_TEXT + b"\n",
                 b"\nend.rank1         killed\\r\n",
                 b"\nprogram.rank2     " + LONG_PROGRAM + b"\n",
                 b"\nphases:\n    rank thread        first       events directory\n"
                 b"       0      0            0            2 ph%C2%85%85\n"
                 b"       0      0            1            2 c*%2F\\\"q\\\\??%2F%0Az\xef\xbf\xbe&<]]>\n"
                 b"       1      0            0            4 x" + E * 119 + b"~2\n\n"):
        tap.ok(p.returncode == 0 and line in p.stdout, "info prints %r" % line[:200],
               p.stdout.decode("ascii", "backslashreplace"))
    tap.ok(re.search(rb"(?m)^trace: +/.*/n\\xc2\\x85\\x01\.trace$", p.stdout),
           "info prints the trace's path escaped", p.stdout[:200])
    tree = check_ls(tap, tracefs, trace)
    check_phase_dirs(tap, tracefs, trace, tree)
    check_svg(tap, tracefs, trace, tree)


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)


def ls(tracefs, trace, path):
    """`tracefs ls` of @path: its entries (kind, size, name), and the lines that are none."""
    p = run([tracefs, "ls", trace, path])
    entries, bad = [], []
    if p.returncode or p.stderr or (p.stdout and not p.stdout.endswith(b"\n")):
        bad.append(b"exit %d: %r" % (p.returncode, p.stderr[:200]))
    for line in p.stdout.split(b"\n")[:-1]:
        m = re.fullmatch(rb"([df]) +(\d+) (.+)", line)
        if m:
            entries.append((m.group(1), int(m.group(2)), m.group(3)))
        else:
            bad.append(line)
    return entries, bad


def plain_name(name):
    """A name `tracefs ls` can print on a line and a shell can pass back: UTF-8 without
    control characters (C0, DEL, C1) or '/'."""
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return name not in (b".", b"..") and not any(
        ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f or c == "/" for c in text)


def walk(tracefs, trace):
    """Every directory of the tree by `tracefs ls`: {path: entries}, and what is wrong."""
    tree, bad, todo = {}, [], [b""]
    while todo:
        d = todo.pop()
        entries, wrong = ls(tracefs, trace, d)
        tree[d] = entries
        bad += [b"%s: %s" % (d, w) for w in wrong]
        bad += [b"%s: entry %r" % (d, e[2]) for e in entries if not plain_name(e[2])]
        todo += [(d + b"/" if d else b"") + e[2] for e in entries if e[0] == b"d"]
    return tree, bad


def check_ls(tap, tracefs, trace, mp=None):
    """`tracefs ls` prints a line per entry, each name as the directory holds it."""
    tree, bad = walk(tracefs, trace)
    tap.ok(len(tree) > 100 and not bad, "tracefs ls: a line `kind size name` per entry in "
           "each of %d directories, names UTF-8 without controls" % len(tree),
           b"\n".join(bad[:10]).decode("ascii", "backslashreplace"))
    if mp:
        differ = [d for d, entries in tree.items()
                  if sorted(os.listdir(os.path.join(os.fsencode(mp), d))) !=
                  sorted(e[2] for e in entries)]
        tap.ok(not differ, "mounted: each of %d directories lists what tracefs ls prints"
               % len(tree), repr(differ[:5]))
    return tree


def check_phase_dirs(tap, tracefs, trace, tree, mp=None):
    """Each phase's directory is where info.json's "dir" says: listed, read, mounted."""
    p = run([tracefs, "info", "--json", trace])
    phases = json.loads(p.stdout)["phases"]
    tap.ok(len(phases) == 3, "info --json lists the 3 phases", p.stdout[-500:])
    for ph in phases:
        d = ph["dir"].encode()
        parent = b"ranks/%d/phases" % ph["rank"]
        path = parent + b"/" + d
        tap.ok((b"d", 0, d) in tree.get(parent, []), "tracefs ls %s lists info.json's dir %r"
               % (parent.decode(), ph["dir"][:40]), repr(tree.get(parent)))
        got = run([tracefs, "cat", trace, path + b"/trace.txt"])
        tap.ok(got.returncode == 0 and not got.stderr and got.stdout.count(b"\n") ==
               ph["events"], "tracefs cat <dir %r>/trace.txt: its %d events"
               % (ph["dir"][:40], ph["events"]), got.stderr)
        if mp:
            at = os.path.join(os.fsencode(mp), parent)
            with open(os.path.join(at, d, b"trace.txt"), "rb") as f:
                data = f.read()
            tap.ok(d in os.listdir(at) and data == got.stdout,
                   "mounted: os.listdir has info.json's dir %r, its trace.txt the bytes of "
                   "tracefs cat" % ph["dir"][:40], repr(os.listdir(at)))


# the titles of the phases in timeline.svg, as XML gives their text back
PHASE_TITLES = ['phase ph\\xc2\\x85\\x85 2 events',
                'phase c*/\\"q\\\\??/\\nz\\xef\\xbf\\xbe&<]]> 2 events',
                'phase x' + '\u00e9' * 39 + '... 4 events']


def check_svg(tap, tracefs, trace, tree):
    """Every timeline.svg is well-formed XML; the phases' titles as the text views print."""
    paths = [(d + b"/" if d else b"") + e[2] for d, entries in tree.items() for e in entries
             if e[2] == b"timeline.svg"]
    bad, titles = [], []
    for path in paths:
        try:
            root = ET.fromstring(run([tracefs, "cat", trace, path]).stdout)
        except ET.ParseError as e:
            bad.append("%s: %s" % (path.decode("ascii", "backslashreplace"), e))
            continue
        if path == b"timeline.svg":
            titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")
                      if t.text.startswith("phase ")]
    tap.ok(len(paths) > 10 and not bad, "%d timeline.svg files are well-formed XML"
           % len(paths), "\n".join(bad[:5]))
    tap.ok(titles == PHASE_TITLES, "timeline.svg: the phases' titles, names escaped, cut "
           "between characters", "got  %r\nwant %r" % (titles, PHASE_TITLES))


def check_proxy(tap, tracefs, trace, cc, work):
    """replay/proxy.c compiles, with trigraphs on (-std=c11): names in its comments and
    strings end neither."""
    src = run([tracefs, "cat", trace, b"replay/proxy.c"]).stdout
    head = (b" * proxy.c: makes the calls of prog\\nname\\xc2\\x85\\x9b\xc3\xa9\\xff *\\/ "
            b"*?\\?/\\n/ again,")
    tap.ok(head in src, "replay/proxy.c: the program in its head comment, escaped, "
           "*/ and ?? broken", src[:300])
    string = b'\t{1u, "c*/\\"q\\\\\\077?/\\012z\\357\\277\\276&<]]>", 2u},\n'
    tap.ok(string in src, "replay/proxy.c: a phase name as a C string", string)
    path = os.path.join(work, b"proxy.c")
    with open(path, "wb") as f:
        f.write(src)
    p = subprocess.run(cc.split() + ["-std=c11", "-Wall", "-Werror=comment",
                                     "-Werror=trigraphs", "-c", path, "-o", path + b".o"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    tap.ok(p.returncode == 0, "replay/proxy.c compiles (-std=c11: trigraphs on)",
           p.stderr[-2000:].decode("utf-8", "replace"))


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
        tree = check_ls(tap, tracefs, trace, mp)
        check_phase_dirs(tap, tracefs, trace, tree, mp)
    finally:
        p = subprocess.run([tracefs, "umount", mp], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        tap.ok(p.returncode == 0 and not is_mounted(mp), "tracefs umount", p.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--mk", required=True, help="the mknames program")
    ap.add_argument("--mount", action="store_true", help="read through a real mount")
    ap.add_argument("--cc", help="the C compiler, to build replay/proxy.c")
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
            if args.cc:
                check_proxy(tap, args.tracefs, trace, args.cc, os.fsencode(work))
    finally:
        if not is_mounted(os.path.join(work, "mp")):
            shutil.rmtree(work, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
