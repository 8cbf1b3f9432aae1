/*
 * The metadata of a merge (merge.h): input 0's keys as they are, then each later input's
 * keys that differ from the value in force at the rank before it, as `<key>.rank<R>`, and
 * its own `<key>.rank<R>` keys re-based. The value in force for a key is kept as keys are
 * added, so each key costs O(1) whatever the number of inputs or ranks. It does not read
 * or write sections: merge.c does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "merge_i.h"

int merge_grow(void **arr, uint32_t *cap, uint64_t need, size_t elem)
{
	uint64_t n = *cap ? *cap : 16;
	void *p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	if (n > UINT32_MAX)
		return -ENOMEM;
	p = realloc(*arr, (size_t)n * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = (uint32_t)n;
	return 0;
}

int merge_grow2(void **a, size_t a_elem, void **b, size_t b_elem, uint32_t *cap, uint64_t need)
{
	uint32_t ca = *cap, cb = *cap;
	int rc;

	if (need <= *cap)
		return 0;
	rc = merge_grow(a, &ca, need, a_elem);
	if (rc == 0)
		rc = merge_grow(b, &cb, ca, b_elem);
	if (rc == 0)
		*cap = ca;
	return rc;
}

void mmeta_init(struct mmeta *m)
{
	memset(m, 0, sizeof(*m));
	intern_init(&m->keys);
	intern_init(&m->bases);
}

void mmeta_fini(struct mmeta *m)
{
	for (uint32_t i = 0; i < 2 * m->n; i++)
		free(m->kv[i]);
	free(m->kv);
	free(m->base_val);
	free(m->base_rank);
	intern_fini(&m->keys);
	intern_fini(&m->bases);
}

/* Split "<base>.rank<R>" with R < @n_ranks (no leading zero); else the whole key, R = -1. */
static size_t key_base(const char *key, uint32_t n_ranks, int64_t *rank)
{
	const char *dot = strrchr(key, '.');
	const char *d;
	uint64_t r = 0;

	*rank = -1;
	if (!dot || dot == key || strncmp(dot, ".rank", 5) != 0 || !dot[5] ||
	    (dot[5] == '0' && dot[6]))
		return strlen(key);
	for (d = dot + 5; *d; d++) {
		if (*d < '0' || *d > '9' || r >= n_ranks)
			return strlen(key);
		r = r * 10 + (uint64_t)(*d - '0');
	}
	if (r >= n_ranks)
		return strlen(key);
	*rank = (int64_t)r;
	return (size_t)(dot - key);
}

static int meta_add(struct mmeta *m, const char *base, size_t base_len, int64_t rank,
		    const char *value, struct tfs_diag *diag)
{
	char *k, *v;
	uint32_t id, bid;
	bool is_new;
	int rc;

	k = malloc(base_len + 32);
	if (!k)
		return -ENOMEM;
	memcpy(k, base, base_len);
	if (rank >= 0)
		snprintf(k + base_len, 32, ".rank%lld", (long long)rank);
	else
		k[base_len] = '\0';
	v = strdup(value);
	rc = v ? merge_grow((void **)&m->kv, &m->kv_cap, 2 * ((uint64_t)m->n + 1), sizeof(char *))
	       : -ENOMEM;
	if (rc == 0)
		rc =
		    merge_grow2((void **)&m->base_val, sizeof(*m->base_val), (void **)&m->base_rank,
				sizeof(*m->base_rank), &m->base_cap, (uint64_t)m->bases.n + 1);
	if (rc == 0 && strlen(k) > 65535)
		rc = diag_set(diag, -EINVAL, 0, "meta", "metadata key too long once ranked");
	if (rc == 0)
		rc = intern_get(&m->keys, k, strlen(k), &id, &is_new);
	if (rc == 0 && !is_new)
		rc = diag_set(diag, -EINVAL, 0, "meta", "metadata key %.60s clashes", k);
	if (rc == 0)
		rc = intern_get(&m->bases, base, base_len, &bid, &is_new);
	if (rc < 0) {
		free(k);
		free(v);
		return rc;
	}
	m->kv[2 * m->n] = k;
	m->kv[2 * m->n + 1] = v;
	m->n++;
	if (is_new || rank >= m->base_rank[bid]) {
		m->base_val[bid] = v;
		m->base_rank[bid] = rank;
	}
	return 0;
}

static bool first_only(const struct mmeta *m, const char *key, size_t n)
{
	for (const char *const *k = m->first_only; k && *k; k++)
		if (strlen(*k) == n && memcmp(*k, key, n) == 0)
			return true;
	return false;
}

int mmeta_add(struct mmeta *m, char *const *kv, uint32_t n_kv, uint32_t n_ranks, uint32_t base,
	      struct tfs_diag *diag)
{
	for (uint32_t i = 0; i < n_kv; i++) {
		const char *key = kv[2 * i], *val = kv[2 * i + 1];
		int64_t rank;
		size_t n = key_base(key, n_ranks, &rank);
		uint32_t bid;
		int rc;

		if ((base > 0 || rank >= 0) && first_only(m, key, n))
			continue;
		if (base == 0) {
			rc = meta_add(m, key, n, rank, val, diag);
		} else if (rank >= 0) {
			rc = meta_add(m, key, n, rank + base, val, diag);
		} else {
			/* the value in force at the last rank so far; equal: nothing to say */
			rc = intern_find(&m->bases, key, n, &bid);
			if (rc == 0 && strcmp(m->base_val[bid], val) == 0)
				continue;
			rc = meta_add(m, key, n, base, val, diag);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}
