/*
 * Writer side of names (FORMAT.md §12): tfs_writer_set_name() keeps the latest name of each
 * (rank, class, id), and at save each rank's names become a table of the one `names`
 * section (names.c finds the ranks whose tables are equal or nearly so). It does not know
 * what the names name: a capture gives a file id's path, a test anything.
 */
#include <stdlib.h>
#include <string.h>

#include "names_i.h"
#include "writer_i.h"

/* A key: rank (4 bytes), id (8 bytes), class with its NUL (the rest, read in place). */
#define KEY_HEAD 12
#define KEY_MAX (KEY_HEAD + 256)

void wnames_init(struct wnames *n)
{
	memset(n, 0, sizeof(*n));
	intern_init(&n->keys);
	buf_init(&n->text);
}

void wnames_fini(struct wnames *n)
{
	intern_fini(&n->keys);
	buf_fini(&n->text);
	free(n->val);
	memset(n, 0, sizeof(*n));
}

static bool class_ok(const char *p)
{
	size_t n = strlen(p);

	if (n < 1 || n > 255)
		return false;
	for (size_t i = 0; i < n; i++)
		if (p[i] <= 0x20 || p[i] >= 0x7f || p[i] == '"' || p[i] == '\\')
			return false;
	return true;
}

int tfs_writer_set_name(struct tfs_writer *w, uint32_t rank, const char *sym_class, uint64_t id,
			const char *name)
{
	struct wnames *n = &w->names;
	uint8_t key[KEY_MAX];
	size_t klen, len;
	uint32_t k;
	bool is_new;
	int rc;

	if (w->saved || !sym_class || !class_ok(sym_class) || id == TFS_SYM_NONE || !name)
		return -EINVAL;
	len = strlen(name);
	if (len < 1 || len > NAMES_MAX_BYTES)
		return -EINVAL;
	klen = KEY_HEAD + strlen(sym_class) + 1;
	le_put32(key, rank);
	le_put64(key + 4, id);
	memcpy(key + KEY_HEAD, sym_class, klen - KEY_HEAD);
	if (n->keys.n == n->val_cap) {
		uint32_t cap = n->val_cap ? 2 * n->val_cap : 64;
		struct wname *v;

		if (n->val_cap >= UINT32_MAX / 4)
			return -ENOMEM;
		v = realloc(n->val, (size_t)cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		n->val = v;
		n->val_cap = cap;
	}
	rc = buf_reserve(&n->text, len);
	if (rc == 0)
		rc = intern_get(&n->keys, key, klen, &k, &is_new);
	if (rc < 0)
		return rc == -E2BIG ? -ENOMEM : rc;
	n->val[k] = (struct wname){n->text.len, (uint32_t)len};
	buf_put(&n->text, name, len); /* reserved above: cannot fail */
	if (rank > n->max_rank || n->keys.n == 1)
		n->max_rank = rank;
	return 0;
}

static uint32_t key_rank(const struct wnames *n, uint32_t k)
{
	size_t len;

	return le_get32(intern_key(&n->keys, k, &len));
}

static int cmp_key_rank(const void *a, const void *b, void *arg)
{
	uint32_t x = key_rank(arg, *(const uint32_t *)a), y = key_rank(arg, *(const uint32_t *)b);

	return x < y ? -1 : x > y;
}

/* The names of one rank's keys @ks[0..@n) as the encoder takes them. */
static void fill_in(const struct wnames *nm, const uint32_t *ks, uint32_t n, struct name_in *in)
{
	for (uint32_t i = 0; i < n; i++) {
		size_t len;
		const uint8_t *p = intern_key(&nm->keys, ks[i], &len);

		in[i] = (struct name_in){(const char *)p + KEY_HEAD, le_get64(p + 4),
					 (const char *)nm->text.data + nm->val[ks[i]].off,
					 nm->val[ks[i]].len};
	}
}

int wnames_encode(const struct wnames *nm, struct names_enc *e)
{
	uint32_t n = nm->keys.n;
	uint32_t *ks = malloc((n + 1) * sizeof(*ks));
	struct name_in *in = malloc((n + 1) * sizeof(*in));
	int rc = ks && in ? 0 : -ENOMEM;

	for (uint32_t i = 0; i < n && rc == 0; i++)
		ks[i] = i;
	if (rc == 0 && n > 1)
		qsort_r(ks, n, sizeof(*ks), cmp_key_rank, (void *)nm);
	for (uint32_t i = 0, j; i < n && rc == 0; i = j) {
		uint32_t rank = key_rank(nm, ks[i]), table;

		for (j = i; j < n && key_rank(nm, ks[j]) == rank; j++)
			;
		fill_in(nm, ks + i, j - i, in);
		rc = names_enc_table(e, in, j - i, &table);
		if (rc == 0)
			rc = names_enc_run(e, rank, 1, table);
	}
	free(ks);
	free(in);
	return rc;
}
