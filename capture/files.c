/*
 * Symbolic files (files_i.h): the table of the process's descriptors and the ids of the
 * paths, pipes and sockets behind them, kept by the I/O interposers, and the helpers that
 * turn a call's parameters into event arguments (socket addresses, fcntl's argument, cut
 * strings). It records only `fd_file` events (a descriptor met first); it does not decide
 * which calls are recorded (calls.txt, interpose_gen.c).
 */
#undef _FILE_OFFSET_BITS
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <wchar.h>
#include <unistd.h>

#include "capture_i.h"
#include "files_i.h"
#include "interpose_i.h"

#define FD_MAX 65536  /* descriptors with a remembered file id */
#define N_PATHS 16384 /* distinct names given ids through the name table */
/* what /proc/self/fd shows for a descriptor, NUL included: a path of at most PATH_MAX bytes */
#define FD_NAME_BYTES (PATH_MAX + 1)

/* working directories left (chdir, fchdir): a relative name in each is a file of its own */
static _Atomic uint32_t g_cwd_epoch;

/* file id + 1 of each descriptor, 0: none yet; g_fd_end: above every descriptor set */
static _Atomic uint32_t g_fd_file[FD_MAX];
static _Atomic int g_fd_end;

static atomic_flag g_paths_lock = ATOMIC_FLAG_INIT;
static struct {
	uint64_t key; /* 0: empty */
	uint32_t id;
} g_paths[N_PATHS];
static uint32_t g_n_paths; /* under g_paths_lock */
static uint64_t g_paths_gen; /* names of an earlier rank (a forked child's parent) never match */

/* The longest name of one socket address, NUL included (a unix path is at most 108 bytes). */
#define CAP_ADDR_BYTES 160

static _Thread_local char tls_addr[CAP_ADDR_BYTES] __attribute__((tls_model("initial-exec")));

static uint64_t path_key(uint64_t dir, const char *path)
{
	uint64_t h = 0xcbf29ce484222325u ^ dir;

	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		h = (h ^ *p) * 0x100000001b3u;
	return h ? h : 1;
}

/*
 * The file id of a name (keyed by @dir: 0 for an absolute path or one relative to the first
 * working directory, a directory's file id + 1, or a later working directory's epoch << 32).
 * A name not met before gets @want, or a new id when @want is UINT32_MAX. @fresh (optional)
 * tells whether the name was not met before.
 */
static uint32_t path_file(uint64_t dir, const char *path, uint32_t want, bool *fresh)
{
	uint64_t key = path_key(dir ^ g_paths_gen * 0x9e3779b97f4a7c15u, path);
	uint32_t i = (uint32_t)(key % N_PATHS), id;
	bool is_new = false;

	cap_lock(&g_paths_lock);
	for (; g_paths[i].key; i = (i + 1) % N_PATHS) {
		if (g_paths[i].key == key) {
			id = g_paths[i].id;
			goto out;
		}
	}
	id = want != UINT32_MAX ? want : cap_file_reserve();
	is_new = true;
	if (g_n_paths < N_PATHS * 3 / 4) { /* past that, names get ids without reuse */
		g_paths[i].key = key;
		g_paths[i].id = id;
		g_n_paths++;
	}
out:
	cap_unlock(&g_paths_lock);
	if (fresh)
		*fresh = is_new;
	return id;
}

static void fd_set_file(int fd, uint32_t id)
{
	int end;

	if (fd < 0 || fd >= FD_MAX)
		return;
	atomic_store_explicit(&g_fd_file[fd], id + 1, memory_order_relaxed);
	end = atomic_load_explicit(&g_fd_end, memory_order_relaxed);
	while (end <= fd && !atomic_compare_exchange_weak_explicit(&g_fd_end, &end, fd + 1,
								    memory_order_relaxed,
								    memory_order_relaxed))
		;
}

static void fd_forget(int fd)
{
	if (fd >= 0 && fd < FD_MAX)
		atomic_store_explicit(&g_fd_file[fd], 0, memory_order_relaxed);
}

/* The id @fd has in the table, or UINT32_MAX. */
static uint32_t fd_known(int fd)
{
	uint32_t id = fd >= 0 && fd < FD_MAX
			      ? atomic_load_explicit(&g_fd_file[fd], memory_order_relaxed)
			      : 0;

	return id ? id - 1 : UINT32_MAX;
}

static void put_fd_file(int fd, const char *name, uint32_t id)
{
	char buf[CAP_STR_BYTES];
	uint64_t args[3] = {0, (uint64_t)(int64_t)fd, id};

	cap_put_call(CALL_FD_FILE, cap_now_ns(), args, 3, buf, cap_put_str(buf, 0, name));
}

/* The name of socket @fd's own address, or NULL when it has none (unbound, unnamed). */
static const char *own_address(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	const char *s;

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0 || len <= sizeof(sa_family_t))
		return NULL;
	s = cap_sockaddr(fd, (struct sockaddr *)&ss, len);
	/* an unbound socket says 0.0.0.0:0 or an unnamed unix socket: no name */
	if (strstr(s, ":0.0.0.0:0") || strstr(s, ":[::]:0") || !strcmp(s, "unix:"))
		return NULL;
	return s;
}

/*
 * Connected socket @fd's name, both ends: `tcp:127.0.0.1:40112->127.0.0.1:5432` (its own
 * address, then @peer's without the protocol; an unnamed unix end is empty:
 * `unix:->/run/x.sock`), so that a connection is told apart from the listener whose address
 * it reached, and from the other connections. @return false when neither end has a name.
 */
static bool connection_name(int fd, const struct sockaddr *peer, socklen_t plen, char *buf,
			    size_t cap)
{
	char mine[CAP_ADDR_BYTES];
	const char *s = own_address(fd), *p;
	bool named = s != NULL;

	if (!s) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);

		s = getsockname(fd, (struct sockaddr *)&ss, &len) == 0
			    ? cap_sockaddr(fd, (struct sockaddr *)&ss, len)
			    : "?:";
		/* unnamed: its protocol and nothing else */
		p = strchr(s, ':');
		snprintf(mine, sizeof(mine), "%.*s", p ? (int)(p - s + 1) : 0, s);
	} else {
		snprintf(mine, sizeof(mine), "%s", s);
	}
	p = plen > sizeof(sa_family_t) ? cap_sockaddr(fd, peer, plen) : "";
	named |= *p != '\0';
	p = strchr(p, ':') ? strchr(p, ':') + 1 : p;
	/* both unnamed (a socket pair's ends): @buf keeps what it held */
	if (named)
		snprintf(buf, cap, "%s->%s", mine, p);
	return named;
}

/*
 * A name for socket @fd better than "socket:[N]": both ends of a connection, else its own
 * address (a listener, a bound datagram socket).
 */
static bool socket_name(int fd, char *buf, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	const char *s;

	if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0 &&
	    connection_name(fd, (struct sockaddr *)&ss, len, buf, cap))
		return true;
	s = own_address(fd);
	if (!s)
		return false;
	snprintf(buf, cap, "%s", s);
	return true;
}

/*
 * The capture's own calls of functions it interposes (readlink, getsockopt): made with
 * cap_tls_depth raised, so that their wrappers pass them through unrecorded. Without it,
 * naming a socket's descriptor would record a getsockopt whose descriptor it names again.
 */
static ssize_t own_readlink(const char *path, char *buf, size_t n)
{
	ssize_t r;

	cap_tls_depth++;
	r = readlink(path, buf, n);
	cap_tls_depth--;
	return r;
}

static int own_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	int r;

	cap_tls_depth++;
	r = getsockopt(fd, level, name, val, len);
	cap_tls_depth--;
	return r;
}

/*
 * What /proc/self/fd shows for open @fd (a socket: its address), whole, into @target
 * (FD_NAME_BYTES): it keys the table of names, where two long paths with a common start
 * are two files; its fd_file event cuts it with a visible mark (cap_put_str).
 * @return false when /proc does not show it
 */
static bool fd_target(int fd, char *target)
{
	char link[48];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = own_readlink(link, target, FD_NAME_BYTES - 1);
	if (n <= 0)
		return false;
	target[n] = '\0';
	if (!strncmp(target, "socket:[", 8))
		socket_name(fd, target, FD_NAME_BYTES);
	return true;
}

/*
 * The one file id of every descriptor met while not open (a closefrom loop's close(3),
 * close(4)... of numbers never opened), declared once per rank: an id per number would make
 * a file, an fd_file event and a call signature per number. Its fd_file says -1, as the id
 * is no descriptor's. id + 1, 0: none yet.
 */
static _Atomic uint32_t g_not_open;
static const char not_open_name[] = "(not open)";

static uint32_t not_open_file(void)
{
	uint32_t v = atomic_load_explicit(&g_not_open, memory_order_relaxed);
	bool fresh;

	if (v)
		return v - 1;
	v = path_file(0, not_open_name, UINT32_MAX, &fresh) + 1;
	if (fresh)
		put_fd_file(-1, not_open_name, v - 1);
	atomic_store_explicit(&g_not_open, v, memory_order_relaxed);
	return v - 1;
}

uint32_t cap_fd_file(int fd)
{
	char target[FD_NAME_BYTES];
	const int saved_errno = errno;
	uint32_t id;
	bool fresh, n;

	if (fd < 0)
		return CALL_NO_FILE;
	id = fd_known(fd);
	if (id != UINT32_MAX)
		return id;
	/* the kernel says so in a cheap call where /proc costs a path walk (a readlink is 30
	   times as long): a closefrom loop asks for every number */
	if (syscall(SYS_fcntl, fd, F_GETFD) < 0 && errno == EBADF) {
		id = not_open_file();
		goto out;
	}
	n = fd_target(fd, target);
	if (!n) /* open, but /proc does not show it (not mounted): a name of its own */
		snprintf(target, sizeof(target), "(fd %d unnamed)", fd);
	id = path_file(0, target, UINT32_MAX, &fresh);
	if (n)
		fd_set_file(fd, id);
	/* one without a name gets it once, but no place in the table */
	if (n || fresh)
		put_fd_file(fd, target, id);
out:
	errno = saved_errno;
	return id;
}

/*
 * Name new id @id of @path opened relative to directory descriptor @dirfd by an fd_file
 * event, `<directory>/<path>`: the path alone names another file in every directory (the
 * consumer leaves the open's own relative path for this name).
 */
static void name_in_dir(int dirfd, const char *path, int fd, uint32_t id)
{
	/*
	 * the directory's path, a slash, @path: cut at PATH_MAX bytes (the event cuts it with
	 * a mark sooner), so that the frame stays small on the program's thread stack
	 */
	char link[48], name[FD_NAME_BYTES];
	const int saved_errno = errno;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
	n = own_readlink(link, name, FD_NAME_BYTES - 2);
	if (n > 0 && name[0] == '/') {
		snprintf(name + n, sizeof(name) - (size_t)n, "/%s", path);
		put_fd_file(fd, name, id);
	}
	errno = saved_errno;
}

uint32_t cap_fd_opened(int dirfd, const char *path, int fd)
{
	uint64_t dir = 0;
	uint32_t id;
	bool fresh;

	if (fd >= 0 && path && cap_path_names_fd(path)) {
		fd_forget(fd);
		return cap_fd_file(fd);
	}
	if (dirfd != AT_FDCWD && path && path[0] != '/')
		dir = (uint64_t)cap_fd_file(dirfd) + 1;
	else if (path && path[0] != '/')
		dir = (uint64_t)atomic_load_explicit(&g_cwd_epoch, memory_order_relaxed) << 32;
	id = path_file(dir, path ? path : "", UINT32_MAX, &fresh);
	if (dirfd != AT_FDCWD && dir && fresh)
		name_in_dir(dirfd, path, fd, id);
	if (fd >= 0)
		fd_set_file(fd, id);
	return id;
}

void cap_files_forget(void)
{
	const int end = atomic_load_explicit(&g_fd_end, memory_order_relaxed);

	/* up to the highest descriptor set, and the name table left as it is (a new key for
	   every name): a fork copies no page of either that it need not */
	for (int i = 0; i < end; i++)
		atomic_store_explicit(&g_fd_file[i], 0, memory_order_relaxed);
	atomic_store_explicit(&g_fd_end, 0, memory_order_relaxed);
	atomic_store_explicit(&g_not_open, 0, memory_order_relaxed);
	g_paths_gen++;
	atomic_flag_clear(&g_paths_lock); /* a thread of the parent may have held it */
}

void cap_files_export(uint32_t *fd_file, unsigned int n)
{
	const int end = atomic_load_explicit(&g_fd_end, memory_order_relaxed);
	const int saved_errno = errno;

	for (unsigned int fd = 0; fd < n; fd++) {
		uint32_t v = (int)fd < end ? atomic_load_explicit(&g_fd_file[fd],
								   memory_order_relaxed)
					   : 0;
		long flags = v ? syscall(SYS_fcntl, (int)fd, F_GETFD) : -1;

		/* a descriptor the exec closes may be another file's in the next image */
		fd_file[fd] = flags >= 0 && !(flags & FD_CLOEXEC) ? v : 0;
	}
	errno = saved_errno;
}

void cap_files_import(const uint32_t *fd_file, unsigned int n)
{
	char target[FD_NAME_BYTES];
	const int saved_errno = errno;

	for (unsigned int fd = 0; fd < n && fd < FD_MAX; fd++) {
		if (!fd_file[fd])
			continue;
		fd_set_file((int)fd, fd_file[fd] - 1);
		/* and what /proc shows for it is that file too: another descriptor on it (a
		   stderr on the stdout's /dev/null), met first here, is not another file */
		if (fd_target((int)fd, target))
			path_file(0, target, fd_file[fd] - 1, NULL);
	}
	errno = saved_errno;
}

void cap_cwd_changed(void)
{
	atomic_fetch_add_explicit(&g_cwd_epoch, 1, memory_order_relaxed);
}

void cap_fd_closed(int fd)
{
	fd_forget(fd);
}

void cap_fd_closed_range(unsigned int first, unsigned int last)
{
	for (unsigned int fd = first; fd <= last && fd < FD_MAX; fd++)
		fd_forget((int)fd);
}

void cap_fd_dup(int fd, int newfd)
{
	if (newfd < 0 || newfd == fd)
		return;
	fd_set_file(newfd, cap_fd_file(fd));
}

void cap_fd_new(int fd)
{
	fd_forget(fd);
}

void cap_fd_pair_new(const int fds[2])
{
	fd_forget(fds[0]);
	fd_forget(fds[1]);
}

void cap_fd_named(int fd, const char *name)
{
	bool fresh;
	uint32_t id = path_file(0, name, UINT32_MAX, &fresh);

	if (fd < 0)
		return;
	fd_set_file(fd, id);
	if (fresh)
		put_fd_file(fd, name, id);
}

void cap_fd_connected(int fd, const struct sockaddr *addr, socklen_t len)
{
	char name[2 * CAP_ADDR_BYTES];

	if (connection_name(fd, addr, len, name, sizeof(name)))
		cap_fd_named(fd, name);
}

void cap_fd_bound(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0 && len > sizeof(sa_family_t))
		cap_fd_named(fd, cap_sockaddr(fd, (struct sockaddr *)&ss, len));
}

int cap_stream_fd(FILE *fp)
{
	return fp ? fileno(fp) : -1;
}

int cap_dir_fd(DIR *d)
{
	return d ? dirfd(d) : -1;
}

uint32_t cap_stream_file(FILE *fp)
{
	static const char all[] = "(all streams)";
	bool fresh;
	uint32_t id;

	if (fp)
		return cap_fd_file(fileno(fp));
	id = path_file(0, all, UINT32_MAX, &fresh);
	if (fresh)
		put_fd_file(-1, all, id);
	return id;
}

/* "tcp", "udp"... for socket @fd of family @family. */
static const char *sock_proto(int fd, int family)
{
	int type = 0;
	socklen_t len = sizeof(type);

	if (family == AF_UNIX)
		return "unix";
	if (own_getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
		return "inet";
	switch (type) {
	case SOCK_STREAM:
		return "tcp";
	case SOCK_DGRAM:
		return "udp";
	case SOCK_RAW:
		return "raw";
	default:
		return "inet";
	}
}

const char *cap_sockaddr(int fd, const struct sockaddr *addr, socklen_t len)
{
	const int saved_errno = errno;
	char host[INET6_ADDRSTRLEN] = "?";
	char *buf = tls_addr;
	const size_t cap = sizeof(tls_addr);

	if (!addr || len < sizeof(sa_family_t)) {
		snprintf(buf, cap, "?");
	} else if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)addr;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, cap, "%s:%s:%u", sock_proto(fd, AF_INET), host, ntohs(in->sin_port));
	} else if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, cap, "%s:[%s]:%u", sock_proto(fd, AF_INET6), host,
			 ntohs(in6->sin6_port));
	} else if (addr->sa_family == AF_UNIX) {
		const struct sockaddr_un *un = (const struct sockaddr_un *)addr;
		size_t n = len - offsetof(struct sockaddr_un, sun_path);

		if (n > sizeof(un->sun_path))
			n = sizeof(un->sun_path);
		if (n > 0 && un->sun_path[0] == '\0') /* abstract: no NUL ends it */
			snprintf(buf, cap, "unix:@%.*s", (int)(n - 1), un->sun_path + 1);
		else
			snprintf(buf, cap, "unix:%.*s", (int)strnlen(un->sun_path, n),
				 un->sun_path);
	} else {
		snprintf(buf, cap, "family%u:?", (unsigned int)addr->sa_family);
	}
	errno = saved_errno;
	return buf;
}

int64_t cap_fcntl_arg(int cmd, const void *arg)
{
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
	case F_SETFD:
	case F_SETFL:
	case F_SETOWN:
	case F_SETSIG:
	case F_SETLEASE:
	case F_NOTIFY:
	case F_SETPIPE_SZ:
	case F_ADD_SEALS:
		return (int)(intptr_t)arg;
	default:
		return 0;
	}
}

bool cap_fcntl_locks(int cmd)
{
	switch (cmd) {
	case F_GETLK:
	case F_SETLK:
	case F_SETLKW:
	case F_OFD_GETLK:
	case F_OFD_SETLK:
	case F_OFD_SETLKW:
		return true;
	default:
		return false;
	}
}

int64_t cap_flock_field(int cmd, const void *arg, int ret, int err, int field)
{
	const struct flock *lk = arg;
	const bool get = cmd == F_GETLK || cmd == F_OFD_GETLK;

	if (!lk || (ret < 0 && err != EAGAIN && err != EACCES && err != EDEADLK && err != EINTR &&
		    err != ENOLCK))
		return -1;
	switch (field) {
	case CAP_FLOCK_TYPE:
		return lk->l_type;
	case CAP_FLOCK_WHENCE:
		return lk->l_whence;
	case CAP_FLOCK_START:
		return (int64_t)lk->l_start;
	case CAP_FLOCK_LEN:
		return (int64_t)lk->l_len;
	default:
		return get && ret == 0 && lk->l_type != F_UNLCK ? lk->l_pid : 0;
	}
}

int64_t cap_timespec_ns(const struct timespec *ts, bool read)
{
	if (!read)
		return -2;
	if (!ts)
		return -1;
	if (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec > 999999999)
		return INT64_MIN; /* refused by the kernel: no timeout's value */
	if (ts->tv_sec > (INT64_MAX - 999999999) / 1000000000)
		return INT64_MAX;
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/*
 * Copy @n bytes at @p, which may be at no address, to @dst (process_vm_readv on the process
 * itself, page by page: a transfer stops at the first part it cannot read). @return the
 * bytes copied, from the start, -1 when @p is at no address, or READ_REFUSED when the
 * system call itself is (a seccomp filter, a kernel without it): nothing can be told then.
 * errno is left as it was.
 */
#define READ_REFUSED (-2)
static ssize_t read_at(void *dst, const void *p, size_t n)
{
	const uintptr_t page = 4096;
	struct iovec local = {dst, n}, remote[4];
	uintptr_t at = (uintptr_t)p;
	unsigned long k = 0;
	const int saved_errno = errno;
	ssize_t r = -1;

	while (n && k < 4) {
		size_t part = (size_t)(page - at % page);

		if (part > n)
			part = n;
		remote[k++] = (struct iovec){(void *)at, part};
		at += part;
		n -= part;
	}
	local.iov_len -= n; /* past 4 parts: not read */
	if (p) {
		r = syscall(SYS_process_vm_readv, (long)syscall(SYS_getpid), &local, 1UL, remote, k,
			    0UL);
		if (r < 0 && errno != EFAULT)
			r = READ_REFUSED;
	}
	errno = saved_errno;
	return r;
}

bool cap_str_readable(const char *s)
{
	char chunk[512];

	/* past 1 MiB the kernel refuses any exec string (MAX_ARG_STRLEN is 128 KiB) */
	for (size_t at = 0; at < ((size_t)1 << 20); at += sizeof(chunk)) {
		const ssize_t n = read_at(chunk, s + at, sizeof(chunk));

		if (n == READ_REFUSED) /* cannot be told: taken as readable, as before the check */
			return true;
		if (n <= 0)
			return false;
		if (memchr(chunk, '\0', (size_t)n))
			return true;
		if ((size_t)n < sizeof(chunk))
			return false;
	}
	return false;
}

bool cap_strv_readable(char *const v[])
{
	for (size_t i = 0; v && i < ((size_t)1 << 20); i++) {
		char *p = NULL;
		const ssize_t n = read_at(&p, v + i, sizeof(p));

		if (n == READ_REFUSED)
			return true;
		if (n != (ssize_t)sizeof(p))
			return false;
		if (!p)
			return true;
		if (!cap_str_readable(p))
			return false;
	}
	return !v;
}

int64_t cap_timespec_ns_at(const struct timespec *ts)
{
	struct timespec t;

	if (!ts)
		return -1;
	if (read_at(&t, ts, sizeof(t)) != (ssize_t)sizeof(t))
		return -2;
	return cap_timespec_ns(&t, true);
}

uint64_t cap_mmsg_bytes(const struct mmsghdr *msgvec, int ret)
{
	uint64_t n = 0;

	/* the kernel wrote each sent or received message's msg_len: the memory is there */
	for (int i = 0; i < ret; i++)
		n += msgvec[i].msg_len;
	return n;
}

int64_t cap_utime_part(const struct timespec *times, int i, bool nsec, int ret)
{
	struct timespec t[2];

	if (!times)
		return nsec ? UTIME_NOW : 0;
	/* a failed call's times may be at no address (glibc refuses a NULL path first) */
	if (ret == 0)
		memcpy(t, times, sizeof(t));
	else if (read_at(t, times, sizeof(t)) != (ssize_t)sizeof(t))
		return nsec ? -1 : 0;
	if (nsec)
		return t[i].tv_nsec;
	/* the kernel ignores the seconds of UTIME_NOW and UTIME_OMIT: often left unset */
	return t[i].tv_nsec == UTIME_NOW || t[i].tv_nsec == UTIME_OMIT ? 0 : t[i].tv_sec;
}

/*
 * The calling thread's text read from the program for one argument (cap_link_text,
 * cap_str_at): each is put in its record before the next is read. Up to PATH_MAX bytes and
 * a mark; a path is under that, so cap_put_str's own mark counts right.
 */
static const char memory_ends[] = "...[memory ends]";
static _Thread_local char tls_text[PATH_MAX + sizeof(memory_ends)];

const char *cap_link_text(const char *buf, ssize_t ret)
{
	char *text = tls_text;
	size_t n = ret > 0 ? (size_t)ret : 0;

	if (n > PATH_MAX)
		n = PATH_MAX;
	if (n)
		memcpy(text, buf, n);
	text[n] = '\0';
	return text;
}

int64_t cap_sockopt_int(const void *optval, socklen_t optlen, int ret)
{
	int v;

	if (ret != 0 || !optval || optlen != sizeof(int))
		return -1;
	memcpy(&v, optval, sizeof(v));
	return v;
}

int64_t cap_off_at(const int64_t *off)
{
	return off ? *off : -1;
}

int64_t cap_timeval_us(const struct timeval *tv)
{
	return tv ? (int64_t)tv->tv_sec * 1000000 + tv->tv_usec : -1;
}

uint64_t cap_epoll_events(int op, const struct epoll_event *ev, int ret)
{
	return ret == 0 && (op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD) && ev ? ev->events : 0;
}

const char *cap_format(const char *fmt)
{
	return fmt && cap_in_rodata(fmt) ? fmt : CAP_FORMAT_BUILT;
}

const char *cap_wformat(const wchar_t *fmt)
{
	char *text = tls_text;
	size_t n = 0;

	if (!fmt || !cap_in_rodata(fmt))
		return CAP_FORMAT_BUILT;
	/* one past what cap_put_str keeps, so that it marks a longer format as cut */
	for (; fmt[n] && n <= CALL_MAX_STR; n++)
		text[n] = (uint32_t)fmt[n] < 0x80 ? (char)fmt[n] : '?';
	text[n] = '\0';
	return text;
}

uint64_t cap_wc_bytes(wint_t c)
{
	char mb[MB_LEN_MAX];
	mbstate_t st = {0};
	size_t n;

	if (c == WEOF)
		return 0;
	n = wcrtomb(mb, (wchar_t)c, &st);
	return n == (size_t)-1 ? 0 : n;
}

/* The head of glibc's struct _IO_wide_data (libio/libio.h), which <stdio.h> leaves opaque:
 * a wide stream's read pointers, unchanged since glibc 2.2. */
struct wide_head {
	wchar_t *read_ptr, *read_end, *read_base;
};

bool cap_wc_putback(FILE *stream, wint_t c)
{
#ifdef __GLIBC__
	const struct wide_head *w = stream ? (const void *)stream->_wide_data : NULL;

	return c != WEOF && w && w->read_ptr && w->read_ptr > w->read_base &&
	       (wint_t)w->read_ptr[-1] == c;
#else
	(void)stream;
	(void)c;
	return false;
#endif
}

bool cap_c_putback(FILE *stream, int c)
{
#ifdef __GLIBC__
	return c != EOF && stream && stream->_IO_read_ptr &&
	       stream->_IO_read_ptr > stream->_IO_read_base &&
	       (unsigned char)stream->_IO_read_ptr[-1] == (unsigned char)c;
#else
	(void)stream;
	(void)c;
	return false;
#endif
}

int64_t cap_ws_bytes(const wchar_t *s)
{
	mbstate_t st = {0};
	size_t n = wcsrtombs(NULL, &s, 0, &st);

	return n == (size_t)-1 ? 0 : (int64_t)n;
}

int cap_fd_refuse(void)
{
	errno = EBADF;
	return -1;
}

int cap_close_range(unsigned int first, unsigned int last, int flags)
{
	int own[2];
	unsigned int from = first;

	cap_fd_own_get(own);
	if (first > last) /* EINVAL, as the call says */
		return cap_real.close_range(first, last, flags);
	/* the ranges around the capture's descriptors, lowest first */
	for (int i = 0; i < 2; i++) {
		const unsigned int fd = (unsigned int)own[i];

		if (own[i] < 0 || fd < from || fd > last)
			continue;
		if (fd > from && cap_real.close_range(from, fd - 1, flags) < 0)
			return -1;
		if (fd == last)
			return 0;
		from = fd + 1;
	}
	return cap_real.close_range(from, last, flags);
}

void cap_closefrom(int lowfd)
{
	unsigned int from = lowfd < 0 ? 0 : (unsigned int)lowfd;
	int own[2];

	cap_fd_own_get(own);
	for (int i = 0; i < 2; i++) {
		const unsigned int fd = (unsigned int)own[i];

		if (own[i] < 0 || fd < from)
			continue;
		/* close_range missing (before Linux 5.9): each, as glibc's closefrom would */
		if (fd > from && (!cap_real.close_range || cap_real.close_range(from, fd - 1, 0) < 0))
			for (unsigned int k = from; k < fd; k++)
				cap_real.close((int)k);
		from = fd + 1;
	}
	cap_real.closefrom((int)from);
}

uint64_t cap_wprintf_bytes(int n, const wchar_t *fmt, va_list ap)
{
	wchar_t small[256], *ws = small;
	char mb[MB_LEN_MAX];
	mbstate_t st = {0};
	uint64_t bytes = 0;

	if (n <= 0)
		return 0;
	cap_tls_depth++; /* what formatting allocates is the capture's */
	if ((size_t)n >= sizeof(small) / sizeof(small[0]))
		ws = malloc(((size_t)n + 1) * sizeof(*ws));
	if (!ws || vswprintf(ws, (size_t)n + 1, fmt, ap) != n) {
		bytes = (uint64_t)n;
		goto out;
	}
	/* every character, a L'\0' that %lc wrote included: the stream wrote it too */
	for (int i = 0; i < n; i++) {
		size_t k = wcrtomb(mb, ws[i], &st);

		bytes += k == (size_t)-1 ? 0 : k;
	}
out:
	if (ws != small)
		free(ws);
	cap_tls_depth--;
	return bytes;
}

const char *cap_str_at(const char *p)
{
	char *text = tls_text;
	ssize_t n = read_at(text, p, PATH_MAX);

	if (n <= 0)
		return "(bad address)";
	if (!memchr(text, '\0', (size_t)n)) {
		/* no NUL where memory ends: say so, rather than pass for the whole string */
		if (n < PATH_MAX)
			memcpy(text + n, memory_ends, sizeof(memory_ends));
		else
			text[n] = '\0';
	}
	return text;
}

size_t cap_put_str(char *buf, size_t len, const char *s)
{
	size_t n = s ? strnlen(s, CALL_MAX_STR + 1) : 0;

	if (n <= CALL_MAX_STR) {
		memcpy(buf + len, s ? s : "", n);
		buf[len + n] = '\0';
		return len + n + 1;
	}
	memcpy(buf + len, s, CALL_MAX_STR);
	n = CALL_MAX_STR;
	n += (size_t)snprintf(buf + len + n, CAP_STR_BYTES - n, "...[+%zu bytes]",
			      strlen(s + CALL_MAX_STR));
	return len + n + 1;
}
