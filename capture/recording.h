/*
 * One recording of `tracefs record`, the recorder's side of the spool protocol: capture/'s
 * interface to fs/cmd_record.c, which does the command line and process control only.
 * A recording makes its own private directory (recdir.c: mkdtemp, mode 0700, under
 * $TFS_SPOOL or /dev/shm), the first process's spool in it, locked while it lives, and a
 * consumer of it; it finds the spools of the processes the program starts by listing that
 * directory, takes in only regular files of its own user there, consumes each, learns how
 * each process ended, serves MPI_Finalize's request for the trace, merges the processes'
 * traces into one with a rank each, and at the end removes its directory and what is in
 * it, never anything else. Names and layouts are spool_i.h's. Not thread-safe: one thread
 * drives a recording.
 */
#ifndef TFS_RECORDING_H
#define TFS_RECORDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "consumer_i.h"

struct cap_recording;

/* What a recording records and how it speaks. */
struct cap_recording_opts {
	struct cap_timing timing;
	uint32_t mask;		    /* TFS_TRACE_* the producers record */
	size_t spool_bytes;	    /* most a spool grows to */
	uint32_t bt_depth;	    /* frames per allocation backtrace (with TFS_TRACE_ALLOC) */
	struct spool_policy policy; /* a full spool, sampling */
	/* metadata of the program's rank: program, cmdline, and key/value pairs after them
	 * (NULL-terminated, may be NULL: "mpi_size", "4") */
	const char *program, *cmdline;
	const char *const *meta;
	bool mpi; /* serve MPI_Finalize's request for the trace (spool_hdr.save_req) */
	/* the recorder's voice: a line on stderr ("tracefs: " and the message) and an errno's
	 * text, as the command line says them */
	int (*say)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
	const char *(*strerr)(int err);
};

/*
 * Start a recording: sweep what killed recordings left under the prefix (saying so in one
 * line), make the private directory and the first spool, lock it and start its consumer.
 * @o is copied; its strings must outlive the recording.
 * @return 0, or -errno (said, with what failed)
 */
int cap_recording_new(const struct cap_recording_opts *o, struct cap_recording **out);

/* The first spool's absolute path: the program's TFS_SPOOL. Borrowed. */
const char *cap_recording_spool(const struct cap_recording *r);

/* The program, pid @pid, has started (recording into the first spool). @return 0, -ENOMEM */
int cap_recording_start(struct cap_recording *r, pid_t pid);

/*
 * Consume what the processes handed over, serve MPI_Finalize's request, and look for new
 * processes' spools at least every 20 ms. Call repeatedly while they run.
 * @return chunks taken in (0: nothing, sleep a little), or -errno (sticky: no trace)
 */
int cap_recording_poll(struct cap_recording *r);

/* The recorder reaped process @pid with wait status @status. */
void cap_recording_reaped(struct cap_recording *r, pid_t pid, int status);

/*
 * Nobody will reap the processes any more (the process that waited for them was killed):
 * from now on a process has ended once /proc says so, and cap_recording_ended() says when
 * all have.
 */
void cap_recording_orphaned(struct cap_recording *r);

/* After cap_recording_orphaned(): every process known has ended, and no new one is found. */
bool cap_recording_ended(struct cap_recording *r);

/* MPI_Finalize took the trace (the MPI wrappers merge and save it): nothing is left to save. */
bool cap_recording_served(const struct cap_recording *r);

/* Neither the program nor any process it started loaded the capture library. */
bool cap_recording_nothing(struct cap_recording *r);

/*
 * Every process has ended: take in the rest, set each rank's metadata (`end`: how each
 * ended, as reaped, else what is known) and save the trace as @out (one process: its trace;
 * several: merged, a rank each). @return 0 or -errno
 */
int cap_recording_save(struct cap_recording *r, const char *out);

/* The processes recorded so far, and the sum of their consumers' statistics. */
uint32_t cap_recording_stats(const struct cap_recording *r, struct cap_consumer_stats *st);

/*
 * Free @r (accepts NULL). @remove: remove its directory and every spool in it (the
 * recorder is done); false: leave them to the process that goes on recording (the MPI
 * saver forked before, which holds the lock too).
 */
void cap_recording_free(struct cap_recording *r, bool remove);

/* How a process ended, from its wait status: "exited with status 3", "killed by signal 9
 * (SIGKILL), core dumped", into @buf. */
void cap_describe_end(int status, char *buf, size_t cap);

#endif
