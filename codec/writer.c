/*
 * The trace writer: per-stream online compression (local call-signature table and string
 * table, Sequitur grammar blocks under a memory budget, value/timing streams) and, at save,
 * the merge of every stream's local tables into one CST and string table, the renumbering
 * of grammars, the sharing of identical streams and the container write. Appends to one
 * stream take no lock and touch nothing shared. It does not render or read traces.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "container_i.h"
#include "grammar_i.h"
#include "intern_i.h"
#include "schema_i.h"
#include "tfs/writer.h"
#include "values_i.h"
#include "writer_i.h"

/*
 * A stream's grammar builder (nodes, rules, digram index) is cut into a new block past this:
 * 2 MiB keeps its random accesses within a core's L2 cache. Recording cc1 (3.7 million
 * events, an irregular stream) took 6.6% less CPU in all than at 16 MiB, where the builder's
 * misses beside the traced program cost most, for a 0.6% larger trace; streams whose
 * grammar stays smaller (loops, MPI codes, the allocation and I/O benchmarks) are unchanged.
 */
#define DEFAULT_GRAMMAR_BUDGET ((size_t)2 << 20)

static int grow(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	uint32_t n = *cap ? *cap : 8;
	void *p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	p = realloc(*arr, (size_t)n * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = n;
	return 0;
}

int tfs_writer_new(const struct tfs_writer_opts *opts, struct tfs_writer **out)
{
	struct tfs_writer *w;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	if (opts)
		w->opts = *opts;
	else
		w->opts.timing = TFS_TIMING_LOSSLESS;
	if (w->opts.timing < TFS_TIMING_NONE || w->opts.timing > TFS_TIMING_LOSSY ||
	    (w->opts.timing == TFS_TIMING_LOSSY &&
	     !(w->opts.rel_err > 0 && w->opts.rel_err < 1)) ||
	    w->opts.block_events > VAL_MAX_BLOCK_EVENTS || w->opts.values_save_level < 0 ||
	    (w->opts.timing_coder != TFS_CODER_AUTO && w->opts.timing_coder != TFS_CODER_FAST) ||
	    w->opts.values_save_level > 22) {
		free(w);
		return -EINVAL;
	}
	if (!w->opts.grammar_budget)
		w->opts.grammar_budget = DEFAULT_GRAMMAR_BUDGET;
	if (w->opts.timing != TFS_TIMING_LOSSY)
		w->opts.rel_err = 0;
	schema_init(&w->schema);
	wnames_init(&w->names);
	*out = w;
	return 0;
}

static void wstream_free(struct tfs_wstream *s)
{
	if (!s)
		return;
	intern_fini(&s->sigs);
	intern_fini(&s->strs);
	free(s->term_kind);
	free(s->term_woff);
	buf_fini(&s->widths);
	gbuild_free(s->gb);
	buf_fini(&s->blocks);
	venc_free(s->venc);
	buf_fini(&s->sig);
	free(s);
}

void tfs_writer_free(struct tfs_writer *w)
{
	if (!w)
		return;
	for (uint32_t i = 0; i < w->n_streams; i++)
		wstream_free(w->streams[i]);
	free(w->streams);
	for (uint32_t i = 0; i < 2 * w->n_meta; i++)
		free(w->meta[i]);
	free(w->meta);
	for (uint32_t i = 0; i < w->n_phases; i++)
		free(w->phases[i].name);
	free(w->phases);
	wranks_free(w);
	wnames_fini(&w->names);
	schema_fini(&w->schema);
	free(w);
}

int tfs_writer_add_kind(struct tfs_writer *w, const struct tfs_kind_desc *kind,
			uint32_t *kind_out)
{
	/* kinds are fixed once streams exist (appends stay lock-free) unless the caller
	 * serialises them with its appends */
	if (w->n_streams && !w->opts.late_kinds)
		return -EINVAL;
	return schema_add(&w->schema, kind, kind_out);
}

void tfs_writer_skip_recompress(struct tfs_writer *w)
{
	w->skip_recompress = true;
}

void tfs_writer_cap_recompress(struct tfs_writer *w, int level)
{
	w->recompress_cap = level > 0 ? level : 0;
}

void tfs_writer_merge_input(struct tfs_writer *w)
{
	w->merge_input = true;
}

int tfs_writer_set_meta(struct tfs_writer *w, const char *key, const char *value)
{
	char *k, *v;

	if (strlen(key) > MAX_STR_BYTES || strlen(value) > MAX_STR_BYTES)
		return -EINVAL;
	v = strdup(value);
	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < w->n_meta; i++) {
		if (strcmp(w->meta[2 * i], key) == 0) {
			free(w->meta[2 * i + 1]);
			w->meta[2 * i + 1] = v;
			return 0;
		}
	}
	k = strdup(key);
	if (!k || grow((void **)&w->meta, &w->meta_cap, 2 * (w->n_meta + 1), sizeof(char *))) {
		free(k);
		free(v);
		return -ENOMEM;
	}
	w->meta[2 * w->n_meta] = k;
	w->meta[2 * w->n_meta + 1] = v;
	w->n_meta++;
	return 0;
}

int tfs_writer_stream_new(struct tfs_writer *w, uint32_t rank, uint32_t thread,
			  struct tfs_wstream **out)
{
	struct venc_opts vo = {
		.block_events = w->opts.block_events,
		.timing = w->opts.timing,
		.rel_err = w->opts.rel_err,
		.zstd_level = w->opts.zstd_level,
		.final_level = w->opts.values_save_level,
		.coded = w->opts.timing_coder == TFS_CODER_FAST ? VAL_CODED_NEVER : 0,
	};
	struct tfs_wstream *s;
	int rc;

	*out = NULL;
	for (uint32_t i = 0; i < w->n_streams; i++)
		if (w->streams[i]->rank == rank && w->streams[i]->thread == thread)
			return -EEXIST;
	if (grow((void **)&w->streams, &w->streams_cap, w->n_streams + 1, sizeof(*w->streams)))
		return -ENOMEM;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->w = w;
	s->rank = rank;
	s->thread = thread;
	intern_init(&s->sigs);
	intern_init(&s->strs);
	buf_init(&s->widths);
	buf_init(&s->blocks);
	buf_init(&s->sig);
	s->gb = gbuild_new();
	rc = s->gb ? venc_new(&vo, &s->venc) : -ENOMEM;
	if (rc < 0) {
		wstream_free(s);
		return rc;
	}
	w->streams[w->n_streams++] = s;
	*out = s;
	return 0;
}

uint64_t tfs_wstream_n_events(const struct tfs_wstream *s)
{
	return s->n_events;
}

/* Characters a VAL field prints in every view (FORMAT.md §9). */
static unsigned int val_width(uint8_t type, uint64_t v)
{
	switch (type) {
	case TFS_TYPE_I64:
		if ((int64_t)v < 0)
			return 1 + dec_digits(-(uint64_t)v);
		return dec_digits(v);
	case TFS_TYPE_HEX:
		return 2 + (v ? (unsigned int)(64 - __builtin_clzll(v) + 3) / 4 : 1);
	default:
		return dec_digits(v);
	}
}

/*
 * Whether val_width(@type, @v) > @w, without counting digits: the common case is a value
 * no wider than the widest of its field so far.
 */
static bool wider(uint8_t type, uint64_t v, unsigned int w)
{
	static const uint64_t pow10[20] = {
	    1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000,
	    10000000000u, 100000000000u, 1000000000000u, 10000000000000u, 100000000000000u,
	    1000000000000000u, 10000000000000000u, 100000000000000000u, 1000000000000000000u,
	    10000000000000000000u,
	};

	if (w == 0 || type == TFS_TYPE_HEX)
		return val_width(type, v) > w;
	if (type == TFS_TYPE_I64 && (int64_t)v < 0) {
		v = -v;
		w--; /* the sign */
	}
	return w == 0 || (w < 20 && v >= pow10[w]);
}

/* One varint of the signature being built: room was reserved. */
static inline void sig_put(struct tfs_wstream *s, uint64_t v)
{
	s->sig.len += varint_store(s->sig.data + s->sig.len, v);
}

/* Encode the signature of one event into s->sig; VAL fields go to @vals, their types to
 * @vtype. */
static int encode_sig(struct tfs_wstream *s, const struct schema_kind *k, uint32_t kind,
		      const union tfs_arg *args, uint64_t *vals, uint8_t *vtype)
{
	uint32_t nv = 0;
	int rc;

	s->sig.len = 0;
	/* a varint for the kind and for each argument */
	rc = buf_reserve(&s->sig, (size_t)(1 + k->n_args) * 10);
	if (rc < 0)
		return rc;
	sig_put(s, kind);
	for (uint32_t i = 0; i < k->n_args; i++) {
		const struct schema_arg *a = &k->args[i];
		uint64_t v = args[i].u;
		uint32_t sid;
		bool is_new;

		switch (a->enc) {
		case TFS_ENC_SIG:
			sig_put(s, a->type == TFS_TYPE_I64 ? zigzag_enc(args[i].i) : v);
			break;
		case TFS_ENC_SYM:
			sig_put(s, v);
			break;
		case TFS_ENC_RANK:
			if (!rank_word_enc(args[i].i, s->rank, &v))
				return -EINVAL;
			sig_put(s, v);
			break;
		case TFS_ENC_RVAL:
			if (!rval_word_enc(args[i].u, s->rank, &v))
				return -EINVAL;
			sig_put(s, v);
			break;
		case TFS_ENC_STR: {
			size_t n = args[i].s ? strlen(args[i].s) : 0;

			if (n > MAX_STR_BYTES)
				return -EINVAL;
			rc = intern_get(&s->strs, args[i].s ? args[i].s : "", n, &sid, &is_new);
			if (rc < 0)
				return rc;
			sig_put(s, sid);
			break;
		}
		default: /* TFS_ENC_VAL */
			vals[nv] = v;
			vtype[nv++] = a->type;
			break;
		}
	}
	return 0;
}

static int reserve_terms(struct tfs_wstream *s, uint32_t need)
{
	uint32_t cap = s->term_cap ? s->term_cap : 64;
	uint32_t *k, *o;

	if (need <= s->term_cap)
		return 0;
	while (cap < need)
		cap *= 2;
	k = realloc(s->term_kind, (size_t)cap * sizeof(*k));
	if (!k)
		return -ENOMEM;
	s->term_kind = k;
	o = realloc(s->term_woff, (size_t)cap * sizeof(*o));
	if (!o)
		return -ENOMEM;
	s->term_woff = o;
	s->term_cap = cap;
	return 0;
}

/* Close the current grammar block and start a fresh builder (its memory is released: the
 * budget bounds what a stream holds, and a reset builder would keep its peak size). */
static int flush_block(struct tfs_wstream *s)
{
	struct tfs_gbuild *fresh = gbuild_new();
	size_t len = s->blocks.len;
	int rc;

	if (!fresh)
		return -ENOMEM;
	rc = buf_put_varint(&s->blocks, gbuild_n_events(s->gb));
	if (rc == 0)
		rc = gbuild_export(s->gb, &s->blocks);
	if (rc < 0) {
		s->blocks.len = len;
		gbuild_free(fresh);
		return rc;
	}
	s->n_blocks++;
	gbuild_free(s->gb);
	s->gb = fresh;
	return 0;
}

int tfs_wstream_append(struct tfs_wstream *s, uint32_t kind, uint64_t ts_ns, uint64_t dur_ns,
		       const union tfs_arg *args)
{
	uint64_t vals[TFS_MAX_ARGS];
	uint8_t vtype[TFS_MAX_ARGS];
	const struct schema_kind *k;
	struct sig_memo *memo;
	uint32_t t;
	bool is_new;
	uint8_t *tw;
	int rc;

	if (s->err)
		return s->err;
	if (s->w->saved)
		return -EALREADY;
	if (kind >= s->w->schema.n_kinds)
		return -EINVAL;
	k = &s->w->schema.kinds[kind];
	rc = encode_sig(s, k, kind, args, vals, vtype);
	if (rc < 0)
		return rc;
	/* room for a new terminal first, so that interning never leaves it half-recorded */
	rc = reserve_terms(s, s->sigs.n + 1);
	if (rc < 0)
		return rc;
	rc = buf_reserve(&s->widths, k->n_vals);
	if (rc < 0)
		return rc;
	memo = &s->memo[kind % SIG_MEMO];
	if (memo->len == s->sig.len && bytes_eq(memo->sig, s->sig.data, s->sig.len)) {
		t = memo->t;
		is_new = false;
	} else {
		rc = intern_get(&s->sigs, s->sig.data, s->sig.len, &t, &is_new);
		if (rc < 0)
			return rc;
		if (s->sig.len <= SIG_MEMO_BYTES) {
			memcpy(memo->sig, s->sig.data, s->sig.len);
			memo->len = (uint32_t)s->sig.len;
			memo->t = t;
		}
	}
	if (t >= GRAM_MAX_TERMINAL)
		return -E2BIG;
	if (is_new) {
		s->term_kind[t] = kind;
		s->term_woff[t] = (uint32_t)s->widths.len;
		if (k->n_vals) {
			memset(s->widths.data + s->widths.len, 0, k->n_vals);
			s->widths.len += k->n_vals;
		}
	}
	rc = gbuild_append(s->gb, t);
	if (rc < 0)
		return rc;
	rc = venc_add_cls(s->venc, t, ts_ns, dur_ns, vals, k->n_vals, k->vcls);
	if (rc < 0)
		return s->err = rc; /* the grammar holds the event already */
	tw = s->widths.data + s->term_woff[t];
	for (uint32_t i = 0; i < k->n_vals; i++)
		if (wider(vtype[i], vals[i], tw[i]))
			tw[i] = (uint8_t)val_width(vtype[i], vals[i]);
	if (ts_ns > s->max_ts)
		s->max_ts = ts_ns;
	if (dur_ns > s->max_dur)
		s->max_dur = dur_ns;
	s->n_events++;
	if (gbuild_mem_bytes(s->gb) > s->w->opts.grammar_budget) {
		rc = flush_block(s);
		if (rc < 0)
			return s->err = rc;
	}
	return 0;
}

int tfs_writer_add_phase(struct tfs_writer *w, const char *name, uint32_t rank,
			 uint32_t thread, uint64_t first_event, uint64_t n_events)
{
	struct phase *p;
	uint64_t end;

	for (uint32_t i = 0; i < w->n_streams; i++) {
		struct tfs_wstream *s = w->streams[i];

		if (s->rank != rank || s->thread != thread)
			continue;
		if (!add_u64(first_event, n_events, &end) || end > s->n_events ||
		    strlen(name) > MAX_STR_BYTES)
			return -EINVAL;
		if (grow((void **)&w->phases, &w->phases_cap, w->n_phases + 1, sizeof(*p)))
			return -ENOMEM;
		p = &w->phases[w->n_phases];
		p->name = strdup(name);
		if (!p->name)
			return -ENOMEM;
		p->stream = i;
		p->first = first_event;
		p->n = n_events;
		w->n_phases++;
		return 0;
	}
	return -ENOENT;
}


bool wstream_has_values(const struct tfs_wstream *s)
{
	if (s->w->opts.timing != TFS_TIMING_NONE)
		return true;
	for (uint32_t t = 0; t < s->sigs.n; t++)
		if (s->w->schema.kinds[s->term_kind[t]].n_vals)
			return true;
	return false;
}

int wstream_import_block(struct tfs_wstream *s, const uint8_t *block, size_t len)
{
	struct tfs_grammar g;
	struct tfs_rd r;
	uint64_t total;
	int rc;

	if (s->err)
		return s->err;
	if (wstream_has_values(s))
		return -EINVAL;
	rd_init(&r, block, len, 0, "grammar", NULL);
	rc = grammar_parse(&r, s->sigs.n, &g);
	if (rc < 0)
		return rc == -ENOMEM ? rc : -EINVAL;
	if (rd_left(&r) || !add_u64(s->n_events, g.n_events, &total) || total > GRAM_MAX_EVENTS)
		rc = -EINVAL;
	if (rc == 0 && g.n_events == 0) {
		/* FORMAT.md §6: only a lone block may be empty, and an empty stream exports one */
		grammar_fini(&g);
		return 0;
	}
	if (rc == 0 && gbuild_n_events(s->gb))
		rc = flush_block(s);
	if (rc == 0)
		rc = buf_put_varint(&s->blocks, g.n_events);
	if (rc == 0)
		rc = buf_put(&s->blocks, block, len);
	if (rc == 0) {
		s->n_blocks++;
		s->n_events = total;
	}
	grammar_fini(&g);
	return rc;
}
