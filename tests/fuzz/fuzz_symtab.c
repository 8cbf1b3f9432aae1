/*
 * libFuzzer target for the symbols payload decoder (FORMAT.md §11): decodes the input as a
 * whole payload and, when it is accepted, looks every address up and reads every string of
 * its frames. Only that hostile bytes are refused without crashing, leaking or overreading
 * is checked, plus the one invariant lookups rely on: addresses strictly increase.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "symtab_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile size_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tfs_diag diag = {0};
	struct symtab st;

	if (symtab_decode(&st, data, size, 0, &diag) < 0)
		return 0;
	for (uint64_t i = 0; i < st.n_addrs; i++) {
		const struct tfs_src_frame *fr;
		uint32_t n = symtab_find(&st, st.addrs[i], &fr);

		if (n == 0 || n > SYM_MAX_FRAMES || (i && st.addrs[i] <= st.addrs[i - 1]))
			abort();
		for (uint32_t f = 0; f < n; f++)
			sink += strlen(fr[f].function) + strlen(fr[f].file) + fr[f].line;
	}
	symtab_fini(&st);
	return 0;
}
