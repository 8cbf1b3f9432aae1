#!/usr/bin/env python3
"""End-to-end tests of allocation backtraces (TAP): cap_bt.c traced with `tracefs record`,
its trace read back through the reader API by bt_dump (tfs_trace_backtrace and
tfs_trace_symbol), without the binary's help: the symbols are in the trace.

1. Known call chains: each allocation of `cap_bt known` has a backtrace whose source frames,
   outermost first, end exactly with the chain cap_bt.c describes (main > f_outer > f_inner
   > helper, the last one inlined), every frame of cap_bt.c at the file:line of the call
   marked "bt:NAME" in the source (found here by reading cap_bt.c, not hard-coded); the
   chain starts at the C runtime (_start or __libc_start_*). Events of one call chain share
   one stack id, different chains have different ids, ids are dense in first-use order.
2. --backtrace-depth=0: the allocation kinds have no `stack` argument; --backtrace-depth=3
   keeps exactly the three innermost frames. The program's output is byte-identical traced
   and untraced, in every case.
3. 16 threads at once: each thread's allocation has the chain thread_main > f_outer >
   f_inner > helper, starting at the thread's entry (start_thread), not at main.
4. A library loaded with dlopen after start: its frame is symbolised (plugin_alloc at its
   marked line), so objects loaded late are announced to the consumer.
5. 20000 allocations from two alternating sites: exactly two stack ids alternate, so
   backtraces carried as differences against the thread's previous one decode exactly
   across spool chunks.
6. 16 threads allocating from two sites while main loads a library and allocates through
   it (the loaded objects are rescanned while others unwind): every allocation has its
   exact chain, nothing malformed or dropped. A program killed by abort() right after an
   allocation: the backtrace is recovered and symbolised all the same.
7. In-process (the library preloaded, TFS_TRACE=alloc, no `tracefs record`): the same
   chain, symbolised by the program itself at exit; TFS_BACKTRACE_DEPTH=0 turns them off.
8. The walk that reuses the thread's last one against libunwind alone (TFS_UNWIND=libunwind,
   the reference), address space layout fixed (setarch -R) so that code addresses repeat:
   every event's frames, as addresses and symbolised, and backtraces.txt are identical, on
   stacks made to fool a reuse: recursion at one depth under two callers, longjmp out of
   deep stacks, signal handlers allocating (on the thread's stack and on a sigaltstack), a
   library without frame pointers calling back into one with them and the reverse, a
   function that realigns its stack, a stack deeper than the frames kept, pseudo-random
   depths, a library unloaded and another loaded in its place, 16 threads. Each stack has
   its known shape too, and TFS_UNWIND_STATS tells that the walk did them (libunwind only
   the signal handlers' stacks, which cross a signal frame).

9. Two libraries, the same code under other names (apple, banana), loaded in turn at one
   address (dlopen, allocate, dlclose; the test skips, saying so, when the loader put them
   at different addresses): each allocation's frames are named after the library loaded
   when it was made, A's again after B was there, in the events and in backtraces.txt.

  check_backtrace.py --tracefs T --capbt B --plugin P --plugin2 P2 --swap-a A --swap-b B
                     --dump D --source cap_bt.c --lib L
"""

import argparse
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

RUNTIME = ("_start", "__libc_start_main", "__libc_start_main_impl", "__libc_start_call_main")


def run(cmd, timeout=300, env=None):
    e = dict(os.environ)
    for k in ("TFS_CAPTURE", "TFS_OUTPUT", "TFS_SPOOL", "TFS_TIMING", "TFS_TRACE",
              "TFS_BACKTRACE_DEPTH", "LD_PRELOAD"):
        e.pop(k, None)
    e.update(env or {})
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def markers(source):
    """{marker name: line number} of the "bt:NAME" comments of cap_bt.c / the plugin."""
    found = {}
    with open(source) as f:
        for i, line in enumerate(f, 1):
            m = re.search(r"bt:(\w+)", line)
            if m:
                found[m.group(1)] = i
    return found


class Event:
    def __init__(self, line):
        head, _, frames = line.partition(" | ")
        t, self.kind, size, stack = head.split()
        self.thread = int(t[1:])
        self.size = int(size)
        self.stack = int(stack)
        self.frames = []
        for f in frames.split(" > ") if frames.strip() else []:
            fn, loc = f.strip().rsplit(" ", 1)
            path, _, ln = loc.rpartition(":")
            self.frames.append((fn, os.path.basename(path), int(ln)))

    def __repr__(self):
        return "%s(%d) stack#%d: %s" % (self.kind, self.size, self.stack, " > ".join(
            "%s@%s:%d" % f for f in self.frames))


def record(args, work, name, cmd, extra=(), status=0, errors=None):
    trace = os.path.join(work, name + ".trace")
    rc, out, err = run([args.tracefs, "record", "-o", trace, "--trace=alloc,threads"] +
                       list(extra) + ["--"] + cmd)
    if rc != status:
        raise RuntimeError("record %s: status %d: %s" % (name, rc, err.decode(errors="replace")))
    if errors is not None:
        errors.append(err.decode(errors="replace"))
    return trace, out


def dump(args, trace, kinds=False):
    rc, out, err = run([args.dump] + (["--kinds"] if kinds else []) + [trace])
    if rc != 0:
        raise RuntimeError("bt_dump %s: %s" % (trace, err.decode(errors="replace")))
    lines = out.decode().splitlines()
    return lines if kinds else [Event(x) for x in lines]


def kind_args(lines):
    """{kind: [argument names]} from bt_dump --kinds."""
    return {k: a.split() for k, _, a in (x.partition(":") for x in lines)}


def chain(mk, src, names):
    """The expected tail of source frames: (function, file, line) for each marker name."""
    return [(fn, src, mk[m]) for fn, m in names]


def tail_is(tap, ev, want, desc):
    got = ev.frames[-len(want):] if ev else None
    return tap.ok(ev is not None and got == want, desc,
                  "want ... > %s\ngot %r" % (" > ".join("%s@%s:%d" % w for w in want), ev))


def find(events, kind, size):
    for e in events:
        if e.kind == kind and e.size == size:
            return e
    return None


def test_known(tap, args, work, mk, src):
    trace, out = record(args, work, "known", [args.capbt, "known"])
    rc, plain, _ = run([args.capbt, "known"])
    tap.ok(rc == 0 and out == plain, "known: output traced is byte-identical to untraced")
    ev = dump(args, trace)
    main = [("main", "main")]
    m = find(ev, "malloc", 1001)
    tail_is(tap, m, chain(mk, src, main + [("f_outer", "f_outer"), ("f_inner", "f_inner"),
                                          ("helper", "helper")]),
            "malloc(1001): main > f_outer > f_inner > helper (inlined) at the marked lines")
    tap.ok(m is not None and m.frames and m.frames[0][0] in RUNTIME,
           "malloc(1001): the backtrace starts at the C runtime", repr(m))
    others = [("main", "main_others")]
    tail_is(tap, find(ev, "calloc", 3 * 1002),
            chain(mk, src, others + [("f_others", "f_others_calloc"), ("f_calloc", "f_calloc")]),
            "calloc(3, 1002): main > f_others > f_calloc")
    tail_is(tap, find(ev, "realloc", 5000),
            chain(mk, src, others + [("f_others", "f_others_realloc"),
                                     ("f_realloc", "f_realloc")]),
            "realloc(p, 5000): main > f_others > f_realloc")
    tail_is(tap, find(ev, "posix_memalign", 1005),
            chain(mk, src, others + [("f_others", "f_others_memalign"),
                                     ("f_memalign", "f_posix_memalign")]),
            "posix_memalign(64, 1005): main > f_others > f_memalign")
    ids = [e.stack for e in ev]
    first_use = []
    for i in ids:
        if i not in first_use:
            first_use.append(i)
    tap.ok(first_use == list(range(len(first_use))), "stack ids are dense in first-use order",
           repr(ids))
    mine = [e for e in ev if e.size in (1001, 3 * 1002, 5000, 1005)]
    tap.ok(len(mine) == 4 and len({e.stack for e in mine}) == 4,
           "four different call chains have four different stack ids", repr(mine))
    kinds = kind_args(dump(args, trace, kinds=True))
    stacked = [k for k, a in kinds.items() if "stack" in a]
    # a trace declares the kinds it uses (FORMAT.md §4): cap_bt calls these four
    allocating = {"malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign"}
    tap.ok(set(stacked) == allocating & set(kinds) and
           {"malloc", "calloc", "realloc", "posix_memalign"} <= set(stacked) and
           "free" in kinds and all(kinds[k][-1] == "stack" for k in stacked),
           "the allocating kinds have a last stack argument, free and the others none",
           repr(kinds))


def test_depth(tap, args, work, mk, src):
    rc, plain, _ = run([args.capbt, "known"])
    trace, out = record(args, work, "off", [args.capbt, "known"], ["--backtrace-depth=0"])
    kinds = kind_args(dump(args, trace, kinds=True))
    tap.ok("malloc" in kinds and not any("stack" in a for a in kinds.values()),
           "--backtrace-depth=0: no kind has a stack argument", repr(kinds))
    tap.ok(out == plain, "--backtrace-depth=0: output byte-identical")
    trace, out = record(args, work, "three", [args.capbt, "known"], ["--backtrace-depth=3"])
    m = find(dump(args, trace), "malloc", 1001)
    # three return addresses: main's, f_outer's, and f_inner's holding helper inlined
    tap.ok(m is not None and m.frames == chain(mk, src, [
        ("main", "main"), ("f_outer", "f_outer"), ("f_inner", "f_inner"), ("helper", "helper")]),
        "--backtrace-depth=3 keeps the three innermost frames", repr(m))
    tap.ok(out == plain, "--backtrace-depth=3: output byte-identical")


def test_threads(tap, args, work, mk, src):
    trace, out = record(args, work, "threads", [args.capbt, "threads", "16"])
    ev = [e for e in dump(args, trace) if e.kind == "malloc" and 2000 <= e.size < 2016]
    want = chain(mk, src, [("thread_main", "thread_main"), ("f_outer", "f_outer"),
                           ("f_inner", "f_inner"), ("helper", "helper")])
    tap.ok(sorted(e.size for e in ev) == list(range(2000, 2016)) and
           len({e.thread for e in ev}) == 16, "16 threads: one allocation each, own streams",
           repr(ev))
    bad = [e for e in ev if e.frames[-4:] != want or "main" in [f[0] for f in e.frames]]
    tap.ok(ev and not bad, "16 threads: thread_main > f_outer > f_inner > helper, no main",
           repr(bad[:3]))
    tap.ok(ev and all("clone" in e.frames[0][0] or e.frames[0][0] == "start_thread"
                      for e in ev),
           "16 threads: backtraces start at the thread entry", repr(ev[:1]))
    tap.ok(out == b"threads 16 done\n", "16 threads: output as untraced")


def test_dlopen(tap, args, work, mk, src):
    pmk = markers(os.path.join(os.path.dirname(args.source), "cap_bt_plugin.c"))
    trace, out = record(args, work, "dlopen", [args.capbt, "dlopen", args.plugin])
    m = find(dump(args, trace), "malloc", 1004)
    tail_is(tap, m, [("plugin", src, mk["plugin"]),
                     ("plugin_alloc", "cap_bt_plugin.c", pmk["plugin_alloc"])],
            "dlopen: a library loaded late is symbolised: plugin > plugin_alloc")
    tap.ok(out == b"plugin done\n", "dlopen: output as untraced")


def test_loop(tap, args, work, mk, src):
    n = 20000
    trace, out = record(args, work, "loop", [args.capbt, "loop", str(n)])
    ev = [e for e in dump(args, trace) if e.kind == "malloc" and e.size in (1003, 1013)]
    ids = [e.stack for e in ev]
    tap.ok(len(ev) == n and len(set(ids)) == 2 and
           all(ids[i] != ids[i + 1] for i in range(len(ids) - 1)),
           "20000 allocations from two sites: two stack ids, alternating",
           "%d events, ids %r" % (len(ev), sorted(set(ids))))
    site = {1003: "site_a", 1013: "site_b"}
    bad = [e for e in ev if e.frames[-1] != (site[e.size], src, mk[site[e.size]]) or
           e.frames[-2][:2] not in (("loop", src), ("main", src))]
    tap.ok(ev and not bad, "each allocation's last frames: the loop, then site_a or site_b",
           repr(bad[:2]))
    tap.ok(out == b"loop %d done\n" % n, "loop: output as untraced")


def test_stress(tap, args, work, mk, src):
    pmk = markers(os.path.join(os.path.dirname(args.source), "cap_bt_plugin.c"))
    err = []
    trace, out = record(args, work, "stress", [args.capbt, "stress", "16", args.plugin],
                        errors=err)
    ev = dump(args, trace)
    mine = [e for e in ev if e.kind == "malloc" and e.size in (1003, 1013)]
    site = {1003: "site_a", 1013: "site_b"}
    bad = [e for e in mine if e.frames[-1] != (site[e.size], src, mk[site[e.size]]) or
           e.frames[-2] != ("stress_main", src, mk["stress_main"])]
    tap.ok(len(mine) == 16000 and not bad,
           "stress: 16 threads x 1000 allocations, each stress_main > site_a or site_b",
           "%d events, bad %r" % (len(mine), bad[:2]))
    tail_is(tap, find(ev, "malloc", 1004), [
        ("plugin", src, mk["plugin"]), ("plugin_alloc", "cap_bt_plugin.c", pmk["plugin_alloc"])],
        "stress: the library loaded meanwhile is symbolised")
    tap.ok("malformed" not in err[0] and " 0 dropped" in err[0],
           "stress: no malformed record, nothing dropped", err[0])


def test_abort(tap, args, work, mk, src):
    trace, out = record(args, work, "abort", [args.capbt, "abort"],
                        status=-signal.SIGABRT)
    tail_is(tap, find(dump(args, trace), "malloc", 1001),
            chain(mk, src, [("main", "abort"), ("f_outer", "f_outer"), ("f_inner", "f_inner"),
                            ("helper", "helper")]),
            "abort: the backtrace of an allocation just before is recovered and symbolised")


def test_inproc(tap, args, work, mk, src):
    trace = os.path.join(work, "inproc.trace")
    env = {"LD_PRELOAD": args.lib, "TFS_TRACE": "alloc", "TFS_OUTPUT": trace}
    rc, out, err = run([args.capbt, "known"], env=env)
    tap.ok(rc == 0 and out == b"known done\n" and not err, "in-process: runs as untraced",
           err.decode(errors="replace"))
    tail_is(tap, find(dump(args, trace), "malloc", 1001),
            chain(mk, src, [("main", "main"), ("f_outer", "f_outer"), ("f_inner", "f_inner"),
                            ("helper", "helper")]),
            "in-process: malloc(1001): main > f_outer > f_inner > helper")
    env["TFS_BACKTRACE_DEPTH"] = "0"
    rc, out, err = run([args.capbt, "known"], env=env)
    kinds = kind_args(dump(args, trace, kinds=True))
    tap.ok(rc == 0 and "malloc" in kinds and not any("stack" in a for a in kinds.values()),
           "in-process: TFS_BACKTRACE_DEPTH=0: no stack argument", repr(kinds))


def record_fixed(args, work, name, cmd, env):
    """Record cmd with the address space layout fixed; (trace, stderr)."""
    trace = os.path.join(work, name + ".trace")
    rc, out, err = run(["setarch", platform.machine(), "-R", args.tracefs, "record", "-o", trace,
                        "--trace=alloc,threads", "--"] + cmd, env=env)
    if rc != 0:
        raise RuntimeError("record %s: status %d: %s" % (name, rc, err.decode(errors="replace")))
    return trace, err.decode(errors="replace")


def dump_text(args, trace, raw):
    rc, out, err = run([args.dump] + (["--raw"] if raw else []) + [trace])
    if rc != 0:
        raise RuntimeError("bt_dump %s: %s" % (trace, err.decode(errors="replace")))
    return out.decode().splitlines()


def unstacked(lines):
    """Event lines without their stack id (ids follow first use across threads), sorted."""
    return sorted(re.sub(r"^(\S+ \S+ \S+) \d+ \|", r"\1 |", x) for x in lines)


def count_by(lines, kind="malloc"):
    return sum(1 for x in lines if x.split()[1] == kind)


def versus(tap, args, work, name, cmd, by_libunwind, threads=False):
    """Record cmd walked and by libunwind alone: identical frames. @return the walk's events"""
    walked, err = record_fixed(args, work, name, cmd, {"TFS_UNWIND_STATS": "1"})
    ref, _ = record_fixed(args, work, name + "-ref", cmd, {"TFS_UNWIND": "libunwind"})
    raw, raw_ref = dump_text(args, walked, True), dump_text(args, ref, True)
    sym, sym_ref = dump_text(args, walked, False), dump_text(args, ref, False)
    if threads:
        raw, raw_ref, sym, sym_ref = map(unstacked, (raw, raw_ref, sym, sym_ref))
    first = next((i for i, (a, b) in enumerate(zip(raw, raw_ref)) if a != b), None)
    tap.ok(raw and raw == raw_ref and sym == sym_ref,
           "%s: %d events, every frame as libunwind alone gives it" % (name, len(raw)),
           "%d vs %d events; first difference:\n%s\n%s" % (
               len(raw), len(raw_ref), raw[first] if first is not None else "-",
               raw_ref[first] if first is not None else "-"))
    if not threads:
        texts = []
        for t in (walked, ref):
            rc, out, _ = run([args.tracefs, "cat", t, "ranks/0/backtraces.txt"])
            texts.append(out if rc == 0 else None)
        tap.ok(texts[0] and texts[0] == texts[1], "%s: backtraces.txt identical" % name)
    m = re.search(r"backtraces: (\d+) walked, (\d+) by libunwind", err)
    tap.ok(m and int(m.group(2)) == by_libunwind and int(m.group(1)) >= len(raw) - by_libunwind,
           "%s: walked, libunwind only for the %d stacks through a signal frame" % (
               name, by_libunwind), m.group(0) if m else err)
    return [Event(x) for x in dump_text(args, walked, False)]


def names(ev):
    return [f[0] for f in ev.frames]


def test_versus(tap, args, work, mk, src):
    n = 200
    ev = versus(tap, args, work, "same_depth", [args.capbt, "same_depth", str(n)], 0)
    mine = [e for e in ev if e.size == 1020]
    want = [("caller_b" if i % 2 else "caller_a") for i in range(n)]
    tap.ok([[f for f in names(e) if f.startswith("caller_")] for e in mine] ==
           [[w] for w in want] and all(names(e)[-21:] == ["rec"] * 21 for e in mine) and
           all(e.frames[-22] == (w, src, mk[w]) for e, w in zip(mine, want)),
           "same_depth: caller_a and caller_b alternate, each over 21 frames of rec",
           repr(mine[:2]))

    n = 60
    ev = versus(tap, args, work, "longjmp", [args.capbt, "longjmp", str(n)], 0)
    deep = [e for e in ev if 1100 <= e.size < 1130]
    after = [e for e in ev if e.size == 1003]
    tap.ok(len(deep) == n and all(names(e)[-(e.size - 1100 + 2):] ==
                                  ["jumps"] + ["jump_deep"] * (e.size - 1100 + 1)
                                  for e in deep),
           "longjmp: each allocation under jump_deep as deep as it went", repr(deep[:2]))
    tap.ok(len(after) == n and all(e.frames[-2:] == [("jumps", src, mk["jumps"]),
                                                     ("site_a", src, mk["site_a"])]
                                   for e in after),
           "longjmp: after each jump, main's allocation is jumps > site_a", repr(after[:2]))

    n = 5
    ev = versus(tap, args, work, "signal", [args.capbt, "signal", str(n)], 2 * n)
    handled = [e for e in ev if e.size in (1200, 1201)]
    tap.ok(len(handled) == 2 * n and
           all(names(e)[-1] == "on_signal" and ("raiser", src, mk["raiser"]) in e.frames and
               "signals" in names(e) for e in handled),
           "signal: a handler's allocation (own stack and sigaltstack) goes on past the "
           "signal frame into the interrupted raiser", repr(handled[:2]))

    ev = versus(tap, args, work, "fplib", [args.capbt, "fplib", str(n)], 0)
    tails = {1300: ["fplib", "cap_bt_nofp_through", "mid", "mid", "mid", "sized",
                    "cap_bt_fp_alloc"],
             1301: ["fplib", "cap_bt_fp_through", "mid", "mid", "mid", "sized",
                    "cap_bt_nofp_alloc"],
             1302: ["fplib", "realigned"]}
    bad = [e for e in ev if e.size in tails and names(e)[-len(tails[e.size]):] != tails[e.size]]
    tap.ok(len([e for e in ev if e.size in tails]) == 3 * n and not bad,
           "fplib: through a library with frame pointers and one without, both ways, and a "
           "function realigning its stack", repr(bad[:2]))

    ev = versus(tap, args, work, "deep", [args.capbt, "deep", "100"], 0)
    m = find(ev, "malloc", 1020)
    tap.ok(m is not None and names(m) == ["rec"] * 64,
           "deep: 101 frames of rec, the innermost 64 kept", repr(m))

    n = 500
    ev = versus(tap, args, work, "mixed", [args.capbt, "mixed", str(n)], 0)
    mine = [e for e in ev if 1400 <= e.size < 1500]
    bad = [e for e in mine if names(e)[-((e.size - 1400) % 50 + 2):] !=
           ["mixed_b" if e.size >= 1450 else "mixed_a"] +
           ["rec_mixed"] * ((e.size - 1400) % 50 + 1)]
    tap.ok(len(mine) == n and not bad, "mixed: each allocation at its depth under its caller",
           repr(bad[:2]))

    ev = versus(tap, args, work, "dlcycle",
                [args.capbt, "dlcycle", args.plugin, args.plugin2, "3"], 0)
    tap.ok(len([e for e in ev if e.size in (1500, 1501)]) == 6,
           "dlcycle: a library loaded where another was unloaded, three times")

    versus(tap, args, work, "threads", [args.capbt, "threads", "16"], 0, threads=True)


def backtraces_txt(args, trace):
    """{stack id: [frame lines]} of rank 0's backtraces.txt."""
    rc, out, err = run([args.tracefs, "cat", trace, "ranks/0/backtraces.txt"])
    if rc != 0:
        raise RuntimeError("cat backtraces.txt: " + err.decode(errors="replace"))
    stacks, cur = {}, None
    for line in out.decode().splitlines():
        if line.startswith("stack#"):
            cur = stacks.setdefault(int(line[6:]), [])
        elif cur is not None:
            cur.append(line.strip())
    return stacks


def test_dlswap(tap, args, work, mk, src):
    what = "dlclose, then another library at the same address"
    trace, out = record(args, work, "dlswap", [args.capbt, "dlswap", args.swap_a, args.swap_b])
    bases = out.split()[1:]
    if len(bases) != 3 or len(set(bases)) != 1:
        tap.skip(what, "the loader put them at different addresses: %r" % out)
        return
    ev = dump(args, trace)
    stacks = backtraces_txt(args, trace)
    for size, lib, fruit in ((1601, "a", "apple"), (1602, "b", "banana"),
                             (1603, "a", "apple")):
        f = "cap_bt_swap_%s.c" % lib
        fm = markers(os.path.join(os.path.dirname(args.source), f))
        m = find(ev, "malloc", size)
        tail_is(tap, m, [("dlswap", src, mk["dlswap"]), (fruit, f, fm[fruit]),
                         (fruit + "_alloc", f, fm[fruit + "_alloc"])],
                "%s: malloc(%d) named after %s: dlswap > %s > %s_alloc" %
                (what, size, f, fruit, fruit))
        lines = stacks.get(m.stack, []) if m else []
        want = ["%s (%s:%d)" % (fruit, f, fm[fruit]), "%s_alloc (%s:%d)" %
                (fruit + "", f, fm[fruit + "_alloc"])]
        tap.ok([re.sub(r"\(.*/", "(", x) for x in lines[-2:]] == want,
               "%s: backtraces.txt names malloc(%d)'s stack after %s" % (what, size, f),
               (want, lines))


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--tracefs", "--capbt", "--plugin", "--plugin2", "--swap-a", "--swap-b",
                "--dump", "--source", "--lib"):
        ap.add_argument(opt, required=True)
    args = ap.parse_args()
    for k in ("tracefs", "capbt", "plugin", "plugin2", "swap_a", "swap_b", "dump", "source",
              "lib"):
        setattr(args, k, os.path.abspath(getattr(args, k)))
    mk = markers(args.source)
    src = os.path.basename(args.source)
    tap = Tap()
    with tempfile.TemporaryDirectory(prefix="tfs-bt.") as work:
        for test in (test_known, test_depth, test_threads, test_dlopen, test_loop,
                     test_stress, test_abort, test_inproc, test_versus, test_dlswap):
            try:
                test(tap, args, work, mk, src)
            except Exception as e:  # a crash of the checker is a failure, not an abort
                tap.ok(False, "%s raised %s: %s" % (test.__name__, type(e).__name__, e))
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
