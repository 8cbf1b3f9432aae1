/*
 * Which clock stamps a traced program's events, seen from inside it: this program defines
 * clock_gettime itself (exported: -rdynamic), so the capture's calls to it come here and are
 * counted. It makes N lseek calls on /dev/null, traced as I/O, and prints how many
 * clock_gettime calls came meanwhile: two or more per call when the events are stamped by
 * clock_gettime, a few (a thread's anchors) when the TSC stamps them (check_capture.py).
 * Usage: cap_clock N
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static atomic_ulong n_calls;

/* The system call, not the vDSO: slower, but nothing to look up. */
int clock_gettime(clockid_t id, struct timespec *ts)
{
	atomic_fetch_add_explicit(&n_calls, 1, memory_order_relaxed);
	return (int)syscall(SYS_clock_gettime, id, ts);
}

int main(int argc, char **argv)
{
	long n = argc == 2 ? strtol(argv[1], NULL, 10) : 0;
	unsigned long before;
	int fd = open("/dev/null", O_RDONLY);

	if (n <= 0 || fd < 0) {
		fprintf(stderr, "usage: cap_clock N\n");
		return 2;
	}
	before = atomic_load(&n_calls);
	for (long i = 0; i < n; i++)
		lseek(fd, i, SEEK_SET);
	printf("clock_gettime calls: %lu\n", atomic_load(&n_calls) - before);
	close(fd);
	return 0;
}
