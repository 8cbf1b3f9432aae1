/*
 * libFuzzer target for the values section decoder (FORMAT.md §7, TFV1 to TFV5): opens the
 * input as a section payload, splits its first blocks into raw words (the vpatch path) and
 * decodes them with synthetic terminals (event i of the stream has terminal i % 4, terminal
 * t has t VAL fields, field j of value class j % 3, 0 for none, §7.3.1). Seeds in
 * corpus/fuzz_values/ are sections of every version in every timing mode written with
 * those terminals (TFV4's by tests/data/golden/values_v4.py --fuzz-seeds). A block's zstd
 * checksum refuses nearly every mutation of its contents, so an input not starting with
 * "TFV" is one raw block instead (FORMAT.md §7.2): byte 0 picks the version (1 + b % 4)
 * and timing mode (b / 4 % 3) below 12, TFV5 and timing mode (b - 12) % 3 from 12 on, bytes
 * 1-2 the block's events (1 + a little-endian u16), the rest is the block, compressed here
 * into a one-block section (seeds: corpus/fuzz_values/raw_*). It does not check decoded values: only that
 * hostile bytes are refused without crashing, leaking or overreading.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "values_i.h"
#include "zstd_i.h"

#define FUZZ_MAX_BLOCKS 16
#define FUZZ_N_TERMINALS 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The one-block section of a raw-block input into @sec, or -1. */
static int raw_block_section(const uint8_t *data, size_t size, struct tfs_buf *sec)
{
	const double rel_err = 0.1;
	const int version = data[0] < 12 ? 1 + data[0] % 4 : 5;
	const int timing = data[0] < 12 ? data[0] / 4 % 3 : (data[0] - 12) % 3;
	const uint32_t n = 1u + data[1] + 256u * data[2];
	struct tfs_buf frame;
	uint64_t rel_bits = 0;
	uint8_t h[36 + 16];

	buf_init(&frame);
	if (zs_compress(&frame, data + 3, size - 3, 1) < 0)
		return -1;
	if (timing == VAL_TIMING_LOSSY)
		memcpy(&rel_bits, &rel_err, sizeof(rel_bits));
	memset(h, 0, sizeof(h));
	memcpy(h, "TFV", 3);
	h[3] = (uint8_t)('0' + version);
	h[4] = (uint8_t)timing;
	le_put32(h + 8, n);
	le_put64(h + 12, rel_bits);
	le_put64(h + 20, n);
	le_put64(h + 28, 1);
	le_put64(h + 36, sizeof(h));
	le_put32(h + 44, (uint32_t)frame.len);
	le_put32(h + 48, (uint32_t)(size - 3));
	buf_init(sec);
	if (buf_put(sec, h, sizeof(h)) < 0 || buf_put(sec, frame.data, frame.len) < 0) {
		buf_fini(&frame);
		buf_fini(sec);
		return -1;
	}
	buf_fini(&frame);
	return 0;
}

static int fuzz_section(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tfs_buf sec;

	if (size >= 3 && memcmp(data, "TFV", 3) == 0)
		return fuzz_section(data, size);
	if (size < 4 || raw_block_section(data, size, &sec) < 0)
		return 0;
	fuzz_section(sec.data, sec.len);
	buf_fini(&sec);
	return 0;
}

static int fuzz_section(const uint8_t *data, size_t size)
{
	static const uint8_t n_vals_of[FUZZ_N_TERMINALS] = {0, 1, 2, 3};
	static const uint8_t cls[FUZZ_N_TERMINALS * 3] = {0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 2};
	static const uint32_t cls_off[FUZZ_N_TERMINALS] = {0, 3, 6, 9};
	struct tfs_diag diag = {0};
	struct vwords w = {0};
	struct tfs_vsec s;
	struct vblock b;
	uint32_t *terms;

	if (vsec_open(&s, data, size, 0, &diag) < 0)
		return 0;
	s.cls = cls;
	s.cls_off = cls_off;
	terms = malloc(s.block_events * sizeof(*terms));
	if (!terms)
		return 0;
	vblock_init(&b);
	for (uint64_t blk = 0; blk < s.n_blocks && blk < FUZZ_MAX_BLOCKS; blk++) {
		uint64_t first = blk * s.block_events;
		uint32_t n = vsec_block_len(&s, blk);

		for (uint32_t i = 0; i < n; i++)
			terms[i] = (uint32_t)((first + i) % FUZZ_N_TERMINALS);
		if (vsec_block_words(&s, blk, &w, &diag) < 0)
			break;
		if (vsec_decode_block(&s, blk, terms, n_vals_of, FUZZ_N_TERMINALS, &b, &diag) < 0)
			break;
	}
	vwords_fini(&w);
	vblock_fini(&b);
	free(terms);
	return 0;
}
