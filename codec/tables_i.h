/*
 * The tables every trace has, encoded from one description by one encoder (tables.c): the
 * metadata (FORMAT.md §3.1), the schema and its argument flags (§4, §4.1), the string table
 * and the call-signature table (§5), the names (§12) and the streams section (§8). The
 * writer (wsave.c) and the merge (merge.c) each describe what they hold and store the
 * payloads in their own section order; neither encodes a table itself.
 */
#ifndef TFS_CODEC_TABLES_I_H
#define TFS_CODEC_TABLES_I_H

#include <stdint.h>

#include "bytes_i.h"
#include "intern_i.h"
#include "names_i.h"
#include "schema_i.h"
#include "streams_i.h"

/* What the small sections of one trace hold. Everything is borrowed. */
struct tables {
	char *const *meta;	    /* 2 x n_meta strings: key, value, key, value... */
	uint32_t n_meta;
	const struct tfs_schema *schema;
	const uint32_t *kind_map;   /* schema kind -> written kind (UINT32_MAX: left out), or
				       NULL: every kind as numbered; signatures' kinds too */
	const struct intern *strs;  /* the string table, in id order */
	const struct intern *sigs;  /* signatures: varint kind, then every non-VAL word */
	const uint32_t *sig_kind;   /* [sigs->n] schema kind of each signature */
	const uint32_t *sig_woff;   /* [sigs->n] its first VAL width in @widths */
	const uint8_t *widths;	    /* VAL widths (0 is written as 1) */
	const struct names_enc *names; /* NULL or empty: no names section */
	const struct sx_table *streams;
};

/*
 * Append the payload of section @type (SEC_META, SEC_SCHEMA, SEC_ARGFLAGS, SEC_STRINGS,
 * SEC_CST, SEC_NAMES, SEC_STREAMS) of @t to @out.
 * @return 1 (appended), 0 (the section has nothing to say: write none), -EINVAL (another
 *         type) or -ENOMEM
 */
int tables_encode(const struct tables *t, uint32_t type, struct tfs_buf *out);

#endif
