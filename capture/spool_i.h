/*
 * The spool: a file (or anonymous memory) shared between the producing threads of one
 * traced process and one consumer, carved into fixed-size chunks. Each producing thread
 * owns one chunk at a time and appends raw records to it with no lock, publishing a fill
 * counter with a release store after each record, so a consumer in another process reads
 * every complete record even when the producer dies mid-record. This header is the
 * contract between capture.c (producer), consumer.c and `tracefs record`; it does not
 * define how records become trace events (consumer.c does).
 *
 * Layout (all little-endian, host order; producer and consumer are the same machine):
 *
 *   0                     4096                4096 + chunk_bytes
 *   +---------------------+-------------------+-------------------+---
 *   | struct spool_hdr    | chunk 0           | chunk 1           | ... n_chunks
 *   +---------------------+-------------------+-------------------+---
 *
 *   chunk:  +--------------------------+-------------------------------------------+
 *           | struct spool_chunk (64)  | records, 8-byte words, `fill` bytes valid |
 *           +--------------------------+-------------------------------------------+
 *
 *   record: word 0                                               word 1     words 2..
 *           +--------+---------+----------------+----------------+----------+----------+
 *           | kind   | words   | small u16      | aux u32        | ts_ns u64| args ... |
 *           |  0-4   |  0-7    |                |                |          |          |
 *           | words  |         |                |                |          |          |
 *           |  8-10  |         |                |                |          |          |
 *           +--------+---------+----------------+----------------+----------+----------+
 *   bits:    0..7     8..15     16..31           32..63
 *   The low byte holds the kind (bits 0-4) and bits 8-10 of `words` (bits 5-7); the next
 *   byte bits 0-7 of `words`, which counts the whole record (2 to SPOOL_MAX_RECORD_WORDS:
 *   a record is at most 16 KiB, the room an exec's argv takes). String payloads follow the
 *   u64 args, `small` bytes long, zero-padded to a word.
 *
 * Chunk states: FREE -> CLAIMING (a producer won it and is writing the header) -> OWNED
 * (being filled by thread `thread`) -> FULL (handed over) -> FREE (consumed, recycled).
 * Only the consumer moves FULL to FREE; only a producer moves FREE to OWNED.
 *
 * Memory: only chunks 0 .. n_ready - 1 are ever claimed or looked at. A spool made whole
 * (the first process's, an in-process one) is ready in full; a forked or spawned process's
 * starts with SPOOL_CHILD_READY_CHUNKS and its producer doubles n_ready when no ready chunk
 * is free, allocating the new chunks first (so a full /dev/shm drops events, never raises
 * SIGBUS). A short-lived child thus costs a few hundred KiB of shared memory, not the whole
 * spool size.
 */
#ifndef TFS_SPOOL_I_H
#define TFS_SPOOL_I_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPOOL_MAGIC 0x50534654u /* "TFSP" */
#define SPOOL_VERSION 4u
#define SPOOL_HDR_BYTES 4096u
#define SPOOL_CHUNK_HDR_BYTES 64u
#define SPOOL_CHUNK_BYTES (64u * 1024u)
#define SPOOL_DEFAULT_MB 64u
/* chunks a forked or spawned process's spool starts with memory behind (n_ready) */
#define SPOOL_CHILD_READY_CHUNKS 4u
#define SPOOL_MAX_RECORD_WORDS 2047u
/* bytes of a REC_MODULE's path kept (the consumer reads payloads of up to this) */
#define SPOOL_MAX_PATH 4096u

enum spool_chunk_state {
	SPOOL_FREE = 0,
	SPOOL_CLAIMING = 1,
	SPOOL_OWNED = 2,
	SPOOL_FULL = 3,
};

/* Raw record kinds (word 0, bits 0-7). */
enum spool_rec {
	REC_STRING = 1,	     /* aux: per-thread string id; payload: the bytes */
	REC_ZONE_BEGIN = 2,  /* aux: string id of the name */
	REC_ZONE_END = 3,    /* no args */
	REC_MARK = 4,	     /* payload: the message */
	REC_COUNTER = 5,     /* aux: string id of the name; arg 0: value (i64) */
	REC_THREAD_NAME = 6, /* payload: the name */
	REC_MEM = 7,	     /* small: 1 store, 0 load; arg 0: addr, arg 1: size, arg 2: site */
	REC_PHASE_BEGIN = 8, /* aux: phase id; arg 0: scope; arg 1: generation; payload: name */
	REC_PHASE_END = 9,   /* aux: phase id; arg 0: generation (process phases, else 0) */
	REC_SYNC = 10,	     /* arg 0: the process-phase generation this thread now sees */
	REC_CALL = 11,	     /* an interposed call (calls_i.h): aux: enum cap_call; arg 0:
				duration (ns); args 1..: its u64 arguments in schema order;
				payload: its string arguments, each NUL-terminated */
	REC_CALL_BT = 12,    /* REC_CALL of an allocating call followed by its backtrace,
				after the padded payload (see below) */
	REC_MODULE = 13,     /* a loaded object: arg 0: load bias; args 1, 2: lowest and end
				address of its PT_LOAD segments; payload: its file's path */
};

/*
 * The backtrace of a REC_CALL_BT, after the call's payload:
 *
 *   +--------------------------------+------------+-----+------------+
 *   | keep u16 | n_new u16 | 0 u32   | frame      | ... | frame      |
 *   +--------------------------------+------------+-----+------------+
 *                                      n_new return addresses, outermost first
 *
 * The backtrace is the first `keep` frames of the previous backtrace recorded by the same
 * thread in the same chunk (keep is 0 for the first one of a chunk, so every chunk decodes
 * on its own), followed by the `n_new` frames. Frames of the capture library itself are
 * left out; at most SPOOL_MAX_BT_FRAMES.
 */
#define SPOOL_MAX_BT_FRAMES 128u

/*
 * A child the producer reaped through an interposed wait call (interpose_proc.c), for the
 * recorder, which can reap only its own children and the orphans it inherits: entry i of a
 * spool's ring is reaps[i % SPOOL_N_REAPS], complete once its seq is i + 1 (release).
 */
#define SPOOL_N_REAPS 64u
struct spool_reap {
	_Atomic uint32_t seq;
	uint32_t pid;	 /* the child reaped */
	int32_t status;	 /* its wait status (exited or killed) */
	uint32_t pad;
	uint64_t t_ns;	 /* CLOCK_MONOTONIC after the wait returned: after the child began */
};

/* Bytes of the names of a process's images, "sh -> cc1" (spool_hdr.images). */
#define SPOOL_IMAGES_BYTES 256u

struct spool_hdr {
	uint32_t magic;
	uint32_t version;
	uint32_t chunk_bytes;	     /* including the chunk header; a multiple of 4096 */
	uint32_t n_chunks;
	uint64_t origin_ns;	     /* CLOCK_MONOTONIC at creation: time 0 of the trace */
	uint64_t origin_realtime_ns; /* CLOCK_REALTIME at creation */
	uint32_t timing;	     /* enum tfs_timing; NONE: producers read no clock */
	uint32_t trace_mask;	     /* TFS_TRACE_* the producers record */
	_Atomic uint32_t producer_pid; /* the one process allowed to produce; 0 until it attaches */
	_Atomic uint32_t next_thread;  /* symbolic thread ids, handed out in first-event order */
	_Atomic uint32_t claim_hint;   /* where the next chunk search starts */
	_Atomic uint32_t exited;       /* 1: the producer's exit path (destructor) ran */
	_Atomic uint64_t dropped_events;
	_Atomic uint64_t tsc_hz; /* the producer's clock (TFS_CLOCK=tsc): its calibrated TSC
				    rate; 0: CLOCK_MONOTONIC. Either way times are on the
				    CLOCK_MONOTONIC scale of origin_ns */
	/* process following (`tracefs record`): a forked or spawned process records into a
	 * spool of its own, `<first spool's path>.<pid>` (moved aside to `<...>.<pid>.<k>` by a
	 * later process given the same pid), created with these set */
	uint32_t parent_pid;	     /* 0: the first process's spool */
	_Atomic uint32_t n_ready;    /* chunks with memory behind them, from chunk 0: the only
					ones claimed or read; grows (producer only), never shrinks */
	uint64_t fork_ns;	     /* CLOCK_MONOTONIC when its process began: orders the ranks */
	/* MPI_Finalize under `tracefs record` (capture/mpi): the producer sets save_req to 1 and
	 * waits; the consumer takes in everything, saves the trace to <spool path>.trace and sets
	 * save_rc to 1 (or a negative errno). The producer then merges the ranks' traces. */
	_Atomic uint32_t save_req;
	_Atomic int32_t save_rc;
	uint32_t bt_depth;	     /* frames kept per allocation backtrace; 0: none recorded */
	_Atomic uint32_t n_unrecorded; /* first process's spool: processes forked or spawned
					  under it that could not make a spool (not recorded) */
	/* when the producer began, in clock ticks after boot (/proc/<pid>/stat), 0: unknown.
	 * With the pid it tells the producer from a later process given the same pid, which
	 * must not take this spool for its own (capture.c) */
	_Atomic uint64_t producer_start;
	/* how the processes it started ended: the wait calls of the producer's threads under
	 * way (a child reaped meanwhile may yet be written) and the ring of the children they
	 * reaped (struct spool_reap), n_reaps entries written so far */
	_Atomic uint32_t n_waiting;
	_Atomic uint32_t n_reaps;
	struct spool_reap reaps[SPOOL_N_REAPS];
	_Atomic uint32_t fatal_signal; /* the fatal signal the capture's handler saw, 0: none */
	uint32_t pad2;
	/* the programs the process ran, "sh -> cc1" (the names it was exec'd as, a forked one's
	 * from its parent's; the oldest ones left out as "... -> " when longer), NUL-terminated;
	 * written by its producer, read once it has ended */
	char images[SPOOL_IMAGES_BYTES];
};

struct spool_chunk {
	_Atomic uint32_t state; /* enum spool_chunk_state */
	uint32_t thread;	/* owner's symbolic thread id (valid from OWNED on) */
	uint64_t seq;		/* owner's chunk number: 0, 1, 2... */
	_Atomic uint64_t fill;	/* bytes of complete records after this header */
	uint8_t pad[SPOOL_CHUNK_HDR_BYTES - 24];
};

/* A mapped spool. The mapping belongs to this struct; the file is never unlinked here. */
struct spool {
	struct spool_hdr *hdr;
	size_t map_bytes;
	uint64_t ino; /* the file mapped, when attached (cap_spool_attach); else 0 */
};

/*
 * Create a spool of @bytes (rounded to whole chunks, at least 2), ready in full, at @path,
 * which must not exist (its memory allocated now: -ENOSPC rather than a SIGBUS later), or
 * in anonymous memory when @path is NULL (then faulted in at once: the in-process
 * producer's mapping). @return 0 or -errno
 */
int cap_spool_create(struct spool *s, const char *path, size_t bytes, uint32_t timing,
		     uint32_t trace_mask);
/*
 * Create the spool of a process forked or spawned from the producer of @parent, at @path
 * (which must not exist): the same size, timing, trace mask and time origin, producer
 * @pid (which began at @start, see producer_start), parent @ppid, fork_ns now;
 * SPOOL_CHILD_READY_CHUNKS ready, allocated and faulted in (the caller is its producer).
 * @return 0 or -errno (-EEXIST: @path exists; -ENOSPC, -ENOMEM: no memory)
 */
int cap_spool_create_child(struct spool *s, const char *path, const struct spool_hdr *parent,
			   uint32_t pid, uint32_t ppid, uint64_t start);

/*
 * Move spool @path to `<path>.<k>`, the first k from 1 that names nothing, and put that
 * name in @aside: by a rename that replaces nothing (a hard link, then an unlink, where
 * renames cannot refuse to replace). Async-signal-safe. @return 0, or -errno (-ENOENT:
 * @path is gone; -ENAMETOOLONG; -EEXIST: 1000 names taken)
 */
int cap_spool_move_aside(const char *path, char *aside, size_t cap);

/*
 * Map an existing spool read-write and check its header. Nothing is faulted in: a consumer
 * touches only the ready chunks; a producer calls cap_spool_prefault. @return 0, -errno or
 * -EBADMSG
 */
int cap_spool_attach(struct spool *s, const char *path);
/*
 * Fault the header and the ready chunks of @s in for writing, so the producer's hot path
 * takes no first-touch fault. @return 0, or -errno (memory ran out: the spool is usable,
 * its pages then fault in on first use)
 */
int cap_spool_prefault(struct spool *s);
void cap_spool_unmap(struct spool *s);

static inline struct spool_chunk *cap_spool_chunk(const struct spool *s, uint32_t idx)
{
	return (struct spool_chunk *)((uint8_t *)s->hdr + SPOOL_HDR_BYTES +
				      (size_t)idx * s->hdr->chunk_bytes);
}

static inline uint8_t *cap_chunk_data(struct spool_chunk *c)
{
	return (uint8_t *)c + SPOOL_CHUNK_HDR_BYTES;
}

static inline uint32_t cap_chunk_cap(const struct spool *s)
{
	return s->hdr->chunk_bytes - SPOOL_CHUNK_HDR_BYTES;
}

/* Chunks 0 .. cap_spool_n_ready() - 1 may be claimed, and are the only ones to read. */
static inline uint32_t cap_spool_n_ready(const struct spool *s)
{
	uint32_t n = atomic_load_explicit(&s->hdr->n_ready, memory_order_acquire);

	return n < s->hdr->n_chunks ? n : s->hdr->n_chunks;
}

/*
 * Claim a free chunk for @thread as its chunk number @seq, making more chunks ready when
 * none is free. @return the chunk, or NULL: every chunk is in use, or no memory for more
 */
struct spool_chunk *cap_spool_claim(const struct spool *s, uint32_t thread, uint64_t seq);

static inline void cap_spool_hand_over(struct spool_chunk *c)
{
	atomic_store_explicit(&c->state, SPOOL_FULL, memory_order_release);
}

static inline uint64_t cap_rec_word0(uint32_t kind, uint32_t words, uint32_t small, uint32_t aux)
{
	return (uint64_t)(kind & 0x1f) | (uint64_t)(words >> 8 & 7) << 5 |
	       (uint64_t)(words & 0xff) << 8 | (uint64_t)small << 16 | (uint64_t)aux << 32;
}

/* The kind (enum spool_rec) of the record whose word 0 is @w0. */
static inline uint32_t cap_rec_kind(uint64_t w0)
{
	return (uint32_t)(w0 & 0x1f);
}

/* The length in words of the record whose word 0 is @w0. */
static inline uint32_t cap_rec_words(uint64_t w0)
{
	return (uint32_t)(w0 >> 8 & 0xff) | (uint32_t)(w0 >> 5 & 7) << 8;
}

#endif
