/*
 * files.txt of a rank: one line per file id (symbolic ids of class "file") with its kind,
 * name, the flags of the call that opened it, the calls that named it, the bytes read from
 * and written to it, and its first and last use. Generated once, at its first stat or open,
 * from the rank's names (FORMAT.md §12) and one pass over the events of its threads that
 * can name a file (a thread whose grammar has no such call is skipped without decoding).
 * Which way bytes went comes from the file argument's flags (TFS_ARG_INPUT, TFS_ARG_OUTPUT,
 * §4); a file's kind from its name alone (the machine that recorded it is not this one).
 * README.txt (vgen.c) states the format; this file must print exactly that.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vnode_i.h"

#define FILE_CLASS "file"

/* What a kind says about files: its file arguments and, for an opening call, its flags. */
struct fkind {
	uint32_t file_arg[TFS_MAX_ARGS]; /* arguments of class "file", in order */
	uint32_t n_file;
	bool is_call;	   /* it has a result: an interposed call (fd_file has none) */
	int32_t opened;	   /* the file argument an opening call names (STR path, SYM file not
			     * attached), or -1 */
	int32_t flags_arg; /* its numeric "flags" argument, or -1 */
	int32_t mode_arg;  /* else its STR "opentype" argument (fopen; "mode" before 2.2), or -1 */
	int32_t errno_arg; /* its "errno" argument (not 0: the call failed, opened nothing), or -1 */
};

/* One file id's facts. */
struct fent {
	uint64_t id;
	bool used;   /* the slot holds an id */
	bool called; /* a call named it: first and last are set */
	bool opened; /* an opening call named it: flags is set */
	uint64_t calls, bytes_in, bytes_out;
	uint64_t first_ns, last_ns; /* timed: first start, last end */
	uint32_t first_t, last_t;   /* untimed: (thread, index) order */
	uint64_t first_i, last_i;
	uint64_t open_ns; /* start of the opening call flags comes from */
	char flags[160];
	const char *name; /* borrowed from the trace, or NULL */
};

struct fmap {
	struct fent *v;
	size_t n, cap; /* cap: a power of two */
};

static struct fent *fmap_get(struct fmap *m, uint64_t id)
{
	size_t i;

	if (2 * (m->n + 1) > m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 64;
		struct fent *v = calloc(cap, sizeof(*v));

		if (!v)
			return NULL;
		for (size_t k = 0; k < m->cap; k++) {
			if (!m->v[k].used)
				continue;
			i = (size_t)(m->v[k].id * UINT64_C(0x9e3779b97f4a7c15) >> 17) & (cap - 1);
			while (v[i].used)
				i = (i + 1) & (cap - 1);
			v[i] = m->v[k];
		}
		free(m->v);
		m->v = v;
		m->cap = cap;
	}
	i = (size_t)(id * UINT64_C(0x9e3779b97f4a7c15) >> 17) & (m->cap - 1);
	while (m->v[i].used && m->v[i].id != id)
		i = (i + 1) & (m->cap - 1);
	if (!m->v[i].used) {
		m->v[i] = (struct fent){.id = id, .used = true};
		m->n++;
	}
	return &m->v[i];
}

static void fkind_fill(const struct fs_kind *k, struct fkind *f)
{
	int32_t path = -1;

	*f = (struct fkind){.opened = -1, .flags_arg = -1, .mode_arg = -1, .errno_arg = -1};
	for (uint32_t i = 0; i < k->n_args; i++) {
		const struct tfs_arg_desc *a = &k->args[i];

		if (a->enc == TFS_ENC_SYM && a->sym_class && !strcmp(a->sym_class, FILE_CLASS)) {
			f->file_arg[f->n_file++] = i;
			if (!(a->flags & TFS_ARG_ATTACH) && f->opened < 0)
				f->opened = (int32_t)i;
		} else if (a->enc == TFS_ENC_STR && !strcmp(a->name, "path")) {
			path = (int32_t)i;
		} else if (a->enc == TFS_ENC_STR &&
			   (!strcmp(a->name, "opentype") || !strcmp(a->name, "mode"))) {
			f->mode_arg = (int32_t)i;
		} else if (a->enc != TFS_ENC_STR && !strcmp(a->name, "flags")) {
			f->flags_arg = (int32_t)i;
		} else if (a->enc != TFS_ENC_STR && !strcmp(a->name, "errno")) {
			f->errno_arg = (int32_t)i;
		}
		f->is_call |= (a->flags & TFS_ARG_RESULT) != 0;
	}
	if (path < 0)
		f->opened = -1;
}

/* open(2) flags by name: the access mode, the known bits, the rest in hex. */
static void open_flags(char *buf, size_t cap, uint64_t v)
{
	static const struct {
		uint64_t mask;
		const char *name;
	} bits[] = {
	    {O_CREAT, "O_CREAT"},     {O_EXCL, "O_EXCL"},	    {O_NOCTTY, "O_NOCTTY"},
	    {O_TRUNC, "O_TRUNC"},     {O_APPEND, "O_APPEND"},	    {O_NONBLOCK, "O_NONBLOCK"},
	    {O_SYNC, "O_SYNC"},	      {O_DSYNC, "O_DSYNC"},	    {O_DIRECT, "O_DIRECT"},
	    {O_TMPFILE, "O_TMPFILE"}, {O_DIRECTORY, "O_DIRECTORY"}, {O_NOFOLLOW, "O_NOFOLLOW"},
	    {O_NOATIME, "O_NOATIME"}, {O_CLOEXEC, "O_CLOEXEC"},	    {O_PATH, "O_PATH"},
	    {O_ASYNC, "O_ASYNC"},
	};
	static const char *const acc[] = {"O_RDONLY", "O_WRONLY", "O_RDWR", "O_ACCMODE"};
	size_t n = (size_t)snprintf(buf, cap, "%s", acc[v & O_ACCMODE]);

	v &= ~(uint64_t)O_ACCMODE;
	for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]) && n < cap; i++) {
		if (bits[i].mask && (v & bits[i].mask) == bits[i].mask) {
			n += (size_t)snprintf(buf + n, cap - n, "|%s", bits[i].name);
			v &= ~bits[i].mask;
		}
	}
	if (v && n < cap)
		snprintf(buf + n, cap - n, "|%#" PRIx64, v);
}

/* The flags of opening event @ev of kind @fk, as files.txt prints them. */
static void event_flags(const struct fkind *fk, const struct tfs_event *ev, char *buf, size_t cap)
{
	struct fs_sbuf b = {0};

	if (fk->flags_arg >= 0) {
		open_flags(buf, cap, ev->args[fk->flags_arg].u);
		return;
	}
	if (fk->mode_arg >= 0)
		fs_sb_name(&b, ev->args[fk->mode_arg].s, " ");
	snprintf(buf, cap, "%.*s", b.len && !b.failed ? (int)b.len : 1, b.len ? b.data : "-");
	free(b.data);
}

/* Whether @ev comes before what @e holds as its first use (timed: start, else order). */
static void note_use(struct fent *e, const struct tfs_event *ev, uint32_t thread, bool timed)
{
	uint64_t end = ev->ts_ns + ev->dur_ns < ev->ts_ns ? UINT64_MAX : ev->ts_ns + ev->dur_ns;

	if (!e->called) {
		e->called = true;
		e->first_ns = ev->ts_ns;
		e->last_ns = end;
		e->first_t = e->last_t = thread;
		e->first_i = e->last_i = ev->index;
		return;
	}
	if (timed) {
		e->first_ns = ev->ts_ns < e->first_ns ? ev->ts_ns : e->first_ns;
		e->last_ns = end > e->last_ns ? end : e->last_ns;
	} else {
		/* threads are read in order, each from its first event on */
		e->last_t = thread;
		e->last_i = ev->index;
	}
}

struct fscan {
	struct fs_vtree *vt;
	struct fkind *kinds;
	struct fmap map;
	bool timed;
};

static int take_event(struct fscan *s, const struct tfs_event *ev, uint32_t thread)
{
	const struct fkind *fk = &s->kinds[ev->kind];
	const struct fs_kind *k = &s->vt->kinds[ev->kind];
	uint64_t bytes = fk->n_file ? fs_event_bytes(s->vt, ev) : 0;

	for (uint32_t j = 0; j < fk->n_file; j++) {
		uint32_t a = fk->file_arg[j];
		uint64_t id = ev->args[a].u;
		bool again = false;
		struct fent *e;

		if (id == TFS_SYM_NONE)
			continue;
		e = fmap_get(&s->map, id);
		if (!e)
			return -ENOMEM;
		for (uint32_t i = 0; i < j; i++)
			again |= ev->args[fk->file_arg[i]].u == id;
		if (fk->is_call && !again) {
			e->calls++;
			note_use(e, ev, thread, s->timed);
		}
		if (k->args[a].flags & TFS_ARG_INPUT)
			e->bytes_in = fs_sat_add(e->bytes_in, bytes);
		if (k->args[a].flags & TFS_ARG_OUTPUT)
			e->bytes_out = fs_sat_add(e->bytes_out, bytes);
		/* a call that failed opened nothing (cp probes its target with O_DIRECTORY) */
		if ((int32_t)a == fk->opened &&
		    (fk->errno_arg < 0 || ev->args[fk->errno_arg].u == 0) &&
		    (!e->opened || (s->timed && ev->ts_ns < e->open_ns))) {
			e->opened = true;
			e->open_ns = ev->ts_ns;
			event_flags(fk, ev, e->flags, sizeof(e->flags));
		}
	}
	return 0;
}

/* Whether stream @stream holds an event of a kind with a file argument (from its grammar). */
static int names_files(struct fscan *s, uint32_t stream, uint64_t *counts, bool *yes)
{
	int rc = tfs_trace_term_counts(s->vt->trace, stream, counts);

	*yes = false;
	for (uint32_t t = 0; t < s->vt->ti.n_terminals && rc == 0 && !*yes; t++)
		*yes = counts[t] && s->kinds[s->vt->terms[t].kind].n_file;
	return rc;
}

static int scan_seg(struct fscan *s, const struct fs_seg *seg, uint64_t *counts)
{
	struct tfs_cursor *c;
	struct tfs_event ev;
	bool any;
	int rc = names_files(s, seg->stream, counts, &any);

	if (rc < 0 || !any)
		return rc;
	rc =
	    tfs_cursor_new(s->vt->trace, seg->stream, TFS_VIEW_TEXT, seg->first, seg->n_events, &c);
	for (uint64_t i = seg->first; i < seg->first + seg->n_events && rc == 0; i++) {
		rc = tfs_cursor_event(c, i, &ev, NULL);
		if (rc == 0 && s->kinds[ev.kind].n_file)
			rc = take_event(s, &ev, seg->thread);
	}
	tfs_cursor_free(c);
	return rc;
}

/* The kind of a file from its name (FORMAT.md §4: the capture's naming of descriptors). */
static const char *file_kind(const struct fent *e)
{
	static const struct {
		const char *prefix, *kind;
	} by_prefix[] = {
	    {"pipe:", "pipe"},	 {"socket:", "socket"},	  {"tcp:", "tcp"},
	    {"tcp6:", "tcp"},	 {"udp:", "udp"},	  {"udp6:", "udp"},
	    {"unix:", "unix"},	 {"anon_inode:", "anon"}, {"/dev/pts/", "tty"},
	    {"/dev/tty", "tty"}, {"/dev/console", "tty"},
	    /* file systems mounted under /dev: their files are files (NULL: by the name) */
	    {"/dev/shm/", NULL}, {"/dev/mqueue/", NULL}, {"/dev/hugepages/", NULL},
	    {"/dev/", "device"},
	};
	size_t n;

	if (!e->name)
		return "?";
	for (size_t i = 0; i < sizeof(by_prefix) / sizeof(by_prefix[0]); i++)
		if (!strncmp(e->name, by_prefix[i].prefix, strlen(by_prefix[i].prefix))) {
			if (by_prefix[i].kind)
				return by_prefix[i].kind;
			break;
		}
	n = strlen(e->name);
	if ((n && e->name[n - 1] == '/') || strstr(e->flags, "O_DIRECTORY"))
		return "dir";
	return "file";
}

static int cmp_fent(const void *a, const void *b)
{
	uint64_t x = (*(const struct fent *const *)a)->id, y = (*(const struct fent *const *)b)->id;

	return x < y ? -1 : x > y;
}

static void put_use(struct fs_sbuf *b, bool called, bool timed, uint64_t ns, uint32_t t, uint64_t i)
{
	char buf[48];

	if (!called)
		snprintf(buf, sizeof(buf), "-");
	else if (timed)
		snprintf(buf, sizeof(buf), "%" PRIu64, ns);
	else
		snprintf(buf, sizeof(buf), "T%" PRIu32 ":%" PRIu64, t, i);
	fs_sb_printf(b, " %18s", buf);
}

static int print_files(struct fscan *s, uint32_t rank, char **out, size_t *len)
{
	struct fent **v = malloc((s->map.n + 1) * sizeof(*v));
	struct fs_sbuf b = {0};
	size_t n = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < s->map.cap; i++)
		if (s->map.v[i].used)
			v[n++] = &s->map.v[i];
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_fent);
	fs_sb_printf(&b, "# files of rank %" PRIu32 ": %zu file ids, timing %s\n", rank, n,
		     s->timed ? "yes (first, last in ns)"
			      : "none (first, last: T<thread>:<event>)");
	fs_sb_printf(&b, "#%6s %-7s %10s %14s %14s %18s %18s %-24s %s\n", "id", "kind", "calls",
		     "read", "written", "first", "last", "flags", "name");
	for (size_t i = 0; i < n; i++) {
		const struct fent *e = v[i];

		fs_sb_printf(&b, "%7" PRIu64 " %-7s %10" PRIu64 " %14" PRIu64 " %14" PRIu64, e->id,
			     file_kind(e), e->calls, e->bytes_in, e->bytes_out);
		put_use(&b, e->called, s->timed, e->first_ns, e->first_t, e->first_i);
		put_use(&b, e->called, s->timed, e->last_ns, e->last_t, e->last_i);
		fs_sb_printf(&b, " %-24s ", e->opened ? e->flags : "-");
		fs_sb_name(&b, e->name ? e->name : "-", NULL);
		fs_sb_put(&b, "\n", 1);
	}
	free(v);
	return fs_sb_detach(&b, out, len);
}

int fs_files_new(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank, char **out,
		 size_t *len)
{
	struct fscan s = {.vt = vt, .timed = vt->ti.timing != TFS_TIMING_NONE};
	struct tfs_name *names = NULL;
	uint64_t *counts = NULL;
	size_t n_names = 0;
	int rc;

	rc = fs_terms_ready(vt);
	if (rc < 0)
		return rc;
	s.kinds = calloc((size_t)vt->ti.n_kinds + 1, sizeof(*s.kinds));
	counts = calloc((size_t)vt->ti.n_terminals + 1, sizeof(*counts));
	if (!s.kinds || !counts) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (uint32_t k = 0; k < vt->ti.n_kinds; k++)
		fkind_fill(&vt->kinds[k], &s.kinds[k]);
	rc = tfs_trace_names_dup(vt->trace, rank, FILE_CLASS, &names, &n_names);
	for (size_t i = 0; i < n_names && rc == 0; i++) {
		struct fent *e = fmap_get(&s.map, names[i].id);

		if (!e)
			rc = -ENOMEM;
		else
			e->name = names[i].name;
	}
	for (uint32_t i = 0; i < sc->n_segs && rc == 0; i++)
		rc = scan_seg(&s, &sc->segs[i], counts);
	if (rc == 0)
		rc = print_files(&s, rank, out, len);
out_free:
	free(names);
	free(counts);
	free(s.kinds);
	free(s.map.v);
	return rc;
}

bool fs_files_wanted(const struct fs_vtree *vt)
{
	for (uint32_t k = 0; k < vt->ti.n_kinds; k++) {
		for (uint32_t i = 0; i < vt->kinds[k].n_args; i++) {
			const struct tfs_arg_desc *a = &vt->kinds[k].args[i];

			if (a->enc == TFS_ENC_SYM && a->sym_class &&
			    !strcmp(a->sym_class, FILE_CLASS))
				return true;
		}
	}
	return false;
}
