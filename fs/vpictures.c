/*
 * The table of pictures: which generated views a root, rank or window directory holds, each
 * one line. vbuild.c calls fs_pictures_add() for the root and for each rank; a window
 * directory (vwindow.c) calls it for itself. A picture is made once, at its first stat or
 * open, like the profiles. This file generates nothing itself.
 */
#include <errno.h>
#include <stdlib.h>

#include "vpict_i.h"

/* Listing order: after the views and profiles of the directory (vbuild.c's keys). */
#define KEY_PICTURES 20

static const struct pict {
	const char *name;
	unsigned where;				/* enum fs_pict_where */
	bool (*wanted)(struct fs_vtree *vt, uint32_t rank); /* NULL: always */
	fs_pict_fn gen;
} picts[] = {
    {"timeline.svg", FS_PICT_ROOT | FS_PICT_RANK | FS_PICT_WINDOW, NULL, fs_timeline_new},
    {"profile.speedscope.json", FS_PICT_RANK, NULL, fs_speedscope_new},
    {"heap.txt", FS_PICT_RANK, fs_heap_wanted, fs_heap_new},
    {"leaks.folded", FS_PICT_RANK, fs_heap_wanted, fs_leaks_new},
};

static int state_new(struct fs_vtree *vt)
{
	if (vt->pict)
		return 0;
	vt->pict = calloc(1, sizeof(*vt->pict));
	if (!vt->pict)
		return -ENOMEM;
	vt->pict->n_ranks = vt->ti.n_ranks;
	vt->pict->heap = calloc((size_t)vt->ti.n_ranks + 1, sizeof(*vt->pict->heap));
	if (!vt->pict->heap) {
		free(vt->pict);
		vt->pict = NULL;
		return -ENOMEM;
	}
	fs_once_init(&vt->pict->once);
	pthread_mutex_init(&vt->pict->heap_lock, NULL);
	return 0;
}

void fs_pict_state_free(struct fs_pict_state *ps)
{
	if (!ps)
		return;
	fs_once_fini(&ps->once);
	pthread_mutex_destroy(&ps->heap_lock);
	for (uint32_t r = 0; ps->heap && r < ps->n_ranks; r++)
		fs_heap_free(ps->heap[r]);
	free(ps->heap);
	free(ps->terms);
	free(ps);
}

int fs_pictures_add(struct fs_vtree *vt, uint32_t dir, struct fs_scope *sc, unsigned where,
		    uint32_t rank)
{
	int rc = state_new(vt);

	for (size_t i = 0; i < sizeof(picts) / sizeof(picts[0]) && rc == 0; i++) {
		const struct pict *p = &picts[i];

		if (!(p->where & where) || (p->wanted && !p->wanted(vt, rank)))
			continue;
		rc = fs_tree_add_fn(vt, dir, p->name, KEY_PICTURES + i, sc, rank, p->gen);
	}
	if (rc == 0 && (where & (FS_PICT_ROOT | FS_PICT_RANK)))
		rc = fs_windows_add(vt, dir, sc, rank);
	return rc;
}
