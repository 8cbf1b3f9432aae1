/*
 * What trace.json draws besides the events' own lines, in its tail: flows ("s" and "f")
 * from each MPI send to the receive it matched, across ranks, and from each pthread_create
 * to the first event of the thread it made; and each rank's live heap bytes as a "C"
 * counter; and a mark for each rank's dropped events that no mark of its threads places.
 * Messages are matched as MPI matches them: per (communicator, source, destination,
 * tag) in the order they were sent and the receives posted (non-overtaking); a receive with
 * a wildcard source or tag is matched through its status when the trace has one, else left
 * out. A flow ends at the call that completed the receive (MPI_Wait*, or the receive
 * itself). At most FLOW_MAX flows per file, so that a tail stays small; the metadata says
 * how many were left out. One pass over the streams that hold MPI or thread calls.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vpict_i.h"

#define FLOW_MAX 100000	/* flows per file */
#define MAX_PENDING 4096	/* receives waiting for their completion, per stream */

/* Where an event is: its line's thread and a time inside it. */
struct at {
	uint32_t rank, thread, stream;
	uint64_t index, ts_ns; /* ts_ns: inside the event (its middle) */
};

/* One end of a message: its channel, the order in it, where it is drawn. */
struct msg_end {
	int64_t comm, src, dst, tag;
	uint64_t order_ns;	/* sends by time sent, receives by time posted */
	uint64_t ordinal;	/* in its channel, after sorting */
	struct at at;
};

struct ends {
	struct msg_end *v;
	size_t n, cap;
	uint64_t dropped;
};

/* What a kind is to the matcher, and where its arguments are (-1: none). */
enum mrole { M_NONE, M_SEND, M_RECV, M_IRECV, M_SENDRECV, M_WAIT, M_WAITALL, M_CREATE };

struct mkind {
	uint8_t role;
	int8_t dest, source, tag, rtag, comm, request, requests, st_source, st_tag, thread;
};

struct pending {
	uint64_t request;
	size_t recv; /* index in the receives */
};

struct flows {
	struct fs_vtree *vt;
	const struct fs_scope *sc;
	struct mkind *kinds;
	struct ends sends, recvs;
	struct pending *pend;
	size_t n_pend;
	uint64_t n_flows, left_out, next_id;
	struct fs_sbuf *b;
	bool *first;
};

static int8_t arg_named(const struct fs_kind *k, const char *name)
{
	for (uint32_t i = 0; i < k->n_args; i++) {
		if (!strcmp(k->args[i].name, name))
			return (int8_t)i;
	}
	return -1;
}

static bool name_is(const char *name, const char *const *set)
{
	if (!strncmp(name, "MPI_", 4))
		name += 4;
	for (; *set; set++) {
		if (!strcasecmp(name, *set))
			return true;
	}
	return false;
}

static void mkind_fill(const struct fs_kind *k, struct mkind *m)
{
	static const char *const sends[] = {"Send", "Bsend", "Ssend", "Rsend", "Isend", "Ibsend",
					    "Issend", "Irsend", NULL};
	static const char *const recvs[] = {"Recv", NULL};
	static const char *const sendrecvs[] = {"Sendrecv", "Sendrecv_replace", NULL};

	memset(m, 0xff, sizeof(*m));
	m->role = M_NONE;
	if (!strcmp(k->category, "threads") && !strcmp(k->name, "pthread_create")) {
		m->thread = arg_named(k, "thread");
		m->role = m->thread >= 0 ? M_CREATE : M_NONE;
		return;
	}
	if (strcmp(k->category, "mpi"))
		return;
	m->dest = arg_named(k, "dest");
	m->source = arg_named(k, "source");
	if (m->source < 0)
		m->source = arg_named(k, "src");
	m->tag = arg_named(k, "tag");
	m->comm = arg_named(k, "comm");
	m->request = arg_named(k, "request");
	m->requests = arg_named(k, "array_of_requests");
	m->st_source = arg_named(k, "status.source");
	m->st_tag = arg_named(k, "status.tag");
	if (name_is(k->name, sendrecvs)) {
		m->tag = arg_named(k, "sendtag");
		m->rtag = arg_named(k, "recvtag");
		m->role = m->dest >= 0 && m->source >= 0 ? M_SENDRECV : M_NONE;
	} else if (name_is(k->name, sends) && m->dest >= 0) {
		m->role = M_SEND;
	} else if (name_is(k->name, recvs) && m->source >= 0) {
		m->role = M_RECV;
	} else if (!strcasecmp(k->name, "MPI_Irecv") && m->source >= 0) {
		m->role = M_IRECV;
	} else if (!strcasecmp(k->name, "MPI_Wait") && m->request >= 0) {
		m->role = M_WAIT;
	} else if (!strcasecmp(k->name, "MPI_Waitall") && m->requests >= 0) {
		m->role = M_WAITALL;
	}
}

static int64_t arg_i(const struct tfs_event *ev, int8_t i, int64_t none)
{
	return i >= 0 && (uint32_t)i < ev->n_args ? ev->args[i].i : none;
}

static int push_end(struct ends *e, const struct msg_end *m)
{
	if (e->n >= FLOW_MAX) {
		e->dropped++;
		return 0;
	}
	if (e->n == e->cap) {
		size_t cap = e->cap ? 2 * e->cap : 256;
		struct msg_end *v = realloc(e->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		e->v = v;
		e->cap = cap;
	}
	e->v[e->n++] = *m;
	return 0;
}

/* A receive's matching source and tag: as posted, or through its status for a wildcard. */
static bool resolve(int64_t *src, int64_t *tag, int64_t st_src, int64_t st_tag)
{
	if (*src < 0)
		*src = st_src;
	if (*tag < 0)
		*tag = st_tag;
	return *src >= 0 && *tag >= 0;
}

static void at_of(struct at *a, const struct fs_seg *s, const struct tfs_event *ev)
{
	a->rank = s->rank;
	a->thread = s->thread;
	a->stream = s->stream;
	a->index = ev->index;
	a->ts_ns = ev->ts_ns + ev->dur_ns / 2;
}

static int add_pending(struct flows *f, uint64_t request, size_t recv)
{
	if (f->n_pend == MAX_PENDING) {
		memmove(f->pend, f->pend + 1, (MAX_PENDING - 1) * sizeof(*f->pend));
		f->n_pend--;
	}
	f->pend[f->n_pend++] = (struct pending){request, recv};
	return 0;
}

/* A completion of @request at @a: the receive it completes ends its flow there. */
static void complete(struct flows *f, uint64_t request, const struct at *a)
{
	for (size_t i = f->n_pend; i-- > 0;) {
		if (f->pend[i].request != request)
			continue;
		f->recvs.v[f->pend[i].recv].at = *a;
		memmove(f->pend + i, f->pend + i + 1, (f->n_pend - i - 1) * sizeof(*f->pend));
		f->n_pend--;
		return;
	}
}

/* "req#12,req#40": every request id of a Waitall. */
static void complete_all(struct flows *f, const char *list, const struct at *a)
{
	while (list && *list) {
		const char *hash = strchr(list, '#');
		char *end;
		uint64_t id;

		if (!hash)
			return;
		id = strtoull(hash + 1, &end, 10);
		if (end != hash + 1)
			complete(f, id, a);
		list = strchr(end, ',');
		if (list)
			list++;
	}
}

/* A thread's first event, for the flow from the call that made it. */
static int thread_start(struct flows *f, uint32_t rank, uint64_t thread, struct at *a)
{
	struct tfs_cursor *c;
	struct tfs_event ev;
	uint32_t stream;
	int rc;

	if (thread > UINT32_MAX || tfs_trace_find_stream(f->vt->trace, rank, (uint32_t)thread,
							 &stream) < 0)
		return -ENOENT;
	for (uint32_t i = 0; i < f->sc->n_segs; i++) {
		const struct fs_seg *s = &f->sc->segs[i];

		if (s->stream != stream || s->first != 0 || s->n_events == 0)
			continue;
		rc = tfs_cursor_new(f->vt->trace, stream, TFS_VIEW_TEXT, 0, 1, &c);
		if (rc == 0)
			rc = tfs_cursor_event(c, 0, &ev, NULL);
		if (rc == 0)
			at_of(a, s, &ev);
		tfs_cursor_free(c);
		return rc;
	}
	return -ENOENT;
}

static void put_flow(struct flows *f, const struct at *from, const struct at *to,
		     const char *name, const char *cat)
{
	struct fs_sbuf *b = f->b;
	bool untimed = fs_untimed(f->vt);
	uint64_t ts[2] = {from->ts_ns, to->ts_ns};
	const struct at *ends[2] = {from, to};

	if (f->n_flows >= FLOW_MAX) {
		f->left_out++;
		return;
	}
	f->n_flows++;
	f->next_id++;
	for (int i = 0; i < 2; i++) {
		/* untimed: the event's own microsecond (FORMAT.md §9), its middle */
		uint64_t ns = untimed ? ends[i]->index * 1000 + 500 : ts[i];

		if (!*f->first)
			fs_sb_put(b, ",\n", 2);
		*f->first = false;
		fs_sb_printf(b, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"%s\",%s\"id\":%" PRIu64
			     ",\"ts\":%" PRIu64 ".%03" PRIu64 ",\"pid\":%" PRIu32 ",\"tid\":%" PRIu32
			     "}", name, cat, i ? "f" : "s", i ? "\"bp\":\"e\"," : "", f->next_id,
			     ns / 1000, ns % 1000, ends[i]->rank, ends[i]->thread);
	}
}

static int scan_event(struct flows *f, const struct fs_seg *s, const struct tfs_event *ev)
{
	const struct mkind *m = &f->kinds[ev->kind];
	struct msg_end e = {.comm = arg_i(ev, m->comm, 0)};
	struct at a, to;
	int rc = 0;

	at_of(&a, s, ev);
	e.at = a;
	e.order_ns = fs_untimed(f->vt) ? ev->index : ev->ts_ns;
	if (m->role == M_SEND || m->role == M_SENDRECV) {
		e.src = s->rank;
		e.dst = arg_i(ev, m->dest, -1);
		e.tag = arg_i(ev, m->tag, 0);
		if (e.dst >= 0 && e.tag >= 0)
			rc = push_end(&f->sends, &e);
	}
	if (rc == 0 && (m->role == M_RECV || m->role == M_SENDRECV || m->role == M_IRECV)) {
		e.dst = s->rank;
		e.src = arg_i(ev, m->source, -1);
		e.tag = arg_i(ev, m->role == M_SENDRECV ? m->rtag : m->tag, 0);
		if (resolve(&e.src, &e.tag, arg_i(ev, m->st_source, -1), arg_i(ev, m->st_tag, -1))) {
			rc = push_end(&f->recvs, &e);
			if (rc == 0 && m->role == M_IRECV && m->request >= 0 && f->recvs.n &&
			    f->recvs.v[f->recvs.n - 1].at.index == ev->index)
				rc = add_pending(f, ev->args[m->request].u, f->recvs.n - 1);
		}
	}
	if (m->role == M_WAIT)
		complete(f, ev->args[m->request].u, &a);
	if (m->role == M_WAITALL)
		complete_all(f, ev->args[m->requests].s, &a);
	if (m->role == M_CREATE && thread_start(f, s->rank, ev->args[m->thread].u, &to) == 0)
		put_flow(f, &a, &to, "thread start", "threads");
	return rc;
}

/* Whether @s's stream holds any kind the matcher reads (from the grammar alone). */
static int seg_wanted(struct flows *f, const struct fs_seg *s, uint64_t *counts, bool *yes)
{
	int rc = tfs_trace_term_counts(f->vt->trace, s->stream, counts);

	*yes = false;
	for (uint32_t t = 0; rc == 0 && t < f->vt->ti.n_terminals && !*yes; t++) {
		uint32_t kind;

		if (counts[t] && tfs_trace_term_kind(f->vt->trace, t, &kind) == 0 &&
		    kind < f->vt->ti.n_kinds && f->kinds[kind].role != M_NONE)
			*yes = true;
	}
	return rc;
}

static int scan_seg(struct flows *f, const struct fs_seg *s)
{
	struct tfs_cursor *c = NULL;
	struct tfs_event ev;
	int rc;

	f->n_pend = 0;
	rc = tfs_cursor_new(f->vt->trace, s->stream, TFS_VIEW_TEXT, s->first, s->n_events, &c);
	for (uint64_t i = s->first; i < s->first + s->n_events && rc == 0; i++) {
		rc = tfs_cursor_event(c, i, &ev, NULL);
		if (rc == 0 && f->kinds[ev.kind].role != M_NONE)
			rc = scan_event(f, s, &ev);
	}
	tfs_cursor_free(c);
	return rc;
}

static int cmp_channel(const struct msg_end *x, const struct msg_end *y)
{
	if (x->comm != y->comm)
		return x->comm < y->comm ? -1 : 1;
	if (x->src != y->src)
		return x->src < y->src ? -1 : 1;
	if (x->dst != y->dst)
		return x->dst < y->dst ? -1 : 1;
	if (x->tag != y->tag)
		return x->tag < y->tag ? -1 : 1;
	return 0;
}

static int cmp_end(const void *a, const void *b)
{
	const struct msg_end *x = a, *y = b;
	int c = cmp_channel(x, y);

	if (c)
		return c;
	if (x->order_ns != y->order_ns)
		return x->order_ns < y->order_ns ? -1 : 1;
	if (x->at.stream != y->at.stream)
		return x->at.stream < y->at.stream ? -1 : 1;
	return x->at.index < y->at.index ? -1 : x->at.index > y->at.index;
}

static int cmp_matched(const void *a, const void *b)
{
	const struct msg_end *x = a, *y = b;
	int c = cmp_channel(x, y);

	if (c)
		return c;
	return x->ordinal < y->ordinal ? -1 : x->ordinal > y->ordinal;
}

/* Number each end within its channel in order. */
static void number(struct ends *e)
{
	if (e->n > 1)
		qsort(e->v, e->n, sizeof(*e->v), cmp_end);
	for (size_t i = 0; i < e->n; i++)
		e->v[i].ordinal = i && !cmp_channel(&e->v[i], &e->v[i - 1]) ? e->v[i - 1].ordinal + 1
									      : 0;
}

/* The n-th send of a channel matches its n-th receive. */
static void match(struct flows *f)
{
	size_t i = 0, j = 0;

	number(&f->sends);
	number(&f->recvs);
	while (i < f->sends.n && j < f->recvs.n) {
		int c = cmp_matched(&f->sends.v[i], &f->recvs.v[j]);

		if (c == 0)
			put_flow(f, &f->sends.v[i].at, &f->recvs.v[j].at, "message", "mpi");
		if (c <= 0)
			i++;
		if (c >= 0)
			j++;
	}
}

/* Flows of @sc into @b (objects separated as the tail separates them). @return 0 or -errno */
static int put_flows(struct fs_vtree *vt, const struct fs_scope *sc, struct fs_sbuf *b,
		     bool *first)
{
	struct flows f = {.vt = vt, .sc = sc, .b = b, .first = first};
	uint64_t *counts = calloc((size_t)vt->ti.n_terminals + 1, sizeof(*counts));
	bool any = false;
	int rc = 0;

	f.kinds = calloc((size_t)vt->ti.n_kinds + 1, sizeof(*f.kinds));
	f.pend = calloc(MAX_PENDING, sizeof(*f.pend));
	if (!counts || !f.kinds || !f.pend) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t k = 0; k < vt->ti.n_kinds; k++) {
		mkind_fill(&vt->kinds[k], &f.kinds[k]);
		any |= f.kinds[k].role != M_NONE;
	}
	for (uint32_t i = 0; any && i < sc->n_segs && rc == 0; i++) {
		bool yes;

		rc = seg_wanted(&f, &sc->segs[i], counts, &yes);
		if (rc == 0 && yes)
			rc = scan_seg(&f, &sc->segs[i]);
	}
	if (rc == 0)
		match(&f);
	f.left_out += f.sends.dropped > f.recvs.dropped ? f.sends.dropped : f.recvs.dropped;
	if (rc == 0 && f.left_out) {
		if (!*first)
			fs_sb_put(b, ",\n", 2);
		*first = false;
		fs_sb_printf(b, "{\"name\":\"flows_left_out\",\"ph\":\"M\",\"pid\":0,\"tid\":0,"
			     "\"args\":{\"drawn\":%" PRIu64 ",\"left_out\":%" PRIu64 "}}",
			     f.n_flows, f.left_out);
	}
out:
	free(counts);
	free(f.kinds);
	free(f.pend);
	free(f.sends.v);
	free(f.recvs.v);
	return rc;
}

/* ---- heap counters ---- */

/* Each rank's live heap bytes over time, when the scope holds whole ranks. */
static int put_heap(struct fs_vtree *vt, const struct fs_scope *sc, struct fs_sbuf *b,
		    bool *first)
{
	int rc = 0;

	if (!sc->whole_ranks || fs_untimed(vt) || !fs_heap_wanted(vt, 0))
		return 0;
	for (uint32_t i = 0; i < sc->n_segs && rc == 0;) {
		uint32_t rank = sc->segs[i].rank, n = 0;
		const struct fs_heap_sample *v = NULL;
		size_t n_v = 0;

		while (i + n < sc->n_segs && sc->segs[i + n].rank == rank)
			n++;
		rc = fs_heap_series(vt, rank, &sc->segs[i], n, &v, &n_v);
		for (size_t k = 0; k < n_v && rc == 0; k++) {
			if (!*first)
				fs_sb_put(b, ",\n", 2);
			*first = false;
			fs_sb_printf(b, "{\"name\":\"heap\",\"cat\":\"alloc\",\"ph\":\"C\",\"ts\":%"
				     PRIu64 ".%03" PRIu64 ",\"pid\":%" PRIu32 ",\"tid\":0,\"args\":"
				     "{\"live bytes\":%" PRIu64 "}}", v[k].ts_ns / 1000,
				     v[k].ts_ns % 1000, rank, v[k].bytes);
		}
		i += n;
	}
	return rc;
}

/* ---- drops no mark places ---- */

/*
 * Each rank's events dropped by threads that ended before they could say where (metadata
 * dropped_unplaced): one mark of the whole process at the end of the run, so that the
 * marks of a whole rank count all its drops.
 */
static void put_unplaced(struct fs_vtree *vt, const struct fs_scope *sc, struct fs_sbuf *b,
			 bool *first)
{
	uint64_t end = 0;

	if (!sc->whole_ranks || !vt->procs)
		return;
	for (uint32_t i = 0; i < sc->n_segs; i++) {
		uint64_t e = fs_untimed(vt) ? sc->segs[i].first + sc->segs[i].n_events
					    : vt->ti.max_ts_ns;

		end = e > end ? e : end;
	}
	for (uint32_t i = 0; i < sc->n_segs; i++) {
		struct fs_proc q;

		if (i > 0 && sc->segs[i].rank == sc->segs[i - 1].rank)
			continue;
		fs_proc_at(vt->procs, sc->segs[i].rank, &q);
		if (q.dropped_unplaced <= 0)
			continue;
		if (!*first)
			fs_sb_put(b, ",\n", 2);
		*first = false;
		/* untimed, as the events: a microsecond per event */
		fs_sb_printf(b, "{\"name\":\"dropped %" PRId64 " event%s (where is not known)\","
			     "\"cat\":\"capture\",\"ph\":\"i\",\"s\":\"p\",\"ts\":%" PRIu64
			     ".%03" PRIu64 ",\"pid\":%" PRIu32 ",\"tid\":0,\"args\":{\"count\":%"
			     PRId64 "}}", q.dropped_unplaced, q.dropped_unplaced == 1 ? "" : "s",
			     fs_untimed(vt) ? end : end / 1000, fs_untimed(vt) ? 0 : end % 1000,
			     sc->segs[i].rank, q.dropped_unplaced);
	}
}

int fs_chrome_extras(struct fs_vtree *vt, const struct fs_scope *sc, struct fs_sbuf *b,
		     bool *first)
{
	int rc = fs_pict_ready(vt);

	if (rc == 0)
		put_unplaced(vt, sc, b, first);
	if (rc == 0)
		rc = put_heap(vt, sc, b, first);
	if (rc == 0)
		rc = put_flows(vt, sc, b, first);
	return rc;
}
