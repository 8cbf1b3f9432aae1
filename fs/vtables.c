/*
 * The trace's tables as text: signatures.txt (every call signature with its occurrences,
 * counted from the grammars) and grammar.txt (the rules of every distinct stream). Neither
 * decodes an event; both are generated at their first stat and held by the tree.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tfs/reader.h"
#include "vnode_i.h"

int fs_signatures_new(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank, char **out,
		      size_t *len)
{
	uint32_t n = vt->ti.n_terminals;
	uint64_t *total = calloc((size_t)n + 1, sizeof(*total));
	uint64_t *counts = calloc((size_t)n + 1, sizeof(*counts));
	struct fs_sbuf b = {0};
	char *sig = NULL;
	size_t sig_cap = 0;
	int rc = total && counts ? 0 : -ENOMEM;

	for (uint32_t s = 0; s < vt->ti.n_streams && rc == 0; s++) {
		rc = tfs_trace_term_counts(vt->trace, s, counts);
		for (uint32_t i = 0; i < n && rc == 0; i++)
			total[i] += counts[i];
	}
	fs_sb_printf(&b, "# %" PRIu32 " call signatures of %" PRIu64 " events; \"*\" marks a "
		     "value that varies per call\n#%7s %14s  %s\n", n, vt->ti.n_events, "id",
		     "occurrences", "signature");
	for (uint32_t i = 0; i < n && rc == 0; i++) {
		ssize_t want = tfs_trace_signature(vt->trace, i, sig, sig_cap);

		if (want >= 0 && (size_t)want >= sig_cap) {
			free(sig);
			sig_cap = (size_t)want + 1;
			sig = malloc(sig_cap);
			want = sig ? tfs_trace_signature(vt->trace, i, sig, sig_cap) : -ENOMEM;
		}
		if (want < 0) {
			rc = (int)want;
			break;
		}
		fs_sb_printf(&b, "%8" PRIu32 " %14" PRIu64 "  %s\n", i, total[i], sig);
	}
	free(sig);
	free(counts);
	free(total);
	if (rc < 0) {
		free(b.data);
		return rc;
	}
	return fs_sb_detach(&b, out, len);
}

/* "== stream S (rank R, thread T): N events; also rank R thread T, ... ==" */
static int grammar_header(struct fs_vtree *vt, struct fs_sbuf *b, uint32_t s,
			  const uint32_t *next_same)
{
	struct tfs_stream_info si;
	int rc = tfs_trace_stream(vt->trace, s, &si);

	if (rc < 0)
		return rc;
	fs_sb_printf(b, "== stream %" PRIu32 " (rank %" PRIu32 ", thread %" PRIu32 "): %" PRIu64
		     " events", s, si.rank, si.thread, si.n_events);
	for (uint32_t o = next_same[s], first = 1; o != UINT32_MAX; o = next_same[o], first = 0) {
		rc = tfs_trace_stream(vt->trace, o, &si);
		if (rc < 0)
			return rc;
		fs_sb_printf(b, "%s rank %" PRIu32 " thread %" PRIu32, first ? "; also" : ",",
			     si.rank, si.thread);
	}
	fs_sb_printf(b, " ==\n");
	return 0;
}

int fs_grammar_new(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank, char **out,
		   size_t *len)
{
	uint32_t n = vt->ti.n_streams;
	uint32_t *next_same = malloc(((size_t)n + 1) * sizeof(*next_same));
	uint32_t *last = malloc(((size_t)n + 1) * sizeof(*last));
	struct fs_sbuf b = {0};
	int rc = next_same && last ? 0 : -ENOMEM;

	/* chain every stream after the first stream with the same data */
	for (uint32_t s = 0; s < n && rc == 0; s++) {
		struct tfs_stream_info si;

		next_same[s] = UINT32_MAX;
		last[s] = s;
		rc = tfs_trace_stream(vt->trace, s, &si);
		if (rc == 0 && si.same_as < s) {
			next_same[last[si.same_as]] = s;
			last[si.same_as] = s;
		}
	}
	fs_sb_printf(&b, "# the grammar of every distinct stream: rules R<i>, start rule S, "
		     "terminals t<id> (signatures.txt), x^n repeats n times\n");
	for (uint32_t s = 0; s < n && rc == 0; s++) {
		struct tfs_stream_info si;
		char *text;
		size_t text_len;

		rc = tfs_trace_stream(vt->trace, s, &si);
		if (rc < 0 || si.same_as != s)
			continue;
		rc = grammar_header(vt, &b, s, next_same);
		if (rc == 0)
			rc = tfs_trace_grammar_text(vt->trace, s, &text, &text_len);
		if (rc == 0) {
			fs_sb_put(&b, text, text_len);
			free(text);
		}
	}
	free(next_same);
	free(last);
	if (rc < 0) {
		free(b.data);
		return rc;
	}
	return fs_sb_detach(&b, out, len);
}
