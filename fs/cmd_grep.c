/*
 * `tracefs grep [-c] [-n] [-m N] [-F|-E] PATTERN TRACE PATH`: what GNU grep prints for the
 * same options over file PATH of the trace's tree (in the C locale), byte for byte.
 *
 * Which path a search takes:
 * - By signature: trace.txt views (a thread's, a rank's, a phase's, a window's,
 *   calls/<name>/), for every pattern grep_pat.c can test against a signature's shape: fixed
 *   text (-F, or a pattern without special characters) and basic or extended expressions.
 *   The pattern is tested once per call signature against the signature's shape as the
 *   segment's rank prints it (tfs_trace_term_shape_rank(): its constant text; the names
 *   attached to ids, such as `fd=3</etc/passwd>`, and the names of values and ranks as that
 *   rank's lines print them; each other varying field a class of characters). Each
 *   signature is then one of:
 *   - SIG_ALWAYS, every line selected: with -c its lines are counted from the grammar
 *     (tfs_trace_term_counts_range()), with no per-event work; else they are rendered and
 *     printed without a test;
 *   - SIG_NEVER, no line can be: its events are skipped, neither decoded nor rendered;
 *   - SIG_MAYBE, it depends on the varying fields: its lines are rendered and tested.
 *   Only the events of the signatures rendered are walked (tfs_cursor_new_terms()), in file
 *   order; -n numbers them by their event's place in the view (or the kind's place in a
 *   calls/ view), -m N stops at the N-th selected line. So a pattern that only fixed text
 *   can hold (a function name, a constant argument, a path) is answered with -c from the
 *   counts alone, and one that touches varying fields decodes only the value blocks of the
 *   events whose signature may match.
 * - By reading: everything else is read as `tracefs cat` reads it and every line tested:
 *   events.jsonl and the other views, generated files, a timed rank's or phase's trace.txt
 *   of several threads and its calls/<name>/ views when printing lines (they are interleaved
 *   by time; -c takes the signature path there), a search whose every signature may match
 *   (nothing to skip, so the plain read is the cheaper one), and fixed text holding control
 *   characters.
 * Matching is memmem() for fixed text and regexec() for patterns (glibc's POSIX regex: GNU
 * grep's own syntax but for its few extensions beyond glibc's). A PATTERN holding newlines
 * is several patterns, as for grep: a line is selected when one matches. Exit status as
 * grep's: 0 a line selected, 1 none, 2 an error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_i.h"
#include "grep_i.h"
#include "tfs/reader.h"
#include "vtree_i.h"

#define EXIT_NONE 1
#define EXIT_ERROR 2
#define READ_CHUNK (1u << 20)

static bool write_all(const char *p, size_t n)
{
	return fwrite(p, 1, n, stdout) == n;
}

/* Print selected line @p (@len bytes, its newline included), numbered @line_no with -n. */
static int emit(const struct fs_grep_opts *o, uint64_t line_no, const char *p, size_t len)
{
	if (o->count)
		return 0;
	if (o->number && printf("%" PRIu64 ":", line_no) < 0)
		return -EIO;
	return write_all(p, len) ? 0 : -EIO;
}

/* ---- by signature ---- */

/* A search of one file's stream views by signature. */
struct sig_search {
	struct tfs_trace *t;
	const struct fs_grep_pat *m;
	const struct fs_grep_opts *o;
	struct tfs_trace_info ti;
	uint32_t call;	  /* 1 + the one kind the file shows, 0: every kind */
	uint32_t rank;	  /* whose shapes cls[] holds, UINT32_MAX: none yet */
	uint8_t *cls;	  /* [n_terminals] SIG_* */
	uint8_t *terms;	  /* [n_terminals] the terminals to render */
	uint64_t *counts; /* [n_terminals] occurrences in the segment */
	char *shape;
	unsigned char *live;
	size_t shape_cap;
	char *line; /* a rendered line NUL-terminated, for regexec() */
	size_t line_cap;
	uint64_t line_base; /* lines of the file before the segment */
	uint64_t selected;
};

static int shape_room(struct sig_search *s, size_t len)
{
	if (len < s->shape_cap)
		return 0;
	free(s->shape);
	free(s->live);
	s->shape_cap = len + 1;
	s->shape = malloc(s->shape_cap);
	s->live = malloc(s->shape_cap + 1);
	return s->shape && s->live ? 0 : -ENOMEM;
}

/* Classify every terminal as @rank's lines print it. */
static int classify(struct sig_search *s, uint32_t rank)
{
	for (uint32_t term = 0; term < s->ti.n_terminals; term++) {
		ssize_t len = tfs_trace_term_shape_rank(s->t, term, rank, s->shape, s->shape_cap);
		int rc;

		if (len >= 0 && (size_t)len >= s->shape_cap) {
			rc = shape_room(s, (size_t)len);
			if (rc < 0)
				return rc;
			len = tfs_trace_term_shape_rank(s->t, term, rank, s->shape, s->shape_cap);
		}
		if (len < 0)
			return (int)len;
		s->cls[term] = (uint8_t)fs_grep_pat_shape(s->m, s->shape, (size_t)len, s->live);
	}
	s->rank = rank;
	return 0;
}

/* Whether terminal @term belongs to the file's kind. */
static bool of_call(const struct sig_search *s, uint32_t term)
{
	uint32_t kind;

	return !s->call || (tfs_trace_term_kind(s->t, term, &kind) == 0 && kind == s->call - 1);
}

/* Whether skipping by signature saves anything: some signature is skipped or counted. */
static bool pays(const struct sig_search *s)
{
	for (uint32_t term = 0; term < s->ti.n_terminals; term++)
		if (of_call(s, term) &&
		    (s->cls[term] == SIG_NEVER || (s->o->count && s->cls[term] == SIG_ALWAYS)))
			return true;
	return false;
}

/* Lines of the file's kind among events [@seg->first, @idx) of @seg's stream. */
static int kind_lines(const struct sig_search *s, const struct fs_view_seg *seg, uint64_t idx,
		      uint64_t *lines)
{
	uint64_t bytes;

	if (!s->call) {
		*lines = idx - seg->first;
		return 0;
	}
	return tfs_trace_kind_view_size(s->t, seg->stream, s->call - 1, TFS_VIEW_TEXT, seg->first,
					idx - seg->first, lines, &bytes);
}

/*
 * Whether line @l is selected. An expression sees it NUL-terminated: regexec() stops at
 * REG_STARTEND's end, but sanitizers check the string up to its NUL.
 */
static bool line_selected(struct sig_search *s, const struct tfs_line *l)
{
	char *p = s->line;

	if (s->m->regex && l->len > s->line_cap) {
		p = realloc(s->line, l->len);
		if (p) {
			s->line = p;
			s->line_cap = l->len;
		}
	}
	if (!s->m->regex || !p) /* memmem() needs no NUL; without memory, test in place */
		return fs_grep_pat_line(s->m, l->text, l->len - 1);
	memcpy(p, l->text, l->len - 1);
	p[l->len - 1] = '\0';
	return fs_grep_pat_line(s->m, p, l->len - 1);
}

/* Render the lines of the terminals s->terms marks in @seg: test, count and print them. */
static int walk_lines(struct sig_search *s, const struct fs_view_seg *seg)
{
	struct tfs_cursor *c;
	struct tfs_line l;
	int rc = tfs_cursor_new_terms(s->t, seg->stream, s->terms, TFS_VIEW_TEXT, seg->first,
				      seg->n, &c);

	while (rc == 0 && s->selected < s->o->max &&
	       (rc = tfs_cursor_next_line(c, &l, NULL)) == 1) {
		uint64_t before = 0;

		rc = 0;
		if (s->cls[l.term] != SIG_ALWAYS && !line_selected(s, &l))
			continue;
		s->selected++;
		if (!s->o->count && s->o->number)
			rc = kind_lines(s, seg, l.index, &before);
		if (rc == 0)
			rc = emit(s->o, s->line_base + before + 1, l.text, l.len);
	}
	tfs_cursor_free(c);
	return rc < 0 ? rc : 0;
}

/* One segment: the counted signatures from the grammar, the rendered ones line by line. */
static int search_seg(struct sig_search *s, const struct fs_view_seg *seg)
{
	bool any = false;
	uint64_t lines;
	int rc = tfs_trace_term_counts_range(s->t, seg->stream, seg->first, seg->n, s->counts);

	for (uint32_t term = 0; term < s->ti.n_terminals && rc == 0; term++) {
		bool counted = s->o->count && s->cls[term] == SIG_ALWAYS;

		s->terms[term] =
		    s->counts[term] && of_call(s, term) && s->cls[term] != SIG_NEVER && !counted;
		any |= s->terms[term];
		if (counted && of_call(s, term))
			s->selected += s->counts[term];
	}
	if (rc == 0 && any)
		rc = walk_lines(s, seg);
	if (rc == 0 && s->o->number) {
		rc = kind_lines(s, seg, seg->first + seg->n, &lines);
		s->line_base += lines;
	}
	return rc;
}

static void sig_search_fini(struct sig_search *s)
{
	free(s->cls);
	free(s->terms);
	free(s->counts);
	free(s->shape);
	free(s->live);
	free(s->line);
}

/*
 * Search the stream views of file @ino by signature, *@selected the lines selected.
 * @return 0, -ENOTSUP (not a trace.txt of streams in file order, or nothing to skip: read
 *         the file instead; nothing printed) or -errno
 */
static int search_signatures(struct tfs_trace *t, struct fs_vtree *vt, uint64_t ino,
			     const struct fs_grep_pat *m, const struct fs_grep_opts *o,
			     uint64_t *selected)
{
	struct sig_search s = {.t = t, .m = m, .o = o, .rank = UINT32_MAX};
	struct fs_view_seg *segs = NULL;
	uint32_t n_segs;
	int view, rc;

	*selected = 0;
	tfs_trace_get_info(t, &s.ti);
	rc = fs_vtree_file_views(vt, ino, &view, &s.call, &segs, &n_segs);
	if (rc == 0 && (view != TFS_VIEW_TEXT || n_segs == 0 ||
			(!o->count && n_segs > 1 && s.ti.timing != TFS_TIMING_NONE)))
		rc = -ENOTSUP;
	if (rc < 0)
		goto out;
	s.cls = calloc((size_t)s.ti.n_terminals + 1, 1);
	s.terms = calloc((size_t)s.ti.n_terminals + 1, 1);
	s.counts = calloc((size_t)s.ti.n_terminals + 1, sizeof(*s.counts));
	rc = s.cls && s.terms && s.counts ? shape_room(&s, 256) : -ENOMEM;
	for (uint32_t i = 0; i < n_segs && rc == 0 && s.selected < o->max; i++) {
		struct tfs_stream_info si;

		rc = tfs_trace_stream(t, segs[i].stream, &si);
		if (rc == 0 && si.rank != s.rank)
			rc = classify(&s, si.rank);
		if (rc == 0 && i == 0 && !pays(&s))
			rc = -ENOTSUP;
		if (rc == 0)
			rc = search_seg(&s, &segs[i]);
	}
	*selected = s.selected;
out:
	sig_search_fini(&s);
	free(segs);
	return rc;
}

/* ---- reading the file ---- */

/* Read file @ino as cat does and test every line; print or count the selected ones. */
static int scan_file(struct fs_vtree *vt, uint64_t ino, const struct fs_grep_pat *m,
		     const struct fs_grep_opts *o, uint64_t *selected)
{
	struct fs_vfile *f;
	uint64_t off = 0, line_no = 0;
	size_t have = 0, cap = READ_CHUNK;
	char *buf = malloc(cap);
	int rc = buf ? fs_vfile_open(vt, ino, &f) : -ENOMEM;

	*selected = 0;
	if (rc < 0) {
		free(buf);
		return rc;
	}
	while (*selected < o->max) {
		ssize_t got;
		char *p, *end, *nl;

		if (have == cap) { /* a line longer than the buffer: grow it */
			char *b = realloc(buf, cap * 2);

			if (!b) {
				rc = -ENOMEM;
				break;
			}
			buf = b;
			cap *= 2;
		}
		got = fs_vfile_read(f, buf + have, cap - have, off);
		if (got < 0) {
			rc = (int)got;
			break;
		}
		if (got == 0 && have) /* a last line without newline: grep adds one */
			buf[have++] = '\n';
		else if (got == 0)
			break;
		off += (uint64_t)got;
		p = buf;
		end = buf + have + got;
		while (*selected < o->max && (nl = memchr(p, '\n', (size_t)(end - p)))) {
			line_no++;
			if (fs_grep_pat_line(m, p, (size_t)(nl - p))) {
				++*selected;
				if (emit(o, line_no, p, (size_t)(nl + 1 - p)) < 0)
					rc = -EIO;
			}
			p = nl + 1;
		}
		have = (size_t)(end - p);
		memmove(buf, p, have);
		if (rc < 0 || got == 0)
			break;
	}
	fs_vfile_close(f);
	free(buf);
	return rc;
}

/* ---- the command ---- */

static int parse_opts(int argc, char **argv, struct fs_grep_opts *o)
{
	int c;

	*o = (struct fs_grep_opts){.max = UINT64_MAX};
	optind = 1;
	opterr = 0;
	while ((c = getopt(argc, argv, "+cnm:FE")) != -1) {
		char *end;

		switch (c) {
		case 'c':
			o->count = true;
			break;
		case 'n':
			o->number = true;
			break;
		case 'm':
			errno = 0;
			o->max = strtoull(optarg, &end, 10);
			if (!*optarg || *end || errno || optarg[0] == '-')
				return fs_usage("grep", "invalid -m count %s", optarg);
			break;
		case 'F':
			o->fixed = true;
			o->extended = false;
			break;
		case 'E':
			o->extended = true;
			o->fixed = false;
			break;
		default:
			return fs_usage("grep", "unknown option %s", argv[optind - 1]);
		}
	}
	if (argc - optind != 3)
		return fs_usage("grep", "needs PATTERN, TRACE and PATH");
	return 0;
}

int fs_cmd_grep(int argc, char **argv)
{
	struct fs_grep_opts o;
	struct fs_grep_pat m;
	struct tfs_trace *t;
	struct fs_vtree *vt;
	uint64_t ino, selected = 0;
	const char *trace, *path;
	int rc = parse_opts(argc, argv, &o), status = EXIT_ERROR;

	if (rc)
		return EXIT_ERROR;
	trace = argv[optind + 1];
	path = argv[optind + 2];
	rc = fs_grep_pat_init(&m, argv[optind], &o);
	if (rc < 0) {
		if (rc == -ENOMEM)
			fs_fail("cannot use pattern: %s", fs_strerror(ENOMEM));
		goto out_matcher;
	}
	if (fs_trace_open(trace, &t)) {
		rc = -EIO;
		goto out_matcher;
	}
	rc = fs_vtree_new(t, NULL, &vt);
	if (rc < 0) {
		fs_fail("cannot list %s: %s", trace, fs_strerror(-rc));
		goto out_close;
	}
	rc = fs_vtree_resolve(vt, path, &ino);
	if (rc < 0) {
		fs_fail("cannot find %s in %s: %s", path, trace, fs_strerror(-rc));
		goto out_tree;
	}
	rc = -ENOTSUP;
	if (o.max)
		rc = search_signatures(t, vt, ino, &m, &o, &selected);
	if (rc == -ENOTSUP)
		rc = scan_file(vt, ino, &m, &o, &selected);
	if (rc < 0) {
		fs_fail("cannot search %s: %s", path, fs_strerror(-rc));
		goto out_tree;
	}
	if (o.count && o.max) /* as GNU grep, -m 0 prints nothing, not even a count */
		printf("%" PRIu64 "\n", selected < o.max ? selected : o.max);
	status = fflush(stdout) == 0 ? (selected && o.max ? 0 : EXIT_NONE) : EXIT_ERROR;
out_tree:
	fs_vtree_free(vt);
out_close:
	tfs_trace_close(t);
out_matcher:
	fs_grep_pat_fini(&m);
	return status;
}
