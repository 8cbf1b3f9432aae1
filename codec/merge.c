/*
 * Merging traces (include/tfs/merge.h): the inputs' ranks one after the other in one new
 * trace, built in memory. Kinds, strings and call signatures are interned into merged
 * tables; each input gets maps from its ids to the merged ones, with RANK words re-based on
 * the streams' new ranks (FORMAT.md §5.2), so that ranks which did the same thing end up
 * with equal signatures and, once their grammars are renumbered, equal grammars, stored
 * once. A grammar section whose terminals keep their numbers and every values section are
 * copied as stored (after their checksum is checked), never recompressed. A stream whose
 * rank-derived RVAL arguments are constants some input has as literals takes the literal
 * signatures (find_twins), so every signature is mapped before any grammar. Work and memory
 * are linear in the inputs' tables and stream counts plus the output; nothing is indexed by
 * rank. It does not decode events, and it does not check what the inputs' open did not.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "container_i.h"
#include "intern_i.h"
#include "merge_i.h"
#include "streams_i.h"
#include "tables_i.h"
#include "tfs/merge.h"
#include "trace_i.h"

/* Sections this module compresses: small ones hard, large ones fast (ctr_level(); merges run
 * at MPI_Finalize in log2(P) rounds, so throughput matters more than the last percent). */
#define MERGE_LEVEL 19
#define MERGE_LARGE_BYTES (256u << 10)
#define MERGE_LARGE_LEVEL 6

/* A copied values section, found again by (crc, size) then compared byte for byte. */
struct vslot {
	uint64_t key; /* 0: empty */
	uint32_t sec;
};

struct mg {
	struct tfs_schema schema;
	struct intern kinds; /* kind descriptions -> merged kind ids (= schema ids) */
	struct intern strs;
	struct intern sigs; /* merged signatures (VAL widths excluded) */
	uint32_t *g_kind;   /* [sigs.n] */
	uint32_t *g_woff;   /* [sigs.n] first VAL width in g_widths */
	uint32_t g_cap;
	struct tfs_buf g_widths;
	struct intern grams; /* canonical grammar payloads -> ordinal */
	uint32_t *gram_sec;  /* [grams.n] output section of each */
	uint32_t gram_cap;
	struct vslot *vtab;
	uint32_t vtab_cap, vtab_n;
	struct sx_stream *streams;
	uint32_t n_streams, streams_cap;
	struct sx_phase *phases;
	uint32_t n_phases, phases_cap;
	struct sx_rank *ranks;
	uint32_t n_ranks_bt, ranks_cap;
	struct mmeta meta;
	struct names_enc names;
	struct name_in *name_in; /* scratch: one input table's names */
	uint32_t name_in_cap;
	uint32_t n_ranks, max_thread;
	uint64_t max_ts, max_dur;
	struct tfs_buf scratch;
	struct tfs_buf out;
	struct ctr_writer cw;
	bool rewrite_grammars; /* tfs_merge_opts */
};

static void mg_init(struct mg *m)
{
	memset(m, 0, sizeof(*m));
	schema_init(&m->schema);
	intern_init(&m->kinds);
	intern_init(&m->strs);
	intern_init(&m->sigs);
	intern_init(&m->grams);
	mmeta_init(&m->meta);
	names_enc_init(&m->names);
	buf_init(&m->g_widths);
	buf_init(&m->scratch);
	buf_init(&m->out);
}

static void mg_fini(struct mg *m)
{
	schema_fini(&m->schema);
	intern_fini(&m->kinds);
	intern_fini(&m->strs);
	intern_fini(&m->sigs);
	intern_fini(&m->grams);
	mmeta_fini(&m->meta);
	names_enc_fini(&m->names);
	free(m->name_in);
	free(m->g_kind);
	free(m->g_woff);
	buf_fini(&m->g_widths);
	free(m->gram_sec);
	free(m->vtab);
	free(m->streams);
	free(m->phases);
	free(m->ranks);
	buf_fini(&m->scratch);
	buf_fini(&m->out);
	ctr_writer_fini(&m->cw);
}

struct twin_pair {
	uint32_t to, term;
};

/* Where the distinct terminals of a grammar section are listed, the ranked ones first. */
struct gterms {
	uint32_t off, n, n_ranked;
	bool listed;
};

/* What the first pass over one input keeps for the second: its ids' merged ones. */
struct inmap {
	uint32_t *kind_map; /* [schema.n_kinds] */
	uint32_t *str_map;  /* [n_strs] */
	uint32_t *term_map; /* [n_terms] */
	bool *ranked;	    /* [n_terms]: it has a rank-derived RVAL argument */
	bool any_ranked;
	uint32_t *gsec_out; /* [n_gsecs]: output section of each as stored, once needed */
	uint32_t *twin_map; /* [n_terms]: term_map but for one stream's twins (find_twins) */
	uint8_t *seen;	    /* [n_terms] scratch of gsec_terms, all 0 between calls */
	struct twin_pair *used; /* [n_terms] scratch of find_twins: its first n_moved moved */
	uint32_t n_moved;
	struct gterms *gterms; /* [n_gsecs] the terminals of each grammar section, once listed */
	uint32_t *terms;       /* their lists (gsec_terms) */
	uint32_t n_termlist, terms_cap;
};

/* Prefix the diagnostic of input @i's failure with the input's number. */
static int in_fail(struct tfs_diag *diag, uint32_t i, int rc)
{
	char reason[sizeof(diag->reason)];
	int n;

	if (diag && (rc == -TFS_ECORRUPT || rc == -TFS_EFORMAT || rc == -EINVAL)) {
		memcpy(reason, diag->reason, sizeof(reason));
		n = snprintf(diag->reason, sizeof(diag->reason), "input %u: ", i);
		if (n > 0 && (size_t)n < sizeof(diag->reason))
			snprintf(diag->reason + n, sizeof(diag->reason) - (size_t)n, "%.*s",
				 (int)(sizeof(diag->reason) - (size_t)n - 1), reason);
	}
	return rc;
}

/* ---- kinds, strings, signatures ---- */

static int kind_key(const struct tfs_kind_desc *d, struct tfs_buf *b)
{
	int rc;

	b->len = 0;
	rc = buf_put_str(b, d->name, strlen(d->name));
	if (rc == 0)
		rc = buf_put_str(b, d->category, strlen(d->category));
	if (rc == 0)
		rc = buf_put_varint(b, d->n_args);
	for (uint32_t i = 0; i < d->n_args && rc == 0; i++) {
		const struct tfs_arg_desc *a = &d->args[i];
		const char *sc = a->sym_class ? a->sym_class : "";

		rc = buf_put_str(b, a->name, strlen(a->name));
		if (rc == 0)
			rc = buf_put_u8(b, a->type);
		if (rc == 0)
			rc = buf_put_u8(b, a->enc);
		if (rc == 0)
			rc = buf_put_u8(b, a->flags);
		if (rc == 0)
			rc = buf_put_str(b, sc, strlen(sc));
	}
	return rc;
}

static int map_kinds(struct mg *m, const struct tfs_trace *t, uint32_t *kind_map)
{
	struct tfs_arg_desc args[TFS_MAX_ARGS];
	struct tfs_kind_desc d;

	for (uint32_t k = 0; k < t->schema.n_kinds; k++) {
		uint32_t id, sid;
		bool is_new;
		int rc;

		schema_desc(&t->schema, k, &d, args);
		rc = kind_key(&d, &m->scratch);
		if (rc == 0)
			rc = intern_get(&m->kinds, m->scratch.data, m->scratch.len, &id, &is_new);
		if (rc == 0 && is_new) {
			rc = schema_add(&m->schema, &d, &sid);
			assert(rc < 0 || sid == id);
		}
		if (rc < 0)
			return rc;
		kind_map[k] = id;
	}
	return 0;
}

static int map_strings(struct mg *m, const struct tfs_trace *t, uint32_t *str_map)
{
	for (uint32_t s = 0; s < t->n_strs; s++) {
		bool is_new;
		int rc = intern_get(&m->strs, t->strs[s], t->str_len[s], &str_map[s], &is_new);

		if (rc < 0)
			return rc;
	}
	return 0;
}

/*
 * Signature key of terminal @term of input @t (ranks re-based by @base) into m->scratch,
 * its VAL widths into @wid. @lit_rank < 0: as stored, *@ranked telling whether an RVAL
 * argument is rank-derived. Else the key of its twin: the same call with every
 * rank-derived RVAL argument the literal it means in @t's rank @lit_rank (-ERANGE if one
 * cannot be a literal).
 */
static int term_key(struct mg *m, const struct tfs_trace *t, uint32_t term, uint32_t base,
		    const uint32_t *kind_map, const uint32_t *str_map, int64_t lit_rank,
		    uint8_t *wid, bool *ranked, struct tfs_diag *diag)
{
	const struct schema_kind *k = &t->schema.kinds[t->term_kind[term]];
	const uint64_t *w = t->term_arg + t->term_argoff[term];
	uint32_t nv = 0;
	int rc;

	m->scratch.len = 0;
	rc = buf_put_varint(&m->scratch, kind_map[t->term_kind[term]]);
	for (uint32_t i = 0; i < k->n_args && rc == 0; i++) {
		uint64_t v = w[i];

		switch (k->args[i].enc) {
		case TFS_ENC_VAL:
			wid[nv++] = (uint8_t)v;
			continue;
		case TFS_ENC_STR:
			v = str_map[v];
			break;
		case TFS_ENC_RANK:
			/* absolute = rel + old rank = rel' + new rank, new = old + base */
			if (!rank_word_special(v) && !rank_word_rel(rank_word_value(v) - base, &v))
				return diag_set(diag, -EINVAL, 0, "cst",
						"terminal %u: rank argument out of range once "
						"re-based by %u",
						term, base);
			break;
		case TFS_ENC_RVAL:
			if (!rval_word_ranked(v))
				break;
			*ranked = true;
			if (lit_rank >= 0) {
				const int64_t abs = rval_word_value(v) + lit_rank;

				if (abs >= TFS_RVAL_LIMIT || abs < -TFS_RVAL_LIMIT)
					return -ERANGE;
				v = zigzag_enc(abs) << 1;
			} else {
				/* a ranked value keeps its absolute value as the rank is re-based */
				v = zigzag_enc(rval_word_value(v) - (int64_t)base) << 1 | 1;
				if (!rval_word_ok(v))
					return diag_set(diag, -EINVAL, 0, "cst",
							"terminal %u: rank-derived value out of "
							"range once re-based by %u",
							term, base);
			}
			break;
		default:
			break;
		}
		rc = buf_put_varint(&m->scratch, v);
	}
	return rc;
}

static int map_terms(struct mg *m, const struct tfs_trace *t, uint32_t base, struct inmap *im,
		     struct tfs_diag *diag)
{
	uint8_t wid[TFS_MAX_ARGS];

	for (uint32_t term = 0; term < t->n_terms; term++) {
		uint32_t nv = t->term_nvals[term], g;
		bool is_new, ranked = false;
		int rc;

		rc = term_key(m, t, term, base, im->kind_map, im->str_map, -1, wid, &ranked, diag);
		if (rc == 0)
			rc = merge_grow2((void **)&m->g_kind, sizeof(*m->g_kind),
					 (void **)&m->g_woff, sizeof(*m->g_woff), &m->g_cap,
					 (uint64_t)m->sigs.n + 1);
		if (rc == 0)
			rc = buf_reserve(&m->g_widths, nv);
		if (rc == 0)
			rc = intern_get(&m->sigs, m->scratch.data, m->scratch.len, &g, &is_new);
		if (rc < 0)
			return rc;
		if (g >= GRAM_MAX_TERMINAL)
			return diag_set(diag, -EINVAL, 0, "cst", "more than 2^30 signatures");
		if (is_new) {
			m->g_kind[g] = im->kind_map[t->term_kind[term]];
			m->g_woff[g] = (uint32_t)m->g_widths.len;
			buf_put(&m->g_widths, wid, nv); /* reserved above */
		} else if (nv) { /* g_widths.data is NULL while every terminal has 0 fields */
			uint8_t *gw = m->g_widths.data + m->g_woff[g];

			for (uint32_t j = 0; j < nv; j++)
				gw[j] = wid[j] > gw[j] ? wid[j] : gw[j];
		}
		im->term_map[term] = g;
		im->ranked[term] = ranked;
		im->any_ranked |= ranked;
	}
	return 0;
}

/* ---- grammar and values sections ---- */

static int add_section(struct mg *m, uint16_t type, const void *data, size_t n)
{
	return ctr_add(&m->cw, type, type == SEC_GRAMMAR ? CTR_ZSTD_IF_SMALLER : 1, data, n, n);
}

/* Copy section @idx of input @t as stored, once its whole checksum holds. */
static int copy_section(struct mg *m, const struct tfs_trace *t, uint32_t idx,
			struct tfs_diag *diag)
{
	return ctr_copy(&m->cw, &t->cf, idx, diag);
}

/* FORMAT.md §6 payload of @g with terminals renumbered; *@changed if any number changed. */
static int encode_grammar(const struct gsec *g, const uint32_t *map, struct tfs_buf *out,
			  bool *changed)
{
	int rc = buf_put_varint(out, g->n_blocks);

	for (uint32_t b = 0; b < g->n_blocks && rc == 0; b++) {
		const struct tfs_grammar *gr = &g->blocks[b];

		rc = buf_put_varint(out, gr->n_events);
		if (rc == 0)
			rc = buf_put_varint(out, gr->n_rules);
		for (uint32_t i = 0; i < gr->n_rules && rc == 0; i++) {
			const struct gram_rule *ru = &gr->rules[i];

			rc = buf_put_varint(out, ru->n_elems);
			for (uint32_t j = 0; j < ru->n_elems && rc == 0; j++) {
				const struct gram_elem *e = &gr->elems[ru->first_elem + j];
				uint64_t id = e->is_rule ? e->id : map[e->id];

				*changed |= !e->is_rule && id != e->id;
				rc = buf_put_varint(out, id << 2 | (uint64_t)e->is_rule << 1 |
							     (e->count >= 2));
				if (rc == 0 && e->count >= 2)
					rc = buf_put_varint(out, e->count - 2);
			}
		}
	}
	return rc;
}

/*
 * Output section of grammar section @gi of @t with terminals numbered by @map: stored once
 * per distinct content, as stored when no number changed.
 */
static int place_grammar(struct mg *m, const struct tfs_trace *t, uint32_t gi,
			 const uint32_t *map, uint32_t *sec, struct tfs_diag *diag)
{
	const struct gsec *g = &t->gsecs[gi];
	bool changed = false, is_new;
	uint32_t ord;
	int rc;

	m->scratch.len = 0;
	rc = encode_grammar(g, map, &m->scratch, &changed);
	if (rc == 0)
		rc = merge_grow((void **)&m->gram_sec, &m->gram_cap, (uint64_t)m->grams.n + 1,
				sizeof(*m->gram_sec));
	if (rc == 0)
		rc = intern_get(&m->grams, m->scratch.data, m->scratch.len, &ord, &is_new);
	if (rc < 0)
		return rc;
	if (is_new) {
		m->gram_sec[ord] = m->cw.n;
		if (changed || m->rewrite_grammars)
			rc = add_section(m, SEC_GRAMMAR, m->scratch.data, m->scratch.len);
		else
			rc = copy_section(m, t, g->sec, diag);
		if (rc < 0)
			return rc;
	}
	*sec = m->gram_sec[ord];
	return 0;
}

static int by_target(const void *a, const void *b)
{
	const struct twin_pair *x = a, *y = b;

	return x->to != y->to ? (x->to < y->to ? -1 : 1) : (x->term > y->term) - (x->term < y->term);
}

/*
 * The distinct terminals of grammar section @gi of @t, its ranked ones first, listed once
 * per section at im->terms + im->gterms[gi].off. @return 0 or -ENOMEM
 */
static int gsec_terms(const struct tfs_trace *t, struct inmap *im, uint32_t gi)
{
	const struct gsec *g = &t->gsecs[gi];
	struct gterms *gt = &im->gterms[gi];
	uint32_t n = 0, n_ranked = 0;

	if (gt->listed)
		return 0;
	for (uint32_t b = 0; b < g->n_blocks; b++)
		for (uint64_t i = 0; i < g->blocks[b].n_elems; i++) {
			const struct gram_elem *e = &g->blocks[b].elems[i];

			if (!e->is_rule && !im->seen[e->id]) {
				im->seen[e->id] = 1;
				im->used[n++].term = e->id;
			}
		}
	if (merge_grow((void **)&im->terms, &im->terms_cap, (uint64_t)im->n_termlist + n,
		       sizeof(*im->terms)) < 0) {
		for (uint32_t i = 0; i < n; i++)
			im->seen[im->used[i].term] = 0;
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++)
		if (im->ranked[im->used[i].term])
			im->terms[im->n_termlist + n_ranked++] = im->used[i].term;
	for (uint32_t i = 0, k = n_ranked; i < n; i++) {
		im->seen[im->used[i].term] = 0;
		if (!im->ranked[im->used[i].term])
			im->terms[im->n_termlist + k++] = im->used[i].term;
	}
	*gt = (struct gterms){im->n_termlist, n, n_ranked, true};
	im->n_termlist += n;
	return 0;
}

/*
 * Twins. A constant equal to a rank (MPI tag 7 at rank 7, or at the ranks talking to rank
 * 7) was written as derived from the rank (the MPI capture cannot know better), which
 * splits that rank's grammar from the one its neighbours share. Where the inputs hold the
 * same call with that value as a literal, stream @s uses the literal's terminal instead:
 * it prints the same, and its grammar can then equal its neighbours'. Every rank meets
 * every other's table by the last merge, so pairwise merges end as one merge of all.
 * A twin is taken only if the stream's terminals stay distinct (its values decode per
 * terminal). @return 1 with im->twin_map set (twins_undo() puts it back), 0 when no twin
 * applies, or -ENOMEM
 */
static int find_twins(struct mg *m, const struct tfs_trace *t, uint32_t base,
		      struct inmap *im, const struct tstream *s)
{
	uint8_t wid[TFS_MAX_ARGS];
	const uint32_t *terms;
	uint32_t n_sub = 0;
	struct gterms gt;
	int rc;

	if (!im->any_ranked)
		return 0;
	if (!im->twin_map) {
		im->twin_map = malloc((t->n_terms + 1) * sizeof(*im->twin_map));
		im->seen = calloc(t->n_terms + 1, 1);
		im->used = malloc((t->n_terms + 1) * sizeof(*im->used));
		im->gterms = calloc(t->n_gsecs + 1, sizeof(*im->gterms));
		if (!im->twin_map || !im->seen || !im->used || !im->gterms)
			return -ENOMEM;
		memcpy(im->twin_map, im->term_map, t->n_terms * sizeof(*im->twin_map));
	}
	rc = gsec_terms(t, im, s->gsec);
	if (rc < 0)
		return rc;
	gt = im->gterms[s->gsec];
	terms = im->terms + gt.off;
	/*
	 * Each ranked terminal to its twin, if an input has one. Only the ranked ones: many
	 * streams share a section, so a stream without twins costs a few lookups, not a pass
	 * over the section's terminals.
	 */
	for (uint32_t i = 0; i < gt.n_ranked; i++) {
		uint32_t twin;
		bool ranked;

		im->used[i] = (struct twin_pair){im->term_map[terms[i]], terms[i]};
		rc = term_key(m, t, terms[i], base, im->kind_map, im->str_map, s->rank, wid,
			      &ranked, NULL);
		if (rc == -ENOMEM)
			return rc;
		if (rc == 0 && intern_find(&m->sigs, m->scratch.data, m->scratch.len, &twin) == 0) {
			im->used[i].to = twin;
			n_sub++;
		}
	}
	if (n_sub == 0)
		return 0;
	for (uint32_t i = gt.n_ranked; i < gt.n; i++)
		im->used[i] = (struct twin_pair){im->term_map[terms[i]], terms[i]};
	/* a twin the stream already has, or two terminals with one twin: none of them moves */
	qsort(im->used, gt.n, sizeof(*im->used), by_target);
	for (uint32_t i = 0, j; i < gt.n; i = j) {
		for (j = i + 1; j < gt.n && im->used[j].to == im->used[i].to; j++)
			;
		if (j - i > 1)
			for (uint32_t k = i; k < j; k++)
				im->used[k].to = im->term_map[im->used[k].term];
	}
	im->n_moved = 0;
	for (uint32_t i = 0; i < gt.n; i++) {
		const uint32_t term = im->used[i].term, from = im->term_map[term], to = im->used[i].to;

		if (to == from)
			continue;
		im->twin_map[term] = to;
		im->used[im->n_moved++].term = term; /* i >= n_moved: nothing unread is lost */
		/* the twin's lines must fit this terminal's values too */
		for (uint32_t j = 0; j < t->term_nvals[term]; j++) {
			uint8_t *tw = m->g_widths.data + m->g_woff[to] + j;
			const uint8_t fw = m->g_widths.data[m->g_woff[from] + j];

			*tw = fw > *tw ? fw : *tw;
		}
	}
	return im->n_moved > 0;
}

/* im->twin_map back to im->term_map after find_twins() returned 1. */
static void twins_undo(struct inmap *im)
{
	for (uint32_t i = 0; i < im->n_moved; i++)
		im->twin_map[im->used[i].term] = im->term_map[im->used[i].term];
	im->n_moved = 0;
}

static uint64_t vkey(const struct sec_entry *e)
{
	uint64_t k = ((uint64_t)e->crc_all << 32 | e->crc_head) ^ (e->stored * 0x9e3779b97f4a7c15u);

	return k ? k : 1;
}

static int vtab_grow(struct mg *m)
{
	uint32_t cap = m->vtab_cap ? m->vtab_cap * 2 : 64;
	struct vslot *v;

	if (cap == 0)
		return -ENOMEM;
	v = calloc(cap, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->vtab_cap; i++) {
		uint32_t j = (uint32_t)m->vtab[i].key & (cap - 1);

		if (!m->vtab[i].key)
			continue;
		while (v[j].key)
			j = (j + 1) & (cap - 1);
		v[j] = m->vtab[i];
	}
	free(m->vtab);
	m->vtab = v;
	m->vtab_cap = cap;
	return 0;
}

/*
 * Output section of section @idx of @t (values, backtraces, symbols: sections that mean
 * the same in any trace and at any rank): an equal one already copied, or a copy.
 */
static int merge_values(struct mg *m, const struct tfs_trace *t, uint32_t idx, uint32_t *sec,
			struct tfs_diag *diag)
{
	const struct sec_entry *e = &t->cf.ents[idx];
	uint64_t key = vkey(e);
	uint32_t j;
	int rc;

	if (2 * (m->vtab_n + 1) > m->vtab_cap) {
		rc = vtab_grow(m);
		if (rc < 0)
			return rc;
	}
	for (j = (uint32_t)key & (m->vtab_cap - 1); m->vtab[j].key;
	     j = (j + 1) & (m->vtab_cap - 1)) {
		const struct sec_entry *o = &m->cw.ents[m->vtab[j].sec];

		if (m->vtab[j].key == key && o->type == e->type && o->codec == e->codec &&
		    o->raw == e->raw && o->stored == e->stored && o->head_len == e->head_len &&
		    memcmp(ctr_writer_bytes(&m->cw, m->vtab[j].sec), ctr_bytes(&t->cf, idx),
			   (size_t)e->stored) == 0) {
			*sec = m->vtab[j].sec;
			return 0;
		}
	}
	*sec = m->cw.n;
	rc = copy_section(m, t, idx, diag);
	if (rc < 0)
		return rc;
	m->vtab[j].key = key;
	m->vtab[j].sec = *sec;
	m->vtab_n++;
	return 0;
}

/*
 * The vpatch section (FORMAT.md §8.1) that stream @first of @t names, for the output: its
 * base re-numbered, the lists of @t's streams naming it in their order (which the output
 * keeps: no other input's stream names it). @return 0 or -errno
 */
static int merge_vpatch(struct mg *m, const struct tfs_trace *t, uint32_t first, uint32_t *vsec_out,
			struct tfs_diag *diag)
{
	const struct tstream *s0 = &t->streams[first];
	const struct vpatch_list *p1 = NULL, *p2 = NULL;
	struct tfs_buf b;
	uint32_t base = vsec_out[s0->vbase_idx], n = 0;
	int rc = 0;

	if (base == UINT32_MAX)
		rc = merge_values(m, t, s0->vbase_idx, &vsec_out[s0->vbase_idx], diag);
	if (rc < 0)
		return rc;
	base = vsec_out[s0->vbase_idx];
	for (uint32_t i = first; i < t->n_streams; i++)
		n += t->streams[i].vsec_idx == s0->vsec_idx;
	buf_init(&b);
	rc = buf_put_varint(&b, base);
	if (rc == 0)
		rc = buf_put_varint(&b, n);
	for (uint32_t i = first; i < t->n_streams && rc == 0; i++) {
		const struct tstream *s = &t->streams[i];

		if (s->vsec_idx != s0->vsec_idx)
			continue;
		rc = vpatch_write(&b, s->patch, p1, p2);
		p2 = p1;
		p1 = s->patch;
	}
	vsec_out[s0->vsec_idx] = m->cw.n;
	if (rc == 0)
		rc = add_section(m, SEC_VPATCH, b.data, b.len);
	buf_fini(&b);
	return rc;
}

/* Streams and phases of input @t, each stream with its grammar (placed here, twins applied). */
static int merge_streams(struct mg *m, const struct tfs_trace *t, uint32_t base,
			 struct inmap *im, struct tfs_diag *diag)
{
	uint32_t first = m->n_streams;
	uint32_t *vsec_out = malloc((t->cf.n + 1) * sizeof(*vsec_out)); /* input -> output */
	int rc = 0;

	if (!vsec_out)
		return -ENOMEM;
	for (uint32_t i = 0; i <= t->cf.n; i++)
		vsec_out[i] = UINT32_MAX;
	rc = merge_grow((void **)&m->streams, &m->streams_cap,
			(uint64_t)m->n_streams + t->n_streams, sizeof(*m->streams));
	for (uint32_t i = 0; i < t->n_streams && rc == 0; i++) {
		const struct tstream *s = &t->streams[i];
		struct sx_stream *o = &m->streams[m->n_streams];

		if (s->vsec_idx < t->cf.n && vsec_out[s->vsec_idx] == UINT32_MAX) {
			if (t->cf.ents[s->vsec_idx].type == SEC_VPATCH)
				rc = merge_vpatch(m, t, i, vsec_out, diag);
			else
				rc = merge_values(m, t, s->vsec_idx, &vsec_out[s->vsec_idx], diag);
		}
		if (rc == 0)
			rc = find_twins(m, t, base, im, s);
		if (rc == 1) {
			rc = place_grammar(m, t, s->gsec, im->twin_map, &o->gsec, diag);
			twins_undo(im);
		} else if (rc == 0) {
			if (im->gsec_out[s->gsec] == UINT32_MAX)
				rc = place_grammar(m, t, s->gsec, im->term_map,
						   &im->gsec_out[s->gsec], diag);
			o->gsec = im->gsec_out[s->gsec];
		}
		o->rank = base + s->rank;
		o->thread = s->thread;
		o->n_events = s->n_events;
		o->vsec = vsec_out[s->vsec_idx < t->cf.n ? s->vsec_idx : t->cf.n];
		m->n_streams++;
	}
	free(vsec_out);
	if (rc == 0)
		rc = merge_grow((void **)&m->phases, &m->phases_cap,
				(uint64_t)m->n_phases + t->n_phases, sizeof(*m->phases));
	for (uint32_t i = 0; i < t->n_phases && rc == 0; i++) {
		const struct tphase *p = &t->phases[i];

		m->phases[m->n_phases++] =
		    (struct sx_phase){t->phase_names + p->name_off, first + p->stream, p->first, p->n};
	}
	return rc;
}

/* The backtraces and symbols of @t's ranks, re-based by @base (FORMAT.md §8 rank table). */
static int merge_stacks(struct mg *m, const struct tfs_trace *t, uint32_t base,
			struct tfs_diag *diag)
{
	int rc = merge_grow((void **)&m->ranks, &m->ranks_cap,
			    (uint64_t)m->n_ranks_bt + t->n_rank_ents, sizeof(*m->ranks));

	for (uint32_t i = 0; i < t->n_rank_ents && rc == 0; i++) {
		const struct trank *e = &t->ranks[i];
		struct sx_rank o = {base + e->rank, UINT32_MAX, UINT32_MAX, e->n_bt};

		if (e->bt_sec < t->cf.n)
			rc = merge_values(m, t, e->bt_sec, &o.bt_sec, diag);
		if (rc == 0 && e->sym_sec < t->cf.n)
			rc = merge_values(m, t, e->sym_sec, &o.sym_sec, diag);
		if (rc == 0)
			m->ranks[m->n_ranks_bt++] = o;
	}
	return rc;
}

/* The names one table of @t gives (FORMAT.md §12), as one table of the output. */
static int merge_name_table(struct mg *m, const struct tfs_trace *t, uint32_t tb, uint32_t *out)
{
	const struct name_table *x = &t->names.tables[tb];
	const struct name_table *b = x->base != NAMES_NO_BASE ? &t->names.tables[x->base] : NULL;
	uint64_t most = (uint64_t)x->n + (b ? b->n : 0);
	const struct name_ent *e;
	struct names_iter it;
	uint32_t n = 0;
	int rc = merge_grow((void **)&m->name_in, &m->name_in_cap, most, sizeof(*m->name_in));

	if (rc < 0)
		return rc;
	names_iter_init(&it, t->names.tables, tb);
	while ((e = names_iter_next(&it)))
		m->name_in[n++] =
		    (struct name_in){t->names.classes[e->cls], e->id, e->name, e->len};
	return names_enc_table(&m->names, m->name_in, n, out);
}

/*
 * The names of @t's ranks, re-based by @base: each table of @t becomes a table of the
 * output once (an equal one of an earlier input, or a new one), its runs follow.
 */
static int merge_names(struct mg *m, const struct tfs_trace *t, uint32_t base)
{
	uint32_t *out = malloc((t->names.n_tables + 1) * sizeof(*out));
	int rc = out ? 0 : -ENOMEM;

	for (uint32_t i = 0; i < t->names.n_tables && out; i++)
		out[i] = UINT32_MAX;
	for (uint32_t i = 0; i < t->names.n_runs && rc == 0; i++) {
		const struct name_run *r = &t->names.runs[i];

		if (out[r->table] == UINT32_MAX)
			rc = merge_name_table(m, t, r->table, &out[r->table]);
		if (rc == 0)
			rc = names_enc_run(&m->names, base + r->first, r->n, out[r->table]);
	}
	free(out);
	/* -EINVAL: inputs were checked at open, so only an overflow of the ranks is left */
	return rc;
}

/* ---- the tables written last ---- */

static int write_tables(struct mg *m, int timing, double rel_err)
{
	/* the streams section is the last one: the section count is this one's index + 1 */
	static const uint32_t order[] = {SEC_META,	SEC_SCHEMA, SEC_STRINGS, SEC_CST,
					 SEC_ARGFLAGS,	SEC_NAMES,  SEC_STREAMS};
	struct sx_table sx = {.n_ranks = m->n_ranks, .max_thread = m->max_thread,
			      .timing = timing, .rel_err = rel_err, .max_ts = m->max_ts,
			      .max_dur = m->max_dur, .streams = m->streams,
			      .n_streams = m->n_streams, .phases = m->phases,
			      .n_phases = m->n_phases, .ranks = m->ranks,
			      .n_ranks_bt = m->n_ranks_bt};
	const struct tables t = {.meta = m->meta.kv, .n_meta = m->meta.n, .schema = &m->schema,
				 .strs = &m->strs, .sigs = &m->sigs, .sig_kind = m->g_kind,
				 .sig_woff = m->g_woff, .widths = m->g_widths.data,
				 .names = &m->names, .streams = &sx};
	struct tfs_buf b;
	int rc = 0;

	buf_init(&b);
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]) && rc == 0; i++) {
		b.len = 0;
		sx.n_sect = m->cw.n + 1;
		rc = tables_encode(&t, order[i], &b);
		if (rc == 1)
			rc = add_section(m, (uint16_t)order[i], b.data, b.len);
	}
	buf_fini(&b);
	return rc;
}

/* ---- one input ---- */

/* First pass over input @t: its kinds, strings and signatures into the merged tables. */
static int map_input(struct mg *m, const struct tfs_trace *t, uint32_t base, struct inmap *im,
		     struct tfs_diag *diag)
{
	int rc;

	im->kind_map = malloc((t->schema.n_kinds + 1) * sizeof(uint32_t));
	im->str_map = malloc((t->n_strs + 1) * sizeof(uint32_t));
	im->term_map = malloc((t->n_terms + 1) * sizeof(uint32_t));
	im->ranked = malloc((t->n_terms + 1) * sizeof(bool));
	im->gsec_out = malloc((t->n_gsecs + 1) * sizeof(uint32_t));
	if (!im->kind_map || !im->str_map || !im->term_map || !im->ranked || !im->gsec_out)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->n_gsecs; i++)
		im->gsec_out[i] = UINT32_MAX;
	rc = map_kinds(m, t, im->kind_map);
	if (rc == 0)
		rc = map_strings(m, t, im->str_map);
	if (rc == 0)
		rc = map_terms(m, t, base, im, diag);
	return rc;
}

/* Second pass, once every input's signatures are known: grammars, streams, stacks, meta. */
static int place_input(struct mg *m, const struct tfs_trace *t, uint32_t base, struct inmap *im,
		       struct tfs_diag *diag)
{
	int rc = merge_streams(m, t, base, im, diag);

	if (rc == 0)
		rc = merge_stacks(m, t, base, diag);
	if (rc == 0)
		rc = merge_names(m, t, base);
	if (rc == 0)
		rc = mmeta_add(&m->meta, t->meta, t->n_meta, t->n_ranks, base, diag);
	return rc;
}

static void inmap_free(struct inmap *im)
{
	free(im->kind_map);
	free(im->str_map);
	free(im->term_map);
	free(im->ranked);
	free(im->gsec_out);
	free(im->twin_map);
	free(im->seen);
	free(im->used);
	free(im->gterms);
	free(im->terms);
}

static const char *timing_name(int timing)
{
	return timing == TFS_TIMING_NONE    ? "none"
	       : timing == TFS_TIMING_LOSSY ? "lossy"
					    : "lossless";
}

static int check_inputs(struct tfs_trace *const *in, uint32_t n, struct tfs_diag *diag)
{
	uint64_t ranks = 0;

	if (n == 0)
		return diag_set(diag, -EINVAL, 0, "streams", "nothing to merge");
	for (uint32_t i = 0; i < n; i++) {
		if (in[i]->timing != in[0]->timing ||
		    (in[0]->timing == TFS_TIMING_LOSSY && in[i]->rel_err != in[0]->rel_err))
			return diag_set(diag, -EINVAL, 0, "streams",
					"input %u: timing %s (error %g) differs from the first "
					"input's %s (error %g)",
					i, timing_name(in[i]->timing), in[i]->rel_err,
					timing_name(in[0]->timing), in[0]->rel_err);
		ranks += in[i]->n_ranks;
	}
	if (ranks > UINT32_MAX)
		return diag_set(diag, -EINVAL, 0, "streams", "%llu ranks in all: too many",
				(unsigned long long)ranks);
	return 0;
}

int tfs_merge_traces(struct tfs_trace *const *in, uint32_t n, void **out, size_t *len,
		     struct tfs_diag *diag)
{
	return tfs_merge_traces_opts(in, n, NULL, out, len, diag);
}

int tfs_merge_traces_opts(struct tfs_trace *const *in, uint32_t n,
			  const struct tfs_merge_opts *opts, void **out, size_t *len,
			  struct tfs_diag *diag)
{
	struct inmap *ims;
	struct mg m;
	uint32_t base = 0;
	int rc;

	*out = NULL;
	*len = 0;
	if (diag)
		memset(diag, 0, sizeof(*diag));
	rc = check_inputs(in, n, diag);
	if (rc < 0)
		return rc;
	ims = calloc(n + 1, sizeof(*ims));
	if (!ims)
		return -ENOMEM;
	mg_init(&m);
	m.meta.first_only = opts ? opts->first_only_keys : NULL;
	m.rewrite_grammars = opts && opts->rewrite_grammars;
	rc = ctr_writer_init_mem(&m.cw, &m.out, MERGE_LEVEL);
	m.cw.large_bytes = MERGE_LARGE_BYTES;
	m.cw.large_level = MERGE_LARGE_LEVEL;
	/* every signature first: a stream's twins may come from any input (find_twins) */
	for (uint32_t i = 0; i < n && rc == 0; i++) {
		rc = map_input(&m, in[i], base, &ims[i], diag);
		if (rc < 0)
			rc = in_fail(diag, i, rc);
		base += in[i]->n_ranks;
	}
	base = 0;
	for (uint32_t i = 0; i < n && rc == 0; i++) {
		const struct tfs_trace *t = in[i];

		rc = place_input(&m, t, base, &ims[i], diag);
		if (rc < 0) {
			rc = in_fail(diag, i, rc);
			break;
		}
		base += t->n_ranks;
		m.max_thread = t->max_thread > m.max_thread ? t->max_thread : m.max_thread;
		m.max_ts = t->max_ts > m.max_ts ? t->max_ts : m.max_ts;
		m.max_dur = t->max_dur > m.max_dur ? t->max_dur : m.max_dur;
	}
	for (uint32_t i = 0; i < n; i++)
		inmap_free(&ims[i]);
	free(ims);
	m.n_ranks = base;
	if (rc == 0)
		rc = write_tables(&m, in[0]->timing, in[0]->rel_err);
	if (rc == 0)
		rc = ctr_finish(&m.cw);
	if (rc == 0) {
		*out = m.out.data;
		*len = m.out.len;
		buf_init(&m.out);
	}
	mg_fini(&m);
	return rc;
}
