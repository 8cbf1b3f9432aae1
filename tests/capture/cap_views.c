/*
 * A program with known calls, for the profiles of check_views.py; it links nothing of
 * tracefs and prints, as one JSON object on stdout, what it did by its own count.
 *
 *   cap_views bytes FILE    rank 0: fwrite and fread of known sizes on FILE; its forked
 *                           child (rank 1, no stdio): malloc, calloc, realloc and free of
 *                           known sizes. Prints pid, child_pid and per call count and bytes.
 *   cap_views stacks        malloc from main > stacks > outer_a > leaf_alloc (7 times) and
 *                           main > stacks > outer_b > leaf_alloc (5 times), then 3
 *                           threads: prints pid
 *   cap_views deep N        a malloc N calls of rec() deep (leaked), and one from main
 *   cap_views maps          valloc(5000) and pvalloc(100), both freed, valloc(300) leaked;
 *                           an 8 KiB anonymous mmap moved by mremap to 1 MiB, a write to
 *                           /dev/null of 10 bytes at offset 4096 of it, an mremap shrinking
 *                           it in place to 4 KiB, a munmap of it. No stdio: prints pid and
 *                           the addresses as JSON through write()
 *
 * It does not check anything itself: check_views.py compares the trace's views with its
 * output. Built -O0 with frame pointers so that the functions named here are frames.
 */
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define N_ALLOC 40

static void *volatile g_sink;

/* Rank 1: the malloc family only (no stdio), its counts written to @fd as JSON. */
static void heap_child(int fd)
{
	unsigned long long n_malloc = 0, b_malloc = 0, n_calloc = 0, b_calloc = 0;
	unsigned long long n_realloc = 0, b_realloc = 0, n_free = 0;
	void *p[N_ALLOC];
	char line[512];
	int len;

	for (unsigned i = 0; i < N_ALLOC; i++) {
		if (i % 4 == 0) {
			p[i] = calloc(i + 1, 12);
			n_calloc++;
			b_calloc += (i + 1) * 12;
		} else {
			p[i] = malloc(100 + 3 * i);
			n_malloc++;
			b_malloc += 100 + 3 * i;
		}
	}
	for (unsigned i = 0; i < N_ALLOC; i += 10) {
		p[i] = realloc(p[i], 5000 + i);
		n_realloc++;
		b_realloc += 5000 + i;
	}
	for (unsigned i = 0; i < N_ALLOC; i++, n_free++)
		free(p[i]);
	len = snprintf(line, sizeof(line),
		       "\"malloc\": [%llu, %llu], \"calloc\": [%llu, %llu], "
		       "\"realloc\": [%llu, %llu], \"free\": [%llu, 0]",
		       n_malloc, b_malloc, n_calloc, b_calloc, n_realloc, b_realloc, n_free);
	_exit(write(fd, line, (size_t)len) == len ? 0 : 1);
}

static int bytes(const char *path)
{
	static char buf[4096], rbuf[4096], wbuf[4096], heap[512];
	size_t wrote = 0, got = 0, n_w = 0, n_r = 0;
	int status = 0, fds[2];
	ssize_t n_heap;
	pid_t child;
	FILE *f;

	f = fopen(path, "w");
	if (!f)
		return 1;
	setvbuf(f, wbuf, _IOFBF, sizeof(wbuf));
	for (size_t i = 1; i <= 5; i++, n_w++)
		wrote += fwrite(buf, 24, i * 3, f) * 24;
	fclose(f);
	f = fopen(path, "r");
	if (!f)
		return 1;
	setvbuf(f, rbuf, _IOFBF, sizeof(rbuf));
	for (size_t i = 0; i < 5; i++, n_r++)
		got += fread(buf, 16, 15, f) * 16; /* 1080 bytes in the file: the last is short */
	fclose(f);
	if (pipe(fds) < 0)
		return 1;
	child = fork();
	if (child == 0) {
		close(fds[0]);
		heap_child(fds[1]);
	}
	close(fds[1]);
	n_heap = read(fds[0], heap, sizeof(heap) - 1);
	if (child < 0 || waitpid(child, &status, 0) != child || status != 0 || n_heap <= 0)
		return 1;
	heap[n_heap] = '\0';
	printf("{\"pid\": %d, \"child_pid\": %d, \"fwrite\": [%zu, %zu], \"fread\": [%zu, %zu], "
	       "%s}\n",
	       (int)getpid(), (int)child, n_w, wrote, n_r, got, heap);
	return 0;
}

__attribute__((noinline)) static void leaf_alloc(int n)
{
	for (int i = 0; i < n; i++) {
		g_sink = malloc(64 + (size_t)i);
		free(g_sink);
	}
}

__attribute__((noinline)) static void outer_a(void)
{
	leaf_alloc(7);
}

__attribute__((noinline)) static void outer_b(void)
{
	leaf_alloc(5);
}

static void *thread_main(void *arg)
{
	(void)arg;
	return NULL;
}

static int stacks(void)
{
	pthread_t t[3];

	outer_a();
	outer_b();
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, thread_main, NULL);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	printf("{\"pid\": %d}\n", (int)getpid());
	return 0;
}

__attribute__((noinline)) static void *rec(int n)
{
	void *p = n == 0 ? malloc(4321) : rec(n - 1);

	g_sink = p; /* no tail call */
	return p;
}

static int deep(int n)
{
	rec(n); /* leaked */
	g_sink = malloc(1234);
	free(g_sink);
	printf("{\"pid\": %d}\n", (int)getpid());
	return 0;
}

static int maps(void)
{
	void *a = valloc(5000), *b = pvalloc(100), *c = valloc(300);
	char *m, *big, *small;
	char line[256];
	int fd, len;

	free(a);
	free(b);
	g_sink = c; /* leaked */
	m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 1;
	memset(m, 'm', 8192);
	big = mremap(m, 8192, 1 << 20, MREMAP_MAYMOVE);
	fd = open("/dev/null", O_WRONLY);
	if (big == MAP_FAILED || fd < 0 || write(fd, big + 4096, 10) != 10)
		return 1;
	close(fd);
	small = mremap(big, 1 << 20, 4096, 0);
	if (small != big || munmap(small, 4096) != 0)
		return 1;
	len = snprintf(line, sizeof(line),
		       "{\"pid\": %d, \"leaked\": \"%p\", \"mapped\": \"%p\", \"moved\": \"%p\"}\n",
		       (int)getpid(), c, (void *)m, (void *)big);
	return write(1, line, (size_t)len) == len ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "bytes"))
		return bytes(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "stacks"))
		return stacks();
	if (argc == 3 && !strcmp(argv[1], "deep"))
		return deep(atoi(argv[2]));
	if (argc == 2 && !strcmp(argv[1], "maps"))
		return maps();
	fprintf(stderr, "usage: cap_views bytes FILE | stacks | deep N | maps\n");
	return 2;
}
