/*
 * Container reading and writing (FORMAT.md §1, §2): the 40-byte header, the 48-byte
 * section table entries, crc checks and zstd frames around section payloads. Payload
 * contents are other modules' business.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "container_i.h"
#include "crc32c_i.h"
#include "zstd_i.h"

static const uint8_t magic[8] = {0x89, 'T', 'F', 'S', '\r', '\n', 0x1a, '\n'};

const char *ctr_type_name(uint32_t type)
{
	static const char *const names[] = {"?",	  "meta",    "schema",	   "strings",
					    "cst",	  "streams", "grammar",	   "values",
					    "backtraces", "symbols", "vpatch"};

	return type <= SEC_TYPE_MAX ? names[type] : "unknown";
}

static int write_mem(struct tfs_buf *m, const void *p, size_t n, uint64_t off)
{
	if (off + n > m->len) {
		int rc = buf_reserve(m, (size_t)(off + n - m->len));

		if (rc < 0)
			return rc;
		m->len = (size_t)(off + n);
	}
	if (n)
		memcpy(m->data + off, p, n);
	return 0;
}

static int write_all(const struct ctr_writer *cw, const void *p, size_t n, uint64_t off)
{
	const uint8_t *b = p;
	int fd = cw->fd;

	if (cw->mem)
		return write_mem(cw->mem, p, n, off);

	while (n) {
		ssize_t w = pwrite(fd, b, n, (off_t)off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		b += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

int ctr_writer_init(struct ctr_writer *cw, int fd, int zstd_level)
{
	uint8_t zero[CTR_HEADER_BYTES] = {0};

	memset(cw, 0, sizeof(*cw));
	cw->fd = fd;
	cw->zstd_level = zstd_level;
	cw->off = CTR_HEADER_BYTES;
	return write_all(cw, zero, sizeof(zero), 0);
}

int ctr_writer_init_mem(struct ctr_writer *cw, struct tfs_buf *mem, int zstd_level)
{
	uint8_t zero[CTR_HEADER_BYTES] = {0};

	memset(cw, 0, sizeof(*cw));
	cw->fd = -1;
	cw->mem = mem;
	cw->zstd_level = zstd_level;
	cw->off = CTR_HEADER_BYTES;
	return write_all(cw, zero, sizeof(zero), 0);
}

void ctr_writer_fini(struct ctr_writer *cw)
{
	free(cw->ents);
	cw->ents = NULL;
	cw->n = cw->cap = 0;
}

static int reserve_entry(struct ctr_writer *cw)
{
	struct sec_entry *e;
	uint32_t cap = cw->cap ? cw->cap * 2 : 16;

	if (cw->n < cw->cap)
		return 0;
	e = realloc(cw->ents, cap * sizeof(*e));
	if (!e)
		return -ENOMEM;
	cw->ents = e;
	cw->cap = cap;
	return 0;
}

int ctr_add_stored(struct ctr_writer *cw, const struct sec_entry *e, const void *stored)
{
	int rc = reserve_entry(cw);

	if (rc == 0)
		rc = write_all(cw, stored, (size_t)e->stored, cw->off);
	if (rc < 0)
		return rc;
	cw->ents[cw->n] = *e;
	cw->ents[cw->n].off = cw->off;
	cw->off += e->stored;
	cw->n++;
	return 0;
}

int ctr_add(struct ctr_writer *cw, uint16_t type, int compress, const void *data, size_t n,
	    size_t head_len)
{
	struct tfs_buf z;
	struct sec_entry *e;
	const void *stored = data;
	size_t stored_len = n;
	int rc;

	rc = reserve_entry(cw);
	if (rc < 0)
		return rc;
	buf_init(&z);
	if (compress) {
		rc = zs_compress(&z, data, n, cw->zstd_level);
		if (rc < 0)
			goto out;
		/* CTR_ZSTD_IF_SMALLER: a frame costs about 13 bytes, tiny payloads stay raw */
		if (compress != CTR_ZSTD_IF_SMALLER || z.len < n) {
			stored = z.data;
			stored_len = z.len;
			head_len = z.len;
		} else {
			compress = 0;
			head_len = n;
		}
	}
	e = &cw->ents[cw->n];
	e->type = type;
	e->codec = compress ? 1 : 0;
	e->aux = 0;
	e->off = cw->off;
	e->stored = stored_len;
	e->raw = n;
	e->crc_all = crc32c(stored, stored_len);
	e->head_len = head_len > stored_len ? stored_len : head_len;
	e->crc_head = crc32c(stored, e->head_len);
	rc = write_all(cw, stored, stored_len, cw->off);
	if (rc < 0)
		goto out;
	cw->off += stored_len;
	cw->n++;
out:
	buf_fini(&z);
	return rc;
}

static void put_entry(uint8_t *p, const struct sec_entry *e)
{
	le_put16(p, e->type);
	le_put16(p + 2, e->codec);
	le_put32(p + 4, e->aux);
	le_put64(p + 8, e->off);
	le_put64(p + 16, e->stored);
	le_put64(p + 24, e->raw);
	le_put32(p + 32, e->crc_all);
	le_put32(p + 36, e->crc_head);
	le_put64(p + 40, e->head_len);
}

int ctr_finish(struct ctr_writer *cw)
{
	size_t tlen = (size_t)cw->n * CTR_ENTRY_BYTES;
	uint8_t hdr[CTR_HEADER_BYTES];
	uint8_t *table = malloc(tlen ? tlen : 1);
	int rc;

	if (!table)
		return -ENOMEM;
	for (uint32_t i = 0; i < cw->n; i++)
		put_entry(table + (size_t)i * CTR_ENTRY_BYTES, &cw->ents[i]);
	memset(hdr, 0, sizeof(hdr));
	memcpy(hdr, magic, sizeof(magic));
	le_put16(hdr + 8, TFS_FORMAT_MAJOR);
	le_put16(hdr + 10, TFS_FORMAT_MINOR);
	le_put64(hdr + 16, cw->off);
	le_put32(hdr + 24, cw->n);
	le_put32(hdr + 28, crc32c(table, tlen));
	le_put32(hdr + 32, crc32c(hdr, 32));
	rc = write_all(cw, table, tlen, cw->off);
	if (rc == 0)
		rc = write_all(cw, hdr, sizeof(hdr), 0);
	free(table);
	return rc;
}

static int parse_header(struct ctr_file *cf, uint64_t *table_off, struct tfs_diag *diag)
{
	const uint8_t *h = cf->map;

	if (cf->size < CTR_HEADER_BYTES || memcmp(h, magic, 4) != 0)
		return diag_set(diag, -TFS_EFORMAT, 0, "header", "not a tracefs trace (bad magic)");
	if (memcmp(h, magic, sizeof(magic)) != 0)
		return diag_set(diag, -TFS_ECORRUPT, 0, "header",
				"damaged magic (file transferred in text mode?)");
	cf->major = le_get16(h + 8);
	cf->minor = le_get16(h + 10);
	if (le_get32(h + 32) != crc32c(h, 32))
		return diag_set(diag, -TFS_ECORRUPT, 32, "header", "header checksum mismatch");
	if (cf->major != TFS_FORMAT_MAJOR)
		return diag_set(diag, -TFS_EFORMAT, 8, "header",
				"format %u.%u is %s than this tracefs (reads %u.x)", cf->major,
				cf->minor, cf->major > TFS_FORMAT_MAJOR ? "newer" : "older",
				TFS_FORMAT_MAJOR);
	if (le_get32(h + 12) != 0 || le_get32(h + 36) != 0)
		return diag_set(diag, -TFS_ECORRUPT, 12, "header", "reserved header bits set");
	*table_off = le_get64(h + 16);
	cf->n = le_get32(h + 24);
	if (cf->n > CTR_MAX_SECTIONS)
		return diag_set(diag, -TFS_ECORRUPT, 24, "header", "%u sections exceed limit %u",
				cf->n, CTR_MAX_SECTIONS);
	if (*table_off < CTR_HEADER_BYTES || *table_off > cf->size ||
	    cf->size - *table_off < (uint64_t)cf->n * CTR_ENTRY_BYTES)
		return diag_set(diag, -TFS_ECORRUPT, 16, "header",
				"section table (offset %llu, %u entries) outside the %llu-byte file",
				(unsigned long long)*table_off, cf->n,
				(unsigned long long)cf->size);
	if (le_get32(h + 28) != crc32c(h + *table_off, (size_t)cf->n * CTR_ENTRY_BYTES))
		return diag_set(diag, -TFS_ECORRUPT, *table_off, "table",
				"section table checksum mismatch");
	return 0;
}

static int check_entry(const struct ctr_file *cf, const struct sec_entry *e, uint64_t table_off,
		       uint64_t at, struct tfs_diag *diag)
{
	uint64_t end;

	if (e->codec > 1 || (e->codec == 0 && e->raw != e->stored))
		return diag_set(diag, -TFS_ECORRUPT, at, "table", "bad codec %u",
				e->codec);
	if (e->codec == 1 && (e->raw > CTR_MAX_RAW || e->head_len != e->stored))
		return diag_set(diag, -TFS_ECORRUPT, at, "table",
				"compressed section claims %llu raw bytes",
				(unsigned long long)e->raw);
	if (!add_u64(e->off, e->stored, &end) || e->off < CTR_HEADER_BYTES || end > table_off ||
	    e->head_len > e->stored)
		return diag_set(diag, -TFS_ECORRUPT, at, "table",
				"%s section at %llu+%llu outside the data area",
				ctr_type_name(e->type), (unsigned long long)e->off,
				(unsigned long long)e->stored);
	(void)cf;
	return 0;
}

static int cmp_off(const void *a, const void *b)
{
	const struct sec_entry *x = *(const struct sec_entry *const *)a;
	const struct sec_entry *y = *(const struct sec_entry *const *)b;

	return x->off < y->off ? -1 : x->off > y->off;
}

static int check_overlap(struct ctr_file *cf, struct tfs_diag *diag)
{
	const struct sec_entry **v = malloc((cf->n ? cf->n : 1) * sizeof(*v));
	int rc = 0;

	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < cf->n; i++)
		v[i] = &cf->ents[i];
	qsort(v, cf->n, sizeof(*v), cmp_off);
	for (uint32_t i = 1; i < cf->n && rc == 0; i++)
		if (v[i - 1]->off + v[i - 1]->stored > v[i]->off)
			rc = diag_set(diag, -TFS_ECORRUPT, v[i]->off, "table",
				      "sections overlap at offset %llu",
				      (unsigned long long)v[i]->off);
	free(v);
	return rc;
}

int ctr_parse(struct ctr_file *cf, const uint8_t *map, uint64_t size, struct tfs_diag *diag)
{
	uint64_t table_off = 0;
	int rc;

	memset(cf, 0, sizeof(*cf));
	cf->map = map;
	cf->size = size;
	rc = parse_header(cf, &table_off, diag);
	if (rc < 0)
		return rc;
	cf->ents = calloc(cf->n ? cf->n : 1, sizeof(*cf->ents));
	if (!cf->ents)
		return -ENOMEM;
	for (uint32_t i = 0; i < cf->n; i++) {
		uint64_t at = table_off + (uint64_t)i * CTR_ENTRY_BYTES;
		const uint8_t *p = map + at;
		struct sec_entry *e = &cf->ents[i];

		e->type = le_get16(p);
		e->codec = le_get16(p + 2);
		e->aux = le_get32(p + 4);
		e->off = le_get64(p + 8);
		e->stored = le_get64(p + 16);
		e->raw = le_get64(p + 24);
		e->crc_all = le_get32(p + 32);
		e->crc_head = le_get32(p + 36);
		e->head_len = le_get64(p + 40);
		rc = check_entry(cf, e, table_off, at, diag);
		if (rc < 0)
			goto err_free;
	}
	rc = check_overlap(cf, diag);
	if (rc < 0)
		goto err_free;
	return 0;

err_free:
	ctr_fini(cf);
	return rc;
}

void ctr_fini(struct ctr_file *cf)
{
	free(cf->ents);
	cf->ents = NULL;
	cf->n = 0;
}

int ctr_load(const struct ctr_file *cf, uint32_t idx, uint8_t **owned, const uint8_t **data,
	     size_t *len, struct tfs_diag *diag)
{
	const struct sec_entry *e = &cf->ents[idx];
	const uint8_t *p = cf->map + e->off;
	const char *name = ctr_type_name(e->type);
	uint8_t *out;
	int rc;

	*owned = NULL;
	if (crc32c(p, (size_t)e->head_len) != e->crc_head)
		return diag_set(diag, -TFS_ECORRUPT, e->off, name, "%s section checksum mismatch",
				name);
	if (e->codec == 0) {
		*data = p;
		*len = (size_t)e->stored;
		return 0;
	}
	out = malloc(e->raw ? (size_t)e->raw : 1);
	if (!out)
		return -ENOMEM;
	rc = zs_decompress(p, (size_t)e->stored, out, (size_t)e->raw, e->off, name, diag);
	if (rc < 0) {
		free(out);
		return rc;
	}
	*owned = out;
	*data = out;
	*len = (size_t)e->raw;
	return 0;
}

int ctr_check(const struct ctr_file *cf, uint32_t idx, struct tfs_diag *diag)
{
	const struct sec_entry *e = &cf->ents[idx];
	const char *name = ctr_type_name(e->type);

	if (crc32c(cf->map + e->off, (size_t)e->stored) != e->crc_all)
		return diag_set(diag, -TFS_ECORRUPT, e->off, name, "%s section checksum mismatch",
				name);
	return 0;
}
