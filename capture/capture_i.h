/*
 * Internal interfaces between the parts of libtfscapture: the producer (capture.c), the
 * in-process consumer thread (inproc.c) and the consumer (consumer.c, also linked into
 * `tracefs record`). Not installed; the public API is include/tfs/capture.h.
 */
#ifndef TFS_CAPTURE_I_H
#define TFS_CAPTURE_I_H

#include <stdint.h>

struct spool;

/* A timing mode as given to `tracefs record --timing` or TFS_TIMING. */
struct cap_timing {
	int timing;	/* enum tfs_timing */
	double rel_err; /* lossy only */
};

/*
 * Parse "lossless", "none" or "lossy:<rel_err>" (NULL or "" is lossless).
 * @return 0 or -EINVAL
 */
int cap_parse_timing(const char *s, struct cap_timing *out);

/* The calling thread never records (it is the capture's own consumer thread). */
void cap_thread_exclude(void);

/* In-process mode: start the consumer thread over @s. @return 0 or -errno */
int cap_inproc_start(struct spool *s, const struct cap_timing *tm);
/* Wait (up to a second) until the consumer has taken in every chunk handed over so far. */
void cap_inproc_flush(void);
/* At exit: stop the consumer thread, take in everything left, save the trace. */
void cap_inproc_finish(uint64_t dropped_early);

#endif
