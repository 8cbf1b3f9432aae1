/*
 * The virtual file tree (vtree_i.h): builds the node table of an opened trace once,
 * answers stat/readdir/lookup by inode, and reads files through per-opener handles.
 * Nodes live in one array indexed by inode - 1 and are immutable after fs_vtree_new(), so
 * any number of threads may query the tree at once. This file does not render anything
 * itself: stream views come from tfs_cursor_pread(), generated files from vgen.c.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfs/reader.h"
#include "vtree_i.h"

enum node_kind {
	NODE_DIR,
	NODE_GEN,  /* generated buffer held by the tree */
	NODE_VIEW, /* a view over an event range of one stream */
};

struct vnode {
	char *name;	    /* owned */
	uint32_t parent;    /* node index; the root is its own parent */
	uint8_t kind;	    /* enum node_kind */
	uint8_t view;	    /* NODE_VIEW: enum tfs_view */
	uint32_t stream;    /* NODE_VIEW */
	uint64_t first;	    /* NODE_VIEW: first event (stream index) */
	uint64_t n_events;  /* NODE_VIEW */
	uint64_t size;	    /* files: exact bytes */
	const char *gen;    /* NODE_GEN: borrowed from the tree */
	uint64_t sort_key;  /* listing order among siblings (ties: creation order) */
	uint32_t *children; /* NODE_DIR: listing order, after finish() */
	uint32_t *by_name;  /* NODE_DIR: sorted by strcmp(name), for lookup */
	uint32_t n_children;
	uint32_t children_cap;
};

struct fs_vtree {
	struct tfs_trace *trace; /* borrowed */
	struct vnode *nodes;
	uint32_t n_nodes;
	uint32_t nodes_cap;
	char *readme, *info; /* generated files */
	size_t readme_len, info_len;
};

struct fs_vfile {
	struct fs_vtree *vt;
	uint64_t size;
	const char *gen;	/* generated file, or NULL */
	struct tfs_cursor *cur; /* stream view, or NULL when empty or generated */
	struct tfs_diag diag;
};

static const char *const view_file[TFS_VIEW_COUNT] = {
    [TFS_VIEW_TEXT] = "trace.txt",
    [TFS_VIEW_JSONL] = "events.jsonl",
};

/* ---- phase names ---- */

static bool needs_escape(unsigned char c)
{
	return c < 0x20 || c == 0x7f || c == '%' || c == '/' || c == '~';
}

static size_t encode_name(const char *name, char *out, size_t out_cap, bool *truncated)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *s = (const unsigned char *)name;
	size_t len = 0, limit = out_cap - 1 < 240 ? out_cap - 1 : 240;
	bool dots = *s != '\0';

	assert(out_cap >= 256);
	*truncated = false;
	for (const unsigned char *p = s; *p; p++)
		dots = dots && *p == '.';
	if (*s == '\0') {
		memcpy(out, "%00", 4);
		return 3;
	}
	for (; *s; s++) {
		bool esc = needs_escape(*s) || (dots && s == (const unsigned char *)name);

		if (len + (esc ? 3 : 1) > limit) {
			*truncated = true;
			break;
		}
		if (esc) {
			out[len++] = '%';
			out[len++] = hex[*s >> 4];
			out[len++] = hex[*s & 15];
		} else {
			out[len++] = (char)*s;
		}
	}
	out[len] = '\0';
	return len;
}

size_t fs_phase_dirname(const char *name, char *out, size_t out_cap)
{
	bool truncated;

	return encode_name(name, out, out_cap, &truncated);
}

/* ---- building ---- */

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

/* Add threads/<thread>/{trace.txt,events.jsonl} under @dir for an event range. */
static int add_thread_views(struct fs_vtree *vt, uint32_t dir, uint32_t stream, uint32_t thread,
			    uint64_t first, uint64_t n_events)
{
	char name[16];
	int64_t threads, tdir;

	threads = get_dir(vt, dir, "threads", 0);
	if (threads < 0)
		return (int)threads;
	snprintf(name, sizeof(name), "%" PRIu32, thread);
	tdir = add_node(vt, (uint32_t)threads, name, NODE_DIR, thread);
	if (tdir < 0)
		return (int)tdir;
	/* the Chrome view is served wrapped, as trace.json: not one of these plain files */
	for (int v = TFS_VIEW_TEXT; v <= TFS_VIEW_JSONL; v++) {
		struct vnode *f;
		int64_t idx = add_node(vt, (uint32_t)tdir, view_file[v], NODE_VIEW, (uint64_t)v);
		int rc;

		if (idx < 0)
			return (int)idx;
		f = &vt->nodes[idx];
		f->view = (uint8_t)v;
		f->stream = stream;
		f->first = first;
		f->n_events = n_events;
		rc = tfs_trace_view_size(vt->trace, stream, v, first, n_events, &f->size);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* A new ranks/<rank>/ with its "threads" and "phases" directories. */
static int64_t rank_dir(struct fs_vtree *vt, uint32_t ranks, uint32_t rank)
{
	char name[16];
	int64_t idx, sub;

	snprintf(name, sizeof(name), "%" PRIu32, rank);
	idx = add_node(vt, ranks, name, NODE_DIR, rank);
	if (idx < 0)
		return idx;
	sub = add_node(vt, (uint32_t)idx, "threads", NODE_DIR, 0);
	if (sub < 0)
		return sub;
	sub = add_node(vt, (uint32_t)idx, "phases", NODE_DIR, 1);
	return sub < 0 ? sub : idx;
}

static int add_streams(struct fs_vtree *vt, uint32_t ranks, const struct tfs_trace_info *ti,
		       int64_t *rank_idx)
{
	for (uint32_t s = 0; s < ti->n_streams; s++) {
		struct tfs_stream_info si;
		int64_t r;
		int rc;

		rc = tfs_trace_stream(vt->trace, s, &si);
		if (rc < 0)
			return rc;
		if (si.rank >= ti->n_ranks)
			return -EINVAL;
		r = rank_idx[si.rank];
		if (r < 0) {
			r = rank_dir(vt, ranks, si.rank);
			if (r < 0)
				return (int)r;
			rank_idx[si.rank] = r;
		}
		rc = add_thread_views(vt, (uint32_t)r, s, si.thread, 0, si.n_events);
		if (rc < 0)
			return rc;
	}
	return 0;
}

struct phase_rec {
	uint32_t idx, rank, thread, stream;
	const char *name; /* borrowed from the trace, then the directory name */
	uint64_t first, n_events;
};

static int cmp_rank_name(const void *a, const void *b)
{
	const struct phase_rec *x = a, *y = b;
	int c;

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Read every phase with its stream's rank and thread, in trace order. */
static int phase_recs(const struct tfs_trace *t, uint32_t n_phases, struct phase_rec *recs)
{
	for (uint32_t i = 0; i < n_phases; i++) {
		struct tfs_phase_info pi;
		struct tfs_stream_info si;
		int rc = tfs_trace_phase(t, i, &pi);

		if (rc == 0)
			rc = tfs_trace_stream(t, pi.stream, &si);
		if (rc < 0)
			return rc;
		recs[i] = (struct phase_rec){.idx = i,
					     .rank = si.rank,
					     .thread = si.thread,
					     .stream = pi.stream,
					     .name = pi.name ? pi.name : "",
					     .first = pi.first_event,
					     .n_events = pi.n_events};
	}
	return 0;
}

/*
 * Directory names of one group of phases (same rank and name, sorted by index): the encoded
 * name, plus "~<first index>" if it was cut; a phase whose thread an earlier phase of the
 * group already has gets the encoded name plus "~<own index>".
 */
static int name_group(const struct phase_rec *g, uint32_t n, char **dirs)
{
	char enc[256], base[256 + 16], own[256 + 16];
	bool truncated;

	encode_name(g[0].name, enc, sizeof(enc), &truncated);
	snprintf(base, sizeof(base), truncated ? "%s~%" PRIu32 : "%s", enc, g[0].idx);
	for (uint32_t i = 0; i < n; i++) {
		bool seen = false;

		for (uint32_t j = 0; j < i && !seen; j++)
			seen = g[j].thread == g[i].thread;
		snprintf(own, sizeof(own), "%s~%" PRIu32, enc, g[i].idx);
		dirs[g[i].idx] = strdup(seen ? own : base);
		if (!dirs[g[i].idx])
			return -ENOMEM;
	}
	return 0;
}

int fs_phase_dirs_new(const struct tfs_trace *t, char ***out)
{
	struct tfs_trace_info ti;
	struct phase_rec *recs;
	char **dirs;
	int rc;

	*out = NULL;
	tfs_trace_get_info(t, &ti);
	dirs = calloc((size_t)ti.n_phases + 1, sizeof(*dirs));
	recs = calloc((size_t)ti.n_phases + 1, sizeof(*recs));
	if (!dirs || !recs) {
		rc = -ENOMEM;
		goto err_free;
	}
	rc = phase_recs(t, ti.n_phases, recs);
	if (rc < 0)
		goto err_free;
	qsort(recs, ti.n_phases, sizeof(*recs), cmp_rank_name);
	for (uint32_t i = 0, n; i < ti.n_phases && rc == 0; i += n) {
		for (n = 1; i + n < ti.n_phases && recs[i + n].rank == recs[i].rank &&
			    strcmp(recs[i + n].name, recs[i].name) == 0;
		     n++)
			;
		rc = name_group(&recs[i], n, dirs);
	}
	if (rc < 0)
		goto err_free;
	free(recs);
	*out = dirs;
	return 0;

err_free:
	fs_phase_dirs_free(dirs, ti.n_phases);
	free(recs);
	return rc;
}

void fs_phase_dirs_free(char **dirs, uint32_t n_phases)
{
	if (!dirs)
		return;
	for (uint32_t i = 0; i < n_phases; i++)
		free(dirs[i]);
	free(dirs);
}

/* ranks/<r>/phases/<dir>/threads/<t>/..., one directory per distinct (rank, dir). */
static int add_phases(struct fs_vtree *vt, const struct tfs_trace_info *ti, int64_t *rank_idx)
{
	struct phase_rec *recs;
	char **dirs;
	int64_t dir = -1;
	int rc;

	if (ti->n_phases == 0)
		return 0;
	rc = fs_phase_dirs_new(vt->trace, &dirs);
	if (rc < 0)
		return rc;
	recs = calloc(ti->n_phases, sizeof(*recs));
	if (!recs) {
		rc = -ENOMEM;
		goto out_free_dirs;
	}
	rc = phase_recs(vt->trace, ti->n_phases, recs);
	if (rc < 0)
		goto out_free_recs;
	for (uint32_t i = 0; i < ti->n_phases; i++)
		recs[i].name = dirs[i];
	qsort(recs, ti->n_phases, sizeof(*recs), cmp_rank_name);
	for (uint32_t i = 0; i < ti->n_phases; i++) {
		const struct phase_rec *p = &recs[i];
		int64_t r = p->rank < ti->n_ranks ? rank_idx[p->rank] : -1;

		if (r < 0) {
			rc = -EINVAL;
			goto out_free_recs;
		}
		/* sorted: the first phase of a directory has the lowest index, its listing key */
		if (i == 0 || p->rank != p[-1].rank || strcmp(p->name, p[-1].name)) {
			int64_t phases = find_child(vt, (uint32_t)r, "phases");

			assert(phases >= 0);
			dir = add_node(vt, (uint32_t)phases, p->name, NODE_DIR, p->idx);
			if (dir < 0) {
				rc = (int)dir;
				goto out_free_recs;
			}
		}
		rc = add_thread_views(vt, (uint32_t)dir, p->stream, p->thread, p->first,
				      p->n_events);
		if (rc < 0)
			goto out_free_recs;
	}
out_free_recs:
	free(recs);
out_free_dirs:
	fs_phase_dirs_free(dirs, ti->n_phases);
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
		qsort_r(d->children, d->n_children, sizeof(*d->children), cmp_listing, vt);
		d->by_name = malloc((size_t)d->n_children * sizeof(*d->by_name));
		if (!d->by_name)
			return -ENOMEM;
		memcpy(d->by_name, d->children, (size_t)d->n_children * sizeof(*d->by_name));
		qsort_r(d->by_name, d->n_children, sizeof(*d->by_name), cmp_name, vt);
	}
	return 0;
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

static int build(struct fs_vtree *vt, const char *trace_name)
{
	struct tfs_trace_info ti;
	int64_t *rank_idx, root, ranks;
	int rc;

	tfs_trace_get_info(vt->trace, &ti);
	rc = fs_gen_files(vt->trace, trace_name, &vt->readme, &vt->readme_len, &vt->info,
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
	ranks = add_node(vt, 0, "ranks", NODE_DIR, 2);
	if (ranks < 0)
		return (int)ranks;
	rank_idx = malloc(((size_t)ti.n_ranks + 1) * sizeof(*rank_idx));
	if (!rank_idx)
		return -ENOMEM;
	for (uint32_t r = 0; r < ti.n_ranks; r++)
		rank_idx[r] = -1;
	rc = add_streams(vt, (uint32_t)ranks, &ti, rank_idx);
	if (rc == 0)
		rc = add_phases(vt, &ti, rank_idx);
	free(rank_idx);
	return rc < 0 ? rc : finish(vt);
}

int fs_vtree_new(struct tfs_trace *t, const char *trace_name, struct fs_vtree **out)
{
	struct fs_vtree *vt;
	int rc;

	*out = NULL;
	vt = calloc(1, sizeof(*vt));
	if (!vt)
		return -ENOMEM;
	vt->trace = t;
	rc = build(vt, trace_name);
	if (rc < 0) {
		fs_vtree_free(vt);
		return rc;
	}
	*out = vt;
	return 0;
}

void fs_vtree_free(struct fs_vtree *vt)
{
	if (!vt)
		return;
	for (uint32_t i = 0; i < vt->n_nodes; i++) {
		free(vt->nodes[i].name);
		free(vt->nodes[i].children);
		free(vt->nodes[i].by_name);
	}
	free(vt->nodes);
	free(vt->readme);
	free(vt->info);
	free(vt);
}

/* ---- queries ---- */

static const struct vnode *node_of(const struct fs_vtree *vt, uint64_t ino)
{
	if (ino < FS_ROOT_INO || ino - FS_ROOT_INO >= vt->n_nodes)
		return NULL;
	return &vt->nodes[ino - FS_ROOT_INO];
}

uint64_t fs_vtree_n_nodes(const struct fs_vtree *vt)
{
	return vt->n_nodes;
}

int fs_vtree_stat(const struct fs_vtree *vt, uint64_t ino, struct fs_node_info *info)
{
	const struct vnode *n = node_of(vt, ino);

	if (!n)
		return -ENOENT;
	info->ino = ino;
	info->parent = (uint64_t)n->parent + FS_ROOT_INO;
	info->name = n->name;
	info->is_dir = n->kind == NODE_DIR;
	info->size = n->size;
	info->n_children = n->n_children;
	return 0;
}

int fs_vtree_child(const struct fs_vtree *vt, uint64_t dir, uint32_t idx, uint64_t *ino)
{
	const struct vnode *d = node_of(vt, dir);

	if (!d)
		return -ENOENT;
	if (d->kind != NODE_DIR)
		return -ENOTDIR;
	if (idx >= d->n_children)
		return -ENOENT;
	*ino = (uint64_t)d->children[idx] + FS_ROOT_INO;
	return 0;
}

int fs_vtree_lookup(const struct fs_vtree *vt, uint64_t dir, const char *name, uint64_t *ino)
{
	const struct vnode *d = node_of(vt, dir);
	uint32_t lo = 0, hi;

	if (!d)
		return -ENOENT;
	if (d->kind != NODE_DIR)
		return -ENOTDIR;
	if (strcmp(name, ".") == 0) {
		*ino = dir;
		return 0;
	}
	if (strcmp(name, "..") == 0) {
		*ino = (uint64_t)d->parent + FS_ROOT_INO;
		return 0;
	}
	hi = d->n_children;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, vt->nodes[d->by_name[mid]].name);

		if (c == 0) {
			*ino = (uint64_t)d->by_name[mid] + FS_ROOT_INO;
			return 0;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -ENOENT;
}

int fs_vtree_resolve(const struct fs_vtree *vt, const char *path, uint64_t *ino)
{
	uint64_t cur = FS_ROOT_INO;
	char part[256];

	while (*path) {
		size_t len = strcspn(path, "/");
		int rc;

		if (len == 0) {
			path++;
			continue;
		}
		if (len >= sizeof(part))
			return -ENAMETOOLONG;
		memcpy(part, path, len);
		part[len] = '\0';
		rc = fs_vtree_lookup(vt, cur, part, &cur);
		if (rc < 0)
			return rc;
		path += len;
	}
	*ino = cur;
	return 0;
}

/* ---- file handles ---- */

int fs_vfile_open(struct fs_vtree *vt, uint64_t ino, struct fs_vfile **out)
{
	const struct vnode *n = node_of(vt, ino);
	struct fs_vfile *f;
	int rc;

	*out = NULL;
	if (!n)
		return -ENOENT;
	if (n->kind == NODE_DIR)
		return -EISDIR;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->vt = vt;
	f->size = n->size;
	if (n->kind == NODE_GEN) {
		f->gen = n->gen;
	} else if (n->size > 0) {
		rc = tfs_cursor_new(vt->trace, n->stream, n->view, n->first, n->n_events, &f->cur);
		if (rc < 0) {
			free(f);
			return rc;
		}
	}
	*out = f;
	return 0;
}

void fs_vfile_close(struct fs_vfile *f)
{
	if (!f)
		return;
	tfs_cursor_free(f->cur);
	free(f);
}

uint64_t fs_vfile_size(const struct fs_vfile *f)
{
	return f->size;
}

ssize_t fs_vfile_read(struct fs_vfile *f, void *buf, size_t len, uint64_t off)
{
	if (off >= f->size || len == 0)
		return 0;
	if (len > f->size - off)
		len = (size_t)(f->size - off);
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	if (f->gen) {
		memcpy(buf, f->gen + off, len);
		return (ssize_t)len;
	}
	return tfs_cursor_pread(f->cur, buf, len, off, &f->diag);
}

const struct tfs_diag *fs_vfile_diag(const struct fs_vfile *f)
{
	return &f->diag;
}
