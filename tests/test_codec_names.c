/*
 * Names of symbolic ids (FORMAT.md §4 attach, §4.1 argflags, §9, §12): the payload against
 * the spec's example bytes and hostile payloads, every truncation and bit flip of it, seeded
 * round trips through the encoder, tables shared by 10^5 ranks at the cost of one, the
 * attached rendering against hand-written lines (ranks sharing a terminal but not its
 * names), merges of equal and of different tables, a golden trace with its rendered text,
 * every truncation and bit flip of that, a newer minor, bad writer input, and allocation
 * failure in turn; tfs_escape(), the §9.1 escapes the tree's other files print names with.
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

#include "crc32c_i.h"
#include "names_i.h"
#include "schema_i.h"
#include "testfiles.h"
#include "testutil.h"
#include "tfs/merge.h"
#include "tfs/reader.h"
#include "tfs/writer.h"
#include "trace_i.h"

#ifndef TFS_TEST_DATA
#define TFS_TEST_DATA "tests/data"
#endif

static char tmp_path[64];

static int setup(void **state)
{
	snprintf(tmp_path, sizeof(tmp_path), "/tmp/tfs-names-%d.trace", (int)getpid());
	return 0;
}

static int teardown(void **state)
{
	unlink(tmp_path);
	return 0;
}

/* --- the payload ---------------------------------------------------------------------- */

/* FORMAT.md §12.2, byte for byte, one line per line of the spec. */
// clang-format off
static const uint8_t spec_example[] = {
	0x01, 0x04, 'f', 'i', 'l', 'e',
	0x02,
	0x00, 0x02, 0x00, 0x00, 0x09, 'p', 'i', 'p', 'e', ':', '[', '7', '7', ']',
		    0x00, 0x02, 0x0b, '/', 'e', 't', 'c', '/', 'p', 'a', 's', 's', 'w', 'd',
	0x01, 0x01, 0x00, 0x00, 0x09, 'p', 'i', 'p', 'e', ':', '[', '7', '8', ']',
	0x02,
	0x00, 0x00, 0x00,
	0x00, 0x01, 0x01,
};
// clang-format on

static const char *lookup(const struct names *nm, uint32_t rank, uint64_t id)
{
	const struct name_table *tb = names_table_of(nm, rank);
	const struct name_ent *e = tb ? names_get(nm, tb, names_class(nm, "file"), id) : NULL;

	return e ? e->name : NULL;
}

static void test_names_match_spec_example(void **state)
{
	const struct name_in r0[] = {{"file", 3, "/etc/passwd", 11}, {"file", 0, "pipe:[77]", 9}};
	const struct name_in r1[] = {{"file", 0, "pipe:[78]", 9}, {"file", 3, "/etc/passwd", 11}};
	struct names_enc e;
	struct tfs_buf b;
	struct names nm;
	uint32_t t0, t1, t2;

	names_enc_init(&e);
	buf_init(&b);
	assert_int_equal(names_enc_table(&e, r0, 2, &t0), 0);
	assert_int_equal(names_enc_run(&e, 0, 1, t0), 0);
	assert_int_equal(names_enc_table(&e, r1, 2, &t1), 0);
	assert_int_equal(names_enc_run(&e, 1, 1, t1), 0);
	assert_int_equal(names_enc_table(&e, r1, 2, &t2), 0); /* equal: the same table */
	assert_int_equal(t2, t1);
	assert_int_equal(names_enc_run(&e, 2, 1, t2), 0);
	assert_int_equal(names_enc_finish(&e, &b), 0);
	assert_int_equal(b.len, sizeof(spec_example));
	assert_memory_equal(b.data, spec_example, sizeof(spec_example));
	names_enc_fini(&e);
	buf_fini(&b);

	assert_int_equal(names_decode(&nm, spec_example, sizeof(spec_example), 5, 0, NULL), 0);
	assert_string_equal(lookup(&nm, 0, 0), "pipe:[77]");
	assert_string_equal(lookup(&nm, 0, 3), "/etc/passwd");
	assert_string_equal(lookup(&nm, 1, 0), "pipe:[78]");
	assert_string_equal(lookup(&nm, 2, 3), "/etc/passwd");
	assert_null(lookup(&nm, 2, 1));
	assert_null(lookup(&nm, 3, 0));
	assert_null(lookup(&nm, 4, 3));
	assert_int_equal(names_class(&nm, "stack"), UINT32_MAX);
	assert_int_equal(nm.tables[0].n_ranks, 1);
	assert_int_equal(nm.tables[1].n_ranks, 2);
	names_fini(&nm);
	/* three ranks are too few for runs up to rank 2 */
	assert_int_equal(names_decode(&nm, spec_example, sizeof(spec_example), 2, 0, NULL),
			 -TFS_ECORRUPT);
}

static void expect_bad(const uint8_t *p, size_t n, const char *what)
{
	struct tfs_diag d;
	struct names nm;
	int rc;

	memset(&d, 0, sizeof(d));
	rc = names_decode(&nm, p, n, 8, 1000, &d);
	if (rc != -TFS_ECORRUPT)
		fail_msg("%s: rc=%d, expected a refusal", what, rc);
	if (strcmp(d.section, "names") || !d.reason[0] || d.offset != 1000)
		fail_msg("%s: diagnostic %s/%llu/%s", what, d.section, (unsigned long long)d.offset,
			 d.reason);
}

#define BAD(what, ...)                                                                             \
	do {                                                                                       \
		const uint8_t p_[] = {__VA_ARGS__};                                                \
		expect_bad(p_, sizeof(p_), what);                                                  \
	} while (0)

/* Each payload breaks one rule of §12.1 and nothing else. */
static void test_names_hostile_payloads_refused(void **state)
{
	/* valid: one class, one table {file#1: "a"}, one run of rank 0 */
	static const uint8_t ok[] = {1, 1, 'f', 1, 0, 1, 0, 1, 1, 'a', 1, 0, 0, 0};
	struct names nm;

	assert_int_equal(names_decode(&nm, ok, sizeof(ok), 8, 0, NULL), 0);
	names_fini(&nm);
	BAD("no class", 0, 1, 0, 1, 0, 1, 'a', 1, 0, 0, 0);
	BAD("empty class", 1, 0, 1, 0, 1, 0, 1, 1, 'a', 1, 0, 0, 0);
	BAD("class with a space", 1, 1, ' ', 1, 0, 1, 0, 1, 1, 'a', 1, 0, 0, 0);
	BAD("class twice", 2, 1, 'f', 1, 'f', 1, 0, 0, 1, 0, 0, 0);
	BAD("no table", 1, 1, 'f', 0, 1, 0, 0, 0);
	BAD("base of the first table", 1, 1, 'f', 1, 1, 0, 1, 0, 0, 0);
	BAD("base with a base", 1, 1, 'f', 3, 0, 0, 1, 0, 2, 0, 1, 0, 0, 2);
	BAD("class out of range", 1, 1, 'f', 1, 0, 1, 1, 1, 1, 'a', 1, 0, 0, 0);
	BAD("classes decreasing", 2, 1, 'f', 1, 'g', 1, 0, 2, 1, 1, 1, 'a', 0, 1, 1, 'b', 1, 0, 0,
	    0);
	BAD("id of no symbol", 1, 1, 'f', 1, 0, 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 'a', 1, 0, 0,
	    0);
	BAD("id past 2^64 - 1", 1, 1, 'f', 1, 0, 2, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	    0xff, 0xff, 0x01, 1, 'a', 0, 1, 1, 'b', 1, 0, 0, 0);
	BAD("empty name without base", 1, 1, 'f', 1, 0, 1, 0, 1, 0, 1, 0, 0, 0);
	BAD("NUL in a name", 1, 1, 'f', 1, 0, 1, 0, 1, 2, 'a', 0, 1, 0, 0, 0);
	BAD("no run", 1, 1, 'f', 1, 0, 1, 0, 1, 1, 'a', 0);
	BAD("run past the ranks", 1, 1, 'f', 1, 0, 1, 0, 1, 1, 'a', 1, 0, 8, 0);
	BAD("run of an unknown table", 1, 1, 'f', 1, 0, 1, 0, 1, 1, 'a', 1, 0, 0, 1);
	BAD("trailing byte", 1, 1, 'f', 1, 0, 1, 0, 1, 1, 'a', 1, 0, 0, 0, 0);
	BAD("huge table count", 1, 1, 'f', 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0);
	BAD("huge entry count", 1, 1, 'f', 1, 0, 0xff, 0xff, 0xff, 0x7f, 0, 1, 'a');
}

/* What a decoded payload promises, whatever bytes it came from. */
static void check_invariants(const struct names *nm, uint32_t n_ranks)
{
	for (uint32_t t = 0; t < nm->n_tables; t++) {
		const struct name_table *tb = &nm->tables[t];
		const struct name_ent *x, *prev = NULL;
		struct names_iter it;

		assert_true(tb->base == NAMES_NO_BASE ||
			    (tb->base < t && nm->tables[tb->base].base == NAMES_NO_BASE));
		names_iter_init(&it, nm->tables, t);
		while ((x = names_iter_next(&it))) {
			assert_true(x->len > 0 && strlen(x->name) == x->len &&
				    x->cls < nm->n_classes);
			assert_true(!prev || prev->cls < x->cls ||
				    (prev->cls == x->cls && prev->id < x->id));
			assert_ptr_equal(names_get(nm, tb, x->cls, x->id), x);
			prev = x;
		}
	}
	for (uint32_t r = 0; r < nm->n_runs; r++) {
		assert_true((uint64_t)nm->runs[r].first + nm->runs[r].n <= n_ranks);
		assert_true(r == 0 ||
			    nm->runs[r].first >= nm->runs[r - 1].first + nm->runs[r - 1].n);
		assert_ptr_equal(names_table_of(nm, nm->runs[r].first),
				 &nm->tables[nm->runs[r].table]);
	}
}

static void test_names_truncations_and_flips(void **state)
{
	uint8_t p[sizeof(spec_example)];
	struct names nm;

	for (size_t n = 0; n < sizeof(spec_example); n++)
		expect_bad(spec_example, n, "truncation");
	memcpy(p, spec_example, sizeof(p));
	for (size_t i = 0; i < sizeof(p) * 8; i++) {
		p[i / 8] ^= (uint8_t)(1u << (i % 8));
		if (names_decode(&nm, p, sizeof(p), 5, 0, NULL) == 0) {
			check_invariants(&nm, 5);
			names_fini(&nm);
		}
		p[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
}

/* --- seeded round trips --------------------------------------------------------------- */

#define RT_RANKS 60
#define RT_IDS 40

/* A rank's names as the test keeps them: name[cls][id], NULL when none. */
struct rt_rank {
	char *name[2][RT_IDS];
};

static const char *const rt_classes[2] = {"file", "comm"};

static char *rt_name(uint64_t *rng)
{
	static const char pool[] = "/abcxyz._-[]:>\"\\\t\x01\xff";
	size_t n = 1 + tu_below(rng, 12);
	char *s = malloc(n + 1);

	for (size_t i = 0; i < n; i++)
		s[i] = pool[tu_below(rng, sizeof(pool) - 1)];
	s[n] = 0;
	return s;
}

/* Ranks that mostly share names, some with a few of their own, some with none. */
static void rt_gen(struct rt_rank *rk, uint64_t *rng)
{
	struct rt_rank common = {0};

	for (int c = 0; c < 2; c++)
		for (int i = 0; i < RT_IDS; i++)
			common.name[c][i] = tu_below(rng, 3) ? rt_name(rng) : NULL;
	for (int r = 0; r < RT_RANKS; r++) {
		uint64_t kind = tu_below(rng, 4);

		for (int c = 0; c < 2; c++) {
			for (int i = 0; i < RT_IDS; i++) {
				const char *s = common.name[c][i];

				if (kind == 0)
					s = NULL; /* a rank without names */
				else if (kind == 3 && tu_below(rng, 8) == 0)
					s = tu_below(rng, 2) ? "changed" : NULL;
				rk[r].name[c][i] = s ? strdup(s) : NULL;
			}
		}
	}
	for (int c = 0; c < 2; c++)
		for (int i = 0; i < RT_IDS; i++)
			free(common.name[c][i]);
}

static uint32_t rt_in(const struct rt_rank *rk, struct name_in *in)
{
	uint32_t n = 0;

	for (int c = 0; c < 2; c++)
		for (int i = RT_IDS - 1; i >= 0; i--) /* any order */
			if (rk->name[c][i])
				in[n++] = (struct name_in){rt_classes[c], (uint64_t)i * 7,
							   rk->name[c][i], strlen(rk->name[c][i])};
	return n;
}

static void test_names_round_trip_seeded(void **state)
{
	uint64_t rng = tu_seed("names_round_trip");
	struct rt_rank *rk = calloc(RT_RANKS, sizeof(*rk));
	struct name_in in[2 * RT_IDS];
	uint32_t distinct = 0, derived = 0;
	struct names_enc e;
	struct tfs_buf b;
	struct names nm;

	for (int round = 0; round < 20; round++) {
		rt_gen(rk, &rng);
		names_enc_init(&e);
		buf_init(&b);
		for (uint32_t r = 0; r < RT_RANKS; r++) {
			uint32_t n = rt_in(&rk[r], in), t, before = e.n_tables;

			if (n == 0)
				continue;
			assert_int_equal(names_enc_table(&e, in, n, &t), 0);
			assert_int_equal(names_enc_run(&e, r, 1, t), 0);
			distinct += e.n_tables > before;
		}
		assert_int_equal(names_enc_finish(&e, &b), 0);
		names_enc_fini(&e);
		assert_int_equal(names_decode(&nm, b.data, b.len, RT_RANKS, 0, NULL), 0);
		check_invariants(&nm, RT_RANKS);
		for (uint32_t t = 0; t < nm.n_tables; t++)
			derived += nm.tables[t].base != NAMES_NO_BASE;
		for (uint32_t r = 0; r < RT_RANKS; r++) {
			const struct name_table *tb = names_table_of(&nm, r);

			for (int c = 0; c < 2; c++) {
				uint32_t cls = names_class(&nm, rt_classes[c]);

				for (int i = 0; i < RT_IDS; i++) {
					const struct name_ent *x =
					    tb && cls != UINT32_MAX ? names_get(&nm, tb, cls, i * 7)
								    : NULL;

					if (!rk[r].name[c][i])
						assert_null(x);
					else
						assert_string_equal(x->name, rk[r].name[c][i]);
					free(rk[r].name[c][i]);
				}
			}
		}
		names_fini(&nm);
		buf_fini(&b);
	}
	/* equal ranks share a table; ranks with a few changes are stored as changes */
	assert_true(derived > 0 && distinct < 20 * RT_RANKS / 2);
	free(rk);
}

/* 10^5 ranks with the same names cost what 10 do: one table, one run. */
static void test_names_shared_table_costs_once(void **state)
{
	const struct name_in in[] = {{"file", 0, "pipe:[1]", 8}, {"file", 3, "/etc/passwd", 11}};
	size_t size[2];

	for (int k = 0; k < 2; k++) {
		uint32_t n_ranks = k ? 100000 : 10, t;
		struct names_enc e;
		struct tfs_buf b;
		struct names nm;

		names_enc_init(&e);
		buf_init(&b);
		for (uint32_t r = 0; r < n_ranks; r++) {
			assert_int_equal(names_enc_table(&e, in, 2, &t), 0);
			assert_int_equal(names_enc_run(&e, r, 1, t), 0);
		}
		assert_int_equal(names_enc_finish(&e, &b), 0);
		assert_int_equal(e.n_tables, 1);
		assert_int_equal(e.n_runs, 1);
		size[k] = b.len;
		assert_int_equal(names_decode(&nm, b.data, b.len, n_ranks, 0, NULL), 0);
		assert_string_equal(lookup(&nm, n_ranks - 1, 3), "/etc/passwd");
		assert_int_equal(nm.tables[0].n_ranks, n_ranks);
		names_fini(&nm);
		names_enc_fini(&e);
		buf_fini(&b);
	}
	assert_true(size[1] <= size[0] + 2); /* the run's length varint only */
}

static void test_names_encoder_rejects_bad_input(void **state)
{
	const struct name_in twice[] = {{"file", 3, "a", 1}, {"file", 3, "b", 1}};
	const struct name_in none[] = {{"file", TFS_SYM_NONE, "a", 1}};
	const struct name_in empty[] = {{"file", 3, "", 0}};
	const struct name_in nul[] = {{"file", 3, "a\0b", 3}};
	const struct name_in cls[] = {{"fi le", 3, "a", 1}};
	const struct name_in ok[] = {{"file", 3, "a", 1}};
	struct names_enc e;
	uint32_t t;

	names_enc_init(&e);
	assert_int_equal(names_enc_table(&e, twice, 2, &t), -EINVAL);
	assert_int_equal(names_enc_table(&e, none, 1, &t), -EINVAL);
	assert_int_equal(names_enc_table(&e, empty, 1, &t), -EINVAL);
	assert_int_equal(names_enc_table(&e, nul, 1, &t), -EINVAL);
	assert_int_equal(names_enc_table(&e, cls, 1, &t), -EINVAL);
	assert_int_equal(names_enc_table(&e, ok, 1, &t), 0);
	assert_int_equal(names_enc_run(&e, 5, 2, t), 0);
	assert_int_equal(names_enc_run(&e, 6, 1, t), -EINVAL);	   /* overlaps */
	assert_int_equal(names_enc_run(&e, 9, 0, t), -EINVAL);	   /* empty */
	assert_int_equal(names_enc_run(&e, 9, 1, t + 1), -EINVAL); /* no such table */
	assert_int_equal(names_enc_run(&e, UINT32_MAX, 2, t), -EINVAL);
	assert_int_equal(names_enc_run(&e, 7, 1, t), 0); /* continues the run */
	assert_int_equal(e.n_runs, 1);
	names_enc_fini(&e);
}

/* --- argflags ------------------------------------------------------------------------- */

static int argflags(const struct tfs_kind_desc *k, const uint8_t *p, size_t n)
{
	struct tfs_schema s;
	struct tfs_rd r;
	uint32_t id;
	int rc;

	schema_init(&s);
	assert_int_equal(schema_add(&s, k, &id), 0);
	for (uint32_t i = 0; i < s.kinds[0].n_args; i++)
		s.kinds[0].args[i].flags &= TFS_ARG_RESULT | TFS_ARG_BYTES;
	rd_init(&r, p, n, 0, "argflags", NULL);
	rc = schema_parse_argflags(&r, &s);
	if (rc == 0 && rd_left(&r))
		rc = -TFS_ECORRUPT;
	if (rc == 0)
		rc = s.kinds[0].args[1].flags;
	schema_fini(&s);
	return rc;
}

/* The flags the schema section cannot hold: what the writer stores and readers refuse. */
static void test_names_argflags_checked(void **state)
{
	const struct tfs_arg_desc args[] = {
	    {"fd", TFS_TYPE_I64, TFS_ENC_SIG, 0, NULL},
	    {"path", TFS_TYPE_U64, TFS_ENC_SYM, 0, "file"},
	    {"count", TFS_TYPE_U64, TFS_ENC_VAL, TFS_ARG_BYTES, NULL},
	    {"other", TFS_TYPE_U64, TFS_ENC_SYM, 0, "file"},
	};
	const struct tfs_kind_desc k = {"read", "io", 4, args};
	const uint8_t ok[] = {1, 0, 1, TFS_ARG_ATTACH | TFS_ARG_INPUT};
	const uint8_t two[] = {2, 0, 1, TFS_ARG_ATTACH, 0, 3, TFS_ARG_OUTPUT};
	const uint8_t first[] = {1, 0, 0, TFS_ARG_ATTACH};
	const uint8_t chain[] = {2, 0, 1, TFS_ARG_ATTACH, 0, 2, TFS_ARG_ATTACH};
	const uint8_t not_sym[] = {1, 0, 2, TFS_ARG_INPUT};
	const uint8_t both[] = {1, 0, 1, TFS_ARG_INPUT | TFS_ARG_OUTPUT};
	const uint8_t low[] = {1, 0, 1, TFS_ARG_BYTES};
	const uint8_t unknown[] = {1, 0, 1, 0x20};
	const uint8_t zero[] = {1, 0, 1, 0};
	const uint8_t order[] = {2, 0, 3, TFS_ARG_OUTPUT, 0, 1, TFS_ARG_ATTACH};
	const uint8_t past[] = {1, 0, 4, TFS_ARG_ATTACH};
	const uint8_t empty[] = {0};

	assert_int_equal(argflags(&k, ok, sizeof(ok)), TFS_ARG_ATTACH | TFS_ARG_INPUT);
	assert_int_equal(argflags(&k, two, sizeof(two)), TFS_ARG_ATTACH);
	assert_int_equal(argflags(&k, first, sizeof(first)), -TFS_ECORRUPT);
	assert_int_equal(argflags(&k, chain, sizeof(chain)), -TFS_ECORRUPT);
	assert_int_equal(argflags(&k, not_sym, sizeof(not_sym)), -TFS_ECORRUPT);
	assert_int_equal(argflags(&k, both, sizeof(both)), -TFS_ECORRUPT);
	assert_int_equal(argflags(&k, low, sizeof(low)), -TFS_ECORRUPT);
	assert_int_equal(argflags(&k, unknown, sizeof(unknown)), -TFS_ECORRUPT);
	assert_int_equal(argflags(&k, zero, sizeof(zero)), -TFS_ECORRUPT);
	assert_int_equal(argflags(&k, order, sizeof(order)), -TFS_ECORRUPT);
	assert_int_equal(argflags(&k, past, sizeof(past)), -TFS_ECORRUPT);
	assert_int_equal(argflags(&k, empty, sizeof(empty)), -TFS_ECORRUPT);
	for (size_t n = 0; n < sizeof(two); n++)
		assert_int_equal(argflags(&k, two, n), -TFS_ECORRUPT);
}

/* --- whole traces --------------------------------------------------------------------- */

enum { K_OPEN, K_READ, K_ACCEPT, N_K };

static const struct tfs_arg_desc open_args[] = {
    {"path", TFS_TYPE_STR, TFS_ENC_STR, 0, NULL},
    {"flags", TFS_TYPE_HEX, TFS_ENC_SIG, 0, NULL},
    {"file", TFS_TYPE_U64, TFS_ENC_SYM, 0, "file"},
    {"ret", TFS_TYPE_I64, TFS_ENC_VAL, TFS_ARG_RESULT, NULL},
};
static const struct tfs_arg_desc read_args[] = {
    {"fd", TFS_TYPE_I64, TFS_ENC_SIG, 0, NULL},
    {"path", TFS_TYPE_U64, TFS_ENC_SYM, TFS_ARG_ATTACH | TFS_ARG_INPUT, "file"},
    {"count", TFS_TYPE_U64, TFS_ENC_VAL, 0, NULL},
    {"ret", TFS_TYPE_I64, TFS_ENC_VAL, TFS_ARG_RESULT | TFS_ARG_BYTES, NULL},
};
static const struct tfs_arg_desc accept_args[] = {
    {"fd", TFS_TYPE_I64, TFS_ENC_SIG, 0, NULL},
    {"path", TFS_TYPE_U64, TFS_ENC_SYM, TFS_ARG_ATTACH, "file"},
    {"ret", TFS_TYPE_I64, TFS_ENC_VAL, TFS_ARG_RESULT, NULL},
    {"rpath", TFS_TYPE_U64, TFS_ENC_SYM, TFS_ARG_ATTACH, "file"},
};
static const struct tfs_kind_desc kinds[N_K] = {
    {"open", "io", 4, open_args},
    {"read", "io", 4, read_args},
    {"accept", "io", 4, accept_args},
};

/* Rank 0's names; rank 1 has /etc/hosts, x and none for file#5. */
static int name_ranks(struct tfs_writer *w)
{
	int rc = tfs_writer_set_name(w, 0, "file", 3, "/etc/passwd");

	if (rc == 0)
		rc = tfs_writer_set_name(w, 0, "file", 4, "a>b \"q\"\t\xff");
	if (rc == 0)
		rc = tfs_writer_set_name(w, 0, "file", 5, "tcp:1.2.3.4:80");
	if (rc == 0)
		rc = tfs_writer_set_name(w, 1, "file", 4, "x");
	if (rc == 0)
		rc = tfs_writer_set_name(w, 1, "file", 3, "/etc/shadow"); /* replaced below */
	if (rc == 0)
		rc = tfs_writer_set_name(w, 1, "file", 3, "/etc/hosts");
	return rc;
}

/* The same four events at ranks 0 and 1 (so they share every terminal), names as above. */
static int write_names_trace(void **out, size_t *len)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
	struct tfs_writer *w;
	uint32_t id[N_K];
	int rc = tfs_writer_new(&o, &w);

	for (int k = 0; k < N_K && rc == 0; k++)
		rc = tfs_writer_add_kind(w, &kinds[k], &id[k]);
	for (uint32_t r = 0; r < 2 && rc == 0; r++) {
		const union tfs_arg ev[4][4] = {
		    {{.s = "/etc/passwd"}, {.u = 0}, {.u = 3}, {.i = 3}},
		    {{.i = 3}, {.u = 3}, {.u = 4096}, {.i = 4096}},
		    {{.i = 7}, {.u = 4}, {.u = 10}, {.i = 10}},
		    {{.i = 5}, {.u = 5}, {.i = 6}, {.u = TFS_SYM_NONE}},
		};
		const uint32_t kk[4] = {id[K_OPEN], id[K_READ], id[K_READ], id[K_ACCEPT]};
		struct tfs_wstream *s;

		rc = tfs_writer_stream_new(w, r, 0, &s);
		for (int i = 0; i < 4 && rc == 0; i++)
			rc = tfs_wstream_append(s, kk[i], 0, 0, ev[i]);
	}
	if (rc == 0)
		rc = name_ranks(w);
	if (rc == 0)
		rc = tfs_writer_save_mem(w, out, len);
	tfs_writer_free(w);
	return rc;
}

static char *read_all(struct tfs_trace *t, uint32_t stream, int view, uint64_t *size)
{
	struct tfs_stream_info si;
	struct tfs_cursor *c;
	char *buf;

	assert_int_equal(tfs_trace_stream(t, stream, &si), 0);
	assert_int_equal(tfs_cursor_new(t, stream, view, 0, si.n_events, &c), 0);
	*size = tfs_cursor_size(c);
	buf = malloc(*size + 1);
	assert_int_equal(tfs_cursor_pread(c, buf, *size, 0, NULL), (ssize_t)*size);
	buf[*size] = 0;
	tfs_cursor_free(c);
	return buf;
}

static void expect_view(struct tfs_trace *t, uint32_t rank, int view, const char *want)
{
	uint32_t stream;
	uint64_t size;
	char *got;

	assert_int_equal(tfs_trace_find_stream(t, rank, 0, &stream), 0);
	got = read_all(t, stream, view, &size);
	assert_string_equal(got, want);
	free(got);
}

// clang-format off
static const char text0[] =
	"T0 open(path=\"/etc/passwd\", flags=0x0, file=file#3) = 3\n"
	"T0 read(fd=3</etc/passwd>, count=4096) = 4096\n"
	"T0 read(fd=7<a\\x3eb \\\"q\\\"\\t\\xff>, count=10) = 10\n"
	"T0 accept(fd=5<tcp:1.2.3.4:80>) = 6\n";
static const char text1[] =
	"T0 open(path=\"/etc/passwd\", flags=0x0, file=file#3) = 3\n"
	"T0 read(fd=3</etc/hosts>, count=4096) = 4096 \n"
	"T0 read(fd=7<x>, count=10) = 10                 \n"
	"T0 accept(fd=5<file#5>) = 6        \n";
static const char json1[] =
	"{\"rank\":1,\"thread\":0,\"name\":\"open\",\"args\":{\"path\":\"/etc/passwd\","
		"\"flags\":0,\"file\":\"file#3\",\"result\":3}}\n"
	"{\"rank\":1,\"thread\":0,\"name\":\"read\",\"args\":{\"fd\":3,\"path\":\"/etc/hosts\","
		"\"count\":4096,\"result\":4096}} \n"
	"{\"rank\":1,\"thread\":0,\"name\":\"read\",\"args\":{\"fd\":7,\"path\":\"x\",\"count\":10,"
		"\"result\":10}}                \n"
	"{\"rank\":1,\"thread\":0,\"name\":\"accept\",\"args\":{\"fd\":5,\"path\":\"file#5\",\"result\":6,"
		"\"rpath\":null}}        \n";
static const char json0_read2[] =
	"{\"rank\":0,\"thread\":0,\"name\":\"read\",\"args\":{\"fd\":7,"
		"\"path\":\"a>b \\\"q\\\"\\t\\ufffd\",\"count\":10,\"result\":10}}\n";
// clang-format on

/* Views of ranks that share every terminal but not its names: padded to the widest. */
static void check_names_trace(struct tfs_trace *t)
{
	struct tfs_name *all;
	const char *name;
	char sig[128];
	size_t n;

	expect_view(t, 0, TFS_VIEW_TEXT, text0);
	expect_view(t, 1, TFS_VIEW_TEXT, text1);
	expect_view(t, 1, TFS_VIEW_JSONL, json1);
	{
		uint32_t stream;
		uint64_t size;
		char *got;

		assert_int_equal(tfs_trace_find_stream(t, 0, 0, &stream), 0);
		got = read_all(t, stream, TFS_VIEW_JSONL, &size);
		assert_non_null(strstr(got, json0_read2));
		free(got);
	}
	assert_int_equal(tfs_trace_name(t, 0, "file", 4, &name), 0);
	assert_string_equal(name, "a>b \"q\"\t\xff");
	assert_int_equal(tfs_trace_name(t, 1, "file", 3, &name), 0);
	assert_string_equal(name, "/etc/hosts");
	assert_int_equal(tfs_trace_name(t, 1, "file", 5, &name), -ENOENT);
	assert_int_equal(tfs_trace_name(t, 0, "stack", 3, &name), -ENOENT);
	assert_int_equal(tfs_trace_names_dup(t, 0, "file", &all, &n), 0);
	assert_int_equal(n, 3);
	assert_true(all[0].id == 3 && all[1].id == 4 && all[2].id == 5);
	assert_string_equal(all[2].name, "tcp:1.2.3.4:80");
	free(all);
	assert_int_equal(tfs_trace_names_dup(t, 1, "file", &all, &n), 0);
	assert_int_equal(n, 2);
	free(all);
	for (uint32_t term = 0; term < 4; term++) {
		uint32_t kind;

		assert_int_equal(tfs_trace_term_kind(t, term, &kind), 0);
		if (strcmp(t->schema.kinds[kind].name, "accept"))
			continue;
		assert_true(tfs_trace_signature(t, term, sig, sizeof(sig)) > 0);
		assert_string_equal(sig, "accept(fd=5<file#5>) = *");
	}
	assert_int_equal(tfs_trace_verify(t, NULL), 0);
}

static void test_names_trace_renders_attached(void **state)
{
	struct tfs_trace *t;
	void *buf;
	size_t len;

	assert_int_equal(write_names_trace(&buf, &len), 0);
	assert_int_equal(tfs_trace_open_mem(buf, len, &t, NULL), 0);
	check_names_trace(t);
	tfs_trace_close(t);
	free(buf);
}

/* The type of the section of @t whose type name is @name, counted. */
static uint32_t count_sections(const struct tfs_trace *t, const char *name)
{
	struct tfs_section_info si;
	uint32_t n = 0;

	for (uint32_t i = 0; tfs_trace_section(t, i, &si) == 0; i++)
		n += !strcmp(si.type_name, name);
	return n;
}

/*
 * Merged: a trace merged with itself keeps each rank's names (rank 2 has rank 0's, rank 3
 * rank 1's) with the same two tables; 200 one-rank traces with equal names share one table
 * and one run, with different names tables of a few changes each.
 */
static void test_names_merge_keeps_and_shares(void **state)
{
	struct tfs_trace *t, *m, *ins[200];
	void *buf, *mbuf[200], *out;
	size_t len, mlen[200], out_len;
	const char *name;

	assert_int_equal(write_names_trace(&buf, &len), 0);
	assert_int_equal(tfs_trace_open_mem(buf, len, &t, NULL), 0);
	ins[0] = ins[1] = t;
	assert_int_equal(tfs_merge_traces(ins, 2, &out, &out_len, NULL), 0);
	assert_int_equal(tfs_trace_open_mem(out, out_len, &m, NULL), 0);
	assert_int_equal(m->names.n_tables, 2);
	assert_int_equal(m->names.n_runs, 4);
	expect_view(m, 2, TFS_VIEW_TEXT, text0);
	expect_view(m, 3, TFS_VIEW_TEXT, text1);
	assert_int_equal(count_sections(m, "argflags"), 1);
	assert_int_equal(tfs_trace_verify(m, NULL), 0);
	tfs_trace_close(m);
	free(out);
	tfs_trace_close(t);
	free(buf);

	for (int same = 1; same >= 0; same--) {
		for (uint32_t i = 0; i < 200; i++) {
			struct tfs_writer *w;
			char own[32];

			snprintf(own, sizeof(own), "out.%u.dat", same ? 0 : i);
			assert_int_equal(tfs_writer_new(NULL, &w), 0);
			assert_int_equal(name_ranks(w), 0);
			assert_int_equal(tfs_writer_set_name(w, 0, "file", 9, own), 0);
			assert_int_equal(tfs_writer_save_mem(w, &mbuf[i], &mlen[i]), 0);
			tfs_writer_free(w);
			assert_int_equal(tfs_trace_open_mem(mbuf[i], mlen[i], &ins[i], NULL), 0);
		}
		assert_int_equal(tfs_merge_traces(ins, 200, &out, &out_len, NULL), 0);
		assert_int_equal(tfs_trace_open_mem(out, out_len, &m, NULL), 0);
		/* each input has ranks 0 and 1: 400 ranks, two tables stored whole; with an own
		 * output file, each rank 0 after the first is a change of the first table */
		assert_int_equal(m->names.n_tables, same ? 2 : 201);
		assert_int_equal(m->names.n_runs, 400);
		for (uint32_t k = 0, derived = 0; k <= m->names.n_tables; k++) {
			if (k == m->names.n_tables)
				assert_int_equal(derived, same ? 0 : 199);
			else
				derived += m->names.tables[k].base == 0;
		}
		for (uint32_t r = 0; r < 400; r++) {
			char own[32];

			snprintf(own, sizeof(own), "out.%u.dat", same ? 0 : r / 2);
			assert_int_equal(tfs_trace_name(m, r, "file", 3, &name), 0);
			assert_string_equal(name, r % 2 ? "/etc/hosts" : "/etc/passwd");
			assert_int_equal(tfs_trace_name(m, r, "file", 9, &name),
					 r % 2 ? -ENOENT : 0);
			if (r % 2 == 0)
				assert_string_equal(name, own);
		}
		tfs_trace_close(m);
		free(out);
		for (uint32_t i = 0; i < 200; i++) {
			tfs_trace_close(ins[i]);
			free(mbuf[i]);
		}
	}
}

/* The §9 forms of a name, written here from the spec's words, not from render.c. */
static size_t form(char *out, const char *name, bool json)
{
	size_t n = 0;

	out[n++] = json ? '"' : '<';
	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		const char *esc = *p == '"'    ? "\\\""
				  : *p == '\\' ? "\\\\"
				  : *p == '\n' ? "\\n"
				  : *p == '\t' ? "\\t"
				  : *p == '\r' ? "\\r"
					       : NULL;

		if (esc)
			n += (size_t)sprintf(out + n, "%s", esc);
		else if (*p >= 0x20 && *p < 0x7f && (json || *p != '>'))
			out[n++] = (char)*p;
		else if (json && *p >= 0x80) /* no valid UTF-8 here: U+FFFD (§9.1) */
			n += (size_t)sprintf(out + n, "\\ufffd");
		else
			n += (size_t)sprintf(out + n, json ? "\\u%04x" : "\\x%02x", *p);
	}
	out[n++] = json ? '"' : '>';
	out[n] = 0;
	return n;
}

#define W_RANKS 12
#define W_IDS 6

/*
 * Ranks sharing a terminal but not its names, their tables stored whole or as changes that
 * replace, add and remove names: each line is padded to the widest rank's form.
 */
/* tfs_escape(): §9.1 in each mode, the bytes of @also, snprintf's contract on a short buffer. */
static void test_names_escape_modes_and_short_buffer(void **state)
{
	static const char in[] = "a\tb\n\x01\x7f\"\\>;\xc2\x85\x85\xc3\xa9\xff\xc3";
	static const char text[] = "a\\tb\\n\\x01\\x7f\\\"\\\\\\x3e\\x3b\\xc2\\x85\\x85\xc3\xa9"
				   "\\xff\\xc3";
	static const char json[] = "a\\tb\\n\\u0001\\u007f\\\"\\\\>;\xc2\x85\\ufffd\xc3\xa9"
				   "\\ufffd\\ufffd";
	static const char utf8[] = "a\tb\n\x01\x7f\"\\>;\xc2\x85\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd"
				   "\xef\xbf\xbd";
	char buf[128];
	size_t n = sizeof(in) - 1;

	(void)state;
	assert_int_equal(tfs_escape(buf, sizeof(buf), in, n, TFS_ESCAPE_TEXT, ">;"),
			 sizeof(text) - 1);
	assert_string_equal(buf, text);
	/* @also is the text view's alone */
	assert_int_equal(tfs_escape(buf, sizeof(buf), in, n, TFS_ESCAPE_JSON, ">;"),
			 sizeof(json) - 1);
	assert_string_equal(buf, json);
	assert_int_equal(tfs_escape(buf, sizeof(buf), in, n, TFS_ESCAPE_UTF8, NULL),
			 sizeof(utf8) - 1);
	assert_string_equal(buf, utf8);
	assert_int_equal(tfs_escape(NULL, 0, in, n, TFS_ESCAPE_TEXT, ">;"), sizeof(text) - 1);
	memset(buf, 'Z', sizeof(buf));
	/* without @also, ">;" print as themselves: 6 bytes fewer */
	assert_int_equal(tfs_escape(buf, 6, in, n, TFS_ESCAPE_TEXT, NULL), sizeof(text) - 1 - 6);
	assert_string_equal(buf, "a\\tb\\");
	assert_int_equal(buf[6], 'Z');
}

/* tfs_utf8_cut(): a cut between two characters, whatever sequence @max falls in. */
static void test_names_utf8_cut_between_characters(void **state)
{
	/* 'a', e-acute (2), euro sign (3), U+1F600 (4), a byte of no UTF-8, C1 U+0085 (2) */
	static const char in[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xff\xc2\x85";
	static const size_t want[] = {0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10, 11, 11, 13};
	const size_t n = sizeof(in) - 1;

	(void)state;
	for (size_t max = 0; max <= n; max++)
		assert_int_equal(tfs_utf8_cut(in, n, max), want[max]);
	assert_int_equal(tfs_utf8_cut(in, n, n + 5), n);
	/* continuation bytes of no sequence are characters of their own */
	assert_int_equal(tfs_utf8_cut("\x85\x85\x85\x85\x85", 5, 4), 4);
	/* a lead byte whose sequence is cut short before @max is no sequence */
	assert_int_equal(tfs_utf8_cut("\xe2\x82x\xc3\xa9", 5, 3), 3);
	assert_int_equal(tfs_utf8_cut("\xe2\x82x\xc3\xa9", 5, 4), 3);
}

static void test_names_widths_over_ranks_seeded(void **state)
{
	const struct tfs_arg_desc args[] = {
	    {"fd", TFS_TYPE_I64, TFS_ENC_SIG, 0, NULL},
	    {"path", TFS_TYPE_U64, TFS_ENC_SYM, TFS_ARG_ATTACH, "file"},
	};
	const struct tfs_kind_desc k = {"k", "io", 2, args};
	uint64_t rng = tu_seed("names_widths");
	uint32_t derived = 0;

	for (int round = 0; round < 30; round++) {
		struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
		static char names[W_RANKS][W_IDS][16], text[4 * 16 + 64], json[6 * 16 + 96];
		size_t wide[2][W_IDS] = {{0}};
		uint32_t kind;
		struct tfs_writer *w;
		struct tfs_trace *t;
		void *buf;
		size_t len;

		for (int i = 0; i < W_IDS; i++) {
			char *common = names[0][i];

			snprintf(common, 16, "%.*s", (int)tu_below(&rng, 12) + 1,
				 "/a>b\"c\td\xff"
				 "ef/gh");
			for (int r = 1; r < W_RANKS; r++)
				snprintf(names[r][i], 16, "%.15s",
					 tu_below(&rng, 5)   ? common
					 : tu_below(&rng, 2) ? ""
							     : "x>y");
			if (tu_below(&rng, 3) == 0)
				common[0] = 0; /* rank 0 lacks it */
		}
		assert_int_equal(tfs_writer_new(&o, &w), 0);
		assert_int_equal(tfs_writer_add_kind(w, &k, &kind), 0);
		for (uint32_t r = 0; r < W_RANKS; r++) {
			struct tfs_wstream *s;

			assert_int_equal(tfs_writer_stream_new(w, r, 0, &s), 0);
			for (uint64_t i = 0; i <= W_IDS; i++) {
				union tfs_arg a[2] = {{.i = (int64_t)i},
						      {.u = i < W_IDS ? i : TFS_SYM_NONE}};

				assert_int_equal(tfs_wstream_append(s, kind, 0, 0, a), 0);
			}
			for (int i = 0; i < W_IDS && r % 4 != 3; i++) /* every 4th: no names */
				if (names[r][i][0])
					assert_int_equal(
					    tfs_writer_set_name(w, r, "file", i, names[r][i]), 0);
		}
		/* the widest form of each id over the ranks, "file#<id>" where a rank has none */
		for (int r = 0; r < W_RANKS; r++) {
			for (int i = 0; i < W_IDS; i++) {
				char fb[16];
				const char *nm = names[r][i][0] && r % 4 != 3 ? names[r][i] : fb;

				snprintf(fb, sizeof(fb), "file#%d", i);
				for (int j = 0; j < 2; j++) {
					size_t n = form(j ? json : text, nm, j);

					wide[j][i] = n > wide[j][i] ? n : wide[j][i];
				}
			}
		}
		assert_int_equal(tfs_writer_save_mem(w, &buf, &len), 0);
		tfs_writer_free(w);
		assert_int_equal(tfs_trace_open_mem(buf, len, &t, NULL), 0);
		for (uint32_t tb = 0; tb < t->names.n_tables; tb++)
			derived += t->names.tables[tb].base != NAMES_NO_BASE;
		for (uint32_t r = 0; r < W_RANKS; r++) {
			char want[2][4096], *at[2] = {want[0], want[1]};

			for (int i = 0; i <= W_IDS; i++) {
				char fb[16];
				const char *nm =
				    i < W_IDS && names[r][i][0] && r % 4 != 3 ? names[r][i] : fb;
				size_t n[2];

				snprintf(fb, sizeof(fb), "file#%d", i);
				n[0] = i < W_IDS ? form(text, nm, false) : 0;
				n[1] = i < W_IDS ? form(json, nm, true) : 4;
				at[0] +=
				    sprintf(at[0], "T0 k(fd=%d%s)%*s\n", i, i < W_IDS ? text : "",
					    (int)(i < W_IDS ? wide[0][i] - n[0] : 0), "");
				at[1] += sprintf(at[1],
						 "{\"rank\":%u,\"thread\":0,\"name\":\"k\","
						 "\"args\":{\"fd\":%d,\"path\":%s}}%*s\n",
						 r, i, i < W_IDS ? json : "null",
						 (int)(i < W_IDS ? wide[1][i] - n[1] : 0) +
						     (r < 10), ""); /* "rank" at 2 digits */
			}
			expect_view(t, r, TFS_VIEW_TEXT, want[0]);
			expect_view(t, r, TFS_VIEW_JSONL, want[1]);
		}
		tfs_trace_close(t);
		free(buf);
	}
	assert_true(derived > 0);
}

/* --- the golden trace ----------------------------------------------------------------- */

static const char *golden(const char *name, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/golden/%s", TFS_TEST_DATA, name);
	return buf;
}

/* Both ranks' text and JSON lines, as the golden text holds them. */
static char *render_both(struct tfs_trace *t, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *out = malloc(cap);

	for (uint32_t s = 0; s < 2; s++) {
		for (int v = TFS_VIEW_TEXT; v <= TFS_VIEW_JSONL; v++) {
			uint64_t size;
			char *got = read_all(t, s, v, &size);

			assert_true(n + size < cap);
			memcpy(out + n, got, size);
			n += size;
			free(got);
		}
	}
	*len = n;
	return out;
}

static void test_names_golden_renders_committed_text(void **state)
{
	char p1[512], p2[512];
	struct tfs_trace *t;
	size_t n, got_len, glen;
	uint8_t *want, *g;
	void *mine;
	char *got;

	assert_int_equal(tfs_trace_open(golden("names.trace", p1, sizeof(p1)), &t, NULL), 0);
	check_names_trace(t);
	got = render_both(t, &got_len);
	want = slurp(golden("names.txt", p2, sizeof(p2)), &n);
	assert_int_equal(got_len, n);
	assert_memory_equal(got, want, n);
	free(got);
	free(want);
	tfs_trace_close(t);
	/* the writer still produces exactly the committed bytes */
	g = slurp(p1, &glen);
	assert_int_equal(write_names_trace(&mine, &n), 0);
	assert_int_equal(n, glen);
	assert_memory_equal(mine, g, n);
	free(mine);
	free(g);
}

static void expect_refused(const uint8_t *bytes, size_t n, const char *what, size_t at)
{
	struct tfs_trace *t;
	struct tfs_diag d;
	int rc;

	memset(&d, 0, sizeof(d));
	rc = tfs_trace_open_mem(bytes, n, &t, &d);
	if (rc == 0) {
		rc = tfs_trace_verify(t, &d);
		tfs_trace_close(t);
	}
	if (rc != -TFS_ECORRUPT && rc != -TFS_EFORMAT)
		fail_msg("%s at %zu: rc=%d, expected a refusal", what, at, rc);
	if (!d.reason[0] || !d.section[0])
		fail_msg("%s at %zu: no diagnostic", what, at);
}

static void test_names_golden_every_truncation_and_flip_refused(void **state)
{
	char p[512];
	size_t n;
	uint8_t *g = slurp(golden("names.trace", p, sizeof(p)), &n);

	for (size_t len = 0; len < n; len++)
		expect_refused(g, len, "truncation", len);
	for (size_t i = 0; i < n * 8; i++) {
		g[i / 8] ^= (uint8_t)(1u << (i % 8));
		expect_refused(g, n, "bit flip", i);
		g[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
	free(g);
}

/* Minor 7 of the same major: the names still read (FORMAT.md §1). */
static void test_names_newer_minor_still_reads(void **state)
{
	char p[512];
	size_t n;
	uint8_t *g = slurp(golden("names.trace", p, sizeof(p)), &n);
	struct tfs_trace *t;

	assert_int_equal(le_get16(g + 10), TFS_FORMAT_MINOR);
	g[10] = 7;
	le_put32(g + 36, crc32c(g, 36));
	assert_int_equal(tfs_trace_open_mem(g, n, &t, NULL), 0);
	check_names_trace(t);
	tfs_trace_close(t);
	free(g);
}

/* --- writer input and allocation failure ---------------------------------------------- */

static void test_names_writer_rejects_bad_input(void **state)
{
	const struct tfs_arg_desc first[] = {
	    {"path", TFS_TYPE_U64, TFS_ENC_SYM, TFS_ARG_ATTACH, "file"}};
	const struct tfs_arg_desc chain[] = {
	    {"fd", TFS_TYPE_I64, TFS_ENC_SIG, 0, NULL},
	    {"a", TFS_TYPE_U64, TFS_ENC_SYM, TFS_ARG_ATTACH, "file"},
	    {"b", TFS_TYPE_U64, TFS_ENC_SYM, TFS_ARG_ATTACH, "file"}};
	const struct tfs_arg_desc not_sym[] = {
	    {"fd", TFS_TYPE_I64, TFS_ENC_SIG, 0, NULL},
	    {"n", TFS_TYPE_U64, TFS_ENC_VAL, TFS_ARG_ATTACH, NULL}};
	const struct tfs_arg_desc result[] = {
	    {"fd", TFS_TYPE_I64, TFS_ENC_SIG, 0, NULL},
	    {"p", TFS_TYPE_U64, TFS_ENC_SYM, TFS_ARG_ATTACH | TFS_ARG_RESULT, "file"}};
	const struct tfs_arg_desc both[] = {
	    {"p", TFS_TYPE_U64, TFS_ENC_SYM, TFS_ARG_INPUT | TFS_ARG_OUTPUT, "file"}};
	const struct tfs_arg_desc unknown[] = {{"p", TFS_TYPE_U64, TFS_ENC_SYM, 0x40, "file"}};
	const struct tfs_kind_desc bad[] = {
	    {"k", "io", 1, first},  {"k", "io", 3, chain}, {"k", "io", 2, not_sym},
	    {"k", "io", 2, result}, {"k", "io", 1, both},  {"k", "io", 1, unknown},
	};
	char long_name[NAMES_MAX_BYTES + 2];
	struct tfs_writer *w;
	uint32_t id;

	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(tfs_writer_add_kind(w, &bad[i], &id), -EINVAL);
	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = 0;
	assert_int_equal(tfs_writer_set_name(w, 0, "file", 1, long_name), -EINVAL);
	long_name[NAMES_MAX_BYTES] = 0;
	assert_int_equal(tfs_writer_set_name(w, 0, "file", 1, long_name), 0);
	assert_int_equal(tfs_writer_set_name(w, 0, "file", 1, ""), -EINVAL);
	assert_int_equal(tfs_writer_set_name(w, 0, "file", 1, NULL), -EINVAL);
	assert_int_equal(tfs_writer_set_name(w, 0, "file", TFS_SYM_NONE, "a"), -EINVAL);
	assert_int_equal(tfs_writer_set_name(w, 0, "", 1, "a"), -EINVAL);
	assert_int_equal(tfs_writer_set_name(w, 0, "a b", 1, "a"), -EINVAL);
	assert_int_equal(tfs_writer_set_name(w, 0, NULL, 1, "a"), -EINVAL);
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	assert_int_equal(tfs_writer_set_name(w, 0, "file", 2, "a"), -EINVAL); /* after save */
	tfs_writer_free(w);
}

/* A rank with names and no stream counts as a rank. */
static void test_names_rank_without_stream(void **state)
{
	struct tfs_trace_info info;
	struct tfs_writer *w;
	struct tfs_trace *t;
	const char *name;

	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(tfs_writer_set_name(w, 6, "file", 1, "/x"), 0);
	assert_int_equal(tfs_writer_save(w, tmp_path), 0);
	tfs_writer_free(w);
	assert_int_equal(tfs_trace_open(tmp_path, &t, NULL), 0);
	tfs_trace_get_info(t, &info);
	assert_int_equal(info.n_ranks, 7);
	assert_int_equal(tfs_trace_name(t, 6, "file", 1, &name), 0);
	assert_string_equal(name, "/x");
	tfs_trace_close(t);
}

static void test_names_allocation_failures_are_clean(void **state)
{
	long reached = 0;

	for (long k = 0;; k++) {
		struct tfs_trace *t = NULL, *ins[2];
		struct tfs_name *all = NULL;
		void *buf = NULL, *out = NULL;
		size_t len, n;
		int rc;

		fa_arm(k);
		rc = write_names_trace(&buf, &len);
		if (rc == 0)
			rc = tfs_trace_open_mem(buf, len, &t, NULL);
		if (rc == 0)
			rc = tfs_trace_names_dup(t, 0, "file", &all, &n);
		if (rc == 0) {
			ins[0] = ins[1] = t;
			rc = tfs_merge_traces(ins, 2, &out, &len, NULL);
		}
		fa_disarm();
		if (rc == 0)
			check_names_trace(t);
		free(all);
		free(out);
		tfs_trace_close(t);
		free(buf);
		reached = k;
		if (rc == 0)
			break;
		assert_int_equal(rc, -ENOMEM);
	}
	assert_true(reached > 10);
}

/* Regenerates tests/data/golden/names.* when TFS_WRITE_GOLDEN names that directory. */
static void write_golden(const char *dir)
{
	struct tfs_trace *t;
	char p[512];
	void *buf;
	size_t len;
	char *txt;

	assert_int_equal(write_names_trace(&buf, &len), 0);
	snprintf(p, sizeof(p), "%s/names.trace", dir);
	spit(p, buf, len);
	assert_int_equal(tfs_trace_open_mem(buf, len, &t, NULL), 0);
	txt = render_both(t, &len);
	snprintf(p, sizeof(p), "%s/names.txt", dir);
	spit(p, txt, len);
	free(txt);
	tfs_trace_close(t);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names_match_spec_example),
	    cmocka_unit_test(test_names_hostile_payloads_refused),
	    cmocka_unit_test(test_names_truncations_and_flips),
	    cmocka_unit_test(test_names_round_trip_seeded),
	    cmocka_unit_test(test_names_shared_table_costs_once),
	    cmocka_unit_test(test_names_encoder_rejects_bad_input),
	    cmocka_unit_test(test_names_argflags_checked),
	    cmocka_unit_test(test_names_trace_renders_attached),
	    cmocka_unit_test(test_names_merge_keeps_and_shares),
	    cmocka_unit_test(test_names_escape_modes_and_short_buffer),
	    cmocka_unit_test(test_names_utf8_cut_between_characters),
	    cmocka_unit_test(test_names_widths_over_ranks_seeded),
	    cmocka_unit_test(test_names_golden_renders_committed_text),
	    cmocka_unit_test(test_names_golden_every_truncation_and_flip_refused),
	    cmocka_unit_test(test_names_newer_minor_still_reads),
	    cmocka_unit_test(test_names_writer_rejects_bad_input),
	    cmocka_unit_test(test_names_rank_without_stream),
	    cmocka_unit_test(test_names_allocation_failures_are_clean),
	};

	if (getenv("TFS_WRITE_GOLDEN")) {
		setup(NULL);
		write_golden(getenv("TFS_WRITE_GOLDEN"));
		return 0;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
