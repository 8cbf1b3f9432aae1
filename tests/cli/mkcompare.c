/*
 * Traces for the tests of `tracefs compare` (check_compare.py), written through the public
 * writer API: two ranks, one thread each, a loop of three calls (`call` with op 1, 2 with a
 * peer rank, 3; each with a byte count that grows) repeated to N events per rank. Variants
 * change one thing: `call` one call of rank 1 (op 9 at event K), `value` one value of
 * rank 0 (event K's byte count), `longer` the length (one call more at the end of rank 1).
 * `irregular` draws each op from a fixed pseudo-random sequence instead, and `blocks`
 * writes with a small grammar budget, which cuts an irregular stream into many grammar
 * blocks: the same calls in another rule structure. `print` puts first in each rank a
 * `print` call with a file name and a format string (as the capture's printf has), and
 * `printpath` and `printformat` give rank 1's another one. VARIANT is a comma-separated list
 * of these words (or `plain`). It prints nothing.
 *
 *   mkcompare OUT N VARIANT [K]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfs/writer.h"

static const struct tfs_arg_desc call_args[] = {
    {"op", TFS_TYPE_U64, TFS_ENC_SIG, 0, NULL},
    {"peer", TFS_TYPE_I64, TFS_ENC_RANK, 0, NULL},
    {"bytes", TFS_TYPE_U64, TFS_ENC_VAL, TFS_ARG_BYTES, NULL},
};

static const struct tfs_arg_desc print_args[] = {
    {"fd", TFS_TYPE_I64, TFS_ENC_SIG, 0, NULL},
    {"path", TFS_TYPE_STR, TFS_ENC_STR, 0, NULL},
    {"format", TFS_TYPE_STR, TFS_ENC_STR, 0, NULL},
};

int main(int argc, char **argv)
{
	struct tfs_kind_desc pd = {"print", "test", 3, print_args};
	uint32_t print_kind;
	struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
	struct tfs_kind_desc kd = {"call", "test", 3, call_args};
	struct tfs_writer *w;
	uint64_t n, k = 0;
	uint32_t kind;
	const char *variant;
	int rc;

	if (argc < 4) {
		fprintf(stderr, "usage: mkcompare OUT N VARIANT [K]\n");
		return 2;
	}
	n = strtoull(argv[2], NULL, 10);
	variant = argv[3];
	if (argc > 4)
		k = strtoull(argv[4], NULL, 10);
	if (strstr(variant, "blocks"))
		o.grammar_budget = 4096;
	rc = tfs_writer_new(&o, &w);
	if (rc == 0)
		rc = tfs_writer_add_kind(w, &kd, &kind);
	if (rc == 0)
		rc = tfs_writer_add_kind(w, &pd, &print_kind);
	for (uint32_t r = 0; rc == 0 && r < 2; r++) {
		struct tfs_wstream *s;
		uint64_t len = n + (r == 1 && strstr(variant, "longer")), x = 42;

		rc = tfs_writer_stream_new(w, r, 0, &s);
		if (rc == 0 && strstr(variant, "print")) {
			union tfs_arg p[3];

			p[0].i = 1;
			p[1].s = r == 1 && strstr(variant, "printpath") ? "/tmp/b.txt" : "/tmp/a.txt";
			p[2].s = r == 1 && strstr(variant, "printformat") ? "%x\n" : "%d\n";
			rc = tfs_wstream_append(s, print_kind, 0, 0, p);
		}
		for (uint64_t i = 0; rc == 0 && i < len; i++) {
			union tfs_arg a[3];

			a[0].u = i % 3 + 1;
			if (strstr(variant, "irregular")) {
				x = x * 6364136223846793005u + 1442695040888963407u;
				a[0].u = (x >> 33) % 3 + 1;
			}
			a[1].i = i % 3 == 1 ? (int64_t)(r ^ 1) : (int64_t)r;
			a[2].u = 64 * (i / 3 % 1000);
			if (r == 1 && i == k && strstr(variant, "call"))
				a[0].u = 9;
			if (r == 0 && i == k && strstr(variant, "value"))
				a[2].u += 1;
			rc = tfs_wstream_append(s, kind, 0, 0, a);
		}
	}
	if (rc == 0)
		rc = tfs_writer_save(w, argv[1]);
	tfs_writer_free(w);
	if (rc < 0) {
		fprintf(stderr, "mkcompare: %s\n", strerror(-rc));
		return 1;
	}
	return 0;
}
