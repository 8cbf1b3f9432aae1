/*
 * The cache of decoded value blocks (vcache_i.h). A timed block costs about 150 ns per event
 * to decode (the range coder is serial), and a copy of it a few ns, so a cursor that jumps
 * into a block another cursor of the same trace decoded copies it from here. Each entry is
 * one allocation holding the block's times (for timed sections), VAL fields, field offsets
 * and event terminals. A lookup scans the entries under one mutex: they are at most
 * VCACHE_MAX_ENTRIES, and a lookup comes once per block, not per event. Blocks are copied
 * in and out, never lent, so an entry can go at any time. It decides nothing of when to look
 * or keep (cursor.c does) and knows nothing of how blocks are coded (values_dec.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tfs/reader.h"
#include "vcache_i.h"

struct vcache_entry {
	uint32_t stream;
	uint32_t n;	     /* events */
	uint64_t block;
	uint64_t first_event;
	uint64_t used;	     /* the cache's clock at its last use */
	size_t n_vals;
	size_t bytes;	     /* of @data */
	bool timed;
	uint64_t *data;	     /* [ts n][dur n] when timed, [vals n_vals], then as uint32_t
			      * [val_off n + 1][terms n] */
};

int vcache_init(struct vcache *c, size_t budget)
{
	memset(c, 0, sizeof(*c));
	c->e = calloc(VCACHE_MAX_ENTRIES, sizeof(*c->e));
	if (!c->e)
		return -ENOMEM;
	if (pthread_mutex_init(&c->lock, NULL) != 0) {
		free(c->e);
		c->e = NULL;
		return -ENOMEM;
	}
	c->ready = true;
	c->budget = budget;
	return 0;
}

static void drop(struct vcache *c, uint32_t i)
{
	c->bytes -= c->e[i].bytes;
	free(c->e[i].data);
	c->e[i] = c->e[--c->n];
}

/* Drop the least recently used blocks until @need more bytes and one more entry fit. */
static void make_room(struct vcache *c, size_t need)
{
	while (c->n && (c->n >= VCACHE_MAX_ENTRIES || c->bytes + need > c->budget)) {
		uint32_t old = 0;

		for (uint32_t i = 1; i < c->n; i++)
			if (c->e[i].used < c->e[old].used)
				old = i;
		drop(c, old);
	}
}

void vcache_fini(struct vcache *c)
{
	if (!c->ready)
		return;
	while (c->n)
		drop(c, c->n - 1);
	free(c->e);
	pthread_mutex_destroy(&c->lock);
	memset(c, 0, sizeof(*c));
}

void vcache_set_budget(struct vcache *c, size_t budget)
{
	if (!c->ready)
		return;
	pthread_mutex_lock(&c->lock);
	c->budget = budget;
	make_room(c, 0);
	pthread_mutex_unlock(&c->lock);
}

void vcache_stats(struct vcache *c, struct tfs_cache_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!c->ready)
		return;
	pthread_mutex_lock(&c->lock);
	st->hits = c->hits;
	st->misses = c->misses;
	st->kept = c->puts;
	st->blocks = c->n;
	st->bytes = c->bytes;
	st->budget = c->budget;
	pthread_mutex_unlock(&c->lock);
}

static struct vcache_entry *find(struct vcache *c, uint32_t stream, uint64_t block)
{
	for (uint32_t i = 0; i < c->n; i++)
		if (c->e[i].block == block && c->e[i].stream == stream)
			return &c->e[i];
	return NULL;
}

/* Where an entry's VAL fields and its field offsets start in its data. */
static uint64_t *entry_vals(const struct vcache_entry *e)
{
	return e->data + (e->timed ? 2 * (size_t)e->n : 0);
}

static uint32_t *entry_val_off(const struct vcache_entry *e)
{
	return (uint32_t *)(entry_vals(e) + e->n_vals);
}

static size_t entry_bytes(uint32_t n, size_t n_vals, bool timed)
{
	return ((timed ? 2 * (size_t)n : 0) + n_vals) * sizeof(uint64_t) +
	       (2 * (size_t)n + 1) * sizeof(uint32_t);
}

bool vcache_get(struct vcache *c, uint32_t stream, uint64_t block, struct vblock *out,
		uint32_t *terms)
{
	struct vcache_entry *e;
	const uint32_t *val_off;
	bool hit = false;

	if (!c->ready)
		return false;
	pthread_mutex_lock(&c->lock);
	e = find(c, stream, block);
	if (!e || vblock_reserve(out, e->n, e->n_vals) < 0) {
		c->misses++;
		goto out;
	}
	val_off = entry_val_off(e);
	if (e->timed) {
		memcpy(out->ts_ns, e->data, e->n * sizeof(*out->ts_ns));
		memcpy(out->dur_ns, e->data + e->n, e->n * sizeof(*out->dur_ns));
		out->n_zero_times = 0;
	} else {
		vblock_zero_times(out, e->n);
	}
	if (e->n_vals)
		memcpy(out->vals, entry_vals(e), e->n_vals * sizeof(*out->vals));
	memcpy(out->val_off, val_off, ((size_t)e->n + 1) * sizeof(*val_off));
	memcpy(terms, val_off + e->n + 1, e->n * sizeof(*terms));
	out->first_event = e->first_event;
	out->n_events = e->n;
	e->used = ++c->clock;
	c->hits++;
	hit = true;
out:
	pthread_mutex_unlock(&c->lock);
	return hit;
}

void vcache_put(struct vcache *c, uint32_t stream, uint64_t block, const struct vblock *b,
		const uint32_t *terms, bool timed)
{
	struct vcache_entry e = {
		.stream = stream, .n = b->n_events, .block = block, .first_event = b->first_event,
		.n_vals = b->val_off[b->n_events], .timed = timed,
	};
	uint32_t *val_off;

	if (!c->ready)
		return;
	e.bytes = entry_bytes(e.n, e.n_vals, timed);
	pthread_mutex_lock(&c->lock);
	/* another cursor may have kept it since this one looked */
	if (e.bytes > c->budget || find(c, stream, block))
		goto out;
	e.data = malloc(e.bytes);
	if (!e.data)
		goto out;
	if (timed) {
		memcpy(e.data, b->ts_ns, e.n * sizeof(*e.data));
		memcpy(e.data + e.n, b->dur_ns, e.n * sizeof(*e.data));
	}
	if (e.n_vals)
		memcpy(entry_vals(&e), b->vals, e.n_vals * sizeof(*e.data));
	val_off = entry_val_off(&e);
	memcpy(val_off, b->val_off, ((size_t)e.n + 1) * sizeof(*val_off));
	memcpy(val_off + e.n + 1, terms, e.n * sizeof(*terms));
	make_room(c, e.bytes);
	e.used = ++c->clock;
	c->e[c->n++] = e;
	c->bytes += e.bytes;
	c->puts++;
out:
	pthread_mutex_unlock(&c->lock);
}
