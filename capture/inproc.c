/*
 * In-process mode: a program linked with libtfscapture and run without `tracefs record`
 * consumes its own spool on a thread of its own and saves the trace when it exits, to
 * $TFS_OUTPUT or <program>.<pid>.trace in the working directory. The consumer thread
 * records nothing and receives no signals. A program that dies without running its exit
 * path (abort, a fatal signal, _exit) leaves no trace in this mode: `tracefs record`
 * recovers those. Its entry points are one table (cap_inproc_ops, capture_i.h): the shared
 * library's producer reaches them through libtfsinproc.so, loaded only in this mode
 * (inproc_load.c). This file does not parse records (consumer.c does).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "consumer_i.h"

#define IDLE_WAIT_NS 2000000 /* poll period while producers hand over nothing */

static struct {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* signals a finished round, a flush request, a stop */
	bool stop;		/* under lock */
	bool kick;		/* under lock: a flush asks for a round now */
	uint64_t rounds;	/* under lock: polls completed */
	struct cap_consumer *consumer;
	struct spool *spool;
	void (*exclude)(void); /* the producer's: the consumer thread records nothing */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void deadline_in(struct timespec *t, long ns)
{
	clock_gettime(CLOCK_REALTIME, t);
	t->tv_nsec += ns;
	while (t->tv_nsec >= 1000000000) {
		t->tv_nsec -= 1000000000;
		t->tv_sec++;
	}
}

static void *consumer_main(void *arg)
{
	struct timespec t;

	(void)arg;
	g.exclude();
	pthread_mutex_lock(&g.lock);
	while (!g.stop) {
		int n;

		pthread_mutex_unlock(&g.lock);
		n = cap_consumer_poll(g.consumer);
		pthread_mutex_lock(&g.lock);
		g.rounds++;
		pthread_cond_broadcast(&g.cond);
		if (n == 0 && !g.stop && !g.kick) {
			deadline_in(&t, IDLE_WAIT_NS);
			pthread_cond_timedwait(&g.cond, &g.lock, &t);
		}
		g.kick = false;
	}
	pthread_mutex_unlock(&g.lock);
	return NULL;
}

static int start(struct spool *s, const struct cap_timing *tm, void (*exclude)(void))
{
	sigset_t all, old;
	int rc;

	rc = cap_consumer_new(s, tm, &g.consumer);
	if (rc < 0)
		return rc;
	g.spool = s;
	g.exclude = exclude;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&g.thread, NULL, consumer_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0) {
		cap_consumer_free(g.consumer);
		g.consumer = NULL;
	}
	return rc;
}

static void flush(void)
{
	struct timespec t;
	uint64_t target;

	deadline_in(&t, 1000000000);
	pthread_mutex_lock(&g.lock);
	/* the round running now may have scanned before the hand-over: wait for the next */
	target = g.rounds + 2;
	g.kick = true;
	pthread_cond_broadcast(&g.cond);
	while (g.rounds < target && !g.stop)
		if (pthread_cond_timedwait(&g.cond, &g.lock, &t) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&g.lock);
}

/*
 * argv of this process, spaces between, whole, from /proc/self/cmdline (its size bounded by
 * the kernel's limit on an exec's arguments). @return it (free() it), NULL when out of memory
 */
static char *read_cmdline_dup(void)
{
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap), *more;
	ssize_t n = 0;

	while (buf && fd >= 0 && (n = read(fd, buf + len, cap - 1 - len)) > 0) {
		len += (size_t)n;
		if (len < cap - 1)
			continue;
		more = realloc(buf, 2 * cap);
		if (!more)
			free(buf);
		buf = more;
		cap *= 2;
	}
	if (fd >= 0)
		close(fd);
	if (!buf)
		return NULL;
	buf[len] = '\0';
	for (size_t i = 0; len > 0 && i < len - 1; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	return buf;
}

/* Take in everything and set the metadata; @end says how the recording ended. */
static int finish(const char *end)
{
	char *cmdline = read_cmdline_dup();
	int rc = cmdline ? cap_consumer_finish(g.consumer) : -ENOMEM;

	if (rc == 0)
		rc = cap_consumer_set_common_meta(g.consumer, program_invocation_short_name,
						  cmdline, (long)getpid(), "in-process");
	if (rc == 0)
		rc = cap_consumer_set_meta(g.consumer, "end", end);
	free(cmdline);
	return rc;
}

static int save(const char *path)
{
	int rc = finish("exit");

	return rc < 0 ? rc : cap_consumer_save(g.consumer, path);
}

static void stop_thread(void)
{
	/* from now on nothing is freed for them: producers must not wait (spool_i.h) */
	cap_spool_set_consumer(g.spool, SPOOL_CONSUMER_DONE);
	pthread_mutex_lock(&g.lock);
	g.stop = true;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
	pthread_join(g.thread, NULL);
}

static int save_mem(void **out, size_t *len)
{
	int rc;

	if (!g.consumer)
		return -ENOTSUP;
	stop_thread();
	rc = finish("MPI_Finalize");
	if (rc == 0)
		rc = cap_consumer_save_mem(g.consumer, out, len);
	/* the trace is handed over: nothing more is consumed or saved at exit */
	cap_consumer_free(g.consumer);
	g.consumer = NULL;
	return rc;
}

static void finish_at_exit(uint64_t dropped_early)
{
	const int saved_errno = errno;
	const char *out = getenv("TFS_OUTPUT");
	struct tfs_recording_stats st;
	char path[4096];
	int rc;

	if (!g.consumer)
		return;
	stop_thread();
	if (out && *out)
		snprintf(path, sizeof(path), "%s", out);
	else
		snprintf(path, sizeof(path), "%s.%ld.trace", program_invocation_short_name,
			 (long)getpid());
	rc = save(path);
	if (rc < 0)
		fprintf(stderr, "tracefs: cannot save %s: %s\n", path, strerror(-rc));
	cap_consumer_stats(g.consumer, &st);
	if (st.dropped_events + dropped_early)
		fprintf(stderr, "tracefs: %" PRIu64 " events dropped (spool full): %s\n",
			st.dropped_events + dropped_early, path);
	cap_consumer_free(g.consumer);
	g.consumer = NULL;
	errno = saved_errno;
}

/* What libtfsinproc.so exports (inproc.map), and what the static library links. */
const struct cap_inproc_ops cap_inproc_ops = {
	.parse_timing = cap_parse_timing,
	.parse_trace = cap_parse_trace,
	.start = start,
	.flush = flush,
	.finish = finish_at_exit,
	.save_mem = save_mem,
};
