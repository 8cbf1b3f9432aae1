/*
 * Merge benchmark: P per-process traces (one rank each, absolute ranks in their arguments,
 * as an MPI job's processes write them) merged for P = 1, 4, 16, 64, 256, both in one call
 * (`tracefs merge`, `tracefs record` after fork) and in log2(P) pairwise rounds of
 * in-memory buffers (MPI_Finalize). The baseline, measured in the same run, is reading one
 * trace back (decoding every event) and writing it again with the writer: what a merge
 * would cost per input if it re-encoded events. Last, two halves of a job whose ranks
 * share one grammar, with and without one rank-derived tag (the twins' lookup cost).
 * Usage: bench_merge [events per stream]
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"
#include "tfs/merge.h"
#include "tfs/reader.h"
#include "tfs/writer.h"
#include "tracegen.h"

#define THREADS 2
#define MAX_P 256

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
		fprintf(stderr, "bench_merge: %s failed: %d\n", what, rc);
		exit(1);
	}
}

/* The trace process @rank writes alone: its streams at rank 0, dest = @rank + 1 absolute. */
static struct buf rank_trace(uint32_t rank, uint64_t n)
{
	struct tfs_writer *w;
	struct buf b;

	check("writer", tfs_writer_new(NULL, &w));
	check("schema", tg_declare(w));
	for (uint32_t th = 0; th < THREADS; th++) {
		struct tg_stream s = {.rank = rank, .thread = th};
		struct tfs_wstream *ws;

		check("fill", tg_fill(&s, n, 1, 1 + rank * THREADS + th));
		check("stream", tfs_writer_stream_new(w, 0, th, &ws));
		for (uint64_t i = 0; i < s.n; i++)
			check("append", tfs_wstream_append(ws, s.ev[i].kind, s.ev[i].ts,
							   s.ev[i].dur, s.ev[i].args));
		tg_free(&s);
	}
	check("save", tfs_writer_save_mem(w, &b.data, &b.len));
	tfs_writer_free(w);
	return b;
}

/* Baseline: decode every event of @in and write them again. */
static double reread_resave_s(const struct buf *in)
{
	double t0 = now_s();
	struct tfs_trace_info ti;
	struct tfs_trace *t;
	struct tfs_writer *w;
	struct buf out;

	check("open", tfs_trace_open_mem(in->data, in->len, &t, NULL));
	tfs_trace_get_info(t, &ti);
	check("writer", tfs_writer_new(NULL, &w));
	for (uint32_t k = 0; k < ti.n_kinds; k++) {
		struct tfs_kind_desc d;
		uint32_t id;

		check("kind", tfs_trace_kind(t, k, &d));
		check("add kind", tfs_writer_add_kind(w, &d, &id));
	}
	for (uint32_t s = 0; s < ti.n_streams; s++) {
		struct tfs_stream_info si;
		struct tfs_wstream *ws;
		struct tfs_cursor *c;

		check("stream", tfs_trace_stream(t, s, &si));
		check("new stream", tfs_writer_stream_new(w, si.rank, si.thread, &ws));
		check("cursor", tfs_cursor_new(t, s, TFS_VIEW_TEXT, 0, si.n_events, &c));
		for (uint64_t i = 0; i < si.n_events; i++) {
			struct tfs_event ev;

			check("event", tfs_cursor_event(c, i, &ev, NULL));
			check("append",
			      tfs_wstream_append(ws, ev.kind, ev.ts_ns, ev.dur_ns, ev.args));
		}
		tfs_cursor_free(c);
	}
	check("save", tfs_writer_save_mem(w, &out.data, &out.len));
	tfs_writer_free(w);
	tfs_trace_close(t);
	free(out.data);
	return now_s() - t0;
}

static struct buf merge_bufs(struct buf *in, uint32_t n)
{
	struct tfs_trace *t[MAX_P] = {0};
	struct buf out;

	for (uint32_t i = 0; i < n; i++)
		check("open", tfs_trace_open_mem(in[i].data, in[i].len, &t[i], NULL));
	check("merge", tfs_merge_traces(t, n, &out.data, &out.len, NULL));
	for (uint32_t i = 0; i < n; i++)
		tfs_trace_close(t[i]);
	return out;
}

/* log2(P) rounds: in round k, buffer i merges with buffer i + 2^k (what MPI ranks do). */
static struct buf merge_rounds(const struct buf *in, uint32_t p)
{
	struct buf cur[MAX_P];

	for (uint32_t i = 0; i < p; i++) {
		cur[i].data = malloc(in[i].len);
		memcpy(cur[i].data, in[i].data, in[i].len);
		cur[i].len = in[i].len;
	}
	for (uint32_t step = 1; step < p; step *= 2) {
		for (uint32_t i = 0; i + step < p; i += 2 * step) {
			struct buf pair[2] = {cur[i], cur[i + step]};
			struct buf m = merge_bufs(pair, 2);

			free(cur[i].data);
			free(cur[i + step].data);
			cur[i] = m;
		}
	}
	return cur[0];
}

static const struct tfs_arg_desc shared_args[] = {
    {.name = "op", .type = TFS_TYPE_I64, .enc = TFS_ENC_SIG},
    {.name = "tag", .type = TFS_TYPE_I64, .enc = TFS_ENC_RVAL},
};
static const struct tfs_kind_desc shared_kind = {"op", "mpi", 2, shared_args};

/*
 * A merged trace of @p ranks that all did the same @g calls (one grammar section shared by
 * every stream), with @ranked: one more stream whose tag is derived from its rank, which
 * makes the merge look for literal twins (codec/merge.c find_twins).
 */
static struct buf shared_trace(uint32_t p, uint32_t g, bool ranked)
{
	struct tfs_writer *w;
	struct tfs_wstream *ws;
	struct tfs_trace *t;
	struct buf b, out;
	uint32_t id;

	check("writer", tfs_writer_new(NULL, &w));
	check("kind", tfs_writer_add_kind(w, &shared_kind, &id));
	for (uint32_t r = 0; r < p + ranked; r++) {
		check("stream", tfs_writer_stream_new(w, r < p ? r : 0, r < p ? 0 : 1, &ws));
		for (uint32_t i = 0; i < (r < p ? g : 1); i++) {
			union tfs_arg a[2] = {{.i = i}, {.u = tfs_rval(r < p ? 0 : 5, r >= p)}};

			check("append", tfs_wstream_append(ws, id, 0, 0, a));
		}
	}
	check("save", tfs_writer_save_mem(w, &b.data, &b.len));
	tfs_writer_free(w);
	/* merged once: its streams now name one grammar section */
	check("open", tfs_trace_open_mem(b.data, b.len, &t, NULL));
	check("merge", tfs_merge_traces(&t, 1, &out.data, &out.len, NULL));
	tfs_trace_close(t);
	free(b.data);
	return out;
}

/* Best of 5 of merging @in with itself. */
static double merge_pair_s(const struct buf *in)
{
	struct buf pair[2] = {*in, *in};
	double best = 0;

	for (int k = 0; k < 5; k++) {
		double t0 = now_s(), d;

		free(merge_bufs(pair, 2).data);
		d = now_s() - t0;
		best = k == 0 || d < best ? d : best;
	}
	return best;
}

/*
 * Two halves of a job whose ranks share one grammar of many calls: the time with one
 * rank-derived tag somewhere against none. Looking for twins must cost per grammar
 * section, not per stream and terminal: the ratio stays near 1.
 */
static void bench_shared_grammar(void)
{
	enum { P = 2048, G = 1000 };
	struct buf plain = shared_trace(P, G, false), ranked = shared_trace(P, G, true);
	double t_plain = merge_pair_s(&plain), t_ranked = merge_pair_s(&ranked);

	printf("\nshared grammar: 2 x %u ranks x %u calls, one grammar section\n", P, G);
	printf("no derived tag: %.4f s, one derived tag: %.4f s, ratio %.2fx\n", t_plain,
	       t_ranked, t_ranked / t_plain);
	free(plain.data);
	free(ranked.data);
}

int main(int argc, char **argv)
{
	static const uint32_t ps[] = {1, 4, 16, 64, 256};
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 50000;
	struct buf in[MAX_P];
	double base;

	for (uint32_t r = 0; r < MAX_P; r++) {
		in[r] = rank_trace(r, n);
	}
	free(merge_bufs(in, 2).data); /* warm up: first-use costs are not the merge's */
	base = reread_resave_s(&in[0]);
	printf("per-process trace: %u threads x %" PRIu64 " events, %zu bytes\n", THREADS, n,
	       in[0].len);
	printf("baseline: read back + re-save one trace: %.4f s\n\n", base);
	printf("%6s %12s %12s %10s %10s %12s %12s %10s\n", "ranks", "in_bytes", "out_bytes",
	       "all_s", "rounds_s", "all/base", "all/rank/base", "rounds/base");
	for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
		uint32_t p = ps[k];
		uint64_t sum = 0;
		double t0, t_all, t_rounds;
		struct buf all, rounds;

		for (uint32_t i = 0; i < p; i++)
			sum += in[i].len;
		t0 = now_s();
		all = merge_bufs(in, p);
		t_all = now_s() - t0;
		t0 = now_s();
		rounds = merge_rounds(in, p);
		t_rounds = now_s() - t0;
		printf("%6u %12" PRIu64 " %12zu %10.4f %10.4f %11.2fx %12.4fx %9.2fx\n", p, sum,
		       all.len, t_all, t_rounds, t_all / base, t_all / p / base, t_rounds / base);
		free(all.data);
		free(rounds.data);
	}
	printf(
	    "\nall/base: one merge of every input against re-encoding one trace;\n"
	    "all/rank/base: per input; rounds: log2(P) pairwise rounds, run one after the other\n"
	    "here (MPI runs each round's merges in parallel)\n");
	for (uint32_t r = 0; r < MAX_P; r++)
		free(in[r].data);
	bench_shared_grammar();
	return 0;
}
