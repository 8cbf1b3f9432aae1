/*
 * bt_dump: the allocation backtraces of a trace through the reader API, for
 * check_backtrace.py. One line per event that has a `stack` argument, streams in order:
 *
 *   T<thread> <kind> <size> <stack id> | <function> <file>:<line> > ... (outermost first)
 *
 * <size> is the event's `size` argument (calloc: nmemb * size), each code address of the
 * backtrace expands to its source frames (inlined functions included). With --raw each
 * frame is its code address instead (0x...). With --kinds it prints each event kind
 * instead: "<name>: <arg> <arg> ...". With --symbols, each distinct code address of each
 * rank's backtraces, in increasing order, and its source frames, outermost first,
 * tab-separated (function names may hold spaces):
 *
 *   <rank> TAB 0x<addr> (TAB <function> TAB <file> TAB <line>)...
 *
 *   bt_dump [--kinds | --symbols | --raw] TRACE
 */
#include <stdlib.h>
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

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The distinct addresses of @rank's backtraces, sorted, into a new array. */
static int rank_addrs(struct tfs_trace *t, uint32_t rank, uint64_t **out, size_t *n_out)
{
	uint64_t *v = NULL;
	size_t n = 0, cap = 0, k = 0;

	for (uint64_t id = 0; id < tfs_trace_n_backtraces(t, rank); id++) {
		struct tfs_diag diag = {0};
		const uint64_t *frames;
		uint32_t nf;
		int rc = tfs_trace_backtrace(t, rank, id, &frames, &nf, &diag);

		if (rc < 0) {
			free(v);
			return fail("backtrace", rc, &diag);
		}
		for (uint32_t i = 0; i < nf; i++) {
			if (n == cap) {
				uint64_t *w = realloc(v, (cap = cap ? 2 * cap : 256) * sizeof(*v));

				if (!w) {
					free(v);
					return fail("addresses", -ENOMEM, NULL);
				}
				v = w;
			}
			v[n++] = frames[i];
		}
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_u64);
	for (size_t i = 0; i < n; i++)
		if (k == 0 || v[k - 1] != v[i])
			v[k++] = v[i];
	*out = v;
	*n_out = k;
	return 0;
}

static int print_symbols(struct tfs_trace *t)
{
	struct tfs_trace_info ti;
	int rc = 0;

	tfs_trace_get_info(t, &ti);
	for (uint32_t r = 0; r < ti.n_ranks && rc == 0; r++) {
		uint64_t *addrs = NULL;
		size_t n = 0;

		rc = rank_addrs(t, r, &addrs, &n);
		for (size_t i = 0; i < n && rc == 0; i++) {
			struct tfs_diag diag = {0};
			const struct tfs_src_frame *src;
			uint32_t n_src = 0;
			int s = tfs_trace_symbol(t, r, addrs[i], &src, &n_src, &diag);

			if (s < 0 && s != -ENOENT)
				rc = fail("symbol", s, &diag);
			printf("%" PRIu32 "\t0x%" PRIx64, r, addrs[i]);
			for (uint32_t j = 0; s == 0 && j < n_src; j++)
				printf("\t%s\t%s\t%" PRIu32, src[j].function, src[j].file,
				       src[j].line);
			printf("\n");
		}
		free(addrs);
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct tfs_diag diag = {0};
	struct tfs_trace_info ti;
	struct tfs_trace *t;
	bool kinds = argc == 3 && !strcmp(argv[1], "--kinds");
	bool symbols = argc == 3 && !strcmp(argv[1], "--symbols");
	int rc;

	g_raw = argc == 3 && !strcmp(argv[1], "--raw");
	if (argc != 2 && !kinds && !symbols && !g_raw) {
		fprintf(stderr, "usage: bt_dump [--kinds | --symbols | --raw] TRACE\n");
		return 2;
	}
	rc = tfs_trace_open(argv[argc - 1], &t, &diag);
	if (rc < 0)
		return fail(argv[argc - 1], rc, &diag);
	if (kinds) {
		rc = print_kinds(t);
	} else if (symbols) {
		rc = print_symbols(t);
	} else {
		tfs_trace_get_info(t, &ti);
		for (uint32_t i = 0; i < ti.n_streams && rc == 0; i++)
			rc = dump_stream(t, i);
	}
	tfs_trace_close(t);
	return rc;
}
