/*
 * Profiles of a scope, computed once at the first stat of their file: summary.txt (count,
 * total and mean duration and bytes moved per event kind and per zone name) and
 * stacks.folded (in the folded format flame graph tools read: for a rank with backtraces,
 * events per backtrace and stack of zones; for one without, bytes allocated per stack of
 * zones). Both fold per-terminal facts taken from the call signatures (zone names, stack
 * ids, byte counts fixed by the signature) with what only decoding gives (times, VAL byte
 * counts). When no per-occurrence value is needed - no timing and no VAL byte count - the
 * counts come from the grammar alone (tfs_trace_term_counts) and nothing is decoded.
 * The zones an event lies in are found from their times on its thread, whatever order the
 * stream lists them in; backtraces are folded by vbtrace.c.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vnode_i.h"

uint64_t fs_sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
	return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/* ---- terminals: what their signatures fix ---- */

static int term_fill(const struct fs_vtree *vt, uint32_t term, struct fs_term *ft)
{
	union tfs_arg args[TFS_MAX_ARGS];
	const struct fs_kind *k;
	ssize_t n;
	int rc;

	rc = tfs_trace_term_kind(vt->trace, term, &ft->kind);
	if (rc == 0 && ft->kind >= vt->ti.n_kinds)
		rc = -TFS_ECORRUPT;
	if (rc == 0)
		rc = tfs_trace_term_args(vt->trace, term, args);
	if (rc < 0)
		return rc;
	k = &vt->kinds[ft->kind];
	for (uint32_t i = 0; i < k->n_args; i++) {
		const struct tfs_arg_desc *a = &k->args[i];

		if (!(a->flags & TFS_ARG_BYTES))
			continue;
		if (a->enc == TFS_ENC_VAL)
			ft->bytes_val = true;
		else if (a->enc == TFS_ENC_SIG && !(a->type == TFS_TYPE_I64 && args[i].i < 0))
			ft->sig_bytes = fs_sat_add(ft->sig_bytes, args[i].u);
	}
	if (!k->is_zone)
		return 0;
	/* the zone's name as the text view prints it: quoted and escaped, one line */
	n = tfs_trace_term_arg_text(vt->trace, term, 0, NULL, 0);
	if (n < 0)
		return (int)n;
	ft->zone = malloc((size_t)n + 1);
	if (!ft->zone)
		return -ENOMEM;
	tfs_trace_term_arg_text(vt->trace, term, 0, ft->zone, (size_t)n + 1);
	return 0;
}

static int terms_run(void *arg)
{
	struct fs_vtree *vt = arg;
	uint32_t n = vt->ti.n_terminals;
	struct fs_term *terms = calloc(n ? n : 1, sizeof(*terms));
	int rc = terms ? 0 : -ENOMEM;

	for (uint32_t i = 0; i < n && rc == 0; i++)
		rc = term_fill(vt, i, &terms[i]);
	if (rc < 0) {
		for (uint32_t i = 0; terms && i < n; i++)
			free(terms[i].zone);
		free(terms);
		return rc;
	}
	vt->terms = terms;
	return 0;
}

int fs_terms_ready(struct fs_vtree *vt)
{
	return fs_once_run(&vt->terms_once, terms_run, vt);
}

/* Bytes an event moved: the signature's byte counts plus its VAL ones. */
uint64_t fs_event_bytes(const struct fs_vtree *vt, const struct tfs_event *ev)
{
	const struct fs_term *ft = &vt->terms[ev->terminal];
	const struct fs_kind *k = &vt->kinds[ev->kind];
	uint64_t bytes = ft->sig_bytes;

	if (!ft->bytes_val)
		return bytes;
	for (uint32_t i = 0; i < k->n_args && i < ev->n_args; i++) {
		const struct tfs_arg_desc *a = &k->args[i];

		if (!(a->flags & TFS_ARG_BYTES) || a->enc != TFS_ENC_VAL)
			continue;
		if (a->type == TFS_TYPE_I64)
			bytes = fs_sat_add(bytes, ev->args[i].i > 0 ? (uint64_t)ev->args[i].i : 0);
		else
			bytes = fs_sat_add(bytes, ev->args[i].u);
	}
	return bytes;
}

/*
 * Whether segment @s can be counted from the grammar alone: no timing, the whole stream,
 * and none of its terminals (@counts, from tfs_trace_term_counts) has a VAL byte count.
 */
static bool counts_suffice(const struct fs_vtree *vt, const struct fs_seg *s,
			   const uint64_t *counts, bool allocs_only)
{
	struct tfs_stream_info si;

	if (vt->ti.timing != TFS_TIMING_NONE || s->first != 0 ||
	    tfs_trace_stream(vt->trace, s->stream, &si) < 0 || si.n_events != s->n_events)
		return false;
	for (uint32_t t = 0; t < vt->ti.n_terminals; t++) {
		if (counts[t] && vt->terms[t].bytes_val &&
		    (!allocs_only || vt->kinds[vt->terms[t].kind].is_alloc))
			return false;
	}
	return true;
}

/* ---- summary.txt ---- */

struct tstat {
	uint64_t count, total_ns, bytes;
	bool timed; /* some event has a duration: the capture does not time the malloc family */
};

struct row {
	const char *what; /* "kind" or "zone" */
	char *name;	  /* owned */
	struct tstat st;
};

static int count_seg(struct fs_vtree *vt, const struct fs_seg *s, struct tstat *ts,
		     uint64_t *counts)
{
	struct tfs_cursor *c;
	struct tfs_event ev;
	int rc;

	rc = tfs_trace_term_counts(vt->trace, s->stream, counts);
	if (rc < 0)
		return rc;
	if (counts_suffice(vt, s, counts, false)) {
		for (uint32_t t = 0; t < vt->ti.n_terminals; t++) {
			ts[t].count += counts[t];
			ts[t].bytes =
			    fs_sat_add(ts[t].bytes, sat_mul(counts[t], vt->terms[t].sig_bytes));
		}
		return 0;
	}
	rc = tfs_cursor_new(vt->trace, s->stream, TFS_VIEW_TEXT, s->first, s->n_events, &c);
	for (uint64_t i = 0; i < s->n_events && rc == 0; i++) {
		rc = tfs_cursor_event(c, s->first + i, &ev, NULL);
		if (rc < 0)
			break;
		ts[ev.terminal].count++;
		ts[ev.terminal].total_ns = fs_sat_add(ts[ev.terminal].total_ns, ev.dur_ns);
		ts[ev.terminal].timed |= ev.dur_ns > 0;
		ts[ev.terminal].bytes = fs_sat_add(ts[ev.terminal].bytes, fs_event_bytes(vt, &ev));
	}
	tfs_cursor_free(c);
	return rc;
}

static void add_stat(struct tstat *to, const struct tstat *from)
{
	to->count += from->count;
	to->total_ns = fs_sat_add(to->total_ns, from->total_ns);
	to->bytes = fs_sat_add(to->bytes, from->bytes);
	to->timed |= from->timed;
}

static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	int c;

	if (x->st.total_ns != y->st.total_ns)
		return x->st.total_ns > y->st.total_ns ? -1 : 1;
	c = strcmp(x->what, y->what);
	return c ? c : strcmp(x->name, y->name);
}

static int cmp_row_name(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	int c = strcmp(x->what, y->what);

	return c ? c : strcmp(x->name, y->name);
}

/*
 * Rows per kind and per (zone kind, name): one per kind and zone terminal, then rows of the
 * same name (terminals differing in other arguments) folded into one.
 */
static int make_rows(const struct fs_vtree *vt, const struct tstat *ts, struct row *rows,
		     uint32_t *n_rows)
{
	uint32_t n = vt->ti.n_kinds, m = 0;

	for (uint32_t k = 0; k < vt->ti.n_kinds; k++)
		rows[k] = (struct row){.what = "kind", .name = strdup(vt->kinds[k].name)};
	for (uint32_t t = 0; t < vt->ti.n_terminals; t++) {
		const char *zone = vt->terms[t].zone, *kind = vt->kinds[vt->terms[t].kind].name;

		add_stat(&rows[vt->terms[t].kind].st, &ts[t]);
		if (!zone || ts[t].count == 0)
			continue;
		rows[n] = (struct row){.what = "zone", .st = ts[t]};
		if (asprintf(&rows[n].name, "%s %s", kind, zone) < 0)
			rows[n].name = NULL;
		n++;
	}
	*n_rows = n;
	for (uint32_t i = 0; i < n; i++) {
		if (!rows[i].name)
			return -ENOMEM;
	}
	if (n > 1)
		qsort(rows, n, sizeof(*rows), cmp_row_name);
	for (uint32_t i = 0; i < n; i++) {
		if (m > 0 && cmp_row_name(&rows[m - 1], &rows[i]) == 0) {
			add_stat(&rows[m - 1].st, &rows[i].st);
			free(rows[i].name);
		} else {
			rows[m++] = rows[i];
		}
	}
	*n_rows = m;
	return 0;
}

static const char *timing_name(int timing)
{
	return timing == TFS_TIMING_NONE ? "none" : timing == TFS_TIMING_LOSSY ? "lossy" : "lossless";
}

/*
 * A line per sampling rule of allocation backtraces (metadata `backtrace_sampling`, or
 * `backtrace_sampling.rank<R>` where ranks differ): counts and bytes stay exact, backtraces
 * do not.
 */
static void print_sampling(const struct fs_vtree *vt, struct fs_sbuf *b)
{
	static const char key[] = "backtrace_sampling";
	const char *k, *v;

	for (uint32_t i = 0; tfs_trace_meta_at(vt->trace, i, &k, &v) == 0; i++) {
		if (strncmp(k, key, sizeof(key) - 1) || (k[sizeof(key) - 1] &&
							 strncmp(k + sizeof(key) - 1, ".rank", 5)))
			continue;
		if (strcmp(v, "all"))
			fs_sb_printf(b, "# allocation backtraces sampled%s%s: %s; the other "
					"allocations have stack -1\n",
				     k[sizeof(key) - 1] ? " from rank " : "",
				     k[sizeof(key) - 1] ? k + sizeof(key) - 1 + 5 : "", v);
	}
}

static int print_summary(const struct fs_vtree *vt, const struct fs_scope *sc, struct row *rows,
			 uint32_t n_rows, char **out, size_t *len)
{
	struct fs_sbuf b = {0};

	if (n_rows > 1)
		qsort(rows, n_rows, sizeof(*rows), cmp_row);
	fs_sb_printf(&b, "# summary of ");
	fs_sb_name(&b, sc->label, NULL);
	fs_sb_printf(&b, ": %" PRIu64 " events, timing %s\n", sc->n_events,
		     timing_name(vt->ti.timing));
	print_sampling(vt, &b);
	fs_sb_printf(&b, "# per event kind and per zone name, largest total duration first;\n"
			 "# durations in ns (mean rounded down; - when no event of the row has one),"
			 " bytes: sum of the arguments that count bytes\n");
	fs_sb_printf(&b, "#%-4s %14s %18s %14s %18s  %s\n", "what", "count", "total_ns",
		     "mean_ns", "bytes", "name");
	for (uint32_t i = 0; i < n_rows; i++) {
		const struct tstat *st = &rows[i].st;

		if (st->count == 0)
			continue;
		if (st->timed)
			fs_sb_printf(&b, "%-5s %14" PRIu64 " %18" PRIu64 " %14" PRIu64, rows[i].what,
				     st->count, st->total_ns, st->total_ns / st->count);
		else
			fs_sb_printf(&b, "%-5s %14" PRIu64 " %18s %14s", rows[i].what, st->count, "-",
				     "-");
		fs_sb_printf(&b, " %18" PRIu64 "  %s\n", st->bytes, rows[i].name);
	}
	return fs_sb_detach(&b, out, len);
}

int fs_summary_new(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank, char **out,
		   size_t *len)
{
	uint32_t n_terms = vt->ti.n_terminals, n_rows = 0;
	struct tstat *ts = NULL;
	uint64_t *counts = NULL;
	struct row *rows = NULL;
	int rc;

	rc = fs_terms_ready(vt);
	if (rc < 0)
		return rc;
	ts = calloc(n_terms + 1, sizeof(*ts));
	counts = calloc(n_terms + 1, sizeof(*counts));
	rows = calloc((size_t)vt->ti.n_kinds + n_terms + 1, sizeof(*rows));
	if (!ts || !counts || !rows) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (uint32_t i = 0; i < sc->n_segs && rc == 0; i++)
		rc = count_seg(vt, &sc->segs[i], ts, counts);
	if (rc == 0)
		rc = make_rows(vt, ts, rows, &n_rows);
	if (rc == 0)
		rc = print_summary(vt, sc, rows, n_rows, out, len);
out_free:
	for (uint32_t i = 0; i < n_rows; i++)
		free(rows[i].name);
	free(rows);
	free(counts);
	free(ts);
	return rc;
}

/* ---- stacks.folded ---- */

/* Folded stacks and their bytes: an open-addressing hash table of owned strings. */
struct stackmap {
	char **keys;
	uint64_t *bytes;
	size_t n, cap; /* cap: a power of two */
};

static uint64_t hash_str(const char *s, size_t len)
{
	uint64_t h = UINT64_C(14695981039346656037);

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * UINT64_C(1099511628211);
	return h;
}

static int map_grow(struct stackmap *m)
{
	size_t cap = m->cap ? 2 * m->cap : 64;
	char **keys = calloc(cap, sizeof(*keys));
	uint64_t *bytes = calloc(cap, sizeof(*bytes));

	if (!keys || !bytes) {
		free(keys);
		free(bytes);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		size_t j;

		if (!m->keys[i])
			continue;
		j = hash_str(m->keys[i], strlen(m->keys[i])) & (cap - 1);
		while (keys[j])
			j = (j + 1) & (cap - 1);
		keys[j] = m->keys[i];
		bytes[j] = m->bytes[i];
	}
	free(m->keys);
	free(m->bytes);
	m->keys = keys;
	m->bytes = bytes;
	m->cap = cap;
	return 0;
}

static int map_add(struct stackmap *m, const char *key, size_t len, uint64_t bytes)
{
	size_t i;

	if (2 * (m->n + 1) > m->cap && map_grow(m) < 0)
		return -ENOMEM;
	i = hash_str(key, len) & (m->cap - 1);
	while (m->keys[i] && (strncmp(m->keys[i], key, len) || m->keys[i][len]))
		i = (i + 1) & (m->cap - 1);
	if (!m->keys[i]) {
		m->keys[i] = strndup(key, len);
		if (!m->keys[i])
			return -ENOMEM;
		m->n++;
	}
	m->bytes[i] = fs_sat_add(m->bytes[i], bytes);
	return 0;
}

static void map_fini(struct stackmap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->keys[i]);
	free(m->keys);
	free(m->bytes);
}

/*
 * An allocation's stack is the zones of its thread whose extent holds the allocation's:
 * zone start <= allocation start < zone end and allocation end <= zone end (FORMAT.md §3.1
 * lets a stream list its events in any order). A sweep over the whole stream finds them with
 * memory bounded by the nesting depth (and the most allocations sharing one time) when the
 * stream's zones and allocations are in start order (non-decreasing start: a zone that
 * holds an allocation comes before it or shares its start) or, sweeping from the end, in
 * end order (non-decreasing end, as the capture records: the zone comes after it or shares
 * its end). Each sweep checks its order and gives up at the first event out of it; a
 * stream in neither order is then sorted by start time in memory.
 */

/*
 * A zone, or an allocation (term UINT32_MAX), as the sweep sees it; when counting events
 * (a rank with backtraces), any event is an allocation of 1 byte at its backtrace @stack.
 */
struct sitem {
	uint64_t start_ns, end_ns, index, bytes, stack;
	uint32_t term;
};

#define ALLOC_TERM UINT32_MAX

static int cmp_zone(const void *a, const void *b)
{
	const struct sitem *x = a, *y = b;

	if (x->start_ns != y->start_ns)
		return x->start_ns < y->start_ns ? -1 : 1;
	if (x->end_ns != y->end_ns)
		return x->end_ns > y->end_ns ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/* A frame: the zone name as the text view prints it, without quotes, ';' as \x3b. */
static void put_frame(struct fs_sbuf *b, const char *quoted)
{
	size_t len = strlen(quoted);

	fs_sb_put(b, ";", 1);
	for (size_t i = 1; i + 1 < len; i++) {
		if (quoted[i] == ';')
			fs_sb_put(b, "\\x3b", 4);
		else
			fs_sb_put(b, &quoted[i], 1);
	}
}

/*
 * Counting, the stack id of an event between the root and its zones, as "\x1f<id>\x1f"
 * (nothing between the marks: no stack argument); fold_keys() puts the frames there.
 */
static void put_stack_mark(struct fs_sbuf *b, uint64_t stack)
{
	if (stack == FS_NO_STACK)
		fs_sb_put(b, "\x1f\x1f", 2);
	else
		fs_sb_printf(b, "\x1f%" PRIu64 "\x1f", stack);
}

struct ivec {
	struct sitem *v;
	size_t n, cap;
};

static int ivec_push(struct ivec *a, const struct sitem *it)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 16;
		struct sitem *v = realloc(a->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = *it;
	return 0;
}

struct stack_walk {
	struct fs_vtree *vt;
	struct stackmap *m; /* the stacks of the segment being swept */
	struct ivec open;   /* zones that may hold allocations still to come */
	struct ivec group;  /* the allocations of the current group (same sort time) */
	struct ivec active; /* scratch: the zones of one allocation */
	struct ivec all;    /* a stream in neither order: its zones and allocations */
	struct fs_sbuf key;
	size_t root_len;
	const uint64_t *stack_of; /* counting: each terminal's stack id (fs_term_stack) */
	bool counting;		  /* every event counts 1 at its backtrace: the rank has some */
	bool reverse; /* sweeping from the stream's end (end order) */
	bool in_group;
	uint64_t group_ns; /* the group's sort time: start (forward) or end (reverse) */
};

static uint64_t sort_ns(const struct stack_walk *w, const struct sitem *it)
{
	return w->reverse ? it->end_ns : it->start_ns;
}

/* Add the bytes of each allocation of the group to its stack. */
static int flush_group(struct stack_walk *w)
{
	int rc = 0;

	for (size_t g = 0; g < w->group.n && rc == 0; g++) {
		const struct sitem *a = &w->group.v[g];

		w->active.n = 0;
		for (size_t i = 0; i < w->open.n && rc == 0; i++) {
			const struct sitem *z = &w->open.v[i];

			if (z->start_ns <= a->start_ns && a->start_ns < z->end_ns &&
			    a->end_ns <= z->end_ns)
				rc = ivec_push(&w->active, z);
		}
		if (rc < 0)
			return rc;
		if (w->active.n > 1)
			qsort(w->active.v, w->active.n, sizeof(*w->active.v), cmp_zone);
		w->key.len = w->root_len;
		if (w->counting)
			put_stack_mark(&w->key, a->stack);
		for (size_t i = 0; i < w->active.n; i++)
			put_frame(&w->key, w->vt->terms[w->active.v[i].term].zone);
		if (w->key.failed)
			return -ENOMEM;
		rc = map_add(w->m, w->key.data, w->key.len, a->bytes);
	}
	w->group.n = 0;
	return rc;
}

/* Forget the zones that can hold no allocation of sort time @ns or beyond. */
static void drop_done(struct stack_walk *w, uint64_t ns)
{
	size_t n = 0;

	for (size_t i = 0; i < w->open.n; i++) {
		const struct sitem *z = &w->open.v[i];

		if (w->reverse ? z->start_ns <= ns : z->end_ns > ns)
			w->open.v[n++] = *z;
	}
	w->open.n = n;
}

/*
 * Take the next item of the sweep (@counted: an allocation whose bytes count).
 * @return 0, or 1 when the items are out of the sweep's order
 */
static int sweep_item(struct stack_walk *w, const struct sitem *it, bool counted)
{
	uint64_t ns = sort_ns(w, it);
	struct sitem *last;
	int rc;

	if (!w->in_group || ns != w->group_ns) {
		if (w->in_group && (w->reverse ? ns > w->group_ns : ns < w->group_ns))
			return 1;
		rc = flush_group(w);
		if (rc < 0)
			return rc;
		w->in_group = true;
		w->group_ns = ns;
		drop_done(w, ns);
	}
	if (it->term != ALLOC_TERM) /* a zone without extent holds nothing */
		return it->end_ns > it->start_ns ? ivec_push(&w->open, it) : 0;
	if (!counted)
		return 0;
	last = w->group.n > 0 ? &w->group.v[w->group.n - 1] : NULL;
	if (last && last->start_ns == it->start_ns && last->end_ns == it->end_ns &&
	    last->stack == it->stack) {
		last->bytes = fs_sat_add(last->bytes, it->bytes); /* same stack: one entry */
		return 0;
	}
	return ivec_push(&w->group, it);
}

static void sweep_start(struct stack_walk *w, bool reverse)
{
	w->reverse = reverse;
	w->in_group = false;
	w->open.n = 0;
	w->group.n = 0;
}

/*
 * The event as sweep items: @it for a zone or an allocation, and when counting, @cnt for
 * every event (a zone too: it counts once, inside itself). @return how many: 0, 1 or 2
 */
static int event_item(const struct stack_walk *w, const struct tfs_event *ev, struct sitem *it,
		      struct sitem *cnt)
{
	const struct fs_kind *k = &w->vt->kinds[ev->kind];
	struct sitem one = {.start_ns = ev->ts_ns,
			    .end_ns = fs_sat_add(ev->ts_ns, ev->dur_ns),
			    .index = ev->index,
			    .term = ALLOC_TERM};

	if (w->counting) {
		*cnt = one;
		cnt->bytes = 1;
		cnt->stack = w->stack_of[ev->terminal];
		if (!k->is_zone)
			return 1;
		*it = one;
		it->term = ev->terminal;
		return 2;
	}
	if (!k->is_alloc && !k->is_zone)
		return 0;
	*it = one;
	if (k->is_zone)
		it->term = ev->terminal;
	else
		it->bytes = fs_event_bytes(w->vt, ev);
	return 1;
}

/*
 * Sweep segment @s's whole stream from its start (or from its end, @reverse): a zone
 * anywhere may hold the segment's allocations, and the order is checked everywhere.
 * @return 0, 1 (out of order) or -errno
 */
static int sweep_stream(struct stack_walk *w, struct tfs_cursor *c, const struct fs_seg *s,
			uint64_t n, bool reverse)
{
	uint64_t end = s->first + s->n_events;
	struct tfs_event ev;
	struct sitem it, cnt;
	int rc = 0;

	sweep_start(w, reverse);
	for (uint64_t k = 0; k < n && rc == 0; k++) {
		uint64_t i = reverse ? n - 1 - k : k;
		bool counted = i >= s->first && i < end;
		int got;

		rc = tfs_cursor_event(c, i, &ev, NULL);
		got = rc < 0 ? 0 : event_item(w, &ev, &it, &cnt);
		/* a zone comes before what it holds that shares its sort time */
		if (got == 2 || (got == 1 && !w->counting))
			rc = sweep_item(w, &it, counted);
		if (rc == 0 && got >= 1 && w->counting)
			rc = sweep_item(w, &cnt, counted);
	}
	return rc == 0 ? flush_group(w) : rc;
}

static int cmp_start(const void *a, const void *b)
{
	const struct sitem *x = a, *y = b;

	if (x->start_ns != y->start_ns)
		return x->start_ns < y->start_ns ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/* A stream in neither order: its zones and counted allocations sorted, then swept. */
static int sweep_sorted(struct stack_walk *w, struct tfs_cursor *c, const struct fs_seg *s,
			uint64_t n)
{
	struct tfs_event ev;
	struct sitem it, cnt;
	int rc = 0;

	w->all.n = 0;
	for (uint64_t i = 0; i < n && rc == 0; i++) {
		bool counted = i >= s->first && i < s->first + s->n_events;
		int got;

		rc = tfs_cursor_event(c, i, &ev, NULL);
		got = rc < 0 ? 0 : event_item(w, &ev, &it, &cnt);
		if (got == 2 || (got == 1 && !w->counting)) {
			if (it.term != ALLOC_TERM || counted)
				rc = ivec_push(&w->all, &it);
		}
		if (rc == 0 && got >= 1 && w->counting && counted)
			rc = ivec_push(&w->all, &cnt);
	}
	if (rc < 0)
		return rc;
	qsort(w->all.v, w->all.n, sizeof(*w->all.v), cmp_start);
	sweep_start(w, false);
	for (size_t i = 0; i < w->all.n && rc == 0; i++)
		rc = sweep_item(w, &w->all.v[i], true);
	assert(rc <= 0);
	return rc == 0 ? flush_group(w) : rc;
}

/* Untimed: zones have no extent, every allocation of the segment is at the root. */
static int root_bytes(struct stack_walk *w, const struct fs_seg *s, struct stackmap *total)
{
	struct tfs_cursor *c;
	struct tfs_event ev;
	struct sitem it;
	uint64_t bytes = 0;
	int rc;

	rc = tfs_cursor_new(w->vt->trace, s->stream, TFS_VIEW_TEXT, s->first, s->n_events, &c);
	for (uint64_t i = s->first; i < s->first + s->n_events && rc == 0; i++) {
		rc = tfs_cursor_event(c, i, &ev, NULL);
		if (rc == 0 && event_item(w, &ev, &it, NULL) && it.term == ALLOC_TERM)
			bytes = fs_sat_add(bytes, it.bytes);
	}
	tfs_cursor_free(c);
	return rc < 0 ? rc : map_add(total, w->key.data, w->key.len, bytes);
}

/* Untimed, counting: each event of the segment at the root, on its backtrace. */
static int root_counts(struct stack_walk *w, const struct fs_seg *s, const uint64_t *counts,
		       struct stackmap *total)
{
	const struct fs_vtree *vt = w->vt;
	struct tfs_stream_info si;
	struct tfs_cursor *c;
	struct tfs_event ev;
	int rc = tfs_trace_stream(vt->trace, s->stream, &si);

	if (rc < 0)
		return rc;
	if (s->first == 0 && si.n_events == s->n_events) { /* the grammar's counts suffice */
		for (uint32_t t = 0; t < vt->ti.n_terminals && rc == 0; t++) {
			if (!counts[t])
				continue;
			w->key.len = w->root_len;
			put_stack_mark(&w->key, w->stack_of[t]);
			rc = w->key.failed ? -ENOMEM
					   : map_add(total, w->key.data, w->key.len, counts[t]);
		}
		return rc;
	}
	rc = tfs_cursor_new(vt->trace, s->stream, TFS_VIEW_TEXT, s->first, s->n_events, &c);
	for (uint64_t i = s->first; i < s->first + s->n_events && rc == 0; i++) {
		rc = tfs_cursor_event(c, i, &ev, NULL);
		if (rc < 0)
			break;
		w->key.len = w->root_len;
		put_stack_mark(&w->key, w->stack_of[ev.terminal]);
		rc = w->key.failed ? -ENOMEM : map_add(total, w->key.data, w->key.len, 1);
	}
	tfs_cursor_free(c);
	return rc;
}

/* Allocations of one segment, in the zones of its thread's whole stream. */
static int stack_seg(struct stack_walk *w, const struct fs_seg *s, uint64_t *counts,
		     struct stackmap *total)
{
	struct fs_vtree *vt = w->vt;
	struct tfs_stream_info si;
	struct tfs_cursor *c;
	uint64_t bytes = 0;
	int rc;

	w->counting = tfs_trace_n_backtraces(vt->trace, s->rank) > 0;
	w->key.len = 0;
	fs_sb_printf(&w->key, "rank %" PRIu32 ";thread %" PRIu32, s->rank, s->thread);
	if (w->key.failed)
		return -ENOMEM;
	w->root_len = w->key.len;
	rc = tfs_trace_term_counts(vt->trace, s->stream, counts);
	if (rc < 0)
		return rc;
	if (w->counting && vt->ti.timing == TFS_TIMING_NONE)
		return root_counts(w, s, counts, total);
	if (!w->counting && counts_suffice(vt, s, counts, true)) {
		/* untimed: zones have no extent, every allocation is at the root */
		for (uint32_t t = 0; t < vt->ti.n_terminals; t++) {
			if (vt->kinds[vt->terms[t].kind].is_alloc)
				bytes = fs_sat_add(bytes,
						   sat_mul(counts[t], vt->terms[t].sig_bytes));
		}
		return map_add(total, w->key.data, w->key.len, bytes);
	}
	if (vt->ti.timing == TFS_TIMING_NONE)
		return root_bytes(w, s, total);
	rc = tfs_trace_stream(vt->trace, s->stream, &si);
	if (rc < 0)
		return rc;
	rc = tfs_cursor_new(vt->trace, s->stream, TFS_VIEW_TEXT, 0, si.n_events, &c);
	if (rc < 0)
		return rc;
	/* a sweep that finds disorder half-way leaves only its own map to throw away */
	for (int how = 0; how < 3; how++) {
		map_fini(w->m);
		memset(w->m, 0, sizeof(*w->m));
		if (how < 2)
			rc = sweep_stream(w, c, s, si.n_events, how == 1);
		else
			rc = sweep_sorted(w, c, s, si.n_events);
		if (rc != 1)
			break;
	}
	tfs_cursor_free(c);
	for (size_t i = 0; i < w->m->cap && rc == 0; i++) {
		if (w->m->keys[i])
			rc = map_add(total, w->m->keys[i], strlen(w->m->keys[i]), w->m->bytes[i]);
	}
	return rc;
}

/*
 * The stacks of @m with their stack marks (put_stack_mark) replaced by the backtraces'
 * frames, into @out: "rank <r>;thread <t>;<frames>;<zones>", equal results summed.
 */
static int fold_keys(struct fs_vtree *vt, const struct stackmap *m, struct stackmap *out)
{
	struct fs_sbuf key = {0};
	int rc = 0;

	for (size_t i = 0; i < m->cap && rc == 0; i++) {
		const char *k = m->keys[i], *mark, *id_end;
		uint32_t rank = 0;

		if (!k)
			continue;
		mark = strchr(k, '\x1f');
		if (!mark) {
			rc = map_add(out, k, strlen(k), m->bytes[i]);
			continue;
		}
		id_end = strchr(mark + 1, '\x1f');
		assert(id_end);
		sscanf(k, "rank %" SCNu32, &rank);
		key.len = 0;
		fs_sb_put(&key, k, (size_t)(mark - k));
		if (id_end > mark + 1) {
			fs_sb_put(&key, ";", 1);
			rc = fs_fold_stack(vt, rank, strtoull(mark + 1, NULL, 10), &key);
		}
		fs_sb_put(&key, id_end + 1, strlen(id_end + 1));
		if (rc == 0 && key.failed)
			rc = -ENOMEM;
		if (rc == 0)
			rc = map_add(out, key.data, key.len, m->bytes[i]);
	}
	free(key.data);
	return rc;
}

struct stack_total {
	const char *key; /* borrowed from the map */
	uint64_t bytes;
};

static int cmp_total(const void *a, const void *b)
{
	return strcmp(((const struct stack_total *)a)->key, ((const struct stack_total *)b)->key);
}

/* One line per stack with bytes, sorted by the stack's bytes (strcmp). */
static int print_stacks(const struct stackmap *m, char **out, size_t *len)
{
	struct fs_sbuf b = {0};
	struct stack_total *tot = malloc((m->n + 1) * sizeof(*tot));
	size_t n = 0;

	if (!tot)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		if (m->keys[i] && m->bytes[i])
			tot[n++] = (struct stack_total){m->keys[i], m->bytes[i]};
	}
	if (n > 1)
		qsort(tot, n, sizeof(*tot), cmp_total);
	for (size_t i = 0; i < n; i++)
		fs_sb_printf(&b, "%s %" PRIu64 "\n", tot[i].key, tot[i].bytes);
	free(tot);
	return fs_sb_detach(&b, out, len);
}

int fs_stacks_new(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank, char **out,
		  size_t *len)
{
	struct stackmap m = {0}, seg_m = {0}, folded = {0};
	struct stack_walk w = {.vt = vt, .m = &seg_m};
	uint64_t *counts, *stack_of;
	int rc;

	rc = fs_terms_ready(vt);
	if (rc < 0)
		return rc;
	counts = calloc((size_t)vt->ti.n_terminals + 1, sizeof(*counts));
	stack_of = calloc((size_t)vt->ti.n_terminals + 1, sizeof(*stack_of));
	if (!counts || !stack_of) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (uint32_t t = 0; t < vt->ti.n_terminals; t++)
		stack_of[t] = fs_term_stack(vt, t);
	w.stack_of = stack_of;
	for (uint32_t i = 0; i < sc->n_segs && rc == 0; i++)
		rc = stack_seg(&w, &sc->segs[i], counts, &m);
	if (rc == 0)
		rc = fold_keys(vt, &m, &folded);
	if (rc == 0)
		rc = print_stacks(&folded, out, len);
out_free:
	free(stack_of);
	free(counts);
	map_fini(&folded);
	free(w.open.v);
	free(w.group.v);
	free(w.active.v);
	free(w.all.v);
	free(w.key.data);
	map_fini(&seg_m);
	map_fini(&m);
	return rc;
}
