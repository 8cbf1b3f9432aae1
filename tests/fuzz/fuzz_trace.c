/*
 * libFuzzer target for the whole reader: the input is a trace file. It is opened through
 * a memfd (tfs_trace_open() takes a path), verified, and (whatever verify said) every
 * stream's views are read at a few offsets through cursors; phases, a few backtraces of each
 * rank and their frames' symbols, each rank's file names, and the first rules of each
 * stream's grammar as replay and compare walk them are read too, and what grep reads: shapes
 * by rank and the first lines of a set of terminals. Each input runs
 * twice: as is, and with every CRC of the header and section table recomputed, since
 * otherwise almost every mutation stops at the first checksum. Work per input is bounded (a
 * few reads of a few KiB per stream) so the fuzzer explores structure, not long decodes.
 * Errors are expected; crashes, sanitizer reports and leaks are the findings.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bytes_i.h"
#include "crc32c_i.h"
#include "fix_crcs.h"
#include "tfs/reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_STREAMS 16
#define MAX_PHASES 16
#define MAX_RANKS 16
#define MAX_FRAMES 64
#define READ_LEN 4096
#define MAX_BLOCKS 4
#define MAX_RULES 64
#define MAX_ELEMS 64

static void read_view(struct tfs_trace *t, uint32_t stream, int view, uint64_t first, uint64_t n,
		      char *buf)
{
	struct tfs_diag diag;
	struct tfs_cursor *c;
	struct tfs_event ev;
	uint64_t size, offs[4];

	if (tfs_cursor_new(t, stream, view, first, n, &c) < 0)
		return;
	size = tfs_cursor_size(c);
	offs[0] = 0;
	offs[1] = size / 2;
	offs[2] = size > 100 ? size - 100 : 0;
	offs[3] = offs[1] / 3;
	for (int i = 0; i < 4; i++) {
		if (tfs_cursor_pread(c, buf, READ_LEN, offs[i], &diag) < 0)
			break;
	}
	/* reading on from the previous read is the sequential path */
	(void)tfs_cursor_pread(c, buf, READ_LEN, offs[3] + READ_LEN, &diag);
	if (n > 0) {
		(void)tfs_cursor_event(c, first, &ev, &diag);
		(void)tfs_cursor_event(c, first + n - 1, &ev, &diag);
	}
	tfs_cursor_free(c);
}

static volatile size_t sink;

/* The file names of rank @r (FORMAT.md §12), each looked up again by its id. */
static void read_names(struct tfs_trace *t, uint32_t r)
{
	struct tfs_name *all;
	const char *name;
	size_t n;

	if (tfs_trace_names_dup(t, r, "file", &all, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		if (tfs_trace_name(t, r, "file", all[i].id, &name) < 0 || name != all[i].name)
			abort();
		sink += strlen(name);
	}
	free(all);
}

/* A few backtraces of each rank, first and last, and the symbols of their frames. */
static void read_stacks(struct tfs_trace *t, uint32_t n_ranks)
{
	struct tfs_diag diag;

	for (uint32_t r = 0; r < n_ranks && r < MAX_RANKS; r++) {
		uint64_t n_bt = tfs_trace_n_backtraces(t, r);
		uint64_t ids[3] = {0, n_bt / 2, n_bt ? n_bt - 1 : 0};

		for (int i = 0; i < 3; i++) {
			const struct tfs_src_frame *src;
			const uint64_t *frames;
			uint32_t n, ns;

			if (tfs_trace_backtrace(t, r, ids[i], &frames, &n, &diag) < 0)
				continue;
			for (uint32_t f = 0; f < n && f < MAX_FRAMES; f++) {
				if (tfs_trace_symbol(t, r, frames[f], &src, &ns, &diag) < 0)
					continue;
				/* touch every string: the sanitizers check they lie in bounds */
				for (uint32_t k = 0; k < ns; k++)
					sink += strlen(src[k].function) + strlen(src[k].file);
			}
		}
		/* a rank's symbols are read even when it has no backtraces */
		{
			const struct tfs_src_frame *src;
			uint32_t ns;

			(void)tfs_trace_symbol(t, r, 0x401000, &src, &ns, &diag);
		}
		read_names(t, r);
	}
}

/* The grammar of @stream as fs/vreplay_walk.c and `tracefs compare` walk it: blocks, rules
 * and elements, each within the bounds the reader promised (a rule's elements name lower
 * rules of its block or terminals of the table). */
static void walk_grammar(struct tfs_trace *t, uint32_t stream, uint32_t n_terminals)
{
	struct tfs_grammar_info gi;
	struct tfs_block_info bi;
	struct tfs_rule_info ri;

	if (tfs_trace_grammar_info(t, stream, &gi) < 0)
		return;
	if (gi.same_as > stream)
		abort();
	for (uint32_t b = 0; b < gi.n_blocks && b < MAX_BLOCKS; b++) {
		if (tfs_trace_block(t, stream, b, &bi) < 0)
			abort();
		for (uint32_t r = 0; r < bi.n_rules && r < MAX_RULES; r++) {
			struct tfs_rule_elem e;

			if (tfs_trace_rule(t, stream, b, r, &ri) < 0)
				abort();
			for (uint32_t i = 0; i < ri.n_elems && i < MAX_ELEMS; i++) {
				if (tfs_trace_rule_elem(t, stream, b, r, i, &e) < 0 || !e.count ||
				    (e.is_rule ? e.id >= r : e.id >= n_terminals))
					abort();
			}
			if (tfs_trace_rule_elem(t, stream, b, r, ri.n_elems, &e) != -ENOENT)
				abort();
		}
		if (tfs_trace_rule(t, stream, b, bi.n_rules, &ri) != -ENOENT)
			abort();
	}
	if (tfs_trace_block(t, stream, gi.n_blocks, &bi) != -ENOENT)
		abort();
}

/* What `tracefs grep` reads: each terminal's shape as @rank prints it, and the first lines
 * of every other terminal (a cursor over a set of terminals), each a whole line. */
static void read_terms(struct tfs_trace *t, uint32_t stream, uint32_t rank, uint64_t n_events,
		       uint32_t n_terminals, char *buf)
{
	uint8_t *set = calloc((size_t)n_terminals + 1, 1);
	struct tfs_cursor *c;
	struct tfs_line l;

	if (!set)
		return;
	for (uint32_t term = 0; term < n_terminals; term++) {
		set[term] = term % 2 == 0;
		if (term < MAX_RULES)
			sink += (size_t)tfs_trace_term_shape_rank(t, term, rank, buf, READ_LEN);
	}
	if (tfs_cursor_new_terms(t, stream, set, TFS_VIEW_TEXT, 0, n_events, &c) == 0) {
		for (int i = 0; i < 8 && tfs_cursor_next_line(c, &l, NULL) == 1; i++)
			if (!l.len || l.text[l.len - 1] != '\n' || l.term >= n_terminals ||
			    !set[l.term] || l.index >= n_events)
				abort();
		tfs_cursor_free(c);
	}
	free(set);
}

static void read_trace(struct tfs_trace *t, char *buf)
{
	struct tfs_trace_info ti;
	struct tfs_diag diag;

	/* reads go on after a failed verify: they must refuse the same damage safely */
	(void)tfs_trace_verify(t, &diag);
	tfs_trace_get_info(t, &ti);
	for (uint32_t s = 0; s < ti.n_streams && s < MAX_STREAMS; s++) {
		struct tfs_stream_info si;

		if (tfs_trace_stream(t, s, &si) < 0)
			continue;
		for (int v = 0; v < TFS_VIEW_COUNT; v++)
			read_view(t, s, v, 0, si.n_events, buf);
		walk_grammar(t, s, ti.n_terminals);
		read_terms(t, s, si.rank, si.n_events, ti.n_terminals, buf);
	}
	for (uint32_t p = 0; p < ti.n_phases && p < MAX_PHASES; p++) {
		struct tfs_phase_info pi;

		if (tfs_trace_phase(t, p, &pi) == 0)
			read_view(t, pi.stream, TFS_VIEW_TEXT, pi.first_event, pi.n_events, buf);
	}
	for (uint32_t k = 0; k < ti.n_kinds; k++) {
		struct tfs_kind_desc kd;

		(void)tfs_trace_kind(t, k, &kd);
	}
	read_stacks(t, ti.n_ranks);
}

static void run_one(const uint8_t *data, size_t size)
{
	static char buf[READ_LEN];
	struct tfs_diag diag;
	struct tfs_trace *t;
	char path[64];
	int fd;

	fd = memfd_create("fuzz_trace", MFD_CLOEXEC);
	if (fd < 0)
		abort();
	if (size > 0 && write(fd, data, size) != (ssize_t)size)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (tfs_trace_open(path, &t, &diag) == 0) {
		read_trace(t, buf);
		tfs_trace_close(t);
	}
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *fixed;

	run_one(data, size);
	if (size < FIX_HDR_LEN)
		return 0;
	fixed = malloc(size);
	if (!fixed)
		abort();
	memcpy(fixed, data, size);
	fix_crcs(fixed, size);
	if (memcmp(fixed, data, size) != 0)
		run_one(fixed, size);
	free(fixed);
	return 0;
}
