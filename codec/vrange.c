/*
 * The range coder and word model of coded timing columns (FORMAT.md §7.4.2). A binary
 * range coder with 12-bit probabilities adapting faster while a context is young (the
 * LZMA construction otherwise: 32-bit range, carries resolved through a pending byte and a
 * run of 0xff bytes); a word is coded as its bit length through a 7-level binary tree (one
 * per length of the set's previous word: a call site's values come in runs of a size),
 * then the bits below its leading one, the first of them through a tree per length (all
 * of them up to length 10), the rest as even bits. Word model 2 (TFV5, §7.4.3) first
 * decides whether the length is the set's previous one and walks the tree only when it is
 * not, models every mantissa bit up to length 8 and three above, and puts the rest,
 * unmodelled, in a plain bit string after the coded bytes, which the reader takes with a
 * shift and a mask: fewer decisions, the reader's chain.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "vrange_i.h"

#define PROB_BITS 12
#define PROB_ONE (1u << PROB_BITS)
#define P_INIT ((PROB_ONE / 2) << 2) /* a context: probability << 2 | updates (<= 3) */
#define N_STATES (PROB_ONE << 2)
#define TOP (1u << 24)
#define LEN_PROBS VRC_LEN_PROBS
#define HEAD_BITS 3u	/* mantissa bits modelled below the leading one of a long word */
/*
 * Bytes a word can take, a decision costing < 8.1 bits (P stays within 15..4081): word model
 * 1, 10 decisions and 60 even bits (length 64); word model 2, 11 decisions and 60 plain bits
 * (the plain bits go to the same output, after the coded part)
 */
#define WORST_WORD 20u

/* Lengths up to this have every mantissa bit modelled: 10 in word model 1, 8 in 2. */
static inline uint32_t full_len(unsigned int words)
{
	return words == VRC_WORDS_1 ? 10u : 8u;
}

/* Mantissa bits modelled for a word of length @n >= 2 in the model whose full_len() is @f. */
static inline uint32_t head_of(uint32_t n, uint32_t f)
{
	return n <= f ? n - 1 : HEAD_BITS;
}

/* Offset of length @n's mantissa tree (n >= 2) in a set's mantissa contexts. */
static inline uint32_t man_off(uint32_t n, uint32_t f)
{
	return n <= f ? (1u << (n - 1)) - 2 : (1u << f) - 2 + (n - f - 1) * (1u << HEAD_BITS);
}

/* Every context fresh, copied by fill(): most blocks start over a hundred sets. */
static uint16_t fresh[VRC_MAN_PROBS];
/*
 * adapted[2 c + b]: context @c once it has coded bit @b, moved by half the way at its first
 * update, then a quarter, an eighth, and a sixteenth from the fourth on. Few values of a
 * call site fall in one block, so the first ones must count: this learns faster than any
 * fixed rate that tracks as well. A table, so that coding or decoding a bit takes one
 * load instead of the arithmetic (16% fewer instructions to decode; the time gained is
 * smaller, a word's decisions being one dependent chain).
 */
static uint16_t adapted[2 * N_STATES];
static pthread_once_t fresh_once = PTHREAD_ONCE_INIT;

static void make_fresh(void)
{
	for (size_t i = 0; i < sizeof(fresh) / sizeof(fresh[0]); i++)
		fresh[i] = P_INIT;
	for (uint32_t c = 0; c < N_STATES; c++) {
		const uint32_t n = c & 3, s = n + 1, p = c >> 2, next = n < 3 ? n + 1 : 3;

		/* towards PROB_ONE after a 0, towards 0 after a 1 */
		adapted[2 * c] = (uint16_t)((p + ((PROB_ONE - p) >> s)) << 2 | next);
		adapted[2 * c + 1] = (uint16_t)((p - (p >> s)) << 2 | next);
	}
}

int vrc_model_init(struct vrc_model *m, unsigned int words)
{
	pthread_once(&fresh_once, make_fresh);
	memset(m, 0, sizeof(*m));
	m->words = words;
	buf_init(&m->raw);
	m->man = malloc((size_t)VRC_SLOTS * VRC_MAN_PROBS * sizeof(*m->man));
	m->same = malloc((size_t)VRC_SLOTS * VRC_LEN_GROUPS * sizeof(*m->same));
	m->man_init = malloc((size_t)VRC_SLOTS * sizeof(*m->man_init));
	/* mostly never touched: only the trees of lengths that occur are initialised */
	m->len = malloc((size_t)VRC_SLOTS * VRC_LEN_GROUPS * VRC_LEN_PROBS * sizeof(*m->len));
	m->len_init = malloc((size_t)VRC_SLOTS * 2 * sizeof(*m->len_init));
	m->group = malloc(VRC_SLOTS);
	if (!m->man || !m->len || !m->len_init || !m->group || !m->same ||
	    !m->man_init) {
		vrc_model_fini(m);
		return -ENOMEM;
	}
	return 0;
}

void vrc_model_fini(struct vrc_model *m)
{
	free(m->man);
	free(m->len);
	free(m->len_init);
	free(m->group);
	free(m->same);
	free(m->man_init);
	buf_fini(&m->raw);
	memset(m, 0, sizeof(*m));
}

/* The contexts one word is coded with. */
struct word_ctx {
	uint16_t *len;	    /* its length tree */
	uint16_t *man;	    /* its set's mantissa trees */
	uint64_t *man_init; /* bit n - 1: the set's tree of length n is initialised */
	uint8_t *group;	    /* where the set keeps the length tree of its next word */
	uint16_t *same;	    /* word model 2: its set's "same length" contexts */
};

static void fill(uint16_t *p, uint32_t n)
{
	memcpy(p, fresh, n * sizeof(*p));
}

/*
 * The contexts of the next word of set @slot, each initialised at its first use: a block
 * often starts over a hundred sets, and a set uses few of its trees.
 */
static inline struct word_ctx ctx_of(struct vrc_model *m, uint8_t slot)
{
	struct word_ctx c;
	uint64_t *init;
	uint32_t g;

	/* slots come in order (vrc_slot_of), so this initialises one set at a time */
	while (m->n_init <= slot) {
		const uint32_t s = m->n_init++;

		if (m->words == VRC_WORDS_2)
			fill(m->same + (size_t)s * VRC_LEN_GROUPS, VRC_LEN_GROUPS);
		m->len_init[2 * s] = m->len_init[2 * s + 1] = 0;
		m->man_init[s] = 0;
		m->group[s] = 0;
	}
	g = m->group[slot];
	init = &m->len_init[2 * slot + g / 64];
	c.len = m->len + ((size_t)slot * VRC_LEN_GROUPS + g) * VRC_LEN_PROBS;
	if (!(*init >> (g % 64) & 1)) {
		fill(c.len, VRC_LEN_PROBS);
		*init |= UINT64_C(1) << (g % 64);
	}
	c.man = m->man + (size_t)slot * VRC_MAN_PROBS;
	c.man_init = &m->man_init[slot];
	c.group = &m->group[slot];
	c.same = m->same + (size_t)slot * VRC_LEN_GROUPS;
	return c;
}

/* The mantissa tree of length @n (2 <= n <= 64) of the word's set, initialised. */
static inline uint16_t *man_tree(struct word_ctx c, uint32_t n, uint32_t f)
{
	uint16_t *t = c.man + man_off(n, f);

	if (!(*c.man_init >> (n - 1) & 1)) {
		/* nodes 1 to 2^h - 1 */
		fill(t + 1, (1u << head_of(n, f)) - 1);
		*c.man_init |= UINT64_C(1) << (n - 1);
	}
	return t;
}

/* ---- encoder ---- */

struct rc_enc {
	uint8_t *out; /* room reserved by the caller */
	size_t len;
	uint64_t low;	  /* 33 bits: the carry is bit 32 */
	uint32_t range;
	uint8_t cache;	  /* the byte a carry may still increment */
	uint64_t pending; /* cache and the 0xff bytes after it, not yet written */
};

static void shift_low(struct rc_enc *e)
{
	if ((uint32_t)e->low < 0xff000000u || (e->low >> 32) != 0) {
		const uint8_t carry = (uint8_t)(e->low >> 32);
		uint8_t b = e->cache;

		do {
			e->out[e->len++] = (uint8_t)(b + carry);
			b = 0xff;
		} while (--e->pending);
		e->cache = (uint8_t)(e->low >> 24);
	}
	e->pending++;
	e->low = (e->low & 0x00ffffffu) << 8;
}

static inline void enc_bit(struct rc_enc *e, uint16_t *p, uint32_t bit)
{
	const uint32_t c = *p, bound = (e->range >> PROB_BITS) * (c >> 2);

	if (!bit) {
		e->range = bound;
	} else {
		e->low += bound;
		e->range -= bound;
	}
	*p = adapted[2 * c + bit];
	while (e->range < TOP) {
		e->range <<= 8;
		shift_low(e);
	}
}

static inline void enc_even(struct rc_enc *e, uint32_t bit)
{
	e->range >>= 1;
	if (bit)
		e->low += e->range;
	while (e->range < TOP) {
		e->range <<= 8;
		shift_low(e);
	}
}

/* Plain bits (word model 2), least significant first, into room reserved. @k <= 64 */
struct raw_enc {
	uint8_t *out;
	size_t len;
	uint64_t acc;	/* bits not yet written: n_acc < 8 of them between calls */
	uint32_t n_acc;
};

static inline void raw_put(struct raw_enc *r, uint64_t v, uint32_t k)
{
	while (k) {
		const uint32_t take = k < 32 ? k : 32;

		r->acc |= (v & ((UINT64_C(1) << take) - 1)) << r->n_acc;
		r->n_acc += take;
		v >>= take;
		k -= take;
		while (r->n_acc >= 8) {
			r->out[r->len++] = (uint8_t)r->acc;
			r->acc >>= 8;
			r->n_acc -= 8;
		}
	}
}

/* Word @u with the contexts @c; @raw: word model 2's plain bits, NULL in word model 1. */
static void enc_word(struct rc_enc *e, struct word_ctx c, uint64_t u, struct raw_enc *raw)
{
	const uint32_t n = u ? 64u - (uint32_t)__builtin_clzll(u) : 0, g = *c.group;
	const uint32_t f = full_len(raw ? VRC_WORDS_2 : VRC_WORDS_1);
	uint32_t node = 1, head;
	uint16_t *man;

	if (raw && g)
		enc_bit(e, &c.same[g], n != g - 1);
	if (!raw || !g || n != g - 1) {
		for (uint32_t bits = n << 25, k = 0; k < 7; k++, bits <<= 1) {
			const uint32_t b = bits >> 31;

			enc_bit(e, &c.len[node], b);
			node = 2 * node + b;
		}
	}
	*c.group = (uint8_t)(1 + n);
	if (n < 2)
		return;
	head = head_of(n, f);
	man = man_tree(c, n, f);
	node = 1;
	for (uint32_t k = 0; k < head; k++) {
		const uint32_t b = (uint32_t)(u >> (n - 2 - k)) & 1;

		enc_bit(e, &man[node], b);
		node = 2 * node + b;
	}
	if (raw) {
		raw_put(raw, u, n - 1 - head);
		return;
	}
	for (int k = (int)(n - 2 - head); k >= 0; k--)
		enc_even(e, (uint32_t)(u >> k) & 1);
}

/* A varint the encoder wrote itself. */
static uint64_t own_varint(const uint8_t **pp)
{
	const uint8_t *p = *pp;
	uint64_t x = 0;
	unsigned int shift = 0;

	while (*p & 0x80) {
		x |= (uint64_t)(*p++ & 0x7f) << shift;
		shift += 7;
	}
	x |= (uint64_t)*p++ << shift;
	*pp = p;
	return x;
}

int vrc_encode_marked(struct vrc_model *m, const uint8_t *slot, uint32_t n, const uint8_t *col,
		      size_t max_len, uint32_t *mark_out, const uint32_t *mark_in,
		      struct tfs_buf *out)
{
	struct rc_enc e = {.low = 0, .range = UINT32_MAX, .cache = 0, .pending = 1};
	const bool two = m->words == VRC_WORDS_2;
	/* word model 2: the varint of the coded part's length goes first */
	const size_t pre = two ? VRC_LEN_VARINT : 0;
	struct raw_enc raw = {.len = 0};
	uint32_t k = 0;
	size_t len;
	int rc;

	for (uint32_t j = 0; mark_out && j < VRC_MARKS; j++)
		mark_out[j] = UINT32_MAX;
	if (max_len < VRC_MIN_LEN)
		return 0;
	rc = buf_reserve(out, (size_t)n * WORST_WORD + VRC_MIN_LEN + pre);
	if (rc < 0)
		return rc;
	if (two) {
		m->raw.len = 0;
		rc = buf_reserve(&m->raw, (size_t)n * 8 + 8);
		if (rc < 0)
			return rc;
		raw.out = m->raw.data;
	}
	e.out = out->data + out->len + pre;
	vrc_model_reset(m);
	for (uint32_t i = 0; i < n; i++) {
		enc_word(&e, ctx_of(m, slot[i]), own_varint(&col), two ? &raw : NULL);
		/* bytes written never shrink: past @max_len, the rest cannot bring it back */
		len = e.len + raw.len;
		if (len > max_len)
			return 0;
		if ((i + 1) % VRC_MARK_WORDS || k == VRC_MARKS)
			continue;
		if (mark_out)
			mark_out[k] = (uint32_t)len;
		if (mark_in && len > mark_in[k] + mark_in[k] / 16 + 8)
			return 0;
		k++;
	}
	for (int j = 0; j < 5; j++)
		shift_low(&e);
	if (two) {
		uint8_t v[VRC_LEN_VARINT];
		size_t nv = 0;

		if (raw.n_acc)
			raw.out[raw.len++] = (uint8_t)raw.acc;
		for (uint64_t x = e.len; nv == 0 || x; x >>= 7)
			v[nv++] = (uint8_t)((x & 0x7f) | (x >> 7 ? 0x80 : 0));
		if (nv + e.len + raw.len > max_len)
			return 0;
		memmove(out->data + out->len + nv, e.out, e.len);
		memcpy(out->data + out->len, v, nv);
		memcpy(out->data + out->len + nv + e.len, raw.out, raw.len);
		out->len += nv + e.len + raw.len;
		return 1;
	}
	if (e.len > max_len)
		return 0;
	out->len += e.len;
	return 1;
}

int vrc_encode_max(struct vrc_model *m, const uint8_t *slot, uint32_t n, const uint8_t *col,
		   size_t max_len, struct tfs_buf *out)
{
	return vrc_encode_marked(m, slot, n, col, max_len, NULL, NULL, out);
}

int vrc_encode(struct vrc_model *m, const uint8_t *slot, uint32_t n, const uint8_t *col,
	       struct tfs_buf *out)
{
	int rc = vrc_encode_max(m, slot, n, col, SIZE_MAX, out);

	return rc < 0 ? rc : 0;
}

/* ---- decoder ---- */

/*
 * A decision's chain (bound, compare, next context) limits the reader, not its instruction
 * count: both children's contexts are loaded while the bit is being decided. Mantissa bits
 * of lossless times are near even, and a branch on them mispredicts: they are decided
 * without one (decoding a synthetic trace's lossless timing in word model 2 took 43-45 ns
 * per event instead of 54, python3's 49-51 instead of 60); lossy bins are skewed, and a
 * branch on them predicts well (40 ns against 44 without). Length decisions predict well.
 */
struct rc_dec {
	const uint8_t *in;
	size_t pos;	/* of the next byte; past @len once a byte past the end was wanted */
	size_t len;
	uint32_t range;
	uint32_t code;
};

/* The next byte, or 0 past the end (the caller checks pos > len after each word). */
static inline uint32_t next_byte(struct rc_dec *d)
{
	const uint32_t b = d->pos < d->len ? d->in[d->pos] : 0;

	d->pos++;
	return b;
}

/*
 * A decision with the context at @ctx, whose value @c the caller has loaded already;
 * @noisy: without a branch on the bit (a constant where this is inlined).
 */
static inline uint32_t dec_bit(struct rc_dec *d, uint16_t *ctx, uint32_t c, bool noisy)
{
	const uint32_t bound = (d->range >> PROB_BITS) * (c >> 2);
	uint32_t bit;

	if (noisy) {
		const uint32_t mask = 0u - (uint32_t)(d->code >= bound);

		bit = mask & 1;
		d->code -= bound & mask;
		d->range = (bound & ~mask) | ((d->range - bound) & mask);
	} else if (d->code < bound) {
		d->range = bound;
		bit = 0;
	} else {
		d->code -= bound;
		d->range -= bound;
		bit = 1;
	}
	*ctx = adapted[2 * c + bit];
	/* range >= 2^12 after a decision: at most two bytes */
	if (d->range < TOP) {
		d->range <<= 8;
		d->code = (d->code << 8) | next_byte(d);
		if (d->range < TOP) {
			d->range <<= 8;
			d->code = (d->code << 8) | next_byte(d);
		}
	}
	return bit;
}

/* Child 2 node + @bit's context, of the two children's contexts @pair loaded as one u32. */
static inline uint32_t child_ctx(uint32_t pair, uint32_t bit)
{
#if !defined(__BYTE_ORDER__)
#error "the byte order is needed to split two contexts loaded as one word"
#elif __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	return (pair >> (16 * (1 - bit))) & 0xffff;
#else
	return (pair >> (16 * bit)) & 0xffff;
#endif
}

/*
 * @depth >= 1 decisions down the tree @t from node 1: @return the node reached. Both
 * children's contexts are loaded while the bit is being decided, which takes the load off
 * the chain from one decision to the next.
 */
static inline uint32_t dec_tree(struct rc_dec *d, uint16_t *t, uint32_t depth, bool noisy)
{
	uint32_t node = 1, c = t[1];

	for (uint32_t k = 1; k < depth; k++) {
		uint32_t pair, bit; /* the two children, adjacent: one load */

		memcpy(&pair, &t[2 * node], sizeof(pair));
		bit = dec_bit(d, &t[node], c, noisy);
		node = 2 * node + bit;
		c = child_ctx(pair, bit);
	}
	return 2 * node + dec_bit(d, &t[node], c, noisy);
}

/* range >= 2^23 after halving: at most one byte */
static inline uint32_t dec_even(struct rc_dec *d)
{
	uint32_t bit;

	d->range >>= 1;
	bit = d->code >= d->range;
	d->code -= d->range & (0u - bit);
	if (d->range < TOP) {
		d->range <<= 8;
		d->code = (d->code << 8) | next_byte(d);
	}
	return bit;
}

/* Word model 2's plain bits: @len bytes at @in, the next at bit @pos. */
struct raw_dec {
	const uint8_t *in;
	size_t len;
	uint64_t pos;
};

/* @k <= 57 bits, least significant first; 0 past the end (the caller checks pos). */
static inline uint64_t raw_get(struct raw_dec *r, uint32_t k)
{
	const size_t at = (size_t)(r->pos >> 3);
	uint64_t x = 0;

	if (at + 8 <= r->len) {
		memcpy(&x, r->in + at, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		x = __builtin_bswap64(x);
#endif
	} else {
		for (size_t j = 0; at + j < r->len && j < 8; j++)
			x |= (uint64_t)r->in[at + j] << (8 * j);
	}
	x = (x >> (r->pos & 7)) & ((UINT64_C(1) << k) - 1);
	r->pos += k;
	return x;
}

/*
 * The next word, with the contexts @c; @r: word model 2's plain bits, NULL in word model 1;
 * @noisy: mantissa bits decided without a branch (lossless times).
 * @return the word, or UINT64_MAX with *@bad set for a length over 64
 */
static inline __attribute__((always_inline)) uint64_t
dec_word(struct rc_dec *d, struct raw_dec *r, struct word_ctx c, bool noisy, bool *bad)
{
	const uint32_t g = *c.group, f = full_len(r ? VRC_WORDS_2 : VRC_WORDS_1);
	uint32_t n, head, k;
	uint64_t u;

	if (r && g && !dec_bit(d, &c.same[g], c.same[g], false)) {
		n = g - 1;
	} else {
		n = dec_tree(d, c.len, 7, false) - LEN_PROBS;
		if (n > 64) {
			*bad = true;
			return UINT64_MAX;
		}
	}
	*c.group = (uint8_t)(1 + n);
	if (n < 2)
		return n;
	head = head_of(n, f);
	u = dec_tree(d, man_tree(c, n, f), head, noisy); /* the leading one and the head bits */
	k = n - 1 - head;
	if (!r) {
		for (uint32_t j = 0; j < k; j++)
			u = (u << 1) | dec_even(d);
		return u;
	}
	if (k > 32) {
		const uint64_t lo = raw_get(r, 32);

		return (u << k) | raw_get(r, k - 32) << 32 | lo;
	}
	return (u << k) | raw_get(r, k);
}

/* Word model 2's column: the coded part's length, the coded part, the plain bits. */
static const char *decode2(struct vrc_model *m, const uint8_t *slot, uint32_t n,
			   const uint8_t *in, size_t len, uint64_t *out)
{
	struct rc_dec d = {.range = UINT32_MAX};
	struct raw_dec r = {.pos = 0};
	uint64_t rc_len = 0;
	size_t at = 0;
	bool bad = false;

	/* a varint as FORMAT.md defines it: at most 10 bytes, the 10th 0 or 1 */
	for (unsigned int shift = 0;; shift += 7) {
		if (at == len || shift > 63)
			return "coded column's length runs past its end";
		if (shift == 63 && in[at] > 1)
			return "coded column's length over 64 bits";
		rc_len |= (uint64_t)(in[at] & 0x7f) << shift;
		if (!(in[at++] & 0x80))
			break;
	}
	if (rc_len > len - at)
		return "coded part longer than its column";
	if (rc_len < VRC_MIN_LEN)
		return "coded column too short";
	d.in = in + at;
	d.len = (size_t)rc_len;
	d.pos = 5;
	r.in = in + at + rc_len;
	r.len = len - at - (size_t)rc_len;
	if (d.in[0] != 0)
		return "coded column's first byte not 0";
	d.code = (uint32_t)d.in[1] << 24 | (uint32_t)d.in[2] << 16 | (uint32_t)d.in[3] << 8 |
		 d.in[4];
	vrc_model_reset(m);
	for (uint32_t i = 0; i < n; i++) {
		const uint64_t u = m->noisy ? dec_word(&d, &r, ctx_of(m, slot[i]), true, &bad)
					    : dec_word(&d, &r, ctx_of(m, slot[i]), false, &bad);

		if (bad)
			return "coded word longer than 64 bits";
		if (d.pos > d.len)
			return "coded column runs past its end";
		if (r.pos > 8 * (uint64_t)r.len)
			return "coded column's plain bits run past its end";
		out[i] = u;
	}
	if (d.pos != d.len)
		return "bytes after the coded column's words";
	if ((r.pos + 7) / 8 != r.len)
		return "bytes after the coded column's plain bits";
	if (r.pos % 8 && r.in[r.len - 1] >> (r.pos % 8))
		return "coded column's padding bits not 0";
	return NULL;
}

const char *vrc_decode(struct vrc_model *m, const uint8_t *slot, uint32_t n, const uint8_t *in,
		       size_t len, uint64_t *out)
{
	struct rc_dec d = {.in = in, .pos = 5, .len = len, .range = UINT32_MAX};
	bool bad = false;

	if (m->words == VRC_WORDS_2)
		return decode2(m, slot, n, in, len, out);
	if (len < VRC_MIN_LEN)
		return "coded column too short";
	if (in[0] != 0)
		return "coded column's first byte not 0";
	d.code = (uint32_t)in[1] << 24 | (uint32_t)in[2] << 16 | (uint32_t)in[3] << 8 | in[4];
	vrc_model_reset(m);
	for (uint32_t i = 0; i < n; i++) {
		const uint64_t u = m->noisy ? dec_word(&d, NULL, ctx_of(m, slot[i]), true, &bad)
					    : dec_word(&d, NULL, ctx_of(m, slot[i]), false, &bad);

		if (bad)
			return "coded word longer than 64 bits";
		if (d.pos > d.len)
			return "coded column runs past its end";
		out[i] = u;
	}
	if (d.pos != d.len)
		return "bytes after the coded column's words";
	return NULL;
}
