/*
 * Names section payload (FORMAT.md §12): per rank, the names of symbolic ids (a file id's
 * path), as tables that runs of ranks share and that may be stored as changes to an earlier
 * table. The encoder takes each rank's names whole and finds equal and similar tables
 * itself; the decoder checks a payload and answers lookups by (rank, class, id). It does not
 * compress, know the container or render: reader.c, render.c and merge.c do.
 */
#ifndef TFS_NAMES_I_H
#define TFS_NAMES_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bytes_i.h"
#include "intern_i.h"

#define NAMES_NO_BASE UINT32_MAX
#define NAMES_MAX_BYTES 65535u /* longest name (FORMAT.md §12) */

/* One name of a table. */
struct name_ent {
	uint64_t id;
	const char *name; /* NUL-terminated, no NUL inside */
	uint32_t len;	  /* bytes; 0 only in a table with a base: the base's name removed */
	uint32_t cls;	  /* index into the classes */
};

/* A table: its own entries, sorted by (cls, id), and the table they change, if any. */
struct name_table {
	uint32_t base; /* table index, or NAMES_NO_BASE */
	uint32_t n;
	const struct name_ent *e; /* [n] */
	uint64_t n_ranks;	  /* decoder: the ranks its runs cover */
};

/* Ranks [first, first + n) have table @table. */
struct name_run {
	uint32_t first, n, table;
};

/* Stable storage for name bytes: blocks that never move once allocated. */
struct name_arena {
	char **blocks;
	size_t n_blocks, cap, used; /* used: bytes of the last block */
};

/* ---- decoding ---- */

/* A decoded section. Every pointer is owned. */
struct names {
	uint32_t n_classes, n_tables, n_runs;
	const char **classes;	   /* [n_classes] into arena */
	uint32_t *class_order;	   /* [n_classes] class indices sorted by strcmp */
	struct name_table *tables; /* [n_tables] */
	struct name_run *runs;	   /* [n_runs], increasing ranks */
	struct name_ent *ents;	   /* [n_ents]: every table's entries, table after table */
	uint64_t n_ents;
	char *arena;
};

/*
 * Decode and check a whole §12 payload for a trace of @n_ranks ranks. @file_off is the
 * section's file offset, which every diagnostic reports (the payload is compressed). On
 * error @nm is left empty. @return 0, -TFS_ECORRUPT (diag filled, section "names") or
 * -ENOMEM
 */
int names_decode(struct names *nm, const uint8_t *data, size_t len, uint32_t n_ranks,
		 uint64_t file_off, struct tfs_diag *diag);
void names_fini(struct names *nm);
/* Index of class @cls, or UINT32_MAX. */
uint32_t names_class(const struct names *nm, const char *cls);
/* The table of @rank, or NULL when no run covers it. */
const struct name_table *names_table_of(const struct names *nm, uint32_t rank);
/* The name @tb (with its base) gives (@cls, @id), or NULL. */
const struct name_ent *names_get(const struct names *nm, const struct name_table *tb, uint32_t cls,
				 uint64_t id);

/* The names a table gives, its base's included, in (cls, id) order. */
struct names_iter {
	const struct name_ent *a, *a_end; /* the table's own entries */
	const struct name_ent *b, *b_end; /* its base's */
};

void names_iter_init(struct names_iter *it, const struct name_table *tables, uint32_t table);
/* The next name, or NULL at the end. */
const struct name_ent *names_iter_next(struct names_iter *it);

/* ---- encoding ---- */

/* One name given to the encoder: any order, each (cls, id) once. */
struct name_in {
	const char *cls; /* a symbol class as FORMAT.md §4 spells them */
	uint64_t id;	 /* not TFS_SYM_NONE */
	const char *name;
	size_t len; /* 1 to NAMES_MAX_BYTES bytes, no NUL among them */
};

struct names_enc {
	struct intern classes;
	struct name_table *tables; /* n_ranks unused */
	uint64_t *hash;		   /* [n_tables] of the names each table gives */
	uint32_t n_tables, tables_cap;
	struct name_ent **own; /* [n_tables] owned entry arrays (tables[i].e) */
	uint32_t *slots;       /* open addressing on hash: table + 1, 0 empty */
	uint32_t n_slots;
	struct name_run *runs;
	uint32_t n_runs, runs_cap;
	uint32_t last_root; /* the latest table stored whole */
	struct name_arena arena;
	struct name_ent *tmp[2]; /* scratch: a new table's names, a base's */
	uint32_t tmp_cap[2];
};

void names_enc_init(struct names_enc *e);
void names_enc_fini(struct names_enc *e);
/*
 * The table giving exactly the @n names @in (strings copied): an equal table added before,
 * or a new one, stored as changes to an earlier table when that is fewer entries.
 * @return 0, -EINVAL (a bad class or name, an id twice or TFS_SYM_NONE) or -ENOMEM (the
 *         encoder is unchanged)
 */
int names_enc_table(struct names_enc *e, const struct name_in *in, uint32_t n, uint32_t *table);
/*
 * Ranks [@first, @first + @n) have @table. Calls come in increasing rank order; a run that
 * continues the previous one with the same table extends it.
 * @return 0, -EINVAL (out of order, empty, past 2^32 ranks or an unknown table) or -ENOMEM
 */
int names_enc_run(struct names_enc *e, uint32_t first, uint32_t n, uint32_t table);
/* Whether there is anything to write (a run). */
static inline bool names_enc_empty(const struct names_enc *e)
{
	return e->n_runs == 0;
}
/* Append the §12 payload to @out. @return 0 or -ENOMEM */
int names_enc_finish(const struct names_enc *e, struct tfs_buf *out);

#endif
