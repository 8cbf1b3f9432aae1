/*
 * The values encoder (FORMAT.md §7): turns each event's start time, duration and VAL fields
 * into prediction residuals, writes them column by column into a raw block, compresses every
 * full block into one zstd frame and finally writes the header and block index. Each timing
 * column is coded both with and without its per-terminal predictor; when the block is full
 * the one that compresses smaller is kept. It does not know event kinds and never calls
 * zstd directly.
 */
#include <stdlib.h>
#include <string.h>

#include "vpred_i.h"
#include "zstd_i.h"

struct tfs_venc {
	uint32_t block_events;
	int timing;
	double rel_err;
	int level;
	int final_level;   /* recompress at finish when above level; 0 once done */
	int version;	   /* 1 or 2 */
	unsigned int pred; /* venc_opts.pred */
	bool from_start;   /* gaps from the previous start: TFV1, or VAL_GAP_START */
	bool auto_base;	   /* lossless TFV2: each block takes the better of both bases */
	struct vpred p;
	struct tfs_buf col[N_COLS]; /* residual columns of the pending block (predicted) */
	struct tfs_buf raw_col[2];  /* TFV2: the ts and dur columns unpredicted */
	struct tfs_buf start_ts[2]; /* auto_base: ts column from the previous start,
				       predicted [0] and not [1] */
	const struct tfs_buf *ts_pick; /* the ts column choose_pred kept */
	uint64_t prev_ts;	    /* auto_base: start of the previous event in the block */
	uint32_t blk_n;		    /* events in the pending block */
	uint64_t base;		    /* reconstructed start (TFV1) or end (TFV2) of the previous
				       event in the block: what the next gap is measured from */
	struct tfs_buf raw;	    /* the pending block assembled for compression */
	struct tfs_buf trial;	    /* scratch of choose_pred's trial compressions */
	struct tfs_buf frames;	    /* compressed blocks, back to back */
	struct vidx *idx;
	size_t n_idx, idx_cap;
	uint64_t n_events;
	bool finished;
};

/* ---- encoder ---- */

int venc_new(const struct venc_opts *opts, struct tfs_venc **out)
{
	struct tfs_venc *e;

	*out = NULL;
	if (opts->block_events > VAL_MAX_BLOCK_EVENTS)
		return -EINVAL;
	if (opts->timing != VAL_TIMING_NONE && opts->timing != VAL_TIMING_LOSSLESS &&
	    opts->timing != VAL_TIMING_LOSSY)
		return -EINVAL;
	if (opts->timing == VAL_TIMING_LOSSY && !vp_rel_err_ok(opts->rel_err))
		return -EINVAL;
	if (opts->version < 0 || opts->version > VAL_VERSION)
		return -EINVAL;
	if (opts->pred && (opts->pred & ~VAL_PRED_ALL) != VAL_PRED_FIXED)
		return -EINVAL;
	if (opts->gap_base < VAL_BASE_DEFAULT || opts->gap_base > VAL_BASE_START)
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->block_events = opts->block_events ? opts->block_events : VAL_DEFAULT_BLOCK_EVENTS;
	e->timing = opts->timing;
	e->rel_err = opts->timing == VAL_TIMING_LOSSY ? opts->rel_err : 0.0;
	e->level = opts->zstd_level ? opts->zstd_level : VAL_DEFAULT_LEVEL;
	e->final_level = opts->final_level > e->level ? opts->final_level : 0;
	e->version = opts->version ? opts->version : VAL_VERSION;
	e->pred = opts->pred;
	e->from_start = e->version < 2 || opts->gap_base == VAL_BASE_START ||
			(opts->gap_base == VAL_BASE_DEFAULT && e->timing == VAL_TIMING_LOSSY &&
			 VAL_LOSSY_FROM_START);
	e->auto_base = e->version >= 2 && e->timing == VAL_TIMING_LOSSLESS &&
		       opts->gap_base == VAL_BASE_DEFAULT && !opts->pred;
	e->p.gen = 1;
	for (int c = 0; c < N_COLS; c++)
		buf_init(&e->col[c]);
	for (int k = 0; k < 2; k++) {
		buf_init(&e->raw_col[k]);
		buf_init(&e->start_ts[k]);
	}
	buf_init(&e->raw);
	buf_init(&e->trial);
	buf_init(&e->frames);
	if (e->timing == VAL_TIMING_LOSSY && vp_bins_build(&e->p.bins, vp_rel_err_fix(e->rel_err)) < 0)
		goto err_free_enc;
	*out = e;
	return 0;

err_free_enc:
	free(e);
	return -ENOMEM;
}

void venc_free(struct tfs_venc *e)
{
	if (!e)
		return;
	vp_pred_fini(&e->p);
	for (int c = 0; c < N_COLS; c++)
		buf_fini(&e->col[c]);
	for (int k = 0; k < 2; k++) {
		buf_fini(&e->raw_col[k]);
		buf_fini(&e->start_ts[k]);
	}
	buf_fini(&e->raw);
	buf_fini(&e->trial);
	buf_fini(&e->frames);
	free(e->idx);
	free(e);
}

uint64_t venc_n_events(const struct tfs_venc *e)
{
	return e->n_events;
}

/* Size of @b compressed at zstd's fastest regular level, into the scratch buffer @tmp. */
static int trial_size(const struct tfs_buf *b, struct tfs_buf *tmp, size_t *size)
{
	int rc;

	tmp->len = 0;
	rc = b->len ? zs_compress(tmp, b->data, b->len, VAL_TRIAL_LEVEL) : 0;
	*size = tmp->len;
	return rc;
}

/*
 * Which of @n candidate columns compresses smallest (the first of equals). Order-0 entropy
 * or summed varint lengths miss what zstd's matches find in unpredicted values that repeat
 * (a periodic ring's bins), so each candidate is compressed fast and measured.
 * @return its index, or -ENOMEM
 */
static int smallest(struct tfs_venc *e, const struct tfs_buf *const *cand, int n)
{
	size_t best = SIZE_MAX;
	int pick = 0;

	for (int k = 0; k < n; k++) {
		size_t size = 0;
		int rc = trial_size(cand[k], &e->trial, &size);

		if (rc < 0)
			return rc;
		if (size < best) {
			best = size;
			pick = k;
		}
	}
	return pick;
}

/*
 * FORMAT.md §7.2 predictor byte of the pending block, with e->ts_pick the ts column it
 * describes. @return the byte, or -ENOMEM
 */
static int choose_pred(struct tfs_venc *e)
{
	const struct tfs_buf *ts[4] = {&e->col[COL_TS], &e->raw_col[COL_TS], &e->start_ts[0],
				       &e->start_ts[1]};
	const struct tfs_buf *dur[2] = {&e->col[COL_DUR], &e->raw_col[COL_DUR]};
	int pred = e->from_start ? VAL_GAP_START : 0, t, d;

	e->ts_pick = &e->col[COL_TS];
	if (e->version < 2)
		return VAL_PRED_ALL; /* and from the start: TFV1 has no predictor byte */
	if (e->timing == VAL_TIMING_NONE)
		return 0;
	if (e->pred & VAL_PRED_FIXED) {
		if (!(e->pred & VAL_PRED_TS))
			e->ts_pick = &e->raw_col[COL_TS];
		return pred | (int)(e->pred & VAL_PRED_ALL);
	}
	t = smallest(e, ts, e->auto_base ? 4 : 2);
	if (t < 0)
		return t;
	d = smallest(e, dur, 2);
	if (d < 0)
		return d;
	e->ts_pick = ts[t];
	return pred | (t % 2 ? 0 : VAL_PRED_TS) | (t >= 2 ? VAL_GAP_START : 0) |
	       (d ? 0 : VAL_PRED_DUR);
}

/* The pending block's column @c as chosen by choose_pred() and @pred. */
static const struct tfs_buf *block_col(const struct tfs_venc *e, int c, uint8_t pred)
{
	if (c == COL_TS)
		return e->ts_pick;
	if (c == COL_DUR && !(pred & VAL_PRED_DUR))
		return &e->raw_col[c];
	return &e->col[c];
}

/* Compress the pending block into one frame. On failure nothing changes. */
static int flush_block(struct tfs_venc *e)
{
	size_t need = VAL_RAW_HDR_MAX, frames_len = e->frames.len;
	const struct tfs_buf *col[N_COLS];
	uint8_t pred;
	int rc;

	if (!e->blk_n)
		return 0;
	rc = choose_pred(e);
	if (rc < 0)
		return rc;
	pred = (uint8_t)rc;
	for (int c = 0; c < N_COLS; c++) {
		col[c] = block_col(e, c, pred);
		need += col[c]->len;
	}
	if (vp_grow(&e->idx, &e->idx_cap, e->n_idx + 1, sizeof(*e->idx)) < 0)
		return -ENOMEM;
	e->raw.len = 0;
	rc = buf_reserve(&e->raw, need);
	if (rc < 0)
		return rc;
	put_varint(&e->raw, e->blk_n);
	if (e->version >= 2)
		e->raw.data[e->raw.len++] = pred;
	for (int c = 0; c < N_COLS; c++)
		put_varint(&e->raw, col[c]->len);
	for (int c = 0; c < N_COLS; c++) {
		if (!col[c]->len)
			continue;
		memcpy(e->raw.data + e->raw.len, col[c]->data, col[c]->len);
		e->raw.len += col[c]->len;
	}
	rc = zs_compress(&e->frames, e->raw.data, e->raw.len, e->level);
	if (rc < 0)
		return rc;
	e->idx[e->n_idx].raw_len = (uint32_t)e->raw.len;
	e->idx[e->n_idx].stored_len = (uint32_t)(e->frames.len - frames_len);
	e->n_idx++;
	for (int c = 0; c < N_COLS; c++)
		e->col[c].len = 0;
	e->raw_col[0].len = e->raw_col[1].len = 0;
	e->start_ts[0].len = e->start_ts[1].len = 0;
	e->blk_n = 0;
	e->base = 0;
	e->prev_ts = 0;
	vp_pred_next_block(&e->p);
	return 0;
}

/* One timing residual: @x predicted by @pred into col[@c], unpredicted into raw_col[@c]. */
static inline void put_time(struct tfs_venc *e, int c, uint64_t x, uint64_t pred)
{
	put_varint(&e->col[c], zz(x - pred));
	if (e->version >= 2)
		put_varint(&e->raw_col[c], zz(x));
}

static void code_times_lossless(struct tfs_venc *e, struct tstate *st, uint64_t ts_ns,
				uint64_t dur_ns)
{
	if (e->blk_n) {
		uint64_t gap = ts_ns - e->base;

		put_time(e, COL_TS, gap, st->gap);
		st->gap = gap;
	} else {
		put_time(e, COL_TS, ts_ns, 0);
	}
	if (e->auto_base) {
		uint64_t gap = e->blk_n ? ts_ns - e->prev_ts : ts_ns;

		put_varint(&e->start_ts[0], zz(gap - (e->blk_n ? st->gap_start : 0)));
		put_varint(&e->start_ts[1], zz(gap));
		if (e->blk_n)
			st->gap_start = gap;
		e->prev_ts = ts_ns;
	}
	put_time(e, COL_DUR, dur_ns, st->dur);
	st->dur = dur_ns;
	e->base = e->from_start ? ts_ns : ts_ns + dur_ns;
}

static void code_times_lossy(struct tfs_venc *e, struct tstate *st, uint64_t ts_ns, uint64_t dur_ns)
{
	const struct bins *b = &e->p.bins;
	uint32_t dur_bin = vp_bin_of(b, dur_ns);
	uint64_t ts_rec;

	if (e->blk_n) {
		/* against the reconstructed base, so that errors do not accumulate */
		int64_t sb = vp_sbin_of(b, ts_ns - e->base);

		/* a step back to a start near 0 must not round to below 0 (FORMAT.md §7.4) */
		if (sb < 0 && ts_ns <= e->base && vp_bin_rep(b, (uint32_t)-sb) > e->base)
			sb++;

		put_time(e, COL_TS, (uint64_t)sb, st->gap);
		st->gap = (uint64_t)sb;
		ts_rec = e->base + vp_sbin_rep(b, sb);
	} else {
		put_time(e, COL_TS, ts_ns, 0);
		ts_rec = ts_ns;
	}
	put_time(e, COL_DUR, dur_bin, st->dur);
	st->dur = dur_bin;
	e->base = e->from_start ? ts_rec : ts_rec + vp_bin_rep(b, dur_bin);
}

static void code_vals(struct tfs_venc *e, struct tstate *st, const uint64_t *vals, uint32_t n_vals)
{
	struct tfs_buf *col = &e->col[COL_VALS];
	struct fstate *f;

	if (!n_vals)
		goto out_seen;
	f = e->p.f + st->val_slot;
	for (uint32_t j = 0; j < n_vals; j++) {
		put_varint(col, zz(vals[j] - (f[j].last + f[j].delta)));
		f[j].delta = st->seen ? vals[j] - f[j].last : 0;
		f[j].last = vals[j];
	}
out_seen:
	st->seen = 1;
}

/* Make every allocation the event needs, so that coding it cannot fail. */
static int reserve_event(struct tfs_venc *e, uint32_t terminal, uint32_t n_vals)
{
	struct tstate *st;
	int rc;

	rc = vp_pred_reserve_terms(&e->p, (size_t)terminal + 1);
	if (rc < 0)
		return rc;
	st = &e->p.t[terminal];
	if (st->n_vals != NVALS_UNKNOWN && st->n_vals != n_vals)
		return -EINVAL;
	if (st->gen != e->p.gen &&
	    vp_grow(&e->p.f, &e->p.f_cap, e->p.f_len + n_vals, sizeof(*e->p.f)) < 0)
		return -ENOMEM;
	if (e->timing != VAL_TIMING_NONE) {
		for (int c = COL_TS; c <= COL_DUR && rc == 0; c++) {
			rc = buf_reserve(&e->col[c], VAL_VARINT_MAX);
			if (rc == 0)
				rc = buf_reserve(&e->raw_col[c], VAL_VARINT_MAX);
			if (rc == 0 && e->auto_base)
				rc = buf_reserve(&e->start_ts[c], VAL_VARINT_MAX);
		}
		if (rc < 0)
			return rc;
	}
	return buf_reserve(&e->col[COL_VALS], (size_t)VAL_VARINT_MAX * n_vals);
}

int venc_add(struct tfs_venc *e, uint32_t terminal, uint64_t ts_ns, uint64_t dur_ns,
	     const uint64_t *vals, uint32_t n_vals)
{
	struct tstate *st;
	int rc;

	if (e->finished || terminal >= VAL_MAX_TERMINAL || n_vals > VAL_MAX_FIELDS ||
	    (n_vals && !vals))
		return -EINVAL;
	if (e->blk_n == e->block_events) {
		rc = flush_block(e);
		if (rc < 0)
			return rc;
	}
	rc = reserve_event(e, terminal, n_vals);
	if (rc < 0)
		return rc;
	st = &e->p.t[terminal];
	st->n_vals = (uint8_t)n_vals;
	if (st->gen != e->p.gen) {
		pred_enter(&e->p, st, n_vals);
		if (n_vals)
			memset(e->p.f + st->val_slot, 0, n_vals * sizeof(*e->p.f));
	}
	if (e->timing == VAL_TIMING_LOSSLESS)
		code_times_lossless(e, st, ts_ns, dur_ns);
	else if (e->timing == VAL_TIMING_LOSSY)
		code_times_lossy(e, st, ts_ns, dur_ns);
	code_vals(e, st, vals, n_vals);
	e->blk_n++;
	e->n_events++;
	return 0;
}

static void put_header(uint8_t *h, const struct tfs_venc *e)
{
	uint64_t rel_bits;

	memcpy(&rel_bits, &e->rel_err, sizeof(rel_bits));
	le_put32(h, e->version >= 2 ? VAL_MAGIC_V2 : VAL_MAGIC_V1);
	h[4] = (uint8_t)e->timing;
	h[5] = h[6] = h[7] = 0;
	le_put32(h + 8, e->block_events);
	le_put64(h + 12, rel_bits);
	le_put64(h + 20, e->n_events);
	le_put64(h + 28, e->n_idx);
}

/*
 * Recompress every block at e->final_level, keeping each smaller frame. All or nothing: on
 * failure the frames are unchanged.
 */
static int recompress(struct tfs_venc *e)
{
	struct tfs_buf frames, raw;
	uint32_t *stored;
	size_t off = 0;
	int rc = -ENOMEM;

	buf_init(&frames);
	buf_init(&raw);
	stored = malloc((e->n_idx ? e->n_idx : 1) * sizeof(*stored));
	if (!stored)
		return -ENOMEM;
	rc = 0; /* a section without blocks has nothing to recompress */
	for (size_t i = 0; i < e->n_idx; i++) {
		const uint8_t *frame = e->frames.data + off;
		size_t before = frames.len;

		rc = buf_reserve(&raw, e->idx[i].raw_len);
		if (rc == 0)
			rc = zs_decompress(frame, e->idx[i].stored_len, raw.data, e->idx[i].raw_len,
					   0, "values", NULL);
		if (rc == 0)
			rc = zs_compress(&frames, raw.data, e->idx[i].raw_len, e->final_level);
		if (rc == 0 && frames.len - before >= e->idx[i].stored_len) {
			frames.len = before;
			rc = buf_put(&frames, frame, e->idx[i].stored_len);
		}
		if (rc < 0)
			goto out_free;
		stored[i] = (uint32_t)(frames.len - before);
		off += e->idx[i].stored_len;
	}
	for (size_t i = 0; i < e->n_idx; i++)
		e->idx[i].stored_len = stored[i];
	buf_fini(&e->frames);
	e->frames = frames;
	buf_init(&frames);
	e->final_level = 0;
out_free:
	buf_fini(&frames);
	buf_fini(&raw);
	free(stored);
	return rc;
}

void venc_no_recompress(struct tfs_venc *e)
{
	e->final_level = 0;
}

int venc_finish(struct tfs_venc *e, struct tfs_buf *out)
{
	uint64_t off;
	uint8_t *p;
	int rc;

	rc = flush_block(e);
	if (rc == 0 && e->final_level)
		rc = recompress(e);
	if (rc < 0)
		return rc;
	e->finished = true;
	off = VAL_HDR_LEN + (uint64_t)VAL_IDX_ENTRY_LEN * e->n_idx;
	rc = buf_reserve(out, (size_t)off + e->frames.len);
	if (rc < 0)
		return rc;
	p = out->data + out->len;
	put_header(p, e);
	p += VAL_HDR_LEN;
	for (size_t i = 0; i < e->n_idx; i++) {
		le_put64(p, off);
		le_put32(p + 8, e->idx[i].stored_len);
		le_put32(p + 12, e->idx[i].raw_len);
		off += e->idx[i].stored_len;
		p += VAL_IDX_ENTRY_LEN;
	}
	if (e->frames.len)
		memcpy(p, e->frames.data, e->frames.len);
	out->len += (size_t)(p - (out->data + out->len)) + e->frames.len;
	return 0;
}
