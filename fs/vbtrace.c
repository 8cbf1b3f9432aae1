/*
 * The backtrace files of a rank: backtraces.txt (every stack#N with its frames symbolised,
 * outermost first) and allocs.folded (bytes allocated per symbolised stack, in the folded
 * format flame graph tools read). Both are generated once, at their first stat or open,
 * from the rank's backtraces and symbols (decoded by the codec on first use) and, for
 * allocs.folded, the events of the rank that name a stack. README.txt (vgen.c) states both
 * formats; this file must print exactly that. It does not touch zone stacks (vsummary.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "vnode_i.h"

/* " (<file>:<line>)", ":<line>" left out when 0, nothing when neither is known. */
static void put_location(struct fs_sbuf *b, const struct tfs_src_frame *f)
{
	if (!f->file[0] && !f->line)
		return;
	fs_sb_put(b, " (", 2);
	fs_sb_name(b, f->file, NULL);
	if (f->line)
		fs_sb_printf(b, ":%" PRIu32, f->line);
	fs_sb_put(b, ")", 1);
}

/* Source frames of @addr: 0 when unsymbolised; a negative errno on a reader error. */
static int symbol(struct fs_vtree *vt, uint32_t rank, uint64_t addr,
		  const struct tfs_src_frame **src, uint32_t *n)
{
	int rc = tfs_trace_symbol(vt->trace, rank, addr, src, n, NULL);

	if (rc == -ENOENT) {
		*n = 0;
		return 0;
	}
	return rc;
}

/*
 * Whether a backtrace of @n frames of @rank may have lost its outermost frames: it has as
 * many as the recording kept (metadata backtrace_depth, FORMAT.md §3.1), the capture
 * keeping the innermost ones of a deeper stack.
 */
static bool stack_cut(const struct fs_vtree *vt, uint32_t rank, uint32_t n)
{
	const char *v = tfs_trace_meta_rank(vt->trace, "backtrace_depth", rank);
	char *end;
	unsigned long long depth;

	if (!v || n == 0)
		return false;
	depth = strtoull(v, &end, 10);
	return *end == '\0' && end != v && depth > 0 && n >= depth;
}

int fs_backtraces_new(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank, char **out,
		      size_t *len)
{
	uint64_t n_bt = tfs_trace_n_backtraces(vt->trace, rank);
	struct fs_sbuf b = {0};
	int rc = 0;

	for (uint64_t id = 0; id < n_bt && rc == 0 && !b.failed; id++) {
		const uint64_t *frames;
		uint32_t n;

		rc = tfs_trace_backtrace(vt->trace, rank, id, &frames, &n, NULL);
		fs_sb_printf(&b, "stack#%" PRIu64 "\n", id);
		if (rc == 0 && stack_cut(vt, rank, n))
			fs_sb_put(&b, "  [truncated]\n", 14);
		for (uint32_t f = 0; f < n && rc == 0; f++) {
			const struct tfs_src_frame *src;
			uint32_t ns;

			rc = symbol(vt, rank, frames[f], &src, &ns);
			if (rc == 0 && ns == 0)
				fs_sb_printf(&b, "  %#" PRIx64 "\n", frames[f]);
			for (uint32_t k = 0; k < ns && rc == 0; k++) {
				fs_sb_put(&b, "  ", 2);
				fs_sb_name(&b, src[k].function, NULL);
				put_location(&b, &src[k]);
				if (k > 0)
					fs_sb_put(&b, " [inlined]", 10);
				fs_sb_put(&b, "\n", 1);
			}
		}
	}
	if (rc < 0) {
		free(b.data);
		return rc;
	}
	return fs_sb_detach(&b, out, len);
}

/* ---- allocs.folded ---- */

/* Bytes per stack id; ids past the rank's backtraces (a damaged trace) in a short list. */
struct stack_bytes {
	uint64_t *bytes; /* [n_bt] */
	uint64_t n_bt;
	uint64_t *odd_id, *odd_bytes;
	size_t n_odd, odd_cap;
};

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
	return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static int add_bytes(struct stack_bytes *sb, uint64_t id, uint64_t bytes)
{
	if (id < sb->n_bt) {
		sb->bytes[id] = sat_add(sb->bytes[id], bytes);
		return 0;
	}
	for (size_t i = 0; i < sb->n_odd; i++) {
		if (sb->odd_id[i] == id) {
			sb->odd_bytes[i] = sat_add(sb->odd_bytes[i], bytes);
			return 0;
		}
	}
	if (sb->n_odd == sb->odd_cap) {
		size_t cap = sb->odd_cap ? 2 * sb->odd_cap : 8;
		uint64_t *a = realloc(sb->odd_id, cap * sizeof(*a));
		uint64_t *c;

		if (!a)
			return -ENOMEM;
		sb->odd_id = a;
		c = realloc(sb->odd_bytes, cap * sizeof(*c));
		if (!c)
			return -ENOMEM;
		sb->odd_bytes = c;
		sb->odd_cap = cap;
	}
	sb->odd_id[sb->n_odd] = id;
	sb->odd_bytes[sb->n_odd++] = bytes;
	return 0;
}

uint64_t fs_term_stack(const struct fs_vtree *vt, uint32_t term)
{
	const struct fs_kind *k = &vt->kinds[vt->terms[term].kind];
	union tfs_arg args[TFS_MAX_ARGS];

	for (uint32_t i = 0; i < k->n_args; i++) {
		const struct tfs_arg_desc *a = &k->args[i];

		if (a->enc != TFS_ENC_SYM || !a->sym_class || strcmp(a->sym_class, "stack"))
			continue;
		if (tfs_trace_term_args(vt->trace, term, args) < 0)
			return FS_NO_STACK;
		return args[i].u;
	}
	return FS_NO_STACK;
}

/* Bytes an event allocated: the signature's byte counts plus its VAL ones (negative: 0). */
static uint64_t event_bytes(const struct fs_vtree *vt, const struct tfs_event *ev)
{
	const struct fs_kind *k = &vt->kinds[ev->kind];
	uint64_t bytes = vt->terms[ev->terminal].sig_bytes;

	for (uint32_t i = 0; i < k->n_args && i < ev->n_args; i++) {
		const struct tfs_arg_desc *a = &k->args[i];

		if (!(a->flags & TFS_ARG_BYTES) || a->enc != TFS_ENC_VAL)
			continue;
		if (a->type == TFS_TYPE_I64)
			bytes = sat_add(bytes, ev->args[i].i > 0 ? (uint64_t)ev->args[i].i : 0);
		else
			bytes = sat_add(bytes, ev->args[i].u);
	}
	return bytes;
}

/* Whether segment @s must be decoded: a part of its stream, or VAL byte counts to sum. */
static bool must_decode(const struct fs_vtree *vt, const struct fs_seg *s, const uint64_t *counts,
			const uint64_t *stack_of)
{
	struct tfs_stream_info si;

	if (s->first != 0 || tfs_trace_stream(vt->trace, s->stream, &si) < 0 ||
	    si.n_events != s->n_events)
		return true;
	for (uint32_t t = 0; t < vt->ti.n_terminals; t++) {
		if (counts[t] && stack_of[t] != FS_NO_STACK && vt->terms[t].bytes_val)
			return true;
	}
	return false;
}

static int seg_bytes(struct fs_vtree *vt, const struct fs_seg *s, const uint64_t *stack_of,
		     uint64_t *counts, struct stack_bytes *sb)
{
	struct tfs_cursor *c = NULL;
	struct tfs_event ev;
	int rc = tfs_trace_term_counts(vt->trace, s->stream, counts);

	if (rc < 0)
		return rc;
	if (!must_decode(vt, s, counts, stack_of)) {
		/* every byte count is in the signature: the grammar's counts suffice */
		for (uint32_t t = 0; t < vt->ti.n_terminals && rc == 0; t++) {
			uint64_t b = vt->terms[t].sig_bytes;

			if (counts[t] && stack_of[t] != FS_NO_STACK)
				rc = add_bytes(sb, stack_of[t], sat_mul(counts[t], b));
		}
		return rc;
	}
	rc = tfs_cursor_new(vt->trace, s->stream, TFS_VIEW_TEXT, s->first, s->n_events, &c);
	for (uint64_t i = s->first; i < s->first + s->n_events && rc == 0; i++) {
		rc = tfs_cursor_event(c, i, &ev, NULL);
		if (rc == 0 && stack_of[ev.terminal] != FS_NO_STACK)
			rc = add_bytes(sb, stack_of[ev.terminal], event_bytes(vt, &ev));
	}
	tfs_cursor_free(c);
	return rc;
}

int fs_fold_stack(struct fs_vtree *vt, uint32_t rank, uint64_t id, struct fs_sbuf *b)
{
	const uint64_t *frames;
	uint32_t n;
	bool cut;
	int rc;

	if (id == TFS_SYM_NONE) { /* an allocation whose backtrace sampling left out */
		fs_sb_put(b, "[not sampled]", 13);
		return 0;
	}
	if (id >= tfs_trace_n_backtraces(vt->trace, rank)) {
		fs_sb_printf(b, "[unknown stack#%" PRIu64 "]", id);
		return 0;
	}
	rc = tfs_trace_backtrace(vt->trace, rank, id, &frames, &n, NULL);
	if (rc == 0 && n == 0)
		fs_sb_put(b, "[no frames]", 11);
	cut = rc == 0 && stack_cut(vt, rank, n);
	if (cut)
		fs_sb_put(b, "[truncated]", 11);
	for (uint32_t f = 0; f < n && rc == 0; f++) {
		const struct tfs_src_frame *src;
		uint32_t ns;

		rc = symbol(vt, rank, frames[f], &src, &ns);
		if (rc == 0 && ns == 0)
			fs_sb_printf(b, "%s%#" PRIx64, f || cut ? ";" : "", frames[f]);
		for (uint32_t k = 0; k < ns && rc == 0; k++) {
			if (f || k || cut)
				fs_sb_put(b, ";", 1);
			fs_sb_name(b, src[k].function, ";");
		}
	}
	return rc;
}

struct folded {
	char *key;
	uint64_t bytes;
};

static int cmp_folded(const void *a, const void *b)
{
	return strcmp(((const struct folded *)a)->key, ((const struct folded *)b)->key);
}

/* One line per distinct folded stack with bytes, sorted (strcmp), equal stacks summed. */
static int print_folded(struct fs_vtree *vt, uint32_t rank, const struct stack_bytes *sb,
			char **out, size_t *len)
{
	size_t n_rows = 0, n_all = (size_t)sb->n_bt + sb->n_odd;
	struct folded *rows = calloc(n_all + 1, sizeof(*rows));
	struct fs_sbuf key = {0}, b = {0};
	int rc = rows ? 0 : -ENOMEM;

	for (size_t i = 0; i < n_all && rc == 0; i++) {
		uint64_t id = i < sb->n_bt ? i : sb->odd_id[i - sb->n_bt];
		uint64_t bytes = i < sb->n_bt ? sb->bytes[i] : sb->odd_bytes[i - sb->n_bt];

		if (!bytes)
			continue;
		key.len = 0;
		rc = fs_fold_stack(vt, rank, id, &key);
		fs_sb_put(&key, "", 1);
		if (rc == 0 && key.failed)
			rc = -ENOMEM;
		if (rc == 0)
			rows[n_rows].key = strdup(key.data);
		if (rc == 0 && !rows[n_rows].key)
			rc = -ENOMEM;
		if (rc == 0)
			rows[n_rows++].bytes = bytes;
	}
	if (rc == 0 && n_rows > 1)
		qsort(rows, n_rows, sizeof(*rows), cmp_folded);
	for (size_t i = 0; i < n_rows && rc == 0; i++) {
		uint64_t bytes = rows[i].bytes;

		while (i + 1 < n_rows && !strcmp(rows[i].key, rows[i + 1].key))
			bytes = sat_add(bytes, rows[++i].bytes);
		fs_sb_printf(&b, "%s %" PRIu64 "\n", rows[i].key, bytes);
	}
	for (size_t i = 0; rows && i < n_rows; i++)
		free(rows[i].key);
	free(rows);
	free(key.data);
	if (rc < 0) {
		free(b.data);
		return rc;
	}
	return fs_sb_detach(&b, out, len);
}

int fs_allocs_new(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank, char **out,
		  size_t *len)
{
	size_t n_terms = (size_t)vt->ti.n_terminals + 1;
	struct stack_bytes sb = {.n_bt = tfs_trace_n_backtraces(vt->trace, rank)};
	uint64_t *stack_of = NULL, *counts = NULL;
	int rc = fs_terms_ready(vt);

	if (rc < 0)
		return rc;
	sb.bytes = calloc(sb.n_bt + 1, sizeof(*sb.bytes));
	stack_of = calloc(n_terms, sizeof(*stack_of));
	counts = calloc(n_terms, sizeof(*counts));
	if (!sb.bytes || !stack_of || !counts) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (uint32_t t = 0; t < vt->ti.n_terminals; t++)
		stack_of[t] = fs_term_stack(vt, t);
	for (uint32_t i = 0; i < sc->n_segs && rc == 0; i++)
		rc = seg_bytes(vt, &sc->segs[i], stack_of, counts, &sb);
	if (rc == 0)
		rc = print_folded(vt, rank, &sb, out, len);
out_free:
	free(sb.bytes);
	free(sb.odd_id);
	free(sb.odd_bytes);
	free(stack_of);
	free(counts);
	return rc;
}
