/*
 * Views of one call: calls/<name>/trace.txt and events.jsonl of a scope hold only the lines
 * of its trace.txt and events.jsonl whose event is of kind <name>, byte for byte and in the
 * same order, so each is the full file filtered as `grep` would. The codec lays every kind
 * out over the grammar (tfs_cursor_new_kind()), so their sizes are exact without decoding
 * and a read at any offset seeks in O(height). A directory lists only the kinds that occur
 * in its scope. Under a time-merged trace.txt (several threads with timing) they are merged
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

/* Events of @kind in @sc. */
static int kind_events(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t kind,
		       uint64_t *events)
{
	*events = 0;
	for (uint32_t i = 0; i < sc->n_segs; i++) {
		const struct fs_seg *s = &sc->segs[i];
		uint64_t ev, bytes;
		int rc = tfs_trace_kind_view_size(vt->trace, s->stream, kind, TFS_VIEW_TEXT,
						  s->first, s->n_events, &ev, &bytes);

		if (rc < 0)
			return rc;
		*events += ev;
	}
	return 0;
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
 * (with timing) merged as the scope's trace.txt is.
 */
static int add_call_file(struct fs_vtree *vt, uint32_t dir, struct fs_scope *sc, uint32_t kind,
			 int v)
{
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
		return tfs_trace_kind_view_size(vt->trace, s->stream, kind, call_view[v], s->first,
						s->n_events, NULL, &f->size);
	}
	if (vt->ti.timing != TFS_TIMING_NONE) {
		rc = add_kind_node(vt, dir, kind, v, &fs_merge_ops, &f);
		if (rc < 0)
			return rc;
		f->scope = sc;
		return fs_merge_kind_size(vt, sc, kind, call_view[v], &f->size);
	}
	rc = add_kind_node(vt, dir, kind, v, &fs_concat_ops, &f);
	for (uint32_t i = 0; i < sc->n_segs && rc == 0; i++)
		rc = fs_concat_add_kind_view(f->concat, vt->trace, sc->segs[i].stream, kind,
					     call_view[v], sc->segs[i].first,
					     sc->segs[i].n_events);
	return rc;
}

/* calls/<name>/ of one kind that occurs in @sc, making calls/ first if need be. */
static int add_call_dir(struct fs_vtree *vt, uint32_t dir, struct fs_scope *sc,
			uint64_t key, uint32_t kind, uint32_t pos, int64_t *calls)
{
	int64_t kdir;
	int rc = 0;

	if (*calls < 0) {
		*calls = fs_tree_add_dir(vt, dir, "calls", key);
		if (*calls < 0)
			return (int)*calls;
	}
	kdir = fs_tree_add_dir(vt, (uint32_t)*calls, vt->kinds[kind].name, pos);
	if (kdir < 0)
		return (int)kdir;
	for (int v = 0; v < 2 && rc == 0; v++)
		rc = add_call_file(vt, (uint32_t)kdir, sc, kind, v);
	return rc;
}

/*
 * Mark in @present the kinds that occur anywhere in the streams of @sc, from the grammars'
 * counts: only those get laid out (each layout costs about what the stream's own does).
 */
static int kinds_present(struct fs_vtree *vt, const struct fs_scope *sc, bool *present)
{
	uint64_t *counts = calloc((size_t)vt->ti.n_terminals + 1, sizeof(*counts));
	int rc = counts ? 0 : -ENOMEM;

	for (uint32_t i = 0; i < sc->n_segs && rc == 0; i++) {
		rc = tfs_trace_term_counts(vt->trace, sc->segs[i].stream, counts);
		for (uint32_t t = 0; t < vt->ti.n_terminals && rc == 0; t++) {
			uint32_t kind;

			if (counts[t] && tfs_trace_term_kind(vt->trace, t, &kind) == 0 &&
			    kind < vt->ti.n_kinds)
				present[kind] = true;
		}
	}
	free(counts);
	return rc;
}

int fs_calls_add(struct fs_vtree *vt, uint32_t dir, struct fs_scope *sc, uint64_t key)
{
	uint32_t n = vt->ti.n_kinds, *order;
	const char *listed = NULL; /* the last name given a directory */
	int64_t calls = -1;
	bool *present;
	int rc;

	if (sc->n_segs == 0 || n == 0)
		return 0;
	order = malloc((size_t)n * sizeof(*order));
	present = calloc(n, sizeof(*present));
	rc = order && present ? kinds_present(vt, sc, present) : -ENOMEM;
	for (uint32_t k = 0; k < n && rc == 0; k++)
		order[k] = k;
	if (rc == 0)
		qsort_r(order, n, sizeof(*order), cmp_kind_name, vt);
	for (uint32_t i = 0; i < n && rc == 0; i++) {
		const char *name = vt->kinds[order[i]].name;
		uint64_t events;

		if (!present[order[i]] || !dir_name_ok(name) || (listed && !strcmp(name, listed)))
			continue;
		rc = kind_events(vt, sc, order[i], &events);
		if (rc == 0 && events) {
			rc = add_call_dir(vt, dir, sc, key, order[i], i, &calls);
			listed = name;
		}
	}
	free(present);
	free(order);
	return rc;
}
