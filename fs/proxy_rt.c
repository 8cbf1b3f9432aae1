/*
 * The runtime of every generated proxy (replay/proxy.c of a trace's tree, fs/vreplay.c):
 * copied at the head of each proxy.c after the generator's #defines (PROXY_MPI, PROXY_TIMED,
 * PROXY_REC_IMPL), followed by the generated code, which defines the functions declared
 * below. It holds what does not depend on the trace: options, the busy wait that stands for
 * the program's computation, per-occurrence value sequences, phases and zones through the
 * capture API found at run time, allocation ids, descriptors, paths under the scratch
 * directory, threads, and for MPI the handle tables, ranks and buffers. Its own work goes
 * through raw system calls (syscall(2)): a proxy recorded again must show the program's
 * calls only, never its own. This file is not compiled into tracefs; tests build proxies.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
/* a proxy uses the helpers its trace needs: the others are not a warning */
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"
#if defined(__GNUC__) && !defined(__clang__)
/* GCC 12 reads MPICH's attributes as if MPI_STATUSES_IGNORE were an array too small */
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <locale.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>
#if PROXY_MPI
#include <mpi.h>
#endif

/* ---- what the generated code defines ---- */

/* A per-occurrence value: constant, a line, a line per period, or a table of runs. */
enum { RT_CONST, RT_LIN, RT_PLIN, RT_TAB };

struct rt_seq {
	int64_t a, b, c; /* CONST a; LIN a + b i; PLIN a + b (i mod m) + c (i / m) */
	uint64_t m;
	const int64_t *tab; /* TAB: n pairs (value, run length), cycled */
	uint32_t n;
	uint8_t kind;
};

/* Before event @at of a stream: end the innermost phase (@scope 0) or begin @name. */
struct rt_phase {
	uint64_t at;
	const char *name;
	unsigned int scope;
};

/* One stream (rank, thread) of the trace: its code, values, phases and first zones. */
struct rt_stream {
	uint32_t rank, thread;
	void (*run)(void);
	const struct rt_seq *seq;
	uint32_t n_slots;
	const struct rt_phase *ph;
	uint32_t n_ph;
	uint32_t start_zones; /* zone list begun before the first event */
	uint64_t n_events;
	int created; /* 1: a pthread_create event of its rank starts it */
};

static const struct rt_stream *rt_stream_table(uint32_t *n);
static const char *const *rt_zone_list(uint32_t id);
/* Files the program read but did not create: made under the scratch directory. */
static void rt_setup_files(uint32_t rank);
/* The allocations a trace without allocation events names buffers by, in id order. */
static void rt_setup_allocs(uint32_t rank);
#if PROXY_MPI
static void rt_mpi_tables_init(void);
#endif

/* ---- options and messages ---- */

static int rt_compute = 1;
static uint64_t rt_gate_wait_ns = 10000000000ull; /* steering: a send waits this long at most */
static double rt_scale = 1.0;
static int rt_orig_paths;
static char rt_dir[2048] = "proxy.d";
static uint32_t rt_rank;

static void rt_write2(const char *s, size_t n)
{
	while (n > 0) {
		long w = syscall(SYS_write, 2, s, n);

		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static void rt_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void rt_say(const char *fmt, ...)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "proxy: rank %u: ", rt_rank);
	va_list ap;

	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	rt_write2(buf, (size_t)n);
}

static void rt_unmem(void *p, size_t n)
{
	syscall(SYS_munmap, p, n ? n : 1);
}

/* Memory of the proxy's own, never through the allocator a recording watches. */
static void *rt_mem(size_t n)
{
	long p = syscall(SYS_mmap, NULL, n ? n : 1, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == -1) {
		rt_say("out of memory (%zu bytes)", n);
		exit(1);
	}
	return (void *)p;
}

static void rt_options(int *argc, char **argv)
{
	const char *e;
	int out = 1;

	if ((e = getenv("PROXY_DIR")) && *e)
		snprintf(rt_dir, sizeof(rt_dir), "%s", e);
	if ((e = getenv("PROXY_COMPUTE")) && !strcmp(e, "0"))
		rt_compute = 0;
	if ((e = getenv("PROXY_COMPUTE_SCALE")) && *e)
		rt_scale = atof(e);
	if ((e = getenv("PROXY_ORIGINAL_PATHS")) && !strcmp(e, "1"))
		rt_orig_paths = 1;
	if ((e = getenv("PROXY_STEER_WAIT_MS")) && *e)
		rt_gate_wait_ns = (uint64_t)atoll(e) * 1000000u;
	for (int i = 1; i < *argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--no-compute"))
			rt_compute = 0;
		else if (!strncmp(a, "--compute-scale=", 16))
			rt_scale = atof(a + 16);
		else if (!strcmp(a, "--original-paths"))
			rt_orig_paths = 1;
		else if (!strncmp(a, "--dir=", 6))
			snprintf(rt_dir, sizeof(rt_dir), "%s", a + 6);
		else if (a[0] != '-')
			snprintf(rt_dir, sizeof(rt_dir), "%s", a);
		else
			argv[out++] = argv[i]; /* MPI's own options, left for MPI_Init */
	}
	*argc = out;
	if (rt_scale < 0)
		rt_scale = 0;
}

/*
 * A thread's own state, in memory of the proxy's own behind a pthread key: thread-local
 * variables would give the proxy a TLS block the program may not have had, and a thread's
 * start and end allocate per TLS block, inside pthread_create and pthread_join, where a
 * recording sees it.
 */
struct rt_ctx;

struct rt_tls {
	struct rt_ctx *S; /* the stream this thread replays */
	uint64_t mark;	  /* when its previous call ended (ns) */
	char *scratch;	  /* rt_scratch_get() */
	size_t scratch_cap;
	int held[64], nheld, want; /* rt_fd_prep() */
	char ring[4][4200];	   /* rt_path() */
	unsigned int next;
	char line[4096]; /* rt_line() */
	wchar_t wline[1024]; /* rt_wfiller() */
	struct stat st;
	struct statx stx;
	struct statfs sfs;
	char link[4096];    /* rt_readlink(), rt_getcwd() */
	unsigned int ms_at; /* rt_ms() */
	char ms[1 << 16];
};

static pthread_key_t rt_key;
/* Until the proxy starts a thread, the main thread's state needs no key (a fast path). */
static struct rt_tls *rt_main_tls;
static int rt_threaded;

static struct rt_tls *rt_T(void)
{
	struct rt_tls *t;

	if (!rt_threaded && rt_main_tls)
		return rt_main_tls;
	t = pthread_getspecific(rt_key);
	if (!t) {
		t = rt_mem(sizeof(*t));
		pthread_setspecific(rt_key, t);
		if (!rt_threaded)
			rt_main_tls = t;
	}
	return t;
}

/* Locks that only threads need. */
static inline void rt_lock(pthread_mutex_t *m)
{
	if (rt_threaded)
		pthread_mutex_lock(m);
}

static inline void rt_unlock(pthread_mutex_t *m)
{
	if (rt_threaded)
		pthread_mutex_unlock(m);
}

/* ---- the computation between calls: a busy wait of the recorded gap ---- */

static inline uint64_t rt_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/*
 * Wait until @ns (scaled) after the previous call's end: the proxy's own work since then
 * counts as part of the gap, so it does not add up over millions of calls.
 */
static void rt_gap(int64_t ns)
{
	uint64_t until;

	if (!rt_compute || ns <= 0)
		return;
	until = rt_T()->mark + (uint64_t)((double)ns * rt_scale);
	while (rt_now() < until)
		;
}

static inline void rt_done(void)
{
	if (rt_compute)
		rt_T()->mark = rt_now();
}

/* ---- streams, values, phases, zones ---- */

struct rt_cur {
	uint64_t i;    /* occurrences read */
	uint64_t left; /* TAB: of the current run */
	uint32_t k;    /* TAB: the current run */
};

struct rt_ctx {
	const struct rt_stream *st;
	struct rt_cur *cur;
	uint64_t ev;
	uint32_t ph;
};

#define rt_S (rt_T()->S)

/* The next occurrence of value slot @s of the running stream. */
static int64_t rt_v(uint32_t s)
{
	struct rt_ctx *x = rt_S;
	const struct rt_seq *q = &x->st->seq[s];
	struct rt_cur *c = &x->cur[s];
	uint64_t i = c->i++;

	switch (q->kind) {
	case RT_CONST:
		return q->a;
	case RT_LIN: /* modulo 2^64, as the generator found the line */
		return (int64_t)((uint64_t)q->a + (uint64_t)q->b * i);
	case RT_PLIN:
		return (int64_t)((uint64_t)q->a + (uint64_t)q->b * (i % q->m) +
				 (uint64_t)q->c * (i / q->m));
	default:
		if (q->n == 0)
			return 0;
		if (c->left == 0) {
			c->k = i ? (c->k + 1) % q->n : 0;
			c->left = (uint64_t)q->tab[2 * c->k + 1];
		}
		c->left--;
		return q->tab[2 * c->k];
	}
}

/* The capture API of libtfscapture.so when it is loaded (include/tfs/capture.h). */
static struct {
	unsigned int *mask;
	void (*zone_begin)(const char *);
	void (*zone_end)(void);
	void (*phase_begin)(const char *, unsigned int);
	void (*phase_end)(void);
	void (*mark)(const char *);
	void (*counter)(const char *, int64_t);
	void (*thread_name)(const char *);
	void (*mem_access)(const void *, size_t, int, const void *);
	void (*pause)(void);
	void (*resume)(void);
} rt_cap;

/* The proxy's own work (its MPI bookkeeping, its stand-in streams): not the program's calls. */
static inline void rt_own(void)
{
	if (rt_cap.pause)
		rt_cap.pause();
}

static inline void rt_own_end(void)
{
	if (rt_cap.resume)
		rt_cap.resume();
}

#define RT_ZONES 0x2u
#define RT_MEM 0x4u

static void rt_capture_init(void)
{
	rt_cap.mask = dlsym(RTLD_DEFAULT, "tfs_capture_mask_");
	*(void **)&rt_cap.zone_begin = dlsym(RTLD_DEFAULT, "tfs_cap_zone_begin");
	*(void **)&rt_cap.zone_end = dlsym(RTLD_DEFAULT, "tfs_cap_zone_end");
	*(void **)&rt_cap.phase_begin = dlsym(RTLD_DEFAULT, "tfs_cap_phase_begin");
	*(void **)&rt_cap.phase_end = dlsym(RTLD_DEFAULT, "tfs_cap_phase_end");
	*(void **)&rt_cap.mark = dlsym(RTLD_DEFAULT, "tfs_cap_mark");
	*(void **)&rt_cap.counter = dlsym(RTLD_DEFAULT, "tfs_cap_counter");
	*(void **)&rt_cap.thread_name = dlsym(RTLD_DEFAULT, "tfs_cap_thread_name");
	*(void **)&rt_cap.mem_access = dlsym(RTLD_DEFAULT, "tfs_cap_mem_access");
	*(void **)&rt_cap.pause = dlsym(RTLD_DEFAULT, "tfs_capture_pause");
	*(void **)&rt_cap.resume = dlsym(RTLD_DEFAULT, "tfs_capture_resume");
}

static inline int rt_cap_on(unsigned int what)
{
	return rt_cap.mask && (*rt_cap.mask & what);
}

static void rt_zone_begins(uint32_t list)
{
	const char *const *z = rt_zone_list(list);

	for (; z && *z; z++)
		if (rt_cap_on(RT_ZONES) && rt_cap.zone_begin)
			rt_cap.zone_begin(*z);
}

static void rt_zone_end(void)
{
	if (rt_cap_on(RT_ZONES) && rt_cap.zone_end)
		rt_cap.zone_end();
}

static void rt_mark_(const char *m)
{
	if (rt_cap_on(RT_ZONES) && rt_cap.mark)
		rt_cap.mark(m);
}

static void rt_counter(const char *name, int64_t v)
{
	if (rt_cap_on(RT_ZONES) && rt_cap.counter)
		rt_cap.counter(name, v);
}

static void rt_thread_name(const char *name)
{
	if (rt_cap_on(RT_ZONES) && rt_cap.thread_name)
		rt_cap.thread_name(name);
}

/* Memory accesses: each recorded site gets an address of its own here. */
static char rt_sites[1 << 16];

static void rt_mem_access(int64_t addr, int64_t size, int is_store, uint64_t site)
{
	if (rt_cap_on(RT_MEM) && rt_cap.mem_access)
		rt_cap.mem_access((const void *)(uintptr_t)addr, (size_t)size, is_store,
				  &rt_sites[site % sizeof(rt_sites)]);
}

/* The phase actions due before the stream's next event. */
static void rt_phases(struct rt_ctx *x, uint64_t until)
{
	const struct rt_stream *st = x->st;

	while (x->ph < st->n_ph && st->ph[x->ph].at <= until) {
		const struct rt_phase *p = &st->ph[x->ph++];

		if (!rt_cap.mask || !*rt_cap.mask)
			continue;
		if (p->scope && rt_cap.phase_begin)
			rt_cap.phase_begin(p->name, p->scope);
		else if (!p->scope && rt_cap.phase_end)
			rt_cap.phase_end();
	}
}

/* Every call starts here: phases due, then the computation before it (timed traces). */
static inline void rt_pre(uint32_t s)
{
	struct rt_ctx *x = rt_S;

	if (x->ph < x->st->n_ph && x->st->ph[x->ph].at <= x->ev)
		rt_phases(x, x->ev);
	x->ev++;
#if PROXY_TIMED
	rt_gap(rt_v(s));
#else
	(void)s;
#endif
}

static void rt_run(const struct rt_stream *st)
{
	struct rt_ctx x = {.st = st};

	x.cur = rt_mem(((size_t)st->n_slots + 1) * sizeof(*x.cur));
	rt_S = &x;
	rt_T()->mark = rt_now();
	rt_zone_begins(st->start_zones);
	st->run();
	rt_phases(&x, UINT64_MAX);
	rt_S = NULL;
	rt_unmem(x.cur, ((size_t)st->n_slots + 1) * sizeof(*x.cur));
}

/* ---- threads ---- */

#define RT_MAX_THREADS 4096
static pthread_t rt_tid[RT_MAX_THREADS];
static unsigned char rt_started[RT_MAX_THREADS];

static void *rt_thread_main(void *arg)
{
	rt_run(arg);
	return NULL;
}

static const struct rt_stream *rt_find_stream(uint32_t rank, uint32_t thread)
{
	uint32_t n;
	const struct rt_stream *t = rt_stream_table(&n);

	for (uint32_t i = 0; i < n; i++)
		if (t[i].rank == rank && t[i].thread == thread)
			return &t[i];
	return NULL;
}

static void rt_thread_create(uint64_t k)
{
	const struct rt_stream *st = rt_find_stream(rt_rank, (uint32_t)k);

	if (k >= RT_MAX_THREADS || !st) {
		rt_say("thread %llu: not in the trace, not started", (unsigned long long)k);
		return;
	}
	rt_T();
	rt_threaded = 1; /* from now on each thread finds its state through the key */
	if (pthread_create(&rt_tid[k], NULL, rt_thread_main, (void *)st) == 0)
		rt_started[k] = 1;
}

static void rt_thread_join(uint64_t k)
{
	if (k < RT_MAX_THREADS && rt_started[k]) {
		pthread_join(rt_tid[k], NULL);
		rt_started[k] = 0;
	}
}

/* ---- allocation ids ---- */

static pthread_mutex_t rt_alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rt_aent {
	uint64_t id;
	void *p;
} * rt_atab;
static size_t rt_acap, rt_an;

static struct rt_aent *rt_aslot(uint64_t id)
{
	size_t i = (size_t)(id * 0x9e3779b97f4a7c15u) & (rt_acap - 1);

	while (rt_atab[i].id && rt_atab[i].id != id)
		i = (i + 1) & (rt_acap - 1);
	return &rt_atab[i];
}

static void rt_agrow(void)
{
	struct rt_aent *old = rt_atab;
	size_t cap = rt_acap;

	rt_acap = cap ? 2 * cap : 1024;
	rt_atab = rt_mem(rt_acap * sizeof(*rt_atab));
	rt_an = 0;
	for (size_t i = 0; i < cap; i++)
		if (old[i].id && old[i].p) {
			*rt_aslot(old[i].id) = old[i];
			rt_an++;
		}
	if (old)
		rt_unmem(old, cap * sizeof(*old));
}

/* The block the program knew as allocation @id is @p in this run. */
static void *rt_bind(uint64_t id, void *p)
{
	struct rt_aent *e;

	if (!id)
		return p;
	rt_lock(&rt_alloc_lock);
	if (2 * (rt_an + 1) > rt_acap)
		rt_agrow();
	e = rt_aslot(id);
	if (!e->id)
		rt_an++;
	e->id = id;
	e->p = p;
	rt_unlock(&rt_alloc_lock);
	return p;
}

/*
 * The block of allocation @id, NULL when this run has none. The compiler must not see
 * through it: free(NULL) is a call the program made, and it is recorded.
 */
static void *rt_ptr(uint64_t id)
{
	void *p = NULL;

	if (id) {
		rt_lock(&rt_alloc_lock);
		if (rt_acap)
			p = rt_aslot(id)->p;
		rt_unlock(&rt_alloc_lock);
	}
	__asm__ volatile("" : "+r"(p));
	return p;
}

/* Allocation @id is gone (its slot keeps the id with no block). */
static void rt_unbind(uint64_t id)
{
	if (!id)
		return;
	rt_lock(&rt_alloc_lock);
	if (rt_acap && rt_aslot(id)->id == id)
		rt_aslot(id)->p = NULL;
	rt_unlock(&rt_alloc_lock);
}

static void *rt_take(uint64_t id)
{
	void *p = rt_ptr(id);

	rt_unbind(id);
	return p;
}

/*
 * Mappings: the program's address of each one, to find it again at munmap. Threads map and
 * unmap at once (their replays keep no order between them), so the table is under a lock,
 * and one address may stand for two mappings at a time: one thread's, unmapped in the
 * program before another's took the address, is still here. An unmapping takes its own
 * thread's mapping first, takes it out of the table before the memory goes, and never
 * unmaps past the end of that mapping: the proxy's own memory may lie beyond it.
 */
#define RT_MAPS 1024
static pthread_mutex_t rt_map_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uint64_t rec, len;
	void *p;
	const void *owner; /* the thread that made it (its rt_T()) */
} rt_maps[RT_MAPS];

static void *rt_map_bind(uint64_t rec, uint64_t len, void *p)
{
	const void *me = rt_T();

	if (p == MAP_FAILED)
		return p;
	rt_lock(&rt_map_lock);
	for (int i = 0; i < RT_MAPS; i++) {
		if (!rt_maps[i].p) {
			rt_maps[i].rec = rec;
			rt_maps[i].len = len;
			rt_maps[i].p = p;
			rt_maps[i].owner = me;
			break;
		}
	}
	rt_unlock(&rt_map_lock);
	return p;
}

/* The entry of the mapping holding the program's address @rec, the thread's own first, or -1. Locked. */
static int rt_map_find(uint64_t rec)
{
	const void *me = rt_T();
	int any = -1;

	for (int i = 0; i < RT_MAPS; i++) {
		if (!rt_maps[i].p || rec < rt_maps[i].rec || rec - rt_maps[i].rec >= rt_maps[i].len)
			continue;
		if (rt_maps[i].owner == me)
			return i;
		if (any < 0)
			any = i;
	}
	return any;
}

/* The address here of the program's address @rec inside a mapping (NULL: none). */
static void *rt_map_addr(uint64_t rec)
{
	void *p = NULL;
	int i;

	rt_lock(&rt_map_lock);
	i = rt_map_find(rec);
	if (i >= 0)
		p = (char *)rt_maps[i].p + (rec - rt_maps[i].rec);
	rt_unlock(&rt_map_lock);
	return p;
}

/*
 * The program's munmap(@rec, @len): of this run's mapping at the same place, at most to its
 * end (none: a call on no address, which fails or unmaps nothing, as the program's did).
 */
static int rt_munmap(uint64_t rec, uint64_t len)
{
	void *p = NULL;
	uint64_t n = len;
	int i;

	rt_lock(&rt_map_lock);
	i = rt_map_find(rec);
	if (i >= 0) {
		p = (char *)rt_maps[i].p + (rec - rt_maps[i].rec);
		if (n > rt_maps[i].len - (rec - rt_maps[i].rec))
			n = rt_maps[i].len - (rec - rt_maps[i].rec);
		if (rt_maps[i].rec == rec && rt_maps[i].len <= len)
			rt_maps[i].p = NULL;
	}
	rt_unlock(&rt_map_lock);
	return munmap(p, (size_t)n);
}

/*
 * The program's mremap(@rec, @old_len, @new_len, @flags) that returned @ret: of this run's
 * mapping at the same place, moved wherever this kernel likes (MREMAP_FIXED's address was the
 * program's), and found again at @ret after. The whole mapping's entry follows it when the
 * call started at its start and took it all; else the part moved is a mapping of its own.
 */
static void *rt_mremap(uint64_t rec, uint64_t old_len, uint64_t new_len, int flags, uint64_t ret)
{
	void *p = NULL, *q;
	int i;

	if (flags & MREMAP_FIXED)
		flags = (flags & ~MREMAP_FIXED) | MREMAP_MAYMOVE;
	rt_lock(&rt_map_lock);
	i = rt_map_find(rec);
	if (i >= 0)
		p = (char *)rt_maps[i].p + (rec - rt_maps[i].rec);
	rt_unlock(&rt_map_lock);
	q = mremap(p, (size_t)old_len, (size_t)new_len, flags);
	if (q == MAP_FAILED)
		return q;
	rt_lock(&rt_map_lock);
	if (i >= 0 && rt_maps[i].p == p && rt_maps[i].len <= old_len) {
		rt_maps[i].rec = ret;
		rt_maps[i].len = new_len;
		rt_maps[i].p = q;
		rt_unlock(&rt_map_lock);
		return q;
	}
	rt_unlock(&rt_map_lock);
	return rt_map_bind(ret, new_len, q);
}

/* A buffer of the program: in its allocation when this run has it, else scratch memory. */
static void *rt_scratch_get(uint64_t n)
{
	struct rt_tls *t = rt_T();

	if (n + 64 > t->scratch_cap) {
		if (t->scratch)
			rt_unmem(t->scratch, t->scratch_cap);
		t->scratch_cap = (size_t)(n + 64 > 65536 ? n + 64 : 65536);
		t->scratch = rt_mem(t->scratch_cap);
	}
	return t->scratch;
}

static void *rt_buf(uint64_t id, uint64_t off, int64_t n)
{
	char *p = id ? rt_ptr(id) : NULL;
	const uint64_t len = n > 0 ? (uint64_t)n : 0;

	/* the block holds the call's bytes: a readv into several buffers names only the first
	   (bound blocks all come from the malloc family: their size is malloc_usable_size's) */
	if (p && off <= malloc_usable_size(p) && len <= malloc_usable_size(p) - off)
		return p + off;
	return rt_scratch_get(len);
}

/* ---- descriptors and paths ---- */

/* Descriptors are the program's numbers: fd_map[x] only where this run got another one. */
#define RT_FDS 4096
static int rt_fdmap[RT_FDS];
#define rt_held (rt_T()->held)
#define rt_nheld (rt_T()->nheld)
#define rt_want (rt_T()->want)

static int rt_fd_open(int fd)
{
	return syscall(SYS_fcntl, fd, F_GETFD) != -1;
}

/*
 * A descriptor the program met before anything opened it (an fd_file event): the file id
 * + 1 of the scratch file that stands for it, made at its first use (rt_fd()), not when
 * met, because the call that makes that very descriptor often comes next (a pipe, a
 * socket): made at once, the scratch file took its number.
 */
static uint64_t rt_fdpend[RT_FDS];

static void rt_fd_make(int fd, uint64_t file)
{
	char path[4200];
	int f;

	snprintf(path, sizeof(path), "%s/file%" PRIu64, rt_dir, file);
	f = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (f >= 0 && f != fd) {
		syscall(SYS_dup3, f, fd, 0);
		syscall(SYS_close, f);
	}
}

static int rt_fd(int64_t rec)
{
	if (rec < 0 || rec >= RT_FDS)
		return (int)rec;
	if (rt_fdpend[rec]) {
		/* not when a call made it meanwhile without the proxy knowing (dup2 onto it) */
		if (!rt_fd_open((int)rec))
			rt_fd_make((int)rec, rt_fdpend[rec] - 1);
		rt_fdpend[rec] = 0;
	}
	return rt_fdmap[rec] ? rt_fdmap[rec] - 1 : (int)rec;
}

/* Make @want the lowest free descriptor for the next call that opens one. */
static void rt_fd_prep(int64_t want)
{
	int dn;

	rt_nheld = 0;
	rt_want = (int)want;
	if (want < 0 || want >= RT_FDS || rt_fd_open((int)want))
		return;
	rt_fdpend[want] = 0; /* this call makes it */
	dn = (int)syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC);
	for (int fd = 0; dn >= 0 && fd < want && rt_nheld < 63; fd++) {
		if (fd == dn || rt_fd_open(fd))
			continue;
		if (syscall(SYS_dup3, dn, fd, O_CLOEXEC) == fd)
			rt_held[rt_nheld++] = fd;
	}
	if (dn >= 0 && dn != want)
		rt_held[rt_nheld++] = dn;
	else if (dn == want)
		syscall(SYS_close, dn);
}

/* After the call: release the place holders, note where the descriptor really went. */
static long rt_fd_done(long got)
{
	for (int i = 0; i < rt_nheld; i++)
		syscall(SYS_close, rt_held[i]);
	rt_nheld = 0;
	if (rt_want >= 0 && rt_want < RT_FDS && got >= 0)
		rt_fdmap[rt_want] = got == rt_want ? 0 : (int)got + 1;
	return got;
}

/* The program's descriptor @fd was met before anything opened it: a scratch file, the
 * file id @file's, stands for it from its first use on. */
static void rt_fd_exists(int fd, uint64_t file)
{
	if (fd < 0 || rt_fd_open(fd))
		return;
	if (fd < RT_FDS)
		rt_fdpend[fd] = file + 1;
	else
		rt_fd_make(fd, file);
}

/* The program read its standard input: a scratch file of @size bytes stands for it. */
static void rt_stdin(int64_t size)
{
	char path[4200];
	int f;

	snprintf(path, sizeof(path), "%s/stdin.in", rt_dir);
	f = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (f < 0)
		return;
	if (size > 0)
		syscall(SYS_ftruncate, f, size);
	syscall(SYS_dup3, f, 0, 0);
	syscall(SYS_close, f);
}

static void rt_mkdirs(const char *path)
{
	char buf[4200];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *s = buf + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		syscall(SYS_mkdirat, AT_FDCWD, buf, 0755);
		*s = '/';
	}
}

/* The devices the proxy uses as they are: they hold no one's data, and none of them waits. */
static int rt_plain_device(const char *p)
{
	static const char *const dev[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
					  "/dev/urandom"};

	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		if (!strcmp(p, dev[i]))
			return 1;
	return 0;
}

/* The kernel's own files, which the proxy reads as they are (never writes). */
static int rt_kernel_path(const char *p)
{
	return !strncmp(p, "/proc/", 6) || !strcmp(p, "/proc") || !strncmp(p, "/sys/", 5) ||
	       !strcmp(p, "/sys");
}

/* @p's components added to the path @v (from "/", @cap bytes), "." and ".." taken as
   names say, never above "/"; a path too long for @v is cut, whole components only */
static void rt_norm(char *v, size_t cap, const char *p)
{
	size_t n = strlen(v);

	while (*p) {
		const char *e = strchr(p, '/');
		const size_t k = e ? (size_t)(e - p) : strlen(p);

		if (k == 2 && p[0] == '.' && p[1] == '.') {
			while (n > 1 && v[n - 1] != '/')
				n--;
			if (n > 1)
				n--;
		} else if (k && !(k == 1 && p[0] == '.') && n + 1 + k < cap) {
			if (n > 1)
				v[n++] = '/';
			memcpy(v + n, p, k);
			n += k;
		}
		v[n] = '\0';
		p += k + (e != NULL);
	}
}

/*
 * Where the proxy's call finds the program's path @p, relative to this run's directory
 * @dirfd (AT_FDCWD: the current one); @write: the call may change what it names.
 *
 * The scratch directory stands for the program's "/": an absolute path lands under it
 * (/tmp/x as DIR/tmp/x), and a relative one is taken from the directory it starts at,
 * which is under the scratch directory unless the program went into one the proxy reads
 * as it is. "." and ".." are taken by name, never above the scratch directory, so no path
 * leads out of it. Used as they are: the harmless devices (rt_plain_device), and the
 * kernel's files under /proc and /sys for reading. Everything else of /dev (/dev/shm holds
 * files, a tty waits for input, a disk holds data) is a file under the scratch directory
 * like any other.
 */
static const char *rt_map(int dirfd, const char *p, int write)
{
	struct rt_tls *t = rt_T();
	const size_t n = strlen(rt_dir);
	char base[sizeof(t->ring[0])], *buf;

	if (rt_orig_paths || rt_plain_device(p))
		return p;
	if (p[0] == '/') {
		if (!write && rt_kernel_path(p))
			return p;
		strcpy(base, "/");
	} else {
		long got;

		if (dirfd == AT_FDCWD) {
			got = syscall(SYS_getcwd, base, sizeof(base));
		} else {
			char link[64];

			snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
			got = syscall(SYS_readlinkat, AT_FDCWD, link, base, sizeof(base) - 1);
			if (got > 0)
				base[got] = '\0';
		}
		if (got <= 0 || base[0] != '/')
			return p; /* no directory to start at: the call fails as the program's did */
		if (!strncmp(base, rt_dir, n) && (base[n] == '/' || base[n] == '\0'))
			memmove(base, base[n] ? base + n : "/", strlen(base[n] ? base + n : "/") + 1);
		else if (!write)
			return p; /* read from a directory the proxy reads as it is (/proc) */
		/* else a directory of the system written into: its place under the scratch one */
	}
	buf = t->ring[t->next++ % 4];
	rt_norm(base, sizeof(base) - n, p);
	/* a trailing "/" kept: it asks for a directory */
	snprintf(buf, sizeof(t->ring[0]), "%s%s%s", rt_dir,
			     strcmp(base, "/") ? base : "",
			     strcmp(base, "/") && p[0] && p[strlen(p) - 1] == '/' ? "/" : "");
	return buf;
}

/* rt_map() of a path the call only reads, or may write, from the program's @dirfd */
static const char *rt_path(const char *p)
{
	return rt_map(AT_FDCWD, p, 0);
}

static const char *rt_wpath(const char *p)
{
	return rt_map(AT_FDCWD, p, 1);
}

static int rt_dirfd(int64_t fd);

static const char *rt_path_at(int64_t dirfd, const char *p)
{
	return rt_map(rt_dirfd(dirfd), p, 0);
}

static const char *rt_wpath_at(int64_t dirfd, const char *p)
{
	return rt_map(rt_dirfd(dirfd), p, 1);
}

/* rt_map() of a path opened with @flags: written unless opened for reading alone */
static const char *rt_opath_at(int64_t dirfd, const char *p, int64_t flags)
{
	const int w = (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC)) != 0;

	return rt_map(rt_dirfd(dirfd), p, w);
}

/* The same for fopen's @mode: written unless "r" without "+" */
static const char *rt_fpath(const char *p, const char *mode)
{
	return rt_map(AT_FDCWD, p, mode[0] != 'r' || strchr(mode, '+') != NULL);
}

/*
 * What a symbolic link the program made at @linkpath (from @dirfd) points to: the place
 * rt_map() gives its @target, as an absolute path, so that a path through the link stays
 * in the scratch directory too.
 */
static const char *rt_link_target(int64_t dirfd, const char *linkpath, const char *target)
{
	struct rt_tls *t = rt_T();
	char *buf;
	const char *slash;

	if (target[0] == '/' || rt_orig_paths)
		return rt_map(AT_FDCWD, target, 1);
	/* relative to the link's directory */
	buf = t->ring[t->next++ % 4];
	slash = strrchr(linkpath, '/');
	snprintf(buf, sizeof(t->ring[0]), "%.*s%s%s", slash ? (int)(slash - linkpath) : 0,
		 linkpath, slash ? "/" : "", target);
	return rt_map(rt_dirfd(dirfd), buf, 1);
}

/* The directories above the program's path @p (a directory itself if @p ends in "/"),
   made under the scratch directory; nothing for a path used as it is */
static void rt_parent_dirs(const char *p)
{
	const char *q = rt_path(p);

	if (q == p && p[0] == '/')
		return;
	rt_mkdirs(q);
	if (p[0] && p[strlen(p) - 1] == '/')
		syscall(SYS_mkdirat, AT_FDCWD, q, 0755);
}

/* A file the program read without creating it: @size bytes under the scratch directory. */
static void rt_input_file(const char *p, int64_t size)
{
	const char *q = rt_path(p);

	if (q == p && p[0] == '/')
		return; /* used as it is: nothing to make */
	int f;

	rt_mkdirs(q);
	f = (int)syscall(SYS_openat, AT_FDCWD, q, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (f < 0)
		return;
	if (size > 0)
		syscall(SYS_ftruncate, f, size);
	syscall(SYS_close, f);
}

/* Which file each descriptor opened, to find a descriptor of a file again (mmap). */
static uint64_t rt_fdfile[RT_FDS];

static long rt_fd_file(uint64_t file, long fd)
{
	if (fd >= 0 && fd < RT_FDS)
		rt_fdfile[fd] = file + 1;
	return fd;
}

static void rt_fd_closed(int64_t fd)
{
	if (fd >= 0 && fd < RT_FDS) {
		rt_fdfile[fd] = 0;
		rt_fdmap[fd] = 0;
		rt_fdpend[fd] = 0;
	}
}

/* The program's descriptor @rec is this run's @got too (a pipe's other end). */
static void rt_fd_also(int64_t rec, int got)
{
	if (rec >= 0 && rec < RT_FDS && got >= 0) {
		rt_fdmap[rec] = got == rec ? 0 : got + 1;
		rt_fdpend[rec] = 0;
	}
}

/* Before close_range(@first, @last): the descriptors this run got elsewhere for the
 * program's ones in the range are closed too (unless the call only marks them close on
 * exec: CLOSE_RANGE_CLOEXEC), and the range's descriptors are forgotten. */
static void rt_close_range(uint64_t first, uint64_t last, uint64_t flags)
{
	if (flags & 4)
		return;
	for (uint64_t fd = first; fd <= last && fd < RT_FDS; fd++) {
		if (rt_fdmap[fd])
			syscall(SYS_close, rt_fdmap[fd] - 1);
		rt_fd_closed((int64_t)fd);
	}
}

static int rt_file_fd(uint64_t file)
{
	if (file == UINT64_C(0xffffffff))
		return -1;
	for (int fd = 0; fd < RT_FDS; fd++)
		if (rt_fdfile[fd] == file + 1)
			return rt_fd(fd);
	return -1;
}

static int rt_dirfd(int64_t fd)
{
	return fd == AT_FDCWD ? AT_FDCWD : rt_fd(fd);
}

static void *rt_map_hint(uint64_t addr, uint64_t flags)
{
	return (flags & MAP_FIXED) ? rt_map_addr(addr) : NULL;
}

static struct stat *rt_ms_stat(void)
{
	return &rt_T()->st;
}

static struct statx *rt_ms_statx(void)
{
	return &rt_T()->stx;
}

/*
 * A temporary file or directory of the program, made by mkostemp or mkdtemp as the program
 * made it, in the directory @path names, then renamed to @path itself (by a raw call: the
 * proxy's own work), so that what the program did with that name later finds it.
 */
static const char *rt_tmpl(const char *to, char *tmpl, size_t cap)
{
	const char *slash = strrchr(to, '/');

	snprintf(tmpl, cap, "%.*s/.tfs-XXXXXX", slash ? (int)(slash - to) : 1, slash ? to : ".");
	return tmpl;
}

static int rt_mkstemp(const char *path, int64_t flags, int64_t ret)
{
	const char *to = rt_wpath(path);
	char tmpl[4200];
	int fd;

	if (ret < 0) { /* the program's failed: so does this one (no XXXXXX), making nothing */
		tmpl[0] = '\0';
		return mkostemp(tmpl, (int)flags);
	}
	fd = mkostemp((char *)rt_tmpl(to, tmpl, sizeof(tmpl)), (int)flags);
	if (fd >= 0)
		syscall(SYS_renameat, AT_FDCWD, tmpl, AT_FDCWD, to);
	return fd;
}

static void rt_mkdtemp(const char *path, int64_t ret)
{
	const char *to = rt_wpath(path);
	char tmpl[4200];

	if (ret < 0) {
		tmpl[0] = '\0';
		mkdtemp(tmpl);
	} else if (mkdtemp((char *)rt_tmpl(to, tmpl, sizeof(tmpl)))) {
		syscall(SYS_renameat, AT_FDCWD, tmpl, AT_FDCWD, to);
	}
}

static struct statfs *rt_ms_statfs(void)
{
	return &rt_T()->sfs;
}

static void rt_readlink(int64_t dirfd, const char *path, int64_t bufsiz)
{
	struct rt_tls *t = rt_T();
	const size_t n =
	    bufsiz < 0 || (uint64_t)bufsiz > sizeof(t->link) ? sizeof(t->link) : (size_t)bufsiz;

	readlinkat(rt_dirfd(dirfd), rt_path_at(dirfd, path), t->link, n);
}

/* getcwd: the proxy's directory is longer than the program's, so a call that succeeded
   gets room for it; one that failed, the program's size */
static void rt_getcwd(int64_t size, int64_t ret)
{
	struct rt_tls *t = rt_T();
	size_t n = sizeof(t->link);

	if (ret != 0 && size > 0 && (uint64_t)size < n)
		n = (size_t)size;
	getcwd(t->link, n);
}

/* A time of utimensat as the trace has it: -1 ns for one not read, which the kernel
   refuses (EINVAL), so that a call that failed fails again rather than setting nothing */
static struct timespec rt_utime(int64_t sec, int64_t nsec)
{
	return (struct timespec){(time_t)sec, (long)nsec};
}

/* utimensat(@dirfd, @path) or, with @path NULL, futimens(@fd). */
static void rt_utimens(int64_t dirfd, const char *path, int64_t fd, int64_t as, int64_t ans,
		       int64_t ms, int64_t mns, int64_t flags)
{
	const struct timespec times[2] = {rt_utime(as, ans), rt_utime(ms, mns)};

	if (path)
		utimensat(rt_dirfd(dirfd), rt_wpath_at(dirfd, path), times, (int)flags);
	else
		futimens(rt_fd(fd), times);
}

static void rt_fcntl(int64_t fd, int64_t cmd, int64_t arg, int64_t ret)
{
	struct flock lk = {0};

	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		rt_fd_prep(ret);
		rt_fd_done(fcntl(rt_fd(fd), (int)cmd, (int)arg));
		break;
	case F_GETLK: /* traces before kind fcntl_lock: the lock itself was not recorded */
	case F_SETLK:
	case F_SETLKW:
	case F_OFD_GETLK:
	case F_OFD_SETLK:
	case F_OFD_SETLKW:
		lk.l_type = cmd == F_GETLK || cmd == F_OFD_GETLK ? F_WRLCK : F_UNLCK;
		if (cmd == F_SETLKW)
			cmd = F_SETLK;
		else if (cmd == F_OFD_SETLKW)
			cmd = F_OFD_SETLK;
		fcntl(rt_fd(fd), (int)cmd, &lk);
		break;
	default:
		fcntl(rt_fd(fd), (int)cmd, (long)arg);
		break;
	}
}

/*
 * Locks as the trace has them (type -1: the call failed before the kernel read its struct,
 * made again with none). A proxy never waits for a lock: a lock its other processes took in
 * another order could leave it waiting for ever. A blocking lock is first tried by a raw
 * call that does not wait (the proxy's own work, unrecorded): when it is taken, the
 * program's blocking call follows and returns at once, as this owner holds the lock; when
 * not, the call is made in the form that does not wait. A GETLK asks about a write lock.
 */
static void rt_fcntl_lock(int64_t fd, int64_t cmd, int64_t type, int64_t whence, int64_t start,
			  int64_t len)
{
	const int f = rt_fd(fd), c = (int)cmd;
	const int try = c == F_SETLKW ? F_SETLK : c == F_OFD_SETLKW ? F_OFD_SETLK : c;
	struct flock lk = {0};

	lk.l_type = (short)(c == F_GETLK || c == F_OFD_GETLK ? F_WRLCK : type);
	lk.l_whence = (short)whence;
	lk.l_start = (off_t)start;
	lk.l_len = (off_t)len;
	if (type < 0)
		fcntl(f, c, NULL);
	else if (try == c || syscall(SYS_fcntl, f, try, &lk) == 0)
		fcntl(f, c, &lk);
	else
		fcntl(f, try, &lk);
}

static void rt_flock(int64_t fd, int64_t op)
{
	const int f = rt_fd(fd), o = (int)op;

	if ((o & LOCK_NB) || (o & LOCK_UN) || syscall(SYS_flock, f, o | LOCK_NB) == 0)
		flock(f, o);
	else
		flock(f, o | LOCK_NB);
}

/* lockf's F_LOCK is a blocking write lock from the offset on, for @len bytes */
static void rt_lockf(int64_t fd, int64_t cmd, int64_t len)
{
	const int f = rt_fd(fd);
	struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_CUR, .l_len = (off_t)len};

	if (cmd != F_LOCK || syscall(SYS_fcntl, f, F_SETLK, &lk) == 0)
		lockf(f, (int)cmd, (off_t)len);
	else
		lockf(f, F_TLOCK, (off_t)len);
}

/*
 * popen for a stream of the program's: the proxy never runs the program's commands, so its
 * stream has the same direction on one that does nothing (reading from `true` finds the end
 * at once, `cat >/dev/null` takes what is written). A popen that failed fails again (an
 * empty type: EINVAL) without running anything.
 */
static FILE *rt_popen(int64_t ret, const char *type)
{
	if (ret < 0)
		return popen("true", "");
	return popen(strchr(type, 'w') ? "cat >/dev/null" : "true", type);
}

/* @n bytes of @buf cut into @cnt pieces (1 to 64) in @iov: @return how many */
static int rt_iov(struct iovec iov[64], int64_t cnt, void *buf, int64_t n)
{
	int64_t k = cnt < 1 ? 1 : cnt > 64 ? 64 : cnt, each = n > 0 ? n / k : 0;

	for (int64_t i = 0; i < k; i++) {
		iov[i].iov_base = (char *)buf + i * each;
		iov[i].iov_len = (size_t)(i + 1 < k ? each : (n > 0 ? n : 0) - i * each);
	}
	return (int)k;
}

/* readv/writev of @n bytes in @cnt pieces of one buffer. */
static void rt_rwv(int out, int64_t fd, int64_t cnt, void *buf, int64_t n)
{
	struct iovec iov[64];
	const int k = rt_iov(iov, cnt, buf, n);

	if (out)
		writev(rt_fd(fd), iov, k);
	else
		readv(rt_fd(fd), iov, k);
}

/* preadv2/pwritev2 at @off (-1: from the descriptor's offset) with @flags (RWF_*). */
static void rt_prwv(int out, int64_t fd, int64_t cnt, void *buf, int64_t n, int64_t off,
		    int64_t flags)
{
	struct iovec iov[64];
	const int k = rt_iov(iov, cnt, buf, n);

	if (out)
		pwritev2(rt_fd(fd), iov, k, (off_t)off, (int)flags);
	else
		preadv2(rt_fd(fd), iov, k, (off_t)off, (int)flags);
}

static FILE *rt_files[RT_FDS];
static DIR *rt_dirs[RT_FDS];

static FILE *rt_file(int64_t fd)
{
	if (fd == 0)
		return stdin;
	if (fd == 1)
		return stdout;
	if (fd == 2)
		return stderr;
	if (fd < 0 || fd >= RT_FDS)
		return NULL;
	rt_own();
	if (!rt_files[fd]) /* a stream the program had before we saw it open */
		rt_files[fd] = fdopen(rt_fd(fd), "r+");
	if (!rt_files[fd]) /* nothing behind it: calls go somewhere harmless */
		rt_files[fd] = fopen("/dev/null", "r+");
	rt_own_end();
	return rt_files[fd];
}

static long rt_file_bind(int64_t fd, FILE *f)
{
	if (fd >= 0 && fd < RT_FDS)
		rt_files[fd] = f;
	return f ? fileno(f) : -1;
}

static FILE *rt_file_take(int64_t fd)
{
	FILE *f = rt_file(fd);

	if (fd >= 3 && fd < RT_FDS)
		rt_files[fd] = NULL;
	return f;
}

static long rt_dir_bind(int64_t fd, DIR *d)
{
	if (fd >= 0 && fd < RT_FDS)
		rt_dirs[fd] = d;
	return d ? dirfd(d) : -1;
}

static void rt_readdir(int64_t fd)
{
	DIR *d = fd >= 0 && fd < RT_FDS ? rt_dirs[fd] : NULL;

	if (d)
		readdir(d);
}

static void rt_closedir(int64_t fd)
{
	DIR *d = fd >= 0 && fd < RT_FDS ? rt_dirs[fd] : NULL;

	if (d) {
		rt_dirs[fd] = NULL;
		closedir(d);
	}
}

/* What the program wrote is unknown, its length is not: the proxy writes that much of this. */
static char rt_filler[1 << 20];

static void rt_filler_init(void)
{
	for (size_t i = 0; i < sizeof(rt_filler) - 1; i++)
		rt_filler[i] = i % 64 == 63 ? '\n' : 'x';
}

static int rt_len(int64_t n)
{
	return n < 0 ? 0 : n > (int64_t)sizeof(rt_filler) - 1 ? (int)sizeof(rt_filler) - 1 : (int)n;
}

/* A line of @n bytes, its newline included (puts adds its own: @n - 1 of them). */
static const char *rt_line(int64_t n)
{
	char *buf = rt_T()->line;
	int k = n <= 0 ? 0 : n >= 4096 ? 4095 : (int)n;

	memset(buf, 'x', (size_t)k);
	buf[k] = 0;
	return buf;
}

/* A wide string that makes @n bytes in any locale: @n 'x' (at most 1023). */
static const wchar_t *rt_wfiller(int64_t n)
{
	wchar_t *buf = rt_T()->wline;
	int k = n <= 0 ? 0 : n >= 1024 ? 1023 : (int)n;

	wmemset(buf, L'x', (size_t)k);
	buf[k] = 0;
	return buf;
}

/* A wide character that makes @n bytes in the locale's encoding, where it has one among a
 * few; else 'x'. */
static wchar_t rt_wc_of(int64_t n)
{
	static const wchar_t cand[] = {L'x', L'\u00e9', L'\u20ac', L'\U0001F600'};

	for (size_t i = 0; i < sizeof(cand) / sizeof(cand[0]); i++) {
		char mb[MB_LEN_MAX];
		mbstate_t st = {0};

		if (wcrtomb(mb, cand[i], &st) == (size_t)n)
			return cand[i];
	}
	return L'x';
}

/* fgetws's size for a read of @bytes bytes (-1: none) the program made with @size: no more
 * characters than those bytes, so that the proxy's text, filler without the program's
 * newlines, is not read further than the program read. */
static int rt_wsize(int64_t size, int64_t bytes)
{
	if (bytes < 0 || bytes + 1 >= size)
		return (int)size;
	return (int)bytes + 1;
}

/* The head of glibc's struct _IO_wide_data, opaque in <stdio.h>: a wide stream's read
 * pointers. */
struct rt_wide_head {
	wchar_t *read_ptr, *read_end, *read_base;
};

/* ungetwc: where the program put back the character it had just read (@back), its libc
 * stepped back in its buffer: the proxy puts back the character it read there, which its
 * filler made another, rather than make its libc allocate a push-back area. */
/* ungetc(@c, @f), or of the byte @f just read when the program put back its own (@back) */
static int rt_ungetc(int64_t back, int c, FILE *f)
{
#ifdef __GLIBC__
	if (back && f && f->_IO_read_ptr && f->_IO_read_ptr > f->_IO_read_base)
		c = (unsigned char)f->_IO_read_ptr[-1];
#endif
	return ungetc(c, f);
}

static wint_t rt_ungetwc(int64_t back, wint_t c, FILE *f)
{
#ifdef __GLIBC__
	const struct rt_wide_head *w = back && f ? (const void *)f->_wide_data : NULL;

	if (w && w->read_ptr && w->read_ptr > w->read_base)
		c = (wint_t)w->read_ptr[-1];
#endif
	return ungetwc(c, f);
}

/* ---- MPI ---- */

#if PROXY_MPI
/* The special ranks of the MPI that recorded the trace, as the MPI built with gives them. */
static int rt_special(int64_t v)
{
#if PROXY_REC_IMPL == 1 /* MPICH */
	static const int rec[] = {-2, -1, -3};
#elif PROXY_REC_IMPL == 2 /* Open MPI */
	static const int rec[] = {-1, -2, -4};
#else
	static const int rec[] = {MPI_ANY_SOURCE, MPI_PROC_NULL, MPI_ROOT};
#endif
	if (v == rec[0])
		return MPI_ANY_SOURCE;
	if (v == rec[1])
		return MPI_PROC_NULL;
	if (v == rec[2])
		return MPI_ROOT;
	return (int)v;
}

static int rt_mpi_up(void)
{
	int up = 0, down = 0;

	PMPI_Initialized(&up);
	if (up)
		PMPI_Finalized(&down);
	return up && !down;
}

/* This process's rank in a communicator, group or window (-1 when not a member). */
static int rt_crank(MPI_Comm c)
{
	int r = -1;

	if (c != MPI_COMM_NULL && rt_mpi_up())
		PMPI_Comm_rank(c, &r);
	return r;
}

static int rt_grank(MPI_Group g)
{
	int r = MPI_UNDEFINED;

	if (g != MPI_GROUP_NULL && rt_mpi_up())
		PMPI_Group_rank(g, &r);
	return r == MPI_UNDEFINED ? -1 : r;
}

static int rt_wrank(MPI_Win w)
{
	MPI_Group g;
	int r = -1;

	rt_own();
	if (w != MPI_WIN_NULL && rt_mpi_up() && PMPI_Win_get_group(w, &g) == MPI_SUCCESS) {
		r = rt_grank(g);
		PMPI_Group_free(&g);
	}
	rt_own_end();
	return r;
}

static int rt_wrank_world(void)
{
	return rt_mpi_up() ? rt_crank(MPI_COMM_WORLD) : (int)rt_rank;
}

static int rt_csize(MPI_Comm c)
{
	int n = 1, inter = 0;

	if (c == MPI_COMM_NULL || !rt_mpi_up())
		return 1;
	PMPI_Comm_test_inter(c, &inter);
	if (inter)
		PMPI_Comm_remote_size(c, &n);
	else
		PMPI_Comm_size(c, &n);
	return n;
}

/* Bytes @count elements of @t span, from the buffer's start. */
static uint64_t rt_tbytes(MPI_Datatype t, int64_t count)
{
	MPI_Aint lb = 0, ext = 0, tlb = 0, text = 0;
	int64_t n;

	if (count <= 0 || t == MPI_DATATYPE_NULL || !rt_mpi_up())
		return 64;
	if (PMPI_Type_get_extent(t, &lb, &ext) != MPI_SUCCESS ||
	    PMPI_Type_get_true_extent(t, &tlb, &text) != MPI_SUCCESS)
		return 1 << 20;
	n = (count - 1) * (ext < 0 ? -ext : ext) + (tlb > 0 ? tlb : 0) + text;
	return n > 0 ? (uint64_t)n + 64 : 64;
}

/*
 * The buffers of MPI calls: a program's buffer in one of its allocations is there in this
 * run too; any other buffer (on its stack, static) is an address range of its own, reserved
 * once and made usable as far as a call needs, so that it never moves while a request uses
 * it and each buffer keeps one address (a recording numbers them by address).
 */
struct rt_mkey {
	char *base;
	uint64_t usable;
};

static struct rt_mkey *rt_mkeys;
static uint64_t rt_mreserve = UINT64_C(1) << 30;

static void *rt_mbuf(uint32_t key, uint64_t alloc, uint64_t off, uint64_t bytes)
{
	struct rt_mkey *k = &rt_mkeys[key];
	char *p;

	if (alloc == 0 && off == UINT64_MAX)
		return MPI_IN_PLACE;
	if (alloc == 0 && off == 0)
		return NULL;
	if (alloc && (p = rt_ptr(alloc)))
		return p + off;
	if (!k->base) {
		long r = syscall(SYS_mmap, NULL, rt_mreserve, PROT_NONE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (r == -1) {
			rt_say("cannot reserve a buffer of %llu bytes",
			       (unsigned long long)rt_mreserve);
			exit(1);
		}
		k->base = (char *)r;
	}
	bytes = (bytes + 4095) & ~UINT64_C(4095);
	if (bytes > rt_mreserve)
		bytes = rt_mreserve;
	if (bytes > k->usable) {
		syscall(SYS_mprotect, k->base, bytes, PROT_READ | PROT_WRITE);
		k->usable = bytes;
	}
	return k->base;
}

/* Scratch for what the proxy does not keep (statuses, output arrays, output handles). */
static void *rt_ms(size_t n)
{
	struct rt_tls *t = rt_T();
	void *p;

	n = (n + 15) & ~(size_t)15;
	if (n > sizeof(t->ms))
		return rt_scratch_get(n);
	if (t->ms_at + n > sizeof(t->ms))
		t->ms_at = 0;
	p = t->ms + t->ms_at;
	t->ms_at += (unsigned int)n;
	memset(p, 0, n);
	return p;
}

/* MPI_Init's arguments: as many as the program had (the trace records argc). */
static int rt_fake_argc;
static char **rt_fake_argv;

static void rt_fake_args(int64_t n, char *prog)
{
	static char *argv[256];

	if (n < 1)
		n = 1;
	if (n > 255)
		n = 255;
	argv[0] = prog;
	for (int64_t i = 1; i < n; i++)
		argv[i] = (char *)"proxy";
	argv[n] = NULL;
	rt_fake_argc = (int)n;
	rt_fake_argv = argv;
}

/* Requests by symbolic id, and when each was made (to find the ones pending). */
static MPI_Request *rt_reqs;
static uint32_t rt_n_reqs;
static uint64_t *rt_req_seq, rt_req_clock;

static void rt_req_born(uint32_t d)
{
	rt_req_seq[d] = ++rt_req_clock;
}

/* a[n..want): the pending requests not in m[0..n), oldest first; m[] says whose they are. */
static void rt_req_fill(MPI_Request *a, uint32_t *m, uint32_t n, uint32_t want)
{
	for (uint32_t k = 0; k < n; k++)
		a[k] = m[k] < rt_n_reqs ? rt_reqs[m[k]] : MPI_REQUEST_NULL;
	for (uint32_t k = n; k < want; k++) {
		uint32_t best = UINT32_MAX;

		for (uint32_t d = 0; d < rt_n_reqs; d++) {
			int taken = 0;

			if (rt_reqs[d] == MPI_REQUEST_NULL ||
			    (best != UINT32_MAX && rt_req_seq[d] >= rt_req_seq[best]))
				continue;
			for (uint32_t j = 0; j < k && !taken; j++)
				taken = m[j] == d;
			if (!taken)
				best = d;
		}
		m[k] = best;
		a[k] = best == UINT32_MAX ? MPI_REQUEST_NULL : rt_reqs[best];
	}
}

static void rt_req_back(const MPI_Request *a, const uint32_t *m, uint32_t want)
{
	for (uint32_t k = 0; k < want; k++)
		if (m[k] < rt_n_reqs)
			rt_reqs[m[k]] = a[k];
}

/* The status calls write and the calls that read one (MPI_Get_count) read. */
static MPI_Status rt_status;
#define RT_NO_STATUS (-32768)

/* The last status, with the fields the trace has of the one the program passed. */
static MPI_Status *rt_status_in(int64_t source, int64_t tag, int64_t bytes, int64_t cancelled)
{
	if (source != RT_NO_STATUS)
		rt_status.MPI_SOURCE = (int)source;
	if (tag != RT_NO_STATUS)
		rt_status.MPI_TAG = (int)tag;
	if (bytes != RT_NO_STATUS && bytes >= 0 && rt_mpi_up())
		PMPI_Status_set_elements(&rt_status, MPI_BYTE, (int)bytes);
	if (cancelled != RT_NO_STATUS && rt_mpi_up())
		PMPI_Status_set_cancelled(&rt_status, (int)cancelled);
	return &rt_status;
}

/* A user reduction that does nothing: the proxy's data means nothing. */
static void rt_user_op(void *in, void *inout, int *len, MPI_Datatype *t)
{
	(void)in, (void)inout, (void)len, (void)t;
}

static int rt_noop_fn(void)
{
	return MPI_SUCCESS;
}

/*
 * Steering (fs/vreplay_mpi.c): on a gate (a communicator id and a tag), a send waits for
 * its receiver's word, a 0-byte message on a private communicator, and the receiver gives
 * it when its trace has the receive complete, so that calls choosing among requests
 * (MPI_Waitany, MPI_Testsome...) find what they found when recorded. A word that does not
 * come within rt_gate_wait_ns (10 s, PROXY_STEER_WAIT_MS) lets the send go: a proxy never
 * hangs on its own steering.
 */

struct rt_gate {
	uint32_t comm;
	int64_t tag;
};

static const struct rt_gate *rt_gates;
static uint32_t rt_n_gates;
static MPI_Comm rt_gate_comm = MPI_COMM_NULL;
static int rt_world_n;
static int32_t *rt_go_peer, *rt_go_gate; /* per request: the word its receive owes */
static int64_t *rt_credit;		 /* per (peer, gate): words received - sends made */

static void rt_steer_init(void)
{
	if (!rt_n_gates || rt_gate_comm != MPI_COMM_NULL)
		return;
	rt_own();
	PMPI_Comm_dup(MPI_COMM_WORLD, &rt_gate_comm);
	PMPI_Comm_size(MPI_COMM_WORLD, &rt_world_n);
	rt_own_end();
	rt_go_peer = rt_mem(((size_t)rt_n_reqs + 1) * sizeof(*rt_go_peer));
	rt_go_gate = rt_mem(((size_t)rt_n_reqs + 1) * sizeof(*rt_go_gate));
	for (uint32_t d = 0; d < rt_n_reqs; d++)
		rt_go_peer[d] = -1;
	rt_credit = rt_mem((size_t)rt_world_n * rt_n_gates * sizeof(*rt_credit));
}

static int rt_gate_of(uint32_t comm, int64_t tag)
{
	for (uint32_t g = 0; g < rt_n_gates; g++)
		if (rt_gates[g].comm == comm && rt_gates[g].tag == tag)
			return (int)g;
	return -1;
}

/* The world rank of rank @r of @c. */
static int rt_world_of(MPI_Comm c, int r)
{
	MPI_Group g, w;
	int out = -1;

	if (r < 0 || c == MPI_COMM_NULL)
		return -1;
	if (c == MPI_COMM_WORLD)
		return r;
	rt_own();
	PMPI_Comm_group(c, &g);
	PMPI_Comm_group(MPI_COMM_WORLD, &w);
	PMPI_Group_translate_ranks(g, 1, &r, w, &out);
	PMPI_Group_free(&g);
	PMPI_Group_free(&w);
	rt_own_end();
	return out == MPI_UNDEFINED ? -1 : out;
}

static void rt_word(int peer, int gate)
{
	MPI_Request r;

	rt_own();
	if (peer >= 0 && PMPI_Isend(NULL, 0, MPI_BYTE, peer, gate, rt_gate_comm, &r) == MPI_SUCCESS)
		PMPI_Request_free(&r);
	rt_own_end();
}

/* A blocking receive on a gate: its sender may go. */
static void rt_gate_go(uint32_t comm, MPI_Comm c, int src, int64_t tag)
{
	int g = rt_gate_comm == MPI_COMM_NULL ? -1 : rt_gate_of(comm, tag);

	if (g >= 0 && src >= 0)
		rt_word(rt_world_of(c, src), g);
}

/* A receive posted as request @d: the word now, or when its request completes (@chosen). */
static void rt_gate_post(uint32_t comm, MPI_Comm c, int src, int64_t tag, uint32_t d, int chosen)
{
	int g = rt_gate_comm == MPI_COMM_NULL ? -1 : rt_gate_of(comm, tag);

	if (g < 0 || src < 0)
		return;
	if (!chosen) {
		rt_word(rt_world_of(c, src), g);
		return;
	}
	if (rt_go_peer[d] >= 0) /* the previous receive of this id never completed here */
		rt_word(rt_go_peer[d], rt_go_gate[d]);
	rt_go_peer[d] = rt_world_of(c, src);
	rt_go_gate[d] = g;
}

static void rt_gate_release(uint32_t d)
{
	if (rt_go_peer && d < rt_n_reqs && rt_go_peer[d] >= 0) {
		rt_word(rt_go_peer[d], rt_go_gate[d]);
		rt_go_peer[d] = -1;
	}
}

/* Wait (a while) until request @d is complete, without completing it. */
static void rt_gate_await(uint32_t d)
{
	uint64_t until = rt_now() + rt_gate_wait_ns;
	int flag = 0;

	rt_own();
	while (rt_gate_comm != MPI_COMM_NULL && d < rt_n_reqs && rt_reqs[d] != MPI_REQUEST_NULL &&
	       PMPI_Request_get_status(rt_reqs[d], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
	       !flag && rt_now() < until)
		;
	rt_own_end();
}

/* A send on a gate: wait for the receiver's word (a while). */
static void rt_gate_send(uint32_t comm, MPI_Comm c, int dest, int64_t tag)
{
	int g = rt_gate_comm == MPI_COMM_NULL ? -1 : rt_gate_of(comm, tag), peer, flag;
	uint64_t until = rt_now() + rt_gate_wait_ns;
	int64_t *credit;

	if (g < 0 || dest < 0 || (peer = rt_world_of(c, dest)) < 0 || peer >= rt_world_n)
		return;
	credit = &rt_credit[(size_t)peer * rt_n_gates + (size_t)g];
	rt_own();
	while (*credit < 1 && rt_now() < until) {
		flag = 0;
		PMPI_Iprobe(peer, g, rt_gate_comm, &flag, MPI_STATUS_IGNORE);
		if (flag) {
			PMPI_Recv(NULL, 0, MPI_BYTE, peer, g, rt_gate_comm, MPI_STATUS_IGNORE);
			++*credit;
		}
	}
	rt_own_end();
	--*credit;
}

/* Before MPI_Finalize: the words this rank owes go, the words owed to it are taken in. */
static void rt_steer_drain(void)
{
	if (rt_gate_comm == MPI_COMM_NULL)
		return;
	for (uint32_t d = 0; d < rt_n_reqs; d++)
		rt_gate_release(d);
	rt_own();
	for (int p = 0; p < rt_world_n; p++)
		for (uint32_t g = 0; g < rt_n_gates; g++)
			for (int64_t *cr = &rt_credit[(size_t)p * rt_n_gates + g]; *cr < 0; ++*cr)
				PMPI_Recv(NULL, 0, MPI_BYTE, p, (int)g, rt_gate_comm,
					  MPI_STATUS_IGNORE);
	PMPI_Barrier(rt_gate_comm);
	PMPI_Comm_free(&rt_gate_comm);
	rt_own_end();
}
#else
static void rt_steer_drain(void)
{
}
#endif

/* ---- main ---- */

static char *rt_prog;

static uint32_t rt_env_rank(const char **size_var, long *size)
{
	static const char *const vars[][2] = {{"PROXY_RANK", "PROXY_SIZE"},
					      {"PMI_RANK", "PMI_SIZE"},
					      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
					      {"PMIX_RANK", "PMIX_SIZE"},
					      {"SLURM_PROCID", "SLURM_NTASKS"}};

	*size = 0;
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *r = getenv(vars[i][0]), *s = getenv(vars[i][1]);

		if (r && *r) {
			*size_var = vars[i][1];
			*size = s ? atol(s) : 0;
			return (uint32_t)atol(r);
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct rt_stream *table, *main_st = NULL;
	const char *size_var = NULL;
	uint32_t n, n_ranks = 0;
	long size;

	rt_prog = argv[0];
	pthread_key_create(&rt_key, NULL);
	rt_options(&argc, argv);
	rt_rank = rt_env_rank(&size_var, &size);
	rt_setup_allocs(rt_rank); /* before anything else allocates */
	table = rt_stream_table(&n);
	for (uint32_t i = 0; i < n; i++) {
		if (table[i].rank + 1 > n_ranks)
			n_ranks = table[i].rank + 1;
		if (table[i].rank == rt_rank && (!main_st || table[i].thread < main_st->thread))
			main_st = &table[i];
	}
	if (size && (uint32_t)size != n_ranks)
		rt_say("%s=%ld, but the trace has %u ranks", size_var, size, n_ranks);
	if (!main_st) {
		rt_say("the trace has no rank %u: nothing to replay", rt_rank);
		return 0;
	}
	rt_capture_init();
	rt_filler_init();
	syscall(SYS_mkdirat, AT_FDCWD, rt_dir, 0755);
	if (syscall(SYS_chdir, rt_dir) != 0) {
		rt_say("cannot enter the scratch directory %s: %s", rt_dir, strerror(errno));
		return 1;
	}
	/* absolute, so that paths stay in it after the program's chdir (raw: getcwd is
	 * interposed, and this call is the proxy's, not the program's) */
	if (syscall(SYS_getcwd, rt_dir, sizeof(rt_dir)) <= 0)
		snprintf(rt_dir, sizeof(rt_dir), ".");
#if PROXY_MPI
	rt_fake_args(1, rt_prog);
	rt_mpi_tables_init();
#endif
	rt_setup_files(rt_rank);
	for (uint32_t i = 0; i < n; i++) /* threads no recorded call started */
		if (&table[i] != main_st && table[i].rank == rt_rank && !table[i].created)
			rt_thread_create(table[i].thread);
	rt_run(main_st);
	for (uint32_t k = 0; k < RT_MAX_THREADS; k++)
		rt_thread_join(k);
#if PROXY_MPI
	if (rt_mpi_up()) { /* a trace that ends before MPI_Finalize */
		rt_own();
		PMPI_Finalize();
		rt_own_end();
	}
#endif
	return 0;
}
