#!/usr/bin/env python3
"""End-to-end tests of the capture library and `tracefs record` (TAP).

Programs with exactly known capture events (cap_known.c) are traced in both modes (under
`tracefs record`, and in-process with TFS_OUTPUT), ending normally and by abort, segfault,
_exit and SIGKILL (under `tracefs record` with zones and mem only, and again with every
category, the interposers' events then left out); the events `tracefs cat` decodes are
compared with an expectation written here from cap_known.c's description, not computed by
any tracefs code. Also: stdout of the
traced program equals its untraced stdout, TFS_CAPTURE=0, many threads, a full spool with
--when-full=drop (dropped events are counted exactly), the matmul EPRSD workload's size, the
demo program. The spool's back-pressure and sampling: check_spool.py.

  check_capture.py --tracefs T --known K --known-static KS --matmul M --demo D
"""

import argparse
import glob
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from tap import Tap  # noqa: E402
import trace_event  # noqa: E402



def run(cmd, env=None, timeout=300, cwd=None):
    e = dict(os.environ)
    for k in ("TFS_CAPTURE", "TFS_OUTPUT", "TFS_SPOOL", "TFS_TIMING", "TFS_TRACE", "TFS_CLOCK"):
        e.pop(k, None)
    e.update(env or {})
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e,
                       timeout=timeout, cwd=cwd, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


class Trace:
    """What the CLI shows of one trace file."""

    def __init__(self, tracefs, path):
        self.tracefs = tracefs
        self.path = path
        rc, out, err = run([tracefs, "info", "--json", path])
        if rc != 0:
            raise RuntimeError("info failed: %s" % err.decode(errors="replace"))
        self.info = json.loads(out)

    def meta(self, key):
        return self.info.get("meta", {}).get(key)

    def threads(self):
        return sorted(s["thread"] for s in self.info["streams"])

    def cat(self, vpath):
        rc, out, err = run([self.tracefs, "cat", self.path, vpath])
        if rc != 0:
            raise RuntimeError("cat %s failed: %s" % (vpath, err.decode(errors="replace")))
        return out

    def events(self, thread):
        data = self.cat("ranks/0/threads/%d/events.jsonl" % thread)
        return [json.loads(line) for line in data.decode().splitlines()]

    def text(self, thread):
        return self.cat("ranks/0/threads/%d/trace.txt" % thread).decode()

    def phases(self):
        return sorted((p["name"], p["thread"], p["first_event"], p["events"])
                      for p in self.info.get("phases", []))

    def verify(self):
        return run([self.tracefs, "verify", self.path])


# ---- the expectation, from cap_known.c's description ----

def known_main(mode):
    ev = [("thread_name", {"name": "main"}),
          ("mark", {"message": 'hello "world"\n'}),
          ("zone", {"name": "inner", "depth": 1})]
    ev += [("counter", {"name": "count", "value": i - 2}) for i in range(5)]
    ev += [("zone", {"name": "outer", "depth": 0}),
           ("mark", {"message": "before crash"})]
    done = mode in ("ok", "exit7")
    ev.append(("zone" if done else "zone_unfinished", {"name": "doomed", "depth": 0}))
    return ev


def known_worker(w):
    ev = [("thread_name", {"name": "worker-%d" % w})]
    for i in range(10):
        ev += [("counter", {"name": "i", "value": i * w}), ("zone", {"name": "step", "depth": 0})]
    ev += [("store" if i % 2 else "load", {"size": 8, "site": "site#0"}) for i in range(16)]
    return ev


def known_phases(n_workers):
    ph = [("setup", 0, 1, 8)]
    ph += [("work", w, 1, 36) for w in range(1, n_workers + 1)]
    return sorted(ph)


def strip(events):
    """(name, args) with addresses left out (checked separately)."""
    out = []
    for e in events:
        args = {k: v for k, v in e["args"].items() if k != "addr"}
        out.append((e["name"], args))
    return out


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return "event %d: got %r, expected %r" % (i, x, y)
    return "got %d events, expected %d" % (len(a), len(b))


# the kinds of the LD_PRELOAD interposers (capture/calls.txt, read by main()), recorded unless
# --trace leaves them out; check_interpose.py tests them, here they are left out of the
# comparisons
CALL_KINDS = set()


def read_call_kinds(path):
    with open(path) as f:
        return {line.split()[1] for line in f if line.startswith("kind ")}


def no_calls(events):
    return [e for e in events if e["name"] not in CALL_KINDS]


def check_known(tap, t, mode, n_workers, what, timed=True):
    ok = True
    ok &= tap.ok(t.threads() == list(range(n_workers + 1)),
                 "%s: streams are threads 0..%d" % (what, n_workers), t.threads())
    main = no_calls(t.events(0))
    exp = known_main(mode)
    ok &= tap.ok(strip(main) == exp, "%s: thread 0 events exactly as expected" % what,
                 first_diff(strip(main), exp))
    for w in range(1, n_workers + 1):
        evs = no_calls(t.events(w))
        exp = known_worker(w)
        ok &= tap.ok(strip(evs) == exp, "%s: thread %d events exactly as expected" % (what, w),
                     first_diff(strip(evs), exp))
        addrs = [e["args"]["addr"] for e in evs if e["name"] in ("load", "store")]
        ok &= tap.ok(len(addrs) == 16 and all(addrs[i + 1] - addrs[i] == 8 for i in range(15)),
                     "%s: thread %d accesses 8 bytes apart" % (what, w), addrs)
        ok &= tap.ok(all(e["thread"] == w for e in evs),
                     "%s: thread %d events carry thread %d" % (what, w, w))
    if len(main) == len(t.events(0)):
        ok &= tap.ok(t.phases() == known_phases(n_workers),
                     "%s: phases exactly as expected" % what,
                     "%r\n%r" % (t.phases(), known_phases(n_workers)))
    else:  # the calls shift the event indexes phases hold: names and threads only
        ok &= tap.ok([p[:2] for p in t.phases()] == [p[:2] for p in known_phases(n_workers)],
                     "%s: phases (names, threads) as expected" % what,
                     "%r\n%r" % (t.phases(), known_phases(n_workers)))
    if timed:
        inner, outer = main[2], main[8]
        ok &= tap.ok(outer["ts"] <= inner["ts"] and
                     inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] and
                     all(outer["ts"] <= c["ts"] <= outer["ts"] + outer["dur"]
                         for c in main[3:8]),
                     "%s: nested zone and counters lie inside the outer zone" % what,
                     json.dumps(main[2:9]))
    text = [line for line in t.text(0).splitlines()
            if not re.search(r"T0 (%s)\(" % "|".join(CALL_KINDS), line)]
    ok &= tap.ok(len(text) == len(main) and
                 bool(re.match(r'^(\s*\d+\.\d{9}\s+\d+ )?T0 thread_name\(name="main"\)\s*$', text[0])
                 and re.search(r'T0 mark\(message="hello \\"world\\"\\n"\)\s*$', text[1])),
                 "%s: trace.txt renders the same events" % what, "\n".join(text[:3]))
    rc, out, err = t.verify()
    ok &= tap.ok(rc == 0, "%s: tracefs verify passes" % what, err)
    return ok


SUMMARY_RE = re.compile(
    rb"^tracefs: (?P<out>\S+): (?P<events>\d+) events, (?P<bytes>\d+) bytes, [\d.]+ bytes/event, "
    rb"ratio [\d.]+ against the text \(\d+ bytes\), \d+ threads; program (?P<how>[^;]+); "
    rb"(?P<rec>[^;]+); (?P<dropped>\d+) dropped(?P<waits>[^\n]*)$", re.M)

# a program killed by a signal: tracefs record dies of it too (Python's returncode -N)
ENDINGS = {
    "ok": (0, "exited with status 0"),
    "exit7": (7, "exited with status 7"),
    "abort": (-signal.SIGABRT, "killed by signal %d (SIGABRT)" % signal.SIGABRT),
    "segv": (-signal.SIGSEGV, "killed by signal %d (SIGSEGV)" % signal.SIGSEGV),
    "_exit": (3, "exited with status 3"),
    "kill": (-signal.SIGKILL, "killed by signal %d (SIGKILL)" % signal.SIGKILL),
}


def same_end(got, how):
    """@got says the program ended as @how says (a core dump is the system's choice)."""
    return got in (how, how + ", core dumped")


def untraced_stdout(args, cmd):
    rc, out, err = run(cmd, env={"TFS_CAPTURE": "0"})
    return rc, out


def test_record_modes(tap, args, work):
    # zones and mem only, then every category (the interposers on: their events are left out
    # of the comparison, the capture API's must come out the same)
    for trace, suffix in (("--trace=zones,mem", ""), ("--trace=all", " (all)")):
        for mode, (status, how) in ENDINGS.items():
            record_mode(tap, args, work, trace, mode + suffix, status, how)


def record_mode(tap, args, work, trace, what, status, how):
    mode = what.split()[0]
    out = os.path.join(work, "known-%s.trace" % what.replace(" ", ""))
    cmd = [args.known, mode, "3"]
    rc, sout, serr = run([args.tracefs, "record", trace, "-o", out, "--"] + cmd)
    tap.ok(rc == status, "record %s: exit status mirrors the program (%d)" % (what, status),
           "rc=%d\n%s" % (rc, serr.decode(errors="replace")))
    m = SUMMARY_RE.search(serr)
    tap.ok(m is not None and same_end(m.group("how").decode(), how),
           "record %s: summary says the program %s" % (what, how),
           serr.decode(errors="replace"))
    if m and mode not in ("ok", "exit7"):
        rec = re.fullmatch(rb"recovered all (\d+) events \((\d+) of them from (\d+) (chunks?) "
                           rb"not handed over at exit\), 1 zone and 0 phases left open",
                           m.group("rec"))
        tap.ok(rec is not None and 0 < int(rec.group(2)) <= int(rec.group(1)) and
               (rec.group(4) == b"chunk") == (int(rec.group(3)) == 1),
               "record %s: summary reports the open zone recovered, in words that agree with "
               "the counts" % what, m.group("rec"))
    _, plain = untraced_stdout(args, cmd)
    tap.ok(sout == plain, "record %s: stdout byte-identical to the untraced run" % what,
           "%r\n%r" % (sout, plain))
    if not os.path.exists(out):
        tap.ok(False, "record %s: trace written" % what)
        return
    t = Trace(args.tracefs, out)
    tap.ok(same_end(t.meta("end"), how) and t.meta("dropped_events") == 0 and
           t.meta("capture") == "record",
           "record %s: metadata end, dropped_events, capture" % what, t.info.get("meta"))
    check_known(tap, t, mode, 3, "record %s" % what)


def test_timing_modes(tap, args, work):
    for timing in ("none", "lossy:0.1"):
        out = os.path.join(work, "known-%s.trace" % timing.split(":")[0])
        rc, _, serr = run([args.tracefs, "record", "--trace=zones,mem", "-o", out,
                           "--timing=" + timing, "--", args.known, "ok", "2"])
        if tap.ok(rc == 0, "record --timing=%s runs" % timing, serr):
            # lossy start times may move by up to 10% of each gap: no exact nesting check
            check_known(tap, Trace(args.tracefs, out), "ok", 2, "timing %s" % timing,
                        timed=False)


def tsc_invariant():
    with open("/proc/cpuinfo") as f:
        flags = f.read()
    return " constant_tsc" in flags and " nonstop_tsc" in flags


def tsc_by_default():
    """The capture's default clock is the TSC where it is invariant and the kernel's own."""
    try:
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
            return f.read().strip() == "tsc" and tsc_invariant()
    except OSError:
        return False


def test_tsc_clock(tap, args, work):
    """The clock: the TSC by default where the kernel keeps time with it (clock_gettime
    elsewhere), clock_gettime with TFS_CLOCK=monotonic, the TSC with TFS_CLOCK=tsc or
    `record --clock=tsc` where it is invariant. Either way: same events, nesting and scale,
    and times that are the program's own CLOCK_MONOTONIC."""
    tsc = "tsc" if tsc_invariant() else "monotonic"
    default = "tsc" if tsc_by_default() else "monotonic"
    for env0, opts, want in (({}, [], default), ({"TFS_CLOCK": "monotonic"}, [], "monotonic"),
                             ({}, ["--clock=monotonic"], "monotonic"),
                             ({"TFS_CLOCK": "tsc"}, [], tsc), ({}, ["--clock=tsc"], tsc)):
        name = " ".join(["%s=%s" % kv for kv in env0.items()] + opts) or "default clock"
        for mode in ("record", "in-process"):
            if opts and mode != "record":
                continue
            out = os.path.join(work, "clock-%d-%s.trace" % (len(name), mode))
            env = dict(env0)
            start = time.monotonic()
            if mode == "record":
                rc, _, serr = run([args.tracefs, "record", "--trace=zones,mem", "-o", out] +
                                  opts + ["--", args.known, "ok", "2"], env=env)
            else:
                env["TFS_OUTPUT"] = out
                rc, _, serr = run([args.known, "ok", "2"], env=env)
            wall_ns = (time.monotonic() - start) * 1e9
            if not tap.ok(rc == 0, "%s %s: runs" % (name, mode), serr):
                continue
            t = Trace(args.tracefs, out)
            got = t.meta("clock") or ""
            hz = t.meta("tsc_hz")
            tap.ok(got == want and (want != "tsc" or int(hz) > 1000000) and
                   (want == "tsc" or hz is None),
                   "%s %s: clock metadata %r, tsc_hz %r" % (name, mode, got, hz))
            check_known(tap, t, "ok", 2, "%s %s" % (name, mode))
            ends = [e["ts"] + e["dur"] for th in t.threads() for e in t.events(th)]
            tap.ok(0 < max(ends) < wall_ns, "%s %s: the last event ends within the run's "
                   "wall time (%d < %d ns)" % (name, mode, max(ends), wall_ns))
        check_clock_agrees(tap, args, work, env0, opts, name)
        if want == "tsc":
            check_clock_signals(tap, args, work, env0, opts, name)
    check_clock_followed(tap, args, work, default, tsc)
    check_clock_merged(tap, args, work)
    out = os.path.join(work, "clock-bad.trace")
    rc, _, serr = run([args.tracefs, "record", "--trace=io", "-o", out, "--", args.capclock,
                       "10"], env={"TFS_CLOCK": "rdtsc"})
    tap.ok(rc == 0 and b"tracefs: bad TFS_CLOCK=rdtsc (monotonic or tsc): using the default"
           in serr and Trace(args.tracefs, out).meta("clock") == default,
           "TFS_CLOCK=rdtsc: said on stderr, the default clock taken", serr)
    rc, _, serr = run([args.tracefs, "record", "--clock=rdtsc", "--", "true"])
    tap.ok(rc == 2 and b"--clock takes monotonic or tsc" in serr and len(serr.splitlines()) <= 2,
           "record --clock=rdtsc: a usage error naming the choices", serr)


def check_clock_followed(tap, args, work, default, tsc):
    """One recording, one clock: the clock its first process took, which its `clock`
    metadata names, stamps every later process's events too, whatever TFS_CLOCK that
    process finds, exec'd (the same process) or spawned (a process of its own). cap_clock
    counts the clock_gettime calls the capture makes in it during its 2,000 traced lseek
    calls: at least two per call under clock_gettime, a few anchors under the TSC. (Where
    the TSC is the default, the --clock=monotonic cases also fail if a process follows its
    own environment; where it is not, only the default case says anything new.)"""
    n = 2000
    cases = [("default clock", [], None, default)]
    for other, opt in (("tsc", "monotonic"), ("monotonic", "tsc")):
        if "tsc" in (other, opt) and tsc != "tsc":
            continue
        cases.append(("--clock=%s, exec'd with TFS_CLOCK=%s" % (opt, other),
                      ["--clock=" + opt], 'exec env TFS_CLOCK=%s "$0" %d' % (other, n), opt))
        cases.append(("--clock=%s, spawned with TFS_CLOCK=%s" % (opt, other),
                      ["--clock=" + opt], 'TFS_CLOCK=%s "$0" %d; true' % (other, n), opt))
    cases.append(("--clock=monotonic, exec'd without TFS_CLOCK", ["--clock=monotonic"],
                  'exec env -u TFS_CLOCK "$0" %d' % n, "monotonic"))
    for name, opts, script, want in cases:
        out = os.path.join(work, "clock-followed.trace")
        cmd = ["sh", "-c", script, args.capclock] if script else [args.capclock, str(n)]
        rc, sout, serr = run([args.tracefs, "record", "--trace=io", "-o", out] + opts +
                             ["--"] + cmd)
        m = re.search(rb"clock_gettime calls: (\d+)", sout)
        if not tap.ok(rc == 0 and m, "%s: cap_clock records" % name, sout + serr):
            continue
        calls = int(m.group(1))
        t = Trace(args.tracefs, out)
        meta = t.info.get("meta", {})
        clocks = {k: v for k, v in meta.items() if k.split(".rank")[0] in ("clock", "tsc_hz")}
        tap.ok(meta.get("clock") == want and
               not [k for k in clocks if ".rank" in k],
               "%s: every process's clock metadata says %r" % (name, want), clocks)
        lseeks = sum(1 for e in json_events(args, out)[1] if e["name"] == "lseek")
        ok = calls >= 2 * n if want == "monotonic" else calls < n
        tap.ok(lseeks == n and ok, "%s: %d lseek events, the capture called clock_gettime %d "
               "times during them (%s)" % (name, lseeks, calls, want))


def check_clock_merged(tap, args, work):
    """Two recordings, each measuring the TSC's rate for itself, merged: one `clock` key,
    since the label does not carry the rate (tsc_hz does; an MPI job keeps rank 0's)."""
    outs = []
    for i in range(2):
        out = os.path.join(work, "clock-merge-%d.trace" % i)
        rc, _, serr = run([args.tracefs, "record", "--trace=io", "-o", out, "--",
                           args.capclock, "10"])
        if not tap.ok(rc == 0, "clock merge: recording %d" % i, serr):
            return
        outs.append(out)
    merged = os.path.join(work, "clock-merged.trace")
    rc, _, serr = run([args.tracefs, "merge", "-o", merged] + outs)
    if not tap.ok(rc == 0, "clock merge: tracefs merge", serr):
        return
    meta = Trace(args.tracefs, merged).info.get("meta", {})
    tap.ok(meta.get("clock") in ("tsc", "monotonic") and "clock.rank1" not in meta,
           "clock merge: one clock key for two recordings (%r)" % meta.get("clock"),
           {k: v for k, v in meta.items() if k.startswith(("clock", "tsc_hz"))})


def json_events(args, trace):
    """`tracefs cat TRACE /events.jsonl`: its exit status and events (none if it failed)."""
    rc, sout, _ = run([args.tracefs, "cat", trace, "/events.jsonl"])
    return rc, [json.loads(line) for line in sout.decode().splitlines()] if rc == 0 else []


def check_clock_agrees(tap, args, work, env, opts, name):
    """A time in the trace is CLOCK_MONOTONIC as the program reads it: cap_io clock's
    lseek offsets are its readings just before each call, on 4 threads of 2 processes (the
    forked child keeps its parent's clock: a new thread's anchor in a new process), 300 of
    them in the first 30 ms of each thread, where an anchor's rate is still the one measured
    at start-up."""
    out = os.path.join(work, "clock-agrees.trace")
    rc, _, serr = run([args.tracefs, "record", "--trace=io", "-o", out] + opts +
                      ["--", args.capio, "clock", work], env=env)
    if not tap.ok(rc == 0, "%s: cap_io clock records" % name, serr):
        return
    rc, events = json_events(args, out)
    streams = {}
    for e in events:
        streams.setdefault((e["rank"], e["thread"]), []).append(e)
    back = [k for k, evs in streams.items()
            if any(b["ts"] < a["ts"] for a, b in zip(evs, evs[1:]))]
    tap.ok(rc == 0 and len(streams) >= 8 and not back,
           "%s: no thread's times go back (%d streams)" % (name, len(streams)), back)
    # the time from the reading to the call's start: the same small latency everywhere
    lag = {k: [e["ts"] - e["args"]["offset"] for e in evs if e["name"] == "lseek"]
           for k, evs in streams.items()}
    lag = {k: v for k, v in lag.items() if v}
    every = sorted(x for v in lag.values() for x in v)
    mid = every[len(every) // 2] if every else 0
    far = {k: sum(1 for x in v if abs(x - mid) > 5000) for k, v in lag.items()}
    tap.ok(len(lag) == 8 and all(len(v) == 360 for v in lag.values())
           and all(n <= 36 for n in far.values()),
           "%s: 90%% of each thread's 360 times, less the program's clock read just before, "
           "are within 5 us of their median over all threads" % name,
           {"%d/%d" % k: n for k, n in far.items()})


def check_clock_signals(tap, args, work, env, opts, name):
    """A signal handler's traced call, however often it comes, leaves its thread's times
    CLOCK_MONOTONIC: cap_io sigclock's main thread lseeks to its clock reading while SIGUSR1
    floods it, each handler making a call (and so taking the time, and a new anchor when one
    is due) wherever it lands, also inside the interrupted call's own time taking. A call's
    time comes before the reading the next call is given."""
    out = os.path.join(work, "clock-signals.trace")
    rc, _, serr = run([args.tracefs, "record", "--trace=io", "-o", out] + opts +
                      ["--", args.capio, "sigclock", work], env=env)
    if not tap.ok(rc == 0, "%s: cap_io sigclock records" % name, serr):
        return
    rc, events = json_events(args, out)
    main = []
    for e in events:
        if e["name"] == "lseek" and e["args"]["offset"] > 1:
            main.append((e["ts"], e["args"]["offset"]))
    lag = sorted(ts - off for ts, off in main)
    mid = lag[len(lag) // 2] if lag else 0
    ahead = [a[0] - mid - b[1] for a, b in zip(main, main[1:]) if a[0] - mid - b[1] > 20000]
    tap.ok(rc == 0 and len(main) > 1000 and not ahead,
           "%s: under a flood of signals no call's time is more than 20 us past the next "
           "call's reading (%d calls)" % (name, len(main)),
           "%d ahead, at most %d ns" % (len(ahead), max(ahead, default=0)))


def test_inprocess(tap, args, work):
    for exe, label in ((args.known, "shared"), (args.known_static, "static")):
        out = os.path.join(work, "inproc-%s.trace" % label)
        rc, sout, serr = run([exe, "ok", "4"], env={"TFS_OUTPUT": out})
        tap.ok(rc == 0 and os.path.exists(out) and serr == b"",
               "in-process (%s library): exits 0, quietly, and saves TFS_OUTPUT" % label, serr)
        _, plain = untraced_stdout(args, [exe, "ok", "4"])
        tap.ok(sout == plain, "in-process (%s): stdout byte-identical to untraced" % label)
        if os.path.exists(out):
            t = Trace(args.tracefs, out)
            tap.ok(t.meta("capture") == "in-process" and t.meta("end") == "exit",
                   "in-process (%s): metadata" % label, t.info.get("meta"))
            check_known(tap, t, "ok", 4, "in-process %s" % label)
    # the command line whole, 10,000 bytes of argument included (/proc/self/cmdline to its end)
    out = os.path.join(work, "inproc-long.trace")
    argv = [args.known, "ok", "1", "x" * 10000]
    rc, _, serr = run(argv, env={"TFS_OUTPUT": out})
    got = Trace(args.tracefs, out).meta("cmdline") if rc == 0 and os.path.exists(out) else ""
    tap.ok(got == " ".join(argv), "in-process: a command line of %d bytes recorded whole"
           % len(" ".join(argv)), (rc, serr, len(got), got[-40:]))
    cwd = tempfile.mkdtemp(dir=work)
    rc, _, _ = run([args.known, "ok", "1"], cwd=cwd)
    names = os.listdir(cwd)
    tap.ok(rc == 0 and len(names) == 1 and re.match(r"^cap_known\.\d+\.trace$", names[0]),
           "in-process without TFS_OUTPUT: <program>.<pid>.trace in the cwd", names)


def test_capture_off(tap, args, work):
    cwd = tempfile.mkdtemp(dir=work)
    rc, sout, serr = run([args.known, "ok", "2"], env={"TFS_CAPTURE": "0"}, cwd=cwd)
    tap.ok(rc == 0 and os.listdir(cwd) == [] and serr == b"",
           "TFS_CAPTURE=0: no trace file, nothing on stderr", os.listdir(cwd))
    out = os.path.join(cwd, "off.trace")
    rc, sout2, serr = run([args.tracefs, "record", "--trace=zones,mem",
                           "-o", out, "--", args.known, "ok", "2"],
                          env={"TFS_CAPTURE": "0"})
    tap.ok(rc == 0 and not os.path.exists(out) and b"nothing recorded" in serr,
           "TFS_CAPTURE=0 under record: no trace, says nothing was recorded", serr)
    tap.ok(sout == sout2, "TFS_CAPTURE=0: same stdout traced or not")


def test_fork(tap, args, work):
    parent = [("mark", {"message": "parent before"}), ("mark", {"message": "parent after"})]
    out = os.path.join(work, "fork.trace")
    rc, sout, serr = run([args.tracefs, "record", "--trace=zones,mem",
                          "-o", out, "--", args.known, "fork"])
    tap.ok(rc == 0 and sorted(sout.splitlines()) == [b"child done", b"parent done"],
           "fork under record: both processes run", serr)
    t = Trace(args.tracefs, out)
    tap.ok(t.info["n_ranks"] == 2 and strip(t.events(0)) == parent and t.verify()[0] == 0,
           "fork under record: the parent is rank 0, its events intact",
           (t.info["n_ranks"], strip(t.events(0))))
    child = [json.loads(line) for line in
             t.cat("ranks/1/threads/0/events.jsonl").decode().splitlines()] \
        if t.info["n_ranks"] == 2 else []
    names = [e["name"] for e in child]
    tap.ok(names == ["zone"] * 100 + ["mark"] and child[-1]["args"] == {"message": "child"},
           "fork under record: the child is rank 1 with its own events", names[:4])
    # a value the same as the rank before's is that rank's key (FORMAT.md §3.1)
    tap.ok(t.meta("ppid.rank1") == t.meta("pid") and t.meta("pid.rank1") not in (None, t.meta("pid"))
           and (t.meta("end.rank1") or t.meta("end")) == "exited with status 0",
           "fork under record: the child's pid, ppid and end are rank 1's metadata",
           t.info.get("meta"))
    cwd = tempfile.mkdtemp(dir=work)
    rc, sout, serr = run([args.known, "fork"], cwd=cwd)
    names = os.listdir(cwd)
    tap.ok(rc == 0 and len(names) == 1 and serr == b"",
           "fork in-process: one trace, the parent's", (names, serr))
    if len(names) == 1:
        t = Trace(args.tracefs, os.path.join(cwd, names[0]))
        tap.ok(strip(t.events(0)) == parent and t.threads() == [0],
               "fork in-process: the parent's events only", strip(t.events(0)))


def child_of(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = f.read().split()
        return int(kids[0]) if kids else None
    except OSError:
        return None


def start_spin(tap, args, out, what, env=None):
    """`tracefs record` of `cap_known spin` to @out, once the program says it is ready:
    (the recorder's Popen, the program's pid or None)."""
    p = subprocess.Popen([args.tracefs, "record", "--trace=zones,mem",
                          "-o", out, "--", args.known, "spin"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=dict(os.environ, **(env or {})))
    line = p.stdout.readline()
    child = child_of(p.pid)
    tap.ok(line == b"ready\n" and child, "spin: running and ready" + what, line)
    return p, child


def test_thread_names(tap, args, work):
    """Threads named through the API (tfs_thread_name: cap_known's "main", "worker-<w>")
    are named so in trace.json, the process for its program and pid."""
    out = os.path.join(work, "names.trace")
    rc, _, serr = run([args.tracefs, "record", "--trace=zones,mem", "-o", out, "--",
                       args.known, "ok", "2"])
    if not tap.ok(rc == 0, "thread names: recorded", serr):
        return
    t = Trace(args.tracefs, out)
    meta = [e for e in json.loads(t.cat("trace.json")) if e.get("ph") == "M"]
    procs = [e["args"]["name"] for e in meta if e["name"] == "process_name"]
    threads = {e["tid"]: e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    tap.ok(procs == ["cap_known (pid %s)" % t.meta("pid")] and
           threads.get(0) == "main (thread 0)" and threads.get(1) == "worker-1 (thread 1)" and
           threads.get(2) == "worker-2 (thread 2)",
           "trace.json: the process `cap_known (pid N)`, its threads as the API named them",
           (procs, threads))


def test_external_kill(tap, args, work):
    out = os.path.join(work, "spin.trace")
    p, child = start_spin(tap, args, out, "")
    if child:
        time.sleep(0.2)
        os.kill(child, signal.SIGKILL)
    _, serr = p.communicate(timeout=120)
    tap.ok(p.returncode == -signal.SIGKILL,
           "SIGKILL from outside: record dies of SIGKILL too", serr)
    tap.ok(b"killed by signal 9 (SIGKILL)" in serr, "SIGKILL from outside: reported", serr)
    if os.path.exists(out):
        t = Trace(args.tracefs, out)
        rc, _, err = t.verify()
        tap.ok(rc == 0, "SIGKILL from outside: trace verifies", err)
        evs = t.events(0)
        zones = [e for e in evs if e["name"] == "zone" and e["args"]["name"] == "spin"]
        tail = [e for e in evs if e["name"] != "zone"]
        tap.ok(len(zones) >= 1001 and all(e["name"] == "zone_unfinished" for e in tail)
               and len(tail) <= 1,
               "SIGKILL from outside: every zone before ready and after is there "
               "(%d zones)" % len(zones), "%d zones, tail %r" % (len(zones), tail))
    else:
        tap.ok(False, "SIGKILL from outside: trace written", serr)


def kill_spin(p, child, timeout=None):
    """SIGKILL a recorder start_spin() began, and the program it runs."""
    p.kill()
    if child:
        os.kill(child, signal.SIGKILL)
    p.communicate(timeout=timeout)


def spool_of(pid):
    """The spool a traced process records into: TFS_SPOOL of its environment."""
    with open("/proc/%d/environ" % pid, "rb") as f:
        for var in f.read().split(b"\0"):
            if var.startswith(b"TFS_SPOOL="):
                return os.fsdecode(var[len(b"TFS_SPOOL="):])
    return ""


def test_stale_spools(tap, args, work):
    """A recorder killed with SIGKILL leaves its directory in /dev/shm: the next recording
    removes it and the spools in it, never a live recording's (held by a lock)."""
    p, child = start_spin(tap, args, os.path.join(work, "killed.trace"), " (stale spools)")
    spool = spool_of(child) if child else ""
    d = os.path.dirname(spool)
    if not tap.ok(re.fullmatch(r"/dev/shm/tracefs\.[A-Za-z0-9]{6}/spool", spool) and
                  os.path.exists(spool) and (os.stat(d).st_mode & 0o777) == 0o700,
                  "the recorder's spool is /dev/shm/tracefs.XXXXXX/spool, the directory "
                  "mode 0700", spool):
        kill_spin(p, child)
        return
    old = time.time() - 120
    os.utime(spool, (old, old))  # past the age a recorder may take to lock its spool
    rc, _, serr = run([args.tracefs, "record", "--trace=zones,mem", "-o",
                       os.path.join(work, "sweep1.trace"), "--", args.known, "ok", "1"])
    tap.ok(rc == 0 and os.path.exists(spool) and b"removed" not in serr,
           "a live recording's spool is left alone, however old", serr)
    kill_spin(p, child, timeout=60)
    with open(spool + ".4242", "wb") as f:  # a process's spool
        f.write(b"x" * 4096)
    for path in (spool, spool + ".4242"):
        os.utime(path, (old, old))
    tap.ok(os.path.exists(spool), "a recorder killed with SIGKILL leaves its spool", spool)
    rc, _, serr = run([args.tracefs, "record", "--trace=zones,mem", "-o",
                       os.path.join(work, "sweep2.trace"), "--", args.known, "ok", "1"])
    m = re.search(rb"removed (\d+) spools \((\d+) [KM]iB\) left in /dev/shm", serr)
    tap.ok(rc == 0 and not os.path.exists(d) and m and int(m.group(1)) >= 2 and
           int(m.group(2)) >= 1,
           "the next recording removes the dead recorder's directory and spools and says so "
           "in one line", serr)


def test_stale_spools_own_dir(tap, args, work):
    """TFS_SPOOL=PREFIX puts the recordings' directories at PREFIX.XXXXXX: a recorder killed
    there leaves its directory, which the next recording with TFS_SPOOL in that directory
    removes, the spools in it first, by the rules of /dev/shm; files that are not named as
    spools are, the directory that holds them, and files beside it stay."""
    d = os.path.join(work, "my spools")
    os.mkdir(d)
    p, child = start_spin(tap, args, os.path.join(work, "killed-own.trace"),
                          " (stale spools in TFS_SPOOL's directory)",
                          {"TFS_SPOOL": os.path.join(d, "killed")})
    spool = spool_of(child) if child else ""
    rdir = os.path.dirname(spool)
    if not tap.ok(re.fullmatch(re.escape(d) + r"/killed\.[A-Za-z0-9]{6}/spool", spool) and
                  os.path.exists(spool), "the recorder's spool is TFS_SPOOL.XXXXXX/spool",
                  spool):
        kill_spin(p, child)
        return
    old = time.time() - 120
    os.utime(spool, (old, old))
    rc, _, serr = run([args.tracefs, "record", "--trace=zones,mem", "-o",
                       os.path.join(work, "own1.trace"), "--", args.known, "ok", "1"],
                      env={"TFS_SPOOL": os.path.join(d, "second")})
    tap.ok(rc == 0 and os.path.exists(spool) and b"removed" not in serr,
           "TFS_SPOOL's directory: a live recording's spool is left alone, however old", serr)
    kill_spin(p, child, timeout=60)
    after = {spool + ".4242": True, spool + ".4242.1": True, spool + ".trace": True,
             spool + ".log": False, os.path.join(rdir, "notes"): False,
             os.path.join(d, "notes"): False, os.path.join(d, "spool"): False}
    for path in after:
        with open(path, "wb") as f:
            f.write(b"TFSX" + b"x" * 4092)
    for path in [spool] + list(after):
        os.utime(path, (old, old))
    rc, _, serr = run([args.tracefs, "record", "--trace=zones,mem", "-o",
                       os.path.join(work, "own2.trace"), "--", args.known, "ok", "1"],
                      env={"TFS_SPOOL": os.path.join(d, "third")})
    m = re.search(rb"^tracefs: removed (\d+) spools \((\d+) [KM]iB\) left in (.*) by recordings "
                  rb"that were killed$", serr, re.M)
    left = sorted(os.path.relpath(os.path.join(t, f), d) for t, _, fs in os.walk(d) for f in fs)
    tap.ok(rc == 0 and m and int(m.group(1)) == 4 and int(m.group(2)) >= 1 and
           m.group(3) == os.fsencode(d) and serr.count(b"removed") == 1 and
           not os.path.exists(spool) and
           left == sorted(os.path.relpath(f, d) for f, gone in after.items() if not gone),
           "TFS_SPOOL's directory: the next recording removes the dead recorder's spools, "
           "says so in one line, leaves other files and the directory holding them",
           (serr, left))


def test_interrupt_record(tap, args, work):
    """SIGINT sent to tracefs record alone (kill, timeout -s INT, a CI runner cancelling a
    job) reaches the program: the terminal's ^C reaches it directly, kill() does not."""
    out = os.path.join(work, "int.trace")
    p, child = start_spin(tap, args, out, " for SIGINT")
    os.kill(p.pid, signal.SIGINT)
    try:
        _, serr = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        if child:
            os.kill(child, signal.SIGKILL)  # it holds the pipes open
        p.kill()
        _, serr = p.communicate()
        serr += b" (still running 60 s after SIGINT: killed)"
    tap.ok(p.returncode == -signal.SIGINT and b"killed by signal 2 (SIGINT)" in serr
           and os.path.exists(out),
           "SIGINT to tracefs record: the program gets it, record dies of it with its trace",
           "rc=%r stderr=%r" % (p.returncode, serr))


def test_stop_waiting(tap, args, work):
    """The program ended, a process it left running (setsid) goes on: record says it
    waits for it, and a SIGTERM then stops the wait: the trace is saved with that process
    still running, said so, and the process left alone."""
    out = os.path.join(work, "left.trace")
    mark = os.path.join(work, "left.pid")
    p = subprocess.Popen([args.tracefs, "record", "-o", out, "--", "sh", "-c",
                          "setsid sh -c 'echo $$ > %s; exec sleep 120' &" % mark],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    said = b""
    os.set_blocking(p.stderr.fileno(), False)
    deadline = time.monotonic() + 60
    while b"waiting for the processes" not in said and time.monotonic() < deadline:
        time.sleep(0.05)
        said += p.stderr.read() or b""
    os.kill(p.pid, signal.SIGTERM)
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    os.set_blocking(p.stderr.fileno(), True)
    said += p.stderr.read() or b""
    left = None
    try:
        with open(mark) as f:
            left = int(f.read())
        os.kill(left, 0)
        alive = True
    except (OSError, ValueError):
        alive = False
    end = ""
    if os.path.exists(out):
        t = Trace(args.tracefs, out)
        ends = [v for k, v in t.info.get("meta", {}).items() if k.startswith("end.rank")]
        end = " ".join(ends)
    tap.ok(p.returncode == 0 and b"waiting for the processes it left running" in said and
           b"stopped waiting" in said and alive and "still running when the recording "
           "stopped" in end,
           "a SIGTERM stops record's wait for a process the program left running: the trace "
           "is saved, the process runs on", "rc=%r alive=%r ends=%r stderr=%r" %
           (p.returncode, alive, end, said))
    if alive:
        os.kill(left, signal.SIGKILL)


def test_many_threads(tap, args, work, n=20):
    out = os.path.join(work, "many.trace")
    rc, sout, serr = run([args.tracefs, "record", "--trace=zones,mem",
                          "-o", out, "--", args.known, "many", str(n)])
    tap.ok(rc == 0 and sout == b"many %d done\n" % n, "%d threads: run" % n, serr)
    t = Trace(args.tracefs, out)
    threads = t.threads()
    tap.ok(threads == list(range(1, n + 1)),
           "%d threads: one stream each, ids 1..%d (0 is main, which records nothing)" % (n, n),
           threads)
    names, good = set(), True
    for th in threads:
        evs = strip(t.events(th))
        names.add(evs[0][1].get("name") if evs else None)
        good &= evs[1:] == [("zone", {"name": "z", "depth": 0})] * 100 and \
            evs[0][0] == "thread_name"
    tap.ok(good and names == {"t%d" % i for i in range(n)},
           "%d threads: each stream is its thread's name and 100 zones" % n, sorted(map(str, names)))
    rc, _, err = t.verify()
    tap.ok(rc == 0, "%d threads: verify" % n, err)


def test_full_spool(tap, args, work, n=3000000):
    """--when-full=drop on a 1 MiB spool: drops, counted exactly (waiting, the default, is
    check_spool.py's)."""
    out = os.path.join(work, "burst.trace")
    rc, sout, serr = run([args.tracefs, "record", "--trace=zones,mem", "--when-full=drop",
                          "-o", out, "--spool-size=1", "--",
                          args.known, "burst", str(n)])
    m = SUMMARY_RE.search(serr)
    tap.ok(rc == 0 and m, "full spool: runs", serr)
    if not m:
        return
    t = Trace(args.tracefs, out)
    dropped = int(t.meta("dropped_events"))
    # the marks of where events were dropped are events too: summary.txt counts them
    marks = [int(line.split()[1]) for line in t.cat("summary.txt").decode().splitlines()
             if line.split()[:1] == ["kind"] and line.split()[-1] == "dropped"]
    events = t.info["events"] - sum(marks)
    said = int(re.search(rb"(\d+) dropped", sout).group(1))
    tap.diag("1 MiB spool, %d accesses: %d recorded, %d dropped, %s marks" %
             (n, events, dropped, marks))
    tap.ok(dropped > 0 and marks and events + dropped == n and t.meta("when_full") == "drop",
           "full spool: recorded + dropped == accesses made, exactly", (events, dropped))
    tap.ok(int(m.group("dropped")) == dropped and said == dropped,
           "full spool: record and the program report the same dropped count",
           (m.group("dropped"), said, dropped))
    rc, _, err = t.verify()
    tap.ok(rc == 0, "full spool: verify", err)


def test_dropped_zones(tap, args, work, n=300000):
    """A full spool while the program nests zones (outer > inner > 2 accesses, cap_known
    zburst) with --when-full=drop: where events were dropped the thread's stream says how
    many, zones never nest deeper than the program nested them (a zone whose end was dropped
    ends at the mark instead of holding all later ones), and every record is accounted for:
    2 per zone, 1 per zone ended at a mark, 1 per access, plus the drops, make 6 per
    iteration. trace.json marks them as instant events (with a process-wide one for drops no
    thread could place) summing to the drops and validates; timeline.svg bands them."""
    out = os.path.join(work, "zburst.trace")
    rc, sout, serr = run([args.tracefs, "record", "--trace=zones,mem", "--when-full=drop",
                          "-o", out, "--spool-size=1", "--", args.known, "zburst", str(n)])
    m = SUMMARY_RE.search(serr)
    if not tap.ok(rc == 0 and m, "dropped zones: runs", serr):
        return
    t = Trace(args.tracefs, out)
    dropped = int(t.meta("dropped_events"))
    unplaced = int(t.meta("dropped_unplaced"))
    said = int(re.search(rb"(\d+) dropped", sout).group(1))
    count = {}
    depths = {"outer": set(), "inner": set()}
    marked = 0
    bad_messages = []
    for e in t.events(0):
        count[e["name"]] = count.get(e["name"], 0) + 1
        if e["name"] in ("zone", "zone_unfinished"):
            depths.setdefault(e["args"]["name"], set()).add(e["args"]["depth"])
        if e["name"] == "dropped":
            k = e["args"]["count"]
            marked += k
            if e["args"]["message"] != "dropped %d event%s" % (k, "" if k == 1 else "s"):
                bad_messages.append(e)
    tap.diag("zburst %d on a 1 MiB spool: %s, %d dropped, %d unplaced" %
             (n, count, dropped, unplaced))
    tap.ok(dropped > 0 and said == dropped and count.get("dropped", 0) > 0,
           "dropped zones: drops happened, counted as the program says, marked",
           (dropped, said, count))
    tap.ok(not bad_messages, "dropped zones: each mark's message says its count",
           bad_messages[:3])
    tap.ok(marked + unplaced == dropped and unplaced < dropped,
           "dropped zones: the marks' counts and dropped_unplaced sum to dropped_events",
           (marked, unplaced, dropped))
    recs = 2 * count.get("zone", 0) + count.get("zone_unfinished", 0) + \
        count.get("load", 0) + count.get("store", 0)
    tap.ok(recs + dropped == 6 * n,
           "dropped zones: 2 records a zone, 1 a zone ended at a mark, 1 an access, plus "
           "the drops, are the program's 6 per iteration", (recs, dropped, 6 * n))
    tap.ok(depths["outer"] == {0} and depths["inner"] <= {0, 1} and set(depths) ==
           {"outer", "inner"},
           "dropped zones: no zone nests deeper than the program nested it", depths)
    data = t.cat("trace.json")
    problems = trace_event.validate(data)
    tap.ok(not problems, "dropped zones: trace.json is valid trace-event JSON", problems[:5])
    marks = [e for e in json.loads(data) if e.get("cat") == "capture"]
    tap.ok(marks and all(e["ph"] == "i" and e["s"] in ("t", "p") and
                         e["name"].startswith("dropped %d event" % e["args"]["count"])
                         for e in marks) and
           sum(e["args"]["count"] for e in marks) == dropped,
           "dropped zones: trace.json's instant marks sum to dropped_events",
           (len(marks), sum(e["args"]["count"] for e in marks), dropped))
    svg = t.cat("timeline.svg").decode()
    ticks = re.findall(r'<rect class="dr"[^>]*><title>dropped (\d+) events?', svg)
    tap.ok(ticks and sum(map(int, ticks)) == marked,
           "dropped zones: timeline.svg's red bands say the threads' marked drops",
           (len(ticks), sum(map(int, ticks)), marked))


# 8 threads allocating (bytearrays past pymalloc's limit go to malloc) while the recorder,
# the program's parent, is stopped: the 1 MiB spool fills for certain
FULL_SPOOL_PY = """
import os, signal, threading
def work():
    for i in range(3000):
        x = bytearray(1000 + i % 50)
ts = [threading.Thread(target=work) for _ in range(8)]
os.kill(os.getppid(), signal.SIGSTOP)
try:
    for t in ts:
        t.start()
    for t in ts:
        t.join()
finally:
    os.kill(os.getppid(), signal.SIGCONT)
print("threads done")
"""


def test_full_spool_threads(tap, args, work):
    """A real program (python, 8 threads allocating) on a 1 MiB spool with every category,
    filled while the recorder is stopped, --when-full=drop: threads that find it full carry
    on, their events dropped and counted. A thread left without a chunk once wrote its next,
    smaller record past the chunk it had handed over, then crashed on the chunk it no longer
    had."""
    out = os.path.join(work, "full-threads.trace")
    e = dict(os.environ)
    for k in ("TFS_CAPTURE", "TFS_OUTPUT", "TFS_SPOOL", "TFS_TIMING", "TFS_TRACE"):
        e.pop(k, None)
    p = subprocess.Popen([args.tracefs, "record", "-o", out, "--spool-size=1",
                          "--when-full=drop", "--",
                          sys.executable, "-c", FULL_SPOOL_PY], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=e)
    try:
        sout, serr = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:  # the program died with the recorder stopped
        p.send_signal(signal.SIGCONT)
        sout, serr = p.communicate(timeout=120)
    tap.ok(p.returncode == 0 and sout == b"threads done\n",
           "full spool, python with 8 threads: the program runs to its end", serr)
    if not os.path.exists(out):
        tap.ok(False, "full spool, python with 8 threads: trace written", serr)
        return
    t = Trace(args.tracefs, out)
    rc, _, err = t.verify()
    tap.ok(rc == 0 and int(t.meta("dropped_events")) > 1000 and t.info["events"] > 0,
           "full spool, python with 8 threads: the trace verifies, events kept and drops "
           "counted", (err, t.meta("dropped_events"), t.info["events"]))


def test_matmul(tap, args, work):
    rows = []
    for n in (8, 16):
        for threads in (1, 4, 8, 32):
            out = os.path.join(work, "mm-%d-%d.trace" % (n, threads))
            rc, sout, serr = run([args.tracefs, "record", "--trace=zones,mem",
                                  "-o", out, "--timing=none", "--",
                                  args.matmul, str(n), str(threads)])
            _, plain = untraced_stdout(args, [args.matmul, str(n), str(threads)])
            t = Trace(args.tracefs, out) if rc == 0 else None
            accesses = n * n * (2 * n + 1)
            mem = sum(1 for th in (t.threads() if t else [])
                      for line in t.text(th).splitlines() if "load(" in line or "store(" in line)
            size = t.info["file_bytes"] if t else 0
            rows.append((n, threads, accesses, size))
            tap.ok(rc == 0 and sout == plain and mem == accesses,
                   "matmul %dx%d, %d threads: %d accesses traced, stdout as untraced"
                   % (n, n, threads, accesses), "rc=%d mem=%d\n%s" % (rc, mem, serr))
            if n == 16 and threads <= 8:
                tap.ok(size < 0.5 * accesses,
                       "matmul 16x16, %d threads: %.3f bytes per access (< 0.5)"
                       % (threads, size / accesses), size)
            elif n == 16:
                # 264 accesses per thread: each stream's fixed cost (its grammar and values
                # sections, their zstd frames and section-table entries, ~250 bytes) dominates
                tap.ok(size < 1.5 * accesses and size < 39691,
                       "matmul 16x16, %d threads: %.3f bytes per access (< 1.5, and under "
                       "the EPRSD paper's 39,691 bytes)" % (threads, size / accesses), size)
    tap.diag("matmul trace sizes, timing none (EPRSD paper: 39,691 bytes compressed):")
    for n, threads, accesses, size in rows:
        tap.diag("  %2dx%-2d %2d threads: %6d accesses %6d bytes  %.3f B/access"
                 % (n, n, threads, accesses, size, size / accesses))
    out = os.path.join(work, "mm-lossless.trace")
    rc, _, serr = run([args.tracefs, "record", "--trace=zones,mem",
                       "-o", out, "--", args.matmul, "16", "4"])
    if rc == 0:
        size = Trace(args.tracefs, out).info["file_bytes"]
        tap.diag("  16x16  4 threads, lossless timing: %d bytes  %.3f B/access"
                 % (size, size / (16 * 16 * 33)))


def test_demo(tap, args, work):
    out = os.path.join(work, "demo.trace")
    rc, sout, serr = run([args.tracefs, "record", "--trace=zones,mem",
                          "-o", out, "--", args.demo, "100"])
    _, plain = untraced_stdout(args, [args.demo, "100"])
    tap.ok(rc == 0 and sout == plain, "demo_threads: record, stdout as untraced", serr)
    t = Trace(args.tracefs, out)
    names = {p[0] for p in t.phases()}
    tap.ok(t.threads() == [0, 1, 2, 3, 4] and names == {"init", "solve", "output"},
           "demo_threads: 5 threads, phases init/solve/output", (t.threads(), names))
    solve = [p for p in t.phases() if p[0] == "solve"]
    tap.ok(sorted(p[1] for p in solve if p[3] > 0) == [1, 2, 3, 4],
           "demo_threads: the solve phase holds the 4 workers' events", solve)
    rc, _, err = t.verify()
    tap.ok(rc == 0, "demo_threads: verify", err)


def is_zone_event(e):
    return e["name"] in ("zone", "zone_unfinished")


def ends(e):
    return e["ts"] + e["dur"]


def backtrace_frames(text):
    """Stack id -> its frames' function names, outermost first, from backtraces.txt."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"stack#(\d+)$", line)
        if m:
            cur = out.setdefault(int(m.group(1)), [])
            continue
        name = re.sub(r" \[inlined\]$", "", line.strip())
        cur.append(re.sub(r" \([^()]*\)$", "", name).replace(";", "\\x3b"))
    return out


def expected_stacks(streams, frames):
    """stacks.folded as README.txt defines it for a rank with backtraces, by brute force:
    each event counts 1 at "rank 0;thread <t>", the frames of its stack (as backtraces.txt
    lists them), then every zone of its thread with zone start <= ts < zone end and ts + dur
    <= zone end (a zone lies in itself)."""
    total = {}
    for t, evs in sorted(streams.items()):
        zones = [(e["ts"], -ends(e), i, e["args"]["name"]) for i, e in enumerate(evs)
                 if is_zone_event(e)]
        for e in evs:
            stack = e["args"].get("stack")  # "stack#N" (FORMAT.md §9) or null
            stack = int(stack[len("stack#"):]) if stack is not None else None
            key = "rank 0;thread %d" % t
            if stack is not None:
                key += ";" + (";".join(frames[stack]) if stack in frames else "[not sampled]")
            inside = sorted(z for z in zones
                            if z[0] <= e["ts"] < -z[1] and ends(e) <= -z[1])
            key += "".join(";" + z[3].replace(";", "\\x3b") for z in inside)
            total[key] = total.get(key, 0) + 1
    return "".join("%s %d\n" % (k, v) for k, v in sorted(total.items()) if v > 0)


def test_demo_order(tap, args, work):
    """A recorded trace lists each thread's events as they end; the merged rank files order
    them by end time and stacks.folded nests allocations in zones listed after them."""
    out = os.path.join(work, "demo-all.trace")
    rc, _, serr = run([args.tracefs, "record", "-o", out, "--", args.demo, "30"])
    if not tap.ok(rc == 0, "demo_threads, every category: record", serr):
        return
    t = Trace(args.tracefs, out)
    readme = t.cat("README.txt")
    tap.ok(t.meta("event_order") == "end" and b"merged files by end time" in readme,
           "recorded trace: metadata event_order=end, README.txt says merged by end time",
           t.meta("event_order"))
    streams = {th: t.events(th) for th in t.threads()}
    late = []
    for th, evs in streams.items():
        for zi, z in enumerate(evs):
            if is_zone_event(z):
                late += [(th, i, zi) for i, e in enumerate(evs)
                         if i > zi and e["dur"] < z["dur"] and z["ts"] <= e["ts"]
                         and ends(e) <= ends(z)]
    tap.ok(not late and any(is_zone_event(e) and e["args"]["depth"] > 0
                            for evs in streams.values() for e in evs),
           "each thread lists a zone after every event nested in it", late[:5])
    order = []
    for th, evs in sorted(streams.items()):
        key = 0
        for i, e in enumerate(evs):
            key = max(key, ends(e))
            order.append((key, th, i))
    order.sort()
    merged = [json.loads(line) for line in t.cat("ranks/0/events.jsonl").decode().splitlines()]
    tap.ok(merged == [streams[th][i] for _, th, i in order],
           "ranks/0/events.jsonl: %d lines by end time, ties by thread" % len(merged),
           first_diff(merged, [streams[th][i] for _, th, i in order]))
    text = {th: t.text(th).splitlines(keepends=True) for th in streams}
    got = t.cat("ranks/0/trace.txt").decode()
    tap.ok(got == "".join(text[th][i] for _, th, i in order),
           "ranks/0/trace.txt: the threads' lines in the same order")
    seen, keys = {}, []
    for e in merged:
        seen[e["thread"]] = max(seen.get(e["thread"], 0), ends(e))
        keys.append((seen[e["thread"]], e["thread"]))
    tap.ok(keys == sorted(keys) and sum(ends(e) < k for e, (k, _) in zip(merged, keys)) <
           len(merged) // 10, "ranks/0/events.jsonl: keys (end time so far on the line's "
           "thread) non-decreasing, ties by thread; mostly the line's own end")
    # an allocation made inside an interposed call (fdopen's malloc) ends first: it comes
    # before the call in the merged file and lies in the same zones
    pos = {(th, i): n for n, (_, th, i) in enumerate(order)}
    nested = [(th, i, ci) for th, evs in streams.items() for ci, c in enumerate(evs)
              if c["name"] in ("fopen", "fdopen") for i, e in enumerate(evs)
              if e["name"] == "malloc" and c["ts"] <= e["ts"] and ends(e) <= ends(c)]
    tap.ok(nested and all(pos[(th, i)] < pos[(th, ci)] for th, i, ci in nested),
           "%d mallocs inside fopen/fdopen precede it in ranks/0/events.jsonl" % len(nested),
           nested[:5])
    exp = expected_stacks(streams, backtrace_frames(t.cat("ranks/0/backtraces.txt").decode()))
    got = t.cat("ranks/0/stacks.folded").decode()
    tap.ok(got == exp and re.search(r";main;[^ ]*;alloc \d+$", exp, re.M) and
           sum(int(x.rsplit(" ", 1)[1]) for x in exp.splitlines()) ==
           sum(len(evs) for evs in streams.values()),
           "ranks/0/stacks.folded: %d stacks, every event at its backtrace and in its zones" %
           exp.count("\n"), "got:\n%sexpected:\n%s" % (got, exp))


def test_cli(tap, args, work):
    rc, _, err = run([args.tracefs, "record"])
    tap.ok(rc == 2 and b"missing the command" in err, "record without a command: usage error",
           err)
    rc, _, err = run([args.tracefs, "record", "--timing=fast", "--", "true"])
    tap.ok(rc == 2, "record --timing=fast: usage error", err)
    # a trace of no events: window/ lists twenty different windows, not "0-1" twenty times
    empty = os.path.join(work, "empty.trace")
    rc, _, err = run([args.tracefs, "record", "-o", empty, "--", "true"])
    for d in ("window", "ranks/0/window"):
        rc2, out, err2 = run([args.tracefs, "ls", empty, d])
        names = [ln.split()[-1] for ln in out.decode().splitlines()]
        tap.ok(rc == 0 and rc2 == 0 and len(names) == 20 and len(set(names)) == 20 and
               names[:4] == ["0-4", "4-8", "8-12", "12-16"] and names[4] == "0-1",
               "a trace of no events: %s lists twenty different windows" % d,
               (names, err, err2))
    rc, _, err = run([args.tracefs, "record", "--", os.path.join(work, "no-such-program")])
    tap.ok(rc == 127 and b"not found" in err, "record of a missing program: 127", err)
    static = next((p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(p)),
                  None)
    if static:
        out = os.path.join(work, "static.trace")
        rc, _, err = run([args.tracefs, "record", "--trace=zones,mem",
                          "-o", out, "--", static, "--version"])
        tap.ok(rc == 0 and b"statically linked" in err and b"nothing recorded" in err
               and not os.path.exists(out),
               "a statically linked program: clear message, no trace", err)
    # an unwritable output is refused before the program runs, not after its whole run
    marker = os.path.join(work, "ran")
    for out, why in ((work, "a directory"),
                     (os.path.join(work, "no-such-dir", "x.trace"), "in a missing directory")):
        if os.path.exists(marker):
            os.unlink(marker)
        rc, _, err = run([args.tracefs, "record", "-o", out, "--", "touch", marker])
        tap.ok(rc == 1 and err.count(b"\n") == 1 and out.encode() in err
               and not os.path.exists(marker),
               "record -o %s: one error line, the program not run" % why,
               "rc=%d ran=%s stderr=%r" % (rc, os.path.exists(marker), err))
    cwd = tempfile.mkdtemp(dir=work)
    rc, _, err = run([args.tracefs, "record", "--", args.known, "ok", "1"], cwd=cwd)
    tap.ok(rc == 0 and os.listdir(cwd) == ["cap_known.trace"],
           "record without -o writes <command>.trace in the cwd", os.listdir(cwd))
    # info's text lists every metadata key with the value info --json has, numbers included
    # (pid, backtrace_depth... were printed empty), a newline as \n (thread_names)
    trace = os.path.join(cwd, "cap_known.trace")
    meta = Trace(args.tracefs, trace).info["meta"] if os.path.exists(trace) else {}
    rc, out, err = run([args.tracefs, "info", trace])
    lines = out.decode(errors="replace").splitlines()
    missing = [k for k, v in meta.items()
               if not any(re.fullmatch(r"%s +%s" % (re.escape(k),
                                                    re.escape(str(v).replace("\n", "\\n"))),
                                       line) for line in lines)]
    tap.ok(rc == 0 and isinstance(meta.get("pid"), int) and not missing,
           "info prints every metadata value info --json has, numbers too", missing)


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--tracefs", "--known", "--known-static", "--matmul", "--demo", "--calls",
                "--capio", "--capclock"):
        ap.add_argument(opt, required=True)
    ap.add_argument("--only", help="run only this test function (test_...)")
    args = ap.parse_args()
    CALL_KINDS.update(read_call_kinds(args.calls))
    for k in ("tracefs", "known", "known_static", "matmul", "demo", "capio", "capclock"):
        setattr(args, k, os.path.abspath(getattr(args, k)))
    tap = Tap()
    with tempfile.TemporaryDirectory(prefix="tfs-capture.") as work:
        for test in (test_record_modes, test_timing_modes, test_tsc_clock, test_inprocess,
                     test_capture_off, test_fork, test_thread_names, test_external_kill,
                     test_stale_spools,
                     test_stale_spools_own_dir,
                     test_interrupt_record, test_stop_waiting,
                     test_many_threads, test_full_spool, test_dropped_zones,
                     test_full_spool_threads, test_matmul,
                     test_demo, test_demo_order, test_cli):
            if args.only and test.__name__ != args.only:
                continue
            try:
                test(tap, args, work)
            except Exception as e:  # a crash of the checker is a failure, not an abort
                tap.ok(False, "%s raised %s: %s" % (test.__name__, type(e).__name__, e))
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
