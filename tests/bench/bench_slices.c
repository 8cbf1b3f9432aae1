/*
 * bench_slices: random slices of virtual files with the trace's cache of decoded blocks off
 * and on, in the same run (tests/bench/run_slices). Each round makes a fresh tree, then
 * THREADS threads each open their own handle of PATH and read N slices of up to SLICE bytes
 * at offsets within 4 KiB of one of SPOTS spots of the file (so that blocks are met again, as
 * a pager going back and forth or several readers of one file meet them), or, with SPOTS 0,
 * anywhere (where the cache only costs). It checks every slice against a full read and prints
 * CPU seconds per 1,000 slices, the cache's hits, and the ratio.
 *
 *   bench_slices TRACE PATH N SLICE THREADS ROUNDS SPOTS
 *
 * CACHE_MB in the environment sets the cache's budget when on (default 32): a small one
 * shows what keeping blocks costs when they are seldom met again.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tfs/reader.h"
#include "vtree_i.h"

#define MAX_SPOTS 4096

struct job {
	struct fs_vtree *vt;
	uint64_t ino, size, seed;
	const char *full;
	unsigned n;
	size_t slice;
	const uint64_t *spots;
	unsigned n_spots;
	int bad;
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * UINT64_C(2685821657736338717);
}

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *reader(void *arg)
{
	struct job *j = arg;
	struct fs_vfile *f;
	char *buf = malloc(j->slice);

	if (!buf || fs_vfile_open(j->vt, j->ino, &f) < 0) {
		j->bad = 1;
		free(buf);
		return NULL;
	}
	for (unsigned i = 0; i < j->n; i++) {
		uint64_t off = j->n_spots ? j->spots[rnd(&j->seed) % j->n_spots] +
					    rnd(&j->seed) % 4096 : rnd(&j->seed) % (j->size + 1);
		size_t len = 1 + (size_t)(rnd(&j->seed) % j->slice);
		uint64_t want;
		ssize_t got;

		if (off > j->size)
			off = j->size;
		want = j->size - off < len ? j->size - off : len;
		got = fs_vfile_read(f, buf, len, off);
		if (got != (ssize_t)want || memcmp(buf, j->full + off, want))
			j->bad = 1;
	}
	fs_vfile_close(f);
	free(buf);
	return NULL;
}

static int read_full(struct fs_vtree *vt, uint64_t ino, uint64_t size, char **out)
{
	struct fs_vfile *f;
	char *buf = malloc(size + 1);
	uint64_t off = 0;

	if (!buf || fs_vfile_open(vt, ino, &f) < 0) {
		free(buf);
		return -ENOMEM;
	}
	while (off < size) {
		ssize_t got = fs_vfile_read(f, buf + off, 1 << 20, off);

		if (got <= 0)
			break;
		off += (uint64_t)got;
	}
	fs_vfile_close(f);
	if (off != size) {
		free(buf);
		return -EIO;
	}
	*out = buf;
	return 0;
}

/* One round: CPU seconds of THREADS readers on a fresh tree; -1 on a wrong slice. */
static double round_cpu(struct tfs_trace *t, const char *path, const char *full, uint64_t size,
			const uint64_t *spots, unsigned n_spots, unsigned n, size_t slice,
			int threads, uint64_t seed)
{
	struct job jobs[64];
	pthread_t th[64];
	struct fs_vtree *vt;
	uint64_t ino;
	double c0, c1;
	int bad = 0;

	if (fs_vtree_new(t, "t", &vt) < 0 || fs_vtree_resolve(vt, path, &ino) < 0)
		return -1;
	c0 = cpu_s();
	for (int i = 0; i < threads; i++) {
		jobs[i] = (struct job){.vt = vt, .ino = ino, .size = size, .full = full,
				       .seed = seed * 97 + (uint64_t)i + 1, .n = n,
				       .slice = slice, .spots = spots, .n_spots = n_spots};
		pthread_create(&th[i], NULL, reader, &jobs[i]);
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		bad |= jobs[i].bad;
	}
	c1 = cpu_s();
	fs_vtree_free(vt);
	return bad ? -1 : c1 - c0;
}

int main(int argc, char **argv)
{
	uint64_t spots[MAX_SPOTS], size, ino, s = 12345;
	double best[2] = {1e30, 1e30};
	struct fs_node_info ni;
	struct tfs_cache_stats st[2];
	struct fs_vtree *vt;
	struct tfs_trace *t;
	char *full;
	unsigned n, n_spots;
	size_t slice;
	int threads, rounds;
	size_t budget = (size_t)32 << 20;

	if (argc != 8) {
		fprintf(stderr, "usage: bench_slices TRACE PATH N SLICE THREADS ROUNDS SPOTS\n");
		return 2;
	}
	n = (unsigned)strtoul(argv[3], NULL, 10);
	slice = (size_t)strtoul(argv[4], NULL, 10);
	threads = atoi(argv[5]);
	rounds = atoi(argv[6]);
	n_spots = (unsigned)strtoul(argv[7], NULL, 10);
	if (n_spots > MAX_SPOTS || !n || !slice || threads < 1 || threads > 64 || rounds < 1 ||
	    tfs_trace_open(argv[1], &t, NULL) < 0) {
		fprintf(stderr, "bench_slices: bad arguments or cannot open %s\n", argv[1]);
		return 2;
	}
	if (fs_vtree_new(t, "t", &vt) < 0 || fs_vtree_resolve(vt, argv[2], &ino) < 0 ||
	    fs_vtree_stat(vt, ino, &ni) < 0 || read_full(vt, ino, ni.size, &full) < 0) {
		fprintf(stderr, "bench_slices: cannot read %s\n", argv[2]);
		return 1;
	}
	fs_vtree_free(vt);
	size = ni.size;
	for (unsigned i = 0; i < n_spots; i++)
		spots[i] = rnd(&s) % (size + 1);
	if (getenv("CACHE_MB"))
		budget = (size_t)strtoul(getenv("CACHE_MB"), NULL, 10) << 20;
	for (int r = 0; r < rounds; r++) {
		for (int on = 0; on < 2; on++) {
			struct tfs_cache_stats a, b;
			double c;

			tfs_trace_set_block_cache(t, 0); /* emptied: every round starts cold */
			tfs_trace_set_block_cache(t, on ? budget : 0);
			tfs_trace_block_cache_stats(t, &a);
			c = round_cpu(t, argv[2], full, size, spots, n_spots, n, slice, threads,
				      (uint64_t)r);
			tfs_trace_block_cache_stats(t, &b);
			if (c < 0) {
				fprintf(stderr, "bench_slices: a slice differs from the full read\n");
				return 1;
			}
			if (c < best[on])
				best[on] = c;
			st[on] = (struct tfs_cache_stats){.hits = b.hits - a.hits,
							  .misses = b.misses - a.misses,
							  .kept = b.kept - a.kept};
		}
	}
	for (int on = 0; on < 2; on++)
		printf("  cache %-3s %8.3f ms CPU per 1000 slices  (block loads: %" PRIu64
		       " copied, %" PRIu64 " decoded)\n", on ? "on" : "off",
		       best[on] * 1e3 * 1000 / ((double)n * threads), st[on].hits, st[on].misses);
	printf("  ratio on/off = %.3f  (%s, %" PRIu64 " bytes, %d threads x %u slices of <= %zu "
	       "bytes, %s, cache %zu MiB, best of %d)\n", best[1] / best[0], argv[2], size,
	       threads, n, slice, n_spots ? argv[7] : "anywhere", budget >> 20, rounds);
	free(full);
	tfs_trace_close(t);
	return 0;
}
