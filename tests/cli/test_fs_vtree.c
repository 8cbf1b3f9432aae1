/* The virtual tree: phase directory names, layout, lookup, sizes against reads, edge cases. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tfs/reader.h"
#include "tfs/writer.h"
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
	char name[301], want[241];

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
	const char *names[3];
	uint64_t ino, dir;

	assert_int_equal(resolve(f->vt, ""), FS_ROOT_INO);
	assert_int_equal(resolve(f->vt, "//"), FS_ROOT_INO);
	assert_int_equal(fs_vtree_stat(f->vt, FS_ROOT_INO, &n), 0);
	assert_true(n.is_dir);
	assert_int_equal(n.n_children, 3);
	for (uint32_t i = 0; i < 3; i++) {
		assert_int_equal(fs_vtree_child(f->vt, FS_ROOT_INO, i, &ino), 0);
		assert_int_equal(fs_vtree_stat(f->vt, ino, &n), 0);
		names[i] = n.name;
	}
	assert_string_equal(names[0], "README.txt");
	assert_string_equal(names[1], "info.json");
	assert_string_equal(names[2], "ranks");
	assert_int_equal(fs_vtree_child(f->vt, FS_ROOT_INO, 3, &ino), -ENOENT);

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vtree_dirname_escapes),
	    cmocka_unit_test_setup_teardown(test_vtree_layout_and_lookup, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_vtree_files_read_as_sized, setup, teardown),
	    cmocka_unit_test(test_vtree_kind_without_val_fields),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
