/*
 * The values encoder (FORMAT.md §7): turns each event's start time, duration and VAL fields
 * into prediction residuals, writes them column by column into a raw block, compresses every
 * full block into one zstd frame and finally writes the header and block index. Each timing
 * column is coded both with and without its per-terminal predictor; when the block is full
 * the one that compresses smaller is kept. VAL fields of a value class (TFV4) get a tag:
 * stride hit, history hit or the smaller of two residuals (FORMAT.md §7.3.1), and a
 * residual in the class column, 0 for a hit. It does not know event kinds and never calls
 * zstd directly.
 */
#include <stdlib.h>
#include <string.h>

#include "vticks_i.h"
#include "vpred_i.h"
#include "zstd_i.h"

/* Blocks without ticks before a stream estimates its clock's tick again. */
#define VAL_TICK_RETRY 15
/* What tune_tick() searches: events of the block, candidates each side per round. */
#define VAL_TICK_TUNE_EVENTS 256
#define VAL_TICK_TUNE_STEPS 6
#define VAL_TICK_GUESSES 3 /* ticks tried per estimate */
#define VAL_TICK_SURE 8	   /* corrections of at most 1/8 of the steps: ticks, untried */

/*
 * Choices of a dur column after which, its coded variant having lost every one, a block's
 * durations are range-coded only every VAL_DUR_RETRY-th choice: over malloc/free, python,
 * sqlite and gcc a coded dur column won 3 choices in 3,300, at twice the cost of the ts
 * column's coding, which wins most of them.
 */
#define VAL_DUR_GIVE_UP 8
#define VAL_DUR_RETRY 16


/* The last choice of one column in one pass (nanoseconds or ticks), for VAL_STICKY. */
struct choice {
	uint8_t k;	 /* the candidate picked */
	bool coded;	 /* range-coded */
	uint16_t streak; /* choices in a row that picked the same */
	uint32_t n;	 /* choices made */
};

/* Timing column candidates: the ts column's gaps from the end or the start, predicted or not. */
enum { TS_END_PRED, TS_END_RAW, TS_START_PRED, TS_START_RAW, N_TS_CAND };

/*
 * Where each value of one class's history was last coded in the pending block (TFV4): an
 * open-addressing table of the values still in the class's ring (at most VAL_HIST_RING, so
 * at most half full), which finds every history hit of FORMAT.md §7.3.1's writer rule.
 */
#define VAL_MAP_SIZE (2 * VAL_HIST_RING)

struct vmap_slot {
	uint64_t value;
	uint32_t pos;  /* the value's latest number in the class */
	uint32_t used;
};

struct vmap {
	uint32_t gen; /* the block it is for: struct vpred's gen */
	struct vmap_slot s[VAL_MAP_SIZE];
};

/* Timing prediction state of one terminal in the coding pass over a block (FORMAT.md §7.4). */
struct ttime {
	uint32_t gen;	    /* valid while equal to the encoder's tt_gen */
	uint64_t gap;	    /* last gap from the previous end (lossy: the signed bin) */
	uint64_t gap_start; /* last gap from the previous start (lossy: the signed bin) */
	uint64_t dur;	    /* last duration (lossy: its bin) */
};

struct tfs_venc {
	uint32_t block_events;
	int timing;
	double rel_err;
	int level;
	int final_level;   /* recompress at finish when above level; 0 once done */
	int version;	   /* 1, 2 or 3 */
	unsigned int pred; /* venc_opts.pred */
	bool from_start;   /* gaps from the previous start: TFV1, or VAL_GAP_START */
	bool auto_base;	   /* lossless TFV2: each block takes the better of both bases */
	bool ticks;	   /* lossless TFV3: blocks count ticks where a lattice fits */
	int coding;	   /* TFV3 timed: venc_opts.coded, else VAL_CODED_NEVER */
	struct vrc_model rc; /* coded columns' context sets (FORMAT.md §7.4.2) */
	struct vpred p;	   /* VAL fields' prediction (timing has its own, below) */
	struct tfs_buf vals; /* the pending block's vals column */
	struct tfs_buf tags; /* the pending block's tags column (TFV4) */
	struct tfs_buf cls_col; /* the pending block's class column (TFV4) */
	struct vmap *maps; /* [maps_cap] TFV4: by class, where its values were last coded */
	size_t maps_cap;
	/* the pending block's times, coded when it is full: */
	uint64_t *ts, *dur;
	uint32_t *term;
	uint8_t *slot; /* each event's context set for coded columns */
	size_t ev_cap;
	uint32_t blk_n; /* events in the pending block */
	struct ttime *tt;
	size_t tt_cap;
	uint32_t tt_gen;
	struct tfs_buf ts_col[N_TS_CAND], dur_col[2]; /* [1]: unpredicted */
	struct tfs_buf ticks_hdr; /* the pending block's ticks header, or empty */
	struct tfs_buf corr;	  /* the ticks pass's corrections (FORMAT.md §7.2) */
	uint32_t n_corr;
	uint64_t tick_q;	  /* the stream's tick (2^-32 ns) once estimated, or 0 */
	uint32_t tick_wait;	  /* blocks before estimating again after a failure */
	int64_t *scratch;	  /* [2 ev_cap] for vtick_estimate */
	struct tfs_buf raw;	  /* the pending block assembled for compression */
	struct tfs_buf trial;	  /* scratch of choose_pred's trial compressions */
	struct tfs_buf aside[4];  /* the ticks pass's ts, dur and coded columns while
				     code_times() tries nanoseconds */
	struct tfs_buf coded[2];  /* the pending block's coded ts and dur columns */
	const struct tfs_buf *coded_of[2]; /* the candidate column coded[c] codes, or NULL */
	uint32_t dur_lost;	  /* dur column choices since its coded variant last won */
	uint8_t lead[2];	  /* per column: the candidate (from the first) whose coded
				     variant won last, coded first next time; 0xff: the last */
	struct tfs_buf cbuf[N_TS_CAND]; /* smallest()'s coded candidates */
	struct choice won[2][2];  /* [ticks][column]: the last choices, for VAL_STICKY */
	struct tfs_buf frames;	  /* compressed blocks, back to back */
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
	if (opts->ticks != 0 && opts->ticks != VAL_TICKS_NEVER)
		return -EINVAL;
	if (opts->coded != 0 && opts->coded != VAL_CODED_NEVER && opts->coded != VAL_CODED_ALWAYS)
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
	e->ticks = e->version >= 3 && e->timing == VAL_TIMING_LOSSLESS &&
		   opts->ticks != VAL_TICKS_NEVER;
	e->coding = e->version >= 3 && e->timing != VAL_TIMING_NONE ? opts->coded : VAL_CODED_NEVER;
	if (e->coding != VAL_CODED_NEVER &&
	    vrc_model_init(&e->rc, e->version >= 5 ? VRC_WORDS_2 : VRC_WORDS_1) < 0) {
		free(e);
		return -ENOMEM;
	}
	e->p.gen = 1;
	buf_init(&e->vals);
	buf_init(&e->tags);
	buf_init(&e->cls_col);
	for (int k = 0; k < N_TS_CAND; k++)
		buf_init(&e->ts_col[k]);
	for (int k = 0; k < 2; k++)
		buf_init(&e->dur_col[k]);
	buf_init(&e->ticks_hdr);
	buf_init(&e->corr);
	buf_init(&e->raw);
	buf_init(&e->trial);
	for (int k = 0; k < N_TS_CAND; k++)
		buf_init(&e->cbuf[k]);
	e->lead[0] = e->lead[1] = 0xff;
	for (int k = 0; k < 4; k++)
		buf_init(&e->aside[k]);
	buf_init(&e->coded[0]);
	buf_init(&e->coded[1]);
	buf_init(&e->frames);
	if (e->timing == VAL_TIMING_LOSSY && vp_bins_build(&e->p.bins, vp_rel_err_fix(e->rel_err)) < 0)
		goto err_free_enc;
	*out = e;
	return 0;

err_free_enc:
	vrc_model_fini(&e->rc);
	free(e);
	return -ENOMEM;
}

static void free_event_arrays(struct tfs_venc *e)
{
	free(e->ts);
	free(e->dur);
	free(e->term);
	free(e->slot);
	free(e->scratch);
}

void venc_free(struct tfs_venc *e)
{
	if (!e)
		return;
	vp_pred_fini(&e->p);
	buf_fini(&e->vals);
	buf_fini(&e->tags);
	buf_fini(&e->cls_col);
	free(e->maps);
	for (int k = 0; k < N_TS_CAND; k++)
		buf_fini(&e->ts_col[k]);
	for (int k = 0; k < 2; k++)
		buf_fini(&e->dur_col[k]);
	buf_fini(&e->ticks_hdr);
	buf_fini(&e->corr);
	buf_fini(&e->raw);
	buf_fini(&e->trial);
	for (int k = 0; k < N_TS_CAND; k++)
		buf_fini(&e->cbuf[k]);
	for (int k = 0; k < 4; k++)
		buf_fini(&e->aside[k]);
	buf_fini(&e->coded[0]);
	buf_fini(&e->coded[1]);
	buf_fini(&e->frames);
	vrc_model_fini(&e->rc);
	free_event_arrays(e);
	free(e->tt);
	free(e->idx);
	free(e);
}

uint64_t venc_n_events(const struct tfs_venc *e)
{
	return e->n_events;
}

static void swap_buf(struct tfs_buf *a, struct tfs_buf *b)
{
	const struct tfs_buf t = *a;

	*a = *b;
	*b = t;
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
 * Range-code the pending block's timing column @col into @out (emptied first), unless it
 * takes more than @max_len bytes.
 * @return whether a reader takes it: not longer than the column's varints (FORMAT.md
 * §7.6) nor than @max_len; or -ENOMEM
 */
static int code_column(struct tfs_venc *e, const struct tfs_buf *col, size_t max_len,
		       struct tfs_buf *out)
{
	out->len = 0;
	return vrc_encode_max(&e->rc, e->slot, e->blk_n, col->data,
			      max_len < col->len ? max_len : col->len, out);
}

/* Whether candidate @cand[@k] holds the same bytes as one before it from @first. */
static bool repeats(const struct tfs_buf *cand, int first, int k)
{
	for (int j = first; j < k; j++)
		if (cand[j].len == cand[k].len && !memcmp(cand[j].data, cand[k].data, cand[k].len))
			return true;
	return false;
}

/* Candidate columns' sizes for smallest(). */
struct cands {
	int first, n;
	size_t z[N_TS_CAND];	/* trial size; SIZE_MAX for a repeat */
	bool dup[N_TS_CAND];	/* holds the same bytes as an earlier candidate */
	bool fits[N_TS_CAND];	/* range-coded, within its bound, in e->cbuf */
};

/* Trial sizes of the candidates @cand[cs->first..], repeats marked. @return 0 or -ENOMEM */
static int trial_sizes(struct tfs_venc *e, const struct tfs_buf *cand, struct cands *cs)
{
	for (int k = cs->first; k < cs->first + cs->n; k++) {
		int rc = 0;

		cs->dup[k] = repeats(cand, cs->first, k);
		cs->z[k] = SIZE_MAX;
		cs->fits[k] = false;
		if (!cs->dup[k])
			rc = trial_size(&cand[k], &e->trial, &cs->z[k]);
		if (rc < 0)
			return rc;
		if (!cs->dup[k] && e->coding == VAL_CODED_ALWAYS)
			cs->z[k] = SIZE_MAX - 1;
	}
	return 0;
}

/*
 * The longest coded candidate @k could be and still be picked (smallest(): the first of
 * equals in the order z, then coded, candidate by candidate), from the sizes known: below
 * every one before it, not above any after it, below @limit, not above its varints.
 */
static size_t coded_max(const struct tfs_venc *e, const struct cands *cs,
			const struct tfs_buf *cand, int k, size_t limit)
{
	size_t before = SIZE_MAX, after = SIZE_MAX, max;

	for (int j = cs->first; j < cs->first + cs->n; j++) {
		const size_t c = cs->fits[j] ? e->cbuf[j].len : SIZE_MAX;

		if (cs->dup[j])
			continue;
		if (j <= k && cs->z[j] < before)
			before = cs->z[j];
		if (j > k && cs->z[j] < after)
			after = cs->z[j];
		if (j < k && c < before)
			before = c;
		if (j > k && c < after)
			after = c;
	}
	if (before == 0 || limit == 0)
		return 0;
	max = after < before - 1 ? after : before - 1;
	max = max < limit - 1 ? max : limit - 1;
	return max < cand[k].len ? max : cand[k].len;
}

/*
 * Range-code the candidates into e->cbuf, each bounded by coded_max(), the one that won
 * last first: the others race its marks (vrc_encode_marked()), as far as it went even when
 * it turned out too long. @return 0 or -ENOMEM
 */
static int code_cands(struct tfs_venc *e, const struct tfs_buf *cand, int c, size_t limit,
		      struct cands *cs)
{
	const int lead = e->lead[c] < cs->n ? cs->first + e->lead[c] : cs->first + cs->n - 1;
	uint32_t marks[VRC_MARKS];
	bool raced = false;

	for (int i = -1; i < cs->n; i++) {
		const int k = i < 0 ? lead : cs->first + i;
		int rc;

		if ((i >= 0 && k == lead) || cs->dup[k])
			continue;
		e->cbuf[k].len = 0;
		rc = vrc_encode_marked(&e->rc, e->slot, e->blk_n, cand[k].data,
				       coded_max(e, cs, cand, k, limit), k == lead ? marks : NULL,
				       raced ? marks : NULL, &e->cbuf[k]);
		if (rc < 0)
			return rc;
		cs->fits[k] = rc;
		raced = raced || k == lead;
	}
	return 0;
}

/*
 * Which of the candidate columns @cand[@first..@first + @n) compresses smallest (the first
 * of equals), with zstd or, where the encoder may, range-coded (then *@coded is set).
 * Order-0 entropy or summed varint lengths miss what zstd's matches find in unpredicted
 * values that repeat (a periodic ring's bins), so each candidate is compressed fast and
 * measured; a coded column's size is exact where it is picked. Sizes from @limit on are of
 * no use to the caller: with one as smallest, *@best_size and the pick only say so.
 * Range coding costs most: every trial size is known first, a candidate equal to an
 * earlier one is skipped, the others stop as soon as they cannot be picked or fall well
 * behind the one that won last. Durations that lost VAL_DUR_GIVE_UP times are coded only
 * now and then. @return its index, or -ENOMEM
 */
static int smallest(struct tfs_venc *e, const struct tfs_buf *cand, int first, int n,
		    bool ticks, size_t limit, size_t *best_size, bool *coded)
{
	const int c = cand == e->ts_col ? COL_TS : COL_DUR;
	struct choice *w = &e->won[ticks][c];
	struct cands cs = {.first = first, .n = n};
	bool code = e->coding != VAL_CODED_NEVER, stick;
	size_t best = SIZE_MAX;
	int pick = first, rc;

	if (c == COL_DUR && e->coding != VAL_CODED_ALWAYS && e->dur_lost >= VAL_DUR_GIVE_UP)
		code = code && (e->dur_lost - VAL_DUR_GIVE_UP) % VAL_DUR_RETRY == VAL_DUR_RETRY - 1;
	*coded = false;
	if (first < 0 || n < 1 || first + n > N_TS_CAND)
		return -EINVAL; /* never: what choose_pred() passes */
	/* (durations given up on coding keep their own schedule of retries) */
	stick = w->streak >= VAL_STICKY && w->n % VAL_STICKY_RECHECK && w->k >= first &&
		w->k < first + n && (code || !w->coded) &&
		!(c == COL_DUR && e->dur_lost >= VAL_DUR_GIVE_UP);
	w->n++;
	if (stick) {
		/* the one kept, only as it was picked: coded, or by its trial size */
		cs.first = w->k;
		cs.n = 1;
		cs.dup[w->k] = false;
		cs.z[w->k] = SIZE_MAX;
		cs.fits[w->k] = false;
		rc = w->coded ? code_cands(e, cand, c, limit, &cs) : trial_sizes(e, cand, &cs);
		if (rc < 0)
			return rc;
		if (!cs.fits[w->k] && cs.z[w->k] == SIZE_MAX) {
			stick = false; /* it no longer fits: every candidate again */
			cs.first = first;
			cs.n = n;
		}
	}
	if (!stick) {
		rc = trial_sizes(e, cand, &cs);
		if (rc == 0 && code)
			rc = code_cands(e, cand, c, limit, &cs);
		if (rc < 0)
			return rc;
	}
	for (int k = cs.first; k < cs.first + cs.n; k++) {
		if (cs.dup[k])
			continue; /* its sizes are the earlier one's: never smaller */
		if (cs.z[k] < best) {
			best = cs.z[k];
			pick = k;
			*coded = false;
		}
		if (cs.fits[k] && e->cbuf[k].len < best) {
			best = e->cbuf[k].len;
			pick = k;
			*coded = true;
		}
	}
	if (*coded) {
		/* kept for flush_block(), which would code it again */
		swap_buf(&e->coded[c], &e->cbuf[pick]);
		e->coded_of[c] = &cand[pick];
		e->lead[c] = (uint8_t)(pick - first);
	}
	if (c == COL_DUR)
		e->dur_lost = *coded ? 0 : e->dur_lost + 1;
	if (!stick) {
		w->streak = pick == w->k && *coded == w->coded && w->streak < UINT16_MAX
				    ? w->streak + 1 : 0;
		w->k = (uint8_t)pick;
		w->coded = *coded;
	}
	*best_size = best;
	return pick;
}

/*
 * FORMAT.md §7.2 predictor byte of the pending block's columns (without VAL_TICKS; in
 * ticks, @ticks, gaps are from the encoder's base), in *@ts_k and *@dur_k the candidate
 * columns it describes, in *@size their trial size. Sizes from @limit on are of no use to
 * the caller: then *@size only says so. @return the byte, or -ENOMEM
 */
static int choose_pred(struct tfs_venc *e, bool ticks, size_t limit, int *ts_k, int *dur_k,
		       size_t *size)
{
	const int base = e->from_start ? TS_START_PRED : TS_END_PRED;
	size_t ts_size = 0, dur_size = 0;
	bool ts_coded = false, dur_coded = false;
	int t, d = 0;

	*ts_k = TS_START_PRED;
	*dur_k = 0;
	*size = 0;
	if (e->version < 2)
		return VAL_PRED_ALL; /* and from the start: TFV1 has no predictor byte */
	if (e->timing == VAL_TIMING_NONE)
		return 0;
	if (e->pred & VAL_PRED_FIXED) {
		t = base + (e->pred & VAL_PRED_TS ? 0 : 1);
		d = e->pred & VAL_PRED_DUR ? 0 : 1;
		t = smallest(e, e->ts_col, t, 1, ticks, limit, &ts_size, &ts_coded);
	} else {
		t = e->auto_base && !ticks
			    ? smallest(e, e->ts_col, 0, N_TS_CAND, ticks, limit, &ts_size,
				       &ts_coded)
			    : smallest(e, e->ts_col, base, 2, ticks, limit, &ts_size, &ts_coded);
	}
	/* what the durations may take for the sum to stay below @limit */
	limit = limit > ts_size ? limit - ts_size : 0;
	if (t >= 0)
		d = smallest(e, e->dur_col, d, e->pred & VAL_PRED_FIXED ? 1 : 2, ticks, limit,
			     &dur_size, &dur_coded);
	if (t < 0 || d < 0)
		return -ENOMEM;
	*ts_k = t;
	*dur_k = d;
	*size = ts_size + dur_size;
	return (t % 2 ? 0 : VAL_PRED_TS) | (t >= TS_START_PRED ? VAL_GAP_START : 0) |
	       (d ? 0 : VAL_PRED_DUR) | (ts_coded ? VAL_CODED_TS : 0) |
	       (dur_coded ? VAL_CODED_DUR : 0);
}

/* A fresh timing pass: every terminal's state reads as unseen. */
static void tt_next_pass(struct tfs_venc *e)
{
	if (++e->tt_gen == 0) {
		for (size_t t = 0; t < e->tt_cap; t++)
			e->tt[t].gen = 0;
		e->tt_gen = 1;
	}
}

static struct ttime *tt_of(struct tfs_venc *e, uint32_t terminal)
{
	struct ttime *st = &e->tt[terminal];

	if (st->gen != e->tt_gen) {
		st->gen = e->tt_gen;
		st->gap = st->gap_start = st->dur = 0;
	}
	return st;
}

/* One timing residual @x predicted by @pred into @col[0], unpredicted into @col[1]. */
static inline void put_pair(struct tfs_buf *col, uint64_t x, uint64_t pred)
{
	put_varint(&col[0], zz(x - pred));
	put_varint(&col[1], zz(x));
}

/*
 * Code the pending block's lossless times into every candidate column: starts @s and
 * durations @d in nanoseconds, or in ticks from the anchor (then s[0] = 0); the anchor
 * @ts0 is always nanoseconds (FORMAT.md §7.4, §7.4.1).
 */
static void pass_lossless(struct tfs_venc *e, const uint64_t *s, const uint64_t *d, uint64_t ts0)
{
	uint64_t end = 0, start = 0;

	tt_next_pass(e);
	for (uint32_t i = 0; i < e->blk_n; i++) {
		struct ttime *st = tt_of(e, e->term[i]);

		if (i) {
			uint64_t g = s[i] - end, gs = s[i] - start;

			put_pair(&e->ts_col[TS_END_PRED], g, st->gap);
			put_pair(&e->ts_col[TS_START_PRED], gs, st->gap_start);
			st->gap = g;
			st->gap_start = gs;
		} else {
			put_pair(&e->ts_col[TS_END_PRED], ts0, 0);
			put_pair(&e->ts_col[TS_START_PRED], ts0, 0);
		}
		put_pair(e->dur_col, d[i], st->dur);
		st->dur = d[i];
		end = s[i] + d[i];
		start = s[i];
	}
}

/* Code the pending block's times binned (FORMAT.md §7.4), gaps from the encoder's base. */
static void pass_lossy(struct tfs_venc *e)
{
	const struct bins *b = &e->p.bins;
	struct tfs_buf *col = &e->ts_col[e->from_start ? TS_START_PRED : TS_END_PRED];
	uint64_t base = 0;

	tt_next_pass(e);
	for (uint32_t i = 0; i < e->blk_n; i++) {
		struct ttime *st = tt_of(e, e->term[i]);
		const uint64_t ts = e->ts[i];
		const uint32_t dur_bin = vp_bin_of(b, e->dur[i]);
		uint64_t ts_rec;

		if (i) {
			/* against the reconstructed base, so that errors do not accumulate */
			int64_t sb = vp_sbin_of(b, ts - base);

			/* a step back to a start near 0 must not round to below 0 (§7.4) */
			if (sb < 0 && ts <= base && vp_bin_rep(b, (uint32_t)-sb) > base)
				sb++;
			put_pair(col, (uint64_t)sb, st->gap);
			st->gap = (uint64_t)sb;
			ts_rec = base + vp_sbin_rep(b, sb);
		} else {
			put_pair(col, ts, 0);
			ts_rec = ts;
		}
		put_pair(e->dur_col, dur_bin, st->dur);
		st->dur = dur_bin;
		base = e->from_start ? ts_rec : ts_rec + vp_bin_rep(b, dur_bin);
	}
}

/*
 * One step of a ticks block (FORMAT.md §7.4.1) from time @from with phase @ph to time @to,
 * step index @idx: its correction, if any, goes to e->corr. @return its tick count
 */
static uint64_t tick_step(struct tfs_venc *e, uint64_t q, struct vphase *ph, uint64_t from,
			  uint64_t to, uint64_t idx, uint64_t *prev_idx)
{
	uint64_t k;
	const int64_t c = vtick_step(q, ph, (int64_t)(to - from), &k);

	if (c) {
		put_varint(&e->corr, idx - *prev_idx - 1);
		put_varint(&e->corr, zz((uint64_t)c));
		*prev_idx = idx;
		e->n_corr++;
	}
	return k;
}

/* Code the pending block's lossless times in ticks of @q, gaps from the encoder's base. */
static void pass_ticks(struct tfs_venc *e, uint64_t q)
{
	struct tfs_buf *ts_col = &e->ts_col[e->from_start ? TS_START_PRED : TS_END_PRED];
	struct vphase ph_start = VPHASE_UNKNOWN, ph_end = VPHASE_UNKNOWN;
	uint64_t prev_idx = 0;

	tt_next_pass(e);
	e->corr.len = 0;
	e->n_corr = 0;
	for (uint32_t i = 0; i < e->blk_n; i++) {
		struct ttime *st = tt_of(e, e->term[i]);
		uint64_t k;

		if (i) {
			struct vphase ph = e->from_start ? ph_start : ph_end;
			uint64_t from = e->ts[i - 1] + (e->from_start ? 0 : e->dur[i - 1]);

			k = tick_step(e, q, &ph, from, e->ts[i], 2 * (uint64_t)i, &prev_idx);
			put_pair(ts_col, k, st->gap);
			st->gap = k;
			ph_start = ph;
		} else {
			put_pair(ts_col, e->ts[0], 0);
			ph_start = VPHASE_UNKNOWN;
		}
		ph_end = ph_start;
		k = tick_step(e, q, &ph_end, e->ts[i], e->ts[i] + e->dur[i], 2 * (uint64_t)i + 1,
			      &prev_idx);
		put_pair(e->dur_col, k, st->dur);
		st->dur = k;
	}
}

/* Whether a step from @from to @to by ticks of @q needs a correction; learns the phase. */
static bool step_misses(uint64_t q, struct vphase *ph, uint64_t from, uint64_t to)
{
	uint64_t k;

	return vtick_step(q, ph, (int64_t)(to - from), &k) != 0;
}

/* Corrections ticks of @q need in the pending block's first @n events, gaps from the end. */
static uint32_t count_corrections(const struct tfs_venc *e, uint64_t q, uint32_t n)
{
	struct vphase ph = VPHASE_UNKNOWN;
	uint32_t misses = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct vphase start = i ? ph : VPHASE_UNKNOWN;

		if (i)
			misses += step_misses(q, &start, e->ts[i - 1] + e->dur[i - 1], e->ts[i]);
		ph = start;
		misses += step_misses(q, &ph, e->ts[i], e->ts[i] + e->dur[i]);
	}
	return misses;
}

/*
 * The tick near @q that needs the fewest corrections in the pending block, *@fits whether
 * they are at most half its steps: an estimate
 * from steps between neighbouring times is off by up to a few parts in 10^5, which long
 * steps (a call blocked for milliseconds) multiply into misses. Searched in two rounds of
 * relative steps 2e-6 and 2.5e-7 over the block's first VAL_TICK_TUNE_EVENTS events.
 */
static uint64_t tune_tick(const struct tfs_venc *e, uint64_t q, bool *fits)
{
	const uint32_t n = e->blk_n < VAL_TICK_TUNE_EVENTS ? e->blk_n : VAL_TICK_TUNE_EVENTS;
	uint32_t best_misses = count_corrections(e, q, n);
	uint64_t best = q;
	double step = 2e-6;

	for (int round = 0; round < 2; round++, step /= 8) {
		const uint64_t center = best;

		for (int j = -VAL_TICK_TUNE_STEPS; j <= VAL_TICK_TUNE_STEPS; j++) {
			uint64_t cand = center + (uint64_t)(int64_t)((double)center * step * j);
			uint32_t misses;

			if (!j || cand < VTICK_Q_MIN || cand >= VTICK_Q_LIMIT)
				continue;
			misses = count_corrections(e, cand, n);
			if (misses < best_misses) {
				best_misses = misses;
				best = cand;
			}
		}
	}
	*fits = best_misses <= n; /* at most half the steps corrected */
	return best;
}

/* The pending block in ticks of e->tick_q: its columns and ticks header. */
static void code_ticks(struct tfs_venc *e)
{
	pass_ticks(e, e->tick_q);
	e->ticks_hdr.len = 0;
	put_varint(&e->ticks_hdr, e->tick_q);
	put_varint(&e->ticks_hdr, e->n_corr);
	memcpy(e->ticks_hdr.data + e->ticks_hdr.len, e->corr.data, e->corr.len);
	e->ticks_hdr.len += e->corr.len;
}

/* Forget the stream's tick and estimate it again only after VAL_TICK_RETRY blocks. */
static void ticks_failed(struct tfs_venc *e)
{
	e->tick_q = 0;
	e->tick_wait = VAL_TICK_RETRY;
}

/* Empty the pending block's timing columns and ticks header. */
static void clear_times(struct tfs_venc *e)
{
	for (int k = 0; k < N_TS_CAND; k++)
		e->ts_col[k].len = 0;
	e->dur_col[0].len = e->dur_col[1].len = 0;
	e->ticks_hdr.len = 0;
	e->coded_of[COL_TS] = e->coded_of[COL_DUR] = NULL;
}

/*
 * The stream's tick for the pending block in e->tick_q (0: none): estimated on the first
 * block, and again VAL_TICK_RETRY blocks after a failure.
 */
static void find_tick(struct tfs_venc *e)
{
	double guess = 0;
	bool fits = false;

	if (e->tick_q)
		return;
	if (e->tick_wait) {
		e->tick_wait--;
		return;
	}
	/* a tick explaining the short steps but not the block: try finer ones */
	for (int k = 0; k < VAL_TICK_GUESSES && !fits; k++) {
		e->tick_q = vtick_estimate(e->ts, e->dur, e->blk_n, e->scratch, &guess);
		if (!e->tick_q)
			break;
		e->tick_q = tune_tick(e, e->tick_q, &fits);
	}
	if (!fits)
		ticks_failed(e);
}

/*
 * Swap the ticks pass's chosen columns @ts_k and @dur_k and the coded ones with e->aside:
 * kept while nanoseconds are tried, so that they need not be coded again if ticks win.
 */
static void swap_aside(struct tfs_venc *e, int ts_k, int dur_k)
{
	swap_buf(&e->ts_col[ts_k], &e->aside[0]);
	swap_buf(&e->dur_col[dur_k], &e->aside[1]);
	swap_buf(&e->coded[COL_TS], &e->aside[2]);
	swap_buf(&e->coded[COL_DUR], &e->aside[3]);
}

/* Set the ticks pass's columns aside, with room for a pass in nanoseconds. */
static int set_aside(struct tfs_venc *e, int ts_k, int dur_k)
{
	const size_t need = (size_t)e->blk_n * VAL_VARINT_MAX;

	swap_aside(e, ts_k, dur_k);
	if (buf_reserve(&e->ts_col[ts_k], need) < 0 || buf_reserve(&e->dur_col[dur_k], need) < 0) {
		swap_aside(e, ts_k, dur_k);
		return -ENOMEM;
	}
	return 0;
}

/*
 * Code the pending block's times into the candidate columns and choose among them (in
 * *@ts_k, *@dur_k), in ticks when the stream's clock has them and they make the columns
 * smaller. @return the FORMAT.md §7.2 predictor byte, or -ENOMEM (nothing the encoder
 * keeps changed)
 */
static int code_times(struct tfs_venc *e, int *ts_k, int *dur_k)
{
	const size_t need = (size_t)e->blk_n * VAL_VARINT_MAX;
	const struct tfs_buf *coded_of[2];
	int pred, tick_pred, tick_ts, tick_dur;
	size_t size, tick_size, hdr_size, hdr_len;

	clear_times(e);
	if (e->timing == VAL_TIMING_NONE)
		return choose_pred(e, false, SIZE_MAX, ts_k, dur_k, &size);
	for (int k = 0; k < N_TS_CAND; k++)
		if (buf_reserve(&e->ts_col[k], need) < 0)
			return -ENOMEM;
	for (int k = 0; k < 2; k++)
		if (buf_reserve(&e->dur_col[k], need) < 0)
			return -ENOMEM;
	if (e->timing == VAL_TIMING_LOSSY) {
		pass_lossy(e);
		return choose_pred(e, false, SIZE_MAX, ts_k, dur_k, &size);
	}
	/* at most two varints per step, two steps per event */
	if (e->ticks && (buf_reserve(&e->corr, 4 * need) < 0 ||
			 buf_reserve(&e->ticks_hdr, 4 * need + 2 * VAL_VARINT_MAX) < 0))
		return -ENOMEM;
	if (e->ticks)
		find_tick(e);
	if (!e->ticks || !e->tick_q) {
		pass_lossless(e, e->ts, e->dur, e->ts[0]);
		return choose_pred(e, false, SIZE_MAX, ts_k, dur_k, &size);
	}
	/* ticks against nanoseconds, by the columns' trial sizes, unless ticks explain
	 * nearly every step (the clock's lattice: ticks then always won on real traces) */
	code_ticks(e);
	tick_pred = choose_pred(e, true, SIZE_MAX, &tick_ts, &tick_dur, &tick_size);
	if (tick_pred < 0)
		return tick_pred;
	/* (coded nanoseconds learn some of a lattice too, but on real clocks ticks still won) */
	if (e->n_corr <= (2 * e->blk_n - 1) / VAL_TICK_SURE)
		goto out_ticks;
	if (trial_size(&e->ticks_hdr, &e->trial, &hdr_size) < 0)
		return -ENOMEM;
	tick_size += hdr_size;
	hdr_len = e->ticks_hdr.len;
	memcpy(coded_of, e->coded_of, sizeof(coded_of));
	if (set_aside(e, tick_ts, tick_dur) < 0)
		return -ENOMEM;
	clear_times(e);
	pass_lossless(e, e->ts, e->dur, e->ts[0]);
	/* trial sizes at a faster level only estimate: ticks must win clearly */
	pred = choose_pred(e, false, tick_size + tick_size / 32 + 9, ts_k, dur_k, &size);
	if (pred >= 0 && size <= tick_size + tick_size / 32 + 8) {
		if (e->n_corr > e->blk_n)
			ticks_failed(e); /* ticks explain under half the steps */
		return pred;
	}
	/* ticks won (or memory ran out): their columns back, as they were */
	swap_aside(e, tick_ts, tick_dur);
	memcpy(e->coded_of, coded_of, sizeof(coded_of));
	e->ticks_hdr.len = hdr_len;
	if (pred < 0)
		return pred;
out_ticks:
	*ts_k = tick_ts;
	*dur_k = tick_dur;
	return tick_pred | VAL_TICKS;
}

/*
 * Compress the pending block into one frame. Its timing choices change the encoder's
 * choice_state even when it then fails (flush_block() puts that back).
 */
static int assemble_block(struct tfs_venc *e)
{
	const int n_cols = e->version >= 4 ? N_COLS : COL_TAGS;
	size_t need = VAL_RAW_HDR_MAX, frames_len = e->frames.len;
	const struct tfs_buf *col[N_COLS];
	int rc, ts_k, dur_k;
	uint8_t pred;

	if (!e->blk_n)
		return 0;
	rc = code_times(e, &ts_k, &dur_k);
	if (rc < 0)
		return rc;
	pred = (uint8_t)rc;
	col[COL_TS] = &e->ts_col[ts_k];
	col[COL_DUR] = &e->dur_col[dur_k];
	col[COL_VALS] = &e->vals;
	col[COL_TAGS] = &e->tags;
	col[COL_CLASS] = &e->cls_col;
	for (int c = COL_TS; c <= COL_DUR; c++) {
		if (!(pred & (c == COL_TS ? VAL_CODED_TS : VAL_CODED_DUR)))
			continue;
		rc = e->coded_of[c] == col[c] ? 0 : code_column(e, col[c], SIZE_MAX, &e->coded[c]);
		if (rc < 0)
			return rc;
		col[c] = &e->coded[c];
	}
	need += e->ticks_hdr.len;
	for (int c = 0; c < n_cols; c++)
		need += col[c]->len;
	if (vp_grow(&e->idx, &e->idx_cap, e->n_idx + 1, sizeof(*e->idx)) < 0)
		return -ENOMEM;
	e->raw.len = 0;
	rc = buf_reserve(&e->raw, need);
	if (rc < 0)
		return rc;
	put_varint(&e->raw, e->blk_n);
	if (e->version >= 2)
		e->raw.data[e->raw.len++] = pred;
	if (e->ticks_hdr.len) {
		memcpy(e->raw.data + e->raw.len, e->ticks_hdr.data, e->ticks_hdr.len);
		e->raw.len += e->ticks_hdr.len;
	}
	for (int c = 0; c < n_cols; c++)
		put_varint(&e->raw, col[c]->len);
	for (int c = 0; c < n_cols; c++) {
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
	e->vals.len = 0;
	e->tags.len = 0;
	e->cls_col.len = 0;
	e->blk_n = 0;
	vp_pred_next_block(&e->p);
	return 0;
}

/*
 * What the choices of one block change and the next blocks' choices read (the state besides
 * the pending block's own): a block that fails for memory after its choices were made (a
 * coded column, its frame) is made again with them as they were, so that the same events
 * give the same bytes whatever failed on the way.
 */
struct choice_state {
	uint64_t tick_q;
	uint32_t tick_wait, dur_lost;
	uint8_t lead[2];
	struct choice won[2][2];
};

/*
 * Code, assemble and compress the pending block. @return 0, or -ENOMEM with the choices'
 * state as it was
 */
static int flush_block(struct tfs_venc *e)
{
	struct choice_state was = {.tick_q = e->tick_q, .tick_wait = e->tick_wait,
				   .dur_lost = e->dur_lost};
	int rc;

	memcpy(was.lead, e->lead, sizeof(was.lead));
	memcpy(was.won, e->won, sizeof(was.won));
	rc = assemble_block(e);
	if (rc < 0) {
		e->tick_q = was.tick_q;
		e->tick_wait = was.tick_wait;
		e->dur_lost = was.dur_lost;
		memcpy(e->lead, was.lead, sizeof(e->lead));
		memcpy(e->won, was.won, sizeof(e->won));
	}
	return rc;
}

static inline uint32_t map_home(uint64_t v)
{
	return (uint32_t)((v * UINT64_C(0x9E3779B97F4A7C15)) >> 55) & (VAL_MAP_SIZE - 1);
}

/* The slot of @v in @m, or -1. */
static int map_find(const struct vmap *m, uint64_t v)
{
	for (uint32_t i = map_home(v);; i = (i + 1) & (VAL_MAP_SIZE - 1)) {
		if (!m->s[i].used)
			return -1;
		if (m->s[i].value == v)
			return (int)i;
	}
}

/* Empty slot @i, moving later slots of its run back so that every value stays findable. */
static void map_delete(struct vmap *m, uint32_t i)
{
	for (uint32_t j = (i + 1) & (VAL_MAP_SIZE - 1); m->s[j].used;
	     j = (j + 1) & (VAL_MAP_SIZE - 1)) {
		const uint32_t home = map_home(m->s[j].value);

		/* slot j may move to i when its home does not lie in (i, j] */
		if (((j - home) & (VAL_MAP_SIZE - 1)) >= ((j - i) & (VAL_MAP_SIZE - 1))) {
			m->s[i] = m->s[j];
			i = j;
		}
	}
	m->s[i].used = 0;
}

/* The slot of @v in @m, or the empty one where it would go. The table is never full (see
 * struct vmap). */
static uint32_t map_slot(const struct vmap *m, uint64_t v)
{
	uint32_t i = map_home(v);

	while (m->s[i].used && m->s[i].value != v)
		i = (i + 1) & (VAL_MAP_SIZE - 1);
	return i;
}

/* Forget the value of class state @k that its next value pushes out of the ring. */
static void class_forget(const struct vclass *k, struct vmap *m)
{
	if (k->count >= VAL_HIST_RING) {
		const uint64_t old = k->ring[k->count % VAL_HIST_RING];
		const int i = map_find(m, old);

		if (i >= 0 && m->s[i].pos == k->count - VAL_HIST_RING)
			map_delete(m, (uint32_t)i);
	}
}

/*
 * Code value @v of class @c whose stride prediction is @pred (FORMAT.md §7.3.1): a tag, and
 * a residual, 0 for a hit. The tag of a hit reaching furthest back is VAL_TAG_HIST +
 * VAL_HIST_MAX - 1; a stride hit wins over a history hit, the smaller residual between
 * misses (the stride's on a tie). The value leaving the ring is forgotten first, so that
 * one probe finds @v and where it goes: it was too far back for a hit anyway.
 */
static void code_class_value(struct tfs_venc *e, uint8_t c, uint64_t v, uint64_t pred)
{
	struct vclass *k = vp_class(&e->p, c);
	struct vmap *m = &e->maps[c];
	uint64_t res = 0;
	uint8_t tag = VAL_TAG_STRIDE;
	uint32_t i;

	if (m->gen != e->p.gen) {
		memset(m->s, 0, sizeof(m->s));
		m->gen = e->p.gen;
	}
	class_forget(k, m);
	i = map_slot(m, v);
	if (v != pred) {
		/* the ring check keeps a table stale since a wrap of gen harmless */
		if (m->s[i].used && m->s[i].pos < k->count &&
		    k->count - 1 - m->s[i].pos < VAL_HIST_MAX &&
		    k->ring[m->s[i].pos % VAL_HIST_RING] == v) {
			tag = (uint8_t)(VAL_TAG_HIST + (k->count - 1 - m->s[i].pos));
		} else {
			uint64_t r_stride = zz(v - pred), r_max = zz(v - k->max - 1);

			tag = r_max < r_stride ? VAL_TAG_MAX : VAL_TAG_MISS;
			res = tag == VAL_TAG_MAX ? r_max : r_stride;
		}
	}
	e->tags.data[e->tags.len++] = tag;
	put_varint(&e->cls_col, res);
	m->s[i] = (struct vmap_slot){.value = v, .pos = k->count, .used = 1};
	vp_class_push(k, v);
}

static void code_vals(struct tfs_venc *e, struct tstate *st, const uint64_t *vals, uint32_t n_vals,
		      const uint8_t *cls)
{
	struct fstate *f;

	if (!n_vals)
		goto out_seen;
	f = e->p.f + st->val_slot;
	for (uint32_t j = 0; j < n_vals; j++) {
		const uint64_t pred = f[j].last + f[j].delta;

		if (cls && cls[j])
			code_class_value(e, cls[j], vals[j], pred);
		else
			put_varint(&e->vals, zz(vals[j] - pred));
		f[j].delta = st->seen ? vals[j] - f[j].last : 0;
		f[j].last = vals[j];
	}
out_seen:
	st->seen = 1;
}

/* Grow one of the arrays that share e->ev_cap (holding @old) to at least @n elements. */
static int grow_array(void *pp, size_t old, size_t n, size_t elem)
{
	return vp_grow(pp, &old, n, elem);
}

/* Room for the pending block's times of @need events (the lattice's arrays too). */
static int grow_events(struct tfs_venc *e, size_t need)
{
	size_t n = e->ev_cap ? e->ev_cap : 64;
	int rc = 0;

	if (need <= e->ev_cap)
		return 0;
	while (n < need)
		n *= 2;
	if (n > e->block_events)
		n = e->block_events;
	rc |= grow_array(&e->ts, e->ev_cap, n, sizeof(*e->ts));
	rc |= grow_array(&e->dur, e->ev_cap, n, sizeof(*e->dur));
	rc |= grow_array(&e->term, e->ev_cap, n, sizeof(*e->term));
	rc |= grow_array(&e->slot, e->ev_cap, n, sizeof(*e->slot));
	if (e->ticks)
		rc |= grow_array(&e->scratch, 2 * e->ev_cap, 2 * n, sizeof(*e->scratch));
	if (rc)
		return -ENOMEM; /* what grew is kept; ev_cap says what all hold */
	e->ev_cap = n;
	return 0;
}

/* Timing state for terminals up to @terminal, unseen. */
static int grow_tt(struct tfs_venc *e, uint32_t terminal)
{
	size_t old = e->tt_cap;

	if (terminal < e->tt_cap)
		return 0;
	if (vp_grow(&e->tt, &e->tt_cap, (size_t)terminal + 1, sizeof(*e->tt)) < 0)
		return -ENOMEM;
	memset(e->tt + old, 0, (e->tt_cap - old) * sizeof(*e->tt));
	return 0;
}

/* Room for the tags and class states of an event whose fields have classes @cls. */
static int reserve_classes(struct tfs_venc *e, const uint8_t *cls, uint32_t n_vals)
{
	uint8_t top = 0;

	for (uint32_t j = 0; j < n_vals; j++)
		top = cls[j] > top ? cls[j] : top;
	if (!top)
		return 0;
	if (top >= e->maps_cap) {
		/* exactly: a table takes 8 KiB, and a writer declares few classes */
		struct vmap *m = realloc(e->maps, ((size_t)top + 1) * sizeof(*m));

		if (!m)
			return -ENOMEM;
		for (size_t c = e->maps_cap; c <= top; c++)
			m[c].gen = 0;
		e->maps = m;
		e->maps_cap = (size_t)top + 1;
	}
	if (vp_class_reserve(&e->p, top) < 0 || buf_reserve(&e->tags, n_vals) < 0)
		return -ENOMEM;
	return buf_reserve(&e->cls_col, (size_t)VAL_VARINT_MAX * n_vals);
}

/* Make every allocation the event needs, so that coding it cannot fail. */
static int reserve_event(struct tfs_venc *e, uint32_t terminal, uint32_t n_vals,
			 const uint8_t *cls)
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
	if (e->timing != VAL_TIMING_NONE &&
	    (grow_events(e, (size_t)e->blk_n + 1) < 0 || grow_tt(e, terminal) < 0))
		return -ENOMEM;
	rc = buf_reserve(&e->vals, (size_t)VAL_VARINT_MAX * n_vals);
	if (rc == 0 && cls)
		rc = reserve_classes(e, cls, n_vals);
	return rc;
}

int venc_add(struct tfs_venc *e, uint32_t terminal, uint64_t ts_ns, uint64_t dur_ns,
	     const uint64_t *vals, uint32_t n_vals)
{
	return venc_add_cls(e, terminal, ts_ns, dur_ns, vals, n_vals, NULL);
}

int venc_add_cls(struct tfs_venc *e, uint32_t terminal, uint64_t ts_ns, uint64_t dur_ns,
		 const uint64_t *vals, uint32_t n_vals, const uint8_t *cls)
{
	struct tstate *st;
	int rc;

	if (e->finished || terminal >= VAL_MAX_TERMINAL || n_vals > VAL_MAX_FIELDS ||
	    (n_vals && !vals))
		return -EINVAL;
	if (e->version < 4)
		cls = NULL;
	if (e->blk_n == e->block_events) {
		rc = flush_block(e);
		if (rc < 0)
			return rc;
	}
	rc = reserve_event(e, terminal, n_vals, cls);
	if (rc < 0)
		return rc;
	st = &e->p.t[terminal];
	st->n_vals = (uint8_t)n_vals;
	if (st->gen != e->p.gen) {
		pred_enter(&e->p, st, n_vals);
		if (n_vals)
			memset(e->p.f + st->val_slot, 0, n_vals * sizeof(*e->p.f));
	}
	if (e->timing != VAL_TIMING_NONE) {
		e->ts[e->blk_n] = ts_ns;
		e->dur[e->blk_n] = dur_ns;
		e->term[e->blk_n] = terminal;
		e->slot[e->blk_n] = st->cslot;
	}
	code_vals(e, st, vals, n_vals, cls);
	e->blk_n++;
	e->n_events++;
	return 0;
}

static void put_header(uint8_t *h, const struct tfs_venc *e)
{
	static const uint32_t magic[] = {0,	       VAL_MAGIC_V1, VAL_MAGIC_V2,
					 VAL_MAGIC_V3, VAL_MAGIC_V4, VAL_MAGIC_V5};
	uint64_t rel_bits;

	memcpy(&rel_bits, &e->rel_err, sizeof(rel_bits));
	le_put32(h, magic[e->version]);
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
	struct ZSTD_CCtx_s *cctx;
	uint32_t *stored;
	size_t off = 0;
	int rc = -ENOMEM;

	buf_init(&frames);
	buf_init(&raw);
	stored = malloc((e->n_idx ? e->n_idx : 1) * sizeof(*stored));
	cctx = e->n_idx ? zs_cctx_new() : NULL;
	if (!stored || (e->n_idx && !cctx))
		goto out_free;
	rc = 0; /* a section without blocks has nothing to recompress */
	for (size_t i = 0; i < e->n_idx; i++) {
		const uint8_t *frame = e->frames.data + off;
		size_t before = frames.len;

		rc = buf_reserve(&raw, e->idx[i].raw_len);
		if (rc == 0)
			rc = zs_decompress(frame, e->idx[i].stored_len, raw.data, e->idx[i].raw_len,
					   0, "values", NULL);
		if (rc == 0)
			rc = zs_compress_with(cctx, &frames, raw.data, e->idx[i].raw_len,
					      e->final_level);
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
	zs_cctx_free(cctx);
	return rc;
}

void venc_no_recompress(struct tfs_venc *e)
{
	e->final_level = 0;
}

void venc_cap_recompress(struct tfs_venc *e, int level)
{
	if (e->final_level > level)
		e->final_level = level > e->level ? level : 0;
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
