"""What the golden values generators (values_v2.py, values_v3.py) share: the integer
helpers of codec/FORMAT.md's header, §7.5's bins and a block's zstd frame. Written from the
spec alone, like the generators; needs the zstd CLI."""
import os
import struct
import subprocess
import tempfile

M64 = (1 << 64) - 1


def i64(v):
    v &= M64
    return v - (1 << 64) if v >> 63 else v


def zz(v):
    s = i64(v)
    return ((s << 1) ^ (s >> 63)) & M64


def unzz(u):
    return ((u >> 1) ^ -(u & 1)) & M64


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


class Bins:
    """FORMAT.md §7.5."""

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


def zstd_frame(raw):
    """@raw as one zstd frame at level 3 with a content checksum (FORMAT.md §7.1)."""
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(raw)
        name = f.name
    try:
        return subprocess.run(['zstd', '-q', '-3', '--check', '-c', name], check=True,
                              capture_output=True).stdout
    finally:
        os.unlink(name)


def section_bytes(version, timing, rel_err, block_events, n_events, raws):
    """A values section payload (FORMAT.md §7.1): header, block index, each raw block as a
    zstd frame."""
    rel_bits = struct.unpack('<Q', struct.pack('<d', rel_err))[0] if timing == 2 else 0
    frames = [zstd_frame(raw) for raw in raws]
    head = b'TFV%d' % version + struct.pack('<B3xIQQQ', timing, block_events, rel_bits,
                                            n_events, len(frames))
    off = 36 + 16 * len(frames)
    for fr, raw in zip(frames, raws):
        head += struct.pack('<QII', off, len(fr), len(raw))
        off += len(fr)
    return head + b''.join(frames)
