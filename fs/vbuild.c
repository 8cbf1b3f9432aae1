/*
 * Lays out the virtual tree that vlayout.c declares (README.txt tells users the same):
 * the root, ranks/<r>/ at its first use, threads/<t>/ and phases/<name>/ in it, replay/.
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

#include "vlayout_i.h"
#include "vpict_i.h"

static const char *const view_file[TFS_VIEW_COUNT] = {
    [TFS_VIEW_TEXT] = "trace.txt",
    [TFS_VIEW_JSONL] = "events.jsonl",
};

static const char json_head[] = "[\n";

/* ---- nodes ---- */

/* Append a node under @parent. @return its index, or -ENOMEM */
static int64_t add_node(struct fs_vtree *vt, uint32_t parent, const char *name,
			const struct fs_file_ops *ops, uint64_t sort_key)
{
	struct vnode **chunk, *n, *p = NULL;
	uint32_t idx = vt->n_alloc;

	if (idx >= FS_MAX_NODES)
		return -ENOMEM;
	chunk = &vt->chunks[idx >> FS_NODE_CHUNK_SHIFT];
	if (!*chunk) {
		*chunk = calloc(FS_NODE_CHUNK, sizeof(**chunk));
		if (!*chunk)
			return -ENOMEM;
	}
	/* the rank directories are not children of ranks/: it finds them by ordinal */
	if (idx != parent && !(fs_node_at(vt, parent)->flags & VN_RANKS)) {
		p = fs_node_at(vt, parent);
		assert(!p->ops);
		if (p->n_children == p->children_cap) {
			uint32_t cap = p->children_cap ? p->children_cap * 2 : 4;
			uint32_t *c = realloc(p->children, (size_t)cap * sizeof(*c));

			if (!c)
				return -ENOMEM;
			p->children = c;
			p->children_cap = cap;
		}
	}
	n = fs_node_at(vt, idx);
	memset(n, 0, sizeof(*n));
	n->name = strdup(name);
	if (!n->name)
		return -ENOMEM;
	n->parent = parent;
	n->ops = ops;
	n->sort_key = sort_key;
	vt->n_alloc++;
	if (p)
		p->children[p->n_children++] = idx;
	return idx;
}

/* The child of @dir named @name, or -1. Linear: used while building, on small dirs only. */
static int64_t find_child(const struct fs_vtree *vt, uint32_t dir, const char *name)
{
	const struct vnode *d = fs_node_at(vt, dir);

	for (uint32_t i = 0; i < d->n_children; i++) {
		if (strcmp(fs_node_at(vt, d->children[i])->name, name) == 0)
			return d->children[i];
	}
	return -1;
}

static int64_t get_dir(struct fs_vtree *vt, uint32_t parent, const char *name, uint64_t sort_key)
{
	int64_t idx = find_child(vt, parent, name);

	return idx >= 0 ? idx : add_node(vt, parent, name, NULL, sort_key);
}

/* README.txt: made at the build, from the trace's name. */
int fs_build_readme(struct fs_vtree *vt, const struct fs_dir *d, uint64_t key)
{
	int64_t idx = add_node(vt, d->node, "README.txt", &fs_gen_ops, key);

	if (idx < 0)
		return (int)idx;
	fs_node_at(vt, (uint32_t)idx)->gen = vt->readme;
	fs_node_at(vt, (uint32_t)idx)->size = vt->readme_len;
	return 0;
}

int fs_tree_add_gen(struct fs_vtree *vt, uint32_t dir, const char *name, uint64_t key,
		    const struct fs_scope *sc, uint32_t rank, fs_gen_fn gen)
{
	int64_t idx = add_node(vt, dir, name, &fs_lazy_ops, key);

	if (idx < 0)
		return (int)idx;
	fs_node_at(vt, (uint32_t)idx)->lazy = fs_lazygen_new(vt, (uint32_t)idx, sc, rank, gen);
	return fs_node_at(vt, (uint32_t)idx)->lazy ? 0 : -ENOMEM;
}

int64_t fs_tree_add_dir(struct fs_vtree *vt, uint32_t parent, const char *name, uint64_t key)
{
	return add_node(vt, parent, name, NULL, key);
}

int64_t fs_tree_add_file(struct fs_vtree *vt, uint32_t dir, const char *name, uint64_t key,
			 const struct fs_file_ops *ops)
{
	int64_t idx = add_node(vt, dir, name, ops, key);

	if (idx < 0 || ops != &fs_concat_ops)
		return idx;
	fs_node_at(vt, (uint32_t)idx)->concat = fs_concat_new(vt);
	return fs_node_at(vt, (uint32_t)idx)->concat ? idx : -ENOMEM;
}

static int add_concat(struct fs_vtree *vt, uint32_t dir, const char *name, uint64_t key,
		      struct fs_concat **out)
{
	int64_t idx = add_node(vt, dir, name, &fs_concat_ops, key);

	if (idx < 0)
		return (int)idx;
	*out = fs_node_at(vt, (uint32_t)idx)->concat = fs_concat_new(vt);
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

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* ---- the files of a scope ---- */

/* trace.txt or events.jsonl of a scope: its threads' lines in time order. */
int fs_node_set_lines(struct fs_vtree *vt, struct vnode *n, struct fs_scope *sc, int view)
{
	int rc = 0;

	n->view = (uint8_t)view;
	if (sc->n_segs == 1) {
		n->ops = &fs_view_ops;
		n->stream = sc->segs[0].stream;
		n->first = sc->segs[0].first;
		n->n_events = sc->segs[0].n_events;
		return tfs_trace_view_size(vt->trace, n->stream, view, n->first, n->n_events,
					   &n->size);
	}
	if (vt->ti.timing == TFS_TIMING_NONE || sc->n_segs == 0) {
		/* no times to merge by: the threads one after the other */
		n->ops = &fs_concat_ops;
		n->concat = fs_concat_new(vt);
		if (!n->concat)
			return -ENOMEM;
		for (uint32_t i = 0; i < sc->n_segs && rc == 0; i++)
			rc = fs_concat_add_view(n->concat, vt->trace, sc->segs[i].stream, view,
						sc->segs[i].first, sc->segs[i].n_events);
		return rc;
	}
	n->ops = &fs_merge_ops;
	n->scope = sc;
	return fs_merge_size(vt, sc, view, &n->size);
}

static int add_merged(struct fs_vtree *vt, uint32_t dir, struct fs_scope *sc, int view,
		      uint64_t key)
{
	int64_t idx = add_node(vt, dir, view_file[view], NULL, key);

	if (idx < 0)
		return (int)idx;
	return fs_node_set_lines(vt, fs_node_at(vt, (uint32_t)idx), sc, view);
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
			/* most streams fit whole: a cursor only for the few cut between parts */
			k = s->n_events - done;
			rc = tfs_trace_view_size(vt->trace, s->stream, TFS_VIEW_CHROME,
						 s->first + done, k, &size);
			if (rc == 0 && size > part_bytes - used)
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

/* The bytes of @sc's Chrome lines. */
static int chrome_lines(struct fs_vtree *vt, const struct fs_scope *sc, uint64_t *lines)
{
	uint64_t n;
	int rc = 0;

	*lines = 0;
	for (uint32_t i = 0; i < sc->n_segs && rc == 0; i++) {
		rc = tfs_trace_view_size(vt->trace, sc->segs[i].stream, TFS_VIEW_CHROME,
					 sc->segs[i].first, sc->segs[i].n_events, &n);
		*lines += n;
	}
	return rc;
}

/* The size of the parts of a trace.json.d/ over @lines bytes of Chrome lines. */
static uint64_t part_bytes(const struct fs_vtree *vt, uint64_t lines)
{
	/* at most FS_JSON_MAX_PARTS parts, so that mount time does not grow with the trace */
	uint64_t base = vt->split_bytes == FS_JSON_SPLIT_BYTES ? FS_JSON_PART_LINES
							       : vt->split_bytes;

	return lines / FS_JSON_MAX_PARTS + 1 > base ? lines / FS_JSON_MAX_PARTS + 1 : base;
}

/* trace.json of a scope, and its trace.json.d/ when its events exceed the split size. */
static int add_chrome(struct fs_vtree *vt, uint32_t dir, const struct fs_scope *sc, uint64_t key)
{
	struct fs_concat *c = NULL;
	uint64_t lines = 0;
	int64_t d;
	int rc;

	rc = add_concat(vt, dir, "trace.json", key, &c);
	if (rc == 0)
		rc = fill_chrome(vt, c, sc, fs_chrome_tail_new);
	if (rc == 0)
		rc = chrome_lines(vt, sc, &lines);
	if (rc < 0 || lines <= vt->split_bytes)
		return rc;
	d = add_node(vt, dir, "trace.json.d", NULL, fs_layout_key("trace.json.d/"));
	return d < 0 ? (int)d : add_chrome_parts(vt, (uint32_t)d, sc, part_bytes(vt, lines));
}

int fs_build_text(struct fs_vtree *vt, const struct fs_dir *d, uint64_t key)
{
	return add_merged(vt, d->node, d->scope, TFS_VIEW_TEXT, key);
}

static int add_root_jsonl(struct fs_vtree *vt, uint64_t key);
static int add_root_chrome(struct fs_vtree *vt, uint64_t key);

int fs_build_jsonl(struct fs_vtree *vt, const struct fs_dir *d, uint64_t key)
{
	if (d->in == FS_IN_ROOT)
		return add_root_jsonl(vt, key);
	return add_merged(vt, d->node, d->scope, TFS_VIEW_JSONL, key);
}

int fs_build_chrome(struct fs_vtree *vt, const struct fs_dir *d, uint64_t key)
{
	if (d->in == FS_IN_ROOT)
		return add_root_chrome(vt, key);
	return add_chrome(vt, d->node, d->scope, key);
}

void fs_build_split_note(const struct fs_vtree *vt, struct fs_sbuf *b)
{
	fs_sb_printf(b, " (here %" PRIu64 " bytes)", vt->split_bytes);
}

int fs_build_calls(struct fs_vtree *vt, const struct fs_dir *d, uint64_t key)
{
	return fs_calls_add(vt, d->node, d->scope, key);
}

int fs_build_windows(struct fs_vtree *vt, const struct fs_dir *d, uint64_t key)
{
	return fs_windows_add(vt, d->node, d->scope, d->rank, key);
}

/* threads/<t>/ under @dir with the views of one event range and the phases in @sc. */
static int add_thread_dir(struct fs_vtree *vt, uint32_t dir, struct fs_scope *sc)
{
	char name[16];
	int64_t threads, tdir;

	threads = get_dir(vt, dir, "threads", fs_layout_key("threads/"));
	if (threads < 0)
		return (int)threads;
	snprintf(name, sizeof(name), "%" PRIu32, sc->segs[0].thread);
	tdir = add_node(vt, (uint32_t)threads, name, NULL, sc->segs[0].thread);
	if (tdir < 0)
		return (int)tdir;
	return fs_layout_add(vt, &(struct fs_dir){(uint32_t)tdir, FS_IN_THREAD, sc,
						   sc->segs[0].rank});
}

/* ---- one rank, built at its first use ---- */

/* What building one rank (or the list of its phases) keeps track of. */
struct rank_lay {
	uint32_t rank;
	uint32_t dir;			/* ranks/<r>/ */
	uint32_t phases;		/* its phases/ */
	struct fs_scope *scope;		/* the rank's */
	uint32_t first, n_streams;	/* its streams: positions of tfs_trace_stream_sorted() */
	struct fs_scope **stream_scope; /* [n_streams] */
	struct fs_phase_rec *recs;	/* [n_phases] its phases */
	char **dirs;			/* [n_phases] their directory names, by slot */
	uint32_t n_phases;
};

static int add_rank_dir(struct fs_vtree *vt, uint32_t ord, struct rank_lay *l)
{
	char name[16];
	int64_t dir, sub;

	snprintf(name, sizeof(name), "%" PRIu32, l->rank);
	dir = add_node(vt, vt->ranks_node, name, NULL, l->rank);
	if (dir < 0)
		return (int)dir;
	l->dir = (uint32_t)dir;
	fs_node_at(vt, l->dir)->flags = VN_RANK_DIR;
	fs_node_at(vt, l->dir)->rank_ord = ord;
	sub = add_node(vt, l->dir, "phases", NULL, fs_layout_key("phases/"));
	if (sub < 0)
		return (int)sub;
	/* its directories come at its first use (fill_phases()): one per phase name */
	fs_node_at(vt, (uint32_t)sub)->flags = VN_LAZY_DIR | VN_LAZY_PHASES;
	l->scope = scope_new(vt, "rank %" PRIu32, l->rank);
	if (!l->scope)
		return -ENOMEM;
	l->scope->whole_ranks = true;
	return 0;
}

/* Each stream of the rank: its thread scope, and its events in the rank's scope. */
static int lay_streams(struct fs_vtree *vt, struct rank_lay *l)
{
	for (uint32_t j = 0; j < l->n_streams; j++) {
		struct tfs_stream_info si;
		struct fs_seg seg;
		uint32_t s;
		int rc;

		rc = tfs_trace_stream_sorted(vt->trace, l->first + j, &s);
		if (rc == 0)
			rc = tfs_trace_stream(vt->trace, s, &si);
		if (rc < 0)
			return rc;
		seg = (struct fs_seg){s, si.rank, si.thread, 0, si.n_events};
		l->stream_scope[j] =
		    scope_new(vt, "rank %" PRIu32 " thread %" PRIu32, si.rank, si.thread);
		if (!l->stream_scope[j])
			return -ENOMEM;
		rc = scope_add_seg(l->stream_scope[j], &seg);
		if (rc == 0)
			rc = scope_add_seg(l->scope, &seg);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Phase @p into the scope @dsc of its directory, node @dir, and a one-thread scope under it. */
static int lay_phase(struct fs_vtree *vt, uint32_t dir, struct fs_scope *dsc,
		     const struct fs_phase_rec *p)
{
	struct fs_seg seg = {p->stream, p->rank, p->thread, p->first, p->n_events};
	struct fs_scope *one = scope_new(vt, "%s thread %" PRIu32, dsc->label, p->thread);
	int rc;

	if (!one)
		return -ENOMEM;
	rc = scope_add_seg(one, &seg);
	if (rc == 0)
		rc = scope_add_phase(one, p->idx);
	if (rc == 0)
		rc = scope_add_seg(dsc, &seg);
	if (rc == 0)
		rc = scope_add_phase(dsc, p->idx);
	if (rc == 0)
		rc = add_thread_dir(vt, dir, one);
	return rc;
}

/* The rank's phases: positions [*first, *first + *n) of the root scope's phases. */
static int rank_phases(struct fs_vtree *vt, uint32_t rank, uint32_t *first, uint32_t *n)
{
	const struct fs_scope *root = vt->root;
	uint32_t lo = 0, hi = root->n_phases, bound[2];

	/* the root's phases are in (rank, index) order */
	for (int k = 0; k < 2; k++) {
		lo = k ? bound[0] : 0;
		hi = root->n_phases;
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;
			struct tfs_phase_info pi;
			struct tfs_stream_info si;
			int rc = tfs_trace_phase(vt->trace, root->phases[mid], &pi);

			if (rc == 0)
				rc = tfs_trace_stream(vt->trace, pi.stream, &si);
			if (rc < 0)
				return rc;
			if (si.rank < rank + (uint32_t)k || (k && rank == UINT32_MAX))
				lo = mid + 1;
			else
				hi = mid;
		}
		bound[k] = lo;
	}
	*first = bound[0];
	*n = bound[1] - bound[0];
	return 0;
}

/* The phases of the scopes made since @from in index order, once they are all in. */
static void sort_phases(struct fs_vtree *vt, uint32_t from)
{
	for (uint32_t i = from; i < vt->n_scopes; i++) {
		struct fs_scope *sc = vt->scopes[i];

		if (sc->n_phases > 1)
			qsort(sc->phases, sc->n_phases, sizeof(*sc->phases), cmp_u32);
	}
}

/* The rank's phases, in @l->recs, each with its own slot. */
static int rank_recs(struct fs_vtree *vt, struct rank_lay *l)
{
	uint32_t first;
	int rc = rank_phases(vt, l->rank, &first, &l->n_phases);

	if (rc < 0 || l->n_phases == 0)
		return rc;
	l->recs = calloc(l->n_phases, sizeof(*l->recs));
	if (!l->recs)
		return -ENOMEM;
	for (uint32_t i = 0; i < l->n_phases && rc == 0; i++) {
		rc = fs_phase_rec_of(vt->trace, vt->root->phases[first + i], &l->recs[i]);
		l->recs[i].slot = i;
	}
	return rc;
}

/* The rank's phases into its scopes and its threads' (their directories come later). */
static int lay_phases(struct fs_vtree *vt, struct rank_lay *l)
{
	uint32_t j;
	int rc = rank_recs(vt, l);

	for (uint32_t i = 0; i < l->n_phases && rc == 0; i++) {
		const struct fs_phase_rec *p = &l->recs[i];

		for (j = 0; j < l->n_streams; j++)
			if (l->stream_scope[j]->segs[0].stream == p->stream)
				break;
		if (j == l->n_streams)
			rc = -EINVAL;
		if (rc == 0)
			rc = scope_add_phase(l->scope, p->idx);
		if (rc == 0)
			rc = scope_add_phase(l->stream_scope[j], p->idx);
	}
	return rc;
}

static void rank_lay_fini(struct rank_lay *l);

/*
 * phases/ of a rank (node @phases) at its first use: a directory per distinct phase name,
 * empty until its own first use (fill_phase()), so that a reader of the rank's other files
 * pays nothing per phase (a program with a phase a time step has tens of thousands), and one
 * listing phases/ a node for each. The rank's phase indices in directory order are kept
 * (vt->phase_order, 4 bytes a phase), each directory's a range of them. Under grow_lock.
 */
static int fill_phases(struct fs_vtree *vt, uint32_t phases)
{
	const uint32_t ord = fs_node_at(vt, fs_node_at(vt, phases)->parent)->rank_ord;
	struct rank_lay l = {.rank = fs_rank_of_ord(vt, ord)};
	uint32_t *order = NULL;
	int rc = 0;

	if (!vt->phase_order) {
		vt->phase_order = calloc(vt->n_rank_dirs, sizeof(*vt->phase_order));
		if (!vt->phase_order)
			return -ENOMEM;
	}
	rc = rank_recs(vt, &l);
	if (rc == 0 && l.n_phases) {
		l.dirs = calloc(l.n_phases, sizeof(*l.dirs));
		order = malloc(l.n_phases * sizeof(*order));
		rc = l.dirs && order ? fs_phase_dirs_name(l.recs, l.n_phases, l.dirs) : -ENOMEM;
	}
	if (rc == 0 && l.n_phases) {
		/* a directory per distinct name, listed by its first phase */
		for (uint32_t i = 0; i < l.n_phases; i++)
			l.recs[i].name = l.dirs[l.recs[i].slot];
		qsort(l.recs, l.n_phases, sizeof(*l.recs), fs_phase_rec_cmp);
	}
	for (uint32_t i = 0, k; rc == 0 && i < l.n_phases; i += k) {
		const struct fs_phase_rec *p = &l.recs[i];
		int64_t node;

		for (k = 1; i + k < l.n_phases && !strcmp(p[k].name, p->name); k++)
			;
		for (uint32_t j = i; j < i + k; j++)
			order[j] = l.recs[j].idx;
		/* sorted: the first phase of a directory has the lowest index, its listing key */
		node = add_node(vt, phases, p->name, NULL, p->idx);
		if (node < 0) {
			rc = (int)node;
			break;
		}
		fs_node_at(vt, (uint32_t)node)->flags = VN_LAZY_DIR | VN_LAZY_PHASE;
		fs_node_at(vt, (uint32_t)node)->first = i;
		fs_node_at(vt, (uint32_t)node)->n_events = k;
	}
	if (rc == 0) {
		free(vt->phase_order[ord]);
		vt->phase_order[ord] = order;
		order = NULL;
	}
	free(order);
	rank_lay_fini(&l);
	return rc;
}

/* One phases/<p>/ (node @dir) at its first use: its files and a threads/<t>/ per phase. */
static int fill_phase(struct fs_vtree *vt, uint32_t dir)
{
	const struct vnode *d = fs_node_at(vt, dir);
	const uint32_t ord = fs_node_at(vt, fs_node_at(vt, d->parent)->parent)->rank_ord;
	const uint32_t rank = fs_rank_of_ord(vt, ord), scopes = vt->n_scopes;
	const uint32_t *order = vt->phase_order ? vt->phase_order[ord] : NULL;
	struct fs_scope *sc;
	int rc = 0;

	if (!order)
		return -EIO; /* made by no fill_phases(): cannot be */
	sc = scope_new(vt, "rank %" PRIu32 " phase directory %s", rank, d->name);
	if (!sc)
		return -ENOMEM;
	for (uint64_t i = d->first; rc == 0 && i < d->first + d->n_events; i++) {
		struct fs_phase_rec p;

		rc = fs_phase_rec_of(vt->trace, order[i], &p);
		if (rc == 0)
			rc = lay_phase(vt, dir, sc, &p);
	}
	if (rc == 0)
		sort_phases(vt, scopes);
	if (rc == 0)
		rc = fs_layout_add(vt, &(struct fs_dir){dir, FS_IN_PHASE, sc, rank});
	return rc;
}

void fs_phase_order_free(struct fs_vtree *vt)
{
	for (uint32_t i = 0; vt->phase_order && i < vt->n_rank_dirs; i++)
		free(vt->phase_order[i]);
	free(vt->phase_order);
	vt->phase_order = NULL;
}

/* replay/: the proxy program (vreplay.c), generated at its first stat like summary.txt. */
int fs_build_replay(struct fs_vtree *vt, const struct fs_dir *d, uint64_t key)
{
	int64_t dir = add_node(vt, d->node, "replay", NULL, key);

	if (dir < 0)
		return (int)dir;
	return fs_layout_add(vt, &(struct fs_dir){(uint32_t)dir, FS_IN_REPLAY, NULL, UINT32_MAX});
}

/* The files of the rank's scopes, once they are complete. */
static int lay_files(struct fs_vtree *vt, struct rank_lay *l, uint32_t scopes_from)
{
	int rc = 0;

	sort_phases(vt, scopes_from);
	for (uint32_t j = 0; j < l->n_streams && rc == 0; j++)
		rc = add_thread_dir(vt, l->dir, l->stream_scope[j]);
	if (rc == 0)
		rc = fs_layout_add(vt, &(struct fs_dir){l->dir, FS_IN_RANK, l->scope, l->rank});
	return rc;
}

static void rank_lay_fini(struct rank_lay *l)
{
	for (uint32_t i = 0; l->dirs && i < l->n_phases; i++)
		free(l->dirs[i]);
	free(l->dirs);
	free(l->recs);
	free(l->stream_scope);
}

static int finish(struct fs_vtree *vt, uint32_t from);

/* Forget the nodes and scopes made since (@nodes, @scopes): a rank that failed to build. */
static void unwind(struct fs_vtree *vt, uint32_t nodes, uint32_t scopes)
{
	while (vt->n_alloc > nodes)
		fs_node_fini(fs_node_at(vt, --vt->n_alloc));
	while (vt->n_scopes > scopes)
		fs_scope_free(vt->scopes[--vt->n_scopes]);
}

/* Build rank directory @ord and everything in it. Under grow_lock. */
static int build_rank(struct fs_vtree *vt, uint32_t ord, uint32_t *node)
{
	struct rank_lay l = {.rank = fs_rank_of_ord(vt, ord)};
	uint32_t nodes = vt->n_alloc, scopes = vt->n_scopes;
	int rc;

	tfs_trace_rank_streams(vt->trace, l.rank, &l.first, &l.n_streams);
	l.stream_scope = calloc((size_t)l.n_streams + 1, sizeof(*l.stream_scope));
	rc = l.stream_scope ? add_rank_dir(vt, ord, &l) : -ENOMEM;
	if (rc == 0)
		rc = lay_streams(vt, &l);
	if (rc == 0)
		rc = lay_phases(vt, &l);
	if (rc == 0)
		rc = lay_files(vt, &l, scopes);
	if (rc == 0)
		rc = finish(vt, nodes);
	rank_lay_fini(&l);
	if (rc < 0) {
		unwind(vt, nodes, scopes);
		return rc;
	}
	*node = l.dir;
	atomic_store_explicit(&vt->n_nodes, vt->n_alloc, memory_order_release);
	return 0;
}

int fs_rank_dir(struct fs_vtree *vt, uint32_t ord, uint32_t *node)
{
	int rc = 0;

	*node = atomic_load_explicit(&vt->rank_node[ord], memory_order_acquire);
	if (*node)
		return 0;
	pthread_mutex_lock(&vt->grow_lock);
	*node = atomic_load_explicit(&vt->rank_node[ord], memory_order_relaxed);
	if (!*node) {
		rc = build_rank(vt, ord, node);
		if (rc == 0) {
			atomic_store_explicit(&vt->rank_node[ord], *node, memory_order_release);
			atomic_fetch_add_explicit(&vt->n_ranks_built, 1, memory_order_relaxed);
		}
	}
	pthread_mutex_unlock(&vt->grow_lock);
	return rc;
}

uint32_t fs_rank_of_ord(const struct fs_vtree *vt, uint32_t ord)
{
	return vt->rank_list ? vt->rank_list[ord] : ord;
}

int fs_rank_ord(const struct fs_vtree *vt, uint32_t rank, uint32_t *ord)
{
	uint32_t lo = 0, hi = vt->n_rank_dirs;

	if (!vt->rank_list) {
		*ord = rank;
		return rank < vt->n_rank_dirs ? 0 : -ENOENT;
	}
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (vt->rank_list[mid] < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	*ord = lo;
	return lo < vt->n_rank_dirs && vt->rank_list[lo] == rank ? 0 : -ENOENT;
}

/* ---- the root ---- */

static int cmp_listing(const void *a, const void *b, void *arg)
{
	const struct fs_vtree *vt = arg;
	const struct vnode *x = fs_node_at(vt, *(const uint32_t *)a);
	const struct vnode *y = fs_node_at(vt, *(const uint32_t *)b);

	if (x->sort_key != y->sort_key)
		return x->sort_key < y->sort_key ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static int cmp_name(const void *a, const void *b, void *arg)
{
	const struct fs_vtree *vt = arg;

	return strcmp(fs_node_at(vt, *(const uint32_t *)a)->name,
		      fs_node_at(vt, *(const uint32_t *)b)->name);
}

/* Order the listing of directory @d and build its lookup index (by_name NULL: ENOMEM). */
static void finish_dir(struct fs_vtree *vt, struct vnode *d)
{
	if (d->ops || d->n_children == 0 || (d->flags & VN_RANKS))
		return;
	if (d->n_children > 1)
		qsort_r(d->children, d->n_children, sizeof(*d->children), cmp_listing, vt);
	free(d->by_name);
	d->by_name = malloc((size_t)d->n_children * sizeof(*d->by_name));
	if (!d->by_name)
		return;
	memcpy(d->by_name, d->children, (size_t)d->n_children * sizeof(*d->by_name));
	if (d->n_children > 1)
		qsort_r(d->by_name, d->n_children, sizeof(*d->by_name), cmp_name, vt);
}

/* Finish every directory from node @from on. */
static int finish(struct fs_vtree *vt, uint32_t from)
{
	for (uint32_t i = from; i < vt->n_alloc; i++) {
		struct vnode *d = fs_node_at(vt, i);

		finish_dir(vt, d);
		if (!d->ops && d->n_children && !(d->flags & VN_RANKS) && !d->by_name)
			return -ENOMEM;
	}
	return 0;
}

void fs_node_fini(struct vnode *n)
{
	free(n->name);
	free(n->children);
	free(n->by_name);
	if (n->ops && n->ops->fini)
		n->ops->fini(n);
	memset(n, 0, sizeof(*n));
}

void fs_vtree_nodes_free(struct fs_vtree *vt)
{
	for (uint32_t i = 0; vt->chunks && i < vt->n_alloc; i++)
		fs_node_fini(fs_node_at(vt, i));
	/*
	 * add_node() makes chunks in order and keeps them when unwind() forgets the nodes of a
	 * rank that failed to build: they run from the first up to the first never made
	 */
	for (uint32_t c = 0; vt->chunks && c < FS_MAX_NODES / FS_NODE_CHUNK && vt->chunks[c];
	     c++)
		free(vt->chunks[c]);
	free(vt->chunks);
	vt->chunks = NULL;
	vt->n_alloc = 0;
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

/*
 * The rank directories: the ranks shown (struct fs_procs: those with streams, and a process
 * that recorded no event), in order (rank_list stays NULL when they are exactly 0 to n - 1,
 * as in a job).
 */
static int list_ranks(struct fs_vtree *vt)
{
	const struct fs_procs *p = vt->procs;
	const uint32_t n = p->n_shown;

	/* distinct and increasing: the last is n - 1 only if they are 0 to n - 1 */
	if (n && p->shown[n - 1] != n - 1) {
		vt->rank_list = malloc((size_t)n * sizeof(*vt->rank_list));
		if (!vt->rank_list)
			return -ENOMEM;
		memcpy(vt->rank_list, p->shown, (size_t)n * sizeof(*vt->rank_list));
	}
	vt->n_rank_dirs = n;
	vt->rank_node = calloc((size_t)n + 1, sizeof(*vt->rank_node));
	return vt->rank_node ? 0 : -ENOMEM;
}

static int cmp_rec_rank(const void *a, const void *b, void *arg)
{
	const struct fs_phase_rec *recs = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (recs[x].rank != recs[y].rank)
		return recs[x].rank < recs[y].rank ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* The root's phases, every one in (rank, index) order: what finds a rank's phases. */
static int lay_root_phases(struct fs_vtree *vt, struct fs_scope *root)
{
	struct fs_phase_rec *recs;
	int rc;

	root->phases = malloc(((size_t)vt->ti.n_phases + 1) * sizeof(*root->phases));
	recs = calloc((size_t)vt->ti.n_phases + 1, sizeof(*recs));
	if (!root->phases || !recs) {
		free(recs);
		return -ENOMEM;
	}
	root->phases_cap = vt->ti.n_phases + 1;
	rc = fs_phase_recs(vt->trace, vt->ti.n_phases, recs);
	for (uint32_t i = 0; i < vt->ti.n_phases && rc == 0; i++)
		rc = scope_add_phase(root, i);
	if (rc == 0 && root->n_phases > 1)
		qsort_r(root->phases, root->n_phases, sizeof(*root->phases), cmp_rec_rank, recs);
	free(recs);
	return rc;
}

/* The root's segments: every stream in (rank, thread) order (fs_once). */
static int fill_root_segs(void *arg)
{
	struct fs_vtree *vt = arg;
	struct fs_scope *root = vt->root;
	int rc = 0;

	root->n_segs = 0;
	root->n_events = 0;
	if (!root->segs) {
		root->segs = malloc(((size_t)vt->ti.n_streams + 1) * sizeof(*root->segs));
		if (!root->segs)
			return -ENOMEM;
		root->segs_cap = vt->ti.n_streams + 1;
	}
	for (uint32_t k = 0; k < vt->ti.n_streams && rc == 0; k++) {
		struct tfs_stream_info si;
		uint32_t s;

		rc = tfs_trace_stream_sorted(vt->trace, k, &s);
		if (rc == 0)
			rc = tfs_trace_stream(vt->trace, s, &si);
		if (rc == 0)
			rc = scope_add_seg(root,
					   &(struct fs_seg){s, si.rank, si.thread, 0, si.n_events});
	}
	return rc;
}

int fs_root_ready(struct fs_vtree *vt)
{
	return fs_once_run(&vt->root_once, fill_root_segs, vt);
}

/* The root's trace.json, at its first use (fs_concat_fill_fn). */
static int fill_root_chrome(struct fs_concat *c, void *arg)
{
	struct fs_vtree *vt = arg;
	int rc = fs_root_ready(vt);

	return rc < 0 ? rc : fill_chrome(vt, c, vt->root, fs_chrome_tail_new);
}

/* The bytes of every stream's Chrome lines, without the root's segments. */
static int all_chrome_lines(struct fs_vtree *vt, uint64_t *lines)
{
	int rc = 0;

	*lines = 0;
	for (uint32_t s = 0; s < vt->ti.n_streams && rc == 0; s++) {
		struct tfs_stream_info si;
		uint64_t n = 0;

		rc = tfs_trace_stream(vt->trace, s, &si);
		if (rc == 0)
			rc = tfs_trace_view_size(vt->trace, s, TFS_VIEW_CHROME, 0, si.n_events, &n);
		*lines += n;
	}
	return rc;
}

/*
 * The root's events.jsonl, at its first use: every rank's events.jsonl, in rank order (the
 * root's segments are in (rank, thread) order, as a rank's own scope has them).
 */
static int fill_root_jsonl(struct fs_concat *c, void *arg)
{
	struct fs_vtree *vt = arg;
	const struct fs_scope *root = vt->root;
	int rc = fs_root_ready(vt);

	for (uint32_t i = 0, j; i < root->n_segs && rc == 0; i = j) {
		struct fs_scope *sc;

		for (j = i + 1; j < root->n_segs && root->segs[j].rank == root->segs[i].rank; j++)
			;
		if (j - i == 1 || vt->ti.timing == TFS_TIMING_NONE) {
			for (uint32_t k = i; k < j && rc == 0; k++)
				rc = fs_concat_add_view(c, vt->trace, root->segs[k].stream,
							TFS_VIEW_JSONL, 0, root->segs[k].n_events);
			continue;
		}
		sc = calloc(1, sizeof(*sc));
		if (!sc)
			return -ENOMEM;
		fs_once_init(&sc->merge_once);
		sc->whole_ranks = true;
		if (asprintf(&sc->label, "rank %" PRIu32, root->segs[i].rank) < 0)
			sc->label = NULL;
		for (uint32_t k = i; k < j && rc == 0 && sc->label; k++)
			rc = scope_add_seg(sc, &root->segs[k]);
		if (rc == 0 && !sc->label)
			rc = -ENOMEM;
		if (rc < 0)
			fs_scope_free(sc);
		else
			rc = fs_concat_add_merge(c, sc, TFS_VIEW_JSONL);
	}
	return rc;
}

static int add_root_jsonl(struct fs_vtree *vt, uint64_t key)
{
	struct fs_concat *c = NULL;
	int rc = add_concat(vt, 0, view_file[TFS_VIEW_JSONL], key, &c);

	if (rc == 0)
		fs_concat_set_fill(c, fill_root_jsonl, vt);
	return rc;
}

/* The root's trace.json and trace.json.d/: both filled at their first use. */
static int add_root_chrome(struct fs_vtree *vt, uint64_t key)
{
	struct fs_concat *c = NULL;
	uint64_t lines = 0;
	int64_t d;
	int rc = add_concat(vt, 0, "trace.json", key, &c);

	if (rc == 0) {
		fs_concat_set_fill(c, fill_root_chrome, vt);
		rc = all_chrome_lines(vt, &lines);
	}
	if (rc < 0 || lines <= vt->split_bytes)
		return rc;
	d = add_node(vt, 0, "trace.json.d", NULL, fs_layout_key("trace.json.d/"));
	if (d < 0)
		return (int)d;
	fs_node_at(vt, (uint32_t)d)->flags = VN_LAZY_DIR;
	vt->root_part_bytes = part_bytes(vt, lines);
	return 0;
}

static void finish_dir(struct fs_vtree *vt, struct vnode *d);

int fs_lazy_dir_build(struct fs_vtree *vt, uint32_t idx)
{
	struct vnode *d = fs_node_at(vt, idx);
	uint32_t nodes, scopes;
	int rc = 0;

	if (atomic_load_explicit(&d->built, memory_order_acquire))
		return 0;
	if (!(d->flags & (VN_LAZY_CALLS | VN_LAZY_PHASES | VN_LAZY_PHASE))) {
		rc = fs_root_ready(vt);
		if (rc < 0)
			return rc;
	}
	pthread_mutex_lock(&vt->grow_lock);
	if (atomic_load_explicit(&d->built, memory_order_relaxed))
		goto out_unlock;
	nodes = vt->n_alloc;
	scopes = vt->n_scopes;
	if (d->flags & VN_LAZY_CALLS)
		rc = fs_calls_fill(vt, idx, d->scope);
	else if (d->flags & VN_LAZY_PHASES)
		rc = fill_phases(vt, idx);
	else if (d->flags & VN_LAZY_PHASE)
		rc = fill_phase(vt, idx);
	else
		rc = add_chrome_parts(vt, idx, vt->root, vt->root_part_bytes);
	if (rc == 0)
		rc = finish(vt, nodes);
	if (rc == 0)
		finish_dir(vt, d);
	if (rc == 0 && d->n_children && !d->by_name)
		rc = -ENOMEM;
	if (rc < 0) {
		unwind(vt, nodes, scopes);
		free(d->children);
		d->children = NULL;
		d->n_children = d->children_cap = 0;
		goto out_unlock;
	}
	atomic_store_explicit(&vt->n_nodes, vt->n_alloc, memory_order_release);
	atomic_store_explicit(&d->built, true, memory_order_release);
out_unlock:
	pthread_mutex_unlock(&vt->grow_lock);
	return rc;
}

/* ranks/: its directories come at their first use (fs_rank_dir()). */
int fs_build_ranks(struct fs_vtree *vt, const struct fs_dir *d, uint64_t key)
{
	int64_t ranks = add_node(vt, d->node, "ranks", NULL, key);

	if (ranks < 0)
		return (int)ranks;
	vt->ranks_node = (uint32_t)ranks;
	fs_node_at(vt, vt->ranks_node)->flags = VN_RANKS;
	fs_node_at(vt, vt->ranks_node)->n_children = vt->n_rank_dirs;
	return 0;
}

/* The root's scope: its phases now, its segments at their first use. */
static int lay_root_scope(struct fs_vtree *vt)
{
	int rc;

	vt->root = scope_new(vt, "the whole trace");
	if (!vt->root)
		return -ENOMEM;
	rc = lay_root_phases(vt, vt->root);
	if (rc == 0)
		rc = list_ranks(vt);
	vt->root->whole_ranks = true;
	return rc;
}

int fs_vtree_build(struct fs_vtree *vt, const char *trace_name)
{
	int64_t root;
	int rc;

	tfs_trace_get_info(vt->trace, &vt->ti);
	vt->chunks = calloc(FS_MAX_NODES / FS_NODE_CHUNK, sizeof(*vt->chunks));
	if (!vt->chunks)
		return -ENOMEM;
	rc = read_tables(vt);
	if (rc == 0)
		rc = fs_procs_new(vt->trace, vt->ti.n_ranks, &vt->procs);
	if (rc == 0)
		rc = fs_pict_state_new(vt);
	if (rc == 0)
		rc = fs_readme_new(vt, trace_name, &vt->readme, &vt->readme_len);
	if (rc < 0)
		return rc;
	root = add_node(vt, 0, "", NULL, 0);
	if (root < 0)
		return (int)root;
	rc = lay_root_scope(vt);
	if (rc == 0)
		rc = fs_layout_add(vt, &(struct fs_dir){0, FS_IN_ROOT, vt->root, UINT32_MAX});
	if (rc == 0)
		rc = finish(vt, 0);
	if (rc == 0)
		atomic_store_explicit(&vt->n_nodes, vt->n_alloc, memory_order_release);
	return rc;
}
