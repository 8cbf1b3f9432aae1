/*
 * The interposed calls as records and as event kinds: the numbering shared by the producer,
 * which writes REC_CALL records (spool_i.h), and the consumer, which declares one event kind
 * per call. Both come from one table, calls.txt (gen_calls.py writes calls_gen.h and the
 * schema, calls_gen.c). A record carries the kind's non-string arguments as u64 words in
 * schema order and its string arguments, in schema order, as NUL-terminated payload. Not an
 * API: producer and consumer come from one build.
 */
#ifndef TFS_CALLS_I_H
#define TFS_CALLS_I_H

#include <stdbool.h>
#include <stdint.h>

#include "tfs/schema.h"

#include "calls_gen.h" /* enum cap_call, cap_call_has_stack(): from calls.txt */

/* The file id of no file: an anonymous mapping's, printed -1 (TFS_SYM_NONE). */
#define CALL_NO_FILE ((uint32_t)TFS_SYM_NONE)

/* Bytes kept of one string argument (a path); longer ones are cut with a visible mark
 * (files_i.h cap_put_str). */
#define CALL_MAX_STR 900u
/* Bytes kept of the argv of an exec or a posix_spawn (its arguments joined with spaces),
 * cut the same way past it: compilers' command lines are often several KiB. A record holds
 * up to 16 KiB (spool_i.h SPOOL_MAX_RECORD_WORDS). */
#define CALL_MAX_ARGV 8192u

/* The event kind of each call, indexed by enum cap_call. */
extern const struct tfs_kind_desc cap_call_kinds[N_CALLS];

/*
 * The MPI calls (capture/mpi, generated from the installed mpi.h): call N_CALLS + i is
 * cap_mpi_kinds[i]; none when the build found no MPI.
 */
extern const struct tfs_kind_desc *const cap_mpi_kinds;
extern const uint32_t cap_mpi_n_kinds;

/* At most so many classes of predefined handles, each of at most so many (gen_mpi.py checks). */
#define CAP_MPI_MAX_PREDEF 16
#define CAP_MPI_MAX_PREDEF_IDS 128

/* The predefined handles of a symbolic id class: names[i] is the handle of id i. */
struct cap_mpi_predef {
	const char *sym_class;
	const char *const *names;
	uint32_t n;
};

/* A named value of a value-name class (FORMAT.md §9.2), keyed as the views look it up. */
struct cap_mpi_vname {
	const char *sym_class;
	uint64_t key;
	const char *name;
};

/* An implementation's calls, N_CALLS + first.., and the values its mpi.h gives names. */
struct cap_mpi_impl {
	uint32_t first, n;
	const struct cap_mpi_vname *vnames;
	uint32_t n_vnames;
};

extern const struct cap_mpi_predef cap_mpi_predefs[];
extern const uint32_t cap_mpi_n_predefs;
extern const struct cap_mpi_impl cap_mpi_impls[];
extern const uint32_t cap_mpi_n_impls;

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
