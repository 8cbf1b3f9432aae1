/*
 * bt_dump: the allocation backtraces of a trace through the reader API, for
 * check_backtrace.py. One line per event that has a `stack` argument, streams in order:
 *
 *   T<thread> <kind> <size> <stack id> | <function> <file>:<line> > ... (outermost first)
 *
 * <size> is the event's `size` argument (calloc: nmemb * size), each code address of the
 * backtrace expands to its source frames (inlined functions included). With --raw each
 * frame is its code address instead (0x...), with --kinds it prints each event kind:
 * "<name>: <arg> <arg> ...".
 *
 *   bt_dump [--kinds | --raw] TRACE
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tfs/reader.h"
#include "tfs/writer.h"

static int fail(const char *what, int rc, const struct tfs_diag *diag)
{
	fprintf(stderr, "bt_dump: %s: %s (%s)\n", what, strerror(-rc),
		diag && diag->reason[0] ? diag->reason : "-");
	return 1;
}

static int arg_index(const struct tfs_kind_desc *k, const char *name)
{
	for (uint32_t i = 0; i < k->n_args; i++)
		if (!strcmp(k->args[i].name, name))
			return (int)i;
	return -1;
}

static int print_kinds(struct tfs_trace *t)
{
	struct tfs_trace_info ti;
	struct tfs_kind_desc k;

	tfs_trace_get_info(t, &ti);
	for (uint32_t i = 0; i < ti.n_kinds; i++) {
		if (tfs_trace_kind(t, i, &k) < 0)
			return 1;
		printf("%s:", k.name);
		for (uint32_t a = 0; a < k.n_args; a++)
			printf(" %s", k.args[a].name);
		printf("\n");
	}
	return 0;
}

static bool g_raw; /* --raw */

static int print_stack(struct tfs_trace *t, uint32_t rank, uint64_t id)
{
	struct tfs_diag diag = {0};
	const uint64_t *frames;
	uint32_t n;
	int rc = tfs_trace_backtrace(t, rank, id, &frames, &n, &diag);

	if (rc < 0)
		return fail("backtrace", rc, &diag);
	printf(" |");
	for (uint32_t i = 0; i < n; i++) {
		const struct tfs_src_frame *src;
		uint32_t n_src;

		if (g_raw) {
			printf(" 0x%" PRIx64, frames[i]);
			continue;
		}
		rc = tfs_trace_symbol(t, rank, frames[i], &src, &n_src, &diag);
		if (rc == -ENOENT) {
			printf("%s 0x%" PRIx64 " ?:0", i ? " >" : "", frames[i]);
			continue;
		}
		if (rc < 0)
			return fail("symbol", rc, &diag);
		for (uint32_t j = 0; j < n_src; j++)
			printf("%s %s %s:%" PRIu32, i || j ? " >" : "", src[j].function,
			       src[j].file[0] ? src[j].file : "?", src[j].line);
	}
	return 0;
}

static int dump_stream(struct tfs_trace *t, uint32_t idx)
{
	struct tfs_diag diag = {0};
	struct tfs_stream_info si;
	struct tfs_cursor *c;
	int rc = tfs_trace_stream(t, idx, &si);

	if (rc < 0)
		return fail("stream", rc, NULL);
	rc = tfs_cursor_new(t, idx, TFS_VIEW_TEXT, 0, si.n_events, &c);
	if (rc < 0)
		return fail("cursor", rc, NULL);
	for (uint64_t e = 0; e < si.n_events && rc == 0; e++) {
		struct tfs_kind_desc k;
		struct tfs_event ev;
		int st, sz, nm;

		rc = tfs_cursor_event(c, e, &ev, &diag);
		if (rc < 0 || (rc = tfs_trace_kind(t, ev.kind, &k)) < 0)
			break;
		st = arg_index(&k, "stack");
		if (st < 0)
			continue;
		sz = arg_index(&k, "size");
		nm = arg_index(&k, "nmemb");
		printf("T%" PRIu32 " %s %" PRIu64 " %" PRIu64, si.thread, k.name,
		       sz < 0 ? 0 : ev.args[sz].u * (nm < 0 ? 1 : ev.args[nm].u), ev.args[st].u);
		if (print_stack(t, si.rank, ev.args[st].u) != 0)
			rc = -1;
		printf("\n");
	}
	tfs_cursor_free(c);
	if (rc < -1)
		return fail("event", rc, &diag);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct tfs_diag diag = {0};
	struct tfs_trace_info ti;
	struct tfs_trace *t;
	bool kinds = argc == 3 && !strcmp(argv[1], "--kinds");
	int rc;

	g_raw = argc == 3 && !strcmp(argv[1], "--raw");
	if (argc != 2 && !kinds && !g_raw) {
		fprintf(stderr, "usage: bt_dump [--kinds | --raw] TRACE\n");
		return 2;
	}
	rc = tfs_trace_open(argv[argc - 1], &t, &diag);
	if (rc < 0)
		return fail(argv[argc - 1], rc, &diag);
	if (kinds) {
		rc = print_kinds(t);
	} else {
		tfs_trace_get_info(t, &ti);
		for (uint32_t i = 0; i < ti.n_streams && rc == 0; i++)
			rc = dump_stream(t, i);
	}
	tfs_trace_close(t);
	return rc;
}
