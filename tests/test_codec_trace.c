/*
 * End-to-end codec tests: traces written through the writer API and read back through the
 * reader API. Events must come back exactly, views must have the documented form, golden
 * traces must keep rendering the same bytes, and damaged traces must be refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bytes_i.h"
#include "crc32c_i.h"
#include "schema_i.h"
#include "testfiles.h"
#include "testutil.h"
#include "tfs/reader.h"
#include "tfs/writer.h"
#include "tracegen.h"

#ifndef TFS_TEST_DATA
#define TFS_TEST_DATA "tests/data"
#endif

static char tmp_path[64];

static int setup(void **state)
{
	snprintf(tmp_path, sizeof(tmp_path), "/tmp/tfs-test-%d.trace", (int)getpid());
	return 0;
}

static int teardown(void **state)
{
	unlink(tmp_path);
	return 0;
}

/* Write @n_streams generated streams with @opts; returns them in @out. */
static void write_trace(const struct tfs_writer_opts *opts, struct tg_stream *out,
			uint32_t n_streams, uint64_t n, int regular, uint64_t seed)
{
	struct tfs_writer *w;

	assert_int_equal(tfs_writer_new(opts, &w), 0);
	assert_int_equal(tg_declare(w), 0);
	assert_int_equal(tfs_writer_set_meta(w, "program", "unit-test"), 0);
	for (uint32_t i = 0; i < n_streams; i++) {
		out[i].rank = i / 2;
		out[i].thread = i % 2;
		assert_int_equal(tg_fill(&out[i], n, regular, seed + i), 0);
		assert_int_equal(tg_write(w, &out[i]), 0);
	}
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	tfs_writer_free(w);
}

static void check_event(struct tfs_cursor *c, const struct tg_stream *s, uint64_t i, int timing,
			double rel_err)
{
	const struct tg_event *e = &s->ev[i];
	struct tfs_event ev;

	assert_int_equal(tfs_cursor_event(c, i, &ev, NULL), 0);
	assert_int_equal(ev.kind, e->kind);
	assert_int_equal(ev.n_args, e->n_args);
	if (timing == TFS_TIMING_LOSSLESS) {
		assert_true(ev.ts_ns == e->ts && ev.dur_ns == e->dur);
	} else if (timing == TFS_TIMING_LOSSY) {
		assert_true(fabs((double)ev.dur_ns - (double)e->dur) <=
			    rel_err * (double)e->dur + 1);
	} else {
		assert_true(ev.ts_ns == 0 && ev.dur_ns == 0);
	}
	for (uint32_t a = 0; a < e->n_args; a++) {
		if (e->kind == TG_ZONE)
			assert_string_equal(ev.args[a].s, e->args[a].s);
		else
			assert_true(ev.args[a].u == e->args[a].u);
	}
}

static void check_events(struct tfs_trace *t, const struct tg_stream *s, int timing,
			 double rel_err)
{
	struct tfs_cursor *c;
	uint32_t idx;

	assert_int_equal(tfs_trace_find_stream(t, s->rank, s->thread, &idx), 0);
	assert_int_equal(tfs_cursor_new(t, idx, TFS_VIEW_TEXT, 0, s->n, &c), 0);
	for (uint64_t i = 0; i < s->n; i++)
		check_event(c, s, i, timing, rel_err);
	assert_int_equal(tfs_cursor_event(c, s->n, &(struct tfs_event){0}, NULL), -EINVAL);
	tfs_cursor_free(c);
}

/*
 * check_events() last event first, then first event first again: going back, every block is
 * reached by a jump, which the trace's block cache keeps, so the second pass copies blocks
 * from it rather than decoding them, under the stream's own key (streams may share a values
 * section and differ in patches). Both passes must read the events as written.
 */
static void check_events_cached(struct tfs_trace *t, const struct tg_stream *s, int timing,
				double rel_err)
{
	struct tfs_cache_stats before, after;
	struct tfs_cursor *c;
	uint32_t idx;

	tfs_trace_block_cache_stats(t, &before);
	assert_int_equal(tfs_trace_find_stream(t, s->rank, s->thread, &idx), 0);
	assert_int_equal(tfs_cursor_new(t, idx, TFS_VIEW_TEXT, 0, s->n, &c), 0);
	for (uint64_t i = s->n; i-- > 0;)
		check_event(c, s, i, timing, rel_err);
	tfs_cursor_free(c);
	check_events(t, s, timing, rel_err);
	tfs_trace_block_cache_stats(t, &after);
	if (after.hits + after.misses > before.hits + before.misses) /* it read values */
		assert_true(after.hits > before.hits);
	assert_true(after.bytes <= after.budget);
}

static void round_trip(int timing, double rel_err, int regular)
{
	struct tfs_writer_opts o = {.timing = timing, .rel_err = rel_err};
	uint64_t seed = tu_seed("round_trip");
	struct tg_stream s[4];
	struct tfs_trace *t;
	struct tfs_trace_info info;
	struct tfs_diag d;

	write_trace(&o, s, 4, 20000, regular, seed);
	assert_int_equal(tfs_trace_open(tmp_path, &t, &d), 0);
	tfs_trace_get_info(t, &info);
	assert_int_equal(info.n_streams, 4);
	assert_int_equal(info.n_ranks, 2);
	assert_int_equal(info.timing, timing);
	assert_true(info.n_events == 80000);
	assert_string_equal(tfs_trace_meta(t, "program"), "unit-test");
	for (int i = 0; i < 4; i++)
		check_events(t, &s[i], timing, rel_err);
	for (int i = 0; i < 4; i++)
		check_events_cached(t, &s[i], timing, rel_err);
	assert_int_equal(tfs_trace_verify(t, &d), 0);
	tfs_trace_close(t);
	for (int i = 0; i < 4; i++)
		tg_free(&s[i]);
}

static void test_trace_lossless_round_trip_regular(void **state)
{
	round_trip(TFS_TIMING_LOSSLESS, 0, 1);
}

static void test_trace_lossless_round_trip_irregular(void **state)
{
	round_trip(TFS_TIMING_LOSSLESS, 0, 0);
}

static void test_trace_lossy_round_trip_within_bound(void **state)
{
	round_trip(TFS_TIMING_LOSSY, 0.1, 0);
}

static void test_trace_untimed_round_trip(void **state)
{
	round_trip(TFS_TIMING_NONE, 0, 1);
}

/* Read a whole view through the cursor in odd-sized chunks. */
static char *read_view(struct tfs_trace *t, uint32_t stream, int view, uint64_t first,
		       uint64_t n, uint64_t *size)
{
	struct tfs_cursor *c;
	char *buf;
	uint64_t off = 0;

	assert_int_equal(tfs_cursor_new(t, stream, view, first, n, &c), 0);
	*size = tfs_cursor_size(c);
	buf = malloc(*size + 1);
	assert_non_null(buf);
	while (off < *size) {
		ssize_t got = tfs_cursor_pread(c, buf + off, 777, off, NULL);

		assert_true(got > 0);
		off += (uint64_t)got;
	}
	assert_int_equal(tfs_cursor_pread(c, buf, 10, *size, NULL), 0);
	buf[*size] = 0;
	tfs_cursor_free(c);
	return buf;
}

/* Start of line @k (0-based) of @text. */
static const char *line_start(const char *text, int k)
{
	while (k--)
		text = strchr(text, '\n') + 1;
	return text;
}

/* Signatures, counts and grammar text of the hand-written trace below. */
static void check_tables(struct tfs_trace *t)
{
	struct tfs_trace_info info;
	uint64_t counts[16], sum = 0;
	char sig[128], *g;
	size_t glen;
	uint32_t kind;

	tfs_trace_get_info(t, &info);
	assert_int_equal(info.n_terminals, 4); /* the two pwrites and the two mallocs share */
	assert_int_equal(tfs_trace_term_counts(t, 0, counts), 0);
	for (uint32_t i = 0; i < info.n_terminals; i++) {
		sum += counts[i];
		assert_int_equal(tfs_trace_term_kind(t, i, &kind), 0);
		assert_true(tfs_trace_signature(t, i, sig, sizeof(sig)) > 0);
		if (kind == TG_PWRITE) {
			assert_string_equal(sig, "pwrite(fd=file#3, count=*, offset=*) = *");
			assert_true(counts[i] == 2);
		} else if (kind == TG_SEND) {
			union tfs_arg args[TFS_MAX_ARGS];

			assert_string_equal(sig, "send(dest=r+1, tag=-7, bytes=2)");
			assert_int_equal(tfs_trace_term_args(t, i, args), 0);
			assert_true(args[0].i == 1 && args[1].i == -7 && args[2].u == 2);
		} else if (kind == TG_ZONE) {
			assert_string_equal(sig, "zone(name=\"init\")");
			assert_int_equal(tfs_trace_term_arg_text(t, i, 0, sig, sizeof(sig)), 6);
			assert_string_equal(sig, "\"init\"");
			assert_int_equal(tfs_trace_term_arg_text(t, i, 1, sig, sizeof(sig)), -EINVAL);
		}
	}
	assert_true(sum == 6);
	assert_int_equal(tfs_trace_signature(t, 4, sig, sizeof(sig)), -ENOENT);
	assert_int_equal(tfs_trace_grammar_text(t, 0, &g, &glen), 0);
	assert_non_null(strstr(g, "\nS ->"));
	assert_true(strlen(g) == glen);
	free(g);
}

/* Expected bytes written by hand from FORMAT.md §9, not by the code under test. */
static void test_trace_views_match_hand_written_lines(void **state)
{
	static const char expect_text[] =
		"0.000001000 100 T0 pwrite(fd=file#3, count=4096, offset=0) = 4096   \n"
		"0.000002000  50 T0 zone(name=\"init\")\n"
		"0.000003500 100 T0 pwrite(fd=file#3, count=4096, offset=4096) = 17  \n"
		"0.000004000   7 T0 send(dest=1, tag=-7, bytes=2)\n"
		"0.000005000   7 T0 malloc(size=64) = 0x7f00       \n"
		"0.000006000   7 T0 malloc(size=1000000) = 0xabcdef\n";
	static const char expect_json[] =
		"{\"ts\":1000,\"dur\":100,\"rank\":0,\"thread\":0,\"name\":\"pwrite\",\"args\":"
		"{\"fd\":\"file#3\",\"count\":4096,\"offset\":0,\"result\":4096}}   \n"
		"{\"ts\":2000,\"dur\":50,\"rank\":0,\"thread\":0,\"name\":\"zone\",\"args\":"
		"{\"name\":\"init\"}} \n"
		"{\"ts\":3500,\"dur\":100,\"rank\":0,\"thread\":0,\"name\":\"pwrite\",\"args\":"
		"{\"fd\":\"file#3\",\"count\":4096,\"offset\":4096,\"result\":17}}  \n"
		"{\"ts\":4000,\"dur\":7,\"rank\":0,\"thread\":0,\"name\":\"send\",\"args\":"
		"{\"dest\":1,\"tag\":-7,\"bytes\":2}}  \n"
		/* a hex result is a number, counted at the digits of 0xffffff (8) */
		"{\"ts\":5000,\"dur\":7,\"rank\":0,\"thread\":0,\"name\":\"malloc\",\"args\":"
		"{\"size\":64,\"result\":32512}}          \n"
		"{\"ts\":6000,\"dur\":7,\"rank\":0,\"thread\":0,\"name\":\"malloc\",\"args\":"
		"{\"size\":1000000,\"result\":11259375}}  \n";
	static const char expect_chrome[] =
		"{\"name\":\"pwrite\",\"cat\":\"io\",\"ph\":\"X\",\"ts\":1.000,\"dur\":0.100,"
		"\"pid\":0,\"tid\":0,\"args\":{\"fd\":\"file#3\"}},\n"
		"{\"name\":\"init\",\"cat\":\"zone\",\"ph\":\"X\",\"ts\":2.000,\"dur\":0.050,"
		"\"pid\":0,\"tid\":0,\"args\":{}},\n";
	struct tfs_writer *w;
	struct tfs_wstream *s;
	struct tfs_trace *t;
	uint64_t size;
	char *got;
	union tfs_arg a[4];

	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(tg_declare(w), 0);
	assert_int_equal(tfs_writer_stream_new(w, 0, 0, &s), 0);
	a[0].u = 3, a[1].u = 4096, a[2].u = 0, a[3].i = 4096;
	assert_int_equal(tfs_wstream_append(s, TG_PWRITE, 1000, 100, a), 0);
	a[0].s = "init";
	assert_int_equal(tfs_wstream_append(s, TG_ZONE, 2000, 50, a), 0);
	a[0].u = 3, a[1].u = 4096, a[2].u = 4096, a[3].i = 17;
	assert_int_equal(tfs_wstream_append(s, TG_PWRITE, 3500, 100, a), 0);
	a[0].i = 1, a[1].i = -7, a[2].u = 2;
	assert_int_equal(tfs_wstream_append(s, TG_SEND, 4000, 7, a), 0);
	a[0].u = 64, a[1].u = 0x7f00;
	assert_int_equal(tfs_wstream_append(s, TG_MALLOC, 5000, 7, a), 0);
	a[0].u = 1000000, a[1].u = 0xabcdef;
	assert_int_equal(tfs_wstream_append(s, TG_MALLOC, 6000, 7, a), 0);
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	tfs_writer_free(w);

	assert_int_equal(tfs_trace_open(tmp_path, &t, NULL), 0);
	got = read_view(t, 0, TFS_VIEW_TEXT, 0, 6, &size);
	assert_string_equal(got, expect_text);
	free(got);
	got = read_view(t, 0, TFS_VIEW_JSONL, 0, 6, &size);
	assert_string_equal(got, expect_json);
	free(got);
	got = read_view(t, 0, TFS_VIEW_TEXT, 2, 2, &size);
	assert_int_equal(size, line_start(expect_text, 4) - line_start(expect_text, 2));
	assert_memory_equal(got, line_start(expect_text, 2), size);
	free(got);
	got = read_view(t, 0, TFS_VIEW_CHROME, 0, 6, &size);
	assert_memory_equal(got, expect_chrome, strlen(expect_chrome));
	free(got);
	check_tables(t);
	tfs_trace_close(t);
}

/* Characters of @v printed as a field of @type (FORMAT.md §9), from printf alone. */
static unsigned int natural_width(uint8_t type, uint64_t v)
{
	char buf[32];

	if (type == TFS_TYPE_I64)
		return (unsigned int)snprintf(buf, sizeof(buf), "%" PRId64, (int64_t)v);
	if (type == TFS_TYPE_HEX)
		return (unsigned int)snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
	return (unsigned int)snprintf(buf, sizeof(buf), "%" PRIu64, v);
}

#define WIDTH_TERMS 24

/*
 * A terminal's VAL widths are the widest of its occurrences (FORMAT.md §5.2), at every
 * boundary of a decimal or hexadecimal length, signed and not: each terminal (a window of
 * the values below, one with zeros alone) renders every line at its one length, the
 * natural length of each line plus the padding of the fields to their widest.
 */
static void test_trace_val_widths_are_the_widest_printed(void **state)
{
	static const uint8_t types[3] = {TFS_TYPE_U64, TFS_TYPE_I64, TFS_TYPE_HEX};
	static const struct tfs_arg_desc args[4] = {
	    {"t", TFS_TYPE_U64, TFS_ENC_SIG, 0, NULL},
	    {"u", TFS_TYPE_U64, TFS_ENC_VAL, 0, NULL},
	    {"i", TFS_TYPE_I64, TFS_ENC_VAL, 0, NULL},
	    {"h", TFS_TYPE_HEX, TFS_ENC_VAL, 0, NULL},
	};
	static const struct tfs_kind_desc kind = {"w", "c", 4, args};
	uint64_t vals[64], widest[WIDTH_TERMS][3] = {{0}}, p = 1;
	struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
	uint32_t n_vals = 0, id, n_lines = 0;
	unsigned int len[WIDTH_TERMS] = {0};
	struct tfs_writer *w;
	struct tfs_wstream *s;
	struct tfs_trace *t;
	uint64_t size;
	char *text, *line;

	vals[n_vals++] = 0;
	for (int k = 0; k < 19; k++, p *= 10) { /* 10^k - 1 and 10^k */
		vals[n_vals++] = p - 1;
		vals[n_vals++] = p;
	}
	vals[n_vals++] = p; /* 10^19 */
	vals[n_vals++] = UINT64_MAX;
	vals[n_vals++] = (uint64_t)INT64_MIN;
	vals[n_vals++] = (uint64_t)INT64_MAX;
	vals[n_vals++] = 0xfff;
	vals[n_vals++] = 0x1000;
	assert_int_equal(tfs_writer_new(&o, &w), 0);
	assert_int_equal(tfs_writer_add_kind(w, &kind, &id), 0);
	assert_int_equal(tfs_writer_stream_new(w, 0, 0, &s), 0);
	for (uint32_t term = 0; term < WIDTH_TERMS; term++) {
		/* terminal 0: zeros; terminal k: a window of the values from k, some negated */
		for (uint32_t j = 0; j < 5; j++) {
			union tfs_arg a[4];

			a[0].u = term;
			for (int f = 0; f < 3; f++) {
				uint64_t v = term ? vals[(term + j * (f + 1)) % n_vals] : 0;

				a[1 + f].u = f == 1 && (term + j) % 2 ? -v : v;
				if (natural_width(types[f], a[1 + f].u) > widest[term][f])
					widest[term][f] = natural_width(types[f], a[1 + f].u);
			}
			assert_int_equal(tfs_wstream_append(s, id, 0, 0, a), 0);
		}
	}
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	tfs_writer_free(w);
	assert_int_equal(tfs_trace_open(tmp_path, &t, NULL), 0);
	assert_int_equal(tfs_trace_verify(t, NULL), 0);
	text = read_view(t, 0, TFS_VIEW_TEXT, 0, 5 * WIDTH_TERMS, &size);
	for (line = text; *line; line = strchr(line, '\n') + 1, n_lines++) {
		const uint32_t term = n_lines / 5;
		const char *u = strstr(line, "u="), *end = strchr(line, '\n');
		unsigned int natural = (unsigned int)(end - line), widths = 0;
		uint64_t v[3];

		assert_non_null(u);
		assert_int_equal(sscanf(u, "u=%" SCNu64 ", i=%" SCNd64 ", h=0x%" SCNx64, &v[0],
					(int64_t *)&v[1], &v[2]),
				 3);
		while (line[natural - 1] == ' ')
			natural--;
		for (int f = 0; f < 3; f++)
			widths += (unsigned int)widest[term][f] - natural_width(types[f], v[f]);
		/* every line of the terminal pads to the same length */
		if (len[term] == 0)
			len[term] = natural + widths;
		assert_int_equal(end - line, natural + widths);
		assert_int_equal(end - line, len[term]);
	}
	assert_int_equal(n_lines, 5 * WIDTH_TERMS);
	free(text);
	tfs_trace_close(t);
}

#define PRINTF_VALS 400

/*
 * Numbers print as printf prints them (FORMAT.md §9), in the text view (hex as 0x...) and the
 * JSON lines view (decimal): around every decimal and bit length, and random values of every
 * bit length, signed and not.
 */
static void test_trace_numbers_print_as_printf(void **state)
{
	static const struct tfs_arg_desc args[3] = {
	    {"u", TFS_TYPE_U64, TFS_ENC_VAL, 0, NULL},
	    {"i", TFS_TYPE_I64, TFS_ENC_VAL, 0, NULL},
	    {"h", TFS_TYPE_HEX, TFS_ENC_VAL, 0, NULL},
	};
	static const struct tfs_kind_desc kind = {"n", "c", 3, args};
	struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
	uint64_t seed = tu_seed(__func__), vals[PRINTF_VALS], p = 1, size;
	uint32_t n = 0, id, i = 0;
	struct tfs_writer *w;
	struct tfs_wstream *s;
	struct tfs_trace *t;
	char *text, *line, want[128];

	vals[n++] = 0;
	for (int k = 0; k < 20; k++, p *= 10) { /* 10^k - 1, 10^k, 10^k + 1 */
		vals[n++] = p - 1;
		vals[n++] = p;
		vals[n++] = p + 1;
	}
	for (int k = 0; k < 64; k++) { /* 2^k - 1 and 2^k */
		vals[n++] = (UINT64_C(1) << k) - 1;
		vals[n++] = UINT64_C(1) << k;
	}
	vals[n++] = UINT64_MAX;
	while (n < PRINTF_VALS)
		vals[n++] = tu_rand(&seed) >> tu_below(&seed, 64);
	assert_int_equal(tfs_writer_new(&o, &w), 0);
	assert_int_equal(tfs_writer_add_kind(w, &kind, &id), 0);
	assert_int_equal(tfs_writer_stream_new(w, 0, 0, &s), 0);
	for (uint32_t j = 0; j < n; j++) {
		union tfs_arg a[3] = {{.u = vals[j]}, {.u = vals[(j + 1) % n]}, {.u = vals[j]}};

		assert_int_equal(tfs_wstream_append(s, id, 0, 0, a), 0);
	}
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	tfs_writer_free(w);
	assert_int_equal(tfs_trace_open(tmp_path, &t, NULL), 0);
	text = read_view(t, 0, TFS_VIEW_TEXT, 0, n, &size);
	for (line = text; *line; line = strchr(line, '\n') + 1, i++) {
		const char *end = strchr(line, '\n');
		int len = snprintf(want, sizeof(want),
				   "T0 n(u=%" PRIu64 ", i=%" PRId64 ", h=0x%" PRIx64 ")", vals[i],
				   (int64_t)vals[(i + 1) % n], vals[i]);

		assert_true(end - line >= len);
		assert_memory_equal(line, want, (size_t)len);
		for (const char *q = line + len; q < end; q++) /* padding to the widest */
			assert_int_equal(*q, ' ');
	}
	assert_int_equal(i, n);
	free(text);
	text = read_view(t, 0, TFS_VIEW_JSONL, 0, n, &size);
	for (i = 0, line = text; *line; line = strchr(line, '\n') + 1, i++) {
		const char *obj = strstr(line, "\"args\":{");

		snprintf(want, sizeof(want), "\"args\":{\"u\":%" PRIu64 ",\"i\":%" PRId64
			 ",\"h\":%" PRIu64 "}}", vals[i], (int64_t)vals[(i + 1) % n], vals[i]);
		assert_non_null(obj);
		assert_memory_equal(obj, want, strlen(want));
	}
	assert_int_equal(i, n);
	free(text);
	tfs_trace_close(t);
}

/*
 * FORMAT.md §9: counters are "C" events with their value, marks instant events named by
 * their message, other kinds "X" events whose args leave out what varies per occurrence.
 */
static void test_trace_chrome_kinds_by_shape(void **state)
{
	static const struct tfs_arg_desc counter_args[] = {
		{.name = "name", .type = TFS_TYPE_STR, .enc = TFS_ENC_STR},
		{.name = "value", .type = TFS_TYPE_I64, .enc = TFS_ENC_VAL},
	};
	static const struct tfs_arg_desc mark_args[] = {
		{.name = "message", .type = TFS_TYPE_STR, .enc = TFS_ENC_STR},
	};
	static const struct tfs_arg_desc call_args[] = {
		{.name = "id", .type = TFS_TYPE_U64, .enc = TFS_ENC_VAL},
		{.name = "flags", .type = TFS_TYPE_HEX, .enc = TFS_ENC_SIG},
		{.name = "ret", .type = TFS_TYPE_HEX, .enc = TFS_ENC_VAL, .flags = TFS_ARG_RESULT},
	};
	static const struct tfs_kind_desc kinds[] = {
		{"counter", "user", 2, counter_args},
		{"mark", "user", 1, mark_args},
		{"call", "io", 3, call_args},
	};
	static const char expect[] =
		"{\"name\":\"queue\",\"cat\":\"user\",\"ph\":\"C\",\"ts\":1.000,\"pid\":0,"
		"\"tid\":0,\"args\":{\"value\":-12}},\n"
		"{\"name\":\"a \\\"b\\\"\",\"cat\":\"user\",\"ph\":\"i\",\"s\":\"t\",\"ts\":2.000,"
		"\"pid\":0,\"tid\":0,\"args\":{}},\n"
		"{\"name\":\"call\",\"cat\":\"io\",\"ph\":\"X\",\"ts\":3.000,\"dur\":0.005,"
		"\"pid\":0,\"tid\":0,\"args\":{\"flags\":16}},\n"
		"{\"name\":\"call\",\"cat\":\"io\",\"ph\":\"X\",\"ts\":4.000,\"dur\":0.005,"
		"\"pid\":0,\"tid\":0,\"args\":{\"flags\":16}},\n";
	struct tfs_writer *w;
	struct tfs_wstream *s;
	struct tfs_trace *t;
	uint32_t id[3];
	union tfs_arg a[3];
	uint64_t size;
	char *got;

	(void)state;
	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	for (int k = 0; k < 3; k++)
		assert_int_equal(tfs_writer_add_kind(w, &kinds[k], &id[k]), 0);
	assert_int_equal(tfs_writer_stream_new(w, 0, 0, &s), 0);
	a[0].s = "queue", a[1].i = -12;
	assert_int_equal(tfs_wstream_append(s, id[0], 1000, 0, a), 0);
	a[0].s = "a \"b\"";
	assert_int_equal(tfs_wstream_append(s, id[1], 2000, 0, a), 0);
	a[0].u = 7, a[1].u = 16, a[2].u = 0x7fffffff;
	assert_int_equal(tfs_wstream_append(s, id[2], 3000, 5, a), 0);
	a[0].u = 8;
	assert_int_equal(tfs_wstream_append(s, id[2], 4000, 5, a), 0);
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	tfs_writer_free(w);
	assert_int_equal(tfs_trace_open(tmp_path, &t, NULL), 0);
	got = read_view(t, 0, TFS_VIEW_CHROME, 0, 4, &size);
	assert_int_equal(size, strlen(expect));
	assert_memory_equal(got, expect, size);
	free(got);
	tfs_trace_close(t);
}

static void test_trace_identical_streams_stored_once(void **state)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
	struct tg_stream s[6];
	struct tfs_trace *t;
	struct tfs_stream_info si;
	struct tfs_trace_info info;
	struct tfs_writer *w;

	assert_int_equal(tfs_writer_new(&o, &w), 0);
	assert_int_equal(tg_declare(w), 0);
	for (uint32_t i = 0; i < 6; i++) {
		s[i].rank = 0;
		s[i].thread = i;
		assert_int_equal(tg_fill(&s[i], 5000, 1, 42), 0);
		assert_int_equal(tg_write(w, &s[i]), 0);
	}
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	tfs_writer_free(w);
	assert_int_equal(tfs_trace_open(tmp_path, &t, NULL), 0);
	tfs_trace_get_info(t, &info);
	/* 5 fixed sections + one grammar and one values section shared by all six */
	assert_int_equal(info.n_sections, 7);
	for (uint32_t i = 0; i < 6; i++) {
		assert_int_equal(tfs_trace_stream(t, i, &si), 0);
		assert_int_equal(si.same_as, 0);
		check_events(t, &s[i], TFS_TIMING_NONE, 0);
		tg_free(&s[i]);
	}
	tfs_trace_close(t);
}

/* Threads running the same code with other numbers share the grammar, not the values. */
static void test_trace_equal_grammars_stored_once(void **state)
{
	struct tg_stream s[2];
	struct tfs_stream_info a, b;
	struct tfs_trace_info info;
	struct tfs_trace *t;

	write_trace(NULL, s, 2, 5000, 1, 1234);
	assert_int_equal(tfs_trace_open(tmp_path, &t, NULL), 0);
	tfs_trace_get_info(t, &info);
	/* 5 fixed sections + one shared grammar + two values sections */
	assert_int_equal(info.n_sections, 8);
	assert_int_equal(tfs_trace_stream(t, 0, &a), 0);
	assert_int_equal(tfs_trace_stream(t, 1, &b), 0);
	assert_int_equal(b.same_as, 1);
	for (int i = 0; i < 2; i++) {
		check_events(t, &s[i], TFS_TIMING_LOSSLESS, 0);
		tg_free(&s[i]);
	}
	assert_int_equal(tfs_trace_verify(t, NULL), 0);
	tfs_trace_close(t);
}

static void test_trace_grammar_blocks_read_as_one_stream(void **state)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_LOSSLESS, .grammar_budget = 4096};
	uint64_t seed = tu_seed(__func__);
	struct tg_stream s[1];
	struct tfs_stream_info si;
	struct tfs_trace *t;

	write_trace(&o, s, 1, 30000, 0, seed);
	assert_int_equal(tfs_trace_open(tmp_path, &t, NULL), 0);
	assert_int_equal(tfs_trace_stream(t, 0, &si), 0);
	assert_true(si.n_blocks > 3);
	check_events(t, &s[0], TFS_TIMING_LOSSLESS, 0);
	assert_int_equal(tfs_trace_verify(t, NULL), 0);
	tfs_trace_close(t);
	tg_free(&s[0]);
}

/* Expand rule @rule of @block through the shape API alone, checking each terminal. */
static void expand_shape(struct tfs_trace *t, uint32_t stream, uint32_t block, uint32_t rule,
			 struct tfs_cursor *c, uint64_t *at)
{
	struct tfs_rule_info ri;
	uint64_t before = *at;

	assert_int_equal(tfs_trace_rule(t, stream, block, rule, &ri), 0);
	for (uint32_t i = 0; i < ri.n_elems; i++) {
		struct tfs_rule_elem e;

		assert_int_equal(tfs_trace_rule_elem(t, stream, block, rule, i, &e), 0);
		assert_true(e.count >= 1);
		for (uint64_t k = 0; k < e.count; k++) {
			struct tfs_event ev;

			if (e.is_rule) {
				assert_true(e.id < rule);
				expand_shape(t, stream, block, e.id, c, at);
				continue;
			}
			assert_int_equal(tfs_cursor_event(c, (*at)++, &ev, NULL), 0);
			assert_int_equal(ev.terminal, e.id);
		}
	}
	assert_int_equal(tfs_trace_rule_elem(t, stream, block, rule, ri.n_elems,
					     &(struct tfs_rule_elem){0}), -ENOENT);
	assert_true(*at - before == ri.n_events);
}

/* The grammar walked rule by rule expands to the stream's terminals, block after block. */
static void test_trace_grammar_shape_expands_to_the_events(void **state)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE, .grammar_budget = 4096};
	uint64_t seed = tu_seed(__func__);
	struct tg_stream s[4];
	struct tfs_grammar_info gi;
	struct tfs_block_info bi;
	struct tfs_stream_info si;
	struct tfs_trace *t;

	write_trace(&o, s, 4, 30000, 1, seed);
	assert_int_equal(tfs_trace_open(tmp_path, &t, NULL), 0);
	for (uint32_t i = 0; i < 4; i++) {
		struct tfs_cursor *c;
		uint64_t at = 0;

		assert_int_equal(tfs_trace_stream(t, i, &si), 0);
		assert_int_equal(tfs_trace_grammar_info(t, i, &gi), 0);
		assert_int_equal(gi.n_blocks, si.n_blocks);
		assert_true(gi.same_as <= i);
		assert_int_equal(tfs_cursor_new(t, i, TFS_VIEW_TEXT, 0, si.n_events, &c), 0);
		for (uint32_t b = 0; b < gi.n_blocks; b++) {
			uint64_t from = at;

			assert_int_equal(tfs_trace_block(t, i, b, &bi), 0);
			expand_shape(t, i, b, bi.n_rules - 1, c, &at);
			assert_true(at - from == bi.n_events);
		}
		assert_true(at == si.n_events);
		assert_int_equal(tfs_trace_block(t, i, gi.n_blocks, &bi), -ENOENT);
		assert_int_equal(tfs_trace_rule(t, i, 0, UINT32_MAX, &(struct tfs_rule_info){0}),
				 -ENOENT);
		tfs_cursor_free(c);
		tg_free(&s[i]);
	}
	assert_int_equal(tfs_trace_grammar_info(t, 4, &gi), -ENOENT);
	tfs_trace_close(t);
}

/* Streams with one grammar and other values name the first of them. */
static void test_trace_grammar_shape_shared_by_equal_grammars(void **state)
{
	struct tg_stream s[2];
	struct tfs_grammar_info a, b;
	struct tfs_trace *t;

	write_trace(NULL, s, 2, 5000, 1, 1234);
	assert_int_equal(tfs_trace_open(tmp_path, &t, NULL), 0);
	assert_int_equal(tfs_trace_grammar_info(t, 0, &a), 0);
	assert_int_equal(tfs_trace_grammar_info(t, 1, &b), 0);
	assert_int_equal(a.same_as, 0);
	assert_int_equal(b.same_as, 0);
	tfs_trace_close(t);
	tg_free(&s[0]);
	tg_free(&s[1]);
}

static void test_trace_phase_views_are_slices(void **state)
{
	struct tfs_writer *w;
	struct tg_stream s = {.rank = 0, .thread = 0};
	struct tfs_phase_info pi;
	struct tfs_trace *t;
	uint64_t full_size, size, off;
	char *full, *part;
	struct tfs_cursor *c;

	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(tg_declare(w), 0);
	assert_int_equal(tg_fill(&s, 1000, 1, 7), 0);
	assert_int_equal(tg_write(w, &s), 0);
	assert_int_equal(tfs_writer_add_phase(w, "solve", 0, 0, 100, 333), 0);
	assert_int_equal(tfs_writer_add_phase(w, "bad", 0, 0, 900, 101), -EINVAL);
	assert_int_equal(tfs_writer_add_phase(w, "bad", 0, 9, 0, 1), -ENOENT);
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	tfs_writer_free(w);
	assert_int_equal(tfs_trace_open(tmp_path, &t, NULL), 0);
	assert_int_equal(tfs_trace_phase(t, 0, &pi), 0);
	assert_string_equal(pi.name, "solve");
	assert_true(pi.first_event == 100 && pi.n_events == 333);
	assert_int_equal(tfs_trace_phase(t, 1, &pi), -ENOENT);
	for (int v = 0; v < TFS_VIEW_COUNT; v++) {
		full = read_view(t, 0, v, 0, 1000, &full_size);
		part = read_view(t, 0, v, 100, 333, &size);
		assert_int_equal(tfs_cursor_new(t, 0, v, 0, 1000, &c), 0);
		assert_int_equal(tfs_cursor_event_offset(c, 100, &off), 0);
		tfs_cursor_free(c);
		assert_memory_equal(part, full + off, size);
		assert_true(off == 0 || full[off - 1] == '\n');
		assert_true(part[size - 1] == '\n');
		free(full);
		free(part);
	}
	tfs_trace_close(t);
	tg_free(&s);
}

#define MEMO_KINDS 40
#define MEMO_EVENTS 6000

/*
 * Kinds whose last signatures the writer remembers in one slot (k and k + 16, writer_i.h
 * SIG_MEMO), signatures that repeat, alternate, or are too long to be remembered: every
 * event reads back with its own kind and arguments.
 */
static void test_trace_signatures_of_kinds_sharing_a_memo(void **state)
{
	static const struct tfs_arg_desc args[] = {
		{"site", TFS_TYPE_U64, TFS_ENC_SIG, 0, NULL},
		{"far", TFS_TYPE_U64, TFS_ENC_SIG, 0, NULL},
		{"x", TFS_TYPE_U64, TFS_ENC_SIG, 0, NULL},
		{"y", TFS_TYPE_U64, TFS_ENC_SIG, 0, NULL},
		{"size", TFS_TYPE_U64, TFS_ENC_VAL, 0, NULL},
	};
	static char names[MEMO_KINDS][8];
	static uint32_t kind[MEMO_EVENTS];
	static union tfs_arg a[MEMO_EVENTS][5];
	uint64_t seed = tu_seed(__func__);
	struct tfs_writer *w;
	struct tfs_wstream *ws;
	struct tfs_cursor *c;
	struct tfs_trace *t;
	struct tfs_diag d;

	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	for (uint32_t k = 0; k < MEMO_KINDS; k++) {
		struct tfs_kind_desc desc = {names[k], "test", 5, args};
		uint32_t id;

		snprintf(names[k], sizeof(names[k]), "k%u", k);
		assert_int_equal(tfs_writer_add_kind(w, &desc, &id), 0);
		assert_int_equal(id, k);
	}
	assert_int_equal(tfs_writer_stream_new(w, 0, 0, &ws), 0);
	for (uint32_t i = 0; i < MEMO_EVENTS; i++) {
		/* kinds 3, 19 and 35 share a slot: alternations, runs of one, others between */
		const uint32_t pick = (uint32_t)tu_below(&seed, 8);
		const bool far = !tu_below(&seed, 4);

		kind[i] = pick < 6 ? 3 + 16 * (pick % 3) : (uint32_t)tu_below(&seed, MEMO_KINDS);
		if (i && i % 50 < 20)
			kind[i] = kind[i - 1];
		a[i][0].u = tu_below(&seed, 3);
		/* signatures longer than the 32 bytes remembered, or not */
		a[i][1].u = far ? UINT64_MAX - tu_below(&seed, 2) : 1;
		a[i][2].u = far ? UINT64_MAX : 0;
		a[i][3].u = far ? UINT64_MAX - 1 : 0;
		a[i][4].u = tu_below(&seed, 1000);
		assert_int_equal(tfs_wstream_append(ws, kind[i], 1000 * (uint64_t)i, 10, a[i]), 0);
	}
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	tfs_writer_free(w);
	assert_int_equal(tfs_trace_open(tmp_path, &t, &d), 0);
	assert_int_equal(tfs_cursor_new(t, 0, TFS_VIEW_TEXT, 0, MEMO_EVENTS, &c), 0);
	for (uint32_t i = 0; i < MEMO_EVENTS; i++) {
		struct tfs_event ev;

		assert_int_equal(tfs_cursor_event(c, i, &ev, NULL), 0);
		assert_int_equal(ev.kind, kind[i]);
		assert_int_equal(ev.n_args, 5);
		for (uint32_t j = 0; j < 5; j++)
			assert_true(ev.args[j].u == a[i][j].u);
	}
	tfs_cursor_free(c);
	tfs_trace_close(t);
}

static void test_trace_writer_rejects_bad_input(void **state)
{
	struct tfs_writer_opts bad = {.timing = TFS_TIMING_LOSSY, .rel_err = 1.5};
	struct tfs_arg_desc str_as_val = {.name = "s", .type = TFS_TYPE_STR,
					  .enc = TFS_ENC_VAL};
	struct tfs_kind_desc k = {"k", "c", 1, &str_as_val};
	struct tfs_writer *w;
	struct tfs_wstream *s, *dup;
	uint32_t id;

	assert_int_equal(tfs_writer_new(&bad, &w), -EINVAL);
	bad = (struct tfs_writer_opts){.values_save_level = 23};
	assert_int_equal(tfs_writer_new(&bad, &w), -EINVAL);
	bad.values_save_level = -1;
	assert_int_equal(tfs_writer_new(&bad, &w), -EINVAL);
	bad = (struct tfs_writer_opts){.timing_coder = TFS_CODER_FAST + 1};
	assert_int_equal(tfs_writer_new(&bad, &w), -EINVAL);
	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(tfs_writer_add_kind(w, &k, &id), -EINVAL);
	assert_int_equal(tg_declare(w), 0);
	assert_int_equal(tfs_writer_stream_new(w, 0, 0, &s), 0);
	assert_int_equal(tfs_writer_stream_new(w, 0, 0, &dup), -EEXIST);
	assert_int_equal(tfs_wstream_append(s, 99, 0, 0, NULL), -EINVAL);
	assert_int_equal(tfs_writer_save(w, "/nonexistent-dir/x.trace"), -ENOENT);
	tfs_writer_free(w);
}

/*
 * RVAL words a reader accepts (FORMAT.md §5.2): literals in [-2^61, 2^61), rank-derived
 * displacements that are such a value once a rank below 2^32 is added; whatever a writer
 * makes of an allowed value at any rank is accepted.
 */
static void test_trace_rval_word_range(void **state)
{
	const int64_t L = TFS_RVAL_LIMIT, R = INT64_C(1) << 32;
	const int64_t vals[] = {-L, -L + 1, -1, 0, 1, L - 1};
	const uint32_t ranks[] = {0, 1, 4096, UINT32_MAX};
	uint64_t w = 0;

	assert_true(rval_word_ok(zigzag_enc(L - 1) << 1));
	assert_true(rval_word_ok(zigzag_enc(-L) << 1));
	assert_false(rval_word_ok(zigzag_enc(L) << 1));
	assert_false(rval_word_ok(zigzag_enc(-L - 1) << 1));
	assert_true(rval_word_ok(zigzag_enc(L - 1) << 1 | 1));
	assert_true(rval_word_ok(zigzag_enc(-L - R) << 1 | 1));
	assert_false(rval_word_ok(zigzag_enc(L) << 1 | 1));
	assert_false(rval_word_ok(zigzag_enc(-L - R - 1) << 1 | 1));
	assert_false(rval_word_ok(UINT64_MAX));
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		for (size_t k = 0; k < sizeof(ranks) / sizeof(ranks[0]); k++)
			for (int ranked = 0; ranked < 2; ranked++) {
				assert_true(rval_word_enc(tfs_rval(vals[i], ranked), ranks[k], &w));
				assert_true(rval_word_ok(w));
				assert_int_equal(rval_word_abs(w, ranks[k]), vals[i]);
			}
}

static void test_trace_open_refuses_non_traces(void **state)
{
	struct tfs_trace *t;
	struct tfs_diag d;
	FILE *f = fopen(tmp_path, "w");

	assert_non_null(f);
	fputs("this is not a trace, just some text that is long enough\n", f);
	fclose(f);
	assert_int_equal(tfs_trace_open(tmp_path, &t, &d), -TFS_EFORMAT);
	assert_string_equal(d.section, "header");
	assert_int_equal(tfs_trace_open("/nonexistent", &t, &d), -ENOENT);
	assert_int_equal(tfs_trace_open("/tmp", &t, &d), -EISDIR);
}



/* Opening and verifying @bytes must fail cleanly with a diagnostic. */
static void expect_refused(const uint8_t *bytes, size_t n, const char *what, size_t at)
{
	struct tfs_trace *t;
	struct tfs_diag d;
	int rc;

	spit(tmp_path, bytes, n);
	rc = tfs_trace_open(tmp_path, &t, &d);
	if (rc == 0) {
		rc = tfs_trace_verify(t, &d);
		tfs_trace_close(t);
	}
	if (rc != -TFS_ECORRUPT && rc != -TFS_EFORMAT)
		fail_msg("%s at %zu: rc=%d, expected a refusal", what, at, rc);
	if (!d.reason[0] || !d.section[0])
		fail_msg("%s at %zu: no diagnostic", what, at);
}

static const char *golden(const char *name, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/golden/%s", TFS_TEST_DATA, name);
	return buf;
}

/* No hidden temporary file of tmp_path is left in /tmp. */
static void assert_no_temporary(void)
{
	char prefix[80];
	struct dirent *e;
	DIR *d = opendir("/tmp");

	assert_non_null(d);
	snprintf(prefix, sizeof(prefix), ".tfs-test-%d.trace.tmp.", (int)getpid());
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, prefix, strlen(prefix)))
			fail_msg("temporary file /tmp/%s left behind", e->d_name);
	closedir(d);
}

/*
 * A reserved file (tfs_file_reserve) reads as still being saved (-EBUSY) until a trace is
 * written over it; released, it stays if written, and is removed if not; a reservation whose
 * holder died without releasing it (the lock gone) is an empty file, refused as corrupt.
 */
static void test_trace_reserved_file_busy_until_written(void **state)
{
	struct tfs_trace *t;
	struct tfs_diag d;
	struct stat st;
	char p[512];
	size_t n;
	uint8_t *g = slurp(golden("small.trace", p, sizeof(p)), &n);
	int fd;

	unlink(tmp_path);
	fd = tfs_file_reserve(tmp_path);
	assert_true(fd >= 0);
	assert_int_equal(stat(tmp_path, &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(tfs_trace_open(tmp_path, &t, &d), -EBUSY);
	assert_int_equal(tfs_file_write(tmp_path, g, n), 0);
	assert_int_equal(tfs_trace_open(tmp_path, &t, &d), 0);
	tfs_trace_close(t);
	tfs_file_release(fd, tmp_path);
	assert_int_equal(stat(tmp_path, &st), 0);
	assert_int_equal(st.st_size, (off_t)n);

	/* over a finished trace: replaced at once, then removed when nothing is saved */
	fd = tfs_file_reserve(tmp_path);
	assert_true(fd >= 0);
	assert_int_equal(tfs_trace_open(tmp_path, &t, &d), -EBUSY);
	tfs_file_release(fd, tmp_path);
	assert_int_equal(stat(tmp_path, &st), -1);
	assert_int_equal(errno, ENOENT);

	/* the holder gone without a word */
	fd = tfs_file_reserve(tmp_path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(tfs_trace_open(tmp_path, &t, &d), -TFS_ECORRUPT);
	assert_string_equal(d.section, "header");
	tfs_file_release(-1, tmp_path);
	assert_int_equal(tfs_file_reserve("/nonexistent/dir/x.trace"), -ENOENT);
	assert_no_temporary();
	free(g);
}

/* The committed golden trace still opens and renders the committed bytes. */
static void test_trace_golden_renders_committed_text(void **state)
{
	char p1[512], p2[512];
	struct tfs_trace *t;
	uint64_t size;
	size_t n;
	char *got;
	uint8_t *want;

	assert_int_equal(tfs_trace_open(golden("small.trace", p1, sizeof(p1)), &t, NULL), 0);
	assert_int_equal(tfs_trace_verify(t, NULL), 0);
	got = read_view(t, 0, TFS_VIEW_TEXT, 0, 2 * 7 + 3, &size);
	want = slurp(golden("small.txt", p2, sizeof(p2)), &n);
	assert_int_equal(size, n);
	assert_memory_equal(got, want, n);
	free(got);
	free(want);
	tfs_trace_close(t);
}

static void test_trace_golden_every_truncation_refused(void **state)
{
	char p[512];
	size_t n;
	uint8_t *g = slurp(golden("small.trace", p, sizeof(p)), &n);

	for (size_t len = 0; len < n; len++)
		expect_refused(g, len, "truncation", len);
	free(g);
}

static void test_trace_golden_every_bit_flip_refused(void **state)
{
	char p[512];
	size_t n;
	uint8_t *g = slurp(golden("small.trace", p, sizeof(p)), &n);

	for (size_t i = 0; i < n * 8; i++) {
		g[i / 8] ^= (uint8_t)(1u << (i % 8));
		expect_refused(g, n, "bit flip", i);
		g[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
	free(g);
}


/*
 * Threads of one loop that differ only in where their addresses start (EPRSD's base
 * address as a function of the thread) share one values section plus a vpatch section of
 * a few words each (FORMAT.md §8.1); threads 6 and 7 are identical and share a patch.
 */
static uint64_t file_size(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return (uint64_t)st.st_size;
}

static void write_shifted(struct tg_stream *s, uint32_t n_streams, uint64_t n)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
	struct tfs_writer *w;

	assert_int_equal(tfs_writer_new(&o, &w), 0);
	assert_int_equal(tg_declare(w), 0);
	for (uint32_t i = 0; i < n_streams; i++) {
		uint64_t shift = (i < 7 ? i : 6) * 0x100000ull;

		s[i].rank = 0;
		s[i].thread = i;
		assert_int_equal(tg_fill(&s[i], n, 1, 42), 0);
		for (uint64_t j = 0; j < n; j++)
			if (s[i].ev[j].kind == TG_MALLOC)
				s[i].ev[j].args[1].u += shift;
		assert_int_equal(tg_write(w, &s[i]), 0);
	}
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	tfs_writer_free(w);
}

static void test_trace_shifted_streams_share_patched_values(void **state)
{
	struct tg_stream s[8];
	struct tfs_trace_info info;
	struct tfs_section_info sec;
	struct tfs_trace *t;
	uint32_t n_vpatch = 0, n_values = 0;
	uint64_t one_size, all_size;

	write_shifted(s, 1, 20000);
	one_size = file_size(tmp_path);
	tg_free(&s[0]);
	write_shifted(s, 8, 20000);
	all_size = file_size(tmp_path);
	assert_int_equal(tfs_trace_open(tmp_path, &t, NULL), 0);
	tfs_trace_get_info(t, &info);
	for (uint32_t i = 0; i < info.n_sections; i++) {
		assert_int_equal(tfs_trace_section(t, i, &sec), 0);
		n_vpatch += strcmp(sec.type_name, "vpatch") == 0;
		n_values += strcmp(sec.type_name, "values") == 0;
	}
	assert_int_equal(n_values, 1);
	assert_int_equal(n_vpatch, 1);
	/* seven more threads cost a few bytes each, not a values section each */
	printf("# 1 thread: %llu B, 8 threads: %llu B\n", (unsigned long long)one_size,
	       (unsigned long long)all_size);
	assert_true(all_size < one_size + 8 * 48);
	for (uint32_t i = 0; i < 8; i++)
		check_events(t, &s[i], TFS_TIMING_NONE, 0);
	for (uint32_t i = 0; i < 8; i++) {
		check_events_cached(t, &s[i], TFS_TIMING_NONE, 0);
		tg_free(&s[i]);
	}
	assert_int_equal(tfs_trace_verify(t, NULL), 0);
	tfs_trace_close(t);
}

/* Every truncation and bit flip of a trace with patched values is refused. */
static void test_trace_patched_values_damage_refused(void **state)
{
	struct tg_stream s[8];
	size_t n;
	uint8_t *g;

	write_shifted(s, 8, 3000);
	for (uint32_t i = 0; i < 8; i++)
		tg_free(&s[i]);
	g = slurp(tmp_path, &n);
	for (size_t len = 0; len < n; len++)
		expect_refused(g, len, "truncation", len);
	for (size_t i = 0; i < n * 8; i++) {
		g[i / 8] ^= (uint8_t)(1u << (i % 8));
		expect_refused(g, n, "bit flip", i);
		g[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
	free(g);
}

/*
 * Save @s with @level as values_save_level (and tfs_writer_skip_recompress() when @skip);
 * the file's bytes.
 */
static uint8_t *save_with_level(const struct tg_stream *s, int level, bool skip, size_t *n)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_LOSSLESS, .values_save_level = level};
	struct tfs_writer *w;

	assert_int_equal(tfs_writer_new(&o, &w), 0);
	assert_int_equal(tg_declare(w), 0);
	assert_int_equal(tg_write(w, s), 0);
	if (skip)
		tfs_writer_skip_recompress(w);
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	tfs_writer_free(w);
	return slurp(tmp_path, n);
}

/* Save @s with @level as values_save_level and tfs_writer_cap_recompress(@cap); its bytes. */
static uint8_t *save_capped(const struct tg_stream *s, int level, int cap, size_t *n)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_LOSSLESS, .values_save_level = level};
	struct tfs_writer *w;

	assert_int_equal(tfs_writer_new(&o, &w), 0);
	assert_int_equal(tg_declare(w), 0);
	assert_int_equal(tg_write(w, s), 0);
	tfs_writer_cap_recompress(w, cap);
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	tfs_writer_free(w);
	return slurp(tmp_path, n);
}

/* Whether traces @a and @b (@na, @nb bytes) render stream 0's @n events alike as text. */
static bool same_text(const uint8_t *a, size_t na, const uint8_t *b, size_t nb, uint64_t n)
{
	struct tfs_trace *ta, *tb;
	uint64_t la, lb;
	char *va, *vb;
	bool same;

	assert_int_equal(tfs_trace_open_mem(a, na, &ta, NULL), 0);
	assert_int_equal(tfs_trace_open_mem(b, nb, &tb, NULL), 0);
	va = read_view(ta, 0, TFS_VIEW_TEXT, 0, n, &la);
	vb = read_view(tb, 0, TFS_VIEW_TEXT, 0, n, &lb);
	same = la == lb && memcmp(va, vb, la) == 0;
	free(va);
	free(vb);
	tfs_trace_close(ta);
	tfs_trace_close(tb);
	return same;
}

/*
 * tfs_writer_cap_recompress() lowers the level values_save_level recompresses at: the file
 * lies between the uncapped one and the one without recompression, with the same events. A
 * cap at or above values_save_level, or none (0), changes nothing; one at the level the
 * blocks were made at (3) means no recompression.
 */
static void test_trace_values_save_level_capped(void **state)
{
	struct tg_stream s = {.rank = 0, .thread = 0};
	size_t n0, n19, n9, n;
	uint8_t *a, *b, *c, *x;

	assert_int_equal(tg_fill(&s, 20000, 0, 5), 0);
	a = save_capped(&s, 0, 0, &n0);
	b = save_capped(&s, 19, 0, &n19);
	c = save_capped(&s, 19, 9, &n9);
	print_message("# no recompression %zu bytes, at 9 %zu, at 19 %zu\n", n0, n9, n19);
	assert_true(n19 <= n9 && n9 < n0);
	assert_true(same_text(a, n0, c, n9, 20000));
	for (int cap = 19; cap <= 22; cap += 3) {
		x = save_capped(&s, 19, cap, &n);
		assert_int_equal(n, n19);
		assert_memory_equal(x, b, n);
		free(x);
	}
	for (int cap = 1; cap <= 3; cap += 2) {
		x = save_capped(&s, 19, cap, &n);
		assert_int_equal(n, n0);
		assert_memory_equal(x, a, n);
		free(x);
	}
	free(a);
	free(b);
	free(c);
	tg_free(&s);
}

/*
 * values_save_level recompresses small traces' value blocks (never larger, same events) and
 * is ignored above TFS_VALUES_SAVE_MAX_EVENTS events, or at any size after
 * tfs_writer_skip_recompress(): the file is then the one without it.
 */
static void test_trace_values_save_level_small_only(void **state)
{
	struct tg_stream s = {.rank = 0, .thread = 0};
	size_t n0, n19;
	uint8_t *a, *b;

	assert_int_equal(tg_fill(&s, 20000, 0, 5), 0);
	a = save_with_level(&s, 0, false, &n0);
	b = save_with_level(&s, 19, false, &n19);
	assert_true(n19 < n0);
	{
		struct tfs_trace *ta, *tb;
		uint64_t la, lb;
		char *va, *vb;

		assert_int_equal(tfs_trace_open_mem(a, n0, &ta, NULL), 0);
		assert_int_equal(tfs_trace_open_mem(b, n19, &tb, NULL), 0);
		va = read_view(ta, 0, TFS_VIEW_TEXT, 0, 20000, &la);
		vb = read_view(tb, 0, TFS_VIEW_TEXT, 0, 20000, &lb);
		assert_int_equal(la, lb);
		assert_memory_equal(va, vb, la);
		free(va);
		free(vb);
		tfs_trace_close(ta);
		tfs_trace_close(tb);
	}
	free(b);
	b = save_with_level(&s, 19, true, &n19);
	assert_int_equal(n0, n19);
	assert_memory_equal(a, b, n0);
	free(a);
	free(b);
	tg_free(&s);
	assert_int_equal(tg_fill(&s, TFS_VALUES_SAVE_MAX_EVENTS + 1, 1, 5), 0);
	a = save_with_level(&s, 0, false, &n0);
	b = save_with_level(&s, 19, false, &n19);
	assert_int_equal(n0, n19);
	assert_memory_equal(a, b, n0);
	free(a);
	free(b);
	tg_free(&s);
}

/* A trace of a newer major version is refused by name, not as corruption. */
static void test_trace_newer_version_refused_clearly(void **state)
{
	struct tg_stream s = {.rank = 0, .thread = 0};
	struct tfs_writer *w;
	struct tfs_trace *t;
	struct tfs_diag d;
	char want[64];
	uint8_t *g;
	size_t n;

	assert_int_equal(tg_fill(&s, 50, 0, 7), 0);
	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(tg_declare(w), 0);
	assert_int_equal(tg_write(w, &s), 0);
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	tfs_writer_free(w);
	tg_free(&s);
	g = slurp(tmp_path, &n);
	assert_int_equal(le_get16(g + 8), TFS_FORMAT_MAJOR);
	le_put16(g + 8, TFS_FORMAT_MAJOR + 1);
	le_put32(g + 36, crc32c(g, 36));
	spit(tmp_path, g, n);
	assert_int_equal(tfs_trace_open(tmp_path, &t, &d), -TFS_EFORMAT);
	snprintf(want, sizeof(want), "format %d.%d is newer than this tracefs",
		 TFS_FORMAT_MAJOR + 1, TFS_FORMAT_MINOR);
	assert_non_null(strstr(d.reason, want));
	free(g);
	/* a newer minor of the same major still opens: test_codec_stacks.c */
}

/* The golden trace is a 1.0 file: this 2.0 reader reads it as before. */
static void test_trace_golden_is_format_1_0(void **state)
{
	struct tfs_trace_info info;
	struct tfs_trace *t;
	char p[512];

	assert_int_equal(tfs_trace_open(golden("small.trace", p, sizeof(p)), &t, NULL), 0);
	tfs_trace_get_info(t, &info);
	assert_int_equal(info.version_major, 1);
	assert_int_equal(info.version_minor, 0);
	assert_true(tfs_trace_n_backtraces(t, 0) == 0);
	tfs_trace_close(t);
}

/* Every allocation of write + save + open + full read fails in turn: clean errors only. */
static void test_trace_allocation_failures_are_clean(void **state)
{
	struct tg_stream s = {.rank = 1, .thread = 2};
	long reached = 0;

	assert_int_equal(tg_fill(&s, 3000, 0, 99), 0);
	for (long k = 0;; k++) {
		struct tfs_writer *w = NULL;
		struct tfs_trace *t = NULL;
		int rc;

		fa_arm(k);
		rc = tfs_writer_new(NULL, &w);
		if (rc == 0)
			rc = tg_declare(w);
		if (rc == 0)
			rc = tg_write(w, &s);
		if (rc == 0)
			rc = tfs_writer_save(w, tmp_path);
		tfs_writer_free(w);
		if (rc == 0)
			rc = tfs_trace_open(tmp_path, &t, NULL);
		if (rc == 0)
			rc = tfs_trace_verify(t, NULL);
		tfs_trace_close(t);
		reached = fa_count();
		fa_disarm();
		if (rc == 0)
			break;
		assert_int_equal(rc, -ENOMEM);
		unlink(tmp_path);
	}
	assert_true(reached > 10);
	tg_free(&s);
}

/*
 * Regenerates tests/data/golden/small.* when TFS_WRITE_GOLDEN names that directory. The
 * committed small.trace is a format 1.0 file kept to prove old traces still read: regenerating
 * it makes a file of the current format and test_trace_golden_is_format_1_0 fails.
 */
static void write_golden(const char *dir)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_LOSSLESS};
	struct tg_stream s[2];
	struct tfs_writer *w;
	struct tfs_trace *t;
	char p[512];
	char *txt;
	uint64_t size;

	assert_int_equal(tfs_writer_new(&o, &w), 0);
	assert_int_equal(tg_declare(w), 0);
	for (uint32_t i = 0; i < 2; i++) {
		s[i].rank = i;
		s[i].thread = 0;
		assert_int_equal(tg_fill(&s[i], 2 * 7 + 3, 1, 5), 0);
		assert_int_equal(tg_write(w, &s[i]), 0);
		tg_free(&s[i]);
	}
	assert_int_equal(tfs_writer_add_phase(w, "init", 0, 0, 0, 7), 0);
	snprintf(p, sizeof(p), "%s/small.trace", dir);
	assert_int_equal(tfs_writer_save(w, p), 0);
	tfs_writer_free(w);
	assert_int_equal(tfs_trace_open(p, &t, NULL), 0);
	txt = read_view(t, 0, TFS_VIEW_TEXT, 0, 2 * 7 + 3, &size);
	snprintf(p, sizeof(p), "%s/small.txt", dir);
	spit(p, (uint8_t *)txt, size);
	free(txt);
	tfs_trace_close(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trace_lossless_round_trip_regular),
		cmocka_unit_test(test_trace_lossless_round_trip_irregular),
		cmocka_unit_test(test_trace_lossy_round_trip_within_bound),
		cmocka_unit_test(test_trace_untimed_round_trip),
		cmocka_unit_test(test_trace_views_match_hand_written_lines),
		cmocka_unit_test(test_trace_val_widths_are_the_widest_printed),
		cmocka_unit_test(test_trace_numbers_print_as_printf),
		cmocka_unit_test(test_trace_chrome_kinds_by_shape),
		cmocka_unit_test(test_trace_identical_streams_stored_once),
		cmocka_unit_test(test_trace_equal_grammars_stored_once),
		cmocka_unit_test(test_trace_shifted_streams_share_patched_values),
		cmocka_unit_test(test_trace_patched_values_damage_refused),
		cmocka_unit_test(test_trace_grammar_blocks_read_as_one_stream),
		cmocka_unit_test(test_trace_grammar_shape_expands_to_the_events),
		cmocka_unit_test(test_trace_grammar_shape_shared_by_equal_grammars),
		cmocka_unit_test(test_trace_phase_views_are_slices),
		cmocka_unit_test(test_trace_signatures_of_kinds_sharing_a_memo),
		cmocka_unit_test(test_trace_writer_rejects_bad_input),
		cmocka_unit_test(test_trace_rval_word_range),
		cmocka_unit_test(test_trace_open_refuses_non_traces),
		cmocka_unit_test(test_trace_golden_renders_committed_text),
		cmocka_unit_test(test_trace_golden_every_truncation_refused),
		cmocka_unit_test(test_trace_golden_every_bit_flip_refused),
		cmocka_unit_test(test_trace_values_save_level_small_only),
		cmocka_unit_test(test_trace_values_save_level_capped),
		cmocka_unit_test(test_trace_newer_version_refused_clearly),
		cmocka_unit_test(test_trace_golden_is_format_1_0),
		cmocka_unit_test(test_trace_reserved_file_busy_until_written),
		cmocka_unit_test(test_trace_allocation_failures_are_clean),
	};

	if (getenv("TFS_WRITE_GOLDEN")) {
		setup(NULL);
		write_golden(getenv("TFS_WRITE_GOLDEN"));
		return 0;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
