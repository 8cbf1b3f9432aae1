/*
 * Value classes of TFV4 values sections (FORMAT.md §7.3.1): the committed golden sections of
 * tests/data/golden/values_v4.* (written by values_v4.py from the spec) decode as committed
 * and tracefs's encoder writes their raw blocks byte for byte; seeded round trips of
 * allocator-like and random streams with classes in every timing mode; every truncation
 * and bit flip of the golden sections is refused; hostile tags; patched tag words; the
 * schema's numbering of class names; allocation failure in turn in encoder and decoder.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema_i.h"
#include "values_i.h"
#include "vpatch_i.h"
#include "zstd_i.h"
#include "testfiles.h"
#include "testutil.h"

#define N_TERMS 5
#define MAX_EV 256
#define N_GOLD_SECS 2

/* tests/data/golden/values_v4.txt: classes, then sections and their events. */
struct gold {
	uint8_t *bin;
	size_t bin_len;
	uint8_t nv[N_TERMS];
	uint8_t cls[N_TERMS * TFS_MAX_ARGS];
	uint32_t cls_off[N_TERMS];
	struct {
		size_t off, len, n;
		int timing;
		uint32_t block_events;
		uint32_t term[MAX_EV];
		uint64_t ts[MAX_EV], dur[MAX_EV], vals[MAX_EV][3];
	} sec[N_GOLD_SECS];
};

/* "classes 0,1,2 1,2 ... -": each terminal's fields' classes, "-" for none. */
static void gold_parse_classes(struct gold *g, const char *line)
{
	const char *p = line + strlen("classes");

	for (uint32_t t = 0; t < N_TERMS; t++) {
		g->cls_off[t] = t * TFS_MAX_ARGS;
		while (*p == ' ')
			p++;
		if (*p == '-') {
			p++;
			continue;
		}
		for (;;) {
			char *end;
			unsigned long c = strtoul(p, &end, 10);

			assert_true(end != p && c <= VAL_MAX_CLASSES && g->nv[t] < 3);
			g->cls[t * TFS_MAX_ARGS + g->nv[t]++] = (uint8_t)c;
			p = end;
			if (*p != ',')
				break;
			p++;
		}
	}
}

static struct gold *gold_load(void)
{
	struct gold *g = calloc(1, sizeof(*g));
	char line[512];
	FILE *f;
	int k = -1;

	assert_non_null(g);
	g->bin = slurp(TFS_TEST_DATA "/golden/values_v4.bin", &g->bin_len);
	f = fopen(TFS_TEST_DATA "/golden/values_v4.txt", "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long x[6];
		unsigned int t;
		int got;

		if (line[0] == '#')
			continue;
		if (strncmp(line, "classes ", 8) == 0) {
			gold_parse_classes(g, line);
			continue;
		}
		if (sscanf(line, "section %llu %llu %llu %llu %llu", &x[0], &x[1], &x[2], &x[3],
			   &x[4]) == 5) {
			assert_true(++k < N_GOLD_SECS);
			g->sec[k].off = x[0];
			g->sec[k].len = x[1];
			g->sec[k].timing = (int)x[2];
			g->sec[k].block_events = (uint32_t)x[3];
			continue;
		}
		got = sscanf(line, "%u %llu %llu %llu %llu %llu", &t, &x[0], &x[1], &x[2], &x[3],
			     &x[4]);
		assert_true(k >= 0 && got >= 3 && t < N_TERMS && got == 3 + g->nv[t]);
		assert_true(g->sec[k].n < MAX_EV);
		g->sec[k].term[g->sec[k].n] = t;
		g->sec[k].ts[g->sec[k].n] = x[0];
		g->sec[k].dur[g->sec[k].n] = x[1];
		for (int j = 0; j < 3; j++)
			g->sec[k].vals[g->sec[k].n][j] = x[2 + j];
		g->sec[k].n++;
	}
	fclose(f);
	assert_int_equal(k, N_GOLD_SECS - 1);
	assert_true(g->sec[k].off + g->sec[k].len == g->bin_len);
	return g;
}

static void gold_free(struct gold *g)
{
	free(g->bin);
	free(g);
}

/* Open @data as a section with the golden terminals' classes. */
static int gold_open(const struct gold *g, const uint8_t *data, size_t len, struct tfs_vsec *v,
		     struct tfs_diag *d)
{
	int rc = vsec_open(v, data, len, 0, d);

	v->cls = g->cls;
	v->cls_off = g->cls_off;
	return rc;
}

/* Decode every block of (possibly damaged) section @k. @return the first error or 0 */
static int gold_decode(const struct gold *g, int k, const uint8_t *data, size_t len,
		       struct vblock *b)
{
	struct tfs_diag d;
	struct tfs_vsec v;
	int rc;

	memset(&d, 0, sizeof(d));
	rc = gold_open(g, data, len, &v, &d);
	for (uint64_t blk = 0; rc == 0 && blk < v.n_blocks; blk++) {
		if (blk * v.block_events + vsec_block_len(&v, blk) > g->sec[k].n)
			return -E2BIG; /* a damaged header promises more events than listed */
		rc = vsec_decode_block(&v, blk, g->sec[k].term + blk * v.block_events, g->nv,
				       N_TERMS, b, &d);
	}
	if (rc < 0 && rc != -E2BIG)
		assert_true(d.reason[0] != 0);
	return rc;
}

/* The committed sections open as TFV4 and decode to exactly the committed numbers. */
static void test_vclass_golden_file_decodes_as_committed(void **state)
{
	struct gold *g = gold_load();
	struct vblock b;

	vblock_init(&b);
	for (int k = 0; k < N_GOLD_SECS; k++) {
		const uint8_t *data = g->bin + g->sec[k].off;
		struct tfs_vsec v;

		assert_int_equal(gold_open(g, data, g->sec[k].len, &v, NULL), 0);
		assert_int_equal(v.version, 4);
		assert_int_equal(v.timing, g->sec[k].timing);
		assert_int_equal(v.block_events, g->sec[k].block_events);
		assert_true(v.n_events == g->sec[k].n);
		for (uint64_t blk = 0; blk < v.n_blocks; blk++) {
			assert_int_equal(vsec_decode_block(&v, blk,
							   g->sec[k].term + blk * v.block_events,
							   g->nv, N_TERMS, &b, NULL),
					 0);
			for (uint32_t i = 0; i < b.n_events; i++) {
				const uint64_t e = b.first_event + i;
				const uint32_t t = g->sec[k].term[e];

				assert_true(b.ts_ns[i] == g->sec[k].ts[e]);
				assert_true(b.dur_ns[i] == g->sec[k].dur[e]);
				assert_int_equal(b.val_off[i + 1] - b.val_off[i], g->nv[t]);
				assert_memory_equal(b.vals + b.val_off[i], g->sec[k].vals[e],
						    g->nv[t] * sizeof(uint64_t));
			}
		}
	}
	vblock_fini(&b);
	gold_free(g);
}

/* The varint at @p[*@pos] (a test's own reading of FORMAT.md's header). */
static uint64_t take_varint(const uint8_t *p, size_t len, size_t *pos)
{
	uint64_t x = 0;

	for (unsigned int shift = 0; shift < 64; shift += 7) {
		assert_true(*pos < len);
		x |= (uint64_t)(p[*pos] & 0x7f) << shift;
		if (!(p[(*pos)++] & 0x80))
			return x;
	}
	fail();
	return 0;
}

/* Where column @c (FORMAT.md §7.2, untimed TFV4: 0 ts ... 4 class) of raw block @raw starts. */
static size_t raw_column(const struct tfs_buf *raw, int c)
{
	size_t pos = 0, off;
	uint64_t len[5];

	take_varint(raw->data, raw->len, &pos); /* n */
	pos++;					/* pred */
	for (int k = 0; k < 5; k++)
		len[k] = take_varint(raw->data, raw->len, &pos);
	off = pos;
	for (int k = 0; k < c; k++)
		off += len[k];
	return off;
}

/* Raw block @blk of section @data, decompressed into @raw. */
static size_t raw_block(const uint8_t *data, size_t len, uint64_t blk, struct tfs_buf *raw)
{
	const uint8_t *ent = data + 36 + 16 * blk;
	const uint32_t stored = le_get32(ent + 8), raw_len = le_get32(ent + 12);

	assert_true(le_get64(ent) + stored <= len);
	raw->len = 0;
	assert_int_equal(buf_reserve(raw, raw_len), 0);
	assert_int_equal(zs_decompress(data + le_get64(ent), stored, raw->data, raw_len, 0,
				       "values", NULL),
			 0);
	raw->len = raw_len;
	return raw_len;
}

/*
 * tracefs's encoder, given the golden events and the predictors values_v4.py chose (none;
 * nanoseconds, both columns predicted, gaps from the end), writes the same raw blocks:
 * the tags of §7.3.1's writer rule.
 */
static void test_vclass_encoder_writes_the_golden_blocks(void **state)
{
	struct gold *g = gold_load();
	struct tfs_buf raw_a, raw_b;

	buf_init(&raw_a);
	buf_init(&raw_b);
	for (int k = 0; k < N_GOLD_SECS; k++) {
		const bool timed = g->sec[k].timing != VAL_TIMING_NONE;
		/* the golden sections are TFV4 */
		const struct venc_opts o = {.block_events = g->sec[k].block_events,
					    .timing = g->sec[k].timing,
					    .version = 4,
					    .pred = timed ? VAL_PRED_FIXED | VAL_PRED_ALL : 0,
					    .gap_base = timed ? VAL_BASE_END : 0,
					    .ticks = VAL_TICKS_NEVER,
					    .coded = VAL_CODED_NEVER};
		const uint8_t *want = g->bin + g->sec[k].off;
		struct tfs_venc *e;
		struct tfs_buf sec;
		struct tfs_vsec v;

		assert_int_equal(venc_new(&o, &e), 0);
		for (size_t i = 0; i < g->sec[k].n; i++) {
			const uint32_t t = g->sec[k].term[i];

			assert_int_equal(venc_add_cls(e, t, g->sec[k].ts[i], g->sec[k].dur[i],
						      g->sec[k].vals[i], g->nv[t],
						      g->cls + g->cls_off[t]),
					 0);
		}
		buf_init(&sec);
		assert_int_equal(venc_finish(e, &sec), 0);
		venc_free(e);
		assert_memory_equal(sec.data, want, 36); /* header: magic to n_blocks */
		assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
		for (uint64_t blk = 0; blk < v.n_blocks; blk++) {
			size_t a = raw_block(sec.data, sec.len, blk, &raw_a);
			size_t b = raw_block(want, g->sec[k].len, blk, &raw_b);

			assert_int_equal(a, b);
			assert_memory_equal(raw_a.data, raw_b.data, a);
		}
		buf_fini(&sec);
	}
	buf_fini(&raw_a);
	buf_fini(&raw_b);
	gold_free(g);
}

static void test_vclass_golden_truncations_are_corrupt(void **state)
{
	struct gold *g = gold_load();
	struct vblock b;

	vblock_init(&b);
	for (int k = 0; k < N_GOLD_SECS; k++) {
		const uint8_t *data = g->bin + g->sec[k].off;

		assert_int_equal(gold_decode(g, k, data, g->sec[k].len, &b), 0);
		for (size_t len = 0; len < g->sec[k].len; len++) {
			uint8_t *copy = malloc(len + 1);

			memcpy(copy, data, len);
			assert_int_equal(gold_decode(g, k, copy, len, &b), -TFS_ECORRUPT);
			free(copy);
		}
	}
	vblock_fini(&b);
	gold_free(g);
}

/* Whether (damaged) section @k decodes to exactly the committed values. */
static bool gold_same(const struct gold *g, int k, const uint8_t *data, struct vblock *b)
{
	struct tfs_vsec v;

	assert_int_equal(gold_open(g, data, g->sec[k].len, &v, NULL), 0);
	for (uint64_t blk = 0; blk < v.n_blocks; blk++) {
		assert_int_equal(vsec_decode_block(&v, blk, g->sec[k].term + blk * v.block_events,
						   g->nv, N_TERMS, b, NULL),
				 0);
		for (uint32_t i = 0; i < b->n_events; i++) {
			const uint64_t e = b->first_event + i;

			if (b->ts_ns[i] != g->sec[k].ts[e] || b->dur_ns[i] != g->sec[k].dur[e] ||
			    memcmp(b->vals + b->val_off[i], g->sec[k].vals[e],
				   g->nv[g->sec[k].term[e]] * sizeof(uint64_t)))
				return false;
		}
	}
	return true;
}

/*
 * Every single-bit flip of a golden section is refused, or changes nothing that decodes: a
 * zstd frame has a few bits its decoder may read either way to the same bytes (its
 * checksum then holds), and those must decode to exactly the committed values.
 */
static void test_vclass_golden_bit_flips_are_refused(void **state)
{
	struct gold *g = gold_load();
	struct vblock b;

	vblock_init(&b);
	for (int k = 0; k < N_GOLD_SECS; k++) {
		uint8_t *copy = malloc(g->sec[k].len);
		size_t same = 0;

		assert_non_null(copy);
		memcpy(copy, g->bin + g->sec[k].off, g->sec[k].len);
		for (size_t bit = 0; bit < g->sec[k].len * 8; bit++) {
			int rc;

			copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			rc = gold_decode(g, k, copy, g->sec[k].len, &b);
			if (rc == 0) {
				/* or "TFV4" read as "TFV5": they differ in coded columns only */
				assert_true(bit == 24 ||
					    bit / 8 >= 36 + 16 * ((g->sec[k].n - 1) /
									g->sec[k].block_events +
								    1));
				assert_true(gold_same(g, k, copy, &b));
				same++;
			} else {
				assert_true(rc == -TFS_ECORRUPT || rc == -TFS_EFORMAT ||
					    rc == -E2BIG);
			}
			copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		}
		fprintf(stderr, "# section %d: %zu of %zu flips refused, %zu (inside zstd frames, "
			"or TFV4 read as TFV5) decode to the same values\n", k, g->sec[k].len * 8 - same,
			g->sec[k].len * 8, same);
		free(copy);
	}
	vblock_fini(&b);
	gold_free(g);
}

/*
 * A one-block section of @n events, whose raw block is @raw (FORMAT.md §7.2), compressed
 * here so that the checksum holds and only the block's own checks can refuse it.
 */
static void one_block_section(const uint8_t *raw, size_t raw_len, uint32_t n, int timing,
			      struct tfs_buf *sec)
{
	struct tfs_buf frame;
	uint8_t h[36 + 16] = {'T', 'F', 'V', '4', (uint8_t)timing};

	buf_init(&frame);
	assert_int_equal(zs_compress(&frame, raw, raw_len, 1), 0);
	le_put32(h + 8, n);
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

/* Decode a hand-made untimed block of terminals @terms (classes of values_v4.py). */
static int decode_hand_block(const uint8_t *raw, size_t raw_len, const uint32_t *terms,
			     uint32_t n, struct vblock *b, struct tfs_diag *d)
{
	struct gold *g = gold_load();
	struct tfs_buf sec;
	struct tfs_vsec v;
	int rc;

	one_block_section(raw, raw_len, n, VAL_TIMING_NONE, &sec);
	memset(d, 0, sizeof(*d));
	rc = gold_open(g, sec.data, sec.len, &v, d);
	if (rc == 0)
		rc = vsec_decode_block(&v, 0, terms, g->nv, N_TERMS, b, d);
	buf_fini(&sec);
	gold_free(g);
	return rc;
}

/*
 * Hand-made blocks (terminal 1: address and id, both of a class): tags that mean what §7.3.1
 * says, and each way a tag can be wrong.
 */
static void test_vclass_hostile_tags_are_corrupt(void **state)
{
	/* n 3, pred 0, lens 0 0 0 6 6; tags 1 2 3 2 0 4, class column 2 2 0 4 0 0: event 0:
	 * address tag 1 (stride 0 + 1), id tag 2 (max 0 + 1 + 1); event 1: address tag 3 (the
	 * last, 1), id tag 2 (max 2 + 1 + 2); event 2: address tag 0 (stride 1 + 0), id tag 4
	 * (one back, 2) */
	static const uint8_t good[] = {3, 0, 0, 0, 0, 6, 6, 1, 2, 3, 2, 0, 4, 2, 2, 0, 4, 0, 0};
	const uint32_t terms[] = {1, 1, 1};
	const uint64_t want[] = {1, 2, 1, 5, 1, 2};
	uint8_t bad[sizeof(good)];
	struct tfs_diag d;
	struct vblock b;

	vblock_init(&b);
	assert_int_equal(decode_hand_block(good, sizeof(good), terms, 3, &b, &d), 0);
	assert_memory_equal(b.vals, want, sizeof(want));
	/* event 0's address reaches one value back in an empty class */
	memcpy(bad, good, sizeof(bad));
	bad[7] = 3;
	assert_int_equal(decode_hand_block(bad, sizeof(bad), terms, 3, &b, &d), -TFS_ECORRUPT);
	assert_non_null(strstr(d.reason, "before the class's first value"));
	/* event 2's id reaches 252 values back with 5 in the class */
	bad[7] = 1;
	bad[12] = 255;
	assert_int_equal(decode_hand_block(bad, sizeof(bad), terms, 3, &b, &d), -TFS_ECORRUPT);
	/* a stride hit (event 2's address) with a residual */
	bad[12] = 4;
	bad[17] = 1;
	assert_int_equal(decode_hand_block(bad, sizeof(bad), terms, 3, &b, &d), -TFS_ECORRUPT);
	assert_non_null(strstr(d.reason, "residual of a hit not 0"));
	/* a tag short: the last field finds no tag */
	{
		static const uint8_t short_tags[] = {3, 0, 0, 0, 0, 5, 6, 1, 2, 3, 2, 0,
						     2, 2, 0, 4, 0, 0};

		assert_int_equal(decode_hand_block(short_tags, sizeof(short_tags), terms, 3, &b,
						   &d),
				 -TFS_ECORRUPT);
		assert_non_null(strstr(d.reason, "missing tag"));
	}
	/* a tag left over */
	{
		static const uint8_t extra[] = {3, 0, 0, 0, 0, 7, 6, 1, 2, 3, 2, 0, 4, 0,
						2, 2, 0, 4, 0, 0};

		assert_int_equal(decode_hand_block(extra, sizeof(extra), terms, 3, &b, &d),
				 -TFS_ECORRUPT);
		assert_non_null(strstr(d.reason, "unread bytes in tags"));
	}
	/* the last field's residual missing from the class column */
	{
		static const uint8_t no_res[] = {3, 0, 0, 0, 0, 6, 5, 1, 2, 3, 2, 0, 4,
						 2, 2, 0, 4, 0};

		assert_int_equal(decode_hand_block(no_res, sizeof(no_res), terms, 3, &b, &d),
				 -TFS_ECORRUPT);
	}
	vblock_fini(&b);
}

/*
 * Every bit flip of every raw block of the golden sections, recompressed so that only the
 * block's own checks stand: each decodes or is refused as corrupt, never crashes or reads
 * past its bytes (run under ASan).
 */
static void test_vclass_raw_block_flips_fail_cleanly(void **state)
{
	struct gold *g = gold_load();
	struct tfs_buf raw, sec;
	size_t refused = 0, total = 0;
	struct vblock b;

	vblock_init(&b);
	buf_init(&raw);
	for (int k = 0; k < N_GOLD_SECS; k++) {
		const uint8_t *data = g->bin + g->sec[k].off;
		struct tfs_vsec v;

		assert_int_equal(gold_open(g, data, g->sec[k].len, &v, NULL), 0);
		for (uint64_t blk = 0; blk < v.n_blocks && blk < 3; blk++) {
			const size_t len = raw_block(data, g->sec[k].len, blk, &raw);
			const uint32_t n = vsec_block_len(&v, blk);

			for (size_t bit = 0; bit < len * 8; bit++) {
				struct tfs_diag d;
				struct tfs_vsec one;
				int rc;

				raw.data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
				one_block_section(raw.data, len, n, g->sec[k].timing, &sec);
				rc = gold_open(g, sec.data, sec.len, &one, &d);
				if (rc == 0)
					rc = vsec_decode_block(&one, 0, g->sec[k].term +
								 blk * v.block_events,
							       g->nv, N_TERMS, &b, &d);
				assert_true(rc == 0 || rc == -TFS_ECORRUPT);
				refused += rc != 0;
				total++;
				buf_fini(&sec);
				raw.data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			}
		}
	}
	fprintf(stderr, "# %zu of %zu raw-block flips refused, the rest decode other values\n",
		refused, total);
	buf_fini(&raw);
	vblock_fini(&b);
	gold_free(g);
}

/* Random allocator-like streams with classes, and random values: every mode round-trips. */
struct rstream {
	size_t n;
	uint32_t term[4000];
	uint64_t ts[4000], dur[4000], vals[4000][3];
};

static const uint8_t r_nv[N_TERMS] = {3, 2, 3, 3, 0};
static uint8_t r_cls[N_TERMS * TFS_MAX_ARGS];
static uint32_t r_cls_off[N_TERMS];

static void r_classes(void)
{
	static const uint8_t c[N_TERMS][3] = {{0, 1, 2}, {1, 2}, {1, 1, 0}, {0, 1, 200}, {0}};

	for (uint32_t t = 0; t < N_TERMS; t++) {
		r_cls_off[t] = t * TFS_MAX_ARGS;
		memcpy(r_cls + t * TFS_MAX_ARGS, c[t], 3);
	}
}

static void r_fill(struct rstream *s, uint64_t *rng)
{
	uint64_t live[64], ts = tu_rand(rng) >> 20, id = tu_below(rng, 3) ? 0 : UINT64_MAX - 40;
	size_t n_live = 0;

	s->n = 1 + tu_below(rng, 4000);
	for (size_t i = 0; i < s->n; i++) {
		uint64_t *v = s->vals[i];
		uint32_t t = (uint32_t)tu_below(rng, N_TERMS);

		if (t == 1 && !n_live)
			t = 0;
		s->term[i] = t;
		ts += tu_below(rng, 8) ? tu_below(rng, 100) : tu_rand(rng) >> 40;
		s->ts[i] = ts;
		s->dur[i] = tu_below(rng, 4) ? tu_below(rng, 50) : tu_rand(rng);
		memset(v, 0, 3 * sizeof(*v));
		switch (t) {
		case 0:
		case 3:
			v[0] = 16 << tu_below(rng, 8);
			v[1] = tu_below(rng, 2) && n_live ? live[tu_below(rng, n_live)]
							 : 0x5555000000 + 16 * tu_below(rng, 1000);
			v[2] = tu_below(rng, 10) ? ++id : tu_rand(rng);
			if (n_live < 64)
				live[n_live++] = v[1];
			break;
		case 1: {
			size_t k = tu_below(rng, n_live);

			v[0] = live[k];
			v[1] = tu_below(rng, 2) ? id - tu_below(rng, 30) : tu_rand(rng);
			live[k] = live[--n_live];
			break;
		}
		case 2:
			v[0] = tu_below(rng, 3) ? 0x7f0000 + 4096 * (i % 9) : tu_rand(rng);
			v[1] = tu_below(rng, 2) ? v[0] : UINT64_MAX - tu_below(rng, 3);
			v[2] = 4096 * i;
			break;
		default:
			break;
		}
	}
}

static void r_check(const struct rstream *s, const struct venc_opts *o, int version)
{
	struct venc_opts vo = *o;
	struct tfs_venc *e;
	struct tfs_buf sec;
	struct tfs_vsec v;
	struct vblock b;

	vo.version = version;
	assert_int_equal(venc_new(&vo, &e), 0);
	for (size_t i = 0; i < s->n; i++)
		assert_int_equal(venc_add_cls(e, s->term[i], s->ts[i], s->dur[i], s->vals[i],
					      r_nv[s->term[i]], r_cls + r_cls_off[s->term[i]]),
				 0);
	buf_init(&sec);
	assert_int_equal(venc_finish(e, &sec), 0);
	venc_free(e);
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
	v.cls = r_cls; /* TFV3 ignores them: it has no tags */
	v.cls_off = r_cls_off;
	vblock_init(&b);
	for (uint64_t blk = 0; blk < v.n_blocks; blk++) {
		assert_int_equal(vsec_decode_block(&v, blk, s->term + blk * v.block_events, r_nv,
						   N_TERMS, &b, NULL),
				 0);
		for (uint32_t i = 0; i < b.n_events; i++) {
			const uint64_t k = b.first_event + i;

			assert_memory_equal(b.vals + b.val_off[i], s->vals[k],
					    r_nv[s->term[k]] * sizeof(uint64_t));
			if (o->timing == VAL_TIMING_LOSSLESS)
				assert_true(b.ts_ns[i] == s->ts[k] && b.dur_ns[i] == s->dur[k]);
		}
	}
	vblock_fini(&b);
	buf_fini(&sec);
}

static void test_vclass_seeded_round_trip(void **state)
{
	uint64_t rng = tu_seed("vclass_round_trip");
	struct rstream *s = malloc(sizeof(*s));

	assert_non_null(s);
	r_classes();
	for (int round = 0; round < 40; round++) {
		const struct venc_opts o = {
			.block_events = (uint32_t)(1 + tu_below(&rng, 600)),
			.timing = (int)tu_below(&rng, 3),
			.rel_err = 0.05,
		};

		r_fill(s, &rng);
		r_check(s, &o, 4);
		r_check(s, &o, 3);
	}
	free(s);
}

/*
 * A cycle of 253 values of one class that stride never predicts: each value from the second
 * round on is a history hit 252 values back (tag 255), but for the few the writer's table
 * forgot; a cycle of 254 reaches past the history and never hits.
 */
static void test_vclass_history_reaches_253_values(void **state)
{
	static const uint8_t cls[1] = {1};
	const uint32_t n = 2000, period = 253;
	const struct venc_opts o = {.block_events = n, .timing = VAL_TIMING_NONE};
	uint32_t *terms = calloc(n, sizeof(*terms));
	uint8_t nv[1] = {1};
	struct tfs_venc *e;
	struct tfs_buf sec, raw;
	struct tfs_vsec v;
	struct vblock b;

	assert_non_null(terms);
	for (int pass = 0; pass < 2; pass++) {
		const uint32_t per = pass ? period + 1 : period;
		size_t tags_at, hits = 0;
		uint32_t off0 = 0;

		assert_int_equal(venc_new(&o, &e), 0);
		for (uint32_t i = 0; i < n; i++) {
			/* a permutation-like cycle the stride never predicts */
			uint64_t x = (uint64_t)(i % per) * (i % per) * 7919 + 1;

			assert_int_equal(venc_add_cls(e, 0, 0, 0, &x, 1, cls), 0);
		}
		buf_init(&sec);
		assert_int_equal(venc_finish(e, &sec), 0);
		venc_free(e);
		assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
		v.cls = cls;
		v.cls_off = &off0;
		vblock_init(&b);
		assert_int_equal(vsec_decode_block(&v, 0, terms, nv, 1, &b, NULL), 0);
		for (uint32_t i = 0; i < n; i++)
			assert_true(b.vals[i] == (uint64_t)(i % per) * (i % per) * 7919 + 1);
		vblock_fini(&b);
		buf_init(&raw);
		raw_block(sec.data, sec.len, 0, &raw);
		tags_at = raw_column(&raw, 3);
		for (uint32_t i = per; i < n; i++)
			hits += raw.data[tags_at + i] == 255;
		for (uint32_t i = 0; i < n; i++) {
			const uint8_t tag = raw.data[tags_at + i];

			assert_true(tag == 255 || tag == 1 || tag == 2); /* hit or miss */
		}
		if (pass == 0)
			assert_true(hits >= (n - per) * 9 / 10);
		else
			assert_int_equal(hits, 0);
		buf_fini(&raw);
		buf_fini(&sec);
	}
	free(terms);
}

/* Two streams differing in one freed address: a patch of a tag word decodes the other. */
static void test_vclass_tag_words_patch(void **state)
{
	static const uint8_t cls[2] = {1, 2};
	const struct venc_opts o = {.block_events = 64, .timing = VAL_TIMING_NONE};
	const uint8_t nv[1] = {2};
	uint32_t terms[200] = {0}, off0 = 0;
	struct tfs_buf sec[2];
	struct tfs_vsec vs[2];
	struct vpatch_list pl;
	struct vblock b;
	bool tag_patched = false;

	for (int k = 0; k < 2; k++) {
		struct tfs_venc *e;

		assert_int_equal(venc_new(&o, &e), 0);
		for (uint64_t i = 0; i < 200; i++) {
			uint64_t x[2] = {0x1000 + 16 * (i % 5), i};

			if (k && i == 77)
				x[0] = 0x1000 + 16 * 3; /* a hit where the first stream missed */
			assert_int_equal(venc_add_cls(e, 0, 0, 0, x, 2, cls), 0);
		}
		buf_init(&sec[k]);
		assert_int_equal(venc_finish(e, &sec[k]), 0);
		venc_free(e);
		assert_int_equal(vsec_open(&vs[k], sec[k].data, sec[k].len, 0, NULL), 0);
		vs[k].cls = cls;
		vs[k].cls_off = &off0;
	}
	assert_int_equal(vpatch_diff(&vs[0], &vs[1], 100, &pl), 0);
	assert_true(pl.n > 0);
	for (uint32_t i = 0; i < pl.n; i++)
		tag_patched |= pl.e[i].col == 3; /* tags (FORMAT.md §8.1) */
	assert_true(tag_patched);
	vblock_init(&b);
	for (uint64_t blk = 0; blk < vs[0].n_blocks; blk++) {
		uint32_t lo = 0, hi;

		while (lo < pl.n && pl.e[lo].block < blk)
			lo++;
		for (hi = lo; hi < pl.n && pl.e[hi].block == blk; hi++)
			;
		assert_int_equal(vsec_decode_block_patched(&vs[0], blk, pl.e + lo, hi - lo,
							   terms + 64 * blk, nv, 1, &b, NULL),
				 0);
		for (uint32_t i = 0; i < b.n_events; i++) {
			const uint64_t k = b.first_event + i;

			const uint64_t addr = k == 77 ? 0x1000 + 16 * 3 : 0x1000 + 16 * (k % 5);

			assert_true(b.vals[2 * i] == addr);
			assert_true(b.vals[2 * i + 1] == k);
		}
		/* a tag word over 255 is refused */
		for (uint32_t i = lo; i < hi; i++) {
			struct vpatch p = pl.e[i];
			struct tfs_diag d;

			if (p.col != 3)
				continue;
			p.word = 256;
			assert_int_equal(vsec_decode_block_patched(&vs[0], blk, &p, 1,
								   terms + 64 * blk, nv, 1, &b, &d),
					 -TFS_ECORRUPT);
		}
	}
	vblock_fini(&b);
	vpatch_list_fini(&pl);
	buf_fini(&sec[0]);
	buf_fini(&sec[1]);
}

/* Equal class names share a number across kinds; 256 names are refused. */
static void test_vclass_schema_numbers_class_names(void **state)
{
	const struct tfs_arg_desc a1[] = {{"size", TFS_TYPE_U64, TFS_ENC_VAL, 0, NULL},
					  {"ret", TFS_TYPE_HEX, TFS_ENC_VAL, 0, "addr"},
					  {"file", TFS_TYPE_U64, TFS_ENC_SYM, 0, "file"},
					  {"id", TFS_TYPE_U64, TFS_ENC_VAL, 0, "alloc"}};
	const struct tfs_arg_desc a2[] = {{"ptr", TFS_TYPE_HEX, TFS_ENC_VAL, 0, "addr"},
					  {"id", TFS_TYPE_U64, TFS_ENC_VAL, 0, "alloc"},
					  {"x", TFS_TYPE_U64, TFS_ENC_VAL, 0, ""}};
	const struct tfs_arg_desc bad[] = {{"x", TFS_TYPE_U64, TFS_ENC_VAL, 0, "a b"}};
	const struct tfs_kind_desc k1 = {"malloc", "alloc", 4, a1}, k2 = {"free", "alloc", 3, a2};
	const struct tfs_kind_desc kb = {"bad", "", 1, bad};
	struct tfs_schema s;
	uint32_t id;

	schema_init(&s);
	assert_int_equal(schema_add(&s, &k1, &id), 0);
	assert_int_equal(schema_add(&s, &k2, &id), 0);
	assert_int_equal(schema_add(&s, &kb, &id), -EINVAL);
	assert_int_equal(s.kinds[0].n_vals, 3);
	assert_int_equal(s.kinds[0].vcls[0], 0);
	assert_int_equal(s.kinds[0].vcls[1], 1);
	assert_int_equal(s.kinds[0].vcls[2], 2);
	assert_int_equal(s.kinds[1].vcls[0], 1);
	assert_int_equal(s.kinds[1].vcls[1], 2);
	assert_int_equal(s.kinds[1].vcls[2], 0);
	for (int i = 0; i < SCHEMA_MAX_VCLASSES; i++) {
		char name[16], cname[16];
		struct tfs_arg_desc a = {"v", TFS_TYPE_U64, TFS_ENC_VAL, 0, cname};
		struct tfs_kind_desc k = {name, "", 1, &a};

		snprintf(name, sizeof(name), "k%d", i);
		snprintf(cname, sizeof(cname), "c%d", i);
		/* "addr" and "alloc" are two names already */
		assert_int_equal(schema_add(&s, &k, &id),
				 i < SCHEMA_MAX_VCLASSES - 2 ? 0 : -EINVAL);
	}
	assert_int_equal(s.n_vcls, SCHEMA_MAX_VCLASSES);
	schema_fini(&s);
}

/* Events for the allocation-failure tests: allocations and frees of a few blocks. */
static int fa_add(struct tfs_venc *e, size_t first)
{
	static const uint8_t cls[3] = {0, 1, 2};

	for (size_t i = first; i < 40; i++) {
		uint64_t v[3] = {64, 0x5000 + 64 * (i % 3), i / 2};
		int rc = venc_add_cls(e, (uint32_t)(i % 2), 1000 * i, 10, i % 2 ? v + 1 : v,
				      i % 2 ? 2 : 3, i % 2 ? cls + 1 : cls);

		if (rc < 0)
			return rc;
	}
	return 0;
}

static void test_vclass_encoder_survives_each_allocation_failure(void **state)
{
	const struct venc_opts o = {.block_events = 9, .timing = VAL_TIMING_LOSSLESS};
	struct tfs_venc *e;
	struct tfs_buf ref;

	assert_int_equal(venc_new(&o, &e), 0);
	assert_int_equal(fa_add(e, 0), 0);
	buf_init(&ref);
	assert_int_equal(venc_finish(e, &ref), 0);
	venc_free(e);
	for (long n = 0;; n++) {
		struct tfs_buf out;
		size_t done = 0;
		int rc;

		fa_arm(n);
		rc = venc_new(&o, &e);
		if (rc == -ENOMEM) {
			fa_disarm();
			continue;
		}
		for (; done < 40; done = venc_n_events(e)) {
			rc = fa_add(e, done);
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
			assert_int_equal(venc_finish(e, &out), 0);
		}
		fa_disarm();
		assert_int_equal(out.len, ref.len);
		assert_memory_equal(out.data, ref.data, ref.len);
		buf_fini(&out);
		venc_free(e);
		if (fa_count() <= n)
			break;
	}
	buf_fini(&ref);
}

static void test_vclass_decoder_survives_each_allocation_failure(void **state)
{
	const struct venc_opts o = {.block_events = 9, .timing = VAL_TIMING_LOSSLESS};
	static const uint8_t cls[2 * TFS_MAX_ARGS] = {0, 1, 2, [TFS_MAX_ARGS] = 1, 2};
	static const uint32_t cls_off[2] = {0, TFS_MAX_ARGS};
	const uint8_t nv[2] = {3, 2};
	uint32_t terms[40];
	struct tfs_venc *e;
	struct tfs_buf sec;
	struct tfs_vsec v;

	for (uint32_t i = 0; i < 40; i++)
		terms[i] = i % 2;
	assert_int_equal(venc_new(&o, &e), 0);
	assert_int_equal(fa_add(e, 0), 0);
	buf_init(&sec);
	assert_int_equal(venc_finish(e, &sec), 0);
	venc_free(e);
	assert_int_equal(vsec_open(&v, sec.data, sec.len, 0, NULL), 0);
	v.cls = cls;
	v.cls_off = cls_off;
	for (long n = 0;; n++) {
		struct vblock b;

		vblock_init(&b);
		fa_arm(n);
		for (uint64_t blk = 0; blk < v.n_blocks; blk++) {
			int rc = vsec_decode_block(&v, blk, terms + 9 * blk, nv, 2, &b, NULL);

			if (rc < 0) {
				assert_int_equal(rc, -ENOMEM);
				fa_disarm();
				rc = vsec_decode_block(&v, blk, terms + 9 * blk, nv, 2, &b, NULL);
			}
			assert_int_equal(rc, 0);
			for (uint32_t i = 0; i < b.n_events; i++) {
				const uint64_t k = b.first_event + i;

				assert_true(b.vals[b.val_off[i + 1] - 1] == k / 2);
			}
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
		cmocka_unit_test(test_vclass_golden_file_decodes_as_committed),
		cmocka_unit_test(test_vclass_encoder_writes_the_golden_blocks),
		cmocka_unit_test(test_vclass_golden_truncations_are_corrupt),
		cmocka_unit_test(test_vclass_golden_bit_flips_are_refused),
		cmocka_unit_test(test_vclass_raw_block_flips_fail_cleanly),
		cmocka_unit_test(test_vclass_hostile_tags_are_corrupt),
		cmocka_unit_test(test_vclass_seeded_round_trip),
		cmocka_unit_test(test_vclass_history_reaches_253_values),
		cmocka_unit_test(test_vclass_tag_words_patch),
		cmocka_unit_test(test_vclass_schema_numbers_class_names),
		cmocka_unit_test(test_vclass_encoder_survives_each_allocation_failure),
		cmocka_unit_test(test_vclass_decoder_survives_each_allocation_failure),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
