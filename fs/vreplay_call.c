/*
 * The proxy's function of each call signature: what the call's kind becomes (an MPI call,
 * a libc call from its `replay` line in capture/calls.txt with the recorded arguments put
 * in, a zone's end, a mark, a counter, a thread's name, a memory access, or nothing) and
 * the statements that make it. Constant arguments become literals, the ones that vary per
 * call value slots (rp_val). It decides nothing about where a call happens (vreplay.c does,
 * from the grammar) and writes no MPI call itself (vreplay_mpi.c does).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vreplay_i.h"

static const char *const val_names[TFS_MAX_ARGS] = {
    "v0",  "v1",  "v2",	 "v3",	"v4",  "v5",  "v6",  "v7",  "v8",  "v9",  "v10",
    "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21",
    "v22", "v23", "v24", "v25", "v26", "v27", "v28", "v29", "v30", "v31"};

const char *rp_val(struct rp_gen *g, uint32_t term, uint32_t arg)
{
	struct rp_term *t = &g->terms[term];

	for (uint32_t i = 0; i < t->n_vals; i++)
		if (t->val_arg[i] == arg)
			return val_names[i];
	if (t->n_vals >= TFS_MAX_ARGS)
		return "0";
	t->val_arg[t->n_vals] = arg;
	return val_names[t->n_vals++];
}

void rp_put_cstr(struct fs_sbuf *b, const char *s)
{
	fs_sb_put(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fs_sb_printf(b, "\\%c", c);
		else if (c >= 0x20 && c < 0x7f && !(c == '?' && s[1] == '?'))
			fs_sb_put(b, s, 1);
		else
			fs_sb_printf(b, "\\%03o", c);
	}
	fs_sb_put(b, "\"", 1);
}

void rp_put_comment(struct fs_sbuf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const bool pair = i + 1 < n && ((s[i] == '*' && s[i + 1] == '/') ||
					       (s[i] == '/' && s[i + 1] == '*') ||
					       (s[i] == '?' && s[i + 1] == '?'));

		if (s[i] == '\n') {
			fs_sb_put(b, "\\n", 2);
			continue;
		}
		fs_sb_put(b, s + i, 1);
		if (pair)
			fs_sb_put(b, "\\", 1);
	}
	if (n && s[n - 1] == '\\')
		fs_sb_put(b, " ", 1); /* before the caller's newline: no line splice */
}

static int arg_index(const struct tfs_kind_desc *kd, const char *name, size_t len)
{
	for (uint32_t i = 0; i < kd->n_args; i++)
		if (strlen(kd->args[i].name) == len && !strncmp(kd->args[i].name, name, len))
			return (int)i;
	return -1;
}

/* Argument @i of terminal @term as a C expression: a literal, or its value slot. */
static void put_arg(struct rp_gen *g, uint32_t term, const struct tfs_kind_desc *kd,
		    const union tfs_arg *args, uint32_t i, struct fs_sbuf *b)
{
	const struct tfs_arg_desc *a = &kd->args[i];

	if (a->enc == TFS_ENC_VAL)
		fs_sb_printf(b, "%s", rp_val(g, term, i));
	else if (a->enc == TFS_ENC_STR)
		rp_put_cstr(b, args[i].s ? args[i].s : "");
	else if (a->type == TFS_TYPE_I64)
		fs_sb_printf(b, "INT64_C(%" PRId64 ")", args[i].i);
	else
		fs_sb_printf(b, "UINT64_C(%" PRIu64 ")", args[i].u);
}

/* The `replay` statements of calls.txt with every $NAME replaced. */
static int libc_term(struct rp_gen *g, uint32_t term, const struct tfs_kind_desc *kd,
		     const union tfs_arg *args)
{
	struct rp_term *t = &g->terms[term];
	const struct rp_libc *c = NULL;
	const char *s;

	for (uint32_t i = 0; i < rp_libc_n_calls && !c; i++)
		if (!strcmp(rp_libc_calls[i].kind, kd->name))
			c = &rp_libc_calls[i];
	if (!c) {
		t->why = "a kind this tracefs's capture/calls.txt does not have";
		return 0;
	}
	s = c->stmts;
	if (!s) {
		t->why = c->why ? c->why : "capture/calls.txt has no `replay` line for it";
		return 0;
	}
	/* a kind recorded by another capture version may lack an argument the line uses */
	for (const char *p = strchr(s, '$'); p; p = strchr(p + 1, '$')) {
		size_t n = strspn(p + 1, "abcdefghijklmnopqrstuvwxyz_0123456789");

		if (arg_index(kd, p + 1, n) < 0) {
			t->why = "the trace records this call without an argument replay needs";
			return 0;
		}
	}
	t->what = RP_W_CALL;
	t->libc = true;
	t->alloc = !strcmp(kd->category, "alloc");
	while (*s) {
		const char *p = strchr(s, '$');
		size_t n;

		if (!p) {
			fs_sb_printf(&t->code, "%s", s);
			break;
		}
		fs_sb_put(&t->code, s, (size_t)(p - s));
		n = strspn(p + 1, "abcdefghijklmnopqrstuvwxyz_0123456789");
		put_arg(g, term, kd, args, (uint32_t)arg_index(kd, p + 1, n), &t->code);
		s = p + 1 + n;
	}
	return 0;
}

/* Zones, marks, counters, thread names, memory accesses: the capture API. */
static void capture_term(struct rp_gen *g, uint32_t term, const struct tfs_kind_desc *kd,
			 const union tfs_arg *args)
{
	struct rp_term *t = &g->terms[term];
	const char *k = kd->name;
	int name = arg_index(kd, "name", 4), val = arg_index(kd, "value", 5);

	t->what = RP_W_CAPTURE;
	if ((!strcmp(k, "zone") || !strcmp(k, "zone_unfinished")) && name == 0) {
		t->what = !strcmp(k, "zone") ? RP_W_ZONE : RP_W_OPEN_ZONE;
		if (t->what == RP_W_ZONE)
			fs_sb_printf(&t->code, "rt_zone_end(); ");
		fs_sb_printf(&t->code, "rt_zone_begins((uint32_t)rt_v(s + %u));", g->timed ? 1 : 0);
	} else if (!strcmp(k, "mark") && kd->n_args == 1 && kd->args[0].enc == TFS_ENC_STR) {
		fs_sb_printf(&t->code, "rt_mark_(");
		put_arg(g, term, kd, args, 0, &t->code);
		fs_sb_printf(&t->code, ");");
	} else if (!strcmp(k, "counter") && name == 0 && val == 1) {
		fs_sb_printf(&t->code, "rt_counter(");
		put_arg(g, term, kd, args, 0, &t->code);
		fs_sb_printf(&t->code, ", ");
		put_arg(g, term, kd, args, 1, &t->code);
		fs_sb_printf(&t->code, ");");
	} else if (!strcmp(k, "thread_name") && name == 0) {
		fs_sb_printf(&t->code, "rt_thread_name(");
		put_arg(g, term, kd, args, 0, &t->code);
		fs_sb_printf(&t->code, ");");
	} else if ((!strcmp(k, "load") || !strcmp(k, "store")) && kd->n_args == 3) {
		fs_sb_printf(&t->code, "rt_mem_access(");
		put_arg(g, term, kd, args, 0, &t->code);
		fs_sb_printf(&t->code, ", ");
		put_arg(g, term, kd, args, 1, &t->code);
		fs_sb_printf(&t->code, ", %d, ", !strcmp(k, "store"));
		put_arg(g, term, kd, args, 2, &t->code);
		fs_sb_printf(&t->code, ");");
	} else if (!strcmp(k, "dropped")) {
		t->what = RP_W_NONE;
		t->why = "events the recording dropped (its spool was full): what they were is "
			 "not known";
	} else {
		t->what = RP_W_NONE;
		t->why = "an event of the capture API the proxy does not know";
	}
}

/* fd_file: no call, but the descriptor must exist where the program met it. */
static void fd_file_term(struct rp_gen *g, uint32_t term, const struct tfs_kind_desc *kd,
			 const union tfs_arg *args)
{
	struct rp_term *t = &g->terms[term];
	int fd = arg_index(kd, "fd", 2), file = arg_index(kd, "file", 4);
	int path = arg_index(kd, "path", 4);
	const char *p = path >= 0 && kd->args[path].enc == TFS_ENC_STR ? args[path].s : NULL;

	if (fd < 0 || file < 0)
		return;
	/* a descriptor that was not open, "(not open)" (fd -1), "(fd N not open)" in traces
	   recorded before: none to make */
	if (args[fd].i < 0 || (p && !strcmp(p, "(not open)")) ||
	    (p && !strncmp(p, "(fd ", 4) && strstr(p, " not open)")))
		return;
	t->what = RP_W_SETUP;
	fs_sb_printf(&t->code, "rt_fd_exists((int)INT64_C(%" PRId64 "), UINT64_C(%" PRIu64 "));",
		     args[fd].i, args[file].u);
	if (args[fd].i >= 3)
		fs_sb_printf(&t->code, " rt_fd_file(UINT64_C(%" PRIu64 "), INT64_C(%" PRId64 "));",
			     args[file].u, args[fd].i);
}

int rp_terms_build(struct rp_gen *g)
{
	union tfs_arg args[TFS_MAX_ARGS];

	for (uint32_t i = 0; i < g->ti->n_terminals; i++) {
		struct rp_term *t = &g->terms[i];
		struct tfs_kind_desc kd;
		int rc = tfs_trace_term_kind(g->t, i, &t->kind);

		if (rc == 0)
			rc = tfs_trace_kind(g->t, t->kind, &kd);
		if (rc == 0)
			rc = tfs_trace_term_args(g->t, i, args);
		if (rc < 0)
			return rc;
		t->why = "an event the proxy does not know";
		if (!strcmp(kd.category, "mpi") && g->mpi)
			rc = rp_mpi_term(g, i, &kd);
		else if (!strcmp(kd.name, "fd_file"))
			fd_file_term(g, i, &kd, args);
		else if (!strcmp(kd.category, "alloc") || !strcmp(kd.category, "io") ||
			 !strcmp(kd.category, "threads"))
			rc = libc_term(g, i, &kd, args);
		else
			capture_term(g, i, &kd, args);
		if (rc < 0)
			return rc;
		if (t->code.failed)
			return -ENOMEM;
		if (t->what != RP_W_NONE && !t->approx)
			t->why = NULL;
	}
	return 0;
}
