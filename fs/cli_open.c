/*
 * The one way a `tracefs` subcommand opens a trace named on its command line: a trace still
 * being saved (an MPI rank's, whose recorder reserved the file before the job started and
 * saves it after the launcher returned, tfs/writer.h tfs_file_reserve()) is waited for,
 * bounded by TFS_SAVE_WAIT seconds, saying so once; any failure is reported in the one
 * message form with the diagnostic's section and offset. TRACEFS_BLOCK_CACHE_MB sizes the
 * trace's cache of decoded blocks. It does not read the trace.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "tfs/reader.h"
#include "cli_i.h"

#define EXIT_RUNTIME 1
#define SAVE_WAIT_S_DEFAULT 600 /* a job's last rank may take minutes to save on a busy node */
#define SAVE_POLL_NS 50000000	/* 50 ms between looks at a trace being saved */

/* Seconds to wait for a trace being saved: TFS_SAVE_WAIT (0 to 86400), else the default. */
static long save_wait_s(void)
{
	const char *s = getenv("TFS_SAVE_WAIT");
	char *end;
	long v;

	if (!s || !*s)
		return SAVE_WAIT_S_DEFAULT;
	v = strtol(s, &end, 10);
	return *end || v < 0 || v > 86400 ? SAVE_WAIT_S_DEFAULT : v;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * TRACEFS_BLOCK_CACHE_MB, when set to 0 to 65536: the budget of the trace's cache of decoded
 * blocks (tfs_trace_set_block_cache()), 0 turning it off; other values leave the default.
 */
static void set_block_cache(struct tfs_trace *t)
{
	const char *s = getenv("TRACEFS_BLOCK_CACHE_MB");
	char *end;
	long v;

	if (!s || !*s)
		return;
	v = strtol(s, &end, 10);
	if (!*end && v >= 0 && v <= 65536)
		tfs_trace_set_block_cache(t, (size_t)v << 20);
}

/* The detail of a failed open: the diagnostic where the codec gave one, else the errno text. */
static const char *detail(int rc, const struct tfs_diag *d, char *buf, size_t cap)
{
	if (d->section[0] && (rc == -TFS_ECORRUPT || rc == -TFS_EFORMAT || rc == -EINVAL))
		return tfs_diag_str(d, buf, cap);
	return fs_strerror(-rc);
}

int fs_trace_open(const char *path, struct tfs_trace **t)
{
	const struct timespec poll = {0, SAVE_POLL_NS};
	const long wait_s = save_wait_s();
	struct tfs_diag diag = {0};
	double deadline = -1;
	char buf[320];
	int rc;

	while ((rc = tfs_trace_open(path, t, &diag)) == -EBUSY) {
		if (deadline < 0) {
			deadline = mono_s() + (double)wait_s;
			if (wait_s)
				fs_fail(
				    "waiting for %s: its recorder is still saving it (up to %ld s, "
				    "TFS_SAVE_WAIT)",
				    path, wait_s);
		}
		if (mono_s() >= deadline) {
			fs_fail(
			    "cannot open %s: still being saved after %ld s (its recorder holds it "
			    "locked; TFS_SAVE_WAIT sets the wait)",
			    path, wait_s);
			return EXIT_RUNTIME;
		}
		nanosleep(&poll, NULL);
	}
	if (rc < 0) {
		fs_fail("cannot open %s: %s", path, detail(rc, &diag, buf, sizeof(buf)));
		return EXIT_RUNTIME;
	}
	set_block_cache(*t);
	return 0;
}
