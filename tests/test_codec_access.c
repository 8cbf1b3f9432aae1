/*
 * Random access: reads at random byte offsets and event indices of every view must equal
 * the same slice of a full sequential read, for a large trace with many grammar blocks and
 * value blocks, from several threads at once. The views of one kind (tfs_cursor_new_kind())
 * must equal the full read's lines of that kind's events, whole, at random offsets and over
 * random event ranges, with the kinds taken from what the test wrote. The grammar's counts
 * of terminals over ranges equal a count of the events' terminals, and every line fits its
 * terminal's shape (the classes `tracefs grep` relies on). The lines of a set of terminals
 * (tfs_cursor_new_terms()) are the full read's lines of their events, with those events,
 * and reading line by line gives the full read's lines, preads between them or not.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "tfs/reader.h"
#include "tfs/writer.h"
#include "tracegen.h"
#include "values_i.h"

#define N_EVENTS 1000000

struct fixture {
	char path[64];
	struct tfs_trace *t;
	char *full[TFS_VIEW_COUNT];
	uint64_t size[TFS_VIEW_COUNT];
	uint64_t *line_off[TFS_VIEW_COUNT]; /* [N_EVENTS + 1] where each event's line starts */
	uint8_t *kind;			    /* [N_EVENTS] as written */
	uint32_t *term;			    /* [N_EVENTS] event_terms(), NULL until then */
	uint64_t seed;
};

static struct fixture fx;

static int setup(void **state)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_LOSSLESS, .grammar_budget = 1 << 16};
	struct tg_stream s = {.rank = 0, .thread = 0};
	struct tfs_writer *w;
	struct tfs_cursor *c;

	fx.seed = tu_seed("access");
	snprintf(fx.path, sizeof(fx.path), "/tmp/tfs-access-%d.trace", (int)getpid());
	/* irregular stretches inside regular loops: many rules, several grammar blocks */
	if (tfs_writer_new(&o, &w) || tg_declare(w) || tg_fill(&s, N_EVENTS, 1, fx.seed))
		return -1;
	for (uint64_t i = 0; i < N_EVENTS; i += 1000 + i % 777)
		s.ev[i].args[0].u = fx.seed % 1000 + i; /* perturb a signature now and then */
	if (tg_write(w, &s) || tfs_writer_save(w, fx.path))
		return -1;
	fx.kind = malloc(N_EVENTS);
	if (!fx.kind)
		return -1;
	for (uint64_t i = 0; i < N_EVENTS; i++)
		fx.kind[i] = (uint8_t)s.ev[i].kind;
	tfs_writer_free(w);
	tg_free(&s);
	if (tfs_trace_open(fx.path, &fx.t, NULL))
		return -1;
	for (int v = 0; v < TFS_VIEW_COUNT; v++) {
		uint64_t off = 0;

		if (tfs_cursor_new(fx.t, 0, v, 0, N_EVENTS, &c))
			return -1;
		fx.size[v] = tfs_cursor_size(c);
		fx.full[v] = malloc(fx.size[v]);
		while (off < fx.size[v]) {
			ssize_t got = tfs_cursor_pread(c, fx.full[v] + off, 1 << 20, off, NULL);

			if (got <= 0)
				return -1;
			off += (uint64_t)got;
		}
		tfs_cursor_free(c);
		/* the lines, found by their newlines: no line holds a raw one */
		fx.line_off[v] = malloc((N_EVENTS + 1) * sizeof(uint64_t));
		if (!fx.line_off[v])
			return -1;
		fx.line_off[v][0] = 0;
		for (uint64_t i = 0, k = 1; i < fx.size[v]; i++)
			if (fx.full[v][i] == '\n' && k <= N_EVENTS)
				fx.line_off[v][k++] = i + 1;
	}
	return 0;
}

static int teardown(void **state)
{
	free(fx.kind);
	free(fx.term);
	for (int v = 0; v < TFS_VIEW_COUNT; v++)
		free(fx.line_off[v]);
	for (int v = 0; v < TFS_VIEW_COUNT; v++)
		free(fx.full[v]);
	tfs_trace_close(fx.t);
	unlink(fx.path);
	return 0;
}

static void test_access_trace_has_many_blocks(void **state)
{
	struct tfs_stream_info si;

	assert_int_equal(tfs_trace_stream(fx.t, 0, &si), 0);
	assert_true(si.n_blocks >= 2);
	assert_true(si.n_events == N_EVENTS);
	/* every line ends in a newline: the sizes are sums of whole lines */
	for (int v = 0; v < TFS_VIEW_COUNT; v++)
		assert_true(fx.full[v][fx.size[v] - 1] == '\n');
}

/* Random (offset, length) reads with a fresh cursor each time or a reused one. */
static void random_reads(uint64_t seed, int n, int view)
{
	struct tfs_cursor *c;
	char buf[9000];

	assert_int_equal(tfs_cursor_new(fx.t, 0, view, 0, N_EVENTS, &c), 0);
	for (int i = 0; i < n; i++) {
		uint64_t size = fx.size[view];
		uint64_t off = i == 0 ? size - 1 : i == 1 ? size : i == 2 ? size + 5 : 
			       tu_below(&seed, size);
		size_t len = 1 + (size_t)tu_below(&seed, sizeof(buf));
		size_t want = off >= size ? 0 : (size - off < len ? (size_t)(size - off) : len);
		ssize_t got = tfs_cursor_pread(c, buf, len, off, NULL);

		if (got != (ssize_t)want)
			fail_msg("view %d off %llu len %zu: got %zd want %zu", view,
				 (unsigned long long)off, len, got, want);
		if (memcmp(buf, fx.full[view] + off, want) != 0)
			fail_msg("view %d off %llu len %zu: bytes differ (seed %llu)", view,
				 (unsigned long long)off, len, (unsigned long long)seed);
	}
	tfs_cursor_free(c);
}

static void test_access_random_offsets_equal_full_read(void **state)
{
	for (int v = 0; v < TFS_VIEW_COUNT; v++)
		random_reads(fx.seed + (uint64_t)v, 3000, v);
}

static void test_access_event_offsets_are_line_starts(void **state)
{
	uint64_t seed = fx.seed ^ 0x55;
	struct tfs_cursor *c;

	for (int v = 0; v < TFS_VIEW_COUNT; v++) {
		assert_int_equal(tfs_cursor_new(fx.t, 0, v, 0, N_EVENTS, &c), 0);
		for (int i = 0; i < 2000; i++) {
			uint64_t idx = i == 0 ? N_EVENTS - 1 : tu_below(&seed, N_EVENTS);
			uint64_t off, next;

			assert_int_equal(tfs_cursor_event_offset(c, idx, &off), 0);
			assert_int_equal(tfs_cursor_event_offset(c, idx + 1, &next), 0);
			assert_true(off < next && next <= fx.size[v]);
			assert_true(off == 0 || fx.full[v][off - 1] == '\n');
			assert_true(fx.full[v][next - 1] == '\n');
			assert_null(memchr(fx.full[v] + off, '\n', next - off - 1));
		}
		assert_int_equal(tfs_cursor_event_offset(c, N_EVENTS + 1, &(uint64_t){0}),
				 -EINVAL);
		tfs_cursor_free(c);
	}
}

static void test_access_sub_ranges_are_slices(void **state)
{
	uint64_t seed = fx.seed ^ 0x77;

	for (int i = 0; i < 200; i++) {
		uint64_t first = tu_below(&seed, N_EVENTS), n = tu_below(&seed, N_EVENTS - first + 1);
		int v = i % TFS_VIEW_COUNT;
		struct tfs_cursor *whole, *part;
		uint64_t off, end;
		char buf[512];

		assert_int_equal(tfs_cursor_new(fx.t, 0, v, 0, N_EVENTS, &whole), 0);
		assert_int_equal(tfs_cursor_event_offset(whole, first, &off), 0);
		assert_int_equal(tfs_cursor_event_offset(whole, first + n, &end), 0);
		assert_int_equal(tfs_cursor_new(fx.t, 0, v, first, n, &part), 0);
		assert_true(tfs_cursor_size(part) == end - off);
		if (n) {
			uint64_t at = tu_below(&seed, end - off);
			ssize_t got = tfs_cursor_pread(part, buf, sizeof(buf), at, NULL);

			assert_true(got > 0);
			assert_memory_equal(buf, fx.full[v] + off + at, (size_t)got);
		}
		tfs_cursor_free(part);
		tfs_cursor_free(whole);
	}
}

/* The lines of @view of the events of @kind in [@first, @first + @n), from the full read. */
static char *kind_lines(int view, uint32_t kind, uint64_t first, uint64_t n, uint64_t *len,
			uint64_t *events)
{
	const uint64_t *lo = fx.line_off[view];
	char *out = malloc(fx.size[view] + 1);

	assert_non_null(out);
	*len = *events = 0;
	for (uint64_t i = first; i < first + n; i++) {
		if (fx.kind[i] != kind)
			continue;
		memcpy(out + *len, fx.full[view] + lo[i], lo[i + 1] - lo[i]);
		*len += lo[i + 1] - lo[i];
		++*events;
	}
	return out;
}

/* Bytes of @kind's lines over [@first, @first + @n): terminal counts times line lengths. */
static uint64_t counted_bytes(int view, uint32_t kind, uint64_t first, uint64_t n)
{
	struct tfs_trace_info ti;
	uint64_t *counts, bytes = 0, len;
	uint32_t k;

	tfs_trace_get_info(fx.t, &ti);
	counts = calloc(ti.n_terminals + 1, sizeof(*counts));
	assert_non_null(counts);
	assert_int_equal(tfs_trace_term_counts_range(fx.t, 0, first, n, counts), 0);
	for (uint32_t t = 0; t < ti.n_terminals; t++) {
		assert_int_equal(tfs_trace_term_kind(fx.t, t, &k), 0);
		assert_int_equal(tfs_trace_term_line_bytes(fx.t, t, view, &len), 0);
		if (k == kind)
			bytes += counts[t] * len;
	}
	assert_int_equal(tfs_trace_term_line_bytes(fx.t, ti.n_terminals, view, &len), -ENOENT);
	assert_int_equal(tfs_trace_term_line_bytes(fx.t, 0, TFS_VIEW_COUNT, &len), -EINVAL);
	free(counts);
	return bytes;
}

/* A kind view over [@first, @first + @n): size, count, whole read and random slices. */
static void check_kind_view(int view, uint32_t kind, uint64_t first, uint64_t n,
			    uint64_t *seed, int n_slices)
{
	uint64_t len, events, got_events, got_bytes;
	char *want = kind_lines(view, kind, first, n, &len, &events);
	char *buf = malloc(len + 9000);
	struct tfs_cursor *c;
	uint64_t off = 0;

	assert_non_null(buf);
	assert_int_equal(tfs_trace_kind_view_size(fx.t, 0, kind, view, first, n, &got_events,
						  &got_bytes), 0);
	assert_true(got_events == events && got_bytes == len);
	assert_true(counted_bytes(view, kind, first, n) == len);
	assert_int_equal(tfs_cursor_new_kind(fx.t, 0, kind, view, first, n, &c), 0);
	assert_true(tfs_cursor_size(c) == len);
	while (off < len) { /* sequential, in odd-sized pieces */
		ssize_t got = tfs_cursor_pread(c, buf + off, 1 + (size_t)tu_below(seed, 70000),
					       off, NULL);

		assert_true(got > 0);
		off += (uint64_t)got;
	}
	assert_int_equal(tfs_cursor_pread(c, buf, 10, len, NULL), 0);
	if (memcmp(buf, want, len) != 0)
		fail_msg("kind %u view %d [%llu, +%llu): whole read differs", kind, view,
			 (unsigned long long)first, (unsigned long long)n);
	for (int i = 0; i < n_slices && len; i++) {
		uint64_t at = i == 0 ? len - 1 : tu_below(seed, len);
		size_t ask = 1 + (size_t)tu_below(seed, 9000);
		size_t exp = len - at < ask ? (size_t)(len - at) : ask;
		ssize_t got = tfs_cursor_pread(c, buf, ask, at, NULL);

		if (got != (ssize_t)exp || memcmp(buf, want + at, exp) != 0)
			fail_msg("kind %u view %d: pread(%zu, %llu) wrong", kind, view, ask,
				 (unsigned long long)at);
	}
	assert_int_equal(tfs_cursor_event(c, first, &(struct tfs_event){0}, NULL), -EINVAL);
	tfs_cursor_free(c);
	free(buf);
	free(want);
}

static void test_access_kind_views_are_filtered_lines(void **state)
{
	uint64_t seed = fx.seed ^ 0x99;

	for (uint32_t k = 0; k < TG_NKINDS; k++)
		for (int v = 0; v < TFS_VIEW_COUNT; v++)
			check_kind_view(v, k, 0, N_EVENTS, &seed, 2000);
}

static void test_access_kind_sub_ranges(void **state)
{
	uint64_t seed = fx.seed ^ 0xbb;

	for (int i = 0; i < 60; i++) {
		uint64_t first = tu_below(&seed, N_EVENTS);
		uint64_t n = tu_below(&seed, (i % 3 ? 5000 : N_EVENTS - first) + 1);

		if (n > N_EVENTS - first)
			n = N_EVENTS - first;
		check_kind_view(i % TFS_VIEW_COUNT, (uint32_t)(i % TG_NKINDS), first, n, &seed, 50);
	}
	assert_int_equal(tfs_cursor_new_kind(fx.t, 0, 99, 0, 0, 1, &(struct tfs_cursor *){0}),
			 -ENOENT);
	assert_int_equal(tfs_trace_kind_view_size(fx.t, 0, 0, 0, N_EVENTS, 1, NULL,
						  &(uint64_t){0}), -EINVAL);
}

/*
 * The terminal of every event, from the cursor (for the grammar's counts and shapes), read
 * at the first call and kept in fx.term (borrowed).
 */
static const uint32_t *event_terms(void)
{
	uint32_t *term;
	struct tfs_cursor *c;
	struct tfs_event ev;

	if (fx.term)
		return fx.term;
	term = malloc(N_EVENTS * sizeof(*term));
	assert_non_null(term);
	assert_int_equal(tfs_cursor_new(fx.t, 0, TFS_VIEW_TEXT, 0, N_EVENTS, &c), 0);
	for (uint64_t i = 0; i < N_EVENTS; i++) {
		assert_int_equal(tfs_cursor_event(c, i, &ev, NULL), 0);
		term[i] = ev.terminal;
	}
	tfs_cursor_free(c);
	fx.term = term;
	return term;
}

static void test_access_term_counts_of_ranges(void **state)
{
	struct tfs_trace_info ti;
	const uint32_t *term = event_terms();
	uint64_t seed = fx.seed ^ 0xcc, *got, *want;

	tfs_trace_get_info(fx.t, &ti);
	got = calloc(ti.n_terminals, sizeof(*got));
	want = calloc(ti.n_terminals, sizeof(*want));
	assert_non_null(got);
	assert_non_null(want);
	for (int i = 0; i < 300; i++) {
		uint64_t first = i == 0 ? 0 : tu_below(&seed, N_EVENTS);
		uint64_t n = i == 0 ? N_EVENTS : tu_below(&seed, (i % 2 ? 3000 : N_EVENTS - first) + 1);

		if (n > N_EVENTS - first)
			n = N_EVENTS - first;
		memset(want, 0, ti.n_terminals * sizeof(*want));
		for (uint64_t e = first; e < first + n; e++)
			want[term[e]]++;
		assert_int_equal(tfs_trace_term_counts_range(fx.t, 0, first, n, got), 0);
		if (memcmp(got, want, ti.n_terminals * sizeof(*got)) != 0)
			fail_msg("terminal counts of [%llu, +%llu) differ", (unsigned long long)first,
				 (unsigned long long)n);
	}
	assert_int_equal(tfs_trace_term_counts_range(fx.t, 0, N_EVENTS, 1, got), -EINVAL);
	free(got);
	free(want);
}

/* Whether @line (@len bytes, no newline) is @shape with each hole filled from its class. */
static bool fits(const char *shape, size_t slen, const char *line, size_t len)
{
	unsigned char *live = calloc(slen + 1, 1);
	bool ok;

	assert_non_null(live);
	live[0] = 1;
	for (size_t j = 0; j < slen; j++) /* holes may be empty */
		if (live[j] && shape[j] <= TFS_SHAPE_PAD)
			live[j + 1] = 1;
	for (size_t k = 0; k < len; k++) {
		char c = line[k];

		for (size_t j = slen + 1; j-- > 0;) {
			bool from = live[j];
			char h = j < slen ? shape[j] : 0;

			live[j] = 0;
			if (!from || j == slen)
				continue;
			if (h == TFS_SHAPE_NUM)
				live[j] = (c >= '0' && c <= '9') || c == '.' || c == '-' || c == ' ';
			else if (h == TFS_SHAPE_HEX)
				live[j] = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == 'x';
			else if (h == TFS_SHAPE_PAD)
				live[j] = c == ' ';
			else if (h == TFS_SHAPE_ANY)
				live[j] = c != '\n';
			else if (h == c)
				live[j + 1] = 1;
		}
		for (size_t j = 0; j < slen; j++)
			if (live[j] && shape[j] <= TFS_SHAPE_PAD)
				live[j + 1] = 1;
	}
	ok = live[slen];
	free(live);
	return ok;
}

static void test_access_lines_fit_their_shapes(void **state)
{
	const uint32_t *term = event_terms();
	const uint64_t *lo = fx.line_off[TFS_VIEW_TEXT];
	char shape[4096];

	for (uint64_t i = 0; i < N_EVENTS; i += 1 + i % 7) {
		ssize_t n = tfs_trace_term_shape(fx.t, term[i], shape, sizeof(shape));

		assert_true(n > 0 && (size_t)n < sizeof(shape) && shape[n - 1] == TFS_SHAPE_PAD);
		if (!fits(shape, (size_t)n, fx.full[TFS_VIEW_TEXT] + lo[i], lo[i + 1] - lo[i] - 1))
			fail_msg("line of event %llu does not fit the shape of terminal %u",
				 (unsigned long long)i, term[i]);
		/* nor does it leave the shape its rank prints */
		n = tfs_trace_term_shape_rank(fx.t, term[i], 0, shape, sizeof(shape));
		assert_true(n > 0 && (size_t)n < sizeof(shape) && shape[n - 1] == TFS_SHAPE_PAD);
		if (!fits(shape, (size_t)n, fx.full[TFS_VIEW_TEXT] + lo[i], lo[i + 1] - lo[i] - 1))
			fail_msg("line of event %llu does not fit rank 0's shape of terminal %u",
				 (unsigned long long)i, term[i]);
		/* nor does it fit the shape of a call of another kind: shapes tell calls apart */
		for (uint64_t j = i + 1; j < N_EVENTS && j < i + 50; j++) {
			if (fx.kind[j] == fx.kind[i])
				continue;
			n = tfs_trace_term_shape(fx.t, term[j], shape, sizeof(shape));
			assert_false(fits(shape, (size_t)n, fx.full[TFS_VIEW_TEXT] + lo[i],
					  lo[i + 1] - lo[i] - 1));
			break;
		}
	}
	assert_int_equal(tfs_trace_term_shape(fx.t, UINT32_MAX, shape, sizeof(shape)), -ENOENT);
	assert_int_equal(tfs_trace_term_shape_rank(fx.t, term[0], UINT32_MAX, shape, sizeof(shape)),
			 -ENOENT);
}

/*
 * Line by line (each step a walk of the grammar) equals the full sequential read (which
 * steps through the terminals its value blocks listed), with preads between lines leaving
 * the cursor's walker wherever they read: the next line goes on from there.
 */
static void test_access_next_lines_equal_full_read(void **state)
{
	const uint64_t *lo = fx.line_off[TFS_VIEW_TEXT];
	const uint32_t *term = event_terms();
	const uint64_t n = 60000; /* events of a window: past several value blocks */
	uint64_t seed = fx.seed ^ 0x11;
	char buf[9000];

	/* windows at random events, the first at the start, the last at the end */
	for (int k = 0; k < 4; k++) {
		const uint64_t first = k == 0 ? 0 : k == 3 ? N_EVENTS - n :
				       tu_below(&seed, N_EVENTS - n);
		struct tfs_cursor *c;
		struct tfs_line l;

		assert_int_equal(tfs_cursor_new(fx.t, 0, TFS_VIEW_TEXT, first, n, &c), 0);
		for (uint64_t i = first; i < first + n; i++) {
			assert_int_equal(tfs_cursor_next_line(c, &l, NULL), 1);
			if (l.index != i || l.term != term[i] || l.len != lo[i + 1] - lo[i] ||
			    memcmp(l.text, fx.full[TFS_VIEW_TEXT] + lo[i], l.len) != 0)
				fail_msg("line of event %llu differs from the full read (seed %llu)",
					 (unsigned long long)i, (unsigned long long)fx.seed);
			if (i % 997 == 0) {
				const uint64_t off = tu_below(&seed, lo[first + n] - lo[first]);
				const ssize_t got = tfs_cursor_pread(c, buf, sizeof(buf), off, NULL);

				assert_true(got > 0);
				assert_memory_equal(buf, fx.full[TFS_VIEW_TEXT] + lo[first] + off,
						    (size_t)got);
			}
		}
		assert_int_equal(tfs_cursor_next_line(c, &l, NULL), 0);
		tfs_cursor_free(c);
	}
}

/* A cursor over a set of terminals: its lines, in order with their events, then its bytes. */
static void check_terms_view(const uint32_t *term, const uint8_t *set, uint64_t first,
			     uint64_t n)
{
	const uint64_t *lo = fx.line_off[TFS_VIEW_TEXT];
	struct tfs_cursor *c;
	struct tfs_line l;
	uint64_t size = 0, off = 0;
	char buf[4096];

	assert_int_equal(tfs_cursor_new_terms(fx.t, 0, set, TFS_VIEW_TEXT, first, n, &c), 0);
	for (uint64_t i = first; i < first + n; i++) {
		if (!set[term[i]])
			continue;
		assert_int_equal(tfs_cursor_next_line(c, &l, NULL), 1);
		if (l.index != i || l.term != term[i] || l.len != lo[i + 1] - lo[i] ||
		    memcmp(l.text, fx.full[TFS_VIEW_TEXT] + lo[i], l.len) != 0)
			fail_msg("terms view [%llu, +%llu): line of event %llu wrong (got %llu)",
				 (unsigned long long)first, (unsigned long long)n,
				 (unsigned long long)i, (unsigned long long)l.index);
		/*
		 * a pread between lines moves neither: after every 5th event of a sub-range,
		 * every 97th of the whole trace (each pread costs a block decode; 97 is prime
		 * to the 4096-event value blocks, so the preads still land at every phase)
		 */
		if (i % (n > 100000 ? 97 : 5) == 0)
			assert_true(tfs_cursor_pread(c, buf, 7, size / 2, NULL) >= 0);
		size += l.len;
	}
	assert_int_equal(tfs_cursor_next_line(c, &l, NULL), 0);
	assert_true(tfs_cursor_size(c) == size);
	for (uint64_t i = first; i < first + n && off < size; i++) {
		ssize_t got;
		size_t line_len;

		if (!set[term[i]])
			continue;
		line_len = (size_t)(lo[i + 1] - lo[i]);
		assert_true(line_len <= sizeof(buf));
		got = tfs_cursor_pread(c, buf, line_len, off, NULL);
		assert_true(got == (ssize_t)line_len);
		assert_memory_equal(buf, fx.full[TFS_VIEW_TEXT] + lo[i], line_len);
		off += line_len;
	}
	tfs_cursor_free(c);
}

static void test_access_terms_views_are_filtered_lines(void **state)
{
	const uint32_t *term = event_terms();
	struct tfs_trace_info ti;
	uint64_t seed = fx.seed ^ 0x7e;
	uint8_t *set;

	tfs_trace_get_info(fx.t, &ti);
	set = calloc(ti.n_terminals, 1);
	assert_non_null(set);
	for (int i = 0; i < 8; i++) {
		uint64_t first = i < 2 ? 0 : tu_below(&seed, N_EVENTS);
		uint64_t n = i < 2 ? N_EVENTS : tu_below(&seed, 100000) + 1;

		if (n > N_EVENTS - first)
			n = N_EVENTS - first;
		/* a rare terminal alone, then random sets */
		for (uint32_t k = 0; k < ti.n_terminals; k++)
			set[k] = i == 0 ? k == term[N_EVENTS / 2] : tu_below(&seed, 4) == 0;
		check_terms_view(term, set, first, n);
	}
	assert_int_equal(tfs_cursor_new_terms(fx.t, 0, NULL, 0, 0, 1, &(struct tfs_cursor *){0}),
			 -EINVAL);
	free(set);
}

static void *reader_thread(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg;

	random_reads(seed, 500, (int)(seed % TFS_VIEW_COUNT));
	return NULL;
}

static void test_access_concurrent_cursors_agree(void **state)
{
	pthread_t th[8];

	for (uintptr_t i = 0; i < 8; i++)
		assert_int_equal(pthread_create(&th[i], NULL, reader_thread,
						(void *)(uintptr_t)(fx.seed + i)), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
}

/* One read of @len bytes at @off of the text view, through a fresh cursor. */
static void read_fresh(uint64_t off, size_t len)
{
	struct tfs_cursor *c;
	char buf[512];

	assert_true(len <= sizeof(buf));
	assert_int_equal(tfs_cursor_new(fx.t, 0, TFS_VIEW_TEXT, 0, N_EVENTS, &c), 0);
	assert_int_equal(tfs_cursor_pread(c, buf, len, off, NULL), (ssize_t)len);
	assert_memory_equal(buf, fx.full[TFS_VIEW_TEXT] + off, len);
	tfs_cursor_free(c);
}

/*
 * The trace's cache of decoded blocks: a second cursor jumping where a first one did copies
 * the block (one hit, no decode); reads stay equal to the full read with the cache off, and
 * with one so small that blocks are dropped all the time, from 8 threads at once; it never
 * holds more than its budget.
 */
static void test_access_block_cache(void **state)
{
	const uint64_t mid = fx.line_off[TFS_VIEW_TEXT][N_EVENTS / 2 + 17];
	struct tfs_cache_stats a, b;
	pthread_t th[8];
	size_t one;

	tfs_trace_set_block_cache(fx.t, 0); /* emptied */
	tfs_trace_set_block_cache(fx.t, (size_t)32 << 20);
	read_fresh(mid, 100);
	tfs_trace_block_cache_stats(fx.t, &a);
	assert_true(a.blocks == 1 && a.bytes > 0 && a.bytes <= a.budget);
	one = (size_t)a.bytes;
	read_fresh(mid, 100);
	tfs_trace_block_cache_stats(fx.t, &b);
	assert_true(b.hits == a.hits + 1 && b.misses == a.misses && b.kept == a.kept);
	/* a read from where a block starts (as decoding ahead reads) keeps nothing */
	read_fresh(fx.line_off[TFS_VIEW_TEXT][3 * VAL_DEFAULT_BLOCK_EVENTS], 100);
	tfs_trace_block_cache_stats(fx.t, &a);
	assert_true(a.misses == b.misses + 1 && a.kept == b.kept && a.blocks == 1);

	/* off: empty, and reads decode every block */
	tfs_trace_set_block_cache(fx.t, 0);
	tfs_trace_block_cache_stats(fx.t, &a);
	assert_true(a.blocks == 0 && a.bytes == 0 && a.budget == 0);
	random_reads(fx.seed ^ 0xcace, 300, TFS_VIEW_TEXT);
	tfs_trace_block_cache_stats(fx.t, &b);
	assert_true(b.hits == a.hits && b.kept == a.kept && b.misses > a.misses);
	assert_true(b.blocks == 0 && b.bytes == 0);

	/* a budget of about three blocks: dropped and taken again while 8 threads read */
	tfs_trace_set_block_cache(fx.t, 3 * one);
	for (uintptr_t i = 0; i < 8; i++)
		assert_int_equal(pthread_create(&th[i], NULL, reader_thread,
						(void *)(uintptr_t)(fx.seed + 100 + i)), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	tfs_trace_block_cache_stats(fx.t, &a);
	assert_true(a.kept > b.kept + a.blocks); /* some were dropped */
	assert_true(a.bytes <= a.budget);
	tfs_trace_set_block_cache(fx.t, (size_t)32 << 20);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_access_trace_has_many_blocks),
		cmocka_unit_test(test_access_random_offsets_equal_full_read),
		cmocka_unit_test(test_access_event_offsets_are_line_starts),
		cmocka_unit_test(test_access_sub_ranges_are_slices),
		cmocka_unit_test(test_access_concurrent_cursors_agree),
		cmocka_unit_test(test_access_block_cache),
		cmocka_unit_test(test_access_kind_views_are_filtered_lines),
		cmocka_unit_test(test_access_kind_sub_ranges),
		cmocka_unit_test(test_access_term_counts_of_ranges),
		cmocka_unit_test(test_access_lines_fit_their_shapes),
		cmocka_unit_test(test_access_terms_views_are_filtered_lines),
		cmocka_unit_test(test_access_next_lines_equal_full_read),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
