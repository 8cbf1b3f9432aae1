/*
 * nullfs: the "no-op FUSE" ceiling for tests/bench/run_mount. A libfuse3 low-level file
 * system holding one read-only file, /data, of BYTES bytes of one repeating text line. It is
 * served exactly as tracefs serves a view (multithreaded session, keep_cache, day-long
 * timeouts, the same mount options) but a read only copies from a prepared buffer, so its
 * throughput is what the kernel and libfuse allow. It decodes nothing and checks nothing.
 * Given a FILE, /data holds that file's bytes instead (read into memory at start): the same
 * text a view holds, so that a reader whose speed depends on the text (grep) reads the same.
 * Usage: nullfs MOUNTPOINT BYTES [FILE]   (returns once mounted; unmount with fusermount3 -u;
 * with FILE, BYTES is ignored)
 */
#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NULLFS_TIMEOUT_S 86400.0
#define NULLFS_FILE_INO 2
#define NULLFS_MAX_READ (1u << 20)

static const char line[] = "0.000009160   111 T0 malloc(size=4096) = 0x7f0000400000       \n";
#define LINE_LEN (sizeof(line) - 1)

static uint64_t file_bytes;
/* NULLFS_MAX_READ + one line of repeated lines: any read is one slice of it */
static char *pattern;
/* FILE's bytes, [file_bytes], or NULL: then /data is the repeated line */
static char *text;

static void fill_stat(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = ino == FUSE_ROOT_ID ? S_IFDIR | 0555 : S_IFREG | 0444;
	st->st_nlink = ino == FUSE_ROOT_ID ? 2 : 1;
	st->st_size = ino == FUSE_ROOT_ID ? 0 : (off_t)file_bytes;
	st->st_blksize = 65536;
}

static void nullfs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;

	if (parent != FUSE_ROOT_ID || strcmp(name, "data") != 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = NULLFS_FILE_INO;
	e.attr_timeout = e.entry_timeout = NULLFS_TIMEOUT_S;
	fill_stat(e.ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void nullfs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	if (ino != FUSE_ROOT_ID && ino != NULLFS_FILE_INO) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_stat(ino, &st);
	fuse_reply_attr(req, &st, NULLFS_TIMEOUT_S);
}

static void nullfs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			      struct fuse_file_info *fi)
{
	static const char *const names[] = {".", "..", "data"};
	char buf[512];
	size_t used = 0;

	for (off_t i = off; i < 3 && size <= sizeof(buf); i++) {
		struct stat st;
		size_t need;

		fill_stat(i == 2 ? NULLFS_FILE_INO : FUSE_ROOT_ID, &st);
		need = fuse_add_direntry(req, buf + used, size - used, names[i], &st, i + 1);
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
}

static void nullfs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != NULLFS_FILE_INO) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void nullfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	if ((uint64_t)off >= file_bytes) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > NULLFS_MAX_READ)
		size = NULLFS_MAX_READ;
	if (size > file_bytes - (uint64_t)off)
		size = (size_t)(file_bytes - (uint64_t)off);
	fuse_reply_buf(req, text ? text + off : pattern + (uint64_t)off % LINE_LEN, size);
}

/* @path's bytes into text, their count into file_bytes. @return 0 or -1 (said) */
static int read_text(const char *path)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	size_t got = 0;

	if (!f || fstat(fileno(f), &st) < 0) {
		perror(path);
		if (f)
			fclose(f);
		return -1;
	}
	file_bytes = (uint64_t)st.st_size;
	text = malloc(file_bytes ? file_bytes : 1);
	if (text)
		got = fread(text, 1, file_bytes, f);
	fclose(f);
	if (!text || got != file_bytes) {
		fprintf(stderr, "nullfs: %s: cannot read its %llu bytes\n", path,
			(unsigned long long)file_bytes);
		return -1;
	}
	return 0;
}

static const struct fuse_lowlevel_ops nullfs_ops = {
	.lookup = nullfs_op_lookup,
	.getattr = nullfs_op_getattr,
	.readdir = nullfs_op_readdir,
	.open = nullfs_op_open,
	.read = nullfs_op_read,
};

int main(int argc, char **argv)
{
	char *fargv[] = {argv[0], "-o", "ro,default_permissions,fsname=nullfs,subtype=nullfs",
			 NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	struct fuse_loop_config *cfg;
	struct fuse_session *se;
	size_t cap = NULLFS_MAX_READ + LINE_LEN;
	int rc = 1;

	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: nullfs MOUNTPOINT BYTES [FILE]\n");
		return 2;
	}
	file_bytes = strtoull(argv[2], NULL, 0);
	if (argc == 4 && read_text(argv[3]) < 0)
		return 1;
	pattern = malloc(cap);
	if (!pattern)
		return 1;
	for (size_t i = 0; i < cap; i++)
		pattern[i] = line[i % LINE_LEN];
	se = fuse_session_new(&args, &nullfs_ops, sizeof(nullfs_ops), NULL);
	if (!se)
		return 1;
	if (fuse_set_signal_handlers(se) < 0)
		goto out_destroy;
	if (fuse_session_mount(se, argv[1]) < 0)
		goto out_handlers;
	if (fuse_daemonize(0) < 0)
		goto out_unmount;
	cfg = fuse_loop_cfg_create();
	if (!cfg)
		goto out_unmount;
	fuse_loop_cfg_set_max_threads(cfg, 16);
	rc = fuse_session_loop_mt(se, cfg) < 0;
	fuse_loop_cfg_destroy(cfg);
out_unmount:
	fuse_session_unmount(se);
out_handlers:
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
	free(pattern);
	free(text);
	return rc;
}
