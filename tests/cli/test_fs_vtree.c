/* The virtual tree: phase directory names, layout, lookup, sizes against reads, edge cases. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tfs/reader.h"
#include "tfs/writer.h"
#include "testutil.h"
#include "vnode_i.h"
#include "vtree_i.h"

struct fixture {
	char path[64];
	struct tfs_trace *trace;
	struct fs_vtree *vt;
};

static const struct tfs_arg_desc io_args[] = {
    {"fd", TFS_TYPE_U64, TFS_ENC_SYM, 0, "file"},
    {"count", TFS_TYPE_U64, TFS_ENC_VAL, 0, NULL},
};
static const struct tfs_kind_desc io_kind = {"write", "io", 2, io_args};

/* Streams (0, 0) with 5 events and (3, 1) with none; phases with colliding names. */
static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct tfs_writer *w;
	struct tfs_wstream *s;
	uint32_t kind;
	int fd;

	assert_non_null(f);
	strcpy(f->path, "/tmp/test_fs_vtree.XXXXXX");
	fd = mkstemp(f->path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(tfs_writer_add_kind(w, &io_kind, &kind), 0);
	assert_int_equal(tfs_writer_stream_new(w, 0, 0, &s), 0);
	for (uint64_t i = 0; i < 5; i++) {
		union tfs_arg a[2] = {{.u = 3}, {.u = 1 + i * 1000}};

		assert_int_equal(tfs_wstream_append(s, kind, 100 * i, 10 + i, a), 0);
	}
	assert_int_equal(tfs_writer_stream_new(w, 3, 1, &s), 0);
	assert_int_equal(tfs_writer_add_phase(w, "p", 0, 0, 0, 5), 0);
	assert_int_equal(tfs_writer_add_phase(w, "p", 0, 0, 1, 2), 0);
	assert_int_equal(tfs_writer_add_phase(w, "", 3, 1, 0, 0), 0);
	assert_int_equal(tfs_writer_add_phase(w, "a/b", 0, 0, 4, 1), 0);
	assert_int_equal(tfs_writer_save(w, f->path), 0);
	tfs_writer_free(w);
	assert_int_equal(tfs_trace_open(f->path, &f->trace, NULL), 0);
	assert_int_equal(fs_vtree_new(f->trace, "t", &f->vt), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	fs_vtree_free(f->vt);
	tfs_trace_close(f->trace);
	unlink(f->path);
	free(f);
	return 0;
}

static void expect_dirname(const char *name, const char *want)
{
	char out[256];
	size_t len = fs_phase_dirname(name, out, sizeof(out));

	assert_string_equal(out, want);
	assert_int_equal(len, strlen(want));
}

static void test_vtree_dirname_escapes(void **state)
{
	char name[302], want[241];

	expect_dirname("solve", "solve");
	expect_dirname("a/b", "a%2Fb");
	expect_dirname("x%y~z", "x%25y%7Ez");
	expect_dirname(".", "%2E");
	expect_dirname("..", "%2E.");
	expect_dirname("...", "%2E..");
	expect_dirname("a.", "a.");
	expect_dirname("", "%00");
	expect_dirname("tab\there\x7f", "tab%09here%7F");
	expect_dirname("caf\xc3\xa9", "caf\xc3\xa9");
	/* what the text views escape is %XX, so a directory name is UTF-8 without controls;
	 * '"' and '\\', which they escape too, a file name holds as they are */
	expect_dirname("ph\xc2\x85\x85", "ph%C2%85%85");
	expect_dirname("caf\xc3 \xff\xef\xbf\xbe", "caf%C3 %FF\xef\xbf\xbe");
	expect_dirname("a\nb\rc\"d\\e", "a%0Ab%0Dc\"d\\e");
	memset(name, 'L', 300);
	name[300] = '\0';
	memset(want, 'L', 240);
	want[240] = '\0';
	expect_dirname(name, want);
	/* never cut inside a %XX */
	memset(name, '/', 100);
	name[100] = '\0';
	for (int i = 0; i < 80; i++)
		memcpy(want + 3 * i, "%2F", 3);
	want[240] = '\0';
	expect_dirname(name, want);
	name[0] = 'x';
	want[0] = 'x';
	memmove(want + 1, want + 3, 237);
	want[238] = '\0';
	expect_dirname(name, want);
	/* never cut inside a character: x then 150 é is x and 119 é */
	name[0] = 'x';
	for (int i = 0; i < 150; i++)
		memcpy(name + 1 + 2 * i, "\xc3\xa9", 2);
	name[301] = '\0';
	memcpy(want, name, 239);
	want[239] = '\0';
	expect_dirname(name, want);
}

/* A thread's name from the `thread_names` metadata: unescaped, and one too long for the
   caller's buffer cut between characters with the mark other names get. */
static void test_vtree_thread_names(void **state)
{
	char names[700], buf[64], want[64];
	struct fs_proc q = {.thread_names = names};
	size_t n;

	(void)state;
	/* thread 0: a\b, newline, c; thread 3: x and 150 e-acute (301 bytes) */
	n = (size_t)snprintf(names, sizeof(names), "0=a\\\\b\\nc\n3=x");
	for (int i = 0; i < 150; i++)
		n += (size_t)snprintf(names + n, sizeof(names) - n, "\xc3\xa9");
	snprintf(names + n, sizeof(names) - n, "\n7=");
	assert_string_equal(fs_proc_thread_name(&q, 0, buf, sizeof(buf)), "a\\b\nc");
	assert_string_equal(fs_proc_thread_name(&q, 7, buf, sizeof(buf)), "");
	assert_null(fs_proc_thread_name(&q, 5, buf, sizeof(buf)));
	/* 63 bytes: the mark "...[+N bytes]" for N <= 301 takes 15, so 48 are left: x and 23
	 * characters (47 bytes), not 24 minus a byte */
	memcpy(want, names + strlen("0=a\\\\b\\nc\n3="), 47);
	snprintf(want + 47, sizeof(want) - 47, "...[+254 bytes]");
	assert_string_equal(fs_proc_thread_name(&q, 3, buf, sizeof(buf)), want);
}

static uint64_t resolve(const struct fs_vtree *vt, const char *path)
{
	uint64_t ino = 0;

	assert_int_equal(fs_vtree_resolve(vt, path, &ino), 0);
	return ino;
}

static void test_vtree_layout_and_lookup(void **state)
{
	struct fixture *f = *state;
	struct fs_node_info n;
	static const char *const root[] = {"README.txt",	  "info.json",	   "events.jsonl",
					   "trace.json",	  "summary.txt",   "signatures.txt",
					   "grammar.txt",	  "ranks",	   "replay",
					   "timeline.svg", "window"};
	/* the test schema's pwrite has a file argument: the trace records files */
	static const char *const rank[] = {"trace.txt",	    "events.jsonl", "trace.json",
					   "summary.txt",   "stacks.folded", "files.txt",
					   "threads",	    "phases"};
	uint64_t ino, dir;

	assert_int_equal(resolve(f->vt, ""), FS_ROOT_INO);
	assert_int_equal(resolve(f->vt, "//"), FS_ROOT_INO);
	assert_int_equal(fs_vtree_stat(f->vt, FS_ROOT_INO, &n), 0);
	assert_true(n.is_dir);
	assert_int_equal(n.n_children, 11);
	for (uint32_t i = 0; i < 11; i++) {
		assert_int_equal(fs_vtree_child(f->vt, FS_ROOT_INO, i, &ino), 0);
		assert_int_equal(fs_vtree_stat(f->vt, ino, &n), 0);
		assert_string_equal(n.name, root[i]);
	}
	assert_int_equal(fs_vtree_child(f->vt, FS_ROOT_INO, 11, &ino), -ENOENT);
	resolve(f->vt, "replay/proxy.c");
	resolve(f->vt, "replay/README.txt");
	dir = resolve(f->vt, "ranks/0");
	for (uint32_t i = 0; i < 8; i++) {
		assert_int_equal(fs_vtree_child(f->vt, dir, i, &ino), 0);
		assert_int_equal(fs_vtree_stat(f->vt, ino, &n), 0);
		assert_string_equal(n.name, rank[i]);
	}
	resolve(f->vt, "ranks/0/threads/0/trace.json");
	resolve(f->vt, "ranks/0/phases/p/stacks.folded");
	assert_int_equal(fs_vtree_resolve(f->vt, "ranks/0/threads/0/summary.txt", &ino), -ENOENT);
	assert_int_equal(fs_vtree_resolve(f->vt, "trace.json.d", &ino), -ENOENT);

	dir = resolve(f->vt, "/ranks/0/phases/");
	assert_int_equal(fs_vtree_stat(f->vt, dir, &n), 0);
	assert_int_equal(n.n_children, 3); /* p, p~1, a%2Fb */
	assert_int_equal(fs_vtree_lookup(f->vt, dir, "p~1", &ino), 0);
	assert_int_equal(fs_vtree_lookup(f->vt, dir, "a%2Fb", &ino), 0);
	assert_int_equal(fs_vtree_lookup(f->vt, dir, "..", &ino), 0);
	assert_int_equal(ino, resolve(f->vt, "ranks/0"));
	assert_int_equal(fs_vtree_lookup(f->vt, dir, ".", &ino), 0);
	assert_int_equal(ino, dir);
	assert_int_equal(fs_vtree_lookup(f->vt, dir, "q", &ino), -ENOENT);
	resolve(f->vt, "ranks/3/phases/%00/threads/1/events.jsonl");
	assert_int_equal(fs_vtree_resolve(f->vt, "ranks/1", &ino), -ENOENT);
	assert_int_equal(fs_vtree_resolve(f->vt, "README.txt/x", &ino), -ENOTDIR);
	assert_int_equal(fs_vtree_stat(f->vt, 0, &n), -ENOENT);
	assert_int_equal(fs_vtree_stat(f->vt, fs_vtree_n_nodes(f->vt) + 1, &n), -ENOENT);
}

/* Read the whole file in small pieces at odd offsets and compare with one big read. */
static void check_file(struct fs_vtree *vt, const char *path, uint64_t want_size)
{
	struct fs_node_info n;
	struct fs_vfile *h;
	uint64_t ino = resolve(vt, path);
	char *all, piece[7];
	ssize_t got;

	assert_int_equal(fs_vtree_stat(vt, ino, &n), 0);
	assert_false(n.is_dir);
	if (want_size != UINT64_MAX)
		assert_int_equal(n.size, want_size);
	assert_int_equal(fs_vfile_open(vt, ino, &h), 0);
	assert_int_equal(fs_vfile_size(h), n.size);
	all = malloc(n.size + 1);
	assert_non_null(all);
	got = fs_vfile_read(h, all, n.size + 1, 0);
	assert_int_equal(got, n.size);
	for (uint64_t off = 0; off < n.size; off += 5) {
		got = fs_vfile_read(h, piece, sizeof(piece), off);
		assert_true(got > 0);
		assert_memory_equal(piece, all + off, (size_t)got);
	}
	assert_int_equal(fs_vfile_read(h, piece, sizeof(piece), n.size), 0);
	assert_int_equal(fs_vfile_read(h, piece, sizeof(piece), n.size + 100), 0);
	if (n.size > 0)
		assert_int_equal(all[n.size - 1], '\n');
	free(all);
	fs_vfile_close(h);
}

static void test_vtree_files_read_as_sized(void **state)
{
	static const char *const composites[] = {
	    "summary.txt", "signatures.txt", "grammar.txt", "events.jsonl", "trace.json",
	    "ranks/0/trace.txt", "ranks/0/events.jsonl", "ranks/0/trace.json", "ranks/0/summary.txt",
	    "ranks/3/trace.json", "ranks/3/summary.txt", "ranks/0/phases/p/trace.json",
	    "ranks/0/phases/p/threads/0/trace.json", "ranks/3/phases/%00/trace.json",
	};
	struct fixture *f = *state;
	struct fs_vfile *h;
	uint64_t size;

	check_file(f->vt, "README.txt", UINT64_MAX);
	check_file(f->vt, "info.json", UINT64_MAX);
	assert_int_equal(tfs_trace_view_size(f->trace, 0, TFS_VIEW_TEXT, 0, 5, &size), 0);
	check_file(f->vt, "ranks/0/threads/0/trace.txt", size);
	check_file(f->vt, "ranks/0/threads/0/events.jsonl", UINT64_MAX);
	assert_int_equal(tfs_trace_view_size(f->trace, 0, TFS_VIEW_TEXT, 1, 2, &size), 0);
	check_file(f->vt, "ranks/0/phases/p~1/threads/0/trace.txt", size);
	check_file(f->vt, "ranks/0/phases/a%2Fb/threads/0/events.jsonl", UINT64_MAX);
	check_file(f->vt, "ranks/3/threads/1/trace.txt", 0);
	check_file(f->vt, "ranks/3/phases/%00/threads/1/events.jsonl", 0);
	for (size_t i = 0; i < sizeof(composites) / sizeof(composites[0]); i++)
		check_file(f->vt, composites[i], UINT64_MAX);
	check_file(f->vt, "ranks/3/stacks.folded", 0);
	check_file(f->vt, "ranks/0/files.txt", UINT64_MAX);
	check_file(f->vt, "ranks/3/trace.txt", 0);
	assert_int_equal(fs_vfile_open(f->vt, resolve(f->vt, "ranks"), &h), -EISDIR);
	assert_int_equal(fs_vfile_open(f->vt, 99999, &h), -ENOENT);
	fs_vfile_close(NULL);
}

/* Kinds without any VAL argument: every line is its terminal's fixed text plus the times. */
static void test_vtree_kind_without_val_fields(void **state)
{
	static const struct tfs_arg_desc sig_args[] = {{"x", TFS_TYPE_U64, TFS_ENC_SIG, 0, NULL}};
	static const struct tfs_kind_desc sig_kind = {"ok", "c", 1, sig_args};
	struct fixture f = {.path = "/tmp/test_fs_vtree.XXXXXX"};
	struct tfs_writer *w;
	struct tfs_wstream *s;
	union tfs_arg a = {.u = 1};
	uint32_t kind;
	int fd = mkstemp(f.path);

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(tfs_writer_add_kind(w, &sig_kind, &kind), 0);
	assert_int_equal(tfs_writer_stream_new(w, 0, 0, &s), 0);
	for (uint64_t i = 0; i < 3; i++)
		assert_int_equal(tfs_wstream_append(s, kind, 10 * i, 1, &a), 0);
	assert_int_equal(tfs_writer_save(w, f.path), 0);
	tfs_writer_free(w);
	assert_int_equal(tfs_trace_open(f.path, &f.trace, NULL), 0);
	assert_int_equal(fs_vtree_new(f.trace, "t", &f.vt), 0);
	check_file(f.vt, "ranks/0/threads/0/trace.txt", 3 * strlen("0.000000000 1 T0 ok(x=1)\n"));
	check_file(f.vt, "ranks/0/threads/0/events.jsonl", UINT64_MAX);
	fs_vtree_free(f.vt);
	tfs_trace_close(f.trace);
	unlink(f.path);
}

/* The whole of file @path, NUL-terminated; its size in @size. */
static char *read_path(struct fs_vtree *vt, const char *path, uint64_t *size)
{
	struct fs_node_info n;
	struct fs_vfile *h;
	uint64_t ino = resolve(vt, path);
	char *all;

	assert_int_equal(fs_vtree_stat(vt, ino, &n), 0);
	assert_int_equal(fs_vfile_open(vt, ino, &h), 0);
	all = malloc(n.size + 1);
	assert_non_null(all);
	assert_int_equal(fs_vfile_read(h, all, n.size + 1, 0), n.size);
	all[n.size] = '\0';
	fs_vfile_close(h);
	*size = n.size;
	return all;
}

/* Open @path (a new trace) as a fixture of its own. */
static void open_fixture(struct fixture *f, struct tfs_writer *w)
{
	int fd;

	strcpy(f->path, "/tmp/test_fs_vtree.XXXXXX");
	fd = mkstemp(f->path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(tfs_writer_save(w, f->path), 0);
	tfs_writer_free(w);
	assert_int_equal(tfs_trace_open(f->path, &f->trace, NULL), 0);
	assert_int_equal(fs_vtree_new(f->trace, "t", &f->vt), 0);
}

static void close_fixture(struct fixture *f)
{
	fs_vtree_free(f->vt);
	tfs_trace_close(f->trace);
	unlink(f->path);
}

/* 300 reads of @path at random offsets and lengths (from *@seed) equal slices of @want. */
static void check_random_slices(struct fs_vtree *vt, const char *path, const char *want,
				uint64_t size, uint64_t *seed)
{
	struct fs_vfile *h;

	print_message("# random slices of %s: seed %" PRIu64 "\n", path, *seed);
	assert_int_equal(fs_vfile_open(vt, resolve(vt, path), &h), 0);
	for (int i = 0; i < 300; i++) {
		char piece[3000];
		uint64_t off = (*seed = *seed * 6364136223846793005u + 1442695040888963407u) % size;
		size_t len = 1 + (*seed >> 33) % sizeof(piece);
		ssize_t got = fs_vfile_read(h, piece, len, off);

		assert_int_equal(got, len < size - off ? len : size - off);
		assert_memory_equal(piece, want + off, (size_t)got);
	}
	fs_vfile_close(h);
}

/*
 * Two threads whose events all start at the same times: the merged view alternates thread 0
 * and thread 1, and crosses merge checkpoints (4096 events apart) in both directions.
 */
static void test_vtree_merge_ties_and_checkpoints(void **state)
{
	enum { N = 5000 };
	struct fixture f;
	struct tfs_writer *w;
	struct tfs_wstream *s;
	char *merged, *t0, *t1, *p0, *p1, *want, *o;
	uint64_t size, n0, n1, seed = 42;
	uint32_t kind;

	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(tfs_writer_add_kind(w, &io_kind, &kind), 0);
	for (uint32_t t = 0; t < 2; t++) {
		assert_int_equal(tfs_writer_stream_new(w, 0, t, &s), 0);
		for (uint64_t i = 0; i < N; i++) {
			union tfs_arg a[2] = {{.u = 3}, {.u = (i * 7919 + t) % 100000}};

			assert_int_equal(tfs_wstream_append(s, kind, 10 * (i / 2), 1 + i % 13, a), 0);
		}
	}
	open_fixture(&f, w);
	merged = read_path(f.vt, "ranks/0/trace.txt", &size);
	t0 = read_path(f.vt, "ranks/0/threads/0/trace.txt", &n0);
	t1 = read_path(f.vt, "ranks/0/threads/1/trace.txt", &n1);
	assert_int_equal(size, n0 + n1);
	/* equal start times: thread 0 before thread 1, each thread in its own order */
	want = o = malloc(size + 1);
	assert_non_null(want);
	p0 = t0;
	p1 = t1;
	for (uint64_t i = 0; i < N / 2; i++) {
		for (int k = 0; k < 2; k++) {
			size_t l = (size_t)(strchr(p0, '\n') + 1 - p0);

			memcpy(o, p0, l);
			o += l;
			p0 += l;
		}
		for (int k = 0; k < 2; k++) {
			size_t l = (size_t)(strchr(p1, '\n') + 1 - p1);

			memcpy(o, p1, l);
			o += l;
			p1 += l;
		}
	}
	assert_int_equal(o - want, size);
	assert_memory_equal(merged, want, size);
	check_random_slices(f.vt, "ranks/0/trace.txt", want, size, &seed);
	free(want);
	free(merged);
	free(t0);
	free(t1);
	close_fixture(&f);
}

/* The lines of @all whose text holds @needle, in order. */
static char *lines_with(const char *all, const char *needle, uint64_t *size)
{
	char *out = malloc(strlen(all) + 1), *o = out;

	assert_non_null(out);
	for (const char *p = all; *p;) {
		const char *nl = strchr(p, '\n');
		size_t l = (size_t)(nl + 1 - p);

		assert_non_null(nl);
		if (memmem(p, l, needle, strlen(needle))) {
			memcpy(o, p, l);
			o += l;
		}
		p += l;
	}
	*o = '\0';
	*size = (uint64_t)(o - out);
	return out;
}

/* Resolve @path, failing each allocation in turn until it works: each failure leaves the tree. */
static void resolve_failing(struct fs_vtree *vt, const char *path, uint64_t *ino)
{
	const uint64_t nodes = fs_vtree_n_nodes(vt);
	long n;

	for (n = 0;; n++) {
		int rc;

		fa_arm(n);
		rc = fs_vtree_resolve(vt, path, ino);
		fa_disarm();
		if (rc == 0)
			break;
		assert_int_equal(rc, -ENOMEM);
		assert_int_equal(fs_vtree_n_nodes(vt), nodes);
	}
	assert_true(n > 0);
}

/*
 * calls/<name>/ beside a time-merged trace.txt: three threads of two kinds whose times go
 * back now and then (so an event's merge key is its thread's running maximum, which depends
 * on the other kind's events). Each calls/ file is its directory's merged file filtered by
 * kind, in full and in random slices across the merge checkpoints, and its size is exact
 * before any read.
 */
/*
 * A tree of @f's trace in which reading ranks/0/trace.txt makes nothing of calls/; the first
 * lookup inside calls/ makes it whole (read/ and write/, two files each), and one that runs
 * out of memory at any allocation leaves the tree as it was and can be tried again.
 */
static void calls_made_at_first_use(struct fixture *f)
{
	struct fs_vtree *vt;
	uint64_t ino, nodes;

	assert_int_equal(fs_vtree_new(f->trace, "t", &vt), 0);
	resolve(vt, "ranks/0/trace.txt");
	nodes = fs_vtree_n_nodes(vt);
	resolve_failing(vt, "ranks/0/calls/read/trace.txt", &ino);
	assert_int_equal(fs_vtree_n_nodes(vt), nodes + 6);
	fs_vtree_free(vt);
}

static void test_vtree_merge_calls(void **state)
{
	enum { N = 6000, THREADS = 3 };
	static const struct tfs_kind_desc read_kind = {"read", "io", 2, io_args};
	static const char *const files[2][3] = {
	    {"ranks/0/trace.txt", "ranks/0/calls/read/trace.txt", " read("},
	    {"ranks/0/events.jsonl", "ranks/0/calls/write/events.jsonl", "\"write\""}};
	struct fixture f;
	struct tfs_writer *w;
	struct tfs_wstream *s;
	uint64_t seed = 7;
	uint32_t kinds[2];

	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(tfs_writer_add_kind(w, &io_kind, &kinds[0]), 0);
	assert_int_equal(tfs_writer_add_kind(w, &read_kind, &kinds[1]), 0);
	for (uint32_t t = 0; t < THREADS; t++) {
		assert_int_equal(tfs_writer_stream_new(w, 0, t, &s), 0);
		for (uint64_t i = 0; i < N; i++) {
			union tfs_arg a[2] = {{.u = 3 + t}, {.u = (i * 7919 + t) % 1000}};
			uint64_t ts = 10 * i + 3 * t - (i % 97 == 0 && i ? 45 : 0);

			assert_int_equal(tfs_wstream_append(s, kinds[(i * 7 + t) % 5 == 0], ts,
							    1 + i % 13, a),
					 0);
		}
	}
	open_fixture(&f, w);
	for (int v = 0; v < 2; v++) {
		struct fs_node_info info;
		uint64_t full_size, size, want_size;
		char *full = read_path(f.vt, files[v][0], &full_size);
		char *want = lines_with(full, files[v][2], &want_size);
		uint64_t ino = resolve(f.vt, files[v][1]);
		char *got;

		assert_true(want_size > 0 && want_size < full_size);
		assert_int_equal(fs_vtree_stat(f.vt, ino, &info), 0);
		assert_int_equal(info.size, want_size);
		got = read_path(f.vt, files[v][1], &size);
		assert_int_equal(size, want_size);
		assert_memory_equal(got, want, size);
		check_random_slices(f.vt, files[v][1], want, size, &seed);
		free(got);
		free(want);
		free(full);
	}
	calls_made_at_first_use(&f);
	close_fixture(&f);
}

/*
 * No timing and byte counts in the signatures: the profile comes from the grammar's counts;
 * the rank's trace.txt is its threads one after the other; zones have no extent.
 */
static void test_vtree_untimed_profiles(void **state)
{
	static const struct tfs_arg_desc alloc_args[] = {
	    {"size", TFS_TYPE_U64, TFS_ENC_SIG, TFS_ARG_BYTES, NULL}};
	static const struct tfs_arg_desc zone_args[] = {{"name", TFS_TYPE_STR, TFS_ENC_STR, 0, NULL}};
	static const struct tfs_kind_desc kinds[] = {{"grab", "alloc", 1, alloc_args},
						     {"zone", "zone", 1, zone_args}};
	struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
	struct fixture f;
	struct tfs_writer *w;
	struct tfs_wstream *s;
	char *text, *t0, *t1;
	uint64_t size, n0, n1;
	uint32_t k[2];

	assert_int_equal(tfs_writer_new(&o, &w), 0);
	assert_int_equal(tfs_writer_add_kind(w, &kinds[0], &k[0]), 0);
	assert_int_equal(tfs_writer_add_kind(w, &kinds[1], &k[1]), 0);
	for (uint32_t t = 0; t < 2; t++) {
		union tfs_arg z = {.s = "a;b\n"}, a = {.u = 100 + t};

		assert_int_equal(tfs_writer_stream_new(w, 0, t, &s), 0);
		assert_int_equal(tfs_wstream_append(s, k[1], 0, 0, &z), 0);
		for (int i = 0; i < 3; i++)
			assert_int_equal(tfs_wstream_append(s, k[0], 0, 0, &a), 0);
	}
	open_fixture(&f, w);
	text = read_path(f.vt, "ranks/0/summary.txt", &size);
	assert_non_null(strstr(text, "\nkind               6                  -              -"
				     "                603  grab\n"));
	assert_non_null(strstr(text, "\nzone               2                  -              -"
				     "                  0  zone \"a;b\\n\"\n"));
	free(text);
	text = read_path(f.vt, "ranks/0/stacks.folded", &size);
	assert_string_equal(text, "rank 0;thread 0 300\nrank 0;thread 1 303\n");
	free(text);
	text = read_path(f.vt, "ranks/0/trace.txt", &size);
	t0 = read_path(f.vt, "ranks/0/threads/0/trace.txt", &n0);
	t1 = read_path(f.vt, "ranks/0/threads/1/trace.txt", &n1);
	assert_int_equal(size, n0 + n1);
	assert_memory_equal(text, t0, n0);
	assert_memory_equal(text + n0, t1, n1);
	free(text);
	free(t0);
	free(t1);
	text = read_path(f.vt, "signatures.txt", &size);
	assert_non_null(strstr(text, "      3  grab(size=101)\n"));
	free(text);
	close_fixture(&f);
}

/*
 * backtraces.txt and allocs.folded: symbolised, inlined and bare frames, escapes, an empty
 * backtrace, a stack id past the rank's backtraces, stacks that fold alike, byte counts in
 * the signature (rank 2: counted from the grammar) and per call (decoded); a rank without
 * backtraces has neither file.
 */
static void test_vtree_backtrace_files(void **state)
{
	static const struct tfs_arg_desc val_args[] = {
	    {"size", TFS_TYPE_U64, TFS_ENC_VAL, TFS_ARG_BYTES, NULL},
	    {"stack", TFS_TYPE_U64, TFS_ENC_SYM, 0, "stack"}};
	static const struct tfs_arg_desc sig_args[] = {
	    {"size", TFS_TYPE_U64, TFS_ENC_SIG, TFS_ARG_BYTES, NULL},
	    {"stack", TFS_TYPE_U64, TFS_ENC_SYM, 0, "stack"}};
	static const struct tfs_kind_desc kinds[] = {{"malloc", "alloc", 2, val_args},
						     {"grab", "alloc", 2, sig_args}};
	static const uint64_t bt[][3] = {{0x10, 0x20}, {0x10, 0x30, 0x40}, {0}, {0x10, 0x20}};
	static const uint32_t bt_n[] = {2, 3, 0, 2};
	static const struct tfs_src_frame main_f[] = {{"main", "m.c", 3}};
	static const struct tfs_src_frame work_f[] = {
	    {"work", "w.c", 0}, {"in;line\\\n", "", 9}, {"deeper", "", 0}};
	static const struct tfs_src_frame lib_f[] = {{"libc.so.6+0x10", "", 0}};
	/* kind, size, stack */
	static const uint64_t ev[][3] = {{0, 100, 0}, {0, 5, 1}, {1, 7, 1}, {1, 7, 1},
					 {0, 1, 2}, {0, 0, 2}, {0, 3, 9}, {0, 11, 3}};
	struct fixture f;
	struct tfs_writer *w;
	struct tfs_wstream *s;
	uint64_t size, ino;
	uint32_t k[2];
	char *text;

	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(tfs_writer_add_kind(w, &kinds[0], &k[0]), 0);
	assert_int_equal(tfs_writer_add_kind(w, &kinds[1], &k[1]), 0);
	for (uint32_t i = 0; i < 4; i++)
		assert_int_equal(tfs_writer_add_backtrace(w, 0, i, bt[i], bt_n[i]), 0);
	assert_int_equal(tfs_writer_add_symbol(w, 0, 0x20, work_f, 3), 0);
	assert_int_equal(tfs_writer_add_symbol(w, 0, 0x10, main_f, 1), 0);
	assert_int_equal(tfs_writer_add_symbol(w, 0, 0x40, lib_f, 1), 0);
	assert_int_equal(tfs_writer_stream_new(w, 0, 0, &s), 0);
	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++) {
		union tfs_arg a[2] = {{.u = ev[i][1]}, {.u = ev[i][2]}};

		assert_int_equal(tfs_wstream_append(s, k[ev[i][0]], 10 * i, 1, a), 0);
	}
	assert_int_equal(tfs_writer_stream_new(w, 1, 0, &s), 0);
	/* rank 2: byte counts only in signatures, no symbols */
	assert_int_equal(tfs_writer_add_backtrace(w, 2, 0, bt[1], 3), 0);
	assert_int_equal(tfs_writer_stream_new(w, 2, 0, &s), 0);
	for (int i = 0; i < 3; i++) {
		union tfs_arg a[2] = {{.u = 7}, {.u = 0}};

		assert_int_equal(tfs_wstream_append(s, k[1], 10 * i, 1, a), 0);
	}
	open_fixture(&f, w);
	text = read_path(f.vt, "ranks/0/backtraces.txt", &size);
	assert_string_equal(text, "stack#0\n"
				  "  main (m.c:3)\n"
				  "  work (w.c)\n"
				  "  in;line\\\\\\n (:9) [inlined]\n"
				  "  deeper [inlined]\n"
				  "stack#1\n"
				  "  main (m.c:3)\n"
				  "  0x30\n"
				  "  libc.so.6+0x10\n"
				  "stack#2\n"
				  "stack#3\n"
				  "  main (m.c:3)\n"
				  "  work (w.c)\n"
				  "  in;line\\\\\\n (:9) [inlined]\n"
				  "  deeper [inlined]\n");
	free(text);
	check_file(f.vt, "ranks/0/backtraces.txt", size);
	text = read_path(f.vt, "ranks/0/allocs.folded", &size);
	assert_string_equal(text, "[no frames] 1\n"
				  "[unknown stack#9] 3\n"
				  "main;0x30;libc.so.6+0x10 19\n"
				  "main;work;in\\x3bline\\\\\\n;deeper 111\n");
	free(text);
	check_file(f.vt, "ranks/0/allocs.folded", size);
	text = read_path(f.vt, "ranks/2/allocs.folded", &size);
	assert_string_equal(text, "0x10;0x30;0x40 21\n");
	free(text);
	text = read_path(f.vt, "ranks/2/backtraces.txt", &size);
	assert_string_equal(text, "stack#0\n  0x10\n  0x30\n  0x40\n");
	free(text);
	assert_int_equal(fs_vtree_resolve(f.vt, "ranks/1/backtraces.txt", &ino), -ENOENT);
	assert_int_equal(fs_vtree_resolve(f.vt, "ranks/1/allocs.folded", &ino), -ENOENT);
	assert_int_equal(fs_vtree_resolve(f.vt, "ranks/0/phases", &ino), 0);
	close_fixture(&f);
}

/*
 * Every allocation of a rank's first backtrace and symbol decoding and of making its two
 * files fails in turn: each attempt fails cleanly and the next one succeeds from scratch.
 */
static void test_vtree_backtrace_files_allocation_failures(void **state)
{
	static const char *const files[] = {"ranks/0/backtraces.txt", "ranks/0/allocs.folded"};
	static const struct tfs_arg_desc args[] = {
	    {"size", TFS_TYPE_U64, TFS_ENC_VAL, TFS_ARG_BYTES, NULL},
	    {"stack", TFS_TYPE_U64, TFS_ENC_SYM, 0, "stack"}};
	static const struct tfs_kind_desc kind = {"malloc", "alloc", 2, args};
	static const struct tfs_src_frame src[] = {{"main", "m.c", 3}, {"inl", "i.h", 4}};
	struct fixture f;
	struct tfs_writer *w;
	struct tfs_wstream *s;
	uint32_t k;

	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(tfs_writer_add_kind(w, &kind, &k), 0);
	for (uint64_t i = 0; i < 50; i++) {
		uint64_t frames[3] = {0x10, 0x20 + i % 7, 0x30 + i};

		assert_int_equal(tfs_writer_add_backtrace(w, 0, i, frames, 3), 0);
		assert_int_equal(tfs_writer_add_symbol(w, 0, 0x30 + i, src, 1 + i % 2), 0);
	}
	assert_int_equal(tfs_writer_stream_new(w, 0, 0, &s), 0);
	for (uint64_t i = 0; i < 200; i++) {
		union tfs_arg a[2] = {{.u = i}, {.u = i % 50}};

		assert_int_equal(tfs_wstream_append(s, k, 10 * i, 1, a), 0);
	}
	open_fixture(&f, w);
	for (size_t i = 0; i < 2; i++) {
		uint64_t ino = resolve(f.vt, files[i]);
		long attempts = 0;

		for (long n = 0;; n++) {
			struct fs_vfile *h = NULL;
			int rc;

			fa_arm(n);
			rc = fs_vfile_open(f.vt, ino, &h);
			attempts = fa_count();
			fa_disarm();
			fs_vfile_close(h);
			if (rc == 0)
				break;
			assert_int_equal(rc, -ENOMEM);
		}
		assert_true(attempts > 3);
		check_file(f.vt, files[i], UINT64_MAX);
	}
	close_fixture(&f);
}

/*
 * phases/ is made at its first use, and each phases/<p>/ at its own: reading a rank's
 * trace.txt makes nothing of its 50 phase directories, the first lookup in phases/ makes
 * them empty, a stat of one fills nothing, and the first lookup inside one fills it alone;
 * a lookup that runs out of memory at any allocation leaves the tree as it was and can be
 * tried again.
 */
static void test_vtree_phases_made_at_first_use(void **state)
{
	enum { N = 50 };
	struct fixture f;
	struct fs_node_info info;
	struct tfs_writer *w;
	struct tfs_wstream *s;
	uint64_t ino, nodes, size;
	uint32_t kind;
	char *text;

	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(tfs_writer_add_kind(w, &io_kind, &kind), 0);
	assert_int_equal(tfs_writer_stream_new(w, 0, 0, &s), 0);
	for (uint64_t i = 0; i < N; i++) {
		union tfs_arg a[2] = {{.u = 3}, {.u = i}};

		assert_int_equal(tfs_wstream_append(s, kind, 10 * i, 1, a), 0);
		assert_int_equal(tfs_writer_add_phase(w, "p", 0, 0, i, 1), 0);
	}
	open_fixture(&f, w);
	resolve(f.vt, "ranks/0/trace.txt");
	nodes = fs_vtree_n_nodes(f.vt);
	/* the first lookup in phases/: a directory per phase, each empty */
	resolve_failing(f.vt, "ranks/0/phases/p~49", &ino);
	assert_int_equal(fs_vtree_n_nodes(f.vt), nodes + N);
	nodes += N;
	/* a stat of one fills none */
	assert_int_equal(fs_vtree_attr(f.vt, ino, &info), 0);
	assert_true(info.is_dir);
	assert_string_equal(info.name, "p~49");
	assert_int_equal(fs_vtree_n_nodes(f.vt), nodes);
	/* the first lookup in one fills it alone: its files and threads/0/ */
	resolve_failing(f.vt, "ranks/0/phases/p~49/trace.txt", &ino);
	assert_true(fs_vtree_n_nodes(f.vt) > nodes + 5);
	assert_true(fs_vtree_n_nodes(f.vt) < nodes + 50);
	text = read_path(f.vt, "ranks/0/phases/p~49/trace.txt", &size);
	assert_non_null(strstr(text, "count=49"));
	assert_null(strstr(text, "count=48"));
	free(text);
	text = read_path(f.vt, "ranks/0/phases/p~3/threads/0/trace.txt", &size);
	assert_non_null(strstr(text, "count=3"));
	assert_null(strstr(text, "count=49"));
	free(text);
	close_fixture(&f);
}

/*
 * Phase directories of two ranks read in turn: each shows its own rank's phase, and each
 * rank's phases/ lists its own directories (the phase indices kept per rank, not for the
 * rank last looked into).
 */
static void test_vtree_phases_of_two_ranks_in_turn(void **state)
{
	enum { N = 4 };
	struct fixture f;
	struct fs_node_info info;
	struct tfs_writer *w;
	struct tfs_wstream *s[2];
	char names[2][N][64], path[192], want[32];
	uint64_t dir, ino, size;
	uint32_t kind;

	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(tfs_writer_add_kind(w, &io_kind, &kind), 0);
	for (uint32_t r = 0; r < 2; r++)
		assert_int_equal(tfs_writer_stream_new(w, r, 0, &s[r]), 0);
	for (uint64_t i = 0; i < N; i++) {
		for (uint32_t r = 0; r < 2; r++) {
			union tfs_arg a[2] = {{.u = 3}, {.u = 10 * (r + 1) + i}};

			assert_int_equal(tfs_wstream_append(s[r], kind, 10 * i, 1, a), 0);
			assert_int_equal(tfs_writer_add_phase(w, "step", r, 0, i, 1), 0);
		}
	}
	open_fixture(&f, w);
	for (uint32_t r = 0; r < 2; r++) {
		snprintf(path, sizeof(path), "ranks/%u/phases", r);
		dir = resolve(f.vt, path);
		assert_int_equal(fs_vtree_stat(f.vt, dir, &info), 0);
		assert_int_equal(info.n_children, N);
		for (uint32_t i = 0; i < N; i++) {
			const char *name;
			bool is_dir;

			assert_int_equal(fs_vtree_child(f.vt, dir, i, &ino), 0);
			assert_int_equal(fs_vtree_peek(f.vt, ino, &name, &is_dir), 0);
			assert_true(is_dir);
			snprintf(names[r][i], sizeof(names[r][i]), "%s", name);
		}
	}
	/* listed in phase order: the i-th directory of rank r holds event i of rank r, whose
	   count is 10 (rank 0) or 20 (rank 1) plus i */
	for (uint32_t i = 0; i < N; i++) {
		for (uint32_t r = 0; r < 2; r++) {
			char *text;

			snprintf(path, sizeof(path), "ranks/%u/phases/%.63s/trace.txt", r, names[r][i]);
			text = read_path(f.vt, path, &size);
			snprintf(want, sizeof(want), "count=%u", 10 * (r + 1) + i);
			assert_non_null(strstr(text, want));
			snprintf(want, sizeof(want), "count=%u", 10 * (2 - r) + i);
			assert_null(strstr(text, want));
			for (uint32_t j = 0; j < N; j++) {
				snprintf(want, sizeof(want), "count=%u", 10 * (r + 1) + j);
				assert_true(j == i || !strstr(text, want));
			}
			free(text);
		}
	}
	close_fixture(&f);
}

/*
 * A rank directory whose build fails after its nodes have filled more than one chunk of the
 * node table is undone and built again at the next lookup; the chunks the failed build made
 * are freed with the tree (LeakSanitizer, in the ASan build, checks that none is left).
 */
static void test_vtree_failed_rank_build_frees_its_chunks(void **state)
{
	struct fixture f;
	struct fs_vtree *vt;
	struct tfs_writer *w;
	struct tfs_wstream *s;
	/* enough threads for more than two chunks of nodes (calls/ made later adds none) */
	enum { N_THREADS = 520 };
	char last[64];
	uint64_t nodes;
	uint32_t kind;
	uint64_t ino = 0;
	long total;
	int rc;

	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(tfs_writer_add_kind(w, &io_kind, &kind), 0);
	for (uint32_t t = 0; t < N_THREADS; t++) {
		union tfs_arg a[2] = {{.u = 3}, {.u = t}};

		assert_int_equal(tfs_writer_stream_new(w, 0, t, &s), 0);
		assert_int_equal(tfs_wstream_append(s, kind, 10 * t, 1, a), 0);
	}
	open_fixture(&f, w);
	snprintf(last, sizeof(last), "ranks/0/threads/%u", N_THREADS - 1);
	/* a whole build of ranks/0, in a tree of its own: its allocations and nodes */
	assert_int_equal(fs_vtree_new(f.trace, "t", &vt), 0);
	nodes = fs_vtree_n_nodes(vt);
	fa_arm(1L << 40);
	rc = fs_vtree_resolve(vt, last, &ino);
	total = fa_count();
	fa_disarm();
	assert_int_equal(rc, 0);
	print_message("# ranks/0 of %u threads: %" PRIu64 " nodes\n", (unsigned)N_THREADS,
		      fs_vtree_n_nodes(vt) - nodes);
	assert_true(fs_vtree_n_nodes(vt) - nodes > 2048); /* chunks of the table: 1,024 nodes */
	fs_vtree_free(vt);
	/*
	 * the same build failing near its end, its nodes past the first chunks: freed at once
	 * (nothing built later reaches those chunks again), then built again in another tree
	 */
	for (int again = 0; again < 2; again++) {
		if (again)
			vt = f.vt;
		else
			assert_int_equal(fs_vtree_new(f.trace, "t", &vt), 0);
		nodes = fs_vtree_n_nodes(vt);
		fa_arm(total - 20);
		rc = fs_vtree_resolve(vt, last, &ino);
		fa_disarm();
		assert_int_equal(rc, -ENOMEM);
		assert_int_equal(fs_vtree_n_nodes(vt), nodes);
		if (!again)
			fs_vtree_free(vt);
	}
	assert_int_equal(fs_vtree_resolve(f.vt, last, &ino), 0);
	close_fixture(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vtree_dirname_escapes),
	    cmocka_unit_test(test_vtree_thread_names),
	    cmocka_unit_test_setup_teardown(test_vtree_layout_and_lookup, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_vtree_files_read_as_sized, setup, teardown),
	    cmocka_unit_test(test_vtree_kind_without_val_fields),
	    cmocka_unit_test(test_vtree_merge_ties_and_checkpoints),
	    cmocka_unit_test(test_vtree_merge_calls),
	    cmocka_unit_test(test_vtree_untimed_profiles),
	    cmocka_unit_test(test_vtree_backtrace_files),
	    cmocka_unit_test(test_vtree_backtrace_files_allocation_failures),
	    cmocka_unit_test(test_vtree_failed_rank_build_frees_its_chunks),
	    cmocka_unit_test(test_vtree_phases_made_at_first_use),
	    cmocka_unit_test(test_vtree_phases_of_two_ranks_in_turn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
