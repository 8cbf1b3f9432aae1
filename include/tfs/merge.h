/*
 * Merging traces: several traces (separately recorded processes, or the ranks of one MPI
 * job gathered at MPI_Finalize) become one trace whose ranks are the inputs' ranks one after
 * the other. Call-signature tables are merged and terminals renumbered, so streams that did
 * the same thing get identical grammars, stored once. RANK arguments keep their absolute
 * values: they are re-based on each stream's new rank (Pilgrim's relative ranks). Backtraces,
 * symbols, phases and metadata travel with their ranks. This API does no I/O of its own
 * beyond what the caller hands it.
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
 * (sum of the ranks of inputs 0..i-1) + k. Inputs must share a timing mode (else -EINVAL).
 * Metadata comes from input 0; a key whose value differs elsewhere is stored as
 * `<key>.rank<R>` for the first rank R of that input.
 * @param out  a new malloc'ed buffer of *@len bytes (a complete trace file), caller frees
 * @return 0, -EINVAL (n == 0, mixed timing, too many ranks), -TFS_ECORRUPT (an input, diag
 *         filled) or -ENOMEM
 */
int tfs_merge_traces(struct tfs_trace *const *in, uint32_t n, void **out, size_t *len,
		     struct tfs_diag *diag);

#ifdef __cplusplus
}
#endif
#endif
