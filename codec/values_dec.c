/*
 * The values decoder (FORMAT.md §7.6): checks a section's header and block index, then
 * rebuilds one block at a time from the terminals its caller supplies, checking every
 * varint, column length and value. It does not walk grammars or own the section's bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "vticks_i.h"
#include "vpred_i.h"
#include "zstd_i.h"

static const char section_name[] = "values";

/* ---- section header and index ---- */

/* Columns of a raw block of section @s: TFV4 adds the tags and class columns. */
static int n_cols_of(const struct tfs_vsec *s)
{
	return s->version >= 4 ? N_COLS : COL_TAGS;
}

/*
 * Bytes of a raw block header at most: four varints (TFV4: six), the predictor byte (TFV2
 * on) and a ticks header of three varints and three per exception (TFV3 on, lossless).
 */
static uint64_t raw_hdr_max(const struct tfs_vsec *s, uint64_t n_events)
{
	uint64_t ticks = s->version >= 3 && s->timing == VAL_TIMING_LOSSLESS
				 ? 3 * VAL_VARINT_MAX * (n_events + 1)
				 : 0;

	return (1 + (uint64_t)n_cols_of(s)) * VAL_VARINT_MAX + (s->version >= 2) + ticks;
}

/*
 * Largest raw block of @n_events events holding @n_vals VAL fields in all: a varint each, in
 * the vals or the class column, and (TFV4) at most a tag each.
 */
static uint64_t raw_len_max(const struct tfs_vsec *s, uint64_t n_events, uint64_t n_vals)
{
	return raw_hdr_max(s, n_events) + 2 * VAL_VARINT_MAX * n_events + VAL_VARINT_MAX * n_vals +
	       (s->version >= 4 ? n_vals : 0);
}

/*
 * Smallest raw block of @n_events events: one byte per varint, a range-coded timing column
 * (TFV3) at least VRC_MIN_LEN bytes.
 */
static uint64_t raw_len_min(const struct tfs_vsec *s, uint64_t n_events, uint64_t n_vals)
{
	uint64_t timing_col = n_events;

	if (s->version >= 3 && n_events > VRC_MIN_LEN)
		timing_col = VRC_MIN_LEN;
	return 1 + (uint64_t)n_cols_of(s) + (s->version >= 2) +
	       (s->timing == VAL_TIMING_NONE ? 0 : 2 * timing_col) + n_vals;
}

static int check_header(struct tfs_vsec *s, const uint8_t *h, uint64_t base_off,
			struct tfs_diag *diag)
{
	uint32_t magic = le_get32(h);
	uint64_t rel_bits = le_get64(h + 12), want_blocks;

	if (magic != VAL_MAGIC_V1 && magic != VAL_MAGIC_V2 && magic != VAL_MAGIC_V3 &&
	    magic != VAL_MAGIC_V4 && magic != VAL_MAGIC_V5) {
		if ((magic & 0xffffff) == VAL_MAGIC_FAMILY)
			return diag_set(diag, -TFS_EFORMAT, base_off, section_name,
					"unsupported values section version 0x%02x", h[3]);
		return diag_set(diag, -TFS_ECORRUPT, base_off, section_name, "bad magic 0x%08x",
				magic);
	}
	s->version = (int)(h[3] - '0');
	s->timing = h[4];
	if (h[4] > VAL_TIMING_LOSSY)
		return diag_set(diag, -TFS_EFORMAT, base_off + 4, section_name,
				"unknown timing mode %u", h[4]);
	if (h[5] || h[6] || h[7])
		return diag_set(diag, -TFS_ECORRUPT, base_off + 5, section_name,
				"reserved header bytes not zero");
	s->block_events = le_get32(h + 8);
	if (s->block_events < 1 || s->block_events > VAL_MAX_BLOCK_EVENTS)
		return diag_set(diag, -TFS_ECORRUPT, base_off + 8, section_name,
				"block_events %u out of range", s->block_events);
	memcpy(&s->rel_err, &rel_bits, sizeof(rel_bits));
	if (s->timing == VAL_TIMING_LOSSY ? !vp_rel_err_ok(s->rel_err) : rel_bits != 0)
		return diag_set(diag, -TFS_ECORRUPT, base_off + 12, section_name,
				"bad rel_err bits 0x%016llx for timing mode %d",
				(unsigned long long)rel_bits, s->timing);
	s->n_events = le_get64(h + 20);
	s->n_blocks = le_get64(h + 28);
	want_blocks = s->n_events / s->block_events + (s->n_events % s->block_events != 0);
	if (s->n_blocks != want_blocks)
		return diag_set(diag, -TFS_ECORRUPT, base_off + 28, section_name,
				"n_blocks %llu, expected %llu for %llu events",
				(unsigned long long)s->n_blocks, (unsigned long long)want_blocks,
				(unsigned long long)s->n_events);
	return 0;
}

static int check_index(const struct tfs_vsec *s, struct tfs_diag *diag)
{
	uint64_t pos = s->data_start;

	for (uint64_t i = 0; i < s->n_blocks; i++) {
		const uint8_t *ent = s->index + i * VAL_IDX_ENTRY_LEN;
		uint64_t ent_off = s->base_off + VAL_HDR_LEN + i * VAL_IDX_ENTRY_LEN;
		uint64_t off = le_get64(ent), n = vsec_block_len(s, i);
		uint32_t stored = le_get32(ent + 8), raw = le_get32(ent + 12);

		if (off != pos)
			return diag_set(diag, -TFS_ECORRUPT, ent_off, section_name,
					"block %llu at offset %llu, expected %llu",
					(unsigned long long)i, (unsigned long long)off,
					(unsigned long long)pos);
		if (stored <= ZSTD_FHD_OFF || stored > s->len - pos)
			return diag_set(diag, -TFS_ECORRUPT, ent_off + 8, section_name,
					"block %llu: stored length %u overruns the section",
					(unsigned long long)i, stored);
		if (s->data[pos + ZSTD_FHD_OFF] & ZSTD_FHD_UNUSED_BIT)
			return diag_set(diag, -TFS_ECORRUPT, s->base_off + pos + ZSTD_FHD_OFF,
					section_name, "block %llu: unused zstd header bit set",
					(unsigned long long)i);
		if (raw < raw_len_min(s, n, 0) ||
		    raw > raw_len_max(s, n, (uint64_t)VAL_MAX_FIELDS * n) ||
		    raw > (uint64_t)stored * VAL_ZSTD_MAX_EXPANSION)
			return diag_set(diag, -TFS_ECORRUPT, ent_off + 12, section_name,
					"block %llu: raw length %u impossible for %llu events",
					(unsigned long long)i, raw, (unsigned long long)n);
		pos += stored;
	}
	if (pos != s->len)
		return diag_set(diag, -TFS_ECORRUPT, s->base_off + pos, section_name,
				"%llu bytes after the last block",
				(unsigned long long)(s->len - pos));
	return 0;
}

int vsec_open(struct tfs_vsec *s, const uint8_t *data, size_t len, uint64_t base_off,
	      struct tfs_diag *diag)
{
	int rc;

	memset(s, 0, sizeof(*s));
	if (len < VAL_HDR_LEN)
		return diag_set(diag, -TFS_ECORRUPT, base_off, section_name,
				"truncated header: %zu of %u bytes", len, VAL_HDR_LEN);
	rc = check_header(s, data, base_off, diag);
	if (rc < 0)
		return rc;
	if (s->n_blocks > (len - VAL_HDR_LEN) / VAL_IDX_ENTRY_LEN)
		return diag_set(diag, -TFS_ECORRUPT, base_off + VAL_HDR_LEN, section_name,
				"index of %llu blocks overruns the section",
				(unsigned long long)s->n_blocks);
	s->data = data;
	s->len = len;
	s->base_off = base_off;
	s->index = data + VAL_HDR_LEN;
	s->data_start = VAL_HDR_LEN + s->n_blocks * VAL_IDX_ENTRY_LEN;
	return check_index(s, diag);
}

uint32_t vsec_block_len(const struct tfs_vsec *s, uint64_t idx)
{
	if (idx >= s->n_blocks)
		return 0;
	if (idx + 1 < s->n_blocks)
		return s->block_events;
	return (uint32_t)(s->n_events - idx * s->block_events);
}

/* ---- block decoder ---- */

void vblock_init(struct vblock *b)
{
	memset(b, 0, sizeof(*b));
}

void vblock_fini(struct vblock *b)
{
	free(b->ts_ns);
	free(b->dur_ns);
	free(b->vals);
	free(b->val_off);
	free(b->raw);
	free(b->slot);
	free(b->uncoded);
	if (b->coder) {
		vrc_model_fini(b->coder);
		free(b->coder);
	}
	if (b->pred) {
		vp_pred_fini(b->pred);
		free(b->pred);
	}
	vblock_init(b);
}

/* A column of the raw block being decoded. */
struct col {
	const uint8_t *p, *end;
	const char *name;
	bool uncoded;	    /* the words of a range-coded column, outside the raw block */
	const uint64_t *w;  /* uncoded: the next word (p and end are NULL) */
};

/* What a block decode needs to report corruption and find its state. */
struct dblock {
	const struct tfs_vsec *s;
	uint64_t idx;
	uint64_t file_off; /* of the block's frame */
	uint32_t n;	   /* events in the block */
	uint8_t pred;	   /* VAL_PRED_* and VAL_GAP_START bits (TFV1: all three), VAL_TICKS */
	uint64_t tick_q;   /* VAL_TICKS: the block's tick */
	struct col corr;   /* VAL_TICKS: the corrections of its ticks header */
	uint32_t n_corr;
	const uint8_t *raw;
	const uint32_t *terms;
	struct vblock *out;
	struct vpred *p;
	struct tfs_diag *diag;
};

static int block_fail(const struct dblock *d, const char *what, const struct col *c)
{
	if (c->uncoded)
		return diag_set(d->diag, -TFS_ECORRUPT, d->file_off, section_name,
				"block %llu: %s in range-coded %s column",
				(unsigned long long)d->idx, what, c->name);
	return diag_set(d->diag, -TFS_ECORRUPT, d->file_off, section_name,
			"block %llu: %s in %s column at raw offset %td", (unsigned long long)d->idx,
			what, c->name, c->p - d->raw);
}

/* Any varint, checking every byte against the column's end. */
static int col_varint_slow(struct col *c, uint64_t *v)
{
	uint64_t x = 0;

	for (unsigned int shift = 0; shift < 64; shift += 7) {
		uint8_t byte;

		if (c->p == c->end)
			return -1;
		byte = *c->p++;
		if (shift == 63 && byte > 1)
			return -1;
		x |= (uint64_t)(byte & 0x7f) << shift;
		if (!(byte & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1;
}

/* With VAL_VARINT_MAX bytes left no byte needs a bounds check. */
static inline int col_varint(struct col *c, uint64_t *v)
{
	const uint8_t *p = c->p;
	uint64_t x, byte;

	if (c->end - p < (ptrdiff_t)VAL_VARINT_MAX)
		return col_varint_slow(c, v);
	x = *p++;
	if (x < 0x80)
		goto done;
	x &= 0x7f;
	for (unsigned int shift = 7; shift < 63; shift += 7) {
		byte = *p++;
		x |= (byte & 0x7f) << shift;
		if (byte < 0x80)
			goto done;
	}
	if (*p > 1)
		return -1;
	x |= (uint64_t)*p++ << 63;
done:
	c->p = p;
	*v = x;
	return 0;
}

/* The next word of a timing column: a varint, or a range-coded column's decoded word. */
static inline int col_word(struct col *c, uint64_t *v)
{
	if (c->uncoded) {
		*v = *c->w++;
		return 0;
	}
	return col_varint(c, v);
}

/*
 * Prediction masks of the block's timing columns: all ones where a column is predicted, so
 * the loops below add the terminal's state or 0 without branching.
 */
static void pred_masks(const struct dblock *d, uint64_t *ts_mask, uint64_t *dur_mask)
{
	*ts_mask = d->pred & VAL_PRED_TS ? UINT64_MAX : 0;
	*dur_mask = d->pred & VAL_PRED_DUR ? UINT64_MAX : 0;
}

static int decode_lossless(const struct dblock *d, struct col *ts_col, struct col *dur_col)
{
	struct col tc = *ts_col, dc = *dur_col;
	struct tstate *t = d->p->t;
	uint64_t *ts_ns = d->out->ts_ns, *dur_ns = d->out->dur_ns;
	const uint64_t end_mask = d->pred & VAL_GAP_START ? 0 : UINT64_MAX;
	uint64_t base = 0, res, ts_mask, dur_mask;

	pred_masks(d, &ts_mask, &dur_mask);
	for (uint32_t i = 0; i < d->n; i++) {
		struct tstate *st = &t[d->terms[i]];
		uint64_t ts;

		if (col_word(&tc, &res))
			return block_fail(d, "bad varint", &tc);
		if (i) {
			st->gap = (st->gap & ts_mask) + unzz(res);
			ts = base + st->gap;
		} else {
			ts = unzz(res);
		}
		ts_ns[i] = ts;
		if (col_word(&dc, &res))
			return block_fail(d, "bad varint", &dc);
		st->dur = (st->dur & dur_mask) + unzz(res);
		dur_ns[i] = st->dur;
		base = ts + (st->dur & end_mask);
	}
	*ts_col = tc;
	*dur_col = dc;
	return 0;
}

/* The next correction at @xc after step index @prev (parse_ticks checked them). */
static void next_correction(struct col *xc, uint64_t prev, uint64_t *idx, uint64_t *c)
{
	uint64_t skip = 0;

	*c = 0;
	if (col_varint(xc, &skip) || col_varint(xc, c))
		skip = UINT64_MAX - prev; /* cannot happen */
	*idx = prev + 1 + skip;
}

/* One step of a ticks block (FORMAT.md §7.4.1): the nanoseconds it took. */
static uint64_t tick_step(uint64_t q, struct vphase *ph, uint64_t k, uint64_t c)
{
	const i128 delta = vtick_predict(q, *ph, k) + (int64_t)unzz(c);

	*ph = vtick_learn(q, *ph, k, delta);
	return (uint64_t)delta;
}

/* A lossless block counting ticks (FORMAT.md §7.4.1). */
static int decode_ticks(const struct dblock *d, struct col *ts_col, struct col *dur_col)
{
	struct col tc = *ts_col, dc = *dur_col, xc = d->corr;
	struct tstate *t = d->p->t;
	uint64_t *ts_ns = d->out->ts_ns, *dur_ns = d->out->dur_ns;
	const bool from_start = d->pred & VAL_GAP_START;
	struct vphase ph_start = VPHASE_UNKNOWN, ph_end = VPHASE_UNKNOWN;
	uint64_t res, ts_mask, dur_mask, next = UINT64_MAX, c = 0, start = 0, end = 0;
	uint32_t left = d->n_corr;

	pred_masks(d, &ts_mask, &dur_mask);
	if (left)
		next_correction(&xc, 0, &next, &c);
	for (uint64_t i = 0; i < d->n; i++) {
		struct tstate *st = &t[d->terms[i]];

		if (col_word(&tc, &res))
			return block_fail(d, "bad varint", &tc);
		if (i) {
			struct vphase ph = from_start ? ph_start : ph_end;
			uint64_t from = from_start ? start : end;

			st->gap = (st->gap & ts_mask) + unzz(res);
			start = from + tick_step(d->tick_q, &ph, st->gap, next == 2 * i ? c : 0);
			ph_start = ph;
			if (next == 2 * i && --left)
				next_correction(&xc, next, &next, &c);
		} else {
			start = unzz(res);
			ph_start = VPHASE_UNKNOWN;
		}
		if (col_word(&dc, &res))
			return block_fail(d, "bad varint", &dc);
		st->dur = (st->dur & dur_mask) + unzz(res);
		ph_end = ph_start;
		end = start + tick_step(d->tick_q, &ph_end, st->dur, next == 2 * i + 1 ? c : 0);
		if (next == 2 * i + 1 && --left)
			next_correction(&xc, next, &next, &c);
		ts_ns[i] = start;
		dur_ns[i] = end - start;
	}
	*ts_col = tc;
	*dur_col = dc;
	return 0;
}

static int decode_lossy(const struct dblock *d, struct col *ts_col, struct col *dur_col)
{
	const struct bins *b = &d->p->bins;
	const int64_t n_bins = b->n;
	struct col tc = *ts_col, dc = *dur_col;
	struct tstate *t = d->p->t;
	uint64_t *ts_ns = d->out->ts_ns, *dur_ns = d->out->dur_ns;
	const uint64_t end_mask = d->pred & VAL_GAP_START ? 0 : UINT64_MAX;
	uint64_t base = 0, res, ts_mask, dur_mask;

	pred_masks(d, &ts_mask, &dur_mask);
	for (uint32_t i = 0; i < d->n; i++) {
		struct tstate *st = &t[d->terms[i]];
		uint64_t ts, dur;

		if (col_word(&tc, &res))
			return block_fail(d, "bad varint", &tc);
		if (i) {
			int64_t sb = (int64_t)((st->gap & ts_mask) + unzz(res));

			if (sb <= -n_bins || sb >= n_bins)
				return block_fail(d, "gap bin out of range", &tc);
			st->gap = (uint64_t)sb;
			ts = base + vp_sbin_rep(b, sb);
		} else {
			ts = unzz(res);
		}
		ts_ns[i] = ts;
		if (col_word(&dc, &res))
			return block_fail(d, "bad varint", &dc);
		st->dur = (st->dur & dur_mask) + unzz(res);
		if (st->dur >= (uint64_t)n_bins)
			return block_fail(d, "duration bin out of range", &dc);
		dur = vp_bin_rep(b, (uint32_t)st->dur);
		dur_ns[i] = dur;
		base = ts + (dur & end_mask);
	}
	*ts_col = tc;
	*dur_col = dc;
	return 0;
}

/*
 * Value of class @c whose stride prediction is @pred, from its tag at @tc and its residual
 * at @rc, 0 unless it is a miss (FORMAT.md §7.3.1). @return 0, or a block_fail()
 */
static inline int class_value(const struct dblock *d, struct col *rc, struct col *tc,
			      uint8_t c, uint64_t pred, uint64_t *x)
{
	struct vclass *k = vp_class(d->p, c);
	uint64_t res;
	uint32_t back;
	uint8_t tag;

	if (tc->p == tc->end)
		return block_fail(d, "missing tag", tc);
	tag = *tc->p;
	if (col_varint(rc, &res))
		return block_fail(d, "bad varint", rc);
	switch (tag) {
	case VAL_TAG_STRIDE:
		*x = pred;
		break;
	case VAL_TAG_MISS:
	case VAL_TAG_MAX:
		*x = (tag == VAL_TAG_MISS ? pred : k->max + 1) + unzz(res);
		break;
	default:
		back = (uint32_t)tag - VAL_TAG_HIST;
		if (back >= k->count)
			return block_fail(d, "tag reaches before the class's first value", tc);
		*x = k->ring[(k->count - 1 - back) % VAL_HIST_RING];
		break;
	}
	if (res && (tag == VAL_TAG_STRIDE || tag >= VAL_TAG_HIST))
		return block_fail(d, "residual of a hit not 0", rc);
	tc->p++;
	vp_class_push(k, *x);
	return 0;
}

static int decode_vals(const struct dblock *d, struct col *vals_col, struct col *tags_col,
		       struct col *cls_col)
{
	/* in locals: the byte stores below (seen) would make the compiler reload them */
	const uint32_t *val_off = d->out->val_off, *terms = d->terms, *cls_off = d->s->cls_off;
	const uint8_t *cls_all = d->s->version >= 4 ? d->s->cls : NULL;
	const uint32_t n_events = d->n;
	struct fstate *f0 = d->p->f;
	struct tstate *t = d->p->t;
	uint64_t *vals = d->out->vals;
	struct col c = *vals_col, tc = *tags_col, kc = *cls_col;
	uint64_t res;
	int rc;

	for (uint32_t i = 0; i < n_events; i++) {
		struct tstate *st = &t[terms[i]];
		uint32_t n = val_off[i + 1] - val_off[i];
		const uint8_t *cls;
		const bool seen = st->seen;
		struct fstate *f;
		uint64_t *v;

		st->seen = 1;
		if (!n)
			continue;
		f = f0 + st->val_slot;
		v = vals + val_off[i];
		cls = cls_all ? cls_all + cls_off[terms[i]] : NULL;
		for (uint32_t j = 0; j < n; j++) {
			uint64_t last = f[j].last, x = 0;

			if (cls && cls[j]) {
				rc = class_value(d, &kc, &tc, cls[j], last + f[j].delta, &x);
				if (rc < 0)
					return rc;
			} else {
				if (col_varint(&c, &res))
					return block_fail(d, "bad varint", &c);
				x = last + f[j].delta + unzz(res);
			}
			f[j].delta = seen ? x - last : 0;
			f[j].last = x;
			v[j] = x;
		}
	}
	*vals_col = c;
	*tags_col = tc;
	*cls_col = kc;
	return 0;
}

/* Room for @n events in the per-event arrays. */
static int reserve_events(struct vblock *b, uint32_t n)
{
	void *q;

	if (n <= b->cap_events)
		return 0;
	q = realloc(b->ts_ns, n * sizeof(*b->ts_ns));
	if (!q)
		return -ENOMEM;
	b->ts_ns = q;
	q = realloc(b->dur_ns, n * sizeof(*b->dur_ns));
	if (!q)
		return -ENOMEM;
	b->dur_ns = q;
	q = realloc(b->val_off, ((size_t)n + 1) * sizeof(*b->val_off));
	if (!q)
		return -ENOMEM;
	b->val_off = q;
	q = realloc(b->slot, n * sizeof(*b->slot));
	if (!q)
		return -ENOMEM;
	b->slot = q;
	b->cap_events = n;
	return 0;
}

static int reserve_block(struct vblock *b, const struct tfs_vsec *s, uint32_t n,
			 uint32_t n_terminals)
{
	struct vpred *p = b->pred;

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return -ENOMEM;
		b->pred = p;
	}
	if (vp_pred_reserve_terms(p, n_terminals) < 0)
		return -ENOMEM;
	b->pred_cap = p->t_cap;
	if (s->timing == VAL_TIMING_LOSSY && vp_bins_build(&p->bins, vp_rel_err_fix(s->rel_err)) < 0)
		return -ENOMEM;
	return reserve_events(b, n);
}

void vblock_zero_times(struct vblock *b, uint32_t n)
{
	/* cleared once, not per block: nothing else writes them in an untimed block */
	if (n > b->n_zero_times) {
		memset(b->ts_ns, 0, n * sizeof(*b->ts_ns));
		memset(b->dur_ns, 0, n * sizeof(*b->dur_ns));
		b->n_zero_times = n;
	}
}

int vblock_reserve(struct vblock *b, uint32_t n, size_t n_vals)
{
	if (reserve_events(b, n) < 0 ||
	    vp_grow(&b->vals, &b->cap_vals, n_vals, sizeof(*b->vals)) < 0)
		return -ENOMEM;
	return 0;
}

static int reserve_contents(struct vblock *b, size_t n_vals, size_t raw_len)
{
	struct vpred *p = b->pred;

	if (vp_grow(&b->vals, &b->cap_vals, n_vals, sizeof(*b->vals)) < 0 ||
	    vp_grow(&b->raw, &b->raw_cap, raw_len, 1) < 0 ||
	    vp_grow(&p->f, &p->f_cap, p->f_len, sizeof(*p->f)) < 0)
		return -ENOMEM;
	if (p->f_len)
		memset(p->f, 0, p->f_len * sizeof(*p->f));
	return 0;
}

/* Check the block's terminals, lay out its VAL fields and start each terminal's state. */
static int scan_terms(const struct dblock *d, const uint8_t *n_vals_of, uint32_t n_terminals,
		      uint32_t *n_vals)
{
	uint32_t *val_off = d->out->val_off, total = 0;
	uint8_t *slot = d->out->slot;
	const uint32_t *terms = d->terms;
	const uint32_t n_events = d->n;
	struct vpred *p = d->p;
	uint8_t top = 0;

	for (uint32_t i = 0; i < n_events; i++) {
		uint32_t t = terms[i];
		struct tstate *st;

		if (t >= n_terminals)
			return diag_set(d->diag, -TFS_ECORRUPT, d->file_off, section_name,
					"block %llu: event %u has terminal %u of %u",
					(unsigned long long)d->idx, i, t, n_terminals);
		val_off[i] = total;
		total += n_vals_of[t];
		st = &p->t[t];
		/* what is the same at each event of a terminal is looked at once a block */
		if (st->gen != p->gen) {
			if (n_vals_of[t] > VAL_MAX_FIELDS)
				return diag_set(d->diag, -TFS_ECORRUPT, d->file_off, section_name,
						"terminal %u has %u VAL fields", t, n_vals_of[t]);
			if (d->s->version >= 4 && d->s->cls)
				for (uint32_t j = 0; j < n_vals_of[t]; j++)
					top = d->s->cls[d->s->cls_off[t] + j] > top
						      ? d->s->cls[d->s->cls_off[t] + j]
						      : top;
			pred_enter(p, st, n_vals_of[t]);
		}
		slot[i] = st->cslot;
	}
	val_off[n_events] = total;
	*n_vals = total;
	return top ? vp_class_reserve(p, top) : 0;
}

/* The predictor byte bits blocks of section @s may set. */
static unsigned int pred_bits_of(const struct tfs_vsec *s)
{
	return VAL_PRED_BITS |
	       (s->version >= 3 && s->timing == VAL_TIMING_LOSSLESS ? VAL_TICKS : 0u) |
	       (s->version >= 3 && s->timing != VAL_TIMING_NONE ? VAL_CODED_TS | VAL_CODED_DUR
								 : 0u);
}

/* The predictor byte bit saying column @c (COL_TS or COL_DUR) is range-coded. */
static unsigned int coded_bit(int c)
{
	return c == COL_TS ? VAL_CODED_TS : VAL_CODED_DUR;
}

/*
 * Decode the block's range-coded timing columns (FORMAT.md §7.4.2, §7.4.3) into d->out->uncoded
 * and point @cols at their words, which the timing decoders read through col_word().
 */
static int uncode_columns(const struct dblock *d, struct col cols[N_COLS])
{
	struct vblock *b = d->out;
	size_t at = 0;

	if (!(d->pred & (VAL_CODED_TS | VAL_CODED_DUR)))
		return 0;
	if (!b->coder) {
		b->coder = malloc(sizeof(struct vrc_model));
		if (!b->coder)
			return -ENOMEM;
		if (vrc_model_init(b->coder, VRC_WORDS_1) < 0) {
			free(b->coder);
			b->coder = NULL;
			return -ENOMEM;
		}
	}
	if (vp_grow(&b->uncoded, &b->uncoded_cap, 2 * (size_t)d->n, sizeof(*b->uncoded)) < 0)
		return -ENOMEM;
	/* one coder serves a reader's blocks of any section */
	((struct vrc_model *)b->coder)->words = d->s->version >= 5 ? VRC_WORDS_2 : VRC_WORDS_1;
	((struct vrc_model *)b->coder)->noisy = d->s->timing == VAL_TIMING_LOSSLESS;
	for (int c = COL_TS; c <= COL_DUR; c++) {
		const char *bad;

		if (!(d->pred & coded_bit(c)))
			continue;
		bad = vrc_decode(b->coder, b->slot, d->n, cols[c].p, (size_t)(cols[c].end - cols[c].p),
				 b->uncoded + at);
		if (bad)
			return block_fail(d, bad, &cols[c]);
		/* every word is read: the loops take exactly n of each column */
		cols[c].p = cols[c].end = NULL;
		cols[c].w = b->uncoded + at;
		cols[c].uncoded = true;
		at += d->n;
	}
	return 0;
}

/*
 * Parse the ticks header at @c of a block of @n events (FORMAT.md §7.2): the tick into
 * @q, the corrections' bytes into @corr. @return NULL, or what is wrong with it
 */
static const char *parse_ticks(struct col *c, uint32_t n, uint64_t *q, struct col *corr,
			       uint32_t *n_corr)
{
	const uint64_t steps = 2 * (uint64_t)n;
	const uint8_t *at = c->p; /* a bad field is reported where it starts */
	uint64_t nx, prev = 0;

	if (col_varint(c, q))
		return "bad varint";
	if (*q < VTICK_Q_MIN || *q >= VTICK_Q_LIMIT) {
		c->p = at;
		return "tick length out of range";
	}
	at = c->p;
	if (col_varint(c, &nx))
		return "bad varint";
	if (nx > steps - 1) {
		c->p = at;
		return "more corrections than steps";
	}
	corr->p = c->p;
	for (uint64_t k = 0; k < nx; k++) {
		uint64_t skip, v;

		at = c->p;
		if (col_varint(c, &skip) || col_varint(c, &v))
			return "bad varint";
		if (skip >= steps - prev - 1 || !v) {
			c->p = at;
			return v ? "correction past the block's steps" : "correction of 0";
		}
		prev += skip + 1;
	}
	corr->end = c->p;
	corr->name = "ticks header";
	*n_corr = (uint32_t)nx;
	return NULL;
}

static int parse_columns(struct dblock *d, uint32_t raw_len, struct col cols[N_COLS])
{
	static const char *const names[N_COLS] = {"ts", "dur", "vals", "tags", "class"};
	const int n_cols = n_cols_of(d->s);
	struct col hdr = {d->raw, d->raw + raw_len, "header", false, NULL};
	uint64_t n, len[N_COLS];
	const uint8_t *p;

	if (col_varint(&hdr, &n))
		return block_fail(d, "bad varint", &hdr);
	if (n != d->n)
		return diag_set(d->diag, -TFS_ECORRUPT, d->file_off, section_name,
				"block %llu holds %llu events, expected %u",
				(unsigned long long)d->idx, (unsigned long long)n, d->n);
	d->pred = VAL_PRED_ALL | VAL_GAP_START;
	if (d->s->version >= 2) {
		if (hdr.p == hdr.end)
			return block_fail(d, "missing predictor byte", &hdr);
		d->pred = *hdr.p;
		if (d->pred & ~pred_bits_of(d->s) ||
		    (d->s->timing == VAL_TIMING_NONE && d->pred))
			return block_fail(d, "bad predictor byte", &hdr);
		hdr.p++;
	}
	if (d->pred & VAL_TICKS) {
		const char *bad = parse_ticks(&hdr, d->n, &d->tick_q, &d->corr, &d->n_corr);

		if (bad)
			return block_fail(d, bad, &hdr);
	}
	for (int c = 0; c < n_cols; c++)
		if (col_varint(&hdr, &len[c]))
			return block_fail(d, "bad varint", &hdr);
	p = hdr.p;
	for (int c = n_cols; c < N_COLS; c++)
		cols[c] = (struct col){p, p, names[c], false, NULL};
	for (int c = 0; c < n_cols; c++) {
		if (len[c] > (uint64_t)(hdr.end - p))
			return block_fail(d, "column length overruns the block", &hdr);
		cols[c].p = p;
		cols[c].end = p + len[c];
		cols[c].name = names[c];
		cols[c].uncoded = false;
		cols[c].w = NULL;
		p += len[c];
	}
	if (p != hdr.end)
		return block_fail(d, "bytes after the last column", &hdr);
	if (d->s->timing == VAL_TIMING_NONE && (len[COL_TS] || len[COL_DUR]))
		return block_fail(d, "timing bytes in an untimed section", &hdr);
	return uncode_columns(d, cols);
}

static int decode_columns(const struct dblock *d, struct col cols[N_COLS])
{
	int rc = 0;

	if (d->s->timing == VAL_TIMING_LOSSLESS && (d->pred & VAL_TICKS))
		rc = decode_ticks(d, &cols[COL_TS], &cols[COL_DUR]);
	else if (d->s->timing == VAL_TIMING_LOSSLESS)
		rc = decode_lossless(d, &cols[COL_TS], &cols[COL_DUR]);
	else if (d->s->timing == VAL_TIMING_LOSSY)
		rc = decode_lossy(d, &cols[COL_TS], &cols[COL_DUR]);
	if (rc < 0)
		return rc;
	rc = decode_vals(d, &cols[COL_VALS], &cols[COL_TAGS], &cols[COL_CLASS]);
	if (rc < 0)
		return rc;
	for (int c = 0; c < N_COLS; c++)
		if (cols[c].p != cols[c].end)
			return block_fail(d, "unread bytes", &cols[c]);
	return 0;
}


/*
 * Whether the words of column @k of @pw are bytes: a range-coded column's and the tags
 * (FORMAT.md §8.1).
 */
static bool column_bytes(const struct vwords *pw, int k)
{
	return k == COL_TAGS || (k != COL_VALS && (pw->pred & coded_bit(k)));
}

/* Replace the words @patch names (sorted by column, then index). */
static int patch_words(const struct tfs_vsec *s, uint64_t idx, uint64_t file_off,
		       struct vwords *pw, const struct vpatch *patch, uint32_t n_patch,
		       struct tfs_diag *diag)
{
	for (uint32_t i = 0; i < n_patch; i++) {
		const struct vpatch *p = &patch[i];
		size_t base = 0;

		if (p->block != idx || p->col >= (uint32_t)n_cols_of(s) ||
		    p->index >= pw->n[p->col])
			return diag_set(diag, -TFS_ECORRUPT, file_off, "streams",
					"patch of values block %llu: word %llu of column %u is "
					"outside the block", (unsigned long long)idx,
					(unsigned long long)p->index, p->col);
		if (column_bytes(pw, (int)p->col) && p->word > 0xff)
			return diag_set(diag, -TFS_ECORRUPT, file_off, "streams",
					"patch of values block %llu: word %llu of byte "
					"column %u is not a byte", (unsigned long long)idx,
					(unsigned long long)p->index, p->col);
		for (uint32_t k = 0; k < p->col; k++)
			base += pw->n[k];
		pw->w[base + p->index] = p->word;
	}
	return 0;
}

/* Rebuild @pw->raw (FORMAT.md §7.2) from its words. */
static int words_to_raw(const struct tfs_vsec *s, struct vwords *pw, uint32_t n_events,
			uint32_t *raw_len)
{
	const int n_cols = n_cols_of(s);
	size_t total = 0, len[N_COLS] = {0}, off, k0 = 0;
	uint8_t tmp[VAL_VARINT_MAX];
	uint8_t *p;

	for (int k = 0; k < n_cols; k++) {
		for (size_t i = 0; i < pw->n[k]; i++)
			len[k] += column_bytes(pw, k) ? 1 : varint_store(tmp, pw->w[k0 + i]);
		k0 += pw->n[k];
		total += pw->n[k];
	}
	if (vp_grow(&pw->raw, &pw->raw_cap,
		    VAL_RAW_HDR_MAX + pw->ticks_len + VAL_VARINT_MAX * total, 1) < 0)
		return -ENOMEM;
	p = pw->raw;
	off = varint_store(p, n_events);
	if (s->version >= 2)
		p[off++] = pw->pred;
	if (pw->ticks_len) {
		memcpy(p + off, pw->ticks, pw->ticks_len);
		off += pw->ticks_len;
	}
	for (int k = 0; k < n_cols; k++)
		off += varint_store(p + off, len[k]);
	k0 = 0;
	for (int k = 0; k < n_cols; k++) {
		for (size_t i = 0; i < pw->n[k]; i++) {
			if (column_bytes(pw, k))
				p[off++] = (uint8_t)pw->w[k0 + i];
			else
				off += varint_store(p + off, pw->w[k0 + i]);
		}
		k0 += pw->n[k];
	}
	*raw_len = (uint32_t)off;
	return 0;
}

/* Index entry of block @idx: where its frame is and how long it is raw. */
static void block_entry(const struct tfs_vsec *s, uint64_t idx, const uint8_t **frame,
			uint64_t *file_off, uint32_t *stored_len, uint32_t *raw_len)
{
	const uint8_t *ent = s->index + idx * VAL_IDX_ENTRY_LEN;

	*frame = s->data + le_get64(ent);
	*file_off = s->base_off + le_get64(ent);
	*stored_len = le_get32(ent + 8);
	*raw_len = le_get32(ent + 12);
}

/*
 * Decode block @idx; @patch (may be empty) replaces words of its raw form first, which
 * is then rebuilt in @pw before the columns are parsed.
 */
static int decode_block(const struct tfs_vsec *s, uint64_t idx, const struct vpatch *patch,
			uint32_t n_patch, struct vwords *pw, const uint32_t *terms,
			const uint8_t *n_vals_of, uint32_t n_terminals, struct vblock *out,
			struct tfs_diag *diag)
{
	struct dblock d = {.s = s, .idx = idx, .terms = terms, .out = out, .diag = diag};
	struct col cols[N_COLS];
	const uint8_t *frame;
	uint32_t stored_len, raw_len, n_vals = 0;
	int rc;

	out->n_events = 0;
	if (idx >= s->n_blocks)
		return -EINVAL;
	block_entry(s, idx, &frame, &d.file_off, &stored_len, &raw_len);
	d.n = vsec_block_len(s, idx);
	rc = reserve_block(out, s, d.n, n_terminals);
	if (rc < 0)
		return rc;
	d.p = out->pred;
	vp_pred_next_block(d.p);
	rc = scan_terms(&d, n_vals_of, n_terminals, &n_vals);
	if (rc < 0)
		return rc;
	if (raw_len < raw_len_min(s, d.n, n_vals) || raw_len > raw_len_max(s, d.n, n_vals))
		return diag_set(diag, -TFS_ECORRUPT, d.file_off, section_name,
				"block %llu: raw length %u impossible for %u events, %u fields",
				(unsigned long long)idx, raw_len, d.n, n_vals);
	if (n_patch) {
		rc = vsec_block_words(s, idx, pw, diag);
		if (rc == 0)
			rc = patch_words(s, idx, d.file_off, pw, patch, n_patch, diag);
		if (rc == 0)
			rc = words_to_raw(s, pw, d.n, &raw_len);
		if (rc < 0)
			return rc;
	}
	rc = reserve_contents(out, n_vals, raw_len);
	if (rc < 0)
		return rc;
	if (n_patch)
		memcpy(out->raw, pw->raw, raw_len);
	else
		rc = zs_decompress(frame, stored_len, out->raw, raw_len, d.file_off, section_name,
				   diag);
	if (rc < 0)
		return rc;
	d.raw = out->raw;
	rc = parse_columns(&d, raw_len, cols);
	if (rc < 0)
		return rc;
	if (s->timing != VAL_TIMING_NONE)
		out->n_zero_times = 0;
	rc = decode_columns(&d, cols);
	if (rc < 0)
		return rc;
	if (s->timing == VAL_TIMING_NONE)
		vblock_zero_times(out, d.n);
	out->first_event = idx * s->block_events;
	out->n_events = d.n;
	return 0;
}

int vsec_decode_block(const struct tfs_vsec *s, uint64_t idx, const uint32_t *terms,
		      const uint8_t *n_vals_of, uint32_t n_terminals, struct vblock *out,
		      struct tfs_diag *diag)
{
	return decode_block(s, idx, NULL, 0, NULL, terms, n_vals_of, n_terminals, out, diag);
}

int vsec_decode_block_patched(const struct tfs_vsec *s, uint64_t idx, const struct vpatch *patch,
			      uint32_t n_patch, const uint32_t *terms, const uint8_t *n_vals_of,
			      uint32_t n_terminals, struct vblock *out, struct tfs_diag *diag)
{
	struct vwords pw = {0};
	int rc;

	rc = decode_block(s, idx, patch, n_patch, &pw, terms, n_vals_of, n_terminals, out, diag);
	vwords_fini(&pw);
	return rc;
}

/* ---- raw words (FORMAT.md §8.1 patches) ---- */

void vwords_fini(struct vwords *v)
{
	free(v->ticks);
	free(v->w);
	free(v->raw);
	memset(v, 0, sizeof(*v));
}

static int words_fail(const struct tfs_vsec *s, uint64_t idx, uint64_t file_off,
		      const char *what, struct tfs_diag *diag)
{
	(void)s;
	return diag_set(diag, -TFS_ECORRUPT, file_off, section_name, "block %llu: %s",
			(unsigned long long)idx, what);
}

int vsec_block_words(const struct tfs_vsec *s, uint64_t idx, struct vwords *out,
		     struct tfs_diag *diag)
{
	const uint8_t *frame;
	uint64_t file_off, n, len[N_COLS];
	uint32_t stored_len, raw_len;
	struct col c;
	size_t total = 0;
	int rc;

	if (idx >= s->n_blocks)
		return -EINVAL;
	block_entry(s, idx, &frame, &file_off, &stored_len, &raw_len);
	if (raw_len > raw_len_max(s, vsec_block_len(s, idx), 64ull * vsec_block_len(s, idx)))
		return words_fail(s, idx, file_off, "impossible raw length", diag);
	if (vp_grow(&out->raw, &out->raw_cap, raw_len, 1) < 0 ||
	    vp_grow(&out->w, &out->w_cap, raw_len, sizeof(*out->w)) < 0)
		return -ENOMEM;
	rc = zs_decompress(frame, stored_len, out->raw, raw_len, file_off, section_name, diag);
	if (rc < 0)
		return rc;
	c = (struct col){out->raw, out->raw + raw_len, "header", false, NULL};
	if (col_varint(&c, &n) || n != vsec_block_len(s, idx))
		return words_fail(s, idx, file_off, "bad block header", diag);
	out->pred = 0;
	out->ticks_len = 0;
	if (s->version >= 2) {
		if (c.p == c.end || *c.p & ~pred_bits_of(s))
			return words_fail(s, idx, file_off, "bad predictor byte", diag);
		out->pred = *c.p++;
	}
	if (out->pred & VAL_TICKS) {
		const uint8_t *h = c.p;
		struct col corr;
		uint64_t q;
		uint32_t n_corr;

		if (parse_ticks(&c, vsec_block_len(s, idx), &q, &corr, &n_corr))
			return words_fail(s, idx, file_off, "bad ticks header", diag);
		if (vp_grow(&out->ticks, &out->ticks_cap, (size_t)(c.p - h), 1) < 0)
			return -ENOMEM;
		memcpy(out->ticks, h, (size_t)(c.p - h));
		out->ticks_len = (size_t)(c.p - h);
	}
	for (int k = 0; k < N_COLS; k++)
		out->n[k] = 0;
	for (int k = 0; k < n_cols_of(s); k++)
		if (col_varint(&c, &len[k]))
			return words_fail(s, idx, file_off, "bad block header", diag);
	for (int k = 0; k < n_cols_of(s); k++) {
		struct col w = {c.p, c.p, "words", false, NULL};

		if (len[k] > (uint64_t)(c.end - c.p))
			return words_fail(s, idx, file_off, "column length overruns the block",
					  diag);
		w.end = c.p + len[k];
		out->n[k] = 0;
		while (w.p < w.end) {
			if (column_bytes(out, k))
				out->w[total] = *w.p++;
			else if (col_varint(&w, &out->w[total]))
				return words_fail(s, idx, file_off, "bad varint", diag);
			total++;
			out->n[k]++;
		}
		c.p = w.end;
	}
	if (c.p != c.end)
		return words_fail(s, idx, file_off, "bytes after the last column", diag);
	return 0;
}
