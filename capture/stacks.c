/*
 * The backtraces of one traced process interned into stack ids, the distinct code
 * addresses they hold (each to be symbolised once) and the objects the process had loaded.
 * Two open-addressing tables: backtraces by content (ids index an arena of frames) and
 * addresses. It does not symbolise (symbolize.c) nor code backtraces (the codec does).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tfs/writer.h"
#include "spool_i.h"
#include "stacks_i.h"

struct cap_stacks {
	uint64_t *frames; /* every interned backtrace, back to back */
	uint64_t n_frames, frames_cap;
	uint64_t *off; /* by stack id: its first frame in frames */
	uint32_t *len; /* by stack id: its frame count */
	uint64_t n_stacks, stacks_cap;
	uint64_t *slots; /* stack id + 1 by hash, 0 empty; n_slots a power of two */
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

static uint64_t hash_frames(const uint64_t *f, uint32_t n)
{
	uint64_t h = n;

	for (uint32_t i = 0; i < n; i++)
		h = mix(h ^ f[i]) + 0x9e3779b97f4a7c15u;
	return mix(h);
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
	free(s->frames);
	free(s->off);
	free(s->len);
	free(s->slots);
	free(s->addrs);
	free(s->aslots);
	for (uint32_t i = 0; i < s->n_mods; i++)
		free(s->mods[i].path);
	free(s->mods);
	free(s);
}

static bool same(const struct cap_stacks *s, uint64_t id, const uint64_t *f, uint32_t n)
{
	return s->len[id] == n && memcmp(s->frames + s->off[id], f, n * sizeof(*f)) == 0;
}

/* Rehash the backtrace table to @n_slots. @return 0 or -ENOMEM */
static int rehash_stacks(struct cap_stacks *s, uint64_t n_slots)
{
	uint64_t *slots = calloc(n_slots, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (uint64_t id = 0; id < s->n_stacks; id++) {
		uint64_t i = hash_frames(s->frames + s->off[id], s->len[id]) & (n_slots - 1);

		while (slots[i])
			i = (i + 1) & (n_slots - 1);
		slots[i] = id + 1;
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

/* Store backtrace @f as the next id; its addresses join the set. @return 0 or -ENOMEM */
static int add_stack(struct cap_stacks *s, const uint64_t *f, uint32_t n)
{
	uint64_t cap = s->stacks_cap;

	if (grow64(&s->frames, &s->frames_cap, s->n_frames + n, sizeof(*s->frames)) < 0 ||
	    grow64(&s->off, &cap, s->n_stacks + 1, sizeof(*s->off)) < 0)
		return -ENOMEM;
	if (cap != s->stacks_cap) {
		uint32_t *len = realloc(s->len, cap * sizeof(*len));

		if (!len)
			return -ENOMEM;
		s->len = len;
		s->stacks_cap = cap;
	}
	for (uint32_t i = 0; i < n; i++)
		if (note_addr(s, f[i]) < 0)
			return -ENOMEM;
	memcpy(s->frames + s->n_frames, f, n * sizeof(*f));
	s->off[s->n_stacks] = s->n_frames;
	s->len[s->n_stacks] = n;
	s->n_frames += n;
	s->n_stacks++;
	return 0;
}

int cap_stacks_intern(struct cap_stacks *s, struct tfs_writer *w, uint32_t rank,
		      const uint64_t *frames, uint32_t n, uint64_t *id)
{
	uint64_t i;
	int rc;

	if (2 * (s->n_stacks + 1) > s->n_slots &&
	    rehash_stacks(s, s->n_slots ? 2 * s->n_slots : 1024) < 0)
		return -ENOMEM;
	for (i = hash_frames(frames, n) & (s->n_slots - 1); s->slots[i];
	     i = (i + 1) & (s->n_slots - 1)) {
		if (same(s, s->slots[i] - 1, frames, n)) {
			*id = s->slots[i] - 1;
			return 0;
		}
	}
	rc = tfs_writer_add_backtrace(w, rank, s->n_stacks, frames, n);
	if (rc < 0)
		return rc;
	rc = add_stack(s, frames, n);
	if (rc < 0)
		return rc;
	s->slots[i] = s->n_stacks;
	*id = s->n_stacks - 1;
	return 0;
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
