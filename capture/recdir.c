/*
 * A recording's private directory: every `tracefs record` makes its own with mkdtemp,
 * mode 0700, next to its prefix ($TFS_SPOOL, else /dev/shm/tracefs: /dev/shm/tracefs.Ab3xY9),
 * and its processes keep their spools there under the names of spool_i.h. Another user can
 * neither guess the name before it exists (no name to squat) nor open, add or remove
 * anything in it afterwards, and what the recorder takes in is checked to be a regular file
 * of its own user (cap_spool_attach). The first spool holds a lock while a recorder lives;
 * the directories of recorders killed before they could clean up are swept by the next
 * recording with the same prefix, which removes only its own user's files of spool names.
 * This file knows directories and names, not what a spool holds (spool.c, recprocs.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "recdir_i.h"
#include "spool_i.h"

/* younger directories may be a recorder's that has not locked its first spool yet */
#define STALE_AFTER_S 10
#define TEMPLATE ".XXXXXX"

int cap_recdir_prefix(char *buf, size_t cap)
{
	const char *env = getenv("TFS_SPOOL");
	const char *p = env && *env ? env : RECDIR_DEFAULT_PREFIX;
	char cwd[PATH_MAX];

	if (p[0] == '/')
		return (size_t)snprintf(buf, cap, "%s", p) < cap ? 0 : -ENAMETOOLONG;
	if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	if (!strncmp(p, "./", 2))
		p += 2;
	return (size_t)snprintf(buf, cap, "%s%s%s", cwd, strcmp(cwd, "/") ? "/" : "", p) < cap
		       ? 0
		       : -ENAMETOOLONG;
}

/* Whether @name is a spool's name in a recording's directory (spool_i.h). */
static bool spool_name(const char *name)
{
	char save[sizeof(SPOOL_FIRST SPOOL_SAVE_SUFFIX)];
	bool aside;

	snprintf(save, sizeof(save), "%s%s", SPOOL_FIRST, SPOOL_SAVE_SUFFIX);
	return !strcmp(name, SPOOL_FIRST) || !strcmp(name, save) ||
	       cap_spool_is_child_name(name, &aside);
}

/* Remove the regular files of this user named as spools from directory @dfd; count them. */
static void clean(int dfd, uint32_t *n, uint64_t *bytes)
{
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d))) {
		struct stat st;

		if (!spool_name(e->d_name) ||
		    fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
		    unlinkat(dfd, e->d_name, 0) < 0)
			continue;
		++*n;
		*bytes += (uint64_t)st.st_blocks * 512;
	}
	closedir(d);
}

/* @name is `<anything>.XXXXXX`, as mkdtemp makes a recording's directory (any prefix). */
static bool recdir_name(const char *name)
{
	static const char alnum[] = "abcdefghijklmnopqrstuvwxyz"
				    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	const size_t x = strlen(TEMPLATE) - 1, n = strlen(name);

	return n > x + 1 && name[n - x - 1] == '.' && strspn(name + n - x, alnum) == x;
}

/*
 * Whether directory @dfd is a dead recorder's: it holds a first spool of this user, older
 * than STALE_AFTER_S, on which nobody holds the lock.
 */
static bool stale(int dfd)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	uint32_t magic = 0;
	struct stat st;
	bool dead;
	int fd;

	fd = openat(dfd, SPOOL_FIRST, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	dead = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	       st.st_mtime <= time(NULL) - STALE_AFTER_S &&
	       pread(fd, &magic, sizeof(magic), 0) == (ssize_t)sizeof(magic) &&
	       magic == SPOOL_MAGIC && fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK;
	close(fd);
	return dead;
}

void cap_recdir_sweep(const char *prefix, uint32_t *n_files, uint64_t *bytes)
{
	const char *slash = strrchr(prefix, '/');
	char parent[PATH_MAX];
	struct dirent *e;
	DIR *d;

	*n_files = 0;
	*bytes = 0;
	if (!slash || (size_t)snprintf(parent, sizeof(parent), "%.*s",
				       (int)(slash == prefix ? 1 : slash - prefix),
				       prefix) >= sizeof(parent))
		return;
	d = opendir(parent);
	while (d && (e = readdir(d))) {
		struct stat st;
		int dfd;

		if (!recdir_name(e->d_name))
			continue;
		dfd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			continue;
		/* a directory made by mkdtemp for this user, as recordings make them */
		if (fstat(dfd, &st) == 0 && st.st_uid == geteuid() &&
		    (st.st_mode & 07777) == 0700 && stale(dfd)) {
			clean(dfd, n_files, bytes);
			(void)unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
		}
		close(dfd);
	}
	if (d)
		closedir(d);
}

int cap_recdir_new(const char *prefix, struct cap_recdir **out)
{
	struct cap_recdir *d = calloc(1, sizeof(*d));
	int rc = -ENOMEM;

	*out = NULL;
	if (!d)
		return -ENOMEM;
	d->lock_fd = -1;
	d->path = malloc(strlen(prefix) + sizeof(TEMPLATE));
	if (!d->path)
		goto err_free;
	strcat(strcpy(d->path, prefix), TEMPLATE);
	/* a new name, mode 0700: nobody else can look in, let alone add or take away */
	if (!mkdtemp(d->path)) {
		rc = -errno;
		goto err_free;
	}
	if (asprintf(&d->first, "%s/%s", d->path, SPOOL_FIRST) < 0) {
		d->first = NULL;
		rmdir(d->path);
		goto err_free;
	}
	*out = d;
	return 0;

err_free:
	free(d->path);
	free(d);
	return rc;
}

int cap_recdir_lock(struct cap_recdir *d)
{
	struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
	int fd = open(d->first, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	d->lock_fd = fd; /* the lock lasts as long as a descriptor of this open file */
	return 0;
}

void cap_recdir_free(struct cap_recdir *d, bool remove)
{
	uint32_t n = 0;
	uint64_t bytes = 0;

	if (!d)
		return;
	if (remove) {
		int dfd = open(d->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (dfd >= 0) {
			clean(dfd, &n, &bytes);
			close(dfd);
		}
		rmdir(d->path);
	}
	if (d->lock_fd >= 0)
		close(d->lock_fd);
	free(d->first);
	free(d->path);
	free(d);
}
