/*
 * One event to one line of a view (FORMAT.md §9), from the schema stored in the trace.
 * The line functions describe a terminal's line once, as constant text and "holes" (the
 * numbers that vary per occurrence), and run once per terminal and view at open: that gives
 * the terminal's fixed line length (each hole counted at its width) and a template
 * (constant bytes and hole descriptors). Rendering an occurrence only copies the constant
 * bytes, prints the holes and pads the line to its length. One description, so a line's
 * length and its rendering can never disagree. It does not walk grammars or decode values.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render_i.h"

/* The most characters a hole of fixed form prints (a time as seconds, 20 + 10). */
#define HOLE_MAX 32
/* render_line_fast() copies text of up to this many bytes as one word: room after both. */
#define FAST_SLACK 16

void rs_record(struct sink *s, const void *p, size_t n)
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

uint64_t rs_fallback(struct sink *s, const char *p, size_t n)
{
	uint64_t off = s->text->len;

	if (!s->err)
		s->err = buf_put(s->text, p, n);
	return off;
}

/* Record a hole of @kind and @width characters. */
static void hole(struct sink *s, uint8_t kind, unsigned int width)
{
	struct tmpl_seg seg = {.kind = kind};

	rs_hole(s, &seg, width);
}

static void text_line(struct sink *s, const struct tfs_trace *t, uint32_t term)
{
	const struct schema_kind *k = &t->schema.kinds[t->term_kind[term]];

	if (t->timing != TFS_TIMING_NONE) {
		hole(s, SEG_TS_TEXT, t->w_sec + 10);
		rs_put(s, " ", 1);
		hole(s, SEG_DUR_TEXT, t->w_dur);
		rs_put(s, " ", 1);
	}
	rs_put(s, "T", 1);
	hole(s, SEG_THREAD_PAD, t->w_thread);
	rs_put(s, " ", 1);
	rs_puts(s, k->name);
	rs_text_args(s, t, term, false);
}

static void json_line(struct sink *s, const struct tfs_trace *t, uint32_t term)
{
	const struct schema_kind *k = &t->schema.kinds[t->term_kind[term]];

	rs_put(s, "{", 1);
	if (t->timing != TFS_TIMING_NONE) {
		rs_puts(s, "\"ts\":");
		hole(s, SEG_TS, t->w_ts_json);
		rs_puts(s, ",\"dur\":");
		hole(s, SEG_DUR, dec_digits(t->max_dur));
		rs_put(s, ",", 1);
	}
	rs_puts(s, "\"rank\":");
	hole(s, SEG_RANK, t->w_rank);
	rs_puts(s, ",\"thread\":");
	hole(s, SEG_THREAD, t->w_thread);
	rs_puts(s, ",\"name\":");
	rs_escaped(s, (const uint8_t *)k->name, strlen(k->name), true);
	rs_puts(s, ",\"args\":{");
	rs_json_args(s, t, term);
	rs_puts(s, "}}");
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

static void chrome_line(struct sink *s, const struct tfs_trace *t, uint32_t term)
{
	const struct schema_kind *k = &t->schema.kinds[t->term_kind[term]];
	const uint64_t *w = t->term_arg + t->term_argoff[term];
	bool counter = is_counter(k), instant = !counter && is_instant(k);

	rs_puts(s, "{\"name\":");
	if (named_by_arg(k) || instant)
		rs_escaped(s, (const uint8_t *)t->strs[w[0]], t->str_len[w[0]], true);
	else
		rs_escaped(s, (const uint8_t *)k->name, strlen(k->name), true);
	rs_puts(s, ",\"cat\":");
	rs_escaped(s, (const uint8_t *)k->category, strlen(k->category), true);
	rs_puts(s, counter ? ",\"ph\":\"C\",\"ts\":"
			   : instant ? ",\"ph\":\"i\",\"s\":\"t\",\"ts\":" : ",\"ph\":\"X\",\"ts\":");
	if (t->timing == TFS_TIMING_NONE) {
		/* without times, one event per microsecond keeps the order visible */
		hole(s, SEG_INDEX_US, t->w_index + 4);
		if (!counter && !instant)
			rs_puts(s, ",\"dur\":1.000");
	} else {
		hole(s, SEG_TS_US, dec_digits(t->max_ts / 1000) + 4);
		if (!counter && !instant) {
			rs_puts(s, ",\"dur\":");
			hole(s, SEG_DUR_US, dec_digits(t->max_dur / 1000) + 4);
		}
	}
	rs_puts(s, ",\"pid\":");
	hole(s, SEG_RANK, t->w_rank);
	rs_puts(s, ",\"tid\":");
	hole(s, SEG_THREAD, t->w_thread);
	rs_puts(s, ",\"args\":{");
	rs_chrome_args(s, t, term, counter, named_by_arg(k) || instant);
	rs_puts(s, "}},");
}

/* Holes whose width depends on names or buffers: printed through a bounded sink. */
static inline bool hole_bounded(uint8_t kind)
{
	return kind == SEG_NAME || kind == SEG_SYMNAME || kind == SEG_BUF;
}

/*
 * The most bytes render_line_fast() may write for a terminal whose template is @g and
 * whose line is @fixed bytes long: a bounded hole stops at the line's end, and what follows
 * it, its constant text and each other hole at HOLE_MAX, may still run past that before
 * the line is refused; then slack for the whole-word copies of short text.
 */
static uint64_t line_room(const struct tmpl_seg *g, uint64_t fixed)
{
	uint64_t n = 0;

	for (; g->kind != SEG_END; g++) {
		if (g->kind == SEG_TEXT)
			n += g->len;
		else if (!hole_bounded(g->kind))
			n += HOLE_MAX;
	}
	return fixed + n + FAST_SLACK;
}

/* What a VAL hole prints, told apart once at open rather than at each line (after SEG_*). */
enum {
	OP_VAL_DEC = 64, /* unsigned decimal */
	OP_VAL_I64,	 /* signed decimal */
	OP_VAL_HEX,	 /* 0x and hex digits (the text view's hex) */
};

/* The step kind of VAL hole @g: how rargs.c prints it (FORMAT.md §9). */
static uint8_t val_op(const struct tmpl_seg *g)
{
	if (g->type == TFS_TYPE_I64)
		return OP_VAL_I64;
	if (g->type == TFS_TYPE_HEX && !g->json)
		return OP_VAL_HEX;
	return OP_VAL_DEC;
}

/* View @v's templates as render_line_fast() runs them: each hole with the text before it. */
static int compile_ops(struct tfs_trace *t, int v)
{
	const struct tmpl_seg *segs = t->segs[v];
	struct fast_op *ops;
	uint32_t k = 0;

	/* a terminal has no more steps than segments: each takes its hole or SEG_END */
	t->fops[v] = ops = malloc(((size_t)t->tmpl_first[v][t->n_terms] + 1) * sizeof(*ops));
	t->fop_first[v] = calloc((size_t)t->n_terms + 1, sizeof(uint32_t));
	if (!ops || !t->fop_first[v])
		return -ENOMEM;
	for (uint32_t i = 0; i < t->n_terms; i++) {
		struct fast_op op = {.text = t->tmpl_text[v]};

		t->fop_first[v][i] = k;
		for (const struct tmpl_seg *g = segs + t->tmpl_first[v][i];; g++) {
			if (g->kind == SEG_TEXT) {
				/* rs_record() joins text that follows text */
				assert(op.text_len == 0);
				op.text = t->tmpl_text[v] + g->a;
				op.text_len = g->len;
				continue;
			}
			op.kind = g->kind == SEG_VAL ? val_op(g) : g->kind;
			op.type = g->type;
			op.json = g->json;
			op.val = g->val;
			op.a = g->a;
			op.seg = g;
			ops[k++] = op;
			if (g->kind == SEG_END)
				break;
			op = (struct fast_op){.text = t->tmpl_text[v]};
		}
	}
	t->fop_first[v][t->n_terms] = k;
	/* sized for a step per segment, most of them text the steps carry: give back the rest */
	ops = k ? realloc(t->fops[v], (size_t)k * sizeof(*ops)) : NULL;
	if (ops)
		t->fops[v] = ops;
	return 0;
}

/*
 * Record view @v's line of every terminal. The lengths and rooms are set when they are not
 * yet (at open); with @keep the templates are kept and compiled, else each terminal's is
 * dropped once measured, so that a view nobody reads costs no memory per terminal.
 */
static int record_view(struct tfs_trace *t, int v, struct name_memo *memo, bool keep)
{
	const bool measure = !t->term_len[v];
	struct tfs_buf segs, text;
	struct sink s = {.segs = &segs, .text = &text, .memo = memo};

	buf_init(&segs);
	buf_init(&text);
	if (measure) {
		t->term_len[v] = calloc(t->n_terms + 1, sizeof(uint64_t));
		t->term_room[v] = calloc(t->n_terms + 1, sizeof(uint64_t));
		if (!t->term_len[v] || !t->term_room[v])
			s.err = -ENOMEM;
	}
	if (keep) {
		t->tmpl_first[v] = calloc(t->n_terms + 1, sizeof(uint32_t));
		if (!t->tmpl_first[v])
			s.err = -ENOMEM;
	}
	for (uint32_t i = 0; i < t->n_terms && !s.err; i++) {
		const size_t first = segs.len / sizeof(struct tmpl_seg);

		s.n = 0;
		if (v == TFS_VIEW_TEXT)
			text_line(&s, t, i);
		else if (v == TFS_VIEW_JSONL)
			json_line(&s, t, i);
		else
			chrome_line(&s, t, i);
		/* a template never merges text across terminals */
		if (!s.err)
			s.err = buf_put(&segs, &(struct tmpl_seg){.kind = SEG_END},
					sizeof(struct tmpl_seg));
		if (s.err)
			break;
		if (measure) {
			t->term_len[v][i] = s.n + 1;
			t->term_room[v][i] = line_room((struct tmpl_seg *)segs.data + first, s.n + 1);
		}
		/* recorded twice (open, then first use), a line must come out the same */
		assert(t->term_len[v][i] == s.n + 1);
		if (keep) {
			t->tmpl_first[v][i + 1] = (uint32_t)(segs.len / sizeof(struct tmpl_seg));
		} else {
			segs.len = 0;
			text.len = 0;
		}
	}
	if (!keep || s.err) {
		buf_fini(&segs);
		buf_fini(&text);
		return s.err;
	}
	/* the fast path copies short text in whole words: readable slack after it */
	s.err = buf_reserve(&text, FAST_SLACK);
	if (!s.err)
		memset(text.data + text.len, 0, FAST_SLACK);
	t->segs[v] = (struct tmpl_seg *)segs.data;
	t->tmpl_text[v] = (char *)text.data;
	return s.err ? s.err : compile_ops(t, v);
}

static struct name_memo *memo_new(void)
{
	struct name_memo *memo = malloc(RS_MEMO_SLOTS * sizeof(*memo));

	for (uint32_t i = 0; memo && i < RS_MEMO_SLOTS; i++)
		memo[i].width = UINT64_MAX;
	return memo;
}

int render_templates(struct tfs_trace *t)
{
	struct name_memo *memo = memo_new();
	int rc = memo ? 0 : -ENOMEM;

	/* the text view's templates are kept: signatures and searches read them too */
	for (int v = 0; v < TFS_VIEW_COUNT && rc == 0; v++)
		rc = record_view(t, v, memo, v == TFS_VIEW_TEXT);
	if (rc == 0)
		atomic_store_explicit(&t->view_ready[TFS_VIEW_TEXT], true, memory_order_release);
	free(memo);
	return rc;
}

int render_view_ready(struct tfs_trace *t, int v)
{
	struct name_memo *memo;
	int rc = 0;

	if (atomic_load_explicit(&t->view_ready[v], memory_order_acquire))
		return 0;
	pthread_mutex_lock(&t->lazy_lock);
	if (!atomic_load_explicit(&t->view_ready[v], memory_order_relaxed)) {
		memo = memo_new();
		rc = memo ? record_view(t, v, memo, true) : -ENOMEM;
		free(memo);
		if (rc == 0) {
			atomic_store_explicit(&t->view_ready[v], true, memory_order_release);
		} else {
			/* a later call may try again */
			free(t->segs[v]);
			free(t->tmpl_first[v]);
			free(t->tmpl_text[v]);
			free(t->fops[v]);
			free(t->fop_first[v]);
			t->segs[v] = NULL;
			t->tmpl_first[v] = NULL;
			t->tmpl_text[v] = NULL;
			t->fops[v] = NULL;
			t->fop_first[v] = NULL;
		}
	}
	pthread_mutex_unlock(&t->lazy_lock);
	return rc;
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

/* Padding copied FAST_SLACK bytes at a time: rooms have that much slack. */
static const char fast_spaces[FAST_SLACK + 1] = "                ";

/* The four digits of @v < 10000 at @p. */
static inline void fast_4(char *p, uint32_t v)
{
	memcpy(p, rs_digit_pairs + 2 * (v / 100), 2);
	memcpy(p + 2, rs_digit_pairs + 2 * (v % 100), 2);
}

/* @v in decimal at @p, @n = fast_digits(v) digits; the end. */
static inline char *fast_dec_n(char *p, uint64_t v, unsigned int n)
{
	char *q = p + n;

	/* four digits a division: the rest in 32 bits */
	while (v >= 10000) {
		q -= 4;
		fast_4(q, (uint32_t)(v % 10000));
		v /= 10000;
	}
	if (v >= 100) {
		q -= 2;
		memcpy(q, rs_digit_pairs + 2 * (v % 100), 2);
		v /= 100;
	}
	if (v >= 10)
		memcpy(q - 2, rs_digit_pairs + 2 * v, 2);
	else
		q[-1] = (char)('0' + v);
	return p + n;
}

static inline char *fast_dec(char *p, uint64_t v)
{
	/* most printed numbers are small: no digit count for them */
	if (v < 10) {
		*p = (char)('0' + v);
		return p + 1;
	}
	if (v < 100) {
		memcpy(p, rs_digit_pairs + 2 * v, 2);
		return p + 2;
	}
	return fast_dec_n(p, v, fast_digits(v));
}

/* Right-aligned in @width characters (wider values print whole, as rs_dec does). */
static inline char *fast_dec_w(char *p, uint64_t v, unsigned int width)
{
	const unsigned int n = fast_digits(v);

	/* narrow padding in one copy: a hole's room has HOLE_MAX bytes of slack */
	if (n < width) {
		if (width - n <= FAST_SLACK)
			memcpy(p, fast_spaces, FAST_SLACK);
		else
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

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* The eight hex digits of @h as a word whose first byte in memory is the leading digit. */
static inline uint64_t hex8(uint32_t h)
{
	uint64_t x = h, letter;

	/* nibble k to byte k, then the leading one first */
	x = ((x & 0xffff0000u) << 16) | (x & 0xffffu);
	x = ((x & 0x0000ff000000ff00u) << 8) | (x & 0x000000ff000000ffu);
	x = ((x & 0x00f000f000f000f0u) << 4) | (x & 0x000f000f000f000fu);
	x = __builtin_bswap64(x);
	/* 1 in each byte holding 10 to 15 */
	letter = ((x + 0x0606060606060606u) >> 4) & 0x0101010101010101u;
	return x + 0x3030303030303030u + letter * ('a' - '0' - 10);
}

/* Hex digits as whole words: the room has slack for the zeros stored past the number. */
static inline char *fast_hex(char *p, uint64_t v)
{
	const unsigned int n = (67u - (unsigned int)__builtin_clzll(v | 1)) / 4;
	const uint64_t lo = hex8((uint32_t)v);

	p[0] = '0';
	p[1] = 'x';
	p += 2;
	if (n <= 8) {
		const uint64_t w = lo >> (8 * (8 - n));

		memcpy(p, &w, 8);
	} else {
		const uint64_t w = hex8((uint32_t)(v >> 32)) >> (8 * (16 - n));

		memcpy(p, &w, 8);
		memcpy(p + n - 8, &lo, 8);
	}
	return p + n;
}
#else
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
#endif

/* Nanoseconds of a second: exactly nine digits. */
static inline char *fast_nanos(char *p, uint64_t v)
{
	const uint32_t low8 = (uint32_t)(v % 100000000u);

	p[0] = (char)('0' + v / 100000000u % 10);
	fast_4(p + 1, low8 / 10000);
	fast_4(p + 5, low8 % 10000);
	return p + 9;
}

static inline char *fast_us(char *p, uint64_t ns)
{
	p = fast_dec(p, ns / 1000);
	p[0] = '.';
	memcpy(p + 1, rs_digit_pairs + 2 * (ns % 1000 / 10), 2);
	p[3] = (char)('0' + ns % 10);
	return p + 4;
}

/*
 * A hole whose width depends on names or buffers, at @p, no further than @end: through a
 * sink bounded there, so that one wider than the line allows is refused, never written
 * past @end. The usual case, a name printed as it is, goes straight.
 */
static char *fast_bounded(char *p, const char *end, const struct tfs_trace *t,
			  const struct tmpl_seg *g, const struct render_in *in, const char *text)
{
	struct tfs_buf b = {.data = (uint8_t *)p, .len = 0, .cap = (size_t)(end - p)};
	struct sink s = {.out = &b, .fixed = true};

	if (p > end)
		return NULL;
	rs_arg_hole(&s, t, g, in, text);
	return s.err ? NULL : p + b.len;
}

/* names_get() of the reader's table, through its cache when it has one. */
static inline const struct name_ent *cached_name(const struct tfs_trace *t,
						 const struct render_in *in, uint32_t cls,
						 uint64_t id)
{
	/* a multiplicative hash of the key, its top six bits a slot */
	const unsigned int i =
		(unsigned int)(((id ^ ((uint64_t)cls << 32)) * 0x9e3779b97f4a7c15u) >> 58);
	struct name_cache *nc = in->cache;
	const struct name_ent *e;

	_Static_assert(NAME_CACHE_SLOTS == 64, "a slot is six bits of the hash");
	if (!nc)
		return names_get(&t->names, in->names, cls, id);

	if (nc->slot[i].cls1 == cls + 1 && nc->slot[i].id == id)
		return nc->slot[i].e;
	e = names_get(&t->names, in->names, cls, id);
	nc->slot[i].id = id;
	nc->slot[i].cls1 = cls + 1;
	nc->slot[i].e = e;
	return e;
}

/* A name hole printed as the name is, when it is one: NULL otherwise, nothing written. */
static inline char *fast_name(char *p, const char *end, const struct tfs_trace *t,
			      const struct fast_op *op, const struct render_in *in)
{
	const struct name_ent *e;

	if (!in->names || op->val == UINT32_MAX || p > end)
		return NULL;
	e = cached_name(t, in, op->val, op->a);
	if (!e || !(t->name_plain[e - t->names.ents] & (op->json ? 2 : 1)) ||
	    (size_t)(end - p) < (size_t)e->len + 2)
		return NULL;
	*p++ = op->json ? '"' : '<';
	memcpy(p, e->name, e->len);
	p += e->len;
	*p++ = op->json ? '"' : '>';
	return p;
}

/* render_line_fast(), inlined into the loop of render_lines_fast() as well. */
static inline __attribute__((always_inline)) int
line_fast(const struct tfs_trace *t, int view, const struct render_in *in, uint8_t *dst,
	  struct tfs_diag *diag)
{
	const struct fast_op *op = t->fops[view] + t->fop_first[view][in->term];
	const char *text = t->tmpl_text[view];
	const uint64_t fixed = t->term_len[view][in->term];
	const char *line_end = (const char *)dst + fixed;
	char *p = (char *)dst, *q;
	uint64_t pad;

	if (t->timing != TFS_TIMING_NONE && (in->ts_ns > t->max_ts || in->dur_ns > t->max_dur))
		return diag_set(diag, -TFS_ECORRUPT, 0, "values",
				"event time %llu+%llu beyond the trace's maxima",
				(unsigned long long)in->ts_ns, (unsigned long long)in->dur_ns);
	for (;; op++) {
		/* short text in one 16-byte copy: the room and the text have slack */
		if (op->text_len <= FAST_SLACK)
			memcpy(p, op->text, FAST_SLACK);
		else
			memcpy(p, op->text, op->text_len);
		p += op->text_len;
		switch (op->kind) {
		case SEG_END:
			goto done;
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
		case OP_VAL_DEC:
			p = fast_dec(p, in->vals[op->val]);
			break;
		case OP_VAL_I64:
			p = fast_i64(p, (int64_t)in->vals[op->val]);
			break;
		case OP_VAL_HEX:
			p = fast_hex(p, in->vals[op->val]);
			break;
		case SEG_RANK_ARG:
			p = fast_i64(p, rank_abs(op->a, in->rank));
			break;
		case SEG_NAME:
			q = fast_name(p, line_end, t, op, in);
			if (q) {
				p = q;
				break;
			}
			/* fall through */
		default: /* SEG_NAME, SEG_SYMNAME, SEG_BUF */
			p = fast_bounded(p, line_end, t, op->seg, in, text);
			if (!p)
				goto too_wide;
		}
	}
done:
	if ((uint64_t)(p - (char *)dst) + 1 > fixed)
		goto too_wide;
	pad = fixed - 1 - (uint64_t)(p - (char *)dst);
	/* most lines pad little: one 16-byte copy, the room having slack after the line */
	if (pad <= FAST_SLACK)
		memcpy(p, fast_spaces, FAST_SLACK);
	else
		memset(p, ' ', pad);
	dst[fixed - 1] = '\n';
	return 0;

too_wide:
	return diag_set(diag, -TFS_ECORRUPT, 0, "values",
			"a value of terminal %u is wider than the cst says", in->term);
}

int render_line_fast(const struct tfs_trace *t, int view, const struct render_in *in,
		     uint8_t *dst, struct tfs_diag *diag)
{
	return line_fast(t, view, in, dst, diag);
}

int render_lines_fast(const struct tfs_trace *t, int view, struct render_in *in,
		      const struct vblock *vb, const uint32_t *terms, uint32_t first,
		      uint32_t end, uint8_t *dst, size_t cap, size_t *len, uint32_t *n_lines,
		      struct tfs_diag *diag)
{
	const uint64_t *term_len = t->term_len[view], *room = t->term_room[view];
	size_t at = 0;
	uint32_t i;
	int rc = 0;

	for (i = first; i < end; i++) {
		const uint32_t term = terms[i];

		if (room[term] > cap - at)
			break;
		in->term = term;
		in->ts_ns = vb->ts_ns[i];
		in->dur_ns = vb->dur_ns[i];
		in->vals = vb->vals + vb->val_off[i];
		rc = line_fast(t, view, in, dst + at, diag);
		if (rc < 0)
			break;
		in->index++;
		at += (size_t)term_len[term];
	}
	*len = at;
	*n_lines = i - first;
	return rc;
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
			args[i].i = rank_word_special(w[i])
					? rank_word_value(w[i])
					: (int64_t)((uint64_t)rank_word_value(w[i]) + rank);
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

int tfs_trace_term_line_bytes(const struct tfs_trace *t, uint32_t term, int view,
			      uint64_t *bytes)
{
	if (term >= t->n_terms)
		return -ENOENT;
	if (view < 0 || view >= TFS_VIEW_COUNT)
		return -EINVAL;
	*bytes = t->term_len[view][term];
	return 0;
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
	rs_sig_arg(&s, t, term, arg);
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
	struct tfs_buf b;
	struct sink s = {.out = &b};

	if (term >= t->n_terms)
		return -ENOENT;
	k = &t->schema.kinds[t->term_kind[term]];
	buf_init(&b);
	rs_puts(&s, k->name);
	rs_text_args(&s, t, term, true);
	return copy_out(&b, s.err, buf, cap);
}
