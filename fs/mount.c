/*
 * The FUSE daemon: serves one trace's virtual tree read-only with the libfuse3 low-level
 * API on a multithreaded session. Inodes are the tree's node numbers, so lookups never
 * allocate; attributes and entries carry long timeouts and opened files keep the kernel's
 * page cache, because a trace never changes. Every call that would modify anything answers
 * EROFS. Rendering is vtree.c's job; this file only translates between FUSE and the tree,
 * answering a sequential reader of a large file from what prefetch.c decoded ahead of it.
 */
#define FUSE_USE_VERSION 312

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include "cli_i.h"
#include "mount_i.h"
#include "prefetch_i.h"
#include "tfs/reader.h"
#include "vtree_i.h"

/* A trace never changes: the kernel may cache names and attributes for a day. */
#define FS_TIMEOUT_S 86400.0
#define FS_MAX_READ (1u << 20)

struct fs_mount {
	struct tfs_trace *t;
	struct fs_vtree *vt;
	struct timespec time; /* every node's a/c/mtime: the trace's start */
	uid_t uid;	      /* every node's owner: the mounting user's, or -o uid=, gid= */
	gid_t gid;
	bool foreground;
	bool nonempty;	      /* -o nonempty: mount over a directory that holds files */
	const char *trace_path;
	struct fs_ahead_pool *ahead; /* decodes ahead of sequential readers; NULL: none */
};

/*
 * An opened file. The kernel reads one handle from several threads at once (readahead runs
 * ahead of the reader), so a handle holds up to FS_POOL_MAX tree handles, each with its own
 * cursor: concurrent reads decode in parallel, and a read that continues where one ended
 * takes that cursor and costs O(1) per event instead of a seek.
 */
#define FS_POOL_MAX 4

struct fs_slot {
	struct fs_vfile *f;
	uint64_t end_off; /* where this cursor's last read ended */
	bool busy;	  /* a thread reads through it now */
};

struct fs_open_file {
	pthread_mutex_t lock; /* protects n_slots and every slot's end_off and busy */
	pthread_cond_t idle;  /* signalled when a slot stops being busy */
	uint64_t ino;
	unsigned int n_slots;
	struct fs_slot slot[FS_POOL_MAX];
	struct fs_ahead *ahead; /* its sequential reads decoded ahead, or NULL (thread-safe) */
};

static struct fs_mount *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void fs_log(const struct fs_mount *m, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void fs_log(const struct fs_mount *m, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (m->foreground) {
		fputs("tracefs: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	} else {
		vsyslog(LOG_ERR, fmt, ap);
	}
	va_end(ap);
}

/*
 * The trace file changing under the mount: its mapping (tfs_trace_file_map) faults where a
 * shortened file ended. The SIGBUS guard puts a page of zeros there and says so in
 * g_faulted, so the daemon lives on; whatever was read since is discarded and reads fail
 * with EIO (trace_changed()), as they do once the file's size or time is not as mounted.
 */
static const char *g_map_lo;
static size_t g_map_len;
static volatile sig_atomic_t g_faulted;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	const char *a = si->si_addr;
	const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);

	(void)uc;
	if (g_map_lo && a >= g_map_lo && a < g_map_lo + g_map_len &&
	    mmap((void *)((uintptr_t)a & ~(page - 1)), page, PROT_READ,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
		g_faulted = 1;
		return;
	}
	signal(sig, SIG_DFL); /* not ours: the fault happens again, and kills as it would */
}

/*
 * The decoding threads, started with the signals that end the session blocked: libfuse's
 * handler only marks the session exited, which wakes the loop when the signal lands on one of
 * its own threads (interrupting a wait), not on a decoding thread idle on its condition.
 * Faults (SIGBUS of a shortened trace) stay unblocked: they are the faulting thread's own.
 */
static void start_ahead_pool(struct fs_mount *m)
{
	static const int ends[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
	sigset_t block, old;

	sigemptyset(&block);
	for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
		sigaddset(&block, ends[i]);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	if (fs_ahead_pool_new(fs_ahead_default_workers(), FS_AHEAD_BUDGET, FS_AHEAD_CHUNK,
			      &m->ahead) < 0)
		fs_log(m, "cannot start the decoding threads: every read decodes on its own");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void guard_mapping(const struct tfs_trace *t)
{
	struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO};
	const void *base;

	tfs_trace_file_map(t, &base, &g_map_len);
	g_map_lo = base;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}

/* Whether the trace file is no longer what was mounted; said once in the log. */
static bool trace_changed(const struct fs_mount *m)
{
	static atomic_bool said;

	if (!g_faulted && tfs_trace_file_changed(m->t) == 0)
		return false;
	if (!atomic_exchange(&said, true))
		fs_log(m, "trace %s changed while mounted (rewritten or shortened): its files "
		       "read as EIO from now on; unmount it and mount it again",
		       m->trace_path);
	return true;
}

/* The one place a negative error becomes FUSE's positive errno. */
static void fs_reply_err(fuse_req_t req, int rc)
{
	if (rc == -TFS_ECORRUPT)
		rc = -EIO; /* the detail was logged where it was found */
	fuse_reply_err(req, -rc);
}

static void fill_stat(const struct fs_mount *m, const struct fs_node_info *n, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_mode = n->is_dir ? S_IFDIR | 0555 : S_IFREG | 0444;
	st->st_nlink = n->is_dir ? 2 : 1;
	st->st_size = (off_t)n->size;
	st->st_blksize = 65536;
	st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
	st->st_atim = st->st_mtim = st->st_ctim = m->time;
	st->st_uid = m->uid;
	st->st_gid = m->gid;
}

static void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs_mount *m = fs_of(req);
	struct fuse_entry_param e;
	struct fs_node_info n;
	uint64_t ino;
	int rc;

	rc = fs_vtree_lookup(m->vt, parent, name, &ino);
	if (rc == 0)
		rc = fs_vtree_attr(m->vt, ino, &n);
	if (rc < 0) {
		fs_reply_err(req, rc);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = ino;
	e.generation = 1;
	e.attr_timeout = FS_TIMEOUT_S;
	e.entry_timeout = FS_TIMEOUT_S;
	fill_stat(m, &n, &e.attr);
	fuse_reply_entry(req, &e);
}

static void fs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_mount *m = fs_of(req);
	struct fs_node_info n;
	struct stat st;
	int rc = fs_vtree_attr(m->vt, ino, &n);

	if (rc < 0) {
		fs_reply_err(req, rc);
		return;
	}
	fill_stat(m, &n, &st);
	fuse_reply_attr(req, &st, FS_TIMEOUT_S);
}

static void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			  struct fuse_file_info *fi)
{
	struct fs_mount *m = fs_of(req);
	struct fs_node_info dir;
	char *buf = malloc(size ? size : 1);
	size_t used = 0;
	int rc = fs_vtree_stat(m->vt, ino, &dir);

	if (!buf || rc < 0) {
		free(buf);
		fs_reply_err(req, rc < 0 ? rc : -ENOMEM);
		return;
	}
	/*
	 * Offsets: 0 ".", 1 "..", 2 + i the i-th child; each entry carries the next offset.
	 * readdir only passes the inode and type on, so no size is computed here: listing a
	 * rank must not run its profile's decoding pass.
	 */
	for (off_t i = off; i < (off_t)dir.n_children + 2; i++) {
		struct stat st = {0};
		const char *name;
		uint64_t child;
		bool is_dir = true;
		size_t need;

		if (i < 2) {
			child = i == 0 ? ino : dir.parent;
			name = i == 0 ? "." : "..";
		} else if (fs_vtree_child(m->vt, ino, (uint32_t)(i - 2), &child) < 0 ||
			   fs_vtree_peek(m->vt, child, &name, &is_dir) < 0) {
			break;
		}
		st.st_ino = child;
		st.st_mode = is_dir ? S_IFDIR | 0555 : S_IFREG | 0444;
		need = fuse_add_direntry(req, buf + used, size - used, name, &st, i + 1);
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void open_file_free(struct fs_open_file *of)
{
	fs_ahead_free(of->ahead);
	for (unsigned int i = 0; i < of->n_slots; i++)
		fs_vfile_close(of->slot[i].f);
	pthread_cond_destroy(&of->idle);
	pthread_mutex_destroy(&of->lock);
	free(of);
}

static void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_mount *m = fs_of(req);
	struct fs_open_file *of;
	int rc;

	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & (O_TRUNC | O_CREAT))) {
		fuse_reply_err(req, EROFS);
		return;
	}
	of = calloc(1, sizeof(*of));
	if (!of) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* the first cursor now, so a file that cannot be read fails at open */
	rc = fs_vfile_open(m->vt, ino, &of->slot[0].f);
	if (rc == 0 && trace_changed(m)) {
		fs_vfile_close(of->slot[0].f);
		rc = -EIO;
	}
	if (rc < 0) {
		free(of);
		fs_reply_err(req, rc);
		return;
	}
	of->n_slots = 1;
	of->ino = ino;
	/* without it (small file, no workers, no memory) every read decodes in its thread */
	if (m->ahead && fs_vfile_size(of->slot[0].f) >= 2 * FS_AHEAD_CHUNK)
		fs_ahead_new(m->ahead, m->t, m->vt, ino, &of->ahead);
	pthread_mutex_init(&of->lock, NULL);
	pthread_cond_init(&of->idle, NULL);
	fi->fh = (uintptr_t)of;
	fi->keep_cache = 1;
	if (fuse_reply_open(req, fi) == -ENOENT) /* the opener was interrupted */
		open_file_free(of);
}

/*
 * Take a slot for a read at @off: an idle one that ended at @off, else a new one while
 * there is room, else any idle one; wait when all are busy. Called with of->lock held.
 */
static struct fs_slot *slot_take(struct fs_mount *m, struct fs_open_file *of, uint64_t off)
{
	struct fs_slot *any;

	for (;;) {
		any = NULL;
		for (unsigned int i = 0; i < of->n_slots; i++) {
			struct fs_slot *s = &of->slot[i];

			if (s->busy)
				continue;
			if (s->end_off == off)
				return s;
			any = s;
		}
		if (of->n_slots < FS_POOL_MAX &&
		    fs_vfile_open(m->vt, of->ino, &of->slot[of->n_slots].f) == 0)
			return &of->slot[of->n_slots++];
		if (any)
			return any;
		pthread_cond_wait(&of->idle, &of->lock);
	}
}

/* Answer a read from the chunks decoded ahead. @return false: not decoded ahead */
static bool reply_ahead(struct fs_mount *m, fuse_req_t req, struct fs_ahead *a, size_t size,
			off_t off)
{
	struct fs_span sp;

	if (!fs_ahead_get(a, (uint64_t)off, size, &sp))
		return false;
	if (trace_changed(m))
		fs_reply_err(req, -EIO);
	else
		fuse_reply_iov(req, sp.iov, sp.n);
	fs_ahead_put(a, &sp);
	return true;
}

static void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct fs_open_file *of = (struct fs_open_file *)(uintptr_t)fi->fh;
	struct fs_mount *m = fs_of(req);
	struct fs_slot *s;
	char *buf;
	ssize_t got;

	if (size > FS_MAX_READ)
		size = FS_MAX_READ;
	if (of->ahead && reply_ahead(m, req, of->ahead, size, off))
		return;
	buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&of->lock);
	s = slot_take(m, of, (uint64_t)off);
	s->busy = true;
	pthread_mutex_unlock(&of->lock);

	got = fs_vfile_read(s->f, buf, size, (uint64_t)off);
	if (trace_changed(m))
		got = -EIO; /* what was read may be another file's bytes, or zeros */
	else if (got == -TFS_ECORRUPT) {
		char d[256];

		fs_log(m, "corrupt trace %s: %s", m->trace_path,
		       tfs_diag_str(fs_vfile_diag(s->f), d, sizeof(d)));
	}

	pthread_mutex_lock(&of->lock);
	s->end_off = got > 0 ? (uint64_t)off + (uint64_t)got : UINT64_MAX;
	s->busy = false;
	/* not a signal: glibc can lose one (sourceware bug 25847, in Debian 12) */
	pthread_cond_broadcast(&of->idle);
	pthread_mutex_unlock(&of->lock);
	if (got < 0)
		fs_reply_err(req, (int)got);
	else
		fuse_reply_buf(req, buf, (size_t)got);
	free(buf);
}

static void fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	open_file_free((struct fs_open_file *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_node_info n;
	int rc = fs_vtree_stat(fs_of(req)->vt, ino, &n);

	if (rc == 0 && !n.is_dir)
		rc = -ENOTDIR;
	if (rc < 0) {
		fs_reply_err(req, rc);
		return;
	}
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void fs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct tfs_trace_info info;
	struct statvfs sv;

	tfs_trace_get_info(fs_of(req)->t, &info);
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = info.file_bytes / 4096 + 1;
	sv.f_files = fs_vtree_n_nodes(fs_of(req)->vt);
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

static void fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	fuse_reply_err(req, ENODATA);
}

static void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, 0);
	else
		fuse_reply_buf(req, NULL, 0);
}

/* Everything that would change the tree. */
static void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			  struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			dev_t rdev)
{
	fuse_reply_err(req, EROFS);
}

static void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	fuse_reply_err(req, EROFS);
}

static void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
			  const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
			 fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	fuse_reply_err(req, EROFS);
}

static void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		       const char *newname)
{
	fuse_reply_err(req, EROFS);
}

static void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
			off_t off, struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			   const char *value, size_t size, int flags)
{
	fuse_reply_err(req, EROFS);
}

static void fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			 struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void fs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
			    off_t length, struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static const struct fuse_lowlevel_ops fs_ops = {
	.lookup = fs_op_lookup,
	.getattr = fs_op_getattr,
	.readdir = fs_op_readdir,
	.opendir = fs_op_opendir,
	.open = fs_op_open,
	.read = fs_op_read,
	.release = fs_op_release,
	.statfs = fs_op_statfs,
	.getxattr = fs_op_getxattr,
	.listxattr = fs_op_listxattr,
	.setattr = fs_op_setattr,
	.mknod = fs_op_mknod,
	.mkdir = fs_op_mkdir,
	.unlink = fs_op_unlink,
	.rmdir = fs_op_unlink,
	.symlink = fs_op_symlink,
	.rename = fs_op_rename,
	.link = fs_op_link,
	.write = fs_op_write,
	.setxattr = fs_op_setxattr,
	.removexattr = fs_op_removexattr,
	.create = fs_op_create,
	.fallocate = fs_op_fallocate,
};

/*
 * Refuse a mountpoint that is missing, not a directory, or already mounted on. @real gets
 * its absolute path: the daemon changes to "/" and must still unmount it on a signal.
 */
static int check_mountpoint(const char *mp, char real[PATH_MAX], bool nonempty)
{
	char parent[PATH_MAX + 4];
	struct stat st, pst;
	struct dirent *e;
	DIR *d;

	if (stat(mp, &st) < 0)
		return fs_fail("cannot mount at %s: %s", mp, fs_strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return fs_fail("cannot mount at %s: not a directory", mp);
	if (!realpath(mp, real))
		return fs_fail("cannot mount at %s: %s", mp, fs_strerror(errno));
	snprintf(parent, sizeof(parent), "%s/..", real);
	if (stat(parent, &pst) < 0)
		return fs_fail("cannot mount at %s: %s", mp, fs_strerror(errno));
	if (st.st_dev != pst.st_dev || st.st_ino == pst.st_ino)
		return fs_fail("cannot mount at %s: already a mount point (tracefs umount %s?)",
				  mp, mp);
	d = nonempty ? NULL : opendir(real);
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			break;
	if (d) {
		closedir(d);
		if (e)
			return fs_fail("cannot mount at %s: not empty (the mount would hide its "
				       "files; -o nonempty to mount anyway)", mp);
	}
	return 0;
}

/*
 * Take tracefs's own options out of @opts (nonempty, uid=N, gid=N) into @m, leaving FUSE's
 * in @rest. @return 0, or 2 (said) for a bad number
 */
static int own_options(const char *opts, struct fs_mount *m, char *rest, size_t cap)
{
	const char *tok = opts, *end;
	size_t len = 0;

	rest[0] = '\0';
	for (; opts && *tok; tok = *end ? end + 1 : end) {
		char word[64], *num_end;
		unsigned long v;

		end = strchrnul(tok, ',');
		snprintf(word, sizeof(word), "%.*s", (int)(end - tok), tok);
		if (!strcmp(word, "nonempty")) {
			m->nonempty = true;
			continue;
		}
		if (!strncmp(word, "uid=", 4) || !strncmp(word, "gid=", 4)) {
			errno = 0;
			v = strtoul(word + 4, &num_end, 10);
			if (errno || num_end == word + 4 || *num_end || v >= (unsigned long)UINT32_MAX) {
				fs_fail("mount: -o %s: not a user or group id", word);
				return 2;
			}
			if (word[0] == 'u')
				m->uid = (uid_t)v;
			else
				m->gid = (gid_t)v;
			continue;
		}
		if (end > tok && len + (size_t)(end - tok) + 2 < cap)
			len += (size_t)snprintf(rest + len, cap - len, "%s%.*s", len ? "," : "",
						(int)(end - tok), tok);
	}
	return 0;
}

/* The trace's start ("start_time_ns" metadata), else the file's modification time. */
static struct timespec trace_time(const struct tfs_trace *t, const char *path)
{
	const char *v = tfs_trace_meta(t, "start_time_ns");
	struct timespec ts = {0};
	struct stat st;

	if (v) {
		unsigned long long ns = strtoull(v, NULL, 10);

		ts.tv_sec = (time_t)(ns / 1000000000u);
		ts.tv_nsec = (long)(ns % 1000000000u);
	} else if (stat(path, &st) == 0) {
		ts = st.st_mtim;
	}
	return ts;
}

static int open_mount(struct fs_mount *m, const char *path)
{
	const char *base = strrchr(path, '/');
	int rc = fs_trace_open(path, &m->t);

	if (rc)
		return rc;
	rc = fs_vtree_new(m->t, base ? base + 1 : path, &m->vt);
	if (rc < 0) {
		tfs_trace_close(m->t);
		return fs_fail("cannot build the tree of %s: %s", path, fs_strerror(-rc));
	}
	m->time = trace_time(m->t, path);
	m->trace_path = path;
	return 0;
}

static void close_mount(struct fs_mount *m)
{
	fs_vtree_free(m->vt);
	tfs_trace_close(m->t);
}

/*
 * What libfuse says while the session is made and mounted, kept for our one message line
 * instead of printed above it: the first complaint, without its "fuse: " and newline.
 */
static char g_fuse_msg[256];

static void keep_fuse_msg(enum fuse_log_level level, const char *fmt, va_list ap)
{
	size_t len;
	char *p;

	(void)level;
	if (g_fuse_msg[0])
		return;
	vsnprintf(g_fuse_msg, sizeof(g_fuse_msg), fmt, ap);
	len = strlen(g_fuse_msg);
	while (len > 0 && g_fuse_msg[len - 1] == '\n')
		g_fuse_msg[--len] = '\0';
	if (strncmp(g_fuse_msg, "fuse: ", 6) == 0)
		memmove(g_fuse_msg, g_fuse_msg + 6, len - 6 + 1);
	/* its errno texts in the message form ("mount failed: permission denied") */
	for (p = g_fuse_msg; (p = strstr(p, ": ")) != NULL; p += 2)
		if (p[2] >= 'A' && p[2] <= 'Z' && p[3] >= 'a' && p[3] <= 'z')
			p[2] = (char)(p[2] - 'A' + 'a');
}

/* The first of the user's comma-separated options no FUSE session accepts, or NULL. */
static const char *unknown_option(const char *user_opts, char *buf, size_t cap)
{
	const char *tok = user_opts, *end;

	for (; *tok; tok = *end ? end + 1 : end) {
		char *argv[] = {"tracefs", "-o", buf, NULL};
		struct fuse_args args = FUSE_ARGS_INIT(3, argv);
		struct fuse_session *se;

		end = strchrnul(tok, ',');
		if (end == tok || (size_t)(end - tok) >= cap)
			continue;
		snprintf(buf, cap, "%.*s", (int)(end - tok), tok);
		se = fuse_session_new(&args, &fs_ops, sizeof(fs_ops), NULL);
		fuse_opt_free_args(&args);
		if (!se)
			return buf;
		fuse_session_destroy(se);
	}
	return NULL;
}

/* Mount, daemonise once the kernel serves the mount, run the session until unmounted. */
static int serve(struct fs_mount *m, const char *mp, const char *user_opts)
{
	char opts[1024];
	char *argv[] = {"tracefs", "-o", opts, NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct fuse_loop_config *cfg;
	struct fuse_session *se;
	int loop_rc, rc = 1;

	/* ours last, so "-o rw" cannot make the mount writable */
	if (snprintf(opts, sizeof(opts), "%s%sro,default_permissions,fsname=tracefs,"
		     "subtype=tracefs", user_opts ? user_opts : "", user_opts ? "," : "") >=
	    (int)sizeof(opts))
		return fs_fail("cannot mount at %s: options too long", mp);
	g_fuse_msg[0] = '\0';
	fuse_set_log_func(keep_fuse_msg);
	se = fuse_session_new(&args, &fs_ops, sizeof(fs_ops), m);
	if (!se) {
		char bad[256];

		if (user_opts && unknown_option(user_opts, bad, sizeof(bad)))
			fs_fail("cannot mount at %s: unknown or malformed mount option %s", mp, bad);
		else
			fs_fail("cannot mount at %s: %s", mp,
				g_fuse_msg[0] ? g_fuse_msg : "the FUSE session refused its options");
		fuse_set_log_func(NULL);
		return 1;
	}
	if (fuse_set_signal_handlers(se) < 0) {
		fs_fail("cannot install signal handlers");
		goto err_destroy;
	}
	if (fuse_session_mount(se, mp) < 0) {
		fs_fail("cannot mount at %s: %s", mp, g_fuse_msg[0] ? g_fuse_msg : "fuse refused");
		goto err_handlers;
	}
	fuse_set_log_func(NULL);
	if (fuse_daemonize(m->foreground) < 0)
		goto err_unmount;
	guard_mapping(m->t);
	cfg = fuse_loop_cfg_create();
	if (!cfg)
		goto err_unmount;
	fuse_loop_cfg_set_max_threads(cfg, 16);
	/* after fuse_daemonize's fork: threads do not survive it */
	start_ahead_pool(m);
	/* > 0: the signal that ended it, a requested shutdown like an unmount */
	loop_rc = fuse_session_loop_mt(se, cfg);
	if (loop_rc < 0)
		fs_log(m, "serving %s failed: %s", mp, fs_strerror(-loop_rc));
	rc = loop_rc < 0 ? 1 : 0;
	fuse_loop_cfg_destroy(cfg);
	fs_ahead_pool_free(m->ahead);
	m->ahead = NULL;
err_unmount:
	fuse_session_unmount(se);
err_handlers:
	fuse_remove_signal_handlers(se);
err_destroy:
	fuse_set_log_func(NULL);
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	return rc;
}

int fs_cmd_mount(int argc, char **argv)
{
	struct fs_mount m = {.uid = getuid(), .gid = getgid()};
	const char *opts = NULL;
	char mp[PATH_MAX], fuse_opts[1024];
	int c, rc;

	optind = 1;
	opterr = 0;
	while ((c = getopt(argc, argv, "+fo:")) != -1) {
		switch (c) {
		case 'f':
			m.foreground = true;
			break;
		case 'o':
			opts = optarg;
			break;
		default:
			if (optopt == 'o')
				return fs_usage("mount", "-o needs OPTIONS");
			return fs_usage("mount", "unknown option -%c", optopt);
		}
	}
	if (argc - optind != 2)
		return fs_usage("mount", "needs TRACE and MOUNTPOINT");
	/* a user who may not open it mounts through the setuid fusermount3, as libfuse does */
	if (access("/dev/fuse", F_OK) < 0)
		return fs_fail("cannot mount: /dev/fuse: %s (is the fuse module loaded?)",
				  fs_strerror(errno));
	rc = own_options(opts, &m, fuse_opts, sizeof(fuse_opts));
	if (rc)
		return rc;
	rc = check_mountpoint(argv[optind + 1], mp, m.nonempty);
	if (rc)
		return rc;
	rc = open_mount(&m, argv[optind]);
	if (rc)
		return rc;
	if (!m.foreground)
		openlog("tracefs", LOG_PID, LOG_DAEMON);
	rc = serve(&m, mp, fuse_opts[0] ? fuse_opts : NULL);
	close_mount(&m);
	return rc;
}

/* Undo the octal escapes (\040 for a space) of a /proc/self/mountinfo path, in place. */
static void unescape_mountinfo(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

/*
 * The file system type mounted at @real (absolute, resolved) into @type ("" when nothing
 * is mounted there), from the last matching line of /proc/self/mountinfo.
 * @return 0 or a negative errno
 */
static int mounted_type(const char *real, char *type, size_t type_cap)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;

	if (!f)
		return -errno;
	type[0] = '\0';
	while (getline(&line, &cap, f) > 0) {
		char mp[PATH_MAX], fstype[64];
		const char *sep = strstr(line, " - ");

		/* id parent major:minor root MOUNTPOINT ... - FSTYPE source options */
		if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 ||
		    sscanf(sep + 3, "%63s", fstype) != 1)
			continue;
		unescape_mountinfo(mp);
		if (strcmp(mp, real) == 0)
			snprintf(type, type_cap, "%s", fstype);
	}
	free(line);
	fclose(f);
	return 0;
}

/* Unmount only what tracefs mounted: never another file system by mistake. */
int fs_cmd_umount(int argc, char **argv)
{
	char real[PATH_MAX], type[64];
	pid_t pid;
	int status, rc;

	if (argc != 2)
		return fs_usage("umount", "needs exactly one MOUNTPOINT");
	if (!realpath(argv[1], real)) {
		/* a mount whose daemon died: stat fails with ENOTCONN, the name is still right */
		if (errno != ENOTCONN || strlen(argv[1]) >= sizeof(real) || argv[1][0] != '/')
			return fs_fail("cannot unmount %s: %s", argv[1], fs_strerror(errno));
		snprintf(real, sizeof(real), "%s", argv[1]);
	}
	rc = mounted_type(real, type, sizeof(type));
	if (rc < 0)
		return fs_fail("cannot unmount %s: /proc/self/mountinfo: %s", argv[1],
				  fs_strerror(-rc));
	if (!type[0])
		return fs_fail("cannot unmount %s: not a mount point", argv[1]);
	if (strcmp(type, "fuse.tracefs") != 0)
		return fs_fail("cannot unmount %s: not a tracefs mount: type=%s", argv[1], type);
	if (umount2(real, UMOUNT_NOFOLLOW) == 0)
		return 0;
	if (errno != EPERM)
		return fs_fail("cannot unmount %s: %s", argv[1], fs_strerror(errno));
	pid = fork();
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", real, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		return fs_fail("cannot unmount %s: fusermount3 -u failed", argv[1]);
	return 0;
}
