#!/usr/bin/env python3
"""`tracefs compare` end to end, on traces mkcompare writes: the same calls compare equal
whatever their rule structure (one grammar block or many, signatures numbered otherwise),
and exit 0; one call apart in the middle of 10^7 calls per rank, they differ, and the output
names the rank, the thread, the event index and both calls; a trace one call longer
differs where the shorter ends; a value apart is the same calls unless --values; bad
arguments are usage errors. Every expectation comes from what mkcompare was told to write.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'helpers'))
from tap import Tap  # noqa: E402

LONG = 10_000_000
MIDDLE = 5_000_002  # a `call` with op 2 and a peer (event index % 3 == 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--tracefs', required=True)
    ap.add_argument('--mk', required=True)
    o = ap.parse_args()
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        def mk(name, n, variant, k=0):
            path = os.path.join(tmp, name)
            res = subprocess.run([o.mk, path, str(n), variant, str(k)], capture_output=True,
                                 text=True, timeout=600)
            if res.returncode != 0:
                t.diag(f'mkcompare {name}: {res.stderr}')
                sys.exit(1)
            return path

        def cmp(*args):
            res = subprocess.run([o.tracefs, 'compare', *args], capture_output=True,
                                 text=True, timeout=600)
            return res.returncode, res.stdout, res.stderr

        plain = mk('plain.trace', LONG, 'plain')
        rc, out, err = cmp(plain, plain)
        t.ok(rc == 0 and 'the traces make the same calls (2 ranks)' in out and
             out.count('same calls (10000000 events, 1 thread)') == 2,
             'a trace makes the same calls as itself, rank by rank', out + err)

        call = mk('call.trace', LONG, 'call', MIDDLE)
        rc, out, err = cmp(plain, call)
        lines = out.splitlines()
        t.ok(rc == 1 and 'rank 0: same calls (10000000 events, 1 thread)' in lines and
             f'rank 1 thread 0: differ at event {MIDDLE}' in lines,
             'one call apart in the middle of 10^7: the rank, thread and event index', out)
        a = next((ln for ln in lines if ln.startswith('  A: ')), '')
        b = next((ln for ln in lines if ln.startswith('  B: ')), '')
        t.ok(re.search(r'call\(op=2, peer=0, bytes=\d+\)$', a) and
             re.search(r'call\(op=9, peer=0, bytes=\d+\)$', b),
             'both calls are named', f'{a}\n{b}')
        t.ok('the traces differ: 1 of 2 ranks make the same calls' in out,
             'the summary counts the ranks that match', out)

        longer = mk('longer.trace', LONG, 'longer')
        rc, out, _ = cmp(plain, longer)
        t.ok(rc == 1 and f'rank 1 thread 0: differ at event {LONG} (one ends there)' in out and
             f'  A: (ends after {LONG} events)' in out,
             'one call longer: they differ where the shorter ends', out)
        rc, out, _ = cmp(longer, plain)
        t.ok(rc == 1 and f'  B: (ends after {LONG} events)' in out,
             'and the other way round', out)

        value = mk('value.trace', LONG, 'value', MIDDLE)
        rc, out, _ = cmp(plain, value)
        t.ok(rc == 0, 'a value apart: the same calls (values are not compared)', out)
        rc, out, _ = cmp('--values', plain, value)
        t.ok(rc == 1 and f'rank 0 thread 0: differ at event {MIDDLE}' in out and
             'rank 1: same calls' in out, 'with --values, the event whose value differs', out)

        irr = mk('irr.trace', 1_000_000, 'irregular')
        blocks = mk('blocks.trace', 1_000_000, 'irregular,blocks')
        info = subprocess.run([o.tracefs, 'info', '--json', blocks], capture_output=True,
                              text=True).stdout
        t.ok(re.search(r'"blocks": (\d{3,})', info) is not None,
             'the irregular trace written with a small budget has hundreds of grammar blocks',
             info[:400])
        rc, out, _ = cmp(irr, blocks)
        t.ok(rc == 0, 'the same calls in another rule structure compare equal', out)
        irr_call = mk('irr_call.trace', 1_000_000, 'irregular,blocks,call', 777_777)
        rc, out, _ = cmp(irr, irr_call)
        t.ok(rc == 1 and 'rank 1 thread 0: differ at event 777777' in out,
             'one call apart in another rule structure: found at its index', out)

        # what is left out unless asked: file names and format strings
        prints = {v: mk(v + '.trace', 30, v) for v in ('print', 'printpath', 'printformat')}
        for word, opt, shown in (('path', '--paths', 'path="/tmp/b.txt"'),
                                 ('format', '--formats', 'format="%x\\n"')):
            other = prints['print' + word]
            rc, out, _ = cmp(prints['print'], other)
            t.ok(rc == 0 and out.count('same calls (31 events, 1 thread)') == 2,
                 f'another {word} only: the same calls', out)
            rc, out, _ = cmp(opt, prints['print'], other)
            b = next((ln for ln in out.splitlines() if ln.startswith('  B: ')), '')
            t.ok(rc == 1 and 'rank 1 thread 0: differ at event 0' in out and
                 'rank 0: same calls' in out and shown in b,
                 f'with {opt}, the first call differs and shows its {word}', out)

        rc, _, err = cmp(plain)
        t.ok(rc == 2 and err.startswith('tracefs: compare: needs two TRACEs') and
             err.rstrip().endswith("(try 'tracefs compare --help')"),
             'one trace only: a usage error', err)
        rc, _, err = cmp('--bogus', plain, plain)
        t.ok(rc == 2 and 'unknown option' in err, 'an unknown option: a usage error', err)
        rc, _, err = cmp(plain, os.path.join(tmp, 'missing.trace'))
        t.ok(rc == 1 and err.startswith('tracefs: cannot open') and len(err.splitlines()) == 1,
             'a missing trace: one line, exit 1', err)
    return t.done()


if __name__ == '__main__':
    sys.exit(main())
