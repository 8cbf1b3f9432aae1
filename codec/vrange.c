/*
 * The range coder and word model of coded timing columns (FORMAT.md §7.4.2). A binary
 * range coder with 12-bit probabilities adapting faster while a context is young (the
 * LZMA construction otherwise: 32-bit range, carries resolved through a pending byte and a
 * run of 0xff bytes); a word is coded as its bit length through a 7-level binary tree (one
 * per length of the set's previous word: a call site's values come in runs of a size),
 * then the bits below its leading one, the first of them through a tree per length (all
 * of them up to length 10), the rest as even bits.
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
#define FULL_LEN 10u	/* lengths up to this have every mantissa bit modelled */
#define HEAD_BITS 3u	/* longer ones: this many, the rest even */
#define WORST_WORD 20u	/* bytes a word can take: 10 modelled bits at < 8.1 bits, 60 even */

/* Offset of length @n's mantissa tree (n >= 2) in a set's mantissa contexts. */
static inline uint32_t man_off(uint32_t n)
{
	return n <= FULL_LEN ? (1u << (n - 1)) - 2 : 1022u + (n - 11) * 8;
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
	for (uint32_t i = 0; i < VRC_MAN_PROBS; i++)
		fresh[i] = P_INIT;
	for (uint32_t c = 0; c < N_STATES; c++) {
		const uint32_t n = c & 3, s = n + 1, p = c >> 2, next = n < 3 ? n + 1 : 3;

		/* towards PROB_ONE after a 0, towards 0 after a 1 */
		adapted[2 * c] = (uint16_t)((p + ((PROB_ONE - p) >> s)) << 2 | next);
		adapted[2 * c + 1] = (uint16_t)((p - (p >> s)) << 2 | next);
	}
}

int vrc_model_init(struct vrc_model *m)
{
	pthread_once(&fresh_once, make_fresh);
	memset(m, 0, sizeof(*m));
	m->man = malloc((size_t)VRC_SLOTS * VRC_MAN_PROBS * sizeof(*m->man));
	/* mostly never touched: only the trees of lengths that occur are initialised */
	m->len = malloc((size_t)VRC_SLOTS * VRC_LEN_GROUPS * VRC_LEN_PROBS * sizeof(*m->len));
	m->len_init = malloc((size_t)VRC_SLOTS * 2 * sizeof(*m->len_init));
	m->group = malloc(VRC_SLOTS);
	if (!m->man || !m->len || !m->len_init || !m->group) {
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
	memset(m, 0, sizeof(*m));
}

/* The contexts one word is coded with. */
struct word_ctx {
	uint16_t *len; /* its length tree */
	uint16_t *man; /* its set's mantissa trees */
	uint8_t *group; /* where the set keeps the length tree of its next word */
};

static void fill(uint16_t *p, uint32_t n)
{
	memcpy(p, fresh, n * sizeof(*p));
}

/* The contexts of the next word of set @slot, each initialised at its first use. */
static inline struct word_ctx ctx_of(struct vrc_model *m, uint8_t slot)
{
	struct word_ctx c;
	uint64_t *init;
	uint32_t g;

	/* slots come in order (vrc_slot_of), so this initialises one set at a time */
	while (m->n_init <= slot) {
		const uint32_t s = m->n_init++;

		fill(m->man + (size_t)s * VRC_MAN_PROBS, VRC_MAN_PROBS);
		m->len_init[2 * s] = m->len_init[2 * s + 1] = 0;
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
	c.group = &m->group[slot];
	return c;
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

static void enc_word(struct rc_enc *e, struct word_ctx c, uint64_t u)
{
	const uint32_t n = u ? 64u - (uint32_t)__builtin_clzll(u) : 0;
	uint32_t node = 1, head;
	uint16_t *man;

	for (uint32_t bits = n << 25, k = 0; k < 7; k++, bits <<= 1) {
		const uint32_t b = bits >> 31;

		enc_bit(e, &c.len[node], b);
		node = 2 * node + b;
	}
	*c.group = (uint8_t)(1 + n);
	if (n < 2)
		return;
	head = n <= FULL_LEN ? n - 1 : HEAD_BITS;
	man = c.man + man_off(n);
	node = 1;
	for (uint32_t k = 0; k < head; k++) {
		const uint32_t b = (uint32_t)(u >> (n - 2 - k)) & 1;

		enc_bit(e, &man[node], b);
		node = 2 * node + b;
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
	uint32_t k = 0;
	int rc;

	for (uint32_t j = 0; mark_out && j < VRC_MARKS; j++)
		mark_out[j] = UINT32_MAX;
	if (max_len < VRC_MIN_LEN)
		return 0;
	rc = buf_reserve(out, (size_t)n * WORST_WORD + VRC_MIN_LEN);
	if (rc < 0)
		return rc;
	e.out = out->data + out->len;
	vrc_model_reset(m);
	for (uint32_t i = 0; i < n; i++) {
		enc_word(&e, ctx_of(m, slot[i]), own_varint(&col));
		/* bytes written never shrink: past @max_len, the rest cannot bring it back */
		if (e.len > max_len)
			return 0;
		if ((i + 1) % VRC_MARK_WORDS || k == VRC_MARKS)
			continue;
		if (mark_out)
			mark_out[k] = (uint32_t)e.len;
		if (mark_in && e.len > mark_in[k] + mark_in[k] / 16 + 8)
			return 0;
		k++;
	}
	for (int j = 0; j < 5; j++)
		shift_low(&e);
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
 * count: both children's contexts are loaded while the bit is being decided. Branching on
 * the bit measured better than selecting without a branch overall: 6% slower on lossless
 * times, whose noisy bits mispredict, but 14% faster on lossy ones, whose skewed bits
 * predict well (CPU time of `tracefs cat` without decoding ahead, synth_demo traces).
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

/* A decision with the context at @ctx, whose value @c the caller has loaded already. */
static inline uint32_t dec_bit(struct rc_dec *d, uint16_t *ctx, uint32_t c)
{
	const uint32_t bound = (d->range >> PROB_BITS) * (c >> 2);
	uint32_t bit;

	if (d->code < bound) {
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
static inline uint32_t dec_tree(struct rc_dec *d, uint16_t *t, uint32_t depth)
{
	uint32_t node = 1, c = t[1];

	for (uint32_t k = 1; k < depth; k++) {
		uint32_t pair, bit; /* the two children, adjacent: one load */

		memcpy(&pair, &t[2 * node], sizeof(pair));
		bit = dec_bit(d, &t[node], c);
		node = 2 * node + bit;
		c = child_ctx(pair, bit);
	}
	return 2 * node + dec_bit(d, &t[node], c);
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

/* @return the word, or UINT64_MAX with *@bad set for a length over 64 */
static uint64_t dec_word(struct rc_dec *d, struct word_ctx c, bool *bad)
{
	uint32_t n, head;
	uint64_t u;
	uint16_t *man;

	n = dec_tree(d, c.len, 7) - LEN_PROBS;
	if (n > 64) {
		*bad = true;
		return UINT64_MAX;
	}
	*c.group = (uint8_t)(1 + n);
	if (n < 2)
		return n;
	head = n <= FULL_LEN ? n - 1 : HEAD_BITS;
	man = c.man + man_off(n);
	u = dec_tree(d, man, head); /* the leading one and the head bits */
	for (uint32_t k = head + 1; k < n; k++)
		u = (u << 1) | dec_even(d);
	return u;
}

const char *vrc_decode(struct vrc_model *m, const uint8_t *slot, uint32_t n, const uint8_t *in,
		       size_t len, uint64_t *out)
{
	struct rc_dec d = {.in = in, .pos = 5, .len = len, .range = UINT32_MAX};
	bool bad = false;

	if (len < VRC_MIN_LEN)
		return "coded column too short";
	if (in[0] != 0)
		return "coded column's first byte not 0";
	d.code = (uint32_t)in[1] << 24 | (uint32_t)in[2] << 16 | (uint32_t)in[3] << 8 | in[4];
	vrc_model_reset(m);
	for (uint32_t i = 0; i < n; i++) {
		const uint64_t u = dec_word(&d, ctx_of(m, slot[i]), &bad);

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
