#!/usr/bin/env python3
"""Replay of MPI traces end to end: each test program is recorded under
`mpiexec -n P tracefs record`, its replay/proxy.c is built with the MPI's mpicc and run at
the same rank count under `tracefs record` again, and the two traces must make the same
calls: `tracefs compare` says so (exit 0), and so does this script's own count of every
rank's calls per function and their order, read from each trace's events.jsonl. Also: the
proxy's structure follows the grammar (a function per distinct grammar, a loop per
repetition), README.txt says how to build and run it, an untimed trace's proxy has no
compute, and --no-compute replays the same calls. With --openmpi the same under Open MPI
(its mpiexec, its mpicc, the programs built against it). Exits 77 without MPI.
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'helpers'))
from tap import Tap  # noqa: E402

# the programs the issue names: name, ranks, arguments
PROGRAMS = [
    ('ring', 4, ['3']),
    ('stencil2d', 9, ['4']),
    ('stencil3d', 8, ['3']),
    ('coll', 5, []),
    ('dtype', 2, []),
    ('comms', 6, []),
    ('anysome', 5, []),
    ('fileio', 4, ['fileio.dat']),
    ('manytags', 4, ['100', '3']),
]
OMPI_PROGRAMS = ['ring', 'stencil2d', 'stencil3d', 'anysome', 'fileio']


class Run:
    def __init__(self, o, tmp):
        self.o, self.tmp = o, tmp
        self.env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1',
                        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1')

    def launch(self, n):
        cmd = [self.o.mpiexec]
        if self.o.openmpi:
            cmd.append('--oversubscribe')
        return cmd + ['-n', str(n)]

    def record(self, n, trace, argv, cwd, extra=()):
        cmd = self.launch(n) + [self.o.tracefs, 'record', '--trace=mpi', *extra, '-o', trace,
                                '--'] + argv
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=cwd,
                              env=self.env)

    def tracefs(self, *args):
        return subprocess.run([self.o.tracefs, *args], capture_output=True, text=True,
                              timeout=600)

    def build(self, src, exe):
        return subprocess.run(self.o.mpicc.split() + ['-O2', src, '-o', exe],
                              capture_output=True, text=True, timeout=600)


def calls(run, trace, n_ranks):
    """Every rank's MPI calls in order, from events.jsonl."""
    out = {}
    for r in range(n_ranks):
        res = run.tracefs('cat', trace, f'ranks/{r}/events.jsonl')
        if res.returncode != 0:
            return None
        out[r] = [json.loads(ln)['name'] for ln in res.stdout.splitlines() if ln.strip()]
    return out


def distinct_grammars(run, trace):
    """Streams with other values may share a grammar: grammar.txt shows one body per stream
    of distinct data, so count the distinct bodies."""
    res = run.tracefs('cat', trace, 'grammar.txt')
    bodies = re.split(r'^== stream .*$', res.stdout, flags=re.M)[1:]
    return len(set(bodies))


def replay(t, run, name, n, args, extra=(), proxy_args=(), label=''):
    """Record @name, build and record its proxy; the two traces, or None."""
    d = os.path.join(run.tmp, f'{name}{label}')
    os.makedirs(d, exist_ok=True)
    prog = os.path.join(run.o.bindir, f'mpi_{name}')
    orig = os.path.join(d, 'orig.trace')
    res = run.record(n, orig, [prog] + args, d, extra)
    if not t.ok(res.returncode == 0, f'{name}{label}: the program runs recorded at {n} ranks',
                res.stderr[-2000:]):
        return None
    src = os.path.join(d, 'proxy.c')
    res = run.tracefs('cat', orig, 'replay/proxy.c')
    if not t.ok(res.returncode == 0 and res.stdout.startswith('/*\n * proxy.c: '),
                f'{name}{label}: replay/proxy.c is served', res.stderr):
        return None
    with open(src, 'w') as f:
        f.write(res.stdout)
    exe = os.path.join(d, 'proxy')
    res = run.build(src, exe)
    if not t.ok(res.returncode == 0, f'{name}{label}: proxy.c builds with {run.o.mpicc}',
                res.stderr[-3000:]):
        return None
    again = os.path.join(d, 'proxy.trace')
    res = run.record(n, again, [exe, *proxy_args], d, extra)
    if not t.ok(res.returncode == 0, f'{name}{label}: the proxy runs recorded at {n} ranks',
                res.stderr[-2000:] + res.stdout[-1000:]):
        return None
    return orig, again, res


def check_program(t, run, name, n, args):
    got = replay(t, run, name, n, args)
    if not got:
        return
    orig, again, _ = got
    res = run.tracefs('compare', orig, again)
    t.ok(res.returncode == 0 and f'the traces make the same calls ({n} ranks)' in res.stdout,
         f'{name}: tracefs compare says the proxy makes the same calls', res.stdout[-3000:])
    a, b = calls(run, orig, n), calls(run, again, n)
    t.ok(a is not None and a == b,
         f'{name}: every rank makes the same MPI calls in the same order (events.jsonl)',
         first_diff(a, b))
    ca = {r: collections.Counter(v) for r, v in (a or {}).items()}
    cb = {r: collections.Counter(v) for r, v in (b or {}).items()}
    t.ok(a is not None and ca == cb and sum(len(v) for v in a.values()) > n * 3,
         f'{name}: the same count of calls per function per rank', repr((ca, cb))[:2000])
    src = open(os.path.join(os.path.dirname(orig), 'proxy.c')).read()
    g = distinct_grammars(run, orig)
    t.ok(len(re.findall(r'^static void g\d+_run\(void\)$', src, re.M)) == g,
         f'{name}: one function per distinct grammar ({g}), shared by the ranks that have it',
         src[-1500:])
    if name == 'stencil2d':
        t.ok(re.search(r'for \(uint64_t i = 0; i < 4u; i\+\+\)\n\t\tg\d+_0_\d+\(\);', src),
             'stencil2d: its 4 iterations are a loop over a rule function', src[-3000:])


def first_diff(a, b):
    if a is None or b is None:
        return 'no events'
    for r in a:
        for i, (x, y) in enumerate(zip(a[r], b.get(r, []))):
            if x != y:
                return f'rank {r} call {i}: {x} != {y}'
        if len(a[r]) != len(b.get(r, [])):
            return f'rank {r}: {len(a[r])} calls != {len(b.get(r, []))}'
    return ''


def check_readme(t, run):
    d = os.path.join(run.tmp, 'ring')
    res = run.tracefs('cat', os.path.join(d, 'orig.trace'), 'replay/README.txt')
    text = res.stdout
    t.ok(res.returncode == 0 and 'mpicc -O2 proxy.c -o proxy' in text and
         'mpiexec -n 4 ./proxy' in text and 'Replayed exactly:' in text and
         'Approximated:' in text and 'Left out:' in text and
         re.search(r'^  MPI_Sendrecv +\d+ +12  replayed$', text, re.M),
         'README.txt: how to build and run, what is exact, approximated, left out, and '
         'each kind of this trace', text[-1500:])


def check_untimed(t, run):
    got = replay(t, run, 'stencil2d', 9, ['4'], extra=('--timing=none',), label='_untimed')
    if not got:
        return
    orig, again, _ = got
    src = open(os.path.join(os.path.dirname(orig), 'proxy.c')).read()
    t.ok('#define PROXY_TIMED 0' in src and 'RT_LIN' not in src.split('generated from')[1],
         'an untimed trace: a proxy without compute (no busy waits, no value slots)', '')
    res = run.tracefs('compare', orig, again)
    t.ok(res.returncode == 0, 'an untimed trace: its proxy makes the same calls', res.stdout)


def check_no_compute(t, run):
    got = replay(t, run, 'stencil2d', 9, ['4'], proxy_args=('--no-compute',),
                 label='_nocompute')
    if not got:
        return
    orig, again, _ = got
    src = open(os.path.join(os.path.dirname(orig), 'proxy.c')).read()
    t.ok('#define PROXY_TIMED 1' in src, 'a timed trace: the proxy waits between calls', '')
    res = run.tracefs('compare', orig, again)
    t.ok(res.returncode == 0, '--no-compute: the same calls', res.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--tracefs')
    ap.add_argument('--bindir')
    ap.add_argument('--mpiexec')
    ap.add_argument('--mpicc')
    ap.add_argument('--openmpi', action='store_true')
    ap.add_argument('--skip-why')
    o = ap.parse_args()
    t = Tap()
    for k in ('tracefs', 'bindir'):
        if getattr(o, k):
            setattr(o, k, os.path.abspath(getattr(o, k)))
    if o.skip_why or not o.mpicc or not shutil.which(o.mpicc.split()[0]):
        print(f'1..0 # SKIP {o.skip_why or "no mpicc"}')
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        run = Run(o, tmp)
        for name, n, args in PROGRAMS:
            if o.openmpi and name not in OMPI_PROGRAMS:
                continue
            check_program(t, run, name, n, args)
        if not o.openmpi:
            check_readme(t, run)
            check_untimed(t, run)
            check_no_compute(t, run)
    return t.done()


if __name__ == '__main__':
    sys.exit(main())
