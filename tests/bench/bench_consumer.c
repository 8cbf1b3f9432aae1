/*
 * bench_consumer: the recorder's consumer alone, on a spool captured once and replayed, so
 * that its cost per event is measured without the traced program beside it (and, under
 * `valgrind --tool=callgrind`, as a stable instruction count). tests/bench/run_recorder
 * drives it.
 *
 *   bench_consumer capture DUMP MIB -- CMD [ARGS...]
 *	runs CMD as `tracefs record` would (libtfscapture.so preloaded, every category traced,
 *	backtraces of 64 frames) into a spool of MIB MiB that nobody consumes, then writes the
 *	chunks it holds to DUMP, itself a spool file with only those chunks. One process only:
 *	a process CMD starts records into a spool of its own, which is left out (and said).
 *	The library is $TFS_CAPTURE_LIB.
 *   bench_consumer replay DUMP [BATCH [OUT]]
 *	feeds DUMP's chunks to a consumer BATCH at a time (default 8, about what a recorder
 *	polling every 2 ms finds at 3 million events a second), each thread's in order, polling
 *	after each batch; then finishes and saves the trace in memory (to OUT too when given).
 *	Prints one line: events, records, chunks, trace bytes, and CPU ns per event of the
 *	polls, the finish (symbolisation included) and the save. With BENCH_POLLS_ONLY set in
 *	the environment it stops after the polls (for a profiler).
 *
 * It is not a test: it checks nothing of what the trace holds.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tfs/capture.h"
#include "tfs/writer.h"
#include "consumer_i.h"
#include "spool_i.h"

static double cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int die(const char *what, int err)
{
	fprintf(stderr, "bench_consumer: %s: %s\n", what, strerror(err));
	return 1;
}

/* Write the header and the non-free chunks of @s to @path as a spool of those chunks. */
static int dump(const struct spool *s, const char *path)
{
	struct spool_hdr h = *s->hdr;
	uint32_t n_ready = cap_spool_n_ready(s), n = 0;
	uint8_t hdr[SPOOL_HDR_BYTES] = {0};
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		return -errno;
	if (lseek(fd, SPOOL_HDR_BYTES, SEEK_SET) < 0)
		goto err_close;
	for (uint32_t i = 0; i < n_ready; i++) {
		struct spool_chunk *ch = cap_spool_chunk(s, i);

		if (atomic_load(&ch->state) == SPOOL_FREE)
			continue;
		if (write(fd, ch, s->hdr->chunk_bytes) != (ssize_t)s->hdr->chunk_bytes)
			goto err_close;
		n++;
	}
	h.n_chunks = n;
	atomic_store(&h.n_ready, n);
	memcpy(hdr, &h, sizeof(h));
	if (pwrite(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr))
		goto err_close;
	fprintf(stderr, "bench_consumer: %s: %" PRIu32 " chunks, %" PRIu64 " events dropped\n",
		path, n, (uint64_t)atomic_load(&h.dropped_events));
	return close(fd) < 0 ? -errno : 0;

err_close:
	close(fd);
	return -EIO;
}

/* Remove the spools of processes the program started (`<path>.<pid>...`), saying so. */
static void remove_children(const char *path)
{
	const char *base = strrchr(path, '/') + 1;
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	char p[4096];

	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, base, strlen(base)) || e->d_name[strlen(base)] != '.')
			continue;
		fprintf(stderr, "bench_consumer: %s: another process's, left out\n", e->d_name);
		snprintf(p, sizeof(p), "/dev/shm/%s", e->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
}

static int capture(const char *out, long mib, char **argv)
{
	const uint32_t mask = TFS_TRACE_ON | TFS_TRACE_ZONES | TFS_TRACE_MEM | TFS_TRACE_ALLOC |
			      TFS_TRACE_IO | TFS_TRACE_THREADS;
	const char *lib = getenv("TFS_CAPTURE_LIB");
	char path[4096];
	struct spool s;
	int rc, st;
	pid_t pid;

	if (!lib)
		return die("TFS_CAPTURE_LIB", EINVAL);
	snprintf(path, sizeof(path), "/dev/shm/tfs-bench-consumer.%ld", (long)getpid());
	/* every chunk ready: the program never waits, nothing is dropped */
	rc = cap_spool_create(&s, path, (size_t)mib << 20, 0, TFS_TIMING_LOSSLESS, mask);
	if (rc < 0)
		return die(path, -rc);
	s.hdr->bt_depth = 64;
	pid = fork();
	if (pid == 0) {
		setenv("LD_PRELOAD", lib, 1);
		setenv("TFS_SPOOL", path, 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	rc = pid < 0 ? -errno : dump(&s, out);
	cap_spool_unmap(&s);
	unlink(path);
	remove_children(path);
	if (rc < 0)
		return die(out, -rc);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fprintf(stderr, "bench_consumer: %s ended with status %d\n", argv[0], st);
	return 0;
}

struct rchunk {
	uint64_t seq;
	uint32_t thread, idx, state;
};

static int rchunk_cmp(const void *a, const void *b)
{
	const struct rchunk *x = a, *y = b;

	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return x->thread < y->thread ? -1 : x->thread > y->thread;
}

/* Read spool file @path into anonymous memory in @s; its chunks' states in @order. */
static int load(const char *path, struct spool *s, struct rchunk **order)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint8_t *p;
	size_t off = 0;

	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	while (off < (size_t)st.st_size) {
		ssize_t n = read(fd, p + off, (size_t)st.st_size - off);

		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		off += (size_t)n;
	}
	close(fd);
	s->hdr = (struct spool_hdr *)p;
	s->map_bytes = off;
	s->ino = 0;
	if (s->hdr->magic != SPOOL_MAGIC || s->hdr->version != SPOOL_VERSION ||
	    SPOOL_HDR_BYTES + (size_t)s->hdr->n_chunks * s->hdr->chunk_bytes > off)
		return -EBADMSG;
	*order = calloc(s->hdr->n_chunks ? s->hdr->n_chunks : 1, sizeof(**order));
	if (!*order)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->hdr->n_chunks; i++) {
		struct spool_chunk *ch = cap_spool_chunk(s, i);

		(*order)[i] = (struct rchunk){ch->seq, ch->thread, i, atomic_load(&ch->state)};
		atomic_store(&ch->state, SPOOL_FREE); /* hidden until its batch */
	}
	qsort(*order, s->hdr->n_chunks, sizeof(**order), rchunk_cmp);
	return 0;
}

static uint64_t c_events(const struct cap_consumer *c)
{
	struct tfs_recording_stats st;

	cap_consumer_stats(c, &st);
	return st.n_events;
}

static int replay(const char *path, uint32_t batch, const char *out)
{
	struct cap_timing tm = {.timing = TFS_TIMING_LOSSLESS};
	struct tfs_recording_stats st;
	struct cap_consumer *c;
	struct rchunk *order = NULL;
	struct spool s;
	double t0, t1, t2, t3;
	size_t len = 0;
	void *trace;
	int rc;

	rc = load(path, &s, &order);
	if (rc < 0)
		return die(path, -rc);
	tm.timing = (int)s.hdr->timing;
	rc = cap_consumer_new(&s, &tm, &c);
	if (rc < 0)
		return die("cap_consumer_new", -rc);
	t0 = cpu_ns();
	for (uint32_t i = 0; i < s.hdr->n_chunks && rc >= 0; i++) {
		/* chunks never handed over stay hidden until the finish */
		if (order[i].state == SPOOL_FULL)
			atomic_store(&cap_spool_chunk(&s, order[i].idx)->state, SPOOL_FULL);
		if ((i + 1) % batch == 0 || i + 1 == s.hdr->n_chunks)
			rc = cap_consumer_poll(c);
	}
	for (uint32_t i = 0; i < s.hdr->n_chunks; i++)
		if (order[i].state == SPOOL_OWNED)
			atomic_store(&cap_spool_chunk(&s, order[i].idx)->state, SPOOL_OWNED);
	t1 = cpu_ns();
	if (rc >= 0 && getenv("BENCH_POLLS_ONLY")) { /* for profilers: the polls alone */
		printf("replay poll_ns %.1f\n", (t1 - t0) / (double)c_events(c));
		return 0;
	}
	if (rc >= 0)
		rc = cap_consumer_finish(c);
	t2 = cpu_ns();
	if (rc >= 0)
		rc = cap_consumer_save_mem(c, &trace, &len);
	t3 = cpu_ns();
	if (rc < 0)
		return die("consumer", -rc);
	if (out) {
		FILE *f = fopen(out, "wb");

		if (!f || fwrite(trace, 1, len, f) != len || fclose(f))
			return die(out, errno);
	}
	cap_consumer_stats(c, &st);
	printf("replay events %" PRIu64 " records %" PRIu64 " chunks %" PRIu64 " bytes %zu "
	       "poll_ns %.1f finish_ns %.1f save_ns %.1f\n",
	       st.n_events, st.n_records, st.n_chunks, len, (t1 - t0) / (double)st.n_events,
	       (t2 - t1) / (double)st.n_events, (t3 - t2) / (double)st.n_events);
	free(trace);
	free(order);
	cap_consumer_free(c);
	munmap(s.hdr, s.map_bytes);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 6 && !strcmp(argv[1], "capture") && !strcmp(argv[4], "--"))
		return capture(argv[2], atol(argv[3]), argv + 5);
	if (argc >= 3 && !strcmp(argv[1], "replay"))
		return replay(argv[2], argc > 3 && atoi(argv[3]) > 0 ? (uint32_t)atoi(argv[3]) : 8,
			      argc > 4 ? argv[4] : NULL);
	fprintf(stderr, "usage: bench_consumer capture DUMP MIB -- CMD [ARGS...]\n"
			"       bench_consumer replay DUMP [BATCH [OUT]]\n");
	return 2;
}
