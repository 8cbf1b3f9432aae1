/*
 * The processes of one `tracefs record`: the first process's spool and consumer, and those
 * of every process forked or spawned from it, which record into spools of their own named
 * `spool.<pid>` (spool_i.h names; made by capture.c), or `spool.<pid>.<k>` once a later
 * process given the same pid has moved it aside. New spools are found by listing the
 * recording's private directory (recdir.c), so a process that crashes right after creating
 * its spool is still found; only regular files of the recorder's own user are taken in
 * (cap_spool_attach), and a file that is not is never removed. Each is consumed
 * like the first. Once a process other than the first has ended (no thread of it can write
 * any more), its consumer takes in the rest, its trace is saved in memory (compressed, as a
 * merge input: what the merge rewrites is compressed fast) and its spool is unmapped and
 * removed: shared memory is held by the processes alive, not by every process ever
 * started. At the end the first process's trace is saved in memory too and they are merged
 * (tfs_merge_traces_opts, grammars rewritten): rank 0 is the first process, then the others in
 * the fork tree (rank_order()), each with its pid, ppid and how it ended in the
 * metadata. When nobody reaps the processes any more (the recorder that waited for them
 * was killed, rec_procs_orphaned), a process has ended once /proc says so. It does not
 * start or wait for processes (fs/cmd_record.c does).
 */
#include <assert.h>
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
#include <time.h>
#include <unistd.h>

#include "tfs/merge.h"
#include "tfs/reader.h"
#include "tfs/recording.h"
#include "tfs/writer.h"
#include "consumer_i.h"
#include "recprocs_i.h"

/* One process. Once @retired, only @trace, @st and the identity fields are left. */
struct rproc {
	char *path;
	ino_t ino;	 /* the spool file's: a later process of the same pid has another */
	struct spool *s; /* its own allocation: the consumer keeps a pointer to it */
	struct cap_consumer *c;
	void *trace;	 /* its trace, saved in memory when it retired */
	size_t trace_len;
	struct tfs_recording_stats st; /* its consumer's last statistics, once retired */
	uint32_t pid, ppid;
	uint32_t start_index; /* among its parent's children, + 1; 0: unknown (spool_hdr) */
	uint64_t fork_ns;
	int status;	     /* wait status, when @reaped or @end_known */
	bool reaped;	     /* the recorder reaped it (the first process, orphans) */
	bool end_known;	     /* the process that reaped it said how it ended (@status) */
	bool retired;	     /* ended, trace saved, spool removed */
	bool borrowed;	     /* the first process's spool and consumer belong to the caller */
	uint32_t reaps_next; /* the next entry of its spool's ring of reaped children to read */
	uint32_t reaps_lost; /* entries of that ring overwritten or never completed */
	uint32_t polls;	     /* rec_procs_poll() passes since it was taken in */
};

/* A child some process reaped (spool_i.h struct spool_reap), as read from its ring. */
struct reap_note {
	uint32_t pid;
	int32_t status;
	uint64_t t_ns;
	bool used; /* given to a process as its end */
};

/* How far the last scan read the ring of a spool it found (before taking it in). */
struct peeked {
	ino_t ino;
	uint32_t next, lost;
};

/*
 * Polls of a process between two looks at whether it has ended (gone(), a system call):
 * an ended process's trace is saved a few polls later, many running ones cost less.
 */
#define GONE_EVERY 8
/*
 * A listing of the spools' directory is skipped while its modification time is the one of
 * the last listing, unless that time is less than DIR_SETTLE_NS old (a spool made in the
 * same clock tick as that listing leaves it unchanged) or the last listing is more than
 * DIR_RESCAN_NS old.
 */
#define DIR_SETTLE_NS 50000000
#define DIR_RESCAN_NS 1000000000
/*
 * The most a child process's save recompresses at (tfs_writer_cap_recompress()): on make
 * -j2's cc1s (7.6 MB of raw value blocks), level 9 leaves the blocks 80 KB (0.8% of the
 * trace) larger than level 16 for a sixth of its instructions (callgrind), about 40% of
 * level 16's gain over no recompression; tests/bench/run_real make shows the CPU.
 */
#define CHILD_SAVE_LEVEL 9

struct rec_procs {
	struct rproc *v;
	uint32_t n, cap;
	const struct cap_timing *tm;	    /* the consumers' */
	const struct tfs_recording_opts *o; /* how to speak and save */
	char *dir;	/* the recording's directory: every spool is there */
	uint32_t n_bad; /* spools that never became readable */
	bool orphaned;	/* nobody reaps the processes any more: /proc says when they end */
	/* reaped children not matched to a process yet (their spool not seen yet) */
	struct reap_note *notes;
	uint32_t n_notes, notes_cap;
	struct peeked *peeked;
	uint32_t n_peeked;
	struct timespec dir_mtime; /* the directory's, before the last listing */
	uint64_t recompressed;	   /* events of the traces saved recompressed (save_mem()) */
	uint64_t listed_ns;	   /* CLOCK_MONOTONIC of the last listing, 0: none yet */
};

int rec_procs_new(struct spool *s, struct cap_consumer *c, const char *path, uint32_t pid,
		  const struct cap_timing *tm, const struct tfs_recording_opts *o,
		  struct rec_procs **out)
{
	struct rec_procs *ps = calloc(1, sizeof(*ps));
	const char *slash = strrchr(path, '/');

	*out = NULL;
	if (!ps)
		return -ENOMEM;
	ps->tm = tm;
	ps->o = o;
	ps->v = calloc(8, sizeof(*ps->v));
	ps->cap = 8;
	ps->dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
	if (!ps->v || !ps->dir) {
		rec_procs_free(ps);
		return -ENOMEM;
	}
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

/*
 * The first process is the producer of the first spool once one has taken it, with the
 * parent it gave (its getppid(): the recorder, or an untraced launcher the recorder ran).
 * A wait status the recorder got for the program before then is not that process's end.
 */
static void first_identity(struct rec_procs *ps)
{
	struct rproc *p = &ps->v[0];
	const uint32_t pid = atomic_load(&p->s->hdr->producer_pid);

	if (!pid)
		return;
	if (pid != p->pid) {
		p->pid = pid;
		p->reaped = false;
		p->status = 0;
	}
	if (p->s->hdr->parent_pid) /* set right after producer_pid */
		p->ppid = p->s->hdr->parent_pid;
}

uint32_t rec_procs_first_pid(struct rec_procs *ps)
{
	first_identity(ps);
	return ps->v[0].pid;
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
	free(ps->notes);
	free(ps->peeked);
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
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
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

static void notes_for(struct rec_procs *ps, const struct rproc *p);

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
		rc = cap_consumer_new(p.s, ps->tm, &p.c);
	if (rc < 0) {
		cap_spool_unmap(p.s);
		free(p.s);
		return rc;
	}
	p.pid = atomic_load(&p.s->hdr->producer_pid);
	p.ppid = p.s->hdr->parent_pid;
	p.fork_ns = p.s->hdr->fork_ns;
	p.start_index = p.s->hdr->start_index;
	for (uint32_t i = 0; i < ps->n_peeked; i++) {
		if (ps->peeked[i].ino == ino) { /* its ring was read by the last scan's peek */
			p.reaps_next = ps->peeked[i].next;
			p.reaps_lost = ps->peeked[i].lost;
		}
	}
	ps->v[ps->n++] = p;
	notes_for(ps, &ps->v[ps->n - 1]);
	return 0;
}

static int retire(struct rec_procs *ps, struct rproc *p);

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
	/* gone meanwhile; or not a file of ours (none can be made here): left alone */
	if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		free(path);
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
	ps->listed_ns = 0; /* that pass lists the directory, changed or not */
	if (final && rc != -ESTALE) {
		ps->o->say("warning: spool %s of a traced process is unreadable (%s): skipped",
			   path, ps->o->strerr(-rc));
		if (rc != -EPERM) /* ours: made by a process of this recording */
			unlink(path);
		ps->n_bad++;
	}
	free(path);
	return rc != -ESTALE;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/*
 * Whether the spools' directory may hold a spool the last listing did not see: it changed
 * since (its modification time), or may have in the same clock tick. Processes poll often
 * and most of the time nothing is new: a stat instead of a listing and a stat per spool.
 */
static bool dir_changed(struct rec_procs *ps)
{
	const uint64_t now = clock_ns(CLOCK_MONOTONIC);
	struct stat st;
	uint64_t age;

	if (stat(ps->dir, &st) < 0)
		return true;
	age = clock_ns(CLOCK_REALTIME) - ((uint64_t)st.st_mtim.tv_sec * 1000000000u +
					  (uint64_t)st.st_mtim.tv_nsec);
	if (ps->listed_ns && now - ps->listed_ns < DIR_RESCAN_NS &&
	    st.st_mtim.tv_sec == ps->dir_mtime.tv_sec &&
	    st.st_mtim.tv_nsec == ps->dir_mtime.tv_nsec && age >= DIR_SETTLE_NS &&
	    age < ((uint64_t)1 << 63))
		return false;
	ps->dir_mtime = st.st_mtim;
	ps->listed_ns = now;
	return true;
}

void rec_procs_scan(struct rec_procs *ps, bool final)
{
	struct dirent *e;
	DIR *d;

	if (!final && !dir_changed(ps))
		return;
	d = opendir(ps->dir);
	if (!d)
		return;
	while ((e = readdir(d))) {
		bool aside;

		if (!cap_spool_is_child_name(e->d_name, &aside))
			continue;
		/* replaced while looked at: by a process alive, so not at the end */
		for (int tries = 0; tries < 4 && !scan_one(ps, e->d_name, aside, final); tries++)
			;
	}
	closedir(d);
}

/*
 * Whether process @pid, begun at @start (clock ticks after boot, 0: unknown), is alive: it
 * exists, is no zombie, and is not a later process given its pid.
 */
static bool proc_alive(uint32_t pid, uint64_t start)
{
	struct cap_proc_stat st;
	int rc = cap_proc_stat(pid, &st);

	if (rc == -ENOENT || rc == -ESRCH)
		return false;
	if (rc < 0)
		return true; /* unreadable: it may be alive */
	if (st.state == 'Z' || st.state == 'X')
		return false;
	return !start || !st.start || st.start == start;
}

/*
 * No thread of process @p can write to its spool any more: the recorder reaped it, or it
 * was reaped and no process has its pid (a zombie is not gone: the recorder may reap it
 * yet and learn how it ended). A pid taken again only keeps @p until the end.
 */
static bool gone(const struct rec_procs *ps, const struct rproc *p)
{
	if (p->reaped)
		return true;
	if (ps->orphaned) /* nobody will reap it: a zombie has ended too */
		return !proc_alive(p->pid, atomic_load(&p->s->hdr->producer_start));
	return kill((pid_t)p->pid, 0) < 0 && errno == ESRCH;
}

/* ---- how each process ended ---- */

/*
 * The process reaped at @t_ns as pid @pid: of the processes of that pid begun before then,
 * the one begun last, since a pid is given again only once its process has been reaped.
 * (A process given the pid between the reap and the reaper's clock reading, microseconds,
 * would be taken for it.) NULL when none is known yet.
 */
static struct rproc *reaped_one(struct rec_procs *ps, uint32_t pid, uint64_t t_ns)
{
	struct rproc *best = NULL;

	for (uint32_t i = 1; i < ps->n; i++) {
		struct rproc *p = &ps->v[i];

		if (p->pid == pid && p->fork_ns < t_ns && (!best || p->fork_ns > best->fork_ns))
			best = p;
	}
	return best;
}

/* Give note @r to the process it names. @return whether that process is known */
static bool use_note(struct rec_procs *ps, const struct reap_note *r)
{
	struct rproc *p = reaped_one(ps, r->pid, r->t_ns);

	if (!p)
		return false;
	if (!p->reaped && !p->end_known) {
		p->end_known = true;
		p->status = r->status;
	}
	return true;
}

/* A child reaped: given to its process, or kept until its spool is seen. @return 0, -ENOMEM */
static int add_note(struct rec_procs *ps, const struct reap_note *r)
{
	if (use_note(ps, r))
		return 0;
	if (ps->n_notes == ps->notes_cap) {
		uint32_t cap = ps->notes_cap ? 2 * ps->notes_cap : 16;
		struct reap_note *v = realloc(ps->notes, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		ps->notes = v;
		ps->notes_cap = cap;
	}
	ps->notes[ps->n_notes++] = *r;
	return 0;
}

/* Process @p is new: the notes kept for its pid may be its. */
static void notes_for(struct rec_procs *ps, const struct rproc *p)
{
	for (uint32_t i = 0; i < ps->n_notes;) {
		if (ps->notes[i].pid == p->pid && use_note(ps, &ps->notes[i]))
			ps->notes[i] = ps->notes[--ps->n_notes];
		else
			i++;
	}
}

/*
 * Read the ring of reaped children of spool header @h (spool_i.h struct spool_reap) from
 * entry *@next on. An entry not complete yet stops the reading, unless its writer has
 * ended (@ended): then it never will be, and it is lost, as are entries overwritten before
 * they were read. @return 0 or -ENOMEM
 */
static int read_ring(struct rec_procs *ps, const struct spool_hdr *h, uint32_t *next,
		     uint32_t *lost, bool ended)
{
	const uint32_t n = atomic_load_explicit(&h->n_reaps, memory_order_acquire);

	if (n - *next > SPOOL_N_REAPS) {
		*lost += n - *next - SPOOL_N_REAPS;
		*next = n - SPOOL_N_REAPS;
	}
	for (; *next != n; ++*next) {
		const struct spool_reap *e = &h->reaps[*next % SPOOL_N_REAPS];
		uint32_t seq = atomic_load_explicit(&e->seq, memory_order_acquire);
		struct reap_note r = {e->pid, e->status, e->t_ns, false};
		int rc;

		if (seq != *next + 1 && !ended && (int32_t)(seq - (*next + 1)) < 0)
			break; /* being written */
		atomic_thread_fence(memory_order_acquire);
		if (seq != *next + 1 ||
		    atomic_load_explicit(&e->seq, memory_order_relaxed) != *next + 1) {
			++*lost; /* overwritten while read, or never completed */
			continue;
		}
		rc = add_note(ps, &r);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Read the new entries of @p's ring. @return 0 or -ENOMEM */
static int drain(struct rec_procs *ps, struct rproc *p, bool ended)
{
	if (p->retired || !p->s)
		return 0;
	return read_ring(ps, p->s->hdr, &p->reaps_next, &p->reaps_lost, ended);
}

/* The process that forked or spawned @p: the last one of its ppid begun before it. */
static struct rproc *parent_of(struct rec_procs *ps, const struct rproc *p)
{
	struct rproc *best = NULL;

	for (uint32_t i = 0; i < ps->n; i++) {
		struct rproc *q = &ps->v[i];

		if (q != p && q->pid == p->ppid && q->fork_ns <= p->fork_ns &&
		    (!best || q->fork_ns >= best->fork_ns))
			best = q;
	}
	return best;
}

/*
 * Ended process @p (not the recorder's child) may yet learn how: its parent is inside a
 * wait call, and may be about to note it. A parent that sees no wait under way has noted
 * every child it reaped (capture.c cap_wait_end), so its ring is read after the count.
 */
static bool end_pending(struct rec_procs *ps, struct rproc *p)
{
	struct rproc *par;
	uint32_t waiting;

	if (p->reaped || p->end_known)
		return false;
	par = parent_of(ps, p);
	if (!par || par->retired || !par->s)
		return false;
	waiting = atomic_load(&par->s->hdr->n_in_wait);
	if (drain(ps, par, false) < 0)
		return false;
	return !p->end_known && waiting > 0 && !gone(ps, par);
}

/* "unknown: <why>" for process @p, nobody having said how it ended. */
static void unknown_end(struct rec_procs *ps, struct rproc *p, char *buf, size_t cap)
{
	const struct rproc *par = parent_of(ps, p);
	const uint32_t sig = atomic_load(&p->s->hdr->fatal_signal);
	char last[64] = "";

	if (sig)
		snprintf(last, sizeof(last), "; it received signal %" PRIu32 " (SIG%s)", sig,
			 sigabbrev_np((int)sig) ? sigabbrev_np((int)sig) : "?");
	else if (atomic_load(&p->s->hdr->exited))
		snprintf(last, sizeof(last), "; it ran its exit path");
	if (proc_alive(p->pid, atomic_load(&p->s->hdr->producer_start)))
		/* `tracefs record` told to stop waiting for the processes the program left */
		snprintf(buf, cap, "unknown: still running when the recording stopped%s", last);
	else if (ps->orphaned) /* nobody waited for the processes after that */
		snprintf(buf, cap, "unknown: the recorder waiting for it was killed%s", last);
	else if (!par)
		snprintf(buf, cap, "unknown: its parent (pid %" PRIu32 ") was not recorded%s",
			 p->ppid, last);
	else if (par->reaps_lost)
		snprintf(buf, cap, "unknown: its parent reaped children faster than the recorder "
			 "read their ends%s", last);
	else
		snprintf(buf, cap, "unknown: its parent reaped it outside the recorded wait calls "
			 "(in system() or pclose(), by a raw system call, or with SIGCHLD "
			 "ignored)%s", last);
}

#define NOT_TRACED " (not traced)"

/* `image`, the program of the last image of the process of spool @h, and `images`, all of
 * them ("sh -> cc1", and " (not traced)" after the last when it never loaded the capture:
 * its exec named it); @program: `program` too. @return 0, -ENOMEM */
static int image_meta(struct cap_consumer *c, struct spool_hdr *h, bool program)
{
	char images[SPOOL_IMAGES_BYTES + sizeof(NOT_TRACED)];
	const char *last, *arrow;
	size_t len;
	int rc;

	memcpy(images, h->images, SPOOL_IMAGES_BYTES);
	images[SPOOL_IMAGES_BYTES - 1] = '\0';
	if (!images[0])
		return 0;
	len = strlen(images);
	if (atomic_load(&h->exec_pending))
		memcpy(images + len, NOT_TRACED, sizeof(NOT_TRACED));
	rc = cap_consumer_set_meta(c, "images", images);
	images[len] = '\0';
	for (last = images; (arrow = strstr(last, " -> ")); last = arrow + 4)
		;
	if (rc == 0)
		rc = cap_consumer_set_meta(c, "image", last);
	if (rc == 0 && program)
		rc = cap_consumer_set_meta(c, "program", last);
	return rc;
}

/* pid, ppid, its program and how a forked process ended, as its rank's metadata. */
static int child_meta(struct rec_procs *ps, struct rproc *p)
{
	char buf[256];
	int rc;

	snprintf(buf, sizeof(buf), "%" PRIu32, p->pid);
	rc = cap_consumer_set_meta(p->c, "pid", buf);
	snprintf(buf, sizeof(buf), "%" PRIu32, p->ppid);
	if (rc == 0)
		rc = cap_consumer_set_meta(p->c, "ppid", buf);
	if (p->reaped || p->end_known)
		tfs_recording_describe_end(p->status, buf, sizeof(buf));
	else
		unknown_end(ps, p, buf, sizeof(buf));
	if (rc == 0)
		rc = cap_consumer_set_meta(p->c, "end", buf);
	if (rc == 0)
		rc = image_meta(p->c, p->s->hdr, true);
	return rc;
}

int rec_procs_first_meta(struct rec_procs *ps)
{
	struct rproc *p = &ps->v[0];
	char buf[256];
	int rc;

	if (p->reaped)
		tfs_recording_describe_end(p->status, buf, sizeof(buf));
	else
		unknown_end(ps, p, buf, sizeof(buf));
	rc = cap_consumer_set_meta(p->c, "end", buf);
	/* here, not where ranks are merged: a recording of one process has a ppid too */
	snprintf(buf, sizeof(buf), "%" PRIu32, p->ppid);
	if (rc == 0)
		rc = cap_consumer_set_meta(p->c, "ppid", buf);
	return rc < 0 ? rc : image_meta(p->c, p->s->hdr, false);
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
	if (!cap_spool_is_child_name(name, &is_aside) || is_aside) {
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
 * Save @c's trace in memory, as an input to the merge of rec_procs_save(). The save
 * recompresses a small trace (the writer's values_save_level), at about 1 us per event: so
 * that a recording of many processes (make, a compiler driver) does not pay that for each,
 * the recording's traces share one bound, TFS_VALUES_SAVE_MAX_EVENTS, the first to end
 * taking it, and a @child (every process but the first) recompresses at CHILD_SAVE_LEVEL
 * at most. @return 0 or -errno
 */
static int save_mem(struct rec_procs *ps, struct cap_consumer *c, bool child, void **out,
		    size_t *len)
{
	struct tfs_recording_stats st;

	cap_consumer_merge_input(c);
	if (child)
		cap_consumer_cap_recompress(c, CHILD_SAVE_LEVEL);
	cap_consumer_stats(c, &st);
	if (ps->recompressed + st.n_events > TFS_VALUES_SAVE_MAX_EVENTS)
		cap_consumer_skip_recompress(c);
	else
		ps->recompressed += st.n_events;
	return cap_consumer_save_mem(c, out, len);
}

/*
 * Process @p has ended: take in the rest, set its metadata, save its trace in memory,
 * then free its consumer, unmap its spool and remove it. @return 0 or -errno
 */
static int retire(struct rec_procs *ps, struct rproc *p)
{
	int rc = drain(ps, p, true); /* the children it reaped, before its spool goes */

	if (rc == 0)
		rc = cap_consumer_finish(p->c);
	if (rc == 0)
		rc = child_meta(ps, p);
	if (rc == 0)
		rc = save_mem(ps, p->c, true, &p->trace, &p->trace_len);
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

	first_identity(ps);
	for (uint32_t i = 0; i < ps->n; i++) {
		struct rproc *p = &ps->v[i];
		bool ended = i > 0 && !p->retired &&
			     (p->reaped || p->end_known || p->polls++ % GONE_EVERY == 0) &&
			     gone(ps, p);
		int n = p->retired ? 0 : cap_consumer_poll(p->c);

		if (n >= 0 && drain(ps, p, false) < 0)
			n = -ENOMEM;
		if (n >= 0 && ended && !end_pending(ps, p)) {
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
	struct rproc *p;

	first_identity(ps);
	p = find_live(ps, pid);
	if (!p) { /* an orphan that ended before its spool was seen */
		rec_procs_scan(ps, false);
		p = find_live(ps, pid);
	}
	if (p) {
		p->reaped = true;
		p->status = status;
	}
}

void rec_procs_orphaned(struct rec_procs *ps)
{
	ps->orphaned = true;
}

bool rec_procs_all_gone(struct rec_procs *ps)
{
	first_identity(ps);
	for (uint32_t i = 0; i < ps->n; i++)
		if (!ps->v[i].retired && !gone(ps, &ps->v[i]))
			return false;
	return true;
}

uint32_t rec_procs_count(const struct rec_procs *ps)
{
	return ps->n;
}

void rec_procs_stats(const struct rec_procs *ps, struct tfs_recording_stats *sum)
{
	memset(sum, 0, sizeof(*sum));
	for (uint32_t i = 0; i < ps->n; i++) {
		struct tfs_recording_stats st = ps->v[i].st;

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

/* A process's place among its siblings (rank_order()). */
struct sib {
	uint32_t par; /* its parent's index in rec_procs.v; n: none recorded */
	uint32_t i;   /* its own */
	uint32_t start_index;
	uint64_t fork_ns;
	uint32_t pid;
};

/* By parent, then the order the parent started them; those of unknown order after, in
 * the order they began. */
static int cmp_sib(const void *a, const void *b)
{
	const struct sib *x = a, *y = b;
	const uint32_t xs = x->start_index ? x->start_index : UINT32_MAX;
	const uint32_t ys = y->start_index ? y->start_index : UINT32_MAX;

	if (x->par != y->par)
		return x->par < y->par ? -1 : 1;
	if (xs != ys)
		return xs < ys ? -1 : 1;
	if (x->fork_ns != y->fork_ns)
		return x->fork_ns < y->fork_ns ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/*
 * Order the processes along the fork tree: the first, then each process's children in the
 * order it started them, each followed by its own (depth first), then the processes whose
 * parent is no rank (a launcher's children) with theirs. Not by the time they began: the
 * children of a parent that starts several at once begin in an order that changes from run
 * to run, and their ranks with it (`tracefs compare` would see two runs of one program
 * differ). A parent comes before its children. @return 0 or -ENOMEM
 */
static int rank_order(struct rec_procs *ps)
{
	const uint32_t n = ps->n;
	struct sib *sibs = calloc(n, sizeof(*sibs));
	uint32_t *first = calloc(n + 1, sizeof(*first)); /* first[p]: sibs of parent p from */
	uint32_t *stack = calloc(n + 1, sizeof(*stack));
	uint32_t *next = calloc(n + 1, sizeof(*next));	 /* next sib of each stacked parent */
	bool *done = calloc(n, sizeof(*done));
	struct rproc *v = malloc(n * sizeof(*v));
	uint32_t n_out = 0, depth = 0;
	int rc = -ENOMEM;

	if (!sibs || !first || !stack || !next || !done || !v)
		goto out;
	for (uint32_t i = 1; i < n; i++) {
		const struct rproc *par = parent_of(ps, &ps->v[i]);

		sibs[i - 1] = (struct sib){par ? (uint32_t)(par - ps->v) : n, i,
					   ps->v[i].start_index, ps->v[i].fork_ns, ps->v[i].pid};
	}
	qsort(sibs, n - 1, sizeof(*sibs), cmp_sib);
	for (uint32_t p = 0, k = 0; p <= n; p++) {
		while (k < n - 1 && sibs[k].par < p)
			k++;
		first[p] = k;
	}
	/* the first process's tree, then the tree of each process without a recorded parent */
	for (uint32_t top = 0; top < 2; top++) {
		stack[0] = top ? n : 0;
		next[0] = first[stack[0]];
		depth = 1;
		if (!top) {
			v[n_out++] = ps->v[0];
			done[0] = true;
		}
		while (depth) {
			const uint32_t k = next[depth - 1];
			const struct sib *c = &sibs[k];

			if (k >= n - 1 || c->par != stack[depth - 1]) {
				depth--;
				continue;
			}
			next[depth - 1]++;
			if (done[c->i])
				continue; /* a loop of parents (pids reused): taken once */
			done[c->i] = true;
			v[n_out++] = ps->v[c->i];
			stack[depth] = c->i;
			next[depth++] = first[c->i];
		}
	}
	/* none left but in a loop of parents no tree reaches: in the order they began */
	for (uint32_t k = 0; k < n - 1; k++)
		if (!done[sibs[k].i])
			v[n_out++] = ps->v[sibs[k].i];
	assert(n_out == n);
	memcpy(ps->v, v, n * sizeof(*v));
	rc = 0;
out:
	free(sibs);
	free(first);
	free(stack);
	free(next);
	free(done);
	free(v);
	return rc;
}

/*
 * At the end: read the rings of the spools no scan has taken in yet from their headers
 * alone, so that a process the last scan retires at once learns how it ended even when the
 * process that reaped it comes later in the directory.
 */
static int peek_rings(struct rec_procs *ps)
{
	DIR *d = opendir(ps->dir);
	struct dirent *e;
	int rc = 0;

	if (!d)
		return 0;
	while (rc == 0 && (e = readdir(d))) {
		struct peeked pk = {0};
		struct spool_hdr h;
		struct rproc *p;
		struct stat st;
		char *path;
		bool aside;
		int fd;

		if (!cap_spool_is_child_name(e->d_name, &aside) ||
		    asprintf(&path, "%s/%s", ps->dir, e->d_name) < 0)
			continue;
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		    st.st_uid == geteuid() && known(ps, path, st.st_ino, &p) == LISTED_NEW &&
		    pread(fd, &h, sizeof(h), 0) == sizeof(h) && h.magic == SPOOL_MAGIC &&
		    h.version == SPOOL_VERSION) {
			pk.ino = st.st_ino;
			rc = read_ring(ps, &h, &pk.next, &pk.lost, true);
			if (rc == 0) {
				struct peeked *v = realloc(ps->peeked,
							   (ps->n_peeked + 1) * sizeof(*v));

				if (v) {
					ps->peeked = v;
					ps->peeked[ps->n_peeked++] = pk;
				} else {
					rc = -ENOMEM;
				}
			}
		}
		if (fd >= 0)
			close(fd);
		free(path);
	}
	closedir(d);
	return rc;
}

int rec_procs_finish(struct rec_procs *ps)
{
	uint32_t lost;
	int rc = 0;

	first_identity(ps);
	/* every process has ended: all they noted of the children they reaped, first */
	for (uint32_t i = 0; i < ps->n && rc == 0; i++)
		rc = drain(ps, &ps->v[i], true);
	if (rc == 0)
		rc = peek_rings(ps);
	/* the spools taken in first: the last scan then has the most memory to map the rest */
	for (uint32_t i = 1; i < ps->n && rc == 0; i++)
		if (!ps->v[i].retired)
			rc = retire(ps, &ps->v[i]);
	if (rc == 0)
		rec_procs_scan(ps, true);
	for (uint32_t i = 1; i < ps->n && rc == 0; i++)
		if (!ps->v[i].retired)
			rc = retire(ps, &ps->v[i]);
	if (rc == 0 && ps->n > 2)
		rc = rank_order(ps);
	lost = atomic_load(&ps->v[0].s->hdr->n_unrecorded);
	if (lost)
		ps->o->say("warning: %" PRIu32 " times a process the program started could not make "
			"its spool (their messages above say why): their events are not in the trace",
			lost);
	return rc;
}

int rec_procs_save(struct rec_procs *ps, const char *out)
{
	/* the traces were saved as merge inputs (save_mem()): their grammars compressed fast */
	const struct tfs_merge_opts merge_opts = {.rewrite_grammars = 1};
	struct tfs_trace **t = calloc(ps->n, sizeof(*t));
	void **bufs = calloc(ps->n, sizeof(*bufs));
	struct tfs_diag d = {0};
	uint32_t opened = 0;
	void *merged = NULL;
	size_t len = 0;
	int rc = t && bufs ? 0 : -ENOMEM;

	if (rc == 0)
		rc = save_mem(ps, ps->v[0].c, false, &bufs[0], &len);
	/* the others' traces are theirs (saved when they retired) */
	for (; opened < ps->n && rc == 0; opened++) {
		if (opened > 0) {
			bufs[opened] = ps->v[opened].trace;
			len = ps->v[opened].trace_len;
		}
		rc = tfs_trace_open_mem(bufs[opened], len, &t[opened], &d);
	}
	if (rc == 0)
		rc = tfs_merge_traces_opts(t, ps->n, &merge_opts, &merged, &len, &d);
	if (rc == 0)
		rc = tfs_file_write(out, merged, len);
	free(merged);
	for (uint32_t i = 0; t && i < opened; i++)
		tfs_trace_close(t[i]);
	if (bufs)
		free(bufs[0]);
	free(t);
	free(bufs);
	return rc;
}
