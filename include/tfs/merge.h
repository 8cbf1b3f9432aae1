/*
 * Merging traces: several traces (separately recorded processes, or the ranks of one MPI
 * job gathered at MPI_Finalize) become one trace whose ranks are the inputs' ranks one after
 * the other. Call-signature tables are merged and terminals renumbered, so streams that did
 * the same thing get identical grammars, stored once. RANK arguments keep their absolute
 * values: they are re-based on each stream's new rank (Pilgrim's relative ranks). Backtraces,
 * symbols, names (file paths), phases and metadata travel with their ranks. This API does no
 * I/O of its own beyond what the caller hands it.
 */
#ifndef TFS_MERGE_H
#define TFS_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "tfs/tfs.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tfs_trace;

/**
 * Merge @n open traces into one trace in memory: input i's rank k becomes rank
 * (sum of the ranks of inputs 0..i-1) + k, its streams and phases follow input i-1's.
 * Inputs must share a timing mode (else -EINVAL); their schemas may differ (kinds are
 * matched by their whole description). The same trace may be given several times.
 *
 * Metadata comes from input 0. A key `<key>.rank<R>` holds the value of `<key>` from rank R
 * on, up to the next such key (tfs_trace_meta_rank() reads it): a key of input i whose
 * value differs from the one in force at the previous rank is stored as `<key>.rank<R>` for
 * the first rank R of input i, and input i's own `<key>.rank<R>` keys are re-based to
 * `<key>.rank<R + first rank>`. So merging merged traces pairwise (MPI at MPI_Finalize)
 * gives the same values per rank as merging all inputs at once.
 *
 * Sections whose content does not change (values, backtraces and symbols sections, grammars
 * whose terminals keep their numbers) are copied as stored after their whole checksum is
 * checked, and equal ones are stored once; renumbered grammars and vpatch sections (which
 * name the values section they patch) are written anew. Each input rank's backtraces and
 * symbols stay with it, and so do its names: ranks whose names are equal, in any inputs,
 * share one table of the output (FORMAT.md §12). Inputs are only read: several merges may
 * share them. Time and memory are linear in the inputs' tables, stream counts and the
 * output's size.
 *
 * @param out  a new malloc'ed buffer of *@len bytes (a complete trace file), caller frees
 * @return 0, -EINVAL (n == 0, mixed timing, too many ranks, a rank argument or metadata
 *         key out of range once re-based; diag filled), -TFS_ECORRUPT (a section of an
 *         input fails its checksum; diag filled, its reason starts with "input <i>: " and
 *         its offset is in that input) or -ENOMEM
 */
int tfs_merge_traces(struct tfs_trace *const *in, uint32_t n, void **out, size_t *len,
		     struct tfs_diag *diag);

/** Options of tfs_merge_traces_opts(). Zeroed: tfs_merge_traces(). */
struct tfs_merge_opts {
	/**
	 * NULL-terminated metadata keys whose value comes from input 0 only: the other inputs'
	 * values (and `<key>.rank<R>` keys) are dropped. MPI drops `pid` and `start_time` so
	 * that a job's trace does not grow with its number of ranks.
	 */
	const char *const *first_only_keys;
	/**
	 * Non-zero: every grammar is compressed anew, also where its terminals keep their
	 * numbers (otherwise copied as stored). For inputs saved with tfs_writer_merge_input(),
	 * whose grammars are stored fast.
	 */
	int rewrite_grammars;
};

/** tfs_merge_traces() with @opts (may be NULL). */
int tfs_merge_traces_opts(struct tfs_trace *const *in, uint32_t n,
			  const struct tfs_merge_opts *opts, void **out, size_t *len,
			  struct tfs_diag *diag);

#ifdef __cplusplus
}
#endif
#endif
