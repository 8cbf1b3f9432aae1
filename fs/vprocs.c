/*
 * The processes of a trace, from its metadata (FORMAT.md §3.1): for each rank the program
 * it ran last (`image`, else `program`), all of them (`images`, "sh -> cc1"), its pid and
 * ppid, the rank that started it, how it ended (`end`) and the names the program gave its
 * threads (`thread_names`), the events it dropped that no mark places
 * (`dropped_unplaced`), each read from `<key>.rank<R>` keys in one pass over the
 * metadata and kept as runs of ranks, so a trace of many ranks costs no more than its
 * metadata. Names for trace.json,
 * info.json and README.txt come from here. It reads no events.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vnode_i.h"

/* The keys read, and where each goes in a struct fs_proc. */
enum { KEY_PROGRAM, KEY_IMAGE, KEY_IMAGES, KEY_END, KEY_THREAD_NAMES, KEY_PID, KEY_PPID,
       KEY_UNPLACED, N_KEYS };
static const char *const keys[N_KEYS] = {"program", "image",	"images", "end",
					 "thread_names", "pid", "ppid", "dropped_unplaced"};

/*
 * Split @key into one of keys[] and the rank of its `.rank<R>` suffix (R < @n_ranks, no
 * leading zero; -1 without one). @return the key's index, or -1 when it is none of them
 */
static int key_of(const char *key, uint32_t n_ranks, int64_t *rank)
{
	for (int k = 0; k < N_KEYS; k++) {
		size_t n = strlen(keys[k]);
		const char *d = key + n;
		uint64_t r = 0;

		if (strncmp(key, keys[k], n) != 0)
			continue;
		*rank = -1;
		if (!*d)
			return k;
		if (strncmp(d, ".rank", 5) != 0 || !d[5] || (d[5] == '0' && d[6]))
			continue;
		for (d += 5; *d >= '0' && *d <= '9' && r < n_ranks; d++)
			r = r * 10 + (uint64_t)(*d - '0');
		if (*d || r >= n_ranks)
			continue;
		*rank = (int64_t)r;
		return k;
	}
	return -1;
}

static int64_t number(const char *s)
{
	char *end;
	long long v;

	if (!s || !*s)
		return -1;
	v = strtoll(s, &end, 10);
	return *end || v < 0 ? -1 : (int64_t)v;
}

/* A `<key>.rank<R>` value: where it starts to hold. */
struct change {
	uint32_t rank;
	int key;
	const char *value;
};

static int cmp_change(const void *a, const void *b)
{
	const struct change *x = a, *y = b;

	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* pid -> the last rank of it so far (open addressing, keys -1: empty). */
struct pid_tab {
	int64_t *pid, *rank;
	uint32_t mask;
};

static uint32_t pid_slot(const struct pid_tab *pt, int64_t pid)
{
	uint32_t h = (uint32_t)((uint64_t)pid * 0x9e3779b97f4a7c15u >> 40) & pt->mask;

	while (pt->pid[h] >= 0 && pt->pid[h] != pid)
		h = (h + 1) & pt->mask;
	return h;
}

/*
 * Each run's parent: the last rank before it whose pid is its ppid (a process's rank comes
 * after its parent's, and a pid is unique among processes alive together). Within a run
 * whose pid is its own ppid each rank's parent is the rank before it.
 */
static int find_parents(struct fs_procs *p)
{
	struct pid_tab pt;
	uint32_t cap = 16;

	while (cap < 2 * p->n_runs)
		cap *= 2;
	pt.pid = malloc(cap * sizeof(*pt.pid));
	pt.rank = malloc(cap * sizeof(*pt.rank));
	pt.mask = cap - 1;
	if (!pt.pid || !pt.rank) {
		free(pt.pid);
		free(pt.rank);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < cap; i++)
		pt.pid[i] = -1;
	for (uint32_t i = 0; i < p->n_runs; i++) {
		struct fs_proc_run *run = &p->runs[i];
		uint32_t end = i + 1 < p->n_runs ? p->runs[i + 1].first : p->n;
		uint32_t h;

		run->q.parent_rank = -1;
		if (run->q.ppid >= 0) {
			h = pid_slot(&pt, run->q.ppid);
			if (pt.pid[h] >= 0)
				run->q.parent_rank = pt.rank[h];
		}
		run->chain = run->q.pid >= 0 && run->q.pid == run->q.ppid;
		if (run->q.pid < 0)
			continue;
		h = pid_slot(&pt, run->q.pid);
		pt.pid[h] = run->q.pid;
		pt.rank[h] = (int64_t)end - 1;
	}
	free(pt.pid);
	free(pt.rank);
	return 0;
}

/* The `<key>.rank<R>` keys of @t in rank order, and the base values. */
static int read_changes(const struct tfs_trace *t, uint32_t n_ranks, const char **base,
			struct change **out, uint32_t *n)
{
	const char *k, *v;
	uint32_t cap = 0;

	*out = NULL;
	*n = 0;
	for (uint32_t i = 0; tfs_trace_meta_at(t, i, &k, &v) == 0; i++) {
		int64_t r;
		int key = key_of(k, n_ranks, &r);

		if (key < 0)
			continue;
		if (r < 0) {
			base[key] = v;
			continue;
		}
		if (*n == cap) {
			struct change *c;

			cap = cap ? 2 * cap : 16;
			c = realloc(*out, (size_t)cap * sizeof(*c));
			if (!c)
				return -ENOMEM;
			*out = c;
		}
		(*out)[(*n)++] = (struct change){(uint32_t)r, key, v};
	}
	if (*n > 1)
		qsort(*out, *n, sizeof(**out), cmp_change);
	return 0;
}

/*
 * The ranks shown (struct fs_procs): rank 0, the ranks of the sorted streams and those of
 * the @n_ch changes @ch (in rank order), merged; at most 1 + streams + changes of them.
 */
static int shown_ranks(const struct tfs_trace *t, const struct change *ch, uint32_t n_ch,
		       struct fs_procs *p)
{
	struct tfs_trace_info ti;
	uint32_t s = 0, c = 0;

	tfs_trace_get_info(t, &ti);
	p->shown = malloc(((size_t)ti.n_streams + n_ch + 1) * sizeof(*p->shown));
	if (!p->shown)
		return -ENOMEM;
	p->shown[p->n_shown++] = 0;
	for (;;) {
		struct tfs_stream_info si;
		uint32_t idx, r = UINT32_MAX;
		int rc = 0;

		if (s < ti.n_streams) {
			rc = tfs_trace_stream_sorted(t, s, &idx);
			if (rc == 0)
				rc = tfs_trace_stream(t, idx, &si);
			if (rc < 0)
				return rc;
			r = si.rank;
		}
		if (c < n_ch && ch[c].rank < r)
			r = ch[c].rank;
		if (r == UINT32_MAX && s == ti.n_streams && c == n_ch)
			break;
		if (s < ti.n_streams && si.rank == r)
			s++;
		else
			c++;
		if (r >= p->n)
			continue; /* the reader keeps streams below n_ranks; keys too (key_of) */
		if (r > p->shown[p->n_shown - 1])
			p->shown[p->n_shown++] = r;
	}
	return 0;
}

/* Fill run @run from the values in force. */
static void set_run(struct fs_proc_run *run, uint32_t first, const char *const *val)
{
	struct fs_proc *q = &run->q;

	run->first = first;
	q->program = val[KEY_IMAGE] && *val[KEY_IMAGE] ? val[KEY_IMAGE] : val[KEY_PROGRAM];
	q->images = val[KEY_IMAGES];
	q->end = val[KEY_END];
	q->thread_names = val[KEY_THREAD_NAMES];
	q->pid = number(val[KEY_PID]);
	q->ppid = number(val[KEY_PPID]);
	q->dropped_unplaced = number(val[KEY_UNPLACED]);
}

int fs_procs_new(const struct tfs_trace *t, uint32_t n_ranks, struct fs_procs **out)
{
	const char *val[N_KEYS] = {0};
	struct change *ch;
	struct fs_procs *p;
	uint32_t n_ch, n_runs = 1;
	int rc;

	*out = NULL;
	rc = read_changes(t, n_ranks, val, &ch, &n_ch);
	if (rc < 0) {
		free(ch);
		return rc;
	}
	/* a value holds from its rank on, up to the next one (FORMAT.md §3.1): a run per rank
	 * where some value changes, so the table grows with the metadata, not the ranks */
	for (uint32_t i = 0; i < n_ch; i++)
		n_runs += ch[i].rank > 0 && (i == 0 || ch[i].rank != ch[i - 1].rank);
	p = calloc(1, sizeof(*p) + (size_t)n_runs * sizeof(p->runs[0]));
	if (!p) {
		free(ch);
		return -ENOMEM;
	}
	p->n = n_ranks;
	for (uint32_t i = 0; i < n_ch && ch[i].rank == 0; i++)
		val[ch[i].key] = ch[i].value;
	set_run(&p->runs[p->n_runs++], 0, val);
	for (uint32_t i = 0; i < n_ch; i++) {
		if (ch[i].rank == 0)
			continue;
		val[ch[i].key] = ch[i].value;
		if (i + 1 < n_ch && ch[i + 1].rank == ch[i].rank)
			continue;
		set_run(&p->runs[p->n_runs++], ch[i].rank, val);
	}
	rc = shown_ranks(t, ch, n_ch, p);
	free(ch);
	if (rc < 0) {
		fs_procs_free(p);
		return rc;
	}
	/* an MPI job's ranks are its processes by rank; pids are rank 0's unless kept */
	p->mpi = tfs_trace_meta(t, "mpi_size") != NULL;
	p->by_pid = n_ranks > 0 && p->runs[0].q.pid >= 0 && !p->mpi;
	rc = find_parents(p);
	if (rc < 0) {
		fs_procs_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

void fs_procs_free(struct fs_procs *p)
{
	if (p)
		free(p->shown);
	free(p);
}

void fs_proc_at(const struct fs_procs *p, uint32_t rank, struct fs_proc *q)
{
	uint32_t lo = 0, hi = p->n_runs;
	const struct fs_proc_run *run;

	/* the last run starting at or before @rank */
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (p->runs[mid].first <= rank)
			lo = mid;
		else
			hi = mid;
	}
	run = &p->runs[lo];
	*q = run->q;
	if (run->chain && rank > run->first)
		q->parent_rank = (int64_t)rank - 1;
}

/*
 * @name then @suffix in @buf of @cap bytes: a name too long for it is cut between two
 * characters and followed by "...[+N bytes]" (N the bytes left out), the suffix is whole.
 */
static void put_cut_name(char *buf, size_t cap, const char *name, const char *suffix)
{
	size_t n = strlen(name), room = cap - 1 - strlen(suffix);
	/* the longest mark: N is at most n */
	size_t mark = (size_t)snprintf(NULL, 0, "...[+%zu bytes]", n);
	size_t keep;

	if (n + strlen(suffix) < cap) {
		snprintf(buf, cap, "%s%s", name, suffix);
		return;
	}
	keep = tfs_utf8_cut(name, n, room > mark ? room - mark : 0);
	snprintf(buf, cap, "%.*s...[+%zu bytes]%s", (int)keep, name, n - keep, suffix);
}

void fs_proc_name(const struct fs_procs *p, uint32_t rank, char *buf, size_t cap)
{
	struct fs_proc proc;
	const struct fs_proc *q = NULL;
	char suffix[48];

	if (p && rank < p->n) {
		fs_proc_at(p, rank, &proc);
		q = &proc;
	}

	if (q && q->program && p->by_pid && q->pid >= 0)
		snprintf(suffix, sizeof(suffix), " (pid %" PRId64 ")", q->pid);
	else if (q && q->program && p->mpi)
		snprintf(suffix, sizeof(suffix), " (rank %" PRIu32 ")", rank);
	else {
		snprintf(buf, cap, "rank %" PRIu32, rank);
		return;
	}
	put_cut_name(buf, cap, q->program, suffix);
}

/* The name at @s up to its line's end, '\\' and a newline escaped as \\\\ and \\n,
   unescaped into @out when not NULL: @return its length */
static size_t thread_name_at(const char *s, char *out)
{
	size_t n = 0;

	for (; *s && *s != '\n'; s++, n++) {
		char c = *s;

		if (c == '\\' && (s[1] == '\\' || s[1] == 'n'))
			c = *++s == 'n' ? '\n' : '\\';
		if (out)
			out[n] = c;
	}
	return n;
}

const char *fs_proc_thread_name(const struct fs_proc *q, uint32_t thread, char *buf, size_t cap)
{
	const char *s = q->thread_names;

	/* lines "<thread>=<name>" */
	while (s && *s && cap > 0) {
		char *end, *whole;
		unsigned long t = strtoul(s, &end, 10);
		size_t n;

		if (end == s || *end != '=')
			return NULL;
		s = end + 1;
		if (t != thread) {
			s += strcspn(s, "\n");
			s += *s == '\n';
			continue;
		}
		n = thread_name_at(s, NULL);
		if (n < cap) {
			thread_name_at(s, buf);
			buf[n] = '\0';
			return buf;
		}
		/* too long for @buf: cut between characters, with the mark other names get */
		whole = malloc(n + 1);
		if (!whole)
			return NULL;
		thread_name_at(s, whole);
		whole[n] = '\0';
		put_cut_name(buf, cap, whole, "");
		free(whole);
		return buf;
	}
	return NULL;
}

void fs_thread_label(const struct fs_procs *p, uint32_t rank, uint32_t thread, char *buf,
		     size_t cap)
{
	char proc[300], tname[256];
	const char *given = NULL;

	fs_proc_name(p, rank, proc, sizeof(proc));
	if (p && rank < p->n) {
		struct fs_proc q;

		fs_proc_at(p, rank, &q);
		given = fs_proc_thread_name(&q, thread, tname, sizeof(tname));
	}
	snprintf(buf, cap, "T%" PRIu32 "%s%s, %s", thread, given ? " " : "", given ? given : "",
		 proc);
}
