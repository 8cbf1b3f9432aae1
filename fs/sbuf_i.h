/*
 * A growing text buffer for the generated files (README.txt, profiles, tables). An
 * allocation failure makes every later call a no-op and fs_sb_detach() report it, so a
 * generator checks once at the end. Its one escape is the codec's (tfs_escape()).
 */
#ifndef TFS_FS_SBUF_I_H
#define TFS_FS_SBUF_I_H

#include <stdbool.h>
#include <stddef.h>

/** A growing text buffer; after an allocation failure every call is a no-op. */
struct fs_sbuf {
	char *data; /* NUL-terminated once anything was put */
	size_t len, cap;
	bool failed;
};

void fs_sb_printf(struct fs_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fs_sb_put(struct fs_sbuf *b, const void *data, size_t len);
void fs_sb_puts(struct fs_sbuf *b, const char *s);
/**
 * Append name or path @s as the text views print every name (FORMAT.md §9.1 without the
 * quotes, as trace.txt's attached names): one line, C1 controls and bytes of no UTF-8
 * escaped; the ASCII bytes of @also (may be NULL) as \xHH too, for a view whose names
 * end at a space or a ';'.
 */
void fs_sb_name(struct fs_sbuf *b, const char *s, const char *also);
/** fs_sb_name() of the @n bytes at @s. */
void fs_sb_name_n(struct fs_sbuf *b, const char *s, size_t n, const char *also);
/** Hand the buffer over (an empty one as ""). @return 0 or -ENOMEM (the buffer is freed) */
int fs_sb_detach(struct fs_sbuf *b, char **out, size_t *len);
/** The width fs_sb_wrap() fills lines to. */
#define FS_WRAP_COLUMNS 92

/**
 * Append @text wrapped to FS_WRAP_COLUMNS, the first line continuing at column @col, the
 * others indented by @indent spaces; a '\n' in @text starts a new line. Ends in a newline.
 */
void fs_sb_wrap(struct fs_sbuf *b, const char *text, size_t col, size_t indent);
/** Free what the buffer holds and make it empty again. */
void fs_sb_fini(struct fs_sbuf *b);

#endif
