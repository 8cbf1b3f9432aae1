/*
 * The layout of the virtual tree (README.txt tells users the same):
 *
 *   README.txt info.json summary.txt signatures.txt grammar.txt trace.json [trace.json.d/]
 *   ranks/<r>/{trace.txt,events.jsonl,trace.json,summary.txt,stacks.folded}
 *   ranks/<r>/{backtraces.txt,allocs.folded}   only for a rank with backtraces
 *   ranks/<r>/files.txt                        only when the trace records files
 *   ranks/<r>/threads/<t>/{trace.txt,events.jsonl,trace.json}
 *   ranks/<r>/phases/<dir>/{trace.txt,events.jsonl,trace.json,summary.txt,stacks.folded}
 *   ranks/<r>/phases/<dir>/threads/<t>/{trace.txt,events.jsonl,trace.json}
 *
 * Every trace.json may have a trace.json.d/ of standalone parts when it is too large.
 * Built once from the trace's tables: nodes, the scopes files are computed over, and every
 * size that needs no decoding. Files whose size needs decoding (profiles, JSON tails) are
 * left to be computed once at their first stat. Nothing here reads an event.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vnode_i.h"
#include "vpict_i.h"

/* Listing order in a directory holding the views of a scope (README.txt, info.json: 0, 1). */
enum {
	KEY_TEXT,
	KEY_JSONL,
	KEY_JSON,
	KEY_JSON_D,
	KEY_SUMMARY,
	KEY_STACKS,
	KEY_THREADS,
	KEY_PHASES,
	KEY_SIGNATURES = KEY_STACKS, /* the root has no stacks.folded */
	KEY_GRAMMAR = KEY_THREADS,
	KEY_RANKS = KEY_PHASES,
};

static const char *const view_file[TFS_VIEW_COUNT] = {
    [TFS_VIEW_TEXT] = "trace.txt",
    [TFS_VIEW_JSONL] = "events.jsonl",
};

static const char json_head[] = "[\n";

/* ---- nodes ---- */

/* Append a node under @parent. @return its index, or -ENOMEM */
static int64_t add_node(struct fs_vtree *vt, uint32_t parent, const char *name, int kind,
			uint64_t sort_key)
{
	struct vnode *n, *p;
	uint32_t idx = vt->n_nodes;

	if (vt->n_nodes == vt->nodes_cap) {
		uint32_t cap = vt->nodes_cap ? vt->nodes_cap * 2 : 64;
		struct vnode *nodes;

		if (vt->nodes_cap >= UINT32_MAX / 2)
			return -ENOMEM;
		nodes = realloc(vt->nodes, (size_t)cap * sizeof(*nodes));
		if (!nodes)
			return -ENOMEM;
		vt->nodes = nodes;
		vt->nodes_cap = cap;
	}
	if (idx != parent) {
		p = &vt->nodes[parent];
		assert(p->kind == NODE_DIR);
		if (p->n_children == p->children_cap) {
			uint32_t cap = p->children_cap ? p->children_cap * 2 : 4;
			uint32_t *c = realloc(p->children, (size_t)cap * sizeof(*c));

			if (!c)
				return -ENOMEM;
			p->children = c;
			p->children_cap = cap;
		}
	}
	n = &vt->nodes[idx];
	memset(n, 0, sizeof(*n));
	n->name = strdup(name);
	if (!n->name)
		return -ENOMEM;
	n->parent = parent;
	n->kind = (uint8_t)kind;
	n->sort_key = sort_key;
	vt->n_nodes++;
	if (idx != parent) {
		p = &vt->nodes[parent];
		p->children[p->n_children++] = idx;
	}
	return idx;
}

/* The child of @dir named @name, or -1. Linear: used while building, on small dirs only. */
static int64_t find_child(const struct fs_vtree *vt, uint32_t dir, const char *name)
{
	const struct vnode *d = &vt->nodes[dir];

	for (uint32_t i = 0; i < d->n_children; i++) {
		if (strcmp(vt->nodes[d->children[i]].name, name) == 0)
			return d->children[i];
	}
	return -1;
}

static int64_t get_dir(struct fs_vtree *vt, uint32_t parent, const char *name, uint64_t sort_key)
{
	int64_t idx = find_child(vt, parent, name);

	return idx >= 0 ? idx : add_node(vt, parent, name, NODE_DIR, sort_key);
}

static int add_view(struct fs_vtree *vt, uint32_t dir, const char *name, uint64_t key,
		    const struct fs_seg *s, int view)
{
	int64_t idx = add_node(vt, dir, name, NODE_VIEW, key);
	struct vnode *f;

	if (idx < 0)
		return (int)idx;
	f = &vt->nodes[idx];
	f->view = (uint8_t)view;
	f->stream = s->stream;
	f->first = s->first;
	f->n_events = s->n_events;
	return tfs_trace_view_size(vt->trace, s->stream, view, s->first, s->n_events, &f->size);
}

static int add_gen_file(struct fs_vtree *vt, const char *name, const char *buf, size_t len,
			uint64_t sort_key)
{
	int64_t idx = add_node(vt, 0, name, NODE_GEN, sort_key);

	if (idx < 0)
		return (int)idx;
	vt->nodes[idx].gen = buf;
	vt->nodes[idx].size = len;
	return 0;
}

static int add_lazy(struct fs_vtree *vt, uint32_t dir, const char *name, uint64_t key,
		    int what, const struct fs_scope *sc)
{
	int64_t idx = add_node(vt, dir, name, NODE_LAZY, key);
	struct fs_lazygen *g;

	if (idx < 0)
		return (int)idx;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	fs_once_init(&g->once);
	g->vt = vt;
	g->what = what;
	g->scope = sc;
	g->node = (uint32_t)idx;
	vt->nodes[idx].lazy = g;
	return 0;
}

int64_t fs_tree_add_dir(struct fs_vtree *vt, uint32_t parent, const char *name, uint64_t key)
{
	return add_node(vt, parent, name, NODE_DIR, key);
}

int fs_tree_add_fn(struct fs_vtree *vt, uint32_t dir, const char *name, uint64_t key,
		   const struct fs_scope *sc, uint32_t rank,
		   int (*fn)(struct fs_vtree *, const struct fs_scope *, uint32_t, char **, size_t *))
{
	int rc = add_lazy(vt, dir, name, key, LAZY_FN, sc);

	if (rc == 0) {
		vt->nodes[vt->n_nodes - 1].lazy->fn = fn;
		vt->nodes[vt->n_nodes - 1].lazy->rank = rank;
	}
	return rc;
}

static int add_concat(struct fs_vtree *vt, uint32_t dir, const char *name, uint64_t key,
		      struct fs_concat **out)
{
	int64_t idx = add_node(vt, dir, name, NODE_CONCAT, key);

	if (idx < 0)
		return (int)idx;
	*out = vt->nodes[idx].concat = fs_concat_new(vt);
	return *out ? 0 : -ENOMEM;
}

/* ---- scopes ---- */

static struct fs_scope *scope_new(struct fs_vtree *vt, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static struct fs_scope *scope_new(struct fs_vtree *vt, const char *fmt, ...)
{
	struct fs_scope *sc;
	va_list ap;
	int n;

	if (vt->n_scopes == vt->scopes_cap) {
		uint32_t cap = vt->scopes_cap ? 2 * vt->scopes_cap : 16;
		struct fs_scope **s = realloc(vt->scopes, (size_t)cap * sizeof(*s));

		if (!s)
			return NULL;
		vt->scopes = s;
		vt->scopes_cap = cap;
	}
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return NULL;
	fs_once_init(&sc->merge_once);
	vt->scopes[vt->n_scopes++] = sc;
	va_start(ap, fmt);
	n = vasprintf(&sc->label, fmt, ap);
	va_end(ap);
	if (n < 0) {
		sc->label = NULL;
		return NULL;
	}
	return sc;
}

void fs_scope_free(struct fs_scope *sc)
{
	if (!sc)
		return;
	fs_once_fini(&sc->merge_once);
	fs_merge_index_free(sc->merge);
	free(sc->label);
	free(sc->segs);
	free(sc->phases);
	free(sc);
}

static int scope_add_seg(struct fs_scope *sc, const struct fs_seg *s)
{
	if (sc->n_segs == sc->segs_cap) {
		uint32_t cap = sc->segs_cap ? 2 * sc->segs_cap : 4;
		struct fs_seg *segs = realloc(sc->segs, (size_t)cap * sizeof(*segs));

		if (!segs)
			return -ENOMEM;
		sc->segs = segs;
		sc->segs_cap = cap;
	}
	sc->segs[sc->n_segs++] = *s;
	sc->n_events += s->n_events;
	return 0;
}

static int scope_add_phase(struct fs_scope *sc, uint32_t idx)
{
	if (sc->n_phases == sc->phases_cap) {
		uint32_t cap = sc->phases_cap ? 2 * sc->phases_cap : 4;
		uint32_t *p = realloc(sc->phases, (size_t)cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		sc->phases = p;
		sc->phases_cap = cap;
	}
	sc->phases[sc->n_phases++] = idx;
	return 0;
}

static int cmp_seg(const void *a, const void *b)
{
	const struct fs_seg *x = a, *y = b;

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->thread < y->thread ? -1 : x->thread > y->thread;
}

static int cmp_phase(const void *a, const void *b, void *arg)
{
	const struct fs_phase_rec *recs = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (recs[x].rank != recs[y].rank)
		return recs[x].rank < recs[y].rank ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Put segments in (rank, thread) order and phases in (rank, index) order. */
static void scope_sort(struct fs_scope *sc, const struct fs_phase_rec *by_idx)
{
	if (sc->n_segs > 1)
		qsort(sc->segs, sc->n_segs, sizeof(*sc->segs), cmp_seg);
	if (sc->n_phases > 1)
		qsort_r(sc->phases, sc->n_phases, sizeof(*sc->phases), cmp_phase, (void *)by_idx);
}

/* ---- the files of a scope ---- */

/* trace.txt or events.jsonl of a scope: its threads' lines in time order. */
static int add_merged(struct fs_vtree *vt, uint32_t dir, struct fs_scope *sc, int view)
{
	struct fs_concat *c = NULL;
	int64_t idx;
	int rc;

	if (sc->n_segs == 1)
		return add_view(vt, dir, view_file[view], (uint64_t)view, &sc->segs[0], view);
	if (vt->ti.timing == TFS_TIMING_NONE) {
		/* no times to merge by: the threads one after the other */
		rc = add_concat(vt, dir, view_file[view], (uint64_t)view, &c);
		for (uint32_t i = 0; i < sc->n_segs && rc == 0; i++)
			rc = fs_concat_add_view(c, vt->trace, sc->segs[i].stream, view,
						sc->segs[i].first, sc->segs[i].n_events);
		return rc;
	}
	idx = add_node(vt, dir, view_file[view], NODE_MERGE, (uint64_t)view);
	if (idx < 0)
		return (int)idx;
	vt->nodes[idx].view = (uint8_t)view;
	vt->nodes[idx].scope = sc;
	return fs_merge_size(vt, sc, view, &vt->nodes[idx].size);
}

/* "[\n", the Chrome lines of @sc's segments, then the generated tail. */
static int fill_chrome(struct fs_vtree *vt, struct fs_concat *c, const struct fs_scope *sc,
		       fs_part_gen_fn tail)
{
	int rc = fs_concat_add_bytes(c, json_head, sizeof(json_head) - 1);

	for (uint32_t i = 0; i < sc->n_segs && rc == 0; i++)
		rc = fs_concat_add_view(c, vt->trace, sc->segs[i].stream, TFS_VIEW_CHROME,
					sc->segs[i].first, sc->segs[i].n_events);
	return rc < 0 ? rc : fs_concat_add_gen(c, tail, sc);
}

int fs_tree_fill_chrome(struct fs_vtree *vt, struct fs_concat *c, const struct fs_scope *sc)
{
	return fill_chrome(vt, c, sc, fs_chrome_tail_new);
}

/* How many events from @first of @stream fit in @room bytes of Chrome lines (0 or more). */
static int fit_events(struct fs_vtree *vt, const struct fs_seg *s, uint64_t first,
		      uint64_t room, uint64_t *k)
{
	struct tfs_cursor *c;
	uint64_t lo = 0, hi = s->first + s->n_events - first, off;
	int rc;

	rc = tfs_cursor_new(vt->trace, s->stream, TFS_VIEW_CHROME, first, hi, &c);
	while (rc == 0 && lo < hi) {
		uint64_t mid = hi - (hi - lo) / 2;

		rc = tfs_cursor_event_offset(c, mid, &off);
		if (rc == 0 && off <= room)
			lo = mid;
		else
			hi = mid - 1;
	}
	tfs_cursor_free(c);
	*k = lo;
	return rc;
}

/* part-NNN.json in @dir over @part; the first part draws the phases of @whole. */
static int close_part(struct fs_vtree *vt, uint32_t dir, struct fs_scope *part,
		      const struct fs_scope *whole, uint32_t n)
{
	struct fs_concat *c = NULL;
	char name[32];
	int rc = 0;

	for (uint32_t p = 0; n == 0 && p < whole->n_phases && rc == 0; p++)
		rc = scope_add_phase(part, whole->phases[p]);
	snprintf(name, sizeof(name), "part-%03" PRIu32 ".json", n);
	if (rc == 0)
		rc = add_concat(vt, dir, name, n, &c);
	if (rc == 0)
		rc = fill_chrome(vt, c, part, n ? fs_chrome_tail_nophase_new : fs_chrome_tail_new);
	return rc;
}

/*
 * trace.json.d/part-NNN.json: @sc's events cut into standalone arrays of about @part_bytes
 * each.
 */
static int add_chrome_parts(struct fs_vtree *vt, uint32_t dir, const struct fs_scope *sc,
			    uint64_t part_bytes)
{
	struct fs_scope *part = NULL;
	uint64_t used = 0, k = 0, size;
	uint32_t n_parts = 0;
	int rc = 0;

	for (uint32_t i = 0; i < sc->n_segs && rc == 0; i++) {
		const struct fs_seg *s = &sc->segs[i];

		for (uint64_t done = 0; done < s->n_events && rc == 0; done += k) {
			struct fs_seg piece = *s;

			if (!part) {
				part = scope_new(vt, "%s, part %" PRIu32, sc->label, n_parts);
				if (!part)
					return -ENOMEM;
				used = 0;
			}
			rc = fit_events(vt, s, s->first + done, part_bytes - used, &k);
			if (rc == 0 && k == 0 && used > 0) {
				rc = close_part(vt, dir, part, sc, n_parts++);
				part = NULL;
				continue;
			}
			if (k == 0)
				k = 1; /* one line larger than a part */
			piece.first = s->first + done;
			piece.n_events = k;
			if (rc == 0)
				rc = scope_add_seg(part, &piece);
			if (rc == 0)
				rc = tfs_trace_view_size(vt->trace, s->stream, TFS_VIEW_CHROME,
							 piece.first, k, &size);
			if (rc < 0)
				break;
			used += size;
		}
	}
	if (rc == 0 && part)
		rc = close_part(vt, dir, part, sc, n_parts);
	return rc;
}

/* trace.json of a scope, and its trace.json.d/ when its events exceed the split size. */
static int add_chrome(struct fs_vtree *vt, uint32_t dir, const struct fs_scope *sc)
{
	struct fs_concat *c = NULL;
	uint64_t lines = 0, n;
	int64_t d;
	int rc;

	rc = add_concat(vt, dir, "trace.json", KEY_JSON, &c);
	if (rc == 0)
		rc = fill_chrome(vt, c, sc, fs_chrome_tail_new);
	for (uint32_t i = 0; i < sc->n_segs && rc == 0; i++) {
		rc = tfs_trace_view_size(vt->trace, sc->segs[i].stream, TFS_VIEW_CHROME,
					 sc->segs[i].first, sc->segs[i].n_events, &n);
		lines += n;
	}
	if (rc < 0 || lines <= vt->split_bytes)
		return rc;
	d = add_node(vt, dir, "trace.json.d", NODE_DIR, KEY_JSON_D);
	if (d < 0)
		return (int)d;
	return add_chrome_parts(vt, (uint32_t)d, sc,
				vt->split_bytes == FS_JSON_SPLIT_BYTES ? FS_JSON_PART_LINES
								       : vt->split_bytes);
}

/* The views of a scope in @dir; with @profiles also summary.txt and stacks.folded. */
static int add_scope_files(struct fs_vtree *vt, uint32_t dir, struct fs_scope *sc,
			   bool profiles)
{
	int rc = add_merged(vt, dir, sc, TFS_VIEW_TEXT);

	if (rc == 0)
		rc = add_merged(vt, dir, sc, TFS_VIEW_JSONL);
	if (rc == 0)
		rc = add_chrome(vt, dir, sc);
	if (rc == 0 && profiles)
		rc = add_lazy(vt, dir, "summary.txt", KEY_SUMMARY, LAZY_SUMMARY, sc);
	if (rc == 0 && profiles)
		rc = add_lazy(vt, dir, "stacks.folded", KEY_STACKS, LAZY_STACKS, sc);
	return rc;
}

/* backtraces.txt and allocs.folded of a rank that has backtraces, after stacks.folded. */
static int add_backtrace_files(struct fs_vtree *vt, uint32_t dir, struct fs_scope *sc,
			       uint32_t rank)
{
	int rc;

	if (tfs_trace_n_backtraces(vt->trace, rank) == 0)
		return 0;
	rc = add_lazy(vt, dir, "backtraces.txt", KEY_STACKS, LAZY_BACKTRACES, sc);
	if (rc == 0)
		vt->nodes[vt->n_nodes - 1].lazy->rank = rank;
	if (rc == 0)
		rc = add_lazy(vt, dir, "allocs.folded", KEY_STACKS, LAZY_ALLOCS, sc);
	if (rc == 0)
		vt->nodes[vt->n_nodes - 1].lazy->rank = rank;
	return rc;
}

/* files.txt of a rank, after its backtrace files, when the trace records files at all. */
static int add_files_file(struct fs_vtree *vt, uint32_t dir, struct fs_scope *sc, uint32_t rank)
{
	int rc;

	if (!fs_files_wanted(vt))
		return 0;
	rc = add_lazy(vt, dir, "files.txt", KEY_STACKS, LAZY_FILES, sc);
	if (rc == 0)
		vt->nodes[vt->n_nodes - 1].lazy->rank = rank;
	return rc;
}

/* threads/<t>/ under @dir with the views of one event range and the phases in @sc. */
static int add_thread_dir(struct fs_vtree *vt, uint32_t dir, struct fs_scope *sc)
{
	char name[16];
	int64_t threads, tdir;

	threads = get_dir(vt, dir, "threads", KEY_THREADS);
	if (threads < 0)
		return (int)threads;
	snprintf(name, sizeof(name), "%" PRIu32, sc->segs[0].thread);
	tdir = add_node(vt, (uint32_t)threads, name, NODE_DIR, sc->segs[0].thread);
	if (tdir < 0)
		return (int)tdir;
	return add_scope_files(vt, (uint32_t)tdir, sc, false);
}

/* ---- the whole tree ---- */

struct rank_ent {
	int64_t dir; /* node, -1: no stream of this rank */
	struct fs_scope *scope;
};

struct phase_dir {
	uint32_t node;
	struct fs_scope *scope;
};

struct layout {
	struct fs_scope *root;
	struct rank_ent *ranks;		/* [n_ranks] */
	struct fs_scope **stream_scope; /* [n_streams] */
	struct fs_phase_rec *recs;	/* [n_phases], by index */
	struct phase_dir *pdirs;	/* [n_phases] at most */
	uint32_t n_pdirs;
};

static int add_rank(struct fs_vtree *vt, uint32_t ranks, uint32_t rank, struct rank_ent *e)
{
	char name[16];
	int64_t sub;

	snprintf(name, sizeof(name), "%" PRIu32, rank);
	e->dir = add_node(vt, ranks, name, NODE_DIR, rank);
	if (e->dir < 0)
		return (int)e->dir;
	sub = add_node(vt, (uint32_t)e->dir, "phases", NODE_DIR, KEY_PHASES);
	if (sub < 0)
		return (int)sub;
	e->scope = scope_new(vt, "rank %" PRIu32, rank);
	if (!e->scope)
		return -ENOMEM;
	e->scope->whole_ranks = true;
	return 0;
}

/* Every stream: its thread scope, its rank's scope and directory, the root scope. */
static int lay_streams(struct fs_vtree *vt, struct layout *l, uint32_t ranks)
{
	for (uint32_t s = 0; s < vt->ti.n_streams; s++) {
		struct tfs_stream_info si;
		struct fs_seg seg;
		struct rank_ent *r;
		int rc;

		rc = tfs_trace_stream(vt->trace, s, &si);
		if (rc < 0)
			return rc;
		if (si.rank >= vt->ti.n_ranks)
			return -EINVAL;
		r = &l->ranks[si.rank];
		if (r->dir < 0) {
			rc = add_rank(vt, ranks, si.rank, r);
			if (rc < 0)
				return rc;
		}
		seg = (struct fs_seg){s, si.rank, si.thread, 0, si.n_events};
		l->stream_scope[s] =
		    scope_new(vt, "rank %" PRIu32 " thread %" PRIu32, si.rank, si.thread);
		if (!l->stream_scope[s])
			return -ENOMEM;
		rc = scope_add_seg(l->stream_scope[s], &seg);
		if (rc == 0)
			rc = scope_add_seg(r->scope, &seg);
		if (rc == 0)
			rc = scope_add_seg(l->root, &seg);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* A phase directory's own scope and, per phase, a one-thread scope under it. */
static int lay_phase(struct fs_vtree *vt, struct layout *l, const struct fs_phase_rec *p,
		     bool new_dir)
{
	struct fs_seg seg = {p->stream, p->rank, p->thread, p->first, p->n_events};
	struct fs_scope *one;
	struct phase_dir *d;
	int rc;

	if (new_dir) {
		int64_t phases = find_child(vt, (uint32_t)l->ranks[p->rank].dir, "phases");
		int64_t node;

		assert(phases >= 0);
		/* sorted: the first phase of a directory has the lowest index, its listing key */
		node = add_node(vt, (uint32_t)phases, p->name, NODE_DIR, p->idx);
		if (node < 0)
			return (int)node;
		d = &l->pdirs[l->n_pdirs++];
		d->node = (uint32_t)node;
		d->scope = scope_new(vt, "rank %" PRIu32 " phase directory %s", p->rank, p->name);
		if (!d->scope)
			return -ENOMEM;
	}
	d = &l->pdirs[l->n_pdirs - 1];
	one = scope_new(vt, "%s thread %" PRIu32, d->scope->label, p->thread);
	if (!one)
		return -ENOMEM;
	rc = scope_add_seg(one, &seg);
	if (rc == 0)
		rc = scope_add_phase(one, p->idx);
	if (rc == 0)
		rc = scope_add_seg(d->scope, &seg);
	if (rc == 0)
		rc = scope_add_phase(d->scope, p->idx);
	if (rc == 0)
		rc = add_thread_dir(vt, d->node, one);
	return rc;
}

/* Phases: into the scopes of the root, their rank and stream; their directories. */
static int lay_phases(struct fs_vtree *vt, struct layout *l)
{
	struct fs_phase_rec *sorted;
	char **dirs;
	int rc;

	if (vt->ti.n_phases == 0)
		return 0;
	rc = fs_phase_dirs_new(vt->trace, &dirs);
	if (rc < 0)
		return rc;
	sorted = calloc(vt->ti.n_phases, sizeof(*sorted));
	if (!sorted) {
		rc = -ENOMEM;
		goto out_free_dirs;
	}
	for (uint32_t i = 0; i < vt->ti.n_phases && rc == 0; i++) {
		const struct fs_phase_rec *p = &l->recs[i];

		if (p->stream >= vt->ti.n_streams || l->ranks[p->rank].dir < 0) {
			rc = -EINVAL;
			break;
		}
		rc = scope_add_phase(l->root, i);
		if (rc == 0)
			rc = scope_add_phase(l->ranks[p->rank].scope, i);
		if (rc == 0)
			rc = scope_add_phase(l->stream_scope[p->stream], i);
		sorted[i] = *p;
		sorted[i].name = dirs[i];
	}
	if (rc < 0)
		goto out_free_sorted;
	if (vt->ti.n_phases > 1)
		qsort(sorted, vt->ti.n_phases, sizeof(*sorted), fs_phase_rec_cmp);
	for (uint32_t i = 0; i < vt->ti.n_phases && rc == 0; i++) {
		const struct fs_phase_rec *p = &sorted[i];

		rc = lay_phase(vt, l, p,
			       i == 0 || p->rank != p[-1].rank || strcmp(p->name, p[-1].name));
	}
out_free_sorted:
	free(sorted);
out_free_dirs:
	fs_phase_dirs_free(dirs, vt->ti.n_phases);
	return rc;
}

/* Files of every scope, once all scopes are complete. */
static int lay_files(struct fs_vtree *vt, struct layout *l)
{
	int rc = 0;

	for (uint32_t i = 0; i < vt->n_scopes; i++)
		scope_sort(vt->scopes[i], l->recs);
	for (uint32_t s = 0; s < vt->ti.n_streams && rc == 0; s++) {
		const struct fs_scope *sc = l->stream_scope[s];

		rc = add_thread_dir(vt, (uint32_t)l->ranks[sc->segs[0].rank].dir,
				    l->stream_scope[s]);
	}
	for (uint32_t r = 0; r < vt->ti.n_ranks && rc == 0; r++) {
		if (l->ranks[r].dir >= 0)
			rc = add_scope_files(vt, (uint32_t)l->ranks[r].dir, l->ranks[r].scope, true);
		if (rc == 0 && l->ranks[r].dir >= 0)
			rc = add_backtrace_files(vt, (uint32_t)l->ranks[r].dir, l->ranks[r].scope, r);
		if (rc == 0 && l->ranks[r].dir >= 0)
			rc = add_files_file(vt, (uint32_t)l->ranks[r].dir, l->ranks[r].scope, r);
		if (rc == 0 && l->ranks[r].dir >= 0)
			rc = fs_pictures_add(vt, (uint32_t)l->ranks[r].dir, l->ranks[r].scope,
					     FS_PICT_RANK, r);
	}
	for (uint32_t i = 0; i < l->n_pdirs && rc == 0; i++)
		rc = add_scope_files(vt, l->pdirs[i].node, l->pdirs[i].scope, true);
	if (rc == 0)
		rc = add_lazy(vt, 0, "summary.txt", KEY_SUMMARY, LAZY_SUMMARY, l->root);
	if (rc == 0)
		rc = add_lazy(vt, 0, "signatures.txt", KEY_SIGNATURES, LAZY_SIGNATURES, NULL);
	if (rc == 0)
		rc = add_lazy(vt, 0, "grammar.txt", KEY_GRAMMAR, LAZY_GRAMMAR, NULL);
	if (rc == 0)
		rc = add_chrome(vt, 0, l->root);
	if (rc == 0)
		rc = fs_pictures_add(vt, 0, l->root, FS_PICT_ROOT, UINT32_MAX);
	return rc;
}

static int cmp_listing(const void *a, const void *b, void *arg)
{
	const struct fs_vtree *vt = arg;
	const struct vnode *x = &vt->nodes[*(const uint32_t *)a];
	const struct vnode *y = &vt->nodes[*(const uint32_t *)b];

	if (x->sort_key != y->sort_key)
		return x->sort_key < y->sort_key ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static int cmp_name(const void *a, const void *b, void *arg)
{
	const struct fs_vtree *vt = arg;

	return strcmp(vt->nodes[*(const uint32_t *)a].name, vt->nodes[*(const uint32_t *)b].name);
}

/* Order every directory's listing and build its lookup index. */
static int finish(struct fs_vtree *vt)
{
	for (uint32_t i = 0; i < vt->n_nodes; i++) {
		struct vnode *d = &vt->nodes[i];

		if (d->kind != NODE_DIR || d->n_children == 0)
			continue;
		if (d->n_children > 1)
			qsort_r(d->children, d->n_children, sizeof(*d->children), cmp_listing, vt);
		d->by_name = malloc((size_t)d->n_children * sizeof(*d->by_name));
		if (!d->by_name)
			return -ENOMEM;
		memcpy(d->by_name, d->children, (size_t)d->n_children * sizeof(*d->by_name));
		if (d->n_children > 1)
			qsort_r(d->by_name, d->n_children, sizeof(*d->by_name), cmp_name, vt);
	}
	return 0;
}

/* Kinds as the profiles need them; the tree-wide tables; the split size. */
static int read_tables(struct fs_vtree *vt)
{
	const char *split = getenv("TRACEFS_JSON_SPLIT_BYTES");
	size_t n_terms = (size_t)vt->ti.n_terminals + 1;

	vt->split_bytes = FS_JSON_SPLIT_BYTES;
	if (split && strtoull(split, NULL, 10) > 0)
		vt->split_bytes = strtoull(split, NULL, 10);
	vt->kinds = calloc((size_t)vt->ti.n_kinds + 1, sizeof(*vt->kinds));
	vt->term_len[0] = calloc(n_terms, sizeof(*vt->term_len[0]));
	vt->term_len[1] = calloc(n_terms, sizeof(*vt->term_len[1]));
	if (!vt->kinds || !vt->term_len[0] || !vt->term_len[1])
		return -ENOMEM;
	for (uint32_t k = 0; k < vt->ti.n_kinds; k++) {
		struct fs_kind *fk = &vt->kinds[k];
		struct tfs_kind_desc d;
		int rc = tfs_trace_kind(vt->trace, k, &d);

		if (rc < 0)
			return rc;
		fk->name = d.name;
		fk->category = d.category ? d.category : "";
		fk->n_args = d.n_args <= TFS_MAX_ARGS ? d.n_args : TFS_MAX_ARGS;
		memcpy(fk->args, d.args, fk->n_args * sizeof(*fk->args));
		fk->result = -1;
		for (uint32_t i = 0; i < fk->n_args; i++) {
			if ((fk->args[i].flags & TFS_ARG_RESULT) && fk->result < 0)
				fk->result = (int32_t)i;
			if ((fk->args[i].flags & TFS_ARG_BYTES) && !strcmp(fk->category, "alloc"))
				fk->is_alloc = true;
		}
		fk->is_zone = fk->n_args && fk->args[0].enc == TFS_ENC_STR &&
			      !strcmp(fk->args[0].name, "name");
	}
	for (uint32_t s = 0; s < vt->ti.n_streams; s++) {
		struct tfs_stream_info si;
		int rc = tfs_trace_stream(vt->trace, s, &si);

		if (rc < 0)
			return rc;
		if (si.thread > vt->max_thread)
			vt->max_thread = si.thread;
	}
	return 0;
}

static int lay_out(struct fs_vtree *vt, struct layout *l)
{
	int64_t ranks;
	int rc;

	l->root = scope_new(vt, "the whole trace");
	if (!l->root)
		return -ENOMEM;
	l->root->whole_ranks = true;
	ranks = add_node(vt, 0, "ranks", NODE_DIR, KEY_RANKS);
	if (ranks < 0)
		return (int)ranks;
	for (uint32_t r = 0; r < vt->ti.n_ranks; r++)
		l->ranks[r].dir = -1;
	rc = fs_phase_recs(vt->trace, vt->ti.n_phases, l->recs);
	if (rc == 0)
		rc = lay_streams(vt, l, (uint32_t)ranks);
	if (rc == 0)
		rc = lay_phases(vt, l);
	if (rc == 0)
		rc = lay_files(vt, l);
	return rc;
}

int fs_vtree_build(struct fs_vtree *vt, const char *trace_name)
{
	struct layout l = {0};
	int64_t root;
	int rc;

	tfs_trace_get_info(vt->trace, &vt->ti);
	rc = read_tables(vt);
	if (rc == 0)
		rc = fs_procs_new(vt->trace, vt->ti.n_ranks, &vt->procs);
	if (rc == 0)
		rc = fs_gen_files(vt, trace_name, &vt->readme, &vt->readme_len, &vt->info,
				  &vt->info_len);
	if (rc < 0)
		return rc;
	root = add_node(vt, 0, "", NODE_DIR, 0);
	if (root < 0)
		return (int)root;
	rc = add_gen_file(vt, "README.txt", vt->readme, vt->readme_len, 0);
	if (rc == 0)
		rc = add_gen_file(vt, "info.json", vt->info, vt->info_len, 1);
	if (rc < 0)
		return rc;
	l.ranks = calloc((size_t)vt->ti.n_ranks + 1, sizeof(*l.ranks));
	l.stream_scope = calloc((size_t)vt->ti.n_streams + 1, sizeof(*l.stream_scope));
	l.recs = calloc((size_t)vt->ti.n_phases + 1, sizeof(*l.recs));
	l.pdirs = calloc((size_t)vt->ti.n_phases + 1, sizeof(*l.pdirs));
	rc = l.ranks && l.stream_scope && l.recs && l.pdirs ? lay_out(vt, &l) : -ENOMEM;
	free(l.ranks);
	free(l.stream_scope);
	free(l.recs);
	free(l.pdirs);
	return rc < 0 ? rc : finish(vt);
}
