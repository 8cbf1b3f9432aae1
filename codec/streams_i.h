/*
 * The `streams` section (FORMAT.md §8): trace header, stream table, phases and rank table,
 * encoded in one place for the writer (wsave.c) and the merge (merge.c). Reading it is the
 * reader's (reader.c, rstacks.c).
 */
#ifndef TFS_STREAMS_I_H
#define TFS_STREAMS_I_H

#include <stdint.h>

#include "bytes_i.h"

/* Section indices are final; UINT32_MAX (or the section count) means none. */
struct sx_stream {
	uint32_t rank, thread;
	uint64_t n_events;
	uint32_t gsec, vsec;
};

struct sx_phase {
	const char *name;
	uint32_t stream;
	uint64_t first, n;
};

/* A rank with backtraces or symbols. */
struct sx_rank {
	uint32_t rank;
	uint32_t bt_sec, sym_sec;
	uint64_t n_bt;
};

struct sx_table {
	uint32_t n_ranks, max_thread;
	int timing;
	double rel_err; /* written only for lossy timing */
	uint64_t max_ts, max_dur;
	uint32_t n_sect; /* the section count of the file: the index that means none */
	const struct sx_stream *streams;
	uint32_t n_streams;
	const struct sx_phase *phases;
	uint32_t n_phases;
	const struct sx_rank *ranks; /* increasing rank */
	uint32_t n_ranks_bt;
};

/* Append the FORMAT.md §8 payload of @t to @out. @return 0 or -ENOMEM */
int sx_encode(const struct sx_table *t, struct tfs_buf *out);

#endif
