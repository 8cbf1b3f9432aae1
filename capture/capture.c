/*
 * The producer side of capture: the library constructor that decides the mode (off,
 * attached to the spool of `tracefs record`, or in-process with a consumer thread of its
 * own), the per-thread state, and the hot path that appends raw records (spool_i.h) to the
 * calling thread's chunk. The hot path takes no lock, calls no allocator and preserves
 * errno; when no chunk is free it waits for the consumer to free one, for a bounded time
 * (spool_i.h, SPOOL_WAIT), or drops the event and counts it (SPOOL_DROP, or a consumer that
 * stalled). It samples allocation backtraces as the spool's policy says. It does not turn
 * records into trace events (consumer.c); the interposers (interpose.c) record through
 * cap_put_call().
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "tfs/capture.h"
#include "tfs/tfs.h"
#include "calls_i.h"
#include "capture_i.h"
#include "allocs_i.h"
#include "files_i.h"
#include "spool_i.h"

#define TLS_IE __attribute__((tls_model("initial-exec")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define N_STR_CACHE 256	  /* per-thread name cache entries (direct-mapped by address) */
#define MAX_NAME 255	  /* bytes kept of a zone, counter, thread or phase name */
#define MAX_MESSAGE 1024  /* bytes kept of a mark's message */
#define MAX_PHASE_DEPTH 32
#define CLAIM_BACKOFF 64  /* events dropped without retrying after a failed chunk claim */
#define LOST_WORDS 5	  /* a REC_DROPPED */
#define DEFAULT_BT_DEPTH TFS_RECORDING_BT_DEPTH_DEFAULT

unsigned int tfs_capture_mask_;
uint32_t cap_bt_depth;

/*
 * One producing thread. Lives in its own anonymous mapping (not malloc: the allocator will
 * be interposed), reached through an initial-exec TLS pointer; freed at thread exit.
 */
struct tstate {
	struct spool_chunk *chunk; /* current chunk, NULL when none could be claimed */
	uint8_t *data;		   /* its record area */
	uint32_t fill, cap;	   /* bytes written, bytes available */
	uint32_t thread;	   /* symbolic id */
	uint32_t gen;		   /* process-phase generation this thread has recorded */
	uint64_t seq;		   /* number of the next chunk to claim */
	uint32_t backoff;	   /* events left to drop before claiming again */
	uint32_t next_str;	   /* next per-thread string id */
	uint32_t zone_depth;
	uint64_t zone_lost;	   /* bit d: the begin of the open zone at depth d was dropped */
	uint64_t lost;		   /* events dropped since its latest record, not yet said in a
				      REC_DROPPED */
	uint64_t lost_first_ns, lost_last_ns; /* when the first and the last of them were */
	uint32_t n_phases;
	struct {
		uint32_t id, scope;
	} phases[MAX_PHASE_DEPTH];
	struct {
		const char *ptr;
		uint32_t id;
	} strs[N_STR_CACHE];
	uint64_t sample_units; /* allocating calls (or their bytes) so far */
	uint32_t bt_n; /* frames of the latest backtrace recorded: 0 at the start of a chunk */
	int *errno_at; /* the thread's errno: read without a call to __errno_location */
	/* at thread exit (thread_gone): its calls so far, and where the stream was at the
	 * latest, to tell whether the program's TSD destructors recorded anything since */
	uint32_t gone_calls;
	uint32_t gone_fill;
	uint64_t gone_seq, gone_lost;
};

static struct spool g_spool;
static struct spool_policy g_policy; /* the spool's, read once it is mapped */
static uint64_t g_wait_limit_ns = (uint64_t)SPOOL_WAIT_LIMIT_MS * 1000000u;
/* a wait gave up (the consumer freed nothing for the limit): drop instead of waiting
 * until `recycled` moves past g_stall_recycled */
static _Atomic bool g_stalled;
static _Atomic uint32_t g_stall_recycled;
static _Atomic bool g_said_stall; /* said so on stderr (once per process) */
/* words of cap_put_call's args holding an allocating call's size and nmemb; 0: none */
static uint8_t g_size_word[N_CALLS], g_nmemb_word[N_CALLS];
static bool g_no_clock;
static bool g_inproc;
static const struct cap_inproc_ops *g_inproc_ops; /* set when in-process mode starts */
static pthread_key_t g_key;
static _Atomic uint32_t g_phase_gen;
static _Atomic uint32_t g_phase_id;
static _Atomic uint64_t g_lost_early; /* dropped before a spool existed to count them */
/* attached to `tracefs record`: this process's spool, and the first process's, from which
 * every forked or spawned process derives its own (`<root>.<pid>`) */
static bool g_follow;
static char g_path[PATH_MAX];
static char g_root[PATH_MAX];
static char g_env_spool[PATH_MAX]; /* TFS_SPOOL as the process found it */

static _Thread_local struct tstate *tls_state TLS_IE;
_Thread_local volatile unsigned int cap_tls_depth TLS_IE;
_Thread_local unsigned int cap_call_depth TLS_IE;
_Thread_local uint32_t cap_call_outer TLS_IE;
static _Thread_local uint32_t tls_thread_id TLS_IE; /* id + 1 reserved by pthread_create */
static _Thread_local bool tls_dead TLS_IE;

/*
 * The clock. Times are CLOCK_MONOTONIC nanoseconds. On x86-64 they are read from the
 * time-stamp counter where it is invariant (constant_tsc and nonstop_tsc) and the kernel
 * itself keeps time with it (its clocksource is "tsc"), else from clock_gettime; TFS_CLOCK
 * (`tracefs record --clock`) says otherwise: monotonic, or tsc wherever it is invariant. The
 * recording's first process decides and writes the decision in its spool's header (tsc_hz:
 * the rate, or SPOOL_TSC_NONE); every later process, forked, exec'd or spawned, follows it
 * whatever its own environment says, so one recording has one clock.
 *  - The TSC is read fenced (lfence, then rdtsc: the stamp comes after the work before it,
 *    as with the kernel's ordered read, rdtscp in the vDSO where the CPU has it), without
 *    the vDSO's sequence lock and conversion: 15 ns a read against clock_gettime's 21 on
 *    this project's machines, 4-5 ns less per traced malloc/free. An unfenced read
 *    (9 ns) was measured too: it runs ahead of the work before it by a varying few cycles,
 *    and the noise grew lossless traces 4-12%.
 *  - Each thread maps ticks to nanoseconds from an anchor, a (TSC, CLOCK_MONOTONIC) pair it
 *    takes at its first time and again when g_tsc_span ticks (2^24: about 6 ms) have passed
 *    since: the fast path is a subtraction, a compare, a multiply and a shift.
 *  - One recording, one clock, as long as its first process has decided (2 ms after its start)
 *    before it starts others: processes started together by one that records nothing (a
 *    static launcher) may each decide, and measure, for themselves. Their times are
 *    CLOCK_MONOTONIC either way; only their labels may differ.
 *  - The clock is chosen at start: a kernel that leaves the TSC as its clocksource later
 *    (its watchdog) does not move a recording already under way.
 *  - The rate is measured once per recording, over 2 ms, by its first process; the others
 *    take it from their spool's header (tsc_hz). Each anchor then refines it over all the
 *    time since the process's own first pair, so its error falls as the program runs.
 *  - A thread's times never go back. An anchor that would put a thread earlier than its last
 *    map keeps that map's value and slows the next map by the difference, which is gone at
 *    the anchor after. So a time is CLOCK_MONOTONIC's reading to within tens of ns (a pair's
 *    reading error and the rate's over one span).
 */
static bool g_tsc;
static uint64_t g_tsc0, g_mono0; /* the process's first pair */
static uint64_t g_tsc_mult;	 /* nanoseconds per tick, 32.32 fixed point: the measured rate */
static uint64_t g_tsc_span;	 /* ticks an anchor serves: d * mult never overflows below it */

struct clk_anchor {
	uint64_t tsc, ns, mult; /* ns at tick tsc, then mult (32.32 ns per tick) per tick */
	uint64_t span;		/* ticks it serves: g_tsc_span; 0: none (none yet, or being made) */
	bool busy;		/* an anchor is being taken: a signal handler's time is read whole */
};
static _Thread_local struct clk_anchor tls_clk TLS_IE;

static inline uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

#if defined(__x86_64__)
/*
 * A (TSC, CLOCK_MONOTONIC) pair: the clock read between two fenced ticks, placed midway; the
 * tightest of 4 tries, since a fault (the process's first clock_gettime touches the vDSO's
 * data) or an interrupt between the ticks would put it microseconds off.
 */
static void clk_pair(uint64_t *tsc, uint64_t *ns)
{
	uint64_t a, b, m, best = UINT64_MAX;

	for (int i = 0; i < 4; i++) {
		_mm_lfence();
		a = __rdtsc();
		_mm_lfence();
		m = mono_ns();
		_mm_lfence();
		b = __rdtsc();
		if (b >= a && b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*ns = m;
		}
	}
	if (best == UINT64_MAX) { /* the TSC went back: no bracket; the last reading */
		*tsc = b;
		*ns = m;
	}
}

/* Tick x as nanoseconds by anchor a, for any distance (the fast path's has a bound). */
static uint64_t clk_map(const struct clk_anchor *a, uint64_t x)
{
	if (x <= a->tsc)
		return a->ns;
	return a->ns + (uint64_t)(((unsigned __int128)(x - a->tsc) * a->mult) >> 32);
}

/* A thread's new anchor at tick x, the time x maps to returned (now_ns()'s cold path). */
__attribute__((noinline, cold)) static uint64_t clk_reanchor(uint64_t x)
{
	struct clk_anchor *a = &tls_clk;
	const uint64_t next = g_tsc_span;
	uint64_t span, tsc, ns, mult = g_tsc_mult, at, was;

	if (a->busy) /* a signal handler's time, while its thread anchors */
		return mono_ns();
	a->busy = true;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	/* read only now: a signal handler may have anchored since x was read */
	span = a->span;
	if (span && x - a->tsc > UINT64_MAX / 2) {
		/* x is older than the anchor (a handler's, or a TSC a few ticks behind on
		   another CPU): the anchor's own time, not a new one whose never-back rule
		   would take x for a tick a whole span later */
		ns = a->ns;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		a->busy = false;
		return ns;
	}
	a->span = 0; /* and the fast path off until the anchor is whole */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	clk_pair(&tsc, &ns);
	/* the rate over the process's life so far, once that is long enough to beat the first
	   measurement (2^26 ticks, 26 ms at 2.6 GHz: a few ns of error in 10^8) */
	if (tsc > g_tsc0 && tsc - g_tsc0 >= (uint64_t)1 << 26 && ns > g_mono0) {
		uint64_t r = (uint64_t)((((unsigned __int128)(ns - g_mono0)) << 32) /
					(tsc - g_tsc0));

		if (r > g_tsc_mult / 2 && r < g_tsc_mult + g_tsc_mult / 2)
			mult = r;
	}
	/* the pair's time, moved back to x (read just before it) */
	at = x < tsc ? (uint64_t)(((unsigned __int128)(tsc - x) * mult) >> 32) : 0;
	ns = ns > at ? ns - at : 0;
	if (span) {
		/* the latest time the old anchor gave: none past its span */
		was = clk_map(a, x - a->tsc < span ? x : a->tsc + span);
		if (was > ns) {
			/* never back: keep the old map's time and lose the lead over the next span */
			uint64_t slow = (uint64_t)((((unsigned __int128)(was - ns)) << 32) / next);

			mult = slow < mult / 2 ? mult - slow : mult / 2;
			ns = was;
		}
	}
	a->tsc = x;
	a->ns = ns;
	a->mult = mult;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	a->span = next;
	a->busy = false;
	return ns;
}
#endif

static inline uint64_t now_ns(void)
{
	if (g_no_clock)
		return 0;
#if defined(__x86_64__)
	if (g_tsc) {
		const uint64_t x = (_mm_lfence(), __rdtsc());
		const uint64_t tsc = tls_clk.tsc, ns = tls_clk.ns, mult = tls_clk.mult;
		const uint64_t d = x - tsc;

		/* the anchor read whole: a signal handler that anchored between these reads
		   changed its tick (a new anchor's is a span later), and x is then older */
		if (__builtin_expect(d < tls_clk.span, 1)) {
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
			if (__builtin_expect(tls_clk.tsc == tsc, 1))
				return ns + ((d * mult) >> 32);
		}
		return clk_reanchor(x);
	}
#endif
	return mono_ns();
}

static void count_drop(void)
{
	if (g_spool.hdr)
		atomic_fetch_add_explicit(&g_spool.hdr->dropped_events, 1, memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&g_lost_early, 1, memory_order_relaxed);
}

/* SPOOL_WAIT: whether to wait for a chunk, which a consumer that stalled does not free. */
static bool may_wait(void)
{
	if (g_policy.when_full != SPOOL_WAIT)
		return false;
	if (!atomic_load_explicit(&g_stalled, memory_order_relaxed))
		return true;
	if (atomic_load(&g_spool.hdr->recycled) == atomic_load(&g_stall_recycled))
		return false;
	atomic_store(&g_stalled, false); /* it freed chunks again */
	return true;
}

/* The first wait of this process that gave up, on stderr. Async-signal-safe. */
static void say_stalled(void)
{
	char msg[200];
	int len = snprintf(msg, sizeof(msg),
			   "tracefs: process %u: the consumer freed no chunk of the full "
			   "spool in %" PRIu64 " ms: dropping events while it frees none\n",
			   (unsigned int)getpid(), g_wait_limit_ns / 1000000u);

	if (len > 0)
		(void)!write(STDERR_FILENO, msg, (size_t)len < sizeof(msg) ? (size_t)len
									     : sizeof(msg) - 1);
}

static struct spool_chunk *wait_chunk(struct tstate *ts)
{
	bool stalled;
	struct spool_chunk *c = cap_spool_claim_wait(&g_spool, ts->thread, ts->seq,
						     g_wait_limit_ns, &stalled);

	if (stalled) {
		atomic_store(&g_stall_recycled, atomic_load(&g_spool.hdr->recycled));
		atomic_store(&g_stalled, true);
		atomic_fetch_add(&g_spool.hdr->n_stalls, 1);
		if (!atomic_exchange(&g_said_stall, true))
			say_stalled();
	}
	return c;
}

/* Make the record just written visible to the consumer, in this or another process. */
static inline void rec_publish(struct tstate *ts, uint32_t words)
{
	ts->fill += words * 8;
	atomic_store_explicit(&ts->chunk->fill, ts->fill, memory_order_release);
}

/* Zones open in the thread whose begin was recorded: the consumer has these open. */
static uint64_t known_zones(const struct tstate *ts)
{
	uint32_t d = ts->zone_depth < 64 ? ts->zone_depth : 64;
	uint64_t below = d == 64 ? UINT64_MAX : (UINT64_C(1) << d) - 1;

	return ts->zone_depth - (uint64_t)__builtin_popcountll(ts->zone_lost & below);
}

/* The REC_DROPPED of the thread's drops not said yet, in its chunk, which has room for it. */
static void put_lost(struct tstate *ts)
{
	uint64_t *r = (uint64_t *)(ts->data + ts->fill);

	r[0] = cap_rec_word0(REC_DROPPED, LOST_WORDS, 0, 0);
	r[1] = ts->lost_first_ns;
	r[2] = ts->lost;
	r[3] = ts->lost_last_ns;
	r[4] = known_zones(ts);
	rec_publish(ts, LOST_WORDS);
	ts->lost = 0;
}

static bool next_chunk(struct tstate *ts)
{
	if (ts->chunk) {
		cap_spool_hand_over(ts->chunk);
		ts->chunk = NULL;
	}
	/* no chunk: no record fits until one is claimed (the handed-over one is not ours) */
	ts->fill = ts->cap = 0;
	if (ts->backoff) {
		ts->backoff--;
		return false;
	}
	ts->chunk = cap_spool_claim(&g_spool, ts->thread, ts->seq);
	if (!ts->chunk && may_wait())
		ts->chunk = wait_chunk(ts);
	if (!ts->chunk) {
		ts->backoff = CLAIM_BACKOFF;
		return false;
	}
	ts->seq++;
	ts->data = cap_chunk_data(ts->chunk);
	ts->fill = 0;
	ts->bt_n = 0; /* the chunk's first backtrace is whole: each chunk decodes alone */
	ts->cap = cap_chunk_cap(&g_spool);
	if (ts->lost) /* before any other record: the gap is where it was */
		put_lost(ts);
	return true;
}

static inline uint64_t *rec_reserve(struct tstate *ts, uint32_t words)
{
	if (unlikely(ts->fill + words * 8 > ts->cap) &&
	    (!next_chunk(ts) || ts->fill + words * 8 > ts->cap))
		return NULL;
	return (uint64_t *)(ts->data + ts->fill);
}

/*
 * An event of this thread could not be recorded: counted in the spool, and said in the
 * thread's stream before its next record (at once when its chunk has room), so that the
 * trace shows where events are missing.
 */
static void drop(struct tstate *ts)
{
	uint64_t t;

	count_drop();
	if (!ts)
		return;
	t = now_ns();
	if (ts->lost++ == 0)
		ts->lost_first_ns = t;
	ts->lost_last_ns = t;
	if (ts->chunk && ts->fill + LOST_WORDS * 8 <= ts->cap)
		put_lost(ts);
}

/* At a thread's or the program's end: say the drops not said yet, in a new chunk if need be. */
static void say_lost(struct tstate *ts)
{
	if (!ts || !ts->lost)
		return;
	if (ts->chunk && ts->fill + LOST_WORDS * 8 <= ts->cap) {
		put_lost(ts);
		return;
	}
	ts->backoff = 0;
	next_chunk(ts); /* says them when it finds a chunk */
}

static bool put_sync(struct tstate *ts, uint32_t gen)
{
	uint64_t *r = rec_reserve(ts, 3);

	if (!r)
		return false;
	r[0] = cap_rec_word0(REC_SYNC, 3, 0, 0);
	r[1] = now_ns();
	r[2] = gen;
	rec_publish(ts, 3);
	ts->gen = gen;
	return true;
}

/* Before any record: tell the consumer when this thread first sees a phase change. */
static inline void sync_phase(struct tstate *ts)
{
	uint32_t gen = atomic_load_explicit(&g_phase_gen, memory_order_relaxed);

	if (unlikely(gen != ts->gen))
		put_sync(ts, gen);
}

/* A record with @n_args u64 arguments and a string payload of @len bytes. */
static uint64_t *put_with_payload(struct tstate *ts, uint32_t kind, uint32_t aux,
				  const uint64_t *args, uint32_t n_args, const char *s,
				  size_t len)
{
	uint32_t words = 2 + n_args + (uint32_t)((len + 7) / 8);
	uint64_t *r = rec_reserve(ts, words);

	if (!r)
		return NULL;
	r[0] = cap_rec_word0(kind, words, (uint32_t)len, aux);
	r[1] = now_ns();
	for (uint32_t i = 0; i < n_args; i++)
		r[2 + i] = args[i];
	if (len) {
		r[words - 1] = 0; /* zero padding of the last payload word */
		memcpy(r + 2 + n_args, s, len);
	}
	rec_publish(ts, words);
	return r;
}

/* The per-thread id of name @s, defining it in the stream on first use (or eviction). */
static bool intern(struct tstate *ts, const char *s, uint32_t *id)
{
	uint32_t slot = (uint32_t)(((uintptr_t)s >> 3) * 0x9e3779b1u) >> 24;

	if (likely(ts->strs[slot].ptr == s)) {
		*id = ts->strs[slot].id;
		return true;
	}
	if (!put_with_payload(ts, REC_STRING, ts->next_str, NULL, 0, s, strnlen(s, MAX_NAME)))
		return false;
	ts->strs[slot].ptr = s;
	ts->strs[slot].id = *id = ts->next_str++;
	return true;
}

/*
 * Whether the thread's state must live on through another round of TSD destructors. glibc
 * runs the destructors of a thread's keys in the order the keys were made (this one in the
 * library's constructor, before the program's), then runs them again, up to
 * PTHREAD_DESTRUCTOR_ITERATIONS rounds in all, while any of them set a value: the frees of
 * the program's destructors come after this one's in each round. So the state stays while
 * the thread recorded anything (or dropped it) since its previous round, or this is its
 * first: a thread whose destructors do nothing costs one round more, and the state is torn
 * down in the last round at the latest, where a value set again would be cleared unseen.
 */
static bool outlives_round(struct tstate *ts)
{
	const bool quiet = ts->gone_calls > 0 && ts->gone_fill == ts->fill &&
			   ts->gone_seq == ts->seq && ts->gone_lost == ts->lost;

	if (quiet || ++ts->gone_calls >= PTHREAD_DESTRUCTOR_ITERATIONS)
		return false;
	ts->gone_fill = ts->fill;
	ts->gone_seq = ts->seq;
	ts->gone_lost = ts->lost;
	return pthread_setspecific(g_key, ts) == 0;
}

/* The destructor of g_key: the thread ends. What it records after this is dropped, counted. */
static void thread_gone(void *arg)
{
	struct tstate *ts = arg;

	if (outlives_round(ts))
		return;
	/* inside the capture: the unmappings are its own, not the program's */
	if (cap_tls_depth++ == 0)
		say_lost(ts);
	if (ts->chunk)
		cap_spool_hand_over(ts->chunk);
	tls_state = NULL;
	tls_dead = true;
	munmap(ts, sizeof(*ts));
#ifdef TFS_CAP_SHARED
	cap_sig_thread_end();
#endif
	cap_tls_depth--;
}

bool cap_thread_ended(void)
{
	return tls_dead;
}

uint32_t cap_thread_reserve(void)
{
	return atomic_fetch_add_explicit(&g_spool.hdr->next_thread, 1, memory_order_relaxed);
}

uint32_t cap_file_reserve(void)
{
	static _Atomic uint32_t unspooled; /* no spool: the ids go nowhere */

	return atomic_fetch_add_explicit(g_spool.hdr ? &g_spool.hdr->next_file : &unspooled, 1,
					 memory_order_relaxed);
}

void cap_thread_preassign(uint32_t id)
{
	tls_thread_id = id + 1;
}

/* The calling thread's state, made now: NULL when it cannot record. Preserves errno. */
static struct tstate *thread_start(void)
{
	const int saved_errno = errno;
	struct tstate *ts;

	if (tls_dead || !tfs_capture_mask_)
		return NULL;
	ts = mmap(NULL, sizeof(*ts), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ts == MAP_FAILED)
		goto err_restore_errno;
	ts->thread = tls_thread_id ? tls_thread_id - 1 : cap_thread_reserve();
	ts->errno_at = &errno;
	if (pthread_setspecific(g_key, ts) != 0)
		goto err_unmap;
	tls_state = ts;
#ifdef TFS_CAP_SHARED
	cap_sig_thread_start();
#endif
	errno = saved_errno;
	return ts;

err_unmap:
	munmap(ts, sizeof(*ts));
err_restore_errno:
	errno = saved_errno;
	return NULL;
}

uint32_t cap_thread_self(void)
{
	struct tstate *ts = tls_state;

	if (!ts && cap_tls_depth == 0) {
		cap_tls_depth++;
		ts = thread_start();
		cap_tls_depth--;
	}
	return ts ? ts->thread : UINT32_MAX;
}

/*
 * Enter the capture on this thread: NULL when it must not record (re-entered, a thread of
 * the capture itself, past its exit, or no state). Pair with leave(). Preserves errno.
 */
static inline struct tstate *enter(void)
{
	struct tstate *ts;

	if (cap_tls_depth++ != 0)
		return NULL;
	ts = tls_state;
	if (unlikely(!ts)) {
		ts = thread_start();
		if (!ts) {
			count_drop();
			return NULL;
		}
	}
	sync_phase(ts);
	return ts;
}

static inline void leave(void)
{
	cap_tls_depth--;
}

void tfs_cap_zone_begin(const char *name)
{
	const int saved_errno = errno;
	struct tstate *ts = enter();

	if (ts) {
		/* the zone is open from its record on: a REC_DROPPED written before it (as a
		   new chunk begins) counts it not */
		uint32_t depth = ts->zone_depth, id;
		uint64_t *r = NULL;

		if (intern(ts, name, &id) && (r = rec_reserve(ts, 2))) {
			r[0] = cap_rec_word0(REC_ZONE_BEGIN, 2, 0, id);
			r[1] = now_ns();
			rec_publish(ts, 2);
		}
		ts->zone_depth++;
		if (depth < 64)
			ts->zone_lost = r ? ts->zone_lost & ~(UINT64_C(1) << depth)
					  : ts->zone_lost | UINT64_C(1) << depth;
		if (!r)
			drop(ts);
	}
	leave();
	errno = saved_errno;
}

void tfs_cap_zone_end(void)
{
	const int saved_errno = errno;
	struct tstate *ts = enter();

	if (ts && ts->zone_depth > 0) {
		/* the zone is open until its record: a REC_DROPPED written before it counts it */
		uint32_t depth = ts->zone_depth - 1;
		uint64_t *r = NULL;
		/* an end whose begin was dropped would close the wrong zone */
		bool lost = depth < 64 && (ts->zone_lost & UINT64_C(1) << depth);

		if (!lost && (r = rec_reserve(ts, 2))) {
			r[0] = cap_rec_word0(REC_ZONE_END, 2, 0, 0);
			r[1] = now_ns();
			rec_publish(ts, 2);
		}
		ts->zone_depth = depth;
		if (!r)
			drop(ts);
	}
	leave();
	errno = saved_errno;
}

void tfs_cap_mem_access(const void *addr, size_t size, int is_store, const void *site)
{
	const int saved_errno = errno;
	struct tstate *ts = enter();

	if (ts) {
		uint64_t *r = rec_reserve(ts, 5);

		if (r) {
			r[0] = cap_rec_word0(REC_MEM, 5, is_store ? 1 : 0, 0);
			r[1] = now_ns();
			r[2] = (uintptr_t)addr;
			r[3] = size;
			r[4] = (uintptr_t)site;
			rec_publish(ts, 5);
		} else {
			drop(ts);
		}
	}
	leave();
	errno = saved_errno;
}

void tfs_cap_counter(const char *name, int64_t value)
{
	const int saved_errno = errno;
	struct tstate *ts = enter();

	if (ts) {
		uint32_t id;
		uint64_t *r = NULL;

		if (intern(ts, name, &id) && (r = rec_reserve(ts, 3))) {
			r[0] = cap_rec_word0(REC_COUNTER, 3, 0, id);
			r[1] = now_ns();
			r[2] = (uint64_t)value;
			rec_publish(ts, 3);
		}
		if (!r)
			drop(ts);
	}
	leave();
	errno = saved_errno;
}

static void put_string_event(uint32_t kind, const char *s, size_t max)
{
	const int saved_errno = errno;
	struct tstate *ts = enter();

	if (ts && !put_with_payload(ts, kind, 0, NULL, 0, s, strnlen(s, max)))
		drop(ts);
	leave();
	errno = saved_errno;
}

void tfs_cap_mark(const char *message)
{
	put_string_event(REC_MARK, message, MAX_MESSAGE);
}

void tfs_cap_thread_name(const char *name)
{
	put_string_event(REC_THREAD_NAME, name, MAX_NAME);
}

void tfs_cap_phase_begin(const char *name, unsigned int scope)
{
	const int saved_errno = errno;
	struct tstate *ts = enter();

	if (ts) {
		uint32_t id = atomic_fetch_add_explicit(&g_phase_id, 1, memory_order_relaxed);
		bool process = scope & TFS_PHASE_PROCESS;
		uint64_t args[2] = {process ? TFS_PHASE_PROCESS : TFS_PHASE_THREAD, 0};

		if (process)
			args[1] = atomic_fetch_add_explicit(&g_phase_gen, 1, memory_order_relaxed) + 1;
		if (!put_with_payload(ts, REC_PHASE_BEGIN, id, args, 2, name,
				      strnlen(name, MAX_NAME)))
			drop(ts);
		else if (process && args[1] > ts->gen)
			ts->gen = (uint32_t)args[1];
		if (ts->n_phases < MAX_PHASE_DEPTH) {
			ts->phases[ts->n_phases].id = id;
			ts->phases[ts->n_phases].scope = (uint32_t)args[0];
		}
		ts->n_phases++;
	}
	leave();
	errno = saved_errno;
}

void tfs_cap_phase_end(void)
{
	const int saved_errno = errno;
	struct tstate *ts = enter();

	if (ts && ts->n_phases > 0 && --ts->n_phases < MAX_PHASE_DEPTH) {
		uint32_t id = ts->phases[ts->n_phases].id;
		uint64_t gen = 0;

		if (ts->phases[ts->n_phases].scope == TFS_PHASE_PROCESS)
			gen = atomic_fetch_add_explicit(&g_phase_gen, 1, memory_order_relaxed) + 1;
		if (!put_with_payload(ts, REC_PHASE_END, id, &gen, 1, "", 0))
			drop(ts);
		else if (gen > ts->gen)
			ts->gen = (uint32_t)gen;
	}
	leave();
	errno = saved_errno;
}

/* The whole of file @path in a new buffer. @return 0 or -errno */
static int slurp(const char *path, void **out, size_t *len)
{
	struct stat st;
	size_t off = 0;
	char *buf;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out_close;
	}
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf) {
		rc = -ENOMEM;
		goto out_close;
	}
	while (off < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + off, (size_t)st.st_size - off);

		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			free(buf);
			goto out_close;
		}
		off += (size_t)n;
	}
	*out = buf;
	*len = off;
out_close:
	close(fd);
	return rc;
}

int cap_trace_now(void **out, size_t *len, unsigned int timeout_ms)
{
	const struct timespec nap = {0, 1000000};
	char path[PATH_MAX];
	int32_t rc = 0;

	if (!tfs_capture_mask_ || !g_spool.hdr)
		return -ENOTSUP;
	if (g_inproc)
		return g_inproc_ops->save_mem(out, len);
	if (!g_follow || cap_spool_save_path(g_root, path, sizeof(path)) < 0)
		return -ENOTSUP;
	atomic_store(&g_spool.hdr->save_req, 1);
	for (unsigned int t = 0; t < timeout_ms; t++) {
		rc = atomic_load(&g_spool.hdr->save_rc);
		if (rc != 0)
			break;
		nanosleep(&nap, NULL);
	}
	if (rc == 0)
		return -ETIMEDOUT;
	if (rc < 0)
		return rc;
	rc = slurp(path, out, len);
	unlink(path);
	return rc;
}

uint64_t cap_now_ns(void)
{
	return now_ns();
}

void cap_put_module(uint64_t bias, uint64_t lo, uint64_t hi, uint32_t tag, const char *path)
{
	struct tstate *ts = tls_state;
	uint64_t args[4] = {bias, lo, hi, tag};

	if (!ts || !put_with_payload(ts, REC_MODULE, 0, args, 4, path,
				     strnlen(path, SPOOL_MAX_PATH)))
		drop(ts);
}

/*
 * Copy a call's @n words to its record @to: a switch for the six words or fewer of the malloc
 * family, whose words the compiler then keeps in registers, a loop beyond.
 */
static inline __attribute__((always_inline)) void put_words(uint64_t *to, const uint64_t *words,
							    uint32_t n)
{
	switch (n) {
	case 6:
		to[5] = words[5];
		/* fallthrough */
	case 5:
		to[4] = words[4];
		/* fallthrough */
	case 4:
		to[3] = words[3];
		/* fallthrough */
	case 3:
		to[2] = words[2];
		/* fallthrough */
	case 2:
		to[1] = words[1];
		/* fallthrough */
	case 1:
		to[0] = words[0];
		/* fallthrough */
	case 0:
		return;
	default:
		for (uint32_t i = 0; i < n; i++)
			to[i] = words[i];
	}
}

/*
 * REC_CALL_BT: the call's words, then backtrace @frames (@n of them, outermost first) as the
 * frames it shares with the thread's previous one in this chunk and the new ones
 * (spool_i.h). @same: how many leading frames the caller knows repeat the thread's
 * previous backtrace (cap_unwind() says, 0 for frames from elsewhere); ts->bt_n counts the
 * frames of the previous one: 0 when it was not recorded. The objects the frames lie in
 * are announced first when @announce.
 */
static bool put_call_bt(struct tstate *ts, uint32_t call, uint64_t ts_ns, const uint64_t *args,
			uint32_t n_args, const char *strs, size_t strs_len, const uint64_t *frames,
			uint32_t n, uint32_t same, bool announce)
{
	uint32_t keep, base, words;
	uint64_t *r;

	keep = same < n ? same : n;
	/* before the reservation: announcing an object writes records of its own */
	if (announce)
		cap_modules_check(frames + keep, n - keep);
	base = 2 + n_args + (uint32_t)((strs_len + 7) / 8);
	r = base + 1 + n <= SPOOL_MAX_RECORD_WORDS ? rec_reserve(ts, base + 1 + n) : NULL;
	if (!r) {
		ts->bt_n = 0;
		return false;
	}
	if (keep > ts->bt_n) /* a new chunk forgets the previous backtrace */
		keep = ts->bt_n;
	words = base + 1 + n - keep;
	r[0] = cap_rec_word0(REC_CALL_BT, words, (uint32_t)strs_len, call);
	r[1] = ts_ns;
	put_words(r + 2, args, n_args);
	if (strs_len) {
		r[base - 1] = 0;
		memcpy(r + 2 + n_args, strs, strs_len);
	}
	r[base] = (uint64_t)keep | (uint64_t)(n - keep) << 16;
	for (uint32_t i = keep; i < n; i++)
		r[base + 1 + i - keep] = frames[i];
	/* kept frames are still on the stack: their code, hence their tag, cannot have changed */
	if (unlikely(atomic_load_explicit(&cap_modules_reloaded, memory_order_relaxed)))
		cap_modules_key(r + base + 1, n - keep);
	ts->bt_n = n;
	rec_publish(ts, words);
	return true;
}

/*
 * A REC_CALL; with @bt_word not 0, a REC_CALL_BT whose backtrace is that one word (an
 * allocation not sampled, spool_i.h).
 */
static inline __attribute__((always_inline)) bool
put_call(struct tstate *ts, uint32_t call, uint64_t ts_ns, const uint64_t *args, uint32_t n_args,
	 const char *strs, size_t strs_len, uint64_t bt_word)
{
	/* a call inside others, recorded as such only when nested calls are asked for */
	const bool nested = !bt_word && cap_call_depth && (tfs_capture_mask_ & TFS_TRACE_NESTED);
	uint32_t base = 2 + n_args + (uint32_t)((strs_len + 7) / 8);
	uint32_t words = base + !!bt_word + (nested ? 2 : 0);
	uint64_t *r = words <= SPOOL_MAX_RECORD_WORDS ? rec_reserve(ts, words) : NULL;

	if (!r)
		return false;
	r[0] = cap_rec_word0(bt_word ? REC_CALL_BT : nested ? REC_CALL_NESTED : REC_CALL, words,
			     (uint32_t)strs_len, call);
	r[1] = ts_ns;
	put_words(r + 2, args, n_args);
	if (strs_len) {
		r[base - 1] = 0;
		memcpy(r + 2 + n_args, strs, strs_len);
	}
	if (bt_word)
		r[base] = bt_word;
	if (nested) {
		r[base] = cap_call_depth;
		r[base + 1] = cap_call_outer;
	}
	rec_publish(ts, words);
	return true;
}

/* Bytes allocating call @call asks for: its `size` argument, times `nmemb` (calloc). */
static uint64_t alloc_bytes(uint32_t call, const uint64_t *args, uint32_t n_args)
{
	uint32_t sw = call < N_CALLS ? g_size_word[call] : 0;
	uint32_t mw = call < N_CALLS ? g_nmemb_word[call] : 0;
	uint64_t bytes = sw && sw < n_args ? args[sw] : 0;

	if (mw && mw < n_args)
		bytes = args[mw] && bytes > UINT64_MAX / args[mw] ? UINT64_MAX : bytes * args[mw];
	return bytes;
}

/* Whether this allocating call carries its backtrace (spool_i.h struct spool_policy). */
static inline bool sampled(struct tstate *ts, uint32_t call, const uint64_t *args,
			   uint32_t n_args)
{
	const uint64_t every = g_policy.sample_every, before = ts->sample_units;

	if (likely(g_policy.sample == SPOOL_SAMPLE_ALL))
		return true;
	ts->sample_units += g_policy.sample == SPOOL_SAMPLE_CALLS ? 1
								 : alloc_bytes(call, args, n_args);
	if (ts->sample_units < before)
		ts->sample_units = UINT64_MAX;
	return ts->sample_units / every != before / every;
}

/*
 * The backtrace of a call that carries one, and its record: out of line, so that the frame of
 * the common path holds no scratch backtrace and saves fewer registers.
 */
static __attribute__((noinline)) bool
put_call_unwound(struct tstate *ts, uint32_t call, uint64_t ts_ns, const uint64_t *args,
		 uint32_t n_args, const char *strs, size_t strs_len, const struct cap_frame *from)
{
	uint64_t scratch[SPOOL_MAX_BT_FRAMES];
	uint32_t n, same;
	const uint64_t *frames = cap_unwind(scratch, cap_bt_depth, &n, &same, from);

	return put_call_bt(ts, call, ts_ns, args, n_args, strs, strs_len, frames, n, same, true);
}

/*
 * The one body of cap_put_call() and cap_put_alloc_at(), inlined into each with its helpers:
 * the allocation entry takes no strings, so their branches fold away.
 */
static inline __attribute__((always_inline)) void
put_call_at(uint32_t call, uint32_t n_args, uint64_t ts_ns, const uint64_t *args,
	    const char *strs, size_t strs_len, const struct cap_frame *from)
{
	struct tstate *ts;
	bool stack;
	int saved_errno;

	ts = enter();
	if (ts) {
		saved_errno = *ts->errno_at;
		stack = cap_bt_depth && cap_call_has_stack(call);
		if (!(stack && sampled(ts, call, args, n_args)
			      ? put_call_unwound(ts, call, ts_ns, args, n_args, strs, strs_len, from)
			      : put_call(ts, call, ts_ns, args, n_args, strs, strs_len,
					 stack ? (uint64_t)SPOOL_BT_UNSAMPLED << 32 : 0)))
			drop(ts);
		*ts->errno_at = saved_errno;
	}
	leave();
}

/*
 * The common case of cap_put_alloc_at(), a call without a backtrace, recorded as put_call_at()
 * would record it in fewer steps: a plain REC_CALL (not nested, no phase change to say first)
 * that the thread's chunk has room for. @return where it goes, the capture entered (pair with
 * put_alloc_plain()); NULL, the capture left as it was, in any other case
 */
static inline uint64_t *plain_alloc_record(struct tstate *ts, uint32_t words)
{
	/* entered first: a signal handler's record cannot then come between the check and ours */
	if (cap_tls_depth++ == 0 && !(cap_call_depth && (tfs_capture_mask_ & TFS_TRACE_NESTED)) &&
	    ts->gen == atomic_load_explicit(&g_phase_gen, memory_order_relaxed) &&
	    ts->fill + words * 8 <= ts->cap)
		return (uint64_t *)(ts->data + ts->fill);
	cap_tls_depth--;
	return NULL;
}

/* Write and publish at @r the REC_CALL of plain_alloc_record(), and leave the capture. */
static inline void put_alloc_plain(struct tstate *ts, uint64_t *r, uint32_t call, uint32_t n_args,
				   uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
	const uint32_t words = 2 + n_args;

	r[0] = cap_rec_word0(REC_CALL, words, 0, call);
	r[2] = 0; /* the duration: none */
	r[3] = a;
	r[4] = b;
	if (n_args > 3)
		r[5] = c;
	if (n_args > 4)
		r[6] = d;
	if (n_args > 5)
		r[7] = e;
	/* last: the words are written before the clock is read, not kept across the read; and
	 * nothing here sets errno */
	r[1] = now_ns();
	rec_publish(ts, words);
	cap_tls_depth--;
}

/*
 * cap_put_alloc_at() in every other case, with the same arguments (a tail call): out of line,
 * so that the common case saves nothing.
 */
static __attribute__((noinline)) void put_alloc_any(uint64_t call_n, uint64_t a, uint64_t b,
						   uint64_t c, uint64_t d, uint64_t e,
						   const struct cap_frame *from)
{
	const uint64_t args[6] = {0, a, b, c, d, e};

	put_call_at((uint32_t)call_n, (uint32_t)(call_n >> 32), now_ns(), args, NULL, 0, from);
}

void cap_put_alloc_at(uint64_t call_n, uint64_t a, uint64_t b, uint64_t c, uint64_t d,
		      uint64_t e, const struct cap_frame *from)
{
	const uint32_t call = (uint32_t)call_n, n_args = (uint32_t)(call_n >> 32);
	struct tstate *ts = tls_state;
	uint64_t *r;

	assert(n_args >= 3 && n_args <= 6);
	if (!ts || (cap_bt_depth && cap_call_has_stack(call)) ||
	    !(r = plain_alloc_record(ts, 2 + n_args))) {
		put_alloc_any(call_n, a, b, c, d, e, from);
		return;
	}
	put_alloc_plain(ts, r, call, n_args, a, b, c, d, e);
}

void cap_put_call(uint32_t call, uint64_t ts_ns, const uint64_t *args, uint32_t n_args,
		  const char *strs, size_t strs_len)
{
	put_call_at(call, n_args, ts_ns, args, strs, strs_len, NULL);
}

void cap_put_call_frames(uint32_t call, uint64_t ts_ns, const uint64_t *args, uint32_t n_args,
			 const uint64_t *frames, uint32_t n, bool announce)
{
	const int saved_errno = errno;
	struct tstate *ts;

	if (!cap_bt_depth || !cap_call_has_stack(call)) {
		cap_put_call(call, ts_ns, args, n_args, NULL, 0);
		return;
	}
	if (n > cap_bt_depth) { /* the innermost ones */
		frames += n - cap_bt_depth;
		n = cap_bt_depth;
	}
	ts = enter();
	/* frames from elsewhere (a signal's context): none known to repeat the thread's last
	 * walk, and after them no walk may keep frames of theirs */
	if (ts && !put_call_bt(ts, call, ts_ns, args, n_args, NULL, 0, frames, n, 0, announce))
		drop(ts);
	if (ts)
		ts->bt_n = 0;
	leave();
	errno = saved_errno;
}

/* The calling thread's own re-entrancy guard stands for "inside the capture". */
static _Thread_local unsigned int tls_paused TLS_IE;

void tfs_capture_pause(void)
{
	cap_tls_depth++;
	tls_paused++;
}

void tfs_capture_resume(void)
{
	if (tls_paused) {
		tls_paused--;
		cap_tls_depth--;
	}
}

void tfs_capture_flush(void)
{
	const int saved_errno = errno;

	if (!tfs_capture_mask_)
		return;
	if (cap_tls_depth++ == 0) {
		struct tstate *ts = tls_state;

		if (ts && ts->chunk) {
			cap_spool_hand_over(ts->chunk);
			ts->chunk = NULL;
			ts->fill = ts->cap = 0;
		}
		if (g_inproc)
			g_inproc_ops->flush();
	}
	cap_tls_depth--;
	errno = saved_errno;
}

uint64_t tfs_capture_dropped(void)
{
	uint64_t n = atomic_load_explicit(&g_lost_early, memory_order_relaxed);

	if (g_spool.hdr)
		n += atomic_load_explicit(&g_spool.hdr->dropped_events, memory_order_relaxed);
	return n;
}

void cap_thread_exclude(void)
{
	cap_tls_depth++;
	tls_dead = true;
}

const char *cap_spool_path(void)
{
	/* without a spool of its own (none could be made), an exec'd image tries again */
	if (!g_follow)
		return NULL;
	return g_spool.hdr ? g_path : g_root;
}

const char *cap_spool_root(void)
{
	return g_follow ? g_root : NULL;
}

const char *cap_spool_env(void)
{
	return g_follow ? g_env_spool : NULL;
}

void cap_wait_begin(void)
{
	if (g_follow && g_spool.hdr)
		atomic_fetch_add(&g_spool.hdr->n_in_wait, 1);
}

void cap_wait_end(int reaped_pid, int status)
{
	struct spool_hdr *h = g_spool.hdr;

	if (!g_follow || !h)
		return;
	if (reaped_pid > 0 && (WIFEXITED(status) || WIFSIGNALED(status))) {
		uint32_t i = atomic_fetch_add(&h->n_reaps, 1);
		struct spool_reap *e = &h->reaps[i % SPOOL_N_REAPS];

		e->pid = (uint32_t)reaped_pid;
		e->status = status;
		e->t_ns = mono_ns();
		atomic_store_explicit(&e->seq, i + 1, memory_order_release);
	}
	/* after the entry: a recorder that sees no wait under way has every entry written */
	atomic_fetch_sub(&h->n_in_wait, 1);
}

void cap_note_fatal(int sig)
{
	if (g_follow && g_spool.hdr)
		atomic_store(&g_spool.hdr->fatal_signal, (uint32_t)sig);
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/*
 * Add @name to the names of the spool's images: "sh -> cc1". The oldest ones give way to
 * "... -> " when they do not fit.
 */
static void add_image(struct spool_hdr *h, const char *name)
{
	const size_t cap = sizeof(h->images);
	char buf[sizeof(h->images)];
	const char *keep;
	size_t len;
	int n;

	len = strnlen(h->images, cap - 1);
	h->images[len] = '\0';
	if (len == 0) {
		snprintf(h->images, cap, "%s", name);
		return;
	}
	/* the oldest names go, whole, until the new one fits after the rest */
	keep = h->images;
	while (strlen(keep) + strlen(name) + 4 + (keep != h->images ? 7 : 0) >= cap) {
		const char *next = strstr(keep, " -> ");

		if (!next) {
			keep = NULL;
			break;
		}
		keep = next + 4;
	}
	/* the loop above made it fit: a result of cap or more would be a bug there */
	if (!keep)
		n = snprintf(buf, cap, "... -> %s", name);
	else
		n = snprintf(buf, cap, "%s%s -> %s", keep != h->images ? "... -> " : "", keep,
			     name);
	assert(n >= 0 && (size_t)n < cap); /* the loop above left room */
	(void)n;
	memcpy(h->images, buf, cap);
}

/*
 * Add this image's program, the name it was exec'd as (AT_EXECFN, without its directory),
 * to the names of the spool's images, unless the exec that made it named it already.
 */
static void note_image(struct spool_hdr *h)
{
	const char *fn = (const char *)getauxval(AT_EXECFN), *name, *last = h->images, *arrow;
	const bool named = atomic_exchange(&h->exec_pending, 0) != 0;

	if (!fn || !*fn)
		return;
	name = base_name(fn);
	h->images[sizeof(h->images) - 1] = '\0';
	for (; (arrow = strstr(last, " -> ")); last = arrow + 4)
		;
	/* another last name: an image that never loaded the capture ran in between */
	if (!named || strcmp(last, name) != 0)
		add_image(h, name);
}

/* The images as they were before an exec named its program (cap_exec_failed puts them back);
 * a successful exec ends every thread, so one exec at a time uses it. */
static char g_images_before_exec[SPOOL_IMAGES_BYTES];
static bool g_exec_named;

void cap_before_exec(const char *path)
{
	if (!tfs_capture_mask_)
		return;
	if (g_follow && g_spool.hdr && path && *path) {
		memcpy(g_images_before_exec, g_spool.hdr->images, sizeof(g_images_before_exec));
		add_image(g_spool.hdr, base_name(path));
		atomic_store(&g_spool.hdr->exec_pending, 1);
		g_exec_named = true;
	}
#ifdef TFS_CAP_SHARED
	if (g_spool.hdr) { /* its allocation ids go on there, its descriptors keep their files */
		atomic_store_explicit(&g_spool.hdr->next_alloc, cap_alloc_next_id(),
				      memory_order_relaxed);
		cap_files_export(g_spool.hdr->exec_fd_file, SPOOL_EXEC_FDS);
	}
#endif
	/* the new image goes on in this spool; what this thread wrote so far is complete */
	if (cap_tls_depth++ == 0 && tls_state && tls_state->chunk) {
		cap_spool_hand_over(tls_state->chunk);
		tls_state->chunk = NULL;
		tls_state->fill = tls_state->cap = 0;
	}
	cap_tls_depth--;
}

void cap_exec_failed(void)
{
	if (!g_exec_named || !g_spool.hdr)
		return;
	atomic_store(&g_spool.hdr->exec_pending, 0);
	memcpy(g_spool.hdr->images, g_images_before_exec, sizeof(g_images_before_exec));
	g_exec_named = false;
}

/*
 * When this process began, in clock ticks after boot (field 22 of /proc/self/stat, which
 * an exec keeps): with the pid, what tells it from an earlier process given the same pid.
 * 0 when /proc cannot say. Async-signal-safe: a forked child calls it.
 */
static uint64_t proc_start(void)
{
	struct cap_proc_stat st;

	return cap_proc_stat(0, &st) == 0 ? st.start : 0;
}

/* Whether the producer of @h is this process (pid @pid, begun at @start), not an earlier
 * process that had the pid. */
static bool produced_by(const struct spool_hdr *h, uint32_t pid, uint64_t start)
{
	uint64_t theirs = atomic_load(&h->producer_start);

	return atomic_load(&h->producer_pid) == pid && (!theirs || !start || theirs == start);
}

/*
 * Move @path, the spool an earlier process of our pid left, to `<path>.<k>`, a name the
 * recorder reads too: it may not have taken that spool in yet, so it is never removed
 * here. @return 0 (moved, or gone meanwhile) or -errno
 */
static int set_aside(const char *path)
{
	char aside[PATH_MAX];
	int rc = cap_spool_move_aside(path, aside, sizeof(aside));

	return rc == -ENOENT ? 0 : rc;
}

/*
 * Record into a spool of our own, `<root>.<pid>`, made like @parent's (the spool of the
 * process we were forked or spawned from, or of a sibling under an untraced launcher:
 * attach()), with @ppid as our parent in the trace (the forker's pid, not getppid(), which
 * names the recorder once that process has ended). The environment is left alone (setenv
 * is not safe in a forked child): an exec'd image finds this spool by its name (attach()).
 */
static int become_child(const struct spool_hdr *parent, uint32_t ppid, uint32_t index)
{
	uint32_t pid = (uint32_t)getpid();
	uint64_t start = proc_start();
	int rc;

	rc = cap_spool_child_path(g_root, pid, g_path, sizeof(g_path));
	if (rc < 0)
		return rc;
	rc = cap_spool_create_child(&g_spool, g_path, parent, pid, ppid, start, index);
	for (int tries = 0; rc == -EEXIST && tries < 4; tries++) {
		/* no aside name here (too long, no such renames): the old spool goes, as it
		 * did before aside names, rather than this process going unrecorded */
		if (set_aside(g_path) < 0)
			unlink(g_path);
		rc = cap_spool_create_child(&g_spool, g_path, parent, pid, ppid, start, index);
	}
	return rc;
}

/* The pid of the process that forked: set before the fork, read by its child. */
static uint32_t g_forker;
/* The forking thread's child's start_index (spool_hdr): set before the fork in the thread
 * that forks, which is the one thread of the child. */
static _Thread_local uint32_t tls_fork_index TLS_IE;

uint32_t cap_take_start_index(void)
{
	if (!g_follow || !g_spool.hdr)
		return 0;
	return atomic_fetch_add(&g_spool.hdr->n_started, 1) + 1;
}

static void fork_prepare(void)
{
	g_forker = (uint32_t)getpid();
	tls_fork_index = cap_take_start_index();
}

/*
 * This process cannot record (@why): say so on stderr and count it in the first process's
 * spool, for `tracefs record` to report at the end. Async-signal-safe calls only (and
 * snprintf of strings and numbers): a forked child of a threaded program may be here.
 */
static void unrecorded(const char *why, int err)
{
	char msg[PATH_MAX + 160];
	const char *name = err ? strerrorname_np(err) : NULL;
	struct spool_hdr *root;
	int fd, len;

	len = snprintf(msg, sizeof(msg), "tracefs: process %u is not recorded: %s%s%s%s\n",
		       (unsigned int)getpid(), why, name ? " (" : "", name ? name : "",
		       name ? ")" : "");
	if (len > 0)
		(void)!write(STDERR_FILENO, msg, (size_t)len < sizeof(msg) ? (size_t)len
									     : sizeof(msg) - 1);
	fd = open(g_root, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	root = mmap(NULL, SPOOL_HDR_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (root == MAP_FAILED)
		return;
	if (root->magic == SPOOL_MAGIC && root->version == SPOOL_VERSION)
		atomic_fetch_add(&root->n_unrecorded, 1);
	munmap(root, SPOOL_HDR_BYTES);
}

/*
 * In a forked child (one thread, the forking one): in-process capture stops; attached to
 * `tracefs record`, the child becomes a new rank with a spool of its own. The parent's
 * spool, chunk and thread state are the parent's: dropped here, never touched. A child of
 * a process that could not record cannot either (no spool to derive its own from).
 */
static void fork_child(void)
{
	struct spool parent = g_spool;
	struct tstate *ts = tls_state;
	int rc = -ENOTSUP;

	cap_tls_depth++;
	tls_state = NULL;
	tls_thread_id = 0;
	pthread_setspecific(g_key, NULL);
	if (ts)
		munmap(ts, sizeof(*ts));
	g_spool.hdr = NULL;
	if (cap_bt_depth)
		cap_modules_forget();
#ifdef TFS_CAP_SHARED
	cap_files_forget(); /* the parent's file ids are named in the parent's rank only */
#endif
	if (g_follow && parent.hdr) {
		rc = become_child(parent.hdr, g_forker, tls_fork_index);
		if (rc < 0)
			unrecorded("cannot create its spool", -rc);
	} else if (g_follow) {
		unrecorded("the process it was forked from is not", 0);
	}
	cap_spool_unmap(&parent);
	atomic_store(&g_phase_gen, 0);
	atomic_store(&g_lost_early, 0);
	atomic_store(&g_stalled, false); /* a new spool, a new consumer */
	atomic_store(&g_said_stall, false);
	if (rc < 0) {
		tfs_capture_mask_ = 0;
		g_inproc = false;
	}
	cap_tls_depth--;
}

/*
 * TFS_TRACE (cap_parse_trace's words). Unset or empty: zones and mem (the interposers stay
 * off in-process unless asked for); an unknown word is reported and skipped.
 */
static uint32_t parse_trace(const struct cap_inproc_ops *ops, const char *s)
{
	uint32_t mask = TFS_TRACE_ON, one;
	char word[32];

	if (!s || !*s)
		return TFS_TRACE_ON | TFS_TRACE_ZONES | TFS_TRACE_MEM;
	while (*s) {
		size_t n = strcspn(s, ",");

		snprintf(word, sizeof(word), "%.*s", (int)(n < 31 ? n : 31), s);
		if (ops->parse_trace(word, &one) == 0)
			mask |= one;
		else
			fprintf(stderr, "tracefs: unknown TFS_TRACE word '%s': ignored\n", word);
		s += n + (s[n] == ',');
	}
	return mask;
}

/* TFS_BACKTRACE_DEPTH: frames per allocation backtrace, 0 (off) to SPOOL_MAX_BT_FRAMES. */
static uint32_t parse_bt_depth(const char *s)
{
	char *end;
	long n;

	if (!s || !*s)
		return DEFAULT_BT_DEPTH;
	n = strtol(s, &end, 10);
	if (*end || n < 0 || n > (long)SPOOL_MAX_BT_FRAMES) {
		fprintf(stderr, "tracefs: bad TFS_BACKTRACE_DEPTH=%s (0 to %u): using %u\n", s,
			SPOOL_MAX_BT_FRAMES, DEFAULT_BT_DEPTH);
		return DEFAULT_BT_DEPTH;
	}
	return (uint32_t)n;
}

/*
 * In-process mode: the policy of TFS_WHEN_FULL, TFS_SAMPLE and TFS_SAMPLE_BYTES (bad
 * values are said and ignored).
 */
static struct spool_policy parse_policy(void)
{
	static const char *const vars[2] = {"TFS_SAMPLE", "TFS_SAMPLE_BYTES"};
	struct spool_policy p = {.when_full = SPOOL_WAIT, .sample = SPOOL_SAMPLE_ALL};
	const char *v = getenv("TFS_WHEN_FULL");

	if (cap_parse_when_full(v, &p.when_full) < 0)
		fprintf(stderr, "tracefs: bad TFS_WHEN_FULL=%s (wait or drop): waiting\n", v);
	for (uint32_t i = 0; i < 2; i++) {
		v = getenv(vars[i]);
		if (!v || !*v)
			continue;
		if (cap_parse_count(v, &p.sample_every) == 0) {
			p.sample = i == 0 ? SPOOL_SAMPLE_CALLS : SPOOL_SAMPLE_BYTES;
			break;
		}
		fprintf(stderr, "tracefs: bad %s=%s (a count from 1, k, m or g after it): "
				"ignored\n", vars[i], v);
	}
	return p;
}

static int start_inproc(void)
{
	const struct cap_inproc_ops *ops = cap_inproc_load();
	struct cap_timing tm;
	const char *mb = getenv("TFS_SPOOL_MB");
	size_t bytes = (size_t)SPOOL_DEFAULT_MB << 20;
	int rc;

	if (!ops)
		return -ENOENT;
	if (ops->parse_timing(getenv("TFS_TIMING"), &tm) < 0) {
		fprintf(stderr, "tracefs: bad TFS_TIMING=%s: using lossless\n",
			getenv("TFS_TIMING"));
		tm.timing = TFS_TIMING_LOSSLESS;
		tm.rel_err = 0;
		tm.coder = TFS_CODER_AUTO;
	}
	if (mb && atol(mb) > 0)
		bytes = (size_t)atol(mb) << 20;
	rc = cap_spool_create(&g_spool, NULL, bytes, SPOOL_START_CHUNKS, (uint32_t)tm.timing,
			      parse_trace(ops, getenv("TFS_TRACE")));
	if (rc < 0)
		return rc;
	g_spool.hdr->policy = parse_policy();
	/* before the consumer starts: it declares the allocation kinds with or without stacks */
	if (g_spool.hdr->trace_mask & TFS_TRACE_ALLOC)
		g_spool.hdr->bt_depth = parse_bt_depth(getenv("TFS_BACKTRACE_DEPTH"));
	atomic_store(&g_spool.hdr->producer_pid, (uint32_t)getpid());
	rc = ops->start(&g_spool, &tm, cap_thread_exclude);
	if (rc < 0) {
		cap_spool_unmap(&g_spool);
		return rc;
	}
	g_inproc_ops = ops;
	return 0;
}

/* An exec'd image going on in its predecessor's spool: allocation ids go on from its, and
 * the descriptors it inherits name the files they did. */
static void go_on_image(void)
{
	cap_spool_prefault(&g_spool);
#ifdef TFS_CAP_SHARED
	cap_alloc_ids_from(atomic_load_explicit(&g_spool.hdr->next_alloc, memory_order_relaxed));
	cap_files_import(g_spool.hdr->exec_fd_file, SPOOL_EXEC_FDS);
#endif
}

/*
 * How far up from our parent attach() looks for the producer of the spool it found taken:
 * deeper than any chain of untraced helpers between a traced process and one it started.
 */
#define ANCESTRY_MAX 64

/*
 * Whether the producer of @h, a spool that another process took, is an ancestor of ours,
 * judged by the chain of parents /proc gives from getppid() on: a process given the pid
 * of an ended producer is no ancestor (its start time differs). Where /proc cannot say
 * even who our parent is, it is taken to be, as a spawned process's producer mostly is.
 * Runs once per image that finds its spool taken: one read of /proc when our parent is
 * the producer, one per ancestor up to init (ANCESTRY_MAX at most) when it is none.
 */
static bool produced_by_ancestor(const struct spool_hdr *h)
{
	const uint32_t producer = atomic_load(&h->producer_pid);
	const uint64_t start = atomic_load(&h->producer_start);
	uint32_t pid = (uint32_t)getppid();

	for (int i = 0; i < ANCESTRY_MAX && pid != 0; i++) {
		struct cap_proc_stat st;

		if (cap_proc_stat(pid, &st) < 0)
			return i == 0;
		if (pid == producer)
			return !start || !st.start || st.start == start;
		if (pid == 1)
			return false;
		pid = st.ppid;
	}
	return false;
}

/* Map @path if it is a spool this process (pid @pid, begun at @start) produces into. */
static bool attach_own(const char *path, uint32_t pid, uint64_t start)
{
	if (cap_spool_attach(&g_spool, path) < 0)
		return false;
	if (produced_by(g_spool.hdr, pid, start)) {
		go_on_image();
		return true;
	}
	cap_spool_unmap(&g_spool);
	return false;
}

/*
 * The start_index (spool_hdr) the spawner gave this process in TFS_SPAWN_INDEX,
 * "<spawner's pid>:<index>" (interpose_proc.c spawn()), if its spawner is @spawner and is
 * our parent; 0 otherwise (a variable inherited from further up). The variable is removed:
 * it is this process's alone.
 */
static uint32_t spawn_index(uint32_t spawner)
{
	const char *v = getenv(CAP_SPAWN_INDEX_ENV);
	unsigned long pid, index;
	char *end;

	if (!v)
		return 0;
	errno = 0;
	pid = strtoul(v, &end, 10);
	index = *end == ':' ? strtoul(end + 1, &end, 10) : 0;
	if (errno || *end || pid != spawner || pid != (unsigned long)getppid() ||
	    index > UINT32_MAX)
		index = 0;
	unsetenv(CAP_SPAWN_INDEX_ENV);
	return (uint32_t)index;
}

static int attach(const char *path)
{
	uint32_t pid = (uint32_t)getpid(), expect = 0;
	uint64_t start = proc_start();
	const char *root = getenv("TFS_SPOOL_ROOT");
	struct spool other;
	bool ancestor;
	int rc = cap_spool_attach(&g_spool, path);

	if (rc < 0)
		return rc;
	g_follow = true;
	snprintf(g_path, sizeof(g_path), "%s", path);
	snprintf(g_root, sizeof(g_root), "%s", root && *root ? root : path);
	/* one producing process per spool; an exec'd image keeps the pid and goes on */
	if (atomic_compare_exchange_strong(&g_spool.hdr->producer_pid, &expect, pid)) {
		atomic_store(&g_spool.hdr->producer_start, start);
		/* the recorder's child, or a process that an untraced launcher it runs started */
		g_spool.hdr->parent_pid = (uint32_t)getppid();
		cap_spool_prefault(&g_spool);
		return 0;
	}
	if (produced_by(g_spool.hdr, pid, start)) {
		go_on_image();
		return 0;
	}
	/* the image a forked child exec'd with the environment it inherited: its own spool */
	other = g_spool;
	g_spool.hdr = NULL;
	if (cap_spool_child_path(g_root, pid, g_path, sizeof(g_path)) == 0 &&
	    attach_own(g_path, pid, start)) {
		cap_spool_unmap(&other);
		return 0;
	}
	/*
	 * Another process's spool. Its producer is our parent in the trace when it is our
	 * ancestor: it spawned us (posix_spawn, clone + exec), or a process it started that
	 * records nothing (a static helper) did. Otherwise a process that records nothing
	 * started us and, before us, the producer: a static launcher that `tracefs record`
	 * runs, whose first child to attach took the first spool. Our parent is then that
	 * process (getppid()), which is no rank, and the producer's images are not ours.
	 * (A process whose traced spawner ended before this image began is taken for one of
	 * these: its parent is then the one it was given, the recorder or init.)
	 */
	ancestor = produced_by_ancestor(other.hdr);
	rc = become_child(other.hdr,
			  ancestor ? atomic_load(&other.hdr->producer_pid) : (uint32_t)getppid(),
			  ancestor ? spawn_index(atomic_load(&other.hdr->producer_pid)) : 0);
	cap_spool_unmap(&other);
	if (rc < 0) {
		unrecorded("cannot create its spool", -rc);
		g_follow = false;
		return rc;
	}
	if (!ancestor)
		g_spool.hdr->images[0] = '\0';
	return 0;
}

#if defined(__x86_64__)
/* The first bytes of file @path into @buf, at most @cap - 1 of them, NUL-terminated. */
static bool read_head(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = '\0';
	return true;
}

/* Whether /proc/cpuinfo promises a TSC that ticks at one rate on every CPU, always. */
static bool tsc_invariant(void)
{
	static char buf[8192]; /* the first CPU's lines, its flags among them */

	return read_head("/proc/cpuinfo", buf, sizeof(buf)) && strstr(buf, " constant_tsc") &&
	       strstr(buf, " nonstop_tsc");
}

/*
 * Whether the TSC is the clock to use when nothing says which: invariant, and the kernel's
 * own clocksource, which the kernel leaves when its watchdog finds the TSC unstable.
 */
static bool tsc_by_default(void)
{
	char src[64];

	return read_head("/sys/devices/system/clocksource/clocksource0/current_clocksource", src,
			 sizeof(src)) &&
	       !strcmp(src, "tsc\n") && tsc_invariant();
}
#endif

/*
 * The recording's clock, the TSC's rate from the spool's header: the first process decides
 * (TFS_CLOCK, else tsc_by_default()), measures the rate over 2 ms and leaves it there, or
 * SPOOL_TSC_NONE for clock_gettime; the processes that follow take that. Then the process's
 * first pair.
 */
static void clock_init(void)
{
#if defined(__x86_64__)
	const char *env = getenv("TFS_CLOCK");
	const int saved_errno = errno;
	uint64_t hz, t1, m1;
	bool tsc;

	if (g_no_clock)
		return;
	hz = atomic_load(&g_spool.hdr->tsc_hz);
	if (hz == SPOOL_TSC_NONE)
		return;
	if (!hz) {
		if (env && *env && strcmp(env, "monotonic") && strcmp(env, "tsc"))
			fprintf(stderr, "tracefs: bad TFS_CLOCK=%s (monotonic or tsc): using the "
					"default\n", env);
		if (env && !strcmp(env, "monotonic"))
			tsc = false;
		else if (env && !strcmp(env, "tsc"))
			tsc = tsc_invariant();
		else
			tsc = tsc_by_default();
		errno = saved_errno; /* the files read, before the program's main */
		if (!tsc) {
			atomic_store(&g_spool.hdr->tsc_hz, SPOOL_TSC_NONE);
			return;
		}
	}
	clk_pair(&g_tsc0, &g_mono0);
	if (!hz) {
		/* asleep in between, not spinning: the pairs' own brackets make the accuracy
		   (the raw call: the interposer's may not have found the real one yet) */
		do {
			const uint64_t now = mono_ns(), gone = now > g_mono0 ? now - g_mono0 : 0;
			struct timespec nap = {0, gone < 2000000u ? (long)(2000000u - gone) : 0};

			syscall(SYS_nanosleep, &nap, NULL);
			clk_pair(&t1, &m1);
		} while (m1 - g_mono0 < 2000000u);
		errno = saved_errno; /* EINTR */
		hz = t1 > g_tsc0 ? (uint64_t)((double)(t1 - g_tsc0) * 1e9 / (double)(m1 - g_mono0))
				 : 0;
		if (hz <= SPOOL_TSC_NONE) {
			atomic_store(&g_spool.hdr->tsc_hz, SPOOL_TSC_NONE);
			return;
		}
		atomic_store(&g_spool.hdr->tsc_hz, hz);
	}
	g_tsc_mult = (uint64_t)((((unsigned __int128)1000000000u) << 32) / hz);
	if (!g_tsc_mult || g_tsc_mult >= UINT64_MAX / 4)
		return;
	/* 2^24 ticks, less where a mult of up to 1.5 times the rate would overflow */
	g_tsc_span = (uint64_t)1 << 24;
	while (g_tsc_span > 1 && g_tsc_span > UINT64_MAX / (g_tsc_mult + g_tsc_mult / 2))
		g_tsc_span >>= 1;
	g_tsc = true;
#endif
}

/*
 * The spool's policy, as producers use it: TFS_WAIT_LIMIT_MS, and where the size of each
 * allocating call is when sampling by bytes.
 */
static void policy_init(void)
{
	const char *ms = getenv("TFS_WAIT_LIMIT_MS");
	uint64_t v;

	g_policy = g_spool.hdr->policy;
	if (g_policy.sample > SPOOL_SAMPLE_BYTES || !g_policy.sample_every)
		g_policy.sample = SPOOL_SAMPLE_ALL;
	if (ms && *ms && cap_parse_count(ms, &v) == 0 && v < UINT64_MAX / 1000000u)
		g_wait_limit_ns = v * 1000000u;
	else if (ms && *ms)
		fprintf(stderr, "tracefs: bad TFS_WAIT_LIMIT_MS=%s: using %u\n", ms,
			SPOOL_WAIT_LIMIT_MS);
	for (uint32_t call = 0; call < N_CALLS && g_policy.sample == SPOOL_SAMPLE_BYTES; call++) {
		const struct tfs_kind_desc *k = &cap_call_kinds[call];
		uint8_t w = 1; /* word 0 is the duration */

		for (uint32_t i = 0; i < k->n_args; i++) {
			if (k->args[i].enc == TFS_ENC_STR)
				continue;
			if (!strcmp(k->args[i].name, "size"))
				g_size_word[call] = w;
			else if (!strcmp(k->args[i].name, "nmemb"))
				g_nmemb_word[call] = w;
			w++;
		}
	}
}

__attribute__((constructor)) static void capture_init(void)
{
	const char *env = getenv("TFS_CAPTURE");
	const char *path = getenv("TFS_SPOOL");
	int rc;

	if (env && !strcmp(env, "0"))
		return;
	if (pthread_key_create(&g_key, thread_gone) != 0)
		return;
	if (path && *path) {
		snprintf(g_env_spool, sizeof(g_env_spool), "%s", path);
		rc = attach(path);
		if (rc == 0) {
			/* a new image: no thread of the one before it waits any more */
			atomic_store(&g_spool.hdr->n_in_wait, 0);
			note_image(g_spool.hdr);
		}
	} else {
		rc = start_inproc();
		g_inproc = rc == 0;
	}
	if (rc < 0)
		return;
	g_no_clock = g_spool.hdr->timing == TFS_TIMING_NONE;
	policy_init();
	clock_init();
	pthread_atfork(fork_prepare, NULL, fork_child);
	cap_tls_depth++; /* libunwind's and the loader's allocations are not the program's */
	if (g_spool.hdr->bt_depth) {
		cap_bt_depth = g_spool.hdr->bt_depth < SPOOL_MAX_BT_FRAMES ? g_spool.hdr->bt_depth
									     : SPOOL_MAX_BT_FRAMES;
		rc = cap_unwind_init();
		if (rc == -ENOENT)
			fprintf(stderr, "tracefs: cannot load libunwind.so.8: allocation "
					"backtraces stay empty\n");
		/* on failure the allocations still carry a (now empty) backtrace: the consumer
		   declared their kinds with one */
	}
	tfs_capture_mask_ = g_spool.hdr->trace_mask | TFS_TRACE_ON;
	/* the thread running the constructors is thread 0 */
	if (cap_tls_depth == 1 && !tls_state)
		thread_start();
	if (cap_bt_depth && tls_state)
		cap_modules_scan();
#ifdef TFS_CAP_SHARED
	/* crash events: under `tracefs record`, which keeps a dying process's last records */
	if (g_follow && (tfs_capture_mask_ & TFS_TRACE_THREADS))
		cap_sig_init();
#endif
	cap_tls_depth--;
}

__attribute__((destructor)) static void capture_fini(void)
{
	if (!tfs_capture_mask_)
		return;
	if (cap_tls_depth++ == 0)
		say_lost(tls_state);
	cap_tls_depth--;
	if (g_inproc) {
		tfs_capture_mask_ = 0;
		g_inproc = false;
		g_inproc_ops->finish(atomic_load(&g_lost_early));
		return;
	}
	/* the exiting thread's chunk is complete: hand it over (others' are read as they are) */
	if (cap_tls_depth++ == 0 && tls_state && tls_state->chunk) {
		cap_spool_hand_over(tls_state->chunk);
		tls_state->chunk = NULL;
		tls_state->fill = tls_state->cap = 0;
	}
	cap_tls_depth--;
	atomic_store(&g_spool.hdr->exited, 1);
}
