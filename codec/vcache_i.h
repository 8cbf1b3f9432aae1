/*
 * A trace's cache of decoded value blocks (vcache.c), shared by all its cursors: a reader
 * that jumps (a random read, a new handle, a merged view placing each thread's cursor) finds
 * a block another cursor decoded already and copies it instead of decoding it again. Bounded
 * in bytes; the least recently used blocks go first.
 */
#ifndef TFS_VCACHE_I_H
#define TFS_VCACHE_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "values_i.h"

/* What a trace keeps at most, unless tfs_trace_set_block_cache() says otherwise. */
#define VCACHE_DEFAULT_BYTES ((size_t)32 << 20)
/* Blocks kept at most, whatever their size (a lookup scans them). */
#define VCACHE_MAX_ENTRIES 1024

struct vcache_entry;

struct vcache {
	pthread_mutex_t lock;
	bool ready;		   /* @lock initialised */
	size_t budget, bytes;	   /* bytes allowed, bytes held */
	struct vcache_entry *e;	   /* [n] */
	uint32_t n;
	uint64_t clock;		   /* stamps the entries' last use */
	uint64_t hits, misses, puts; /* lookups that copied, lookups that did not, blocks kept */
};

/* @return 0 or -ENOMEM */
int vcache_init(struct vcache *c, size_t budget);
void vcache_fini(struct vcache *c);
/* Keep at most @budget bytes from now on (0: nothing), dropping blocks to fit. */
void vcache_set_budget(struct vcache *c, size_t budget);
struct tfs_cache_stats;
/* What it did and holds (tfs/reader.h tfs_trace_block_cache_stats()). */
void vcache_stats(struct vcache *c, struct tfs_cache_stats *st);
/*
 * Copy block @block of stream @stream into @out (its times, VAL fields and field offsets)
 * and its events' terminals into @terms, if the cache holds it.
 * @return true when copied; false when not held or when @out cannot grow
 */
bool vcache_get(struct vcache *c, uint32_t stream, uint64_t block, struct vblock *out,
		uint32_t *terms);
/*
 * Keep a copy of @b, block @block of stream @stream, and of its events' terminals @terms;
 * @timed: whether its times are worth keeping (untimed blocks' are all 0). Nothing is kept
 * when it does not fit the budget or memory is short.
 */
void vcache_put(struct vcache *c, uint32_t stream, uint64_t block, const struct vblock *b,
		const uint32_t *terms, bool timed);

#endif
