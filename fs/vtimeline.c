/*
 * timeline.svg: a scope's threads as lanes over time, after RAD's Telemetry. Each lane
 * stacks its nested events as bars, a row per depth (the deepest rows share the last one);
 * calls are coloured by kind and MPI waits apart from the rest of MPI, zones by a hash of
 * their name; phases are bands behind the lane. Drawing is at pixel resolution: an event at
 * least OWN_PX pixels wide is a bar of its own with a <title> (name and duration), smaller
 * ones are summed per pixel and kind, and runs of pixels whose kind that takes most time is
 * the same become one bar that says what it holds. A lane that would still hold more bars
 * than its share of the budget is drawn with pixels k times as wide, so the file stays
 * under FS_SVG_MAX_BYTES however long the trace: its size follows the picture, not the
 * events. Where the recorder dropped events (`dropped` marks) a red band crosses the lane.
 * One decoding pass over the scope's events, memory of one lane's pixels. It draws no
 * counters and no flows (trace.json has those).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vpict_i.h"

#define FS_SVG_MAX_BYTES (UINT64_C(2000000) - 4096)
#define PLOT_W 1200	/* pixels of time */
#define LABEL_W 230	/* lane names on the left */
#define RIGHT_W 16
#define TOP_H 58	/* title and time axis */
#define ROW_H 14
#define LANE_GAP 8
#define MAX_ROWS 10	/* depths drawn; deeper events share the last row */
#define MAX_LANES 128
#define OWN_PX 3.0	/* narrower events are summed per pixel */
#define MAX_BARS 12000	/* bars of all lanes, before the byte check */
#define MAX_BANDS 2000	/* phase bands */
#define NAME_MAX_BYTES 80 /* of a name in a title */

static const char *const cls_fill[FS_N_CLS] = {
    [FS_CLS_ZONE0] = "#4e79a7", [FS_CLS_ZONE0 + 1] = "#59a14f", [FS_CLS_ZONE0 + 2] = "#76b7b2",
    [FS_CLS_ZONE0 + 3] = "#8cd17d", [FS_CLS_ZONE0 + 4] = "#a0cbe8",
    [FS_CLS_ZONE0 + 5] = "#499894", [FS_CLS_ALLOC] = "#f28e2b", [FS_CLS_IO] = "#b07aa1",
    [FS_CLS_MPI_WAIT] = "#e15759", [FS_CLS_MPI] = "#ff9d9a", [FS_CLS_THREADS] = "#9d7660",
    [FS_CLS_MEM] = "#edc948", [FS_CLS_OTHER] = "#bab0ac",
};

static const char *const cls_label[FS_N_CLS] = {
    [FS_CLS_ZONE0] = "zones (shade by name)", [FS_CLS_ALLOC] = "allocations",
    [FS_CLS_IO] = "I/O", [FS_CLS_MPI_WAIT] = "MPI waits, blocking MPI",
    [FS_CLS_MPI] = "other MPI", [FS_CLS_THREADS] = "threads, processes",
    [FS_CLS_MEM] = "memory accesses", [FS_CLS_OTHER] = "other",
};

/* One pixel of one row: time each class covers in it, events that touch it. */
struct pix {
	uint64_t busy[FS_N_CLS];
	uint32_t n[FS_N_CLS];
};

/* One pixel of a lane's `dropped` marks: the events of those that begin in it, whether
 * one spans it (marks of one thread never overlap: their pixels add up to the lane's). */
struct dpix {
	uint64_t n;
	bool covered;
};

/* An event wide enough for a bar of its own. */
struct own {
	double x0, x1;
	uint64_t start, end;
	uint32_t term;
	uint16_t row;
};

struct lane {
	struct pix *pix;	/* [MAX_ROWS][PLOT_W] */
	struct own *own;
	size_t n_own, own_cap;
	uint32_t rows;		/* rows used (deepest + 1, at most MAX_ROWS) */
	uint8_t used[FS_N_CLS];
	struct dpix *drops;	/* [PLOT_W]: where the `dropped` marks are */
};

struct tl {
	struct fs_vtree *vt;
	const struct fs_scope *sc;
	uint64_t t0, t1;	/* drawn time range (ns, or synthetic units) */
	double px_per;		/* pixels per unit of time */
	bool untimed;
	uint32_t bar_budget;	/* bars per lane */
	uint32_t bars;		/* bars drawn */
	uint32_t y;		/* top of the next lane */
	uint8_t used[FS_N_CLS];
	bool phases_drawn, drops_drawn;
	struct lane ln;
	struct fs_sbuf body;
};

/* ---- the time range ---- */

/* First and last events of each segment bound what a picture shows (the outermost zone is one
 * of them, in either order). */
static int seg_extent(struct tl *t, const struct fs_seg *s, uint64_t *lo, uint64_t *hi)
{
	struct tfs_cursor *c;
	struct tfs_event ev;
	uint64_t idx[2] = {s->first, s->first + s->n_events - 1};
	int rc;

	if (t->untimed) {
		*lo = s->first;
		*hi = s->first + s->n_events;
		return 0;
	}
	rc = tfs_cursor_new(t->vt->trace, s->stream, TFS_VIEW_TEXT, s->first, s->n_events, &c);
	for (int i = 0; i < 2 && rc == 0; i++) {
		rc = tfs_cursor_event(c, idx[i], &ev, NULL);
		if (rc < 0)
			break;
		if (ev.ts_ns < *lo)
			*lo = ev.ts_ns;
		if (ev.ts_ns + ev.dur_ns > *hi)
			*hi = ev.ts_ns + ev.dur_ns;
	}
	tfs_cursor_free(c);
	return rc;
}

static int time_range(struct tl *t)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	int rc = 0;

	if (t->sc->to_ns > t->sc->from_ns) {
		t->t0 = t->sc->from_ns;
		t->t1 = t->sc->to_ns;
		return 0;
	}
	for (uint32_t i = 0; i < t->sc->n_segs && rc == 0; i++) {
		if (t->sc->segs[i].n_events)
			rc = seg_extent(t, &t->sc->segs[i], &lo, &hi);
	}
	if (lo >= hi) {
		lo = lo == UINT64_MAX ? 0 : lo;
		hi = lo + 1;
	}
	t->t0 = lo;
	t->t1 = hi;
	return rc;
}

/* ---- rasterising one lane ---- */

static double px_of(const struct tl *t, uint64_t v)
{
	if (v <= t->t0)
		return 0;
	if (v >= t->t1)
		return PLOT_W;
	return (double)(v - t->t0) * t->px_per;
}

/* Spread @sp over the pixels of @row it covers. */
static void add_pixels(struct tl *t, uint32_t row, const struct fs_span *sp, uint8_t cls)
{
	double x0 = px_of(t, sp->start), x1 = px_of(t, sp->end);
	uint32_t p0 = (uint32_t)x0, p1 = (uint32_t)ceil(x1);
	struct pix *r = &t->ln.pix[(size_t)row * PLOT_W];

	if (p0 >= PLOT_W)
		p0 = PLOT_W - 1;
	if (p1 <= p0)
		p1 = p0 + 1;
	if (p1 > PLOT_W)
		p1 = PLOT_W;
	for (uint32_t p = p0; p < p1; p++) {
		double a = x0 > p ? x0 : p, b = x1 < p + 1 ? x1 : p + 1;

		r[p].n[cls]++;
		if (b > a)
			r[p].busy[cls] += (uint64_t)((b - a) / t->px_per + 0.5);
	}
}

static int span_cb(void *arg, const struct fs_span *sp, bool open)
{
	struct tl *t = arg;
	const struct fs_pterm *pt = &t->vt->pict->terms[sp->term];
	uint32_t row = sp->depth < MAX_ROWS ? sp->depth : MAX_ROWS - 1;
	double x0, x1;

	if (!open && pt->dropped && sp->start >= t->t0 && sp->start <= t->t1) {
		uint32_t p0, p1;

		x0 = px_of(t, sp->start);
		p0 = x0 < PLOT_W ? (uint32_t)x0 : PLOT_W - 1;
		p1 = (uint32_t)ceil(px_of(t, sp->end));
		t->ln.drops[p0].n += pt->dropped;
		for (uint32_t p = p0; p < p1 && p < PLOT_W; p++)
			t->ln.drops[p].covered = true;
	}
	if (open || sp->end <= t->t0 || sp->start >= t->t1 || pt->instant)
		return 0;
	if (row + 1 > t->ln.rows)
		t->ln.rows = row + 1;
	t->ln.used[pt->cls] = 1;
	x0 = px_of(t, sp->start);
	x1 = px_of(t, sp->end);
	if (x1 - x0 < OWN_PX || sp->depth >= MAX_ROWS - 1) {
		add_pixels(t, row, sp, pt->cls);
		return 0;
	}
	if (t->ln.n_own == t->ln.own_cap) {
		size_t cap = t->ln.own_cap ? 2 * t->ln.own_cap : 256;
		struct own *o = realloc(t->ln.own, cap * sizeof(*o));

		if (!o)
			return -ENOMEM;
		t->ln.own = o;
		t->ln.own_cap = cap;
	}
	t->ln.own[t->ln.n_own++] =
	    (struct own){x0, x1, sp->start, sp->end, sp->term, (uint16_t)row};
	return 0;
}

/* ---- drawing one lane ---- */

static uint8_t dominant(const uint64_t *busy, const uint32_t *n)
{
	uint8_t best = FS_N_CLS;

	for (uint8_t c = 0; c < FS_N_CLS; c++) {
		if (!n[c])
			continue;
		if (best == FS_N_CLS || busy[c] > busy[best] ||
		    (busy[c] == busy[best] && n[c] > n[best]))
			best = c;
	}
	return best;
}

static void put_own(struct tl *t, const struct own *o)
{
	const struct fs_pterm *pt = &t->vt->pict->terms[o->term];
	struct fs_sbuf *b = &t->body;

	fs_sb_printf(b, "<rect class=\"b k%u\" x=\"%.1f\" y=\"%u\" width=\"%.1f\" height=\"%u\">"
		     "<title>", pt->cls, o->x0, o->row * ROW_H, o->x1 - o->x0, ROW_H - 1);
	fs_xml_text(b, pt->name, NAME_MAX_BYTES);
	fs_sb_put(b, " ", 1);
	fs_put_duration(b, o->end - o->start, t->untimed);
	fs_sb_put(b, "</title></rect>\n", 16);
}

/* "57 events: 40 write-kind, 17 I/O; 8.1 us busy" for a merged bar. */
static void put_merged(struct tl *t, uint32_t row, uint32_t x0, uint32_t x1, uint8_t cls,
		       const uint64_t *busy, const uint32_t *n)
{
	struct fs_sbuf *b = &t->body;
	uint64_t total_n = 0, total_busy = 0;
	bool first = true;

	for (int c = 0; c < FS_N_CLS; c++) {
		total_n += n[c];
		total_busy += busy[c];
	}
	fs_sb_printf(b, "<rect class=\"m k%u\" x=\"%u\" y=\"%u\" width=\"%u\" height=\"%u\">"
		     "<title>%" PRIu64 " event%s:", cls, x0, row * ROW_H, x1 - x0, ROW_H - 1,
		     total_n, total_n == 1 ? "" : "s");
	for (int c = 0; c < FS_N_CLS; c++) {
		if (!n[c])
			continue;
		fs_sb_printf(b, "%s %" PRIu32 " %s", first ? "" : ",", n[c],
			     c < FS_N_ZONE_CLS ? "zone" : cls_label[c]);
		first = false;
	}
	fs_sb_put(b, "; ", 2);
	fs_put_duration(b, total_busy, t->untimed);
	fs_sb_printf(b, " %s</title></rect>\n", t->untimed ? "covered" : "busy");
}

/* Fold own bars narrower than 2k pixels back into the pixels (a coarser drawing). */
static void fold_narrow(struct tl *t, uint32_t k)
{
	size_t kept = 0;

	for (size_t i = 0; i < t->ln.n_own; i++) {
		const struct own *o = &t->ln.own[i];
		struct fs_span sp = {.start = o->start, .end = o->end};

		if (o->x1 - o->x0 >= 2.0 * k) {
			t->ln.own[kept++] = *o;
			continue;
		}
		add_pixels(t, o->row, &sp, t->vt->pict->terms[o->term].cls);
	}
	t->ln.n_own = kept;
}

/* The sums of pixels [@x, @x + @k) of row @r. */
static void bucket(const struct pix *r, uint32_t x, uint32_t k, uint64_t *busy, uint32_t *n)
{
	memset(busy, 0, FS_N_CLS * sizeof(*busy));
	memset(n, 0, FS_N_CLS * sizeof(*n));
	for (uint32_t p = x; p < x + k && p < PLOT_W; p++) {
		for (int c = 0; c < FS_N_CLS; c++) {
			busy[c] += r[p].busy[c];
			n[c] += r[p].n[c];
		}
	}
}

/* Bars of @row with pixels @k wide: runs of one dominant class. @return bars, drawn or not */
static uint32_t draw_row(struct tl *t, uint32_t row, uint32_t k, bool draw)
{
	const struct pix *r = &t->ln.pix[(size_t)row * PLOT_W];
	uint64_t busy[FS_N_CLS], run_busy[FS_N_CLS] = {0};
	uint32_t n[FS_N_CLS], run_n[FS_N_CLS] = {0};
	uint32_t bars = 0, run_x = 0;
	uint8_t run_cls = FS_N_CLS;

	for (uint32_t x = 0;; x += k) {
		uint8_t cls = FS_N_CLS;

		if (x < PLOT_W) {
			bucket(r, x, k, busy, n);
			cls = dominant(busy, n);
		}
		if (cls != run_cls && run_cls != FS_N_CLS) {
			bars++;
			if (draw)
				put_merged(t, row, run_x, x < PLOT_W ? x : PLOT_W, run_cls,
					   run_busy, run_n);
			memset(run_busy, 0, sizeof(run_busy));
			memset(run_n, 0, sizeof(run_n));
		}
		if (x >= PLOT_W)
			return bars;
		if (cls != run_cls)
			run_x = x;
		run_cls = cls;
		for (int c = 0; cls != FS_N_CLS && c < FS_N_CLS; c++) {
			run_busy[c] += busy[c];
			run_n[c] += n[c];
		}
	}
}

static uint32_t lane_bars(struct tl *t, uint32_t k, bool draw)
{
	uint32_t bars = 0;

	for (uint32_t row = 0; row < t->ln.rows; row++)
		bars += draw_row(t, row, k, draw);
	return bars + (uint32_t)t->ln.n_own;
}

/* ---- lanes ---- */

static void lane_label(struct tl *t, const struct fs_seg *s, char *buf, size_t cap)
{
	fs_thread_label(t->vt->procs, s->rank, s->thread, buf, cap);
}

/* A phase's band colour: the same for every phase of one name. */
static unsigned band_of(const char *name)
{
	unsigned h = 0;

	for (const unsigned char *p = (const unsigned char *)(name ? name : ""); *p; p++)
		h = h * 31 + *p;
	return h % 4;
}

/* The phases of @s's stream as bands across the lane (height @h). */
static int draw_phases(struct tl *t, const struct fs_seg *s, uint32_t h)
{
	struct fs_vtree *vt = t->vt;
	struct tfs_cursor *c = NULL;
	int rc = 0;

	for (uint32_t i = 0; i < t->sc->n_phases && rc == 0; i++) {
		struct tfs_phase_info pi;
		struct tfs_event ev;
		uint64_t a, z;
		double x0, x1;

		rc = tfs_trace_phase(vt->trace, t->sc->phases[i], &pi);
		if (rc < 0 || pi.stream != s->stream || pi.n_events == 0)
			continue;
		if (t->untimed) {
			a = pi.first_event;
			z = pi.first_event + pi.n_events;
		} else {
			if (!c)
				rc = tfs_cursor_new(vt->trace, s->stream, TFS_VIEW_TEXT, 0, 1, &c);
			if (rc == 0)
				rc = tfs_cursor_event(c, pi.first_event, &ev, NULL);
			a = ev.ts_ns;
			if (rc == 0)
				rc = tfs_cursor_event(c, pi.first_event + pi.n_events - 1, &ev, NULL);
			z = ev.ts_ns + ev.dur_ns;
			if (rc < 0)
				break;
		}
		x0 = px_of(t, a);
		x1 = px_of(t, z);
		if (x1 - x0 < 1.0 || t->bars >= MAX_BARS + MAX_BANDS)
			continue;
		t->bars++;
		fs_sb_printf(&t->body, "<rect class=\"ph p%u\" x=\"%.1f\" y=\"-2\" width=\"%.1f\" "
			     "height=\"%u\"><title>phase ", band_of(pi.name), x0, x1 - x0, h + 3);
		fs_xml_text(&t->body, pi.name ? pi.name : "", NAME_MAX_BYTES);
		fs_sb_put(&t->body, " ", 1);
		fs_put_duration(&t->body, z - a, t->untimed);
		fs_sb_put(&t->body, "</title></rect>\n", 16);
		if (x1 - x0 >= 40) {
			fs_sb_printf(&t->body, "<text class=\"pl\" x=\"%.1f\" y=\"-4\">", x0 + 2);
			fs_xml_text(&t->body, pi.name ? pi.name : "", 24);
			fs_sb_put(&t->body, "</text>\n", 8);
		}
		t->phases_drawn = true;
	}
	tfs_cursor_free(c);
	return rc;
}

/*
 * The `dropped` marks of the lane (height @h) as red bands across it from the first event
 * dropped to the last, those a few pixels apart as one, each saying how many events are
 * missing there.
 */
static void draw_drops(struct tl *t, uint32_t h)
{
	const struct dpix *d = t->ln.drops;

	for (uint32_t x = 0; x < PLOT_W; x++) {
		uint64_t n = 0;
		uint32_t x1 = x; /* one past the run's last marked pixel */

		if (!d[x].n && !d[x].covered)
			continue;
		for (uint32_t p = x; p < PLOT_W && p < x1 + 4; p++) {
			if (d[p].n || d[p].covered) {
				n += d[p].n;
				x1 = p + 1;
			}
		}
		t->bars++;
		t->drops_drawn = true;
		fs_sb_printf(&t->body, "<rect class=\"dr\" x=\"%u\" y=\"-2\" width=\"%u\" "
			     "height=\"%u\"><title>dropped %" PRIu64 " event%s (the recorder's "
			     "spool was full)</title></rect>\n", x, x1 - x > 2 ? x1 - x : 2,
			     h + 3, n, n == 1 ? "" : "s");
		x = x1;
	}
}

static int draw_lane(struct tl *t, const struct fs_seg *s)
{
	struct lane *ln = &t->ln;
	uint32_t k = 1, h;
	char label[700];
	bool backward;
	int rc;

	memset(ln->pix, 0, (size_t)MAX_ROWS * PLOT_W * sizeof(*ln->pix));
	memset(ln->drops, 0, PLOT_W * sizeof(*ln->drops));
	ln->n_own = 0;
	ln->rows = 1;
	rc = fs_walk_seg(t->vt, s, span_cb, t, &backward);
	if (rc < 0)
		return rc;
	while (lane_bars(t, k, false) > t->bar_budget && k < PLOT_W) {
		k *= 2;
		fold_narrow(t, k);
	}
	h = ln->rows * ROW_H;
	lane_label(t, s, label, sizeof(label));
	fs_sb_printf(&t->body, "<g class=\"lane\" data-rank=\"%" PRIu32 "\" data-thread=\"%" PRIu32
		     "\" transform=\"translate(%u,%u)\">\n", s->rank, s->thread, LABEL_W, t->y);
	fs_sb_printf(&t->body, "<rect class=\"bg\" x=\"0\" y=\"0\" width=\"%u\" height=\"%u\"/>\n",
		     PLOT_W, h);
	rc = draw_phases(t, s, h);
	if (rc < 0)
		return rc;
	fs_sb_printf(&t->body, "<text class=\"ln\" x=\"-6\" y=\"%u\">", ROW_H - 3);
	fs_xml_text(&t->body, label, 40);
	fs_sb_put(&t->body, "<title>", 7);
	fs_xml_text(&t->body, label, sizeof(label));
	if (k > 1)
		fs_sb_printf(&t->body, " (drawn at %u pixels per bar)", k);
	fs_sb_put(&t->body, "</title></text>\n", 16);
	for (size_t i = 0; i < ln->n_own; i++)
		put_own(t, &ln->own[i]);
	t->bars += lane_bars(t, k, true);
	draw_drops(t, h);
	fs_sb_put(&t->body, "</g>\n", 5);
	for (int c = 0; c < FS_N_CLS; c++)
		t->used[c] |= ln->used[c];
	t->y += h + LANE_GAP;
	return 0;
}

/* ---- axis, legend, the file ---- */

static uint64_t nice_step(uint64_t span)
{
	uint64_t step = 1;

	while (step * 10 <= span / 8 + 1)
		step *= 10;
	if (step * 5 <= span / 8)
		return step * 5;
	if (step * 2 <= span / 8)
		return step * 2;
	return step;
}

static void draw_axis(struct tl *t, struct fs_sbuf *b, uint32_t plot_h)
{
	uint64_t span = t->t1 - t->t0, step = nice_step(span);

	fs_sb_printf(b, "<g class=\"axis\" transform=\"translate(%u,%u)\">\n", LABEL_W, TOP_H);
	fs_sb_printf(b, "<line x1=\"0\" y1=\"-6\" x2=\"%u\" y2=\"-6\"/>\n", PLOT_W);
	for (uint64_t v = (t->t0 + step - 1) / step * step; v <= t->t1; v += step) {
		double x = px_of(t, v);

		fs_sb_printf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"-10\" x2=\"%.1f\" y2=\"%u\"/>"
			     "<text x=\"%.1f\" y=\"-14\">", x, x, plot_h, x);
		if (t->untimed)
			fs_sb_printf(b, "%" PRIu64, v);
		else
			fs_put_duration(b, v, false);
		fs_sb_put(b, "</text>\n", 8);
		if (v > UINT64_MAX - step)
			break;
	}
	fs_sb_put(b, "</g>\n", 5);
}

static void draw_legend(struct tl *t, struct fs_sbuf *b, uint32_t y)
{
	uint32_t x = 0;

	fs_sb_printf(b, "<g class=\"legend\" transform=\"translate(%u,%u)\">\n", LABEL_W, y);
	for (int c = FS_CLS_ZONE0; c < FS_N_CLS; c++) {
		bool used = t->used[c];

		if (c == FS_CLS_ZONE0)
			for (int z = 1; z < FS_N_ZONE_CLS; z++)
				used |= t->used[z];
		if (!used || !cls_label[c])
			continue;
		fs_sb_printf(b, "<rect class=\"k%d\" x=\"%u\" y=\"0\" width=\"12\" height=\"12\"/>"
			     "<text x=\"%u\" y=\"10\">%s</text>\n", c, x, x + 16, cls_label[c]);
		x += 34 + 7 * (uint32_t)strlen(cls_label[c]);
	}
	if (t->phases_drawn) {
		fs_sb_printf(b, "<rect class=\"ph p0\" x=\"%u\" y=\"0\" width=\"12\" height=\"12\"/>"
			     "<text x=\"%u\" y=\"10\">phases</text>\n", x, x + 16);
		x += 34 + 7 * 6;
	}
	if (t->drops_drawn) {
		fs_sb_printf(b, "<rect class=\"dr\" x=\"%u\" y=\"0\" width=\"3\" height=\"12\"/>"
			     "<text x=\"%u\" y=\"10\">dropped events</text>\n", x, x + 7);
	}
	fs_sb_printf(b, "<text x=\"0\" y=\"28\">Bars with a dashed edge hold events narrower than "
		     "a pixel, coloured by the kind that takes most of their time; hover for "
		     "names and durations.%s</text>\n</g>\n",
		     t->untimed ? " Untimed trace: a synthetic clock of one unit per event, zones "
				  "spanning the events recorded inside them."
				: "");
}

static void put_style(struct fs_sbuf *b)
{
	fs_sb_printf(b, "<style>\ntext{font:11px sans-serif;fill:#222}\n"
		     ".ln{text-anchor:end}.pl{font-size:9px;fill:#555}\n"
		     ".axis line{stroke:#999;stroke-width:1}.axis .grid{stroke:#ddd}"
		     ".axis text{text-anchor:middle;font-size:10px}\n"
		     ".bg{fill:#f7f7f7}.ph{opacity:.35}.p0{fill:#c6dbef}.p1{fill:#fdd0a2}"
		     ".p2{fill:#c7e9c0}.p3{fill:#dadaeb}\n"
		     ".m{stroke:#444;stroke-width:.5;stroke-dasharray:1 1}.dr{fill:#d62728;opacity:.6}\n");
	for (int c = 0; c < FS_N_CLS; c++)
		fs_sb_printf(b, ".k%d{fill:%s}", c, cls_fill[c]);
	fs_sb_printf(b, "\n</style>\n");
}

/* The picture's title line: program, scope, span. */
static void put_title(struct tl *t, struct fs_sbuf *b, uint32_t n_lanes)
{
	const char *program = tfs_trace_meta(t->vt->trace, "program");

	fs_sb_printf(b, "<text x=\"8\" y=\"16\" style=\"font-size:13px;font-weight:bold\">");
	fs_xml_text(b, program ? program : "trace", 80);
	fs_sb_put(b, ": ", 2);
	fs_xml_text(b, t->sc->label ? t->sc->label : "", 120);
	fs_sb_put(b, ", ", 2);
	fs_put_duration(b, t->t1 - t->t0, t->untimed);
	if (t->untimed)
		fs_sb_printf(b, " (synthetic clock)");
	fs_sb_printf(b, " from %s", t->untimed ? "event " : "");
	if (t->untimed)
		fs_sb_printf(b, "%" PRIu64, t->t0);
	else
		fs_put_duration(b, t->t0, false);
	if (t->sc->n_segs > n_lanes)
		fs_sb_printf(b, "; the first %u of %" PRIu32 " threads", n_lanes, t->sc->n_segs);
	fs_sb_put(b, "</text>\n", 8);
}

static int render(struct tl *t, uint32_t budget, char **out, size_t *len)
{
	uint32_t n_lanes = t->sc->n_segs < MAX_LANES ? t->sc->n_segs : MAX_LANES;
	struct fs_sbuf head = {0};
	uint32_t plot_h;
	int rc = 0;

	t->bar_budget = budget / (n_lanes ? n_lanes : 1);
	if (t->bar_budget < 16)
		t->bar_budget = 16;
	t->bars = 0;
	t->drops_drawn = false;
	t->y = TOP_H;
	t->body.len = 0;
	memset(t->used, 0, sizeof(t->used));
	for (uint32_t i = 0; i < n_lanes && rc == 0; i++)
		rc = draw_lane(t, &t->sc->segs[i]);
	if (rc < 0)
		return rc;
	plot_h = t->y - TOP_H;
	fs_sb_printf(&head, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		     "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" height=\"%u\" "
		     "viewBox=\"0 0 %u %u\">\n",
		     LABEL_W + PLOT_W + RIGHT_W, t->y + 50, LABEL_W + PLOT_W + RIGHT_W, t->y + 50);
	put_style(&head);
	fs_sb_printf(&head, "<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n");
	put_title(t, &head, n_lanes);
	draw_axis(t, &head, plot_h);
	fs_sb_put(&head, t->body.data ? t->body.data : "", t->body.len);
	draw_legend(t, &head, t->y + 6);
	fs_sb_put(&head, "</svg>\n", 7);
	if (t->body.failed)
		head.failed = true;
	return fs_sb_detach(&head, out, len);
}

int fs_timeline_new(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank, char **out,
		    size_t *len)
{
	struct tl t = {.vt = vt, .sc = sc, .untimed = fs_untimed(vt)};
	uint32_t budget = MAX_BARS;
	int rc;

	(void)rank;
	rc = fs_pict_ready(vt);
	if (rc == 0)
		rc = time_range(&t);
	if (rc < 0)
		return rc;
	t.px_per = (double)PLOT_W / (double)(t.t1 - t.t0);
	t.ln.pix = calloc((size_t)MAX_ROWS * PLOT_W, sizeof(*t.ln.pix));
	t.ln.drops = calloc(PLOT_W, sizeof(*t.ln.drops));
	if (!t.ln.pix || !t.ln.drops) {
		free(t.ln.pix);
		free(t.ln.drops);
		return -ENOMEM;
	}
	for (;;) {
		rc = render(&t, budget, out, len);
		if (rc < 0 || *len <= FS_SVG_MAX_BYTES || budget < 64)
			break;
		/* names longer than the estimate: draw again with fewer bars */
		free(*out);
		*out = NULL;
		budget /= 2;
	}
	free(t.ln.pix);
	free(t.ln.drops);
	free(t.ln.own);
	free(t.body.data);
	return rc;
}
