/*
 * Writer internals shared by writer.c (streams, appends) and wsave.c (merge and save).
 */
#ifndef TFS_WRITER_I_H
#define TFS_WRITER_I_H

#include <stdbool.h>

#include "grammar_i.h"
#include "intern_i.h"
#include "names_i.h"
#include "schema_i.h"
#include "symtab_i.h"
#include "tfs/writer.h"
#include "values_i.h"

#define MAX_STR_BYTES 65535

#define SIG_MEMO 16	   /* kinds by stream whose last signature is remembered */
#define SIG_MEMO_BYTES 32 /* the longest signature remembered */

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
	/* the last short signature of kinds k, k + SIG_MEMO...: a kind's events often repeat
	 * theirs, which then needs no look-up in sigs */
	struct sig_memo {
		uint32_t t;	/* its terminal */
		uint32_t len;	/* 0: none yet (a signature holds its kind) */
		uint8_t sig[SIG_MEMO_BYTES];
	} memo[SIG_MEMO];
};

struct phase {
	char *name;
	uint32_t stream;
	uint64_t first, n;
};

/*
 * The backtraces and symbols of one rank, kept until save (wstacks.c). Backtraces are held
 * prefix-coded but not yet §10-coded: the §10 coder's cache is 400 KiB, so one coder runs
 * per rank at save time instead of one per rank for the writer's whole life.
 */
struct wrank {
	uint32_t rank;
	uint64_t n_bt;
	struct tfs_buf bts;	/* per backtrace: varint kept prefix, varint n_new, n_new x u64 */
	uint64_t *prev;		/* the last backtrace added, [prev_n] of [prev_cap] */
	uint32_t prev_n, prev_cap;
	struct symenc syms;
};

/* A name given by tfs_writer_set_name(): its bytes in wnames.text. */
struct wname {
	uint64_t off;
	uint32_t len;
};

/* The names of every rank, kept until save (wnames.c). */
struct wnames {
	struct intern keys;	/* (rank, id, class) -> val index */
	struct wname *val;	/* [keys.n] the latest name of each key */
	uint32_t val_cap;
	struct tfs_buf text;	/* name bytes; a replaced name stays, unused */
	uint32_t max_rank;	/* highest rank with a name (keys.n > 0) */
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
	struct wrank **ranks;	/* sorted by rank: ranks with backtraces or symbols */
	uint32_t n_ranks, ranks_cap;
	struct wnames names;
	bool saved;
	bool skip_recompress; /* tfs_writer_skip_recompress() */
	bool merge_input;     /* tfs_writer_merge_input() */
	int recompress_cap;   /* tfs_writer_cap_recompress(); 0: none */
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

/* wstacks.c */
void wranks_free(struct tfs_writer *w);
/* The §10 payload of @r's backtraces (appended to @out). @return 0 or -ENOMEM */
int wrank_backtraces(const struct wrank *r, struct tfs_buf *out);
/* The §11 payload of @r's symbols, before compression. @return 0 or -ENOMEM */
int wrank_symbols(struct wrank *r, struct tfs_buf *out);
static inline bool wrank_has_symbols(const struct wrank *r)
{
	return r->syms.n_ents > 0;
}

/* wfile.c: a file written whole or not at all (a temporary renamed over @path) */
struct wfile {
	int fd;		  /* the temporary file, open for writing */
	char *tmp;	  /* its name, owned */
	const char *path; /* borrowed: what it becomes */
};

/* Create the temporary file of @path. @return 0 or -errno (nothing is left behind) */
int wfile_open(struct wfile *f, const char *path);
/* Sync, close and rename it over @path. @return 0 or -errno (it is removed then) */
int wfile_commit(struct wfile *f);
/* Close and remove it. */
void wfile_abort(struct wfile *f);

/* wnames.c */
void wnames_init(struct wnames *n);
void wnames_fini(struct wnames *n);
/* Every rank's names into the empty encoder @e (FORMAT.md §12). @return 0 or -ENOMEM */
int wnames_encode(const struct wnames *n, struct names_enc *e);

#endif
