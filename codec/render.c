/*
 * One event to one line of a view (FORMAT.md §9), from the schema stored in the trace.
 * The same code measures a terminal's fixed line length (every per-occurrence number
 * counted at its width) and renders occurrences (numbers printed naturally, the line padded
 * to that length), so the two can never disagree. It does not walk grammars or decode values.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include "trace_i.h"

/*
 * Appends to a buffer, or only counts when measuring. A buffer whose capacity is exactly the
 * terminal's line length (rendering in place into a reader's buffer) is never grown: a line
 * that would not fit is corrupt data, refused before a byte lands outside.
 */
struct sink {
	struct tfs_buf *out;
	uint64_t n;
	bool measure;
	bool fixed;
	int err;
};

static inline void put(struct sink *s, const void *p, size_t n)
{
	struct tfs_buf *b = s->out;

	s->n += n;
	if (s->measure || s->err)
		return;
	if (b->cap - b->len >= n) {
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

static unsigned int signed_width(int64_t v)
{
	return v < 0 ? 1 + dec_digits(-(uint64_t)v) : dec_digits((uint64_t)v);
}

unsigned int render_rank_width(const struct tfs_trace *t, uint64_t zz)
{
	int64_t rel = zigzag_dec(zz);
	unsigned int a = signed_width(rel);
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

static void put_escaped(struct sink *s, const uint8_t *p, size_t n, bool json)
{
	static const char hex[] = "0123456789abcdef";

	put(s, "\"", 1);
	for (size_t i = 0; i < n;) {
		size_t run = i;
		uint8_t c;

		while (run < n && plain(p[run]))
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
	put(s, "\"", 1);
}

/* One argument's value. @word: the CST word, @val: the occurrence's VAL field if any. */
static void put_arg(struct sink *s, const struct tfs_trace *t, const struct schema_arg *a,
		    uint64_t word, const uint64_t *val, uint32_t rank, bool json)
{
	switch (a->enc) {
	case TFS_ENC_VAL:
		if (s->measure)
			s->n += word + (json && a->type == TFS_TYPE_HEX ? 2 : 0);
		else
			put_num(s, a->type, *val, json);
		return;
	case TFS_ENC_RANK:
		if (s->measure)
			s->n += render_rank_width(t, word);
		else
			put_i64(s, (int64_t)((uint64_t)zigzag_dec(word) + rank));
		return;
	case TFS_ENC_STR:
		put_escaped(s, (const uint8_t *)t->strs[word], t->str_len[word], json);
		return;
	case TFS_ENC_SYM:
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

static void text_line(struct sink *s, const struct tfs_trace *t, const struct render_in *in)
{
	const struct schema_kind *k = &t->schema.kinds[t->term_kind[in->term]];
	const uint64_t *w = t->term_arg + t->term_argoff[in->term];
	const uint64_t *val = in->vals;
	bool first = true;

	if (t->timing != TFS_TIMING_NONE) {
		uint64_t ts = s->measure ? 0 : in->ts_ns, dur = s->measure ? 0 : in->dur_ns;

		put_dec(s, ts / 1000000000u, t->w_sec);
		put(s, ".", 1);
		put_nanos(s, ts % 1000000000u);
		put(s, " ", 1);
		put_dec(s, dur, t->w_dur);
		put(s, " ", 1);
	}
	put(s, "T", 1);
	{
		uint64_t before = s->n;

		put_dec(s, in->thread, 0);
		while (s->n - before < t->w_thread)
			put(s, " ", 1);
	}
	put(s, " ", 1);
	puts_(s, k->name);
	put(s, "(", 1);
	for (uint32_t i = 0; i < k->n_args; i++) {
		const struct schema_arg *a = &k->args[i];

		if ((int32_t)i != k->result) {
			if (!first)
				put(s, ", ", 2);
			first = false;
			puts_(s, a->name);
			put(s, "=", 1);
			put_arg(s, t, a, w[i], val, in->rank, false);
		}
		if (a->enc == TFS_ENC_VAL && val)
			val++;
	}
	put(s, ")", 1);
	if (k->result >= 0) {
		uint32_t r = (uint32_t)k->result, vi = 0;

		for (uint32_t i = 0; i < r; i++)
			vi += k->args[i].enc == TFS_ENC_VAL;
		put(s, " = ", 3);
		put_arg(s, t, &k->args[r], w[r], in->vals ? in->vals + vi : NULL, in->rank, false);
	}
}

/* The members of "args" in both JSON views. */
static void put_json_args(struct sink *s, const struct tfs_trace *t, const struct schema_kind *k,
			  const uint64_t *w, const struct render_in *in)
{
	const uint64_t *val = in->vals;

	for (uint32_t i = 0; i < k->n_args; i++) {
		const struct schema_arg *a = &k->args[i];

		if (i)
			put(s, ",", 1);
		put_escaped(s, (const uint8_t *)a->name, strlen(a->name), true);
		put(s, ":", 1);
		put_arg(s, t, a, w[i], val, in->rank, true);
		if (a->enc == TFS_ENC_VAL && val)
			val++;
	}
}

static void json_line(struct sink *s, const struct tfs_trace *t, const struct render_in *in)
{
	const struct schema_kind *k = &t->schema.kinds[t->term_kind[in->term]];
	const uint64_t *w = t->term_arg + t->term_argoff[in->term];

	put(s, "{", 1);
	if (t->timing != TFS_TIMING_NONE) {
		if (s->measure)
			s->n += strlen("\"ts\":,\"dur\":,") + t->w_ts_json + dec_digits(t->max_dur);
		else {
			puts_(s, "\"ts\":");
			put_dec(s, in->ts_ns, 0);
			puts_(s, ",\"dur\":");
			put_dec(s, in->dur_ns, 0);
			put(s, ",", 1);
		}
	}
	if (s->measure)
		s->n += strlen("\"thread\":,") + t->w_thread;
	else {
		puts_(s, "\"thread\":");
		put_dec(s, in->thread, 0);
		put(s, ",", 1);
	}
	puts_(s, "\"name\":");
	put_escaped(s, (const uint8_t *)k->name, strlen(k->name), true);
	puts_(s, ",\"args\":{");
	put_json_args(s, t, k, w, in);
	puts_(s, "}}");
}

/* Microseconds with three decimals, from nanoseconds; counted at @digits when measuring. */
static void put_us(struct sink *s, uint64_t ns, unsigned int digits)
{
	char frac[4] = {'.', (char)('0' + ns / 100 % 10), (char)('0' + ns / 10 % 10),
			(char)('0' + ns % 10)};

	if (s->measure) {
		s->n += digits + 4;
		return;
	}
	put_dec(s, ns / 1000, 0);
	put(s, frac, sizeof(frac));
}

/* Whether the kind's first argument is a STR called "name": then it names the event. */
static bool named_by_arg(const struct schema_kind *k)
{
	return k->n_args && k->args[0].enc == TFS_ENC_STR && !strcmp(k->args[0].name, "name");
}

static void chrome_line(struct sink *s, const struct tfs_trace *t, const struct render_in *in)
{
	const struct schema_kind *k = &t->schema.kinds[t->term_kind[in->term]];
	const uint64_t *w = t->term_arg + t->term_argoff[in->term];

	puts_(s, "{\"name\":");
	if (named_by_arg(k))
		put_escaped(s, (const uint8_t *)t->strs[w[0]], t->str_len[w[0]], true);
	else
		put_escaped(s, (const uint8_t *)k->name, strlen(k->name), true);
	puts_(s, ",\"cat\":");
	put_escaped(s, (const uint8_t *)k->category, strlen(k->category), true);
	puts_(s, ",\"ph\":\"X\",\"ts\":");
	if (t->timing == TFS_TIMING_NONE) {
		/* without times, one event per microsecond keeps the order visible */
		put_us(s, in->index * 1000, t->w_index);
		puts_(s, ",\"dur\":1.000");
	} else {
		put_us(s, in->ts_ns, dec_digits(t->max_ts / 1000));
		puts_(s, ",\"dur\":");
		put_us(s, in->dur_ns, dec_digits(t->max_dur / 1000));
	}
	puts_(s, ",\"pid\":");
	if (s->measure)
		s->n += t->w_rank;
	else
		put_dec(s, in->rank, 0);
	puts_(s, ",\"tid\":");
	if (s->measure)
		s->n += t->w_thread;
	else
		put_dec(s, in->thread, 0);
	puts_(s, ",\"args\":{");
	put_json_args(s, t, k, w, in);
	puts_(s, "}},");
}

int render_line(const struct tfs_trace *t, int view, const struct render_in *in,
		struct tfs_buf *out, uint64_t *len, struct tfs_diag *diag)
{
	struct sink s = {.out = out, .measure = in->measure};
	uint64_t fixed;
	bool in_place = in->in_place;

	if (!s.measure && t->timing != TFS_TIMING_NONE &&
	    (in->ts_ns > t->max_ts || in->dur_ns > t->max_dur))
		return diag_set(diag, -TFS_ECORRUPT, t->cf.ents[t->streams[0].vsec_idx].off,
				"values", "event time %llu+%llu beyond the trace's maxima",
				(unsigned long long)in->ts_ns, (unsigned long long)in->dur_ns);
	s.fixed = in_place;
	if (!s.measure && !in_place && buf_reserve(out, t->term_len[view][in->term]) < 0)
		return -ENOMEM;
	if (view == TFS_VIEW_TEXT)
		text_line(&s, t, in);
	else if (view == TFS_VIEW_JSONL)
		json_line(&s, t, in);
	else
		chrome_line(&s, t, in);
	if (s.err == -TFS_ECORRUPT)
		return diag_set(diag, -TFS_ECORRUPT, 0, "values",
				"a value of terminal %u is wider than the cst says", in->term);
	if (s.err)
		return s.err;
	if (s.measure) {
		*len = s.n + 1;
		return 0;
	}
	fixed = t->term_len[view][in->term];
	if (s.n + 1 > fixed)
		return diag_set(diag, -TFS_ECORRUPT, 0, "values",
				"a value of terminal %u is wider than the cst says", in->term);
	if (!in_place && buf_reserve(out, fixed - s.n) < 0)
		return -ENOMEM;
	memset(out->data + out->len, ' ', fixed - s.n - 1);
	out->len += fixed - s.n - 1;
	out->data[out->len++] = '\n';
	return 0;
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
			args[i].i = (int64_t)((uint64_t)zigzag_dec(w[i]) + rank);
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

ssize_t tfs_trace_signature(const struct tfs_trace *t, uint32_t term, char *buf, size_t cap)
{
	const struct schema_kind *k;
	const uint64_t *w;
	struct tfs_buf b;
	struct sink s = {.out = &b};
	bool first = true;
	ssize_t n;

	if (term >= t->n_terms)
		return -ENOENT;
	k = &t->schema.kinds[t->term_kind[term]];
	w = t->term_arg + t->term_argoff[term];
	buf_init(&b);
	puts_(&s, k->name);
	put(&s, "(", 1);
	for (uint32_t i = 0; i < k->n_args; i++) {
		const struct schema_arg *a = &k->args[i];

		if ((int32_t)i == k->result)
			continue;
		if (!first)
			put(&s, ", ", 2);
		first = false;
		puts_(&s, a->name);
		put(&s, "=", 1);
		if (a->enc == TFS_ENC_VAL) {
			put(&s, "*", 1);
		} else if (a->enc == TFS_ENC_RANK) {
			int64_t rel = zigzag_dec(w[i]);

			put(&s, "r", 1);
			if (rel) {
				put(&s, rel > 0 ? "+" : "-", 1);
				put_dec(&s, rel > 0 ? (uint64_t)rel : -(uint64_t)rel, 0);
			}
		} else {
			put_arg(&s, t, a, w[i], NULL, 0, false);
		}
	}
	put(&s, ")", 1);
	if (k->result >= 0) {
		put(&s, " = ", 3);
		if (k->args[k->result].enc == TFS_ENC_VAL)
			put(&s, "*", 1);
		else
			put_arg(&s, t, &k->args[k->result], w[k->result], NULL, 0, false);
	}
	if (s.err) {
		buf_fini(&b);
		return s.err;
	}
	n = (ssize_t)b.len;
	if (cap) {
		size_t c = b.len < cap - 1 ? b.len : cap - 1;

		if (c)
			memcpy(buf, b.data, c);
		buf[c] = 0;
	}
	buf_fini(&b);
	return n;
}
