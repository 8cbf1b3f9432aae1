/*
 * Container reading and writing (FORMAT.md §1, §2, and §A for format 1.x): the 40-byte
 * header, the section table (format 2: varint entries and the packed small sections, as
 * one zstd frame at the end of the file; format 1: 48-byte entries), crc checks and zstd
 * frames around section payloads. Payload contents are other modules' business.
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
					    "backtraces", "symbols", "vpatch",	   "names",
					    "argflags"};

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
	buf_init(&cw->pack);
	cw->fd = fd;
	cw->zstd_level = zstd_level;
	cw->large_bytes = CTR_LARGE_BYTES;
	cw->large_level = CTR_LARGE_LEVEL;
	cw->off = CTR_HEADER_BYTES;
	return write_all(cw, zero, sizeof(zero), 0);
}

int ctr_writer_init_mem(struct ctr_writer *cw, struct tfs_buf *mem, int zstd_level)
{
	uint8_t zero[CTR_HEADER_BYTES] = {0};

	memset(cw, 0, sizeof(*cw));
	buf_init(&cw->pack);
	cw->fd = -1;
	cw->mem = mem;
	cw->zstd_level = zstd_level;
	cw->large_bytes = CTR_LARGE_BYTES;
	cw->large_level = CTR_LARGE_LEVEL;
	cw->off = CTR_HEADER_BYTES;
	return write_all(cw, zero, sizeof(zero), 0);
}

void ctr_writer_fini(struct ctr_writer *cw)
{
	buf_fini(&cw->pack);
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

/* Append @n bytes of @data as a packed section (FORMAT.md §2 codec 2). */
static int add_packed(struct ctr_writer *cw, uint16_t type, const void *data, size_t n)
{
	struct sec_entry *e;
	uint64_t at = cw->pack.len;
	int rc = reserve_entry(cw);

	if (rc == 0)
		rc = buf_put(&cw->pack, data, n);
	if (rc < 0)
		return rc;
	e = &cw->ents[cw->n++];
	e->type = type;
	e->codec = CTR_CODEC_PACKED;
	e->aux = 0;
	e->off = at;
	e->stored = e->raw = e->head_len = n;
	e->crc_all = e->crc_head = crc32c(data, n);
	return 0;
}

static bool packable(const struct ctr_writer *cw, size_t n)
{
	return n <= CTR_PACK_MAX && cw->pack.len + n <= CTR_PACK_TOTAL;
}

const uint8_t *ctr_writer_bytes(const struct ctr_writer *cw, uint32_t idx)
{
	const struct sec_entry *e = &cw->ents[idx];

	if (e->codec == CTR_CODEC_PACKED)
		return cw->pack.data + e->off;
	return cw->mem ? cw->mem->data + e->off : NULL;
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

int ctr_level(const struct ctr_writer *cw, size_t n)
{
	return n > cw->large_bytes && cw->zstd_level > cw->large_level ? cw->large_level
								      : cw->zstd_level;
}

int ctr_add(struct ctr_writer *cw, uint16_t type, int compress, const void *data, size_t n,
	    size_t head_len)
{
	struct tfs_buf z;
	struct sec_entry *e;
	const void *stored = data;
	size_t stored_len = n;
	int rc;

	if (compress && packable(cw, n))
		return add_packed(cw, type, data, n);
	rc = reserve_entry(cw);
	if (rc < 0)
		return rc;
	buf_init(&z);
	if (compress) {
		rc = zs_compress(&z, data, n, ctr_level(cw, n));
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

/* The FORMAT.md §2 table: entries, then the packed payloads. */
static int build_table(const struct ctr_writer *cw, struct tfs_buf *t)
{
	int rc = buf_put_varint(t, cw->n);

	for (uint32_t i = 0; i < cw->n && rc == 0; i++) {
		const struct sec_entry *e = &cw->ents[i];
		uint8_t crc[4];

		rc = buf_put_varint(t, e->type);
		if (rc == 0)
			rc = buf_put_varint(t, e->codec);
		if (rc == 0)
			rc = buf_put_varint(t, e->aux);
		if (rc == 0)
			rc = buf_put_varint(t, e->codec == CTR_CODEC_PACKED ? e->raw : e->stored);
		if (rc == 0 && e->codec == CTR_CODEC_ZSTD)
			rc = buf_put_varint(t, e->raw);
		le_put32(crc, e->crc_all);
		if (rc == 0 && e->codec != CTR_CODEC_PACKED)
			rc = buf_put(t, crc, 4);
		if (rc == 0 && e->codec == CTR_CODEC_RAW) {
			rc = buf_put_varint(t, e->head_len);
			le_put32(crc, e->crc_head);
			if (rc == 0 && e->head_len < e->stored)
				rc = buf_put(t, crc, 4);
		}
	}
	if (rc == 0)
		rc = buf_put(t, cw->pack.data, cw->pack.len);
	return rc;
}

int ctr_finish(struct ctr_writer *cw)
{
	struct tfs_buf t, z;
	const struct tfs_buf *stored = &t;
	uint8_t hdr[CTR_HEADER_BYTES];
	int rc;

	buf_init(&t);
	buf_init(&z);
	rc = build_table(cw, &t);
	if (rc == 0 && t.len > CTR_MAX_RAW)
		rc = -EFBIG;
	if (rc < 0)
		goto out;
	rc = zs_compress(&z, t.data, t.len, ctr_level(cw, t.len));
	if (rc < 0)
		goto out;
	if (z.len < t.len)
		stored = &z;
	memset(hdr, 0, sizeof(hdr));
	memcpy(hdr, magic, sizeof(magic));
	le_put16(hdr + 8, TFS_FORMAT_MAJOR);
	le_put16(hdr + 10, TFS_FORMAT_MINOR);
	le_put64(hdr + 16, cw->off);
	le_put32(hdr + 24, (uint32_t)stored->len);
	le_put32(hdr + 28, (uint32_t)t.len);
	le_put32(hdr + 32, crc32c(stored->data, stored->len));
	le_put32(hdr + 36, crc32c(hdr, 36));
	rc = write_all(cw, stored->data, stored->len, cw->off);
	if (rc == 0)
		rc = write_all(cw, hdr, sizeof(hdr), 0);
out:
	buf_fini(&z);
	buf_fini(&t);
	return rc;
}

static int parse_header(struct ctr_file *cf, struct tfs_diag *diag)
{
	const uint8_t *h = cf->map;

	if (cf->size < CTR_HEADER_BYTES || memcmp(h, magic, 4) != 0)
		return diag_set(diag, -TFS_EFORMAT, 0, "header", "not a tracefs trace (bad magic)");
	if (memcmp(h, magic, sizeof(magic)) != 0)
		return diag_set(diag, -TFS_ECORRUPT, 0, "header",
				"damaged magic (file transferred in text mode?)");
	cf->major = le_get16(h + 8);
	cf->minor = le_get16(h + 10);
	/* the checksum's place depends on the major: a damaged major is a checksum error */
	if (cf->major == 1 ? le_get32(h + 32) != crc32c(h, 32)
			   : le_get32(h + 36) != crc32c(h, 36))
		return diag_set(diag, -TFS_ECORRUPT, cf->major == 1 ? 32 : 36, "header",
				"header checksum mismatch");
	if (cf->major != TFS_FORMAT_MAJOR && cf->major != 1)
		return diag_set(diag, -TFS_EFORMAT, 8, "header",
				"format %u.%u is %s than this tracefs (reads 1.x and %u.x)",
				cf->major, cf->minor,
				cf->major > TFS_FORMAT_MAJOR ? "newer" : "older", TFS_FORMAT_MAJOR);
	if (le_get32(h + 12) != 0 || (cf->major == 1 && le_get32(h + 36) != 0))
		return diag_set(diag, -TFS_ECORRUPT, 12, "header", "reserved header bits set");
	cf->table_off = le_get64(h + 16);
	if (cf->table_off < CTR_HEADER_BYTES || cf->table_off > cf->size)
		return diag_set(diag, -TFS_ECORRUPT, 16, "header",
				"section table offset %llu outside the %llu-byte file",
				(unsigned long long)cf->table_off, (unsigned long long)cf->size);
	return 0;
}

static int check_entry(const struct sec_entry *e, uint64_t table_off, uint64_t at,
		       struct tfs_diag *diag)
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

/* Format 1.x (FORMAT.md §A): n_sect 48-byte entries at table_off, anywhere after them. */
static int parse_table_v1(struct ctr_file *cf, struct tfs_diag *diag)
{
	const uint8_t *h = cf->map;
	int rc;

	cf->n = le_get32(h + 24);
	if (cf->n > CTR_MAX_SECTIONS)
		return diag_set(diag, -TFS_ECORRUPT, 24, "header", "%u sections exceed limit %u",
				cf->n, CTR_MAX_SECTIONS);
	if (cf->size - cf->table_off < (uint64_t)cf->n * CTR_ENTRY_BYTES_V1)
		return diag_set(diag, -TFS_ECORRUPT, 16, "header",
				"section table (offset %llu, %u entries) outside the %llu-byte file",
				(unsigned long long)cf->table_off, cf->n,
				(unsigned long long)cf->size);
	if (le_get32(h + 28) !=
	    crc32c(h + cf->table_off, (size_t)cf->n * CTR_ENTRY_BYTES_V1))
		return diag_set(diag, -TFS_ECORRUPT, cf->table_off, "table",
				"section table checksum mismatch");
	cf->table_len = cf->table_raw = (uint64_t)cf->n * CTR_ENTRY_BYTES_V1;
	cf->ents = calloc(cf->n ? cf->n : 1, sizeof(*cf->ents));
	if (!cf->ents)
		return -ENOMEM;
	for (uint32_t i = 0; i < cf->n; i++) {
		uint64_t at = cf->table_off + (uint64_t)i * CTR_ENTRY_BYTES_V1;
		const uint8_t *p = cf->map + at;
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
		rc = check_entry(e, cf->table_off, at, diag);
		if (rc < 0)
			return rc;
	}
	return check_overlap(cf, diag);
}

/* FORMAT.md §3: which codecs a section type may have (unknown types: any). */
static bool codec_allowed(uint32_t type, uint32_t codec)
{
	switch (type) {
	case SEC_VALUES:
	case SEC_BACKTRACES:
		return codec == CTR_CODEC_RAW;
	case SEC_GRAMMAR:
		return true;
	case SEC_META:
	case SEC_SCHEMA:
	case SEC_STRINGS:
	case SEC_CST:
	case SEC_STREAMS:
	case SEC_SYMBOLS:
	case SEC_VPATCH:
	case SEC_NAMES:
	case SEC_ARGFLAGS:
		return codec != CTR_CODEC_RAW;
	default:
		return true;
	}
}

static int read_entry_v2(struct tfs_rd *r, struct sec_entry *e, uint64_t *data_off,
			 uint64_t *pack_len, uint64_t table_off)
{
	uint64_t type, codec, aux, v;
	uint32_t crc = 0;
	int rc = rd_varint_max(r, UINT16_MAX, &type, "section type");

	if (rc == 0)
		rc = rd_varint_max(r, CTR_CODEC_PACKED, &codec, "section codec");
	if (rc == 0)
		rc = rd_varint_max(r, UINT32_MAX, &aux, "section aux");
	if (rc == 0)
		rc = rd_varint_max(r, codec == CTR_CODEC_RAW	 ? UINT64_MAX
				   : codec == CTR_CODEC_ZSTD ? CTR_MAX_RAW
							     : CTR_PACK_MAX,
				   &v, "section size");
	if (rc < 0)
		return rc;
	if (!codec_allowed((uint32_t)type, (uint32_t)codec))
		return rd_fail(r, "%s section with codec %u", ctr_type_name((uint32_t)type),
			       (unsigned)codec);
	e->type = (uint16_t)type;
	e->codec = (uint16_t)codec;
	e->aux = (uint32_t)aux;
	if (codec == CTR_CODEC_PACKED) {
		e->off = *pack_len;
		e->stored = e->raw = e->head_len = v;
		*pack_len += v; /* <= n_sect * 2^16: no overflow */
		if (*pack_len > CTR_PACK_TOTAL)
			return rd_fail(r, "packed sections hold more than %u bytes",
				       CTR_PACK_TOTAL);
		return 0;
	}
	e->stored = v;
	e->off = *data_off;
	if (!add_u64(*data_off, v, data_off) || *data_off > table_off)
		return rd_fail(r, "%s section of %llu bytes runs past the section table",
			       ctr_type_name(e->type), (unsigned long long)v);
	e->raw = v;
	if (codec == CTR_CODEC_ZSTD) {
		rc = rd_varint_max(r, CTR_MAX_RAW, &e->raw, "raw size");
	}
	if (rc == 0)
		rc = rd_u32(r, &crc);
	e->crc_all = e->crc_head = crc;
	e->head_len = e->stored;
	if (rc == 0 && codec == CTR_CODEC_RAW) {
		rc = rd_varint_max(r, e->stored, &e->head_len, "head length");
		if (rc == 0 && e->head_len < e->stored)
			rc = rd_u32(r, &e->crc_head);
	}
	return rc;
}

/* Format 2 (FORMAT.md §1, §2): the table frame from table_off to the end of the file. */
static int parse_table_v2(struct ctr_file *cf, struct tfs_diag *diag)
{
	const uint8_t *h = cf->map;
	uint64_t tlen = le_get32(h + 24), traw = le_get32(h + 28), n, data_off, pack_len = 0;
	const uint8_t *tp = cf->map + cf->table_off;
	const uint8_t *pack;
	struct tfs_rd r;
	int rc;

	if (traw > CTR_MAX_TABLE_RAW)
		return diag_set(diag, -TFS_ECORRUPT, 28, "header",
				"section table of %llu bytes once decompressed, more than 2^26",
				(unsigned long long)traw);
	if (tlen == 0 || traw == 0 || tlen > CTR_MAX_TABLE_RAW || cf->size - cf->table_off != tlen)
		return diag_set(diag, -TFS_ECORRUPT, 24, "header",
				"section table (offset %llu, %llu bytes) does not end the %llu-byte "
				"file",
				(unsigned long long)cf->table_off, (unsigned long long)tlen,
				(unsigned long long)cf->size);
	if (le_get32(h + 32) != crc32c(tp, (size_t)tlen))
		return diag_set(diag, -TFS_ECORRUPT, cf->table_off, "table",
				"section table checksum mismatch");
	cf->table_len = tlen;
	cf->table_raw = traw;
	if (traw != tlen) {
		cf->table = malloc((size_t)traw);
		if (!cf->table)
			return -ENOMEM;
		rc = zs_decompress(tp, (size_t)tlen, cf->table, (size_t)traw, cf->table_off,
				   "table", diag);
		if (rc < 0)
			return rc;
		tp = cf->table;
	}
	/* offsets inside a compressed table are not file offsets: errors name the table's */
	rd_init(&r, tp, (size_t)traw, traw == tlen ? cf->table_off : 0, "table", diag);
	rc = rd_varint_max(&r, CTR_MAX_SECTIONS, &n, "section count");
	if (rc == 0 && n == 0)
		rc = rd_fail(&r, "no sections");
	if (rc == 0 && n > rd_left(&r) / 2) /* an entry takes 2 bytes at least */
		rc = rd_fail(&r, "%llu sections in a %zu-byte table", (unsigned long long)n,
			     rd_left(&r));
	if (rc < 0)
		goto out;
	cf->n = (uint32_t)n;
	cf->ents = calloc(cf->n, sizeof(*cf->ents));
	if (!cf->ents) {
		rc = -ENOMEM;
		goto out;
	}
	data_off = CTR_HEADER_BYTES;
	for (uint32_t i = 0; i < cf->n && rc == 0; i++)
		rc = read_entry_v2(&r, &cf->ents[i], &data_off, &pack_len, cf->table_off);
	if (rc == 0 && data_off != cf->table_off)
		rc = rd_fail(&r, "sections end at %llu, the table starts at %llu",
			     (unsigned long long)data_off, (unsigned long long)cf->table_off);
	if (rc == 0 && pack_len != rd_left(&r))
		rc = rd_fail(&r, "packed sections hold %llu bytes, the table has %zu more",
			     (unsigned long long)pack_len, rd_left(&r));
	if (rc == 0 && rd_bytes(&r, (size_t)pack_len, &pack) == 0)
		cf->pack = pack;
	for (uint32_t i = 0; i < cf->n && rc == 0; i++) {
		struct sec_entry *e = &cf->ents[i];

		if (e->codec == CTR_CODEC_PACKED)
			e->crc_all = e->crc_head = crc32c(pack + e->off, (size_t)e->raw);
	}
out:
	if (rc == -TFS_ECORRUPT && diag && traw != tlen)
		diag->offset = cf->table_off;
	return rc;
}

/* FORMAT.md §3: a type this reader does not know is skipped only in a newer minor. */
static int check_types(const struct ctr_file *cf, struct tfs_diag *diag)
{
	if (ctr_newer_minor(cf))
		return 0;
	for (uint32_t i = 0; i < cf->n; i++) {
		const struct sec_entry *e = &cf->ents[i];

		if (e->type == 0 || e->type > SEC_TYPE_MAX)
			return diag_set(diag, -TFS_ECORRUPT, ctr_file_off(cf, i), "table",
					"section %u has type %u, unknown in format %u.%u", i,
					e->type, cf->major, cf->minor);
	}
	return 0;
}

int ctr_parse(struct ctr_file *cf, const uint8_t *map, uint64_t size, struct tfs_diag *diag)
{
	int rc;

	memset(cf, 0, sizeof(*cf));
	cf->map = map;
	cf->size = size;
	rc = parse_header(cf, diag);
	if (rc == 0)
		rc = cf->major == 1 ? parse_table_v1(cf, diag) : parse_table_v2(cf, diag);
	if (rc == 0)
		rc = check_types(cf, diag);
	if (rc < 0)
		ctr_fini(cf);
	return rc;
}

void ctr_fini(struct ctr_file *cf)
{
	free(cf->ents);
	free(cf->table);
	cf->ents = NULL;
	cf->table = NULL;
	cf->pack = NULL;
	cf->n = 0;
}

const uint8_t *ctr_bytes(const struct ctr_file *cf, uint32_t idx)
{
	const struct sec_entry *e = &cf->ents[idx];

	return e->codec == CTR_CODEC_PACKED ? cf->pack + e->off : cf->map + e->off;
}

uint64_t ctr_file_off(const struct ctr_file *cf, uint32_t idx)
{
	const struct sec_entry *e = &cf->ents[idx];

	return e->codec == CTR_CODEC_PACKED ? cf->table_off : e->off;
}

int ctr_copy(struct ctr_writer *cw, const struct ctr_file *cf, uint32_t idx,
	     struct tfs_diag *diag)
{
	const struct sec_entry *e = &cf->ents[idx];
	int rc;

	if (e->codec == CTR_CODEC_PACKED)
		return packable(cw, (size_t)e->raw) ? add_packed(cw, e->type, ctr_bytes(cf, idx),
								  (size_t)e->raw)
						    : ctr_add(cw, e->type, 1, ctr_bytes(cf, idx),
							      (size_t)e->raw, (size_t)e->raw);
	rc = ctr_check(cf, idx, diag);
	return rc < 0 ? rc : ctr_add_stored(cw, e, cf->map + e->off);
}

int ctr_load(const struct ctr_file *cf, uint32_t idx, uint8_t **owned, const uint8_t **data,
	     size_t *len, struct tfs_diag *diag)
{
	const struct sec_entry *e = &cf->ents[idx];
	const char *name = ctr_type_name(e->type);
	const uint8_t *p;
	uint8_t *out;
	int rc;

	*owned = NULL;
	if (e->codec == CTR_CODEC_PACKED) {
		*data = cf->pack + e->off;
		*len = (size_t)e->raw;
		return 0;
	}
	p = cf->map + e->off;
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

	if (e->codec == CTR_CODEC_PACKED)
		return 0; /* checked with the table's checksum when the trace opened */
	if (crc32c(cf->map + e->off, (size_t)e->stored) != e->crc_all)
		return diag_set(diag, -TFS_ECORRUPT, e->off, name, "%s section checksum mismatch",
				name);
	return 0;
}
