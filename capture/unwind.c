/*
 * Allocation backtraces, producer side: unwinds the calling thread with libunwind and keeps
 * the consumer told of every object the frames point into (REC_MODULE: path, load bias,
 * address range), so that it can symbolise after the process is gone. libunwind is opened
 * with dlopen(RTLD_LOCAL) when backtraces are on, not linked: libunwind.so.8 exports
 * _Unwind_RaiseException and friends and a weak backtrace(), which a preloaded dependency
 * would interpose on the program's libgcc_s and glibc. Nothing here allocates through the
 * interposed malloc: callers are inside the capture (cap_tls_depth), so what libunwind and
 * dl_iterate_phdr allocate passes through unrecorded. This file does not write the
 * backtrace records (capture.c) nor symbolise (symbolize.c).
 *
 * libunwind opens a pipe on its first address check (it validates addresses by writing them
 * to it) and keeps it: on the lowest free descriptors, which the program would otherwise
 * have got. So the interposed pipe2 (calls.txt) moves a pipe made while libunwind runs for
 * the capture up to descriptors near the top of the limit (cap_unwind_pipe). Only the shared library
 * (TFS_CAP_SHARED: the one with interposers, the only one whose allocations are traced)
 * unwinds; the static variant never loads libunwind.
 *
 * Objects are found with dl_iterate_phdr at start and again whenever a new frame falls
 * outside every object known so far and the loader's object count has grown since the last
 * look (a dlopen); an object is announced once. Objects unloaded by dlclose stay known.
 */
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <link.h>
#include <limits.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <ucontext.h>
#include <unistd.h>

#include "capture_i.h"
#include "spool_i.h"

#define MAX_MODULES 1024 /* objects announced; later ones go unannounced */
#define SELF_SLACK 8	 /* frames asked for beyond the depth: the capture's own */
#define HIGH_FD_ROOM 64	 /* libunwind's pipe goes this far below the descriptor limit */

struct range {
	uint64_t lo, hi;
};

static __typeof__(unw_backtrace) *g_backtrace;
/* stepping from a signal's context (x86-64; elsewhere unw_backtrace cut at the frame) */
static __typeof__(unw_init_local2) *g_init_local2;
static __typeof__(unw_step) *g_step;
static __typeof__(unw_get_reg) *g_get_reg;
static struct range g_self; /* this library's PT_LOAD span */

static struct range g_mods[MAX_MODULES]; /* [0, g_n_mods) published, append-only */
static _Atomic uint32_t g_n_mods;
static atomic_flag g_scan_lock = ATOMIC_FLAG_INIT;
static unsigned long long g_scan_adds; /* dlpi_adds at the last full scan; under the lock */

static _Thread_local struct range tls_last_mod __attribute__((tls_model("initial-exec")));
static _Thread_local bool tls_unwinding __attribute__((tls_model("initial-exec")));

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

void cap_unwind_pipe(int fds[2], int flags)
{
	int saved_errno;

	if (!tls_unwinding)
		return;
	saved_errno = errno;
	fds[0] = move_high(fds[0], flags);
	fds[1] = move_high(fds[1], flags);
	errno = saved_errno;
}
#else
void cap_unwind_pipe(int fds[2], int flags)
{
	(void)fds;
	(void)flags;
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

int cap_unwind_init(void)
{
	__typeof__(unw_set_caching_policy) *policy;
	unw_addr_space_t *local;
	uint64_t ip;
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
	dl_iterate_phdr(find_self, (void *)(uintptr_t)cap_unwind);
	cap_unwind(&ip, 1); /* libunwind's own start-up: not in the program's first allocation */
	return 0;
}

uint32_t cap_unwind(uint64_t *frames, uint32_t max)
{
	void *ips[SPOOL_MAX_BT_FRAMES + SELF_SLACK];
	uint32_t first = 0, n_ips, n; /* first: frames kept */
	int got;

	if (!g_backtrace || max == 0)
		return 0;
	if (max > SPOOL_MAX_BT_FRAMES)
		max = SPOOL_MAX_BT_FRAMES;
	tls_unwinding = true;
	got = g_backtrace(ips, (int)(max + SELF_SLACK));
	tls_unwinding = false;
	n_ips = got > 0 ? (uint32_t)got : 0;
	/* innermost first; the capture's own frames (interposers in between too) left out */
	for (uint32_t i = 0; i < n_ips; i++)
		if ((uintptr_t)ips[i] < g_self.lo || (uintptr_t)ips[i] >= g_self.hi)
			ips[first++] = ips[i];
	n = first < max ? first : max;
	for (uint32_t i = 0; i < n; i++)
		frames[i] = (uintptr_t)ips[n - 1 - i];
	return n;
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

static bool known(uint64_t a)
{
	uint32_t n = atomic_load_explicit(&g_n_mods, memory_order_acquire);

	if (a >= tls_last_mod.lo && a < tls_last_mod.hi)
		return true;
	for (uint32_t i = 0; i < n; i++) {
		if (a >= g_mods[i].lo && a < g_mods[i].hi) {
			tls_last_mod = g_mods[i];
			return true;
		}
	}
	return false;
}

static int read_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds))
		*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
}

static int announce(struct dl_phdr_info *info, size_t size, void *arg)
{
	uint32_t n = atomic_load_explicit(&g_n_mods, memory_order_relaxed);
	char buf[4096];
	const char *path = info->dlpi_name;
	struct range r;
	ssize_t len;

	(void)size;
	(void)arg;
	if (!object_range(info, &r))
		return 0;
	for (uint32_t i = 0; i < n; i++)
		if (g_mods[i].lo == r.lo && g_mods[i].hi == r.hi)
			return 0;
	if (n == MAX_MODULES)
		return 1;
	if (!path || !*path) {
		/* the main program has no name here */
		len = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
		buf[len > 0 ? len : 0] = '\0';
		path = buf;
	} else if (*path != '/' && strchr(path, '/') && realpath(path, buf)) {
		/* dlopen("./x.so") keeps the name as given: the consumer may run elsewhere */
		path = buf;
	}
	cap_put_module(info->dlpi_addr, r.lo, r.hi, path);
	g_mods[n] = r;
	atomic_store_explicit(&g_n_mods, n + 1, memory_order_release);
	return 0;
}

void cap_modules_forget(void)
{
	atomic_store_explicit(&g_n_mods, 0, memory_order_relaxed);
	g_scan_adds = 0;
	atomic_flag_clear_explicit(&g_scan_lock, memory_order_release);
}

void cap_modules_scan(void)
{
	unsigned long long adds = 0;

	while (atomic_flag_test_and_set_explicit(&g_scan_lock, memory_order_acquire))
		;
	dl_iterate_phdr(read_adds, &adds);
	if (adds != g_scan_adds || atomic_load_explicit(&g_n_mods, memory_order_relaxed) == 0) {
		g_scan_adds = adds;
		dl_iterate_phdr(announce, NULL);
	}
	atomic_flag_clear_explicit(&g_scan_lock, memory_order_release);
}

void cap_modules_check(const uint64_t *frames, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		if (!known(frames[i])) {
			cap_modules_scan();
			return;
		}
	}
}
