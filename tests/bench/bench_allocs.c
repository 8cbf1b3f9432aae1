/*
 * bench_allocs: what the table of live allocations (capture/allocs.c) costs per malloc/free
 * pair when the live set is large, over made-up addresses (the table never touches the
 * memory it describes). Each pattern keeps LIVE blocks live and replaces one at a time
 * (take out a live block, enter a new one), as a long-running program does: seven times in
 * eight one of the 4,096 blocks replaced last (most objects die young), else any:
 *   glibc   blocks of 32 to 96 bytes laid end to end in 1 MiB arenas, a freed block's
 *           address reused first (glibc's chunks: at least 32 bytes apart)
 *   dense16 blocks of 16 bytes end to end (jemalloc's and tcmalloc's smallest class)
 *   scatter blocks at random 16-byte-aligned addresses of a 64 GiB range
 * It prints ns per pair (best of 3) and the ratio to `scatter`, the pattern where no layout
 * helps (every pair two cache misses), measured in the same run.
 * Usage: bench_allocs [LIVE] [PAIRS]   (default 1000000 live blocks, 4000000 pairs)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocs_i.h"

unsigned int tfs_capture_mask_ = TFS_TRACE_ON | TFS_TRACE_ALLOC;
_Thread_local volatile unsigned int cap_tls_depth
	__attribute__((tls_model("initial-exec")));

static uint64_t rng = 88172645463325252u;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum { GLIBC, DENSE16, SCATTER, N_PATTERNS };
static const char *const names[N_PATTERNS] = {"glibc", "dense16", "scatter"};

/* Where pattern @p puts the @k-th new block (@size: its size). */
static uintptr_t place(int p, uintptr_t *top, size_t *size)
{
	uintptr_t a;

	switch (p) {
	case GLIBC:
		*size = 16 + 16 * (next() % 5);
		a = *top;
		*top += *size + 16;
		return a;
	case DENSE16:
		*size = 16;
		a = *top;
		*top += 16;
		return a;
	default:
		*size = 16 + 16 * (next() % 4);
		return 0x100000000000u + (next() % (64ull << 30)) / 16 * 16;
	}
}

static double run(int p, size_t live, size_t pairs)
{
	uintptr_t *addr = malloc(live * sizeof(*addr)), top = 0x7f0000000000u;
	size_t recent[4096] = {0}, size;
	double t0, t;

	if (!addr)
		exit(1);
	for (size_t i = 0; i < live; i++) {
		addr[i] = place(p, &top, &size);
		cap_alloc_add((const void *)addr[i], size, 0);
	}
	t0 = now();
	for (size_t k = 0; k < pairs; k++) {
		const uint64_t r = next();
		const size_t i = r % 8 ? recent[(r >> 3) % 4096] : (r >> 3) % live;
		uintptr_t old = addr[i];

		recent[k % 4096] = i;

		cap_alloc_remove((const void *)old, &size);
		/* glibc hands the freed chunk back first, the others make a new one */
		addr[i] = p == GLIBC && (k & 1) ? old : place(p, &top, &size);
		cap_alloc_add((const void *)addr[i], size, 0);
	}
	t = now() - t0;
	for (size_t i = 0; i < live; i++)
		cap_alloc_remove((const void *)addr[i], NULL);
	free(addr);
	return 1e9 * t / (double)pairs;
}

int main(int argc, char **argv)
{
	size_t live = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
	size_t pairs = argc > 2 ? strtoull(argv[2], NULL, 10) : 4000000;
	double best[N_PATTERNS];

	for (int p = 0; p < N_PATTERNS; p++) {
		best[p] = 1e30;
		for (int r = 0; r < 3; r++) {
			double ns = run(p, live, pairs);

			if (ns < best[p])
				best[p] = ns;
		}
	}
	printf("table of live allocations, %zu live blocks, %zu malloc/free pairs, best of 3\n",
	       live, pairs);
	for (int p = 0; p < N_PATTERNS; p++)
		printf("  %-8s %7.1f ns per pair  %.2fx scatter\n", names[p], best[p],
		       best[p] / best[SCATTER]);
	return 0;
}
