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
 * Stacks that stress a walk reusing the thread's last one (check_backtrace.py compares each
 * with libunwind's; sizes tell the events apart):
 *
 *   cap_bt same_depth N   N times alternately caller_a or caller_b > rec x 20 > malloc(1020):
 *                         the same frames at the same addresses but the outermost ones
 *   cap_bt longjmp N      N times: jump_deep(d) > ... d deep > malloc(1100 + d), then a
 *                         longjmp out to main, which allocates through site_a at once
 *   cap_bt signal N       N times: raiser > raise(SIGUSR1), whose handler allocates
 *                         malloc(1200), then raise(SIGUSR2), handled on a sigaltstack,
 *                         malloc(1201); main allocates malloc(1202) between them
 *   cap_bt fplib N        N times: a library built without frame pointers calling back into
 *                         one built with them and the reverse (malloc 1300, 1301), and a
 *                         function that realigns its stack (malloc 1302)
 *   cap_bt deep D         rec D deep > malloc(1020): more frames than kept
 *   cap_bt mixed N        N allocations from rec_mixed at pseudo-random depths (0 to 39)
 *                         under caller_a or caller_b, malloc(1400 + depth + 50 * caller)
 *   cap_bt dlcycle LIB1 LIB2 N  N times: dlopen LIB1, allocate through it, dlclose; the
 *                         same with LIB2 (loaded where LIB1 was: other code, same addresses)
 *   cap_bt dlswap A B     dlopen A, apple() > apple_alloc > malloc(1601), dlclose; B the
 *                         same way (banana, 1602), then A again (1603): A and B are the same
 *                         code under other names (cap_bt_swap_a.c, _b.c); it prints the
 *                         address each was loaded at ("dlswap A1 B A2")
 *
 * Standard output is a fixed text.
 */
#include <alloca.h>
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
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

/* ---- stacks for a walk that reuses the last one ---- */

NOINLINE static void *rec(int d, size_t size)
{
	void *p = d > 0 ? rec(d - 1, size) : malloc(size);

	KEEP(p);
	return p;
}

static volatile int g_calls_a, g_calls_b;

/*
 * caller_a and caller_b have the same frame, so rec's frames land at the same addresses;
 * their counters keep the compiler from folding them into one function
 */
NOINLINE static void *caller_a(size_t size)
{
	void *p = rec(20, size); /* bt:caller_a */

	KEEP(p);
	g_calls_a++;
	return p;
}

NOINLINE static void *caller_b(size_t size)
{
	void *p = rec(20, size); /* bt:caller_b */

	KEEP(p);
	g_calls_b++;
	return p;
}

static int same_depth(long n)
{
	for (long i = 0; i < n; i++)
		free(i % 2 ? caller_b(1020) : caller_a(1020));
	printf("same_depth %ld done\n", n);
	return 0;
}

static jmp_buf g_jump;
static volatile int g_jump_on = 1; /* always: the compiler must not see jump_deep never return */

NOINLINE static void jump_deep(int d, int left)
{
	if (left > 0) {
		jump_deep(d, left - 1);
		__asm__ volatile("" : : : "memory");
		return;
	}
	g_sink[1] = malloc(1100 + (size_t)d);
	if (g_jump_on)
		longjmp(g_jump, 1);
}

static int jumps(long n)
{
	for (volatile long i = 0; i < n; i++) {
		if (!setjmp(g_jump))
			jump_deep((int)(i % 30), (int)(i % 30));
		free(g_sink[1]);
		free(site_a()); /* bt:jumps */
	}
	printf("longjmp %ld done\n", n);
	return 0;
}

static void on_signal(int sig)
{
	void *p = malloc(sig == SIGUSR1 ? 1200 : 1201);

	KEEP(p);
	free(p);
}

NOINLINE static void raiser(int sig)
{
	raise(sig); /* bt:raiser */
	__asm__ volatile("" : : : "memory");
}

static int signals(long n)
{
	static char alt[64 * 1024];
	struct sigaction sa = {0};
	stack_t ss = {.ss_sp = alt, .ss_size = sizeof(alt)};

	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_flags = SA_ONSTACK;
	if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGUSR2, &sa, NULL) != 0)
		return 1;
	for (long i = 0; i < n; i++) {
		raiser(SIGUSR1);
		free(rec(3, 1202));
		raiser(SIGUSR2);
	}
	printf("signal %ld done\n", n);
	return 0;
}

void *cap_bt_fp_through(void *(*cb)(size_t), size_t n);
void *cap_bt_fp_alloc(size_t n);
void *cap_bt_nofp_through(void *(*cb)(size_t), size_t n);
void *cap_bt_nofp_alloc(size_t n);

/*
 * A 64-byte aligned local and a frame sized at run time: the function realigns its stack
 * through a saved pointer (its CFI: CFA = the word at rbp - 8, rbp saved at rbp)
 */
NOINLINE static void *realigned(size_t n)
{
	char buf[64] __attribute__((aligned(64)));
	char *var = alloca(n % 100 + 1);
	void *p;

	KEEP(buf);
	KEEP(var);
	p = malloc(n + (size_t)(((uintptr_t)buf & 63) != 0)); /* bt:realigned */
	KEEP(p);
	return p;
}

static int fplib(long n)
{
	for (long i = 0; i < n; i++) {
		free(cap_bt_nofp_through(cap_bt_fp_alloc, 1300));
		free(cap_bt_fp_through(cap_bt_nofp_alloc, 1301));
		free(realigned(1302));
	}
	printf("fplib %ld done\n", n);
	return 0;
}

static int deep(int d)
{
	free(rec(d, 1020));
	printf("deep %d done\n", d);
	return 0;
}

static volatile int g_mixed_depth;

NOINLINE static void *rec_mixed(int d, size_t size)
{
	void *p = d > 0 ? rec_mixed(d - 1, size) : malloc(size);

	KEEP(p);
	g_mixed_depth = d; /* not rec's code: not folded into it */
	return p;
}

NOINLINE static void *mixed_a(int d)
{
	void *p = rec_mixed(d, 1400 + (size_t)d); /* bt:mixed_a */

	KEEP(p);
	return p;
}

NOINLINE static void *mixed_b(int d)
{
	void *p = rec_mixed(d, 1450 + (size_t)d); /* bt:mixed_b */

	KEEP(p);
	return p;
}

static int mixed(long n)
{
	uint32_t x = 12345;

	for (long i = 0; i < n; i++) {
		int d;

		x = x * 1103515245u + 12345u;
		d = (int)((x >> 16) % 40);
		free((x >> 8) & 1 ? mixed_b(d) : mixed_a(d));
	}
	printf("mixed %ld done\n", n);
	return 0;
}

static int dlcycle(const char *lib1, const char *lib2, long n)
{
	for (long i = 0; i < 2 * n; i++) {
		void *h = dlopen(i % 2 ? lib2 : lib1, RTLD_NOW | RTLD_LOCAL);
		void *(*alloc)(size_t);

		if (!h) {
			fprintf(stderr, "cap_bt: %s\n", dlerror());
			return 1;
		}
		*(void **)&alloc = dlsym(h, "plugin_alloc");
		if (!alloc)
			return 1;
		free(alloc(1500 + (size_t)(i % 2)));
		dlclose(h);
	}
	printf("dlcycle %ld done\n", n);
	return 0;
}

static int dlswap(const char *a, const char *b)
{
	const char *const libs[3] = {a, b, a}, *const syms[3] = {"apple", "banana", "apple"};

	printf("dlswap");
	for (int i = 0; i < 3; i++) {
		void *h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
		void *(*fn)(size_t);
		Dl_info di;

		if (!h) {
			fprintf(stderr, "cap_bt: %s\n", dlerror());
			return 1;
		}
		*(void **)&fn = dlsym(h, syms[i]);
		if (!fn || !dladdr(*(void **)&fn, &di))
			return 1;
		free(fn(1601 + (size_t)i)); /* bt:dlswap */
		printf(" %p", di.dli_fbase);
		dlclose(h);
	}
	printf("\n");
	return 0;
}

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
	if (!strcmp(mode, "same_depth"))
		return same_depth(argc > 2 ? atol(argv[2]) : 100);
	if (!strcmp(mode, "longjmp"))
		return jumps(argc > 2 ? atol(argv[2]) : 100);
	if (!strcmp(mode, "signal"))
		return signals(argc > 2 ? atol(argv[2]) : 10);
	if (!strcmp(mode, "fplib"))
		return fplib(argc > 2 ? atol(argv[2]) : 10);
	if (!strcmp(mode, "deep"))
		return deep(argc > 2 ? atoi(argv[2]) : 100);
	if (!strcmp(mode, "mixed"))
		return mixed(argc > 2 ? atol(argv[2]) : 1000);
	if (!strcmp(mode, "dlcycle") && argc > 4)
		return dlcycle(argv[2], argv[3], atol(argv[4]));
	if (!strcmp(mode, "dlswap") && argc > 3)
		return dlswap(argv[2], argv[3]);
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
