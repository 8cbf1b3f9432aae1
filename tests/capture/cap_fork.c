/*
 * A program that forks: for `tracefs record` process following (check_fork.py). The parent
 * writes DIR/parent, forks child 1 (writes DIR/child1 twice, the name in a block it
 * allocates in main), waits, forks child 2 (writes DIR/child2 three times, then aborts when
 * asked to crash), waits, writes DIR/parent again. With "exec", child 1 execs
 * `cat DIR/parent` instead of writing, allocating nothing before; with "system", the
 * parent finally runs system("cat DIR/child2 >/dev/null") (posix_spawn inside glibc). Each
 * open names its file, so the test knows which rank did what.
 * With "rawexec", child 1 writes DIR/child1 once then execs /bin/cat DIR/parent through the
 * raw system call, past every interposer and with the environment it inherited.
 * With "pidreuse", the parent then forks child A (writes DIR/childA twice), reaps it and
 * makes a process B with A's pid (clone3 with set_tid: root only; exit 77 when refused),
 * which execs /bin/cat DIR/parent through the raw system call, inheriting the parent's
 * recording state untouched; the recorder, our parent, is stopped from before A begins
 * until B has ended, so that A's spool is still unread when B takes the pid. With
 * "pidreuse" and "late" it is stopped only once it has mapped A's spool. With "forkreuse"
 * B is forked instead (fork() after setting /proc/sys/kernel/ns_last_pid, root only,
 * retried until B has A's pid), and writes DIR/childB once: the clash is met in the fork
 * handler. A and B begin 30 ms apart: the start times /proc gives have a 10 ms resolution.
 * With "openrace" it does only what open_race() says.
 * With "badexec" it does only what bad_exec() says. With "noreadv" it first refuses itself
 * process_vm_readv (a seccomp filter: EPERM, as some container profiles do), then does as
 * with "exec".
 * Usage: cap_fork DIR [crash] [exec] [rawexec] [vfork] [system] [pidreuse [late]]
 *        [forkreuse] [noreadv] | DIR openrace | DIR badexec
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
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

static void sleep_ms(long ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&t, &t) < 0 && errno == EINTR)
		;
}

/* Our parent, if it is `tracefs record` (which the pidreuse case stops and resumes). */
static pid_t recorder(void)
{
	char path[64], comm[64] = "";
	pid_t pp = getppid();
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pp);
	f = fopen(path, "r");
	if (!f || !fgets(comm, sizeof(comm), f))
		comm[0] = '\0';
	if (f)
		fclose(f);
	return strcmp(comm, "tracefs\n") == 0 ? pp : -1;
}

/* Wait until process @rec maps @path (the recorder has taken that spool in). */
static int wait_mapped(pid_t rec, const char *path)
{
	char maps[64], line[4096 + 256];

	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)rec);
	for (int i = 0; i < 1000; i++) {
		FILE *f = fopen(maps, "r");
		int found = 0;

		while (f && !found && fgets(line, sizeof(line), f)) {
			char *p = strstr(line, path);

			found = p && (p[strlen(path)] == '\n' || p[strlen(path)] == ' ');
		}
		if (f)
			fclose(f);
		if (found)
			return 0;
		sleep_ms(10);
	}
	return -1;
}

/* Fork a process whose pid is @want (its pid, or -1): B of forkreuse. */
static pid_t fork_as(const char *dir, pid_t want)
{
	for (int tries = 0; tries < 20; tries++) {
		int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY);
		char buf[32];
		int len = snprintf(buf, sizeof(buf), "%d", (int)want - 1);
		pid_t b;

		if (fd < 0 || write(fd, buf, (size_t)len) != len) {
			fprintf(stderr, "cap_fork forkreuse: ns_last_pid: %s\n", strerror(errno));
			if (fd >= 0)
				close(fd);
			return -1;
		}
		close(fd);
		b = fork();
		if (b == 0) {
			if (getpid() != want)
				_exit(0); /* another process took the pid first: try again */
			write_n(dir, "childB", 1);
			exit(0);
		}
		if (b == want)
			return b;
		waitpid(b, NULL, 0);
	}
	return -1;
}

static int pid_reuse(const char *dir, int late, int forked)
{
	char path[4096], *cargv[] = {"cat", path, NULL};
	pid_t rec = recorder(), a, b;
	int go[2], status;
	struct clone_args ca = {.exit_signal = SIGCHLD, .set_tid_size = 1};

	if (rec < 0) {
		fprintf(stderr, "cap_fork pidreuse: the parent is not tracefs record\n");
		return 6;
	}
	if (pipe(go) < 0)
		return 7;
	snprintf(path, sizeof(path), "%s/parent", dir);
	if (!late)
		kill(rec, SIGSTOP);
	a = fork();
	if (a == 0) {
		char c;

		write_n(dir, "childA", 2);
		close(go[1]);
		if (read(go[0], &c, 1) < 0)
			_exit(8);
		exit(0);
	}
	close(go[0]);
	if (late) {
		char spool[4096];

		snprintf(spool, sizeof(spool), "%s.%d", getenv("TFS_SPOOL") ? getenv("TFS_SPOOL") : "?",
			 (int)a);
		if (wait_mapped(rec, spool) < 0) {
			fprintf(stderr, "cap_fork pidreuse: the recorder never mapped %s\n", spool);
			return 10;
		}
		kill(rec, SIGSTOP);
	}
	close(go[1]);
	waitpid(a, &status, 0);
	sleep_ms(30);
	if (forked) {
		b = fork_as(dir, a);
		if (b > 0)
			waitpid(b, &status, 0);
		kill(rec, SIGCONT);
		return b > 0 ? 0 : 77;
	}
	ca.set_tid = (uint64_t)(uintptr_t)&a;
	b = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
	if (b == 0) {
		syscall(SYS_execve, "/bin/cat", cargv, environ);
		syscall(SYS_exit, 127);
	}
	if (b < 0) {
		fprintf(stderr, "cap_fork pidreuse: clone3 with set_tid: %s\n", strerror(errno));
		kill(rec, SIGCONT);
		return 77;
	}
	waitpid(b, &status, 0);
	kill(rec, SIGCONT);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 9;
}

/*
 * openrace: child A (writes DIR/childA twice) runs until the recorder, held by the test's
 * hold_open.c between its stat() and its open() of A's spool, says so in DIR/held; then A
 * ends, B is forked with A's pid (writes DIR/childB once; its fork handler moves A's spool
 * aside and makes its own under the name), and DIR/go lets the recorder's open go on: it
 * opens B's spool where it stat()ed A's.
 */
static int open_race(const char *dir)
{
	char held[4096], go[4096];
	int pipefd[2], status, fd, i;
	pid_t a, b = -1;

	snprintf(held, sizeof(held), "%s/held", dir);
	snprintf(go, sizeof(go), "%s/go", dir);
	if (pipe(pipefd) < 0)
		return 7;
	a = fork();
	if (a == 0) {
		char c;

		write_n(dir, "childA", 2);
		close(pipefd[1]);
		if (read(pipefd[0], &c, 1) < 0)
			_exit(8);
		exit(0);
	}
	close(pipefd[0]);
	for (i = 0; i < 6000 && access(held, F_OK) != 0; i++)
		sleep_ms(10);
	close(pipefd[1]);
	waitpid(a, &status, 0);
	if (i < 6000) {
		sleep_ms(30);
		b = fork_as(dir, a);
		if (b > 0)
			waitpid(b, &status, 0);
	} else {
		fprintf(stderr, "cap_fork openrace: the recorder never held A's spool open\n");
	}
	fd = open(go, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	return i == 6000 ? 10 : b > 0 ? 0 : 77;
}

/* process_vm_readv refused with EPERM from now on, in this process and its children. */
static int refuse_readv(void)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		return -1;
	return 0;
}

/*
 * exec and spawn given pointers that are no address, each refused with EFAULT (ENOENT for
 * a path that does not exist), printed as `NAME rc errno`: execve of a path at address 8;
 * execve of /nonexistent with an argv whose second string is at address 8, with an argv at
 * address 8, with an environment at address 8; posix_spawn of a path at address 8 (its
 * error number returned, or the child's exit when this glibc lets it start). The program
 * goes on to exit 0: traced, it must do the same.
 */
static int bad_exec(void)
{
	char *volatile nowhere = (char *)(uintptr_t)8;
	char *bad_argv[] = {"x", nowhere, NULL}, *ok_argv[] = {"x", NULL};
	char *const *volatile no_v = (char *const *)(uintptr_t)8;
	int rc, status;
	pid_t pid;

	rc = execve(nowhere, ok_argv, environ);
	printf("execve-path %d %d\n", rc, errno);
	rc = execve("/nonexistent", bad_argv, environ);
	printf("execve-arg %d %d\n", rc, errno);
	rc = execve("/nonexistent", no_v, environ);
	printf("execve-argv %d %d\n", rc, errno);
	rc = execve("/bin/true", ok_argv, no_v);
	printf("execve-envp %d %d\n", rc, errno);
	rc = posix_spawn(&pid, nowhere, NULL, NULL, ok_argv, environ);
	if (rc == 0)
		waitpid(pid, &status, 0);
	printf("posix_spawn %s\n", rc ? "refused" : "started");
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";
	char path[4096], *name;
	int status;
	pid_t pid;

	if (has(argc, argv, "openrace"))
		return open_race(dir);
	if (has(argc, argv, "badexec"))
		return bad_exec();
	if (has(argc, argv, "noreadv") && refuse_readv() != 0)
		return 77;
	write_n(dir, "parent", 1);
	pid = has(argc, argv, "vfork") ? vfork() : fork();
	if (pid == 0) {
		if (has(argc, argv, "exec") || has(argc, argv, "noreadv")) {
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
		name = strdup("child1");
		if (!name)
			exit(2);
		write_n(dir, name, 2);
		free(name);
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
	if (has(argc, argv, "pidreuse") || has(argc, argv, "forkreuse"))
		return pid_reuse(dir, has(argc, argv, "late"), has(argc, argv, "forkreuse"));
	return 0;
}
