/*
 * Backtraces and symbols in traces (FORMAT.md §8 rank table, §10, §11): the symbols payload
 * against the spec's example bytes and hostile payloads, seeded whole-trace round trips over
 * several ranks, first use from several threads at once, a golden trace with its rendered
 * text, every truncation and bit flip of it, a newer minor, and allocation failure in turn.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bytes_i.h"
#include "crc32c_i.h"
#include "symtab_i.h"
#include "testfiles.h"
#include "testutil.h"
#include "tfs/reader.h"
#include "tfs/writer.h"

#ifndef TFS_TEST_DATA
#define TFS_TEST_DATA "tests/data"
#endif

static char tmp_path[64];

static int setup(void **state)
{
	snprintf(tmp_path, sizeof(tmp_path), "/tmp/tfs-stacks-%d.trace", (int)getpid());
	return 0;
}

static int teardown(void **state)
{
	unlink(tmp_path);
	return 0;
}



/* --- the symbols payload -------------------------------------------------------------- */

/* FORMAT.md §11.2, byte for byte, one line per line of the spec. */
// clang-format off
static const uint8_t spec_example[] = {
	0x04, 0x04, 'm', 'a', 'i', 'n', 0x03, 'a', '.', 'c', 0x01, 'f', 0x03, 'a', '.', 'h',
	0x02,
	0x80, 0xA0, 0x80, 0x02, 0x02, 0x00, 0x01, 0x0A, 0x02, 0x03, 0x03,
	0x40, 0x01, 0x00, 0x01, 0x0C,
};
// clang-format on

static void test_stacks_symbols_match_spec_example(void **state)
{
	const struct tfs_src_frame at_main[] = {{"main", "a.c", 12}};
	const struct tfs_src_frame inlined[] = {{"main", "a.c", 10}, {"f", "a.h", 3}};
	const struct tfs_src_frame *fr;
	struct symenc e;
	struct symtab st;
	struct tfs_buf b;

	/* added out of address order: the writer sorts */
	symenc_init(&e);
	buf_init(&b);
	assert_int_equal(symenc_add(&e, 0x401000, inlined, 2), 0);
	assert_int_equal(symenc_add(&e, 0x401040, at_main, 1), 0);
	assert_int_equal(symenc_add(&e, 0x401040, at_main, 1), -EEXIST);
	assert_int_equal(symenc_finish(&e, &b), 0);
	assert_int_equal(b.len, sizeof(spec_example));
	assert_memory_equal(b.data, spec_example, sizeof(spec_example));
	buf_fini(&b);
	symenc_fini(&e);

	assert_int_equal(symtab_decode(&st, spec_example, sizeof(spec_example), 0, NULL), 0);
	assert_int_equal(symtab_find(&st, 0x401000, &fr), 2);
	assert_string_equal(fr[0].function, "main");
	assert_string_equal(fr[0].file, "a.c");
	assert_int_equal(fr[0].line, 10);
	assert_string_equal(fr[1].function, "f");
	assert_string_equal(fr[1].file, "a.h");
	assert_int_equal(fr[1].line, 3);
	assert_int_equal(symtab_find(&st, 0x401040, &fr), 1);
	assert_int_equal(fr[0].line, 12);
	assert_int_equal(symtab_find(&st, 0x401020, &fr), 0);
	assert_null(fr);
	assert_int_equal(symtab_find(&st, 0, &fr), 0);
	assert_int_equal(symtab_find(&st, UINT64_MAX, &fr), 0);
	symtab_fini(&st);
}

static void expect_bad_payload(const uint8_t *p, size_t n, const char *why)
{
	struct tfs_diag d;
	struct symtab st;
	int rc;

	memset(&d, 0, sizeof(d));
	rc = symtab_decode(&st, p, n, 4242, &d);
	if (rc != -TFS_ECORRUPT)
		fail_msg("%s: rc=%d, expected corruption", why, rc);
	assert_string_equal(d.section, "symbols");
	assert_true(d.offset == 4242);
	assert_true(d.reason[0] != 0);
}

/* Each check of FORMAT.md §11.1, one payload each. */
static void test_stacks_symbols_hostile_payloads_refused(void **state)
{
	static const struct {
		const char *why;
		uint8_t len;
		uint8_t p[24];
	} bad[] = {
	    // clang-format off
		{"string count past the payload", 2, {0x09, 0x00}},
		{"NUL in a string", 6, {0x01, 0x02, 'a', 0x00, 0x00, 0x00}},
		{"address count past a fifth", 9, {0x01, 0x01, 'a', 0x02, 0x05, 0x01, 0, 0, 0}},
		{"repeated address", 14,
		 {0x01, 0x01, 'a', 0x02, 0x05, 0x01, 0, 0, 0, 0x00, 0x01, 0, 0, 0}},
		{"zero frames", 9, {0x01, 0x01, 'a', 0x01, 0x05, 0x00, 0, 0, 0}},
		{"65 frames", 9, {0x01, 0x01, 'a', 0x01, 0x05, 0x41, 0, 0, 0}},
		{"function index", 9, {0x01, 0x01, 'a', 0x01, 0x05, 0x01, 0x01, 0, 0}},
		{"file index", 9, {0x01, 0x01, 'a', 0x01, 0x05, 0x01, 0, 0x01, 0}},
		{"index without strings", 7, {0x00, 0x01, 0x05, 0x01, 0, 0, 0}},
		{"line past 2^32", 13,
		 {0x01, 0x01, 'a', 0x01, 0x05, 0x01, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x10}},
		{"trailing byte", 10, {0x01, 0x01, 'a', 0x01, 0x05, 0x01, 0, 0, 0, 0}},
		{"address past 2^64", 22,
		 {0x01, 0x00, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
		  0x01, 0, 0, 0, 0x01, 0x01, 0, 0, 0}},
		{"truncated varint", 3, {0x01, 0x81, 0x80}},
	    // clang-format on
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_bad_payload(bad[i].p, bad[i].len, bad[i].why);
	/* the largest valid values next to the refused ones */
	{
		// clang-format off
		const uint8_t ok[] = {0x01, 0x01, 'a', 0x01, 0x05, 0x01, 0, 0, 0xff, 0xff, 0xff, 0xff,
				      0x0f};
		// clang-format on
		struct symtab st;
		const struct tfs_src_frame *fr;

		assert_int_equal(symtab_decode(&st, ok, sizeof(ok), 0, NULL), 0);
		assert_int_equal(symtab_find(&st, 5, &fr), 1);
		assert_true(fr[0].line == UINT32_MAX);
		symtab_fini(&st);
	}
}

/* Every proper prefix is refused; every bit flip is refused or decodes to something sane. */
static void test_stacks_symbols_truncations_and_flips(void **state)
{
	uint8_t p[sizeof(spec_example)];
	struct symtab st;

	for (size_t n = 0; n < sizeof(spec_example); n++)
		expect_bad_payload(spec_example, n, "truncation");
	memcpy(p, spec_example, sizeof(p));
	for (size_t i = 0; i < sizeof(p) * 8; i++) {
		p[i / 8] ^= (uint8_t)(1u << (i % 8));
		if (symtab_decode(&st, p, sizeof(p), 0, NULL) == 0) {
			for (uint64_t a = 0; a < st.n_addrs; a++) {
				const struct tfs_src_frame *fr;
				uint32_t n = symtab_find(&st, st.addrs[a], &fr);

				assert_true(n >= 1 && n <= 64);
				for (uint32_t f = 0; f < n; f++)
					assert_true(strlen(fr[f].function) < sizeof(p));
			}
			symtab_fini(&st);
		}
		p[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
}

/* --- whole traces --------------------------------------------------------------------- */

// clang-format off
static const char *const fn_names[] = {
	"main", "run", "step", "std::vector<int>::push_back", "parse_line", "libc.so.6+0x2a1b0",
	"compute", "operator new(unsigned long)", "hash_insert", "inline_helper",
};
static const char *const file_names[] = {"", "main.c", "run.c", "/usr/include/c++/12/vector",
					  "lib/hash.h"};
// clang-format on

#define N_NAMES (sizeof(fn_names) / sizeof(fn_names[0]))
#define N_FILES (sizeof(file_names) / sizeof(file_names[0]))
#define POOL 300

/* What one rank was given, kept to compare with what the reader returns. */
struct mrank {
	uint32_t rank;
	uint32_t n_bt;
	uint64_t *frames;
	uint32_t *off; /* [n_bt + 1] */
	uint64_t pool[POOL];
	bool symbolised[POOL];
	uint32_t n_src[POOL];
	struct tfs_src_frame src[POOL][8];
};

/* Stacks that share prefixes: each pops a few frames of the previous one and pushes a few. */
static void gen_rank(struct mrank *m, uint32_t rank, uint32_t n_bt, uint64_t *rng)
{
	uint64_t cur[1024];
	uint32_t depth = 0, total = 0, cap = 4096;

	m->rank = rank;
	m->n_bt = n_bt;
	m->off = calloc(n_bt + 1, sizeof(*m->off));
	m->frames = malloc(cap * sizeof(*m->frames));
	assert_non_null(m->off);
	assert_non_null(m->frames);
	for (uint32_t i = 0; i < POOL; i++) {
		/* a shared executable and a library mapped at a rank-specific address */
		m->pool[i] = i < POOL / 2 ? 0x401000 + 0x31 * i
					  : 0x7f0000000000 + rank * 0x1000000 + 0x57 * i;
		m->symbolised[i] = tu_below(rng, 10) < 8;
		m->n_src[i] = tu_below(rng, 4) ? 1 : 2 + (uint32_t)tu_below(rng, 7);
		for (uint32_t f = 0; f < m->n_src[i]; f++) {
			m->src[i][f].function = fn_names[tu_below(rng, N_NAMES)];
			m->src[i][f].file = file_names[tu_below(rng, N_FILES)];
			m->src[i][f].line = tu_below(rng, 5) ? (uint32_t)tu_below(rng, 3000) : 0;
		}
	}
	for (uint32_t i = 0; i < n_bt; i++) {
		uint32_t pop = (uint32_t)tu_below(rng, depth + 1) / 2,
			 push = (uint32_t)tu_below(rng, 6);

		depth -= pop;
		if (i == n_bt / 2)
			push = 1024 - depth; /* one backtrace at the maximum depth */
		if (i == n_bt / 3)
			depth = push = 0; /* and an empty one */
		for (uint32_t k = 0; k < push && depth < 1024; k++) {
			/* recursion: the same return address several times in a row */
			cur[depth] = depth && tu_below(rng, 8) == 0 ? cur[depth - 1]
								    : m->pool[tu_below(rng, POOL)];
			depth++;
		}
		while (total + depth > cap) {
			cap *= 2;
			m->frames = realloc(m->frames, cap * sizeof(*m->frames));
			assert_non_null(m->frames);
		}
		memcpy(m->frames + total, cur, depth * sizeof(*cur));
		total += depth;
		m->off[i + 1] = total;
	}
}

static void free_rank(struct mrank *m)
{
	free(m->frames);
	free(m->off);
}

static int feed_rank(struct tfs_writer *w, const struct mrank *m, uint64_t *rng)
{
	uint32_t order[POOL];
	int rc = 0;

	for (uint32_t i = 0; i < m->n_bt && rc == 0; i++)
		rc = tfs_writer_add_backtrace(w, m->rank, i, m->frames + m->off[i],
					      m->off[i + 1] - m->off[i]);
	/* symbols in a shuffled order: the section is sorted by the writer */
	for (uint32_t i = 0; i < POOL; i++)
		order[i] = i;
	for (uint32_t i = POOL - 1; i > 0 && rng; i--) {
		uint32_t j = (uint32_t)tu_below(rng, i + 1), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (uint32_t k = 0; k < POOL && rc == 0; k++) {
		uint32_t i = order[k];

		if (m->symbolised[i])
			rc = tfs_writer_add_symbol(w, m->rank, m->pool[i], m->src[i], m->n_src[i]);
	}
	return rc;
}

static void check_rank(struct tfs_trace *t, const struct mrank *m)
{
	const struct tfs_src_frame *fr;
	const uint64_t *frames;
	uint32_t n;

	assert_true(tfs_trace_n_backtraces(t, m->rank) == m->n_bt);
	for (uint32_t i = 0; i < m->n_bt; i++) {
		assert_int_equal(tfs_trace_backtrace(t, m->rank, i, &frames, &n, NULL), 0);
		assert_int_equal(n, m->off[i + 1] - m->off[i]);
		if (n)
			assert_memory_equal(frames, m->frames + m->off[i], n * sizeof(*frames));
	}
	assert_int_equal(tfs_trace_backtrace(t, m->rank, m->n_bt, &frames, &n, NULL), -ENOENT);
	for (uint32_t i = 0; i < POOL; i++) {
		int rc = tfs_trace_symbol(t, m->rank, m->pool[i], &fr, &n, NULL);

		if (!m->symbolised[i]) {
			assert_int_equal(rc, -ENOENT);
			continue;
		}
		assert_int_equal(rc, 0);
		assert_int_equal(n, m->n_src[i]);
		for (uint32_t f = 0; f < n; f++) {
			assert_string_equal(fr[f].function, m->src[i][f].function);
			assert_string_equal(fr[f].file, m->src[i][f].file);
			assert_int_equal(fr[f].line, m->src[i][f].line);
		}
	}
	assert_int_equal(tfs_trace_symbol(t, m->rank, 0x10, &fr, &n, NULL), -ENOENT);
}

/* An alloc kind whose events name their backtrace through a `stack` SYM argument. */
static const struct tfs_arg_desc alloc_args[] = {
    {"size", TFS_TYPE_U64, TFS_ENC_VAL, TFS_ARG_BYTES, NULL},
    {"stack", TFS_TYPE_U64, TFS_ENC_SYM, 0, "stack"},
    {"ptr", TFS_TYPE_HEX, TFS_ENC_VAL, TFS_ARG_RESULT, NULL},
};
static const struct tfs_kind_desc alloc_kind = {"malloc", "alloc", 3, alloc_args};

static void test_stacks_round_trip_seeded(void **state)
{
	static const uint32_t ranks[] = {0, 1, 3};
	static const uint32_t counts[] = {400, 1, 2500};
	uint64_t seed = tu_seed("stacks_round_trip"), rng = seed;
	struct mrank *m = calloc(3, sizeof(*m));
	struct tfs_trace_info info;
	struct tfs_writer *w;
	struct tfs_trace *t;
	struct tfs_diag d;
	const uint64_t *frames;
	uint32_t n;

	assert_non_null(m);
	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	for (int r = 0; r < 3; r++) {
		gen_rank(&m[r], ranks[r], counts[r], &rng);
		assert_int_equal(feed_rank(w, &m[r], &rng), 0);
	}
	/* rank 2 has a stream but neither backtraces nor symbols */
	{
		uint32_t kind;
		struct tfs_wstream *s;
		union tfs_arg a[3] = {{.u = 16}, {.u = 0}, {.u = 0x1000}};

		assert_int_equal(tfs_writer_add_kind(w, &alloc_kind, &kind), 0);
		assert_int_equal(tfs_writer_stream_new(w, 2, 0, &s), 0);
		assert_int_equal(tfs_wstream_append(s, kind, 10, 5, a), 0);
	}
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	tfs_writer_free(w);

	assert_int_equal(tfs_trace_open(tmp_path, &t, &d), 0);
	tfs_trace_get_info(t, &info);
	assert_int_equal(info.version_major, TFS_FORMAT_MAJOR);
	assert_int_equal(info.version_minor, TFS_FORMAT_MINOR);
	assert_int_equal(info.n_ranks, 4); /* rank 3 has backtraces and no stream */
	for (int r = 0; r < 3; r++)
		check_rank(t, &m[r]);
	assert_true(tfs_trace_n_backtraces(t, 2) == 0);
	assert_int_equal(tfs_trace_backtrace(t, 2, 0, &frames, &n, NULL), -ENOENT);
	assert_int_equal(tfs_trace_backtrace(t, 77, 0, &frames, &n, NULL), -ENOENT);
	assert_int_equal(tfs_trace_verify(t, &d), 0);
	{
		uint64_t bt_bytes = 0, bt_frames = 0;

		for (uint32_t i = 0; i < info.n_sections; i++) {
			struct tfs_section_info si;

			assert_int_equal(tfs_trace_section(t, i, &si), 0);
			if (strcmp(si.type_name, "backtraces") == 0)
				bt_bytes += si.stored_bytes;
		}
		for (int r = 0; r < 3; r++)
			bt_frames += m[r].off[m[r].n_bt];
		fprintf(stderr, "# %u backtraces, %llu frames: %llu bytes, %.2f bytes each\n",
			counts[0] + counts[1] + counts[2], (unsigned long long)bt_frames,
			(unsigned long long)bt_bytes,
			(double)bt_bytes / (counts[0] + counts[1] + counts[2]));
	}
	tfs_trace_close(t);
	for (int r = 0; r < 3; r++)
		free_rank(&m[r]);
	free(m);
}

struct first_use {
	struct tfs_trace *t;
	const struct mrank *m;
	const uint64_t *got[64];
	int rc;
};

static void *first_use_thread(void *arg)
{
	struct first_use *u = arg;
	const struct tfs_src_frame *fr;
	uint32_t n;

	u->rc = 0;
	for (uint32_t i = 0; i < 64 && u->rc == 0; i++)
		u->rc = tfs_trace_backtrace(u->t, u->m->rank, i, &u->got[i], &n, NULL);
	if (u->rc == 0 && u->m->symbolised[0])
		u->rc = tfs_trace_symbol(u->t, u->m->rank, u->m->pool[0], &fr, &n, NULL);
	return NULL;
}

/* Several threads asking at once all see the one decoded copy. */
static void test_stacks_first_use_from_threads(void **state)
{
	uint64_t rng = 12345;
	struct first_use u[4];
	pthread_t th[4];
	struct tfs_writer *w;
	struct mrank *m = calloc(1, sizeof(*m));

	assert_non_null(m);
	gen_rank(m, 5, 300, &rng);
	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(feed_rank(w, m, NULL), 0);
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	tfs_writer_free(w);
	for (int round = 0; round < 5; round++) {
		struct tfs_trace *t;

		assert_int_equal(tfs_trace_open(tmp_path, &t, NULL), 0);
		for (int i = 0; i < 4; i++) {
			u[i].t = t;
			u[i].m = m;
			assert_int_equal(pthread_create(&th[i], NULL, first_use_thread, &u[i]), 0);
		}
		for (int i = 0; i < 4; i++) {
			assert_int_equal(pthread_join(th[i], NULL), 0);
			assert_int_equal(u[i].rc, 0);
			assert_memory_equal(u[i].got, u[0].got, sizeof(u[0].got));
		}
		check_rank(t, m);
		tfs_trace_close(t);
	}
	free_rank(m);
	free(m);
}

static void test_stacks_writer_rejects_bad_input(void **state)
{
	const struct tfs_src_frame ok[] = {{"main", "a.c", 1}};
	struct tfs_src_frame many[65], bad = {NULL, "a.c", 1};
	uint64_t frames[1025] = {0};
	char *long_name = malloc(65537);
	struct tfs_writer *w;

	assert_non_null(long_name);
	memset(long_name, 'x', 65536);
	long_name[65536] = 0;
	for (int i = 0; i < 65; i++)
		many[i] = ok[0];
	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(tfs_writer_add_backtrace(w, 0, 1, frames, 3), -EINVAL);
	assert_int_equal(tfs_writer_add_backtrace(w, 0, 0, frames, 1025), -EINVAL);
	assert_int_equal(tfs_writer_add_backtrace(w, 0, 0, NULL, 2), -EINVAL);
	assert_int_equal(tfs_writer_add_backtrace(w, 0, 0, frames, 1024), 0);
	assert_int_equal(tfs_writer_add_backtrace(w, 0, 0, frames, 1), -EINVAL);
	assert_int_equal(tfs_writer_add_backtrace(w, 0, 1, NULL, 0), 0);
	assert_int_equal(tfs_writer_add_symbol(w, 0, 0x10, ok, 0), -EINVAL);
	assert_int_equal(tfs_writer_add_symbol(w, 0, 0x10, many, 65), -EINVAL);
	assert_int_equal(tfs_writer_add_symbol(w, 0, 0x10, &bad, 1), -EINVAL);
	bad.function = long_name;
	assert_int_equal(tfs_writer_add_symbol(w, 0, 0x10, &bad, 1), -EINVAL);
	assert_int_equal(tfs_writer_add_symbol(w, 0, 0x10, many, 64), 0);
	assert_int_equal(tfs_writer_add_symbol(w, 0, 0x10, ok, 1), -EEXIST);
	assert_int_equal(tfs_writer_add_symbol(w, 1, 0x10, ok, 1), 0);
	/* a rank that only saw refused calls gets no entry: the saved trace opens */
	assert_int_equal(tfs_writer_add_backtrace(w, 9, 4, frames, 1), -EINVAL);
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	assert_int_equal(tfs_writer_add_backtrace(w, 0, 2, frames, 1), -EINVAL);
	tfs_writer_free(w);
	{
		struct tfs_trace *t;
		struct tfs_trace_info info;

		assert_int_equal(tfs_trace_open(tmp_path, &t, NULL), 0);
		tfs_trace_get_info(t, &info);
		assert_int_equal(info.n_ranks, 2);
		assert_true(tfs_trace_n_backtraces(t, 0) == 2);
		assert_true(tfs_trace_n_backtraces(t, 1) == 0);
		assert_true(tfs_trace_n_backtraces(t, 9) == 0);
		assert_int_equal(tfs_trace_verify(t, NULL), 0);
		tfs_trace_close(t);
	}
	free(long_name);
}

/* --- golden --------------------------------------------------------------------------- */

static const char *golden(const char *name, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/golden/%s", TFS_TEST_DATA, name);
	return buf;
}

static const uint64_t gold_frames[][5] = {
    {0x401000, 0x401100, 0x401200},
    {0x401000, 0x401100, 0x401300, 0x401300},
    {0x401000, 0x7f1234560000},
    {0},
};
static const uint32_t gold_n[] = {3, 4, 2, 0};
static const struct tfs_src_frame gold_main[] = {{"main", "demo.c", 40}};
static const struct tfs_src_frame gold_work[] = {{"work", "demo.c", 21}, {"grow", "vec.h", 7}};
static const struct tfs_src_frame gold_lib[] = {{"libc.so.6+0x2a1b0", "", 0}};

static void gold_write(const char *path)
{
	union tfs_arg a[3];
	struct tfs_wstream *s[2];
	struct tfs_writer_opts o = {.timing = TFS_TIMING_LOSSLESS};
	struct tfs_writer *w;
	uint32_t kind;

	assert_int_equal(tfs_writer_new(&o, &w), 0);
	assert_int_equal(tfs_writer_add_kind(w, &alloc_kind, &kind), 0);
	assert_int_equal(tfs_writer_set_meta(w, "program", "golden-stacks"), 0);
	for (uint32_t r = 0; r < 2; r++) {
		assert_int_equal(tfs_writer_stream_new(w, r, 0, &s[r]), 0);
		for (uint32_t i = 0; i < 4 - r; i++)
			assert_int_equal(
			    tfs_writer_add_backtrace(w, r, i, gold_frames[i + r], gold_n[i + r]),
			    0);
		for (uint32_t i = 0; i < 5; i++) {
			a[0].u = 16u << i;
			a[1].u = (i + r) % (4 - r);
			a[2].u = 0x5000 + 0x40 * i;
			assert_int_equal(tfs_wstream_append(s[r], kind, 1000 * i, 10 + i, a), 0);
		}
	}
	assert_int_equal(tfs_writer_add_symbol(w, 0, 0x401000, gold_main, 1), 0);
	assert_int_equal(tfs_writer_add_symbol(w, 0, 0x401100, gold_work, 2), 0);
	assert_int_equal(tfs_writer_add_symbol(w, 1, 0x7f1234560000, gold_lib, 1), 0);
	assert_int_equal(tfs_writer_add_symbol(w, 1, 0x401000, gold_main, 1), 0);
	assert_int_equal(tfs_writer_save(w, path), 0);
	tfs_writer_free(w);
}

static void append(char **out, size_t *len, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	*out = realloc(*out, *len + (size_t)n + 1);
	assert_non_null(*out);
	memcpy(*out + *len, line, (size_t)n + 1);
	*len += (size_t)n;
}

/* Events of every stream, then every backtrace of every rank with its source frames. */
static char *render(struct tfs_trace *t, size_t *len)
{
	struct tfs_trace_info info;
	char *out = NULL, buf[4096];

	*len = 0;
	append(&out, len, "%s", "");
	tfs_trace_get_info(t, &info);
	for (uint32_t i = 0; i < info.n_streams; i++) {
		struct tfs_cursor *c;
		ssize_t got;

		assert_int_equal(tfs_cursor_new(t, i, TFS_VIEW_TEXT, 0, 5, &c), 0);
		got = tfs_cursor_pread(c, buf, sizeof(buf) - 1, 0, NULL);
		assert_true(got > 0 && (uint64_t)got == tfs_cursor_size(c));
		buf[got] = 0;
		append(&out, len, "%s", buf);
		tfs_cursor_free(c);
	}
	for (uint32_t r = 0; r < info.n_ranks; r++) {
		for (uint64_t id = 0; id < tfs_trace_n_backtraces(t, r); id++) {
			const uint64_t *fr;
			uint32_t n;

			assert_int_equal(tfs_trace_backtrace(t, r, id, &fr, &n, NULL), 0);
			append(&out, len, "rank %u stack#%llu\n", r, (unsigned long long)id);
			for (uint32_t f = 0; f < n; f++) {
				const struct tfs_src_frame *src;
				uint32_t ns;

				if (tfs_trace_symbol(t, r, fr[f], &src, &ns, NULL) < 0)
					ns = 0;
				append(&out, len, "  %#llx\n", (unsigned long long)fr[f]);
				for (uint32_t k = 0; k < ns; k++)
					append(&out, len, "    %s %s:%u\n", src[k].function,
					       src[k].file, src[k].line);
			}
		}
	}
	return out;
}

/* The committed trace @name renders the committed text. */
static void golden_renders(const char *name)
{
	char p1[512], p2[512];
	struct tfs_trace *t;
	size_t n, got_len;
	uint8_t *want;
	char *got;

	assert_int_equal(tfs_trace_open(golden(name, p1, sizeof(p1)), &t, NULL), 0);
	assert_int_equal(tfs_trace_verify(t, NULL), 0);
	got = render(t, &got_len);
	want = slurp(golden("stacks.txt", p2, sizeof(p2)), &n);
	assert_int_equal(got_len, n);
	assert_memory_equal(got, want, n);
	assert_non_null(strstr(got, "stack=stack#3"));
	assert_non_null(strstr(got, "    grow vec.h:7\n"));
	free(got);
	free(want);
	tfs_trace_close(t);
}

static void test_stacks_golden_renders_committed_text(void **state)
{
	char p1[512];

	golden_renders("stacks.trace");
	/* the writer still produces exactly the committed bytes */
	gold_write(tmp_path);
	{
		size_t n1, n2;
		uint8_t *a = slurp(golden("stacks.trace", p1, sizeof(p1)), &n1),
			*b = slurp(tmp_path, &n2);

		assert_int_equal(n1, n2);
		assert_memory_equal(a, b, n1);
		free(a);
		free(b);
	}
}

/* The same trace written by format 1.1 (48-byte table entries, no packing) reads the same. */
static void test_stacks_golden_1_1_still_renders(void **state)
{
	struct tfs_trace_info info;
	struct tfs_trace *t;
	char p[512];

	golden_renders("stacks-1.1.trace");
	assert_int_equal(tfs_trace_open(golden("stacks-1.1.trace", p, sizeof(p)), &t, NULL), 0);
	tfs_trace_get_info(t, &info);
	assert_int_equal(info.version_major, 1);
	assert_int_equal(info.version_minor, 1);
	tfs_trace_close(t);
}

/*
 * Golden trace @name, as an older writer wrote it, holds values sections of version @has and
 * none of version @lacks, is of minor version @minor (-1: not checked) and reads the same.
 */
static void older_golden_renders(const char *name, const char *has, const char *lacks,
				 int minor)
{
	struct tfs_trace_info info;
	struct tfs_trace *t;
	char p[512];
	size_t n;
	uint8_t *g = slurp(golden(name, p, sizeof(p)), &n);

	assert_true(memmem(g, n, has, 4) != NULL && memmem(g, n, lacks, 4) == NULL);
	free(g);
	golden_renders(name);
	if (minor < 0)
		return;
	assert_int_equal(tfs_trace_open(p, &t, NULL), 0);
	tfs_trace_get_info(t, &info);
	assert_int_equal(info.version_minor, minor);
	tfs_trace_close(t);
}

/* The same trace as format 2.0 first wrote it, with TFV2 values sections, reads the same. */
static void test_stacks_golden_2_0_tfv2_still_renders(void **state)
{
	older_golden_renders("stacks-2.0.trace", "TFV2", "TFV3", -1);
	(void)state;
}

/* The same trace as format 2.0 wrote it last, with TFV3 values sections, reads the same. */
static void test_stacks_golden_2_0_tfv3_still_renders(void **state)
{
	older_golden_renders("stacks-2.0-tfv3.trace", "TFV3", "TFV4", 0);
	(void)state;
}

/*
 * The same trace as format 2.2 wrote it, with TFV4 values sections (range-coded columns in
 * word model 1), reads the same.
 */
static void test_stacks_golden_2_2_tfv4_still_renders(void **state)
{
	older_golden_renders("stacks-2.2.trace", "TFV4", "TFV5", 2);
	(void)state;
}

/* Open, verify and ask for every backtrace and symbol: must fail cleanly with a diagnostic. */
static void expect_refused(const uint8_t *bytes, size_t n, const char *what, size_t at)
{
	struct tfs_trace *t;
	struct tfs_diag d;
	int rc;

	spit(tmp_path, bytes, n);
	memset(&d, 0, sizeof(d));
	rc = tfs_trace_open(tmp_path, &t, &d);
	if (rc == 0) {
		const uint64_t *fr;
		uint32_t nf;

		/* first use before verify: the lazy path must refuse too */
		rc = tfs_trace_backtrace(t, 1, 0, &fr, &nf, &d);
		if (rc == 0) {
			const struct tfs_src_frame *src;

			rc = tfs_trace_symbol(t, 0, 0x401100, &src, &nf, &d);
			if (rc == -ENOENT)
				rc = 0;
		}
		if (rc == 0)
			rc = tfs_trace_verify(t, &d);
		tfs_trace_close(t);
	}
	if (rc != -TFS_ECORRUPT && rc != -TFS_EFORMAT)
		fail_msg("%s at %zu: rc=%d, expected a refusal", what, at, rc);
	if (!d.reason[0] || !d.section[0])
		fail_msg("%s at %zu: no diagnostic", what, at);
}

static void every_truncation_refused(const char *name)
{
	char p[512];
	size_t n;
	uint8_t *g = slurp(golden(name, p, sizeof(p)), &n);

	for (size_t len = 0; len < n; len++)
		expect_refused(g, len, "truncation", len);
	free(g);
}

static void every_bit_flip_refused(const char *name)
{
	char p[512];
	size_t n;
	uint8_t *g = slurp(golden(name, p, sizeof(p)), &n);

	for (size_t i = 0; i < n * 8; i++) {
		g[i / 8] ^= (uint8_t)(1u << (i % 8));
		expect_refused(g, n, "bit flip", i);
		g[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
	free(g);
}

static void test_stacks_golden_every_truncation_refused(void **state)
{
	every_truncation_refused("stacks.trace");
	every_truncation_refused("stacks-1.1.trace");
	every_truncation_refused("stacks-2.0.trace");
	every_truncation_refused("stacks-2.0-tfv3.trace");
	every_truncation_refused("stacks-2.2.trace");
}

static void test_stacks_golden_every_bit_flip_refused(void **state)
{
	every_bit_flip_refused("stacks.trace");
	every_bit_flip_refused("stacks-1.1.trace");
	every_bit_flip_refused("stacks-2.0.trace");
	every_bit_flip_refused("stacks-2.0-tfv3.trace");
}

/* @name with its minor version set to 7 (the header checksum fixed) opens and reads. */
static void newer_minor_reads(const char *name)
{
	char p[512];
	size_t n;
	uint8_t *g = slurp(golden(name, p, sizeof(p)), &n);
	struct tfs_trace_info info;
	struct tfs_trace *t;
	const uint64_t *fr;
	uint32_t nf;

	g[10] = 7;
	if (le_get16(g + 8) == 1)
		le_put32(g + 32, crc32c(g, 32)); /* FORMAT.md §A */
	else
		le_put32(g + 36, crc32c(g, 36));
	spit(tmp_path, g, n);
	assert_int_equal(tfs_trace_open(tmp_path, &t, NULL), 0);
	tfs_trace_get_info(t, &info);
	assert_int_equal(info.version_minor, 7);
	assert_int_equal(tfs_trace_backtrace(t, 0, 1, &fr, &nf, NULL), 0);
	assert_int_equal(nf, 4);
	assert_true(fr[3] == 0x401300);
	assert_int_equal(tfs_trace_verify(t, NULL), 0);
	tfs_trace_close(t);
	free(g);
}

/* A newer minor of the same major opens, backtraces and all (FORMAT.md §1), in 2.x and 1.x. */
static void test_stacks_newer_minor_still_reads(void **state)
{
	newer_minor_reads("stacks.trace");
	newer_minor_reads("stacks-1.1.trace");
}

/* Every allocation of write + save + open + first use + verify fails in turn. */
static void test_stacks_allocation_failures_are_clean(void **state)
{
	uint64_t rng = 777;
	struct mrank *m = calloc(1, sizeof(*m));
	long reached = 0;

	assert_non_null(m);
	gen_rank(m, 2, 40, &rng);
	for (long k = 0;; k++) {
		struct tfs_writer *w = NULL;
		struct tfs_trace *t = NULL;
		const struct tfs_src_frame *src;
		const uint64_t *fr;
		uint32_t n;
		int rc;

		fa_arm(k);
		rc = tfs_writer_new(NULL, &w);
		if (rc == 0)
			rc = feed_rank(w, m, NULL);
		if (rc == 0)
			rc = tfs_writer_save(w, tmp_path);
		tfs_writer_free(w);
		if (rc == 0)
			rc = tfs_trace_open(tmp_path, &t, NULL);
		if (rc == 0)
			rc = tfs_trace_backtrace(t, 2, 39, &fr, &n, NULL);
		if (rc == 0)
			rc = tfs_trace_symbol(t, 2, m->pool[0], &src, &n, NULL);
		if (rc == -ENOENT && !m->symbolised[0])
			rc = 0;
		if (rc == 0)
			rc = tfs_trace_verify(t, NULL);
		/* after a failed allocation the same trace still reads */
		if (rc == -ENOMEM && t) {
			fa_disarm();
			assert_int_equal(tfs_trace_verify(t, NULL), 0);
			check_rank(t, m);
		}
		tfs_trace_close(t);
		reached = fa_count();
		fa_disarm();
		if (rc == 0)
			break;
		assert_int_equal(rc, -ENOMEM);
		unlink(tmp_path);
	}
	assert_true(reached > 10);
	free_rank(m);
	free(m);
}

/* Regenerates tests/data/golden/stacks.* when TFS_WRITE_GOLDEN names that directory. */
static void write_golden(const char *dir)
{
	struct tfs_trace *t;
	char p[512];
	size_t len;
	char *txt;

	snprintf(p, sizeof(p), "%s/stacks.trace", dir);
	gold_write(p);
	assert_int_equal(tfs_trace_open(p, &t, NULL), 0);
	txt = render(t, &len);
	snprintf(p, sizeof(p), "%s/stacks.txt", dir);
	spit(p, txt, len);
	free(txt);
	tfs_trace_close(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stacks_symbols_match_spec_example),
	    cmocka_unit_test(test_stacks_symbols_hostile_payloads_refused),
	    cmocka_unit_test(test_stacks_symbols_truncations_and_flips),
	    cmocka_unit_test(test_stacks_round_trip_seeded),
	    cmocka_unit_test(test_stacks_first_use_from_threads),
	    cmocka_unit_test(test_stacks_writer_rejects_bad_input),
	    cmocka_unit_test(test_stacks_golden_renders_committed_text),
	    cmocka_unit_test(test_stacks_golden_1_1_still_renders),
	    cmocka_unit_test(test_stacks_golden_2_0_tfv2_still_renders),
	    cmocka_unit_test(test_stacks_golden_2_0_tfv3_still_renders),
	    cmocka_unit_test(test_stacks_golden_2_2_tfv4_still_renders),
	    cmocka_unit_test(test_stacks_golden_every_truncation_refused),
	    cmocka_unit_test(test_stacks_golden_every_bit_flip_refused),
	    cmocka_unit_test(test_stacks_newer_minor_still_reads),
	    cmocka_unit_test(test_stacks_allocation_failures_are_clean),
	};

	if (getenv("TFS_WRITE_GOLDEN")) {
		setup(NULL);
		write_golden(getenv("TFS_WRITE_GOLDEN"));
		return 0;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
