/*
 * The layout of one event kind's lines in a grammar section: for every rule the events of
 * that kind in its expansion and their rendered bytes in each view, prefix sums over long
 * rule bodies, and per-block totals. It is the full views' layout (layout.c) restricted to
 * one kind, so a cursor over "only the pwrite calls" finds any byte in O(height x log body)
 * exactly as a cursor over every call does (cursor.c walks both). Built at the first use of
 * a (grammar section, kind) pair in O(grammar size), then shared by every thread until the
 * trace is closed; nothing here decodes an event. The same layout over any set of
 * terminals (the signatures a search may select) is built for one cursor and not kept.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "trace_i.h"

uint64_t kindex_unit_events(const struct tfs_trace *t, const struct kindex *k, uint32_t b,
			    const struct gram_elem *e)
{
	if (e->is_rule)
		return k->rule_events[k->rule_base[b] + e->id];
	return k->terms ? k->terms[e->id] != 0 : t->term_kind[e->id] == k->kind;
}

uint64_t kindex_unit_bytes(const struct tfs_trace *t, const struct kindex *k, int view,
			   uint32_t b, const struct gram_elem *e)
{
	if (e->is_rule)
		return k->rule_bytes[view][k->rule_base[b] + e->id];
	if (k->terms)
		return k->terms[e->id] ? t->term_len[view][e->id] : 0;
	return t->term_kind[e->id] == k->kind ? t->term_len[view][e->id] : 0;
}

void kindex_free(struct kindex *k)
{
	if (!k)
		return;
	free(k->terms);
	free(k->rule_base);
	free(k->elem_base);
	free(k->rule_events);
	free(k->pfx_events);
	free(k->blk_events);
	for (int v = 0; v < TFS_VIEW_COUNT; v++) {
		free(k->rule_bytes[v]);
		free(k->pfx_bytes[v]);
		free(k->blk_bytes[v]);
	}
	free(k);
}

static int kindex_alloc(const struct gsec *g, struct kindex *k, uint64_t n_elems, bool pfx)
{
	size_t nr = (size_t)g->n_rules + 1, nb = (size_t)g->n_blocks + 1;

	k->rule_base = calloc(nb, sizeof(*k->rule_base));
	k->elem_base = calloc(nb, sizeof(*k->elem_base));
	k->rule_events = calloc(nr, sizeof(uint64_t));
	k->blk_events = calloc(nb, sizeof(uint64_t));
	if (!k->rule_base || !k->elem_base || !k->rule_events || !k->blk_events)
		return -ENOMEM;
	if (pfx) {
		k->pfx_events = calloc((size_t)n_elems, sizeof(uint64_t));
		if (!k->pfx_events)
			return -ENOMEM;
	}
	for (int v = 0; v < TFS_VIEW_COUNT; v++) {
		k->rule_bytes[v] = calloc(nr, sizeof(uint64_t));
		k->blk_bytes[v] = calloc(nb, sizeof(uint64_t));
		if (pfx)
			k->pfx_bytes[v] = calloc((size_t)n_elems, sizeof(uint64_t));
		if (!k->rule_bytes[v] || !k->blk_bytes[v] || (pfx && !k->pfx_bytes[v]))
			return -ENOMEM;
	}
	return 0;
}

/*
 * One rule: rules only use lower-numbered rules of their block, so those are done. The sums
 * cannot overflow: they count a subset of what layout.c summed and bounded.
 */
static void kindex_rule(const struct tfs_trace *t, struct kindex *k, const struct tfs_grammar *gr,
			uint32_t b, uint32_t r)
{
	const struct gram_rule *ru = &gr->rules[r];
	const uint64_t eb = k->elem_base[b];
	const bool pfx = ru->n_elems >= LAYOUT_PREFIX_MIN;
	uint64_t ev = 0, by[TFS_VIEW_COUNT] = {0};

	for (uint32_t i = 0; i < ru->n_elems; i++) {
		const struct gram_elem *e = &gr->elems[ru->first_elem + i];

		if (pfx) {
			k->pfx_events[eb + ru->first_elem + i] = ev;
			for (int v = 0; v < TFS_VIEW_COUNT; v++)
				k->pfx_bytes[v][eb + ru->first_elem + i] = by[v];
		}
		ev += e->count * kindex_unit_events(t, k, b, e);
		for (int v = 0; v < TFS_VIEW_COUNT; v++)
			by[v] += e->count * kindex_unit_bytes(t, k, v, b, e);
	}
	k->rule_events[k->rule_base[b] + r] = ev;
	for (int v = 0; v < TFS_VIEW_COUNT; v++)
		k->rule_bytes[v][k->rule_base[b] + r] = by[v];
}

/* Lay out @k (its kind or terminals set) over @g. */
static int kindex_build(const struct tfs_trace *t, const struct gsec *g, struct kindex *k)
{
	uint64_t n_elems = 0;
	uint32_t n_rules = 0;
	bool pfx = false;
	int rc;

	for (uint32_t b = 0; b < g->n_blocks; b++) {
		const struct tfs_grammar *gr = &g->blocks[b];

		n_elems += gr->n_elems;
		for (uint32_t r = 0; r < gr->n_rules && !pfx; r++)
			pfx = gr->rules[r].n_elems >= LAYOUT_PREFIX_MIN;
	}
	rc = kindex_alloc(g, k, n_elems, pfx);
	if (rc < 0)
		return rc;
	n_elems = 0;
	for (uint32_t b = 0; b < g->n_blocks; b++) {
		const struct tfs_grammar *gr = &g->blocks[b];

		k->rule_base[b] = n_rules;
		k->elem_base[b] = n_elems;
		for (uint32_t r = 0; r < gr->n_rules; r++)
			kindex_rule(t, k, gr, b, r);
		k->blk_events[b + 1] =
		    k->blk_events[b] + k->rule_events[n_rules + gr->n_rules - 1];
		for (int v = 0; v < TFS_VIEW_COUNT; v++)
			k->blk_bytes[v][b + 1] =
			    k->blk_bytes[v][b] + k->rule_bytes[v][n_rules + gr->n_rules - 1];
		n_rules += gr->n_rules;
		n_elems += gr->n_elems;
	}
	return 0;
}

/* A new layout of @kind (@terms NULL) or of the terminals @terms marks. */
static int kindex_new(const struct tfs_trace *t, const struct gsec *g, uint32_t kind,
		      const uint8_t *terms, struct kindex **out)
{
	struct kindex *k = calloc(1, sizeof(*k));
	int rc;

	*out = NULL;
	if (!k)
		return -ENOMEM;
	k->kind = kind;
	if (terms) {
		k->terms = malloc((size_t)t->n_terms + 1);
		if (!k->terms) {
			kindex_free(k);
			return -ENOMEM;
		}
		memcpy(k->terms, terms, t->n_terms);
	}
	rc = kindex_build(t, g, k);
	if (rc < 0) {
		kindex_free(k);
		return rc;
	}
	*out = k;
	return 0;
}

int kindex_new_terms(const struct tfs_trace *t, uint32_t gsec, const uint8_t *terms,
		     struct kindex **out)
{
	return kindex_new(t, &t->gsecs[gsec], UINT32_MAX, terms, out);
}

int kindex_get(struct tfs_trace *t, uint32_t gsec, uint32_t kind, const struct kindex **out)
{
	struct gsec *g = &t->gsecs[gsec];
	_Atomic(struct kindex *) *arr = atomic_load_explicit(&g->kidx, memory_order_acquire);
	struct kindex *k = NULL;
	int rc = 0;

	if (kind >= t->schema.n_kinds)
		return -ENOENT;
	if (arr) {
		*out = atomic_load_explicit(&arr[kind], memory_order_acquire);
		if (*out)
			return 0;
	}
	pthread_mutex_lock(&t->lazy_lock);
	arr = atomic_load_explicit(&g->kidx, memory_order_relaxed);
	if (!arr) {
		arr = calloc(t->schema.n_kinds, sizeof(*arr));
		if (!arr) {
			rc = -ENOMEM;
			goto out_unlock;
		}
		atomic_store_explicit(&g->kidx, arr, memory_order_release);
	}
	k = atomic_load_explicit(&arr[kind], memory_order_relaxed);
	if (!k) {
		rc = kindex_new(t, g, kind, NULL, &k);
		if (rc == 0)
			atomic_store_explicit(&arr[kind], k, memory_order_release);
	}
	*out = k;
out_unlock:
	pthread_mutex_unlock(&t->lazy_lock);
	return rc;
}

void kindex_free_all(const struct tfs_trace *t, struct gsec *g)
{
	_Atomic(struct kindex *) *arr = atomic_load_explicit(&g->kidx, memory_order_relaxed);

	for (uint32_t i = 0; arr && i < t->schema.n_kinds; i++)
		kindex_free(atomic_load_explicit(&arr[i], memory_order_relaxed));
	free(arr);
	atomic_store_explicit(&g->kidx, NULL, memory_order_relaxed);
}
