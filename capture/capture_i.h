/*
 * Internal interfaces between the parts of libtfscapture: the producer (capture.c), the
 * in-process consumer thread (inproc.c) and the consumer (consumer.c, also linked into
 * `tracefs record`). Not installed; the public API is include/tfs/capture.h.
 */
#ifndef TFS_CAPTURE_I_H
#define TFS_CAPTURE_I_H

#include <stddef.h>
#include <stdint.h>

struct spool;

/* A timing mode as given to `tracefs record --timing` or TFS_TIMING. */
struct cap_timing {
	int timing;	/* enum tfs_timing */
	double rel_err; /* lossy only */
	int coder;	/* TFS_CODER_AUTO, or TFS_CODER_FAST (",fast") */
};

/*
 * Parse "lossless", "none" or "lossy:<rel_err>" (NULL or "" is lossless), the timed modes
 * optionally followed by ",fast" (timing columns that decode fast: TFS_CODER_FAST).
 * @return 0 or -EINVAL
 */
int cap_parse_timing(const char *s, struct cap_timing *out);

/*
 * Nesting depth of the capture on the calling thread: non-zero while the capture itself runs
 * (an interposed call made from inside it is passed through unrecorded).
 */
extern _Thread_local unsigned int cap_tls_depth __attribute__((tls_model("initial-exec")));

/* The clock of the trace (0 when timing is none). */
uint64_t cap_now_ns(void);

/*
 * Record interposed call @call (enum cap_call, calls_i.h) that began at @ts_ns: @args are
 * its words (duration first, then its u64 arguments), @strs its string arguments, each
 * NUL-terminated, @strs_len bytes in all. Never fails: a lost record is counted as
 * dropped. Preserves errno.
 */
void cap_put_call(uint32_t call, uint64_t ts_ns, const uint64_t *args, uint32_t n_args,
		  const char *strs, size_t strs_len);

/*
 * Allocation backtraces (unwind.c). cap_bt_depth: frames kept per backtrace, 0 when off;
 * set once before capture starts. The rest is called from inside the capture only.
 */
extern uint32_t cap_bt_depth;
/* Open libunwind. @return 0 or -ENOENT (not installed: backtraces stay empty) */
int cap_unwind_init(void);
/*
 * The calling thread's backtrace, outermost first, the capture library's own frames left
 * out, at most @max (the innermost ones when deeper). @n gets its frames; @same how many of
 * its first frames are, in the same places, those of the backtrace this thread's previous
 * call returned (at least: a lower bound). @scratch (SPOOL_MAX_BT_FRAMES) may hold it.
 * @return the frames, borrowed: the thread's own until its next call
 */
const uint64_t *cap_unwind(uint64_t *scratch, uint32_t max, uint32_t *n, uint32_t *same);
/*
 * In a forked child recording into a spool of its own: forget what was announced (to the
 * parent's spool), so that the child's first backtrace announces its objects again. Clears
 * the scan lock another thread may have held at the fork.
 */
void cap_modules_forget(void);
/* Announce every loaded object not announced yet (REC_MODULE through cap_put_module). */
void cap_modules_scan(void);
/* Announce new objects if one of @frames lies outside every object announced so far. */
void cap_modules_check(const uint64_t *frames, uint32_t n);
/* Record a REC_MODULE on the calling thread (capture.c); inside the capture only. */
void cap_put_module(uint64_t bias, uint64_t lo, uint64_t hi, const char *path);

/* Reserve the next symbolic thread id (pthread_create numbers threads in creation order). */
uint32_t cap_thread_reserve(void);
/* The calling thread records as thread @id (reserved by its creator). */
void cap_thread_preassign(uint32_t id);

/*
 * The trace so far, for MPI_Finalize to merge: in-process, the consumer thread finishes and
 * hands it over in memory; under `tracefs record`, the recorder is asked (spool save_req)
 * to finish and save it to <spool>.trace, read here and removed, waiting up to
 * @timeout_ms. Events recorded afterwards are in no trace.
 * @param out  a new malloc'ed buffer of *@len bytes, the caller frees it
 * @return 0, -ENOTSUP (capture off), -ETIMEDOUT, -ENOMEM or the consumer's -errno
 */
int cap_trace_now(void **out, size_t *len, unsigned int timeout_ms);

/* The calling thread never records (it is the capture's own consumer thread). */
void cap_thread_exclude(void);

/*
 * Process following (attached to `tracefs record` only): this process's spool path and the
 * first process's (NULL otherwise). A forked child records into `<root>.<pid>`; one that
 * could not make it names the first process's, from which an exec'd image tries again.
 */
const char *cap_spool_path(void);
const char *cap_spool_root(void);
/* Before an exec: hand over the calling thread's chunk (the new image goes on after it). */
void cap_before_exec(void);

/* In-process mode: start the consumer thread over @s. @return 0 or -errno */
int cap_inproc_start(struct spool *s, const struct cap_timing *tm);
/* Wait (up to a second) until the consumer has taken in every chunk handed over so far. */
void cap_inproc_flush(void);
/* At exit: stop the consumer thread, take in everything left, save the trace. */
void cap_inproc_finish(uint64_t dropped_early);
/*
 * Now (MPI_Finalize): stop the consumer thread, take in everything, hand the trace over in a
 * new malloc'ed buffer; nothing is saved at exit. @return 0, -ENOTSUP (no consumer) or -errno
 */
int cap_inproc_save_mem(void **out, size_t *len);

#endif
