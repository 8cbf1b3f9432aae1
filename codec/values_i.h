/*
 * Value and timing streams of one event stream (FORMAT.md §7): per-occurrence numbers
 * (start time, duration, the VAL-encoded arguments) that do not belong in the CST.
 * Start times are coded as gaps from the previous event's reconstructed end or start (TFV2
 * and TFV3 lossless: whichever is smaller per block; lossy: the start; TFV1, which readers
 * still decode: the start), in TFV3 lossless blocks counted in ticks of the clock where its
 * readings lie on a lattice (vlattice_i.h), each timing column of a block
 * either predicted by the same terminal's previous gap or duration or stored as is,
 * whichever compresses smaller for that block; VAL arguments are predicted by stride
 * against the previous two occurrences of the same terminal and, in TFV4, those of a value
 * class also by the class's recent values and its largest (FORMAT.md §7.3.1: a tag per
 * field says which, its residual has a column of its own). Residuals are zigzag varint
 * coded column by column (a TFV3 timing column range-coded instead where that is smaller,
 * vrange_i.h), in blocks of block_events events that restart prediction (absolute
 * anchors), each block one zstd frame. This module does not know event kinds: a
 * terminal is a number with a VAL-field count.
 */
#ifndef TFS_VALUES_I_H
#define TFS_VALUES_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bytes_i.h"

enum {
	VAL_TIMING_NONE = 0,	 /* no ts/dur stored; decoders return zeros */
	VAL_TIMING_LOSSLESS = 1, /* exact nanoseconds */
	VAL_TIMING_LOSSY = 2,	 /* gap and duration binned with relative error <= rel_err */
};

#define VAL_VERSION 5		 /* the section version writers write ("TFV5") */
#define VAL_MAX_CLASSES 255	 /* VAL classes (FORMAT.md §7.3.1), numbered 1 to this */
#define VAL_MAX_FIELDS 64		 /* VAL fields of one terminal */
#define VAL_DEFAULT_BLOCK_EVENTS 4096
/*
 * The encoder's choice of a timing column's candidate (predicted or not, from the end or the
 * start, range-coded or not): once it came out the same VAL_STICKY blocks in a row, the
 * next blocks are coded with that candidate alone, every candidate tried again only at each
 * VAL_STICKY_RECHECK-th block, or as soon as the one kept no longer fits its bound. On gcc,
 * python, sqlite and malloc/free the choice stays put for hundreds of blocks, and trying
 * every candidate was the recorder's largest cost. An encoder's policy: readers never see it.
 */
#define VAL_STICKY 3
#define VAL_STICKY_RECHECK 16
#define VAL_MAX_BLOCK_EVENTS (1u << 20)
/* Finest LOSSY rel_err: keeps the bin table (FORMAT.md §7.5) near 20000 entries. */
#define VAL_MIN_REL_ERR (1.0 / 1024)

/* TFV2 raw block predictor byte (FORMAT.md §7.2): the timing columns predicted per terminal. */
#define VAL_PRED_TS 1u
#define VAL_PRED_DUR 2u
#define VAL_PRED_ALL (VAL_PRED_TS | VAL_PRED_DUR)
#define VAL_GAP_START 4u  /* gaps from the previous start, not its end */
#define VAL_TICKS 8u	  /* TFV3 lossless: times counted in clock ticks (§7.4.1) */
#define VAL_CODED_TS 16u  /* TFV3 timed: the ts column is range-coded (§7.4.2) */
#define VAL_CODED_DUR 32u /* TFV3 timed: the dur column is range-coded (§7.4.2) */
#define VAL_PRED_BITS (VAL_PRED_ALL | VAL_GAP_START) /* every bit TFV2 defines */
#define VAL_PRED_FIXED 16u /* venc_opts.pred: every block uses the VAL_PRED_* bits given */

enum { VAL_BASE_DEFAULT = 0, VAL_BASE_END = 1, VAL_BASE_START = 2 };

struct venc_opts {
	uint32_t block_events; /* 0: VAL_DEFAULT_BLOCK_EVENTS */
	int timing;	       /* VAL_TIMING_* */
	double rel_err;	       /* LOSSY only: VAL_MIN_REL_ERR <= rel_err < 1 */
	int zstd_level;	       /* 0: a sensible default */
	int final_level;       /* > zstd_level: venc_finish recompresses every block at this
				  level, keeping the smaller frame (slow: for small streams) */
	int version;	       /* 0: VAL_VERSION; 1: TFV1 (compatibility tests, benchmarks) */
	unsigned int pred;     /* TFV2, timed: 0 chooses per block and column (the writer's
				  way); VAL_PRED_FIXED | VAL_PRED_* forces them (tests) */
	int gap_base;	       /* TFV2, timed: 0 the writer's default for the timing mode,
				  VAL_BASE_END or VAL_BASE_START (tests, benchmarks) */
	int ticks;	       /* TFV3, lossless: 0 counts clock ticks in every block where a
				  lattice fits (FORMAT.md §7.4.1), VAL_TICKS_NEVER never */
	int coded;	       /* TFV3, timed: 0 range-codes a timing column (FORMAT.md
				  §7.4.2) where that is smaller, VAL_CODED_NEVER never,
				  VAL_CODED_ALWAYS wherever it may (tests) */
};

#define VAL_TICKS_NEVER (-1)
#define VAL_CODED_NEVER (-1)
#define VAL_CODED_ALWAYS 1

struct tfs_venc;

/* @return 0, -EINVAL (bad options) or -ENOMEM */
int venc_new(const struct venc_opts *opts, struct tfs_venc **out);
void venc_free(struct tfs_venc *e);
/*
 * Add one event: its terminal, times and @n_vals VAL fields (n_vals <= VAL_MAX_FIELDS; a
 * terminal always comes with the same n_vals). Full blocks are compressed at once, so
 * memory is the compressed output plus one raw block.
 * @return 0 or -ENOMEM (the event was not added) / -EINVAL
 */
int venc_add(struct tfs_venc *e, uint32_t terminal, uint64_t ts_ns, uint64_t dur_ns,
	     const uint64_t *vals, uint32_t n_vals);
/*
 * venc_add() with the VAL class of each field (FORMAT.md §7.3.1): @cls[j] 0 for none or 1
 * to VAL_MAX_CLASSES; @cls NULL: none. A terminal always comes with the same classes.
 * Versions before 4 ignore the classes.
 */
int venc_add_cls(struct tfs_venc *e, uint32_t terminal, uint64_t ts_ns, uint64_t dur_ns,
		 const uint64_t *vals, uint32_t n_vals, const uint8_t *cls);
uint64_t venc_n_events(const struct tfs_venc *e);
/*
 * Append the whole FORMAT.md §7 section payload to @out (unchanged on failure), after
 * recompressing the blocks at venc_opts.final_level if that is set. Afterwards venc_add
 * fails with -EINVAL; after -ENOMEM venc_finish may be called again.
 * @return 0 or -ENOMEM
 */
/* venc_finish() without the recompression at venc_opts.final_level. */
void venc_no_recompress(struct tfs_venc *e);
/* venc_finish() recompresses at @level at most (not at all unless above the block level). */
void venc_cap_recompress(struct tfs_venc *e, int level);
int venc_finish(struct tfs_venc *e, struct tfs_buf *out);

/* A parsed values section: header and block index, borrowed from the caller's bytes. */
struct tfs_vsec {
	const uint8_t *data;
	size_t len;
	uint64_t base_off; /* file offset of data[0] */
	int version;	   /* 1 to 4 ("TFV1" to "TFV4") */
	int timing;
	double rel_err;
	uint32_t block_events;
	uint64_t n_events;
	uint64_t n_blocks;
	/*
	 * TFV4: the VAL class of field j of terminal t is cls[cls_off[t] + j] (0: none), set
	 * by the caller after vsec_open() for all terminals it decodes; NULL: no classes
	 */
	const uint8_t *cls;
	const uint32_t *cls_off;
	/* internal: */
	const uint8_t *index;
	uint64_t data_start;
};

/*
 * Parse the header and index of a section payload (validates every index entry against
 * the bytes present; block contents are checked when decoded).
 * @return 0 or -TFS_ECORRUPT / -TFS_EFORMAT (diag filled)
 */
int vsec_open(struct tfs_vsec *s, const uint8_t *data, size_t len, uint64_t base_off,
	      struct tfs_diag *diag);

/* Decoded contents of one block. Arrays owned by the struct, reused across decodes. */
struct vblock {
	uint64_t first_event; /* stream index of the block's first event */
	uint32_t n_events;
	uint64_t *ts_ns;      /* [n_events] */
	uint64_t *dur_ns;     /* [n_events] */
	uint64_t *vals;	      /* VAL fields of all events, in event order */
	uint32_t *val_off;    /* [n_events + 1]: event i's fields are vals[val_off[i]..] */
	size_t cap_events, cap_vals; /* internal */
	uint8_t *raw;
	size_t raw_cap;
	void *pred; /* internal prediction state */
	size_t pred_cap;
	uint8_t *slot;	 /* [cap_events] internal: each event's context set (§7.4.2) */
	void *coder;	 /* internal: struct vrc_model, once a coded column was met */
	uint64_t *uncoded; /* internal: [2 cap_events] coded columns' words */
	size_t uncoded_cap;
	size_t n_zero_times; /* internal: leading ts_ns and dur_ns entries known to be 0 */
};

void vblock_init(struct vblock *b);
void vblock_fini(struct vblock *b);
/*
 * Room in @b for @n events and @n_vals VAL fields, for a block filled otherwise than by
 * decoding (vcache.c copies one in). @return 0 or -ENOMEM
 */
int vblock_reserve(struct vblock *b, uint32_t n, size_t n_vals);
/* The first @n times of @b (reserved) set to 0, as an untimed block's are. */
void vblock_zero_times(struct vblock *b, uint32_t n);
/* Events in block @idx (block_events, or fewer for the last block). */
uint32_t vsec_block_len(const struct tfs_vsec *s, uint64_t idx);
/*
 * Decode block @idx. @terms[i] is the terminal of the block's i-th event (the caller walks
 * the grammar for them), @n_vals_of[t] the VAL-field count of terminal t < @n_terminals.
 * Verifies the zstd checksum, every varint and that the block's bytes are fully consumed.
 * @return 0, -TFS_ECORRUPT (diag filled) or -ENOMEM
 */
int vsec_decode_block(const struct tfs_vsec *s, uint64_t idx, const uint32_t *terms,
		      const uint8_t *n_vals_of, uint32_t n_terminals, struct vblock *out,
		      struct tfs_diag *diag);

/*
 * One residual word of a shared values section replaced for one stream (FORMAT.md §8.1):
 * streams that differ from another stream of the same grammar only in a few residuals (the
 * first addresses of each thread of a loop) store those instead of a section of their own.
 */
struct vpatch {
	uint64_t block; /* block index */
	uint32_t col;	/* 0 ts, 1 dur, 2 vals, 3 tags, 4 class (TFV4) */
	uint64_t index; /* word index in the column */
	uint64_t word;	/* the stored varint value (a zigzagged residual) */
};

/* The residual words of one raw block, column after column. Owned arrays, reusable. */
struct vwords {
	uint64_t *w;		/* n[0] + ... + n[4] words */
	size_t n[5];		/* words per column: ts, dur, vals, tags and class (TFV4) */
	uint8_t pred;		/* TFV2: the block's predictor byte (VAL_PRED_*); TFV1: 0 */
	uint8_t *ticks;		/* TFV3 with VAL_TICKS: the block's ticks header, as stored */
	size_t ticks_len, ticks_cap;
	size_t w_cap;
	uint8_t *raw;
	size_t raw_cap;
};

void vwords_fini(struct vwords *v);
/*
 * Decompress block @idx and split it into its varint words (no prediction: the words are
 * as stored). @return 0, -TFS_ECORRUPT (diag filled) or -ENOMEM
 */
int vsec_block_words(const struct tfs_vsec *s, uint64_t idx, struct vwords *out,
		     struct tfs_diag *diag);
/*
 * vsec_decode_block() with @n_patch words of the block replaced first (@patch sorted by
 * column then index, every entry of block @idx). @return as vsec_decode_block(), and
 * -TFS_ECORRUPT when an entry's index is outside its column
 */
int vsec_decode_block_patched(const struct tfs_vsec *s, uint64_t idx, const struct vpatch *patch,
			      uint32_t n_patch, const uint32_t *terms, const uint8_t *n_vals_of,
			      uint32_t n_terminals, struct vblock *out, struct tfs_diag *diag);

#endif
