/*
 * `tracefs compare A B`: whether two traces make the same calls, rank by rank and thread by
 * thread: the same call signatures (compared by their text, so the two traces' signature
 * tables need not be numbered alike) in the same order, however their grammars are cut into
 * rules. Nothing is expanded: every rule gets a hash of its expansion, computed bottom-up
 * from its children's (two polynomial hashes modulo 2^61 - 1, so a repetition costs
 * O(log count)), two streams are equal when their hashes are, and the first difference is
 * found by a binary search on prefix hashes, each O(height x body) to compute. A 10^10-event
 * stream costs what its grammar costs. What is compared: every argument the signature fixes,
 * file names, backtrace ids, buffers (allocation, offset) and format strings excepted
 * (`--paths`, `--stacks`, `--buffers`, `--formats`: those too; a replay proxy writes the
 * bytes a printf wrote through a format of its own); with `--values`
 * also the values that vary per call, event by event (that decodes both traces), apart from
 * addresses (hexadecimal values) and buffer positions (`buf*`); times never. It does not
 * say how the traces differ beyond the first differing call of each thread.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfs/reader.h"
#include "cli_i.h"
#include "compare_i.h"

#define EXIT_DIFFER 1
#define EXIT_USAGE 2
#define LINE_CAP 4096

/* ---- hashes of sequences modulo the Mersenne prime 2^61 - 1 ---- */

#define HP ((UINT64_C(1) << 61) - 1)
static const uint64_t base[2] = {UINT64_C(0x1f3a5c7e9b2d4f61) % HP,
				 UINT64_C(0x0b7e151628aed2a6) % HP};

/* The hash pair of a sequence and its length. */
struct hseq {
	uint64_t h[2];
	uint64_t len;
};

static inline uint64_t mulmod(uint64_t a, uint64_t b)
{
	__uint128_t p = (__uint128_t)a * b;
	uint64_t r = (uint64_t)(p & HP) + (uint64_t)(p >> 61);

	return r >= HP ? r - HP : r;
}

static inline uint64_t addmod(uint64_t a, uint64_t b)
{
	uint64_t r = a + b;

	return r >= HP ? r - HP : r;
}

static uint64_t powmod(uint64_t b, uint64_t e)
{
	uint64_t r = 1;

	for (; e; e >>= 1, b = mulmod(b, b))
		if (e & 1)
			r = mulmod(r, b);
	return r;
}

/* 1 + r + ... + r^(c-1), with r^c in *@rc. */
static uint64_t geo(uint64_t r, uint64_t c, uint64_t *rc)
{
	uint64_t half, rh, g;

	if (c == 0) {
		*rc = 1;
		return 0;
	}
	if (c & 1) {
		g = geo(r, c - 1, &rh);
		*rc = mulmod(rh, r);
		return addmod(mulmod(g, r), 1);
	}
	half = geo(r, c / 2, &rh);
	*rc = mulmod(rh, rh);
	return mulmod(half, addmod(1, rh));
}

/* @a followed by @b. */
static void hs_cat(struct hseq *a, const struct hseq *b)
{
	for (int i = 0; i < 2; i++)
		a->h[i] = addmod(mulmod(a->h[i], powmod(base[i], b->len)), b->h[i]);
	a->len += b->len;
}

/* @x repeated @c times. */
static struct hseq hs_rep(const struct hseq *x, uint64_t c)
{
	struct hseq r = {.len = x->len * c};
	uint64_t rc;

	for (int i = 0; i < 2; i++)
		r.h[i] = mulmod(x->h[i], geo(powmod(base[i], x->len), c, &rc));
	return r;
}

/* ---- one trace's signatures and rule hashes ---- */

struct side {
	const char *path;
	struct tfs_trace *t;
	struct tfs_trace_info ti;
	struct hseq *term; /* [n_terminals]: one event of each signature */
	char **sig;	   /* [n_terminals]: the compared text */
};

struct opts {
	bool values, paths, stacks, buffers, formats;
};

/* A buffer argument: (allocation, offset) as the MPI wrappers record buffers. */
static bool is_buffer_arg(const struct tfs_kind_desc *d, uint32_t i)
{
	const struct tfs_arg_desc *a = &d->args[i];
	size_t n = strlen(a->name);

	if (a->enc == TFS_ENC_SYM && a->sym_class && !strcmp(a->sym_class, "alloc"))
		return true;
	if (i == 0 || n < 5 || strcmp(a->name + n - 4, "_off"))
		return false;
	return !strncmp(d->args[i - 1].name, a->name, n - 4) && d->args[i - 1].enc == TFS_ENC_SYM &&
	       d->args[i - 1].sym_class && !strcmp(d->args[i - 1].sym_class, "alloc");
}

/* File names vary from run to run (mkstemp, pipe:[inode]): compared only with --paths. */
static bool is_path_arg(const struct tfs_arg_desc *a)
{
	static const char *const names[] = {"path", "oldpath", "newpath", "filename",
					     "addr", "sockaddr", NULL};

	if (a->enc != TFS_ENC_STR)
		return false;
	for (int i = 0; names[i]; i++)
		if (!strcmp(a->name, names[i]))
			return true;
	return false;
}

static void put(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (!*buf)
		return;
	if (*len + n + 1 > *cap) {
		size_t c = (*len + n + 1) * 2;
		char *b = realloc(*buf, c);

		if (!b) {
			free(*buf);
			*buf = NULL;
			return;
		}
		*buf = b;
		*cap = c;
	}
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = 0;
}

/* "name(arg=text, ...)" of terminal @term, with what is not compared left out. */
static char *sig_text(const struct side *s, uint32_t term, const struct opts *o)
{
	struct tfs_kind_desc d;
	size_t len = 0, cap = 256;
	char *buf = malloc(cap), arg[LINE_CAP];
	uint32_t kind;

	if (!buf || tfs_trace_term_kind(s->t, term, &kind) < 0 ||
	    tfs_trace_kind(s->t, kind, &d) < 0) {
		free(buf);
		return NULL;
	}
	buf[0] = 0;
	put(&buf, &len, &cap, d.name, strlen(d.name));
	put(&buf, &len, &cap, "(", 1);
	for (uint32_t i = 0; i < d.n_args; i++) {
		const struct tfs_arg_desc *a = &d.args[i];
		const char *text = arg;

		if (tfs_trace_term_arg_text(s->t, term, i, arg, sizeof(arg)) < 0)
			text = "?";
		if (!o->paths && is_path_arg(a))
			text = "<path>";
		if (!o->stacks && a->enc == TFS_ENC_SYM && a->sym_class &&
		    !strcmp(a->sym_class, "stack"))
			text = "stack#?";
		if (!o->buffers && is_buffer_arg(&d, i))
			text = "<buffer>";
		if (!o->formats && a->enc == TFS_ENC_STR && !strcmp(a->name, "format"))
			text = "<format>";
		put(&buf, &len, &cap, i ? ", " : "", i ? 2 : 0);
		put(&buf, &len, &cap, a->name, strlen(a->name));
		put(&buf, &len, &cap, "=", 1);
		put(&buf, &len, &cap, text, strlen(text));
	}
	put(&buf, &len, &cap, ")", 1);
	return buf;
}

/* Two independent 61-bit codes of a signature's text, never 0. */
static struct hseq text_hash(const char *s)
{
	struct hseq r = {.len = 1};
	uint64_t a = UINT64_C(0xcbf29ce484222325), b = UINT64_C(0x84222325cbf29ce4);

	for (; *s; s++) {
		a = (a ^ (uint8_t)*s) * UINT64_C(0x100000001b3);
		b = (b + (uint8_t)*s + 1) * UINT64_C(0x9e3779b97f4a7c15);
		b ^= b >> 29;
	}
	a ^= a >> 31;
	r.h[0] = a % (HP - 1) + 1;
	r.h[1] = b % (HP - 1) + 1;
	return r;
}

static void side_fini(struct side *s)
{
	for (uint32_t i = 0; s->sig && i < s->ti.n_terminals; i++)
		free(s->sig[i]);
	free(s->sig);
	free(s->term);
	tfs_trace_close(s->t);
}

static int side_open(struct side *s, const char *path, const struct opts *o)
{
	s->path = path;
	if (fs_trace_open(path, &s->t))
		return 1;
	tfs_trace_get_info(s->t, &s->ti);
	s->term = calloc((size_t)s->ti.n_terminals + 1, sizeof(*s->term));
	s->sig = calloc((size_t)s->ti.n_terminals + 1, sizeof(*s->sig));
	if (!s->term || !s->sig)
		return fs_fail("cannot compare %s: out of memory", path);
	for (uint32_t i = 0; i < s->ti.n_terminals; i++) {
		s->sig[i] = sig_text(s, i, o);
		if (!s->sig[i])
			return fs_fail("cannot compare %s: out of memory", path);
		s->term[i] = text_hash(s->sig[i]);
	}
	return 0;
}

/* The rule hashes of one stream's grammar: [block][rule]. */
struct ghash {
	uint32_t n_blocks;
	uint32_t *n_rules;
	struct hseq **rule;
};

static void ghash_fini(struct ghash *g)
{
	for (uint32_t b = 0; g->rule && b < g->n_blocks; b++)
		free(g->rule[b]);
	free(g->rule);
	free(g->n_rules);
}

static struct hseq elem_hash(const struct side *s, const struct ghash *g, uint32_t block,
			     const struct tfs_rule_elem *e)
{
	return e->is_rule ? g->rule[block][e->id] : s->term[e->id];
}

static int ghash_build(const struct side *s, uint32_t stream, struct ghash *g)
{
	struct tfs_grammar_info gi;
	int rc = tfs_trace_grammar_info(s->t, stream, &gi);

	memset(g, 0, sizeof(*g));
	if (rc < 0)
		return rc;
	g->n_blocks = gi.n_blocks;
	g->n_rules = calloc(gi.n_blocks + 1, sizeof(*g->n_rules));
	g->rule = calloc(gi.n_blocks + 1, sizeof(*g->rule));
	if (!g->n_rules || !g->rule)
		return -ENOMEM;
	for (uint32_t b = 0; b < gi.n_blocks; b++) {
		struct tfs_block_info bi;

		rc = tfs_trace_block(s->t, stream, b, &bi);
		if (rc < 0)
			return rc;
		g->n_rules[b] = bi.n_rules;
		g->rule[b] = calloc(bi.n_rules, sizeof(**g->rule));
		if (!g->rule[b])
			return -ENOMEM;
		/* a rule uses lower-numbered rules only */
		for (uint32_t r = 0; r < bi.n_rules; r++) {
			struct tfs_rule_info ri;
			struct hseq h = {{0, 0}, 0};

			rc = tfs_trace_rule(s->t, stream, b, r, &ri);
			for (uint32_t i = 0; rc == 0 && i < ri.n_elems; i++) {
				struct tfs_rule_elem e;
				struct hseq x;

				rc = tfs_trace_rule_elem(s->t, stream, b, r, i, &e);
				if (rc < 0)
					break;
				x = elem_hash(s, g, b, &e);
				x = hs_rep(&x, e.count);
				hs_cat(&h, &x);
			}
			if (rc < 0)
				return rc;
			g->rule[b][r] = h;
		}
	}
	return 0;
}

/*
 * Append the hash of the first @k events of rule @rule of block @b (k < its events) to
 * @out: whole elements, then whole repetitions, then down into the one rule holding the rest.
 */
static int rule_prefix(const struct side *s, uint32_t stream, const struct ghash *g, uint32_t b,
		       uint32_t rule, uint64_t k, struct hseq *out)
{
	while (k > 0) {
		struct tfs_rule_info ri;
		struct tfs_rule_elem e = {0};
		struct hseq x, xs;
		uint32_t i = 0;
		int rc = tfs_trace_rule(s->t, stream, b, rule, &ri);

		for (; rc == 0 && i < ri.n_elems; i++) {
			rc = tfs_trace_rule_elem(s->t, stream, b, rule, i, &e);
			x = elem_hash(s, g, b, &e);
			if (rc < 0 || k < x.len * e.count)
				break;
			xs = hs_rep(&x, e.count);
			hs_cat(out, &xs);
			k -= xs.len;
		}
		if (rc < 0)
			return rc;
		if (i == ri.n_elems)
			return k ? -EINVAL : 0;
		xs = hs_rep(&x, k / x.len);
		hs_cat(out, &xs);
		k %= x.len;
		if (k && !e.is_rule)
			return -EINVAL; /* a terminal's length is 1 */
		rule = e.id;
	}
	return 0;
}

/* The hash of a stream's first @k events (its blocks one after the other). */
static int stream_prefix(const struct side *s, uint32_t stream, const struct ghash *g, uint64_t k,
			 struct hseq *out)
{
	memset(out, 0, sizeof(*out));
	for (uint32_t b = 0; b < g->n_blocks && k > 0; b++) {
		const struct hseq *start = &g->rule[b][g->n_rules[b] - 1];

		if (k >= start->len) {
			hs_cat(out, start);
			k -= start->len;
			continue;
		}
		return rule_prefix(s, stream, g, b, g->n_rules[b] - 1, k, out);
	}
	return 0;
}

static bool hs_equal(const struct hseq *a, const struct hseq *b)
{
	return a->len == b->len && a->h[0] == b->h[0] && a->h[1] == b->h[1];
}

/* ---- streams ---- */

struct pair {
	const struct side *s;
	uint32_t stream;
	uint64_t n_events;
	struct ghash g;
};

/* Print event @idx of @p's stream as its trace.txt line (without the newline). */
static void print_event(const char *label, const struct pair *p, uint64_t idx)
{
	struct tfs_cursor *c = NULL;
	uint64_t off, end;
	char line[LINE_CAP];
	ssize_t n;

	if (idx >= p->n_events) {
		printf("  %s: (ends after %" PRIu64 " events)\n", label, p->n_events);
		return;
	}
	if (tfs_cursor_new((struct tfs_trace *)p->s->t, p->stream, TFS_VIEW_TEXT, idx, 1, &c) < 0 ||
	    tfs_cursor_event_offset(c, 0, &off) < 0 || tfs_cursor_event_offset(c, 1, &end) < 0 ||
	    (n = tfs_cursor_pread(c, line, sizeof(line) - 1, off, NULL)) <= 0) {
		printf("  %s: (cannot read event %" PRIu64 ")\n", label, idx);
		tfs_cursor_free(c);
		return;
	}
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == ' '))
		n--;
	line[n] = 0;
	printf("  %s: %s\n", label, line);
	tfs_cursor_free(c);
}

/*
 * The first event where the two streams' calls differ, or UINT64_MAX when they are the
 * same: a binary search for the longest common prefix.
 */
static int first_difference(struct pair *a, struct pair *b, uint64_t *at)
{
	uint64_t lo = 0, hi = a->n_events < b->n_events ? a->n_events : b->n_events;
	struct hseq ha, hb;
	int rc;

	rc = stream_prefix(a->s, a->stream, &a->g, hi, &ha);
	if (rc == 0)
		rc = stream_prefix(b->s, b->stream, &b->g, hi, &hb);
	if (rc < 0)
		return rc;
	if (hs_equal(&ha, &hb)) {
		*at = a->n_events == b->n_events ? UINT64_MAX : hi;
		return 0;
	}
	/* prefixes of lo events are equal, of hi events differ */
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		rc = stream_prefix(a->s, a->stream, &a->g, mid, &ha);
		if (rc == 0)
			rc = stream_prefix(b->s, b->stream, &b->g, mid, &hb);
		if (rc < 0)
			return rc;
		if (hs_equal(&ha, &hb))
			lo = mid;
		else
			hi = mid;
	}
	*at = lo;
	return 0;
}

/* Values are compared unless they are addresses or buffer positions. */
static bool value_compared(const struct tfs_arg_desc *a)
{
	return a->enc == TFS_ENC_VAL && a->type != TFS_TYPE_HEX && strncmp(a->name, "buf", 3);
}

/* The first event whose compared values differ (UINT64_MAX: none); calls are equal. */
static int first_value_difference(struct pair *a, struct pair *b, uint64_t *at)
{
	struct tfs_cursor *ca = NULL, *cb = NULL;
	int rc;

	*at = UINT64_MAX;
	rc = tfs_cursor_new((struct tfs_trace *)a->s->t, a->stream, TFS_VIEW_TEXT, 0, a->n_events,
			    &ca);
	if (rc == 0)
		rc = tfs_cursor_new((struct tfs_trace *)b->s->t, b->stream, TFS_VIEW_TEXT, 0,
				    b->n_events, &cb);
	for (uint64_t i = 0; rc == 0 && i < a->n_events && *at == UINT64_MAX; i++) {
		struct tfs_event ea, eb;
		struct tfs_kind_desc d;

		rc = tfs_cursor_event(ca, i, &ea, NULL);
		if (rc == 0)
			rc = tfs_cursor_event(cb, i, &eb, NULL);
		if (rc == 0)
			rc = tfs_trace_kind(a->s->t, ea.kind, &d);
		for (uint32_t k = 0; rc == 0 && k < d.n_args && k < eb.n_args; k++)
			if (value_compared(&d.args[k]) && ea.args[k].u != eb.args[k].u)
				*at = i;
	}
	tfs_cursor_free(ca);
	tfs_cursor_free(cb);
	return rc;
}

/* Compare one stream of each side. @return 1 same, 0 different, or -errno */
static int compare_streams(const struct side *sa, uint32_t ia, const struct side *sb, uint32_t ib,
			   const struct opts *o, uint32_t rank, uint32_t thread)
{
	struct pair a = {.s = sa, .stream = ia}, b = {.s = sb, .stream = ib};
	struct tfs_stream_info si;
	uint64_t at = UINT64_MAX;
	int rc;

	rc = tfs_trace_stream(sa->t, ia, &si);
	a.n_events = si.n_events;
	if (rc == 0)
		rc = tfs_trace_stream(sb->t, ib, &si);
	b.n_events = si.n_events;
	if (rc == 0)
		rc = ghash_build(sa, ia, &a.g);
	if (rc == 0)
		rc = ghash_build(sb, ib, &b.g);
	if (rc == 0)
		rc = first_difference(&a, &b, &at);
	if (rc == 0 && at == UINT64_MAX && o->values)
		rc = first_value_difference(&a, &b, &at);
	if (rc == 0 && at != UINT64_MAX) {
		printf("rank %" PRIu32 " thread %" PRIu32 ": differ at event %" PRIu64 "%s\n", rank,
		       thread, at, at < a.n_events && at < b.n_events ? "" : " (one ends there)");
		print_event("A", &a, at);
		print_event("B", &b, at);
	}
	ghash_fini(&a.g);
	ghash_fini(&b.g);
	return rc < 0 ? rc : at == UINT64_MAX;
}

/* Compare every stream of rank @r. @return 1 same, 0 different, or -errno */
static int compare_rank(const struct side *a, const struct side *b, uint32_t r,
			const struct opts *o)
{
	uint64_t events = 0;
	uint32_t threads = 0;
	int same = 1;

	for (int pass = 0; pass < 2; pass++) {
		const struct side *x = pass ? b : a, *y = pass ? a : b;

		uint32_t first, n;

		tfs_trace_rank_streams(x->t, r, &first, &n);
		for (uint32_t k = first; k < first + n; k++) {
			struct tfs_stream_info si;
			uint32_t i, j;
			int rc = tfs_trace_stream_sorted(x->t, k, &i);

			if (rc == 0)
				rc = tfs_trace_stream(x->t, i, &si);
			if (rc < 0)
				return rc;
			if (tfs_trace_find_stream(y->t, r, si.thread, &j) < 0) {
				printf("rank %" PRIu32 " thread %" PRIu32 ": only in %s (%" PRIu64
				       " events)\n",
				       r, si.thread, pass ? "B" : "A", si.n_events);
				same = 0;
				continue;
			}
			if (pass)
				continue;
			rc = compare_streams(a, i, b, j, o, r, si.thread);
			if (rc < 0)
				return rc;
			same &= rc;
			events += si.n_events;
			threads++;
		}
	}
	if (same)
		printf("rank %" PRIu32 ": same calls (%" PRIu64 " events, %" PRIu32 " thread%s)\n",
		       r, events, threads, threads == 1 ? "" : "s");
	return same;
}

/*
 * The rank after @r (the first when @r is UINT32_MAX) that has streams in @a or @b:
 * UINT32_MAX when none has. O(log streams): the ranks compared are those with streams,
 * whatever number of ranks the traces count.
 */
static uint32_t next_rank(const struct side *a, const struct side *b, uint32_t r)
{
	uint32_t best = UINT32_MAX;

	for (int pass = 0; pass < 2; pass++) {
		const struct side *x = pass ? b : a;
		struct tfs_stream_info si;
		uint32_t lo = 0, hi = x->ti.n_streams, idx;

		/* the first of the streams sorted by rank whose rank is past @r */
		while (r != UINT32_MAX && lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;

			if (tfs_trace_stream_sorted(x->t, mid, &idx) == 0 &&
			    tfs_trace_stream(x->t, idx, &si) == 0 && si.rank <= r)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (tfs_trace_stream_sorted(x->t, lo, &idx) == 0 &&
		    tfs_trace_stream(x->t, idx, &si) == 0 && si.rank < best)
			best = si.rank;
	}
	return best;
}

int fs_cmd_compare(int argc, char **argv)
{
	static const struct option lopts[] = {{"values", no_argument, NULL, 'v'},
					      {"paths", no_argument, NULL, 'p'},
					      {"stacks", no_argument, NULL, 's'},
					      {"buffers", no_argument, NULL, 'b'},
					      {"formats", no_argument, NULL, 'f'},
					      {0}};
	struct side a = {0}, b = {0};
	struct opts o = {0};
	uint32_t n_ranks, n_same = 0;
	int c, rc = 0, status = EXIT_DIFFER;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		if (c == 'v')
			o.values = true;
		else if (c == 'p')
			o.paths = true;
		else if (c == 's')
			o.stacks = true;
		else if (c == 'b')
			o.buffers = true;
		else if (c == 'f')
			o.formats = true;
		else {
			return fs_usage("compare", "unknown option %s", argv[optind - 1]);
		}
	}
	if (argc - optind != 2)
		return fs_usage("compare", "needs two TRACEs");
	if (side_open(&a, argv[optind], &o) || side_open(&b, argv[optind + 1], &o))
		goto out;
	n_ranks = a.ti.n_ranks > b.ti.n_ranks ? a.ti.n_ranks : b.ti.n_ranks;
	/* a rank without streams in either makes the same calls (none) */
	n_same = n_ranks;
	for (uint32_t r = next_rank(&a, &b, UINT32_MAX); r != UINT32_MAX && rc >= 0;
	     r = next_rank(&a, &b, r)) {
		rc = compare_rank(&a, &b, r, &o);
		n_same -= rc == 0;
	}
	if (rc < 0) {
		fs_fail("cannot compare %s and %s: %s", a.path, b.path, fs_strerror(-rc));
		goto out;
	}
	if (n_same == n_ranks) {
		printf("the traces make the same calls (%" PRIu32 " rank%s)\n", n_ranks,
		       n_ranks == 1 ? "" : "s");
		status = 0;
	} else {
		printf("the traces differ: %" PRIu32 " of %" PRIu32 " ranks make the same calls\n",
		       n_same, n_ranks);
	}
	if (fflush(stdout) != 0)
		status = EXIT_DIFFER;
out:
	side_fini(&a);
	side_fini(&b);
	return status;
}
