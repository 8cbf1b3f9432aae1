#!/usr/bin/env python3
"""End-to-end tests of symbolisation (TAP): how `tracefs record` names the frames of
allocation backtraces, read back from the trace's views (backtraces.txt, allocs.folded) and
through the reader API (bt_dump --symbols: every address of every rank with its frames).

1. C++ (cap_cxx.cpp, when the build found a C++ compiler): the frames of a static member
   function in a namespace, a function template, a lambda and a function with an ABI tag
   are demangled, exactly as the C++ ABI spells them (the names below are written from the
   source, and checked against c++filt and nm -C when binutils are installed), at the
   lines marked "bt:NAME" in the source, in backtraces.txt and allocs.folded alike.
   The same at -O2 (cap_cxx_inline.cpp): functions in a namespace, a class, a nested and an
   anonymous namespace, forced inline into main, so that their origins have no linkage name,
   are named with their scopes ("qa::risky", "(anonymous namespace)::hidden") and marked
   [inlined] at the marked lines; an extern "C" function in a namespace keeps its plain
   name, its symbol's.
2. A stripped program (cap_bt with its symbol table removed by strip): its frames have no
   names and print as "<file name>+0x<return address in the file>": four call sites give
   four different names, each inside the function that nm finds in the unstripped binary,
   and no two different addresses of the trace print alike.
3. `gcc -O2 -c` of a generated C file (gcc, cc1 and as: three processes): every process's
   frames are named, and cc1's (a stripped program with 28,000 dynamic symbols) are named
   exactly as nm -D and c++filt name the symbol holding each address, else
   "cc1+0x<address>".
4. `make -j2` of three files (ten processes, three of them cc1): every process's frames are
   named, and the recorder opens each object file once (TFS_SYMBOL_STATS: cc1 once for
   three cc1 processes), the later cc1 processes finding most of their addresses in the
   cache of the first. No timing is checked: tests/bench/run_symbols measures.
5. Names kept on disk between recordings (TRACEFS_SYMBOL_DIR): cap_bt recorded into an
   empty directory writes a file per object file (mode 0600, in a directory of mode 0700);
   recorded again, every address comes from those files and backtraces.txt and
   allocs.folded are byte for byte the first recording's; with every file damaged, the
   files are ignored, the views are the same again and the files are written anew; with
   TRACEFS_SYMBOL_DIR empty nothing is written, and without it the files go to
   $XDG_CACHE_HOME/tracefs/symbols; a program rewritten in place with its inode, size and
   mtime kept (and no build id) is looked up again. (The other tests run with
   TRACEFS_SYMBOL_DIR empty, set for the whole suite in meson.build.)

  check_symbols.py --tracefs T --capbt B --dump D [--cxx X --cxx-source cap_cxx.cpp]
                   [--cxx-inline Y --cxx-inline-source cap_cxx_inline.cpp]
"""

import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

ENV_DROP = ("TFS_CAPTURE", "TFS_OUTPUT", "TFS_SPOOL", "TFS_TIMING", "TFS_TRACE",
            "TFS_BACKTRACE_DEPTH", "LD_PRELOAD", "TFS_SYMBOL_STATS", "TFS_SYMBOL_CACHE",
            "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
UNNAMED = re.compile(r"^(.+)\+0x([0-9a-f]+)$")

# cap_cxx.cpp's functions as the Itanium C++ ABI names them, and as they read demangled
CXX_NAMES = {
    "cells": ("_ZN3geo4Grid5cellsEi", "geo::Grid::cells(int)"),
    "make": ("_ZN3geo4makeIdEEPT_m", "double* geo::make<double>(unsigned long)"),
    "lambda": ("_ZZ4mainENKUliE_clEi", "main::{lambda(int)#1}::operator()(int) const"),
    "build": ("_ZN3geo5buildB5cxx11Ei", "geo::build[abi:cxx11](int)"),
    "new": ("_Znwm", "operator new(unsigned long)"),
}


def run(cmd, timeout=600, env=None, cwd=None):
    e = {k: v for k, v in os.environ.items() if k not in ENV_DROP}
    for k, v in (env or {}).items():  # None: unset
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e, cwd=cwd,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def record(args, work, name, cmd, cwd=None, env=None):
    """Record @cmd with TFS_SYMBOL_STATS=1: (trace path, the recorder's stderr)."""
    trace = os.path.join(work, name + ".trace")
    rc, _, err = run([args.tracefs, "record", "-o", trace, "--trace=alloc", "--"] + cmd,
                     env=dict({"TFS_SYMBOL_STATS": "1"}, **(env or {})), cwd=cwd)
    if rc != 0:
        raise RuntimeError("record %s: status %d: %s" % (name, rc, err))
    return trace, err


def view(args, trace, path):
    rc, out, err = run([args.tracefs, "cat", trace, path])
    if rc != 0:
        raise RuntimeError("tracefs cat %s %s: %s" % (trace, path, err))
    return out


def symbols(args, trace):
    """{rank: {address: [(function, file, line)...]}} from bt_dump --symbols."""
    rc, out, err = run([args.dump, "--symbols", trace])
    if rc != 0:
        raise RuntimeError("bt_dump --symbols %s: %s" % (trace, err))
    ranks = {}
    for line in out.splitlines():
        f = line.split("\t")
        frames = [(f[i], f[i + 1], int(f[i + 2])) for i in range(2, len(f) - 2, 3)]
        ranks.setdefault(int(f[0]), {})[int(f[1], 16)] = frames
    return ranks


def stacks(text):
    """backtraces.txt as [[frame line without its indent]] in stack order."""
    out = []
    for line in text.splitlines():
        if line.startswith("stack#"):
            out.append([])
        elif out and line.startswith("  "):
            out[-1].append(line[2:])
    return out


def parse(line):
    """A backtraces.txt frame line: (name, "<base name>:<line>)" or None)."""
    m = re.match(r"^(.*) \((.*)\)( \[inlined\])?$", line)
    if not m:
        return (line, None)
    return (m.group(1), os.path.basename(m.group(2)) + ")")


def markers(source):
    found = {}
    with open(source) as f:
        for i, line in enumerate(f, 1):
            m = re.search(r"bt:(\w+)", line)
            if m:
                found[m.group(1)] = i
    return found


def tool(name):
    return shutil.which(name)


def demangle_all(names):
    """c++filt of each of @names (None without c++filt)."""
    if not tool("c++filt"):
        return None
    p = subprocess.run(["c++filt"], input="\n".join(names) + "\n", stdout=subprocess.PIPE,
                       text=True, check=True)
    return p.stdout.splitlines()


def stats_lines(err):
    """TFS_SYMBOL_STATS: (files opened, [(program, addresses, named, from the cache)])."""
    opened = re.findall(r"^tracefs: symbols: open (.*)$", err, re.M)
    per = [(m[0], int(m[1]), int(m[2]), int(m[3])) for m in re.findall(
        r"^tracefs: symbols: (.*): (\d+) addresses \((\d+) named, (\d+) from the cache\)",
        err, re.M)]
    return opened, per


# ---- 1. C++ ----

def test_cxx(tap, args, work):
    if not args.cxx:
        tap.skip("C++ names demangled", "the build found no C++ compiler (cap_cxx not built)")
        return
    mk = markers(args.cxx_source)
    src = os.path.basename(args.cxx_source)
    filt = demangle_all([m for m, _ in CXX_NAMES.values()])
    if filt is None:
        tap.skip("the expected names are c++filt's", "c++filt missing")
    else:
        want = [d for _, d in CXX_NAMES.values()]
        tap.ok(filt == want, "the expected names are c++filt's demangling of the mangled ones",
               "c++filt %r\nwant     %r" % (filt, want))
    if tool("nm"):
        _, nm, _ = run(["nm", "-C", args.cxx])
        missing = [d for k, (_, d) in CXX_NAMES.items() if k != "new" and d not in nm]
        tap.ok(not missing, "nm -C of cap_cxx holds the four names", repr(missing))
    trace, _ = record(args, work, "cxx", [args.cxx])

    def loc(marker):
        return "%s:%d)" % (src, mk[marker])

    def frame(key, marker):
        return (CXX_NAMES[key][1], loc(marker))

    chains = {  # from main on: (name, "<file>:<line>)" or None), the allocation's size
        4004: [("main", loc("main_cells")), frame("cells", "cells"), (CXX_NAMES["new"][1], None)],
        5000: [("main", loc("main_make")), frame("make", "make")],
        7007: [("main", loc("main_lambda")), frame("lambda", "lambda")],
        6001: [("main", loc("main_build")), frame("build", "build")],
    }
    bt = stacks(view(args, trace, "ranks/0/backtraces.txt"))
    folded = view(args, trace, "ranks/0/allocs.folded").splitlines()

    for size, want in chains.items():
        rows = [r for r in folded if r.endswith(" %d" % size)]
        names = rows[0].rsplit(" ", 1)[0].split(";") if len(rows) == 1 else []
        start = names.index("main") if "main" in names else len(names)
        got_f = names[start:]
        want_f = [w[0] for w in want]
        tail_ok = got_f[:len(want_f)] == want_f
        if size == 6001:  # std::string's constructor frames, then operator new
            tail_ok = tail_ok and got_f[-1] == CXX_NAMES["new"][1]
        elif size == 4004:  # new int[] may reach operator new through operator new[]
            tail_ok = got_f in (want_f, want_f[:2] + ["operator new[](unsigned long)"] + want_f[2:])
        else:
            tail_ok = tail_ok and len(got_f) == len(want_f)
        tap.ok(tail_ok and not any(n.startswith("_Z") for n in names),
               "allocs.folded, %d bytes: %s" % (size, " > ".join(want_f)),
               "rows %r" % rows)
        match = [s for s in bt if [parse(x)[0] for x in s] == names]
        got_b = [parse(x) for x in match[0]] if match else []
        got_b = got_b[[g[0] for g in got_b].index("main"):] if got_b else []
        ok = len(got_b) >= len(want) and all(
            g[0] == w[0] and (w[1] is None or g[1] == w[1]) for g, w in zip(got_b, want))
        tap.ok(ok, "backtraces.txt, %d bytes: the same frames, at the lines marked in %s"
               % (size, src), "want %r\ngot %r" % (want, got_b))


def test_cxx_inline(tap, args, work):
    if not args.cxx_inline:
        tap.skip("inlined C++ frames named with their scopes",
                 "the build found no C++ compiler (cap_cxx_inline not built)")
        return
    mk = markers(args.cxx_inline_source)
    src = os.path.basename(args.cxx_inline_source)
    trace, _ = record(args, work, "cxx_inline", [args.cxx_inline])
    chains = {  # from main on: (name without its parameters, marker), inlined after main
        3002: [("main", "main_fill"), ("qa::Box::fill", "fill"), ("qa::risky", "risky")],
        4001: [("main", "main_dig"), ("qa::deep::dig", "dig")],
        5001: [("main", "main_hidden"), ("(anonymous namespace)::hidden", "hidden")],
        6001: [("main", "main_c_alloc"), ("c_alloc", "c_alloc")],  # extern "C": unscoped
    }
    bt = view(args, trace, "ranks/0/backtraces.txt")
    folded = view(args, trace, "ranks/0/allocs.folded").splitlines()

    def bare(name):  # a linkage name demangles with the parameters
        return name.split("(")[0] if not name.startswith("(") else \
            "(anonymous namespace)" + bare(name[len("(anonymous namespace)"):])

    for size, want in chains.items():
        rows = [r for r in folded if r.endswith(" %d" % size)]
        names = rows[0].rsplit(" ", 1)[0].split(";") if len(rows) == 1 else []
        got = [bare(n) for n in names[names.index("main"):]] if "main" in names else []
        tap.ok(got == [w[0] for w in want], "allocs.folded, %d bytes, inlined: %s"
               % (size, " > ".join(w[0] for w in want)), "rows %r" % rows)
        lines = ["%s (%s:%d)%s" % (name, "*", mk[m], " [inlined]" if i else "")
                 for i, (name, m) in enumerate(want)]
        found = False
        for stack in stacks(bt):
            names = [parse(f)[0] for f in stack]
            frames = stack[names.index("main"):] if "main" in names else []
            if frames and len(frames) == len(want) and all(
                    bare(parse(f)[0]) == w[0] and parse(f)[1] == "%s:%d)" % (src, mk[w[1]])
                    and f.endswith(" [inlined]") == (i > 0 and w[0] != "c_alloc")
                    for i, (f, w) in enumerate(zip(frames, want))):
                found = True
        tap.ok(found, "backtraces.txt, %d bytes: the inlined frames at the marked lines"
               % size, "want %r\ngot %s" % (lines, bt))


# ---- 2. a stripped program ----

def nm_functions(path):
    """{name: (start, size)} of the sized functions nm finds in @path."""
    _, out, _ = run(["nm", "-S", "--defined-only", path])
    fns = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "tTwW":
            fns[f[3]] = (int(f[0], 16), int(f[1], 16))
    return fns


def test_stripped(tap, args, work):
    if not tool("strip") or not tool("nm"):
        tap.skip("a stripped program's frames", "strip or nm missing")
        return
    exe = os.path.join(work, "cap_bt.stripped")
    shutil.copy(args.capbt, exe)
    rc, _, err = run(["strip", "--strip-all", exe])
    _, syms, _ = run(["nm", exe])
    if rc != 0 or "f_calloc" in syms:
        tap.ok(False, "strip removes cap_bt's symbol table", err + syms)
        return
    fns = nm_functions(args.capbt)
    trace, _ = record(args, work, "stripped", [exe, "known"])
    rc, out, err = run([args.dump, trace])
    sites = {"1001": "f_inner", "3006": "f_calloc", "5000": "f_realloc", "1005": "f_memalign"}
    got = {}
    for line in out.splitlines():
        head, _, frames = line.partition(" | ")
        h = head.split()
        if len(h) == 4 and h[1] in ("malloc", "calloc", "realloc", "posix_memalign") and \
                h[2] in sites:
            got[h[2]] = frames.split(" > ")[-1].rsplit(" ", 1)[0]
    names = set(got.values())
    tap.ok(len(got) == 4 and len(names) == 4, "stripped: four call sites print four names",
           repr(got))
    bad = []
    for size, fn in sites.items():
        m = UNNAMED.match(got.get(size, ""))
        lo, n = fns.get(fn, (0, 0))
        if not m or m.group(1) != "cap_bt.stripped" or not lo <= int(m.group(2), 16) - 1 < lo + n:
            bad.append((size, got.get(size), fn, hex(lo), n))
    tap.ok(not bad, "stripped: each prints as cap_bt.stripped+0x<return address>, inside the "
           "function nm names in the unstripped binary", repr(bad))
    seen, clash = {}, []
    for rank, addrs in symbols(args, trace).items():
        for a, frames in addrs.items():
            name = frames[0][0] if frames else ""
            if UNNAMED.match(name):
                if name in seen and seen[name] != a:
                    clash.append((name, hex(a), hex(seen[name])))
                seen[name] = a
    tap.ok(seen and not clash, "stripped: no two different unnamed addresses print alike "
           "(%d unnamed)" % len(seen), repr(clash[:5]))


# ---- 3 and 4: compilers ----

def elf_exec_ranges(path):
    """(e_type, [(lo, hi)] of the executable PT_LOAD segments) of a 64-bit little-endian ELF."""
    with open(path, "rb") as f:
        data = f.read(1 << 20)
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None, []
    e_type = struct.unpack_from("<H", data, 16)[0]
    phoff, = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    ranges = []
    for i in range(phnum):
        p_type, p_flags, _, p_vaddr, _, _, p_memsz, _ = struct.unpack_from(
            "<IIQQQQQQ", data, phoff + i * phentsize)
        if p_type == 1 and p_flags & 1:
            ranges.append((p_vaddr, p_vaddr + p_memsz))
    return e_type, ranges


def dynamic_functions(path):
    """[(start, end, demangled name)] of the sized dynamic function symbols of @path."""
    _, out, _ = run(["nm", "-D", "-S", "--defined-only", path])
    rows = []
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "TtWwi" and int(f[1], 16) > 0:
            rows.append((int(f[0], 16), int(f[0], 16) + int(f[1], 16), f[3]))
    names = demangle_all([r[2] for r in rows]) or [r[2] for r in rows]
    return [(lo, hi, n) for (lo, hi, _), n in zip(rows, names)]


def named(frames):
    name = frames[0][0] if frames else ""
    return name and not UNNAMED.match(name) and not name.startswith("0x")


def gen_c(path, n_funcs):
    with open(path, "w") as f:
        f.write("#include <stdlib.h>\n#include <string.h>\n")
        for i in range(n_funcs):
            f.write("struct s%d { int a[%d]; double d; struct s%d *next; };\n" % (i, i % 5 + 1, i))
            f.write("int f%d(int x)\n{\n\tstruct s%d *p = calloc(1, sizeof(*p));\n" % (i, i))
            f.write("\tint acc = x;\n\tfor (int k = 0; k < %d; k++)\n" % (i % 7 + 2))
            f.write("\t\tacc += (acc * %d) ^ (k << %d) + p->a[k %% %d];\n" % (i * 7 % 31, i % 5,
                                                                           i % 5 + 1))
            f.write("\tfree(p);\n\treturn acc%s;\n}\n" % (" + f%d(acc & 3)" % (i - 1) if i else ""))


def test_gcc(tap, args, work):
    gcc = tool("gcc")
    if not gcc or not tool("nm"):
        tap.skip("gcc -O2 -c recorded", "gcc or nm missing")
        return
    rc, cc1, _ = run([gcc, "-print-prog-name=cc1"])
    cc1 = cc1.strip()
    if rc != 0 or not os.path.isabs(cc1):
        tap.skip("gcc -O2 -c recorded", "gcc does not say where cc1 is: %r" % cc1)
        return
    gen_c(os.path.join(work, "gen.c"), 300)
    trace, err = record(args, work, "gcc", [gcc, "-O2", "-c", "gen.c", "-o", "gen.o"], cwd=work)
    ranks = symbols(args, trace)
    e_type, text = elf_exec_ranges(cc1)
    in_cc1 = {r: [a for a in addrs if any(lo <= a - 1 < hi for lo, hi in text)]
              for r, addrs in ranks.items()}
    unnamed_cc1 = {r: sum(1 for a in addrs if UNNAMED.match(addrs[a][0][0] if addrs[a] else "")
                          and addrs[a][0][0].startswith("cc1+")) for r, addrs in ranks.items()}
    tap.ok(len(ranks) >= 3, "gcc: three processes or more recorded (gcc, cc1, as)",
           "ranks %r" % sorted(ranks))
    bare = [r for r, addrs in ranks.items() if not any(named(f) for f in addrs.values())]
    tap.ok(not bare, "gcc: every process has named frames", "ranks without names: %r" % bare)
    if e_type != 2:  # a position-independent cc1: addresses are not the file's own
        cc1_rank = max(ranks, key=lambda r: unnamed_cc1[r])
        n_named = sum(1 for f in ranks[cc1_rank].values() if named(f))
        tap.ok(n_named >= 100, "gcc: cc1's process names its frames (%d named)" % n_named)
        tap.skip("gcc: cc1's frames named as nm -D names them", "cc1 is not ET_EXEC")
        return
    cc1_rank = max(ranks, key=lambda r: len(in_cc1[r]))
    fns = dynamic_functions(cc1)
    wrong, n_named = [], 0
    for a in in_cc1[cc1_rank]:
        want = {n for lo, hi, n in fns if lo <= a - 1 < hi} or {"cc1+0x%x" % a}
        got = ranks[cc1_rank][a][0][0] if ranks[cc1_rank][a] else None
        n_named += got in want and not got.startswith("cc1+")
        if got not in want:
            wrong.append((hex(a), got, sorted(want)))
    tap.ok(n_named >= 100, "gcc: cc1's process names its own frames (%d of %d addresses)"
           % (n_named, len(in_cc1[cc1_rank])))
    tap.ok(in_cc1[cc1_rank] and not wrong, "gcc: each of cc1's frames is named as nm -D and "
           "c++filt name the symbol holding it, else cc1+0x<address>", repr(wrong[:5]))


def test_make(tap, args, work):
    gcc, make = tool("gcc"), tool("make")
    if not gcc or not make:
        tap.skip("make -j2 recorded", "gcc or make missing")
        return
    _, cc1, _ = run([gcc, "-print-prog-name=cc1"])
    cc1 = os.path.basename(cc1.strip())
    proj = os.path.join(work, "proj")
    os.mkdir(proj)
    for i in range(3):
        gen_c(os.path.join(proj, "m%d.c" % i), 40 + 10 * i)
    with open(os.path.join(proj, "Makefile"), "w") as f:
        f.write("all: m0.o m1.o m2.o\n%.o: %.c\n\t" + gcc + " -O2 -c $< -o $@\n")
    trace, err = record(args, work, "make", [make, "-j2"], cwd=proj)
    ranks = symbols(args, trace)
    opened, per = stats_lines(err)
    bare = [r for r, addrs in ranks.items() if not any(named(f) for f in addrs.values())]
    tap.ok(len(ranks) >= 10 and not bare,
           "make -j2: ten processes or more (make, and gcc, cc1, as per file), each with "
           "named frames", "ranks %d, without names %r" % (len(ranks), bare))
    twice = sorted({p for p in opened if opened.count(p) > 1})
    n_cc1_open = sum(1 for p in opened if os.path.basename(p) == cc1)
    cc1_runs = [p for p in per if p[0] == cc1]
    tap.ok(len(cc1_runs) == 3 and n_cc1_open == 1 and not twice,
           "make -j2: each object file opened once (cc1 once for three cc1 processes)",
           "cc1 processes %r, cc1 opened %d times, opened twice %r"
           % (cc1_runs, n_cc1_open, twice))
    later = sorted(cc1_runs, key=lambda p: p[3])[1:]
    tap.ok(len(later) == 2 and all(p[3] * 2 > p[1] for p in later),
           "make -j2: the later cc1 processes find most of their addresses in the cache",
           repr(cc1_runs))


# ---- 5. names kept on disk ----

def sym_files(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".sym")) if os.path.isdir(d) else []


def test_disk(tap, args, work):
    d = os.path.join(work, "syms", "kept")
    runs = []
    for name in ("cold", "warm", "damaged", "mended"):
        if name == "damaged":
            for f in sym_files(d):
                with open(os.path.join(d, f), "r+b") as fh:
                    b = bytearray(fh.read())
                    b[len(b) // 2] ^= 0x20
                    fh.seek(0)
                    fh.write(b)
        trace, err = record(args, work, "disk_" + name, [args.capbt, "known"],
                            env={"TRACEFS_SYMBOL_DIR": d})
        kept = re.findall(r"^tracefs: symbols: (/.*): (\d+) kept on disk(.*)$", err, re.M)
        _, per = stats_lines(err)
        runs.append((name, kept, per, view(args, trace, "ranks/0/backtraces.txt"),
                     view(args, trace, "ranks/0/allocs.folded"), sym_files(d)))
    (_, k0, p0, bt0, f0, files0), (_, k1, p1, bt1, f1, files1) = runs[0], runs[1]
    st_d = os.stat(d)
    modes = [os.stat(os.path.join(d, f)).st_mode & 0o777 for f in files0]
    tap.ok(len(files0) >= 2 and len(files0) == len(k0) and
           all(n == "0" and note == " (none)" for _, n, note in k0) and
           st_d.st_mode & 0o777 == 0o700 and modes == [0o600] * len(files0),
           "disk, cold: a file per object file, mode 0600 in a directory of mode 0700",
           "files %r, stats %r, modes %o %r" % (files0, k0, st_d.st_mode & 0o777, modes))
    tap.ok(bt0.count("stack#") >= 4 and len(p0) == 1 and p0[0][3] == 0,
           "disk, cold: nothing came from a cache", repr(p0))
    tap.ok(len(k1) == len(k0) and all(int(n) > 0 for _, n, _ in k1) and len(p1) == 1 and
           p1[0][3] == p1[0][1] and p1[0][2] == p0[0][2] and files1 == files0,
           "disk, warm: every address read back from the files",
           "stats %r, per process %r" % (k1, p1))
    tap.ok(bt1 == bt0 and f1 == f0, "disk, warm: backtraces.txt and allocs.folded are the "
           "cold recording's, byte for byte")
    _, k2, p2, bt2, f2, files2 = runs[2]
    tap.ok(all(note == " (not read: damaged)" for _, _, note in k2) and len(k2) == len(k0) and
           p2[0][3] == 0 and bt2 == bt0 and f2 == f0,
           "disk, damaged files: ignored, every address looked up again, the same views",
           "stats %r, per process %r" % (k2, p2))
    _, k3, p3, bt3, f3, _ = runs[3]
    tap.ok(all(int(n) > 0 and note == "" for _, n, note in k3) and p3[0][3] == p3[0][1] and
           bt3 == bt0, "disk, after the damage: the files were written anew and read back",
           "stats %r, per process %r" % (k3, p3))
    # TRACEFS_SYMBOL_DIR empty: nowhere; unset: $XDG_CACHE_HOME/tracefs/symbols
    xdg = os.path.join(work, "syms", "xdg")
    os.makedirs(xdg)
    record(args, work, "disk_off", [args.capbt, "known"],
           env={"TRACEFS_SYMBOL_DIR": "", "XDG_CACHE_HOME": xdg})
    off = os.listdir(xdg)
    record(args, work, "disk_xdg", [args.capbt, "known"],
           env={"TRACEFS_SYMBOL_DIR": None, "XDG_CACHE_HOME": xdg})
    on = sym_files(os.path.join(xdg, "tracefs", "symbols"))
    tap.ok(off == [] and len(on) == len(files0),
           "disk: TRACEFS_SYMBOL_DIR empty writes nothing; unset, the files go to "
           "$XDG_CACHE_HOME/tracefs/symbols", "empty: %r, unset: %r" % (off, on))
    test_disk_rewritten(tap, args, work)


def test_disk_rewritten(tap, args, work):
    """Two builds differing only in a function's name, the second copied over the first in
    place with the first's mtime: the kept names must not outlive the first."""
    gcc = tool("gcc")
    what = "disk: a program rewritten in place, inode, size and mtime kept, is looked up again"
    if not gcc:
        tap.skip(what, "gcc missing")
        return
    exes = {}
    for fn in ("alpha_fn", "omega_fn"):
        src = os.path.join(work, fn + ".c")
        with open(src, "w") as f:
            f.write("#include <stdlib.h>\n__attribute__((noinline)) void *%s(void)\n"
                    "{ return malloc(4242); }\nint main(void) { void *volatile p = %s(); "
                    "free(p); return 0; }\n" % (fn, fn))
        exes[fn] = os.path.join(work, fn)
        rc, _, err = run([gcc, "-g", "-O0", "-Wl,--build-id=none", "-o", exes[fn], src])
        if rc != 0:
            tap.ok(False, what, "gcc: " + err)
            return
    a, o = (open(exes[k], "rb").read() for k in ("alpha_fn", "omega_fn"))
    if len(a) != len(o):
        tap.skip(what, "the two builds differ in size (%d, %d)" % (len(a), len(o)))
        return
    prog, d = os.path.join(work, "inplace"), os.path.join(work, "syms", "inplace")
    with open(prog, "wb") as f:
        f.write(a)
    os.chmod(prog, 0o755)
    env = {"TRACEFS_SYMBOL_DIR": d}
    folded = []
    for body in (a, o):
        st = os.stat(prog)
        with open(prog, "r+b") as f:  # the same inode
            f.write(body)
        os.utime(prog, ns=(st.st_atime_ns, st.st_mtime_ns))
        trace, _ = record(args, work, "inplace", [prog], env=env)
        folded.append(view(args, trace, "ranks/0/allocs.folded"))
    same = os.stat(prog)
    tap.ok("alpha_fn" in folded[0] and "omega_fn" in folded[1] and
           "alpha_fn" not in folded[1] and len(sym_files(d)) >= 2 and same.st_size == len(a),
           what, "first %r\nsecond %r" % (folded[0][-300:], folded[1][-300:]))


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--tracefs", "--capbt", "--dump"):
        ap.add_argument(opt, required=True)
    ap.add_argument("--cxx")
    ap.add_argument("--cxx-source")
    ap.add_argument("--cxx-inline")
    ap.add_argument("--cxx-inline-source")
    args = ap.parse_args()
    for k in ("tracefs", "capbt", "dump", "cxx", "cxx_source", "cxx_inline", "cxx_inline_source"):
        if getattr(args, k):
            setattr(args, k, os.path.abspath(getattr(args, k)))
    tap = Tap()
    with tempfile.TemporaryDirectory(prefix="tfs-sym.") as work:
        for test in (test_cxx, test_cxx_inline, test_stripped, test_gcc, test_make, test_disk):
            try:
                test(tap, args, work)
            except Exception as e:  # a crash of the checker is a failure, not an abort
                tap.ok(False, "%s raised %s: %s" % (test.__name__, type(e).__name__, e))
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
