/*
 * FORMAT.md §7.4.2 (range-coded timing columns) and §7.4.3 (word model 2) written out again
 * from the text, for tests only: an independent expectation for codec/vrange.c. Slow and
 * plain on purpose: context sets found by searching the terminals seen so far, mantissa
 * offsets summed, not computed, plain bits kept one per byte until the column is written.
 */
#ifndef TFS_TEST_REF_VRANGE_H
#define TFS_TEST_REF_VRANGE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REF_SETS 256
#define REF_MAN_PROBS 1454
#define REF_GROUPS 66

/* Lengths up to this have every mantissa bit modelled: 10 (§7.4.2) or 8 (§7.4.3). */
static inline uint32_t ref_full(int model)
{
	return model == 1 ? 10 : 8;
}

/*
 * Offset of length n's mantissa tree among a set's mantissa contexts in word model @model:
 * the trees before it.
 */
static inline uint32_t ref_man_off(uint32_t n, int model)
{
	uint32_t off = 0;

	for (uint32_t m = 2; m < n; m++)
		off += m <= ref_full(model) ? 1u << (m - 1) : 8u;
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

/*
 * A column's context sets, each made when first needed: per set its mantissa contexts, its
 * length trees (group 0 for its first word, 1 + the previous word's length after) and the
 * group of its next word.
 */
struct ref_sets {
	struct ref_ctx *man[REF_SETS];
	struct ref_ctx *len[REF_SETS][REF_GROUPS];
	struct ref_ctx *same[REF_SETS]; /* word model 2 */
	uint32_t group[REF_SETS];
};

static inline struct ref_ctx *ref_fresh(size_t n)
{
	struct ref_ctx *p = malloc(sizeof(*p) * n);

	for (size_t i = 0; p && i < n; i++)
		p[i] = (struct ref_ctx){2048, 0};
	return p;
}

static inline struct ref_sets *ref_fresh_sets(void)
{
	return calloc(1, sizeof(struct ref_sets));
}

static inline void ref_free_sets(struct ref_sets *r)
{
	for (int s = 0; s < REF_SETS; s++) {
		free(r->man[s]);
		free(r->same[s]);
		for (int g = 0; g < REF_GROUPS; g++)
			free(r->len[s][g]);
	}
	free(r);
}

/* The length tree of set @s's next word. */
static inline struct ref_ctx *ref_len_tree(struct ref_sets *r, uint32_t s)
{
	uint32_t g = r->group[s];

	if (!r->len[s][g])
		r->len[s][g] = ref_fresh(128);
	return r->len[s][g];
}

static inline struct ref_ctx *ref_man(struct ref_sets *r, uint32_t s)
{
	if (!r->man[s])
		r->man[s] = ref_fresh(REF_MAN_PROBS);
	return r->man[s];
}

static inline struct ref_ctx *ref_same(struct ref_sets *r, uint32_t s)
{
	if (!r->same[s])
		r->same[s] = ref_fresh(REF_GROUPS);
	return r->same[s];
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

/* ---- both word models: §7.4.2 (model 1), §7.4.3 (model 2) ---- */

/* Append varint @x at @out. @return its bytes */
static inline size_t ref_varint(uint8_t *out, uint64_t x)
{
	size_t k = 0;

	while (x >= 0x80) {
		out[k++] = (uint8_t)(x | 0x80);
		x >>= 7;
	}
	out[k++] = (uint8_t)x;
	return k;
}

/*
 * Code @n words of events with terminals @term in word model @model into @out (room: 32 n +
 * 24): model 1, the coded bytes; model 2, the coded part's length, the coded part and the
 * plain bits. @return bytes
 */
static inline size_t ref_vrange_encode_model(int model, const uint64_t *words,
					     const uint32_t *term, uint32_t n, uint8_t *out)
{
	uint8_t *coded = malloc(24 * (size_t)n + 8), *plain = malloc(64 * (size_t)n + 8);
	struct ref_enc e = {coded, 0, 0, 0xffffffffu, 0, 1};
	struct ref_sets *sets = ref_fresh_sets();
	uint32_t *seen = malloc((n ? n : 1) * sizeof(*seen)), n_seen = 0;
	size_t n_plain = 0, total = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t set = ref_set_of(seen, &n_seen, term[i]);
		uint32_t g = sets->group[set];
		struct ref_ctx *L = ref_len_tree(sets, set), *P = ref_man(sets, set);
		uint64_t u = words[i];
		uint32_t len = ref_bitlen(u), node = 1, h;
		int same = 0;

		if (model == 2 && g > 0) {
			same = len == g - 1;
			ref_put(&e, &ref_same(sets, set)[g], same ? 0 : 1);
		}
		for (int bit = 6; bit >= 0 && !same; bit--) {
			uint32_t b = (len >> bit) & 1;

			ref_put(&e, &L[node], b);
			node = 2 * node + b;
		}
		sets->group[set] = 1 + len;
		if (len < 2)
			continue;
		h = len <= ref_full(model) ? len - 1 : 3;
		node = 1;
		for (uint32_t k = 0; k < h; k++) {
			uint32_t b = (uint32_t)(u >> (len - 2 - k)) & 1;

			ref_put(&e, &P[ref_man_off(len, model) + node], b);
			node = 2 * node + b;
		}
		/* the rest: even bits from the most significant, or plain bits from the least */
		for (uint32_t k = 0; k < len - 1 - h; k++) {
			if (model == 1)
				ref_put_even(&e, (uint32_t)(u >> (len - 2 - h - k)) & 1);
			else
				plain[n_plain++] = (uint8_t)((u >> k) & 1);
		}
	}
	for (int k = 0; k < 5; k++)
		ref_shift_low(&e);
	if (model == 2)
		total = ref_varint(out, e.len);
	memcpy(out + total, coded, e.len);
	total += e.len;
	for (size_t k = 0; k < n_plain; k += 8) {
		uint8_t byte = 0;

		for (size_t j = 0; j < 8 && k + j < n_plain; j++)
			byte |= (uint8_t)(plain[k + j] << j);
		out[total++] = byte;
	}
	ref_free_sets(sets);
	free(seen);
	free(coded);
	free(plain);
	return total;
}

/*
 * Decode @n words of a column in word model @model. @return 0, or -1 where §7.4.2 or §7.4.3
 * says to refuse it
 */
static inline int ref_vrange_decode_model(int model, const uint8_t *in, size_t len,
					  const uint32_t *term, uint32_t n, uint64_t *words)
{
	uint64_t r = len;
	size_t at = 0, plain_at, bit = 0;
	struct ref_dec d;
	uint32_t *seen, n_seen = 0;
	struct ref_sets *sets;
	int rc = 0;

	/* model 2: the coded part's length first (a 10th byte 0 or 1, as every varint) */
	if (model == 2) {
		r = 0;
		for (int shift = 0;; shift += 7) {
			if (at == len || shift > 63 || (shift == 63 && in[at] > 1))
				return -1;
			r |= (uint64_t)(in[at] & 0x7f) << shift;
			if (!(in[at++] & 0x80))
				break;
		}
	}
	if (r < 5 || r > len - at || in[at] != 0)
		return -1;
	d = (struct ref_dec){in + at, (size_t)r, 5, 0xffffffffu, 0, 0};
	for (int k = 1; k <= 4; k++)
		d.code = (d.code << 8) | in[at + k];
	plain_at = at + (size_t)r;
	sets = ref_fresh_sets();
	seen = malloc((n ? n : 1) * sizeof(*seen));
	for (uint32_t i = 0; i < n && rc == 0; i++) {
		uint32_t set = ref_set_of(seen, &n_seen, term[i]);
		uint32_t g = sets->group[set], node = 1, bits, h;
		struct ref_ctx *L = ref_len_tree(sets, set), *P = ref_man(sets, set);
		uint64_t u;

		if (model == 2 && g > 0 && ref_get(&d, &ref_same(sets, set)[g]) == 0) {
			bits = g - 1;
		} else {
			for (int k = 0; k < 7; k++)
				node = 2 * node + ref_get(&d, &L[node]);
			bits = node - 128;
		}
		if (bits > 64) {
			rc = -1;
			break;
		}
		sets->group[set] = 1 + bits;
		if (bits < 2) {
			words[i] = bits;
		} else {
			h = bits <= ref_full(model) ? bits - 1 : 3;
			node = 1;
			for (uint32_t k = 0; k < h; k++)
				node = 2 * node + ref_get(&d, &P[ref_man_off(bits, model) + node]);
			u = (uint64_t)node << (bits - 1 - h);
			/* the rest: even bits, or plain bits least significant first */
			for (uint32_t k = 0; k < bits - 1 - h && rc == 0; k++) {
				if (model == 1) {
					u |= (uint64_t)ref_get_even(&d) << (bits - 2 - h - k);
				} else if (plain_at + bit / 8 >= len) {
					rc = -1;
				} else {
					u |= (uint64_t)((in[plain_at + bit / 8] >> (bit % 8)) & 1) << k;
					bit++;
				}
			}
			words[i] = u;
		}
		if (d.past_end)
			rc = -1;
	}
	if (rc == 0 && d.pos != d.len)
		rc = -1;
	/* every byte after the coded part holds plain bits, and no bit past the last is set */
	if (rc == 0 && (bit + 7) / 8 != len - plain_at)
		rc = -1;
	if (rc == 0 && bit % 8 && in[len - 1] >> (bit % 8))
		rc = -1;
	ref_free_sets(sets);
	free(seen);
	return rc;
}

#endif
