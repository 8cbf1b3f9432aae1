/*
 * Merged views: the trace.txt or events.jsonl lines of several threads (a rank, or a phase
 * directory) interleaved by a merge key, ties broken by thread and then event index. Every
 * line's length is fixed by its terminal (FORMAT.md §9), so the merged file's size is the
 * sum of the threads' views, known without decoding.
 *
 * Streams need not be sorted (FORMAT.md §3.1): synthetic writers append in start order, the
 * capture in end order (an event is recorded when it ends, so a zone follows the zones and
 * calls nested in it) and says so in the `event_order` metadata. A trace is merged
 * by end time (start + duration) when that key is "end", else by start time. The key of an
 * event is the largest such time of the events of its range up to and including it, so
 * every range is non-decreasing in its key whatever its order and so is the merged file:
 * the key is exactly the event's time in a range in that order, and the time its thread
 * had reached otherwise (lossy timing, or an event listed after one that ended later).
 *
 * Reading at an arbitrary offset needs to know which events precede it. The first read of a
 * scope builds its merge index in one pass that decodes every time: every max(4096, 128 x
 * threads) merged events, a checkpoint keeps each thread's next event index and key so far
 * and the merged byte offset in both views. The index costs (16 x threads + 16) bytes per checkpoint:
 * under 0.14 bytes per event up to 32 threads and at most 1/8 byte per event beyond, and
 * never more than CP_MAX_BYTES (32 MiB) per scope: a longer scope gets sparser checkpoints,
 * so a read then merges forward further. Plus one u32 per terminal and view for line
 * lengths (shared by the tree). A read binary-searches the checkpoints, decodes each
 * thread's next time, then merges forward, decoding only times until its offset and
 * rendering only the lines it returns. A handle remembers its merge position, so
 * sequential reads cost O(1) per event.
 *
 * A merged view of one kind (calls/<name>/ of such a scope, vcalls.c) is the merged view's
 * lines of that kind: the same merge over every event, since an event's key depends on the
 * times of the events before it in its thread whatever their kind, counting and rendering
 * only that kind's lines. It shares the scope's index; a checkpoint's offset in the kind's
 * view is the sum of the kind's bytes before each segment's next event there, which the
 * codec's kind layout gives in O(height) per segment without decoding, so the index stays
 * one per scope however many kinds are read.
 *
 * Traces without timing are not merged (every time is 0): vbuild.c serves those as the
 * threads' views one after the other.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vnode_i.h"

#define CP_MIN_EVENTS 4096
#define CP_EVENTS_PER_THREAD 128
/* The most one scope's index may take: past it checkpoints are spaced further apart. */
#define CP_MAX_BYTES ((uint64_t)32 << 20)
/* mstate.kind of a merge that shows every event */
#define ALL_KINDS UINT32_MAX

struct fs_merge_index {
	uint64_t interval; /* merged events between checkpoints */
	uint64_t n_cp;
	bool by_end;	   /* merged by end time (event_order "end") */
	uint64_t *next;	   /* [n_cp][n_segs]: each segment's next event, relative to its first */
	uint64_t *run;	   /* [n_cp][n_segs]: each segment's key so far (0 before its first) */
	uint64_t *off;	   /* [n_cp][2]: merged byte offset in the TEXT and JSONL views */
};

/* A position in the merge: each segment's next event (its head) in a heap. */
struct mstate {
	struct fs_vtree *vt;
	const struct fs_scope *sc;
	struct tfs_cursor **cur; /* [n_segs] over each segment's range, in the file's view */
	uint64_t *next;		 /* [n_segs] the head, relative to the segment's first */
	uint64_t *toff;		 /* [n_segs] where the head's line starts in the segment's view */
	uint64_t *run;		 /* [n_segs] the largest time of the segment's merged events */
	uint64_t *key;		 /* [n_segs] the head's key: max(run, the head's time) */
	uint32_t *term;		 /* [n_segs] the head's terminal */
	uint32_t *heap;		 /* segments with a head, smallest (key, segment) first */
	uint32_t n_heap;
	uint64_t count;		 /* merged events before the top head */
	uint64_t off[2];	 /* merged offset of the top head's line, TEXT and JSONL */
	bool by_end;		 /* the time is the end time, else the start time */
	bool valid;
	uint32_t kind;		 /* the only kind whose lines @off counts, or ALL_KINDS */
};

struct fs_merge_reader {
	struct mstate ms;
	struct fs_scope *sc;
	int view;
	uint64_t size;
	const struct fs_merge_index *mi; /* once built */
};

/* Whether the lines of terminal @term are in the merge's view. */
static bool shown(const struct mstate *ms, uint32_t term)
{
	uint32_t kind;

	return ms->kind == ALL_KINDS ||
	       (tfs_trace_term_kind(ms->vt->trace, term, &kind) == 0 && kind == ms->kind);
}

bool fs_merge_by_end(const struct fs_vtree *vt)
{
	const char *order = tfs_trace_meta(vt->trace, "event_order");

	return order && !strcmp(order, "end");
}

/* Bytes of @view (of one @kind, or ALL_KINDS) over the first @n[i] events of each segment. */
static int prefix_size(const struct fs_vtree *vt, const struct fs_scope *sc, uint32_t kind,
		       int view, const uint64_t *n, uint64_t *size)
{
	*size = 0;
	for (uint32_t i = 0; i < sc->n_segs; i++) {
		const struct fs_seg *s = &sc->segs[i];
		uint64_t bytes, count = n ? n[i] : s->n_events;
		int rc = kind == ALL_KINDS
				 ? tfs_trace_view_size(vt->trace, s->stream, view, s->first, count,
						       &bytes)
				 : tfs_trace_kind_view_size(vt->trace, s->stream, kind, view,
							    s->first, count, NULL, &bytes);

		if (rc < 0)
			return rc;
		*size += bytes;
	}
	return 0;
}

int fs_merge_size(const struct fs_vtree *vt, const struct fs_scope *sc, int view,
		  uint64_t *size)
{
	return prefix_size(vt, sc, ALL_KINDS, view, NULL, size);
}

void fs_merge_index_free(struct fs_merge_index *mi)
{
	if (!mi)
		return;
	free(mi->next);
	free(mi->run);
	free(mi->off);
	free(mi);
}

/* Length of every line of terminal @term in @view, learnt from one event of it. */
static int line_len(struct mstate *ms, int view, uint32_t seg, uint32_t term, uint64_t *len)
{
	_Atomic uint32_t *known = &ms->vt->term_len[view][term];
	const struct fs_seg *s = &ms->sc->segs[seg];
	uint64_t n;
	int rc;

	n = atomic_load_explicit(known, memory_order_relaxed);
	if (n == 0) {
		rc = tfs_trace_view_size(ms->vt->trace, s->stream, view, s->first + ms->next[seg],
					 1, &n);
		if (rc < 0)
			return rc;
		if (n == 0 || n > UINT32_MAX)
			return -TFS_ECORRUPT;
		atomic_store_explicit(known, (uint32_t)n, memory_order_relaxed);
	}
	*len = n;
	return 0;
}

static bool before(const struct mstate *ms, uint32_t a, uint32_t b)
{
	return ms->key[a] != ms->key[b] ? ms->key[a] < ms->key[b] : a < b;
}

static void heap_push(struct mstate *ms, uint32_t seg)
{
	uint32_t i = ms->n_heap++;

	while (i > 0 && before(ms, seg, ms->heap[(i - 1) / 2])) {
		ms->heap[i] = ms->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	ms->heap[i] = seg;
}

static void heap_pop(struct mstate *ms)
{
	uint32_t last = ms->heap[--ms->n_heap], i = 0;

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= ms->n_heap)
			break;
		if (c + 1 < ms->n_heap && before(ms, ms->heap[c + 1], ms->heap[c]))
			c++;
		if (!before(ms, ms->heap[c], last))
			break;
		ms->heap[i] = ms->heap[c];
		i = c;
	}
	if (ms->n_heap > 0)
		ms->heap[i] = last;
}

/* Decode the start time of segment @seg's head and put it in the heap (if it has one). */
static int load_head(struct mstate *ms, uint32_t seg, struct tfs_diag *diag)
{
	const struct fs_seg *s = &ms->sc->segs[seg];
	struct tfs_event ev;
	uint64_t t;
	int rc;

	if (ms->next[seg] >= s->n_events)
		return 0;
	rc = tfs_cursor_event(ms->cur[seg], s->first + ms->next[seg], &ev, diag);
	if (rc < 0)
		return rc;
	t = ev.ts_ns;
	if (ms->by_end)
		t = ev.ts_ns + ev.dur_ns < ev.ts_ns ? UINT64_MAX : ev.ts_ns + ev.dur_ns;
	ms->key[seg] = t > ms->run[seg] ? t : ms->run[seg];
	ms->term[seg] = ev.terminal;
	heap_push(ms, seg);
	return 0;
}

static void ms_fini(struct mstate *ms)
{
	for (uint32_t i = 0; ms->cur && i < ms->sc->n_segs; i++)
		tfs_cursor_free(ms->cur[i]);
	free(ms->cur);
	free(ms->next);
	free(ms->toff);
	free(ms->run);
	free(ms->key);
	free(ms->term);
	free(ms->heap);
}

static int ms_init(struct mstate *ms, struct fs_vtree *vt, const struct fs_scope *sc, int view)
{
	size_t n = sc->n_segs ? sc->n_segs : 1;

	memset(ms, 0, sizeof(*ms));
	ms->vt = vt;
	ms->sc = sc;
	ms->kind = ALL_KINDS;
	ms->cur = calloc(n, sizeof(*ms->cur));
	ms->next = calloc(n, sizeof(*ms->next));
	ms->toff = calloc(n, sizeof(*ms->toff));
	ms->run = calloc(n, sizeof(*ms->run));
	ms->key = calloc(n, sizeof(*ms->key));
	ms->term = calloc(n, sizeof(*ms->term));
	ms->heap = calloc(n, sizeof(*ms->heap));
	if (!ms->cur || !ms->next || !ms->toff || !ms->run || !ms->key || !ms->term || !ms->heap)
		goto err_fini;
	for (uint32_t i = 0; i < sc->n_segs; i++) {
		const struct fs_seg *s = &sc->segs[i];
		int rc = tfs_cursor_new(vt->trace, s->stream, view, s->first, s->n_events,
					&ms->cur[i]);

		if (rc < 0) {
			ms_fini(ms);
			return rc;
		}
	}
	return 0;

err_fini:
	ms_fini(ms);
	return -ENOMEM;
}

/* Go to checkpoint @k of @mi (NULL: the start). */
static int ms_seek(struct mstate *ms, const struct fs_merge_index *mi, uint64_t k,
		   struct tfs_diag *diag)
{
	uint32_t n_segs = ms->sc->n_segs;
	int rc;

	ms->valid = false;
	ms->n_heap = 0;
	ms->by_end = mi ? mi->by_end : fs_merge_by_end(ms->vt);
	ms->count = mi ? k * mi->interval : 0;
	for (int v = 0; v < 2; v++) {
		ms->off[v] = 0;
		if (mi && ms->kind == ALL_KINDS)
			ms->off[v] = mi->off[2 * k + (uint64_t)v];
		else if (mi) {
			rc = prefix_size(ms->vt, ms->sc, ms->kind, v, &mi->next[k * n_segs],
					 &ms->off[v]);
			if (rc < 0)
				return rc;
		}
	}
	for (uint32_t i = 0; i < n_segs; i++) {
		ms->next[i] = mi ? mi->next[k * n_segs + i] : 0;
		ms->run[i] = mi ? mi->run[k * n_segs + i] : 0;
		ms->toff[i] = 0;
		if (ms->next[i] > 0 && ms->next[i] < ms->sc->segs[i].n_events) {
			rc = tfs_cursor_event_offset(ms->cur[i], ms->next[i], &ms->toff[i]);
			if (rc < 0)
				return rc;
		}
		rc = load_head(ms, i, diag);
		if (rc < 0)
			return rc;
	}
	ms->valid = true;
	return 0;
}

/* Step past the top head. @view: the view the segments' offsets are kept in. */
static int ms_advance(struct mstate *ms, int view, struct tfs_diag *diag)
{
	uint32_t seg = ms->heap[0];
	uint64_t len[2];
	int rc;

	for (int v = 0; v < 2; v++) {
		rc = line_len(ms, v, seg, ms->term[seg], &len[v]);
		if (rc < 0)
			goto err_invalid;
		if (shown(ms, ms->term[seg]))
			ms->off[v] += len[v];
	}
	heap_pop(ms);
	ms->run[seg] = ms->key[seg];
	ms->toff[seg] += len[view];
	ms->next[seg]++;
	ms->count++;
	rc = load_head(ms, seg, diag);
	if (rc < 0)
		goto err_invalid;
	return 0;

err_invalid:
	ms->valid = false;
	return rc;
}

/* Step past heads whose lines the view does not show. */
static int skip_hidden(struct mstate *ms, int view, struct tfs_diag *diag)
{
	int rc = 0;

	while (rc == 0 && ms->n_heap > 0 && !shown(ms, ms->term[ms->heap[0]]))
		rc = ms_advance(ms, view, diag);
	return rc;
}

/* Merged events between checkpoints: dense enough to seek fast, within CP_MAX_BYTES. */
static uint64_t cp_interval(const struct fs_scope *sc)
{
	uint64_t per_cp = 16 * (uint64_t)sc->n_segs + 16;
	uint64_t max_cp = CP_MAX_BYTES / per_cp > 2 ? CP_MAX_BYTES / per_cp : 2;
	uint64_t interval = (uint64_t)CP_EVENTS_PER_THREAD * sc->n_segs;

	if (interval < CP_MIN_EVENTS)
		interval = CP_MIN_EVENTS;
	if (sc->n_events / interval + 1 > max_cp)
		interval = sc->n_events / (max_cp - 1) + 1;
	return interval;
}

/* ---- the index ---- */

struct build_arg {
	struct fs_vtree *vt;
	struct fs_scope *sc;
	struct tfs_diag *diag;
};

static int build_index(void *arg)
{
	struct build_arg *a = arg;
	const struct fs_scope *sc = a->sc;
	size_t n_segs = sc->n_segs ? sc->n_segs : 1;
	struct fs_merge_index *mi;
	struct mstate ms;
	int rc;

	mi = calloc(1, sizeof(*mi));
	if (!mi)
		return -ENOMEM;
	mi->interval = cp_interval(sc);
	mi->n_cp = sc->n_events / mi->interval + 1;
	mi->next = calloc(mi->n_cp * n_segs, sizeof(*mi->next));
	mi->run = calloc(mi->n_cp * n_segs, sizeof(*mi->run));
	mi->off = calloc(mi->n_cp * 2, sizeof(*mi->off));
	rc = mi->next && mi->run && mi->off ? ms_init(&ms, a->vt, sc, TFS_VIEW_TEXT) : -ENOMEM;
	if (rc < 0)
		goto err_free_index;
	mi->by_end = fs_merge_by_end(a->vt);
	rc = ms_seek(&ms, NULL, 0, a->diag);
	for (uint64_t k = 0; k < mi->n_cp && rc == 0; k++) {
		memcpy(&mi->next[k * sc->n_segs], ms.next, sc->n_segs * sizeof(*ms.next));
		memcpy(&mi->run[k * sc->n_segs], ms.run, sc->n_segs * sizeof(*ms.run));
		mi->off[2 * k] = ms.off[0];
		mi->off[2 * k + 1] = ms.off[1];
		for (uint64_t i = 0; i < mi->interval && ms.n_heap > 0 && rc == 0; i++)
			rc = ms_advance(&ms, TFS_VIEW_TEXT, a->diag);
	}
	ms_fini(&ms);
	if (rc < 0)
		goto err_free_index;
	a->sc->merge = mi;
	return 0;

err_free_index:
	fs_merge_index_free(mi);
	return rc;
}

/* ---- readers ---- */

int fs_merge_reader_new(struct fs_vtree *vt, struct fs_scope *sc, uint32_t call, int view,
			struct fs_merge_reader **out)
{
	const uint32_t kind = call ? call - 1 : ALL_KINDS;
	struct fs_merge_reader *r;
	int rc;

	*out = NULL;
	assert(view == TFS_VIEW_TEXT || view == TFS_VIEW_JSONL);
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->sc = sc;
	r->view = view;
	rc = prefix_size(vt, sc, kind, view, NULL, &r->size);
	if (rc == 0)
		rc = ms_init(&r->ms, vt, sc, view);
	if (rc < 0) {
		free(r);
		return rc;
	}
	r->ms.kind = kind;
	*out = r;
	return 0;
}

void fs_merge_reader_free(struct fs_merge_reader *r)
{
	if (!r)
		return;
	ms_fini(&r->ms);
	free(r);
}

/* The last checkpoint of @r's index at or before byte @off of its view, in *@k. */
static int checkpoint_at(const struct fs_merge_reader *r, uint64_t off, uint64_t *k)
{
	const struct fs_merge_index *mi = r->mi;
	const uint32_t n_segs = r->sc->n_segs;
	uint64_t lo = 0, hi = mi->n_cp, at;

	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		int rc = 0;

		if (r->ms.kind == ALL_KINDS)
			at = mi->off[2 * mid + (uint64_t)r->view];
		else
			rc = prefix_size(r->ms.vt, r->sc, r->ms.kind, r->view,
					 &mi->next[mid * n_segs], &at);
		if (rc < 0)
			return rc;
		if (at <= off)
			lo = mid;
		else
			hi = mid;
	}
	*k = lo;
	return 0;
}

/* Put the merge at the line holding @off: from where it is if that is on the way. */
static int position(struct fs_merge_reader *r, uint64_t off, struct tfs_diag *diag)
{
	struct mstate *ms = &r->ms;
	uint64_t k, len;
	int rc = checkpoint_at(r, off, &k);

	if (rc < 0)
		return rc;
	if (!ms->valid || off < ms->off[r->view] || k > ms->count / r->mi->interval) {
		rc = ms_seek(ms, r->mi, k, diag);
		if (rc < 0)
			return rc;
	}
	while (ms->n_heap > 0) {
		if (!shown(ms, ms->term[ms->heap[0]])) {
			rc = ms_advance(ms, r->view, diag);
			if (rc < 0)
				return rc;
			continue;
		}
		rc = line_len(ms, r->view, ms->heap[0], ms->term[ms->heap[0]], &len);
		if (rc < 0)
			return rc;
		if (ms->off[r->view] + len > off)
			break;
		rc = ms_advance(ms, r->view, diag);
		if (rc < 0)
			return rc;
	}
	return ms->n_heap > 0 ? 0 : -TFS_ECORRUPT;
}

ssize_t fs_merge_read(struct fs_merge_reader *r, void *buf, size_t len, uint64_t off,
		      struct tfs_diag *diag)
{
	struct mstate *ms = &r->ms;
	struct build_arg a = {.vt = ms->vt, .sc = r->sc, .diag = diag};
	size_t done = 0;
	int rc;

	if (off >= r->size || len == 0)
		return 0;
	if (len > r->size - off)
		len = (size_t)(r->size - off);
	if (!r->mi) {
		rc = fs_once_run(&r->sc->merge_once, build_index, &a);
		if (rc < 0)
			return rc;
		r->mi = r->sc->merge;
	}
	rc = position(r, off, diag);
	while (rc == 0 && done < len) {
		uint32_t seg;

		if (ms->n_heap == 0) {
			rc = -TFS_ECORRUPT; /* fewer lines than the grammar's counts promised */
			break;
		}
		seg = ms->heap[0];
		uint64_t line, intra = off + done - ms->off[r->view];
		size_t n;
		ssize_t got;

		rc = line_len(ms, r->view, seg, ms->term[seg], &line);
		if (rc < 0)
			break;
		n = line - intra < len - done ? (size_t)(line - intra) : len - done;
		got = tfs_cursor_pread(ms->cur[seg], (char *)buf + done, n, ms->toff[seg] + intra,
				       diag);
		if (got != (ssize_t)n) {
			rc = got < 0 ? (int)got : -TFS_ECORRUPT;
			break;
		}
		done += n;
		if (intra + n == line && ms->n_heap > 0 && off + done < r->size) {
			rc = ms_advance(ms, r->view, diag);
			if (rc == 0)
				rc = skip_hidden(ms, r->view, diag);
		}
	}
	if (rc < 0) {
		ms->valid = false;
		return rc;
	}
	return (ssize_t)done;
}

/* ---- a merged view as a kind of file (struct fs_file_ops) ---- */

static int merge_open(struct fs_vtree *vt, const struct vnode *n, void **state)
{
	struct fs_merge_reader *r = NULL;
	int rc = fs_merge_reader_new(vt, n->scope, n->call, n->view, &r);

	*state = r;
	return rc;
}

static ssize_t merge_read(const struct vnode *n, void *state, void *buf, size_t len,
			  uint64_t off, struct tfs_diag *diag)
{
	return fs_merge_read(state, buf, len, off, diag);
}

static void merge_close(void *state)
{
	fs_merge_reader_free(state);
}

static int merge_views(const struct vnode *n, int *view, uint32_t *call,
		       struct fs_view_seg **segs, uint32_t *n_segs)
{
	const struct fs_scope *sc = n->scope;

	*segs = calloc((size_t)sc->n_segs + 1, sizeof(**segs));
	if (!*segs)
		return -ENOMEM;
	for (uint32_t i = 0; i < sc->n_segs; i++)
		(*segs)[i] = (struct fs_view_seg){sc->segs[i].stream, sc->segs[i].first,
						  sc->segs[i].n_events};
	*n_segs = sc->n_segs;
	*view = n->view;
	*call = n->call;
	return 0;
}

const struct fs_file_ops fs_merge_ops = {
	.size = fs_file_fixed_size,
	.open = merge_open,
	.read = merge_read,
	.close = merge_close,
	.views = merge_views,
};
