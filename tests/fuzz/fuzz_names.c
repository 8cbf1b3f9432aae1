/*
 * libFuzzer target for the names payload decoder (FORMAT.md §12): decodes the input as a
 * whole payload for a trace of 64 ranks and, when it is accepted, looks up every rank's
 * table and every name each table gives, as the views and files.txt do. Only that hostile
 * bytes are refused without crashing, leaking or overreading is checked, plus what lookups
 * rely on: names strictly increase in (class, id) and each is found again by its key.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "names_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile size_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tfs_diag diag = {0};
	struct names nm;

	if (names_decode(&nm, data, size, 64, 0, &diag) < 0)
		return 0;
	for (uint32_t t = 0; t < nm.n_tables; t++) {
		const struct name_ent *x, *prev = NULL;
		struct names_iter it;

		names_iter_init(&it, nm.tables, t);
		while ((x = names_iter_next(&it))) {
			if (!x->len || strlen(x->name) != x->len || x->cls >= nm.n_classes ||
			    (prev && (prev->cls > x->cls ||
				      (prev->cls == x->cls && prev->id >= x->id))) ||
			    names_get(&nm, &nm.tables[t], x->cls, x->id) != x)
				abort();
			prev = x;
		}
	}
	for (uint32_t r = 0; r < 64; r++) {
		const struct name_table *tb = names_table_of(&nm, r);

		if (tb)
			sink += tb->n + names_class(&nm, nm.classes[0]);
	}
	names_fini(&nm);
	return 0;
}
