/*
 * `tracefs merge -o OUT TRACE...`: one trace whose ranks are the inputs' ranks one after
 * the other (tfs_merge_traces()), written to OUT through a temporary file renamed into
 * place, so OUT is never seen half-written and may be one of the inputs. An input still
 * being saved (an MPI rank's after a failed job: `tracefs merge -o run.trace run.trace.*`
 * straight after mpiexec returned) is waited for (fs_trace_open()). Errors name the input
 * file and the offset in it. This file does the command line and the file only.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tfs/merge.h"
#include "tfs/reader.h"
#include "tfs/writer.h"
#include "cli_i.h"
#include "merge_i.h"

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2

static int usage(const char *what)
{
	fs_usage("merge", "%s", what);
	return EXIT_USAGE;
}

/* The detail of a negative error: the diagnostic where there is one, else the errno text. */
static const char *detail(int rc, const struct tfs_diag *d, char *buf, size_t cap)
{
	if (d->section[0] && (rc == -TFS_ECORRUPT || rc == -TFS_EFORMAT || rc == -EINVAL))
		return tfs_diag_str(d, buf, cap);
	snprintf(buf, cap, "%s", fs_strerror(-rc));
	return buf;
}

/* Report a failed merge, naming the input the diagnostic's "input <i>: " prefix points at. */
static void merge_failed(int rc, struct tfs_diag *d, char **files, uint32_t n)
{
	char buf[320];
	unsigned int i;
	int used = 0;

	if (d->section[0] && sscanf(d->reason, "input %u: %n", &i, &used) == 1 && used > 0 &&
	    i < n) {
		memmove(d->reason, d->reason + used, strlen(d->reason + used) + 1);
		fs_fail("cannot merge %s: %s", files[i], detail(rc, d, buf, sizeof(buf)));
		return;
	}
	fs_fail("cannot merge: %s", detail(rc, d, buf, sizeof(buf)));
}

int fs_cmd_merge(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"output", required_argument, NULL, 'o'},
	    {0},
	};
	struct tfs_trace **in;
	struct tfs_trace_info oi;
	struct tfs_trace *check;
	struct tfs_diag d = {0};
	const char *out = NULL;
	char buf[320];
	uint32_t n, opened = 0;
	void *data = NULL;
	size_t len = 0;
	int c, rc, status = EXIT_RUNTIME;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:", lo, NULL)) != -1) {
		if (c != 'o')
			return usage("unknown option or missing argument");
		out = optarg;
	}
	if (!out)
		return usage("-o OUT is required");
	if (optind >= argc)
		return usage("needs at least one TRACE");
	n = (uint32_t)(argc - optind);
	in = calloc(n, sizeof(*in));
	if (!in)
		return fs_fail("cannot merge: %s", fs_strerror(ENOMEM));
	for (; opened < n; opened++) {
		if (fs_trace_open(argv[optind + opened], &in[opened]))
			goto out_close;
	}
	rc = tfs_merge_traces(in, n, &data, &len, &d);
	if (rc < 0) {
		merge_failed(rc, &d, argv + optind, n);
		goto out_close;
	}
	/* what was written must read back: a merge bug must not leave a bad file behind */
	rc = tfs_trace_open_mem(data, len, &check, &d);
	if (rc < 0) {
		fs_fail("cannot merge: the result does not read back: %s",
			detail(rc, &d, buf, sizeof(buf)));
		goto out_close;
	}
	tfs_trace_get_info(check, &oi);
	tfs_trace_close(check);
	rc = tfs_file_write(out, data, len);
	if (rc < 0) {
		fs_fail("cannot write %s: %s", out, fs_strerror(-rc));
		goto out_close;
	}
	printf("%s: %" PRIu32 " traces merged: %" PRIu32 " ranks, %" PRIu32 " streams, %" PRIu64
	       " events, %zu bytes\n",
	       out, n, oi.n_ranks, oi.n_streams, oi.n_events, len);
	status = fflush(stdout) == 0 || errno == EPIPE ? 0 : EXIT_RUNTIME;
out_close:
	free(data);
	for (uint32_t i = 0; i < opened; i++)
		tfs_trace_close(in[i]);
	free(in);
	return status;
}
