/*
 * Decoding ahead of sequential readers (prefetch_i.h). One pool of worker threads serves
 * every file being read: a reader that has read a few times in a row gets a window of
 * chunks ahead of where it reads, each chunk of a file made of one stream view cut where a
 * value block starts (so no block is decoded by two workers) and rendered by a worker
 * through the worker's own handle of the file into a buffer of its own. Reads inside the
 * window wait for their chunks and are answered from them, pinned, without a copy; the
 * window slides as the reader goes and is dropped at a seek. Nothing is rendered beyond the
 * window, so a reader that stops costs nothing more, and the chunks' buffers never exceed the
 * pool's budget. One mutex guards the queue, the windows and the chunks' states; chunks are
 * rendered outside it.
 *
 * It renders nothing itself: it reads files through fs_vfile like any reader (only where to
 * cut comes from a file's stream view, through fs_vtree_file_views()), and a chunk that
 * fails is simply not served, so the reader reads those bytes itself and reports the error
 * as it would without decoding ahead.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prefetch_i.h"
#include "tfs/reader.h"

/* Sequential reads in a row after which a reader gets a window. */
#define SEQ_START 2
/*
 * How far from where the reader was a read still counts as sequential: the kernel sends
 * its read-ahead requests to several daemon threads, which answer them in any order.
 */
#define SEQ_SLACK ((uint64_t)2 << 20)

enum chunk_state { CH_QUEUED, CH_BUSY, CH_READY, CH_FAILED };

struct chunk {
	struct fs_ahead *a;
	uint64_t off;		/* its bytes are the file's [off, off + len) */
	size_t len;
	char *data;
	int state;		/* enum chunk_state */
	unsigned int pins;	/* spans holding its bytes */
	bool dropped;		/* out of its window: freed once neither pinned nor busy */
	struct chunk *next;	/* in the pool's queue while CH_QUEUED */
};

struct fs_ahead {
	struct fs_ahead_pool *pool;
	struct fs_vtree *vt;
	uint64_t ino, size;
	struct tfs_cursor *plan;  /* cuts chunks at block starts (under the pool's lock), or NULL */
	struct fs_vfile **h;	  /* [n_workers]: worker i's handle, opened and used by it */
	struct chunk *win[FS_AHEAD_DEPTH]; /* in file order, contiguous */
	unsigned int n_win;
	uint64_t next_off;	  /* where the window ends: the next chunk starts here */
	uint64_t last_end;	  /* where the latest read ended */
	unsigned int seq;	  /* sequential reads in a row */
	unsigned int busy;	  /* its chunks being rendered */
	unsigned int spans;	  /* served spans not put back yet: the daemon puts one after
				   * its reply, when the file may already be released */
};

struct fs_ahead_pool {
	pthread_mutex_t lock;
	pthread_cond_t work;	  /* a chunk was queued, or the pool stops */
	pthread_cond_t done;	  /* a chunk was rendered (or failed), or a reader's last span put */
	struct chunk *head, *tail; /* queued chunks, oldest first */
	size_t budget, used;	  /* bytes of all buffers, of chunks or spare */
	size_t chunk;		  /* bytes a chunk aims at */
	size_t buf_cap;		  /* bytes of every buffer: the longest chunk, 5/4 of @chunk */
	void *spare;		  /* buffers of freed chunks, each starting with the next */
	unsigned int n_workers, n_started;
	pthread_t *threads;
	bool stop;
};

struct worker_arg {
	struct fs_ahead_pool *pool;
	unsigned int id;
};

unsigned int fs_ahead_default_workers(void)
{
	const char *env = getenv("TRACEFS_DECODE_THREADS");
	long n;

	if (env && *env) {
		n = strtol(env, NULL, 10);
		return n < 0 ? 0 : n > 64 ? 64 : (unsigned int)n;
	}
	n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		n = 1;
	return n > FS_AHEAD_MAX_WORKERS ? FS_AHEAD_MAX_WORKERS : (unsigned int)n;
}

/* ---- chunks (pool lock held) ---- */

/*
 * A chunk's buffer: a spare one, else a new one while the budget allows. Freed chunks' buffers
 * stay with the pool for the next: mapping and faulting in 1 MiB per chunk and unmapping it
 * (a TLB shootdown on every core) cost more system time than an untimed chunk's rendering,
 * and malloc'ed ones stayed in the arenas of the threads that freed them (a 54 MB peak RSS
 * over a 10 GiB read). @return NULL: out of budget or memory
 */
static char *buf_get(struct fs_ahead_pool *p)
{
	void *d = p->spare;

	if (d) {
		memcpy(&p->spare, d, sizeof(void *));
		return d;
	}
	if (p->used + p->buf_cap > p->budget)
		return NULL;
	d = mmap(NULL, p->buf_cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (d == MAP_FAILED)
		return NULL;
	p->used += p->buf_cap;
	return d;
}

static void chunk_free(struct fs_ahead_pool *p, struct chunk *c)
{
	memcpy(c->data, &p->spare, sizeof(void *));
	p->spare = c->data;
	free(c);
}

static void unqueue(struct fs_ahead_pool *p, struct chunk *c)
{
	struct chunk **pp = &p->head, *prev = NULL;

	while (*pp && *pp != c) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	assert(*pp == c);
	*pp = c->next;
	if (p->tail == c)
		p->tail = prev;
	c->next = NULL;
}

/* Take @c out of its window: freed now, or by whoever holds it last. */
static void chunk_drop(struct fs_ahead_pool *p, struct chunk *c)
{
	if (c->state == CH_QUEUED) {
		/*
		 * never rendered now: a reader waiting for it (pinned) reads for itself, once
		 * woken here, since no worker will take it and say so
		 */
		unqueue(p, c);
		c->state = CH_FAILED;
		if (c->pins)
			pthread_cond_broadcast(&p->done);
	}
	c->dropped = true;
	if (c->state != CH_BUSY && c->pins == 0)
		chunk_free(p, c);
}

/* Drop the first @n chunks of @a's window. */
static void win_drop_front(struct fs_ahead *a, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		chunk_drop(a->pool, a->win[i]);
	memmove(a->win, a->win + n, (a->n_win - n) * sizeof(a->win[0]));
	a->n_win -= n;
}

static uint64_t win_end(const struct fs_ahead *a)
{
	return a->n_win ? a->win[a->n_win - 1]->off + a->win[a->n_win - 1]->len : a->next_off;
}

/* Where the chunk starting at @from ends: past the pool's chunk size, where a block starts. */
static uint64_t cut_after(struct fs_ahead *a, uint64_t from)
{
	const size_t chunk = a->pool->chunk;
	uint64_t target = from + chunk, at;

	if (target + chunk / 4 >= a->size)
		return a->size;
	if (!a->plan || tfs_cursor_block_start(a->plan, target, &at) < 0 ||
	    at < from + chunk / 2)
		return target;
	return at;
}

/* Queue chunks until the window is full, the file ends or the budget is spent. */
static void top_up(struct fs_ahead *a)
{
	struct fs_ahead_pool *p = a->pool;

	while (a->n_win < FS_AHEAD_DEPTH && a->next_off < a->size) {
		uint64_t end = cut_after(a, a->next_off);
		struct chunk *c;

		c = calloc(1, sizeof(*c));
		if (c)
			c->data = buf_get(p);
		if (!c || !c->data) {
			free(c);
			return;
		}
		c->a = a;
		c->off = a->next_off;
		c->len = (size_t)(end - a->next_off);
		assert(c->len <= p->buf_cap);
		c->state = CH_QUEUED;
		if (p->tail)
			p->tail->next = c;
		else
			p->head = c;
		p->tail = c;
		a->win[a->n_win++] = c;
		a->next_off = end;
		/* not a signal: glibc can lose one (sourceware bug 25847, in Debian 12) */
		pthread_cond_broadcast(&p->work);
	}
}

/* ---- workers ---- */

/* Render @c through worker @id's handle of its file. @return 0 or -errno */
static int render(struct fs_ahead *a, unsigned int id, struct chunk *c)
{
	size_t done = 0;
	int rc;

	if (!a->h[id]) {
		rc = fs_vfile_open(a->vt, a->ino, &a->h[id]);
		if (rc < 0)
			return rc;
	}
	while (done < c->len) {
		ssize_t got = fs_vfile_read(a->h[id], c->data + done, c->len - done, c->off + done);

		if (got <= 0)
			return got < 0 ? (int)got : -EIO;
		done += (size_t)got;
	}
	return 0;
}

static void *worker(void *arg)
{
	struct worker_arg *wa = arg;
	struct fs_ahead_pool *p = wa->pool;
	const unsigned int id = wa->id;

	free(wa);
	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct chunk *c = p->head;
		struct fs_ahead *a;
		int rc;

		if (!c) {
			pthread_cond_wait(&p->work, &p->lock);
			continue;
		}
		unqueue(p, c);
		c->state = CH_BUSY;
		a = c->a;
		a->busy++;
		pthread_mutex_unlock(&p->lock);
		rc = render(a, id, c);
		pthread_mutex_lock(&p->lock);
		c->state = rc == 0 ? CH_READY : CH_FAILED;
		a->busy--;
		if (c->dropped && c->pins == 0)
			chunk_free(p, c);
		pthread_cond_broadcast(&p->done);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int fs_ahead_pool_new(unsigned int n_workers, size_t budget, size_t chunk,
		      struct fs_ahead_pool **out)
{
	struct fs_ahead_pool *p;
	int rc = 0;

	*out = NULL;
	if (n_workers == 0)
		return 0;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->threads = calloc(n_workers, sizeof(*p->threads));
	if (!p->threads) {
		free(p);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	p->budget = budget;
	p->chunk = chunk > 0 ? chunk : 1;
	p->buf_cap = p->chunk + p->chunk / 4 + sizeof(void *);
	p->n_workers = n_workers;
	for (unsigned int i = 0; i < n_workers && rc == 0; i++) {
		struct worker_arg *wa = malloc(sizeof(*wa));

		if (!wa) {
			rc = -ENOMEM;
			break;
		}
		*wa = (struct worker_arg){p, i};
		rc = -pthread_create(&p->threads[i], NULL, worker, wa);
		if (rc < 0)
			free(wa);
		else
			p->n_started++;
	}
	if (rc < 0) {
		fs_ahead_pool_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

void fs_ahead_pool_free(struct fs_ahead_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (unsigned int i = 0; i < p->n_started; i++)
		pthread_join(p->threads[i], NULL);
	while (p->spare) {
		void *d = p->spare;

		memcpy(&p->spare, d, sizeof(void *));
		munmap(d, p->buf_cap);
	}
	pthread_cond_destroy(&p->done);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p);
}

/* ---- readers ---- */

/*
 * A cursor over the one stream view that file @ino shows, in the file's byte order, to cut
 * chunks at value blocks; NULL when it is made otherwise (those are cut anywhere).
 */
static struct tfs_cursor *plan_new(struct tfs_trace *t, struct fs_vtree *vt, uint64_t ino,
				   uint64_t size)
{
	struct tfs_cursor *c = NULL;
	struct fs_view_seg *segs;
	uint32_t call, n;
	int view;

	if (fs_vtree_file_views(vt, ino, &view, &call, &segs, &n) < 0)
		return NULL;
	if (n == 1 && call == 0 &&
	    tfs_cursor_new(t, segs[0].stream, view, segs[0].first, segs[0].n, &c) == 0 &&
	    tfs_cursor_size(c) != size) {
		tfs_cursor_free(c); /* not the file's bytes after all: cut anywhere */
		c = NULL;
	}
	free(segs);
	return c;
}

int fs_ahead_new(struct fs_ahead_pool *p, struct tfs_trace *t, struct fs_vtree *vt,
		 uint64_t ino, struct fs_ahead **out)
{
	struct fs_node_info info;
	struct fs_ahead *a;
	int rc;

	*out = NULL;
	rc = fs_vtree_stat(vt, ino, &info);
	if (rc < 0)
		return rc;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->h = calloc(p->n_workers, sizeof(*a->h));
	if (!a->h) {
		free(a);
		return -ENOMEM;
	}
	a->pool = p;
	a->vt = vt;
	a->ino = ino;
	a->size = info.size;
	a->plan = plan_new(t, vt, ino, info.size);
	*out = a;
	return 0;
}

void fs_ahead_free(struct fs_ahead *a)
{
	struct fs_ahead_pool *p;

	if (!a)
		return;
	p = a->pool;
	pthread_mutex_lock(&p->lock);
	win_drop_front(a, a->n_win);
	while (a->busy || a->spans)
		pthread_cond_wait(&p->done, &p->lock);
	pthread_mutex_unlock(&p->lock);
	for (unsigned int i = 0; i < p->n_workers; i++)
		fs_vfile_close(a->h[i]);
	tfs_cursor_free(a->plan);
	free(a->h);
	free(a);
}

void fs_ahead_start(struct fs_ahead *a, uint64_t off)
{
	pthread_mutex_lock(&a->pool->lock);
	win_drop_front(a, a->n_win);
	a->seq = SEQ_START;
	a->last_end = off;
	a->next_off = off;
	top_up(a);
	pthread_mutex_unlock(&a->pool->lock);
}

/* Whether a read at @off follows on from the reader's last one. */
static bool follows(const struct fs_ahead *a, uint64_t off)
{
	return off + SEQ_SLACK >= a->last_end && off <= a->last_end + SEQ_SLACK;
}

/* Pin the chunks of [off, end) (inside the window) into @sp and wait until rendered. */
static bool serve(struct fs_ahead *a, uint64_t off, uint64_t end, struct fs_span *sp)
{
	struct fs_ahead_pool *p = a->pool;
	unsigned int i = 0;
	bool ok = true;

	while (a->win[i]->off + a->win[i]->len <= off)
		i++;
	sp->n = 0;
	for (; i < a->n_win && a->win[i]->off < end; i++) {
		struct chunk *c = a->win[i];
		uint64_t from = off > c->off ? off : c->off;
		uint64_t to = end < c->off + c->len ? end : c->off + c->len;

		if (sp->n == FS_SPAN_MAX)
			return false; /* a request over more chunks than a span holds: read it */
		c->pins++;
		sp->pin[sp->n] = c;
		sp->iov[sp->n].iov_base = c->data + (from - c->off);
		sp->iov[sp->n].iov_len = (size_t)(to - from);
		sp->n++;
	}
	for (int k = 0; k < sp->n; k++) {
		struct chunk *c = sp->pin[k];

		while (c->state == CH_QUEUED || c->state == CH_BUSY)
			pthread_cond_wait(&p->done, &p->lock);
		ok &= c->state == CH_READY;
	}
	return ok;
}

static void unpin(struct fs_ahead_pool *p, struct fs_span *sp)
{
	for (int k = 0; k < sp->n; k++) {
		struct chunk *c = sp->pin[k];

		if (--c->pins == 0 && c->dropped && c->state != CH_BUSY)
			chunk_free(p, c);
	}
	sp->n = 0;
}

bool fs_ahead_get(struct fs_ahead *a, uint64_t off, size_t len, struct fs_span *sp)
{
	struct fs_ahead_pool *p = a->pool;
	uint64_t end;
	bool served = false;

	sp->n = 0;
	if (off >= a->size || len == 0)
		return false;
	end = len > a->size - off ? a->size : off + len;
	pthread_mutex_lock(&p->lock);
	if (a->n_win && off >= a->win[0]->off && end <= win_end(a)) {
		served = serve(a, off, end, sp);
		if (served)
			a->spans++;
		else
			unpin(p, sp);
	} else if (a->n_win && off + SEQ_SLACK >= a->win[0]->off &&
		   off <= win_end(a) + SEQ_SLACK) {
		/* near the window: a request that overtook or trails the others */
	} else if (follows(a, off)) {
		a->seq++;
	} else {
		win_drop_front(a, a->n_win);
		a->seq = 0;
	}
	if (end > a->last_end || !follows(a, off))
		a->last_end = end;
	if (a->n_win) {
		/* the reader is past the chunks before the one it reads */
		unsigned int k = 0;

		while (k < a->n_win && a->win[k]->off + a->win[k]->len <= off)
			k++;
		win_drop_front(a, k);
		if (!a->n_win)
			a->next_off = end > a->next_off ? end : a->next_off;
	} else if (a->seq >= SEQ_START) {
		a->next_off = a->last_end;
	}
	if (a->seq >= SEQ_START)
		top_up(a);
	pthread_mutex_unlock(&p->lock);
	return served;
}

void fs_ahead_put(struct fs_ahead *a, struct fs_span *sp)
{
	if (sp->n == 0)
		return;
	pthread_mutex_lock(&a->pool->lock);
	unpin(a->pool, sp);
	if (--a->spans == 0)
		pthread_cond_broadcast(&a->pool->done);
	pthread_mutex_unlock(&a->pool->lock);
}
