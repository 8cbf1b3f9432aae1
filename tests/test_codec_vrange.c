/*
 * Range-coded timing columns (FORMAT.md §7.4.2, and §7.4.3's word model 2): codec/vrange.c
 * against tests/ref_vrange.h, a second writing of the spec: byte-identical columns and words
 * for words of every length and context sets beyond the 256th terminal, golden columns,
 * every truncation refused, every bit flip and random columns read alike by both. Every test
 * runs in both word models. Whole sections with coded columns are tested in
 * test_codec_values.c and test_codec_ticks.c (golden values_v3c and values_v5c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vrange_i.h"
#include "testutil.h"
#include "ref_vrange.h"

#define VARINT_MAX 10

/* The word model the tests run in: each group sets it (VRC_WORDS_*). */
static unsigned int g_words = VRC_WORDS_1;

static int in_model_1(void **state)
{
	(void)state;
	g_words = VRC_WORDS_1;
	return 0;
}

static int in_model_2(void **state)
{
	(void)state;
	g_words = VRC_WORDS_2;
	return 0;
}

/* The reference's writer and reader in the tests' model. */
static size_t ref_encode(const uint64_t *words, const uint32_t *term, uint32_t n, uint8_t *out)
{
	return ref_vrange_encode_model((int)g_words, words, term, n, out);
}

static int ref_decode(const uint8_t *in, size_t len, const uint32_t *term, uint32_t n,
		      uint64_t *words)
{
	return ref_vrange_decode_model((int)g_words, in, len, term, n, words);
}

/* Bytes before the coded part: word model 2's length of it. */
static size_t coded_at(const uint8_t *col)
{
	size_t k = 0;

	if (g_words == VRC_WORDS_1)
		return 0;
	while (col[k] & 0x80)
		k++;
	return k + 1;
}

/* One column's input: words and the terminals of their events. */
struct col_case {
	uint32_t n;
	uint64_t *words;
	uint32_t *term;
	uint8_t *slot; /* the context sets the codec is given, from the reference's numbering */
	uint8_t *varints;
	size_t varints_len;
};

static void case_init(struct col_case *c, uint32_t n)
{
	c->n = n;
	c->words = calloc(n ? n : 1, sizeof(*c->words));
	c->term = calloc(n ? n : 1, sizeof(*c->term));
	c->slot = calloc(n ? n : 1, 1);
	c->varints = malloc((size_t)(n ? n : 1) * VARINT_MAX);
	assert_true(c->words && c->term && c->slot && c->varints);
}

/* Slots and varints once words and terminals are set. */
static void case_finish(struct col_case *c)
{
	uint32_t *seen = malloc((c->n ? c->n : 1) * sizeof(*seen)), n_seen = 0;

	assert_non_null(seen);
	c->varints_len = 0;
	for (uint32_t i = 0; i < c->n; i++) {
		c->slot[i] = (uint8_t)ref_set_of(seen, &n_seen, c->term[i]);
		c->varints_len += varint_store(c->varints + c->varints_len, c->words[i]);
	}
	free(seen);
}

static void case_fini(struct col_case *c)
{
	free(c->words);
	free(c->term);
	free(c->slot);
	free(c->varints);
}

/* Words of kind @kind (0 zeros ... 5 any u64) for @n_terms terminals. */
static void gen_case(struct col_case *c, uint32_t n, uint32_t n_terms, int kind, uint64_t *seed)
{
	case_init(c, n);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t t = (uint32_t)tu_below(seed, n_terms);
		uint64_t w = 0;

		switch (kind) {
		case 0:
			break;
		case 1: /* small residuals */
			w = tu_below(seed, 16);
			break;
		case 2: /* lossy bins around a call site's own value */
			w = 2 * (40 + 7 * (uint64_t)(t % 20) + tu_below(seed, 9));
			break;
		case 3: /* nanoseconds: a call site's scale times noise */
			w = (UINT64_C(1) << (8 + t % 24)) + tu_below(seed, UINT64_C(1) << (6 + t % 24));
			break;
		case 4: /* every length, 64 bits included */
			w = tu_rand(seed) >> tu_below(seed, 64);
			break;
		default:
			w = tu_rand(seed);
			break;
		}
		c->term[i] = t;
		c->words[i] = w;
	}
	case_finish(c);
}

/* The codec's column for @c (caller frees). */
static uint8_t *codec_encode(struct vrc_model *m, const struct col_case *c, size_t *len)
{
	struct tfs_buf out;
	uint8_t *p;

	buf_init(&out);
	assert_int_equal(vrc_encode(m, c->slot, c->n, c->varints, &out), 0);
	p = malloc(out.len ? out.len : 1);
	assert_non_null(p);
	memcpy(p, out.data, out.len);
	*len = out.len;
	buf_fini(&out);
	return p;
}

/* The codec's reading of @col: NULL or why it refused, words into @w. */
static const char *codec_decode(struct vrc_model *m, const struct col_case *c,
				const uint8_t *col, size_t len, uint64_t *w)
{
	return vrc_decode(m, c->slot, c->n, col, len, w);
}

/* Codec and reference write the same bytes for @c and read back its words. */
static void check_case(struct vrc_model *m, const struct col_case *c, size_t *bytes_out)
{
	uint8_t *ref = malloc(32 * (size_t)c->n + 24);
	uint64_t *w = malloc((c->n ? c->n : 1) * sizeof(*w));
	size_t len, ref_len;
	uint8_t *col;

	assert_true(ref && w);
	col = codec_encode(m, c, &len);
	ref_len = ref_encode(c->words, c->term, c->n, ref);
	assert_int_equal(len, ref_len);
	assert_memory_equal(col, ref, len);
	assert_null(codec_decode(m, c, col, len, w));
	assert_memory_equal(w, c->words, c->n * sizeof(*w));
	memset(w, 0, c->n * sizeof(*w));
	assert_int_equal(ref_decode(col, len, c->term, c->n, w), 0);
	assert_memory_equal(w, c->words, c->n * sizeof(*w));
	if (bytes_out)
		*bytes_out = len;
	free(col);
	free(ref);
	free(w);
}

static void test_vrange_matches_reference(void **state)
{
	static const uint32_t sizes[] = {0, 1, 2, 17, 700, 4096};
	static const uint32_t terms[] = {1, 3, 300};
	uint64_t seed = tu_seed(__func__);
	struct vrc_model m;

	assert_int_equal(vrc_model_init(&m, g_words), 0);
	for (size_t a = 0; a < sizeof(sizes) / sizeof(sizes[0]); a++)
		for (size_t b = 0; b < sizeof(terms) / sizeof(terms[0]); b++)
			for (int kind = 0; kind <= 5; kind++) {
				struct col_case c;
				size_t len;

				gen_case(&c, sizes[a], terms[b], kind, &seed);
				check_case(&m, &c, &len);
				if (sizes[a] == 4096 && terms[b] == 3)
					print_message("# kind %d: %zu bytes for %u words (%zu as "
						      "varints)\n",
						      kind, len, c.n, c.varints_len);
				/* a call site's own distribution is learnt: under a byte each */
				if (sizes[a] == 4096 && terms[b] == 3 && kind <= 2)
					assert_true(len < c.n);
				case_fini(&c);
			}
	vrc_model_fini(&m);
}

/*
 * Terminals beyond the 255th share set 255: 300 terminals each with its own constant, the
 * first 255 learn theirs, the rest one common set.
 */
static void test_vrange_sets_beyond_255_are_shared(void **state)
{
	struct vrc_model m;
	struct col_case c;
	uint8_t max_slot = 0;

	assert_int_equal(vrc_model_init(&m, g_words), 0);
	case_init(&c, 3000);
	for (uint32_t i = 0; i < c.n; i++) {
		c.term[i] = i % 300;
		c.words[i] = 1000 + 3 * (i % 300);
	}
	case_finish(&c);
	for (uint32_t i = 0; i < c.n; i++)
		if (c.slot[i] > max_slot)
			max_slot = c.slot[i];
	assert_int_equal(max_slot, 255);
	assert_int_equal(c.slot[299], 255);
	assert_int_equal(c.slot[254], 254);
	assert_int_equal(vrc_slot_of(299), 255);
	assert_int_equal(vrc_slot_of(254), 254);
	check_case(&m, &c, NULL);
	case_fini(&c);
	vrc_model_fini(&m);
}

/*
 * Golden columns, from §7.4.2 by hand and by tests/data/golden/values_v3c.py's writer: one
 * word 0 (seven 0 bits at 1/2 leave low at 0); words of lengths 1, 2, 11 and 64 of two
 * terminals (its 64-bit word makes a run of 0xff bytes wait for a carry).
 */
static void test_vrange_golden_columns(void **state)
{
	static const uint8_t golden1[] = {0x00, 0x00, 0x00, 0x00, 0x00};
	static const uint64_t words2[] = {1, 2, 1500, UINT64_MAX, 2};
	static const uint32_t terms2[] = {0, 1, 0, 1, 1};
	static const uint8_t golden2[] = {0x00, 0x02, 0x08, 0x25, 0xdc, 0x81, 0xff, 0xff, 0xff,
					  0xff, 0xff, 0xff, 0xff, 0xfc, 0x10, 0x00, 0x00, 0x00};
	/* §7.4.3: the coded part's length, then the coded part, then 67 plain bits */
	static const uint8_t golden1_m2[] = {0x05, 0x00, 0x00, 0x00, 0x00, 0x00};
	static const uint8_t golden2_m2[] = {0x0a, 0x00, 0x02, 0x09, 0x0e, 0xf0, 0x3c,
					     0x10, 0x00, 0x00, 0x00, 0xdc, 0xff, 0xff,
					     0xff, 0xff, 0xff, 0xff, 0xff, 0x07};
	const bool two = g_words == VRC_WORDS_2;
	const uint8_t *gold1 = two ? golden1_m2 : golden1, *gold2 = two ? golden2_m2 : golden2;
	const size_t len1 = two ? sizeof(golden1_m2) : sizeof(golden1);
	const size_t len2 = two ? sizeof(golden2_m2) : sizeof(golden2);
	struct vrc_model m;
	struct col_case c;
	uint64_t w[5];
	uint8_t *col;
	size_t len;

	assert_int_equal(vrc_model_init(&m, g_words), 0);
	case_init(&c, 1);
	case_finish(&c);
	col = codec_encode(&m, &c, &len);
	assert_int_equal(len, len1);
	assert_memory_equal(col, gold1, len);
	assert_null(codec_decode(&m, &c, gold1, len1, w));
	assert_true(w[0] == 0);
	check_case(&m, &c, NULL);
	free(col);
	case_fini(&c);

	case_init(&c, 5);
	memcpy(c.words, words2, sizeof(words2));
	memcpy(c.term, terms2, sizeof(terms2));
	case_finish(&c);
	col = codec_encode(&m, &c, &len);
	assert_int_equal(len, len2);
	assert_memory_equal(col, gold2, len);
	assert_null(codec_decode(&m, &c, gold2, len2, w));
	assert_memory_equal(w, words2, sizeof(words2));
	check_case(&m, &c, NULL);
	free(col);
	case_fini(&c);
	vrc_model_fini(&m);
}

/* Every proper prefix of a column is refused by both readers (§7.4.2: a byte past its end). */
static void test_vrange_truncations_are_refused(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct vrc_model m;
	struct col_case c;
	uint64_t *w;
	uint8_t *col;
	size_t len;

	assert_int_equal(vrc_model_init(&m, g_words), 0);
	gen_case(&c, 300, 5, 4, &seed);
	w = malloc(c.n * sizeof(*w));
	assert_non_null(w);
	col = codec_encode(&m, &c, &len);
	for (size_t cut = 0; cut < len; cut++) {
		uint8_t *copy = malloc(cut ? cut : 1);

		assert_non_null(copy);
		memcpy(copy, col, cut);
		assert_non_null(codec_decode(&m, &c, copy, cut, w));
		assert_int_equal(ref_decode(copy, cut, c.term, c.n, w), -1);
		free(copy);
	}
	/* and a byte more is refused too */
	{
		uint8_t *longer = malloc(len + 1);

		assert_non_null(longer);
		memcpy(longer, col, len);
		longer[len] = 0;
		assert_string_equal(codec_decode(&m, &c, longer, len + 1, w),
				    g_words == VRC_WORDS_1 ? "bytes after the coded column's words"
							   : "bytes after the coded column's plain bits");
		free(longer);
	}
	free(col);
	free(w);
	case_fini(&c);
	vrc_model_fini(&m);
}

/* Both readers agree on @col: both refuse it, or both read the same words. @return accepted */
static int agree(struct vrc_model *m, const struct col_case *c, const uint8_t *col, size_t len,
		 uint64_t *w1, uint64_t *w2, const char **why)
{
	const char *bad = codec_decode(m, c, col, len, w1);
	int ref = ref_decode(col, len, c->term, c->n, w2);

	*why = bad;
	assert_int_equal(bad == NULL, ref == 0);
	if (!bad)
		assert_memory_equal(w1, w2, c->n * sizeof(*w1));
	return !bad;
}

/* Every single-bit flip of a column: the codec reads it as the reference does, or refuses. */
static void test_vrange_bit_flips_read_alike(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct vrc_model m;
	struct col_case c;
	uint64_t *w1, *w2;
	size_t len, accepted = 0, first_byte = 0, at;
	uint8_t *col;

	assert_int_equal(vrc_model_init(&m, g_words), 0);
	gen_case(&c, 200, 4, 3, &seed);
	w1 = malloc(c.n * sizeof(*w1));
	w2 = malloc(c.n * sizeof(*w2));
	assert_true(w1 && w2);
	col = codec_encode(&m, &c, &len);
	at = coded_at(col);
	for (size_t bit = 0; bit < len * 8; bit++) {
		const char *why;

		col[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		accepted += agree(&m, &c, col, len, w1, w2, &why);
		if (bit / 8 == at) {
			assert_string_equal(why, "coded column's first byte not 0");
			first_byte++;
		}
		col[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	assert_int_equal(first_byte, 8);
	print_message("# %zu of %zu flips of a %zu-byte column still decode (to other words)\n",
		      accepted, len * 8, len);
	free(col);
	free(w1);
	free(w2);
	case_fini(&c);
	vrc_model_fini(&m);
}

/*
 * Random bytes after a 0: lengths from a fresh length tree are near uniform in 0..127, so
 * most columns name a length over 64 early; the readers agree on every one.
 */
static void test_vrange_random_columns_read_alike(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct vrc_model m;
	struct col_case c;
	uint64_t w1[8], w2[8];
	size_t too_long = 0, accepted = 0;

	assert_int_equal(vrc_model_init(&m, g_words), 0);
	case_init(&c, 8);
	for (uint32_t i = 0; i < c.n; i++)
		c.term[i] = i % 3;
	case_finish(&c);
	for (int k = 0; k < 2000; k++) {
		uint8_t col[48];
		size_t len = 5 + tu_below(&seed, 36), at = 0;
		const char *why;

		/* word model 2: a length that fits, then a few plain bytes */
		if (g_words == VRC_WORDS_2)
			col[at++] = (uint8_t)len;
		for (size_t i = at; i < at + len; i++)
			col[i] = (uint8_t)tu_rand(&seed);
		col[at] = 0;
		len += at;
		if (g_words == VRC_WORDS_2)
			for (size_t plain = tu_below(&seed, 8); plain; plain--)
				col[len++] = (uint8_t)tu_rand(&seed);
		accepted += agree(&m, &c, col, len, w1, w2, &why);
		too_long += why && strcmp(why, "coded word longer than 64 bits") == 0;
	}
	print_message("# 2000 random columns: %zu decode, %zu name a length over 64\n", accepted,
		      too_long);
	assert_true(too_long > 500);
	case_fini(&c);
	vrc_model_fini(&m);
}

/*
 * vrc_encode_max() codes exactly what vrc_encode() does when the column fits its bound,
 * appending after what the buffer holds, and leaves the buffer's length alone when it is
 * one byte short.
 */
static void test_vrange_encode_max_stops_at_its_bound(void **state)
{
	static const uint8_t before[3] = {7, 8, 9};
	uint64_t seed = tu_seed(__func__);
	struct vrc_model m;

	assert_int_equal(vrc_model_init(&m, g_words), 0);
	for (int kind = 0; kind <= 5; kind++) {
		struct col_case c;
		struct tfs_buf out;
		uint8_t *col;
		size_t len;

		gen_case(&c, 1000, 5, kind, &seed);
		col = codec_encode(&m, &c, &len);
		buf_init(&out);
		assert_int_equal(buf_put(&out, before, sizeof(before)), 0);
		assert_int_equal(vrc_encode_max(&m, c.slot, c.n, c.varints, len - 1, &out), 0);
		assert_int_equal(out.len, sizeof(before));
		assert_int_equal(vrc_encode_max(&m, c.slot, c.n, c.varints, len, &out), 1);
		assert_int_equal(out.len, sizeof(before) + len);
		assert_memory_equal(out.data, before, sizeof(before));
		assert_memory_equal(out.data + sizeof(before), col, len);
		assert_int_equal(vrc_encode_max(&m, c.slot, c.n, c.varints, VRC_MIN_LEN - 1, &out),
				 0);
		assert_int_equal(out.len, sizeof(before) + len);
		buf_fini(&out);
		free(col);
		case_fini(&c);
	}
	vrc_model_fini(&m);
}

/*
 * vrc_encode_marked(): a column's marks are its bytes every VRC_MARK_WORDS words (what
 * vrc_encode_max() with that many words writes before its flush, give or take the bytes
 * held back); a column racing them codes as vrc_encode() does while it keeps up, and gives
 * up, its buffer's length unchanged, when it falls well behind.
 */
static void test_vrange_marked_columns_race(void **state)
{
	uint64_t seed = tu_seed(__func__);
	uint32_t marks[VRC_MARKS], again[VRC_MARKS];
	struct col_case small, big;
	struct tfs_buf out;
	struct vrc_model m;
	uint8_t *col;
	size_t len;

	assert_int_equal(vrc_model_init(&m, g_words), 0);
	gen_case(&small, 4096, 3, 1, &seed); /* small residuals: about a byte a word */
	gen_case(&big, 4096, 3, 3, &seed);   /* nanoseconds: several bytes a word */
	for (uint32_t i = 0; i < big.n; i++)
		big.slot[i] = small.slot[i];
	buf_init(&out);
	assert_int_equal(vrc_encode_marked(&m, small.slot, small.n, small.varints, SIZE_MAX, marks,
					   NULL, &out), 1);
	col = codec_encode(&m, &small, &len);
	assert_int_equal(out.len, len);
	assert_memory_equal(out.data, col, len);
	for (uint32_t k = 1; k < 4096 / VRC_MARK_WORDS; k++)
		assert_true(marks[k] >= marks[k - 1] && marks[k] <= len);
	assert_int_equal(marks[4096 / VRC_MARK_WORDS], UINT32_MAX); /* past the end */
	/* the same column keeps up with its own marks */
	out.len = 0;
	assert_int_equal(vrc_encode_marked(&m, small.slot, small.n, small.varints, SIZE_MAX, again,
					   marks, &out), 1);
	assert_memory_equal(again, marks, sizeof(marks));
	assert_memory_equal(out.data, col, len);
	/* a column several times longer gives up */
	out.len = 3;
	assert_int_equal(vrc_encode_marked(&m, big.slot, big.n, big.varints, SIZE_MAX, NULL, marks,
					   &out), 0);
	assert_int_equal(out.len, 3);
	buf_fini(&out);
	free(col);
	case_fini(&small);
	case_fini(&big);
	vrc_model_fini(&m);
}

/*
 * Word model 2's coded-part length (FORMAT.md §7.4.3) is a varint by the rules of the
 * whole format: at most 10 bytes, the 10th 0 or 1. A 10th byte with a higher bit names a
 * length past 2^64, whatever its low bits say; both readers refuse it, as they do a length
 * under 5, one past the column and one running off its end, and read the same column with
 * its length written in 10 bytes.
 */
static void test_vrange_model2_bad_lengths_are_refused(void **state)
{
	/* the single word 0 (§7.4.3's example), its length 5 in 10 bytes */
	static const uint8_t long5[] = {0x85, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
					0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
	static const uint8_t bad[][15] = {
		/* the 10th byte 2, 0x40 and 0x7e: bits 64 and up set */
		{0x85, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02, 0, 0, 0, 0, 0},
		{0x85, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 0, 0, 0, 0, 0},
		{0x85, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7e, 0, 0, 0, 0, 0},
		/* an 11th byte */
		{0x85, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0, 0, 0, 0},
	};
	static const uint8_t short4[] = {0x04, 0x00, 0x00, 0x00, 0x00, 0x00};
	static const uint8_t past[] = {0x06, 0x00, 0x00, 0x00, 0x00, 0x00};
	static const uint8_t unended[] = {0x85, 0x80};
	struct vrc_model m;
	struct col_case c;
	uint64_t w = 1;

	(void)state;
	assert_int_equal(vrc_model_init(&m, VRC_WORDS_2), 0);
	case_init(&c, 1);
	case_finish(&c);
	assert_null(codec_decode(&m, &c, long5, sizeof(long5), &w));
	assert_true(w == 0);
	assert_int_equal(ref_vrange_decode_model(2, long5, sizeof(long5), c.term, 1, &w), 0);
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		assert_non_null(codec_decode(&m, &c, bad[k], sizeof(bad[k]), &w));
		assert_int_equal(
			ref_vrange_decode_model(2, bad[k], sizeof(bad[k]), c.term, 1, &w), -1);
	}
	assert_string_equal(codec_decode(&m, &c, short4, sizeof(short4), &w),
			    "coded column too short");
	assert_int_equal(ref_vrange_decode_model(2, short4, sizeof(short4), c.term, 1, &w), -1);
	assert_string_equal(codec_decode(&m, &c, past, sizeof(past), &w),
			    "coded part longer than its column");
	assert_int_equal(ref_vrange_decode_model(2, past, sizeof(past), c.term, 1, &w), -1);
	assert_non_null(codec_decode(&m, &c, unended, sizeof(unended), &w));
	assert_int_equal(ref_vrange_decode_model(2, unended, sizeof(unended), c.term, 1, &w), -1);
	case_fini(&c);
	vrc_model_fini(&m);
}

/* A test run in word model 1, then in word model 2. */
#define BOTH_MODELS(f)                                                                   \
	{#f " (word model 1)", f, in_model_1, NULL, NULL},                                \
	{                                                                                  \
		#f " (word model 2)", f, in_model_2, NULL, NULL                            \
	}

int main(void)
{
	const struct CMUnitTest tests[] = {
		BOTH_MODELS(test_vrange_matches_reference),
		BOTH_MODELS(test_vrange_sets_beyond_255_are_shared),
		BOTH_MODELS(test_vrange_golden_columns),
		BOTH_MODELS(test_vrange_truncations_are_refused),
		BOTH_MODELS(test_vrange_bit_flips_read_alike),
		BOTH_MODELS(test_vrange_random_columns_read_alike),
		BOTH_MODELS(test_vrange_encode_max_stops_at_its_bound),
		BOTH_MODELS(test_vrange_marked_columns_race),
		cmocka_unit_test(test_vrange_model2_bad_lengths_are_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
