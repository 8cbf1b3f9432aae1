/*
 * What a proxy needs of each occurrence of a call, found in one pass over a stream's
 * events along its grammar: the computation before it (the gap from the previous event's
 * end, kept as its position's mean), the VAL arguments its code reads, the zones begun
 * right after it, and whether an allocation happened inside a libc call (which makes it
 * itself when replayed). Each (grammar position, value) pair gets a sequence over its
 * occurrences, coded as the first of these that holds: a constant, a line (a + b i), a
 * line per period (a + b (i mod m) + c (i / m): a loop inside a loop), or runs of equal
 * values; past RUN_CAP runs the first RUN_CAP are cycled (the value is approximated, and
 * counted). It writes initialisers only; vreplay.c places them.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vreplay_i.h"

#define RUN_CAP 256
#define MAX_PENDING 256

/* ---- a set of allocation ids (open addressing, linear probing; 0 is no id) ---- */

struct idset {
	uint64_t *v; /* [cap] */
	uint32_t n, cap; /* cap a power of two, 0 before the first add */
};

static uint32_t idset_slot(const struct idset *s, uint64_t id)
{
	uint32_t h = (uint32_t)(id * UINT64_C(0x9e3779b97f4a7c15) >> 32) & (s->cap - 1);

	while (s->v[h] && s->v[h] != id)
		h = (h + 1) & (s->cap - 1);
	return h;
}

/* @return 0 or -ENOMEM */
static int idset_add(struct idset *s, uint64_t id)
{
	uint32_t h;

	if (2 * (s->n + 1) > s->cap) {
		struct idset g = {.cap = s->cap ? 2 * s->cap : 64};

		g.v = calloc(g.cap, sizeof(*g.v));
		if (!g.v)
			return -ENOMEM;
		for (uint32_t i = 0; i < s->cap; i++)
			if (s->v[i])
				g.v[idset_slot(&g, s->v[i])] = s->v[i];
		g.n = s->n;
		free(s->v);
		*s = g;
	}
	h = idset_slot(s, id);
	s->n += !s->v[h];
	s->v[h] = id;
	return 0;
}

/* Remove @id (the entries after it in its run move back). @return whether it was there */
static bool idset_del(struct idset *s, uint64_t id)
{
	uint32_t h, j;

	if (!s->cap || !s->v[h = idset_slot(s, id)])
		return false;
	s->v[h] = 0;
	s->n--;
	for (j = (h + 1) & (s->cap - 1); s->v[j]; j = (j + 1) & (s->cap - 1)) {
		const uint64_t k = s->v[j];

		s->v[j] = 0;
		s->v[idset_slot(s, k)] = k;
	}
	return true;
}

/* ---- one value sequence ---- */

struct venc {
	uint64_t n, m;
	int64_t a, b, c;
	__int128 sum;
	int64_t *runs; /* (value, count) pairs */
	uint32_t n_runs, cap;
	uint8_t lin, plin, cut, mean;
};

static int venc_add(struct venc *e, int64_t v)
{
	uint64_t i = e->n++;

	if (e->mean) {
		e->sum += v;
		return 0;
	}
	if (i == 0) {
		e->a = v;
		e->lin = e->plin = 1;
	} else if (i == 1) {
		e->b = (int64_t)((uint64_t)v - (uint64_t)e->a);
	} else if (e->lin) {
		if ((uint64_t)v != (uint64_t)e->a + (uint64_t)e->b * i) {
			e->lin = 0;
			e->m = i;
			e->c = (int64_t)((uint64_t)v - (uint64_t)e->a);
		}
	} else if (e->plin) {
		e->plin = (uint64_t)v == (uint64_t)e->a + (uint64_t)e->b * (i % e->m) +
					     (uint64_t)e->c * (i / e->m);
	}
	if (e->n_runs && e->runs[2 * (e->n_runs - 1)] == v) {
		e->runs[2 * e->n_runs - 1]++;
		return 0;
	}
	if (e->n_runs == RUN_CAP) {
		e->cut = 1;
		return 0;
	}
	if (e->n_runs == e->cap) {
		uint32_t cap = e->cap ? 2 * e->cap : 4;
		int64_t *r = realloc(e->runs, 2 * cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		e->runs = r;
		e->cap = cap;
	}
	e->runs[2 * e->n_runs] = v;
	e->runs[2 * e->n_runs + 1] = 1;
	e->n_runs++;
	return 0;
}

static void put_i64(struct fs_sbuf *b, int64_t v)
{
	if (v == INT64_MIN)
		fs_sb_printf(b, "INT64_MIN");
	else
		fs_sb_printf(b, "%" PRId64 "%s", v, v > INT32_MAX || v < INT32_MIN ? "LL" : "");
}

/* The initialiser of slot @slot of stream @stream; a table goes into @tabs. */
static void venc_emit(struct rp_gen *g, const struct venc *e, uint32_t stream, uint32_t slot,
		      struct fs_sbuf *seq, struct fs_sbuf *tabs)
{
	if (e->mean || e->n == 0 || (e->lin && e->b == 0) || e->n == 1) {
		int64_t v = e->mean ? (e->n ? (int64_t)(e->sum / (__int128)e->n) : 0) : e->a;

		fs_sb_printf(seq, "{");
		put_i64(seq, v);
		fs_sb_printf(seq, "}");
	} else if (e->lin) {
		fs_sb_printf(seq, "{");
		put_i64(seq, e->a);
		fs_sb_printf(seq, ", ");
		put_i64(seq, e->b);
		fs_sb_printf(seq, ", 0, 0, 0, 0, RT_LIN}");
	} else if (e->plin) {
		fs_sb_printf(seq, "{");
		put_i64(seq, e->a);
		fs_sb_printf(seq, ", ");
		put_i64(seq, e->b);
		fs_sb_printf(seq, ", ");
		put_i64(seq, e->c);
		fs_sb_printf(seq, ", %" PRIu64 "u, 0, 0, RT_PLIN}", e->m);
	} else {
		fs_sb_printf(tabs, "static const int64_t q%u_%u[] = {", stream, slot);
		for (uint32_t i = 0; i < e->n_runs; i++) {
			fs_sb_printf(tabs, "%s", i ? (i % 8 ? ", " : ",\n\t") : "");
			put_i64(tabs, e->runs[2 * i]);
			fs_sb_printf(tabs, ", ");
			put_i64(tabs, e->runs[2 * i + 1]);
		}
		fs_sb_printf(tabs, "};\n");
		fs_sb_printf(seq, "{0, 0, 0, 0, q%u_%u, %u, RT_TAB}", stream, slot, e->n_runs);
		g->n_val_cut += e->cut;
	}
}

/* ---- zone lists ---- */

static int intern_name(struct rp_zlists *z, const char *s, uint32_t *out)
{
	for (uint32_t i = 0; i < z->n_names; i++) {
		if (!strcmp(z->names[i], s)) {
			*out = i;
			return 0;
		}
	}
	if (z->n_names == z->names_cap) {
		uint32_t cap = z->names_cap ? 2 * z->names_cap : 16;
		char **n = realloc(z->names, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		z->names = n;
		z->names_cap = cap;
	}
	z->names[z->n_names] = strdup(s);
	if (!z->names[z->n_names])
		return -ENOMEM;
	*out = z->n_names++;
	return 0;
}

/* The id of the list @items[0..n) (name indices), made when new. List 0 is empty. */
static int intern_list(struct rp_zlists *z, const uint32_t *items, uint32_t n, uint32_t *out)
{
	if (!z->first) {
		z->first = calloc(16, sizeof(*z->first));
		if (!z->first)
			return -ENOMEM;
		z->cap = 15;
		z->n = 1; /* the empty list */
	}
	for (uint32_t i = 0; i < z->n; i++) {
		if (z->first[i + 1] - z->first[i] == n &&
		    (n == 0 || !memcmp(z->items + z->first[i], items, n * sizeof(*items)))) {
			*out = i;
			return 0;
		}
	}
	if (z->n == z->cap) {
		uint32_t *f = realloc(z->first, (2 * z->cap + 1) * sizeof(*f));

		if (!f)
			return -ENOMEM;
		z->first = f;
		z->cap *= 2;
	}
	while (z->n_items + n > z->items_cap) {
		uint32_t cap = z->items_cap ? 2 * z->items_cap : 64;
		uint32_t *it = realloc(z->items, cap * sizeof(*it));

		if (!it)
			return -ENOMEM;
		z->items = it;
		z->items_cap = cap;
	}
	if (n)
		memcpy(z->items + z->n_items, items, n * sizeof(*items));
	z->n_items += n;
	z->first[z->n + 1] = z->n_items;
	*out = z->n++;
	return 0;
}

void rp_zlists_fini(struct rp_zlists *z)
{
	for (uint32_t i = 0; i < z->n_names; i++)
		free(z->names[i]);
	free(z->names);
	free(z->items);
	free(z->first);
	memset(z, 0, sizeof(*z));
}

/*
 * A point zones begin right after: a zone's end (its zone list slot) or the stream's start
 * (slot UINT32_MAX). The zones ending later at depth >= @depth that began after it are
 * attached to it, as (depth, name) pairs.
 */
struct zpoint {
	int64_t depth;
	uint32_t slot;
	uint32_t n;
	uint64_t items[64];
};

/* ---- the walk ---- */

struct walk {
	struct rp_gen *g;
	const struct rp_gram *gr;
	uint32_t stream, rank;
	struct tfs_cursor *cur;
	struct venc *enc; /* [gr->n_slots] */
	bool decode;
	uint64_t index, prev_end;
	struct zpoint *zs; /* the stack of open points, [zcap] */
	uint32_t nz, zcap;
	uint32_t start_list;
	struct {
		uint32_t slot;
		uint64_t ts, end;
		uint64_t id; /* the allocation it makes or frees, 0: none known */
		bool frees;
	} pending[MAX_PENDING];
	uint32_t n_pending;
	struct idset left; /* live allocations the trace has inside a libc call */
	int8_t *term_id;    /* [n_terminals]: an allocation event's id argument, or -1 */
	uint8_t *term_free; /* [n_terminals]: the event frees that allocation (free) */
	int64_t *term_file; /* [n_terminals]: the file a read-like call reads, or -1 */
	int8_t *term_bytes; /* [n_terminals]: its byte count argument, or -1 */
	int8_t *term_off;   /* [n_terminals]: its offset argument (pread, preadv), or -1 */
	int8_t *term_ret;   /* [n_terminals]: the result of a call naming a path, or -1 */
	uint8_t *opened;    /* [n_terminals]: such a call succeeded here */
};

/* @n bytes read from @file, at offset @off (-1: from the descriptor's offset) */
static int file_bytes(struct walk *w, uint64_t file, int64_t n, int64_t off)
{
	struct rp_gen *g = w->g;
	const int64_t end = off >= 0 && n <= INT64_MAX - off ? off + n : 0;

	if (n <= 0)
		return 0;
	for (uint32_t i = 0; i < g->n_fb; i++) {
		if (g->fb[i].rank == w->rank && g->fb[i].file == file) {
			if (off >= 0 && end > g->fb[i].end)
				g->fb[i].end = end;
			else if (off < 0)
				g->fb[i].bytes += n;
			return 0;
		}
	}
	if (g->n_fb == g->fb_cap) {
		uint32_t cap = g->fb_cap ? 2 * g->fb_cap : 16;
		struct rp_fbytes *f = realloc(g->fb, cap * sizeof(*f));

		if (!f)
			return -ENOMEM;
		g->fb = f;
		g->fb_cap = cap;
	}
	g->fb[g->n_fb++] = (struct rp_fbytes){w->rank, file, off < 0 ? n : 0, end};
	return 0;
}

/* The zones attached to @p, outermost first, become its slot's next value. */
static int zpoint_close(struct walk *w, struct zpoint *p)
{
	uint32_t items[64], id;
	int rc;

	for (uint32_t i = 1; i < p->n; i++) /* by depth: a handful of entries */
		for (uint32_t j = i; j > 0 && p->items[j - 1] >> 32 > p->items[j] >> 32; j--) {
			uint64_t x = p->items[j];

			p->items[j] = p->items[j - 1];
			p->items[j - 1] = x;
		}
	for (uint32_t i = 0; i < p->n; i++)
		items[i] = (uint32_t)p->items[i];
	rc = intern_list(&w->g->zl, items, p->n, &id);
	if (rc < 0)
		return rc;
	if (p->slot == UINT32_MAX)
		w->start_list = id;
	else
		rc = venc_add(&w->enc[p->slot], id);
	return rc;
}

/* A zone of @depth named @name ended here; its list slot is @slot. */
static int on_zone(struct walk *w, int64_t depth, const char *name, uint32_t slot)
{
	struct zpoint *p = NULL;
	uint32_t id;
	int rc = intern_name(&w->g->zl, name, &id);

	for (uint32_t i = w->nz; rc == 0 && i-- > 0;) {
		if (w->zs[i].depth <= depth) {
			p = &w->zs[i];
			break;
		}
	}
	if (rc == 0 && p && p->n < 64)
		p->items[p->n++] = (uint64_t)depth << 32 | id;
	while (rc == 0 && w->nz > 1 && w->zs[w->nz - 1].depth >= depth)
		rc = zpoint_close(w, &w->zs[--w->nz]);
	if (rc == 0 && w->nz == w->zcap) {
		struct zpoint *z = realloc(w->zs, 2 * w->zcap * sizeof(*z));

		if (!z)
			return -ENOMEM;
		w->zs = z;
		w->zcap *= 2;
	}
	if (rc == 0)
		w->zs[w->nz++] = (struct zpoint){.depth = depth, .slot = slot};
	return rc;
}

/*
 * Allocations before a call happened inside it when its span holds theirs; so did the free
 * of an allocation that did (the block is that call's in the proxy too: it has none to
 * free where the program's libc freed it, at exit, say).
 */
static int resolve_pending(struct walk *w, const struct tfs_event *call)
{
	int rc = 0;

	for (uint32_t i = 0; i < w->n_pending && rc == 0; i++) {
		const uint64_t id = w->pending[i].id;
		bool in = call && call->ts_ns <= w->pending[i].ts &&
			  w->pending[i].end <= call->ts_ns + call->dur_ns;

		if (id && w->pending[i].frees)
			in |= idset_del(&w->left, id);
		else if (id && in)
			rc = idset_add(&w->left, id);
		if (rc == 0)
			rc = venc_add(&w->enc[w->pending[i].slot], in);
	}
	w->n_pending = 0;
	return rc;
}

static int on_event(struct walk *w, uint32_t term, uint32_t slot)
{
	struct rp_gen *g = w->g;
	const struct rp_term *t = &g->terms[term];
	struct tfs_event ev = {0};
	struct tfs_diag diag = {0};
	uint32_t vb = rp_val_base(g->timed, t), s = g->timed ? 1 : 0;
	int rc = 0;

	if (w->decode) {
		rc = tfs_cursor_event(w->cur, w->index, &ev, &diag);
		if (rc < 0)
			return rc;
	}
	w->index++;
	if (g->timed) {
		bool zone = t->what == RP_W_ZONE || t->what == RP_W_OPEN_ZONE;
		uint64_t end = ev.ts_ns + ev.dur_ns, anchor = zone ? end : ev.ts_ns;

		if (w->index == 1)
			w->prev_end = anchor;
		rc = venc_add(&w->enc[slot],
			      anchor > w->prev_end ? (int64_t)(anchor - w->prev_end) : 0);
		w->prev_end = end;
		if (rc == 0 && t->alloc && w->n_pending < MAX_PENDING) {
			const int id = w->term_id[term];

			w->pending[w->n_pending].slot = slot + s;
			w->pending[w->n_pending].ts = ev.ts_ns;
			w->pending[w->n_pending].id = id >= 0 ? ev.args[id].u : 0;
			w->pending[w->n_pending].frees = w->term_free[term];
			w->pending[w->n_pending++].end = end;
		} else if (rc == 0 && !t->alloc) {
			rc = resolve_pending(w, t->what == RP_W_CALL && t->libc ? &ev : NULL);
		}
	}
	for (uint32_t j = 0; rc == 0 && j < t->n_vals; j++)
		rc = venc_add(&w->enc[slot + vb + j], (int64_t)ev.args[t->val_arg[j]].u);
	if (w->term_ret[term] >= 0 && ev.args[w->term_ret[term]].i >= 0)
		w->opened[term] = 1;
	if (rc == 0 && w->term_file[term] >= 0 && w->term_bytes[term] >= 0)
		rc = file_bytes(w, (uint64_t)w->term_file[term], ev.args[w->term_bytes[term]].i,
				w->term_off[term] >= 0 ? ev.args[w->term_off[term]].i : -1);
	if (rc == 0 && (t->what == RP_W_ZONE || t->what == RP_W_OPEN_ZONE)) {
		union tfs_arg args[TFS_MAX_ARGS];
		struct tfs_kind_desc kd;
		int64_t depth = 0;

		rc = tfs_trace_term_args(g->t, term, args);
		if (rc == 0)
			rc = tfs_trace_kind(g->t, t->kind, &kd);
		for (uint32_t i = 0; rc == 0 && i < kd.n_args; i++)
			if (!strcmp(kd.args[i].name, "depth"))
				depth = (int64_t)args[i].u;
		if (rc == 0)
			rc = on_zone(w, depth, args[0].s ? args[0].s : "", slot + s);
	}
	return rc;
}

/* Every terminal occurrence of block @b in order, with its slot. */
static int walk_block(struct walk *w, const struct rp_block *b)
{
	struct xf {
		uint32_t rule, elem;
		uint64_t rep;
	} *st = calloc((size_t)b->n_rules + 1, sizeof(*st));
	uint32_t depth = 1;
	int rc = 0;

	if (!st)
		return -ENOMEM;
	st[0].rule = b->n_rules - 1;
	while (depth > 0 && rc == 0) {
		struct xf *f = &st[depth - 1];
		const struct rp_rule *r = &b->rules[f->rule];
		const struct tfs_rule_elem *e;

		if (f->elem == r->n_elems) {
			if (--depth == 0)
				break;
			f = &st[depth - 1];
			if (++f->rep == b->rules[f->rule].elems[f->elem].count) {
				f->elem++;
				f->rep = 0;
			}
			continue;
		}
		e = &r->elems[f->elem];
		if (e->is_rule) {
			st[depth++] = (struct xf){e->id, 0, 0};
			continue;
		}
		for (uint64_t k = 0; k < e->count && rc == 0; k++)
			rc = on_event(w, e->id, r->slot[f->elem]);
		f->elem++;
	}
	free(st);
	return rc;
}

/*
 * Which terminals read a file, and the argument with the bytes they read: a kind whose file
 * argument has the input flag (FORMAT.md §4), or, in traces written before those flags
 * (format 2.0), one of the kinds that read then.
 */
static int read_table(struct walk *w)
{
	static const char *const reads_2_0[] = {"read",	    "pread",   "readv", "fread",
						"fgets",    "fgetc",   "getc",	"getline",
						"getdelim", "getchar", NULL};
	struct rp_gen *g = w->g;
	uint32_t n = g->ti->n_terminals;

	w->term_file = malloc(((size_t)n + 1) * sizeof(*w->term_file));
	w->term_bytes = malloc((size_t)n + 1);
	w->term_off = malloc((size_t)n + 1);
	w->term_ret = malloc((size_t)n + 1);
	w->opened = calloc((size_t)n + 1, 1);
	w->term_id = malloc((size_t)n + 1);
	w->term_free = calloc((size_t)n + 1, 1);
	if (!w->term_file || !w->term_bytes || !w->term_off || !w->term_ret || !w->opened ||
	    !w->term_id || !w->term_free)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		union tfs_arg args[TFS_MAX_ARGS];
		struct tfs_kind_desc kd;
		int rc, file = -1, bytes = -1, off = -1, r = 0;

		w->term_file[i] = -1;
		w->term_bytes[i] = -1;
		w->term_off[i] = -1;
		w->term_ret[i] = -1;
		w->term_id[i] = -1;
		rc = tfs_trace_kind(g->t, g->terms[i].kind, &kd);
		if (rc == 0)
			rc = tfs_trace_term_args(g->t, i, args);
		if (rc < 0)
			return rc;
		for (uint32_t a = 0; g->terms[i].alloc && a < kd.n_args; a++)
			if (!strcmp(kd.args[a].name, "id") && kd.args[a].enc == TFS_ENC_VAL)
				w->term_id[i] = (int8_t)a;
		w->term_free[i] = g->terms[i].alloc && !strcmp(kd.name, "free");
		/* a call naming a path: whether it succeeded (its directory existed) */
		for (uint32_t a = 0; a < kd.n_args; a++)
			if (!strcmp(kd.args[a].name, "path") && kd.args[a].enc == TFS_ENC_STR)
				for (uint32_t q = 0; q < kd.n_args; q++)
					if (!strcmp(kd.args[q].name, "ret") &&
					    kd.args[q].enc == TFS_ENC_VAL)
						w->term_ret[i] = (int8_t)q;
		for (int k = 0; reads_2_0[k]; k++)
			r |= !strcmp(kd.name, reads_2_0[k]);
		for (uint32_t a = 0; a < kd.n_args; a++)
			r |= !strcmp(kd.args[a].name, "path") && kd.args[a].enc == TFS_ENC_SYM &&
			     (kd.args[a].flags & TFS_ARG_INPUT);
		for (uint32_t a = 0; r && a < kd.n_args; a++) {
			if (!strcmp(kd.args[a].name, "path") && kd.args[a].enc == TFS_ENC_SYM)
				file = (int)a;
			if ((kd.args[a].flags & TFS_ARG_BYTES) && kd.args[a].enc == TFS_ENC_VAL)
				bytes = (int)a;
			if (!strcmp(kd.args[a].name, "offset") && kd.args[a].enc == TFS_ENC_VAL)
				off = (int)a;
		}
		if (file >= 0 && bytes >= 0) {
			w->term_file[i] = (int64_t)args[file].u;
			w->term_bytes[i] = (int8_t)bytes;
			w->term_off[i] = (int8_t)off;
		}
	}
	return 0;
}

int rp_walk(struct rp_gen *g, const struct rp_gram *gr, uint32_t stream, struct fs_sbuf *seq,
	    struct fs_sbuf *tabs, uint32_t *start_zones)
{
	struct walk w = {.g = g, .gr = gr, .stream = stream, .zcap = 16};
	struct tfs_stream_info si;
	int rc = tfs_trace_stream(g->t, stream, &si);

	*start_zones = 0;
	if (rc < 0)
		return rc;
	w.rank = si.rank;
	w.enc = calloc((size_t)gr->n_slots + 1, sizeof(*w.enc));
	w.zs = calloc(w.zcap, sizeof(*w.zs));
	if (!w.enc || !w.zs) {
		rc = -ENOMEM;
		goto out;
	}
	w.zs[w.nz++] = (struct zpoint){.depth = -1, .slot = UINT32_MAX};
	rc = read_table(&w);
	/* a slot's first value is its gap when timed: kept as a mean */
	for (uint32_t b = 0; rc == 0 && g->timed && b < gr->n_blocks; b++)
		for (uint32_t r = 0; r < gr->blocks[b].n_rules; r++)
			for (uint32_t i = 0; i < gr->blocks[b].rules[r].n_elems; i++)
				if (!gr->blocks[b].rules[r].elems[i].is_rule)
					w.enc[gr->blocks[b].rules[r].slot[i]].mean = 1;
	w.decode = true;
	if (rc == 0)
		rc = tfs_cursor_new(g->t, stream, TFS_VIEW_TEXT, 0, si.n_events, &w.cur);
	for (uint32_t b = 0; rc == 0 && b < gr->n_blocks; b++)
		rc = walk_block(&w, &gr->blocks[b]);
	if (rc == 0)
		rc = resolve_pending(&w, NULL);
	while (rc == 0 && w.nz > 0)
		rc = zpoint_close(&w, &w.zs[--w.nz]);
	*start_zones = w.start_list;
	for (uint32_t i = 0; rc == 0 && i < g->ti->n_terminals; i++) {
		if (!w.opened[i])
			continue;
		if (g->n_opened == g->opened_cap) {
			uint32_t cap = g->opened_cap ? 2 * g->opened_cap : 16;
			struct rp_opened *o = realloc(g->opened, cap * sizeof(*o));

			if (!o) {
				rc = -ENOMEM;
				break;
			}
			g->opened = o;
			g->opened_cap = cap;
		}
		g->opened[g->n_opened++] = (struct rp_opened){w.rank, i};
	}
	for (uint32_t i = 0; rc == 0 && i < gr->n_slots; i++) {
		fs_sb_printf(seq, "%s", i ? (i % 4 ? ", " : ",\n\t") : "\t");
		venc_emit(g, &w.enc[i], stream, i, seq, tabs);
	}
out:
	tfs_cursor_free(w.cur);
	for (uint32_t i = 0; w.enc && i < gr->n_slots; i++)
		free(w.enc[i].runs);
	free(w.enc);
	free(w.zs);
	free(w.term_file);
	free(w.term_bytes);
	free(w.term_off);
	free(w.term_ret);
	free(w.opened);
	free(w.term_id);
	free(w.term_free);
	free(w.left.v);
	return rc;
}
