/*
 * A program with exactly known allocation, I/O and thread calls, for the interposers of
 * libtfscapture.so under `tracefs record` (check_interpose.py holds the expectation, written
 * from this description). It prints nothing and links nothing of tracefs.
 *
 *   cap_io calls DIR      the calls below, in this order, on files in DIR
 *   cap_io threads DIR N  N threads, each 10 x {p = malloc(32), write 16 bytes at p + i, free}
 *   cap_io loop N         N x {malloc(64), free} (the benchmark's allocation loop)
 *   cap_io errno          exits 3 if a traced call changes errno where the real one would not
 *   cap_io bufs DIR       buffers in heap blocks, on the stack, in mappings (below)
 *   cap_io seqread DIR N  N reads of 512 bytes walking through one heap buffer, then N reads
 *                         into the start of it
 *   cap_io churn DIR N K  N threads, each K rounds of allocating (malloc, calloc, realloc,
 *                         1 MiB blocks, mmap), preading into the middle of a live block,
 *                         freeing; prints a checksum of all it read
 *   cap_io forks DIR N    4 threads churning as above while the main thread forks N times;
 *                         each child allocates, writes from the block, frees and exits 0
 *                         (a lock of the allocation table held at fork would hang it)
 *   cap_io remap          one address, two mappings: a thread maps a page at A and unmaps
 *                         it by a raw system call (no munmap event), then the main thread
 *                         maps a page at A again (A as a hint) and unmaps
 *                         it; exits 5 if A could not be had again
 *   cap_io clock DIR      the clock as the program reads it, in the trace: 4 threads, then a
 *                         forked child's 4, each lseek(fd, T, SEEK_SET) on DIR/c 300 times
 *                         0.1 ms apart, then 60 times 3 ms apart, T its CLOCK_MONOTONIC
 *                         nanoseconds just before the call (an offset the file need not take)
 *   cap_io closefrom N    close(fd) for fd 3 to N - 1, as daemons do before exec: most
 *                         were never open, the test may leave one open (inherited)
 *   cap_io sigclock DIR   the same clock readings, lseek(fd, T, SEEK_SET) on DIR/c in a loop
 *                         for 1.5 s, while a second thread floods the main one with SIGUSR1,
 *                         whose handler makes a traced call of its own (lseek to offset 1)
 *
 * bufs, on file DIR/b (file#0), nothing else allocating meanwhile, allocation ids from 1:
 *   p = malloc(8192) (id 1); pin = malloc(100) (id 2); write p (offset 0, 4096 bytes),
 *   p + 100 (50 bytes), a stack buffer (10 bytes); q = realloc(p, 4 MiB): moved (id 3,
 *   freed 1; exits 4 if it was not); write q + 1000 (10 bytes); free q, pin;
 *   m = mmap 4 anonymous pages (id 4); write m + 4104 (8 bytes); munmap the second page;
 *   write m + 8208 (8 bytes: id 4 still, offset from the original start), m + 4096
 *   (unmapped: EFAULT, id 0); munmap the first page, then the last two;
 *   f = mmap 2 pages of DIR/b read-only (id 5); write f + 10 (5 bytes); munmap it;
 *   close.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char buf[8192];
/* Sizes the compiler cannot see: fortified builds then call __read_chk, __pread64_chk... */
static volatile size_t g_4k = 4096, g_512 = 512;
static char path[4096];

static const char *in_dir(const char *dir, const char *name)
{
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

/* The compiler may drop an allocation whose result goes nowhere: make each one escape. */
static void *keep(void *p)
{
	__asm__ volatile("" : "+r"(p) : : "memory");
	return p;
}

static void allocs(void)
{
	void *p[100], *q;

	for (int i = 0; i < 100; i++)
		p[i] = keep(malloc(64));
	for (int i = 0; i < 100; i++)
		free(p[i]);
	q = keep(calloc(10, 100));
	q = keep(realloc(q, 2000));
	free(q);
	if (posix_memalign(&q, 64, 1000) == 0)
		free(keep(q));
	free(keep(aligned_alloc(128, 256)));
	free(keep(memalign(32, 100)));
	free(keep(NULL));
}

static void descriptors(const char *dir)
{
	struct iovec iov[2] = {{buf, 10}, {buf + 10, 20}};
	int fd;

	fd = open(in_dir(dir, "data"), O_RDWR | O_CREAT | O_TRUNC, 0600);
	for (int i = 0; i < 10; i++)
		write(fd, buf, 4096);
	lseek(fd, 0, SEEK_SET);
	for (int i = 0; i < 11; i++)
		read(fd, buf, g_4k); /* the 11th is at the end of the file: 0 */
	for (int i = 0; i < 4; i++)
		pread(fd, buf, g_512, (off_t)i * 4096);
	pwrite(fd, buf, 100, 40960);
	ftruncate(fd, 8192);
	fsync(fd);
	fdatasync(fd);
	close(fd);
	read(fd, buf, 1); /* EBADF on a descriptor no longer open */

	fd = creat(in_dir(dir, "c"), 0644);
	write(fd, buf, 10);
	close(fd);

	fd = open(in_dir(dir, "v"), O_RDWR | O_CREAT, 0600);
	writev(fd, iov, 2);
	lseek(fd, 0, SEEK_SET);
	readv(fd, iov, 2);
	close(fd);

	fd = openat(AT_FDCWD, in_dir(dir, "data"), O_RDONLY);
	close(fd);
}

static void streams(const char *dir)
{
	char other[4096];
	FILE *fp;
	int fd;

	fp = fopen(in_dir(dir, "text"), "w");
	fwrite(buf, 1, 1000, fp);
	fwrite(buf, 100, 3, fp);
	fflush(fp);
	fseek(fp, 0, SEEK_END);
	fclose(fp);

	fp = fopen(in_dir(dir, "data"), "r");
	fread(buf, g_4k, 2, fp);
	fclose(fp);

	fp = fopen(in_dir(dir, "missing/x"), "r"); /* ENOENT */

	fd = open(in_dir(dir, "c"), O_RDONLY);
	fp = fdopen(fd, "r");
	fclose(fp);

	snprintf(other, sizeof(other), "%s/text2", dir);
	rename(in_dir(dir, "text"), other);
	unlink(other);
	unlink(other); /* ENOENT */
}

/* Exits 4 when the allocator did not do what `bufs` relies on. */
static int bufs(const char *dir)
{
	char stack[64] = {0};
	char *p, *q, *pin, *m, *f;
	int fd;

	fd = open(in_dir(dir, "b"), O_RDWR | O_CREAT | O_TRUNC, 0600);
	p = keep(malloc(8192));
	pin = keep(malloc(100));
	memset(p, 'p', 8192);
	write(fd, p, 4096);
	write(fd, p + 100, 50);
	write(fd, stack, 10);
	q = keep(realloc(p, 4u << 20));
	if (q == p)
		return 4;
	write(fd, q + 1000, 10);
	free(q);
	free(pin);
	m = mmap(NULL, 16384, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 4;
	write(fd, m + 4104, 8);
	munmap(m + 4096, 4096);
	write(fd, m + 8208, 8);
	write(fd, m + 4096, 8); /* EFAULT: no longer mapped */
	munmap(m, 4096);
	munmap(m + 8192, 8192);
	f = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, fd, 0);
	if (f == MAP_FAILED)
		return 4;
	write(fd, f + 10, 5);
	munmap(f, 8192);
	close(fd);
	return 0;
}

static int seqread(const char *dir, int n)
{
	char *b = keep(malloc((size_t)n * 512));
	int fd = open(in_dir(dir, "s"), O_RDWR | O_CREAT | O_TRUNC, 0600);

	memset(b, 's', (size_t)n * 512);
	write(fd, b, (size_t)n * 512);
	lseek(fd, 0, SEEK_SET);
	for (int i = 0; i < n; i++)
		read(fd, b + (size_t)i * 512, 512);
	lseek(fd, 0, SEEK_SET);
	for (int i = 0; i < n; i++)
		read(fd, b, 512);
	close(fd);
	free(b);
	return 0;
}

static int g_fd;

static void *worker(void *arg)
{
	for (int i = 0; i < 10; i++) {
		char *p = keep(malloc(32));

		memset(p, 't', 32);
		write(g_fd, p + i, 16);
		free(p);
	}
	return arg;
}

static int threads(const char *dir, int n)
{
	pthread_t th[64];

	if (n < 1 || n > 64)
		return 2;
	g_fd = open(in_dir(dir, "t"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
	for (int i = 0; i < n; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	close(g_fd);
	return 0;
}

/* ---- churn ---- */

#define CHURN_LIVE 8

struct churn {
	int rounds;
	unsigned int seed;
	unsigned long sum;
};

struct live {
	char *p;
	size_t size;
	int mapped;
};

static void live_free(struct live *l)
{
	if (l->mapped)
		munmap(l->p, l->size);
	else
		free(l->p);
	l->p = NULL;
}

static void *churner(void *arg)
{
	struct churn *c = arg;
	struct live live[CHURN_LIVE] = {{0}};
	char tmp[16];

	for (int r = 0; r < c->rounds; r++) {
		struct live *l = &live[rand_r(&c->seed) % CHURN_LIVE];
		unsigned int kind = rand_r(&c->seed) % 16;

		if (l->p)
			live_free(l);
		l->size = 16 + rand_r(&c->seed) % 4000;
		l->mapped = 0;
		if (kind == 0) {
			l->size = (1u << 20) + 4096 * (rand_r(&c->seed) % 4);
			l->p = keep(malloc(l->size));
		} else if (kind == 1) {
			l->size = 4096 * (1 + rand_r(&c->seed) % 8);
			l->p = mmap(NULL, l->size, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			l->mapped = 1;
		} else if (kind == 2) {
			l->p = keep(calloc(1, l->size));
		} else if (kind == 3) {
			l->p = keep(malloc(l->size / 2));
			l->p = keep(realloc(l->p, l->size));
		} else {
			l->p = keep(malloc(l->size));
		}
		if (!l->p || l->p == MAP_FAILED)
			exit(5);
		memset(l->p, 0, l->size);
		pread(g_fd, l->p + l->size / 2, 8, (off_t)(r % 64) * 8);
		c->sum = c->sum * 31 + (unsigned char)l->p[l->size / 2 + r % 8];
		pread(g_fd, tmp, 8, 0); /* a stack buffer: id 0 */
		c->sum += (unsigned char)tmp[r % 8];
	}
	for (int i = 0; i < CHURN_LIVE; i++)
		if (live[i].p)
			live_free(&live[i]);
	return NULL;
}

static int churn(const char *dir, int n, int rounds)
{
	struct churn c[64];
	pthread_t th[64];
	unsigned long sum = 0;
	char data[512];

	if (n < 1 || n > 64)
		return 2;
	for (int i = 0; i < 512; i++)
		data[i] = (char)(i * 7 + 3);
	g_fd = open(in_dir(dir, "churn"), O_RDWR | O_CREAT | O_TRUNC, 0600);
	write(g_fd, data, sizeof(data));
	for (int i = 0; i < n; i++) {
		c[i] = (struct churn){rounds, (unsigned int)i + 1, 0};
		pthread_create(&th[i], NULL, churner, &c[i]);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		sum = sum * 1000003 + c[i].sum;
	}
	close(g_fd);
	printf("%lx\n", sum);
	return 0;
}

static volatile int g_stop;

static void *spinner(void *arg)
{
	struct churn *c = arg;

	while (!g_stop) {
		c->rounds = 50;
		churner(c);
	}
	return NULL;
}

static int forks(const char *dir, int n)
{
	struct churn c[4];
	pthread_t th[4];
	int bad = 0;

	g_fd = open(in_dir(dir, "forks"), O_RDWR | O_CREAT | O_TRUNC, 0600);
	write(g_fd, buf, 512);
	for (int i = 0; i < 4; i++) {
		c[i] = (struct churn){50, (unsigned int)i + 1, 0};
		pthread_create(&th[i], NULL, spinner, &c[i]);
	}
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		int status;

		if (pid == 0) {
			char *p = keep(malloc(100));

			memset(p, 'c', 100);
			write(g_fd, p + 10, 10);
			free(p);
			_exit(0);
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			bad = 1;
	}
	g_stop = 1;
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	close(g_fd);
	return bad ? 6 : 0;
}

static void *map_and_forget(void *arg)
{
	void **at = arg;

	*at = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	syscall(SYS_munmap, *at, 4096);
	return NULL;
}

static int remap(void)
{
	pthread_t th;
	void *a = MAP_FAILED, *b;

	pthread_create(&th, NULL, map_and_forget, &a);
	pthread_join(th, NULL);
	if (a == MAP_FAILED)
		return 5;
	/* a hint the kernel takes, the page being free: not MAP_FIXED, so a proxy maps anywhere */
	b = mmap(a, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b != a)
		return 5;
	munmap(b, 4096);
	return 0;
}

static const char *g_clock_file;

static long long mono_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void *clock_samples(void *arg)
{
	int fd = open(g_clock_file, O_RDONLY);

	for (int i = 0; i < 360; i++) {
		const long long gap = i < 300 ? 100000 : 3000000;
		const long long until = mono_now() + gap;

		lseek(fd, (off_t)mono_now(), SEEK_SET);
		if (i < 300) {
			while (mono_now() < until)
				;
		} else {
			nanosleep(&(struct timespec){0, gap}, NULL);
		}
	}
	close(fd);
	return arg;
}

static int clock_threads(void)
{
	pthread_t th[3];

	for (int i = 0; i < 3; i++)
		pthread_create(&th[i], NULL, clock_samples, NULL);
	clock_samples(NULL);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	return 0;
}

static int clocks(const char *dir)
{
	int st;
	pid_t pid;

	g_clock_file = strdup(in_dir(dir, "c"));
	close(open(g_clock_file, O_WRONLY | O_CREAT | O_TRUNC, 0644));
	clock_threads();
	pid = fork();
	if (pid == 0)
		_exit(clock_threads());
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : 6;
}

static int g_sig_fd;
static atomic_bool g_sig_stop;

static void sig_lseek(int sig)
{
	(void)sig;
	lseek(g_sig_fd, 1, SEEK_SET);
}

static void *sig_flood(void *arg)
{
	const pthread_t to = *(const pthread_t *)arg;

	while (!atomic_load(&g_sig_stop))
		pthread_kill(to, SIGUSR1);
	return NULL;
}

static int sig_clock(const char *dir)
{
	struct sigaction sa = {.sa_handler = sig_lseek, .sa_flags = SA_RESTART};
	pthread_t self = pthread_self(), th;
	long long until;
	int fd;

	fd = open(in_dir(dir, "c"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	g_sig_fd = open(path, O_RDONLY);
	if (fd < 0 || g_sig_fd < 0 || sigaction(SIGUSR1, &sa, NULL) < 0 ||
	    pthread_create(&th, NULL, sig_flood, &self))
		return 7;
	until = mono_now() + 1500000000LL;
	while (mono_now() < until) {
		for (int i = 0; i < 1000; i++)
			lseek(fd, (off_t)mono_now(), SEEK_SET);
	}
	atomic_store(&g_sig_stop, true);
	pthread_join(th, NULL);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "calls")) {
		allocs();
		descriptors(argv[2]);
		streams(argv[2]);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "threads"))
		return threads(argv[2], atoi(argv[3]));
	if (argc == 3 && !strcmp(argv[1], "bufs"))
		return bufs(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "seqread"))
		return seqread(argv[2], atoi(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "forks"))
		return forks(argv[2], atoi(argv[3]));
	if (argc == 2 && !strcmp(argv[1], "remap"))
		return remap();
	if (argc == 3 && !strcmp(argv[1], "clock"))
		return clocks(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "sigclock"))
		return sig_clock(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "churn"))
		return churn(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (argc == 2 && !strcmp(argv[1], "errno")) {
		errno = 77;
		free(keep(malloc(8)));
		if (errno != 77)
			return 3;
		if (write(-1, buf, 1) != -1 || errno != EBADF)
			return 3;
		errno = 78;
		if (close(open("/dev/null", O_RDONLY)) != 0 || errno != 78)
			return 3;
		if (fopen("/nonexistent/x", "r") || errno != ENOENT)
			return 3;
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "closefrom")) {
		const int n = atoi(argv[2]);

		for (int fd = 3; fd < n; fd++)
			close(fd);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "loop")) {
		long n = atol(argv[2]);

		for (long i = 0; i < n; i++) {
			free(keep(malloc(64)));
		}
		return 0;
	}
	return 2;
}
