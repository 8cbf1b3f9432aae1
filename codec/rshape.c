/*
 * What a search can know of a terminal's lines without rendering one: the shape of its
 * trace.txt line (the constant text of its template with each hole as a class byte that
 * says which characters the hole may print), and how often each terminal occurs in an
 * event range, from the grammar alone. `tracefs grep` tests a pattern against the shapes
 * once per signature and answers from the counts. This reads render.c's templates and
 * mirrors what render_line_fast() prints into each hole; a hole it does not know is any
 * text. Given a rank, the holes that only the rank decides (names attached to ids, names of
 * values, the rank itself and ranks relative to it) are printed as that rank's lines print
 * them, through rargs.c's own printer. It decodes no value.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render_i.h"

/* The class byte of a hole: what render_line_fast() prints there in the text view. */
static char hole_class(const struct tmpl_seg *g)
{
	switch (g->kind) {
	case SEG_TS_TEXT:
	case SEG_DUR_TEXT:
	case SEG_THREAD_PAD:
	case SEG_TS:
	case SEG_DUR:
	case SEG_THREAD:
	case SEG_RANK:
	case SEG_TS_US:
	case SEG_DUR_US:
	case SEG_INDEX_US:
	case SEG_RANK_ARG:
		return TFS_SHAPE_NUM;
	case SEG_VAL:
		if (g->json)
			return TFS_SHAPE_ANY;
		if (g->type == TFS_TYPE_U64 || g->type == TFS_TYPE_I64)
			return TFS_SHAPE_NUM;
		return g->type == TFS_TYPE_HEX ? TFS_SHAPE_HEX : TFS_SHAPE_ANY;
	default:
		return TFS_SHAPE_ANY;
	}
}

/* Whether a hole of @g prints the same text on every line of one rank. */
static bool rank_fixed(const struct tmpl_seg *g)
{
	return g->kind == SEG_NAME || g->kind == SEG_SYMNAME || g->kind == SEG_RANK ||
	       g->kind == SEG_RANK_ARG;
}

/* Append @len bytes at @p to the shape in @buf (room @cap) at *@n. */
static void put_text(char *buf, size_t cap, size_t *n, const void *p, size_t len)
{
	if (*n < cap)
		memcpy(buf + *n, p, len < cap - *n ? len : cap - *n);
	*n += len;
}

/* Print hole @g as @rank prints it, appended to @line. */
static int put_rank_hole(const struct tfs_trace *t, const struct tmpl_seg *g, uint32_t rank,
			 struct tfs_buf *line)
{
	static const uint64_t no_vals[1];
	struct render_in in = {
		.rank = rank, .vals = no_vals,
		.names = t->names.n_runs ? names_table_of(&t->names, rank) : NULL,
	};
	struct sink s = {.out = line};

	line->len = 0;
	if (g->kind == SEG_RANK) {
		char num[24];
		int len = snprintf(num, sizeof(num), "%u", rank);

		return buf_put(line, num, (size_t)len);
	}
	rs_arg_hole(&s, t, g, &in, t->tmpl_text[TFS_VIEW_TEXT]);
	return s.err;
}

static ssize_t term_shape(const struct tfs_trace *t, uint32_t term, uint32_t rank, char *buf,
			  size_t cap)
{
	const struct tmpl_seg *g;
	const char *text = t->tmpl_text[TFS_VIEW_TEXT];
	struct tfs_buf hole;
	size_t n = 0;
	int rc = 0;

	if (term >= t->n_terms)
		return -ENOENT;
	buf_init(&hole);
	for (g = t->segs[TFS_VIEW_TEXT] + t->tmpl_first[TFS_VIEW_TEXT][term];
	     g->kind != SEG_END && rc == 0; g++) {
		if (g->kind == SEG_TEXT) {
			put_text(buf, cap, &n, text + g->a, g->len);
		} else if (rank != UINT32_MAX && rank_fixed(g)) {
			rc = put_rank_hole(t, g, rank, &hole);
			if (rc == 0)
				put_text(buf, cap, &n, hole.data, hole.len);
		} else {
			if (n < cap)
				buf[n] = hole_class(g);
			n++;
		}
	}
	buf_fini(&hole);
	if (rc < 0)
		return rc;
	if (n < cap)
		buf[n] = TFS_SHAPE_PAD;
	n++;
	if (cap)
		buf[n < cap ? n : cap - 1] = '\0';
	return (ssize_t)n;
}

ssize_t tfs_trace_term_shape(const struct tfs_trace *t, uint32_t term, char *buf, size_t cap)
{
	return term_shape(t, term, UINT32_MAX, buf, cap);
}

ssize_t tfs_trace_term_shape_rank(const struct tfs_trace *t, uint32_t term, uint32_t rank,
				  char *buf, size_t cap)
{
	if (rank == UINT32_MAX)
		return -ENOENT;
	return term_shape(t, term, rank, buf, cap);
}

/*
 * Add to @counts the occurrences of each terminal among the first @x events of block @gr:
 * one walk down the rule that holds event @x (whole elements before it counted at their
 * rule, in @mult, zeroed by the caller), then the rules' counts pushed down to terminals.
 */
static void add_prefix(const struct tfs_grammar *gr, uint64_t x, uint64_t *mult,
		       uint64_t *counts)
{
	uint32_t r = gr->n_rules - 1;

	while (x > 0) {
		const struct gram_rule *ru = &gr->rules[r];
		uint32_t i;

		for (i = 0; i < ru->n_elems; i++) {
			const struct gram_elem *e = &gr->elems[ru->first_elem + i];
			const uint64_t ue = e->is_rule ? gr->rules[e->id].n_events : 1;
			uint64_t *slot = e->is_rule ? &mult[e->id] : &counts[e->id];

			if (ue && x < e->count * ue) { /* event x lies in this element */
				*slot += x / ue;
				x %= ue;
				break;
			}
			*slot += e->count;
			x -= e->count * ue;
		}
		if (i == ru->n_elems || !gr->elems[ru->first_elem + i].is_rule)
			break;
		r = gr->elems[ru->first_elem + i].id;
	}
	/* rules only use lower-numbered rules: parents are done before children */
	for (uint32_t q = gr->n_rules; q-- > 0;) {
		const struct gram_rule *ru = &gr->rules[q];

		for (uint32_t i = 0; i < ru->n_elems && mult[q]; i++) {
			const struct gram_elem *e = &gr->elems[ru->first_elem + i];

			if (e->is_rule)
				mult[e->id] += mult[q] * e->count;
			else
				counts[e->id] += mult[q] * e->count;
		}
	}
}

int tfs_trace_term_counts_range(const struct tfs_trace *t, uint32_t stream, uint64_t first,
				uint64_t n, uint64_t *counts)
{
	const struct gsec *g;
	uint64_t end, *before, *mult = NULL;
	int rc = 0;

	if (stream >= t->n_streams)
		return -ENOENT;
	if (!add_u64(first, n, &end) || end > t->streams[stream].n_events)
		return -EINVAL;
	g = &t->gsecs[t->streams[stream].gsec];
	memset(counts, 0, (size_t)t->n_terms * sizeof(*counts));
	before = calloc((size_t)t->n_terms + 1, sizeof(*before));
	if (!before)
		return -ENOMEM;
	/* counts of [first, end) = counts of [0, end) - counts of [0, first), block by block */
	for (uint32_t b = 0; b < g->n_blocks && rc == 0; b++) {
		const struct tfs_grammar *gr = &g->blocks[b];
		const uint64_t b0 = g->blk_events[b], b1 = g->blk_events[b + 1];

		if (b1 <= first || b0 >= end)
			continue;
		mult = calloc(gr->n_rules, sizeof(*mult));
		if (!mult) {
			rc = -ENOMEM;
			break;
		}
		add_prefix(gr, (end < b1 ? end : b1) - b0, mult, counts);
		if (first > b0) {
			memset(mult, 0, gr->n_rules * sizeof(*mult));
			add_prefix(gr, first - b0, mult, before);
		}
		free(mult);
	}
	for (uint32_t i = 0; i < t->n_terms; i++)
		counts[i] -= before[i];
	free(before);
	return rc;
}
