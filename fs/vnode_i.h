/*
 * Inside the virtual tree: the node table, the kinds of file (struct fs_file_ops), the
 * scopes files are computed over, and the interfaces between the tree's files (vtree.c
 * queries and handles, vlayout.c the declaration of the layout, vbuild.c laying it out,
 * vphase.c phase directory names, vconcat.c composite files, vmerge.c time-merged views,
 * vsummary.c profiles and stacks, vbtrace.c backtraces, vfiles.c files.txt, vtables.c the
 * signature and grammar tables, vgen.c README, info.json and the JSON tails, vreplay*.c the
 * proxy program). The once-helpers (once_i.h) and the string buffer (sbuf_i.h) are files of
 * their own. Nothing outside fs/v*.c includes this; the tree's users see vtree_i.h only.
 */
#ifndef TFS_FS_VNODE_I_H
#define TFS_FS_VNODE_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tfs/reader.h"
#include "once_i.h"
#include "sbuf_i.h"
#include "vtree_i.h"

/*
 * trace.json files whose event lines exceed this also get trace.json.d/part-NNN.json, each
 * at most this many bytes: 256 MiB, half of V8's longest string (2^29 - 24 characters), so
 * that every JavaScript engine (Node, Chromium, speedscope) loads a part whole. A part's
 * event lines fill FS_JSON_PART_LINES of it, its tail (names, phases, flows) the rest. The
 * environment variable TRACEFS_JSON_SPLIT_BYTES overrides the size (for tests; then the
 * lines fill all of it).
 */
#define FS_JSON_SPLIT_BYTES (UINT64_C(256) << 20)
#define FS_JSON_PART_LINES (FS_JSON_SPLIT_BYTES - (UINT64_C(32) << 20))
/*
 * trace.json.d/ holds at most this many parts, so that building one stays bounded: past
 * 1024 x 224 MiB of event lines, parts grow beyond what V8 loads whole.
 */
#define FS_JSON_MAX_PARTS 1024

/* ---- scopes: the event ranges a file covers ---- */

/** One event range of one stream. */
struct fs_seg {
	uint32_t stream, rank, thread;
	uint64_t first, n_events;
};

struct fs_merge_index;

/*
 * What a composite or computed file covers: event ranges (at most one per thread, sorted by
 * rank then thread) and the phases trace.json draws. Owned by the tree, immutable after
 * the build except for the lazily built merge index.
 */
struct fs_scope {
	char *label;	     /* owned; "rank 0", shown in summary headers */
	struct fs_seg *segs; /* owned */
	uint32_t n_segs, segs_cap;
	uint32_t *phases;    /* owned; phase indices, by rank then index */
	uint32_t n_phases, phases_cap;
	uint64_t n_events;   /* over all segs */
	uint64_t from_ns, to_ns;	/* a time window's span (to > from), else both 0 */
	bool whole_ranks;		/* every thread of its ranks, from start to end */
	struct fs_once merge_once;	/* guards merge */
	struct fs_merge_index *merge;	/* vmerge.c; NULL until the first merged read */
};

/* ---- kinds and terminals ---- */

/** What the profiles need to know of an event kind. Strings borrowed from the trace. */
struct fs_kind {
	const char *name, *category;
	uint32_t n_args;
	struct tfs_arg_desc args[TFS_MAX_ARGS]; /* strings borrowed from the trace */
	int32_t result;	 /* the argument printed after " = ", or -1 */
	bool is_zone;	 /* first argument a STR called "name" (as FORMAT.md §9 Chrome names) */
	bool is_alloc;	 /* category "alloc" with a byte-count argument */
};

/**
 * What a call signature fixes: the text-escaped zone name, the byte counts in it. Read from
 * tfs_trace_signature()'s text (the codec has no call for a terminal's arguments).
 */
struct fs_term {
	uint32_t kind;
	bool bytes_val;	   /* some byte-count argument varies per occurrence (VAL) */
	uint64_t sig_bytes; /* sum of the byte-count arguments fixed by the signature */
	char *zone;	   /* owned; zones: the name as the text view prints it, quoted */
};

/* ---- nodes ---- */

struct vnode;
struct fs_concat;

/**
 * Makes a file's bytes once: a new malloc'ed buffer in @out. @sc is the scope of the
 * directory it is in (NULL for tree-wide files), @rank its rank (UINT32_MAX: none).
 * @return 0 or -errno
 */
typedef int (*fs_gen_fn)(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank,
			 char **out, size_t *len);
/* Declares generator @name, of type fs_gen_fn. */
#define FS_GEN_DECL(name)                                                                  \
	int name(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank, char **out, \
		 size_t *len)

/**
 * How a kind of file is sized and read, after squashfuse and the kernel's VFS: vtree.c
 * dispatches through these only. Every callback may run in any thread; a node is immutable
 * once published but for what @size computes once.
 */
struct fs_file_ops {
	/** The exact size, computing once what it depends on. @return 0 or -errno */
	int (*size)(struct fs_vtree *vt, struct vnode *n, uint64_t *size);
	/** A reader for one opener in *@state; only for a file that is not empty. */
	int (*open)(struct fs_vtree *vt, const struct vnode *n, void **state);
	/** Copy @len bytes (all within the file) from @off. @return bytes or -errno */
	ssize_t (*read)(const struct vnode *n, void *state, void *buf, size_t len, uint64_t off,
			struct tfs_diag *diag);
	/** Free a reader's @state (NULL accepted). NULL: the reader holds nothing. */
	void (*close)(void *state);
	/** The stream views it is made of, as fs_vtree_file_views() says. NULL: -ENOTSUP */
	int (*views)(const struct vnode *n, int *view, uint32_t *call, struct fs_view_seg **segs,
		     uint32_t *n_segs);
	/** Free what the node owns (NULL: nothing). */
	void (*fini)(struct vnode *n);
};

/** fs_file_ops.size of a file whose size was set when it was laid out. */
int fs_file_fixed_size(struct fs_vtree *vt, struct vnode *n, uint64_t *size);

extern const struct fs_file_ops fs_gen_ops;	/* bytes held by the tree (vtree.c) */
extern const struct fs_file_ops fs_lazy_ops;	/* made by a fs_gen_fn once (vtree.c) */
extern const struct fs_file_ops fs_view_ops;	/* one stream's event range (vtree.c) */
extern const struct fs_file_ops fs_concat_ops;	/* parts end to end (vconcat.c) */
extern const struct fs_file_ops fs_merge_ops;	/* threads in time order (vmerge.c) */

/* fs_lazy_ops: bytes made by @gen over @scope and @rank once, then held. */
struct fs_lazygen {
	struct fs_once once;
	struct fs_vtree *vt;
	fs_gen_fn gen;
	const struct fs_scope *scope;	/* the directory's, or NULL */
	char *data;			/* owned, after once */
	size_t len;
	uint32_t node;			/* whose size the run sets */
	uint32_t rank;			/* UINT32_MAX: none */
};

/* vnode.flags */
enum {
	VN_RANKS = 1,	 /* ranks/: its children are the rank directories, built at first use */
	VN_RANK_DIR = 2, /* ranks/<r>/: its inode is FS_RANK_INO + its ordinal (@rank_ord) */
	VN_LAZY_DIR = 4, /* its children are made at its first use: the root's trace.json.d/, */
	VN_LAZY_CALLS = 8, /* or with this, a calls/ (its scope is @scope), */
	VN_LAZY_PHASES = 16, /* or with this, a rank's phases/ */
	VN_LAZY_PHASE = 32,  /* or with this, one phases/<p>/ (@first, @n_events: its phases) */
};

struct vnode {
	char *name;	    /* owned */
	uint32_t parent;    /* node index; the root is its own parent */
	const struct fs_file_ops *ops; /* NULL: a directory */
	uint8_t view;	    /* view, merge: enum tfs_view */
	uint8_t flags;	    /* VN_* */
	uint32_t rank_ord;  /* VN_RANK_DIR: which rank directory (the position of its rank
			     * among the ranks that have streams) */
	_Atomic bool built; /* VN_LAZY_DIR: its children are made (release) */
	uint32_t stream;    /* view */
	uint32_t call;	    /* view, merge: 1 + the only event kind it shows (calls/), 0: all */
	uint64_t first;	    /* view: first event (stream index); VN_LAZY_PHASE: where its phases
			     * start in its rank's phase_order */
	uint64_t n_events;  /* view; VN_LAZY_PHASE: its phases */
	uint64_t size;	    /* files: exact bytes (concat, lazy: once done) */
	const char *gen;    /* gen: borrowed from the tree */
	struct fs_concat *concat;	/* concat: owned */
	struct fs_scope *scope;		/* merge, calls/: borrowed from the tree */
	struct fs_lazygen *lazy;	/* lazy: owned */
	uint64_t sort_key;  /* listing order among siblings (ties: creation order) */
	uint32_t *children; /* directories: listing order, after finish() */
	uint32_t *by_name;  /* directories: sorted by strcmp(name), for lookup */
	uint32_t n_children;
	uint32_t children_cap;
	uint32_t wdir;	    /* a window/ directory: 1 + its index in vt->windows (vwindow.c) */
};

/*
 * Nodes live in chunks that never move, so a node's address holds while more are added: a
 * rank's directory and everything in it are built at its first use (fs_rank_dir()), while
 * other threads read the nodes built before. At most FS_MAX_NODES nodes.
 */
#define FS_NODE_CHUNK_SHIFT 10
#define FS_NODE_CHUNK (1u << FS_NODE_CHUNK_SHIFT)
#define FS_MAX_NODES (UINT32_C(1) << 28)
/*
 * Nodes of windows made by a lookup (vwindow.c) have indices from here on, in a store of
 * their own: the tree's nodes grow as rank directories are built, so they cannot follow them.
 */
#define FS_WINDOW_IDX (UINT32_C(0xf0000000))
/*
 * Inode of the rank directory of ordinal k: FS_RANK_INO + k. Rank directories have inodes
 * of their own so that listing ranks/ (readdir) builds none of them.
 */
#define FS_RANK_INO (UINT64_C(1) << 40)

struct fs_vtree {
	struct tfs_trace *trace; /* borrowed */
	struct tfs_trace_info ti;
	struct vnode **chunks;	  /* [FS_MAX_NODES / FS_NODE_CHUNK], filled as needed */
	_Atomic uint32_t n_nodes; /* nodes readers may see (release after they are complete) */
	uint32_t n_alloc;	  /* nodes made, under grow_lock (after the build) */
	pthread_mutex_t grow_lock; /* serialises building ranks: nodes, scopes */
	/* the rank directories, one per rank shown (struct fs_procs): ordinal k is rank
	 * rank_list[k] (k itself when NULL: they are 0 to n_rank_dirs - 1); rank_node[k] its
	 * node once built, 0 before */
	uint32_t n_rank_dirs;
	uint32_t *rank_list;
	_Atomic uint32_t *rank_node;
	_Atomic uint32_t n_ranks_built;
	uint32_t ranks_node;	  /* the node of ranks/ */
	struct fs_scope *root;	  /* the whole trace's scope: its phases at the build, its
				   * segments (every stream) at their first use (root_once) */
	struct fs_once root_once;
	uint64_t root_part_bytes; /* the parts of the root's trace.json.d/ */
	char *readme;		/* README.txt */
	size_t readme_len;
	struct fs_scope **scopes; /* owned */
	uint32_t n_scopes, scopes_cap;
	struct fs_kind *kinds;	  /* [ti.n_kinds] */
	struct fs_term *terms;	  /* [ti.n_terminals], filled by terms_once */
	struct fs_once terms_once;
	_Atomic uint32_t *term_len[2]; /* TEXT, JSONL line length per terminal; 0: not known yet */
	uint64_t split_bytes;	  /* FS_JSON_SPLIT_BYTES or its override */
	uint32_t max_thread;	  /* highest thread number of any stream */
	struct fs_procs *procs;	  /* the ranks as processes (vprocs.c) */
	struct fs_pict_state *pict; /* the pictures' shared state (vpict_i.h) */
	struct fs_windows *windows; /* time windows made by lookups (vwindow.c) */
	/* [n_rank_dirs] the phase indices of each rank whose phases/ was filled, in directory
	 * order (each phases/<p>/ a range of them: vbuild.c), under grow_lock */
	uint32_t **phase_order;
};

/* ---- vphase.c ---- */

/** A phase with its stream's rank and thread. */
struct fs_phase_rec {
	uint32_t idx, rank, thread, stream;
	uint32_t slot;	  /* where fs_phase_dirs_name() puts its directory name */
	const char *name; /* borrowed from the trace, or a directory name */
	uint64_t first, n_events;
};

/** Phase @idx with its stream's rank and thread (slot: the index). @return 0 or -ENOENT */
int fs_phase_rec_of(const struct tfs_trace *t, uint32_t idx, struct fs_phase_rec *rec);
/** Read every phase with its stream's rank and thread, in trace order (slot: the index). */
int fs_phase_recs(const struct tfs_trace *t, uint32_t n_phases, struct fs_phase_rec *recs);
/** qsort order: rank, then name, then index. */
int fs_phase_rec_cmp(const void *a, const void *b);
/**
 * The directory names (fs_phase_dirs_new()) of @recs, which hold every phase of their ranks:
 * a new string in @dirs[recs[i].slot] for each. Sorts @recs by fs_phase_rec_cmp().
 * @return 0 or -ENOMEM (the names made so far stay in @dirs)
 */
int fs_phase_dirs_name(struct fs_phase_rec *recs, uint32_t n, char **dirs);

/* ---- vcalls.c ---- */

/**
 * calls/ under @dir, listed by @key, when some kind that occurs in @sc's events has a name
 * fit for a directory; its insides come at its first use (fs_calls_fill()).
 * @return 0, -ENOMEM or a reader error
 */
int fs_calls_add(struct fs_vtree *vt, uint32_t dir, struct fs_scope *sc, uint64_t key);
/**
 * The insides of calls/ (node @calls) of @sc: calls/<name>/{trace.txt,events.jsonl}, for
 * each kind that occurs in @sc's events the lines of @sc's trace.txt and events.jsonl that
 * are of that kind. In the order of @sc's trace.txt: one thread's, several without timing
 * one after the other, several with timing merged in time order (vmerge.c). Sizes from the
 * grammars' counts. Under grow_lock. @return 0, -ENOMEM or a reader error
 */
int fs_calls_fill(struct fs_vtree *vt, uint32_t calls, struct fs_scope *sc);

/* ---- vbuild.c ---- */

/** Window node @idx (from FS_WINDOW_IDX on) if published, or NULL. Thread-safe. */
struct vnode *fs_window_node(const struct fs_vtree *vt, uint32_t idx);

/** Node @idx (made, published or not): a window's (vwindow.c) from FS_WINDOW_IDX on. */
static inline struct vnode *fs_node_at(const struct fs_vtree *vt, uint32_t idx)
{
	if (idx >= FS_WINDOW_IDX)
		return fs_window_node(vt, idx);
	return &vt->chunks[idx >> FS_NODE_CHUNK_SHIFT][idx & (FS_NODE_CHUNK - 1)];
}

/** Lay out the tree of @vt->trace but its ranks (nodes, scopes, generated files). */
int fs_vtree_build(struct fs_vtree *vt, const char *trace_name);
/** Free every node and the node store. */
void fs_vtree_nodes_free(struct fs_vtree *vt);
/**
 * The node of rank directory @ord (< n_rank_dirs), built with everything in it at the first
 * call (thread-safe). @return 0, -ENOMEM or a reader error (nothing is kept then)
 */
int fs_rank_dir(struct fs_vtree *vt, uint32_t ord, uint32_t *node);
/** Give the root's scope its segments (once, thread-safe). @return 0 or -errno */
int fs_root_ready(struct fs_vtree *vt);
/** Make the children of a VN_LAZY_DIR node @idx (once, thread-safe). @return 0 or -errno */
int fs_lazy_dir_build(struct fs_vtree *vt, uint32_t idx);
/** Free the phase indices a tree keeps for its phases/ directories (vt->phase_order). */
void fs_phase_order_free(struct fs_vtree *vt);
/** The ordinal of @rank's directory. @return 0 or -ENOENT (the rank has no streams) */
int fs_rank_ord(const struct fs_vtree *vt, uint32_t rank, uint32_t *ord);
/** The rank of rank directory @ord. */
uint32_t fs_rank_of_ord(const struct fs_vtree *vt, uint32_t ord);
/** Accepts NULL. */
void fs_scope_free(struct fs_scope *sc);
/** "[\n", the Chrome lines of @sc, its tail: a whole trace.json. @return 0 or -errno */
int fs_tree_fill_chrome(struct fs_vtree *vt, struct fs_concat *c, const struct fs_scope *sc);
/** A directory node under @parent listed by @key. @return its index or -ENOMEM */
int64_t fs_tree_add_dir(struct fs_vtree *vt, uint32_t parent, const char *name, uint64_t key);
/**
 * A file node of kind @ops (&fs_view_ops or &fs_concat_ops, the caller fills it in) under
 * @dir, listed by @key; a concat gets an empty composite. @return its index or -ENOMEM
 */
int64_t fs_tree_add_file(struct fs_vtree *vt, uint32_t dir, const char *name, uint64_t key,
			 const struct fs_file_ops *ops);
/** A file made once by @gen over @sc and @rank. @return 0 or -ENOMEM */
int fs_tree_add_gen(struct fs_vtree *vt, uint32_t dir, const char *name, uint64_t key,
		    const struct fs_scope *sc, uint32_t rank, fs_gen_fn gen);
/** A lazy file's state for node @node: @gen over @sc and @rank. @return NULL on ENOMEM */
struct fs_lazygen *fs_lazygen_new(struct fs_vtree *vt, uint32_t node, const struct fs_scope *sc,
				  uint32_t rank, fs_gen_fn gen);
/**
 * Make node @n (named, in its directory) the lines (@view TFS_VIEW_TEXT or TFS_VIEW_JSONL) of
 * @sc: one stream's view, its threads one after the other without timing, else merged by
 * time. @return 0, -ENOMEM or a reader error
 */
int fs_node_set_lines(struct fs_vtree *vt, struct vnode *n, struct fs_scope *sc, int view);
/** Free what node @n owns and clear it (a directory's children, its file kind's data). */
void fs_node_fini(struct vnode *n);

/* ---- vconcat.c: a file made of parts ---- */

/** Generates a lazy part: a new malloc'ed buffer in @out. @return 0 or -errno */
typedef int (*fs_part_gen_fn)(struct fs_vtree *vt, const struct fs_scope *sc, char **out,
			      size_t *len);

/** A new empty composite of @vt's trace (borrowed). @return NULL on ENOMEM */
struct fs_concat *fs_concat_new(struct fs_vtree *vt);
/** Accepts NULL. */
void fs_concat_free(struct fs_concat *c);
/** Append fixed bytes (borrowed, must outlive the concat). @return 0 or -ENOMEM */
int fs_concat_add_bytes(struct fs_concat *c, const char *bytes, size_t len);
/** Append a stream view's event range. @return 0, -ENOMEM or tfs_trace_view_size()'s error */
int fs_concat_add_view(struct fs_concat *c, const struct tfs_trace *t, uint32_t stream,
		       int view, uint64_t first, uint64_t n);
/**
 * Append @view (TFS_VIEW_TEXT or TFS_VIEW_JSONL) of @sc's threads merged in time order
 * (vmerge.c); the concat takes @sc (new, private to it) whatever happens.
 * @return 0, -ENOMEM or a reader error
 */
int fs_concat_add_merge(struct fs_concat *c, struct fs_scope *sc, int view);
/**
 * Append the lines of the events of kind @kind in a stream view's event range, @size bytes
 * as the caller counted them (nothing when there are none). @return 0 or -ENOMEM
 */
int fs_concat_add_kind_view(struct fs_concat *c, uint32_t stream, uint32_t kind, int view,
			    uint64_t first, uint64_t n, uint64_t size);
/** Append a part that @gen makes at the first fs_concat_ready(). @return 0 or -ENOMEM */
int fs_concat_add_gen(struct fs_concat *c, fs_part_gen_fn gen, const struct fs_scope *sc);
/** Adds the parts of a composite at its first fs_concat_ready(). @return 0 or -errno */
typedef int (*fs_concat_fill_fn)(struct fs_concat *c, void *arg);
/**
 * Let @fill add the parts of @c (made empty) when it is first made ready, instead of now: a
 * file over every stream of a job of many ranks costs nothing until it is used.
 */
void fs_concat_set_fill(struct fs_concat *c, fs_concat_fill_fn fill, void *arg);
/** Make the lazy parts once (thread-safe) and give the total size. @return 0 or -errno */
int fs_concat_ready(struct fs_concat *c, uint64_t *size);

/**
 * The stream views @c is made of (made ready first), as fs_vtree_file_views() says them.
 * @return 0, -ENOTSUP (fixed or generated bytes among the parts, or views of several
 *         kinds), -ENOMEM or fs_concat_ready()'s error
 */
int fs_concat_views(struct fs_concat *c, int *view, uint32_t *call, struct fs_view_seg **segs,
		    uint32_t *n);

/* ---- vmerge.c: threads interleaved in time order ---- */

struct fs_merge_reader;
/** Merged by end time: the trace's `event_order` metadata is "end" (else by start time). */
bool fs_merge_by_end(const struct fs_vtree *vt);
/** Total bytes of @view over @sc: the sum of its segments' views. */
int fs_merge_size(const struct fs_vtree *vt, const struct fs_scope *sc, int view,
		  uint64_t *size);
/** A reader of @view over @sc merged; @call: 1 + the only kind it shows, 0: all. */
int fs_merge_reader_new(struct fs_vtree *vt, struct fs_scope *sc, uint32_t call, int view,
			struct fs_merge_reader **out);
void fs_merge_reader_free(struct fs_merge_reader *r);
/** Builds the scope's merge index on the first call. @return bytes, 0 at the end, -errno */
ssize_t fs_merge_read(struct fs_merge_reader *r, void *buf, size_t len, uint64_t off,
		      struct tfs_diag *diag);
void fs_merge_index_free(struct fs_merge_index *mi);

/* ---- vsummary.c ---- */

/** Make vt->terms (once). @return 0, -ENOMEM or a reader error */
int fs_terms_ready(struct fs_vtree *vt);
/** summary.txt of @sc. @return 0 or -errno; @out is new */
FS_GEN_DECL(fs_summary_new);
/** stacks.folded of @sc. @return 0 or -errno; @out is new */
FS_GEN_DECL(fs_stacks_new);
/** @a + @b, or UINT64_MAX when that overflows. */
uint64_t fs_sat_add(uint64_t a, uint64_t b);
/** Bytes @ev moved: the sum of its byte-count arguments, negative ones 0 (needs terms). */
uint64_t fs_event_bytes(const struct fs_vtree *vt, const struct tfs_event *ev);

/* ---- vfiles.c ---- */

/** Whether the trace records files: some kind has a symbolic argument of class "file". */
bool fs_files_wanted(const struct fs_vtree *vt);
/** files.txt of @rank over the events of @sc. @return 0 or -errno; @out is new */
FS_GEN_DECL(fs_files_new);

/* ---- vbtrace.c ---- */

/** backtraces.txt of @rank. @return 0 or -errno; @out is new */
FS_GEN_DECL(fs_backtraces_new);
/**
 * The folded form of stack#@id of @rank, appended to @b: source frames joined by ';',
 * outermost first, as allocs.folded prints it. @return 0 or a reader error
 */
int fs_fold_stack(struct fs_vtree *vt, uint32_t rank, uint64_t id, struct fs_sbuf *b);
/** What fs_term_stack() gives for a terminal whose kind has no stack argument. */
#define FS_NO_STACK UINT64_MAX
/** The stack id terminal @term names (its SYM argument of class "stack"), or FS_NO_STACK. */
uint64_t fs_term_stack(const struct fs_vtree *vt, uint32_t term);
/** allocs.folded of @rank over the events of @sc. @return 0 or -errno; @out is new */
FS_GEN_DECL(fs_allocs_new);

/* ---- vgen.c ---- */

/** README.txt, a new malloc'ed buffer the caller frees. @return 0 or -ENOMEM */
int fs_readme_new(const struct fs_vtree *vt, const char *trace_name, char **out, size_t *len);
/**
 * info.json: the text `tracefs info --json` prints, a new malloc'ed buffer the caller
 * frees. @return 0 or -ENOMEM
 */
FS_GEN_DECL(fs_info_text_new);
/** The end of a trace.json: metadata and phase events, then "]\n" (fs_part_gen_fn). */
int fs_chrome_tail_new(struct fs_vtree *vt, const struct fs_scope *sc, char **out,
		       size_t *len);
/** The same without phase events (the later parts of a split trace.json). */
int fs_chrome_tail_nophase_new(struct fs_vtree *vt, const struct fs_scope *sc, char **out,
			       size_t *len);

/* ---- vprocs.c: the ranks as processes, from the metadata ---- */

/** One rank. Strings are borrowed from the trace; NULL and -1: unknown. */
struct fs_proc {
	const char *program;	  /* the program it ran last (`image`, else `program`) */
	const char *images;	  /* every program it ran, "sh -> cc1" */
	const char *end;	  /* how it ended: "exited with status 0", "unknown: ..." */
	const char *thread_names; /* the `thread_names` metadata */
	int64_t pid, ppid;
	int64_t parent_rank; /* the rank that started it */
	int64_t dropped_unplaced; /* events it dropped that no `dropped` mark places, or -1 */
};

/* Ranks [first, the next run's first) are the same process but for their parent. */
struct fs_proc_run {
	uint32_t first;
	bool chain;	   /* its pid is its ppid: each rank's parent is the rank before */
	struct fs_proc q;  /* parent_rank: the first rank's */
};

struct fs_procs {
	uint32_t n;	   /* ranks */
	/* the ranks shown (ranks/, info.json, README.txt), in increasing order: rank 0, those
	 * with streams and those the metadata names (`<key>.rank<R>`), so a process that
	 * recorded no event is shown too; bounded by the file, whatever n_ranks says */
	uint32_t n_shown;
	uint32_t *shown;
	bool by_pid; /* ranks are the processes of a recording, named by pid (not MPI ranks) */
	bool mpi;    /* ranks are an MPI job's (metadata mpi_size) */
	uint32_t n_runs;
	struct fs_proc_run runs[];
};

/** Rank @rank (< p->n) as a process, in *@q. */
void fs_proc_at(const struct fs_procs *p, uint32_t rank, struct fs_proc *q);
/** The processes of @t's @n_ranks ranks. @return 0 or -ENOMEM */
int fs_procs_new(const struct tfs_trace *t, uint32_t n_ranks, struct fs_procs **out);
/** Accepts NULL. */
void fs_procs_free(struct fs_procs *p);
/**
 * Rank @rank's name: "cc1 (pid 1234)", "app (rank 3)" (MPI), else "rank 3". A program too
 * long for @cap (at least 64) is cut between two characters and marked "...[+N bytes]"
 * before its whole " (pid N)".
 */
void fs_proc_name(const struct fs_procs *p, uint32_t rank, char *buf, size_t cap);
/** The name the program gave thread @thread of @q, in @buf; NULL when it gave none. */
const char *fs_proc_thread_name(const struct fs_proc *q, uint32_t thread, char *buf, size_t cap);
/** "T<thread> <its name>, <process>" (the name when the program gave one) into @buf. */
void fs_thread_label(const struct fs_procs *p, uint32_t rank, uint32_t thread, char *buf,
		     size_t cap);

/* ---- vreplay.c ---- */

/** replay/proxy.c: a C program making the trace's calls again. @return 0 or -errno; new */
FS_GEN_DECL(fs_replay_proxy_new);
/** replay/README.txt: how to build and run it, what it replays. @return 0 or -errno; new */
FS_GEN_DECL(fs_replay_readme_new);

/* ---- vtables.c ---- */

/** signatures.txt: one line per terminal. */
FS_GEN_DECL(fs_signatures_new);
/** grammar.txt: the grammar of every distinct stream under a header line. */
FS_GEN_DECL(fs_grammar_new);

#endif
