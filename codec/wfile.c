/*
 * Files written whole or not at all (writer_i.h, tfs_file_write()): a temporary file beside
 * the target, synced and renamed over it, removed when anything fails. The one way tracefs
 * saves a trace, whether the writer streams it (wsave.c), a merge made it in memory
 * (`tracefs merge`) or the MPI ranks did (capture/mpi). It knows nothing of what is written.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "writer_i.h"

int wfile_open(struct wfile *f, const char *path)
{
	size_t n = strlen(path) + 16;
	int rc;

	f->fd = -1;
	f->path = path;
	f->tmp = malloc(n);
	if (!f->tmp)
		return -ENOMEM;
	snprintf(f->tmp, n, "%s.tmp.XXXXXX", path);
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
