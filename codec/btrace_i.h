/*
 * Allocation backtrace stream (FORMAT.md §10): a sequence of
 * backtraces, each coded against the previous one (common prefix) and against a fixed-size
 * two-way skewed-associative cache of return addresses with next-frame prediction, after
 * memtrace's scheme. Frames are given outermost first (main or the thread entry at index 0,
 * the allocating frame last), so the shared driver prefix is the common prefix.
 * This module does not symbolize, compress with zstd or know about events: a backtrace is an
 * array of opaque 64-bit frames.
 */
#ifndef TFS_BTRACE_I_H
#define TFS_BTRACE_I_H

#include <stddef.h>
#include <stdint.h>

#include "bytes_i.h"

#define BT_CACHE_BITS 14
#define BT_CACHE_SIZE (1u << BT_CACHE_BITS) /* buckets */
#define BT_MAX_FRAMES 1024u		    /* frames of one backtrace */

struct tfs_btenc;

/* @return 0 or -ENOMEM */
int btenc_new(struct tfs_btenc **out);
/* Accepts NULL. */
void btenc_free(struct tfs_btenc *e);
/*
 * Append one backtrace of @n_frames frames, outermost first (n_frames <= BT_MAX_FRAMES;
 * 0 is allowed). @return 0, -EINVAL (too many frames, or after btenc_finish) or -ENOMEM
 * (nothing was added and the encoder state is unchanged)
 */
int btenc_add(struct tfs_btenc *e, const uint64_t *frames, uint32_t n_frames);
uint64_t btenc_n_backtraces(const struct tfs_btenc *e);
/*
 * Append the section payload to @out (unchanged on failure). Afterwards btenc_add fails
 * with -EINVAL; after -ENOMEM btenc_finish may be called again.
 * @return 0 or -ENOMEM
 */
int btenc_finish(struct tfs_btenc *e, struct tfs_buf *out);

/* Cache bucket, identical in encoder and decoder. stamp 0: empty. */
struct bt_bucket {
	uint64_t addr;
	uint64_t stamp; /* value of the touch clock when last inserted or hit */
	uint16_t pred;	/* bucket of the frame that followed this one last time, or BT_NO_PRED */
};

/* Decoder over a payload borrowed from the caller. */
struct tfs_btdec {
	struct tfs_rd rd;
	uint64_t n_backtraces; /* announced by the payload */
	uint64_t n_done;
	uint64_t clock;
	uint64_t last_miss;
	uint32_t prev_n;
	uint64_t *prev;		 /* [BT_MAX_FRAMES]: the last decoded backtrace */
	struct bt_bucket *cache; /* [BT_CACHE_SIZE] */
};

/*
 * Start decoding @len bytes at @data (borrowed, must outlive @d); @base_off is the file offset
 * of data[0] for diagnostics. Allocates a fixed ~400 KiB, whatever the input says.
 * @return 0, -ENOMEM or -TFS_ECORRUPT (diag filled, section "backtraces"); on error nothing
 * needs finishing
 */
int btdec_init(struct tfs_btdec *d, const uint8_t *data, size_t len, uint64_t base_off,
	       struct tfs_diag *diag);
void btdec_fini(struct tfs_btdec *d);
/*
 * Decode the next backtrace: its first min(n, @cap) frames go to @frames, its frame count n
 * to *@n (so *n > cap means frames were cut; the decoder state stays exact).
 * @return 1 (a backtrace), 0 (end of stream, trailing bytes checked) or -TFS_ECORRUPT. After
 * an error every later call fails again.
 */
int btdec_next(struct tfs_btdec *d, uint64_t *frames, uint32_t cap, uint32_t *n);

#endif
