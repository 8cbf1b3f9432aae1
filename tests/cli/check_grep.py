#!/usr/bin/env python3
"""`tracefs grep` against GNU grep over the same files of the tree.

For each timing given, synth_demo writes a trace of 2 ranks x 2 threads with phases; then,
for views of every kind (a thread's trace.txt, a rank's merged or concatenated one, a
phase's, a time window's, calls/<name>/ views, events.jsonl, a generated summary.txt), each
pattern and option set, `tracefs grep OPTS PATTERN TRACE PATH` must print exactly what
`tracefs cat TRACE PATH | LC_ALL=C grep OPTS PATTERN` prints and exit as it does. The
patterns cover call names, constant arguments, fixed text that spans the varying fields
(times, numbers, addresses, padding), text no line holds, paths attached to descriptors,
and regular expressions whose literals rule signatures in or out, with -c, -n and -m.
With --calls-maker, searches of bench_codec's 3x10^10-event trace must give the counts and
line numbers its grammar implies, and -m 2 what GNU grep prints. Output is TAP. Stdlib only.

  check_grep.py --tracefs T --demo D [--timing none|lossless|lossy:0.1]...
"""

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

# fixed text: names, constant parts, text that crosses or sits inside varying fields
FIXED = ["pwrite", "malloc", "zone(", "send(", "recv(dest", "(", ")", " = ", "=", "T0", "T1 ",
         "0", "1", "12", "00", "9", ".", ". ", "0x", "0x7f", "7f0000", "file#", "<", ">",
         '"', "\\t", "init", "size=", "count=4096", " 4096", "pwrite(fd=", "stack#", "-1",
         "zone(name=", "  ", "   ", ", ", ") = ", "xyzzy", "", "fd=9000<tcp", "path=",
         "T", " T0 ", "0 T", "1.0", "mark", "aligned_alloc(alignment=64",
         "\x01", "pwrite\n\x02"]  # control bytes: no line holds one, no shape places one
REGEX = [("^T0", []), ("^ *0\\.", []), ("[0-9]\\{4\\}", []), ("p.write", []),
         ("= [0-9]*$", []), (" $", []), ("send\\|recv", []), ("send|recv", ["-E"]),
         ("^[^ ]+ +[0-9]+ T", ["-E"]), ("(0x[0-9a-f]+).*\\1", ["-E"]), ("a{2,}", ["-E"]),
         ("pwrite\nrecv", []), ("pwrite\nrecv", ["-F"]), (".", []), ("x*", [])]
# expressions whose literals rule signatures out or in, hitting and missing varying fields
PRUNED = [("demo\\.cfg", []), ("/data/(in|out)\\.", ["-E"]), ("pwrite\\(fd=[0-9]+", ["-E"]),
          ("mal+oc", ["-E"]), ("(send|recv)\\(", ["-E"]), ("p[a-z]*write", []),
          ("^ *[0-9.]+ +[0-9]+ T0 +pwrite", ["-E"]), ("x?y?zzy", ["-E"]),
          ("zone\\(name=\"[a-z/]+\"", ["-E"]), ("count=40+96", ["-E"]), ("= -[0-9]", []),
          ("(ab)*xyzzy|mark", ["-E"]), ("se*nd\\|xyz", []), ("step;s\\{1,\\}ub", []),
          ("0x7f+[0-9a-f]{3}", ["-E"]), ("size=[0-9]+\\)", ["-E"]), ("\\<free\\>", []),
          ("tag=[0-9]*, bytes", []), ("depth=1\\b", ["-E"]), ("[.]bin>, count", [])]
# paths attached to descriptors: the names each rank gives
PATHS = ["/etc/demo.cfg", "demo.cfg", "/data/out.0", "out.1.", "in.0.bin>", ".dat>, count=",
         "</data/", "/etc/passwd"]


def run(cmd, stdin=None):
    p = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=600)
    return p.returncode, p.stdout, p.stderr


def views(tracefs, trace):
    """Paths of files of each sort that the trace's tree holds."""
    rc, out, _ = run([tracefs, "ls", trace, "ranks/0/phases"])
    phase = out.split()[-1].decode() if rc == 0 and out else None
    paths = ["ranks/0/threads/0/trace.txt", "ranks/0/trace.txt", "ranks/1/trace.txt",
             "ranks/0/threads/1/calls/pwrite/trace.txt", "ranks/1/threads/0/calls/zone/trace.txt",
             "ranks/0/threads/0/events.jsonl", "ranks/0/summary.txt"]
    if phase:
        paths += ["ranks/0/phases/%s/trace.txt" % phase]
        rc, out, _ = run([tracefs, "ls", trace, "ranks/0/phases/%s/threads" % phase])
        if rc == 0 and out:
            t = out.split()[-1].decode()
            paths += ["ranks/0/phases/%s/threads/%s/trace.txt" % (phase, t)]
            rc, out, _ = run([tracefs, "ls", trace,
                              "ranks/0/phases/%s/threads/%s/calls" % (phase, t)])
            if rc == 0 and out:
                paths += ["ranks/0/phases/%s/threads/%s/calls/%s/trace.txt" % (
                    phase, t, out.split()[-1].decode())]
    for d in ("window", "ranks/1/window"):  # time windows: ranges cut by time
        rc, out, _ = run([tracefs, "ls", trace, d])
        if rc == 0 and out:
            paths += ["%s/%s/trace.txt" % (d, out.split()[-1].decode())]
    rc, out, _ = run([tracefs, "ls", trace, "ranks/0/calls"])
    if rc == 0 and out:  # untimed: a rank's views are its threads' one after the other
        paths += ["ranks/0/calls/%s/trace.txt" % out.split()[-1].decode()]
    return paths


def check(tap, tracefs, trace, label, stride):
    """With @stride N, each view runs every Nth case, the views taking turns, so that every
    case still runs on some view (the sanitizer build: a tenth of the time)."""
    bad, n = [], 0
    for k, path in enumerate(views(tracefs, trace)):
        rc, text, err = run([tracefs, "cat", trace, path])
        if not tap.ok(rc == 0, "%s: cat %s" % (label, path), err):
            continue
        cases = [(["-c"], p) for p in FIXED] + [(["-c", "-F"], p) for p in FIXED]
        cases += [(["-c"] + o, p) for p, o in REGEX] + [(o, p) for p, o in REGEX[:6]]
        cases += [(o, p) for o in (["-n"], ["-m", "3"], ["-n", "-m", "2", "-F"],
                                   ["-c", "-m", "5"], ["-c", "-m", "0"], ["-m", "0"])
                  for p in ("pwrite", "0x7f", " = ", "xyzzy", "T1 ")]
        cases += [(o + x, p) for p, o in PRUNED for x in (["-c"], [], ["-n"])]
        cases += [(o, p) for o in (["-c"], ["-n"]) for p in PATHS]
        cases += [(["-n", "-m", "7"] + o, p) for p, o in PRUNED[:4] + [("free(", ["-F"])]]
        cases += [(["-n"] + o, p) for p, o in REGEX[6:]]
        for i, (opts, pat) in enumerate(cases):
            if (i + k) % stride:
                continue
            n += 1
            want = run(["grep"] + opts + ["--", pat], stdin=text)
            got = run([tracefs, "grep"] + opts + ["--", pat, trace, path])
            if got[:2] != want[:2] and len(bad) < 10:
                bad.append("%s grep %s %r: rc %d, %d bytes (want rc %d, %d bytes) %r %r" % (
                    path, " ".join(opts), pat, got[0], len(got[1]), want[0], len(want[1]),
                    got[1][:200], got[2][:200]))
    tap.ok(n > 0 and not bad, "%s: %d searches print and exit as GNU grep does" % (label, n),
           "\n".join(bad))


def check_huge(tap, tracefs, maker, work):
    """The 3x10^10-event trace of `bench_codec --make-calls` (its grammar: 10^4 x (10^3 x
    (step step pwrite) MPI_Allreduce) MPI_Barrier), after one declared event of each: a full
    read of its 530 GB trace.txt would take hours, so these answer from the signatures."""
    trace = os.path.join(work, "calls.trace")
    rc, _, err = run([maker, "--make-calls", trace])
    if not tap.ok(rc == 0, "bench_codec --make-calls", err):
        return
    path = "ranks/0/trace.txt"
    n_lines = 10000 * (1000 * (1000 * 3 + 1) + 1) + 5
    for opts, pat, want in ((["-c"], "MPI_Barrier", b"10001\n"),
                            (["-c", "-E"], "MPI_(Barrier|Allreduce)", b"10010002\n"),
                            (["-c"], "pwrite(tag=2222)", b"10000000001\n"),
                            (["-c", "-E"], "Barrier\\(tag=[0-9]+\\)$", b"10001\n")):
        rc, out, err = run([tracefs, "grep"] + opts + [pat, trace, path])
        tap.ok(rc == 0 and out == want, "huge trace: grep %s %s counts %s" % (
            " ".join(opts), pat, want.strip().decode()), out + err)
    rc, out, err = run([tracefs, "grep", "-n", "MPI_Barrier", trace, path])
    lines = out.splitlines()
    tap.ok(rc == 0 and len(lines) == 10001 and
           lines[-1].startswith(b"%d:" % n_lines) and lines[-1].endswith(b"MPI_Barrier(tag=4444)"),
           "huge trace: grep -n prints every MPI_Barrier, the last on the last line",
           out[-300:] + err)
    want = subprocess.run("'%s' cat '%s' %s | grep -n -m 2 MPI_Barrier" % (tracefs, trace, path),
                          shell=True, stdout=subprocess.PIPE, timeout=600).stdout
    rc, out, err = run([tracefs, "grep", "-n", "-m", "2", "MPI_Barrier", trace, path])
    tap.ok(rc == 0 and out == want and out.count(b"\n") == 2,
           "huge trace: grep -n -m 2 equals GNU grep over the first lines", out + err)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--demo", required=True)
    ap.add_argument("--timing", action="append", default=[])
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--calls-maker", help="bench_codec, for its 3x10^10-event trace")
    args = ap.parse_args()
    os.environ["LC_ALL"] = "C"
    tap = Tap()
    with tempfile.TemporaryDirectory() as work:
        for timing in args.timing or ["lossless"]:
            trace = os.path.join(work, "grep-%s.trace" % timing.split(":")[0])
            rc, _, err = run([args.demo, "-o", trace, "--events", "20000", "--ranks", "2",
                              "--threads", "2", "--timing", timing])
            if tap.ok(rc == 0, "synth_demo --timing %s" % timing, err):
                check(tap, args.tracefs, trace, timing, max(1, args.stride))
        if args.calls_maker:
            check_huge(tap, args.tracefs, args.calls_maker, work)
        rc, _, err = run([args.tracefs, "grep", "-c", "x", os.path.join(work, "none.trace"),
                          "ranks/0/trace.txt"])
        tap.ok(rc == 2 and err.count(b"\n") == 1, "a missing trace: exit 2, one line", err)
        rc, _, err = run([args.tracefs, "grep", "-c", "x"])
        tap.ok(rc == 2 and err.count(b"\n") == 1, "missing operands: exit 2, one line", err)
        if args.timing:  # the traces made above are still there
            trace = os.path.join(work, "grep-%s.trace" % args.timing[0].split(":")[0])
            for argv, what in ((["-E", "a(", trace, "ranks/0/trace.txt"], "a bad pattern"),
                               (["x", trace, "no/such"], "a missing path"),
                               (["x", trace, "ranks"], "a directory")):
                rc, _, err = run([args.tracefs, "grep"] + argv)
                tap.ok(rc == 2 and err.count(b"\n") == 1 and err.startswith(b"tracefs: "),
                       "grep of %s: exit 2, one line" % what, err)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
