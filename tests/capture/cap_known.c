/*
 * cap_known: a program whose capture events are known exactly, for check_capture.py.
 * Thread 0 (main): thread_name, a process phase "setup" holding zones outer > inner with a
 * mark and five counters; then W workers run one after another (ids 1..W), each with a
 * thread phase "work" of ten zones with counters and sixteen alternating load/store
 * accesses 8 bytes apart; then a mark "before crash" and a zone "doomed" inside which the
 * program ends as MODE says:
 *
 *   cap_known ok|exit7|abort|segv|_exit|kill [W]   end normally (status 0 or 7), abort(),
 *                                                  segfault, _exit(3), SIGKILL itself
 *   cap_known spin                                 zones forever; prints "ready" after 1000
 *   cap_known many N                               N threads at once, 100 zones each
 *   cap_known burst N                              N memory accesses as fast as possible
 *   cap_known zburst N                             N times, as fast as possible: a zone
 *                                                  "outer" holding a zone "inner" holding
 *                                                  two memory accesses (6 events' records)
 *   cap_known fork                                 marks around a fork; the child records
 *                                                  zones and a mark, then exit(0)s
 *
 * Standard output is a fixed text, flushed before every ending.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tfs/capture.h"

static double cells[16];

static void *worker(void *arg)
{
	const int w = (int)(long)arg;
	char name[32];

	snprintf(name, sizeof(name), "worker-%d", w);
	tfs_thread_name(name);
	tfs_phase_begin("work", TFS_PHASE_THREAD);
	for (int i = 0; i < 10; i++) {
		TFS_ZONE("step");
		tfs_counter("i", (int64_t)i * w);
	}
	for (int i = 0; i < 16; i++)
		tfs_mem_access(&cells[i], sizeof(cells[i]), i % 2);
	tfs_phase_end();
	return NULL;
}

static pthread_barrier_t g_barrier;

static void *many_worker(void *arg)
{
	char name[32];

	snprintf(name, sizeof(name), "t%ld", (long)arg);
	pthread_barrier_wait(&g_barrier);
	tfs_thread_name(name);
	for (int i = 0; i < 100; i++) {
		tfs_zone_begin("z");
		tfs_zone_end();
	}
	return NULL;
}

static int many(int n)
{
	pthread_t t[256];

	if (n < 1 || n > 256)
		return 2;
	pthread_barrier_init(&g_barrier, NULL, (unsigned)n);
	for (long i = 0; i < n; i++)
		pthread_create(&t[i], NULL, many_worker, (void *)i);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("many %d done\n", n);
	return 0;
}

static int burst(long n)
{
	for (long i = 0; i < n; i++)
		tfs_mem_access(&cells[i % 16], 8, 0);
	printf("burst %ld done, %llu dropped\n", n, (unsigned long long)tfs_capture_dropped());
	return 0;
}

static int zburst(long n)
{
	for (long i = 0; i < n; i++) {
		tfs_zone_begin("outer");
		tfs_zone_begin("inner");
		tfs_mem_access(&cells[i % 16], 8, 0);
		tfs_mem_access(&cells[(i + 1) % 16], 8, 1);
		tfs_zone_end();
		tfs_zone_end();
	}
	printf("zburst %ld done, %llu dropped\n", n, (unsigned long long)tfs_capture_dropped());
	return 0;
}

static int forking(void)
{
	pid_t pid;
	int status;

	tfs_mark("parent before");
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		for (int i = 0; i < 100; i++) {
			tfs_zone_begin("child");
			tfs_zone_end();
		}
		tfs_mark("child");
		printf("child done\n");
		exit(0);
	}
	waitpid(pid, &status, 0);
	tfs_mark("parent after");
	printf("parent done\n");
	return 0;
}

static int spin(void)
{
	for (long i = 0;; i++) {
		tfs_zone_begin("spin");
		tfs_zone_end();
		if (i == 1000) {
			printf("ready\n");
			fflush(stdout);
		}
		if (i > 1000)
			usleep(100);
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "ok";
	int n_workers = argc > 2 ? atoi(argv[2]) : 3;

	if (!strcmp(mode, "many"))
		return many(n_workers);
	if (!strcmp(mode, "burst"))
		return burst(atol(argv[2]));
	if (!strcmp(mode, "zburst"))
		return zburst(atol(argv[2]));
	if (!strcmp(mode, "spin"))
		return spin();
	if (!strcmp(mode, "fork"))
		return forking();
	printf("cap_known %s: start\n", mode);
	tfs_thread_name("main");
	tfs_phase_begin("setup", TFS_PHASE_PROCESS);
	tfs_zone_begin("outer");
	tfs_zone_begin("inner");
	tfs_mark("hello \"world\"\n");
	tfs_zone_end();
	for (int i = 0; i < 5; i++)
		tfs_counter("count", i - 2);
	tfs_zone_end();
	tfs_phase_end();
	for (long w = 1; w <= n_workers; w++) {
		pthread_t t;

		pthread_create(&t, NULL, worker, (void *)w);
		pthread_join(t, NULL);
	}
	printf("cap_known %s: %d workers done\n", mode, n_workers);
	fflush(stdout);
	tfs_mark("before crash");
	tfs_zone_begin("doomed");
	if (!strcmp(mode, "abort"))
		abort();
	if (!strcmp(mode, "segv")) {
		volatile int *volatile nowhere = NULL;

		*nowhere = 1; /* a real fault, not raise() */
	}
	if (!strcmp(mode, "_exit"))
		_exit(3);
	if (!strcmp(mode, "kill"))
		kill(getpid(), SIGKILL);
	tfs_zone_end();
	printf("cap_known %s: end\n", mode);
	return strcmp(mode, "exit7") ? 0 : 7;
}
