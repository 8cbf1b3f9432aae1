/*
 * bench_alloc: cost per event of a malloc(64)/free loop (two events per iteration), for the
 * allocation interposers of libtfscapture.so. Links nothing of tracefs, so it runs untraced
 * as is, and traced with the library preloaded (`tracefs record --trace=alloc`, or
 * LD_PRELOAD with TFS_TRACE=alloc). With T threads, each runs N / T iterations at once and
 * the time is the wall time of all of them: ns per event is then the inverse of the
 * process's throughput, which shows what contention on the allocation table costs. Prints
 * one line: loop, events, ns per event, events dropped (read from the preloaded library
 * when there is one), and CPU ns per event (user + system time of every thread of this
 * process: steadier than wall time on a loaded machine). tests/bench/run_capture runs every combination and prints the ratios.
 * With "io", the loop is instead one 1-byte write to /dev/null per iteration (one event),
 * alternately from a heap block and from the stack: what looking up the allocation of an
 * I/O buffer costs (TFS_TRACE=io with allocation ids on and off). With "deep D", each
 * thread runs the malloc/free loop D noinline calls deeper than it would (a backtrace of D
 * more frames, the same ones every time): what unwinding a deeper stack costs.
 *
 *   bench_alloc N [T [io | deep D]]
 */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256

/*
 * The preloaded library's count, through a weak reference that the dynamic linker binds when
 * the library is there: unlike a dlsym that fails, it allocates nothing, so the program makes
 * the same allocations under every tracer (tests/bench/run_real compares their counts).
 */
extern uint64_t tfs_capture_dropped(void) __attribute__((weak));

static long g_iters;
static long g_depth; /* deep: extra frames below the loop */
static int g_null = -1; /* io loop: /dev/null */

static double cpu_ns(void)
{
	struct rusage u;

	getrusage(RUSAGE_SELF, &u);
	return ((double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec) * 1e9 +
	       ((double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_usec) * 1e3;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void *io_loop(void *arg)
{
	char stack[16] = {0};
	char *heap = calloc(1, 4096);

	for (long i = 0; heap && i < g_iters; i++)
		if (write(g_null, i & 1 ? stack : heap + i % 4096, 1) != 1)
			break;
	free(heap);
	return arg;
}

static void *loop(void *arg)
{
	for (long i = 0; i < g_iters; i++) {
		void *p = malloc(64);

		__asm__ volatile("" : "+r"(p) : : "memory"); /* keeps the pair from being elided */
		free(p);
	}
	return arg;
}

/* The loop @d calls deeper: not a tail call, so every level keeps its frame. */
__attribute__((noinline)) static void *deep(long d)
{
	void *r = d > 0 ? deep(d - 1) : loop(NULL);

	__asm__ volatile("" : "+r"(r) : : "memory");
	return r;
}

static void *deep_loop(void *arg)
{
	deep(g_depth);
	return arg;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	long n_threads = argc > 2 ? atol(argv[2]) : 1;
	void *(*fn)(void *) = loop;
	pthread_t th[MAX_THREADS];
	uint64_t t0, t1, events;
	double c0, c1;

	if (n < 1 || n_threads < 1 || n_threads > MAX_THREADS || n < n_threads) {
		fprintf(stderr, "usage: bench_alloc N [THREADS (1..%d) [io | deep D]]\n",
			MAX_THREADS);
		return 2;
	}
	g_iters = n / n_threads;
	events = 2 * (uint64_t)g_iters * (uint64_t)n_threads;
	if (argc > 3 && !strcmp(argv[3], "io")) {
		g_null = open("/dev/null", O_WRONLY);
		if (g_null < 0)
			return 1;
		fn = io_loop;
		events /= 2;
	} else if (argc > 4 && !strcmp(argv[3], "deep")) {
		g_depth = atol(argv[4]);
		fn = deep_loop;
	}
	c0 = cpu_ns();
	t0 = now_ns();
	if (n_threads == 1) {
		fn(NULL);
	} else {
		for (long i = 0; i < n_threads; i++)
			if (pthread_create(&th[i], NULL, fn, NULL) != 0)
				return 1;
		for (long i = 0; i < n_threads; i++)
			pthread_join(th[i], NULL);
	}
	t1 = now_ns();
	c1 = cpu_ns();
	printf("%s %" PRIu64 " %.2f %" PRIu64 " %.2f\n", fn == io_loop ? "io" : "alloc", events,
	       (double)(t1 - t0) / (double)events, tfs_capture_dropped ? tfs_capture_dropped() : 0,
	       (c1 - c0) / (double)events);
	return 0;
}
