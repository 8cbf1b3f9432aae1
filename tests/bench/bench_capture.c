/*
 * bench_capture: cost per capture event of a zone begin/end loop and of a tfs_mem_access
 * loop, in whatever mode the environment sets (traced in-process, under `tracefs record`,
 * or TFS_CAPTURE=0), against the same loop without capture calls ("baseline"), and the
 * cost of the clock read every traced event makes under TFS_CLOCK=monotonic ("clock":
 * clock_gettime(CLOCK_MONOTONIC); the default clock, the TSC where the kernel keeps time
 * with it, costs less).
 * Prints one line: loop, events, ns per event, events dropped. tests/bench/run_capture
 * runs every combination and prints the ratios.
 *
 *   bench_capture zones|mem|baseline|clock N
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tfs/capture.h"

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static double cells[64];

int main(int argc, char **argv)
{
	const char *loop = argc > 1 ? argv[1] : "zones";
	long n = argc > 2 ? atol(argv[2]) : 1000000;
	uint64_t t0, t1, events;

	if (n < 1 || (strcmp(loop, "zones") && strcmp(loop, "mem") && strcmp(loop, "baseline") &&
		      strcmp(loop, "clock"))) {
		fprintf(stderr, "usage: bench_capture zones|mem|baseline|clock N\n");
		return 2;
	}
	t0 = now_ns();
	if (!strcmp(loop, "zones")) {
		for (long i = 0; i < n; i++) {
			tfs_zone_begin("bench");
			__asm__ volatile("" ::: "memory");
			tfs_zone_end();
		}
		events = 2 * (uint64_t)n;
	} else if (!strcmp(loop, "mem")) {
		for (long i = 0; i < n; i++) {
			tfs_mem_access(&cells[i & 63], sizeof(double), i & 1);
			__asm__ volatile("" ::: "memory");
		}
		events = (uint64_t)n;
	} else if (!strcmp(loop, "clock")) {
		uint64_t sum = 0;

		for (long i = 0; i < n; i++)
			sum += now_ns();
		__asm__ volatile("" ::"r"(sum));
		events = (uint64_t)n;
	} else {
		for (long i = 0; i < n; i++)
			__asm__ volatile("" ::: "memory");
		events = (uint64_t)n;
	}
	t1 = now_ns();
	printf("%s %" PRIu64 " %.2f %" PRIu64 "\n", loop, events, (double)(t1 - t0) / (double)events,
	       tfs_capture_dropped());
	return 0;
}
