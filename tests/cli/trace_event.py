"""A validator of Chrome trace-event JSON as tracefs writes it (trace.json and its parts).

validate(data, ...) returns a list of problems (empty: valid). It checks what viewers rely on,
from the trace-event format's own rules, independently of tracefs's code:
- the file is one JSON array (at most 256 MiB, what every JavaScript engine loads whole);
- every event has a name, a phase it knows (X, C, i, s, f, M) and integer pid and tid; X,
  C, i, s, f have a number ts written in microseconds with at most three decimals, X a
  number dur >= 0;
- X events nest per (pid, tid): sorted by start (longest first on ties), each one that
  starts inside another ends inside it too (strictly, or within a tolerance for lossy
  times);
- C events have args whose values are all numbers; i events a scope s in g, p, t;
- flows: each id has exactly one s and one f, in that order of time or not, the f binding to
  its enclosing slice (bp "e"), and each end lies inside an X event of its (pid, tid);
- M events name processes and threads with a string.
"""

import bisect
import collections
import json
import re

MAX_PART_BYTES = 256 << 20
PHASES = {"X", "C", "i", "s", "f", "M"}
US = re.compile(rb'"(?:ts|dur)":(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)')


def _microseconds_ok(data):
    """ts and dur numbers are microseconds with at most three decimals (nanoseconds)."""
    bad = []
    for m in US.finditer(data):
        v = m.group(1)
        if b"e" in v.lower() or (b"." in v and len(v.split(b".")[1]) > 3):
            bad.append(v.decode())
            if len(bad) > 3:
                break
    return bad


def x_nesting(events, tolerance_ns=lambda dur: 0):
    """Violations of X nesting per (pid, tid): [(pid, tid, outer, inner)]. Two events that
    overlap without one holding the other are tolerated when their overlap, or the
    difference of their starts, is within tolerance_ns(the time the two span)."""
    by = collections.defaultdict(list)
    for o in events:
        if o.get("ph") == "X":
            ts = round(o["ts"] * 1000)
            by[(o["pid"], o["tid"])].append((ts, round(o["dur"] * 1000), o.get("name")))
    bad = []
    for key, v in by.items():
        v.sort(key=lambda x: (x[0], -x[1]))
        stack = []  # (end, name, dur)
        for ts, dur, name in v:
            while stack and stack[-1][0] <= ts:
                stack.pop()
            if stack and ts + dur > stack[-1][0]:
                # partial overlap: within the tolerance only if they are almost disjoint or
                # almost start together (then the later one holds the earlier)
                end, outer, odur = stack[-1]
                tol = tolerance_ns(max(ts + dur, end) - (end - odur))
                if end - ts > tol and ts - (end - odur) > tol:
                    bad.append((key[0], key[1], outer, name))
            stack.append((ts + dur, name, dur))
    return bad


def _inside_x(spans, pid, tid, ts_ns):
    """Whether an X event of (pid, tid) holds ts_ns."""
    v = spans.get((pid, tid))
    if not v:
        return False
    i = bisect.bisect_right(v[0], ts_ns)
    # any span starting at or before ts_ns that ends at or after it (spans nest: check a few)
    for j in range(i - 1, max(i - 64, -1), -1):
        if v[1][j] >= ts_ns:
            return True
    return False


def validate(data, tolerance_ns=lambda dur: 0, max_bytes=MAX_PART_BYTES):
    """Problems of one trace.json (bytes); [] when valid."""
    problems = []
    if len(data) > max_bytes:
        problems.append("%d bytes, more than %d" % (len(data), max_bytes))
    try:
        arr = json.loads(data)
    except ValueError as e:
        return problems + ["not JSON: %s" % e]
    if not isinstance(arr, list):
        return problems + ["not a JSON array"]
    bad_us = _microseconds_ok(data)
    if bad_us:
        problems.append("times not in microseconds with three decimals: %r" % bad_us)
    flows = collections.defaultdict(list)
    spans = collections.defaultdict(list)
    for k, o in enumerate(arr):
        if not isinstance(o, dict):
            problems.append("event %d is not an object" % k)
            continue
        ph = o.get("ph")
        why = None
        if ph not in PHASES:
            why = "unknown ph %r" % ph
        elif not isinstance(o.get("name"), str):
            why = "no name"
        elif not isinstance(o.get("pid"), int) or not isinstance(o.get("tid"), int):
            why = "pid and tid must be integers"
        elif ph != "M" and not isinstance(o.get("ts"), (int, float)):
            why = "no ts"
        elif ph == "X" and (not isinstance(o.get("dur"), (int, float)) or o["dur"] < 0):
            why = "X without a dur >= 0"
        elif ph == "C" and (not isinstance(o.get("args"), dict) or not o["args"] or
                            not all(isinstance(v, (int, float)) for v in o["args"].values())):
            why = "C args must be numbers"
        elif ph == "i" and o.get("s", "t") not in ("g", "p", "t"):
            why = "i with scope %r" % o.get("s")
        elif ph in ("s", "f") and "id" not in o:
            why = "flow without id"
        elif ph == "f" and o.get("bp") != "e":
            why = "f not bound to its enclosing slice"
        elif ph == "M" and o.get("name") in ("process_name", "thread_name", "process_labels") \
                and not isinstance(o.get("args", {}).get("name"), str):
            why = "M %s without a name" % o.get("name")
        if why:
            problems.append("event %d: %s: %s" % (k, why, json.dumps(o)[:200]))
            if len(problems) > 20:
                return problems
            continue
        if ph in ("s", "f"):
            flows[o["id"]].append(o)
        if ph == "X":
            spans[(o["pid"], o["tid"])].append((round(o["ts"] * 1000),
                                                round((o["ts"] + o["dur"]) * 1000)))
    nest = x_nesting(arr, tolerance_ns)
    if nest:
        problems.append("%d X events overlap without nesting, first %r" % (len(nest), nest[0]))
    index = {}
    for key, v in spans.items():
        v.sort()
        index[key] = ([a for a, _ in v], [b for _, b in v])
    for fid, ends in flows.items():
        phs = sorted(e["ph"] for e in ends)
        if phs != ["f", "s"]:
            problems.append("flow %r has ends %r" % (fid, phs))
            continue
        for e in ends:
            if not _inside_x(index, e["pid"], e["tid"], round(e["ts"] * 1000)):
                problems.append("flow %r: its %s end is inside no X event of its thread" %
                                (fid, e["ph"]))
                break
    return problems


def flows_of(data):
    """{id: (s event, f event)} of a trace.json."""
    out = collections.defaultdict(dict)
    for o in json.loads(data):
        if o.get("ph") in ("s", "f"):
            out[o["id"]][o["ph"]] = o
    return {k: (v.get("s"), v.get("f")) for k, v in out.items()}
