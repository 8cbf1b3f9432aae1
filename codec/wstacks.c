/*
 * Writer side of backtraces and symbols (FORMAT.md §10, §11): per rank, backtraces are
 * kept prefix-coded in memory and symbols as records of interned strings; at save each rank
 * becomes a `backtraces` section (§10-coded by btrace.c) and a `symbols` section (§11, by
 * symtab.c). It does not know about events: an event names a backtrace by a `stack` SYM
 * argument, which the writer stores like any other signature value.
 */
#include <stdlib.h>
#include <string.h>

#include "btrace_i.h"
#include "writer_i.h"

static void wrank_free(struct wrank *r)
{
	if (!r)
		return;
	buf_fini(&r->bts);
	free(r->prev);
	symenc_fini(&r->syms);
	free(r);
}

void wranks_free(struct tfs_writer *w)
{
	for (uint32_t i = 0; i < w->n_ranks; i++)
		wrank_free(w->ranks[i]);
	free(w->ranks);
	w->ranks = NULL;
	w->n_ranks = w->ranks_cap = 0;
}

/* Index of the first rank >= @rank in w->ranks. */
static uint32_t rank_pos(const struct tfs_writer *w, uint32_t rank)
{
	uint32_t lo = 0, hi = w->n_ranks;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (w->ranks[mid]->rank < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int get_rank(struct tfs_writer *w, uint32_t rank, struct wrank **out)
{
	uint32_t pos = rank_pos(w, rank);
	struct wrank *r;

	if (pos < w->n_ranks && w->ranks[pos]->rank == rank) {
		*out = w->ranks[pos];
		return 0;
	}
	if (w->n_ranks == w->ranks_cap) {
		uint32_t cap = w->ranks_cap ? w->ranks_cap * 2 : 8;
		struct wrank **p = realloc(w->ranks, (size_t)cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		w->ranks = p;
		w->ranks_cap = cap;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->rank = rank;
	buf_init(&r->bts);
	symenc_init(&r->syms);
	memmove(w->ranks + pos + 1, w->ranks + pos, (size_t)(w->n_ranks - pos) * sizeof(*w->ranks));
	w->ranks[pos] = r;
	w->n_ranks++;
	*out = r;
	return 0;
}

static int reserve_prev(struct wrank *r, uint32_t n)
{
	uint64_t *p;

	if (n <= r->prev_cap)
		return 0;
	p = realloc(r->prev, (size_t)BT_MAX_FRAMES * sizeof(*p));
	if (!p)
		return -ENOMEM;
	r->prev = p;
	r->prev_cap = BT_MAX_FRAMES;
	return 0;
}

int tfs_writer_add_backtrace(struct tfs_writer *w, uint32_t rank, uint64_t id,
			     const uint64_t *frames, uint32_t n_frames)
{
	uint32_t keep = 0, n_new;
	struct wrank *r;
	int rc;

	if (w->saved || n_frames > BT_MAX_FRAMES || (n_frames && !frames))
		return -EINVAL;
	rc = get_rank(w, rank, &r);
	if (rc < 0)
		return rc;
	if (id != r->n_bt)
		return -EINVAL;
	while (keep < n_frames && keep < r->prev_n && frames[keep] == r->prev[keep])
		keep++;
	n_new = n_frames - keep;
	rc = reserve_prev(r, n_frames);
	if (rc == 0)
		rc = buf_reserve(&r->bts, 20 + (size_t)n_new * sizeof(uint64_t));
	if (rc < 0)
		return rc;
	/* reserved: nothing below fails */
	buf_put_varint(&r->bts, keep);
	buf_put_varint(&r->bts, n_new);
	for (uint32_t i = keep; i < n_frames; i++) {
		le_put64(r->bts.data + r->bts.len, frames[i]);
		r->bts.len += sizeof(uint64_t);
		r->prev[i] = frames[i];
	}
	r->prev_n = n_frames;
	r->n_bt++;
	return 0;
}

int tfs_writer_add_symbol(struct tfs_writer *w, uint32_t rank, uint64_t addr,
			  const struct tfs_src_frame *frames, uint32_t n)
{
	struct wrank *r;
	int rc;

	if (w->saved || n == 0 || n > SYM_MAX_FRAMES || !frames)
		return -EINVAL;
	rc = get_rank(w, rank, &r);
	if (rc < 0)
		return rc;
	return symenc_add(&r->syms, addr, frames, n);
}

int wrank_backtraces(const struct wrank *r, struct tfs_buf *out)
{
	uint64_t *frames = malloc(BT_MAX_FRAMES * sizeof(*frames));
	struct tfs_btenc *enc = NULL;
	struct tfs_rd rd;
	int rc = frames ? btenc_new(&enc) : -ENOMEM;

	rd_init(&rd, r->bts.data, r->bts.len, 0, "backtraces", NULL);
	for (uint64_t i = 0; i < r->n_bt && rc == 0; i++) {
		uint64_t keep, n_new;

		/* written by tfs_writer_add_backtrace: cannot fail */
		rd_varint(&rd, &keep);
		rd_varint(&rd, &n_new);
		for (uint64_t j = 0; j < n_new; j++)
			frames[keep + j] = le_get64(rd.data + rd.off + j * sizeof(uint64_t));
		rd.off += (size_t)n_new * sizeof(uint64_t);
		rc = btenc_add(enc, frames, (uint32_t)(keep + n_new));
	}
	if (rc == 0)
		rc = btenc_finish(enc, out);
	btenc_free(enc);
	free(frames);
	return rc;
}

int wrank_symbols(struct wrank *r, struct tfs_buf *out)
{
	return symenc_finish(&r->syms, out);
}
