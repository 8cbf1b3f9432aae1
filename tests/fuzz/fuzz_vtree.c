/*
 * libFuzzer target for the virtual tree (fs/): the input is a trace file. It is opened
 * through a memfd, its tree is built, every directory is listed (entries peeked, looked up
 * again by name and stat-ed both ways), and every file is stat-ed and read at its start,
 * middle and end, the root's summaries and the merged views of ranks and phases included;
 * a read that succeeds must return exactly the bytes its size promises. Each input runs as
 * is and with its checksums recomputed, as in fuzz_trace. Work per input is bounded: at most
 * MAX_VISITS entries, and files that cost a decoding pass are only stat-ed and read when the
 * trace holds at most MAX_EVENTS events, so the fuzzer explores structure, not long decodes
 * (a grammar can promise 2^k events in k rules; such a trace is still opened and listed).
 * Built with libFuzzer (-Dfuzz=true), or with fuzz_replay.c as a plain program for the test
 * suite. Errors are expected; crashes, sanitizer reports, leaks and broken sizes are findings.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bytes_i.h"
#include "crc32c_i.h"
#include "fix_crcs.h"
#include "tfs/reader.h"
#include "vtree_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* room for calls/<name>/ in every directory of views, which came after 600 sufficed */
#define MAX_VISITS 1200
#define MAX_DEPTH 10
#define MAX_EVENTS 100000
#define READ_LEN 4096

static volatile size_t sink;

/* Read @ino at three offsets; a successful read returns all it can of what stat said. */
static void read_file(struct fs_vtree *vt, uint64_t ino, uint64_t size, char *buf)
{
	struct fs_vfile *f;
	uint64_t offs[3] = {0, size / 2, size > 100 ? size - 100 : 0};

	if (fs_vfile_open(vt, ino, &f) < 0)
		return;
	if (fs_vfile_size(f) != size)
		abort();
	for (int i = 0; i < 3; i++) {
		uint64_t want = size - offs[i] < READ_LEN ? size - offs[i] : READ_LEN;
		ssize_t got = fs_vfile_read(f, buf, READ_LEN, offs[i]);

		if (got < 0)
			break;
		if ((uint64_t)got != want)
			abort();
		sink += got ? (unsigned char)buf[got - 1] : 0;
	}
	(void)fs_vfile_read(f, buf, READ_LEN, size); /* at the end: 0 */
	fs_vfile_close(f);
}

struct walk {
	struct fs_vtree *vt;
	bool deep; /* files that cost a decoding pass may be stat-ed and read */
	unsigned visits;
	char buf[READ_LEN];
};

static void walk_dir(struct walk *w, uint64_t dir, int depth);

static void visit(struct walk *w, uint64_t dir, uint64_t ino, int depth)
{
	struct fs_node_info attr, st;
	const char *name;
	uint64_t again;
	bool is_dir;

	if (fs_vtree_peek(w->vt, ino, &name, &is_dir) < 0)
		return;
	/* names are unique in a directory: looking one up finds the entry listed */
	if (fs_vtree_lookup(w->vt, dir, name, &again) != 0 || again != ino)
		abort();
	if (fs_vtree_attr(w->vt, ino, &attr) == 0 && (attr.is_dir != is_dir || attr.ino != ino))
		abort();
	if (is_dir) {
		walk_dir(w, ino, depth + 1);
		return;
	}
	if (!w->deep)
		return;
	if (fs_vtree_stat(w->vt, ino, &st) == 0)
		read_file(w->vt, ino, st.size, w->buf);
}

static void walk_dir(struct walk *w, uint64_t dir, int depth)
{
	struct fs_node_info d;

	if (depth > MAX_DEPTH || fs_vtree_stat(w->vt, dir, &d) < 0 || !d.is_dir)
		return;
	for (uint32_t i = 0; i < d.n_children && w->visits < MAX_VISITS; i++) {
		uint64_t ino;

		w->visits++;
		/*
		 * a listed index always has an entry; one made at its listing (a window) may
		 * fail to read a corrupt trace, and is skipped then
		 */
		int rc = fs_vtree_child(w->vt, dir, i, &ino);

		if (rc == -ENOENT)
			abort();
		if (rc < 0)
			continue;
		visit(w, dir, ino, depth);
	}
}

static void walk_trace(struct tfs_trace *t)
{
	static struct walk w;
	struct tfs_trace_info ti;
	struct tfs_diag diag;
	uint64_t ino;

	(void)tfs_trace_verify(t, &diag);
	tfs_trace_get_info(t, &ti);
	if (fs_vtree_new(t, "fuzz.trace", &w.vt) < 0)
		return;
	w.deep = ti.n_events <= MAX_EVENTS;
	w.visits = 0;
	walk_dir(&w, FS_ROOT_INO, 0);
	/* the last rank by path, as a user names it */
	if (ti.n_ranks > 0) {
		char path[64];

		snprintf(path, sizeof(path), "ranks/%u/trace.txt", ti.n_ranks - 1);
		(void)fs_vtree_resolve(w.vt, path, &ino);
	}
	fs_vtree_free(w.vt);
}

static void run_one(const uint8_t *data, size_t size)
{
	struct tfs_diag diag;
	struct tfs_trace *t;
	char path[64];
	int fd;

	fd = memfd_create("fuzz_vtree", MFD_CLOEXEC);
	if (fd < 0)
		abort();
	if (size > 0 && write(fd, data, size) != (ssize_t)size)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (tfs_trace_open(path, &t, &diag) == 0) {
		walk_trace(t);
		tfs_trace_close(t);
	}
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *fixed;

	run_one(data, size);
	if (size < FIX_HDR_LEN)
		return 0;
	fixed = malloc(size);
	if (!fixed)
		abort();
	memcpy(fixed, data, size);
	fix_crcs(fixed, size);
	if (memcmp(fixed, data, size) != 0)
		run_one(fixed, size);
	free(fixed);
	return 0;
}
