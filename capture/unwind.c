/*
 * Allocation backtraces, producer side: unwinds the calling thread and keeps the consumer
 * told of every object the frames point into (REC_MODULE: path, load bias, address range),
 * so that it can symbolise after the process is gone. Nothing here allocates through the
 * interposed malloc: callers are inside the capture (cap_tls_depth), so what libunwind and
 * dl_iterate_phdr allocate passes through unrecorded. This file does not write the
 * backtrace records (capture.c), read CFI (cfi.c) nor symbolise (symbolize.c).
 *
 * The walk (x86-64): from its own registers, or from the frame an allocating interposer was
 * called from (struct cap_frame: the steps through the capture's own frames would reach those
 * registers, and its frames are left out anyway), frame by frame, each step by the frame's CFI
 * rule (cfi_i.h: the CFA is rsp or rbp plus a constant, the return address just below it, rbp
 * unchanged or saved at a constant offset). Rules are cached process-wide by return address,
 * filled from .eh_frame on a miss. Each step reads at most three stack words, and only between
 * the frame's rsp and the top of the mapping that holds the stack. A thread keeps its last
 * walk: every frame's registers (return address, rsp, rbp) and where its rbp was read. When a
 * step reaches a frame whose registers equal those of a frame of the last walk, the rest of the
 * last walk is taken after checking, frame by frame outwards, that the stack words its steps
 * read still hold what they held: the walk is a function of the registers it starts from, the
 * rules and the words it reads, so an equal start, equal rules (the cache is emptied when an
 * object is unloaded) and equal words give the same frames, whatever happened in between (a
 * return and a call from elsewhere at the same depth, a longjmp, a recursion). The first word
 * that differs ends the check and the walk goes on from the last frame checked (and takes the
 * last walk again where a frame's registers meet one of it further out). Anything else (a frame
 * without a rule of those forms: a signal frame, a CFA expression, code without CFI; a stack in
 * no mapping /proc names) unwinds the whole stack with libunwind's unw_backtrace instead, which
 * TFS_UNWIND=libunwind forces for every backtrace: the reference the walk must equal, frame for
 * frame. An object loaded where an unloaded one was keeps no rule of the old one: the program's
 * dlclose bumps the cache generation, and so does a rule read that finds the loader's unload
 * count moved (glibc's own dlclose of its gconv modules).
 *
 * libunwind is opened with dlopen(RTLD_LOCAL) when backtraces are on, not linked:
 * libunwind.so.8 exports _Unwind_RaiseException and friends and a weak backtrace(), which a
 * preloaded dependency would interpose on the program's libgcc_s and glibc. libunwind opens
 * a pipe on its first address check (it validates addresses by writing them to it) and
 * keeps it: on the lowest free descriptors, which the program would otherwise have got. So
 * the interposed pipe2 (calls.txt) moves a pipe made while libunwind runs for the capture
 * up to descriptors near the top of the limit (cap_unwind_pipe), where the program's close,
 * close_range, closefrom, dup2, dup3 and fcntl leave it be (cap_fd_own). Only the shared library (TFS_CAP_SHARED: the one
 * with interposers, the only one whose allocations are traced) unwinds; the static variant
 * never loads libunwind.
 *
 * Objects are found with dl_iterate_phdr at start and again whenever a new frame falls
 * outside every object known so far and the loader's object count has grown since the last
 * look (a dlopen); an object is announced once per load. An object loaded where others were
 * before it in this process (dlclose, then dlopen of another object there) is a new load:
 * it is announced with a tag, the number of loads it overlaps (spool_i.h, frame tags), the
 * loads it overlaps are known to be gone (as are, at the first look after a dlclose, the loads
 * no longer in the process), and from then on the frames recorded in it carry its tag, so
 * that the consumer names them after it and the frames of the earlier loads after theirs.
 * The same file loaded again at the same place is the same load again (its frames, and
 * names, are the same): it takes its first tag back and is not announced again.
 */
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <link.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <ucontext.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tfs/capture.h"
#include "calls_i.h"
#include "capture_i.h"
#include "cfi_i.h"
#include "spool_i.h"

#define TLS_IE __attribute__((tls_model("initial-exec")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define MAX_MODULES 1024 /* objects announced; later ones go unannounced */
#define HIGH_FD_ROOM 64	 /* libunwind's pipe goes this far below the descriptor limit */
#define SELF_SLACK 16	 /* frames walked beyond the depth: the capture's own */
#define MAX_WALK (SPOOL_MAX_BT_FRAMES + SELF_SLACK)
#define RULE_BITS 16	 /* the rule cache: 2^RULE_BITS slots */
#define RULE_PROBES 8	 /* slots looked at from a return address's own */
#define MIN_CODE 4096	 /* a return address below this ends nothing: libunwind decides */

struct range {
	uint64_t lo, hi;
};

/*
 * A rule as one word, so that a reader never sees half of one: bits 0-23 cfa_off, 24-39
 * bp_off, 40-42 cfa, 43-44 bp, 45-63 the cache generation it was read in.
 */
#define RULE_GEN_SHIFT 45
#define RULE_GEN_MASK ((UINT64_C(1) << (64 - RULE_GEN_SHIFT)) - 1)
#define RULE_MAX_CFA_OFF ((1 << 23) - 1)

/* A slot of the rule cache: a return address (0: free; set once), its rule word. */
struct rule_slot {
	_Atomic uint64_t ra;
	_Atomic uint64_t word;
};

/* One frame of a walk. */
struct frame {
	uintptr_t ra; /* the return address into its function (the walk's own: its pc + 1) */
	uintptr_t sp, bp;
	uintptr_t bp_at;  /* where the step to it read bp; 0: it did not; BP_UNTRUSTED: the step
			     read another word too, so it is never taken on trust */
	uint32_t outer;	  /* frames outside the capture from this one to the outermost walked */
	uint32_t own;	  /* 1: its return address is in the capture library */
};
#define BP_UNTRUSTED 1

/*
 * A thread's last walk and its backtrace, in its own mapping. The walk lies in
 * chain[lo, hi), innermost first. A next walk that keeps its outer part whole leaves that
 * part in place and puts its new inner frames below lo (the chain is moved to the middle
 * when there is no room); any other next walk is made in outer[] and copied in.
 */
struct walker {
	struct range stack;	/* the mapping holding the stack of the last walk */
	struct range stack_alt; /* the one before (a signal stack, a coroutine's...) */
	uint32_t gen;	    /* cache generation of the last walk; 0: none to reuse */
	uint32_t lo, hi;
	bool ended;	    /* the last walk reached the outermost frame (CFI_END) */
	bool stale;	    /* the walk under way met a newer cache generation */
	uint32_t n_out;
	uint64_t out[SPOOL_MAX_BT_FRAMES]; /* its backtrace, cap_unwind()'s result */
	struct frame chain[2 * MAX_WALK];
	struct frame inner[MAX_WALK], outer[MAX_WALK]; /* a walk's new frames */
};

/* libunwind's unw_backtrace: the reference, and the way through what the walk cannot do */
static __typeof__(unw_backtrace) *g_backtrace;
/* stepping from a signal's context (x86-64; elsewhere unw_backtrace cut at the frame) */
static __typeof__(unw_init_local2) *g_init_local2;
static __typeof__(unw_step) *g_step;
static __typeof__(unw_get_reg) *g_get_reg;
static uint32_t g_bt_adjust; /* 1: its fast trace gives return addresses minus 1 */
static bool g_libunwind_only; /* TFS_UNWIND=libunwind */
static bool g_stats;	       /* TFS_UNWIND_STATS=1: count the backtraces of each way */
static _Atomic unsigned long long g_n_walks, g_n_libunwind;
static bool g_ready;
static struct range g_self; /* this library's PT_LOAD span */

static struct rule_slot *g_rules;
static _Atomic uint32_t g_gen = 1;	    /* bumped when an object may have been unloaded */
static _Atomic unsigned long long g_subs; /* the loader's unload count last seen */
static pthread_key_t g_walker_key;

/* A load of an object, as announced (REC_MODULE). */
struct load {
	struct range r;		/* its PT_LOAD span */
	uint64_t bias, id;	/* its load bias, and a hash of its path: which file */
	uint32_t tag;		/* loads before it that it overlaps (spool_i.h frame tags) */
	_Atomic uint32_t live;	/* 0: another load overlapped it: it is gone */
};

static struct load g_mods[MAX_MODULES]; /* [0, g_n_mods) published, append-only */
static _Atomic uint32_t g_n_mods;
static atomic_flag g_scan_lock = ATOMIC_FLAG_INIT;
static unsigned long long g_scan_adds; /* dlpi_adds at the last full scan; under the lock */
/* g_gen when the objects were last looked at: an object unloaded since may have been
 * replaced by another at the same addresses, which a lookup would take for it */
static _Atomic uint32_t g_scan_gen;
/* bumped when a load is known to be gone: a thread's last lookup may name it */
static _Atomic uint32_t g_mods_epoch;
_Atomic bool cap_modules_reloaded;

/* The calling thread's last lookup: the live load holding an address, its tag. */
static _Thread_local struct {
	struct range r;
	uint32_t tag, epoch;
} tls_last_mod TLS_IE;
static _Thread_local bool tls_unwinding TLS_IE;
static _Thread_local struct walker *tls_walker TLS_IE;
static _Thread_local bool tls_walker_gone TLS_IE; /* past its thread's teardown */

#ifdef TFS_CAP_SHARED
/* Move @fd to a descriptor near the top of the limit. @return the new one, or @fd */
static int move_high(int fd, int flags)
{
	struct rlimit lim;
	long low = 512;
	int nfd;

	if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
	    lim.rlim_cur > 2 * HIGH_FD_ROOM)
		low = (long)lim.rlim_cur - HIGH_FD_ROOM;
	nfd = fcntl(fd, (flags & O_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD, (int)low);
	if (nfd < 0)
		return fd;
	close(fd);
	return nfd;
}

/* libunwind's pipe, where cap_unwind_pipe() moved it (-1: none yet); a new one replaces it */
static _Atomic int g_own_fd[2] = {-1, -1};

void cap_unwind_pipe(int fds[2], int flags)
{
	int saved_errno;

	if (!tls_unwinding)
		return;
	saved_errno = errno;
	fds[0] = move_high(fds[0], flags);
	fds[1] = move_high(fds[1], flags);
	atomic_store(&g_own_fd[0], fds[0]);
	atomic_store(&g_own_fd[1], fds[1]);
	errno = saved_errno;
}

void cap_fd_own_get(int fds[2])
{
	const int a = atomic_load_explicit(&g_own_fd[0], memory_order_relaxed);
	const int b = atomic_load_explicit(&g_own_fd[1], memory_order_relaxed);

	fds[0] = tls_unwinding ? -1 : a < b ? a : b;
	fds[1] = tls_unwinding ? -1 : a < b ? b : a;
}

bool cap_fd_own(int fd)
{
	return fd >= 0 && !tls_unwinding &&
	       (fd == atomic_load_explicit(&g_own_fd[0], memory_order_relaxed) ||
		fd == atomic_load_explicit(&g_own_fd[1], memory_order_relaxed));
}

/*
 * The program's dlclose (calls.txt): code may go, so every cached rule is read again; and
 * the call is recorded with the threads.
 */
__attribute__((visibility("default"))) int dlclose(void *handle)
{
	static int (*real)(void *);
	uint64_t t0, args[3];
	int rc, err;

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "dlclose");
	if (!real)
		return -1;
	t0 = cap_now_ns();
	rc = real(handle);
	err = errno;
	atomic_fetch_add_explicit(&g_gen, 1, memory_order_acq_rel);
	if ((tfs_capture_mask_ & TFS_TRACE_THREADS) && !cap_tls_depth) {
		uint64_t t = cap_now_ns();

		args[0] = t > t0 ? t - t0 : 0;
		args[1] = (uintptr_t)handle;
		args[2] = (uint64_t)(int64_t)rc;
		cap_put_call(CALL_DLCLOSE, t0, args, 3, NULL, 0);
	}
	errno = err;
	return rc;
}
#else
void cap_unwind_pipe(int fds[2], int flags)
{
	(void)fds;
	(void)flags;
}

void cap_fd_own_get(int fds[2])
{
	fds[0] = fds[1] = -1;
}

bool cap_fd_own(int fd)
{
	(void)fd;
	return false;
}
#endif

/* The span of @info's PT_LOAD segments; false when it has none. */
static bool object_range(const struct dl_phdr_info *info, struct range *r)
{
	r->lo = UINT64_MAX;
	r->hi = 0;
	for (uint32_t i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uint64_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type != PT_LOAD)
			continue;
		if (lo < r->lo)
			r->lo = lo;
		if (lo + ph->p_memsz > r->hi)
			r->hi = lo + ph->p_memsz;
	}
	return r->lo < r->hi;
}

static int find_self(struct dl_phdr_info *info, size_t size, void *arg)
{
	const uint64_t here = (uintptr_t)arg;
	struct range r;

	(void)size;
	if (!object_range(info, &r) || here < r.lo || here >= r.hi)
		return 0;
	g_self = r;
	return 1;
}

static inline bool is_self(uint64_t a)
{
	return a >= g_self.lo && a < g_self.hi;
}

/* ---- the reference: libunwind ---- */

/*
 * The calling thread's backtrace by libunwind's unw_backtrace, @frames as cap_unwind()
 * gives them: return addresses (the pc itself in a frame a signal interrupted), also from
 * a libunwind whose fast trace gives each return address minus 1 (g_bt_adjust).
 * @return frames stored
 */
static __attribute__((noinline)) uint32_t unwind_libunwind(uint64_t *frames, uint32_t max)
{
	void *ips[MAX_WALK];
	uint64_t kept[SPOOL_MAX_BT_FRAMES];
	uint32_t n = 0;
	int got;

	tls_unwinding = true;
	got = g_backtrace(ips, MAX_WALK);
	tls_unwinding = false;
	/* innermost first; the capture's own frames (interposers in between too) left out */
	for (int i = 0; i < got && n < max; i++) {
		uint64_t ip = (uintptr_t)ips[i] + g_bt_adjust;

		if (!is_self(ip))
			kept[n++] = ip;
	}
	for (uint32_t i = 0; i < n; i++)
		frames[i] = kept[n - 1 - i];
	return n;
}

/* unw_backtrace from here: whether its second frame is the return address minus 1. */
static __attribute__((noinline)) uint32_t bt_adjust(void)
{
	const uintptr_t ra = (uintptr_t)__builtin_return_address(0);
	void *ips[2];
	int n = g_backtrace(ips, 2);

	__asm__ volatile("" : : : "memory"); /* not a tail call: this frame is ips[0] */
	return n == 2 && (uintptr_t)ips[1] + 1 == ra;
}

/* ---- the rule cache ---- */

static inline uint64_t rule_word(struct cfi_rule r, uint32_t gen)
{
	return (uint64_t)((uint32_t)r.cfa_off & 0xffffffu) | (uint64_t)(uint16_t)r.bp_off << 24 |
	       (uint64_t)r.cfa << 40 | (uint64_t)r.bp << 43 |
	       (uint64_t)(gen & RULE_GEN_MASK) << RULE_GEN_SHIFT;
}

static inline struct cfi_rule rule_of(uint64_t w)
{
	struct cfi_rule r;

	r.cfa_off = (int32_t)((uint32_t)w << 8) >> 8;
	r.bp_off = (int16_t)(uint16_t)(w >> 24);
	r.cfa = (uint8_t)((w >> 40) & 7);
	r.bp = (uint8_t)((w >> 43) & 3);
	return r;
}

static inline size_t rule_hash(uintptr_t ra)
{
	return (size_t)((ra * UINT64_C(0x9e3779b97f4a7c15)) >> (64 - RULE_BITS));
}

/* The cached rule of return address @ra in generation @gen: false when not cached. */
static inline bool rule_get(uintptr_t ra, uint32_t gen, struct cfi_rule *out)
{
	const size_t mask = ((size_t)1 << RULE_BITS) - 1;
	size_t h = rule_hash(ra);

	for (uint32_t i = 0; i < RULE_PROBES; i++) {
		const struct rule_slot *s = &g_rules[(h + i) & mask];
		uint64_t k = atomic_load_explicit(&s->ra, memory_order_acquire), w;

		if (k == ra) {
			w = atomic_load_explicit(&s->word, memory_order_acquire);
			if ((w >> RULE_GEN_SHIFT) != (gen & RULE_GEN_MASK))
				return false;
			*out = rule_of(w);
			return true;
		}
		if (k == 0)
			return false;
	}
	return false;
}

static void rule_put(uintptr_t ra, uint64_t w)
{
	const size_t mask = ((size_t)1 << RULE_BITS) - 1;
	size_t h = rule_hash(ra);

	for (uint32_t i = 0; i < RULE_PROBES; i++) {
		struct rule_slot *s = &g_rules[(h + i) & mask];
		uint64_t k = atomic_load_explicit(&s->ra, memory_order_acquire);

		if (k == 0 && atomic_compare_exchange_strong_explicit(&s->ra, &k, ra,
								       memory_order_acq_rel,
								       memory_order_acquire))
			k = ra;
		if (k == ra) {
			atomic_store_explicit(&s->word, w, memory_order_release);
			return;
		}
	}
	/* the neighbourhood is full: this address is read from its CFI every time */
}

/* The rule of return address @ra (the walk's own frame: its pc + 1), read and cached. */
static __attribute__((noinline)) struct cfi_rule rule_fill(uintptr_t ra, uint32_t *gen)
{
	uint32_t g = atomic_load_explicit(&g_gen, memory_order_acquire);
	unsigned long long subs, seen;
	struct cfi_rule r = cap_cfi_rule(ra - 1, &subs);

	seen = atomic_exchange_explicit(&g_subs, subs, memory_order_acq_rel);
	if (seen != subs) /* unloaded meanwhile, maybe not by dlclose (glibc's own modules) */
		g = atomic_fetch_add_explicit(&g_gen, 1, memory_order_acq_rel) + 1;
	if (r.cfa_off > RULE_MAX_CFA_OFF || r.cfa_off < -RULE_MAX_CFA_OFF - 1)
		r.cfa = CFI_OTHER;
	rule_put(ra, rule_word(r, g));
	*gen = g;
	return r;
}

/* ---- the walk ---- */

/* The mapping of /proc/self/maps that holds @sp, read by raw system calls. */
static bool stack_of(uintptr_t sp, struct range *out)
{
	char buf[4096];
	size_t fill = 0;
	bool found = false;
	long fd = syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	while (!found) {
		long got = syscall(SYS_read, fd, buf + fill, sizeof(buf) - 1 - fill);
		char *line = buf, *nl;

		if (got <= 0)
			break;
		fill += (size_t)got;
		buf[fill] = '\0';
		while (!found && (nl = strchr(line, '\n'))) {
			char *end;
			uintptr_t lo = strtoull(line, &end, 16), hi;

			hi = *end == '-' ? strtoull(end + 1, NULL, 16) : 0;
			if (sp >= lo && sp < hi) {
				*out = (struct range){lo, hi};
				found = true;
			}
			line = nl + 1;
		}
		fill -= (size_t)(line - buf);
		memmove(buf, line, fill);
	}
	syscall(SYS_close, fd);
	return found;
}

/*
 * The destructor of g_walker_key, run among the program's TSD destructors: later walks of the
 * thread go through libunwind. Its unmapping is the capture's own, not the program's.
 */
static void walker_free(void *arg)
{
	tls_walker = NULL;
	tls_walker_gone = true;
	cap_tls_depth++;
	munmap(arg, sizeof(struct walker));
	cap_tls_depth--;
}

/* The calling thread's walker, made on its first walk; NULL when none can be. */
static struct walker *walker_get(void)
{
	struct walker *w = tls_walker;

	if (likely(w) || tls_walker_gone)
		return w;
	w = mmap(NULL, sizeof(*w), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (w == MAP_FAILED)
		return NULL;
	if (pthread_setspecific(g_walker_key, w) != 0) {
		munmap(w, sizeof(*w));
		return NULL;
	}
	tls_walker = w;
	return w;
}

/* A word of the stack at @a, when [a, a + 8) lies in [@lo, @hi). */
static inline bool peek(uintptr_t a, uintptr_t lo, uintptr_t hi, uintptr_t *v)
{
	if (a < lo || a > hi - 8 || (a & 7))
		return false;
	*v = *(const uintptr_t *)a;
	return true;
}

/*
 * One step outwards from @f by @r into @next, reading only words at or above @f's rsp and
 * below @hi. false: libunwind must do this stack
 */
static inline bool step(const struct frame *f, struct cfi_rule r, uintptr_t hi,
			struct frame *next)
{
	uintptr_t cfa, a;

	switch (r.cfa) {
	case CFI_RSP:
		cfa = f->sp + (uintptr_t)(intptr_t)r.cfa_off;
		break;
	case CFI_RBP:
		cfa = f->bp + (uintptr_t)(intptr_t)r.cfa_off;
		break;
	case CFI_RBP_DEREF:
		if (!peek(f->bp + (uintptr_t)(intptr_t)r.cfa_off, f->sp, hi, &cfa))
			return false;
		break;
	default:
		return false;
	}
	if (cfa < f->sp + 8 || !peek(cfa - 8, f->sp, hi, &next->ra) || next->ra < MIN_CODE)
		return false;
	next->sp = cfa;
	next->bp_at = 0;
	next->bp = f->bp;
	if (r.bp != CFI_BP_SAME) {
		a = (r.bp == CFI_BP_AT_CFA ? cfa : f->bp) + (uintptr_t)(intptr_t)r.bp_off;
		if (!peek(a, f->sp, hi, &next->bp))
			return false;
		next->bp_at = a;
	}
	if (r.cfa == CFI_RBP_DEREF)
		next->bp_at = BP_UNTRUSTED;
	next->own = is_self(next->ra);
	return true;
}

/*
 * The rule of @f's return address. false: an object may have gone since the walk began
 * (w->stale: the walk starts again)
 */
static inline bool rule_at(struct walker *w, const struct frame *f, uint32_t gen,
			   struct cfi_rule *r)
{
	uint32_t g = gen;

	if (likely(rule_get(f->ra, gen, r)))
		return true;
	*r = rule_fill(f->ra, &g);
	w->stale = g != gen;
	return !w->stale;
}

/* Whether the step to @f, a frame of the last walk, still reads what it read. */
static inline bool still_read(const struct frame *f)
{
	/* the words were at or above a frame at or above this walk's rsp: no bounds to check */
	if (*(const uintptr_t *)(f->sp - 8) != f->ra)
		return false;
	return !f->bp_at || (f->bp_at != BP_UNTRUSTED && *(const uintptr_t *)f->bp_at == f->bp);
}

/*
 * Of the last walk's frames from chain[@j] (whose registers are those of the new walk's
 * frame) outwards, the last one whose step still reads what it read, or where @kept
 * frames outside the capture reach @max: frames [j, return] are the new walk's too.
 */
static inline uint32_t still_valid(const struct walker *w, uint32_t j, uint32_t *kept,
				   uint32_t max)
{
	const struct frame *c = w->chain, *f = &c[j + 1], *end = &c[w->hi];

	if (*kept + c[j].outer - !c[j].own <= max) {
		/* all of them fit: no count to keep */
		while (f < end && still_read(f))
			f++;
		*kept += c[j].outer - !c[j].own - (f < end ? f->outer : 0);
		return (uint32_t)(f - c) - 1;
	}
	for (; f < end && *kept < max && still_read(f); f++)
		*kept += !f->own;
	return (uint32_t)(f - c) - 1;
}

/*
 * The frame of the last walk with @f's registers, the search going on from *@j: its index,
 * or UINT32_MAX.
 */
static inline uint32_t match(const struct walker *w, const struct frame *f, uint32_t *j)
{
	const struct frame *c = w->chain;

	while (*j < w->hi && c[*j].sp < f->sp)
		(*j)++;
	if (*j < w->hi && c[*j].sp == f->sp && c[*j].ra == f->ra && c[*j].bp == f->bp)
		return *j;
	return UINT32_MAX;
}

/*
 * Set the chain's counts of outer frames and make its backtrace in w->out, outermost first,
 * both from chain[@from] inwards to chain[lo] (out[0, @done) is already the backtrace's
 * outer part, chain[from + 1] on counted). @return how many of its first frames are those
 * of the backtrace it replaces
 */
static uint32_t backtrace_of(struct walker *w, uint32_t from, uint32_t done)
{
	const struct frame *lo = &w->chain[w->lo];
	const uint32_t n_last = w->n_out;
	uint32_t n = done, same = done, k = from + 1 < w->hi ? w->chain[from + 1].outer : 0;

	for (struct frame *f = &w->chain[from + 1]; f-- > lo;) {
		f->outer = k += !f->own;
		if (f->own)
			continue;
		if (same == n && n < n_last && w->out[n] == f->ra)
			same++;
		w->out[n++] = f->ra;
	}
	w->n_out = n;
	return same;
}

/*
 * Place the new walk: @a inner frames (w->inner, innermost first), the last walk's frames
 * chain[@j, @t] and @b outer frames (w->outer), moving chain[j, t] to the middle when the
 * new frames do not fit around it. @return the index of chain[t] now
 */
static uint32_t place(struct walker *w, uint32_t a, uint32_t j, uint32_t t, uint32_t b)
{
	const uint32_t cap = 2 * MAX_WALK, len = a + (t + 1 - j) + b;

	if (j < a || t + 1 + b > cap) {
		uint32_t to = (cap - len) / 2 + a;

		memmove(&w->chain[to], &w->chain[j], (t + 1 - j) * sizeof(w->chain[0]));
		t = to + (t - j);
		j = to;
	}
	if (a)
		memcpy(&w->chain[j - a], w->inner, a * sizeof(w->chain[0]));
	if (b)
		memcpy(&w->chain[t + 1], w->outer, b * sizeof(w->chain[0]));
	w->lo = j - a;
	w->hi = t + 1 + b;
	return t;
}

/*
 * Go on outwards from the last of the new chain's @m frames in w->outer, stepping, and at
 * each frame that has the registers of one of the last walk (from chain[*@j] out) taking
 * what of the last walk still holds. @return the new chain's frames, 0 when libunwind must
 * do it
 */
static uint32_t walk_on(struct walker *w, uint32_t m, uint32_t *j, uint32_t gen,
			uint32_t *kept, uint32_t max, bool *ended, uint32_t *seg)
{
	struct frame *nc = w->outer;
	const uintptr_t hi = w->stack.hi;

	while (!*ended && *kept < max) {
		const struct frame *f = &nc[m - 1];
		struct cfi_rule r;
		uint32_t at, t;

		if (!rule_at(w, f, gen, &r))
			return 0;
		if (r.cfa == CFI_END) {
			*ended = true;
			break;
		}
		if (m == MAX_WALK || !step(f, r, hi, &nc[m]))
			return 0;
		*kept += !nc[m].own;
		at = match(w, &nc[m++], j);
		if (at == UINT32_MAX)
			continue;
		t = still_valid(w, at, kept, max);
		if (m + (t - at) > MAX_WALK)
			return 0;
		memcpy(&nc[m], &w->chain[at + 1], (t - at) * sizeof(*nc));
		*ended = t + 1 == w->hi && w->ended;
		if (*ended) { /* the last walk's outer part from nc[m - 1] on, counts included */
			nc[m - 1].outer = w->chain[at].outer;
			*seg = m - 1;
		}
		m += t - at;
		*j = t + 1;
	}
	return m;
}

/*
 * Walk the calling thread's stack from @f0, until @max frames outside the capture or the
 * outermost one, into @w: its chain and its backtrace. @same gets how many first frames of
 * the backtrace are those of the last one. @return false when libunwind must do it
 */
static bool walk(struct walker *w, const struct frame *f0, uint32_t max, uint32_t *same)
{
	const uint32_t gen = atomic_load_explicit(&g_gen, memory_order_acquire);
	const uintptr_t hi = w->stack.hi;
	/* frames outside the capture so far, the one being matched included */
	uint32_t a = 1, j, at, t, kept = !f0->own, s, span, m, seg = UINT32_MAX;
	bool ended = false;

	w->inner[0] = *f0;
	j = w->gen == gen ? w->lo : w->hi; /* another generation: nothing to reuse */
	/* outwards, until a frame has the registers of one of the last walk */
	for (;;) {
		const struct frame *f = &w->inner[a - 1];
		struct cfi_rule r;

		at = match(w, f, &j);
		if (at != UINT32_MAX || kept == max)
			break;
		if (!rule_at(w, f, gen, &r))
			return false;
		if (r.cfa == CFI_END) {
			ended = true;
			break;
		}
		if (a == MAX_WALK || !step(f, r, hi, &w->inner[a]))
			return false;
		kept += !w->inner[a].own;
		a++;
	}
	if (at == UINT32_MAX) {
		/* nothing shared: the new frames alone */
		w->chain[MAX_WALK - 1] = w->inner[a - 1];
		place(w, a - 1, MAX_WALK - 1, MAX_WALK - 1, 0);
		w->ended = ended;
		goto rebuild;
	}
	t = still_valid(w, at, &kept, max);
	if (t + 1 == w->hi && w->ended) {
		/* the last walk's outer part, unchanged: so is the outer part of its backtrace */
		s = w->chain[at].outer;
		span = t - at;
		t = place(w, a - 1, at, t, 0);
		at = t - span;
		*same = backtrace_of(w, at - 1, s);
		w->gen = gen;
		return true;
	}
	/* a word differs or the last walk stopped short: the new chain made aside */
	memcpy(w->outer, w->inner, (a - 1) * sizeof(w->outer[0]));
	memcpy(&w->outer[a - 1], &w->chain[at], (t + 1 - at) * sizeof(w->outer[0]));
	m = a - 1 + t + 1 - at;
	j = t + 1;
	m = walk_on(w, m, &j, gen, &kept, max, &ended, &seg);
	if (m == 0)
		return false;
	if (seg != UINT32_MAX)
		s = w->outer[seg].outer;
	memcpy(&w->chain[MAX_WALK / 2], w->outer, m * sizeof(w->outer[0]));
	w->lo = MAX_WALK / 2;
	w->hi = MAX_WALK / 2 + m;
	w->ended = ended;
	if (seg != UINT32_MAX) {
		/* its outermost part is the last walk's: so is its backtrace's */
		*same = backtrace_of(w, w->lo + seg - 1, s);
		w->gen = gen;
		return true;
	}
rebuild:
	*same = backtrace_of(w, w->hi - 1, 0);
	w->gen = gen;
	return true;
}

/*
 * The calling thread's backtrace, as cap_unwind() gives it: by a walk when it can, else
 * by libunwind into @scratch.
 */
const uint64_t *cap_unwind(uint64_t *scratch, uint32_t max, uint32_t *n, uint32_t *same,
			   const struct cap_frame *from)
{
	struct walker *w;
	struct frame f0;

	*n = *same = 0;
	if (!g_ready || max == 0)
		return scratch;
	if (max > SPOOL_MAX_BT_FRAMES)
		max = SPOOL_MAX_BT_FRAMES;
#if defined(__x86_64__)
	/* made in either mode: the reference then has the same mappings */
	if (!(w = walker_get()) || g_libunwind_only)
		goto libunwind;
	/* this instruction's address (+ 1: as if a return address), rsp and rbp */
	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
			 : "=r"(f0.ra), "=r"(f0.sp), "=r"(f0.bp));
	f0.ra += 1;
	f0.bp_at = 0;
	f0.outer = 0;
	f0.own = 1;
	/*
	 * The interposer's caller instead, when its frame is one of this stack's, below no
	 * frame of ours, and holds its return address: the steps through the capture's own
	 * frames would reach it with these registers (the walk reads no word below it)
	 */
	if (from && from->sp > f0.sp && from->sp - f0.sp < (UINT64_C(1) << 20) &&
	    !(from->sp & 7) && *(const uintptr_t *)(from->sp - 8) == from->ra &&
	    from->ra >= MIN_CODE) {
		f0.ra = from->ra;
		f0.sp = from->sp;
		f0.bp = from->bp;
		f0.own = is_self(from->ra);
	}
	if (unlikely(f0.sp < w->stack.lo || f0.sp >= w->stack.hi)) {
		struct range other = w->stack;

		w->gen = 0; /* what the last walk read may be another stack's */
		if (f0.sp >= w->stack_alt.lo && f0.sp < w->stack_alt.hi)
			w->stack = w->stack_alt;
		else if (!stack_of(f0.sp, &w->stack))
			goto libunwind_instead;
		w->stack_alt = other;
	}
	w->stale = false;
	if (likely(walk(w, &f0, max, same)) || (w->stale && walk(w, &f0, max, same))) {
		if (unlikely(g_stats))
			atomic_fetch_add_explicit(&g_n_walks, 1, memory_order_relaxed);
		*n = w->n_out;
		return w->out;
	}
libunwind_instead:
	/* neither the last walk nor its backtrace is what this call returns */
	w->gen = 0;
	w->n_out = 0;
libunwind:
#else
	(void)w;
	(void)f0;
	(void)from;
#endif
	if (unlikely(g_stats))
		atomic_fetch_add_explicit(&g_n_libunwind, 1, memory_order_relaxed);
	*n = unwind_libunwind(scratch, max);
	return scratch;
}

int cap_unwind_init(void)
{
	__typeof__(unw_set_caching_policy) *policy;
	unw_addr_space_t *local;
	const char *env = getenv("TFS_UNWIND");
	uint64_t scratch[1];
	uint32_t n, same;
	void *h;

#ifndef TFS_CAP_SHARED
	return -ENOTSUP;
#endif
	h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return -ENOENT;
	*(void **)&g_backtrace = dlsym(h, "unw_backtrace");
	if (!g_backtrace)
		return -ENOENT;
#if defined(__x86_64__)
	*(void **)&g_init_local2 = dlsym(h, "_ULx86_64_init_local2");
	*(void **)&g_step = dlsym(h, "_ULx86_64_step");
	*(void **)&g_get_reg = dlsym(h, "_ULx86_64_get_reg");
	/* the per-thread cache needs no lock; the global one masks signals around each use */
	*(void **)&policy = dlsym(h, "_ULx86_64_set_caching_policy");
	local = dlsym(h, "_ULx86_64_local_addr_space");
	if (policy && local) {
		tls_unwinding = true; /* libunwind starts (and makes its pipe) here */
		policy(*local, UNW_CACHE_PER_THREAD);
		tls_unwinding = false;
	}
#else
	(void)policy;
	(void)local;
#endif
	tls_unwinding = true; /* libunwind's own start-up: not in the program's first allocation */
	g_bt_adjust = bt_adjust();
	tls_unwinding = false;
	g_libunwind_only = env && !strcmp(env, "libunwind");
	env = getenv("TFS_UNWIND_STATS");
	g_stats = env && !strcmp(env, "1");
	g_rules = mmap(NULL, sizeof(*g_rules) << RULE_BITS, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g_rules == MAP_FAILED || pthread_key_create(&g_walker_key, walker_free) != 0)
		g_libunwind_only = true;
	dl_iterate_phdr(find_self, (void *)(uintptr_t)cap_unwind);
	g_ready = true;
	cap_unwind(scratch, 1, &n, &same, NULL); /* the rules of the capture's own frames */
	return 0;
}

/* TFS_UNWIND_STATS=1: how the backtraces were made, on stderr at exit. */
__attribute__((destructor)) static void unwind_stats(void)
{
	char msg[160];
	int len;

	if (!g_stats)
		return;
	len = snprintf(msg, sizeof(msg), "tracefs: backtraces: %llu walked, %llu by libunwind\n",
		       atomic_load(&g_n_walks), atomic_load(&g_n_libunwind));
	if (len > 0)
		(void)!write(STDERR_FILENO, msg, (size_t)len);
}

/* The address of the instruction a signal interrupted, from its handler's context. */
static uint64_t signal_pc(const void *uc)
{
	const ucontext_t *u = uc;

#if defined(__x86_64__)
	return (uint64_t)u->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
	return (uint64_t)u->uc_mcontext.pc;
#else
	(void)u;
	return 0;
#endif
}

/* Step from the signal context @uc: @ips innermost first. @return how many, 0 on failure */
static uint32_t step_from(void *uc, uint64_t *ips, uint32_t max)
{
	unw_cursor_t c;
	uint32_t n = 0;

	if (!g_init_local2 || !g_step || !g_get_reg ||
	    g_init_local2(&c, (unw_context_t *)uc, UNW_INIT_SIGNAL_FRAME) < 0)
		return 0;
	do {
		unw_word_t ip;

		if (g_get_reg(&c, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		ips[n++] = ip;
	} while (n < max && g_step(&c) > 0);
	return n;
}

/* unw_backtrace from the handler, its frames up to the interrupted one left out. */
static uint32_t cut_at_signal(uint64_t pc, uint64_t *ips, uint32_t max)
{
	void *raw[SPOOL_MAX_BT_FRAMES + 2 * SELF_SLACK];
	int got = g_backtrace(raw, (int)(sizeof(raw) / sizeof(raw[0])));
	uint32_t n = 0, i = 0;

	while (i < (uint32_t)(got > 0 ? got : 0) && (uintptr_t)raw[i] != pc)
		i++;
	for (; i < (uint32_t)(got > 0 ? got : 0) && n < max; i++)
		ips[n++] = (uintptr_t)raw[i];
	return n;
}

uint32_t cap_unwind_signal(uint64_t *frames, uint32_t max, void *uc)
{
	uint64_t ips[SPOOL_MAX_BT_FRAMES + SELF_SLACK];
	const uint64_t pc = signal_pc(uc);
	uint32_t n_ips, first = 0, n;

	if (!g_backtrace || max == 0)
		return 0;
	if (max > SPOOL_MAX_BT_FRAMES)
		max = SPOOL_MAX_BT_FRAMES;
	tls_unwinding = true;
	n_ips = step_from(uc, ips, max + SELF_SLACK);
	if (n_ips == 0 && pc)
		n_ips = cut_at_signal(pc, ips, max + SELF_SLACK);
	tls_unwinding = false;
	if (n_ips == 0 && pc) /* nothing to step from: the faulting address alone */
		ips[n_ips++] = pc;
	/* the interrupted instruction takes a return address's place: symbolised at - 1 */
	if (n_ips > 0 && ips[0] == pc)
		ips[0] = pc + 1;
	for (uint32_t i = 0; i < n_ips; i++)
		if (ips[i] < g_self.lo || ips[i] >= g_self.hi)
			ips[first++] = ips[i];
	n = first < max ? first : max;
	for (uint32_t i = 0; i < n; i++)
		frames[i] = ips[n - 1 - i];
	return n;
}

/*
 * The live load holding @a, newest first, into the thread's last lookup. @return false
 * when none does
 */
static bool lookup(uint64_t a)
{
	const uint32_t epoch = atomic_load_explicit(&g_mods_epoch, memory_order_acquire);
	uint32_t n;

	if (a >= tls_last_mod.r.lo && a < tls_last_mod.r.hi && tls_last_mod.epoch == epoch)
		return true;
	n = atomic_load_explicit(&g_n_mods, memory_order_acquire);
	for (uint32_t i = n; i-- > 0;) {
		const struct load *m = &g_mods[i];

		if (a >= m->r.lo && a < m->r.hi &&
		    atomic_load_explicit(&m->live, memory_order_relaxed)) {
			tls_last_mod.r = m->r;
			tls_last_mod.tag = m->tag;
			tls_last_mod.epoch = epoch;
			return true;
		}
	}
	return false;
}

void cap_modules_key(uint64_t *frames, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (lookup(frames[i]) && tls_last_mod.tag)
			frames[i] |= (uint64_t)tls_last_mod.tag << SPOOL_FRAME_TAG_SHIFT;
}

static int read_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds))
		*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
}

/* FNV-1a of @s: which file a load is of. */
static uint64_t path_id(const char *s)
{
	uint64_t h = 0xcbf29ce484222325u;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3u;
	return h;
}

static bool overlap(const struct range *a, const struct range *b)
{
	return a->lo < b->hi && b->lo < a->hi;
}

/*
 * Load @m, now in the process, overlaps the live loads @m does not equal: they are gone.
 * @return the highest tag of every load it overlaps, live or gone; -1: none
 */
static int64_t supersede(const struct load *m, uint32_t n)
{
	int64_t top = -1;
	bool gone = false;

	for (uint32_t i = 0; i < n; i++) {
		struct load *o = &g_mods[i];

		if (o == m || !overlap(&o->r, &m->r))
			continue;
		if ((int64_t)o->tag > top)
			top = o->tag;
		if (atomic_load_explicit(&o->live, memory_order_relaxed)) {
			atomic_store_explicit(&o->live, 0, memory_order_relaxed);
			gone = true;
		}
	}
	if (gone)
		atomic_fetch_add_explicit(&g_mods_epoch, 1, memory_order_release);
	return top;
}

/* The path of @info's object as the consumer can open it, in @buf when made. */
static const char *object_path(const struct dl_phdr_info *info, char *buf, size_t cap)
{
	const char *path = info->dlpi_name;
	ssize_t len;

	if (!path || !*path) {
		/* the main program has no name here */
		len = readlink("/proc/self/exe", buf, cap - 1);
		buf[len > 0 ? len : 0] = '\0';
		return buf;
	}
	/* dlopen("./x.so") keeps the name as given: the consumer may run elsewhere */
	if (*path != '/' && strchr(path, '/') && cap >= PATH_MAX && realpath(path, buf))
		return buf;
	return path;
}

static int announce(struct dl_phdr_info *info, size_t size, void *arg)
{
	uint32_t n = atomic_load_explicit(&g_n_mods, memory_order_relaxed);
	char buf[PATH_MAX];
	const char *path;
	struct load *m;
	uint64_t id;
	int64_t top;
	struct range r;

	(void)size;
	(void)arg;
	if (!object_range(info, &r))
		return 0;
	path = object_path(info, buf, sizeof(buf));
	id = path_id(path);
	for (uint32_t i = 0; i < n; i++) {
		m = &g_mods[i];
		if (m->r.lo != r.lo || m->r.hi != r.hi || m->bias != info->dlpi_addr || m->id != id)
			continue;
		/* announced before; loaded again in between if gone: the same names again */
		if (!atomic_load_explicit(&m->live, memory_order_relaxed)) {
			supersede(m, n);
			atomic_store_explicit(&m->live, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&g_mods_epoch, 1, memory_order_release);
		}
		return 0;
	}
	if (n == MAX_MODULES)
		return 1;
	m = &g_mods[n];
	*m = (struct load){.r = r, .bias = info->dlpi_addr, .id = id};
	top = supersede(m, n);
	m->tag = top < 0 ? 0 : top < SPOOL_FRAME_TAG_MAX ? (uint32_t)top + 1 : SPOOL_FRAME_TAG_MAX;
	atomic_store_explicit(&m->live, 1, memory_order_relaxed);
	if (m->tag)
		atomic_store_explicit(&cap_modules_reloaded, true, memory_order_relaxed);
	cap_put_module(info->dlpi_addr, r.lo, r.hi, m->tag, path);
	atomic_store_explicit(&g_n_mods, n + 1, memory_order_release);
	return 0;
}

/* The loads still in the process (marked in a bitmap of g_mods indexes), in a scan. */
struct present {
	uint32_t n;
	uint64_t bits[MAX_MODULES / 64];
};

static int mark_present(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct present *p = arg;
	char buf[PATH_MAX];
	struct range r;
	uint64_t id;

	(void)size;
	if (!object_range(info, &r))
		return 0;
	id = path_id(object_path(info, buf, sizeof(buf)));
	for (uint32_t i = 0; i < p->n; i++) {
		const struct load *m = &g_mods[i];

		if (m->r.lo == r.lo && m->r.hi == r.hi && m->bias == info->dlpi_addr && m->id == id)
			p->bits[i / 64] |= UINT64_C(1) << (i % 64);
	}
	return 0;
}

/*
 * Something was unloaded: the loads no longer in the process are gone. Else a frame in an
 * object loaded where one of them was, looked up before that object is announced (which
 * happens only when a frame lies outside every live load), would take the old one's tag.
 */
static void retire_absent(void)
{
	struct present p = {.n = atomic_load_explicit(&g_n_mods, memory_order_relaxed)};
	bool gone = false;

	dl_iterate_phdr(mark_present, &p);
	for (uint32_t i = 0; i < p.n; i++) {
		struct load *m = &g_mods[i];

		if (!(p.bits[i / 64] >> (i % 64) & 1) &&
		    atomic_load_explicit(&m->live, memory_order_relaxed)) {
			atomic_store_explicit(&m->live, 0, memory_order_relaxed);
			gone = true;
		}
	}
	if (gone)
		atomic_fetch_add_explicit(&g_mods_epoch, 1, memory_order_release);
}

void cap_modules_forget(void)
{
	atomic_store_explicit(&g_n_mods, 0, memory_order_relaxed);
	atomic_fetch_add_explicit(&g_mods_epoch, 1, memory_order_relaxed);
	atomic_store_explicit(&cap_modules_reloaded, false, memory_order_relaxed);
	g_scan_adds = 0;
	atomic_flag_clear_explicit(&g_scan_lock, memory_order_release);
}

void cap_modules_scan(void)
{
	unsigned long long adds = 0;
	uint32_t gen;

	while (atomic_flag_test_and_set_explicit(&g_scan_lock, memory_order_acquire))
		;
	gen = atomic_load_explicit(&g_gen, memory_order_acquire);
	if (atomic_exchange_explicit(&g_scan_gen, gen, memory_order_relaxed) != gen &&
	    atomic_load_explicit(&g_n_mods, memory_order_relaxed))
		retire_absent();
	dl_iterate_phdr(read_adds, &adds);
	if (adds != g_scan_adds || atomic_load_explicit(&g_n_mods, memory_order_relaxed) == 0) {
		g_scan_adds = adds;
		dl_iterate_phdr(announce, NULL);
	}
	atomic_flag_clear_explicit(&g_scan_lock, memory_order_release);
}

void cap_modules_check(const uint64_t *frames, uint32_t n)
{
	uint64_t lo, hi;

	if (n && atomic_load_explicit(&g_gen, memory_order_acquire) !=
		     atomic_load_explicit(&g_scan_gen, memory_order_relaxed)) {
		cap_modules_scan(); /* something was unloaded since: look again */
		return;
	}
	/* the thread's last lookup, while it stands: most frames lie in the same object */
	lo = hi = 0;
	if (n && tls_last_mod.epoch == atomic_load_explicit(&g_mods_epoch, memory_order_acquire)) {
		lo = tls_last_mod.r.lo;
		hi = tls_last_mod.r.hi;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (frames[i] >= lo && frames[i] < hi)
			continue;
		if (!lookup(frames[i])) {
			cap_modules_scan();
			return;
		}
		lo = tls_last_mod.r.lo;
		hi = tls_last_mod.r.hi;
	}
}

/* ---- read-only data ---- */

#define RO_SEGMENTS 4 /* read-only segments a thread remembers (formats of several objects) */

/* The thread's last answers of cap_in_rodata(), while g_gen stands. */
static _Thread_local struct {
	struct range yes[RO_SEGMENTS]; /* read-only segments, the oldest replaced first */
	uint64_t no;		       /* an address in none */
	uint32_t gen, next;
} tls_ro TLS_IE;

struct ro_find {
	uint64_t a;
	struct range r;
};

static int find_ro(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct ro_find *f = arg;

	(void)size;
	for (uint32_t i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const uint64_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && !(ph->p_flags & PF_W) && f->a >= lo &&
		    f->a - lo < ph->p_memsz) {
			f->r = (struct range){lo, lo + ph->p_memsz};
			return 1;
		}
	}
	return 0;
}

bool cap_in_rodata(const void *p)
{
	const uint32_t gen = atomic_load_explicit(&g_gen, memory_order_acquire);
	struct ro_find f = {(uintptr_t)p, {0, 0}};

	if (tls_ro.gen != gen) {
		memset(&tls_ro, 0, sizeof(tls_ro));
		tls_ro.gen = gen;
	}
	for (uint32_t i = 0; i < RO_SEGMENTS; i++)
		if (f.a >= tls_ro.yes[i].lo && f.a < tls_ro.yes[i].hi)
			return true;
	if (!p || f.a == tls_ro.no)
		return false;
	if (!dl_iterate_phdr(find_ro, &f)) {
		tls_ro.no = f.a; /* a buffer the program formats into, used again */
		return false;
	}
	tls_ro.yes[tls_ro.next++ % RO_SEGMENTS] = f.r;
	return true;
}
