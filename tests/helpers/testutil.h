/*
 * Shared test helpers: a seeded PRNG whose seed is printed (TFS_SEED overrides it) and the
 * allocation-failure switch of failalloc.c. Tests include this after cmocka.h.
 */
#ifndef TFS_TESTUTIL_H
#define TFS_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* xorshift64*; state must be non-zero */
static inline uint64_t tu_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * UINT64_C(2685821657736338717);
}

/* Uniform in [0, n), n > 0. */
static inline uint64_t tu_below(uint64_t *s, uint64_t n)
{
	return tu_rand(s) % n;
}

/* The run's seed: $TFS_SEED if set, else time-based; printed once so failures reproduce. */
static inline uint64_t tu_seed(const char *test)
{
	const char *env = getenv("TFS_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;

	if (seed == 0)
		seed = 1;
	fprintf(stderr, "# %s: seed=%llu (set TFS_SEED to reproduce)\n", test,
		(unsigned long long)seed);
	return seed;
}

/*
 * Allocation failure injection (tests linked with failalloc.c and
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc): after @n more successful allocations,
 * every allocation fails until fa_disarm(). fa_count() tells how many were attempted.
 */
void fa_arm(long n);
void fa_disarm(void);
long fa_count(void);

#endif
