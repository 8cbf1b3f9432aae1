/*
 * Byte-level helpers shared by every codec module: a growable output buffer with
 * little-endian and LEB128 varint writers, and a bounded reader whose every getter checks
 * lengths and overflow and reports corruption through struct tfs_diag. Nothing here knows
 * about sections or events.
 */
#ifndef TFS_BYTES_I_H
#define TFS_BYTES_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfs/tfs.h"

/* Growable byte buffer. @len bytes in use of @cap allocated. Owns @data. */
struct tfs_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

void buf_init(struct tfs_buf *b);
void buf_fini(struct tfs_buf *b);
/* buf_reserve()'s slow path: grows @b. @return 0 or -ENOMEM */
int buf_grow(struct tfs_buf *b, size_t extra);

/*
 * Ensure room for @extra more bytes. @return 0 or -ENOMEM. Inline: the encoders reserve
 * per event, and nearly always the room is there.
 */
static inline int buf_reserve(struct tfs_buf *b, size_t extra)
{
	if (extra <= b->cap - b->len)
		return 0;
	return buf_grow(b, extra);
}
int buf_put(struct tfs_buf *b, const void *p, size_t n);
int buf_put_u8(struct tfs_buf *b, uint8_t v);
int buf_put_u16(struct tfs_buf *b, uint16_t v);
int buf_put_u32(struct tfs_buf *b, uint32_t v);
int buf_put_u64(struct tfs_buf *b, uint64_t v);
/* Unsigned LEB128, at most 10 bytes. */
int buf_put_varint(struct tfs_buf *b, uint64_t v);
/* varint length followed by the bytes */
int buf_put_str(struct tfs_buf *b, const char *s, size_t n);

/* Store @v as a varint at @p (room for 10 bytes). @return its length */
static inline size_t varint_store(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

static inline uint64_t zigzag_enc(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t zigzag_dec(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Characters of @v printed in decimal. */
static inline unsigned int dec_digits(uint64_t v)
{
	unsigned int n = 1;

	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

/* Store little-endian into raw memory. */
void le_put16(uint8_t *p, uint16_t v);
void le_put32(uint8_t *p, uint32_t v);
void le_put64(uint8_t *p, uint64_t v);
uint16_t le_get16(const uint8_t *p);
uint32_t le_get32(const uint8_t *p);
uint64_t le_get64(const uint8_t *p);

/*
 * Bounded reader over untrusted bytes. @base_off is the absolute file offset of data[0]
 * (reported in diagnostics), @section names what is being parsed. Every getter returns 0 or
 * -TFS_ECORRUPT, and on error fills @diag (if non-NULL) once: later errors keep the first.
 */
struct tfs_rd {
	const uint8_t *data;
	size_t len;
	size_t off;
	uint64_t base_off;
	const char *section;
	struct tfs_diag *diag;
};

void rd_init(struct tfs_rd *r, const void *data, size_t len, uint64_t base_off,
	     const char *section, struct tfs_diag *diag);
static inline size_t rd_left(const struct tfs_rd *r)
{
	return r->len - r->off;
}
int rd_u8(struct tfs_rd *r, uint8_t *v);
int rd_u16(struct tfs_rd *r, uint16_t *v);
int rd_u32(struct tfs_rd *r, uint32_t *v);
int rd_u64(struct tfs_rd *r, uint64_t *v);
int rd_varint(struct tfs_rd *r, uint64_t *v);
/* varint that must be <= @max */
int rd_varint_max(struct tfs_rd *r, uint64_t max, uint64_t *v, const char *what);
/* Borrow @n bytes: *p points into the reader's data. */
int rd_bytes(struct tfs_rd *r, size_t n, const uint8_t **p);
/* varint length + bytes, length <= @max */
int rd_str(struct tfs_rd *r, size_t max, const uint8_t **p, size_t *n);
/* Record a corruption at the current offset; always returns -TFS_ECORRUPT. */
int rd_fail(struct tfs_rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Fill @diag (if non-NULL and still empty). Returns @rc. */
int diag_set(struct tfs_diag *diag, int rc, uint64_t offset, const char *section,
	     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Overflow-checked arithmetic: return false on overflow. */
static inline bool add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
	return !__builtin_add_overflow(a, b, out);
}

static inline bool mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
	return !__builtin_mul_overflow(a, b, out);
}

#endif
