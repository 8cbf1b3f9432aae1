/*
 * Codec benchmark: encode cost and bytes per event on a regular (nested loops) and an
 * irregular stream, and seek latency in a 10^10-event trace. Every figure comes with a
 * baseline measured in the same run: a plain text logger (snprintf + streaming zstd -3)
 * for encoding, decoding from the start for seeking. Text renderings are written to OUTDIR
 * so tests/bench/run can compress them with zstd -19 --long=27 and xz -9.
 * Usage: bench_codec OUTDIR [events]
 *        bench_codec --make-huge PATH   (only write the 10^10-event trace, for run_mount)
 *        bench_codec --make-calls PATH  (the same loops of several calls, for run_calls)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <zstd.h>

#include "testutil.h"
#include "tfs/reader.h"
#include "tfs/writer.h"
#include "tracegen.h"
#include "writer_i.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "bench_codec: %s failed: %d\n", what, rc);
	exit(1);
}

static uint64_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* The baseline logger: one printf-style line per event, streamed through zstd -3. */
static double text_logger_ns(const struct tg_stream *s)
{
	ZSTD_CCtx *z = ZSTD_createCCtx();
	size_t cap = ZSTD_CStreamOutSize();
	char *out = malloc(cap), line[256];
	double t0 = now_s();
	uint64_t sink = 0;

	ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, 3);
	for (uint64_t i = 0; i < s->n; i++) {
		const struct tg_event *e = &s->ev[i];
		int n = snprintf(line, sizeof(line), "%" PRIu64 " %" PRIu64 " %u %" PRIu64
			     " %" PRIu64 " %" PRIu64 "\n", e->ts, e->dur, e->kind, e->args[0].u,
			     e->args[1].u, e->args[2].u);
		ZSTD_inBuffer in = {line, (size_t)n, 0};

		while (in.pos < in.size) {
			ZSTD_outBuffer o = {out, cap, 0};

			ZSTD_compressStream2(z, &o, &in, ZSTD_e_continue);
			sink += o.pos;
		}
	}
	for (;;) {
		ZSTD_outBuffer o = {out, cap, 0};
		ZSTD_inBuffer in = {NULL, 0, 0};
		size_t left = ZSTD_compressStream2(z, &o, &in, ZSTD_e_end);

		sink += o.pos;
		if (left == 0)
			break;
	}
	ZSTD_freeCCtx(z);
	free(out);
	if (!sink)
		die("zstd", -1);
	return (now_s() - t0) * 1e9 / (double)s->n;
}

/* Write the TEXT view of stream 0 with the line padding stripped (the fair baseline). */
static void dump_text(const char *trace, const char *txt)
{
	struct tfs_trace *t;
	struct tfs_cursor *c;
	FILE *f = fopen(txt, "w");
	char *buf = malloc(1 << 20);
	uint64_t off = 0;
	int rc = tfs_trace_open(trace, &t, NULL);

	if (rc || !f || !buf)
		die("dump_text", rc);
	for (uint32_t s = 0; s < 1; s++) {
		struct tfs_stream_info si;

		tfs_trace_stream(t, s, &si);
		rc = tfs_cursor_new(t, s, TFS_VIEW_TEXT, 0, si.n_events, &c);
		if (rc)
			die("cursor", rc);
		for (off = 0; off < tfs_cursor_size(c);) {
			ssize_t got = tfs_cursor_pread(c, buf, 1 << 20, off, NULL);
			char *p = buf, *end = buf + got, *nl;

			if (got <= 0)
				die("pread", (int)got);
			off += (uint64_t)got;
			/* strip the padding before each newline; a line cut by the chunk end
			 * is read again with the next chunk */
			while (p < end && (nl = memchr(p, '\n', (size_t)(end - p)))) {
				char *q = nl;

				while (q > p && q[-1] == ' ')
					q--;
				fwrite(p, 1, (size_t)(q - p), f);
				fputc('\n', f);
				p = nl + 1;
			}
			off -= (uint64_t)(end - p);
		}
		tfs_cursor_free(c);
	}
	fclose(f);
	free(buf);
	tfs_trace_close(t);
}

struct enc_result {
	double ns, base_ns;
	uint64_t bytes, n;
};

static struct enc_result encode(const char *dir, const char *name, uint64_t n, int regular,
				int timing)
{
	struct tfs_writer_opts o = {.timing = timing, .rel_err = 0.1};
	struct tg_stream s = {0};
	struct enc_result r = {.n = n};
	struct tfs_writer *w;
	struct tfs_wstream *ws;
	char path[512], txt[512];
	double t0;
	int rc;

	if ((rc = tg_fill(&s, n, regular, 12345)))
		die("tg_fill", rc);
	if ((rc = tfs_writer_new(&o, &w)) || (rc = tg_declare(w)) ||
	    (rc = tfs_writer_stream_new(w, 0, 0, &ws)))
		die("writer", rc);
	t0 = now_s();
	for (uint64_t i = 0; i < n; i++)
		if ((rc = tfs_wstream_append(ws, s.ev[i].kind, s.ev[i].ts, s.ev[i].dur,
					     s.ev[i].args)))
			die("append", rc);
	r.ns = (now_s() - t0) * 1e9 / (double)n;
	snprintf(path, sizeof(path), "%s/%s.trace", dir, name);
	if ((rc = tfs_writer_save(w, path)))
		die("save", rc);
	tfs_writer_free(w);
	r.bytes = file_size(path);
	r.base_ns = text_logger_ns(&s);
	snprintf(txt, sizeof(txt), "%s/%s.txt", dir, name);
	dump_text(path, txt);
	printf("encode %-22s events=%-9" PRIu64 " ns/event=%7.1f  text-logger ns/event=%7.1f  "
	       "ratio=%.2f  trace_bytes=%" PRIu64 " bytes/event=%.4f\n",
	       name, n, r.ns, r.base_ns, r.ns / r.base_ns, r.bytes, (double)r.bytes / (double)n);
	tg_free(&s);
	return r;
}

/* Nested loops as one hand-made grammar block: 10^4 x (10^3 x (10^3 x 3 + 1) + 1) events. */
static void put_elem(struct tfs_buf *b, uint64_t id, int is_rule, uint64_t count)
{
	buf_put_varint(b, id << 2 | (uint64_t)is_rule << 1 | (count >= 2));
	if (count >= 2)
		buf_put_varint(b, count - 2);
}

static uint64_t make_huge(const char *path)
{
	static const struct tfs_arg_desc a[] = {{.name = "tag", .type = TFS_TYPE_U64}};
	struct tfs_kind_desc k = {"step", "loop", 1, a};
	struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
	struct tfs_writer *w;
	struct tfs_wstream *s;
	struct tfs_buf b;
	uint32_t kind;
	int rc;

	if ((rc = tfs_writer_new(&o, &w)) || (rc = tfs_writer_add_kind(w, &k, &kind)) ||
	    (rc = tfs_writer_stream_new(w, 0, 0, &s)))
		die("huge writer", rc);
	for (uint64_t i = 0; i < 5; i++)
		if ((rc = tfs_wstream_append(s, kind, 0, 0, (union tfs_arg[]){{.u = i * 1111}})))
			die("huge append", rc);
	buf_init(&b);
	buf_put_varint(&b, 4);			/* rules */
	buf_put_varint(&b, 3);			/* R0 -> t0 t1 t2 */
	put_elem(&b, 0, 0, 1);
	put_elem(&b, 1, 0, 1);
	put_elem(&b, 2, 0, 1);
	buf_put_varint(&b, 2);			/* R1 -> R0^1000 t3 */
	put_elem(&b, 0, 1, 1000);
	put_elem(&b, 3, 0, 1);
	buf_put_varint(&b, 2);			/* R2 -> R1^1000 t4 */
	put_elem(&b, 1, 1, 1000);
	put_elem(&b, 4, 0, 1);
	buf_put_varint(&b, 1);			/* S -> R2^10000 */
	put_elem(&b, 2, 1, 10000);
	if ((rc = wstream_import_block(s, b.data, b.len)))
		die("import", rc);
	buf_fini(&b);
	if ((rc = tfs_writer_save(w, path)))
		die("huge save", rc);
	tfs_writer_free(w);
	return 10000ull * (1000ull * (1000ull * 3 + 1) + 1) + 5;
}

/*
 * The loops of make_huge() with the calls of a solver: 3 x 10^10 events, of which 10^10
 * pwrite, 10^7 MPI_Allreduce and 10^4 MPI_Barrier, the rest two step signatures.
 */
static uint64_t make_calls(const char *path)
{
	static const struct tfs_arg_desc a[] = {{.name = "tag", .type = TFS_TYPE_U64}};
	static const char *const names[] = {"step", "pwrite", "MPI_Allreduce", "MPI_Barrier"};
	/* terminal i: kind of_term[i] (two step signatures, then one of each call) */
	static const uint32_t of_term[] = {0, 0, 1, 2, 3};
	struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
	struct tfs_writer *w;
	struct tfs_wstream *s;
	uint32_t kind[4];
	struct tfs_buf b;
	int rc;

	if ((rc = tfs_writer_new(&o, &w)))
		die("calls writer", rc);
	for (int i = 0; i < 4; i++)
		if ((rc = tfs_writer_add_kind(w, &(struct tfs_kind_desc){names[i], "loop", 1, a},
					      &kind[i])))
			die("calls kind", rc);
	if ((rc = tfs_writer_stream_new(w, 0, 0, &s)))
		die("calls stream", rc);
	for (uint64_t i = 0; i < 5; i++)
		if ((rc = tfs_wstream_append(s, kind[of_term[i]], 0, 0,
					     (union tfs_arg[]){{.u = i * 1111}})))
			die("calls append", rc);
	buf_init(&b);
	buf_put_varint(&b, 4);			/* rules */
	buf_put_varint(&b, 3);			/* R0 -> t0 t1 t2 */
	put_elem(&b, 0, 0, 1);
	put_elem(&b, 1, 0, 1);
	put_elem(&b, 2, 0, 1);
	buf_put_varint(&b, 2);			/* R1 -> R0^1000 t3 */
	put_elem(&b, 0, 1, 1000);
	put_elem(&b, 3, 0, 1);
	buf_put_varint(&b, 2);			/* R2 -> R1^1000 t4 */
	put_elem(&b, 1, 1, 1000);
	put_elem(&b, 4, 0, 1);
	buf_put_varint(&b, 1);			/* S -> R2^10000 */
	put_elem(&b, 2, 1, 10000);
	if ((rc = wstream_import_block(s, b.data, b.len)))
		die("calls import", rc);
	buf_fini(&b);
	if ((rc = tfs_writer_save(w, path)))
		die("calls save", rc);
	tfs_writer_free(w);
	return 10000ull * (1000ull * (1000ull * 3 + 1) + 1) + 5;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void seek_bench(const char *dir)
{
	char path[512];
	uint64_t n_events, seed = 99, size, off, decoded = 0;
	struct tfs_trace *t;
	struct tfs_cursor *c;
	double lat[1000], t0, open_s, rate;
	char *buf = malloc(1 << 20);
	int rc;

	snprintf(path, sizeof(path), "%s/huge.trace", dir);
	n_events = make_huge(path);
	t0 = now_s();
	if ((rc = tfs_trace_open(path, &t, NULL)))
		die("open huge", rc);
	open_s = now_s() - t0;
	if ((rc = tfs_cursor_new(t, 0, TFS_VIEW_TEXT, 0, n_events, &c)))
		die("cursor huge", rc);
	size = tfs_cursor_size(c);
	for (int i = 0; i < 1000; i++) {
		off = tu_below(&seed, size - 4096);
		t0 = now_s();
		if (tfs_cursor_pread(c, buf, 4096, off, NULL) != 4096)
			die("seek read", -1);
		lat[i] = (now_s() - t0) * 1e6;
	}
	qsort(lat, 1000, sizeof(lat[0]), cmp_d);
	/* baseline: decoding from the start, measured over 256 MiB and extrapolated to the
	 * mean distance of a random offset (half the view) */
	t0 = now_s();
	for (off = 0; off < (256u << 20); off += (uint64_t)rc) {
		rc = (int)tfs_cursor_pread(c, buf, 1 << 20, off, NULL);
		if (rc <= 0)
			die("sequential", rc);
		decoded += (uint64_t)rc;
	}
	rate = (double)decoded / (now_s() - t0);
	printf("seek   huge trace: events=%" PRIu64 " file_bytes=%" PRIu64 " text_view_bytes=%"
	       PRIu64 " open_ms=%.3f\n", n_events, file_size(path), size, open_s * 1e3);
	printf("seek   4KiB at 1000 random offsets: median_us=%.2f p99_us=%.2f  "
	       "decode-from-start mean_us=%.3g (sequential %.0f MB/s, extrapolated)  "
	       "ratio=%.3g\n", lat[500], lat[990], (double)size / 2 / rate * 1e6, rate / 1e6,
	       lat[500] / ((double)size / 2 / rate * 1e6));
	tfs_cursor_free(c);
	tfs_trace_close(t);
	free(buf);
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 0) : 10000000;

	if (argc < 2) {
		fprintf(stderr, "usage: bench_codec OUTDIR [events] | --make-huge PATH | "
				"--make-calls PATH\n");
		return 2;
	}
	if (strcmp(argv[1], "--make-huge") == 0 || strcmp(argv[1], "--make-calls") == 0) {
		if (argc != 3) {
			fprintf(stderr, "usage: bench_codec %s PATH\n", argv[1]);
			return 2;
		}
		printf("%" PRIu64 "\n", argv[1][7] == 'h' ? make_huge(argv[2]) : make_calls(argv[2]));
		return 0;
	}
	encode(argv[1], "regular-untimed", n, 1, TFS_TIMING_NONE);
	encode(argv[1], "regular-lossless", n, 1, TFS_TIMING_LOSSLESS);
	encode(argv[1], "regular-lossy10", n, 1, TFS_TIMING_LOSSY);
	encode(argv[1], "irregular-untimed", n / 10, 0, TFS_TIMING_NONE);
	encode(argv[1], "irregular-lossless", n / 10, 0, TFS_TIMING_LOSSLESS);
	seek_bench(argv[1]);
	return 0;
}
