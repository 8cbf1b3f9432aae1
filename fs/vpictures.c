/*
 * The pictures' shared state: what the timeline, speedscope and heap views of one tree
 * compute once and share (the heap walks per rank). Which directories hold which picture
 * is declared with every other file in vlayout.c. This file generates nothing itself.
 */
#include <errno.h>
#include <stdlib.h>

#include "vpict_i.h"

int fs_pict_state_new(struct fs_vtree *vt)
{
	if (vt->pict)
		return 0;
	vt->pict = calloc(1, sizeof(*vt->pict));
	if (!vt->pict)
		return -ENOMEM;
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
	for (uint32_t r = 0; ps->heap && r < ps->n_heap; r++)
		fs_heap_free(ps->heap[r]);
	free(ps->heap);
	free(ps->terms);
	free(ps);
}
