/*
 * The consumer: turns the raw records of a spool (spool_i.h) into codec writer streams, one
 * per producing thread, and saves the trace. Used by the in-process consumer thread
 * (inproc.c) and by `tracefs record` (fs/cmd_record.c). One consumer per spool; its
 * functions are not thread-safe against each other. It does not start or watch processes.
 */
#ifndef TFS_CONSUMER_I_H
#define TFS_CONSUMER_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture_i.h"
#include "spool_i.h"

struct cap_consumer;

struct cap_consumer_stats {
	uint64_t n_events;	   /* trace events appended */
	uint64_t n_records;	   /* raw records read */
	uint64_t n_chunks;	   /* chunks read (each once) */
	uint64_t n_partial_chunks; /* chunks still being filled when the producer stopped */
	uint64_t n_partial_events; /* events that came from those */
	uint64_t dropped_events;   /* the producer's count */
	uint64_t wait_ns;	   /* time producing threads waited for a free chunk, summed */
	uint32_t n_stalls;	   /* waits given up: the consumer freed nothing for the limit */
	uint64_t bad_records;	   /* malformed or unmatched records skipped */
	uint32_t n_threads;	   /* producing threads seen */
	uint32_t open_zones;	   /* zones still open at the end (zone_unfinished events) */
	uint32_t open_phases;	   /* phases still open at the end (closed there) */
	uint64_t n_stacks;	   /* distinct allocation backtraces */
	uint64_t n_addrs;	   /* distinct code addresses in them */
	uint64_t n_named_addrs;	   /* of those, symbolised with a function name */
};

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

void cap_consumer_stats(const struct cap_consumer *c, struct cap_consumer_stats *st);

#endif
