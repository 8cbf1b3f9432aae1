/*
 * `tracefs grep`: GNU grep's answer over a file of the virtual tree, from the call
 * signatures where it can be (cmd_grep.c), and its patterns: what they match in a line and
 * what they can match in a signature's lines (grep_pat.c).
 */
#ifndef TFS_FS_GREP_I_H
#define TFS_FS_GREP_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The options of one search. */
struct fs_grep_opts {
	bool count, number, fixed, extended;
	uint64_t max; /* -m N; UINT64_MAX: no limit */
};

struct grep_one;

/* The patterns, one per line of PATTERN (grep_pat.c). */
struct fs_grep_pat {
	struct grep_one *pat;
	size_t n;
	bool fixed; /* match by memmem(): -F, or patterns without special characters */
	bool regex; /* every pat[].re compiled */
};

/* What a signature's lines do with the patterns. */
enum { SIG_NEVER, SIG_MAYBE, SIG_ALWAYS };

/*
 * Split @pattern at its newlines and compile each line as @o says. A pattern regcomp()
 * refuses is reported (fs_fail()). @return 0, -EINVAL (reported) or -ENOMEM; fini anyway
 */
int fs_grep_pat_init(struct fs_grep_pat *m, const char *pattern, const struct fs_grep_opts *o);
void fs_grep_pat_fini(struct fs_grep_pat *m);
/* Whether the line @s (@len bytes, no newline) is selected. */
bool fs_grep_pat_line(const struct fs_grep_pat *m, const char *s, size_t len);
/*
 * SIG_* of the lines of shape @shape (@len bytes, tfs_trace_term_shape_rank()): every one
 * selected, none, or it depends on the varying fields. @live is scratch of @len + 1 bytes.
 */
int fs_grep_pat_shape(const struct fs_grep_pat *m, const char *shape, size_t len,
		      unsigned char *live);

/*
 * @argv[0] is "grep". Prints what `tracefs cat TRACE PATH | LC_ALL=C grep OPTIONS PATTERN`
 * prints.
 * @return the exit status as grep's: 0 some line selected, 1 none, 2 usage or runtime error
 */
int fs_cmd_grep(int argc, char **argv);

#endif
