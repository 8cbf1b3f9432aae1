/*
 * Trace merging (include/tfs/merge.h), traces in memory (tfs_writer_save_mem,
 * tfs_trace_open_mem) and special (negative) RANK values (FORMAT.md §5.2, §9): merged ranks
 * render exactly what their inputs render, equal content is stored once, ranks keep their
 * absolute values, metadata follows its ranks, and bad input or failed allocations give
 * clean errors.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testfiles.h"
#include "testutil.h"
#include "tfs/merge.h"
#include "tfs/reader.h"
#include "tfs/writer.h"
#include "tracegen.h"

#ifndef TFS_TEST_DATA
#define TFS_TEST_DATA "tests/data"
#endif

/* A trace held in memory and opened over it. */
struct mtrace {
	void *buf;
	size_t len;
	struct tfs_trace *t;
};

static void mt_open(struct mtrace *m, void *buf, size_t len)
{
	struct tfs_diag d;

	m->buf = buf;
	m->len = len;
	assert_int_equal(tfs_trace_open_mem(buf, len, &m->t, &d), 0);
}

static void mt_close(struct mtrace *m)
{
	tfs_trace_close(m->t);
	free(m->buf);
	memset(m, 0, sizeof(*m));
}

/*
 * Streams (rank r, thread th) for r < @n_ranks, th < 2 from tracegen, and a phase. Without
 * @sends, no event has a RANK argument: copies of the trace then do the same thing at
 * every rank (with them, a copy's rank 0 still sends to absolute rank 1).
 */
static void gen_trace_in(struct mtrace *m, int timing, uint32_t n_ranks, uint64_t n, uint64_t seed,
			 const char *pid, bool sends, bool merge_input)
{
	struct tfs_writer_opts o = {.timing = timing, .rel_err = 0.01};
	struct tfs_writer *w;
	void *buf;
	size_t len;

	assert_int_equal(tfs_writer_new(&o, &w), 0);
	assert_int_equal(tg_declare(w), 0);
	assert_int_equal(tfs_writer_set_meta(w, "program", "unit-test"), 0);
	assert_int_equal(tfs_writer_set_meta(w, "pid", pid), 0);
	for (uint32_t i = 0; i < 2 * n_ranks; i++) {
		struct tg_stream s = {.rank = i / 2, .thread = i % 2};

		uint64_t kept = 0;

		assert_int_equal(tg_fill(&s, n, i % 2 == 0, seed + i / 2), 0);
		for (uint64_t e = 0; e < s.n; e++)
			if (sends || s.ev[e].kind != TG_SEND)
				s.ev[kept++] = s.ev[e];
		s.n = kept;
		assert_int_equal(tg_write(w, &s), 0);
		tg_free(&s);
	}
	assert_int_equal(tfs_writer_add_phase(w, "init", 0, 1, 2, 5), 0);
	if (merge_input)
		tfs_writer_merge_input(w);
	assert_int_equal(tfs_writer_save_mem(w, &buf, &len), 0);
	tfs_writer_free(w);
	mt_open(m, buf, len);
}

static void gen_trace_ex(struct mtrace *m, int timing, uint32_t n_ranks, uint64_t n, uint64_t seed,
			 const char *pid, bool sends)
{
	gen_trace_in(m, timing, n_ranks, n, seed, pid, sends, false);
}

static void gen_trace(struct mtrace *m, int timing, uint32_t n_ranks, uint64_t n, uint64_t seed,
		      const char *pid)
{
	gen_trace_ex(m, timing, n_ranks, n, seed, pid, false);
}

static char *read_view(struct tfs_trace *t, uint32_t stream, int view, uint64_t *size)
{
	struct tfs_stream_info si;
	struct tfs_cursor *c;
	char *buf;

	assert_int_equal(tfs_trace_stream(t, stream, &si), 0);
	assert_int_equal(tfs_cursor_new(t, stream, view, 0, si.n_events, &c), 0);
	*size = tfs_cursor_size(c);
	buf = malloc(*size + 1);
	assert_non_null(buf);
	assert_int_equal(tfs_cursor_pread(c, buf, *size, 0, NULL), (ssize_t)*size);
	buf[*size] = 0;
	tfs_cursor_free(c);
	return buf;
}

/*
 * Chrome lines carry the rank as "pid":R, JSON lines as "rank":R: replace R by one "#" so
 * ranks compare equal (an argument of that name too: both sides carry it). @return the
 * new length.
 */
static uint64_t blank_rank(char *s, uint64_t n, const char *key)
{
	size_t klen = strlen(key);
	uint64_t o = 0;

	for (uint64_t i = 0; i < n;) {
		if (n - i > klen && !memcmp(s + i, key, klen) && s[i + klen] >= '0' &&
		    s[i + klen] <= '9') {
			memmove(s + o, s + i, klen);
			o += klen;
			i += klen;
			while (i < n && s[i] >= '0' && s[i] <= '9')
				i++;
			s[o++] = '#';
			continue;
		}
		s[o++] = s[i++];
	}
	s[o] = 0;
	return o;
}

/* Drop the spaces that pad each line to its terminal's length (FORMAT.md §9). */
static uint64_t strip_pad(char *s, uint64_t n)
{
	uint64_t o = 0;

	for (uint64_t i = 0; i < n; i++) {
		if (s[i] == '\n')
			while (o && s[o - 1] == ' ')
				o--;
		s[o++] = s[i];
	}
	s[o] = 0;
	return o;
}

/*
 * Every view of stream (@rank, @thread) of @a equals that of (@rank_b, @thread) of @b,
 * byte for byte, or but for line padding when @pad_may_differ (a RANK argument's width
 * depends on the rank count).
 */
static void assert_views(struct tfs_trace *a, uint32_t rank, struct tfs_trace *b, uint32_t rank_b,
			 uint32_t thread, bool pad_may_differ)
{
	uint32_t ia, ib;

	assert_int_equal(tfs_trace_find_stream(a, rank, thread, &ia), 0);
	assert_int_equal(tfs_trace_find_stream(b, rank_b, thread, &ib), 0);
	for (int v = 0; v < TFS_VIEW_COUNT; v++) {
		uint64_t na, nb;
		char *va = read_view(a, ia, v, &na), *vb = read_view(b, ib, v, &nb);

		if (v != TFS_VIEW_TEXT) {
			const char *key = v == TFS_VIEW_CHROME ? "\"pid\":" : "\"rank\":";

			na = blank_rank(va, na, key);
			nb = blank_rank(vb, nb, key);
		}
		if (pad_may_differ) {
			na = strip_pad(va, na);
			nb = strip_pad(vb, nb);
		}
		assert_int_equal(na, nb);
		assert_memory_equal(va, vb, na);
		free(va);
		free(vb);
	}
}

static void assert_same_views(struct tfs_trace *a, uint32_t rank, struct tfs_trace *b,
			      uint32_t rank_b, uint32_t thread)
{
	assert_views(a, rank, b, rank_b, thread, false);
}

static int merge(struct tfs_trace *const *in, uint32_t n, struct mtrace *out)
{
	struct tfs_diag d;
	void *buf;
	size_t len;
	int rc = tfs_merge_traces(in, n, &buf, &len, &d);

	if (rc == 0)
		mt_open(out, buf, len);
	return rc;
}

/* tfs_merge_traces_opts() of @n inputs with @opts into @out. */
static void merge_opts(struct tfs_trace *const *in, uint32_t n, const struct tfs_merge_opts *opts,
		       struct mtrace *out)
{
	struct tfs_diag d;
	void *buf;
	size_t len;

	assert_int_equal(tfs_merge_traces_opts(in, n, opts, &buf, &len, &d), 0);
	mt_open(out, buf, len);
}

/*
 * A merge input (tfs_writer_merge_input(): tables and grammars compressed fast) renders as
 * the plain save does; merged with rewrite_grammars, the inputs give byte for byte the trace
 * that the plain saves give merged, with or without it.
 */
static void test_merge_input_merges_to_the_same_bytes(void **state)
{
	const struct tfs_merge_opts rw = {.rewrite_grammars = 1};
	uint64_t seed = tu_seed("merge-input");
	struct tfs_trace *pa[2], *pb[2];
	struct mtrace a[2], b[2], ma, mr, mb;

	for (int i = 0; i < 2; i++) {
		gen_trace_in(&a[i], TFS_TIMING_LOSSLESS, 2, 3000, seed + i, "9", false, false);
		gen_trace_in(&b[i], TFS_TIMING_LOSSLESS, 2, 3000, seed + i, "9", false, true);
		print_message("# input %d: %zu bytes saved plain, %zu as a merge input\n", i,
			      a[i].len, b[i].len);
		assert_int_equal(tfs_trace_verify(b[i].t, NULL), 0);
		for (uint32_t r = 0; r < 2; r++)
			for (uint32_t th = 0; th < 2; th++)
				assert_same_views(b[i].t, r, a[i].t, r, th);
		pa[i] = a[i].t;
		pb[i] = b[i].t;
	}
	merge_opts(pa, 2, NULL, &ma);
	merge_opts(pa, 2, &rw, &mr);
	merge_opts(pb, 2, &rw, &mb);
	assert_int_equal(mr.len, ma.len);
	assert_memory_equal(mr.buf, ma.buf, ma.len);
	assert_int_equal(mb.len, ma.len);
	assert_memory_equal(mb.buf, ma.buf, ma.len);
	mt_close(&mb);
	mt_close(&mr);
	mt_close(&ma);
	for (int i = 0; i < 2; i++) {
		mt_close(&b[i]);
		mt_close(&a[i]);
	}
}

/* k copies: k times the ranks, each rendering byte for byte what the input renders. */
static void test_merge_copies_render_like_the_input(void **state)
{
	uint64_t seed = tu_seed("copies");
	struct tfs_trace *in[3];
	struct tfs_trace_info ii, oi;
	struct tfs_phase_info ph;
	struct mtrace a, m;

	gen_trace(&a, TFS_TIMING_LOSSLESS, 2, 700, seed, "100");
	for (int i = 0; i < 3; i++)
		in[i] = a.t;
	assert_int_equal(merge(in, 3, &m), 0);
	tfs_trace_get_info(a.t, &ii);
	tfs_trace_get_info(m.t, &oi);
	assert_int_equal(oi.n_ranks, 6);
	assert_int_equal(oi.n_streams, 12);
	assert_int_equal(oi.n_phases, 3);
	assert_int_equal(oi.n_events, 3 * ii.n_events);
	assert_int_equal(oi.n_terminals, ii.n_terminals);
	assert_int_equal(oi.version_minor, TFS_FORMAT_MINOR);
	assert_int_equal(tfs_trace_verify(m.t, NULL), 0);
	for (uint32_t r = 0; r < 6; r++)
		for (uint32_t th = 0; th < 2; th++)
			assert_same_views(m.t, r, a.t, r % 2, th);
	for (uint32_t p = 0; p < 3; p++) {
		struct tfs_stream_info si;

		assert_int_equal(tfs_trace_phase(m.t, p, &ph), 0);
		assert_string_equal(ph.name, "init");
		assert_int_equal(tfs_trace_stream(m.t, ph.stream, &si), 0);
		assert_int_equal(si.rank, 2 * p);
		assert_int_equal(si.thread, 1);
		assert_true(ph.first_event == 2 && ph.n_events == 5);
	}
	mt_close(&m);
	mt_close(&a);
}

/* 16 copies store their grammars and values once: same sections, size close to one copy. */
static void test_merge_shares_sections(void **state)
{
	uint64_t seed = tu_seed("sharing");
	struct tfs_trace *in[16];
	struct tfs_trace_info ii, oi;
	struct mtrace a, m;

	gen_trace(&a, TFS_TIMING_LOSSLESS, 2, 3000, seed, "7");
	for (int i = 0; i < 16; i++)
		in[i] = a.t;
	assert_int_equal(merge(in, 16, &m), 0);
	tfs_trace_get_info(a.t, &ii);
	tfs_trace_get_info(m.t, &oi);
	assert_int_equal(oi.n_streams, 16 * ii.n_streams);
	assert_int_equal(oi.n_sections, ii.n_sections);
	print_message("# 1 copy %zu bytes, 16 copies %zu bytes\n", a.len, m.len);
	assert_true(m.len < a.len + a.len / 10 + 16 * 64);
	for (uint32_t s = 0; s < oi.n_streams; s++) {
		struct tfs_stream_info si;

		assert_int_equal(tfs_trace_stream(m.t, s, &si), 0);
		assert_int_equal(si.same_as, s % 4);
	}
	mt_close(&m);
	mt_close(&a);
}

enum { K_SEND, K_RECV };

static const struct tfs_arg_desc send_args[] = {
    {.name = "dest", .type = TFS_TYPE_I64, .enc = TFS_ENC_RANK},
    {.name = "bytes", .type = TFS_TYPE_U64, .enc = TFS_ENC_SIG},
};
static const struct tfs_arg_desc recv_args[] = {
    {.name = "src", .type = TFS_TYPE_I64, .enc = TFS_ENC_RANK},
};
static const struct tfs_kind_desc ring_kinds[] = {
    {"send", "mpi", 2, send_args},
    {"recv", "mpi", 1, recv_args},
};

/*
 * The trace one process of a ring writes alone: rank 0 of its own trace, absolute ranks
 * of world rank @me in its arguments (dest = me + 1, src = me - 1 or MPI_ANY_SOURCE,
 * MPI_PROC_NULL past the end).
 */
static void ring_trace(struct mtrace *m, uint32_t me, uint32_t n, uint32_t write_rank)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
	struct tfs_writer *w;
	struct tfs_wstream *s;
	uint32_t id;
	void *buf;
	size_t len;
	char pid[16];

	assert_int_equal(tfs_writer_new(&o, &w), 0);
	for (int k = 0; k < 2; k++)
		assert_int_equal(tfs_writer_add_kind(w, &ring_kinds[k], &id), 0);
	snprintf(pid, sizeof(pid), "%u", 1000 + me);
	assert_int_equal(tfs_writer_set_meta(w, "pid", pid), 0);
	assert_int_equal(tfs_writer_stream_new(w, write_rank, 0, &s), 0);
	for (int i = 0; i < 50; i++) {
		union tfs_arg snd[2] = {{.i = me + 1 < n ? (int64_t)me + 1 : -1}, {.u = 64}};
		union tfs_arg any[1] = {{.i = -2}};
		union tfs_arg rcv[1] = {{.i = (int64_t)me - 1}};

		assert_int_equal(tfs_wstream_append(s, K_SEND, 0, 0, snd), 0);
		assert_int_equal(tfs_wstream_append(s, K_RECV, 0, 0, me ? rcv : any), 0);
	}
	assert_int_equal(tfs_writer_save_mem(w, &buf, &len), 0);
	tfs_writer_free(w);
	mt_open(m, buf, len);
}

static uint64_t stream_text(struct tfs_trace *t, uint32_t rank, char *buf, size_t cap)
{
	uint32_t idx;
	uint64_t n;
	char *v;

	assert_int_equal(tfs_trace_find_stream(t, rank, 0, &idx), 0);
	v = read_view(t, idx, TFS_VIEW_TEXT, &n);
	assert_true(n < cap);
	memcpy(buf, v, n + 1);
	free(v);
	return n;
}

/* Each process's absolute ranks survive; ranks doing the same share one grammar. */
static void test_merge_rebases_ranks_of_a_ring(void **state)
{
	enum { P = 6 };
	struct mtrace in[P], m;
	struct tfs_trace *t[P];
	struct tfs_trace_info oi;
	char buf[8192], want[128];
	char sig[128];

	for (uint32_t r = 0; r < P; r++) {
		ring_trace(&in[r], r, P, 0);
		t[r] = in[r].t;
	}
	assert_int_equal(merge(t, P, &m), 0);
	tfs_trace_get_info(m.t, &oi);
	assert_int_equal(oi.n_ranks, P);
	/* send(r+1), recv(r-1) for the middle ranks; recv(-2) at 0; send(-1) at P-1 */
	assert_int_equal(oi.n_terminals, 4);
	assert_int_equal(oi.n_sections, 5 + 3);
	for (uint32_t r = 0; r < P; r++) {
		stream_text(m.t, r, buf, sizeof(buf));
		if (r + 1 < P)
			snprintf(want, sizeof(want), "T0 send(dest=%u, bytes=64)\n", r + 1);
		else
			snprintf(want, sizeof(want), "T0 send(dest=-1, bytes=64)\n");
		assert_memory_equal(buf, want, strlen(want));
		/* r-1 is -1 at rank 0: two characters wide, so padded where it is one digit */
		if (r)
			snprintf(want, sizeof(want), "T0 recv(src=%u) \n", r - 1);
		else
			snprintf(want, sizeof(want), "T0 recv(src=-2)\n");
		assert_memory_equal(strchr(buf, '\n') + 1, want, strlen(want));
	}
	for (uint32_t term = 0; term < oi.n_terminals; term++) {
		assert_true(tfs_trace_signature(m.t, term, sig, sizeof(sig)) > 0);
		assert_true(strcmp(sig, "send(dest=r+1, bytes=64)") == 0 ||
			    strcmp(sig, "recv(src=-2)") == 0 || strcmp(sig, "recv(src=r-1)") == 0 ||
			    strcmp(sig, "send(dest=-1, bytes=64)") == 0);
	}
	for (uint32_t r = 0; r < P; r++) {
		snprintf(want, sizeof(want), "%u", 1000 + r);
		assert_string_equal(tfs_trace_meta_rank(m.t, "pid", r), want);
		mt_close(&in[r]);
	}
	mt_close(&m);
}

/* Negative ranks: the same signature and the same text at every rank, never relative. */
static void test_special_ranks_are_absolute(void **state)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
	union tfs_arg big[2] = {{.i = INT64_C(1) << 62}, {.u = 1}};
	union tfs_arg small[2] = {{.i = -(INT64_C(1) << 62) - 1}, {.u = 1}};
	union tfs_arg jsonl_arg[2] = {{.i = -3}, {.u = 8}};
	struct tfs_trace_info ti;
	struct tfs_writer *w;
	struct tfs_wstream *s[3];
	struct mtrace m;
	struct tfs_event ev;
	struct tfs_cursor *c;
	uint32_t id;
	void *buf, *again;
	size_t len, again_len;
	char text[256], sig[64];

	assert_int_equal(tfs_writer_new(&o, &w), 0);
	for (int k = 0; k < 2; k++)
		assert_int_equal(tfs_writer_add_kind(w, &ring_kinds[k], &id), 0);
	for (uint32_t r = 0; r < 3; r++) {
		union tfs_arg snd[2] = {{.i = -1}, {.u = 8}};

		assert_int_equal(tfs_writer_stream_new(w, 10 * r, 0, &s[r]), 0);
		assert_int_equal(tfs_wstream_append(s[r], K_SEND, 0, 0, snd), 0);
		assert_int_equal(tfs_wstream_append(s[r], K_SEND, 0, 0, jsonl_arg), 0);
	}
	assert_int_equal(tfs_wstream_append(s[0], K_SEND, 0, 0, big), -EINVAL);
	assert_int_equal(tfs_wstream_append(s[0], K_SEND, 0, 0, small), -EINVAL);
	assert_int_equal(tfs_writer_save_mem(w, &buf, &len), 0);
	assert_int_equal(tfs_writer_save_mem(w, &again, &again_len), -EALREADY);
	assert_null(again);
	tfs_writer_free(w);
	mt_open(&m, buf, len);
	tfs_trace_get_info(m.t, &ti);
	assert_int_equal(ti.n_terminals, 2);
	assert_int_equal(ti.n_ranks, 21);
	assert_true(tfs_trace_signature(m.t, 0, sig, sizeof(sig)) > 0);
	assert_string_equal(sig, "send(dest=-1, bytes=8)");
	for (uint32_t r = 0; r < 3; r++) {
		stream_text(m.t, 10 * r, text, sizeof(text));
		/* specials print at their own width whatever the rank count */
		assert_string_equal(text, "T0 send(dest=-1, bytes=8)\nT0 send(dest=-3, bytes=8)\n");
		assert_int_equal(tfs_trace_find_stream(m.t, 10 * r, 0, &id), 0);
		assert_int_equal(tfs_cursor_new(m.t, id, TFS_VIEW_JSONL, 0, 2, &c), 0);
		assert_int_equal(tfs_cursor_event(c, 1, &ev, NULL), 0);
		assert_int_equal(ev.args[0].i, -3);
		assert_true(tfs_cursor_pread(c, text, sizeof(text) - 1, 0, NULL) > 0);
		assert_non_null(strstr(text, "\"dest\":-1,"));
		tfs_cursor_free(c);
	}
	mt_close(&m);
}

static const struct tfs_arg_desc tag_args[] = {
    {.name = "dest", .type = TFS_TYPE_I64, .enc = TFS_ENC_RANK},
    {.name = "tag", .type = TFS_TYPE_I64, .enc = TFS_ENC_RVAL},
};
static const struct tfs_kind_desc tag_kind = {"tsend", "mpi", 2, tag_args};
static const struct tfs_arg_desc bad_tag_args[] = {
    {.name = "tag", .type = TFS_TYPE_U64, .enc = TFS_ENC_RVAL},
};
static const struct tfs_kind_desc bad_tag_kind = {"usend", "mpi", 1, bad_tag_args};

/* Process @me of a ring alone: sends tagged with its own rank, then with the constant 7. */
static void tag_trace(struct mtrace *m, uint32_t me, uint32_t n)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
	union tfs_arg far[2] = {{.i = 0}, {.u = tfs_rval(TFS_RVAL_LIMIT, 0)}};
	struct tfs_writer *w;
	struct tfs_wstream *s;
	uint32_t id;
	void *buf;
	size_t len;

	assert_int_equal(tfs_writer_new(&o, &w), 0);
	/* an RVAL argument is signed */
	assert_int_equal(tfs_writer_add_kind(w, &bad_tag_kind, &id), -EINVAL);
	assert_int_equal(tfs_writer_add_kind(w, &tag_kind, &id), 0);
	assert_int_equal(tfs_writer_stream_new(w, 0, 0, &s), 0);
	for (int i = 0; i < 20; i++) {
		union tfs_arg own[2] = {{.i = (me + 1) % n}, {.u = tfs_rval(me, 1)}};
		union tfs_arg lit[2] = {{.i = (me + 1) % n}, {.u = tfs_rval(7, 0)}};

		assert_int_equal(tfs_wstream_append(s, 0, 0, 0, own), 0);
		assert_int_equal(tfs_wstream_append(s, 0, 0, 0, lit), 0);
	}
	assert_int_equal(tfs_wstream_append(s, 0, 0, 0, far), -EINVAL);
	assert_int_equal(tfs_writer_save_mem(w, &buf, &len), 0);
	tfs_writer_free(w);
	mt_open(m, buf, len);
}

/*
 * A tag derived from the rank prints absolute at every rank yet is one signature for all
 * the ranks but the last of the ring (they share one grammar: the first stream's); a
 * constant tag stays a constant.
 */
static void test_merge_rebases_rank_derived_values(void **state)
{
	enum { P = 7 };
	struct mtrace in[P], m;
	struct tfs_trace *t[P];
	struct tfs_trace_info oi;
	struct tfs_stream_info si;
	struct tfs_event ev;
	struct tfs_cursor *c;
	union tfs_arg ta[TFS_MAX_ARGS];
	char buf[8192], want[128], sig[128];
	uint32_t idx, n_own = 0;

	for (uint32_t r = 0; r < P; r++) {
		tag_trace(&in[r], r, P);
		t[r] = in[r].t;
	}
	assert_int_equal(merge(t, P, &m), 0);
	tfs_trace_get_info(m.t, &oi);
	for (uint32_t r = 0; r < P; r++) {
		stream_text(m.t, r, buf, sizeof(buf));
		/* dest=r-6 of the last rank would print "-6" at rank 0: padded to two */
		snprintf(want, sizeof(want), "T0 tsend(dest=%u, tag=%u)%s\nT0 tsend(dest=%u, tag=7)",
			 (r + 1) % P, r, r + 1 < P ? "" : " ", (r + 1) % P);
		assert_memory_equal(buf, want, strlen(want));
		assert_int_equal(tfs_trace_find_stream(m.t, r, 0, &idx), 0);
		assert_int_equal(tfs_trace_stream(m.t, idx, &si), 0);
		if (r + 1 < P)
			assert_int_equal(si.same_as, 0);
		assert_int_equal(tfs_cursor_new(m.t, idx, TFS_VIEW_JSONL, 0, 2, &c), 0);
		assert_int_equal(tfs_cursor_event(c, 0, &ev, NULL), 0);
		assert_int_equal(ev.args[1].i, (int64_t)r);
		assert_int_equal(tfs_cursor_event(c, 1, &ev, NULL), 0);
		assert_int_equal(ev.args[1].i, 7);
		tfs_cursor_free(c);
	}
	/* own tag: one terminal for every rank but the last (dest wraps to 0 there) */
	for (uint32_t term = 0; term < oi.n_terminals; term++) {
		assert_true(tfs_trace_signature(m.t, term, sig, sizeof(sig)) > 0);
		assert_int_equal(tfs_trace_term_args(m.t, term, ta), 0);
		if (strcmp(sig, "tsend(dest=r+1, tag=r)") == 0) {
			assert_int_equal(ta[1].i, 0);
			n_own++;
		} else if (strstr(sig, "tag=7")) {
			assert_int_equal(ta[1].i, 7);
		} else {
			assert_string_equal(sig, "tsend(dest=r-6, tag=r)");
		}
	}
	assert_int_equal(n_own, 1);
	assert_int_equal(oi.n_terminals, 4);
	for (uint32_t r = 0; r < P; r++)
		mt_close(&in[r]);
	mt_close(&m);
}

static const struct tfs_arg_desc twin_args[] = {
    {.name = "dest", .type = TFS_TYPE_I64, .enc = TFS_ENC_RANK},
    {.name = "tag", .type = TFS_TYPE_I64, .enc = TFS_ENC_RVAL},
    {.name = "len", .type = TFS_TYPE_U64, .enc = TFS_ENC_VAL},
};
static const struct tfs_kind_desc twin_kind = {"vsend", "mpi", 3, twin_args};

/*
 * Rank @me of a ring of @n, timed: 30 sends to the next rank with the constant tag @tag,
 * which the writer is told is derived from the rank where it equals the sender's rank or
 * the destination (as the MPI capture decides), lengths 8 but 123456 for rank @wide's last.
 * With @both, every send is followed by one with the tag told literal.
 */
static void twin_trace(struct mtrace *m, uint32_t me, uint32_t n, int64_t tag, uint32_t wide,
		       bool both)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_LOSSLESS};
	const uint32_t dest = (me + 1) % n;
	const bool derived = tag == me || tag == dest;
	struct tfs_writer *w;
	struct tfs_wstream *s;
	uint64_t ts = 1000 + 17 * me;
	uint32_t id;
	void *buf;
	size_t len;

	assert_int_equal(tfs_writer_new(&o, &w), 0);
	assert_int_equal(tfs_writer_add_kind(w, &twin_kind, &id), 0);
	assert_int_equal(tfs_writer_stream_new(w, 0, 0, &s), 0);
	for (int i = 0; i < 30; i++) {
		union tfs_arg a[3] = {{.i = dest}, {.u = tfs_rval(tag, derived)},
				      {.u = me == wide && i == 29 ? 123456 : 8}};
		union tfs_arg lit[3] = {{.i = dest}, {.u = tfs_rval(tag, 0)}, {.u = 9}};

		assert_int_equal(tfs_wstream_append(s, 0, ts, 40 + i % 7 + me, a), 0);
		ts += 100 + (uint64_t)(i * 13 % 29);
		if (both) {
			assert_int_equal(tfs_wstream_append(s, 0, ts, 300 + i, lit), 0);
			ts += 500;
		}
	}
	assert_int_equal(tfs_writer_save_mem(w, &buf, &len), 0);
	tfs_writer_free(w);
	mt_open(m, buf, len);
}

static uint32_t n_grammar_sections(struct tfs_trace *t)
{
	struct tfs_section_info si;
	uint32_t n = 0;

	for (uint32_t i = 0; tfs_trace_section(t, i, &si) == 0; i++)
		n += strcmp(si.type_name, "grammar") == 0;
	return n;
}

/*
 * A constant equal to a rank, written as derived from it (tag 7 at rank 7 and at rank 6,
 * which sends to 7), gets the signature of the same call with the literal 7 that the other
 * ranks have: ranks 0 to 7 share one grammar, rank 8 (sending to 0) has its own, merged all
 * at once or pairwise. Every rank renders what it rendered alone, and the twin's length
 * grows to fit rank 7's wide value.
 */
static void test_merge_gives_constants_their_literal_twins(void **state)
{
	enum { P = 9 };
	struct mtrace in[P], all, lo, hi, pair;
	struct tfs_trace *t[P], *p[2];
	struct tfs_trace_info ai;
	char sig[128];
	uint32_t n_derived = 0;

	for (uint32_t r = 0; r < P; r++) {
		twin_trace(&in[r], r, P, 7, 7, false);
		t[r] = in[r].t;
	}
	assert_int_equal(merge(t, P, &all), 0);
	assert_int_equal(merge(t, 6, &lo), 0);
	assert_int_equal(merge(t + 6, P - 6, &hi), 0);
	p[0] = lo.t;
	p[1] = hi.t;
	assert_int_equal(merge(p, 2, &pair), 0);
	assert_int_equal(n_grammar_sections(all.t), 2);
	assert_int_equal(n_grammar_sections(pair.t), 2);
	/* ranks 6 to 8 alone have no literal twin for the sends of 6 and 7: the last merge does */
	assert_int_equal(n_grammar_sections(hi.t), 3);
	assert_int_equal(tfs_trace_verify(all.t, NULL), 0);
	assert_int_equal(tfs_trace_verify(pair.t, NULL), 0);
	for (uint32_t r = 0; r < P; r++) {
		char *v;
		uint64_t n;
		uint32_t idx;

		assert_views(in[r].t, 0, all.t, r, 0, true);
		assert_same_views(all.t, r, pair.t, r, 0);
		/* each line of one terminal is as long as the others, the wide one included */
		assert_int_equal(tfs_trace_find_stream(all.t, r, 0, &idx), 0);
		v = read_view(all.t, idx, TFS_VIEW_TEXT, &n);
		assert_int_equal(n % 30, 0);
		assert_non_null(strstr(v, r == 7 ? "tag=7, len=123456)" : "tag=7, len=8)"));
		free(v);
	}
	tfs_trace_get_info(all.t, &ai);
	for (uint32_t term = 0; term < ai.n_terminals; term++) {
		assert_true(tfs_trace_signature(all.t, term, sig, sizeof(sig)) > 0);
		n_derived += strstr(sig, "tag=r") != NULL;
	}
	/* still in the table (nothing refers to them), with the twins */
	assert_int_equal(n_derived, 2);
	for (uint32_t r = 0; r < P; r++)
		mt_close(&in[r]);
	mt_close(&all);
	mt_close(&lo);
	mt_close(&hi);
	mt_close(&pair);
}

/*
 * A stream that has both the derived form and its literal twin keeps both terminals (its
 * values decode per terminal): rank 7's grammar stays its own and renders as it did.
 */
static void test_merge_twin_already_in_the_stream(void **state)
{
	enum { P = 9 };
	struct mtrace in[P], all;
	struct tfs_trace *t[P];

	for (uint32_t r = 0; r < P; r++) {
		twin_trace(&in[r], r, P, 7, P, true);
		t[r] = in[r].t;
	}
	assert_int_equal(merge(t, P, &all), 0);
	/* 0 to 5; 6 and 7 (a derived and a literal send each); 8 (sends to 0) */
	assert_int_equal(n_grammar_sections(all.t), 4);
	for (uint32_t r = 0; r < P; r++) {
		assert_views(in[r].t, 0, all.t, r, 0, true);
		mt_close(&in[r]);
	}
	mt_close(&all);
}

static const struct tfs_arg_desc xchg_args[] = {
    {.name = "sendtag", .type = TFS_TYPE_I64, .enc = TFS_ENC_RVAL},
    {.name = "recvtag", .type = TFS_TYPE_I64, .enc = TFS_ENC_RVAL},
    {.name = "len", .type = TFS_TYPE_U64, .enc = TFS_ENC_VAL},
};
static const struct tfs_kind_desc xchg_kind = {"xchg", "mpi", 3, xchg_args};

/*
 * Rank @me: 20 exchanges tagged 7 both ways, lengths that differ per event; rank 7 says the
 * send tag is derived from its rank in the even ones and the receive tag in the odd ones,
 * two terminals whose twin is one: the (7, 7) every other rank has.
 */
static void xchg_trace(struct mtrace *m, uint32_t me)
{
	struct tfs_writer *w;
	struct tfs_wstream *s;
	uint32_t id;
	void *buf;
	size_t len;

	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(tfs_writer_add_kind(w, &xchg_kind, &id), 0);
	assert_int_equal(tfs_writer_stream_new(w, 0, 0, &s), 0);
	for (uint32_t i = 0; i < 20; i++) {
		union tfs_arg a[3] = {{.u = tfs_rval(7, me == 7 && i % 2 == 0)},
				      {.u = tfs_rval(7, me == 7 && i % 2 == 1)},
				      {.u = i % 2 ? 1000 + 3 * i : 5 * i + me}};

		assert_int_equal(tfs_wstream_append(s, id, 0, 0, a), 0);
	}
	assert_int_equal(tfs_writer_save_mem(w, &buf, &len), 0);
	tfs_writer_free(w);
	mt_open(m, buf, len);
}

/*
 * Two terminals of a stream with one twin keep their own (the values section decodes each
 * with its own state): rank 7's grammar stays its own, and every rank renders as alone.
 */
static void test_merge_no_shared_twin(void **state)
{
	enum { P = 9 };
	struct mtrace in[P], all;
	struct tfs_trace *t[P];

	for (uint32_t r = 0; r < P; r++) {
		xchg_trace(&in[r], r);
		t[r] = in[r].t;
	}
	assert_int_equal(merge(t, P, &all), 0);
	assert_int_equal(n_grammar_sections(all.t), 2);
	assert_int_equal(tfs_trace_verify(all.t, NULL), 0);
	for (uint32_t r = 0; r < P; r++) {
		assert_views(in[r].t, 0, all.t, r, 0, true);
		mt_close(&in[r]);
	}
	mt_close(&all);
}

/* A trace with RVAL arguments: every truncation and every single-bit flip is refused. */
static void test_rank_derived_values_damage_refused(void **state)
{
	struct mtrace in[3], m;
	struct tfs_trace *t[3], *bad;
	struct tfs_diag d;
	uint8_t *g;

	for (uint32_t r = 0; r < 3; r++) {
		tag_trace(&in[r], r, 3);
		t[r] = in[r].t;
	}
	assert_int_equal(merge(t, 3, &m), 0);
	g = m.buf;
	for (size_t len = 0; len < m.len; len++) {
		memset(&d, 0, sizeof(d));
		if (tfs_trace_open_mem(g, len, &bad, &d) == 0)
			fail_msg("truncation at %zu opened", len);
		assert_true(d.reason[0] != '\0');
	}
	for (size_t i = 0; i < m.len * 8; i++) {
		int rc;

		g[i / 8] ^= (uint8_t)(1u << (i % 8));
		memset(&d, 0, sizeof(d));
		rc = tfs_trace_open_mem(g, m.len, &bad, &d);
		if (rc == 0) {
			rc = tfs_trace_verify(bad, &d);
			tfs_trace_close(bad);
		}
		if (rc != -TFS_ECORRUPT && rc != -TFS_EFORMAT)
			fail_msg("bit flip %zu: rc=%d, expected a refusal", i, rc);
		assert_true(d.reason[0] != '\0');
		g[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
	for (uint32_t r = 0; r < 3; r++)
		mt_close(&in[r]);
	mt_close(&m);
}


/* A format 1.0 trace (relative ranks the 1.0 way) merges into 1.1 and renders the same. */
static void test_merge_reads_format_1_0(void **state)
{
	struct tfs_trace *in[2];
	struct tfs_trace_info gi;
	struct mtrace g, m;
	uint8_t *raw;
	size_t n;

	raw = slurp(TFS_TEST_DATA "/golden/small.trace", &n);
	mt_open(&g, raw, n);
	tfs_trace_get_info(g.t, &gi);
	assert_int_equal(gi.version_minor, 0);
	in[0] = in[1] = g.t;
	assert_int_equal(merge(in, 2, &m), 0);
	for (uint32_t r = 0; r < 2 * gi.n_ranks; r++)
		assert_views(m.t, r, g.t, r % gi.n_ranks, 0, true);
	/* absolute ranks kept: the copy's rank 0 (now 2) still sends to rank 1 */
	{
		struct tfs_cursor *c;
		struct tfs_event ev;
		uint32_t idx;

		assert_int_equal(tfs_trace_find_stream(m.t, 2, 0, &idx), 0);
		assert_int_equal(tfs_cursor_new(m.t, idx, TFS_VIEW_TEXT, 0, 1, &c), 0);
		assert_int_equal(tfs_cursor_event(c, 4, &ev, NULL), 0);
		assert_int_equal(ev.kind, TG_SEND);
		assert_int_equal(ev.args[0].i, 1);
		tfs_cursor_free(c);
	}
	mt_close(&m);
	mt_close(&g);
}

/* Pairwise rounds (MPI) give the ranks, views and metadata of one merge of everything. */
static void test_merge_pairwise_equals_all_at_once(void **state)
{
	uint64_t seed = tu_seed("pairwise");
	struct mtrace in[4], ab, cd, all, pair;
	struct tfs_trace *t[4], *p[2];
	const char *pids[4] = {"10", "11", "10", "13"};
	struct tfs_trace_info ai, pi;

	for (int i = 0; i < 4; i++) {
		gen_trace_ex(&in[i], TFS_TIMING_LOSSY, 1 + i % 2, 400, seed + 10 * i, pids[i],
			     true);
		t[i] = in[i].t;
	}
	assert_int_equal(merge(t, 4, &all), 0);
	assert_int_equal(merge(t, 2, &ab), 0);
	assert_int_equal(merge(t + 2, 2, &cd), 0);
	p[0] = ab.t;
	p[1] = cd.t;
	assert_int_equal(merge(p, 2, &pair), 0);
	tfs_trace_get_info(all.t, &ai);
	tfs_trace_get_info(pair.t, &pi);
	assert_int_equal(ai.n_ranks, 6);
	assert_int_equal(pi.n_ranks, 6);
	assert_int_equal(ai.n_sections, pi.n_sections);
	assert_int_equal(tfs_trace_verify(pair.t, NULL), 0);
	for (uint32_t r = 0; r < 6; r++) {
		static const char *const want[6] = {"10", "11", "11", "10", "13", "13"};

		for (uint32_t th = 0; th < 2; th++)
			assert_same_views(all.t, r, pair.t, r, th);
		assert_string_equal(tfs_trace_meta_rank(all.t, "pid", r), want[r]);
		assert_string_equal(tfs_trace_meta_rank(pair.t, "pid", r), want[r]);
		assert_string_equal(tfs_trace_meta_rank(pair.t, "program", r), "unit-test");
	}
	assert_string_equal(tfs_trace_meta(all.t, "pid"), "10");
	assert_null(tfs_trace_meta(all.t, "program.rank1"));
	mt_close(&pair);
	mt_close(&ab);
	mt_close(&cd);
	mt_close(&all);
	for (int i = 0; i < 4; i++)
		mt_close(&in[i]);
}

/*
 * first_only_keys (MPI's pid): later inputs' values and their `pid.rank<R>` keys are dropped,
 * pairwise as at once, while other differing keys still travel with their ranks.
 */
static void test_merge_first_only_keys(void **state)
{
	static const char *const pid_only[] = {"pid", NULL};
	const struct tfs_merge_opts opts = {.first_only_keys = pid_only};
	uint64_t seed = tu_seed("first_only");
	const char *pids[4] = {"10", "11", "12", "13"};
	struct tfs_trace *t[4], *p[2];
	struct mtrace in[4], ab, cd, pair, all;
	struct tfs_diag d;
	void *buf;
	size_t len;

	for (int i = 0; i < 4; i++) {
		gen_trace_ex(&in[i], TFS_TIMING_NONE, 1, 50, seed + i, pids[i], false);
		t[i] = in[i].t;
	}
	/* a key that differs and is not listed: rank 3's "end" is kept */
	{
		struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
		struct tfs_writer *w;
		struct tg_stream s = {.rank = 0, .thread = 0};

		mt_close(&in[3]);
		assert_int_equal(tfs_writer_new(&o, &w), 0);
		assert_int_equal(tg_declare(w), 0);
		assert_int_equal(tfs_writer_set_meta(w, "program", "unit-test"), 0);
		assert_int_equal(tfs_writer_set_meta(w, "pid", "13"), 0);
		assert_int_equal(tfs_writer_set_meta(w, "end", "abort"), 0);
		assert_int_equal(tg_fill(&s, 50, 1, seed), 0);
		assert_int_equal(tg_write(w, &s), 0);
		tg_free(&s);
		assert_int_equal(tfs_writer_save_mem(w, &buf, &len), 0);
		tfs_writer_free(w);
		mt_open(&in[3], buf, len);
		t[3] = in[3].t;
	}
	assert_int_equal(tfs_merge_traces_opts(t, 4, &opts, &buf, &len, &d), 0);
	mt_open(&all, buf, len);
	assert_int_equal(tfs_merge_traces_opts(t, 2, &opts, &buf, &len, &d), 0);
	mt_open(&ab, buf, len);
	assert_int_equal(tfs_merge_traces_opts(t + 2, 2, &opts, &buf, &len, &d), 0);
	mt_open(&cd, buf, len);
	p[0] = ab.t;
	p[1] = cd.t;
	assert_int_equal(tfs_merge_traces_opts(p, 2, &opts, &buf, &len, &d), 0);
	mt_open(&pair, buf, len);
	for (uint32_t r = 0; r < 4; r++) {
		assert_string_equal(tfs_trace_meta_rank(all.t, "pid", r), "10");
		assert_string_equal(tfs_trace_meta_rank(pair.t, "pid", r), "10");
	}
	assert_null(tfs_trace_meta(pair.t, "pid.rank2"));
	assert_null(tfs_trace_meta_rank(pair.t, "end", 2));
	assert_string_equal(tfs_trace_meta_rank(pair.t, "end", 3), "abort");
	assert_string_equal(tfs_trace_meta_rank(all.t, "end", 3), "abort");
	/* without the option every pid stays */
	assert_int_equal(tfs_merge_traces_opts(p, 2, NULL, &buf, &len, &d), 0);
	mt_close(&all);
	mt_open(&all, buf, len);
	assert_string_equal(tfs_trace_meta_rank(all.t, "pid", 2), "12");
	mt_close(&all);
	mt_close(&pair);
	mt_close(&ab);
	mt_close(&cd);
	for (int i = 0; i < 4; i++)
		mt_close(&in[i]);
}

/* Kinds declared in another order are matched by description. */
static void test_merge_matches_kinds_by_description(void **state)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
	struct mtrace a, b, m;
	struct tfs_trace *in[2];
	struct tfs_trace_info mi;
	char text[512];

	ring_trace(&a, 1, 4, 0);
	{
		struct tfs_writer *w;
		struct tfs_wstream *s;
		union tfs_arg rcv[1] = {{.i = 0}};
		union tfs_arg snd[2] = {{.i = 2}, {.u = 64}};
		uint32_t id;
		void *buf;
		size_t len;

		assert_int_equal(tfs_writer_new(&o, &w), 0);
		assert_int_equal(tfs_writer_add_kind(w, &ring_kinds[1], &id), 0);
		assert_int_equal(tfs_writer_add_kind(w, &ring_kinds[0], &id), 0);
		assert_int_equal(tfs_writer_stream_new(w, 0, 0, &s), 0);
		assert_int_equal(tfs_wstream_append(s, 1, 0, 0, snd), 0);
		assert_int_equal(tfs_wstream_append(s, 0, 0, 0, rcv), 0);
		assert_int_equal(tfs_writer_save_mem(w, &buf, &len), 0);
		tfs_writer_free(w);
		mt_open(&b, buf, len);
	}
	in[0] = a.t;
	in[1] = b.t;
	assert_int_equal(merge(in, 2, &m), 0);
	tfs_trace_get_info(m.t, &mi);
	assert_int_equal(mi.n_kinds, 2);
	stream_text(m.t, 1, text, sizeof(text));
	assert_string_equal(text, "T0 send(dest=2, bytes=64)\nT0 recv(src=0) \n");
	mt_close(&m);
	mt_close(&a);
	mt_close(&b);
}

static void test_merge_refuses_bad_input(void **state)
{
	struct mtrace a, b, lossy;
	struct tfs_trace *in[2];
	struct tfs_trace_info ai;
	struct tfs_section_info si;
	struct tfs_diag d;
	void *buf;
	size_t len;

	gen_trace(&a, TFS_TIMING_LOSSLESS, 1, 5000, 3, "1");
	gen_trace(&lossy, TFS_TIMING_LOSSY, 1, 50, 3, "1");
	in[0] = a.t;
	in[1] = lossy.t;
	assert_int_equal(tfs_merge_traces(in, 0, &buf, &len, &d), -EINVAL);
	assert_int_equal(tfs_merge_traces(in, 2, &buf, &len, &d), -EINVAL);
	assert_non_null(strstr(d.reason, "timing"));
	assert_null(buf);
	/* damage a value block behind the section's head checksum: open cannot see it */
	gen_trace(&b, TFS_TIMING_LOSSLESS, 1, 5000, 3, "1");
	tfs_trace_get_info(b.t, &ai);
	for (uint32_t i = 0; i < ai.n_sections; i++) {
		assert_int_equal(tfs_trace_section(b.t, i, &si), 0);
		if (strcmp(si.type_name, "values") == 0)
			break;
	}
	assert_string_equal(si.type_name, "values");
	((uint8_t *)b.buf)[si.offset + si.stored_bytes - 3] ^= 0x10;
	in[1] = b.t;
	assert_int_equal(tfs_merge_traces(in, 2, &buf, &len, &d), -TFS_ECORRUPT);
	assert_string_equal(d.section, "values");
	assert_int_equal(d.offset, si.offset);
	assert_non_null(strstr(d.reason, "input 1: "));
	assert_null(buf);
	mt_close(&a);
	mt_close(&b);
	mt_close(&lossy);
}

/* Threads differing only in their start addresses: one values section plus a vpatch. */
static void shifted_trace(struct mtrace *m, uint32_t n_threads)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
	struct tfs_writer *w;
	void *buf;
	size_t len;

	assert_int_equal(tfs_writer_new(&o, &w), 0);
	assert_int_equal(tg_declare(w), 0);
	for (uint32_t i = 0; i < n_threads; i++) {
		struct tg_stream s = {.rank = 0, .thread = i};

		assert_int_equal(tg_fill(&s, 3000, 1, 42), 0);
		for (uint64_t j = 0; j < s.n; j++)
			if (s.ev[j].kind == TG_MALLOC)
				s.ev[j].args[1].u += i * 0x100000ull;
		assert_int_equal(tg_write(w, &s), 0);
		tg_free(&s);
	}
	assert_int_equal(tfs_writer_save_mem(w, &buf, &len), 0);
	tfs_writer_free(w);
	mt_open(m, buf, len);
}

static uint32_t count_sections(struct tfs_trace *t, const char *type)
{
	struct tfs_trace_info ti;
	struct tfs_section_info si;
	uint32_t n = 0;

	tfs_trace_get_info(t, &ti);
	for (uint32_t i = 0; i < ti.n_sections; i++) {
		assert_int_equal(tfs_trace_section(t, i, &si), 0);
		n += strcmp(si.type_name, type) == 0;
	}
	return n;
}

/* Patched values (FORMAT.md §8.1) survive a merge: re-based on the copied values section. */
static void test_merge_keeps_patched_values(void **state)
{
	struct mtrace a, b, m;
	struct tfs_trace *in[3];

	shifted_trace(&a, 4);
	shifted_trace(&b, 3);
	assert_int_equal(count_sections(a.t, "vpatch"), 1);
	in[0] = a.t;
	in[1] = b.t;
	in[2] = a.t;
	assert_int_equal(merge(in, 3, &m), 0);
	assert_int_equal(tfs_trace_verify(m.t, NULL), 0);
	/* one values section for all (equal bytes), one vpatch section per input */
	assert_int_equal(count_sections(m.t, "values"), 1);
	assert_int_equal(count_sections(m.t, "vpatch"), 3);
	/* sends to rank 1 re-based at ranks 1 and 2 are wider: padding differs */
	for (uint32_t th = 0; th < 4; th++) {
		assert_views(m.t, 0, a.t, 0, th, true);
		assert_views(m.t, 2, a.t, 0, th, true);
	}
	for (uint32_t th = 0; th < 3; th++)
		assert_views(m.t, 1, b.t, 0, th, true);
	mt_close(&m);
	mt_close(&a);
	mt_close(&b);
}

/* A trace with backtraces for ranks 0 and 2 and symbols for rank 2. */
static void stacks_trace(struct mtrace *m, uint64_t salt)
{
	struct tfs_writer *w;
	struct tfs_src_frame sf[2] = {{"main", "a.c", 3}, {"inlined", "b.h", 7 + (int)salt}};
	void *buf;
	size_t len;

	assert_int_equal(tfs_writer_new(NULL, &w), 0);
	assert_int_equal(tg_declare(w), 0);
	for (uint32_t r = 0; r < 3; r++) {
		struct tg_stream s = {.rank = r, .thread = 0};

		assert_int_equal(tg_fill(&s, 50, 1, 3), 0);
		assert_int_equal(tg_write(w, &s), 0);
		tg_free(&s);
	}
	for (uint32_t r = 0; r < 3; r += 2) {
		for (uint64_t id = 0; id < 20; id++) {
			uint64_t fr[4] = {0x401000, 0x402000 + r, 0x403000 + id % 3, salt};

			assert_int_equal(tfs_writer_add_backtrace(w, r, id, fr, 3 + (id & 1)), 0);
		}
	}
	assert_int_equal(tfs_writer_add_symbol(w, 2, 0x401000, sf, 2), 0);
	assert_int_equal(tfs_writer_save_mem(w, &buf, &len), 0);
	tfs_writer_free(w);
	mt_open(m, buf, len);
}

static void assert_same_stacks(struct tfs_trace *a, uint32_t ra, struct tfs_trace *b, uint32_t rb)
{
	const struct tfs_src_frame *fa, *fb;
	uint32_t na, nb;

	assert_int_equal(tfs_trace_n_backtraces(a, ra), tfs_trace_n_backtraces(b, rb));
	for (uint64_t id = 0; id < tfs_trace_n_backtraces(a, ra); id++) {
		const uint64_t *xa, *xb;

		assert_int_equal(tfs_trace_backtrace(a, ra, id, &xa, &na, NULL), 0);
		assert_int_equal(tfs_trace_backtrace(b, rb, id, &xb, &nb, NULL), 0);
		assert_int_equal(na, nb);
		assert_memory_equal(xa, xb, na * sizeof(*xa));
	}
	assert_int_equal(tfs_trace_symbol(a, ra, 0x401000, &fa, &na, NULL),
			 tfs_trace_symbol(b, rb, 0x401000, &fb, &nb, NULL));
	if (tfs_trace_symbol(a, ra, 0x401000, &fa, &na, NULL) == 0) {
		assert_int_equal(na, nb);
		for (uint32_t i = 0; i < na; i++) {
			assert_string_equal(fa[i].function, fb[i].function);
			assert_string_equal(fa[i].file, fb[i].file);
			assert_int_equal(fa[i].line, fb[i].line);
		}
	}
}

/* Backtraces and symbols travel with their ranks; equal sections are stored once. */
static void test_merge_carries_backtraces_and_symbols(void **state)
{
	struct mtrace a, b, m;
	struct tfs_trace *in[3];

	stacks_trace(&a, 0);
	stacks_trace(&b, 1);
	in[0] = a.t;
	in[1] = b.t;
	in[2] = a.t;
	assert_int_equal(merge(in, 3, &m), 0);
	assert_int_equal(tfs_trace_verify(m.t, NULL), 0);
	for (uint32_t r = 0; r < 3; r++) {
		assert_same_stacks(m.t, r, a.t, r);
		assert_same_stacks(m.t, 3 + r, b.t, r);
		assert_same_stacks(m.t, 6 + r, a.t, r);
	}
	assert_int_equal(tfs_trace_n_backtraces(m.t, 1), 0);
	assert_int_equal(tfs_trace_n_backtraces(m.t, 8), 20);
	/* a's and b's sections differ (salt), the second copy of a shares a's */
	assert_int_equal(count_sections(m.t, "backtraces"), 2 * count_sections(a.t, "backtraces"));
	assert_int_equal(count_sections(m.t, "symbols"), 2 * count_sections(a.t, "symbols"));
	mt_close(&m);
	mt_close(&a);
	mt_close(&b);
}

/* open_mem reads what save_mem wrote, the same bytes save writes; truncations refused. */
static void test_mem_round_trip(void **state)
{
	struct tfs_writer *w[2];
	struct tg_stream s = {.rank = 0, .thread = 3};
	char path[64];
	struct tfs_trace *t;
	struct tfs_diag d;
	uint8_t *file;
	void *buf;
	size_t len, n;

	snprintf(path, sizeof(path), "/tmp/tfs-merge-%d.trace", (int)getpid());
	assert_int_equal(tg_fill(&s, 500, 0, 77), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tfs_writer_new(NULL, &w[i]), 0);
		assert_int_equal(tg_declare(w[i]), 0);
		assert_int_equal(tg_write(w[i], &s), 0);
	}
	assert_int_equal(tfs_writer_save_mem(w[0], &buf, &len), 0);
	assert_int_equal(tfs_writer_save(w[1], path), 0);
	file = slurp(path, &n);
	unlink(path);
	assert_int_equal(n, len);
	assert_memory_equal(file, buf, len);
	assert_int_equal(tfs_trace_open_mem(buf, len, &t, &d), 0);
	assert_int_equal(tfs_trace_verify(t, &d), 0);
	tfs_trace_close(t);
	for (size_t cut = 0; cut < len; cut += 1 + cut / 8) {
		assert_int_not_equal(tfs_trace_open_mem(buf, cut, &t, &d), 0);
		assert_null(t);
	}
	for (int i = 0; i < 2; i++)
		tfs_writer_free(w[i]);
	free(file);
	free(buf);
	tg_free(&s);
}

/* Every allocation of a merge and of opening its result fails in turn: clean errors. */
/* Merge @in with the k-th allocation failing, for k = 0, 1... until it succeeds. */
static void fail_each_allocation(struct tfs_trace *const *in, uint32_t n)
{
	long reached = 0;

	for (long k = 0;; k++) {
		struct tfs_trace *t = NULL;
		void *buf = NULL;
		size_t len;
		int rc;

		fa_arm(k);
		rc = tfs_merge_traces(in, n, &buf, &len, NULL);
		if (rc == 0)
			rc = tfs_trace_open_mem(buf, len, &t, NULL);
		reached = fa_count();
		fa_disarm();
		tfs_trace_close(t);
		free(buf);
		if (rc == 0)
			break;
		assert_int_equal(rc, -ENOMEM);
	}
	assert_true(reached > 20);
}

static void test_merge_allocation_failures_are_clean(void **state)
{
	struct mtrace a, b, tw[3];
	struct tfs_trace *in[3];

	gen_trace(&a, TFS_TIMING_LOSSLESS, 2, 200, 5, "1");
	gen_trace(&b, TFS_TIMING_LOSSLESS, 1, 200, 9, "2");
	in[0] = a.t;
	in[1] = b.t;
	in[2] = a.t;
	fail_each_allocation(in, 3);
	/* ranks 5 to 7 of 9 sending tag 7: 6 and 7 take their twins from 5 */
	for (uint32_t i = 0; i < 3; i++) {
		twin_trace(&tw[i], 5 + i, 9, 7, 9, false);
		in[i] = tw[i].t;
	}
	fail_each_allocation(in, 3);
	for (uint32_t i = 0; i < 3; i++)
		mt_close(&tw[i]);
	mt_close(&a);
	mt_close(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_merge_copies_render_like_the_input),
	    cmocka_unit_test(test_merge_shares_sections),
	    cmocka_unit_test(test_merge_rebases_ranks_of_a_ring),
	    cmocka_unit_test(test_special_ranks_are_absolute),
	    cmocka_unit_test(test_merge_rebases_rank_derived_values),
	    cmocka_unit_test(test_merge_gives_constants_their_literal_twins),
	    cmocka_unit_test(test_merge_twin_already_in_the_stream),
	    cmocka_unit_test(test_merge_no_shared_twin),
	    cmocka_unit_test(test_rank_derived_values_damage_refused),
	    cmocka_unit_test(test_merge_reads_format_1_0),
	    cmocka_unit_test(test_merge_pairwise_equals_all_at_once),
	    cmocka_unit_test(test_merge_first_only_keys),
	    cmocka_unit_test(test_merge_matches_kinds_by_description),
	    cmocka_unit_test(test_merge_keeps_patched_values),
	    cmocka_unit_test(test_merge_carries_backtraces_and_symbols),
	    cmocka_unit_test(test_merge_refuses_bad_input),
	    cmocka_unit_test(test_mem_round_trip),
	    cmocka_unit_test(test_merge_input_merges_to_the_same_bytes),
	    cmocka_unit_test(test_merge_allocation_failures_are_clean),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
