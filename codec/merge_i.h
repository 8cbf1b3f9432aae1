/*
 * Internals of merging traces (merge.c): the metadata rule of merge.h, in merge_meta.c,
 * and the array growth both use.
 */
#ifndef TFS_MERGE_I_H
#define TFS_MERGE_I_H

#include <stdint.h>

#include "bytes_i.h"
#include "intern_i.h"

/* Grow *@arr to hold @need elements of @elem bytes (doubling). @return 0 or -ENOMEM */
int merge_grow(void **arr, uint32_t *cap, uint64_t need, size_t elem);
/* The same for two arrays that share one capacity. */
int merge_grow2(void **a, size_t a_elem, void **b, size_t b_elem, uint32_t *cap, uint64_t need);

/* The merged metadata being built. */
struct mmeta {
	char **kv;		/* key, value pairs, owned */
	uint32_t n, kv_cap;	/* pairs, pointers allocated */
	struct intern keys;	/* every key (they must stay unique) */
	struct intern bases;	/* key without its .rank<R> suffix -> the value in force */
	const char **base_val;	/* [bases.n] borrowed from kv */
	int64_t *base_rank;	/* [bases.n] rank that value starts at (-1: the plain key) */
	uint32_t base_cap;
	const char *const *first_only; /* NULL-terminated keys later inputs do not change */
};

void mmeta_init(struct mmeta *m);
void mmeta_fini(struct mmeta *m);
/*
 * Add the @n_kv pairs @kv of a trace of @n_ranks ranks whose first rank becomes @base.
 * @return 0, -EINVAL (a key clashes or grows too long; diag filled) or -ENOMEM
 */
int mmeta_add(struct mmeta *m, char *const *kv, uint32_t n_kv, uint32_t n_ranks, uint32_t base,
	      struct tfs_diag *diag);

#endif
