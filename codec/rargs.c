/*
 * How each argument of an event prints in the views (FORMAT.md §9): numbers, strings with
 * their escapes (§9.1), the names of symbols and values (§9.2) and buffers (§9.3). For a
 * line template it emits constant text where the signature fixes what prints and a hole,
 * counted at its width, where the occurrence or the rank decides (render.c fills holes in
 * through rs_arg_hole()). A width that depends on names is the widest form over the name
 * tables that cover ranks, worked out once per (class, value) in a memo. It knows nothing
 * of what a line looks like around its arguments.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render_i.h"

/* ---- numbers ---- */

const char rs_digit_pairs[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

void rs_dec(struct sink *s, uint64_t v, unsigned int width)
{
	char tmp[24];
	char *p = tmp + sizeof(tmp);

	while (v >= 100) {
		p -= 2;
		memcpy(p, rs_digit_pairs + 2 * (v % 100), 2);
		v /= 100;
	}
	if (v >= 10) {
		p -= 2;
		memcpy(p, rs_digit_pairs + 2 * v, 2);
	} else {
		*--p = (char)('0' + v);
	}
	while ((size_t)(tmp + sizeof(tmp) - p) < width && p > tmp)
		*--p = ' ';
	rs_put(s, p, (size_t)(tmp + sizeof(tmp) - p));
}

void rs_i64(struct sink *s, int64_t v)
{
	if (v < 0) {
		rs_put(s, "-", 1);
		rs_dec(s, -(uint64_t)v, 0);
	} else {
		rs_dec(s, (uint64_t)v, 0);
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
	rs_put(s, tmp + sizeof(tmp) - n, n);
}

/* A number: hex as 0x... in the text view; every type a plain JSON number in the others. */
static void put_num(struct sink *s, uint8_t type, uint64_t v, bool json)
{
	if (type == TFS_TYPE_I64)
		rs_i64(s, (int64_t)v);
	else if (type == TFS_TYPE_HEX && !json)
		put_hex(s, v);
	else
		rs_dec(s, v, 0);
}

/* JSON width of a hex VAL of text width @w ("0x" and w - 2 digits): D(w), FORMAT.md §9. */
static unsigned int hex_json_width(unsigned int w)
{
	unsigned int digits = w > 2 ? w - 2 : 1;

	return digits >= 16 ? 20 : dec_digits((UINT64_C(1) << (4 * digits)) - 1);
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

/* ---- escapes (FORMAT.md §9.1) ---- */

static inline bool plain(uint8_t c)
{
	return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}

/* Bytes of the valid UTF-8 sequence of 2 to 4 bytes at @p (RFC 3629), or 0. */
static size_t utf8_len(const uint8_t *p, size_t n)
{
	uint8_t lo = 0x80, hi = 0xbf;
	size_t k;

	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		k = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		k = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		k = 4;
	else
		return 0;
	if (k > n)
		return 0;
	if (p[0] == 0xe0)
		lo = 0xa0;
	else if (p[0] == 0xed)
		hi = 0x9f; /* no surrogates */
	else if (p[0] == 0xf0)
		lo = 0x90;
	else if (p[0] == 0xf4)
		hi = 0x8f; /* nothing past U+10FFFF */
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < k; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	}
	return k;
}

/*
 * How the views print the bytes at @p: *@take bytes of input become *@width bytes of
 * output. @also (text only, may be NULL): ASCII bytes escaped as \xHH too. @return 0: as
 * they are, else the escape, always of one byte: 'e' (\", \\, \n, \t, \r), 'u' (\u00XX),
 * 's' (\ufffd: a byte that is no UTF-8, the replacement character) or 'x' (\xHH).
 */
static char esc_class(const uint8_t *p, size_t n, bool json, const char *also, size_t *take,
		      size_t *width)
{
	uint8_t c = p[0];
	size_t k;

	*take = 1;
	if (plain(c) && !(also && !json && strchr(also, c))) {
		*width = 1;
		return 0;
	}
	if (c == '"' || c == '\\' || c == '\n' || c == '\t' || c == '\r') {
		*width = 2;
		return 'e';
	}
	if (c >= 0x80) {
		k = utf8_len(p, n);
		/* the text view escapes the C1 controls U+0080..U+009F: terminals act on them */
		if (k && (json || c != 0xc2 || p[1] >= 0xa0)) {
			*take = *width = k;
			return 0;
		}
		*width = json ? 6 : 4;
		return json ? 's' : 'x';
	}
	*width = json ? 6 : 4;
	return json ? 'u' : 'x';
}

/* The escape of class @kind (esc_class()) of byte @c into @e. @return its length */
static size_t esc_bytes(char kind, uint8_t c, char e[6])
{
	static const char hex[] = "0123456789abcdef";

	switch (kind) {
	case 'e':
		e[0] = '\\';
		e[1] = c == '\n' ? 'n' : c == '\t' ? 't' : c == '\r' ? 'r' : (char)c;
		return 2;
	case 'x':
		memcpy(e, "\\x", 2);
		e[2] = hex[c >> 4];
		e[3] = hex[c & 15];
		return 4;
	case 's': /* U+FFFD: strict readers (DuckDB) refuse lone surrogates */
		memcpy(e, "\\ufffd", 6);
		return 6;
	default:
		memcpy(e, "\\u00", 4);
		e[4] = hex[c >> 4];
		e[5] = hex[c & 15];
		return 6;
	}
}

/* @p between the delimiters @open and @close; @also as for esc_class() (a name: ">"). */
static void put_escaped_in(struct sink *s, const uint8_t *p, size_t n, bool json, char open,
			   char close, const char *also)
{
	rs_put(s, &open, 1);
	for (size_t i = 0; i < n;) {
		size_t run = i, take, width;
		char kind = 0, e[6];

		while (run < n &&
		       (kind = esc_class(p + run, n - run, json, also, &take, &width)) == 0)
			run += take;
		rs_put(s, p + i, run - i);
		if (run == n)
			break;
		i = run + 1;
		rs_put(s, e, esc_bytes(kind, p[run], e));
	}
	rs_put(s, &close, 1);
}

void rs_escaped(struct sink *s, const uint8_t *p, size_t n, bool json)
{
	put_escaped_in(s, p, n, json, '"', '"', NULL);
}

/* Append @n bytes of @p to @buf of @cap bytes at *@len, as far as they fit; count them all. */
static void esc_out(char *buf, size_t cap, size_t *len, const void *p, size_t n)
{
	if (*len < cap)
		memcpy(buf + *len, p, n < cap - *len ? n : cap - *len);
	*len += n;
}

size_t tfs_escape(char *buf, size_t cap, const void *str, size_t n, enum tfs_escape_mode mode,
		  const char *also)
{
	static const char fffd[3] = {(char)0xef, (char)0xbf, (char)0xbd};
	const uint8_t *p = str;
	size_t len = 0;

	for (size_t i = 0; i < n;) {
		size_t take, width;
		char kind = esc_class(p + i, n - i, mode != TFS_ESCAPE_TEXT, also, &take, &width);
		char e[6];

		if (kind == 0 || (mode == TFS_ESCAPE_UTF8 && kind != 's'))
			esc_out(buf, cap, &len, p + i, take);
		else if (mode == TFS_ESCAPE_UTF8)
			esc_out(buf, cap, &len, fffd, sizeof(fffd));
		else
			esc_out(buf, cap, &len, e, esc_bytes(kind, p[i], e));
		i += take;
	}
	if (cap)
		buf[len < cap ? len : cap - 1] = '\0';
	return len;
}

size_t tfs_utf8_cut(const void *str, size_t n, size_t max)
{
	const uint8_t *p = str;

	if (n <= max)
		return n;
	/* the character that holds byte @max starts at its last byte that is no continuation
	 * byte, at most 3 bytes back; it is cut when it is a valid sequence running past @max */
	for (size_t j = max; j > 0 && j + 3 >= max; j--) {
		if ((p[j - 1] & 0xc0) != 0x80)
			return j - 1 + utf8_len(p + j - 1, n - (j - 1)) > max ? j - 1 : max;
	}
	return max;
}

uint64_t render_name_width(const char *p, size_t n, bool json)
{
	uint64_t w = 2;

	for (size_t i = 0; i < n;) {
		size_t take, width;

		esc_class((const uint8_t *)p + i, n - i, json, ">", &take, &width);
		w += width;
		i += take;
	}
	return w;
}

uint8_t render_name_plain(const char *p, size_t n)
{
	uint8_t plain_in = 3;

	for (size_t i = 0; i < n && plain_in;) {
		size_t take, width;

		if (esc_class((const uint8_t *)p + i, n - i, false, ">", &take, &width))
			plain_in &= 2;
		if (esc_class((const uint8_t *)p + i, n - i, true, NULL, &take, &width))
			plain_in &= 1;
		i += take;
	}
	return plain_in;
}

/* ---- names of symbols and values (FORMAT.md §9.2) ---- */

enum {
	NAME_SYM,   /* a symbol's name in place of class#id */
	NAME_VALUE, /* a value's name in place of the number */
	NAME_FLAGS, /* a hex value: its name, else the names of its bits joined by '|' */
};

/* The names class of @a (its symbol or value-name class), or UINT32_MAX. */
static uint32_t name_class(const struct tfs_trace *t, const struct schema_arg *a)
{
	return t->names.n_classes && a->sym_class[0] ? names_class(&t->names, a->sym_class)
						     : UINT32_MAX;
}

/* Whether a name may stand for a symbol or value: an identifier of at most 64 bytes. */
static bool ident(const struct name_ent *e)
{
	if (!e || e->len == 0 || e->len > 64 || (e->name[0] >= '0' && e->name[0] <= '9'))
		return false;
	for (uint32_t i = 0; i < e->len; i++) {
		char c = e->name[i];

		if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9')))
			return false;
	}
	return true;
}

static const struct name_ent *lookup(const struct tfs_trace *t, const struct name_table *tb,
				     uint32_t cls, uint64_t id)
{
	const struct name_ent *e = tb ? names_get(&t->names, tb, cls, id) : NULL;

	return ident(e) ? e : NULL;
}

/*
 * The form @v takes with table @tb: its name, or for NAME_FLAGS the names of its bits low
 * first; printed into @s when not NULL. @return its length, or 0 when the fallback prints
 */
static uint64_t name_form(const struct tfs_trace *t, const struct name_table *tb, uint32_t cls,
			  uint8_t mode, uint64_t v, struct sink *s)
{
	const struct name_ent *e = lookup(t, tb, cls, v);
	uint64_t len = 0;

	if (e || mode != NAME_FLAGS || v == 0) {
		if (e && s)
			rs_put(s, e->name, e->len);
		return e ? e->len : 0;
	}
	for (uint64_t bits = v; bits; bits &= bits - 1) {
		if (!lookup(t, tb, cls, bits & -bits))
			return 0;
	}
	for (uint64_t bits = v; bits; bits &= bits - 1) {
		e = lookup(t, tb, cls, bits & -bits);
		if (s && len)
			rs_put(s, "|", 1);
		if (s)
			rs_put(s, e->name, e->len);
		len += e->len + (len != 0);
	}
	return len;
}

/*
 * The widest form of (@cls, @mode, @v) over the tables that cover ranks, the fallback of
 * @flen bytes counted when some rank has no table or no name. Memoised per template pass.
 */
static uint64_t name_width(struct sink *s, const struct tfs_trace *t, uint32_t cls, uint8_t mode,
			   uint64_t v, uint64_t flen)
{
	const struct names *nm = &t->names;
	uint64_t covered = 0, w = 0;
	uint64_t h = (v ^ ((uint64_t)cls << 33) ^ mode) * UINT64_C(0x9e3779b97f4a7c15);
	struct name_memo *m = &s->memo[(h >> 56) % RS_MEMO_SLOTS];

	if (m->width != UINT64_MAX && m->cls == cls && m->mode == mode && m->v == v &&
	    m->flen == flen)
		return m->width;
	for (uint32_t i = 0; i < nm->n_tables; i++) {
		uint64_t f;

		if (!nm->tables[i].n_ranks)
			continue;
		covered += nm->tables[i].n_ranks;
		f = name_form(t, &nm->tables[i], cls, mode, v, NULL);
		if (f == 0)
			f = flen;
		w = f > w ? f : w;
	}
	if (covered < t->n_ranks && flen > w)
		w = flen;
	*m = (struct name_memo){cls, mode, v, flen, w};
	return w;
}

/*
 * A name hole: the name of (@cls, @v) in the event's rank, else @fb (@flen bytes) as printed
 * now (not recording: always @fb); JSON quotes it.
 */
static void put_named(struct sink *s, const struct tfs_trace *t, uint32_t cls, uint8_t mode,
		      uint64_t v, const char *fb, size_t flen, bool json)
{
	struct tmpl_seg seg = {.kind = SEG_SYMNAME, .type = mode, .json = json, .val = cls,
			       .a = v, .flen = (uint16_t)flen};

	if (!s->segs || cls == UINT32_MAX) {
		if (json)
			rs_put(s, "\"", 1);
		rs_put(s, fb, flen);
		if (json)
			rs_put(s, "\"", 1);
		return;
	}
	seg.len = rs_fallback(s, fb, flen);
	rs_hole(s, &seg, name_width(s, t, cls, mode, v, flen) + (json ? 2 : 0));
}

/*
 * An attached argument (FORMAT.md §9): the name of id @id, `<name>` in the text view and a
 * JSON string in the others, a hole as wide as its widest rank's when recording a template;
 * `<class#id>` (or "class#id") where a rank gives no name, nothing (or null) for no id.
 */
static void put_attached(struct sink *s, const struct tfs_trace *t, const struct schema_arg *a,
			 uint64_t id, bool json)
{
	char fb[TFS_MAX_NAME + 24];
	int flen;
	struct tmpl_seg seg = {.kind = SEG_NAME, .json = json, .val = name_class(t, a), .a = id};

	if (id == TFS_SYM_NONE) {
		if (json)
			rs_puts(s, "null");
		return;
	}
	flen = snprintf(fb, sizeof(fb), "%s#%llu", a->sym_class, (unsigned long long)id);
	if (!s->segs) {
		rs_put(s, json ? "\"" : "<", 1);
		rs_put(s, fb, (size_t)flen);
		rs_put(s, json ? "\"" : ">", 1);
		return;
	}
	seg.flen = (uint16_t)flen;
	seg.len = rs_fallback(s, fb, (size_t)flen);
	rs_hole(s, &seg, rnames_width(t, a, id, json, (size_t)flen));
}

/* A symbol: its name where the class is one of names (§9.2), else class#id; none: -1. */
static void put_sym(struct sink *s, const struct tfs_trace *t, const struct schema_arg *a,
		    uint64_t id, bool json)
{
	uint32_t cls = name_class(t, a);
	char fb[TFS_MAX_NAME + 24];
	int flen;

	if (id == TFS_SYM_NONE) {
		rs_puts(s, json ? "null" : "-1");
		return;
	}
	flen = snprintf(fb, sizeof(fb), "%s#%llu", a->sym_class, (unsigned long long)id);
	if (cls != UINT32_MAX && t->cls_attached[cls])
		cls = UINT32_MAX; /* names of a class that attached arguments print */
	put_named(s, t, cls, NAME_SYM, id, fb, (size_t)flen, json);
}

/* An integer the signature fixes: the text view names it when its class names @v. */
static void put_value(struct sink *s, const struct tfs_trace *t, const struct schema_arg *a,
		      uint8_t type, uint64_t v, bool json)
{
	uint32_t cls = json ? UINT32_MAX : name_class(t, a);
	struct tfs_buf b;
	struct sink num = {.out = &b};

	if (cls == UINT32_MAX || !s->segs) {
		put_num(s, type, v, json);
		return;
	}
	buf_init(&b);
	put_num(&num, type, v, false);
	if (num.err) {
		s->err = num.err;
	} else {
		put_named(s, t, cls, type == TFS_TYPE_HEX ? NAME_FLAGS : NAME_VALUE,
			  type == TFS_TYPE_I64 ? zigzag_enc((int64_t)v) : v, (const char *)b.data,
			  b.len, false);
	}
	buf_fini(&b);
}

/* ---- buffers (FORMAT.md §9.3) ---- */

enum {
	BUF_NONE,
	BUF_ADDR,  /* B_id (u64), B_off: id 0 means no allocation, the offset an address */
	BUF_NUMBERED, /* B (SYM of class alloc), B_off: id 0 means a buffer numbered buf#<off> */
};

/* Whether arguments @i and @i + 1 of @k are a buffer, printed as one named its stem. */
static int buf_pair(const struct schema_kind *k, uint32_t i, size_t *stem_len)
{
	const struct schema_arg *a, *b;
	size_t n;

	if (i + 1 >= k->n_args)
		return BUF_NONE;
	a = &k->args[i];
	b = &k->args[i + 1];
	n = strlen(b->name);
	if (n < 5 || strcmp(b->name + n - 4, "_off") ||
	    (b->type != TFS_TYPE_U64 && b->type != TFS_TYPE_HEX) ||
	    ((a->flags | b->flags) & (TFS_ARG_RESULT | TFS_ARG_ATTACH)))
		return BUF_NONE;
	*stem_len = n - 4;
	if (strncmp(a->name, b->name, n - 4))
		return BUF_NONE;
	if (!strcmp(a->name + n - 4, "_id") && a->type == TFS_TYPE_U64 &&
	    (a->enc == TFS_ENC_VAL) == (b->enc == TFS_ENC_VAL) &&
	    (a->enc == TFS_ENC_VAL || a->enc == TFS_ENC_SIG) &&
	    (b->enc == TFS_ENC_VAL || b->enc == TFS_ENC_SIG))
		return BUF_ADDR;
	if (!a->name[n - 4] && a->enc == TFS_ENC_SYM && !strcmp(a->sym_class, "alloc") &&
	    b->enc == TFS_ENC_SIG)
		return BUF_NUMBERED;
	return BUF_NONE;
}

/* alloc#<id>+0x<off>, or for id 0 0x<off>: a buffer of BUF_ADDR. */
static void put_addr(struct sink *s, uint64_t id, uint64_t off)
{
	if (id) {
		rs_puts(s, "alloc#");
		rs_dec(s, id, 0);
		rs_put(s, "+", 1);
	}
	put_hex(s, off);
}

static void put_buf(struct sink *s, const struct tfs_trace *t, const struct schema_kind *k,
		    uint32_t i, int style, const uint64_t *w, bool json)
{
	char fb[48];
	int flen;

	if (style == BUF_ADDR && k->args[i].enc == TFS_ENC_VAL) {
		struct tmpl_seg seg = {.kind = SEG_BUF, .json = json,
				       .val = k->val_index[i], .a = k->val_index[i + 1]};

		rs_hole(s, &seg, 9 + w[i] + w[i + 1] + (json ? 2 : 0));
		return;
	}
	if (style == BUF_NUMBERED && w[i] == 0) {
		flen = snprintf(fb, sizeof(fb), "buf#%llu", (unsigned long long)w[i + 1]);
		put_named(s, t, t->names.n_classes ? names_class(&t->names, "buf") : UINT32_MAX,
			  NAME_SYM, w[i + 1], fb, (size_t)flen, json);
		return;
	}
	if (json)
		rs_put(s, "\"", 1);
	put_addr(s, w[i], w[i + 1]);
	if (json)
		rs_put(s, "\"", 1);
}

/* ---- one argument ---- */

/*
 * Argument @i of @k with its CST word @word: a hole for what varies per occurrence (VAL,
 * RANK) or with the rank (names), else the constant printed now.
 */
static void put_arg(struct sink *s, const struct tfs_trace *t, const struct schema_kind *k,
		    uint32_t i, uint64_t word, bool json)
{
	const struct schema_arg *a = &k->args[i];
	struct tmpl_seg seg = {.json = json};

	switch (a->enc) {
	case TFS_ENC_VAL:
		seg.kind = SEG_VAL;
		seg.type = a->type;
		seg.val = k->val_index[i];
		rs_hole(s, &seg,
			json && a->type == TFS_TYPE_HEX ? hex_json_width((unsigned int)word) : word);
		return;
	case TFS_ENC_RANK:
		if (rank_word_special(word) && !json) {
			put_value(s, t, a, TFS_TYPE_I64, (uint64_t)rank_word_value(word), false);
			return;
		}
		seg.kind = SEG_RANK_ARG;
		seg.a = word;
		rs_hole(s, &seg, render_rank_width(t, word));
		return;
	case TFS_ENC_RVAL:
		/* a ranked value prints as a process rank would: the displacement's rank word */
		if (rval_word_ranked(word)) {
			seg.kind = SEG_RANK_ARG;
			seg.a = word & ~UINT64_C(1);
			rs_hole(s, &seg, render_rank_width(t, seg.a));
		} else {
			put_value(s, t, a, TFS_TYPE_I64, (uint64_t)rval_word_value(word), json);
		}
		return;
	case TFS_ENC_STR:
		rs_escaped(s, (const uint8_t *)t->strs[word], t->str_len[word], json);
		return;
	case TFS_ENC_SYM:
		if (a->flags & TFS_ARG_ATTACH)
			put_attached(s, t, a, word, json);
		else
			put_sym(s, t, a, word, json);
		return;
	default:
		put_value(s, t, a, a->type,
			  a->type == TFS_TYPE_I64 ? (uint64_t)zigzag_dec(word) : word, json);
	}
}

static bool attached(const struct schema_kind *k, uint32_t i)
{
	return i < k->n_args && (k->args[i].flags & TFS_ARG_ATTACH);
}

/* An argument as a signature shows it: "*" if it varies, ranks relative ("r+1"). */
static void put_sig_arg(struct sink *s, const struct tfs_trace *t, const struct schema_kind *k,
			uint32_t i, uint64_t word)
{
	const struct schema_arg *a = &k->args[i];
	int64_t rel;

	if (a->enc == TFS_ENC_VAL) {
		rs_put(s, "*", 1);
	} else if (a->enc == TFS_ENC_RANK && rank_word_special(word)) {
		rs_i64(s, rank_word_value(word));
	} else if (a->enc == TFS_ENC_RVAL && !rval_word_ranked(word)) {
		rs_i64(s, rval_word_value(word));
	} else if (a->enc == TFS_ENC_RANK || a->enc == TFS_ENC_RVAL) {
		rel = a->enc == TFS_ENC_RANK ? rank_word_value(word) : rval_word_value(word);
		rs_put(s, "r", 1);
		if (rel) {
			rs_put(s, rel > 0 ? "+" : "-", 1);
			rs_dec(s, rel > 0 ? (uint64_t)rel : -(uint64_t)rel, 0);
		}
	} else {
		put_arg(s, t, k, i, word, false);
	}
}

void rs_sig_arg(struct sink *s, const struct tfs_trace *t, uint32_t term, uint32_t arg)
{
	const struct schema_kind *k = &t->schema.kinds[t->term_kind[term]];

	put_sig_arg(s, t, k, arg, t->term_arg[t->term_argoff[term] + arg]);
}

/* Argument @i (and the one attached to it) of the text view or a signature. */
static void put_text_arg(struct sink *s, const struct tfs_trace *t, const struct schema_kind *k,
			 const uint64_t *w, uint32_t i, bool sig)
{
	if (sig)
		put_sig_arg(s, t, k, i, w[i]);
	else
		put_arg(s, t, k, i, w[i], false);
	if (attached(k, i + 1))
		put_arg(s, t, k, i + 1, w[i + 1], false);
}

void rs_text_args(struct sink *s, const struct tfs_trace *t, uint32_t term, bool sig)
{
	const struct schema_kind *k = &t->schema.kinds[t->term_kind[term]];
	const uint64_t *w = t->term_arg + t->term_argoff[term];
	bool first = true;
	size_t stem;
	int style;

	rs_put(s, "(", 1);
	for (uint32_t i = 0; i < k->n_args; i++) {
		if ((int32_t)i == k->result || attached(k, i))
			continue;
		if (!first)
			rs_put(s, ", ", 2);
		first = false;
		style = buf_pair(k, i, &stem);
		if (style != BUF_NONE) {
			rs_put(s, k->args[i].name, stem);
			rs_put(s, "=", 1);
			if (sig && k->args[i].enc == TFS_ENC_VAL)
				rs_put(s, "*", 1);
			else
				put_buf(s, t, k, i, style, w, false);
			i++;
			continue;
		}
		rs_puts(s, k->args[i].name);
		rs_put(s, "=", 1);
		put_text_arg(s, t, k, w, i, sig);
	}
	rs_put(s, ")", 1);
	if (k->result >= 0) {
		rs_put(s, " = ", 3);
		put_text_arg(s, t, k, w, (uint32_t)k->result, sig);
	}
}

/* The JSON name of argument @i: the result is "result" (unless another argument is). */
static const char *json_name(const struct schema_kind *k, uint32_t i)
{
	/* "result" is a number in every view (a symbolic result keeps its name: §9) */
	if ((int32_t)i != k->result || k->result_name_taken || k->args[i].enc == TFS_ENC_SYM)
		return k->args[i].name;
	return "result";
}

/* Which members a JSON view's "args" holds (put_members()). */
enum members {
	MEMBERS_ALL,	 /* every argument (the JSON lines view) */
	MEMBERS_SIG,	 /* the signature's arguments: no VAL, no buffer whose offset is one */
	MEMBERS_NAMED,	 /* the same but the first, the string that names the event */
	MEMBERS_COUNTER, /* a counter's value alone */
};

static bool member_kept(const struct schema_kind *k, uint32_t i, int style, enum members m)
{
	if (m == MEMBERS_ALL)
		return true;
	if (m == MEMBERS_COUNTER)
		return i == 1;
	if (m == MEMBERS_NAMED && i == 0)
		return false;
	return k->args[i].enc != TFS_ENC_VAL &&
	       !(style != BUF_NONE && k->args[i + 1].enc == TFS_ENC_VAL);
}

static void put_members(struct sink *s, const struct tfs_trace *t, uint32_t term, enum members m)
{
	const struct schema_kind *k = &t->schema.kinds[t->term_kind[term]];
	const uint64_t *w = t->term_arg + t->term_argoff[term];
	bool first = true;
	size_t stem;
	int style;

	for (uint32_t i = 0; i < k->n_args; i++) {
		const char *name = json_name(k, i);

		style = buf_pair(k, i, &stem);
		if (!member_kept(k, i, style, m)) {
			i += style != BUF_NONE;
			continue;
		}
		if (!first)
			rs_put(s, ",", 1);
		first = false;
		if (style != BUF_NONE) {
			rs_escaped(s, (const uint8_t *)name, stem, true);
			rs_put(s, ":", 1);
			put_buf(s, t, k, i, style, w, true);
			i++;
			continue;
		}
		rs_escaped(s, (const uint8_t *)name, strlen(name), true);
		rs_put(s, ":", 1);
		put_arg(s, t, k, i, w[i], true);
	}
}

void rs_json_args(struct sink *s, const struct tfs_trace *t, uint32_t term)
{
	put_members(s, t, term, MEMBERS_ALL);
}

/*
 * The Chrome view's "args" (FORMAT.md §9): what names the event, the same at every
 * occurrence of its terminal (the signature's arguments and the names attached to them),
 * printed as in the JSON lines view, but the string that names the event (@named: its first
 * argument); for a counter (@counter) its value alone. Viewers that key frames by name and
 * args (speedscope) then merge the occurrences of one call.
 */
void rs_chrome_args(struct sink *s, const struct tfs_trace *t, uint32_t term, bool counter,
		    bool named)
{
	put_members(s, t, term, counter ? MEMBERS_COUNTER : named ? MEMBERS_NAMED : MEMBERS_SIG);
}

/* ---- holes ---- */

void rs_arg_hole(struct sink *s, const struct tfs_trace *t, const struct tmpl_seg *g,
		 const struct render_in *in, const char *text)
{
	const struct name_ent *e;

	switch (g->kind) {
	case SEG_VAL:
		put_num(s, g->type, in->vals[g->val], g->json);
		break;
	case SEG_NAME:
		e = in->names && g->val != UINT32_MAX
			    ? names_get(&t->names, in->names, g->val, g->a)
			    : NULL;
		if (e && (t->name_plain[e - t->names.ents] & (g->json ? 2 : 1))) {
			rs_put(s, g->json ? "\"" : "<", 1);
			rs_put(s, e->name, e->len);
			rs_put(s, g->json ? "\"" : ">", 1);
		} else if (e) {
			put_escaped_in(s, (const uint8_t *)e->name, e->len, g->json,
				       g->json ? '"' : '<', g->json ? '"' : '>', ">");
		} else {
			rs_put(s, g->json ? "\"" : "<", 1);
			rs_put(s, text + g->len, g->flen);
			rs_put(s, g->json ? "\"" : ">", 1);
		}
		break;
	case SEG_SYMNAME:
		if (g->json)
			rs_put(s, "\"", 1);
		if (name_form(t, in->names, g->val, g->type, g->a, s) == 0)
			rs_put(s, text + g->len, g->flen);
		if (g->json)
			rs_put(s, "\"", 1);
		break;
	case SEG_BUF:
		if (g->json)
			rs_put(s, "\"", 1);
		put_addr(s, in->vals[g->val], in->vals[g->a]);
		if (g->json)
			rs_put(s, "\"", 1);
		break;
	default: /* SEG_RANK_ARG */
		rs_i64(s, rank_abs(g->a, in->rank));
	}
}
