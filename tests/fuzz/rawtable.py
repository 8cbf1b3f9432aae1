#!/usr/bin/env python3
"""Rewrite a format-2 trace with its section table stored as is (FORMAT.md §1: tbl_raw =
tbl_len), which readers accept, so that fuzz seeds let mutations reach the table's entries
(the fuzz targets recompute the checksums of a table stored as is: fix_crcs.h).

Usage: tests/fuzz/rawtable.py IN.trace OUT.trace"""
import struct
import subprocess
import sys


def crc32c(data):
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff


def main():
    src, dst = sys.argv[1], sys.argv[2]
    data = open(src, 'rb').read()
    if struct.unpack_from('<H', data, 8)[0] != 2:
        sys.exit(f'rawtable: {src}: not a format 2 trace')
    table_off, tlen, traw = struct.unpack_from('<QII', data, 16)
    table = data[table_off:table_off + tlen]
    if tlen != traw:
        table = subprocess.run(['zstd', '-d', '-q', '-c'], input=table, check=True,
                               capture_output=True).stdout
        if len(table) != traw:
            sys.exit(f'rawtable: {src}: table decompresses to {len(table)} bytes, not {traw}')
    hdr = bytearray(data[:40])
    struct.pack_into('<III', hdr, 24, len(table), len(table), crc32c(table))
    struct.pack_into('<I', hdr, 36, crc32c(bytes(hdr[:36])))
    open(dst, 'wb').write(bytes(hdr) + data[40:table_off] + table)


if __name__ == '__main__':
    main()
