/*
 * One recording of `tracefs record`: the recorder's side of the spool protocol, owned by
 * capture/ (recording.c, recdir.c, recprocs.c) and driven by fs/cmd_record.c, which does the
 * command line and process control only. A recording makes its own private directory
 * (mkdtemp, mode 0700, under $TFS_SPOOL or /dev/shm), the first process's spool in it,
 * locked while it lives, and a consumer of it; it finds the spools of the processes the
 * program starts by listing that directory, takes in only regular files of its own user
 * there, consumes each, learns how each process ended, serves MPI_Finalize's request for the
 * trace, merges the processes' traces into one with a rank each, and at the end removes its
 * directory and what is in it, never anything else. It does not start, signal or wait for
 * processes, and the spool's names and layouts stay private to capture/. Not thread-safe: one
 * thread drives a recording. Linked into `tracefs`, not into libtfscapture.so.
 */
#ifndef TFS_RECORDING_H
#define TFS_RECORDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Most memory a spool grows to by default, in MiB (`--spool-size`, TFS_SPOOL_MB). */
#define TFS_RECORDING_SPOOL_MB_DEFAULT 64u
/** Frames kept of each allocation's backtrace by default (`--backtrace-depth`). */
#define TFS_RECORDING_BT_DEPTH_DEFAULT 64u
/** Most frames an allocation's backtrace keeps (`--backtrace-depth`'s upper bound). */
#define TFS_RECORDING_BT_DEPTH_MAX 128u

/** What a recording thread does when no chunk of its spool is free (`--when-full`). */
enum tfs_recording_when_full {
	TFS_RECORDING_WAIT = 0, /**< wait for the recorder to free one, bounded (the default) */
	TFS_RECORDING_DROP = 1, /**< drop the event and count it */
};

/** Which allocations carry their backtrace (`--sample`, `--sample-bytes`). */
enum tfs_recording_sample {
	TFS_RECORDING_SAMPLE_ALL = 0,	/**< every one (the default) */
	TFS_RECORDING_SAMPLE_CALLS = 1, /**< one in every sample_every allocating calls of a
					     thread */
	TFS_RECORDING_SAMPLE_BYTES = 2, /**< one per sample_every bytes a thread asks for: the
					     call whose size takes the thread's total past a
					     multiple of it */
};

/** How the trace stores event times (`--timing`, as tfs_recording_parse_timing() reads it). */
struct tfs_recording_timing {
	int timing;	/**< enum tfs_timing (tfs/tfs.h) */
	double rel_err; /**< TFS_TIMING_LOSSY: the relative error bound, in [2^-10, 1) */
	int coder;	/**< enum tfs_coder: TFS_CODER_AUTO, or TFS_CODER_FAST (",fast") */
};

/** How the producers meet a full spool and sample backtraces; all zero: the defaults. */
struct tfs_recording_policy {
	uint32_t when_full;    /**< enum tfs_recording_when_full */
	uint32_t sample;       /**< enum tfs_recording_sample */
	uint64_t sample_every; /**< N >= 1 (TFS_RECORDING_SAMPLE_ALL: unused) */
};

/** What a recording records and how it speaks. */
struct tfs_recording_opts {
	struct tfs_recording_timing timing;
	uint32_t mask;			    /**< TFS_TRACE_* (tfs/capture.h) the producers record */
	size_t spool_bytes;		    /**< most a spool grows to, in bytes */
	uint32_t bt_depth;		    /**< frames per allocation backtrace (with
					       TFS_TRACE_ALLOC), 0 to TFS_RECORDING_BT_DEPTH_MAX */
	struct tfs_recording_policy policy; /**< a full spool, sampling */
	/** metadata of the program's rank: program, cmdline ... */
	const char *program, *cmdline;
	/** ... and key/value pairs after them, NULL-terminated, may be NULL:
	 * {"mpi_size", "4", NULL} */
	const char *const *meta;
	bool mpi; /**< serve MPI_Finalize's request for the trace (libtfsmpi.so asks for it) */
	/** where the names found for each object file are kept between recordings, so that a
	 * later one reads them instead of the file's debugging information (created when first
	 * written, mode 0700); NULL or "": nowhere */
	const char *symbol_dir;
	/** the recorder's voice: one line on stderr ("tracefs: " and the message) */
	int (*say)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
	/** an errno's text, as the command line says it */
	const char *(*strerr)(int err);
};

/** What the consumers of a recording took in, summed over its processes. */
struct tfs_recording_stats {
	uint64_t n_events;	   /**< trace events appended */
	uint64_t n_records;	   /**< raw records read */
	uint64_t n_chunks;	   /**< chunks read (each once) */
	uint64_t n_partial_chunks; /**< chunks still being filled when the producer stopped */
	uint64_t n_partial_events; /**< events that came from those */
	uint64_t dropped_events;   /**< the producers' count */
	uint64_t wait_ns;	   /**< time producing threads waited for a free chunk, summed */
	uint32_t n_stalls;	   /**< waits given up: the consumer freed nothing for the limit */
	uint64_t bad_records;	   /**< malformed or unmatched records skipped */
	uint32_t n_threads;	   /**< producing threads seen */
	uint32_t open_zones;	   /**< zones still open at the end (zone_unfinished events) */
	uint32_t open_phases;	   /**< phases still open at the end (closed there) */
	uint64_t n_stacks;	   /**< distinct allocation backtraces */
	uint64_t n_addrs;	   /**< distinct code addresses in them */
	uint64_t n_named_addrs;	   /**< of those, symbolised with a function name */
};

struct tfs_recording;

/**
 * Parse a timing mode, `--timing` or TFS_TIMING: "lossless", "none" or "lossy:<rel_err>"
 * with 2^-10 <= rel_err < 1 (NULL or "": lossless), the timed modes optionally followed by
 * ",fast" (TFS_CODER_FAST).
 * @return 0, or -EINVAL (*@out then holds lossless or part of the mode)
 */
int tfs_recording_parse_timing(const char *s, struct tfs_recording_timing *out);

/**
 * Parse a list of categories, comma-separated, `--trace` or TFS_TRACE: zones, mem, alloc,
 * io, threads, mpi, nested, all (all but mpi and nested), into *@mask (TFS_TRACE_ON and the
 * categories named).
 * @return 0, or -EINVAL at the first unknown word (*@mask then holds the words before it)
 */
int tfs_recording_parse_trace(const char *s, uint32_t *mask);

/**
 * Parse `--when-full` or TFS_WHEN_FULL: "wait" or "drop" (NULL or "": wait) into an enum
 * tfs_recording_when_full.
 * @return 0 or -EINVAL
 */
int tfs_recording_parse_when_full(const char *s, uint32_t *out);

/**
 * Parse a positive count for sampling (`--sample`, `--sample-bytes`): decimal digits,
 * optionally followed by k, m or g (times 2^10, 2^20, 2^30).
 * @return 0 or -EINVAL (empty, 0, junk, overflow)
 */
int tfs_recording_parse_count(const char *s, uint64_t *out);

/**
 * Start a recording: sweep what killed recordings left under the prefix (saying so in one
 * line), make the private directory and the first spool, lock it and start its consumer.
 * @o is copied; its strings must outlive the recording. Free with tfs_recording_free().
 * @return 0, or -errno (said through @o->say, with what failed): -ENOMEM, -EINVAL (timing),
 *         -ENAMETOOLONG (TFS_SPOOL), or what making the directory or the spool failed with
 */
int tfs_recording_new(const struct tfs_recording_opts *o, struct tfs_recording **out);

/** The first spool's absolute path: the program's TFS_SPOOL. Borrowed from @r. */
const char *tfs_recording_spool(const struct tfs_recording *r);

/**
 * The program, pid @pid, has started (recording into the first spool).
 * @return 0 or -ENOMEM
 */
int tfs_recording_start(struct tfs_recording *r, pid_t pid);

/**
 * Consume what the processes handed over, serve MPI_Finalize's request, and look for new
 * processes' spools at least every 20 ms. Call repeatedly while they run.
 * @return chunks taken in (0: nothing, sleep a little), or -errno of the trace writer
 *         (sticky: there will be no trace)
 */
int tfs_recording_poll(struct tfs_recording *r);

/** The recorder reaped process @pid with wait status @status. */
void tfs_recording_reaped(struct tfs_recording *r, pid_t pid, int status);

/**
 * Nobody will reap the processes any more (the process that waited for them was killed):
 * from now on a process has ended once /proc says so, and tfs_recording_ended() says when
 * all have.
 */
void tfs_recording_orphaned(struct tfs_recording *r);

/** After tfs_recording_orphaned(): every process known has ended, and no new one is found. */
bool tfs_recording_ended(struct tfs_recording *r);

/** MPI_Finalize took the trace (the MPI wrappers merge and save it): nothing is left to save. */
bool tfs_recording_served(const struct tfs_recording *r);

/** Neither the program nor any process it started loaded the capture library. */
bool tfs_recording_nothing(struct tfs_recording *r);

/**
 * Every process has ended: take in the rest, set each rank's metadata (`end`: how each
 * ended, as reaped, else what is known) and save the trace as @out (one process: its trace;
 * several: merged, a rank each, saved at once with tfs_file_write).
 * @return 0, or -errno: -ENOMEM, a trace writer's error, or the save's
 */
int tfs_recording_save(struct tfs_recording *r, const char *out);

/**
 * The sum of the consumers' statistics into *@st.
 * @return the processes recorded so far (1 before tfs_recording_start())
 */
uint32_t tfs_recording_stats(const struct tfs_recording *r, struct tfs_recording_stats *st);

/**
 * Free @r (accepts NULL). @remove: remove its directory and every spool in it (the
 * recorder is done); false: leave them to the process that goes on recording (the MPI
 * saver forked before, which holds the lock too).
 */
void tfs_recording_free(struct tfs_recording *r, bool remove);

/**
 * How a process ended, from its wait status, into @buf of @cap bytes: "exited with status
 * 3", "killed by signal 9 (SIGKILL), core dumped".
 */
void tfs_recording_describe_end(int status, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
