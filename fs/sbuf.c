/*
 * The growing text buffer of sbuf_i.h: doubling growth, printf formatting, one failure
 * flag. It never shrinks; names are escaped by the codec's one rule (tfs_escape()).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbuf_i.h"
#include "tfs/reader.h"

static bool grow(struct fs_sbuf *b, size_t need)
{
	size_t cap;
	char *d;

	if (b->cap - b->len > need)
		return true;
	cap = 2 * b->cap + need + 1;
	d = realloc(b->data, cap);
	if (!d) {
		b->failed = true;
		return false;
	}
	b->data = d;
	b->cap = cap;
	return true;
}

void fs_sb_printf(struct fs_sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->failed)
		return;
	for (;;) {
		va_start(ap, fmt);
		/* an empty buffer has no data yet: NULL + 0 is undefined, vsnprintf(NULL, 0) not */
		n = vsnprintf(b->data ? b->data + b->len : NULL, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->failed = true;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		if (!grow(b, (size_t)n))
			return;
	}
}

void fs_sb_put(struct fs_sbuf *b, const void *data, size_t len)
{
	if (b->failed || !grow(b, len))
		return;
	memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
}

void fs_sb_puts(struct fs_sbuf *b, const char *s)
{
	fs_sb_put(b, s, strlen(s));
}

void fs_sb_name_n(struct fs_sbuf *b, const char *s, size_t n, const char *also)
{
	size_t len = tfs_escape(NULL, 0, s, n, TFS_ESCAPE_TEXT, also);

	if (b->failed || !grow(b, len))
		return;
	tfs_escape(b->data + b->len, len + 1, s, n, TFS_ESCAPE_TEXT, also);
	b->len += len;
}

void fs_sb_name(struct fs_sbuf *b, const char *s, const char *also)
{
	fs_sb_name_n(b, s, strlen(s), also);
}

int fs_sb_detach(struct fs_sbuf *b, char **out, size_t *len)
{
	if (!b->failed && !b->data)
		fs_sb_put(b, "", 0);
	if (b->failed) {
		fs_sb_fini(b);
		return -ENOMEM;
	}
	*out = b->data;
	*len = b->len;
	*b = (struct fs_sbuf){0};
	return 0;
}

void fs_sb_fini(struct fs_sbuf *b)
{
	free(b->data);
	*b = (struct fs_sbuf){0};
}

void fs_sb_wrap(struct fs_sbuf *b, const char *text, size_t col, size_t indent)
{
	while (*text) {
		size_t word = strcspn(text, " \n");

		if (col > indent && col + 1 + word > FS_WRAP_COLUMNS) {
			fs_sb_printf(b, "\n%*s", (int)indent, "");
			col = indent;
		} else if (col > indent) {
			fs_sb_put(b, " ", 1);
			col++;
		}
		fs_sb_put(b, text, word);
		col += word;
		text += word;
		if (*text == '\n') {
			/* a forced line break: the next word starts a line */
			fs_sb_printf(b, "\n%*s", (int)indent, "");
			col = indent;
			text++;
		}
		text += strspn(text, " ");
	}
	fs_sb_put(b, "\n", 1);
}
