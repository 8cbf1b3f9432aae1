/*
 * FORMAT.md §7.4.2 (range-coded timing columns) written out again from the text, for tests
 * only: an independent expectation for codec/vrange.c. Slow and plain on purpose: context
 * sets found by searching the terminals seen so far, mantissa offsets summed, not computed.
 */
#ifndef TFS_TEST_REF_VRANGE_H
#define TFS_TEST_REF_VRANGE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REF_SETS 256
#define REF_SET_PROBS 1582

/* Offset of length n's mantissa tree in a set: the length tree, then the trees before it. */
static inline uint32_t ref_man_off(uint32_t n)
{
	uint32_t off = 128;

	for (uint32_t m = 2; m < n; m++)
		off += m <= 10 ? 1u << (m - 1) : 8u;
	return off;
}

/* Context set of terminal @t: its rank among the terminals @seen so far, at most 255. */
static inline uint32_t ref_set_of(uint32_t *seen, uint32_t *n_seen, uint32_t t)
{
	uint32_t k = 0;

	while (k < *n_seen && seen[k] != t)
		k++;
	if (k == *n_seen)
		seen[(*n_seen)++] = t;
	return k < 255 ? k : 255;
}

/* One context: the probability that its bit is 0 in 1/4096, and how often it was updated. */
struct ref_ctx {
	uint32_t P;
	uint32_t updates;
};

static inline struct ref_ctx *ref_fresh_sets(void)
{
	struct ref_ctx *p = malloc(sizeof(*p) * REF_SETS * REF_SET_PROBS);

	for (size_t i = 0; p && i < (size_t)REF_SETS * REF_SET_PROBS; i++)
		p[i] = (struct ref_ctx){2048, 0};
	return p;
}

/* After coding bit @b: moved by 1/2, 1/4, 1/8 at the first three updates, then by 1/16. */
static inline void ref_update(struct ref_ctx *c, uint32_t b)
{
	uint32_t s = c->updates >= 3 ? 4 : c->updates + 1;

	if (b == 0)
		c->P += (4096 - c->P) >> s;
	else
		c->P -= c->P >> s;
	c->updates++;
}

static inline uint32_t ref_bitlen(uint64_t u)
{
	uint32_t n = 0;

	while (u) {
		n++;
		u >>= 1;
	}
	return n;
}

/* ---- writer ---- */

struct ref_enc {
	uint8_t *out;
	size_t len;
	uint64_t low;
	uint32_t range;
	uint32_t cache;
	uint64_t pending;
};

static inline void ref_shift_low(struct ref_enc *e)
{
	if ((e->low & 0xffffffffu) < 0xff000000u || e->low >= (UINT64_C(1) << 32)) {
		uint32_t carry = (uint32_t)(e->low >> 32);

		e->out[e->len++] = (uint8_t)((e->cache + carry) & 0xff);
		for (uint64_t k = 1; k < e->pending; k++)
			e->out[e->len++] = (uint8_t)((0xff + carry) & 0xff);
		e->pending = 0;
		e->cache = (uint32_t)(e->low >> 24) & 0xff;
	}
	e->pending++;
	e->low = (e->low & 0xffffff) << 8;
}

static inline void ref_norm_enc(struct ref_enc *e)
{
	while (e->range < (1u << 24)) {
		e->range <<= 8;
		ref_shift_low(e);
	}
}

static inline void ref_put(struct ref_enc *e, struct ref_ctx *P, uint32_t b)
{
	uint32_t bound = (e->range >> 12) * P->P;

	if (b == 0) {
		e->range = bound;
	} else {
		e->low += bound;
		e->range -= bound;
	}
	ref_update(P, b);
	ref_norm_enc(e);
}

static inline void ref_put_even(struct ref_enc *e, uint32_t b)
{
	e->range >>= 1;
	if (b)
		e->low += e->range;
	ref_norm_enc(e);
}

/* Code @n words of events with terminals @term into @out (room: 24 n + 8). @return bytes */
static inline size_t ref_vrange_encode(const uint64_t *words, const uint32_t *term, uint32_t n,
				       uint8_t *out)
{
	struct ref_enc e = {out, 0, 0, 0xffffffffu, 0, 1};
	struct ref_ctx *sets = ref_fresh_sets();
	uint32_t *seen = malloc((n ? n : 1) * sizeof(*seen)), n_seen = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct ref_ctx *P = sets + (size_t)ref_set_of(seen, &n_seen, term[i]) * REF_SET_PROBS;
		uint64_t u = words[i];
		uint32_t len = ref_bitlen(u), node = 1, h;

		for (int bit = 6; bit >= 0; bit--) {
			uint32_t b = (len >> bit) & 1;

			ref_put(&e, &P[node], b);
			node = 2 * node + b;
		}
		if (len < 2)
			continue;
		h = len <= 10 ? len - 1 : 3;
		node = 1;
		for (int bit = (int)len - 2; bit >= 0; bit--) {
			uint32_t b = (uint32_t)(u >> bit) & 1;

			if ((uint32_t)((int)len - 2 - bit) < h) {
				ref_put(&e, &P[ref_man_off(len) + node], b);
				node = 2 * node + b;
			} else {
				ref_put_even(&e, b);
			}
		}
	}
	for (int k = 0; k < 5; k++)
		ref_shift_low(&e);
	free(sets);
	free(seen);
	return e.len;
}

/* ---- reader ---- */

struct ref_dec {
	const uint8_t *in;
	size_t len, pos;
	uint32_t range, code;
	int past_end;
};

static inline void ref_norm_dec(struct ref_dec *d)
{
	while (d->range < (1u << 24)) {
		uint32_t byte = 0;

		if (d->pos < d->len)
			byte = d->in[d->pos++];
		else
			d->past_end = 1;
		d->range <<= 8;
		d->code = (d->code << 8) | byte;
	}
}

static inline uint32_t ref_get(struct ref_dec *d, struct ref_ctx *P)
{
	uint32_t bound = (d->range >> 12) * P->P, b;

	if (d->code < bound) {
		b = 0;
		d->range = bound;
	} else {
		b = 1;
		d->code -= bound;
		d->range -= bound;
	}
	ref_update(P, b);
	ref_norm_dec(d);
	return b;
}

static inline uint32_t ref_get_even(struct ref_dec *d)
{
	uint32_t b;

	d->range >>= 1;
	b = d->code >= d->range;
	if (b)
		d->code -= d->range;
	ref_norm_dec(d);
	return b;
}

/* Decode @n words of a coded column. @return 0, or -1 where §7.4.2 says to refuse it */
static inline int ref_vrange_decode(const uint8_t *in, size_t len, const uint32_t *term,
				    uint32_t n, uint64_t *words)
{
	struct ref_dec d = {in, len, 0, 0xffffffffu, 0, 0};
	uint32_t *seen, n_seen = 0;
	struct ref_ctx *sets;
	int rc = 0;

	if (len < 5 || in[0] != 0)
		return -1;
	for (int k = 1; k <= 4; k++)
		d.code = (d.code << 8) | in[k];
	d.pos = 5;
	sets = ref_fresh_sets();
	seen = malloc((n ? n : 1) * sizeof(*seen));
	for (uint32_t i = 0; i < n && rc == 0; i++) {
		struct ref_ctx *P = sets + (size_t)ref_set_of(seen, &n_seen, term[i]) * REF_SET_PROBS;
		uint32_t node = 1, bits, h;
		uint64_t u;

		for (int k = 0; k < 7; k++)
			node = 2 * node + ref_get(&d, &P[node]);
		bits = node - 128;
		if (bits > 64) {
			rc = -1;
			break;
		}
		if (bits < 2) {
			words[i] = bits;
		} else {
			h = bits <= 10 ? bits - 1 : 3;
			node = 1;
			for (uint32_t k = 0; k < h; k++)
				node = 2 * node + ref_get(&d, &P[ref_man_off(bits) + node]);
			u = node;
			for (uint32_t k = 0; k < bits - 1 - h; k++)
				u = 2 * u + ref_get_even(&d);
			words[i] = u;
		}
		if (d.past_end)
			rc = -1;
	}
	if (rc == 0 && d.pos != len)
		rc = -1;
	free(sets);
	free(seen);
	return rc;
}

#endif
