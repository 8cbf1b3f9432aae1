/*
 * Inside the proxy generator (replay/proxy.c and replay/README.txt of a trace's tree): what
 * vreplay.c (streams, grammars, values, the file's assembly), vreplay_call.c (one function
 * per call signature: zones, marks, libc calls) and vreplay_mpi.c (MPI calls) share, and
 * the tables generated from capture/calls.txt (rp_libc_calls) and from mpi.h with
 * capture/mpi/mpi_annot.txt (vreplay_mpi_i.h). The proxy's runtime is fs/proxy_rt.c,
 * embedded as fs_proxy_rt.
 */
#ifndef TFS_FS_VREPLAY_I_H
#define TFS_FS_VREPLAY_I_H

#include <stdbool.h>
#include <stdint.h>

#include "tfs/reader.h"
#include "vnode_i.h"

/* The proxy's runtime source (fs/proxy_rt.c), NUL-terminated. */
extern const char fs_proxy_rt[];

/* A kind of capture/calls.txt: its `replay` statements ($NAME: an argument), or NULL and
 * why proxies leave it out (its `noreplay` line; NULL for an event no function records). */
struct rp_libc {
	const char *kind;
	const char *funcs; /* the functions recorded as this kind, "read, __read_chk" */
	const char *stmts;
	const char *why;
};

extern const struct rp_libc rp_libc_calls[];
extern const uint32_t rp_libc_n_calls;

/* What a call signature becomes in the proxy. */
enum rp_what {
	RP_W_NONE,	/* left out: no call */
	RP_W_SETUP,	/* no call: fd_file, a descriptor met first (set up at its place) */
	RP_W_CALL,	/* a call (libc or MPI) */
	RP_W_ZONE,	/* the end of a zone, and the zones begun right after it */
	RP_W_OPEN_ZONE, /* zone_unfinished: begun, never ended */
	RP_W_CAPTURE,	/* mark, counter, thread_name, memory access */
};

/* One call signature (CST entry) and the function the proxy gets for it. */
struct rp_term {
	uint32_t kind;
	uint8_t what; /* enum rp_what */
	bool alloc;   /* a malloc-family call: skipped where the trace has it inside a libc call */
	bool libc;    /* a libc call (calls.txt) */
	bool approx;  /* replayed, but not with every argument as recorded */
	const char *why; /* left out or approximated: why (static text) */
	uint32_t n_vals;
	uint32_t val_arg[TFS_MAX_ARGS]; /* the VAL arguments the code reads, in slot order */
	struct fs_sbuf code;		/* the body between rt_pre() and rt_done() */
};

/* Slots of one occurrence of a terminal: [gap][zone list | inside][values...] */
static inline uint32_t rp_val_base(bool timed, const struct rp_term *t)
{
	bool zone = t->what == RP_W_ZONE || t->what == RP_W_OPEN_ZONE;

	return (timed ? 1u : 0u) + (zone || (t->alloc && timed) ? 1u : 0u);
}

static inline uint32_t rp_slots(bool timed, const struct rp_term *t)
{
	return rp_val_base(timed, t) + t->n_vals;
}

struct rp_mpi;

/* A grammar as the proxy's code has it: every terminal element's first value slot. */
struct rp_rule {
	uint32_t n_elems;
	struct tfs_rule_elem *elems;
	uint32_t *slot; /* [n_elems]: a terminal element's slot base */
};

struct rp_block {
	uint32_t n_rules;
	struct rp_rule *rules;
};

struct rp_gram {
	uint32_t stream; /* the first stream with this grammar */
	uint32_t n_blocks;
	struct rp_block *blocks;
	uint32_t n_slots;
	bool walk; /* occurrences carry values (times, VAL arguments, zones) */
};

/* Zone lists begun together, interned: list 0 is the empty one. */
struct rp_zlists {
	char **names; /* [n_names], C string literals' contents */
	uint32_t n_names, names_cap;
	uint32_t *items; /* list i is items[first[i] .. first[i + 1]) (name indices) */
	uint32_t n_items, items_cap;
	uint32_t *first; /* [n + 1] */
	uint32_t n, cap;
};

/* Bytes a rank read from each file (the size its input files get). */
struct rp_fbytes {
	uint32_t rank;
	uint64_t file;
	int64_t bytes; /* read from the descriptor's offset, in all */
	int64_t end;   /* the furthest byte a read at an offset (pread, preadv) reached */
};

/* The generator's state over one trace. */
struct rp_gen {
	struct fs_vtree *vt;
	struct tfs_trace *t;
	const struct tfs_trace_info *ti;
	bool timed;
	struct rp_term *terms; /* [n_terminals] */
	uint64_t *counts;      /* [n_streams * n_terminals]: occurrences per stream */
	uint64_t *total;       /* [n_terminals]: over all streams */
	uint32_t *rank_of;     /* [n_streams] */
	uint8_t *used;	       /* [rank directories * n_terminals]: a stream of the rank of
				* directory k (fs_rank_of_ord) has it */
	struct rp_mpi *mpi;    /* NULL: the trace has no MPI call */
	struct rp_zlists zl;
	struct rp_fbytes *fb;
	uint32_t n_fb, fb_cap;
	uint64_t n_val_cut; /* value slots whose sequence was too irregular to keep whole */
	struct rp_opened {
		uint32_t rank, term;
	} * opened; /* calls that opened a path by name and succeeded at least once */
	uint32_t n_opened, opened_cap;
};

/** The terminals rank @rank's streams have (g->used's row of it); NULL: it has no stream. */
const uint8_t *rp_used(const struct rp_gen *g, uint32_t rank);

/* ---- vreplay_walk.c ---- */

/*
 * Walk @stream's events along its grammar @gr once and write the initialiser of its
 * value slots (struct rt_seq[], one per slot of @gr) into @seq, its first zone list into
 * *@start_zones, the bytes it read per file into g->fb. Decodes each event once.
 * @return 0, -ENOMEM or a reader error
 */
int rp_walk(struct rp_gen *g, const struct rp_gram *gr, uint32_t stream, struct fs_sbuf *seq,
	    struct fs_sbuf *tabs, uint32_t *start_zones);
void rp_zlists_fini(struct rp_zlists *z);

/* ---- vreplay_call.c ---- */

/*
 * The function of every terminal (g->terms): classify it and write its code; MPI calls go
 * to rp_mpi_term(). @return 0 or -ENOMEM
 */
int rp_terms_build(struct rp_gen *g);
/* The expression of VAL argument @arg of terminal @term (a `const int64_t` the body has). */
const char *rp_val(struct rp_gen *g, uint32_t term, uint32_t arg);
/* Append @s as a C string literal. */
void rp_put_cstr(struct fs_sbuf *b, const char *s);
/*
 * Append the @n bytes of text @s (a name escaped by fs_sb_name(), a signature) inside a C
 * comment: "*" "/" and "/" "*" broken by a backslash, "??" as "?\?" (no trigraph), a
 * newline as \n and a space after a last backslash, so that no byte of a trace ends the
 * comment or splices a line.
 */
void rp_put_comment(struct fs_sbuf *b, const char *s, size_t n);

/* ---- vreplay_mpi.c ---- */

/* Set up MPI replay if the trace has MPI calls (g->mpi). @return 0 or -ENOMEM */
int rp_mpi_new(struct rp_gen *g);
void rp_mpi_free(struct rp_mpi *m);
/*
 * The code of MPI terminal @term of kind @kd into g->terms[term].code, or left out with a
 * reason when the build has no prototype for it. @return 0 or -ENOMEM
 */
int rp_mpi_term(struct rp_gen *g, uint32_t term, const struct tfs_kind_desc *kd);
/* The handle tables and rt_mpi_tables_init() (after every terminal), into @b. */
void rp_mpi_tables(struct rp_gen *g, struct fs_sbuf *b);
/*
 * A trace without allocation events still names MPI buffers by allocation id: the blocks
 * 1 .. the highest id the terminals marked in @used name, allocated in order (as large as
 * their calls may need) as the first thing the proxy does, get those ids again.
 */
void rp_mpi_allocs(struct rp_gen *g, struct fs_sbuf *b, const uint8_t *used);
/* The recording MPI, for PROXY_REC_IMPL: 1 MPICH, 2 Open MPI, 0 unknown. */
int rp_mpi_impl(const struct rp_gen *g);

#endif
