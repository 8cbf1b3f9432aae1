/*
 * A program that calls every function capture/calls.txt interposes for I/O (io kinds), each
 * by its own name, in a fixed order with known arguments, for check_calls.py, which holds
 * the expectation (written from this file's comments, not from a trace). Every call goes
 * through a volatile function pointer, so the compiler neither inlines it (the _unlocked
 * stdio names are inline when optimising) nor turns it into another (printf into puts).
 *
 *   cap_calls DIR     runs the sections below on files in DIR; reads its stdin (check_calls
 *                     gives it "7 8 9 10\n") and writes to its stdout; last, it writes
 *                     `errno NNN` on stderr, a hash of the errno every call left, by a raw
 *                     system call (no interposer sees it)
 *   cap_calls DIR wide
 *                     the same with the wide-character section alone (wide()): a stream is
 *                     narrow or wide from its first use, and the others use stdout narrow
 *
 * Nothing else does I/O meanwhile; each section leaves no descriptor open above 2.
 */
#undef _FILE_OFFSET_BITS /* call open, not open64 under the name open */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

/* declared by no header of glibc 2.36 (old binaries call them) */
int __xstat(int ver, const char *path, struct stat *buf);
int __xstat64(int ver, const char *path, struct stat64 *buf);
int __lxstat(int ver, const char *path, struct stat *buf);
int __lxstat64(int ver, const char *path, struct stat64 *buf);
int __fxstat(int ver, int fd, struct stat *buf);
int __fxstat64(int ver, int fd, struct stat64 *buf);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *buf, int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *buf, int flags);
int _IO_putc(int c, FILE *fp);
int _IO_getc(FILE *fp);
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
		       struct sockaddr *addr, socklen_t *len);
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
ssize_t __readlink_chk(const char *path, char *buf, size_t n, size_t buflen);
char *__getcwd_chk(char *buf, size_t size, size_t buflen);
ssize_t __readlinkat_chk(int dirfd, const char *path, char *buf, size_t n, size_t buflen);
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *timeout,
		const sigset_t *sigmask, size_t fdslen);
int __printf_chk(int flag, const char *fmt, ...);
int __vprintf_chk(int flag, const char *fmt, va_list ap);
int __fprintf_chk(FILE *fp, int flag, const char *fmt, ...);
int __vfprintf_chk(FILE *fp, int flag, const char *fmt, va_list ap);
int __dprintf_chk(int fd, int flag, const char *fmt, ...);
int __vdprintf_chk(int fd, int flag, const char *fmt, va_list ap);
char *__fgets_chk(char *buf, size_t buflen, int n, FILE *fp);
char *__fgets_unlocked_chk(char *buf, size_t buflen, int n, FILE *fp);
size_t __fread_chk(void *buf, size_t buflen, size_t size, size_t n, FILE *fp);
size_t __fread_unlocked_chk(void *buf, size_t buflen, size_t size, size_t n, FILE *fp);
int __isoc99_fscanf(FILE *fp, const char *fmt, ...);
int __isoc99_vfscanf(FILE *fp, const char *fmt, va_list ap);
int __isoc99_scanf(const char *fmt, ...);
int __isoc99_vscanf(const char *fmt, va_list ap);
ssize_t __getdelim(char **line, size_t *n, int delim, FILE *fp);
int __wprintf_chk(int flag, const wchar_t *fmt, ...);
int __vwprintf_chk(int flag, const wchar_t *fmt, va_list ap);
int __fwprintf_chk(FILE *fp, int flag, const wchar_t *fmt, ...);
int __vfwprintf_chk(FILE *fp, int flag, const wchar_t *fmt, va_list ap);
wchar_t *__fgetws_chk(wchar_t *buf, size_t buflen, int n, FILE *fp);
wchar_t *__fgetws_unlocked_chk(wchar_t *buf, size_t buflen, int n, FILE *fp);

/* errno after every call, hashed: the same traced and untraced (main prints it) */
static unsigned long g_errno_hash = 5381;

static void note_errno(void)
{
	g_errno_hash = g_errno_hash * 33 + (unsigned long)errno;
}

/*
 * Call @f (a function of libc) through a volatile pointer of its own type, with errno 77
 * before, and note the errno it leaves.
 */
#define CALL(f, ...)                                                                               \
	__extension__({                                                                            \
		__typeof__(f(__VA_ARGS__)) r_;                                                     \
		errno = 77;                                                                        \
		r_ = (*(__typeof__(&f) volatile *)&(__typeof__(&f)){f})(__VA_ARGS__);             \
		note_errno();                                                                      \
		r_;                                                                                \
	})

/* CALL for a function of one int and no result (closefrom) */
static void vcall_int(void (*f)(int), int a)
{
	void (*volatile g)(int) = f;

	errno = 77;
	g(a);
	note_errno();
}

static char buf[8192];
static char path[4096], path2[4096];
static const char *dir;

static const char *in_dir(const char *name)
{
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

static const char *in_dir2(const char *name)
{
	snprintf(path2, sizeof(path2), "%s/%s", dir, name);
	return path2;
}

/*
 * Descriptors, on DIR/a (file#A) and DIR/b (file#B):
 *   open a O_RDWR|O_CREAT|O_TRUNC 0600 = 3; write 3 100 bytes; dup 3 = 4; dup2 3 10 = 10;
 *   dup3 3 11 O_CLOEXEC = 11; fcntl 3 F_DUPFD 20 = 20; fcntl 3 F_SETFL O_APPEND = 0;
 *   pread 10 (10 bytes at 0) = 10; lseek 20 0 SEEK_SET = 0; read 20 50 = 50; close 4, 10,
 *   11, 20; open b O_RDWR|O_CREAT|O_TRUNC 0644 = 4; dup2 4 3 = 3 (3 is b now);
 *   pwrite 3 5 bytes at 0 = 5; pread 3 5 at 0 = 5 (both on b); close 3, 4;
 *   open a O_RDONLY = 3; read 3 10 = 10 (a again); close_range 3 3 0 = 0;
 *   read 3 1 = -1 EBADF (no file behind 3: an id of its own, "<fd 3>");
 *   open a O_RDONLY = 3; close_range 3 3 CLOSE_RANGE_CLOEXEC = 0 (3 stays open, on a);
 *   read 3 1 = 1 (a); close 3 = 0; open a O_RDONLY = 3; closefrom 3; read 3 1 = -1 EBADF
 */
static void descriptors(void)
{
	int fd = CALL(open, in_dir("a"), O_RDWR | O_CREAT | O_TRUNC, 0600), fd2;

	CALL(write, fd, buf, 100);
	CALL(dup, fd);
	CALL(dup2, fd, 10);
	CALL(dup3, fd, 11, O_CLOEXEC);
	CALL(fcntl, fd, F_DUPFD, 20);
	CALL(fcntl, fd, F_SETFL, O_APPEND);
	CALL(pread, 10, buf, 10, 0);
	CALL(lseek, 20, 0, SEEK_SET);
	CALL(read, 20, buf, 50);
	CALL(close, 4);
	CALL(close, 10);
	CALL(close, 11);
	CALL(close, 20);
	fd2 = CALL(open, in_dir("b"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	CALL(dup2, fd2, fd);
	CALL(pwrite, fd, buf, 5, 0);
	CALL(pread, fd, buf, 5, 0);
	CALL(close, fd);
	CALL(close, fd2);
	fd = CALL(open, in_dir("a"), O_RDONLY);
	CALL(read, fd, buf, 10);
	CALL(close_range, 3, 3, 0);
	CALL(read, fd, buf, 1);
	fd = CALL(open, in_dir("a"), O_RDONLY);
	CALL(close_range, 3, 3, CLOSE_RANGE_CLOEXEC);
	CALL(read, fd, buf, 1);
	CALL(close, fd);
	fd = CALL(open, in_dir("a"), O_RDONLY);
	vcall_int(closefrom, fd);
	CALL(read, fd, buf, 1);
}

/*
 * The other names of the descriptor calls, on DIR/c (file#C), each once:
 *   open64 c O_RDWR|O_CREAT 0600 = 3; __open_2 c O_RDONLY = 4; __open64_2 c O_RDONLY = 5;
 *   openat AT_FDCWD c O_RDONLY = 6; openat64 AT_FDCWD c O_RDONLY = 7;
 *   __openat_2 AT_FDCWD c O_RDONLY = 8; __openat64_2 AT_FDCWD c O_RDONLY = 9;
 *   creat c 0600 = 10; creat64 c 0600 = 11 (c is empty again);
 *   write 3 16 bytes = 16; __read_chk 4 8 = 8; pread64 5 4 at 2 = 4; __pread_chk 6 4 at 4
 *   = 4; __pread64_chk 7 4 at 8 = 4; pwrite64 3 2 at 20 = 2; readv 8 [10, 20] = 22;
 *   writev 3 [3, 4] = 7 (at 16); lseek64 3 0 SEEK_END = 23; fsync 3 = 0; fdatasync 3 = 0;
 *   ftruncate 3 10 = 0; ftruncate64 3 12 = 0; fcntl64 3 F_GETFL = 0x8002 (O_RDWR|O_LARGEFILE);
 *   close 3..11
 */
static void descriptor_names(void)
{
	struct iovec iov[2] = {{buf, 10}, {buf + 10, 20}};

	CALL(open64, in_dir("c"), O_RDWR | O_CREAT, 0600);
	CALL(__open_2, in_dir("c"), O_RDONLY);
	CALL(__open64_2, in_dir("c"), O_RDONLY);
	CALL(openat, AT_FDCWD, in_dir("c"), O_RDONLY);
	CALL(openat64, AT_FDCWD, in_dir("c"), O_RDONLY);
	CALL(__openat_2, AT_FDCWD, in_dir("c"), O_RDONLY);
	CALL(__openat64_2, AT_FDCWD, in_dir("c"), O_RDONLY);
	CALL(creat, in_dir("c"), 0600);
	CALL(creat64, in_dir("c"), 0600);
	CALL(write, 3, buf, 16);
	CALL(__read_chk, 4, buf, 8, sizeof(buf));
	CALL(pread64, 5, buf, 4, 2);
	CALL(__pread_chk, 6, buf, 4, 4, sizeof(buf));
	CALL(__pread64_chk, 7, buf, 4, 8, sizeof(buf));
	CALL(pwrite64, 3, buf, 2, 20);
	CALL(readv, 8, iov, 2);
	iov[0].iov_len = 3;
	iov[1].iov_len = 4;
	CALL(writev, 3, iov, 2);
	CALL(lseek64, 3, 0, SEEK_END);
	CALL(fsync, 3);
	CALL(fdatasync, 3);
	CALL(ftruncate, 3, 10);
	CALL(ftruncate64, 3, 12);
	CALL(fcntl64, 3, F_GETFL);
	for (int fd = 3; fd <= 11; fd++)
		CALL(close, fd);
}

/*
 * Pipes: pipe = 0 (3, 4: one pipe, file#P); write 4 5 = 5; read 3 5 = 5; pipe2 O_CLOEXEC = 0
 * (5, 6: file#Q); close 3, 4, 5, 6.
 * Sockets: socketpair AF_UNIX SOCK_STREAM = 0 (3, 4: socket:[..] each, file#S1, file#S2);
 *   send 3 "ping" 0 = 4; recv 4 4 0 = 4; sendto 3 3 bytes 0 = 3; recvfrom 4 3 0 = 3;
 *   __recv_chk 4 .. (after another send of 2 bytes) = 2; sendmsg 3 (1 iov, 6 bytes) = 6;
 *   recvmsg 4 = 6; sendto 3 5 bytes; __recvfrom_chk 4 5 = 5; shutdown 3 SHUT_WR = 0;
 *   close 3, 4.
 * TCP on 127.0.0.1: socket AF_INET SOCK_STREAM 0 = 3 (socket:[..]); bind 3 127.0.0.1:0 = 0
 *   (3 is now tcp:127.0.0.1:P); listen 3 4 = 0; socket = 4; connect 4 tcp:127.0.0.1:P = 0
 *   (4 is now tcp:127.0.0.1:Q->127.0.0.1:P, Q its port: not the listener);
 *   accept 3 = 5 (tcp:127.0.0.1:P->127.0.0.1:Q); socket = 6; connect 6 = 0
 *   (tcp:127.0.0.1:R->127.0.0.1:P); accept4 3 SOCK_CLOEXEC = 7 (tcp:127.0.0.1:P->127.0.0.1:R);
 *   write 4 3 = 3; read 5 3 = 3; poll [5 POLLIN] 1 0 = 0 (nothing left to read);
 *   __poll_chk the same = 0; select 8 {5} timeout 1000 us = 0; close 3..7
 */
static void pipes_and_sockets(void)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);
	struct iovec iov = {buf, 6};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	struct pollfd pfd = {.fd = 5, .events = POLLIN};
	struct timeval tv = {0, 1000};
	int p[2], sv[2];
	fd_set rfds;

	CALL(pipe, p);
	CALL(write, p[1], "hello", 5);
	CALL(read, p[0], buf, 5);
	CALL(pipe2, p, O_CLOEXEC);
	for (int fd = 3; fd <= 6; fd++)
		CALL(close, fd);
	CALL(socketpair, AF_UNIX, SOCK_STREAM, 0, sv);
	CALL(send, sv[0], "ping", 4, 0);
	CALL(recv, sv[1], buf, 4, 0);
	CALL(sendto, sv[0], "abc", 3, 0, NULL, 0);
	CALL(recvfrom, sv[1], buf, 3, 0, NULL, NULL);
	CALL(send, sv[0], "xy", 2, 0);
	CALL(__recv_chk, sv[1], buf, 2, sizeof(buf), 0);
	CALL(sendmsg, sv[0], &msg, 0);
	CALL(recvmsg, sv[1], &msg, 0);
	CALL(sendto, sv[0], "12345", 5, 0, NULL, 0);
	CALL(__recvfrom_chk, sv[1], buf, 5, sizeof(buf), 0, NULL, NULL);
	CALL(shutdown, sv[0], SHUT_WR);
	CALL(close, sv[0]);
	CALL(close, sv[1]);
	CALL(socket, AF_INET, SOCK_STREAM, 0);
	CALL(bind, 3, (struct sockaddr *)&sin, sizeof(sin));
	getsockname(3, (struct sockaddr *)&sin, &len); /* not interposed */
	CALL(listen, 3, 4);
	CALL(socket, AF_INET, SOCK_STREAM, 0);
	CALL(connect, 4, (struct sockaddr *)&sin, sizeof(sin));
	CALL(accept, 3, NULL, NULL);
	CALL(socket, AF_INET, SOCK_STREAM, 0);
	CALL(connect, 6, (struct sockaddr *)&sin, sizeof(sin));
	CALL(accept4, 3, NULL, NULL, SOCK_CLOEXEC);
	CALL(write, 4, "abc", 3);
	CALL(read, 5, buf, 3);
	CALL(poll, &pfd, 1, 0);
	CALL(__poll_chk, &pfd, 1, 0, sizeof(pfd));
	FD_ZERO(&rfds);
	FD_SET(5, &rfds);
	CALL(select, 8, &rfds, NULL, NULL, &tv);
	for (int fd = 3; fd <= 7; fd++)
		CALL(close, fd);
}

/*
 * Paths and metadata, in DIR: mkdir d 0755 = 0; mkdirat AT_FDCWD e 0700 = 0; rmdir e = 0;
 *   stat d = 0; stat64 d = 0; __xstat 1 d = 0; __xstat64 1 d = 0; lstat d, lstat64 d,
 *   __lxstat 1 d, __lxstat64 1 d = 0; open d O_RDONLY|O_DIRECTORY = 3 (file#D);
 *   fstat 3, fstat64 3, __fxstat 1 3, __fxstat64 1 3 = 0; fstatat 3 "." 0 = 0,
 *   fstatat64 3 "." 0, __fxstatat 1 3 "." 0, __fxstatat64 1 3 "." 0 = 0;
 *   statx AT_FDCWD d 0 STATX_SIZE = 0; access d F_OK = 0; access missing F_OK = -1 ENOENT;
 *   faccessat AT_FDCWD d R_OK 0 = 0; fchdir 3 = 0; chdir DIR = 0; close 3;
 *   truncate a 4 = 0; truncate64 a 6 = 0; rename a a2 = 0; unlink a2 = 0; unlink a2 = -1
 *   ENOENT.
 * Directories: open DIR/d/f1 and f2 (creat 0600 = 3, close), opendir d = 3 (fd of the
 *   stream); readdir until NULL: 4 entries (., .., f1, f2) then the end; closedir = 0;
 *   open d O_RDONLY = 3; fdopendir 3 = 3; readdir64 until NULL: 4 then the end;
 *   closedir = 0.
 * Links and modes, in DIR/d: link f1 f3 = 0; linkat AT_FDCWD f1 AT_FDCWD f4 0 = 0;
 *   symlink "f1" s1 = 0; symlinkat "f2" AT_FDCWD s2 = 0; renameat AT_FDCWD f3 AT_FDCWD f5
 *   = 0; renameat2 AT_FDCWD f4 AT_FDCWD f5 RENAME_NOREPLACE = -1 EEXIST; chmod f1 0640 = 0;
 *   fchmodat AT_FDCWD f2 0600 0 = 0; open f1 O_RDONLY = 3 (file#F1 again); fchmod 3 0600 = 0;
 *   close 3; unlinkat AT_FDCWD s1 0 = 0; unlinkat AT_FDCWD DIR/e AT_REMOVEDIR = -1 ENOENT.
 */
static void paths(void)
{
	struct stat st;
	struct stat64 st64;
	struct statx stx;
	DIR *d;
	int fd;

	CALL(mkdir, in_dir("d"), 0755);
	CALL(mkdirat, AT_FDCWD, in_dir("e"), 0700);
	CALL(rmdir, in_dir("e"));
	CALL(stat, in_dir("d"), &st);
	CALL(stat64, in_dir("d"), &st64);
	CALL(__xstat, 1, in_dir("d"), &st);
	CALL(__xstat64, 1, in_dir("d"), &st64);
	CALL(lstat, in_dir("d"), &st);
	CALL(lstat64, in_dir("d"), &st64);
	CALL(__lxstat, 1, in_dir("d"), &st);
	CALL(__lxstat64, 1, in_dir("d"), &st64);
	fd = CALL(open, in_dir("d"), O_RDONLY | O_DIRECTORY);
	CALL(fstat, fd, &st);
	CALL(fstat64, fd, &st64);
	CALL(__fxstat, 1, fd, &st);
	CALL(__fxstat64, 1, fd, &st64);
	CALL(fstatat, fd, ".", &st, 0);
	CALL(fstatat64, fd, ".", &st64, 0);
	CALL(__fxstatat, 1, fd, ".", &st, 0);
	CALL(__fxstatat64, 1, fd, ".", &st64, 0);
	CALL(statx, AT_FDCWD, in_dir("d"), 0, STATX_SIZE, &stx);
	CALL(access, in_dir("d"), F_OK);
	CALL(access, in_dir("missing"), F_OK);
	CALL(faccessat, AT_FDCWD, in_dir("d"), R_OK, 0);
	CALL(fchdir, fd);
	CALL(chdir, dir);
	CALL(close, fd);
	CALL(truncate, in_dir("a"), 4);
	CALL(truncate64, in_dir("a"), 6);
	CALL(rename, in_dir("a"), in_dir2("a2"));
	CALL(unlink, in_dir("a2"));
	CALL(unlink, in_dir("a2"));
	fd = CALL(creat, in_dir("d/f1"), 0600);
	CALL(close, fd);
	fd = CALL(creat, in_dir("d/f2"), 0600);
	CALL(close, fd);
	d = CALL(opendir, in_dir("d"));
	while (CALL(readdir, d))
		;
	CALL(closedir, d);
	fd = CALL(open, in_dir("d"), O_RDONLY);
	d = CALL(fdopendir, fd);
	while (CALL(readdir64, d))
		;
	CALL(closedir, d);
	CALL(link, in_dir("d/f1"), in_dir2("d/f3"));
	CALL(linkat, AT_FDCWD, in_dir("d/f1"), AT_FDCWD, in_dir2("d/f4"), 0);
	CALL(symlink, "f1", in_dir("d/s1"));
	CALL(symlinkat, "f2", AT_FDCWD, in_dir("d/s2"));
	CALL(renameat, AT_FDCWD, in_dir("d/f3"), AT_FDCWD, in_dir2("d/f5"));
	CALL(renameat2, AT_FDCWD, in_dir("d/f4"), AT_FDCWD, in_dir2("d/f5"), RENAME_NOREPLACE);
	CALL(chmod, in_dir("d/f1"), 0640);
	CALL(fchmodat, AT_FDCWD, in_dir("d/f2"), 0600, 0);
	fd = CALL(open, in_dir("d/f1"), O_RDONLY);
	CALL(fchmod, fd, 0600);
	CALL(close, fd);
	CALL(unlinkat, AT_FDCWD, in_dir("d/s1"), 0);
	CALL(unlinkat, AT_FDCWD, in_dir("e"), AT_REMOVEDIR);
}

static int vprint(int (*f)(const char *, va_list), const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = f(fmt, ap);
	va_end(ap);
	return n;
}

static int vprint_chk(int (*f)(int, const char *, va_list), const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = f(1, fmt, ap);
	va_end(ap);
	return n;
}

static int vfprint(int (*f)(FILE *, const char *, va_list), FILE *fp, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = f(fp, fmt, ap);
	va_end(ap);
	return n;
}

static int vfprint_chk(int (*f)(FILE *, int, const char *, va_list), FILE *fp,
		       const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = f(fp, 1, fmt, ap);
	va_end(ap);
	return n;
}

static int vdprint(int (*f)(int, const char *, va_list), int fd, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = f(fd, fmt, ap);
	va_end(ap);
	return n;
}

static int vdprint_chk(int (*f)(int, int, const char *, va_list), int fd, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = f(fd, 1, fmt, ap);
	va_end(ap);
	return n;
}

static int vscan(int (*f)(FILE *, const char *, va_list), FILE *fp, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = f(fp, fmt, ap);
	va_end(ap);
	return n;
}

static int vscan_in(int (*f)(const char *, va_list), const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = f(fmt, ap);
	va_end(ap);
	return n;
}

/*
 * stdio output, on DIR/s (fopen "w" = 3, file#S) and stdout (fd 1, file#O):
 *   fprintf "%d\n" 12345 = 6; vfprintf "%s" "vf" = 2; __fprintf_chk "%05d" 42 = 5;
 *   __vfprintf_chk "%c" 'z' = 1; fputs "abc" (bytes 3); fputs_unlocked "de" (bytes 2);
 *   fputc 'x' = 'x'; fputc_unlocked 'y'; putc 'p'; _IO_putc 'q'; putc_unlocked 'r' (each
 *   bytes 1, = the char); fwrite 1 x 10 = 10 (bytes 10); fwrite_unlocked 2 x 3 = 3
 *   (bytes 6); fflush = 0; fflush_unlocked = 0; fseek 0 SEEK_END = 0; fseeko 0 SEEK_SET
 *   = 0; fseeko64 0 SEEK_END = 0; fclose = 0 (DIR/s now holds 42 bytes:
 *   "12345\nvf00042zabcdexypqr" + 10 + 6).
 *   printf "%s\n" "out" = 4; vprintf "%d" 7 = 1; __printf_chk "%x" 255 = 2;
 *   __vprintf_chk "!" = 1; puts "abc" (bytes 4); putchar 'A' = 65; putchar_unlocked 'B'
 *   = 66; fflush NULL = 0 (every stream: fd -1); dprintf 1 "%d" 99 = 2; vdprintf 1 "ab" =
 *   2; __dprintf_chk 1 "c" = 1; __vdprintf_chk 1 "de" = 2; dprintf 1 with "%d", a format
 *   built at run time, 5 = 1.
 */
static void stdio_out(void)
{
	FILE *f = CALL(fopen, in_dir("s"), "w");

	CALL(fprintf, f, "%d\n", 12345);
	vfprint(vfprintf, f, "%s", "vf");
	CALL(__fprintf_chk, f, 1, "%05d", 42);
	vfprint_chk(__vfprintf_chk, f, "%c", 'z');
	CALL(fputs, "abc", f);
	CALL(fputs_unlocked, "de", f);
	CALL(fputc, 'x', f);
	CALL(fputc_unlocked, 'y', f);
	CALL(putc, 'p', f);
	CALL(_IO_putc, 'q', f);
	CALL(putc_unlocked, 'r', f);
	CALL(fwrite, buf, 1, 10, f);
	CALL(fwrite_unlocked, buf, 2, 3, f);
	CALL(fflush, f);
	CALL(fflush_unlocked, f);
	CALL(fseek, f, 0, SEEK_END);
	CALL(fseeko, f, 0, SEEK_SET);
	CALL(fseeko64, f, 0, SEEK_END);
	CALL(fclose, f);
	CALL(printf, "%s\n", "out");
	vprint(vprintf, "%d", 7);
	CALL(__printf_chk, 1, "%x", 255);
	vprint_chk(__vprintf_chk, "!");
	CALL(puts, "abc");
	CALL(putchar, 'A');
	CALL(putchar_unlocked, 'B');
	CALL(fflush, NULL);
	CALL(dprintf, 1, "%d", 99);
	vdprint(vdprintf, 1, "ab");
	CALL(__dprintf_chk, 1, 1, "c");
	vdprint_chk(__vdprintf_chk, 1, "de");
	{
		char fmt[8];

		snprintf(fmt, sizeof(fmt), "%c%c", '%', 'd');
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		CALL(dprintf, 1, fmt, 5);
#pragma GCC diagnostic pop
	}
}

/*
 * stdio input, on DIR/i, written first with write(): "10 20\nline two\nthird\nx\nrrrr\n"
 * (28 bytes; open O_WRONLY|O_CREAT|O_TRUNC 0600 = 3, write = 28, close: file#I), then
 * fopen "r" = 3: fscanf "%d" = 1 (10); vfscanf "%d" = 1 (20); fgetc = 10 ('\n');
 * fgets 100 (bytes 9, "line two\n"); fgets_unlocked 3 (bytes 2, "th"); __fgets_chk 100
 * (bytes 4, "ird\n"); __fgets_unlocked_chk 100 (bytes 2, "x\n"); fgetc_unlocked, getc,
 * _IO_getc, getc_unlocked = 114 each ('r'); ungetc 'r' = 114; getline (bytes 2: "r\n");
 * getline = -1 (end of file, errno 0); fclose = 0.
 * fopen64 "r" = 3: getdelim ' ' (bytes 3: "10 "); __getdelim '\n' (bytes 3: "20\n");
 * __isoc99_fscanf "%s" = 1 ("line"); __isoc99_vfscanf "%s" = 1 ("two"); fread 1 x 4 = 4
 * ("\nthi"); fread_unlocked 2 x 3 = 3 (6 bytes); __fread_chk 1 x 2 = 2;
 * __fread_unlocked_chk 1 x 100 = 2 (the last 2 bytes, end of file: errno 0); fclose = 0.
 * fopen "r" = 3: __uflow = 49 ('1', buffered 28: the whole file); fclose = 0. fopen "a" = 3:
 * putc_unlocked 'y' = 121 (bytes 1); __overflow 'x' = 120 (pending 1, the 'y': a file's
 * stream is fully buffered, so the call leaves "yx" in the buffer); fclose = 0.
 * stdin ("7 8 9 10\n", a pipe: fd 0): scanf "%d" = 1 (7); vscanf "%d" = 1 (8); getchar =
 * 32 (' '); getchar_unlocked = 57 ('9'); __isoc99_scanf "%d" = 1 (10);
 * __isoc99_vscanf "%d" = -1 (end of input, errno 0).
 */
static void stdio_in(void)
{
	static const char text[] = "10 20\nline two\nthird\nx\nrrrr\n";
	char *line = NULL;
	size_t cap = 0;
	FILE *f;
	int a, fd;

	fd = CALL(open, in_dir("i"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CALL(write, fd, text, sizeof(text) - 1);
	CALL(close, fd);
	f = CALL(fopen, in_dir("i"), "r");
	CALL(fscanf, f, "%d", &a);
	vscan(vfscanf, f, "%d", &a);
	CALL(fgetc, f);
	CALL(fgets, buf, 100, f);
	CALL(fgets_unlocked, buf, 3, f);
	CALL(__fgets_chk, buf, sizeof(buf), 100, f);
	CALL(__fgets_unlocked_chk, buf, sizeof(buf), 100, f);
	CALL(fgetc_unlocked, f);
	CALL(getc, f);
	CALL(_IO_getc, f);
	CALL(getc_unlocked, f);
	CALL(ungetc, 'r', f);
	CALL(getline, &line, &cap, f);
	CALL(getline, &line, &cap, f);
	CALL(fclose, f);
	f = CALL(fopen64, in_dir("i"), "r");
	CALL(getdelim, &line, &cap, ' ', f);
	CALL(__getdelim, &line, &cap, '\n', f);
	CALL(__isoc99_fscanf, f, "%s", buf);
	vscan(__isoc99_vfscanf, f, "%s", buf);
	CALL(fread, buf, 1, 4, f);
	CALL(fread_unlocked, buf, 2, 3, f);
	CALL(__fread_chk, buf, sizeof(buf), 1, 2, f);
	CALL(__fread_unlocked_chk, buf, sizeof(buf), 1, 100, f);
	CALL(fclose, f);
	/* the refill and the flush behind getc_unlocked and putc_unlocked inlined */
	f = CALL(fopen, in_dir("i"), "r");
	CALL(__uflow, f);
	CALL(fclose, f);
	f = CALL(fopen, in_dir("i"), "a");
	CALL(putc_unlocked, 'y', f);
	CALL(__overflow, f, 'x');
	CALL(fclose, f);
	free(line);
	CALL(scanf, "%d", &a);
	vscan_in(vscanf, "%d", &a);
	CALL(getchar);
	CALL(getchar_unlocked);
	CALL(__isoc99_scanf, "%d", &a);
	vscan_in(__isoc99_vscanf, "%d", &a);
}

/*
 * Streams made otherwise, and copies between descriptors:
 *   open DIR/i O_RDONLY = 3; fdopen 3 "r" = 3; freopen DIR/t "w" (old fd 3) = 3 (file#T);
 *   freopen64 DIR/t "a" = 3; fclose = 0; open DIR/i O_RDONLY = 3; open DIR/u
 *   O_WRONLY|O_CREAT|O_TRUNC 0600 = 4 (file#U); sendfile 4 3 NULL 5 = 5; sendfile64 4 3
 *   NULL 5 = 5; pipe = 0 (5, 6); splice 3 -> 6 4 bytes = 4; splice 5 -> 4 4 bytes = 4;
 *   copy_file_range 3 -> 4 3 bytes = 3; close 3..6
 */
static void copies(void)
{
	FILE *f;
	int p[2], fd;

	fd = CALL(open, in_dir("i"), O_RDONLY);
	f = CALL(fdopen, fd, "r");
	f = CALL(freopen, in_dir("t"), "w", f);
	f = CALL(freopen64, in_dir("t"), "a", f);
	CALL(fclose, f);
	CALL(open, in_dir("i"), O_RDONLY);
	CALL(open, in_dir("u"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CALL(sendfile, 4, 3, NULL, 5);
	CALL(sendfile64, 4, 3, NULL, 5);
	CALL(pipe, p);
	CALL(splice, 3, NULL, 6, NULL, 4, 0);
	CALL(splice, 5, NULL, 4, NULL, 4, 0);
	CALL(copy_file_range, 3, NULL, 4, NULL, 3, 0);
	for (fd = 3; fd <= 6; fd++)
		CALL(close, fd);
}

/*
 * Waiting on descriptors: epoll_create1 EPOLL_CLOEXEC = 3 (anon_inode:[eventpoll], file#E);
 *   epoll_create 4 = 4 (the same name, file#E); eventfd 5 EFD_NONBLOCK = 5
 *   (anon_inode:[eventfd], file#V); epoll_ctl 3 ADD 5 EPOLLIN = 0; epoll_wait 3 8 0 = 1 (the
 *   eventfd counts 5: readable); epoll_pwait 3 8 0 NULL = 1; epoll_pwait2 3 8 {0 s, 0 ns}
 *   NULL = 1; epoll_pwait2 3 8 with a timeout pointer that is no address = -1 EFAULT (not
 *   read: neither may the capture); ppoll [5 POLLIN] 1 {0, 1000 ns} NULL = 1; ppoll the
 *   same with 9.3e9 s (more nanoseconds than an int64 holds: the most it holds) = 1; __ppoll_chk
 *   the same = 1; pselect 6 {5} {0, 1000 ns} NULL = 1; epoll_ctl 3 DEL 5 with a pointer
 *   that is no address = 0 (a DEL reads none: neither may the capture); epoll_ctl 4 DEL 5 =
 *   -1 ENOENT (never added there); epoll_ctl 4 ADD 5 with that pointer = -1 EFAULT.
 * ioctl: pipe = 0 (6, 7: file#W); write 7 3 = 3; ioctl 6 FIONREAD = 0 (3 bytes to read);
 *   ioctl 6 TCGETS = -1 ENOTTY (a pipe is no terminal); close 3..7.
 */
static void waiting(void)
{
	struct epoll_event ev = {.events = EPOLLIN}, got[8];
	struct epoll_event *bogus = (struct epoll_event *)(uintptr_t)8;
	const struct timespec zero = {0, 0}, us = {0, 1000}, ages = {9300000000, 0};
	struct pollfd pfd = {.fd = 5, .events = POLLIN};
	int p[2], avail = 0;
	fd_set rfds;

	CALL(epoll_create1, EPOLL_CLOEXEC);
	CALL(epoll_create, 4);
	CALL(eventfd, 5, EFD_NONBLOCK);
	ev.data.fd = 5;
	CALL(epoll_ctl, 3, EPOLL_CTL_ADD, 5, &ev);
	CALL(epoll_wait, 3, got, 8, 0);
	CALL(epoll_pwait, 3, got, 8, 0, NULL);
	CALL(epoll_pwait2, 3, got, 8, &zero, NULL);
	CALL(epoll_pwait2, 3, got, 8, (const struct timespec *)(uintptr_t)8, NULL);
	CALL(ppoll, &pfd, 1, &us, NULL);
	CALL(ppoll, &pfd, 1, &ages, NULL);
	CALL(__ppoll_chk, &pfd, 1, &us, NULL, sizeof(pfd));
	FD_ZERO(&rfds);
	FD_SET(5, &rfds);
	CALL(pselect, 6, &rfds, NULL, NULL, &us, NULL);
	CALL(epoll_ctl, 3, EPOLL_CTL_DEL, 5, bogus);
	CALL(epoll_ctl, 4, EPOLL_CTL_DEL, 5, NULL);
	CALL(epoll_ctl, 4, EPOLL_CTL_ADD, 5, bogus);
	CALL(pipe, p);
	CALL(write, p[1], "abc", 3);
	CALL(ioctl, p[0], FIONREAD, &avail);
	CALL(ioctl, p[0], TCGETS, buf); /* room for a struct termios */
	if (avail != 3)
		fprintf(stderr, "FIONREAD said %d\n", avail);
	for (int fd = 3; fd <= 7; fd++)
		CALL(close, fd);
}

/*
 * Locks, on DIR/k opened O_RDWR|O_CREAT 0600 = 3 (file#K):
 *   fcntl 3 F_SETLK {F_WRLCK, SEEK_SET, 0, 100} = 0;
 *   fcntl 3 F_GETLK {F_RDLCK, SEEK_SET, 10, 5} = 0: the process's own lock is in no one's
 *   way, so the answer is the range asked with F_UNLCK;
 *   fcntl 3 F_OFD_GETLK {F_WRLCK, SEEK_CUR, 50, 10} = 0: an open file description's lock
 *   meets the process's, even its own: the answer is that lock, {F_WRLCK, SEEK_SET, 0, 100,
 *   this process};
 *   fcntl 3 F_OFD_SETLK {F_WRLCK, SEEK_SET, 50, 10} = -1 EAGAIN (the same meeting);
 *   fcntl 3 F_SETLKW {F_UNLCK, SEEK_SET, 0, 0} = 0;
 *   fcntl64 3 F_SETLK with a pointer that is no address = -1 EFAULT (not read);
 *   flock 3 LOCK_EX = 0; flock 3 LOCK_UN = 0; lockf 3 F_LOCK 10 = 0; lockf64 3 F_ULOCK 10 = 0;
 *   close 3. Its pid goes to stderr as `pid N` (the answer of the OFD_GETLK).
 */
static void locks(void)
{
	struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100};
	char line[32];
	int n;

	CALL(open, in_dir("k"), O_RDWR | O_CREAT, 0600);
	CALL(fcntl, 3, F_SETLK, &lk);
	lk = (struct flock){.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 10, .l_len = 5};
	CALL(fcntl, 3, F_GETLK, &lk);
	lk = (struct flock){.l_type = F_WRLCK, .l_whence = SEEK_CUR, .l_start = 50, .l_len = 10};
	CALL(fcntl, 3, F_OFD_GETLK, &lk);
	lk = (struct flock){.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 50, .l_len = 10};
	CALL(fcntl, 3, F_OFD_SETLK, &lk);
	lk = (struct flock){.l_type = F_UNLCK, .l_whence = SEEK_SET};
	CALL(fcntl, 3, F_SETLKW, &lk);
	CALL(fcntl64, 3, F_SETLK, (struct flock *)(uintptr_t)8);
	CALL(flock, 3, LOCK_EX);
	CALL(flock, 3, LOCK_UN);
	CALL(lockf, 3, F_LOCK, 10);
	CALL(lockf64, 3, F_ULOCK, 10);
	CALL(close, 3);
	n = snprintf(line, sizeof(line), "pid %d\n", (int)getpid());
	syscall(SYS_write, 2, line, (size_t)n);
}

/* A line on stderr by a raw system call (no interposer sees it), for check_calls.py. */
static void tell(const char *what, const char *text)
{
	char line[4200];
	int n = snprintf(line, sizeof(line), "%s %s\n", what, text);

	syscall(SYS_write, 2, line, (size_t)n);
}

/*
 * Strings at no address: stat and open of a path at address 8 = -1 EFAULT (recorded as
 * "(bad address)"); open of "aaaaaaaaaa" that runs into an unmapped page (no NUL) = -1 EFAULT
 * (recorded as far as memory goes, with a mark).
 */
static void bad_strings(void)
{
	const char *volatile nowhere = (const char *)(uintptr_t)8;
	char *two = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct stat st;

	CALL(stat, nowhere, &st);
	CALL(open, nowhere, O_RDONLY);
	if (two == MAP_FAILED)
		return;
	munmap(two + 4096, 4096);
	memset(two + 4086, 'a', 10);
	CALL(open, two + 4086, O_RDONLY);
	munmap(two, 4096);
}

/* A temporary file's template in DIR, in path2. */
static char *tmp_name(const char *tmpl)
{
	snprintf(path2, sizeof(path2), "%s/%s", dir, tmpl);
	return path2;
}

/* The name the call chose told, and its file (3) closed. */
static void tmp_done(void)
{
	tell("tmp", path2);
	CALL(close, 3);
}

/*
 * More on files, in DIR: open m O_RDWR|O_CREAT|O_TRUNC 0600 = 3 (file#M);
 *   pwritev 3 [buf 4, buf 4] 0 = 8; pwritev64 3 [buf 2] 8 = 2; pwritev2 3 [buf 2] 10 0 = 2;
 *   pwritev64v2 3 [buf 2] 12 0 = 2; preadv 3 [4, 4] 0 = 8; preadv64 3 [2] 8 = 2;
 *   preadv2 3 [2] 10 0 = 2; preadv64v2 3 [2] -1 0 = 2 (from the offset: 0);
 *   fallocate 3 0 -1 10 = -1 EINVAL; fallocate64 3 0 0 0 = -1 EINVAL (both refused before
 *   any file system's support is asked); posix_fallocate 3 0 100 = 0; posix_fallocate64 3 0
 *   200 = 0; posix_fadvise 3 0 0 POSIX_FADV_SEQUENTIAL = 0; posix_fadvise64 3 0 0
 *   POSIX_FADV_NORMAL = 0; posix_fadvise 3 0 0 99 = EINVAL (returned: errno left alone);
 *   fstatfs, fstatfs64, fstatvfs, fstatvfs64 3 = 0; statfs, statfs64, statvfs, statvfs64 m
 *   = 0; futimens 3 {1 s 2 ns, 3 s 4 ns} = 0; futimens 3 NULL = 0 (now); utimensat
 *   AT_FDCWD m {5 s, {77 s (ignored: recorded as 0), UTIME_OMIT}} 0 = 0; utimensat AT_FDCWD
 *   m with a pointer that is no address 0 = -1 EFAULT; utimensat AT_FDCWD NULL with it = -1
 *   EINVAL (glibc's answer, before any system call: the times, at no address, are not
 *   read); utimensat AT_FDCWD missing {100 s, 200 s} 0 = -1 ENOENT (its times read all the
 *   same, as memory that may be at no address); fchown 3 -1 -1 = 0; chown m -1 -1 = 0;
 *   lchown m -1 -1 = 0; fchownat AT_FDCWD m -1 -1 0 = 0 (-1: no change); close 3.
 * Links: symlink "m" ml = 0; readlink ml 100 = 1 ("m"); __readlink_chk ml 100 = 1;
 *   readlinkat AT_FDCWD ml 100 = 1; __readlinkat_chk AT_FDCWD ml 100 = 1; readlink m 100 =
 *   -1 EINVAL (no link).
 * Temporary files: mkstemp tXXXXXX = 3, mkstemp64, mkostemp O_APPEND, mkostemp64 O_APPEND,
 *   mkstemps tXXXXXX.s 2, mkstemps64, mkostemps O_APPEND, mkostemps64 O_APPEND: each = 3, a
 *   file of its own, closed; mkstemp bad = -1 EINVAL; mkdtemp dXXXXXX = a directory. Each
 *   name goes to stderr as `tmp NAME`, in this order.
 * Commands: popen "exit 3" "r" = a stream on 3 (a pipe, file#P); pclose = 768 (status 3);
 *   open m = 3 (pclose closed it); close 3;
 *   popen "true" "x" = NULL EINVAL; system "exit 5" = 1280 (status 5).
 * The process: getcwd path2 4096 = DIR (chdir'd to by paths()); __getcwd_chk the same;
 *   getcwd NULL 0 = DIR (in memory getcwd allocates); umask 077 = the mask before, U;
 *   umask U = 077.
 * Socket options: socket AF_INET SOCK_STREAM 0 = 3 (file#T); setsockopt 3 SOL_SOCKET
 *   SO_REUSEADDR 1 (4 bytes) = 0; getsockopt 3 SOL_SOCKET SO_REUSEADDR = 0 (1);
 *   getsockopt 3 SOL_SOCKET SO_TYPE = 0 (SOCK_STREAM); setsockopt 3 SOL_SOCKET SO_REUSEADDR
 *   with a pointer that is no address = -1 EFAULT (not read: -1); close 3.
 */
static void more_files(void)
{
	struct iovec two[2] = {{buf, 4}, {buf, 4}}, one = {buf, 2};
	const struct timespec times[2] = {{1, 2}, {3, 4}}, later[2] = {{5, 0}, {77, UTIME_OMIT}};
	/* no address, out of the compiler's sight (it would warn of reading it) */
	const struct timespec *volatile bad_times = (const struct timespec *)(uintptr_t)8;
	const char *volatile no_path = NULL;
	const struct timespec old_times[2] = {{100, 0}, {200, 0}};
	struct statfs sfs;
	struct statfs64 sfs64;
	struct statvfs svfs;
	struct statvfs64 svfs64;
	char link[100], *name;
	mode_t mask;
	int v = 1;
	socklen_t len = sizeof(v);
	FILE *fp;

	CALL(open, in_dir("m"), O_RDWR | O_CREAT | O_TRUNC, 0600);
	CALL(pwritev, 3, two, 2, 0);
	CALL(pwritev64, 3, &one, 1, 8);
	CALL(pwritev2, 3, &one, 1, 10, 0);
	CALL(pwritev64v2, 3, &one, 1, 12, 0);
	CALL(preadv, 3, two, 2, 0);
	CALL(preadv64, 3, &one, 1, 8);
	CALL(preadv2, 3, &one, 1, 10, 0);
	CALL(preadv64v2, 3, &one, 1, -1, 0);
	CALL(fallocate, 3, 0, -1, 10);
	CALL(fallocate64, 3, 0, 0, 0);
	CALL(posix_fallocate, 3, 0, 100);
	CALL(posix_fallocate64, 3, 0, 200);
	CALL(posix_fadvise, 3, 0, 0, POSIX_FADV_SEQUENTIAL);
	CALL(posix_fadvise64, 3, 0, 0, POSIX_FADV_NORMAL);
	CALL(posix_fadvise, 3, 0, 0, 99);
	CALL(fstatfs, 3, &sfs);
	CALL(fstatfs64, 3, &sfs64);
	CALL(fstatvfs, 3, &svfs);
	CALL(fstatvfs64, 3, &svfs64);
	CALL(statfs, in_dir("m"), &sfs);
	CALL(statfs64, in_dir("m"), &sfs64);
	CALL(statvfs, in_dir("m"), &svfs);
	CALL(statvfs64, in_dir("m"), &svfs64);
	CALL(futimens, 3, times);
	CALL(futimens, 3, NULL);
	CALL(utimensat, AT_FDCWD, in_dir("m"), later, 0);
	CALL(utimensat, AT_FDCWD, in_dir("m"), bad_times, 0);
	CALL(utimensat, AT_FDCWD, no_path, bad_times, 0);
	CALL(utimensat, AT_FDCWD, in_dir("missing"), old_times, 0);
	CALL(fchown, 3, (uid_t)-1, (gid_t)-1);
	CALL(chown, in_dir("m"), (uid_t)-1, (gid_t)-1);
	CALL(lchown, in_dir("m"), (uid_t)-1, (gid_t)-1);
	CALL(fchownat, AT_FDCWD, in_dir("m"), (uid_t)-1, (gid_t)-1, 0);
	CALL(close, 3);
	CALL(symlink, "m", in_dir("ml"));
	CALL(readlink, in_dir("ml"), link, sizeof(link));
	CALL(__readlink_chk, in_dir("ml"), link, sizeof(link), sizeof(link));
	CALL(readlinkat, AT_FDCWD, in_dir("ml"), link, sizeof(link));
	CALL(__readlinkat_chk, AT_FDCWD, in_dir("ml"), link, sizeof(link), sizeof(link));
	CALL(readlink, in_dir("m"), link, sizeof(link));
	CALL(mkstemp, tmp_name("tXXXXXX"));
	tmp_done();
	CALL(mkstemp64, tmp_name("tXXXXXX"));
	tmp_done();
	CALL(mkostemp, tmp_name("tXXXXXX"), O_APPEND);
	tmp_done();
	CALL(mkostemp64, tmp_name("tXXXXXX"), O_APPEND);
	tmp_done();
	CALL(mkstemps, tmp_name("tXXXXXX.s"), 2);
	tmp_done();
	CALL(mkstemps64, tmp_name("tXXXXXX.s"), 2);
	tmp_done();
	CALL(mkostemps, tmp_name("tXXXXXX.s"), 2, O_APPEND);
	tmp_done();
	CALL(mkostemps64, tmp_name("tXXXXXX.s"), 2, O_APPEND);
	tmp_done();
	CALL(mkstemp, tmp_name("bad")); /* no XXXXXX: EINVAL */
	snprintf(path2, sizeof(path2), "%s/dXXXXXX", dir);
	name = CALL(mkdtemp, path2);
	tell("tmp", name ? name : "(failed)");
	fp = CALL(popen, "exit 3", "r");
	CALL(pclose, fp);
	CALL(open, in_dir("m"), O_RDONLY);
	CALL(close, 3);
	CALL(popen, "true", "x");
	CALL(system, "exit 5");
	CALL(getcwd, path2, sizeof(path2));
	CALL(__getcwd_chk, path2, sizeof(path2), sizeof(path2));
	free(CALL(getcwd, NULL, 0));
	mask = CALL(umask, 077);
	CALL(umask, mask);
	CALL(socket, AF_INET, SOCK_STREAM, 0);
	CALL(setsockopt, 3, SOL_SOCKET, SO_REUSEADDR, &v, sizeof(v));
	v = 0;
	CALL(getsockopt, 3, SOL_SOCKET, SO_REUSEADDR, &v, &len);
	CALL(getsockopt, 3, SOL_SOCKET, SO_TYPE, &v, &len);
	CALL(setsockopt, 3, SOL_SOCKET, SO_REUSEADDR, (const void *)(uintptr_t)8, sizeof(v));
	CALL(close, 3);
	bad_strings();
}

/*
 * Sleeps, syncs and datagrams, on DIR/y opened O_RDWR|O_CREAT 0600 = 3 (file#43) and a
 * datagram socket pair 3, 4 made after it is closed (file#44, file#45):
 *   nanosleep {0, 1000} = 0; nanosleep at no address = -1 EFAULT; nanosleep {0, -1} = -1
 *   EINVAL; clock_nanosleep MONOTONIC 0 {0, 1000} = 0; clock_nanosleep MONOTONIC
 *   TIMER_ABSTIME {0, 0} = 0 (long past); clock_nanosleep clock 99 = EINVAL (returned);
 *   sleep 0 = 0; usleep 1 = 0;
 *   write 3 "abcd" = 4; syncfs 3 = 0; sync_file_range 3 0 4 SYNC_FILE_RANGE_WRITE = 0;
 *   msync of a shared mapping of 3 (4096 bytes) MS_SYNC = 0, then of NULL = -1 ENOMEM;
 *   close 3; socketpair AF_UNIX SOCK_DGRAM; sendmmsg 3 of "abc" and "defg" = 2 (7 bytes);
 *   recvmmsg 4 vlen 2 MSG_DONTWAIT, no timeout = 2 (7 bytes); recvmmsg 4 vlen 2
 *   MSG_DONTWAIT {0, 1000} = -1 EAGAIN (0 bytes); close 3, 4.
 */
static void sleeps_syncs_datagrams(void)
{
	const struct timespec us = {0, 1000}, past = {0, 0}, bad = {0, -1};
	const struct timespec *volatile nowhere = (const struct timespec *)(uintptr_t)8;
	struct timespec wait = {0, 1000};
	char a[8], b[8];
	struct iovec out[2] = {{"abc", 3}, {"defg", 4}}, in[2] = {{a, sizeof(a)}, {b, sizeof(b)}};
	struct mmsghdr sent[2] = {{.msg_hdr = {.msg_iov = &out[0], .msg_iovlen = 1}},
				  {.msg_hdr = {.msg_iov = &out[1], .msg_iovlen = 1}}};
	struct mmsghdr got[2] = {{.msg_hdr = {.msg_iov = &in[0], .msg_iovlen = 1}},
				 {.msg_hdr = {.msg_iov = &in[1], .msg_iovlen = 1}}};
	int sv[2];
	void *map;

	CALL(nanosleep, &us, NULL);
	CALL(nanosleep, nowhere, NULL);
	CALL(nanosleep, &bad, NULL);
	CALL(clock_nanosleep, CLOCK_MONOTONIC, 0, &us, NULL);
	CALL(clock_nanosleep, CLOCK_MONOTONIC, TIMER_ABSTIME, &past, NULL);
	CALL(clock_nanosleep, 99, 0, &us, NULL);
	CALL(sleep, 0);
	CALL(usleep, 1);
	CALL(open, in_dir("y"), O_RDWR | O_CREAT, 0600);
	CALL(write, 3, "abcd", 4);
	CALL(syncfs, 3);
	CALL(sync_file_range, 3, 0, 4, SYNC_FILE_RANGE_WRITE);
	map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 3, 0);
	CALL(msync, map, 4096, MS_SYNC);
	munmap(map, 4096);
	CALL(msync, NULL, 4096, MS_SYNC);
	CALL(close, 3);
	CALL(socketpair, AF_UNIX, SOCK_DGRAM, 0, sv);
	CALL(sendmmsg, 3, sent, 2, 0);
	CALL(recvmmsg, 4, got, 2, MSG_DONTWAIT, NULL);
	CALL(recvmmsg, 4, got, 2, MSG_DONTWAIT, &wait);
	CALL(close, 3);
	CALL(close, 4);
	if (memcmp(a, "abc", 3) || memcmp(b, "defg", 4))
		fprintf(stderr, "recvmmsg got other bytes\n");
}

static int vfwprint(int (*f)(FILE *, const wchar_t *, va_list), FILE *fp, const wchar_t *fmt,
		    ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = f(fp, fmt, ap);
	va_end(ap);
	return n;
}

static int vfwprint_chk(int (*f)(FILE *, int, const wchar_t *, va_list), FILE *fp,
			const wchar_t *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = f(fp, 1, fmt, ap);
	va_end(ap);
	return n;
}

static int vwprint(int (*f)(const wchar_t *, va_list), const wchar_t *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = f(fmt, ap);
	va_end(ap);
	return n;
}

static int vwprint_chk(int (*f)(int, const wchar_t *, va_list), const wchar_t *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = f(1, fmt, ap);
	va_end(ap);
	return n;
}

/* CALL for a function of no parameters and no result (sync) */
static void vcall_void(void (*f)(void))
{
	void (*volatile g)(void) = f;

	errno = 77;
	g();
	note_errno();
}

/*
 * sync, then wide characters (cap_calls DIR wide) in the locale C.UTF-8 (exit 3 without
 * it), so that a character is 1 to 3 bytes (e-acute 2, the euro sign 3):
 *   sync.
 *   fopen DIR/w "w" = 3 (file#W): fwprintf "%d\n" 12345 = 6; vfwprintf "%ls" "vf" = 2;
 *   __fwprintf_chk "%05d" 42 = 5; __vfwprintf_chk "%lc" 'z' = 1; fputws "abc" (bytes 3);
 *   fputws_unlocked "d" e-acute (bytes 3); fputwc 'x' = 120 (bytes 1); fputwc_unlocked
 *   u-umlaut = 252 (bytes 2); putwc 'p' = 112 (bytes 1); putwc_unlocked euro = 8364 (bytes
 *   3); fclose = 0 (DIR/w holds 27 bytes).
 *   fopen DIR/w "r" = 3: fgetws 4 ("123", bytes 3); fgetws_unlocked 16 ("45\n", bytes 3);
 *   __fgetws_chk 16 5 ("vf00", bytes 4); __fgetws_unlocked_chk 16 4 ("042", bytes 3);
 *   fgetwc = 122 ('z'); fgetwc_unlocked = 97; getwc = 98; getwc_unlocked = 99 (bytes 1
 *   each); ungetwc 'c' = 99; fgetws 16 (the rest, "cd" e-acute "x" u-umlaut "p" euro:
 *   bytes 11); fgetwc = -1 (end of file, errno 0, bytes 0); fputwc 'x' = -1 EBADF (a stream
 *   opened to read; bytes 0); fclose = 0.
 *   stdout (fd 1): wprintf "%ls\n" "out" = 4; vwprintf "%d" 7 = 1; __wprintf_chk "%x" 255
 *   = 2; __vwprintf_chk "!" = 1; fwprintf "%d" 5 = 1; putwchar 'A' = 65 (bytes 1);
 *   putwchar_unlocked e-acute = 233 (bytes 2); fputws u-umlaut "\n" (bytes 3); fputwc 'B'
 *   = 66; putwc 'C' = 67 (bytes 1 each). Its output: "out\n7ff!5A" e-acute u-umlaut "\nBC".
 *   stdin ("7 8 9 10\n", fd 0): getwchar = 55 ('7'); getwchar_unlocked = 32; fgetwc = 56
 *   ('8'); getwc = 32 (bytes 1 each); ungetwc 'x' = 120; fgetws 16 ("x9 10\n", bytes 6).
 */
static void wide(void)
{
	wchar_t line[16];
	FILE *f;

	vcall_void(sync);
	if (!CALL(setlocale, LC_CTYPE, "C.UTF-8")) {
		fprintf(stderr, "cap_calls: no locale C.UTF-8\n");
		exit(3);
	}
	f = CALL(fopen, in_dir("w"), "w");
	CALL(fwprintf, f, L"%d\n", 12345);
	vfwprint(vfwprintf, f, L"%ls", L"vf");
	CALL(__fwprintf_chk, f, 1, L"%05d", 42);
	vfwprint_chk(__vfwprintf_chk, f, L"%lc", (wint_t)L'z');
	CALL(fputws, L"abc", f);
	CALL(fputws_unlocked, L"d\u00e9", f);
	CALL(fputwc, L'x', f);
	CALL(fputwc_unlocked, L'\u00fc', f);
	CALL(putwc, L'p', f);
	CALL(putwc_unlocked, L'\u20ac', f);
	CALL(fclose, f);
	f = CALL(fopen, in_dir("w"), "r");
	CALL(fgetws, line, 4, f);
	CALL(fgetws_unlocked, line, 16, f);
	CALL(__fgetws_chk, line, 16, 5, f);
	CALL(__fgetws_unlocked_chk, line, 16, 4, f);
	CALL(fgetwc, f);
	CALL(fgetwc_unlocked, f);
	CALL(getwc, f);
	CALL(getwc_unlocked, f);
	CALL(ungetwc, L'c', f);
	CALL(fgetws, line, 16, f);
	CALL(fgetwc, f);
	CALL(fputwc, L'x', f);
	CALL(fclose, f);
	CALL(wprintf, L"%ls\n", L"out");
	vwprint(vwprintf, L"%d", 7);
	CALL(__wprintf_chk, 1, L"%x", 255);
	vwprint_chk(__vwprintf_chk, L"!");
	CALL(fwprintf, stdout, L"%d", 5);
	CALL(putwchar, L'A');
	CALL(putwchar_unlocked, L'\u00e9');
	CALL(fputws, L"\u00fc\n", stdout);
	CALL(fputwc, L'B', stdout);
	CALL(putwc, L'C', stdout);
	CALL(getwchar);
	CALL(getwchar_unlocked);
	CALL(fgetwc, stdin);
	CALL(getwc, stdin);
	CALL(ungetwc, L'x', stdin);
	CALL(fgetws, line, 16, stdin);
}

/*
 * The wide printf family writing characters outside ASCII (cap_calls DIR wbytes), in C.UTF-8
 * (exit 3 without it): each call returns the wide characters it wrote, fewer than their
 * bytes.
 *   fopen DIR/wb "w" = 3; fwprintf "%ls %lc\n" "d"e-acute"j"a-grave euro = 7 (bytes 11);
 *   vfwprintf "%ls" e-acute"t"e-acute = 3 (bytes 5); __fwprintf_chk "<u-umlaut>%d" 42 = 3
 *   (bytes 4, a format outside ASCII); __vfwprintf_chk "%lc" euro = 1 (bytes 3); fclose = 0
 *   (DIR/wb holds 23 bytes).
 *   stdout (fd 1): wprintf "%ls\n" euro euro = 3 (bytes 7); vwprintf "%lc" e-acute = 1
 *   (bytes 2); __wprintf_chk "%d" 5 = 1 (bytes 1); __vwprintf_chk "%ls" a-grave = 1 (bytes
 *   2). Its output: 12 bytes.
 */
static void wide_bytes(void)
{
	FILE *f;

	if (!setlocale(LC_CTYPE, "C.UTF-8")) {
		fprintf(stderr, "cap_calls: no locale C.UTF-8\n");
		exit(3);
	}
	f = CALL(fopen, in_dir("wb"), "w");
	CALL(fwprintf, f, L"%ls %lc\n", L"d\u00e9j\u00e0", (wint_t)L'\u20ac');
	vfwprint(vfwprintf, f, L"%ls", L"\u00e9t\u00e9");
	CALL(__fwprintf_chk, f, 1, L"\u00fc%d", 42);
	vfwprint_chk(__vfwprintf_chk, f, L"%lc", (wint_t)L'\u20ac');
	CALL(fclose, f);
	CALL(wprintf, L"%ls\n", L"\u20ac\u20ac");
	vwprint(vwprintf, L"%lc", (wint_t)L'\u00e9');
	CALL(__wprintf_chk, 1, L"%d", 5);
	vwprint_chk(__vwprintf_chk, L"%ls", L"\u00e0");
}

int main(int argc, char **argv)
{
	char line[64];
	int n;

	if (argc != 2 && (argc != 3 || (strcmp(argv[2], "wide") && strcmp(argv[2], "wbytes")))) {
		fprintf(stderr, "usage: cap_calls DIR [wide|wbytes]\n");
		return 2;
	}
	dir = argv[1];
	memset(buf, 'b', sizeof(buf));
	if (argc == 3) {
		if (strcmp(argv[2], "wide") == 0)
			wide();
		else
			wide_bytes();
		goto out;
	}
	descriptors();
	descriptor_names();
	pipes_and_sockets();
	paths();
	stdio_out();
	stdio_in();
	copies();
	waiting();
	locks();
	more_files();
	sleeps_syncs_datagrams();
out:
	n = snprintf(line, sizeof(line), "errno %lu\n", g_errno_hash);
	syscall(SYS_write, 2, line, (size_t)n);
	return 0;
}
