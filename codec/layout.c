/*
 * The layout of a grammar section's views: for every rule its rendered byte length in each
 * view, and for long rule bodies the prefix sums of events and bytes that let a cursor
 * binary-search the element under an offset. Computed once at open in O(grammar size); this
 * is what makes every view's size known without decoding. It does not decode events.
 */
#include <stdlib.h>

#include "trace_i.h"

static int layout_block(struct tfs_trace *t, const struct tfs_grammar *g,
			struct block_layout *l, uint64_t sec_off, struct tfs_diag *diag)
{
	bool need_pfx = false;

	for (uint32_t r = 0; r < g->n_rules; r++)
		need_pfx |= g->rules[r].n_elems >= LAYOUT_PREFIX_MIN;
	for (int v = 0; v < TFS_VIEW_COUNT; v++) {
		l->rule_bytes[v] = calloc(g->n_rules, sizeof(uint64_t));
		if (need_pfx)
			l->pfx_bytes[v] = calloc(g->n_elems, sizeof(uint64_t));
		if (!l->rule_bytes[v] || (need_pfx && !l->pfx_bytes[v]))
			return -ENOMEM;
	}
	if (need_pfx) {
		l->pfx_events = calloc(g->n_elems, sizeof(uint64_t));
		if (!l->pfx_events)
			return -ENOMEM;
	}
	for (uint32_t r = 0; r < g->n_rules; r++) {
		const struct gram_rule *ru = &g->rules[r];
		bool pfx = ru->n_elems >= LAYOUT_PREFIX_MIN;

		for (int v = 0; v < TFS_VIEW_COUNT; v++) {
			uint64_t sum = 0, ev = 0;

			for (uint32_t i = 0; i < ru->n_elems; i++) {
				const struct gram_elem *e = &g->elems[ru->first_elem + i];
				uint64_t one, all;

				one = e->is_rule ? l->rule_bytes[v][e->id] : t->term_len[v][e->id];
				if (pfx) {
					l->pfx_bytes[v][ru->first_elem + i] = sum;
					l->pfx_events[ru->first_elem + i] = ev;
					ev += e->count *
					      (e->is_rule ? g->rules[e->id].n_events : 1);
				}
				if (!mul_u64(one, e->count, &all) || !add_u64(sum, all, &sum) ||
				    sum > (UINT64_C(1) << 63))
					return diag_set(diag, -TFS_ECORRUPT, sec_off, "grammar",
							"rule %u renders to more than 2^63 bytes", r);
			}
			l->rule_bytes[v][r] = sum;
		}
	}
	return 0;
}

int layout_build(struct tfs_trace *t, struct gsec *g, struct tfs_diag *diag)
{
	uint64_t off = ctr_file_off(&t->cf, g->sec);
	int rc;

	g->layout = calloc(g->n_blocks, sizeof(*g->layout));
	for (int v = 0; v < TFS_VIEW_COUNT; v++)
		g->blk_bytes[v] = calloc(g->n_blocks + 1, sizeof(uint64_t));
	if (!g->layout || !g->blk_bytes[0] || !g->blk_bytes[TFS_VIEW_COUNT - 1])
		return -ENOMEM;
	for (uint32_t b = 0; b < g->n_blocks; b++) {
		const struct tfs_grammar *gr = &g->blocks[b];

		rc = layout_block(t, gr, &g->layout[b], off, diag);
		if (rc < 0)
			return rc;
		for (int v = 0; v < TFS_VIEW_COUNT; v++) {
			uint64_t len = g->layout[b].rule_bytes[v][gr->n_rules - 1];

			if (!add_u64(g->blk_bytes[v][b], len, &g->blk_bytes[v][b + 1]))
				return diag_set(diag, -TFS_ECORRUPT, off, "grammar",
						"stream view exceeds 2^64 bytes");
		}
	}
	return 0;
}

void layout_free(struct gsec *g)
{
	for (uint32_t b = 0; g->layout && b < g->n_blocks; b++) {
		for (int v = 0; v < TFS_VIEW_COUNT; v++) {
			free(g->layout[b].rule_bytes[v]);
			free(g->layout[b].pfx_bytes[v]);
		}
		free(g->layout[b].pfx_events);
	}
	free(g->layout);
	g->layout = NULL;
	for (int v = 0; v < TFS_VIEW_COUNT; v++) {
		free(g->blk_bytes[v]);
		g->blk_bytes[v] = NULL;
	}
}
