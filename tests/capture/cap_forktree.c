/*
 * A fork tree started all at once, for check_forktree.py: the program forks 4 children
 * back to back, each of which forks 2 grandchildren back to back, then spawns itself twice
 * (posix_spawn); every process then does its own number of writes to /dev/null (its tag:
 * child k 1 + k, grandchild j of child k 10 + 2k + j, spawned s 30 + s), each a malloc'd
 * buffer, so that a process is known by its events whatever rank it has. The children race
 * from the start: the order they begin in changes from run to run, their ranks must not.
 *
 *   cap_forktree              the tree
 *   cap_forktree spawned S    a spawned process
 */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N_CHILDREN 4
#define N_GRANDCHILDREN 2
#define N_SPAWNED 2

extern char **environ;

static void work(int tag)
{
	int fd = open("/dev/null", O_WRONLY);

	for (int i = 0; i < tag; i++) {
		char *buf = malloc(64);

		if (buf) {
			memset(buf, 'x', 64);
			if (write(fd, buf, 64) < 0)
				perror("write");
			free(buf);
		}
	}
	close(fd);
}

static void wait_all(void)
{
	while (wait(NULL) > 0)
		;
}

static void child(int k)
{
	for (int j = 0; j < N_GRANDCHILDREN; j++) {
		pid_t pid = fork();

		if (pid == 0) {
			work(10 + 2 * k + j);
			_exit(0);
		}
	}
	work(1 + k);
	wait_all();
	_exit(0);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "spawned")) {
		work(30 + atoi(argv[2]));
		return 0;
	}
	for (int k = 0; k < N_CHILDREN; k++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0)
			child(k);
	}
	for (int s = 0; s < N_SPAWNED; s++) {
		char num[16];
		char *args[] = {argv[0], "spawned", num, NULL};
		pid_t pid;

		snprintf(num, sizeof(num), "%d", s);
		if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ) != 0) {
			perror("posix_spawn");
			return 1;
		}
	}
	wait_all();
	return 0;
}
