/*
 * The table of live allocations (capture/allocs.c) against a model: random heap blocks,
 * mappings, frees and unmaps over a made-up address space (the table never touches the
 * memory it describes), every lookup compared with a linear search of the model; edge
 * cases by hand (interior pointers across a region boundary, a munmap that splits, trims
 * and removes, an mremap that moves a mapping, a stale entry replaced); 16 threads at once,
 * each checking its own blocks while all of them look up each other's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "allocs_i.h"

/* What capture.c defines in the library: the table is kept while io is traced. */
unsigned int tfs_capture_mask_ = TFS_TRACE_ON | TFS_TRACE_IO;
_Thread_local volatile unsigned int cap_tls_depth
	__attribute__((tls_model("initial-exec")));

#define PAGE 4096u
#define MIB ((uintptr_t)1 << 20)

static const void *at(uintptr_t a)
{
	return (const void *)a;
}

static void expect(uintptr_t p, uint64_t id, uint64_t off)
{
	uint64_t got_id = 99, got_off = 99;
	int rc = cap_alloc_lookup(at(p), &got_id, &got_off);

	if (got_id != id || got_off != (id ? off : p))
		fail_msg("lookup 0x%jx: id %ju off %ju, expected id %ju off %ju", (uintmax_t)p,
			 (uintmax_t)got_id, (uintmax_t)got_off, (uintmax_t)id,
			 (uintmax_t)(id ? off : p));
	assert_int_equal(rc, id ? 0 : -ENOENT);
}

static void test_allocs_heap_blocks_by_interior_pointer(void **state)
{
	/* one block crossing a region boundary, one of a region and more, a zero-size one */
	const uintptr_t a = 0x100000000u + MIB - 100, b = 0x200000000u, c = 0x300000010u;
	uint64_t ia = cap_alloc_add(at(a), 1000, 0), ib = cap_alloc_add(at(b), 3 * MIB, 0);
	uint64_t ic = cap_alloc_add(at(c), 0, 0);
	size_t size;

	(void)state;
	assert_true(ia > 0 && ib == ia + 1 && ic == ib + 1);
	expect(a, ia, 0);
	expect(a + 99, ia, 99);
	expect(a + 100, ia, 100); /* the next region: found through the region before */
	expect(a + 999, ia, 999);
	expect(a + 1000, 0, 0);
	expect(a - 1, 0, 0);
	expect(b + 2 * MIB + 5, ib, 2 * MIB + 5);
	expect(b + 3 * MIB, 0, 0);
	expect(c, ic, 0);
	expect(c + 1, 0, 0);
	assert_int_equal(cap_alloc_remove(at(a + 1), &size), 0); /* not a block's start */
	assert_int_equal(cap_alloc_remove(at(a), &size), ia);
	assert_int_equal(size, 1000);
	assert_int_equal(cap_alloc_remove(at(a), NULL), 0);
	expect(a + 100, 0, 0);
	assert_int_equal(cap_alloc_remove(at(b), &size), ib);
	assert_int_equal(size, 3 * MIB);
	expect(b + 5, 0, 0);
	/* a stale entry (freed unseen) is replaced when its address comes back */
	assert_int_equal(cap_alloc_add(at(c), 64, 0), ic + 1);
	expect(c + 63, ic + 1, 63);
	assert_int_equal(cap_alloc_remove(at(c), NULL), ic + 1);
	expect(c, 0, 0);
	/* a realloc in place keeps its id */
	assert_int_equal(cap_alloc_add(at(c), 32, 7777), 7777);
	expect(c + 31, 7777, 31);
	assert_int_equal(cap_alloc_remove(at(c), NULL), 7777);
	expect(0, 0, 0); /* NULL */
}

/* Small blocks (allocs.c's hash tables) across a region boundary and beside stale entries. */
static void test_allocs_small_blocks_and_stale_entries(void **state)
{
	const uintptr_t a = 0x500000000u + MIB - 64, d = 0x600000000u;
	uint64_t ia = cap_alloc_add(at(a), 200, 0), id1, id2, id3;

	(void)state;
	expect(a + 63, ia, 63);
	expect(a + 64, ia, 64); /* the next region, 16 probes below */
	expect(a + 199, ia, 199);
	expect(a + 200, 0, 0);
	assert_int_equal(cap_alloc_remove(at(a), NULL), ia);
	expect(a + 100, 0, 0);
	/* a small block freed unseen, then a larger block over it: the later id answers */
	id1 = cap_alloc_add(at(d + 64), 64, 0);
	id2 = cap_alloc_add(at(d), 1000, 0);
	expect(d + 70, id2, 70);
	expect(d + 999, id2, 999);
	/* a larger block freed unseen, a small one inside it: the small one answers */
	id3 = cap_alloc_add(at(d + 512), 32, 0);
	expect(d + 520, id3, 8);
	expect(d + 600, id2, 600);
	assert_int_equal(cap_alloc_remove(at(d + 512), NULL), id3);
	assert_int_equal(cap_alloc_remove(at(d), NULL), id2);
	/* the stale small entry is all that is left there */
	expect(d + 70, id1, 6);
	/* a larger block at a stale small entry's start: freeing it takes the live one */
	assert_int_equal(cap_alloc_add(at(d + 64), 4000, 0), id3 + 1);
	assert_int_equal(cap_alloc_remove(at(d + 64), NULL), id3 + 1);
	expect(d + 70, 0, 0);
}

static void test_allocs_munmap_splits_trims_and_removes(void **state)
{
	const uintptr_t m = 0x400000000u, n = m + 64 * PAGE;
	uint64_t im = cap_map_add(at(m), 8 * PAGE - 100), in;

	(void)state;
	expect(m + 8 * PAGE - 1, im, 8 * PAGE - 1); /* whole pages */
	cap_map_remove(at(m + 2 * PAGE), PAGE);	    /* a hole: two pieces, one id */
	expect(m + PAGE, im, PAGE);
	expect(m + 2 * PAGE, 0, 0);
	expect(m + 3 * PAGE + 8, im, 3 * PAGE + 8);
	cap_map_remove(at(m), 1); /* the first page: the front piece trimmed */
	expect(m, 0, 0);
	expect(m + PAGE, im, PAGE);
	cap_map_remove(at(m + PAGE + 1), PAGE); /* not page-aligned: munmap refuses it */
	expect(m + PAGE, im, PAGE);
	cap_map_remove(at(m + 7 * PAGE), 10 * PAGE); /* the tail, and beyond */
	expect(m + 7 * PAGE, 0, 0);
	expect(m + 6 * PAGE, im, 6 * PAGE);
	/* MAP_FIXED over part of it: the new mapping replaces what it covers */
	in = cap_map_add(at(m + 5 * PAGE), PAGE);
	expect(m + 5 * PAGE, in, 0);
	expect(m + 6 * PAGE, im, 6 * PAGE);
	expect(m + 4 * PAGE, im, 4 * PAGE);
	cap_map_remove(at(m), 16 * PAGE);
	for (uintptr_t p = m; p < m + 16 * PAGE; p += PAGE / 2)
		expect(p, 0, 0);
	/* munmap never takes heap blocks, even big ones */
	assert_true(cap_alloc_add(at(n), 2 * MIB, 0) > 0);
	cap_map_remove(at(n), 2 * MIB);
	assert_true(cap_alloc_remove(at(n), NULL) > 0);
}

/*
 * mremap: the range moved or resized keeps its mapping's id and offsets; a failed one is put
 * back; the old range is free for another mapping once taken.
 */
static void test_allocs_mremap_keeps_id_and_offsets(void **state)
{
	const uintptr_t m = 0x500000000u, to = m + 256 * PAGE, far = m + 1024 * PAGE;
	uint64_t im = cap_map_add(at(m), 4 * PAGE), off = 99, other;

	(void)state;
	/* grown in place */
	assert_int_equal(cap_map_take(at(m), 4 * PAGE, &off), im);
	assert_int_equal(off, 0);
	expect(m, 0, 0);
	assert_int_equal(cap_map_enter(at(m), 8 * PAGE, im, off), im);
	expect(m + 7 * PAGE + 5, im, 7 * PAGE + 5);
	/* the back half moved: its bytes keep their offsets, the front stays */
	assert_int_equal(cap_map_take(at(m + 4 * PAGE), 4 * PAGE, &off), im);
	assert_int_equal(off, 4 * PAGE);
	expect(m + 4 * PAGE, 0, 0);
	other = cap_map_add(at(m + 4 * PAGE), PAGE); /* another mapping takes the old range */
	assert_int_equal(cap_map_enter(at(to), 4 * PAGE, im, off), im);
	expect(to + 8, im, 4 * PAGE + 8);
	expect(m + 8, im, 8);
	expect(m + 4 * PAGE, other, 0);
	/* a failed move: the range put back as it was */
	assert_int_equal(cap_map_take(at(to), 4 * PAGE, &off), im);
	assert_int_equal(cap_map_enter(at(to), 4 * PAGE, im, off), im);
	expect(to + PAGE, im, 5 * PAGE);
	/* not page-aligned or empty: mremap refuses it, nothing taken */
	assert_int_equal(cap_map_take(at(to + 1), PAGE, &off), 0);
	assert_int_equal(cap_map_take(at(to), 0, &off), 0);
	expect(to + 1, im, 4 * PAGE + 1);
	/* a range no mapping holds (made before capture): a new id where it lands */
	assert_int_equal(cap_map_take(at(far), PAGE, &off), 0);
	assert_int_equal(off, 0);
	other = cap_map_enter(at(far + PAGE), PAGE, 0, 0);
	assert_true(other > im);
	expect(far + PAGE, other, 0);
	cap_map_remove(at(m), 2048 * PAGE);
	expect(to, 0, 0);
}

/* ---- against a model ---- */

struct ment {
	uintptr_t lo, hi, base;
	uint64_t id;
	int map;
};

#define MODEL_MAX 4096

static struct ment g_model[MODEL_MAX];
static int g_n;

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int model_find(uintptr_t p)
{
	for (int i = 0; i < g_n; i++)
		if (g_model[i].lo <= p && p < g_model[i].hi)
			return i;
	return -1;
}

static int model_free_range(uintptr_t lo, uintptr_t hi)
{
	for (int i = 0; i < g_n; i++)
		if (g_model[i].lo < hi && lo < g_model[i].hi)
			return 0;
	return 1;
}

static void model_unmap(uintptr_t a, uintptr_t b)
{
	int n = g_n;

	for (int i = 0; i < n; i++) {
		struct ment *e = &g_model[i];

		if (!e->map || e->hi <= a || e->lo >= b)
			continue;
		if (e->lo < a && e->hi > b) {
			g_model[g_n] = *e;
			g_model[g_n++].lo = b;
			e->hi = a;
		} else if (e->lo < a) {
			e->hi = a;
		} else if (e->hi > b) {
			e->lo = b;
		} else {
			e->hi = e->lo; /* empty: dropped below */
		}
	}
	for (int i = 0; i < g_n;)
		if (g_model[i].hi == g_model[i].lo)
			g_model[i] = g_model[--g_n];
		else
			i++;
}

static void check_point(uintptr_t p)
{
	int i = model_find(p);

	if (i < 0)
		expect(p, 0, 0);
	else
		expect(p, g_model[i].id, p - g_model[i].base);
}

static void test_allocs_match_a_model(void **state)
{
	const uintptr_t space = 0x7000000000u, span = 64 * MIB;
	uint64_t seed = (uint64_t)time(NULL) | 1, s;

	(void)state;
	if (getenv("TFS_TEST_SEED"))
		seed = strtoull(getenv("TFS_TEST_SEED"), NULL, 0) | 1;
	printf("# seed %ju (TFS_TEST_SEED to repeat)\n", (uintmax_t)seed);
	s = seed;
	for (int step = 0; step < 60000; step++) {
		uint64_t op = rnd(&s) % 100;

		if (op < 35 && g_n < MODEL_MAX - 64) {
			/* a heap block, now and then a region or more */
			/* (half of the others small: allocs.c keeps those in hash tables) */
			size_t size = rnd(&s) % 8 == 0   ? MIB + rnd(&s) % (3 * MIB)
				      : rnd(&s) % 2 == 0 ? rnd(&s) % 300
							 : rnd(&s) % 5000;
			uintptr_t lo = space + (rnd(&s) % span & ~(uintptr_t)15);
			uintptr_t hi = lo + (size ? size : 1);

			if (!model_free_range(lo, hi))
				continue;
			g_model[g_n] = (struct ment){lo, hi, lo, cap_alloc_add(at(lo), size, 0), 0};
			g_n++;
		} else if (op < 45 && g_n < MODEL_MAX - 64) {
			uintptr_t lo = space + (rnd(&s) % span & ~(uintptr_t)(PAGE - 1));
			size_t len = PAGE * (1 + rnd(&s) % 64);

			if (!model_free_range(lo, lo + len))
				continue;
			g_model[g_n] = (struct ment){lo, lo + len, lo, cap_map_add(at(lo), len), 1};
			g_n++;
		} else if (op < 75 && g_n > 0) {
			int i = (int)(rnd(&s) % (uint64_t)g_n);

			if (g_model[i].map) {
				cap_map_remove(at(g_model[i].lo), g_model[i].hi - g_model[i].lo);
				model_unmap(g_model[i].lo, g_model[i].hi);
			} else {
				assert_int_equal(cap_alloc_remove(at(g_model[i].lo), NULL),
						 g_model[i].id);
				g_model[i] = g_model[--g_n];
			}
		} else if (op < 80 && g_n < MODEL_MAX - 1) {
			/* munmap over anything: pieces of mappings, heap blocks untouched */
			uintptr_t lo = space + (rnd(&s) % span & ~(uintptr_t)(PAGE - 1));
			size_t len = PAGE * (1 + rnd(&s) % 128);

			cap_map_remove(at(lo), len);
			model_unmap(lo, lo + len);
		} else {
			uintptr_t p = space + rnd(&s) % span;

			check_point(p);
			if (g_n > 0) {
				const struct ment *e = &g_model[rnd(&s) % (uint64_t)g_n];

				check_point(e->lo);
				check_point(e->hi - 1);
				check_point(e->hi);
				check_point(e->lo - 1);
			}
		}
	}
	for (int i = 0; i < g_n; i++) {
		if (g_model[i].map)
			cap_map_remove(at(g_model[i].lo), g_model[i].hi - g_model[i].lo);
		else
			assert_int_equal(cap_alloc_remove(at(g_model[i].lo), NULL), g_model[i].id);
	}
	g_n = 0;
}

/* ---- threads ---- */

#define N_THREADS 16
#define PER_THREAD 64

struct worker {
	int index;
	uint64_t ids[20000];
	int n_ids;
	int errors;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	/* each thread its own range, the ranges interleaved so shards are shared */
	uintptr_t base = 0x5000000000u + (uintptr_t)w->index * 4096;
	uint64_t live[PER_THREAD] = {0}, s = (uint64_t)w->index * 7919 + 1;

	for (int round = 0; round < 300; round++) {
		for (int i = 0; i < PER_THREAD; i++) {
			uintptr_t lo = base + (uintptr_t)i * N_THREADS * 4096;
			uint64_t id, off;

			if (live[i]) {
				if (cap_alloc_lookup(at(lo + 100), &id, &off) != 0 ||
				    id != live[i] || off != 100)
					w->errors++;
				if (cap_alloc_remove(at(lo), NULL) != live[i])
					w->errors++;
				live[i] = 0;
			} else {
				live[i] = cap_alloc_add(at(lo), 200 + rnd(&s) % 3000, 0);
				w->ids[w->n_ids++] = live[i];
			}
			/* someone else's block, alive or not: any answer but a crash or a lie */
			if (cap_alloc_lookup(at(lo + 4096 + 8), &id, &off) == 0 && off != 8)
				w->errors++;
		}
	}
	for (int i = 0; i < PER_THREAD; i++)
		if (live[i] &&
		    cap_alloc_remove(at(base + (uintptr_t)i * N_THREADS * 4096), NULL) != live[i])
			w->errors++;
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void test_allocs_16_threads_each_see_their_own(void **state)
{
	static struct worker w[N_THREADS];
	static uint64_t all[N_THREADS * 20000];
	pthread_t th[N_THREADS];
	int n = 0;

	(void)state;
	for (int i = 0; i < N_THREADS; i++) {
		w[i].index = i;
		assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < N_THREADS; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(w[i].errors, 0);
		for (int j = 0; j < w[i].n_ids; j++)
			all[n++] = w[i].ids[j];
	}
	qsort(all, (size_t)n, sizeof(all[0]), cmp_u64);
	for (int i = 1; i < n; i++)
		assert_true(all[i] > all[i - 1]); /* every id handed out once */
	assert_int_equal(n, N_THREADS * 300 * PER_THREAD / 2);
}

static void test_allocs_off_when_not_traced(void **state)
{
	const uintptr_t p = 0x6000000000u;
	uint64_t id, off;

	(void)state;
	assert_true(cap_alloc_add(at(p), 100, 0) > 0);
	tfs_capture_mask_ = TFS_TRACE_ON | TFS_TRACE_ZONES;
	assert_int_equal(cap_alloc_lookup(at(p), &id, &off), -ENOENT);
	assert_int_equal(id, 0);
	assert_int_equal(off, p);
	tfs_capture_mask_ = TFS_TRACE_ON | TFS_TRACE_IO;
	assert_int_equal(cap_alloc_lookup(at(p + 5), &id, &off), 0);
	assert_int_equal(off, 5);
	assert_int_equal(cap_alloc_remove(at(p), NULL), id);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_allocs_heap_blocks_by_interior_pointer),
	    cmocka_unit_test(test_allocs_small_blocks_and_stale_entries),
	    cmocka_unit_test(test_allocs_munmap_splits_trims_and_removes),
	    cmocka_unit_test(test_allocs_mremap_keeps_id_and_offsets),
	    cmocka_unit_test(test_allocs_match_a_model),
	    cmocka_unit_test(test_allocs_16_threads_each_see_their_own),
	    cmocka_unit_test(test_allocs_off_when_not_traced),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
