/*
 * Backtraces and symbols benchmark: bytes per backtrace in a trace's `backtraces` section
 * (FORMAT.md §10) and `symbols` section (§11), against baselines measured in the same run
 * on the same stacks: the frames as raw 8-byte words, and those words compressed with zstd
 * -19 (what a writer storing stacks plainly in a zstd section would get). Also the cost of a
 * rank's first use (decoding its whole section) and of one symbol lookup.
 * The stacks come from a random walk over a fixed synthetic call graph (a call site always
 * calls the same few functions), so consecutive stacks share prefixes as real ones do.
 * Usage: bench_stacks [backtraces]   (default 100000)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "testutil.h"
#include "tfs/reader.h"
#include "tfs/writer.h"

#define N_FUNCS 600
#define SITES 4
#define MAX_DEPTH 96

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "bench_stacks: %s failed: %d\n", what, rc);
	exit(1);
}

/* Return address of call site @s of function @f. */
static uint64_t site(uint32_t f, uint32_t s)
{
	return UINT64_C(0x555555554000) + f * 0x1c0u + s * 0x24u + 5;
}

int main(int argc, char **argv)
{
	uint64_t n_bt = argc > 1 ? strtoull(argv[1], NULL, 10) : 100000, rng = 12345;
	uint32_t callee[N_FUNCS][SITES], fn[MAX_DEPTH], depth = 1, n;
	uint64_t stack[MAX_DEPTH], total_frames = 0, bt_bytes = 0, sym_bytes = 0;
	uint64_t *raw = malloc(n_bt * MAX_DEPTH * sizeof(*raw));
	struct tfs_writer *w;
	struct tfs_trace *t;
	struct tfs_trace_info info;
	char path[64];
	double t0, t_first, t_sym;
	const uint64_t *frames;
	const struct tfs_src_frame *src;
	size_t zcap, zlen;
	void *z;
	int rc;

	if (!raw || n_bt == 0)
		die("arguments", -1);
	snprintf(path, sizeof(path), "/tmp/bench-stacks-%d.trace", (int)getpid());
	for (uint32_t f = 0; f < N_FUNCS; f++)
		for (uint32_t s = 0; s < SITES; s++)
			callee[f][s] = (uint32_t)tu_below(&rng, N_FUNCS);
	rc = tfs_writer_new(NULL, &w);
	fn[0] = 0;
	for (uint64_t i = 0; i < n_bt && rc == 0; i++) {
		/* return from a few frames, then call down a few sites */
		uint32_t pop = (uint32_t)tu_below(&rng, 5), push = 1 + (uint32_t)tu_below(&rng, 3);

		depth = depth > pop + 1 ? depth - pop : 1;
		for (uint32_t k = 0; k < push && depth < MAX_DEPTH; k++) {
			uint32_t s = (uint32_t)tu_below(&rng, SITES);

			stack[depth - 1] = site(fn[depth - 1], s);
			fn[depth] = callee[fn[depth - 1]][s];
			depth++;
		}
		stack[depth - 1] = site(fn[depth - 1], 0); /* the call of malloc */
		memcpy(raw + total_frames, stack, depth * sizeof(*stack));
		total_frames += depth;
		rc = tfs_writer_add_backtrace(w, 0, i, stack, depth);
	}
	for (uint32_t f = 0; f < N_FUNCS && rc == 0; f++) {
		char name[32], file[32];
		struct tfs_src_frame sf[2] = {{name, file, 10 + f},
					      {"inlined_helper", "util.h", 7}};

		snprintf(name, sizeof(name), "function_%u", f);
		snprintf(file, sizeof(file), "src/module_%u.c", f / 40);
		for (uint32_t s = 0; s < SITES && rc == 0; s++)
			rc = tfs_writer_add_symbol(w, 0, site(f, s), sf, 1 + (s == 2));
	}
	if (rc == 0)
		rc = tfs_writer_save(w, path);
	tfs_writer_free(w);
	if (rc < 0)
		die("writing", rc);

	rc = tfs_trace_open(path, &t, NULL);
	if (rc < 0)
		die("open", rc);
	tfs_trace_get_info(t, &info);
	for (uint32_t i = 0; i < info.n_sections; i++) {
		struct tfs_section_info si;

		tfs_trace_section(t, i, &si);
		if (!strcmp(si.type_name, "backtraces"))
			bt_bytes += si.stored_bytes;
		if (!strcmp(si.type_name, "symbols"))
			sym_bytes += si.stored_bytes;
	}
	t0 = now_s();
	rc = tfs_trace_backtrace(t, 0, n_bt - 1, &frames, &n, NULL);
	t_first = now_s() - t0;
	if (rc < 0)
		die("first use", rc);
	t0 = now_s();
	for (uint32_t k = 0; k < 1000000 && rc == 0; k++)
		rc = tfs_trace_symbol(t, 0, site(k % N_FUNCS, k % SITES), &src, &n, NULL);
	t_sym = (now_s() - t0) / 1e6;
	if (rc < 0)
		die("symbol lookups", rc);
	tfs_trace_close(t);
	unlink(path);

	zcap = ZSTD_compressBound(total_frames * sizeof(*raw));
	z = malloc(zcap);
	if (!z)
		die("malloc", -1);
	zlen = ZSTD_compress(z, zcap, raw, total_frames * sizeof(*raw), 19);
	if (ZSTD_isError(zlen))
		die("zstd", -1);

	printf("backtraces: %" PRIu64 ", frames: %" PRIu64 " (%.1f per backtrace)\n", n_bt,
	       total_frames, (double)total_frames / (double)n_bt);
	printf("%-28s %12s %14s %10s\n", "storage", "bytes", "B/backtrace", "vs_section");
	printf("%-28s %12" PRIu64 " %14.2f %9.2fx\n", "raw 8-byte frames", total_frames * 8,
	       8.0 * (double)total_frames / (double)n_bt,
	       (double)total_frames * 8 / (double)bt_bytes);
	printf("%-28s %12zu %14.2f %9.2fx\n", "raw frames, zstd -19", zlen,
	       (double)zlen / (double)n_bt, (double)zlen / (double)bt_bytes);
	printf("%-28s %12" PRIu64 " %14.2f %9.2fx\n", "backtraces section (§10)", bt_bytes,
	       (double)bt_bytes / (double)n_bt, 1.0);
	printf("symbols section (§11): %" PRIu64 " bytes for %u addresses (%.2f B each)\n",
	       sym_bytes, N_FUNCS * SITES, (double)sym_bytes / (N_FUNCS * SITES));
	printf("first use (decode all): %.1f ms, %.1f ns per frame; symbol lookup: %.1f ns\n",
	       t_first * 1e3, t_first * 1e9 / (double)total_frames, t_sym * 1e9);
	free(z);
	free(raw);
	return 0;
}
