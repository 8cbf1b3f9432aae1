/*
 * Saving a trace: merges every stream's local string table and call-signature table into
 * the trace's single ones, renumbers the terminals of every grammar block, stores streams
 * with identical content once, and writes the container through a temporary file renamed
 * into place. It does not compress events: writer.c did that online.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "container_i.h"
#include "intern_i.h"
#include "tables_i.h"
#include "streams_i.h"
#include "vpatch_i.h"
#include "streams_i.h"
#include "writer_i.h"

/* The merged tables and, per stream, its payloads and where they are stored. */
struct merge {
	struct intern strs, sigs;
	uint32_t *g_kind;	/* [sigs.n] */
	struct tfs_buf g_widths;
	uint32_t *g_woff;	/* [sigs.n] */
	uint32_t g_cap;
	struct tfs_buf scratch;
	struct tfs_buf *gram, *vals; /* per stream payloads */
	uint64_t *gram_hash, *vals_hash;
	uint32_t *gram_first;	/* per stream: first stream with an identical grammar payload */
	uint32_t *vals_first;	/* per stream: first stream with identical values */
	uint32_t *sec_of;	/* per stream: section index of its grammar */
	uint32_t *vsec_of;	/* per stream: section index of its values, or the section count */
	struct vpatch_list *patch; /* per stream: words replaced in a shared section (§8.1) */
	uint32_t *psec_of;	/* per base stream: its vpatch section, or UINT32_MAX */
	uint32_t *bt_sec_of;	/* per writer rank: section index of its backtraces, or n_sect */
	uint32_t *sym_sec_of;	/* per writer rank: section index of its symbols, or n_sect */
	uint32_t n_sect;
	uint32_t *kind_map;	/* per declared kind: its id in the file, UINT32_MAX: unused */
};

static void merge_fini(struct merge *m, uint32_t n_streams)
{
	if (m->patch)
		for (uint32_t i = 0; i < n_streams; i++)
			vpatch_list_fini(&m->patch[i]);
	free(m->patch);
	free(m->psec_of);
	intern_fini(&m->strs);
	intern_fini(&m->sigs);
	free(m->g_kind);
	free(m->kind_map);
	free(m->g_woff);
	buf_fini(&m->g_widths);
	buf_fini(&m->scratch);
	for (uint32_t i = 0; i < n_streams; i++) {
		if (m->gram)
			buf_fini(&m->gram[i]);
		if (m->vals)
			buf_fini(&m->vals[i]);
	}
	free(m->gram);
	free(m->vals);
	free(m->gram_hash);
	free(m->vals_hash);
	free(m->gram_first);
	free(m->vals_first);
	free(m->sec_of);
	free(m->vsec_of);
	free(m->bt_sec_of);
	free(m->sym_sec_of);
}

static int reserve_global(struct merge *m, uint32_t need)
{
	uint32_t cap = m->g_cap ? m->g_cap * 2 : 256;
	uint32_t *k, *o;

	if (need <= m->g_cap)
		return 0;
	while (cap < need)
		cap *= 2;
	k = realloc(m->g_kind, (size_t)cap * sizeof(*k));
	if (!k)
		return -ENOMEM;
	m->g_kind = k;
	o = realloc(m->g_woff, (size_t)cap * sizeof(*o));
	if (!o)
		return -ENOMEM;
	m->g_woff = o;
	m->g_cap = cap;
	return 0;
}

/* Rewrite local signature @t of @s with global string ids into m->scratch. */
static int remap_sig(struct merge *m, const struct tfs_writer *w, const struct tfs_wstream *s,
		     uint32_t t, const uint32_t *str_map)
{
	const struct schema_kind *k = &w->schema.kinds[s->term_kind[t]];
	struct tfs_rd r;
	const uint8_t *p;
	size_t n;
	uint64_t v;
	int rc;

	p = intern_key(&s->sigs, t, &n);
	rd_init(&r, p, n, 0, "signature", NULL);
	m->scratch.len = 0;
	rc = rd_varint(&r, &v);
	if (rc == 0)
		rc = buf_put_varint(&m->scratch, v);
	for (uint32_t i = 0; i < k->n_args && rc == 0; i++) {
		if (k->args[i].enc == TFS_ENC_VAL)
			continue;
		rc = rd_varint(&r, &v);
		if (rc == 0)
			rc = buf_put_varint(&m->scratch, k->args[i].enc == TFS_ENC_STR ? str_map[v] : v);
	}
	return rc;
}

/* Merge one stream's strings and terminals; fill @term_map (local -> global). */
static int merge_tables(struct merge *m, const struct tfs_writer *w, const struct tfs_wstream *s,
			uint32_t *term_map)
{
	uint32_t *str_map = malloc((s->strs.n ? s->strs.n : 1) * sizeof(*str_map));
	int rc = str_map ? 0 : -ENOMEM;

	for (uint32_t i = 0; i < s->strs.n && rc == 0; i++) {
		size_t n;
		const uint8_t *p = intern_key(&s->strs, i, &n);
		bool is_new;

		rc = intern_get(&m->strs, p, n, &str_map[i], &is_new);
	}
	for (uint32_t t = 0; t < s->sigs.n && rc == 0; t++) {
		uint32_t n_vals = w->schema.kinds[s->term_kind[t]].n_vals;
		const uint8_t *lw = s->widths.data + s->term_woff[t];
		uint32_t g;
		bool is_new;

		rc = remap_sig(m, w, s, t, str_map);
		if (rc == 0)
			rc = reserve_global(m, m->sigs.n + 1);
		if (rc == 0)
			rc = buf_reserve(&m->g_widths, n_vals);
		if (rc == 0)
			rc = intern_get(&m->sigs, m->scratch.data, m->scratch.len, &g, &is_new);
		if (rc < 0)
			break;
		if (is_new) {
			m->g_kind[g] = s->term_kind[t];
			m->g_woff[g] = (uint32_t)m->g_widths.len;
			buf_put(&m->g_widths, lw, n_vals); /* reserved above */
		} else {
			uint8_t *gw = m->g_widths.data + m->g_woff[g];

			for (uint32_t j = 0; j < n_vals; j++)
				gw[j] = lw[j] > gw[j] ? lw[j] : gw[j];
		}
		term_map[t] = g;
	}
	free(str_map);
	return rc;
}

/* Re-encode one §6 block from @r with terminals mapped through @map. */
static int remap_block(struct tfs_rd *r, uint32_t n_local, const uint32_t *map,
		       struct tfs_buf *out)
{
	struct tfs_grammar g;
	int rc = grammar_parse(r, n_local, &g);

	if (rc < 0)
		return rc;
	rc = buf_put_varint(out, g.n_rules);
	for (uint32_t i = 0; i < g.n_rules && rc == 0; i++) {
		const struct gram_rule *ru = &g.rules[i];

		rc = buf_put_varint(out, ru->n_elems);
		for (uint32_t j = 0; j < ru->n_elems && rc == 0; j++) {
			const struct gram_elem *e = &g.elems[ru->first_elem + j];
			uint64_t id = e->is_rule ? e->id : map[e->id];

			rc = buf_put_varint(out, id << 2 | (uint64_t)e->is_rule << 1 | (e->count >= 2));
			if (rc == 0 && e->count >= 2)
				rc = buf_put_varint(out, e->count - 2);
		}
	}
	grammar_fini(&g);
	return rc;
}

static int build_grammar(const struct tfs_wstream *s, const uint32_t *map, struct tfs_buf *out)
{
	bool live = gbuild_n_events(s->gb) > 0 || s->n_blocks == 0;
	struct tfs_buf cur;
	struct tfs_rd r;
	uint64_t n;
	int rc;

	buf_init(&cur);
	rc = buf_put_varint(out, s->n_blocks + (live ? 1 : 0));
	rd_init(&r, s->blocks.data, s->blocks.len, 0, "grammar", NULL);
	for (uint32_t b = 0; b < s->n_blocks && rc == 0; b++) {
		rc = rd_varint(&r, &n);
		if (rc == 0)
			rc = buf_put_varint(out, n);
		if (rc == 0)
			rc = remap_block(&r, s->sigs.n, map, out);
	}
	if (live && rc == 0) {
		rc = gbuild_export(s->gb, &cur);
		if (rc == 0)
			rc = buf_put_varint(out, gbuild_n_events(s->gb));
		rd_init(&r, cur.data, cur.len, 0, "grammar", NULL);
		if (rc == 0)
			rc = remap_block(&r, s->sigs.n, map, out);
	}
	buf_fini(&cur);
	return rc;
}

static bool same_buf(const struct tfs_buf *a, const struct tfs_buf *b)
{
	return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

/* Merge tables, build per-stream payloads and find identical streams. */
/* First stream before @i whose payload equals bufs[i] (hashes compared first), or @i. */
static uint32_t first_equal(const struct tfs_buf *bufs, const uint64_t *hash, uint32_t i)
{
	for (uint32_t j = 0; j < i; j++)
		if (hash[j] == hash[i] && same_buf(&bufs[i], &bufs[j]))
			return j;
	return i;
}


/* The stream owning the values section that patched stream @i patches. */
static uint32_t patch_base(const struct merge *m, uint32_t i)
{
	while (m->vals_first[i] != i)
		i = m->vals_first[i];
	return i;
}

static int copy_patch(struct vpatch_list *dst, const struct vpatch_list *src)
{
	if (!src->n)
		return 0;
	dst->e = malloc(src->n * sizeof(*dst->e));
	if (!dst->e)
		return -ENOMEM;
	memcpy(dst->e, src->e, src->n * sizeof(*dst->e));
	dst->n = src->n;
	return 0;
}

/*
 * FORMAT.md §8.1: when stream @i's values differ in few words from those of an earlier
 * stream with the same grammar that owns its section, share that section and keep the
 * words (vals_first[i] then names the owner). A patch entry costs about 4 to 12 bytes of
 * the stream table before zstd, a section of its own 48 bytes of table plus its payload.
 */
static int find_patch(struct merge *m, uint32_t i)
{
	struct tfs_vsec own, base;
	uint32_t max = (uint32_t)((m->vals[i].len + 48) / 12);
	int rc;

	if (max > VPATCH_MAX)
		max = VPATCH_MAX;
	if (vsec_open(&own, m->vals[i].data, m->vals[i].len, 0, NULL) < 0)
		return 0;
	for (uint32_t j = 0; j < i; j++) {
		if (m->gram_first[j] != m->gram_first[i] || m->vals_first[j] != j ||
		    m->patch[j].n || !m->vals[j].len)
			continue;
		if (vsec_open(&base, m->vals[j].data, m->vals[j].len, 0, NULL) < 0)
			continue;
		rc = vpatch_diff(&base, &own, max, &m->patch[i]);
		if (rc == -E2BIG)
			continue;
		if (rc == 0)
			m->vals_first[i] = j;
		return rc;
	}
	return 0;
}

/*
 * Kinds no terminal uses are left out of the file (a capture declares every kind it might
 * record: an MPI trace would carry the I/O and zone kinds too); the others keep their order.
 */
static int map_kinds(struct merge *m, const struct tfs_writer *w)
{
	uint32_t next = 0;

	m->kind_map = malloc((w->schema.n_kinds + 1) * sizeof(*m->kind_map));
	if (!m->kind_map)
		return -ENOMEM;
	memset(m->kind_map, 0xff, (w->schema.n_kinds + 1) * sizeof(*m->kind_map));
	for (uint32_t t = 0; t < m->sigs.n; t++)
		m->kind_map[m->g_kind[t]] = 0;
	for (uint32_t k = 0; k < w->schema.n_kinds; k++)
		if (m->kind_map[k] == 0)
			m->kind_map[k] = next++;
	return 0;
}

/* Backtraces and symbols sections follow the streams' sections, rank by rank (FORMAT.md §8). */
static int number_rank_sections(struct merge *m, const struct tfs_writer *w, uint32_t *next_sec)
{
	uint32_t n = w->n_ranks ? w->n_ranks : 1;

	m->bt_sec_of = calloc(n, sizeof(*m->bt_sec_of));
	m->sym_sec_of = calloc(n, sizeof(*m->sym_sec_of));
	if (!m->bt_sec_of || !m->sym_sec_of)
		return -ENOMEM;
	for (uint32_t i = 0; i < w->n_ranks; i++) {
		m->bt_sec_of[i] = w->ranks[i]->n_bt ? (*next_sec)++ : UINT32_MAX;
		m->sym_sec_of[i] = wrank_has_symbols(w->ranks[i]) ? (*next_sec)++ : UINT32_MAX;
	}
	/* then the sections of write_since_2_1(), before the index that means none */
	*next_sec += schema_has_argflags(&w->schema, m->kind_map) + (w->names.keys.n > 0);
	for (uint32_t i = 0; i < w->n_ranks; i++) {
		if (m->bt_sec_of[i] == UINT32_MAX)
			m->bt_sec_of[i] = *next_sec;
		if (m->sym_sec_of[i] == UINT32_MAX)
			m->sym_sec_of[i] = *next_sec;
	}
	return 0;
}

/*
 * Merge tables, build per-stream payloads and store each distinct grammar and each
 * distinct values payload once: threads that run the same code share a grammar even when
 * their numbers differ.
 */
static int merge_streams(struct merge *m, struct tfs_writer *w)
{
	uint32_t n = w->n_streams ? w->n_streams : 1;
	uint32_t next_sec = 5;
	uint64_t total = 0;
	int rc = 0;

	m->gram = calloc(n, sizeof(*m->gram));
	m->vals = calloc(n, sizeof(*m->vals));
	m->gram_hash = calloc(n, sizeof(*m->gram_hash));
	m->vals_hash = calloc(n, sizeof(*m->vals_hash));
	m->gram_first = calloc(n, sizeof(*m->gram_first));
	m->vals_first = calloc(n, sizeof(*m->vals_first));
	m->sec_of = calloc(n, sizeof(*m->sec_of));
	m->vsec_of = calloc(n, sizeof(*m->vsec_of));
	m->patch = calloc(n, sizeof(*m->patch));
	m->psec_of = malloc(n * sizeof(*m->psec_of));
	if (!m->gram || !m->vals || !m->gram_hash || !m->vals_hash || !m->gram_first ||
	    !m->vals_first || !m->sec_of || !m->vsec_of || !m->patch || !m->psec_of)
		return -ENOMEM;
	memset(m->psec_of, 0xff, n * sizeof(*m->psec_of));
	/* values_save_level is for small traces: the recompression costs ~1 us per event */
	for (uint32_t i = 0; i < w->n_streams; i++)
		total += w->streams[i]->n_events;
	if (w->skip_recompress)
		total = UINT64_MAX;
	for (uint32_t i = 0; i < w->n_streams; i++) {
		if (!wstream_has_values(w->streams[i]))
			continue;
		if (total > TFS_VALUES_SAVE_MAX_EVENTS)
			venc_no_recompress(w->streams[i]->venc);
		else if (w->recompress_cap)
			venc_cap_recompress(w->streams[i]->venc, w->recompress_cap);
	}
	for (uint32_t i = 0; i < w->n_streams && rc == 0; i++) {
		struct tfs_wstream *s = w->streams[i];
		uint32_t *map = malloc((s->sigs.n ? s->sigs.n : 1) * sizeof(*map));

		if (s->err)
			rc = s->err;
		else if (!map)
			rc = -ENOMEM;
		if (rc == 0)
			rc = merge_tables(m, w, s, map);
		if (rc == 0)
			rc = build_grammar(s, map, &m->gram[i]);
		if (rc == 0 && wstream_has_values(s))
			rc = venc_finish(s->venc, &m->vals[i]);
		free(map);
		if (rc < 0)
			break;
		m->gram_hash[i] = hash_bytes(m->gram[i].data, m->gram[i].len);
		m->vals_hash[i] = hash_bytes(m->vals[i].data, m->vals[i].len);
		m->gram_first[i] = first_equal(m->gram, m->gram_hash, i);
		m->vals_first[i] = first_equal(m->vals, m->vals_hash, i);
		m->sec_of[i] = m->gram_first[i] == i ? next_sec++ : m->sec_of[m->gram_first[i]];
		if (m->vals[i].len && m->vals_first[i] == i)
			rc = find_patch(m, i);
		else if (m->vals_first[i] != i)
			rc = copy_patch(&m->patch[i], &m->patch[m->vals_first[i]]);
		if (rc < 0)
			break;
		if (!m->vals[i].len) {
			m->vsec_of[i] = UINT32_MAX;
		} else if (m->vals_first[i] == i) {
			m->vsec_of[i] = next_sec++;
		} else if (m->patch[i].n) {
			uint32_t b = patch_base(m, i);

			if (m->psec_of[b] == UINT32_MAX)
				m->psec_of[b] = next_sec++;
			m->vsec_of[i] = m->psec_of[b];
		} else {
			m->vsec_of[i] = m->vsec_of[m->vals_first[i]];
		}
	}
	if (rc == 0)
		rc = map_kinds(m, w);
	if (rc == 0)
		rc = number_rank_sections(m, w, &next_sec);
	for (uint32_t i = 0; i < w->n_streams && rc == 0; i++)
		if (m->vsec_of[i] == UINT32_MAX)
			m->vsec_of[i] = next_sec; /* "none": the section count */
	m->n_sect = next_sec;
	return rc;
}

/* Upper bound of a reconstructed time: lossy timing may round up (FORMAT.md §7). */
static uint64_t time_bound(const struct tfs_writer *w, uint64_t max)
{
	double extra;

	if (w->opts.timing != TFS_TIMING_LOSSY)
		return max;
	extra = (double)max * 2.0 * w->opts.rel_err + 16.0;
	if (extra >= (double)(UINT64_MAX - max))
		return UINT64_MAX;
	return max + (uint64_t)extra;
}

/*
 * FORMAT.md §8.1: the vpatch section of the streams that patch stream @base's values: the
 * base's section index, then each patching stream's list in stream-table order, each
 * predicted from the previous two.
 */
static int build_vpatch(const struct merge *m, const struct tfs_writer *w, uint32_t base,
			struct tfs_buf *out)
{
	const struct vpatch_list *p1 = NULL, *p2 = NULL;
	uint32_t n = 0;
	int rc;

	for (uint32_t i = 0; i < w->n_streams; i++)
		n += m->vsec_of[i] == m->psec_of[base];
	rc = buf_put_varint(out, m->vsec_of[base]);
	if (rc == 0)
		rc = buf_put_varint(out, n);
	for (uint32_t i = 0; i < w->n_streams && rc == 0; i++) {
		if (m->vsec_of[i] != m->psec_of[base])
			continue;
		rc = vpatch_write(out, &m->patch[i], p1, p2);
		p2 = p1;
		p1 = &m->patch[i];
	}
	return rc;
}

static int zstd_level(const struct tfs_writer *w)
{
	return w->opts.zstd_level ? w->opts.zstd_level : 19;
}

/*
 * Symbols sections compress at most at this level: level 19 is 0.5% smaller on cc1's
 * symbols (0.02% of its trace) but takes 2.7 times as long (tests/bench/run_real, make).
 */
#define SYMBOLS_LEVEL 15
/* The level of sections a merge rewrites, in the save of a merge input (level 1: seen once) */
#define MERGE_INPUT_LEVEL 1

/*
 * The zstd level of a section of @type, or of the section table (@type 0). A merge copies
 * values, backtraces and symbols as stored and rewrites the rest (grammars too, with
 * tfs_merge_opts.rewrite_grammars): in a merge input (tfs_writer_merge_input()) the rest is
 * compressed fast.
 */
static int section_level(const struct tfs_writer *w, uint32_t type)
{
	int level = zstd_level(w);

	switch (type) {
	case SEC_SYMBOLS:
		return level < SYMBOLS_LEVEL ? level : SYMBOLS_LEVEL;
	default:
		return w->merge_input && level > MERGE_INPUT_LEVEL ? MERGE_INPUT_LEVEL : level;
	}
}

/* ctr_add() of a section of @type at its section_level(). */
static int add_sec(struct ctr_writer *cw, const struct tfs_writer *w, uint32_t type, int compress,
		   const void *data, size_t n, size_t head_len)
{
	cw->zstd_level = section_level(w, type);
	return ctr_add(cw, (uint16_t)type, compress, data, n, head_len);
}

/* FORMAT.md §8 rank table: the ranks with backtraces or symbols, in rank order. */
static int write_rank_sections(const struct merge *m, struct tfs_writer *w,
			       struct ctr_writer *cw)
{
	struct tfs_buf b;
	int rc = 0;

	buf_init(&b);
	for (uint32_t i = 0; i < w->n_ranks && rc == 0; i++) {
		b.len = 0;
		if (m->bt_sec_of[i] != m->n_sect) {
			rc = wrank_backtraces(w->ranks[i], &b);
			if (rc == 0)
				rc = add_sec(cw, w, SEC_BACKTRACES, 0, b.data, b.len, b.len);
		}
		b.len = 0;
		if (rc == 0 && m->sym_sec_of[i] != m->n_sect) {
			rc = wrank_symbols(w->ranks[i], &b);
			if (rc == 0)
				rc = add_sec(cw, w, SEC_SYMBOLS, 1, b.data, b.len, b.len);
		}
	}
	buf_fini(&b);
	return rc;
}

/* What the streams section (FORMAT.md §8) says: @t, its arrays new (sx_free()). */
static int describe_streams(const struct merge *m, const struct tfs_writer *w,
			    struct sx_table *t)
{
	struct sx_stream *ss = calloc(w->n_streams + 1, sizeof(*ss));
	struct sx_phase *ps = calloc(w->n_phases + 1, sizeof(*ps));
	struct sx_rank *rs = calloc(w->n_ranks + 1, sizeof(*rs));
	uint32_t max_rank = 0;

	*t = (struct sx_table){.timing = w->opts.timing, .rel_err = w->opts.rel_err,
			       .n_sect = m->n_sect, .n_streams = w->n_streams,
			       .n_phases = w->n_phases, .streams = ss, .phases = ps, .ranks = rs};
	if (!ss || !ps || !rs)
		return -ENOMEM;
	for (uint32_t i = 0; i < w->n_streams; i++) {
		const struct tfs_wstream *s = w->streams[i];

		ss[i] = (struct sx_stream){s->rank, s->thread, s->n_events, m->sec_of[i],
					   m->vsec_of[i]};
		max_rank = s->rank > max_rank ? s->rank : max_rank;
		t->max_thread = s->thread > t->max_thread ? s->thread : t->max_thread;
		t->max_ts = s->max_ts > t->max_ts ? s->max_ts : t->max_ts;
		t->max_dur = s->max_dur > t->max_dur ? s->max_dur : t->max_dur;
	}
	for (uint32_t i = 0; i < w->n_ranks; i++) {
		const struct wrank *r = w->ranks[i];

		if (m->bt_sec_of[i] == m->n_sect && m->sym_sec_of[i] == m->n_sect)
			continue;
		rs[t->n_ranks_bt++] = (struct sx_rank){r->rank, m->bt_sec_of[i], m->sym_sec_of[i],
						       r->n_bt};
		max_rank = r->rank > max_rank ? r->rank : max_rank;
	}
	if (w->names.keys.n && w->names.max_rank > max_rank)
		max_rank = w->names.max_rank;
	for (uint32_t i = 0; i < w->n_phases; i++)
		ps[i] = (struct sx_phase){w->phases[i].name, w->phases[i].stream,
					  w->phases[i].first, w->phases[i].n};
	t->n_ranks = max_rank + 1;
	t->max_ts = time_bound(w, t->max_ts);
	t->max_dur = time_bound(w, t->max_dur);
	return 0;
}

static void sx_free(struct sx_table *t)
{
	free((void *)t->streams);
	free((void *)t->phases);
	free((void *)t->ranks);
}

/* Bytes of a values payload covered by crc_hd: its header and block index. */
static size_t values_head(const struct tfs_buf *v)
{
	struct tfs_vsec vs;

	if (vsec_open(&vs, v->data, v->len, 0, NULL) < 0)
		return v->len;
	return (size_t)vs.data_start;
}


/* Whether stream @i is the first in the table to use its vpatch section. */
static bool first_patcher(const struct merge *m, const struct tfs_writer *w, uint32_t i)
{
	for (uint32_t j = 0; j < i && j < w->n_streams; j++)
		if (m->vsec_of[j] == m->vsec_of[i])
			return false;
	return true;
}

/* Section @type of @t through @cw, when it has anything to say. */
static int add_table(const struct tables *t, uint32_t type, const struct tfs_writer *w,
		     struct ctr_writer *cw, struct tfs_buf *b)
{
	int rc;

	b->len = 0;
	rc = tables_encode(t, type, b);
	return rc == 1 ? add_sec(cw, w, type, 1, b->data, b->len, b->len) : rc;
}

/*
 * Every section, then the table and header, through @cw (which the caller finalises): the
 * tables, the grammars, values and patches in the order merge_streams() numbered them, the
 * ranks' backtraces and symbols, and last the sections format 2.1 added (argflags, names),
 * so that the indices of the others stay as numbered.
 */
static int write_sections(const struct merge *m, struct tfs_writer *w,
			  struct ctr_writer *cw)
{
	static const uint32_t first[] = {SEC_META, SEC_SCHEMA, SEC_STRINGS, SEC_CST, SEC_STREAMS};
	struct tables t = {.meta = w->meta, .n_meta = w->n_meta, .schema = &w->schema,
			   .kind_map = m->kind_map, .strs = &m->strs, .sigs = &m->sigs,
			   .sig_kind = m->g_kind, .sig_woff = m->g_woff,
			   .widths = m->g_widths.data};
	struct names_enc names;
	struct sx_table sx;
	struct tfs_buf b;
	int rc;

	buf_init(&b);
	names_enc_init(&names);
	rc = describe_streams(m, w, &sx);
	if (rc == 0)
		rc = wnames_encode(&w->names, &names);
	t.streams = &sx;
	t.names = &names;
	for (size_t i = 0; i < sizeof(first) / sizeof(first[0]) && rc == 0; i++)
		rc = add_table(&t, first[i], w, cw, &b);
	for (uint32_t i = 0; i < w->n_streams && rc == 0; i++) {
		if (m->gram_first[i] == i)
			rc = add_sec(cw, w, SEC_GRAMMAR, CTR_ZSTD_IF_SMALLER, m->gram[i].data,
				     m->gram[i].len, m->gram[i].len);
		if (rc == 0 && m->vals[i].len && m->vals_first[i] == i)
			rc = add_sec(cw, w, SEC_VALUES, 0, m->vals[i].data, m->vals[i].len,
				     values_head(&m->vals[i]));
		if (rc == 0 && m->patch[i].n && first_patcher(m, w, i)) {
			b.len = 0;
			rc = build_vpatch(m, w, patch_base(m, i), &b);
			if (rc == 0)
				rc = add_sec(cw, w, SEC_VPATCH, 1, b.data, b.len, b.len);
		}
	}
	if (rc == 0)
		rc = write_rank_sections(m, w, cw);
	if (rc == 0)
		rc = add_table(&t, SEC_ARGFLAGS, w, cw, &b);
	if (rc == 0)
		rc = add_table(&t, SEC_NAMES, w, cw, &b);
	if (rc == 0) {
		cw->zstd_level = section_level(w, 0); /* the table and packed small sections */
		rc = ctr_finish(cw);
	}
	names_enc_fini(&names);
	sx_free(&sx);
	buf_fini(&b);
	return rc;
}

/* Merge the streams' tables (once: the value streams are finished here). */
static int save_begin(struct merge *m, struct tfs_writer *w)
{
	if (w->saved)
		return -EALREADY;
	memset(m, 0, sizeof(*m));
	intern_init(&m->strs);
	intern_init(&m->sigs);
	buf_init(&m->g_widths);
	buf_init(&m->scratch);
	w->saved = true; /* value streams are finished below: no appends after this */
	return merge_streams(m, w);
}

int tfs_writer_save_mem(struct tfs_writer *w, void **out, size_t *len)
{
	struct ctr_writer cw;
	struct tfs_buf b;
	struct merge m;
	int rc;

	*out = NULL;
	*len = 0;
	if (w->saved)
		return -EALREADY;
	buf_init(&b);
	rc = save_begin(&m, w);
	if (rc == 0)
		rc = ctr_writer_init_mem(&cw, &b, zstd_level(w));
	if (rc == 0) {
		rc = write_sections(&m, w, &cw);
		ctr_writer_fini(&cw);
	}
	merge_fini(&m, w->n_streams);
	if (rc < 0) {
		buf_fini(&b);
		return rc;
	}
	*out = b.data;
	*len = b.len;
	return 0;
}

int tfs_writer_save(struct tfs_writer *w, const char *path)
{
	struct ctr_writer cw;
	struct wfile f;
	struct merge m;
	int rc;

	if (w->saved)
		return -EALREADY;
	rc = save_begin(&m, w);
	if (rc < 0)
		goto out_merge;
	rc = wfile_open(&f, path);
	if (rc < 0)
		goto out_merge;
	rc = ctr_writer_init(&cw, f.fd, zstd_level(w));
	if (rc == 0)
		rc = write_sections(&m, w, &cw);
	ctr_writer_fini(&cw);
	if (rc == 0)
		rc = wfile_commit(&f);
	else
		wfile_abort(&f);
out_merge:
	merge_fini(&m, w->n_streams);
	return rc;
}
