#!/usr/bin/env python3
"""Write the golden TFV2 values sections (codec/FORMAT.md §7) from the spec alone.

values_v2.bin holds two section payloads back to back (a lossless one, then a lossy one at
rel_err 0.5), each block with the predictor byte chosen below rather than by the writer's
heuristic, so that every predictor choice and both gap bases appear. values_v2.txt lists each section's
offset and length, the terminals' VAL-field counts and every event as a reader must decode
it: terminal, ts_ns, dur_ns, VAL fields. Run from this directory; needs the zstd CLI.
"""

from values_common import M64, Bins, section_bytes, varint, zz

N_VALS = [2, 0, 1]  # VAL fields of terminals 0, 1, 2

# (terminal, ts, dur, vals): a strided read loop, a marker, and an enclosing zone written in
# end order (it starts before the events it encloses: a negative gap), zero durations.
EVENTS = [
    (0, 1000, 50, [4096, 7]), (1, 1100, 10, []), (0, 1300, 52, [8192, 7]),
    (0, 1500, 49, [12288, 7]), (2, 1600, 0, [3]), (1, 1700, 10, []),
    (2, 900, 900, [3]), (0, 1900, 51, [16384, 7]),
    (0, 2100, 50, [20480, 7]), (1, 2300, 0, []), (0, 2400, 47, [24576, 7]),
    (2, 2500, 1000000, [5]), (0, 1002600, 53, [28672, 7]), (1, 1002700, 10, []),
    (0, 1002900, 50, [32768, 7]), (2, 2000, 1001000, [6]),
    (0, 1003100, 49, [36864, 7]), (1, 1003200, 11, []), (0, 1003300, 50, [40960, 7]),
    (2, 1003400, 3, [9]),
]
BLOCK_EVENTS = 8
LOSSLESS_PREDS = [3, 0, 1]
LOSSY_PREDS = [2 | 4, 3, 2]  # block 0: gaps from the previous start
REL_ERR = 0.5


def block_columns(events, pred, bins):
    """Raw columns of one block (FORMAT.md §7.2-§7.4) and the events as decoded."""
    ts_col, dur_col, vals_col = bytearray(), bytearray(), bytearray()
    gap, dur_st, last, delta, seen = {}, {}, {}, {}, set()
    base = 0
    decoded = []
    for i, (t, ts, dur, vals) in enumerate(events):
        if i == 0:
            ts_col += varint(zz(ts))
            ts_rec = ts
        else:
            g = (ts - base) & M64
            if bins is None:
                x = g
                ts_rec = ts
            else:
                gs = g - (1 << 64) if g >> 63 else g
                sb = bins.bin(gs) if gs >= 0 else -bins.bin(-gs)
                if sb < 0 and ts <= base and bins.rep(-sb) > base:
                    sb += 1
                x = sb & M64
                r = bins.rep(abs(sb))
                ts_rec = (base + r if sb >= 0 else base - r) & M64
            p = gap.get(t, 0) if pred & 1 else 0
            ts_col += varint(zz(x - p))
            gap[t] = x
        d = dur if bins is None else bins.bin(dur)
        p = dur_st.get(t, 0) if pred & 2 else 0
        dur_col += varint(zz(d - p))
        dur_st[t] = d
        dur_rec = dur if bins is None else bins.rep(d)
        for j, v in enumerate(vals):
            lj, dj = last.get((t, j), 0), delta.get((t, j), 0)
            vals_col += varint(zz(v - lj - dj))
            delta[(t, j)] = (v - lj) & M64 if t in seen else 0
            last[(t, j)] = v
        seen.add(t)
        base = ts_rec if pred & 4 else (ts_rec + dur_rec) & M64
        decoded.append((t, ts_rec, dur_rec, vals))
    return bytes(ts_col), bytes(dur_col), bytes(vals_col), decoded


def section(timing, rel_err, preds):
    bins = Bins(rel_err) if timing == 2 else None
    raws, decoded = [], []
    for b, first in enumerate(range(0, len(EVENTS), BLOCK_EVENTS)):
        evs = EVENTS[first:first + BLOCK_EVENTS]
        ts_col, dur_col, vals_col, dec = block_columns(evs, preds[b], bins)
        raws.append(varint(len(evs)) + bytes([preds[b]]) + varint(len(ts_col)) +
                    varint(len(dur_col)) + varint(len(vals_col)) + ts_col + dur_col + vals_col)
        decoded += dec
    return section_bytes(2, timing, rel_err, BLOCK_EVENTS, len(EVENTS), raws), decoded


def main():
    out, text = b'', []
    text.append('# golden TFV2 values sections, written by values_v2.py from FORMAT.md §7')
    text.append('terminals ' + ' '.join(str(n) for n in N_VALS))
    for timing, rel_err, preds in ((1, 0.0, LOSSLESS_PREDS), (2, REL_ERR, LOSSY_PREDS)):
        payload, decoded = section(timing, rel_err, preds)
        text.append('section %d %d %d %d' % (len(out), len(payload), timing, len(decoded)))
        for t, ts, dur, vals in decoded:
            text.append(' '.join(str(x) for x in [t, ts, dur] + vals))
        out += payload
    with open('values_v2.bin', 'wb') as f:
        f.write(out)
    with open('values_v2.txt', 'w') as f:
        f.write('\n'.join(text) + '\n')


if __name__ == '__main__':
    main()
