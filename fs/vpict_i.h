/*
 * The pictures of the virtual tree and what they share: timeline.svg (vtimeline.c),
 * heap.txt and leaks.folded (vheap.c), profile.speedscope.json (vspeedscope.c), the time
 * windows (vwindow.c), the flows and counters of trace.json (vflows.c), the nesting walk
 * they all draw from (vwalk.c) and the table that puts them in the tree (vpictures.c). Each
 * picture is a generator behind one entry of that table, so adding one is a file and a line.
 * Only fs/v*.c include this.
 */
#ifndef TFS_FS_VPICT_I_H
#define TFS_FS_VPICT_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vnode_i.h"

/* ---- vpictures.c: the table of pictures ---- */

/** Make the pictures' per-tree state (once: later calls do nothing). @return 0 or -ENOMEM */
int fs_pict_state_new(struct fs_vtree *vt);

/** The pictures' per-tree state (made on first use); accepts NULL. */
void fs_pict_state_free(struct fs_pict_state *ps);

/* ---- per-terminal facts the pictures share (vwalk.c) ---- */

/** Colour classes of the timeline: zones by name, calls by kind, MPI waits apart. */
enum fs_cls {
	FS_CLS_ZONE0, /* FS_N_ZONE_CLS shades of zones, by a hash of the name */
	FS_CLS_ALLOC = 6,
	FS_CLS_IO,
	FS_CLS_MPI_WAIT, /* blocking MPI: waits, blocking point-to-point, collectives */
	FS_CLS_MPI,	 /* other MPI calls */
	FS_CLS_THREADS,
	FS_CLS_MEM,
	FS_CLS_OTHER,
	FS_N_CLS
};
#define FS_N_ZONE_CLS 6

/** What the pictures know of a terminal. Strings borrowed from the trace. */
struct fs_pterm {
	const char *name; /* as trace.json names it: a zone's name, else the kind's */
	uint32_t kind;
	uint8_t cls;	  /* enum fs_cls */
	bool instant;	  /* a mark: a moment, not a span */
	int32_t zdepth;	  /* a zone's `depth` argument (the untimed clock nests by it), or -1 */
	uint64_t dropped; /* a `dropped` mark (the recorder lost events there): its count; 0 */
};

struct fs_heap;

struct fs_pict_state {
	struct fs_once once;
	struct fs_pterm *terms;	  /* [ti.n_terminals] */
	pthread_mutex_t heap_lock; /* guards heap[] and each computation into it */
	/* [n_heap]: each rank directory's heap (by ordinal: fs_rank_ord()) once computed
	 * (vheap.c), made at the first one */
	struct fs_heap **heap;
	uint32_t n_heap;
};

/** Make vt->pict and its per-terminal table once. @return 0, -ENOMEM or a reader error */
int fs_pict_ready(struct fs_vtree *vt);

/* ---- vwalk.c: one thread's events in nesting order ---- */

/**
 * One event as the pictures see it: its span clamped into its parent's (so that spans nest
 * even where lossy times overlap by their error), its depth below the outermost event, and
 * without timing a synthetic clock of one unit per event: an event covers [index, index+1)
 * and a zone every event recorded inside it (by its `depth` argument).
 */
struct fs_span {
	uint64_t index;	       /* in the stream */
	uint32_t term;
	uint64_t start, end;   /* ns, or synthetic units without timing */
	uint32_t depth;
};

/*
 * Called when the walk opens a span (its start and end are as final as the walk knows: a
 * zone of an untimed trace in end order has start 0 until it closes) and when it closes it
 * (final). Spans open outer before inner and close inner before outer in the walk's
 * direction: forward in time for a stream in start order, backward for one in end order.
 */
typedef int (*fs_span_fn)(void *arg, const struct fs_span *sp, bool open);

/**
 * Walk the events of @s, calling @fn. @backward tells the direction chosen (end order).
 * @return 0, @fn's error, or a reader error
 */
int fs_walk_seg(struct fs_vtree *vt, const struct fs_seg *s, fs_span_fn fn, void *arg,
		bool *backward);

/** Whether the trace has no timing: the pictures draw the synthetic clock. */
static inline bool fs_untimed(const struct fs_vtree *vt)
{
	return vt->ti.timing == TFS_TIMING_NONE;
}

/* ---- text helpers (vwalk.c) ---- */

/**
 * Name @s as XML text: as the text views print it (fs_sb_name(), FORMAT.md §9.1), with
 * &amp; &lt; &gt; and U+FFFE, U+FFFF (no XML characters) as \xHH; at most @max bytes of @s,
 * cut between two characters and then followed by "...".
 */
void fs_xml_text(struct fs_sbuf *b, const char *s, size_t max);
/** A duration for people: "812 ns", "12.3 us", "4.56 ms", "1.23 s" (untimed: "N events"). */
void fs_put_duration(struct fs_sbuf *b, uint64_t ns, bool untimed);

/* ---- vwindow.c: time windows, made when looked up ---- */

/**
 * Add window/ to directory @dir of @sc (the root's or rank @rank's). Its listed entries are
 * fixed zoom levels; any other `<from>-<to>` is made by a lookup. Listed by @key.
 * @return 0 or -ENOMEM
 */
int fs_windows_add(struct fs_vtree *vt, uint32_t dir, struct fs_scope *sc, uint32_t rank,
		   uint64_t key);
uint64_t fs_window_n_nodes(const struct fs_vtree *vt);
/** Entries listed in window/ directory @d. */
uint32_t fs_window_n_listed(const struct fs_vtree *vt, const struct vnode *d);
/** Listed entry @idx of window/ directory @d, made on first use. @return 0, -ENOENT, -errno */
int fs_window_child(const struct fs_vtree *vt, const struct vnode *d, uint32_t idx,
		    uint64_t *ino);
/** The window @name of window/ directory @d, made on first use. @return 0, -ENOENT, -errno */
int fs_window_lookup(const struct fs_vtree *vt, const struct vnode *d, const char *name,
		     uint64_t *ino);
/** Accepts a tree without windows. */
void fs_windows_free(struct fs_vtree *vt);

/* ---- vflows.c ---- */

/**
 * The end of a whole trace.json's tail: each rank's live heap bytes as a counter (scopes of
 * whole ranks), then the flows of messages and thread starts between events of @sc, as
 * objects after those already in @b (*@first: none yet). @return 0 or -errno
 */
int fs_chrome_extras(struct fs_vtree *vt, const struct fs_scope *sc, struct fs_sbuf *b,
		     bool *first);

/* ---- generators ---- */

FS_GEN_DECL(fs_timeline_new);
FS_GEN_DECL(fs_speedscope_new);
FS_GEN_DECL(fs_heap_new);
FS_GEN_DECL(fs_leaks_new);
/** Whether the trace records heap allocations (heap.txt and leaks.folded in ranks). */
bool fs_heap_wanted(struct fs_vtree *vt, uint32_t rank);
/** Accepts NULL. */
void fs_heap_free(struct fs_heap *h);

/** One point of a rank's live-bytes series (trace.json's counter). */
struct fs_heap_sample {
	uint64_t ts_ns, bytes;
};

/**
 * The live-bytes series of @rank, whose threads are @segs[0..@n) (computed once with its
 * heap.txt). *@v is borrowed from the tree. @return 0 or -errno
 */
int fs_heap_series(struct fs_vtree *vt, uint32_t rank, const struct fs_seg *segs, uint32_t n,
		   const struct fs_heap_sample **v, size_t *n_v);

#endif
