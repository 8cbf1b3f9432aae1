#!/usr/bin/env python3
"""Every tracefs command refuses bad input the same way: one line on stderr, non-zero exit.

The form is the one the CLI uses throughout (fs/cli_msg.c):
  tracefs: <what failed, lowercase>: <detail>
where every ': '-separated detail starts lowercase too (an errno text is "no such file or
directory", never "No such file ..."), no line ends with a period, and usage errors end with
"(try 'tracefs <command> --help')" (the command whose usage was wrong) and exit 2. Every
command's own help (`tracefs <command> --help`, `-h`, `tracefs help <command>`) says its
usage, options and examples on stdout and exits 0. The inputs: missing, non-trace, truncated
and bit-flipped files, paths that cannot be written, bad mountpoints, wrong argument counts and
unknown options, for info, ls, cat, verify, merge, mount, umount and (with --record) record.
Output is TAP.

  check_errors.py --tracefs T --demo D [--record]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

LINE_RE = re.compile(r"^tracefs: [a-z][^\n]*[^.\n]$")
# a detail that starts with a capitalised word ("No such file"); "EOF" or "ASan" would pass
CAPITALISED_RE = re.compile(r": [A-Z][a-z]")
# the hint names the command whose help says more: " (try 'tracefs record --help')"
USAGE_TAIL_RE = re.compile(r" \(try 'tracefs (?:[a-z-]+ )?--help'\)$")


def run(cmd, timeout=120):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=timeout)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def mounted_under(path):
    with open("/proc/self/mountinfo") as f:
        return [ln.split()[4] for ln in f if ln.split()[4].startswith(path)]


def form_problem(err, usage):
    """Why err is not one line of the CLI's message form, or None."""
    if err.count("\n") != 1 or not err.endswith("\n"):
        return "%d lines" % err.count("\n")
    line = err[:-1]
    if not LINE_RE.match(line):
        return "not 'tracefs: <lowercase> ...' without a final period"
    if CAPITALISED_RE.search(line):
        return "a detail starts with a capital letter"
    if usage != bool(USAGE_TAIL_RE.search(line)):
        return "usage error without the --help hint" if usage else "hint on a runtime error"
    return None


def make_inputs(demo, work):
    trace = os.path.join(work, "ok.trace")
    rc, _, err = run([demo, "-o", trace, "--events", "200", "--timing", "lossless"])
    if rc != 0:
        raise SystemExit("synth_demo failed: " + err)
    data = open(trace, "rb").read()
    files = {"ok": trace}
    for name, blob in (("trunc", data[:len(data) // 2]), ("empty", b""),
                       ("flip", data[:40] + bytes([data[40] ^ 0x10]) + data[41:])):
        files[name] = os.path.join(work, name + ".trace")
        with open(files[name], "wb") as f:
            f.write(blob)
    files["text"] = os.path.join(work, "notes.txt")
    with open(files["text"], "w") as f:
        f.write("not a trace\n")
    files["missing"] = os.path.join(work, "missing.trace")
    files["mnt"] = os.path.join(work, "mnt")
    os.mkdir(files["mnt"])
    files["nodir"] = os.path.join(work, "no", "such", "dir")
    return files


def cases(f, with_record):
    """(arguments, expected exit status, what) for each bad input; 2 marks a usage error."""
    c = []
    for cmd in ("info", "ls", "verify"):
        for kind in ("missing", "text", "trunc", "empty", "flip"):
            c.append(([cmd, f[kind]], 1, "%s of a %s file" % (cmd, kind)))
        c.append(([cmd], 2, "%s without TRACE" % cmd))
        c.append(([cmd, "--bogus", f["ok"]], 2, "%s with an unknown option" % cmd))
    c += [(["info", f["ok"], f["ok"]], 2, "info with two traces"),
          (["verify", f["ok"], f["ok"]], 2, "verify with two traces"),
          (["ls", f["ok"], "no/such"], 1, "ls of a missing path"),
          (["cat", f["missing"], "README.txt"], 1, "cat from a missing trace"),
          (["cat", f["trunc"], "README.txt"], 1, "cat from a truncated trace"),
          (["cat", f["text"], "README.txt"], 1, "cat from a text file"),
          (["cat", f["ok"], "no/such"], 1, "cat of a missing path"),
          (["cat", f["ok"], "ranks"], 1, "cat of a directory"),
          (["cat", f["ok"]], 2, "cat without PATH"),
          (["merge", "-o", os.path.join(f["nodir"], "m.trace"), f["ok"], f["ok"]], 1,
           "merge into a missing directory"),
          (["merge", "-o", "/proc/m.trace", f["ok"], f["ok"]], 1, "merge into /proc"),
          (["merge", "-o", os.path.join(os.path.dirname(f["ok"]), "m.trace"), f["ok"],
            f["missing"]], 1, "merge of a missing trace"),
          (["merge", "-o", os.path.join(os.path.dirname(f["ok"]), "m.trace"), f["ok"],
            f["trunc"]], 1, "merge of a truncated trace"),
          (["merge", f["ok"]], 2, "merge without -o"),
          (["merge", "--bogus"], 2, "merge with an unknown option"),
          (["mount", f["missing"], f["mnt"]], 1, "mount of a missing trace"),
          (["mount", f["text"], f["mnt"]], 1, "mount of a text file"),
          (["mount", f["trunc"], f["mnt"]], 1, "mount of a truncated trace"),
          (["mount", f["ok"], f["nodir"]], 1, "mount at a missing directory"),
          (["mount", f["ok"], f["text"]], 1, "mount at a file"),
          (["mount", f["ok"]], 2, "mount without a mountpoint"),
          (["mount", "-x", f["ok"], f["mnt"]], 2, "mount with an unknown option"),
          (["umount", f["nodir"]], 1, "umount of a missing directory"),
          (["umount", f["mnt"]], 1, "umount of a directory that is no mount point"),
          (["umount"], 2, "umount without a mountpoint"),
          (["umount", f["mnt"], f["mnt"]], 2, "umount with two mountpoints"),
          (["grep", "x", f["ok"]], 2, "grep without PATH"),
          (["grep", "-x", "x", f["ok"], "README.txt"], 2, "grep with an unknown option"),
          (["grep", "-m", "many", "x", f["ok"], "README.txt"], 2, "grep with a bad -m")]
    if with_record:
        c += [(["record", "-o", "/proc/x.trace", "--", "true"], 1, "record into /proc"),
              (["record", "-o", os.path.join(f["nodir"], "r.trace"), "--", "true"], 1,
               "record into a missing directory"),
              (["record", "-o", f["mnt"], "--", "true"], 1, "record onto a directory"),
              (["record", "-o", os.path.join(os.path.dirname(f["ok"]), "r.trace"), "--",
                f["missing"]], 127, "record of a missing program"),
              # found but not runnable: 126, as shells, env and timeout (it was 127, "not
              # found", for a file without x, and two lines for a directory)
              (["record", "-o", os.path.join(os.path.dirname(f["ok"]), "r.trace"), "--",
                f["text"]], 126, "record of a file that is not executable"),
              (["record", "-o", os.path.join(os.path.dirname(f["ok"]), "r.trace"), "--",
                f["mnt"]], 126, "record of a directory"),
              (["record", "-o", f["ok"]], 2, "record without a command"),
              (["record", "--bogus", "--", "true"], 2, "record with an unknown option"),
              (["record", "--timing=none,fast", "--", "true"], 2,
               "record with untimed timing columns to keep fast"),
              (["record", "--timing=lossless,slow", "--", "true"], 2,
               "record with an unknown timing suffix")]
    return c


# the commands README.md documents, each with a usage error and the command its hint names
COMMANDS = ("info", "ls", "cat", "verify", "mount", "umount", "record", "merge", "compare",
            "grep", "help")


def check_help(tap, tracefs):
    """Every command's help: usage, options and examples on stdout, nothing else, exit 0."""
    for cmd in COMMANDS:
        for argv in ([cmd, "--help"], [cmd, "-h"], ["help", cmd]):
            rc, out, err = run([tracefs] + argv)
            text = out.decode(errors="replace")
            problem = None
            if rc != 0 or err:
                problem = "exit %d, stderr %r" % (rc, err)
            elif not text.startswith("usage: tracefs %s" % cmd):
                problem = "does not start with its usage"
            elif "\noptions:\n" not in text or "--help" not in text:
                problem = "no options (or no -h, --help among them)"
            elif "\nexamples:\n  " not in text and cmd != "help":
                problem = "no examples"
            elif cmd != "help" and not re.search(r"\n  (\S+ )*tracefs %s\b" % cmd, text):
                problem = "no example runs the command"
            tap.ok(problem is None, "%s: its help, exit 0" % " ".join(argv), problem)
    rc, out, err = run([tracefs, "--help"])
    text = out.decode(errors="replace")
    tap.ok(rc == 0 and not err and all("\n  %s" % c in text for c in COMMANDS),
           "tracefs --help lists every command", text)
    # a program's own -h after the command to run is the program's, not record's
    rc, out, err = run([tracefs, "record", "-o", "/proc/no.trace", "--", "true", "-h"])
    tap.ok(not out.startswith(b"usage: tracefs record"), "record -- true -h is not help",
           out[:200])
    for argv, cmd in ((["info", "--bogus", "x"], "info"), (["cat", "x"], "cat"),
                      (["mount", "-x", "a", "b"], "mount"), (["umount"], "umount"),
                      (["merge", "x"], "merge"), (["record", "--bogus"], "record"),
                      (["compare", "x"], "compare"), (["compare", "--bogus", "a", "b"], "compare"),
                      (["bogus"], None), ([], None)):
        rc, out, err = run([tracefs] + argv)
        hint = "(try 'tracefs %s--help')" % (cmd + " " if cmd else "")
        tap.ok(rc == 2 and err.rstrip().endswith(hint), "%r: the hint is %s" % (argv, hint),
               err)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--demo", required=True)
    ap.add_argument("--record", action="store_true",
                    help="also record (not under ASan: the capture library is preloaded)")
    args = ap.parse_args()
    tap = Tap()
    work = tempfile.mkdtemp(prefix="tracefs-errors-")
    try:
        f = make_inputs(args.demo, work)
        check_help(tap, args.tracefs)
        for argv, code, what in cases(f, args.record):
            rc, out, err = run([args.tracefs] + argv)
            problem = form_problem(err, code == 2)
            if rc != code:
                problem = "exit %d, not %d" % (rc, code)
            tap.ok(problem is None, "%s: exit %d, one line" % (what, code),
                   "%s\nargs=%r\nstderr=%r" % (problem, argv, err))
        tap.ok(not mounted_under(work), "no mount is left behind", mounted_under(work))
        tap.ok(sorted(os.listdir(work)) == sorted(["ok.trace", "trunc.trace", "empty.trace",
                                                   "flip.trace", "notes.txt", "mnt"]),
               "no failed command leaves an output file", os.listdir(work))
    finally:
        for mp in mounted_under(work):
            subprocess.run(["fusermount3", "-u", "-z", mp], stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
