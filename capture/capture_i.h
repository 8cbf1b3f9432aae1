/*
 * Internal interfaces between the parts of libtfscapture: the producer (capture.c), the
 * in-process consumer thread (inproc.c) and the consumer (consumer.c, also linked into
 * `tracefs record`). Not installed; the public API is include/tfs/capture.h.
 */
#ifndef TFS_CAPTURE_I_H
#define TFS_CAPTURE_I_H

#include <stdatomic.h>
#include <stdbool.h>
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
 * Parse a list of categories, comma-separated: zones, mem, alloc, io, threads, mpi, nested
 * (calls made inside another traced call too), all (all but mpi and nested), into *@mask
 * (TFS_TRACE_ON and the categories named). The one list of the words `tracefs record
 * --trace` and TFS_TRACE take. @return 0, or -EINVAL at the first unknown word (*@mask then
 * holds the words before it)
 */
int cap_parse_trace(const char *s, uint32_t *mask);

/*
 * Nesting depth of the capture on the calling thread: non-zero while the capture itself runs
 * (an interposed call made from inside it is passed through unrecorded). volatile: it is
 * read where the compiler does not look, by the interposed malloc family (which it takes
 * for the C library's, reading no memory of ours: it dropped the raise and the lowering
 * around the capture's own malloc in exec_list) and by signal handlers of the thread.
 */
extern _Thread_local volatile unsigned int cap_tls_depth
	__attribute__((tls_model("initial-exec")));

/*
 * Interposed and MPI calls the calling thread is inside (their real function running): a
 * call made at depth > 0 belongs to a library's layer (a read inside an MPI call, an fopen
 * inside another interposed call) and is recorded only with TFS_TRACE_NESTED; allocations
 * are recorded at any depth. A thread created at depth d starts at depth d.
 */
extern _Thread_local unsigned int cap_call_depth __attribute__((tls_model("initial-exec")));
/* The outermost interposed call the calling thread is inside (a call number as REC_CALL's
 * aux), valid while cap_call_depth > 0: what a nested call is recorded as being inside. */
extern _Thread_local uint32_t cap_call_outer __attribute__((tls_model("initial-exec")));

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
 * The frame an interposer was called from, as the interposer itself sees it: the return
 * address into its caller, the caller's rsp once returned (the interposer's CFA) and the
 * caller's rbp. A backtrace unwound from it skips the capture's own frames, which every
 * interposed call would otherwise step through again (unwind.c).
 */
struct cap_frame {
	uintptr_t ra, sp, bp;
};

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/*
 * The calling function's struct cap_frame, in that function itself (a macro: an inlined
 * helper would see another frame). __builtin_frame_address(0) makes the function keep a
 * frame pointer: its prologue pushes the caller's rbp at the frame address, the return
 * address lies above it and the CFA 16 bytes above.
 */
#define CAP_CALLER_FRAME()                                                                         \
	((struct cap_frame){(uintptr_t)__builtin_return_address(0),                                \
			    (uintptr_t)__builtin_frame_address(0) + 16,                            \
			    *(const uintptr_t *)__builtin_frame_address(0)})
#define CAP_HAVE_CALLER_FRAME 1
#else
#define CAP_HAVE_CALLER_FRAME 0
#endif

/*
 * cap_put_call() of a call of the malloc family that began now (the clock is read here), its
 * backtrace from @from (NULL: from the capture's own frame), the frame the interposer was
 * called from. @call_n is the call in its low half and n_args in its high half: the words
 * are {0 (its duration), @a, @b, @c, @d, @e}, the first n_args of them (3 to 6). Its
 * words come in registers, and no string: the path every allocation and free takes.
 */
void cap_put_alloc_at(uint64_t call_n, uint64_t a, uint64_t b, uint64_t c, uint64_t d,
		      uint64_t e, const struct cap_frame *from);
/*
 * Record call @call (a kind with a backtrace) with backtrace @frames (@n of them, outermost
 * first) given by the caller instead of unwound here; its objects are announced first when
 * @announce. Without backtraces, as cap_put_call(). Never fails; preserves errno.
 */
void cap_put_call_frames(uint32_t call, uint64_t ts_ns, const uint64_t *args, uint32_t n_args,
			 const uint64_t *frames, uint32_t n, bool announce);

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
 * @from (optional): a frame of the calling thread's stack, outside the capture's, to walk
 * from instead of the caller's own registers (the frames inside it are the capture's).
 * @return the frames, borrowed: the thread's own until its next call
 */
const uint64_t *cap_unwind(uint64_t *scratch, uint32_t max, uint32_t *n, uint32_t *same,
			   const struct cap_frame *from);
/*
 * The backtrace of the code a signal interrupted, from the context @uc its SA_SIGINFO
 * handler got, as cap_unwind() gives it: its innermost frame is the interrupted
 * instruction's address plus one (a return address's place: symbolised at address - 1, it
 * names that instruction). Async-signal-safe. @return frames stored
 */
uint32_t cap_unwind_signal(uint64_t *frames, uint32_t max, void *uc);
/* pipe2 made @fds for libunwind (running for the capture): move them out of the program's
 * way, near the top of the descriptor limit. Does nothing for the program's own pipes. */
void cap_unwind_pipe(int fds[2], int flags);
/*
 * Whether @fd is one of the capture's own descriptors (libunwind's pipe, moved high) and the
 * caller is the program, not libunwind: the program is kept off it, as off a descriptor that
 * is not open (cap_fd_refuse: EBADF), so that it never becomes the program's, which
 * libunwind would then read and close (calls.txt `call`). The program sees two descriptors fewer under its
 * limit: EMFILE two sooner, dup2 onto either number EBADF. Always false in the static
 * library (no libunwind).
 */
bool cap_fd_own(int fd);
/* The capture's own descriptors, lowest first (-1: none), as cap_fd_own() takes them. */
void cap_fd_own_get(int fds[2]);
/* errno EBADF, -1: a call on a descriptor that is not open */
int cap_fd_refuse(void);
/* close_range(@first, @last, @flags) and closefrom(@lowfd), but the capture's own
 * descriptors (files.c). */
int cap_close_range(unsigned int first, unsigned int last, int flags);
void cap_closefrom(int lowfd);
/*
 * In a forked child recording into a spool of its own: forget what was announced (to the
 * parent's spool), so that the child's first backtrace announces its objects again. Clears
 * the scan lock another thread may have held at the fork.
 */
void cap_modules_forget(void);
/*
 * Whether @p lies in a read-only segment of a loaded object (a string literal, a constant),
 * not in memory the program writes; an object unloaded since (dlclose) is looked up again.
 */
bool cap_in_rodata(const void *p);
/* Announce every loaded object not announced yet (REC_MODULE through cap_put_module). */
void cap_modules_scan(void);
/*
 * Announce new objects if one of @frames lies outside every object announced so far, or an
 * object was unloaded since the last look (another may be where it was).
 */
void cap_modules_check(const uint64_t *frames, uint32_t n);
/*
 * An object was loaded where another had been (cap_modules_key has work to do); until then
 * frames need no tag. Reset in a forked child.
 */
extern _Atomic bool cap_modules_reloaded;
/*
 * Tag each of @frames that lies in a load over earlier ones with that load's tag (spool_i.h
 * frame tags), in place. After cap_modules_check() on them.
 */
void cap_modules_key(uint64_t *frames, uint32_t n);
/* Record a REC_MODULE on the calling thread (capture.c); inside the capture only. */
void cap_put_module(uint64_t bias, uint64_t lo, uint64_t hi, uint32_t tag, const char *path);

/* Reserve the next symbolic thread id (pthread_create numbers threads in creation order). */
uint32_t cap_thread_reserve(void);
/* Reserve the next symbolic file id of the process, unique across its images (files.c). */
uint32_t cap_file_reserve(void);
/* The calling thread records as thread @id (reserved by its creator). */
void cap_thread_preassign(uint32_t id);
/* The calling thread's id (given now if it has none yet); UINT32_MAX when it cannot record. */
uint32_t cap_thread_self(void);

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
 * Whether the calling thread is past its end in the capture (its state torn down in the
 * last round of its TSD destructors, or excluded): what it records now is dropped, counted.
 */
bool cap_thread_ended(void);

/*
 * Process following (attached to `tracefs record` only): this process's spool path and the
 * first process's (NULL otherwise). A forked child records into `<root>.<pid>`; one that
 * could not make it names the first process's, from which an exec'd image tries again.
 */
const char *cap_spool_path(void);
const char *cap_spool_root(void);
/* TFS_SPOOL as this process found it (NULL when not following): an exec passing another
 * value is a recorder of its own (`tracefs record` run by the program), not followed. */
const char *cap_spool_env(void);
/*
 * Process following: the start_index (spool_i.h spool_hdr) of the next process this one
 * forks or spawns, taken from its count; 0 when not following. A spawned process finds
 * its own in CAP_SPAWN_INDEX_ENV, "<spawner's pid>:<index>", set by its spawner.
 */
uint32_t cap_take_start_index(void);
#define CAP_SPAWN_INDEX_ENV "TFS_SPAWN_INDEX"
/*
 * Before an exec of @path: hand over the calling thread's chunk (the new image goes on after
 * it) and name @path's program among the process's images (spool_hdr.exec_pending), so that
 * an image that never loads the capture (a static one) is still named. cap_exec_failed()
 * when the exec returned: the images are as they were.
 */
void cap_before_exec(const char *path);
void cap_exec_failed(void);
/*
 * Around an interposed wait call (under `tracefs record`): count it as under way, then
 * note the child it reaped (@reaped_pid > 0, wait status @status: exited or killed) in the
 * spool's ring for the recorder (spool_i.h struct spool_reap). Async-signal-safe.
 */
void cap_wait_begin(void);
void cap_wait_end(int reaped_pid, int status);
/* The capture's handler saw fatal signal @sig (spool_hdr.fatal_signal). */
void cap_note_fatal(int sig);

/*
 * Fatal signals (interpose_sig.c, the shared library only): install the capture's handler
 * of SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP and SIGSYS wherever the program
 * leaves the default action, with an alternate stack for the calling thread; give each
 * recording thread its alternate stack when it starts, and take it back when it ends.
 */
void cap_sig_init(void);
void cap_sig_thread_start(void);
void cap_sig_thread_end(void);

/*
 * In-process mode, one table (inproc.c): the consumer a program linked with libtfscapture
 * runs on a thread of its own. In the shared library it lives in libtfsinproc.so, loaded by
 * cap_inproc_load() only when a process starts in-process: a process `tracefs record`
 * traces never consumes, so it never loads the consumer, the codec, libdw or zstd.
 */
struct cap_inproc_ops {
	/* TFS_TIMING and TFS_TRACE words (consumer.c): 0 or -EINVAL */
	int (*parse_timing)(const char *s, struct cap_timing *out);
	int (*parse_trace)(const char *s, uint32_t *mask);
	/*
	 * Start the consumer thread over @s; it calls @exclude first (cap_thread_exclude: the
	 * consumer records nothing). @return 0 or -errno
	 */
	int (*start)(struct spool *s, const struct cap_timing *tm, void (*exclude)(void));
	/* Wait (up to a second) until the consumer has taken in every chunk handed over. */
	void (*flush)(void);
	/* At exit: stop the consumer thread, take in everything left, save the trace. */
	void (*finish)(uint64_t dropped_early);
	/*
	 * Now (MPI_Finalize): stop the consumer thread, take in everything, hand the trace over
	 * in a new malloc'ed buffer; nothing is saved at exit. @return 0, -ENOTSUP (no
	 * consumer) or -errno
	 */
	int (*save_mem)(void **out, size_t *len);
};

/* The table itself (inproc.c): in the static library and in libtfsinproc.so only. */
extern const struct cap_inproc_ops cap_inproc_ops;

/*
 * The in-process consumer (inproc_load.c): linked in (the static library), or
 * libtfsinproc.so loaded from the directory of libtfscapture.so, else by the loader's
 * search. @return the table, borrowed for the life of the process; NULL (said on stderr)
 * when it cannot be loaded
 */
const struct cap_inproc_ops *cap_inproc_load(void);

#endif
