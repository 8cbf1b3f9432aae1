/*
 * The store of symbolised addresses (capture/symcache.c): 20,000 addresses with random
 * frames (seeded, the seed printed) put and got back equal, across the table's growth;
 * strings copied (the caller's buffers are overwritten after each put) and interned (equal
 * strings share one copy); a NULL function and zero frames kept as such; absent addresses
 * absent; demangled names made once and kept.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "symbols_i.h"

#define N_PCS 20000

static uint64_t g_rng;

static uint64_t rnd(void)
{
	g_rng ^= g_rng << 13;
	g_rng ^= g_rng >> 7;
	g_rng ^= g_rng << 17;
	return g_rng;
}

/* Address @i's frames, made again identically from @i: names from a small set. */
static uint32_t frames_of(uint64_t i, struct tfs_src_frame *f, char (*buf)[32])
{
	uint32_t n = (uint32_t)(i % 4);

	for (uint32_t k = 0; k < n; k++) {
		snprintf(buf[2 * k], 32, "fn%" PRIu64, (i + k) % 97);
		snprintf(buf[2 * k + 1], 32, "file%" PRIu64 ".c", (i * 7 + k) % 13);
		f[k] = (struct tfs_src_frame){buf[2 * k], buf[2 * k + 1], (uint32_t)(i + k)};
	}
	if (n > 0 && i % 5 == 0)
		f[0].function = NULL; /* no symbol names the function */
	return n;
}

static uint64_t pc_of(uint64_t i)
{
	return 0x400000 + i * 0x9e3779b97f4a7c15u % 0x1000000000u;
}

static void test_symcache_put_get_round_trip(void **state)
{
	struct cap_symcache *c;
	uint64_t seed = (uint64_t)time(NULL) | 1;
	uint64_t *order = malloc(N_PCS * sizeof(*order));

	(void)state;
	if (getenv("TFS_TEST_SEED"))
		seed = strtoull(getenv("TFS_TEST_SEED"), NULL, 0) | 1;
	printf("# seed %" PRIu64 " (TFS_TEST_SEED to repeat)\n", seed);
	g_rng = seed;
	assert_non_null(order);
	assert_int_equal(cap_symcache_new(&c), 0);
	for (uint64_t i = 0; i < N_PCS; i++)
		order[i] = i;
	for (uint64_t i = N_PCS - 1; i > 0; i--) { /* put in a random order */
		uint64_t j = rnd() % (i + 1), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (uint64_t k = 0; k < N_PCS; k++) {
		struct tfs_src_frame f[4];
		const struct tfs_src_frame *stored;
		char buf[8][32];
		uint32_t n = frames_of(order[k], f, buf);

		assert_int_equal(cap_symcache_put(c, pc_of(order[k]), f, n, &stored), 0);
		memset(buf, 'x', sizeof(buf)); /* the cache has its own copies */
		buf[0][31] = 0;
	}
	for (uint64_t i = 0; i < N_PCS; i++) {
		struct tfs_src_frame want[4];
		const struct tfs_src_frame *got;
		char buf[8][32];
		uint32_t n = frames_of(i, want, buf), n_got = 99;

		assert_true(cap_symcache_get(c, pc_of(i), &got, &n_got));
		assert_int_equal(n_got, n);
		for (uint32_t k = 0; k < n; k++) {
			if (want[k].function)
				assert_string_equal(got[k].function, want[k].function);
			else
				assert_null(got[k].function);
			assert_string_equal(got[k].file, want[k].file);
			assert_int_equal(got[k].line, want[k].line);
		}
	}
	assert_false(
	    cap_symcache_get(c, pc_of(N_PCS), &(const struct tfs_src_frame *){0}, &(uint32_t){0}));
	cap_symcache_free(c);
	free(order);
}

static void test_symcache_equal_strings_share_one_copy(void **state)
{
	struct cap_symcache *c;
	const struct tfs_src_frame *a, *b;
	char name[] = "same_function", file[] = "same.c";
	struct tfs_src_frame f = {name, file, 3};

	(void)state;
	assert_int_equal(cap_symcache_new(&c), 0);
	assert_int_equal(cap_symcache_put(c, 0x1000, &f, 1, &a), 0);
	assert_int_equal(cap_symcache_put(c, 0x2000, &f, 1, &b), 0);
	assert_ptr_equal(a[0].function, b[0].function);
	assert_ptr_equal(a[0].file, b[0].file);
	assert_ptr_not_equal(a[0].function, name);
	cap_symcache_free(c);
}

static void test_symcache_empty_absent(void **state)
{
	struct cap_symcache *c;
	const struct tfs_src_frame *f;
	uint32_t n;

	(void)state;
	assert_int_equal(cap_symcache_new(&c), 0);
	assert_false(cap_symcache_get(c, 0x1000, &f, &n));
	cap_symcache_free(c);
	cap_symcache_free(NULL);
}

static void test_symcache_demangles_once(void **state)
{
	struct cap_symcache *c;
	const char *plain = "plain_c_function", *a, *b;

	(void)state;
	assert_int_equal(cap_symcache_new(&c), 0);
	a = cap_symcache_demangle(c, "_ZN3geo4Grid5cellsEi");
	b = cap_symcache_demangle(c, "_ZN3geo4Grid5cellsEi");
	assert_non_null(a);
	assert_ptr_equal(a, b);
	assert_string_equal(a, "geo::Grid::cells(int)");
	assert_ptr_equal(cap_symcache_demangle(c, plain), plain);
	a = cap_symcache_demangle(c, "_Znot_a_name");
	assert_string_equal(a, "_Znot_a_name"); /* kept as it is */
	cap_symcache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_symcache_put_get_round_trip),
	    cmocka_unit_test(test_symcache_equal_strings_share_one_copy),
	    cmocka_unit_test(test_symcache_empty_absent),
	    cmocka_unit_test(test_symcache_demangles_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
