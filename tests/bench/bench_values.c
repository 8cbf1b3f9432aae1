/*
 * Timing columns of real traces (FORMAT.md §7.4): reads every stream's terminals, start
 * times and durations from the traces given, re-encodes them in every values variant with
 * no VAL fields (so only timing is measured) and prints bytes per event, encode and decode
 * time, each against TFV1 at level 3 (what writers wrote before TFV2) measured in the same
 * run on the same events. Lossy rows re-encode the same exact times at rel_err 0.1.
 * Usage: bench_values TRACE...   (tests/bench/run_values records traces and runs it)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tfs/reader.h"
#include "values_i.h"

/* The timing of one stream. */
struct tstream {
	uint64_t n;
	uint32_t *term;
	uint64_t *ts, *dur;
	uint32_t n_terminals;
};

struct variant {
	const char *name;
	int version;
	unsigned int pred;
	int final_level;
	int gap_base;
	int ticks;
	int coded; /* venc_opts.coded: 0 range-codes timing columns where smaller */
};

static const struct variant variants[] = {
	{"TFV1 level 3 (before)", 1, 0, 0, 0, 0, 0},
	{"TFV2 level 3", 2, 0, 0, 0, 0, 0},
	{"TFV2 always predicted", 2, VAL_PRED_FIXED | VAL_PRED_ALL, 0, 0, 0, 0},
	{"TFV2 never predicted", 2, VAL_PRED_FIXED, 0, 0, 0, 0},
	{"TFV2 + save level 9", 2, 0, 9, 0, 0, 0},
	{"TFV2 + save level 19", 2, 0, 19, 0, 0, 0},
	{"TFV2 gaps from end", 2, 0, 0, VAL_BASE_END, 0, 0},
	{"TFV2 gaps from start", 2, 0, 0, VAL_BASE_START, 0, 0},
	{"TFV3 level 3 (ticks)", 3, 0, 0, 0, 0, 0},
	{"TFV3 + save level 9", 3, 0, 9, 0, 0, 0},
	{"TFV3 + save level 15", 3, 0, 15, 0, 0, 0},
	{"TFV3 + save level 16", 3, 0, 16, 0, 0, 0},
	{"TFV3 + save level 19", 3, 0, 19, 0, 0, 0},
	{"TFV3 never ticks", 3, 0, 0, 0, VAL_TICKS_NEVER, 0},
	{"TFV3 not range-coded", 3, 0, 0, 0, 0, VAL_CODED_NEVER},
	{"TFV3 not coded, save 19", 3, 0, 19, 0, 0, VAL_CODED_NEVER},
	{"TFV3 always range-coded", 3, 0, 0, 0, 0, VAL_CODED_ALWAYS},
	{"TFV4 (word model 1)", 4, 0, 0, 0, 0, 0},
	{"TFV5 (word model 2)", 5, 0, 0, 0, 0, 0},
	{"TFV5 always range-coded", 5, 0, 0, 0, 0, VAL_CODED_ALWAYS},
};
#define N_VARIANTS (sizeof(variants) / sizeof(variants[0]))

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int load(const char *path, struct tstream **out, uint32_t *n_out)
{
	struct tfs_trace_info info;
	struct tfs_trace *t;
	struct tstream *s;
	int rc;

	rc = tfs_trace_open(path, &t, NULL);
	if (rc < 0)
		return rc;
	tfs_trace_get_info(t, &info);
	s = calloc(info.n_streams ? info.n_streams : 1, sizeof(*s));
	if (!s) {
		tfs_trace_close(t);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < info.n_streams && rc == 0; i++) {
		struct tfs_stream_info si;
		struct tfs_cursor *c;
		struct tfs_event ev;

		tfs_trace_stream(t, i, &si);
		s[i].n = si.n_events;
		s[i].term = calloc(si.n_events + 1, sizeof(*s[i].term));
		s[i].ts = calloc(si.n_events + 1, sizeof(*s[i].ts));
		s[i].dur = calloc(si.n_events + 1, sizeof(*s[i].dur));
		if (!s[i].term || !s[i].ts || !s[i].dur)
			return -ENOMEM;
		rc = tfs_cursor_new(t, i, TFS_VIEW_TEXT, 0, si.n_events, &c);
		for (uint64_t k = 0; k < si.n_events && rc == 0; k++) {
			rc = tfs_cursor_event(c, k, &ev, NULL);
			s[i].term[k] = ev.terminal;
			s[i].ts[k] = ev.ts_ns;
			s[i].dur[k] = ev.dur_ns;
			if (ev.terminal >= s[i].n_terminals)
				s[i].n_terminals = ev.terminal + 1;
		}
		tfs_cursor_free(c);
	}
	tfs_trace_close(t);
	*out = s;
	*n_out = info.n_streams;
	return rc;
}

/* Encode and decode every stream; add bytes and seconds. */
static int run(const struct tstream *s, uint32_t n, const struct variant *v, int timing,
	       double *bytes, double *enc_s, double *dec_s)
{
	struct venc_opts o = {.timing = timing, .rel_err = 0.1, .version = v->version,
			      .pred = v->pred, .final_level = v->final_level,
			      .gap_base = v->gap_base, .ticks = v->ticks, .coded = v->coded};

	for (uint32_t i = 0; i < n; i++) {
		uint8_t *nv = calloc(s[i].n_terminals + 1, 1);
		struct tfs_venc *e;
		struct tfs_buf sec;
		struct tfs_vsec vs;
		struct vblock b;
		double t0 = now_s();
		int rc;

		if (!nv || venc_new(&o, &e) < 0)
			return -ENOMEM;
		for (uint64_t k = 0; k < s[i].n; k++)
			if (venc_add(e, s[i].term[k], s[i].ts[k], s[i].dur[k], NULL, 0) < 0)
				return -ENOMEM;
		buf_init(&sec);
		rc = venc_finish(e, &sec);
		venc_free(e);
		*enc_s += now_s() - t0;
		if (rc == 0)
			rc = vsec_open(&vs, sec.data, sec.len, 0, NULL);
		t0 = now_s();
		vblock_init(&b);
		for (uint64_t blk = 0; rc == 0 && blk < vs.n_blocks; blk++) {
			rc = vsec_decode_block(&vs, blk, s[i].term + blk * vs.block_events, nv,
					       s[i].n_terminals, &b, NULL);
			for (uint32_t k = 0; rc == 0 && timing == VAL_TIMING_LOSSLESS &&
					     k < b.n_events; k++)
				if (b.ts_ns[k] != s[i].ts[b.first_event + k] ||
				    b.dur_ns[k] != s[i].dur[b.first_event + k])
					rc = -EIO;
		}
		*dec_s += now_s() - t0;
		vblock_fini(&b);
		*bytes += (double)sec.len;
		buf_fini(&sec);
		free(nv);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int bench_trace(const char *path)
{
	static const char *const mode_names[] = {"", "lossless", "lossy 0.1"};
	struct tstream *s;
	uint64_t events = 0;
	uint32_t n;
	int rc;

	rc = load(path, &s, &n);
	if (rc < 0) {
		fprintf(stderr, "bench_values: cannot read %s: %s\n", path, strerror(-rc));
		return rc;
	}
	for (uint32_t i = 0; i < n; i++)
		events += s[i].n;
	printf("%s: %u streams, %llu events\n", path, n, (unsigned long long)events);
	printf("  %-10s %-24s %9s %8s %10s %10s\n", "timing", "variant", "B/event", "vs TFV1",
	       "enc ns/ev", "dec ns/ev");
	for (int timing = VAL_TIMING_LOSSLESS; timing <= VAL_TIMING_LOSSY && rc == 0; timing++) {
		double base = 0;

		for (size_t k = 0; k < N_VARIANTS && rc == 0; k++) {
			double bytes = 0, enc = 0, dec = 0;

			rc = run(s, n, &variants[k], timing, &bytes, &enc, &dec);
			if (k == 0)
				base = bytes;
			printf("  %-10s %-24s %9.3f %7.3fx %10.1f %10.1f\n", mode_names[timing],
			       variants[k].name, bytes / events, bytes / base, enc * 1e9 / events,
			       dec * 1e9 / events);
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		free(s[i].term);
		free(s[i].ts);
		free(s[i].dur);
	}
	free(s);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_values TRACE...\n");
		return 2;
	}
	for (int i = 1; i < argc; i++)
		if (bench_trace(argv[i]) < 0)
			return 1;
	return 0;
}
