/*
 * Values patches (FORMAT.md §8.1): the few residual words by which a stream's values
 * differ from the values section it shares with another stream of the same grammar.
 * Coded in the stream table, each word predicted from the same word of the previous two
 * streams patching that section. Not thread-safe; lists are plain owned arrays.
 */
#ifndef TFS_VPATCH_I_H
#define TFS_VPATCH_I_H

#include <stdbool.h>
#include <stdint.h>

#include "bytes_i.h"
#include "values_i.h"

/* Most patch entries of one stream (writers patch far fewer: see wsave.c). */
#define VPATCH_MAX (1u << 20)

/* A stream's patches, sorted by (block, col, index), strictly increasing. */
struct vpatch_list {
	struct vpatch *e;
	uint32_t n;
};

void vpatch_list_fini(struct vpatch_list *l);

/*
 * The words by which @own differs from @base, at most @max of them. @out is new.
 * @return 0, -E2BIG (more than @max, or the sections differ in shape: they cannot share),
 *         or -ENOMEM
 */
int vpatch_diff(const struct tfs_vsec *base, const struct tfs_vsec *own, uint32_t max,
		struct vpatch_list *out);

/*
 * Code / decode one stream's list; @p1 and @p2 are the lists of the previous two streams
 * patching the same section (most recent first), NULL when there are fewer.
 * vpatch_read: @l is new; @return 0, -TFS_ECORRUPT (via @r's diag) or -ENOMEM
 */
int vpatch_write(struct tfs_buf *out, const struct vpatch_list *l, const struct vpatch_list *p1,
		 const struct vpatch_list *p2);
int vpatch_read(struct tfs_rd *r, struct vpatch_list *l, const struct vpatch_list *p1,
		const struct vpatch_list *p2);

#endif
