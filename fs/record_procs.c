/*
 * The processes of one `tracefs record`: the first process's spool and consumer, and those
 * of every process forked or spawned from it, which record into spools of their own named
 * `<first spool>.<pid>` (capture.c). New spools are found by listing their directory, so a
 * process that crashes right after creating its spool is still found; each is consumed
 * like the first. At the end each process's trace is saved in memory and they are merged
 * (tfs_merge_traces): rank 0 is the first process, then the others in the order they began
 * (fork order), each with its pid, ppid and how it ended in the metadata. It does not start
 * or wait for processes (cmd_record.c does).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tfs/merge.h"
#include "tfs/reader.h"
#include "cli_i.h"
#include "consumer_i.h"
#include "merge_i.h"
#include "record_procs_i.h"

struct rproc {
	char *path;
	struct spool *s;	/* its own allocation: the consumer keeps a pointer to it */
	struct cap_consumer *c;
	uint32_t pid, ppid;
	uint64_t fork_ns;
	int status;	/* wait status, when @reaped */
	bool reaped;	/* the recorder reaped it (the first process, orphans) */
	bool borrowed;	/* the first process's spool and consumer belong to the caller */
};

struct rec_procs {
	struct rproc *v;
	uint32_t n, cap;
	struct cap_timing tm;
	char *dir;	/* the spools' directory */
	char *prefix;	/* "<first spool's name>." */
	uint32_t n_bad;	/* spools that never became readable */
};

int rec_procs_new(struct spool *s, struct cap_consumer *c, const char *path, uint32_t pid,
		  const struct cap_timing *tm, struct rec_procs **out)
{
	struct rec_procs *ps = calloc(1, sizeof(*ps));
	const char *slash = strrchr(path, '/');

	*out = NULL;
	if (!ps)
		return -ENOMEM;
	ps->tm = *tm;
	ps->v = calloc(8, sizeof(*ps->v));
	ps->cap = 8;
	ps->dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
	ps->prefix = malloc(strlen(path) + 2);
	if (!ps->v || !ps->dir || !ps->prefix) {
		rec_procs_free(ps);
		return -ENOMEM;
	}
	sprintf(ps->prefix, "%s.", slash ? slash + 1 : path);
	ps->v[0] = (struct rproc){.path = strdup(path), .s = s, .c = c, .pid = pid,
				  .ppid = (uint32_t)getpid(), .borrowed = true};
	if (!ps->v[0].path) {
		rec_procs_free(ps);
		return -ENOMEM;
	}
	ps->n = 1;
	*out = ps;
	return 0;
}

void rec_procs_free(struct rec_procs *ps)
{
	if (!ps)
		return;
	for (uint32_t i = 0; i < ps->n; i++) {
		struct rproc *p = &ps->v[i];

		if (!p->borrowed) {
			cap_consumer_free(p->c);
			unlink(p->path);
			cap_spool_unmap(p->s);
			free(p->s);
		}
		free(p->path);
	}
	free(ps->v);
	free(ps->dir);
	free(ps->prefix);
	free(ps);
}

static bool known(const struct rec_procs *ps, const char *path)
{
	for (uint32_t i = 0; i < ps->n; i++)
		if (strcmp(ps->v[i].path, path) == 0)
			return true;
	return false;
}

/* Take spool @path in. @return 0, or -errno (not readable yet, or no memory) */
static int add(struct rec_procs *ps, char *path)
{
	struct rproc p = {.path = path};
	int rc;

	if (ps->n == ps->cap) {
		struct rproc *v = realloc(ps->v, 2 * ps->cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		ps->v = v;
		ps->cap *= 2;
	}
	p.s = calloc(1, sizeof(*p.s));
	if (!p.s)
		return -ENOMEM;
	rc = cap_spool_attach(p.s, path);
	if (rc == 0 && p.s->hdr->parent_pid == 0)
		rc = -EBADMSG;
	if (rc == 0)
		rc = cap_consumer_new(p.s, &ps->tm, &p.c);
	if (rc < 0) {
		cap_spool_unmap(p.s);
		free(p.s);
		return rc;
	}
	p.pid = atomic_load(&p.s->hdr->producer_pid);
	p.ppid = p.s->hdr->parent_pid;
	p.fork_ns = p.s->hdr->fork_ns;
	ps->v[ps->n++] = p;
	return 0;
}

static bool is_child_spool(const struct rec_procs *ps, const char *name)
{
	size_t n = strlen(ps->prefix);

	if (strncmp(name, ps->prefix, n) != 0 || !name[n])
		return false;
	return strspn(name + n, "0123456789") == strlen(name + n);
}

void rec_procs_scan(struct rec_procs *ps, bool final)
{
	DIR *d = opendir(ps->dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char *path;
		int rc;

		if (!is_child_spool(ps, e->d_name))
			continue;
		if (asprintf(&path, "%s/%s", ps->dir, e->d_name) < 0)
			continue;
		if (known(ps, path)) {
			free(path);
			continue;
		}
		rc = add(ps, path);
		if (rc == 0)
			continue;
		/* a spool still being created is read on a later pass; at the end it never will be */
		if (final) {
			fs_fail("warning: spool %s of a traced process is unreadable (%s): skipped",
				path, strerror(-rc));
			unlink(path);
			ps->n_bad++;
		}
		free(path);
	}
	closedir(d);
}

int rec_procs_poll(struct rec_procs *ps)
{
	int total = 0;

	for (uint32_t i = 0; i < ps->n; i++) {
		int n = cap_consumer_poll(ps->v[i].c);

		if (n < 0)
			return n;
		total += n;
	}
	return total;
}

void rec_procs_reaped(struct rec_procs *ps, pid_t pid, int status)
{
	for (uint32_t i = 0; i < ps->n; i++) {
		if (ps->v[i].pid == (uint32_t)pid && !ps->v[i].reaped) {
			ps->v[i].reaped = true;
			ps->v[i].status = status;
			return;
		}
	}
}

uint32_t rec_procs_count(const struct rec_procs *ps)
{
	return ps->n;
}

void rec_procs_stats(const struct rec_procs *ps, struct cap_consumer_stats *sum)
{
	memset(sum, 0, sizeof(*sum));
	for (uint32_t i = 0; i < ps->n; i++) {
		struct cap_consumer_stats st;

		cap_consumer_stats(ps->v[i].c, &st);
		sum->n_events += st.n_events;
		sum->n_records += st.n_records;
		sum->n_chunks += st.n_chunks;
		sum->n_partial_chunks += st.n_partial_chunks;
		sum->n_partial_events += st.n_partial_events;
		sum->dropped_events += st.dropped_events;
		sum->bad_records += st.bad_records;
		sum->n_threads += st.n_threads;
		sum->open_zones += st.open_zones;
		sum->open_phases += st.open_phases;
	}
}

static int cmp_fork(const void *a, const void *b)
{
	const struct rproc *x = a, *y = b;

	if (x->fork_ns != y->fork_ns)
		return x->fork_ns < y->fork_ns ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* pid, ppid and how a forked process ended, as its rank's metadata. */
static int child_meta(struct rproc *p)
{
	char buf[96];
	int rc;

	snprintf(buf, sizeof(buf), "%" PRIu32, p->pid);
	rc = cap_consumer_set_meta(p->c, "pid", buf);
	snprintf(buf, sizeof(buf), "%" PRIu32, p->ppid);
	if (rc == 0)
		rc = cap_consumer_set_meta(p->c, "ppid", buf);
	if (p->reaped)
		fs_describe_end(p->status, buf, sizeof(buf));
	else if (atomic_load(&p->s->hdr->exited))
		snprintf(buf, sizeof(buf), "exited");
	else
		snprintf(buf, sizeof(buf), "ended without its exit path (a signal or _exit)");
	if (rc == 0)
		rc = cap_consumer_set_meta(p->c, "end", buf);
	return rc;
}

int rec_procs_finish(struct rec_procs *ps)
{
	int rc = 0;

	rec_procs_scan(ps, true);
	for (uint32_t i = 1; i < ps->n && rc == 0; i++) {
		rc = cap_consumer_finish(ps->v[i].c);
		if (rc == 0)
			rc = child_meta(&ps->v[i]);
	}
	if (ps->n > 2)
		qsort(ps->v + 1, ps->n - 1, sizeof(*ps->v), cmp_fork);
	return rc;
}

int rec_procs_save(struct rec_procs *ps, const char *out)
{
	struct tfs_trace **t = calloc(ps->n, sizeof(*t));
	void **bufs = calloc(ps->n, sizeof(*bufs));
	struct tfs_diag d = {0};
	uint32_t opened = 0;
	void *merged = NULL;
	size_t len = 0;
	char ppid[32];
	int rc = t && bufs ? 0 : -ENOMEM;

	snprintf(ppid, sizeof(ppid), "%" PRIu32, ps->v[0].ppid);
	if (rc == 0)
		rc = cap_consumer_set_meta(ps->v[0].c, "ppid", ppid);
	for (; opened < ps->n && rc == 0; opened++) {
		rc = cap_consumer_save_mem(ps->v[opened].c, &bufs[opened], &len);
		if (rc == 0)
			rc = tfs_trace_open_mem(bufs[opened], len, &t[opened], &d);
		if (rc < 0) {
			free(bufs[opened]);
			bufs[opened] = NULL;
		}
	}
	if (rc == 0)
		rc = tfs_merge_traces(t, ps->n, &merged, &len, &d);
	if (rc == 0)
		rc = fs_save_atomic(out, merged, len);
	free(merged);
	for (uint32_t i = 0; t && bufs && i < opened; i++) {
		tfs_trace_close(t[i]);
		free(bufs[i]);
	}
	free(t);
	free(bufs);
	return rc;
}
