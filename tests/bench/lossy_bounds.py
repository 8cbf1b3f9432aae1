#!/usr/bin/env python3
"""How small can 10% lossy timing of a trace get? Reads every rank's events from a lossless
trace (`tracefs cat ... events.jsonl`), bins the values as the codec's lossy mode does
(FORMAT.md §7.5: a value's bin is reconstructed within 10% of it), and prints bytes per call:

  strict bound (what `--timing=lossy:10%` keeps): each gap from the previous event's start
  and each duration within 10% of its own value;
  Pilgrim's bound: each duration within 10%, and each start within 10% of the interval
  since the same call signature's previous start (looser: a start may move by a tenth of a
  loop iteration).

For each: the empirical entropies H0 (per call signature) and H1 (also given the
signature's previous bin), measured on the values themselves, so free of any cost of
learning them; and the code lengths of adaptive models that do learn (PPM with escapes,
an arithmetic coder's cost without its rounding): order 0 per signature, order 1 on the
signature's previous bin, order 1 on the previous event's bin, each restarted every 4,096
events as the codec's blocks are, and over a whole stream. A coder of the binned values
does no better than the adaptive figures, and no coder of the per-signature distributions
does better than H0.

Usage: tests/bench/lossy_bounds.py TRACE [--tracefs build-bench/fs/tracefs] [--err 0.1]
"""
import argparse
import bisect
import collections
import json
import math
import os
import subprocess

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
BLOCK = 4096
LEFT_OUT = ('request', 'array_of_requests', 'array_of_statuses', 'status', 'index',
            'array_of_indices')


def bin_table(err):
    """Bin lower bounds: bin k holds [lo[k], lo[k+1]), reconstructed at most err away."""
    e32 = int(err * 2**32)
    lo = [0, 1]
    while True:
        r = lo[-1] + (lo[-1] * e32 >> 32)  # the representative
        hi = (r << 32) // (2**32 - e32)    # the last value within err of it
        if hi >= 2**64 - 1:
            return lo
        lo.append(hi + 1)


def events(tracefs, trace):
    """Per stream: (signature, ts, dur) of every event."""
    out = subprocess.run([tracefs, 'ls', trace, 'ranks'], capture_output=True, text=True,
                         check=True).stdout
    ranks = sorted(int(ln.split()[-1]) for ln in out.splitlines() if ln.split())
    for r in ranks:
        text = subprocess.run([tracefs, 'cat', trace, f'ranks/{r}/threads/0/events.jsonl'],
                              capture_output=True, text=True, check=True).stdout
        evs = []
        for line in text.splitlines():
            e = json.loads(line)
            args = {k: v for k, v in e['args'].items() if k not in LEFT_OUT}
            evs.append((e['name'] + json.dumps(args, sort_keys=True), e['ts'], e['dur']))
        yield evs


def entropy(tables):
    n = sum(sum(c.values()) for c in tables.values())
    bits = 0.0
    for c in tables.values():
        m = sum(c.values())
        bits -= sum(v * math.log2(v / m) for v in c.values())
    return bits, n


def ppm_bits(seq, orders, block):
    """Code length of (symbol, contexts) pairs under PPM-C-like escapes over @orders (context
    functions, highest first), restarted every @block symbols; order -1 uniform on 2^10."""
    bits = 0.0
    for b0 in range(0, len(seq), block):
        tabs = [collections.defaultdict(collections.Counter) for _ in orders]
        for sym, info in seq[b0:b0 + block]:
            p = 1.0
            for tab, ctx in zip(tabs, orders):
                c = tab[ctx(info)]
                n = sum(c.values())
                if n and c[sym]:
                    bits -= math.log2(p * (c[sym] - 0.5) / n)
                    break
                if n:
                    p *= len(c) * 0.5 / n
            else:
                bits -= math.log2(p / 1024)
            for tab, ctx in zip(tabs, orders):
                tab[ctx(info)][sym] += 1
    return bits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('trace')
    ap.add_argument('--tracefs', default=os.path.join(TOP, 'build-bench', 'fs', 'tracefs'))
    ap.add_argument('--err', type=float, default=0.1)
    o = ap.parse_args()
    lo = bin_table(o.err)

    def b(x):
        return bisect.bisect_right(lo, x) - 1 if x >= 0 else -(bisect.bisect_right(lo, -x) - 1)

    # per kind of value: a sequence per stream of (bin, (sig, sig's previous bin,
    # previous event's bin))
    seqs = {'strict gap': [], 'duration': [], 'pilgrim interval': []}
    calls = 0
    for evs in events(o.tracefs, o.trace):
        calls += len(evs)
        s_gap, s_dur, s_int = [], [], []
        last = collections.defaultdict(dict)
        prev = {}
        prev_ts = None
        for sig, ts, dur in evs:
            vals = {'duration': b(dur)}
            if prev_ts is not None:
                vals['strict gap'] = b(ts - prev_ts)
            if 'start' in last[sig]:
                vals['pilgrim interval'] = b(ts - last[sig]['start'])
            for kind, seq in (('strict gap', s_gap), ('duration', s_dur),
                              ('pilgrim interval', s_int)):
                if kind in vals:
                    seq.append((vals[kind], (sig, last[sig].get(kind), prev.get(kind))))
                    last[sig][kind] = vals[kind]
                    prev[kind] = vals[kind]
            last[sig]['start'] = ts
            prev_ts = ts
        seqs['strict gap'].append(s_gap)
        seqs['duration'].append(s_dur)
        seqs['pilgrim interval'].append(s_int)

    o0 = [lambda i: i[0]]
    o1 = [lambda i: (i[0], i[1]), lambda i: i[0]]
    o1e = [lambda i: (i[0], i[2]), lambda i: i[0]]
    cols = [('H0', None), ('H1', None), ('o0/4096', (o0, BLOCK)), ('o1/4096', (o1, BLOCK)),
            ('o1ev/4096', (o1e, BLOCK)), ('o0/stream', (o0, 1 << 40)),
            ('o1/stream', (o1, 1 << 40)), ('o1ev/stream', (o1e, 1 << 40))]
    res = {}
    for kind, streams in seqs.items():
        row = []
        for name, model in cols:
            if model is None:
                t = collections.defaultdict(collections.Counter)
                for seq in streams:
                    for sym, (sig, before, _) in seq:
                        t[sig if name == 'H0' else (sig, before)][sym] += 1
                bits = entropy(t)[0]
            else:
                bits = sum(ppm_bits(seq, model[0], model[1]) for seq in streams)
            row.append(bits / 8 / calls)
        res[kind] = row
    print(f'{o.trace}: {calls} calls, bound {o.err:.0%}; bytes per call')
    print(f'{"":18s}' + ''.join(f'{n:>12s}' for n, _ in cols))
    for kind, row in res.items():
        print(f'{kind:18s}' + ''.join(f'{v:12.3f}' for v in row))
    for name, a, c in (('strict', 'strict gap', 'duration'),
                       ('pilgrim', 'pilgrim interval', 'duration')):
        print(f'{name + " total":18s}' +
              ''.join(f'{x + y:12.3f}' for x, y in zip(res[a], res[c])))


if __name__ == '__main__':
    main()
