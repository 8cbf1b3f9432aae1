/*
 * ahead_readers: reads decoded ahead (fs/prefetch.c) against one plain sequential read, for
 * check_cli.py. Per PATH it reads the whole file through fs_vfile, then, for a few pool
 * shapes (small chunks so that windows slide over many of them, a budget too small for
 * every reader, the daemon's default), runs 8 readers at once, each with its own decoding
 * ahead of the file, reading on in requests of random sizes with seeks now and then, and 4
 * threads sharing one reader's decoding ahead as the daemon's threads share an open file
 * (each takes the next request); a last reader stops with chunks still in flight. Every
 * request must equal the plain read's bytes, served ahead or read by the reader itself, and
 * in a file of 1 MiB or more (hundreds of requests) some must have been served ahead.
 * Prints "ok PATH" or a failure.
 *
 *   ahead_readers TRACE SEED PATH...
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prefetch_i.h"
#include "tfs/reader.h"
#include "vtree_i.h"

#define N_SOLO 8
#define N_SHARED 4
#define MAX_REQ (300 * 1024)

struct shape {
	unsigned int workers;
	size_t budget, chunk;
};

static const struct shape shapes[] = {
	{2, (size_t)1 << 20, 4096},
	{3, (size_t)96 << 10, 16384},
	{2, FS_AHEAD_BUDGET, FS_AHEAD_CHUNK},
};

struct ctx {
	struct tfs_trace *t;
	struct fs_vtree *vt;
	struct fs_ahead_pool *pool;
	uint64_t ino, size;
	const char *full;
	struct fs_ahead *shared;
	_Atomic uint64_t next;	/* the shared reader's next request */
};

struct job {
	struct ctx *cx;
	uint64_t seed;
	uint64_t served, asked;
	char err[256];
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * UINT64_C(2685821657736338717);
}

/* One request as the daemon answers it: decoded ahead, else read through @f. */
static void request(struct job *j, struct fs_ahead *a, struct fs_vfile *f, char *buf,
		    uint64_t off, size_t len)
{
	const uint64_t size = j->cx->size;
	const uint64_t want = off >= size ? 0 : size - off < len ? size - off : len;
	struct fs_span sp;
	uint64_t got = 0;

	j->asked++;
	if (fs_ahead_get(a, off, len, &sp)) {
		j->served++;
		for (int i = 0; i < sp.n && !j->err[0]; i++) {
			if (got + sp.iov[i].iov_len > want ||
			    memcmp(sp.iov[i].iov_base, j->cx->full + off + got, sp.iov[i].iov_len))
				snprintf(j->err, sizeof(j->err), "served off=%" PRIu64 " len=%zu "
					 "differs in part %d", off, len, i);
			got += sp.iov[i].iov_len;
		}
		fs_ahead_put(a, &sp);
	} else {
		ssize_t n = fs_vfile_read(f, buf, len, off);

		if (n < 0 || memcmp(buf, j->cx->full + off, (size_t)n))
			snprintf(j->err, sizeof(j->err), "read off=%" PRIu64 " len=%zu: %zd", off,
				 len, n);
		got = n < 0 ? 0 : (uint64_t)n;
	}
	if (!j->err[0] && got != want)
		snprintf(j->err, sizeof(j->err), "off=%" PRIu64 " len=%zu: %" PRIu64 " bytes, want "
			 "%" PRIu64, off, len, got, want);
}

/* A reader of its own: on and on in random sizes, a seek one time in twelve. */
static void *solo(void *arg)
{
	struct job *j = arg;
	struct ctx *cx = j->cx;
	uint64_t s = j->seed | 1, off = 0, total = 0;
	struct fs_ahead *a = NULL;
	struct fs_vfile *f = NULL;
	char *buf = malloc(MAX_REQ);
	int rc = buf ? fs_ahead_new(cx->pool, cx->t, cx->vt, cx->ino, &a) : -ENOMEM;

	if (rc == 0)
		rc = fs_vfile_open(cx->vt, cx->ino, &f);
	if (rc < 0) {
		snprintf(j->err, sizeof(j->err), "open: %d", rc);
		goto out;
	}
	while (total < 3 * cx->size + MAX_REQ && !j->err[0]) {
		size_t len = 1 + rnd(&s) % MAX_REQ;

		if (rnd(&s) % 12 == 0)
			off = rnd(&s) % (cx->size + 1);
		request(j, a, f, buf, off, len);
		off = off + len >= cx->size ? 0 : off + len;
		total += len;
	}
out:
	fs_ahead_free(a);
	fs_vfile_close(f);
	free(buf);
	return NULL;
}

/*
 * One of the threads of a shared reader: each takes the next 128 KiB request, and one time in
 * eight reads somewhere at random too, as the kernel's threads share an open file.
 */
static void *shared(void *arg)
{
	struct job *j = arg;
	struct ctx *cx = j->cx;
	struct fs_vfile *f = NULL;
	char *buf = malloc(MAX_REQ);
	uint64_t off, s = j->seed | 1;

	if (!buf || fs_vfile_open(cx->vt, cx->ino, &f) < 0) {
		snprintf(j->err, sizeof(j->err), "open");
		free(buf);
		return NULL;
	}
	while ((off = atomic_fetch_add(&cx->next, 131072)) < cx->size && !j->err[0]) {
		request(j, cx->shared, f, buf, off, 131072);
		/* now and then a random read: it drops the window others may be waiting on */
		if (rnd(&s) % 8 == 0)
			request(j, cx->shared, f, buf, rnd(&s) % cx->size, 1 + rnd(&s) % MAX_REQ);
	}
	fs_vfile_close(f);
	free(buf);
	return NULL;
}

static int run_shape(struct ctx *cx, const struct shape *sh, uint64_t seed, char *why,
		     size_t cap, uint64_t *served, uint64_t *asked)
{
	struct job jobs[N_SOLO + N_SHARED];
	pthread_t th[N_SOLO + N_SHARED];
	struct fs_span sp;
	int rc;

	rc = fs_ahead_pool_new(sh->workers, sh->budget, sh->chunk, &cx->pool);
	if (rc == 0)
		rc = fs_ahead_new(cx->pool, cx->t, cx->vt, cx->ino, &cx->shared);
	if (rc < 0) {
		snprintf(why, cap, "pool: %d", rc);
		fs_ahead_pool_free(cx->pool);
		return rc;
	}
	atomic_store(&cx->next, 0);
	for (int i = 0; i < N_SOLO + N_SHARED; i++) {
		jobs[i] = (struct job){.cx = cx, .seed = seed * 131 + (uint64_t)i};
		pthread_create(&th[i], NULL, i < N_SOLO ? solo : shared, &jobs[i]);
	}
	for (int i = 0; i < N_SOLO + N_SHARED; i++)
		pthread_join(th[i], NULL);
	fs_ahead_free(cx->shared);
	/* a reader that goes away with its window queued and rendering */
	rc = fs_ahead_new(cx->pool, cx->t, cx->vt, cx->ino, &cx->shared);
	if (rc == 0) {
		fs_ahead_start(cx->shared, 0);
		if (fs_ahead_get(cx->shared, 0, 100, &sp))
			fs_ahead_put(cx->shared, &sp);
		fs_ahead_free(cx->shared);
	}
	fs_ahead_pool_free(cx->pool);
	for (int i = 0; i < N_SOLO + N_SHARED; i++) {
		*served += jobs[i].served;
		*asked += jobs[i].asked;
		if (jobs[i].err[0] && !why[0])
			snprintf(why, cap, "%s reader %d: %s", i < N_SOLO ? "solo" : "shared", i,
				 jobs[i].err);
	}
	return why[0] ? -EINVAL : rc;
}

struct waiter {
	struct ctx *cx;
	struct fs_ahead *a;
	uint64_t off;
	bool served, ok;
};

/* One request of the file's bytes at w->off: served ahead, or read as a reader would. */
static void *wait_one(void *arg)
{
	struct waiter *w = arg;
	struct fs_span sp;
	struct fs_vfile *f;
	char buf[100];

	w->served = fs_ahead_get(w->a, w->off, sizeof(buf), &sp);
	if (w->served) {
		w->ok = sp.n == 1 && sp.iov[0].iov_len == sizeof(buf) &&
			!memcmp(sp.iov[0].iov_base, w->cx->full + w->off, sizeof(buf));
		fs_ahead_put(w->a, &sp);
	} else if (fs_vfile_open(w->cx->vt, w->cx->ino, &f) == 0) {
		w->ok = fs_vfile_read(f, buf, sizeof(buf), w->off) == (ssize_t)sizeof(buf) &&
			!memcmp(buf, w->cx->full + w->off, sizeof(buf));
		fs_vfile_close(f);
	}
	return NULL;
}

/*
 * A request waiting for a queued chunk when another thread's read far away drops the window,
 * and with it that chunk, which then is never rendered: the waiter must wake and read for
 * itself (a daemon once hung there, its readers stuck for good). One worker and small chunks,
 * so that the chunk waited for is often still queued when the window goes; @dropped counts
 * the rounds where it was. The file must reach past the window by more than a seek's slack.
 */
static int check_dropped_wait(struct ctx *cx, char *why, size_t cap, unsigned int *dropped)
{
	const size_t chunk = 16384;
	struct tfs_cache_stats cs;

	/* no decoded block at hand: the worker's first chunk decodes one, the others wait */
	tfs_trace_block_cache_stats(cx->t, &cs);
	tfs_trace_set_block_cache(cx->t, 0);
	for (int round = 0; round < 8; round++) {
		struct waiter w = {.cx = cx, .off = 7 * chunk + 17};
		struct timespec until;
		struct fs_span sp;
		pthread_t th;
		int rc;

		rc = fs_ahead_pool_new(1, (size_t)1 << 20, chunk, &cx->pool);
		if (rc == 0)
			rc = fs_ahead_new(cx->pool, cx->t, cx->vt, cx->ino, &w.a);
		if (rc < 0) {
			snprintf(why, cap, "pool: %d", rc);
			fs_ahead_pool_free(cx->pool);
			tfs_trace_set_block_cache(cx->t, cs.budget);
			return rc;
		}
		fs_ahead_start(w.a, 0);
		pthread_create(&th, NULL, wait_one, &w);
		nanosleep(&(struct timespec){0, 100000}, NULL);
		if (fs_ahead_get(w.a, cx->size - 100, 100, &sp)) /* far away: drops the window */
			fs_ahead_put(w.a, &sp);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 300;
		if (pthread_timedjoin_np(th, NULL, &until) != 0) {
			printf("FAIL a reader waiting for a chunk that a seek dropped never woke "
			       "(round %d)\n", round);
			fflush(stdout);
			_exit(1); /* it holds the pool: nothing can be freed */
		}
		fs_ahead_free(w.a);
		fs_ahead_pool_free(cx->pool);
		if (!w.ok) {
			snprintf(why, cap, "the waiting reader's bytes differ (round %d, %s)", round,
				 w.served ? "served ahead" : "read itself");
			tfs_trace_set_block_cache(cx->t, cs.budget);
			return -EINVAL;
		}
		*dropped += !w.served;
	}
	tfs_trace_set_block_cache(cx->t, cs.budget);
	return 0;
}

static int check_path(struct tfs_trace *t, const char *path, uint64_t seed)
{
	struct ctx cx = {0};
	struct fs_node_info n;
	struct fs_vfile *f = NULL;
	uint64_t off = 0, served = 0, asked = 0;
	unsigned int dropped = 0;
	char *full = NULL, why[320] = "";
	int rc;

	cx.t = t;
	rc = fs_vtree_new(t, "t", &cx.vt);
	if (rc == 0)
		rc = fs_vtree_resolve(cx.vt, path, &cx.ino);
	if (rc == 0)
		rc = fs_vtree_stat(cx.vt, cx.ino, &n);
	if (rc == 0)
		rc = fs_vfile_open(cx.vt, cx.ino, &f);
	full = rc == 0 ? malloc(n.size + 1) : NULL;
	while (full && off < n.size) {
		ssize_t got = fs_vfile_read(f, full + off, 1 << 16, off);

		if (got <= 0) {
			rc = got < 0 ? (int)got : -EIO;
			break;
		}
		off += (uint64_t)got;
	}
	fs_vfile_close(f);
	if (rc < 0 || !full) {
		printf("FAIL %s: full read: %d\n", path, rc);
		goto out;
	}
	cx.size = n.size;
	cx.full = full;
	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]) && rc == 0; k++)
		rc = run_shape(&cx, &shapes[k], seed + k, why, sizeof(why), &served, &asked);
	if (rc == 0 && n.size >= ((uint64_t)3 << 20))
		rc = check_dropped_wait(&cx, why, sizeof(why), &dropped);
	if (rc == 0 && served == 0 && n.size >= FS_AHEAD_CHUNK) {
		snprintf(why, sizeof(why), "no request of %" PRIu64 " was decoded ahead", asked);
		rc = -EINVAL;
	}
	if (rc < 0)
		printf("FAIL %s: %s\n", path, why[0] ? why : "error");
	else
		printf("ok %s (%" PRIu64 " bytes, %" PRIu64 " of %" PRIu64 " requests decoded "
		       "ahead; %s%u of 8 waits on a chunk a seek dropped)\n", path, n.size, served,
		       asked, n.size >= ((uint64_t)3 << 20) ? "" : "under 3 MiB: no wait check, ",
		       dropped);
out:
	free(full);
	fs_vtree_free(cx.vt);
	return rc < 0;
}

int main(int argc, char **argv)
{
	struct tfs_trace *t;
	uint64_t seed;
	int fails = 0;

	if (argc < 4) {
		fprintf(stderr, "usage: ahead_readers TRACE SEED PATH...\n");
		return 2;
	}
	seed = strtoull(argv[2], NULL, 10);
	if (tfs_trace_open(argv[1], &t, NULL) < 0) {
		fprintf(stderr, "ahead_readers: cannot open %s\n", argv[1]);
		return 1;
	}
	for (int i = 3; i < argc; i++)
		fails += check_path(t, argv[i], seed);
	tfs_trace_close(t);
	return fails ? 1 : 0;
}
