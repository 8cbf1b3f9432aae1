#!/usr/bin/env python3
"""What libtfscapture.so exports is exactly its API and the functions of calls.txt (TAP).

Every interposed libc function is declared once, in capture/calls.txt; gen_calls.py makes its
wrapper and its line of the version script. This checks the result from both ends:
1. the library's dynamic symbol table (nm -D --defined-only) holds every function calls.txt
   lists, and nothing else but the documented API (tfs_cap_*, tfs_capture_*) and the few
   cap_* entry points libtfsmpi.so calls;
2. every function a source file of capture/ defines with EXPORT (a hand-written interposer)
   is a function of calls.txt: an interposer written by hand and not declared there would be
   neither exported nor recorded.

3. libtfsinproc.so, the in-process consumer, exports its one table (cap_inproc_ops), and
   libtfscapture.so, which `tracefs record` preloads into every process it traces, needs no
   library of the consumer's (zstd, libdw, libelf, libm): a traced process loads none of them;
4. libtfsmpi.so and libtfsmpi-ompi.so (when built) export exactly the MPI functions they
   wrap (the generator's list) and their PMPI twins: no codec or runtime symbol that could
   clash with a traced program's own.
5. gen_calls.py's `from KIND if COND` (a kind recording another's functions when COND
   holds): a table using it generates a wrapper that tests COND and records either kind;
   the tables that misuse it are refused, each with its reason.

  check_exports.py --lib libtfscapture.so --list interposed.txt --calls calls.txt --src DIR
                   --inproc-lib libtfsinproc.so [--mpi-lib LIB --mpi-list FUNCTIONS.txt]...
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

# what libtfsmpi.so calls in libtfscapture.so (capture.map.in)
MPI_ENTRY = {"cap_put_call", "cap_now_ns", "cap_tls_depth", "cap_call_depth", "cap_call_outer",
             "cap_trace_now", "cap_alloc_lookup"}


def table_syms(path):
    """The function names of the `sym` lines of calls.txt, read independently of gen_calls."""
    names = []
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*sym\s+[^|(]*?\b(\w+)\s*\(", line)
            if m:
                names.append(m.group(1))
    return names


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], stdout=subprocess.PIPE,
                         check=True).stdout.decode()
    names = set()
    for line in out.splitlines():
        tok = line.split()
        if len(tok) >= 3 and tok[1] in "TWiBDV" and tok[1] != "A":
            names.add(tok[2].split("@")[0])
    return names


def needed(lib):
    """The DT_NEEDED entries of @lib (readelf -d)."""
    out = subprocess.run(["readelf", "-d", lib], stdout=subprocess.PIPE,
                         check=True).stdout.decode()
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^]]+)\]", out)


FROM_BASE = "kind f io\n\tsym int f(int a)\n\targs a:i64 RET\n\treplay f($a);\n"
FROM_CASES = [  # (what, the sub kind's lines, a part of the refusal or None: accepted)
    ("a kind from another", "kind g io\n\tfrom f if a>1\n\targs a:i64 b:i64=a+1 RET\n"
     "\treplay f($b);\n", None),
    ("from no kind", "kind g io\n\tfrom h if a>1\n\targs a:i64 RET\n\treplay f($a);\n",
     "no kind with functions"),
    ("with a sym of its own", "kind g io\n\tfrom f if a>1\n\tsym int h(int a)\n"
     "\targs a:i64 RET\n\treplay f($a);\n", "no sym, post"),
    ("with a post of its own", "kind g io\n\tfrom f if a>1\n\targs a:i64 RET\n"
     "\tpost (void)a;\n\treplay f($a);\n", "no sym, post"),
    ("of another category", "kind g alloc\n\tfrom f if a>1\n\targs a:i64 RET\n"
     "\treplay f($a);\n", "not the category"),
    ("with neither replay nor noreplay", "kind g io\n\tfrom f if a>1\n\targs a:i64 RET\n",
     "no replay line"),
    ("without a condition", "kind g io\n\tfrom f\n\targs a:i64 RET\n\treplay f($a);\n",
     "from KIND if COND"),
]


def check_from(tap, gen):
    """gen_calls.py on small tables using `from` (item 5 above)."""
    with tempfile.TemporaryDirectory(prefix="tfs-gencalls.") as d:
        for what, sub, refusal in FROM_CASES:
            table, wrap = os.path.join(d, "calls.txt"), os.path.join(d, "wrap.c")
            with open(table, "w") as f:
                f.write(FROM_BASE + sub)
            p = subprocess.run([sys.executable, gen, table, "--wrap", wrap],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if refusal is None:
                body = open(wrap).read() if p.returncode == 0 else ""
                tap.ok(p.returncode == 0 and "if (a>1) {" in body and
                       "cap_put_call(CALL_G, t0, w, 5," in body and
                       "cap_put_call(CALL_F, t0, w, 4," in body,
                       "gen_calls: %s records it when its condition holds, else the kind"
                       % what, p.stderr)
            else:
                tap.ok(p.returncode != 0 and refusal in p.stderr,
                       "gen_calls refuses a kind `from` another %s" % what, p.stderr)


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--lib", "--list", "--calls", "--src", "--inproc-lib"):
        ap.add_argument(opt, required=True)
    ap.add_argument("--mpi-lib", action="append", default=[])
    ap.add_argument("--mpi-list", action="append", default=[])
    a = ap.parse_args()
    tap = Tap()
    syms = table_syms(a.calls)
    with open(a.list) as f:
        listed = [line.strip() for line in f if line.strip()]
    tap.ok(listed == syms, "gen_calls.py lists exactly the sym lines of calls.txt (%d)"
           % len(syms), sorted(set(listed) ^ set(syms)))
    tap.ok(len(set(syms)) == len(syms), "no function is declared twice in calls.txt")
    exp = exported(a.lib)
    missing = sorted(set(syms) - exp)
    tap.ok(not missing, "every function of calls.txt is exported (%d)" % len(syms), missing)
    api = {n for n in exp if n.startswith("tfs_cap_") or n.startswith("tfs_capture_")}
    extra = sorted(exp - set(syms) - api - MPI_ENTRY)
    tap.ok(not extra, "nothing is exported but calls.txt's functions, the API and the MPI "
           "wrappers' entry points", extra)
    tap.ok(len(api) > 5, "the capture API is exported (%d tfs_cap_*/tfs_capture_*)" % len(api))
    hand = set()
    for src in glob.glob(os.path.join(a.src, "*.c")):
        with open(src) as f:
            for m in re.finditer(r"^EXPORT\s+[^(;]*?\b(\w+)\s*\(", f.read(), re.M):
                hand.add(m.group(1))
    undeclared = sorted(hand - set(syms))
    tap.ok(hand and not undeclared, "every hand-written interposer (%d EXPORT definitions) is "
           "declared in calls.txt" % len(hand), undeclared)
    exp = exported(a.inproc_lib)
    tap.ok(exp == {"cap_inproc_ops"}, "libtfsinproc.so exports its table alone", sorted(exp))
    deps = needed(a.lib)
    consumer = [d for d in deps if re.match(r"lib(zstd|dw|elf|m|z|tfsinproc)\.so", d)]
    tap.ok(deps and not consumer, "libtfscapture.so needs none of the consumer's libraries",
           deps)
    check_from(tap, os.path.join(a.src, "gen_calls.py"))
    for lib, flist in zip(a.mpi_lib, a.mpi_list):
        with open(flist) as f:
            wrapped = {line.strip() for line in f if line.strip()}
        exp = exported(lib)
        name = os.path.basename(lib)
        want = wrapped | {"P" + n for n in wrapped}
        tap.ok(wrapped and exp - want <= set() and not (wrapped - exp),
               "%s exports the %d MPI functions it wraps, their PMPI twins and nothing else"
               % (name, len(wrapped)),
               "extra %s; missing %s" % (sorted(exp - want)[:20], sorted(wrapped - exp)[:20]))
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
