/*
 * The tree declared once: every file and directory a directory of the tree may hold, one row
 * each, in listing order, with the directories it is in, when it is there, what it holds and
 * how it is made. vbuild.c lays a directory out by fs_layout_add(); README.txt's layout and
 * the tree of `tracefs --help` are written from the same rows, so a new file is one row here
 * plus its generator. This file renders no file's bytes itself, and it does not lay out the
 * insides of calls/<name>/ (vcalls.c) and window/<from>-<to>/ (vwindow.c), whose rows only
 * say what they hold.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vlayout_i.h"
#include "vpict_i.h"

/* The directories, as README.txt and --help name them (enum fs_in order). */
static const char *const dir_names[FS_IN_COUNT] = {
    "/ (the root)", "ranks/<r>/", ".../threads/<t>/", "ranks/<r>/phases/<name>/",
    ".../calls/<name>/",
    ".../window/<from>-<to>/", "replay/",
};

static bool has_backtraces(struct fs_vtree *vt, uint32_t rank)
{
	return tfs_trace_n_backtraces(vt->trace, rank) > 0;
}

static bool records_files(struct fs_vtree *vt, uint32_t rank)
{
	return fs_files_wanted(vt);
}

#define ALL_SCOPES (FS_IN_ROOT_B | FS_IN_RANK_B | FS_IN_THREAD_B | FS_IN_PHASE_B)

static const struct fs_entry entries[] = {
    {"README.txt", FS_IN_ROOT_B, NULL, "this file", .add = fs_build_readme},
    {"info.json", FS_IN_ROOT_B, NULL,
     "facts about the trace as one JSON object: metadata, timing, ranks, streams, phases, "
     "sections, sizes, and for a recording its processes (program, pid, parent rank, end); "
     "numbers are JSON numbers (metadata pid, ppid, backtrace_depth, backtraces, "
     "dropped_events, mpi_size too), streams and threads sorted by rank and thread",
     .gen = fs_info_text_new, .tree_wide = true},
    {"trace.txt", (ALL_SCOPES & ~FS_IN_ROOT_B) | FS_IN_CALLS_B | FS_IN_WINDOW_B, NULL,
     "the directory's events as text, one line each: a rank's (or a phase's) threads "
     "interleaved by time",
     .add = fs_build_text},
    {"events.jsonl", ALL_SCOPES | FS_IN_CALLS_B, NULL,
     "the same events as JSON lines; the root's is every rank's events.jsonl, in rank order",
     .add = fs_build_jsonl},
    {"trace.json", ALL_SCOPES | FS_IN_WINDOW_B, NULL,
     "the events as Chrome trace-event JSON (Perfetto, chrome://tracing, speedscope); a "
     "recording's processes are named \"<program> (pid <n>)\", threads the program named "
     "\"<name> (thread <t>)\"",
     .add = fs_build_chrome},
    {"trace.json.d/", ALL_SCOPES, "trace.json holds more than the split size of events",
     "the same events cut into part-000.json, part-001.json..., each a standalone JSON array "
     "of at most that size with its own metadata (phases and flows are in part-000.json), so "
     "that every JavaScript engine loads a part (V8's strings stop at 512 MiB)",
     .note = fs_build_split_note},
    {"summary.txt", FS_IN_ROOT_B | FS_IN_RANK_B | FS_IN_PHASE_B, NULL,
     "profile of the directory's events: count, time and bytes per event kind and zone",
     .gen = fs_summary_new},
    {"stacks.folded", FS_IN_RANK_B | FS_IN_PHASE_B, NULL,
     "folded stacks of the directory's events (zones, backtraces) for flame graphs",
     .gen = fs_stacks_new},
    {"signatures.txt", FS_IN_ROOT_B, NULL, "the call-signature table", .gen = fs_signatures_new,
     .tree_wide = true},
    {"grammar.txt", FS_IN_ROOT_B, NULL, "the grammars the event streams are compressed into",
     .gen = fs_grammar_new, .tree_wide = true},
    {"backtraces.txt", FS_IN_RANK_B,
     "the rank's trace holds backtraces (events name a stack=stack#<n>)",
     "the rank's call stacks with their source locations", .wanted = has_backtraces,
     .gen = fs_backtraces_new},
    {"allocs.folded", FS_IN_RANK_B,
     "the rank's trace holds backtraces", "the bytes allocated per call stack",
     .wanted = has_backtraces, .gen = fs_allocs_new},
    {"files.txt", FS_IN_RANK_B, "the trace records files",
     "every file id of the rank with its name, kind, opening flags, calls, bytes and first "
     "use",
     .wanted = records_files, .gen = fs_files_new},
    {"mpi_types.txt", FS_IN_RANK_B, "the rank constructed MPI datatypes",
     "one line per call of the rank constructing an MPI derived datatype, thread by thread in "
     "event order: \"type#<n> = MPI_Type_vector(count=4, blocklength=1, stride=4, "
     "oldtype=MPI_INT)\", the call as trace.txt prints it with its newtype output first; an "
     "id freed and made again has a line per making",
     .wanted = fs_mpi_types_wanted, .gen = fs_mpi_types_new},
    {.name = "threads/", .in = FS_IN_RANK_B | FS_IN_PHASE_B,
     .what = "threads/<t>/: trace.txt, events.jsonl, trace.json of one thread of the directory"},
    {.name = "phases/", .in = FS_IN_RANK_B,
     .what = "phases/<name>/: the files of ranks/<r>/ restricted to one phase, with threads/<t>/ "
     "inside for each thread the phase covers"},
    {"ranks/", FS_IN_ROOT_B, NULL, "ranks/<r>/: the files of rank <r>, all its threads",
     .add = fs_build_ranks},
    {"replay/", FS_IN_ROOT_B, NULL,
     "a C program making the trace's calls again and how to build and run it",
     .add = fs_build_replay},
    {"README.txt", FS_IN_REPLAY_B, NULL,
     "how to build and run proxy.c, and what it replays", .gen = fs_replay_readme_new,
     .tree_wide = true},
    {"proxy.c", FS_IN_REPLAY_B, NULL,
     "a C program making the trace's calls again (each rank, each thread, same order and "
     "arguments), its functions the grammars' rules",
     .gen = fs_replay_proxy_new, .tree_wide = true},
    {"calls/", FS_IN_RANK_B | FS_IN_THREAD_B | FS_IN_PHASE_B,
     "some call occurs",
     "calls/<name>/ (calls/pwrite/, calls/zone/): trace.txt and events.jsonl holding the "
     "lines of the directory's files whose event is that call, byte for byte",
     .add = fs_build_calls},
    {"timeline.svg", FS_IN_ROOT_B | FS_IN_RANK_B | FS_IN_WINDOW_B, NULL,
     "a picture of the directory's events: threads as lanes of nested zones and calls "
     "coloured by kind, phases as bands, a time axis, a legend, each bar's name and duration "
     "on hover",
     .gen = fs_timeline_new},
    {"profile.speedscope.json", FS_IN_RANK_B, NULL,
     "speedscope's own format: an evented profile per thread", .gen = fs_speedscope_new},
    {"heap.txt", FS_IN_RANK_B, "the trace records the malloc family",
     "calls, peak live bytes and the stacks live at it, leaks and temporary allocations, a "
     "log2 histogram of freed blocks' lifetimes; how many events the capture dropped, when it "
     "did (their calls are missing from the figures)",
     .wanted = fs_heap_wanted, .gen = fs_heap_new},
    {"leaks.folded", FS_IN_RANK_B, "the trace records the malloc family",
     "leaked bytes per call stack (flame graphs)", .wanted = fs_heap_wanted,
     .gen = fs_leaks_new},
    {"window/", FS_IN_ROOT_B | FS_IN_RANK_B, NULL,
     "window/<from>-<to>/: the files of that span of the directory's events: nanoseconds "
     "since the trace's origin (event indices without timing), or with a unit: "
     "window/1.5ms-2ms; window/ lists the quarters and sixteenths of the time up to the "
     "directory's last event, any other span is made when its name is looked up",
     .add = fs_build_windows},
};

#define N_ENTRIES (sizeof(entries) / sizeof(entries[0]))

uint64_t fs_layout_key(const char *name)
{
	for (size_t i = 0; i < N_ENTRIES; i++) {
		if (!strcmp(entries[i].name, name))
			return i;
	}
	assert(!"a name the layout does not declare");
	return N_ENTRIES;
}

int fs_layout_add(struct fs_vtree *vt, const struct fs_dir *d)
{
	int rc = 0;

	for (size_t i = 0; i < N_ENTRIES && rc == 0; i++) {
		const struct fs_entry *e = &entries[i];

		if (!(e->in & (1u << d->in)) || (e->wanted && !e->wanted(vt, d->rank)))
			continue;
		if (e->gen)
			rc = fs_tree_add_gen(vt, d->node, e->name, i, e->tree_wide ? NULL : d->scope,
					     d->rank, e->gen);
		else if (e->add)
			rc = e->add(vt, d, i);
	}
	return rc;
}

/* "/, ranks/<r>/ and .../threads/<t>/": the directories of @in. */
static void put_dirs(struct fs_sbuf *b, unsigned in)
{
	unsigned left = in;

	for (unsigned k = 0; k < FS_IN_COUNT; k++) {
		if (!(in & (1u << k)))
			continue;
		left &= ~(1u << k);
		fs_sb_printf(b, "%s%s", dir_names[k], !left ? "" : (left & (left - 1)) ? ", " : " and ");
	}
}

void fs_layout_readme(const struct fs_vtree *vt, struct fs_sbuf *b)
{
	fs_sb_printf(b, "Layout (each entry: what it holds, then the directories it is in)\n");
	for (size_t i = 0; i < N_ENTRIES; i++) {
		const struct fs_entry *e = &entries[i];
		struct fs_sbuf t = {0};

		fs_sb_printf(&t, "%s", e->what);
		if (e->only)
			fs_sb_printf(&t, "; only when %s", e->only);
		if (e->note && vt)
			e->note(vt, &t);
		fs_sb_printf(&t, ". In ");
		put_dirs(&t, e->in);
		if (strlen(e->name) + 2 < 20)
			fs_sb_printf(b, "  %-18s", e->name);
		else
			fs_sb_printf(b, "  %s\n%20s", e->name, "");
		if (t.data)
			fs_sb_wrap(b, t.data, 20, 20);
		b->failed |= t.failed;
		fs_sb_fini(&t);
	}
}

/* The tree as `tracefs --help` draws it: per directory, the names of its entries. */
static void put_tree(struct fs_sbuf *b)
{
	for (unsigned k = 0; k < FS_IN_COUNT; k++) {
		struct fs_sbuf names = {0};
		const char *sep = "";

		fs_sb_printf(b, "  %s", dir_names[k]);
		for (size_t i = 0; i < N_ENTRIES; i++) {
			if (!(entries[i].in & (1u << k)))
				continue;
			fs_sb_printf(&names, "%s%s%s", sep, entries[i].name,
				     entries[i].only ? "*" : "");
			sep = ", ";
		}
		if (names.data)
			fs_sb_wrap(b, names.data, 2 + strlen(dir_names[k]), 4);
		b->failed |= names.failed;
		fs_sb_fini(&names);
	}
	fs_sb_printf(b, "  (* only in some traces: README.txt says when)\n");
}

int fs_vtree_layout_text(char **out, size_t *len)
{
	struct fs_sbuf b = {0};

	put_tree(&b);
	return fs_sb_detach(&b, out, len);
}
