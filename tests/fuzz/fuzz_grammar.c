/*
 * libFuzzer target for grammar_parse (FORMAT.md §6 blocks): the first byte picks the
 * terminal count, the rest is one block. Whatever parses must expand; it does not check the
 * expansion against anything, only that parse and expand stay in bounds and leak nothing.
 */
#include <stdint.h>
#include <stdlib.h>

#include "grammar_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t out[256];
	struct tfs_grammar g;
	struct tfs_diag diag;
	struct tfs_rd r;
	uint64_t n, first;

	if (size < 1)
		return 0;
	rd_init(&r, data + 1, size - 1, 1, "grammar", &diag);
	if (grammar_parse(&r, ((uint32_t)data[0] + 1) * 4, &g) < 0)
		return 0;
	n = g.n_events < 256 ? g.n_events : 256;
	if (grammar_expand(&g, 0, n, out) < 0)
		abort();
	/* a window in the middle, placed by the block's own size */
	first = g.n_events ? (g.n_events / 2 + size) % g.n_events : 0;
	n = g.n_events - first < 256 ? g.n_events - first : 256;
	if (grammar_expand(&g, first, n, out) < 0)
		abort();
	for (uint64_t i = 0; i < n; i++)
		if (out[i] >= ((uint32_t)data[0] + 1) * 4)
			abort();
	if (grammar_expand(&g, g.n_events, 1, out) != -EINVAL)
		abort();
	grammar_fini(&g);
	return 0;
}
