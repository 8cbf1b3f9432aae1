/*
 * The runtime of the generated MPI wrappers (mpi_wrap.c, written by gen_mpi.py): symbolic ids
 * of MPI handles, communicator ids agreed across members, requests pooled per call signature,
 * ranks made relative to the caller, and the record each wrapper hands to cap_put_call().
 * The wrappers are its only callers; it knows nothing of individual MPI functions beyond the
 * handle kinds.
 */
#ifndef TFS_MPI_RT_I_H
#define TFS_MPI_RT_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "tfs/schema.h"

/* Handle classes: one symbolic id space each (the sym_class names in mpi_kinds.c). */
enum mpirt_class {
	MPIRT_COMM,
	MPIRT_TYPE,
	MPIRT_OP,
	MPIRT_GROUP,
	MPIRT_REQ,
	MPIRT_FILE,
	MPIRT_WIN,
	MPIRT_INFO,
	MPIRT_ERRH,
	MPIRT_MSG,
	MPIRT_SESSION,
	MPIRT_FN,
	MPIRT_BUF, /* addresses outside any allocation */
	MPIRT_N_CLASSES
};

/* The source and tag recorded for MPI_STATUS_IGNORE (or a status the call left undefined). */
#define MPIRT_NO_STATUS (-32768)

/* Bytes of one string argument a wrapper builds (an array rendered as text). */
#define MPIRT_STR_CAP 512

/* An array rendered as text: "a,b,c", cut with "..." at MPIRT_STR_CAP. */
struct mpirt_str {
	char s[MPIRT_STR_CAP];
	size_t len;
};

/* One wrapped call being recorded: w[0] the duration, w[1..] the u64 arguments. */
struct mpirt_call {
	uint64_t ts_ns;
	uint64_t w[TFS_MAX_ARGS + 1];
};

/*
 * Begin the wrapper of call @call: false when the call is not to be recorded (capture off,
 * or an MPI call made from inside the capture or the MPI library itself). On true, the
 * capture is suspended on this thread until mpirt_put(), so the library's own allocations
 * and I/O are not recorded as the program's, and a thread the library starts meanwhile is
 * the library's layer (capture_i.h cap_call_depth).
 */
bool mpirt_enter(uint32_t call);
/* The PMPI call starts now. */
void mpirt_start(struct mpirt_call *c);
/* The PMPI call has returned: its duration. */
void mpirt_stop(struct mpirt_call *c);
/* Hand the record over (@n_w words after the duration, then @strs in schema order). */
void mpirt_put(struct mpirt_call *c, uint32_t call, uint32_t n_w, struct mpirt_str *const *strs,
	       uint32_t n_strs);

/* Symbolic id of the handle at @h (@size bytes), given one on first use. */
uint64_t mpirt_id(enum mpirt_class cls, const void *h, size_t size);
/*
 * Predefined handles (mpi_annot.txt `predef`): handle @h of @cls gets the fixed @id, unless
 * another name bound its value first; mpirt_reserve_ids() then keeps ids [0, @n) of @cls
 * from the program's own handles. mpirt_bind_predefined() (generated) does both for every
 * class at MPI_Init.
 */
void mpirt_bind_id(enum mpirt_class cls, uint64_t id, const void *h, size_t size);
void mpirt_reserve_ids(enum mpirt_class cls, uint64_t n);
/* The name of predefined handle @id of @cls (MPI_DOUBLE for type#13), NULL for a program's
 * own; generated from the same `predef` lines as mpirt_bind_predefined(). */
const char *mpirt_predef_name(enum mpirt_class cls, uint64_t id);
void mpirt_bind_predefined(void);
/* Forget a released handle (its id is reused by the next new handle of its class). */
void mpirt_release(enum mpirt_class cls, uint64_t id);
/* A handle the call created: a fresh id (ids of freed handles are reused, lowest first). */
uint64_t mpirt_new_id(enum mpirt_class cls, const void *h, size_t size);

/* The new communicator @nc (MPI_COMM_NULL at members left without one), created
 * collectively over @parent: the lowest id free at every member of the parent, by a
 * reduction over it; every member of the parent calls this. */
uint64_t mpirt_comm_child(MPI_Comm parent, MPI_Comm nc);
/* The new communicator @nc: the lowest id free at every member, by a reduction over its
 * members (intercomms too). */
uint64_t mpirt_comm_agree(MPI_Comm nc);

/*
 * Requests: a new request from a call of signature hash @sig (kind and signature words): the
 * lowest free slot of that signature's pool (of the next pools when it is full), so ids
 * repeat whatever the completion order.
 * @delta is world rank minus the caller's rank in the request's communicator, packed with
 * what its status defines (mpirt_rq_pack()).
 */
uint64_t mpirt_req_new(const MPI_Request *r, uint64_t sig, int64_t delta);
/*
 * The id of a live request (0 for MPI_REQUEST_NULL or unknown) and its rank delta. Several
 * live requests may share one handle value (MPICH returns one handle for every send it
 * completed at once): they queue on it in creation order.
 */
uint64_t mpirt_req_id(const MPI_Request *r, int64_t *delta);
/* The same, taken off the handle's queue (a call that may complete it). */
uint64_t mpirt_req_take(const MPI_Request *r, int64_t *delta);
/* After the call: request @id (taken from @r) completed if *@r is MPI_REQUEST_NULL (its
 * pool slot is freed), else it goes back to the front of @r's queue. */
void mpirt_req_settle(const MPI_Request *r, uint64_t id, int64_t delta);
/* The same for the @n requests at @r, taken and settled in one go (settled last first). */
void mpirt_req_take_all(const MPI_Request *r, int64_t n, uint64_t *ids, int64_t *deltas);
void mpirt_req_settle_all(const MPI_Request *r, int64_t n, const uint64_t *ids,
			  const int64_t *deltas);
/* Per-thread scratch arrays of @n request ids and rank deltas (valid until the next call). */
void mpirt_scratch(int64_t n, uint64_t **ids, int64_t **deltas);
uint64_t mpirt_sig_hash(uint32_t call, const uint64_t *w, uint32_t n);

/*
 * Ranks. A delta is (world rank) - (caller's rank in the communicator/group/window); a rank
 * r >= 0 is stored as r + delta, so the trace's relative rank (value - stream rank) is
 * r - (caller's rank). Negative ranks (MPI_ANY_SOURCE, MPI_PROC_NULL, MPI_ROOT) stay. In a
 * group the caller is not in, its rank counts as -1 (no such calls take a single rank:
 * arrays of ranks there are written literally, mpirt_str_rel()).
 */
int64_t mpirt_delta_comm(MPI_Comm c);
int64_t mpirt_delta_group(MPI_Group g);
int64_t mpirt_delta_win(MPI_Win w);
/*
 * Messages (MPI_Mprobe, MPI_Improbe): the new message at @m, found in a communicator of
 * rank delta @delta, which its MPI_Mrecv or MPI_Imrecv takes (mpirt_delta_msg(), 0 for an
 * unknown message). The null message a probe that found nothing returns keeps one id.
 */
uint64_t mpirt_msg_new(const MPI_Message *m, int64_t delta);
int64_t mpirt_delta_msg(const MPI_Message *m);
static inline uint64_t mpirt_rank(int64_t delta, int64_t r)
{
	return (uint64_t)(r >= 0 ? r + delta : r);
}
/* The caller's rank in MPI_COMM_WORLD (0 before MPI_Init). */
int64_t mpirt_world_rank(void);
/* A stored rank word as the trace shows it once merged: relative to the caller. */
static inline uint64_t mpirt_rel(uint64_t w)
{
	return (int64_t)w >= 0 ? w - (uint64_t)mpirt_world_rank() : w;
}

/*
 * A value that may derive from the caller's rank (a tag, a Comm_split color or key), as the
 * writer takes it (tfs_rval()): derived when it is positive and equals the caller's rank in
 * the call's communicator (world rank - @delta) or @peer, the peer rank of the same call in
 * that communicator (-1: none). Stored relative to the world rank, so it prints absolute.
 * 0 is always literal: it is the most common constant tag, and read as derived it would
 * split rank 0 and every rank talking to rank 0 off the grammar their neighbours share.
 */
static inline bool mpirt_derived(int64_t self, int64_t peer, int64_t v)
{
	return v > 0 && (v == self || v == peer);
}
static inline uint64_t mpirt_rval(int64_t delta, int64_t peer, int64_t v)
{
	return tfs_rval(v, mpirt_derived(mpirt_world_rank() - delta, peer, v));
}
/*
 * Which fields of a status the standard defines: all of a receive's; of file I/O the byte
 * count alone (ROMIO's blocking accesses write nothing else, not even the cancelled bit,
 * which shares a word with the count, and Open MPI's requests of file I/O leave it as it
 * was too); of a probe all but the cancelled flag (nothing found by a probe was cancelled,
 * and MPICH leaves the bit as it was); of anything else (sends, collectives) only the
 * cancelled flag. Undefined fields are recorded as MPIRT_NO_STATUS ("-" in text): they
 * hold garbage.
 */
enum mpirt_st { MPIRT_ST_CANCELLED, MPIRT_ST_ALL, MPIRT_ST_IO, MPIRT_ST_PROBE };

/* A request's rank delta and enum mpirt_st packed in one word (what the pools keep). */
static inline int64_t mpirt_rq_pack(int64_t delta, enum mpirt_st st)
{
	return (int64_t)((uint64_t)delta << 2) | st;
}
static inline int64_t mpirt_rq_delta(int64_t packed)
{
	return (packed - (packed & 3)) / 4;
}
static inline enum mpirt_st mpirt_rq_status(int64_t packed)
{
	return (enum mpirt_st)(packed & 3);
}

/*
 * A status: MPIRT_STATUS_WORDS words, source (RANK), tag (RVAL), bytes received
 * (MPI_UNDEFINED when not a whole number), cancelled (0/1); the fields @what leaves
 * undefined, and all but cancelled when it is 1, as MPIRT_NO_STATUS. MPI_ERROR is not among
 * them: it is defined only in the statuses of calls that return MPI_ERR_IN_STATUS
 * (mpirt_str_status). @delta: world rank minus the caller's rank in the status's
 * communicator.
 */
#define MPIRT_STATUS_WORDS 4
void mpirt_status(const MPI_Status *st, int64_t delta, enum mpirt_st what, uint64_t *w);
/* The words of MPI_STATUS_IGNORE or of a status the call left undefined. */
void mpirt_no_status(uint64_t *w);
/*
 * Append status @st to @s as "source:tag:bytes:cancelled" (source relative, "r+1"; tag
 * relative when derived from a rank, else literal; "-" for what is undefined). With
 * @with_error (the call returned MPI_ERR_IN_STATUS) ":0" follows for a request that
 * succeeded; a failed one is "error:<error class>" and one still pending "pending", their
 * other fields being undefined.
 */
void mpirt_str_status(struct mpirt_str *s, const MPI_Status *st, int64_t delta,
		      enum mpirt_st what, bool with_error);

/* The error class of @code (itself for MPI_SUCCESS, or when MPI cannot tell): codes carry
 * per-process detail, classes are the same anywhere. */
int mpirt_error_class(int code);

/* Size of @c (the remote group's of an intercommunicator): lengths of per-rank arrays. */
int mpirt_comm_size(MPI_Comm c);
/*
 * Whether the caller is @root of a rooted collective over @c: @root is MPI_ROOT (the root's
 * side of an intercommunicator) or, in an intracommunicator, the caller's rank.
 */
bool mpirt_at_root(MPI_Comm c, int root);
/* Sources (@out false) or destinations of the topology of @c (0 without one): lengths of
 * the arrays of neighbourhood collectives. */
int mpirt_neighbors(MPI_Comm c, bool out);
/* Dimensions of Cartesian communicator @c (0 for any other): lengths of coordinate arrays. */
int mpirt_cart_ndims(MPI_Comm c);

/* Text of arrays: append one element, separated by commas. */
void mpirt_str_reset(struct mpirt_str *s);
void mpirt_str_i64(struct mpirt_str *s, int64_t v);
/* "r+1" (rank @r relative to the caller's, @self); "-2" for specials; literal when @self < 0 */
void mpirt_str_rel(struct mpirt_str *s, int64_t r, int64_t self);
void mpirt_str_sym(struct mpirt_str *s, const char *cls, uint64_t id);
/* Handle @id of class @cls (symbolic id class @sym): a predefined one by its name, as the
 * views print a handle argument (MPI_DOUBLE), any other as @sym#@id (type#16). */
void mpirt_str_handle(struct mpirt_str *s, enum mpirt_class cls, const char *sym, uint64_t id);
void mpirt_str_text(struct mpirt_str *s, const char *text);

/*
 * A buffer pointer as (allocation id, offset), both in the call signature. Until the
 * allocation tree is linked in, every buffer is outside any allocation: allocation 0, and
 * for the offset a number per distinct address in first-use order (1, 2...; 0 for NULL,
 * all ones for MPI_IN_PLACE), since raw addresses differ between ranks and runs.
 */
void mpirt_buf(const void *p, uint64_t *alloc, uint64_t *off);

/* Bits of a by-value argument of unknown type (up to 8 bytes, else 0). */
uint64_t mpirt_bits(const void *p, size_t size);

/*
 * Whether a PMPI_ call returning to @ra comes from an MPI binding that bypasses the MPI_
 * functions (MPICH's mpi_f08 entry points, every Fortran binding of Open MPI), so the call
 * goes to the MPI_ wrapper instead.
 * Thread-safe; cheap outside the Fortran library (mpi_f08.c).
 */
bool mpirt_bypassed(const void *ra);

/*
 * The MPI library's function @name (a PMPI_ one), looked up after this library once and
 * kept in @slot. Thread-safe.
 */
void *mpirt_next(void *_Atomic *slot, const char *name);

/* Hooks of annotated functions. */
void mpirt_on_init(void);
void mpirt_on_finalize(void);
/* MPI_Abort: this rank's trace saved on its own (the launcher then kills every rank). */
void mpirt_on_abort(void);
/* Merge every rank's trace into one file (mpi_merge.c). */
void mpirt_merge_at_finalize(void);
/* Save this rank's trace as <output>.<rank>, saying so on stderr (mpi_merge.c). */
void mpirt_save_at_abort(void);
void mpirt_on_info_set(const char *key, const char *value);

#endif
