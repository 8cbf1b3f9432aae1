/*
 * Interning table: byte strings to dense ids 0, 1, 2... in first-seen order. Used for the
 * string table and for call signatures (the CST), on the writer side only. Not thread-safe;
 * each writer stream owns its own tables.
 */
#ifndef TFS_INTERN_I_H
#define TFS_INTERN_I_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "bytes_i.h"

struct intern {
	struct tfs_buf pool; /* all keys back to back */
	uint64_t *offs;	     /* [n + 1]: key i is pool[offs[i] .. offs[i + 1]) */
	uint32_t n, cap;
	uint32_t *slots;     /* open addressing, id + 1, 0 = empty */
	uint32_t n_slots;    /* power of two */
};

void intern_init(struct intern *t);
void intern_fini(struct intern *t);
/*
 * Find or add @key. @is_new tells which. @return 0 or -ENOMEM (nothing added), -E2BIG
 * when 2^31 keys exist
 */
int intern_get(struct intern *t, const void *key, size_t len, uint32_t *id, bool *is_new);
/* Id of @key if present. @return 0 or -ENOENT */
int intern_find(const struct intern *t, const void *key, size_t len, uint32_t *id);
static inline const uint8_t *intern_key(const struct intern *t, uint32_t id, size_t *len)
{
	*len = (size_t)(t->offs[id + 1] - t->offs[id]);
	/* only empty keys so far: no pool, and NULL + 0 is undefined */
	return t->pool.data ? t->pool.data + t->offs[id] : (const uint8_t *)"";
}

uint64_t hash_bytes(const void *p, size_t n);

/* Whether @a and @b hold the same @n bytes: keys are mostly call signatures of a few bytes,
 * for which a call to memcmp() costs more than the comparison. */
static inline bool bytes_eq(const uint8_t *a, const uint8_t *b, size_t n)
{
	for (; n >= 8; a += 8, b += 8, n -= 8) {
		uint64_t x, y;

		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		if (x != y)
			return false;
	}
	while (n--)
		if (*a++ != *b++)
			return false;
	return true;
}

#endif
