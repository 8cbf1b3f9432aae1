#!/usr/bin/env python3
"""Write the golden TFV3 values sections (codec/FORMAT.md §7, §7.4.1) from the spec alone.

values_v3.bin holds three section payloads back to back: a lossless one whose blocks count
clock ticks (bit 3 of the predictor byte) on several clocks, with corrections for the steps
the ticks do not explain, plus one block of plain nanoseconds; a lossy one at rel_err 0.125;
an untimed one. Every block's predictor byte and tick length are chosen below, not by a
writer's heuristic. values_v3.txt lists each section's offset, length, timing and event
count, its blocks' predictor bytes (and the ticks headers as stored, in hex), the terminals'
VAL-field counts and every event as a reader must decode it: terminal, ts_ns, dur_ns, VAL
fields. Each block is encoded from the nanosecond times below, then decoded again from its
raw bytes by a second, separate reading of the spec (sharing only tick_step(), §7.4.1's
formula checked against its example), and the two must agree. Run from this directory;
needs the zstd CLI. `values_v3.py --fuzz-seeds ../../fuzz/corpus/fuzz_values` writes the
same ticks blocks as raw-block seeds for that fuzzer.
"""
import os
import struct
import sys

from values_common import M64, Bins, i64, section_bytes, unzz, varint, zz

ONE_NS = 1 << 32  # Q and the phase intervals count units of 2^-32 ns
N_VALS = [2, 0, 1]  # VAL fields of terminals 0, 1, 2
EPYC_Q = 43013478093  # 10.014856 ns: an AMD EPYC time stamp counter as Linux reads it
BLOCK_EVENTS = 8


def clock(base, phase, q):
    """Readings of a clock at tick n: base + floor((phase + n q) / 2^32) ns, plus @off."""
    return lambda n, off=0: base + (phase + n * q) // ONE_NS + off


def blocks():
    """The lossless section's blocks: predictor byte, tick length Q (None: nanoseconds) and
    events (terminal, start, end) in nanoseconds, read from the clocks named in comments."""
    a = clock(1000, 3 * ONE_NS // 10, EPYC_Q)  # phase 0.3 ns
    b = clock(2000, 9 * ONE_NS // 10, EPYC_Q)  # phase 0.9 ns ...
    b2 = clock(2003, ONE_NS // 20, EPYC_Q)  # ... until the kernel moves it
    p = clock(3000, 123, 35791394133)  # 8.333 ns, a strict period of 12 ticks
    d = clock(4000, ONE_NS // 2, EPYC_Q)
    two = clock(6000, ONE_NS // 3, 2 * ONE_NS)  # the shortest tick, 2 ns
    return [
        # §7.4.1's example's ticks on a clock of phase 0.3 ns, then an end off the clock by
        # 3 ns, an event of 0 ns off it by 2, a zone written in end order (a negative gap),
        # an end 4 ns early and a start 1 ns late; gaps from the end, both columns predicted
        dict(pred=0x0b, q=EPYC_Q, events=[
            (0, a(0), a(4)), (1, a(5), a(5)), (0, a(17), a(24)), (0, a(30), a(34, 3)),
            (2, a(40, 2), a(40, 2)), (1, a(45), a(46)), (2, a(7), a(47, -4)),
            (0, a(50, 1), a(54))]),
        # the phase moves at event 3 (readings contradict what the block learnt: start
        # afresh); event 0 ends off the clock (a correction on step 1); a zone starting 5
        # ticks before the anchor; durations of 0 ticks; nothing predicted
        dict(pred=0x08, q=EPYC_Q, events=[
            (0, b(0), b(0, 1)), (1, b(3), b(4)), (0, b(6), b(10)), (2, b2(-5), b2(12)),
            (0, b2(13), b2(13)), (1, b2(20), b2(25)), (0, b2(30), b2(33)), (2, b2(35), b2(35))]),
        # a strict period of 12 ticks of 8.333 ns, gaps from the start, ts predicted, the
        # last end off the clock (a correction on the last step)
        dict(pred=0x0d, q=35791394133, events=[
            (0, p(0), p(3)), (1, p(12), p(13)), (0, p(24), p(27)), (1, p(36), p(37)),
            (0, p(48), p(51)), (2, p(60), p(60)), (1, p(72), p(73)), (0, p(84), p(87, 2))]),
        # durations predicted, gaps from the start, a zone from before the anchor
        dict(pred=0x0e, q=EPYC_Q, events=[
            (2, d(0), d(10)), (0, d(3), d(8)), (0, d(9), d(14)), (1, d(20), d(20)),
            (0, d(25), d(30)), (2, d(-2), d(31)), (0, d(40), d(45)), (1, d(50, 7), d(50, 7))]),
        # TFV3 without bit 3: plain nanoseconds, both columns predicted
        dict(pred=0x03, q=None, events=[
            (0, 5000, 5050), (1, 5100, 5110), (0, 5300, 5352), (0, 5500, 5549),
            (2, 5600, 5600), (1, 5700, 5710), (2, 4900, 5800), (0, 5900, 5951)]),
        # the shortest tick, everything predicted from the start; the last, shorter block
        dict(pred=0x0f, q=2 * ONE_NS, events=[
            (0, two(0), two(25)), (1, two(50), two(55)), (0, two(150), two(176)),
            (0, two(250), two(274)), (2, two(300), two(300))]),
    ]


LOSSY_PREDS = [0x06, 0x03, 0x02, 0x00, 0x01, 0x05]
LOSSY_REL_ERR = 0.125
UNTIMED_BLOCK_EVENTS = 16


def tick_step(t, lo, hi, k, c, q):
    """One step of §7.4.1 from time t with phase interval [lo, hi) by k ticks (a u64 read
    as i64) and correction c: the time reached and its interval."""
    k = i64(k)
    m = (lo + hi) // 2
    delta = (m + k * q) // ONE_NS + c
    lo2 = max(0, lo + k * q - delta * ONE_NS)
    hi2 = min(ONE_NS, hi + k * q - delta * ONE_NS)
    if lo2 >= hi2:
        lo2, hi2 = 0, ONE_NS
    return (t + delta) & M64, lo2, hi2


def check_spec_example():
    """§7.4.1's example, step by step and decoded from its raw block by decode_block()."""
    q = 43013478093
    assert abs(q / ONE_NS - 10.014856) < 1e-6
    s1 = tick_step(1000, 0, ONE_NS, 4, 0, q)
    assert s1 == (1040, 255220532, ONE_NS), s1
    assert (s1[1] + s1[2]) // 2 == 2275093914
    s2 = tick_step(*s1, 1, 0, q)
    assert s2 == (1050, 319025665, ONE_NS), s2
    assert tick_step(*s2, 0, 0, q)[0] == 1050
    ts_col = varint(zz(1000)) + varint(zz(1))
    dur_col = varint(zz(4)) + varint(zz(0))
    raw = (varint(2) + bytes([0x08]) + varint(q) + varint(0) + varint(len(ts_col)) +
           varint(len(dur_col)) + varint(0) + ts_col + dur_col)
    got = decode_block(raw, 3, 1, [0, 0], None, [0])
    assert [(ts, dur) for _, ts, dur, _ in got] == [(1000, 40), (1050, 0)], got


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


def nearest_ticks(ns, q):
    """The writer's tick count for a step of ns nanoseconds (§7.4.1, informative): the
    integer nearest to ns / (Q / 2^32), halves rounded up."""
    return (2 * ns * ONE_NS + q) // (2 * q)


def encode_lossless(events, pred, q):
    """Raw block (§7.2) of lossless events; ticks when pred has bit 3 (§7.4.1). Also returns
    the corrections (step, c), the steps that started the phase afresh and the ticks header."""
    ts_col, dur_col = bytearray(), bytearray()
    gap, dur_st = {}, {}
    corr, resets = [], []
    prev = None  # ticks: the previous event's start and end states (t, lo, hi)

    def step(state, target, index):
        ns = i64(target - state[0])
        k = nearest_ticks(ns, q)
        c = ns - tick_step(*state, k, 0, q)[0] + state[0]
        c = i64(c)
        if c:
            corr.append((index, c))
        reached = tick_step(*state, k, c, q)
        assert reached[0] == target & M64
        if reached[1:] == (0, ONE_NS) and state[1:] != (0, ONE_NS):
            resets.append(index)
        return k & M64, reached

    for i, (t, ts, dur, _) in enumerate(events):
        end = (ts + dur) & M64
        if i == 0:
            ts_col += varint(zz(ts))
            start = (ts, 0, ONE_NS)
        else:
            if q is None:
                g = (ts - (prev[0][0] if pred & 4 else prev[1][0])) & M64
                start = (ts, 0, ONE_NS)
            else:
                g, start = step(prev[0] if pred & 4 else prev[1], ts, 2 * i)
            ts_col += varint(zz(g - (gap.get(t, 0) if pred & 1 else 0)))
            gap[t] = g
        if q is None:
            m, end_state = dur, (end, 0, ONE_NS)
        else:
            m, end_state = step(start, end, 2 * i + 1)
        dur_col += varint(zz(m - (dur_st.get(t, 0) if pred & 2 else 0)))
        dur_st[t] = m
        prev = (start, end_state)
    ticks = b''
    if pred & 8:
        ticks = varint(q) + varint(len(corr))
        last = 0
        for index, c in corr:
            ticks += varint(index - last - 1) + varint(zz(c))
            last = index
    head = varint(len(events)) + bytes([pred]) + ticks
    vals_col = vals_column(events)
    raw = (head + varint(len(ts_col)) + varint(len(dur_col)) + varint(len(vals_col)) + ts_col +
           dur_col + vals_col)
    return raw, corr, resets, ticks


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
            assert shift < 63 or byte <= 1, 'a varint\'s 10th byte is 0 or 1 (FORMAT.md)'
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
        q, n_x = r.varint(), r.varint()
        assert 2 * ONE_NS <= q < 1 << 62 and n_x <= 2 * n - 1
        index = 0
        for _ in range(n_x):
            index += 1 + r.varint()
            assert index < 2 * n
            corr[index] = i64(unzz(r.varint()))
            assert corr[index] != 0
    lens = [r.varint() for _ in range(3)]
    assert r.pos + sum(lens) == len(raw)
    cols = []
    for ln in lens:
        cols.append(Reader(raw[r.pos:r.pos + ln]))
        r.pos += ln
    out = []
    gap, dur_st, last, delta, seen = {}, {}, {}, {}, set()
    prev_start = prev_end = (0, 0, ONE_NS)  # the previous event's times (and intervals)
    for i, t in enumerate(terms):
        base = prev_start if pred & 4 else prev_end
        if timing == 0:
            ts = dur = 0
        else:
            w = unzz(cols[0].varint())
            if i == 0:
                start = (w, 0, ONE_NS)
            else:
                g = (w + (gap.get(t, 0) if pred & 1 else 0)) & M64
                gap[t] = g
                if timing == 2:
                    assert abs(i64(g)) < len(bins.lo)
                    rg = bins.rep(abs(i64(g)))
                    start = ((base[0] + rg if i64(g) >= 0 else base[0] - rg) & M64, 0, 0)
                elif pred & 8:
                    start = tick_step(*base, g, corr.get(2 * i, 0), q)
                else:
                    start = ((base[0] + g) & M64, 0, 0)
            m = (unzz(cols[1].varint()) + (dur_st.get(t, 0) if pred & 2 else 0)) & M64
            dur_st[t] = m
            if timing == 2:
                assert m < len(bins.lo)
                end = ((start[0] + bins.rep(m)) & M64, 0, 0)
            elif pred & 8:
                end = tick_step(*start, m, corr.get(2 * i + 1, 0), q)
            else:
                end = ((start[0] + m) & M64, 0, 0)
            ts, dur = start[0], (end[0] - start[0]) & M64
            prev_start, prev_end = start, end
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


def section(timing, rel_err, block_events, raws):
    n_events = sum(Reader(raw).varint() for raw in raws)
    return section_bytes(3, timing, rel_err, block_events, n_events, raws)


def check_raw_len(raw, events, timing):
    """§7.6's bounds on raw_len (TFV3: h = 1; x for the ticks header when lossless)."""
    n, v = len(events), sum(len(e[3]) for e in events)
    x = 20 + 40 * n if timing == 1 else 0
    assert 1 + (4 + 2 * n if timing else 4 + n) <= len(raw) <= 1 + 40 + 20 * n + 10 * v + x


def lossless_section(text):
    """The ticks section; also returns its events for the other two sections."""
    raws, events, seen = [], [], [0] * len(N_VALS)
    covered = set()
    for k, blk in enumerate(blocks()):
        pred, q = blk['pred'], blk['q']
        evs = add_vals([(t, s, (e - s) & M64) for t, s, e in blk['events']], seen)
        raw, corr, resets, ticks = encode_lossless(evs, pred, q)
        if q is not None:
            text.append('# block %d: pred 0x%02x Q %d corrections (step c) %s, afresh at steps '
                        '%s' % (k, pred, q, ' '.join('(%d %d)' % x for x in corr) or 'none',
                                ' '.join(str(x) for x in resets) or 'none'))
            text.append('ticks %d %s' % (k, ticks.hex()))
            covered.add(('pred', pred))
            covered |= {'non-integer Q' for _ in [0] if q % ONE_NS}
            covered |= {'skip > 0' for x, y in zip(corr, corr[1:]) if y[0] > x[0] + 1}
            covered |= {'skip 0' for x, y in zip(corr, corr[1:]) if y[0] == x[0] + 1}
            covered |= {'step 1' for i, c in corr if i == 1}
            covered |= {'last step' for i, c in corr if i == 2 * len(evs) - 1}
            covered |= {'start' for i, c in corr if i % 2 == 0}
            covered |= {'c < 0' for i, c in corr if c < 0}
            covered |= {'c > 1' for i, c in corr if c > 1}
            covered |= {'c = +-1 narrows' for i, c in corr if abs(c) == 1 and i not in resets}
            covered |= {'afresh' for _ in resets}
            covered |= {'negative gap' for i in range(1, len(evs))
                        if i64(evs[i][1] - (evs[i - 1][1] if pred & 4 else
                                            evs[i - 1][1] + evs[i - 1][2])) < 0}
            covered |= {'before the anchor' for e in evs if i64(e[1] - evs[0][1]) < 0}
        else:
            text.append('# block %d: pred 0x%02x nanoseconds' % (k, pred))
            covered.add('plain')
        covered |= {'0 ns' for e in evs if e[2] == 0}
        assert decode_block(raw, 3, 1, [e[0] for e in evs], None) == evs
        check_raw_len(raw, evs, 1)
        raws.append(raw)
        events += evs
    want = {('pred', 0x08), ('pred', 0x0b), ('pred', 0x0d), ('pred', 0x0e), 'non-integer Q',
            'skip > 0', 'skip 0', 'step 1', 'last step', 'start', 'c < 0', 'c > 1',
            'c = +-1 narrows', 'afresh', 'negative gap', 'before the anchor', 'plain', '0 ns'}
    assert want <= covered, want - covered
    return raws, events


def fuzz_seeds(corpus):
    """The lossless blocks again, as raw-block seeds for tests/fuzz/fuzz_values.c: a byte for
    TFV3 lossless (6: version - 1 + 4 timing), the block's events minus 1 (u16), the raw
    block. Event i has terminal
    i % 4, which has i % 4 VAL fields."""
    i = 0
    for k, blk in enumerate(blocks()):
        evs = []
        for _, s, e in blk['events']:
            evs.append((i % 4, s, (e - s) & M64, [4096 * i, 7, i // 4][:i % 4]))
            i += 1
        assert (i - len(evs)) % 4 == 0  # the target numbers events from the block's first
        raw = encode_lossless(evs, blk['pred'], blk['q'])[0]
        assert decode_block(raw, 3, 1, [e[0] for e in evs], None, [0, 1, 2, 3]) == evs
        check_raw_len(raw, evs, 1)
        with open(os.path.join(corpus, 'raw_v3_golden%d' % k), 'wb') as f:
            f.write(bytes([6]) + struct.pack('<H', len(evs) - 1) + raw)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == '--fuzz-seeds':
        fuzz_seeds(sys.argv[2])
        return
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
