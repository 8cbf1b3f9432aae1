/*
 * The Sequitur builder: every stream must come back exactly through export, parse and
 * expand, the validator must pass along the way, loops must compress to a constant size,
 * and an allocation failure must reject exactly one symbol and change nothing else.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "gbuild_i.h" /* the loop fast path's state, to see that it is followed */
#include "grammar_i.h"
#include "testutil.h"

/* A growable input stream. */
struct stream {
	uint32_t *v;
	size_t n;
	size_t cap;
};

static void put(struct stream *s, uint32_t t)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 1024;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		assert_non_null(s->v);
	}
	s->v[s->n++] = t;
}

static void put_str(struct stream *s, const char *str)
{
	for (; *str; str++)
		put(s, (uint8_t)*str);
}

static void assert_valid(const struct tfs_gbuild *g)
{
	char why[256];

	if (gbuild_check(g, why, sizeof(why)) != 0)
		fail_msg("gbuild_check: %s", why);
}

/*
 * Export @g and parse the block back as a reader does, with the builder's event count as
 * the block's: so every grammar the builder makes also keeps within the sizes FORMAT.md §6
 * bounds by its events (2n + 1 elements). The caller owns @gr and @blk.
 */
static void export_parse(struct tfs_gbuild *g, struct tfs_buf *blk, struct tfs_grammar *gr)
{
	struct tfs_rd r;

	buf_init(blk);
	assert_int_equal(gbuild_export(g, blk), 0);
	rd_init(&r, blk->data, blk->len, 0, "grammar", NULL);
	assert_int_equal(grammar_parse_events(&r, GRAM_MAX_TERMINAL, gbuild_n_events(g), gr), 0);
	assert_int_equal(r.off, blk->len);
	assert_true(gr->n_elems <= gram_max_elems(gbuild_n_events(g)));
	assert_true(blk->len <= gram_max_section_bytes(gbuild_n_events(g)));
}

/* Full expansion and @n_ranges random slices of it must equal @in. */
static void assert_expands_to(const struct tfs_grammar *gr, const uint32_t *in, size_t n,
			      int n_ranges, uint64_t *seed)
{
	uint32_t *out = malloc((n + 1) * sizeof(*out));

	assert_non_null(out);
	assert_true(gr->n_events == n);
	assert_int_equal(grammar_expand(gr, 0, n, out), 0);
	assert_memory_equal(out, in, n * sizeof(*out));
	for (int i = 0; i < n_ranges && n; i++) {
		uint64_t first = tu_below(seed, n), len = tu_below(seed, n - first) + 1;

		if (len > 5000)
			len = tu_below(seed, 5000) + 1;
		memset(out, 0xee, len * sizeof(*out));
		assert_int_equal(grammar_expand(gr, first, len, out), 0);
		assert_memory_equal(out, in + first, len * sizeof(*out));
	}
	assert_int_equal(grammar_expand(gr, n, 1, out), -EINVAL);
	free(out);
}

/*
 * Build @in, validating every @check_every appends (and at the end), then round trip.
 * @return the exported block's size in bytes
 */
static size_t round_trip(const uint32_t *in, size_t n, size_t check_every, uint64_t *seed)
{
	struct tfs_gbuild *g = gbuild_new();
	struct tfs_grammar gr;
	struct tfs_buf blk;
	size_t len;

	assert_non_null(g);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(gbuild_append(g, in[i]), 0);
		if ((i + 1) % check_every == 0)
			assert_valid(g);
	}
	assert_valid(g);
	assert_true(gbuild_n_events(g) == n);
	export_parse(g, &blk, &gr);
	assert_expands_to(&gr, in, n, 50, seed);
	len = blk.len;
	grammar_fini(&gr);
	buf_fini(&blk);
	gbuild_free(g);
	return len;
}

/* for (i < outer) { a; for (j < inner(i)) { b c }; d }, trip counts from @trip */
static void nested_loops(struct stream *s, uint32_t outer, uint32_t (*trip)(uint32_t, uint64_t *),
			 uint64_t *seed)
{
	for (uint32_t i = 0; i < outer; i++) {
		uint32_t inner = trip(i, seed);

		put(s, 1);
		for (uint32_t j = 0; j < inner; j++) {
			put(s, 2);
			put(s, 3);
		}
		put(s, 4);
	}
}

static uint32_t trip_fixed(uint32_t i, uint64_t *seed)
{
	return 50;
}

static uint32_t trip_cycle(uint32_t i, uint64_t *seed)
{
	return 1 + i % 7;
}

static uint32_t trip_random(uint32_t i, uint64_t *seed)
{
	return 1 + (uint32_t)tu_below(seed, 20);
}

static void test_gbuild_empty_exports_one_empty_rule(void **state)
{
	const uint8_t want[] = {0x01, 0x00};
	struct tfs_gbuild *g = gbuild_new();
	struct tfs_buf blk;

	assert_non_null(g);
	assert_valid(g);
	buf_init(&blk);
	assert_int_equal(gbuild_export(g, &blk), 0);
	assert_int_equal(blk.len, sizeof(want));
	assert_memory_equal(blk.data, want, sizeof(want));
	assert_true(gbuild_n_events(g) == 0);
	buf_fini(&blk);
	gbuild_free(g);
	gbuild_free(NULL);
}

static void test_gbuild_rejects_terminal_out_of_range(void **state)
{
	struct tfs_gbuild *g = gbuild_new();

	assert_non_null(g);
	assert_int_equal(gbuild_append(g, GRAM_MAX_TERMINAL), -EINVAL);
	assert_int_equal(gbuild_append(g, GRAM_MAX_TERMINAL - 1), 0);
	assert_true(gbuild_n_events(g) == 1);
	assert_valid(g);
	gbuild_free(g);
}

/* abcdbc -> S = a A d A, A = b c (Nevill-Manning's first example). */
static void test_gbuild_classic_abcdbc(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct stream s = {0};
	struct tfs_gbuild *g = gbuild_new();
	struct tfs_grammar gr;
	struct tfs_buf blk;
	const struct gram_elem *e;

	put_str(&s, "abcdbc");
	for (size_t i = 0; i < s.n; i++) {
		assert_int_equal(gbuild_append(g, s.v[i]), 0);
		assert_valid(g);
	}
	export_parse(g, &blk, &gr);
	assert_int_equal(gr.n_rules, 2);
	assert_int_equal(gr.rules[0].n_elems, 2);
	e = &gr.elems[gr.rules[0].first_elem];
	assert_true(e[0].id == 'b' && !e[0].is_rule && e[0].count == 1);
	assert_true(e[1].id == 'c' && !e[1].is_rule && e[1].count == 1);
	assert_int_equal(gr.rules[1].n_elems, 4);
	e = &gr.elems[gr.rules[1].first_elem];
	assert_true(e[0].id == 'a' && !e[0].is_rule);
	assert_true(e[1].id == 0 && e[1].is_rule && e[1].count == 1);
	assert_true(e[2].id == 'd' && !e[2].is_rule);
	assert_true(e[3].id == 0 && e[3].is_rule && e[3].count == 1);
	assert_expands_to(&gr, s.v, s.n, 10, &seed);
	grammar_fini(&gr);
	buf_fini(&blk);
	gbuild_free(g);
	free(s.v);
}

/* abcdbcabcdbc -> S = B^2, B = a A d A, A = b c: the repeat becomes a count. */
static void test_gbuild_classic_repeat_becomes_count(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct stream s = {0};
	struct tfs_gbuild *g = gbuild_new();
	struct tfs_grammar gr;
	struct tfs_buf blk;
	const struct gram_elem *e;

	put_str(&s, "abcdbcabcdbc");
	for (size_t i = 0; i < s.n; i++) {
		assert_int_equal(gbuild_append(g, s.v[i]), 0);
		assert_valid(g);
	}
	export_parse(g, &blk, &gr);
	assert_int_equal(gr.n_rules, 3);
	assert_int_equal(gr.rules[2].n_elems, 1);
	e = &gr.elems[gr.rules[2].first_elem];
	assert_true(e[0].is_rule && e[0].id == 1 && e[0].count == 2);
	assert_int_equal(gr.rules[1].n_elems, 4);
	assert_int_equal(gr.rules[0].n_elems, 2);
	assert_true(gr.height == 3);
	assert_expands_to(&gr, s.v, s.n, 10, &seed);
	grammar_fini(&gr);
	buf_fini(&blk);
	gbuild_free(g);
	free(s.v);
}

static void test_gbuild_classic_small_strings_round_trip(void **state)
{
	static const char *const strs[] = {
		"a", "ab", "aa", "aaa", "abab", "ababab", "abcabcabc", "abcabcabcabcabcabcabc",
		"aabaab", "aabaabaab", "abbabbabb", "pease porridge hot, pease porridge cold, "
		"pease porridge in the pot, nine days old.",
		"abcdbcabcd", "xyxyzxyxyz", "abaabaaab", "aabbaabbaabb", "abcbcbcabcbcbc",
	};
	uint64_t seed = tu_seed(__func__);

	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		struct stream s = {0};

		put_str(&s, strs[i]);
		round_trip(s.v, s.n, 1, &seed);
		free(s.v);
	}
}

static void test_gbuild_single_loop_compresses_to_constant(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct stream s = {0};
	size_t len;

	for (int i = 0; i < 100000; i++)
		put_str(&s, "abc");
	len = round_trip(s.v, s.n, 9973, &seed);
	assert_true(len < 32);
	put_str(&s, "ab");
	len = round_trip(s.v, s.n, 9973, &seed);
	assert_true(len < 32);
	free(s.v);
}

static void test_gbuild_runs_compress_to_one_element(void **state)
{
	static const size_t lens[] = {1, 2, 3, 1000, 1000000};
	uint64_t seed = tu_seed(__func__);

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct stream s = {0};
		size_t len;

		for (size_t k = 0; k < lens[i]; k++)
			put(&s, 7);
		len = round_trip(s.v, s.n, lens[i] < 5000 ? 1 : 99991, &seed);
		/* n_rules, n_elems, tag, count - 2 (at most 3 bytes below 2^21) */
		assert_true(len <= 6);
		free(s.v);
	}
}

static void test_gbuild_nested_loops_compress(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct stream s = {0};
	size_t len;

	nested_loops(&s, 2000, trip_fixed, &seed);
	len = round_trip(s.v, s.n, 997, &seed);
	assert_true(len < 32);
	s.n = 0;
	/* three levels: 300 x { x, 200 x { a, 40 x { b c }, d }, y } */
	for (int i = 0; i < 300; i++) {
		put(&s, 10);
		nested_loops(&s, 200, trip_fixed, &seed);
		put(&s, 11);
	}
	assert_true(s.n > 1000000);
	len = round_trip(s.v, s.n, 250007, &seed);
	assert_true(len < 48);
	free(s.v);
}

static void test_gbuild_nested_loops_varying_trips_round_trip(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct stream s = {0};
	size_t len;

	nested_loops(&s, 700, trip_cycle, &seed);
	len = round_trip(s.v, s.n, 1, &seed);
	/* the seven inner-loop shapes repeat: well under one byte per outer iteration */
	assert_true(len < 200);
	s.n = 0;
	nested_loops(&s, 5000, trip_random, &seed);
	round_trip(s.v, s.n, 499, &seed);
	free(s.v);
}

static void random_stream(struct stream *s, size_t n, uint32_t alphabet, uint64_t *seed)
{
	s->n = 0;
	for (size_t i = 0; i < n; i++)
		put(s, (uint32_t)tu_below(seed, alphabet));
}

static void test_gbuild_random_small_alphabets_round_trip(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct stream s = {0};

	for (uint32_t alphabet = 2; alphabet <= 5; alphabet++) {
		for (int k = 0; k < 10; k++) {
			random_stream(&s, 1500, alphabet, &seed);
			round_trip(s.v, s.n, 1, &seed);
		}
	}
	random_stream(&s, 200000, 3, &seed);
	round_trip(s.v, s.n, 49999, &seed);
	free(s.v);
}

static void test_gbuild_random_large_alphabets_round_trip(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct stream s = {0};

	random_stream(&s, 3000, 50, &seed);
	round_trip(s.v, s.n, 1, &seed);
	random_stream(&s, 200000, 1000, &seed);
	round_trip(s.v, s.n, 49999, &seed);
	random_stream(&s, 100000, GRAM_MAX_TERMINAL, &seed);
	round_trip(s.v, s.n, 49999, &seed);
	free(s.v);
}

/* Random runs and mutated repeats: the cases where run merging meets digram matching. */
static void test_gbuild_runs_and_mutated_blocks_round_trip(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct stream s = {0};

	for (int k = 0; k < 40; k++) {
		uint32_t blk[16];

		s.n = 0;
		while (s.n < 2000) {
			uint32_t t = (uint32_t)tu_below(&seed, 3), run = 1 + (uint32_t)tu_below(&seed, 4);

			while (run--)
				put(&s, t);
		}
		round_trip(s.v, s.n, 1, &seed);
		s.n = 0;
		for (int i = 0; i < 16; i++)
			blk[i] = (uint32_t)tu_below(&seed, 4);
		while (s.n < 2000) {
			uint32_t len = 1 + (uint32_t)tu_below(&seed, 16);

			for (uint32_t i = 0; i < len; i++)
				put(&s, blk[i]);
			if (tu_below(&seed, 4) == 0)
				blk[tu_below(&seed, 16)] = (uint32_t)tu_below(&seed, 4);
		}
		round_trip(s.v, s.n, 1, &seed);
	}
	free(s.v);
}

/* Irregular noise with embedded loops, over a million symbols. */
static void test_gbuild_irregular_million_round_trip(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct stream s = {0};

	while (s.n < 1200000) {
		uint64_t kind = tu_below(&seed, 4);

		if (kind == 0) {
			for (int i = 0, n = 1 + (int)tu_below(&seed, 30); i < n; i++)
				put(&s, 100 + (uint32_t)tu_below(&seed, 500));
		} else {
			uint32_t body[8], len = 1 + (uint32_t)tu_below(&seed, 8);
			uint32_t trips = 1 + (uint32_t)tu_below(&seed, 200);

			for (uint32_t i = 0; i < len; i++)
				body[i] = (uint32_t)tu_below(&seed, 12);
			for (uint32_t t = 0; t < trips; t++)
				for (uint32_t i = 0; i < len; i++)
					put(&s, body[i]);
		}
	}
	round_trip(s.v, s.n, 199999, &seed);
	free(s.v);
}

/* 1, 21, 321, 4321, ... nests one rule per step: export and expand must not recurse. */
static void test_gbuild_deep_nesting_round_trip(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct tfs_gbuild *g = gbuild_new();
	struct stream s = {0};
	struct tfs_grammar gr;
	struct tfs_buf blk;

	for (uint32_t m = 1; m <= 1500; m++)
		for (uint32_t i = m; i >= 1; i--)
			put(&s, i);
	for (size_t i = 0; i < s.n; i++)
		assert_int_equal(gbuild_append(g, s.v[i]), 0);
	assert_valid(g);
	export_parse(g, &blk, &gr);
	assert_true(gr.height > 1000);
	assert_expands_to(&gr, s.v, s.n, 200, &seed);
	grammar_fini(&gr);
	buf_fini(&blk);
	gbuild_free(g);
	free(s.v);
}

/* @body (@len terminals) @reps times into @s. */
static void put_reps(struct stream *s, const uint32_t *body, uint32_t len, uint32_t reps)
{
	for (uint32_t r = 0; r < reps; r++)
		for (uint32_t i = 0; i < len; i++)
			put(s, body[i]);
}

/*
 * The loop fast path: a loop is followed (terminals wait) once its rule repeats at the end of
 * the start rule, and every way of leaving it (a terminal breaking the match at each position
 * of the body, the end of the stream with terminals waiting) gives back exactly the stream,
 * with both invariants checked after every append.
 */
static void test_gbuild_loop_followed_and_left_anywhere(void **state)
{
	static const uint32_t body[] = {5, 6, 7, 6, 8};
	const uint32_t len = sizeof(body) / sizeof(body[0]);
	uint64_t seed = tu_seed(__func__);
	struct stream s = {0};

	for (uint32_t at = 0; at <= len; at++) {
		for (uint32_t reps = 2; reps <= 5; reps++) {
			s.n = 0;
			put(&s, 1);
			put_reps(&s, body, len, reps);
			for (uint32_t i = 0; i < at; i++)
				put(&s, body[i]);
			put(&s, 9); /* breaks the match at position @at */
			put_reps(&s, body, len, reps);
			for (uint32_t i = 0; i < at; i++)
				put(&s, body[i]); /* ends waiting */
			round_trip(s.v, s.n, 1, &seed);
		}
	}
	/* the path is taken: partway through a repetition, terminals wait */
	{
		struct tfs_gbuild *g = gbuild_new();

		assert_non_null(g);
		s.n = 0;
		put_reps(&s, body, len, 100);
		put(&s, body[0]);
		put(&s, body[1]);
		for (size_t i = 0; i < s.n; i++)
			assert_int_equal(gbuild_append(g, s.v[i]), 0);
		assert_int_equal(g->lp_pos, 2);
		assert_int_equal(g->lp_len, len);
		assert_valid(g);
		gbuild_free(g);
	}
	free(s.v);
}

/* Loops whose bodies hold rules with counts, nested, and bodies too long to follow. */
static void test_gbuild_loop_bodies_nested_and_long(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct stream s = {0}, body = {0};
	size_t len;

	/* a (b c)^3 d, then the whole again inside a loop of its own */
	put(&body, 1);
	for (int i = 0; i < 3; i++) {
		put(&body, 2);
		put(&body, 3);
	}
	put(&body, 4);
	put_reps(&s, body.v, (uint32_t)body.n, 5000);
	len = round_trip(s.v, s.n, 977, &seed);
	assert_true(len < 32);
	s.n = 0;
	for (int k = 0; k < 300; k++) {
		put(&s, 10);
		put_reps(&s, body.v, (uint32_t)body.n, 7);
		put(&s, 11);
	}
	put_reps(&s, body.v, (uint32_t)body.n, 3);
	len = round_trip(s.v, s.n, 1, &seed);
	assert_true(len < 48);
	/* bodies around LP_MAX: followed up to it, beyond it only through Sequitur */
	for (uint32_t n = LP_MAX - 2; n <= LP_MAX + 2; n += 2) {
		body.n = 0;
		for (uint32_t i = 0; i < n; i++)
			put(&body, 100 + (uint32_t)tu_below(&seed, 40));
		s.n = 0;
		put_reps(&s, body.v, (uint32_t)body.n, 6);
		put(&s, 1);
		put_reps(&s, body.v, (uint32_t)body.n, 3);
		for (uint32_t i = 0; i < n / 2; i++)
			put(&s, body.v[i]);
		round_trip(s.v, s.n, 401, &seed);
	}
	/* nested deeper than the fast path follows: 1, 21, 321, ... each repeated */
	s.n = 0;
	for (uint32_t m = 1; m <= LP_DEPTH + 8; m++)
		for (int r = 0; r < 3; r++)
			for (uint32_t i = m; i >= 1; i--)
				put(&s, i);
	round_trip(s.v, s.n, 997, &seed);
	free(body.v);
	free(s.v);
}

/* Export with terminals waiting sends them into the grammar, and appending goes on after it. */
static void test_gbuild_export_while_following(void **state)
{
	static const uint32_t body[] = {3, 1, 4, 1, 5};
	uint64_t seed = tu_seed(__func__);
	struct tfs_gbuild *g = gbuild_new();
	struct stream s = {0};
	struct tfs_grammar gr;
	struct tfs_buf blk;

	assert_non_null(g);
	put_reps(&s, body, 5, 40);
	put(&s, 3);
	put(&s, 1);
	put(&s, 4);
	for (size_t i = 0; i < s.n; i++)
		assert_int_equal(gbuild_append(g, s.v[i]), 0);
	assert_int_equal(g->lp_pos, 3);
	export_parse(g, &blk, &gr);
	assert_int_equal(g->lp_pos, 0);
	assert_valid(g);
	assert_expands_to(&gr, s.v, s.n, 20, &seed);
	grammar_fini(&gr);
	buf_fini(&blk);
	put(&s, 1);
	put(&s, 5);
	put_reps(&s, body, 5, 10);
	put(&s, 3);
	for (size_t i = 5 * 40 + 3; i < s.n; i++)
		assert_int_equal(gbuild_append(g, s.v[i]), 0);
	assert_valid(g);
	export_parse(g, &blk, &gr);
	assert_expands_to(&gr, s.v, s.n, 20, &seed);
	grammar_fini(&gr);
	buf_fini(&blk);
	gbuild_free(g);
	free(s.v);
}

static void test_gbuild_reset_then_reuse(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct tfs_gbuild *g = gbuild_new();
	struct stream s = {0};
	struct tfs_grammar gr;
	struct tfs_buf blk;
	size_t mem;

	random_stream(&s, 50000, 20, &seed);
	for (size_t i = 0; i < s.n; i++)
		assert_int_equal(gbuild_append(g, s.v[i]), 0);
	mem = gbuild_mem_bytes(g);
	assert_true(mem > 50000);
	gbuild_reset(g);
	assert_true(gbuild_n_events(g) == 0);
	assert_true(gbuild_mem_bytes(g) == mem);
	assert_valid(g);
	s.n = 0;
	nested_loops(&s, 300, trip_cycle, &seed);
	for (size_t i = 0; i < s.n; i++) {
		assert_int_equal(gbuild_append(g, s.v[i]), 0);
		if (i % 101 == 0)
			assert_valid(g);
	}
	assert_valid(g);
	export_parse(g, &blk, &gr);
	assert_expands_to(&gr, s.v, s.n, 50, &seed);
	grammar_fini(&gr);
	buf_fini(&blk);
	gbuild_free(g);
	free(s.v);
}

static void test_gbuild_new_survives_alloc_failure(void **state)
{
	for (long n = 0; n < 10; n++) {
		struct tfs_gbuild *g;

		fa_arm(n);
		g = gbuild_new();
		fa_disarm();
		if (g) {
			assert_int_equal(gbuild_append(g, 1), 0);
			assert_valid(g);
			gbuild_free(g);
			return;
		}
	}
	fail_msg("gbuild_new still failing after 10 allocations");
}

/*
 * For n below @n_max, fail allocations after n successes, append @s until one symbol is
 * refused, then go on: the grammar must hold everything but that one symbol. @return the
 * runs in which one was refused
 */
static long alloc_failures(const struct stream *s, long n_max, uint64_t *seed)
{
	struct stream want = {0};
	long n_failures = 0;

	for (long n = 0; n < n_max; n++) {
		struct tfs_gbuild *g = gbuild_new();
		struct tfs_grammar gr;
		struct tfs_buf blk;
		bool armed = true;

		assert_non_null(g);
		want.n = 0;
		fa_arm(n);
		for (size_t i = 0; i < s->n; i++) {
			int rc = gbuild_append(g, s->v[i]);

			if (rc == -ENOMEM && armed) {
				fa_disarm();
				armed = false;
				n_failures++;
				assert_valid(g);
				continue;
			}
			assert_int_equal(rc, 0);
			put(&want, s->v[i]);
		}
		fa_disarm();
		assert_valid(g);
		assert_true(gbuild_n_events(g) == want.n);
		export_parse(g, &blk, &gr);
		assert_expands_to(&gr, want.v, want.n, 20, seed);
		grammar_fini(&gr);
		buf_fini(&blk);

		/* export under allocation failure restores the buffer */
		buf_init(&blk);
		assert_int_equal(buf_put_u8(&blk, 0xaa), 0);
		fa_arm(0);
		assert_int_equal(gbuild_export(g, &blk), -ENOMEM);
		fa_disarm();
		assert_int_equal(blk.len, 1);
		buf_fini(&blk);
		gbuild_free(g);
	}
	free(want.v);
	return n_failures;
}

static void test_gbuild_append_alloc_failure_rejects_one_symbol(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct stream s = {0};
	uint32_t body[8];

	for (int i = 0; i < 40; i++) {
		nested_loops(&s, 1, trip_random, &seed);
		for (int k = 0; k < 30; k++)
			put(&s, (uint32_t)tu_below(&seed, 9));
	}
	assert_true(alloc_failures(&s, 12, &seed) >= 10);
	/* loops of many bodies followed and left, so that failures meet terminals waiting */
	s.n = 0;
	for (int i = 0; i < 2000; i++) {
		uint32_t len = 2 + (uint32_t)tu_below(&seed, 7);

		for (uint32_t k = 0; k < len; k++)
			body[k] = (uint32_t)tu_below(&seed, 30);
		put_reps(&s, body, len, 2 + (uint32_t)tu_below(&seed, 6));
		put_reps(&s, body, (uint32_t)tu_below(&seed, len), 1);
		put(&s, 30 + (uint32_t)tu_below(&seed, 3));
	}
	assert_true(alloc_failures(&s, 30, &seed) >= 25);
	free(s.v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gbuild_empty_exports_one_empty_rule),
		cmocka_unit_test(test_gbuild_rejects_terminal_out_of_range),
		cmocka_unit_test(test_gbuild_classic_abcdbc),
		cmocka_unit_test(test_gbuild_classic_repeat_becomes_count),
		cmocka_unit_test(test_gbuild_classic_small_strings_round_trip),
		cmocka_unit_test(test_gbuild_single_loop_compresses_to_constant),
		cmocka_unit_test(test_gbuild_runs_compress_to_one_element),
		cmocka_unit_test(test_gbuild_nested_loops_compress),
		cmocka_unit_test(test_gbuild_nested_loops_varying_trips_round_trip),
		cmocka_unit_test(test_gbuild_random_small_alphabets_round_trip),
		cmocka_unit_test(test_gbuild_random_large_alphabets_round_trip),
		cmocka_unit_test(test_gbuild_runs_and_mutated_blocks_round_trip),
		cmocka_unit_test(test_gbuild_irregular_million_round_trip),
		cmocka_unit_test(test_gbuild_deep_nesting_round_trip),
		cmocka_unit_test(test_gbuild_loop_followed_and_left_anywhere),
		cmocka_unit_test(test_gbuild_loop_bodies_nested_and_long),
		cmocka_unit_test(test_gbuild_export_while_following),
		cmocka_unit_test(test_gbuild_reset_then_reuse),
		cmocka_unit_test(test_gbuild_new_survives_alloc_failure),
		cmocka_unit_test(test_gbuild_append_alloc_failure_rejects_one_symbol),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
