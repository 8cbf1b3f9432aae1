/*
 * Symbols section payload (FORMAT.md §11), both directions. The writer side keeps each
 * symbol as a small record of string ids and sorts the records by address when the section
 * is written; the reader side checks every field while building flat arrays searched by
 * binary search. Nothing here compresses or knows which rank a table belongs to.
 */
#include <stdlib.h>
#include <string.h>

#include "symtab_i.h"

void symenc_init(struct symenc *e)
{
	memset(e, 0, sizeof(*e));
	intern_init(&e->strs);
	intern_init(&e->addrs);
	buf_init(&e->recs);
}

void symenc_fini(struct symenc *e)
{
	intern_fini(&e->strs);
	intern_fini(&e->addrs);
	buf_fini(&e->recs);
	free(e->ents);
	memset(e, 0, sizeof(*e));
}

static int check_frames(const struct tfs_src_frame *frames, uint32_t n)
{
	if (n == 0 || n > SYM_MAX_FRAMES || !frames)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (!frames[i].function || !frames[i].file ||
		    strlen(frames[i].function) > SYM_MAX_STR ||
		    strlen(frames[i].file) > SYM_MAX_STR)
			return -EINVAL;
	}
	return 0;
}

static int reserve_ent(struct symenc *e)
{
	uint32_t cap = e->ents_cap ? e->ents_cap * 2 : 64;
	struct sym_ent *p;

	if (e->n_ents < e->ents_cap)
		return 0;
	if (cap <= e->ents_cap)
		return -ENOMEM;
	p = realloc(e->ents, (size_t)cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	e->ents = p;
	e->ents_cap = cap;
	return 0;
}

int symenc_add(struct symenc *e, uint64_t addr, const struct tfs_src_frame *frames, uint32_t n)
{
	uint32_t ids[2 * SYM_MAX_FRAMES], addr_id;
	struct sym_ent *ent;
	uint8_t key[8];
	bool is_new;
	int rc = check_frames(frames, n);

	if (rc == 0)
		rc = reserve_ent(e);
	/* a varint is at most 10 bytes: once reserved, the record cannot fail */
	if (rc == 0)
		rc = buf_reserve(&e->recs, 10 + (size_t)n * 30);
	for (uint32_t i = 0; i < n && rc == 0; i++) {
		rc = intern_get(&e->strs, frames[i].function, strlen(frames[i].function),
				&ids[2 * i], &is_new);
		if (rc == 0)
			rc = intern_get(&e->strs, frames[i].file, strlen(frames[i].file),
					&ids[2 * i + 1], &is_new);
	}
	if (rc < 0)
		return rc == -E2BIG ? -ENOMEM : rc;
	le_put64(key, addr);
	rc = intern_get(&e->addrs, key, sizeof(key), &addr_id, &is_new);
	if (rc < 0)
		return -ENOMEM;
	if (!is_new)
		return -EEXIST;
	ent = &e->ents[e->n_ents++];
	ent->addr = addr;
	ent->rec_off = e->recs.len;
	buf_put_varint(&e->recs, n);
	for (uint32_t i = 0; i < n; i++) {
		buf_put_varint(&e->recs, ids[2 * i]);
		buf_put_varint(&e->recs, ids[2 * i + 1]);
		buf_put_varint(&e->recs, frames[i].line);
	}
	ent->rec_len = e->recs.len - ent->rec_off;
	return 0;
}

static int cmp_ent(const void *a, const void *b)
{
	const struct sym_ent *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int symenc_finish(struct symenc *e, struct tfs_buf *out)
{
	size_t len0 = out->len;
	uint64_t prev = 0;
	int rc;

	qsort(e->ents, e->n_ents, sizeof(*e->ents), cmp_ent);
	rc = buf_put_varint(out, e->strs.n);
	for (uint32_t i = 0; i < e->strs.n && rc == 0; i++) {
		size_t n;
		const uint8_t *p = intern_key(&e->strs, i, &n);

		rc = buf_put_str(out, (const char *)p, n);
	}
	if (rc == 0)
		rc = buf_put_varint(out, e->n_ents);
	for (uint32_t i = 0; i < e->n_ents && rc == 0; i++) {
		const struct sym_ent *ent = &e->ents[i];

		rc = buf_put_varint(out, ent->addr - prev);
		if (rc == 0)
			rc = buf_put(out, e->recs.data + ent->rec_off, ent->rec_len);
		prev = ent->addr;
	}
	if (rc < 0)
		out->len = len0;
	return rc;
}

/* A string index: < @n_strs. */
static int rd_index(struct tfs_rd *r, uint64_t n_strs, uint64_t *v)
{
	int rc = rd_varint_max(r, n_strs ? n_strs - 1 : 0, v, "string index");

	if (rc == 0 && !n_strs)
		rc = rd_fail(r, "string index with no strings");
	return rc;
}

static int decode_strings(struct symtab *st, struct tfs_rd *r, uint64_t *n_strs)
{
	char *at;
	int rc = rd_varint_max(r, rd_left(r), n_strs, "string count");

	if (rc < 0)
		return rc;
	/* the strings' bytes are part of the payload: arena <= payload + one NUL each */
	st->arena = malloc(r->len + *n_strs + 1);
	st->strs = calloc(*n_strs + 1, sizeof(*st->strs));
	if (!st->arena || !st->strs)
		return -ENOMEM;
	at = st->arena;
	for (uint64_t i = 0; i < *n_strs; i++) {
		const uint8_t *p;
		size_t n;

		rc = rd_str(r, SYM_MAX_STR, &p, &n);
		if (rc < 0)
			return rc;
		if (memchr(p, 0, n))
			return rd_fail(r, "string %llu holds a NUL byte", (unsigned long long)i);
		memcpy(at, p, n);
		at[n] = 0;
		st->strs[i] = at;
		at += n + 1;
	}
	return 0;
}

static int grow_frames(struct symtab *st, uint64_t need, uint64_t *cap)
{
	uint64_t n = *cap ? *cap * 2 : 256;
	struct tfs_src_frame *p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	p = realloc(st->frames, (size_t)n * sizeof(*p));
	if (!p)
		return -ENOMEM;
	st->frames = p;
	*cap = n;
	return 0;
}

static int decode_addr(struct symtab *st, struct tfs_rd *r, uint64_t i, uint64_t n_strs,
		       uint64_t *cap)
{
	uint64_t delta, n, fn, file, line, total = st->first[i];
	int rc = rd_varint(r, &delta);

	if (rc < 0)
		return rc;
	if (i > 0 && delta == 0)
		return rd_fail(r, "address %llu repeats the previous one", (unsigned long long)i);
	if (i > 0 && !add_u64(st->addrs[i - 1], delta, &st->addrs[i]))
		return rd_fail(r, "address %llu past 2^64 - 1", (unsigned long long)i);
	if (i == 0)
		st->addrs[0] = delta;
	rc = rd_varint(r, &n);
	if (rc == 0 && (n == 0 || n > SYM_MAX_FRAMES))
		rc = rd_fail(r, "address with %llu source frames", (unsigned long long)n);
	if (rc == 0)
		rc = grow_frames(st, total + n, cap);
	for (uint64_t f = 0; f < n && rc == 0; f++) {
		rc = rd_index(r, n_strs, &fn);
		if (rc == 0)
			rc = rd_index(r, n_strs, &file);
		if (rc == 0)
			rc = rd_varint_max(r, UINT32_MAX, &line, "line");
		if (rc < 0)
			break;
		st->frames[total + f].function = st->strs[fn];
		st->frames[total + f].file = st->strs[file];
		st->frames[total + f].line = (uint32_t)line;
	}
	st->first[i + 1] = total + n;
	return rc;
}

int symtab_decode(struct symtab *st, const uint8_t *data, size_t len, uint64_t file_off,
		  struct tfs_diag *diag)
{
	struct tfs_rd r;
	uint64_t n_strs, cap = 0;
	int rc;

	memset(st, 0, sizeof(*st));
	rd_init(&r, data, len, 0, "symbols", diag);
	rc = decode_strings(st, &r, &n_strs);
	if (rc == 0)
		rc = rd_varint_max(&r, rd_left(&r) / 5, &st->n_addrs, "address count");
	if (rc < 0)
		goto err;
	st->addrs = malloc((st->n_addrs + 1) * sizeof(*st->addrs));
	st->first = calloc(st->n_addrs + 1, sizeof(*st->first));
	if (!st->addrs || !st->first) {
		rc = -ENOMEM;
		goto err;
	}
	for (uint64_t i = 0; i < st->n_addrs && rc == 0; i++)
		rc = decode_addr(st, &r, i, n_strs, &cap);
	if (rc == 0 && rd_left(&r))
		rc = rd_fail(&r, "%zu trailing bytes", rd_left(&r));
	if (rc == 0)
		return 0;
err:
	/* the payload is compressed: the file offset is what a user can look at */
	if (rc == -TFS_ECORRUPT && diag)
		diag->offset = file_off;
	symtab_fini(st);
	return rc;
}

void symtab_fini(struct symtab *st)
{
	free(st->addrs);
	free(st->first);
	free(st->frames);
	free(st->arena);
	free(st->strs);
	memset(st, 0, sizeof(*st));
}

uint32_t symtab_find(const struct symtab *st, uint64_t addr, const struct tfs_src_frame **frames)
{
	uint64_t lo = 0, hi = st->n_addrs;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (st->addrs[mid] < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == st->n_addrs || st->addrs[lo] != addr) {
		*frames = NULL;
		return 0;
	}
	*frames = st->frames + st->first[lo];
	return (uint32_t)(st->first[lo + 1] - st->first[lo]);
}
