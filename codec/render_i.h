/*
 * Inside the renderer: the sink that rendered bytes go to (a buffer, or a template being
 * recorded), shared by render.c (lines, templates, holes) and rargs.c (how each argument
 * prints: numbers, escapes, names, buffers). Nothing outside those two includes this.
 */
#ifndef TFS_CODEC_RENDER_I_H
#define TFS_CODEC_RENDER_I_H

#include <string.h>

#include "trace_i.h"

/*
 * Where bytes go: appended to a buffer, or recorded into a template (@segs). A buffer whose
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
	struct name_memo *memo; /* recording: [RS_MEMO_SLOTS] widths of name holes (rargs.c) */
};

/* The widths of name holes already worked out while recording templates. */
struct name_memo {
	uint32_t cls;
	uint8_t mode;
	uint64_t v, flen, width; /* width: UINT64_MAX for an empty slot */
};

#define RS_MEMO_SLOTS 256

/* Recording a template: extend its last text segment or start one. */
void rs_record(struct sink *s, const void *p, size_t n);

static inline void rs_put(struct sink *s, const void *p, size_t n)
{
	struct tfs_buf *b = s->out;

	s->n += n;
	if (s->err)
		return;
	if (__builtin_expect(s->segs != NULL, 0)) {
		rs_record(s, p, n);
	} else if (b->cap - b->len >= n) {
		memcpy(b->data + b->len, p, n);
		b->len += n;
	} else if (s->fixed) {
		s->err = -TFS_ECORRUPT;
	} else {
		s->err = buf_put(b, p, n);
	}
}

static inline void rs_puts(struct sink *s, const char *str)
{
	rs_put(s, str, strlen(str));
}

/* Record hole @seg of @width characters (recording mode only). */
static inline void rs_hole(struct sink *s, const struct tmpl_seg *seg, uint64_t width)
{
	s->n += width;
	if (!s->err)
		s->err = buf_put(s->segs, seg, sizeof(*seg));
}

/* Record @n bytes of fallback text for a hole (recording mode): @return where they are. */
uint64_t rs_fallback(struct sink *s, const char *p, size_t n);

/* "00" to "99": the two digits of n at 2 * n. */
extern const char rs_digit_pairs[201];

/* A RANK argument's absolute value at @rank: specials (negative) as they are. */
static inline int64_t rank_abs(uint64_t word, uint32_t rank)
{
	if (rank_word_special(word))
		return rank_word_value(word);
	return (int64_t)((uint64_t)rank_word_value(word) + rank);
}

/* Unsigned decimal right-aligned in @width (0: natural width). */
void rs_dec(struct sink *s, uint64_t v, unsigned int width);
void rs_i64(struct sink *s, int64_t v);
/* FORMAT.md §9.1 escapes of @p between double quotes, for the text or the JSON views. */
void rs_escaped(struct sink *s, const uint8_t *p, size_t n, bool json);

/*
 * The arguments of terminal @term's line: the text view's "(name=value, ...)[ = result]"
 * (with @sig, as a signature shows them: "*" for what varies, ranks relative), or the
 * members of the JSON views' "args" object. Holes for what varies per occurrence.
 */
void rs_text_args(struct sink *s, const struct tfs_trace *t, uint32_t term, bool sig);
void rs_json_args(struct sink *s, const struct tfs_trace *t, uint32_t term);
void rs_chrome_args(struct sink *s, const struct tfs_trace *t, uint32_t term, bool counter,
		    bool named);
/* Argument @arg of @term as a signature shows it. */
void rs_sig_arg(struct sink *s, const struct tfs_trace *t, uint32_t term, uint32_t arg);
/* Print an argument hole (SEG_VAL, SEG_RANK_ARG, SEG_NAME, SEG_SYMNAME, SEG_BUF). */
void rs_arg_hole(struct sink *s, const struct tfs_trace *t, const struct tmpl_seg *g,
		 const struct render_in *in, const char *text);

#endif
