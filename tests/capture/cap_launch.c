/*
 * A launcher, linked -static so that the capture library never loads in it (check_fork.py
 * static_launcher): it writes "launcher <pid> <ppid>", forks N children at once, each of
 * which writes "child <pid>" and execs PROG ARGS... (a dynamic program, which the capture
 * does load in), then waits for all of them. Every line is one write() to stdout, so that
 * the lines of the processes do not mix. Exits 0 when every child exited with status 0.
 * Usage: cap_launch N PROG [ARGS...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void say(const char *line)
{
	if (write(STDOUT_FILENO, line, strlen(line)) < 0)
		_exit(4);
}

int main(int argc, char **argv)
{
	char line[64];
	int n, status, bad = 0;

	if (argc < 3 || (n = atoi(argv[1])) <= 0) {
		fprintf(stderr, "usage: cap_launch N PROG [ARGS...]\n");
		return 2;
	}
	snprintf(line, sizeof(line), "launcher %d %d\n", (int)getpid(), (int)getppid());
	say(line);
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid < 0)
			return 3;
		if (pid == 0) {
			snprintf(line, sizeof(line), "child %d\n", (int)getpid());
			say(line);
			execvp(argv[2], argv + 2);
			_exit(127);
		}
	}
	while (wait(&status) > 0)
		bad += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
	return bad != 0;
}
