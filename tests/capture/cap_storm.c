/*
 * cap_storm: an allocation storm with exactly known calls, for the spool's back-pressure
 * and sampling tests (check_spool.py). Links nothing of tracefs: traced through the
 * preloaded capture library. Each of T threads makes N malloc/free pairs, malloc i of a
 * thread asking for size(i) = 16 + (i * 37) % 1000 bytes, and nothing else the capture
 * records; the main thread only starts and joins them. Prints one line at the end. With
 * "stop", the parent process (the recorder) is stopped (SIGSTOP) while the threads run and
 * continued (SIGCONT) after they have ended: nobody consumes the spool meanwhile.
 *
 *   cap_storm N T [stop]
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_THREADS 64

static long g_iters;

static void *storm(void *arg)
{
	for (long i = 0; i < g_iters; i++) {
		char *p = malloc(16 + (size_t)(i * 37) % 1000);

		if (!p)
			abort();
		__asm__ volatile("" : : "r"(p) : "memory"); /* the pair is not elided */
		free(p);
	}
	return arg;
}

int main(int argc, char **argv)
{
	long n_threads = argc > 2 ? atol(argv[2]) : 1;
	int stop = argc > 3 && !strcmp(argv[3], "stop");
	pthread_t th[MAX_THREADS];

	g_iters = argc > 1 ? atol(argv[1]) : 1000;
	if (n_threads < 1 || n_threads > MAX_THREADS || g_iters < 0) {
		fprintf(stderr, "usage: cap_storm N T [stop] (1 <= T <= %d)\n", MAX_THREADS);
		return 2;
	}
	if (stop)
		kill(getppid(), SIGSTOP);
	for (long t = 0; t < n_threads; t++)
		if (pthread_create(&th[t], NULL, storm, NULL) != 0)
			return 1;
	for (long t = 0; t < n_threads; t++)
		pthread_join(th[t], NULL);
	if (stop)
		kill(getppid(), SIGCONT);
	printf("storm %ld x %ld done\n", n_threads, g_iters);
	return 0;
}
