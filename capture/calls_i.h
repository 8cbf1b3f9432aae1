/*
 * The interposed calls (interpose.c) as records and as event kinds: the numbering shared by
 * the producer, which writes REC_CALL records (spool_i.h), and the consumer, which declares
 * one event kind per call (calls.c) on first use. A record carries the kind's non-string
 * arguments as u64 words in schema order and its string arguments, in schema order, as
 * NUL-terminated payload. Not an API: producer and consumer come from one build.
 */
#ifndef TFS_CALLS_I_H
#define TFS_CALLS_I_H

#include <stdbool.h>
#include <stdint.h>

#include "tfs/schema.h"

enum cap_call {
	/* alloc */
	CALL_MALLOC,
	CALL_CALLOC,
	CALL_REALLOC,
	CALL_FREE,
	CALL_POSIX_MEMALIGN,
	CALL_ALIGNED_ALLOC,
	CALL_MEMALIGN,
	CALL_MMAP,
	CALL_MUNMAP,
	/* io: descriptors */
	CALL_OPEN,
	CALL_OPENAT,
	CALL_CREAT,
	CALL_CLOSE,
	CALL_READ,
	CALL_WRITE,
	CALL_PREAD,
	CALL_PWRITE,
	CALL_READV,
	CALL_WRITEV,
	CALL_LSEEK,
	CALL_FSYNC,
	CALL_FDATASYNC,
	CALL_FTRUNCATE,
	CALL_UNLINK,
	CALL_RENAME,
	/* io: stdio */
	CALL_FOPEN,
	CALL_FDOPEN,
	CALL_FCLOSE,
	CALL_FREAD,
	CALL_FWRITE,
	CALL_FSEEK,
	CALL_FFLUSH,
	CALL_FD_FILE, /* not a call: a descriptor opened elsewhere, met first */
	/* threads */
	CALL_PTHREAD_CREATE,
	CALL_PTHREAD_JOIN,
	/* processes (interpose_proc.c) */
	CALL_FORK,
	CALL_EXEC,
	CALL_EXEC_FAILED,
	CALL_SPAWN,
	N_CALLS
};

/* The file id of no file: an anonymous mapping's, printed -1 (TFS_SYM_NONE). */
#define CALL_NO_FILE ((uint32_t)TFS_SYM_NONE)

/* The calls whose events carry an allocation backtrace (a `stack` argument, last) when on. */
static inline bool cap_call_has_stack(uint32_t call)
{
	return call == CALL_MALLOC || call == CALL_CALLOC || call == CALL_REALLOC ||
	       call == CALL_POSIX_MEMALIGN || call == CALL_ALIGNED_ALLOC || call == CALL_MEMALIGN;
}

/* Bytes kept of one string argument (a path, a mode); longer ones are cut. */
#define CALL_MAX_STR 900u

/* The event kind of each call, indexed by enum cap_call. */
extern const struct tfs_kind_desc cap_call_kinds[N_CALLS];

/*
 * The MPI calls (capture/mpi, generated from the installed mpi.h): call N_CALLS + i is
 * cap_mpi_kinds[i]; none when the build found no MPI.
 */
extern const struct tfs_kind_desc *const cap_mpi_kinds;
extern const uint32_t cap_mpi_n_kinds;

/* The kind of call @call, NULL if there is no such call. */
static inline const struct tfs_kind_desc *cap_call_kind(uint32_t call)
{
	if (call < N_CALLS)
		return &cap_call_kinds[call];
	if (call - N_CALLS < cap_mpi_n_kinds)
		return &cap_mpi_kinds[call - N_CALLS];
	return NULL;
}

#endif
