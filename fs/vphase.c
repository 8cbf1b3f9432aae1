/*
 * Phase directory names: maps any phase name to a file name (fs_phase_dirname) and resolves
 * the names of every phase of a trace so that no two phase directories of a rank collide
 * (fs_phase_dirs_new, or the phases of some ranks: fs_phase_dirs_name). The rules are the
 * ones README.txt states. Nothing here builds nodes.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfs/reader.h"
#include "vnode_i.h"

/* The longest directory name fs_phase_dirname() makes, before any "~<n>". */
#define DIRNAME_MAX 240

static size_t put_pct(char piece[4], unsigned char c)
{
	static const char hex[] = "0123456789ABCDEF";

	piece[0] = '%';
	piece[1] = hex[c >> 4];
	piece[2] = hex[c & 15];
	return 3;
}

static unsigned char hex_val(char h)
{
	return (unsigned char)(h <= '9' ? h - '0' : h - 'a' + 10);
}

/*
 * The character at @e, in the text views' escape of a name (tfs_escape(), TEXT), as a piece
 * of a directory name in @piece: an escape as %XX (\" and \\ as the byte itself, which a
 * file name may hold), '%', '/', '~' and a name's first dot when @dot as %XX, anything else
 * as it is. @return the bytes of @e it takes
 */
static size_t dir_piece(const char *e, bool dot, char piece[4], size_t *piece_len)
{
	const unsigned char c = (unsigned char)e[0];

	if (c == '\\') {
		switch (e[1]) {
		case 'x':
			*piece_len = put_pct(piece, (unsigned char)(hex_val(e[2]) << 4 | hex_val(e[3])));
			return 4;
		case 'n':
			*piece_len = put_pct(piece, '\n');
			return 2;
		case 't':
			*piece_len = put_pct(piece, '\t');
			return 2;
		case 'r':
			*piece_len = put_pct(piece, '\r');
			return 2;
		default: /* \" or \\ */
			piece[0] = e[1];
			*piece_len = 1;
			return 2;
		}
	}
	if (c == '%' || c == '/' || c == '~' || dot) {
		*piece_len = put_pct(piece, c);
		return 1;
	}
	/* a byte >= 0x80 that the escape let be starts a whole valid UTF-8 character */
	*piece_len = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
	memcpy(piece, e, *piece_len);
	return *piece_len;
}

/*
 * @name as the text views print it (FORMAT.md §9.1) with each escape as %XX, so valid UTF-8
 * without a control character (what info.json can name exactly), and one name's only ('%'
 * is %25). Cut at DIRNAME_MAX bytes, between two characters.
 */
static size_t encode_name(const char *name, char *out, size_t out_cap, bool *truncated)
{
	/* a byte of the name is at least a byte of the result: past DIRNAME_MAX + 4 bytes of
	 * it no character fits, and a character cut there starts past DIRNAME_MAX */
	char esc[(DIRNAME_MAX + 4) * 4 + 1];
	size_t n = strnlen(name, DIRNAME_MAX + 4), len = 0;
	bool dots = n > 0 && strspn(name, ".") == strlen(name);

	assert(out_cap > DIRNAME_MAX);
	*truncated = false;
	if (n == 0) {
		memcpy(out, "%00", 4);
		return 3;
	}
	tfs_escape(esc, sizeof(esc), name, n, TFS_ESCAPE_TEXT, NULL);
	for (const char *e = esc; *e;) {
		char piece[4];
		size_t piece_len, take = dir_piece(e, dots && e == esc, piece, &piece_len);

		if (len + piece_len > DIRNAME_MAX) {
			*truncated = true;
			break;
		}
		memcpy(out + len, piece, piece_len);
		len += piece_len;
		e += take;
	}
	out[len] = '\0';
	return len;
}

size_t fs_phase_dirname(const char *name, char *out, size_t out_cap)
{
	bool truncated;

	return encode_name(name, out, out_cap, &truncated);
}

int fs_phase_rec_cmp(const void *a, const void *b)
{
	const struct fs_phase_rec *x = a, *y = b;
	int c;

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

int fs_phase_rec_of(const struct tfs_trace *t, uint32_t idx, struct fs_phase_rec *rec)
{
	struct tfs_phase_info pi;
	struct tfs_stream_info si;
	int rc = tfs_trace_phase(t, idx, &pi);

	if (rc == 0)
		rc = tfs_trace_stream(t, pi.stream, &si);
	if (rc < 0)
		return rc;
	*rec = (struct fs_phase_rec){.idx = idx,
				     .slot = idx,
				     .rank = si.rank,
				     .thread = si.thread,
				     .stream = pi.stream,
				     .name = pi.name ? pi.name : "",
				     .first = pi.first_event,
				     .n_events = pi.n_events};
	return 0;
}

int fs_phase_recs(const struct tfs_trace *t, uint32_t n_phases, struct fs_phase_rec *recs)
{
	for (uint32_t i = 0; i < n_phases; i++) {
		int rc = fs_phase_rec_of(t, i, &recs[i]);

		if (rc < 0)
			return rc;
	}
	return 0;
}

static int cmp_thread_idx(const void *a, const void *b)
{
	const struct fs_phase_rec *x = *(const struct fs_phase_rec *const *)a;
	const struct fs_phase_rec *y = *(const struct fs_phase_rec *const *)b;

	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/*
 * Directory names of one group of phases (same rank and name, sorted by index): the encoded
 * name, plus "~<first index>" if it was cut; a phase whose thread an earlier phase of the
 * group already has gets the encoded name plus "~<own index>". The earlier phases of a
 * thread are found by sorting the group by thread: a rank may have many phases of a name.
 */
static int name_group(const struct fs_phase_rec *g, uint32_t n, char **dirs)
{
	const struct fs_phase_rec **by_thread = malloc(((size_t)n + 1) * sizeof(*by_thread));
	char enc[256], base[256 + 16], own[256 + 16];
	bool truncated;

	if (!by_thread)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		by_thread[i] = &g[i];
	qsort(by_thread, n, sizeof(*by_thread), cmp_thread_idx);
	encode_name(g[0].name, enc, sizeof(enc), &truncated);
	snprintf(base, sizeof(base), truncated ? "%s~%" PRIu32 : "%s", enc, g[0].idx);
	for (uint32_t i = 0; i < n; i++) {
		const struct fs_phase_rec *p = by_thread[i];
		bool seen = i > 0 && by_thread[i - 1]->thread == p->thread;

		snprintf(own, sizeof(own), "%s~%" PRIu32, enc, p->idx);
		dirs[p->slot] = strdup(seen ? own : base);
		if (!dirs[p->slot]) {
			free(by_thread);
			return -ENOMEM;
		}
	}
	free(by_thread);
	return 0;
}

int fs_phase_dirs_name(struct fs_phase_rec *recs, uint32_t n, char **dirs)
{
	int rc = 0;

	if (n > 1)
		qsort(recs, n, sizeof(*recs), fs_phase_rec_cmp);
	for (uint32_t i = 0, k; i < n && rc == 0; i += k) {
		for (k = 1; i + k < n && recs[i + k].rank == recs[i].rank &&
			    strcmp(recs[i + k].name, recs[i].name) == 0;
		     k++)
			;
		rc = name_group(&recs[i], k, dirs);
	}
	return rc;
}

int fs_phase_dirs_new(const struct tfs_trace *t, char ***out)
{
	struct tfs_trace_info ti;
	struct fs_phase_rec *recs;
	char **dirs;
	int rc;

	*out = NULL;
	tfs_trace_get_info(t, &ti);
	dirs = calloc((size_t)ti.n_phases + 1, sizeof(*dirs));
	recs = calloc((size_t)ti.n_phases + 1, sizeof(*recs));
	if (!dirs || !recs) {
		rc = -ENOMEM;
		goto err_free;
	}
	rc = fs_phase_recs(t, ti.n_phases, recs);
	if (rc == 0)
		rc = fs_phase_dirs_name(recs, ti.n_phases, dirs);
	if (rc < 0)
		goto err_free;
	free(recs);
	*out = dirs;
	return 0;

err_free:
	fs_phase_dirs_free(dirs, ti.n_phases);
	free(recs);
	return rc;
}

void fs_phase_dirs_free(char **dirs, uint32_t n_phases)
{
	if (!dirs)
		return;
	for (uint32_t i = 0; i < n_phases; i++)
		free(dirs[i]);
	free(dirs);
}

