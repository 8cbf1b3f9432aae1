/*
 * Internal interfaces between the files of LD_PRELOAD interposers: interpose.c (the real
 * functions and their resolution, the malloc family, threads), interpose_io.c (POSIX and
 * stdio I/O) and interpose_mem.c (mmap, munmap). All are linked into libtfscapture.so only.
 *
 * A call is recorded when it returns, stamped with the time it began and its duration: the
 * calls it makes itself through the dynamic linker (fopen's malloc of its FILE) come before
 * it in the thread's stream.
 */
#ifndef TFS_INTERPOSE_I_H
#define TFS_INTERPOSE_I_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "tfs/capture.h"
#include "capture_i.h"

#define unlikely(x) __builtin_expect(!!(x), 0)
#define EXPORT __attribute__((visibility("default")))

/* Declared by <malloc.h> and by fortified headers only: declared here for the definitions. */
void *memalign(size_t alignment, size_t size);
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
ssize_t __read_chk(int fd, void *buf, size_t count, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t count, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t count, off64_t off, size_t buflen);
size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t nmemb, FILE *fp);
size_t __fread_unlocked_chk(void *ptr, size_t ptrlen, size_t size, size_t nmemb, FILE *fp);

/* The next definition of each interposed function (libc's), NULL until resolved. */
struct cap_real {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void (*free)(void *);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	void *(*mmap64)(void *, size_t, int, int, int, off64_t);
	int (*munmap)(void *, size_t);
	int (*open)(const char *, int, ...);
	int (*open64)(const char *, int, ...);
	int (*openat)(int, const char *, int, ...);
	int (*openat64)(int, const char *, int, ...);
	int (*open_2)(const char *, int);
	int (*open64_2)(const char *, int);
	int (*openat_2)(int, const char *, int);
	int (*openat64_2)(int, const char *, int);
	int (*creat)(const char *, mode_t);
	int (*creat64)(const char *, mode_t);
	int (*close)(int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*read_chk)(int, void *, size_t, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*pread)(int, void *, size_t, off_t);
	ssize_t (*pread64)(int, void *, size_t, off64_t);
	ssize_t (*pread_chk)(int, void *, size_t, off_t, size_t);
	ssize_t (*pread64_chk)(int, void *, size_t, off64_t, size_t);
	ssize_t (*pwrite)(int, const void *, size_t, off_t);
	ssize_t (*pwrite64)(int, const void *, size_t, off64_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	off_t (*lseek)(int, off_t, int);
	off64_t (*lseek64)(int, off64_t, int);
	int (*fsync)(int);
	int (*fdatasync)(int);
	int (*ftruncate)(int, off_t);
	int (*ftruncate64)(int, off64_t);
	int (*unlink)(const char *);
	int (*rename)(const char *, const char *);
	FILE *(*fopen)(const char *, const char *);
	FILE *(*fopen64)(const char *, const char *);
	FILE *(*fdopen)(int, const char *);
	int (*fclose)(FILE *);
	size_t (*fread)(void *, size_t, size_t, FILE *);
	size_t (*fread_chk)(void *, size_t, size_t, size_t, FILE *);
	size_t (*fwrite)(const void *, size_t, size_t, FILE *);
	size_t (*fread_unlocked)(void *, size_t, size_t, FILE *);
	size_t (*fread_unlocked_chk)(void *, size_t, size_t, size_t, FILE *);
	size_t (*fwrite_unlocked)(const void *, size_t, size_t, FILE *);
	int (*fflush_unlocked)(FILE *);
	int (*fseek)(FILE *, long, int);
	int (*fseeko)(FILE *, off_t, int);
	int (*fseeko64)(FILE *, off64_t, int);
	int (*fflush)(FILE *);
	int (*pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	int (*pthread_join)(pthread_t, void **);
};

extern struct cap_real cap_real;

/*
 * The symbolic file id of descriptor @fd (interpose_io.c), declaring it by an `fd_file`
 * event at first use when the program did not open it through an interposed call.
 */
uint32_t cap_fd_file(int fd);

/* Look up every real function (dlsym(RTLD_NEXT)); a no-op while already looking up. */
void cap_resolve(void);

/* Take and release a spinlock of the interposers; the capture counts as entered meanwhile. */
void cap_lock(atomic_flag *l);
void cap_unlock(atomic_flag *l);

/* Nanoseconds since @t0 on the trace's clock (0 when timing is none). */
static inline uint64_t since(uint64_t t0)
{
	uint64_t t = cap_now_ns();

	return t > t0 ? t - t0 : 0;
}

static inline bool tracing(unsigned int cat)
{
	return (tfs_capture_mask_ & cat) && !cap_tls_depth;
}

#define likely(x) __builtin_expect(!!(x), 1)

/*
 * True when the real function @f is known, looking the real functions up now if need be;
 * false (errno ENOSYS) when the next library has none.
 */
#define HAVE(f)                                                                                    \
	(likely(cap_real.f != NULL) || (cap_resolve(), cap_real.f != NULL) ||                      \
	 (errno = ENOSYS, false))

#endif
