/*
 * Files written whole or not at all (writer_i.h, tfs_file_write()): a temporary file beside
 * the target, synced and renamed over it, removed when anything fails. The one way tracefs
 * saves a trace, whether the writer streams it (wsave.c), a merge made it in memory
 * (`tracefs merge`) or the MPI ranks did (capture/mpi). The temporary file is hidden
 * (".NAME.tmp.XXXXXX"), so that a glob of the saved files (`run.trace.*`) never takes one
 * in half-written. A file can also be reserved before it is written (tfs_file_reserve()): it
 * is then an empty file its writer holds locked, which readers meet as one still being saved
 * (reader.c, -EBUSY). It knows nothing of what is written.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tfs/writer.h"
#include "writer_i.h"

/* A new name for a temporary file beside @path, "DIR/.BASE.tmp.XXXXXX", or NULL (ENOMEM). */
static char *tmp_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	size_t n = strlen(path) + 16;
	char *tmp = malloc(n);

	if (tmp)
		snprintf(tmp, n, "%.*s.%s.tmp.XXXXXX", (int)(base - path), path, base);
	return tmp;
}

int wfile_open(struct wfile *f, const char *path)
{
	int rc;

	f->fd = -1;
	f->path = path;
	f->tmp = tmp_name(path);
	if (!f->tmp)
		return -ENOMEM;
	f->fd = mkostemp(f->tmp, O_CLOEXEC);
	if (f->fd < 0) {
		rc = -errno;
		goto err_free_tmp;
	}
	if (fchmod(f->fd, 0644) < 0) {
		rc = -errno;
		goto err_unlink;
	}
	return 0;

err_unlink:
	close(f->fd);
	unlink(f->tmp);
	f->fd = -1;
err_free_tmp:
	free(f->tmp);
	f->tmp = NULL;
	return rc;
}

int wfile_commit(struct wfile *f)
{
	int rc = fsync(f->fd) < 0 ? -errno : 0;

	if (close(f->fd) < 0 && rc == 0)
		rc = -errno;
	f->fd = -1;
	if (rc == 0 && rename(f->tmp, f->path) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(f->tmp);
	free(f->tmp);
	f->tmp = NULL;
	return rc;
}

void wfile_abort(struct wfile *f)
{
	if (f->fd >= 0)
		close(f->fd);
	if (f->tmp)
		unlink(f->tmp);
	free(f->tmp);
	f->tmp = NULL;
	f->fd = -1;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int tfs_file_write(const char *path, const void *data, size_t len)
{
	struct wfile f;
	int rc = wfile_open(&f, path);

	if (rc < 0)
		return rc;
	rc = write_all(f.fd, data, len);
	if (rc < 0) {
		wfile_abort(&f);
		return rc;
	}
	return wfile_commit(&f);
}

int tfs_file_reserve(const char *path)
{
	char *tmp = tmp_name(path);
	int fd, rc;

	if (!tmp)
		return -ENOMEM;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		goto err_free_tmp;
	}
	/* locked before it has its name: no reader ever sees it unlocked while reserved */
	if (flock(fd, LOCK_EX) < 0 || fchmod(fd, 0644) < 0 || rename(tmp, path) < 0) {
		rc = -errno;
		goto err_unlink;
	}
	free(tmp);
	return fd;

err_unlink:
	close(fd);
	unlink(tmp);
err_free_tmp:
	free(tmp);
	return rc;
}

void tfs_file_release(int fd, const char *path)
{
	struct stat mine, now;

	if (fd < 0)
		return;
	/* still the empty file reserved, not the trace written over it since */
	if (fstat(fd, &mine) == 0 && stat(path, &now) == 0 && mine.st_dev == now.st_dev &&
	    mine.st_ino == now.st_ino)
		unlink(path);
	close(fd);
}
