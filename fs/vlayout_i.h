/*
 * The tree's declaration (vlayout.c): one row per file or directory a directory may hold,
 * and the builders (vbuild.c) of the rows that are more than one generated file. Only
 * fs/v*.c include this.
 */
#ifndef TFS_FS_VLAYOUT_I_H
#define TFS_FS_VLAYOUT_I_H

#include <stdbool.h>
#include <stdint.h>

#include "vnode_i.h"

/* The kinds of directory of the tree (struct fs_dir.in). */
enum fs_in {
	FS_IN_ROOT,   /* the root: the whole run */
	FS_IN_RANK,   /* ranks/<r>/ */
	FS_IN_THREAD, /* threads/<t>/ of a rank or of a phase */
	FS_IN_PHASE,  /* ranks/<r>/phases/<name>/ */
	FS_IN_CALLS,  /* calls/<name>/ (laid out by vcalls.c) */
	FS_IN_WINDOW, /* window/<from>-<to>/ (laid out by vwindow.c) */
	FS_IN_REPLAY, /* replay/ */
	FS_IN_COUNT,
};

/* struct fs_entry.in: the bits of the directories an entry is in. */
enum {
	FS_IN_ROOT_B = 1u << FS_IN_ROOT,
	FS_IN_RANK_B = 1u << FS_IN_RANK,
	FS_IN_THREAD_B = 1u << FS_IN_THREAD,
	FS_IN_PHASE_B = 1u << FS_IN_PHASE,
	FS_IN_CALLS_B = 1u << FS_IN_CALLS,
	FS_IN_WINDOW_B = 1u << FS_IN_WINDOW,
	FS_IN_REPLAY_B = 1u << FS_IN_REPLAY,
};

/** A directory being laid out: its node, kind, scope and rank (UINT32_MAX: none). */
struct fs_dir {
	uint32_t node;
	enum fs_in in;
	struct fs_scope *scope;
	uint32_t rank;
};

/**
 * One entry of the tree: a file made by @gen, or something @add lays out, or (neither) a
 * directory the builder makes itself. Listed in the order of the table.
 */
struct fs_entry {
	const char *name;  /* a file name; a directory's ends in '/' */
	unsigned in;	   /* FS_IN_*_B: the directories it is in */
	const char *only;  /* when it is there only sometimes ("the trace records files"), or NULL */
	const char *what;  /* what it holds, for README.txt */
	/** Whether rank @rank's directories have it (NULL: always). */
	bool (*wanted)(struct fs_vtree *vt, uint32_t rank);
	fs_gen_fn gen;	   /* made once at the first stat or open over the directory's scope */
	bool tree_wide;	   /* @gen reads the tree's tables, not the directory's scope */
	/** Lay it out in @d, listed by @key. @return 0 or -errno */
	int (*add)(struct fs_vtree *vt, const struct fs_dir *d, uint64_t key);
	/** Trace facts appended to @what in README.txt (NULL: none). */
	void (*note)(const struct fs_vtree *vt, struct fs_sbuf *b);
};

/** Lay out the entries of directory @d. @return 0, -ENOMEM or a reader error */
int fs_layout_add(struct fs_vtree *vt, const struct fs_dir *d);
/** The listing key of the directory @name ("threads/") the builder makes itself. */
uint64_t fs_layout_key(const char *name);
/** README.txt's layout section; @vt adds the trace's facts (NULL: none). */
void fs_layout_readme(const struct fs_vtree *vt, struct fs_sbuf *b);

/* ---- vbuild.c: the entries that are more than one generated file ---- */

int fs_build_readme(struct fs_vtree *vt, const struct fs_dir *d, uint64_t key);
int fs_build_text(struct fs_vtree *vt, const struct fs_dir *d, uint64_t key);
int fs_build_jsonl(struct fs_vtree *vt, const struct fs_dir *d, uint64_t key);
int fs_build_chrome(struct fs_vtree *vt, const struct fs_dir *d, uint64_t key);
int fs_build_ranks(struct fs_vtree *vt, const struct fs_dir *d, uint64_t key);
int fs_build_replay(struct fs_vtree *vt, const struct fs_dir *d, uint64_t key);
int fs_build_calls(struct fs_vtree *vt, const struct fs_dir *d, uint64_t key);
int fs_build_windows(struct fs_vtree *vt, const struct fs_dir *d, uint64_t key);
void fs_build_split_note(const struct fs_vtree *vt, struct fs_sbuf *b);

/* ---- vmpitypes.c ---- */

/** Whether rank @rank's events hold a call constructing an MPI datatype. */
bool fs_mpi_types_wanted(struct fs_vtree *vt, uint32_t rank);
/** mpi_types.txt of @sc (fs_gen_fn). @return 0 or -errno; @out is new */
FS_GEN_DECL(fs_mpi_types_new);

#endif
