/*
 * Value and timing streams (FORMAT.md §7): the encoder turns each event's start time,
 * duration and VAL fields into prediction residuals, writes them column by column into a
 * raw block and compresses every full block into one zstd frame; the decoder checks the
 * section header and block index, then rebuilds one block at a time from the terminals its
 * caller supplies. Prediction state lives per terminal and is invalidated per block by a
 * generation stamp rather than cleared. This file does not walk grammars, know event kinds
 * or own the bytes of a parsed section, and it never calls zstd directly.
 */
#include <stdlib.h>
#include <string.h>

#include "values_i.h"
#include "zstd_i.h"

#define VAL_MAGIC 0x31564654u	     /* "TFV1" little-endian */
#define VAL_MAGIC_FAMILY 0x00564654u /* "TFV" followed by any version byte */
#define VAL_HDR_LEN 36u
#define VAL_IDX_ENTRY_LEN 16u
#define VAL_RAW_HDR_MAX 40u /* four varints */
#define VAL_VARINT_MAX 10u
#define VAL_ZSTD_MAX_EXPANSION 32768u /* 4 bytes of zstd block become at most 128 KiB */
#define VAL_DEFAULT_LEVEL 3
/*
 * zstd ignores bit 4 of a frame's header descriptor (RFC 8878 §3.1.1.1.1, "unused bit"), the
 * only bit of a frame neither its parser nor its checksum looks at: refused here so that
 * every bit of a values section is checked. It belongs in zs_decompress.
 */
#define ZSTD_FHD_OFF 4
#define ZSTD_FHD_UNUSED_BIT 0x10
#define VAL_MAX_TERMINAL (UINT32_C(1) << 30)
#define NVALS_UNKNOWN 0xff

__extension__ typedef unsigned __int128 u128;

static const char section_name[] = "values";

/*
 * Prediction state of one terminal. Valid only while @gen equals the owner's current
 * generation; a stale entry reads as "not seen in this block".
 */
struct tstate {
	uint32_t gen;
	uint32_t val_slot; /* its VAL fields' first fstate in the block arena */
	uint64_t gap;	   /* last start-time gap, or signed gap bin index (LOSSY) */
	uint64_t dur;	   /* last duration, or duration bin index (LOSSY) */
	uint8_t seen;	   /* occurred before in this block (VAL stride needs two) */
	uint8_t n_vals;	   /* encoder only: VAL-field count, NVALS_UNKNOWN until first use */
};

/* Stride predictor of one VAL field: prediction = last + delta (wrapping). */
struct fstate {
	uint64_t last;
	uint64_t delta;
};

/*
 * Exponential bins of LOSSY timing (FORMAT.md §7.5). Bin k >= 1 holds [lo[k], lo[k+1]),
 * the last bin reaches UINT64_MAX; bin 0 is {0}.
 */
struct bins {
	uint64_t *lo;
	uint32_t n;
	uint32_t e_fix;	  /* rel_err as a 0.32 fixed-point fraction; 0: not built */
	uint32_t oct[65]; /* oct[p]: the bin holding 2^p; oct[64] = n - 1 */
};

/* Everything prediction needs, shared by the encoder and struct vblock's decoder. */
struct vpred {
	struct tstate *t; /* indexed by terminal */
	size_t t_cap;
	uint32_t gen;	  /* current block's generation, never 0 */
	struct fstate *f; /* arena of the current block's VAL predictors */
	size_t f_len, f_cap;
	struct bins bins;
};

struct vidx {
	uint32_t stored_len;
	uint32_t raw_len;
};

enum { COL_TS, COL_DUR, COL_VALS, N_COLS };

struct tfs_venc {
	uint32_t block_events;
	int timing;
	double rel_err;
	int level;
	struct vpred p;
	struct tfs_buf col[N_COLS]; /* residual columns of the pending block */
	uint32_t blk_n;		    /* events in the pending block */
	uint64_t prev_ts;	    /* previous (reconstructed) start time in the block */
	struct tfs_buf raw;	    /* the pending block assembled for compression */
	struct tfs_buf frames;	    /* compressed blocks, back to back */
	struct vidx *idx;
	size_t n_idx, idx_cap;
	uint64_t n_events;
	bool finished;
};

/* ---- small helpers ---- */

static inline uint64_t zz(uint64_t diff)
{
	return zigzag_enc((int64_t)diff);
}

static inline uint64_t unzz(uint64_t v)
{
	return (uint64_t)zigzag_dec(v);
}

/* Store a varint into space the caller reserved. */
static inline void put_varint(struct tfs_buf *b, uint64_t v)
{
	uint8_t *p = b->data + b->len;

	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	b->len = (size_t)(p - b->data);
}

/*
 * Grow the array whose pointer is at @pp (any object pointer type) to hold @need elements of
 * @elem bytes, doubling. On failure the array and *@cap are unchanged.
 */
static int grow(void *pp, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap : 16;
	void *p, *q;

	if (need <= *cap)
		return 0;
	while (n < need) {
		if (n > SIZE_MAX / 2 / elem)
			return -ENOMEM;
		n *= 2;
	}
	memcpy(&p, pp, sizeof(p));
	q = realloc(p, n * elem);
	if (!q)
		return -ENOMEM;
	memcpy(pp, &q, sizeof(q));
	*cap = n;
	return 0;
}

static uint32_t rel_err_fix(double rel_err)
{
	return (uint32_t)(rel_err * 4294967296.0);
}

static bool rel_err_ok(double rel_err)
{
	return rel_err >= VAL_MIN_REL_ERR && rel_err < 1.0;
}

/* ---- exponential bins ---- */

static uint64_t bin_rep_of_lo(uint64_t lo, uint32_t e_fix)
{
	u128 r = (u128)lo + (((u128)lo * e_fix) >> 32);

	return r > UINT64_MAX ? UINT64_MAX : (uint64_t)r;
}

static int bins_build(struct bins *b, uint32_t e_fix)
{
	uint64_t *lo = NULL;
	size_t cap = 0, n = 2;
	uint32_t k = 0;

	if (b->e_fix == e_fix)
		return 0;
	if (grow(&lo, &cap, 256, sizeof(*lo)) < 0)
		return -ENOMEM;
	lo[0] = 0;
	lo[1] = 1;
	for (;;) {
		uint64_t rep = bin_rep_of_lo(lo[n - 1], e_fix);
		u128 hi = ((u128)rep << 32) / ((UINT64_C(1) << 32) - e_fix);

		if (hi >= UINT64_MAX)
			break;
		if (grow(&lo, &cap, n + 1, sizeof(*lo)) < 0) {
			free(lo);
			return -ENOMEM;
		}
		lo[n++] = (uint64_t)hi + 1;
	}
	free(b->lo);
	b->lo = lo;
	b->n = (uint32_t)n;
	b->e_fix = e_fix;
	for (unsigned int p = 0; p < 64; p++) {
		while (k + 1 < n && lo[k + 1] <= UINT64_C(1) << p)
			k++;
		b->oct[p] = k;
	}
	b->oct[64] = (uint32_t)n - 1;
	return 0;
}

static uint32_t bin_of(const struct bins *b, uint64_t x)
{
	uint32_t lo, hi;
	unsigned int p;

	if (!x)
		return 0;
	p = 63 - (unsigned int)__builtin_clzll(x);
	lo = b->oct[p];
	hi = b->oct[p + 1];
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo + 1) / 2;

		if (b->lo[mid] <= x)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

static uint64_t bin_rep(const struct bins *b, uint32_t k)
{
	return k ? bin_rep_of_lo(b->lo[k], b->e_fix) : 0;
}

/* Signed bin index of a signed gap: the magnitude is binned, the sign kept. */
static int64_t sbin_of(const struct bins *b, uint64_t gap)
{
	if ((int64_t)gap >= 0)
		return bin_of(b, gap);
	return -(int64_t)bin_of(b, 0 - gap);
}

static uint64_t sbin_rep(const struct bins *b, int64_t sb)
{
	if (sb >= 0)
		return bin_rep(b, (uint32_t)sb);
	return 0 - bin_rep(b, (uint32_t)-sb);
}

/* ---- prediction state ---- */

static void pred_fini(struct vpred *p)
{
	free(p->t);
	free(p->f);
	free(p->bins.lo);
}

static int pred_reserve_terms(struct vpred *p, size_t n)
{
	size_t old = p->t_cap;

	if (grow(&p->t, &p->t_cap, n, sizeof(*p->t)) < 0)
		return -ENOMEM;
	for (size_t i = old; i < p->t_cap; i++) {
		p->t[i].gen = 0;
		p->t[i].n_vals = NVALS_UNKNOWN;
	}
	return 0;
}

static void pred_next_block(struct vpred *p)
{
	p->f_len = 0;
	if (++p->gen != 0)
		return;
	for (size_t i = 0; i < p->t_cap; i++)
		p->t[i].gen = 0;
	p->gen = 1;
}

/* First occurrence of @st in the block: fresh predictors, @n_vals arena slots claimed. */
static inline void pred_enter(struct vpred *p, struct tstate *st, uint32_t n_vals)
{
	st->gen = p->gen;
	st->seen = 0;
	st->gap = 0;
	st->dur = 0;
	st->val_slot = (uint32_t)p->f_len;
	p->f_len += n_vals;
}

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
	if (opts->timing == VAL_TIMING_LOSSY && !rel_err_ok(opts->rel_err))
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->block_events = opts->block_events ? opts->block_events : VAL_DEFAULT_BLOCK_EVENTS;
	e->timing = opts->timing;
	e->rel_err = opts->timing == VAL_TIMING_LOSSY ? opts->rel_err : 0.0;
	e->level = opts->zstd_level ? opts->zstd_level : VAL_DEFAULT_LEVEL;
	e->p.gen = 1;
	for (int c = 0; c < N_COLS; c++)
		buf_init(&e->col[c]);
	buf_init(&e->raw);
	buf_init(&e->frames);
	if (e->timing == VAL_TIMING_LOSSY && bins_build(&e->p.bins, rel_err_fix(e->rel_err)) < 0)
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
	pred_fini(&e->p);
	for (int c = 0; c < N_COLS; c++)
		buf_fini(&e->col[c]);
	buf_fini(&e->raw);
	buf_fini(&e->frames);
	free(e->idx);
	free(e);
}

uint64_t venc_n_events(const struct tfs_venc *e)
{
	return e->n_events;
}

/* Compress the pending block into one frame. On failure nothing changes. */
static int flush_block(struct tfs_venc *e)
{
	size_t need = VAL_RAW_HDR_MAX, frames_len = e->frames.len;
	int rc;

	if (!e->blk_n)
		return 0;
	for (int c = 0; c < N_COLS; c++)
		need += e->col[c].len;
	if (grow(&e->idx, &e->idx_cap, e->n_idx + 1, sizeof(*e->idx)) < 0)
		return -ENOMEM;
	e->raw.len = 0;
	rc = buf_reserve(&e->raw, need);
	if (rc < 0)
		return rc;
	put_varint(&e->raw, e->blk_n);
	for (int c = 0; c < N_COLS; c++)
		put_varint(&e->raw, e->col[c].len);
	for (int c = 0; c < N_COLS; c++) {
		if (!e->col[c].len)
			continue;
		memcpy(e->raw.data + e->raw.len, e->col[c].data, e->col[c].len);
		e->raw.len += e->col[c].len;
	}
	rc = zs_compress(&e->frames, e->raw.data, e->raw.len, e->level);
	if (rc < 0)
		return rc;
	e->idx[e->n_idx].raw_len = (uint32_t)e->raw.len;
	e->idx[e->n_idx].stored_len = (uint32_t)(e->frames.len - frames_len);
	e->n_idx++;
	for (int c = 0; c < N_COLS; c++)
		e->col[c].len = 0;
	e->blk_n = 0;
	e->prev_ts = 0;
	pred_next_block(&e->p);
	return 0;
}

static void code_times_lossless(struct tfs_venc *e, struct tstate *st, uint64_t ts_ns,
				uint64_t dur_ns)
{
	if (e->blk_n) {
		uint64_t gap = ts_ns - e->prev_ts;

		put_varint(&e->col[COL_TS], zz(gap - st->gap));
		st->gap = gap;
	} else {
		put_varint(&e->col[COL_TS], zz(ts_ns));
	}
	e->prev_ts = ts_ns;
	put_varint(&e->col[COL_DUR], zz(dur_ns - st->dur));
	st->dur = dur_ns;
}

static void code_times_lossy(struct tfs_venc *e, struct tstate *st, uint64_t ts_ns, uint64_t dur_ns)
{
	const struct bins *b = &e->p.bins;
	uint32_t dur_bin = bin_of(b, dur_ns);

	if (e->blk_n) {
		/* against the reconstructed start, so that errors do not accumulate */
		int64_t sb = sbin_of(b, ts_ns - e->prev_ts);

		put_varint(&e->col[COL_TS], zz((uint64_t)sb - st->gap));
		st->gap = (uint64_t)sb;
		e->prev_ts += sbin_rep(b, sb);
	} else {
		put_varint(&e->col[COL_TS], zz(ts_ns));
		e->prev_ts = ts_ns;
	}
	put_varint(&e->col[COL_DUR], zz(dur_bin - st->dur));
	st->dur = dur_bin;
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

	rc = pred_reserve_terms(&e->p, (size_t)terminal + 1);
	if (rc < 0)
		return rc;
	st = &e->p.t[terminal];
	if (st->n_vals != NVALS_UNKNOWN && st->n_vals != n_vals)
		return -EINVAL;
	if (st->gen != e->p.gen &&
	    grow(&e->p.f, &e->p.f_cap, e->p.f_len + n_vals, sizeof(*e->p.f)) < 0)
		return -ENOMEM;
	if (e->timing != VAL_TIMING_NONE) {
		rc = buf_reserve(&e->col[COL_TS], VAL_VARINT_MAX);
		if (rc == 0)
			rc = buf_reserve(&e->col[COL_DUR], VAL_VARINT_MAX);
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
	le_put32(h, VAL_MAGIC);
	h[4] = (uint8_t)e->timing;
	h[5] = h[6] = h[7] = 0;
	le_put32(h + 8, e->block_events);
	le_put64(h + 12, rel_bits);
	le_put64(h + 20, e->n_events);
	le_put64(h + 28, e->n_idx);
}

int venc_finish(struct tfs_venc *e, struct tfs_buf *out)
{
	uint64_t off;
	uint8_t *p;
	int rc;

	rc = flush_block(e);
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

/* ---- section header and index ---- */

/* Largest raw block of @n_events events holding @n_vals VAL fields in all. */
static uint64_t raw_len_max(uint64_t n_events, uint64_t n_vals)
{
	return VAL_RAW_HDR_MAX + 2 * VAL_VARINT_MAX * n_events + VAL_VARINT_MAX * n_vals;
}

/* Smallest raw block of @n_events events: one byte per varint. */
static uint64_t raw_len_min(int timing, uint64_t n_events, uint64_t n_vals)
{
	return 4 + (timing == VAL_TIMING_NONE ? 0 : 2 * n_events) + n_vals;
}

static int check_header(struct tfs_vsec *s, const uint8_t *h, uint64_t base_off,
			struct tfs_diag *diag)
{
	uint32_t magic = le_get32(h);
	uint64_t rel_bits = le_get64(h + 12), want_blocks;

	if (magic != VAL_MAGIC) {
		if ((magic & 0xffffff) == VAL_MAGIC_FAMILY)
			return diag_set(diag, -TFS_EFORMAT, base_off, section_name,
					"unsupported values section version 0x%02x", h[3]);
		return diag_set(diag, -TFS_ECORRUPT, base_off, section_name, "bad magic 0x%08x",
				magic);
	}
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
	if (s->timing == VAL_TIMING_LOSSY ? !rel_err_ok(s->rel_err) : rel_bits != 0)
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
		if (raw < raw_len_min(s->timing, n, 0) ||
		    raw > raw_len_max(n, (uint64_t)VAL_MAX_FIELDS * n) ||
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
	if (b->pred) {
		pred_fini(b->pred);
		free(b->pred);
	}
	vblock_init(b);
}

/* A column of the raw block being decoded. */
struct col {
	const uint8_t *p, *end;
	const char *name;
};

/* What a block decode needs to report corruption and find its state. */
struct dblock {
	const struct tfs_vsec *s;
	uint64_t idx;
	uint64_t file_off; /* of the block's frame */
	uint32_t n;	   /* events in the block */
	const uint8_t *raw;
	const uint32_t *terms;
	struct vblock *out;
	struct vpred *p;
	struct tfs_diag *diag;
};

static int block_fail(const struct dblock *d, const char *what, const struct col *c)
{
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

static int decode_lossless(const struct dblock *d, struct col *ts_col, struct col *dur_col)
{
	struct col tc = *ts_col, dc = *dur_col;
	struct tstate *t = d->p->t;
	uint64_t *ts_ns = d->out->ts_ns, *dur_ns = d->out->dur_ns;
	uint64_t prev = 0, res;

	for (uint32_t i = 0; i < d->n; i++) {
		struct tstate *st = &t[d->terms[i]];

		if (col_varint(&tc, &res))
			return block_fail(d, "bad varint", &tc);
		if (i) {
			st->gap += unzz(res);
			prev += st->gap;
		} else {
			prev = unzz(res);
		}
		ts_ns[i] = prev;
		if (col_varint(&dc, &res))
			return block_fail(d, "bad varint", &dc);
		st->dur += unzz(res);
		dur_ns[i] = st->dur;
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
	uint64_t prev = 0, res;

	for (uint32_t i = 0; i < d->n; i++) {
		struct tstate *st = &t[d->terms[i]];

		if (col_varint(&tc, &res))
			return block_fail(d, "bad varint", &tc);
		if (i) {
			int64_t sb = (int64_t)(st->gap + unzz(res));

			if (sb <= -n_bins || sb >= n_bins)
				return block_fail(d, "gap bin out of range", &tc);
			st->gap = (uint64_t)sb;
			prev += sbin_rep(b, sb);
		} else {
			prev = unzz(res);
		}
		ts_ns[i] = prev;
		if (col_varint(&dc, &res))
			return block_fail(d, "bad varint", &dc);
		st->dur += unzz(res);
		if (st->dur >= (uint64_t)n_bins)
			return block_fail(d, "duration bin out of range", &dc);
		dur_ns[i] = bin_rep(b, (uint32_t)st->dur);
	}
	*ts_col = tc;
	*dur_col = dc;
	return 0;
}

static int decode_vals(const struct dblock *d, struct col *vals_col)
{
	const uint32_t *val_off = d->out->val_off;
	struct fstate *f0 = d->p->f;
	struct tstate *t = d->p->t;
	uint64_t *vals = d->out->vals;
	struct col c = *vals_col;
	uint64_t res;

	for (uint32_t i = 0; i < d->n; i++) {
		struct tstate *st = &t[d->terms[i]];
		uint32_t n = val_off[i + 1] - val_off[i];
		const bool seen = st->seen;
		struct fstate *f;
		uint64_t *v;

		st->seen = 1;
		if (!n)
			continue;
		f = f0 + st->val_slot;
		v = vals + val_off[i];
		for (uint32_t j = 0; j < n; j++) {
			uint64_t last = f[j].last, x;

			if (col_varint(&c, &res))
				return block_fail(d, "bad varint", &c);
			x = last + f[j].delta + unzz(res);
			f[j].delta = seen ? x - last : 0;
			f[j].last = x;
			v[j] = x;
		}
	}
	*vals_col = c;
	return 0;
}

static int reserve_block(struct vblock *b, const struct tfs_vsec *s, uint32_t n,
			 uint32_t n_terminals)
{
	struct vpred *p = b->pred;
	void *q;

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return -ENOMEM;
		b->pred = p;
	}
	if (pred_reserve_terms(p, n_terminals) < 0)
		return -ENOMEM;
	b->pred_cap = p->t_cap;
	if (s->timing == VAL_TIMING_LOSSY && bins_build(&p->bins, rel_err_fix(s->rel_err)) < 0)
		return -ENOMEM;
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
	b->cap_events = n;
	return 0;
}

static int reserve_contents(struct vblock *b, size_t n_vals, size_t raw_len)
{
	struct vpred *p = b->pred;

	if (grow(&b->vals, &b->cap_vals, n_vals, sizeof(*b->vals)) < 0 ||
	    grow(&b->raw, &b->raw_cap, raw_len, 1) < 0 ||
	    grow(&p->f, &p->f_cap, p->f_len, sizeof(*p->f)) < 0)
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
	struct vpred *p = d->p;

	for (uint32_t i = 0; i < d->n; i++) {
		uint32_t t = d->terms[i];
		struct tstate *st;

		if (t >= n_terminals)
			return diag_set(d->diag, -TFS_ECORRUPT, d->file_off, section_name,
					"block %llu: event %u has terminal %u of %u",
					(unsigned long long)d->idx, i, t, n_terminals);
		if (n_vals_of[t] > VAL_MAX_FIELDS)
			return diag_set(d->diag, -TFS_ECORRUPT, d->file_off, section_name,
					"terminal %u has %u VAL fields", t, n_vals_of[t]);
		val_off[i] = total;
		total += n_vals_of[t];
		st = &p->t[t];
		if (st->gen != p->gen)
			pred_enter(p, st, n_vals_of[t]);
	}
	val_off[d->n] = total;
	*n_vals = total;
	return 0;
}

static int parse_columns(const struct dblock *d, uint32_t raw_len, struct col cols[N_COLS])
{
	static const char *const names[N_COLS] = {"ts", "dur", "vals"};
	struct col hdr = {d->raw, d->raw + raw_len, "header"};
	uint64_t n, len[N_COLS];
	const uint8_t *p;

	if (col_varint(&hdr, &n))
		return block_fail(d, "bad varint", &hdr);
	if (n != d->n)
		return diag_set(d->diag, -TFS_ECORRUPT, d->file_off, section_name,
				"block %llu holds %llu events, expected %u",
				(unsigned long long)d->idx, (unsigned long long)n, d->n);
	for (int c = 0; c < N_COLS; c++)
		if (col_varint(&hdr, &len[c]))
			return block_fail(d, "bad varint", &hdr);
	p = hdr.p;
	for (int c = 0; c < N_COLS; c++) {
		if (len[c] > (uint64_t)(hdr.end - p))
			return block_fail(d, "column length overruns the block", &hdr);
		cols[c].p = p;
		cols[c].end = p + len[c];
		cols[c].name = names[c];
		p += len[c];
	}
	if (p != hdr.end)
		return block_fail(d, "bytes after the last column", &hdr);
	if (d->s->timing == VAL_TIMING_NONE && (len[COL_TS] || len[COL_DUR]))
		return block_fail(d, "timing bytes in an untimed section", &hdr);
	return 0;
}

static int decode_columns(const struct dblock *d, struct col cols[N_COLS])
{
	int rc = 0;

	if (d->s->timing == VAL_TIMING_LOSSLESS)
		rc = decode_lossless(d, &cols[COL_TS], &cols[COL_DUR]);
	else if (d->s->timing == VAL_TIMING_LOSSY)
		rc = decode_lossy(d, &cols[COL_TS], &cols[COL_DUR]);
	if (rc < 0)
		return rc;
	rc = decode_vals(d, &cols[COL_VALS]);
	if (rc < 0)
		return rc;
	for (int c = 0; c < N_COLS; c++)
		if (cols[c].p != cols[c].end)
			return block_fail(d, "unread bytes", &cols[c]);
	return 0;
}

int vsec_decode_block(const struct tfs_vsec *s, uint64_t idx, const uint32_t *terms,
		      const uint8_t *n_vals_of, uint32_t n_terminals, struct vblock *out,
		      struct tfs_diag *diag)
{
	struct dblock d = {.s = s, .idx = idx, .terms = terms, .out = out, .diag = diag};
	struct col cols[N_COLS];
	const uint8_t *ent, *frame;
	uint32_t stored_len, raw_len, n_vals = 0;
	int rc;

	out->n_events = 0;
	if (idx >= s->n_blocks)
		return -EINVAL;
	ent = s->index + idx * VAL_IDX_ENTRY_LEN;
	frame = s->data + le_get64(ent);
	d.file_off = s->base_off + le_get64(ent);
	stored_len = le_get32(ent + 8);
	raw_len = le_get32(ent + 12);
	d.n = vsec_block_len(s, idx);
	rc = reserve_block(out, s, d.n, n_terminals);
	if (rc < 0)
		return rc;
	d.p = out->pred;
	pred_next_block(d.p);
	rc = scan_terms(&d, n_vals_of, n_terminals, &n_vals);
	if (rc < 0)
		return rc;
	if (raw_len < raw_len_min(s->timing, d.n, n_vals) || raw_len > raw_len_max(d.n, n_vals))
		return diag_set(diag, -TFS_ECORRUPT, d.file_off, section_name,
				"block %llu: raw length %u impossible for %u events, %u fields",
				(unsigned long long)idx, raw_len, d.n, n_vals);
	rc = reserve_contents(out, n_vals, raw_len);
	if (rc < 0)
		return rc;
	rc = zs_decompress(frame, stored_len, out->raw, raw_len, d.file_off, section_name, diag);
	if (rc < 0)
		return rc;
	d.raw = out->raw;
	rc = parse_columns(&d, raw_len, cols);
	if (rc < 0)
		return rc;
	rc = decode_columns(&d, cols);
	if (rc < 0)
		return rc;
	if (s->timing == VAL_TIMING_NONE) {
		memset(out->ts_ns, 0, d.n * sizeof(*out->ts_ns));
		memset(out->dur_ns, 0, d.n * sizeof(*out->dur_ns));
	}
	out->first_event = idx * s->block_events;
	out->n_events = d.n;
	return 0;
}
