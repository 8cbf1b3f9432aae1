/*
 * VAL argument columns of real traces (FORMAT.md §7.3): reads every event of every stream of
 * the traces given (terminal, times, VAL fields), re-encodes each stream's values section in
 * TFV3 (stride prediction only, what writers wrote before TFV4) and in TFV4 (stride and each
 * value class's history, §7.3.1) and prints bytes per event and decode ns per event, with
 * the values split into timing (the section with the VAL fields left out) and arguments (the
 * section without timing). Classes come from the trace's schema; traces recorded before
 * the schema declared them get the classes tracefs's capture declares, by kind and argument
 * name (the table below), so a trace recorded by an older tracefs measures the same.
 * Last, the order-0 entropy of each call site's gaps (from the previous event's end) and
 * durations counted in the clock's ticks (FORMAT.md §7.4.1): about what a lossless coder
 * that models each call site's timing alone must spend, whatever its container.
 * Usage: bench_args TRACE...   (tests/bench/run_capture_size records traces and runs it)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tfs/reader.h"
#include "values_i.h"
#include "vticks_i.h"

/* The events of one stream, VAL fields flattened. */
struct astream {
	uint64_t n;
	uint32_t *term;
	uint64_t *ts, *dur;
	uint64_t *vals;
	uint64_t *val_off; /* [n + 1] */
	uint32_t n_terminals;
};

/* A loaded trace: its streams and each terminal's VAL count and classes. */
struct atrace {
	struct astream *s;
	uint32_t n_streams;
	uint8_t *nv;	     /* [n_terms] */
	uint8_t *no_nv;	     /* [n_terms] zeros */
	uint8_t *cls;	     /* [n_terms * TFS_MAX_ARGS] */
	uint32_t *cls_off;   /* [n_terms] */
	uint32_t n_terms;
	int timing;
	uint64_t events;
};

/* What tracefs's capture (capture/calls.c) declares: kind, VAL argument, class name. */
static const char *const by_name[][3] = {
	{"malloc", "ret", "addr"},	    {"calloc", "ret", "addr"},
	{"realloc", "ptr", "addr"},	    {"realloc", "ret", "addr"},
	{"free", "ptr", "addr"},	    {"posix_memalign", "ptr", "addr"},
	{"aligned_alloc", "ret", "addr"},   {"memalign", "ret", "addr"},
	{"mmap", "addr", "addr"},	    {"mmap", "ret", "addr"},
	{"munmap", "addr", "addr"},	    {"malloc", "id", "alloc"},
	{"calloc", "id", "alloc"},	    {"realloc", "id", "alloc"},
	{"realloc", "freed", "alloc"},	    {"free", "id", "alloc"},
	{"posix_memalign", "id", "alloc"},  {"aligned_alloc", "id", "alloc"},
	{"memalign", "id", "alloc"},	    {"mmap", "id", "alloc"},
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The class name of VAL argument @a of kind @k: the schema's, else by_name's, else "". */
static const char *class_of(const struct tfs_kind_desc *k, const struct tfs_arg_desc *a)
{
	if (a->sym_class && a->sym_class[0])
		return a->sym_class;
	for (size_t i = 0; i < sizeof(by_name) / sizeof(by_name[0]); i++)
		if (!strcmp(by_name[i][0], k->name) && !strcmp(by_name[i][1], a->name))
			return by_name[i][2];
	return "";
}

/* Number the classes of every terminal's VAL fields, equal names equal numbers. */
static int load_classes(struct tfs_trace *t, struct atrace *a)
{
	const char *names[VAL_MAX_CLASSES];
	uint32_t n_names = 0;

	for (uint32_t term = 0; term < a->n_terms; term++) {
		struct tfs_kind_desc k;
		uint32_t kind, j = 0;

		if (tfs_trace_term_kind(t, term, &kind) < 0 || tfs_trace_kind(t, kind, &k) < 0)
			return -EINVAL;
		a->cls_off[term] = term * TFS_MAX_ARGS;
		for (uint32_t i = 0; i < k.n_args; i++) {
			const char *c;
			uint32_t q;

			if (k.args[i].enc != TFS_ENC_VAL)
				continue;
			c = class_of(&k, &k.args[i]);
			for (q = 0; q < n_names && strcmp(names[q], c); q++)
				;
			if (c[0] && q == n_names)
				names[n_names++] = c;
			a->cls[term * TFS_MAX_ARGS + j++] = c[0] ? (uint8_t)(q + 1) : 0;
		}
		a->nv[term] = (uint8_t)j;
	}
	return 0;
}

static int load_stream(struct tfs_trace *t, uint32_t i, const struct atrace *a,
		       struct astream *s)
{
	struct tfs_stream_info si;
	struct tfs_cursor *c;
	struct tfs_event ev;
	uint64_t nv = 0;
	int rc;

	tfs_trace_stream(t, i, &si);
	s->n = si.n_events;
	s->term = calloc(s->n + 1, sizeof(*s->term));
	s->ts = calloc(s->n + 1, sizeof(*s->ts));
	s->dur = calloc(s->n + 1, sizeof(*s->dur));
	s->val_off = calloc(s->n + 1, sizeof(*s->val_off));
	s->vals = calloc(s->n * 8 + 1, sizeof(*s->vals));
	if (!s->term || !s->ts || !s->dur || !s->val_off || !s->vals)
		return -ENOMEM;
	rc = tfs_cursor_new(t, i, TFS_VIEW_TEXT, 0, s->n, &c);
	for (uint64_t k = 0; k < s->n && rc == 0; k++) {
		struct tfs_kind_desc kd;

		rc = tfs_cursor_event(c, k, &ev, NULL);
		if (rc == 0)
			rc = tfs_trace_kind(t, ev.kind, &kd);
		if (rc < 0)
			break;
		s->term[k] = ev.terminal;
		s->ts[k] = ev.ts_ns;
		s->dur[k] = ev.dur_ns;
		s->val_off[k] = nv;
		if (nv + TFS_MAX_ARGS > s->n * 8) {
			uint64_t *q = realloc(s->vals, (nv + TFS_MAX_ARGS) * 2 * sizeof(*q));

			if (!q) {
				rc = -ENOMEM;
				break;
			}
			s->vals = q;
		}
		for (uint32_t j = 0; j < kd.n_args; j++)
			if (kd.args[j].enc == TFS_ENC_VAL)
				s->vals[nv++] = ev.args[j].u;
		if (ev.terminal >= s->n_terminals)
			s->n_terminals = ev.terminal + 1;
	}
	s->val_off[s->n] = nv;
	tfs_cursor_free(c);
	(void)a;
	return rc;
}

static int load(const char *path, struct atrace *a)
{
	struct tfs_trace_info info;
	struct tfs_trace *t;
	int rc;

	memset(a, 0, sizeof(*a));
	rc = tfs_trace_open(path, &t, NULL);
	if (rc < 0)
		return rc;
	tfs_trace_get_info(t, &info);
	a->n_terms = info.n_terminals;
	a->timing = info.timing;
	a->nv = calloc(a->n_terms + 1, 1);
	a->no_nv = calloc(a->n_terms + 1, 1);
	a->cls = calloc((size_t)a->n_terms * TFS_MAX_ARGS + 1, 1);
	a->cls_off = calloc(a->n_terms + 1, sizeof(*a->cls_off));
	a->s = calloc(info.n_streams + 1, sizeof(*a->s));
	if (!a->nv || !a->no_nv || !a->cls || !a->cls_off || !a->s)
		rc = -ENOMEM;
	if (rc == 0)
		rc = load_classes(t, a);
	for (uint32_t i = 0; i < info.n_streams && rc == 0; i++) {
		struct tfs_stream_info si;

		tfs_trace_stream(t, i, &si);
		if (si.same_as != i)
			continue; /* stored once */
		rc = load_stream(t, i, a, &a->s[a->n_streams]);
		a->events += a->s[a->n_streams++].n;
	}
	tfs_trace_close(t);
	return rc;
}

struct variant {
	const char *name;
	int version;
	bool classes;
};

static const struct variant variants[] = {
	{"TFV3 stride (before)", 3, false},
	{"TFV4 no classes", 4, false},
	{"TFV4 classes", 4, true},
};
#define N_VARIANTS (sizeof(variants) / sizeof(variants[0]))

#define DECODE_PASSES 5

/* What to encode of each event: times, VAL fields, or both. */
enum { PART_ALL, PART_TIMING, PART_ARGS, N_PARTS };

/* Encode and decode one stream; add bytes and decode seconds. */
static int run_stream(const struct atrace *a, const struct astream *s, const struct variant *v,
		      int timing, int part, double *bytes, double *dec_s)
{
	const struct venc_opts o = {.timing = part == PART_ARGS ? VAL_TIMING_NONE : timing,
				    .version = v->version};
	struct tfs_venc *e;
	struct tfs_buf sec;
	struct tfs_vsec vs;
	struct vblock b;
	double t0, best = 0;
	int rc;

	if (venc_new(&o, &e) < 0)
		return -ENOMEM;
	for (uint64_t k = 0; k < s->n; k++) {
		const uint32_t nv = part == PART_TIMING ? 0 : a->nv[s->term[k]];

		rc = venc_add_cls(e, s->term[k], s->ts[k], s->dur[k], s->vals + s->val_off[k], nv,
				  v->classes ? a->cls + a->cls_off[s->term[k]] : NULL);
		if (rc < 0)
			return rc;
	}
	buf_init(&sec);
	rc = venc_finish(e, &sec);
	venc_free(e);
	if (rc == 0)
		rc = vsec_open(&vs, sec.data, sec.len, 0, NULL);
	if (rc < 0)
		return rc;
	if (v->classes) {
		vs.cls = a->cls;
		vs.cls_off = a->cls_off;
	}
	vblock_init(&b);
	/* the fastest of a few passes: the machine may be shared */
	for (int pass = 0; pass < DECODE_PASSES && rc == 0; pass++) {
		double t;

		t0 = now_s();
		for (uint64_t blk = 0; rc == 0 && blk < vs.n_blocks; blk++) {
			rc = vsec_decode_block(&vs, blk, s->term + blk * vs.block_events,
					       part == PART_TIMING ? a->no_nv : a->nv, a->n_terms,
					       &b, NULL);
			for (uint32_t k = 0; rc == 0 && part == PART_ARGS && k < b.n_events; k++) {
				const uint64_t ev = b.first_event + k;

				const size_t len = (s->val_off[ev + 1] - s->val_off[ev]) * 8;

				if (memcmp(b.vals + b.val_off[k], s->vals + s->val_off[ev], len))
					rc = -EIO;
			}
		}
		t = now_s() - t0;
		if (pass == 0 || t < best)
			best = t;
	}
	*dec_s += best;
	vblock_fini(&b);
	*bytes += (double)sec.len;
	buf_fini(&sec);
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Bits of an order-0 code of the @n keys at @k (sorted here). */
static double entropy_bits(uint64_t *k, size_t n)
{
	double bits = 0;

	qsort(k, n, sizeof(*k), cmp_u64);
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && k[j] == k[i]; j++)
			;
		bits -= (double)(j - i) * log2((double)(j - i) / (double)n);
	}
	return bits;
}

/*
 * Order-0 entropy in bytes of each terminal's gaps and durations in ticks of the clock
 * (estimated on the stream's first 4,096 events; nanoseconds when no tick fits), summed.
 */
static double timing_entropy(const struct astream *s, uint32_t n_terms)
{
	const uint32_t n_est = s->n < 4096 ? (uint32_t)s->n : 4096;
	int64_t *scratch = calloc(2 * (size_t)n_est + 2, sizeof(*scratch));
	uint64_t *key = calloc(2 * s->n + 2, sizeof(*key));
	uint32_t *count = calloc(n_terms + 1, sizeof(*count));
	double guess = 0, bits = 0, q;
	size_t *first = calloc(n_terms + 2, sizeof(*first)), *at;

	if (!scratch || !key || !count || !first)
		return -1;
	q = n_est > 1 ? (double)vtick_estimate(s->ts, s->dur, n_est, scratch, &guess) : 0;
	q = q > 0 ? q / 4294967296.0 : 1.0;
	for (uint64_t i = 0; i < s->n; i++)
		count[s->term[i]]++;
	for (uint32_t t = 0; t < n_terms; t++)
		first[t + 1] = first[t] + count[t];
	at = calloc(n_terms + 1, sizeof(*at));
	if (!at)
		return -1;
	/* keys grouped by terminal: gaps, then (offset by the stream's events) durations */
	for (uint64_t i = 0; i < s->n; i++) {
		const uint32_t t = s->term[i];
		const uint64_t g = i ? s->ts[i] - s->ts[i - 1] - s->dur[i - 1] : 0;
		const double gap = (double)(int64_t)g;

		key[first[t] + at[t]] = (uint64_t)llround(gap / q);
		key[s->n + first[t] + at[t]++] = (uint64_t)llround((double)s->dur[i] / q);
	}
	for (uint32_t t = 0; t < n_terms; t++) {
		bits += entropy_bits(key + first[t], count[t]);
		bits += entropy_bits(key + s->n + first[t], count[t]);
	}
	free(scratch);
	free(key);
	free(count);
	free(first);
	free(at);
	return bits / 8;
}

static int bench_trace(const char *path)
{
	static const char *const mode_names[] = {"none", "lossless"};
	struct atrace a;
	int rc = load(path, &a);

	if (rc < 0) {
		fprintf(stderr, "bench_args: cannot read %s: %s\n", path, strerror(-rc));
		return rc;
	}
	printf("%s: %u streams, %llu events\n", path, a.n_streams, (unsigned long long)a.events);
	printf("  %-9s %-22s %9s %9s %9s %8s %10s %10s\n", "timing", "variant", "B/event",
	       "timing", "args", "vs TFV3", "dec ns/ev", "args only");
	for (int timing = VAL_TIMING_NONE; timing <= VAL_TIMING_LOSSLESS && rc == 0; timing++) {
		double base = 0;

		for (size_t k = 0; k < N_VARIANTS && rc == 0; k++) {
			double bytes[N_PARTS] = {0}, dec[N_PARTS] = {0};

			for (int part = 0; part < N_PARTS && rc == 0; part++) {
				if (part == PART_TIMING && timing == VAL_TIMING_NONE)
					continue;
				for (uint32_t i = 0; i < a.n_streams && rc == 0; i++)
					rc = run_stream(&a, &a.s[i], &variants[k], timing, part,
							&bytes[part], &dec[part]);
			}
			if (k == 0)
				base = bytes[PART_ALL];
			printf("  %-9s %-22s %9.4f %9.4f %9.4f %7.3fx %10.1f %10.1f\n",
			       mode_names[timing], variants[k].name, bytes[PART_ALL] / a.events,
			       bytes[PART_TIMING] / a.events, bytes[PART_ARGS] / a.events,
			       bytes[PART_ALL] / base, dec[PART_ALL] * 1e9 / a.events,
			       dec[PART_ARGS] * 1e9 / a.events);
		}
	}
	if (rc == 0 && a.timing == VAL_TIMING_LOSSLESS) {
		double bytes = 0;

		for (uint32_t i = 0; i < a.n_streams; i++)
			bytes += timing_entropy(&a.s[i], a.n_terms);
		printf("  timing entropy, order 0 per call site in clock ticks: %.0f B, %.4f "
		       "B/event\n", bytes, bytes / a.events);
	}
	for (uint32_t i = 0; i < a.n_streams; i++) {
		free(a.s[i].term);
		free(a.s[i].ts);
		free(a.s[i].dur);
		free(a.s[i].vals);
		free(a.s[i].val_off);
	}
	free(a.s);
	free(a.nv);
	free(a.no_nv);
	free(a.cls);
	free(a.cls_off);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_args TRACE...\n");
		return 2;
	}
	for (int i = 1; i < argc; i++)
		if (bench_trace(argv[i]) < 0)
			return 1;
	return 0;
}
