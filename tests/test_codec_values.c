/*
 * Value and timing streams (FORMAT.md §7): seeded round trips in every timing mode, section
 * version (TFV1 as older writers wrote it, TFV2) and predictor choice, the lossy error
 * bounds on random and adversarial times, golden raw blocks written by hand from the spec,
 * the committed TFV2 golden sections, size targets for structured input, every truncation
 * and bit flip, and allocation failure in turn.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "values_i.h"
#include "vpatch_i.h"
#include "vrange_i.h"
#include "zstd_i.h"
#include "testfiles.h"
#include "testutil.h"

__extension__ typedef unsigned __int128 u128;

#define MAX_TERMS 16

/* A generated event stream: event i has terminal term[i] and fields vals[val_off[i]..]. */
struct evset {
	size_t n;
	uint32_t *term;
	uint64_t *ts, *dur;
	uint64_t *vals;
	size_t *val_off; /* [n + 1] */
	size_t vals_cap;
	uint8_t n_vals_of[MAX_TERMS];
	uint32_t n_terms;
};

static void ev_init(struct evset *s, size_t n, uint32_t n_terms)
{
	memset(s, 0, sizeof(*s));
	s->term = calloc(n, sizeof(*s->term));
	s->ts = calloc(n, sizeof(*s->ts));
	s->dur = calloc(n, sizeof(*s->dur));
	s->val_off = calloc(n + 1, sizeof(*s->val_off));
	s->vals_cap = n * 5 + 1;
	s->vals = calloc(s->vals_cap, sizeof(*s->vals));
	assert_non_null(s->vals);
	s->n_terms = n_terms;
	for (uint32_t t = 0; t < n_terms; t++)
		s->n_vals_of[t] = (uint8_t)(t % 6);
}

static void ev_fini(struct evset *s)
{
	free(s->term);
	free(s->ts);
	free(s->dur);
	free(s->val_off);
	free(s->vals);
}

/* Append event s->n; its fields are left for the caller at s->vals + s->val_off[i]. */
static uint64_t *ev_push(struct evset *s, uint32_t t, uint64_t ts, uint64_t dur)
{
	size_t i = s->n++;

	s->term[i] = t;
	s->ts[i] = ts;
	s->dur[i] = dur;
	s->val_off[i + 1] = s->val_off[i] + s->n_vals_of[t];
	assert_true(s->val_off[i + 1] <= s->vals_cap);
	return s->vals + s->val_off[i];
}

static void encode(const struct evset *s, const struct venc_opts *o, struct tfs_buf *out)
{
	struct tfs_venc *e;

	assert_int_equal(venc_new(o, &e), 0);
	for (size_t i = 0; i < s->n; i++)
		assert_int_equal(venc_add(e, s->term[i], s->ts[i], s->dur[i],
					  s->vals + s->val_off[i], s->n_vals_of[s->term[i]]),
				 0);
	assert_true(venc_n_events(e) == s->n);
	buf_init(out);
	assert_int_equal(venc_finish(e, out), 0);
	venc_free(e);
}

static uint64_t umag(uint64_t d)
{
	return (int64_t)d < 0 ? 0 - d : d;
}

/*
 * Check one decoded event's times against FORMAT.md §7.4 for the section's timing mode: a
 * gap is measured from the previous event's reconstructed end, or its start when
 * @from_start (TFV1, or a TFV2 block with VAL_GAP_START), all differences modulo 2^64.
 */
static void check_times(const struct tfs_vsec *v, const struct evset *s, const struct vblock *b,
			uint32_t i, bool from_start)
{
	uint64_t k = b->first_event + i, err, gap, base;
	uint32_t e_fix = (uint32_t)(v->rel_err * 4294967296.0);

	switch (v->timing) {
	case VAL_TIMING_NONE:
		assert_true(b->ts_ns[i] == 0 && b->dur_ns[i] == 0);
		return;
	case VAL_TIMING_LOSSLESS:
		assert_true(b->ts_ns[i] == s->ts[k]);
		assert_true(b->dur_ns[i] == s->dur[k]);
		return;
	}
	assert_true((double)e_fix / 4294967296.0 <= v->rel_err);
	assert_true((u128)umag(b->dur_ns[i] - s->dur[k]) << 32 <= (u128)e_fix * s->dur[k]);
	if (i == 0) {
		assert_true(b->ts_ns[0] == s->ts[k]);
		return;
	}
	base = b->ts_ns[i - 1] + (from_start ? 0 : b->dur_ns[i - 1]);
	err = umag(b->ts_ns[i] - s->ts[k]);
	gap = umag(s->ts[k] - base);
	if ((u128)err << 32 <= (u128)e_fix * gap)
		return;
	/* §7.4: a step back to near 0 rounds up instead of below 0, within 2e'|g| + 2 */
	assert_true(s->ts[k] <= b->ts_ns[i] && b->ts_ns[i] <= base);
	assert_true((u128)err << 32 < 2 * (u128)e_fix * gap + ((u128)2 << 32));
}

/* Decode every block of @sec and compare with @s. */
static void check_section(const struct tfs_buf *sec, const struct evset *s, int timing)
{
	struct tfs_vsec v;
	struct vblock b;
	struct tfs_diag d;

	memset(&d, 0, sizeof(d));
	assert_int_equal(vsec_open(&v, sec->data, sec->len, 1000, &d), 0);
	assert_int_equal(v.timing, timing);
	assert_true(v.version >= 1 && v.version <= VAL_VERSION);
	assert_true(v.n_events == s->n);
	vblock_init(&b);
	for (uint64_t blk = 0; blk < v.n_blocks; blk++) {
		uint64_t first = blk * v.block_events;
		struct vwords w = {0};
		bool from_start;

		assert_int_equal(vsec_block_words(&v, blk, &w, &d), 0);
		from_start = v.version == 1 || (w.pred & VAL_GAP_START);
		vwords_fini(&w);
		assert_int_equal(vsec_decode_block(&v, blk, s->term + first, s->n_vals_of,
						   s->n_terms, &b, &d),
				 0);
		assert_true(b.first_event == first);
		assert_int_equal(b.n_events, vsec_block_len(&v, blk));
		for (uint32_t i = 0; i < b.n_events; i++) {
			size_t nv = s->n_vals_of[s->term[first + i]];

			assert_int_equal(b.val_off[i + 1] - b.val_off[i], nv);
			assert_memory_equal(b.vals + b.val_off[i], s->vals + s->val_off[first + i],
					    nv * sizeof(uint64_t));
			check_times(&v, s, &b, i, from_start);
		}
	}
	vblock_fini(&b);
}

static uint64_t pick_val(uint64_t *seed, uint64_t stride_base, uint64_t k)
{
	switch (tu_below(seed, 6)) {
	case 0:
		return 0;
	case 1:
		return UINT64_MAX;
	case 2:
		return tu_rand(seed);
	case 3:
		return tu_rand(seed) >> tu_below(seed, 64);
	default:
		return stride_base + k * 4096;
	}
}

/* Random terminals and fields, extreme values, ts jumping backwards and wrapping. */
static void gen_random(struct evset *s, size_t n, uint64_t *seed)
{
	uint64_t ts = tu_rand(seed) >> 4;

	ev_init(s, n, 12);
	for (size_t i = 0; i < n; i++) {
		uint32_t t = (uint32_t)tu_below(seed, s->n_terms);
		uint64_t dur = tu_rand(seed) >> tu_below(seed, 64), *v;

		switch (tu_below(seed, 8)) {
		case 0:
			ts = tu_rand(seed);
			break;
		case 1:
			ts -= tu_below(seed, 100000);
			break;
		case 2:
			ts = tu_below(seed, 2) ? 0 : UINT64_MAX;
			dur = tu_below(seed, 2) ? 0 : UINT64_MAX;
			break;
		default:
			ts += tu_below(seed, 5000);
		}
		v = ev_push(s, t, ts, dur);
		for (uint32_t j = 0; j < s->n_vals_of[t]; j++)
			v[j] = pick_val(seed, j * 1000, i);
	}
}

/*
 * Four interleaved calls at a jittery period with jittery durations and a strided offset;
 * one field is random unless @tame.
 */
static void gen_jittery(struct evset *s, size_t n, uint64_t *seed, bool tame)
{
	uint64_t ts = UINT64_C(1700000000000000000), off = 0;

	ev_init(s, n, 4);
	for (size_t i = 0; i < n; i++) {
		uint32_t t = (uint32_t)(i % 4);
		uint64_t *v;

		ts += 1000 + tu_below(seed, 600);
		v = ev_push(s, t, ts, 300 + tu_below(seed, 400) + 1000000 * (t == 3));
		if (t == 1)
			v[0] = 3;
		if (t == 2) {
			v[0] = off;
			v[1] = 4096;
			off += 4096;
		}
		if (t == 3) {
			v[0] = 7;
			v[1] = 8192;
			v[2] = tame ? 5 : tu_below(seed, 1000);
		}
	}
}

/* The writer's per-block choice and each forced predictor byte (FORMAT.md §7.2). */
static const unsigned int pred_opts[] = {
	0,
	VAL_PRED_FIXED,
	VAL_PRED_FIXED | VAL_PRED_TS,
	VAL_PRED_FIXED | VAL_PRED_DUR,
	VAL_PRED_FIXED | VAL_PRED_ALL,
};
#define N_PRED_OPTS (sizeof(pred_opts) / sizeof(pred_opts[0]))

/* Every block of @sec stores the predictor byte @o asked for (any, when @o is 0). */
static void check_preds(const struct tfs_buf *sec, const struct venc_opts *o)
{
	struct vwords w = {0};
	struct tfs_vsec v;

	assert_int_equal(vsec_open(&v, sec->data, sec->len, 0, NULL), 0);
	for (uint64_t blk = 0; blk < v.n_blocks; blk++) {
		assert_int_equal(vsec_block_words(&v, blk, &w, NULL), 0);
		if (v.version == 1 || o->timing == VAL_TIMING_NONE) {
			assert_int_equal(w.pred, 0);
			continue;
		}
		if (o->pred)
			assert_int_equal(w.pred & VAL_PRED_ALL, o->pred & VAL_PRED_ALL);
		/* lossless with the writer's choices: either base, block by block */
		if (o->gap_base)
			assert_int_equal(!!(w.pred & VAL_GAP_START), o->gap_base == VAL_BASE_START);
		else if (o->timing == VAL_TIMING_LOSSY || o->pred)
			assert_int_equal(!!(w.pred & VAL_GAP_START),
					 o->timing == VAL_TIMING_LOSSY);
	}
	vwords_fini(&w);
}

/*
 * Encode @s in every version, gap base and predictor setting with @o's other options;
 * check each.
 */
static void round_trip_all(const struct evset *s, struct venc_opts o)
{
	for (int version = 1; version <= VAL_VERSION; version++) {
		for (int base = VAL_BASE_DEFAULT; base <= VAL_BASE_START; base++) {
			for (size_t k = 0; k < N_PRED_OPTS; k++) {
				struct tfs_buf sec;

				if (version == 1 && (pred_opts[k] || base))
					continue;
				o.version = version;
				o.gap_base = base;
				o.pred = pred_opts[k];
				/* TFV3: timing columns range-coded where smaller, and always
				 * with the writer's own predictor and base choices */
				for (int c = 0; c <= (version == 3 && !k && !base); c++) {
					o.coded = c ? VAL_CODED_ALWAYS : 0;
					encode(s, &o, &sec);
					assert_memory_equal(sec.data, "TFV", 3);
					assert_int_equal(sec.data[3], '0' + version);
					check_section(&sec, s, o.timing);
					check_preds(&sec, &o);
					buf_fini(&sec);
				}
			}
		}
	}
}

static void test_values_round_trip_lossless_random(void **state)
{
	uint64_t seed = tu_seed(__func__);
	const uint32_t block_sizes[] = {1, 7, 4096};
	struct evset s;

	gen_random(&s, 30000, &seed);
	for (size_t k = 0; k < sizeof(block_sizes) / sizeof(block_sizes[0]); k++) {
		struct venc_opts o = {.block_events = block_sizes[k],
				      .timing = VAL_TIMING_LOSSLESS};

		round_trip_all(&s, o);
	}
	ev_fini(&s);
}

static void test_values_round_trip_lossy_random_extremes(void **state)
{
	uint64_t seed = tu_seed(__func__);
	const double errs[] = {VAL_MIN_REL_ERR, 0.01, 0.1, 0.5, 0.999};
	const uint32_t block_sizes[] = {1, 1000};
	struct evset s;

	gen_random(&s, 10000, &seed);
	for (size_t k = 0; k < sizeof(errs) / sizeof(errs[0]); k++) {
		for (size_t j = 0; j < sizeof(block_sizes) / sizeof(block_sizes[0]); j++) {
			struct venc_opts o = {.block_events = block_sizes[j],
					      .timing = VAL_TIMING_LOSSY, .rel_err = errs[k]};

			round_trip_all(&s, o);
		}
	}
	ev_fini(&s);
}

/*
 * What the lossy bound must survive: huge gaps both ways, zero and maximal durations, zones
 * written in end order (their start lies before the events they enclose, a negative gap
 * from the previous end, often back to near 0) and start times at both ends of u64.
 */
static void gen_adversarial(struct evset *s, size_t n, uint64_t *seed)
{
	uint64_t ts = 0;

	ev_init(s, n, 4);
	for (uint32_t t = 0; t < 4; t++)
		s->n_vals_of[t] = 0;
	while (s->n + 4 <= n) {
		uint64_t dur = tu_below(seed, 3) ? tu_below(seed, 5000) : 0, zone = ts;
		uint32_t t = (uint32_t)tu_below(seed, 4);

		switch (tu_below(seed, 7)) {
		case 0: { /* a huge gap forward or back */
			uint64_t jump = tu_rand(seed) >> tu_below(seed, 8);

			ts = tu_below(seed, 2) ? ts + jump : ts - jump;
			break;
		}
		case 1: /* u64 extremes */
			ts = tu_below(seed, 2) ? UINT64_MAX - tu_below(seed, 3) : tu_below(seed, 3);
			dur = tu_below(seed, 2) ? UINT64_MAX : 0;
			break;
		case 2: /* two nested events, then their zone in end order */
			ev_push(s, t, ts + 10, dur);
			ev_push(s, t, ts + 20 + dur, 5);
			ts = tu_below(seed, 2) ? zone : tu_below(seed, 1 + zone / 16);
			dur = zone + 100 + dur - ts;
			break;
		case 3: /* back to the start of the trace */
			ts = tu_below(seed, 64);
			break;
		default:
			ts += tu_below(seed, 2000);
		}
		ev_push(s, t, ts, dur);
		ts += dur;
	}
}

static void test_values_lossy_bound_holds_on_adversarial_times(void **state)
{
	uint64_t seed = tu_seed(__func__);
	const double errs[] = {VAL_MIN_REL_ERR, 0.1, 0.5, 0.999};
	const uint32_t block_sizes[] = {1, 5, 4096};
	struct evset s;

	gen_adversarial(&s, 20000, &seed);
	for (size_t k = 0; k < sizeof(errs) / sizeof(errs[0]); k++) {
		for (size_t j = 0; j < sizeof(block_sizes) / sizeof(block_sizes[0]); j++) {
			struct venc_opts o = {.block_events = block_sizes[j],
					      .timing = VAL_TIMING_LOSSY, .rel_err = errs[k]};

			round_trip_all(&s, o);
		}
	}
	round_trip_all(&s, (struct venc_opts){.block_events = 77, .timing = VAL_TIMING_LOSSLESS});
	ev_fini(&s);
}

/* A final level recompresses every block: the same numbers in no more bytes. */
static void test_values_final_level_shrinks_and_keeps_contents(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct venc_opts o = {.block_events = 1000, .timing = VAL_TIMING_LOSSLESS};
	struct tfs_buf fast, slow;
	struct evset s;

	gen_jittery(&s, 20000, &seed, false);
	encode(&s, &o, &fast);
	o.final_level = 19;
	encode(&s, &o, &slow);
	check_section(&slow, &s, VAL_TIMING_LOSSLESS);
	fprintf(stderr, "# level 3: %zu bytes, recompressed at 19: %zu\n", fast.len, slow.len);
	assert_true(slow.len < fast.len);
	o.final_level = 2; /* not above the block level: nothing to do */
	buf_fini(&slow);
	encode(&s, &o, &slow);
	assert_int_equal(slow.len, fast.len);
	assert_memory_equal(slow.data, fast.data, fast.len);
	buf_fini(&slow);
	buf_fini(&fast);
	ev_fini(&s);
}

/* Encode lossless @s with @o into @sec, check it decodes, open it as @v of @n_blocks blocks. */
static void encode_lossless_blocks(const struct evset *s, const struct venc_opts *o,
				   struct tfs_buf *sec, struct tfs_vsec *v, uint64_t n_blocks)
{
	encode(s, o, sec);
	check_section(sec, s, VAL_TIMING_LOSSLESS);
	assert_int_equal(vsec_open(v, sec->data, sec->len, 0, NULL), 0);
	assert_int_equal(v->n_blocks, n_blocks);
}

/*
 * One event of terminal @t after *@ts: a regular one (gap and duration a per-terminal
 * constant, give or take 3 ns), which the per-terminal predictors explain, or noise (both
 * under 100 ns), which they only make worse.
 */
static void push_regular_or_noise(struct evset *s, uint32_t t, bool regular, uint64_t *seed,
				  uint64_t *ts)
{
	const uint64_t gap = regular ? 13000 * (t + 1) + tu_below(seed, 4) : tu_below(seed, 100);
	const uint64_t dur = regular ? 777 * (t + 1) + tu_below(seed, 4) : tu_below(seed, 100);

	*ts += gap;
	ev_push(s, t, *ts, dur);
	*ts += dur;
}

/*
 * The writer's choice follows the data: a block of periodic calls (each terminal keeps its
 * gap and duration) is predicted, a block of noise is not, and a strict period with random
 * durations measures its gaps from the previous start.
 */
static void test_values_predictor_choice_follows_the_data(void **state)
{
	uint64_t seed = tu_seed(__func__);
	/* zstd's view of the columns (a coded column prices predictors its own way) */
	struct venc_opts o = {.block_events = 4096, .timing = VAL_TIMING_LOSSLESS,
			      .coded = VAL_CODED_NEVER};
	struct vwords w = {0};
	struct tfs_buf sec;
	struct tfs_vsec v;
	struct evset s;
	uint64_t ts = 1000;

	ev_init(&s, 3 * 4096, 4);
	for (uint32_t t = 0; t < 4; t++)
		s.n_vals_of[t] = 0;
	for (size_t i = 0; i < 3 * 4096; i++) {
		const uint32_t t = (uint32_t)(i % 4);

		if (i < 2 * 4096) {
			push_regular_or_noise(&s, t, i < 4096, &seed, &ts);
		} else { /* a strict period whatever the durations: gaps from the start */
			ev_push(&s, t, ts, tu_below(&seed, 5000));
			ts += 10000;
		}
	}
	encode(&s, &o, &sec);
	check_section(&sec, &s, VAL_TIMING_LOSSLESS);
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
	assert_int_equal(vsec_block_words(&v, 0, &w, NULL), 0);
	assert_int_equal(w.pred, VAL_PRED_ALL);
	assert_int_equal(vsec_block_words(&v, 1, &w, NULL), 0);
	assert_int_equal(w.pred, 0);
	assert_int_equal(vsec_block_words(&v, 2, &w, NULL), 0);
	assert_int_equal(w.pred & VAL_GAP_START, VAL_GAP_START);
	vwords_fini(&w);
	buf_fini(&sec);
	ev_fini(&s);
}

static void test_values_lossy_bounds_hold_and_shrink_jittery_timing(void **state)
{
	uint64_t seed = tu_seed(__func__);
	const double errs[] = {0.01, 0.1, 0.5};
	struct venc_opts lossless = {.timing = VAL_TIMING_LOSSLESS};
	struct tfs_buf ref;
	struct evset s;

	gen_jittery(&s, 100000, &seed, false);
	encode(&s, &lossless, &ref);
	check_section(&ref, &s, VAL_TIMING_LOSSLESS);
	fprintf(stderr, "# jittery lossless: %.3f bytes/event\n", (double)ref.len / s.n);
	for (size_t k = 0; k < sizeof(errs) / sizeof(errs[0]); k++) {
		struct venc_opts o = {.timing = VAL_TIMING_LOSSY, .rel_err = errs[k]};
		struct tfs_buf sec;

		encode(&s, &o, &sec);
		check_section(&sec, &s, VAL_TIMING_LOSSY);
		fprintf(stderr, "# jittery lossy %g: %.3f bytes/event\n", errs[k],
			(double)sec.len / s.n);
		assert_true(sec.len < ref.len);
		buf_fini(&sec);
	}
	buf_fini(&ref);
	ev_fini(&s);
}

/*
 * End order (FORMAT.md §3.1): a zone that encloses the events before it steps back to its
 * start. Steps back to starts near 0, with gaps anywhere in their bin, never reconstruct
 * below 0 (a wrapped time would be beyond the trace's maxima) and stay in the bound.
 */
static void test_values_lossy_step_back_to_zero_stays_non_negative(void **state)
{
	uint64_t seed = tu_seed(__func__);
	const double errs[] = {VAL_MIN_REL_ERR, 0.1, 0.5};
	size_t raised = 0;

	for (size_t k = 0; k < sizeof(errs) / sizeof(errs[0]); k++) {
		struct venc_opts o = {.block_events = 4096, .timing = VAL_TIMING_LOSSY,
				      .rel_err = errs[k], .gap_base = VAL_BASE_END};
		struct tfs_vsec v;
		struct vblock b;
		struct tfs_diag d;
		struct tfs_buf sec;
		struct evset s;
		uint64_t p;

		ev_init(&s, 4000, 1);
		s.n_vals_of[0] = 0;
		ev_push(&s, 0, 0, 10);
		while (s.n + 2 <= 4000) {
			/* a nested event at p, then its zone from a start near 0 */
			p = 64 + (tu_rand(&seed) >> (24 + tu_below(&seed, 32)));
			ev_push(&s, 0, p, 5);
			ev_push(&s, 0, tu_below(&seed, 1 + p / 64), p);
		}
		encode(&s, &o, &sec);
		check_section(&sec, &s, VAL_TIMING_LOSSY);
		memset(&d, 0, sizeof(d));
		assert_int_equal(vsec_open(&v, sec.data, sec.len, 1000, &d), 0);
		vblock_init(&b);
		assert_int_equal(vsec_decode_block(&v, 0, s.term, s.n_vals_of, s.n_terms, &b, &d), 0);
		for (uint32_t i = 0; i < b.n_events; i++) {
			uint64_t base = i ? b.ts_ns[i - 1] + b.dur_ns[i - 1] : b.ts_ns[0];
			uint64_t err = b.ts_ns[i] - s.ts[i], gap = base - s.ts[i];

			assert_true(b.ts_ns[i] <= UINT64_C(1) << 62);
			/* rounded up past the usual bound: the rule was needed */
			raised += i > 0 && b.ts_ns[i] > s.ts[i] &&
				  (u128)err << 32 > (u128)(uint32_t)(errs[k] * 4294967296.0) * gap;
		}
		vblock_fini(&b);
		buf_fini(&sec);
		ev_fini(&s);
	}
	fprintf(stderr, "# steps back rounded up to stay >= 0: %zu\n", raised);
	assert_true(raised > 0);
}

static void test_values_strided_loop_is_tiny(void **state)
{
	struct venc_opts o = {.timing = VAL_TIMING_LOSSLESS};
	struct tfs_buf sec;
	struct evset s;

	/* read(fd, off, 4096) then a 3-field compute call, like a sequential read loop */
	ev_init(&s, 100000, 4);
	for (size_t i = 0; i < 100000; i++) {
		uint64_t *v;

		if (i % 2 == 0) {
			v = ev_push(&s, 3, 1000000 + i * 500, 200);
			v[0] = 3;
			v[1] = (i / 2) * 4096;
			v[2] = 4096;
		} else {
			v = ev_push(&s, 2, 1000000 + i * 500, 50);
			v[0] = 0x7f0000001000;
			v[1] = 64;
		}
	}
	encode(&s, &o, &sec);
	check_section(&sec, &s, VAL_TIMING_LOSSLESS);
	fprintf(stderr, "# strided loop: %zu bytes, %.4f bytes/event\n", sec.len,
		(double)sec.len / s.n);
	assert_true((double)sec.len / s.n < 0.05);
	buf_fini(&sec);
	ev_fini(&s);
}

static void test_values_none_stores_no_timing(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct venc_opts o = {.timing = VAL_TIMING_NONE, .rel_err = 0.3};
	struct tfs_buf sec, ref;
	struct evset s;

	gen_jittery(&s, 100000, &seed, true);
	encode(&s, &o, &sec);
	check_section(&sec, &s, VAL_TIMING_NONE);
	o.timing = VAL_TIMING_LOSSY;
	encode(&s, &o, &ref);
	fprintf(stderr, "# none: %.4f bytes/event (lossy 0.3: %.4f)\n", (double)sec.len / s.n,
		(double)ref.len / s.n);
	assert_true((double)sec.len / s.n < 0.05);
	buf_fini(&sec);
	buf_fini(&ref);
	ev_fini(&s);
}

static void test_values_empty_section_is_header_only(void **state)
{
	struct venc_opts o = {.timing = VAL_TIMING_LOSSLESS};
	struct tfs_venc *e;
	struct tfs_buf sec;
	struct tfs_vsec v;
	struct vblock b;

	assert_int_equal(venc_new(&o, &e), 0);
	buf_init(&sec);
	assert_int_equal(venc_finish(e, &sec), 0);
	assert_int_equal(sec.len, 36);
	assert_int_equal(venc_add(e, 0, 0, 0, NULL, 0), -EINVAL);
	venc_free(e);
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
	assert_true(v.n_blocks == 0 && v.n_events == 0);
	assert_int_equal(vsec_block_len(&v, 0), 0);
	vblock_init(&b);
	assert_int_equal(vsec_decode_block(&v, 0, NULL, NULL, 0, &b, NULL), -EINVAL);
	vblock_fini(&b);
	buf_fini(&sec);
}

/* The same with a save level: nothing to recompress is not a failure (an empty thread). */
static void test_values_empty_section_with_final_level(void **state)
{
	struct venc_opts o = {.timing = VAL_TIMING_LOSSLESS, .final_level = 19};
	struct tfs_venc *e;
	struct tfs_buf sec;

	(void)state;
	assert_int_equal(venc_new(&o, &e), 0);
	buf_init(&sec);
	assert_int_equal(venc_finish(e, &sec), 0);
	assert_int_equal(sec.len, 36);
	venc_free(e);
	buf_fini(&sec);
}

static void test_values_rejects_bad_arguments(void **state)
{
	struct venc_opts o = {.timing = VAL_TIMING_LOSSY, .rel_err = 0.0};
	const uint64_t vals[2] = {1, 2};
	struct tfs_venc *e;

	assert_int_equal(venc_new(&o, &e), -EINVAL);
	assert_null(e);
	o.rel_err = 1.0;
	assert_int_equal(venc_new(&o, &e), -EINVAL);
	o.rel_err = VAL_MIN_REL_ERR / 2;
	assert_int_equal(venc_new(&o, &e), -EINVAL);
	o.timing = 3;
	assert_int_equal(venc_new(&o, &e), -EINVAL);
	o.timing = VAL_TIMING_LOSSLESS;
	o.version = VAL_VERSION + 1;
	assert_int_equal(venc_new(&o, &e), -EINVAL);
	o.version = 0;
	o.pred = VAL_PRED_TS; /* without VAL_PRED_FIXED */
	assert_int_equal(venc_new(&o, &e), -EINVAL);
	o.pred = VAL_PRED_FIXED | VAL_GAP_START; /* the base is gap_base's */
	assert_int_equal(venc_new(&o, &e), -EINVAL);
	o.pred = 0;
	o.gap_base = VAL_BASE_START + 1;
	assert_int_equal(venc_new(&o, &e), -EINVAL);
	o.gap_base = 0;
	o.timing = VAL_TIMING_LOSSLESS;
	o.block_events = VAL_MAX_BLOCK_EVENTS + 1;
	assert_int_equal(venc_new(&o, &e), -EINVAL);
	o.block_events = 0;
	assert_int_equal(venc_new(&o, &e), 0);
	assert_int_equal(venc_add(e, 5, 1, 1, vals, 2), 0);
	assert_int_equal(venc_add(e, 5, 1, 1, vals, 1), -EINVAL);
	assert_int_equal(venc_add(e, 6, 1, 1, NULL, 1), -EINVAL);
	assert_int_equal(venc_add(e, 6, 1, 1, vals, VAL_MAX_FIELDS + 1), -EINVAL);
	assert_int_equal(venc_add(e, UINT32_MAX, 1, 1, vals, 0), -EINVAL);
	assert_true(venc_n_events(e) == 1);
	venc_free(e);
	venc_free(NULL);
}

static void test_values_decode_rejects_inconsistent_terminals(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct venc_opts o = {.block_events = 100, .timing = VAL_TIMING_LOSSLESS};
	struct tfs_buf sec;
	struct tfs_diag d;
	struct tfs_vsec v;
	struct vblock b;
	struct evset s;
	uint8_t nv[MAX_TERMS];

	gen_jittery(&s, 250, &seed, false);
	encode(&s, &o, &sec);
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
	vblock_init(&b);
	memset(&d, 0, sizeof(d));
	assert_int_equal(vsec_decode_block(&v, 1, s.term + 100, s.n_vals_of, 3, &b, &d),
			 -TFS_ECORRUPT);
	assert_string_equal(d.section, "values");
	memcpy(nv, s.n_vals_of, sizeof(nv));
	nv[2] = 1; /* one field fewer: the vals column is not consumed exactly */
	assert_int_equal(vsec_decode_block(&v, 1, s.term + 100, nv, 4, &b, NULL), -TFS_ECORRUPT);
	nv[2] = 3;
	assert_int_equal(vsec_decode_block(&v, 1, s.term + 100, nv, 4, &b, NULL), -TFS_ECORRUPT);
	nv[2] = VAL_MAX_FIELDS + 1;
	assert_int_equal(vsec_decode_block(&v, 1, s.term + 100, nv, 4, &b, NULL), -TFS_ECORRUPT);
	/* the same vblock still decodes correctly afterwards */
	assert_int_equal(vsec_decode_block(&v, 2, s.term + 200, s.n_vals_of, 4, &b, NULL), 0);
	assert_int_equal(b.n_events, 50);
	assert_true(b.ts_ns[49] == s.ts[249]);
	vblock_fini(&b);
	buf_fini(&sec);
	ev_fini(&s);
}

/*
 * Golden lossless section, computed by hand from FORMAT.md §7: block_events 4,
 * t0 has 2 fields (a strided offset and a constant), t1 none.
 */
static const uint32_t golden_terms[] = {0, 1, 0, 0, 1};
static const uint8_t golden_nv[] = {2, 0};

static void golden_events(struct tfs_venc *e)
{
	const uint64_t v0[] = {4096, 7}, v2[] = {8192, 7}, v3[] = {12288, 7};

	assert_int_equal(venc_add(e, 0, 1000, 50, v0, 2), 0);
	assert_int_equal(venc_add(e, 1, 1100, 10, NULL, 0), 0);
	assert_int_equal(venc_add(e, 0, 1300, 52, v2, 2), 0);
	assert_int_equal(venc_add(e, 0, 1500, 49, v3, 2), 0);
	assert_int_equal(venc_add(e, 1, 1400, 10, NULL, 0), 0);
}

static void golden_section(struct tfs_buf *sec, int version)
{
	struct venc_opts o = {.block_events = 4, .timing = VAL_TIMING_LOSSLESS, .version = version};
	struct tfs_venc *e;

	assert_int_equal(venc_new(&o, &e), 0);
	golden_events(e);
	buf_init(sec);
	assert_int_equal(venc_finish(e, sec), 0);
	venc_free(e);
}

static void check_raw_block(const struct tfs_buf *sec, uint64_t idx, const uint8_t *want,
			    size_t want_len)
{
	const uint8_t *ent = sec->data + 36 + 16 * idx;
	uint32_t stored = le_get32(ent + 8), raw_len = le_get32(ent + 12);
	uint8_t raw[64];

	assert_int_equal(raw_len, want_len);
	assert_true(le_get64(ent) + stored <= sec->len);
	assert_int_equal(zs_decompress(sec->data + le_get64(ent), stored, raw, raw_len, 0, "t",
				       NULL),
			 0);
	assert_memory_equal(raw, want, want_len);
}

/* TFV1, as writers before TFV2 wrote it: gaps from the previous start, always predicted. */
static void test_values_golden_lossless_section_v1(void **state)
{
	static const uint8_t hdr[36] = {
		'T', 'F', 'V', '1', 1, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		5,   0,	  0,   0,   0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,
	};
	static const uint8_t raw0[] = {
		0x04, 0x07, 0x04, 0x08,			    /* 4 events, column lengths */
		0xd0, 0x0f, 0xc8, 0x01, 0x90, 0x03, 0x00,   /* ts: 1000 anchor, 100, 200, 200-200 */
		0x64, 0x14, 0x04, 0x05,			    /* dur: 50, 10, 52-50, 49-52 */
		0x80, 0x40, 0x0e, 0x80, 0x40, 0x00, 0x00, 0x00, /* vals: 4096 7, +4096 0, 0 0 */
	};
	static const uint8_t raw1[] = {0x01, 0x02, 0x01, 0x00, 0xf0, 0x15, 0x14};
	struct tfs_buf sec;
	struct tfs_vsec v;
	struct vblock b;

	golden_section(&sec, 1);
	assert_memory_equal(sec.data, hdr, sizeof(hdr));
	assert_true(le_get64(sec.data + 36) == 36 + 32);
	assert_true(le_get64(sec.data + 52) == 36 + 32 + le_get32(sec.data + 44));
	check_raw_block(&sec, 0, raw0, sizeof(raw0));
	check_raw_block(&sec, 1, raw1, sizeof(raw1));
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
	assert_int_equal(v.version, 1);
	vblock_init(&b);
	assert_int_equal(vsec_decode_block(&v, 1, golden_terms + 4, golden_nv, 2, &b, NULL), 0);
	assert_true(b.first_event == 4 && b.n_events == 1);
	assert_true(b.ts_ns[0] == 1400 && b.dur_ns[0] == 10);
	assert_int_equal(vsec_decode_block(&v, 0, golden_terms, golden_nv, 2, &b, NULL), 0);
	assert_true(b.ts_ns[3] == 1500 && b.dur_ns[3] == 49 && b.vals[b.val_off[3]] == 12288);
	vblock_fini(&b);
	buf_fini(&sec);
}

/*
 * The same events in TFV2: gaps from the previous end (1100 - 1050, 1300 - 1110, 1500 -
 * 1352), the predictor byte chosen by the writer (both columns predicted: on columns this
 * short the trial compressions tie, and a tie keeps prediction).
 */
static void test_values_golden_lossless_section_v2(void **state)
{
	static const uint8_t raw0[] = {
		0x04, 0x03, 0x06, 0x04, 0x08,		  /* 4 events, predicted, column lengths */
		0xd0, 0x0f, 0x64, 0xfc, 0x02, 0x53,	  /* ts: 1000 anchor, 50, 190, 148-190 */
		0x64, 0x14, 0x04, 0x05,			  /* dur: 50, 10, 52-50, 49-52 */
		0x80, 0x40, 0x0e, 0x80, 0x40, 0x00, 0x00, 0x00, /* vals: 4096 7, +4096 0, 0 0 */
	};
	static const uint8_t raw1[] = {0x01, 0x03, 0x02, 0x01, 0x00, 0xf0, 0x15, 0x14};
	struct tfs_buf sec;
	struct tfs_vsec v;
	struct vblock b;

	golden_section(&sec, 2);
	assert_memory_equal(sec.data, "TFV2", 4);
	check_raw_block(&sec, 0, raw0, sizeof(raw0));
	check_raw_block(&sec, 1, raw1, sizeof(raw1));
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
	assert_int_equal(v.version, 2);
	vblock_init(&b);
	assert_int_equal(vsec_decode_block(&v, 0, golden_terms, golden_nv, 2, &b, NULL), 0);
	assert_true(b.ts_ns[2] == 1300 && b.ts_ns[3] == 1500 && b.dur_ns[3] == 49);
	vblock_fini(&b);
	buf_fini(&sec);
}

/* The committed sections of tests/data/golden/values_v2.txt, as written there. */
struct gold_v2 {
	uint8_t *bin;
	size_t bin_len;
	uint8_t nv[3];
	size_t off[2], len[2];
	int timing[2];
	size_t n[2];
	struct evset ev[2];
};


static void gold_v2_load(struct gold_v2 *g)
{
	char line[512];
	FILE *f;
	int sec = -1;

	memset(g, 0, sizeof(*g));
	g->bin = slurp(TFS_TEST_DATA "/golden/values_v2.bin", &g->bin_len);
	f = fopen(TFS_TEST_DATA "/golden/values_v2.txt", "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long x[6];
		unsigned int t;
		int k;

		if (line[0] == '#')
			continue;
		if (sscanf(line, "terminals %hhu %hhu %hhu", &g->nv[0], &g->nv[1], &g->nv[2]) == 3)
			continue;
		if (sscanf(line, "section %llu %llu %llu %llu", &x[0], &x[1], &x[2], &x[3]) == 4) {
			sec++;
			assert_true(sec < 2);
			g->off[sec] = x[0];
			g->len[sec] = x[1];
			g->timing[sec] = (int)x[2];
			g->n[sec] = x[3];
			ev_init(&g->ev[sec], x[3], 3);
			memcpy(g->ev[sec].n_vals_of, g->nv, 3);
			continue;
		}
		k = sscanf(line, "%u %llu %llu %llu %llu", &t, &x[0], &x[1], &x[2], &x[3]);
		assert_true(sec >= 0 && k >= 3 && t < 3 && k == 3 + g->nv[t]);
		memcpy(ev_push(&g->ev[sec], t, x[0], x[1]), x + 2, g->nv[t] * sizeof(x[0]));
	}
	fclose(f);
	assert_int_equal(sec, 1);
	assert_true(g->off[1] + g->len[1] == g->bin_len);
}

static void gold_v2_free(struct gold_v2 *g)
{
	ev_fini(&g->ev[0]);
	ev_fini(&g->ev[1]);
	free(g->bin);
}

/*
 * The committed TFV2 sections decode to exactly the committed numbers, and between them
 * hold every predictor pair and both gap bases.
 */
static void test_values_golden_v2_file_decodes_as_committed(void **state)
{
	struct vwords w = {0};
	struct gold_v2 g;
	struct vblock b;
	unsigned int preds_seen = 0;

	gold_v2_load(&g);
	vblock_init(&b);
	for (int k = 0; k < 2; k++) {
		const struct evset *s = &g.ev[k];
		struct tfs_vsec v;

		assert_int_equal(vsec_open(&v, g.bin + g.off[k], g.len[k], g.off[k], NULL), 0);
		assert_int_equal(v.version, 2);
		assert_int_equal(v.timing, g.timing[k]);
		assert_true(v.n_events == g.n[k]);
		for (uint64_t blk = 0; blk < v.n_blocks; blk++) {
			uint64_t first = blk * v.block_events;

			assert_int_equal(vsec_block_words(&v, blk, &w, NULL), 0);
			preds_seen |= 1u << w.pred;
			assert_int_equal(vsec_decode_block(&v, blk, s->term + first, s->n_vals_of,
							   3, &b, NULL),
					 0);
			for (uint32_t i = 0; i < b.n_events; i++) {
				size_t nv = s->n_vals_of[s->term[first + i]];

				assert_true(b.ts_ns[i] == s->ts[first + i]);
				assert_true(b.dur_ns[i] == s->dur[first + i]);
				assert_int_equal(b.val_off[i + 1] - b.val_off[i], nv);
				assert_memory_equal(b.vals + b.val_off[i],
						    s->vals + s->val_off[first + i],
						    nv * sizeof(uint64_t));
			}
		}
	}
	/* every predictor pair, and a lossy block with gaps from the previous start */
	assert_int_equal(preds_seen, 0xf | 1u << (VAL_GAP_START | VAL_PRED_DUR));
	vwords_fini(&w);
	vblock_fini(&b);
	gold_v2_free(&g);
}

/* A clock read at real times: floor(phase + n q), the phase moving every @seg_ns. */
struct clock_sim {
	double q, phase;
	uint64_t seg_ns, next_jump, base;
	uint64_t *seed;
};

static uint64_t clock_read(struct clock_sim *c, double real_ns)
{
	double n = floor(real_ns / c->q);

	if (real_ns >= (double)c->next_jump) {
		c->phase = (double)tu_below(c->seed, 1000) / 1000.0;
		c->next_jump += c->seg_ns;
	}
	return c->base + (uint64_t)floor(c->phase + n * c->q);
}

/*
 * A call loop timed by a clock of tick @q whose phase moves every @seg_ns: @odd_pct percent
 * of the events carry a time no clock reads (a computed or foreign time).
 */
static void gen_clocked(struct evset *s, size_t n, uint64_t *seed, double q, uint64_t seg_ns,
			unsigned int odd_pct)
{
	struct clock_sim c = {q, 0.25, seg_ns, seg_ns, UINT64_C(1) << 40, seed};
	double real = 1e6;

	ev_init(s, n, 5);
	for (size_t i = 0; i < n; i++) {
		uint32_t t = (uint32_t)(i % 5);
		double len = t == 4 ? 1e6 + (double)tu_below(seed, 3000000) : 60 + (double)tu_below(seed, 900);
		uint64_t ts, end, *v;

		real += 40 + (double)tu_below(seed, 200);
		ts = clock_read(&c, real);
		real += len;
		end = clock_read(&c, real);
		if (tu_below(seed, 100) < odd_pct) {
			ts += tu_below(seed, 3) ? 1 + tu_below(seed, 7) : tu_rand(seed);
			end = ts + tu_below(seed, 100000);
		}
		v = ev_push(s, t, ts, end - ts);
		for (uint32_t j = 0; j < s->n_vals_of[t]; j++)
			v[j] = i * 64 + j;
	}
}

/* The predictor bytes of @sec's blocks, or-ed, and how many blocks count ticks. */
static unsigned int blocks_with_ticks(const struct tfs_buf *sec, uint64_t *n_blocks)
{
	struct vwords w = {0};
	struct tfs_vsec v;
	unsigned int with = 0;

	assert_int_equal(vsec_open(&v, sec->data, sec->len, 0, NULL), 0);
	for (uint64_t blk = 0; blk < v.n_blocks; blk++) {
		assert_int_equal(vsec_block_words(&v, blk, &w, NULL), 0);
		with += !!(w.pred & VAL_TICKS);
		assert_int_equal(!!(w.pred & VAL_TICKS), w.ticks_len > 0);
	}
	*n_blocks = v.n_blocks;
	vwords_fini(&w);
	return with;
}

/*
 * Clocks of several tick lengths (this VM's EPYC, 5.2 ns, a 24 MHz counter, microseconds)
 * whose phase moves every few milliseconds: every block counts ticks, decodes exactly and
 * is smaller than in nanoseconds.
 */
static void test_values_ticks_follow_real_clocks(void **state)
{
	static const double ticks[] = {10.014856, 5.2, 41.666667, 1000.0};
	uint64_t seed = tu_seed(__func__);

	for (size_t k = 0; k < sizeof(ticks) / sizeof(ticks[0]); k++) {
		/* ticks against nanoseconds in varints (coded columns: test_values_coded_*) */
		struct venc_opts o = {.timing = VAL_TIMING_LOSSLESS, .coded = VAL_CODED_NEVER};
		struct tfs_buf with, without;
		uint64_t n_blocks;
		unsigned int n_with;
		struct evset s;

		gen_clocked(&s, 20000, &seed, ticks[k], 4000000, 0);
		encode(&s, &o, &with);
		check_section(&with, &s, VAL_TIMING_LOSSLESS);
		n_with = blocks_with_ticks(&with, &n_blocks);
		assert_int_equal(n_with, n_blocks);
		o.ticks = VAL_TICKS_NEVER;
		encode(&s, &o, &without);
		check_section(&without, &s, VAL_TIMING_LOSSLESS);
		assert_int_equal(blocks_with_ticks(&without, &n_blocks), 0);
		print_message("# tick %.6f ns: %zu bytes in ticks, %zu in ns\n", ticks[k], with.len,
			      without.len);
		assert_true(with.len * 20 < without.len * 19);
		/* any gap base and predictor choice in ticks */
		o.ticks = 0;
		for (int base = VAL_BASE_END; base <= VAL_BASE_START; base++) {
			for (size_t p = 0; p < N_PRED_OPTS; p++) {
				struct tfs_buf sec;

				o.gap_base = base;
				o.pred = pred_opts[p];
				encode(&s, &o, &sec);
				check_section(&sec, &s, VAL_TIMING_LOSSLESS);
				check_preds(&sec, &o);
				/* gaps from the previous start span its phase moves too */
				if (base == VAL_BASE_END)
					assert_true(blocks_with_ticks(&sec, &n_blocks) > 0);
				buf_fini(&sec);
			}
		}
		o.gap_base = 0;
		o.pred = 0;
		buf_fini(&with);
		buf_fini(&without);
		ev_fini(&s);
	}
}

/*
 * Times no clock reads (off by a few ns, or anywhere in 64 bits) among clocked ones are
 * corrected exactly; with too many of them blocks fall back to nanoseconds.
 */
static void test_values_ticks_correct_odd_times(void **state)
{
	uint64_t seed = tu_seed(__func__);
	const uint32_t block_sizes[] = {4, 100, 4096};

	for (size_t k = 0; k < sizeof(block_sizes) / sizeof(block_sizes[0]); k++) {
		struct venc_opts o = {.block_events = block_sizes[k],
				      .timing = VAL_TIMING_LOSSLESS,
				      .coded = VAL_CODED_NEVER};
		struct tfs_buf sec, ns;
		uint64_t n_blocks;
		unsigned int with;
		struct evset s;

		gen_clocked(&s, 12000, &seed, 10.014856, 4000000, 3);
		encode(&s, &o, &sec);
		check_section(&sec, &s, VAL_TIMING_LOSSLESS);
		with = blocks_with_ticks(&sec, &n_blocks);
		o.ticks = VAL_TICKS_NEVER;
		encode(&s, &o, &ns);
		o.ticks = 0;
		print_message("# %u events per block, 3%% odd times: %u of %llu blocks in ticks, "
			      "%zu bytes (%zu in ns)\n",
			      block_sizes[k], with, (unsigned long long)n_blocks, sec.len, ns.len);
		/* short blocks estimate the tick from fewer steps: fewer take it */
		assert_true(sec.len <= ns.len);
		if (block_sizes[k] >= 4096)
			assert_true(with * 2 >= n_blocks && sec.len < ns.len);
		buf_fini(&sec);
		buf_fini(&ns);
		ev_fini(&s);

		gen_clocked(&s, 12000, &seed, 10.014856, 4000000, 60);
		encode(&s, &o, &sec);
		check_section(&sec, &s, VAL_TIMING_LOSSLESS);
		with = blocks_with_ticks(&sec, &n_blocks);
		if (block_sizes[k] >= 100)
			assert_true(with * 10 <= n_blocks);
		buf_fini(&sec);
		ev_fini(&s);
	}
}

/* The blocks' times of @sec decoded with the patches @l applied, compared with @want. */
static void check_patched(const struct tfs_buf *sec, const struct vpatch_list *l,
			  const struct evset *want)
{
	struct tfs_vsec v;
	struct vblock blk;
	uint32_t k = 0;

	assert_int_equal(vsec_open(&v, sec->data, sec->len, 0, NULL), 0);
	vblock_init(&blk);
	for (uint64_t b = 0; b < v.n_blocks; b++) {
		uint64_t first = b * v.block_events;
		uint32_t n = 0;

		while (k + n < l->n && l->e[k + n].block == b)
			n++;
		assert_int_equal(vsec_decode_block_patched(&v, b, l->e + k, n, want->term + first,
							   want->n_vals_of, want->n_terms, &blk,
							   NULL),
				 0);
		for (uint32_t i = 0; i < blk.n_events; i++) {
			assert_true(blk.ts_ns[i] == want->ts[first + i]);
			assert_true(blk.dur_ns[i] == want->dur[first + i]);
		}
		k += n;
	}
	assert_int_equal(k, l->n);
	vblock_fini(&blk);
}

/* Clocked events @a and @b: the same but for start times 5000003 ns later in @b. */
static void shifted_pair(struct evset *a, struct evset *b, uint64_t *seed)
{
	gen_clocked(a, 4096, seed, 10.014856, 4000000, 0);
	gen_clocked(b, 4096, seed, 10.014856, 4000000, 0);
	memcpy(b->term, a->term, a->n * sizeof(*a->term));
	memcpy(b->vals, a->vals, a->vals_cap * sizeof(*a->vals));
	for (size_t i = 0; i < a->n; i++) {
		b->ts[i] = a->ts[i] + 5000003;
		b->dur[i] = a->dur[i];
	}
}

/*
 * FORMAT.md §8.1 with ticks: a stream whose times are another's shifted by a constant (a
 * thread of the same loop started later) has the same steps, so the same tick counts and
 * corrections; it shares the other's blocks with one patched word per block (the anchor)
 * and decodes to its own times. One nanosecond more in one duration changes a block's
 * corrections, and blocks with different ticks headers are not shared.
 */
static void test_values_ticks_blocks_patch(void **state)
{
	uint64_t seed = tu_seed(__func__);
	/* varint columns: a coded column's words are bytes (test_values_coded_blocks_patch) */
	const struct venc_opts o = {.block_events = 1024, .timing = VAL_TIMING_LOSSLESS,
				    .coded = VAL_CODED_NEVER};
	struct tfs_buf sa, sb, sc;
	struct tfs_vsec va, vb, vc;
	struct vwords wa = {0}, wc = {0};
	struct vpatch_list l;
	struct evset a, b;

	shifted_pair(&a, &b, &seed);
	encode(&a, &o, &sa);
	encode(&b, &o, &sb);
	assert_int_equal(vsec_open(&va, sa.data, sa.len, 0, NULL), 0);
	assert_int_equal(vsec_open(&vb, sb.data, sb.len, 0, NULL), 0);
	assert_int_equal(vpatch_diff(&va, &vb, 100, &l), 0);
	assert_int_equal(l.n, va.n_blocks);
	for (uint32_t k = 0; k < l.n; k++)
		assert_true(l.e[k].block == k && l.e[k].col == 0 /* ts */ && l.e[k].index == 0);
	check_patched(&sa, &l, &b);
	vpatch_list_fini(&l);

	b.dur[100] += 1;
	encode(&b, &o, &sc);
	assert_int_equal(vsec_open(&vc, sc.data, sc.len, 0, NULL), 0);
	assert_int_equal(vsec_block_words(&va, 0, &wa, NULL), 0);
	assert_int_equal(vsec_block_words(&vc, 0, &wc, NULL), 0);
	assert_true(wa.pred & wc.pred & VAL_TICKS);
	assert_true(wa.ticks_len != wc.ticks_len || memcmp(wa.ticks, wc.ticks, wa.ticks_len));
	assert_int_equal(vpatch_diff(&va, &vc, 100, &l), -E2BIG);
	vwords_fini(&wa);
	vwords_fini(&wc);
	buf_fini(&sa);
	buf_fini(&sb);
	buf_fini(&sc);
	ev_fini(&a);
	ev_fini(&b);
}

/*
 * Block words @w's ts column is all of a word model 2 column (FORMAT.md §7.4.3) of the @n
 * events of terminals @term: its bytes decode to @n words, none left over.
 */
static void coded_words_are_the_column(const struct vwords *w, const uint32_t *term, uint32_t n)
{
	uint8_t *col = malloc(w->n[0] ? w->n[0] : 1), *slot = malloc(n);
	uint64_t *words = malloc(n * sizeof(*words));
	uint32_t seen[MAX_TERMS], n_seen = 0;
	struct vrc_model m;

	assert_true(col && slot && words);
	for (size_t i = 0; i < w->n[0]; i++)
		col[i] = (uint8_t)w->w[i];
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = 0;

		while (k < n_seen && seen[k] != term[i])
			k++;
		if (k == n_seen)
			seen[n_seen++] = term[i];
		slot[i] = vrc_slot_of(k);
	}
	assert_int_equal(vrc_model_init(&m, VRC_WORDS_2), 0);
	assert_null(vrc_decode(&m, slot, n, col, w->n[0], words));
	vrc_model_fini(&m);
	free(col);
	free(slot);
	free(words);
}

/*
 * FORMAT.md §8.1 with range-coded columns: their words are their bytes. A stream whose
 * times are another's shifted by a constant differs from the anchor on in its coded ts
 * column; patched byte by byte it still decodes to its own times. A patch word over 255
 * in a coded column is corruption.
 */
static void test_values_coded_blocks_patch(void **state)
{
	uint64_t seed = tu_seed(__func__);
	const struct venc_opts o = {.block_events = 1024, .timing = VAL_TIMING_LOSSLESS,
				    .coded = VAL_CODED_ALWAYS};
	struct tfs_buf sa, sb;
	struct tfs_vsec va, vb;
	struct vwords wa = {0};
	struct vpatch_list l;
	struct evset a, b;
	struct vpatch bad = {0, 0, 0, 0x100};
	struct vblock blk;
	struct tfs_diag d;

	shifted_pair(&a, &b, &seed);
	encode(&a, &o, &sa);
	encode(&b, &o, &sb);
	assert_int_equal(vsec_open(&va, sa.data, sa.len, 0, NULL), 0);
	assert_int_equal(vsec_open(&vb, sb.data, sb.len, 0, NULL), 0);
	assert_int_equal(vsec_block_words(&va, 0, &wa, NULL), 0);
	assert_true(wa.pred & VAL_CODED_TS);
	/* its words are its bytes: as many as the column has, none over 0xff */
	print_message("# a coded ts column of 1024 events: %zu bytes\n", wa.n[0]);
	for (size_t i = 0; i < wa.n[0]; i++)
		assert_true(wa.w[i] <= 0xff);
	coded_words_are_the_column(&wa, a.term, 1024);
	assert_int_equal(vpatch_diff(&va, &vb, 100000, &l), 0);
	assert_true(l.n >= va.n_blocks);
	for (uint32_t k = 0; k < l.n; k++)
		assert_true(l.e[k].col == 0 && l.e[k].word <= 0xff);
	check_patched(&sa, &l, &b);
	vpatch_list_fini(&l);

	vblock_init(&blk);
	memset(&d, 0, sizeof(d));
	assert_int_equal(vsec_decode_block_patched(&va, 0, &bad, 1, a.term, a.n_vals_of, a.n_terms,
						   &blk, &d),
			 -TFS_ECORRUPT);
	assert_non_null(strstr(d.reason, "not a byte"));
	vblock_fini(&blk);
	vwords_fini(&wa);
	buf_fini(&sa);
	buf_fini(&sb);
	ev_fini(&a);
	ev_fini(&b);
}

/*
 * Range-coded timing columns (FORMAT.md §7.4.2) on noisy times: the writer codes columns
 * where that is smaller, and on times whose call sites each keep their own spread that is
 * nearly every block, lossless and lossy; always coding decodes alike.
 */
static void test_values_coded_columns_shrink_noisy_times(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct evset s;

	gen_jittery(&s, 100000, &seed, false);
	for (int timing = VAL_TIMING_LOSSLESS; timing <= VAL_TIMING_LOSSY; timing++) {
		struct venc_opts o = {.timing = timing, .rel_err = 0.1};
		struct tfs_buf coded, plain, always;
		struct vwords w = {0};
		struct tfs_vsec v;
		uint64_t n_coded = 0;

		encode(&s, &o, &coded);
		check_section(&coded, &s, timing);
		o.coded = VAL_CODED_NEVER;
		encode(&s, &o, &plain);
		check_section(&plain, &s, timing);
		o.coded = VAL_CODED_ALWAYS;
		encode(&s, &o, &always);
		check_section(&always, &s, timing);
		assert_int_equal(vsec_open(&v, coded.data, coded.len, 0, NULL), 0);
		for (uint64_t blk = 0; blk < v.n_blocks; blk++) {
			assert_int_equal(vsec_block_words(&v, blk, &w, NULL), 0);
			n_coded += (w.pred & (VAL_CODED_TS | VAL_CODED_DUR)) != 0;
		}
		print_message("# %s: %.3f bytes/event range-coded (%llu of %llu blocks), %.3f in "
			      "varints, %.3f always coded\n",
			      timing == VAL_TIMING_LOSSY ? "lossy 0.1" : "lossless",
			      (double)coded.len / (double)s.n, (unsigned long long)n_coded,
			      (unsigned long long)v.n_blocks, (double)plain.len / (double)s.n,
			      (double)always.len / (double)s.n);
		assert_true(n_coded * 10 >= v.n_blocks * 9);
		assert_true(coded.len * 20 < plain.len * 19);
		vwords_fini(&w);
		buf_fini(&coded);
		buf_fini(&plain);
		buf_fini(&always);
	}
	ev_fini(&s);
}

/*
 * A choice kept for many blocks (VAL_STICKY) is tried against the others again within
 * VAL_STICKY_RECHECK blocks of the data changing: regular gaps that a per-terminal predictor
 * explains, then random ones that it only makes worse.
 */
static void test_values_kept_choice_follows_a_change(void **state)
{
	const size_t half = 2 * VAL_STICKY_RECHECK, n = 2 * half * 4096;
	uint64_t seed = tu_seed(__func__), ts = 1000;
	struct venc_opts o = {.timing = VAL_TIMING_LOSSLESS, .coded = VAL_CODED_NEVER,
			      .ticks = VAL_TICKS_NEVER};
	struct vwords w = {0};
	struct tfs_buf sec;
	struct tfs_vsec v;
	struct evset s;

	ev_init(&s, n, 4);
	for (uint32_t t = 0; t < 4; t++)
		s.n_vals_of[t] = 0;
	for (size_t i = 0; i < n; i++)
		push_regular_or_noise(&s, (uint32_t)(i % 4), i < half * 4096, &seed, &ts);
	encode_lossless_blocks(&s, &o, &sec, &v, 2 * half);
	for (uint64_t blk = 0; blk < v.n_blocks; blk++) {
		assert_int_equal(vsec_block_words(&v, blk, &w, NULL), 0);
		if (blk < half)
			assert_int_equal(w.pred & VAL_PRED_ALL, VAL_PRED_ALL);
		else if (blk >= half + VAL_STICKY_RECHECK)
			assert_int_equal(w.pred & VAL_PRED_ALL, 0);
	}
	vwords_fini(&w);
	buf_fini(&sec);
	ev_fini(&s);
	(void)state;
}

/*
 * Durations range coding loses on for a long stretch are then coded only now and then
 * (FORMAT.md §7.4.2, the writers' note), and every block again soon after they turn noisy,
 * where coding them wins. Durations that cycle through 13 values far apart are what zstd
 * codes in a few bytes a block (the varints repeat) and the coder in about two a word.
 */
static void test_values_coded_durations_resume_after_periodic_ones(void **state)
{
	const uint64_t half = 40;
	struct venc_opts o = {.timing = VAL_TIMING_LOSSLESS};
	uint64_t seed = tu_seed(__func__), n_coded[2] = {0, 0};
	struct vwords w = {0};
	struct tfs_buf sec;
	struct tfs_vsec v;
	struct evset s;

	gen_jittery(&s, 2 * half * VAL_DEFAULT_BLOCK_EVENTS, &seed, false);
	for (size_t i = 0; i < half * VAL_DEFAULT_BLOCK_EVENTS; i++)
		s.dur[i] = 500 + 40961 * (i % 13);
	encode_lossless_blocks(&s, &o, &sec, &v, 2 * half);
	for (uint64_t blk = 0; blk < v.n_blocks; blk++) {
		assert_int_equal(vsec_block_words(&v, blk, &w, NULL), 0);
		/* the noisy half from its 17th block on: a retry has come and won */
		if (blk < half || blk >= half + 16)
			n_coded[blk >= half] += (w.pred & VAL_CODED_DUR) != 0;
	}
	print_message("# coded durations: %llu of %llu periodic blocks, %llu of the last %llu "
		      "noisy ones\n",
		      (unsigned long long)n_coded[0], (unsigned long long)half,
		      (unsigned long long)n_coded[1], (unsigned long long)half - 16);
	assert_int_equal(n_coded[0], 0);
	assert_int_equal(n_coded[1], half - 16);
	vwords_fini(&w);
	buf_fini(&sec);
	ev_fini(&s);
}

/* @raw as the only block of a TFV3 lossless section of @n events. */
static void section_of_raw(struct tfs_buf *sec, const uint8_t *raw, size_t raw_len, uint32_t n)
{
	struct tfs_buf frame;
	uint8_t h[36 + 16];

	buf_init(&frame);
	assert_int_equal(zs_compress(&frame, raw, raw_len, 3), 0);
	memset(h, 0, sizeof(h));
	memcpy(h, "TFV3", 4);
	h[4] = VAL_TIMING_LOSSLESS;
	le_put32(h + 8, 4096);
	le_put64(h + 20, n);
	le_put64(h + 28, 1);
	le_put64(h + 36, sizeof(h));
	le_put32(h + 44, (uint32_t)frame.len);
	le_put32(h + 48, (uint32_t)raw_len);
	buf_init(sec);
	assert_int_equal(buf_put(sec, h, sizeof(h)), 0);
	assert_int_equal(buf_put(sec, frame.data, frame.len), 0);
	buf_fini(&frame);
}

/*
 * FORMAT.md §7.4.1's example block by hand, then with corrections on steps 1 and 3, then
 * with gaps from the start; and the ticks header checks of §7.6.
 */
static void test_values_golden_ticks_block(void **state)
{
	/* Q = 43013478093 = 0xa03cd96cd */
	static const uint8_t raw[] = {
		0x02, 0x08,			    /* 2 events, pred: ticks, nothing predicted */
		0xcd, 0xad, 0xb6, 0x9e, 0xa0, 0x01, /* Q */
		0x00,				    /* no corrections */
		0x03, 0x02, 0x00,		    /* column lengths */
		0xd0, 0x0f, 0x02,		    /* ts: 1000, gap of 1 tick */
		0x08, 0x00,			    /* dur: 4 ticks, 0 ticks */
	};
	static const uint8_t corrected[] = {
		0x02, 0x08, 0xcd, 0xad, 0xb6, 0x9e, 0xa0, 0x01,
		0x02, 0x00, 0x03, 0x01, 0x05, /* step 1: -2; step 3 (skip 1): -3 */
		0x03, 0x02, 0x00, 0xd0, 0x0f, 0x02, 0x08, 0x00,
	};
	static const uint32_t terms[2] = {0, 0};
	static const uint8_t nv[1] = {0};
	uint8_t bad[sizeof(raw) + 8];
	struct tfs_buf sec;
	struct tfs_vsec v;
	struct tfs_diag d;
	struct vblock b;

	vblock_init(&b);
	section_of_raw(&sec, raw, sizeof(raw), 2);
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
	assert_int_equal(v.version, 3);
	assert_int_equal(vsec_decode_block(&v, 0, terms, nv, 1, &b, NULL), 0);
	assert_true(b.ts_ns[0] == 1000 && b.dur_ns[0] == 40);
	assert_true(b.ts_ns[1] == 1050 && b.dur_ns[1] == 0);
	buf_fini(&sec);

	/* corrections: end 0 at 1040 - 2, the start at 1038 + 10, its end at 1048 - 3 */
	section_of_raw(&sec, corrected, sizeof(corrected), 2);
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
	assert_int_equal(vsec_decode_block(&v, 0, terms, nv, 1, &b, NULL), 0);
	assert_true(b.ts_ns[0] == 1000 && b.dur_ns[0] == 38);
	assert_true(b.ts_ns[1] == 1048 && b.dur_ns[1] == (uint64_t)-3);
	buf_fini(&sec);

	/* gaps from the start: 1 tick from 1000 */
	memcpy(bad, raw, sizeof(raw));
	bad[1] = VAL_TICKS | VAL_GAP_START;
	section_of_raw(&sec, bad, sizeof(raw), 2);
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
	assert_int_equal(vsec_decode_block(&v, 0, terms, nv, 1, &b, NULL), 0);
	assert_true(b.ts_ns[1] == 1010 && b.dur_ns[0] == 40);
	buf_fini(&sec);

	/* §7.6: each broken ticks header is refused as corruption of block 0 */
	{
		static const struct {
			size_t at;
			uint8_t byte;
			const char *what;
		} cases[] = {
			{7, 0x00, "tick length out of range"},	/* Q = 2^32 < 2^33, below */
			{8, 0x04, "more corrections than steps"}, /* 4 > 2n - 1 */
			{1, 0x48, "bad predictor byte"},	/* bit 6: undefined */
		};

		for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
			memcpy(bad, raw, sizeof(raw));
			bad[cases[k].at] = cases[k].byte;
			if (k == 0) /* Q = 2^32 as a six-byte varint */
				memcpy(bad + 2, "\x80\x80\x80\x80\x90\x00", 6);
			section_of_raw(&sec, bad, sizeof(raw), 2);
			assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
			memset(&d, 0, sizeof(d));
			assert_int_equal(vsec_decode_block(&v, 0, terms, nv, 1, &b, &d),
					 -TFS_ECORRUPT);
			assert_non_null(strstr(d.reason, "block 0"));
			assert_non_null(strstr(d.reason, cases[k].what));
			/* reported where the bad field starts: Q at 2, n_x at 8 */
			if (k < 2)
				assert_non_null(strstr(d.reason, k ? "raw offset 8" : "raw offset 2"));
			buf_fini(&sec);
		}
	}
	/* a correction of 0, and one past the last step */
	{
		static const uint8_t zero[] = {0x02, 0x08, 0xcd, 0xad, 0xb6, 0x9e, 0xa0, 0x01,
					       0x01, 0x00, 0x00, 0x03, 0x02, 0x00,
					       0xd0, 0x0f, 0x02, 0x08, 0x00};
		static const uint8_t past[] = {0x02, 0x08, 0xcd, 0xad, 0xb6, 0x9e, 0xa0, 0x01,
					       0x01, 0x03, 0x02, 0x03, 0x02, 0x00,
					       0xd0, 0x0f, 0x02, 0x08, 0x00};
		const uint8_t *blk[2] = {zero, past};
		const char *what[2] = {"correction of 0", "past the block's steps"};

		for (int k = 0; k < 2; k++) {
			section_of_raw(&sec, blk[k], sizeof(zero), 2);
			assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
			memset(&d, 0, sizeof(d));
			assert_int_equal(vsec_decode_block(&v, 0, terms, nv, 1, &b, &d),
					 -TFS_ECORRUPT);
			assert_non_null(strstr(d.reason, what[k]));
			buf_fini(&sec);
		}
	}
	/* ticks in a TFV2 section: bit 3 undefined there */
	section_of_raw(&sec, raw, sizeof(raw), 2);
	sec.data[3] = '2';
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
	memset(&d, 0, sizeof(d));
	assert_int_equal(vsec_decode_block(&v, 0, terms, nv, 1, &b, &d), -TFS_ECORRUPT);
	assert_non_null(strstr(d.reason, "bad predictor byte"));
	buf_fini(&sec);
	vblock_fini(&b);
}

/*
 * Golden lossy block, rel_err 0.5 (e_fix 2^31): bins {0}, [1,2]->1, [3,8]->4, [9,26]->13,
 * [27,80]->40 (FORMAT.md §7.5).
 */
static void test_values_golden_lossy_block(void **state)
{
	static const uint8_t raw[] = {
		0x04, 0x05, 0x04, 0x00,		    /* 4 events, column lengths */
		0xd0, 0x0f, 0x04, 0x00, 0x07,	    /* ts: 1000 exact, bins +2, 2-2, -2-2 */
		0x04, 0x02, 0x05, 0x02,		    /* dur bins: 2, 3-2, 0-3, 1-0 */
	};
	static const uint64_t ts[] = {1000, 1008, 1010, 1000}, dur[] = {3, 26, 0, 1};
	static const uint64_t want_ts[] = {1000, 1004, 1008, 1004}, want_dur[] = {4, 13, 0, 1};
	static const uint32_t terms[4] = {0};
	static const uint8_t nv[1] = {0};
	struct venc_opts o = {.block_events = 8, .timing = VAL_TIMING_LOSSY, .rel_err = 0.5,
			      .version = 1};
	struct tfs_venc *e;
	struct tfs_buf sec;
	struct tfs_vsec v;
	struct vblock b;

	assert_int_equal(venc_new(&o, &e), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(venc_add(e, 0, ts[i], dur[i], NULL, 0), 0);
	buf_init(&sec);
	assert_int_equal(venc_finish(e, &sec), 0);
	venc_free(e);
	assert_int_equal(sec.data[4], VAL_TIMING_LOSSY);
	assert_true(le_get64(sec.data + 12) == UINT64_C(0x3fe0000000000000));
	check_raw_block(&sec, 0, raw, sizeof(raw));
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
	vblock_init(&b);
	assert_int_equal(vsec_decode_block(&v, 0, terms, nv, 1, &b, NULL), 0);
	assert_memory_equal(b.ts_ns, want_ts, sizeof(want_ts));
	assert_memory_equal(b.dur_ns, want_dur, sizeof(want_dur));
	vblock_fini(&b);
	buf_fini(&sec);
}

/* The terminals of a section under test: events past the list get terminal 0. */
struct terms_of {
	const uint32_t *term;
	size_t n;
	const uint8_t *nv;
	uint32_t n_terminals;
};

/* Open and decode every block of possibly damaged bytes. @return the first error or 0 */
static int try_decode(const uint8_t *data, size_t len, const struct terms_of *to,
		      struct vblock *b)
{
	static uint32_t terms[64];
	struct tfs_diag d;
	struct tfs_vsec v;
	int rc;

	memset(&d, 0, sizeof(d));
	rc = vsec_open(&v, data, len, 0, &d);
	if (rc < 0) {
		assert_true(d.reason[0] != 0);
		return rc;
	}
	for (uint64_t blk = 0; blk < v.n_blocks; blk++) {
		uint32_t n = vsec_block_len(&v, blk);

		if (n > 64)
			return -E2BIG;
		for (uint32_t i = 0; i < n; i++) {
			uint64_t k = blk * v.block_events + i;

			terms[i] = k < to->n ? to->term[k] : 0;
		}
		rc = vsec_decode_block(&v, blk, terms, to->nv, to->n_terminals, b, &d);
		if (rc < 0) {
			assert_true(d.reason[0] != 0);
			assert_string_equal(d.section, "values");
			return rc;
		}
	}
	return 0;
}

/* Every proper prefix of a good section is refused as corrupt. */
static void check_truncations(const uint8_t *sec, size_t sec_len, const struct terms_of *to)
{
	struct vblock b;

	vblock_init(&b);
	assert_int_equal(try_decode(sec, sec_len, to, &b), 0);
	for (size_t len = 0; len < sec_len; len++) {
		uint8_t *copy = malloc(len + 1);

		memcpy(copy, sec, len);
		assert_int_equal(try_decode(copy, len, to, &b), -TFS_ECORRUPT);
		free(copy);
	}
	vblock_fini(&b);
}

/*
 * Every single-bit flip of a good section is refused, except in the header bytes
 * [@ok_from, @ok_to) where another valid value may decode (a lossy rel_err).
 */
static void check_bit_flips(const uint8_t *sec, size_t sec_len, const struct terms_of *to,
			    size_t ok_from, size_t ok_to)
{
	uint8_t *copy = malloc(sec_len);
	size_t accepted = 0;
	struct vblock b;

	assert_non_null(copy);
	memcpy(copy, sec, sec_len);
	vblock_init(&b);
	for (size_t bit = 0; bit < sec_len * 8; bit++) {
		int rc;

		copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		rc = try_decode(copy, sec_len, to, &b);
		/*
		 * "TFV2" and "TFV3" differ in bit 0 of byte 3, and only in blocks with ticks;
		 * "TFV4" and "TFV5" only in range-coded columns
		 */
		if (rc == 0 && bit == 24 && sec[3] >= '2' && sec[3] <= '5') {
			copy[3] = sec[3];
			continue;
		}
		if (rc == 0) {
			accepted++;
			if (bit / 8 < ok_from || bit / 8 >= ok_to)
				fprintf(stderr, "# bit %zu (byte %zu) flip accepted\n", bit,
					bit / 8);
			assert_true(bit / 8 >= ok_from && bit / 8 < ok_to);
		} else {
			assert_true(rc == -TFS_ECORRUPT || rc == -TFS_EFORMAT || rc == -E2BIG);
		}
		copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	if (accepted)
		fprintf(stderr, "# %zu flips of rel_err bits still valid\n", accepted);
	vblock_fini(&b);
	free(copy);
}

static const struct terms_of golden_to = {golden_terms, 5, golden_nv, 2};

static void test_values_every_truncation_is_corrupt(void **state)
{
	struct gold_v2 g;

	for (int version = 1; version <= VAL_VERSION; version++) {
		struct tfs_buf sec;

		golden_section(&sec, version);
		check_truncations(sec.data, sec.len, &golden_to);
		buf_fini(&sec);
	}
	gold_v2_load(&g);
	for (int k = 0; k < 2; k++) {
		struct terms_of to = {g.ev[k].term, g.ev[k].n, g.nv, 3};

		check_truncations(g.bin + g.off[k], g.len[k], &to);
	}
	gold_v2_free(&g);
}

static void test_values_every_bit_flip_is_rejected(void **state)
{
	struct gold_v2 g;

	for (int version = 1; version <= VAL_VERSION; version++) {
		struct tfs_buf sec;

		golden_section(&sec, version);
		check_bit_flips(sec.data, sec.len, &golden_to, 0, 0);
		buf_fini(&sec);
	}
	gold_v2_load(&g);
	for (int k = 0; k < 2; k++) {
		struct terms_of to = {g.ev[k].term, g.ev[k].n, g.nv, 3};
		bool lossy = g.timing[k] == VAL_TIMING_LOSSY;

		check_bit_flips(g.bin + g.off[k], g.len[k], &to, lossy ? 12 : 0, lossy ? 20 : 0);
	}
	gold_v2_free(&g);
}

static void test_values_header_flips_report_offsets(void **state)
{
	struct tfs_buf sec;
	struct tfs_diag d;
	struct tfs_vsec v;

	golden_section(&sec, 0);
	sec.data[3] = '6';
	memset(&d, 0, sizeof(d));
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 500, &d), -TFS_EFORMAT);
	sec.data[3] = '5';
	sec.data[4] = 7;
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 500, NULL), -TFS_EFORMAT);
	sec.data[4] = 1;
	sec.data[6] = 1;
	memset(&d, 0, sizeof(d));
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 500, &d), -TFS_ECORRUPT);
	assert_true(d.offset == 505);
	sec.data[6] = 0;
	le_put32(sec.data + 44, le_get32(sec.data + 44) + 1); /* block 0 stored length */
	memset(&d, 0, sizeof(d));
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 500, &d), -TFS_ECORRUPT);
	assert_true(d.offset == 500 + 52);
	buf_fini(&sec);
}

/* The mixed workload of the allocation-failure tests: three blocks, fields of 0..5. */
static int fa_add_all(struct tfs_venc *e, size_t first)
{
	for (size_t i = first; i < 20; i++) {
		uint64_t v[5] = {i, i * 4096, 7, UINT64_MAX - i, i * i};
		uint32_t t = (uint32_t)(i * 7 % 6);
		int rc = venc_add(e, t, 1000 * i + i * i, 100 + i, v, t);

		if (rc < 0)
			return rc;
	}
	return 0;
}

static void encode_with_failures(const struct venc_opts *o, const struct tfs_buf *ref)
{
	for (long n = 0;; n++) {
		struct tfs_venc *e;
		struct tfs_buf out;
		size_t done = 0;
		int rc;

		fa_arm(n);
		rc = venc_new(o, &e);
		if (rc == -ENOMEM) {
			fa_disarm();
			assert_null(e);
			continue;
		}
		assert_int_equal(rc, 0);
		for (; done < 20; done = venc_n_events(e)) {
			rc = fa_add_all(e, done);
			if (rc == 0)
				break;
			assert_int_equal(rc, -ENOMEM);
			fa_disarm();
		}
		buf_init(&out);
		rc = venc_finish(e, &out);
		if (rc < 0) {
			assert_int_equal(rc, -ENOMEM);
			fa_disarm();
			assert_int_equal(out.len, 0);
			assert_int_equal(venc_finish(e, &out), 0);
		}
		fa_disarm();
		assert_int_equal(out.len, ref->len);
		assert_memory_equal(out.data, ref->data, ref->len);
		buf_fini(&out);
		venc_free(e);
		if (fa_count() <= n)
			break;
	}
}

static void test_values_encoder_survives_each_allocation_failure(void **state)
{
	const struct venc_opts opts[] = {
		{.block_events = 7, .timing = VAL_TIMING_LOSSLESS},
		{.block_events = 7, .timing = VAL_TIMING_LOSSY, .rel_err = 0.05},
		{.block_events = 7, .timing = VAL_TIMING_NONE},
		{.block_events = 7, .timing = VAL_TIMING_LOSSLESS, .final_level = 19},
	};

	for (size_t k = 0; k < sizeof(opts) / sizeof(opts[0]); k++) {
		struct tfs_venc *e;
		struct tfs_buf ref;

		assert_int_equal(venc_new(&opts[k], &e), 0);
		assert_int_equal(fa_add_all(e, 0), 0);
		buf_init(&ref);
		assert_int_equal(venc_finish(e, &ref), 0);
		venc_free(e);
		encode_with_failures(&opts[k], &ref);
		buf_fini(&ref);
	}
}

/* Fields of fa_add_all's events, exact in every timing mode. */
static void check_fa_block(const struct vblock *b)
{
	for (uint32_t i = 0; i < b->n_events; i++) {
		uint64_t k = b->first_event + i;
		uint64_t v[5] = {k, k * 4096, 7, UINT64_MAX - k, k * k};
		uint32_t t = (uint32_t)(k * 7 % 6);

		assert_int_equal(b->val_off[i + 1] - b->val_off[i], t);
		assert_memory_equal(b->vals + b->val_off[i], v, t * sizeof(uint64_t));
		assert_true(b->dur_ns[i] >= 100 + k - (100 + k) / 20);
	}
}

static void test_values_decoder_survives_each_allocation_failure(void **state)
{
	struct venc_opts o = {.block_events = 7, .timing = VAL_TIMING_LOSSY, .rel_err = 0.05};
	uint8_t nv[6] = {0, 1, 2, 3, 4, 5};
	uint32_t terms[20];
	struct tfs_venc *e;
	struct tfs_buf sec;
	struct tfs_vsec v;

	for (uint32_t i = 0; i < 20; i++)
		terms[i] = i * 7 % 6;
	assert_int_equal(venc_new(&o, &e), 0);
	assert_int_equal(fa_add_all(e, 0), 0);
	buf_init(&sec);
	assert_int_equal(venc_finish(e, &sec), 0);
	venc_free(e);
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
	for (long n = 0;; n++) {
		struct vblock b;

		vblock_init(&b);
		fa_arm(n);
		for (uint64_t blk = 0; blk < v.n_blocks; blk++) {
			int rc = vsec_decode_block(&v, blk, terms + 7 * blk, nv, 6, &b, NULL);

			if (rc < 0) {
				assert_int_equal(rc, -ENOMEM);
				fa_disarm();
				rc = vsec_decode_block(&v, blk, terms + 7 * blk, nv, 6, &b, NULL);
			}
			assert_int_equal(rc, 0);
			check_fa_block(&b);
		}
		fa_disarm();
		vblock_fini(&b);
		if (fa_count() <= n)
			break;
	}
	buf_fini(&sec);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values_round_trip_lossless_random),
		cmocka_unit_test(test_values_round_trip_lossy_random_extremes),
		cmocka_unit_test(test_values_lossy_bounds_hold_and_shrink_jittery_timing),
		cmocka_unit_test(test_values_lossy_step_back_to_zero_stays_non_negative),
		cmocka_unit_test(test_values_strided_loop_is_tiny),
		cmocka_unit_test(test_values_none_stores_no_timing),
		cmocka_unit_test(test_values_empty_section_is_header_only),
		cmocka_unit_test(test_values_empty_section_with_final_level),
		cmocka_unit_test(test_values_rejects_bad_arguments),
		cmocka_unit_test(test_values_decode_rejects_inconsistent_terminals),
		cmocka_unit_test(test_values_lossy_bound_holds_on_adversarial_times),
		cmocka_unit_test(test_values_predictor_choice_follows_the_data),
		cmocka_unit_test(test_values_final_level_shrinks_and_keeps_contents),
		cmocka_unit_test(test_values_golden_lossless_section_v1),
		cmocka_unit_test(test_values_golden_lossless_section_v2),
		cmocka_unit_test(test_values_golden_lossy_block),
		cmocka_unit_test(test_values_ticks_follow_real_clocks),
		cmocka_unit_test(test_values_ticks_correct_odd_times),
		cmocka_unit_test(test_values_golden_ticks_block),
		cmocka_unit_test(test_values_ticks_blocks_patch),
		cmocka_unit_test(test_values_coded_blocks_patch),
		cmocka_unit_test(test_values_coded_columns_shrink_noisy_times),
		cmocka_unit_test(test_values_coded_durations_resume_after_periodic_ones),
		cmocka_unit_test(test_values_kept_choice_follows_a_change),
		cmocka_unit_test(test_values_golden_v2_file_decodes_as_committed),
		cmocka_unit_test(test_values_every_truncation_is_corrupt),
		cmocka_unit_test(test_values_every_bit_flip_is_rejected),
		cmocka_unit_test(test_values_header_flips_report_offsets),
		cmocka_unit_test(test_values_encoder_survives_each_allocation_failure),
		cmocka_unit_test(test_values_decoder_survives_each_allocation_failure),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
