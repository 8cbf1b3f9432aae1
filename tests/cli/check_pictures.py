#!/usr/bin/env python3
"""The pictures of a synth_demo trace against independent computations from its own views.

For each timing and order given, synth_demo writes a trace of 3 ranks x 3 threads; then:
- every trace.json of the tree (root, ranks, threads, phases, the listed windows) and every
  part of trace.json.d/ under a small split size passes trace_event.validate(): fields,
  microseconds, X nesting per thread (lossy times: within twice their error), C events,
  flows, and each part under its size;
- the flows of the root trace.json are exactly the messages matched from events.jsonl
  (per sender, receiver and tag, the n-th send to the n-th receive);
- timeline.svg of the root, each rank and a window parses as XML, has a lane per thread,
  bars with titles naming zones and their durations, an axis with labelled ticks, a legend,
  and stays under 2 MB;
- heap.txt's counts, peak, leaks and lifetime histogram equal a replay of the rank's
  events.jsonl, and leaks.folded sums to the leaked bytes;
- profile.speedscope.json has an evented profile per thread whose frames open and close in
  order, one open per span event of the thread (marks excepted), with frames shared;
- a window's trace.txt holds exactly the lines of its threads whose events start (start
  order) or end (end order) in it.
Output is TAP. Stdlib only.

  check_pictures.py --tracefs T --demo D [--timing none|lossless|lossy:0.1]... [--end-order]
  check_pictures.py --tracefs T --demo D --large N     (timeline.svg sizes on N events)
"""

import argparse
import collections
import heapq
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

import trace_event

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"
SVG_MAX = 2000000


def run(cmd, env=None, timeout=1200):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


class Trace:
    def __init__(self, tracefs, path):
        self.tracefs, self.path = tracefs, path
        self.info = json.loads(self.cat("info.json"))

    def cat(self, p, env=None):
        rc, out, err = run([self.tracefs, "cat", self.path, p], env=env)
        if rc != 0:
            raise RuntimeError("cat %s: %s" % (p, err.decode(errors="replace")))
        return out

    def ls(self, p, env=None):
        rc, out, err = run([self.tracefs, "ls", self.path, p], env=env)
        if rc != 0:
            return []
        return [(l.split()[0] == b"d", l.split(None, 2)[2].decode()) for l in out.splitlines()]

    def events(self, rank, thread=None):
        """(thread, index, event) of a rank's events.jsonl (threads' own order kept)."""
        out = []
        threads = [thread] if thread is not None else self.threads(rank)
        for t in threads:
            lines = self.cat("ranks/%d/threads/%d/events.jsonl" % (rank, t)).splitlines()
            out += [(t, i, json.loads(l)) for i, l in enumerate(lines)]
        return out

    def threads(self, rank):
        return sorted(s["thread"] for s in self.info["streams"] if s["rank"] == rank)

    def ranks(self):
        return sorted({s["rank"] for s in self.info["streams"]})

    def timed(self):
        return self.info["timing"]["mode"] != "none"


def end_of(e):
    return e.get("ts", 0) + e.get("dur", 0)


# ---- trace.json everywhere ----

def all_trace_jsons(trace):
    out = ["trace.json"]
    for r in trace.ranks():
        out.append("ranks/%d/trace.json" % r)
        out += ["ranks/%d/threads/%d/trace.json" % (r, t) for t in trace.threads(r)]
        out += ["ranks/%d/phases/%s/trace.json" % (r, n) for d, n in
                trace.ls("ranks/%d/phases" % r) if d]
        out += ["ranks/%d/window/%s/trace.json" % (r, n) for d, n in
                trace.ls("ranks/%d/window" % r)[:4]]
    out += ["window/%s/trace.json" % n for d, n in trace.ls("window")[:4]]
    return out


def nest_tolerance(trace):
    """Lossy times nest within their error (FORMAT.md §7.4): a start is off by up to err of
    its gap from the previous event's start (for a zone written when it ends, its whole
    duration), an end by err of the duration too; two events' errors add up. So two events
    may overlap, or start apart, by 4 err of the time they span."""
    if trace.info["timing"]["mode"] != "lossy":
        return lambda span: 0
    err = trace.info["timing"]["rel_err"]
    return lambda span: int(4 * err * span) + 4


def check_trace_jsons(tap, trace, label):
    paths = all_trace_jsons(trace)
    bad = {}
    for p in paths:
        probs = trace_event.validate(trace.cat(p), nest_tolerance(trace))
        if probs:
            bad[p] = probs[:3]
    tap.ok(not bad, "%s: %d trace.json files are valid trace-event JSON (fields, units, X "
           "nesting, C, flows)" % (label, len(paths)), json.dumps(bad, indent=1)[:3000])


def check_parts(tap, trace, label):
    split = 200000
    env = dict(os.environ, TRACEFS_JSON_SPLIT_BYTES=str(split))
    n, bad = 0, {}
    for d in ["", "ranks/0/"]:
        for is_dir, name in trace.ls(d + "trace.json.d", env=env):
            data = trace.cat(d + "trace.json.d/" + name, env=env)
            n += 1
            # the event lines fill the split size; a part's tail holds names, phases, flows
            probs = trace_event.validate(data, nest_tolerance(trace), max_bytes=split + 400000)
            if probs:
                bad[d + name] = probs[:3]
    tap.ok(n > 1 and not bad, "%s: %d parts of trace.json.d under a split of %d bytes are "
           "valid and standalone" % (label, n, split), json.dumps(bad)[:2000])


# ---- flows ----

def expected_messages(trace):
    """(send end, recv end) of each matched message, each end (pid, tid, ts_ns of its
    middle): per (source, destination, tag) the n-th send matches the n-th receive."""
    sends, recvs = collections.defaultdict(list), collections.defaultdict(list)
    for r in trace.ranks():
        for t, i, e in trace.events(r):
            a = e["args"]
            mid = e.get("ts", 0) + e.get("dur", 0) // 2 if trace.timed() else i * 1000 + 500
            if e["name"] == "send" and a["dest"] >= 0:
                sends[(r, a["dest"], a["tag"])].append((e.get("ts", i), i, (r, t, mid)))
            if e["name"] == "recv" and a["src"] >= 0:
                recvs[(a["src"], r, a["tag"])].append((e.get("ts", i), i, (r, t, mid)))
    pairs = set()
    for ch, v in sends.items():
        got = sorted(recvs.get(ch, []))
        for s, rv in zip(sorted(v), got):
            pairs.add((s[2], rv[2]))
    return pairs


def check_flows(tap, trace, label):
    flows = trace_event.flows_of(trace.cat("trace.json"))
    got = set()
    for s, f in flows.values():
        if s and f and s.get("cat") == "mpi":
            got.add(((s["pid"], s["tid"], round(s["ts"] * 1000)),
                     (f["pid"], f["tid"], round(f["ts"] * 1000))))
    want = expected_messages(trace)
    tap.ok(got == want and len(want) > 0,
           "%s: one flow per matched send and receive (%d messages)" % (label, len(want)),
           "missing %r\nextra %r" % (sorted(want - got)[:3], sorted(got - want)[:3]))


# ---- timeline.svg ----

def check_svg(tap, trace, path, n_lanes, zone_names, label):
    data = trace.cat(path)
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        tap.ok(False, "%s: %s parses as XML" % (label, path), e)
        return
    lanes = [g for g in root.iter(SVG + "g") if g.get("class") == "lane"]
    bars = [r for g in lanes for r in g.iter(SVG + "rect")
            if (r.get("class") or "").split()[0:1] in (["b"], ["m"])]
    titles = [r.findtext(SVG + "title") or "" for r in bars]
    axis = [g for g in root.iter(SVG + "g") if g.get("class") == "axis"]
    ticks = [t.text for g in axis for t in g.iter(SVG + "text")]
    legend = [g for g in root.iter(SVG + "g") if g.get("class") == "legend"]
    named = [t for t in titles if any(t.startswith(z + " ") for z in zone_names)]
    timed = re.compile(r"[0-9.]+ (ns|us|ms|s|events?)( busy| covered)?$")
    ok = (len(lanes) == n_lanes and all(len(list(g.iter(SVG + "rect"))) > 1 for g in lanes)
          and len(bars) > 0 and all(timed.search(t) for t in titles) and len(named) > 0
          and len(axis) == 1 and len(ticks) >= 3 and all(ticks) and len(legend) == 1
          and len(data) < SVG_MAX)
    tap.ok(ok, "%s: %s: %d lanes, %d bars (%d zones by name), %d ticks, legend, %d bytes" %
           (label, path, len(lanes), len(bars), len(named), len(ticks), len(data)),
           "lanes %d want %d, titles %r, ticks %r" % (len(lanes), n_lanes, titles[:5],
                                                      ticks[:5]))


def check_svgs(tap, trace, label):
    zones = set()
    for t, i, e in trace.events(0):
        if e["name"] == "zone":
            zones.add(e["args"]["name"])
    zones = {z for z in zones if all(0x20 <= ord(c) < 0x7f and c not in "&<>\"\\" for c in z)}
    n_all = len(trace.info["streams"])
    check_svg(tap, trace, "timeline.svg", n_all, zones, label)
    for r in trace.ranks():
        check_svg(tap, trace, "ranks/%d/timeline.svg" % r, len(trace.threads(r)), zones,
                  label)
    win = trace.ls("ranks/0/window")
    path = "ranks/0/window/%s/timeline.svg" % win[0][1]
    data = trace.cat(path)
    ok = True
    try:
        lanes = [g for g in ET.fromstring(data).iter(SVG + "g") if g.get("class") == "lane"]
    except ET.ParseError:
        ok, lanes = False, []
    tap.ok(ok and 0 < len(lanes) <= len(trace.threads(0)) and len(data) < SVG_MAX,
           "%s: %s: %d lanes" % (label, path, len(lanes)))


# ---- heap.txt ----

def replay_heap(trace, rank):
    """The rules of heap.txt, from events.jsonl: the malloc family (allocation kinds but
    mappings), blocks known by their id, else their address; the rank's threads in the order
    their calls end (untimed: thread after thread); temporary: freed, or realloc'd in place,
    with no other heap call between; lifetimes of freed blocks (a realloc in place ends its
    block and makes another) from the end of the call that made one to the end of the call
    that freed it, untimed in heap calls, per log2 bucket: blocks and bytes."""
    evs = []
    for t, i, e in trace.events(rank):
        if e["name"] in ("malloc", "calloc", "realloc", "free", "aligned_alloc",
                         "posix_memalign", "memalign"):
            evs.append((end_of(e) if trace.timed() else 0, t, i, e))
    if trace.timed():
        # each thread's heap calls end in order; merge threads by end, then thread
        by_t = collections.defaultdict(list)
        for x in evs:
            by_t[x[1]].append(x)
        evs = list(heapq.merge(*[by_t[t] for t in sorted(by_t)], key=lambda x: (x[0], x[1])))
    live, live_bytes, born = {}, 0, {}
    st = dict(n_alloc=0, alloc_bytes=0, n_free=0, unknown=0, temp=0, peak=0, peak_blocks=0)
    life = collections.defaultdict(lambda: [0, 0])
    last = None

    def died(key, now):
        k = max(0, now - born[key]).bit_length()
        life[k][0] += 1
        life[k][1] += live[key]

    for step, (_, t, i, e) in enumerate(evs):
        a = e["args"]
        now = end_of(e) if trace.timed() else step
        # §9: the result is "result" and a hex value a number
        addr = a.get("result", 0) if e["name"] != "free" else 0
        ident = a.get("id", 0)
        if e["name"] in ("free", "realloc"):
            old = ident if e["name"] == "free" else a.get("freed", 0)
            if not ident:
                old = a.get("ptr", 0)
            if e["name"] == "realloc" and not addr and a.get("size"):
                continue
            if old:
                st["n_free"] += 1
                if old in live:
                    if last == old:
                        st["temp"] += 1
                    died(old, now)
                    live_bytes -= live.pop(old)
                else:
                    st["unknown"] += 1
            elif e["name"] == "realloc" and ident and last == ident:
                st["temp"] += 1  # in place: heaptrack counts the block just made as freed
            last = None
            if e["name"] == "free":
                continue
        if not addr:
            continue
        key = ident or addr
        size = a.get("size", 0) * a.get("nmemb", 1)
        st["n_alloc"] += 1
        st["alloc_bytes"] += size
        if key in live:
            if e["name"] == "realloc" and ident:
                died(key, now)
            live_bytes -= live.pop(key)
        live[key] = size
        born[key] = now
        live_bytes += size
        last = key
        if live_bytes > st["peak"]:
            st["peak"], st["peak_blocks"] = live_bytes, len(live)
    st["leaked"], st["leaked_blocks"] = live_bytes, len(live)
    st["lifetimes"] = dict(life)
    return st


def parse_heap(text):
    out = {}
    for pat, keys in ((r"allocations (\d+) calls, (\d+) bytes", ("n_alloc", "alloc_bytes")),
                      (r"frees (\d+) calls \((\d+) of", ("n_free", "unknown")),
                      (r"temporary (\d+) allocations", ("temp",)),
                      (r"peak (\d+) bytes in (\d+) blocks", ("peak", "peak_blocks")),
                      (r"leaked (\d+) bytes in (\d+) blocks", ("leaked", "leaked_blocks"))):
        m = re.search(pat, text)
        if m:
            out.update({k: int(v) for k, v in zip(keys, m.groups())})
    out["lifetimes"] = {}
    for m in re.finditer(r"^lifetime +(\d+) +(\d+) +(\d+) +(\d+)$", text, re.M):
        lo, hi, blocks, size = map(int, m.groups())
        k = lo.bit_length()
        out["lifetimes"][k if hi == (1 << k if k < 64 else (1 << 64) - 1) else -1] = \
            [blocks, size]
    return out


def check_heap(tap, trace, label):
    for r in trace.ranks():
        got = parse_heap(trace.cat("ranks/%d/heap.txt" % r).decode())
        want = replay_heap(trace, r)
        tap.ok(got == want, "%s: ranks/%d/heap.txt: %d allocations, peak %d bytes, %d "
               "leaked, as a replay of events.jsonl" % (label, r, want["n_alloc"],
                                                       want["peak"], want["leaked"]),
               "got  %r\nwant %r" % (got, want))
        folded = trace.cat("ranks/%d/leaks.folded" % r).decode().splitlines()
        total = sum(int(l.rsplit(" ", 1)[1]) for l in folded)
        tap.ok(total == want["leaked"] and folded == sorted(folded),
               "%s: ranks/%d/leaks.folded: %d stacks summing to the leaked bytes" %
               (label, r, len(folded)), "%d vs %d" % (total, want["leaked"]))


# ---- profile.speedscope.json ----

def check_speedscope(tap, trace, label):
    for r in trace.ranks():
        d = json.loads(trace.cat("ranks/%d/profile.speedscope.json" % r))
        frames = [f["name"] for f in d["shared"]["frames"]]
        evented = [p for p in d["profiles"] if p["type"] == "evented"]
        bad = None
        if len(evented) != len(trace.threads(r)) or len(set(frames)) != len(frames):
            bad = "%d profiles, %d frames (%d distinct)" % (len(evented), len(frames),
                                                          len(set(frames)))
        for p, t in zip(evented, trace.threads(r)):
            stack, last, opens = [], None, 0
            for e in p["events"]:
                if last is not None and e["at"] < last:
                    bad = "thread %d: at goes back at %r" % (t, e)
                    break
                last = e["at"]
                if e["type"] == "O":
                    stack.append(e["frame"])
                    opens += 1
                elif not stack or stack.pop() != e["frame"]:
                    bad = "thread %d: %r closes what is not open" % (t, e)
                    break
            spans = sum(1 for _, _, e in trace.events(r, t) if e["name"] != "mark")
            if bad is None and (stack or opens != spans):
                bad = "thread %d: %d opens for %d events, %d left open" % (t, opens, spans,
                                                                        len(stack))
            if bad:
                break
        unit = "nanoseconds" if trace.timed() else "none"
        tap.ok(bad is None and all(p["unit"] == unit for p in evented),
               "%s: ranks/%d/profile.speedscope.json: %d threads nest, %d shared frames" %
               (label, r, len(evented), len(frames)), bad)


# ---- windows ----

def check_windows(tap, trace, label, end_order):
    wins = [n for d, n in trace.ls("ranks/1/window") if d][4:7]
    wins.append("%d-%d" % (3 * 10 ** 6, 4 * 10 ** 6) if trace.timed() else "100-400")
    for w in wins:
        a, b = (int(x) for x in w.split("-"))
        want = []
        for t in trace.threads(1):
            lines = trace.cat("ranks/1/threads/%d/trace.txt" % t).splitlines(True)
            for (_, i, e), line in zip(trace.events(1, t), lines):
                key = (end_of(e) if end_order else e["ts"]) if trace.timed() else i
                if a <= key < b:
                    want.append(line)
        got = trace.cat("ranks/1/window/%s/trace.txt" % w).splitlines(True)
        tap.ok(sorted(got) == sorted(want), "%s: ranks/1/window/%s/trace.txt holds the %d "
               "lines of events %s in it" % (label, w, len(want),
                                             "ending" if end_order else "starting"),
               "%d lines vs %d" % (len(got), len(want)))
    unit = trace.cat("window/0.5ms-1.5ms/trace.txt") if trace.timed() else None
    if unit is not None:
        tap.ok(unit == trace.cat("window/500000-1500000/trace.txt"),
               "%s: window/0.5ms-1.5ms is window/500000-1500000" % label)


def one(args, tap, work, timing, end_order):
    label = "%s%s" % (timing, ", end order" if end_order else "")
    path = os.path.join(work, "p-%s-%d.trace" % (timing.replace(":", ""), end_order))
    cmd = [args.demo, "-o", path, "--events", str(args.events), "--timing", timing,
           "--ranks", "3", "--threads", "3", "--seed", "11"]
    rc, _, err = run(cmd + (["--end-order"] if end_order else []))
    if not tap.ok(rc == 0, "%s: synth_demo writes the trace" % label, err):
        return
    trace = Trace(args.tracefs, path)
    check_trace_jsons(tap, trace, label)
    check_parts(tap, trace, label)
    check_flows(tap, trace, label)
    check_svgs(tap, trace, label)
    check_heap(tap, trace, label)
    check_speedscope(tap, trace, label)
    check_windows(tap, trace, label, end_order)


def large(args, tap, work):
    """timeline.svg stays under 2 MB on a long trace."""
    path = os.path.join(work, "large.trace")
    rc, _, err = run([args.demo, "-o", path, "--events", str(args.large), "--ranks", "2",
                      "--threads", "4", "--end-order"], timeout=3000)
    if not tap.ok(rc == 0, "synth_demo --events %d" % args.large, err):
        return
    for p in ("timeline.svg", "ranks/0/timeline.svg", "ranks/1/window/0-1000000/timeline.svg"):
        rc, out, err = run([args.tracefs, "cat", path, p], timeout=3000)
        ok = rc == 0
        try:
            ET.fromstring(out)
        except ET.ParseError:
            ok = False
        tap.ok(ok and len(out) < SVG_MAX, "%d events: %s is XML of %d bytes, under %d" %
               (args.large, p, len(out), SVG_MAX), err)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--demo", required=True)
    ap.add_argument("--timing", action="append")
    ap.add_argument("--end-order", action="store_true")
    ap.add_argument("--events", type=int, default=30000)
    ap.add_argument("--large", type=int, default=0)
    args = ap.parse_args()
    tap = Tap()
    work = tempfile.mkdtemp(prefix="tfs-pictures-")
    try:
        if args.large:
            large(args, tap, work)
        else:
            for timing in args.timing or ["lossless"]:
                one(args, tap, work, timing, args.end_order)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
