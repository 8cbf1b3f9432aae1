/*
 * The consumer against hand-written spools: raw records laid out here word by word (not by
 * the producer), so what the consumer makes of them is checked independently of capture.c.
 * Covers zone pairing (start, duration, depth), marks of dropped events (ending the zones
 * whose end was dropped), chunk order by sequence number whatever the
 * chunk's place, partial chunks read only at the end, phases, memory-access sites, and
 * damaged records and chunk headers, which must be skipped and counted, never crash, and
 * interposed calls (REC_CALL: numbers and NUL-separated strings matched to their kind),
 * MPI calls (kinds declared on first use), allocation backtraces (REC_CALL_BT: frames kept from the thread's previous backtrace in the
 * chunk plus new ones, interned into stack ids; REC_MODULE; symbols of objects that cannot
 * be read fall back to "<file name>+0x<offset>"; an object file rewritten between two
 * processes is read anew), allocations whose backtrace was not sampled (stack -1) and
 * damaged backtrace records. A forked
 * process's spool has memory behind its first chunks only, grows as its producer claims
 * more, and its consumer reads the ready chunks alone.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tfs/capture.h"
#include "tfs/reader.h"
#include "tfs/writer.h"
#include "calls_i.h"
#include "consumer_i.h"

struct fixture {
	struct spool spool;
	struct cap_consumer *c;
	char path[64];
};

/* A consumer over a fresh in-memory spool whose producers record @mask. */
static int setup_spool(void **state, uint32_t mask, uint32_t bt_depth)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct cap_timing tm = {TFS_TIMING_LOSSLESS, 0, TFS_CODER_AUTO};

	assert_non_null(f);
	assert_int_equal(cap_spool_create(&f->spool, NULL, 8 * SPOOL_CHUNK_BYTES, 0,
					  TFS_TIMING_LOSSLESS, TFS_TRACE_ON | mask),
			 0);
	f->spool.hdr->origin_ns = 1000;
	f->spool.hdr->bt_depth = bt_depth;
	assert_int_equal(cap_consumer_new(&f->spool, &tm, &f->c), 0);
	snprintf(f->path, sizeof(f->path), "/tmp/test_capture_consumer.%d.trace", (int)getpid());
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_spool(state, TFS_TRACE_ZONES, 0);
}

/* A spool whose producers record the interposed calls (allocations and I/O). */
static int setup_calls(void **state)
{
	return setup_spool(state, TFS_TRACE_ALLOC | TFS_TRACE_IO, 0);
}

/* A spool whose producer records MPI calls only (libtfsmpi.so). */
static int setup_mpi(void **state)
{
	return setup_spool(state, TFS_TRACE_MPI, 0);
}

/* A spool with allocation backtraces of up to 8 frames. */
static int setup_bt(void **state)
{
	return setup_spool(state, TFS_TRACE_ALLOC, 8);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	cap_consumer_free(f->c);
	cap_spool_unmap(&f->spool);
	unlink(f->path);
	free(f);
	return 0;
}

/* A chunk being written by hand. */
struct wchunk {
	struct spool_chunk *ch;
	uint64_t *w;
	uint32_t n; /* words written */
};

static struct wchunk chunk_at(struct fixture *f, uint32_t idx, uint32_t thread, uint64_t seq)
{
	struct wchunk wc = {cap_spool_chunk(&f->spool, idx), NULL, 0};

	wc.ch->thread = thread;
	wc.ch->seq = seq;
	wc.w = (uint64_t *)cap_chunk_data(wc.ch);
	if (thread >= f->spool.hdr->next_thread)
		f->spool.hdr->next_thread = thread + 1;
	return wc;
}

static void put(struct wchunk *wc, uint32_t kind, uint32_t small, uint32_t aux, uint64_t ts,
		int n_args, ...)
{
	va_list ap;
	uint32_t words = 2 + (uint32_t)n_args;

	wc->w[wc->n] = cap_rec_word0(kind, words, small, aux);
	wc->w[wc->n + 1] = ts;
	va_start(ap, n_args);
	for (int i = 0; i < n_args; i++)
		wc->w[wc->n + 2 + i] = va_arg(ap, uint64_t);
	va_end(ap);
	wc->n += words;
}

static void put_str(struct wchunk *wc, uint32_t kind, uint32_t aux, uint64_t ts,
		    const char *s)
{
	size_t len = strlen(s);
	uint32_t words = 2 + (uint32_t)((len + 7) / 8);

	wc->w[wc->n] = cap_rec_word0(kind, words, (uint32_t)len, aux);
	wc->w[wc->n + 1] = ts;
	memset(wc->w + wc->n + 2, 0, (words - 2) * 8);
	memcpy(wc->w + wc->n + 2, s, len);
	wc->n += words;
}

/* A REC_CALL: @n_args words (duration first), then @len bytes of NUL-terminated strings. */
static void put_call(struct wchunk *wc, uint32_t call, uint64_t ts, const char *strs,
		     size_t len, int n_args, ...)
{
	va_list ap;
	uint32_t words = 2 + (uint32_t)n_args + (uint32_t)((len + 7) / 8);

	wc->w[wc->n] = cap_rec_word0(REC_CALL, words, (uint32_t)len, call);
	wc->w[wc->n + 1] = ts;
	va_start(ap, n_args);
	for (int i = 0; i < n_args; i++)
		wc->w[wc->n + 2 + i] = va_arg(ap, uint64_t);
	va_end(ap);
	memset(wc->w + wc->n + 2 + n_args, 0, (words - 2 - (uint32_t)n_args) * 8);
	memcpy(wc->w + wc->n + 2 + n_args, strs, len);
	wc->n += words;
}

/*
 * A REC_CALL_BT of malloc(@size) = @ret (its further arguments 0): keep @keep frames of the
 * thread's previous backtrace, then @n_new frames; @extra words of garbage after them (0:
 * well-formed).
 */
static void put_malloc_bt(struct wchunk *wc, uint64_t ts, uint64_t size, uint64_t ret,
			  uint32_t keep, uint32_t n_new, const uint64_t *frames, uint32_t extra)
{
	const uint32_t n_args = 1 + cap_call_kinds[CALL_MALLOC].n_args; /* duration first */
	uint32_t words = 2 + n_args + 1 + n_new + extra;
	uint64_t *r = wc->w + wc->n, *bt = r + 2 + n_args;

	memset(r, 0, words * sizeof(*r));
	r[0] = cap_rec_word0(REC_CALL_BT, words, 0, CALL_MALLOC);
	r[1] = ts;
	r[3] = size;
	r[4] = ret;
	bt[0] = (uint64_t)keep | (uint64_t)n_new << 16;
	memcpy(bt + 1, frames, n_new * sizeof(*frames));
	memset(bt + 1 + n_new, 0xab, extra * sizeof(*r));
	wc->n += words;
}

/* The REC_CALL of free(@ptr), its further arguments 0. */
static void put_free(struct wchunk *wc, uint64_t ts, uint64_t ptr)
{
	const uint32_t n_args = 1 + cap_call_kinds[CALL_FREE].n_args;
	uint64_t *r = wc->w + wc->n;

	memset(r, 0, (2 + n_args) * sizeof(*r));
	r[0] = cap_rec_word0(REC_CALL, 2 + n_args, 0, CALL_FREE);
	r[1] = ts;
	r[3] = ptr;
	wc->n += 2 + n_args;
}

/* A REC_MODULE: @path loaded at @bias, spanning [@lo, @hi), the first load there (tag 0). */
static void put_module(struct wchunk *wc, uint64_t bias, uint64_t lo, uint64_t hi,
		       const char *path)
{
	size_t len = strlen(path);
	uint32_t words = 6 + (uint32_t)((len + 7) / 8);
	uint64_t *r = wc->w + wc->n;

	r[0] = cap_rec_word0(REC_MODULE, words, (uint32_t)len, 0);
	r[1] = 1000;
	r[2] = bias;
	r[3] = lo;
	r[4] = hi;
	r[5] = 0;
	memset(r + 6, 0, (words - 6) * 8);
	memcpy(r + 6, path, len);
	wc->n += words;
}

static void publish(struct wchunk *wc, uint32_t state)
{
	atomic_store(&wc->ch->fill, (uint64_t)wc->n * 8);
	atomic_store(&wc->ch->state, state);
}

/* Save, reopen, and return thread @thread's events.jsonl as one string (caller frees). */
static char *saved_view(struct fixture *f, uint32_t thread, struct tfs_trace **out)
{
	struct tfs_stream_info si;
	struct tfs_trace *t;
	struct tfs_cursor *cur;
	uint32_t idx;
	uint64_t size;
	char *buf;

	assert_int_equal(cap_consumer_save(f->c, f->path), 0);
	assert_int_equal(tfs_trace_open(f->path, &t, NULL), 0);
	assert_int_equal(tfs_trace_verify(t, NULL), 0);
	assert_int_equal(tfs_trace_find_stream(t, 0, thread, &idx), 0);
	assert_int_equal(tfs_trace_stream(t, idx, &si), 0);
	assert_int_equal(tfs_cursor_new(t, idx, TFS_VIEW_JSONL, 0, si.n_events, &cur), 0);
	size = tfs_cursor_size(cur);
	buf = calloc(1, size + 1);
	assert_non_null(buf);
	assert_int_equal(tfs_cursor_pread(cur, buf, size, 0, NULL), (ssize_t)size);
	tfs_cursor_free(cur);
	/* squeeze the padding out so lines compare simply */
	for (char *r = buf, *w = buf;; r++) {
		if (*r == ' ' && (r[1] == ' ' || r[1] == '\n' || r[1] == '\0'))
			continue;
		*w++ = *r;
		if (!*r)
			break;
	}
	*out = t;
	return buf;
}

/* --timing / TFS_TIMING: the modes, and ",fast" after a timed one (FORMAT.md §7.4.2). */
static void test_consumer_parses_timing_modes(void **state)
{
	static const struct {
		const char *s;
		int rc, timing, coder;
		double rel_err;
	} cases[] = {
		{NULL, 0, TFS_TIMING_LOSSLESS, TFS_CODER_AUTO, 0},
		{"", 0, TFS_TIMING_LOSSLESS, TFS_CODER_AUTO, 0},
		{"lossless", 0, TFS_TIMING_LOSSLESS, TFS_CODER_AUTO, 0},
		{"lossless,fast", 0, TFS_TIMING_LOSSLESS, TFS_CODER_FAST, 0},
		{"lossy:0.1", 0, TFS_TIMING_LOSSY, TFS_CODER_AUTO, 0.1},
		{"lossy:0.25,fast", 0, TFS_TIMING_LOSSY, TFS_CODER_FAST, 0.25},
		{"none", 0, TFS_TIMING_NONE, TFS_CODER_AUTO, 0},
		{"none,fast", -EINVAL, 0, 0, 0},
		{",fast", -EINVAL, 0, 0, 0},
		{"lossless,fas", -EINVAL, 0, 0, 0},
		{"lossless,fast,fast", -EINVAL, 0, 0, 0},
		{"lossy:0.1fast", -EINVAL, 0, 0, 0},
		{"lossy:2,fast", -EINVAL, 0, 0, 0},
		{"lossless,fastxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
		 -EINVAL, 0, 0, 0},
	};

	(void)state;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct cap_timing tm;
		int rc = cap_parse_timing(cases[k].s, &tm);

		assert_int_equal(rc, cases[k].rc);
		if (rc)
			continue;
		assert_int_equal(tm.timing, cases[k].timing);
		assert_int_equal(tm.coder, cases[k].coder);
		assert_true(tm.rel_err == cases[k].rel_err);
	}
}

static void test_consumer_zones_pair_into_events(void **state)
{
	struct fixture *f = *state;
	struct wchunk wc = chunk_at(f, 0, 0, 0);
	struct tfs_recording_stats st;
	struct tfs_trace *t;
	char *got;

	put_str(&wc, REC_STRING, 0, 1000, "outer");
	put_str(&wc, REC_STRING, 1, 1000, "inner");
	put(&wc, REC_ZONE_BEGIN, 0, 0, 1100, 0);
	put(&wc, REC_ZONE_BEGIN, 0, 1, 1200, 0);
	put(&wc, REC_COUNTER, 0, 1, 1250, 1, (uint64_t)-5);
	put(&wc, REC_ZONE_END, 0, 0, 1300, 0);
	put(&wc, REC_ZONE_END, 0, 0, 1400, 0);
	publish(&wc, SPOOL_FULL);
	assert_int_equal(cap_consumer_poll(f->c), 1);
	assert_int_equal(atomic_load(&cap_spool_chunk(&f->spool, 0)->state), SPOOL_FREE);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	cap_consumer_stats(f->c, &st);
	assert_int_equal(st.n_events, 3);
	assert_int_equal(st.bad_records, 0);
	got = saved_view(f, 0, &t);
	assert_string_equal(
	    got, "{\"ts\":250,\"dur\":0,\"rank\":0,\"thread\":0,\"name\":\"counter\",\"args\":{\"name\":\"inner\","
		 "\"value\":-5}}\n"
		 "{\"ts\":200,\"dur\":100,\"rank\":0,\"thread\":0,\"name\":\"zone\",\"args\":{\"name\":\"inner\","
		 "\"depth\":1}}\n"
		 "{\"ts\":100,\"dur\":300,\"rank\":0,\"thread\":0,\"name\":\"zone\",\"args\":{\"name\":\"outer\","
		 "\"depth\":0}}\n");
	assert_string_equal(tfs_trace_meta(t, "dropped_events"), "0");
	free(got);
	tfs_trace_close(t);
}

/*
 * A REC_DROPPED: the zones open beyond the count it gives had their end dropped, so they end
 * at the first drop, unfinished, and later zones nest at the depth the program gave them;
 * the mark says how many events, from the first drop to the last. dropped_unplaced is what
 * the producers counted beyond the marks.
 */
static void test_consumer_dropped_ends_zones_and_marks(void **state)
{
	struct fixture *f = *state;
	struct wchunk wc = chunk_at(f, 0, 0, 0);
	struct tfs_trace *t;
	char *got;

	put_str(&wc, REC_STRING, 0, 1000, "outer");
	put_str(&wc, REC_STRING, 1, 1000, "inner");
	put(&wc, REC_ZONE_BEGIN, 0, 0, 1100, 0);
	put(&wc, REC_ZONE_BEGIN, 0, 1, 1200, 0);
	/* inner's end and 6 more dropped from 1300 to 1350; outer still open (1 zone) */
	put(&wc, REC_DROPPED, 0, 0, 1300, 3, (uint64_t)7, (uint64_t)1350, (uint64_t)1);
	put(&wc, REC_ZONE_BEGIN, 0, 1, 1400, 0);
	put(&wc, REC_ZONE_END, 0, 0, 1500, 0);
	put(&wc, REC_ZONE_END, 0, 0, 1600, 0);
	publish(&wc, SPOOL_FULL);
	f->spool.hdr->dropped_events = 9; /* 2 the thread could not place */
	assert_int_equal(cap_consumer_poll(f->c), 1);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	got = saved_view(f, 0, &t);
	assert_string_equal(
	    got, "{\"ts\":200,\"dur\":100,\"rank\":0,\"thread\":0,\"name\":\"zone_unfinished\",\"args\":"
		 "{\"name\":\"inner\",\"depth\":1}}\n"
		 "{\"ts\":300,\"dur\":50,\"rank\":0,\"thread\":0,\"name\":\"dropped\",\"args\":{\"message\":"
		 "\"dropped 7 events\",\"count\":7}}\n"
		 "{\"ts\":400,\"dur\":100,\"rank\":0,\"thread\":0,\"name\":\"zone\",\"args\":{\"name\":\"inner\","
		 "\"depth\":1}}\n"
		 "{\"ts\":100,\"dur\":500,\"rank\":0,\"thread\":0,\"name\":\"zone\",\"args\":{\"name\":\"outer\","
		 "\"depth\":0}}\n");
	assert_string_equal(tfs_trace_meta(t, "dropped_events"), "9");
	assert_string_equal(tfs_trace_meta(t, "dropped_unplaced"), "2");
	free(got);
	tfs_trace_close(t);
}

/* A REC_DROPPED too short to hold its words is damage: skipped and counted. */
static void test_consumer_rejects_short_dropped(void **state)
{
	struct fixture *f = *state;
	struct wchunk wc = chunk_at(f, 0, 0, 0);
	struct tfs_recording_stats st;

	put(&wc, REC_DROPPED, 0, 0, 1300, 2, (uint64_t)7, (uint64_t)1350);
	publish(&wc, SPOOL_FULL);
	assert_int_equal(cap_consumer_poll(f->c), 1);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	cap_consumer_stats(f->c, &st);
	assert_int_equal(st.bad_records, 1);
	assert_int_equal(st.n_events, 0);
}

static void test_consumer_reads_chunks_in_sequence_order(void **state)
{
	struct fixture *f = *state;
	struct wchunk second = chunk_at(f, 0, 0, 1), first = chunk_at(f, 3, 0, 0);
	struct tfs_trace *t;
	char *got;

	put_str(&first, REC_MARK, 0, 1001, "a");
	put_str(&second, REC_MARK, 0, 1002, "b");
	publish(&second, SPOOL_FULL);
	/* the second chunk alone must wait for the first */
	assert_int_equal(cap_consumer_poll(f->c), 0);
	publish(&first, SPOOL_FULL);
	assert_int_equal(cap_consumer_poll(f->c), 2);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	got = saved_view(f, 0, &t);
	assert_non_null(strstr(got, "\"a\"}}\n{"));
	assert_true(strstr(got, "\"a\"") < strstr(got, "\"b\""));
	free(got);
	tfs_trace_close(t);
}

/* Bytes of memory (or disk) the file at @path holds. */
static uint64_t allocated(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return (uint64_t)st.st_blocks * 512u;
}

static void test_consumer_child_spool_grows_and_only_ready_chunks_are_read(void **state)
{
	struct fixture *f = *state;
	const uint64_t chunk = SPOOL_CHUNK_BYTES;
	struct spool child = {0};
	struct spool_chunk *c[9];
	struct cap_consumer *cc;
	struct cap_timing tm = {TFS_TIMING_LOSSLESS, 0, TFS_CODER_AUTO};
	char path[64];

	snprintf(path, sizeof(path), "%s/test_capture_consumer.%d.spool",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
	unlink(path);
	/* the fixture's spool (8 chunks) as the parent */
	assert_int_equal(cap_spool_create_child(&child, path, f->spool.hdr, 7, 6, 0, 0), 0);
	assert_int_equal(child.hdr->n_chunks, 8);
	assert_int_equal(cap_spool_n_ready(&child), SPOOL_START_CHUNKS);
	assert_in_range(allocated(path), SPOOL_HDR_BYTES + 4 * chunk, SPOOL_HDR_BYTES + 5 * chunk);
	assert_int_equal(cap_consumer_new(&child, &tm, &cc), 0);
	/* the ready chunks first, then twice as many with memory behind them: all 8 */
	for (uint32_t i = 0; i < 4; i++)
		assert_non_null(c[i] = cap_spool_claim(&child, 0, i));
	assert_int_equal(cap_spool_n_ready(&child), 4);
	assert_non_null(c[4] = cap_spool_claim(&child, 0, 4));
	assert_int_equal(cap_spool_n_ready(&child), 8);
	assert_in_range(allocated(path), SPOOL_HDR_BYTES + 8 * chunk, SPOOL_HDR_BYTES + 9 * chunk);
	for (uint32_t i = 5; i < 8; i++)
		assert_non_null(c[i] = cap_spool_claim(&child, 0, i));
	/* every chunk owned: the claim fails (the event is dropped), nothing grows further */
	assert_null(c[8] = cap_spool_claim(&child, 0, 8));
	child.hdr->next_thread = 1;
	for (uint32_t i = 0; i < 8; i++) {
		struct wchunk wc = {c[i], (uint64_t *)cap_chunk_data(c[i]), 0};

		put_str(&wc, REC_MARK, 0, 1000 + i, "m");
		publish(&wc, SPOOL_FULL);
	}
	assert_int_equal(cap_consumer_poll(cc), 8);
	assert_non_null(c[8] = cap_spool_claim(&child, 0, 8));
	cap_consumer_free(cc);
	cap_spool_unmap(&child);
	unlink(path);
}

/* A chunk past the ready ones is never looked at, whatever its header says. */
static void test_consumer_ignores_chunks_not_ready(void **state)
{
	struct fixture *f = *state;
	struct wchunk ready = chunk_at(f, 1, 0, 0), beyond = chunk_at(f, 6, 0, 1);

	atomic_store(&f->spool.hdr->n_ready, 4);
	put_str(&ready, REC_MARK, 0, 1001, "a");
	put_str(&beyond, REC_MARK, 0, 1002, "b");
	publish(&ready, SPOOL_FULL);
	publish(&beyond, SPOOL_FULL);
	assert_int_equal(cap_consumer_poll(f->c), 1);
	atomic_store(&f->spool.hdr->n_ready, 8);
	assert_int_equal(cap_consumer_poll(f->c), 1);
}

static void test_consumer_reads_partial_chunks_only_at_the_end(void **state)
{
	struct fixture *f = *state;
	struct wchunk wc = chunk_at(f, 1, 0, 0);
	struct tfs_recording_stats st;
	struct tfs_trace *t;
	char *got;

	put_str(&wc, REC_STRING, 0, 1000, "open");
	put(&wc, REC_ZONE_BEGIN, 0, 0, 1100, 0);
	put_str(&wc, REC_MARK, 0, 1500, "last");
	publish(&wc, SPOOL_OWNED);
	/* a record written but not published: beyond fill, never read */
	put_str(&wc, REC_MARK, 0, 1600, "unpublished");
	assert_int_equal(cap_consumer_poll(f->c), 0);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	cap_consumer_stats(f->c, &st);
	assert_int_equal(st.n_partial_chunks, 1);
	assert_int_equal(st.n_partial_events, 1);
	assert_int_equal(st.open_zones, 1);
	got = saved_view(f, 0, &t);
	assert_non_null(strstr(got, "\"name\":\"mark\",\"args\":{\"message\":\"last\"}"));
	assert_non_null(strstr(got, "\"ts\":100,\"dur\":400,\"rank\":0,\"thread\":0,\"name\":\"zone_unfinished\""));
	assert_null(strstr(got, "unpublished"));
	free(got);
	tfs_trace_close(t);
}

static void test_consumer_phases_and_sites(void **state)
{
	struct fixture *f = *state;
	struct wchunk a = chunk_at(f, 0, 0, 0), b = chunk_at(f, 1, 1, 0);
	struct tfs_phase_info pi;
	struct tfs_trace *t;
	char *got;
	int found = 0;

	/* thread 0: a process phase (generations 1..2) around two marks */
	put_str(&a, REC_MARK, 0, 1001, "before");
	a.w[a.n] = cap_rec_word0(REC_PHASE_BEGIN, 6, 5, 7);
	a.w[a.n + 1] = 1002;
	a.w[a.n + 2] = TFS_PHASE_PROCESS;
	a.w[a.n + 3] = 1;
	memcpy(a.w + a.n + 4, "solve\0\0\0\0\0\0\0\0\0\0\0", 16);
	a.n += 6;
	put_str(&a, REC_MARK, 0, 1003, "in");
	put(&a, REC_PHASE_END, 0, 7, 1004, 1, (uint64_t)2);
	put_str(&a, REC_MARK, 0, 1005, "after");
	publish(&a, SPOOL_FULL);
	/* thread 1: one access, sees generation 1, two accesses, sees 2, one access */
	put(&b, REC_MEM, 0, 0, 1001, 3, (uint64_t)0x1000, (uint64_t)8, (uint64_t)0xaaa);
	put(&b, REC_SYNC, 0, 0, 1002, 1, (uint64_t)1);
	put(&b, REC_MEM, 1, 0, 1003, 3, (uint64_t)0x1008, (uint64_t)8, (uint64_t)0xbbb);
	put(&b, REC_MEM, 0, 0, 1003, 3, (uint64_t)0x1010, (uint64_t)8, (uint64_t)0xaaa);
	put(&b, REC_SYNC, 0, 0, 1004, 1, (uint64_t)2);
	put(&b, REC_MEM, 0, 0, 1005, 3, (uint64_t)0x1018, (uint64_t)8, (uint64_t)0xaaa);
	publish(&b, SPOOL_FULL);
	assert_int_equal(cap_consumer_poll(f->c), 2);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	got = saved_view(f, 1, &t);
	assert_non_null(strstr(got, "\"name\":\"store\",\"args\":{\"addr\":4104,\"size\":8,\"site\":\"site#1\"}"));
	assert_non_null(strstr(got, "\"name\":\"load\",\"args\":{\"addr\":4120,\"size\":8,\"site\":\"site#0\"}"));
	for (uint32_t i = 0; tfs_trace_phase(t, i, &pi) == 0; i++) {
		struct tfs_stream_info si;

		assert_string_equal(pi.name, "solve");
		assert_int_equal(tfs_trace_stream(t, pi.stream, &si), 0);
		assert_int_equal(pi.first_event, 1);
		assert_int_equal(pi.n_events, si.thread == 0 ? 1 : 2);
		found++;
	}
	assert_int_equal(found, 2);
	free(got);
	tfs_trace_close(t);
}

static void test_consumer_skips_damage_and_counts_it(void **state)
{
	struct fixture *f = *state;
	struct wchunk a = chunk_at(f, 0, 0, 0), b = chunk_at(f, 1, 1, 0), c = chunk_at(f, 2, 2, 0);
	struct wchunk d = chunk_at(f, 3, 3, 0), e = chunk_at(f, 4, 4, 0);
	struct tfs_recording_stats st;
	struct tfs_trace *t;
	char *got;

	/* a: good, then an end without a begin, an unknown string, then an unknown kind */
	put_str(&a, REC_MARK, 0, 1001, "ok");
	put(&a, REC_ZONE_END, 0, 0, 1002, 0);
	put(&a, REC_COUNTER, 0, 99, 1003, 1, (uint64_t)1);
	put(&a, 31, 0, 0, 1004, 0);
	put_str(&a, REC_MARK, 0, 1005, "never read");
	publish(&a, SPOOL_FULL);
	/* b: a record claiming more words than the chunk's fill */
	put_str(&b, REC_MARK, 0, 1001, "fine");
	b.w[b.n] = cap_rec_word0(REC_MARK, 200, 3, 0);
	b.n += 2;
	publish(&b, SPOOL_FULL);
	/* c: a string payload longer than its record */
	c.w[0] = cap_rec_word0(REC_THREAD_NAME, 2, 500, 0);
	c.n = 2;
	publish(&c, SPOOL_FULL);
	/* d: a fill beyond the chunk's capacity */
	put_str(&d, REC_MARK, 0, 1001, "x");
	publish(&d, SPOOL_FULL);
	atomic_store(&d.ch->fill, (uint64_t)1 << 40);
	/* e: a thread id the spool never handed out */
	put_str(&e, REC_MARK, 0, 1001, "y");
	publish(&e, SPOOL_FULL);
	e.ch->thread = 1000000;
	assert_true(cap_consumer_poll(f->c) >= 4);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	cap_consumer_stats(f->c, &st);
	assert_int_equal(st.bad_records, 7);
	got = saved_view(f, 0, &t);
	assert_non_null(strstr(got, "\"message\":\"ok\""));
	assert_non_null(strstr(got, "\"name\":\"?\",\"value\":1"));
	assert_null(strstr(got, "never read"));
	free(got);
	tfs_trace_close(t);
}

static void test_consumer_calls_become_events(void **state)
{
	struct fixture *f = *state;
	struct wchunk a = chunk_at(f, 0, 0, 0), b = chunk_at(f, 1, 1, 0);
	struct tfs_recording_stats st;
	struct tfs_trace *t;
	char *got;

	put_call(&a, CALL_MALLOC, 1010, "", 0, 4, (uint64_t)0, (uint64_t)64, (uint64_t)0x1000,
		 (uint64_t)7);
	put_call(&a, CALL_OPEN, 1020, "/tmp/a", 7, 6, (uint64_t)50, (uint64_t)0x241,
		 (uint64_t)0644, (uint64_t)0, (uint64_t)3, (uint64_t)0);
	put_call(&a, CALL_PREAD, 1100, "", 0, 9, (uint64_t)5, (uint64_t)3, (uint64_t)0,
		 (uint64_t)512, (uint64_t)4096, (uint64_t)7, (uint64_t)128, (uint64_t)512,
		 (uint64_t)0);
	put_call(&a, CALL_RENAME, 1200, "a\0b", 4, 3, (uint64_t)7, (uint64_t)-1, (uint64_t)2);
	/* a string without its NUL: malformed, ends the chunk */
	put_call(&a, CALL_UNLINK, 1300, "abc", 3, 3, (uint64_t)0, (uint64_t)0, (uint64_t)0);
	put_call(&a, CALL_FREE, 1400, "", 0, 3, (uint64_t)0, (uint64_t)0x1000, (uint64_t)7);
	publish(&a, SPOOL_FULL);
	/* b: a call number past the last */
	put_call(&b, N_CALLS + 5, 1001, "", 0, 1, (uint64_t)0);
	publish(&b, SPOOL_FULL);
	assert_int_equal(cap_consumer_poll(f->c), 2);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	cap_consumer_stats(f->c, &st);
	assert_int_equal(st.n_events, 4);
	assert_int_equal(st.bad_records, 2);
	got = saved_view(f, 0, &t);
	assert_string_equal(
	    got, "{\"ts\":10,\"dur\":0,\"rank\":0,\"thread\":0,\"name\":\"malloc\",\"args\":{\"size\":64,"
		 "\"result\":4096,\"id\":7}}\n"
		 "{\"ts\":20,\"dur\":50,\"rank\":0,\"thread\":0,\"name\":\"open\",\"args\":{\"path\":"
		 "\"/tmp/a\",\"flags\":577,\"mode\":420,\"file\":\"file#0\",\"result\":3,"
		 "\"errno\":0}}\n"
		 "{\"ts\":100,\"dur\":5,\"rank\":0,\"thread\":0,\"name\":\"pread\",\"args\":{\"fd\":3,"
		 /* file 0 is the one the open named */
		 "\"path\":\"/tmp/a\","
		 "\"count\":512,\"offset\":4096,\"buf\":\"alloc#7+0x80\",\"result\":512,"
		 "\"errno\":0}}\n"
		 "{\"ts\":200,\"dur\":7,\"rank\":0,\"thread\":0,\"name\":\"rename\",\"args\":{\"oldpath\":"
		 "\"a\",\"newpath\":\"b\",\"result\":-1,\"errno\":2}}\n");
	free(got);
	tfs_trace_close(t);
}

/* Make the record put at word @at a REC_CALL_NESTED at @depth inside call @outer. */
static void nest(struct wchunk *wc, uint32_t at, uint64_t depth, uint32_t outer)
{
	uint64_t w0 = wc->w[at];
	uint32_t words = wc->n - at;

	wc->w[at] = cap_rec_word0(REC_CALL_NESTED, words + 2, (uint32_t)(w0 >> 16 & 0xffff),
				  (uint32_t)(w0 >> 32));
	wc->w[wc->n] = depth;
	wc->w[wc->n + 1] = outer;
	wc->n += 2;
}

/*
 * A descriptor met first inside another call (an MPI library's own thread reading its
 * eventfd, under --trace=...,nested): the nested fd_file names the file as a plain one
 * does, so the reads on it print the path, not file#0.
 */
static void test_consumer_nested_fd_file_names_its_file(void **state)
{
	struct fixture *f = *state;
	struct wchunk a = chunk_at(f, 0, 0, 0);
	struct tfs_trace *t;
	uint32_t at;
	char *got;

	at = a.n;
	put_call(&a, CALL_FD_FILE, 1010, "anon_inode:[eventfd]", 21, 3, (uint64_t)0,
		 (uint64_t)13, (uint64_t)0);
	nest(&a, at, 1, CALL_POLL);
	at = a.n;
	put_call(&a, CALL_READ, 1020, "", 0, 8, (uint64_t)5, (uint64_t)13, (uint64_t)0,
		 (uint64_t)8, (uint64_t)0, (uint64_t)0, (uint64_t)8, (uint64_t)0);
	nest(&a, at, 1, CALL_POLL);
	publish(&a, SPOOL_FULL);
	assert_int_equal(cap_consumer_poll(f->c), 1);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	got = saved_view(f, 0, &t);
	assert_non_null(strstr(got, "\"name\":\"read\",\"args\":{\"fd\":13,"
				    "\"path\":\"anon_inode:[eventfd]\","));
	free(got);
	tfs_trace_close(t);
}

/*
 * A record past 255 words (spool_i.h: bits 8-10 of its length in the kind byte): an exec
 * whose argv is 8 KiB becomes one event with its strings whole, and the record after it
 * is read where it starts.
 */
static void test_consumer_reads_records_past_255_words(void **state)
{
	struct fixture *f = *state;
	struct wchunk a = chunk_at(f, 0, 0, 0);
	const size_t n_argv = 8192;
	char *strs = malloc(5 + n_argv + 1), *want, *got;
	struct tfs_recording_stats st;
	struct tfs_trace *t;

	assert_non_null(strs);
	memcpy(strs, "/bin", 5);
	memset(strs + 5, 'a', n_argv);
	strs[5 + n_argv] = '\0';
	put_call(&a, CALL_EXEC, 1010, strs, 5 + n_argv + 1, 1, (uint64_t)0);
	assert_true(a.n > 1000);
	assert_int_equal(cap_rec_words(a.w[0]), a.n);
	put_str(&a, REC_MARK, 0, 1020, "after");
	publish(&a, SPOOL_FULL);
	assert_int_equal(cap_consumer_poll(f->c), 1);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	cap_consumer_stats(f->c, &st);
	assert_int_equal(st.n_events, 2);
	assert_int_equal(st.bad_records, 0);
	got = saved_view(f, 0, &t);
	want = malloc(n_argv + 256);
	assert_non_null(want);
	snprintf(want, n_argv + 256, "\"args\":{\"path\":\"/bin\",\"argv\":\"%s\"}}\n", strs + 5);
	assert_non_null(strstr(got, want));
	assert_non_null(strstr(got, "\"message\":\"after\""));
	free(want);
	free(got);
	free(strs);
	tfs_trace_close(t);
}

static void test_consumer_rejects_calls_not_declared(void **state)
{
	struct fixture *f = *state;
	struct wchunk a = chunk_at(f, 0, 0, 0);
	struct tfs_recording_stats st;

	/* the spool records zones only: its consumer declared no call kinds */
	put_call(&a, CALL_MALLOC, 1010, "", 0, 3, (uint64_t)0, (uint64_t)64, (uint64_t)0x1000);
	publish(&a, SPOOL_FULL);
	assert_int_equal(cap_consumer_poll(f->c), 1);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	cap_consumer_stats(f->c, &st);
	assert_int_equal(st.n_events, 0);
	assert_int_equal(st.bad_records, 1);
}

static uint32_t mpi_call(const char *name)
{
	for (uint32_t i = 0; i < cap_mpi_n_kinds; i++)
		if (!strcmp(cap_mpi_kinds[i].name, name))
			return N_CALLS + i;
	fail_msg("no kind %s", name);
	return 0;
}

static void test_consumer_declares_mpi_kinds_on_first_use(void **state)
{
	struct fixture *f = *state;
	struct wchunk a = chunk_at(f, 0, 0, 0);
	struct tfs_recording_stats st;
	struct tfs_trace_info ti;
	struct tfs_trace *t;
	uint32_t barrier;
	char *got;

	if (!cap_mpi_n_kinds) {
		/* built without MPI: no MPI kinds, every MPI call number is unknown */
		put_call(&a, N_CALLS, 1010, "", 0, 1, (uint64_t)0);
		publish(&a, SPOOL_FULL);
		assert_int_equal(cap_consumer_poll(f->c), 1);
		assert_int_equal(cap_consumer_finish(f->c), 0);
		cap_consumer_stats(f->c, &st);
		assert_int_equal(st.n_events, 0);
		assert_int_equal(st.bad_records, 1);
		return;
	}
	barrier = mpi_call("MPI_Barrier");
	assert_int_equal(cap_mpi_kinds[barrier - N_CALLS].n_args, 2); /* comm, ret */
	put_call(&a, barrier, 1010, "", 0, 3, (uint64_t)40, (uint64_t)0, (uint64_t)0);
	put_call(&a, barrier, 1100, "", 0, 3, (uint64_t)30, (uint64_t)3, (uint64_t)0);
	/* one past the last MPI call: malformed, ends the chunk */
	put_call(&a, N_CALLS + cap_mpi_n_kinds, 1200, "", 0, 1, (uint64_t)0);
	publish(&a, SPOOL_FULL);
	assert_int_equal(cap_consumer_poll(f->c), 1);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	cap_consumer_stats(f->c, &st);
	assert_int_equal(st.n_events, 2);
	assert_int_equal(st.bad_records, 1);
	got = saved_view(f, 0, &t);
	assert_string_equal(got, "{\"ts\":10,\"dur\":40,\"rank\":0,\"thread\":0,\"name\":\"MPI_Barrier\","
				 "\"args\":{\"comm\":\"MPI_COMM_WORLD\",\"result\":0}}\n"
				 "{\"ts\":100,\"dur\":30,\"rank\":0,\"thread\":0,\"name\":\"MPI_Barrier\","
				 "\"args\":{\"comm\":\"comm#3\",\"result\":0}}\n");
	/* the consumer's own kinds and the one MPI call made, not all of mpi.h */
	tfs_trace_get_info(t, &ti);
	assert_true(ti.n_kinds < 10);
	free(got);
	tfs_trace_close(t);
}

/* The stack ids of thread 0's events, in order, from the saved trace. */
static uint32_t saved_stacks(struct fixture *f, struct tfs_trace **out, uint64_t *ids,
			     uint32_t cap)
{
	struct tfs_stream_info si;
	struct tfs_cursor *cur;
	struct tfs_kind_desc k;
	struct tfs_event ev;
	uint32_t idx, n = 0;

	assert_int_equal(cap_consumer_save(f->c, f->path), 0);
	assert_int_equal(tfs_trace_open(f->path, out, NULL), 0);
	assert_int_equal(tfs_trace_verify(*out, NULL), 0);
	assert_int_equal(tfs_trace_find_stream(*out, 0, 0, &idx), 0);
	assert_int_equal(tfs_trace_stream(*out, idx, &si), 0);
	assert_int_equal(tfs_cursor_new(*out, idx, TFS_VIEW_TEXT, 0, si.n_events, &cur), 0);
	for (uint64_t e = 0; e < si.n_events; e++) {
		assert_int_equal(tfs_cursor_event(cur, e, &ev, NULL), 0);
		assert_int_equal(tfs_trace_kind(*out, ev.kind, &k), 0);
		if (strcmp(k.name, "malloc"))
			continue;
		/* the stack is malloc's last argument */
		assert_int_equal(k.n_args, cap_call_kinds[CALL_MALLOC].n_args + 1);
		assert_string_equal(k.args[k.n_args - 1].name, "stack");
		assert_true(n < cap);
		ids[n++] = ev.args[k.n_args - 1].u;
	}
	tfs_cursor_free(cur);
	return n;
}

static void assert_backtrace(struct tfs_trace *t, uint64_t id, const uint64_t *want,
			     uint32_t n_want)
{
	const uint64_t *frames;
	uint32_t n;

	assert_int_equal(tfs_trace_backtrace(t, 0, id, &frames, &n, NULL), 0);
	assert_int_equal(n, n_want);
	if (n_want)
		assert_memory_equal(frames, want, n * sizeof(*frames));
}

static void test_consumer_backtraces_become_stacks(void **state)
{
	static const uint64_t abc[] = {0x10100, 0x10200, 0x10300}, abd[] = {0x10100, 0x10200,
									      0x50400};
	struct fixture *f = *state;
	struct wchunk a = chunk_at(f, 0, 0, 0), b = chunk_at(f, 1, 0, 1);
	const struct tfs_src_frame *src;
	struct tfs_recording_stats st;
	struct tfs_trace *t;
	uint64_t ids[8];
	uint32_t n_src;

	put_module(&a, 0x10000, 0x10000, 0x20000, "/nonexistent/libfake.so.1");
	put_malloc_bt(&a, 1010, 64, 0x1000, 0, 3, abc, 0);
	put_malloc_bt(&a, 1020, 64, 0x2000, 3, 0, NULL, 0);     /* the same backtrace */
	put_malloc_bt(&a, 1030, 64, 0x3000, 2, 1, abd + 2, 0); /* A B, then D */
	put_free(&a, 1040, 0x1000);
	publish(&a, SPOOL_FULL);
	/* a new chunk refers to nothing before it: its first backtrace is whole */
	put_malloc_bt(&b, 1050, 64, 0x4000, 0, 3, abc, 0);
	put_malloc_bt(&b, 1060, 64, 0x5000, 0, 0, NULL, 0); /* an empty backtrace */
	publish(&b, SPOOL_FULL);
	assert_int_equal(cap_consumer_poll(f->c), 2);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	cap_consumer_stats(f->c, &st);
	assert_int_equal(st.bad_records, 0);
	assert_int_equal(st.n_events, 6);
	assert_int_equal(st.n_stacks, 3);
	assert_int_equal(st.n_addrs, 4);
	assert_int_equal(saved_stacks(f, &t, ids, 8), 5);
	assert_int_equal(ids[0], 0);
	assert_int_equal(ids[1], 0);
	assert_int_equal(ids[2], 1);
	assert_int_equal(ids[3], 0);
	assert_int_equal(ids[4], 2);
	assert_int_equal(tfs_trace_n_backtraces(t, 0), 3);
	assert_backtrace(t, 0, abc, 3);
	assert_backtrace(t, 1, abd, 3);
	assert_backtrace(t, 2, NULL, 0);
	/* the object cannot be read: its file name and the offset in it */
	assert_int_equal(tfs_trace_symbol(t, 0, 0x10200, &src, &n_src, NULL), 0);
	assert_int_equal(n_src, 1);
	assert_string_equal(src[0].function, "libfake.so.1+0x200");
	assert_string_equal(src[0].file, "");
	assert_int_equal(src[0].line, 0);
	/* outside every object announced: the address */
	assert_int_equal(tfs_trace_symbol(t, 0, 0x50400, &src, &n_src, NULL), 0);
	assert_string_equal(src[0].function, "0x50400");
	assert_string_equal(tfs_trace_meta(t, "backtraces"), "3");
	tfs_trace_close(t);
}

#define WALK_N 3000
#define WALK_DEPTH 12

/*
 * Backtraces of a random walk (a prefix of the previous one kept, a few frames from a small
 * set added: stacks that repeat, that extend or cut one another) over six chunks: each gets
 * the id of its first appearance, as a search of the ones before says, past the growth of
 * the table at 512 stacks.
 */
static void test_consumer_backtraces_intern_by_content(void **state)
{
	static uint64_t seen[WALK_N][WALK_DEPTH], walk[WALK_N][WALK_DEPTH];
	static uint32_t seen_n[WALK_N], walk_n[WALK_N];
	static uint64_t want[WALK_N], got[WALK_N];
	struct fixture *f = *state;
	uint64_t seed = 0x5eed, cur[WALK_DEPTH];
	uint32_t n_seen = 0, n = 0, per_chunk = WALK_N / 6;
	struct tfs_recording_stats st;
	struct tfs_trace *t;

	for (uint32_t i = 0; i < WALK_N; i++) {
		uint32_t keep, add, j;

		seed = seed * 6364136223846793005u + 1442695040888963407u;
		keep = (uint32_t)(seed >> 33) % (n + 1);
		add = (uint32_t)(seed >> 40) % 5;
		if (keep + add > WALK_DEPTH)
			add = WALK_DEPTH - keep;
		for (j = keep; j < keep + add; j++) {
			seed = seed * 6364136223846793005u + 1442695040888963407u;
			cur[j] = 0x401000 + 16 * ((seed >> 35) % 40);
		}
		n = keep + add;
		memcpy(walk[i], cur, n * sizeof(*cur));
		walk_n[i] = n;
		for (j = 0; j < n_seen; j++)
			if (seen_n[j] == n && !memcmp(seen[j], cur, n * sizeof(*cur)))
				break;
		if (j == n_seen) {
			memcpy(seen[n_seen], cur, n * sizeof(*cur));
			seen_n[n_seen++] = n;
		}
		want[i] = j;
	}
	assert_true(n_seen > 1024);
	for (uint32_t c = 0; c < 6; c++) {
		struct wchunk wc = chunk_at(f, c, 0, c);
		uint32_t prev = 0;

		/* each chunk's backtraces refer to its own only: the first one whole */
		for (uint32_t i = c * per_chunk; i < (c + 1) * per_chunk; i++) {
			uint32_t keep = 0;

			while (i > c * per_chunk && keep < prev && keep < walk_n[i] &&
			       walk[i - 1][keep] == walk[i][keep])
				keep++;
			put_malloc_bt(&wc, 1000 + i, 16, 0x1000 + i, keep, walk_n[i] - keep,
				      walk[i] + keep, 0);
			prev = walk_n[i];
		}
		publish(&wc, SPOOL_FULL);
		assert_int_equal(cap_consumer_poll(f->c), 1);
	}
	assert_int_equal(cap_consumer_finish(f->c), 0);
	cap_consumer_stats(f->c, &st);
	assert_int_equal(st.bad_records, 0);
	assert_int_equal(st.n_stacks, n_seen);
	assert_int_equal(saved_stacks(f, &t, got, WALK_N), WALK_N);
	assert_memory_equal(got, want, sizeof(want));
	for (uint32_t j = 0; j < n_seen; j++)
		assert_backtrace(t, j, seen[j], seen_n[j]);
	tfs_trace_close(t);
}

/* A function of this program, named in its symbol table and its DWARF. */
__attribute__((noinline, used)) static int marker_fn(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

static void copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
	char buf[65536];
	size_t n;

	assert_non_null(in);
	assert_non_null(out);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		assert_int_equal(fwrite(buf, 1, n, out), n);
	fclose(in);
	assert_int_equal(fclose(out), 0);
}

/* The name the consumer gives @frame, a return address in object @obj loaded at @bias. */
static char *symbol_of(struct fixture *f, const char *obj, uint64_t bias, uint64_t frame)
{
	struct wchunk a = chunk_at(f, 0, 0, 0);
	const struct tfs_src_frame *src;
	struct tfs_trace *t;
	uint32_t n_src;
	char *name;

	put_module(&a, bias, bias, bias + (1u << 30), obj);
	put_malloc_bt(&a, 1010, 64, 0x1000, 0, 1, &frame, 0);
	publish(&a, SPOOL_FULL);
	assert_int_equal(cap_consumer_poll(f->c), 1);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	assert_int_equal(cap_consumer_save(f->c, f->path), 0);
	assert_int_equal(tfs_trace_open(f->path, &t, NULL), 0);
	assert_int_equal(tfs_trace_symbol(t, 0, frame, &src, &n_src, NULL), 0);
	assert_true(n_src >= 1);
	name = strdup(src[n_src - 1].function);
	tfs_trace_close(t);
	return name;
}

/*
 * The symboliser keeps object files open from one process to the next (tracefs record
 * symbolises every process it traced): one rewritten in place in between, as a build
 * relinks a program, must be read again, not served from what was read of the old file.
 */
static void test_consumer_symbolizes_a_rewritten_object_anew(void **state)
{
	const uint64_t bias = 0x7e0000000000;
	char obj[80], tmp[96], *name;
	uint64_t off;
	Dl_info di;

	/* this test program, position independent: file address = run-time - load base */
	assert_true(dladdr((void *)marker_fn, &di) != 0);
	off = (uint64_t)((uintptr_t)marker_fn - (uintptr_t)di.dli_fbase);
	snprintf(obj, sizeof(obj), "/tmp/test_capture_consumer.%d.obj", (int)getpid());
	copy_file("/proc/self/exe", obj);
	name = symbol_of(*state, obj, bias, bias + off + 1);
	assert_string_equal(name, "marker_fn");
	free(name);

	/* another object at the same path, as a linker writes it (a new file renamed over the
	   old), larger than this program so that it holds that address too: libc */
	assert_true(dladdr((void *)fclose, &di) != 0);
	snprintf(tmp, sizeof(tmp), "%s.new", obj);
	copy_file(di.dli_fname, tmp);
	assert_int_equal(rename(tmp, obj), 0);
	teardown(state);
	setup_bt(state);
	name = symbol_of(*state, obj, bias, bias + off + 1);
	assert_string_not_equal(name, "marker_fn");
	free(name);
	unlink(obj);
}

static void test_consumer_rejects_damaged_backtraces(void **state)
{
	static const uint64_t abc[] = {0x10100, 0x10200, 0x10300};
	struct fixture *f = *state;
	struct wchunk a = chunk_at(f, 0, 0, 0), b = chunk_at(f, 1, 1, 0), c = chunk_at(f, 2, 2, 0),
		      d = chunk_at(f, 3, 3, 0), e = chunk_at(f, 4, 4, 0);
	struct tfs_recording_stats st;

	/* a: keeps frames of a previous backtrace the chunk does not have */
	put_malloc_bt(&a, 1010, 64, 0x1000, 2, 1, abc, 0);
	publish(&a, SPOOL_FULL);
	/* b: a good one, then one whose length disagrees with its frame count */
	put_malloc_bt(&b, 1010, 64, 0x1000, 0, 3, abc, 0);
	put_malloc_bt(&b, 1020, 64, 0x1000, 0, 3, abc, 2);
	publish(&b, SPOOL_FULL);
	/* c: free has no backtrace */
	put_free(&c, 1010, 0x1000);
	c.w[0] = cap_rec_word0(REC_CALL_BT, c.n, 0, CALL_FREE);
	publish(&c, SPOOL_FULL);
	/* d: a malloc without one while backtraces are on */
	put_malloc_bt(&d, 1010, 64, 0x1000, 0, 0, NULL, 0);
	d.w[0] = cap_rec_word0(REC_CALL, d.n - 1, 0, CALL_MALLOC); /* the same, less the bt word */
	d.n--;
	publish(&d, SPOOL_FULL);
	/* e: more frames than a backtrace may have */
	put_malloc_bt(&e, 1010, 64, 0x1000, 0, 3, abc, 0);
	e.w[e.n - 4] = (uint64_t)(SPOOL_MAX_BT_FRAMES + 1) << 16; /* the bt word */
	publish(&e, SPOOL_FULL);
	assert_int_equal(cap_consumer_poll(f->c), 5);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	cap_consumer_stats(f->c, &st);
	assert_int_equal(st.n_events, 1);
	assert_int_equal(st.bad_records, 5);
	assert_int_equal(st.n_stacks, 1);
}

/* Sampling (spool_i.h): an allocation not sampled names stack -1 and keeps nothing. */
static void test_consumer_unsampled_allocations_have_no_stack(void **state)
{
	static const uint64_t abc[] = {0x10100, 0x10200, 0x10300};
	const uint64_t unsampled = (uint64_t)SPOOL_BT_UNSAMPLED << 32;
	struct fixture *f = *state;
	struct wchunk a = chunk_at(f, 0, 0, 0), b = chunk_at(f, 1, 1, 0), c = chunk_at(f, 2, 2, 0),
		      d = chunk_at(f, 3, 3, 0);
	struct tfs_recording_stats st;
	struct tfs_trace *t;
	uint64_t ids[4];

	f->spool.hdr->policy = (struct spool_policy){SPOOL_WAIT, SPOOL_SAMPLE_CALLS, 2};
	put_malloc_bt(&a, 1010, 64, 0x1000, 0, 3, abc, 0);
	put_malloc_bt(&a, 1020, 64, 0x2000, 0, 0, NULL, 0);
	a.w[a.n - 1] = unsampled;
	/* keeps the frames of the last backtrace sampled, not of the one in between */
	put_malloc_bt(&a, 1030, 64, 0x3000, 3, 0, NULL, 0);
	put_malloc_bt(&a, 1040, 64, 0x4000, 0, 0, NULL, 0);
	a.w[a.n - 1] = unsampled;
	publish(&a, SPOOL_FULL);
	/* damaged (a chunk each: the rest of a chunk is skipped): a frame given with the flag,
	   a frame kept with it, an unknown flag */
	put_malloc_bt(&b, 1010, 64, 0x1000, 0, 1, abc, 0);
	b.w[b.n - 2] |= unsampled;
	publish(&b, SPOOL_FULL);
	put_malloc_bt(&c, 1010, 64, 0x1000, 0, 0, NULL, 0);
	c.w[c.n - 1] = unsampled | 1;
	publish(&c, SPOOL_FULL);
	put_malloc_bt(&d, 1010, 64, 0x1000, 0, 0, NULL, 0);
	d.w[d.n - 1] = (uint64_t)2 << 32;
	publish(&d, SPOOL_FULL);
	assert_int_equal(cap_consumer_poll(f->c), 4);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	cap_consumer_stats(f->c, &st);
	assert_int_equal(st.n_events, 4);
	assert_int_equal(st.bad_records, 3);
	assert_int_equal(st.n_stacks, 1);
	assert_int_equal(saved_stacks(f, &t, ids, 4), 4);
	assert_int_equal(ids[0], 0);
	assert_int_equal(ids[1], TFS_SYM_NONE);
	assert_int_equal(ids[2], 0);
	assert_int_equal(ids[3], TFS_SYM_NONE);
	assert_string_equal(tfs_trace_meta(t, "backtrace_sampling"),
			    "1 in 2 allocations (per thread)");
	assert_string_equal(tfs_trace_meta(t, "when_full"), "wait");
	tfs_trace_close(t);
}

static void test_consumer_rejects_backtraces_when_off(void **state)
{
	static const uint64_t abc[] = {0x10100, 0x10200, 0x10300};
	struct fixture *f = *state;
	struct wchunk a = chunk_at(f, 0, 0, 0), b = chunk_at(f, 1, 1, 0);
	struct tfs_recording_stats st;

	/* the spool records allocations without backtraces: malloc has no stack argument */
	put_malloc_bt(&a, 1010, 64, 0x1000, 0, 3, abc, 0);
	publish(&a, SPOOL_FULL);
	put_module(&b, 0x10000, 0x10000, 0x20000, "/lib/x.so");
	publish(&b, SPOOL_FULL);
	assert_int_equal(cap_consumer_poll(f->c), 2);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	cap_consumer_stats(f->c, &st);
	assert_int_equal(st.n_events, 0);
	assert_int_equal(st.bad_records, 2);
	assert_int_equal(st.n_stacks, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_consumer_parses_timing_modes),
	    cmocka_unit_test_setup_teardown(test_consumer_zones_pair_into_events, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_dropped_ends_zones_and_marks, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_rejects_short_dropped, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_reads_chunks_in_sequence_order, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_reads_partial_chunks_only_at_the_end,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_phases_and_sites, setup, teardown),
	    cmocka_unit_test_setup_teardown(
		test_consumer_child_spool_grows_and_only_ready_chunks_are_read, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_ignores_chunks_not_ready, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_skips_damage_and_counts_it, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_calls_become_events, setup_calls,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_reads_records_past_255_words,
					    setup_calls, teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_nested_fd_file_names_its_file,
					    setup_calls, teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_rejects_calls_not_declared, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_declares_mpi_kinds_on_first_use,
					    setup_mpi, teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_backtraces_intern_by_content, setup_bt,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_backtraces_become_stacks, setup_bt,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_symbolizes_a_rewritten_object_anew,
					    setup_bt, teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_rejects_damaged_backtraces, setup_bt,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_unsampled_allocations_have_no_stack,
					    setup_bt, teardown),
	    cmocka_unit_test_setup_teardown(test_consumer_rejects_backtraces_when_off,
					    setup_calls, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
