/*
 * gen_ranks: writes the merged trace of an MPI job of many ranks that all ran one regular
 * program, as `tracefs merge` or the MPI wrappers would make it, for the scale tests and
 * tests/bench/run_ranks. Rank 0 writes a one-rank trace of its own (it also writes the
 * output file), every other rank the same one-rank trace: a loop of zones, collectives,
 * allocations and strided writes with lossless times (or none), so that the merged trace
 * is small whatever the rank count and its grammars, values and names are shared. It
 * checks nothing itself; it captures nothing.
 *
 * Usage: gen_ranks OUT RANKS [EVENTS_PER_RANK] [none|lossless] [phases|sparse]
 * (phases: each rank marks its loop as a phase "solve", a phase directory per rank; sparse:
 * one trace, written directly, whose streams are rank 0's and rank RANKS - 1's only, its
 * collective's buffers recorded)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfs/merge.h"
#include "tfs/reader.h"
#include "tfs/writer.h"

enum { K_ZONE, K_ALLREDUCE, K_MALLOC, K_FREE, K_PWRITE, N_KINDS };

static const struct tfs_arg_desc zone_args[] = {
    {"name", TFS_TYPE_STR, TFS_ENC_STR, 0, NULL},
};
static const struct tfs_arg_desc allreduce_args[] = {
    {"count", TFS_TYPE_U64, TFS_ENC_SIG, 0, NULL},
    {"comm", TFS_TYPE_HEX, TFS_ENC_SIG, 0, NULL},
};
/* the sparse trace's: with its buffers, one allocation (FORMAT.md symbolic ids, class
 * alloc) and their offsets in it, as the MPI wrappers record them */
static const struct tfs_arg_desc allreduce_buf_args[] = {
    {"sendbuf", TFS_TYPE_U64, TFS_ENC_SYM, 0, "alloc"},
    {"sendbuf_off", TFS_TYPE_HEX, TFS_ENC_SIG, 0, NULL},
    {"recvbuf", TFS_TYPE_U64, TFS_ENC_SYM, 0, "alloc"},
    {"recvbuf_off", TFS_TYPE_HEX, TFS_ENC_SIG, 0, NULL},
    {"count", TFS_TYPE_U64, TFS_ENC_SIG, 0, NULL},
    {"comm", TFS_TYPE_HEX, TFS_ENC_SIG, 0, NULL},
};
static const struct tfs_arg_desc malloc_args[] = {
    {"size", TFS_TYPE_U64, TFS_ENC_SIG, TFS_ARG_BYTES, NULL},
    {"ptr", TFS_TYPE_HEX, TFS_ENC_VAL, TFS_ARG_RESULT, "addr"},
};
static const struct tfs_arg_desc free_args[] = {
    {"ptr", TFS_TYPE_HEX, TFS_ENC_VAL, 0, "addr"},
};
static const struct tfs_arg_desc pwrite_args[] = {
    {"fd", TFS_TYPE_I64, TFS_ENC_SIG, 0, NULL},
    {"path", TFS_TYPE_U64, TFS_ENC_SYM, TFS_ARG_ATTACH | TFS_ARG_OUTPUT, "file"},
    {"count", TFS_TYPE_U64, TFS_ENC_SIG, TFS_ARG_BYTES, NULL},
    {"offset", TFS_TYPE_U64, TFS_ENC_VAL, 0, NULL},
    {"result", TFS_TYPE_I64, TFS_ENC_SIG, TFS_ARG_RESULT, NULL},
};
static const struct tfs_kind_desc kinds[N_KINDS] = {
    [K_ZONE] = {"zone", "user", 1, zone_args},
    [K_ALLREDUCE] = {"MPI_Allreduce", "mpi", 2, allreduce_args},
    [K_MALLOC] = {"malloc", "alloc", 2, malloc_args},
    [K_FREE] = {"free", "alloc", 1, free_args},
    [K_PWRITE] = {"pwrite", "io", 5, pwrite_args},
};

static int fail(const char *what, int rc)
{
	fprintf(stderr, "gen_ranks: %s: %s\n", what, strerror(-rc));
	return 1;
}

/* One step of the loop: a zone holding an allocation, a collective (with its buffers when
 * @bufs) and (rank 0) a write. */
static int step(struct tfs_wstream *s, uint64_t i, uint64_t *ts, int writer, int bufs)
{
	union tfs_arg a[6];
	uint64_t t0 = *ts;
	int rc;

	a[0].u = 4096;
	a[1].u = 0x10000 + (i % 4) * 0x1000;
	rc = tfs_wstream_append(s, K_MALLOC, t0 + 10, 50, a);
	if (bufs) {
		a[0].u = 1;
		a[1].u = 0;
		a[2].u = 1;
		a[3].u = 4096;
	}
	a[bufs ? 4 : 0].u = 8;
	a[bufs ? 5 : 1].u = 0x44000001;
	if (rc == 0)
		rc = tfs_wstream_append(s, K_ALLREDUCE, t0 + 100, 2000, a);
	if (rc == 0 && writer) {
		a[0].i = 3;
		a[1].u = 0;
		a[2].u = 65536;
		a[3].u = i * 65536;
		a[4].i = 65536;
		rc = tfs_wstream_append(s, K_PWRITE, t0 + 2200, 300, a);
	}
	a[0].u = 0x10000 + (i % 4) * 0x1000;
	if (rc == 0)
		rc = tfs_wstream_append(s, K_FREE, t0 + 2600, 40, a);
	a[0].s = "step";
	if (rc == 0)
		rc = tfs_wstream_append(s, K_ZONE, t0, 3000, a);
	*ts = t0 + 3100;
	return rc;
}

/*
 * A trace in memory: @events events in rank 0, rank 0's when @writer, and with @last > 0
 * the same events (not the writer's) in rank @last, the ranks between without streams.
 */
static int one_rank(uint64_t events, int timing, int phases, int writer, uint32_t last,
		    void **out, size_t *len)
{
	struct tfs_writer_opts o = {.timing = timing};
	struct tfs_writer *w;
	struct tfs_wstream *s;
	uint32_t id;
	int rc;

	rc = tfs_writer_new(&o, &w);
	if (rc < 0)
		return rc;
	for (int k = 0; k < N_KINDS && rc == 0; k++) {
		struct tfs_kind_desc kd = kinds[k];

		if (k == K_ALLREDUCE && last > 0) {
			kd.n_args = sizeof(allreduce_buf_args) / sizeof(allreduce_buf_args[0]);
			kd.args = allreduce_buf_args;
		}
		rc = tfs_writer_add_kind(w, &kd, &id);
	}
	if (rc == 0)
		rc = tfs_writer_set_meta(w, "program", "stencil");
	if (rc == 0)
		rc = tfs_writer_set_name(w, 0, "file", 0, writer ? "/out/result.h5" : "/dev/null");
	for (uint32_t r = 0; rc == 0; r = last) {
		uint64_t ts = 1000;

		rc = tfs_writer_stream_new(w, r, 0, &s);
		while (rc == 0 && tfs_wstream_n_events(s) < events)
			rc = step(s, tfs_wstream_n_events(s), &ts, writer && r == 0, last > 0);
		if (rc == 0 && phases)
			rc = tfs_writer_add_phase(w, "solve", r, 0, 0, tfs_wstream_n_events(s));
		if (r == last)
			break;
	}
	if (rc == 0)
		rc = tfs_writer_save_mem(w, out, len);
	tfs_writer_free(w);
	return rc;
}

/* Write @len bytes at @buf to @path. @return 0, or -1 with errno set */
static int save(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "wb");

	if (!f)
		return -1;
	if (fwrite(buf, 1, len, f) != len) {
		fclose(f);
		return -1;
	}
	return fclose(f) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct tfs_trace *in[2] = {NULL, NULL}, **all;
	uint64_t events = argc > 3 ? strtoull(argv[3], NULL, 10) : 200;
	int timing = argc > 4 && !strcmp(argv[4], "none") ? TFS_TIMING_NONE : TFS_TIMING_LOSSLESS;
	int phases = argc > 5 && !strcmp(argv[5], "phases");
	int sparse = argc > 5 && !strcmp(argv[5], "sparse");
	unsigned long ranks = argc > 2 ? strtoul(argv[2], NULL, 10) : 0;
	struct tfs_diag diag;
	void *buf[2], *out;
	size_t len[2], out_len;
	int rc;

	if (argc < 3 || ranks < 1 || ranks > UINT32_MAX) {
		fprintf(stderr, "usage: gen_ranks OUT RANKS [EVENTS_PER_RANK] [none|lossless] "
				"[phases|sparse]\n");
		return 2;
	}
	if (sparse) {
		/* streams in the first rank and the last only, the others counted */
		rc = one_rank(events, timing, 0, 1, (uint32_t)(ranks - 1), &out, &out_len);
		if (rc < 0)
			return fail("sparse trace", rc);
		if (save(argv[1], out, out_len) < 0)
			return fail(argv[1], -errno);
		printf("%s: %lu ranks, 2 with streams, %zu bytes\n", argv[1], ranks, out_len);
		free(out);
		return 0;
	}
	for (int i = 0; i < 2; i++) {
		rc = one_rank(events, timing, phases, i == 0, 0, &buf[i], &len[i]);
		if (rc == 0)
			rc = tfs_trace_open_mem(buf[i], len[i], &in[i], &diag);
		if (rc < 0)
			return fail("one-rank trace", rc);
	}
	all = malloc(ranks * sizeof(*all));
	if (!all)
		return fail("inputs", -ENOMEM);
	all[0] = in[0];
	for (unsigned long r = 1; r < ranks; r++)
		all[r] = in[1];
	rc = tfs_merge_traces(all, (uint32_t)ranks, &out, &out_len, &diag);
	if (rc < 0)
		return fail("merge", rc);
	if (save(argv[1], out, out_len) < 0)
		return fail(argv[1], -errno);
	printf("%s: %lu ranks, %zu bytes\n", argv[1], ranks, out_len);
	free(out);
	free(all);
	for (int i = 0; i < 2; i++) {
		tfs_trace_close(in[i]);
		free(buf[i]);
	}
	return 0;
}
