/*
 * demo_threads: a small multi-threaded program instrumented with the capture API only (no
 * interposers yet): process phases init/solve/output, nested zones, marks, counters, the
 * allocations it makes itself and file I/O on a temporary file, each inside a zone. Four
 * worker threads relax a 1-D heat equation on their own slice for a number of steps.
 * Its standard output is deterministic, traced or not.
 *
 *   demo_threads [STEPS]      (default 200)
 *   TFS_OUTPUT=demo.trace build/capture/demo_threads     # in-process capture
 *   build/fs/tracefs record -o demo.trace -- build/capture/demo_threads
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tfs/capture.h"

#define N_WORKERS 4
#define CELLS 256

struct worker {
	int id, steps;
	double *cells; /* CELLS + 2 halo cells */
	double total;
	pthread_t thread;
};

static void relax(struct worker *w)
{
	TFS_ZONE("relax");
	double *next = malloc(sizeof(double) * (CELLS + 2));

	if (!next)
		return;
	tfs_zone_begin("stencil");
	next[0] = w->cells[0];
	next[CELLS + 1] = w->cells[CELLS + 1];
	for (int i = 1; i <= CELLS; i++)
		next[i] = 0.25 * w->cells[i - 1] + 0.5 * w->cells[i] + 0.25 * w->cells[i + 1];
	tfs_zone_end();
	memcpy(w->cells, next, sizeof(double) * (CELLS + 2));
	free(next);
}

static void *work(void *arg)
{
	struct worker *w = arg;
	char name[64];

	snprintf(name, sizeof(name), "worker-%d", w->id);
	tfs_thread_name(name);
	for (int s = 0; s < w->steps; s++) {
		TFS_ZONE("step");
		double sum = 0;

		relax(w);
		for (int i = 1; i <= CELLS; i++)
			sum += w->cells[i];
		tfs_counter("heat", (int64_t)(sum * 1000));
		if (s % 50 == 49) {
			snprintf(name, sizeof(name), "worker %d reached step %d", w->id, s + 1);
			tfs_mark(name);
		}
	}
	for (int i = 1; i <= CELLS; i++)
		w->total += w->cells[i];
	return NULL;
}

static int write_config(FILE *f, int steps)
{
	TFS_ZONE("write config");

	for (int i = 0; i < N_WORKERS; i++)
		if (fprintf(f, "worker %d source %d steps %d\n", i, 100 * (i + 1), steps) < 0)
			return -1;
	return fflush(f);
}

static int read_config(FILE *f, int *source)
{
	TFS_ZONE("read config");
	int id, src, steps;

	rewind(f);
	for (int i = 0; i < N_WORKERS; i++) {
		if (fscanf(f, "worker %d source %d steps %d\n", &id, &src, &steps) != 3)
			return -1;
		source[i] = src;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 200, source[N_WORKERS];
	struct worker workers[N_WORKERS];
	char path[] = "/tmp/demo_threads.XXXXXX";
	FILE *f;
	int fd;

	tfs_thread_name("main");
	tfs_phase_begin("init", TFS_PHASE_PROCESS);
	tfs_zone_begin("init");
	fd = mkstemp(path);
	f = fd < 0 ? NULL : fdopen(fd, "w+");
	if (!f || write_config(f, steps) != 0 || read_config(f, source) != 0) {
		fprintf(stderr, "demo_threads: cannot use a temporary file\n");
		return 1;
	}
	tfs_mark("config read back");
	for (int i = 0; i < N_WORKERS; i++) {
		TFS_ZONE("alloc");
		workers[i] = (struct worker){.id = i, .steps = steps};
		workers[i].cells = calloc(CELLS + 2, sizeof(double));
		if (!workers[i].cells)
			return 1;
		workers[i].cells[CELLS / 2] = source[i];
		tfs_counter("allocated", (int64_t)(sizeof(double) * (CELLS + 2) * (i + 1)));
	}
	tfs_zone_end();
	tfs_phase_end();

	tfs_phase_begin("solve", TFS_PHASE_PROCESS);
	for (int i = 0; i < N_WORKERS; i++)
		pthread_create(&workers[i].thread, NULL, work, &workers[i]);
	for (int i = 0; i < N_WORKERS; i++)
		pthread_join(workers[i].thread, NULL);
	tfs_phase_end();

	tfs_phase_begin("output", TFS_PHASE_PROCESS);
	tfs_zone_begin("output");
	for (int i = 0; i < N_WORKERS; i++) {
		printf("worker %d: heat %.6f\n", i, workers[i].total);
		free(workers[i].cells);
	}
	tfs_zone_end();
	tfs_phase_end();
	fclose(f);
	unlink(path);
	return 0;
}
