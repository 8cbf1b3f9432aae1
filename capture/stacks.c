/*
 * The backtraces of one traced process interned into stack ids, the distinct code
 * addresses they hold (each to be symbolised once) and the objects the process had loaded.
 * Two open-addressing tables: backtraces by content (into an arena holding each one's
 * frames after its id) and addresses. It does not symbolise (symbolize.c) nor code
 * backtraces (the codec does).
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tfs/writer.h"
#include "spool_i.h"
#include "stacks_i.h"

/*
 * The arena holds every interned backtrace back to back: a header word, its frame count
 * above HDR_N_SHIFT and its id below, then its frames. A slot of the backtrace table holds
 * the arena offset + 1 of one below SLOT_OFF_BITS and the top bits of its hash above, so
 * that a lookup reads the arena (header and frames together) only for a likely match.
 */
#define HDR_N_SHIFT 40
#define SLOT_OFF_BITS 40
#define SLOT_OFF_MASK ((UINT64_C(1) << SLOT_OFF_BITS) - 1)

struct cap_stacks {
	uint64_t *arena;
	uint64_t arena_len, arena_cap; /* words */
	uint64_t n_stacks;
	uint64_t *slots; /* by hash, 0 empty; n_slots a power of two */
	uint64_t n_slots;

	uint64_t *addrs; /* distinct addresses in first-seen order */
	uint64_t n_addrs, addrs_cap;
	uint64_t *aslots; /* address + 1 by hash (addresses are never ~0), 0 empty */
	uint64_t n_aslots;

	struct cap_module *mods;
	uint32_t n_mods, mods_cap;
};

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdu;
	h ^= h >> 33;
	return h;
}

static int grow64(uint64_t **p, uint64_t *cap, uint64_t need, size_t elem)
{
	uint64_t n = *cap ? *cap : 64;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

int cap_stacks_new(struct cap_stacks **out)
{
	struct cap_stacks *s = calloc(1, sizeof(*s));

	*out = s;
	return s ? 0 : -ENOMEM;
}

void cap_stacks_free(struct cap_stacks *s)
{
	if (!s)
		return;
	free(s->arena);
	free(s->slots);
	free(s->addrs);
	free(s->aslots);
	for (uint32_t i = 0; i < s->n_mods; i++)
		free(s->mods[i].path);
	free(s->mods);
	free(s);
}

static inline uint64_t slot_of(uint64_t hash, uint64_t off)
{
	return (hash >> SLOT_OFF_BITS) << SLOT_OFF_BITS | (off + 1);
}

/* Rehash the backtrace table to @n_slots. @return 0 or -ENOMEM */
static int rehash_stacks(struct cap_stacks *s, uint64_t n_slots)
{
	uint64_t *slots = calloc(n_slots, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (uint64_t off = 0; off < s->arena_len; off += 1 + (s->arena[off] >> HDR_N_SHIFT)) {
		const uint32_t n = (uint32_t)(s->arena[off] >> HDR_N_SHIFT);
		const uint64_t h = cap_stacks_hash(s->arena + off + 1, n);
		uint64_t i = h & (n_slots - 1);

		while (slots[i])
			i = (i + 1) & (n_slots - 1);
		slots[i] = slot_of(h, off);
	}
	free(s->slots);
	s->slots = slots;
	s->n_slots = n_slots;
	return 0;
}

static int rehash_addrs(struct cap_stacks *s, uint64_t n_slots)
{
	uint64_t *slots = calloc(n_slots, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (uint64_t k = 0; k < s->n_addrs; k++) {
		uint64_t i = mix(s->addrs[k]) & (n_slots - 1);

		while (slots[i])
			i = (i + 1) & (n_slots - 1);
		slots[i] = s->addrs[k] + 1;
	}
	free(s->aslots);
	s->aslots = slots;
	s->n_aslots = n_slots;
	return 0;
}

static int note_addr(struct cap_stacks *s, uint64_t a)
{
	uint64_t i;

	if (2 * (s->n_addrs + 1) > s->n_aslots &&
	    rehash_addrs(s, s->n_aslots ? 2 * s->n_aslots : 1024) < 0)
		return -ENOMEM;
	for (i = mix(a) & (s->n_aslots - 1); s->aslots[i]; i = (i + 1) & (s->n_aslots - 1))
		if (s->aslots[i] == a + 1)
			return 0;
	if (grow64(&s->addrs, &s->addrs_cap, s->n_addrs + 1, sizeof(*s->addrs)) < 0)
		return -ENOMEM;
	s->aslots[i] = a + 1;
	s->addrs[s->n_addrs++] = a;
	return 0;
}

/*
 * Store backtrace @f as the next id at the arena's end; its addresses join the set.
 * @return its arena offset, or -ENOMEM
 */
static int64_t add_stack(struct cap_stacks *s, const uint64_t *f, uint32_t n)
{
	const uint64_t off = s->arena_len;

	assert(s->n_stacks < (UINT64_C(1) << HDR_N_SHIFT));
	if (off + 1 + n > SLOT_OFF_MASK ||
	    grow64(&s->arena, &s->arena_cap, off + 1 + n, sizeof(*s->arena)) < 0)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		if (note_addr(s, f[i]) < 0)
			return -ENOMEM;
	s->arena[off] = (uint64_t)n << HDR_N_SHIFT | s->n_stacks;
	memcpy(s->arena + off + 1, f, n * sizeof(*f));
	s->arena_len += 1 + n;
	s->n_stacks++;
	return (int64_t)off;
}

int cap_stacks_intern_hashed(struct cap_stacks *s, struct tfs_writer *w, uint32_t rank,
			     const uint64_t *frames, uint32_t n, uint64_t hash, uint64_t *id)
{
	const uint64_t tag = hash >> SLOT_OFF_BITS << SLOT_OFF_BITS;
	const uint64_t want = (uint64_t)n << HDR_N_SHIFT;
	int64_t off;
	uint64_t i;
	int rc;

	assert(n < (UINT32_C(1) << (64 - HDR_N_SHIFT)));
	if (2 * (s->n_stacks + 1) > s->n_slots &&
	    rehash_stacks(s, s->n_slots ? 2 * s->n_slots : 1024) < 0)
		return -ENOMEM;
	for (i = hash & (s->n_slots - 1); s->slots[i]; i = (i + 1) & (s->n_slots - 1)) {
		const uint64_t *hdr;

		if ((s->slots[i] & ~SLOT_OFF_MASK) != tag)
			continue;
		hdr = s->arena + (s->slots[i] & SLOT_OFF_MASK) - 1;
		if ((*hdr & ~((UINT64_C(1) << HDR_N_SHIFT) - 1)) == want &&
		    memcmp(hdr + 1, frames, n * sizeof(*frames)) == 0) {
			*id = *hdr & ((UINT64_C(1) << HDR_N_SHIFT) - 1);
			return 0;
		}
	}
	rc = tfs_writer_add_backtrace(w, rank, s->n_stacks, frames, n);
	if (rc < 0)
		return rc;
	off = add_stack(s, frames, n);
	if (off < 0)
		return (int)off;
	s->slots[i] = slot_of(hash, (uint64_t)off);
	*id = s->n_stacks - 1;
	return 0;
}

int cap_stacks_intern(struct cap_stacks *s, struct tfs_writer *w, uint32_t rank,
		      const uint64_t *frames, uint32_t n, uint64_t *id)
{
	return cap_stacks_intern_hashed(s, w, rank, frames, n, cap_stacks_hash(frames, n), id);
}

int cap_stacks_add_module(struct cap_stacks *s, uint64_t bias, uint64_t lo, uint64_t hi,
			  uint32_t tag, const char *path)
{
	char *p;

	if (s->n_mods == s->mods_cap) {
		uint32_t cap = s->mods_cap ? 2 * s->mods_cap : 32;
		struct cap_module *m = realloc(s->mods, cap * sizeof(*m));

		if (!m)
			return -ENOMEM;
		s->mods = m;
		s->mods_cap = cap;
	}
	p = strdup(path);
	if (!p)
		return -ENOMEM;
	s->mods[s->n_mods++] = (struct cap_module){bias, lo, hi, tag, p};
	return 0;
}

bool cap_stacks_module_index(const struct cap_stacks *s, uint64_t key, uint32_t *index)
{
	const uint64_t addr = key & SPOOL_FRAME_ADDR_MASK;
	const uint32_t tag = (uint32_t)(key >> SPOOL_FRAME_TAG_SHIFT);
	bool any = false;

	for (uint32_t i = s->n_mods; i-- > 0;) {
		if (addr < s->mods[i].lo || addr >= s->mods[i].hi)
			continue;
		if (s->mods[i].tag == tag) {
			*index = i;
			return true;
		}
		if (!any)
			*index = i;
		any = true;
	}
	return any;
}

uint64_t cap_stacks_n_addrs(const struct cap_stacks *s)
{
	return s->n_addrs;
}

uint64_t cap_stacks_addr(const struct cap_stacks *s, uint64_t i)
{
	return s->addrs[i];
}

uint64_t cap_stacks_n_stacks(const struct cap_stacks *s)
{
	return s->n_stacks;
}

uint32_t cap_stacks_n_modules(const struct cap_stacks *s)
{
	return s->n_mods;
}

const struct cap_module *cap_stacks_module(const struct cap_stacks *s, uint32_t i)
{
	return &s->mods[i];
}
