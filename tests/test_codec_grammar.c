/*
 * Grammar block parser and expander: hand-written golden blocks, every truncation and
 * every bit flip of valid blocks, hostile counts and references, and allocation failure.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_i.h"
#include "testutil.h"

/*
 * R0 -> b c, R1 (start) -> a R0^3 d, with a..d = terminals 0..3:
 *   02            n_rules 2
 *   02 04 08      R0: 2 elems, tag 1<<2, tag 2<<2
 *   03 00 03 01 0c  R1: 3 elems, a, tag (0<<2)|2|1 + count-2 = 1, d
 */
static const uint8_t golden1[] = {0x02, 0x02, 0x04, 0x08, 0x03, 0x00, 0x03, 0x01, 0x0c};
static const uint32_t golden1_exp[] = {0, 1, 2, 1, 2, 1, 2, 3};

/*
 * Multi-byte varints: R0 -> t200 t7^130, R1 -> R0^2 t0, R2 (start) -> R1 t5 R0
 *   03
 *   02 a0 06 1d 80 01           t200: tag 800; t7^130: tag 7<<2|1 = 29, count-2 = 128
 *   02 03 00 00                 R0^2: tag 3, count-2 0; t0: tag 0
 *   03 06 14 02                 R1: tag 1<<2|2 = 6; t5: 20; R0: tag 2
 */
static const uint8_t golden2[] = {0x03, 0x02, 0xa0, 0x06, 0x1d, 0x80, 0x01, 0x02, 0x03,
				  0x00, 0x00, 0x03, 0x06, 0x14, 0x02};

static int parse_bytes(const uint8_t *p, size_t n, uint32_t n_terminals, struct tfs_grammar *g,
		       struct tfs_diag *d)
{
	struct tfs_rd r;

	if (d)
		memset(d, 0, sizeof(*d));
	rd_init(&r, p, n, 1000, "grammar", d);
	return grammar_parse(&r, n_terminals, g);
}

static void assert_empty(const struct tfs_grammar *g)
{
	assert_null(g->rules);
	assert_null(g->elems);
	assert_int_equal(g->n_rules, 0);
}

static void test_grammar_golden_small_block(void **state)
{
	struct tfs_grammar g;
	struct tfs_rd r;
	uint32_t out[8];

	rd_init(&r, golden1, sizeof(golden1), 0, "grammar", NULL);
	assert_int_equal(grammar_parse(&r, 4, &g), 0);
	assert_int_equal(r.off, sizeof(golden1));
	assert_int_equal(g.n_rules, 2);
	assert_true(g.n_elems == 5);
	assert_true(g.n_events == 8);
	assert_int_equal(g.height, 2);
	assert_true(g.rules[0].first_elem == 0 && g.rules[0].n_elems == 2);
	assert_true(g.rules[0].n_events == 2 && g.rules[0].height == 1);
	assert_true(g.rules[1].first_elem == 2 && g.rules[1].n_elems == 3);
	assert_true(g.elems[3].is_rule == 1 && g.elems[3].id == 0 && g.elems[3].count == 3);
	assert_true(g.elems[4].is_rule == 0 && g.elems[4].id == 3 && g.elems[4].count == 1);
	assert_int_equal(grammar_expand(&g, 0, 8, out), 0);
	assert_memory_equal(out, golden1_exp, sizeof(golden1_exp));
	for (uint64_t first = 0; first <= 8; first++) {
		for (uint64_t n = 0; first + n <= 8; n++) {
			memset(out, 0xff, sizeof(out));
			assert_int_equal(grammar_expand(&g, first, n, out), 0);
			assert_memory_equal(out, golden1_exp + first, n * sizeof(*out));
		}
		assert_int_equal(grammar_expand(&g, first, 9 - first, out), -EINVAL);
	}
	assert_int_equal(grammar_expand(&g, 1, UINT64_MAX, out), -EINVAL);
	grammar_fini(&g);
	assert_empty(&g);
	grammar_fini(&g);
}

static void test_grammar_golden_multibyte_block(void **state)
{
	struct tfs_grammar g;
	uint32_t *out, want[266], k = 0;

	assert_int_equal(parse_bytes(golden2, sizeof(golden2), 201, &g, NULL), 0);
	assert_int_equal(g.n_rules, 3);
	assert_true(g.rules[0].n_events == 131 && g.rules[0].height == 1);
	assert_true(g.rules[1].n_events == 263 && g.rules[1].height == 2);
	assert_true(g.n_events == 395 && g.height == 3);
	assert_true(g.elems[1].id == 7 && g.elems[1].count == 130);
	for (int rep = 0; rep < 2; rep++) {
		want[k++] = 200;
		for (int i = 0; i < 130; i++)
			want[k++] = 7;
	}
	want[k++] = 0;
	out = malloc(395 * sizeof(*out));
	assert_non_null(out);
	assert_int_equal(grammar_expand(&g, 0, 395, out), 0);
	assert_memory_equal(out, want, k * sizeof(*out));
	assert_int_equal(out[263], 5);
	assert_int_equal(out[264], 200);
	assert_int_equal(out[394], 7);
	assert_int_equal(grammar_expand(&g, 260, 5, out), 0);
	assert_true(out[0] == 7 && out[1] == 7 && out[2] == 0 && out[3] == 5 && out[4] == 200);
	free(out);
	grammar_fini(&g);
	/* terminal 200 needs n_terminals >= 201 */
	assert_int_equal(parse_bytes(golden2, sizeof(golden2), 200, &g, NULL), -TFS_ECORRUPT);
	assert_empty(&g);
}

static void test_grammar_leaves_trailing_bytes(void **state)
{
	uint8_t buf[sizeof(golden1) + 3];
	struct tfs_grammar g;
	struct tfs_rd r;

	memcpy(buf, golden1, sizeof(golden1));
	memset(buf + sizeof(golden1), 0x7f, 3);
	rd_init(&r, buf, sizeof(buf), 0, "grammar", NULL);
	assert_int_equal(grammar_parse(&r, 4, &g), 0);
	assert_int_equal(r.off, sizeof(golden1));
	grammar_fini(&g);
}

static void test_grammar_empty_start_rule(void **state)
{
	const uint8_t ok[] = {0x01, 0x00};
	const uint8_t empty_inner[] = {0x02, 0x00, 0x01, 0x00};
	const uint8_t empty_start[] = {0x02, 0x01, 0x00, 0x00};
	struct tfs_grammar g;
	uint32_t out[1];

	assert_int_equal(parse_bytes(ok, sizeof(ok), 1, &g, NULL), 0);
	assert_true(g.n_rules == 1 && g.n_events == 0 && g.rules[0].n_elems == 0);
	assert_int_equal(grammar_expand(&g, 0, 0, out), 0);
	assert_int_equal(grammar_expand(&g, 0, 1, out), -EINVAL);
	grammar_fini(&g);
	assert_int_equal(parse_bytes(empty_inner, sizeof(empty_inner), 1, &g, NULL),
			 -TFS_ECORRUPT);
	assert_empty(&g);
	assert_int_equal(parse_bytes(empty_start, sizeof(empty_start), 1, &g, NULL),
			 -TFS_ECORRUPT);
	assert_empty(&g);
}

static void test_grammar_rejects_bad_references(void **state)
{
	/* R0 -> R0, R0 -> R1, and terminal 4 with 4 terminals */
	const uint8_t self_ref[] = {0x02, 0x01, 0x02, 0x01, 0x00};
	const uint8_t fwd_ref[] = {0x02, 0x01, 0x06, 0x01, 0x00};
	const uint8_t bad_term[] = {0x02, 0x02, 0x04, 0x10, 0x01, 0x02};
	struct tfs_grammar g;
	struct tfs_diag d;

	assert_int_equal(parse_bytes(self_ref, sizeof(self_ref), 4, &g, &d), -TFS_ECORRUPT);
	assert_empty(&g);
	assert_string_equal(d.section, "grammar");
	assert_true(d.offset == 1002); /* the tag, not past it */
	assert_int_equal(parse_bytes(fwd_ref, sizeof(fwd_ref), 4, &g, &d), -TFS_ECORRUPT);
	assert_true(d.offset == 1002);
	assert_int_equal(parse_bytes(bad_term, sizeof(bad_term), 4, &g, &d), -TFS_ECORRUPT);
	assert_true(d.offset == 1003);
	assert_non_null(strstr(d.reason, "terminal"));
	assert_int_equal(parse_bytes(bad_term, sizeof(bad_term), 5, &g, NULL), 0);
	grammar_fini(&g);
	assert_int_equal(parse_bytes(golden1, sizeof(golden1), 0, &g, NULL), -TFS_ECORRUPT);
}

static void test_grammar_rejects_count_overflow(void **state)
{
	struct tfs_grammar g;
	struct tfs_buf b;
	size_t at;

	/* count - 2 = UINT64_MAX would wrap to count 1 */
	buf_init(&b);
	buf_put_varint(&b, 1);
	buf_put_varint(&b, 1);
	buf_put_varint(&b, 1);
	buf_put_varint(&b, UINT64_MAX);
	assert_int_equal(parse_bytes(b.data, b.len, 1, &g, NULL), -TFS_ECORRUPT);
	/* count - 2 = 2^64 - 2 would wrap to count 0 */
	b.len = 3;
	buf_put_varint(&b, UINT64_MAX - 1);
	assert_int_equal(parse_bytes(b.data, b.len, 1, &g, NULL), -TFS_ECORRUPT);
	/* one run of exactly 2^62 is fine, 2^62 + 1 is not */
	b.len = 3;
	buf_put_varint(&b, GRAM_MAX_EVENTS - 2);
	assert_int_equal(parse_bytes(b.data, b.len, 1, &g, NULL), 0);
	assert_true(g.n_events == GRAM_MAX_EVENTS);
	grammar_fini(&g);
	b.len = 3;
	buf_put_varint(&b, GRAM_MAX_EVENTS - 1);
	assert_int_equal(parse_bytes(b.data, b.len, 1, &g, NULL), -TFS_ECORRUPT);
	assert_empty(&g);

	/* R0 -> a^2^31, R1 -> R0^2^31 is 2^62 events; one more event is too many */
	b.len = 0;
	buf_put_varint(&b, 2);
	buf_put_varint(&b, 1);
	buf_put_varint(&b, 1);
	buf_put_varint(&b, (UINT64_C(1) << 31) - 2);
	at = b.len;
	buf_put_varint(&b, 1);
	buf_put_varint(&b, 3);
	buf_put_varint(&b, (UINT64_C(1) << 31) - 2);
	assert_int_equal(parse_bytes(b.data, b.len, 1, &g, NULL), 0);
	assert_true(g.n_events == GRAM_MAX_EVENTS);
	grammar_fini(&g);
	b.data[at] = 2; /* start rule gets a second element */
	buf_put_varint(&b, 0);
	assert_int_equal(parse_bytes(b.data, b.len, 1, &g, NULL), -TFS_ECORRUPT);
	assert_empty(&g);

	/* nested huge counts: 2^40 * 2^40 must not wrap */
	b.len = 0;
	buf_put_varint(&b, 3);
	buf_put_varint(&b, 1);
	buf_put_varint(&b, 1);
	buf_put_varint(&b, (UINT64_C(1) << 40) - 2);
	buf_put_varint(&b, 1);
	buf_put_varint(&b, 3);
	buf_put_varint(&b, (UINT64_C(1) << 40) - 2);
	buf_put_varint(&b, 1);
	buf_put_varint(&b, 7);
	buf_put_varint(&b, (UINT64_C(1) << 40) - 2);
	assert_int_equal(parse_bytes(b.data, b.len, 1, &g, NULL), -TFS_ECORRUPT);
	assert_empty(&g);
	/* the same through many rules whose sum, not product, overflows */
	b.len = 0;
	buf_put_varint(&b, 2);
	buf_put_varint(&b, 1);
	buf_put_varint(&b, 1);
	buf_put_varint(&b, GRAM_MAX_EVENTS / 2 - 2);
	buf_put_varint(&b, 3);
	for (int i = 0; i < 3; i++)
		buf_put_varint(&b, 2);
	assert_int_equal(parse_bytes(b.data, b.len, 1, &g, NULL), -TFS_ECORRUPT);
	b.data[b.len - 4]--; /* two elements: exactly 2^62 */
	b.len--;
	assert_int_equal(parse_bytes(b.data, b.len, 1, &g, NULL), 0);
	assert_true(g.n_events == GRAM_MAX_EVENTS);
	grammar_fini(&g);
	buf_fini(&b);
}

static void test_grammar_huge_lengths_allocate_nothing(void **state)
{
	struct tfs_grammar g;
	struct tfs_buf b;

	buf_init(&b);
	buf_put_varint(&b, UINT64_C(1) << 40);
	buf_put_varint(&b, 0);
	buf_put_varint(&b, 0);
	fa_arm(0);
	assert_int_equal(parse_bytes(b.data, b.len, 1, &g, NULL), -TFS_ECORRUPT);
	fa_disarm();
	assert_empty(&g);
	b.len = 0;
	buf_put_varint(&b, 0);
	assert_int_equal(parse_bytes(b.data, b.len, 1, &g, NULL), -TFS_ECORRUPT);
	/* a rule claiming 2^40 elements with 3 bytes left */
	b.len = 0;
	buf_put_varint(&b, 1);
	buf_put_varint(&b, UINT64_C(1) << 40);
	buf_put_varint(&b, 0);
	assert_int_equal(parse_bytes(b.data, b.len, 1, &g, NULL), -TFS_ECORRUPT);
	assert_empty(&g);
	buf_fini(&b);
}

/* Blocks to mutilate: the goldens and a few exports of the builder. */
struct sample {
	uint8_t *data;
	size_t len;
	uint32_t n_terminals;
};

static size_t make_samples(struct sample *s, uint64_t *seed)
{
	size_t n = 0;

	s[n].data = malloc(sizeof(golden1));
	memcpy(s[n].data, golden1, sizeof(golden1));
	s[n].len = sizeof(golden1);
	s[n++].n_terminals = 4;
	s[n].data = malloc(sizeof(golden2));
	memcpy(s[n].data, golden2, sizeof(golden2));
	s[n].len = sizeof(golden2);
	s[n++].n_terminals = 201;
	for (int k = 0; k < 3; k++) {
		struct tfs_gbuild *gb = gbuild_new();
		struct tfs_buf b;

		assert_non_null(gb);
		for (int i = 0; i < 300; i++) {
			uint32_t t = (uint32_t)(i % 3);

			if (k == 0)
				t = (uint32_t)tu_below(seed, 5);
			else if (k == 1)
				t = (uint32_t)("abcabcabd"[i % 9] - 'a');
			else if (i % 7 == 0)
				t = (uint32_t)tu_below(seed, 40);

			assert_int_equal(gbuild_append(gb, t), 0);
		}
		buf_init(&b);
		assert_int_equal(gbuild_export(gb, &b), 0);
		s[n].data = b.data;
		s[n].len = b.len;
		s[n++].n_terminals = 40;
		gbuild_free(gb);
	}
	return n;
}

static void test_grammar_every_truncation_is_corrupt(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct sample s[8];
	size_t n = make_samples(s, &seed);

	for (size_t i = 0; i < n; i++) {
		struct tfs_grammar g;
		struct tfs_diag d;

		assert_int_equal(parse_bytes(s[i].data, s[i].len, s[i].n_terminals, &g, NULL), 0);
		grammar_fini(&g);
		for (size_t len = 0; len < s[i].len; len++) {
			uint8_t *copy = malloc(len + 1); /* exact size so ASan sees overreads */

			memcpy(copy, s[i].data, len);
			assert_int_equal(parse_bytes(copy, len, s[i].n_terminals, &g, &d),
					 -TFS_ECORRUPT);
			assert_empty(&g);
			assert_string_equal(d.section, "grammar");
			assert_true(d.offset >= 1000 && d.offset <= 1000 + len);
			free(copy);
		}
		free(s[i].data);
	}
}

/* A parsed grammar must be internally consistent and expand without trouble. */
static void assert_consistent(const struct tfs_grammar *g, uint32_t n_terminals)
{
	uint64_t pos = 0;
	uint32_t out[64];

	assert_true(g->n_rules >= 1);
	for (uint32_t r = 0; r < g->n_rules; r++) {
		const struct gram_rule *ru = &g->rules[r];
		uint64_t ev = 0;
		uint32_t h = 1;

		assert_true(ru->first_elem == pos);
		pos += ru->n_elems;
		assert_true(pos <= g->n_elems);
		for (uint32_t i = 0; i < ru->n_elems; i++) {
			const struct gram_elem *e = &g->elems[ru->first_elem + i];

			assert_true(e->count >= 1);
			if (e->is_rule) {
				assert_true(e->id < r);
				ev += e->count * g->rules[e->id].n_events;
				if (g->rules[e->id].height + 1 > h)
					h = g->rules[e->id].height + 1;
			} else {
				assert_true(e->id < n_terminals);
				ev += e->count;
			}
		}
		assert_true(ev == ru->n_events && ev <= GRAM_MAX_EVENTS);
		assert_int_equal(h, ru->height);
	}
	assert_true(pos == g->n_elems);
	assert_true(g->n_events == g->rules[g->n_rules - 1].n_events);
	if (g->n_events) {
		uint64_t n = g->n_events < 64 ? g->n_events : 64;

		assert_int_equal(grammar_expand(g, 0, n, out), 0);
		assert_int_equal(grammar_expand(g, g->n_events - n, n, out), 0);
		for (uint64_t i = 0; i < n; i++)
			assert_true(out[i] < n_terminals);
	}
}

static void test_grammar_every_bit_flip_is_safe(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct sample s[8];
	size_t n = make_samples(s, &seed);
	size_t n_ok = 0, n_bad = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t *copy = malloc(s[i].len);

		for (size_t bit = 0; bit < s[i].len * 8; bit++) {
			struct tfs_grammar g;
			int rc;

			memcpy(copy, s[i].data, s[i].len);
			copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			rc = parse_bytes(copy, s[i].len, s[i].n_terminals, &g, NULL);
			if (rc == 0) {
				assert_consistent(&g, s[i].n_terminals);
				grammar_fini(&g);
				n_ok++;
			} else {
				assert_int_equal(rc, -TFS_ECORRUPT);
				assert_empty(&g);
				n_bad++;
			}
		}
		free(copy);
		free(s[i].data);
	}
	print_message("# bit flips: %zu parsed consistently, %zu rejected\n", n_ok, n_bad);
	assert_true(n_bad > 0);
}

static void test_grammar_parse_alloc_failure_leaks_nothing(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct tfs_gbuild *gb = gbuild_new();
	struct tfs_grammar g;
	struct tfs_buf b;
	long n;

	assert_non_null(gb);
	for (int i = 0; i < 3000; i++)
		assert_int_equal(gbuild_append(gb, (uint32_t)tu_below(&seed, 30)), 0);
	buf_init(&b);
	assert_int_equal(gbuild_export(gb, &b), 0);
	gbuild_free(gb);
	for (n = 0; n < 100; n++) {
		int rc;

		fa_arm(n);
		rc = parse_bytes(b.data, b.len, 30, &g, NULL);
		fa_disarm();
		if (rc == 0)
			break;
		assert_int_equal(rc, -ENOMEM);
		assert_empty(&g);
	}
	assert_true(n >= 3 && n < 100); /* rules, then the element array grew twice or more */
	assert_true(g.n_events == 3000);
	grammar_fini(&g);
	buf_fini(&b);
}

static void test_grammar_expand_random_ranges(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct tfs_gbuild *gb = gbuild_new();
	uint32_t *in, *out;
	struct tfs_grammar g;
	struct tfs_buf b;
	size_t n = 0;

	in = malloc(200000 * sizeof(*in));
	out = malloc(200000 * sizeof(*out));
	assert_true(in && out && gb);
	while (n < 190000) {
		uint32_t trips = 1 + (uint32_t)tu_below(&seed, 100), t0 = (uint32_t)tu_below(&seed, 6);

		for (uint32_t k = 0; k < trips; k++) {
			in[n++] = t0;
			in[n++] = 7;
			in[n++] = 7;
			in[n++] = 8;
		}
		in[n++] = (uint32_t)tu_below(&seed, 10);
	}
	for (size_t i = 0; i < n; i++)
		assert_int_equal(gbuild_append(gb, in[i]), 0);
	buf_init(&b);
	assert_int_equal(gbuild_export(gb, &b), 0);
	assert_int_equal(parse_bytes(b.data, b.len, 10, &g, NULL), 0);
	assert_true(g.n_events == n);
	for (int i = 0; i < 2000; i++) {
		uint64_t first = tu_below(&seed, n), len = tu_below(&seed, n - first + 1);

		if (i % 2)
			len = len % 300;
		assert_int_equal(grammar_expand(&g, first, len, out), 0);
		assert_memory_equal(out, in + first, len * sizeof(*out));
	}
	assert_int_equal(grammar_expand(&g, n - 1, 2, out), -EINVAL);
	grammar_fini(&g);
	buf_fini(&b);
	gbuild_free(gb);
	free(in);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grammar_golden_small_block),
		cmocka_unit_test(test_grammar_golden_multibyte_block),
		cmocka_unit_test(test_grammar_leaves_trailing_bytes),
		cmocka_unit_test(test_grammar_empty_start_rule),
		cmocka_unit_test(test_grammar_rejects_bad_references),
		cmocka_unit_test(test_grammar_rejects_count_overflow),
		cmocka_unit_test(test_grammar_huge_lengths_allocate_nothing),
		cmocka_unit_test(test_grammar_every_truncation_is_corrupt),
		cmocka_unit_test(test_grammar_every_bit_flip_is_safe),
		cmocka_unit_test(test_grammar_parse_alloc_failure_leaks_nothing),
		cmocka_unit_test(test_grammar_expand_random_ranges),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
