/*
 * Values patches (FORMAT.md §8.1): a stream whose values differ from another stream's only
 * in a few residual words (each thread of a parallel loop starts at its own address, then
 * strides like the others) shares that stream's values section and stores the differing
 * words in the stream table, each predicted from the same word of the previous two patched
 * streams of the section (EPRSD's base address as a function of the thread). This file
 * finds patches (writer) and codes them; values_dec.c applies them.
 */
#include <stdlib.h>
#include <string.h>

#include "vpatch_i.h"
#include "vpred_i.h"

static bool same_pos(const struct vpatch *a, const struct vpatch *b)
{
	return a->block == b->block && a->col == b->col && a->index == b->index;
}

/* Prediction of entry @j (FORMAT.md §8.1). */
static uint64_t predict(const struct vpatch *e, uint32_t j, const struct vpatch_list *p1,
			const struct vpatch_list *p2)
{
	if (!p1 || j >= p1->n || !same_pos(&p1->e[j], e))
		return 0;
	if (!p2 || j >= p2->n || !same_pos(&p2->e[j], e))
		return p1->e[j].word;
	return 2 * p1->e[j].word - p2->e[j].word;
}

int vpatch_write(struct tfs_buf *out, const struct vpatch_list *l, const struct vpatch_list *p1,
		 const struct vpatch_list *p2)
{
	int rc = buf_put_varint(out, l->n);

	for (uint32_t j = 0; j < l->n && rc == 0; j++) {
		const struct vpatch *e = &l->e[j], *prev = j ? &l->e[j - 1] : NULL;
		bool run = prev && prev->block == e->block && prev->col == e->col;

		rc = buf_put_varint(out, prev ? e->block - prev->block : e->block);
		if (rc == 0)
			rc = buf_put_varint(out, e->col);
		if (rc == 0)
			rc = buf_put_varint(out, run ? e->index - prev->index - 1 : e->index);
		if (rc == 0)
			rc = buf_put_varint(out, zigzag_enc((int64_t)(e->word - predict(e, j, p1, p2))));
	}
	return rc;
}

void vpatch_list_fini(struct vpatch_list *l)
{
	free(l->e);
	l->e = NULL;
	l->n = 0;
}

int vpatch_read(struct tfs_rd *r, struct vpatch_list *l, const struct vpatch_list *p1,
		const struct vpatch_list *p2)
{
	uint64_t n;
	int rc;

	l->e = NULL;
	l->n = 0;
	rc = rd_varint(r, &n);
	if (rc < 0)
		return rc;
	if (n == 0)
		return 0;
	/* four varints of at least a byte each */
	if (n > VPATCH_MAX || n > rd_left(r) / 4)
		return rd_fail(r, "%llu values patches", (unsigned long long)n);
	l->e = calloc(n, sizeof(*l->e));
	if (!l->e)
		return -ENOMEM;
	for (uint32_t j = 0; j < n; j++) {
		struct vpatch *e = &l->e[j], *prev = j ? &l->e[j - 1] : NULL;
		uint64_t db, col, di, zz;

		rc = rd_varint(r, &db);
		if (rc == 0)
			rc = rd_varint(r, &col);
		if (rc == 0)
			rc = rd_varint(r, &di);
		if (rc == 0)
			rc = rd_varint(r, &zz);
		if (rc < 0)
			goto fail;
		if (col > 4 || (prev && db > UINT64_MAX - prev->block)) {
			rc = rd_fail(r, "values patch %u: bad position", j);
			goto fail;
		}
		e->block = prev ? prev->block + db : db;
		e->col = (uint32_t)col;
		if (prev && db == 0 && col < prev->col) {
			rc = rd_fail(r, "values patches out of order");
			goto fail;
		}
		if (prev && db == 0 && col == prev->col) {
			if (di >= UINT64_MAX - prev->index) {
				rc = rd_fail(r, "values patch %u: bad position", j);
				goto fail;
			}
			e->index = prev->index + di + 1;
		} else {
			e->index = di;
		}
		l->n = j + 1;
		e->word = predict(e, j, p1, p2) + (uint64_t)zigzag_dec(zz);
	}
	return 0;
fail:
	vpatch_list_fini(l);
	return rc;
}

/* Append @e to @l, growing it. */
static int push(struct vpatch_list *l, uint32_t *cap, const struct vpatch *e)
{
	if (l->n == *cap) {
		uint32_t c = *cap ? 2 * *cap : 16;
		void *q = realloc(l->e, c * sizeof(*l->e));

		if (!q)
			return -ENOMEM;
		l->e = q;
		*cap = c;
	}
	l->e[l->n++] = *e;
	return 0;
}

int vpatch_diff(const struct tfs_vsec *base, const struct tfs_vsec *own, uint32_t max,
		struct vpatch_list *out)
{
	struct vwords wb = {0}, wo = {0};
	uint32_t cap = 0;
	int rc = 0;

	out->e = NULL;
	out->n = 0;
	if (base->version != own->version || base->timing != own->timing ||
	    base->n_events != own->n_events ||
	    base->block_events != own->block_events || base->n_blocks != own->n_blocks ||
	    base->rel_err != own->rel_err)
		return -E2BIG;
	for (uint64_t b = 0; b < own->n_blocks && rc == 0; b++) {
		size_t k0 = 0;

		rc = vsec_block_words(base, b, &wb, NULL);
		if (rc == 0)
			rc = vsec_block_words(own, b, &wo, NULL);
		/* a word means the same only under the same predictors and ticks (FORMAT.md §7.2) */
		if (rc == 0 && (wb.pred != wo.pred || wb.ticks_len != wo.ticks_len ||
				(wo.ticks_len && memcmp(wb.ticks, wo.ticks, wo.ticks_len))))
			rc = -E2BIG;
		for (uint32_t k = 0; k < 5 && rc == 0; k++) {
			if (wb.n[k] != wo.n[k]) {
				rc = -E2BIG;
				break;
			}
			for (size_t i = 0; i < wo.n[k] && rc == 0; i++) {
				struct vpatch e = {b, k, i, wo.w[k0 + i]};

				if (wb.w[k0 + i] == wo.w[k0 + i])
					continue;
				rc = out->n >= max ? -E2BIG : push(out, &cap, &e);
			}
			k0 += wo.n[k];
		}
	}
	vwords_fini(&wb);
	vwords_fini(&wo);
	if (rc < 0)
		vpatch_list_fini(out);
	return rc == -TFS_ECORRUPT ? -E2BIG : rc;
}
