/*
 * One recording of `tracefs record` (tfs/recording.h): its private directory and first spool,
 * made and locked before the program starts, the consumers of every process's spool
 * (recprocs.c) polled while they run, MPI_Finalize's request for the trace served, and the
 * trace saved at the end with each rank's metadata. It neither starts nor waits for
 * processes (fs/cmd_record.c does) and never reads a record itself (consumer.c does). The
 * public options become the spool's and the consumer's here, and the public parsers are the
 * capture's own (spool.c, consumer.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "tfs/capture.h"
#include "tfs/recording.h"
#include "recdir_i.h"
#include "recprocs_i.h"
#include "stacks_i.h"

/* new processes' spools are looked for at least this often, however long a poll takes:
 * their producers wait for us once their spool has grown full (spool_i.h) */
#define SCAN_PERIOD_NS 20000000u

struct tfs_recording {
	struct tfs_recording_opts o;
	struct cap_timing tm;	 /* o.timing, as the consumers take it */
	struct cap_recdir *dir;
	struct spool s;		 /* the first process's */
	struct cap_consumer *c;	 /* its consumer */
	struct rec_procs *ps;	 /* every process's, from tfs_recording_start on */
	uint64_t scanned_ns;	 /* when the directory was last listed */
	unsigned int pass;
	int err;		 /* the first consumer error: sticky, no trace */
	bool served;		 /* MPI_Finalize took the trace */
};

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Sweep the prefix's directory and say what was removed, in one line. */
static void sweep(const struct tfs_recording_opts *o, const char *prefix)
{
	const char *slash = strrchr(prefix, '/');
	uint64_t bytes;
	uint32_t n;

	cap_recdir_sweep(prefix, &n, &bytes);
	/* spools grow as they fill: a killed recording may have left a few hundred KiB */
	if (n)
		o->say("removed %" PRIu32 " spool%s (%" PRIu64 " %s) left in %.*s by recordings "
		       "that were killed", n, n == 1 ? "" : "s",
		       bytes >= (1u << 20) ? bytes >> 20 : (bytes + 1023) >> 10,
		       bytes >= (1u << 20) ? "MiB" : "KiB",
		       (int)(slash == prefix ? 1 : slash - prefix), prefix);
}

/* The first process's spool: it starts small and grows up to the spool size. */
static int make_first(struct tfs_recording *r)
{
	const struct tfs_recording_opts *o = &r->o;
	int rc = cap_spool_create(&r->s, r->dir->first, o->spool_bytes, SPOOL_START_CHUNKS,
				  (uint32_t)o->timing.timing, o->mask);

	if (rc < 0)
		return rc;
	/* backtraces belong to allocations: none without them */
	if (o->mask & TFS_TRACE_ALLOC)
		r->s.hdr->bt_depth = o->bt_depth;
	r->s.hdr->policy = (struct spool_policy){.when_full = o->policy.when_full,
						 .sample = o->policy.sample,
						 .sample_every = o->policy.sample_every};
	return cap_recdir_lock(r->dir);
}

int tfs_recording_new(const struct tfs_recording_opts *o, struct tfs_recording **out)
{
	struct tfs_recording *r = calloc(1, sizeof(*r));
	char prefix[PATH_MAX];
	int rc;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	r->o = *o;
	cap_symbols_keep_in(o->symbol_dir);
	r->tm = (struct cap_timing){.timing = o->timing.timing,
				    .rel_err = o->timing.rel_err,
				    .coder = o->timing.coder};
	rc = cap_recdir_prefix(prefix, sizeof(prefix));
	if (rc < 0) {
		o->say("cannot make the spool directory of TFS_SPOOL: %s", o->strerr(-rc));
		goto err_free;
	}
	sweep(o, prefix);
	rc = cap_recdir_new(prefix, &r->dir);
	if (rc < 0) {
		o->say("cannot make the spool directory %s.XXXXXX: %s", prefix, o->strerr(-rc));
		goto err_free;
	}
	rc = make_first(r);
	if (rc < 0) {
		o->say("cannot create the spool %s: %s", r->dir->first, o->strerr(-rc));
		goto err_remove;
	}
	rc = cap_consumer_new(&r->s, &r->tm, &r->c);
	if (rc < 0) {
		o->say("cannot start the consumer: %s", o->strerr(-rc));
		goto err_remove;
	}
	*out = r;
	return 0;

err_remove:
	cap_spool_unmap(&r->s);
	cap_recdir_free(r->dir, true);
err_free:
	free(r);
	return rc;
}

const char *tfs_recording_spool(const struct tfs_recording *r)
{
	return r->dir->first;
}

int tfs_recording_start(struct tfs_recording *r, pid_t pid)
{
	r->scanned_ns = mono_ns();
	return rec_procs_new(&r->s, r->c, r->dir->first, (uint32_t)pid, &r->tm, &r->o, &r->ps);
}

/* Common metadata, `end` (when @end) and the caller's pairs, onto the first trace. */
static int first_meta(struct tfs_recording *r, const char *end)
{
	int rc = cap_consumer_set_common_meta(r->c, r->o.program, r->o.cmdline,
					      (long)rec_procs_first_pid(r->ps), "record");

	if (rc == 0 && end)
		rc = cap_consumer_set_meta(r->c, "end", end);
	for (const char *const *m = r->o.meta; rc == 0 && m && m[0] && m[1]; m += 2)
		rc = cap_consumer_set_meta(r->c, m[0], m[1]);
	return rc;
}

/*
 * MPI_Finalize asked for the trace (spool_i.h save_req): finish the program's own consumer
 * and save its trace as the spool's save name for the MPI wrappers to merge (processes the
 * rank started are not in it). @return true once served: the consumer is finished.
 */
static bool serve_save(struct tfs_recording *r)
{
	char path[PATH_MAX];
	int rc;

	if (atomic_load(&r->s.hdr->save_req) != 1)
		return false;
	rc = cap_spool_save_path(r->dir->first, path, sizeof(path));
	if (rc == 0)
		rc = cap_consumer_finish(r->c);
	if (rc == 0)
		rc = first_meta(r, "MPI_Finalize");
	if (rc == 0)
		rc = cap_consumer_save(r->c, path);
	atomic_store(&r->s.hdr->save_rc, rc < 0 ? rc : 1);
	return true;
}

int tfs_recording_poll(struct tfs_recording *r)
{
	int n = r->err ? 0 : rec_procs_poll(r->ps);

	if (n < 0)
		r->err = n;
	if (r->o.mpi && !r->served && !r->err)
		r->served = serve_save(r);
	if (r->pass++ % 4 == 0 || mono_ns() - r->scanned_ns >= SCAN_PERIOD_NS) {
		rec_procs_scan(r->ps, false);
		r->scanned_ns = mono_ns();
	}
	return r->err ? r->err : n;
}

void tfs_recording_reaped(struct tfs_recording *r, pid_t pid, int status)
{
	rec_procs_reaped(r->ps, pid, status);
}

void tfs_recording_orphaned(struct tfs_recording *r)
{
	rec_procs_orphaned(r->ps);
}

bool tfs_recording_ended(struct tfs_recording *r)
{
	rec_procs_scan(r->ps, false);
	return rec_procs_all_gone(r->ps);
}

bool tfs_recording_served(const struct tfs_recording *r)
{
	return r->served;
}

bool tfs_recording_nothing(struct tfs_recording *r)
{
	if (atomic_load(&r->s.hdr->producer_pid) != 0)
		return false;
	rec_procs_scan(r->ps, true);
	return rec_procs_count(r->ps) == 1;
}

int tfs_recording_save(struct tfs_recording *r, const char *out)
{
	int rc = cap_consumer_finish(r->c);

	if (rc == 0)
		rc = first_meta(r, NULL);
	if (rc == 0)
		rc = rec_procs_finish(r->ps);
	if (rc == 0)
		rc = rec_procs_first_meta(r->ps);
	if (rc == 0 && rec_procs_count(r->ps) == 1)
		rc = cap_consumer_save(r->c, out);
	else if (rc == 0)
		rc = rec_procs_save(r->ps, out);
	return rc;
}

uint32_t tfs_recording_stats(const struct tfs_recording *r, struct tfs_recording_stats *st)
{
	if (!r->ps) {
		cap_consumer_stats(r->c, st);
		return 1;
	}
	rec_procs_stats(r->ps, st);
	return rec_procs_count(r->ps);
}

void tfs_recording_free(struct tfs_recording *r, bool remove)
{
	if (!r)
		return;
	rec_procs_free(r->ps);
	cap_consumer_free(r->c);
	cap_spool_unmap(&r->s);
	cap_recdir_free(r->dir, remove);
	free(r);
}

void tfs_recording_describe_end(int status, char *buf, size_t cap)
{
	if (WIFEXITED(status))
		snprintf(buf, cap, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, cap, "killed by signal %d (SIG%s)%s", WTERMSIG(status),
			 sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?",
			 WCOREDUMP(status) ? ", core dumped" : "");
	else
		snprintf(buf, cap, "ended with wait status %d", status);
}

int tfs_recording_parse_timing(const char *s, struct tfs_recording_timing *out)
{
	struct cap_timing tm;
	int rc = cap_parse_timing(s, &tm);

	*out = (struct tfs_recording_timing){.timing = tm.timing, .rel_err = tm.rel_err,
					     .coder = tm.coder};
	return rc;
}

int tfs_recording_parse_trace(const char *s, uint32_t *mask)
{
	return cap_parse_trace(s, mask);
}

int tfs_recording_parse_when_full(const char *s, uint32_t *out)
{
	return cap_parse_when_full(s, out);
}

int tfs_recording_parse_count(const char *s, uint64_t *out)
{
	return cap_parse_count(s, out);
}
