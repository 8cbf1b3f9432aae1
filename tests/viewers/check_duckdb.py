#!/usr/bin/env python3
"""DuckDB reads events.jsonl as typed columns, and its counts per call are summary.txt's.

A real program (python3 writing, reading and renaming files whose names hold UTF-8 and a
control byte) and a synthetic one (zones, counters, marks, several ranks and threads) are
traced; every rank's events.jsonl is loaded by DuckDB's read_json_auto through its Node.js
client (npm @duckdb/node-api) with one struct field an argument name
(map_inference_threshold=-1). FORMAT.md §9 gives each argument name one JSON type, so no
field may come out as DuckDB's catch-all JSON type; ts, dur, rank and thread are integers.
Counts per call name equal summary.txt's, and the UTF-8 path reads back as the program
wrote it, through DuckDB and through Python's json (surrogateescape for the invalid byte).

Needs node and @duckdb/node-api in ~/.cache/tracefs-viewers (TFS_VIEWERS_DIR; .ci/setup
installs it); without them every case is reported skipped, with the reason.

  check_duckdb.py --tracefs T --demo D
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

# the program's own file names: UTF-8 (é, ü, a CJK character) and a control byte (\x01)
NAMES = ["caf\u00e9_\u00fc.txt", "\u65e5\u672c.txt", "ctl\x01.txt"]
PROGRAM = r"""
import os, sys
d = sys.argv[1]
names = %r
for i, n in enumerate(names):
    with open(os.path.join(d, n), "wb") as f:
        f.write(b"x" * (100 + i))
for n in names:
    with open(os.path.join(d, n), "rb") as f:
        f.read()
os.rename(os.path.join(d, names[0]), os.path.join(d, names[0] + ".old"))
""" % NAMES

QUERY = r"""
import { DuckDBInstance } from '@duckdb/node-api';
const [file] = process.argv.slice(2);
const inst = await DuckDBInstance.create(':memory:');
const con = await inst.connect();
const src = `read_json_auto('${file}', format='newline_delimited', sample_size=-1,
                            map_inference_threshold=-1)`;
const big = (k, v) => typeof v === 'bigint' ? Number(v) : v;
const out = {};
out.columns = (await con.runAndReadAll(`DESCRIBE SELECT * FROM ${src}`)).getRowObjects()
    .map(r => [r.column_name, r.column_type]);
out.counts = (await con.runAndReadAll(
    `SELECT name, count(*) AS n FROM ${src} GROUP BY name ORDER BY name`)).getRowObjects();
const hasPath = out.columns.some(c => c[0] === 'args' && /\bpath VARCHAR\b/.test(c[1]));
out.paths = hasPath ? (await con.runAndReadAll(
    `SELECT DISTINCT args.path AS p FROM ${src} WHERE args.path IS NOT NULL ORDER BY p`))
    .getRowObjects().map(r => r.p) : [];
console.log(JSON.stringify(out, big));
"""


def modules():
    d = os.environ.get("TFS_VIEWERS_DIR") or os.path.expanduser("~/.cache/tracefs-viewers")
    return os.path.join(d, "node_modules")


def missing():
    if not shutil.which("node"):
        return "no node"
    if not os.path.isdir(os.path.join(modules(), "@duckdb", "node-api")):
        return "no @duckdb/node-api in %s (npm install @duckdb/node-api)" % modules()
    return None


def run(cmd, timeout=600, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                       stdin=subprocess.DEVNULL, **kw)
    return p.returncode, p.stdout, p.stderr


def summary_counts(text):
    """{kind: count} of summary.txt's `kind` lines."""
    out = {}
    for line in text.decode().splitlines():
        f = line.split()
        if len(f) >= 6 and f[0] == "kind":
            out[f[-1]] = out.get(f[-1], 0) + int(f[1])
    return out


def struct_fields(t):
    """Top-level (name, type) fields of a DuckDB STRUCT type's text."""
    inner = t[t.index("(") + 1:t.rindex(")")]
    fields, depth, cur = [], 0, ""
    for ch in inner + ",":
        if ch == "," and depth == 0:
            name, _, typ = cur.strip().partition(" ")
            fields.append((name.strip('"'), typ.strip()))
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    return fields


def check(tap, args, label, trace, work):
    rc, ranks, err = run([args.tracefs, "ls", trace, "ranks"])
    if not tap.ok(rc == 0, "%s: ranks listed" % label, err):
        return None
    jsonl = os.path.join(work, label + ".jsonl")
    with open(jsonl, "wb") as f:
        for r in (ln.split()[-1] for ln in ranks.decode().splitlines() if ln.strip()):
            rc, body, err = run([args.tracefs, "cat", trace, "ranks/%s/events.jsonl" % r])
            if rc != 0:
                tap.ok(False, "%s: ranks/%s/events.jsonl" % (label, r), err)
                return None
            f.write(body)
    script = os.path.join(modules(), "..", "tfs_duckdb_check.mjs")
    with open(script, "w") as f:
        f.write(QUERY)
    rc, out, err = run(["node", script, jsonl], timeout=900)
    if not tap.ok(rc == 0, "%s: DuckDB reads events.jsonl" % label, err):
        return None
    got = json.loads(out)
    cols = dict(got["columns"])
    tap.ok(all(cols.get(c) == "BIGINT" for c in ("rank", "thread")) and
           cols.get("name") == "VARCHAR" and
           all(cols.get(c, "BIGINT") == "BIGINT" for c in ("ts", "dur")),
           "%s: ts, dur, rank and thread are integers, name a string" % label, cols)
    fields = struct_fields(cols.get("args", "STRUCT()")) if "STRUCT" in cols.get("args", "") \
        else []
    loose = [f for f in fields if f[1] == "JSON"]
    tap.ok(fields and not loose,
           "%s: args is a struct of %d fields, none of the catch-all JSON type (one type a "
           "name)" % (label, len(fields)), loose or cols.get("args"))
    rc, summ, err = run([args.tracefs, "cat", trace, "summary.txt"])
    want = summary_counts(summ) if rc == 0 else {}
    have = {r["name"]: r["n"] for r in got["counts"]}
    tap.ok(want and have == want, "%s: DuckDB's count per call equals summary.txt's (%d kinds)"
           % (label, len(want)),
           {k: (have.get(k), want.get(k)) for k in set(have) | set(want)
            if have.get(k) != want.get(k)})
    return got, jsonl


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--demo", required=True)
    args = ap.parse_args()
    tap = Tap()
    why = missing()
    if why:
        for c in ("python3 trace", "synthetic trace"):
            tap.skip("DuckDB loads events.jsonl of a %s" % c, why)
        return tap.done()
    work = tempfile.mkdtemp(prefix="tfs-duckdb-")
    try:
        d = os.path.join(work, "files")
        os.mkdir(d)
        trace = os.path.join(work, "py.trace")
        rc, _, err = run([args.tracefs, "record", "-o", trace, "--", sys.executable, "-c",
                          PROGRAM, d])
        if tap.ok(rc == 0, "python3 writing UTF-8 file names traced", err):
            res = check(tap, args, "python3", trace, work)
            if res:
                got, jsonl = res
                mine = [os.path.join(d, n) for n in NAMES]
                tap.ok(all(p in got["paths"] for p in mine),
                       "python3: DuckDB reads the UTF-8 and control-byte paths back as the "
                       "program wrote them", [p for p in got["paths"] if d in p])
                seen = set()
                with open(jsonl, "rb") as f:
                    for line in f:
                        p = json.loads(line)["args"].get("path")
                        if isinstance(p, str):
                            seen.add(p.encode("utf-8", "surrogateescape"))
                tap.ok(all(os.fsencode(p) in seen for p in mine),
                       "python3: Python's json gives every path's bytes back")
        trace = os.path.join(work, "synth.trace")
        rc, _, err = run([args.demo, "-o", trace, "--events", "20000", "--ranks", "3",
                          "--threads", "2"])
        if tap.ok(rc == 0, "synth_demo writes a trace", err):
            check(tap, args, "synthetic", trace, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
