/*
 * Names benchmark (FORMAT.md §12), every number against a baseline measured in the same run:
 *
 *   render: reading the text view of N read() calls whose file is an attached argument
 *           (`fd=3</data/file.3>`) against the same calls with a plain symbolic argument
 *           (`fd=3, file=file#3`): what printing paths on every line costs.
 *   ranks:  P one-rank traces whose names are equal, or differ in one file per rank (its
 *           own output file and stdin pipe), merged in log2(P) pairwise rounds as MPI does:
 *           the names section's bytes per rank and the merged trace's open time against
 *           the same merge without names.
 *
 * `bench_names render N attached|plain` only reads one view (for callgrind instruction
 * counts, tests/bench/run_names). Usage: bench_names [N] [P]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tfs/merge.h"
#include "tfs/reader.h"
#include "tfs/writer.h"

#define N_FILES 16

struct buf {
	void *data;
	size_t len;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void check(const char *what, int rc)
{
	if (rc < 0) {
		fprintf(stderr, "bench_names: %s failed: %d\n", what, rc);
		exit(1);
	}
}

/* N reads over 16 files: the path attached to the descriptor, or a plain file argument. */
static struct buf read_trace(uint64_t n, int attached, int with_names)
{
	const struct tfs_arg_desc args[] = {
	    {"fd", TFS_TYPE_I64, TFS_ENC_SIG, 0, NULL},
	    {attached ? "path" : "file", TFS_TYPE_U64, TFS_ENC_SYM,
	     attached ? TFS_ARG_ATTACH | TFS_ARG_INPUT : 0, "file"},
	    {"count", TFS_TYPE_U64, TFS_ENC_VAL, 0, NULL},
	    {"ret", TFS_TYPE_I64, TFS_ENC_VAL, TFS_ARG_RESULT | TFS_ARG_BYTES, NULL},
	};
	const struct tfs_kind_desc kind = {"read", "io", 4, args};
	struct tfs_writer_opts o = {.timing = TFS_TIMING_LOSSLESS};
	struct tfs_wstream *s;
	struct tfs_writer *w;
	uint32_t id;
	struct buf b;

	check("writer", tfs_writer_new(&o, &w));
	check("kind", tfs_writer_add_kind(w, &kind, &id));
	check("stream", tfs_writer_stream_new(w, 0, 0, &s));
	for (uint64_t i = 0; i < n; i++) {
		uint64_t f = (i * 7) % N_FILES;
		union tfs_arg a[4] = {{.i = (int64_t)f + 3}, {.u = f}, {.u = 4096}, {.i = 4096}};

		check("append", tfs_wstream_append(s, id, 1000 * i, 200 + i % 50, a));
	}
	for (uint32_t f = 0; f < N_FILES && with_names; f++) {
		char name[64];

		snprintf(name, sizeof(name), "/scratch/project/run-42/data/file.%u", f);
		check("name", tfs_writer_set_name(w, 0, "file", f, name));
	}
	check("save", tfs_writer_save_mem(w, &b.data, &b.len));
	tfs_writer_free(w);
	return b;
}

/* Read the whole text view of stream 0 in 64 KiB pieces. @return its bytes */
static uint64_t read_view(const struct buf *b)
{
	static char piece[1 << 16];
	struct tfs_stream_info si;
	struct tfs_cursor *c;
	struct tfs_trace *t;
	uint64_t size, off = 0;

	check("open", tfs_trace_open_mem(b->data, b->len, &t, NULL));
	check("stream", tfs_trace_stream(t, 0, &si));
	check("cursor", tfs_cursor_new(t, 0, TFS_VIEW_TEXT, 0, si.n_events, &c));
	size = tfs_cursor_size(c);
	while (off < size) {
		ssize_t got = tfs_cursor_pread(c, piece, sizeof(piece), off, NULL);

		check("read", got > 0 ? 0 : -1);
		off += (uint64_t)got;
	}
	tfs_cursor_free(c);
	tfs_trace_close(t);
	return size;
}

static void bench_render(uint64_t n)
{
	struct buf plain = read_trace(n, 0, 1), att = read_trace(n, 1, 1);
	double t0, t_plain = 1e30, t_att = 1e30;
	uint64_t b_plain = 0, b_att = 0;

	for (int round = 0; round < 3; round++) {
		t0 = now_s();
		b_plain = read_view(&plain);
		t_plain = now_s() - t0 < t_plain ? now_s() - t0 : t_plain;
		t0 = now_s();
		b_att = read_view(&att);
		t_att = now_s() - t0 < t_att ? now_s() - t0 : t_att;
	}
	printf("render: %" PRIu64 " reads; plain file#N %.1f ns/line (%.1f B/line), attached "
	       "paths %.1f ns/line (%.1f B/line): x%.2f time; trace %zu vs %zu bytes\n",
	       n, t_plain * 1e9 / (double)n, (double)b_plain / (double)n, t_att * 1e9 / (double)n,
	       (double)b_att / (double)n, t_att / t_plain, plain.len, att.len);
	free(plain.data);
	free(att.data);
}

/* The one-rank trace of process @rank: a few reads; its names equal or partly its own. */
static struct buf rank_trace(uint32_t rank, int names, int own)
{
	const struct tfs_arg_desc args[] = {
	    {"fd", TFS_TYPE_I64, TFS_ENC_SIG, 0, NULL},
	    {"path", TFS_TYPE_U64, TFS_ENC_SYM, TFS_ARG_ATTACH | TFS_ARG_INPUT, "file"},
	    {"ret", TFS_TYPE_I64, TFS_ENC_VAL, TFS_ARG_RESULT | TFS_ARG_BYTES, NULL},
	};
	const struct tfs_kind_desc kind = {"read", "io", 3, args};
	struct tfs_wstream *s;
	struct tfs_writer *w;
	uint32_t id;
	struct buf b;

	check("writer", tfs_writer_new(NULL, &w));
	check("kind", tfs_writer_add_kind(w, &kind, &id));
	check("stream", tfs_writer_stream_new(w, 0, 0, &s));
	for (uint32_t i = 0; i < 64; i++) {
		union tfs_arg a[3] = {{.i = 3 + i % N_FILES}, {.u = i % N_FILES}, {.i = 100}};

		check("append", tfs_wstream_append(s, id, 100 * i, 10, a));
	}
	for (uint32_t f = 0; f < N_FILES && names; f++) {
		char name[96];

		if (own && f == 0)
			snprintf(name, sizeof(name), "pipe:[%u]", 100000 + rank);
		else if (own && f == 1)
			snprintf(name, sizeof(name), "/scratch/run-42/out.%06u.dat", rank);
		else
			snprintf(name, sizeof(name), "/scratch/run-42/input/part.%02u.h5", f);
		check("name", tfs_writer_set_name(w, 0, "file", f, name));
	}
	check("save", tfs_writer_save_mem(w, &b.data, &b.len));
	tfs_writer_free(w);
	return b;
}

/* Pairwise rounds of in-memory merges, as at MPI_Finalize. */
static struct buf merge_rounds(struct buf *v, uint32_t p)
{
	for (uint32_t step = 1; step < p; step *= 2) {
		for (uint32_t i = 0; i + step < p; i += 2 * step) {
			struct tfs_trace *in[2];
			struct buf m;

			check("open", tfs_trace_open_mem(v[i].data, v[i].len, &in[0], NULL));
			check("open", tfs_trace_open_mem(v[i + step].data, v[i + step].len, &in[1],
							 NULL));
			check("merge", tfs_merge_traces(in, 2, &m.data, &m.len, NULL));
			tfs_trace_close(in[0]);
			tfs_trace_close(in[1]);
			free(v[i].data);
			free(v[i + step].data);
			v[i] = m;
		}
	}
	return v[0];
}

static uint64_t names_bytes(const struct buf *b, double *open_s)
{
	struct tfs_section_info si;
	struct tfs_trace *t;
	uint64_t raw = 0;
	double t0 = now_s();

	for (int i = 0; i < 5; i++) {
		check("open", tfs_trace_open_mem(b->data, b->len, &t, NULL));
		if (i < 4)
			tfs_trace_close(t);
	}
	*open_s = (now_s() - t0) / 5;
	for (uint32_t i = 0; tfs_trace_section(t, i, &si) == 0; i++)
		if (!strcmp(si.type_name, "names"))
			raw += si.raw_bytes;
	tfs_trace_close(t);
	return raw;
}

static void bench_ranks(uint32_t p)
{
	static const char *const what[] = {"no names", "equal names", "one own file+pipe"};
	double open_s[3];

	for (int k = 0; k < 3; k++) {
		struct buf *v = calloc(p, sizeof(*v)), m;
		uint64_t raw;

		for (uint32_t r = 0; r < p; r++)
			v[r] = rank_trace(r, k > 0, k == 2);
		m = merge_rounds(v, p);
		raw = names_bytes(&m, &open_s[k]);
		printf("ranks: P=%u %-18s trace %zu bytes, names section %" PRIu64
		       " raw bytes (%.2f per rank), open %.2f ms (x%.2f no names)\n",
		       p, what[k], m.len, raw, (double)raw / p, open_s[k] * 1e3,
		       open_s[k] / open_s[0]);
		free(m.data);
		free(v);
	}
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 2000000;
	uint32_t p = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 0) : 4096;

	if (argc == 4 && !strcmp(argv[1], "render")) {
		uint64_t m = strtoull(argv[2], NULL, 0);
		struct buf b = read_trace(m, !strcmp(argv[3], "attached"), 1);

		printf("%" PRIu64 " bytes\n", read_view(&b));
		free(b.data);
		return 0;
	}
	bench_render(n);
	bench_ranks(p);
	return 0;
}
