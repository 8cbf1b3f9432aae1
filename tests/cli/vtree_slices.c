/*
 * vtree_slices: random-offset reads of virtual files against one sequential read, for
 * check_cli.py. Per PATH it reads the whole file through one tree, then reads random
 * slices through a second, fresh tree from several threads at once (each with its own
 * handle), so the once-only state (profile text, JSON tails, merge indexes) is raced for,
 * and finally from one handle with jumps back and forth. Prints "ok PATH" or a failure.
 *
 *   vtree_slices TRACE SEED N PATH...
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfs/reader.h"
#include "vtree_i.h"

#define N_THREADS 4
#define MAX_SLICE 20000

struct job {
	struct fs_vtree *vt;
	const char *path;
	const char *full;
	uint64_t size;
	uint64_t seed;
	unsigned n;
	char err[256];
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * UINT64_C(2685821657736338717);
}

static int read_full(struct fs_vtree *vt, const char *path, char **out, uint64_t *size)
{
	struct fs_node_info n;
	struct fs_vfile *f;
	uint64_t ino, off = 0;
	char *buf;
	int rc;

	rc = fs_vtree_resolve(vt, path, &ino);
	if (rc == 0)
		rc = fs_vtree_stat(vt, ino, &n);
	if (rc == 0)
		rc = fs_vfile_open(vt, ino, &f);
	if (rc < 0)
		return rc;
	buf = malloc(n.size + 1);
	while (buf && off < n.size) {
		ssize_t got = fs_vfile_read(f, buf + off, 1 << 16, off);

		if (got <= 0) {
			rc = got < 0 ? (int)got : -EIO;
			break;
		}
		off += (uint64_t)got;
	}
	fs_vfile_close(f);
	if (!buf || rc < 0) {
		free(buf);
		return buf ? rc : -ENOMEM;
	}
	*out = buf;
	*size = n.size;
	return 0;
}

/* @j->n random slices through one handle; each must equal the full read's bytes. */
static void *slices(void *arg)
{
	struct job *j = arg;
	struct fs_node_info n;
	struct fs_vfile *f;
	uint64_t ino, s = j->seed | 1;
	char *buf = malloc(MAX_SLICE);
	int rc;

	rc = fs_vtree_resolve(j->vt, j->path, &ino);
	if (rc == 0)
		rc = fs_vtree_stat(j->vt, ino, &n);
	if (rc == 0 && n.size != j->size)
		rc = -EINVAL;
	if (rc == 0)
		rc = fs_vfile_open(j->vt, ino, &f);
	if (rc < 0 || !buf) {
		snprintf(j->err, sizeof(j->err), "open/stat: %d (size %" PRIu64 ")", rc, n.size);
		free(buf);
		return NULL;
	}
	for (unsigned i = 0; i < j->n && !j->err[0]; i++) {
		uint64_t off = rnd(&s) % (j->size + 1);
		size_t len = 1 + rnd(&s) % MAX_SLICE;
		uint64_t want = j->size - off < len ? j->size - off : len;
		ssize_t got;

		if (i % 3 == 2) /* sometimes read on from there */
			off = off > 1000 ? off - 1000 : 0;
		want = j->size - off < len ? j->size - off : len;
		got = fs_vfile_read(f, buf, len, off);
		if (got != (ssize_t)want || memcmp(buf, j->full + off, want))
			snprintf(j->err, sizeof(j->err),
				 "slice off=%" PRIu64 " len=%zu: got %zd bytes, want %" PRIu64
				 "%s", off, len, got, want, got == (ssize_t)want ? " (differ)" : "");
	}
	fs_vfile_close(f);
	free(buf);
	return NULL;
}

static int check_path(struct tfs_trace *t, const char *path, uint64_t seed, unsigned n)
{
	struct fs_vtree *a, *b;
	struct job jobs[N_THREADS + 1];
	pthread_t th[N_THREADS];
	char *full = NULL;
	uint64_t size = 0;
	int rc, bad = 0;

	rc = fs_vtree_new(t, "t", &a);
	if (rc == 0)
		rc = read_full(a, path, &full, &size);
	fs_vtree_free(a);
	if (rc < 0) {
		printf("FAIL %s: full read: %d\n", path, rc);
		return 1;
	}
	rc = fs_vtree_new(t, "t", &b);
	if (rc < 0) {
		free(full);
		return 1;
	}
	for (int i = 0; i <= N_THREADS; i++)
		jobs[i] = (struct job){.vt = b, .path = path, .full = full, .size = size,
				       .seed = seed * 31 + (uint64_t)i, .n = n};
	for (int i = 0; i < N_THREADS; i++)
		pthread_create(&th[i], NULL, slices, &jobs[i]);
	for (int i = 0; i < N_THREADS; i++)
		pthread_join(th[i], NULL);
	slices(&jobs[N_THREADS]);
	for (int i = 0; i <= N_THREADS; i++) {
		if (jobs[i].err[0] && !bad++)
			printf("FAIL %s: %s\n", path, jobs[i].err);
	}
	if (!bad)
		printf("ok %s (%" PRIu64 " bytes)\n", path, size);
	fs_vtree_free(b);
	free(full);
	return bad != 0;
}

int main(int argc, char **argv)
{
	struct tfs_trace *t;
	uint64_t seed;
	int fails = 0;

	if (argc < 4) {
		fprintf(stderr, "usage: vtree_slices TRACE SEED N PATH...\n");
		return 2;
	}
	seed = strtoull(argv[2], NULL, 10);
	if (tfs_trace_open(argv[1], &t, NULL) < 0) {
		fprintf(stderr, "vtree_slices: cannot open %s\n", argv[1]);
		return 1;
	}
	for (int i = 4; i < argc; i++)
		fails += check_path(t, argv[i], seed, (unsigned)strtoul(argv[3], NULL, 10));
	tfs_trace_close(t);
	return fails ? 1 : 0;
}
