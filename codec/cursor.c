/*
 * Random access into views: a walker keeps the path from a grammar block's start rule down
 * to one terminal (rule, element, repetition per level), finds the event under any event
 * index or byte offset in O(height x log body) from the layout's prefix sums, and steps to
 * the next event in amortised O(1). A cursor adds the value block of the current event and
 * renders lines on demand. Cursors on one trace share only the trace's cache of decoded
 * blocks (vcache_i.h, under its own lock), looked in before each block is decoded and given
 * the blocks decoded at a jump; they run in parallel otherwise. verify lives here too: it is
 * a full read of every view.
 *
 * A walker may be restricted to one event kind (kindex.c): then byte offsets count only the
 * lines of that kind, a seek descends by the kind's byte sums and steps skip every element
 * without events of the kind, adding its events to the stream index as they pass it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_i.h"

struct frame {
	uint32_t rule;
	uint32_t elem; /* index in the rule body */
	uint64_t rep;  /* repetition of that element, < count */
};

struct walker {
	const struct tfs_trace *t;
	const struct gsec *g;
	int view;
	uint32_t block;
	uint32_t depth;
	struct frame *st; /* [g->height + 1] */
	uint64_t event;	  /* stream index of the current event */
	uint64_t byte;	  /* where its line starts in the stream's whole view */
	uint32_t term;
	bool valid;
	bool stale;	/* @event, @byte and @term are right, the stack is behind them */
	const struct kindex *k; /* only the events of this kind, or NULL: every event */
	uint64_t kev;		/* with @k: the kind's events before the current one */
	struct list_memo *memo; /* walker_list()'s, or NULL: the walker only steps and seeks */
};

/*
 * What walker_list() remembers of the list it builds: where each rule's whole expansion
 * already lies in it, so that a rule met again is copied instead of walked. Grammars of
 * loops meet the same few rules over and over, under different parents.
 */
struct list_memo {
	uint32_t *pos;	 /* [max rules of a block]: where rule r's expansion starts */
	uint32_t *gen;	 /* [max rules of a block]: pos[r] holds when gen[r] == cur */
	uint32_t *start; /* [height + 1]: where frame d's rule starts, or LIST_NO_START */
	uint32_t n_rules;
	uint32_t cur; /* bumped for each list and each block: forgets every pos */
};

#define LIST_NO_START UINT32_MAX

struct tfs_cursor {
	struct tfs_trace *t;
	const struct tstream *s;
	const struct tfs_vsec *vs;	/* the values it decodes (shared with other streams) */
	const struct name_table *names; /* its rank's names (FORMAT.md §12), or NULL */
	int view;
	uint64_t first, n;    /* event range */
	uint64_t off0, size;  /* its bytes within the stream's whole view */
	struct walker w;      /* the read position */
	struct walker tw;     /* lists the terminals of a value block */
	struct vblock vb;
	uint64_t vb_first;    /* first event of the decoded block */
	uint32_t vb_n;	      /* its events, 0: none decoded */
	uint32_t *terms;      /* [block_events] */
	struct tfs_buf line;  /* rendered line of event line_event */
	uint64_t line_event;
	uint64_t next_off;    /* where tfs_cursor_next_line() reads on, in the view */
	struct kindex *own_k; /* the terminals set of tfs_cursor_new_terms(), or NULL */
	union tfs_arg args[TFS_MAX_ARGS];
	struct name_cache ncache; /* of @names */
};

static int walker_init(struct walker *w, const struct tfs_trace *t, const struct gsec *g,
		       int view)
{
	memset(w, 0, sizeof(*w));
	w->t = t;
	w->g = g;
	w->view = view;
	w->st = calloc((size_t)g->height + 1, sizeof(*w->st));
	return w->st ? 0 : -ENOMEM;
}

static void walker_fini(struct walker *w)
{
	free(w->st);
	w->st = NULL;
	if (w->memo) {
		free(w->memo->pos);
		free(w->memo->gen);
		free(w->memo->start);
		free(w->memo);
		w->memo = NULL;
	}
}

/* Give @w the memo walker_list() needs. */
static int walker_memo_init(struct walker *w)
{
	struct list_memo *m = calloc(1, sizeof(*m));
	uint32_t n_rules = 1;

	if (!m)
		return -ENOMEM;
	w->memo = m;
	for (uint32_t b = 0; b < w->g->n_blocks; b++)
		if (w->g->blocks[b].n_rules > n_rules)
			n_rules = w->g->blocks[b].n_rules;
	m->pos = malloc(n_rules * sizeof(*m->pos));
	m->gen = calloc(n_rules, sizeof(*m->gen));
	m->start = malloc(((size_t)w->g->height + 1) * sizeof(*m->start));
	m->n_rules = n_rules;
	return m->pos && m->gen && m->start ? 0 : -ENOMEM;
}

static inline uint64_t unit_events(const struct tfs_grammar *gr, const struct gram_elem *e)
{
	return e->is_rule ? gr->rules[e->id].n_events : 1;
}

static inline uint64_t unit_bytes(const struct walker *w, const struct block_layout *l,
				  const struct gram_elem *e)
{
	if (w->k)
		return kindex_unit_bytes(w->t, w->k, w->view, w->block, e);
	return e->is_rule ? l->rule_bytes[w->view][e->id] : w->t->term_len[w->view][e->id];
}

/* The byte prefix sums of the bodies of @w's block, over every event or the kind's. */
static inline const uint64_t *pfx_bytes(const struct walker *w, const struct block_layout *l)
{
	const uint64_t *p = w->k ? w->k->pfx_bytes[w->view] : l->pfx_bytes[w->view];

	/* NULL when no rule is long enough to have them */
	return w->k && p ? p + w->k->elem_base[w->block] : p;
}

static inline const uint64_t *blk_bytes(const struct walker *w)
{
	return w->k ? w->k->blk_bytes[w->view] : w->g->blk_bytes[w->view];
}

/* The kind's events before element @i of rule @ru's body (long bodies only). */
static inline uint64_t pfx_kevents(const struct walker *w, const struct gram_rule *ru,
				   uint32_t i)
{
	return w->k ? w->k->pfx_events[w->k->elem_base[w->block] + ru->first_elem + i] : 0;
}

static inline uint64_t unit_kevents(const struct walker *w, const struct gram_elem *e)
{
	return w->k ? kindex_unit_events(w->t, w->k, w->block, e) : 0;
}

/* Last index i in [0, n) with a[i] <= x (a ascending, a[0] <= x). */
static uint64_t last_le(const uint64_t *a, uint64_t n, uint64_t x)
{
	uint64_t lo = 0, hi = n;

	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (a[mid] <= x)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Descend from the current block's start rule to the event containing position @pos,
 * measured in events (@by_bytes false) or bytes of the view. On return w->event and
 * w->byte describe that event; *intra is @pos's offset inside it (bytes mode).
 */
static void descend(struct walker *w, uint64_t pos, bool by_bytes, uint64_t *intra)
{
	const struct tfs_grammar *gr = &w->g->blocks[w->block];
	const struct block_layout *l = &w->g->layout[w->block];
	const uint64_t *pb = pfx_bytes(w, l);
	uint32_t rule = gr->n_rules - 1;

	w->depth = 0;
	for (;;) {
		const struct gram_rule *ru = &gr->rules[rule];
		uint64_t ev_before = 0, by_before = 0, kev_before = 0, ue, ub, rep;
		const struct gram_elem *e;
		uint32_t i = 0;

		if (ru->n_elems >= LAYOUT_PREFIX_MIN) {
			const uint64_t *p = by_bytes ? pb : l->pfx_events;

			/* with a kind, elements without its events add no bytes: the last
			 * of equal sums is the one that holds @pos */
			i = (uint32_t)last_le(p + ru->first_elem, ru->n_elems, pos);
			ev_before = l->pfx_events[ru->first_elem + i];
			by_before = pb[ru->first_elem + i];
			kev_before = pfx_kevents(w, ru, i);
		} else {
			for (;; i++) {
				e = &gr->elems[ru->first_elem + i];
				ue = e->count * unit_events(gr, e);
				ub = e->count * unit_bytes(w, l, e);
				if (i + 1 == ru->n_elems || (by_bytes ? by_before + ub : ev_before + ue) > pos)
					break;
				ev_before += ue;
				by_before += ub;
				kev_before += e->count * unit_kevents(w, e);
			}
		}
		e = &gr->elems[ru->first_elem + i];
		ue = unit_events(gr, e);
		ub = unit_bytes(w, l, e);
		pos -= by_bytes ? by_before : ev_before;
		rep = pos / (by_bytes ? ub : ue);
		pos -= rep * (by_bytes ? ub : ue);
		w->event += ev_before + rep * ue;
		w->byte += by_before + rep * ub;
		w->kev += kev_before + rep * unit_kevents(w, e);
		w->st[w->depth++] = (struct frame){rule, i, rep};
		if (!e->is_rule) {
			w->term = e->id;
			*intra = pos;
			w->valid = true;
			return;
		}
		rule = e->id;
	}
}

/* Position on event @idx (< the stream's events). */
static void walker_seek_event(struct walker *w, uint64_t idx)
{
	const struct gsec *g = w->g;
	uint64_t intra;

	w->stale = false;
	w->block = (uint32_t)last_le(g->blk_events, g->n_blocks, idx);
	w->event = g->blk_events[w->block];
	w->byte = blk_bytes(w)[w->block];
	w->kev = w->k ? w->k->blk_events[w->block] : 0;
	descend(w, idx - w->event, false, &intra);
}

/* Position on the event whose line holds byte @off (< the view's size). */
static uint64_t walker_seek_byte(struct walker *w, uint64_t off)
{
	const struct gsec *g = w->g;
	uint64_t intra;

	w->stale = false;
	w->block = (uint32_t)last_le(blk_bytes(w), g->n_blocks, off);
	w->event = g->blk_events[w->block];
	w->byte = blk_bytes(w)[w->block];
	w->kev = w->k ? w->k->blk_events[w->block] : 0;
	descend(w, off - w->byte, true, &intra);
	return intra;
}

/*
 * With a kind: move frame @f to its first element from f->elem on that has events of the
 * kind, adding the events of those it passes. @return false when no element is left.
 */
static bool kskip(struct walker *w, struct frame *f)
{
	const struct tfs_grammar *gr = &w->g->blocks[w->block];
	const struct gram_rule *ru = &gr->rules[f->rule];

	for (; f->elem < ru->n_elems; f->elem++) {
		const struct gram_elem *e = &gr->elems[ru->first_elem + f->elem];

		if (kindex_unit_events(w->t, w->k, w->block, e))
			return true;
		w->event += e->count * unit_events(gr, e);
	}
	return false;
}

/*
 * Push the leftmost path below frame depth-1's element (a rule); with a kind, onto the first
 * event of the kind (each rule pushed has events of it: its parent's element was chosen
 * for them).
 */
static void descend_left(struct walker *w)
{
	const struct tfs_grammar *gr = &w->g->blocks[w->block];

	for (;;) {
		const struct frame *f = &w->st[w->depth - 1];
		const struct gram_elem *e = &gr->elems[gr->rules[f->rule].first_elem + f->elem];

		if (!e->is_rule) {
			w->term = e->id;
			return;
		}
		w->st[w->depth++] = (struct frame){e->id, 0, 0};
		if (w->k)
			kskip(w, &w->st[w->depth - 1]);
	}
}

/* Append @m terms repeating the last @period of @t[0..@i) (@period <= @i). */
static void copy_period(uint32_t *t, uint64_t i, uint64_t period, uint64_t m)
{
	/* what is copied repeats with the period, so twice it is a period too */
	while (m) {
		const uint64_t k = m < period ? m : period;

		memcpy(t + i, t + i - period, (size_t)k * sizeof(*t));
		i += k;
		m -= k;
		period *= 2;
	}
}

/* Forget every rule's place in the list: a new list, or a new block's rules. */
static void memo_forget(struct list_memo *m)
{
	if (++m->cur == 0) {
		memset(m->gen, 0, m->n_rules * sizeof(*m->gen));
		m->cur = 1;
	}
}

/*
 * Go down from the top frame's element (its first repetition) to its first terminal and list
 * it at terms[*i]; a rule whose expansion is listed already is copied whole instead, as much
 * of it as @n allows, and its frame not pushed: the walker stays on that element.
 */
static void list_descend(struct walker *w, uint32_t *terms, uint32_t *i, uint32_t n)
{
	const struct tfs_grammar *gr = &w->g->blocks[w->block];
	struct list_memo *m = w->memo;

	for (;;) {
		const struct frame *f = &w->st[w->depth - 1];
		const struct gram_elem *e = &gr->elems[gr->rules[f->rule].first_elem + f->elem];
		uint64_t ue;

		if (!e->is_rule) {
			w->term = e->id;
			terms[(*i)++] = e->id;
			return;
		}
		if (m->gen[e->id] == m->cur) {
			ue = gr->rules[e->id].n_events;
			if (ue > n - *i)
				ue = n - *i;
			memcpy(terms + *i, terms + m->pos[e->id], (size_t)ue * sizeof(*terms));
			*i += (uint32_t)ue;
			return;
		}
		m->start[w->depth] = *i;
		w->st[w->depth++] = (struct frame){e->id, 0, 0};
	}
}

/*
 * List the terminals of @n (>= 1) events from the walker's current one (the walker has no
 * kind, and a memo), leaving it invalid. A repetition of an element whose previous
 * repetition is all listed already is copied from it rather than walked: loops make runs of
 * repetitions; so is a rule listed whole before.
 */
static void walker_list(struct walker *w, uint32_t *terms, uint32_t n)
{
	const struct gsec *g = w->g;
	struct list_memo *m = w->memo;
	uint32_t i = 0, at = 0;

	memo_forget(m);
	/* the frames below the first event start with it when it is their rule's first */
	for (uint32_t d = w->depth; d-- > 0;) {
		at = at == 0 && w->st[d].elem == 0 && w->st[d].rep == 0 ? 0 : LIST_NO_START;
		m->start[d] = at;
	}
	terms[i++] = w->term;
	while (i < n) {
		const struct tfs_grammar *gr = &g->blocks[w->block];
		bool stepped = false;

		while (w->depth) {
			struct frame *f = &w->st[w->depth - 1];
			const struct gram_rule *ru = &gr->rules[f->rule];
			const struct gram_elem *e = &gr->elems[ru->first_elem + f->elem];

			if (++f->rep < e->count) {
				const uint64_t ue = unit_events(gr, e);
				uint64_t k;

				if (ue > i) {
					list_descend(w, terms, &i, n);
					stepped = true;
					break;
				}
				k = (e->count - f->rep) * ue;
				if (k >= n - i) {
					copy_period(terms, i, ue, n - i);
					w->valid = false;
					return;
				}
				copy_period(terms, i, ue, k);
				i += (uint32_t)k;
			}
			f->rep = 0;
			if (++f->elem < ru->n_elems) {
				list_descend(w, terms, &i, n);
				stepped = true;
				break;
			}
			if (m->start[w->depth - 1] != LIST_NO_START) {
				m->pos[f->rule] = m->start[w->depth - 1];
				m->gen[f->rule] = m->cur;
			}
			w->depth--;
		}
		while (!stepped && ++w->block < g->n_blocks) {
			gr = &g->blocks[w->block];
			if (gr->n_events) {
				memo_forget(m);
				w->st[0] = (struct frame){gr->n_rules - 1, 0, 0};
				m->start[0] = i;
				w->depth = 1;
				list_descend(w, terms, &i, n);
				stepped = true;
			}
		}
		if (!stepped)
			break; /* the stream ended: not for a value block's events */
	}
	w->valid = false;
}

/* walker_next() over the events of the walker's kind only. */
static bool kwalker_next(struct walker *w)
{
	const struct gsec *g = w->g;

	w->byte += w->t->term_len[w->view][w->term];
	w->event++;
	w->kev++;
	while (w->depth) {
		const struct tfs_grammar *gr = &g->blocks[w->block];
		struct frame *f = &w->st[w->depth - 1];

		if (++f->rep < gr->elems[gr->rules[f->rule].first_elem + f->elem].count) {
			descend_left(w);
			return true;
		}
		f->rep = 0;
		f->elem++;
		if (kskip(w, f)) {
			descend_left(w);
			return true;
		}
		w->depth--;
	}
	while (++w->block < g->n_blocks) {
		const struct tfs_grammar *gr = &g->blocks[w->block];

		if (w->k->blk_events[w->block + 1] > w->k->blk_events[w->block]) {
			w->event = g->blk_events[w->block];
			w->st[0] = (struct frame){gr->n_rules - 1, 0, 0};
			w->depth = 1;
			kskip(w, &w->st[0]);
			descend_left(w);
			return true;
		}
	}
	w->valid = false;
	return false;
}

/* Step to the next event (of the walker's kind); false at the end of the stream. */
static bool walker_next(struct walker *w)
{
	const struct gsec *g = w->g;

	if (w->k)
		return kwalker_next(w);
	if (w->stale)
		walker_seek_event(w, w->event);
	w->byte += w->t->term_len[w->view][w->term];
	w->event++;
	while (w->depth) {
		const struct tfs_grammar *gr = &g->blocks[w->block];
		struct frame *f = &w->st[w->depth - 1];
		const struct gram_rule *ru = &gr->rules[f->rule];

		if (++f->rep < gr->elems[ru->first_elem + f->elem].count) {
			descend_left(w);
			return true;
		}
		f->rep = 0;
		if (++f->elem < ru->n_elems) {
			descend_left(w);
			return true;
		}
		w->depth--;
	}
	while (++w->block < g->n_blocks) {
		const struct tfs_grammar *gr = &g->blocks[w->block];

		if (gr->n_events) {
			w->st[0] = (struct frame){gr->n_rules - 1, 0, 0};
			w->depth = 1;
			descend_left(w);
			return true;
		}
	}
	w->valid = false;
	return false;
}

static int view_ok(int view)
{
	return view >= 0 && view < TFS_VIEW_COUNT;
}

/* Byte offset of event @idx (<= n_events) in the stream's whole view. */
static uint64_t event_byte(struct walker *w, uint64_t idx)
{
	const struct gsec *g = w->g;

	if (idx == g->blk_events[g->n_blocks]) {
		w->kev = w->k ? w->k->blk_events[g->n_blocks] : 0;
		return blk_bytes(w)[g->n_blocks];
	}
	walker_seek_event(w, idx);
	return w->byte;
}

int tfs_trace_kind_view_size(struct tfs_trace *t, uint32_t stream, uint32_t kind, int view,
			     uint64_t first, uint64_t n, uint64_t *events, uint64_t *bytes)
{
	const struct kindex *k;
	const struct gsec *g;
	struct walker w;
	uint64_t end, from, kev0;
	int rc;

	if (stream >= t->n_streams || kind >= t->schema.n_kinds)
		return -ENOENT;
	if (!view_ok(view) || !add_u64(first, n, &end) || end > t->streams[stream].n_events)
		return -EINVAL;
	g = &t->gsecs[t->streams[stream].gsec];
	rc = kindex_get(t, t->streams[stream].gsec, kind, &k);
	if (rc < 0)
		return rc;
	rc = walker_init(&w, t, g, view);
	if (rc < 0)
		return rc;
	w.k = k;
	from = event_byte(&w, first);
	kev0 = w.kev;
	*bytes = event_byte(&w, end) - from;
	if (events)
		*events = w.kev - kev0;
	walker_fini(&w);
	return 0;
}

/* Without a cursor: a tree of many ranks asks the size of every stream's views. */
int tfs_trace_view_size(const struct tfs_trace *t, uint32_t stream, int view, uint64_t first,
			uint64_t n, uint64_t *bytes)
{
	const struct gsec *g;
	struct walker w;
	uint64_t end, from;
	int rc;

	if (stream >= t->n_streams)
		return -ENOENT;
	if (!view_ok(view) || !add_u64(first, n, &end) || end > t->streams[stream].n_events)
		return -EINVAL;
	g = &t->gsecs[t->streams[stream].gsec];
	*bytes = 0;
	if (n == 0)
		return 0;
	if (first == 0 && end == g->blk_events[g->n_blocks]) {
		*bytes = g->blk_bytes[view][g->n_blocks];
		return 0;
	}
	rc = walker_init(&w, t, g, view);
	if (rc < 0)
		return rc;
	from = event_byte(&w, first);
	*bytes = event_byte(&w, end) - from;
	walker_fini(&w);
	return 0;
}

/*
 * A cursor over every event of the range (@kind UINT32_MAX, @terms NULL), those of @kind or
 * those of the terminals @terms marks.
 */
static int cursor_new(struct tfs_trace *t, uint32_t stream, uint32_t kind, const uint8_t *terms,
		      int view, uint64_t first, uint64_t n, struct tfs_cursor **out)
{
	const struct kindex *k = NULL;
	struct kindex *own_k = NULL;
	struct tfs_cursor *c;
	const struct gsec *g;
	uint64_t end;
	int rc;

	*out = NULL;
	if (stream >= t->n_streams || (kind != UINT32_MAX && kind >= t->schema.n_kinds))
		return -ENOENT;
	if (!view_ok(view) || !add_u64(first, n, &end) || end > t->streams[stream].n_events)
		return -EINVAL;
	rc = render_view_ready(t, view);
	if (rc < 0)
		return rc;
	if (kind != UINT32_MAX) {
		rc = kindex_get(t, t->streams[stream].gsec, kind, &k);
		if (rc < 0)
			return rc;
	} else if (terms) {
		rc = kindex_new_terms(t, t->streams[stream].gsec, terms, &own_k);
		if (rc < 0)
			return rc;
		k = own_k;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		kindex_free(own_k);
		return -ENOMEM;
	}
	c->own_k = own_k;
	c->t = t;
	c->s = &t->streams[stream];
	c->vs = stream_vsec(t, c->s);
	c->names = t->names.n_runs ? names_table_of(&t->names, c->s->rank) : NULL;
	c->view = view;
	c->first = first;
	c->n = n;
	c->line_event = UINT64_MAX;
	g = &t->gsecs[c->s->gsec];
	vblock_init(&c->vb);
	buf_init(&c->line);
	rc = walker_init(&c->w, t, g, view);
	if (rc == 0)
		rc = walker_init(&c->tw, t, g, view);
	if (rc == 0)
		rc = walker_memo_init(&c->tw);
	if (rc == 0) {
		c->terms = calloc(c->vs->block_events ? c->vs->block_events : 1,
				  sizeof(*c->terms));
		if (!c->terms)
			rc = -ENOMEM;
	}
	if (rc < 0) {
		tfs_cursor_free(c);
		return rc;
	}
	c->w.k = k;
	c->off0 = event_byte(&c->w, first);
	c->size = event_byte(&c->w, end) - c->off0;
	c->w.valid = false;
	*out = c;
	return 0;
}

int tfs_cursor_new(struct tfs_trace *t, uint32_t stream, int view, uint64_t first, uint64_t n,
		   struct tfs_cursor **out)
{
	return cursor_new(t, stream, UINT32_MAX, NULL, view, first, n, out);
}

int tfs_cursor_new_kind(struct tfs_trace *t, uint32_t stream, uint32_t kind, int view,
			uint64_t first, uint64_t n, struct tfs_cursor **out)
{
	return cursor_new(t, stream, kind, NULL, view, first, n, out);
}

int tfs_cursor_new_terms(struct tfs_trace *t, uint32_t stream, const uint8_t *terms, int view,
			 uint64_t first, uint64_t n, struct tfs_cursor **out)
{
	if (!terms)
		return -EINVAL;
	return cursor_new(t, stream, UINT32_MAX, terms, view, first, n, out);
}

void tfs_cursor_free(struct tfs_cursor *c)
{
	if (!c)
		return;
	walker_fini(&c->w);
	walker_fini(&c->tw);
	vblock_fini(&c->vb);
	buf_fini(&c->line);
	free(c->terms);
	kindex_free(c->own_k);
	free(c);
}

uint64_t tfs_cursor_size(const struct tfs_cursor *c)
{
	return c->size;
}

/* Decode value block @b into c->vb, applying the stream's patches of that block. */
static int decode_values(struct tfs_cursor *c, uint64_t b, struct tfs_diag *diag)
{
	const struct vpatch_list *pl = c->s->patch;
	uint32_t lo = 0, hi, end;

	if (!pl)
		return vsec_decode_block(c->vs, b, c->terms, c->t->term_nvals, c->t->n_terms,
					 &c->vb, diag);
	hi = pl->n;
	while (lo < hi) { /* first entry of block >= b */
		uint32_t mid = lo + (hi - lo) / 2;

		if (pl->e[mid].block < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (end = lo; end < pl->n && pl->e[end].block == b; end++)
		;
	if (end == lo)
		return vsec_decode_block(c->vs, b, c->terms, c->t->term_nvals, c->t->n_terms,
					 &c->vb, diag);
	return vsec_decode_block_patched(c->vs, b, pl->e + lo, end - lo, c->terms,
					 c->t->term_nvals, c->t->n_terms, &c->vb, diag);
}

/* Make c->vb hold the value block of event @idx; return the event's slot in it. */
static int load_values(struct tfs_cursor *c, uint64_t idx, uint32_t *slot,
		       struct tfs_diag *diag)
{
	const struct tfs_vsec *vs = c->vs;
	const uint32_t stream = (uint32_t)(c->s - c->t->streams);
	uint64_t b;
	uint32_t n;
	bool jump;
	int rc;

	/* most events fall in the block already decoded: no division for them */
	if (idx - c->vb_first < c->vb_n) {
		*slot = (uint32_t)(idx - c->vb_first);
		return 0;
	}
	b = idx / vs->block_events;
	n = vsec_block_len(vs, b);
	/* not a read that starts where a block does: decoding ahead cuts its chunks there */
	jump = (!c->vb_n || b != c->vb_first / vs->block_events + 1) &&
	       idx != b * vs->block_events;
	c->vb_n = 0;
	if (!vcache_get(&c->t->vcache, stream, b, &c->vb, c->terms)) {
		walker_seek_event(&c->tw, b * vs->block_events);
		walker_list(&c->tw, c->terms, n);
		rc = decode_values(c, b, diag);
		if (rc < 0)
			return rc;
		/* a cursor reading on keeps nothing: no other is likely to jump into its blocks */
		if (jump)
			vcache_put(&c->t->vcache, stream, b, &c->vb, c->terms,
				   vs->timing != VAL_TIMING_NONE);
	}
	c->vb_first = b * vs->block_events;
	c->vb_n = n;
	*slot = (uint32_t)(idx - c->vb_first);
	return 0;
}

/* Whether the event of terminal @term needs the value stream at all. */
static bool needs_values(const struct tfs_cursor *c, uint32_t term)
{
	return c->t->timing != TFS_TIMING_NONE || c->t->term_nvals[term] > 0;
}

/*
 * Render the walker's current event at @dst, which has room for the terminal's
 * term_room bytes. With @dst NULL: into c->line, cached per event.
 */
static int render_current(struct tfs_cursor *c, uint8_t *dst, struct tfs_diag *diag)
{
	static const uint64_t no_vals[1];
	const uint32_t term = c->w.term;
	struct render_in in = {
		.index = c->w.event, .term = term, .rank = c->s->rank,
		.thread = c->s->thread, .vals = no_vals, .names = c->names, .cache = &c->ncache,
	};
	uint32_t slot;
	int rc;

	if (!dst && c->line_event == c->w.event)
		return 0;
	if (needs_values(c, term)) {
		rc = load_values(c, c->w.event, &slot, diag);
		if (rc < 0)
			return rc;
		in.ts_ns = c->vb.ts_ns[slot];
		in.dur_ns = c->vb.dur_ns[slot];
		if (c->t->term_nvals[term])
			in.vals = c->vb.vals + c->vb.val_off[slot];
	}
	if (dst)
		return render_line_fast(c->t, c->view, &in, dst, diag);
	c->line_event = UINT64_MAX;
	c->line.len = 0;
	if (buf_reserve(&c->line, c->t->term_room[c->view][term]) < 0)
		return -ENOMEM;
	rc = render_line_fast(c->t, c->view, &in, c->line.data, diag);
	if (rc < 0)
		return rc;
	c->line.len = c->t->term_len[c->view][term];
	c->line_event = c->w.event;
	return 0;
}

/*
 * Step the cursor's walker to the next event (there is one). Inside the decoded value block
 * the terminals are listed already (load_values() walked them): it takes the next from the
 * list and leaves the walker's stack behind, for walker_next() to rebuild with a seek when
 * it is needed again, once a block at most; a grammar walk costs as much as a line's render.
 */
static void cursor_step(struct tfs_cursor *c)
{
	struct walker *w = &c->w;
	const uint64_t i = w->event + 1 - c->vb_first;

	if (w->k || i >= c->vb_n) {
		walker_next(w);
		return;
	}
	w->byte += w->t->term_len[w->view][w->term];
	w->event++;
	w->term = c->terms[i];
	w->stale = true;
}

/*
 * Render the lines after the walker's event that the decoded value block holds, in place at
 * @dst + *done while each fits with its room in @len and the range lasts; the walker moves
 * onto the last one rendered. One event after another straight from the block: no walker
 * step and no value lookup per line.
 */
static int render_run(struct tfs_cursor *c, uint8_t *dst, size_t *done, size_t len,
		      uint64_t end, struct tfs_diag *diag)
{
	const uint64_t *term_len = c->t->term_len[c->view];
	struct walker *w = &c->w;
	struct render_in in = {
		.index = w->event + 1, .rank = c->s->rank, .thread = c->s->thread,
		.names = c->names, .cache = &c->ncache,
	};
	uint64_t last = c->vb_first + c->vb_n;
	uint32_t n_lines, term;
	size_t bytes;
	int rc;

	if (last > end)
		last = end;
	if (w->k || w->event + 1 < c->vb_first || w->event + 1 >= last)
		return 0;
	rc = render_lines_fast(c->t, c->view, &in, &c->vb, c->terms,
			       (uint32_t)(w->event + 1 - c->vb_first), (uint32_t)(last - c->vb_first),
			       dst + *done, len - *done, &bytes, &n_lines, diag);
	if (n_lines) {
		term = c->terms[w->event + n_lines - c->vb_first];
		w->byte += term_len[w->term] + bytes - term_len[term];
		w->event += n_lines;
		w->term = term;
		w->stale = true;
		*done += bytes;
	}
	return rc;
}

ssize_t tfs_cursor_pread(struct tfs_cursor *c, void *buf, size_t len, uint64_t off,
			 struct tfs_diag *diag)
{
	uint8_t *dst = buf;
	uint64_t abs, intra, line_len, end;
	size_t done = 0;
	int rc;

	if (off >= c->size || len == 0)
		return 0;
	if (len > c->size - off)
		len = (size_t)(c->size - off);
	abs = c->off0 + off;
	end = c->first + c->n;
	if (c->w.valid && abs >= c->w.byte &&
	    abs < c->w.byte + c->t->term_len[c->view][c->w.term]) {
		intra = abs - c->w.byte;
	} else if (c->w.valid && abs == c->w.byte + c->t->term_len[c->view][c->w.term] &&
		   c->w.event + 1 < end) {
		cursor_step(c);
		intra = 0;
	} else {
		intra = walker_seek_byte(&c->w, abs);
	}
	for (;;) {
		uint64_t fixed = c->t->term_len[c->view][c->w.term];
		size_t n;

		if (intra == 0 && c->t->term_room[c->view][c->w.term] <= len - done) {
			/* a whole line and the renderer's slack fit: render in place, no copy */
			rc = render_current(c, dst + done, diag);
			if (rc < 0)
				return rc;
			done += (size_t)fixed;
			rc = render_run(c, dst, &done, len, end, diag);
			if (rc < 0)
				return rc;
			if (done == len || c->w.event + 1 >= end)
				break;
			cursor_step(c);
			continue;
		}
		rc = render_current(c, NULL, diag);
		if (rc < 0)
			return rc;
		line_len = c->line.len;
		n = (size_t)(line_len - intra);
		if (n > len - done)
			n = len - done;
		memcpy(dst + done, c->line.data + intra, n);
		done += n;
		if (done == len || c->w.event + 1 >= end)
			break;
		cursor_step(c);
		intra = 0;
	}
	return (ssize_t)done;
}

int tfs_cursor_next_line(struct tfs_cursor *c, struct tfs_line *line, struct tfs_diag *diag)
{
	uint64_t abs;
	int rc;

	if (c->next_off >= c->size)
		return 0;
	abs = c->off0 + c->next_off;
	if (c->w.valid && abs == c->w.byte + c->t->term_len[c->view][c->w.term])
		walker_next(&c->w);
	else if (!c->w.valid || abs != c->w.byte)
		walker_seek_byte(&c->w, abs);
	rc = render_current(c, NULL, diag);
	if (rc < 0)
		return rc;
	line->index = c->w.event;
	line->term = c->w.term;
	line->text = (const char *)c->line.data;
	line->len = c->line.len;
	c->next_off += c->line.len;
	return 1;
}

int tfs_cursor_event(struct tfs_cursor *c, uint64_t index, struct tfs_event *ev,
		     struct tfs_diag *diag)
{
	static const uint64_t no_vals[1];
	const uint64_t *vals = no_vals;
	uint32_t slot;
	int rc;

	if (index >= c->s->n_events || c->w.k)
		return -EINVAL;
	if (c->w.valid && index == c->w.event + 1)
		walker_next(&c->w); /* iterating: O(1) instead of a seek */
	else if (!c->w.valid || index != c->w.event)
		walker_seek_event(&c->w, index);
	memset(ev, 0, sizeof(*ev));
	if (needs_values(c, c->w.term)) {
		rc = load_values(c, index, &slot, diag);
		if (rc < 0)
			return rc;
		ev->ts_ns = c->vb.ts_ns[slot];
		ev->dur_ns = c->vb.dur_ns[slot];
		if (c->t->term_nvals[c->w.term])
			vals = c->vb.vals + c->vb.val_off[slot];
	}
	ev->index = index;
	ev->terminal = c->w.term;
	ev->kind = c->t->term_kind[c->w.term];
	ev->n_args = c->t->schema.kinds[ev->kind].n_args;
	render_args(c->t, c->w.term, c->s->rank, vals, c->args);
	ev->args = c->args;
	return 0;
}

int tfs_cursor_event_offset(struct tfs_cursor *c, uint64_t index, uint64_t *off)
{
	if (index > c->n)
		return -EINVAL;
	*off = event_byte(&c->w, c->first + index) - c->off0;
	c->w.valid = false;
	return 0;
}

int tfs_cursor_block_start(struct tfs_cursor *c, uint64_t off, uint64_t *start)
{
	const uint32_t be = c->vs->block_events;
	uint64_t first;

	if (off >= c->size)
		return -EINVAL;
	*start = off;
	if (c->w.k || be == 0)
		return 0; /* a kind's lines: value blocks do not map onto its bytes */
	walker_seek_byte(&c->w, c->off0 + off);
	first = c->w.event - c->w.event % be;
	if (first < c->first)
		first = c->first;
	*start = event_byte(&c->w, first) - c->off0;
	c->w.valid = false;
	return 0;
}

/* Read a whole view once: renders, and so checks, every line and value block. */
static int read_all(struct tfs_trace *t, uint32_t stream, int view, struct tfs_diag *diag)
{
	struct tfs_cursor *c;
	uint64_t off = 0;
	char *buf = malloc(1 << 16);
	int rc = buf ? tfs_cursor_new(t, stream, view, 0, t->streams[stream].n_events, &c) : -ENOMEM;

	if (rc < 0) {
		free(buf);
		return rc;
	}
	while (off < c->size) {
		ssize_t got = tfs_cursor_pread(c, buf, 1 << 16, off, diag);

		if (got <= 0) {
			rc = got < 0 ? (int)got : -TFS_ECORRUPT;
			break;
		}
		off += (uint64_t)got;
	}
	tfs_cursor_free(c);
	free(buf);
	return rc;
}

int tfs_trace_verify(struct tfs_trace *t, struct tfs_diag *diag)
{
	int rc = 0;

	if (diag)
		memset(diag, 0, sizeof(*diag));
	for (uint32_t i = 0; i < t->cf.n && rc == 0; i++)
		rc = ctr_check(&t->cf, i, diag);
	for (uint32_t i = 0; i < t->n_streams && rc == 0; i++) {
		if (t->streams[i].same_as != i)
			continue;
		for (int v = 0; v < TFS_VIEW_COUNT && rc == 0; v++)
			rc = read_all(t, i, v, diag);
	}
	if (rc == 0)
		rc = stacks_verify(t, diag);
	return rc;
}

int tfs_trace_term_counts(const struct tfs_trace *t, uint32_t stream, uint64_t *counts)
{
	const struct gsec *g;
	uint64_t *mult;

	if (stream >= t->n_streams)
		return -ENOENT;
	g = &t->gsecs[t->streams[stream].gsec];
	memset(counts, 0, (size_t)t->n_terms * sizeof(*counts));
	for (uint32_t b = 0; b < g->n_blocks; b++) {
		const struct tfs_grammar *gr = &g->blocks[b];

		mult = calloc(gr->n_rules, sizeof(*mult));
		if (!mult)
			return -ENOMEM;
		/* rules only use lower-numbered rules: parents are done before children */
		mult[gr->n_rules - 1] = 1;
		for (uint32_t r = gr->n_rules; r-- > 0;) {
			const struct gram_rule *ru = &gr->rules[r];

			for (uint32_t i = 0; i < ru->n_elems; i++) {
				const struct gram_elem *e = &gr->elems[ru->first_elem + i];

				if (e->is_rule)
					mult[e->id] += mult[r] * e->count;
				else
					counts[e->id] += mult[r] * e->count;
			}
		}
		free(mult);
	}
	return 0;
}

int tfs_trace_grammar_text(const struct tfs_trace *t, uint32_t stream, char **out,
			   size_t *len)
{
	const struct gsec *g;
	struct tfs_buf b;
	char line[64];
	int rc = 0;

	if (stream >= t->n_streams)
		return -ENOENT;
	g = &t->gsecs[t->streams[stream].gsec];
	buf_init(&b);
	for (uint32_t k = 0; k < g->n_blocks && rc == 0; k++) {
		const struct tfs_grammar *gr = &g->blocks[k];

		snprintf(line, sizeof(line), "# block %u: %llu events, %u rules\n", k,
			 (unsigned long long)gr->n_events, gr->n_rules);
		rc = buf_put(&b, line, strlen(line));
		for (uint32_t r = 0; r < gr->n_rules && rc == 0; r++) {
			const struct gram_rule *ru = &gr->rules[r];

			if (r + 1 == gr->n_rules)
				snprintf(line, sizeof(line), "S ->");
			else
				snprintf(line, sizeof(line), "R%u ->", r);
			rc = buf_put(&b, line, strlen(line));
			for (uint32_t i = 0; i < ru->n_elems && rc == 0; i++) {
				const struct gram_elem *e = &gr->elems[ru->first_elem + i];
				int n = snprintf(line, sizeof(line), " %c%u", e->is_rule ? 'R' : 't',
						 e->id);

				if (e->count > 1)
					n += snprintf(line + n, sizeof(line) - (size_t)n, "^%llu",
						      (unsigned long long)e->count);
				rc = buf_put(&b, line, (size_t)n);
			}
			if (rc == 0)
				rc = buf_put(&b, "\n", 1);
		}
	}
	if (rc == 0)
		rc = buf_put(&b, "", 1);
	if (rc < 0) {
		buf_fini(&b);
		return rc;
	}
	*out = (char *)b.data;
	*len = b.len - 1;
	return 0;
}

/* ---- the grammar's shape ---- */

static const struct tfs_grammar *block_of(const struct tfs_trace *t, uint32_t stream,
					  uint32_t block)
{
	const struct gsec *g;

	if (stream >= t->n_streams)
		return NULL;
	g = &t->gsecs[t->streams[stream].gsec];
	return block < g->n_blocks ? &g->blocks[block] : NULL;
}

int tfs_trace_grammar_info(const struct tfs_trace *t, uint32_t stream,
			   struct tfs_grammar_info *gi)
{
	uint32_t first = 0;

	if (stream >= t->n_streams)
		return -ENOENT;
	while (t->streams[first].gsec != t->streams[stream].gsec)
		first++;
	gi->n_blocks = t->gsecs[t->streams[stream].gsec].n_blocks;
	gi->same_as = first;
	return 0;
}

int tfs_trace_block(const struct tfs_trace *t, uint32_t stream, uint32_t block,
		    struct tfs_block_info *bi)
{
	const struct tfs_grammar *gr = block_of(t, stream, block);

	if (!gr)
		return -ENOENT;
	bi->n_events = gr->n_events;
	bi->n_rules = gr->n_rules;
	return 0;
}

int tfs_trace_rule(const struct tfs_trace *t, uint32_t stream, uint32_t block, uint32_t rule,
		   struct tfs_rule_info *ri)
{
	const struct tfs_grammar *gr = block_of(t, stream, block);

	if (!gr || rule >= gr->n_rules)
		return -ENOENT;
	ri->n_events = gr->rules[rule].n_events;
	ri->n_elems = gr->rules[rule].n_elems;
	ri->height = gr->rules[rule].height;
	return 0;
}

int tfs_trace_rule_elem(const struct tfs_trace *t, uint32_t stream, uint32_t block,
			uint32_t rule, uint32_t idx, struct tfs_rule_elem *e)
{
	const struct tfs_grammar *gr = block_of(t, stream, block);
	const struct gram_elem *ge;

	if (!gr || rule >= gr->n_rules || idx >= gr->rules[rule].n_elems)
		return -ENOENT;
	ge = &gr->elems[gr->rules[rule].first_elem + idx];
	e->count = ge->count;
	e->id = ge->id;
	e->is_rule = ge->is_rule;
	return 0;
}
