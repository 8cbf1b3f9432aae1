/*
 * The one encoder of a trace's tables (tables_i.h): metadata, schema, argument flags,
 * strings, call signatures, names and streams, each from what the writer or the merge
 * describes. It compresses nothing and decides no section order.
 */
#include <errno.h>
#include <string.h>

#include "container_i.h"
#include "tables_i.h"

static int put_meta(const struct tables *t, struct tfs_buf *out)
{
	int rc = buf_put_varint(out, t->n_meta);

	for (uint32_t i = 0; i < 2 * t->n_meta && rc == 0; i++)
		rc = buf_put_str(out, t->meta[i], strlen(t->meta[i]));
	return rc;
}

static int put_strings(const struct tables *t, struct tfs_buf *out)
{
	int rc = buf_put_varint(out, t->strs->n);

	for (uint32_t i = 0; i < t->strs->n && rc == 0; i++) {
		size_t n;
		const uint8_t *p = intern_key(t->strs, i, &n);

		rc = buf_put_str(out, (const char *)p, n);
	}
	return rc;
}

/* FORMAT.md §5.2: each signature with its VAL widths put back at their arguments' places. */
static int put_cst(const struct tables *t, struct tfs_buf *out)
{
	int rc = buf_put_varint(out, t->sigs->n);

	for (uint32_t s = 0; s < t->sigs->n && rc == 0; s++) {
		const struct schema_kind *k = &t->schema->kinds[t->sig_kind[s]];
		size_t gw = t->sig_woff[s]; /* its widths in t->widths (NULL when none) */
		struct tfs_rd r;
		const uint8_t *p;
		size_t n;
		uint64_t v;

		p = intern_key(t->sigs, s, &n);
		rd_init(&r, p, n, 0, "signature", NULL);
		rc = rd_varint(&r, &v);
		if (rc == 0)
			rc = buf_put_varint(out, t->kind_map ? t->kind_map[v] : v);
		for (uint32_t i = 0; i < k->n_args && rc == 0; i++) {
			if (k->args[i].enc == TFS_ENC_VAL) {
				rc = buf_put_u8(out, t->widths[gw] ? t->widths[gw] : 1);
				gw++;
				continue;
			}
			rc = rd_varint(&r, &v);
			if (rc == 0)
				rc = buf_put_varint(out, v);
		}
	}
	return rc;
}

int tables_encode(const struct tables *t, uint32_t type, struct tfs_buf *out)
{
	int rc;

	switch (type) {
	case SEC_META:
		rc = put_meta(t, out);
		break;
	case SEC_SCHEMA:
		rc = schema_write(t->schema, t->kind_map, out);
		break;
	case SEC_ARGFLAGS:
		rc = schema_write_argflags(t->schema, t->kind_map, out);
		return rc < 0 ? rc : rc == 1;
	case SEC_STRINGS:
		rc = put_strings(t, out);
		break;
	case SEC_CST:
		rc = put_cst(t, out);
		break;
	case SEC_NAMES:
		if (!t->names || names_enc_empty(t->names))
			return 0;
		rc = names_enc_finish(t->names, out);
		break;
	case SEC_STREAMS:
		rc = sx_encode(t->streams, out);
		break;
	default:
		return -EINVAL;
	}
	return rc < 0 ? rc : 1;
}
