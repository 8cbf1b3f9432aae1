/*
 * The table of live allocations (allocs_i.h): address ranges to allocation ids, kept by the
 * malloc-family and mmap interposers, read by the I/O interposers and the MPI wrappers to
 * record a buffer pointer as (allocation id, offset). It does not record anything itself.
 *
 * Heap blocks under a region (1 MiB) live in one of N_SHARDS shards, chosen by the region
 * of the block's start, each behind its own spinlock: a thread's blocks mostly come from its
 * own malloc arena, so threads rarely meet on a shard. In a shard, a small block (at most
 * SMALL_MAX bytes, 16-byte aligned, as glibc returns them: nine mallocs in ten of gcc's cc1)
 * is one entry of a hash table by its start, laid out by page (small_home), so that its
 * malloc and free cost at most one or two cache misses, shared with its neighbours; the
 * other blocks are a treap (O(log n) steps). A lookup inside a small block
 * probes the starts 16 bytes apart below it, at most SMALL_MAX / 16 + 1 of them; where both
 * structures answer (an entry left stale, below), the later id wins. A block smaller than a
 * region starts in the region of any address inside it or in the region before, so a lookup
 * searches at most two shards.
 * Larger heap blocks and every mapped region go to one sorted array (the big set): they are
 * few, and their updates come with a system call anyway. Tree nodes and the array live in
 * memory mapped by raw system calls, never the interposed allocator.
 *
 * A block is taken out before the allocator frees it and entered after the allocator
 * returned it, so the table never holds two live entries for one address, whatever other
 * threads do meanwhile. A block freed without the table knowing (a free made while the
 * capture was inside itself) leaves a stale entry, replaced when its address is handed out
 * again: lookups near it may then say "unknown" but never crash. fork() takes every lock
 * (pthread_atfork) so the child starts with a consistent table.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "allocs_i.h"

#define TLS_IE __attribute__((tls_model("initial-exec")))

#define REGION_SHIFT 20 /* heap blocks under 1 MiB go to the shards */
#define REGION_BYTES ((uintptr_t)1 << REGION_SHIFT)
#define N_SHARDS 256		 /* a power of two */
#define SLAB_BYTES (64u * 1024u) /* tree nodes are mapped this many bytes at a time */
#define BIG_INITIAL 256		 /* entries of the big set's first array */
#define LOCK_SPINS 64		 /* tries before a waiting thread yields */
#define SMALL_MAX 256		 /* bytes of the largest block of a shard's hash table */
#define SMALL_ALIGN 16		 /* ... whose start is a multiple of this */
#define SMALL_INITIAL 1024	 /* entries of a shard's first hash table (a power of two) */

/* A heap block [lo, hi) in a shard's treap: a search tree on lo, a max-heap on prio. */
struct anode {
	uintptr_t lo, hi; /* hi > lo: a zero-size block covers its first byte */
	uint64_t id;
	struct anode *l, *r; /* l: also the next spare node while unused */
	uint32_t prio;	     /* a hash of lo */
};

/* A small heap block in a shard's hash table; lo 0: an empty slot. */
struct snode {
	uintptr_t lo;
	uint64_t id;
	uint32_t size; /* 1 for a zero-size block: it covers its first byte */
};

struct shard {
	atomic_int lock;
	struct anode *root;  /* under lock */
	struct anode *spare; /* unused nodes, under lock */
	struct snode *small; /* [small_cap] open addressing by lo, under lock; NULL: none yet */
	uint32_t small_cap, n_small;
} __attribute__((aligned(64)));

/* A mapped region or a heap block of a region or more. */
struct big {
	uintptr_t lo, hi; /* [lo, hi) */
	uintptr_t base;	  /* offsets count from here: lo until a munmap trimmed the front */
	uint64_t id;
	bool map; /* from mmap (munmap applies), else from the malloc family */
};

bool cap_allocs_enabled_ = true;

static struct shard g_shards[N_SHARDS];
static atomic_int g_big_lock;
static struct big *g_big;	  /* sorted by lo, under g_big_lock */
static size_t g_n_big, g_big_cap; /* entries in use, entries available */
static _Atomic uint64_t g_next_id = 1; /* the first id no thread has taken */
static uintptr_t g_page = 4096;
static _Thread_local bool tls_inside TLS_IE; /* this thread holds a lock of the table */
/* the thread's batch of ids [next, end) (allocs_i.h); a forked child goes on with it */
static _Thread_local uint64_t tls_id_next TLS_IE, tls_id_end TLS_IE;

/* Memory for the table itself: straight from the kernel, errno left alone. */
static void *raw_map(size_t bytes)
{
	const int saved_errno = errno;
	long p = syscall(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);

	errno = saved_errno;
	return p == -1 ? NULL : (void *)p;
}

static void raw_unmap(void *p, size_t bytes)
{
	const int saved_errno = errno;

	syscall(SYS_munmap, p, bytes);
	errno = saved_errno;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/*
 * The table's locks: critical sections are a few dozen instructions, so a lock spins a
 * little, then yields the processor (its holder may have been preempted: with more threads
 * than cores, spinning on would burn the holder's time slice).
 */
static __attribute__((noinline)) void lock_wait(atomic_int *l)
{
	for (unsigned int spins = 0;; spins++) {
		if (!atomic_load_explicit(l, memory_order_relaxed) &&
		    !atomic_exchange_explicit(l, 1, memory_order_acquire))
			return;
		if (spins >= LOCK_SPINS)
			sched_yield();
		else
			cpu_relax();
	}
}

/* Inline when free, as it mostly is: one exchange on the caller's path. */
static inline void lock(atomic_int *l)
{
	if (__builtin_expect(atomic_exchange_explicit(l, 1, memory_order_acquire), 0))
		lock_wait(l);
}

static inline void unlock(atomic_int *l)
{
	atomic_store_explicit(l, 0, memory_order_release);
}

/*
 * Enter the table on this thread: false when this thread is already inside it (a signal
 * handler interrupted it). The capture counts as entered meanwhile, so interposed calls a
 * signal handler makes pass through.
 */
static bool enter_table(void)
{
	if (tls_inside)
		return false;
	tls_inside = true;
	cap_tls_depth++;
	return true;
}

static void leave_table(void)
{
	cap_tls_depth--;
	tls_inside = false;
}

static struct shard *shard_of(uintptr_t region)
{
	return &g_shards[((region * 0x9e3779b97f4a7c15u) >> 56) & (N_SHARDS - 1)];
}

static uint32_t prio_of(uintptr_t lo)
{
	uint64_t x = (uint64_t)lo * 0x9e3779b97f4a7c15u;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9u;
	return (uint32_t)(x >> 32);
}

/* ---- treaps ---- */

/*
 * Split @t into the nodes below @key (*@l) and above it (*@r). @return the node at @key
 * itself, taken out, or NULL
 */
static struct anode *split(struct anode *t, uintptr_t key, struct anode **l, struct anode **r)
{
	while (t) {
		if (t->lo < key) {
			*l = t;
			l = &t->r;
			t = t->r;
		} else if (t->lo > key) {
			*r = t;
			r = &t->l;
			t = t->l;
		} else {
			*l = t->l;
			*r = t->r;
			return t;
		}
	}
	*l = *r = NULL;
	return NULL;
}

/* Join @a and @b, every key of @a below every key of @b. */
static struct anode *merge(struct anode *a, struct anode *b)
{
	struct anode *root = NULL, **link = &root;

	while (a && b) {
		if (a->prio > b->prio) {
			*link = a;
			link = &a->r;
			a = a->r;
		} else {
			*link = b;
			link = &b->l;
			b = b->l;
		}
	}
	*link = a ? a : b;
	return root;
}

/* Insert @n. @return the node left over: a stale one @n replaced, or NULL */
static struct anode *tree_insert(struct anode **root, struct anode *n)
{
	struct anode **link = root, *t;

	while ((t = *link) && t->prio >= n->prio) {
		if (t->lo == n->lo) {
			t->hi = n->hi;
			t->id = n->id;
			return n;
		}
		link = n->lo < t->lo ? &t->l : &t->r;
	}
	*link = n;
	return split(t, n->lo, &n->l, &n->r);
}

static struct anode *tree_remove(struct anode **root, uintptr_t key)
{
	struct anode **link = root, *t;

	while ((t = *link) && t->lo != key)
		link = key < t->lo ? &t->l : &t->r;
	if (t)
		*link = merge(t->l, t->r);
	return t;
}

/* The node with the greatest start at or below @p, or NULL. */
static const struct anode *tree_floor(const struct anode *t, uintptr_t p)
{
	const struct anode *best = NULL;

	while (t) {
		if (t->lo <= p) {
			best = t;
			t = t->r;
		} else {
			t = t->l;
		}
	}
	return best;
}

static struct anode *node_new(struct shard *s)
{
	struct anode *n = s->spare;
	size_t count = SLAB_BYTES / sizeof(*n);

	if (n) {
		s->spare = n->l;
		return n;
	}
	n = raw_map(SLAB_BYTES);
	if (!n)
		return NULL;
	for (size_t i = 1; i + 1 < count; i++)
		n[i].l = &n[i + 1];
	n[count - 1].l = NULL;
	s->spare = &n[1];
	return n;
}

static void node_free(struct shard *s, struct anode *n)
{
	n->l = s->spare;
	s->spare = n;
}

/* ---- small blocks: a hash table per shard ---- */

static bool is_small(uintptr_t lo, size_t size)
{
	return size <= SMALL_MAX && lo % SMALL_ALIGN == 0;
}

/*
 * The home slot of the block at @lo: the blocks of one 4 KiB page keep their order in a
 * window of 512 slots, every other one (the page's hash picks the window), so that blocks
 * made or freed together, mostly neighbours in memory, share cache lines of the table. A
 * hash of the whole address sent each to a line of its own: on python3 the table's cache
 * misses were 8% of the traced program's time, 5-6% this way. Every other slot, so that a
 * page of 16-byte blocks (jemalloc's, tcmalloc's smallest) fills half its window and
 * overflows no further than glibc's (at least 32 bytes apart) do.
 */
static uint32_t small_home(const struct shard *s, uintptr_t lo)
{
	const uint32_t page = (uint32_t)(((lo >> 12) * 0x9e3779b97f4a7c15u) >> 32);

	return ((page << 9) | (uint32_t)((lo >> 3) & 510)) & (s->small_cap - 1);
}

/* The index of @lo's slot in @s's table, or of the empty slot where it would go. */
static uint32_t small_index(const struct shard *s, uintptr_t lo)
{
	uint32_t i = small_home(s, lo);

	while (s->small[i].lo && s->small[i].lo != lo)
		i = (i + 1) & (s->small_cap - 1);
	return i;
}

static struct snode *small_slot(const struct shard *s, uintptr_t lo)
{
	return &s->small[small_index(s, lo)];
}

/* small_reserve() when the table is full or not made yet: a table twice as large. */
static __attribute__((noinline)) bool small_grow(struct shard *s)
{
	const uint32_t old_cap = s->small_cap, cap = old_cap ? 2 * old_cap : SMALL_INITIAL;
	struct snode *old = s->small, *a;

	if (old_cap > UINT32_MAX / 4)
		return false;
	a = raw_map((size_t)cap * sizeof(*a));
	if (!a)
		return false;
	s->small = a; /* raw_map's memory is zeroed: every slot empty */
	s->small_cap = cap;
	for (uint32_t i = 0; i < old_cap; i++)
		if (old[i].lo)
			*small_slot(s, old[i].lo) = old[i];
	if (old)
		raw_unmap(old, (size_t)old_cap * sizeof(*old));
	return true;
}

/* Room for one more entry (at most half full). Under the lock. @return false: no memory */
static inline bool small_reserve(struct shard *s)
{
	if (__builtin_expect(s->small && 2 * (s->n_small + 1) <= s->small_cap, 1))
		return true;
	return small_grow(s);
}

/* Enter a small block, replacing a stale entry at its start. @return false: no memory */
static bool small_put(struct shard *s, uintptr_t lo, size_t size, uint64_t id)
{
	struct snode *e;

	if (!small_reserve(s))
		return false;
	e = small_slot(s, lo);
	if (!e->lo)
		s->n_small++;
	*e = (struct snode){lo, id, size ? (uint32_t)size : 1};
	return true;
}

/*
 * Empty slot @i of @s's table, whose run goes on after it: move back each later entry of the
 * run whose home is not in (i, j], so that every entry stays reachable from its home.
 */
static __attribute__((noinline)) void small_close_gap(struct shard *s, uint32_t i)
{
	uint32_t j;

	for (j = (i + 1) & (s->small_cap - 1); s->small[j].lo; j = (j + 1) & (s->small_cap - 1)) {
		const uint32_t h = small_home(s, s->small[j].lo);

		if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
			s->small[i] = s->small[j];
			i = j;
		}
	}
	s->small[i].lo = 0;
}

/* Take out the entry at @lo into *@out. @return whether there was one */
static inline bool small_take(struct shard *s, uintptr_t lo, struct snode *out)
{
	uint32_t i;

	if (!s->small)
		return false;
	i = small_index(s, lo);
	if (!s->small[i].lo)
		return false;
	*out = s->small[i];
	s->n_small--;
	/* mostly the end of its run, the table being at most half full */
	if (!s->small[(i + 1) & (s->small_cap - 1)].lo)
		s->small[i].lo = 0;
	else
		small_close_gap(s, i);
	return true;
}

/* ---- the big set ---- */

/* Index of the last entry starting at or below @p, or -1. Under g_big_lock. */
static ptrdiff_t big_floor(uintptr_t p)
{
	size_t lo = 0, hi = g_n_big;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (g_big[mid].lo <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (ptrdiff_t)lo - 1;
}

/* Room for one more entry. Under g_big_lock. @return false when out of memory */
static bool big_reserve(void)
{
	size_t cap = g_big_cap ? 2 * g_big_cap : BIG_INITIAL;
	struct big *a;

	if (g_n_big < g_big_cap)
		return true;
	a = raw_map(cap * sizeof(*a));
	if (!a)
		return false;
	if (g_n_big)
		memcpy(a, g_big, g_n_big * sizeof(*a));
	if (g_big)
		raw_unmap(g_big, g_big_cap * sizeof(*a));
	g_big = a;
	g_big_cap = cap;
	return true;
}

/* Insert @e at index @at (kept sorted by the caller). Under g_big_lock. */
static void big_insert_at(size_t at, const struct big *e)
{
	if (!big_reserve())
		return;
	memmove(&g_big[at + 1], &g_big[at], (g_n_big - at) * sizeof(*e));
	g_big[at] = *e;
	g_n_big++;
}

static void big_delete_at(size_t at)
{
	memmove(&g_big[at], &g_big[at + 1], (g_n_big - at - 1) * sizeof(g_big[0]));
	g_n_big--;
}

/* Enter @e, replacing an entry at the same start. Under g_big_lock. */
static void big_put(const struct big *e)
{
	ptrdiff_t i = big_floor(e->lo);

	if (i >= 0 && g_big[i].lo == e->lo)
		g_big[i] = *e;
	else
		big_insert_at((size_t)(i + 1), e);
}

/* Unmap [a, b) from the mapped regions. Under g_big_lock. */
static void big_cut(uintptr_t a, uintptr_t b)
{
	ptrdiff_t f = big_floor(a);
	size_t i = f < 0 ? 0 : (size_t)f;

	while (i < g_n_big && g_big[i].lo < b) {
		struct big *e = &g_big[i];

		if (!e->map || e->hi <= a) {
			i++;
		} else if (e->lo >= a && e->hi <= b) {
			big_delete_at(i);
		} else if (e->lo < a && e->hi > b) {
			struct big tail = *e;

			tail.lo = b;
			e->hi = a;
			big_insert_at(i + 1, &tail);
			i += 2;
		} else if (e->lo < a) {
			e->hi = a;
			i++;
		} else {
			e->lo = b;
			i++;
		}
	}
}

/* ---- the interface ---- */

uint64_t cap_alloc_next_id(void)
{
	return atomic_load_explicit(&g_next_id, memory_order_relaxed);
}

void cap_alloc_ids_from(uint64_t next)
{
	uint64_t cur = atomic_load_explicit(&g_next_id, memory_order_relaxed);

	while (cur < next && !atomic_compare_exchange_weak_explicit(
				     &g_next_id, &cur, next, memory_order_relaxed,
				     memory_order_relaxed))
		;
}

/*
 * A new id, taken inside the table (a signal handler's call cannot interleave: it finds the
 * thread inside and takes one from the counter itself): from the thread's batch, refilled
 * ID_BATCH at a time, because one counter for every allocation of every thread moved its
 * cache line between cores on each call (a third of the table's cost on 8 threads).
 */
static uint64_t batch_id(void)
{
	atomic_signal_fence(memory_order_seq_cst); /* after tls_inside is set */
	if (tls_id_next == tls_id_end) {
		tls_id_next = atomic_fetch_add_explicit(&g_next_id, ID_BATCH, memory_order_relaxed);
		tls_id_end = tls_id_next + ID_BATCH;
	}
	return tls_id_next++;
}

/*
 * cap_alloc_add() of a block the shards' hash tables do not take: a block of a region or more
 * to the big set, another to its shard's treap. Out of line, as the common path needs none
 * of it.
 */
static __attribute__((noinline)) void add_other(uintptr_t lo, size_t size, uint64_t id)
{
	struct shard *s = shard_of(lo >> REGION_SHIFT);
	struct snode stale;
	struct anode *n, *old;

	if (size >= REGION_BYTES) {
		struct big e = {lo, lo + size, lo, id, false};

		lock(&g_big_lock);
		big_put(&e);
		unlock(&g_big_lock);
		return;
	}
	lock(&s->lock);
	/*
	 * A block of the treap replaces a stale small entry at its start, so that a free there
	 * takes the live one (a small block leaves a stale treap node to lookups only, where
	 * the later id wins).
	 */
	if (lo % SMALL_ALIGN == 0)
		(void)small_take(s, lo, &stale);
	n = node_new(s);
	if (n) {
		*n = (struct anode){lo, lo + (size ? size : 1), id, NULL, NULL, prio_of(lo)};
		old = tree_insert(&s->root, n);
		if (old)
			node_free(s, old);
	}
	unlock(&s->lock);
}

uint64_t cap_alloc_add(const void *p, size_t size, uint64_t id)
{
	const uintptr_t lo = (uintptr_t)p;
	bool put = false;

	if (!p)
		return 0;
	if (!enter_table())
		return id ? id : atomic_fetch_add_explicit(&g_next_id, 1, memory_order_relaxed);
	if (!id)
		id = batch_id();
	/* a small block the hash table has no room for goes to the treap */
	if (is_small(lo, size)) {
		struct shard *s = shard_of(lo >> REGION_SHIFT);

		lock(&s->lock);
		put = small_put(s, lo, size, id);
		unlock(&s->lock);
	}
	if (!put)
		add_other(lo, size, id);
	leave_table();
	return id;
}

/*
 * cap_alloc_remove() of the block at @lo when @s's hash table holds none there: out of its
 * treap, else out of the big set. Called under @s's lock, which it releases; out of line, as
 * the common path needs none of it. @return its id (0: none), its size in *@sz
 */
static __attribute__((noinline)) uint64_t remove_other(struct shard *s, uintptr_t lo, size_t *sz)
{
	struct anode *n = tree_remove(&s->root, lo);
	uint64_t id = 0;
	ptrdiff_t i;

	if (n) {
		id = n->id;
		*sz = n->hi - n->lo;
		node_free(s, n);
	}
	unlock(&s->lock);
	if (n)
		return id;
	lock(&g_big_lock);
	i = big_floor(lo);
	if (i >= 0 && g_big[i].lo == lo && !g_big[i].map) {
		id = g_big[i].id;
		*sz = g_big[i].hi - g_big[i].lo;
		big_delete_at((size_t)i);
	}
	unlock(&g_big_lock);
	return id;
}

uint64_t cap_alloc_remove(const void *p, size_t *size)
{
	const uintptr_t lo = (uintptr_t)p;
	struct shard *s = shard_of(lo >> REGION_SHIFT);
	struct snode e;
	uint64_t id = 0;
	size_t sz = 0;

	if (!p || !enter_table())
		goto out;
	lock(&s->lock);
	if (lo % SMALL_ALIGN == 0 && small_take(s, lo, &e)) {
		id = e.id;
		sz = e.size;
		unlock(&s->lock);
	} else {
		id = remove_other(s, lo, &sz);
	}
	leave_table();
out:
	if (size)
		*size = sz;
	return id;
}

static uintptr_t page_end(uintptr_t lo, size_t len)
{
	uintptr_t hi = lo + len;

	if (hi < lo)
		return UINTPTR_MAX & ~(g_page - 1);
	return (hi + g_page - 1) & ~(g_page - 1);
}

uint64_t cap_map_enter(const void *p, size_t len, uint64_t id, uint64_t off)
{
	const uintptr_t lo = (uintptr_t)p;
	struct big e = {lo, page_end(lo, len ? len : 1), lo - (uintptr_t)off, id, true};

	if (!enter_table())
		return id ? id : atomic_fetch_add_explicit(&g_next_id, 1, memory_order_relaxed);
	if (!e.id)
		e.id = batch_id();
	lock(&g_big_lock);
	big_cut(e.lo, e.hi);
	big_put(&e);
	unlock(&g_big_lock);
	leave_table();
	return e.id;
}

uint64_t cap_map_add(const void *p, size_t len)
{
	return cap_map_enter(p, len, 0, 0);
}

uint64_t cap_map_take(const void *p, size_t len, uint64_t *off)
{
	const uintptr_t lo = (uintptr_t)p;
	uint64_t id = 0;
	ptrdiff_t i;

	*off = 0;
	if (!len || (lo & (g_page - 1)) || !enter_table())
		return 0; /* mremap fails on these: nothing moves */
	lock(&g_big_lock);
	i = big_floor(lo);
	if (i >= 0 && g_big[i].map && lo < g_big[i].hi) {
		id = g_big[i].id;
		*off = lo - g_big[i].base;
	}
	big_cut(lo, page_end(lo, len));
	unlock(&g_big_lock);
	leave_table();
	return id;
}

void cap_map_remove(const void *p, size_t len)
{
	const uintptr_t lo = (uintptr_t)p;

	if (!len || (lo & (g_page - 1)) || !enter_table())
		return; /* munmap fails on these: nothing is unmapped */
	lock(&g_big_lock);
	big_cut(lo, page_end(lo, len));
	unlock(&g_big_lock);
	leave_table();
}

/*
 * Search the shard of @region for @p: its treap, and its small blocks starting at most
 * SMALL_MAX bytes below @p (the nearest one starting at or below @p is the only live one
 * that can hold it; those of the region before are here too when it has the same shard).
 * Where both hold @p, the later id wins (the other entry is stale).
 */
static bool shard_find(uintptr_t region, uintptr_t p, uint64_t *id, uint64_t *off)
{
	struct shard *s = shard_of(region);
	const struct anode *n;
	bool hit;

	lock(&s->lock);
	n = tree_floor(s->root, p);
	hit = n && p < n->hi;
	if (hit) {
		*id = n->id;
		*off = p - n->lo;
	}
	if (s->n_small) {
		uintptr_t q = p - p % SMALL_ALIGN;

		for (uint32_t k = 0; k <= SMALL_MAX / SMALL_ALIGN && q; k++) {
			const struct snode *e = small_slot(s, q);

			if (e->lo) {
				if (p < e->lo + e->size && (!hit || e->id > *id)) {
					hit = true;
					*id = e->id;
					*off = p - e->lo;
				}
				break;
			}
			q -= SMALL_ALIGN;
		}
	}
	unlock(&s->lock);
	return hit;
}

static bool big_find(uintptr_t p, uint64_t *id, uint64_t *off)
{
	ptrdiff_t i;
	bool hit;

	lock(&g_big_lock);
	i = big_floor(p);
	hit = i >= 0 && p < g_big[i].hi;
	if (hit) {
		*id = g_big[i].id;
		*off = p - g_big[i].base;
	}
	unlock(&g_big_lock);
	return hit;
}

int cap_alloc_lookup(const void *p, uint64_t *id, uint64_t *off)
{
	const uintptr_t a = (uintptr_t)p, region = a >> REGION_SHIFT;
	bool hit;

	*id = 0;
	*off = a;
	if (!p || !cap_allocs_enabled_ || !(tfs_capture_mask_ & CAP_ALLOCS_MASK) || !enter_table())
		return -ENOENT;
	hit = shard_find(region, a, id, off) ||
	      (region > 0 && shard_of(region - 1) != shard_of(region) &&
	       shard_find(region - 1, a, id, off)) ||
	      big_find(a, id, off);
	leave_table();
	return hit ? 0 : -ENOENT;
}

/* ---- fork: the child gets the table as it was, its locks free ---- */

static void fork_prepare(void)
{
	tls_inside = true;
	cap_tls_depth++;
	for (int i = 0; i < N_SHARDS; i++)
		lock(&g_shards[i].lock);
	lock(&g_big_lock);
}

static void fork_parent(void)
{
	unlock(&g_big_lock);
	for (int i = 0; i < N_SHARDS; i++)
		unlock(&g_shards[i].lock);
	cap_tls_depth--;
	tls_inside = false;
}

static void fork_child(void)
{
	atomic_store(&g_big_lock, 0);
	for (int i = 0; i < N_SHARDS; i++)
		atomic_store(&g_shards[i].lock, 0);
	cap_tls_depth--;
	tls_inside = false;
}

/* Before capture_init (capture.c) turns the interposers on. */
__attribute__((constructor(102))) static void allocs_init(void)
{
	const char *env = getenv("TFS_ALLOC_IDS");
	long page = sysconf(_SC_PAGESIZE);

	if (env && !strcmp(env, "0"))
		cap_allocs_enabled_ = false;
	if (page > 0)
		g_page = (uintptr_t)page;
	cap_tls_depth++; /* the handler list may grow through the interposed malloc */
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	cap_tls_depth--;
}
