/*
 * In-memory event schema (FORMAT.md §4): the writer's copy of the declared kinds and the
 * reader's copy parsed from a trace. Both sides validate with the same rules.
 */
#ifndef TFS_SCHEMA_I_H
#define TFS_SCHEMA_I_H

#include <stdint.h>

#include "bytes_i.h"
#include "tfs/schema.h"

struct schema_arg {
	char *name;
	char *sym_class; /* "" unless enc is SYM */
	uint8_t type, enc, flags;
};

struct schema_kind {
	char *name;
	char *category;
	uint32_t n_args;
	uint32_t n_vals;  /* arguments with enc VAL */
	int32_t result;	  /* index of the argument printed after " = ", or -1 */
	struct schema_arg *args;
};

struct tfs_schema {
	uint32_t n_kinds, cap;
	struct schema_kind *kinds;
};

void schema_init(struct tfs_schema *s);
void schema_fini(struct tfs_schema *s);
/* Validate and copy @d. @return 0, -EINVAL or -ENOMEM */
int schema_add(struct tfs_schema *s, const struct tfs_kind_desc *d, uint32_t *id);
int schema_write(const struct tfs_schema *s, struct tfs_buf *out);
/* @return 0, -TFS_ECORRUPT (via @r) or -ENOMEM */
int schema_parse(struct tfs_rd *r, struct tfs_schema *s);
/* Borrowed view of kind @id as the public struct; @args must hold TFS_MAX_ARGS entries. */
void schema_desc(const struct tfs_schema *s, uint32_t id, struct tfs_kind_desc *d,
		 struct tfs_arg_desc *args);

#endif
