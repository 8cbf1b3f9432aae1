#!/usr/bin/env python3
"""Write the golden TFV3 and TFV5 values sections with range-coded timing columns
(codec/FORMAT.md §7.4.2, and §7.4.3's word model 2 in TFV5) from the spec alone.

values_v3c.bin holds two TFV3 section payloads back to back: the lossless blocks of
values_v3.py (ticks, plain nanoseconds) with a block of 64-bit extremes before the last, and
the same events lossy, with their ts column, dur column or both range-coded (bits 4 and 5 of
the predictor byte) as listed below. values_v5c.bin holds the same blocks as TFV5 sections
(empty tags and class columns), their coded columns in word model 2. The .txt files have
values_v3.txt's layout. Each coded column is written by this file's writer of §7.4.2 or
§7.4.3 and read back by its reader, and each block decoded again by values_v3.py's reading
of §7.2-§7.4.1 from the words that reader gives. Run from this directory; needs the zstd
CLI. `values_v3c.py --fuzz-seeds ../../fuzz/corpus/fuzz_values` writes the same blocks,
lossless and lossy, in both models, as raw-block seeds for that fuzzer.
"""
import os
import struct
import sys

from values_common import M64, Bins, section_bytes, varint
import values_v3 as v3

CODED_TS, CODED_DUR = 0x10, 0x20
# per block: which columns are coded (lossless: the extremes are block 5)
LOSSLESS_CODED = [0x30, 0x10, 0x20, 0x30, 0x30, 0x30, 0x30]
LOSSY_CODED = [0x30, 0x20, 0x10, 0x30, 0x30, 0x30, 0x20]
LOSSY_PREDS = v3.LOSSY_PREDS + [0x07]


# Word model 1 (§7.4.2, TFV3 and TFV4) and word model 2 (§7.4.3, TFV5): lengths up to FULL[m]
# have every mantissa bit modelled.
FULL = {1: 10, 2: 8}


def man_off(n, model=1):
    f = FULL[model]
    return (1 << (n - 1)) - 2 if n <= f else (1 << f) - 2 + 8 * (n - f - 1)


class Contexts:
    """A column's 256 context sets (§7.4.2), each context [P, updates]: per set its mantissa
    contexts, a length tree per group (0 for its first word, else 1 + the length of its
    previous word), word model 2's same-length contexts, and the group of its next word."""

    def __init__(self, model=1):
        self.man, self.len, self.same, self.group = {}, {}, {}, {}
        self.model = model

    def of(self, s):
        """The length tree, the mantissa contexts, the same-length contexts and the group
        for set s's next word."""
        g = self.group.get(s, 0)
        tree = self.len.setdefault((s, g), [[2048, 0] for _ in range(128)])
        man = self.man.setdefault(s, [[2048, 0] for _ in range(1454 if self.model == 1
                                                                else 702)])
        return tree, man, self.same.setdefault(s, [[2048, 0] for _ in range(66)]), g

    def coded_length(self, s, n):
        self.group[s] = 1 + n


def update(ctx, b):
    s = min(ctx[1] + 1, 4)
    ctx[0] = ctx[0] + ((4096 - ctx[0]) >> s) if b == 0 else ctx[0] - (ctx[0] >> s)
    ctx[1] += 1


def set_numbers(terms):
    first = {}
    for t in terms:
        first.setdefault(t, len(first))
    return [min(first[t], 255) for t in terms]


def word_bits(u, tree, man, same, g, model=1):
    """The (context, bit) pairs of a word in coding order, a context None for an even bit
    (word model 1); and word model 2's plain bits as (value, count)."""
    n = u.bit_length()
    out, node, plain = [], 1, (0, 0)
    if model == 2 and g > 0:
        out.append((same[g], int(n != g - 1)))
    if model == 1 or g == 0 or n != g - 1:
        for k in range(6, -1, -1):
            b = (n >> k) & 1
            out.append((tree[node], b))
            node = 2 * node + b
    if n >= 2:
        h = n - 1 if n <= FULL[model] else 3
        node = 1
        for k in range(n - 2, n - 2 - h, -1):
            b = (u >> k) & 1
            out.append((man[man_off(n, model) + node], b))
            node = 2 * node + b
        rest = n - 1 - h
        if model == 2:
            plain = (u & ((1 << rest) - 1), rest)
        else:
            out += [(None, (u >> k) & 1) for k in range(rest - 1, -1, -1)]
    return out, plain


def rc_encode(words, terms, model=1):
    """A coded column: §7.4.2's in word model 1, §7.4.3's in word model 2."""
    low, rng, cache, pending, out = 0, 0xFFFFFFFF, 0, 1, bytearray()
    plain, n_plain = 0, 0

    def shift_low():
        nonlocal low, cache, pending
        if (low & 0xFFFFFFFF) < 0xFF000000 or low >= 1 << 32:
            carry = low >> 32
            out.append((cache + carry) & 0xFF)
            out.extend([(0xFF + carry) & 0xFF] * (pending - 1))
            pending = 0
            cache = (low >> 24) & 0xFF
        pending += 1
        low = (low & 0xFFFFFF) << 8

    ctx = Contexts(model)
    for u, s in zip(words, set_numbers(terms)):
        bits, (v, k) = word_bits(u, *ctx.of(s), model)
        plain |= v << n_plain
        n_plain += k
        for c, b in bits:
            if c is None:
                rng >>= 1
                if b:
                    low += rng
            else:
                bound = (rng >> 12) * c[0]
                if b:
                    low += bound
                    rng -= bound
                else:
                    rng = bound
                update(c, b)
            while rng < 1 << 24:
                rng = (rng << 8) & 0xFFFFFFFF
                shift_low()
        ctx.coded_length(s, u.bit_length())
    for _ in range(5):
        shift_low()
    if model == 1:
        return bytes(out)
    return varint(len(out)) + bytes(out) + plain.to_bytes((n_plain + 7) // 8, 'little')


def rc_decode(data, terms, model=1):
    """The words of a coded column; asserts where §7.4.2 and §7.4.3 say a reader refuses it."""
    plain, n_plain = 0, 0
    if model == 2:
        r = v3.Reader(data)
        coded = r.varint()
        end = r.pos + coded
        assert coded >= 5 and end <= len(data)
        plain, n_plain = int.from_bytes(data[end:], 'little'), 8 * (len(data) - end)
        data = data[r.pos:end]
    plain_pos = 0
    assert len(data) >= 5 and data[0] == 0
    code, rng, pos = int.from_bytes(data[1:5], 'big'), 0xFFFFFFFF, 5

    def norm():
        nonlocal code, rng, pos
        while rng < 1 << 24:
            assert pos < len(data), 'coded column runs past its end'
            rng = (rng << 8) & 0xFFFFFFFF
            code = ((code << 8) | data[pos]) & 0xFFFFFFFF
            pos += 1

    def bit(c):
        nonlocal code, rng
        bound = (rng >> 12) * c[0]
        if code < bound:
            rng, b = bound, 0
        else:
            code, rng, b = code - bound, rng - bound, 1
        update(c, b)
        norm()
        return b

    def even():
        nonlocal code, rng
        rng >>= 1
        b = 1 if code >= rng else 0
        if b:
            code -= rng
        norm()
        return b

    ctx, words = Contexts(model), []
    for s in set_numbers(terms):
        tree, man, same, g = ctx.of(s)
        if model == 2 and g > 0 and bit(same[g]) == 0:
            n = g - 1
        else:
            node = 1
            for _ in range(7):
                node = 2 * node + bit(tree[node])
            n = node - 128
            assert n <= 64
        ctx.coded_length(s, n)
        if n < 2:
            words.append(n)
            continue
        h = n - 1 if n <= FULL[model] else 3
        node = 1
        for _ in range(h):
            node = 2 * node + bit(man[man_off(n, model) + node])
        u, rest = node, n - 1 - h
        if model == 2:
            assert plain_pos + rest <= n_plain, 'plain bits run past the column'
            u = (u << rest) | (plain >> plain_pos) & ((1 << rest) - 1)
            plain_pos += rest
        else:
            for _ in range(rest):
                u = 2 * u + even()
        words.append(u)
    assert pos == len(data), 'bytes after the last word'
    assert (plain_pos + 7) // 8 == n_plain // 8 and plain >> plain_pos == 0, 'plain bits'
    return words


def split(raw):
    """A raw block's parts: header bytes before the column lengths, the three columns."""
    r = v3.Reader(raw)
    n = r.varint()
    pred = r.u8()
    if pred & 8:
        r.varint()
        for _ in range(2 * r.varint()):
            r.varint()
    head_end = r.pos
    lens = [r.varint() for _ in range(3)]
    cols, pos = [], r.pos
    for ln in lens:
        cols.append(raw[pos:pos + ln])
        pos += ln
    assert pos == len(raw)
    return n, pred, raw[:head_end], cols


def words_of(col, n):
    r = v3.Reader(col)
    w = [r.varint() for _ in range(n)]
    assert r.pos == len(col)
    return w


def code_block(raw, terms, bits, model=1):
    """@raw with the timing columns @bits names range-coded in word model @model and bits
    set in its pred byte."""
    n, pred, head, cols = split(raw)
    assert pred & 0x30 == 0
    for k, bit in ((0, CODED_TS), (1, CODED_DUR)):
        if bits & bit:
            words = words_of(cols[k], n)
            cols[k] = rc_encode(words, terms, model)
            assert rc_decode(cols[k], terms, model) == words
    head = head[:len(varint(n))] + bytes([pred | bits]) + head[len(varint(n)) + 1:]
    return head + b''.join(varint(len(c)) for c in cols) + b''.join(cols)


def uncode_block(raw, terms, model=1):
    """The same block with its coded columns read back into varints (§7.4.2's reader, or
    §7.4.3's in word model 2)."""
    n, pred, head, cols = split(raw)
    for k, bit in ((0, CODED_TS), (1, CODED_DUR)):
        if pred & bit:
            cols[k] = b''.join(varint(w) for w in rc_decode(cols[k], terms, model))
    head = head[:len(varint(n))] + bytes([pred & ~0x30]) + head[len(varint(n)) + 1:]
    return head + b''.join(varint(len(c)) for c in cols) + b''.join(cols)


def as_tfv5(raw):
    """A TFV3 raw block as TFV5 (§7.2): empty tags and class columns, no VAL field having
    a class."""
    n, pred, head, cols = split(raw)
    return head + b''.join(varint(len(c)) for c in cols) + b'\0\0' + b''.join(cols)


def extremes():
    """Plain nanoseconds at the ends of u64: words of 63 and 64 bits, a gap of -2^63."""
    top = 1 << 63
    return [(0, top + 5, 7), (1, top + 3, 1 << 40), (2, 5, 0), (0, M64 - 9, 9),
            (1, 0, 0), (2, 1 << 62, (1 << 62) + 1), (0, 1 << 62, 1 << 61), (1, 3, 1)]


def fuzz_seeds(corpus):
    """Raw-block seeds for tests/fuzz/fuzz_values.c (see values_v3.py's): event i has
    terminal i % 4 with i % 4 VAL fields; byte 0 is 6 (TFV3 lossless) or 10 (TFV3 lossy), and
    13 or 14 for the same blocks in TFV5 with word model 2's coded columns (§7.4.3; the
    fuzzer's value classes then find the tags column empty, after the times decode)."""
    blocks = v3.blocks()
    blocks.insert(5, dict(pred=0x00, q=None, events=[
        (t, s, (s + d) & M64) for t, s, d in extremes()]))
    bins = Bins(0.1)  # the fuzzer's rel_err
    i = 0
    for k, blk in enumerate(blocks):
        evs = []
        for _, s, e in blk['events']:
            evs.append((i % 4, s, (e - s) & M64, [4096 * i, 7, i // 4][:i % 4]))
            i += 1
        terms = [e[0] for e in evs]
        nv = [0, 1, 2, 3]
        for model, modes, tag in ((1, (6, 10), 'v3c'), (2, (13, 14), 'v5c')):
            raw = code_block(v3.encode_lossless(evs, blk['pred'], blk['q'])[0], terms,
                             LOSSLESS_CODED[k], model)
            assert v3.decode_block(uncode_block(raw, terms, model), 3, 1, terms, None,
                                   nv) == evs
            lossy = code_block(v3.encode_lossy(evs, LOSSY_PREDS[k], bins), terms,
                               LOSSY_CODED[k], model)
            v3.decode_block(uncode_block(lossy, terms, model), 3, 2, terms, bins, nv)
            if model == 2:
                raw, lossy = as_tfv5(raw), as_tfv5(lossy)
            for mode, name, r in ((modes[0], 'lossless', raw), (modes[1], 'lossy', lossy)):
                with open(os.path.join(corpus, 'raw_%s_%s%d' % (tag, name, k)), 'wb') as f:
                    f.write(bytes([mode]) + struct.pack('<H', len(evs) - 1) + r)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == '--fuzz-seeds':
        fuzz_seeds(sys.argv[2])
        return
    write(1, 'values_v3c')
    write(2, 'values_v5c')


def write(model, name):
    """@name.bin and .txt: TFV3 sections in word model 1, TFV5 sections in word model 2."""
    version = 3 if model == 1 else 5
    text = ['# golden TFV%d values sections with range-coded timing columns, written by '
            'values_v3c.py from FORMAT.md %s' % (version, '§7.4.2' if model == 1
                                                 else '§7.4.2 and §7.4.3'),
            'terminals ' + ' '.join(str(n) for n in v3.N_VALS)]
    raws, events, seen = [], [], [0] * len(v3.N_VALS)
    blocks = v3.blocks()
    blocks.insert(5, dict(pred=0x00, q=None, events=[
        (t, s, (s + d) & M64) for t, s, d in extremes()]))
    for k, blk in enumerate(blocks):
        evs = v3.add_vals([(t, s, (e - s) & M64) for t, s, e in blk['events']], seen)
        terms = [e[0] for e in evs]
        raw = code_block(v3.encode_lossless(evs, blk['pred'], blk['q'])[0], terms,
                         LOSSLESS_CODED[k], model)
        assert v3.decode_block(uncode_block(raw, terms, model), 3, 1, terms, None) == evs
        raws.append(raw)
        events += evs
    bins = Bins(v3.LOSSY_REL_ERR)
    lossy_raws, lossy_dec = [], []
    for k, first in enumerate(range(0, len(events), v3.BLOCK_EVENTS)):
        evs = events[first:first + v3.BLOCK_EVENTS]
        terms = [e[0] for e in evs]
        raw = code_block(v3.encode_lossy(evs, LOSSY_PREDS[k], bins), terms, LOSSY_CODED[k],
                         model)
        lossy_raws.append(raw)
        lossy_dec += v3.decode_block(uncode_block(raw, terms, model), 3, 2, terms, bins)
    out = b''
    for timing, rel_err, rs, decoded in ((1, 0.0, raws, events),
                                         (2, v3.LOSSY_REL_ERR, lossy_raws, lossy_dec)):
        if model == 1:
            payload = v3.section(timing, rel_err, v3.BLOCK_EVENTS, rs)
        else:
            payload = section_bytes(5, timing, rel_err, v3.BLOCK_EVENTS, len(decoded),
                                    [as_tfv5(raw) for raw in rs])
        text.append('section %d %d %d %d' % (len(out), len(payload), timing, len(decoded)))
        text.append('preds ' + ' '.join(str(v3.pred_of(raw)) for raw in rs))
        for k, raw in enumerate(rs):
            n, pred, head, cols = split(raw)
            if pred & 8:
                text.append('ticks %d %s' % (k, head[len(varint(n)) + 1:].hex()))
        for t, ts, dur, vals in decoded:
            text.append(' '.join(str(x) for x in [t, ts, dur] + vals))
        out += payload
    with open(name + '.bin', 'wb') as f:
        f.write(out)
    with open(name + '.txt', 'w') as f:
        f.write('\n'.join(text) + '\n')


if __name__ == '__main__':
    sys.exit(main())
