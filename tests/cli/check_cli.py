#!/usr/bin/env python3
"""End-to-end test of the tracefs CLI against an independent model of FORMAT.md §9.

synth_demo writes a trace and, with --dump, every event it appended. This script renders the
expected trace.txt and events.jsonl of every thread and phase view from that dump with its
own Python implementation of FORMAT.md §9 (widths, padding, escapes), compares them byte for
byte with `tracefs cat`, checks `tracefs ls` sizes, the JSON files, `verify`, usage errors
and corrupted copies of the trace. Output is TAP. It reuses no tracefs code on purpose.

  check_cli.py --tracefs T --demo D --timing none|lossless|lossy:0.1 [--events N]
  check_cli.py --tracefs T --demo D --large N      (sizes and verify only, no dump)
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import layout_checks
import tree_checks
from tree_checks import escape  # §9.1, shared with the tree's name columns

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

TYPE_U64, TYPE_I64, TYPE_HEX, TYPE_STR = 0, 1, 2, 3
ENC_SIG, ENC_SYM, ENC_RANK, ENC_VAL, ENC_STR, ENC_RVAL = 0, 1, 2, 3, 4, 5
ARG_RESULT, ARG_ATTACH = 1, 4
SYM_NONE = 0xffffffff


class RVal(int):
    """An RVAL argument (§5.2): its absolute value, and whether the writer said it derives
    from the rank (synth_demo dumps tfs_rval(): value * 2 + derived)."""

    def __new__(cls, packed):
        v = super().__new__(cls, packed >> 1)
        v.ranked = bool(packed & 1)
        return v
TIMING_NONE, TIMING_LOSSLESS, TIMING_LOSSY = 0, 1, 2
VIEWS = ("trace.txt", "events.jsonl")
DIAG_RE = re.compile(rb"^tracefs: .*section=[^=]+ offset=\d+: \S.*$")



def run(cmd, timeout=600, stdin=subprocess.DEVNULL):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=stdin,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


# ---- the model: FORMAT.md §9 from the dumped events ----

def text_escape(b):
    return b'"' + escape(b, False) + b'"'


def json_escape(b):
    return b'"' + escape(b, True) + b'"'


def num_text(arg, v):
    if arg["type"] == TYPE_HEX:
        return b"0x%x" % v
    return b"%d" % v


def hex_json_width(w):
    """§9: a hex VAL of text width w counts as the digits of 16^(w-2) - 1 in JSON."""
    return 20 if w - 2 >= 16 else len(b"%d" % (16 ** max(w - 2, 1) - 1))


def ident(name):
    """§9.2: a name that may stand for a symbol or a value."""
    return name is not None and re.fullmatch(rb"[A-Za-z_][A-Za-z0-9_]{0,63}", name)


def zigzag(v):
    return v * 2 if v >= 0 else -v * 2 - 1


def dump_bytes(s):
    """synth_demo dumps strings one code point per byte."""
    return s.encode("latin-1")


class Model:
    def __init__(self, dump_path):
        self.streams = {}  # (rank, thread) -> [(kind, ts, dur, args)]
        self.phases = []   # (name bytes, rank, thread, first, n), in the order added
        self.backtraces = {}  # rank -> {id: [address...]}
        self.symbols = {}     # rank -> {address: [(function, file, line)...]}
        self.names = {}       # rank -> {(class, id): name bytes} (FORMAT.md §12)
        with open(dump_path, "rb") as f:
            for raw in f:
                rec = json.loads(raw)
                if "schema" in rec:
                    self.header = rec
                    rvals = {k["name"]: [i for i, a in enumerate(k["args"])
                                         if a["enc"] == ENC_RVAL] for k in rec["schema"]}
                elif "backtrace" in rec:
                    self.backtraces.setdefault(rec["rank"], {})[rec["backtrace"]] = rec["frames"]
                elif "symbol" in rec:
                    self.symbols.setdefault(rec["rank"], {})[rec["symbol"]] = [
                        (dump_bytes(fn), dump_bytes(file), line) for fn, file, line in
                        rec["frames"]]
                elif "name_of" in rec:
                    self.names.setdefault(rec["rank"], {})[(rec["name_of"], rec["id"])] = \
                        dump_bytes(rec["name"])
                elif "phase" in rec:
                    self.phases.append((dump_bytes(rec["phase"]), rec["rank"], rec["thread"],
                                        rec["first"], rec["n"]))
                else:
                    key = (rec["rank"], rec["thread"])
                    args = [dump_bytes(a) if isinstance(a, str) else a for a in rec["args"]]
                    for i in rvals[rec["kind"]]:
                        args[i] = RVal(args[i])
                    self.streams.setdefault(key, []).append(
                        (rec["kind"], rec["ts"], rec["dur"], args))
        self.kinds = {k["name"]: k for k in self.header["schema"]}
        for k in self.kinds.values():
            k["bname"] = k["name"].encode()
            results = [i for i, a in enumerate(k["args"]) if a["flags"] & ARG_RESULT]
            k["result"] = results[0] if results else -1
        self.timing = self.header["timing"]
        self.n_ranks = 1 + max(r for r, _ in self.streams)
        self.max_thread = max(t for _, t in self.streams)
        self.max_ts = max(e[1] for evs in self.streams.values() for e in evs)
        self.max_dur = max(e[2] for evs in self.streams.values() for e in evs)
        self.name_widths = {}  # (class, id, json) -> widest form over the ranks
        self.widths = {}  # terminal -> [VAL widths in arg order]
        for (rank, _), evs in self.streams.items():
            for e in evs:
                key = self.terminal(rank, e)
                w = [len(num_text(a, v)) for a, v in zip(self.kinds[e[0]]["args"], e[3])
                     if a["enc"] == ENC_VAL]
                old = self.widths.get(key)
                self.widths[key] = w if old is None else [max(x, y) for x, y in zip(old, w)]

    def terminal(self, rank, e):
        """§5.2: the call signature (kind and every non-VAL argument, ranks relative)."""
        sig = [e[0]]
        for a, v in zip(self.kinds[e[0]]["args"], e[3]):
            if a["enc"] == ENC_RANK:
                sig.append(v - rank)
            elif a["enc"] == ENC_RVAL:
                sig.append(("r", v - rank) if v.ranked else v)
            elif a["enc"] != ENC_VAL:
                sig.append(v)
        return tuple(sig)

    def set_times(self, max_ts, max_dur):
        self.max_ts, self.max_dur = max_ts, max_dur

    def rank_width(self, rel):
        return max(len(b"%d" % rel), len(b"%d" % (self.n_ranks - 1 + rel)))

    def name_form(self, rank, cls, sid, json_view):
        """§9: an attached argument's name at @rank, <escaped> or a JSON string; class#id
        when the rank has no name for it; nothing or null for no id."""
        if sid == SYM_NONE:
            return b"null" if json_view else b""
        name = self.names.get(rank, {}).get((cls, sid), cls.encode() + b"#%d" % sid)
        if json_view:
            return json_escape(name)
        return b"<" + escape(name, False, also=b">") + b">"

    def name_width(self, cls, sid, json_view):
        key = (cls, sid, json_view)
        if key not in self.name_widths:
            self.name_widths[key] = max(len(self.name_form(r, cls, sid, json_view))
                                        for r in range(self.n_ranks))
        return self.name_widths[key]

    def ident_name(self, rank, cls, key):
        name = self.names.get(rank, {}).get((cls, key))
        return name if ident(name) else None

    def value_form(self, rank, cls, key, flags, fallback):
        """§9.2: a value's (or symbol's) name at @rank, for hex flags the names of its bits
        joined by '|', else @fallback."""
        name = self.ident_name(rank, cls, key)
        if name is not None or not flags or key == 0:
            return name if name is not None else fallback
        bits = [1 << k for k in range(64) if key >> k & 1]
        names = [self.ident_name(rank, cls, b) for b in bits]
        return fallback if None in names else b"|".join(names)

    def named(self, rank, cls, key, flags, fallback, json_view=False):
        """The form at @rank and the widest over every rank (quoted in JSON)."""
        forms = [self.value_form(r, cls, key, flags, fallback) for r in range(self.n_ranks)]
        q = b'"' if json_view else b""
        return q + forms[rank] + q, max(len(f) for f in forms) + len(q) * 2

    def buf_pair(self, args, i):
        """§9.3: the stem and style of a buffer made of arguments i and i + 1, or None."""
        if i + 1 >= len(args):
            return None
        a, b = args[i], args[i + 1]
        if not b["name"].endswith("_off") or len(b["name"]) < 5 or \
                b["type"] not in (TYPE_U64, TYPE_HEX) or \
                (a["flags"] | b["flags"]) & (ARG_RESULT | ARG_ATTACH):
            return None
        stem = b["name"][:-4]
        if a["name"] == stem + "_id" and a["type"] == TYPE_U64 and \
                (a["enc"] == ENC_VAL) == (b["enc"] == ENC_VAL) and \
                a["enc"] in (ENC_VAL, ENC_SIG) and b["enc"] in (ENC_VAL, ENC_SIG):
            return stem, "addr"
        if a["name"] == stem and a["enc"] == ENC_SYM and a["sym_class"] == "alloc" and \
                b["enc"] == ENC_SIG:
            return stem, "numbered"
        return None

    def attached_classes(self):
        return {a["sym_class"] for k in self.kinds.values() for a in k["args"]
                if a["flags"] & ARG_ATTACH}

    def buf_value(self, rank, style, bid, off, widths, json_view):
        """A buffer's bytes and deficit; @widths: the two VAL widths, or None (SIG)."""
        q = b'"' if json_view else b""
        if style == "numbered" and bid == 0:
            s, w = self.named(rank, "buf", off, False, b"buf#%d" % off, json_view)
            return s, w - len(s)
        s = q + (b"alloc#%d+0x%x" % (bid, off) if bid else b"0x%x" % off) + q
        return s, (9 + widths[0] + widths[1] + len(q) * 2 - len(s)) if widths else 0

    def values(self, rank, e, json_view):
        """Each argument's bytes and its padding deficit; a buffer's second argument None."""
        kind = self.kinds[e[0]]
        args = kind["args"]
        vwidths = list(self.widths[self.terminal(rank, e)])
        vidx = [sum(1 for a in args[:i] if a["enc"] == ENC_VAL) for i in range(len(args))]
        attached_cls = self.attached_classes()
        out = []
        skip = False
        for i, (a, v) in enumerate(zip(args, e[3])):
            if skip:
                out.append(None)
                skip = False
                continue
            deficit = 0
            cls = a["sym_class"]
            pair = self.buf_pair(args, i)
            if pair:
                w = (vwidths[vidx[i]], vwidths[vidx[i + 1]]) if a["enc"] == ENC_VAL else None
                out.append(self.buf_value(rank, pair[1], v, e[3][i + 1], w, json_view))
                skip = True
                continue
            if a["enc"] == ENC_STR:
                s = json_escape(v) if json_view else text_escape(v)
            elif a["enc"] == ENC_SYM and a["flags"] & ARG_ATTACH:
                s = self.name_form(rank, cls, v, json_view)
                deficit = self.name_width(cls, v, json_view) - len(s)
            elif a["enc"] == ENC_SYM and v == SYM_NONE:
                s = b"null" if json_view else b"-1"
            elif a["enc"] == ENC_SYM:
                fallback = cls.encode() + b"#%d" % v
                if cls in attached_cls:
                    s = b'"%s"' % fallback if json_view else fallback
                else:
                    s, w = self.named(rank, cls, v, False, fallback, json_view)
                    deficit = w - len(s)
            elif (a["enc"] == ENC_RANK and v >= 0) or (a["enc"] == ENC_RVAL and v.ranked):
                s = b"%d" % v
                deficit = self.rank_width(v - rank) - len(s)
            elif a["enc"] == ENC_VAL:
                s = b"%d" % v if json_view else num_text(a, v)
                w = vwidths[vidx[i]]
                if json_view and a["type"] == TYPE_HEX:
                    w = hex_json_width(w)
                deficit = w - len(s)
            elif json_view or not cls:
                s = b"%d" % v
                if not json_view:
                    s = num_text(a, v)
            else:  # §9.2 a value named by its class, in the text view
                key = zigzag(v) if a["type"] == TYPE_I64 else v
                s, w = self.named(rank, cls, key, a["type"] == TYPE_HEX, num_text(a, v))
                deficit = w - len(s)
            out.append((s, deficit))
        return out

    def text_line(self, rank, thread, e):
        kind = self.kinds[e[0]]
        vals = self.values(rank, e, False)
        line = b""
        if self.timing != TIMING_NONE:
            ws = len(b"%d" % (self.max_ts // 10**9))
            wd = len(b"%d" % self.max_dur)
            line += b"%*d.%09d %*d " % (ws, e[1] // 10**9, e[1] % 10**9, wd, e[2])
        wt = len(b"%d" % self.max_thread)
        args = kind["args"]

        def attached(i):
            return i < len(args) and args[i]["flags"] & ARG_ATTACH

        def value(i):  # an argument's value and, right after it, the one attached to it
            return vals[i][0] + (vals[i + 1][0] if attached(i + 1) else b"")

        def name(i):  # a buffer is named for its stem
            pair = self.buf_pair(args, i)
            return (pair[0] if pair else args[i]["name"]).encode()

        line += b"T%-*d " % (wt, thread) + kind["bname"] + b"("
        line += b", ".join(name(i) + b"=" + value(i) for i, a in enumerate(args)
                           if i != kind["result"] and not attached(i) and vals[i] is not None)
        line += b")"
        if kind["result"] >= 0:
            line += b" = " + value(kind["result"])
        pad = sum(v[1] for v in vals if v is not None)
        return line + b" " * pad + b"\n"

    def json_line(self, rank, thread, e):
        kind = self.kinds[e[0]]
        vals = self.values(rank, e, True)
        args = kind["args"]
        pad = sum(v[1] for v in vals if v is not None)
        line = b"{"
        if self.timing != TIMING_NONE:
            line += b'"ts":%d,"dur":%d,' % (e[1], e[2])
            pad += len(b"%d" % self.max_ts) - len(b"%d" % e[1])
            pad += len(b"%d" % self.max_dur) - len(b"%d" % e[2])
        line += b'"rank":%d,' % rank
        pad += len(b"%d" % (self.n_ranks - 1)) - len(b"%d" % rank)
        line += b'"thread":%d,' % thread
        pad += len(b"%d" % self.max_thread) - len(b"%d" % thread)
        line += b'"name":' + json_escape(kind["bname"]) + b',"args":{'
        line += b",".join(n + b":" + v for _, n, v in self.json_members(kind, vals))
        line += b"}}"
        return line + b" " * pad + b"\n"

    def json_members(self, kind, vals):
        """(index, quoted name, value bytes) of each member of a JSON view's "args": the
        result is "result", a buffer (its first argument's index) is named for its stem."""
        args = kind["args"]
        taken = any(a["name"] == "result" for i, a in enumerate(args) if i != kind["result"])

        def name(i):
            pair = self.buf_pair(args, i)
            if pair:
                return pair[0].encode()
            if i == kind["result"] and not taken and args[i]["enc"] != ENC_SYM:
                return b"result"
            return args[i]["name"].encode()

        return [(i, json_escape(name(i)), vals[i][0])
                for i in range(len(args)) if vals[i] is not None]

    def view(self, rank, thread, first, n, view, times=None):
        """Expected bytes; @times replaces (ts, dur) per event (lossy timing)."""
        evs = self.streams[(rank, thread)][first:first + n]
        render = self.text_line if view == "trace.txt" else self.json_line
        out = []
        for i, e in enumerate(evs):
            if times is not None:
                e = (e[0], times[i][0], times[i][1], e[3])
            out.append(render(rank, thread, e))
        return b"".join(out)


    # ---- backtraces.txt and allocs.folded, as README.txt states them ----

    @staticmethod
    def bt_name(b, folded=False):
        """§9.1's text escapes without quotes (and ';' as \\x3b in folded stacks)."""
        return escape(b, False, also=b";" if folded else b"")

    def backtraces_txt(self, rank):
        syms = self.symbols.get(rank, {})
        out = []
        for sid in sorted(self.backtraces[rank]):
            out.append(b"stack#%d\n" % sid)
            for addr in self.backtraces[rank][sid]:
                if addr not in syms:
                    out.append(b"  0x%x\n" % addr)
                    continue
                for k, (fn, file, line) in enumerate(syms[addr]):
                    loc = self.bt_name(file) + (b":%d" % line if line else b"")
                    out.append(b"  " + self.bt_name(fn) + (b" (" + loc + b")" if loc else b"")
                               + (b" [inlined]" if k else b"") + b"\n")
        return b"".join(out)

    def fold(self, rank, sid):
        stacks, syms = self.backtraces.get(rank, {}), self.symbols.get(rank, {})
        if sid == 0xffffffff:  # TFS_SYM_NONE: not sampled
            return b"[not sampled]"
        if sid not in stacks:
            return b"[unknown stack#%d]" % sid
        frames = []
        for addr in stacks[sid]:
            if addr in syms:
                frames += [self.bt_name(fn, True) for fn, _, _ in syms[addr]]
            else:
                frames.append(b"0x%x" % addr)
        return b";".join(frames) if frames else b"[no frames]"

    def allocs_folded(self, rank):
        """Bytes of the rank's events with a stack argument, per folded stack."""
        total = {}
        for (r, _), evs in self.streams.items():
            if r != rank:
                continue
            for e in evs:
                args = self.kinds[e[0]]["args"]
                at = [i for i, a in enumerate(args)
                      if a["enc"] == ENC_SYM and a["sym_class"] == "stack"]
                if not at:
                    continue
                b = sum((max(v, 0) if a["type"] == TYPE_I64 else v)
                        for a, v in zip(args, e[3]) if a["flags"] & 2 and a["type"] != TYPE_STR)
                key = self.fold(rank, e[3][at[0]])
                total[key] = total.get(key, 0) + b
        return b"".join(b"%s %d\n" % (k, v) for k, v in sorted(total.items()) if v > 0)


# ---- virtual tree expectations ----

def phase_dirname(name):
    """README.txt's mapping: %XX for % / ~ and what the text views escape (controls, DEL,
    C1 controls, bytes of no UTF-8), dots-only and empty names, cut between characters."""
    if name == b"":
        return b"%00", False
    dots = all(c == 0x2e for c in name)
    out = bytearray()
    for i, ch in enumerate(name.decode("utf-8", "surrogateescape")):
        raw = bytes([ord(ch) - 0xdc00]) if "\udc80" <= ch <= "\udcff" else ch.encode()
        esc = (ord(ch) < 0x20 or 0x7f <= ord(ch) <= 0x9f or ch in "%/~" or (dots and i == 0)
               or "\udc80" <= ch <= "\udcff")
        piece = b"".join(b"%%%02X" % c for c in raw) if esc else raw
        if len(out) + len(piece) > 240:
            return bytes(out), True
        out += piece
    return bytes(out), False


def expected_files(model, info):
    """path -> (rank, thread, first, n) for every view file the tree must hold."""
    files = {}
    for (rank, thread), evs in model.streams.items():
        for v in VIEWS:
            files[b"ranks/%d/threads/%d/%s" % (rank, thread, v.encode())] = (
                rank, thread, 0, len(evs))
    # the phase index of the trace (for ~n suffixes) comes from info.json's list
    index = {}
    for i, p in enumerate(info["phases"]):
        key = (p["name"], p["rank"], p["thread"], p["first_event"], p["events"])
        index.setdefault(key, []).append(i)
    groups = {}   # (rank, name) -> (dir, set of threads)
    for p in model.phases:
        name, rank, thread, first, n = p
        # info.json has a name as the JSON views have strings (§9.1)
        idx = index[(tree_checks.json_str(name), rank, thread, first, n)].pop(0)
        g = groups.get((rank, name))
        if g is None:
            d, cut = phase_dirname(name)
            if cut:
                d += b"~%d" % idx
            g = groups[(rank, name)] = (d, set())
        d, threads = g
        if thread in threads:
            d = phase_dirname(name)[0] + b"~%d" % idx
        else:
            threads.add(thread)
        for v in VIEWS:
            files[b"ranks/%d/phases/%s/threads/%d/%s" % (rank, d, thread, v.encode())] = (
                rank, thread, first, n)
    return files


class Cli:
    # `tracefs cat` results of every Cli, kept: the checks read many files more than once
    # (views, their times, calls/ sources, the fast coder's twin), and the bytes of a path
    # of an unchanged trace file are the bytes of the last cat of it (the key holds the
    # file's identity, so a rewritten trace is read again); outputs over 8 MB are not kept
    cats = {}

    def __init__(self, tracefs, trace):
        self.tracefs, self.trace = tracefs, trace

    def ls(self, path=b""):
        rc, out, err = run([self.tracefs, "ls", self.trace, path])
        if rc != 0:
            raise RuntimeError("ls %r: rc=%d %s" % (path, rc, err))
        entries = []
        for line in out.splitlines():
            m = re.match(rb"^([df]) +(\d+) (.*)$", line)
            if not m:
                raise RuntimeError("ls %r: bad line %r" % (path, line))
            entries.append((m.group(1) == b"d", int(m.group(2)), m.group(3)))
        return entries

    def walk(self, path=b""):
        """{file path: size} of the whole tree, and directories listed out of order."""
        files, disorder = {}, []
        entries = self.ls(path)
        names = [n for _, _, n in entries]
        if all(n.isdigit() for n in names) and names != sorted(names, key=int):
            disorder.append(path)
        for is_dir, size, name in entries:
            sub = path + b"/" + name if path else name
            if is_dir:
                f, d = self.walk(sub)
                files.update(f)
                disorder += d
            else:
                files[sub] = size
        return files, disorder

    def cat(self, path):
        try:
            st = os.stat(self.trace)
            key = (self.tracefs, self.trace, path, st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            key = None
        got = Cli.cats.get(key)
        if got is None:
            got = run([self.tracefs, "cat", self.trace, path])
            if key and len(got[1]) <= 8 << 20:
                Cli.cats[key] = got
        return got

    def cat_count(self, path):
        p = subprocess.Popen([self.tracefs, "cat", self.trace, path], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        n, last = 0, b""
        while True:
            chunk = p.stdout.read(1 << 20)
            if not chunk:
                break
            n += len(chunk)
            last = chunk[-1:]
        err = p.stderr.read()
        return p.wait(), n, last, err


# ---- checks ----

def lossy_times(tap, actual, evs, view, rel_err, path, prev=None):
    """Parse the reconstructed (ts, dur) of each line and check FORMAT.md §7.4's bounds:
    durations within rel_err, a start within rel_err of its gap to the reconstructed start
    before it (@prev for the first line; None: the stream's first event, exact), or within
    2 rel_err + 2 when a step back to near 0 rounded up to stay >= 0."""
    pat = (rb"^ *(\d+)\.(\d{9}) +(\d+) T" if view == "trace.txt"
           else rb'^\{"ts":(\d+),"dur":(\d+),')
    times = []
    lines = actual.split(b"\n")
    for i, e in enumerate(evs):
        m = re.match(pat, lines[i]) if i < len(lines) else None
        if not m:
            return None
        g = [int(x) for x in m.groups()]
        ts, dur = (g[0] * 10**9 + g[1], g[2]) if view == "trace.txt" else (g[0], g[1])
        p = times[-1][0] if times else prev
        gap = abs(e[1] - p) if p is not None else 0
        err = abs(ts - e[1])
        ok_ts = err <= rel_err * gap + 1 or (
            p is not None and e[1] <= ts <= p and err <= 2 * rel_err * gap + 2)
        if abs(dur - e[2]) > rel_err * e[2] + 1 or not ok_ts:
            tap.diag("%s line %d: ts/dur %d/%d for %d/%d beyond rel_err %g" %
                     (path.decode(), i + 1, ts, dur, e[1], e[2], rel_err))
            return None
        times.append((ts, dur))
    return times


def first_diff(a, b):
    n = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    line = a.count(b"\n", 0, n) + 1
    start = a.rfind(b"\n", 0, n) + 1
    return "first difference at byte %d (line %d)\nexpected: %r\nactual:   %r" % (
        n, line, b[start:b.find(b"\n", start) + 1][:200], a[start:a.find(b"\n", start) + 1][:200])


def check_views(tap, cli, model, info, jq):
    files = expected_files(model, info)
    listed, disorder = cli.walk()
    tap.ok(not disorder, "ranks and threads are listed in numeric order", disorder)
    views = {p: s for p, s in listed.items()
             if b"/threads/" in p and p.endswith((b"/trace.txt", b"/events.jsonl"))
             and b"/calls/" not in p}
    tap.ok(set(views) == set(files), "the tree holds exactly the expected %d view files"
           % len(files), "missing: %r\nunexpected: %r" % (sorted(set(files) - set(views))[:10],
                                                          sorted(set(views) - set(files))[:10]))
    starts = {}  # (rank, thread) -> reconstructed starts, for the line before a phase
    if model.timing == TIMING_LOSSY:
        starts = {k: [t[0] for t in v] for k, v in (stream_times(tap, cli, model) or {}).items()}
    for path in sorted(files):
        rank, thread, first, n = files[path]
        view = path.rsplit(b"/", 1)[1].decode()
        rc, actual, err = cli.cat(path)
        if not tap.ok(rc == 0 and not err, "cat %s" % path.decode(), err):
            continue
        tap.ok(listed.get(path) == len(actual), "ls size of %s equals its %d bytes" %
               (path.decode(), len(actual)), "ls says %r" % listed.get(path))
        times = None
        if model.timing == TIMING_LOSSY:
            evs = model.streams[(rank, thread)][first:first + n]
            prev = starts.get((rank, thread), [None] * first)[first - 1] if first else None
            times = lossy_times(tap, actual, evs, view, model.header["rel_err"], path, prev)
            if times is None:
                tap.ok(False, "%s times within the lossy bound" % path.decode())
                continue
        expected = model.view(rank, thread, first, n, view, times)
        tap.ok(actual == expected, "%s matches FORMAT.md §9 (%d events)" % (path.decode(), n),
               None if actual == expected else first_diff(actual, expected))
        if view == "events.jsonl":
            check_jsonl(tap, path, actual, n, jq)
    return listed


def stream_times(tap, cli, model):
    """(rank, thread) -> [(ts, dur)] as the trace holds them (lossy: as checked in trace.txt)."""
    times = {}
    for (rank, thread), evs in model.streams.items():
        if model.timing == TIMING_NONE:
            times[(rank, thread)] = [(0, 0)] * len(evs)
        elif model.timing == TIMING_LOSSLESS:
            times[(rank, thread)] = [(e[1], e[2]) for e in evs]
        else:
            path = b"ranks/%d/threads/%d/trace.txt" % (rank, thread)
            rc, data, err = cli.cat(path)
            t = lossy_times(tap, data, evs, "trace.txt", model.header["rel_err"], path)
            if rc != 0 or t is None:
                tap.ok(False, "times of %s" % path.decode(), err)
                return None
            times[(rank, thread)] = t
    return times


def check_jsonl(tap, path, data, n, jq):
    lines = data.split(b"\n")[:-1] if data else []
    bad = None
    for i, line in enumerate(lines):
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict) or "name" not in obj or "args" not in obj:
                bad = "line %d: not an event object" % (i + 1)
        except ValueError as e:
            bad = "line %d: %s" % (i + 1, e)
        if bad:
            break
    tap.ok(bad is None and len(lines) == n, "%s: %d lines parse with json.loads" %
           (path.decode(), n), bad)
    if jq:
        p = subprocess.run([jq, "-c", "."], input=data, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=300)
        out = p.stdout.split(b"\n")[:-1] if p.stdout else []
        tap.ok(p.returncode == 0 and len(out) == n, "%s: jq -c . accepts %d lines" %
               (path.decode(), n), p.stderr)


def check_info(tap, cli, model, n_events):
    rc, out, err = run([cli.tracefs, "info", "--json", cli.trace])
    info = None
    try:
        info = json.loads(out) if rc == 0 else None
    except ValueError as e:
        err = str(e)
    tap.ok(info is not None, "info --json prints one JSON object", err)
    if info is None:
        return None
    tap.ok(info.get("events") == n_events and info.get("n_streams") == len(model.streams)
           and info.get("n_phases") == len(model.phases),
           "info --json counts %d events, %d streams, %d phases" %
           (n_events, len(model.streams), len(model.phases)), json.dumps(info)[:500])
    mode = ["none", "lossless", "lossy"][model.timing]
    tap.ok(info["timing"]["mode"] == mode, "info --json timing mode is %s" % mode)
    if model.timing == TIMING_LOSSLESS:
        tap.ok((info["timing"]["max_ts_ns"], info["timing"]["max_dur_ns"]) ==
               (model.max_ts, model.max_dur), "max_ts_ns and max_dur_ns are the true maxima",
               info["timing"])
    rc, readme, err = cli.cat(b"README.txt")
    by_end = info.get("meta", {}).get("event_order") == "end"
    order = (b"" if model.timing == TIMING_NONE else
             b"\n  order     end (each thread lists an event when it ends): merged files by end "
             b"time\n" if by_end else b"\n  order     start: merged files by start time\n")
    tap.ok(rc == 0 and b"threads/<t>/" in readme and b"stacks.folded" in readme and
           (b"not interleaved" in readme) == (model.timing == TIMING_NONE) and
           (b"\n  order " in readme) == bool(order) and order in readme,
           "cat README.txt (order: %s)" % (order.strip().decode() or "none, untimed"), err)
    # README.txt's picture of an events.jsonl line names the keys a line has, in order
    m = re.search(rb"\n  events.jsonl  (\{.*?\"args\":)", readme, re.S)
    said = re.findall(rb'"(\w+)":', m.group(1)) if m else []
    if model.timing == TIMING_NONE:
        said = [k for k in said if k not in (b"ts", b"dur")]
    rc, lines, err = cli.cat(b"events.jsonl")
    first = lines.split(b"\n", 1)[0]
    keys = [k.encode() for k in json.loads(first)] if rc == 0 and first else None
    tap.ok(keys is not None and said == keys,
           "README.txt's events.jsonl line has the keys of one (%s)" %
           b",".join(said).decode(), "%s against %s" % (said, keys))
    rc, text, err = cli.cat(b"info.json")
    try:
        same = rc == 0 and text.endswith(b"}\n") and json.loads(text) == info
    except ValueError as e:
        same, err = False, str(e)
    tap.ok(same, "info.json is the object of info --json", err)
    rc, out, err = run([cli.tracefs, "info", cli.trace])
    tap.ok(rc == 0 and re.search(rb"(?m)^events: +%d$" % n_events, out) and not err,
           "info prints a human summary", err or out[:300])
    return info


def check_errors(tap, cli, tracefs):
    def one_line(err):
        return err.count(b"\n") == 1 and err.startswith(b"tracefs: ") and \
            not err.rstrip(b"\n").endswith(b".")

    cases = [([], 2, "no command"), (["frobnicate"], 2, "an unknown command"),
             (["cat", cli.trace], 2, "cat without PATH"),
             (["info", "--bogus", cli.trace], 2, "an unknown option"),
             (["verify"], 2, "verify without TRACE"), (["ls"], 2, "ls without TRACE"),
             (["cat", cli.trace, "no/such/file"], 1, "cat of a missing path"),
             (["cat", cli.trace, "ranks"], 1, "cat of a directory"),
             (["info", cli.trace + ".missing"], 1, "info of a missing trace"),
             (["verify", "/dev/null"], 1, "verify of an empty file")]
    for args, code, what in cases:
        rc, out, err = run([tracefs] + args)
        tap.ok(rc == code and one_line(err), "%s exits %d with one message line" % (what, code),
               "rc=%d stderr=%r" % (rc, err))
    fifo = os.path.join(os.path.dirname(cli.trace), "fifo.trace")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    for args in (["info", fifo], ["verify", "/dev/null"], ["ls", fifo]):
        try:
            rc, out, err = run([tracefs] + args, timeout=20)
        except subprocess.TimeoutExpired:
            rc, err = None, b"hung: no writer ever opens the fifo"
        tap.ok(rc == 1 and one_line(err) and b"not a regular file" in err,
               "%s of a %s: not a regular file, no hang" %
               (args[0], "fifo" if args[1] == fifo else "character device"),
               "rc=%r stderr=%r" % (rc, err))
    for args in (["--help"], ["help"], ["--version"]):
        rc, out, err = run([tracefs] + args)
        tap.ok(rc == 0 and out and not err, "tracefs %s" % args[0], err)
    rc, out, err = run([tracefs, "ls", cli.trace, "ranks/0/threads/0/trace.txt"])
    tap.ok(rc == 0 and len(out.splitlines()) == 1 and out.startswith(b"f "),
           "ls of a file lists that file", out + err)
    p = subprocess.Popen([tracefs, "cat", cli.trace, "ranks/0/threads/0/events.jsonl"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read()
    tap.ok(p.wait() == 0 and not err, "cat into a closed pipe ends quietly",
           "rc=%r stderr=%r" % (p.returncode, err))


def corrupt_copies(trace, info, workdir):
    data = open(trace, "rb").read()
    copies = [("empty file", b""), ("first 39 bytes", data[:39]),
              ("first half", data[:len(data) // 2]), ("last byte cut", data[:-1])]
    table = info["section_totals"]["table"]["stored_bytes"]  # it ends the file (FORMAT.md §1)
    spots = [("magic", 1), ("major version", 8), ("table offset", 17), ("table size", 25),
             ("table crc", 33), ("header crc", 37), ("section table end", len(data) - 7),
             ("section table start", len(data) - table + 1),
             ("section table middle", len(data) - table // 2)]
    for s in info["sections"]:
        if s["stored_bytes"] > 0:
            spots.append(("%s section #%d" % (s["type"], s["index"]),
                          s["offset"] + s["stored_bytes"] // 2))
    for i, (what, off) in enumerate(spots):
        if 0 <= off < len(data):
            b = bytearray(data)
            b[off] ^= 1 << (i % 8)
            copies.append(("bit %d flipped at %d (%s)" % (i % 8, off, what), bytes(b)))
    out = []
    for i, (what, blob) in enumerate(copies):
        path = os.path.join(workdir, "bad%d.trace" % i)
        with open(path, "wb") as f:
            f.write(blob)
        out.append((what, path))
    return out


def check_corruption(tap, tracefs, trace, info, workdir):
    good_ls = run([tracefs, "ls", trace, "ranks/0"])[1]
    for what, path in corrupt_copies(trace, info, workdir):
        # a listing needs every size, a summary's among them (decoded): it lists every entry
        # or fails with one line, never leaves entries out and succeeds
        rc, out, err = run([tracefs, "ls", path, "ranks/0"])
        tap.ok((rc == 0 and out == good_ls) or (0 < rc < 128 and err.count(b"\n") == 1),
               "ls ranks/0 of a trace with its %s lists it whole or fails in one line" % what,
               "rc=%d stdout=%r stderr=%r" % (rc, out, err))
        rc, out, err = run([tracefs, "verify", path])
        tap.ok(0 < rc < 128 and err.count(b"\n") == 1 and DIAG_RE.match(err.rstrip(b"\n")),
               "verify refuses a trace with its %s, naming section and offset" % what,
               "rc=%d stderr=%r" % (rc, err))
        for cmd in (["info", path], ["cat", path, "ranks/0/threads/0/trace.txt"],
                    ["cat", path, "ranks/1/phases/solve/threads/2/events.jsonl"]):
            rc, out, err = run([tracefs] + cmd)
            tap.ok(0 <= rc < 128 and (rc == 0 or err.count(b"\n") == 1),
                   "%s of that trace does not crash" % cmd[0], "rc=%d stderr=%r" % (rc, err))


def full(args, tap, workdir):
    trace = os.path.join(workdir, "demo.trace")
    dump = os.path.join(workdir, "demo.jsonl")
    rc, out, err = run([args.demo, "-o", trace, "--dump", dump, "--events", str(args.events),
                        "--timing", args.timing, "--seed", str(args.seed), "--odd-phases"]
                       + (["--end-order"] if args.end_order else []))
    if not tap.ok(rc == 0, "synth_demo --timing %s --events %d" % (args.timing, args.events),
                  err):
        return
    model = Model(dump)
    n_events = sum(len(e) for e in model.streams.values())
    cli = Cli(args.tracefs, trace)
    rc, out, err = run([args.tracefs, "verify", trace])
    tap.ok(rc == 0 and out == b"ok: %d events in %d streams\n" % (n_events, len(model.streams)),
           "verify: ok: %d events" % n_events, out + err)
    info = check_info(tap, cli, model, n_events)
    if info is None:
        return
    tap.ok(info.get("meta", {}).get("event_order") == ("end" if args.end_order else None),
           "metadata event_order is %s" % ("end" if args.end_order else "absent"),
           info.get("meta"))
    if model.timing != TIMING_NONE:
        model.set_times(info["timing"]["max_ts_ns"], info["timing"]["max_dur_ns"])
    jq = shutil.which("jq")
    if not jq:
        tap.diag("jq not found: JSON lines are checked with json.loads only")
    listed = check_views(tap, cli, model, info, jq)
    layout_checks.check_layout(tap, args.tracefs, listed)
    times = stream_times(tap, cli, model)
    if times is not None:
        seed = args.seed * 1000003 + model.timing
        tap.diag("random slices: seed %d" % seed)
        tree = tree_checks.check_tree(tap, cli, model, info, times, listed, text_escape,
                                      args.slices, seed, args.slices_n)
        tree_checks.check_split(tap, cli, tree, 300000)
        check_ahead(tap, cli, args.ahead, seed, listed)
    check_errors(tap, cli, args.tracefs)
    check_corruption(tap, args.tracefs, trace, info, workdir)
    if model.timing != TIMING_NONE:
        check_fast_coder(tap, args, trace, listed, workdir)


def check_ahead(tap, cli, exe, seed, listed):
    """Requests decoded ahead on worker threads (fs/prefetch.c) equal a plain read: 8 readers
    at once with seeks, 4 threads sharing one, a reader leaving mid-window, for a thread's
    view, a merged rank view, composite files and a view of one call."""
    if not exe:
        tap.diag("ahead_readers not given: decoding ahead not checked")
        return
    paths = [p for p in sorted(listed)
             if p.endswith((b"trace.txt", b"events.jsonl", b"trace.json"))
             and b"/phases/" not in p and b"/calls/" not in p and p.count(b"/") <= 4][:6]
    calls = [p for p in listed if b"/calls/" in p and p.endswith(b"trace.txt")]
    paths += sorted(calls, key=lambda p: (-listed[p], p))[:1]
    rc, out, err = run([exe, cli.trace, str(seed)] + paths, timeout=900)
    tap.ok(rc == 0 and out.count(b"ok ") == len(paths),
           "decoded ahead (seed %d): %d files read by 8 readers at once with seeks, and by "
           "4 threads sharing one, equal their plain read" % (seed, len(paths)), out + err)


def check_fast_coder(tap, args, trace, listed, workdir):
    """The same events with timing columns kept out of the range coder (--timing X,fast,
    FORMAT.md §7.4.2): a larger file whose every timed view reads the same bytes."""
    fast = os.path.join(workdir, "fast.trace")
    rc, _, err = run([args.demo, "-o", fast, "--events", str(args.events), "--timing",
                      args.timing + ",fast", "--seed", str(args.seed), "--odd-phases"]
                     + (["--end-order"] if args.end_order else []))
    if not tap.ok(rc == 0, "synth_demo --timing %s,fast" % args.timing, err):
        return
    size, fast_size = os.path.getsize(trace), os.path.getsize(fast)
    tap.ok(fast_size > size, "%s,fast: %d bytes, range-coded %d" % (args.timing, fast_size, size),
           "expected the range-coded trace smaller")
    views = sorted(p for p in listed if p.endswith((b"trace.txt", b"events.jsonl")))
    same = [p for p in views if Cli(args.tracefs, trace).cat(p)[1] ==
            Cli(args.tracefs, fast).cat(p)[1]]
    tap.ok(views and same == views, "%s,fast: its %d trace.txt and events.jsonl views equal "
           "the range-coded trace's" % (args.timing, len(views)),
           [p for p in views if p not in same][:5])


def large(args, tap, workdir):
    trace = os.path.join(workdir, "large.trace")
    rc, out, err = run([args.demo, "-o", trace, "--events", str(args.large), "--timing",
                        args.timing, "--seed", str(args.seed)], timeout=1200)
    if not tap.ok(rc == 0, "synth_demo --events %d" % args.large, err):
        return
    rc, out, err = run([args.tracefs, "verify", trace], timeout=1200)
    tap.ok(rc == 0 and out.startswith(b"ok: "), "verify: %s" % out.decode().strip(), err)
    rc, out, err = run([args.tracefs, "info", trace])
    tap.diag(out.decode(errors="replace"))
    listed, _ = Cli(args.tracefs, trace).walk()
    for path, size in sorted(listed.items()):
        rc, n, last, err = Cli(args.tracefs, trace).cat_count(path)
        tap.ok(rc == 0 and n == size and (n == 0 or last == b"\n"),
               "cat %s gives its ls size %d" % (path.decode(), size),
               "rc=%d bytes=%d stderr=%r" % (rc, n, err))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--demo", required=True)
    ap.add_argument("--timing", default="lossless")
    ap.add_argument("--events", type=int, default=30000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--large", type=int, default=0)
    ap.add_argument("--end-order", action="store_true",
                    help="synth_demo appends events as they end (as the capture does)")
    ap.add_argument("--slices", help="the vtree_slices helper (random-offset reads)")
    ap.add_argument("--slices-n", type=int, default=60,
                    help="random slices per reader of each file (vtree_slices)")
    ap.add_argument("--ahead", help="the ahead_readers helper (reads decoded ahead)")
    args = ap.parse_args()
    tap = Tap()
    workdir = tempfile.mkdtemp(prefix="tracefs-cli-")
    try:
        (large if args.large else full)(args, tap, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
