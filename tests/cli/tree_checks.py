"""Checks of the composite and computed files of the virtual tree, for check_cli.py.

From synth_demo's --dump alone (and, for lossy timing, the per-thread times the thread views
were already checked to hold), this computes what every rank, phase and root file must say:
merged trace.txt / events.jsonl (lines of all threads by start, or end, time), trace.json (one
"X" event per dumped event, metadata, phases), summary.txt, signatures.txt, grammar.txt
headers, stacks.folded, backtraces.txt, allocs.folded and files.txt (the last from the rank's
events.jsonl as tracefs serves it, after that was checked); then compares with `tracefs cat`
and `tracefs ls`, and has
vtree_slices read random slices of the merged and composite files. No tracefs code is
reused: the rules come from README.txt and FORMAT.md §9.
"""

import collections
import heapq
import json
import os
import random
import re
import subprocess

TYPE_U64, TYPE_I64, TYPE_HEX, TYPE_STR = 0, 1, 2, 3
ENC_SIG, ENC_SYM, ENC_RANK, ENC_VAL, ENC_STR = 0, 1, 2, 3, 4
ARG_BYTES, ARG_ATTACH, ARG_INPUT, ARG_OUTPUT = 2, 4, 8, 16
SYM_NONE = 0xffffffff
TIMING_NONE, TIMING_LOSSLESS, TIMING_LOSSY = 0, 1, 2
TIMING_NAMES = ["none", "lossless", "lossy"]
WINDOW_FILES = (b"trace.json", b"trace.txt", b"timeline.svg")
CALL_FILES = (b"trace.txt", b"events.jsonl")
# the call's name in a trace.txt line: after the times (when timed) and the thread
TEXT_CALL = re.compile(rb"^[ 0-9.]*T[0-9]+ +([^ (]+)\(")


# ---- FORMAT.md §9.1, the escapes of every string and name ----

def utf8_len(b, i):
    """Bytes of the valid UTF-8 sequence of 2 to 4 bytes at b[i] (RFC 3629), else 0."""
    try:
        for k in (2, 3, 4):
            if i + k <= len(b):
                b[i:i + k].decode("utf-8")
                return k
    except UnicodeDecodeError:
        pass
    return 0


def escape(b, json_view, also=b""):
    """§9.1 (2.2): printable ASCII but '"' and '\\' as is, valid UTF-8 as is (the text view
    escapes C1 controls), C escapes; other bytes \\xHH in text, \\u00XX (controls, DEL) or
    \\ufffd (a byte of no UTF-8) in JSON. The text view writes the
    bytes of @also \\xHH too ('>' in an attached name, ';' in a folded stack)."""
    out = bytearray()
    i = 0
    while i < len(b):
        c = b[i]
        k = utf8_len(b, i) if c >= 0x80 else 0
        if k and (json_view or not (c == 0xc2 and b[i + 1] < 0xa0)):
            out += b[i:i + k]
            i += k
            continue
        i += 1
        if c in (0x22, 0x5c):
            out += b"\\" + bytes([c])
        elif c == 0x0a:
            out += b"\\n"
        elif c == 0x09:
            out += b"\\t"
        elif c == 0x0d:
            out += b"\\r"
        elif 0x20 <= c <= 0x7e and (json_view or c not in also):
            out.append(c)
        elif not json_view:
            out += b"\\x%02x" % c
        else:
            out += b"\\ufffd" if c >= 0x80 else b"\\u%04x" % c
    return bytes(out)


def json_str(b):
    """The string a JSON reader gets for bytes @b (§9.1): U+FFFD for each byte of no UTF-8."""
    return re.sub("[\udc80-\udcff]", "\ufffd", b.decode("utf-8", "surrogateescape"))


class Seg:
    def __init__(self, rank, thread, first, n):
        self.rank, self.thread, self.first, self.n = rank, thread, first, n


class Scope:
    """Event ranges (one per thread, by rank then thread) and phase indices (rank, index)."""

    def __init__(self, label, segs, phases):
        self.label = label
        self.segs = sorted(segs, key=lambda s: (s.rank, s.thread))
        self.phases = phases


def is_zone(kind):
    a = kind["args"]
    return bool(a) and a[0]["enc"] == ENC_STR and a[0]["name"] == "name"


def is_alloc(kind):
    return kind["category"] == "alloc" and any(a["flags"] & ARG_BYTES for a in kind["args"])


def is_heap(kind):
    """The malloc family (README.txt, heap.txt): allocation kinds but the mappings."""
    return (kind["category"] == "alloc" and kind["name"] not in ("mmap", "mmap64", "munmap",
                                                                  "mremap"))


def event_bytes(kind, e):
    total = 0
    for a, v in zip(kind["args"], e[3]):
        if a["flags"] & ARG_BYTES and a["type"] != TYPE_STR:
            total += max(v, 0) if a["type"] == TYPE_I64 else v
    return total


class Tree:
    """The expected tree of one trace, from the model (check_cli.Model) and info.json."""

    def __init__(self, model, info, times, listed, text_escape):
        self.m = model
        self.info = info
        self.times = times  # (rank, thread) -> [(ts, dur)] as the trace holds them
        self.text_escape = text_escape
        # an event's line and trace.json arguments, rendered once: the scopes (the whole
        # trace, ranks, phases, windows) show the same events again and again
        self.lines = {}  # (view, rank, thread, index) -> the model's line
        self.jargs = {}  # (rank, kind, ph, args) -> chrome_args()
        self.phases = info["phases"]
        self.phase_dir = {}
        # info.json has a directory's name as the JSON views have strings (§9.1)
        dirs = {}  # (rank, the name as info.json has it) -> the name
        for k in listed:
            m = re.match(rb"ranks/(\d+)/phases/([^/]+)/", k)
            if m:
                dirs[(int(m.group(1)), json_str(m.group(2)))] = m.group(2)
        for i, p in enumerate(self.phases):
            if (p["rank"], p["dir"]) in dirs:
                self.phase_dir[i] = dirs[(p["rank"], p["dir"])]
        self.max_thread = max(t for _, t in model.streams)
        self.scopes = {}  # directory path (bytes) -> (Scope, with profiles)
        streams = sorted(model.streams)
        by_rank = collections.defaultdict(list)
        for i, p in enumerate(self.phases):
            by_rank[p["rank"]].append(i)
        full = {k: Seg(k[0], k[1], 0, len(model.streams[k])) for k in streams}
        all_phases = [i for r in sorted(by_rank) for i in by_rank[r]]
        self.scopes[b""] = (Scope("the whole trace", full.values(), all_phases), True)
        for r in sorted({r for r, _ in streams}):
            segs = [full[k] for k in streams if k[0] == r]
            self.scopes[b"ranks/%d" % r] = (Scope("rank %d" % r, segs, by_rank[r]), True)
        for (r, t) in streams:
            ph = [i for i in by_rank[r] if self.phases[i]["thread"] == t]
            self.scopes[b"ranks/%d/threads/%d" % (r, t)] = (
                Scope("", [full[(r, t)]], ph), False)
        groups = collections.defaultdict(list)
        for i, p in enumerate(self.phases):
            groups[(p["rank"], self.phase_dir[i])].append(i)
        for (r, d), idx in groups.items():
            segs = [Seg(r, self.phases[i]["thread"], self.phases[i]["first_event"],
                        self.phases[i]["events"]) for i in idx]
            label = b"rank %d phase directory " % r + d
            self.scopes[b"ranks/%d/phases/%s" % (r, d)] = (Scope(label, segs, idx), True)
            for i, s in zip(idx, segs):
                self.scopes[b"ranks/%d/phases/%s/threads/%d" % (r, d, s.thread)] = (
                    Scope("", [s], [i]), False)

    def files(self):
        """Every file the tree must hold (without trace.json.d)."""
        out = {b"README.txt", b"info.json", b"summary.txt", b"signatures.txt",
               b"grammar.txt", b"events.jsonl", b"trace.json", b"timeline.svg",
               b"replay/README.txt", b"replay/proxy.c"}
        heap = any(is_heap(k) for k in self.m.kinds.values())
        out.update(b"window/%s/%s" % (w, f) for w in self.window_names(None)
                   for f in WINDOW_FILES)
        for r in {r for r, _ in self.m.streams}:
            out.update((b"ranks/%d/timeline.svg" % r, b"ranks/%d/profile.speedscope.json" % r))
            out.update(b"ranks/%d/window/%s/%s" % (r, w, f) for w in self.window_names(r)
                       for f in WINDOW_FILES)
            if heap:
                out.update((b"ranks/%d/heap.txt" % r, b"ranks/%d/leaks.folded" % r))
        for d, (_, profiles) in self.scopes.items():
            if not d:
                continue
            names = [b"trace.txt", b"events.jsonl", b"trace.json"]
            if profiles:
                names += [b"summary.txt", b"stacks.folded"]
            out.update(d + b"/" + n for n in names)
        for d, call in self.calls():
            out.update(b"%s/calls/%s/%s" % (d, call, f) for f in CALL_FILES)
        for r in self.m.backtraces:
            if b"ranks/%d" % r in self.scopes:
                out.update((b"ranks/%d/backtraces.txt" % r, b"ranks/%d/allocs.folded" % r))
        if any(file_args(k) for k in self.m.kinds.values()):
            out.update(b"ranks/%d/files.txt" % r for r in {r for r, _ in self.m.streams})
        return out

    def calls(self):
        """(directory, kind name) of every calls/<name>/ the tree must hold: each kind with
        events in a scope (under a time-merged trace.txt too)."""
        out = []
        for d, (sc, _) in self.scopes.items():
            if not d:
                continue
            names = {e[0] for s in sc.segs
                     for e in self.m.streams[(s.rank, s.thread)][s.first:s.first + s.n]}
            out += [(d, n.encode()) for n in sorted(names)]
        return out

    def window_names(self, rank):
        """window/ of the root (rank None) or a rank lists the quarters and sixteenths of
        the time up to the directory's last event, 16 units at least: [0, its largest key +
        1), the key an
        event is cut by (its start, or its end in end order), or without timing [0, most
        events of a thread); with lossy times [0, max_ts_ns + max_dur_ns + 1). (That was
        every directory's: the largest start plus the longest call, up to twice the run, its
        last windows empty.)"""
        if self.m.timing == TIMING_NONE:
            span = max(len(v) for (r, _), v in self.m.streams.items()
                       if rank is None or r == rank)
        elif self.m.timing == TIMING_LOSSY:
            # lossy times keep no order within their error: the bound every event is under
            span = self.info["timing"]["max_ts_ns"] + self.info["timing"]["max_dur_ns"] + 1
        else:
            by_end = self.info.get("meta", {}).get("event_order") == "end"
            span = 1 + max((ts + dur if by_end else ts)
                           for (r, _), v in self.times.items() if rank is None or r == rank
                           for ts, dur in v)
        # at least 16 units, so that the twenty listed are twenty different windows
        span = max(span, 16)
        names = []
        for parts in (4, 16):
            for i in range(parts):
                names.append(b"%d-%d" % (span * i // parts, span * (i + 1) // parts))
        return names

    def event(self, rank, thread, i):
        e = self.m.streams[(rank, thread)][i]
        ts, dur = self.times[(rank, thread)][i]
        return (e[0], ts, dur, e[3])

    # ---- merged views ----

    def merged(self, sc, view):
        """README.txt: by end time when the metadata says event_order=end, else by start
        time; an event's key is the largest such time of its range up to it."""
        render = self.m.text_line if view == "trace.txt" else self.m.json_line
        times = [self.times[(s.rank, s.thread)][s.first:s.first + s.n] for s in sc.segs]
        by_end = self.info.get("meta", {}).get("event_order") == "end"
        lines = []
        for k, s in enumerate(sc.segs):
            key = 0
            for j, (ts, dur) in enumerate(times[k]):
                key = max(key, ts + dur if by_end else ts)
                lines.append((key, k, j, s.first + j))
        if self.m.timing != TIMING_NONE:
            lines.sort()
        out = []
        for _, k, _, i in lines:
            rank, thread = sc.segs[k].rank, sc.segs[k].thread
            key = (view, rank, thread, i)
            line = self.lines.get(key)
            if line is None:
                line = self.lines[key] = render(rank, thread, self.event(rank, thread, i))
            out.append(line)
        return b"".join(out)

    # ---- summary.txt ----

    def summary(self, sc):
        rows = {}
        for s in sc.segs:
            for i in range(s.first, s.first + s.n):
                kind_name, ts, dur, args = self.event(s.rank, s.thread, i)
                kind = self.m.kinds[kind_name]
                b = event_bytes(kind, (kind_name, ts, dur, args))
                keys = [(b"kind", kind["bname"])]
                if is_zone(kind):
                    keys.append((b"zone", kind["bname"] + b" " + self.text_escape(args[0])))
                for key in keys:
                    r = rows.setdefault(key, [0, 0, 0, False])
                    r[0] += 1
                    r[1] += dur
                    r[2] += b
                    r[3] = r[3] or dur > 0
        n = sum(s.n for s in sc.segs)
        label = sc.label.encode() if isinstance(sc.label, str) else sc.label
        out = [b"# summary of %s: %d events, timing %s\n" % (label, n,
                                                            TIMING_NAMES[self.m.timing].encode()),
               b"# per event kind and per zone name, largest total duration first;\n"
               b"# durations in ns (mean rounded down; - when no event of the row has one),"
               b" bytes: sum of the arguments that count bytes\n",
               b"#%-4s %14s %18s %14s %18s  %s\n" % (b"what", b"count", b"total_ns",
                                                    b"mean_ns", b"bytes", b"name")]
        for (what, name), (c, tot, b, timed) in sorted(
                rows.items(), key=lambda kv: (-kv[1][1], kv[0][0], kv[0][1])):
            if timed:
                out.append(b"%-5s %14d %18d %14d %18d  %s\n" % (what, c, tot, tot // c, b, name))
            else:
                out.append(b"%-5s %14d %18s %14s %18d  %s\n" % (what, c, b"-", b"-", b, name))
        return b"".join(out)

    # ---- stacks.folded ----

    def frame(self, name):
        return self.text_escape(name)[1:-1].replace(b";", b"\\x3b")

    def stacks(self, sc):
        """README.txt: for a rank with backtraces, every event of the range counts 1 at its
        backtrace (folded as allocs.folded folds it), else an allocation counts its bytes;
        either lies in every zone of its thread, listed anywhere in the stream, with zone
        start <= its start < zone end and its end <= zone end (a zone in itself); frames
        outermost first (start, then longest, then stream order) after the backtrace's."""
        total = collections.Counter()
        for s in sc.segs:
            root = b"rank %d;thread %d" % (s.rank, s.thread)
            counting = s.rank in self.m.backtraces
            zones, items = [], []
            for i in range(len(self.m.streams[(s.rank, s.thread)])):
                kind_name, ts, dur, args = self.event(s.rank, s.thread, i)
                kind = self.m.kinds[kind_name]
                if is_zone(kind):
                    zones.append((ts, ts + dur, i, args[0]))
                if not s.first <= i < s.first + s.n:
                    continue
                if counting:
                    at = [j for j, a in enumerate(kind["args"])
                          if a["enc"] == ENC_SYM and a["sym_class"] == "stack"]
                    pre = root + (b";" + self.m.fold(s.rank, args[at[0]]) if at else b"")
                    items.append((ts, ts + dur, 1, pre))
                elif is_alloc(kind):
                    items.append((ts, ts + dur,
                                  event_bytes(kind, (kind_name, ts, dur, args)), root))
            zones.sort()
            items.sort()
            live, z = [], 0
            for ts, end, b, pre in items:
                while z < len(zones) and zones[z][0] <= ts:
                    live.append(zones[z])
                    z += 1
                live = [x for x in live if x[1] > ts]
                act = sorted((x for x in live if end <= x[1]), key=lambda x: (x[0], -x[1], x[2]))
                total[pre + b"".join(b";" + self.frame(x[3]) for x in act)] += b
        return b"".join(b"%s %d\n" % (k, v) for k, v in sorted(total.items()) if v > 0)

    # ---- trace.json ----

    def chrome_args(self, rank, kind_name, args, ph):
        """FORMAT.md §9: a counter's value; else the arguments of the signature (no VAL, a
        buffer counted VAL when its offset is) but the string naming the event, printed as
        in the JSON lines view."""
        kind = self.m.kinds[kind_name]
        ka = kind["args"]
        vals = self.m.values(rank, (kind_name, 0, 0, args), True)
        out = {}
        for i, n, v in self.m.json_members(kind, vals):
            pair = self.m.buf_pair(ka, i)
            varies = ka[i]["enc"] == ENC_VAL or (pair and ka[i + 1]["enc"] == ENC_VAL)
            if ph == "C":
                keep = i == 1
            else:
                keep = not varies and not (i == 0 and (is_zone(kind) or ph == "i"))
            if keep:
                out[json.loads(n)] = json.loads(v)
        return out

    def chrome_shape(self, kind):
        """FORMAT.md §9: "C" for a counter (STR name, VAL value), "i" for a mark (first
        argument a STR message), "X" for the rest."""
        a = kind["args"]
        if (len(a) == 2 and is_zone(kind) and a[1]["enc"] == ENC_VAL
                and a[1]["type"] != TYPE_STR and a[1]["name"] == "value"):
            return "C"
        if a and a[0]["enc"] == ENC_STR and a[0]["name"] == "message":
            return "i"
        return "X"

    def chrome_events(self, sc):
        """(name, cat, ph, ts_ns, dur_ns, pid, tid, args) of every event, in file order;
        args hold the arguments of the signature (no VAL), a counter's its value."""
        out = []
        for s in sc.segs:
            for i in range(s.first, s.first + s.n):
                kind_name, ts, dur, args = self.event(s.rank, s.thread, i)
                kind = self.m.kinds[kind_name]
                ph = self.chrome_shape(kind)
                name = (json_str(args[0])
                        if is_zone(kind) or ph == "i" else kind_name)
                if self.m.timing == TIMING_NONE:
                    ts, dur = i * 1000, 1000
                if ph != "X":
                    dur = None
                key = (s.rank, kind_name, ph,
                       tuple((v, getattr(v, "ranked", None)) for v in args))
                jargs = self.jargs.get(key)
                if jargs is None:
                    jargs = self.jargs[key] = self.chrome_args(s.rank, kind_name, args, ph)
                out.append((name, kind["category"], ph, ts, dur, s.rank, s.thread, jargs))
        return out

    def thread_label(self, t):
        return "thread %d" % t

    def rank_phases(self, sc, r):
        """The rank's phases with their extents, each on the first track of its thread where
        it nests, sorted by thread, start, longest first."""
        ps = []
        for i in sc.phases:
            p = self.phases[i]
            if p["rank"] != r or p["events"] == 0:
                continue
            f, n = p["first_event"], p["events"]
            if self.m.timing == TIMING_NONE:
                ts, dur = f * 1000, n * 1000
            else:
                key = (r, p["thread"])
                ts = self.times[key][f][0]
                dur = max(sum(self.times[key][f + n - 1]) - ts, 0)
            ps.append([p["thread"], ts, dur, i, 0])
        ps.sort(key=lambda x: (x[0], x[1], -x[2], x[3]))
        tracks = {}
        for x in ps:
            stacks = tracks.setdefault(x[0], [])
            end = x[1] + x[2]
            for k in range(64):
                if k == len(stacks):
                    stacks.append([])
                st = stacks[k]
                while st and st[-1] <= x[1]:
                    st.pop()
                if (not st or st[-1] >= end) and len(st) < 16 or k == 63:
                    break
            if len(st) < 16:
                st.append(end)
            x[4] = k
        return ps

    def chrome_meta(self, sc, phases=True):
        """The tail's names, thread order and phases (without heap counters and flows)."""
        out = []
        ranks = []
        stride = self.max_thread + 1
        for s in sc.segs:
            if s.rank not in ranks:
                ranks.append(s.rank)
        for r in ranks:
            out.append({"name": "process_name", "ph": "M", "pid": r, "tid": 0,
                        "args": {"name": "rank %d" % r}})
            if self.m.timing == TIMING_NONE:
                out.append({"name": "process_labels", "ph": "M", "pid": r, "tid": 0,
                            "args": {"name": "untimed: synthetic clock, 1 us per event in "
                                             "recorded order"}})
            for s in sc.segs:
                if s.rank == r:
                    out.append({"name": "thread_name", "ph": "M", "pid": r, "tid": s.thread,
                                "args": {"name": self.thread_label(s.thread)}})
                    out.append({"name": "thread_sort_index", "ph": "M", "pid": r,
                                "tid": s.thread, "args": {"sort_index": s.thread * 65}})
            if not phases:
                continue
            ps = self.rank_phases(sc, r)
            named = set()
            for t, ts, dur, i, lvl in ps:
                if (t, lvl) in named:
                    continue
                named.add((t, lvl))
                name = self.thread_label(t) + (": phases %d" % (lvl + 1) if lvl else ": phases")
                tid = stride + lvl * stride + t
                out.append({"name": "thread_name", "ph": "M", "pid": r, "tid": tid,
                            "args": {"name": name}})
                out.append({"name": "thread_sort_index", "ph": "M", "pid": r, "tid": tid,
                            "args": {"sort_index": t * 65 + 1 + lvl}})
            for t, ts, dur, i, lvl in ps:
                p = self.phases[i]
                out.append({"name": p["name"], "cat": "phase", "ph": "X", "ts": ts,
                            "dur": dur, "pid": r, "tid": stride + lvl * stride + t,
                            "args": {"phase": i, "thread": t, "first_event": p["first_event"],
                                     "events": p["events"]}})
        return out


def ns(us):
    return int(round(us * 1000))


def check_chrome(tap, tree, sc, data, path, phases=True):
    """trace.json: valid JSON; its event lines, metadata and phases as the scope says (the
    heap counters and flows of the tail are checked by check_pictures.py)."""
    try:
        arr = json.loads(data)
    except ValueError as e:
        tap.ok(False, "%s parses with json.loads" % path, e)
        return None
    ok = data.startswith(b"[\n") and data.endswith(b"]\n") and isinstance(arr, list)
    want = tree.chrome_events(sc)
    events = arr[:len(want)]
    rest = [o for o in arr[len(want):] if o.get("ph") not in ("s", "f")
            and not (o.get("ph") == "C" and o.get("name") == "heap")]
    got = [(o.get("name"), o.get("cat"), o.get("ph"), ns(o["ts"]),
            ns(o["dur"]) if "dur" in o else None, o.get("pid"), o.get("tid"), o.get("args"))
           for o in events]
    for o in rest:
        if o.get("ph") == "X":
            o["ts"], o["dur"] = ns(o["ts"]), ns(o["dur"])
    meta = tree.chrome_meta(sc, phases)
    bad = None
    if got != want:
        k = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                 min(len(got), len(want)))
        bad = "event %d of %d/%d: got %r\nwant %r" % (k, len(got), len(want),
                                                       got[k:k + 1], want[k:k + 1])
    elif rest != meta:
        k = next((i for i in range(min(len(rest), len(meta))) if rest[i] != meta[i]),
                 min(len(rest), len(meta)))
        bad = "metadata/phases differ at %d:\ngot  %r\nwant %r" % (k, rest[k:k + 3],
                                                                  meta[k:k + 3])
    tap.ok(ok and bad is None, "%s: valid JSON, %d events, %d metadata and phase events" %
           (path, len(want), len(meta)), bad)
    return events


# ---- files.txt, from a rank's events.jsonl ----

def file_args(kind):
    return [i for i, a in enumerate(kind["args"])
            if a["enc"] == ENC_SYM and a["sym_class"] == "file"]


def open_flags(v):
    """open(2) flags by name, as README.txt says: access mode, known bits, the rest in hex."""
    names = [("O_CREAT", os.O_CREAT), ("O_EXCL", os.O_EXCL), ("O_NOCTTY", os.O_NOCTTY),
             ("O_TRUNC", os.O_TRUNC), ("O_APPEND", os.O_APPEND), ("O_NONBLOCK", os.O_NONBLOCK),
             ("O_SYNC", os.O_SYNC), ("O_DSYNC", os.O_DSYNC), ("O_DIRECT", os.O_DIRECT),
             ("O_TMPFILE", os.O_TMPFILE), ("O_DIRECTORY", os.O_DIRECTORY),
             ("O_NOFOLLOW", os.O_NOFOLLOW), ("O_NOATIME", os.O_NOATIME),
             ("O_CLOEXEC", os.O_CLOEXEC), ("O_PATH", os.O_PATH), ("O_ASYNC", os.O_ASYNC)]
    out = ["O_RDONLY", "O_WRONLY", "O_RDWR", "O_ACCMODE"][v & 3]
    v &= ~3
    for name, bit in names:
        if bit and v & bit == bit:
            out += "|" + name
            v &= ~bit
    return out + ("|%#x" % v if v else "")


def word(b, space=False):
    """A name as README.txt says files.txt prints it: §9.1's text escapes without quotes
    (and a space in flags as \\x20)."""
    return escape(b, False, also=b" " if space else b"")


def file_kind(name, flags):
    if name is None:
        return b"?"
    for prefix, kind in ((b"pipe:", b"pipe"), (b"socket:", b"socket"), (b"tcp:", b"tcp"),
                         (b"tcp6:", b"tcp"), (b"udp:", b"udp"), (b"udp6:", b"udp"),
                         (b"unix:", b"unix"), (b"anon_inode:", b"anon"),
                         (b"/dev/pts/", b"tty"), (b"/dev/tty", b"tty"),
                         (b"/dev/console", b"tty"), (b"/dev/shm/", None),
                         (b"/dev/mqueue/", None), (b"/dev/hugepages/", None),
                         (b"/dev/", b"device")):
        if name.startswith(prefix):
            if kind:
                return kind
            break  # a file system under /dev: by the name, as any path
    return b"dir" if name.endswith(b"/") or b"O_DIRECTORY" in flags else b"file"


def files_txt(model, rank, jsonl):
    """README.txt's files.txt of @rank, from its events.jsonl (@jsonl, as served) and the
    dump's schema (flags) and names (ids no event uses)."""
    timed = model.timing != TIMING_NONE
    files = {}
    for ident in (i for c, i in model.names.get(rank, {}) if c == "file"):
        files[ident] = {"calls": 0, "read": 0, "written": 0, "uses": [], "opens": []}
    seen = collections.Counter()
    for line in jsonl.split(b"\n"):
        if not line.strip():
            continue
        ev = json.loads(line)
        kind = model.kinds[ev["name"]]
        index = seen[ev["thread"]]
        seen[ev["thread"]] += 1
        fa = file_args(kind)
        if not fa:
            continue
        # the values as the dump has them (events.jsonl prints names, buffers, "result")
        args = model.streams[(rank, ev["thread"])][index][3]
        byts = sum(max(v, 0) for a, v in zip(kind["args"], args) if a["flags"] & ARG_BYTES)
        is_call = any(a["flags"] & 1 for a in kind["args"])
        names = [a["name"] for a in kind["args"]]
        opening = "path" in names and kind["args"][names.index("path")]["enc"] == ENC_STR
        opened = next((i for i in fa if not kind["args"][i]["flags"] & ARG_ATTACH), None)
        counted = set()
        for i in fa:
            a = kind["args"][i]
            if a["flags"] & ARG_ATTACH:
                # an attached argument shows the name, not the id: take it from the id
                # argument of the same event... which events.jsonl does not print, so the
                # dump's event with the same (thread, index) gives it
                ident = model.streams[(rank, ev["thread"])][index][3][i]
            else:
                ident = args[i]
            if ident == SYM_NONE:
                continue
            f = files.setdefault(ident, {"calls": 0, "read": 0, "written": 0, "uses": [],
                                         "opens": []})
            end = ev.get("ts", 0) + ev.get("dur", 0)
            if is_call and ident not in counted:
                counted.add(ident)
                f["calls"] += 1
                f["uses"].append((ev.get("ts", 0), end, ev["thread"], index))
            if a["flags"] & ARG_INPUT:
                f["read"] += byts
            if a["flags"] & ARG_OUTPUT:
                f["written"] += byts
            if opening and i == opened:
                if "flags" in names:
                    fl = open_flags(args[names.index("flags")]).encode()
                elif "mode" in names:
                    fl = word(args[names.index("mode")], True) or b"-"
                else:
                    fl = b"-"
                f["opens"].append((ev.get("ts", 0) if timed else 0, ev["thread"], index, fl))
    out = [b"# files of rank %d: %d file ids, timing %s\n" % (
               rank, len(files), b"yes (first, last in ns)" if timed
               else b"none (first, last: T<thread>:<event>)"),
           b"#%6s %-7s %10s %14s %14s %18s %18s %-24s %s\n" % (
               b"id", b"kind", b"calls", b"read", b"written", b"first", b"last", b"flags",
               b"name")]
    for ident in sorted(files):
        f = files[ident]
        name = model.names.get(rank, {}).get(("file", ident))
        flags = min(f["opens"])[3] if f["opens"] else b"-"
        if not f["uses"]:
            first = last = b"-"
        elif timed:
            first = b"%d" % min(u[0] for u in f["uses"])
            last = b"%d" % max(u[1] for u in f["uses"])
        else:
            u = sorted((u[2], u[3]) for u in f["uses"])
            first, last = b"T%d:%d" % u[0], b"T%d:%d" % u[-1]
        out.append(b"%7d %-7s %10d %14d %14d %18s %18s %-24s %s\n" % (
            ident, file_kind(name, flags), f["calls"], f["read"], f["written"], first, last,
            flags, word(name) if name is not None else b"-"))
    return b"".join(out)


def run(cmd, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600,
                       env=env)
    return p.returncode, p.stdout, p.stderr


def check_tree(tap, cli, model, info, times, listed, text_escape, slices_exe, seed,
               n_slices=60):
    tree = Tree(model, info, times, listed, text_escape)
    want = tree.files()
    tap.ok(set(listed) == want, "the tree holds exactly the %d expected files" % len(want),
           "missing: %r\nunexpected: %r" % (sorted(want - set(listed))[:8],
                                            sorted(set(listed) - want)[:8]))
    contents = {}
    for path in sorted(want & set(listed)):
        if (path.endswith((b"/trace.txt", b"/events.jsonl")) and b"/threads/" in path and
                b"/calls/" not in path):
            continue  # check_views compares these with the model
        rc, data, err = cli.cat(path)
        if not tap.ok(rc == 0 and not err and listed[path] == len(data),
                      "cat %s gives its ls size %d" % (path.decode(), listed[path]),
                      "rc=%d bytes=%d stderr=%r" % (rc, len(data), err)):
            continue
        contents[path] = data
    for d, (sc, profiles) in sorted(tree.scopes.items()):
        pre = d + b"/" if d else b""
        if d:
            for view in ("trace.txt", "events.jsonl"):
                p = pre + view.encode()
                if p in contents and b"/threads/" not in p:
                    exp = tree.merged(sc, view)
                    tap.ok(contents[p] == exp, "%s: %d threads' lines in time order" %
                           (p.decode(), len(sc.segs)),
                           None if contents[p] == exp else first_diff(contents[p], exp))
        if pre + b"trace.json" in contents:
            check_chrome(tap, tree, sc, contents[pre + b"trace.json"],
                         (pre + b"trace.json").decode())
        if profiles:
            exp = tree.summary(sc)
            got = contents.get(pre + b"summary.txt")
            tap.ok(got == exp, "%ssummary.txt: counts, durations and bytes of %d events" %
                   (pre.decode(), sum(s.n for s in sc.segs)),
                   None if got is None or got == exp else first_diff(got, exp))
        if profiles and d:
            exp = tree.stacks(sc)
            got = contents.get(pre + b"stacks.folded")
            tap.ok(got == exp, "%sstacks.folded: %d stacks" % (pre.decode(), exp.count(b"\n")),
                   None if got is None or got == exp else first_diff(got, exp))
    check_calls(tap, cli, tree, contents)
    ranks = sorted({r for r, _ in model.streams})
    # README.txt: the root's events.jsonl is every rank's, in rank order
    exp = b"".join(tree.merged(tree.scopes[b"ranks/%d" % r][0], "events.jsonl") for r in ranks)
    got = contents.get(b"events.jsonl")
    tap.ok(got == exp and got == b"".join(contents.get(b"ranks/%d/events.jsonl" % r, b"-")
                                          for r in ranks),
           "events.jsonl: the %d ranks' events.jsonl end to end (%d bytes)" % (len(ranks),
                                                                                len(exp)),
           None if got is None or got == exp else first_diff(got, exp))
    tap.ok(any(r in model.backtraces for r in ranks) and
           (len(ranks) < 2 or any(r not in model.backtraces for r in ranks)),
           "the trace has ranks with and without backtraces", repr(sorted(model.backtraces)))
    for r in sorted(model.backtraces):
        for name, exp in ((b"backtraces.txt", model.backtraces_txt(r)),
                          (b"allocs.folded", model.allocs_folded(r))):
            p = b"ranks/%d/%s" % (r, name)
            got = contents.get(p)
            tap.ok(got == exp, "%s: %d lines as README.txt states" % (p.decode(),
                                                                    exp.count(b"\n")),
                   None if got is None or got == exp else first_diff(got, exp))
    for r in sorted({r for r, _ in model.streams}):
        p = b"ranks/%d/files.txt" % r
        if p in want:
            exp = files_txt(model, r, contents.get(b"ranks/%d/events.jsonl" % r, b""))
            got = contents.get(p)
            tap.ok(got == exp, "%s: %d files from the rank's events.jsonl" %
                   (p.decode(), exp.count(b"\n") - 2),
                   None if got is None or got == exp else first_diff(got, exp))
    check_signatures(tap, model, contents.get(b"signatures.txt", b""))
    check_grammar(tap, info, contents.get(b"grammar.txt", b""))
    composite = [p.decode() for p in sorted(contents)
                 if p.endswith((b"trace.json", b"summary.txt", b"stacks.folded",
                                b"backtraces.txt", b"allocs.folded"))
                 or (p.endswith((b"trace.txt", b"events.jsonl")) and b"/threads/" not in p)]
    check_slices(tap, cli, slices_exe, seed, composite, n_slices)
    check_slices(tap, cli, slices_exe, seed + 1,
                 [p.decode() for p in sorted(contents) if b"/calls/" in p], n_slices)
    return tree


def call_of(view, line):
    """The call a line of trace.txt or events.jsonl is of, read from the line itself."""
    if view == b"trace.txt":
        m = TEXT_CALL.match(line)
        return m.group(1) if m else None
    return json.loads(line)["name"].encode()


def check_calls(tap, cli, tree, contents):
    """Each calls/<name>/ view is its directory's view filtered by the call at each line's
    start, byte for byte (that calls/ lists exactly the calls that occur is part of the
    tree's expected files)."""
    by_dir = collections.defaultdict(set)
    for d, call in tree.calls():
        by_dir[d].add(call)
    n_files = n_same = 0
    bad = []
    for d, calls in sorted(by_dir.items()):
        for view in CALL_FILES:
            full = contents.get(d + b"/" + view)
            if full is None:
                rc, full, err = cli.cat(d + b"/" + view)
            # each line read once, into its call's lines (every call's expected file the
            # same bytes as filtering the whole view for that call)
            of_call = collections.defaultdict(list)
            for l in full.splitlines(keepends=True):
                of_call[call_of(view, l)].append(l)
            for call in sorted(calls):
                p = b"%s/calls/%s/%s" % (d, call, view)
                exp = b"".join(of_call.get(call, ()))
                n_files += 1
                if contents.get(p) == exp and exp:
                    n_same += 1
                elif len(bad) < 5:
                    bad.append("%s: %s" % (p.decode(), first_diff(contents.get(p, b""), exp)))
    tap.ok(n_files > 0 and n_same == n_files and not bad,
           "%d calls/ views in %d directories are their directory's lines of that call" %
           (n_files, len(by_dir)), "\n".join(bad))


def first_diff(a, b):
    n = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    start = a.rfind(b"\n", 0, n) + 1
    return "first difference at byte %d of %d/%d\nexpected: %r\nactual:   %r" % (
        n, len(a), len(b), b[start:b.find(b"\n", start) + 1][:300],
        a[start:a.find(b"\n", start) + 1][:300])


def check_signatures(tap, model, data):
    lines = [l for l in data.split(b"\n") if l and not l.startswith(b"#")]
    terms = collections.Counter()
    for (rank, _), evs in model.streams.items():
        for e in evs:
            terms[model.terminal(rank, e)] += 1
    occ = []
    for l in lines:
        m = re.match(rb"^ *(\d+) +(\d+)  (\S.*)$", l)
        occ.append(int(m.group(2)) if m else -1)
    n = sum(terms.values())
    tap.ok(len(lines) == len(terms) and sorted(occ) == sorted(terms.values()) and
           sum(occ) == n, "signatures.txt: %d signatures, occurrences sum to %d events" %
           (len(terms), n), "lines=%d occ=%r want %r" % (len(lines), sorted(occ)[:10],
                                                         sorted(terms.values())[:10]))


def check_grammar(tap, info, data):
    heads = re.findall(rb"(?m)^== stream (\d+) \(rank (\d+), thread (\d+)\): (\d+) events"
                       rb"(?:; also ([^=]*))? ==$", data)
    distinct = sorted(s["index"] for s in info["streams"] if s["same_as"] == s["index"])
    covered = set()
    for h in heads:
        covered.add((int(h[1]), int(h[2])))
        for m in re.finditer(rb"rank (\d+) thread (\d+)", h[4] or b""):
            covered.add((int(m.group(1)), int(m.group(2))))
    every = {(s["rank"], s["thread"]) for s in info["streams"]}
    tap.ok([int(h[0]) for h in heads] == distinct and covered == every and
           data.count(b"\nS ->") + data.startswith(b"S ->") >= len(distinct),
           "grammar.txt: a header and a start rule per distinct stream (%d), all %d streams "
           "named" % (len(distinct), len(every)), data[:300])


def check_slices(tap, cli, exe, seed, paths, n_slices):
    """vtree_slices over @paths, 16 at a time: @n_slices random slices from each of its
    4 threads and its one handle per path."""
    if not exe:
        tap.diag("vtree_slices not given: random slices not checked")
        return
    for i in range(0, len(paths), 16):
        chunk = paths[i:i + 16]
        rc, out, err = run([exe, cli.trace, str(seed), str(n_slices)] + chunk)
        tap.ok(rc == 0 and out.count(b"\nok ") + out.startswith(b"ok ") == len(chunk),
               "random slices (seed %d) of %d merged and composite files equal their full "
               "read, from 4 threads at once" % (seed, len(chunk)), out + err)


def check_split(tap, cli, tree, split):
    """With a split size, every trace.json over it gets trace.json.d/ of valid parts."""
    env = dict(os.environ, TRACEFS_JSON_SPLIT_BYTES=str(split))
    n_dirs = 0
    for d, (sc, _) in sorted(tree.scopes.items()):
        pre = d + b"/" if d else b""
        if b"/phases/" in d:
            continue
        rc, out, err = run([cli.tracefs, "ls", cli.trace, pre + b"trace.json.d"], env=env)
        if rc != 0:
            continue
        n_dirs += 1
        parts = [l.split()[-1] for l in out.splitlines()]
        sizes = {l.split()[-1]: int(l.split()[1]) for l in out.splitlines()}
        got_events, ok, why = [], True, None
        for i, name in enumerate(parts):
            p = pre + b"trace.json.d/" + name
            rc, data, err = run([cli.tracefs, "cat", cli.trace, p], env=env)
            try:
                arr = json.loads(data)
            except ValueError as e:
                ok, why = False, "%s: %s" % (p, e)
                break
            if name != b"part-%03d.json" % i or len(data) != sizes[name]:
                ok, why = False, "%s: name or size %d vs %d" % (p, len(data), sizes[name])
            x = [(o["pid"], o["tid"], o["ts"], o["name"]) for o in arr
                 if o.get("ph") == "X" and o.get("cat") != "phase"]
            if len(data) > split + 4096 * (1 + len(sc.segs)) and len(x) > 1:
                ok, why = False, "%s: %d bytes for a split size of %d" % (p, len(data), split)
            ph = [o for o in arr if o.get("cat") == "phase"]
            if ph and i > 0:
                ok, why = False, "%s: phases outside part-000" % p
            got_events += x
        rc, whole, err = run([cli.tracefs, "cat", cli.trace, pre + b"trace.json"], env=env)
        want = [(o["pid"], o["tid"], o["ts"], o["name"]) for o in json.loads(whole)
                if o.get("ph") == "X" and o.get("cat") != "phase"]
        tap.ok(ok and got_events == want and len(parts) > 1,
               "%strace.json.d: %d standalone parts hold the %d events of trace.json" %
               (pre.decode(), len(parts), len(want)), why or "%d vs %d events" %
               (len(got_events), len(want)))
    tap.ok(n_dirs > 0, "a split size of %d makes trace.json.d directories (%d)" %
           (split, n_dirs))
