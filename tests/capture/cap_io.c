/*
 * A program with exactly known allocation, I/O and thread calls, for the interposers of
 * libtfscapture.so under `tracefs record` (check_interpose.py holds the expectation, written
 * from this description). It prints nothing and links nothing of tracefs.
 *
 *   cap_io calls DIR      the calls below, in this order, on files in DIR
 *   cap_io threads DIR N  N threads, each 10 x {malloc(32), write 16 bytes, free}
 *   cap_io loop N         N x {malloc(64), free} (the benchmark's allocation loop)
 *   cap_io errno          exits 3 if a traced call changes errno where the real one would not
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static char buf[8192];
/* Sizes the compiler cannot see: fortified builds then call __read_chk, __pread64_chk... */
static volatile size_t g_4k = 4096, g_512 = 512;
static char path[4096];

static const char *in_dir(const char *dir, const char *name)
{
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

/* The compiler may drop an allocation whose result goes nowhere: make each one escape. */
static void *keep(void *p)
{
	__asm__ volatile("" : "+r"(p) : : "memory");
	return p;
}

static void allocs(void)
{
	void *p[100], *q;

	for (int i = 0; i < 100; i++)
		p[i] = keep(malloc(64));
	for (int i = 0; i < 100; i++)
		free(p[i]);
	q = keep(calloc(10, 100));
	q = keep(realloc(q, 2000));
	free(q);
	if (posix_memalign(&q, 64, 1000) == 0)
		free(keep(q));
	free(keep(aligned_alloc(128, 256)));
	free(keep(memalign(32, 100)));
	free(keep(NULL));
}

static void descriptors(const char *dir)
{
	struct iovec iov[2] = {{buf, 10}, {buf + 10, 20}};
	int fd;

	fd = open(in_dir(dir, "data"), O_RDWR | O_CREAT | O_TRUNC, 0600);
	for (int i = 0; i < 10; i++)
		write(fd, buf, 4096);
	lseek(fd, 0, SEEK_SET);
	for (int i = 0; i < 11; i++)
		read(fd, buf, g_4k); /* the 11th is at the end of the file: 0 */
	for (int i = 0; i < 4; i++)
		pread(fd, buf, g_512, (off_t)i * 4096);
	pwrite(fd, buf, 100, 40960);
	ftruncate(fd, 8192);
	fsync(fd);
	fdatasync(fd);
	close(fd);
	read(fd, buf, 1); /* EBADF on a descriptor no longer open */

	fd = creat(in_dir(dir, "c"), 0644);
	write(fd, buf, 10);
	close(fd);

	fd = open(in_dir(dir, "v"), O_RDWR | O_CREAT, 0600);
	writev(fd, iov, 2);
	lseek(fd, 0, SEEK_SET);
	readv(fd, iov, 2);
	close(fd);

	fd = openat(AT_FDCWD, in_dir(dir, "data"), O_RDONLY);
	close(fd);
}

static void streams(const char *dir)
{
	char other[4096];
	FILE *fp;
	int fd;

	fp = fopen(in_dir(dir, "text"), "w");
	fwrite(buf, 1, 1000, fp);
	fwrite(buf, 100, 3, fp);
	fflush(fp);
	fseek(fp, 0, SEEK_END);
	fclose(fp);

	fp = fopen(in_dir(dir, "data"), "r");
	fread(buf, g_4k, 2, fp);
	fclose(fp);

	fp = fopen(in_dir(dir, "missing/x"), "r"); /* ENOENT */

	fd = open(in_dir(dir, "c"), O_RDONLY);
	fp = fdopen(fd, "r");
	fclose(fp);

	snprintf(other, sizeof(other), "%s/text2", dir);
	rename(in_dir(dir, "text"), other);
	unlink(other);
	unlink(other); /* ENOENT */
}

static int g_fd;

static void *worker(void *arg)
{
	for (int i = 0; i < 10; i++) {
		void *p = keep(malloc(32));

		write(g_fd, buf, 16);
		free(p);
	}
	return arg;
}

static int threads(const char *dir, int n)
{
	pthread_t th[64];

	if (n < 1 || n > 64)
		return 2;
	g_fd = open(in_dir(dir, "t"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
	for (int i = 0; i < n; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	close(g_fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "calls")) {
		allocs();
		descriptors(argv[2]);
		streams(argv[2]);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "threads"))
		return threads(argv[2], atoi(argv[3]));
	if (argc == 2 && !strcmp(argv[1], "errno")) {
		errno = 77;
		free(keep(malloc(8)));
		if (errno != 77)
			return 3;
		if (write(-1, buf, 1) != -1 || errno != EBADF)
			return 3;
		errno = 78;
		if (close(open("/dev/null", O_RDONLY)) != 0 || errno != 78)
			return 3;
		if (fopen("/nonexistent/x", "r") || errno != ENOENT)
			return 3;
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "loop")) {
		long n = atol(argv[2]);

		for (long i = 0; i < n; i++) {
			free(keep(malloc(64)));
		}
		return 0;
	}
	return 2;
}
