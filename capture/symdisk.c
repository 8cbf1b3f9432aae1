/*
 * Symbolised addresses kept on disk between recordings: one file per object file, named
 * after its identity, holding what symbolize.c found for its addresses, so that the next
 * recording of a program mapping the same file (a compiler run again, any program's libc)
 * reads them back instead of opening the file's DWARF. libc's separate debug file alone
 * costs some 45 ms of CPU to open (its sections are compressed), more than `ls` takes.
 *
 * The caller gives the identity, a string that changes whenever a lookup could give another
 * answer (symbolize.c says what it holds); it is stored in the file and must match byte for
 * byte.
 * Layout, little-endian:
 *   "TFSYMC01", u32 id_len, id, u32 n,
 *   n times: u64 pc, u8 n_frames (<= 64),
 *            n_frames times: u32 line, u16 fn_len (0xffff: no function), fn, u16 file_len, file
 *   u64 FNV-1a of every byte before it.
 * Strings hold no NUL byte. A file that is too large, short, damaged, of another identity,
 * not a regular file, not the user's own or writable by others is ignored whole: nothing of
 * it reaches the cache. Files are written to a temporary file of a name of its own and
 * renamed, so a reader never sees half of one. A save holds the directory's flock while it
 * reads the file back, adds what it found and renames the result in place, so recordings
 * running at once keep each other's entries. Loading a file touches its mtime, and a
 * trimming save into a directory holding more than SYMDISK_MAX_FILES files removes the
 * least recently loaded or saved (and temporary files an hour old). This file knows nothing of DWARF (symbolize.c) nor of how the
 * cache stores entries (symcache.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "symbols_i.h"

#define MAGIC "TFSYMC01"
#define MAGIC_BYTES 8
#define MAX_ID 8192
#define MAX_FRAMES 64
#define NO_FN 0xffffu
#define MAX_STR 0xfffeu

static uint64_t fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3u;
	return h;
}

/* A bounded reader. */
struct rd {
	const uint8_t *p, *end;
};

static bool take(struct rd *r, void *out, size_t n)
{
	if ((size_t)(r->end - r->p) < n)
		return false;
	if (out)
		memcpy(out, r->p, n);
	r->p += n;
	return true;
}

static bool take_u(struct rd *r, uint64_t *v, size_t n)
{
	uint8_t b[8];

	*v = 0;
	if (!take(r, b, n))
		return false;
	for (size_t i = 0; i < n; i++)
		*v |= (uint64_t)b[i] << (8 * i);
	return true;
}

/*
 * A string of the file at @r, copied with its NUL to *@at (room enough: the caller's
 * scratch); @fn: may be absent (*@s NULL). @return false when damaged
 */
static bool take_str(struct rd *r, char **at, bool fn, const char **s)
{
	uint64_t len;

	*s = NULL;
	if (!take_u(r, &len, 2))
		return false;
	if (fn && len == NO_FN)
		return true;
	if (len > MAX_STR || !take(r, *at, len) || memchr(*at, 0, len))
		return false;
	(*at)[len] = 0;
	*s = *at;
	*at += len + 1;
	return true;
}

/*
 * Read the entries after the header at @r into @c when @c is not NULL, else only check
 * them; @scratch holds one entry's strings. @return entries added (checking: all), or
 * -TFS_ECORRUPT (damaged) or -ENOMEM
 */
static long read_entries(struct rd r, uint32_t n, char *scratch, struct cap_symcache *c)
{
	struct tfs_src_frame f[MAX_FRAMES];
	long added = 0;

	for (uint32_t i = 0; i < n; i++) {
		const struct tfs_src_frame *stored, *old;
		uint64_t pc, nf, line;
		uint32_t n_old;
		char *at = scratch;

		if (!take_u(&r, &pc, 8) || !take_u(&r, &nf, 1) || nf > MAX_FRAMES)
			return -TFS_ECORRUPT;
		for (uint32_t k = 0; k < nf; k++) {
			if (!take_u(&r, &line, 4) || !take_str(&r, &at, true, &f[k].function) ||
			    !take_str(&r, &at, false, &f[k].file))
				return -TFS_ECORRUPT;
			f[k].line = (uint32_t)line;
		}
		if (!c) {
			added++; /* checking only: counted */
			continue;
		}
		if (cap_symcache_get(c, pc, &old, &n_old))
			continue; /* known already (a repeat: the first wins) */
		if (cap_symcache_put(c, pc, f, (uint32_t)nf, &stored) < 0)
			return -ENOMEM;
		added++;
	}
	return r.p == r.end ? added : -TFS_ECORRUPT;
}

long cap_symdisk_parse(const uint8_t *buf, size_t len, const char *id, struct cap_symcache *c)
{
	struct rd r = {buf, buf + len};
	const size_t id_len = strlen(id);
	uint64_t got_len, n, sum;
	char *scratch;
	long rc;

	if (len < MAGIC_BYTES + 8 + 8)
		return -TFS_ECORRUPT;
	memcpy(&sum, buf + len - 8, 8); /* little-endian hosts only, as the capture */
	if (fnv(buf, len - 8) != sum)
		return -TFS_ECORRUPT;
	r.end -= 8;
	if (!take(&r, NULL, MAGIC_BYTES) || memcmp(buf, MAGIC, MAGIC_BYTES) != 0 ||
	    !take_u(&r, &got_len, 4) || (size_t)(r.end - r.p) < got_len)
		return -TFS_ECORRUPT;
	if (got_len != id_len || memcmp(r.p, id, id_len) != 0)
		return -ESTALE; /* whole, but of another identity */
	r.p += id_len;
	if (!take_u(&r, &n, 4))
		return -TFS_ECORRUPT;
	/* an entry's strings, each with a NUL for its 2-byte length: less than the file */
	scratch = malloc(len);
	if (!scratch)
		return -ENOMEM;
	/* all checked before anything is kept: a damaged file adds nothing */
	rc = read_entries(r, (uint32_t)n, scratch, NULL);
	if (rc >= 0)
		rc = read_entries(r, (uint32_t)n, scratch, c);
	free(scratch);
	return rc;
}

/* A growing output buffer; @err sticks. */
struct wr {
	uint8_t *p;
	size_t len, cap;
	bool err;
};

static void put(struct wr *w, const void *src, size_t n)
{
	if (w->err)
		return;
	if (w->len + n > w->cap) {
		size_t cap = w->cap ? w->cap : 4096;
		uint8_t *p;

		while (cap < w->len + n)
			cap *= 2;
		p = realloc(w->p, cap);
		if (!p) {
			w->err = true;
			return;
		}
		w->p = p;
		w->cap = cap;
	}
	memcpy(w->p + w->len, src, n);
	w->len += n;
}

static void put_u(struct wr *w, uint64_t v, size_t n)
{
	uint8_t b[8];

	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	put(w, b, n);
}

/* @s (NULL: no function) of at most MAX_STR bytes. */
static void put_str(struct wr *w, const char *s)
{
	const size_t len = s ? strlen(s) : NO_FN;

	put_u(w, len, 2);
	if (s)
		put(w, s, len);
}

/* Whether an entry's strings fit the file's 2-byte lengths. */
static bool storable(const struct tfs_src_frame *f, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		if ((f[k].function && strlen(f[k].function) > MAX_STR) || strlen(f[k].file) > MAX_STR)
			return false;
	return n <= MAX_FRAMES;
}

int cap_symdisk_build(const struct cap_symcache *c, const char *id, uint8_t **out, size_t *len)
{
	const size_t id_len = strlen(id);
	struct wr w = {0};
	size_t n = cap_symcache_n(c), n_at;
	uint32_t kept = 0;

	*out = NULL;
	*len = 0;
	if (id_len > MAX_ID || n > UINT32_MAX)
		return -EINVAL;
	put(&w, MAGIC, MAGIC_BYTES);
	put_u(&w, id_len, 4);
	put(&w, id, id_len);
	n_at = w.len;
	put_u(&w, 0, 4); /* the entries kept, below */
	for (size_t i = 0; i < n; i++) {
		const struct tfs_src_frame *f;
		uint64_t pc;
		uint32_t nf;

		cap_symcache_entry(c, i, &pc, &f, &nf);
		if (!storable(f, nf))
			continue; /* looked up again next time */
		kept++;
		put_u(&w, pc, 8);
		put_u(&w, nf, 1);
		for (uint32_t k = 0; k < nf; k++) {
			put_u(&w, f[k].line, 4);
			put_str(&w, f[k].function);
			put_str(&w, f[k].file);
		}
	}
	for (int b = 0; !w.err && b < 4; b++)
		w.p[n_at + b] = (uint8_t)(kept >> (8 * b));
	put_u(&w, w.err ? 0 : fnv(w.p, w.len), 8);
	if (w.err) {
		free(w.p);
		return -ENOMEM;
	}
	*out = w.p;
	*len = w.len;
	return 0;
}

/* @dir/<hash of @id>.sym into @buf. @return false when the name does not fit */
static bool file_name(const char *dir, const char *id, char *buf, size_t size)
{
	const int n = snprintf(buf, size, "%s/%016" PRIx64 ".sym", dir,
			       fnv((const uint8_t *)id, strlen(id)));

	return n > 0 && (size_t)n < size;
}

/* Read all @n bytes of @fd into @buf. @return 0 or -errno (-EIO: it was shorter) */
static int read_all(int fd, uint8_t *buf, size_t n)
{
	while (n > 0) {
		const ssize_t r = read(fd, buf, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		buf += r;
		n -= (size_t)r;
	}
	return 0;
}

long cap_symdisk_load(const char *dir, const char *id, struct cap_symcache *c)
{
	char path[4096];
	struct stat st;
	uint8_t *buf;
	long rc;
	int fd;

	if (!file_name(dir, id, path, sizeof(path)))
		return -ENAMETOOLONG;
	/* O_NONBLOCK: a FIFO planted there must not hold the recorder */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return errno == ELOOP ? -EPERM : -errno; /* ELOOP: a symbolic link planted there */
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out_close;
	}
	rc = -EPERM;
	/* a regular file of ours that nobody else may write: names go into traces */
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		goto out_close;
	rc = -TFS_ECORRUPT; /* larger than any this file writes */
	if (st.st_size > SYMDISK_MAX_BYTES)
		goto out_close;
	rc = -ENOMEM;
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf)
		goto out_close;
	rc = read_all(fd, buf, (size_t)st.st_size);
	if (rc == 0)
		rc = cap_symdisk_parse(buf, (size_t)st.st_size, id, c);
	if (rc >= 0)
		(void)futimens(fd, NULL); /* recently used: the last to be removed */
	free(buf);
out_close:
	close(fd);
	return rc;
}

/* Whether @name is a temporary file of cap_symdisk_save(): "<16 hex>.sym.XXXXXX". */
static bool is_tmp(const char *name)
{
	return strlen(name) == 27 && !strncmp(name + 16, ".sym.", 5);
}

/*
 * More than SYMDISK_MAX_FILES cache files in @dir: remove the least recently used ones;
 * and temporary files an interrupted save left, an hour old or more.
 */
static void trim(const char *dir)
{
	struct ent {
		char name[64];
		struct timespec t;
	} *v = NULL;
	size_t n = 0, cap = 0;
	const time_t now = time(NULL);
	struct dirent *d;
	DIR *dh = opendir(dir);

	if (!dh)
		return;
	while ((d = readdir(dh))) {
		const size_t len = strlen(d->d_name);
		struct stat st;

		if (fstatat(dirfd(dh), d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (is_tmp(d->d_name) && st.st_mtim.tv_sec + 3600 < now)
			(void)unlinkat(dirfd(dh), d->d_name, 0);
		if (len != 20 || strcmp(d->d_name + 16, ".sym") != 0)
			continue;
		if (n == cap) {
			struct ent *w = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));

			if (!w)
				break;
			v = w;
		}
		memcpy(v[n].name, d->d_name, len + 1);
		v[n++].t = st.st_mtim;
	}
	while (n > SYMDISK_MAX_FILES) {
		size_t old = 0;

		for (size_t i = 1; i < n; i++)
			if (v[i].t.tv_sec < v[old].t.tv_sec ||
			    (v[i].t.tv_sec == v[old].t.tv_sec && v[i].t.tv_nsec < v[old].t.tv_nsec))
				old = i;
		(void)unlinkat(dirfd(dh), v[old].name, 0);
		v[old] = v[--n];
	}
	closedir(dh);
	free(v);
}

/* @path and its parents as directories of mode 0700 where missing. */
static int make_dirs(const char *path)
{
	char buf[4096];
	const size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; ; p++) {
		if (*p == '/' || *p == 0) {
			const char c = *p;

			*p = 0;
			if (mkdir(buf, 0700) < 0 && errno != EEXIST)
				return -errno;
			*p = c;
			if (!c)
				return 0;
		}
	}
}

/* Write @len bytes of @buf to a new temporary file beside @path, then rename it @path. */
static int replace(const char *path, const uint8_t *buf, size_t len)
{
	char tmp[4200];
	int rc = 0, fd;

	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	fd = mkostemp(tmp, O_CLOEXEC); /* a name of its own: O_EXCL, mode 0600 */
	if (fd < 0)
		return -errno;
	while (len > 0 && rc == 0) {
		const ssize_t w = write(fd, buf, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			rc = w < 0 ? -errno : -EIO;
		else
			buf += w, len -= (size_t)w;
	}
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0)
		(void)unlink(tmp);
	return rc;
}

/*
 * An exclusive lock on directory @dir (flock), waited for a bounded time: a recording that
 * holds it for ever (stopped in a debugger) costs another its saves, not its run. Where
 * the file system has no flock (ENOLCK, EOPNOTSUPP...) the save goes on unlocked: the
 * rename still replaces the file whole.
 * @return the descriptor, locked where locks exist, or -errno (-EBUSY: still held)
 */
static int lock_dir(const char *dir)
{
	const struct timespec pause = {0, 2000000};
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	for (int i = 0; i < SYMDISK_LOCK_TRIES; i++) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return fd;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return fd; /* no locks here */
		nanosleep(&pause, NULL);
	}
	close(fd);
	return -EBUSY;
}

int cap_symdisk_save(const char *dir, const char *id, struct cap_symcache *c, bool trim_dir)
{
	char path[4096];
	uint8_t *buf;
	size_t len;
	int rc, lock;

	if (!file_name(dir, id, path, sizeof(path)))
		return -ENAMETOOLONG;
	rc = make_dirs(dir);
	if (rc < 0)
		return rc;
	/*
	 * Under the directory's lock, read the file as it is now into @c and write the union:
	 * what a recording running at the same time saved since this one read it is kept (a
	 * file damaged, of another identity or unreadable gives nothing, and is replaced).
	 */
	lock = lock_dir(dir);
	if (lock < 0)
		return lock;
	(void)cap_symdisk_load(dir, id, c);
	rc = cap_symdisk_build(c, id, &buf, &len);
	if (rc == 0)
		rc = len > SYMDISK_MAX_BYTES ? -EFBIG : replace(path, buf, len);
	close(lock); /* unlocks */
	free(buf);
	if (rc == 0 && trim_dir)
		trim(dir);
	return rc;
}
