/*
 * Allocation backtrace coder (FORMAT.md §10): prefix against the previous backtrace, then
 * per new frame a cache hit (14-bit bucket), a run of correct next-frame predictions, or a
 * miss carrying the address as a zigzag delta to the previous miss. The cache update rules
 * live in one set of helpers used by both directions, so encoder and decoder cannot drift.
 * It does not compress further (zstd is the container's business) or symbolize frames.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "btrace_i.h"

#define BT_NO_PRED 0xFFFFu
#define BT_NO_CTX UINT32_MAX

/* Record header byte: pop * 16 + new below BT_HDR_ESC, else two varints follow. */
#define BT_HDR_ESC 0xF0u
#define BT_HDR_LONG 0xFFu
/* Token first byte: below BT_TOK_MISS a hit, tag in the top two bits. */
#define BT_TOK_MISS 0xC0u
#define BT_TOK_RUN_SHORT_MAX 62u /* 0xC1..0xFE: run of 1..62 */
#define BT_TOK_RUN_LONG 0xFFu	 /* run of 63 + varint */
#define BT_TAG_RUN0 0u
#define BT_TAG_RUN1 1u
#define BT_TAG_RUNV 2u /* run of 2 + varint */

struct tfs_btenc {
	struct tfs_buf recs;
	uint64_t n_backtraces;
	uint64_t clock;
	uint64_t last_miss;
	uint32_t prev_n;
	int finished;
	uint64_t prev[BT_MAX_FRAMES];
	struct bt_bucket cache[BT_CACHE_SIZE];
};

/* The two skewed hash functions (FORMAT.md §10). */
static inline uint32_t bt_h1(uint64_t a)
{
	return (uint32_t)((a * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - BT_CACHE_BITS));
}

static inline uint32_t bt_h2(uint64_t a)
{
	return (uint32_t)(((a ^ (a >> 29)) * UINT64_C(0xC2B2AE3D27D4EB4F)) >> (64 - BT_CACHE_BITS));
}

/* Bucket holding @a, or BT_NO_CTX. */
static inline uint32_t bt_lookup(const struct bt_bucket *c, uint64_t a)
{
	uint32_t b = bt_h1(a);

	if (c[b].stamp && c[b].addr == a)
		return b;
	b = bt_h2(a);
	if (c[b].stamp && c[b].addr == a)
		return b;
	return BT_NO_CTX;
}

/* Insert @a (not present): the older of its two buckets, the first on a tie. */
static inline uint32_t bt_insert(struct bt_bucket *c, uint64_t *clock, uint64_t a)
{
	uint32_t b1 = bt_h1(a), b2 = bt_h2(a);
	uint32_t b = c[b2].stamp < c[b1].stamp ? b2 : b1;

	c[b].addr = a;
	c[b].pred = BT_NO_PRED;
	c[b].stamp = ++*clock;
	return b;
}

/* Frame @b follows context @ctx: remember it as the prediction, refresh @b. */
static inline void bt_follow(struct bt_bucket *c, uint64_t *clock, uint32_t ctx, uint32_t b)
{
	if (ctx != BT_NO_CTX)
		c[ctx].pred = (uint16_t)b;
	c[b].stamp = ++*clock;
}

/* The bucket @ctx predicts, or BT_NO_CTX when it predicts nothing usable. */
static inline uint32_t bt_predicted(const struct bt_bucket *c, uint32_t ctx)
{
	if (ctx == BT_NO_CTX || c[ctx].pred == BT_NO_PRED || !c[c[ctx].pred].stamp)
		return BT_NO_CTX;
	return c[ctx].pred;
}

/* Context for the first new frame: the last prefix frame's bucket, if still cached. */
static inline uint32_t bt_prefix_ctx(const struct bt_bucket *c, const uint64_t *prev, uint32_t p)
{
	return p ? bt_lookup(c, prev[p - 1]) : BT_NO_CTX;
}

int btenc_new(struct tfs_btenc **out)
{
	struct tfs_btenc *e;

	*out = NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	buf_init(&e->recs);
	for (uint32_t i = 0; i < BT_CACHE_SIZE; i++)
		e->cache[i].pred = BT_NO_PRED;
	*out = e;
	return 0;
}

void btenc_free(struct tfs_btenc *e)
{
	if (!e)
		return;
	buf_fini(&e->recs);
	free(e);
}

uint64_t btenc_n_backtraces(const struct tfs_btenc *e)
{
	return e->n_backtraces;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static uint8_t *put_run(uint8_t *p, uint32_t k)
{
	assert(k >= 1);
	if (k <= BT_TOK_RUN_SHORT_MAX) {
		*p++ = (uint8_t)(BT_TOK_MISS + k);
		return p;
	}
	*p++ = BT_TOK_RUN_LONG;
	return put_varint(p, k - BT_TOK_RUN_SHORT_MAX - 1);
}

/* Frames f[0..n) correctly predicted in a row from *ctx; follows them in the cache. */
static uint32_t take_run(struct tfs_btenc *e, uint32_t *ctx, const uint64_t *f, uint32_t n)
{
	uint32_t k = 0, b;

	while (k < n && (b = bt_predicted(e->cache, *ctx)) != BT_NO_CTX &&
	       e->cache[b].addr == f[k]) {
		bt_follow(e->cache, &e->clock, *ctx, b);
		*ctx = b;
		k++;
	}
	return k;
}

static uint8_t *put_hit(uint8_t *p, uint32_t b, uint32_t run)
{
	uint32_t tag = run == 0 ? BT_TAG_RUN0 : run == 1 ? BT_TAG_RUN1 : BT_TAG_RUNV;

	*p++ = (uint8_t)(tag << 6 | b >> 8);
	*p++ = (uint8_t)b;
	if (tag == BT_TAG_RUNV)
		p = put_varint(p, run - 2);
	return p;
}

/* Code the frames after the prefix; the output has room for the worst case. */
static uint8_t *put_frames(struct tfs_btenc *e, uint8_t *p, const uint64_t *f, uint32_t n,
			   uint32_t ctx)
{
	uint32_t i = 0, b, k;

	while (i < n) {
		k = take_run(e, &ctx, f + i, n - i);
		if (k) {
			p = put_run(p, k);
			i += k;
			continue;
		}
		b = bt_lookup(e->cache, f[i]);
		if (b != BT_NO_CTX) {
			bt_follow(e->cache, &e->clock, ctx, b);
			ctx = b;
			i++;
			k = take_run(e, &ctx, f + i, n - i);
			p = put_hit(p, b, k);
			i += k;
			continue;
		}
		*p++ = BT_TOK_MISS;
		p = put_varint(p, zigzag_enc((int64_t)(f[i] - e->last_miss)));
		e->last_miss = f[i];
		b = bt_insert(e->cache, &e->clock, f[i]);
		if (ctx != BT_NO_CTX)
			e->cache[ctx].pred = (uint16_t)b;
		ctx = b;
		i++;
	}
	return p;
}

int btenc_add(struct tfs_btenc *e, const uint64_t *frames, uint32_t n_frames)
{
	uint32_t p = 0, pop, n_new;
	uint8_t *w, *w0;

	if (e->finished || n_frames > BT_MAX_FRAMES)
		return -EINVAL;
	/* header <= 21 bytes, each frame <= 11: after this nothing can fail */
	if (buf_reserve(&e->recs, 21 + (size_t)n_frames * 11) < 0)
		return -ENOMEM;
	while (p < n_frames && p < e->prev_n && frames[p] == e->prev[p])
		p++;
	pop = e->prev_n - p;
	n_new = n_frames - p;
	w0 = w = e->recs.data + e->recs.len;
	if (pop < BT_HDR_ESC / 16 && n_new < 16) {
		*w++ = (uint8_t)(pop * 16 + n_new);
	} else {
		*w++ = BT_HDR_LONG;
		w = put_varint(w, pop);
		w = put_varint(w, n_new);
	}
	w = put_frames(e, w, frames + p, n_new, bt_prefix_ctx(e->cache, e->prev, p));
	e->recs.len += (size_t)(w - w0);
	if (n_new)
		memcpy(e->prev + p, frames + p, (size_t)n_new * sizeof(*frames));
	e->prev_n = n_frames;
	e->n_backtraces++;
	return 0;
}

int btenc_finish(struct tfs_btenc *e, struct tfs_buf *out)
{
	size_t len0 = out->len;

	if (buf_put_varint(out, e->n_backtraces) < 0 ||
	    buf_put(out, e->recs.data, e->recs.len) < 0) {
		out->len = len0;
		return -ENOMEM;
	}
	e->finished = 1;
	return 0;
}

int btdec_init(struct tfs_btdec *d, const uint8_t *data, size_t len, uint64_t base_off,
	       struct tfs_diag *diag)
{
	int rc;

	memset(d, 0, sizeof(*d));
	rd_init(&d->rd, data, len, base_off, "backtraces", diag);
	/* every record takes at least one byte */
	rc = rd_varint_max(&d->rd, len, &d->n_backtraces, "backtrace count");
	if (rc < 0)
		return rc;
	d->prev = calloc(BT_MAX_FRAMES, sizeof(*d->prev));
	if (!d->prev)
		return -ENOMEM;
	d->cache = calloc(BT_CACHE_SIZE, sizeof(*d->cache));
	if (!d->cache)
		goto err_free_prev;
	for (uint32_t i = 0; i < BT_CACHE_SIZE; i++)
		d->cache[i].pred = BT_NO_PRED;
	return 0;

err_free_prev:
	free(d->prev);
	d->prev = NULL;
	return -ENOMEM;
}

void btdec_fini(struct tfs_btdec *d)
{
	free(d->prev);
	free(d->cache);
	d->prev = NULL;
	d->cache = NULL;
}

/* Decode a run of @k predicted frames into f[0..k). */
static int get_run(struct tfs_btdec *d, uint32_t *ctx, uint64_t *f, uint64_t k)
{
	uint32_t b;

	for (uint64_t j = 0; j < k; j++) {
		b = bt_predicted(d->cache, *ctx);
		if (b == BT_NO_CTX)
			return rd_fail(&d->rd, "prediction run without a prediction");
		bt_follow(d->cache, &d->clock, *ctx, b);
		*ctx = b;
		f[j] = d->cache[b].addr;
	}
	return 0;
}

/* One hit token whose first byte @t was read; returns the frames it yields in *@used. */
static int get_hit(struct tfs_btdec *d, uint8_t t, uint32_t *ctx, uint64_t *f, uint32_t left,
		   uint32_t *used)
{
	uint64_t run;
	uint8_t lo;
	uint32_t b;
	int rc;

	rc = rd_u8(&d->rd, &lo);
	if (rc < 0)
		return rc;
	b = (uint32_t)(t & 0x3F) << 8 | lo;
	if (!d->cache[b].stamp)
		return rd_fail(&d->rd, "hit on empty cache bucket %u", b);
	switch (t >> 6) {
	case BT_TAG_RUN0:
		run = 0;
		break;
	case BT_TAG_RUN1:
		run = 1;
		break;
	default:
		if (left < 3)
			return rd_fail(&d->rd, "prediction run past the backtrace end");
		rc = rd_varint_max(&d->rd, left - 3, &run, "prediction run");
		if (rc < 0)
			return rc;
		run += 2;
	}
	if (run + 1 > left)
		return rd_fail(&d->rd, "prediction run past the backtrace end");
	bt_follow(d->cache, &d->clock, *ctx, b);
	*ctx = b;
	f[0] = d->cache[b].addr;
	*used = (uint32_t)run + 1;
	return get_run(d, ctx, f + 1, run);
}

static int get_miss(struct tfs_btdec *d, uint32_t *ctx, uint64_t *f)
{
	uint64_t zz, a;
	uint32_t b;
	int rc;

	rc = rd_varint(&d->rd, &zz);
	if (rc < 0)
		return rc;
	a = d->last_miss + (uint64_t)zigzag_dec(zz);
	if (bt_lookup(d->cache, a) != BT_NO_CTX)
		return rd_fail(&d->rd, "miss on a cached address");
	d->last_miss = a;
	b = bt_insert(d->cache, &d->clock, a);
	if (*ctx != BT_NO_CTX)
		d->cache[*ctx].pred = (uint16_t)b;
	*ctx = b;
	*f = a;
	return 0;
}

static int get_long_run(struct tfs_btdec *d, uint32_t left, uint64_t *k)
{
	int rc;

	if (left <= BT_TOK_RUN_SHORT_MAX)
		return rd_fail(&d->rd, "prediction run past the backtrace end");
	rc = rd_varint_max(&d->rd, left - BT_TOK_RUN_SHORT_MAX - 1, k, "prediction run");
	*k += BT_TOK_RUN_SHORT_MAX + 1;
	return rc;
}

/* Decode the @n new frames into f[0..n). */
static int get_frames(struct tfs_btdec *d, uint64_t *f, uint32_t n, uint32_t ctx)
{
	uint32_t i = 0, used = 0;
	uint64_t k;
	uint8_t t;
	int rc;

	while (i < n) {
		rc = rd_u8(&d->rd, &t);
		if (rc < 0)
			return rc;
		if (t < BT_TOK_MISS) {
			rc = get_hit(d, t, &ctx, f + i, n - i, &used);
			i += used;
		} else if (t == BT_TOK_MISS) {
			rc = get_miss(d, &ctx, f + i);
			i++;
		} else {
			k = t - BT_TOK_MISS;
			rc = t == BT_TOK_RUN_LONG ? get_long_run(d, n - i, &k) : 0;
			if (rc == 0 && k > n - i)
				rc = rd_fail(&d->rd, "prediction run past the backtrace end");
			if (rc == 0)
				rc = get_run(d, &ctx, f + i, k);
			i += (uint32_t)k;
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int get_header(struct tfs_btdec *d, uint64_t *pop, uint64_t *n_new)
{
	uint8_t h;
	int rc;

	rc = rd_u8(&d->rd, &h);
	if (rc < 0)
		return rc;
	if (h < BT_HDR_ESC) {
		*pop = h >> 4;
		*n_new = h & 15;
	} else if (h != BT_HDR_LONG) {
		return rd_fail(&d->rd, "bad backtrace header byte 0x%02x", h);
	} else {
		rc = rd_varint_max(&d->rd, d->prev_n, pop, "popped frames");
		if (rc < 0)
			return rc;
		rc = rd_varint_max(&d->rd, BT_MAX_FRAMES, n_new, "new frames");
		if (rc < 0)
			return rc;
	}
	if (*pop > d->prev_n)
		return rd_fail(&d->rd, "pops %llu frames of %u", (unsigned long long)*pop,
			       d->prev_n);
	if (d->prev_n - *pop + *n_new > BT_MAX_FRAMES)
		return rd_fail(&d->rd, "backtrace longer than %u frames", BT_MAX_FRAMES);
	return 0;
}

int btdec_next(struct tfs_btdec *d, uint64_t *frames, uint32_t cap, uint32_t *n)
{
	uint64_t pop, n_new;
	uint32_t p;
	int rc;

	*n = 0;
	if (d->n_done == UINT64_MAX)
		return -TFS_ECORRUPT;
	if (d->n_done == d->n_backtraces) {
		if (rd_left(&d->rd))
			goto err_fail_trailing;
		return 0;
	}
	rc = get_header(d, &pop, &n_new);
	if (rc < 0)
		goto err_poison;
	p = d->prev_n - (uint32_t)pop;
	rc = get_frames(d, d->prev + p, (uint32_t)n_new, bt_prefix_ctx(d->cache, d->prev, p));
	if (rc < 0)
		goto err_poison;
	d->prev_n = p + (uint32_t)n_new;
	d->n_done++;
	*n = d->prev_n;
	if (cap)
		memcpy(frames, d->prev,
		       (size_t)(cap < d->prev_n ? cap : d->prev_n) * sizeof(*frames));
	return 1;

err_fail_trailing:
	rc = rd_fail(&d->rd, "%zu bytes after the last backtrace", rd_left(&d->rd));
err_poison:
	d->n_done = UINT64_MAX;
	return rc;
}
