/*
 * Range-coded timing columns (FORMAT.md §7.4.2): a column's words (the varints it would
 * otherwise hold) coded bit by bit with adaptive probabilities, in one context set per
 * terminal of the block (by order of first occurrence, the 256th and later terminals
 * sharing the last set), a word's length in the context of its set's previous one. Zstd
 * finds repeated strings; timing words of a noisy program rarely repeat exactly, but each
 * call site's durations and gaps keep a distribution of their own, which this learns.
 * Two word models: TFV3 and TFV4 code every bit through the coder (§7.4.2), TFV5 first
 * asks whether a word has its set's previous length and keeps the bits below the modelled
 * head out of the coder, as plain bits (§7.4.3): fewer decisions, the reader's bottleneck.
 * Used by values_enc.c and values_dec.c only.
 */
#ifndef TFS_VRANGE_I_H
#define TFS_VRANGE_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bytes_i.h"

#define VRC_SLOTS 256u	    /* context sets per column */
#define VRC_MAN_PROBS 1454u /* mantissa contexts of one set */
#define VRC_LEN_PROBS 128u  /* contexts of one length tree */
#define VRC_LEN_GROUPS 66u  /* length trees of one set: first word, then 1 + previous length */
#define VRC_MIN_LEN 5u	    /* bytes of a column coding nothing: the coder's flush */
#define VRC_LEN_VARINT 10u  /* word model 2: bytes of the coded part's length at most */

/* The word models (FORMAT.md §7.4.2, §7.4.3). */
enum { VRC_WORDS_1 = 1, VRC_WORDS_2 = 2 };

/* The context sets of one column, reused across blocks and columns. */
struct vrc_model {
	uint16_t *man;	   /* [VRC_SLOTS][VRC_MAN_PROBS], each tree once used */
	uint64_t *man_init; /* [VRC_SLOTS]: bit n - 1: the set's tree of length n is initialised */
	uint16_t *len;	   /* [VRC_SLOTS][VRC_LEN_GROUPS][VRC_LEN_PROBS], each tree once used */
	uint64_t *len_init; /* [VRC_SLOTS][2]: which length trees are initialised */
	uint8_t *group;	   /* [VRC_SLOTS]: the length tree of the set's next word */
	uint16_t *same;	   /* word model 2: [VRC_SLOTS][VRC_LEN_GROUPS], "same length" */
	uint32_t n_init;   /* sets initialised since the last vrc_model_reset() */
	unsigned int words; /* VRC_WORDS_1 or VRC_WORDS_2 */
	bool noisy;	   /* reading lossless times: mantissa bits decided without a branch */
	struct tfs_buf raw; /* word model 2, writing: the column's plain bits */
};

/* A model coding words as @words says (VRC_WORDS_*). @return 0 or -ENOMEM */
int vrc_model_init(struct vrc_model *m, unsigned int words);
void vrc_model_fini(struct vrc_model *m);
/* Every set back to its initial state, lazily: call before each column. */
static inline void vrc_model_reset(struct vrc_model *m)
{
	m->n_init = 0;
}

/* The slot of a block's terminal that occurs @k-th (from 0) for the first time. */
static inline uint8_t vrc_slot_of(uint32_t k)
{
	return k < VRC_SLOTS - 1 ? (uint8_t)k : (uint8_t)(VRC_SLOTS - 1);
}

/*
 * Code the @n varints at @col (well formed: the encoder's own) of events whose slots are
 * @slot[0..n), appending the coded column to @out. Slots must appear in the order
 * vrc_slot_of() gives them. @return 0 or -ENOMEM (@out may have grown)
 */
int vrc_encode(struct vrc_model *m, const uint8_t *slot, uint32_t n, const uint8_t *col,
	       struct tfs_buf *out);
/*
 * vrc_encode() giving up as soon as the coded column would take more than @max_len bytes
 * (an encoder choosing the smallest column needs no more of one that lost): @out is then
 * unchanged. @return 1 (coded), 0 (longer than @max_len) or -ENOMEM
 */
int vrc_encode_max(struct vrc_model *m, const uint8_t *slot, uint32_t n, const uint8_t *col,
		   size_t max_len, struct tfs_buf *out);

#define VRC_MARK_WORDS 256u /* words between two marks of vrc_encode_marked() */
#define VRC_MARKS 64u	    /* marks of a column at most (the first 16384 words) */

/*
 * vrc_encode_max() racing another column of the same events: with @mark_out, the bytes
 * written after each VRC_MARK_WORDS words are kept there (UINT32_MAX past the column's
 * end, past where it stopped for @max_len, or past VRC_MARKS marks); with @mark_in, another
 * column's marks, it gives up as soon as it is more than 1/16 and 8 bytes behind them (a
 * column that far behind seldom catches up: the cheaper way to find the smaller of two, or
 * that both are longer than @max_len). @return 1 (coded), 0 (too long, or behind) or
 * -ENOMEM
 */
int vrc_encode_marked(struct vrc_model *m, const uint8_t *slot, uint32_t n, const uint8_t *col,
		      size_t max_len, uint32_t *mark_out, const uint32_t *mark_in,
		      struct tfs_buf *out);

/*
 * Decode a coded column @in[0..@len) of @n events with slots @slot into its @n words at
 * @out.
 * @return NULL, or what is wrong with the column (too short, bad first byte, a length
 * over 64, running past its end, bytes left over)
 */
const char *vrc_decode(struct vrc_model *m, const uint8_t *slot, uint32_t n, const uint8_t *in,
		       size_t len, uint64_t *out);

#endif
