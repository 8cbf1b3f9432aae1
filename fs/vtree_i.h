/*
 * The virtual file tree of one opened trace: the directories and files that `tracefs cat`,
 * `tracefs ls` and the FUSE mount all serve, so there is exactly one rendering path.
 * Nodes are built once from the trace's tables and never move: inode numbers are stable
 * (1 is the root) and every file's exact size is known at its first stat.
 * Reading goes through per-opener handles (struct fs_vfile) that own a tfs_cursor for
 * stream views or borrow a generated buffer for the small generated files.
 * This module does not know FUSE or the command line; it does not print anything.
 *
 * Layout (README.txt inside the tree says the same to users; vbuild.c builds it):
 *
 *   /{README.txt,info.json,trace.json,summary.txt,signatures.txt,grammar.txt}
 *   /ranks/<r>/{trace.txt,events.jsonl,trace.json,summary.txt,stacks.folded}
 *   /ranks/<r>/{backtraces.txt,allocs.folded}   (only for a rank with backtraces)
 *   /ranks/<r>/threads/<t>/{trace.txt,events.jsonl,trace.json}
 *   /ranks/<r>/phases/<name>/{trace.txt,events.jsonl,trace.json,summary.txt,stacks.folded}
 *   /ranks/<r>/phases/<name>/threads/<t>/{trace.txt,events.jsonl,trace.json}
 *   /replay/{README.txt,proxy.c}
 *   and <dir>/trace.json.d/part-NNN.json beside a trace.json too large for one file
 *
 * Phase names are mapped to file names by fs_phase_dirname(). A few files need a decoding
 * pass for their size (summary.txt, stacks.folded, backtraces.txt, allocs.folded, the metadata
 * tail of trace.json): it runs
 * once, at their first fs_vtree_stat() or fs_vfile_open(), from whichever thread comes first.
 */
#ifndef TFS_FS_VTREE_I_H
#define TFS_FS_VTREE_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tfs/reader.h"

#define FS_ROOT_INO 1

struct fs_vtree;
struct fs_vfile;

/** What a node is, as returned by fs_vtree_stat(). */
struct fs_node_info {
	uint64_t ino;	  /**< >= FS_ROOT_INO, stable for the tree's life */
	uint64_t parent;  /**< the root is its own parent */
	const char *name; /**< borrowed from the tree; "" for the root */
	bool is_dir;
	uint64_t size;	     /**< files: exact bytes; directories: 0 */
	uint32_t n_children; /**< directories: entries (without "." and ".."); files: 0 */
};

/**
 * Build the tree of @t. Sizes come from tfs_trace_view_size(); README.txt and info.json
 * are generated now and held by the tree.
 * @param t          borrowed; must outlive the tree (cursors are made from it)
 * @param trace_name shown in README.txt (e.g. the file's base name); may be NULL
 * @return 0, -ENOMEM, or an error of tfs_trace_view_size() (-EINVAL on an inconsistent trace)
 */
int fs_vtree_new(struct tfs_trace *t, const char *trace_name, struct fs_vtree **out);
/** Accepts NULL. Every handle must be closed first. */
void fs_vtree_free(struct fs_vtree *vt);

/** Number of nodes; inodes are FS_ROOT_INO .. FS_ROOT_INO + n - 1. */
uint64_t fs_vtree_n_nodes(const struct fs_vtree *vt);

/**
 * Name and type of @ino without computing anything (a listing needs no sizes, and the
 * size of a profile costs a decoding pass). Thread-safe. @return 0 or -ENOENT
 */
int fs_vtree_peek(const struct fs_vtree *vt, uint64_t ino, const char **name, bool *is_dir);

/**
 * What node @ino is. Thread-safe. The first stat of a profile or trace.json computes its
 * size (decoding its events once); later ones are O(1).
 * @return 0, -ENOENT (no such inode), or -ENOMEM / -TFS_ECORRUPT from that computation
 */
int fs_vtree_stat(const struct fs_vtree *vt, uint64_t ino, struct fs_node_info *info);

/**
 * What fs_vtree_stat() says, but for a rank directory not built yet, or a directory whose
 * insides come at its first use (calls/, phases/, phases/<p>/, trace.json.d/) not filled yet:
 * its name, type and parent, n_children 0, without building or filling it (getattr and a
 * listing's entries need no more).
 * Thread-safe; the name of such a directory lives until the thread's next call.
 * @return as fs_vtree_stat()
 */
int fs_vtree_attr(const struct fs_vtree *vt, uint64_t ino, struct fs_node_info *info);

/**
 * Entry @idx (0-based, in listing order: numeric for ranks and threads, by name otherwise)
 * of directory @dir. @return 0, -ENOENT (no such inode or idx past the end), -ENOTDIR
 */
int fs_vtree_child(const struct fs_vtree *vt, uint64_t dir, uint32_t idx, uint64_t *ino);

/**
 * Find @name in directory @dir (O(log entries)). "." and ".." are understood.
 * @return 0, -ENOENT, -ENOTDIR
 */
int fs_vtree_lookup(const struct fs_vtree *vt, uint64_t dir, const char *name, uint64_t *ino);

/**
 * Resolve a '/'-separated path from the root; leading, trailing and repeated '/' are
 * ignored, so "" and "/" are the root. @return 0, -ENOENT, -ENOTDIR, -ENAMETOOLONG
 */
int fs_vtree_resolve(const struct fs_vtree *vt, const char *path, uint64_t *ino);

/** One event range of one stream that a file shows (fs_vtree_file_views()). */
struct fs_view_seg {
	uint32_t stream;
	uint64_t first, n;
};

/**
 * The stream views file @ino is made of, when it is made of nothing else: its view (enum
 * tfs_view), the one event kind it shows (1 + kind, 0: every kind) and its event ranges in
 * *@segs (new, the caller frees it), in file order; several ranges of a timed trace are
 * interleaved by time (its lines are theirs, in another order).
 * @return 0, -ENOTSUP (a file made otherwise: generated text, a JSON tail), -ENOENT,
 *         -EISDIR or -ENOMEM
 */
int fs_vtree_file_views(struct fs_vtree *vt, uint64_t ino, int *view, uint32_t *call,
			struct fs_view_seg **segs, uint32_t *n);

/**
 * Open file @ino for reading. The handle is used by one thread at a time; any number of
 * handles may be open on the same tree from different threads.
 * @return 0, -ENOENT, -EISDIR, or -ENOMEM / -EINVAL / -TFS_ECORRUPT from the readers
 */
int fs_vfile_open(struct fs_vtree *vt, uint64_t ino, struct fs_vfile **out);
/** Accepts NULL. */
void fs_vfile_close(struct fs_vfile *f);
/** The file's exact size in bytes. */
uint64_t fs_vfile_size(const struct fs_vfile *f);

/**
 * Copy up to @len bytes from byte @off of the file into @buf. The first read of a rank's or
 * phase's merged trace.txt / events.jsonl builds the scope's merge index (one pass).
 * @return bytes copied (0 at or past the end), -TFS_ECORRUPT (fs_vfile_diag() says where)
 *         or -ENOMEM
 */
ssize_t fs_vfile_read(struct fs_vfile *f, void *buf, size_t len, uint64_t off);

/** Where the last failed read found corruption (borrowed from the handle). */
const struct tfs_diag *fs_vfile_diag(const struct fs_vfile *f);

/**
 * Map a phase name (any bytes but NUL) to a directory name: every byte that the text views
 * escape as \xHH, \n, \t or \r (FORMAT.md §9.1: controls, DEL, the C1 controls, bytes of no
 * UTF-8) and '%', '/', '~' become "%XX" (uppercase hex), the rest stays; a name made only
 * of dots gets its first dot as "%2E"; the empty name becomes "%00"; a result longer than
 * 240 bytes is cut there (never inside a %XX or a character). So a directory name is valid
 * UTF-8 without a control character, the string info.json's "dir" holds exactly, and only
 * one name's. Collisions of cut names are resolved by fs_phase_dirs_new().
 * @return the length written to @out (always < @out_cap, NUL-terminated); @out_cap >= 256
 */
size_t fs_phase_dirname(const char *name, char *out, size_t out_cap);

/**
 * The directory name of every phase of @t (indexed like tfs_trace_phase()): its
 * fs_phase_dirname(), with "~<n>" appended when the name was cut (n: the index of the first
 * phase of that name in the rank) or when an earlier phase of the same name and rank covers
 * the same thread (n: the phase's own index). These are the names the tree uses.
 * @return 0, -ENOMEM or an error of tfs_trace_phase()/tfs_trace_stream();
 *         free with fs_phase_dirs_free()
 */
int fs_phase_dirs_new(const struct tfs_trace *t, char ***out);
void fs_phase_dirs_free(char **dirs, uint32_t n_phases);

/* ---- generated files (vgen.c): also used by `tracefs info` ---- */

struct json_t;

/**
 * The facts of `tracefs info --json` and info.json: metadata, timing, ranks, streams,
 * phases, sections, sizes and ratios.
 * @param raw_names  names and metadata strings hold the trace's bytes as they are, for
 *                   `tracefs info` to print with the text escapes (FORMAT.md §9.1): then
 *                   not JSON to dump; else as the JSON views have strings
 *                   (fs_json_bytes_new())
 * @return a new JSON object (json_decref() it), or NULL on ENOMEM
 */
struct json_t *fs_info_json_new(const struct tfs_trace *t, bool raw_names);

/**
 * A JSON string of arbitrary bytes as the JSON views have strings (FORMAT.md §9.1): valid
 * UTF-8 as is, each byte that is no UTF-8 U+FFFD (the replacement character), so that every
 * phase name or metadata value can be shown and the valid UTF-8 around a bad byte stays.
 * @return a new reference, or NULL on ENOMEM
 */
struct json_t *fs_json_bytes_new(const char *s);

/* ---- the layout (vlayout.c): also used by `tracefs --help` ---- */

/**
 * The tree's layout as `tracefs --help` draws it: a line per kind of directory naming what
 * it holds, from the same declaration the tree is built from.
 * @return 0 or -ENOMEM; @out is new (free() it)
 */
int fs_vtree_layout_text(char **out, size_t *len);

#endif
