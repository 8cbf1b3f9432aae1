/*
 * Shared by the fuzz targets that take whole trace files: recompute every checksum of the
 * header and section table that lies in bounds, so that mutations get past the checksums.
 * Format 1.x (48-byte entries, FORMAT.md §A) and format 2 with a table stored as is (its
 * entries' crc_all and crc_hd too); a compressed 2.x table only gets tbl_crc and the header
 * checksum (the seeds store their tables as is for this reason: tests/fuzz/rawtable.py).
 */
#ifndef TFS_FUZZ_FIX_CRCS_H
#define TFS_FUZZ_FIX_CRCS_H

#include <stddef.h>
#include <stdint.h>

#include "bytes_i.h"
#include "crc32c_i.h"

#define FIX_HDR_LEN 40
#define FIX_ENT_LEN_V1 48
#define FIX_MAX_SECTIONS 4096

static void fix_crcs_v1(uint8_t *p, size_t size)
{
	uint64_t table_off = le_get64(p + 16), n_sect = le_get32(p + 24);

	if (n_sect <= FIX_MAX_SECTIONS && table_off <= size &&
	    n_sect * FIX_ENT_LEN_V1 <= size - table_off) {
		for (uint64_t i = 0; i < n_sect; i++) {
			uint8_t *e = p + table_off + i * FIX_ENT_LEN_V1;
			uint64_t off = le_get64(e + 8), stored = le_get64(e + 16);
			uint64_t head = le_get64(e + 40);

			if (off > size || stored > size - off)
				continue;
			le_put32(e + 32, crc32c(p + off, stored));
			if (head <= stored)
				le_put32(e + 36, crc32c(p + off, head));
		}
		le_put32(p + 28, crc32c(p + table_off, n_sect * FIX_ENT_LEN_V1));
	}
	le_put32(p + 32, crc32c(p, 32));
}

/* Varint at *@at below @end, or UINT64_MAX. */
static uint64_t fix_varint(const uint8_t *p, size_t *at, size_t end)
{
	uint64_t v = 0;

	for (int sh = 0; sh < 64 && *at < end; sh += 7) {
		uint8_t c = p[(*at)++];

		v |= (uint64_t)(c & 0x7f) << sh;
		if (!(c & 0x80))
			return v;
	}
	return UINT64_MAX;
}

/* FORMAT.md §2 entries of a table stored as is: fix each section's crc_all and crc_hd. */
static void fix_entries_v2(uint8_t *p, size_t size, size_t at, size_t end)
{
	uint64_t n = fix_varint(p, &at, end), off = FIX_HDR_LEN;

	for (uint64_t i = 0; i < n && i < FIX_MAX_SECTIONS && at < end; i++) {
		uint64_t codec, stored, head;

		(void)fix_varint(p, &at, end); /* type */
		codec = fix_varint(p, &at, end);
		(void)fix_varint(p, &at, end); /* aux */
		stored = fix_varint(p, &at, end);
		if (codec == 2)
			continue;
		if (codec != 0 && codec != 1)
			return;
		if (codec == 1)
			(void)fix_varint(p, &at, end); /* raw */
		if (at + 4 > end || off > size || stored > size - off)
			return;
		le_put32(p + at, crc32c(p + off, stored));
		at += 4;
		if (codec == 0) {
			head = fix_varint(p, &at, end);
			if (head < stored && at + 4 <= end) {
				le_put32(p + at, crc32c(p + off, head));
				at += 4;
			}
		}
		off += stored;
	}
}

static void fix_crcs_v2(uint8_t *p, size_t size)
{
	uint64_t table_off = le_get64(p + 16), tlen = le_get32(p + 24), traw = le_get32(p + 28);

	if (table_off <= size && tlen <= size - table_off) {
		if (tlen == traw)
			fix_entries_v2(p, size, (size_t)table_off, (size_t)(table_off + tlen));
		le_put32(p + 32, crc32c(p + table_off, (size_t)tlen));
	}
	le_put32(p + 36, crc32c(p, 36));
}

static void fix_crcs(uint8_t *p, size_t size)
{
	if (size < FIX_HDR_LEN)
		return;
	if (le_get16(p + 8) == 1)
		fix_crcs_v1(p, size);
	else
		fix_crcs_v2(p, size);
}

#endif
