/*
 * TFV3 values blocks that count clock ticks (FORMAT.md §7.4.1), against expectations taken
 * from the spec alone, not from the encoder: the committed golden sections of
 * tests/data/golden/values_v3.* (written by values_v3.py), raw blocks built here word by word
 * for each ticks check of §7.6 and for the edges of the step arithmetic (products beyond 64
 * bits, the floor of negative numbers, corrections that wrap), every truncation of the
 * golden sections, every bit flip of their first blocks (compressed, and raw then
 * recompressed) and allocation failure in turn. Encoder round trips belong to
 * test_codec_values.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "values_i.h"
#include "vticks_i.h"
#include "zstd_i.h"
#include "testfiles.h"
#include "testutil.h"
#include "ref_vrange.h"

#define PRED_TICKS 8u		     /* FORMAT.md §7.2: bit 3 of pred, the block counts ticks */
#define ONE_NS (UINT64_C(1) << 32)   /* Q counts units of 2^-32 ns */
#define EPYC_Q UINT64_C(43013478093) /* 10.014856 ns, §7.4.1's example */
#define RAW_CAP 512
#define MAX_CORR 8
#define MAX_EV 8

/* One correction of a ticks header (§7.2), as stored but for the zigzag. */
struct tick_corr {
	uint64_t skip;
	int64_t c;
};

/*
 * A raw block described word by word: a ticks header when pred has bit 3, then columns of
 * zigzagged residuals. Its events have terminal 0, which has no VAL fields.
 */
struct tblock {
	uint32_t n;
	uint8_t pred;
	uint64_t q;
	uint64_t n_x;	 /* as stored; may differ from n_corr */
	uint32_t n_corr; /* entries written */
	struct tick_corr corr[MAX_CORR];
	int64_t ts[MAX_EV];  /* ts column: ts_0, then gap residuals */
	int64_t dur[MAX_EV]; /* dur column: duration residuals */
};

struct rawb {
	uint8_t b[RAW_CAP];
	size_t len;
	size_t ticks_end; /* offset just past the ticks header (or the pred byte) */
};

static void put_u8(struct rawb *r, uint8_t v)
{
	assert_true(r->len < RAW_CAP);
	r->b[r->len++] = v;
}

static void put_varint(struct rawb *r, uint64_t v)
{
	while (v >= 0x80) {
		put_u8(r, (uint8_t)(v | 0x80));
		v >>= 7;
	}
	put_u8(r, (uint8_t)v);
}

static void put_col(struct rawb *col, const int64_t *w, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		put_varint(col, zigzag_enc(w[i]));
}

/* The raw bytes of @t (FORMAT.md §7.2). */
static void build_raw(const struct tblock *t, struct rawb *r)
{
	struct rawb ts = {.len = 0}, dur = {.len = 0};

	memset(r, 0, sizeof(*r));
	put_varint(r, t->n);
	put_u8(r, t->pred);
	if (t->pred & PRED_TICKS) {
		put_varint(r, t->q);
		put_varint(r, t->n_x);
		for (uint32_t i = 0; i < t->n_corr; i++) {
			put_varint(r, t->corr[i].skip);
			put_varint(r, zigzag_enc(t->corr[i].c));
		}
	}
	r->ticks_end = r->len;
	put_col(&ts, t->ts, t->n);
	put_col(&dur, t->dur, t->n);
	put_varint(r, ts.len);
	put_varint(r, dur.len);
	put_varint(r, 0);
	assert_true(r->len + ts.len + dur.len <= RAW_CAP);
	memcpy(r->b + r->len, ts.b, ts.len);
	r->len += ts.len;
	memcpy(r->b + r->len, dur.b, dur.len);
	r->len += dur.len;
}

/* One raw block of a section under construction. */
struct rawref {
	const uint8_t *p;
	size_t len;
	uint32_t n; /* its events */
};

/*
 * A values section (FORMAT.md §7.1) of magic "TFV<@version>" around the raw blocks
 * @raws, each compressed to one zstd frame with content size and checksum.
 */
static void make_section(struct tfs_buf *sec, char version, int timing, double rel_err,
			 uint32_t block_events, const struct rawref *raws, size_t n_raws)
{
	uint8_t head[36] = {'T', 'F', 'V', (uint8_t)version, (uint8_t)timing};
	uint64_t rel_bits = 0, n_events = 0, off = 36 + 16 * n_raws;
	struct tfs_buf frames;

	if (timing == VAL_TIMING_LOSSY)
		memcpy(&rel_bits, &rel_err, sizeof(rel_bits));
	for (size_t i = 0; i < n_raws; i++)
		n_events += raws[i].n;
	le_put32(head + 8, block_events);
	le_put64(head + 12, rel_bits);
	le_put64(head + 20, n_events);
	le_put64(head + 28, n_raws);
	buf_init(sec);
	buf_init(&frames);
	assert_int_equal(buf_put(sec, head, sizeof(head)), 0);
	for (size_t i = 0; i < n_raws; i++) {
		size_t before = frames.len;

		assert_int_equal(zs_compress(&frames, raws[i].p, raws[i].len, 3), 0);
		assert_int_equal(buf_put_u64(sec, off), 0);
		assert_int_equal(buf_put_u32(sec, (uint32_t)(frames.len - before)), 0);
		assert_int_equal(buf_put_u32(sec, (uint32_t)raws[i].len), 0);
		off += frames.len - before;
	}
	assert_int_equal(buf_put(sec, frames.data, frames.len), 0);
	buf_fini(&frames);
}

/* A section of the single block @t, all terminals 0. */
static void tblock_section(struct tfs_buf *sec, const struct tblock *t, char version, int timing)
{
	struct rawb r;
	struct rawref ref;

	build_raw(t, &r);
	ref = (struct rawref){r.b, r.len, t->n};
	make_section(sec, version, timing, 0.5, t->n, &ref, 1);
}

static const uint32_t zero_terms[MAX_EV];
static const uint8_t no_vals[1];

/* Open @sec and decode every block of it (terminal 0 everywhere). @return the first error */
static int decode_all(const struct tfs_buf *sec, struct vblock *b, struct tfs_diag *d)
{
	struct tfs_vsec v;
	int rc;

	memset(d, 0, sizeof(*d));
	rc = vsec_open(&v, sec->data, sec->len, 0, d);
	for (uint64_t blk = 0; rc == 0 && blk < v.n_blocks; blk++) {
		assert_true(vsec_block_len(&v, blk) <= MAX_EV);
		rc = vsec_decode_block(&v, blk, zero_terms, no_vals, 1, b, d);
	}
	return rc;
}

/* The single block @t is refused as corrupt, with a diag that names the block. */
static void expect_corrupt(const struct tblock *t, char version, int timing, const char *what)
{
	struct tfs_buf sec;
	struct tfs_diag d;
	struct vblock b;
	int rc;

	tblock_section(&sec, t, version, timing);
	vblock_init(&b);
	rc = decode_all(&sec, &b, &d);
	fprintf(stderr, "# %s: rc=%d %s\n", what, rc, d.reason);
	assert_int_equal(rc, -TFS_ECORRUPT);
	assert_non_null(strstr(d.reason, "block"));
	vblock_fini(&b);
	buf_fini(&sec);
}

/* The single lossless TFV3 block @t decodes to exactly @ts and @dur. */
static void expect_times(const struct tblock *t, const uint64_t *ts, const uint64_t *dur,
			 const char *what)
{
	struct tfs_buf sec;
	struct tfs_diag d;
	struct vblock b;
	int rc;

	tblock_section(&sec, t, '3', VAL_TIMING_LOSSLESS);
	vblock_init(&b);
	rc = decode_all(&sec, &b, &d);
	if (rc != 0)
		fprintf(stderr, "# %s: rc=%d %s\n", what, rc, d.reason);
	assert_int_equal(rc, 0);
	assert_int_equal(b.n_events, t->n);
	for (uint32_t i = 0; i < t->n; i++) {
		if (b.ts_ns[i] != ts[i] || b.dur_ns[i] != dur[i])
			fprintf(stderr,
				"# %s: event %u: got ts %llu dur %llu, expected %llu %llu\n", what,
				i, (unsigned long long)b.ts_ns[i], (unsigned long long)b.dur_ns[i],
				(unsigned long long)ts[i], (unsigned long long)dur[i]);
		assert_true(b.ts_ns[i] == ts[i]);
		assert_true(b.dur_ns[i] == dur[i]);
		assert_int_equal(b.val_off[i + 1], 0);
	}
	vblock_fini(&b);
	buf_fini(&sec);
}

/*
 * §7.4.1's example: Q = 43013478093 (10.014856 ns), ts_0 = 1000, a duration of 4 ticks,
 * a gap of 1 tick from the end, a duration of 0; nothing predicted, no corrections.
 */
static void test_ticks_spec_example_decodes(void **state)
{
	static const struct tblock example = {
		.n = 2, .pred = PRED_TICKS, .q = EPYC_Q, .ts = {1000, 1}, .dur = {4, 0},
	};
	static const uint64_t ts[] = {1000, 1050}, dur[] = {40, 0};
	static const uint64_t words[] = {2000, 2, 8, 0};
	struct tfs_buf sec;
	struct vwords w = {0};
	struct tfs_vsec v;

	expect_times(&example, ts, dur, "§7.4.1 example");
	/* the ticks header is not a column: the words are the columns' four varints */
	tblock_section(&sec, &example, '3', VAL_TIMING_LOSSLESS);
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
	assert_int_equal(v.version, 3);
	assert_int_equal(vsec_block_words(&v, 0, &w, NULL), 0);
	assert_int_equal(w.pred, PRED_TICKS);
	assert_true(w.n[0] == 2 && w.n[1] == 2 && w.n[2] == 0);
	assert_memory_equal(w.w, words, sizeof(words));
	vwords_fini(&w);
	buf_fini(&sec);
}

/*
 * The base of the checks below: the example and a third event, a gap of 12 ticks and a
 * duration of 7, with one correction, +2 on step 2 (event 1's start). Step by step:
 * step 1 (4 ticks) reaches 1040 with phase [255220532, 2^32); step 2 predicts 10 ns, +2
 * reaches 1052, which contradicts the phase: [0, 2^32) afresh; step 3 (0 ticks) 1052;
 * step 4 (12 ticks) floor(0.5 + 120.18) = 120, 1172; step 5 (7 ticks) 70, 1242.
 */
static struct tblock base_block(void)
{
	struct tblock t = {
		.n = 3, .pred = PRED_TICKS, .q = EPYC_Q, .n_x = 1, .n_corr = 1,
		.corr = {{1, 2}}, .ts = {1000, 1, 12}, .dur = {4, 0, 7},
	};

	return t;
}

static const uint64_t base_ts[] = {1000, 1052, 1172}, base_dur[] = {40, 0, 70};

static void test_ticks_q_out_of_range_is_corrupt(void **state)
{
	/* Q = 2^33 (2 ns): 1000 + 8, + 2 + 2, + 0, + 24, + 14 */
	static const uint64_t ts_lo[] = {1000, 1012, 1036}, dur_lo[] = {8, 0, 14};
	/*
	 * Q = 2^62 - 1 (about 2^30 ns): k ticks from a phase m take floor((m + k Q) / 2^32)
	 * = k 2^30 + floor((m - k) / 2^32) = k 2^30 (here m - k stays in [0, 2^32))
	 */
	static const uint64_t ts_hi[] = {1000, 1000 + (UINT64_C(5) << 30) + 2,
					 1000 + (UINT64_C(17) << 30) + 2};
	static const uint64_t dur_hi[] = {UINT64_C(4) << 30, 0, UINT64_C(7) << 30};
	struct tblock t = base_block();

	expect_times(&t, base_ts, base_dur, "base block");
	t.q = 2 * ONE_NS;
	expect_times(&t, ts_lo, dur_lo, "Q = 2^33");
	t.q = (UINT64_C(1) << 62) - 1;
	expect_times(&t, ts_hi, dur_hi, "Q = 2^62 - 1");
	t.q = 2 * ONE_NS - 1;
	expect_corrupt(&t, '3', VAL_TIMING_LOSSLESS, "Q = 2^33 - 1");
	t.q = ONE_NS;
	expect_corrupt(&t, '3', VAL_TIMING_LOSSLESS, "Q = 2^32");
	t.q = 0;
	expect_corrupt(&t, '3', VAL_TIMING_LOSSLESS, "Q = 0");
	t.q = UINT64_C(1) << 62;
	expect_corrupt(&t, '3', VAL_TIMING_LOSSLESS, "Q = 2^62");
	t.q = UINT64_MAX;
	expect_corrupt(&t, '3', VAL_TIMING_LOSSLESS, "Q = 2^64 - 1");
}

static void test_ticks_more_corrections_than_steps_is_corrupt(void **state)
{
	/* 2n - 1 corrections, +1 on each of steps 1 to 5, are allowed */
	static const uint64_t ts_ok[] = {1000, 1052, 1174}, dur_ok[] = {41, 1, 71};
	struct tblock t = base_block();

	t.n_x = t.n_corr = 5;
	for (int i = 0; i < 5; i++)
		t.corr[i] = (struct tick_corr){0, 1};
	expect_times(&t, ts_ok, dur_ok, "n_x = 2n - 1");
	t.n_x = t.n_corr = 6;
	t.corr[5] = (struct tick_corr){0, 1};
	expect_corrupt(&t, '3', VAL_TIMING_LOSSLESS, "n_x = 2n");
	t.n_x = UINT64_MAX; /* no entries follow: must not be trusted for an allocation */
	t.n_corr = 0;
	expect_corrupt(&t, '3', VAL_TIMING_LOSSLESS, "n_x = 2^64 - 1");
	t.n_x = UINT64_C(1) << 32; /* a u32 count would read 0 */
	expect_corrupt(&t, '3', VAL_TIMING_LOSSLESS, "n_x = 2^32");
}

static void test_ticks_correction_index_at_2n_is_corrupt(void **state)
{
	/* +3 on step 5 (the last: event 2's end) */
	static const uint64_t ts_ok[] = {1000, 1050, 1170}, dur_ok[] = {40, 0, 73};
	struct tblock t = base_block();

	t.corr[0] = (struct tick_corr){4, 3};
	expect_times(&t, ts_ok, dur_ok, "correction on step 2n - 1");
	t.corr[0].skip = 5;
	expect_corrupt(&t, '3', VAL_TIMING_LOSSLESS, "correction on step 2n");
	t.n_x = t.n_corr = 2;
	t.corr[0] = (struct tick_corr){1, 2};
	t.corr[1] = (struct tick_corr){3, 3}; /* step 2 + 1 + 3 = 6 */
	expect_corrupt(&t, '3', VAL_TIMING_LOSSLESS, "second correction on step 2n");
}

static void test_ticks_skip_overflow_is_corrupt(void **state)
{
	/* skips whose index, computed modulo 2^64 or 2^32, lands back inside the block */
	static const uint64_t skips[][2] = {
		{UINT64_MAX, 0},		/* step 2^64: 0 again, which no correction has */
		{0, UINT64_MAX},		/* 1, then 1 + 1 + 2^64 - 1: step 1 again */
		{0, UINT64_MAX - 1},		/* 1, then step 2^64 */
		{(UINT64_C(1) << 32) - 1, 0},	/* step 2^32: 0 in 32 bits */
		{0, (UINT64_C(1) << 32) - 2},	/* 1, then step 2^32 */
		{UINT64_C(1) << 63, (UINT64_C(1) << 63) - 1}, /* 2^63 + 1, then 2^64 + 1 */
	};
	struct tblock t = base_block();

	t.n_x = t.n_corr = 2;
	for (size_t k = 0; k < sizeof(skips) / sizeof(skips[0]); k++) {
		char what[80];

		t.corr[0] = (struct tick_corr){skips[k][0], 1};
		t.corr[1] = (struct tick_corr){skips[k][1], 1};
		snprintf(what, sizeof(what), "skips %llu, %llu", (unsigned long long)skips[k][0],
			 (unsigned long long)skips[k][1]);
		expect_corrupt(&t, '3', VAL_TIMING_LOSSLESS, what);
	}
}

static void test_ticks_correction_of_0_is_corrupt(void **state)
{
	/* -1 on step 1 (event 0's end), the first index a correction can have */
	static const uint64_t ts_ok[] = {1000, 1049, 1169}, dur_ok[] = {39, 0, 70};
	struct tblock t = base_block();

	t.corr[0] = (struct tick_corr){0, -1};
	expect_times(&t, ts_ok, dur_ok, "correction -1 on step 1");
	t.corr[0].c = 0;
	expect_corrupt(&t, '3', VAL_TIMING_LOSSLESS, "correction 0 on step 1");
	t.n_x = t.n_corr = 2;
	t.corr[0] = (struct tick_corr){1, 2};
	t.corr[1] = (struct tick_corr){0, 0};
	expect_corrupt(&t, '3', VAL_TIMING_LOSSLESS, "second correction 0");
}

/* Bit 3 means ticks only in a lossless TFV3 section; the same bytes elsewhere are corrupt. */
static void test_ticks_bit_3_outside_lossless_tfv3_is_corrupt(void **state)
{
	struct tblock t = base_block();

	expect_times(&t, base_ts, base_dur, "lossless TFV3");
	expect_corrupt(&t, '2', VAL_TIMING_LOSSLESS, "bit 3 in a TFV2 section");
	expect_corrupt(&t, '3', VAL_TIMING_LOSSY, "bit 3 in a lossy TFV3 section");
	expect_corrupt(&t, '3', VAL_TIMING_NONE, "bit 3 in an untimed TFV3 section");
	t.pred = PRED_TICKS | 0x10;
	expect_corrupt(&t, '3', VAL_TIMING_LOSSLESS, "pred bit 4 beside bit 3");
	t.pred = 0x10 | VAL_PRED_ALL;
	t.n_x = t.n_corr = 0;
	expect_corrupt(&t, '3', VAL_TIMING_LOSSLESS, "pred bit 4 without ticks");
}

/*
 * Every cut of the raw block inside its ticks header (the index's raw_len and the frame
 * agree on the shorter length) is corrupt: caught by the index's raw_len bound below
 * h + 4 + 2n, else by the header's varints running past the block.
 */
static void check_header_cuts(const struct tblock *t, const char *what)
{
	struct rawb r;

	build_raw(t, &r);
	for (size_t len = 2; len < r.ticks_end; len++) {
		struct rawref ref = {r.b, len, t->n};
		struct tfs_buf sec;
		struct tfs_diag d;
		struct vblock b;
		int rc;

		make_section(&sec, '3', VAL_TIMING_LOSSLESS, 0, t->n, &ref, 1);
		vblock_init(&b);
		rc = decode_all(&sec, &b, &d);
		fprintf(stderr, "# %s cut to %zu of %zu bytes: rc=%d %s\n", what, len, r.len, rc,
			d.reason);
		assert_int_equal(rc, -TFS_ECORRUPT);
		assert_non_null(strstr(d.reason, "block"));
		vblock_fini(&b);
		buf_fini(&sec);
	}
}

static void test_ticks_truncated_header_is_corrupt(void **state)
{
	/* one event: raw_len >= 7 reaches the decoder from the middle of Q's six bytes on */
	static const struct tblock one = {
		.n = 1, .pred = PRED_TICKS | VAL_PRED_ALL, .q = EPYC_Q, .n_x = 1, .n_corr = 1,
		.corr = {{0, -300}}, .ts = {5000}, .dur = {3},
	};
	struct tblock t = base_block();

	check_header_cuts(&one, "one-event block");
	t.n_x = t.n_corr = 2;
	t.corr[0] = (struct tick_corr){0, 300};
	t.corr[1] = (struct tick_corr){0, -70000};
	check_header_cuts(&t, "two-correction block");
}

/*
 * A raw block whose ticks header has a malformed varint (FORMAT.md's header: LEB128, at
 * most 10 bytes, the 10th 0 or 1) in field @field (0 Q, 1 n_x, 2 skip, 3 zigzag(c);
 * 4: none).
 */
static void check_bad_varint(int field, const char *what)
{
	static const uint8_t bad[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
	static const uint64_t good[4] = {EPYC_Q, 1, 0, 2}; /* +1 ns on step 1 */
	struct rawb r = {.len = 0};
	struct rawref ref;
	struct tfs_buf sec;
	struct tfs_diag d;
	struct vblock b;
	int rc;

	put_varint(&r, 1);
	put_u8(&r, PRED_TICKS);
	for (int f = 0; f < 4; f++) {
		if (f == field) {
			memcpy(r.b + r.len, bad, sizeof(bad));
			r.len += sizeof(bad);
		} else {
			put_varint(&r, good[f]);
		}
	}
	put_varint(&r, 2); /* ts_len, dur_len, vals_len and the columns: 1000, 3 ticks */
	put_varint(&r, 1);
	put_varint(&r, 0);
	put_varint(&r, zigzag_enc(1000));
	put_varint(&r, zigzag_enc(3));
	ref = (struct rawref){r.b, r.len, 1};
	make_section(&sec, '3', VAL_TIMING_LOSSLESS, 0, 1, &ref, 1);
	vblock_init(&b);
	rc = decode_all(&sec, &b, &d);
	fprintf(stderr, "# %s: rc=%d %s\n", what, rc, d.reason);
	assert_int_equal(rc, field < 4 ? -TFS_ECORRUPT : 0);
	if (field < 4)
		assert_non_null(strstr(d.reason, "block"));
	else /* floor(0.5 + 30.04) + 1 */
		assert_true(b.ts_ns[0] == 1000 && b.dur_ns[0] == 31);
	vblock_fini(&b);
	buf_fini(&sec);
}

static void test_ticks_malformed_header_varint_is_corrupt(void **state)
{
	check_bad_varint(4, "well-formed header");
	check_bad_varint(0, "malformed Q");
	check_bad_varint(1, "malformed n_x");
	check_bad_varint(2, "malformed skip");
	check_bad_varint(3, "malformed zigzag(c)");
}

/*
 * Edges of a step, delta = floor((m + k Q) / 2^32) + c: products far beyond 64 bits, the
 * floor of negative numbers (towards minus infinity, not zero), times modulo 2^64.
 */
static void test_ticks_arithmetic_edges(void **state)
{
	/*
	 * Q = 2^62 - 1, ts_0 = 2^40, event 0 lasts 0 ticks (phase [0, 2^32) stays); event 1
	 * starts 2^62 ticks earlier: m + k Q = 2^31 - 2^124 + 2^62, floor / 2^32 = -2^92 + 2^30
	 * (truncation would give one more), modulo 2^64 2^30.
	 */
	static const struct tblock wide = {
		.n = 2, .pred = PRED_TICKS, .q = (UINT64_C(1) << 62) - 1,
		.ts = {INT64_C(1) << 40, -(INT64_C(1) << 62)}, .dur = {0, 0},
	};
	static const uint64_t wide_ts[] = {UINT64_C(1) << 40, (UINT64_C(1) << 40) + (1u << 30)};
	static const uint64_t wide_dur[] = {0, 0};
	/*
	 * The farthest step: k = -2^63 ticks of 2^62 - 1 and c = 2^63 - 1: floor((2^31 -
	 * 2^125 + 2^63) / 2^32) = -2^93 + 2^31, delta = -2^93 + 2^31 + 2^63 - 1, the phase
	 * bounds near 2^126 (they start afresh).
	 */
	static const struct tblock far = {
		.n = 2, .pred = PRED_TICKS, .q = (UINT64_C(1) << 62) - 1, .n_x = 1, .n_corr = 1,
		.corr = {{1, INT64_MAX}}, .ts = {INT64_C(1) << 40, INT64_MIN}, .dur = {0, 0},
	};
	static const uint64_t far_ts[] = {UINT64_C(1) << 40,
					  (UINT64_C(1) << 40) + (UINT64_C(1) << 63) +
						  (UINT64_C(1) << 31) - 1};
	/*
	 * Q = 10.0149 ns: event 0 lasts 0 ticks; event 1 starts 5 ticks before its end,
	 * floor(0.5 - 50.07) = -50 (truncation: -49), phase [0, 0.93); it lasts 3 ticks,
	 * floor(0.46 + 30.04) = 30, phase [0.04, 0.97); event 2 starts 7 ticks after that
	 * end, floor(0.51 + 70.10) = 70.
	 */
	static const struct tblock neg = {
		.n = 3, .pred = PRED_TICKS, .q = EPYC_Q, .ts = {1000, -5, 7}, .dur = {0, 3, 0},
	};
	static const uint64_t neg_ts[] = {1000, 950, 1050}, neg_dur[] = {0, 30, 0};
	/*
	 * c = -2^63 on step 1: event 0 ends at 1040 - 2^63 (mod 2^64), which contradicts the
	 * phase; the next steps start afresh from it.
	 */
	static const uint64_t wrap_ts[] = {1000, (UINT64_C(1) << 63) + 1050,
					   (UINT64_C(1) << 63) + 1170};
	static const uint64_t wrap_dur[] = {(UINT64_C(1) << 63) + 40, 0, 70};
	struct tblock t = base_block();

	expect_times(&wide, wide_ts, wide_dur, "128-bit floor");
	expect_times(&far, far_ts, wide_dur, "farthest step");
	expect_times(&neg, neg_ts, neg_dur, "negative ticks");
	t.corr[0] = (struct tick_corr){0, INT64_MIN};
	expect_times(&t, wrap_ts, wrap_dur, "correction -2^63");
}

/*
 * A second reading of §7.4.1 for random blocks: times as the spec computes them, step by
 * step in 128-bit integers, written here apart from codec/values_dec.c.
 */
__extension__ typedef __int128 i128;

struct ref_time {
	uint64_t t;
	i128 lo, hi; /* phase interval, units of 2^-32 ns */
};

static i128 i64_of(uint64_t w)
{
	return w >> 63 ? -(i128)(~w) - 1 : (i128)w;
}

/* floor(a / 2^32), rounding towards minus infinity */
static i128 floor_ns(i128 a)
{
	i128 d = (i128)ONE_NS, q = a / d;

	return (a % d != 0 && a < 0) ? q - 1 : q;
}

static struct ref_time ref_step(struct ref_time s, uint64_t k_word, int64_t c, uint64_t q)
{
	i128 kq = i64_of(k_word) * (i128)q;
	i128 delta = floor_ns((s.lo + s.hi) / 2 + kq) + c;
	i128 lo = s.lo + kq - delta * (i128)ONE_NS, hi = s.hi + kq - delta * (i128)ONE_NS;
	struct ref_time r = {.t = s.t + (uint64_t)delta};

	r.lo = lo > 0 ? lo : 0;
	r.hi = hi < (i128)ONE_NS ? hi : (i128)ONE_NS;
	if (r.lo >= r.hi) {
		r.lo = 0;
		r.hi = ONE_NS;
	}
	return r;
}

/* A block's words as a reader takes them (FORMAT.md §7.2); borrowed arrays. */
struct ref_block {
	uint32_t n;
	uint8_t pred;
	uint64_t q;		    /* ticks only */
	const int64_t *c_of;	    /* ticks: [2n], each step's correction (0: none) */
	const uint64_t *tsw, *durw; /* [n] each: the columns' words, unzigzagged */
	const uint32_t *term;	    /* [n], each below 3 */
};

/* The times of block @r into @ts and @dur (§7.3, §7.4, §7.4.1), lossless. */
static void ref_times(const struct ref_block *r, uint64_t *ts, uint64_t *dur)
{
	uint64_t gap[3] = {0}, dstate[3] = {0};
	struct ref_time start = {0}, end = {0};
	const bool ticks = r->pred & PRED_TICKS;

	for (uint32_t i = 0; i < r->n; i++) {
		const uint32_t t = r->term[i];
		uint64_t m = r->durw[i] + (r->pred & VAL_PRED_DUR ? dstate[t] : 0);

		if (i == 0) {
			start = (struct ref_time){r->tsw[0], 0, ONE_NS};
		} else {
			uint64_t g = r->tsw[i] + (r->pred & VAL_PRED_TS ? gap[t] : 0);
			struct ref_time base = r->pred & VAL_GAP_START ? start : end;

			gap[t] = g;
			start = ticks ? ref_step(base, g, r->c_of[2 * i], r->q)
				      : (struct ref_time){base.t + g, 0, ONE_NS};
		}
		dstate[t] = m;
		end = ticks ? ref_step(start, m, r->c_of[2 * i + 1], r->q)
			    : (struct ref_time){start.t + m, 0, ONE_NS};
		ts[i] = start.t;
		dur[i] = end.t - start.t;
	}
}

/* The times of ticks block @t with terminals @term, into @ts and @dur. */
static void ref_decode(const struct tblock *t, const uint32_t *term, uint64_t *ts, uint64_t *dur)
{
	int64_t c_of[2 * MAX_EV] = {0};
	uint64_t tsw[MAX_EV], durw[MAX_EV], step = 0;
	struct ref_block r = {t->n, t->pred, t->q, c_of, tsw, durw, term};

	for (uint32_t i = 0; i < t->n_corr; i++) {
		step += t->corr[i].skip + 1;
		c_of[step] = t->corr[i].c;
	}
	for (uint32_t i = 0; i < t->n; i++) {
		tsw[i] = (uint64_t)t->ts[i];
		durw[i] = (uint64_t)t->dur[i];
	}
	ref_times(&r, ts, dur);
}

/* Mostly small, sometimes any, sometimes extreme signed words. */
static int64_t rand_word(uint64_t *seed, int64_t small)
{
	switch (tu_below(seed, 8)) {
	case 0:
		return (int64_t)tu_rand(seed);
	case 1:
		return tu_below(seed, 2) ? INT64_MIN : INT64_MAX;
	default:
		return (int64_t)tu_below(seed, 2 * (uint64_t)small + 1) - small;
	}
}

static void rand_block(uint64_t *seed, struct tblock *t, uint32_t *term)
{
	static const uint64_t qs[] = {EPYC_Q, 2 * ONE_NS, (UINT64_C(1) << 62) - 1,
				      UINT64_C(35791394133)};
	uint64_t last = 0;

	memset(t, 0, sizeof(*t));
	t->n = 1 + (uint32_t)tu_below(seed, MAX_EV);
	t->pred = (uint8_t)(PRED_TICKS | tu_below(seed, 8));
	t->q = tu_below(seed, 2) ? qs[tu_below(seed, 4)]
				 : 2 * ONE_NS + tu_below(seed, (UINT64_C(1) << 62) - 2 * ONE_NS);
	for (uint64_t step = 1; step < 2 * t->n && t->n_corr < MAX_CORR; step++) {
		int64_t c = rand_word(seed, 5);

		if (c == 0 || tu_below(seed, 3))
			continue;
		t->corr[t->n_corr++] = (struct tick_corr){step - last - 1, c};
		last = step;
	}
	t->n_x = t->n_corr;
	for (uint32_t i = 0; i < t->n; i++) {
		term[i] = (uint32_t)tu_below(seed, 3);
		t->ts[i] = i == 0 ? (int64_t)tu_rand(seed) : rand_word(seed, 40);
		t->dur[i] = rand_word(seed, 40);
	}
}

/*
 * Random valid ticks blocks (any tick length, corrections anywhere, residuals up to the
 * extremes) decode to the times the step formula gives, computed here independently.
 */
/*
 * The writer's step (vticks_i.h vtick_step, 64-bit arithmetic from k Q - delta 2^32) gives
 * the count, correction and phase the reader's formulas give (vtick_predict, vtick_learn,
 * the nearest count by a 128-bit floor division): over ticks from the smallest to the
 * largest, steps of every size up to the farthest, and phases known and unknown.
 */
static void test_ticks_writer_step_matches_the_reader(void **state)
{
	uint64_t seed = tu_seed(__func__);

	for (int i = 0; i < 2000000; i++) {
		const uint64_t q = VTICK_Q_MIN + (tu_rand(&seed) >> (2 + tu_below(&seed, 30))) %
							(VTICK_Q_LIMIT - VTICK_Q_MIN);
		const unsigned int bits = (unsigned int)tu_below(&seed, 64);
		int64_t delta = (int64_t)(tu_rand(&seed) >> (63 - bits));
		struct vphase ph = VPHASE_UNKNOWN, want_ph;
		uint64_t k, want_k;
		int64_t c;
		i128 want_c;

		if (i % 3 == 0) /* near a whole number of ticks: the ties and their neighbours */
			delta = (int64_t)(((i128)(int64_t)tu_below(&seed, 1u << 20) * q +
					   (i128)tu_below(&seed, 5) - 2) >> 32);
		if (tu_below(&seed, 2))
			delta = -delta;
		if (tu_below(&seed, 4)) {
			ph.lo = (int64_t)tu_below(&seed, VTICK_ONE);
			ph.hi = ph.lo + 1 + (int64_t)tu_below(&seed, VTICK_ONE - (uint64_t)ph.lo);
		}
		want_k = (uint64_t)vtick_floor_div((i128)delta * VTICK_ONE + (i128)(q / 2),
						   (i128)q);
		want_c = (i128)delta - vtick_predict(q, ph, want_k);
		want_ph = vtick_learn(q, ph, want_k, delta);
		c = vtick_step(q, &ph, delta, &k);
		if (k != want_k || (i128)c != want_c || ph.lo != want_ph.lo || ph.hi != want_ph.hi)
			fail_msg("q %" PRIu64 " delta %" PRId64 ": k %" PRIu64 " c %" PRId64
				 " [%" PRId64 ", %" PRId64 "), want k %" PRIu64 " c %" PRId64
				 " [%" PRId64 ", %" PRId64 ")",
				 q, delta, k, c, ph.lo, ph.hi, want_k, (int64_t)want_c, want_ph.lo,
				 want_ph.hi);
	}
}

static void test_ticks_random_blocks_match_the_formula(void **state)
{
	static const uint8_t nv3[3];
	uint64_t seed = tu_seed("ticks_random_blocks");
	struct vblock b;

	vblock_init(&b);
	for (int iter = 0; iter < 3000; iter++) {
		uint64_t ts[MAX_EV], dur[MAX_EV];
		uint32_t term[MAX_EV];
		struct tfs_buf sec;
		struct tfs_diag d;
		struct tfs_vsec v;
		struct tblock t;
		int rc;

		rand_block(&seed, &t, term);
		ref_decode(&t, term, ts, dur);
		tblock_section(&sec, &t, '3', VAL_TIMING_LOSSLESS);
		memset(&d, 0, sizeof(d));
		assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, &d), 0);
		rc = vsec_decode_block(&v, 0, term, nv3, 3, &b, &d);
		if (rc != 0)
			fprintf(stderr, "# iteration %d: %s\n", iter, d.reason);
		assert_int_equal(rc, 0);
		for (uint32_t i = 0; i < t.n; i++) {
			if (b.ts_ns[i] != ts[i] || b.dur_ns[i] != dur[i])
				fprintf(stderr,
					"# iteration %d (pred 0x%02x, Q %llu) event %u: got ts "
					"%llu dur %llu, expected %llu %llu\n",
					iter, t.pred, (unsigned long long)t.q, i,
					(unsigned long long)b.ts_ns[i],
					(unsigned long long)b.dur_ns[i], (unsigned long long)ts[i],
					(unsigned long long)dur[i]);
			assert_true(b.ts_ns[i] == ts[i] && b.dur_ns[i] == dur[i]);
		}
		buf_fini(&sec);
	}
	vblock_fini(&b);
}

/* A strict varint reader over @p[*pos..@end) for raw blocks the encoder wrote. */
static uint64_t take_varint(const uint8_t *p, size_t *pos, size_t end)
{
	uint64_t v = 0;

	for (unsigned int shift = 0;; shift += 7) {
		uint8_t byte;

		assert_true(*pos < end && shift <= 63);
		byte = p[(*pos)++];
		assert_true(shift < 63 || byte <= 1);
		v |= (uint64_t)(byte & 0x7f) << shift;
		if (!(byte & 0x80))
			return v;
	}
}

/*
 * Words of a column of @n varints at @p[*pos..), which must use exactly @len bytes, or
 * when @coded its range coding (§7.4.2, tests/ref_vrange.h) for events of terminals @term,
 * in word model 2 (§7.4.3): the writer writes TFV5.
 */
static void take_column(const uint8_t *p, size_t *pos, size_t len, uint64_t *w, size_t n,
			bool coded, const uint32_t *term)
{
	size_t end = *pos + len;

	if (coded) {
		assert_int_equal(ref_vrange_decode_model(2, p + *pos, len, term, (uint32_t)n, w), 0);
		for (size_t i = 0; i < n; i++)
			w[i] = (uint64_t)zigzag_dec(w[i]);
		*pos = end;
		return;
	}
	for (size_t i = 0; i < n; i++)
		w[i] = (uint64_t)zigzag_dec(take_varint(p, pos, end));
	assert_true(*pos == end);
}

/*
 * Reads raw block @raw of @n events as §7.2 lays it out, checks the ticks header against
 * §7.6 and computes its times with ref_times(). @return whether the block counts ticks
 */
static bool ref_raw_block(const uint8_t *raw, size_t raw_len, uint32_t n, const uint32_t *term,
			  uint64_t *ts, uint64_t *dur)
{
	int64_t *c_of = calloc(2 * (size_t)n, sizeof(*c_of));
	uint64_t *tsw = malloc(n * sizeof(*tsw)), *durw = malloc(n * sizeof(*durw));
	struct ref_block r = {.n = n, .c_of = c_of, .tsw = tsw, .durw = durw, .term = term};
	uint64_t lens[5], step = 0;
	size_t pos = 0;

	assert_true(c_of && tsw && durw);
	assert_true(take_varint(raw, &pos, raw_len) == n);
	assert_true(pos < raw_len);
	r.pred = raw[pos++];
	assert_int_equal(r.pred & ~0x3fu, 0);
	if (r.pred & PRED_TICKS) {
		uint64_t n_x;

		r.q = take_varint(raw, &pos, raw_len);
		assert_true(r.q >= 2 * ONE_NS && r.q < UINT64_C(1) << 62);
		n_x = take_varint(raw, &pos, raw_len);
		assert_true(n_x <= 2 * (uint64_t)n - 1);
		for (uint64_t i = 0; i < n_x; i++) {
			step += take_varint(raw, &pos, raw_len) + 1;
			assert_true(step < 2 * (uint64_t)n);
			c_of[step] = zigzag_dec(take_varint(raw, &pos, raw_len));
			assert_true(c_of[step] != 0);
		}
	}
	for (int c = 0; c < 5; c++) /* ts, dur, vals, tags and class (TFV4 on) */
		lens[c] = take_varint(raw, &pos, raw_len);
	assert_true(lens[0] + lens[1] + lens[2] + lens[3] + lens[4] == raw_len - pos);
	/* the events below have no VAL fields */
	assert_true(lens[2] == 0 && lens[3] == 0 && lens[4] == 0);
	take_column(raw, &pos, lens[0], tsw, n, r.pred & 0x10, term);
	take_column(raw, &pos, lens[1], durw, n, r.pred & 0x20, term);
	ref_times(&r, ts, dur);
	free(c_of);
	free(tsw);
	free(durw);
	return r.pred & PRED_TICKS;
}

/*
 * Times read from a clock of about 10.0149 ns ticks whose phase the kernel moves every 700
 * events, with a few computed (off-lattice) times and zones written in end order.
 */
static void clock_events(uint64_t *seed, size_t n, uint32_t *term, uint64_t *ts, uint64_t *dur)
{
	__extension__ unsigned __int128 phase = tu_below(seed, ONE_NS);
	uint64_t tick = UINT64_C(100000000);

	for (size_t i = 0; i < n; i++) {
		uint64_t start, end, len = 1 + tu_below(seed, 40);

		if (i % 700 == 699)
			phase += tu_below(seed, ONE_NS);
		tick += 1 + tu_below(seed, 30);
		start = (uint64_t)((phase + (unsigned __int128)tick * EPYC_Q) >> 32);
		end = (uint64_t)((phase + (unsigned __int128)(tick + len) * EPYC_Q) >> 32);
		tick += len;
		if (tu_below(seed, 33) == 0)
			start += 1 + tu_below(seed, 7);
		if (i % 97 == 96) /* a zone enclosing the last 20 events or so */
			start = ts[i - 20];
		term[i] = i % 97 == 96 ? 2 : (uint32_t)tu_below(seed, 2);
		ts[i] = start;
		dur[i] = end - start;
	}
}

/*
 * Encode @n events with @o and read every block back with ref_raw_block(): the times must
 * be those given. @return the number of blocks that count ticks
 */
static unsigned int check_encoded(const struct venc_opts *o, size_t n, const uint32_t *term,
				  const uint64_t *ts, const uint64_t *dur)
{
	uint64_t *got_ts = malloc(o->block_events * sizeof(*got_ts));
	uint64_t *got_dur = malloc(o->block_events * sizeof(*got_dur));
	unsigned int ticks_blocks = 0;
	struct tfs_venc *e;
	struct tfs_buf sec;
	struct tfs_vsec v;

	assert_true(got_ts && got_dur);
	assert_int_equal(venc_new(o, &e), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(venc_add(e, term[i], ts[i], dur[i], NULL, 0), 0);
	buf_init(&sec);
	assert_int_equal(venc_finish(e, &sec), 0);
	venc_free(e);
	assert_memory_equal(sec.data, "TFV5", 4);
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
	for (uint64_t blk = 0; blk < v.n_blocks; blk++) {
		const uint8_t *ent = sec.data + 36 + 16 * blk;
		uint32_t raw_len = le_get32(ent + 12), nb = vsec_block_len(&v, blk);
		size_t first = blk * o->block_events;
		uint8_t *raw = malloc(raw_len);

		assert_non_null(raw);
		assert_int_equal(zs_decompress(sec.data + le_get64(ent), le_get32(ent + 8), raw,
					       raw_len, 0, "values", NULL),
				 0);
		ticks_blocks += ref_raw_block(raw, raw_len, nb, term + first, got_ts, got_dur);
		for (uint32_t i = 0; i < nb; i++) {
			if (got_ts[i] != ts[first + i] || got_dur[i] != dur[first + i])
				fprintf(stderr,
					"# block %llu event %u: read ts %llu dur %llu, written "
					"%llu %llu\n",
					(unsigned long long)blk, i, (unsigned long long)got_ts[i],
					(unsigned long long)got_dur[i],
					(unsigned long long)ts[first + i],
					(unsigned long long)dur[first + i]);
			assert_true(got_ts[i] == ts[first + i]);
			assert_true(got_dur[i] == dur[first + i]);
		}
		free(raw);
	}
	fprintf(stderr, "# gap base %d, coded %d: %u of %llu blocks count ticks, %zu bytes\n",
		o->gap_base, o->coded, ticks_blocks, (unsigned long long)v.n_blocks, sec.len);
	buf_fini(&sec);
	free(got_ts);
	free(got_dur);
	return ticks_blocks;
}

/*
 * The encoder's lossless TFV3 blocks, read by this file's own reading of §7.2 and §7.4.1,
 * give back the times they were given, whether they count ticks or nanoseconds. Whether
 * the writer finds the tick is its heuristic's business, but on these clock-like streams
 * it must: at least 5 of each stream's 6 blocks count ticks, whichever the gap base.
 */
static void test_ticks_encoder_output_follows_the_spec(void **state)
{
	static const int bases[] = {VAL_BASE_DEFAULT, VAL_BASE_START};
	enum { N = 3000, STREAMS = 4 };
	uint64_t seed = tu_seed("ticks_encoder_output");
	uint32_t *term = malloc(N * sizeof(*term));
	uint64_t *ts = malloc(N * sizeof(*ts)), *dur = malloc(N * sizeof(*dur));
	unsigned int ticks_blocks = 0;

	assert_true(term && ts && dur);
	for (int k = 0; k < STREAMS; k++) {
		clock_events(&seed, N, term, ts, dur);
		for (size_t b = 0; b < sizeof(bases) / sizeof(bases[0]); b++) {
			struct venc_opts o = {.block_events = 512,
					      .timing = VAL_TIMING_LOSSLESS,
					      .gap_base = bases[b],
					      .coded = VAL_CODED_NEVER};

			unsigned int with = check_encoded(&o, N, term, ts, dur);

			assert_true(with >= 5);
			ticks_blocks += with;
			/* range-coded columns, in ticks or not, as the writer likes or always */
			o.coded = 0;
			check_encoded(&o, N, term, ts, dur);
			o.coded = VAL_CODED_ALWAYS;
			check_encoded(&o, N, term, ts, dur);
		}
	}
	fprintf(stderr, "# %u blocks of %d counted ticks\n", ticks_blocks, 6 * STREAMS * 2);
	free(term);
	free(ts);
	free(dur);
}

/*
 * The committed sections of tests/data/golden/values_v3.txt, as written there, of
 * values_v3c.txt (the same with range-coded timing columns, FORMAT.md §7.4.2) and of
 * values_v5c.txt (the same events in TFV5 sections, their coded columns in word model 2,
 * §7.4.3).
 */
#define GOLD_SECS 3
static const char *const gold_files[] = {"values_v3", "values_v3c", "values_v5c"};
/* The section version of each golden file. */
static const int gold_version[] = {3, 3, 5};
#define N_GOLD_FILES (sizeof(gold_files) / sizeof(gold_files[0]))
#define GOLD_MAX_EV 64
#define GOLD_MAX_BLOCKS 8

struct gold_sec {
	size_t off, len, n;
	int timing;
	uint8_t preds[GOLD_MAX_BLOCKS];
	size_t n_preds;
	uint8_t ticks[GOLD_MAX_BLOCKS][64]; /* each ticks block's header, as stored */
	size_t ticks_len[GOLD_MAX_BLOCKS];
	uint32_t term[GOLD_MAX_EV];
	uint64_t ts[GOLD_MAX_EV], dur[GOLD_MAX_EV], vals[GOLD_MAX_EV][2];
};

struct gold_v3 {
	uint8_t *bin;
	size_t bin_len;
	uint8_t nv[3];
	int n_secs;
	struct gold_sec sec[GOLD_SECS];
};

static void gold_parse_preds(struct gold_sec *s, const char *line)
{
	const char *p = line + strlen("preds");
	char *end;

	while (*p == ' ') {
		unsigned long v = strtoul(p, &end, 10);

		assert_true(end != p && v < 256 && s->n_preds < GOLD_MAX_BLOCKS);
		s->preds[s->n_preds++] = (uint8_t)v;
		p = end;
	}
}

/* "ticks <block> <hex>": the header of a block that counts ticks */
static void gold_parse_ticks(struct gold_sec *s, const char *line)
{
	unsigned int blk, byte;
	int used;
	const char *p;

	assert_int_equal(sscanf(line, "ticks %u %n", &blk, &used), 1);
	assert_true(blk < GOLD_MAX_BLOCKS && s->ticks_len[blk] == 0);
	for (p = line + used; sscanf(p, "%2x", &byte) == 1; p += 2) {
		assert_true(s->ticks_len[blk] < sizeof(s->ticks[blk]));
		s->ticks[blk][s->ticks_len[blk]++] = (uint8_t)byte;
	}
	assert_true(s->ticks_len[blk] > 0);
}

/* tests/data/golden/@name.bin and .txt */
static struct gold_v3 *gold_v3_load(const char *name)
{
	struct gold_v3 *g = calloc(1, sizeof(*g));
	char line[512], path[512];
	FILE *f;
	int k = -1;

	assert_non_null(g);
	snprintf(path, sizeof(path), "%s/golden/%s.bin", TFS_TEST_DATA, name);
	g->bin = slurp(path, &g->bin_len);
	snprintf(path, sizeof(path), "%s/golden/%s.txt", TFS_TEST_DATA, name);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long x[5];
		struct gold_sec *s = k >= 0 ? &g->sec[k] : NULL;
		unsigned int t;
		int got;

		if (line[0] == '#')
			continue;
		if (sscanf(line, "terminals %hhu %hhu %hhu", &g->nv[0], &g->nv[1], &g->nv[2]) == 3)
			continue;
		if (sscanf(line, "section %llu %llu %llu %llu", &x[0], &x[1], &x[2], &x[3]) == 4) {
			assert_true(++k < GOLD_SECS);
			g->sec[k].off = x[0];
			g->sec[k].len = x[1];
			g->sec[k].timing = (int)x[2];
			continue;
		}
		if (strncmp(line, "preds ", 6) == 0) {
			assert_non_null(s);
			gold_parse_preds(s, line);
			continue;
		}
		if (strncmp(line, "ticks ", 6) == 0) {
			assert_non_null(s);
			gold_parse_ticks(s, line);
			continue;
		}
		got = sscanf(line, "%u %llu %llu %llu %llu", &t, &x[0], &x[1], &x[2], &x[3]);
		assert_true(s && got >= 3 && t < 3 && got == 3 + g->nv[t] && s->n < GOLD_MAX_EV);
		s->term[s->n] = t;
		s->ts[s->n] = x[0];
		s->dur[s->n] = x[1];
		s->vals[s->n][0] = x[2];
		s->vals[s->n][1] = x[3];
		s->n++;
	}
	fclose(f);
	assert_true(k >= 0);
	g->n_secs = k + 1;
	assert_true(g->sec[k].off + g->sec[k].len == g->bin_len);
	return g;
}

static void gold_v3_free(struct gold_v3 *g)
{
	free(g->bin);
	free(g);
}

/* Decode section @k of @data (maybe damaged) with the golden terminals. @return first error */
static int gold_decode(const struct gold_v3 *g, int k, const uint8_t *data, size_t len,
		       struct vblock *b, struct tfs_diag *d)
{
	const struct gold_sec *s = &g->sec[k];
	struct tfs_vsec v;
	int rc;

	memset(d, 0, sizeof(*d));
	rc = vsec_open(&v, data, len, 0, d);
	for (uint64_t blk = 0; rc == 0 && blk < v.n_blocks; blk++) {
		uint64_t first = blk * v.block_events;

		if (first + vsec_block_len(&v, blk) > s->n)
			return -E2BIG; /* a damaged header promises more events than listed */
		rc = vsec_decode_block(&v, blk, s->term + first, g->nv, 3, b, d);
	}
	return rc;
}

/*
 * (a) The committed TFV3 sections open as version 3 and decode block by block to exactly
 * the committed numbers, with the committed predictor bytes and ticks headers and one word
 * per event and timing column and per VAL field.
 */
static void test_ticks_golden_v3_file_decodes_as_committed_in(const char *name, int version)
{
	struct gold_v3 *g = gold_v3_load(name);
	struct vwords w = {0};
	unsigned int ticks_preds = 0;
	struct vblock b;

	vblock_init(&b);
	for (int k = 0; k < g->n_secs; k++) {
		const struct gold_sec *s = &g->sec[k];
		struct tfs_diag d;
		struct tfs_vsec v;

		assert_int_equal(vsec_open(&v, g->bin + s->off, s->len, s->off, &d), 0);
		assert_int_equal(v.version, version);
		assert_int_equal(v.timing, s->timing);
		assert_true(v.n_events == s->n);
		assert_true(v.n_blocks == s->n_preds);
		for (uint64_t blk = 0; blk < v.n_blocks; blk++) {
			uint64_t first = blk * v.block_events;
			uint32_t n = vsec_block_len(&v, blk);
			size_t n_vals = 0;
			int rc;

			for (uint32_t i = 0; i < n; i++)
				n_vals += g->nv[s->term[first + i]];
			assert_int_equal(vsec_block_words(&v, blk, &w, NULL), 0);
			assert_int_equal(w.pred, s->preds[blk]);
			if (w.pred & PRED_TICKS) {
				ticks_preds |= 1u << (w.pred & VAL_PRED_BITS);
				assert_int_equal(w.ticks_len, s->ticks_len[blk]);
				assert_memory_equal(w.ticks, s->ticks[blk], w.ticks_len);
			}
			/* a range-coded column's words are its bytes (§8.1) */
			if (!(w.pred & VAL_CODED_TS))
				assert_int_equal(w.n[0], s->timing ? n : 0);
			if (!(w.pred & VAL_CODED_DUR))
				assert_int_equal(w.n[1], s->timing ? n : 0);
			assert_int_equal(w.n[2], n_vals);
			rc = vsec_decode_block(&v, blk, s->term + first, g->nv, 3, &b, &d);
			if (rc < 0)
				fprintf(stderr, "# section %d block %llu: %s\n", k,
					(unsigned long long)blk, d.reason);
			assert_int_equal(rc, 0);
			assert_int_equal(b.n_events, n);
			for (uint32_t i = 0; i < n; i++) {
				uint64_t e = first + i;
				uint32_t nv = g->nv[s->term[e]];

				if (b.ts_ns[i] != s->ts[e] || b.dur_ns[i] != s->dur[e])
					fprintf(stderr,
						"# section %d block %llu event %u: got ts %llu dur "
						"%llu, expected %llu %llu\n",
						k, (unsigned long long)blk, i,
						(unsigned long long)b.ts_ns[i],
						(unsigned long long)b.dur_ns[i],
						(unsigned long long)s->ts[e],
						(unsigned long long)s->dur[e]);
				assert_true(b.ts_ns[i] == s->ts[e]);
				assert_true(b.dur_ns[i] == s->dur[e]);
				assert_int_equal(b.val_off[i + 1] - b.val_off[i], nv);
				assert_memory_equal(b.vals + b.val_off[i], s->vals[e],
						    nv * sizeof(uint64_t));
			}
		}
	}
	/*
	 * ticks with each timing column predicted and not, gaps from the end and the start:
	 * 0x08 nothing predicted, 0x0b both (from the end), 0x0d ts, 0x0e dur, 0x0f both
	 */
	assert_int_equal(ticks_preds, 1u << 0 | 1u << 3 | 1u << 5 | 1u << 6 | 1u << 7);
	vwords_fini(&w);
	vblock_fini(&b);
	gold_v3_free(g);
}

static void test_ticks_golden_v3_file_decodes_as_committed(void **state)
{
	for (size_t f = 0; f < N_GOLD_FILES; f++)
		test_ticks_golden_v3_file_decodes_as_committed_in(gold_files[f], gold_version[f]);
}

/*
 * (c) Every proper prefix of each golden section is refused (§7.1: the last block must end
 * exactly at the payload's end).
 */
static void test_ticks_golden_truncations_are_corrupt_in(const char *name)
{
	struct gold_v3 *g = gold_v3_load(name);
	struct vblock b;

	vblock_init(&b);
	for (int k = 0; k < g->n_secs; k++) {
		const struct gold_sec *s = &g->sec[k];
		struct tfs_diag d;

		assert_int_equal(gold_decode(g, k, g->bin + s->off, s->len, &b, &d), 0);
		for (size_t len = 0; len < s->len; len++) {
			uint8_t *copy = malloc(len + 1);
			int rc;

			assert_non_null(copy);
			memcpy(copy, g->bin + s->off, len);
			rc = gold_decode(g, k, copy, len, &b, &d);
			if (rc != -TFS_ECORRUPT)
				fprintf(stderr, "# section %d cut to %zu bytes: rc=%d\n", k, len,
					rc);
			assert_int_equal(rc, -TFS_ECORRUPT);
			assert_true(d.reason[0] != 0);
			free(copy);
		}
	}
	vblock_fini(&b);
	gold_v3_free(g);
}

static void test_ticks_golden_truncations_are_corrupt(void **state)
{
	for (size_t f = 0; f < N_GOLD_FILES; f++)
		test_ticks_golden_truncations_are_corrupt_in(gold_files[f]);
}

/* A damaged section either decodes or fails cleanly with a reason. @return 1 if it decoded */
static int flip_outcome(const struct gold_v3 *g, int k, const uint8_t *data, size_t len,
			struct vblock *b)
{
	struct tfs_diag d;
	int rc = gold_decode(g, k, data, len, b, &d);

	if (rc == 0)
		return 1;
	assert_true(rc == -TFS_ECORRUPT || rc == -TFS_EFORMAT || rc == -E2BIG);
	if (rc != -E2BIG)
		assert_true(d.reason[0] != 0);
	return 0;
}

/* The raw blocks of golden section @k, decompressed into @raw[i] (caller frees), @refs. */
static size_t gold_raws(const struct gold_v3 *g, int k, uint8_t **raw, struct rawref *refs)
{
	const uint8_t *sec = g->bin + g->sec[k].off;
	uint64_t n_blocks = le_get64(sec + 28);
	uint32_t block_events = le_get32(sec + 8);
	uint64_t n_events = le_get64(sec + 20);

	assert_true(n_blocks <= GOLD_MAX_BLOCKS);
	for (uint64_t i = 0; i < n_blocks; i++) {
		const uint8_t *ent = sec + 36 + 16 * i;
		uint32_t raw_len = le_get32(ent + 12);

		raw[i] = malloc(raw_len);
		assert_non_null(raw[i]);
		assert_int_equal(zs_decompress(sec + le_get64(ent), le_get32(ent + 8), raw[i],
					       raw_len, 0, "values", NULL),
				 0);
		refs[i] = (struct rawref){
		    raw[i], raw_len,
		    (uint32_t)(i + 1 < n_blocks ? block_events : n_events - i * block_events)};
	}
	return (size_t)n_blocks;
}

/*
 * (c) Every single-bit flip of each golden section's header, index and first block as
 * stored (mostly caught by the frame checksum), and of the first block's raw bytes
 * recompressed (which reach the ticks header and columns), decodes or fails cleanly; which
 * one is not asserted. Run under ASan, this is the memory-safety check.
 */
static void test_ticks_golden_bit_flips_fail_cleanly_in(const char *name)
{
	struct gold_v3 *g = gold_v3_load(name);
	struct vblock b;

	vblock_init(&b);
	for (int k = 0; k < g->n_secs; k++) {
		const struct gold_sec *s = &g->sec[k];
		const uint8_t *sec = g->bin + s->off;
		const uint8_t *ent = sec + 36;
		size_t stored_end = le_get64(ent) + le_get32(ent + 8);
		struct rawref refs[GOLD_MAX_BLOCKS];
		uint8_t *raw[GOLD_MAX_BLOCKS];
		uint8_t *copy = malloc(s->len);
		size_t n_raws, accepted = 0, raw_accepted = 0;

		assert_non_null(copy);
		memcpy(copy, sec, s->len);
		for (size_t bit = 0; bit < stored_end * 8; bit++) {
			copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			accepted += flip_outcome(g, k, copy, s->len, &b);
			copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		}
		free(copy);
		n_raws = gold_raws(g, k, raw, refs);
		for (size_t bit = 0; bit < refs[0].len * 8; bit++) {
			struct tfs_buf damaged;

			raw[0][bit / 8] ^= (uint8_t)(1u << (bit % 8));
			make_section(&damaged, '3', s->timing, 0.125, le_get32(sec + 8), refs,
				     n_raws);
			raw_accepted += flip_outcome(g, k, damaged.data, damaged.len, &b);
			buf_fini(&damaged);
			raw[0][bit / 8] ^= (uint8_t)(1u << (bit % 8));
		}
		fprintf(stderr, "# section %d: %zu of %zu stored and %zu of %zu raw flips decode\n",
			k, accepted, stored_end * 8, raw_accepted, refs[0].len * 8);
		for (size_t i = 0; i < n_raws; i++)
			free(raw[i]);
	}
	vblock_fini(&b);
	gold_v3_free(g);
}

static void test_ticks_golden_bit_flips_fail_cleanly(void **state)
{
	for (size_t f = 0; f < N_GOLD_FILES; f++)
		test_ticks_golden_bit_flips_fail_cleanly_in(gold_files[f]);
}

/* Rebuilding a golden section from its raw blocks gives the same bytes the decoder reads. */
static void test_ticks_golden_rebuilt_section_decodes_alike_in(const char *name)
{
	struct gold_v3 *g = gold_v3_load(name);
	struct vblock b;

	vblock_init(&b);
	for (int k = 0; k < g->n_secs; k++) {
		const uint8_t *sec = g->bin + g->sec[k].off;
		double rel_err;
		struct rawref refs[GOLD_MAX_BLOCKS];
		uint8_t *raw[GOLD_MAX_BLOCKS];
		struct tfs_buf rebuilt;
		struct tfs_diag d;
		size_t n_raws = gold_raws(g, k, raw, refs);
		uint64_t rel_bits = le_get64(sec + 12);

		memcpy(&rel_err, &rel_bits, sizeof(rel_err));
		make_section(&rebuilt, (char)sec[3], g->sec[k].timing, rel_err, le_get32(sec + 8),
			     refs, n_raws);
		assert_memory_equal(rebuilt.data, sec, 36);
		assert_int_equal(gold_decode(g, k, rebuilt.data, rebuilt.len, &b, &d), 0);
		buf_fini(&rebuilt);
		for (size_t i = 0; i < n_raws; i++)
			free(raw[i]);
	}
	vblock_fini(&b);
	gold_v3_free(g);
}

static void test_ticks_golden_rebuilt_section_decodes_alike(void **state)
{
	for (size_t f = 0; f < N_GOLD_FILES; f++)
		test_ticks_golden_rebuilt_section_decodes_alike_in(gold_files[f]);
}

/* The ticks section decodes after each allocation failure in turn, or reports -ENOMEM. */
static void test_ticks_decoder_survives_each_allocation_failure_in(const char *name)
{
	struct gold_v3 *g = gold_v3_load(name);
	const struct gold_sec *s = &g->sec[0];
	struct tfs_vsec v;

	assert_int_equal(s->timing, VAL_TIMING_LOSSLESS);
	assert_int_equal(vsec_open(&v, g->bin + s->off, s->len, s->off, NULL), 0);
	for (long n = 0;; n++) {
		struct vblock b;

		vblock_init(&b);
		fa_arm(n);
		for (uint64_t blk = 0; blk < v.n_blocks; blk++) {
			uint64_t first = blk * v.block_events;
			int rc = vsec_decode_block(&v, blk, s->term + first, g->nv, 3, &b, NULL);

			if (rc < 0) {
				assert_int_equal(rc, -ENOMEM);
				fa_disarm();
				rc =
				    vsec_decode_block(&v, blk, s->term + first, g->nv, 3, &b, NULL);
			}
			assert_int_equal(rc, 0);
			for (uint32_t i = 0; i < b.n_events; i++)
				assert_true(b.ts_ns[i] == s->ts[first + i] &&
					    b.dur_ns[i] == s->dur[first + i]);
		}
		fa_disarm();
		vblock_fini(&b);
		if (fa_count() <= n)
			break;
	}
	gold_v3_free(g);
}

static void test_ticks_decoder_survives_each_allocation_failure(void **state)
{
	for (size_t f = 0; f < N_GOLD_FILES; f++)
		test_ticks_decoder_survives_each_allocation_failure_in(gold_files[f]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ticks_spec_example_decodes),
		cmocka_unit_test(test_ticks_golden_v3_file_decodes_as_committed),
		cmocka_unit_test(test_ticks_q_out_of_range_is_corrupt),
		cmocka_unit_test(test_ticks_more_corrections_than_steps_is_corrupt),
		cmocka_unit_test(test_ticks_correction_index_at_2n_is_corrupt),
		cmocka_unit_test(test_ticks_skip_overflow_is_corrupt),
		cmocka_unit_test(test_ticks_correction_of_0_is_corrupt),
		cmocka_unit_test(test_ticks_bit_3_outside_lossless_tfv3_is_corrupt),
		cmocka_unit_test(test_ticks_truncated_header_is_corrupt),
		cmocka_unit_test(test_ticks_malformed_header_varint_is_corrupt),
		cmocka_unit_test(test_ticks_arithmetic_edges),
		cmocka_unit_test(test_ticks_random_blocks_match_the_formula),
		cmocka_unit_test(test_ticks_writer_step_matches_the_reader),
		cmocka_unit_test(test_ticks_encoder_output_follows_the_spec),
		cmocka_unit_test(test_ticks_golden_truncations_are_corrupt),
		cmocka_unit_test(test_ticks_golden_bit_flips_fail_cleanly),
		cmocka_unit_test(test_ticks_golden_rebuilt_section_decodes_alike),
		cmocka_unit_test(test_ticks_decoder_survives_each_allocation_failure),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
