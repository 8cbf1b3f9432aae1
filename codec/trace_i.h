/*
 * Reader internals shared by reader.c (open, tables, info, verify), layout.c (per-rule
 * event counts and view byte lengths), render.c (one event to one line) and cursor.c
 * (random access). An opened trace is immutable: every field is written during open only,
 * except the lazily decoded backtraces and symbols (struct trank), under lazy_lock.
 */
#ifndef TFS_TRACE_I_H
#define TFS_TRACE_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <stdbool.h>

#include "container_i.h"
#include "grammar_i.h"
#include "names_i.h"
#include "schema_i.h"
#include "symtab_i.h"
#include "tfs/reader.h"
#include "values_i.h"
#include "vcache_i.h"
#include "vpatch_i.h"

/* Rule bodies at least this long get prefix sums for binary search. */
#define LAYOUT_PREFIX_MIN 16

/* Per block of a grammar section: per-rule view lengths and body prefix sums. */
struct block_layout {
	uint64_t *rule_bytes[TFS_VIEW_COUNT]; /* [n_rules] */
	/* [n_elems] over all rules, for rules with n_elems >= LAYOUT_PREFIX_MIN (else unused):
	 * events / bytes before element i within its rule body */
	uint64_t *pfx_events;
	uint64_t *pfx_bytes[TFS_VIEW_COUNT];
};

/* A distinct grammar section, shared by the streams that have identical content. */
struct gsec {
	uint32_t sec;	 /* section table index */
	bool needs_values; /* timed, or some terminal it uses has a VAL argument (FORMAT.md §8) */
	uint32_t n_blocks;
	struct tfs_grammar *blocks;
	struct block_layout *layout;
	uint64_t *blk_events; /* [n_blocks + 1] prefix */
	uint64_t *blk_bytes[TFS_VIEW_COUNT]; /* [n_blocks + 1] prefix */
	uint32_t height;      /* max over blocks */
	uint32_t n_rules;     /* over blocks */
	/* [n_kinds] each kind's layout (kindex.c), built at its first use under lazy_lock; the
	 * array too: NULL until then */
	_Atomic(_Atomic(struct kindex *) *) kidx;
};

/*
 * One kind's layout in a grammar section (kindex.c): layout.c's sums restricted to the
 * events of that kind. Arrays over all blocks' rules and elements: block b's rule r is
 * entry rule_base[b] + r, its element i entry elem_base[b] + i.
 */
struct kindex {
	uint32_t kind;
	uint8_t *terms;			      /* [n_terms] the terminals it counts (nonzero),
					       * or NULL: those of @kind (kindex_new_terms()) */
	uint32_t *rule_base;		      /* [n_blocks] */
	uint64_t *elem_base;		      /* [n_blocks] */
	uint64_t *rule_events;		      /* [n_rules] events of the kind in each rule */
	uint64_t *rule_bytes[TFS_VIEW_COUNT]; /* [n_rules] their lines' bytes */
	/* [n_elems] for rules with n_elems >= LAYOUT_PREFIX_MIN (NULL when the section has
	 * none): the kind's events / bytes before element i within its rule body */
	uint64_t *pfx_events;
	uint64_t *pfx_bytes[TFS_VIEW_COUNT];
	uint64_t *blk_events;		      /* [n_blocks + 1] prefix */
	uint64_t *blk_bytes[TFS_VIEW_COUNT];  /* [n_blocks + 1] prefix */
};

/* A rendering template segment (render.c): constant text or a per-occurrence hole. */
enum {
	SEG_END,	/* closes a terminal's template */
	SEG_TEXT,	/* @len constant bytes at tmpl_text + @a */
	SEG_TS_TEXT,	/* start time as seconds.nanoseconds, seconds right-aligned */
	SEG_DUR_TEXT,	/* duration, right-aligned */
	SEG_THREAD_PAD, /* thread, left-aligned */
	SEG_TS,		/* start time, natural decimal */
	SEG_DUR,
	SEG_THREAD,
	SEG_RANK,	/* the stream's rank */
	SEG_TS_US,	/* microseconds with three decimals */
	SEG_DUR_US,
	SEG_INDEX_US,	/* the event's index as microseconds (untimed Chrome view) */
	SEG_VAL,	/* VAL field @val of @type, JSON style if @json */
	SEG_RANK_ARG,	/* RANK argument, relative word @a */
	SEG_NAME,	/* the name of id @a of names class @val (UINT32_MAX: none), else the
			 * @flen bytes at tmpl_text + @len ("file#3"), JSON style if @json */
	SEG_SYMNAME,	/* a symbol's or value's name (rargs.c, mode @type) of @a in class @val,
			 * else the @flen bytes at tmpl_text + @len, quoted if @json */
	SEG_BUF,	/* a buffer (FORMAT.md §9.3) of VAL fields @val (id) and @a (offset) */
};

struct tmpl_seg {
	uint8_t kind, type, json;
	uint16_t flen;
	uint32_t val;
	uint64_t a, len;
};

/*
 * A template as render_line_fast() runs it: the constant text before a hole, then the hole
 * (SEG_END: none, the line's text is done). One step per hole instead of one per segment.
 */
struct fast_op {
	const char *text; /* in tmpl_text, readable for FAST_SLACK bytes past @text_len */
	uint64_t text_len;
	uint64_t a;	  /* the hole's tmpl_seg fields, copied for the usual holes */
	const struct tmpl_seg *seg;
	uint32_t val;
	uint8_t kind, type, json; /* kind: SEG_*, or render.c's OP_VAL_* for a SEG_VAL */
};

/*
 * A stream (FORMAT.md §8). Kept small, 40 bytes: a merged job of 10^6 ranks has 10^6 of
 * them, and whatever streams share (grammar, values, names) lives once elsewhere.
 */
struct tstream {
	uint64_t n_events;
	uint32_t rank, thread;
	uint32_t gsec;	    /* index into tfs_trace.gsecs */
	uint32_t vsec_idx;  /* section table index of its values (or of its vpatch section);
			     * cf.n: none */
	uint32_t vbase_idx; /* section table index of the values it decodes (patched or not);
			     * cf.n: none */
	uint32_t same_as;
	struct vpatch_list *patch; /* words replaced in the shared values (FORMAT.md §8.1), or
				    * NULL: none */
};

struct tphase {
	uint64_t name_off; /* its NUL-terminated name at tfs_trace.phase_names + name_off */
	uint32_t stream;
	uint64_t first, n;
};

/*
 * The backtraces and symbols of one rank (FORMAT.md §8 rank table, §10, §11). The section
 * indices and count are set at open; the rest is decoded on first use under
 * tfs_trace.lazy_lock and immutable afterwards.
 */
struct trank {
	uint32_t rank;
	uint32_t bt_sec, sym_sec; /* section table index, or cf.n for none */
	uint64_t n_bt;
	int bt_state;		  /* 0 not decoded, 1 decoded, -TFS_ECORRUPT (sticky, bt_diag) */
	struct tfs_diag bt_diag;
	uint64_t *bt_first;	  /* [n_bt + 1]: backtrace i is bt_frames[bt_first[i]..] */
	uint64_t *bt_frames;
	int sym_state;		  /* as bt_state */
	struct tfs_diag sym_diag;
	struct symtab sym;
};

struct tfs_trace {
	int fd;
	const uint8_t *map; /* the file mapped (fd >= 0), or the caller's buffer (fd < 0) */
	uint64_t size;
	struct timespec mtime; /* the file's at open (tfs_trace_file_changed) */
	struct ctr_file cf;
	char **meta; /* key, value pairs, NUL-terminated copies */
	uint32_t n_meta;
	struct tfs_schema schema;
	char **strs;	   /* string table, NUL-terminated copies */
	uint32_t *str_len; /* their lengths (they may hold NUL bytes) */
	uint32_t n_strs;
	/* CST: terminal t has kind term_kind[t] and argument words term_arg[term_argoff[t]..]
	 * (SIG/SYM value, RANK word as format 1.1 has it (§5.2), string index, or VAL width) */
	uint32_t n_terms;
	uint32_t *term_kind;
	uint32_t *term_argoff;
	uint64_t *term_arg;
	uint8_t *term_nvals;
	/* VAL classes (FORMAT.md §7.3.1): field j of terminal t has class
	 * vcls[term_vcls_off[t] + j], kind k's at vcls[k * TFS_MAX_ARGS] */
	uint32_t *term_vcls_off;
	uint8_t *vcls;
	uint64_t *term_len[TFS_VIEW_COUNT]; /* rendered line length per terminal */
	uint64_t *term_room[TFS_VIEW_COUNT]; /* bytes render_line_fast() may touch per terminal */
	/* line templates: terminal i's segments are segs[v][tmpl_first[v][i]..] up to SEG_END;
	 * the text view's made at open, the others' at their first use (render_view_ready) */
	_Atomic bool view_ready[TFS_VIEW_COUNT];
	struct tmpl_seg *segs[TFS_VIEW_COUNT];
	uint32_t *tmpl_first[TFS_VIEW_COUNT];
	char *tmpl_text[TFS_VIEW_COUNT];
	/* the same templates as render_line_fast() runs them: terminal i's from
	 * fops[v][fop_first[v][i]] up to the one of kind SEG_END */
	struct fast_op *fops[TFS_VIEW_COUNT];
	uint32_t *fop_first[TFS_VIEW_COUNT];
	/* trace header (FORMAT.md §8) and the column widths derived from it (§9) */
	uint32_t n_ranks, max_thread;
	int timing;
	double rel_err;
	uint64_t max_ts, max_dur;
	unsigned int w_sec, w_dur, w_thread, w_ts_json, w_rank, w_index;
	struct tstream *streams;
	uint32_t n_streams;
	uint32_t *by_rank;	/* stream indices in (rank, thread) order; NULL: the file's order
				 * is that order (the usual case) */
	uint64_t n_events;	/* over all streams */
	uint64_t text_bytes;	/* of all streams' text views */
	struct tphase *phases;
	uint32_t n_phases;
	char *phase_names;	/* every phase's name, NUL-terminated, back to back */
	struct gsec *gsecs;
	uint32_t n_gsecs;
	/* the distinct values sections, each opened once whatever the streams sharing it */
	struct tfs_vsec *vsecs;
	uint32_t n_vsecs;
	uint32_t *vsec_of;	/* [cf.n] section index -> vsecs index (UINT32_MAX: not one) */
	struct tfs_vsec no_values; /* zeroed: what a stream without values section reads */
	struct trank *ranks;	/* sorted by rank, the ranks with backtraces or symbols */
	uint32_t n_rank_ents;
	struct vcache vcache;	/* decoded value blocks its cursors share (vcache_i.h) */
	pthread_mutex_t lazy_lock; /* protects the decoded parts of ranks[] */
	bool lazy_lock_ready;
	struct names names;	   /* FORMAT.md §12, decoded at open; empty without */
	struct name_width *nw;	   /* widths of the attached names the CST uses (rnames.c) */
	uint8_t *name_plain;	   /* [names.n_ents] render_name_plain() of each entry */
	uint8_t *cls_attached;	   /* [names.n_classes] 1: an attached argument has the class */
	uint32_t n_nw_slots;	   /* a power of two, or 0 */
};

/* The values section @s decodes (patched or not), or t->no_values. */
static inline const struct tfs_vsec *stream_vsec(const struct tfs_trace *t,
						 const struct tstream *s)
{
	return s->vbase_idx < t->cf.n ? &t->vsecs[t->vsec_of[s->vbase_idx]] : &t->no_values;
}

/* rstacks.c */
/* Parse the §8 rank table (the end of the streams section) and set up lazy decoding. */
int stacks_parse_table(struct tfs_trace *t, struct tfs_rd *r);
/* Decode every rank's backtraces and symbols (verify). */
int stacks_verify(struct tfs_trace *t, struct tfs_diag *diag);
void stacks_free(struct tfs_trace *t);

/* reader.c: load section @idx and run @parse over all of its bytes (trailing bytes corrupt) */
int with_section(struct tfs_trace *t, uint32_t idx,
		 int (*parse)(struct tfs_trace *, struct tfs_rd *, void *), void *arg,
		 struct tfs_diag *diag);

/* rnames.c */
/* The widest forms id @id of names class @cls takes over the ranks (FORMAT.md §9). */
struct name_width {
	uint64_t id;
	uint32_t cls;	     /* UINT32_MAX: an empty slot */
	uint32_t text, json; /* bytes of the widest name (escaped, delimiters included) */
	uint64_t n_ranks;    /* ranks that give it a name */
	uint64_t over;	     /* scratch of measure(): ranks whose table replaces the name */
};

/*
 * Read the argflags (FORMAT.md §4.1) and names (§12) sections, give each stream its rank's
 * names and measure every attached name the CST prints. @return 0, -TFS_ECORRUPT, -ENOMEM
 */
int rnames_load(struct tfs_trace *t, struct tfs_diag *diag);
void rnames_free(struct tfs_trace *t);
/*
 * Width in @view of attached argument @a whose id is @id, at the widest rank; @fallback
 * ("file#3", @flen bytes) is what ranks without a name print between the delimiters.
 */
uint64_t rnames_width(const struct tfs_trace *t, const struct schema_arg *a, uint64_t id,
		      bool json, size_t flen);

/* layout.c */
int layout_build(struct tfs_trace *t, struct gsec *g, struct tfs_diag *diag);
void layout_free(struct gsec *g);

/* kindex.c */
/*
 * The layout of @kind in grammar section @gsec, built at the first call (thread-safe; the
 * result lives until the trace is closed). @return 0, -ENOENT (kind) or -ENOMEM
 */
int kindex_get(struct tfs_trace *t, uint32_t gsec, uint32_t kind, const struct kindex **out);
/* Bytes of @view's lines of the kind in one repetition of element @e of block @b. */
uint64_t kindex_unit_bytes(const struct tfs_trace *t, const struct kindex *k, int view,
			   uint32_t b, const struct gram_elem *e);
/* Events of the kind in one repetition of element @e of block @b. */
uint64_t kindex_unit_events(const struct tfs_trace *t, const struct kindex *k, uint32_t b,
			    const struct gram_elem *e);
void kindex_free(struct kindex *k);
/*
 * The layout of the events of the terminals @terms marks ([n_terms], copied) in grammar
 * section @gsec, in O(grammar size), owned by the caller (kindex_free()), not shared.
 * @return 0 or -ENOMEM
 */
int kindex_new_terms(const struct tfs_trace *t, uint32_t gsec, const uint8_t *terms,
		     struct kindex **out);
/* Free every kind layout of @g (at close). */
void kindex_free_all(const struct tfs_trace *t, struct gsec *g);

/* render.c */
#define NAME_CACHE_SLOTS 64

/*
 * The names a reader looked up lately in its rank's table, found or not: the same few ids
 * (a file's descriptor, a communicator) come back line after line. Zeroed: empty.
 */
struct name_cache {
	struct {
		uint64_t id;
		uint32_t cls1; /* the class + 1; 0: an empty slot */
		const struct name_ent *e;
	} slot[NAME_CACHE_SLOTS];
};

struct render_in {
	uint64_t index; /* the event's index in its stream (Chrome view without timing) */
	uint32_t term;
	uint32_t rank, thread;
	uint64_t ts_ns, dur_ns;
	const uint64_t *vals; /* the terminal's VAL fields */
	const struct name_table *names; /* the rank's names, or NULL */
	struct name_cache *cache; /* of @names, or NULL: none */
};

/*
 * Every terminal's fixed line length and room in every view, and the text view's line
 * templates (at open). @return 0 or -ENOMEM
 */
int render_templates(struct tfs_trace *t);
/*
 * Make view @view's line templates if they are not yet, once for all threads (under
 * lazy_lock): render_line_fast() of @view needs them. @return 0 or -ENOMEM
 */
int render_view_ready(struct tfs_trace *t, int view);
/*
 * Render one event as one line of @view, padded to the terminal's fixed length, straight
 * into @dst, which has room for t->term_room[view][term] bytes (more than the line: the
 * renderer copies short text in whole words). @return 0 or -TFS_ECORRUPT (a value wider
 * than the trace says: diag)
 */
int render_line_fast(const struct tfs_trace *t, int view, const struct render_in *in,
		     uint8_t *dst, struct tfs_diag *diag);
/*
 * render_line_fast() of the events [@first, @end) of decoded value block @vb, whose
 * terminals are @terms[i], one line after another at @dst while each fits with its room in
 * @cap bytes. @in gives the rank, thread and names, and the first event's index; it is left
 * on the event after the last line. Sets *@len to the bytes and *@n_lines to the lines
 * rendered. @return 0, or render_line_fast()'s error for the line after them.
 */
int render_lines_fast(const struct tfs_trace *t, int view, struct render_in *in,
		      const struct vblock *vb, const uint32_t *terms, uint32_t first,
		      uint32_t end, uint8_t *dst, size_t cap, size_t *len, uint32_t *n_lines,
		      struct tfs_diag *diag);
/* Bytes a name prints as in @json or the text view (delimiters included, FORMAT.md §9). */
uint64_t render_name_width(const char *p, size_t n, bool json);
/* Which views print a name as is between its delimiters: bit 0 text, bit 1 JSON. */
uint8_t render_name_plain(const char *p, size_t n);
/* Width of the printed absolute rank of a RANK argument word @word at any rank. */
unsigned int render_rank_width(const struct tfs_trace *t, uint64_t word);
/* Fill tfs_event.args: the decoded argument values of terminal @term. */
void render_args(const struct tfs_trace *t, uint32_t term, uint32_t rank, const uint64_t *vals,
		 union tfs_arg *args);

#endif
