/*
 * The virtual file tree (vtree_i.h): answers stat/readdir/lookup by inode and reads files
 * through per-opener handles. Nodes live in one array indexed by inode - 1; vbuild.c lays
 * them out once and they never move, so any number of threads may query the tree at once.
 * The only state that changes after the build is computed once per file or scope (summary
 * text, JSON tails, merge indexes) behind struct fs_once. This file renders nothing itself:
 * it dispatches to the cursor, vconcat.c, vmerge.c and the generated buffers.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfs/reader.h"
#include "vnode_i.h"
#include "vpict_i.h"

struct fs_vfile {
	struct fs_vtree *vt;
	uint64_t size;
	const char *gen;		/* generated file, or NULL */
	struct tfs_cursor *cur;		/* stream view, or NULL */
	struct fs_concat_reader *cr;	/* composite file, or NULL */
	struct fs_merge_reader *mr;	/* merged view, or NULL */
	struct tfs_diag diag;
};

/* ---- lifetime ---- */

int fs_vtree_new(struct tfs_trace *t, const char *trace_name, struct fs_vtree **out)
{
	struct fs_vtree *vt;
	int rc;

	*out = NULL;
	vt = calloc(1, sizeof(*vt));
	if (!vt)
		return -ENOMEM;
	vt->trace = t;
	fs_once_init(&vt->terms_once);
	fs_once_init(&vt->root_once);
	pthread_mutex_init(&vt->grow_lock, NULL);
	rc = fs_vtree_build(vt, trace_name);
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
	fs_vtree_nodes_free(vt);
	for (uint32_t i = 0; i < vt->n_scopes; i++)
		fs_scope_free(vt->scopes[i]);
	if (vt->terms) {
		for (uint32_t i = 0; i < vt->ti.n_terminals; i++)
			free(vt->terms[i].zone);
	}
	fs_once_fini(&vt->terms_once);
	fs_once_fini(&vt->root_once);
	pthread_mutex_destroy(&vt->grow_lock);
	free(vt->rank_list);
	free(vt->rank_node);
	fs_procs_free(vt->procs);
	fs_windows_free(vt);
	fs_pict_state_free(vt->pict);
	free(vt->term_len[0]);
	free(vt->term_len[1]);
	free(vt->terms);
	free(vt->kinds);
	free(vt->scopes);
	free(vt->readme);
	free(vt);
}

/* ---- queries ---- */

/*
 * The node of inode @ino, building a rank directory at its first use (the tree is logically
 * const: that only adds what was always there). @return 0, -ENOENT or the build's error
 */
static int node_get(const struct fs_vtree *vt, uint64_t ino, struct vnode **out)
{
	uint32_t idx;
	int rc;

	if (ino >= FS_RANK_INO) {
		if (ino - FS_RANK_INO >= vt->n_rank_dirs)
			return -ENOENT;
		rc = fs_rank_dir((struct fs_vtree *)vt, (uint32_t)(ino - FS_RANK_INO), &idx);
		if (rc < 0)
			return rc;
	} else if (ino >= FS_ROOT_INO + FS_WINDOW_IDX) {
		if (ino - FS_ROOT_INO >= UINT32_MAX ||
		    !fs_window_node(vt, (uint32_t)(ino - FS_ROOT_INO)))
			return -ENOENT;
		idx = (uint32_t)(ino - FS_ROOT_INO);
	} else {
		if (ino < FS_ROOT_INO ||
		    ino - FS_ROOT_INO >= atomic_load_explicit(&vt->n_nodes, memory_order_acquire))
			return -ENOENT;
		idx = (uint32_t)(ino - FS_ROOT_INO);
		if (fs_node_at(vt, idx)->flags & VN_RANK_DIR)
			return -ENOENT; /* known by its rank inode only */
	}
	*out = fs_node_at(vt, idx);
	if ((*out)->flags & VN_LAZY_DIR)
		return fs_lazy_dir_build((struct fs_vtree *)vt, idx);
	return 0;
}

/* The inode of node @idx. */
static uint64_t ino_of(const struct fs_vtree *vt, uint32_t idx)
{
	const struct vnode *n = fs_node_at(vt, idx);

	return n->flags & VN_RANK_DIR ? FS_RANK_INO + n->rank_ord : (uint64_t)idx + FS_ROOT_INO;
}

static int lazy_run(void *arg)
{
	struct fs_lazygen *g = arg;
	int rc;

	if (g->scope == g->vt->root) {
		rc = fs_root_ready(g->vt);
		if (rc < 0)
			return rc;
	}
	switch (g->what) {
	case LAZY_SUMMARY:
		rc = fs_summary_new(g->vt, g->scope, &g->data, &g->len);
		break;
	case LAZY_STACKS:
		rc = fs_stacks_new(g->vt, g->scope, &g->data, &g->len);
		break;
	case LAZY_SIGNATURES:
		rc = fs_signatures_new(g->vt, &g->data, &g->len);
		break;
	case LAZY_BACKTRACES:
		rc = fs_backtraces_new(g->vt, g->rank, &g->data, &g->len);
		break;
	case LAZY_ALLOCS:
		rc = fs_allocs_new(g->vt, g->scope, g->rank, &g->data, &g->len);
		break;
	case LAZY_PROXY:
		rc = fs_replay_proxy_new(g->vt, &g->data, &g->len);
		break;
	case LAZY_REPLAY_README:
		rc = fs_replay_readme_new(g->vt, &g->data, &g->len);
		break;
	case LAZY_FILES:
		rc = fs_files_new(g->vt, g->scope, g->rank, &g->data, &g->len);
		break;
	case LAZY_INFO:
		rc = fs_info_text_new(g->vt->trace, &g->data, &g->len);
		break;
	case LAZY_FN:
		rc = g->fn(g->vt, g->scope, g->rank, &g->data, &g->len);
		break;
	default:
		rc = fs_grammar_new(g->vt, &g->data, &g->len);
		break;
	}
	if (rc == 0)
		fs_node_at(g->vt, g->node)->size = g->len;
	return rc;
}

/*
 * The exact size of @n, computing once what it depends on: a summary's text, a composite's
 * generated tail.
 */
static int node_ready(struct vnode *n, uint64_t *size)
{
	int rc = 0;

	if (n->kind == NODE_LAZY)
		rc = fs_once_run(&n->lazy->once, lazy_run, n->lazy);
	if (n->kind == NODE_CONCAT)
		return fs_concat_ready(n->concat, size);
	*size = n->size;
	return rc;
}

uint64_t fs_vtree_n_nodes(const struct fs_vtree *vt)
{
	/* the rank directories not built yet count as one node each */
	return atomic_load_explicit(&vt->n_nodes, memory_order_acquire) + vt->n_rank_dirs -
	       atomic_load_explicit(&vt->n_ranks_built, memory_order_relaxed) +
	       fs_window_n_nodes(vt);
}

int fs_vtree_peek(const struct fs_vtree *vt, uint64_t ino, const char **name, bool *is_dir)
{
	static _Thread_local char rank_name[16];
	struct vnode *n;
	uint32_t idx;
	int rc;

	/* a rank directory is named without being built: listing ranks/ builds none */
	if (ino >= FS_RANK_INO && ino - FS_RANK_INO < vt->n_rank_dirs) {
		idx = atomic_load_explicit(&vt->rank_node[ino - FS_RANK_INO], memory_order_acquire);
		if (!idx) {
			snprintf(rank_name, sizeof(rank_name), "%" PRIu32,
				 fs_rank_of_ord(vt, (uint32_t)(ino - FS_RANK_INO)));
			*name = rank_name;
			*is_dir = true;
			return 0;
		}
	}
	rc = node_get(vt, ino, &n);
	if (rc < 0)
		return rc;
	*name = n->name;
	*is_dir = n->kind == NODE_DIR;
	return 0;
}

int fs_vtree_stat(const struct fs_vtree *vt, uint64_t ino, struct fs_node_info *info)
{
	struct vnode *n;
	int rc = node_get(vt, ino, &n);

	if (rc < 0)
		return rc;
	/* the tree is logically const: this only fills in what is computed once */
	rc = node_ready(n, &info->size);
	if (rc < 0)
		return rc;
	info->ino = ino;
	info->parent = ino_of(vt, n->parent);
	info->name = n->name;
	info->is_dir = n->kind == NODE_DIR;
	info->n_children = n->wdir ? fs_window_n_listed(vt, n) : n->n_children;
	return 0;
}

int fs_vtree_attr(const struct fs_vtree *vt, uint64_t ino, struct fs_node_info *info)
{
	static _Thread_local char rank_name[16];
	uint64_t ranks;
	int rc;

	/* a rank directory not built yet: stat-ing every entry of ranks/ builds none */
	if (ino < FS_RANK_INO || ino - FS_RANK_INO >= vt->n_rank_dirs ||
	    atomic_load_explicit(&vt->rank_node[ino - FS_RANK_INO], memory_order_acquire))
		return fs_vtree_stat(vt, ino, info);
	rc = fs_vtree_lookup(vt, FS_ROOT_INO, "ranks", &ranks);
	if (rc < 0)
		return rc;
	snprintf(rank_name, sizeof(rank_name), "%" PRIu32,
		 fs_rank_of_ord(vt, (uint32_t)(ino - FS_RANK_INO)));
	*info = (struct fs_node_info){.ino = ino, .parent = ranks, .name = rank_name,
				      .is_dir = true};
	return 0;
}

int fs_vtree_child(const struct fs_vtree *vt, uint64_t dir, uint32_t idx, uint64_t *ino)
{
	struct vnode *d;
	int rc = node_get(vt, dir, &d);

	if (rc < 0)
		return rc;
	if (d->kind != NODE_DIR)
		return -ENOTDIR;
	if (d->wdir)
		return fs_window_child(vt, d, idx, ino);
	if (idx >= d->n_children)
		return -ENOENT;
	*ino = d->flags & VN_RANKS ? FS_RANK_INO + idx : ino_of(vt, d->children[idx]);
	return 0;
}

/* The rank directory @name in ranks/: canonical decimal, a rank with streams. */
static int lookup_rank(const struct fs_vtree *vt, const char *name, uint64_t *ino)
{
	uint64_t rank = 0;
	uint32_t ord;

	if (!*name || (name[0] == '0' && name[1]))
		return -ENOENT;
	for (const char *c = name; *c; c++) {
		if (*c < '0' || *c > '9' || rank > UINT32_MAX / 10)
			return -ENOENT;
		rank = rank * 10 + (uint64_t)(*c - '0');
	}
	if (rank > UINT32_MAX || fs_rank_ord(vt, (uint32_t)rank, &ord) < 0)
		return -ENOENT;
	*ino = FS_RANK_INO + ord;
	return 0;
}

int fs_vtree_lookup(const struct fs_vtree *vt, uint64_t dir, const char *name, uint64_t *ino)
{
	struct vnode *d;
	uint32_t lo = 0, hi;
	int rc = node_get(vt, dir, &d);

	if (rc < 0)
		return rc;
	if (d->kind != NODE_DIR)
		return -ENOTDIR;
	if (strcmp(name, ".") == 0) {
		*ino = dir;
		return 0;
	}
	if (strcmp(name, "..") == 0) {
		*ino = ino_of(vt, d->parent);
		return 0;
	}
	if (d->flags & VN_RANKS)
		return lookup_rank(vt, name, ino);
	hi = d->n_children;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, fs_node_at(vt, d->by_name[mid])->name);

		if (c == 0) {
			*ino = ino_of(vt, d->by_name[mid]);
			return 0;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return d->wdir ? fs_window_lookup(vt, d, name, ino) : -ENOENT;
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

static int open_reader(struct fs_vtree *vt, const struct vnode *n, struct fs_vfile *f)
{
	switch (n->kind) {
	case NODE_GEN:
		f->gen = n->gen;
		return 0;
	case NODE_LAZY:
		f->gen = n->lazy->data;
		return 0;
	case NODE_VIEW:
		if (n->call)
			return tfs_cursor_new_kind(vt->trace, n->stream, n->call - 1, n->view,
						   n->first, n->n_events, &f->cur);
		return tfs_cursor_new(vt->trace, n->stream, n->view, n->first, n->n_events,
				      &f->cur);
	case NODE_CONCAT:
		return fs_concat_reader_new(n->concat, vt->trace, &f->cr);
	case NODE_MERGE:
		return fs_merge_reader_new(vt, n->scope, n->view, &f->mr);
	}
	return -EISDIR;
}

int fs_vtree_file_views(struct fs_vtree *vt, uint64_t ino, int *view, uint32_t *call,
			struct fs_view_seg **segs, uint32_t *n)
{
	struct vnode *node;
	int rc = node_get(vt, ino, &node);

	*segs = NULL;
	*n = 0;
	if (rc < 0)
		return rc;
	switch (node->kind) {
	case NODE_DIR:
		return -EISDIR;
	case NODE_CONCAT:
		return fs_concat_views(node->concat, view, call, segs, n);
	case NODE_VIEW:
		*segs = malloc(sizeof(**segs));
		if (!*segs)
			return -ENOMEM;
		**segs = (struct fs_view_seg){node->stream, node->first, node->n_events};
		*n = 1;
		*view = node->view;
		*call = node->call;
		return 0;
	case NODE_MERGE:
		*segs = calloc((size_t)node->scope->n_segs + 1, sizeof(**segs));
		if (!*segs)
			return -ENOMEM;
		for (uint32_t i = 0; i < node->scope->n_segs; i++) {
			const struct fs_seg *s = &node->scope->segs[i];

			(*segs)[i] = (struct fs_view_seg){s->stream, s->first, s->n_events};
		}
		*n = node->scope->n_segs;
		*view = node->view;
		*call = 0;
		return 0;
	}
	return -ENOTSUP;
}

int fs_vfile_open(struct fs_vtree *vt, uint64_t ino, struct fs_vfile **out)
{
	struct vnode *n;
	struct fs_vfile *f;
	int rc;

	*out = NULL;
	rc = node_get(vt, ino, &n);
	if (rc < 0)
		return rc;
	if (n->kind == NODE_DIR)
		return -EISDIR;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	rc = node_ready(n, &f->size);
	if (rc < 0) {
		free(f);
		return rc;
	}
	f->vt = vt;
	if (f->size > 0) {
		rc = open_reader(vt, n, f);
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
	fs_concat_reader_free(f->cr);
	fs_merge_reader_free(f->mr);
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
	if (f->cr)
		return fs_concat_read(f->cr, buf, len, off, &f->diag);
	if (f->mr)
		return fs_merge_read(f->mr, buf, len, off, &f->diag);
	return tfs_cursor_pread(f->cur, buf, len, off, &f->diag);
}

const struct tfs_diag *fs_vfile_diag(const struct fs_vfile *f)
{
	return &f->diag;
}
