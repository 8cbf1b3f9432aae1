/*
 * The symbolised addresses of one object file, kept for as long as the file is: every
 * process that maps the file again (make's many cc1) finds an address it shares with an
 * earlier one here instead of looking it up again. Addresses are in the file's own terms
 * (before any load bias), so the result is the same for every process. Open addressing by
 * address; the frames of all addresses back to back; strings interned in an arena (each
 * distinct one stored once, stable until the cache is freed), so a result outlives the
 * DWARF reader and the symbol table it came from. Also the file's demangled names, each
 * demangled once. It does not look anything up (symbolize.c does).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "symbols_i.h"

#define ARENA_BYTES 65536 /* one block of interned strings; longer strings get their own */

/* A string set (key == value) or map, by content, open addressing. */
struct strmap {
	const char **keys, **vals; /* n_slots each; NULL key: empty */
	size_t n, n_slots;	   /* n_slots a power of two, at most half full */
};

/* One stored address: frames[first .. first + n). */
struct entry {
	uint64_t pc;
	uint32_t first, n;
};

struct cap_symcache {
	struct entry *v;
	size_t n, cap;
	uint32_t *slots; /* entry index + 1 by hash of pc, 0 empty; n_slots a power of two */
	size_t n_slots;
	struct tfs_src_frame *frames;
	size_t n_frames, frames_cap;
	struct strmap strings;	 /* interned strings */
	struct strmap demangled; /* interned name -> interned demangled name */
	char **blocks;		 /* the arena's blocks, to free */
	size_t n_blocks, blocks_cap;
	char *cur; /* the block being filled, ARENA_BYTES long */
	size_t cur_used;
};

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdu;
	h ^= h >> 33;
	return h;
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3u;
	return mix(h);
}

/* The slot of @key in @m: where it is, or the empty one where it would go. */
static size_t strmap_slot(const struct strmap *m, const char *key)
{
	size_t i = hash_str(key) & (m->n_slots - 1);

	while (m->keys[i] && strcmp(m->keys[i], key) != 0)
		i = (i + 1) & (m->n_slots - 1);
	return i;
}

static int strmap_grow(struct strmap *m)
{
	struct strmap g = {.n = m->n, .n_slots = m->n_slots ? 2 * m->n_slots : 256};

	g.keys = calloc(g.n_slots, sizeof(*g.keys));
	g.vals = calloc(g.n_slots, sizeof(*g.vals));
	if (!g.keys || !g.vals) {
		free(g.keys);
		free(g.vals);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->n_slots; i++) {
		if (m->keys[i]) {
			size_t j = strmap_slot(&g, m->keys[i]);

			g.keys[j] = m->keys[i];
			g.vals[j] = m->vals[i];
		}
	}
	free(m->keys);
	free(m->vals);
	*m = g;
	return 0;
}

/* Room for @len bytes in the arena. @return NULL when out of memory */
static char *arena_alloc(struct cap_symcache *c, size_t len)
{
	const bool own = len > ARENA_BYTES / 4; /* a long string: a block of its own */
	char *p;

	if (!own && c->cur && c->cur_used + len <= ARENA_BYTES) {
		p = c->cur + c->cur_used;
		c->cur_used += len;
		return p;
	}
	if (c->n_blocks == c->blocks_cap) {
		size_t cap = c->blocks_cap ? 2 * c->blocks_cap : 16;
		char **v = realloc(c->blocks, cap * sizeof(*v));

		if (!v)
			return NULL;
		c->blocks = v;
		c->blocks_cap = cap;
	}
	p = malloc(own ? len : ARENA_BYTES);
	if (!p)
		return NULL;
	c->blocks[c->n_blocks++] = p;
	if (!own) {
		c->cur = p;
		c->cur_used = len;
	}
	return p;
}

/* The cache's copy of @s. @return NULL when out of memory */
static const char *intern(struct cap_symcache *c, const char *s)
{
	size_t i, len;
	char *p;

	if (2 * (c->strings.n + 1) > c->strings.n_slots && strmap_grow(&c->strings) < 0)
		return NULL;
	i = strmap_slot(&c->strings, s);
	if (c->strings.keys[i])
		return c->strings.keys[i];
	len = strlen(s) + 1;
	p = arena_alloc(c, len);
	if (!p)
		return NULL;
	memcpy(p, s, len);
	c->strings.keys[i] = c->strings.vals[i] = p;
	c->strings.n++;
	return p;
}

int cap_symcache_new(struct cap_symcache **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void cap_symcache_free(struct cap_symcache *c)
{
	if (!c)
		return;
	free(c->v);
	free(c->slots);
	free(c->frames);
	free(c->strings.keys);
	free(c->strings.vals);
	free(c->demangled.keys);
	free(c->demangled.vals);
	for (size_t i = 0; i < c->n_blocks; i++)
		free(c->blocks[i]);
	free(c->blocks);
	free(c);
}

/* The slot of @pc: where it is, or the empty one where it would go. */
static size_t pc_slot(const struct cap_symcache *c, uint64_t pc)
{
	size_t i = mix(pc) & (c->n_slots - 1);

	while (c->slots[i] && c->v[c->slots[i] - 1].pc != pc)
		i = (i + 1) & (c->n_slots - 1);
	return i;
}

bool cap_symcache_get(const struct cap_symcache *c, uint64_t pc,
		      const struct tfs_src_frame **frames, uint32_t *n)
{
	const struct entry *e;
	size_t i;

	if (!c->n_slots)
		return false;
	i = pc_slot(c, pc);
	if (!c->slots[i])
		return false;
	e = &c->v[c->slots[i] - 1];
	*frames = c->frames + e->first;
	*n = e->n;
	return true;
}

static int rehash(struct cap_symcache *c)
{
	size_t n_slots = c->n_slots ? 2 * c->n_slots : 1024;
	uint32_t *old = c->slots;

	c->slots = calloc(n_slots, sizeof(*c->slots));
	if (!c->slots) {
		c->slots = old;
		return -ENOMEM;
	}
	free(old);
	c->n_slots = n_slots;
	for (size_t k = 0; k < c->n; k++)
		c->slots[pc_slot(c, c->v[k].pc)] = (uint32_t)k + 1;
	return 0;
}

/* Room for one more entry and @n more frames. @return 0 or -ENOMEM */
static int reserve(struct cap_symcache *c, uint32_t n)
{
	if (c->n >= UINT32_MAX - 1 || c->n_frames + n > UINT32_MAX)
		return -ENOMEM;
	if (2 * (c->n + 1) > c->n_slots && rehash(c) < 0)
		return -ENOMEM;
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 256;
		struct entry *v = realloc(c->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	if (c->n_frames + n > c->frames_cap || !c->frames) { /* a first entry of no frames too */
		size_t cap = c->frames_cap ? 2 * c->frames_cap : 1024;
		struct tfs_src_frame *f;

		while (cap < c->n_frames + n)
			cap *= 2;
		f = realloc(c->frames, cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		c->frames = f;
		c->frames_cap = cap;
	}
	return 0;
}

int cap_symcache_put(struct cap_symcache *c, uint64_t pc, const struct tfs_src_frame *frames,
		     uint32_t n, const struct tfs_src_frame **stored)
{
	struct tfs_src_frame *f;

	if (reserve(c, n) < 0)
		return -ENOMEM;
	f = c->frames + c->n_frames;
	for (uint32_t i = 0; i < n; i++) {
		f[i].function = frames[i].function ? intern(c, frames[i].function) : NULL;
		f[i].file = intern(c, frames[i].file);
		f[i].line = frames[i].line;
		if ((frames[i].function && !f[i].function) || !f[i].file)
			return -ENOMEM;
	}
	c->v[c->n] = (struct entry){pc, (uint32_t)c->n_frames, n};
	c->n_frames += n;
	c->slots[pc_slot(c, pc)] = (uint32_t)++c->n;
	*stored = f;
	return 0;
}

const char *cap_symcache_demangle(struct cap_symcache *c, const char *name)
{
	const char *key, *val;
	char *d;
	size_t i;

	if (name[0] != '_' || name[1] != 'Z') /* the only names demangle.c takes */
		return name;
	if (2 * (c->demangled.n + 1) > c->demangled.n_slots && strmap_grow(&c->demangled) < 0)
		return NULL;
	i = strmap_slot(&c->demangled, name);
	if (c->demangled.keys[i])
		return c->demangled.vals[i];
	d = cap_demangle_new(name);
	key = intern(c, name);
	val = d ? intern(c, d) : key;
	free(d);
	if (!key || !val)
		return NULL;
	i = strmap_slot(&c->demangled, key); /* interning did not touch this map */
	c->demangled.keys[i] = key;
	c->demangled.vals[i] = val;
	c->demangled.n++;
	return val;
}

size_t cap_symcache_n(const struct cap_symcache *c)
{
	return c->n;
}

void cap_symcache_entry(const struct cap_symcache *c, size_t i, uint64_t *pc,
			const struct tfs_src_frame **frames, uint32_t *n)
{
	*pc = c->v[i].pc;
	*frames = c->frames + c->v[i].first;
	*n = c->v[i].n;
}
