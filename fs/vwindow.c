/*
 * Time windows: window/<from>-<to>/ under the root and under each rank, holding trace.json,
 * trace.txt and timeline.svg of just that span of time. <from> and <to> are nanoseconds
 * since the trace's clock origin (without timing: event indices), to > from. window/ lists
 * two fixed zoom levels over the time up to its directory's last event (its quarters and
 * sixteenths: whole_span(), at least 16 units, so that the twenty differ); a lookup
 * of any other name makes that window, and also accepts a unit (ns, us, ms, s) and a
 * fraction: `window/1.5ms-2ms` is `window/1500000-2000000`.
 *
 * A window is made when it is first looked up or listed, never at open: each thread's
 * events are found by binary search on their times (start order: the events that start in
 * the window; end order: those that end in it), each probe decoding one value block, so a
 * window costs O(log n) blocks per thread whatever the trace's length. Its nodes have indices
 * from FS_WINDOW_IDX on, in chunks of their own that never move (inodes stay valid for the tree's life). At most
 * MAX_WINDOWS windows per tree; lookups past that fail with ENOSPC.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vpict_i.h"

#define CHUNK 1024	   /* nodes per chunk */
#define MAX_CHUNKS 64	   /* 65536 window nodes */
#define MAX_WINDOWS 16384 /* four nodes each */
#define N_FIXED 20	   /* listed: 4 quarters, then 16 sixteenths */
#define N_FIXED_MIN_SPAN 16 /* ... of at least this span: fixed() */
#define SPAN_SEGS_MAX 4096 /* threads whose last events whole_span() reads */

/* One window/ directory: what its windows cut, and the windows made so far. */
struct wdir {
	struct fs_scope *base; /* borrowed from the tree */
	uint32_t rank;	       /* UINT32_MAX: the root's */
	uint32_t node;	       /* the window/ node */
	uint64_t span;	       /* the whole span: windows of the fixed levels cut [0, span) */
};

/* A window made: its directory node, keyed by (wdir, from, to). */
struct win {
	uint32_t wdir;
	uint64_t from, to;
	uint32_t node;
	struct fs_scope *scope; /* owned */
};

struct fs_windows {
	pthread_mutex_t lock;	/* guards making windows; readers only take published nodes */
	struct wdir *dirs;
	uint32_t n_dirs, dirs_cap;
	struct win *wins;	/* by creation order; lookups scan (they are few) */
	uint32_t n_wins, wins_cap;
	struct vnode *chunk[MAX_CHUNKS];
	_Atomic uint32_t n_nodes; /* published (release) after a node is complete */
	uint32_t n_made;	/* nodes filled, under the lock */
};

static struct fs_windows *windows_of(const struct fs_vtree *vt)
{
	return vt->windows;
}

/* ---- the window/ directories (at build) ---- */

int fs_windows_add(struct fs_vtree *vt, uint32_t dir, struct fs_scope *sc, uint32_t rank,
		   uint64_t key)
{
	struct fs_windows *w = vt->windows;
	int64_t node;
	int rc = 0;

	/* the root's comes at the build, ranks' under the tree's grow lock */
	if (!w) {
		w = calloc(1, sizeof(*w));
		if (!w)
			return -ENOMEM;
		pthread_mutex_init(&w->lock, NULL);
		vt->windows = w;
	}
	node = fs_tree_add_dir(vt, dir, "window", key);
	if (node < 0)
		return (int)node;
	pthread_mutex_lock(&w->lock); /* lookups read dirs under it */
	if (w->n_dirs == w->dirs_cap) {
		uint32_t cap = w->dirs_cap ? 2 * w->dirs_cap : 8;
		struct wdir *d = realloc(w->dirs, (size_t)cap * sizeof(*d));

		if (d) {
			w->dirs = d;
			w->dirs_cap = cap;
		} else {
			rc = -ENOMEM;
		}
	}
	if (rc == 0) {
		/* the span at the first window: the root's segments come at their first use */
		w->dirs[w->n_dirs] = (struct wdir){sc, rank, (uint32_t)node, 0};
		fs_node_at(vt, (uint32_t)node)->wdir = ++w->n_dirs;
	}
	pthread_mutex_unlock(&w->lock);
	return rc;
}

/* ---- nodes made after the build ---- */

struct vnode *fs_window_node(const struct fs_vtree *vt, uint32_t idx)
{
	const struct fs_windows *w = windows_of(vt);
	uint32_t k;

	if (!w || idx < FS_WINDOW_IDX)
		return NULL;
	k = idx - FS_WINDOW_IDX;
	if (k >= atomic_load_explicit(&w->n_nodes, memory_order_acquire))
		return NULL;
	return &w->chunk[k / CHUNK][k % CHUNK];
}

uint64_t fs_window_n_nodes(const struct fs_vtree *vt)
{
	const struct fs_windows *w = windows_of(vt);

	return w ? atomic_load_explicit(&w->n_nodes, memory_order_acquire) : 0;
}

/* A new node (under the lock), not yet published. @return its index, or -errno */
static int64_t new_node(struct fs_vtree *vt, uint32_t parent, const char *name,
			const struct fs_file_ops *ops)
{
	struct fs_windows *w = vt->windows;
	uint32_t k = w->n_made;
	struct vnode *n;

	if (k >= (uint32_t)MAX_CHUNKS * CHUNK)
		return -ENOSPC;
	if (!w->chunk[k / CHUNK]) {
		w->chunk[k / CHUNK] = calloc(CHUNK, sizeof(struct vnode));
		if (!w->chunk[k / CHUNK])
			return -ENOMEM;
	}
	n = &w->chunk[k / CHUNK][k % CHUNK];
	memset(n, 0, sizeof(*n));
	n->name = strdup(name);
	if (!n->name)
		return -ENOMEM;
	n->parent = parent;
	n->ops = ops;
	w->n_made++;
	return (int64_t)FS_WINDOW_IDX + k;
}

static struct vnode *made(struct fs_vtree *vt, int64_t idx)
{
	uint64_t k = (uint64_t)idx - FS_WINDOW_IDX;

	return &vt->windows->chunk[k / CHUNK][k % CHUNK];
}

/* ---- finding a window's events ---- */

/* The event's time a window cuts by: its start (start order) or end (end order). */
static int key_at(struct tfs_cursor *c, uint64_t i, bool by_end, uint64_t *key)
{
	struct tfs_event ev;
	int rc = tfs_cursor_event(c, i, &ev, NULL);

	if (rc == 0)
		*key = by_end ? ev.ts_ns + ev.dur_ns : ev.ts_ns;
	return rc;
}

/*
 * What the fixed windows cut, [0, span): past the last key of @sc's events (a thread's last
 * event has its largest key), not max_ts_ns + max_dur_ns, the largest start plus the longest
 * call, which a parent's wait for its children as long as the run made half again as long
 * as the run, its last windows empty. That bound stays for a scope of more than
 * SPAN_SEGS_MAX threads, where a block decoded per thread took minutes (10^6 ranks: 4 min),
 * and for lossy times, whose order within their error is not kept.
 * Without timing: the most events of a thread.
 */
static uint64_t whole_span(const struct fs_vtree *vt, const struct fs_scope *sc)
{
	const uint64_t bound = fs_sat_add(fs_sat_add(vt->ti.max_ts_ns, vt->ti.max_dur_ns), 1);
	bool by_end = fs_merge_by_end(vt);
	uint64_t span = 1, key = 0;
	int rc = 0;

	/* lossy times are not in order within their error: a later event may decode before an
	   earlier one, so a thread's last event does not bound its others (the review) */
	if (vt->ti.timing == TFS_TIMING_LOSSY || (!fs_untimed(vt) && sc->n_segs > SPAN_SEGS_MAX))
		return bound;
	for (uint32_t i = 0; i < sc->n_segs; i++) {
		const struct fs_seg *s = &sc->segs[i];
		struct tfs_cursor *c = NULL;

		if (!s->n_events)
			continue;
		if (fs_untimed(vt)) {
			key = s->first + s->n_events - 1;
		} else {
			rc = tfs_cursor_new(vt->trace, s->stream, TFS_VIEW_TEXT, s->first,
					    s->n_events, &c);
			if (rc == 0)
				rc = key_at(c, s->first + s->n_events - 1, by_end, &key);
			tfs_cursor_free(c);
		}
		if (rc < 0) /* undecodable: the bound every event is under */
			return bound;
		if (key >= span)
			span = fs_sat_add(key, 1);
	}
	return span;
}

/* The first event of @s whose key is @t or later (keys are sorted but for lossy jitter). */
static int first_at(struct tfs_cursor *c, const struct fs_seg *s, bool by_end, uint64_t t,
		    uint64_t *out)
{
	uint64_t lo = s->first, hi = s->first + s->n_events, key = 0;
	int rc = 0;

	while (lo < hi && rc == 0) {
		uint64_t mid = lo + (hi - lo) / 2;

		rc = key_at(c, mid, by_end, &key);
		if (key < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	*out = lo;
	return rc;
}

/* @base's events in [@from, @to) as a new scope. */
static int window_scope(struct fs_vtree *vt, const struct fs_scope *base, uint64_t from,
			uint64_t to, struct fs_scope **out)
{
	struct fs_scope *sc = calloc(1, sizeof(*sc));
	bool by_end = fs_merge_by_end(vt);
	int rc = 0;

	if (!sc)
		return -ENOMEM;
	fs_once_init(&sc->merge_once);
	sc->from_ns = from;
	sc->to_ns = to;
	sc->segs = calloc(base->n_segs + 1, sizeof(*sc->segs));
	if (!sc->segs || asprintf(&sc->label, "%s, window %" PRIu64 "-%" PRIu64, base->label,
				  from, to) < 0) {
		sc->label = NULL;
		fs_scope_free(sc);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < base->n_segs && rc == 0; i++) {
		const struct fs_seg *s = &base->segs[i];
		struct tfs_cursor *c = NULL;
		uint64_t a = 0, b = 0;

		if (fs_untimed(vt)) {
			a = from < s->first ? s->first : from;
			b = to < s->first + s->n_events ? to : s->first + s->n_events;
		} else {
			rc = tfs_cursor_new(vt->trace, s->stream, TFS_VIEW_TEXT, s->first,
					    s->n_events, &c);
			if (rc == 0)
				rc = first_at(c, s, by_end, from, &a);
			if (rc == 0)
				rc = first_at(c, s, by_end, to, &b);
			tfs_cursor_free(c);
		}
		if (rc < 0 || b <= a)
			continue;
		sc->segs[sc->n_segs] = *s;
		sc->segs[sc->n_segs].first = a;
		sc->segs[sc->n_segs].n_events = b - a;
		sc->n_events += b - a;
		sc->n_segs++;
	}
	if (rc < 0) {
		fs_scope_free(sc);
		return rc;
	}
	*out = sc;
	return 0;
}

/* ---- a window's files ---- */

static int add_child(struct fs_vtree *vt, int64_t dir, int64_t child)
{
	struct vnode *d = made(vt, dir);
	uint32_t *c = realloc(d->children, (d->n_children + 1) * sizeof(*c));
	uint32_t *by = c ? realloc(d->by_name, (d->n_children + 1) * sizeof(*by)) : NULL;

	if (c)
		d->children = c;
	if (!c || !by)
		return -ENOMEM;
	d->by_name = by;
	d->children[d->n_children] = (uint32_t)child;
	/* keep by_name sorted: a few files */
	uint32_t j = d->n_children;

	while (j > 0 && strcmp(made(vt, by[j - 1])->name, made(vt, child)->name) > 0) {
		by[j] = by[j - 1];
		j--;
	}
	by[j] = (uint32_t)child;
	d->n_children++;
	return 0;
}

static int add_trace_txt(struct fs_vtree *vt, int64_t dir, struct fs_scope *sc)
{
	int64_t f = new_node(vt, (uint32_t)dir, "trace.txt", NULL);
	int rc;

	if (f < 0)
		return (int)f;
	rc = fs_node_set_lines(vt, made(vt, f), sc, TFS_VIEW_TEXT);
	return rc < 0 ? rc : add_child(vt, dir, f);
}

static int add_trace_json(struct fs_vtree *vt, int64_t dir, struct fs_scope *sc)
{
	int64_t f = new_node(vt, (uint32_t)dir, "trace.json", &fs_concat_ops);
	struct vnode *n;
	int rc;

	if (f < 0)
		return (int)f;
	n = made(vt, f);
	n->concat = fs_concat_new(vt);
	if (!n->concat)
		return -ENOMEM;
	rc = fs_tree_fill_chrome(vt, n->concat, sc);
	return rc < 0 ? rc : add_child(vt, dir, f);
}

static int add_timeline(struct fs_vtree *vt, int64_t dir, struct fs_scope *sc, uint32_t rank)
{
	int64_t f = new_node(vt, (uint32_t)dir, "timeline.svg", &fs_lazy_ops);

	if (f < 0)
		return (int)f;
	made(vt, f)->lazy = fs_lazygen_new(vt, (uint32_t)f, sc, rank, fs_timeline_new);
	if (!made(vt, f)->lazy)
		return -ENOMEM;
	return add_child(vt, dir, f);
}

/* Free nodes from @start on (a window that failed half made) and forget them. */
static void unmake(struct fs_windows *w, uint32_t start)
{
	for (uint32_t k = start; k < w->n_made; k++) {
		fs_node_fini(&w->chunk[k / CHUNK][k % CHUNK]);
	}
	w->n_made = start;
}

static void publish(struct fs_windows *w)
{
	atomic_store_explicit(&w->n_nodes, w->n_made, memory_order_release);
}

static void fixed(const struct wdir *d, uint32_t idx, uint64_t *from, uint64_t *to);

/*
 * The window [@from, @to) of window/ directory @wd, or its listed window @fixed_idx when not
 * UINT32_MAX, made unless it exists.
 */
static int get_window(struct fs_vtree *vt, uint32_t wd, uint32_t fixed_idx, uint64_t from,
		      uint64_t to, uint64_t *ino)
{
	struct fs_windows *w = vt->windows;
	struct fs_scope *sc = NULL;
	struct wdir *d;
	struct win *win;
	char name[48];
	uint32_t start;
	int64_t dir;
	int rc;

	rc = fs_root_ready(vt); /* a root's window cuts the root's segments */
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&w->lock);
	d = &w->dirs[wd];
	if (!d->span)
		d->span = whole_span(vt, d->base);
	if (fixed_idx != UINT32_MAX)
		fixed(d, fixed_idx, &from, &to);
	start = w->n_made;
	for (uint32_t i = 0; i < w->n_wins; i++) {
		win = &w->wins[i];
		if (win->wdir == wd && win->from == from && win->to == to) {
			*ino = (uint64_t)win->node + FS_ROOT_INO;
			pthread_mutex_unlock(&w->lock);
			return 0;
		}
	}
	rc = w->n_wins >= MAX_WINDOWS ? -ENOSPC : 0;
	if (rc == 0 && w->n_wins == w->wins_cap) {
		uint32_t cap = w->wins_cap ? 2 * w->wins_cap : 32;
		struct win *v = realloc(w->wins, (size_t)cap * sizeof(*v));

		if (v) {
			w->wins = v;
			w->wins_cap = cap;
		} else {
			rc = -ENOMEM;
		}
	}
	if (rc == 0)
		rc = window_scope(vt, d->base, from, to, &sc);
	if (rc < 0)
		goto out_unlock;
	snprintf(name, sizeof(name), "%" PRIu64 "-%" PRIu64, from, to);
	dir = new_node(vt, d->node, name, NULL);
	rc = dir < 0 ? (int)dir : add_trace_json(vt, dir, sc);
	if (rc == 0)
		rc = add_trace_txt(vt, dir, sc);
	if (rc == 0)
		rc = add_timeline(vt, dir, sc, d->rank);
	if (rc < 0) {
		unmake(w, start);
		fs_scope_free(sc);
		goto out_unlock;
	}
	w->wins[w->n_wins++] = (struct win){wd, from, to, (uint32_t)dir, sc};
	publish(w);
	*ino = (uint64_t)dir + FS_ROOT_INO;
out_unlock:
	pthread_mutex_unlock(&w->lock);
	return rc;
}

/* ---- listing and lookup ---- */

uint32_t fs_window_n_listed(const struct fs_vtree *vt, const struct vnode *d)
{
	(void)vt;
	(void)d;
	return N_FIXED;
}

/*
 * Fixed window @idx: the quarters of the span, then its sixteenths. A span of fewer than 16
 * units (nanoseconds, or events without timing: a trace of a few events, or none) is taken as
 * 16, its last windows empty: each sixteenth is then one unit at least and every quarter
 * wider, so the twenty windows listed are twenty different directories.
 */
static void fixed(const struct wdir *d, uint32_t idx, uint64_t *from, uint64_t *to)
{
	uint64_t parts = idx < 4 ? 4 : 16, i = idx < 4 ? idx : idx - 4;
	unsigned __int128 span = d->span < N_FIXED_MIN_SPAN ? N_FIXED_MIN_SPAN : d->span;

	*from = (uint64_t)(span * i / parts);
	*to = (uint64_t)(span * (i + 1) / parts);
}

int fs_window_child(const struct fs_vtree *cvt, const struct vnode *d, uint32_t idx,
		    uint64_t *ino)
{
	struct fs_vtree *vt = (struct fs_vtree *)cvt; /* windows are made on demand */

	if (idx >= N_FIXED)
		return -ENOENT;
	return get_window(vt, d->wdir - 1, idx, 0, 0, ino);
}

/* "<number>[.<digits>][ns|us|ms|s]" as nanoseconds (@untimed: a plain event index). */
static bool parse_time(const char *s, const char *end, bool untimed, uint64_t *out)
{
	static const struct {
		const char *unit;
		uint64_t ns;
	} units[] = {{"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}};
	unsigned __int128 whole = 0, frac = 0, scale = 1, ns = 1;
	const char *p = s;

	while (p < end && *p >= '0' && *p <= '9' && whole < ((unsigned __int128)1 << 64))
		whole = whole * 10 + (unsigned)(*p++ - '0');
	if (p == s)
		return false;
	if (p < end && *p == '.' && !untimed) {
		for (p++; p < end && *p >= '0' && *p <= '9' && scale < 1000000000000000000u; p++) {
			frac = frac * 10 + (unsigned)(*p - '0');
			scale *= 10;
		}
	}
	if (p < end && !untimed) {
		size_t n = (size_t)(end - p);
		bool found = false;

		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]) && !found; i++) {
			if (strlen(units[i].unit) == n && !strncmp(p, units[i].unit, n)) {
				ns = units[i].ns;
				found = true;
			}
		}
		if (!found)
			return false;
		p = end;
	}
	if (p != end)
		return false;
	whole = whole * ns + frac * ns / scale;
	if (whole > INT64_MAX)
		return false;
	*out = (uint64_t)whole;
	return true;
}

int fs_window_lookup(const struct fs_vtree *cvt, const struct vnode *d, const char *name,
		     uint64_t *ino)
{
	struct fs_vtree *vt = (struct fs_vtree *)cvt; /* windows are made on demand */
	const char *dash = strchr(name, '-');
	uint64_t from, to;

	if (!dash || !parse_time(name, dash, fs_untimed(vt), &from) ||
	    !parse_time(dash + 1, dash + strlen(dash), fs_untimed(vt), &to) || to <= from)
		return -ENOENT;
	return get_window(vt, d->wdir - 1, UINT32_MAX, from, to, ino);
}

void fs_windows_free(struct fs_vtree *vt)
{
	struct fs_windows *w = vt->windows;

	if (!w)
		return;
	unmake(w, 0);
	for (uint32_t i = 0; i < MAX_CHUNKS; i++)
		free(w->chunk[i]);
	for (uint32_t i = 0; i < w->n_wins; i++)
		fs_scope_free(w->wins[i].scope);
	free(w->wins);
	free(w->dirs);
	pthread_mutex_destroy(&w->lock);
	free(w);
	vt->windows = NULL;
}
