/*
 * libFuzzer target for the values section decoder (FORMAT.md §7, TFV1 and TFV2): opens the
 * input as a section payload, splits its first blocks into raw words (the vpatch path) and
 * decodes them with synthetic terminals (event i of the stream has terminal i % 4, terminal
 * t has t VAL fields). Seeds in corpus/fuzz_values/ are sections of both versions in every
 * timing mode written with those terminals. It does not check decoded values: only that
 * hostile bytes are refused without crashing, leaking or overreading.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "values_i.h"

#define FUZZ_MAX_BLOCKS 16
#define FUZZ_N_TERMINALS 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t n_vals_of[FUZZ_N_TERMINALS] = {0, 1, 2, 3};
	struct tfs_diag diag = {0};
	struct vwords w = {0};
	struct tfs_vsec s;
	struct vblock b;
	uint32_t *terms;

	if (vsec_open(&s, data, size, 0, &diag) < 0)
		return 0;
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
