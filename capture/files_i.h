/*
 * Symbolic files (files.c): the ids that name what is behind a descriptor in the events of
 * the I/O interposers, and the small helpers the generated wrappers (calls.txt) compute their
 * arguments with. A file id stands for one path (an openat relative to a directory
 * descriptor is keyed by that directory's id and the path, a relative path by the working
 * directories the process left before), pipe, socket or device of the process image; the table of descriptors follows what the process does to them (open,
 * close, dup and its kin, pipe, socket, accept, connect), so that every call names the file
 * really behind its descriptor. A descriptor met first without such a call (inherited,
 * opened by a library the capture cannot see) gets its id at first use from what
 * /proc/self/fd shows for it, declared once by an `fd_file` event; every descriptor met while
 * not open shares one id, "(not open)", whatever its number. Ids are names in one rank:
 * an exec'd image goes on numbering them where the image before it stopped (the spool keeps
 * the count) and names the descriptors it inherits as the image before it did, and a forked
 * child, a rank of its own, forgets its parent's ids and learns its inherited descriptors
 * again.
 *
 * Every function may be called from any thread and preserves errno; none allocates.
 */
#ifndef TFS_FILES_I_H
#define TFS_FILES_I_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <wchar.h>

#include "calls_i.h"

/* Room one string argument takes in a record: CALL_MAX_STR bytes, a cut mark, the NUL. */
#define CAP_STR_BYTES (CALL_MAX_STR + 32u)

/* Whether open's flags @flags take a mode (the `...` argument). */
static inline bool has_mode(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

/*
 * Whether opening @path opens again what a descriptor refers to (/dev/fd/N, /proc/self/fd/N,
 * /dev/stdin...): such a name says nothing of the pipe or file it reaches, and one name
 * reaches another object every time. The descriptor an open of it returns is named by an
 * fd_file (what /proc/self/fd shows), which the open's path must not rename (consumer.c).
 */
static inline bool cap_path_names_fd(const char *path)
{
	static const char *const pfx[] = {"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"};

	for (size_t i = 0; i < sizeof(pfx) / sizeof(pfx[0]); i++)
		if (!strncmp(path, pfx[i], strlen(pfx[i])))
			return true;
	return !strcmp(path, "/dev/stdin") || !strcmp(path, "/dev/stdout") ||
	       !strcmp(path, "/dev/stderr");
}

/* The file id of descriptor @fd, declared by an fd_file event at first use; CALL_NO_FILE for
 * a negative @fd, the id "(not open)" for one that is not open. */
uint32_t cap_fd_file(int fd);
/* @fd (may be -1: the call failed) was opened on @path, relative to @dirfd. @return its id */
uint32_t cap_fd_opened(int dirfd, const char *path, int fd);
/* The working directory changed: relative names open other files from now on. */
void cap_cwd_changed(void);
/* In a forked child: forget every descriptor and name (async-signal-safe). */
void cap_files_forget(void);
/* Before an exec: the file id + 1 of each descriptor below @n that stays open across it,
 * 0 for the others, into @fd_file (the spool's, which the exec'd image reads). */
void cap_files_export(uint32_t *fd_file, unsigned int n);
/* In an exec'd image: its descriptors have the ids cap_files_export() left in @fd_file. */
void cap_files_import(const uint32_t *fd_file, unsigned int n);
/* @fd is closed: its next use gets an id afresh. */
void cap_fd_closed(int fd);
void cap_fd_closed_range(unsigned int first, unsigned int last);
/* @newfd (when >= 0) now refers to what @fd refers to. */
void cap_fd_dup(int fd, int newfd);
/* @fd is a new descriptor of an object without a path (a socket, one end of a pipe): its id
 * comes from /proc at first use. */
void cap_fd_new(int fd);
/* fds[0] and fds[1] are new (pipe, socketpair). */
void cap_fd_pair_new(const int fds[2]);
/* fds[@i] when the call succeeded (@ret 0), else -1. */
static inline int cap_fd_pair(const int fds[2], int i, int ret)
{
	return ret == 0 ? fds[i] : -1;
}
/* Socket @fd now goes by @name (a connect): an id of that name, declared. */
void cap_fd_named(int fd, const char *name);
/* Socket @fd was bound: it goes by its own address (the port the kernel chose for port 0). */
void cap_fd_bound(int fd);

/* The descriptor of stream @fp (-1 for NULL), of directory stream @d. */
int cap_stream_fd(FILE *fp);
int cap_dir_fd(DIR *d);
/* The file id of stream @fp; NULL (fflush(NULL)) is the file "(all streams)". */
uint32_t cap_stream_file(FILE *fp);

/*
 * A readable name of socket address @addr of socket @fd, as `tcp:127.0.0.1:5432`,
 * `udp:[::1]:53`, `unix:/run/x.sock`, `unix:@abstract`; in a buffer of the calling thread,
 * valid until its next call.
 */
const char *cap_sockaddr(int fd, const struct sockaddr *addr, socklen_t len);
/*
 * Socket @fd connected to @addr (or connecting: EINPROGRESS) names a file of its own, both
 * ends (`tcp:127.0.0.1:40112->127.0.0.1:5432`), not the address it reached, which may be a
 * listener's name in the same process.
 */
void cap_fd_connected(int fd, const struct sockaddr *addr, socklen_t len);

/* fcntl's third argument when @cmd takes an int, else 0 (a pointer varies per call). */
int64_t cap_fcntl_arg(int cmd, const void *arg);
/* Whether fcntl command @cmd takes a struct flock (a record lock): kind fcntl_lock. */
bool cap_fcntl_locks(int cmd);
enum cap_flock_field {
	CAP_FLOCK_TYPE,
	CAP_FLOCK_WHENCE,
	CAP_FLOCK_START,
	CAP_FLOCK_LEN,
	CAP_FLOCK_PID
};
/*
 * Field @field of the struct flock @arg of fcntl(@cmd) = @ret with errno @err, read after the
 * call and only when the kernel read it too: the call succeeded, or failed over the lock
 * itself (EAGAIN, EACCES, EDEADLK, EINTR, ENOLCK); else -1 (any other failure may come from
 * a bad pointer). A GETLK's fields are its answer: the lock in the way, or the range asked
 * with type F_UNLCK. The pid is that lock's owner (-1 for an OFD lock) after a GETLK that
 * found one, else 0.
 */
int64_t cap_flock_field(int cmd, const void *arg, int ret, int err, int field);
/*
 * A timeout @ts in nanoseconds when @read (the call read it: glibc did before the call, or
 * the kernel before any error the call returned), else -2; -1 for NULL (none: wait until
 * ready), INT64_MAX for one too long for that (the kernel takes up to 2^63 - 1 seconds),
 * INT64_MIN for one the kernel refuses (negative).
 */
int64_t cap_timespec_ns(const struct timespec *ts, bool read);
/*
 * cap_timespec_ns() of a timeout or a sleep's time that only the kernel reads, before the
 * call: read as memory that may be at no address, -2 where it cannot be read.
 */
int64_t cap_timespec_ns_at(const struct timespec *ts);
/* Bytes of the first @ret messages of sendmmsg's or recvmmsg's @msgvec (0 when @ret < 1). */
uint64_t cap_mmsg_bytes(const struct mmsghdr *msgvec, int ret);
/* Whether epoll_pwait2 = @ret with errno @err read its timeout (not when refused before). */
static inline bool cap_pwait2_read(int ret, int err)
{
	return ret >= 0 || err == EINTR || err == EBADF || err == EINVAL;
}
/*
 * Time @i (0 access, 1 modification) of utimensat's or futimens' @times: its seconds, or
 * with @nsec its nanoseconds, where UTIME_NOW and UTIME_OMIT stand as in the call (@times
 * NULL: both UTIME_NOW, which is what NULL means), their seconds 0 (the kernel ignores
 * them, and programs leave them unset). After a failed call they are read as memory that
 * may be at no address (glibc refuses a NULL path before the kernel reads them): 0 s and
 * -1 ns when they cannot be read.
 */
int64_t cap_utime_part(const struct timespec *times, int i, bool nsec, int ret);
/*
 * The @ret bytes readlink put at @buf, which it does not end with a NUL, as a string (up
 * to PATH_MAX of them: a link's target is shorter), in a buffer of the calling thread
 * valid until its next call; "" when it failed.
 */
const char *cap_link_text(const char *buf, ssize_t ret);
/* The int at @optval when the socket option call = @ret succeeded with @optlen an int's
 * size, else -1. */
int64_t cap_sockopt_int(const void *optval, socklen_t optlen, int ret);
/* *@off, or -1 for NULL (sendfile's offset). */
int64_t cap_off_at(const int64_t *off);
/* @tv in microseconds, -1 for NULL (select's timeout: none). */
int64_t cap_timeval_us(const struct timeval *tv);
/*
 * The events epoll_ctl(@op, @ev) = @ret asked for (EPOLLIN...): read only after an ADD or
 * MOD that succeeded, when the kernel has just read *@ev itself; else 0 (a DEL may pass any
 * pointer, a failed call a bad one).
 */
uint64_t cap_epoll_events(int op, const struct epoll_event *ev, int ret);
/* The first buffer of an iovec array (NULL when there is none). */
static inline const void *cap_iov_base(const struct iovec *iov, int n)
{
	return n > 0 && iov ? iov[0].iov_base : NULL;
}

/* The text recorded for a printf or scanf format: @fmt itself when it is a literal
 * (cap_in_rodata), else CAP_FORMAT_BUILT: a format built at run time would make every call a
 * signature of its own, and may hold the program's data. */
#define CAP_FORMAT_BUILT "(built at run time)"
const char *cap_format(const char *fmt);
/* The same for a wide printf format: a literal as its text (a character outside ASCII as
 * '?', whatever the locale), in the calling thread's text buffer (cap_str_at). */
const char *cap_wformat(const wchar_t *fmt);
/*
 * The bytes wide character @c, or string @s (to its NUL), makes in the multibyte encoding of
 * the locale's LC_CTYPE: what a wide stream writes to, or read from, its file for them (a
 * stream converts with the locale it had when it was first used wide; a program that changes
 * LC_CTYPE after that is counted in the new one). 0 for WEOF or for what the locale cannot
 * encode (the call then failed with EILSEQ).
 */
uint64_t cap_wc_bytes(wint_t c);
int64_t cap_ws_bytes(const wchar_t *s);
/*
 * Whether ungetwc(@c, @stream) would put back the character just read (the stream's
 * previous character is @c): glibc then steps back in its buffer, else it allocates a
 * push-back area. Read before the call; false where that cannot be known (not glibc).
 */
bool cap_wc_putback(FILE *stream, wint_t c);
/* The same for ungetc(@c, @stream): its previous byte is @c. */
bool cap_c_putback(FILE *stream, int c);
/*
 * The bytes a wide printf call that returned @n (wide characters written) wrote for them, as
 * cap_ws_bytes counts them: its @fmt and arguments @ap (a copy the call did not consume)
 * formatted once more into a buffer of the capture's. @n when they cannot be (no memory, or
 * a result other than the call's); 0 for a failed call (@n < 0).
 */
uint64_t cap_wprintf_bytes(int n, const wchar_t *fmt, va_list ap);
/*
 * String @p read without trusting it to be at an address (process_vm_readv on the process
 * itself, page by page, up to PATH_MAX bytes): for a call that failed with EFAULT, whose
 * string may be at none. "(bad address)" when nothing of it can be read; where its memory
 * ends before a NUL, what was read and "...[memory ends]". In a buffer of the calling
 * thread, valid until its next call.
 */
const char *cap_str_at(const char *p);
/*
 * Whether string @s, or every string of the NULL-ended array @v (NULL: none), can be read
 * to its NUL: an exec's or a spawn's, which the capture reads before the call (read as
 * memory that may be at no address, a syscall per 512 bytes, to show the program's EFAULT
 * instead of crashing it).
 */
bool cap_str_readable(const char *s);
bool cap_strv_readable(char *const v[]);
/*
 * Append string @s and its NUL to @buf at @len: at most CALL_MAX_STR bytes of it, and when
 * longer, the first ones followed by a visible mark `...[+N bytes]`. @buf has
 * CAP_STR_BYTES free at @len. @return the new length
 */
size_t cap_put_str(char *buf, size_t len, const char *s);

#endif
