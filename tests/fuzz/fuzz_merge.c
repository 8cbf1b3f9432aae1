/*
 * libFuzzer target for tfs_trace_open_mem() and tfs_merge_traces(): the input is a trace
 * opened in place from memory (as is, and with its CRCs recomputed so mutations get past the
 * checksums). A trace that opens is merged with itself and with an empty-metadata copy of
 * itself; a merge that succeeds must give a trace that opens again, and merging that with
 * the input must succeed too (pairwise rounds). Errors are expected; crashes, sanitizer
 * reports, leaks and merged traces that do not open are the findings.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bytes_i.h"
#include "crc32c_i.h"
#include "fix_crcs.h"
#include "tfs/merge.h"
#include "tfs/reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


static void run_one(const uint8_t *data, size_t size)
{
	struct tfs_trace *t, *m, *in[3];
	struct tfs_diag diag;
	void *buf, *buf2;
	size_t len, len2;

	if (tfs_trace_open_mem(data, size, &t, &diag) < 0)
		return;
	in[0] = in[1] = in[2] = t;
	if (tfs_merge_traces(in, 2, &buf, &len, &diag) == 0) {
		if (tfs_trace_open_mem(buf, len, &m, &diag) < 0)
			abort(); /* a merge must write what the reader reads */
		in[1] = m;
		if (tfs_merge_traces(in, 2, &buf2, &len2, &diag) == 0) {
			struct tfs_trace *m2;

			if (tfs_trace_open_mem(buf2, len2, &m2, &diag) < 0)
				abort();
			tfs_trace_close(m2);
			free(buf2);
		}
		tfs_trace_close(m);
		free(buf);
	}
	tfs_trace_close(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1);

	if (!copy)
		abort();
	memcpy(copy, data, size);
	run_one(copy, size);
	if (size >= FIX_HDR_LEN) {
		fix_crcs(copy, size);
		if (memcmp(copy, data, size) != 0)
			run_one(copy, size);
	}
	free(copy);
	return 0;
}
