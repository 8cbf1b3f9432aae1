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
#include "tfs/merge.h"
#include "tfs/reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HDR_LEN 40 /* FORMAT.md §1 */
#define ENT_LEN 48 /* FORMAT.md §2 */
#define MAX_FIX_SECTIONS 4096

/* Recompute crc_all, crc_hd, tbl_crc and hdr_crc where they lie in bounds. */
static void fix_crcs(uint8_t *p, size_t size)
{
	uint64_t table_off, n_sect;

	if (size < HDR_LEN)
		return;
	table_off = le_get64(p + 16);
	n_sect = le_get32(p + 24);
	if (n_sect <= MAX_FIX_SECTIONS && table_off <= size &&
	    n_sect * ENT_LEN <= size - table_off) {
		for (uint64_t i = 0; i < n_sect; i++) {
			uint8_t *e = p + table_off + i * ENT_LEN;
			uint64_t off = le_get64(e + 8), stored = le_get64(e + 16);
			uint64_t head = le_get64(e + 40);

			if (off > size || stored > size - off)
				continue;
			le_put32(e + 32, crc32c(p + off, stored));
			if (head <= stored)
				le_put32(e + 36, crc32c(p + off, head));
		}
		le_put32(p + 28, crc32c(p + table_off, n_sect * ENT_LEN));
	}
	le_put32(p + 32, crc32c(p, 32));
}

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
	if (size >= HDR_LEN) {
		fix_crcs(copy, size);
		if (memcmp(copy, data, size) != 0)
			run_one(copy, size);
	}
	free(copy);
	return 0;
}
