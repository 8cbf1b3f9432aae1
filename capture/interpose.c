/*
 * The LD_PRELOAD interposers of libtfscapture.so written by hand, allocation and thread
 * half: the resolution of every interposer's real function (the list is calls.txt's), the
 * malloc family, pthread_create/join. Each interposer records one REC_CALL (calls_i.h) when
 * its category (TFS_TRACE_ALLOC, _IO, _THREADS) is on and passes straight through otherwise.
 * The real functions come from dlsym(RTLD_NEXT) in a constructor, or at first use when
 * another library calls them earlier; while dlsym runs, its own allocations come from a
 * static bootstrap arena that is never freed. A call made from inside the capture
 * (cap_tls_depth) is passed through unrecorded, so the tracer's own allocations are never
 * traced. Every interposer preserves the errno the real function left. Threads created
 * through pthread_create while threads are traced get their symbolic ids in creation order.
 * The malloc family keeps the table of live allocations (allocs_i.h) and records each
 * block's allocation id: a block leaves the table before the real free or realloc runs.
 *
 * Allocating calls are recorded with their backtrace when backtraces are on (cap_put_call
 * unwinds, unwind.c). Not done: reallocarray (not interposed), and calls made before this
 * library is loaded (the dynamic loader's).
 */
#undef _FILE_OFFSET_BITS /* define open, not open64 under the name open */
#undef _FORTIFY_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "allocs_i.h"
#include "calls_i.h"
#include "interpose_i.h"

#define TLS_IE __attribute__((tls_model("initial-exec")))

#define BOOT_BYTES (256u * 1024u) /* dlsym's allocations before the real malloc is known */
#define N_THREADS 4096		  /* live pthread_t -> thread id entries */
#define NO_THREAD 0xffffffffu


_Thread_local bool cap_thread_layer TLS_IE;

static _Thread_local bool tls_resolving TLS_IE;
static _Alignas(64) unsigned char g_boot[BOOT_BYTES];
static _Atomic size_t g_boot_used;

static atomic_flag g_threads_lock = ATOMIC_FLAG_INIT;
static struct {
	pthread_t th;
	uint32_t id; /* NO_THREAD: free slot */
} g_threads[N_THREADS];
static bool g_threads_init;

/*
 * Take a spinlock of the interposers. The capture counts as entered while it is held, so a signal
 * handler that interrupts the holder and calls an interposed function passes straight
 * through instead of spinning on a lock its own thread holds.
 */
void cap_lock(atomic_flag *l)
{
	cap_tls_depth++;
	while (atomic_flag_test_and_set_explicit(l, memory_order_acquire))
		;
}

void cap_unlock(atomic_flag *l)
{
	atomic_flag_clear_explicit(l, memory_order_release);
	cap_tls_depth--;
}

/* ---- resolution and the bootstrap arena ---- */

void cap_resolve(void)
{
	if (tls_resolving)
		return;
	tls_resolving = true;
	cap_resolve_all();
	tls_resolving = false;
}

__attribute__((constructor(101))) static void interpose_init(void)
{
	if (!cap_real.free)
		cap_resolve();
}

/* 16 bytes of header (the size) before each block, 16-byte aligned. */
static void *boot_alloc(size_t n)
{
	size_t sz = (n + 31) & ~(size_t)15, off;

	if (n > BOOT_BYTES)
		return NULL;
	off = atomic_fetch_add(&g_boot_used, sz);
	if (off + sz > BOOT_BYTES)
		return NULL;
	memcpy(g_boot + off, &n, sizeof(n));
	return g_boot + off + 16;
}

static bool is_boot(const void *p)
{
	return (const unsigned char *)p >= g_boot && (const unsigned char *)p < g_boot + BOOT_BYTES;
}

/* ---- the malloc family ---- */

/*
 * Record @call with its @n (up to 5) argument words @a, @b..., its backtrace from @from
 * (NULL: from the capture's own frame).
 */
static void put_alloc(const struct cap_frame *from, enum cap_call call, uint32_t n, uint64_t a,
		      uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
	cap_put_alloc_at(call | (uint64_t)(n + 1) << 32, a, b, c, d, e, from);
}

/*
 * put_alloc() of an allocating call, its backtrace from the interposer's caller: a
 * statement made in the interposer itself (CAP_CALLER_FRAME).
 */
#if CAP_HAVE_CALLER_FRAME
#define PUT_ALLOC(...)                                                                             \
	do {                                                                                       \
		const struct cap_frame from_ = CAP_CALLER_FRAME();                                 \
		put_alloc(&from_, __VA_ARGS__);                                                    \
	} while (0)
#else
#define PUT_ALLOC(...) put_alloc(NULL, __VA_ARGS__)
#endif

/*
 * What the malloc family does with a call now, decided once per call (the predicates share
 * their loads, which a call between them would make the compiler repeat): keep the table
 * (allocs_i.h), record the call (interpose_i.h).
 */
struct alloc_mode {
	bool keep, trace;
};

static inline struct alloc_mode alloc_mode(void)
{
	return (struct alloc_mode){cap_allocs_keep(), tracing_alloc()};
}

/* The allocation id of the block the malloc family just returned (0 when ids are not kept). */
static inline uint64_t new_id(struct alloc_mode m, const void *p, size_t size)
{
	return m.keep ? cap_alloc_add(p, size, 0) : 0;
}

EXPORT void *malloc(size_t size)
{
	struct alloc_mode m;
	uint64_t id;
	void *p;

	if (unlikely(!cap_real.malloc)) {
		if (tls_resolving)
			return boot_alloc(size);
		if (!HAVE(malloc))
			return NULL;
	}
	p = cap_real.malloc(size);
	m = alloc_mode();
	id = new_id(m, p, size);
	if (m.trace)
		PUT_ALLOC(CALL_MALLOC, 3, size, (uintptr_t)p, id, 0, 0);
	return p;
}

EXPORT void *calloc(size_t nmemb, size_t size)
{
	struct alloc_mode m;
	uint64_t id;
	void *p;

	if (unlikely(!cap_real.calloc)) {
		if (tls_resolving)
			return nmemb && size > SIZE_MAX / nmemb ? NULL : boot_alloc(nmemb * size);
		if (!HAVE(calloc))
			return NULL;
	}
	p = cap_real.calloc(nmemb, size);
	m = alloc_mode();
	id = new_id(m, p, nmemb * size);
	/* bytes: what the block holds, the one byte count profiles sum (0 when it failed) */
	if (m.trace)
		PUT_ALLOC(CALL_CALLOC, 5, nmemb, size, p ? nmemb * size : 0, (uintptr_t)p, id);
	return p;
}

EXPORT void *realloc(void *ptr, size_t size)
{
	struct alloc_mode m;
	uint64_t id = 0, old_id = 0, freed = 0;
	size_t old_size = 0;
	void *p;

	if (unlikely(is_boot(ptr))) {
		size_t old;

		memcpy(&old, (unsigned char *)ptr - 16, sizeof(old));
		p = malloc(size);
		if (p)
			memcpy(p, ptr, old < size ? old : size);
		return p;
	}
	if (unlikely(!cap_real.realloc)) {
		if (tls_resolving)
			return ptr ? NULL : boot_alloc(size);
		if (!HAVE(realloc))
			return NULL;
	}
	/* out of the table first: once realloc moved the block, its memory is anyone's */
	m = alloc_mode();
	if (m.keep && ptr)
		old_id = cap_alloc_remove(ptr, &old_size);
	p = cap_real.realloc(ptr, size);
	if (m.keep && p) {
		id = cap_alloc_add(p, size, p == ptr ? old_id : 0); /* in place: the same block */
		freed = p == ptr ? 0 : old_id;
	} else if (m.keep && ptr && size == 0) {
		freed = old_id; /* glibc's realloc(p, 0) frees p */
	} else if (m.keep && old_id) {
		cap_alloc_add(ptr, old_size, old_id); /* failed: @ptr is still live */
	}
	if (m.trace)
		PUT_ALLOC(CALL_REALLOC, 5, (uintptr_t)ptr, size, (uintptr_t)p, id, freed);
	return p;
}

EXPORT void free(void *ptr)
{
	struct alloc_mode m;
	uint64_t id;

	if (unlikely(is_boot(ptr)))
		return;
	if (unlikely(!cap_real.free)) {
		cap_resolve();
		if (!cap_real.free)
			return;
	}
	m = alloc_mode();
	/* out of the table first: once freed, the block is anyone's */
	id = m.keep ? cap_alloc_remove(ptr, NULL) : 0;
	cap_real.free(ptr);
	/* glibc's free(NULL)s after a thread's end (__libc_thread_freeres) are no lost event */
	if (m.trace && (ptr || !cap_thread_ended()))
		put_alloc(NULL, CALL_FREE, 2, (uintptr_t)ptr, id, 0, 0, 0);
}

EXPORT int posix_memalign(void **memptr, size_t alignment, size_t size)
{
	struct alloc_mode m;
	uint64_t id;
	int rc;

	if (unlikely(!cap_real.posix_memalign)) {
		cap_resolve();
		if (!cap_real.posix_memalign)
			return ENOMEM;
	}
	rc = cap_real.posix_memalign(memptr, alignment, size);
	m = alloc_mode();
	id = rc ? 0 : new_id(m, *memptr, size);
	if (m.trace)
		PUT_ALLOC(CALL_POSIX_MEMALIGN, 5, alignment, size, rc ? 0 : (uintptr_t)*memptr,
			  (uint64_t)rc, id);
	return rc;
}

EXPORT void *aligned_alloc(size_t alignment, size_t size)
{
	struct alloc_mode m;
	uint64_t id;
	void *p;

	if (!HAVE(aligned_alloc))
		return NULL;
	p = cap_real.aligned_alloc(alignment, size);
	m = alloc_mode();
	id = new_id(m, p, size);
	if (m.trace)
		PUT_ALLOC(CALL_ALIGNED_ALLOC, 4, alignment, size, (uintptr_t)p, id, 0);
	return p;
}

EXPORT void *memalign(size_t alignment, size_t size)
{
	struct alloc_mode m;
	uint64_t id;
	void *p;

	if (!HAVE(memalign))
		return NULL;
	p = cap_real.memalign(alignment, size);
	m = alloc_mode();
	id = new_id(m, p, size);
	if (m.trace)
		PUT_ALLOC(CALL_MEMALIGN, 4, alignment, size, (uintptr_t)p, id, 0);
	return p;
}

EXPORT void *valloc(size_t size)
{
	struct alloc_mode m;
	uint64_t id;
	void *p;

	if (!HAVE(valloc))
		return NULL;
	p = cap_real.valloc(size);
	m = alloc_mode();
	id = new_id(m, p, size);
	if (m.trace)
		PUT_ALLOC(CALL_VALLOC, 3, size, (uintptr_t)p, id, 0, 0);
	return p;
}

EXPORT void *pvalloc(size_t size)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct alloc_mode m;
	uint64_t id;
	void *p;

	if (!HAVE(pvalloc))
		return NULL;
	p = cap_real.pvalloc(size);
	m = alloc_mode();
	/* the table holds the whole pages the block has, the event the size asked for */
	id = new_id(m, p, size <= SIZE_MAX - page ? (size + page - 1) / page * page : size);
	if (m.trace)
		PUT_ALLOC(CALL_PVALLOC, 3, size, (uintptr_t)p, id, 0, 0);
	return p;
}

/* ---- threads ---- */

struct tramp {
	void *(*fn)(void *);
	void *arg;
	uint32_t id;
	unsigned int depth; /* cap_call_depth of the creator: a thread an MPI call starts is
			       that call's layer (its calls are nested) */
	uint32_t outer;	    /* and the call it was inside */
};

static void *tramp_start(void *p)
{
	struct tramp t = *(struct tramp *)p;

	cap_real.free(p);
	if (t.id != NO_THREAD)
		cap_thread_preassign(t.id);
	cap_call_depth = t.depth;
	cap_call_outer = t.outer;
	cap_thread_layer = t.depth > 0;
	return t.fn(t.arg);
}

static void thread_remember(pthread_t th, uint32_t id)
{
	cap_lock(&g_threads_lock);
	if (!g_threads_init) {
		for (uint32_t i = 0; i < N_THREADS; i++)
			g_threads[i].id = NO_THREAD;
		g_threads_init = true;
	}
	for (uint32_t i = 0; i < N_THREADS; i++) {
		if (g_threads[i].id == NO_THREAD) {
			g_threads[i].th = th;
			g_threads[i].id = id;
			break;
		}
	}
	cap_unlock(&g_threads_lock);
}

static uint32_t thread_forget(pthread_t th)
{
	uint32_t id = NO_THREAD;

	cap_lock(&g_threads_lock);
	for (uint32_t i = 0; g_threads_init && i < N_THREADS; i++) {
		if (g_threads[i].id != NO_THREAD && pthread_equal(g_threads[i].th, th)) {
			id = g_threads[i].id;
			g_threads[i].id = NO_THREAD;
			break;
		}
	}
	cap_unlock(&g_threads_lock);
	return id;
}

uint32_t cap_thread_find(pthread_t th)
{
	uint32_t id = NO_THREAD;

	cap_lock(&g_threads_lock);
	for (uint32_t i = 0; g_threads_init && i < N_THREADS; i++) {
		if (g_threads[i].id != NO_THREAD && pthread_equal(g_threads[i].th, th)) {
			id = g_threads[i].id;
			break;
		}
	}
	cap_unlock(&g_threads_lock);
	return id;
}

/*
 * A thread created inside an MPI or interposed call (cap_call_depth > 0: MPICH's progress
 * thread, made in MPI_Init) starts at its creator's depth, so its calls are that library's
 * layer: it goes through the trampoline whenever capture is on, recorded or not.
 */
EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	const unsigned int layer = cap_call_depth;
	struct tramp *t;
	uint64_t t0, args[3];
	uint32_t id;
	bool rec;
	int rc;

	if (!HAVE(pthread_create))
		return ENOSYS;
	rec = tracing(TFS_TRACE_THREADS) && (layer == 0 || cap_call_nested_ok());
	if (!rec && !(layer && tfs_capture_mask_))
		return cap_real.pthread_create(th, attr, fn, arg);
	t = cap_real.malloc(sizeof(*t)); /* the tracer's own: not recorded */
	if (!t)
		return cap_real.pthread_create(th, attr, fn, arg);
	/* a thread not recorded gets its id at its first event, if it records any */
	id = rec ? cap_thread_reserve() : NO_THREAD;
	*t = (struct tramp){fn, arg, id, layer, cap_call_outer};
	t0 = cap_now_ns();
	rc = cap_real.pthread_create(th, attr, tramp_start, t); /* the thread frees @t */
	if (rc != 0)
		cap_real.free(t);
	else if (rec)
		thread_remember(*th, id);
	if (!rec)
		return rc;
	args[0] = since(t0);
	args[1] = rc == 0 ? id : NO_THREAD;
	args[2] = (uint64_t)(int64_t)rc;
	cap_put_call(CALL_PTHREAD_CREATE, t0, args, 3, NULL, 0);
	return rc;
}

EXPORT int pthread_join(pthread_t th, void **retval)
{
	uint64_t t0, args[3];
	int rc;

	if (!HAVE(pthread_join))
		return ENOSYS;
	if (!tracing(TFS_TRACE_THREADS))
		return cap_real.pthread_join(th, retval);
	t0 = cap_now_ns();
	rc = cap_real.pthread_join(th, retval);
	args[0] = since(t0);
	args[1] = rc == 0 ? thread_forget(th) : NO_THREAD;
	args[2] = (uint64_t)(int64_t)rc;
	cap_put_call(CALL_PTHREAD_JOIN, t0, args, 3, NULL, 0);
	return rc;
}
