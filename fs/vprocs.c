/*
 * The processes of a trace, from its metadata (FORMAT.md §3.1): for each rank the program
 * it ran last (`image`, else `program`), all of them (`images`, "sh -> cc1"), its pid and
 * ppid, the rank that started it, how it ended (`end`) and the names the program gave its
 * threads (`thread_names`), each read from `<key>.rank<R>` keys in one pass over the
 * metadata, so a trace of many ranks costs no more than its metadata. Names for trace.json,
 * info.json and README.txt come from here. It reads no events.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vnode_i.h"

/* The keys read, and where each goes in a struct fs_proc. */
enum { KEY_PROGRAM, KEY_IMAGE, KEY_IMAGES, KEY_END, KEY_THREAD_NAMES, KEY_PID, KEY_PPID, N_KEYS };
static const char *const keys[N_KEYS] = {"program", "image",	"images", "end",
					 "thread_names", "pid", "ppid"};

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

/* Each rank's parent: the last rank before it whose pid is its ppid (ranks are in the
 * order their processes began, and a pid is unique among processes alive together). */
static int find_parents(struct fs_procs *p)
{
	uint32_t cap = 16;
	int64_t *pid_of, *rank_of; /* open addressing: pid -> the last rank of it so far */

	while (cap < 2 * p->n)
		cap *= 2;
	pid_of = malloc(cap * sizeof(*pid_of));
	rank_of = malloc(cap * sizeof(*rank_of));
	if (!pid_of || !rank_of) {
		free(pid_of);
		free(rank_of);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < cap; i++)
		pid_of[i] = -1;
	for (uint32_t r = 0; r < p->n; r++) {
		struct fs_proc *q = &p->v[r];
		uint32_t h;

		q->parent_rank = -1;
		for (h = (uint32_t)((uint64_t)q->ppid * 0x9e3779b97f4a7c15u >> 40) & (cap - 1);
		     q->ppid >= 0 && pid_of[h] >= 0; h = (h + 1) & (cap - 1)) {
			if (pid_of[h] == q->ppid) {
				q->parent_rank = rank_of[h];
				break;
			}
		}
		if (q->pid < 0)
			continue;
		for (h = (uint32_t)((uint64_t)q->pid * 0x9e3779b97f4a7c15u >> 40) & (cap - 1);
		     pid_of[h] >= 0 && pid_of[h] != q->pid; h = (h + 1) & (cap - 1))
			;
		pid_of[h] = q->pid;
		rank_of[h] = r;
	}
	free(pid_of);
	free(rank_of);
	return 0;
}

int fs_procs_new(const struct tfs_trace *t, uint32_t n_ranks, struct fs_procs **out)
{
	struct fs_procs *p = calloc(1, sizeof(*p) + (size_t)n_ranks * sizeof(p->v[0]));
	const char **set = calloc((size_t)n_ranks * N_KEYS + 1, sizeof(*set));
	const char *base[N_KEYS] = {0}, *k, *v;
	int rc;

	*out = NULL;
	if (!p || !set) {
		free(p);
		free(set);
		return -ENOMEM;
	}
	p->n = n_ranks;
	for (uint32_t i = 0; tfs_trace_meta_at(t, i, &k, &v) == 0; i++) {
		int64_t r;
		int key = key_of(k, n_ranks, &r);

		if (key < 0)
			continue;
		if (r < 0)
			base[key] = v;
		else
			set[(size_t)r * N_KEYS + (size_t)key] = v;
	}
	/* a value holds from its rank on, up to the next one (FORMAT.md §3.1) */
	for (uint32_t r = 0; r < n_ranks; r++) {
		struct fs_proc *q = &p->v[r];

		for (int key = 0; key < N_KEYS; key++)
			if (set[(size_t)r * N_KEYS + (size_t)key])
				base[key] = set[(size_t)r * N_KEYS + (size_t)key];
		q->program = base[KEY_IMAGE] && *base[KEY_IMAGE] ? base[KEY_IMAGE]
								  : base[KEY_PROGRAM];
		q->images = base[KEY_IMAGES];
		q->end = base[KEY_END];
		q->thread_names = base[KEY_THREAD_NAMES];
		q->pid = number(base[KEY_PID]);
		q->ppid = number(base[KEY_PPID]);
	}
	free(set);
	/* an MPI job's ranks are its processes by rank; pids are rank 0's unless kept */
	p->mpi = tfs_trace_meta(t, "mpi_size") != NULL;
	p->by_pid = n_ranks > 0 && p->v[0].pid >= 0 && !p->mpi;
	rc = find_parents(p);
	if (rc < 0) {
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

void fs_procs_free(struct fs_procs *p)
{
	free(p);
}

void fs_proc_name(const struct fs_procs *p, uint32_t rank, char *buf, size_t cap)
{
	const struct fs_proc *q = p && rank < p->n ? &p->v[rank] : NULL;

	if (q && q->program && p->by_pid && q->pid >= 0)
		snprintf(buf, cap, "%s (pid %" PRId64 ")", q->program, q->pid);
	else if (q && q->program && p->mpi)
		snprintf(buf, cap, "%s (rank %" PRIu32 ")", q->program, rank);
	else
		snprintf(buf, cap, "rank %" PRIu32, rank);
}

const char *fs_proc_thread_name(const struct fs_proc *q, uint32_t thread, char *buf, size_t cap)
{
	const char *s = q->thread_names;

	/* lines "<thread>=<name>", '\' and a newline of a name escaped as \\ and \n */
	while (s && *s && cap > 0) {
		char *end;
		unsigned long t = strtoul(s, &end, 10);
		size_t n = 0;

		if (end == s || *end != '=')
			return NULL;
		for (s = end + 1; *s && *s != '\n'; s++) {
			char c = *s;

			if (c == '\\' && (s[1] == '\\' || s[1] == 'n'))
				c = *++s == 'n' ? '\n' : '\\';
			if (n + 1 < cap)
				buf[n++] = c;
		}
		buf[n] = '\0';
		if (t == thread)
			return buf;
		if (*s == '\n')
			s++;
	}
	return NULL;
}
