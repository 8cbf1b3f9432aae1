/*
 * The patterns of `tracefs grep` and what they can match: a line (memmem() for fixed text,
 * glibc's regexec() for basic and extended expressions), and the lines of one signature,
 * known only by its shape (tfs_trace_term_shape_rank(): constant text with each varying
 * field a class of characters). A signature is SIG_ALWAYS when every one of its lines is
 * selected, SIG_NEVER when none can be, else SIG_MAYBE.
 * - Fixed text: always when the constant text holds it, never when no filling of the holes
 *   can (may_occur()).
 * - An expression: always when it matches inside a run of constant text and holds no
 *   assertion (^, $, \b, \<...), so that a match in part of a line is one in the line;
 *   never when each of its alternatives needs a literal text (read off the expression:
 *   runs of ordinary characters that no quantifier makes optional) that cannot occur.
 *   An expression this reading does not follow (a quantifier with nothing before it, an
 *   unclosed group) says nothing: its signatures are SIG_MAYBE, and their lines are tested.
 * Deciding wrongly towards SIG_MAYBE costs time, never a wrong answer; nothing here decides
 * SIG_ALWAYS or SIG_NEVER unless every line of the shape agrees.
 */
#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli_i.h"
#include "grep_i.h"
#include "tfs/reader.h"

/* A literal text that every match of alternative @branch of a pattern holds. */
struct grep_lit {
	uint32_t branch;
	size_t len;
	char *text;
};

/* One line of PATTERN. */
struct grep_one {
	char *text;
	size_t len;
	regex_t re;	  /* compiled unless the patterns are fixed */
	bool asserts;	  /* holds an assertion: a match in part of a line says nothing */
	bool opaque;	  /* not read: its literals are unknown */
	bool has_ctl; /* holds a control byte: no shape tells where it occurs */
	uint32_t n_branches;
	struct grep_lit *lits;
	size_t n_lits;
};

void fs_grep_pat_fini(struct fs_grep_pat *m)
{
	for (size_t i = 0; i < m->n; i++) {
		struct grep_one *p = &m->pat[i];

		free(p->text);
		if (m->regex)
			regfree(&p->re);
		for (size_t j = 0; j < p->n_lits; j++)
			free(p->lits[j].text);
		free(p->lits);
	}
	free(m->pat);
	memset(m, 0, sizeof(*m));
}

/* Whether @p holds a character special to a basic (@ere false) or extended pattern. */
static bool has_special(const char *p, bool ere)
{
	return strpbrk(p, ere ? "\\.[]*^$+?(){}|" : "\\.[]*^$") != NULL;
}

static bool is_ctl(unsigned char c)
{
	return c < ' ' || c == 0x7f;
}

/* ---- reading literals off an expression ---- */

/* The state of must_read(): the run of literal characters being collected. */
struct must {
	struct grep_one *p;
	char *run;
	size_t run_len;
	int err;
};

static void run_end(struct must *mu)
{
	struct grep_one *p = mu->p;
	struct grep_lit *l;

	if (!mu->run_len || mu->err)
		goto out;
	l = realloc(p->lits, (p->n_lits + 1) * sizeof(*l));
	if (!l) {
		mu->err = -ENOMEM;
		goto out;
	}
	p->lits = l;
	l += p->n_lits;
	l->branch = p->n_branches - 1;
	l->len = mu->run_len;
	l->text = strndup(mu->run, mu->run_len);
	if (!l->text) {
		mu->err = -ENOMEM;
		goto out;
	}
	p->n_lits++;
out:
	mu->run_len = 0;
}

/* Index just past the bracket expression opening at @s[@i], or -1. */
static ssize_t bracket_end(const char *s, size_t n, size_t i)
{
	size_t j = i + 1;

	if (j < n && s[j] == '^')
		j++;
	if (j < n && s[j] == ']')
		j++;
	for (; j < n; j++) {
		if (s[j] == '[' && j + 1 < n && strchr(":.=", s[j + 1])) {
			const char close[3] = {s[j + 1], ']', 0};
			const char *q = strstr(s + j + 2, close);

			if (!q || (size_t)(q - s) >= n)
				return -1;
			j = (size_t)(q - s) + 1;
		} else if (s[j] == ']') {
			return (ssize_t)j + 1;
		}
	}
	return -1;
}

/* Index just past the group opening at @s[@i] ("(" or "\("), or -1. */
static ssize_t group_end(const char *s, size_t n, size_t i, bool ere)
{
	size_t depth = 0;

	while (i < n) {
		bool esc = s[i] == '\\' && i + 1 < n;
		char c = esc ? s[i + 1] : s[i];

		if (!esc && c == '[') {
			ssize_t j = bracket_end(s, n, i);

			if (j < 0)
				return -1;
			i = (size_t)j;
			continue;
		}
		if (esc == !ere && c == '(')
			depth++;
		else if (esc == !ere && c == ')' && --depth == 0)
			return (ssize_t)(i + 1 + esc);
		i += 1 + esc;
	}
	return -1;
}

/*
 * The quantifiers after an atom, from @s[*@i] on: *@optional when one may repeat it zero
 * times (an interval is taken as such), *@repeat when one may repeat it. false: an
 * interval not closed.
 */
static bool quantifiers(const char *s, size_t n, size_t *i, bool ere, bool *optional, bool *repeat)
{
	for (;;) {
		bool esc = !ere && *i + 1 < n && s[*i] == '\\';
		char c = esc ? s[*i + 1] : (*i < n ? s[*i] : 0);

		if (c == '*' && !esc) {
			*optional = true;
		} else if ((c == '+' || c == '?') && esc == !ere) {
			*optional |= c == '?';
			*repeat |= c == '+';
		} else if (c == '{' && esc == !ere) {
			const char *q = strstr(s + *i, ere ? "}" : "\\}");

			if (!q || (size_t)(q - s) >= n)
				return false;
			*optional = true;
			*i = (size_t)(q - s) + (ere ? 1 : 2);
			continue;
		} else {
			return true;
		}
		*i += 1 + esc;
	}
}

/*
 * One atom at @s[*@i]: its literal character in *@lit (-1: some other character or text),
 * or none at all (*@atom false: an anchor, an alternation). false: the reading stops.
 */
static bool atom(struct must *mu, const char *s, size_t n, size_t *i, bool ere, int *lit,
		 bool *is_atom)
{
	const char c = s[*i];
	ssize_t j;

	*lit = -1;
	*is_atom = true;
	if (c == '\\') {
		const char d = *i + 1 < n ? s[*i + 1] : 0;

		if (!d || (!ere && strchr("{+?)", d)))
			return false;
		if (!ere && d == '(') {
			j = group_end(s, n, *i, ere);
			if (j < 0)
				return false;
			*i = (size_t)j;
			return true;
		}
		*i += 2;
		if ((!ere && d == '|') || strchr("bB<>`'", d)) {
			run_end(mu);
			*is_atom = false;
			if (d == '|')
				mu->p->n_branches++;
		} else if (!isalnum((unsigned char)d)) {
			*lit = (unsigned char)d;
		}
		return true;
	}
	if (c == '*' || (ere && strchr("+?{)", c)))
		return false;
	if (c == '[' || (ere && c == '(')) {
		j = c == '[' ? bracket_end(s, n, *i) : group_end(s, n, *i, ere);
		if (j < 0)
			return false;
		*i = (size_t)j;
		return true;
	}
	(*i)++;
	if (c == '^' || c == '$' || (ere && c == '|')) {
		run_end(mu);
		*is_atom = false;
		if (c == '|')
			mu->p->n_branches++;
	} else if (c != '.') {
		*lit = (unsigned char)c;
	}
	return true;
}

/* Read @p's alternatives and their literals; @p->opaque when the reading gives up. */
static int must_read(struct grep_one *p, bool ere)
{
	struct must mu = {.p = p, .run = malloc(p->len + 1)};
	size_t i = 0;

	if (!mu.run)
		return -ENOMEM;
	p->n_branches = 1;
	while (i < p->len && !mu.err) {
		bool optional = false, repeat = false, is_atom;
		int lit;

		if (!atom(&mu, p->text, p->len, &i, ere, &lit, &is_atom) ||
		    (is_atom && !quantifiers(p->text, p->len, &i, ere, &optional, &repeat))) {
			p->opaque = true;
			break;
		}
		if (!is_atom)
			continue;
		if (optional || lit < 0 || is_ctl((unsigned char)lit)) {
			run_end(&mu);
			continue;
		}
		mu.run[mu.run_len++] = (char)lit;
		if (repeat)
			run_end(&mu);
	}
	run_end(&mu);
	free(mu.run);
	return mu.err;
}

/* Whether @p holds an assertion (read loosely: any ^ or $ counts). */
static bool has_assertion(const struct grep_one *p)
{
	for (size_t i = 0; i < p->len; i++) {
		if (p->text[i] == '^' || p->text[i] == '$')
			return true;
		if (p->text[i] == '\\' && i + 1 < p->len && strchr("bB<>`'", p->text[++i]))
			return true;
	}
	return false;
}

/* ---- the patterns ---- */

static int compile(struct fs_grep_pat *m, const struct fs_grep_opts *o)
{
	for (size_t i = 0; i < m->n; i++) {
		struct grep_one *p = &m->pat[i];
		int rc = regcomp(&p->re, p->text, REG_NOSUB | (o->extended ? REG_EXTENDED : 0));

		if (rc != 0) {
			char msg[256];

			regerror(rc, &p->re, msg, sizeof(msg));
			for (size_t j = 0; j < i; j++)
				regfree(&m->pat[j].re);
			fs_fail("cannot use pattern %s: %s", p->text, msg);
			return -EINVAL;
		}
	}
	m->regex = true;
	for (size_t i = 0; i < m->n; i++) {
		int rc = must_read(&m->pat[i], o->extended);

		if (rc < 0)
			return rc;
		m->pat[i].asserts = has_assertion(&m->pat[i]);
	}
	return 0;
}

int fs_grep_pat_init(struct fs_grep_pat *m, const char *pattern, const struct fs_grep_opts *o)
{
	const char *p = pattern;

	memset(m, 0, sizeof(*m));
	m->n = 1;
	for (const char *q = pattern; *q; q++)
		m->n += *q == '\n';
	m->pat = calloc(m->n, sizeof(*m->pat));
	if (!m->pat)
		return -ENOMEM;
	m->fixed = true;
	for (size_t i = 0; i < m->n; i++) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		struct grep_one *one = &m->pat[i];

		one->text = strndup(p, len);
		if (!one->text)
			return -ENOMEM;
		one->len = len;
		for (size_t j = 0; j < len; j++)
			one->has_ctl |= is_ctl((unsigned char)p[j]);
		m->fixed &= o->fixed || !has_special(one->text, o->extended);
		p += len + (nl != NULL);
	}
	return m->fixed ? 0 : compile(m, o);
}

bool fs_grep_pat_line(const struct fs_grep_pat *m, const char *s, size_t len)
{
	for (size_t i = 0; i < m->n; i++) {
		const struct grep_one *p = &m->pat[i];

		if (m->fixed) {
			if (p->len == 0 || memmem(s, len, p->text, p->len))
				return true;
		} else {
			regmatch_t r = {.rm_so = 0, .rm_eo = (regoff_t)len};

			if (regexec(&p->re, s, 1, &r, REG_STARTEND) == 0)
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

/* Whether expression @p matches inside one run of @shape's constant text. */
static bool re_in_text(const struct grep_one *p, const char *shape, size_t len)
{
	size_t a = 0;

	while (a < len) {
		size_t b = a;
		regmatch_t r;

		while (b < len && !is_hole(shape[b]))
			b++;
		r = (regmatch_t){.rm_so = (regoff_t)a, .rm_eo = (regoff_t)b};
		if (regexec(&p->re, shape, 1, &r, REG_STARTEND) == 0)
			return true;
		a = b + 1;
	}
	return false;
}

/* SIG_* of one pattern over one shape. */
static int one_shape(const struct fs_grep_pat *m, const struct grep_one *p, const char *shape,
		     size_t len, unsigned char *live)
{
	if (m->fixed) {
		if (p->has_ctl) /* its control bytes would meet the class bytes */
			return SIG_MAYBE;
		if (p->len == 0 || memmem(shape, len, p->text, p->len))
			return SIG_ALWAYS;
		return may_occur(shape, len, p->text, p->len, live) ? SIG_MAYBE : SIG_NEVER;
	}
	if (!p->asserts && re_in_text(p, shape, len))
		return SIG_ALWAYS;
	if (p->opaque)
		return SIG_MAYBE;
	for (uint32_t b = 0; b < p->n_branches; b++) {
		bool can = true;

		for (size_t i = 0; i < p->n_lits && can; i++)
			if (p->lits[i].branch == b)
				can = may_occur(shape, len, p->lits[i].text, p->lits[i].len, live);
		if (can)
			return SIG_MAYBE;
	}
	return SIG_NEVER;
}

int fs_grep_pat_shape(const struct fs_grep_pat *m, const char *shape, size_t len,
		      unsigned char *live)
{
	int cls = SIG_NEVER;

	for (size_t i = 0; i < m->n && cls != SIG_ALWAYS; i++) {
		int c = one_shape(m, &m->pat[i], shape, len, live);

		cls = c > cls ? c : cls;
	}
	return cls;
}
