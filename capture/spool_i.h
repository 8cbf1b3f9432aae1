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
 * Memory: only chunks 0 .. n_ready - 1 are ever claimed or looked at. Every spool (the
 * first process's, a forked or spawned one's, an in-process one) starts with
 * SPOOL_START_CHUNKS ready and its producer doubles n_ready when no ready chunk is free,
 * allocating the new chunks first (so a full /dev/shm makes no chunk, never a SIGBUS), up
 * to n_chunks: the size given is a cap. A short-lived process thus costs a few hundred KiB
 * of shared memory, not the whole spool size. A spool never shrinks.
 *
 * When the spool is full (no ready chunk is free and no more can be made ready), the
 * producing thread does what policy.when_full says:
 *
 *   SPOOL_DROP  the event is dropped and counted (dropped_events); the thread tries to
 *               claim again after CLAIM_BACKOFF more events (capture.c).
 *   SPOOL_WAIT  (the default) it waits for the consumer to free a chunk: it counts itself
 *               in n_waiting, reads `recycled`, tries to claim once more, and sleeps on the
 *               futex `recycled` (shared, naps of SPOOL_WAIT_NAP_NS) until that changes.
 *               The consumer bumps `recycled` after each chunk it frees and, while
 *               n_waiting is not 0, wakes every waiter. The wait is bounded: a waiter gives
 *               up once `recycled` has not moved for the wait limit (TFS_WAIT_LIMIT_MS, 5 s
 *               by default: the recorder is stopped, gone, or has not found a new process's
 *               spool yet), counts it in n_stalls, and its process drops (and counts) instead
 *               of waiting until `recycled` moves again, saying so once on stderr. Nobody
 *               waits once `consumer` is SPOOL_CONSUMER_DONE (the consumer finished: at the
 *               in-process exit, the recorder's MPI_Finalize save or a process's end): its
 *               events would be in no trace.
 *
 * Either way a thread that dropped events says so in its own stream (REC_DROPPED) before
 * its next record, so the trace shows where events are missing; drops a thread could not
 * say before it ended (no chunk was free again) are in dropped_events only.
 *
 * Why a waiter cannot deadlock the program: it has handed its chunk over before waiting,
 * and holds no lock of the allocator or of the table of live allocations (an interposer
 * records after the real call returned and the table was updated); the only locks it may
 * hold are the ones of announcing a newly loaded object (unwind.c's scan lock and the
 * loader's, inside dl_iterate_phdr), and locks of the program's own, which other threads
 * then wait for as they would for a slow call. It sleeps in a raw futex system call (no
 * cancellation point: a thread cannot be cancelled, hence exit, mid-wait), inside
 * cap_tls_depth (a signal handler running on it records nothing, as any re-entered call).
 * What it waits for is the consumer alone: `tracefs record` in another process, or the
 * in-process consumer thread, which records nothing, never waits, and takes none of those
 * locks while consuming (it symbolises only once finished, and finishing makes it DONE
 * first). A forked child records into a spool of its own that grows before anyone waits,
 * vfork is run as fork, at exit the in-process consumer is DONE before it stops, and
 * whatever else, the wait limit bounds every wait.
 */
#ifndef TFS_SPOOL_I_H
#define TFS_SPOOL_I_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfs/recording.h"

#define SPOOL_MAGIC 0x50534654u /* "TFSP" */
#define SPOOL_VERSION 11u
#define SPOOL_HDR_BYTES 4096u
#define SPOOL_CHUNK_HDR_BYTES 64u
#define SPOOL_CHUNK_BYTES (64u * 1024u)
#define SPOOL_DEFAULT_MB TFS_RECORDING_SPOOL_MB_DEFAULT
/* chunks every spool starts with memory behind (n_ready): 256 KiB */
#define SPOOL_START_CHUNKS 4u
/* how long a producer waits for a free chunk while the consumer frees none (TFS_WAIT_LIMIT_MS) */
#define SPOOL_WAIT_LIMIT_MS 5000u
#define SPOOL_WAIT_NAP_NS 2000000u /* longest sleep between two looks at the spool */
#define SPOOL_MAX_RECORD_WORDS 2047u
/* bytes of a REC_MODULE's path kept (the consumer reads payloads of up to this) */
#define SPOOL_MAX_PATH 4096u

/* What a producing thread does when no chunk is free (struct spool_policy): the values of
 * the public enum tfs_recording_when_full, which the recorder's options carry. */
enum spool_when_full {
	SPOOL_WAIT = TFS_RECORDING_WAIT, /* wait for the consumer to free one, up to the limit */
	SPOOL_DROP = TFS_RECORDING_DROP, /* drop the event and count it */
};

/* Which allocations carry their backtrace (struct spool_policy): the values of the public
 * enum tfs_recording_sample. */
enum spool_sample {
	SPOOL_SAMPLE_ALL = TFS_RECORDING_SAMPLE_ALL,	 /* every one */
	SPOOL_SAMPLE_CALLS = TFS_RECORDING_SAMPLE_CALLS, /* one in every `sample_every`
							    allocating calls of a thread */
	SPOOL_SAMPLE_BYTES = TFS_RECORDING_SAMPLE_BYTES, /* one per `sample_every` bytes a
							    thread asks for */
};

/* spool_hdr.consumer */
enum spool_consumer {
	SPOOL_CONSUMER_NONE = 0, /* no consumer has attached yet */
	SPOOL_CONSUMER_ON = 1,	 /* a consumer takes chunks in */
	SPOOL_CONSUMER_DONE = 2, /* it finished: nothing more is taken in, nobody waits */
};

/*
 * How the producers of a spool meet a full spool and sample backtraces: set by the spool's
 * creator before it publishes the magic, copied into every forked or spawned process's.
 * Sampling: a thread counts its allocating calls (SPOOL_SAMPLE_CALLS) or the bytes they ask
 * for (SPOOL_SAMPLE_BYTES, calloc's nmemb * size); a call whose count takes the thread's
 * total past a multiple of sample_every carries its backtrace, the others are recorded
 * with a backtrace word saying SPOOL_BT_UNSAMPLED (their `stack` is TFS_SYM_NONE, -1).
 */
struct spool_policy {
	uint32_t when_full;    /* enum spool_when_full */
	uint32_t sample;       /* enum spool_sample */
	uint64_t sample_every; /* N >= 1 (SPOOL_SAMPLE_ALL: unused) */
};

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
	REC_MODULE = 13,     /* a load of an object: arg 0: load bias; args 1, 2: lowest and end
				address of its PT_LOAD segments; arg 3: its tag (frame tags,
				below); payload: its file's path */
	REC_CALL_NESTED = 14, /* REC_CALL made inside other traced calls (TFS_TRACE_NESTED):
				 after the padded payload two more words, the depth and the
				 outermost call it is inside (a call number as aux is) */
	REC_DROPPED = 15,    /* events this thread dropped since its previous record: ts: when
				the first of them was dropped; arg 0: how many; arg 1: when the
				last one was; arg 2: the zones open in the thread whose begin
				was recorded (the ones the consumer has open beyond these had
				their end dropped). Written before the thread's next record, or
				at once when the thread holds a chunk with room for it */
};

/*
 * The backtrace of a REC_CALL_BT, after the call's payload:
 *
 *   +--------------------------------+------------+-----+------------+
 *   | keep u16 | n_new u16 | flags u32| frame      | ... | frame      |
 *   +--------------------------------+------------+-----+------------+
 *                                      n_new return addresses, outermost first
 *
 * The backtrace is the first `keep` frames of the previous backtrace recorded by the same
 * thread in the same chunk (keep is 0 for the first one of a chunk, so every chunk decodes
 * on its own), followed by the `n_new` frames. Frames of the capture library itself are
 * left out; at most SPOOL_MAX_BT_FRAMES. flags is 0, or SPOOL_BT_UNSAMPLED with keep and
 * n_new 0: the call's backtrace was not sampled (struct spool_policy); its event's stack is
 * TFS_SYM_NONE and the thread's previous backtrace stays the one to keep frames of.
 */
#define SPOOL_MAX_BT_FRAMES TFS_RECORDING_BT_DEPTH_MAX

/* spool_hdr.tsc_hz: the first process found no invariant TSC (or was told to use none) */
#define SPOOL_TSC_NONE 1u
#define SPOOL_BT_UNSAMPLED 1u

/*
 * Frame tags. A frame is a return address, as it was when recorded. Code can be unloaded
 * (dlclose) and other code loaded at its addresses, so an address alone does not say whose
 * code it was: each load of an object is announced (REC_MODULE) with a tag, 0 for a load
 * where nothing was loaded before in this process, else one more than the highest tag of
 * the loads it overlaps (at most SPOOL_FRAME_TAG_MAX: later loads share it), and a frame in
 * a load of tag t > 0 is recorded as its address | t << SPOOL_FRAME_TAG_SHIFT (above every
 * user-space address, 5-level paging included). The consumer names a frame after the load
 * of its tag that holds its address, and the trace keeps the tagged value as the frame and
 * as the symbolised address: two functions at one address in one rank are two symbols.
 * A load of the same file at the same place again is the same load (the same tag).
 */
#define SPOOL_FRAME_TAG_SHIFT 56u
#define SPOOL_FRAME_TAG_MAX 127u
#define SPOOL_FRAME_ADDR_MASK ((UINT64_C(1) << SPOOL_FRAME_TAG_SHIFT) - 1)

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

/* Descriptors whose file ids an image hands to the one it execs (spool_hdr.exec_fd_file). */
#define SPOOL_EXEC_FDS 256u

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
	_Atomic uint64_t tsc_hz; /* the producers' clock: the TSC's rate as the recording's
				    first process measured it; 0 (not measured) or SPOOL_TSC_NONE
				    (no invariant TSC): CLOCK_MONOTONIC. Either way times are on
				    the CLOCK_MONOTONIC scale of origin_ns */
	/* process following (`tracefs record`): a forked or spawned process records into a
	 * spool of its own, `<first spool's path>.<pid>` (moved aside to `<...>.<pid>.<k>` by a
	 * later process given the same pid), created with these set */
	uint32_t parent_pid;	     /* the producer's parent in the trace (capture.c attach());
					the first spool's: its producer's getppid(), set once it
					has taken the spool, 0 before */
	_Atomic uint32_t n_ready;    /* chunks with memory behind them, from chunk 0: the only
					ones claimed or read; grows (producer only), never shrinks */
	uint64_t fork_ns;	     /* CLOCK_MONOTONIC when its process began: orders the ranks
					of the processes whose start_index is unknown */
	/* the processes the producer forked or spawned so far, in every image it ran: the
	 * number each new one takes as its start_index (minus one) */
	_Atomic uint32_t n_started;
	/* its number among the processes its parent started, plus one (0: unknown: a child of
	 * system(), popen() or an untraced launcher). Ranks follow the fork tree (a parent,
	 * then its children in this order, each followed by its own), not the time processes
	 * began, which differs from run to run when processes start together */
	uint32_t start_index;
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
	struct spool_policy policy;
	/* back-pressure (see "When the spool is full" above) */
	_Atomic uint32_t consumer;  /* enum spool_consumer */
	_Atomic uint32_t recycled;  /* futex word: bumped by the consumer at each chunk it frees */
	_Atomic uint32_t n_waiting; /* producing threads waiting for a free chunk now */
	_Atomic uint32_t n_stalls;  /* waits given up: the consumer freed nothing for the limit */
	_Atomic uint64_t wait_ns;   /* time producing threads spent waiting, summed */
	/* how the processes it started ended: the wait calls of the producer's threads under
	 * way (a child reaped meanwhile may yet be written) and the ring of the children they
	 * reaped (struct spool_reap), n_reaps entries written so far */
	_Atomic uint32_t n_in_wait;
	_Atomic uint32_t n_reaps;
	struct spool_reap reaps[SPOOL_N_REAPS];
	_Atomic uint32_t fatal_signal; /* the fatal signal the capture's handler saw, 0: none */
	_Atomic uint32_t next_file;    /* symbolic file ids, handed out across the images the
					  process runs: an exec'd image goes on numbering them */
	_Atomic uint64_t next_alloc;   /* the next allocation id, left by an image at its exec
					  for the next image to go on from */
	/* file id + 1 of each descriptor below SPOOL_EXEC_FDS that an image leaves open across
	 * its exec (0: none known), for the next image to name them as it did (files.c) */
	uint32_t exec_fd_file[SPOOL_EXEC_FDS];
	/* the programs the process ran, "sh -> cc1" (the names it was exec'd as, a forked one's
	 * from its parent's; the oldest ones left out as "... -> " when longer), NUL-terminated;
	 * written by its producer, read once it has ended */
	char images[SPOOL_IMAGES_BYTES];
	/* 1 from an exec until the image it made names itself (capture.c note_image): the last
	 * of images is the program being exec'd, named by the exec call; still 1 once the
	 * process has ended, that image never loaded the capture (statically linked, or
	 * LD_PRELOAD dropped) and recorded nothing */
	_Atomic uint32_t exec_pending;
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
 * Create a spool of at most @bytes (rounded to whole chunks, at least 2) at @path, which
 * must not exist, or in anonymous shared memory when @path is NULL (the in-process
 * producer's). @n_ready chunks are ready (0: all), their memory allocated now (-ENOSPC
 * rather than a SIGBUS later) and, in anonymous memory, faulted in; producers make more
 * ready as they need them. The policy is SPOOL_WAIT, every backtrace: the caller may
 * change it before the spool is used. @return 0 or -errno
 */
int cap_spool_create(struct spool *s, const char *path, size_t bytes, uint32_t n_ready,
		     uint32_t timing, uint32_t trace_mask);
/*
 * Create the spool of a process forked or spawned from the producer of @parent, at @path
 * (which must not exist): the same size, timing, trace mask, policy and time origin,
 * producer @pid (which began at @start, see producer_start), parent @ppid, fork_ns now,
 * start_index @index;
 * SPOOL_START_CHUNKS ready, allocated and faulted in (the caller is its producer).
 * @return 0 or -errno (-EEXIST: @path exists; -ENOSPC, -ENOMEM: no memory)
 */
int cap_spool_create_child(struct spool *s, const char *path, const struct spool_hdr *parent,
			   uint32_t pid, uint32_t ppid, uint64_t start, uint32_t index);

/*
 * The names of a recording's spools, all in its private directory (tfs/recording.h):
 *
 *   spool                the first process's (TFS_SPOOL of the program, TFS_SPOOL_ROOT of
 *                        the processes it starts)
 *   spool.<pid>          a forked or spawned process's, made by that process
 *   spool.<pid>.<k>      the same, moved aside by a later process given that pid
 *                        (cap_spool_move_aside) before its recorder had taken it in
 *   spool.trace          the trace the recorder saves when MPI_Finalize asks (save_req)
 *
 * The producer derives a name from the first spool's path (its `root`); the recorder lists
 * the directory for them and takes in only regular files of its own user.
 */
#define SPOOL_FIRST "spool"
#define SPOOL_SAVE_SUFFIX ".trace"

/* What /proc/<pid>/stat says of a process (cap_proc_stat). */
struct cap_proc_stat {
	char state;	/* field 3: 'R', 'S', ... 'Z' (zombie), 'X' (dead) */
	uint32_t ppid;	/* field 4 */
	uint64_t start; /* field 22: when it began, in clock ticks after boot (producer_start) */
};

/*
 * Read /proc/@pid/stat (/proc/self/stat when @pid is 0) into @st. Async-signal-safe (a
 * forked child calls it). @return 0, or -errno (-ENOENT, -ESRCH: no such process, or it
 * was reaped while read; -EBADMSG: a line this parser does not know)
 */
int cap_proc_stat(uint32_t pid, struct cap_proc_stat *st);

/* `<root>.<pid>`, the spool of process @pid, into @buf. @return 0 or -ENAMETOOLONG */
int cap_spool_child_path(const char *root, uint32_t pid, char *buf, size_t cap);
/* `<root>.trace`, the trace saved for MPI_Finalize, into @buf. @return 0 or -ENAMETOOLONG */
int cap_spool_save_path(const char *root, char *buf, size_t cap);
/*
 * Whether @name, an entry of a recording's directory, is a process's spool:
 * `spool.<pid>` or, *@aside set, `spool.<pid>.<k>`.
 */
bool cap_spool_is_child_name(const char *name, bool *aside);

/*
 * Move spool @path to `<path>.<k>`, the first k from 1 that names nothing, and put that
 * name in @aside: by a rename that replaces nothing (a hard link, then an unlink, where
 * renames cannot refuse to replace). Async-signal-safe. @return 0, or -errno (-ENOENT:
 * @path is gone; -ENAMETOOLONG; -EEXIST: 1000 names taken)
 */
int cap_spool_move_aside(const char *path, char *aside, size_t cap);

/*
 * Map an existing spool read-write and check its header. Nothing is faulted in: a consumer
 * touches only the ready chunks; a producer calls cap_spool_prefault. A symbolic link, or
 * anything but a regular file of the calling process's effective user, is refused
 * (-EPERM): another user's file never becomes part of a recording.
 * @return 0, -errno, -EPERM or -EBADMSG
 */
int cap_spool_attach(struct spool *s, const char *path);
/* cap_spool_attach() of the open file @fd (not closed). */
int cap_spool_attach_fd(struct spool *s, int fd);
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

/*
 * cap_spool_claim, and when no chunk is free wait for the consumer to free one (the
 * SPOOL_WAIT protocol above), for as long as it frees some at least every @limit_ns.
 * Async-signal-safe; sets errno. @return the chunk, or NULL: the consumer is done, or freed
 * nothing for @limit_ns (then *@stalled is true)
 */
struct spool_chunk *cap_spool_claim_wait(const struct spool *s, uint32_t thread, uint64_t seq,
					 uint64_t limit_ns, bool *stalled);

/* The consumer has freed a chunk (after its SPOOL_FREE store): wake the waiting producers. */
void cap_spool_recycled(const struct spool *s);

/* The consumer attaches (SPOOL_CONSUMER_ON) or is done (SPOOL_CONSUMER_DONE: waiters go). */
void cap_spool_set_consumer(const struct spool *s, enum spool_consumer state);

/*
 * Parse a --when-full / TFS_WHEN_FULL value: "wait" or "drop" (NULL or "": wait).
 * @return 0 or -EINVAL
 */
int cap_parse_when_full(const char *s, uint32_t *out);

/*
 * Parse a positive count for sampling: decimal digits, optionally followed by k, m or g
 * (times 2^10, 2^20, 2^30). @return 0 or -EINVAL (empty, 0, junk, overflow)
 */
int cap_parse_count(const char *s, uint64_t *out);

/* The policy's sampling in words, as the `backtrace_sampling` metadata says it. */
void cap_sample_describe(const struct spool_policy *p, char *buf, size_t cap);

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
