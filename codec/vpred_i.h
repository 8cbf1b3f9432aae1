/*
 * Internals shared by the values encoder (values_enc.c), decoder (values_dec.c) and their
 * prediction and binning helpers (vpred.c): section constants, per-terminal prediction
 * state, value class histories (TFV4), lossy bins. Nothing outside those files includes it.
 */
#ifndef TFS_VPRED_I_H
#define TFS_VPRED_I_H

#include <stdbool.h>
#include <stdint.h>

#include "values_i.h"
#include "vrange_i.h"

#define VAL_MAGIC_V1 0x31564654u     /* "TFV1" little-endian */
#define VAL_MAGIC_V2 0x32564654u     /* "TFV2" */
#define VAL_MAGIC_V3 0x33564654u     /* "TFV3" */
#define VAL_MAGIC_V4 0x34564654u     /* "TFV4" */
#define VAL_MAGIC_V5 0x35564654u     /* "TFV5" */
#define VAL_MAGIC_FAMILY 0x00564654u /* "TFV" followed by any version byte */
#define VAL_HDR_LEN 36u
#define VAL_IDX_ENTRY_LEN 16u
#define VAL_RAW_HDR_MAX 61u /* six varints, and the predictor byte (not the ticks header) */
#define VAL_VARINT_MAX 10u
#define VAL_ZSTD_MAX_EXPANSION 32768u /* 4 bytes of zstd block become at most 128 KiB */
#define VAL_DEFAULT_LEVEL 3
#define VAL_TRIAL_LEVEL 1 /* the writer's trial compressions choosing predictors */
/*
 * Whether TFV2 lossy sections measure gaps from the previous start: a reconstructed end
 * carries its duration's rounding error into the next gap (FORMAT.md §7.4).
 */
#define VAL_LOSSY_FROM_START 1
/*
 * zstd ignores bit 4 of a frame's header descriptor (RFC 8878 §3.1.1.1.1, "unused bit"), the
 * only bit of a frame neither its parser nor its checksum looks at: refused here so that
 * every bit of a values section is checked. It belongs in zs_decompress.
 */
#define ZSTD_FHD_OFF 4
#define ZSTD_FHD_UNUSED_BIT 0x10
#define VAL_MAX_TERMINAL (UINT32_C(1) << 30)
#define NVALS_UNKNOWN 0xff
#define VAL_HIST_RING 256u /* a power of two above VAL_HIST_MAX */

__extension__ typedef unsigned __int128 u128;


/*
 * Prediction state of one terminal. Valid only while @gen equals the owner's current
 * generation; a stale entry reads as "not seen in this block".
 */
struct tstate {
	uint32_t gen;
	uint32_t val_slot; /* its VAL fields' first fstate in the block arena */
	uint64_t gap;	   /* decoder: last start-time gap (in ticks in a TFV3 ticks block),
			      or signed gap bin index (LOSSY), from the block's base */
	uint64_t dur;	   /* decoder: last duration (ticks), or duration bin index (LOSSY) */
	uint8_t seen;	   /* occurred before in this block (VAL stride needs two) */
	uint8_t n_vals;	   /* encoder only: VAL-field count, NVALS_UNKNOWN until first use */
	uint8_t cslot;	   /* context set of coded timing columns (FORMAT.md §7.4.2) */
};

/* Stride predictor of one VAL field: prediction = last + delta (wrapping). */
struct fstate {
	uint64_t last;
	uint64_t delta;
};

/*
 * Value history of one VAL class in the current block (FORMAT.md §7.3.1, TFV4): the class's
 * last VAL_HIST_RING values in coding order, and the largest of all its values so far.
 */
struct vclass {
	uint32_t gen;	/* valid while equal to struct vpred's gen */
	uint32_t count; /* values coded in the class in this block */
	uint64_t max;
	uint64_t ring[VAL_HIST_RING]; /* value number i at ring[i % VAL_HIST_RING] */
};

/*
 * Exponential bins of LOSSY timing (FORMAT.md §7.5). Bin k >= 1 holds [lo[k], lo[k+1]),
 * the last bin reaches UINT64_MAX; bin 0 is {0}.
 */
struct bins {
	uint64_t *lo;
	uint32_t n;
	uint32_t e_fix;	  /* rel_err as a 0.32 fixed-point fraction; 0: not built */
	uint32_t oct[65]; /* oct[p]: the bin holding 2^p; oct[64] = n - 1 */
};

/* Everything prediction needs, shared by the encoder and struct vblock's decoder. */
struct vpred {
	struct tstate *t; /* indexed by terminal */
	size_t t_cap;
	uint32_t gen;	  /* current block's generation, never 0 */
	struct fstate *f; /* arena of the current block's VAL predictors */
	size_t f_len, f_cap;
	uint32_t n_terms; /* distinct terminals of the current block so far */
	struct bins bins;
	struct vclass *cls; /* TFV4: [cls_cap] indexed by class, 0 unused */
	size_t cls_cap;
};

struct vidx {
	uint32_t stored_len;
	uint32_t raw_len;
};

/* The raw block's columns (FORMAT.md §7.2); TFV1 to TFV3 have no tags and class columns. */
enum { COL_TS, COL_DUR, COL_VALS, COL_TAGS, COL_CLASS, N_COLS };

/* Tags of class values (FORMAT.md §7.3.1): a tag at or above VAL_TAG_HIST is a history hit. */
enum { VAL_TAG_STRIDE, VAL_TAG_MISS, VAL_TAG_MAX, VAL_TAG_HIST };
#define VAL_HIST_MAX (256u - VAL_TAG_HIST) /* history hits reach this many values back */

/* ---- small helpers ---- */

static inline uint64_t zz(uint64_t diff)
{
	return zigzag_enc((int64_t)diff);
}

static inline uint64_t unzz(uint64_t v)
{
	return (uint64_t)zigzag_dec(v);
}

/* Store a varint into space the caller reserved. */
static inline void put_varint(struct tfs_buf *b, uint64_t v)
{
	uint8_t *p = b->data + b->len;

	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	b->len = (size_t)(p - b->data);
}


int vp_grow(void *pp, size_t *cap, size_t need, size_t elem);
uint32_t vp_rel_err_fix(double rel_err);
bool vp_rel_err_ok(double rel_err);
int vp_bins_build(struct bins *b, uint32_t e_fix);
uint32_t vp_bin_of(const struct bins *b, uint64_t x);
uint64_t vp_bin_rep(const struct bins *b, uint32_t k);
int64_t vp_sbin_of(const struct bins *b, uint64_t gap);
uint64_t vp_sbin_rep(const struct bins *b, int64_t sb);
void vp_pred_fini(struct vpred *p);
int vp_pred_grow_terms(struct vpred *p, size_t n);
int vp_class_grow(struct vpred *p, uint8_t top);

/* Room for the states of terminals below @n. @return 0 or -ENOMEM (inline: per event) */
static inline int vp_pred_reserve_terms(struct vpred *p, size_t n)
{
	return n <= p->t_cap ? 0 : vp_pred_grow_terms(p, n);
}

void vp_pred_next_block(struct vpred *p);

/* Room for the states of classes 1 to @top. @return 0 or -ENOMEM (inline: per event) */
static inline int vp_class_reserve(struct vpred *p, uint8_t top)
{
	return (size_t)top < p->cls_cap ? 0 : vp_class_grow(p, top);
}

/* Class @c's state in the current block (reserved), empty at its first use in the block. */
static inline struct vclass *vp_class(struct vpred *p, uint8_t c)
{
	struct vclass *k = &p->cls[c];

	if (k->gen != p->gen) {
		k->gen = p->gen;
		k->count = 0;
		k->max = 0;
	}
	return k;
}

static inline void vp_class_push(struct vclass *k, uint64_t v)
{
	k->ring[k->count++ % VAL_HIST_RING] = v;
	if (v > k->max)
		k->max = v;
}

/* First occurrence of @st in the block: fresh predictors, @n_vals arena slots claimed. */
static inline void pred_enter(struct vpred *p, struct tstate *st, uint32_t n_vals)
{
	st->gen = p->gen;
	st->seen = 0;
	st->gap = 0;
	st->dur = 0;
	st->val_slot = (uint32_t)p->f_len;
	st->cslot = vrc_slot_of(p->n_terms++);
	p->f_len += n_vals;
}

#endif
