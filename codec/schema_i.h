/*
 * In-memory event schema (FORMAT.md §4): the writer's copy of the declared kinds and the
 * reader's copy parsed from a trace. Both sides validate with the same rules.
 */
#ifndef TFS_SCHEMA_I_H
#define TFS_SCHEMA_I_H

#include <stdbool.h>
#include <stdint.h>

#include "bytes_i.h"
#include "tfs/schema.h"

struct schema_arg {
	char *name;
	char *sym_class; /* SYM: the printed prefix; VAL: the value class (FORMAT.md §4) or "" */
	uint8_t type, enc, flags;
};

struct schema_kind {
	char *name;
	char *category;
	uint32_t n_args;
	uint32_t n_vals;  /* arguments with enc VAL */
	int32_t result;	  /* index of the argument printed after " = ", or -1 */
	bool result_name_taken; /* another argument is called "result" (JSON keeps names) */
	struct schema_arg *args;
	uint8_t val_index[TFS_MAX_ARGS]; /* of a VAL argument: its index among the VAL ones */
	/* VAL field j's class (FORMAT.md §7.3.1): 0 none, else 1 to VAL_MAX_CLASSES, equal
	 * for equal class names across the schema */
	uint8_t vcls[TFS_MAX_ARGS];
};

#define SCHEMA_MAX_VCLASSES 255 /* distinct VAL class names in a schema */

struct tfs_schema {
	uint32_t n_kinds, cap;
	uint32_t n_vcls; /* distinct VAL class names */
	struct schema_kind *kinds;
};

/*
 * A RANK argument's signature word (FORMAT.md §5.2, format 1.1): a rank >= 0 is stored
 * relative to the stream's rank as zigzag(rank - stream rank) << 1; a negative rank
 * (MPI_PROC_NULL, MPI_ANY_SOURCE, MPI_ROOT...) means the same at every rank and is stored
 * as is, (-rank - 1) << 1 | 1. Ranks lie in [-RANK_LIMIT, RANK_LIMIT).
 */
#define RANK_LIMIT (INT64_C(1) << 62)

static inline bool rank_word_special(uint64_t w)
{
	return w & 1;
}

/* The relative rank of a plain word, or the absolute (negative) rank of a special one. */
static inline int64_t rank_word_value(uint64_t w)
{
	if (w & 1)
		return -(int64_t)(w >> 1) - 1;
	return zigzag_dec(w >> 1);
}

/* Word of a rank relative to the stream's; false if it is out of range. */
static inline bool rank_word_rel(int64_t rel, uint64_t *w)
{
	if (rel >= RANK_LIMIT || rel < -RANK_LIMIT)
		return false;
	*w = zigzag_enc(rel) << 1;
	return true;
}

/* Word of absolute rank @abs seen from a stream of rank @rank; false if out of range. */
static inline bool rank_word_enc(int64_t abs, uint32_t rank, uint64_t *w)
{
	if (abs >= RANK_LIMIT || abs < -RANK_LIMIT)
		return false;
	if (abs < 0) {
		*w = (uint64_t)(-(abs + 1)) << 1 | 1;
		return true;
	}
	return rank_word_rel(abs - (int64_t)rank, w);
}

/* Word of a format 1.0 trace (zigzag(rank - stream rank), negative ranks too) as 1.1. */
static inline bool rank_word_from_v10(uint64_t w10, uint64_t *w)
{
	return rank_word_rel(zigzag_dec(w10), w);
}

/*
 * An RVAL argument's signature word (FORMAT.md §5.2): a literal value v as zigzag(v) << 1,
 * a value derived from the caller's rank as zigzag(v - stream rank) << 1 | 1.
 */
static inline bool rval_word_ranked(uint64_t w)
{
	return w & 1;
}

/* The literal value, or the displacement from the stream's rank of a ranked word. */
static inline int64_t rval_word_value(uint64_t w)
{
	return zigzag_dec(w >> 1);
}

/* Word of writer value @arg (tfs_rval()) in a stream of rank @rank; false if out of range. */
static inline bool rval_word_enc(uint64_t arg, uint32_t rank, uint64_t *w)
{
	int64_t v = (int64_t)arg >> 1;

	if (v >= TFS_RVAL_LIMIT || v < -TFS_RVAL_LIMIT)
		return false;
	if (arg & 1)
		v -= rank;
	*w = zigzag_enc(v) << 1 | (arg & 1);
	return true;
}

/*
 * Whether RVAL word @w is one FORMAT.md §5.2 allows: a literal in [-TFS_RVAL_LIMIT,
 * TFS_RVAL_LIMIT), a rank-derived displacement that is one once a stream's rank (< 2^32)
 * is added. Anything else would wrap as a merge re-bases it.
 */
static inline bool rval_word_ok(uint64_t w)
{
	const int64_t v = rval_word_value(w);
	const int64_t low = rval_word_ranked(w) ? -TFS_RVAL_LIMIT - (INT64_C(1) << 32)
						 : -TFS_RVAL_LIMIT;

	return v >= low && v < TFS_RVAL_LIMIT;
}

/* The absolute value word @w means in a stream of rank @rank. */
static inline int64_t rval_word_abs(uint64_t w, uint32_t rank)
{
	int64_t v = rval_word_value(w);

	return rval_word_ranked(w) ? (int64_t)((uint64_t)v + rank) : v;
}

void schema_init(struct tfs_schema *s);
void schema_fini(struct tfs_schema *s);
/* Validate and copy @d. @return 0, -EINVAL or -ENOMEM */
int schema_add(struct tfs_schema *s, const struct tfs_kind_desc *d, uint32_t *id);
/*
 * FORMAT.md §4 payload of the kinds of @s, or only of those whose @map entry is not
 * UINT32_MAX (@map NULL: all; the kept kinds then number 0, 1... in their order).
 */
int schema_write(const struct tfs_schema *s, const uint32_t *map, struct tfs_buf *out);
/*
 * FORMAT.md §4.1 payload: the flags of @s's arguments that the schema section does not
 * store (TFS_ARG_ATTACH...), for the same kinds as schema_write(). Nothing is appended when
 * no argument has one. @return 1 (appended), 0 (nothing to store) or -ENOMEM
 */
int schema_write_argflags(const struct tfs_schema *s, const uint32_t *map, struct tfs_buf *out);
/* Whether schema_write_argflags() has anything to write. */
bool schema_has_argflags(const struct tfs_schema *s, const uint32_t *map);
/* @return 0, -TFS_ECORRUPT (via @r) or -ENOMEM */
int schema_parse(struct tfs_rd *r, struct tfs_schema *s);
/* Add a §4.1 payload's flags to the parsed @s and check them. @return 0 or -TFS_ECORRUPT */
int schema_parse_argflags(struct tfs_rd *r, struct tfs_schema *s);
/* Borrowed view of kind @id as the public struct; @args must hold TFS_MAX_ARGS entries. */
void schema_desc(const struct tfs_schema *s, uint32_t id, struct tfs_kind_desc *d,
		 struct tfs_arg_desc *args);

#endif
