/*
 * cap_bt: allocations with known backtraces, for check_backtrace.py. Links nothing of
 * tracefs (run under `tracefs record`). Each allocation comes from its own call chain of
 * noinline functions, the last one through an always_inline helper; every call whose
 * return address ends up in a backtrace carries a marker comment "bt:NAME" on its line, so
 * the checker finds the expected file:line in this source.
 *
 *   cap_bt known          main > f_outer > f_inner > inline helper > malloc(1001), then
 *                         main > f_others > f_calloc > calloc(3, 1002), and likewise
 *                         realloc(p, 5000) and posix_memalign(&p, 64, 1005)
 *   cap_bt threads N      N threads at once, each thread_main > f_outer > ... > malloc(2000+i)
 *   cap_bt loop N         N allocations, alternately malloc(1003) in site_a and malloc(1013)
 *                         in site_b (different, so that the compiler does not fold them)
 *   cap_bt dlopen LIB     LIB's plugin_alloc() (a library loaded after start) > malloc(1004)
 *   cap_bt stress N LIB   N threads at once, each 1000 times site_a or site_b alternately,
 *                         while main loads LIB and allocates through it
 *   cap_bt abort          malloc(1001) as in known, then abort()
 *
 * Standard output is a fixed text.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))
/* keeps a call from being a tail call: its frame stays in the backtrace */
#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")

static void *g_sink[64];

static inline __attribute__((always_inline)) void *helper(size_t n)
{
	void *p = malloc(n); /* bt:helper */

	KEEP(p);
	return p;
}

NOINLINE static void *f_inner(size_t n)
{
	void *p = helper(n); /* bt:f_inner */

	KEEP(p);
	return p;
}

NOINLINE static void *f_calloc(void)
{
	void *p = calloc(3, 1002); /* bt:f_calloc */

	KEEP(p);
	return p;
}

NOINLINE static void *f_realloc(void *p)
{
	void *q = realloc(p, 5000); /* bt:f_realloc */

	KEEP(q);
	return q;
}

NOINLINE static void *f_memalign(void)
{
	void *p = NULL;

	if (posix_memalign(&p, 64, 1005) != 0) /* bt:f_posix_memalign */
		return NULL;
	KEEP(p);
	return p;
}

NOINLINE static void *f_outer(size_t n)
{
	void *p = f_inner(n); /* bt:f_outer */

	KEEP(p);
	return p;
}

NOINLINE static void f_others(void)
{
	void *a = f_calloc();		 /* bt:f_others_calloc */
	void *b = f_realloc(malloc(10)); /* bt:f_others_realloc */
	void *c = f_memalign();		 /* bt:f_others_memalign */

	KEEP(a);
	free(a);
	free(b);
	free(c);
}

static void *thread_main(void *arg)
{
	const size_t i = (size_t)arg;
	void *p = f_outer(2000 + i); /* bt:thread_main */

	KEEP(p);
	free(p);
	return NULL;
}

NOINLINE static void *site_a(void)
{
	void *p = malloc(1003); /* bt:site_a */

	KEEP(p);
	return p;
}

NOINLINE static void *site_b(void)
{
	void *p = malloc(1013); /* bt:site_b */

	KEEP(p);
	return p;
}

static int threads(int n)
{
	pthread_t t[64];

	if (n < 1 || n > 64)
		return 2;
	for (long i = 0; i < n; i++)
		pthread_create(&t[i], NULL, thread_main, (void *)i);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("threads %d done\n", n);
	return 0;
}

static int loop(long n)
{
	for (long i = 0; i < n; i++) {
		void *p = i % 2 ? site_b() : site_a(); /* bt:loop */

		free(p);
	}
	printf("loop %ld done\n", n);
	return 0;
}

static void *stress_main(void *arg)
{
	(void)arg;
	for (int i = 0; i < 1000; i++) {
		void *p = i % 2 ? site_b() : site_a(); /* bt:stress_main */

		free(p);
	}
	return NULL;
}

static int plugin(const char *lib);

static int stress(int n, const char *lib)
{
	pthread_t t[64];
	int rc;

	if (n < 1 || n > 64)
		return 2;
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, stress_main, NULL);
	rc = plugin(lib);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("stress %d done\n", n);
	return rc;
}

static int plugin(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW);
	void *(*alloc)(size_t);
	void *p;

	if (!h) {
		fprintf(stderr, "cap_bt: %s\n", dlerror());
		return 1;
	}
	*(void **)&alloc = dlsym(h, "plugin_alloc");
	if (!alloc)
		return 1;
	p = alloc(1004); /* bt:plugin */
	KEEP(p);
	free(p);
	printf("plugin done\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "known";
	void *p;

	if (!strcmp(mode, "threads"))
		return threads(argc > 2 ? atoi(argv[2]) : 16);
	if (!strcmp(mode, "loop"))
		return loop(argc > 2 ? atol(argv[2]) : 1000);
	if (!strcmp(mode, "dlopen") && argc > 2)
		return plugin(argv[2]);
	if (!strcmp(mode, "stress") && argc > 3)
		return stress(atoi(argv[2]), argv[3]);
	if (!strcmp(mode, "abort")) {
		g_sink[0] = f_outer(1001); /* bt:abort */
		fflush(stdout);
		abort();
	}
	if (strcmp(mode, "known"))
		return 2;
	p = f_outer(1001); /* bt:main */
	g_sink[0] = p;
	f_others(); /* bt:main_others */
	free(g_sink[0]);
	printf("known done\n");
	return 0;
}
