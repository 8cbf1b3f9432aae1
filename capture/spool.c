/*
 * Creating, attaching and carving the spool, and both sides of the wait for a free chunk
 * (spool_i.h has the layout and the protocol). Used by the producer (capture.c), by the
 * in-process consumer and by `tracefs record`. It never reads records: consumer.c does. It
 * allocates nothing with malloc, so the producer may call it from a constructor before
 * anything else is set up.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "spool_i.h"

_Static_assert(sizeof(struct spool_chunk) == SPOOL_CHUNK_HDR_BYTES, "chunk header size");
_Static_assert(sizeof(struct spool_hdr) <= SPOOL_HDR_BYTES, "spool header size");

static uint64_t clock_ns(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/*
 * Map @fd (anonymous shared memory when -1). Nothing is faulted in here: producers fault in
 * what they will write (cap_spool_prefault, grow), as a first-touch fault per page on the
 * hot path costs more than the event itself, and the rest costs nothing until it is ready.
 */
static int map_fd(struct spool *s, int fd, size_t bytes)
{
	int flags = fd < 0 ? MAP_SHARED | MAP_ANONYMOUS : MAP_SHARED;
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags, fd, 0);

	if (p == MAP_FAILED)
		return -errno;
	s->hdr = p;
	s->map_bytes = bytes;
	return 0;
}

/*
 * Give the first @bytes of spool file @fd memory now: a tmpfs out of space then says so
 * here instead of raising SIGBUS at the first store. File systems without fallocate
 * allocate on first store as before.
 */
static int reserve(int fd, size_t bytes)
{
	if (fallocate(fd, 0, 0, (off_t)bytes) == 0 || errno == EOPNOTSUPP)
		return 0;
	return -errno;
}

/*
 * Fault @len bytes at @off of the mapping in for writing. Kernels before 5.14 lack
 * MADV_POPULATE_WRITE (EINVAL): each page is then written by an atomic add of 0 to its
 * first word (a chunk's state, or record words no one else writes yet), which cannot
 * report a failure.
 */
static int populate(const struct spool *s, size_t off, size_t len)
{
	uint8_t *p = (uint8_t *)s->hdr + off;

	if (madvise(p, len, MADV_POPULATE_WRITE) == 0)
		return 0;
	if (errno != EINVAL)
		return -errno;
	for (size_t o = 0; o < len; o += 4096)
		atomic_fetch_add_explicit((_Atomic uint32_t *)(void *)(p + o), 0,
					  memory_order_relaxed);
	return 0;
}

static size_t ready_bytes(uint32_t n_ready)
{
	return SPOOL_HDR_BYTES + (size_t)n_ready * SPOOL_CHUNK_BYTES;
}

/*
 * Create and map, @n_ready chunks ready (0: all); @prefault: the caller produces into it
 * (an anonymous spool always: it is the in-process producer's). The caller fills the rest
 * of the header and publishes the magic.
 */
static int create(struct spool *s, const char *path, size_t bytes, uint32_t n_ready,
		  bool prefault)
{
	size_t n_chunks = bytes / SPOOL_CHUNK_BYTES;
	size_t total;
	int fd = -1, rc;

	if (n_chunks < 2)
		n_chunks = 2;
	if (n_chunks > UINT32_MAX / 2)
		return -EINVAL;
	if (n_ready == 0 || n_ready > n_chunks)
		n_ready = (uint32_t)n_chunks;
	total = SPOOL_HDR_BYTES + n_chunks * SPOOL_CHUNK_BYTES;
	if (path) {
		/* a name taken (a file, a link) is refused, never followed or reused */
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
		if (ftruncate(fd, (off_t)total) < 0) {
			rc = -errno;
			goto err_close_fd;
		}
		rc = reserve(fd, ready_bytes(n_ready));
		if (rc < 0)
			goto err_close_fd;
	}
	rc = map_fd(s, fd, total);
	if (rc < 0)
		goto err_close_fd;
	if (fd >= 0)
		close(fd);
	/* reserved, or anonymous memory faulted in on use: it only saves faults */
	if (fd < 0 || prefault)
		(void)populate(s, 0, ready_bytes(n_ready));
	s->hdr->version = SPOOL_VERSION;
	s->hdr->chunk_bytes = SPOOL_CHUNK_BYTES;
	s->hdr->n_chunks = (uint32_t)n_chunks;
	atomic_store_explicit(&s->hdr->n_ready, n_ready, memory_order_relaxed);
	return 0;

err_close_fd:
	if (fd >= 0)
		close(fd);
	if (path)
		unlink(path);
	return rc;
}

/* The magic last: a producer or consumer attaching early sees a complete header or none. */
static void publish(struct spool *s)
{
	atomic_thread_fence(memory_order_release);
	s->hdr->magic = SPOOL_MAGIC;
}

int cap_spool_create(struct spool *s, const char *path, size_t bytes, uint32_t n_ready,
		     uint32_t timing, uint32_t trace_mask)
{
	int rc = create(s, path, bytes, n_ready, false);

	if (rc < 0)
		return rc;
	s->hdr->origin_ns = clock_ns(CLOCK_MONOTONIC);
	s->hdr->origin_realtime_ns = clock_ns(CLOCK_REALTIME);
	s->hdr->timing = timing;
	s->hdr->trace_mask = trace_mask;
	publish(s);
	return 0;
}

int cap_spool_create_child(struct spool *s, const char *path, const struct spool_hdr *parent,
			   uint32_t pid, uint32_t ppid, uint64_t start, uint32_t index)
{
	int rc = create(s, path, (size_t)parent->n_chunks * parent->chunk_bytes,
			SPOOL_START_CHUNKS, true);

	if (rc < 0)
		return rc;
	s->hdr->origin_ns = parent->origin_ns;
	s->hdr->origin_realtime_ns = parent->origin_realtime_ns;
	s->hdr->timing = parent->timing;
	s->hdr->trace_mask = parent->trace_mask;
	s->hdr->bt_depth = parent->bt_depth;
	s->hdr->policy = parent->policy;
	atomic_store_explicit(&s->hdr->tsc_hz, atomic_load(&parent->tsc_hz),
			      memory_order_relaxed);
	/* a forked process runs its parent's image (an exec'd or spawned one adds its own) */
	memcpy(s->hdr->images, parent->images, sizeof(s->hdr->images));
	s->hdr->images[sizeof(s->hdr->images) - 1] = '\0';
	s->hdr->parent_pid = ppid;
	s->hdr->fork_ns = clock_ns(CLOCK_MONOTONIC);
	s->hdr->start_index = index;
	atomic_store_explicit(&s->hdr->producer_pid, pid, memory_order_relaxed);
	atomic_store_explicit(&s->hdr->producer_start, start, memory_order_relaxed);
	publish(s);
	return 0;
}

/* The decimal number at *@p, *@p moved past it and the space after it. */
static uint64_t stat_field(const char **p)
{
	uint64_t v = 0;

	for (; **p >= '0' && **p <= '9'; ++*p)
		v = v * 10 + (uint64_t)(**p - '0');
	if (**p == ' ')
		++*p;
	return v;
}

/* "/proc/<pid>/stat", or "/proc/self/stat" for @pid 0, into @path: without snprintf, which
 * is not async-signal-safe. */
static void proc_stat_path(uint32_t pid, char path[static 32])
{
	char digits[10];
	size_t n = 0, len = 6;

	memcpy(path, "/proc/", 6);
	if (!pid) {
		memcpy(path + len, "self", 4);
		len += 4;
	}
	for (; pid; pid /= 10)
		digits[n++] = (char)('0' + pid % 10);
	while (n)
		path[len++] = digits[--n];
	memcpy(path + len, "/stat", 6);
}

int cap_proc_stat(uint32_t pid, struct cap_proc_stat *st)
{
	char path[32], buf[1024];
	const char *p;
	ssize_t n;
	int fd;

	*st = (struct cap_proc_stat){0};
	proc_stat_path(pid, path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -ESRCH;
	buf[n] = '\0';
	/* field 2, the command, is in parentheses and may hold anything: count from its end */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2] || p[3] != ' ')
		return -EBADMSG;
	st->state = p[2];
	p += 4;
	st->ppid = (uint32_t)stat_field(&p);
	for (int field = 5; field < 22 && *p; field++)
		p = strchr(p, ' ') ? strchr(p, ' ') + 1 : "";
	st->start = stat_field(&p);
	return 0;
}

int cap_spool_child_path(const char *root, uint32_t pid, char *buf, size_t cap)
{
	return (size_t)snprintf(buf, cap, "%s.%" PRIu32, root, pid) < cap ? 0 : -ENAMETOOLONG;
}

int cap_spool_save_path(const char *root, char *buf, size_t cap)
{
	return (size_t)snprintf(buf, cap, "%s%s", root, SPOOL_SAVE_SUFFIX) < cap ? 0
										   : -ENAMETOOLONG;
}

/* @s starts with 1 to 10 digits; the first byte after them in *@end. */
static bool digits(const char *s, const char **end)
{
	size_t n = strspn(s, "0123456789");

	*end = s + n;
	return n > 0 && n <= 10;
}

bool cap_spool_is_child_name(const char *name, bool *aside)
{
	const size_t n = strlen(SPOOL_FIRST);
	const char *p;

	*aside = false;
	if (strncmp(name, SPOOL_FIRST ".", n + 1) != 0 || !digits(name + n + 1, &p))
		return false;
	if (!*p)
		return true;
	*aside = true;
	return *p == '.' && digits(p + 1, &p) && !*p;
}

int cap_spool_move_aside(const char *path, char *aside, size_t cap)
{
	for (unsigned int k = 1; k <= 1000; k++) {
		if ((size_t)snprintf(aside, cap, "%s.%u", path, k) >= cap)
			return -ENAMETOOLONG;
		if (renameat2(AT_FDCWD, path, AT_FDCWD, aside, RENAME_NOREPLACE) == 0)
			return 0;
		if ((errno == EINVAL || errno == ENOSYS) && link(path, aside) == 0)
			return unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

int cap_spool_attach_fd(struct spool *s, int fd)
{
	struct spool_hdr h;
	struct stat st;
	int rc;

	if (fstat(fd, &st) < 0)
		return -errno;
	/* another user's file is never taken for ours, whatever its name and header */
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
		return -EPERM;
	if ((size_t)st.st_size < SPOOL_HDR_BYTES || pread(fd, &h, sizeof(h), 0) != sizeof(h))
		return -EBADMSG;
	if (h.magic != SPOOL_MAGIC || h.version != SPOOL_VERSION || h.chunk_bytes < 4096 ||
	    h.chunk_bytes % 4096 || h.n_chunks < 2 ||
	    (uint64_t)st.st_size != SPOOL_HDR_BYTES + (uint64_t)h.n_chunks * h.chunk_bytes)
		return -EBADMSG;
	rc = map_fd(s, fd, (size_t)st.st_size);
	if (rc == 0)
		s->ino = (uint64_t)st.st_ino;
	return rc;
}

int cap_spool_attach(struct spool *s, const char *path)
{
	int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return errno == ELOOP ? -EPERM : -errno;
	rc = cap_spool_attach_fd(s, fd);
	close(fd);
	return rc;
}

void cap_spool_unmap(struct spool *s)
{
	if (s->hdr)
		munmap(s->hdr, s->map_bytes);
	s->hdr = NULL;
	s->map_bytes = 0;
	s->ino = 0;
}

int cap_spool_prefault(struct spool *s)
{
	return populate(s, 0, ready_bytes(cap_spool_n_ready(s)));
}

/* Claim a free chunk among the @n ready ones. @return the chunk or NULL */
static struct spool_chunk *claim_ready(const struct spool *s, uint32_t n, uint32_t thread,
				       uint64_t seq)
{
	uint32_t start = atomic_load_explicit(&s->hdr->claim_hint, memory_order_relaxed) % n;

	for (uint32_t k = 0; k < n; k++) {
		uint32_t idx = start + k < n ? start + k : start + k - n;
		struct spool_chunk *c = cap_spool_chunk(s, idx);
		uint32_t expect = SPOOL_FREE;

		if (atomic_load_explicit(&c->state, memory_order_relaxed) != SPOOL_FREE)
			continue;
		if (!atomic_compare_exchange_strong_explicit(&c->state, &expect, SPOOL_CLAIMING,
							     memory_order_acquire,
							     memory_order_relaxed))
			continue;
		c->thread = thread;
		c->seq = seq;
		atomic_store_explicit(&c->fill, 0, memory_order_relaxed);
		atomic_store_explicit(&c->state, SPOOL_OWNED, memory_order_release);
		atomic_store_explicit(&s->hdr->claim_hint, idx + 1, memory_order_relaxed);
		return c;
	}
	return NULL;
}

/*
 * Double the ready chunks (@n of them) up to the whole spool, allocating the new ones
 * first. Producers racing here allocate the same pages (harmless); one publishes.
 * @return whether there are more ready chunks than @n now
 */
static bool grow(const struct spool *s, uint32_t n)
{
	const uint32_t all = s->hdr->n_chunks;
	uint32_t to;

	if (n >= all)
		return false;
	to = n == 0 ? 1 : n < all - n ? 2 * n : all;
	if (populate(s, ready_bytes(n), (size_t)(to - n) * SPOOL_CHUNK_BYTES) < 0)
		return false;
	atomic_compare_exchange_strong_explicit(&s->hdr->n_ready, &n, to, memory_order_release,
						memory_order_relaxed);
	return true;
}

struct spool_chunk *cap_spool_claim(const struct spool *s, uint32_t thread, uint64_t seq)
{
	for (;;) {
		uint32_t n = cap_spool_n_ready(s);
		struct spool_chunk *c = n ? claim_ready(s, n, thread, seq) : NULL;

		if (c || !grow(s, n))
			return c;
	}
}

/* Sleep until *@word is no longer @val, a wake-up, or @nap_ns. Not a cancellation point. */
static void futex_wait(_Atomic uint32_t *word, uint32_t val, long nap_ns)
{
	const struct timespec nap = {0, nap_ns};

	(void)syscall(SYS_futex, word, FUTEX_WAIT, val, &nap, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
	(void)syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* The first tries yield the CPU (to the consumer, on a machine with few cores), then sleep. */
#define WAIT_YIELDS 4

struct spool_chunk *cap_spool_claim_wait(const struct spool *s, uint32_t thread, uint64_t seq,
					 uint64_t limit_ns, bool *stalled)
{
	struct spool_hdr *h = s->hdr;
	const uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
	uint64_t now = t0, moved = t0;
	uint32_t seen = atomic_load(&h->recycled);
	struct spool_chunk *c = NULL;

	*stalled = false;
	atomic_fetch_add(&h->n_waiting, 1);
	for (unsigned int k = 0; atomic_load(&h->consumer) != SPOOL_CONSUMER_DONE; k++) {
		/* read before the claim: a chunk freed after it ends the sleep at once */
		uint32_t r = atomic_load(&h->recycled);

		c = cap_spool_claim(s, thread, seq);
		if (c)
			break;
		if (r != seen) {
			seen = r;
			moved = now;
		} else if (now - moved >= limit_ns) {
			*stalled = true;
			break;
		}
		if (k < WAIT_YIELDS)
			sched_yield();
		else
			futex_wait(&h->recycled, r, SPOOL_WAIT_NAP_NS);
		now = clock_ns(CLOCK_MONOTONIC);
	}
	atomic_fetch_sub(&h->n_waiting, 1);
	atomic_fetch_add_explicit(&h->wait_ns, clock_ns(CLOCK_MONOTONIC) - t0,
				  memory_order_relaxed);
	return c;
}

void cap_spool_recycled(const struct spool *s)
{
	/* sequentially consistent, as the waiter's count and read: one of them sees the other */
	atomic_fetch_add(&s->hdr->recycled, 1);
	if (atomic_load(&s->hdr->n_waiting))
		futex_wake_all(&s->hdr->recycled);
}

void cap_spool_set_consumer(const struct spool *s, enum spool_consumer state)
{
	atomic_store(&s->hdr->consumer, (uint32_t)state);
	if (state == SPOOL_CONSUMER_DONE) {
		atomic_fetch_add(&s->hdr->recycled, 1);
		futex_wake_all(&s->hdr->recycled);
	}
}

int cap_parse_when_full(const char *s, uint32_t *out)
{
	if (!s || !*s || !strcmp(s, "wait"))
		*out = SPOOL_WAIT;
	else if (!strcmp(s, "drop"))
		*out = SPOOL_DROP;
	else
		return -EINVAL;
	return 0;
}

int cap_parse_count(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	unsigned int shift = 0;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		uint64_t d = (uint64_t)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	if (*s == 'k' || *s == 'K')
		shift = 10;
	else if (*s == 'm' || *s == 'M')
		shift = 20;
	else if (*s == 'g' || *s == 'G')
		shift = 30;
	if (shift)
		s++;
	if (*s || v == 0 || v > UINT64_MAX >> shift)
		return -EINVAL;
	*out = v << shift;
	return 0;
}

void cap_sample_describe(const struct spool_policy *p, char *buf, size_t cap)
{
	if (p->sample == SPOOL_SAMPLE_CALLS)
		snprintf(buf, cap, "1 in %" PRIu64 " allocations (per thread)", p->sample_every);
	else if (p->sample == SPOOL_SAMPLE_BYTES)
		snprintf(buf, cap, "1 per %" PRIu64 " bytes allocated (per thread)",
			 p->sample_every);
	else
		snprintf(buf, cap, "all");
}
