/*
 * What the values encoder and decoder share (FORMAT.md §7.3-§7.5): the exponential bins of
 * lossy timing, built by an exact integer recurrence so that any decoder rebuilds them bit
 * for bit, and the per-terminal prediction state with its per-block generation stamp. It
 * does not code or parse blocks.
 */
#include <stdlib.h>
#include <string.h>

#include "vpred_i.h"

/*
 * Grow the array whose pointer is at @pp (any object pointer type) to hold @need elements of
 * @elem bytes, doubling. On failure the array and *@cap are unchanged.
 */
int vp_grow(void *pp, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap : 16;
	void *p, *q;

	if (need <= *cap)
		return 0;
	while (n < need) {
		if (n > SIZE_MAX / 2 / elem)
			return -ENOMEM;
		n *= 2;
	}
	memcpy(&p, pp, sizeof(p));
	q = realloc(p, n * elem);
	if (!q)
		return -ENOMEM;
	memcpy(pp, &q, sizeof(q));
	*cap = n;
	return 0;
}

uint32_t vp_rel_err_fix(double rel_err)
{
	return (uint32_t)(rel_err * 4294967296.0);
}

bool vp_rel_err_ok(double rel_err)
{
	return rel_err >= VAL_MIN_REL_ERR && rel_err < 1.0;
}

/* ---- exponential bins ---- */

static uint64_t bin_rep_of_lo(uint64_t lo, uint32_t e_fix)
{
	u128 r = (u128)lo + (((u128)lo * e_fix) >> 32);

	return r > UINT64_MAX ? UINT64_MAX : (uint64_t)r;
}

int vp_bins_build(struct bins *b, uint32_t e_fix)
{
	uint64_t *lo = NULL;
	size_t cap = 0, n = 2;
	uint32_t k = 0;

	if (b->e_fix == e_fix)
		return 0;
	if (vp_grow(&lo, &cap, 256, sizeof(*lo)) < 0)
		return -ENOMEM;
	lo[0] = 0;
	lo[1] = 1;
	for (;;) {
		uint64_t rep = bin_rep_of_lo(lo[n - 1], e_fix);
		u128 hi = ((u128)rep << 32) / ((UINT64_C(1) << 32) - e_fix);

		if (hi >= UINT64_MAX)
			break;
		if (vp_grow(&lo, &cap, n + 1, sizeof(*lo)) < 0) {
			free(lo);
			return -ENOMEM;
		}
		lo[n++] = (uint64_t)hi + 1;
	}
	free(b->lo);
	b->lo = lo;
	b->n = (uint32_t)n;
	b->e_fix = e_fix;
	for (unsigned int p = 0; p < 64; p++) {
		while (k + 1 < n && lo[k + 1] <= UINT64_C(1) << p)
			k++;
		b->oct[p] = k;
	}
	b->oct[64] = (uint32_t)n - 1;
	return 0;
}

uint32_t vp_bin_of(const struct bins *b, uint64_t x)
{
	uint32_t lo, hi;
	unsigned int p;

	if (!x)
		return 0;
	p = 63 - (unsigned int)__builtin_clzll(x);
	lo = b->oct[p];
	hi = b->oct[p + 1];
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo + 1) / 2;

		if (b->lo[mid] <= x)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

uint64_t vp_bin_rep(const struct bins *b, uint32_t k)
{
	return k ? bin_rep_of_lo(b->lo[k], b->e_fix) : 0;
}

/* Signed bin index of a signed gap: the magnitude is binned, the sign kept. */
int64_t vp_sbin_of(const struct bins *b, uint64_t gap)
{
	if ((int64_t)gap >= 0)
		return vp_bin_of(b, gap);
	return -(int64_t)vp_bin_of(b, 0 - gap);
}

uint64_t vp_sbin_rep(const struct bins *b, int64_t sb)
{
	if (sb >= 0)
		return vp_bin_rep(b, (uint32_t)sb);
	return 0 - vp_bin_rep(b, (uint32_t)-sb);
}

/* ---- prediction state ---- */

void vp_pred_fini(struct vpred *p)
{
	free(p->t);
	free(p->f);
	free(p->cls);
	free(p->bins.lo);
}

int vp_pred_grow_terms(struct vpred *p, size_t n)
{
	size_t old = p->t_cap;

	if (vp_grow(&p->t, &p->t_cap, n, sizeof(*p->t)) < 0)
		return -ENOMEM;
	for (size_t i = old; i < p->t_cap; i++) {
		p->t[i].gen = 0;
		p->t[i].n_vals = NVALS_UNKNOWN;
	}
	return 0;
}

void vp_pred_next_block(struct vpred *p)
{
	p->f_len = 0;
	p->n_terms = 0;
	if (++p->gen != 0)
		return;
	for (size_t i = 0; i < p->t_cap; i++)
		p->t[i].gen = 0;
	for (size_t i = 0; i < p->cls_cap; i++)
		p->cls[i].gen = 0;
	p->gen = 1;
}

int vp_class_grow(struct vpred *p, uint8_t top)
{
	size_t old = p->cls_cap;

	if (vp_grow(&p->cls, &p->cls_cap, (size_t)top + 1, sizeof(*p->cls)) < 0)
		return -ENOMEM;
	for (size_t i = old; i < p->cls_cap; i++)
		p->cls[i].gen = 0;
	return 0;
}

