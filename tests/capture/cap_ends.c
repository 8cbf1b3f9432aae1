/*
 * Programs that end in known ways, for `tracefs record` (check_ends.py):
 *   segv      writes through a null pointer in crash_here() (built with -g: the crash
 *             event's backtrace must name it)
 *   abort     abort()
 *   kill9     SIGKILL to itself
 *   catch     catches three faults of its own with a SIGSEGV handler (sigsetjmp and
 *             siglongjmp), printing what it sees of its signal actions, its alternate stack
 *             and each fault, then exits 4
 *   tree      forks: A exits 3 (reaped with waitpid), B _exit(5)s (waitpid), C writes
 *             through a null pointer (wait(NULL)), D forks G and exits at once, G sleeps
 *             0.2 s and _exit(7)s (an orphan: the recorder reaps it), E says it runs (a
 *             pipe) and waits, and is killed by SIGKILL (reaped with waitid); prints each
 *             pid as `<letter> <pid>` (G's by D), then exits 0
 *   exec N    execs /bin/true with argv[1] of N bytes ('a' repeated)
 *   readfd N [ARG...]
 *             reads up to 16 bytes from descriptor N (inherited open), prints how many and
 *             exits 0; the ARGs, ignored, make its command line as long as wanted
 *   names     names itself "mainly" (prctl), starts two threads: one names itself
 *             "worker-1" (pthread_setname_np), the other is named "worker-2" by the main
 *             thread; joins them and exits 0
 *   system    system("exit 6"): the shell is reaped inside libc, by no interposed call;
 *             prints system()'s status and exits 0
 *   tsd N join|detach|rearm
 *             N threads, each setting a block of 1000 bytes as its value of a key whose
 *             destructor frees it: joined, or detached (main then pthread_exit()s). The
 *             destructor sets a block of 1001 bytes again in its first round (join, detach),
 *             or one of 1002 bytes in every round (rearm, joined: glibc runs
 *             PTHREAD_DESTRUCTOR_ITERATIONS rounds and leaves the last one set). At exit,
 *             after every thread's destructors: `tsd mallocs M frees F`, its own calls
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile int *volatile nowhere;

__attribute__((noinline)) static void crash_here(void)
{
	*nowhere = 1;
}

static sigjmp_buf env;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	printf("caught %d at %p\n", sig, si->si_addr);
	siglongjmp(env, 1);
}

static int catch_faults(void)
{
	struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO}, old;
	stack_t st;

	sigaction(SIGSEGV, NULL, &old);
	printf("before: default %d, flags %#x\n", old.sa_handler == SIG_DFL,
	       (unsigned)old.sa_flags);
	sigaltstack(NULL, &st);
	printf("alternate stack: %s\n", st.ss_flags & SS_DISABLE ? "none" : "set");
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	for (int i = 0; i < 3; i++) {
		if (!sigsetjmp(env, 1))
			nowhere[i] = 1;
		else
			printf("resumed %d\n", i);
	}
	sigaction(SIGSEGV, NULL, &old);
	printf("handler kept: %d, flags %#x\n", old.sa_sigaction == on_segv,
	       (unsigned)old.sa_flags);
	signal(SIGSEGV, SIG_DFL);
	sigaction(SIGSEGV, NULL, &old);
	printf("after: default %d\n", old.sa_handler == SIG_DFL);
	return 4;
}

static void sleep_ms(long ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&t, &t) < 0)
		;
}

static pid_t child(char letter)
{
	pid_t pid = fork();

	if (pid > 0) {
		printf("%c %d\n", letter, (int)pid);
		fflush(stdout);
	}
	return pid;
}

static int tree(void)
{
	int st, ready[2];
	siginfo_t si;
	pid_t pid;
	char c;

	fflush(stdout);
	if ((pid = child('A')) == 0)
		exit(3);
	waitpid(pid, &st, 0);
	if ((pid = child('B')) == 0)
		_exit(5);
	waitpid(pid, NULL, 0);
	if ((pid = child('C')) == 0)
		crash_here();
	wait(NULL);
	if ((pid = child('D')) == 0) {
		pid_t g = fork();

		if (g == 0) {
			sleep_ms(200);
			_exit(7);
		}
		printf("G %d\n", (int)g);
		fflush(stdout);
		_exit(0);
	}
	waitpid(pid, NULL, 0);
	if (pipe(ready) < 0)
		return 1;
	if ((pid = child('E')) == 0) {
		(void)!write(ready[1], "", 1); /* it records now: its spool exists */
		pause();
		_exit(1);
	}
	(void)!read(ready[0], &c, 1);
	kill(pid, SIGKILL);
	waitid(P_PID, (id_t)pid, &si, WEXITED);
	return 0;
}

static void *named_self(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "worker-1");
	return NULL;
}

static void *named_by_main(void *arg)
{
	(void)arg;
	sleep_ms(50);
	return NULL;
}

static int names(void)
{
	pthread_t a, b;

	prctl(PR_SET_NAME, "mainly", 0, 0, 0);
	pthread_create(&a, NULL, named_self, NULL);
	pthread_join(a, NULL);
	pthread_create(&b, NULL, named_by_main, NULL);
	pthread_setname_np(b, "worker-2");
	pthread_join(b, NULL);
	return 0;
}

static pthread_key_t tsd_key;
static bool tsd_rearm;
static _Atomic unsigned int tsd_mallocs, tsd_frees;
static _Thread_local unsigned int tsd_rounds;

static void *tsd_alloc(size_t n)
{
	atomic_fetch_add(&tsd_mallocs, 1);
	return malloc(n);
}

static void tsd_dtor(void *p)
{
	free(p);
	atomic_fetch_add(&tsd_frees, 1);
	if (tsd_rounds++ == 0 || tsd_rearm)
		pthread_setspecific(tsd_key, tsd_alloc(tsd_rearm ? 1002 : 1001));
}

static void *tsd_worker(void *arg)
{
	(void)arg;
	pthread_setspecific(tsd_key, tsd_alloc(1000));
	return NULL;
}

static void tsd_report(void)
{
	printf("tsd mallocs %u frees %u\n", atomic_load(&tsd_mallocs), atomic_load(&tsd_frees));
}

static int tsd(int n, const char *how)
{
	const bool detach = !strcmp(how, "detach");

	tsd_rearm = !strcmp(how, "rearm");
	if (pthread_key_create(&tsd_key, tsd_dtor) != 0 || atexit(tsd_report) != 0)
		return 1;
	for (int i = 0; i < n; i++) {
		pthread_t t;

		if (pthread_create(&t, NULL, tsd_worker, NULL) != 0)
			return 1;
		if (detach)
			pthread_detach(t);
		else
			pthread_join(t, NULL);
	}
	if (detach)
		pthread_exit(NULL); /* the process ends with its last thread, after its destructors */
	return 0;
}

static int exec_long(size_t n)
{
	char *arg = malloc(n + 1);

	if (!arg)
		return 2;
	memset(arg, 'a', n);
	arg[n] = '\0';
	execl("/bin/true", "true", arg, (char *)NULL);
	return 1;
}

static int read_fd(int fd)
{
	char buf[16];
	ssize_t n = read(fd, buf, sizeof(buf));

	printf("readfd %zd\n", n);
	return n < 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (!strcmp(mode, "segv"))
		crash_here();
	else if (!strcmp(mode, "abort"))
		abort();
	else if (!strcmp(mode, "kill9"))
		kill(getpid(), SIGKILL);
	else if (!strcmp(mode, "catch"))
		return catch_faults();
	else if (!strcmp(mode, "tree"))
		return tree();
	else if (!strcmp(mode, "exec") && argc > 2)
		return exec_long((size_t)atol(argv[2]));
	else if (!strcmp(mode, "readfd") && argc > 2)
		return read_fd(atoi(argv[2]));
	else if (!strcmp(mode, "names"))
		return names();
	else if (!strcmp(mode, "tsd") && argc > 3)
		return tsd(atoi(argv[2]), argv[3]);
	else if (!strcmp(mode, "system")) {
		int st = system("exit 6");

		printf("system: exited %d, status %d\n", WIFEXITED(st), WEXITSTATUS(st));
		return 0;
	}
	fprintf(stderr, "usage: cap_ends segv|abort|kill9|catch|tree|exec N|readfd N [ARG...]|"
			"names|system|tsd N join|detach|rearm\n");
	return 2;
}
