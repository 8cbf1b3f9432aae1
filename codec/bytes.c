/*
 * Growable buffers, little-endian and varint encoding, and the bounded reader used for all
 * untrusted input. It does not interpret what it reads; callers name the section.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytes_i.h"

void buf_init(struct tfs_buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void buf_fini(struct tfs_buf *b)
{
	free(b->data);
	buf_init(b);
}

int buf_grow(struct tfs_buf *b, size_t extra)
{
	size_t need, cap;
	uint8_t *p;

	if (__builtin_add_overflow(b->len, extra, &need))
		return -ENOMEM;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < need) {
		if (cap > SIZE_MAX / 2)
			return -ENOMEM;
		cap *= 2;
	}
	p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int buf_put(struct tfs_buf *b, const void *p, size_t n)
{
	int rc;

	if (n == 0)
		return 0;
	rc = buf_reserve(b, n);
	if (rc < 0)
		return rc;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

int buf_put_u8(struct tfs_buf *b, uint8_t v)
{
	return buf_put(b, &v, 1);
}

int buf_put_u16(struct tfs_buf *b, uint16_t v)
{
	uint8_t t[2];

	le_put16(t, v);
	return buf_put(b, t, sizeof(t));
}

int buf_put_u32(struct tfs_buf *b, uint32_t v)
{
	uint8_t t[4];

	le_put32(t, v);
	return buf_put(b, t, sizeof(t));
}

int buf_put_u64(struct tfs_buf *b, uint64_t v)
{
	uint8_t t[8];

	le_put64(t, v);
	return buf_put(b, t, sizeof(t));
}

int buf_put_varint(struct tfs_buf *b, uint64_t v)
{
	uint8_t t[10];
	size_t n = 0;

	while (v >= 0x80) {
		t[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	t[n++] = (uint8_t)v;
	return buf_put(b, t, n);
}

int buf_put_str(struct tfs_buf *b, const char *s, size_t n)
{
	int rc = buf_put_varint(b, n);

	if (rc < 0)
		return rc;
	return buf_put(b, s, n);
}

void le_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

void le_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

void le_put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

uint16_t le_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

uint32_t le_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t le_get64(const uint8_t *p)
{
	return (uint64_t)le_get32(p) | (uint64_t)le_get32(p + 4) << 32;
}

static int diag_vset(struct tfs_diag *diag, int rc, uint64_t offset, const char *section,
		     const char *fmt, va_list ap)
{
	if (!diag || diag->reason[0])
		return rc;
	diag->offset = offset;
	snprintf(diag->section, sizeof(diag->section), "%s", section ? section : "?");
	vsnprintf(diag->reason, sizeof(diag->reason), fmt, ap);
	return rc;
}

int diag_set(struct tfs_diag *diag, int rc, uint64_t offset, const char *section,
	     const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_vset(diag, rc, offset, section, fmt, ap);
	va_end(ap);
	return rc;
}

const char *tfs_diag_str(const struct tfs_diag *diag, char *buf, size_t buf_cap)
{
	snprintf(buf, buf_cap, "section=%s offset=%llu: %s", diag->section,
		 (unsigned long long)diag->offset, diag->reason);
	return buf;
}

void rd_init(struct tfs_rd *r, const void *data, size_t len, uint64_t base_off,
	     const char *section, struct tfs_diag *diag)
{
	r->data = data;
	r->len = len;
	r->off = 0;
	r->base_off = base_off;
	r->section = section;
	r->diag = diag;
}

int rd_fail(struct tfs_rd *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_vset(r->diag, -TFS_ECORRUPT, r->base_off + r->off, r->section, fmt, ap);
	va_end(ap);
	return -TFS_ECORRUPT;
}

static int need(struct tfs_rd *r, size_t n, const char *what)
{
	if (rd_left(r) < n)
		return rd_fail(r, "truncated %s: need %zu bytes, %zu left", what, n, rd_left(r));
	return 0;
}

int rd_u8(struct tfs_rd *r, uint8_t *v)
{
	if (need(r, 1, "u8"))
		return -TFS_ECORRUPT;
	*v = r->data[r->off++];
	return 0;
}

int rd_u16(struct tfs_rd *r, uint16_t *v)
{
	if (need(r, 2, "u16"))
		return -TFS_ECORRUPT;
	*v = le_get16(r->data + r->off);
	r->off += 2;
	return 0;
}

int rd_u32(struct tfs_rd *r, uint32_t *v)
{
	if (need(r, 4, "u32"))
		return -TFS_ECORRUPT;
	*v = le_get32(r->data + r->off);
	r->off += 4;
	return 0;
}

int rd_u64(struct tfs_rd *r, uint64_t *v)
{
	if (need(r, 8, "u64"))
		return -TFS_ECORRUPT;
	*v = le_get64(r->data + r->off);
	r->off += 8;
	return 0;
}

int rd_varint(struct tfs_rd *r, uint64_t *v)
{
	uint64_t x = 0;

	for (unsigned int shift = 0; shift < 64; shift += 7) {
		uint8_t c;

		if (r->off >= r->len)
			return rd_fail(r, "truncated varint");
		c = r->data[r->off++];
		if (shift == 63 && c > 1)
			return rd_fail(r, "varint overflows 64 bits");
		x |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return rd_fail(r, "varint longer than 10 bytes");
}

int rd_varint_max(struct tfs_rd *r, uint64_t max, uint64_t *v, const char *what)
{
	size_t at = r->off;
	int rc = rd_varint(r, v);

	if (rc < 0)
		return rc;
	if (*v > max) {
		r->off = at;
		return rd_fail(r, "%s %llu exceeds limit %llu", what, (unsigned long long)*v,
			       (unsigned long long)max);
	}
	return 0;
}

int rd_bytes(struct tfs_rd *r, size_t n, const uint8_t **p)
{
	if (need(r, n, "byte string"))
		return -TFS_ECORRUPT;
	*p = r->data + r->off;
	r->off += n;
	return 0;
}

int rd_str(struct tfs_rd *r, size_t max, const uint8_t **p, size_t *n)
{
	uint64_t len;
	int rc = rd_varint_max(r, max, &len, "string length");

	if (rc < 0)
		return rc;
	*n = (size_t)len;
	return rd_bytes(r, *n, p);
}
