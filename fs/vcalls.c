/*
 * Views of one call: calls/<name>/trace.txt and events.jsonl of a scope hold only the lines
 * of its trace.txt and events.jsonl whose event is of kind <name>, byte for byte and in the
 * same order, so each is the full file filtered as `grep` would. Their sizes are exact
 * without decoding, from the grammars' counts of each terminal (its lines are all as long),
 * and calls/ is filled at its first use, so that a reader of other files pays nothing for
 * it. A read lays its kind out over the grammar once (tfs_cursor_new_kind()) and then seeks
 * any offset in O(height). A directory lists only the kinds that occur in its scope. Under a time-merged trace.txt (several threads with timing) they are merged
 * views of one kind (vmerge.c): the first read of any merged view of a scope builds the
 * scope's merge index, one pass decoding every time, which its calls/ views share. Kinds
 * whose name cannot be a directory ("..", a '/') are left out, and of several kinds of one
 * name only the first that occurs is shown. Listed by name.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vnode_i.h"

static const char *const call_file[2] = {"trace.txt", "events.jsonl"};
static const int call_view[2] = {TFS_VIEW_TEXT, TFS_VIEW_JSONL};

static bool dir_name_ok(const char *name)
{
	return name && *name && strcmp(name, ".") && strcmp(name, "..") && !strchr(name, '/');
}

static int cmp_kind_name(const void *a, const void *b, void *arg)
{
	const struct fs_vtree *vt = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int c = strcmp(vt->kinds[x].name, vt->kinds[y].name);

	return c ? c : (x < y ? -1 : x > y);
}

/*
 * What the kinds hold in @sc, from the grammars' counts of its segments' terminals (O(grammar)
 * a segment, nothing decoded; a terminal's lines are all as long): @events[kind] in the
 * whole scope and, with @bytes, each segment's bytes of each kind in trace.txt and
 * events.jsonl, at bytes[(segment * n_kinds + kind) * 2 + file]. The sums cannot overflow:
 * they part what the codec summed and bounded for the segments' whole views.
 */
static int tally_kinds(struct fs_vtree *vt, const struct fs_scope *sc, uint64_t *events,
		       uint64_t *bytes)
{
	const uint32_t n_terms = vt->ti.n_terminals, n_kinds = vt->ti.n_kinds;
	uint64_t *counts = calloc((size_t)n_terms + 1, sizeof(*counts));
	int rc = counts ? 0 : -ENOMEM;

	for (uint32_t i = 0; i < sc->n_segs && rc == 0; i++) {
		const struct fs_seg *s = &sc->segs[i];

		rc = tfs_trace_term_counts_range(vt->trace, s->stream, s->first, s->n_events,
						 counts);
		for (uint32_t t = 0; t < n_terms && rc == 0; t++) {
			uint32_t kind;

			if (!counts[t] || tfs_trace_term_kind(vt->trace, t, &kind) < 0 ||
			    kind >= n_kinds)
				continue;
			events[kind] += counts[t];
			for (int v = 0; v < 2 && bytes && rc == 0; v++) {
				uint64_t len;

				rc = tfs_trace_term_line_bytes(vt->trace, t, call_view[v], &len);
				bytes[((size_t)i * n_kinds + kind) * 2 + (size_t)v] += counts[t] * len;
			}
		}
	}
	free(counts);
	return rc;
}

/* A file node of calls/<name>/ for view @v of @kind, in @idx; its ops fill in the rest. */
static int add_kind_node(struct fs_vtree *vt, uint32_t dir, uint32_t kind, int v,
			 const struct fs_file_ops *ops, struct vnode **f)
{
	int64_t idx = fs_tree_add_file(vt, dir, call_file[v], (uint64_t)v, ops);

	if (idx < 0)
		return (int)idx;
	*f = fs_node_at(vt, (uint32_t)idx);
	(*f)->view = (uint8_t)call_view[v];
	(*f)->call = kind + 1;
	return 0;
}

/*
 * One file of calls/<name>/: a stream's kind view, the threads' one after the other, or
 * (with timing) merged as the scope's trace.txt is. @bytes as tally_kinds() gives them.
 */
static int add_call_file(struct fs_vtree *vt, uint32_t dir, struct fs_scope *sc, uint32_t kind,
			 int v, const uint64_t *bytes)
{
	const uint32_t n_kinds = vt->ti.n_kinds;
	struct vnode *f = NULL;
	int rc;

	if (sc->n_segs == 1) {
		const struct fs_seg *s = &sc->segs[0];

		rc = add_kind_node(vt, dir, kind, v, &fs_view_ops, &f);
		if (rc < 0)
			return rc;
		f->stream = s->stream;
		f->first = s->first;
		f->n_events = s->n_events;
		f->size = bytes[(size_t)kind * 2 + (size_t)v];
		return 0;
	}
	if (vt->ti.timing != TFS_TIMING_NONE) {
		rc = add_kind_node(vt, dir, kind, v, &fs_merge_ops, &f);
		if (rc < 0)
			return rc;
		f->scope = sc;
		/* the merge only reorders the segments' lines */
		for (uint32_t i = 0; i < sc->n_segs; i++)
			f->size += bytes[((size_t)i * n_kinds + kind) * 2 + (size_t)v];
		return 0;
	}
	rc = add_kind_node(vt, dir, kind, v, &fs_concat_ops, &f);
	for (uint32_t i = 0; i < sc->n_segs && rc == 0; i++)
		rc = fs_concat_add_kind_view(f->concat, sc->segs[i].stream, kind, call_view[v],
					     sc->segs[i].first, sc->segs[i].n_events,
					     bytes[((size_t)i * n_kinds + kind) * 2 + (size_t)v]);
	return rc;
}

/* calls/<name>/ of one kind that occurs in the scope of calls/ (@calls). */
static int add_call_dir(struct fs_vtree *vt, uint32_t calls, struct fs_scope *sc, uint32_t kind,
			uint32_t pos, const uint64_t *bytes)
{
	int64_t kdir = fs_tree_add_dir(vt, calls, vt->kinds[kind].name, pos);
	int rc = 0;

	if (kdir < 0)
		return (int)kdir;
	for (int v = 0; v < 2 && rc == 0; v++)
		rc = add_call_file(vt, (uint32_t)kdir, sc, kind, v, bytes);
	return rc;
}

/*
 * The kinds calls/ of @sc lists, in @order by name: those of @events that occur, whose name
 * can be a directory, the first of several of one name. @return how many
 */
static uint32_t listed_kinds(const struct fs_vtree *vt, const uint64_t *events, uint32_t *order)
{
	const uint32_t n = vt->ti.n_kinds;
	const char *listed = NULL; /* the last name given a directory */
	uint32_t k = 0;

	for (uint32_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), cmp_kind_name, (void *)vt);
	for (uint32_t i = 0; i < n; i++) {
		const char *name = vt->kinds[order[i]].name;

		if (!events[order[i]] || !dir_name_ok(name) || (listed && !strcmp(name, listed)))
			continue;
		listed = name;
		order[k++] = order[i];
	}
	return k;
}

int fs_calls_fill(struct fs_vtree *vt, uint32_t calls, struct fs_scope *sc)
{
	const uint32_t n = vt->ti.n_kinds;
	uint64_t *events = calloc(n, sizeof(*events));
	uint64_t *bytes = calloc((size_t)sc->n_segs * n * 2, sizeof(*bytes));
	uint32_t *order = malloc((size_t)n * sizeof(*order)), n_listed = 0;
	int rc = events && bytes && order ? tally_kinds(vt, sc, events, bytes) : -ENOMEM;

	if (rc == 0)
		n_listed = listed_kinds(vt, events, order);
	/* a kind's directory sorts by its name's place among all kinds */
	for (uint32_t i = 0; i < n_listed && rc == 0; i++)
		rc = add_call_dir(vt, calls, sc, order[i], i, bytes);
	free(order);
	free(bytes);
	free(events);
	return rc;
}

int fs_calls_add(struct fs_vtree *vt, uint32_t dir, struct fs_scope *sc, uint64_t key)
{
	const uint32_t n = vt->ti.n_kinds;
	uint64_t *events;
	uint32_t *order;
	int64_t calls;
	int rc;

	if (sc->n_segs == 0 || n == 0)
		return 0;
	events = calloc(n, sizeof(*events));
	order = malloc((size_t)n * sizeof(*order));
	rc = events && order ? tally_kinds(vt, sc, events, NULL) : -ENOMEM;
	if (rc == 0 && listed_kinds(vt, events, order) > 0) {
		calls = fs_tree_add_dir(vt, dir, "calls", key);
		if (calls < 0) {
			rc = (int)calls;
		} else {
			struct vnode *d = fs_node_at(vt, (uint32_t)calls);

			/* its insides are made at its first use (fs_lazy_dir_build()) */
			d->flags = VN_LAZY_DIR | VN_LAZY_CALLS;
			d->scope = sc;
		}
	}
	free(order);
	free(events);
	return rc;
}
