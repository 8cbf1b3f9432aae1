/*
 * One event to one line of a view (FORMAT.md §9), from the schema stored in the trace.
 * The line functions describe a terminal's line once, as constant text and "holes" (the
 * numbers that vary per occurrence), and run once per terminal and view at open: that gives
 * the terminal's fixed line length (each hole counted at its width) and a template
 * (constant bytes and hole descriptors). Rendering an occurrence only copies the constant
 * bytes, prints the holes and pads the line to its length. One description, so a line's
 * length and its rendering can never disagree. It does not walk grammars or decode values.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_i.h"

/* The most characters a hole other than a name prints (a time as seconds, 20 + 10). */
#define HOLE_MAX 32
/* render_line_fast() copies text of up to this many bytes as one word: room after both. */
#define FAST_SLACK 16

/*
 * Where bytes go: appended to a buffer, or recorded into a template (@tb). A buffer whose
 * capacity is exactly the line's length (rendering in place into a reader's buffer) is never
 * grown: a line that would not fit is corrupt data, refused before a byte lands outside.
 */
struct sink {
	struct tfs_buf *out;
	uint64_t n;	      /* bytes of the line so far (holes at their width when recording) */
	bool fixed;
	int err;
	struct tfs_buf *segs; /* recording: struct tmpl_seg */
	struct tfs_buf *text; /* recording: the constant bytes */
};

/* Recording a template: extend its last text segment or start one. */
static void __attribute__((noinline)) put_record(struct sink *s, const void *p, size_t n)
{
	struct tmpl_seg *last = s->segs->len ? (struct tmpl_seg *)(s->segs->data +
				s->segs->len) - 1 : NULL;

	if (!last || last->kind != SEG_TEXT) {
		struct tmpl_seg seg = {.kind = SEG_TEXT, .a = s->text->len};

		s->err = buf_put(s->segs, &seg, sizeof(seg));
		if (s->err)
			return;
		last = (struct tmpl_seg *)(s->segs->data + s->segs->len) - 1;
	}
	s->err = buf_put(s->text, p, n);
	if (!s->err)
		last->len += n;
}

static inline void put(struct sink *s, const void *p, size_t n)
{
	struct tfs_buf *b = s->out;

	s->n += n;
	if (s->err)
		return;
	if (__builtin_expect(s->segs != NULL, 0)) {
		put_record(s, p, n);
	} else if (b->cap - b->len >= n) {
		memcpy(b->data + b->len, p, n);
		b->len += n;
	} else if (s->fixed) {
		s->err = -TFS_ECORRUPT;
	} else {
		s->err = buf_put(b, p, n);
	}
}

static void puts_(struct sink *s, const char *str)
{
	put(s, str, strlen(str));
}

/* Record a hole of @width characters (recording mode only). */
static void hole(struct sink *s, uint8_t kind, unsigned int width, uint8_t type, bool json,
		 uint32_t val, uint64_t a)
{
	struct tmpl_seg seg = {.kind = kind, .type = type, .json = json, .val = val, .a = a};

	s->n += width;
	if (!s->err)
		s->err = buf_put(s->segs, &seg, sizeof(seg));
}

static const char digit_pairs[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

/* Unsigned decimal right-aligned in @width (0: natural width). */
static void put_dec(struct sink *s, uint64_t v, unsigned int width)
{
	char tmp[24];
	char *p = tmp + sizeof(tmp);

	while (v >= 100) {
		p -= 2;
		memcpy(p, digit_pairs + 2 * (v % 100), 2);
		v /= 100;
	}
	if (v >= 10) {
		p -= 2;
		memcpy(p, digit_pairs + 2 * v, 2);
	} else {
		*--p = (char)('0' + v);
	}
	while ((size_t)(tmp + sizeof(tmp) - p) < width && p > tmp)
		*--p = ' ';
	put(s, p, (size_t)(tmp + sizeof(tmp) - p));
}

static void put_i64(struct sink *s, int64_t v)
{
	if (v < 0) {
		put(s, "-", 1);
		put_dec(s, -(uint64_t)v, 0);
	} else {
		put_dec(s, (uint64_t)v, 0);
	}
}

static void put_hex(struct sink *s, uint64_t v)
{
	static const char digit[] = "0123456789abcdef";
	char tmp[18];
	unsigned int n = 0;

	do {
		tmp[sizeof(tmp) - 1 - n++] = digit[v & 15];
		v >>= 4;
	} while (v);
	tmp[sizeof(tmp) - 1 - n++] = 'x';
	tmp[sizeof(tmp) - 1 - n++] = '0';
	put(s, tmp + sizeof(tmp) - n, n);
}

/* Exactly nine digits, zero-padded. */
static void put_nanos(struct sink *s, uint64_t v)
{
	char tmp[9];

	for (int i = 8; i >= 0; i--) {
		tmp[i] = (char)('0' + v % 10);
		v /= 10;
	}
	put(s, tmp, sizeof(tmp));
}

/* The absolute rank a RANK word means in a stream of rank @rank. */
static int64_t rank_abs(uint64_t word, uint32_t rank)
{
	if (rank_word_special(word))
		return rank_word_value(word);
	return (int64_t)((uint64_t)rank_word_value(word) + rank);
}

static unsigned int signed_width(int64_t v)
{
	return v < 0 ? 1 + dec_digits(-(uint64_t)v) : dec_digits((uint64_t)v);
}

unsigned int render_rank_width(const struct tfs_trace *t, uint64_t word)
{
	int64_t rel = rank_word_value(word);
	unsigned int a = signed_width(rel);

	if (rank_word_special(word))
		return a;
	unsigned int b = signed_width((int64_t)((uint64_t)rel + (t->n_ranks - 1)));

	return a > b ? a : b;
}

static void put_num(struct sink *s, uint8_t type, uint64_t v, bool json)
{
	if (type == TFS_TYPE_I64) {
		put_i64(s, (int64_t)v);
	} else if (type == TFS_TYPE_HEX) {
		if (json)
			put(s, "\"", 1);
		put_hex(s, v);
		if (json)
			put(s, "\"", 1);
	} else {
		put_dec(s, v, 0);
	}
}

static inline bool plain(uint8_t c)
{
	return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}

/*
 * FORMAT.md §9.1 escapes of @p between the delimiters @open and @close; with @gt, '>' is
 * escaped too (a name between '<' and '>').
 */
static void put_escaped_in(struct sink *s, const uint8_t *p, size_t n, bool json, char open,
			   char close, bool gt)
{
	static const char hex[] = "0123456789abcdef";

	put(s, &open, 1);
	for (size_t i = 0; i < n;) {
		size_t run = i;
		uint8_t c;

		while (run < n && plain(p[run]) && !(gt && p[run] == '>'))
			run++;
		put(s, p + i, run - i);
		if (run == n)
			break;
		c = p[run];
		i = run + 1;
		if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};

			put(s, e, 2);
		} else if (c == '\n') {
			put(s, "\\n", 2);
		} else if (c == '\t') {
			put(s, "\\t", 2);
		} else if (c == '\r') {
			put(s, "\\r", 2);
		} else if (json) {
			char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};

			put(s, e, 6);
		} else {
			char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};

			put(s, e, 4);
		}
	}
	put(s, &close, 1);
}

static void put_escaped(struct sink *s, const uint8_t *p, size_t n, bool json)
{
	put_escaped_in(s, p, n, json, '"', '"', false);
}

uint64_t render_name_width(const char *p, size_t n, bool json)
{
	uint64_t w = 2;

	for (size_t i = 0; i < n; i++) {
		uint8_t c = (uint8_t)p[i];

		if (plain(c) && (json || c != '>'))
			w += 1;
		else if (c == '"' || c == '\\' || c == '\n' || c == '\t' || c == '\r')
			w += 2;
		else
			w += json ? 6 : 4;
	}
	return w;
}

uint8_t render_name_plain(const char *p, size_t n)
{
	uint8_t plain_in = 3;

	for (size_t i = 0; i < n && plain_in; i++) {
		if (!plain((uint8_t)p[i]))
			plain_in = 0;
		else if (p[i] == '>')
			plain_in &= 2;
	}
	return plain_in;
}

/* The names class of @a in @t's names section, or UINT32_MAX. */
static uint32_t name_class(const struct tfs_trace *t, const struct schema_arg *a)
{
	return t->names.n_classes ? names_class(&t->names, a->sym_class) : UINT32_MAX;
}

/*
 * An attached argument (FORMAT.md §9): the name of id @id, `<name>` in the text view and a
 * JSON string in the others, a hole as wide as its widest rank's when recording a template;
 * `<class#id>` (or "class#id") where a rank gives no name, nothing (or null) for no id.
 */
static void put_name(struct sink *s, const struct tfs_trace *t, const struct schema_arg *a,
		     uint64_t id, bool json)
{
	char fb[TFS_MAX_NAME + 24];
	int flen;

	if (id == TFS_SYM_NONE) {
		if (json)
			puts_(s, "null");
		return;
	}
	flen = snprintf(fb, sizeof(fb), "%s#%llu", a->sym_class, (unsigned long long)id);
	if (!s->segs) {
		put(s, json ? "\"" : "<", 1);
		put(s, fb, (size_t)flen);
		put(s, json ? "\"" : ">", 1);
		return;
	}
	if (!s->err) {
		struct tmpl_seg seg = {.kind = SEG_NAME, .json = json, .flen = (uint16_t)flen,
				       .val = name_class(t, a), .a = id, .len = s->text->len};

		s->err = buf_put(s->text, fb, (size_t)flen);
		if (!s->err)
			s->err = buf_put(s->segs, &seg, sizeof(seg));
	}
	s->n += rnames_width(t, a, id, json, (size_t)flen);
}

/* One argument's value. @word: the CST word, @val: the occurrence's VAL field if any. */
/*
 * One argument's value: a hole for what varies per occurrence (VAL, RANK), else the
 * constant printed now. @vi is the index of the argument among the kind's VAL arguments.
 */
static void put_arg(struct sink *s, const struct tfs_trace *t, const struct schema_arg *a,
		    uint64_t word, uint32_t vi, bool json)
{
	switch (a->enc) {
	case TFS_ENC_VAL:
		hole(s, SEG_VAL, (unsigned int)word + (json && a->type == TFS_TYPE_HEX ? 2 : 0),
		     a->type, json, vi, 0);
		return;
	case TFS_ENC_RANK:
		hole(s, SEG_RANK_ARG, render_rank_width(t, word), 0, json, 0, word);
		return;
	case TFS_ENC_RVAL:
		/* a ranked value prints as a process rank would: the displacement's rank word */
		if (rval_word_ranked(word))
			hole(s, SEG_RANK_ARG, render_rank_width(t, word & ~UINT64_C(1)), 0, json, 0,
			     word & ~UINT64_C(1));
		else
			put_i64(s, rval_word_value(word));
		return;
	case TFS_ENC_STR:
		put_escaped(s, (const uint8_t *)t->strs[word], t->str_len[word], json);
		return;
	case TFS_ENC_SYM:
		if (a->flags & TFS_ARG_ATTACH) {
			put_name(s, t, a, word, json);
			return;
		}
		if (word == TFS_SYM_NONE) {
			put_i64(s, -1);
			return;
		}
		if (!json) {
			puts_(s, a->sym_class);
			put(s, "#", 1);
		}
		put_dec(s, word, 0);
		return;
	default:
		put_num(s, a->type, a->type == TFS_TYPE_I64 ? (uint64_t)zigzag_dec(word) : word,
			json);
	}
}

/* VAL index of argument @arg of @k. */
static uint32_t val_index(const struct schema_kind *k, uint32_t arg)
{
	uint32_t vi = 0;

	for (uint32_t i = 0; i < arg; i++)
		vi += k->args[i].enc == TFS_ENC_VAL;
	return vi;
}

static void put_sig_arg(struct sink *s, const struct tfs_trace *t, const struct schema_arg *a,
			uint64_t word);

static bool attached(const struct schema_kind *k, uint32_t i)
{
	return i < k->n_args && (k->args[i].flags & TFS_ARG_ATTACH);
}

/*
 * The text view's arguments (and a signature's): `name=value` in schema order but the
 * result, which follows ` = ` after the parenthesis; an attached argument right after the
 * argument it annotates. @sig: as a signature shows them.
 */
static void put_text_args(struct sink *s, const struct tfs_trace *t, const struct schema_kind *k,
			  const uint64_t *w, bool sig)
{
	bool first = true;

	put(s, "(", 1);
	for (uint32_t i = 0; i < k->n_args; i++) {
		if ((int32_t)i == k->result || attached(k, i))
			continue;
		if (!first)
			put(s, ", ", 2);
		first = false;
		puts_(s, k->args[i].name);
		put(s, "=", 1);
		if (sig)
			put_sig_arg(s, t, &k->args[i], w[i]);
		else
			put_arg(s, t, &k->args[i], w[i], val_index(k, i), false);
		if (attached(k, i + 1))
			put_arg(s, t, &k->args[i + 1], w[i + 1], 0, false);
	}
	put(s, ")", 1);
	if (k->result >= 0) {
		uint32_t r = (uint32_t)k->result;

		put(s, " = ", 3);
		if (sig)
			put_sig_arg(s, t, &k->args[r], w[r]);
		else
			put_arg(s, t, &k->args[r], w[r], val_index(k, r), false);
		if (attached(k, r + 1))
			put_arg(s, t, &k->args[r + 1], w[r + 1], 0, false);
	}
}

static void text_line(struct sink *s, const struct tfs_trace *t, uint32_t term)
{
	const struct schema_kind *k = &t->schema.kinds[t->term_kind[term]];
	const uint64_t *w = t->term_arg + t->term_argoff[term];

	if (t->timing != TFS_TIMING_NONE) {
		hole(s, SEG_TS_TEXT, t->w_sec + 10, 0, false, 0, 0);
		put(s, " ", 1);
		hole(s, SEG_DUR_TEXT, t->w_dur, 0, false, 0, 0);
		put(s, " ", 1);
	}
	put(s, "T", 1);
	hole(s, SEG_THREAD_PAD, t->w_thread, 0, false, 0, 0);
	put(s, " ", 1);
	puts_(s, k->name);
	put_text_args(s, t, k, w, false);
}

/* The members of "args" in both JSON views. */
static void put_json_args(struct sink *s, const struct tfs_trace *t, const struct schema_kind *k,
			  const uint64_t *w)
{
	for (uint32_t i = 0; i < k->n_args; i++) {
		if (i)
			put(s, ",", 1);
		put_escaped(s, (const uint8_t *)k->args[i].name, strlen(k->args[i].name), true);
		put(s, ":", 1);
		put_arg(s, t, &k->args[i], w[i], val_index(k, i), true);
	}
}

static void json_line(struct sink *s, const struct tfs_trace *t, uint32_t term)
{
	const struct schema_kind *k = &t->schema.kinds[t->term_kind[term]];

	put(s, "{", 1);
	if (t->timing != TFS_TIMING_NONE) {
		puts_(s, "\"ts\":");
		hole(s, SEG_TS, t->w_ts_json, 0, true, 0, 0);
		puts_(s, ",\"dur\":");
		hole(s, SEG_DUR, dec_digits(t->max_dur), 0, true, 0, 0);
		put(s, ",", 1);
	}
	puts_(s, "\"thread\":");
	hole(s, SEG_THREAD, t->w_thread, 0, true, 0, 0);
	puts_(s, ",\"name\":");
	put_escaped(s, (const uint8_t *)k->name, strlen(k->name), true);
	puts_(s, ",\"args\":{");
	put_json_args(s, t, k, t->term_arg + t->term_argoff[term]);
	puts_(s, "}}");
}

/* Whether the kind's first argument is a STR called "name": then it names the event. */
static bool named_by_arg(const struct schema_kind *k)
{
	return k->n_args && k->args[0].enc == TFS_ENC_STR && !strcmp(k->args[0].name, "name");
}

/* A counter (FORMAT.md §9): a STR `name` and one VAL `value`, nothing else. */
static bool is_counter(const struct schema_kind *k)
{
	return k->n_args == 2 && named_by_arg(k) && k->args[1].enc == TFS_ENC_VAL &&
	       k->args[1].type != TFS_TYPE_STR && !strcmp(k->args[1].name, "value");
}

/* A mark of a moment (FORMAT.md §9): the first argument is a STR `message`. */
static bool is_instant(const struct schema_kind *k)
{
	return k->n_args && k->args[0].enc == TFS_ENC_STR && !strcmp(k->args[0].name, "message");
}

/*
 * The Chrome view's "args": what names the event, the same at every occurrence of the
 * terminal (arguments of the signature and the names attached to them) but the string
 * that names it, so that viewers that key frames by name and args (speedscope) merge them;
 * a counter's value.
 */
static void put_chrome_args(struct sink *s, const struct tfs_trace *t,
			    const struct schema_kind *k, const uint64_t *w, bool counter, bool named)
{
	bool first = true;

	for (uint32_t i = 0; i < k->n_args; i++) {
		/* the string that names the event is its "name" already */
		if (counter ? i != 1 : k->args[i].enc == TFS_ENC_VAL || (i == 0 && named))
			continue;
		if (!first)
			put(s, ",", 1);
		first = false;
		put_escaped(s, (const uint8_t *)k->args[i].name, strlen(k->args[i].name), true);
		put(s, ":", 1);
		put_arg(s, t, &k->args[i], w[i], val_index(k, i), true);
	}
}

static void chrome_line(struct sink *s, const struct tfs_trace *t, uint32_t term)
{
	const struct schema_kind *k = &t->schema.kinds[t->term_kind[term]];
	const uint64_t *w = t->term_arg + t->term_argoff[term];
	bool counter = is_counter(k), instant = !counter && is_instant(k);

	puts_(s, "{\"name\":");
	if (named_by_arg(k) || instant)
		put_escaped(s, (const uint8_t *)t->strs[w[0]], t->str_len[w[0]], true);
	else
		put_escaped(s, (const uint8_t *)k->name, strlen(k->name), true);
	puts_(s, ",\"cat\":");
	put_escaped(s, (const uint8_t *)k->category, strlen(k->category), true);
	puts_(s, counter ? ",\"ph\":\"C\",\"ts\":"
			 : instant ? ",\"ph\":\"i\",\"s\":\"t\",\"ts\":" : ",\"ph\":\"X\",\"ts\":");
	if (t->timing == TFS_TIMING_NONE) {
		/* without times, one event per microsecond keeps the order visible */
		hole(s, SEG_INDEX_US, t->w_index + 4, 0, true, 0, 0);
		if (!counter && !instant)
			puts_(s, ",\"dur\":1.000");
	} else {
		hole(s, SEG_TS_US, dec_digits(t->max_ts / 1000) + 4, 0, true, 0, 0);
		if (!counter && !instant) {
			puts_(s, ",\"dur\":");
			hole(s, SEG_DUR_US, dec_digits(t->max_dur / 1000) + 4, 0, true, 0, 0);
		}
	}
	puts_(s, ",\"pid\":");
	hole(s, SEG_RANK, t->w_rank, 0, true, 0, 0);
	puts_(s, ",\"tid\":");
	hole(s, SEG_THREAD, t->w_thread, 0, true, 0, 0);
	puts_(s, ",\"args\":{");
	put_chrome_args(s, t, k, w, counter, named_by_arg(k) || instant);
	puts_(s, "}},");
}

/*
 * The most bytes render_line_fast() may write for a terminal whose template is @g and
 * whose line is @fixed bytes long: a name stops at the line's end, and what follows it,
 * its constant text and each other hole at HOLE_MAX, may still run past that before the
 * line is refused; then slack for the whole-word copies of short text.
 */
static uint64_t line_room(const struct tmpl_seg *g, uint64_t fixed)
{
	uint64_t n = 0;

	for (; g->kind != SEG_END; g++) {
		if (g->kind == SEG_TEXT)
			n += g->len;
		else if (g->kind != SEG_NAME)
			n += HOLE_MAX;
	}
	return fixed + n + FAST_SLACK;
}

int render_templates(struct tfs_trace *t)
{
	for (int v = 0; v < TFS_VIEW_COUNT; v++) {
		struct tfs_buf segs, text;
		struct sink s = {.segs = &segs, .text = &text};

		buf_init(&segs);
		buf_init(&text);
		t->term_len[v] = calloc(t->n_terms + 1, sizeof(uint64_t));
		t->term_room[v] = calloc(t->n_terms + 1, sizeof(uint64_t));
		t->tmpl_first[v] = calloc(t->n_terms + 1, sizeof(uint32_t));
		if (!t->term_len[v] || !t->term_room[v] || !t->tmpl_first[v])
			s.err = -ENOMEM;
		for (uint32_t i = 0; i < t->n_terms && !s.err; i++) {
			s.n = 0;
			if (v == TFS_VIEW_TEXT)
				text_line(&s, t, i);
			else if (v == TFS_VIEW_JSONL)
				json_line(&s, t, i);
			else
				chrome_line(&s, t, i);
			t->term_len[v][i] = s.n + 1;
			/* a template never merges text across terminals */
			if (!s.err)
				s.err = buf_put(&segs, &(struct tmpl_seg){.kind = SEG_END},
						sizeof(struct tmpl_seg));
			t->tmpl_first[v][i + 1] = (uint32_t)(segs.len / sizeof(struct tmpl_seg));
		}
		/* the fast path copies short text in whole words: readable slack after it */
		if (!s.err)
			s.err = buf_reserve(&text, FAST_SLACK);
		if (!s.err)
			memset(text.data + text.len, 0, FAST_SLACK);
		t->segs[v] = (struct tmpl_seg *)segs.data;
		t->tmpl_text[v] = (char *)text.data;
		if (s.err)
			return s.err;
		for (uint32_t i = 0; i < t->n_terms; i++)
			t->term_room[v][i] = line_room(t->segs[v] + t->tmpl_first[v][i],
						       t->term_len[v][i]);
	}
	return 0;
}

/* Microseconds with three decimals, from nanoseconds. */
static void put_us(struct sink *s, uint64_t ns)
{
	char frac[4] = {'.', (char)('0' + ns / 100 % 10), (char)('0' + ns / 10 % 10),
			(char)('0' + ns % 10)};

	put_dec(s, ns / 1000, 0);
	put(s, frac, sizeof(frac));
}

static void put_hole(struct sink *s, const struct tfs_trace *t, const struct tmpl_seg *g,
		     const struct render_in *in, const char *text)
{
	switch (g->kind) {
	case SEG_TS_TEXT:
		put_dec(s, in->ts_ns / 1000000000u, t->w_sec);
		put(s, ".", 1);
		put_nanos(s, in->ts_ns % 1000000000u);
		break;
	case SEG_DUR_TEXT:
		put_dec(s, in->dur_ns, t->w_dur);
		break;
	case SEG_THREAD_PAD: {
		uint64_t before = s->n;

		put_dec(s, in->thread, 0);
		while (s->n - before < t->w_thread)
			put(s, " ", 1);
		break;
	}
	case SEG_TS:
		put_dec(s, in->ts_ns, 0);
		break;
	case SEG_DUR:
		put_dec(s, in->dur_ns, 0);
		break;
	case SEG_THREAD:
		put_dec(s, in->thread, 0);
		break;
	case SEG_RANK:
		put_dec(s, in->rank, 0);
		break;
	case SEG_TS_US:
		put_us(s, in->ts_ns);
		break;
	case SEG_DUR_US:
		put_us(s, in->dur_ns);
		break;
	case SEG_INDEX_US:
		put_us(s, in->index * 1000);
		break;
	case SEG_VAL:
		put_num(s, g->type, in->vals[g->val], g->json);
		break;
	case SEG_NAME: {
		const struct name_ent *e = in->names && g->val != UINT32_MAX
						   ? names_get(&t->names, in->names, g->val, g->a)
						   : NULL;

		if (e && (t->name_plain[e - t->names.ents] & (g->json ? 2 : 1))) {
			put(s, g->json ? "\"" : "<", 1);
			put(s, e->name, e->len);
			put(s, g->json ? "\"" : ">", 1);
		} else if (e) {
			put_escaped_in(s, (const uint8_t *)e->name, e->len, g->json,
				       g->json ? '"' : '<', g->json ? '"' : '>', !g->json);
		} else {
			put(s, g->json ? "\"" : "<", 1);
			put(s, text + g->len, g->flen);
			put(s, g->json ? "\"" : ">", 1);
		}
		break;
	}
	default: /* SEG_RANK_ARG */
		put_i64(s, rank_abs(g->a, in->rank));
	}
}

/* ---- the fast path: a line straight into a reader's buffer ---- */

/* Decimal digits of @v (1 for 0). */
static inline unsigned int fast_digits(uint64_t v)
{
	static const uint64_t pow10[20] = {
		1u, 10u, 100u, 1000u, 10000u, 100000u, 1000000u, 10000000u, 100000000u,
		1000000000u, 10000000000u, 100000000000u, 1000000000000u, 10000000000000u,
		100000000000000u, 1000000000000000u, 10000000000000000u,
		100000000000000000u, 1000000000000000000u, 10000000000000000000u,
	};
	/* about log10(2) x bit length, then one comparison corrects it */
	const uint64_t x = v | 1;
	const unsigned int d = ((64u - (unsigned int)__builtin_clzll(x)) * 1233u) >> 12;

	return d + (x >= pow10[d]);
}

/* @v in decimal at @p, @n = fast_digits(v) digits; the end. */
static inline char *fast_dec_n(char *p, uint64_t v, unsigned int n)
{
	char *q = p + n;

	while (v >= 100) {
		q -= 2;
		memcpy(q, digit_pairs + 2 * (v % 100), 2);
		v /= 100;
	}
	if (v >= 10)
		memcpy(q - 2, digit_pairs + 2 * v, 2);
	else
		q[-1] = (char)('0' + v);
	return p + n;
}

static inline char *fast_dec(char *p, uint64_t v)
{
	return fast_dec_n(p, v, fast_digits(v));
}

/* Right-aligned in @width characters (wider values print whole, as put_dec does). */
static inline char *fast_dec_w(char *p, uint64_t v, unsigned int width)
{
	const unsigned int n = fast_digits(v);

	if (n < width) {
		memset(p, ' ', width - n);
		p += width - n;
	}
	return fast_dec_n(p, v, n);
}

static inline char *fast_i64(char *p, int64_t v)
{
	if (v < 0) {
		*p++ = '-';
		return fast_dec(p, -(uint64_t)v);
	}
	return fast_dec(p, (uint64_t)v);
}

static inline char *fast_hex(char *p, uint64_t v)
{
	static const char digit[] = "0123456789abcdef";
	const unsigned int n = (67u - (unsigned int)__builtin_clzll(v | 1)) / 4;

	p[0] = '0';
	p[1] = 'x';
	p += 2;
	for (unsigned int i = n; i-- > 0; v >>= 4)
		p[i] = digit[v & 15];
	return p + n;
}

/* Nanoseconds of a second: exactly nine digits. */
static inline char *fast_nanos(char *p, uint64_t v)
{
	memcpy(p + 7, digit_pairs + 2 * (v % 100), 2);
	v /= 100;
	memcpy(p + 5, digit_pairs + 2 * (v % 100), 2);
	v /= 100;
	memcpy(p + 3, digit_pairs + 2 * (v % 100), 2);
	v /= 100;
	memcpy(p + 1, digit_pairs + 2 * (v % 100), 2);
	p[0] = (char)('0' + v / 100 % 10);
	return p + 9;
}

static inline char *fast_us(char *p, uint64_t ns)
{
	p = fast_dec(p, ns / 1000);
	p[0] = '.';
	memcpy(p + 1, digit_pairs + 2 * (ns % 1000 / 10), 2);
	p[3] = (char)('0' + ns % 10);
	return p + 4;
}

static inline char *fast_num(char *p, uint8_t type, uint64_t v, bool json)
{
	if (type == TFS_TYPE_I64)
		return fast_i64(p, (int64_t)v);
	if (type != TFS_TYPE_HEX)
		return fast_dec(p, v);
	if (json)
		*p++ = '"';
	p = fast_hex(p, v);
	if (json)
		*p++ = '"';
	return p;
}

/*
 * An attached name (SEG_NAME) at @p, no further than @end: through a sink bounded there, so
 * that a name longer than the template allowed for is refused, never written past @end.
 */
static char *fast_name(char *p, const char *end, const struct tfs_trace *t,
		       const struct tmpl_seg *g, const struct render_in *in, const char *text)
{
	struct tfs_buf b = {.data = (uint8_t *)p, .len = 0, .cap = (size_t)(end - p)};
	struct sink s = {.out = &b, .fixed = true};
	const struct name_ent *e;

	if (p > end)
		return NULL;
	e = in->names && g->val != UINT32_MAX ? names_get(&t->names, in->names, g->val, g->a)
					      : NULL;

	/* the usual case, a name printed as it is */
	if (e && (t->name_plain[e - t->names.ents] & (g->json ? 2 : 1)) &&
	    (size_t)(end - p) >= (size_t)e->len + 2) {
		*p++ = g->json ? '"' : '<';
		memcpy(p, e->name, e->len);
		p += e->len;
		*p++ = g->json ? '"' : '>';
		return p;
	}
	put_hole(&s, t, g, in, text);
	return s.err ? NULL : p + b.len;
}

int render_line_fast(const struct tfs_trace *t, int view, const struct render_in *in,
		     uint8_t *dst, struct tfs_diag *diag)
{
	const struct tmpl_seg *g = t->segs[view] + t->tmpl_first[view][in->term];
	const char *text = t->tmpl_text[view];
	const uint64_t fixed = t->term_len[view][in->term];
	const char *line_end = (const char *)dst + fixed;
	char *p = (char *)dst;

	if (t->timing != TFS_TIMING_NONE && (in->ts_ns > t->max_ts || in->dur_ns > t->max_dur))
		return diag_set(diag, -TFS_ECORRUPT, 0, "values",
				"event time %llu+%llu beyond the trace's maxima",
				(unsigned long long)in->ts_ns, (unsigned long long)in->dur_ns);
	for (; g->kind != SEG_END; g++) {
		switch (g->kind) {
		case SEG_TEXT:
			/* short text in one 16-byte copy: the room and the text have slack */
			if (g->len <= FAST_SLACK)
				memcpy(p, text + g->a, FAST_SLACK);
			else
				memcpy(p, text + g->a, g->len);
			p += g->len;
			break;
		case SEG_TS_TEXT:
			p = fast_dec_w(p, in->ts_ns / 1000000000u, t->w_sec);
			*p++ = '.';
			p = fast_nanos(p, in->ts_ns % 1000000000u);
			break;
		case SEG_DUR_TEXT:
			p = fast_dec_w(p, in->dur_ns, t->w_dur);
			break;
		case SEG_THREAD_PAD: {
			char *start = p;

			p = fast_dec(p, in->thread);
			if ((unsigned int)(p - start) < t->w_thread) {
				memset(p, ' ', t->w_thread - (unsigned int)(p - start));
				p = start + t->w_thread;
			}
			break;
		}
		case SEG_TS:
			p = fast_dec(p, in->ts_ns);
			break;
		case SEG_DUR:
			p = fast_dec(p, in->dur_ns);
			break;
		case SEG_THREAD:
			p = fast_dec(p, in->thread);
			break;
		case SEG_RANK:
			p = fast_dec(p, in->rank);
			break;
		case SEG_TS_US:
			p = fast_us(p, in->ts_ns);
			break;
		case SEG_DUR_US:
			p = fast_us(p, in->dur_ns);
			break;
		case SEG_INDEX_US:
			p = fast_us(p, in->index * 1000);
			break;
		case SEG_VAL:
			p = fast_num(p, g->type, in->vals[g->val], g->json);
			break;
		case SEG_NAME:
			p = fast_name(p, line_end, t, g, in, text);
			if (!p)
				goto too_wide;
			break;
		default: /* SEG_RANK_ARG */
			p = fast_i64(p, rank_abs(g->a, in->rank));
		}
	}
	if ((uint64_t)(p - (char *)dst) + 1 > fixed)
		goto too_wide;
	memset(p, ' ', fixed - 1 - (uint64_t)(p - (char *)dst));
	dst[fixed - 1] = '\n';
	return 0;

too_wide:
	return diag_set(diag, -TFS_ECORRUPT, 0, "values",
			"a value of terminal %u is wider than the cst says", in->term);
}

void render_args(const struct tfs_trace *t, uint32_t term, uint32_t rank, const uint64_t *vals,
		 union tfs_arg *args)
{
	const struct schema_kind *k = &t->schema.kinds[t->term_kind[term]];
	const uint64_t *w = t->term_arg + t->term_argoff[term];

	for (uint32_t i = 0; i < k->n_args; i++) {
		const struct schema_arg *a = &k->args[i];

		switch (a->enc) {
		case TFS_ENC_VAL:
			args[i].u = *vals++;
			break;
		case TFS_ENC_RANK:
			args[i].i = rank_abs(w[i], rank);
			break;
		case TFS_ENC_RVAL:
			args[i].i = rval_word_abs(w[i], rank);
			break;
		case TFS_ENC_STR:
			args[i].s = t->strs[w[i]];
			break;
		default:
			args[i].u = a->type == TFS_TYPE_I64 ? (uint64_t)zigzag_dec(w[i]) : w[i];
		}
	}
}

int tfs_trace_term_kind(const struct tfs_trace *t, uint32_t term, uint32_t *kind)
{
	if (term >= t->n_terms)
		return -ENOENT;
	*kind = t->term_kind[term];
	return 0;
}

/* An argument as a signature shows it: "*" if it varies, ranks relative ("r+1"). */
static void put_sig_arg(struct sink *s, const struct tfs_trace *t, const struct schema_arg *a,
			uint64_t word)
{
	int64_t rel;

	if (a->enc == TFS_ENC_VAL) {
		put(s, "*", 1);
	} else if (a->enc == TFS_ENC_RANK && rank_word_special(word)) {
		put_i64(s, rank_word_value(word));
	} else if (a->enc == TFS_ENC_RVAL && !rval_word_ranked(word)) {
		put_i64(s, rval_word_value(word));
	} else if (a->enc == TFS_ENC_RANK || a->enc == TFS_ENC_RVAL) {
		rel = a->enc == TFS_ENC_RANK ? rank_word_value(word) : rval_word_value(word);
		put(s, "r", 1);
		if (rel) {
			put(s, rel > 0 ? "+" : "-", 1);
			put_dec(s, rel > 0 ? (uint64_t)rel : -(uint64_t)rel, 0);
		}
	} else {
		put_arg(s, t, a, word, 0, false);
	}
}

/* Copy a rendered buffer out as snprintf does. */
static ssize_t copy_out(struct tfs_buf *b, int err, char *buf, size_t cap)
{
	ssize_t n = (ssize_t)b->len;

	if (err) {
		buf_fini(b);
		return err;
	}
	if (cap) {
		size_t c = b->len < cap - 1 ? b->len : cap - 1;

		if (c)
			memcpy(buf, b->data, c);
		buf[c] = 0;
	}
	buf_fini(b);
	return n;
}

ssize_t tfs_trace_term_arg_text(const struct tfs_trace *t, uint32_t term, uint32_t arg,
				char *buf, size_t cap)
{
	const struct schema_kind *k;
	struct tfs_buf b;
	struct sink s = {.out = &b};

	if (term >= t->n_terms)
		return -ENOENT;
	k = &t->schema.kinds[t->term_kind[term]];
	if (arg >= k->n_args)
		return -EINVAL;
	buf_init(&b);
	put_sig_arg(&s, t, &k->args[arg], t->term_arg[t->term_argoff[term] + arg]);
	return copy_out(&b, s.err, buf, cap);
}

int tfs_trace_term_args(const struct tfs_trace *t, uint32_t term, union tfs_arg *args)
{
	static const uint64_t zero_vals[TFS_MAX_ARGS];

	if (term >= t->n_terms)
		return -ENOENT;
	render_args(t, term, 0, zero_vals, args);
	return 0;
}

ssize_t tfs_trace_signature(const struct tfs_trace *t, uint32_t term, char *buf, size_t cap)
{
	const struct schema_kind *k;
	const uint64_t *w;
	struct tfs_buf b;
	struct sink s = {.out = &b};

	if (term >= t->n_terms)
		return -ENOENT;
	k = &t->schema.kinds[t->term_kind[term]];
	w = t->term_arg + t->term_argoff[term];
	buf_init(&b);
	puts_(&s, k->name);
	put_text_args(&s, t, k, w, true);
	return copy_out(&b, s.err, buf, cap);
}
