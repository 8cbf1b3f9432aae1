/*
 * The heap of a rank, as memtrace and heaptrack show one: heap.txt (calls and bytes, peak
 * live bytes with the call stacks live at the peak, leaks grouped by call stack, temporary
 * allocations, a histogram of the freed blocks' lifetimes), leaks.folded (leaked bytes per
 * call stack, for flame graphs) and the
 * live-bytes series that trace.json draws as a counter. The heap is the malloc family:
 * kinds of category "alloc" but the mappings (mmap, munmap, mremap), which heaptrack leaves
 * out too. A block is known by its allocation id when the trace has ids (the capture's `id`
 * and realloc's `freed`), else by its address. The rank's threads are replayed together in
 * order of their calls' ends (each call takes effect when it returns; without timing,
 * thread after thread). An exec ends the blocks live in the image it replaces: they are
 * leaks of that image, and no longer live (the new image's peak does not count them). An
 * exec is known from the capture's `exec` events (recorded when threads are traced) that no
 * `exec_failed` of their thread follows. Its effect is placed where the exec call began:
 * a call of another thread of the old image that ends after that counts in the new image,
 * and so, untimed, does every call of the old image's threads replayed after the exec's. Two
 * passes: one finds the peak and the leaks, the second stops at the peak to see what was
 * live there. Computed once per rank and kept; memory is the blocks live at once and those
 * the execs ended.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vpict_i.h"

#define NO_STACK UINT64_MAX
#define N_SAMPLES 2048	/* time buckets of the live-bytes series */
#define MAX_ROWS 200	/* call stacks listed per table of heap.txt */
#define N_LIFE 65	/* lifetime buckets: [0, 1), then [2^(b-1), 2^b) for b = 1..64 */

enum role { H_NONE, H_ALLOC, H_FREE, H_REALLOC, H_EXEC, H_EXEC_FAILED, H_DROPPED };

/* Where a heap kind keeps what the replay needs (argument indices, -1: none). */
struct hkind {
	uint8_t role;
	int8_t id, freed, addr, ptr, size, nmemb, stack, ret;
	int8_t count; /* H_DROPPED: how many events the mark stands for */
};

/* One block alive: its key (id or address), bytes, call stack and when it was made. */
struct block {
	uint64_t key, bytes, stack;
	uint64_t born; /* end of the call that made it (ns), untimed its replay step */
	bool used;
};

struct blockmap {
	struct block *v;
	size_t cap, n; /* cap: a power of two */
};

/* Bytes and blocks per call stack. */
struct bystack {
	uint64_t stack, bytes, blocks;
};

struct fs_heap {
	uint64_t n_alloc, alloc_bytes, n_free, n_temp, n_unknown_free;
	uint64_t peak, peak_blocks, peak_ts, peak_step;
	uint32_t peak_thread;
	uint64_t peak_index;
	uint64_t leaked, leaked_blocks;
	uint64_t exec_bytes, exec_blocks; /* of the leaks, those an exec ended */
	uint64_t n_dropped;		  /* events the capture dropped (a full spool) */
	struct bystack *at_peak, *leaks;
	size_t n_at_peak, n_leaks;
	struct fs_heap_sample *series;
	size_t n_series;
	/* lifetimes of the blocks freed: blocks and bytes per log2 bucket (N_LIFE) */
	uint64_t life_blocks[N_LIFE], life_bytes[N_LIFE];
};

/* ---- kinds ---- */

static int8_t arg_named(const struct fs_kind *k, const char *name)
{
	for (uint32_t i = 0; i < k->n_args; i++) {
		if (!strcmp(k->args[i].name, name))
			return (int8_t)i;
	}
	return -1;
}

static void hkind_fill(const struct fs_kind *k, struct hkind *h)
{
	static const char *const maps[] = {"mmap", "mmap64", "munmap", "mremap"};

	memset(h, 0xff, sizeof(*h));
	h->role = H_NONE;
	if (!strcmp(k->category, "threads") && !strcmp(k->name, "exec")) {
		h->role = H_EXEC; /* the capture's, written before the call: maybe a failed one */
		return;
	}
	if (!strcmp(k->category, "threads") && !strcmp(k->name, "exec_failed")) {
		h->role = H_EXEC_FAILED;
		return;
	}
	if (!strcmp(k->category, "capture") && !strcmp(k->name, "dropped")) {
		h->role = H_DROPPED; /* the capture's mark where its spool was full */
		h->count = arg_named(k, "count");
		return;
	}
	if (strcmp(k->category, "alloc"))
		return;
	for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
		if (!strcmp(k->name, maps[i]))
			return;
	}
	h->id = arg_named(k, "id");
	h->freed = arg_named(k, "freed");
	h->ptr = arg_named(k, "ptr");
	h->nmemb = arg_named(k, "nmemb");
	for (uint32_t i = 0; i < k->n_args; i++) {
		const struct tfs_arg_desc *a = &k->args[i];

		if ((a->flags & TFS_ARG_BYTES) && h->size < 0)
			h->size = (int8_t)i;
		if ((a->flags & TFS_ARG_RESULT) && a->type == TFS_TYPE_HEX)
			h->addr = (int8_t)i;
		if ((a->flags & TFS_ARG_RESULT) && a->type == TFS_TYPE_I64)
			h->ret = (int8_t)i;
		if (a->enc == TFS_ENC_SYM && a->sym_class && !strcmp(a->sym_class, "stack"))
			h->stack = (int8_t)i;
	}
	if (!strcmp(k->name, "calloc"))
		h->size = arg_named(k, "size");
	if (!strcmp(k->name, "free") || !strcmp(k->name, "cfree"))
		h->role = H_FREE;
	else if (!strcmp(k->name, "realloc") || !strcmp(k->name, "reallocarray"))
		h->role = H_REALLOC;
	else if (h->size >= 0 && (h->addr >= 0 || h->ptr >= 0))
		h->role = H_ALLOC;
	if (h->addr < 0 && h->role == H_ALLOC)
		h->addr = h->ptr; /* posix_memalign: the block comes back through ptr */
}

bool fs_heap_wanted(struct fs_vtree *vt, uint32_t rank)
{
	struct hkind h;

	(void)rank;
	for (uint32_t k = 0; k < vt->ti.n_kinds; k++) {
		hkind_fill(&vt->kinds[k], &h);
		if (h.role != H_NONE && h.role != H_EXEC && h.role != H_EXEC_FAILED &&
		    h.role != H_DROPPED)
			return true;
	}
	return false;
}

/* ---- live blocks ---- */

static uint64_t mix(uint64_t k)
{
	k ^= k >> 33;
	k *= UINT64_C(0xff51afd7ed558ccd);
	return k ^ (k >> 33);
}

static int map_grow(struct blockmap *m)
{
	size_t cap = m->cap ? 2 * m->cap : 1024;
	struct block *v = calloc(cap, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		size_t j;

		if (!m->v[i].used)
			continue;
		for (j = mix(m->v[i].key) & (cap - 1); v[j].used; j = (j + 1) & (cap - 1))
			;
		v[j] = m->v[i];
	}
	free(m->v);
	m->v = v;
	m->cap = cap;
	return 0;
}

static struct block *map_find(const struct blockmap *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	for (size_t j = mix(key) & (m->cap - 1); m->v[j].used; j = (j + 1) & (m->cap - 1)) {
		if (m->v[j].key == key)
			return &m->v[j];
	}
	return NULL;
}

/* Insert or replace. @return 0 or -ENOMEM */
static int map_put(struct blockmap *m, const struct block *b)
{
	struct block *e = map_find(m, b->key);
	size_t j;

	if (e) {
		*e = *b;
		return 0;
	}
	if (2 * (m->n + 1) > m->cap && map_grow(m) < 0)
		return -ENOMEM;
	for (j = mix(b->key) & (m->cap - 1); m->v[j].used; j = (j + 1) & (m->cap - 1))
		;
	m->v[j] = *b;
	m->v[j].used = true;
	m->n++;
	return 0;
}

/* Remove @e (found by map_find), shifting later entries of its probe run back. */
static void map_del(struct blockmap *m, struct block *e)
{
	size_t i = (size_t)(e - m->v), j = i;

	m->v[i].used = false;
	m->n--;
	for (;;) {
		size_t home;

		j = (j + 1) & (m->cap - 1);
		if (!m->v[j].used)
			return;
		home = mix(m->v[j].key) & (m->cap - 1);
		/* move j to i unless its home lies cyclically in (i, j] */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			m->v[i] = m->v[j];
			m->v[j].used = false;
			i = j;
		}
	}
}

/* ---- the replay ---- */

struct thread_pos {
	const struct fs_seg *seg;
	struct tfs_cursor *c;
	uint64_t next;		/* next event index to look at */
	struct tfs_event ev;	/* the current heap event, when has */
	uint64_t end;		/* its end time */
	bool has;
};

struct replay {
	struct fs_vtree *vt;
	struct hkind *kinds;
	struct thread_pos *th;
	uint32_t n_th;
	bool untimed;
	struct blockmap live;
	struct block *gone; /* the blocks execs ended (first pass) */
	size_t n_gone, gone_cap;
	uint64_t live_bytes, step, last_alloc_key;
	bool last_was_alloc;
	struct fs_heap *h;
	uint64_t stop_step;	/* the second pass stops here */
	/* the series: per bucket its largest value and where it ended */
	uint64_t bucket_ns, cur_bucket, cur_max, cur_max_ts, cur_last, cur_last_ts;
	bool cur_has;
	size_t series_cap;
};

static uint64_t arg_u(const struct tfs_event *ev, int8_t i)
{
	return i >= 0 && (uint32_t)i < ev->n_args ? ev->args[i].u : 0;
}

/*
 * Whether the exec whose event thread @t holds failed: an exec_failed of the thread follows
 * it before any other exec. (A successful one is the last call of its thread but for the
 * capture's own few, so the look ahead is short.) *@rc: 0 or a reader error
 */
static bool exec_failed(struct replay *r, struct thread_pos *t, int *rc)
{
	const uint64_t end = t->seg->first + t->seg->n_events;
	struct tfs_event ev;

	for (uint64_t i = t->next; i < end; i++) {
		*rc = tfs_cursor_event(t->c, i, &ev, NULL);
		if (*rc < 0)
			return false;
		if (r->kinds[ev.kind].role == H_EXEC_FAILED)
			return true;
		if (r->kinds[ev.kind].role == H_EXEC)
			return false;
	}
	return false;
}

/* Move thread @t to its next heap event. @return 0 or a reader error */
static int advance(struct replay *r, struct thread_pos *t)
{
	const struct fs_seg *s = t->seg;
	int rc = 0;

	t->has = false;
	while (t->next < s->first + s->n_events) {
		rc = tfs_cursor_event(t->c, t->next++, &t->ev, NULL);
		if (rc < 0)
			return rc;
		if (r->kinds[t->ev.kind].role == H_DROPPED && r->stop_step == UINT64_MAX)
			r->h->n_dropped = fs_sat_add(r->h->n_dropped,
						     arg_u(&t->ev, r->kinds[t->ev.kind].count));
		if (r->kinds[t->ev.kind].role == H_NONE ||
		    r->kinds[t->ev.kind].role == H_EXEC_FAILED ||
		    r->kinds[t->ev.kind].role == H_DROPPED)
			continue;
		/* its arguments may be gone after the look ahead; an exec needs none */
		if (r->kinds[t->ev.kind].role == H_EXEC && (exec_failed(r, t, &rc) || rc < 0)) {
			if (rc < 0)
				return rc;
			continue;
		}
		t->has = true;
		t->end = t->ev.ts_ns + t->ev.dur_ns;
		return 0;
	}
	return 0;
}

/* The thread whose heap event comes next: earliest end, then thread order. */
static struct thread_pos *next_thread(struct replay *r)
{
	struct thread_pos *best = NULL;

	for (uint32_t i = 0; i < r->n_th; i++) {
		struct thread_pos *t = &r->th[i];

		if (!t->has)
			continue;
		if (r->untimed)
			return t;
		if (!best || t->end < best->end)
			best = t;
	}
	return best;
}

static int add_sample(struct replay *r, uint64_t ts, uint64_t bytes)
{
	struct fs_heap *h = r->h;

	if (h->n_series == r->series_cap) {
		size_t cap = r->series_cap ? 2 * r->series_cap : 256;
		struct fs_heap_sample *v = realloc(h->series, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		h->series = v;
		r->series_cap = cap;
	}
	h->series[h->n_series++] = (struct fs_heap_sample){ts, bytes};
	return 0;
}

/* The series keeps per time bucket its largest value and its last one. */
static int flush_bucket(struct replay *r)
{
	int rc = 0;

	if (!r->cur_has)
		return 0;
	rc = add_sample(r, r->cur_max_ts, r->cur_max);
	if (rc == 0 && (r->cur_last_ts != r->cur_max_ts || r->cur_last != r->cur_max))
		rc = add_sample(r, r->cur_last_ts, r->cur_last);
	r->cur_has = false;
	return rc;
}

static int note_live(struct replay *r, uint64_t ts)
{
	uint64_t b = ts / r->bucket_ns;
	int rc = 0;

	if (r->untimed || r->stop_step != UINT64_MAX)
		return 0;
	if (r->cur_has && b != r->cur_bucket)
		rc = flush_bucket(r);
	if (!r->cur_has || r->live_bytes > r->cur_max) {
		r->cur_max = r->live_bytes;
		r->cur_max_ts = ts;
	}
	r->cur_bucket = b;
	r->cur_last = r->live_bytes;
	r->cur_last_ts = ts;
	r->cur_has = true;
	return rc;
}

/* Block @b ends at @now (as its `born`): its lifetime's bucket (first pass only). */
static void note_lifetime(struct replay *r, const struct block *b, uint64_t now)
{
	uint64_t life = now > b->born ? now - b->born : 0;
	unsigned k = life ? 64 - (unsigned)__builtin_clzll(life) : 0;

	if (r->stop_step != UINT64_MAX)
		return;
	r->h->life_blocks[k]++;
	r->h->life_bytes[k] = fs_sat_add(r->h->life_bytes[k], b->bytes);
}

static void release(struct replay *r, uint64_t key, uint64_t now)
{
	struct block *b = map_find(&r->live, key);

	bool first = r->stop_step == UINT64_MAX;

	if (!b) {
		r->h->n_unknown_free += first;
		return;
	}
	if (r->last_was_alloc && r->last_alloc_key == key)
		r->h->n_temp += first; /* heaptrack: no other allocation or free between */
	note_lifetime(r, b, now);
	r->live_bytes -= b->bytes;
	map_del(&r->live, b);
}

/* An exec: the image's live blocks are its leaks, kept apart (first pass), and end here. */
static int end_image(struct replay *r, const struct tfs_event *ev)
{
	if (r->stop_step == UINT64_MAX && r->live.n) {
		if (r->n_gone + r->live.n > r->gone_cap) {
			size_t cap = 2 * (r->n_gone + r->live.n);
			struct block *v = realloc(r->gone, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			r->gone = v;
			r->gone_cap = cap;
		}
		for (size_t i = 0; i < r->live.cap; i++) {
			if (r->live.v[i].used)
				r->gone[r->n_gone++] = r->live.v[i];
		}
		r->h->exec_bytes = fs_sat_add(r->h->exec_bytes, r->live_bytes);
		r->h->exec_blocks += r->live.n;
	}
	if (r->live.v)
		memset(r->live.v, 0, r->live.cap * sizeof(*r->live.v));
	r->live.n = 0;
	r->live_bytes = 0;
	r->last_was_alloc = false;
	return note_live(r, ev->ts_ns + ev->dur_ns);
}

static int take(struct replay *r, const struct tfs_event *ev, uint32_t thread)
{
	const struct hkind *k = &r->kinds[ev->kind];
	struct fs_heap *h = r->h;
	uint64_t id = arg_u(ev, k->id), addr = arg_u(ev, k->addr), key, bytes;
	/* when the call took effect: lifetimes count from and to it */
	const uint64_t now = r->untimed ? r->step : ev->ts_ns + ev->dur_ns;
	struct block *old_b;
	bool ok = true;
	int rc;

	if (k->role == H_EXEC)
		return end_image(r, ev);
	if (k->role == H_FREE || k->role == H_REALLOC) {
		uint64_t old = k->role == H_FREE ? id : arg_u(ev, k->freed);

		/* ids: realloc in place keeps its id and frees none (freed=0) */
		if (!id)
			old = arg_u(ev, k->ptr);
		if (k->role == H_REALLOC && !addr && arg_u(ev, k->size))
			return 0; /* a failed realloc keeps its block */
		if (old) {
			h->n_free += r->stop_step == UINT64_MAX;
			release(r, old, now);
		} else if (k->role == H_REALLOC && id && r->last_was_alloc &&
			   r->last_alloc_key == id) {
			/* in place, as heaptrack counts it: a free of the block just made */
			h->n_temp += r->stop_step == UINT64_MAX;
		}
		r->last_was_alloc = false;
		if (k->role == H_FREE)
			return note_live(r, ev->ts_ns + ev->dur_ns);
	}
	if (k->ret >= 0 && k->addr == k->ptr)
		ok = arg_u(ev, k->ret) == 0; /* posix_memalign */
	if (!addr || !ok)
		return note_live(r, ev->ts_ns + ev->dur_ns);
	key = id ? id : addr;
	bytes = arg_u(ev, k->size);
	if (k->nmemb >= 0) {
		uint64_t m = arg_u(ev, k->nmemb);

		bytes = m && bytes > UINT64_MAX / m ? UINT64_MAX : bytes * m;
	}
	if (r->stop_step == UINT64_MAX) {
		h->n_alloc++;
		h->alloc_bytes = fs_sat_add(h->alloc_bytes, bytes);
	}
	old_b = map_find(&r->live, key);
	if (old_b) {
		/* a realloc in place (its id kept) ends the block and makes another, as heaptrack
		   counts it; else an address given out again: its block was freed where the
		   trace did not see, when is not known */
		if (k->role == H_REALLOC && id)
			note_lifetime(r, old_b, now);
		r->live_bytes -= old_b->bytes;
		map_del(&r->live, old_b);
	}
	rc = map_put(&r->live, &(struct block){key, bytes, k->stack >= 0 ? arg_u(ev, k->stack)
									 : NO_STACK, now, true});
	if (rc < 0)
		return rc;
	r->live_bytes += bytes;
	r->last_alloc_key = key;
	r->last_was_alloc = true;
	if (r->live_bytes > h->peak && r->stop_step == UINT64_MAX) {
		h->peak = r->live_bytes;
		h->peak_blocks = r->live.n;
		h->peak_ts = ev->ts_ns + ev->dur_ns;
		h->peak_step = r->step;
		h->peak_thread = thread;
		h->peak_index = ev->index;
	}
	return note_live(r, ev->ts_ns + ev->dur_ns);
}

static int cmp_bystack(const void *a, const void *b)
{
	const struct bystack *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	if (x->blocks != y->blocks)
		return x->blocks > y->blocks ? -1 : 1;
	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

static int cmp_stack_id(const void *a, const void *b)
{
	const struct bystack *x = a, *y = b;

	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* The live blocks, and the @n_more of @more, summed per call stack, largest first. */
static int group_live(const struct blockmap *m, const struct block *more, size_t n_more,
		      struct bystack **out, size_t *n_out)
{
	struct bystack *v = calloc(m->n + n_more + 1, sizeof(*v));
	size_t n = 0, k = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		if (m->v[i].used)
			v[n++] = (struct bystack){m->v[i].stack, m->v[i].bytes, 1};
	}
	for (size_t i = 0; i < n_more; i++)
		v[n++] = (struct bystack){more[i].stack, more[i].bytes, 1};
	qsort(v, n, sizeof(*v), cmp_stack_id);
	for (size_t i = 0; i < n; i++) {
		if (k && v[k - 1].stack == v[i].stack) {
			v[k - 1].bytes = fs_sat_add(v[k - 1].bytes, v[i].bytes);
			v[k - 1].blocks++;
		} else {
			v[k++] = v[i];
		}
	}
	qsort(v, k, sizeof(*v), cmp_bystack);
	*out = v;
	*n_out = k;
	return 0;
}

static int replay_run(struct replay *r)
{
	int rc = 0;

	r->live.n = 0;
	if (r->live.v)
		memset(r->live.v, 0, r->live.cap * sizeof(*r->live.v));
	r->live_bytes = 0;
	r->step = 0;
	r->last_was_alloc = false;
	for (uint32_t i = 0; i < r->n_th && rc == 0; i++) {
		struct thread_pos *t = &r->th[i];

		t->next = t->seg->first;
		if (!t->c)
			rc = tfs_cursor_new(r->vt->trace, t->seg->stream, TFS_VIEW_TEXT,
					    t->seg->first, t->seg->n_events, &t->c);
		if (rc == 0)
			rc = advance(r, t);
	}
	while (rc == 0) {
		struct thread_pos *t = next_thread(r);

		if (!t || r->step == r->stop_step)
			break;
		rc = take(r, &t->ev, t->seg->thread);
		r->step++;
		if (rc == 0)
			rc = advance(r, t);
	}
	return rc;
}

static int heap_compute(struct fs_vtree *vt, const struct fs_seg *segs, uint32_t n,
			struct fs_heap **out)
{
	struct replay r = {.vt = vt, .untimed = fs_untimed(vt), .stop_step = UINT64_MAX};
	int rc = 0;

	r.h = calloc(1, sizeof(*r.h));
	r.kinds = calloc((size_t)vt->ti.n_kinds + 1, sizeof(*r.kinds));
	r.th = calloc((size_t)n + 1, sizeof(*r.th));
	if (!r.h || !r.kinds || !r.th) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t k = 0; k < vt->ti.n_kinds; k++)
		hkind_fill(&vt->kinds[k], &r.kinds[k]);
	for (uint32_t i = 0; i < n; i++)
		r.th[r.n_th++].seg = &segs[i];
	r.bucket_ns = vt->ti.max_ts_ns / N_SAMPLES + 1;
	rc = replay_run(&r);
	if (rc == 0)
		rc = flush_bucket(&r);
	if (rc == 0) {
		r.h->leaked = fs_sat_add(r.live_bytes, r.h->exec_bytes);
		r.h->leaked_blocks = r.live.n + r.h->exec_blocks;
		rc = group_live(&r.live, r.gone, r.n_gone, &r.h->leaks, &r.h->n_leaks);
	}
	if (rc == 0 && r.h->peak > 0) {
		/* again, up to the allocation that made the peak */
		r.stop_step = r.h->peak_step + 1;
		rc = replay_run(&r);
		if (rc == 0)
			rc = group_live(&r.live, NULL, 0, &r.h->at_peak, &r.h->n_at_peak);
	}
out:
	for (uint32_t i = 0; r.th && i < r.n_th; i++)
		tfs_cursor_free(r.th[i].c);
	free(r.th);
	free(r.kinds);
	free(r.live.v);
	free(r.gone);
	if (rc < 0) {
		fs_heap_free(r.h);
		return rc;
	}
	*out = r.h;
	return 0;
}

void fs_heap_free(struct fs_heap *h)
{
	if (!h)
		return;
	free(h->at_peak);
	free(h->leaks);
	free(h->series);
	free(h);
}

/* The heap of @rank (threads @segs), computed once. */
static int heap_get(struct fs_vtree *vt, uint32_t rank, const struct fs_seg *segs, uint32_t n,
		    struct fs_heap **out)
{
	struct fs_pict_state *ps = vt->pict;
	uint32_t ord;
	int rc = fs_rank_ord(vt, rank, &ord);

	if (rc < 0)
		return -EINVAL;
	pthread_mutex_lock(&ps->heap_lock);
	if (!ps->heap) {
		ps->heap = calloc((size_t)vt->n_rank_dirs + 1, sizeof(*ps->heap));
		if (ps->heap)
			ps->n_heap = vt->n_rank_dirs;
		else
			rc = -ENOMEM;
	}
	if (rc == 0 && ord < ps->n_heap && !ps->heap[ord])
		rc = heap_compute(vt, segs, n, &ps->heap[ord]);
	*out = rc == 0 && ord < ps->n_heap ? ps->heap[ord] : NULL;
	pthread_mutex_unlock(&ps->heap_lock);
	if (rc == 0 && !*out)
		rc = -EINVAL;
	return rc;
}

int fs_heap_series(struct fs_vtree *vt, uint32_t rank, const struct fs_seg *segs, uint32_t n,
		   const struct fs_heap_sample **v, size_t *n_v)
{
	struct fs_heap *h;
	int rc = heap_get(vt, rank, segs, n, &h);

	if (rc < 0)
		return rc;
	*v = h->series;
	*n_v = h->n_series;
	return 0;
}

/* ---- the files ---- */

static void put_stack_line(struct fs_vtree *vt, uint32_t rank, struct fs_sbuf *b,
			   const struct bystack *s)
{
	fs_sb_printf(b, "%12" PRIu64 " %8" PRIu64 "  ", s->bytes, s->blocks);
	if (s->stack == NO_STACK)
		fs_sb_put(b, "[no backtrace]", 14);
	else if (fs_fold_stack(vt, rank, s->stack, b) < 0)
		fs_sb_printf(b, "[stack#%" PRIu64 " unreadable]", s->stack);
	fs_sb_put(b, "\n", 1);
}

static void put_table(struct fs_vtree *vt, uint32_t rank, struct fs_sbuf *b, const char *what,
		      const struct bystack *v, size_t n)
{
	fs_sb_printf(b, "\n# %s, by call stack, largest first (bytes, blocks, stack "
		     "outermost first)%s\n", what, n > MAX_ROWS ? "; the largest 200" : "");
	for (size_t i = 0; i < n && i < MAX_ROWS; i++)
		put_stack_line(vt, rank, b, &v[i]);
}

/*
 * The histogram of the freed blocks' lifetimes: per log2 bucket [from, to) the blocks and
 * their bytes, empty buckets left out.
 */
static void put_lifetimes(struct fs_sbuf *b, const struct fs_heap *h, bool untimed)
{
	fs_sb_printf(b, "\n# lifetimes of the blocks freed, in %s from the call that made a block "
		     "to the one that freed it (a realloc frees its block and makes another; "
		     "leaks are above), log2 buckets: lifetime from to (%s), blocks, bytes\n",
		     untimed ? "heap calls of the rank" : "ns", untimed ? "calls" : "ns");
	for (unsigned k = 0; k < N_LIFE; k++) {
		uint64_t from = k ? UINT64_C(1) << (k - 1) : 0;
		uint64_t to = k == 64 ? UINT64_MAX : UINT64_C(1) << k;

		if (h->life_blocks[k])
			fs_sb_printf(b, "lifetime %20" PRIu64 " %20" PRIu64 " %10" PRIu64 " %14" PRIu64
				     "\n", from, to, h->life_blocks[k], h->life_bytes[k]);
	}
}

int fs_heap_new(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank, char **out,
		size_t *len)
{
	struct fs_sbuf b = {0};
	struct fs_proc q = {0};
	struct fs_heap *h;
	uint64_t dropped;
	char proc[300];
	int rc = heap_get(vt, rank, sc->segs, sc->n_segs, &h);

	if (rc < 0)
		return rc;
	fs_proc_name(vt->procs, rank, proc, sizeof(proc));
	fs_sb_printf(&b, "# heap of rank %" PRIu32 " (", rank);
	fs_sb_name(&b, proc, NULL);
	fs_sb_printf(&b, "): the malloc family, replayed in the order calls returned\n");
	fs_sb_printf(&b, "allocations %" PRIu64 " calls, %" PRIu64 " bytes\n", h->n_alloc,
		     h->alloc_bytes);
	fs_sb_printf(&b, "frees %" PRIu64 " calls (%" PRIu64 " of blocks not seen allocated)\n",
		     h->n_free, h->n_unknown_free);
	fs_sb_printf(&b, "temporary %" PRIu64 " allocations (freed by the next heap call of the "
		     "rank)\n", h->n_temp);
	fs_sb_printf(&b, "peak %" PRIu64 " bytes in %" PRIu64 " blocks", h->peak, h->peak_blocks);
	if (h->peak && fs_untimed(vt))
		fs_sb_printf(&b, " at T%" PRIu32 ":%" PRIu64 "\n", h->peak_thread, h->peak_index);
	else if (h->peak)
		fs_sb_printf(&b, " at %" PRIu64 ".%09" PRIu64 " s (T%" PRIu32 ":%" PRIu64 ")\n",
			     h->peak_ts / 1000000000, h->peak_ts % 1000000000, h->peak_thread,
			     h->peak_index);
	else
		fs_sb_put(&b, "\n", 1);
	fs_sb_printf(&b, "leaked %" PRIu64 " bytes in %" PRIu64 " blocks (not freed by the end)\n",
		     h->leaked, h->leaked_blocks);
	if (h->exec_blocks)
		fs_sb_printf(&b, "  of which %" PRIu64 " bytes in %" PRIu64 " blocks live at an exec "
			     "(its image replaced)\n", h->exec_bytes, h->exec_blocks);
	/* the marks of the rank's threads, and the drops of threads that ended unmarked */
	dropped = h->n_dropped;
	if (vt->procs) {
		fs_proc_at(vt->procs, rank, &q);
		if (q.dropped_unplaced > 0)
			dropped = fs_sat_add(dropped, (uint64_t)q.dropped_unplaced);
	}
	if (dropped)
		fs_sb_printf(&b, "dropped %" PRIu64 " events (the spool was full, or a thread called "
			     "past its end in the capture, glibc's last cleanup of it): the calls among "
			     "them are missing here, a block whose free was dropped counts as leaked "
			     "and a free whose block's allocation was dropped as not seen allocated\n",
			     dropped);
	put_table(vt, rank, &b, "live at the peak", h->at_peak, h->n_at_peak);
	put_table(vt, rank, &b, "leaked", h->leaks, h->n_leaks);
	put_lifetimes(&b, h, fs_untimed(vt));
	return fs_sb_detach(&b, out, len);
}

struct folded_row {
	char *key;
	uint64_t bytes;
};

static int cmp_row_key(const void *a, const void *b)
{
	return strcmp(((const struct folded_row *)a)->key, ((const struct folded_row *)b)->key);
}

/* As allocs.folded: one line per folded stack, sorted, stacks that print the same summed. */
int fs_leaks_new(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank, char **out,
		 size_t *len)
{
	struct fs_sbuf b = {0}, key = {0};
	struct folded_row *rows;
	struct fs_heap *h;
	size_t n = 0;
	int rc = heap_get(vt, rank, sc->segs, sc->n_segs, &h);

	if (rc < 0)
		return rc;
	rows = calloc(h->n_leaks + 1, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	for (size_t i = 0; i < h->n_leaks && rc == 0; i++) {
		if (!h->leaks[i].bytes)
			continue;
		key.len = 0;
		if (h->leaks[i].stack == NO_STACK)
			fs_sb_put(&key, "[no backtrace]", 14);
		else
			rc = fs_fold_stack(vt, rank, h->leaks[i].stack, &key);
		fs_sb_put(&key, "", 1);
		if (rc == 0 && key.failed)
			rc = -ENOMEM;
		if (rc == 0 && !(rows[n].key = strdup(key.data)))
			rc = -ENOMEM;
		if (rc == 0)
			rows[n++].bytes = h->leaks[i].bytes;
	}
	if (rc == 0 && n > 1)
		qsort(rows, n, sizeof(*rows), cmp_row_key);
	for (size_t i = 0; i < n && rc == 0; i++) {
		uint64_t bytes = rows[i].bytes;

		while (i + 1 < n && !strcmp(rows[i].key, rows[i + 1].key))
			bytes = fs_sat_add(bytes, rows[++i].bytes);
		fs_sb_printf(&b, "%s %" PRIu64 "\n", rows[i].key, bytes);
	}
	for (size_t i = 0; i < n; i++)
		free(rows[i].key);
	free(rows);
	free(key.data);
	if (rc < 0) {
		free(b.data);
		return rc;
	}
	return fs_sb_detach(&b, out, len);
}
