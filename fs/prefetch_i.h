/*
 * Decoding ahead of sequential readers on the other cores (prefetch.c). A pool of worker
 * threads renders the parts of a file that a reader streaming through it will ask for next;
 * the reader's requests are answered from those buffers without a copy, in file order. Used
 * by the FUSE daemon (per open file) and by `tracefs cat`. It renders nothing itself (the
 * workers read through fs_vfile like any reader) and it never decides what a file holds.
 *
 * Memory is bounded twice: one file's window holds at most FS_AHEAD_DEPTH chunks of about
 * FS_AHEAD_CHUNK bytes (8 MiB, plus one tree handle per worker), and the buffers of all
 * chunks of a pool, in use or kept for reuse, at most its budget (FS_AHEAD_BUDGET, 64 MiB,
 * for the daemon and cat); a reader that finds the budget spent reads for itself, as
 * without a pool.
 */
#ifndef TFS_FS_PREFETCH_I_H
#define TFS_FS_PREFETCH_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "tfs/reader.h"
#include "vtree_i.h"

/* Bytes a chunk aims at; cut where a value block starts, at least half of this. */
#define FS_AHEAD_CHUNK ((size_t)1 << 20)
/* Chunks one file may have rendered or queued ahead of its reader. */
#define FS_AHEAD_DEPTH 8
/* Default budget of all chunks' buffers in a pool. */
#define FS_AHEAD_BUDGET ((size_t)64 << 20)
/* Most workers a pool starts by default (one per online CPU up to this). */
#define FS_AHEAD_MAX_WORKERS 8
/* The most chunks one request is served from (more: the reader reads it itself). */
#define FS_SPAN_MAX 4

struct fs_ahead_pool;
struct fs_ahead;

/** A request's bytes, pinned in the chunks that hold them until fs_ahead_put(). */
struct fs_span {
	struct iovec iov[FS_SPAN_MAX];
	int n;			    /**< iovecs in use */
	void *pin[FS_SPAN_MAX];	    /**< internal: the chunks */
};

/**
 * Workers a pool starts by default: the environment's TRACEFS_DECODE_THREADS when set
 * (0 turns decoding ahead off), else one per online CPU, at most FS_AHEAD_MAX_WORKERS.
 */
unsigned int fs_ahead_default_workers(void);

/**
 * Start @n_workers threads (none: *@out is NULL and nothing is decoded ahead) rendering
 * chunks of about @chunk bytes (FS_AHEAD_CHUNK; tests use small ones) that hold at most
 * @budget bytes in all. Start it after any fork (the daemon's): threads do not survive one.
 * @return 0, -ENOMEM or -EAGAIN (threads)
 */
int fs_ahead_pool_new(unsigned int n_workers, size_t budget, size_t chunk,
		      struct fs_ahead_pool **out);
/** Stop the workers. Accepts NULL. Every fs_ahead of the pool must be freed first. */
void fs_ahead_pool_free(struct fs_ahead_pool *p);

/**
 * Decoding ahead of one reader of file @ino of @vt, a tree of @t (both borrowed; they must
 * outlive it). Thread-safe: any number of threads may call fs_ahead_get() on it at once.
 * @return 0, -ENOMEM or an error of fs_vtree_stat()
 */
int fs_ahead_new(struct fs_ahead_pool *p, struct tfs_trace *t, struct fs_vtree *vt,
		 uint64_t ino, struct fs_ahead **out);
/**
 * Drop its chunks, wait for the workers rendering them and for every span served to be put
 * back (the daemon puts one after its reply, when the file may be released). Accepts NULL.
 */
void fs_ahead_free(struct fs_ahead *a);

/** The reader will read sequentially from @off (cat): decode ahead from there at once. */
void fs_ahead_start(struct fs_ahead *a, uint64_t off);

/**
 * Answer a read of @len bytes at @off from the chunks decoded ahead, waiting for those
 * being rendered. Every read must be told, served or not: that is how a sequential reader
 * is recognised (a few reads in a row) and how a seek drops the window.
 * @return true: served, @sp holds the bytes (fewer than @len only at the end of the file)
 *         until fs_ahead_put(); false: not served, read them yourself (@sp is empty)
 */
bool fs_ahead_get(struct fs_ahead *a, uint64_t off, size_t len, struct fs_span *sp);
/** Unpin what fs_ahead_get() served. Accepts an empty span. */
void fs_ahead_put(struct fs_ahead *a, struct fs_span *sp);

#endif
