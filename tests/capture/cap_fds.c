/*
 * A program that walks every descriptor up to its limit, as daemons and closefrom() loops do
 * (check_fds.py compares what it sees traced and untraced). It allocates first, so that the
 * capture has made whatever descriptors it keeps, then: sets close-on-exec and clears the
 * status flags of every descriptor from 3 up to RLIMIT_NOFILE with fcntl() ("fcntl N": those
 * it could, as daemons do before an exec), closes every descriptor from 3 up to
 * RLIMIT_NOFILE with close() ("closed N": those that were open), dup2()s a descriptor onto
 * every number up to the limit and closes it again ("dup2 N": those that succeeded), opens
 * FILE read-write until EMFILE ("opened N errno E"), allocates again (the capture unwinds),
 * checks that every descriptor it opened is still open at offset 0 and that FILE is still
 * empty ("intact N": those that are), with close_range() closes them all ("range R"), and
 * opens FILE until EMFILE again ("reopened N"); then with closefrom(3) ("refilled N").
 * Usage: cap_fds FILE
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
int close_range(unsigned int first, unsigned int last, int flags);
#endif

/* Allocations from a few call sites, each freed: the capture records their backtraces. */
static void __attribute__((noinline)) churn(int n)
{
	for (int i = 0; i < n; i++) {
		void *volatile p = malloc(16 + (size_t)i % 512);

		free(p);
	}
}

static int fds[65536]; /* the descriptors it opened */

int main(int argc, char **argv)
{
	struct rlimit lim;
	struct stat st;
	int limit, flagged = 0, closed = 0, duped = 0, opened = 0, intact = 0, err, fd;

	if (argc != 2 || getrlimit(RLIMIT_NOFILE, &lim) < 0 || lim.rlim_cur > 65536) {
		fprintf(stderr, "usage: cap_fds FILE (with RLIMIT_NOFILE at most 65536)\n");
		return 2;
	}
	limit = (int)lim.rlim_cur;
	churn(100);
	for (fd = 3; fd < limit; fd++)
		flagged += fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 && fcntl(fd, F_SETFL, 0) == 0;
	printf("fcntl %d\n", flagged);
	for (fd = 3; fd < limit; fd++)
		closed += close(fd) == 0;
	for (fd = 3; fd < limit; fd++) {
		if (dup2(STDERR_FILENO, fd) == fd) {
			duped++;
			close(fd);
		}
	}
	while ((fd = open(argv[1], O_RDWR)) >= 0)
		fds[opened++] = fd;
	err = errno;
	churn(1000);
	for (int i = 0; i < opened; i++)
		intact += lseek(fds[i], 0, SEEK_CUR) == 0;
	printf("closed %d\ndup2 %d\nopened %d errno %d\nintact %d\n", closed, duped, opened, err,
	       intact);
	printf("range %d\n", opened ? close_range((unsigned int)fds[0], ~0U, 0) : -1);
	for (fd = 0; open(argv[1], O_RDONLY) >= 0; fd++)
		;
	churn(100);
	printf("reopened %d\n", fd);
	closefrom(3);
	for (fd = 0; open(argv[1], O_RDONLY) >= 0; fd++)
		;
	churn(100);
	printf("refilled %d\n", fd);
	printf("size %lld\n", stat(argv[1], &st) == 0 ? (long long)st.st_size : -1LL);
	return 0;
}
