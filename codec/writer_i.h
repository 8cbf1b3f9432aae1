/*
 * Writer internals shared by writer.c (streams, appends) and wsave.c (merge and save).
 */
#ifndef TFS_WRITER_I_H
#define TFS_WRITER_I_H

#include <stdbool.h>

#include "grammar_i.h"
#include "intern_i.h"
#include "schema_i.h"
#include "tfs/writer.h"
#include "values_i.h"

#define MAX_STR_BYTES 65535

struct tfs_wstream {
	struct tfs_writer *w;
	uint32_t rank, thread;
	int err;		/* sticky error after an append failed half-way */
	struct intern sigs;	/* local CST: signature bytes -> local terminal id */
	struct intern strs;	/* local string table */
	uint32_t *term_kind;	/* [sigs.n] */
	uint32_t *term_woff;	/* [sigs.n] first VAL width of the terminal in widths */
	uint32_t term_cap;
	struct tfs_buf widths;	/* u8 per VAL field per terminal: most characters printed */
	struct tfs_gbuild *gb;
	struct tfs_buf blocks;	/* finished grammar blocks: varint n_events + §6 block */
	uint32_t n_blocks;
	struct tfs_venc *venc;
	uint64_t n_events, max_ts, max_dur;
	struct tfs_buf sig;	/* scratch */
};

struct phase {
	char *name;
	uint32_t stream;
	uint64_t first, n;
};

struct tfs_writer {
	struct tfs_writer_opts opts;
	struct tfs_schema schema;
	char **meta;		/* key, value, key, value... */
	uint32_t n_meta, meta_cap;
	struct tfs_wstream **streams;
	uint32_t n_streams, streams_cap;
	struct phase *phases;
	uint32_t n_phases, phases_cap;
	bool saved;
};

/*
 * Append a whole §6 grammar block whose terminals are @s's local terminal ids (obtained by
 * appending each distinct event once), as merging traces and synthetic benchmarks do.
 * Only for streams without per-occurrence data: timing none and no VAL argument in any of
 * the block's terminals. @return 0, -EINVAL (block invalid or needs values) or -ENOMEM
 */
int wstream_import_block(struct tfs_wstream *s, const uint8_t *block, size_t len);
/* Whether @s needs a values section (FORMAT.md §8). */
bool wstream_has_values(const struct tfs_wstream *s);

#endif
