/*
 * Opening a trace: maps the file, checks the container, parses the meta, schema, strings,
 * CST and streams sections and every grammar section, then derives the fixed line length
 * of every terminal and the layout of every view. Also the info accessors and verify.
 * Reading event ranges is cursor.c's job; printing lines is render.c's.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace_i.h"

const char *tfs_version(void)
{
	return "0.1.0";
}

int with_section(struct tfs_trace *t, uint32_t idx,
		 int (*parse)(struct tfs_trace *, struct tfs_rd *, void *), void *arg,
		 struct tfs_diag *diag)
{
	const struct sec_entry *e = &t->cf.ents[idx];
	const uint8_t *data;
	uint8_t *owned;
	struct tfs_rd r;
	size_t len;
	int rc;

	rc = ctr_load(&t->cf, idx, &owned, &data, &len, diag);
	if (rc < 0)
		return rc;
	/* offsets inside a compressed or packed section are reported relative to its start */
	rd_init(&r, data, len, e->codec ? 0 : e->off, ctr_type_name(e->type), diag);
	rc = parse(t, &r, arg);
	if (rc == 0 && rd_left(&r))
		rc = rd_fail(&r, "%zu trailing bytes", rd_left(&r));
	if (rc == -TFS_ECORRUPT && diag && e->codec)
		diag->offset = ctr_file_off(&t->cf, idx); /* what a user can look at */
	free(owned);
	return rc;
}

static char *dup_bytes(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);

	if (s) {
		memcpy(s, p, n);
		s[n] = 0;
	}
	return s;
}

static int parse_meta(struct tfs_trace *t, struct tfs_rd *r, void *arg)
{
	uint64_t n;
	int rc = rd_varint_max(r, rd_left(r) / 2, &n, "meta count");

	if (rc < 0)
		return rc;
	t->meta = calloc(2 * n + 1, sizeof(char *));
	if (!t->meta)
		return -ENOMEM;
	for (uint32_t i = 0; i < 2 * n; i++) {
		const uint8_t *p;
		size_t len;

		rc = rd_str(r, 65535, &p, &len);
		if (rc < 0)
			return rc;
		t->meta[i] = dup_bytes(p, len);
		if (!t->meta[i])
			return -ENOMEM;
		t->n_meta = (i + 1) / 2;
	}
	return 0;
}

static int parse_schema(struct tfs_trace *t, struct tfs_rd *r, void *arg)
{
	return schema_parse(r, &t->schema);
}

static int parse_strings(struct tfs_trace *t, struct tfs_rd *r, void *arg)
{
	uint64_t n;
	int rc = rd_varint_max(r, rd_left(r), &n, "string count");

	if (rc < 0)
		return rc;
	t->strs = calloc(n ? n : 1, sizeof(char *));
	t->str_len = calloc(n ? n : 1, sizeof(uint32_t));
	if (!t->strs || !t->str_len)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *p;
		size_t len;

		rc = rd_str(r, 65535, &p, &len);
		if (rc < 0)
			return rc;
		t->strs[i] = dup_bytes(p, len);
		if (!t->strs[i])
			return -ENOMEM;
		t->str_len[i] = (uint32_t)len;
		t->n_strs = i + 1;
	}
	return 0;
}

static int parse_term(struct tfs_trace *t, struct tfs_rd *r, uint32_t term, uint32_t *n_words)
{
	const struct schema_kind *k;
	uint64_t kind, w;
	int rc;

	rc = rd_varint_max(r, t->schema.n_kinds ? t->schema.n_kinds - 1 : 0, &kind, "kind");
	if (rc == 0 && !t->schema.n_kinds)
		rc = rd_fail(r, "signature with no kinds declared");
	if (rc < 0)
		return rc;
	k = &t->schema.kinds[kind];
	t->term_kind[term] = (uint32_t)kind;
	t->term_argoff[term] = *n_words;
	t->term_nvals[term] = (uint8_t)k->n_vals;
	t->term_vcls_off[term] = (uint32_t)kind * TFS_MAX_ARGS;
	for (uint32_t i = 0; i < k->n_args; i++) {
		const struct schema_arg *a = &k->args[i];

		if (a->enc == TFS_ENC_VAL) {
			uint8_t width;

			rc = rd_u8(r, &width);
			if (rc == 0 && (width < 1 || width > 20))
				rc = rd_fail(r, "value width %u outside 1..20", width);
			w = width;
		} else if (a->enc == TFS_ENC_STR) {
			rc = rd_varint_max(r, t->n_strs ? t->n_strs - 1 : 0, &w, "string index");
			if (rc == 0 && !t->n_strs)
				rc = rd_fail(r, "string argument with an empty string table");
		} else {
			rc = rd_varint(r, &w);
			if (rc == 0 && a->enc == TFS_ENC_RANK && !ctr_at_least(&t->cf, 1, 1) &&
			    !rank_word_from_v10(w, &w))
				rc = rd_fail(r, "rank argument out of range");
			else if (rc == 0 && a->enc == TFS_ENC_RVAL && !rval_word_ok(w))
				rc = rd_fail(r, "rank-derived value argument out of range");
		}
		if (rc < 0)
			return rc;
		t->term_arg[(*n_words)++] = w;
	}
	return 0;
}

static int parse_cst(struct tfs_trace *t, struct tfs_rd *r, void *arg)
{
	uint32_t n_words = 0;
	uint64_t n;
	int rc = rd_varint_max(r, rd_left(r) < GRAM_MAX_TERMINAL ? rd_left(r) : GRAM_MAX_TERMINAL,
			       &n, "terminal count");

	if (rc < 0)
		return rc;
	t->term_kind = calloc(n + 1, sizeof(uint32_t));
	t->term_argoff = calloc(n + 1, sizeof(uint32_t));
	t->term_nvals = calloc(n + 1, 1);
	t->term_vcls_off = calloc(n + 1, sizeof(uint32_t));
	t->vcls = calloc((size_t)t->schema.n_kinds * TFS_MAX_ARGS + 1, 1);
	/* each argument word takes at least one byte */
	t->term_arg = calloc(rd_left(r) + 1, sizeof(uint64_t));
	if (!t->term_kind || !t->term_argoff || !t->term_nvals || !t->term_vcls_off || !t->vcls ||
	    !t->term_arg)
		return -ENOMEM;
	for (uint32_t k = 0; k < t->schema.n_kinds; k++)
		memcpy(t->vcls + (size_t)k * TFS_MAX_ARGS, t->schema.kinds[k].vcls, TFS_MAX_ARGS);
	for (uint32_t i = 0; i < n; i++) {
		rc = parse_term(t, r, i, &n_words);
		if (rc < 0)
			return rc;
		t->n_terms = i + 1;
	}
	return 0;
}

/* Check and keep the five fields of a stream (FORMAT.md §8). */
static int set_stream(struct tfs_trace *t, struct tfs_rd *r, struct tstream *s,
		      const uint64_t f[5])
{
	if (f[0] >= t->n_ranks || f[1] > t->max_thread)
		return rd_fail(r, "stream rank %llu / thread %llu outside the header's limits",
			       (unsigned long long)f[0], (unsigned long long)f[1]);
	if (f[2] > GRAM_MAX_EVENTS)
		return rd_fail(r, "stream of %llu events", (unsigned long long)f[2]);
	if (f[3] >= t->cf.n || t->cf.ents[f[3]].type != SEC_GRAMMAR || f[4] > t->cf.n ||
	    (f[4] < t->cf.n && t->cf.ents[f[4]].type != SEC_VALUES &&
	     t->cf.ents[f[4]].type != SEC_VPATCH))
		return rd_fail(r, "stream refers to sections %llu/%llu of the wrong type",
			       (unsigned long long)f[3], (unsigned long long)f[4]);
	s->rank = (uint32_t)f[0];
	s->thread = (uint32_t)f[1];
	s->n_events = f[2];
	s->gsec = (uint32_t)f[3]; /* section index for now; resolved in load_grammars() */
	s->vsec_idx = (uint32_t)f[4];
	return 0;
}

/* Format 1.x: a stream's five fields one after the other, its rank absolute. */
static int parse_streams_v1(struct tfs_trace *t, struct tfs_rd *r, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t f[5];
		int rc = 0;

		for (int j = 0; j < 5 && rc == 0; j++)
			rc = rd_varint(r, &f[j]);
		if (rc == 0)
			rc = set_stream(t, r, &t->streams[i], f);
		if (rc < 0)
			return rc;
		t->n_streams = i + 1;
	}
	return 0;
}

/*
 * Format 2: by columns, each rank as zigzag(rank - the previous stream's rank). The five
 * columns are found first, then read in step, so that nothing is copied: a job of 10^6
 * ranks would otherwise hold 40 MB of varints for a moment.
 */
static int parse_streams_v2(struct tfs_trace *t, struct tfs_rd *r, uint32_t n)
{
	struct tfs_rd col[5];
	int64_t rank = 0;
	uint64_t f[5];
	int rc = 0;

	for (int j = 0; j < 5 && rc == 0; j++) {
		col[j] = *r;
		for (uint32_t i = 0; i < n && rc == 0; i++)
			rc = rd_varint(r, &f[0]);
	}
	for (uint32_t i = 0; i < n && rc == 0; i++) {
		int64_t d;

		for (int j = 0; j < 5; j++)
			(void)rd_varint(&col[j], &f[j]); /* read once above already */
		d = zigzag_dec(f[0]);
		/* |d| bounded first: rank stays in [0, 2^32) and the sum cannot overflow */
		if (d > (int64_t)UINT32_MAX || d < -(int64_t)UINT32_MAX)
			rank = -1;
		else
			rank += d;
		if (rank < 0 || rank > UINT32_MAX) {
			rc = rd_fail(r, "stream %u has rank %lld", i, (long long)rank);
			break;
		}
		f[0] = (uint64_t)rank;
		rc = set_stream(t, r, &t->streams[i], f);
		if (rc == 0)
			t->n_streams = i + 1;
	}
	return rc;
}

static int parse_phase(struct tfs_trace *t, struct tfs_rd *r, struct tphase *p,
		       struct tfs_buf *names)
{
	const uint8_t *name;
	size_t len;
	uint64_t end;
	int rc;

	rc = rd_str(r, 65535, &name, &len);
	if (rc == 0)
		rc = rd_varint_max(r, t->n_streams ? t->n_streams - 1 : 0, &end, "phase stream");
	if (rc == 0 && !t->n_streams)
		rc = rd_fail(r, "phase without streams");
	if (rc < 0)
		return rc;
	p->stream = (uint32_t)end;
	rc = rd_varint(r, &p->first);
	if (rc == 0)
		rc = rd_varint(r, &p->n);
	if (rc < 0)
		return rc;
	if (!add_u64(p->first, p->n, &end) || end > t->streams[p->stream].n_events)
		return rd_fail(r, "phase range outside its stream");
	p->name_off = names->len;
	rc = buf_put(names, name, len);
	return rc == 0 ? buf_put(names, "", 1) : rc;
}

static int parse_header(struct tfs_trace *t, struct tfs_rd *r)
{
	uint64_t n_ranks, max_thread, bits;
	uint8_t timing;
	int rc;

	rc = rd_varint_max(r, UINT32_MAX, &n_ranks, "rank count");
	if (rc == 0)
		rc = rd_varint_max(r, UINT32_MAX, &max_thread, "thread limit");
	if (rc == 0)
		rc = rd_u8(r, &timing);
	if (rc == 0)
		rc = rd_u64(r, &bits);
	if (rc == 0)
		rc = rd_varint(r, &t->max_ts);
	if (rc == 0)
		rc = rd_varint(r, &t->max_dur);
	if (rc < 0)
		return rc;
	memcpy(&t->rel_err, &bits, sizeof(bits));
	if (n_ranks < 1 || timing > TFS_TIMING_LOSSY ||
	    (timing == 2 ? !(t->rel_err > 0 && t->rel_err < 1) : bits != 0))
		return rd_fail(r, "bad header: %llu ranks, timing %u",
			       (unsigned long long)n_ranks, timing);
	t->n_ranks = (uint32_t)n_ranks;
	t->max_thread = (uint32_t)max_thread;
	t->timing = timing;
	t->w_sec = dec_digits(t->max_ts / 1000000000u);
	t->w_dur = dec_digits(t->max_dur);
	t->w_ts_json = dec_digits(t->max_ts);
	t->w_thread = dec_digits(t->max_thread);
	t->w_rank = dec_digits(t->n_ranks - 1);
	return 0;
}

static int cmp_stream(const struct tstream *x, const struct tstream *y)
{
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->thread < y->thread ? -1 : x->thread > y->thread;
}

static int cmp_stream_idx(const void *a, const void *b, void *arg)
{
	const struct tstream *st = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return cmp_stream(&st[x], &st[y]);
}

/*
 * (rank, thread) pairs are unique (FORMAT.md §8). Streams come in that order from every
 * tracefs writer, which costs one pass to see; in any other order t->by_rank keeps it.
 */
static int order_streams(struct tfs_trace *t, struct tfs_rd *r)
{
	uint32_t i, *v;

	for (i = 1; i < t->n_streams && cmp_stream(&t->streams[i - 1], &t->streams[i]) < 0; i++)
		;
	if (i >= t->n_streams)
		return 0;
	v = malloc(((size_t)t->n_streams + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (i = 0; i < t->n_streams; i++)
		v[i] = i;
	qsort_r(v, t->n_streams, sizeof(*v), cmp_stream_idx, t->streams);
	t->by_rank = v;
	for (i = 1; i < t->n_streams; i++) {
		const struct tstream *a = &t->streams[v[i - 1]], *b = &t->streams[v[i]];

		if (cmp_stream(a, b) == 0)
			return rd_fail(r, "two streams for rank %u thread %u", b->rank, b->thread);
	}
	return 0;
}

static int parse_streams(struct tfs_trace *t, struct tfs_rd *r, void *arg)
{
	struct tfs_buf names;
	uint64_t n;
	int rc = parse_header(t, r);

	if (rc == 0)
		rc = rd_varint_max(r, rd_left(r) / 5, &n, "stream count");
	if (rc < 0)
		return rc;
	t->streams = calloc(n + 1, sizeof(*t->streams));
	if (!t->streams)
		return -ENOMEM;
	rc = t->cf.major == 1 ? parse_streams_v1(t, r, (uint32_t)n)
			      : parse_streams_v2(t, r, (uint32_t)n);
	if (rc < 0)
		return rc;
	for (uint32_t i = 0; i < t->n_streams; i++)
		if (dec_digits(t->streams[i].n_events) > t->w_index)
			t->w_index = dec_digits(t->streams[i].n_events);
	rc = order_streams(t, r);
	if (rc == 0)
		rc = rd_varint_max(r, rd_left(r) / 4, &n, "phase count");
	if (rc < 0)
		return rc;
	t->phases = calloc(n + 1, sizeof(*t->phases));
	if (!t->phases)
		return -ENOMEM;
	buf_init(&names);
	for (uint32_t i = 0; i < n && rc == 0; i++) {
		rc = parse_phase(t, r, &t->phases[i], &names);
		if (rc == 0)
			t->n_phases = i + 1;
	}
	if (rc == 0)
		rc = buf_put(&names, "", 1); /* a buffer even without phases */
	if (rc < 0) {
		buf_fini(&names);
		return rc;
	}
	t->phase_names = (char *)names.data;
	return stacks_parse_table(t, r);
}

/* A grammar section being parsed for the streams of @n_events events that use it. */
struct gsec_load {
	struct gsec *g;
	uint64_t n_events;
};

/*
 * One grammar section: n_blocks, then (n_events, block) per block (FORMAT.md §6). Counts
 * are checked against the stream's events before anything is allocated for them: at most
 * one block per event (only a lone block may be empty), block events adding up to the
 * stream's, and each block's rules and elements within what its events allow.
 */
static int parse_gsec(struct tfs_trace *t, struct tfs_rd *r, void *arg)
{
	const struct gsec_load *gl = arg;
	struct gsec *g = gl->g;
	uint64_t n, declared, max_blocks = gl->n_events > 1 ? gl->n_events : 1;
	int rc = rd_varint_max(r, rd_left(r) / 3 < max_blocks ? rd_left(r) / 3 : max_blocks, &n,
			       "block count");

	if (rc == 0 && n < 1)
		rc = rd_fail(r, "grammar section without blocks");
	if (rc < 0)
		return rc;
	g->blocks = calloc(n, sizeof(*g->blocks));
	g->blk_events = calloc(n + 1, sizeof(uint64_t));
	if (!g->blocks || !g->blk_events)
		return -ENOMEM;
	for (uint32_t b = 0; b < n; b++) {
		rc = rd_varint_max(r, gl->n_events - g->blk_events[b], &declared, "block events");
		if (rc == 0 && declared == 0 && n > 1)
			rc = rd_fail(r, "block %u of %llu is empty", b, (unsigned long long)n);
		if (rc == 0)
			rc = grammar_parse_events(r, t->n_terms, declared, &g->blocks[b]);
		if (rc < 0)
			return rc;
		g->n_blocks = b + 1;
		g->blk_events[b + 1] = g->blk_events[b] + declared;
		g->height = g->blocks[b].height > g->height ? g->blocks[b].height : g->height;
		g->n_rules += g->blocks[b].n_rules;
	}
	return 0;
}

/* Whether a grammar uses a terminal that needs values (FORMAT.md §8). */
static bool grammar_needs_values(const struct tfs_trace *t, const struct gsec *g)
{
	if (t->timing != TFS_TIMING_NONE)
		return true;
	for (uint32_t b = 0; b < g->n_blocks; b++) {
		const struct tfs_grammar *gr = &g->blocks[b];

		for (uint64_t i = 0; i < gr->n_elems; i++)
			if (!gr->elems[i].is_rule && t->term_nvals[gr->elems[i].id])
				return true;
	}
	return false;
}

/* Parse grammar section @sec for stream @s, checking its size first. */
static int load_gsec(struct tfs_trace *t, uint32_t sec, const struct tstream *s, struct gsec *g,
		     struct tfs_diag *diag)
{
	struct gsec_load gl = {g, s->n_events};
	const struct sec_entry *e = &t->cf.ents[sec];
	int rc;

	g->sec = sec;
	/* before decompressing: what the stream's events allow (FORMAT.md §6) */
	if (e->raw > gram_max_section_bytes(s->n_events))
		return diag_set(diag, -TFS_ECORRUPT, ctr_file_off(&t->cf, sec), "grammar",
				"grammar section of %llu bytes for a stream of %llu events",
				(unsigned long long)e->raw, (unsigned long long)s->n_events);
	rc = with_section(t, sec, parse_gsec, &gl, diag);
	if (rc == 0)
		rc = layout_build(t, g, diag);
	if (rc == 0)
		g->needs_values = grammar_needs_values(t, g);
	return rc;
}

/*
 * Streams with the same grammar and unpatched values, found through an open-addressing table
 * of (values section, grammar) keys: linear in the streams whatever they share.
 */
struct same_tab {
	uint64_t *key; /* vsec_idx << 32 | gsec, plus 1 (0: empty) */
	uint32_t *first;
	uint32_t mask;
};

static int same_tab_init(struct same_tab *st, uint32_t n)
{
	uint64_t cap = 16;

	while (cap < 2 * (uint64_t)n)
		cap *= 2;
	st->key = calloc(cap, sizeof(*st->key));
	st->first = malloc(cap * sizeof(*st->first));
	st->mask = (uint32_t)(cap - 1);
	return st->key && st->first ? 0 : -ENOMEM;
}

static void same_tab_fini(struct same_tab *st)
{
	free(st->key);
	free(st->first);
}

/* The first stream seen with @s's grammar and values, @i itself when it is the first. */
static uint32_t same_tab_first(struct same_tab *st, const struct tstream *s, uint32_t i)
{
	uint64_t key = ((uint64_t)s->vsec_idx << 32 | s->gsec) + 1;
	uint32_t h = (uint32_t)((key * UINT64_C(0x9e3779b97f4a7c15)) >> 32) & st->mask;

	for (; st->key[h]; h = (h + 1) & st->mask)
		if (st->key[h] == key)
			return st->first[h];
	st->key[h] = key;
	st->first[h] = i;
	return i;
}

/*
 * Parse each distinct grammar section once, point streams at their gsec and find each
 * stream's first equal (same_as); add up the trace's events and text bytes.
 */
static int load_grammars(struct tfs_trace *t, struct tfs_diag *diag)
{
	uint32_t *gsec_of = calloc(t->cf.n + 1, sizeof(uint32_t)); /* section -> gsec + 1 */
	uint32_t n_gram = 0;
	struct same_tab st = {0};
	int rc;

	for (uint32_t i = 0; i < t->cf.n; i++)
		n_gram += t->cf.ents[i].type == SEC_GRAMMAR;
	t->gsecs = calloc((size_t)n_gram + 1, sizeof(*t->gsecs));
	rc = same_tab_init(&st, t->n_streams);
	if (!gsec_of || !t->gsecs || rc < 0) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < t->n_streams && rc == 0; i++) {
		struct tstream *s = &t->streams[i];
		uint32_t sec = s->gsec;
		const struct gsec *g;

		if (!gsec_of[sec]) {
			gsec_of[sec] = ++t->n_gsecs;
			rc = load_gsec(t, sec, s, &t->gsecs[t->n_gsecs - 1], diag);
		}
		s->gsec = gsec_of[sec] - 1;
		s->same_as = s->patch ? i : same_tab_first(&st, s, i);
		g = &t->gsecs[s->gsec];
		if (rc == 0 && g->blk_events[g->n_blocks] != s->n_events)
			rc = diag_set(diag, -TFS_ECORRUPT, t->cf.ents[sec].off, "grammar",
				      "stream %u has %llu events but its grammar %llu", i,
				      (unsigned long long)s->n_events,
				      (unsigned long long)g->blk_events[g->n_blocks]);
		if (rc == 0) {
			/* each below 2^62 events and 2^64 bytes: saturate the sums */
			t->n_events += s->n_events;
			t->text_bytes = t->text_bytes + g->blk_bytes[TFS_VIEW_TEXT][g->n_blocks] <
							t->text_bytes
						? UINT64_MAX
						: t->text_bytes + g->blk_bytes[TFS_VIEW_TEXT][g->n_blocks];
		}
	}
out:
	same_tab_fini(&st);
	free(gsec_of);
	return rc;
}

/* One vpatch section (FORMAT.md §8.1) being parsed for the streams that refer to it. */
struct vpatch_load {
	uint32_t sec;	      /* its section index */
	uint32_t first;	      /* the first stream referring to it */
	uint32_t users;	      /* how many do */
	const uint32_t *next; /* [n_streams] the next stream of the same values section */
};

static int parse_vpatch(struct tfs_trace *t, struct tfs_rd *r, void *arg)
{
	const struct vpatch_load *vl = arg;
	const struct vpatch_list *p1 = NULL, *p2 = NULL;
	uint64_t base, n;
	int rc;

	rc = rd_varint(r, &base);
	if (rc == 0)
		rc = rd_varint(r, &n);
	if (rc < 0)
		return rc;
	if (base >= t->cf.n || t->cf.ents[base].type != SEC_VALUES)
		return rd_fail(r, "patched section %llu is not a values section",
			       (unsigned long long)base);
	if (n != vl->users)
		return rd_fail(r, "%llu patch lists for %u streams", (unsigned long long)n,
			       vl->users);
	for (uint32_t i = vl->first; i < t->n_streams; i = vl->next[i]) {
		struct tstream *s = &t->streams[i];

		s->patch = calloc(1, sizeof(*s->patch));
		if (!s->patch)
			return -ENOMEM;
		rc = vpatch_read(r, s->patch, p1, p2);
		if (rc < 0)
			return rc;
		if (!s->patch->n)
			return rd_fail(r, "empty patch list of stream %u", i);
		s->vbase_idx = (uint32_t)base;
		p2 = p1;
		p1 = s->patch;
	}
	return 0;
}

/*
 * Parse every vpatch section once, giving each stream that refers to one its patches. The
 * streams of a section are chained (next[]) so that each section costs its own streams.
 */
static int load_vpatches(struct tfs_trace *t, struct tfs_diag *diag)
{
	uint32_t *next = malloc(((size_t)t->n_streams + 1) * sizeof(*next));
	uint32_t *last = malloc(((size_t)t->cf.n + 1) * sizeof(*last));
	uint32_t *users = calloc((size_t)t->cf.n + 1, sizeof(*users));
	int rc = next && last && users ? 0 : -ENOMEM;

	for (uint32_t i = 0; i < t->cf.n && rc == 0; i++)
		last[i] = UINT32_MAX;
	for (uint32_t i = t->n_streams; i-- > 0 && rc == 0;) {
		struct tstream *s = &t->streams[i];

		s->vbase_idx = s->vsec_idx;
		if (s->vsec_idx == t->cf.n || t->cf.ents[s->vsec_idx].type != SEC_VPATCH)
			continue;
		next[i] = last[s->vsec_idx] == UINT32_MAX ? t->n_streams : last[s->vsec_idx];
		last[s->vsec_idx] = i;
		users[s->vsec_idx]++;
	}
	for (uint32_t sec = 0; sec < t->cf.n && rc == 0; sec++) {
		struct vpatch_load vl = {sec, last[sec], users[sec], next};

		if (users[sec])
			rc = with_section(t, sec, parse_vpatch, &vl, diag);
	}
	free(next);
	free(last);
	free(users);
	return rc;
}

/* Open values section @sec once, for every stream that decodes it. */
static int open_vsec(struct tfs_trace *t, uint32_t sec, struct tfs_diag *diag)
{
	const struct sec_entry *e = &t->cf.ents[sec];
	struct tfs_vsec *vs = &t->vsecs[t->n_vsecs];
	const uint8_t *data;
	uint8_t *owned;
	size_t len;
	int rc;

	if (e->codec != 0)
		return diag_set(diag, -TFS_ECORRUPT, e->off, "values",
				"values section must be stored raw");
	rc = ctr_load(&t->cf, sec, &owned, &data, &len, diag);
	if (rc == 0)
		rc = vsec_open(vs, data, len, e->off, diag);
	if (rc < 0)
		return rc;
	vs->cls = t->vcls;
	vs->cls_off = t->term_vcls_off;
	if (vs->data_start > e->head_len)
		return diag_set(diag, -TFS_ECORRUPT, e->off, "values",
				"block index not covered by the section's head checksum");
	t->vsec_of[sec] = t->n_vsecs++;
	return 0;
}

static int load_values(struct tfs_trace *t, struct tfs_diag *diag)
{
	uint32_t n_vals = 0;
	int rc = 0;

	for (uint32_t i = 0; i < t->cf.n; i++)
		n_vals += t->cf.ents[i].type == SEC_VALUES;
	t->vsecs = calloc((size_t)n_vals + 1, sizeof(*t->vsecs));
	t->vsec_of = malloc(((size_t)t->cf.n + 1) * sizeof(*t->vsec_of));
	if (!t->vsecs || !t->vsec_of)
		return -ENOMEM;
	for (uint32_t i = 0; i <= t->cf.n; i++)
		t->vsec_of[i] = UINT32_MAX;
	for (uint32_t i = 0; i < t->n_streams && rc == 0; i++) {
		const struct tstream *s = &t->streams[i];
		const struct tfs_vsec *vs;
		uint64_t off;

		if (s->vsec_idx == t->cf.n) {
			if (t->gsecs[s->gsec].needs_values)
				rc = diag_set(diag, -TFS_ECORRUPT,
					      t->cf.ents[t->gsecs[s->gsec].sec].off, "streams",
					      "stream of rank %u thread %u lacks its values section",
					      s->rank, s->thread);
			continue;
		}
		if (t->vsec_of[s->vbase_idx] == UINT32_MAX)
			rc = open_vsec(t, s->vbase_idx, diag);
		if (rc < 0)
			break;
		vs = stream_vsec(t, s);
		off = t->cf.ents[s->vbase_idx].off;
		if (vs->n_events != s->n_events || vs->timing != t->timing ||
		    (t->timing == TFS_TIMING_LOSSY && vs->rel_err != t->rel_err))
			rc = diag_set(diag, -TFS_ECORRUPT, off, "values",
				      "values of stream %u disagree with the stream table", i);
		else if (s->patch && s->patch->e[s->patch->n - 1].block >= vs->n_blocks)
			rc = diag_set(diag, -TFS_ECORRUPT, off, "streams",
				      "values patch of stream %u past its last block", i);
	}
	return rc;
}

/* Section index of the one section of @type, or a corruption. */
static int find_unique(const struct tfs_trace *t, uint16_t type, uint32_t *idx,
		       struct tfs_diag *diag)
{
	bool found = false;

	for (uint32_t i = 0; i < t->cf.n; i++) {
		if (t->cf.ents[i].type != type)
			continue;
		if (found)
			return diag_set(diag, -TFS_ECORRUPT, t->cf.ents[i].off, "table",
					"second %s section", ctr_type_name(type));
		found = true;
		*idx = i;
	}
	if (!found)
		return diag_set(diag, -TFS_ECORRUPT, 16, "table", "no %s section",
				ctr_type_name(type));
	return 0;
}

static int load_tables(struct tfs_trace *t, struct tfs_diag *diag)
{
	static int (*const parse[])(struct tfs_trace *, struct tfs_rd *, void *) = {
		parse_meta, parse_schema, parse_strings, parse_streams, parse_cst,
	};
	static const uint16_t types[] = {SEC_META, SEC_SCHEMA, SEC_STRINGS, SEC_STREAMS, SEC_CST};
	int rc = 0;

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]) && rc == 0; i++) {
		uint32_t idx = 0;

		rc = find_unique(t, types[i], &idx, diag);
		if (rc == 0)
			rc = with_section(t, idx, parse[i], NULL, diag);
	}
	if (rc == 0)
		rc = rnames_load(t, diag);
	if (rc == 0)
		rc = render_templates(t);
	if (rc == 0)
		rc = load_vpatches(t, diag);
	if (rc == 0)
		rc = load_grammars(t, diag);
	if (rc == 0)
		rc = load_values(t, diag);
	return rc;
}

static const char *file_kind(mode_t mode)
{
	if (S_ISFIFO(mode))
		return "fifo";
	if (S_ISCHR(mode))
		return "character device";
	if (S_ISBLK(mode))
		return "block device";
	if (S_ISSOCK(mode))
		return "socket";
	return "special file";
}

static int map_file(struct tfs_trace *t, const char *path, struct tfs_diag *diag)
{
	struct stat st;
	void *m;

	/* O_NONBLOCK: opening a fifo must not wait for a writer; no effect on a regular file */
	t->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (t->fd < 0)
		return -errno;
	if (fstat(t->fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (!S_ISREG(st.st_mode))
		return diag_set(diag, -TFS_EFORMAT, 0, "header", "not a regular file (a %s)",
				file_kind(st.st_mode));
	/* an empty file locked by its writer: reserved, still being saved (wfile.c) */
	if (st.st_size == 0 && flock(t->fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK)
		return -EBUSY;
	if (st.st_size < CTR_HEADER_BYTES)
		return diag_set(diag, -TFS_ECORRUPT, (uint64_t)st.st_size, "header",
				"file of %lld bytes is too short for a trace header",
				(long long)st.st_size);
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, t->fd, 0);
	if (m == MAP_FAILED) {
		int rc = -errno;

		close(t->fd);
		t->fd = -1;
		return rc;
	}
	t->map = m;
	t->size = (uint64_t)st.st_size;
	t->mtime = st.st_mtim;
	return 0;
}

int tfs_trace_file_changed(const struct tfs_trace *t)
{
	struct stat st;

	if (t->fd < 0)
		return 0;
	if (fstat(t->fd, &st) < 0)
		return -errno;
	return (uint64_t)st.st_size != t->size || st.st_mtim.tv_sec != t->mtime.tv_sec ||
	       st.st_mtim.tv_nsec != t->mtime.tv_nsec;
}

void tfs_trace_file_map(const struct tfs_trace *t, const void **base, size_t *len)
{
	*base = t->fd >= 0 ? t->map : NULL;
	*len = t->fd >= 0 ? (size_t)t->size : 0;
}

/* Open over @t->map once it is set, from a file or a caller's buffer. */
static int open_common(struct tfs_trace *t, struct tfs_trace **out, struct tfs_diag *diag)
{
	int rc = ctr_parse(&t->cf, t->map, t->size, diag);

	if (rc == 0)
		rc = load_tables(t, diag);
	if (rc < 0) {
		tfs_trace_close(t);
		return rc;
	}
	*out = t;
	return 0;
}

static struct tfs_trace *trace_new(struct tfs_diag *diag)
{
	struct tfs_trace *t;

	if (diag)
		memset(diag, 0, sizeof(*diag));
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->fd = -1;
	schema_init(&t->schema);
	if (vcache_init(&t->vcache, VCACHE_DEFAULT_BYTES) < 0) {
		free(t);
		return NULL;
	}
	return t;
}

int tfs_trace_open(const char *path, struct tfs_trace **out, struct tfs_diag *diag)
{
	struct tfs_trace *t;
	int rc;

	*out = NULL;
	t = trace_new(diag);
	if (!t)
		return -ENOMEM;
	rc = map_file(t, path, diag);
	if (rc < 0) {
		tfs_trace_close(t);
		return rc;
	}
	return open_common(t, out, diag);
}

int tfs_trace_open_mem(const void *data, size_t len, struct tfs_trace **out,
		       struct tfs_diag *diag)
{
	struct tfs_trace *t;

	*out = NULL;
	t = trace_new(diag);
	if (!t)
		return -ENOMEM;
	if (len < CTR_HEADER_BYTES) {
		tfs_trace_close(t);
		return diag_set(diag, -TFS_ECORRUPT, (uint64_t)len, "header",
				"buffer of %zu bytes is too short for a trace header", len);
	}
	t->map = data;
	t->size = (uint64_t)len;
	return open_common(t, out, diag);
}

void tfs_trace_close(struct tfs_trace *t)
{
	if (!t)
		return;
	for (uint32_t i = 0; i < t->n_gsecs; i++) {
		struct gsec *g = &t->gsecs[i];

		layout_free(g);
		kindex_free_all(t, g);
		for (uint32_t b = 0; g->blocks && b < g->n_blocks; b++)
			grammar_fini(&g->blocks[b]);
		free(g->blocks);
		free(g->blk_events);
	}
	free(t->gsecs);
	stacks_free(t);
	rnames_free(t);
	free(t->phases);
	free(t->phase_names);
	for (uint32_t i = 0; t->streams && i < t->n_streams; i++) {
		if (t->streams[i].patch)
			vpatch_list_fini(t->streams[i].patch);
		free(t->streams[i].patch);
	}
	free(t->streams);
	free(t->by_rank);
	free(t->vsecs);
	free(t->vsec_of);
	for (int v = 0; v < TFS_VIEW_COUNT; v++) {
		free(t->term_len[v]);
		free(t->term_room[v]);
		free(t->segs[v]);
		free(t->tmpl_first[v]);
		free(t->tmpl_text[v]);
		free(t->fops[v]);
		free(t->fop_first[v]);
	}
	free(t->term_kind);
	free(t->term_argoff);
	free(t->term_arg);
	free(t->term_nvals);
	free(t->term_vcls_off);
	free(t->vcls);
	for (uint32_t i = 0; i < t->n_strs; i++)
		free(t->strs[i]);
	free(t->strs);
	free(t->str_len);
	for (uint32_t i = 0; t->meta && t->meta[i]; i++)
		free(t->meta[i]);
	free(t->meta);
	schema_fini(&t->schema);
	vcache_fini(&t->vcache);
	ctr_fini(&t->cf);
	if (t->fd >= 0) {
		if (t->map)
			munmap((void *)t->map, (size_t)t->size);
		close(t->fd);
	}
	free(t);
}

void tfs_trace_set_block_cache(struct tfs_trace *t, size_t bytes)
{
	vcache_set_budget(&t->vcache, bytes);
}

void tfs_trace_block_cache_stats(struct tfs_trace *t, struct tfs_cache_stats *st)
{
	vcache_stats(&t->vcache, st);
}

void tfs_trace_get_info(const struct tfs_trace *t, struct tfs_trace_info *info)
{
	memset(info, 0, sizeof(*info));
	info->version_major = t->cf.major;
	info->version_minor = t->cf.minor;
	info->timing = t->timing;
	info->rel_err = t->rel_err;
	info->n_ranks = t->n_ranks;
	info->n_streams = t->n_streams;
	info->n_phases = t->n_phases;
	info->n_kinds = t->schema.n_kinds;
	info->n_terminals = t->n_terms;
	info->n_sections = t->cf.n;
	info->file_bytes = t->size;
	info->max_ts_ns = t->max_ts;
	info->max_dur_ns = t->max_dur;
	info->table_bytes = t->cf.table_len;
	info->table_raw_bytes = t->cf.table_raw;
	info->n_events = t->n_events;
	info->text_bytes = t->text_bytes;
}

int tfs_trace_section(const struct tfs_trace *t, uint32_t idx, struct tfs_section_info *info)
{
	const struct sec_entry *e;

	if (idx >= t->cf.n)
		return -ENOENT;
	e = &t->cf.ents[idx];
	info->type = e->type;
	info->type_name = ctr_type_name(e->type);
	info->codec = e->codec;
	info->offset = ctr_file_off(&t->cf, idx);
	info->stored_bytes = e->codec == CTR_CODEC_PACKED ? 0 : e->stored;
	info->raw_bytes = e->raw;
	return 0;
}

const char *tfs_trace_meta(const struct tfs_trace *t, const char *key)
{
	for (uint32_t i = 0; i < t->n_meta; i++)
		if (strcmp(t->meta[2 * i], key) == 0)
			return t->meta[2 * i + 1];
	return NULL;
}

const char *tfs_trace_meta_rank(const struct tfs_trace *t, const char *key, uint32_t rank)
{
	const char *best = tfs_trace_meta(t, key);
	size_t n = strlen(key);
	int64_t best_rank = -1;

	for (uint32_t i = 0; i < t->n_meta; i++) {
		const char *k = t->meta[2 * i], *d;
		uint64_t r = 0;

		if (strncmp(k, key, n) != 0 || strncmp(k + n, ".rank", 5) != 0 || !k[n + 5] ||
		    (k[n + 5] == '0' && k[n + 6]))
			continue;
		for (d = k + n + 5; *d >= '0' && *d <= '9' && r <= rank; d++)
			r = r * 10 + (uint64_t)(*d - '0');
		if (*d || r > rank || (int64_t)r <= best_rank)
			continue;
		best = t->meta[2 * i + 1];
		best_rank = (int64_t)r;
	}
	return best;
}

int tfs_trace_meta_at(const struct tfs_trace *t, uint32_t idx, const char **key,
		      const char **value)
{
	if (idx >= t->n_meta)
		return -ENOENT;
	*key = t->meta[2 * idx];
	*value = t->meta[2 * idx + 1];
	return 0;
}

int tfs_trace_kind(const struct tfs_trace *t, uint32_t kind, struct tfs_kind_desc *desc)
{
	static _Thread_local struct tfs_arg_desc args[TFS_MAX_ARGS];

	if (kind >= t->schema.n_kinds)
		return -ENOENT;
	schema_desc(&t->schema, kind, desc, args);
	return 0;
}

int tfs_trace_stream(const struct tfs_trace *t, uint32_t idx, struct tfs_stream_info *info)
{
	const struct tstream *s;
	const struct gsec *g;

	if (idx >= t->n_streams)
		return -ENOENT;
	s = &t->streams[idx];
	g = &t->gsecs[s->gsec];
	info->rank = s->rank;
	info->thread = s->thread;
	info->n_events = s->n_events;
	info->n_blocks = g->n_blocks;
	info->n_rules = g->n_rules;
	info->height = g->height;
	info->same_as = s->same_as;
	info->grammar_bytes = t->cf.ents[g->sec].stored;
	info->values_bytes = s->vsec_idx < t->cf.n ? t->cf.ents[s->vsec_idx].stored : 0;
	return 0;
}

/* The stream at position @k of the (rank, thread) order. */
static inline uint32_t sorted_at(const struct tfs_trace *t, uint32_t k)
{
	return t->by_rank ? t->by_rank[k] : k;
}

/* The first position of the (rank, thread) order at or after (@rank, @thread). */
static uint32_t lower_bound(const struct tfs_trace *t, uint32_t rank, uint32_t thread)
{
	const struct tstream key = {.rank = rank, .thread = thread};
	uint32_t lo = 0, hi = t->n_streams;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (cmp_stream(&t->streams[sorted_at(t, mid)], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int tfs_trace_find_stream(const struct tfs_trace *t, uint32_t rank, uint32_t thread,
			  uint32_t *idx)
{
	uint32_t k = lower_bound(t, rank, thread);

	if (k == t->n_streams || t->streams[sorted_at(t, k)].rank != rank ||
	    t->streams[sorted_at(t, k)].thread != thread)
		return -ENOENT;
	*idx = sorted_at(t, k);
	return 0;
}

void tfs_trace_rank_streams(const struct tfs_trace *t, uint32_t rank, uint32_t *first,
			    uint32_t *n)
{
	*first = lower_bound(t, rank, 0);
	*n = (rank == UINT32_MAX ? t->n_streams : lower_bound(t, rank + 1, 0)) - *first;
}

int tfs_trace_stream_sorted(const struct tfs_trace *t, uint32_t k, uint32_t *idx)
{
	if (k >= t->n_streams)
		return -ENOENT;
	*idx = sorted_at(t, k);
	return 0;
}

int tfs_trace_phase(const struct tfs_trace *t, uint32_t idx, struct tfs_phase_info *info)
{
	if (idx >= t->n_phases)
		return -ENOENT;
	info->name = t->phase_names + t->phases[idx].name_off;
	info->stream = t->phases[idx].stream;
	info->first_event = t->phases[idx].first;
	info->n_events = t->phases[idx].n;
	return 0;
}
