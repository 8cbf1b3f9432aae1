/*
 * A program whose calls reach files outside any scratch directory in every way a path can:
 * an absolute path under /dev/shm, a relative path climbing out with "..", a symbolic link
 * to an outside directory, a chdir above the start, a descriptor of an outside directory,
 * rename, unlink, truncate, mkdir and fopen of outside files. check_replay_safe.py records
 * it, then checks that its replay proxy touches none of those files (they hold the user's
 * data when the proxy runs) and does its work under the proxy's scratch directory.
 * Usage: cap_escape SHM OUT, run in TOP/mid/work with OUT = TOP/mid/out (the relative
 * paths below assume that layout); SHM: a directory under /dev/shm.
 */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/stat.h>

/* @dir/@name, in one of two buffers (rename takes two paths) */
static const char *in(const char *dir, const char *name)
{
	static char path[2][4096];
	static unsigned int k;
	char *p = path[k++ % 2];

	snprintf(p, sizeof(path[0]), "%s/%s", dir, name);
	return p;
}

static void put(int fd)
{
	if (fd >= 0) {
		if (write(fd, "recorded\n", 9) != 9)
			perror("write");
		close(fd);
	}
}

int main(int argc, char **argv)
{
	const int w = O_WRONLY | O_CREAT | O_TRUNC;
	int dfd, fd;
	FILE *f;
	char buf[256];

	if (argc != 3)
		return 2;
	put(open(in(argv[1], "victim"), w, 0644));
	unlink(in(argv[1], "gone"));
	rename(in(argv[1], "ren1"), in(argv[1], "ren2"));
	if (truncate(in(argv[1], "cut"), 0) != 0)
		perror("truncate");
	mkdir(in(argv[1], "newdir"), 0755);
	f = fopen(in(argv[1], "fvictim"), "w");
	if (f) {
		fputs("recorded\n", f);
		fclose(f);
	}
	put(open("../out/rel", w, 0644));
	if (symlink(argv[2], "lnk") != 0)
		perror("symlink");
	put(open("lnk/through", w, 0644));
	if (symlink(argv[2], "lnk2") != 0 || truncate("lnk2/through2", 0) != 0)
		perror("lnk2");
	/* links no path of the trace passes through, which the proxy makes as links */
	if (symlink(argv[2], "lnk3") != 0 || symlink("../out", "lnk4") != 0)
		perror("lnk3");
	dfd = open(argv[2], O_RDONLY | O_DIRECTORY);
	put(openat(dfd, "viafd", w, 0644));
	close(dfd);
	/* reads the proxy makes as they are: the kernel's files and a harmless device */
	fd = open("/proc/self/status", O_RDONLY);
	if (fd >= 0) {
		if (read(fd, buf, sizeof(buf)) < 0)
			perror("read");
		close(fd);
	}
	put(open("/dev/null", O_WRONLY));
	if (chdir("..") != 0 || chdir("..") != 0)
		perror("chdir");
	put(open("mid/out/deep", w, 0644));
	return 0;
}
