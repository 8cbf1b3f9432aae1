/*
 * Allocation backtrace stream (FORMAT.md §10): a golden stream written by hand from the
 * spec, seeded round trips on random and on a synthetic program model, the size target on
 * that model, every truncation and bit flip, hostile records, and allocation failure in turn.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "btrace_i.h"
#include "testutil.h"

/* A generated sequence: backtrace i is frames[off[i]..off[i + 1]). */
struct btset {
	size_t n, n_cap;
	uint64_t *frames;
	size_t *off;
	size_t f_cap;
};

static void bs_init(struct btset *s, size_t n_cap)
{
	memset(s, 0, sizeof(*s));
	s->n_cap = n_cap;
	s->off = calloc(n_cap + 1, sizeof(*s->off));
	s->f_cap = 1024;
	s->frames = malloc(s->f_cap * sizeof(*s->frames));
	assert_non_null(s->off);
	assert_non_null(s->frames);
}

static void bs_fini(struct btset *s)
{
	free(s->off);
	free(s->frames);
}

static void bs_push(struct btset *s, const uint64_t *f, uint32_t n)
{
	assert_true(s->n < s->n_cap);
	while (s->off[s->n] + n > s->f_cap) {
		s->f_cap *= 2;
		s->frames = realloc(s->frames, s->f_cap * sizeof(*s->frames));
		assert_non_null(s->frames);
	}
	memcpy(s->frames + s->off[s->n], f, n * sizeof(*f));
	s->off[s->n + 1] = s->off[s->n] + n;
	s->n++;
}

static uint32_t bs_len(const struct btset *s, size_t i)
{
	return (uint32_t)(s->off[i + 1] - s->off[i]);
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void encode(const struct btset *s, struct tfs_buf *out)
{
	struct tfs_btenc *e;

	assert_int_equal(btenc_new(&e), 0);
	for (size_t i = 0; i < s->n; i++)
		assert_int_equal(btenc_add(e, s->frames + s->off[i], bs_len(s, i)), 0);
	assert_true(btenc_n_backtraces(e) == s->n);
	buf_init(out);
	assert_int_equal(btenc_finish(e, out), 0);
	btenc_free(e);
}

static void check_decode(const struct btset *s, const struct tfs_buf *b)
{
	uint64_t frames[BT_MAX_FRAMES];
	struct tfs_diag diag = {0};
	struct tfs_btdec d;
	uint32_t n;

	assert_int_equal(btdec_init(&d, b->data, b->len, 0, &diag), 0);
	for (size_t i = 0; i < s->n; i++) {
		assert_int_equal(btdec_next(&d, frames, BT_MAX_FRAMES, &n), 1);
		assert_int_equal(n, bs_len(s, i));
		assert_memory_equal(frames, s->frames + s->off[i], n * sizeof(*frames));
	}
	assert_int_equal(btdec_next(&d, frames, BT_MAX_FRAMES, &n), 0);
	assert_int_equal(btdec_next(&d, frames, BT_MAX_FRAMES, &n), 0);
	btdec_fini(&d);
}

/* Decode everything; 0 if the whole stream decoded, else the first error. */
static int decode_all(const uint8_t *p, size_t len, struct tfs_diag *diag)
{
	uint64_t frames[16];
	struct tfs_btdec d;
	uint32_t n;
	int rc;

	rc = btdec_init(&d, p, len, 1000, diag);
	if (rc < 0)
		return rc;
	while ((rc = btdec_next(&d, frames, 16, &n)) == 1)
		assert_true(n <= BT_MAX_FRAMES);
	btdec_fini(&d);
	return rc;
}

/* --- synthetic program model --------------------------------------------------------- */

#define PM_FUNCS 40
#define PM_SITES 4 /* call sites per function */
#define PM_DRIVER 6

struct pmodel {
	uint64_t rng;
	uint8_t callee[PM_FUNCS][PM_SITES];
	uint32_t fn[BT_MAX_FRAMES]; /* function running at each depth */
	uint64_t stack[BT_MAX_FRAMES];
	uint32_t depth;
	uint32_t max_steps; /* call/return steps between samples: 0 .. max_steps - 1 */
};

static uint64_t pm_site(uint32_t f, uint32_t s)
{
	return UINT64_C(0x55d4a0c00000) + f * 0x2a0u + s * 0x1cu + (f * 7u) % 13u;
}

/*
 * Functions 0..PM_FUNCS-1 with PM_SITES call sites each; function f calls functions above
 * it, except a few recursive ones (f % 9 == 4) whose site 0 calls f itself. Below a fixed
 * driver prefix (libc start, main, the event loop) the walk calls and returns at random and
 * samples an allocation every few steps, the way sampled allocation sites look.
 */
static void pm_init(struct pmodel *m, uint64_t seed)
{
	memset(m, 0, sizeof(*m));
	m->rng = seed;
	for (uint32_t f = 0; f < PM_FUNCS; f++)
		for (uint32_t s = 0; s < PM_SITES; s++) {
			uint32_t span = PM_FUNCS - f - 1;

			m->callee[f][s] =
			    (uint8_t)(span ? f + 1 + tu_below(&m->rng, span < 6 ? span : 6) : f);
			if (f % 9 == 4 && s == 0)
				m->callee[f][s] = (uint8_t)f;
		}
	for (uint32_t i = 0; i < PM_DRIVER; i++) {
		m->stack[i] = UINT64_C(0x7f3a10029000) + i * 0x3b1u;
		m->fn[i] = 0;
	}
	m->depth = PM_DRIVER;
	m->max_steps = 6;
}

static void pm_step(struct pmodel *m)
{
	uint32_t f = m->fn[m->depth - 1];
	uint64_t r = tu_below(&m->rng, 100);
	uint32_t s;

	if (m->depth > PM_DRIVER && (r < 30 + m->depth / 2 || m->depth >= 200)) {
		m->depth--;
		return;
	}
	s = (uint32_t)tu_below(&m->rng, PM_SITES);
	if (m->callee[f][s] == f && tu_below(&m->rng, 8) == 0)
		s = 1;
	m->stack[m->depth] = pm_site(f, s);
	m->fn[m->depth] = m->callee[f][s];
	m->depth++;
}

/* The next sampled allocation: the stack plus the allocating site of the current function. */
static uint32_t pm_sample(struct pmodel *m, uint64_t *out)
{
	uint32_t steps = (uint32_t)tu_below(&m->rng, m->max_steps);

	for (uint32_t i = 0; i < steps; i++)
		pm_step(m);
	memcpy(out, m->stack, m->depth * sizeof(*out));
	out[m->depth] = pm_site(m->fn[m->depth - 1], PM_SITES) + 0x8;
	return m->depth + 1;
}

static void gen_structured_steps(struct btset *s, size_t n, uint64_t seed, uint32_t max_steps)
{
	uint64_t f[BT_MAX_FRAMES + 1];
	struct pmodel *m = malloc(sizeof(*m));

	assert_non_null(m);
	pm_init(m, seed);
	m->max_steps = max_steps;
	bs_init(s, n + 2); /* room for callers' extra cases */
	for (size_t i = 0; i < n; i++)
		bs_push(s, f, pm_sample(m, f));
	free(m);
}

static void gen_structured(struct btset *s, size_t n, uint64_t seed)
{
	gen_structured_steps(s, n, seed, 6);
}

/* Random: depth 0..80, a random prefix of the previous, frames from a pool that overflows
 * the cache (pool of 50000) or not (pool of 300), and repeated frames for runs. */
static void gen_random(struct btset *s, size_t n, uint64_t *rng)
{
	uint64_t f[BT_MAX_FRAMES], pool_big = 50000, pool_small = 300;
	uint32_t prev_n = 0;

	bs_init(s, n);
	for (size_t i = 0; i < n; i++) {
		uint32_t len = (uint32_t)tu_below(rng, 81);
		uint32_t keep = prev_n ? (uint32_t)tu_below(rng, prev_n + 1) : 0;
		uint64_t pool = tu_below(rng, 4) ? pool_small : pool_big;

		if (tu_below(rng, 50) == 0)
			len = (uint32_t)tu_below(rng, BT_MAX_FRAMES + 1);
		if (keep > len)
			keep = len;
		for (uint32_t j = keep; j < len; j++) {
			if (j && tu_below(rng, 5) == 0)
				f[j] = f[j - 1];
			else if (tu_below(rng, 200) == 0)
				f[j] = tu_rand(rng);
			else
				f[j] = 0x400000 + tu_below(rng, pool) * 0x10;
		}
		bs_push(s, f, len);
		prev_n = len;
	}
}

/* --- tests ----------------------------------------------------------------------------- */

#define A 0x401000u
#define B 0x402000u
#define C 0x401800u

/*
 * By hand from FORMAT.md §10. h1(A) = 14718, h1(B) = 5989, h1(C) = 10354 = 0x2872, all
 * distinct, so every miss lands in its first bucket.
 */
/* clang-format off */
static const uint8_t golden[] = {
	0x03,			 /* three backtraces */
	/* [A B C]: pop 0, new 3 */
	0x03,
	0xC0, 0x80, 0xC0, 0x80, 0x04, /* miss, zigzag(A - 0) = 0x802000 */
	0xC0, 0x80, 0x40,	      /* miss, zigzag(B - A) = 0x2000 */
	0xC0, 0xFF, 0x1F,	      /* miss, zigzag(C - B = -0x800) = 0xFFF */
	/* [A B]: pop 1, new 0 */
	0x10,
	/* [A B C C C C]: pop 0, new 4 */
	0x04,
	0xC1,		  /* run of 1: B predicts C (set by backtrace 1) */
	0xA8, 0x72, 0x00, /* hit bucket 0x2872 (C), tag 2, run 2 + 0: C now predicts C */
};
/* clang-format on */

static const uint64_t gold_f[] = {A, B, C, A, B, A, B, C, C, C, C};
static const uint32_t gold_n[] = {3, 2, 6};

static void gold_set(struct btset *s)
{
	bs_init(s, 3);
	for (uint32_t i = 0, o = 0; i < 3; o += gold_n[i++])
		bs_push(s, gold_f + o, gold_n[i]);
}

static void test_btrace_golden_encodes_exactly(void **state)
{
	struct tfs_buf b;
	struct btset s;

	(void)state;
	gold_set(&s);
	encode(&s, &b);
	assert_int_equal(b.len, sizeof(golden));
	assert_memory_equal(b.data, golden, sizeof(golden));
	buf_fini(&b);
	bs_fini(&s);
}

static void test_btrace_golden_decodes(void **state)
{
	struct tfs_buf b = {(uint8_t *)golden, sizeof(golden), sizeof(golden)};
	uint64_t f[4];
	struct tfs_btdec d;
	struct btset s;
	uint32_t n;

	(void)state;
	gold_set(&s);
	check_decode(&s, &b);
	/* a short caller buffer gets the outermost frames and the true count */
	assert_int_equal(btdec_init(&d, golden, sizeof(golden), 0, NULL), 0);
	assert_int_equal(btdec_next(&d, f, 2, &n), 1);
	assert_int_equal(n, 3);
	assert_true(f[0] == A && f[1] == B);
	assert_int_equal(btdec_next(&d, NULL, 0, &n), 1);
	assert_int_equal(n, 2);
	assert_int_equal(btdec_next(&d, f, 4, &n), 1);
	assert_int_equal(n, 6);
	assert_true(f[2] == C && f[3] == C);
	btdec_fini(&d);
	bs_fini(&s);
}

static void test_btrace_roundtrip_random(void **state)
{
	uint64_t rng = tu_seed("btrace_roundtrip_random");
	struct tfs_buf b;
	struct btset s;

	(void)state;
	for (int round = 0; round < 4; round++) {
		gen_random(&s, 5000, &rng);
		encode(&s, &b);
		check_decode(&s, &b);
		if (round == 0)
			fprintf(stderr, "# random: %.2f bytes/backtrace, %.1f frames/backtrace\n",
				(double)b.len / (double)s.n, (double)s.off[s.n] / (double)s.n);
		buf_fini(&b);
		bs_fini(&s);
	}
}

static void test_btrace_roundtrip_structured(void **state)
{
	uint64_t seed = tu_seed("btrace_roundtrip_structured");
	struct tfs_buf b;
	struct btset s;

	(void)state;
	gen_structured(&s, 100000, seed);
	encode(&s, &b);
	check_decode(&s, &b);
	buf_fini(&b);
	bs_fini(&s);
}

static void test_btrace_structured_below_10_bytes(void **state)
{
	uint64_t frames[BT_MAX_FRAMES];
	struct tfs_btenc *e;
	struct tfs_btdec d;
	double t0, t1, t2, per;
	struct tfs_buf b;
	struct btset s;
	uint32_t n;

	(void)state;
	gen_structured(&s, 100000, 42);
	assert_int_equal(btenc_new(&e), 0);
	t0 = now_ns();
	for (size_t i = 0; i < s.n; i++)
		assert_int_equal(btenc_add(e, s.frames + s.off[i], bs_len(&s, i)), 0);
	t1 = now_ns();
	buf_init(&b);
	assert_int_equal(btenc_finish(e, &b), 0);
	btenc_free(e);
	assert_int_equal(btdec_init(&d, b.data, b.len, 0, NULL), 0);
	t2 = now_ns();
	for (size_t i = 0; i < s.n; i++)
		assert_int_equal(btdec_next(&d, frames, BT_MAX_FRAMES, &n), 1);
	t2 = now_ns() - t2;
	btdec_fini(&d);
	per = (double)b.len / (double)s.n;
	fprintf(stderr,
		"# structured: %.3f bytes/backtrace, %.1f frames/backtrace, "
		"encode %.0f ns/backtrace, decode %.0f ns/backtrace\n",
		per, (double)s.off[s.n] / (double)s.n, (t1 - t0) / (double)s.n, t2 / (double)s.n);
	assert_true(per < 10.0);
	buf_fini(&b);
	bs_fini(&s);
	/* sparser sampling: up to 60 calls and returns between two samples */
	gen_structured_steps(&s, 100000, 42, 60);
	encode(&s, &b);
	per = (double)b.len / (double)s.n;
	fprintf(stderr,
		"# structured, sparse sampling: %.3f bytes/backtrace, %.1f frames/backtrace\n", per,
		(double)s.off[s.n] / (double)s.n);
	assert_true(per < 10.0);
	buf_fini(&b);
	bs_fini(&s);
}

static void small_stream(struct tfs_buf *b)
{
	struct btset s;

	gen_structured(&s, 40, 7);
	/* a long recursive run and a miss-heavy tail */
	{
		uint64_t f[80];

		for (uint32_t i = 0; i < 80; i++)
			f[i] = i < 5 ? 0x1000 + i : 0x2000;
		bs_push(&s, f, 80);
		for (uint32_t i = 0; i < 8; i++)
			f[i] = 0x9000 - i * 0x100;
		bs_push(&s, f, 8);
	}
	encode(&s, b);
	check_decode(&s, b);
	bs_fini(&s);
}

static void test_btrace_every_truncation_fails(void **state)
{
	struct tfs_diag diag;
	struct tfs_buf b;

	(void)state;
	small_stream(&b);
	for (size_t len = 0; len < b.len; len++) {
		uint8_t *cut = malloc(len ? len : 1);

		assert_non_null(cut);
		memcpy(cut, b.data, len);
		memset(&diag, 0, sizeof(diag));
		assert_int_equal(decode_all(cut, len, &diag), -TFS_ECORRUPT);
		assert_string_equal(diag.section, "backtraces");
		assert_true(diag.offset >= 1000 && diag.offset <= 1000 + len);
		free(cut);
	}
	buf_fini(&b);
}

static void test_btrace_every_bit_flip_is_safe(void **state)
{
	size_t errs = 0, flips = 0;
	struct tfs_diag diag;
	struct tfs_buf b;
	int rc;

	(void)state;
	small_stream(&b);
	for (size_t i = 0; i < b.len; i++)
		for (int bit = 0; bit < 8; bit++) {
			uint8_t *p = malloc(b.len);

			assert_non_null(p);
			memcpy(p, b.data, b.len);
			p[i] ^= (uint8_t)(1u << bit);
			memset(&diag, 0, sizeof(diag));
			rc = decode_all(p, b.len, &diag);
			assert_true(rc == 0 || rc == -TFS_ECORRUPT);
			if (rc < 0) {
				assert_string_equal(diag.section, "backtraces");
				assert_true(diag.offset >= 1000 && diag.offset <= 1000 + b.len);
				errs++;
			}
			flips++;
			free(p);
		}
	fprintf(stderr, "# %zu of %zu single-bit flips detected (%zu bytes)\n", errs, flips, b.len);
	buf_fini(&b);
}

static void expect_corrupt(const uint8_t *p, size_t len, size_t bad_off, const char *why)
{
	struct tfs_diag diag = {0};

	assert_int_equal(decode_all(p, len, &diag), -TFS_ECORRUPT);
	assert_string_equal(diag.section, "backtraces");
	if (!strstr(diag.reason, why) || diag.offset != 1000 + bad_off)
		fprintf(stderr, "# want '%s' at %zu, got '%s' at %llu\n", why, bad_off, diag.reason,
			(unsigned long long)diag.offset - 1000);
	assert_true(strstr(diag.reason, why) != NULL);
	assert_int_equal(diag.offset, 1000 + bad_off);
}

static void test_btrace_rejects_hostile_records(void **state)
{
	static const uint8_t bad_hdr[] = {0x01, 0xF3};
	static const uint8_t empty_hit[] = {0x01, 0x01, 0x00, 0x05};
	static const uint8_t run_no_pred[] = {0x01, 0x01, 0xC1};
	static const uint8_t pop_too_many[] = {0x01, 0x10};
	static const uint8_t long_bt[] = {0x01, 0xFF, 0x00, 0x81, 0x08};
	static const uint8_t trailing[] = {0x01, 0x00, 0x00};
	static const uint8_t dup_miss[] = {0x01, 0x02, 0xC0, 0x02, 0xC0, 0x00};
	static const uint8_t run_past_end[] = {0x02, 0x02, 0xC0, 0x02, 0xC0, 0x02, 0x11, 0xC2};
	static const uint8_t count_too_big[] = {0x05, 0x00};

	(void)state;
	expect_corrupt(bad_hdr, sizeof(bad_hdr), 2, "header");
	expect_corrupt(empty_hit, sizeof(empty_hit), 4, "empty cache bucket");
	expect_corrupt(run_no_pred, sizeof(run_no_pred), 3, "without a prediction");
	expect_corrupt(pop_too_many, sizeof(pop_too_many), 2, "pops");
	expect_corrupt(long_bt, sizeof(long_bt), 3, "new frames");
	expect_corrupt(trailing, sizeof(trailing), 2, "after the last");
	expect_corrupt(dup_miss, sizeof(dup_miss), 6, "cached address");
	/* second record: pop 1, new 1, then a run of 2 */
	expect_corrupt(run_past_end, sizeof(run_past_end), 8, "past the backtrace end");
	expect_corrupt(count_too_big, sizeof(count_too_big), 0, "backtrace count");
}

static void test_btrace_encoder_rejects_misuse(void **state)
{
	static uint64_t f[BT_MAX_FRAMES + 1];
	struct tfs_btenc *e;
	struct tfs_buf b;

	(void)state;
	assert_int_equal(btenc_new(&e), 0);
	assert_int_equal(btenc_add(e, f, BT_MAX_FRAMES + 1), -EINVAL);
	assert_int_equal(btenc_add(e, f, BT_MAX_FRAMES), 0);
	assert_int_equal(btenc_add(e, NULL, 0), 0);
	buf_init(&b);
	assert_int_equal(btenc_finish(e, &b), 0);
	assert_int_equal(btenc_add(e, f, 1), -EINVAL);
	assert_true(b.len > 0);
	buf_fini(&b);
	btenc_free(e);
	btenc_free(NULL);
}

/* Fail the n-th allocation for every n: errors are -ENOMEM, retries give the same bytes. */
static void test_btrace_allocation_failure(void **state)
{
	struct tfs_buf ref, b;
	struct tfs_btenc *e;
	struct tfs_btdec d;
	struct btset s;
	int rc, done = 0;

	(void)state;
	gen_structured(&s, 3000, 11);
	encode(&s, &ref);
	for (long k = 0; !done; k++) {
		size_t i = 0;

		fa_arm(k);
		rc = btenc_new(&e);
		if (rc < 0) {
			fa_disarm();
			assert_int_equal(rc, -ENOMEM);
			assert_null(e);
			continue;
		}
		buf_init(&b);
		done = 1;
		for (; i < s.n; i++) {
			rc = btenc_add(e, s.frames + s.off[i], bs_len(&s, i));
			if (rc < 0) {
				assert_int_equal(rc, -ENOMEM);
				done = 0;
				fa_disarm();
				assert_int_equal(btenc_add(e, s.frames + s.off[i], bs_len(&s, i)),
						 0);
			}
		}
		rc = btenc_finish(e, &b);
		if (rc < 0) {
			assert_int_equal(rc, -ENOMEM);
			assert_int_equal(b.len, 0);
			done = 0;
			fa_disarm();
			assert_int_equal(btenc_finish(e, &b), 0);
		}
		fa_disarm();
		assert_int_equal(b.len, ref.len);
		assert_memory_equal(b.data, ref.data, ref.len);
		buf_fini(&b);
		btenc_free(e);
	}
	for (long k = 0; k < 2; k++) {
		fa_arm(k);
		rc = btdec_init(&d, ref.data, ref.len, 0, NULL);
		fa_disarm();
		assert_int_equal(rc, -ENOMEM);
	}
	buf_fini(&ref);
	bs_fini(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_btrace_golden_encodes_exactly),
	    cmocka_unit_test(test_btrace_golden_decodes),
	    cmocka_unit_test(test_btrace_roundtrip_random),
	    cmocka_unit_test(test_btrace_roundtrip_structured),
	    cmocka_unit_test(test_btrace_structured_below_10_bytes),
	    cmocka_unit_test(test_btrace_every_truncation_fails),
	    cmocka_unit_test(test_btrace_every_bit_flip_is_safe),
	    cmocka_unit_test(test_btrace_rejects_hostile_records),
	    cmocka_unit_test(test_btrace_encoder_rejects_misuse),
	    cmocka_unit_test(test_btrace_allocation_failure),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
