/*
 * The processes of one `tracefs record` (recprocs.c): the first process's spool and
 * consumer plus one per forked or spawned process, found as they appear in the recording's
 * directory, consumed, and merged into one trace with a rank per process. Used by
 * recording.c only.
 */
#ifndef TFS_RECPROCS_I_H
#define TFS_RECPROCS_I_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "capture_i.h"
#include "consumer_i.h"
#include "spool_i.h"

struct rec_procs;
struct tfs_recording_opts;

/*
 * Track the first process recording into spool @s at @path (@pid: the program the recorder
 * started; see rec_procs_first_pid), in the recording's
 * directory, with consumer @c (borrowed: the caller frees them); the other processes'
 * consumers write with timing @tm; @o gives the recorder's voice and how a merged trace is
 * saved (@tm and @o borrowed). @return 0 or -ENOMEM
 */
int rec_procs_new(struct spool *s, struct cap_consumer *c, const char *path, uint32_t pid,
		  const struct cap_timing *tm, const struct tfs_recording_opts *o,
		  struct rec_procs **out);
/* Free the other processes' consumers and traces, unmap and remove their spools. Accepts NULL. */
void rec_procs_free(struct rec_procs *ps);
/*
 * Take in the spools that appeared since; @final: the last pass (every process has ended):
 * retire each at once, warn about bad ones.
 */
void rec_procs_scan(struct rec_procs *ps, bool final);
/*
 * Poll every consumer; retire the processes that have ended (trace saved in memory, spool
 * removed). @return chunks taken in, or -errno
 */
int rec_procs_poll(struct rec_procs *ps);
/* The recorder reaped @pid with wait status @status. */
void rec_procs_reaped(struct rec_procs *ps, pid_t pid, int status);
/* Nobody reaps the processes any more: a process has ended once /proc says so. */
void rec_procs_orphaned(struct rec_procs *ps);
/* Every process known, the first one included, has ended (rec_procs_orphaned). */
bool rec_procs_all_gone(struct rec_procs *ps);
uint32_t rec_procs_count(const struct rec_procs *ps);
/*
 * The first process's pid: the process that took the first spool, which is the program
 * the recorder started unless that program records nothing (a static launcher): then the
 * first process it started that took it. The program's pid until one has.
 */
uint32_t rec_procs_first_pid(struct rec_procs *ps);
/* Sum of every consumer's statistics. */
void rec_procs_stats(const struct rec_procs *ps, struct tfs_recording_stats *sum);
/*
 * Every process has ended: retire the others, last scan (the caller finishes the first
 * one's consumer), order them along the fork tree, warn about the processes that could
 * not record. @return 0 or -errno
 */
int rec_procs_finish(struct rec_procs *ps);
/*
 * The first process's metadata: `end`, how it ended (its wait status, when the recorder
 * reaped it; else what is known), `ppid` (the recorder, or the untraced launcher it ran),
 * and `image` and `images` (the programs it ran, "sh -> cc1"). Before its consumer saves,
 * whether it is the only process or not. @return 0 or -ENOMEM
 */
int rec_procs_first_meta(struct rec_procs *ps);
/* Save every process's trace in memory and write their merge to @out. @return 0 or -errno */
int rec_procs_save(struct rec_procs *ps, const char *out);

#endif
