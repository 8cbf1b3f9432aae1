/*
 * The format-2 container (FORMAT.md §1, §2) through traces the writer makes: small sections
 * packed into the table and the rest stored back to back, a table stored as is reading the
 * same as a compressed one, the pack's size limit, and each check of the table refused with
 * its own diagnostic. The table is re-encoded here from the spec, independently of
 * codec/container.c, so the tests can change one field at a time.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "bytes_i.h"
#include "container_i.h"
#include "crc32c_i.h"
#include "testfiles.h"
#include "testutil.h"
#include "tfs/reader.h"
#include "tracegen.h"

static char tmp_path[64];

static int setup(void **state)
{
	int fd;

	(void)state;
	strcpy(tmp_path, "/tmp/tfs-ctr-XXXXXX");
	fd = mkstemp(tmp_path);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(tmp_path);
	return 0;
}



/* ---- an independent reading and writing of the FORMAT.md §2 table ---- */

struct ent {
	uint64_t type, codec, aux, stored, raw, head_len;
	uint32_t crc_all, crc_hd;
};

struct file {
	uint8_t *data; /* header and stored sections: data[0..table_off) */
	uint64_t table_off;
	struct ent e[64];
	uint64_t n;
	uint8_t *pack;
	size_t pack_len;
};

static uint64_t get_varint(const uint8_t *p, size_t *at)
{
	uint64_t v = 0;

	for (int sh = 0;; sh += 7) {
		uint8_t c = p[(*at)++];

		v |= (uint64_t)(c & 0x7f) << sh;
		if (!(c & 0x80))
			return v;
	}
}

static void put_varint(uint8_t *p, size_t *at, uint64_t v)
{
	do {
		p[(*at)++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
}

static void parse_file(const uint8_t *d, size_t size, struct file *f)
{
	uint64_t tlen = le_get32(d + 24), traw = le_get32(d + 28);
	uint8_t *t = malloc(traw);
	size_t at = 0;

	assert_int_equal(le_get16(d + 8), 2);
	f->table_off = le_get64(d + 16);
	assert_true(f->table_off + tlen == size);
	assert_non_null(t);
	if (tlen == traw)
		memcpy(t, d + f->table_off, traw);
	else
		assert_int_equal(ZSTD_decompress(t, traw, d + f->table_off, tlen), traw);
	f->data = malloc(f->table_off);
	assert_non_null(f->data);
	memcpy(f->data, d, f->table_off);
	f->n = get_varint(t, &at);
	assert_true(f->n <= 64);
	for (uint64_t i = 0; i < f->n; i++) {
		struct ent *e = &f->e[i];

		e->type = get_varint(t, &at);
		e->codec = get_varint(t, &at);
		e->aux = get_varint(t, &at);
		e->stored = e->raw = e->head_len = get_varint(t, &at);
		if (e->codec == 2)
			continue;
		if (e->codec == 1)
			e->raw = get_varint(t, &at);
		e->crc_all = e->crc_hd = le_get32(t + at);
		at += 4;
		if (e->codec == 0) {
			e->head_len = get_varint(t, &at);
			if (e->head_len < e->stored) {
				e->crc_hd = le_get32(t + at);
				at += 4;
			}
		}
	}
	f->pack_len = traw - at;
	f->pack = malloc(f->pack_len + 1);
	assert_non_null(f->pack);
	memcpy(f->pack, t + at, f->pack_len);
	free(t);
}

/* The file of @f with its table stored as is (tbl_raw = tbl_len), checksums right. */
static uint8_t *build_file(const struct file *f, size_t *size)
{
	size_t cap = 16 + f->n * 60 + f->pack_len, at = 0;
	uint8_t *t = malloc(cap), *out;

	assert_non_null(t);
	put_varint(t, &at, f->n);
	for (uint64_t i = 0; i < f->n; i++) {
		const struct ent *e = &f->e[i];

		put_varint(t, &at, e->type);
		put_varint(t, &at, e->codec);
		put_varint(t, &at, e->aux);
		put_varint(t, &at, e->codec == 2 ? e->raw : e->stored);
		if (e->codec == 2)
			continue;
		if (e->codec == 1)
			put_varint(t, &at, e->raw);
		le_put32(t + at, e->crc_all);
		at += 4;
		if (e->codec == 0) {
			put_varint(t, &at, e->head_len);
			if (e->head_len < e->stored) {
				le_put32(t + at, e->crc_hd);
				at += 4;
			}
		}
	}
	memcpy(t + at, f->pack, f->pack_len);
	at += f->pack_len;
	*size = f->table_off + at;
	out = malloc(*size);
	assert_non_null(out);
	memcpy(out, f->data, f->table_off);
	memcpy(out + f->table_off, t, at);
	le_put32(out + 24, (uint32_t)at);
	le_put32(out + 28, (uint32_t)at);
	le_put32(out + 32, crc32c(t, at));
	le_put32(out + 36, crc32c(out, 36));
	free(t);
	return out;
}

static void free_file(struct file *f)
{
	free(f->data);
	free(f->pack);
}

/* A lossless two-stream trace: values sections stored raw, the rest small and packed. */
static void write_trace(const char *path, uint64_t n_events)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_LOSSLESS};
	struct tfs_writer *w;

	assert_int_equal(tfs_writer_new(&o, &w), 0);
	assert_int_equal(tg_declare(w), 0);
	for (uint32_t r = 0; r < 2; r++) {
		struct tg_stream s = {.rank = r, .thread = 0};

		assert_int_equal(tg_fill(&s, n_events, (int)r, 11 + r), 0);
		assert_int_equal(tg_write(w, &s), 0);
		tg_free(&s);
	}
	assert_int_equal(tfs_writer_save(w, path), 0);
	tfs_writer_free(w);
}

/* Text of every stream of the trace at @path (NULL when it does not open or verify). */
static char *render_all(const char *path, size_t *len, struct tfs_diag *d)
{
	struct tfs_trace_info ti;
	struct tfs_trace *t;
	char *out = NULL;
	size_t n = 0;

	memset(d, 0, sizeof(*d));
	if (tfs_trace_open(path, &t, d) < 0)
		return NULL;
	if (tfs_trace_verify(t, d) < 0) {
		tfs_trace_close(t);
		return NULL;
	}
	tfs_trace_get_info(t, &ti);
	for (uint32_t s = 0; s < ti.n_streams; s++) {
		struct tfs_stream_info si;
		struct tfs_cursor *c;
		uint64_t size;

		assert_int_equal(tfs_trace_stream(t, s, &si), 0);
		assert_int_equal(tfs_cursor_new(t, s, TFS_VIEW_TEXT, 0, si.n_events, &c), 0);
		size = tfs_cursor_size(c);
		out = realloc(out, n + size + 1);
		assert_non_null(out);
		assert_int_equal(tfs_cursor_pread(c, out + n, size, 0, d), (ssize_t)size);
		n += size;
		tfs_cursor_free(c);
	}
	tfs_trace_close(t);
	*len = n;
	return out;
}

/* The writer packs small sections, stores values sections back to back, compresses the table. */
static void test_container_layout_as_written(void **state)
{
	struct tfs_trace_info ti;
	struct tfs_trace *t;
	size_t size;
	uint8_t *d;
	struct file f;
	uint64_t off = 40, n_packed = 0, n_values = 0;

	(void)state;
	write_trace(tmp_path, 3000);
	d = slurp(tmp_path, &size);
	parse_file(d, size, &f);
	assert_true(le_get32(d + 24) < le_get32(d + 28)); /* the table is compressed */
	for (uint64_t i = 0; i < f.n; i++) {
		const struct ent *e = &f.e[i];

		if (e->codec == 2) {
			n_packed++;
			continue;
		}
		assert_int_equal(e->codec, 0);
		assert_int_equal(e->type, 7); /* values */
		n_values++;
		assert_true(e->head_len < e->stored);
		assert_int_equal(e->crc_all, crc32c(d + off, e->stored));
		assert_int_equal(e->crc_hd, crc32c(d + off, e->head_len));
		off += e->stored;
	}
	assert_int_equal(off, f.table_off);
	assert_int_equal(n_values, 2);
	assert_true(n_packed >= 6); /* meta, schema, strings, cst, streams, grammars */
	assert_int_equal(tfs_trace_open(tmp_path, &t, NULL), 0);
	tfs_trace_get_info(t, &ti);
	assert_int_equal(ti.version_major, 2);
	assert_int_equal(ti.table_bytes, le_get32(d + 24));
	assert_int_equal(ti.table_raw_bytes, le_get32(d + 28));
	for (uint32_t i = 0; i < ti.n_sections; i++) {
		struct tfs_section_info si;

		assert_int_equal(tfs_trace_section(t, i, &si), 0);
		assert_int_equal(si.codec, f.e[i].codec);
		if (si.codec == 2) {
			assert_true(si.offset == f.table_off);
			assert_true(si.stored_bytes == 0);
		}
	}
	tfs_trace_close(t);
	free_file(&f);
	free(d);
}

/* The same table stored as is reads exactly as the compressed one. */
static void test_container_table_stored_as_is(void **state)
{
	size_t size, size2, n1, n2;
	uint8_t *d, *raw;
	struct tfs_diag dg;
	struct file f;
	char *a, *b;

	(void)state;
	write_trace(tmp_path, 500);
	a = render_all(tmp_path, &n1, &dg);
	assert_non_null(a);
	d = slurp(tmp_path, &size);
	parse_file(d, size, &f);
	raw = build_file(&f, &size2);
	assert_true(size2 > size);
	spit(tmp_path, raw, size2);
	b = render_all(tmp_path, &n2, &dg);
	assert_non_null(b);
	assert_int_equal(n1, n2);
	assert_memory_equal(a, b, n1);
	free(a);
	free(b);
	free(raw);
	free_file(&f);
	free(d);
}

/* Rebuild @f after @mutate and expect a refusal whose reason contains @want. */
static void expect_refused(const char *what, void (*mutate)(struct file *), const char *section,
			   const char *want)
{
	struct file f;
	size_t size, size2, n;
	uint8_t *d, *bad;
	struct tfs_diag dg;
	char *txt;

	write_trace(tmp_path, 200);
	d = slurp(tmp_path, &size);
	parse_file(d, size, &f);
	mutate(&f);
	bad = build_file(&f, &size2);
	spit(tmp_path, bad, size2);
	txt = render_all(tmp_path, &n, &dg);
	if (txt || !strstr(dg.reason, want))
		fail_msg("%s: expected a refusal naming \"%s\", got \"%s\"", what, want,
			 txt ? "(opened)" : dg.reason);
	assert_string_equal(dg.section, section);
	free(bad);
	free_file(&f);
	free(d);
}

static void expect_table_refused(const char *what, void (*mutate)(struct file *),
				 const char *want)
{
	expect_refused(what, mutate, "table", want);
}

static uint64_t first_of(const struct file *f, uint64_t codec)
{
	for (uint64_t i = 0; i < f->n; i++)
		if (f->e[i].codec == codec)
			return i;
	fail_msg("no section of codec %llu", (unsigned long long)codec);
	return 0;
}

static void values_compressed(struct file *f)
{
	f->e[first_of(f, 0)].codec = 1;
}

static void meta_raw(struct file *f)
{
	struct ent *e = &f->e[first_of(f, 2)];

	assert_int_equal(e->type, 1);
	e->codec = 0; /* its bytes now claim to lie in the data area */
}

static void packed_longer(struct file *f)
{
	f->e[first_of(f, 2)].raw++;
}

static void packed_shorter(struct file *f)
{
	f->e[first_of(f, 2)].raw--;
}

static void stored_longer(struct file *f)
{
	f->e[first_of(f, 0)].stored++; /* the second values section now runs into the table */
}

static void stored_shorter(struct file *f)
{
	struct ent *e = &f->e[first_of(f, 0)];

	e->stored--;
	e->head_len--;
}

static void no_sections(struct file *f)
{
	f->n = 0;
	f->pack_len = 0;
}

static void bad_codec(struct file *f)
{
	f->e[0].codec = 3;
}

static void head_too_long(struct file *f)
{
	struct ent *e = &f->e[first_of(f, 0)];

	e->head_len = e->stored + 1;
}

/* A packed section of type @type and @len bytes appended to the table. */
static void add_packed(struct file *f, uint64_t type, size_t len)
{
	struct ent *e = &f->e[f->n++];

	assert_true(f->n <= 64);
	*e = (struct ent){.type = type, .codec = 2, .stored = len, .raw = len, .head_len = len};
	f->pack = realloc(f->pack, f->pack_len + len + 1);
	assert_non_null(f->pack);
	memset(f->pack + f->pack_len, 0x5a, len);
	f->pack_len += len;
}

static void type_13(struct file *f)
{
	add_packed(f, SEC_TYPE_MAX + 1, 5);
}

static void type_0(struct file *f)
{
	add_packed(f, 0, 5);
}

static void type_13_newer_minor(struct file *f)
{
	type_13(f);
	le_put16(f->data + 10, (uint16_t)(le_get16(f->data + 10) + 1));
}

static void packed_too_large(struct file *f)
{
	add_packed(f, SEC_TYPE_MAX + 1, CTR_PACK_MAX + 1);
}

/*
 * The first grammar section made one zstd frame of 2^29 bytes whose 8 stored bytes are no
 * frame at all: a reader that decompressed it before comparing its size with its stream's
 * events (FORMAT.md §6) would report the frame, not the size.
 */
static void grammar_huge(struct file *f)
{
	static const uint8_t junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	uint64_t at = 40, i;

	for (i = 0; i < f->n && f->e[i].type != SEC_GRAMMAR; i++)
		if (f->e[i].codec != 2)
			at += f->e[i].stored;
	assert_true(i < f->n);
	f->data = realloc(f->data, f->table_off + sizeof(junk));
	assert_non_null(f->data);
	memmove(f->data + at + sizeof(junk), f->data + at, f->table_off - at);
	memcpy(f->data + at, junk, sizeof(junk));
	f->table_off += sizeof(junk);
	le_put64(f->data + 16, f->table_off);
	if (f->e[i].codec == 2) { /* its packed bytes leave the pack */
		uint64_t off = 0;

		for (uint64_t j = 0; j < i; j++)
			off += f->e[j].codec == 2 ? f->e[j].raw : 0;
		memmove(f->pack + off, f->pack + off + f->e[i].raw,
			f->pack_len - off - f->e[i].raw);
		f->pack_len -= f->e[i].raw;
	}
	f->e[i] = (struct ent){.type = SEC_GRAMMAR, .codec = 1, .aux = f->e[i].aux,
			       .stored = sizeof(junk), .raw = UINT64_C(1) << 29,
			       .head_len = sizeof(junk), .crc_all = crc32c(junk, sizeof(junk))};
	f->e[i].crc_hd = f->e[i].crc_all;
}

/*
 * What a trace may cost is bounded by its bytes (README "What any input can cost"): an
 * unknown section type at a known minor, a packed section over 64 KiB, a table over 2^26
 * bytes once decompressed and a grammar section larger than its stream's events allow are
 * each refused, the last before its frame is decompressed.
 */
static void test_container_bounds(void **state)
{
	struct file f;
	struct tfs_diag dg;
	uint8_t *d, *bad;
	size_t size, size2, n, n_ok;
	char *txt, *ok;

	(void)state;
	expect_table_refused("type 13 at a known minor", type_13, "unknown in format");
	expect_table_refused("type 0", type_0, "unknown in format");
	expect_table_refused("packed over 64 KiB", packed_too_large, "section size");
	expect_refused("grammar of 2^29 bytes for 200 events", grammar_huge, "grammar",
		       "grammar section of 536870912 bytes for a stream of 200 events");

	/* a newer minor's unknown section is skipped: the trace reads as before */
	write_trace(tmp_path, 200);
	ok = render_all(tmp_path, &n_ok, &dg);
	assert_non_null(ok);
	d = slurp(tmp_path, &size);
	parse_file(d, size, &f);
	type_13_newer_minor(&f);
	bad = build_file(&f, &size2);
	spit(tmp_path, bad, size2);
	txt = render_all(tmp_path, &n, &dg);
	if (!txt)
		fail_msg("newer minor with type 13: %s", dg.reason);
	assert_true(n == n_ok && memcmp(txt, ok, n) == 0);
	free(txt);
	free(bad);
	free_file(&f);

	/* tbl_raw over 2^26 (checksums right): refused from the header alone */
	le_put32(d + 28, (UINT32_C(1) << 26) + 1);
	le_put32(d + 36, crc32c(d, 36));
	spit(tmp_path, d, size);
	assert_null(render_all(tmp_path, &n, &dg));
	assert_string_equal(dg.section, "header");
	assert_non_null(strstr(dg.reason, "more than 2^26"));
	free(ok);
	free(d);
}

/* Each check of FORMAT.md §1-§3 on the table, refused with its own reason. */
static void test_container_table_checks(void **state)
{
	(void)state;
	expect_table_refused("values compressed", values_compressed, "values section with codec 1");
	expect_table_refused("meta stored raw", meta_raw, "meta section with codec 0");
	expect_table_refused("packed too long", packed_longer, "packed sections hold");
	expect_table_refused("packed too short", packed_shorter, "packed sections hold");
	expect_table_refused("stored too long", stored_longer, "runs past the section table");
	expect_table_refused("stored too short", stored_shorter, "the table starts at");
	expect_table_refused("no sections", no_sections, "no sections");
	expect_table_refused("codec 3", bad_codec, "section codec");
	expect_table_refused("head past stored", head_too_long, "head length");
}

/* The header's table fields: past the end, not ending the file, damaged frame. */
static void test_container_header_table_fields(void **state)
{
	size_t size;
	uint8_t *d, *e;
	struct tfs_diag dg;
	size_t n;
	char *txt;

	(void)state;
	write_trace(tmp_path, 200);
	d = slurp(tmp_path, &size);
	/* a byte appended: the table no longer ends the file */
	e = malloc(size + 1);
	assert_non_null(e);
	memcpy(e, d, size);
	e[size] = 0;
	spit(tmp_path, e, size + 1);
	txt = render_all(tmp_path, &n, &dg);
	assert_null(txt);
	assert_non_null(strstr(dg.reason, "does not end the"));
	/* tbl_raw one larger than the frame's content (checksums right): zstd refuses */
	memcpy(e, d, size);
	le_put32(e + 28, le_get32(e + 28) + 1);
	le_put32(e + 36, crc32c(e, 36));
	spit(tmp_path, e, size);
	txt = render_all(tmp_path, &n, &dg);
	assert_null(txt);
	assert_string_equal(dg.section, "table");
	assert_true(dg.offset == le_get64(d + 16));
	/* table_off inside the header */
	memcpy(e, d, size);
	le_put64(e + 16, 8);
	le_put32(e + 36, crc32c(e, 36));
	spit(tmp_path, e, size);
	txt = render_all(tmp_path, &n, &dg);
	assert_null(txt);
	assert_non_null(strstr(dg.reason, "section table"));
	free(e);
	free(d);
}

/* Many distinct small grammars: packing stops at its 1 MiB budget, the rest is stored. */
static void test_container_pack_budget(void **state)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
	struct tfs_trace_info ti;
	struct tfs_writer *w;
	struct tfs_trace *t;
	uint32_t kind, n_packed = 0, n_stored = 0;
	uint64_t packed_raw = 0, seed = tu_seed(__func__);
	static const struct tfs_arg_desc arg = {"n", TFS_TYPE_U64, TFS_ENC_SIG, 0, NULL};
	static const struct tfs_kind_desc k = {"op", "test", 1, &arg};

	(void)state;
	assert_int_equal(tfs_writer_new(&o, &w), 0);
	assert_int_equal(tfs_writer_add_kind(w, &k, &kind), 0);
	/* 300 streams of 4000 random events over 200 signatures: ~5 KiB grammars, all distinct */
	for (uint32_t r = 0; r < 300; r++) {
		struct tfs_wstream *s;

		assert_int_equal(tfs_writer_stream_new(w, r, 0, &s), 0);
		for (int i = 0; i < 4000; i++) {
			union tfs_arg a = {.u = tu_below(&seed, 200)};

			assert_int_equal(tfs_wstream_append(s, kind, 0, 0, &a), 0);
		}
	}
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	tfs_writer_free(w);
	assert_int_equal(tfs_trace_open(tmp_path, &t, NULL), 0);
	tfs_trace_get_info(t, &ti);
	for (uint32_t i = 0; i < ti.n_sections; i++) {
		struct tfs_section_info si;

		assert_int_equal(tfs_trace_section(t, i, &si), 0);
		if (si.codec == 2) {
			n_packed++;
			packed_raw += si.raw_bytes;
		} else {
			n_stored += strcmp(si.type_name, "grammar") == 0;
		}
	}
	assert_true(n_packed > 0 && n_stored > 0);
	assert_true(packed_raw <= (1u << 20));
	assert_true(packed_raw > (1u << 20) - 65536);
	assert_int_equal(tfs_trace_verify(t, NULL), 0);
	tfs_trace_close(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_container_layout_as_written),
	    cmocka_unit_test(test_container_table_stored_as_is),
	    cmocka_unit_test(test_container_table_checks),
	    cmocka_unit_test(test_container_header_table_fields),
	    cmocka_unit_test(test_container_pack_budget),
	    cmocka_unit_test(test_container_bounds),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
