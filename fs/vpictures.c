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
};

static int state_new(struct fs_vtree *vt)
{
	if (vt->pict)
		return 0;
	vt->pict = calloc(1, sizeof(*vt->pict));
	if (!vt->pict)
		return -ENOMEM;
	fs_once_init(&vt->pict->once);
	fs_once_init(&vt->pict->heap_once);
	return 0;
}

void fs_pict_state_free(struct fs_pict_state *ps)
{
	if (!ps)
		return;
	fs_once_fini(&ps->once);
	fs_once_fini(&ps->heap_once);
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
	return rc;
}
