/*
 * Builds small traces for the codec tests through the public writer API: a schema with
 * every argument encoding, and streams whose events the test keeps so it can compare what
 * the reader returns with what was written.
 */
#ifndef TFS_TRACEGEN_H
#define TFS_TRACEGEN_H

#include <stdint.h>

#include "tfs/writer.h"

enum { TG_ZONE, TG_PWRITE, TG_SEND, TG_MALLOC, TG_NKINDS };

struct tg_event {
	uint32_t kind;
	uint64_t ts, dur;
	union tfs_arg args[4];
	uint32_t n_args;
};

struct tg_stream {
	uint32_t rank, thread;
	uint64_t n;
	struct tg_event *ev;
};

/* Declare the test schema on @w; kind ids are TG_* in order. */
int tg_declare(struct tfs_writer *w);
/*
 * Fill @s with @n events: loops with strided offsets and jittered times when @regular, or
 * irregular random calls, from @seed. Zone names come from a fixed set of strings.
 */
int tg_fill(struct tg_stream *s, uint64_t n, int regular, uint64_t seed);
void tg_free(struct tg_stream *s);
/* Append all of @s to a new writer stream. */
int tg_write(struct tfs_writer *w, const struct tg_stream *s);

#endif
