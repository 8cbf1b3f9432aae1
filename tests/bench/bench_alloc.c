/*
 * bench_alloc: cost per event of a malloc(64)/free loop (two events per iteration), for the
 * allocation interposers of libtfscapture.so. Links nothing of tracefs, so it runs untraced
 * as is, and traced with the library preloaded (`tracefs record --trace=alloc`, or
 * LD_PRELOAD with TFS_TRACE=alloc). Prints one line: loop, events, ns per event, events
 * dropped (read from the preloaded library when there is one). tests/bench/run_capture
 * runs every combination and prints the ratios.
 *
 *   bench_alloc N
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	uint64_t (*dropped)(void);
	uint64_t t0, t1;

	if (n < 1) {
		fprintf(stderr, "usage: bench_alloc N\n");
		return 2;
	}
	t0 = now_ns();
	for (long i = 0; i < n; i++) {
		void *p = malloc(64);

		__asm__ volatile("" : "+r"(p) : : "memory"); /* keeps the pair from being elided */
		free(p);
	}
	t1 = now_ns();
	*(void **)&dropped = dlsym(RTLD_DEFAULT, "tfs_capture_dropped");
	printf("alloc %" PRIu64 " %.2f %" PRIu64 "\n", 2 * (uint64_t)n,
	       (double)(t1 - t0) / (2.0 * (double)n), dropped ? dropped() : 0);
	return 0;
}
