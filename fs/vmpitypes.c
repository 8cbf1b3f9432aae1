/*
 * ranks/<r>/mpi_types.txt: the MPI derived datatypes a rank made, one line per constructor
 * call in the rank's events (thread by thread, in event order), as
 * `type#3 = MPI_Type_vector(count=4, blocklength=1, stride=4, oldtype=MPI_INT)`: the call as
 * trace.txt prints it, its `newtype` output moved to the front. An id that is freed and made
 * again has a line per making. A constructor is any call with an argument `newtype` of
 * symbolic class "type" (MPI_Type_vector, _contiguous, _create_struct, _dup...). It does not
 * describe predefined datatypes, which print by their names everywhere.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vlayout_i.h"

/* The argument index of @k's `newtype` output, or -1 when @k constructs no datatype. */
static int newtype_arg(const struct fs_kind *k)
{
	for (uint32_t i = 0; i < k->n_args; i++) {
		const struct tfs_arg_desc *a = &k->args[i];

		if (a->enc == TFS_ENC_SYM && a->sym_class && !strcmp(a->sym_class, "type") &&
		    !strcmp(a->name, "newtype"))
			return (int)i;
	}
	return -1;
}

/* Whether some terminal of a constructor occurs in @stream. */
static int stream_constructs(struct fs_vtree *vt, uint32_t stream, bool *yes)
{
	uint64_t *counts = calloc((size_t)vt->ti.n_terminals + 1, sizeof(*counts));
	int rc;

	*yes = false;
	if (!counts)
		return -ENOMEM;
	rc = tfs_trace_term_counts(vt->trace, stream, counts);
	for (uint32_t t = 0; rc == 0 && t < vt->ti.n_terminals && !*yes; t++) {
		uint32_t kind;

		if (!counts[t] || tfs_trace_term_kind(vt->trace, t, &kind) < 0)
			continue;
		*yes = kind < vt->ti.n_kinds && newtype_arg(&vt->kinds[kind]) >= 0;
	}
	free(counts);
	return rc;
}

bool fs_mpi_types_wanted(struct fs_vtree *vt, uint32_t rank)
{
	uint32_t first, n;
	bool yes = false;

	tfs_trace_rank_streams(vt->trace, rank, &first, &n);
	for (uint32_t k = 0; k < n && !yes; k++) {
		uint32_t s;

		if (tfs_trace_stream_sorted(vt->trace, first + k, &s) < 0 ||
		    stream_constructs(vt, s, &yes) < 0)
			return false;
	}
	return yes;
}

/*
 * Append the line of trace.txt line @line (@len bytes, of a call to @k) to @b, `newtype`
 * first. A line the text view did not print as "name(args)" is copied whole.
 */
static void put_constructor(struct fs_sbuf *b, const struct fs_kind *k, const char *line,
			    size_t len)
{
	const char *call, *close = NULL, *nt, *nt_end;

	while (len && (line[len - 1] == '\n' || line[len - 1] == ' '))
		len--;
	call = memmem(line, len, k->name, strlen(k->name));
	nt = call ? memmem(call, len - (size_t)(call - line), "newtype=", 8) : NULL;
	for (const char *c = line + len; call && c > call; c--) {
		if (c[-1] == ')') {
			close = c - 1;
			break;
		}
	}
	if (!nt || !close || nt > close) {
		fs_sb_printf(b, "%.*s\n", (int)len, line);
		return;
	}
	nt_end = nt + strcspn(nt, ",)");
	fs_sb_printf(b, "%.*s = ", (int)(nt_end - nt - 8), nt + 8);
	/* the call without ", newtype=..." (or "newtype=..., " when it comes first) */
	if (nt[-1] == ' ' && nt[-2] == ',') {
		fs_sb_put(b, call, (size_t)(nt - 2 - call));
		fs_sb_put(b, nt_end, (size_t)(close + 1 - nt_end));
	} else {
		fs_sb_put(b, call, (size_t)(nt - call));
		nt_end += *nt_end == ',' ? 1 : 0;
		nt_end += *nt_end == ' ' ? 1 : 0;
		fs_sb_put(b, nt_end, (size_t)(close + 1 - nt_end));
	}
	fs_sb_puts(b, "\n");
}

/* The constructor lines of segment @s. */
static int put_seg(struct fs_vtree *vt, const struct fs_seg *s, struct fs_sbuf *b)
{
	struct tfs_cursor *c = NULL;
	struct tfs_diag diag = {0};
	char *line = NULL;
	size_t cap = 0;
	bool yes;
	int rc = stream_constructs(vt, s->stream, &yes);

	if (rc < 0 || !yes)
		return rc;
	rc = tfs_cursor_new(vt->trace, s->stream, TFS_VIEW_TEXT, s->first, s->n_events, &c);
	for (uint64_t i = 0; rc == 0 && i < s->n_events; i++) {
		struct tfs_event ev;
		uint64_t from, to;

		rc = tfs_cursor_event(c, s->first + i, &ev, &diag);
		if (rc < 0 || ev.kind >= vt->ti.n_kinds || newtype_arg(&vt->kinds[ev.kind]) < 0)
			continue;
		rc = tfs_cursor_event_offset(c, i, &from);
		if (rc == 0)
			rc = i + 1 < s->n_events ? tfs_cursor_event_offset(c, i + 1, &to) : 0;
		if (rc == 0 && i + 1 == s->n_events)
			to = tfs_cursor_size(c);
		if (rc == 0 && to - from > cap) {
			char *l = realloc(line, (size_t)(to - from));

			rc = l ? 0 : -ENOMEM;
			line = l ? l : line;
			cap = l ? (size_t)(to - from) : cap;
		}
		if (rc == 0 && tfs_cursor_pread(c, line, (size_t)(to - from), from, &diag) !=
				       (ssize_t)(to - from))
			rc = -TFS_ECORRUPT;
		if (rc == 0)
			put_constructor(b, &vt->kinds[ev.kind], line, (size_t)(to - from));
	}
	free(line);
	tfs_cursor_free(c);
	return rc;
}

int fs_mpi_types_new(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank, char **out,
		     size_t *len)
{
	struct fs_sbuf b = {0};
	int rc = 0;

	for (uint32_t i = 0; i < sc->n_segs && rc == 0; i++)
		rc = put_seg(vt, &sc->segs[i], &b);
	if (rc < 0) {
		fs_sb_fini(&b);
		return rc;
	}
	return fs_sb_detach(&b, out, len);
}
