/*
 * synth_demo: writes a deterministic synthetic trace through the writer API, shaped like a
 * small MPI + threads I/O program: ranks x threads streams, phases init/solve/output,
 * zones, allocations, strided pwrites, reads, marks and point-to-point messages, with
 * jittered timing from a seeded PRNG. With --dump it also writes every event it appended
 * (plus the schema, phases, backtraces and symbols) as JSON lines, so tests can derive the
 * expected rendered views without any tracefs code. Even ranks have backtraces (a fixed
 * set of call stacks with shared prefixes, recursion, inlined and unsymbolised frames) that
 * their aligned_alloc events name; odd ranks have none. I/O calls follow the capture's
 * convention (FORMAT.md §4): `fd` then an attached `path`, files opened by `open` or declared
 * by `fd_file`, and every rank names its files (FORMAT.md §12): some names are the same at
 * every rank, some differ per rank, one has every escape, one is missing at odd ranks. It
 * captures nothing from a real program; the capture library will.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfs/writer.h"

enum kind_id {
	K_ZONE, K_MALLOC, K_FREE, K_PWRITE, K_READ, K_MARK, K_SEND, K_RECV, K_ALIGNED, K_OPEN,
	K_ACCEPT, K_FD_FILE, N_KINDS
};

/* as the capture's: the zones open around it, by which an untimed trace still nests */
static const struct tfs_arg_desc zone_args[] = {
    {"name", TFS_TYPE_STR, TFS_ENC_STR, 0, NULL},
    {"depth", TFS_TYPE_U64, TFS_ENC_SIG, 0, NULL},
};
static const struct tfs_arg_desc malloc_args[] = {
    {"size", TFS_TYPE_U64, TFS_ENC_VAL, TFS_ARG_BYTES, NULL},
    {"ptr", TFS_TYPE_HEX, TFS_ENC_VAL, TFS_ARG_RESULT, NULL},
};
static const struct tfs_arg_desc free_args[] = {
    {"ptr", TFS_TYPE_HEX, TFS_ENC_VAL, 0, NULL},
};
/* a descriptor, then its file's id: views print `fd=4</data/out.0.0.dat>` */
static const struct tfs_arg_desc pwrite_args[] = {
    {"fd", TFS_TYPE_I64, TFS_ENC_SIG, 0, NULL},
    {"path", TFS_TYPE_U64, TFS_ENC_SYM, TFS_ARG_ATTACH | TFS_ARG_OUTPUT, "file"},
    {"count", TFS_TYPE_U64, TFS_ENC_VAL, TFS_ARG_BYTES, NULL},
    {"offset", TFS_TYPE_U64, TFS_ENC_VAL, 0, NULL},
    {"result", TFS_TYPE_I64, TFS_ENC_VAL, TFS_ARG_RESULT, NULL},
};
static const struct tfs_arg_desc read_args[] = {
    {"fd", TFS_TYPE_I64, TFS_ENC_SIG, 0, NULL},
    {"path", TFS_TYPE_U64, TFS_ENC_SYM, TFS_ARG_ATTACH | TFS_ARG_INPUT, "file"},
    {"count", TFS_TYPE_U64, TFS_ENC_SIG, TFS_ARG_BYTES, NULL},
    {"result", TFS_TYPE_I64, TFS_ENC_VAL, TFS_ARG_RESULT, NULL},
};
/* the opening call: its path and the file id it gives the path (not attached) */
static const struct tfs_arg_desc open_args[] = {
    {"path", TFS_TYPE_STR, TFS_ENC_STR, 0, NULL},
    {"flags", TFS_TYPE_HEX, TFS_ENC_SIG, 0, NULL},
    {"file", TFS_TYPE_U64, TFS_ENC_SYM, 0, "file"},
    {"result", TFS_TYPE_I64, TFS_ENC_VAL, TFS_ARG_RESULT, NULL},
};
/* a call returning a descriptor: the result's file attached after it */
static const struct tfs_arg_desc accept_args[] = {
    {"fd", TFS_TYPE_I64, TFS_ENC_SIG, 0, NULL},
    {"path", TFS_TYPE_U64, TFS_ENC_SYM, TFS_ARG_ATTACH, "file"},
    {"result", TFS_TYPE_I64, TFS_ENC_VAL, TFS_ARG_RESULT, NULL},
    {"peer", TFS_TYPE_U64, TFS_ENC_SYM, TFS_ARG_ATTACH, "file"},
};
/* a descriptor the program did not open through a recorded call (stdin) */
static const struct tfs_arg_desc fd_file_args[] = {
    {"fd", TFS_TYPE_I64, TFS_ENC_SIG, 0, NULL},
    {"path", TFS_TYPE_STR, TFS_ENC_STR, 0, NULL},
    {"file", TFS_TYPE_U64, TFS_ENC_SYM, 0, "file"},
};
static const struct tfs_arg_desc mark_args[] = {
    {"message", TFS_TYPE_STR, TFS_ENC_STR, 0, NULL},
};
/* tags as MPI traces have them, derived from a rank: the sender's, so receives match sends */
static const struct tfs_arg_desc send_args[] = {
    {"dest", TFS_TYPE_I64, TFS_ENC_RANK, 0, NULL},
    {"tag", TFS_TYPE_I64, TFS_ENC_RVAL, 0, NULL},
    {"bytes", TFS_TYPE_U64, TFS_ENC_VAL, TFS_ARG_BYTES, NULL},
};
static const struct tfs_arg_desc recv_args[] = {
    {"src", TFS_TYPE_I64, TFS_ENC_RANK, 0, NULL},
    {"tag", TFS_TYPE_I64, TFS_ENC_RVAL, 0, NULL},
    {"bytes", TFS_TYPE_U64, TFS_ENC_VAL, TFS_ARG_RESULT | TFS_ARG_BYTES, NULL},
};

/* An allocation that names its call stack: backtrace stack#<n> of the event's rank. */
static const struct tfs_arg_desc aligned_args[] = {
    {"alignment", TFS_TYPE_U64, TFS_ENC_SIG, 0, NULL},
    {"size", TFS_TYPE_U64, TFS_ENC_VAL, TFS_ARG_BYTES, NULL},
    {"stack", TFS_TYPE_U64, TFS_ENC_SYM, 0, "stack"},
    {"ptr", TFS_TYPE_HEX, TFS_ENC_VAL, TFS_ARG_RESULT, NULL},
};

#define N_ARGS(a) (uint32_t)(sizeof(a) / sizeof((a)[0]))
// clang-format off
static const struct tfs_kind_desc kinds[N_KINDS] = {
	[K_ZONE] = {"zone", "zone", N_ARGS(zone_args), zone_args},
	[K_MALLOC] = {"malloc", "alloc", N_ARGS(malloc_args), malloc_args},
	[K_FREE] = {"free", "alloc", N_ARGS(free_args), free_args},
	[K_PWRITE] = {"pwrite", "io", N_ARGS(pwrite_args), pwrite_args},
	[K_READ] = {"read", "io", N_ARGS(read_args), read_args},
	[K_MARK] = {"mark", "user", N_ARGS(mark_args), mark_args},
	[K_SEND] = {"send", "mpi", N_ARGS(send_args), send_args},
	[K_RECV] = {"recv", "mpi", N_ARGS(recv_args), recv_args},
	[K_ALIGNED] = {"aligned_alloc", "alloc", N_ARGS(aligned_args), aligned_args},
	[K_OPEN] = {"open", "io", N_ARGS(open_args), open_args},
	[K_ACCEPT] = {"accept", "io", N_ARGS(accept_args), accept_args},
	[K_FD_FILE] = {"fd_file", "io", N_ARGS(fd_file_args), fd_file_args},
};
// clang-format on

/* Strings with every escape class of FORMAT.md §9.1 in them. */
static const char *const zone_names[] = {
    "init",	   "init\tconfig",    "solve/step",
    "caf\xc3\xa9", "raw\x01\x7f\xff", "output \"final\"",
    "back\\slash", "step;sub",
};

struct opts {
	const char *out, *dump;
	uint64_t events;
	uint64_t seed;
	uint32_t ranks, threads;
	struct tfs_writer_opts w;
	bool odd_phases;
	bool end_order;
};

/*
 * Events are appended as they start or, with --end-order, as they end: the same events in
 * the order the capture records them (metadata event_order=end). Zones are scopes, as a
 * program's are: a zone opens, the events inside it happen, and it closes after the last of
 * them, so zones and the events in them always nest. In start order a zone's event must
 * come before the events inside it, whose end it does not know yet: while a zone is open,
 * events wait here (the zone's with its duration still to come) and are appended when the
 * outermost zone closes. In end order a zone is appended when it closes, after the events
 * inside it, as the capture does.
 */
struct pending {
	enum kind_id k;
	uint64_t ts_ns, dur_ns;
	union tfs_arg a[5];
};

/* A zone that is open: its start and, in start order, where its event waits. */
struct open_zone {
	uint64_t ts_ns;
	const char *name;
	size_t held; /* index in gen.held of its event (start order) */
};

struct gen {
	struct tfs_wstream *s;
	uint32_t rank, thread, n_ranks;
	uint64_t ts_ns;
	uint64_t rng;
	uint32_t kind_id[N_KINDS];
	FILE *dump;
	int rc;
	bool end_order;
	uint64_t n_events; /* events emitted so far, appended or held: the next event's index */
	struct open_zone *open; /* innermost last */
	size_t n_open, open_cap;
	struct pending *held; /* start order, while a zone is open: events not appended yet */
	size_t n_held, held_cap;
	char stdin_name[32], out_name[64], in_name[64]; /* the stream's files (file_names) */
};

/* xorshift64* */
static uint64_t rnd(struct gen *g)
{
	g->rng ^= g->rng >> 12;
	g->rng ^= g->rng << 25;
	g->rng ^= g->rng >> 27;
	return g->rng * UINT64_C(2685821657736338717);
}

static uint64_t below(struct gen *g, uint64_t n)
{
	return rnd(g) % n;
}

static void dump_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\')
			fputc(*p, f);
		else
			fprintf(f, "\\u%04x", *p);
	}
	fputc('"', f);
}

static void dump_event(struct gen *g, enum kind_id k, uint64_t ts_ns, uint64_t dur_ns,
		       const union tfs_arg *a)
{
	const struct tfs_kind_desc *d = &kinds[k];

	fprintf(g->dump,
		"{\"rank\":%" PRIu32 ",\"thread\":%" PRIu32 ",\"kind\":\"%s\",\"ts\":%" PRIu64
		",\"dur\":%" PRIu64 ",\"args\":[",
		g->rank, g->thread, d->name, ts_ns, dur_ns);
	for (uint32_t i = 0; i < d->n_args; i++) {
		if (i)
			fputc(',', g->dump);
		if (d->args[i].type == TFS_TYPE_STR)
			dump_str(g->dump, a[i].s);
		else if (d->args[i].type == TFS_TYPE_I64 || d->args[i].enc == TFS_ENC_RANK)
			fprintf(g->dump, "%" PRId64, a[i].i);
		else
			fprintf(g->dump, "%" PRIu64, a[i].u);
	}
	fputs("]}\n", g->dump);
}

static void append(struct gen *g, enum kind_id k, uint64_t ts_ns, uint64_t dur_ns,
		   const union tfs_arg *a)
{
	int rc;

	if (g->rc)
		return;
	rc = tfs_wstream_append(g->s, g->kind_id[k], ts_ns, dur_ns, a);
	if (rc < 0) {
		fprintf(stderr, "synth_demo: cannot append event: %s\n", strerror(-rc));
		g->rc = rc;
		return;
	}
	if (g->dump)
		dump_event(g, k, ts_ns, dur_ns, a);
}

/* Grow *@v (of *@cap elements of @size bytes) to hold @n. @return false on ENOMEM */
static bool grow(struct gen *g, void **v, size_t *cap, size_t n, size_t size)
{
	size_t c = *cap ? 2 * *cap : 16;
	void *p;

	if (n <= *cap)
		return true;
	p = realloc(*v, c * size);
	if (!p) {
		g->rc = -ENOMEM;
		return false;
	}
	*v = p;
	*cap = c;
	return true;
}

/* An event at its place in the stream: held while a zone waits for its end, else appended. */
static void place(struct gen *g, enum kind_id k, uint64_t ts_ns, uint64_t dur_ns,
		  const union tfs_arg *a)
{
	struct pending *p;

	g->n_events++;
	if (g->end_order || g->n_open == 0) {
		append(g, k, ts_ns, dur_ns, a);
		return;
	}
	if (!grow(g, (void **)&g->held, &g->held_cap, g->n_held + 1, sizeof(*g->held)))
		return;
	p = &g->held[g->n_held++];
	p->k = k;
	p->ts_ns = ts_ns;
	p->dur_ns = dur_ns;
	memcpy(p->a, a, kinds[k].n_args * sizeof(*a));
}

/* The start of the next event: the clock moves on by a jittered gap. */
static uint64_t next_start(struct gen *g)
{
	uint64_t gap = 150 + below(g, 200);

	if (below(g, 2000) == 0)
		gap += 1000000 + below(g, 4000000); /* a pause: descheduled, page faults... */
	g->ts_ns += gap;
	return g->ts_ns;
}

/* Emit one event after a jittered gap; the clock then moves past its duration. */
static void emit(struct gen *g, enum kind_id k, uint64_t dur_ns, const union tfs_arg *a)
{
	if (g->rc)
		return;
	next_start(g);
	place(g, k, g->ts_ns, dur_ns, a);
	g->ts_ns += dur_ns;
}

static uint64_t jitter(struct gen *g, uint64_t base)
{
	return base + below(g, base / 4 + 1);
}

/* A zone with nothing inside it. */
static void zone(struct gen *g, const char *name)
{
	union tfs_arg a[2] = {{.s = name}, {.u = g->n_open}};

	emit(g, K_ZONE, jitter(g, 40), a);
}

/* Open a zone: the events emitted until zone_close() lie inside it. */
static void zone_open(struct gen *g, const char *name)
{
	union tfs_arg a[2] = {{.s = name}, {.u = g->n_open}};
	struct open_zone *z;

	if (g->rc ||
	    !grow(g, (void **)&g->open, &g->open_cap, g->n_open + 1, sizeof(*g->open)))
		return;
	z = &g->open[g->n_open];
	z->ts_ns = next_start(g);
	z->name = name;
	z->held = g->n_held;
	if (!g->end_order) {
		g->n_open++; /* so that place() holds the zone's own event */
		place(g, K_ZONE, z->ts_ns, 0, a);
		g->n_open--;
	}
	g->n_open++;
}

/* Close the innermost open zone a jittered moment after the last event inside it. */
static void zone_close(struct gen *g)
{
	struct open_zone z;
	union tfs_arg a[2];

	if (g->rc || g->n_open == 0)
		return;
	z = g->open[--g->n_open];
	g->ts_ns += jitter(g, 30);
	if (g->end_order) {
		a[0].s = z.name;
		a[1].u = g->n_open;
		place(g, K_ZONE, z.ts_ns, g->ts_ns - z.ts_ns, a);
		return;
	}
	g->held[z.held].dur_ns = g->ts_ns - z.ts_ns;
	if (g->n_open > 0)
		return;
	for (size_t i = 0; i < g->n_held; i++)
		append(g, g->held[i].k, g->held[i].ts_ns, g->held[i].dur_ns, g->held[i].a);
	g->n_held = 0;
}

static void mark(struct gen *g, const char *msg)
{
	union tfs_arg a[1] = {{.s = msg}};

	emit(g, K_MARK, jitter(g, 20), a);
}

static uint64_t do_malloc(struct gen *g, uint64_t size, uint64_t ptr)
{
	union tfs_arg a[2] = {{.u = size}, {.u = ptr}};

	emit(g, K_MALLOC, jitter(g, 90), a);
	return ptr;
}

static void do_free(struct gen *g, uint64_t ptr)
{
	union tfs_arg a[1] = {{.u = ptr}};

	emit(g, K_FREE, jitter(g, 60), a);
}

/* The file id of descriptor @fd: the descriptors here never change files. */
static uint64_t file_of(int64_t fd)
{
	return (uint64_t)fd + 10;
}

static void do_pwrite(struct gen *g, int64_t fd, uint64_t count, uint64_t off, int64_t result)
{
	union tfs_arg a[5] = {
	    {.i = fd}, {.u = file_of(fd)}, {.u = count}, {.u = off}, {.i = result},
	};

	emit(g, K_PWRITE, jitter(g, 1500 + count / 64), a);
}

static void do_read(struct gen *g, int64_t fd, uint64_t count, int64_t result)
{
	union tfs_arg a[4] = {{.i = fd}, {.u = file_of(fd)}, {.u = count}, {.i = result}};

	emit(g, K_READ, jitter(g, 800), a);
}

static void do_open(struct gen *g, const char *path, uint64_t flags, int64_t fd)
{
	union tfs_arg a[4] = {{.s = path}, {.u = flags}, {.u = file_of(fd)}, {.i = fd}};

	emit(g, K_OPEN, jitter(g, 2500), a);
}

/* accept on listening descriptor @fd: @result, the new descriptor, or -1 (no file) */
static void do_accept(struct gen *g, int64_t fd, int64_t result)
{
	union tfs_arg a[4] = {{.i = fd},
			      {.u = file_of(fd)},
			      {.i = result},
			      {.u = result < 0 ? TFS_SYM_NONE : file_of(result)}};

	emit(g, K_ACCEPT, jitter(g, 5000), a);
}

static void do_fd_file(struct gen *g, int64_t fd, const char *path)
{
	union tfs_arg a[3] = {{.i = fd}, {.s = path}, {.u = file_of(fd)}};

	emit(g, K_FD_FILE, 0, a);
}

/* @tag: tfs_rval() (dumped as such: the value times 2, plus 1 when derived from a rank) */
static void do_msg(struct gen *g, enum kind_id k, int64_t peer, uint64_t tag, uint64_t bytes)
{
	union tfs_arg a[3] = {{.i = peer}, {.u = tag}, {.u = bytes}};

	emit(g, k, jitter(g, 3000), a);
}

/*
 * The call stacks of an even rank: code addresses of a fictitious program, outermost first.
 * LIBC is rank-specific (a library mapped at a different address per process).
 */
enum site {
	S_MAIN_INIT, S_MAIN_SOLVE, S_MAIN_OUTPUT, S_INIT_ALLOC, S_SOLVE_STEP, S_STEP_GROW,
	S_STEP_ALLOC, S_STEP_RECURSE, S_LIBC, S_UNKNOWN, N_SITES
};

static uint64_t site_addr(enum site s, uint32_t rank)
{
	static const uint64_t addr[N_SITES] = {
	    0x401010, 0x401024, 0x401038, 0x401450, 0x401808,
	    0x401a44, 0x401a90, 0x401b0c, 0,	      0x4c0ffe,
	};

	return s == S_LIBC ? UINT64_C(0x7f3a1c09a1b0) + ((uint64_t)rank << 32) : addr[s];
}

#define MAX_DEPTH 6
static const struct {
	uint32_t n;
	enum site f[MAX_DEPTH];
} stacks[] = {
    {2, {S_MAIN_INIT, S_INIT_ALLOC}},
    {3, {S_MAIN_SOLVE, S_SOLVE_STEP, S_STEP_GROW}},
    {3, {S_MAIN_SOLVE, S_SOLVE_STEP, S_STEP_ALLOC}},
    {5, {S_MAIN_SOLVE, S_SOLVE_STEP, S_STEP_RECURSE, S_STEP_RECURSE, S_STEP_GROW}},
    {3, {S_MAIN_SOLVE, S_SOLVE_STEP, S_LIBC}},
    {2, {S_MAIN_OUTPUT, S_UNKNOWN}},
    {0, {0}},
    {3, {S_MAIN_SOLVE, S_SOLVE_STEP, S_STEP_GROW}}, /* same frames as stack#1 */
};
#define N_STACKS (uint32_t)(sizeof(stacks) / sizeof(stacks[0]))

/* Source frames per site, outermost first (inlined functions after the first); escapes too. */
static const struct {
	enum site s;
	uint32_t n;
	struct tfs_src_frame f[3];
} symbols[] = {
    {S_STEP_GROW, 3, {{"step", "solver.c", 120},
		      {"std::vector<double>::push_back", "/usr/include/c++/12/bits/stl_vector.h",
		       1189},
		      {"grow\\buf", "", 0}}},
    {S_MAIN_INIT, 1, {{"main", "synth.c", 40}}},
    {S_MAIN_SOLVE, 1, {{"main", "synth.c", 42}}},
    {S_MAIN_OUTPUT, 1, {{"main", "synth.c", 44}}},
    {S_INIT_ALLOC, 2, {{"load_config", "config.c", 12}, {"parse;line", "config.h", 7}}},
    {S_SOLVE_STEP, 1, {{"solve", "solver.c", 88}}},
    {S_STEP_ALLOC, 1, {{"step", "solver\tnew.c", 131}}},
    {S_STEP_RECURSE, 1, {{"step", "solver.c", 0}}},
    {S_LIBC, 1, {{"libc.so.6+0x9a1b0", "", 0}}},
};

static void dump_frames(FILE *f, const struct tfs_src_frame *src, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		fputs(i ? ",[" : "[", f);
		dump_str(f, src[i].function);
		fputc(',', f);
		dump_str(f, src[i].file);
		fprintf(f, ",%" PRIu32 "]", src[i].line);
	}
}

/* The backtraces and symbols of an even rank (FORMAT.md §10, §11). */
static int add_stacks(struct tfs_writer *w, FILE *dump, uint32_t rank)
{
	uint64_t frames[MAX_DEPTH];
	int rc = 0;

	for (uint32_t id = 0; id < N_STACKS && rc == 0; id++) {
		for (uint32_t i = 0; i < stacks[id].n; i++)
			frames[i] = site_addr(stacks[id].f[i], rank);
		rc = tfs_writer_add_backtrace(w, rank, id, frames, stacks[id].n);
		if (rc == 0 && dump) {
			fprintf(dump, "{\"backtrace\":%" PRIu32 ",\"rank\":%" PRIu32 ",\"frames\":[",
				id, rank);
			for (uint32_t i = 0; i < stacks[id].n; i++)
				fprintf(dump, "%s%" PRIu64, i ? "," : "", frames[i]);
			fputs("]}\n", dump);
		}
	}
	for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]) && rc == 0; i++) {
		uint64_t addr = site_addr(symbols[i].s, rank);

		rc = tfs_writer_add_symbol(w, rank, addr, symbols[i].f, symbols[i].n);
		if (rc == 0 && dump) {
			fprintf(dump, "{\"symbol\":%" PRIu64 ",\"rank\":%" PRIu32 ",\"frames\":[",
				addr, rank);
			dump_frames(dump, symbols[i].f, symbols[i].n);
			fputs("]}\n", dump);
		}
	}
	if (rc < 0)
		fprintf(stderr, "synth_demo: cannot add the backtraces of rank %" PRIu32 ": %s\n",
			rank, strerror(-rc));
	return rc;
}

static void do_aligned(struct gen *g, uint64_t size, uint32_t stack, uint64_t ptr)
{
	union tfs_arg a[4] = {{.u = 64}, {.u = size}, {.u = stack}, {.u = ptr}};

	if (g->rank % 2 == 0)
		emit(g, K_ALIGNED, jitter(g, 120), a);
}

static uint64_t n_events(const struct gen *g)
{
	return g->n_events;
}

/* Descriptors of a stream: stdin, the config file, a socket; each thread's own two files. */
#define STDIN_FD 0
#define CFG_FD 3
#define LISTEN_FD 9000

static int64_t out_fd_of(uint32_t thread)
{
	return 4 + 2 * (int64_t)thread;
}

static void phase_init(struct gen *g, uint64_t heap, int64_t cfg_fd, int64_t out_fd)
{
	zone_open(g, zone_names[0]);
	zone_open(g, zone_names[1]);
	if (g->thread == 0) {
		do_fd_file(g, STDIN_FD, g->stdin_name);
		do_read(g, STDIN_FD, 4096, 17);
		do_accept(g, LISTEN_FD, LISTEN_FD + 1);
		do_accept(g, LISTEN_FD, -1);
	}
	do_open(g, "/etc/demo.cfg", O_RDONLY | O_CLOEXEC, cfg_fd);
	zone_close(g);
	do_open(g, g->out_name, O_WRONLY | O_CREAT | O_TRUNC, out_fd);
	do_open(g, g->in_name, O_RDONLY, out_fd + 1);
	mark(g, "reading \"demo.cfg\"\n");
	for (uint32_t i = 0; i < 4; i++)
		do_malloc(g, UINT64_C(1) << (12 + i), heap + i * 0x100000);
	do_aligned(g, 256, 0, heap + 0x3f0000);
	do_aligned(g, 4096, 6, heap + 0x3f1000);
	do_read(g, cfg_fd, 4096, 4096);
	do_read(g, cfg_fd, 4096, 1234);
	do_read(g, cfg_fd, 4096, 0);
	zone(g, zone_names[3]);
	zone(g, zone_names[4]);
	do_pwrite(g, out_fd, 512, 0, 512);
	mark(g, "config loaded");
	zone_close(g);
}

/*
 * One solver iteration in its zone: about 7 events (9 on thread 0, which talks to the
 * neighbours); every tenth opens a zone around the next ten.
 */
static void solve_step(struct gen *g, uint64_t i, uint64_t heap, int64_t out_fd)
{
	const uint64_t stride = 65536 * 3;
	uint64_t size = 4096 * (1 + i % 4), ptr, count = 65536;
	int64_t result;
	char msg[64];

	if (i % 10 == 0)
		zone_open(g, zone_names[7]);
	zone_open(g, zone_names[2]);
	ptr = do_malloc(g, size, heap + 0x400000 + (i % 8) * 0x10000);
	if (i % 3 == 1)
		do_aligned(g, 64u << (i % 5), 1 + (uint32_t)((i / 3 + g->thread) % (N_STACKS - 1)),
			   heap + 0x800000 + (i % 16) * 0x1000);
	if (g->thread == 0) {
		int64_t n = g->n_ranks;

		do_msg(g, K_SEND, (g->rank + 1) % n, tfs_rval(g->rank, 1), 8192);
		do_msg(g, K_RECV, (g->rank + n - 1) % n, tfs_rval((g->rank + n - 1) % n, 1),
		       8192 - (below(g, 50) == 0) * 4096);
	}
	if (i % 97 == 96)
		count = 4096 * (1 + below(g, 16));
	result = below(g, 500) == 0 ? -28 : (int64_t)count;
	do_pwrite(g, out_fd, count, 512 + i * stride + g->thread * 65536, result);
	do_read(g, out_fd + 1, 4096, below(g, 100) ? 4096 : (int64_t)below(g, 4096));
	do_free(g, ptr);
	if (i % 100 == 99) {
		snprintf(msg, sizeof(msg), "checkpoint %" PRIu64 " of 10", (i / 100) % 10);
		mark(g, msg);
	}
	zone_close(g);
	if (i % 10 == 9)
		zone_close(g);
}

static void phase_output(struct gen *g, uint64_t until, uint64_t heap, int64_t out_fd)
{
	const uint64_t base = UINT64_C(1) << 32;

	zone(g, zone_names[5]);
	zone(g, zone_names[6]);
	for (uint64_t i = 0; n_events(g) + 5 < until && !g->rc; i++)
		do_pwrite(g, out_fd, 1 << 20, base + i * (1 << 20), 1 << 20);
	mark(g, "done");
	for (uint32_t i = 0; i < 4; i++)
		do_free(g, heap + i * 0x100000);
}

static void dump_phase(FILE *f, const char *name, uint32_t rank, uint32_t thread, uint64_t first,
		       uint64_t n)
{
	fputs("{\"phase\":", f);
	dump_str(f, name);
	fprintf(f,
		",\"rank\":%" PRIu32 ",\"thread\":%" PRIu32 ",\"first\":%" PRIu64 ",\"n\":%" PRIu64
		"}\n",
		rank, thread, first, n);
}

static int add_phase(struct tfs_writer *w, FILE *dump, const char *name, const struct gen *g,
		     uint64_t first, uint64_t n)
{
	int rc = tfs_writer_add_phase(w, name, g->rank, g->thread, first, n);

	if (rc < 0)
		fprintf(stderr, "synth_demo: cannot add phase %s: %s\n", name, strerror(-rc));
	else if (dump)
		dump_phase(dump, name, g->rank, g->thread, first, n);
	return rc;
}

/* Phase names that exercise the file name mapping of the virtual tree. */
static int add_odd_phases(struct tfs_writer *w, FILE *dump, const struct gen *g, uint64_t n)
{
	static const char *const odd[] = {"a/b", ".", "..", "", "x%y~z", "solve", "tab\there"};
	char longname[301];
	int rc = 0;

	memset(longname, 'L', 300);
	longname[300] = '\0';
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]) && rc == 0; i++)
		rc = add_phase(w, dump, odd[i], g, i % n, n / 2);
	if (rc == 0)
		rc = add_phase(w, dump, longname, g, 0, 1);
	return rc;
}

static int gen_stream(struct tfs_writer *w, struct gen *g, const struct opts *o)
{
	uint64_t target = o->events / ((uint64_t)o->ranks * o->threads);
	uint64_t heap =
	    UINT64_C(0x7f0000000000) + ((uint64_t)g->rank << 32) + ((uint64_t)g->thread << 28);
	int64_t cfg_fd = CFG_FD, out_fd = out_fd_of(g->thread);
	uint64_t out_start, mark0, mark1, i;
	int rc;

	if (target < 40)
		target = 40;
	out_start = target - target / 10;
	phase_init(g, heap, cfg_fd, out_fd);
	mark0 = n_events(g);
	for (i = 0; n_events(g) < out_start && !g->rc; i++)
		solve_step(g, i, heap, out_fd);
	while (g->n_open > 0 && !g->rc)
		zone_close(g); /* a ten-step zone the phase ended in */
	mark1 = n_events(g);
	phase_output(g, target, heap, out_fd);
	if (g->rc)
		return g->rc;
	rc = add_phase(w, g->dump, "init", g, 0, mark0);
	if (rc == 0)
		rc = add_phase(w, g->dump, "solve", g, mark0, mark1 - mark0);
	if (rc == 0)
		rc = add_phase(w, g->dump, "output", g, mark1, n_events(g) - mark1);
	if (rc == 0 && o->odd_phases && g->rank == 0 && g->thread == 0)
		rc = add_odd_phases(w, g->dump, g, n_events(g));
	return rc;
}

/* The paths of a stream's files: its rank's stdin pipe, its thread's output and input. */
static void file_names(struct gen *g)
{
	snprintf(g->stdin_name, sizeof(g->stdin_name), "pipe:[%" PRIu32 "]", 4000 + 7 * g->rank);
	snprintf(g->out_name, sizeof(g->out_name), "/data/out.%" PRIu32 ".%" PRIu32 ".dat",
		 g->rank, g->thread);
	if (g->thread == 1)
		snprintf(g->in_name, sizeof(g->in_name), "/data/in \"tab\t>\\\xff\".bin");
	else
		snprintf(g->in_name, sizeof(g->in_name), "/data/in.%" PRIu32 ".bin", g->thread);
}

static int set_name(struct tfs_writer *w, FILE *dump, uint32_t rank, int64_t fd, const char *name)
{
	int rc = tfs_writer_set_name(w, rank, "file", file_of(fd), name);

	if (rc == 0 && dump) {
		fprintf(dump,
			"{\"name_of\":\"file\",\"rank\":%" PRIu32 ",\"id\":%" PRIu64
			",\"name\":",
			rank, file_of(fd));
		dump_str(dump, name);
		fputs("}\n", dump);
	}
	return rc;
}

/*
 * The names of a rank's files (FORMAT.md §12): the same config file everywhere, a stdin pipe
 * and output files of its own, one input name with every escape; odd ranks leave thread 2's
 * output file unnamed (views print <file#N>).
 */
static int add_names(struct tfs_writer *w, FILE *dump, struct gen *g, uint32_t threads)
{
	char peer[64];
	int rc;

	g->thread = 0;
	file_names(g);
	snprintf(peer, sizeof(peer), "tcp:10.0.0.%" PRIu32 ":5000->10.0.0.99:4711", g->rank);
	rc = set_name(w, dump, g->rank, STDIN_FD, g->stdin_name);
	if (rc == 0)
		rc = set_name(w, dump, g->rank, CFG_FD, "/etc/demo.cfg");
	if (rc == 0)
		rc = set_name(w, dump, g->rank, LISTEN_FD, "tcp:0.0.0.0:5000");
	if (rc == 0)
		rc = set_name(w, dump, g->rank, LISTEN_FD + 1, peer);
	for (uint32_t t = 0; t < threads && rc == 0; t++) {
		g->thread = t;
		file_names(g);
		if (!(g->rank % 2 == 1 && t == 2))
			rc = set_name(w, dump, g->rank, out_fd_of(t), g->out_name);
		if (rc == 0)
			rc = set_name(w, dump, g->rank, out_fd_of(t) + 1, g->in_name);
	}
	if (rc < 0)
		fprintf(stderr, "synth_demo: cannot name the files of rank %" PRIu32 ": %s\n",
			g->rank, strerror(-rc));
	return rc;
}

static void dump_schema(FILE *f, const struct opts *o)
{
	fputs("{\"schema\":[", f);
	for (int k = 0; k < N_KINDS; k++) {
		fprintf(f, "%s{\"name\":\"%s\",\"category\":\"%s\",\"args\":[", k ? "," : "",
			kinds[k].name, kinds[k].category);
		for (uint32_t i = 0; i < kinds[k].n_args; i++) {
			const struct tfs_arg_desc *a = &kinds[k].args[i];

			fprintf(f,
				"%s{\"name\":\"%s\",\"type\":%u,\"enc\":%u,\"flags\":%u,"
				"\"sym_class\":\"%s\"}",
				i ? "," : "", a->name, a->type, a->enc, a->flags,
				a->sym_class ? a->sym_class : "");
		}
		fputs("]}", f);
	}
	fprintf(f,
		"],\"n_ranks\":%" PRIu32 ",\"n_threads\":%" PRIu32 ",\"timing\":%d,"
		"\"rel_err\":%.17g}\n",
		o->ranks, o->threads, o->w.timing, o->w.rel_err);
}

static int setup(struct tfs_writer *w, struct gen *g, int argc, char **argv)
{
	char cmdline[1024] = "";
	int rc = 0;

	/* argv[0] without its directory, so builds in other places give the same file */
	for (int i = 0; i < argc; i++) {
		const char *arg = i || !strrchr(argv[0], '/') ? argv[i] : strrchr(argv[0], '/') + 1;
		size_t len = strlen(cmdline);

		snprintf(cmdline + len, sizeof(cmdline) - len, "%s%s", i ? " " : "", arg);
	}
	for (int k = 0; k < N_KINDS && rc == 0; k++)
		rc = tfs_writer_add_kind(w, &kinds[k], &g->kind_id[k]);
	if (rc == 0)
		rc = tfs_writer_set_meta(w, "program", "synth_demo");
	if (rc == 0)
		rc = tfs_writer_set_meta(w, "cmdline", cmdline);
	/* fixed, so that the same options always give the same file */
	if (rc == 0)
		rc = tfs_writer_set_meta(w, "host", "demo-host");
	if (rc == 0)
		rc = tfs_writer_set_meta(w, "start_time", "2024-01-01T00:00:00Z");
	if (rc < 0)
		fprintf(stderr, "synth_demo: cannot declare the schema: %s\n", strerror(-rc));
	return rc;
}

static int run(const struct opts *o, FILE *dump, int argc, char **argv)
{
	struct tfs_writer *w;
	struct gen g = {.dump = dump, .n_ranks = o->ranks, .end_order = o->end_order};
	int rc;

	rc = tfs_writer_new(&o->w, &w);
	if (rc < 0) {
		fprintf(stderr, "synth_demo: cannot create a writer: %s\n", strerror(-rc));
		return rc;
	}
	rc = setup(w, &g, argc, argv);
	if (rc == 0 && o->end_order)
		rc = tfs_writer_set_meta(w, "event_order", "end");
	if (rc == 0 && dump)
		dump_schema(dump, o);
	for (uint32_t r = 0; r < o->ranks && rc == 0; r += 2)
		rc = add_stacks(w, dump, r);
	for (uint32_t r = 0; r < o->ranks && rc == 0; r++) {
		for (uint32_t t = 0; t < o->threads && rc == 0; t++) {
			g.rank = r;
			if (t == 0 && (rc = add_names(w, dump, &g, o->threads)) < 0)
				break;
			g.thread = t;
			file_names(&g);
			g.ts_ns = 1000 * r + 100 * t;
			g.n_events = 0;
			g.rng =
			    (o->seed + 1) * UINT64_C(0x9e3779b97f4a7c15) ^ ((uint64_t)r << 20 | t);
			if (g.rng == 0)
				g.rng = 1;
			rc = tfs_writer_stream_new(w, r, t, &g.s);
			if (rc < 0)
				fprintf(stderr, "synth_demo: cannot open stream: %s\n",
					strerror(-rc));
			else
				rc = gen_stream(w, &g, o);
		}
	}
	if (rc == 0) {
		rc = tfs_writer_save(w, o->out);
		if (rc < 0)
			fprintf(stderr, "synth_demo: cannot save %s: %s\n", o->out, strerror(-rc));
	}
	tfs_writer_free(w);
	free(g.open);
	free(g.held);
	return rc;
}

static const char usage[] =
    "usage: synth_demo -o FILE [--events N] [--timing none|lossless|lossy:ERR[,fast]] [--seed S]\n"
    "                  [--ranks R] [--threads T] [--dump FILE] [--odd-phases] [--end-order]\n"
    "Writes a deterministic synthetic trace of about N events (default 100000).\n"
    "--dump also writes the schema, every event and the phases as JSON lines.\n"
    "--odd-phases adds phases with names that need escaping as directory names.\n"
    "--end-order appends each event when it ends, as the capture does (metadata\n"
    "event_order=end), instead of when it starts.\n";

static bool parse_timing(const char *arg, struct tfs_writer_opts *w)
{
	char s[64], *end;
	size_t len = strlen(arg);

	if (len >= sizeof(s))
		return false;
	memcpy(s, arg, len + 1);
	if (len > 5 && strcmp(s + len - 5, ",fast") == 0) { /* columns that decode fast */
		s[len - 5] = '\0';
		w->timing_coder = TFS_CODER_FAST;
		if (strcmp(s, "none") == 0)
			return false;
	}
	if (strcmp(s, "none") == 0) {
		w->timing = TFS_TIMING_NONE;
		return true;
	}
	if (strcmp(s, "lossless") == 0) {
		w->timing = TFS_TIMING_LOSSLESS;
		return true;
	}
	if (strncmp(s, "lossy:", 6) != 0)
		return false;
	w->timing = TFS_TIMING_LOSSY;
	w->rel_err = strtod(s + 6, &end);
	return *end == '\0' && w->rel_err > 0 && w->rel_err < 1;
}

static bool parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 0);
	return errno == 0 && end != s && *end == '\0' && *s != '-' && *out <= max;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
	    {"events", required_argument, NULL, 'n'},
	    {"timing", required_argument, NULL, 't'},
	    {"seed", required_argument, NULL, 's'},
	    {"dump", required_argument, NULL, 'd'},
	    {"ranks", required_argument, NULL, 'R'},
	    {"threads", required_argument, NULL, 'T'},
	    {"odd-phases", no_argument, NULL, 'p'},
	    {"end-order", no_argument, NULL, 'e'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
		bool ok = true;

		switch (c) {
		case 'o':
			o->out = optarg;
			break;
		case 'd':
			o->dump = optarg;
			break;
		case 'p':
			o->odd_phases = true;
			break;
		case 'e':
			o->end_order = true;
			break;
		case 'n':
			ok = parse_u64(optarg, UINT64_C(1) << 40, &o->events);
			break;
		case 's':
			ok = parse_u64(optarg, UINT64_MAX, &o->seed);
			break;
		case 't':
			ok = parse_timing(optarg, &o->w);
			break;
		case 'R':
		case 'T':
			ok = parse_u64(optarg, 4096, &v) && v > 0;
			*(c == 'R' ? &o->ranks : &o->threads) = (uint32_t)v;
			break;
		case 'h':
			fputs(usage, stdout);
			exit(0);
		default:
			ok = false;
			optarg = NULL;
			break;
		}
		if (!ok) {
			fprintf(stderr, "synth_demo: bad option%s%s\n%s", optarg ? " value " : "",
				optarg ? optarg : "", usage);
			return 2;
		}
	}
	if (!o->out || optind != argc) {
		fprintf(stderr, "synth_demo: need -o FILE and no other arguments\n%s", usage);
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {.events = 100000,
			 .seed = 1,
			 .ranks = 2,
			 .threads = 3,
			 .w = {.timing = TFS_TIMING_LOSSLESS}};
	FILE *dump = NULL;
	int rc;

	rc = parse_args(argc, argv, &o);
	if (rc)
		return rc;
	if (o.dump) {
		dump = fopen(o.dump, "w");
		if (!dump) {
			fprintf(stderr, "synth_demo: cannot open %s: %s\n", o.dump,
				strerror(errno));
			return 1;
		}
	}
	rc = run(&o, dump, argc, argv);
	if (dump && fclose(dump) != 0 && rc == 0) {
		fprintf(stderr, "synth_demo: cannot write %s: %s\n", o.dump, strerror(errno));
		rc = -EIO;
	}
	return rc < 0 ? 1 : 0;
}
