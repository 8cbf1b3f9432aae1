#!/usr/bin/env python3
"""Write the golden TFV3 values sections (codec/FORMAT.md §7, §7.4.1) from the spec alone.

values_v3.bin holds three section payloads back to back: a lossless one whose blocks count
clock ticks (bit 3 of the predictor byte) on several lattices, with corrections for the times
off them, plus one block of plain nanoseconds; a lossy one at rel_err 0.125; an untimed one.
Every block's predictor byte and lattice are chosen below, not by a writer's heuristic.
values_v3.txt lists each section's offset, length, timing and event count, its blocks'
predictor bytes, the terminals' VAL-field counts and every event as a reader must decode it:
terminal, ts_ns, dur_ns, VAL fields. Each block is encoded from the nanosecond times below,
then decoded again from its raw bytes by a second, independent reading of the spec, and the
two must agree. Run from this directory; needs the zstd CLI.
"""
import os
import struct
import subprocess
import tempfile

M64 = (1 << 64) - 1
ONE_NS = 1 << 32  # Q and B count units of 2^-32 ns
N_VALS = [2, 0, 1]  # VAL fields of terminals 0, 1, 2
EPYC_Q = 43013478093  # 10.014856 ns: an AMD EPYC time stamp counter as Linux reads it
BLOCK_EVENTS = 8

# The lossless section's blocks. 'q' and 'b' give the lattice of a ticks block (bit 3 of
# 'pred' set; None: plain nanoseconds). An event is (terminal, start, end): the first event
# starts at 'ts0'; any other start and every end is a tick k, on the lattice at T(k), or a
# pair (k, c), the time T(k) + c off it (c below the tick's length, as a writer finds it).
BLOCKS = [
    # §7.4.1's example first (gaps 1 and 12 from the end, durations 4, 0, 7 ticks), then an
    # off-lattice end, an off-lattice start and end of a zero-length event, a zone written in
    # end order (a negative gap), an off-lattice start: exceptions at 3, 4 and 7 (skips 3, 0, 2)
    dict(pred=0x0b, q=EPYC_Q, b=ONE_NS // 4, ts0=1000, events=[
        (0, None, 4), (1, 5, 5), (0, 17, 24), (0, 30, (34, 3)), (2, (40, 2), (40, 2)),
        (1, 45, 46), (2, 7, 47), (0, (50, 1), 54)]),
    # a negative phase (-0.4 ns: T(0) = ts0 - 1): event 0 lasts 0 ticks and ends 1 ns after
    # T(0), an exception with only c_end; a zone starting 5 ticks before the anchor (a
    # negative tick, where the floor must round towards minus infinity); nothing predicted
    dict(pred=0x08, q=EPYC_Q, b=-1717986918, ts0=2000, events=[
        (0, None, (0, 1)), (1, 3, 4), (0, 6, 10), (2, -5, 12), (0, 13, 13), (1, 20, (25, 4)),
        (0, (30, 5), 33), (2, 35, 35)]),
    # a strict period of 12 ticks of 8.333... ns, gaps from the start, ts predicted; a phase
    # of more than one tick; one exception, on the last event (skip 7)
    dict(pred=0x0d, q=35791394133, b=9 * ONE_NS + 123, ts0=3000, events=[
        (0, None, 3), (1, 12, 13), (0, 24, 27), (1, 36, 37), (0, 48, 51), (2, 60, 60),
        (1, 72, 73), (0, 84, (87, 2))]),
    # durations predicted, gaps from the start, a phase of -3 ns and a bit
    dict(pred=0x0e, q=EPYC_Q, b=-3 * ONE_NS - 5, ts0=4000, events=[
        (2, None, 10), (0, 3, 8), (0, 9, 14), (1, 20, 20), (0, 25, 30), (2, 2, 31),
        (0, 40, 45), (1, (50, 7), (50, 7))]),
    # TFV3 without bit 3: plain nanoseconds (start, end), both columns predicted
    dict(pred=0x03, q=None, b=None, ts0=5000, events=[
        (0, None, 5050), (1, 5100, 5110), (0, 5300, 5352), (0, 5500, 5549), (2, 5600, 5600),
        (1, 5700, 5710), (2, 4900, 5800), (0, 5900, 5951)]),
    # the shortest tick (1 ns: every time is on the lattice), no exceptions, everything
    # predicted from the start; the section's last, shorter block
    dict(pred=0x0f, q=ONE_NS, b=0, ts0=6000, events=[
        (0, None, 50), (1, 100, 110), (0, 300, 352), (0, 500, 549), (2, 600, 600)]),
]
LOSSY_PREDS = [0x06, 0x03, 0x02, 0x00, 0x01, 0x05]
LOSSY_REL_ERR = 0.125
UNTIMED_BLOCK_EVENTS = 16


def zz(v):
    s = i64(v)
    return ((s << 1) ^ (s >> 63)) & M64


def unzz(u):
    return ((u >> 1) ^ -(u & 1)) & M64


def i64(v):
    v &= M64
    return v - (1 << 64) if v >> 63 else v


def varint(x):
    out = bytearray()
    while True:
        b = x & 0x7F
        x >>= 7
        if x:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def tick_time(ts0, q, b, k):
    """T(k) of §7.4.1: k read as i64, exact, floor towards minus infinity, mod 2^64."""
    return (ts0 + (b + i64(k) * q) // ONE_NS) & M64


def check_spec_example():
    """§7.4.1's example, decoded from its raw block by decode_block() below."""
    q, b = 43013478093, 1073741824
    assert q / ONE_NS - 10.014856 < 1e-6 and b == ONE_NS // 4
    assert [tick_time(1000, q, b, k) for k in (0, 4, 5, 17, 24)] == [1000, 1040, 1050, 1170,
                                                                       1240]
    ts_col = varint(zz(1000)) + varint(zz(1)) + varint(zz(12))
    dur_col = varint(zz(4)) + varint(zz(0)) + varint(zz(7))
    raw = (varint(3) + bytes([0x08]) + varint(q) + varint(zz(b)) + varint(0) +
           varint(len(ts_col)) + varint(len(dur_col)) + varint(0) + ts_col + dur_col)
    got = decode_block(raw, 3, 1, [0, 0, 0], None, [0])
    assert [(ts, dur) for _, ts, dur, _ in got] == [(1000, 40), (1050, 0), (1170, 70)], got


class Bins:
    """§7.5."""

    def __init__(self, rel_err):
        self.e_fix = int(rel_err * 2**32)
        self.lo = [0, 1]
        while True:
            hi = (self.rep(len(self.lo) - 1) << 32) // (2**32 - self.e_fix)
            if hi >= M64:
                break
            self.lo.append(hi + 1)

    def rep(self, k):
        if k == 0:
            return 0
        lo = self.lo[k]
        return min(M64, lo + ((lo * self.e_fix) >> 32))

    def bin(self, x):
        k = 0
        while k + 1 < len(self.lo) and self.lo[k + 1] <= x:
            k += 1
        return k


def resolve(blk):
    """The block's events in nanoseconds (terminal, ts, dur) and the ticks meant for them."""
    q, b, ts0 = blk['q'], blk['b'], blk['ts0']
    events, meant = [], []
    for i, (t, start, end) in enumerate(blk['events']):
        if q is None:
            ts = ts0 if start is None else start
            events.append((t, ts, (end - ts) & M64))
            continue
        sk, sc = (0, 0) if start is None else start if isinstance(start, tuple) else (start, 0)
        ek, ec = end if isinstance(end, tuple) else (end, 0)
        ts = ts0 if i == 0 else (tick_time(ts0, q, b, sk) + sc) & M64
        end_ns = (tick_time(ts0, q, b, ek) + ec) & M64
        events.append((t, ts, (end_ns - ts) & M64))
        meant.append((sk, sc, ek, ec))
    return events, meant


def tick_of(ts0, q, b, t):
    """The writer's tick for time t (informative text of §7.4.1): T(k) <= t < T(k + 1)."""
    k = ((t - ts0) * ONE_NS - b) // q
    while ts0 + (b + (k + 1) * q) // ONE_NS <= t:
        k += 1
    while ts0 + (b + k * q) // ONE_NS > t:
        k -= 1
    return k, t - (ts0 + (b + k * q) // ONE_NS)


def add_vals(events, seen):
    """VAL fields: terminal 0 a strided offset and a constant, terminal 2 a slow counter;
    @seen counts each terminal's earlier events."""
    out = []
    for t, ts, dur in events:
        c = seen[t]
        seen[t] += 1
        out.append((t, ts, dur, [4096 * (c + 1), 7] if t == 0 else [3 + c // 2] if t == 2
                    else []))
    return out


def vals_column(events):
    col = bytearray()
    last, delta, seen = {}, {}, set()
    for t, _, _, vals in events:
        for j, v in enumerate(vals):
            lj, dj = last.get((t, j), 0), delta.get((t, j), 0)
            col += varint(zz(v - lj - dj))
            delta[(t, j)] = (v - lj) & M64 if t in seen else 0
            last[(t, j)] = v
        seen.add(t)
    return bytes(col)


def encode_lossless(events, pred, q, b):
    """Raw block (§7.2) of lossless events; ticks when pred has bit 3 (§7.4.1)."""
    ts0 = events[0][1]
    starts, ends, exc = [], [], []
    for i, (t, ts, dur, _) in enumerate(events):
        end = (ts + dur) & M64
        if q is None:
            starts.append(ts)
            ends.append(end)
            continue
        sk, sc = (0, 0) if i == 0 else tick_of(ts0, q, b, ts)
        ek, ec = tick_of(ts0, q, b, end)
        starts.append(sk)
        ends.append(ek)
        if sc or ec:
            exc.append((i, sc, ec))
    ts_col, dur_col = bytearray(), bytearray()
    gap, dur_st = {}, {}
    for i, (t, _, _, _) in enumerate(events):
        if i == 0:
            ts_col += varint(zz(ts0))
        else:
            g = (starts[i] - (starts[i - 1] if pred & 4 else ends[i - 1])) & M64
            ts_col += varint(zz(g - (gap.get(t, 0) if pred & 1 else 0)))
            gap[t] = g
        m = (ends[i] - starts[i]) & M64
        dur_col += varint(zz(m - (dur_st.get(t, 0) if pred & 2 else 0)))
        dur_st[t] = m
    head = varint(len(events)) + bytes([pred])
    if pred & 8:
        head += varint(q) + varint(zz(b)) + varint(len(exc))
        prev = -1
        for i, sc, ec in exc:
            head += varint(i - prev - 1) + varint(sc) + varint(ec)
            prev = i
    vals_col = vals_column(events)
    raw = (head + varint(len(ts_col)) + varint(len(dur_col)) + varint(len(vals_col)) + ts_col +
           dur_col + vals_col)
    return raw, (starts, ends, exc)


def encode_lossy(events, pred, bins):
    """Raw block of lossy events (§7.4, §7.5), as values_v2.py writes it."""
    ts_col, dur_col = bytearray(), bytearray()
    gap, dur_st = {}, {}
    base = 0
    for i, (t, ts, dur, _) in enumerate(events):
        if i == 0:
            ts_col += varint(zz(ts))
            ts_rec = ts
        else:
            gs = i64(ts - base)
            sb = bins.bin(gs) if gs >= 0 else -bins.bin(-gs)
            if sb < 0 and ts <= base and bins.rep(-sb) > base:
                sb += 1
            ts_col += varint(zz(sb - (gap.get(t, 0) if pred & 1 else 0)))
            gap[t] = sb & M64
            r = bins.rep(abs(sb))
            ts_rec = (base + r if sb >= 0 else base - r) & M64
        d = bins.bin(dur)
        dur_col += varint(zz(d - (dur_st.get(t, 0) if pred & 2 else 0)))
        dur_st[t] = d
        base = ts_rec if pred & 4 else (ts_rec + bins.rep(d)) & M64
    vals_col = vals_column(events)
    return (varint(len(events)) + bytes([pred]) + varint(len(ts_col)) + varint(len(dur_col)) +
            varint(len(vals_col)) + ts_col + dur_col + vals_col)


def encode_untimed(events):
    vals_col = vals_column(events)
    return (varint(len(events)) + bytes([0]) + varint(0) + varint(0) + varint(len(vals_col)) +
            vals_col)


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def varint(self):
        x, shift = 0, 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            x |= (byte & 0x7F) << shift
            if not byte & 0x80:
                assert x <= M64
                return x
            shift += 7

    def u8(self):
        self.pos += 1
        return self.data[self.pos - 1]


def decode_block(raw, version, timing, terms, bins, n_vals=N_VALS):
    """A reader of §7.2-§7.4.1, written apart from the encoders above: the events of a raw
    block as (terminal, ts, dur, vals); @n_vals[t] the VAL fields of terminal t."""
    r = Reader(raw)
    n = r.varint()
    assert n == len(terms)
    pred = r.u8()
    assert pred & ~(0xf if version == 3 and timing == 1 else 0x7) == 0 and (timing or not pred)
    corr = {}
    if pred & 8:
        q, b, n_x = r.varint(), i64(unzz(r.varint())), r.varint()
        assert ONE_NS <= q < 1 << 62 and n_x <= n
        idx = -1
        for _ in range(n_x):
            idx += 1 + r.varint()
            assert idx < n
            corr[idx] = (r.varint(), r.varint())
        assert corr.get(0, (0, 0))[0] == 0
    lens = [r.varint() for _ in range(3)]
    assert r.pos + sum(lens) == len(raw)
    cols = []
    for ln in lens:
        cols.append(Reader(raw[r.pos:r.pos + ln]))
        r.pos += ln
    out = []
    gap, dur_st, last, delta, seen = {}, {}, {}, {}, set()
    prev_n = prev_e = ts0 = 0  # the previous event's start and end (ticks or ns)
    for i, t in enumerate(terms):
        base = prev_n if pred & 4 else prev_e
        if timing == 0:
            ts = dur = 0
        else:
            w = unzz(cols[0].varint())
            if i == 0:
                ts0 = w
                start = 0 if pred & 8 else w
            else:
                g = (w + (gap.get(t, 0) if pred & 1 else 0)) & M64
                gap[t] = g
                if timing == 2:
                    assert abs(i64(g)) < len(bins.lo)
                    rg = bins.rep(abs(i64(g)))
                    start = (base + rg if i64(g) >= 0 else base - rg) & M64
                else:
                    start = (base + g) & M64
            m = (unzz(cols[1].varint()) + (dur_st.get(t, 0) if pred & 2 else 0)) & M64
            dur_st[t] = m
            if timing == 2:
                assert m < len(bins.lo)
                ts, dur = start, bins.rep(m)
                end = (ts + dur) & M64
            else:
                end = (start + m) & M64
                if pred & 8:
                    cs, ce = corr.get(i, (0, 0))
                    ts = ts0 if i == 0 else (tick_time(ts0, q, b, start) + cs) & M64
                    dur = (tick_time(ts0, q, b, end) + ce - ts) & M64
                else:
                    ts, dur = start, m
            prev_n, prev_e = start, end
        vals = []
        for j in range(n_vals[t]):
            v = (unzz(cols[2].varint()) + last.get((t, j), 0) + delta.get((t, j), 0)) & M64
            delta[(t, j)] = (v - last.get((t, j), 0)) & M64 if t in seen else 0
            last[(t, j)] = v
            vals.append(v)
        seen.add(t)
        out.append((t, ts, dur, vals))
    assert all(c.pos == len(c.data) for c in cols)
    return out


def pred_of(raw):
    r = Reader(raw)
    r.varint()
    return r.u8()


def zstd_frame(raw):
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(raw)
        name = f.name
    try:
        return subprocess.run(['zstd', '-q', '-3', '--check', '-c', name], check=True,
                              capture_output=True).stdout
    finally:
        os.unlink(name)


def section(timing, rel_err, block_events, raws):
    rel_bits = struct.unpack('<Q', struct.pack('<d', rel_err))[0] if timing == 2 else 0
    frames = [zstd_frame(raw) for raw in raws]
    n_events = sum(Reader(raw).varint() for raw in raws)
    head = b'TFV3' + struct.pack('<B3xIQQQ', timing, block_events, rel_bits, n_events,
                                 len(frames))
    off = 36 + 16 * len(frames)
    for fr, raw in zip(frames, raws):
        head += struct.pack('<QII', off, len(fr), len(raw))
        off += len(fr)
    return head + b''.join(frames)


def check_raw_len(raw, events, timing):
    """§7.6's bounds on raw_len (TFV3: h = 1; x for the ticks header when lossless)."""
    n, v = len(events), sum(N_VALS[e[0]] for e in events)
    x = 30 + 30 * n if timing == 1 else 0
    assert 1 + (4 + 2 * n if timing else 4 + n) <= len(raw) <= 1 + 40 + 20 * n + 10 * v + x


def lossless_section(text):
    """The ticks section; also returns its events for the other two sections."""
    raws, events, seen = [], [], [0] * len(N_VALS)
    covered = set()
    for k, blk in enumerate(BLOCKS):
        evs, meant = resolve(blk)
        evs = add_vals(evs, seen)
        pred, q, b = blk['pred'], blk['q'], blk['b']
        raw, (starts, ends, exc) = encode_lossless(evs, pred, q, b)
        if q is not None:
            assert [(s, e) for s, e in zip(starts, ends)] == [(m[0], m[2]) for m in meant]
            assert [(i, sc, ec) for i, sc, ec in exc] == \
                [(i, m[1], m[3]) for i, m in enumerate(meant) if m[1] or m[3]]
            text.append('# block %d: pred 0x%02x Q %d B %d exceptions (event c_start c_end) %s'
                        % (k, pred, q, b, ' '.join('(%d %d %d)' % x for x in exc) or 'none'))
            covered |= {('pred', pred), ('q', q % ONE_NS != 0), ('b', (b > 0) - (b < 0))}
            covered |= {'skip > 0' for i, j in zip(exc, exc[1:]) if j[0] > i[0] + 1}
            covered |= {'event 0 c_end only' for i, sc, ec in exc if i == 0 and ec}
            covered |= {'start off' for i, sc, ec in exc if sc}
            covered |= {'end off' for i, sc, ec in exc if ec and not sc}
            covered |= {'negative gap' for i in range(1, len(evs))
                        if starts[i] < (starts[i - 1] if pred & 4 else ends[i - 1])}
            covered |= {'0 ticks' for s, e in zip(starts, ends) if s == e}
        else:
            text.append('# block %d: pred 0x%02x nanoseconds' % (k, pred))
            covered.add(('plain', pred))
        assert decode_block(raw, 3, 1, [e[0] for e in evs], None) == evs
        check_raw_len(raw, evs, 1)
        raws.append(raw)
        events += evs
    assert {('pred', 0x08), ('pred', 0x0b), ('pred', 0x0d), ('pred', 0x0e), ('q', True),
            ('b', 1), ('b', -1), 'skip > 0', 'event 0 c_end only', 'start off', 'end off',
            'negative gap', '0 ticks'} <= covered
    assert any(c[0] == 'plain' for c in covered if isinstance(c, tuple))
    return raws, events


def main():
    check_spec_example()
    out, text = b'', []
    text.append('# golden TFV3 values sections, written by values_v3.py from FORMAT.md §7')
    text.append('terminals ' + ' '.join(str(n) for n in N_VALS))
    notes = []
    raws, events = lossless_section(notes)
    bins = Bins(LOSSY_REL_ERR)
    lossy_raws, lossy_dec = [], []
    for k, first in enumerate(range(0, len(events), BLOCK_EVENTS)):
        evs = events[first:first + BLOCK_EVENTS]
        raw = encode_lossy(evs, LOSSY_PREDS[k], bins)
        check_raw_len(raw, evs, 2)
        lossy_raws.append(raw)
        lossy_dec += decode_block(raw, 3, 2, [e[0] for e in evs], bins)
    untimed_raws, untimed_dec = [], []
    for first in range(0, len(events), UNTIMED_BLOCK_EVENTS):
        evs = events[first:first + UNTIMED_BLOCK_EVENTS]
        raw = encode_untimed(evs)
        check_raw_len(raw, evs, 0)
        untimed_raws.append(raw)
        untimed_dec += decode_block(raw, 3, 0, [e[0] for e in evs], None)
    assert [e[3] for e in lossy_dec] == [e[3] for e in untimed_dec] == [e[3] for e in events]
    for timing, rel_err, block_events, rs, decoded in (
            (1, 0.0, BLOCK_EVENTS, raws, events),
            (2, LOSSY_REL_ERR, BLOCK_EVENTS, lossy_raws, lossy_dec),
            (0, 0.0, UNTIMED_BLOCK_EVENTS, untimed_raws, untimed_dec)):
        payload = section(timing, rel_err, block_events, rs)
        text.append('section %d %d %d %d' % (len(out), len(payload), timing, len(decoded)))
        text.append('preds ' + ' '.join(str(pred_of(raw)) for raw in rs))
        if timing == 1:
            text += notes
        for t, ts, dur, vals in decoded:
            text.append(' '.join(str(x) for x in [t, ts, dur] + vals))
        out += payload
    with open('values_v3.bin', 'wb') as f:
        f.write(out)
    with open('values_v3.txt', 'w') as f:
        f.write('\n'.join(text) + '\n')


if __name__ == '__main__':
    main()
