/*
 * `tracefs grep [-c] [-n] [-m N] [-F|-E] PATTERN TRACE PATH`: what GNU grep prints for the
 * same options over file PATH of the trace's tree (in the C locale), byte for byte.
 *
 * Which path a search takes:
 * - `-c` over trace.txt views (a thread's, a rank's, a phase's, calls/<name>/) with a pattern
 *   that is fixed text (-F, or a basic or extended pattern without special characters):
 *   the pattern is tested once per call signature against the signature's shape (its
 *   constant text, each varying field a class of characters, tfs_trace_term_shape()).
 *   A signature whose constant text holds the pattern matches on every line: its lines are
 *   counted from the grammar (tfs_trace_term_counts_range()), with no per-event work. One
 *   whose shape cannot hold the pattern anywhere is skipped. Only the calls that have a
 *   signature which may or may not match, depending on its varying fields, are rendered:
 *   their calls/ view (tfs_cursor_new_kind()), each line tested.
 * - anything else (line output, -n, regular expressions with special characters,
 *   events.jsonl, generated files): the file is read as `tracefs cat` reads it and every
 *   line is tested, with regexec() for patterns (glibc's POSIX regex: GNU grep's own
 *   syntax but for its few extensions beyond glibc's); -m N stops the read at the N-th
 *   selected line.
 * A PATTERN holding newlines is several patterns, as for grep: a line is selected when one
 * matches. Exit status as grep's: 0 a line selected, 1 none, 2 an error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <regex.h>
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

struct grep_opts {
	bool count, number, fixed, extended;
	uint64_t max; /* -m N; UINT64_MAX: no limit */
};

/* The patterns, one per line of PATTERN. */
struct matcher {
	char **pat;
	size_t *len;
	size_t n;
	bool fixed;	/* match by memmem(): -F, or patterns without special characters */
	bool regex;	/* re[] compiled */
	regex_t *re;
};

/* What a signature's lines do with the patterns. */
enum { SIG_NEVER, SIG_MAYBE, SIG_ALWAYS };

static void matcher_fini(struct matcher *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->pat[i]);
		if (m->regex)
			regfree(&m->re[i]);
	}
	free(m->pat);
	free(m->len);
	free(m->re);
}

/* Whether @p holds a character special to a basic (@ere false) or extended pattern. */
static bool has_special(const char *p, bool ere)
{
	return strpbrk(p, ere ? "\\.[]*^$+?(){}|" : "\\.[]*^$") != NULL;
}

static int matcher_init(struct matcher *m, const char *pattern, const struct grep_opts *o)
{
	const char *p = pattern;
	int rc = 0;

	memset(m, 0, sizeof(*m));
	m->n = 1;
	for (const char *q = pattern; *q; q++)
		m->n += *q == '\n';
	m->pat = calloc(m->n, sizeof(*m->pat));
	m->len = calloc(m->n, sizeof(*m->len));
	m->re = calloc(m->n, sizeof(*m->re));
	if (!m->pat || !m->len || !m->re)
		return -ENOMEM;
	m->fixed = true;
	for (size_t i = 0; i < m->n; i++) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);

		m->pat[i] = strndup(p, len);
		if (!m->pat[i])
			return -ENOMEM;
		m->len[i] = len;
		m->fixed &= o->fixed || !has_special(m->pat[i], o->extended);
		p += len + (nl != NULL);
	}
	if (m->fixed)
		return 0;
	for (size_t i = 0; i < m->n && rc == 0; i++) {
		rc = regcomp(&m->re[i], m->pat[i], REG_NOSUB | (o->extended ? REG_EXTENDED : 0));
		if (rc != 0) {
			char msg[256];

			regerror(rc, &m->re[i], msg, sizeof(msg));
			for (size_t j = 0; j < i; j++)
				regfree(&m->re[j]);
			fs_fail("cannot use pattern %s: %s", m->pat[i], msg);
			return -EINVAL;
		}
	}
	m->regex = true;
	return 0;
}

/* Whether the line @s (@len bytes, no newline) is selected. */
static bool line_matches(const struct matcher *m, const char *s, size_t len)
{
	for (size_t i = 0; i < m->n; i++) {
		if (m->fixed) {
			if (m->len[i] == 0 || memmem(s, len, m->pat[i], m->len[i]))
				return true;
		} else {
			regmatch_t r = {.rm_so = 0, .rm_eo = (regoff_t)len};

			if (regexec(&m->re[i], s, 1, &r, REG_STARTEND) == 0)
				return true;
		}
	}
	return false;
}

/* ---- signatures ---- */

/* Whether character @c may stand in a hole of class @cls (TFS_SHAPE_*). */
static bool in_class(char cls, char c)
{
	switch (cls) {
	case TFS_SHAPE_NUM:
		return (c >= '0' && c <= '9') || c == '.' || c == '-' || c == ' ';
	case TFS_SHAPE_HEX:
		return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == 'x';
	case TFS_SHAPE_PAD:
		return c == ' ';
	default:
		return c != '\n';
	}
}

static bool is_hole(char c)
{
	return c >= TFS_SHAPE_NUM && c <= TFS_SHAPE_PAD;
}

/*
 * Whether @pat can occur in some line of @shape: the positions of the shape that reading
 * the pattern so far may end at (a hole stands for any run of its class, the empty one
 * too). @live is scratch of len + 1 bytes.
 */
static bool may_occur(const char *shape, size_t len, const char *pat, size_t plen,
		      unsigned char *live)
{
	bool any = true;

	memset(live, 1, len + 1); /* a match may start anywhere */
	for (size_t k = 0; k < plen && any; k++) {
		any = false;
		for (size_t j = len + 1; j-- > 0;) { /* right to left: each moves at most one on */
			bool from = live[j];

			live[j] = 0;
			if (!from || j == len)
				continue;
			if (is_hole(shape[j]) ? in_class(shape[j], pat[k]) : shape[j] == pat[k]) {
				if (is_hole(shape[j]))
					live[j] = 1;
				else
					live[j + 1] = 1;
				any = true;
			}
		}
		/* a hole may also end: whatever reaches one reaches what follows it */
		for (size_t j = 0; j < len; j++)
			if (live[j] && is_hole(shape[j]))
				live[j + 1] = 1;
	}
	return any;
}

/* Classify every terminal (SIG_*) against the fixed patterns of @m. */
static int classify(struct tfs_trace *t, const struct matcher *m, uint8_t *cls)
{
	struct tfs_trace_info ti;
	unsigned char *live = NULL;
	char *shape = NULL;
	size_t cap = 0;
	int rc = 0;

	tfs_trace_get_info(t, &ti);
	for (uint32_t term = 0; term < ti.n_terminals && rc == 0; term++) {
		ssize_t len = tfs_trace_term_shape(t, term, shape, cap);

		if (len >= 0 && (size_t)len >= cap) {
			cap = (size_t)len + 1;
			free(shape);
			free(live);
			shape = malloc(cap);
			live = malloc(cap + 1);
			if (!shape || !live) {
				rc = -ENOMEM;
				break;
			}
			len = tfs_trace_term_shape(t, term, shape, cap);
		}
		if (len < 0) {
			rc = (int)len;
			break;
		}
		cls[term] = SIG_NEVER;
		for (size_t i = 0; i < m->n; i++) {
			if (m->len[i] == 0 || memmem(shape, (size_t)len, m->pat[i], m->len[i])) {
				cls[term] = SIG_ALWAYS;
				break;
			}
			if (may_occur(shape, (size_t)len, m->pat[i], m->len[i], live))
				cls[term] = SIG_MAYBE;
		}
	}
	free(shape);
	free(live);
	return rc;
}

/* Whether the patterns may be tested against shapes: fixed text without class bytes. */
static bool shapes_usable(const struct matcher *m)
{
	if (!m->fixed)
		return false;
	for (size_t i = 0; i < m->n; i++)
		for (size_t j = 0; j < m->len[i]; j++)
			if (m->pat[i][j] < ' ' || m->pat[i][j] == 0x7f)
				return false;
	return true;
}

/* Selected lines of the view of @kind over @s (the kind's calls/ view), added to *@count. */
static int count_kind_lines(struct tfs_trace *t, const struct fs_view_seg *s, uint32_t kind,
			    const struct matcher *m, uint64_t *count, char *buf)
{
	struct tfs_cursor *c;
	uint64_t off = 0, size;
	size_t have = 0;
	int rc = tfs_cursor_new_kind(t, s->stream, kind, TFS_VIEW_TEXT, s->first, s->n, &c);

	if (rc < 0)
		return rc;
	size = tfs_cursor_size(c);
	while (off < size) {
		ssize_t got = tfs_cursor_pread(c, buf + have, READ_CHUNK - have, off, NULL);
		char *p = buf, *end, *nl;

		if (got <= 0) {
			rc = got < 0 ? (int)got : -EIO;
			break;
		}
		off += (uint64_t)got;
		end = buf + have + got;
		while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
			*count += line_matches(m, p, (size_t)(nl - p));
			p = nl + 1;
		}
		have = (size_t)(end - p);
		memmove(buf, p, have);
		if (have == READ_CHUNK) { /* a line longer than the buffer: refuse */
			rc = -E2BIG;
			break;
		}
	}
	tfs_cursor_free(c);
	return rc;
}

/*
 * -c over stream views from the signatures: whole signatures from the grammar's counts,
 * the calls with a signature that may or may not match from their rendered lines.
 * @return 0, -ENOTSUP (not a trace.txt of streams) or -errno
 */
static int count_by_signature(struct tfs_trace *t, struct fs_vtree *vt, uint64_t ino,
			      const struct matcher *m, uint64_t *count)
{
	struct tfs_trace_info ti;
	struct fs_view_seg *segs = NULL;
	uint64_t *counts = NULL;
	uint8_t *cls = NULL;
	bool *maybe_kind = NULL;
	char *buf = NULL;
	uint32_t n_segs, call, kind;
	int view, rc;

	*count = 0;
	if (!shapes_usable(m))
		return -ENOTSUP;
	rc = fs_vtree_file_views(vt, ino, &view, &call, &segs, &n_segs);
	if (rc == 0 && view != TFS_VIEW_TEXT)
		rc = -ENOTSUP;
	if (rc < 0)
		goto out;
	tfs_trace_get_info(t, &ti);
	counts = calloc((size_t)ti.n_terminals + 1, sizeof(*counts));
	cls = calloc((size_t)ti.n_terminals + 1, 1);
	maybe_kind = calloc((size_t)ti.n_kinds + 1, sizeof(*maybe_kind));
	buf = malloc(READ_CHUNK);
	rc = counts && cls && maybe_kind && buf ? classify(t, m, cls) : -ENOMEM;
	for (uint32_t term = 0; term < ti.n_terminals && rc == 0; term++)
		if (cls[term] == SIG_MAYBE && tfs_trace_term_kind(t, term, &kind) == 0)
			maybe_kind[kind] = true;
	for (uint32_t i = 0; i < n_segs && rc == 0; i++) {
		rc = tfs_trace_term_counts_range(t, segs[i].stream, segs[i].first, segs[i].n,
						 counts);
		for (uint32_t term = 0; term < ti.n_terminals && rc == 0; term++) {
			if (!counts[term] || cls[term] != SIG_ALWAYS ||
			    tfs_trace_term_kind(t, term, &kind) < 0 || maybe_kind[kind] ||
			    (call && kind != call - 1))
				continue;
			*count += counts[term];
		}
		for (uint32_t k = 0; k < ti.n_kinds && rc == 0; k++)
			if (maybe_kind[k] && (!call || k == call - 1))
				rc = count_kind_lines(t, &segs[i], k, m, count, buf);
	}
out:
	free(buf);
	free(maybe_kind);
	free(cls);
	free(counts);
	free(segs);
	return rc;
}

/* ---- reading the file ---- */

static bool write_all(const char *p, size_t n)
{
	return fwrite(p, 1, n, stdout) == n;
}

/* Read file @ino as cat does and test every line; print or count the selected ones. */
static int scan_file(struct fs_vtree *vt, uint64_t ino, const struct matcher *m,
		     const struct grep_opts *o, uint64_t *selected)
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
			if (line_matches(m, p, (size_t)(nl - p))) {
				++*selected;
				if (!o->count && o->number && printf("%" PRIu64 ":", line_no) < 0)
					rc = -EIO;
				if (!o->count && !write_all(p, (size_t)(nl + 1 - p)))
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

static int parse_opts(int argc, char **argv, struct grep_opts *o)
{
	int c;

	*o = (struct grep_opts){.max = UINT64_MAX};
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
	struct grep_opts o;
	struct matcher m;
	struct tfs_trace *t;
	struct fs_vtree *vt;
	uint64_t ino, selected = 0;
	const char *trace, *path;
	int rc = parse_opts(argc, argv, &o), status = EXIT_ERROR;

	if (rc)
		return EXIT_ERROR;
	trace = argv[optind + 1];
	path = argv[optind + 2];
	rc = matcher_init(&m, argv[optind], &o);
	if (rc < 0) {
		if (rc == -ENOMEM)
			fs_fail("cannot use pattern: %s", fs_strerror(ENOMEM));
		goto out_matcher;
	}
	rc = tfs_trace_open(trace, &t, NULL);
	if (rc < 0) {
		fs_fail("cannot open %s: %s", trace, fs_strerror(-rc));
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
	if (o.count && o.max)
		rc = count_by_signature(t, vt, ino, &m, &selected);
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
	matcher_fini(&m);
	return status;
}
