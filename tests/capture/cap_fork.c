/*
 * A program that forks: for `tracefs record` process following (check_fork.py). The parent
 * writes DIR/parent, forks child 1 (writes DIR/child1 twice), waits, forks child 2 (writes
 * DIR/child2 three times, then aborts when asked to crash), waits, writes DIR/parent again.
 * With "exec", child 1 execs `cat DIR/parent` instead of writing; with "system", the
 * parent finally runs system("cat DIR/child2 >/dev/null") (posix_spawn inside glibc). Each
 * open names its file, so the test knows which rank did what.
 * With "rawexec", child 1 writes DIR/child1 once then execs /bin/cat DIR/parent through the
 * raw system call, past every interposer and with the environment it inherited.
 * Usage: cap_fork DIR [crash] [exec] [rawexec] [vfork] [system]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void write_n(const char *dir, const char *name, int n)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd < 0)
		exit(3);
	for (int i = 0; i < n; i++)
		if (write(fd, name, strlen(name)) < 0)
			exit(4);
	close(fd);
}

static int has(int argc, char **argv, const char *word)
{
	for (int i = 2; i < argc; i++)
		if (!strcmp(argv[i], word))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";
	char path[4096];
	int status;
	pid_t pid;

	write_n(dir, "parent", 1);
	pid = has(argc, argv, "vfork") ? vfork() : fork();
	if (pid == 0) {
		if (has(argc, argv, "exec")) {
			snprintf(path, sizeof(path), "%s/parent", dir);
			execlp("cat", "cat", path, (char *)NULL);
			_exit(127);
		}
		if (has(argc, argv, "rawexec")) {
			char *cargv[] = {"cat", path, NULL};

			write_n(dir, "child1", 1);
			snprintf(path, sizeof(path), "%s/parent", dir);
			syscall(SYS_execve, "/bin/cat", cargv, environ);
			_exit(127);
		}
		write_n(dir, "child1", 2);
		exit(0);
	}
	waitpid(pid, &status, 0);
	pid = fork();
	if (pid == 0) {
		write_n(dir, "child2", 3);
		if (has(argc, argv, "crash"))
			abort();
		exit(0);
	}
	waitpid(pid, &status, 0);
	write_n(dir, "parent", 1);
	if (has(argc, argv, "system")) {
		snprintf(path, sizeof(path), "cat %s/child2 >/dev/null", dir);
		if (system(path) != 0)
			return 5;
	}
	return 0;
}
