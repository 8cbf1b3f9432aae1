/*
 * Runtime of the generated MPI wrappers, after Pilgrim: MPI handles become small symbolic ids
 * per process and class (an id freed is reused, lowest first), communicators get ids their
 * members agree on (the lowest free at every member, by a reduction over the parent or the
 * members; past 64 live ones, derived from the parent's id and how many children it had, or
 * a reduction of random values), requests are pooled per call signature (the lowest free slot
 * of the pool of their creating call's signature, or of the next one when it is full, so a
 * loop that completes them in any order records the same ids), and ranks are made relative
 * to the caller. It does not know individual MPI functions (the generator does) and never
 * calls an MPI_ function, only PMPI_ ones.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfs/capture.h"
#include "calls_i.h"
#include "capture_i.h"
#include "allocs_i.h"
#include "mpi_rt_i.h"

#define AGREED_ID_BASE (1u << 20) /* agreed communicator ids: [2^20, 2^24) */
/* the first agreed ids, reused lowest free first: [2^20, 2^20 + 64); past them, hashes */
#define AGREED_SLOTS 64
#define POOL_BITS 8 /* pools are hash buckets: signatures that share one share its slots */
#define POOL_SLOTS 64

/* One live handle: its symbolic id and, once asked for, the caller's rank delta in it. */
struct hent {
	uint64_t key; /* handle bits + 1 (0: empty) */
	uint64_t id;
	int64_t delta;
	uint32_t children; /* communicators created from this one */
	bool has_delta;
	bool predef;	   /* a predefined handle: its id is fixed (mpirt_bind_id) */
};

struct htab {
	struct hent *e;
	uint32_t cap, n;
	uint64_t *used; /* bitmap of ids given out by mpirt_new_id() */
	uint32_t used_words;
};

/*
 * A thread's cache of handle ids and rank deltas, read without g_lock: every wrapper looks
 * up a few handles (datatype, communicator, its delta), and the lock and the probe of the
 * shared table were most of a wrapper's cost. An entry is valid while its @gen is g_gen,
 * which each change of an existing handle's id or delta bumps under g_lock (release, a
 * handle value reused, an agreed communicator id); new handles need no bump.
 */
#define HCACHE_SLOTS 32
#define TLS_IE __attribute__((tls_model("initial-exec")))

struct hcache {
	uint64_t key; /* handle bits */
	uint64_t id;
	int64_t delta;
	uint32_t gen; /* 0: empty */
	uint8_t cls;
	bool has_delta;
};

static _Thread_local struct hcache tls_hcache[HCACHE_SLOTS] TLS_IE;
static _Atomic uint32_t g_gen = 1;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct htab g_tab[MPIRT_N_CLASSES];
static uint64_t g_pool[1u << POOL_BITS]; /* busy slots of each request pool */
static uint32_t g_pool_spill[1u << POOL_BITS];
static int64_t g_world_rank;
static bool g_mpi_live; /* between MPI_Init and MPI_Finalize: PMPI calls are allowed */
static uint64_t g_agree_seq;
static uint64_t g_agreed_busy; /* agreed slots of this process's live communicators */

static _Thread_local struct {
	uint64_t *ids;
	int64_t *deltas;
	int64_t cap;
} tls_scratch;

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdu;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53u;
	return x ^ (x >> 33);
}

bool mpirt_enter(uint32_t call)
{
	if (!(tfs_capture_mask_ & TFS_TRACE_MPI) || cap_tls_depth != 0)
		return false;
	cap_tls_depth++;
	if (cap_call_depth++ == 0) /* threads the library starts now are its layer */
		cap_call_outer = call;
	return true;
}

void mpirt_start(struct mpirt_call *c)
{
	c->ts_ns = cap_now_ns();
}

void mpirt_stop(struct mpirt_call *c)
{
	uint64_t t = cap_now_ns();

	c->w[0] = t > c->ts_ns ? t - c->ts_ns : 0;
}

void mpirt_put(struct mpirt_call *c, uint32_t call, uint32_t n_w, struct mpirt_str *const *strs,
	       uint32_t n_strs)
{
	char payload[CALL_MAX_STR];
	size_t len = 0;

	for (uint32_t i = 0; i < n_strs; i++) {
		size_t n = strs[i]->len;

		if (len + n + 1 > sizeof(payload))
			n = 0; /* over the record's budget: the string is recorded empty */
		memcpy(payload + len, strs[i]->s, n);
		payload[len + n] = '\0';
		len += n + 1;
	}
	cap_call_depth--;
	cap_tls_depth--;
	cap_put_call(call, c->ts_ns, c->w, n_w + 1, payload, len);
}

/* The entry of @key in @t, created (id unset) when @create. Under g_lock. */
static struct hent *lookup(struct htab *t, uint64_t key, bool create)
{
	uint32_t i;

	key++;
	if (create && 2 * (t->n + 1) > t->cap) {
		uint32_t cap = t->cap ? 2 * t->cap : 64;
		struct hent *e = calloc(cap, sizeof(*e));

		if (!e)
			return NULL;
		for (uint32_t j = 0; j < t->cap; j++) {
			if (!t->e[j].key)
				continue;
			for (i = (uint32_t)mix(t->e[j].key) % cap; e[i].key; i = (i + 1) % cap)
				;
			e[i] = t->e[j];
		}
		free(t->e);
		t->e = e;
		t->cap = cap;
	}
	if (!t->cap)
		return NULL;
	for (i = (uint32_t)mix(key) % t->cap; t->e[i].key; i = (i + 1) % t->cap)
		if (t->e[i].key == key)
			return &t->e[i];
	if (!create)
		return NULL;
	t->e[i] = (struct hent){.key = key};
	t->n++;
	return &t->e[i];
}

/* The lowest id not in use in @t, marked used. Under g_lock. */
static uint64_t take_id(struct htab *t)
{
	uint32_t w;

	for (w = 0; w < t->used_words && t->used[w] == UINT64_MAX; w++)
		;
	if (w == t->used_words) {
		uint64_t *u = realloc(t->used, (size_t)(w + 8) * sizeof(*u));

		if (!u)
			return UINT64_MAX;
		memset(u + w, 0, 8 * sizeof(*u));
		t->used = u;
		t->used_words = w + 8;
	}
	for (uint32_t b = 0; b < 64; b++) {
		if (!(t->used[w] >> b & 1)) {
			t->used[w] |= 1ull << b;
			return (uint64_t)w * 64 + b;
		}
	}
	return UINT64_MAX;
}

static uint64_t key_of(const void *h, size_t size)
{
	uint64_t k = 0;

	memcpy(&k, h, size < sizeof(k) ? size : sizeof(k));
	return k;
}

static struct hent *entry(enum mpirt_class cls, const void *h, size_t size)
{
	struct htab *t = &g_tab[cls];
	struct hent *e = lookup(t, key_of(h, size), true);

	if (e && !e->id) {
		e->id = take_id(t) + 1; /* stored + 1: 0 means "no id yet" */
		if (e->id == 0)
			e->id = UINT64_MAX;
	}
	return e;
}

static struct hcache *hcache_slot(enum mpirt_class cls, uint64_t key)
{
	return &tls_hcache[((key * 0x9e3779b97f4a7c15u) >> 59 ^ cls) % HCACHE_SLOTS];
}

/* The cached entry of (@cls, @key), or NULL. */
static const struct hcache *hcache_get(enum mpirt_class cls, uint64_t key)
{
	const struct hcache *c = hcache_slot(cls, key);

	if (c->gen == atomic_load_explicit(&g_gen, memory_order_acquire) && c->key == key &&
	    c->cls == cls)
		return c;
	return NULL;
}

/* Cache @e, the entry of (@cls, @key). Under g_lock (which orders it after any bump). */
static void hcache_put(enum mpirt_class cls, uint64_t key, const struct hent *e)
{
	struct hcache *c = hcache_slot(cls, key);

	*c = (struct hcache){.key = key,
			     .id = e->id - 1,
			     .delta = e->delta,
			     .gen = atomic_load_explicit(&g_gen, memory_order_relaxed),
			     .cls = (uint8_t)cls,
			     .has_delta = e->has_delta};
}

/* Existing handles changed: every thread's cache is stale. Under g_lock. */
static void hcache_bump(void)
{
	uint32_t g = atomic_load_explicit(&g_gen, memory_order_relaxed) + 1;

	atomic_store_explicit(&g_gen, g ? g : 1, memory_order_release);
}

uint64_t mpirt_id(enum mpirt_class cls, const void *h, size_t size)
{
	const uint64_t key = key_of(h, size);
	const struct hcache *c = hcache_get(cls, key);
	struct hent *e;
	uint64_t id;

	if (c)
		return c->id;
	pthread_mutex_lock(&g_lock);
	e = entry(cls, h, size);
	id = e ? e->id - 1 : UINT64_MAX;
	if (e && e->id)
		hcache_put(cls, key, e);
	pthread_mutex_unlock(&g_lock);
	return id;
}

uint64_t mpirt_new_id(enum mpirt_class cls, const void *h, size_t size)
{
	struct hent *e;

	/* a handle value the library reuses for a new object is a new object */
	pthread_mutex_lock(&g_lock);
	e = lookup(&g_tab[cls], key_of(h, size), false);
	if (e && !e->predef) {
		e->id = 0, e->has_delta = false, e->children = 0;
		hcache_bump();
	}
	pthread_mutex_unlock(&g_lock);
	return mpirt_id(cls, h, size);
}

void mpirt_release(enum mpirt_class cls, uint64_t id)
{
	struct htab *t = &g_tab[cls];

	pthread_mutex_lock(&g_lock);
	for (uint32_t i = 0; i < t->cap; i++) {
		if (t->e[i].key && t->e[i].id == id + 1 && !t->e[i].predef) {
			/* keep the slot (open addressing): an unused id marks it dead */
			t->e[i].id = 0;
			t->e[i].has_delta = false;
			t->e[i].children = 0;
		}
	}
	if (id / 64 < t->used_words)
		t->used[id / 64] &= ~(1ull << (id % 64));
	if (cls == MPIRT_COMM && id >= AGREED_ID_BASE && id < AGREED_ID_BASE + AGREED_SLOTS)
		g_agreed_busy &= ~(1ull << (id - AGREED_ID_BASE));
	hcache_bump();
	pthread_mutex_unlock(&g_lock);
}

void mpirt_bind_id(enum mpirt_class cls, uint64_t id, const void *h, size_t size)
{
	struct hent *e;

	pthread_mutex_lock(&g_lock);
	e = lookup(&g_tab[cls], key_of(h, size), true);
	if (e && !e->predef)
		*e = (struct hent){.key = e->key, .id = id + 1, .predef = true};
	hcache_bump();
	pthread_mutex_unlock(&g_lock);
}

void mpirt_reserve_ids(enum mpirt_class cls, uint64_t n)
{
	struct htab *t = &g_tab[cls];

	pthread_mutex_lock(&g_lock);
	while (n-- > 0 && take_id(t) != UINT64_MAX)
		;
	pthread_mutex_unlock(&g_lock);
}

/* Bind communicator @c to the agreed @id (not from the id bitmap). */
static uint64_t comm_bind(MPI_Comm c, uint64_t id)
{
	struct hent *e;

	pthread_mutex_lock(&g_lock);
	e = lookup(&g_tab[MPIRT_COMM], key_of(&c, sizeof(c)), true);
	if (e)
		*e = (struct hent){.key = e->key, .id = id + 1};
	hcache_bump();
	pthread_mutex_unlock(&g_lock);
	return id;
}

/* OR of @mine over the members of @c, both groups of an intercommunicator. */
static uint64_t or_all(MPI_Comm c, uint64_t mine)
{
	uint64_t theirs = 0, all = mine;
	int inter = 0;

	PMPI_Comm_test_inter(c, &inter);
	if (inter) {
		/* an intercommunicator reduces over the remote group: twice gives everyone
		 * both groups' */
		PMPI_Allreduce(&mine, &theirs, 1, MPI_UINT64_T, MPI_BOR, c);
		mine |= theirs;
	}
	PMPI_Allreduce(&mine, &all, 1, MPI_UINT64_T, MPI_BOR, c);
	return all;
}

/*
 * The lowest agreed slot free at every member of @over (AGREED_SLOTS when none is): a
 * communicator made and freed in a loop takes the same id every time, so the loop's calls
 * repeat. Collective over @over.
 */
static uint32_t agree_slot(MPI_Comm over)
{
	uint64_t mine, all;

	pthread_mutex_lock(&g_lock);
	mine = g_agreed_busy;
	pthread_mutex_unlock(&g_lock);
	all = or_all(over, mine);
	return all == UINT64_MAX ? AGREED_SLOTS : (uint32_t)__builtin_ctzll(~all);
}

/*
 * Take agreed slot @slot for a new communicator: false when another thread of this process
 * took it meanwhile for a communicator of its own (made at the same time over another
 * parent), and the caller falls back to an id of its own rather than share one.
 */
static bool take_slot(uint32_t slot)
{
	bool free_here;

	if (slot >= AGREED_SLOTS)
		return false;
	pthread_mutex_lock(&g_lock);
	free_here = !(g_agreed_busy >> slot & 1);
	g_agreed_busy |= 1ull << slot;
	pthread_mutex_unlock(&g_lock);
	return free_here;
}

/* An agreed id past the slots, from @h (the same at every member). */
static uint64_t hashed_id(uint64_t h)
{
	return AGREED_ID_BASE + AGREED_SLOTS + h % (15u * AGREED_ID_BASE - AGREED_SLOTS);
}

uint64_t mpirt_comm_child(MPI_Comm parent, MPI_Comm nc)
{
	struct hent *e;
	uint64_t pid = 0, n = 0;
	uint32_t slot;

	/* counted even where no communicator results (MPI_Comm_split with MPI_UNDEFINED):
	 * every member of the parent keeps the same count */
	pthread_mutex_lock(&g_lock);
	e = entry(MPIRT_COMM, &parent, sizeof(parent));
	if (e) {
		pid = e->id;
		n = e->children++;
	}
	pthread_mutex_unlock(&g_lock);
	/* every member of the parent takes part, those left without a communicator too */
	slot = g_mpi_live ? agree_slot(parent) : AGREED_SLOTS;
	if (nc == MPI_COMM_NULL)
		return mpirt_id(MPIRT_COMM, &nc, sizeof(nc));
	if (take_slot(slot))
		return comm_bind(nc, AGREED_ID_BASE + slot);
	/* every member of the parent makes its children in the same order */
	return comm_bind(nc, hashed_id(mix(pid * 0x10001 + n)));
}

uint64_t mpirt_comm_agree(MPI_Comm nc)
{
	unsigned long mine, theirs, all;
	uint32_t slot;
	int inter = 0;

	if (nc == MPI_COMM_NULL || !g_mpi_live)
		return mpirt_id(MPIRT_COMM, &nc, sizeof(nc));
	slot = agree_slot(nc);
	if (take_slot(slot))
		return comm_bind(nc, AGREED_ID_BASE + slot);
	mine = (unsigned long)mix((uint64_t)g_world_rank << 32 | ++g_agree_seq);
	if (slot < AGREED_SLOTS) /* taken here by another thread meanwhile: no reduction */
		return comm_bind(nc, hashed_id(mine));
	PMPI_Comm_test_inter(nc, &inter);
	if (inter) {
		PMPI_Allreduce(&mine, &theirs, 1, MPI_UNSIGNED_LONG, MPI_MAX, nc);
		mine = mine > theirs ? mine : theirs;
	}
	PMPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG, MPI_MAX, nc);
	return comm_bind(nc, hashed_id(all));
}

void mpirt_scratch(int64_t n, uint64_t **ids, int64_t **deltas)
{
	if (n > tls_scratch.cap) {
		int64_t cap = n < 64 ? 64 : n;
		uint64_t *i = realloc(tls_scratch.ids, (size_t)cap * sizeof(*i));
		int64_t *d;

		if (i)
			tls_scratch.ids = i;
		d = realloc(tls_scratch.deltas, (size_t)cap * sizeof(*d));
		if (d)
			tls_scratch.deltas = d;
		if (i && d)
			tls_scratch.cap = cap;
	}
	if (n > tls_scratch.cap)
		abort(); /* out of memory for the program's own request array: nothing to fall to */
	*ids = tls_scratch.ids;
	*deltas = tls_scratch.deltas;
}

uint64_t mpirt_sig_hash(uint32_t call, const uint64_t *w, uint32_t n)
{
	uint64_t h = mix(call);

	for (uint32_t i = 0; i < n; i++)
		h = mix(h ^ w[i]);
	return h;
}

/*
 * Request ids: (pool << 8 | slot) + 1, the pool being the creating call's signature hash;
 * 0 is MPI_REQUEST_NULL. A full pool takes the lowest free slot of the next pool with one
 * (so 100 requests in flight that share a pool still get the same ids at every round);
 * only once every pool is full, slots past POOL_SLOTS are handed out round-robin and never
 * freed.
 * The live ids of one handle value wait in a queue (struct rent), oldest first: MPICH gives
 * requests that completed at once (eager sends) one handle value, so a loop posting 40 of
 * them has 40 ids behind it. The queue grows as needed up to REQ_QUEUE_MAX.
 */
#define REQ_QUEUE_MAX (1u << 16)

struct rent {
	uint64_t key; /* handle bits + 1 (0: empty) */
	uint32_t n, cap;
	uint64_t *id;	/* [cap] */
	int64_t *delta; /* [cap] */
};

/* Room for one more id in @e's queue. Under g_lock. */
static bool rent_room(struct rent *e)
{
	uint32_t cap;
	uint64_t *id;
	int64_t *delta;

	if (e->n < e->cap)
		return true;
	if (e->cap >= REQ_QUEUE_MAX)
		return false;
	cap = e->cap ? 2 * e->cap : 8;
	id = realloc(e->id, cap * sizeof(*id));
	if (!id)
		return false;
	e->id = id;
	delta = realloc(e->delta, cap * sizeof(*delta));
	if (!delta)
		return false;
	e->delta = delta;
	e->cap = cap;
	return true;
}

static struct rent *g_req;
static uint32_t g_req_cap, g_req_n;

/* Under g_lock. */
static struct rent *req_entry(const MPI_Request *r, bool create)
{
	uint64_t key = key_of(r, sizeof(*r)) + 1;
	uint32_t i;

	if (create && 2 * (g_req_n + 1) > g_req_cap) {
		uint32_t cap = g_req_cap ? 2 * g_req_cap : 64;
		struct rent *e = calloc(cap, sizeof(*e));

		if (!e)
			return NULL;
		for (uint32_t j = 0; j < g_req_cap; j++) {
			if (!g_req[j].key)
				continue;
			for (i = (uint32_t)mix(g_req[j].key) % cap; e[i].key; i = (i + 1) % cap)
				;
			e[i] = g_req[j];
		}
		free(g_req);
		g_req = e;
		g_req_cap = cap;
	}
	if (!g_req_cap)
		return NULL;
	for (i = (uint32_t)mix(key) % g_req_cap; g_req[i].key; i = (i + 1) % g_req_cap)
		if (g_req[i].key == key)
			return &g_req[i];
	if (!create)
		return NULL;
	g_req[i].key = key;
	g_req[i].n = 0;
	g_req_n++;
	return &g_req[i];
}

static void slot_free(uint64_t id)
{
	uint32_t pool = (uint32_t)((id - 1) >> 8), slot = (uint32_t)((id - 1) & 0xff);

	if (slot < POOL_SLOTS && pool < (1u << POOL_BITS))
		g_pool[pool] &= ~(1ull << slot);
}

uint64_t mpirt_req_new(const MPI_Request *r, uint64_t sig, int64_t delta)
{
	uint32_t pool = (uint32_t)(sig >> (64 - POOL_BITS)), slot;
	struct rent *e;
	uint64_t id;

	if (*r == MPI_REQUEST_NULL)
		return 0;
	pthread_mutex_lock(&g_lock);
	/* a full pool borrows from the next ones: ids still repeat as the calls do */
	for (uint32_t i = 0; i < (1u << POOL_BITS) && g_pool[pool] == UINT64_MAX; i++)
		pool = (pool + 1) & ((1u << POOL_BITS) - 1);
	if (g_pool[pool] != UINT64_MAX) {
		slot = (uint32_t)__builtin_ctzll(~g_pool[pool]);
		g_pool[pool] |= 1ull << slot;
	} else {
		slot = POOL_SLOTS + g_pool_spill[pool]++ % (256 - POOL_SLOTS);
	}
	id = ((uint64_t)pool << 8 | slot) + 1;
	e = req_entry(r, true);
	if (e && !rent_room(e) && e->n) {
		/* out of memory, or REQ_QUEUE_MAX live requests of one handle value: the oldest
		 * is forgotten (its slot stays taken) */
		e->n--;
		memmove(e->id, e->id + 1, e->n * sizeof(e->id[0]));
		memmove(e->delta, e->delta + 1, e->n * sizeof(e->delta[0]));
	}
	if (e && e->n < e->cap) {
		e->id[e->n] = id;
		e->delta[e->n++] = delta;
	}
	pthread_mutex_unlock(&g_lock);
	return id;
}

/* Under g_lock. */
static uint64_t req_front_locked(const MPI_Request *r, int64_t *delta, bool take)
{
	struct rent *e;
	uint64_t id = 0;

	*delta = mpirt_rq_pack(0, MPIRT_ST_ALL);
	if (*r == MPI_REQUEST_NULL)
		return 0;
	e = req_entry(r, false);
	if (e && e->n) {
		id = e->id[0];
		*delta = e->delta[0];
		if (take) {
			e->n--;
			memmove(e->id, e->id + 1, e->n * sizeof(e->id[0]));
			memmove(e->delta, e->delta + 1, e->n * sizeof(e->delta[0]));
		}
	}
	return id;
}

static uint64_t req_front(const MPI_Request *r, int64_t *delta, bool take)
{
	uint64_t id;

	if (*r == MPI_REQUEST_NULL) {
		*delta = mpirt_rq_pack(0, MPIRT_ST_ALL);
		return 0;
	}
	pthread_mutex_lock(&g_lock);
	id = req_front_locked(r, delta, take);
	pthread_mutex_unlock(&g_lock);
	return id;
}

uint64_t mpirt_req_id(const MPI_Request *r, int64_t *delta)
{
	return req_front(r, delta, false);
}

uint64_t mpirt_req_take(const MPI_Request *r, int64_t *delta)
{
	return req_front(r, delta, true);
}

void mpirt_req_take_all(const MPI_Request *r, int64_t n, uint64_t *ids, int64_t *deltas)
{
	pthread_mutex_lock(&g_lock);
	for (int64_t i = 0; i < n; i++)
		ids[i] = req_front_locked(&r[i], &deltas[i], true);
	pthread_mutex_unlock(&g_lock);
}

/* Under g_lock. */
static void req_settle_locked(const MPI_Request *r, uint64_t id, int64_t delta)
{
	struct rent *e;

	if (!id)
		return;
	if (*r == MPI_REQUEST_NULL) {
		slot_free(id);
	} else if ((e = req_entry(r, true)) != NULL && rent_room(e)) {
		memmove(e->id + 1, e->id, e->n * sizeof(e->id[0]));
		memmove(e->delta + 1, e->delta, e->n * sizeof(e->delta[0]));
		e->id[0] = id;
		e->delta[0] = delta;
		e->n++;
	}
}

void mpirt_req_settle(const MPI_Request *r, uint64_t id, int64_t delta)
{
	if (!id)
		return;
	pthread_mutex_lock(&g_lock);
	req_settle_locked(r, id, delta);
	pthread_mutex_unlock(&g_lock);
}

void mpirt_req_settle_all(const MPI_Request *r, int64_t n, const uint64_t *ids,
			  const int64_t *deltas)
{
	pthread_mutex_lock(&g_lock);
	/* in reverse: requests sharing one handle value keep their order */
	for (int64_t i = n - 1; i >= 0; i--)
		req_settle_locked(&r[i], ids[i], deltas[i]);
	pthread_mutex_unlock(&g_lock);
}

/* The cached delta of @h in class @cls, computed by @rank_of on first use. */
static int64_t delta_of(enum mpirt_class cls, const void *h, size_t size,
			int (*rank_of)(const void *))
{
	const uint64_t key = key_of(h, size);
	const struct hcache *c = hcache_get(cls, key);
	struct hent *e;
	int64_t d = 0;
	bool have = false;
	int r;

	if (c && c->has_delta)
		return c->delta;
	pthread_mutex_lock(&g_lock);
	e = entry(cls, h, size);
	if (e && e->has_delta) {
		d = e->delta;
		have = true;
		hcache_put(cls, key, e);
	}
	pthread_mutex_unlock(&g_lock);
	if (have || !g_mpi_live)
		return d;
	r = rank_of(h);
	/* not a member (a group's MPI_UNDEFINED): the caller's rank there reads -1, none */
	d = g_world_rank - (r >= 0 ? r : -1);
	pthread_mutex_lock(&g_lock);
	e = entry(cls, h, size);
	if (e) {
		e->delta = d;
		e->has_delta = true;
		if (e->id)
			hcache_put(cls, key, e);
	}
	pthread_mutex_unlock(&g_lock);
	return d;
}

static int comm_rank(const void *h)
{
	int r = -1;

	PMPI_Comm_rank(*(const MPI_Comm *)h, &r);
	return r;
}

static int group_rank(const void *h)
{
	int r = -1;

	PMPI_Group_rank(*(const MPI_Group *)h, &r);
	return r == MPI_UNDEFINED ? -1 : r;
}

static int win_rank(const void *h)
{
	MPI_Group g;
	int r = -1;

	if (PMPI_Win_get_group(*(const MPI_Win *)h, &g) != MPI_SUCCESS)
		return -1;
	r = group_rank(&g);
	PMPI_Group_free(&g);
	return r;
}

int64_t mpirt_delta_comm(MPI_Comm c)
{
	return c == MPI_COMM_NULL ? g_world_rank : delta_of(MPIRT_COMM, &c, sizeof(c), comm_rank);
}

int64_t mpirt_delta_group(MPI_Group g)
{
	return g == MPI_GROUP_NULL || g == MPI_GROUP_EMPTY
		   ? g_world_rank
		   : delta_of(MPIRT_GROUP, &g, sizeof(g), group_rank);
}

int64_t mpirt_delta_win(MPI_Win w)
{
	return w == MPI_WIN_NULL ? g_world_rank : delta_of(MPIRT_WIN, &w, sizeof(w), win_rank);
}

uint64_t mpirt_msg_new(const MPI_Message *m, int64_t delta)
{
	struct hent *e;
	uint64_t id;

	if (*m == MPI_MESSAGE_NULL)
		return mpirt_id(MPIRT_MSG, m, sizeof(*m));
	id = mpirt_new_id(MPIRT_MSG, m, sizeof(*m));
	pthread_mutex_lock(&g_lock);
	e = lookup(&g_tab[MPIRT_MSG], key_of(m, sizeof(*m)), false);
	if (e) {
		e->delta = delta;
		e->has_delta = true;
	}
	pthread_mutex_unlock(&g_lock);
	return id;
}

int64_t mpirt_delta_msg(const MPI_Message *m)
{
	struct hent *e;
	int64_t d = 0;

	pthread_mutex_lock(&g_lock);
	e = lookup(&g_tab[MPIRT_MSG], key_of(m, sizeof(*m)), false);
	if (e && e->has_delta)
		d = e->delta;
	pthread_mutex_unlock(&g_lock);
	return d;
}

int64_t mpirt_world_rank(void)
{
	return g_world_rank;
}

int mpirt_comm_size(MPI_Comm c)
{
	int inter = 0, n = 0;

	if (!g_mpi_live || c == MPI_COMM_NULL)
		return 0;
	PMPI_Comm_test_inter(c, &inter);
	if (inter)
		PMPI_Comm_remote_size(c, &n);
	else
		PMPI_Comm_size(c, &n);
	return n;
}

bool mpirt_at_root(MPI_Comm c, int root)
{
	int inter = 0;

	if (root == MPI_ROOT)
		return true;
	if (root < 0 || !g_mpi_live || c == MPI_COMM_NULL)
		return false;
	PMPI_Comm_test_inter(c, &inter);
	return !inter && g_world_rank - mpirt_delta_comm(c) == root;
}

int mpirt_neighbors(MPI_Comm c, bool out)
{
	int topo = MPI_UNDEFINED, n = 0, n_in = 0, n_out = 0, weighted = 0, r = 0;

	if (!g_mpi_live || c == MPI_COMM_NULL || PMPI_Topo_test(c, &topo) != MPI_SUCCESS)
		return 0;
	if (topo == MPI_CART && PMPI_Cartdim_get(c, &n) == MPI_SUCCESS)
		return 2 * n;
	if (topo == MPI_GRAPH && PMPI_Comm_rank(c, &r) == MPI_SUCCESS &&
	    PMPI_Graph_neighbors_count(c, r, &n) == MPI_SUCCESS)
		return n;
	if (topo == MPI_DIST_GRAPH &&
	    PMPI_Dist_graph_neighbors_count(c, &n_in, &n_out, &weighted) == MPI_SUCCESS)
		return out ? n_out : n_in;
	return 0;
}

int mpirt_cart_ndims(MPI_Comm c)
{
	int topo = MPI_UNDEFINED, n = 0;

	if (!g_mpi_live || c == MPI_COMM_NULL || PMPI_Topo_test(c, &topo) != MPI_SUCCESS ||
	    topo != MPI_CART || PMPI_Cartdim_get(c, &n) != MPI_SUCCESS)
		return 0;
	return n;
}

void mpirt_str_reset(struct mpirt_str *s)
{
	s->len = 0;
	s->s[0] = '\0';
}

static void str_add(struct mpirt_str *s, const char *text)
{
	size_t n = strlen(text);

	if (s->len >= sizeof(s->s) - 4)
		return;
	if (s->len && s->s[s->len - 1] != '.')
		s->s[s->len++] = ',';
	if (s->len + n >= sizeof(s->s) - 4) {
		memcpy(s->s + s->len, "...", 3);
		s->len += 3;
		s->s[s->len] = '\0';
		return;
	}
	memcpy(s->s + s->len, text, n + 1);
	s->len += n;
}

/* @v in decimal, ending at @end (not NUL-terminated): its first character. */
static char *fmt_u64(char *end, uint64_t v)
{
	do {
		*--end = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return end;
}

/* @prefix then @v in decimal (with its sign always when @plus, else only when negative),
 * written at the end of @b: the text. */
static const char *fmt_num(char *b, size_t cap, const char *prefix, int64_t v, bool plus)
{
	size_t n = strlen(prefix);
	char *p = fmt_u64(b + cap - 1, v < 0 ? -(uint64_t)v : (uint64_t)v);

	b[cap - 1] = '\0';
	if (v < 0 || plus)
		*--p = v < 0 ? '-' : '+';
	p -= n;
	memcpy(p, prefix, n);
	return p;
}

void mpirt_str_i64(struct mpirt_str *s, int64_t v)
{
	char b[24];

	str_add(s, fmt_num(b, sizeof(b), "", v, false));
}

void mpirt_str_rel(struct mpirt_str *s, int64_t r, int64_t self)
{
	char b[32];

	if (r < 0 || self < 0)
		str_add(s, fmt_num(b, sizeof(b), "", r, false));
	else if (r == self)
		str_add(s, "r");
	else
		str_add(s, fmt_num(b, sizeof(b), "r", r - self, true));
}

static int64_t status_bytes(const MPI_Status *st)
{
#if MPI_VERSION >= 4
	MPI_Count n = MPI_UNDEFINED;

	if (PMPI_Get_count_c(st, MPI_BYTE, &n) != MPI_SUCCESS)
		return MPI_UNDEFINED;
#else
	int n = MPI_UNDEFINED;

	if (PMPI_Get_count(st, MPI_BYTE, &n) != MPI_SUCCESS)
		return MPI_UNDEFINED;
#endif
	return (int64_t)n;
}

static int64_t status_cancelled(const MPI_Status *st)
{
	int flag = 0;

	return PMPI_Test_cancelled(st, &flag) == MPI_SUCCESS && flag;
}

void mpirt_status(const MPI_Status *st, int64_t delta, enum mpirt_st what, uint64_t *w)
{
	mpirt_no_status(w);
	if (what == MPIRT_ST_IO) {
		w[2] = (uint64_t)status_bytes(st);
		return;
	}
	if (what != MPIRT_ST_PROBE) {
		w[3] = (uint64_t)status_cancelled(st);
		if (w[3])
			return; /* the other fields of a cancelled request's status are undefined */
	}
	if (what == MPIRT_ST_ALL || what == MPIRT_ST_PROBE) {
		w[0] = mpirt_rank(delta, st->MPI_SOURCE);
		w[1] = mpirt_rval(delta, st->MPI_SOURCE, st->MPI_TAG);
	}
	if (what != MPIRT_ST_CANCELLED)
		w[2] = (uint64_t)status_bytes(st);
}

void mpirt_no_status(uint64_t *w)
{
	w[0] = (uint64_t)(int64_t)MPIRT_NO_STATUS;
	w[1] = tfs_rval(MPIRT_NO_STATUS, 0);
	w[2] = w[3] = (uint64_t)(int64_t)MPIRT_NO_STATUS;
}

int mpirt_error_class(int code)
{
	int cls = code;

	if (code != MPI_SUCCESS && g_mpi_live && PMPI_Error_class(code, &cls) != MPI_SUCCESS)
		cls = code;
	return cls;
}

void mpirt_str_status(struct mpirt_str *s, const MPI_Status *st, int64_t delta,
		      enum mpirt_st what, bool with_error)
{
	int64_t self = g_world_rank - delta, src = st->MPI_SOURCE, tag = st->MPI_TAG;
	char b[96], r[32] = "-", t[32] = "-", n[32] = "-", c[4] = "-";
	int cancelled = 0, len;

	/* only MPI_ERROR is defined in the status of a failed or still pending request */
	if (with_error && st->MPI_ERROR == MPI_ERR_PENDING) {
		str_add(s, "pending");
		return;
	}
	if (with_error && st->MPI_ERROR != MPI_SUCCESS) {
		snprintf(b, sizeof(b), "error:%d", mpirt_error_class(st->MPI_ERROR));
		str_add(s, b);
		return;
	}
	if (what != MPIRT_ST_IO && what != MPIRT_ST_PROBE) {
		cancelled = status_cancelled(st) != 0;
		c[0] = cancelled ? '1' : '0';
		c[1] = '\0';
	}
	if ((what == MPIRT_ST_ALL || what == MPIRT_ST_PROBE) && !cancelled) {
		if (src < 0)
			snprintf(r, sizeof(r), "%lld", (long long)src);
		else if (src == self)
			snprintf(r, sizeof(r), "r");
		else
			snprintf(r, sizeof(r), "r%+lld", (long long)(src - self));
		if (!mpirt_derived(self, src, tag))
			snprintf(t, sizeof(t), "%lld", (long long)tag);
		else if (tag == self)
			snprintf(t, sizeof(t), "r");
		else
			snprintf(t, sizeof(t), "r%+lld", (long long)(tag - self));
	}
	if (what != MPIRT_ST_CANCELLED && !cancelled)
		snprintf(n, sizeof(n), "%lld", (long long)status_bytes(st));
	len = snprintf(b, sizeof(b), "%s:%s:%s:%s", r, t, n, c);
	if (with_error && len > 0 && (size_t)len < sizeof(b))
		snprintf(b + len, sizeof(b) - (size_t)len, ":0");
	str_add(s, b);
}

void mpirt_str_sym(struct mpirt_str *s, const char *cls, uint64_t id)
{
	char b[48];
	char *p = fmt_u64(b + sizeof(b) - 1, id);
	size_t n = strnlen(cls, 24);

	b[sizeof(b) - 1] = '\0';
	*--p = '#';
	p -= n;
	memcpy(p, cls, n);
	str_add(s, p);
}

void mpirt_str_handle(struct mpirt_str *s, enum mpirt_class cls, const char *sym, uint64_t id)
{
	const char *name = mpirt_predef_name(cls, id);

	if (name)
		str_add(s, name);
	else
		mpirt_str_sym(s, sym, id);
}

void mpirt_str_text(struct mpirt_str *s, const char *text)
{
	size_t n = strnlen(text, sizeof(s->s) - 1);

	memcpy(s->s, text, n);
	s->s[n] = '\0';
	s->len = n;
}

void mpirt_buf(const void *p, uint64_t *alloc, uint64_t *off)
{
	*alloc = 0;
	if (!p) {
		*off = 0;
	} else if (p == MPI_IN_PLACE) {
		*off = UINT64_MAX;
	} else if (cap_alloc_lookup(p, alloc, off) < 0) {
		/* outside every live allocation (stack, static data): addresses differ from rank
		   to rank, so number the address by first use instead */
		*alloc = 0;
		*off = mpirt_id(MPIRT_BUF, &p, sizeof(p)) + 1;
	}
}

uint64_t mpirt_bits(const void *p, size_t size)
{
	return size <= 8 ? key_of(p, size) : 0;
}

void mpirt_on_init(void)
{
	int r = 0;

	PMPI_Comm_rank(MPI_COMM_WORLD, &r);
	g_world_rank = r;
	g_mpi_live = true;
	/* MPI_COMM_WORLD is comm#0 and MPI_COMM_SELF comm#1 (mpi_annot.txt) */
	mpirt_bind_predefined();
}

void mpirt_on_finalize(void)
{
	tfs_capture_flush();
	cap_tls_depth++; /* the merge's own allocations and PMPI calls are not the program's */
	mpirt_merge_at_finalize();
	cap_tls_depth--;
	g_mpi_live = false;
}

void mpirt_on_abort(void)
{
	if (!g_mpi_live)
		return;
	tfs_capture_flush();
	cap_tls_depth++; /* the save's own allocations and I/O are not the program's */
	mpirt_save_at_abort();
	cap_tls_depth--;
}

void mpirt_on_info_set(const char *key, const char *value)
{
	if (!key || !value || strcmp(key, "tracefs_phase") != 0)
		return;
	if (*value)
		tfs_phase_begin(value, TFS_PHASE_PROCESS);
	else
		tfs_phase_end();
}
