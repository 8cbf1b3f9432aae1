/*
 * Fatal signals, for `tracefs record`: where the program leaves SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL, SIGABRT, SIGTRAP or SIGSYS at its default action (terminate with a core), the
 * capture's own handler takes it, on an alternate stack of each recording thread (so that a
 * stack overflow is caught too), records a `fatal_signal` event (signal, code, fault
 * address, interrupted instruction, sender, and the backtrace from the interrupted frame
 * when backtraces are on), and then lets the signal do what the default action does: it
 * restores the default action, queues the same signal with the same siginfo to its own
 * thread and returns, so the process dies of it at the interrupted instruction, its core
 * (when the system dumps one) showing the program's state as it would have untraced. The
 * record is complete before that: `tracefs record` reads a chunk up to its last published
 * record however its process died.
 *
 * The program's own actions are honoured exactly: the interposed sigaction and signal (and
 * its bsd_ and sysv_ variants) keep what the program set; a handler or SIG_IGN it sets goes
 * to the kernel as it is (the capture's handler steps aside, so a program catching its own
 * faults, a JIT, Python's faulthandler, sees the very signal frame it would untraced), and
 * its SIG_DFL brings the capture's handler back. Queries answer what the program set. A
 * fault the program catches is therefore not recorded as a fatal_signal (its sigaction call
 * is); one it re-raises after restoring the default action is, at the re-raise. The
 * interposed sigaltstack hides the capture's alternate stack: a program asking for the
 * current one sees none, and one that sets its own replaces it. All calls of the three kinds
 * are recorded when threads are traced.
 *
 * Not done: handlers changed through the raw system call are seen (the kernel's action is
 * read back at each call) but not recorded, sigset() and siginterrupt() act on the kernel's
 * action directly (a later sigaction or signal call puts things right), and a fault
 * inside the capture itself is not recorded (it still kills the process as untraced). A
 * handler the program installs with SA_ONSTACK in a thread without an alternate stack of
 * its own runs on the capture's (256 KiB) instead of the thread's stack.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "calls_i.h"
#include "interpose_i.h"
#include "spool_i.h"

#define ALT_STACK_BYTES (256u * 1024u) /* libunwind stepping from a signal needs some room */
#define GUARD_BYTES 4096u

/* The signals whose default action is to terminate with a core, handled here. */
static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
#define N_FATAL (sizeof(fatal_signals) / sizeof(fatal_signals[0]))

/* What `action` of a sigaction event says the call set (calls.txt). */
enum { ACT_QUERY = 0, ACT_DFL = 1, ACT_IGN = 2, ACT_HANDLER = 3 };

/* One fatal signal; under g_lock. */
struct fatal {
	struct sigaction prog; /* what the program last set (SIG_DFL, no flags at start) */
	bool ours;	       /* the kernel's action is the capture's handler */
};

static struct fatal g_fatal[N_FATAL];
static bool g_on;		 /* the handlers were installed: fatal signals are managed */
static atomic_flag g_lock = ATOMIC_FLAG_INIT;

/* The calling thread's alternate stack, when the capture gave it one (usable part). */
static _Thread_local struct {
	void *base;
	size_t size;
} tls_alt __attribute__((tls_model("initial-exec")));

static void on_fatal(int sig, siginfo_t *si, void *uc);

static struct fatal *fatal_of(int sig)
{
	for (size_t i = 0; i < N_FATAL; i++)
		if (fatal_signals[i] == sig)
			return &g_fatal[i];
	return NULL;
}

/* Take g_lock with every signal blocked (a handler may call sigaction). */
static void lock(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, old);
	cap_tls_depth++;
	while (atomic_flag_test_and_set_explicit(&g_lock, memory_order_acquire))
		;
}

static void unlock(const sigset_t *old)
{
	atomic_flag_clear_explicit(&g_lock, memory_order_release);
	cap_tls_depth--;
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

static bool is_ours(const struct sigaction *a)
{
	return (a->sa_flags & SA_SIGINFO) && a->sa_sigaction == on_fatal;
}

/* Make the capture's handler the kernel's action for @sig. @return 0 or -1 (errno) */
static int install(int sig)
{
	struct sigaction a = {.sa_sigaction = on_fatal, .sa_flags = SA_SIGINFO | SA_ONSTACK};

	sigemptyset(&a.sa_mask);
	return cap_real.sigaction(sig, &a, NULL);
}

static uint64_t action_of(const struct sigaction *a)
{
	if (!a)
		return ACT_QUERY;
	if (!(a->sa_flags & SA_SIGINFO) && a->sa_handler == SIG_DFL)
		return ACT_DFL;
	if (!(a->sa_flags & SA_SIGINFO) && a->sa_handler == SIG_IGN)
		return ACT_IGN;
	return ACT_HANDLER;
}

static void put_sigaction(uint64_t t0, int sig, const struct sigaction *act, int rc, int err)
{
	uint64_t args[6] = {since(t0), (uint64_t)(int64_t)sig, action_of(act),
			    act ? (uint64_t)(unsigned int)act->sa_flags : 0, (uint64_t)(int64_t)rc,
			    rc < 0 ? (uint64_t)err : 0};

	cap_put_call(CALL_SIGACTION, t0, args, 6, NULL, 0);
}

/*
 * sigaction for a managed signal @f: the program's SIG_DFL keeps (or brings back) the
 * capture's handler, anything else goes to the kernel; the old action is the program's.
 */
static int managed(int sig, struct fatal *f, const struct sigaction *act, struct sigaction *old)
{
	struct sigaction cur, prog;
	sigset_t mask;
	int rc = 0, err = 0;

	lock(&mask);
	if (cap_real.sigaction(sig, NULL, &cur) < 0) {
		rc = -1;
		err = errno;
		goto out_unlock;
	}
	/* changed behind our back (the raw system call): the kernel's action is the truth */
	if (f->ours && !is_ours(&cur)) {
		f->ours = false;
		f->prog = cur;
	}
	prog = f->ours ? f->prog : cur;
	if (act && action_of(act) == ACT_DFL) {
		rc = install(sig);
		err = errno;
		if (rc == 0) {
			f->prog = *act;
			f->ours = true;
		}
	} else if (act) {
		rc = cap_real.sigaction(sig, act, NULL);
		err = errno;
		if (rc == 0) {
			f->prog = *act;
			f->ours = false;
		}
	}
	if (rc == 0 && old)
		*old = prog;
out_unlock:
	unlock(&mask);
	errno = err;
	return rc;
}

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	struct fatal *f = fatal_of(sig);
	uint64_t t0;
	int rc, err;

	if (!HAVE(sigaction))
		return -1;
	t0 = cap_now_ns();
	if (g_on && f)
		rc = managed(sig, f, act, old);
	else
		rc = cap_real.sigaction(sig, act, old);
	err = errno;
	if (tracing(TFS_TRACE_THREADS))
		put_sigaction(t0, sig, act, rc, err);
	errno = err;
	return rc;
}

/* signal() and its variants of a managed signal, through managed(): glibc's own would go
 * to the kernel directly. */
static __sighandler_t managed_signal(int sig, struct fatal *f, __sighandler_t h, int flags,
				     bool mask_self)
{
	struct sigaction act = {.sa_handler = h, .sa_flags = flags}, old;
	uint64_t t0 = cap_now_ns();
	int rc, err;

	sigemptyset(&act.sa_mask);
	if (mask_self)
		sigaddset(&act.sa_mask, sig);
	rc = managed(sig, f, &act, &old);
	err = errno;
	if (tracing(TFS_TRACE_THREADS))
		put_sigaction(t0, sig, &act, rc, err);
	errno = err;
	return rc < 0 ? SIG_ERR : old.sa_handler;
}

/* A signal() of glibc's: @real for a signal not managed, else BSD or System V semantics. */
static __sighandler_t any_signal(__sighandler_t (*real)(int, __sighandler_t), int sig,
				 __sighandler_t h, bool sysv)
{
	struct fatal *f = fatal_of(sig);
	struct sigaction act = {.sa_handler = h};
	__sighandler_t old;
	uint64_t t0;
	int err;

	if (g_on && f && h != SIG_ERR)
		return sysv ? managed_signal(sig, f, h, SA_RESETHAND | SA_NODEFER, false)
			    : managed_signal(sig, f, h, SA_RESTART, true);
	t0 = cap_now_ns();
	old = real(sig, h);
	err = errno;
	if (tracing(TFS_TRACE_THREADS))
		put_sigaction(t0, sig, &act, old == SIG_ERR ? -1 : 0, err);
	errno = err;
	return old;
}

EXPORT __sighandler_t signal(int sig, __sighandler_t h)
{
	return HAVE(signal) ? any_signal(cap_real.signal, sig, h, false) : SIG_ERR;
}

/* Declared by <signal.h> for XPG4.2 programs only. */
__sighandler_t bsd_signal(int sig, __sighandler_t h);

EXPORT __sighandler_t bsd_signal(int sig, __sighandler_t h)
{
	return HAVE(bsd_signal) ? any_signal(cap_real.bsd_signal, sig, h, false) : SIG_ERR;
}

EXPORT __sighandler_t sysv_signal(int sig, __sighandler_t h)
{
	return HAVE(sysv_signal) ? any_signal(cap_real.sysv_signal, sig, h, true) : SIG_ERR;
}

EXPORT __sighandler_t __sysv_signal(int sig, __sighandler_t h)
{
	return HAVE(__sysv_signal) ? any_signal(cap_real.__sysv_signal, sig, h, true) : SIG_ERR;
}

/* ---- alternate stacks ---- */

/* Whether @st is the calling thread's alternate stack of the capture's. */
static bool alt_is_ours(const stack_t *st)
{
	return tls_alt.base && !(st->ss_flags & SS_DISABLE) && st->ss_sp == tls_alt.base;
}

EXPORT int sigaltstack(const stack_t *ss, stack_t *old)
{
	stack_t cur, prev;
	uint64_t t0, args[5];
	int rc, err;

	if (!HAVE(sigaltstack))
		return -1;
	t0 = cap_now_ns();
	if (!tls_alt.base || cap_real.sigaltstack(NULL, &cur) < 0 || !alt_is_ours(&cur) ||
	    (cur.ss_flags & SS_ONSTACK)) {
		rc = cap_real.sigaltstack(ss, old);
	} else {
		/* the program sees no alternate stack; one it sets replaces the capture's */
		rc = cap_real.sigaltstack(ss, &prev);
		if (rc == 0 && old)
			*old = (stack_t){.ss_sp = NULL, .ss_flags = SS_DISABLE, .ss_size = 0};
	}
	err = errno;
	if (tracing(TFS_TRACE_THREADS)) {
		args[0] = since(t0);
		args[1] = ss ? (uint64_t)(unsigned int)ss->ss_flags : 0;
		args[2] = ss ? (uint64_t)ss->ss_size : 0;
		args[3] = (uint64_t)(int64_t)rc;
		args[4] = rc < 0 ? (uint64_t)err : 0;
		cap_put_call(CALL_SIGALTSTACK, t0, args, 5, NULL, 0);
	}
	errno = err;
	return rc;
}

void cap_sig_thread_start(void)
{
	const int saved_errno = errno;
	stack_t cur, st;
	uint8_t *p;

	if (!g_on || tls_alt.base || !HAVE(sigaltstack))
		goto out;
	/* a thread with an alternate stack of its own keeps it */
	if (cap_real.sigaltstack(NULL, &cur) < 0 || !(cur.ss_flags & SS_DISABLE))
		goto out;
	p = mmap(NULL, GUARD_BYTES + ALT_STACK_BYTES, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		goto out;
	mprotect(p, GUARD_BYTES, PROT_NONE); /* an overflow faults instead of overwriting */
	st = (stack_t){.ss_sp = p + GUARD_BYTES, .ss_size = ALT_STACK_BYTES, .ss_flags = 0};
	if (cap_real.sigaltstack(&st, NULL) < 0) {
		munmap(p, GUARD_BYTES + ALT_STACK_BYTES);
		goto out;
	}
	tls_alt.base = st.ss_sp;
	tls_alt.size = st.ss_size;
out:
	errno = saved_errno;
}

void cap_sig_thread_end(void)
{
	const int saved_errno = errno;
	const stack_t off = {.ss_flags = SS_DISABLE};
	stack_t cur;

	if (!tls_alt.base || !HAVE(sigaltstack) || cap_real.sigaltstack(NULL, &cur) < 0)
		goto out;
	if (cur.ss_flags & SS_ONSTACK)
		goto out; /* running on it (a handler ending the thread): it stays */
	if (alt_is_ours(&cur) && cap_real.sigaltstack(&off, NULL) < 0)
		goto out;
	munmap((uint8_t *)tls_alt.base - GUARD_BYTES, GUARD_BYTES + tls_alt.size);
	tls_alt.base = NULL;
out:
	errno = saved_errno;
}

/* ---- the handler ---- */

/* The fault address of a signal the kernel raised for an instruction, else 0. */
static uint64_t fault_addr(int sig, const siginfo_t *si)
{
	if (si->si_code <= 0 || si->si_code == SI_KERNEL)
		return 0;
	switch (sig) {
	case SIGSEGV:
	case SIGBUS:
	case SIGFPE:
	case SIGILL:
	case SIGTRAP:
		return (uintptr_t)si->si_addr;
	default:
		return 0;
	}
}

static void record(int sig, siginfo_t *si, void *uc)
{
	uint64_t frames[SPOOL_MAX_BT_FRAMES], args[6];
	const ucontext_t *u = uc;
	uint32_t n = 0;

	args[0] = 0;
	args[1] = (uint64_t)(int64_t)sig;
	args[2] = (uint64_t)(int64_t)si->si_code;
	args[3] = fault_addr(sig, si);
#if defined(__x86_64__)
	args[4] = (uint64_t)u->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
	args[4] = (uint64_t)u->uc_mcontext.pc;
#else
	(void)u;
	args[4] = 0;
#endif
	/* sent by a process (kill, raise, abort): who */
	args[5] = si->si_code <= 0 ? (uint64_t)(int64_t)si->si_pid : 0;
	cap_tls_depth++;
	if (cap_bt_depth)
		n = cap_unwind_signal(frames, cap_bt_depth, uc);
	cap_tls_depth--;
	/* announcing objects walks the loader's list: not while it is being changed */
	cap_put_call_frames(CALL_FATAL_SIGNAL, cap_now_ns(), args, 6, frames, n,
			    _r_debug.r_state == RT_CONSISTENT);
}

/*
 * The default action, back: @sig with @si queued to this thread again (blocked while the
 * handler runs), delivered once it returns, at the interrupted instruction.
 */
static void redeliver(int sig, siginfo_t *si)
{
	const pid_t pid = getpid(), tid = (pid_t)syscall(SYS_gettid);

	if (syscall(SYS_rt_tgsigqueueinfo, pid, tid, sig, si) == 0)
		return;
	/* a fault the kernel raised comes again when its instruction runs again */
	if (si->si_code > 0 && si->si_code != SI_KERNEL && sig != SIGTRAP && sig != SIGSYS)
		return;
	syscall(SYS_tgkill, pid, tid, sig);
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
	const int saved_errno = errno;
	struct fatal *f = fatal_of(sig);
	const struct sigaction dfl = {.sa_handler = SIG_DFL};

	/* first: a fault while recording then ends the process as this one would have */
	cap_real.sigaction(sig, &dfl, NULL);
	if (f)
		f->ours = false; /* the program set SIG_DFL: it stays its action */
	cap_note_fatal(sig);
	if (tracing(TFS_TRACE_THREADS))
		record(sig, si, uc);
	redeliver(sig, si);
	errno = saved_errno;
}

void cap_sig_init(void)
{
	struct sigaction cur;

	if (!HAVE(sigaction) || !HAVE(sigaltstack))
		return;
	for (size_t i = 0; i < N_FATAL; i++) {
		const int sig = fatal_signals[i];

		/* only where the program's action is the default: an inherited SIG_IGN stays */
		if (cap_real.sigaction(sig, NULL, &cur) < 0 || action_of(&cur) != ACT_DFL)
			continue;
		g_fatal[i].prog = cur;
		g_fatal[i].ours = install(sig) == 0;
	}
	g_on = true;
	cap_sig_thread_start();
}
