#!/usr/bin/env python3
"""Write the golden TFV4 values sections (codec/FORMAT.md §7.2, §7.3.1) from the spec alone.

values_v4.bin holds two section payloads back to back: an untimed one in blocks of 168
events, and a lossless one in blocks of 8 whose predictor bytes are 0x03 (nanoseconds, both
timing columns predicted, gaps from the previous end). Their events are those of an
allocator: terminals 0 and 3 allocate (size without a class, address of class 1, id of
class 2), terminal 1 frees (address, id), terminal 2 has two fields of class 1 and one
without a class, terminal 4 none. The values reach every tag of §7.3.1: stride hits, hits
one value back and 252 values back (tag 255), misses coded from the stride and from the
class's largest value (ids, and a value wrapping past 2^64 - 1), values a class meets again
after its largest, in blocks that restart every state. Tags are chosen by the writer rule of
§7.3.1 (informative), so that tracefs's encoder must write the same raw blocks;
test_codec_values compares them byte for byte.

values_v4.txt lists the terminals' VAL-field classes, each section's offset, length,
timing, block length and event count, then every event as a reader must decode it:
terminal, ts_ns, dur_ns, VAL fields. Each block is encoded below, then decoded from its raw
bytes by decode_block(), a second reading of the spec that shares nothing with the encoder
but the varint helpers, and the two must agree. Run from this directory; needs the zstd CLI.
`values_v4.py --fuzz-seeds DIR` also writes seeds for tests/fuzz/fuzz_values (fuzz_seeds()).
"""
import os
import sys

from values_common import M64, section_bytes, unzz, varint, zz

# classes of each terminal's VAL fields (0: none); terminal t's n_vals is len(CLASSES[t])
CLASSES = [[0, 1, 2], [1, 2], [1, 1, 0], [0, 1, 2], []]
HIST_MAX = 253  # tags 3..255 reach this many values back


def events():
    """An allocator's calls: (terminal, ts, dur, vals)."""
    out = []
    nid = [0]
    ts = [1000]
    live = []

    def ev(t, vals, dur=20):
        ts[0] += 37 + len(out) % 5
        out.append((t, ts[0], dur + len(out) % 3, vals))

    def alloc(t, size, addr):
        nid[0] += 1
        live.append((addr, nid[0]))
        ev(t, [size, addr, nid[0]])

    def free(k):
        addr, i = live.pop(k)
        ev(1, [addr, i])

    # a loop allocating and freeing one block: stride hits after two rounds
    for _ in range(6):
        alloc(0, 64, 0x55550000a000)
        free(-1)
    # a stack of blocks freed in reverse (history hits one and more values back), then
    # reused in the order a LIFO free list hands them out
    for k in range(5):
        alloc(3, 32 * (k + 1), 0x55550000b000 + 0x40 * k)
    for _ in range(5):
        free(-1)
    for k in range(5):
        alloc(0, 48, 0x55550000b000 + 0x40 * k)
    for _ in range(5):
        free(0)
    # terminal 2: a pair of addresses and a strided offset; terminal 4: no fields
    for k in range(130):
        ev(2, [0x7f0000001000 + 0x1000 * (k % 7), 0x7f0000100000 + 0x10 * k * k, 4096 * k])
        if k % 40 == 39:
            ev(4, [])
    # far back, still in block 0: a first field 252 values back (tag 255), then a second
    # field 253 back (a miss: its event's first field is pushed before it)
    for back, field in ((252, 0), (253, 1)):
        h1 = [v for t, _, _, vals in out for j, v in enumerate(vals) if CLASSES[t][j] == 1]
        far = h1[len(h1) - 1 - back + field]
        assert h1.count(far) == 1 and len(out) < 167, (h1.count(far), len(out), hex(far))
        pair = [far, 0x7f0000200000 + back] if field == 0 else [0x7f0000200000 + back, far]
        ev(2, pair + [0])
    # ids past the largest, a wrap past 2^64 - 1, then one below the largest
    alloc(0, 8, 0xfffffffffffffff0)
    alloc(3, 8, 0x10)
    ev(1, [0xfffffffffffffff0, 2])
    alloc(0, 8, 0x55550000c000)
    return out


def encode_block(evs, timed, classes=CLASSES):
    """Raw block (§7.2) of TFV4: pred 0x03 when timed (nanoseconds, predicted, gaps from
    the end), and the writer's tags (§7.3.1, informative)."""
    ts_col, dur_col, vals_col = bytearray(), bytearray(), bytearray()
    tags_col, cls_col = bytearray(), bytearray()
    last, delta, seen = {}, {}, set()
    hist, mx = {}, {}
    gap, dur_st = {}, {}
    prev_end = 0
    for i, (t, ts, dur, vals) in enumerate(evs):
        if timed:
            if i == 0:
                ts_col += varint(zz(ts))
            else:
                g = (ts - prev_end) & M64
                ts_col += varint(zz(g - gap.get(t, 0)))
                gap[t] = g
            dur_col += varint(zz(dur - dur_st.get(t, 0)))
            dur_st[t] = dur
            prev_end = (ts + dur) & M64
        for j, v in enumerate(vals):
            p = (last.get((t, j), 0) + delta.get((t, j), 0)) & M64
            c = classes[t][j]
            if c:
                h = hist.setdefault(c, [])
                m = mx.get(c, 0)
                back = None
                for k in range(min(len(h), HIST_MAX)):
                    if h[len(h) - 1 - k] == v:
                        back = k
                        break
                res = 0
                if v == p:
                    tags_col.append(0)
                elif back is not None:
                    tags_col.append(3 + back)
                else:
                    r1, r2 = zz(v - p), zz(v - m - 1)
                    tags_col.append(2 if r2 < r1 else 1)
                    res = min(r1, r2)
                cls_col += varint(res)
                h.append(v)
                mx[c] = max(m, v)
            else:
                vals_col += varint(zz(v - p))
            delta[(t, j)] = (v - last.get((t, j), 0)) & M64 if t in seen else 0
            last[(t, j)] = v
        seen.add(t)
    return (varint(len(evs)) + bytes([0x03 if timed else 0]) + varint(len(ts_col)) +
            varint(len(dur_col)) + varint(len(vals_col)) + varint(len(tags_col)) +
            varint(len(cls_col)) + ts_col + dur_col + vals_col + tags_col + cls_col)


class Reader:
    """Bytes of one column, read front to back."""

    def __init__(self, data):
        self.data, self.pos = data, 0

    def byte(self):
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self):
        x, shift = 0, 0
        while True:
            b = self.byte()
            x |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return x

    def done(self):
        return self.pos == len(self.data)


def decode_block(raw, terms, timed, classes=CLASSES):
    """§7.2 and §7.3.1 read again: the block's (ts, dur, vals) per event."""
    r = Reader(raw)
    n = r.varint()
    assert n == len(terms)
    pred = r.byte()
    assert pred == (3 if timed else 0)
    lens = [r.varint() for _ in range(5)]
    cols, at = [], r.pos
    for ln in lens:
        cols.append(Reader(raw[at:at + ln]))
        at += ln
    assert at == len(raw)
    tsc, durc, valc, tagc, clsc = cols
    state, seen = {}, set()  # (t, j) -> [last, delta]; terminals met
    gap, dur_st = {}, {}
    cls = {}  # class -> [values in coding order, max]
    out, base = [], 0
    for i, t in enumerate(terms):
        ts = dur = 0
        if timed:
            w = unzz(tsc.varint())
            if i == 0:
                ts = w
            else:
                gap[t] = (gap.get(t, 0) + w) & M64
                ts = (base + gap[t]) & M64
            dur_st[t] = (dur_st.get(t, 0) + unzz(durc.varint())) & M64
            dur = dur_st[t]
            base = (ts + dur) & M64
        first = t not in seen
        seen.add(t)
        vals = []
        for j, c in enumerate(classes[t]):
            last, d = state.get((t, j), [0, 0])
            p = (last + d) & M64
            if not c:
                v = (p + unzz(valc.varint())) & M64
            else:
                h = cls.setdefault(c, [[], 0])
                tag = tagc.byte()
                res = clsc.varint()
                assert res == 0 or tag in (1, 2), 'residual of a hit not 0'
                if tag == 0:
                    v = p
                elif tag == 1:
                    v = (p + unzz(res)) & M64
                elif tag == 2:
                    v = (h[1] + 1 + unzz(res)) & M64
                else:
                    assert tag - 3 < len(h[0]), 'tag before the class\'s first value'
                    v = h[0][len(h[0]) - 1 - (tag - 3)]
                h[0].append(v)
                h[1] = max(h[1], v)
            state[(t, j)] = [v, 0 if first else (v - last) & M64]
            vals.append(v)
        out.append((ts, dur, vals))
    assert all(col.done() for col in cols)
    return out


def main():
    evs = events()
    secs, lines = [], []
    off = 0
    for timed, block_events in ((False, 168), (True, 8)):
        raws = []
        for b0 in range(0, len(evs), block_events):
            blk = evs[b0:b0 + block_events]
            raw = encode_block(blk, timed)
            got = decode_block(raw, [e[0] for e in blk], timed)
            want = [((e[1], e[2]) if timed else (0, 0)) + (e[3],) for e in blk]
            assert got == want, (b0, got, want)
            raws.append(raw)
        sec = section_bytes(4, 1 if timed else 0, 0.0, block_events, len(evs), raws)
        lines.append('section %d %d %d %d %d' % (off, len(sec), 1 if timed else 0,
                                                 block_events, len(evs)))
        for t, ts, dur, vals in evs:
            lines.append(' '.join(str(x) for x in [t, ts if timed else 0, dur if timed else 0]
                                  + vals))
        off += len(sec)
        secs.append(sec)
    with open('values_v4.bin', 'wb') as f:
        f.write(b''.join(secs))
    with open('values_v4.txt', 'w') as f:
        f.write('# golden TFV4 values sections, written by values_v4.py from FORMAT.md §7\n')
        f.write('# classes of each terminal\'s VAL fields, terminals 0 to %d\n' %
                (len(CLASSES) - 1))
        f.write('classes %s\n' % ' '.join(','.join(str(c) for c in cl) or '-'
                                          for cl in CLASSES))
        f.write('\n'.join(lines) + '\n')
    if len(sys.argv) == 3 and sys.argv[1] == '--fuzz-seeds':
        fuzz_seeds(sys.argv[2])


def fuzz_seeds(path):
    """Seeds for tests/fuzz/fuzz_values, whose event i has terminal i % 4 with i % 4 fields,
    field j of class j % 3: sections (untimed and lossless, 16 events a block) and raw
    blocks (byte 0: version - 1 + 4 * timing, bytes 1-2: events - 1, then the block)."""
    classes = [[j % 3 for j in range(t)] for t in range(4)]
    evs, live = [], []
    for i in range(40):
        t = i % 4
        vals = [0x5000 + 64 * (i % 6), i // 3, 4096 * i][:t]
        if t == 2 and live:
            vals = [live.pop(), vals[1]]
        if t == 3:
            live.append(vals[1])
        evs.append((t, 1000 + 50 * i + i % 7, 10 + i % 3, vals))
    for timed in (False, True):
        raws = []
        for b0 in range(0, len(evs), 16):
            blk = evs[b0:b0 + 16]
            raw = encode_block(blk, timed, classes)
            got = decode_block(raw, [e[0] for e in blk], timed, classes)
            assert got == [((e[1], e[2]) if timed else (0, 0)) + (e[3],) for e in blk]
            raws.append(raw)
        name = 'v4_lossless' if timed else 'v4_none'
        with open(os.path.join(path, name), 'wb') as f:
            f.write(section_bytes(4, 1 if timed else 0, 0.0, 16, len(evs), raws))
        with open(os.path.join(path, 'raw_' + name), 'wb') as f:
            f.write(bytes([3 + 4 * timed]) + (16 - 1).to_bytes(2, 'little') + raws[0])


if __name__ == '__main__':
    main()
