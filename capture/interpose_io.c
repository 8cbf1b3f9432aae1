/*
 * The I/O interposers: POSIX descriptor calls and stdio, with their 64-bit, fortified and
 * (stdio) _unlocked variants, each recording one REC_CALL (calls_i.h) when TFS_TRACE_IO is
 * on and passing straight through otherwise (interpose.c resolves the real functions).
 *
 * Files: a descriptor becomes a symbolic file id, one per path in the process (an openat
 * relative to a directory descriptor is keyed by that directory's id and the path); the
 * opening call carries the path and the id, later calls the id only. A FILE * is the id of
 * its descriptor. Descriptors the program did not open through an interposed call (0, 1, 2,
 * pipes, sockets, dup) get an id at first use, keyed by what /proc/self/fd shows for them,
 * stored once by an `fd_file` event. Each call records its result and errno (0 after a
 * success). A call with a buffer records it as (buf_id, buf_off): the allocation holding
 * it and the offset in it (allocs_i.h; id 0 and the address itself outside any live heap
 * block or mapping), looked up before the call; readv and writev record their first
 * buffer, once the call succeeded (until then the iovec array may be unreadable), else 0, 0.
 * Symbolic ids belong to one process image: an exec'd image under `tracefs record` numbers
 * its files from 0 again.
 */
#undef _FILE_OFFSET_BITS /* define open, not open64 under the name open */
#undef _FORTIFY_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "allocs_i.h"
#include "calls_i.h"
#include "interpose_i.h"

#define FD_MAX 65536  /* descriptors with a remembered file id */
#define N_PATHS 16384 /* distinct paths given ids through the path table */

/* file id + 1 of each descriptor, 0: none yet */
static _Atomic uint32_t g_fd_file[FD_MAX];

static atomic_flag g_paths_lock = ATOMIC_FLAG_INIT;
static struct {
	uint64_t key; /* 0: empty */
	uint32_t id;
} g_paths[N_PATHS];
static uint32_t g_n_paths, g_n_files; /* under g_paths_lock */

/* ---- symbolic files ---- */

static uint64_t path_key(uint64_t dir, const char *path)
{
	uint64_t h = 0xcbf29ce484222325u ^ dir;

	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		h = (h ^ *p) * 0x100000001b3u;
	return h ? h : 1;
}

/* The file id of a path (keyed by @dir, 0 for the working directory or an absolute path). */
static uint32_t path_file(uint64_t dir, const char *path)
{
	uint64_t key = path_key(dir, path);
	uint32_t i = (uint32_t)(key % N_PATHS), id;

	cap_lock(&g_paths_lock);
	for (; g_paths[i].key; i = (i + 1) % N_PATHS) {
		if (g_paths[i].key == key) {
			id = g_paths[i].id;
			goto out;
		}
	}
	id = g_n_files++;
	if (g_n_paths < N_PATHS * 3 / 4) { /* past that, paths get ids without reuse */
		g_paths[i].key = key;
		g_paths[i].id = id;
		g_n_paths++;
	}
out:
	cap_unlock(&g_paths_lock);
	return id;
}

static void fd_set_file(int fd, uint32_t id)
{
	if (fd >= 0 && fd < FD_MAX)
		atomic_store_explicit(&g_fd_file[fd], id + 1, memory_order_relaxed);
}

/*
 * The file id of descriptor @fd, assigned at first use when it was not opened here: keyed
 * by what /proc/self/fd shows (a path, "pipe:[N]", "socket:[N]"), which an `fd_file` event
 * stores once, or by "<fd N>" when the descriptor is not open.
 */
static uint32_t fd_file(int fd)
{
	char link[48], target[CALL_MAX_STR + 1];
	const int saved_errno = errno;
	ssize_t n = -1;
	uint32_t id;

	if (fd >= 0 && fd < FD_MAX) {
		id = atomic_load_explicit(&g_fd_file[fd], memory_order_relaxed);
		if (id)
			return id - 1;
	}
	if (fd >= 0) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, target, CALL_MAX_STR);
	}
	if (n > 0)
		target[n] = '\0';
	else
		snprintf(target, sizeof(target), "<fd %d>", fd);
	id = path_file(0, target);
	if (n > 0) {
		uint64_t args[3] = {0, (uint64_t)(int64_t)fd, id};

		fd_set_file(fd, id);
		cap_put_call(CALL_FD_FILE, cap_now_ns(), args, 3, target, (size_t)n + 1);
	}
	errno = saved_errno;
	return id;
}

uint32_t cap_fd_file(int fd)
{
	return fd_file(fd);
}

static void fd_forget(int fd)
{
	if (fd >= 0 && fd < FD_MAX)
		atomic_store_explicit(&g_fd_file[fd], 0, memory_order_relaxed);
}

static uint32_t stream_file(FILE *fp)
{
	return fp ? fd_file(fileno(fp)) : path_file(0, "<all streams>");
}

/* Append @s (cut to CALL_MAX_STR bytes) and its NUL to @buf at @len. */
static size_t put_str(char *buf, size_t len, const char *s)
{
	size_t n = s ? strnlen(s, CALL_MAX_STR) : 0;

	if (n)
		memcpy(buf + len, s, n);
	buf[len + n] = '\0';
	return len + n + 1;
}

static inline uint64_t err_of(long long ret, int err)
{
	return ret < 0 ? (uint64_t)err : 0;
}

/* ---- descriptors ---- */

/* An open, openat or creat that returned @fd: file id, record, descriptor table. */
static void put_open(enum cap_call call, uint64_t t0, int dirfd, const char *path, int flags,
		     mode_t mode, int fd, int err)
{
	char buf[CALL_MAX_STR + 1];
	uint64_t dir = 0, args[7], *a = args;
	uint32_t id;

	if (call == CALL_OPENAT && dirfd != AT_FDCWD && path && path[0] != '/')
		dir = (uint64_t)fd_file(dirfd) + 1;
	id = path_file(dir, path ? path : "");
	if (fd >= 0)
		fd_set_file(fd, id);
	*a++ = since(t0);
	if (call == CALL_OPENAT)
		*a++ = (uint64_t)(int64_t)dirfd;
	if (call != CALL_CREAT)
		*a++ = (uint64_t)flags;
	*a++ = mode;
	*a++ = id;
	*a++ = (uint64_t)(int64_t)fd;
	*a++ = err_of(fd, err);
	cap_put_call(call, t0, args, (uint32_t)(a - args), buf, put_str(buf, 0, path));
}

static inline bool has_mode(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

/*
 * The value of real open-like @fn called with @__VA_ARGS__, recorded as @call when I/O is
 * traced (the caller's path, flags and mode): an expression, for `return OPEN_CALL(...)`.
 */
#define OPEN_CALL(fn, call, dirfd, ...)                                                            \
	__extension__({                                                                            \
		int fd_ = -1;                                                                      \
		if (!HAVE(fn)) {                                                                   \
		} else if (!tracing(TFS_TRACE_IO)) {                                               \
			fd_ = cap_real.fn(__VA_ARGS__);                                            \
		} else {                                                                           \
			uint64_t t0_ = cap_now_ns();                                               \
			int err_;                                                                  \
			fd_ = cap_real.fn(__VA_ARGS__);                                            \
			err_ = errno;                                                              \
			put_open(call, t0_, dirfd, path, flags, mode, fd_, err_);                  \
			errno = err_;                                                              \
		}                                                                                  \
		fd_;                                                                               \
	})

EXPORT int open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	if (has_mode(flags)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return OPEN_CALL(open, CALL_OPEN, AT_FDCWD, path, flags, mode);
}

EXPORT int open64(const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	if (has_mode(flags)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return OPEN_CALL(open64, CALL_OPEN, AT_FDCWD, path, flags, mode);
}

EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	if (has_mode(flags)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return OPEN_CALL(openat, CALL_OPENAT, dirfd, dirfd, path, flags, mode);
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	if (has_mode(flags)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return OPEN_CALL(openat64, CALL_OPENAT, dirfd, dirfd, path, flags, mode);
}

EXPORT int __open_2(const char *path, int flags)
{
	const mode_t mode = 0;

	return OPEN_CALL(open_2, CALL_OPEN, AT_FDCWD, path, flags);
}

EXPORT int __open64_2(const char *path, int flags)
{
	const mode_t mode = 0;

	return OPEN_CALL(open64_2, CALL_OPEN, AT_FDCWD, path, flags);
}

EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	const mode_t mode = 0;

	return OPEN_CALL(openat_2, CALL_OPENAT, dirfd, dirfd, path, flags);
}

EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	const mode_t mode = 0;

	return OPEN_CALL(openat64_2, CALL_OPENAT, dirfd, dirfd, path, flags);
}

EXPORT int creat(const char *path, mode_t mode)
{
	const int flags = O_CREAT | O_WRONLY | O_TRUNC;

	return OPEN_CALL(creat, CALL_CREAT, AT_FDCWD, path, mode);
}

EXPORT int creat64(const char *path, mode_t mode)
{
	const int flags = O_CREAT | O_WRONLY | O_TRUNC;

	return OPEN_CALL(creat64, CALL_CREAT, AT_FDCWD, path, mode);
}

/* A call on one file: its id, then @n more words, then the result and errno. */
static void put_file_call(enum cap_call call, uint64_t t0, uint32_t id, const uint64_t *more,
			  uint32_t n, long long ret, int err)
{
	uint64_t args[8];
	uint32_t k = 0;

	args[k++] = since(t0);
	args[k++] = id;
	for (uint32_t i = 0; i < n; i++)
		args[k++] = more[i];
	args[k++] = (uint64_t)ret;
	args[k++] = err_of(ret, err);
	cap_put_call(call, t0, args, k, NULL, 0);
}

/* Call the real @fn and record it on descriptor @fd with @n extra words @__VA_ARGS__... */
/*
 * The value of real @fn called with @__VA_ARGS__, recorded as @call on descriptor @fd with
 * @n more words @more when I/O is traced: an expression, for `return FD_CALL(...)`.
 */
#define FD_CALL(type, fn, call, fd, more, n, ...)                                                  \
	__extension__({                                                                            \
		type ret_ = -1;                                                                    \
		if (!HAVE(fn)) {                                                                   \
		} else if (!tracing(TFS_TRACE_IO)) {                                               \
			ret_ = cap_real.fn(__VA_ARGS__);                                           \
		} else {                                                                           \
			uint64_t t0_ = cap_now_ns();                                               \
			int err_;                                                                  \
			ret_ = cap_real.fn(__VA_ARGS__);                                           \
			err_ = errno;                                                              \
			put_file_call(call, t0_, fd_file(fd), more, n, (long long)ret_, err_);     \
			errno = err_;                                                              \
		}                                                                                  \
		ret_;                                                                              \
	})

/*
 * FD_CALL for a call with buffer @buf: @more has room for two words after its @n, the
 * buffer's allocation id and offset, filled in before the call.
 */
#define BUF_CALL(type, fn, call, fd, buf, more, n, ...)                                            \
	__extension__({                                                                            \
		type ret_ = -1;                                                                    \
		if (!HAVE(fn)) {                                                                   \
		} else if (!tracing(TFS_TRACE_IO)) {                                               \
			ret_ = cap_real.fn(__VA_ARGS__);                                           \
		} else {                                                                           \
			uint64_t t0_;                                                              \
			int err_;                                                                  \
			cap_alloc_lookup(buf, &(more)[n], &(more)[(n) + 1]);                       \
			t0_ = cap_now_ns();                                                        \
			ret_ = cap_real.fn(__VA_ARGS__);                                           \
			err_ = errno;                                                              \
			put_file_call(call, t0_, fd_file(fd), more, (n) + 2, (long long)ret_,      \
				      err_);                                                       \
			errno = err_;                                                              \
		}                                                                                  \
		ret_;                                                                              \
	})

EXPORT int close(int fd)
{
	uint64_t t0;
	uint32_t id;
	int ret, err;

	if (!HAVE(close))
		return -1;
	if (!tracing(TFS_TRACE_IO)) {
		ret = cap_real.close(fd);
		fd_forget(fd);
		return ret;
	}
	id = fd_file(fd);
	t0 = cap_now_ns();
	ret = cap_real.close(fd);
	err = errno;
	fd_forget(fd);
	put_file_call(CALL_CLOSE, t0, id, NULL, 0, ret, err);
	errno = err;
	return ret;
}

EXPORT ssize_t read(int fd, void *buf, size_t count)
{
	uint64_t m[3] = {count};

	return BUF_CALL(ssize_t, read, CALL_READ, fd, buf, m, 1, fd, buf, count);
}

EXPORT ssize_t __read_chk(int fd, void *buf, size_t count, size_t buflen)
{
	uint64_t m[3] = {count};

	return BUF_CALL(ssize_t, read_chk, CALL_READ, fd, buf, m, 1, fd, buf, count, buflen);
}

EXPORT ssize_t write(int fd, const void *buf, size_t count)
{
	uint64_t m[3] = {count};

	return BUF_CALL(ssize_t, write, CALL_WRITE, fd, buf, m, 1, fd, buf, count);
}

EXPORT ssize_t pread(int fd, void *buf, size_t count, off_t off)
{
	uint64_t m[4] = {count, (uint64_t)off};

	return BUF_CALL(ssize_t, pread, CALL_PREAD, fd, buf, m, 2, fd, buf, count, off);
}

EXPORT ssize_t pread64(int fd, void *buf, size_t count, off64_t off)
{
	uint64_t m[4] = {count, (uint64_t)off};

	return BUF_CALL(ssize_t, pread64, CALL_PREAD, fd, buf, m, 2, fd, buf, count, off);
}

EXPORT ssize_t __pread_chk(int fd, void *buf, size_t count, off_t off, size_t buflen)
{
	uint64_t m[4] = {count, (uint64_t)off};

	return BUF_CALL(ssize_t, pread_chk, CALL_PREAD, fd, buf, m, 2, fd, buf, count, off, buflen);
}

EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t count, off64_t off, size_t buflen)
{
	uint64_t m[4] = {count, (uint64_t)off};

	return BUF_CALL(ssize_t, pread64_chk, CALL_PREAD, fd, buf, m, 2, fd, buf, count, off,
			buflen);
}

EXPORT ssize_t pwrite(int fd, const void *buf, size_t count, off_t off)
{
	uint64_t m[4] = {count, (uint64_t)off};

	return BUF_CALL(ssize_t, pwrite, CALL_PWRITE, fd, buf, m, 2, fd, buf, count, off);
}

EXPORT ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t off)
{
	uint64_t m[4] = {count, (uint64_t)off};

	return BUF_CALL(ssize_t, pwrite64, CALL_PWRITE, fd, buf, m, 2, fd, buf, count, off);
}

/* A readv or writev that returned @ret: its first buffer only once the call succeeded. */
static void put_rwv(enum cap_call call, uint64_t t0, int fd, const struct iovec *iov, int iovcnt,
		    ssize_t ret, int err)
{
	uint64_t m[3] = {(uint64_t)iovcnt, 0, 0};

	if (ret >= 0 && iovcnt > 0)
		cap_alloc_lookup(iov[0].iov_base, &m[1], &m[2]);
	put_file_call(call, t0, fd_file(fd), m, 3, ret, err);
}

/* The value of real readv or writev @fn, recorded as @call: an expression. */
#define RWV_CALL(fn, call)                                                                         \
	__extension__({                                                                            \
		ssize_t ret_ = -1;                                                                 \
		if (!HAVE(fn)) {                                                                   \
		} else if (!tracing(TFS_TRACE_IO)) {                                               \
			ret_ = cap_real.fn(fd, iov, iovcnt);                                       \
		} else {                                                                           \
			uint64_t t0_ = cap_now_ns();                                               \
			int err_;                                                                  \
			ret_ = cap_real.fn(fd, iov, iovcnt);                                       \
			err_ = errno;                                                              \
			put_rwv(call, t0_, fd, iov, iovcnt, ret_, err_);                           \
			errno = err_;                                                              \
		}                                                                                  \
		ret_;                                                                              \
	})

EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	return RWV_CALL(readv, CALL_READV);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	return RWV_CALL(writev, CALL_WRITEV);
}

EXPORT off_t lseek(int fd, off_t off, int whence)
{
	uint64_t m[2] = {(uint64_t)off, (uint64_t)whence};

	return FD_CALL(off_t, lseek, CALL_LSEEK, fd, m, 2, fd, off, whence);
}

EXPORT off64_t lseek64(int fd, off64_t off, int whence)
{
	uint64_t m[2] = {(uint64_t)off, (uint64_t)whence};

	return FD_CALL(off64_t, lseek64, CALL_LSEEK, fd, m, 2, fd, off, whence);
}

EXPORT int fsync(int fd)
{
	return FD_CALL(int, fsync, CALL_FSYNC, fd, NULL, 0, fd);
}

EXPORT int fdatasync(int fd)
{
	return FD_CALL(int, fdatasync, CALL_FDATASYNC, fd, NULL, 0, fd);
}

EXPORT int ftruncate(int fd, off_t length)
{
	uint64_t m[1] = {(uint64_t)length};

	return FD_CALL(int, ftruncate, CALL_FTRUNCATE, fd, m, 1, fd, length);
}

EXPORT int ftruncate64(int fd, off64_t length)
{
	uint64_t m[1] = {(uint64_t)length};

	return FD_CALL(int, ftruncate64, CALL_FTRUNCATE, fd, m, 1, fd, length);
}

/* A call on paths only: their strings, then the result and errno. */
static void put_path_call(enum cap_call call, uint64_t t0, const char *p1, const char *p2, int ret,
			  int err)
{
	char buf[2 * (CALL_MAX_STR + 1)];
	uint64_t args[3] = {since(t0), (uint64_t)(int64_t)ret, err_of(ret, err)};
	size_t len = put_str(buf, 0, p1);

	if (p2)
		len = put_str(buf, len, p2);
	cap_put_call(call, t0, args, 3, buf, len);
}

EXPORT int unlink(const char *path)
{
	uint64_t t0;
	int ret, err;

	if (!HAVE(unlink))
		return -1;
	if (!tracing(TFS_TRACE_IO))
		return cap_real.unlink(path);
	t0 = cap_now_ns();
	ret = cap_real.unlink(path);
	err = errno;
	put_path_call(CALL_UNLINK, t0, path, NULL, ret, err);
	errno = err;
	return ret;
}

EXPORT int rename(const char *oldpath, const char *newpath)
{
	uint64_t t0;
	int ret, err;

	if (!HAVE(rename))
		return -1;
	if (!tracing(TFS_TRACE_IO))
		return cap_real.rename(oldpath, newpath);
	t0 = cap_now_ns();
	ret = cap_real.rename(oldpath, newpath);
	err = errno;
	put_path_call(CALL_RENAME, t0, oldpath, newpath, ret, err);
	errno = err;
	return ret;
}

/* ---- stdio ---- */

static FILE *put_fopen(uint64_t t0, const char *path, const char *mode, FILE *fp, int err)
{
	char buf[2 * (CALL_MAX_STR + 1)];
	uint32_t id = path_file(0, path ? path : "");
	int fd = fp ? fileno(fp) : -1;
	uint64_t args[4] = {since(t0), id, (uint64_t)(int64_t)fd, fp ? 0 : (uint64_t)err};

	if (fd >= 0)
		fd_set_file(fd, id);
	cap_put_call(CALL_FOPEN, t0, args, 4, buf, put_str(buf, put_str(buf, 0, path), mode));
	errno = err;
	return fp;
}

EXPORT FILE *fopen(const char *path, const char *mode)
{
	uint64_t t0;
	FILE *fp;

	if (!HAVE(fopen))
		return NULL;
	if (!tracing(TFS_TRACE_IO))
		return cap_real.fopen(path, mode);
	t0 = cap_now_ns();
	fp = cap_real.fopen(path, mode);
	return put_fopen(t0, path, mode, fp, errno);
}

EXPORT FILE *fopen64(const char *path, const char *mode)
{
	uint64_t t0;
	FILE *fp;

	if (!HAVE(fopen64))
		return NULL;
	if (!tracing(TFS_TRACE_IO))
		return cap_real.fopen64(path, mode);
	t0 = cap_now_ns();
	fp = cap_real.fopen64(path, mode);
	return put_fopen(t0, path, mode, fp, errno);
}

EXPORT FILE *fdopen(int fd, const char *mode)
{
	char buf[CALL_MAX_STR + 1];
	uint64_t t0, args[4];
	FILE *fp;
	int err;

	if (!HAVE(fdopen))
		return NULL;
	if (!tracing(TFS_TRACE_IO))
		return cap_real.fdopen(fd, mode);
	t0 = cap_now_ns();
	fp = cap_real.fdopen(fd, mode);
	err = errno;
	args[0] = since(t0);
	args[1] = fd_file(fd);
	args[2] = fp ? (uint64_t)(int64_t)fd : (uint64_t)-1;
	args[3] = fp ? 0 : (uint64_t)err;
	cap_put_call(CALL_FDOPEN, t0, args, 4, buf, put_str(buf, 0, mode));
	errno = err;
	return fp;
}

EXPORT int fclose(FILE *fp)
{
	uint64_t t0;
	uint32_t id;
	int ret, err, fd;

	if (!HAVE(fclose))
		return EOF;
	if (!tracing(TFS_TRACE_IO)) {
		fd = fileno(fp);
		ret = cap_real.fclose(fp);
		if (ret == 0)
			fd_forget(fd);
		return ret;
	}
	fd = fileno(fp);
	id = fd_file(fd);
	t0 = cap_now_ns();
	ret = cap_real.fclose(fp);
	err = errno;
	fd_forget(fd); /* the descriptor is closed even when fclose fails */
	put_file_call(CALL_FCLOSE, t0, id, NULL, 0, ret, err);
	errno = err;
	return ret;
}

/* An fread or fwrite: @buf the buffer's allocation id and offset, looked up before the call. */
static void put_frw(enum cap_call call, uint64_t t0, FILE *fp, size_t size, size_t nmemb,
		    const uint64_t *buf, size_t ret, int err)
{
	uint64_t args[8] = {since(t0), stream_file(fp), size, nmemb, buf[0], buf[1], ret, 0};

	if (ret < nmemb && ferror(fp))
		args[7] = (uint64_t)err;
	cap_put_call(call, t0, args, 8, NULL, 0);
}

EXPORT size_t fread(void *ptr, size_t size, size_t nmemb, FILE *fp)
{
	uint64_t t0, buf[2];
	size_t ret;
	int err;

	if (!HAVE(fread))
		return 0;
	if (!tracing(TFS_TRACE_IO))
		return cap_real.fread(ptr, size, nmemb, fp);
	cap_alloc_lookup(ptr, &buf[0], &buf[1]);
	t0 = cap_now_ns();
	ret = cap_real.fread(ptr, size, nmemb, fp);
	err = errno;
	put_frw(CALL_FREAD, t0, fp, size, nmemb, buf, ret, err);
	errno = err;
	return ret;
}

EXPORT size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t nmemb, FILE *fp)
{
	uint64_t t0, buf[2];
	size_t ret;
	int err;

	if (!HAVE(fread_chk))
		return 0;
	if (!tracing(TFS_TRACE_IO))
		return cap_real.fread_chk(ptr, ptrlen, size, nmemb, fp);
	cap_alloc_lookup(ptr, &buf[0], &buf[1]);
	t0 = cap_now_ns();
	ret = cap_real.fread_chk(ptr, ptrlen, size, nmemb, fp);
	err = errno;
	put_frw(CALL_FREAD, t0, fp, size, nmemb, buf, ret, err);
	errno = err;
	return ret;
}

EXPORT size_t fwrite(const void *ptr, size_t size, size_t nmemb, FILE *fp)
{
	uint64_t t0, buf[2];
	size_t ret;
	int err;

	if (!HAVE(fwrite))
		return 0;
	if (!tracing(TFS_TRACE_IO))
		return cap_real.fwrite(ptr, size, nmemb, fp);
	cap_alloc_lookup(ptr, &buf[0], &buf[1]);
	t0 = cap_now_ns();
	ret = cap_real.fwrite(ptr, size, nmemb, fp);
	err = errno;
	put_frw(CALL_FWRITE, t0, fp, size, nmemb, buf, ret, err);
	errno = err;
	return ret;
}

/*
 * The _unlocked stdio names, which coreutils and other gnulib programs call for all their
 * stdio: the same calls without the stream lock, recorded as fread, fwrite and fflush.
 * <stdio.h> makes the first two macros when optimising.
 */
#undef fread_unlocked
#undef fwrite_unlocked
EXPORT size_t fread_unlocked(void *ptr, size_t size, size_t nmemb, FILE *fp)
{
	uint64_t t0, buf[2];
	size_t ret;
	int err;

	if (!HAVE(fread_unlocked))
		return 0;
	if (!tracing(TFS_TRACE_IO))
		return cap_real.fread_unlocked(ptr, size, nmemb, fp);
	cap_alloc_lookup(ptr, &buf[0], &buf[1]);
	t0 = cap_now_ns();
	ret = cap_real.fread_unlocked(ptr, size, nmemb, fp);
	err = errno;
	put_frw(CALL_FREAD, t0, fp, size, nmemb, buf, ret, err);
	errno = err;
	return ret;
}

EXPORT size_t __fread_unlocked_chk(void *ptr, size_t ptrlen, size_t size, size_t nmemb,
				   FILE *fp)
{
	uint64_t t0, buf[2];
	size_t ret;
	int err;

	if (!HAVE(fread_unlocked_chk))
		return 0;
	if (!tracing(TFS_TRACE_IO))
		return cap_real.fread_unlocked_chk(ptr, ptrlen, size, nmemb, fp);
	cap_alloc_lookup(ptr, &buf[0], &buf[1]);
	t0 = cap_now_ns();
	ret = cap_real.fread_unlocked_chk(ptr, ptrlen, size, nmemb, fp);
	err = errno;
	put_frw(CALL_FREAD, t0, fp, size, nmemb, buf, ret, err);
	errno = err;
	return ret;
}

EXPORT size_t fwrite_unlocked(const void *ptr, size_t size, size_t nmemb, FILE *fp)
{
	uint64_t t0, buf[2];
	size_t ret;
	int err;

	if (!HAVE(fwrite_unlocked))
		return 0;
	if (!tracing(TFS_TRACE_IO))
		return cap_real.fwrite_unlocked(ptr, size, nmemb, fp);
	cap_alloc_lookup(ptr, &buf[0], &buf[1]);
	t0 = cap_now_ns();
	ret = cap_real.fwrite_unlocked(ptr, size, nmemb, fp);
	err = errno;
	put_frw(CALL_FWRITE, t0, fp, size, nmemb, buf, ret, err);
	errno = err;
	return ret;
}

/* The value of real fseek-like @fn on (fp, off, whence), recorded: an expression. */
#define FSEEK_CALL(fn)                                                                             \
	__extension__({                                                                            \
		int ret_ = -1;                                                                     \
		if (!HAVE(fn)) {                                                                   \
		} else if (!tracing(TFS_TRACE_IO)) {                                               \
			ret_ = cap_real.fn(fp, off, whence);                                       \
		} else {                                                                           \
			uint64_t t0_ = cap_now_ns();                                               \
			uint64_t m_[2] = {(uint64_t)(int64_t)off, (uint64_t)whence};               \
			int err_;                                                                  \
			ret_ = cap_real.fn(fp, off, whence);                                       \
			err_ = errno;                                                              \
			put_file_call(CALL_FSEEK, t0_, stream_file(fp), m_, 2, ret_, err_);        \
			errno = err_;                                                              \
		}                                                                                  \
		ret_;                                                                              \
	})

EXPORT int fseek(FILE *fp, long off, int whence)
{
	return FSEEK_CALL(fseek);
}

EXPORT int fseeko(FILE *fp, off_t off, int whence)
{
	return FSEEK_CALL(fseeko);
}

EXPORT int fseeko64(FILE *fp, off64_t off, int whence)
{
	return FSEEK_CALL(fseeko64);
}

EXPORT int fflush(FILE *fp)
{
	uint64_t t0;
	int ret, err;

	if (!HAVE(fflush))
		return EOF;
	if (!tracing(TFS_TRACE_IO))
		return cap_real.fflush(fp);
	t0 = cap_now_ns();
	ret = cap_real.fflush(fp);
	err = errno;
	put_file_call(CALL_FFLUSH, t0, stream_file(fp), NULL, 0, ret, err);
	errno = err;
	return ret;
}

EXPORT int fflush_unlocked(FILE *fp)
{
	uint64_t t0;
	int ret, err;

	if (!HAVE(fflush_unlocked))
		return EOF;
	if (!tracing(TFS_TRACE_IO))
		return cap_real.fflush_unlocked(fp);
	t0 = cap_now_ns();
	ret = cap_real.fflush_unlocked(fp);
	err = errno;
	put_file_call(CALL_FFLUSH, t0, stream_file(fp), NULL, 0, ret, err);
	errno = err;
	return ret;
}
