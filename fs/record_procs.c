/*
 * The processes of one `tracefs record`: the first process's spool and consumer, and those
 * of every process forked or spawned from it, which record into spools of their own named
 * `<first spool>.<pid>` (capture.c), or `<first spool>.<pid>.<k>` once a later process given
 * the same pid has moved it aside. New spools are found by listing their directory, so a
 * process that crashes right after creating its spool is still found; each is consumed
 * like the first. Once a process other than the first has ended (no thread of it can write
 * any more), its consumer takes in the rest, its trace is saved in memory (compressed) and
 * its spool is unmapped and removed: shared memory is held by the processes alive, not by
 * every process ever started. At the end the first process's trace is saved in memory too
 * and they are merged (tfs_merge_traces): rank 0 is the first process, then the others in
 * the order they began (fork order), each with its pid, ppid and how it ended in the
 * metadata. It does not start or wait for processes (cmd_record.c does).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tfs/merge.h"
#include "tfs/reader.h"
#include "cli_i.h"
#include "consumer_i.h"
#include "merge_i.h"
#include "record_procs_i.h"

/* One process. Once @retired, only @trace, @st and the identity fields are left. */
struct rproc {
	char *path;
	ino_t ino;	 /* the spool file's: a later process of the same pid has another */
	struct spool *s; /* its own allocation: the consumer keeps a pointer to it */
	struct cap_consumer *c;
	void *trace;	 /* its trace, saved in memory when it retired */
	size_t trace_len;
	struct cap_consumer_stats st; /* its consumer's last statistics, once retired */
	uint32_t pid, ppid;
	uint64_t fork_ns;
	int status;    /* wait status, when @reaped */
	bool reaped;   /* the recorder reaped it (the first process, orphans) */
	bool retired;  /* ended, trace saved, spool removed */
	bool borrowed; /* the first process's spool and consumer belong to the caller */
};

struct rec_procs {
	struct rproc *v;
	uint32_t n, cap;
	struct cap_timing tm;
	char *dir;	/* the spools' directory */
	char *prefix;	/* "<first spool's name>." */
	uint32_t n_bad; /* spools that never became readable */
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
	ps->v[0] = (struct rproc){.path = strdup(path),
				  .s = s,
				  .c = c,
				  .pid = pid,
				  .ppid = (uint32_t)getpid(),
				  .borrowed = true};
	if (!ps->v[0].path) {
		rec_procs_free(ps);
		return -ENOMEM;
	}
	ps->n = 1;
	*out = ps;
	return 0;
}

static void remove_spool(const struct rec_procs *ps, const struct rproc *p);

void rec_procs_free(struct rec_procs *ps)
{
	if (!ps)
		return;
	for (uint32_t i = 0; i < ps->n; i++) {
		struct rproc *p = &ps->v[i];

		if (!p->borrowed && !p->retired) {
			cap_consumer_free(p->c);
			remove_spool(ps, p);
			cap_spool_unmap(p->s);
			free(p->s);
		}
		free(p->trace);
		free(p->path);
	}
	free(ps->v);
	free(ps->dir);
	free(ps->prefix);
	free(ps);
}

/* How a listed spool file stands (known()). */
enum listed {
	LISTED_NEW,	/* not taken in yet */
	LISTED_LIVE,	/* a process's taken in and not retired */
	LISTED_RETIRED, /* a retired process's, left after it retired */
	LISTED_CHANGED, /* replaced by another file while being looked at: list it again */
};

/*
 * What spool @path, file @ino when listed, is; *@out the process when live or retired (the
 * first one is not listed). A live process's spool is mapped, so its file number is its
 * own; a retired one's file may be gone and its number reused (not on tmpfs, but on a
 * disk), so the header must say the same process.
 */
static enum listed known(const struct rec_procs *ps, const char *path, ino_t ino,
			 struct rproc **out)
{
	enum listed how = LISTED_NEW;
	struct spool_hdr h;
	struct stat st;
	int fd;

	*out = NULL;
	for (uint32_t i = 1; i < ps->n; i++) {
		if (ps->v[i].ino != ino)
			continue;
		*out = &ps->v[i];
		if (!ps->v[i].retired)
			return LISTED_LIVE;
	}
	if (!*out)
		return LISTED_NEW;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return LISTED_CHANGED; /* gone meanwhile */
	if (fstat(fd, &st) < 0 || st.st_ino != ino)
		how = LISTED_CHANGED;
	else if (pread(fd, &h, sizeof(h), 0) == sizeof(h) && h.magic == SPOOL_MAGIC &&
		 atomic_load(&h.producer_pid) == (*out)->pid && h.fork_ns == (*out)->fork_ns)
		how = LISTED_RETIRED;
	close(fd);
	if (how != LISTED_RETIRED)
		*out = NULL;
	return how;
}

/*
 * Take spool @path (file @ino when listed) in. @return 0, or -errno (-ESTALE: another file
 * now; not readable yet, or no memory)
 */
static int add(struct rec_procs *ps, char *path, ino_t ino)
{
	struct rproc p = {.path = path, .ino = ino};
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
	if (rc == 0 && p.s->ino != (uint64_t)ino)
		rc = -ESTALE; /* replaced since it was listed */
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

static int retire(struct rec_procs *ps, struct rproc *p);

/*
 * Whether @name is a child's spool: `<prefix><pid>`, or `<prefix><pid>.<k>` (@aside), where
 * a process given the pid of an ended one moved that one's spool (capture.c).
 */
static bool is_child_spool(const struct rec_procs *ps, const char *name, bool *aside)
{
	size_t n = strlen(ps->prefix), d;

	if (strncmp(name, ps->prefix, n) != 0)
		return false;
	name += n;
	d = strspn(name, "0123456789");
	*aside = d > 0 && name[d] == '.';
	if (*aside)
		name += d + 1;
	d = strspn(name, "0123456789");
	return d > 0 && !name[d];
}

/*
 * Look at directory entry @name (a child's spool): take it in if new, follow it if moved
 * aside, remove it if left by a retired process and nobody else can use the name (an aside
 * name, or any at the end). @return false when it must be looked at again: it was replaced
 * while being looked at
 */
static bool scan_one(struct rec_procs *ps, const char *name, bool aside, bool final)
{
	struct rproc *p;
	struct stat st;
	char *path;
	int rc;

	if (asprintf(&path, "%s/%s", ps->dir, name) < 0)
		return true;
	if (stat(path, &st) < 0) {
		free(path); /* gone meanwhile */
		return true;
	}
	switch (known(ps, path, st.st_ino, &p)) {
	case LISTED_CHANGED:
		free(path);
		return false;
	case LISTED_RETIRED:
		if (aside || final)
			unlink(path);
		free(path);
		return true;
	case LISTED_LIVE:
		if (strcmp(p->path, path) != 0) {
			free(p->path); /* moved aside: retire() removes it by its new name */
			p->path = path;
		} else {
			free(path);
		}
		return true;
	case LISTED_NEW:
		break;
	}
	rc = add(ps, path, st.st_ino);
	/* at the end every process has ended: one spool mapped at a time */
	if (rc == 0 && final)
		retire(ps, &ps->v[ps->n - 1]); /* on failure, rec_procs_finish tries again */
	if (rc == 0)
		return true;
	/* a spool still being created is read on a later pass; at the end it never will be */
	if (final && rc != -ESTALE) {
		fs_fail("warning: spool %s of a traced process is unreadable (%s): skipped",
			path, fs_strerror(-rc));
		unlink(path);
		ps->n_bad++;
	}
	free(path);
	return rc != -ESTALE;
}

void rec_procs_scan(struct rec_procs *ps, bool final)
{
	DIR *d = opendir(ps->dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		bool aside;

		if (!is_child_spool(ps, e->d_name, &aside))
			continue;
		/* replaced while looked at: by a process alive, so not at the end */
		for (int tries = 0; tries < 4 && !scan_one(ps, e->d_name, aside, final); tries++)
			;
	}
	closedir(d);
}

/*
 * No thread of process @p can write to its spool any more: the recorder reaped it, or it
 * was reaped and no process has its pid (a zombie is not gone: the recorder may reap it
 * yet and learn how it ended). A pid taken again only keeps @p until the end.
 */
static bool gone(const struct rproc *p)
{
	return p->reaped || (kill((pid_t)p->pid, 0) < 0 && errno == ESRCH);
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

/*
 * Remove the spool file of @p. Its first name, `<prefix><pid>`, is another process's once
 * that one has the pid and moved ours aside (a scan then finds ours by its new name): it is
 * moved aside here too before it goes, so that a spool made under the name meanwhile is
 * not removed, and put back. An aside name is only ever made by a move that replaces
 * nothing (cap_spool_move_aside), and only removed here. Where it cannot be made (too long,
 * no rename or link that refuses to replace), the file is removed by its first name if
 * still there, as before.
 */
static void remove_spool(const struct rec_procs *ps, const struct rproc *p)
{
	const char *name = strrchr(p->path, '/');
	char aside[PATH_MAX];
	struct stat st;
	bool is_aside;

	name = name ? name + 1 : p->path;
	if (!is_child_spool(ps, name, &is_aside) || is_aside) {
		unlink(p->path);
		return;
	}
	if (stat(p->path, &st) < 0 || st.st_ino != p->ino)
		return; /* moved aside: a scan removes it */
	if (cap_spool_move_aside(p->path, aside, sizeof(aside)) < 0) {
		if (stat(p->path, &st) == 0 && st.st_ino == p->ino)
			unlink(p->path);
		return;
	}
	if (stat(aside, &st) == 0 && st.st_ino == p->ino)
		unlink(aside);
	else /* a new spool of the pid, made meanwhile: its name back, or a scan finds it */
		(void)renameat2(AT_FDCWD, aside, AT_FDCWD, p->path, RENAME_NOREPLACE);
}

/*
 * Process @p has ended: take in the rest, set its metadata, save its trace in memory,
 * then free its consumer, unmap its spool and remove it. @return 0 or -errno
 */
static int retire(struct rec_procs *ps, struct rproc *p)
{
	int rc = cap_consumer_finish(p->c);

	if (rc == 0)
		rc = child_meta(p);
	if (rc == 0)
		rc = cap_consumer_save_mem(p->c, &p->trace, &p->trace_len);
	if (rc < 0)
		return rc;
	cap_consumer_stats(p->c, &p->st);
	cap_consumer_free(p->c);
	p->c = NULL;
	remove_spool(ps, p);
	cap_spool_unmap(p->s);
	free(p->s);
	p->s = NULL;
	p->retired = true;
	return 0;
}

int rec_procs_poll(struct rec_procs *ps)
{
	int total = 0;

	for (uint32_t i = 0; i < ps->n; i++) {
		struct rproc *p = &ps->v[i];
		bool ended = i > 0 && !p->retired && gone(p);
		int n = p->retired ? 0 : cap_consumer_poll(p->c);

		if (n >= 0 && ended) {
			int rc = retire(ps, p);

			if (rc < 0)
				return rc;
		}
		if (n < 0)
			return n;
		total += n;
	}
	return total;
}

static struct rproc *find_live(struct rec_procs *ps, pid_t pid)
{
	struct rproc *best = NULL;

	/* the one begun last: an earlier process of this pid has ended */
	for (uint32_t i = 0; i < ps->n; i++) {
		struct rproc *p = &ps->v[i];

		if (p->pid == (uint32_t)pid && !p->reaped && !p->retired &&
		    (!best || p->fork_ns >= best->fork_ns))
			best = p;
	}
	return best;
}

void rec_procs_reaped(struct rec_procs *ps, pid_t pid, int status)
{
	struct rproc *p = find_live(ps, pid);

	if (!p) { /* an orphan that ended before its spool was seen */
		rec_procs_scan(ps, false);
		p = find_live(ps, pid);
	}
	if (p) {
		p->reaped = true;
		p->status = status;
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
		struct cap_consumer_stats st = ps->v[i].st;

		if (!ps->v[i].retired)
			cap_consumer_stats(ps->v[i].c, &st);
		sum->n_events += st.n_events;
		sum->n_records += st.n_records;
		sum->n_chunks += st.n_chunks;
		sum->n_partial_chunks += st.n_partial_chunks;
		sum->n_partial_events += st.n_partial_events;
		sum->dropped_events += st.dropped_events;
		sum->wait_ns += st.wait_ns;
		sum->n_stalls += st.n_stalls;
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

int rec_procs_finish(struct rec_procs *ps)
{
	uint32_t lost;
	int rc = 0;

	/* the spools taken in first: the last scan then has the most memory to map the rest */
	for (uint32_t i = 1; i < ps->n && rc == 0; i++)
		if (!ps->v[i].retired)
			rc = retire(ps, &ps->v[i]);
	if (rc == 0)
		rec_procs_scan(ps, true);
	for (uint32_t i = 1; i < ps->n && rc == 0; i++)
		if (!ps->v[i].retired)
			rc = retire(ps, &ps->v[i]);
	if (ps->n > 2)
		qsort(ps->v + 1, ps->n - 1, sizeof(*ps->v), cmp_fork);
	lost = atomic_load(&ps->v[0].s->hdr->n_unrecorded);
	if (lost)
		fs_fail("warning: %" PRIu32 " times a process the program started could not make "
			"its spool (their messages above say why): their events are not in the trace",
			lost);
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
	if (rc == 0)
		rc = cap_consumer_save_mem(ps->v[0].c, &bufs[0], &len);
	/* the others' traces are theirs (saved when they retired) */
	for (; opened < ps->n && rc == 0; opened++) {
		if (opened > 0) {
			bufs[opened] = ps->v[opened].trace;
			len = ps->v[opened].trace_len;
		}
		rc = tfs_trace_open_mem(bufs[opened], len, &t[opened], &d);
	}
	if (rc == 0)
		rc = tfs_merge_traces(t, ps->n, &merged, &len, &d);
	if (rc == 0)
		rc = fs_save_atomic(out, merged, len);
	free(merged);
	for (uint32_t i = 0; t && i < opened; i++)
		tfs_trace_close(t[i]);
	if (bufs)
		free(bufs[0]);
	free(t);
	free(bufs);
	return rc;
}
