/*
 * Making traces: declare event kinds, open one stream per (rank, thread), append events,
 * mark phases, save one file. Each stream compresses online (call-signature table +
 * Sequitur grammar + value streams) with memory bounded by a budget. This API does not
 * capture anything itself: capture/ and tests feed it.
 */
#ifndef TFS_WRITER_H
#define TFS_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "tfs/schema.h"
#include "tfs/tfs.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tfs_writer_opts {
	int timing;		   /**< enum tfs_timing */
	double rel_err;		   /**< TFS_TIMING_LOSSY: bound in (0, 1), e.g. 0.1 */
	size_t grammar_budget;	   /**< bytes per stream's grammar before a new block; 0: 2 MiB */
	uint32_t block_events;	   /**< events per value block; 0: 4096 */
	int zstd_level;		   /**< 0: default */
	int late_kinds;		   /**< non-zero: tfs_writer_add_kind() also once streams exist,
					the caller making sure no append runs meanwhile */
	int timing_coder;	   /**< TFS_CODER_AUTO (0): a timing column is range-coded
					where that is smaller (FORMAT.md §7.4.2); TFS_CODER_FAST:
					never, for views that read faster (timing 10-40%
					larger, decoded 3-8x faster) */
	int values_save_level;	   /**< 0: off; else a zstd level (1 to 22) at which save
					recompresses every value block, keeping it where
					smaller: at 19, 3-10% smaller timing for about 0.3 us
					per event (MPI traces). Only in traces of at most
					TFS_VALUES_SAVE_MAX_EVENTS events (FORMAT.md §7.6,
					tests/bench/run_values) */
};

/** Events above which a save ignores values_save_level (bounds its cost near a second). */
#define TFS_VALUES_SAVE_MAX_EVENTS (UINT64_C(1) << 20)

struct tfs_writer;
struct tfs_wstream;

/**
 * Create a writer. @opts may be NULL for defaults (lossless timing).
 * @return 0, -EINVAL (bad option) or -ENOMEM. Free with tfs_writer_free().
 */
int tfs_writer_new(const struct tfs_writer_opts *opts, struct tfs_writer **out);
/** Free a writer and its streams without saving. Accepts NULL. */
void tfs_writer_free(struct tfs_writer *w);

/**
 * Declare an event kind; the description is copied.
 * @param kind_out  the kind's id, used in tfs_wstream_append()
 * Kinds are declared before the first stream unless the writer was made with late_kinds.
 * @return 0, -EINVAL (too many args, STR type without STR encoding, bad enum, name too
 *         long or with a NUL; streams exist and late_kinds is off) or -ENOMEM
 */
int tfs_writer_add_kind(struct tfs_writer *w, const struct tfs_kind_desc *kind,
			uint32_t *kind_out);

/** Set a metadata string (program, cmdline, host...). Replaces. @return 0 or -ENOMEM */
int tfs_writer_set_meta(struct tfs_writer *w, const char *key, const char *value);

/**
 * Open the stream of (@rank, @thread). The stream belongs to the writer.
 * Not thread-safe against other writer calls; afterwards each stream may be appended to
 * by one thread while other threads append to other streams.
 * @return 0, -EEXIST (that stream exists) or -ENOMEM
 */
int tfs_writer_stream_new(struct tfs_writer *w, uint32_t rank, uint32_t thread,
			  struct tfs_wstream **out);

/**
 * Append one event. @args holds exactly the kind's n_args values. Times are in
 * nanoseconds from any fixed origin (the trace's start is customary).
 * A RANK argument is an absolute rank: >= 0 for a process (stored relative to the
 * stream's rank), or negative for a special value stored as is (MPI_PROC_NULL...).
 * An RVAL argument is tfs_rval(value, ranked).
 * @return 0, -EINVAL (unknown kind, string too long, a RANK argument outside
 *         [-2^62, 2^62), an RVAL value outside [-2^61, 2^61)) or -ENOMEM (event not added)
 */
int tfs_wstream_append(struct tfs_wstream *s, uint32_t kind, uint64_t ts_ns, uint64_t dur_ns,
		       const union tfs_arg *args);

/** Events appended to @s so far. */
uint64_t tfs_wstream_n_events(const struct tfs_wstream *s);

/**
 * Record a phase: events [@first_event, @first_event + @n_events) of stream (rank, thread).
 * @return 0, -ENOENT (no such stream), -EINVAL (range past the stream's end) or -ENOMEM
 */
int tfs_writer_add_phase(struct tfs_writer *w, const char *name, uint32_t rank,
			 uint32_t thread, uint64_t first_event, uint64_t n_events);

/**
 * Write the trace to @path (a temporary file renamed into place, so a reader never sees a
 * partial trace). Call once: afterwards the writer can only be freed.
 * @return 0, -EALREADY (saved before), -errno from the file system or -ENOMEM (the sticky
 *         error of a stream whose append failed half-way included)
 */
int tfs_writer_save(struct tfs_writer *w, const char *path);

/**
 * Add backtrace `stack#@id` of @rank: @n_frames code addresses, outermost first (the thread's
 * entry first, the allocating call last). Ids of one rank are dense and given in order 0, 1,
 * 2...; events refer to a backtrace through a TFS_ENC_SYM argument of class "stack". Stored
 * in the rank's `backtraces` section (FORMAT.md §10); kept in memory until save, coded
 * against the previous backtrace's common prefix. A rank needs no stream. Not thread-safe
 * against other writer calls.
 * @return 0, -EINVAL (@id out of order, @n_frames > 1024, NULL @frames with @n_frames > 0,
 *         or after save) or -ENOMEM (nothing added)
 */
int tfs_writer_add_backtrace(struct tfs_writer *w, uint32_t rank, uint64_t id,
			     const uint64_t *frames, uint32_t n_frames);

/**
 * Symbolise code address @addr of @rank: @n source frames, outermost first (the function
 * containing @addr, then each function inlined into it down to the innermost). Strings are
 * copied (each distinct string is stored once per rank, FORMAT.md §11). Each address at
 * most once per rank; a trace reads without the original binaries. Not thread-safe against
 * other writer calls.
 * @return 0, -EEXIST (@addr already symbolised), -EINVAL (@n is 0 or over 64, a NULL or
 *         over-long (> 65535 bytes) string, or after save) or -ENOMEM (the symbol is not
 *         added)
 */
int tfs_writer_add_symbol(struct tfs_writer *w, uint32_t rank, uint64_t addr,
			  const struct tfs_src_frame *frames, uint32_t n);

/**
 * Name symbolic id @id of class @sym_class at @rank (FORMAT.md §12): a file id's path
 * (`/etc/passwd`, `pipe:[123]`, `tcp:127.0.0.1:5432`). Views print the name wherever an
 * argument flagged TFS_ARG_ATTACH carries that id (`read(fd=3</etc/passwd>, ...)`), and
 * readers list a rank's names (tfs_trace_names_dup()). Call it once per id, at any time
 * before save; a later call for the same (rank, class, id) replaces the name. The name is
 * copied. Ranks with equal names share one table in the file, so a job whose ranks opened
 * the same files costs one table. A rank needs no stream. Not thread-safe against other
 * writer calls.
 * @param sym_class  1 to 255 bytes of printable ASCII without space, '"' or '\' ("file")
 * @param id         not TFS_SYM_NONE
 * @param name       1 to 65,535 bytes, NUL-terminated
 * @return 0, -EINVAL (a bad class, id or name, or after save) or -ENOMEM (nothing changed)
 */
int tfs_writer_set_name(struct tfs_writer *w, uint32_t rank, const char *sym_class, uint64_t id,
			const char *name);

/**
 * Write the trace to memory instead of a file (same bytes as tfs_writer_save()). Call once:
 * afterwards the writer can only be freed.
 * @param out  a new malloc'ed buffer of *@len bytes, the caller frees it
 * @return 0, -EALREADY or -ENOMEM
 */
int tfs_writer_save_mem(struct tfs_writer *w, void **out, size_t *len);

/**
 * The save does not recompress (values_save_level), whatever its size. For a caller that
 * saves several traces, as a recording of many processes does: TFS_VALUES_SAVE_MAX_EVENTS
 * bounds the recompression of all of them together, not of each.
 */
void tfs_writer_skip_recompress(struct tfs_writer *w);

/**
 * The save recompresses (values_save_level) at @level at most, and not at all unless @level
 * is above the level value blocks are made at (3); @level <= 0: no cap. For a caller that
 * saves several traces: a recording of many processes recompresses its children at 9, which
 * keeps about 40% of level 16's gain (make's cc1s) for a sixth of its instructions.
 */
void tfs_writer_cap_recompress(struct tfs_writer *w, int level);

/**
 * The saved trace is only an input to tfs_merge_traces_opts() with rewrite_grammars set:
 * the sections such a merge rewrites (tables, grammars, patches, the section table) are
 * compressed at a fast level, those it copies as stored (values, backtraces, symbols) as
 * always. The trace reads the same, only larger until merged. As a recording of many
 * processes saves each one.
 */
void tfs_writer_merge_input(struct tfs_writer *w);

/**
 * Write @len bytes (a trace made in memory: tfs_writer_save_mem(), tfs_merge_traces()) to
 * @path as tfs_writer_save() writes a file: through a temporary file in the same directory,
 * synced and renamed over @path, so that a reader sees the old file or the whole new one,
 * never a part. The file gets mode 0644. Thread-safe.
 * @return 0, or -errno from the file system (@path is then unchanged and no temporary file
 *         is left behind) or -ENOMEM
 */
int tfs_file_write(const char *path, const void *data, size_t len);

/**
 * Reserve @path for a trace saved later, perhaps by another process (an MPI rank's, saved by
 * a process that outlives the job): @path becomes an empty file, made under a hidden
 * temporary name, locked (flock(2), exclusive) and renamed into place, so that it appears
 * already locked. tfs_trace_open() of it returns -EBUSY while the lock is held: the trace is
 * still being saved. Save with tfs_file_write() (or tfs_writer_save()), which replaces it,
 * then tfs_file_release(). The lock belongs to the open file: processes forked meanwhile
 * share it until each has closed the descriptor (close-on-exec). Thread-safe.
 * @return a descriptor holding the lock (>= 0), or -errno (@path is then unchanged)
 */
int tfs_file_reserve(const char *path);

/**
 * End a reservation: when @path still names the empty file @fd reserved (nothing was saved
 * over it), it is removed; then @fd is closed, and the lock released with its last copy.
 * @fd: from tfs_file_reserve(), or -1 (nothing is done).
 */
void tfs_file_release(int fd, const char *path);

#ifdef __cplusplus
}
#endif
#endif
