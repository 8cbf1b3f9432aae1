/*
 * replay/proxy.c and replay/README.txt of a trace's tree: a C program that makes the calls
 * of the trace again, and how to build and run it. The program's structure is the trace's:
 * each grammar rule becomes a function and each repetition a loop, each call signature a
 * function with its constant arguments (vreplay_call.c, vreplay_mpi.c), so the file grows
 * with the grammars, not with the events; what varies per call (VAL arguments, the time
 * between calls, zones) comes from one sequence per grammar position (vreplay_walk.c).
 * Streams that share a grammar share its code, each with its own values, chosen by rank
 * and thread when the proxy starts. Generated at the first stat, deterministically: the
 * same trace gives the same bytes. The runtime every proxy starts with is fs/proxy_rt.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vreplay_i.h"

#define O_CREAT_BIT 0100	/* Linux's O_CREAT: flags are recorded as the program passed them */
#define O_DIRECTORY_BIT 0200000 /* Linux's generic (and x86) O_DIRECTORY; arm64 has 040000 */
#define TFS_PHASE_THREAD 1u
#define TFS_PHASE_PROCESS 2u

static void gen_fini(struct rp_gen *g)
{
	for (uint32_t i = 0; g->terms && i < g->ti->n_terminals; i++)
		free(g->terms[i].code.data);
	free(g->terms);
	free(g->counts);
	free(g->total);
	free(g->rank_of);
	free(g->used);
	rp_mpi_free(g->mpi);
	rp_zlists_fini(&g->zl);
	free(g->fb);
	free(g->opened);
}

const uint8_t *rp_used(const struct rp_gen *g, uint32_t rank)
{
	uint32_t ord;

	if (fs_rank_ord(g->vt, rank, &ord) < 0)
		return NULL;
	return g->used + (size_t)ord * g->ti->n_terminals;
}

static int gen_init(struct rp_gen *g, struct fs_vtree *vt)
{
	uint32_t n = vt->ti.n_streams, nt = vt->ti.n_terminals;
	int rc = 0;

	memset(g, 0, sizeof(*g));
	g->vt = vt;
	g->t = vt->trace;
	g->ti = &vt->ti;
	g->timed = vt->ti.timing != TFS_TIMING_NONE;
	g->terms = calloc((size_t)nt + 1, sizeof(*g->terms));
	g->counts = calloc((size_t)n * nt + 1, sizeof(*g->counts));
	g->total = calloc((size_t)nt + 1, sizeof(*g->total));
	g->rank_of = calloc((size_t)n + 1, sizeof(*g->rank_of));
	/* a row per rank directory: the ranks the tree shows, whatever n_ranks says */
	g->used = calloc((size_t)vt->n_rank_dirs * nt + 1, 1);
	if (!g->terms || !g->counts || !g->total || !g->rank_of || !g->used)
		return -ENOMEM;
	for (uint32_t s = 0; rc == 0 && s < n; s++) {
		struct tfs_stream_info si;
		uint8_t *row;

		rc = tfs_trace_stream(vt->trace, s, &si);
		if (rc == 0)
			rc = tfs_trace_term_counts(vt->trace, s, g->counts + (size_t)s * nt);
		row = rc == 0 ? (uint8_t *)rp_used(g, si.rank) : NULL;
		for (uint32_t i = 0; rc == 0 && i < nt; i++) {
			g->total[i] += g->counts[(size_t)s * nt + i];
			if (row && g->counts[(size_t)s * nt + i])
				row[i] = 1;
		}
		g->rank_of[s] = si.rank;
	}
	if (rc == 0)
		rc = rp_mpi_new(g);
	if (rc == 0)
		rc = rp_terms_build(g);
	return rc;
}

/* ---- grammars ---- */

static void gram_free(struct rp_gram *gr)
{
	for (uint32_t b = 0; gr->blocks && b < gr->n_blocks; b++) {
		for (uint32_t r = 0; gr->blocks[b].rules && r < gr->blocks[b].n_rules; r++) {
			free(gr->blocks[b].rules[r].elems);
			free(gr->blocks[b].rules[r].slot);
		}
		free(gr->blocks[b].rules);
	}
	free(gr->blocks);
}

/* Copy @stream's grammar and give every terminal element its slots. */
static int gram_load(struct rp_gen *g, uint32_t stream, struct rp_gram *gr)
{
	struct tfs_grammar_info gi;
	int rc = tfs_trace_grammar_info(g->t, stream, &gi);

	memset(gr, 0, sizeof(*gr));
	gr->stream = stream;
	if (rc < 0)
		return rc;
	gr->n_blocks = gi.n_blocks;
	gr->blocks = calloc((size_t)gi.n_blocks + 1, sizeof(*gr->blocks));
	if (!gr->blocks)
		return -ENOMEM;
	for (uint32_t b = 0; b < gi.n_blocks; b++) {
		struct rp_block *bl = &gr->blocks[b];
		struct tfs_block_info bi;

		rc = tfs_trace_block(g->t, stream, b, &bi);
		if (rc < 0)
			return rc;
		bl->rules = calloc(bi.n_rules, sizeof(*bl->rules));
		if (!bl->rules)
			return -ENOMEM;
		bl->n_rules = bi.n_rules;
		for (uint32_t r = 0; r < bi.n_rules; r++) {
			struct rp_rule *ru = &bl->rules[r];
			struct tfs_rule_info ri;

			rc = tfs_trace_rule(g->t, stream, b, r, &ri);
			if (rc < 0)
				return rc;
			ru->elems = calloc((size_t)ri.n_elems + 1, sizeof(*ru->elems));
			ru->slot = calloc((size_t)ri.n_elems + 1, sizeof(*ru->slot));
			if (!ru->elems || !ru->slot)
				return -ENOMEM;
			ru->n_elems = ri.n_elems;
			for (uint32_t i = 0; i < ri.n_elems; i++) {
				rc = tfs_trace_rule_elem(g->t, stream, b, r, i, &ru->elems[i]);
				if (rc < 0)
					return rc;
				if (ru->elems[i].is_rule)
					continue;
				ru->slot[i] = gr->n_slots;
				gr->n_slots += rp_slots(g->timed, &g->terms[ru->elems[i].id]);
			}
		}
	}
	gr->walk = gr->n_slots > 0;
	return 0;
}

static void emit_grammar(struct fs_sbuf *b, const struct rp_gram *gr, uint32_t gi)
{
	fs_sb_printf(b, "/* grammar %u: the calls of stream %u (%s) */\n\n", gi, gr->stream,
		     gr->n_blocks > 1 ? "its blocks one after the other" : "one block");
	for (uint32_t k = 0; k < gr->n_blocks; k++) {
		const struct rp_block *bl = &gr->blocks[k];

		for (uint32_t r = 0; r < bl->n_rules; r++) {
			const struct rp_rule *ru = &bl->rules[r];

			fs_sb_printf(b, "static void g%u_%u_%u(void)\n{\n", gi, k, r);
			for (uint32_t i = 0; i < ru->n_elems; i++) {
				const struct tfs_rule_elem *e = &ru->elems[i];
				char call[64];

				if (e->is_rule)
					snprintf(call, sizeof(call), "g%u_%u_%u()", gi, k, e->id);
				else
					snprintf(call, sizeof(call), "t%u(%u)", e->id, ru->slot[i]);
				if (e->count > 1)
					fs_sb_printf(b,
						     "\tfor (uint64_t i = 0; i < %" PRIu64
						     "u; i++)\n\t\t%s;\n",
						     e->count, call);
				else
					fs_sb_printf(b, "\t%s;\n", call);
			}
			fs_sb_printf(b, "}\n\n");
		}
	}
	fs_sb_printf(b, "static void g%u_run(void)\n{\n", gi);
	for (uint32_t k = 0; k < gr->n_blocks; k++)
		fs_sb_printf(b, "\tg%u_%u_%u();\n", gi, k, gr->blocks[k].n_rules - 1);
	fs_sb_printf(b, "}\n\n");
}

/* ---- call functions ---- */

/* The signature as a comment (rp_put_comment()), at most 240 bytes of it. */
static void emit_sig(struct rp_gen *g, struct fs_sbuf *b, uint32_t term)
{
	char sig[512];
	ssize_t n = tfs_trace_signature(g->t, term, sig, sizeof(sig));
	size_t len = n < 0 ? 0 : strlen(sig), keep = tfs_utf8_cut(sig, len, 240);

	rp_put_comment(b, sig, keep);
	if (keep < len)
		fs_sb_put(b, "...", 3);
}

static void emit_term(struct rp_gen *g, struct fs_sbuf *b, uint32_t i, uint64_t count)
{
	const struct rp_term *t = &g->terms[i];
	uint32_t vb = rp_val_base(g->timed, t);
	bool skip = t->alloc && g->timed;

	fs_sb_printf(b, "/* t%u, %" PRIu64 " call%s: ", i, count, count == 1 ? "" : "s");
	emit_sig(g, b, i);
	fs_sb_printf(b, " */\nstatic void t%u(uint32_t s)\n{\n", i);
	for (uint32_t j = 0; j < t->n_vals; j++)
		fs_sb_printf(b, "\tconst int64_t v%u = rt_v(s + %u);\n", j, vb + j);
	fs_sb_printf(b, "\n\trt_pre(s);\n");
	if (t->what == RP_W_NONE) {
		fs_sb_printf(b, "\t/* left out: %s */\n", t->why ? t->why : "");
	} else {
		if (t->approx && t->why)
			fs_sb_printf(b, "\t/* approximated: %s */\n", t->why);
		/* an allocation the trace has inside a libc call: that call makes it */
		if (skip)
			fs_sb_printf(b, "\tif (!rt_v(s + 1))\n\t");
		fs_sb_printf(b, "\t%s\n", t->code.data ? t->code.data : "");
	}
	for (uint32_t j = 0; j < t->n_vals; j++)
		fs_sb_printf(b, "\t(void)v%u;\n", j);
	fs_sb_printf(b, "\trt_done();\n}\n\n");
}

/* ---- phases ---- */

struct prec {
	uint32_t stream, rank, thread;
	uint64_t first, n;
	const char *name;
	bool skip;
	unsigned int scope;
};

/* A phase MPI_Info_set("tracefs_phase") switched: the replayed call switches it again. */
static bool info_phase(struct rp_gen *g, const struct prec *p)
{
	struct tfs_cursor *c = NULL;
	struct tfs_event ev;
	struct tfs_kind_desc kd;
	bool yes = false;

	if (p->first == 0 || tfs_cursor_new(g->t, p->stream, TFS_VIEW_TEXT, p->first - 1, 1, &c))
		return false;
	if (tfs_cursor_event(c, p->first - 1, &ev, NULL) == 0 &&
	    tfs_trace_kind(g->t, ev.kind, &kd) == 0 &&
	    (!strcmp(kd.name, "MPI_Info_set") || !strcmp(kd.name, "MPI_Info_delete"))) {
		for (uint32_t i = 0; i < kd.n_args && i < ev.n_args; i++)
			if (!strcmp(kd.args[i].name, "key") && ev.args[i].s &&
			    !strcmp(ev.args[i].s, "tracefs_phase"))
				yes = true;
	}
	tfs_cursor_free(c);
	return yes;
}

/* Every phase: whether the proxy begins it, where, and with which scope. */
static int phases_load(struct rp_gen *g, struct prec **out)
{
	uint32_t n = g->ti->n_phases;
	struct prec *p = calloc((size_t)n + 1, sizeof(*p));

	*out = p;
	if (!p)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		struct tfs_phase_info pi;
		struct tfs_stream_info si;
		int rc = tfs_trace_phase(g->t, i, &pi);

		if (rc == 0)
			rc = tfs_trace_stream(g->t, pi.stream, &si);
		if (rc < 0)
			return rc;
		p[i] = (struct prec){.stream = pi.stream,
				     .rank = si.rank,
				     .thread = si.thread,
				     .first = pi.first_event,
				     .n = pi.n_events,
				     .name = pi.name};
		p[i].skip = info_phase(g, &p[i]);
	}
	/* a phase on several threads of a rank is a process's, begun by its lowest thread */
	for (uint32_t i = 0; i < n; i++) {
		uint32_t low = p[i].thread, threads = 0, streams = 0;

		for (uint32_t j = 0; j < n; j++) {
			if (p[j].rank != p[i].rank || strcmp(p[j].name, p[i].name))
				continue;
			threads += p[j].thread != p[i].thread;
			low = p[j].thread < low ? p[j].thread : low;
		}
		for (uint32_t s = 0; s < g->ti->n_streams; s++) {
			struct tfs_stream_info si;

			streams += tfs_trace_stream(g->t, s, &si) == 0 && si.rank == p[i].rank;
		}
		p[i].scope = threads || streams == 1 ? TFS_PHASE_PROCESS : TFS_PHASE_THREAD;
		p[i].skip |= p[i].thread != low;
	}
	return 0;
}

/* Phase actions of @stream, by event: ends (the latest begun first), then begins. */
static void emit_phases(struct fs_sbuf *b, const struct prec *p, uint32_t n, uint32_t stream,
			uint32_t *n_out)
{
	uint64_t at = 0;

	*n_out = 0;
	for (;;) {
		uint64_t next = UINT64_MAX;

		for (uint32_t i = 0; i < n; i++) {
			if (p[i].skip || p[i].stream != stream)
				continue;
			if (p[i].first >= at && p[i].first < next)
				next = p[i].first;
			if (p[i].first + p[i].n >= at && p[i].first + p[i].n < next)
				next = p[i].first + p[i].n;
		}
		if (next == UINT64_MAX)
			break;
		for (uint32_t i = n; i-- > 0;)
			if (!p[i].skip && p[i].stream == stream && p[i].n &&
			    p[i].first + p[i].n == next) {
				fs_sb_printf(b, "\t{%" PRIu64 "u, NULL, 0},\n", next);
				(*n_out)++;
			}
		for (uint32_t i = 0; i < n; i++) {
			if (p[i].skip || p[i].stream != stream || p[i].first != next)
				continue;
			fs_sb_printf(b, "\t{%" PRIu64 "u, ", next);
			rp_put_cstr(b, p[i].name);
			fs_sb_printf(b, ", %uu},\n", p[i].scope);
			(*n_out)++;
			if (p[i].n == 0) {
				fs_sb_printf(b, "\t{%" PRIu64 "u, NULL, 0},\n", next);
				(*n_out)++;
			}
		}
		at = next + 1;
	}
}

/* ---- streams ---- */

/* Whether a pthread_create of @rank starts thread @thread (else the proxy does at start). */
static bool created(struct rp_gen *g, uint32_t rank, uint32_t thread)
{
	const uint8_t *used = rp_used(g, rank);
	uint32_t nt = g->ti->n_terminals;

	for (uint32_t i = 0; used && i < nt; i++) {
		union tfs_arg args[TFS_MAX_ARGS];
		struct tfs_kind_desc kd;

		if (!used[i] ||
		    tfs_trace_kind(g->t, g->terms[i].kind, &kd) < 0 ||
		    strcmp(kd.name, "pthread_create") || tfs_trace_term_args(g->t, i, args) < 0)
			continue;
		if (kd.n_args && args[0].u == thread)
			return true;
	}
	return false;
}

struct seqtext {
	uint32_t gram;
	char *text;
};

static int emit_streams(struct rp_gen *g, struct fs_sbuf *b, struct rp_gram *grams,
			const uint32_t *gram_of, const uint64_t *counts, const uint32_t *rank_of)
{
	uint32_t n = g->ti->n_streams, *seq_of = calloc((size_t)n + 1, sizeof(*seq_of));
	uint32_t *zl_of = calloc((size_t)n + 1, sizeof(*zl_of));
	struct seqtext *texts = calloc((size_t)n + 1, sizeof(*texts));
	struct fs_sbuf rows = {0};
	struct prec *ph = NULL;
	uint32_t n_texts = 0;
	int rc = seq_of && zl_of && texts ? phases_load(g, &ph) : -ENOMEM;

	for (uint32_t s = 0; rc == 0 && s < n; s++) {
		const struct rp_gram *gr = &grams[gram_of[s]];
		struct fs_sbuf seq = {0}, tabs = {0};
		struct tfs_stream_info si;
		uint32_t k, n_ph;

		rc = tfs_trace_stream(g->t, s, &si);
		if (rc < 0)
			break;
		seq_of[s] = UINT32_MAX;
		if (gr->walk && si.same_as != s) {
			seq_of[s] = seq_of[si.same_as];
			zl_of[s] = zl_of[si.same_as];
		} else if (gr->walk) {
			rc = rp_walk(g, gr, s, &seq, &tabs, &zl_of[s]);
			for (k = 0; rc == 0 && k < n_texts; k++)
				if (texts[k].gram == gram_of[s] && seq.data &&
				    !strcmp(texts[k].text, seq.data))
					break;
			if (rc == 0 && seq.data && k == n_texts) {
				fs_sb_put(b, tabs.data ? tabs.data : "", tabs.len);
				fs_sb_printf(b, "static const struct rt_seq q%u[] = {\n%s};\n\n", k,
					     seq.data);
				texts[n_texts++] = (struct seqtext){gram_of[s], seq.data};
				seq.data = NULL;
			}
			seq_of[s] = k;
			free(seq.data);
			free(tabs.data);
		}
		fs_sb_printf(b, "static const struct rt_phase ph%u[] = {\n", s);
		emit_phases(b, ph, g->ti->n_phases, s, &n_ph);
		fs_sb_printf(b, "\t{0, NULL, 0}};\n\n");
		fs_sb_printf(&rows, "\t{%u, %u, g%u_run, ", si.rank, si.thread, gram_of[s]);
		if (seq_of[s] == UINT32_MAX)
			fs_sb_printf(&rows, "NULL, 0, ");
		else
			fs_sb_printf(&rows, "q%u, %u, ", seq_of[s], gr->n_slots);
		fs_sb_printf(&rows, "ph%u, %u, %u, %" PRIu64 "u, %d},\n", s, n_ph, zl_of[s],
			     si.n_events, created(g, si.rank, si.thread));
	}
	if (rc == 0) {
		fs_sb_printf(b, "static const struct rt_stream rt_streams[] = {\n%s};\n\n",
			     rows.data ? rows.data : "");
		fs_sb_printf(b,
			     "static const struct rt_stream *rt_stream_table(uint32_t *n)\n{\n"
			     "\t*n = %u;\n\treturn rt_streams;\n}\n\n",
			     n);
	}
	for (uint32_t k = 0; k < n_texts; k++)
		free(texts[k].text);
	free(texts);
	free(rows.data);
	free(ph);
	free(seq_of);
	free(zl_of);
	return rc;
}

static void emit_zone_lists(struct rp_gen *g, struct fs_sbuf *b)
{
	const struct rp_zlists *z = &g->zl;

	for (uint32_t i = 1; i < z->n; i++) {
		fs_sb_printf(b, "static const char *const zl%u[] = {", i);
		for (uint32_t k = z->first[i]; k < z->first[i + 1]; k++) {
			rp_put_cstr(b, z->names[z->items[k]]);
			fs_sb_printf(b, ", ");
		}
		fs_sb_printf(b, "NULL};\n");
	}
	fs_sb_printf(b, "\nstatic const char *const *rt_zone_list(uint32_t id)\n{\n");
	if (z->n > 1) {
		fs_sb_printf(b, "\tstatic const char *const *const l[] = {NULL");
		for (uint32_t i = 1; i < z->n; i++)
			fs_sb_printf(b, ", zl%u", i);
		fs_sb_printf(b, "};\n\n\treturn id < %u ? l[id] : NULL;\n}\n\n", z->n);
	} else {
		fs_sb_printf(b, "\t(void)id;\n\treturn NULL;\n}\n\n");
	}
}

/* ---- files a rank reads without making them ---- */

static int64_t read_bytes(const struct rp_gen *g, uint32_t rank, uint64_t file)
{
	for (uint32_t i = 0; i < g->n_fb; i++)
		if (g->fb[i].rank == rank && g->fb[i].file == file)
			return g->fb[i].bytes > g->fb[i].end ? g->fb[i].bytes : g->fb[i].end;
	return 0;
}

/* A terminal opening an existing file by name: its path and file id. */
static bool opens_input(struct rp_gen *g, uint32_t term, const char **path, uint64_t *file,
			bool *dir)
{
	union tfs_arg args[TFS_MAX_ARGS];
	struct tfs_kind_desc kd;
	int p = -1, f = -1, fl = -1, m = -1;

	if (tfs_trace_kind(g->t, g->terms[term].kind, &kd) < 0 ||
	    tfs_trace_term_args(g->t, term, args) < 0)
		return false;
	for (uint32_t i = 0; i < kd.n_args; i++) {
		const char *n = kd.args[i].name;

		if (!strcmp(n, "path") && kd.args[i].enc == TFS_ENC_STR)
			p = (int)i;
		else if (!strcmp(n, "file") && kd.args[i].enc == TFS_ENC_SYM)
			f = (int)i;
		else if (!strcmp(n, "flags") && kd.args[i].enc == TFS_ENC_SIG)
			fl = (int)i;
		else if (!strcmp(n, "opentype") && kd.args[i].enc == TFS_ENC_STR)
			m = (int)i;
	}
	*dir = !strcmp(kd.name, "opendir");
	if (p < 0 || f < 0 || !args[p].s || !args[p].s[0])
		return false;
	if (!strcmp(kd.name, "open") || !strcmp(kd.name, "openat")) {
		if (fl < 0 || (args[fl].u & O_CREAT_BIT))
			return false;
		/* a directory opened to be read (fdopendir): made as one */
		*dir = (args[fl].u & O_DIRECTORY_BIT) != 0;
	} else if (!strcmp(kd.name, "fopen")) {
		if (m < 0 || !args[m].s || args[m].s[0] != 'r')
			return false;
	} else if (!*dir) {
		return false;
	}
	*path = args[p].s;
	*file = args[f].u;
	return true;
}

/* The file id of a rank's standard input, if an fd_file event names it. */
static bool stdin_file(struct rp_gen *g, uint32_t term, uint64_t *file)
{
	union tfs_arg args[TFS_MAX_ARGS];
	struct tfs_kind_desc kd;

	if (tfs_trace_kind(g->t, g->terms[term].kind, &kd) < 0 || strcmp(kd.name, "fd_file") ||
	    kd.n_args < 3 || tfs_trace_term_args(g->t, term, args) < 0 || args[0].i != 0)
		return false;
	*file = args[2].u;
	return true;
}

static bool opened_at(const struct rp_gen *g, uint32_t rank, uint32_t term)
{
	for (uint32_t i = 0; i < g->n_opened; i++)
		if (g->opened[i].rank == rank && g->opened[i].term == term)
			return true;
	return false;
}

static const char *path_of(struct rp_gen *g, uint32_t term, union tfs_arg *args)
{
	struct tfs_kind_desc kd;

	if (tfs_trace_kind(g->t, g->terms[term].kind, &kd) < 0 ||
	    tfs_trace_term_args(g->t, term, args) < 0)
		return NULL;
	for (uint32_t i = 0; i < kd.n_args; i++)
		if (!strcmp(kd.args[i].name, "path") && kd.args[i].enc == TFS_ENC_STR)
			return args[i].s;
	return NULL;
}

/*
 * One rank's files: the directories of the paths its calls opened (they existed), the
 * files it read without making them (with the bytes it read), its standard input.
 */
static void setup_rank(struct rp_gen *g, struct fs_sbuf *b, uint32_t r, const uint64_t *counts,
		       const uint32_t *rank_of)
{
	const uint8_t *used = rp_used(g, r);
	uint32_t nt = g->ti->n_terminals;

	for (uint32_t i = 0; used && i < nt; i++) {
		union tfs_arg args[TFS_MAX_ARGS];
		const char *path;
		uint64_t file;
		bool dir;

		if (!used[i])
			continue;
		if (stdin_file(g, i, &file) && read_bytes(g, r, file) > 0) {
			fs_sb_printf(b, "\t\trt_stdin(%" PRId64 ");\n", read_bytes(g, r, file));
			continue;
		}
		/* the proxy's runtime skips the paths it uses as they are (/proc, /dev/null) */
		if (!opened_at(g, r, i) || !(path = path_of(g, i, args)))
			continue;
		if (strchr(path, '/')) {
			fs_sb_printf(b, "\t\trt_parent_dirs(");
			rp_put_cstr(b, path);
			fs_sb_printf(b, ");\n");
		}
		if (!opens_input(g, i, &path, &file, &dir))
			continue;
		fs_sb_printf(b, "\t\t%s(", dir ? "rt_parent_dirs" : "rt_input_file");
		rp_put_cstr(b, path);
		if (dir)
			fs_sb_printf(b, " \"/\");\n");
		else
			fs_sb_printf(b, ", %" PRId64 ");\n", read_bytes(g, r, file));
	}
}

static void emit_setup(struct rp_gen *g, struct fs_sbuf *b, const uint64_t *counts,
		       const uint32_t *rank_of)
{
	fs_sb_printf(b, "static void rt_setup_files(uint32_t rank)\n{\n\tswitch (rank) {\n");
	for (uint32_t k = 0; k < g->vt->n_rank_dirs; k++) {
		const uint32_t r = fs_rank_of_ord(g->vt, k);
		struct fs_sbuf lines = {0};

		setup_rank(g, &lines, r, counts, rank_of);
		if (lines.len)
			fs_sb_printf(b, "\tcase %u:\n%s\t\tbreak;\n", r, lines.data);
		if (lines.failed)
			b->failed = true;
		free(lines.data);
	}
	fs_sb_printf(b, "\tdefault:\n\t\tbreak;\n\t}\n}\n");
}

/*
 * rt_setup_allocs(): in a trace without allocation events, the blocks its MPI buffers name
 * by allocation id, allocated first so they get those ids again.
 */
static int emit_allocs(struct rp_gen *g, struct fs_sbuf *b, const uint64_t *counts,
		       const uint32_t *rank_of)
{
	uint32_t nt = g->ti->n_terminals;
	bool alloc_events = false;

	for (uint32_t i = 0; i < nt; i++)
		alloc_events |= g->terms[i].alloc;
	fs_sb_printf(b, "static void rt_setup_allocs(uint32_t rank)\n{\n\tswitch (rank) {\n");
	for (uint32_t k = 0; g->mpi && !alloc_events && k < g->vt->n_rank_dirs; k++) {
		const uint32_t r = fs_rank_of_ord(g->vt, k);
		struct fs_sbuf lines = {0};

		rp_mpi_allocs(g, &lines, g->used + (size_t)k * nt);
		if (lines.len)
			fs_sb_printf(b, "\tcase %u:\n%s\t\tbreak;\n", r, lines.data);
		b->failed |= lines.failed;
		free(lines.data);
	}
	fs_sb_printf(b, "\tdefault:\n\t\tbreak;\n\t}\n}\n\n");
	return 0;
}

/* ---- the whole file ---- */

static void emit_head(struct rp_gen *g, struct fs_sbuf *b, uint32_t n_grams)
{
	const char *prog = tfs_trace_meta(g->t, "program");
	uint32_t left = 0, approx = 0;
	struct fs_sbuf name = {0};

	for (uint32_t i = 0; i < g->ti->n_terminals; i++) {
		left += g->terms[i].what == RP_W_NONE;
		approx += g->terms[i].what != RP_W_NONE && g->terms[i].approx;
	}
	fs_sb_name(&name, prog ? prog : "a program", NULL);
	fs_sb_printf(b, "/*\n * proxy.c: makes the calls of ");
	rp_put_comment(b, name.data ? name.data : "", name.len);
	if (name.failed)
		b->failed = true;
	fs_sb_fini(&name);
	fs_sb_printf(b,
		     " again, rank by rank and thread by thread,\n * in the order and with the "
		     "arguments its trace records (tracefs %s; see README.txt).\n *\n",
		     tfs_version());
	if (g->mpi)
		fs_sb_printf(b,
			     " *   mpicc -O2 proxy.c -o proxy\n *   mpiexec -n %u ./proxy "
			     "[DIR] [--no-compute] [--compute-scale=X]\n",
			     g->ti->n_ranks);
	else
		fs_sb_printf(b, " *   cc -O2 proxy.c -o proxy   (glibc before 2.34: -pthread "
				"-ldl)\n *   ./proxy [DIR] "
				"[--no-compute] [--compute-scale=X]\n");
	fs_sb_printf(b,
		     " *\n * %" PRIu64 " calls of %u signatures in %u streams of %u rank%s, "
		     "%u distinct grammar%s; %u signature%s left out, %u approximated;\n"
		     " * %" PRIu64 " value sequences too irregular to keep whole (their first runs "
		     "repeat).\n */\n",
		     g->ti->n_events, g->ti->n_terminals, g->ti->n_streams, g->ti->n_ranks,
		     g->ti->n_ranks == 1 ? "" : "s", n_grams, n_grams == 1 ? "" : "s", left,
		     left == 1 ? "" : "s", approx, g->n_val_cut);
	fs_sb_printf(b,
		     "#define PROXY_MPI %d\n#define PROXY_TIMED %d\n#define PROXY_REC_IMPL %d\n\n",
		     g->mpi ? 1 : 0, g->timed ? 1 : 0, rp_mpi_impl(g));
}

int fs_replay_proxy_new(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank,
			char **out, size_t *len)
{
	uint32_t n = vt->ti.n_streams, nt = vt->ti.n_terminals, n_grams = 0;
	uint32_t *gram_of = calloc((size_t)n + 1, sizeof(*gram_of));
	struct rp_gram *grams = calloc((size_t)n + 1, sizeof(*grams));
	struct fs_sbuf b = {0}, body = {0};
	struct rp_gen g;
	int rc = gen_init(&g, vt);

	if (rc == 0 && (!gram_of || !grams))
		rc = -ENOMEM;
	for (uint32_t s = 0; rc == 0 && s < n; s++) {
		struct tfs_grammar_info gi;

		rc = tfs_trace_grammar_info(vt->trace, s, &gi);
		if (rc == 0 && gi.same_as == s) {
			gram_of[s] = n_grams;
			rc = gram_load(&g, s, &grams[n_grams++]);
		} else if (rc == 0) {
			gram_of[s] = gram_of[gi.same_as];
		}
	}
	if (rc == 0) {
		for (uint32_t i = 0; i < nt; i++)
			emit_term(&g, &body, i, g.total[i]);
		for (uint32_t k = 0; k < n_grams; k++)
			emit_grammar(&body, &grams[k], k);
		rc = emit_streams(&g, &body, grams, gram_of, g.counts, g.rank_of);
	}
	if (rc == 0) {
		emit_head(&g, &b, n_grams);
		fs_sb_printf(&b, "%s\n", fs_proxy_rt);
		fs_sb_printf(&b, "/* ==== generated from the trace ==== */\n\n");
		if (g.mpi)
			rp_mpi_tables(&g, &b);
		emit_zone_lists(&g, &b);
		fs_sb_put(&b, body.data ? body.data : "", body.len);
		emit_setup(&g, &b, g.counts, g.rank_of);
		rc = emit_allocs(&g, &b, g.counts, g.rank_of);
		if (body.failed)
			b.failed = true;
	}
	for (uint32_t k = 0; k < n_grams; k++)
		gram_free(&grams[k]);
	free(grams);
	free(gram_of);
	free(body.data);
	gen_fini(&g);
	if (rc < 0) {
		free(b.data);
		return rc;
	}
	return fs_sb_detach(&b, out, len);
}

/* ---- README.txt ---- */

static const char readme_text[] =
    "replay/: a proxy of this trace\n"
    "\n"
    "proxy.c is one self-contained C file that makes the calls this trace records again: on\n"
    "each rank and each thread, the same calls in the same order with the same arguments,\n"
    "and between them, for a timed trace, a busy wait as long as the program computed there.\n"
    "Its structure is the trace's grammar: each rule is a function, each repetition a loop,\n"
    "each call signature a function with its constant arguments, so it grows with the\n"
    "grammar, not with the events. Ranks and threads that share a grammar share its code\n"
    "(each with its own values), chosen by rank and thread when the proxy starts. It needs\n"
    "nothing but a C compiler (and MPI for an MPI trace).\n"
    "\n"
    "Build and run:\n";

static const char readme_opts[] =
    "\n"
    "  DIR, --dir=DIR, PROXY_DIR=DIR   the scratch directory the proxy works in (default\n"
    "                     ./proxy.d, made if missing), which stands for the program's /:\n"
    "                     relative paths start in it, absolute ones land under it (/tmp/x\n"
    "                     as DIR/tmp/x, /dev/shm/y as DIR/dev/shm/y), \"..\" never leads out\n"
    "                     of it, nor do chdir, directory descriptors or the links the\n"
    "                     program made; used as they are: /dev/null, /dev/zero, /dev/full,\n"
    "                     /dev/random, /dev/urandom, and /proc and /sys for reading. Links\n"
    "                     already in DIR are followed: give each run a new DIR\n"
    "  --original-paths, PROXY_ORIGINAL_PATHS=1   absolute paths as recorded (careful)\n"
    "  --no-compute, PROXY_COMPUTE=0               no busy wait between calls\n"
    "  --compute-scale=X, PROXY_COMPUTE_SCALE=X    busy waits X times as long\n"
    "  PROXY_STEER_WAIT_MS=N   how long a send steered (below) waits for its receiver's\n"
    "                     word before it goes anyway (default 10000)\n"
    "  PROXY_RANK=R       the rank to replay outside an MPI launcher (a traced program's\n"
    "                     forked processes are ranks too; one proxy replays one of them)\n"
    "\n"
    "Check it: record the proxy as the program was recorded and compare the two traces:\n";

static const char readme_what[] =
    "`tracefs compare` says rank by rank whether both make the same calls and, where they\n"
    "do not, names the first differing event and both calls.\n"
    "\n"
    "Replayed exactly:\n"
    "- MPI: every function of the MPI this tracefs was built with, with every argument as\n"
    "  recorded: communicators, groups, datatypes, ops, requests, files, windows and infos\n"
    "  are the handles their symbolic ids name (predefined ones have fixed ids; derived\n"
    "  datatypes are rebuilt by replaying their constructors, communicators by the calls\n"
    "  that made them), ranks are resolved against the running rank in the call's\n"
    "  communicator, group or window, rank-derived tags from the running rank, statuses are\n"
    "  ignored where the program ignored them, buffers are memory of their own per recorded\n"
    "  buffer (allocation, offset), never moved, as large as the count and datatype need.\n"
    "- Allocations: the malloc family and mmap/mremap/munmap with their sizes and lifetimes:\n"
    "  each allocation id gets the block this run allocates, freed where the program freed\n"
    "  it; an allocation the trace has inside a libc call (fopen's FILE, a stdio buffer) is\n"
    "  left to that call (timed traces; untimed ones cannot tell).\n"
    "- POSIX and stdio I/O: the calls of capture/calls.txt that have a `replay` line, on the\n"
    "  same descriptor numbers (the proxy makes the number the program got the one the call\n"
    "  gets), with the recorded counts, offsets and read/write mix, under the scratch\n"
    "  directory; files the program read without making them are made there first, as long\n"
    "  as it read from them.\n"
    "- Threads as pthreads, started and joined where the program did (pthread_create and\n"
    "  pthread_join events; a thread without one starts with the process); zones, phases,\n"
    "  marks, counters and thread names through the capture API, found at run time, so the\n"
    "  proxy builds without tracefs and a recorded proxy shows the same zones and phases\n"
    "  (phases an MPI_Info_set switched are switched by that call again).\n"
    "\n"
    "Approximated:\n"
    "- Time: a timed trace's computation between calls is a busy wait of the mean gap the\n"
    "  program left at that place of the grammar (the gap from the previous call's end),\n"
    "  measured from the end of the previous call so that the proxy's own work is part of\n"
    "  it; calls take the time they take in this run.\n"
    "- Values that vary per call (sizes, offsets, counts) are exact where they follow a\n"
    "  constant, a line, a line per period or at most 256 runs of equal values at their place\n"
    "  of the grammar; beyond that the first 256 runs are repeated (proxy.c's head says how\n"
    "  many places).\n"
    "- Data: the bytes written and sent are filler, what is read and received is dropped;\n"
    "  formatted stdio writes as many bytes as the program wrote, formatted input reads a word.\n"
    "- Calls whose outcome the run chooses (MPI_Waitany, MPI_Waitsome, MPI_Testany,\n"
    "  MPI_Testsome, MPI_Test, MPI_Testall, MPI_Iprobe, MPI_Improbe, MPI_ANY_SOURCE matching)\n"
    "  are steered: a receive whose request such a call completes makes its sender wait\n"
    "  (on a private communicator) until the trace has the request complete, so the call\n"
    "  finds what it found when recorded. Sends whose requests it chooses among, receives\n"
    "  from any source or of any tag, and probes are this run's choice, as in any run of\n"
    "  the program; a recording of the proxy may then differ there. MPI_Get_count and the\n"
    "  like read the last status a call wrote, with the fields the trace has of it.\n"
    "- Zones begin right after the previous zone of their depth or shallower ended (the trace\n"
    "  keeps zone ends only): their nesting and order are the program's, their start times\n"
    "  may be earlier.\n"
    "- Arrays longer than a trace keeps (512 bytes of text) and user functions (reduction\n"
    "  operators, attribute callbacks) do nothing useful.\n"
    "\n"
    "Left out: the calls below (capture/calls.txt says why for each), and events the proxy\n"
    "does not know; their place still gets its computation.\n";

static const char readme_has[] = "\nWhat this trace has:\n\n";

/* The functions of capture/calls.txt proxies leave out, grouped by why, wrapped. */
static void readme_left_out(struct fs_sbuf *b)
{
	for (uint32_t i = 0; i < rp_libc_n_calls; i++) {
		const struct rp_libc *c = &rp_libc_calls[i];
		size_t col = 4;
		bool seen = false;

		if (c->stmts || !c->why)
			continue;
		for (uint32_t j = 0; j < i && !seen; j++)
			seen = !rp_libc_calls[j].stmts && rp_libc_calls[j].why &&
			       !strcmp(rp_libc_calls[j].why, c->why);
		if (seen)
			continue;
		fs_sb_printf(b, "- %s:\n   ", c->why);
		for (uint32_t j = i; j < rp_libc_n_calls; j++) {
			const struct rp_libc *d = &rp_libc_calls[j];
			/* an event no function records is named by its kind */
			const char *f = *d->funcs ? d->funcs : d->kind;

			if (d->stmts || !d->why || strcmp(d->why, c->why))
				continue;
			/* a line breaks between functions */
			while (*f) {
				size_t n = strcspn(f, ",");

				if (col + n + 2 > 90) {
					fs_sb_printf(b, "\n   ");
					col = 4;
				}
				fs_sb_printf(b, " %.*s,", (int)n, f);
				col += n + 2;
				f += n;
				f += strspn(f, ", ");
			}
		}
		/* the list's last comma goes */
		if (b->len && b->data && b->data[b->len - 1] == ',')
			b->len--;
		fs_sb_printf(b, "\n");
	}
}

static const char *const status_words[] = {"", "left out", "replayed", "approximated"};

int fs_replay_readme_new(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank,
			 char **out, size_t *len)
{
	uint32_t nt = vt->ti.n_terminals;
	char build[512], check[512];
	struct fs_sbuf b = {0};
	bool mpi_only = true;
	struct rp_gen g;
	int rc = gen_init(&g, vt);

	if (rc < 0)
		goto out;
	/* a trace of MPI calls alone was recorded with --trace=mpi: its proxy must be too */
	for (uint32_t k = 0; k < vt->ti.n_kinds; k++) {
		struct tfs_kind_desc kd;

		mpi_only &= tfs_trace_kind(vt->trace, k, &kd) == 0 && !strcmp(kd.category, "mpi");
	}
	if (g.mpi) {
		snprintf(
		    build, sizeof(build),
		    "  mpicc -O2 proxy.c -o proxy\n  mpiexec -n %u ./proxy [DIR] [--no-compute]"
		    " [--compute-scale=X]\n",
		    vt->ti.n_ranks);
		snprintf(check, sizeof(check),
			 "  mpiexec -n %u tracefs record%s -o proxy.trace -- ./proxy\n"
			 "  tracefs compare TRACE proxy.trace\n"
			 "(with the categories the trace was recorded with: allocations the trace\n"
			 "does not have, the proxy makes at its start)\n",
			 vt->ti.n_ranks, mpi_only ? " --trace=mpi" : "");
	} else {
		snprintf(
		    build, sizeof(build),
		    "  cc -O2 proxy.c -o proxy          (glibc before 2.34: add -pthread -ldl)\n"
		    "  ./proxy [DIR] [--no-compute] [--compute-scale=X]\n");
		snprintf(check, sizeof(check),
			 "  tracefs record -o proxy.trace -- ./proxy\n"
			 "  tracefs compare TRACE proxy.trace\n");
	}
	fs_sb_printf(&b, "%s%s%s%s%s", readme_text, build, readme_opts, check, readme_what);
	readme_left_out(&b);
	fs_sb_printf(&b, "%s", readme_has);
	fs_sb_printf(&b, "  %-28s %10s %14s  %s\n", "kind", "signatures", "calls", "how");
	/* one line per kind and status, in kind order */
	for (uint32_t k = 0; k < vt->ti.n_kinds; k++) {
		for (int st = 1; st <= 3; st++) {
			struct tfs_kind_desc kd;
			uint64_t sigs = 0, calls = 0;
			const char *why = NULL;

			for (uint32_t i = 0; i < nt; i++) {
				const struct rp_term *t = &g.terms[i];
				int s = t->what == RP_W_NONE ? 1 : t->approx ? 3 : 2;

				if (t->kind != k || s != st)
					continue;
				sigs++;
				calls += g.total[i];
				why = why ? why : t->why;
			}
			if (!sigs || tfs_trace_kind(vt->trace, k, &kd) < 0)
				continue;
			fs_sb_printf(&b, "  %-28s %10" PRIu64 " %14" PRIu64 "  %s%s%s\n", kd.name,
				     sigs, calls, status_words[st], why ? ": " : "",
				     why ? why : "");
		}
	}
out:
	gen_fini(&g);
	if (rc < 0) {
		free(b.data);
		return rc;
	}
	return fs_sb_detach(&b, out, len);
}
