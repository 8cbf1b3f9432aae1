/*
 * Interning of byte strings into dense ids with an open-addressing hash table (linear
 * probing; keys are never removed, so no tombstones). It stores keys, not values: callers
 * keep per-id data in arrays indexed by id.
 */
#include <stdlib.h>
#include <string.h>

#include "intern_i.h"

void intern_init(struct intern *t)
{
	memset(t, 0, sizeof(*t));
	buf_init(&t->pool);
}

void intern_fini(struct intern *t)
{
	buf_fini(&t->pool);
	free(t->offs);
	free(t->slots);
	intern_init(t);
}

uint64_t hash_bytes(const void *p, size_t n)
{
	const uint8_t *s = p;
	uint64_t h = 0x9e3779b97f4a7c15u ^ n;

	while (n >= 8) {
		uint64_t v;

		memcpy(&v, s, 8);
		h = (h ^ v) * 0xff51afd7ed558ccdu;
		h ^= h >> 32;
		s += 8;
		n -= 8;
	}
	while (n--)
		h = (h ^ *s++) * 0x100000001b3u;
	h ^= h >> 29;
	h *= 0xc4ceb9fe1a85ec53u;
	return h ^ (h >> 32);
}

static bool key_eq(const struct intern *t, uint32_t id, const void *key, size_t len)
{
	size_t klen;
	const uint8_t *k = intern_key(t, id, &klen);

	return klen == len && bytes_eq(k, key, len);
}

static int grow_slots(struct intern *t)
{
	uint32_t n = t->n_slots ? t->n_slots * 2 : 64;
	uint32_t *s;

	if (n == 0 || n > (UINT32_C(1) << 31))
		return -E2BIG;
	s = calloc(n, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (uint32_t id = 0; id < t->n; id++) {
		size_t len;
		const uint8_t *k = intern_key(t, id, &len);
		uint32_t i = (uint32_t)hash_bytes(k, len) & (n - 1);

		while (s[i])
			i = (i + 1) & (n - 1);
		s[i] = id + 1;
	}
	free(t->slots);
	t->slots = s;
	t->n_slots = n;
	return 0;
}

int intern_find(const struct intern *t, const void *key, size_t len, uint32_t *id)
{
	uint32_t i;

	if (!t->n_slots)
		return -ENOENT;
	i = (uint32_t)hash_bytes(key, len) & (t->n_slots - 1);
	for (; t->slots[i]; i = (i + 1) & (t->n_slots - 1)) {
		if (key_eq(t, t->slots[i] - 1, key, len)) {
			*id = t->slots[i] - 1;
			return 0;
		}
	}
	return -ENOENT;
}

int intern_get(struct intern *t, const void *key, size_t len, uint32_t *id, bool *is_new)
{
	uint32_t i;
	int rc;

	if ((uint64_t)(t->n + 1) * 2 > t->n_slots) {
		rc = grow_slots(t);
		if (rc < 0)
			return rc;
	}
	i = (uint32_t)hash_bytes(key, len) & (t->n_slots - 1);
	for (; t->slots[i]; i = (i + 1) & (t->n_slots - 1)) {
		if (key_eq(t, t->slots[i] - 1, key, len)) {
			*id = t->slots[i] - 1;
			*is_new = false;
			return 0;
		}
	}
	if (t->n + 2 > t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 64;
		uint64_t *o = realloc(t->offs, (size_t)cap * sizeof(*o));

		if (!o)
			return -ENOMEM;
		if (!t->offs)
			o[0] = 0;
		t->offs = o;
		t->cap = cap;
	}
	rc = buf_put(&t->pool, key, len);
	if (rc < 0)
		return rc;
	t->offs[t->n + 1] = t->pool.len;
	t->slots[i] = t->n + 1;
	*id = t->n++;
	*is_new = true;
	return 0;
}
