/*
 * The consumer: turns the raw records of a spool (spool_i.h) into codec writer streams, one
 * per producing thread, and saves the trace. Used by the in-process consumer thread
 * (inproc.c) and by `tracefs record` (recording.c, recprocs.c). One consumer per spool; its
 * functions are not thread-safe against each other. It does not start or watch processes.
 * Its statistics are struct tfs_recording_stats (tfs/recording.h), which a recording sums.
 */
#ifndef TFS_CONSUMER_I_H
#define TFS_CONSUMER_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfs/recording.h"
#include "capture_i.h"
#include "spool_i.h"

struct cap_consumer;

/*
 * A consumer over @s (borrowed, must outlive it) writing with @tm's timing.
 * @return 0, -EINVAL (timing) or -ENOMEM
 */
int cap_consumer_new(struct spool *s, const struct cap_timing *tm, struct cap_consumer **out);
void cap_consumer_free(struct cap_consumer *c);

/*
 * Take in every chunk producers have handed over and recycle it. Call repeatedly while
 * they run. @return chunks taken in, or -errno (a writer error; sticky)
 */
int cap_consumer_poll(struct cap_consumer *c);

/*
 * After the producers have stopped (exited, died, or stopped recording): take in
 * everything left, including chunks handed over by nobody, up to their last complete
 * record; end open zones and phases. Call once, then save. @return 0 or -errno
 */
int cap_consumer_finish(struct cap_consumer *c);

/* Metadata of the trace (program, cmdline, exit...). @return 0 or -ENOMEM */
int cap_consumer_set_meta(struct cap_consumer *c, const char *key, const char *value);

/*
 * The customary metadata: program, cmdline, pid, capture (@mode: "record", "in-process"),
 * start_time (the spool's creation, RFC 3339), host, tracefs_version. @return 0 or -ENOMEM
 */
int cap_consumer_set_common_meta(struct cap_consumer *c, const char *program,
				 const char *cmdline, long pid, const char *mode);

/* Write the trace (after cap_consumer_finish). @return 0 or -errno */
int cap_consumer_save(struct cap_consumer *c, const char *path);

/* Write the trace into a new malloc'ed buffer (after cap_consumer_finish). @return 0 or -errno */
int cap_consumer_save_mem(struct cap_consumer *c, void **out, size_t *len);

/* The save does not recompress its values (tfs_writer_skip_recompress()). */
void cap_consumer_skip_recompress(struct cap_consumer *c);

/* The save recompresses at @level at most (tfs_writer_cap_recompress()). */
void cap_consumer_cap_recompress(struct cap_consumer *c, int level);

/* The save is only an input to a merge (tfs_writer_merge_input()). */
void cap_consumer_merge_input(struct cap_consumer *c);

/* @c's statistics so far. */
void cap_consumer_stats(const struct cap_consumer *c, struct tfs_recording_stats *st);

#endif
