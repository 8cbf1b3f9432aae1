/*
 * What the pictures share: a per-terminal table (display name, colour class, whether it is a
 * moment, a zone's recorded depth), the nesting walk of one thread's events, and text
 * helpers for SVG and durations. The walk gives every event its depth below the outermost
 * event and a span clamped into its parent's, in one pass and O(depth) memory: forward for a
 * stream in start order, backward for one in end order (reversed, an end-ordered stream is
 * start-ordered). Without timing it keeps a synthetic clock of one unit per event, in which
 * a zone covers the events recorded inside it. It draws nothing itself.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vpict_i.h"

/* ---- per-terminal facts ---- */

/* MPI calls that block until other ranks act: waits, blocking point to point, collectives. */
static bool mpi_waits(const char *name)
{
	static const char *const blocking[] = {
	    "recv", "send", "ssend", "bsend", "rsend", "sendrecv", "sendrecv_replace", "probe",
	    "mprobe", "mrecv", "barrier", "allreduce", "reduce", "bcast", "gather", "gatherv",
	    "allgather", "allgatherv", "scatter", "scatterv", "alltoall", "alltoallv",
	    "alltoallw", "reduce_scatter", "reduce_scatter_block", "scan", "exscan",
	    "win_fence", "win_complete", "win_wait", "finalize",
	};

	if (strncmp(name, "MPI_", 4) == 0)
		name += 4;
	if (strncasecmp(name, "wait", 4) == 0 || strncasecmp(name, "neighbor_", 9) == 0)
		return true;
	for (size_t i = 0; i < sizeof(blocking) / sizeof(blocking[0]); i++) {
		if (strcasecmp(name, blocking[i]) == 0)
			return true;
	}
	return false;
}

static uint8_t zone_cls(const char *name)
{
	uint32_t h = 2166136261u;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 16777619u;
	return (uint8_t)(FS_CLS_ZONE0 + h % FS_N_ZONE_CLS);
}

static uint8_t kind_cls(const struct fs_kind *k)
{
	if (!strcmp(k->category, "alloc"))
		return FS_CLS_ALLOC;
	if (!strcmp(k->category, "io"))
		return FS_CLS_IO;
	if (!strcmp(k->category, "mpi"))
		return mpi_waits(k->name) ? FS_CLS_MPI_WAIT : FS_CLS_MPI;
	if (!strcmp(k->category, "threads"))
		return FS_CLS_THREADS;
	if (!strcmp(k->category, "mem"))
		return FS_CLS_MEM;
	return FS_CLS_OTHER;
}

static int pterm_fill(const struct fs_vtree *vt, uint32_t term, struct fs_pterm *pt)
{
	union tfs_arg args[TFS_MAX_ARGS];
	const struct fs_kind *k;
	int rc;

	rc = tfs_trace_term_kind(vt->trace, term, &pt->kind);
	if (rc == 0 && pt->kind >= vt->ti.n_kinds)
		rc = -TFS_ECORRUPT;
	if (rc == 0)
		rc = tfs_trace_term_args(vt->trace, term, args);
	if (rc < 0)
		return rc;
	k = &vt->kinds[pt->kind];
	pt->name = k->is_zone ? args[0].s : k->name;
	pt->cls = k->is_zone ? zone_cls(pt->name) : kind_cls(k);
	/* FORMAT.md §9: a kind whose first argument is a STR `message` marks a moment */
	pt->instant = k->n_args && k->args[0].enc == TFS_ENC_STR &&
		      !strcmp(k->args[0].name, "message");
	pt->zdepth = -1;
	pt->dropped = 0;
	for (uint32_t i = 1; pt->instant && !strcmp(k->name, "dropped") && i < k->n_args; i++) {
		if (k->args[i].enc == TFS_ENC_SIG && !strcmp(k->args[i].name, "count"))
			pt->dropped = args[i].u;
	}
	for (uint32_t i = 1; k->is_zone && i < k->n_args; i++) {
		if (k->args[i].enc == TFS_ENC_SIG && !strcmp(k->args[i].name, "depth") &&
		    args[i].u < INT32_MAX)
			pt->zdepth = (int32_t)args[i].u;
	}
	return 0;
}

static int pict_run(void *arg)
{
	struct fs_vtree *vt = arg;
	struct fs_pict_state *ps = vt->pict;
	uint32_t n = vt->ti.n_terminals;
	struct fs_pterm *terms = calloc(n ? n : 1, sizeof(*terms));
	int rc = terms ? 0 : -ENOMEM;

	for (uint32_t i = 0; i < n && rc == 0; i++)
		rc = pterm_fill(vt, i, &terms[i]);
	if (rc < 0) {
		free(terms);
		return rc;
	}
	ps->terms = terms;
	return 0;
}

int fs_pict_ready(struct fs_vtree *vt)
{
	return fs_once_run(&vt->pict->once, pict_run, vt);
}

/* ---- the walk ---- */

struct walk {
	struct fs_vtree *vt;
	const struct fs_pterm *terms;
	fs_span_fn fn;
	void *arg;
	struct fs_span *stack;
	uint32_t n, cap;
	bool untimed, backward;
};

static int push(struct walk *w, const struct fs_span *sp)
{
	if (w->n == w->cap) {
		uint32_t cap = w->cap ? 2 * w->cap : 32;
		struct fs_span *s = realloc(w->stack, (size_t)cap * sizeof(*s));

		if (!s)
			return -ENOMEM;
		w->stack = s;
		w->cap = cap;
	}
	w->stack[w->n] = *sp;
	w->stack[w->n].depth = w->n;
	w->n++;
	return w->fn(w->arg, &w->stack[w->n - 1], true);
}

static int pop(struct walk *w)
{
	w->n--;
	return w->fn(w->arg, &w->stack[w->n], false);
}

/* A zone of the untimed clock: its recorded depth, when it has one. */
static int32_t zdepth(const struct walk *w, const struct fs_span *sp)
{
	return w->untimed ? w->terms[sp->term].zdepth : -1;
}

/*
 * Start order: close what ended before @sp starts, clamp @sp into its parent, open it.
 * Untimed, a zone stays open until a zone of its recorded depth or shallower comes.
 */
static int step_forward(struct walk *w, struct fs_span *sp)
{
	int32_t d = zdepth(w, sp);
	int rc = 0;

	while (w->n > 0 && rc == 0) {
		struct fs_span *top = &w->stack[w->n - 1];
		int32_t td = zdepth(w, top);

		if (td >= 0 && d >= 0 && td >= d)
			top->end = sp->start;
		else if (td >= 0 || top->end > sp->start)
			break;
		rc = pop(w);
	}
	if (rc < 0)
		return rc;
	if (w->n > 0) {
		const struct fs_span *p = &w->stack[w->n - 1];

		if (sp->start < p->start)
			sp->start = p->start;
		if (sp->end > p->end)
			sp->end = p->end;
		if (sp->end < sp->start)
			sp->end = sp->start;
	}
	return push(w, sp);
}

/* End order, backward: the mirror image of step_forward. */
static int step_backward(struct walk *w, struct fs_span *sp)
{
	int32_t d = zdepth(w, sp);
	int rc = 0;

	while (w->n > 0 && rc == 0) {
		struct fs_span *top = &w->stack[w->n - 1];
		int32_t td = zdepth(w, top);

		if (td >= 0 && d >= 0 && td >= d)
			top->start = sp->end;
		else if (td >= 0 || top->start < sp->end)
			break;
		rc = pop(w);
	}
	if (rc < 0)
		return rc;
	if (w->n > 0) {
		const struct fs_span *p = &w->stack[w->n - 1];

		if (sp->end > p->end)
			sp->end = p->end;
		if (sp->start < p->start)
			sp->start = p->start;
		if (sp->start > sp->end)
			sp->start = sp->end;
	}
	return push(w, sp);
}

int fs_walk_seg(struct fs_vtree *vt, const struct fs_seg *s, fs_span_fn fn, void *arg,
		bool *backward)
{
	struct walk w = {.vt = vt, .fn = fn, .arg = arg, .untimed = fs_untimed(vt),
			 .backward = fs_merge_by_end(vt)};
	struct tfs_cursor *c = NULL;
	struct tfs_event ev;
	int rc;

	*backward = w.backward;
	rc = fs_pict_ready(vt);
	if (rc < 0 || s->n_events == 0)
		return rc;
	w.terms = vt->pict->terms;
	rc = tfs_cursor_new(vt->trace, s->stream, TFS_VIEW_TEXT, s->first, s->n_events, &c);
	for (uint64_t k = 0; k < s->n_events && rc == 0; k++) {
		uint64_t i = w.backward ? s->first + s->n_events - 1 - k : s->first + k;
		struct fs_span sp = {.index = i};

		rc = tfs_cursor_event(c, i, &ev, NULL);
		if (rc < 0)
			break;
		sp.term = ev.terminal;
		if (w.untimed) {
			sp.start = i;
			sp.end = i + 1;
			/* a zone's other end is found when it closes */
			if (w.terms[ev.terminal].zdepth >= 0) {
				if (w.backward)
					sp.start = s->first;
				else
					sp.end = s->first + s->n_events;
			}
		} else {
			sp.start = ev.ts_ns;
			sp.end = ev.ts_ns + ev.dur_ns < ev.ts_ns ? UINT64_MAX : ev.ts_ns + ev.dur_ns;
		}
		rc = w.backward ? step_backward(&w, &sp) : step_forward(&w, &sp);
	}
	while (rc == 0 && w.n > 0)
		rc = pop(&w);
	tfs_cursor_free(c);
	free(w.stack);
	return rc;
}

/* ---- text ---- */

void fs_xml_text(struct fs_sbuf *b, const char *s, size_t max)
{
	size_t n = strlen(s), keep = tfs_utf8_cut(s, n, max);
	struct fs_sbuf e = {0};
	const char *p, *end;

	/* the text views' escape (§9.1: one line, no control character), then what XML
	 * text cannot hold as it is: its delimiters, and U+FFFE and U+FFFF, no XML Char */
	fs_sb_name_n(&e, s, keep, NULL);
	if (e.failed)
		b->failed = true;
	for (p = e.data, end = p + e.len; p && p < end;) {
		size_t run = strcspn(p, "&<>\xef");

		fs_sb_put(b, p, run);
		p += run;
		if (p == end)
			break;
		if (*p == '&' || *p == '<' || *p == '>') {
			fs_sb_puts(b, *p == '&' ? "&amp;" : *p == '<' ? "&lt;" : "&gt;");
			p++;
		} else if (end - p >= 3 && (unsigned char)p[1] == 0xbf &&
			   ((unsigned char)p[2] == 0xbe || (unsigned char)p[2] == 0xbf)) {
			fs_sb_printf(b, "\\xef\\xbf\\x%02x", (unsigned char)p[2]);
			p += 3;
		} else {
			fs_sb_put(b, p, 1);
			p++;
		}
	}
	fs_sb_fini(&e);
	if (keep < n)
		fs_sb_put(b, "...", 3);
}

void fs_put_duration(struct fs_sbuf *b, uint64_t ns, bool untimed)
{
	if (untimed)
		fs_sb_printf(b, "%" PRIu64 " event%s", ns, ns == 1 ? "" : "s");
	else if (ns < 1000)
		fs_sb_printf(b, "%" PRIu64 " ns", ns);
	else if (ns < 1000000)
		fs_sb_printf(b, "%.3g us", (double)ns / 1e3);
	else if (ns < 1000000000)
		fs_sb_printf(b, "%.3g ms", (double)ns / 1e6);
	else
		fs_sb_printf(b, "%.4g s", (double)ns / 1e9);
}
