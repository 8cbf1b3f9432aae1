/*
 * The tracefs command line: info, ls, cat and verify over one trace file. `ls` and `cat`
 * serve the same virtual tree (vtree.c) the FUSE mount will serve, so what `cat` prints is
 * byte for byte what a mounted file holds. Messages follow one form on stderr,
 * "tracefs: <what failed>: <detail>"; exit status 1 is a runtime error, 2 a usage error.
 * This file does no rendering and builds no JSON itself.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <jansson.h>

#include "tfs/reader.h"
#include "tfs/writer.h"
#include "cli_i.h"
#include "compare_i.h"
#include "grep_i.h"
#include "merge_i.h"
#include "mount_i.h"
#include "prefetch_i.h"
#include "record_i.h"
#include "sbuf_i.h"
#include "vtree_i.h"

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2
#define CAT_CHUNK (1u << 20)

static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int usage_error(const char *cmd, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return fs_usage(cmd, "%s", msg);
}

static const char *errstr(int err, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s", fs_strerror(err));
	return buf;
}

/* The detail of a negative error: the diagnostic for corruption, else the errno text. */
static const char *detail(int rc, const struct tfs_diag *diag, char *buf, size_t cap)
{
	if ((rc == -TFS_ECORRUPT || rc == -TFS_EFORMAT) && diag && diag->section[0])
		return tfs_diag_str(diag, buf, cap);
	return errstr(-rc, buf, cap);
}

/* Flush stdout; a closed pipe is a quiet success (`tracefs cat ... | head`). */
static int finish_stdout(void)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return 0;
	if (errno == EPIPE)
		return 0;
	fs_fail("cannot write to stdout: %s", fs_strerror(errno));
	return EXIT_RUNTIME;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash && slash[1] ? slash + 1 : path;
}

/* ---- info ---- */

static const char *jstr(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "-";
}

static json_int_t jint(const json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

/* @s as the text files print a name (fs_sb_name(), FORMAT.md §9.1), padded to @width. */
static void print_name(const char *s, int width)
{
	struct fs_sbuf b = {0};

	fs_sb_name(&b, s, NULL);
	printf("%-*s", width, b.data && !b.failed ? b.data : "?");
	fs_sb_fini(&b);
}

/* A stream a line, or a run of copies of one stream on consecutive ranks ("index", "count"). */
static void print_streams(const json_t *info)
{
	const json_t *streams = json_object_get(info, "streams"), *s;
	size_t i;

	printf("\nstreams:\n  %6s %6s %6s %12s %6s %8s %6s %s\n", "index", "rank", "thread",
	       "events", "blocks", "rules", "height", "shared");
	json_array_foreach(streams, i, s)
	{
		json_int_t same = jint(s, "same_as"), count = jint(s, "count");
		json_int_t index = json_object_get(s, "index") ? jint(s, "index") : (json_int_t)i;
		char shared[32] = "-", ranks[112] = "";

		if (same != index)
			snprintf(shared, sizeof(shared), "same as %" JSON_INTEGER_FORMAT, same);
		if (count > 1)
			snprintf(ranks, sizeof(ranks),
				 " (streams %" JSON_INTEGER_FORMAT "-%" JSON_INTEGER_FORMAT
				 ", ranks %" JSON_INTEGER_FORMAT "-%" JSON_INTEGER_FORMAT ")",
				 index, index + count - 1, jint(s, "rank"),
				 jint(s, "rank") + count - 1);
		printf("  %6" JSON_INTEGER_FORMAT " %6" JSON_INTEGER_FORMAT
		       " %6" JSON_INTEGER_FORMAT
		       " %12" JSON_INTEGER_FORMAT " %6" JSON_INTEGER_FORMAT
		       " %8" JSON_INTEGER_FORMAT " %6" JSON_INTEGER_FORMAT " %s%s\n",
		       index, jint(s, "rank"), jint(s, "thread"), jint(s, "events"),
		       jint(s, "blocks"), jint(s, "rules"), jint(s, "height"), shared, ranks);
	}
}

static void print_phases(const json_t *info)
{
	const json_t *phases = json_object_get(info, "phases"), *p;
	size_t i;

	if (json_array_size(phases) == 0)
		return;
	printf("\nphases:\n  %6s %6s %12s %12s %s\n", "rank", "thread", "first", "events",
	       "directory");
	json_array_foreach(phases, i, p)
	{
		json_int_t count = jint(p, "count");
		char ranks[64] = "";

		if (count > 1)
			snprintf(ranks, sizeof(ranks),
				 " (ranks %" JSON_INTEGER_FORMAT "-%" JSON_INTEGER_FORMAT ")",
				 jint(p, "rank"), jint(p, "rank") + count - 1);
		printf("  %6" JSON_INTEGER_FORMAT " %6" JSON_INTEGER_FORMAT
		       " %12" JSON_INTEGER_FORMAT " %12" JSON_INTEGER_FORMAT " ",
		       jint(p, "rank"), jint(p, "thread"), jint(p, "first_event"),
		       jint(p, "events"));
		print_name(jstr(p, "dir"), 0);
		printf("%s\n", ranks);
	}
}

static void print_sections(const json_t *info)
{
	const json_t *sections = json_object_get(info, "sections"), *s;
	size_t i;

	printf("\nsections:\n  %6s %-8s %-5s %12s %12s %12s\n", "index", "type", "codec", "offset",
	       "stored", "raw");
	json_array_foreach(sections, i, s)
	{
		printf("  %6zu %-8s %-5s %12" JSON_INTEGER_FORMAT " %12" JSON_INTEGER_FORMAT
		       " %12" JSON_INTEGER_FORMAT "\n",
		       i, jstr(s, "type"), jstr(s, "codec"), jint(s, "offset"),
		       jint(s, "stored_bytes"), jint(s, "raw_bytes"));
	}
}

/*
 * One metadata line, `key value`: numbers as info --json has them (vgen.c turns pid,
 * backtrace_depth... into integers), a string as every text file prints a name, so that a
 * value of several lines (thread_names) stays on its key's line.
 */
static void print_meta(const char *key, const json_t *v)
{
	print_name(key, 17);
	putchar(' ');
	if (json_is_integer(v))
		printf("%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (json_is_string(v))
		print_name(json_string_value(v), 0);
	putchar('\n');
}

static void print_info(const char *path, const json_t *info)
{
	const json_t *timing = json_object_get(info, "timing"),
		     *meta = json_object_get(info, "meta");
	const json_t *totals = json_object_get(info, "section_totals"), *v;
	const char *key;

	printf("trace:            ");
	print_name(path, 0);
	putchar('\n');
	printf("format:           %s\n", jstr(info, "format"));
	json_object_foreach((json_t *)meta, key, v)
	    print_meta(key, v);
	printf("timing:           %s", jstr(timing, "mode"));
	if (json_object_get(timing, "rel_err"))
		printf(" (relative error <= %g)",
		       json_real_value(json_object_get(timing, "rel_err")));
	printf("\nranks:            %" JSON_INTEGER_FORMAT "\n", jint(info, "n_ranks"));
	printf("streams:          %" JSON_INTEGER_FORMAT "\n", jint(info, "n_streams"));
	printf("phases:           %" JSON_INTEGER_FORMAT "\n", jint(info, "n_phases"));
	printf("kinds:            %" JSON_INTEGER_FORMAT "\n", jint(info, "n_kinds"));
	printf("call signatures:  %" JSON_INTEGER_FORMAT "\n", jint(info, "n_terminals"));
	printf("events:           %" JSON_INTEGER_FORMAT "\n", jint(info, "events"));
	printf("file bytes:       %" JSON_INTEGER_FORMAT "\n", jint(info, "file_bytes"));
	printf("text bytes:       %" JSON_INTEGER_FORMAT " (all trace.txt views)\n",
	       jint(info, "text_bytes"));
	printf("bytes/event:      %.4f\n",
	       json_real_value(json_object_get(info, "bytes_per_event")));
	printf("ratio:            %.1f (text bytes / file bytes)\n",
	       json_real_value(json_object_get(info, "compression_ratio")));
	printf("section totals:  ");
	json_object_foreach((json_t *)totals, key, v)
	    printf(" %s %" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT, key,
		   jint(v, "stored_bytes"), jint(v, "raw_bytes"));
	printf(" (stored/raw bytes)\n");
	print_streams(info);
	print_phases(info);
	print_sections(info);
}

static int cmd_info(int argc, char **argv)
{
	static const struct option opts[] = {{"json", no_argument, NULL, 'j'}, {0}};
	struct tfs_trace *t;
	bool as_json = false;
	json_t *info;
	int c, rc;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 'j')
			return usage_error("info", "unknown option %s", argv[optind - 1]);
		as_json = true;
	}
	if (argc - optind != 1)
		return usage_error("info", "needs exactly one TRACE");
	rc = fs_trace_open(argv[optind], &t);
	if (rc)
		return rc;
	info = fs_info_json_new(t, !as_json);
	if (!info) {
		fs_fail("cannot describe %s: out of memory", argv[optind]);
		tfs_trace_close(t);
		return EXIT_RUNTIME;
	}
	if (as_json) {
		json_dumpf(info, stdout,
			   JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
		putchar('\n');
	} else {
		print_info(argv[optind], info);
	}
	json_decref(info);
	tfs_trace_close(t);
	return finish_stdout();
}

/* ---- ls, cat ---- */

/* Open the trace and its tree, and resolve @path. */
static int open_tree(const char *trace, const char *path, struct tfs_trace **t,
		     struct fs_vtree **vt, uint64_t *ino)
{
	char buf[256];
	int rc;

	rc = fs_trace_open(trace, t);
	if (rc)
		return rc;
	rc = fs_vtree_new(*t, base_name(trace), vt);
	if (rc < 0) {
		fs_fail("cannot list %s: %s", trace, detail(rc, NULL, buf, sizeof(buf)));
		goto err_close_trace;
	}
	rc = fs_vtree_resolve(*vt, path, ino);
	if (rc < 0) {
		fs_fail("cannot find %s in %s: %s", path, trace, errstr(-rc, buf, sizeof(buf)));
		goto err_free_tree;
	}
	return 0;

err_free_tree:
	fs_vtree_free(*vt);
err_close_trace:
	tfs_trace_close(*t);
	return EXIT_RUNTIME;
}

/*
 * What node @ino (@path) is: its size may need decoding (a summary), which a corrupt trace
 * fails. @return 0 or an exit status, said on stderr
 */
/* fs_vtree_stat() of @ino, or fs_vtree_attr() for an entry of a listing (@entry). */
static int stat_node(const struct fs_vtree *vt, uint64_t ino, const char *path, bool entry,
		     struct fs_node_info *info)
{
	char buf[256];
	int rc = entry ? fs_vtree_attr(vt, ino, info) : fs_vtree_stat(vt, ino, info);

	if (rc == 0)
		return 0;
	fs_fail("cannot stat %s: %s%s", path, errstr(-rc, buf, sizeof(buf)),
		rc == -TFS_ECORRUPT ? " (the trace is corrupt: `tracefs verify` says where)" : "");
	return EXIT_RUNTIME;
}

static void print_entry(const struct fs_node_info *n, const char *name)
{
	printf("%c %14" PRIu64 " %s\n", n->is_dir ? 'd' : 'f', n->size, name);
}

static int cmd_ls(int argc, char **argv)
{
	struct fs_node_info dir, n;
	struct tfs_trace *t;
	struct fs_vtree *vt;
	uint64_t ino;
	int rc;

	if (argc < 2 || argc > 3 || argv[1][0] == '-')
		return usage_error("ls", "needs TRACE and an optional PATH");
	rc = open_tree(argv[1], argc == 3 ? argv[2] : "", &t, &vt, &ino);
	if (rc)
		return rc;
	rc = stat_node(vt, ino, argc == 3 ? argv[2] : "", false, &dir);
	if (rc == 0 && !dir.is_dir)
		print_entry(&dir, argv[2]);
	for (uint32_t i = 0; rc == 0 && dir.is_dir && i < dir.n_children; i++) {
		uint64_t child;
		const char *name;
		bool is_dir;

		rc = fs_vtree_child(vt, ino, i, &child);
		if (rc == 0)
			rc = fs_vtree_peek(vt, child, &name, &is_dir);
		if (rc) {
			/* an entry made at its listing (a window) reads the trace */
			char msg[256];

			fs_fail("cannot list %s: entry %" PRIu32 ": %s%s", argc == 3 ? argv[2] : "/", i,
				errstr(-rc, msg, sizeof(msg)),
				rc == -TFS_ECORRUPT || rc == -EBADMSG
				    ? " (the trace is corrupt: `tracefs verify` says where)"
				    : "");
			rc = EXIT_RUNTIME;
		} else {
			char path[4096];

			snprintf(path, sizeof(path), "%s%s%s", argc == 3 ? argv[2] : "",
				 argc == 3 && *argv[2] ? "/" : "", name);
			if ((rc = stat_node(vt, child, path, true, &n)) == 0)
				print_entry(&n, n.name);
		}
	}
	fs_vtree_free(vt);
	tfs_trace_close(t);
	return rc ? rc : finish_stdout();
}

/* Write all of @n iovecs; false with errno set on failure. */
static bool writev_all(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t got = writev(fd, iov, n);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return false;
		while (n > 0 && (size_t)got >= iov->iov_len) {
			got -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + got;
			iov->iov_len -= (size_t)got;
		}
	}
	return true;
}

/*
 * Bytes of @f from @off into @iov: decoded ahead by the pool's workers (*@sp pinned, put it
 * back), or read here into @buf. @return bytes, 0 at the end, or a negative error
 */
static ssize_t cat_next(struct fs_vfile *f, struct fs_ahead *a, char *buf, uint64_t off,
			struct iovec *iov, int *n_iov, struct fs_span *sp)
{
	ssize_t n = 0;

	sp->n = 0;
	if (a && fs_ahead_get(a, off, CAT_CHUNK, sp)) {
		for (int i = 0; i < sp->n; i++) {
			iov[i] = sp->iov[i];
			n += (ssize_t)sp->iov[i].iov_len;
		}
		*n_iov = sp->n;
		return n;
	}
	n = fs_vfile_read(f, buf, CAT_CHUNK, off);
	iov[0] = (struct iovec){buf, n > 0 ? (size_t)n : 0};
	*n_iov = 1;
	return n;
}

/*
 * Copy file @ino of @vt (a tree of @t) to stdout in CAT_CHUNK reads, decoded ahead on
 * @pool's workers when there is one, as the mount does for sequential readers.
 * @return exit status
 */
static int cat_file(struct tfs_trace *t, struct fs_vtree *vt, uint64_t ino, const char *path,
		    struct fs_ahead_pool *pool)
{
	struct iovec iov[FS_SPAN_MAX];
	struct fs_ahead *a = NULL;
	struct fs_span sp;
	struct fs_vfile *f;
	char msg[256];
	uint64_t off = 0;
	char *buf;
	int rc, n_iov, status = EXIT_RUNTIME;

	rc = fs_vfile_open(vt, ino, &f);
	if (rc < 0) {
		fs_fail("cannot cat %s: %s", path, errstr(-rc, msg, sizeof(msg)));
		return EXIT_RUNTIME;
	}
	buf = malloc(CAT_CHUNK);
	if (!buf) {
		fs_fail("cannot cat %s: out of memory", path);
		goto out_close;
	}
	/* without it every byte is decoded here, as before */
	if (pool && fs_ahead_new(pool, t, vt, ino, &a) == 0)
		fs_ahead_start(a, 0);
	for (;;) {
		ssize_t n = cat_next(f, a, buf, off, iov, &n_iov, &sp);
		bool wrote;

		if (n < 0) {
			fs_fail("cannot read %s: %s", path,
			     detail((int)n, fs_vfile_diag(f), msg, sizeof(msg)));
			goto out_free_ahead;
		}
		if (n == 0)
			break;
		wrote = writev_all(STDOUT_FILENO, iov, n_iov);
		if (a)
			fs_ahead_put(a, &sp);
		if (!wrote) {
			if (errno == EPIPE)
				status = 0;
			else
				fs_fail("cannot write to stdout: %s", errstr(errno, msg, sizeof(msg)));
			goto out_free_ahead;
		}
		off += (uint64_t)n;
	}
	if (off != fs_vfile_size(f)) {
		fs_fail("cannot read %s: offset=%" PRIu64 ": file ends before its size %" PRIu64, path,
		     off, fs_vfile_size(f));
		goto out_free_ahead;
	}
	status = 0;
out_free_ahead:
	fs_ahead_free(a);
	free(buf);
out_close:
	fs_vfile_close(f);
	return status;
}

static int cmd_cat(int argc, char **argv)
{
	struct fs_node_info n;
	struct tfs_trace *t;
	struct fs_vtree *vt;
	uint64_t ino;
	int rc;

	if (argc != 3 || argv[1][0] == '-')
		return usage_error("cat", "needs TRACE and PATH");
	rc = open_tree(argv[1], argv[2], &t, &vt, &ino);
	if (rc)
		return rc;
	rc = stat_node(vt, ino, argv[2], false, &n);
	if (rc) {
		/* said */
	} else if (n.is_dir) {
		fs_fail("cannot cat %s: is a directory", argv[2]);
		rc = EXIT_RUNTIME;
	} else {
		struct fs_ahead_pool *pool = NULL;

		/* no workers (or none startable): cat decodes everything itself */
		if (n.size >= 2 * FS_AHEAD_CHUNK)
			fs_ahead_pool_new(fs_ahead_default_workers(), FS_AHEAD_BUDGET,
					  FS_AHEAD_CHUNK, &pool);
		rc = cat_file(t, vt, ino, argv[2], pool);
		fs_ahead_pool_free(pool);
	}
	fs_vtree_free(vt);
	tfs_trace_close(t);
	return rc;
}

/* ---- verify ---- */

static int cmd_verify(int argc, char **argv)
{
	struct tfs_diag diag = {0};
	struct tfs_trace_info ti;
	struct tfs_trace *t;
	char buf[256];
	int rc;

	if (argc != 2 || argv[1][0] == '-')
		return usage_error("verify", "needs exactly one TRACE");
	rc = fs_trace_open(argv[1], &t);
	if (rc)
		return rc;
	rc = tfs_trace_verify(t, &diag);
	if (rc < 0) {
		fs_fail("%s is corrupt: %s", argv[1], detail(rc, &diag, buf, sizeof(buf)));
		tfs_trace_close(t);
		return EXIT_RUNTIME;
	}
	tfs_trace_get_info(t, &ti);
	printf("ok: %" PRIu64 " events in %" PRIu32 " streams\n", ti.n_events, ti.n_streams);
	tfs_trace_close(t);
	return finish_stdout();
}

/* ---- the commands: one declaration each ---- */

/** An option as the help lists it: its spellings ("-o FILE, --output=FILE") and meaning. */
struct cmd_opt {
	const char *flags;
	const char *help;
};

/**
 * A command: what runs it and everything its help and the global usage say of it. An
 * option's flags also tell the help scan which options take a value (a metavariable after
 * a space or '='), so `tracefs record -o x -- prog -h` leaves prog's -h alone.
 */
struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *synopsis; /* after "tracefs " */
	const char *brief;    /* one sentence, for the global usage */
	const char *help;     /* what it does, for its own --help */
	const struct cmd_opt *opts;
	const char *examples; /* lines, each a shell command */
	bool runs_command;    /* operands after the options are a program and its arguments */
	const char *exit_status; /* its own meaning of the exit status, or NULL: the usual */
	bool shows_tree;	 /* its --help draws the virtual tree */
};

static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv);

static const struct cmd_opt info_opts[] = {
	{"--json", "the facts as one JSON object (the same object as info.json in the tree)"},
	{0},
};

static const struct cmd_opt mount_opts[] = {
	{"-f", "stay in the foreground (default: return once the mount is ready)"},
	{"-o OPTIONS", "mount options, comma separated: uid=N and gid=N (the files' owner; "
		       "default: the mounting user), nonempty (mount over a directory that holds "
		       "files, hiding them; refused otherwise), and FUSE's own (e.g. allow_other)"},
	{0},
};

static const struct cmd_opt record_opts[] = {
	{"-o FILE, --output=FILE", "where to write the trace (default: COMMAND.trace; under an "
				   "MPI launcher FILE is the job's merged trace)"},
	{"--timing=MODE", "lossless (the default), none, or lossy:ERR (relative error ERR, "
			  "2^-10 <= ERR < 1); a timed MODE may end in ,fast: timing columns kept "
			  "out of the range coder (larger, faster to read)"},
	{"--trace=WHAT", "what to record: all, or a list of zones, mem, alloc, io, threads, "
			 "mpi, nested (default: all but mpi and nested; mpi under an MPI "
			 "launcher)"},
	{"--spool-size=MIB", "the most each process's spool may grow to (default 64)"},
	{"--when-full=POLICY", "wait (the default: the program waits for the recorder, nothing "
			       "is lost) or drop (events are dropped and counted)"},
	{"--backtrace-depth=N", "frames of an allocation's backtrace (default 64, 0: none)"},
	{"--sample=N", "unwind only one allocation in N per thread (the others: stack -1)"},
	{"--sample-bytes=N", "unwind one allocation per N bytes a thread allocates"},
	{"--clock=CLOCK", "tsc (the time-stamp counter, where invariant: 4-5 ns less per event; "
			  "the default where the kernel keeps time with it) or monotonic "
			  "(clock_gettime)"},
	{0},
};

static const struct cmd_opt compare_opts[] = {
	{"--values", "also the values that vary per call (addresses and times excepted)"},
	{"--paths", "also the file names"},
	{"--stacks", "also the backtrace ids"},
	{"--buffers", "also the buffers"},
	{"--formats", "also the format strings (of printf, scanf)"},
	{0},
};

static const struct cmd_opt merge_opts[] = {
	{"-o OUT, --output=OUT", "the merged trace (required)"},
	{0},
};

static const struct cmd_opt grep_opts[] = {
	{"-c", "print the number of selected lines only"},
	{"-n", "put each selected line's number and ':' before it"},
	{"-m N", "stop after N selected lines"},
	{"-F", "PATTERN is fixed text (default: a basic regular expression)"},
	{"-E", "PATTERN is an extended regular expression"},
	{0},
};

static const struct command commands[] = {
	{
		.name = "info",
		.run = cmd_info,
		.synopsis = "info [--json] TRACE",
		.brief = "what the trace holds: format, timing, ranks, streams, phases, sections, sizes and "
			"compression ratio",
		.help = "Prints what TRACE holds: its format, metadata, timing, ranks, streams (events, "
			"blocks, rules, grammar height, shared data), phases and sections (stored and raw "
			"bytes), bytes per event and the compression ratio against the text views.",
		.opts = info_opts,
		.examples = "tracefs info run.trace\ntracefs info --json run.trace | jq .meta",
	},
	{
		.name = "ls",
		.run = cmd_ls,
		.synopsis = "ls TRACE [PATH]",
		.brief = "list a directory of the trace's virtual tree",
		.help = "Lists directory PATH (default: the root) of TRACE's virtual tree, one entry per line: "
			"type (d or f), exact size in bytes, name. The tree is the one `tracefs mount` serves.",
		.examples = "tracefs ls run.trace\ntracefs ls run.trace ranks/0",
	},
	{
		.name = "cat",
		.run = cmd_cat,
		.synopsis = "cat TRACE PATH",
		.brief = "write a file of the virtual tree to stdout",
		.help = "Writes file PATH of TRACE's virtual tree to stdout: byte for byte what the mounted "
			"file holds.",
		.examples = "tracefs cat run.trace README.txt\ntracefs cat run.trace ranks/0/trace.txt | less\n"
			"tracefs cat run.trace ranks/0/summary.txt",
	},
	{
		.name = "verify",
		.run = cmd_verify,
		.synopsis = "verify TRACE",
		.brief = "check every checksum and decode every event once",
		.help = "Checks every checksum of TRACE and decodes every event once; says where a corrupt "
			"trace is damaged (section and byte offset).",
		.examples = "tracefs verify run.trace",
	},
	{
		.name = "mount",
		.run = fs_cmd_mount,
		.synopsis = "mount [-f] [-o OPTIONS] TRACE MOUNTPOINT",
		.brief = "serve the virtual tree as a read-only file system",
		.help = "Serves TRACE's virtual tree at MOUNTPOINT through FUSE, read-only; returns once the "
			"mount is usable. Every file has its exact size from the first stat; reads decode only "
			"the events under them. Unmount with `tracefs umount MOUNTPOINT`.",
		.opts = mount_opts,
		.examples = "tracefs mount run.trace /tmp/run\nls /tmp/run/ranks/0\n"
			"tracefs umount /tmp/run",
		.shows_tree = true,
	},
	{
		.name = "umount",
		.run = fs_cmd_umount,
		.synopsis = "umount MOUNTPOINT",
		.brief = "unmount a tracefs mount",
		.help = "Unmounts MOUNTPOINT if tracefs mounted it (never another file system).",
		.examples = "tracefs umount /tmp/run",
	},
	{
		.name = "record",
		.run = fs_cmd_record,
		.synopsis = "record [OPTIONS] [--] COMMAND [ARGS...]",
		.brief = "run COMMAND with the capture library preloaded and write its trace",
		.help = "Runs COMMAND with the capture library preloaded and writes its trace, a rank per "
			"process it forks or spawns; exits with COMMAND's status, or dies of the signal that "
			"killed it, once every process it started has ended (an interrupt stops the wait "
			"for one left running, a daemon, and saves the trace). Allocations carry "
			"backtraces, symbolised into the trace. Each process's "
			"spool grows up to --spool-size; when it is full the program waits for the recorder "
			"or drops events (--when-full). Under an MPI launcher (mpiexec -n N tracefs record "
			"...) it also preloads the MPI wrappers, and the ranks merge into one trace at "
			"MPI_Finalize.",
		.opts = record_opts,
		.examples = "tracefs record -o ls.trace -- ls -l\n"
			"tracefs record --timing=lossy:0.1 --trace=io -- ./app input.dat\n"
			"mpiexec -n 4 tracefs record -o run.trace -- ./mpi_app",
		.runs_command = true,
	},
	{
		.name = "merge",
		.run = fs_cmd_merge,
		.synopsis = "merge -o OUT TRACE...",
		.brief = "put traces side by side as ranks of one",
		.help = "Writes one trace whose ranks are the TRACEs' ranks one after the other: equal content "
			"is stored once, rank arguments stay absolute, metadata that differs is kept as "
			"KEY.rankR.",
		.opts = merge_opts,
		.examples = "tracefs merge -o both.trace a.trace b.trace",
	},
	{
		.name = "compare",
		.run = fs_cmd_compare,
		.synopsis = "compare [--values] [--paths] [--stacks] [--buffers] [--formats] A B",
		.brief = "whether two traces make the same calls, rank by rank",
		.help = "Says, rank by rank, whether traces A and B make the same calls: the same call "
			"signatures in the same order (file names, backtrace ids, buffers and format "
			"strings only with --paths, --stacks, --buffers, --formats; the values that vary "
			"per call only with --values). "
			"Names the first differing event of each thread and both calls; exits 0 only "
			"when they match, 1 when they differ.",
		.opts = compare_opts,
		.examples = "tracefs compare a.trace b.trace\ntracefs compare --values --paths a.trace "
			"b.trace",
	},
	{
		.name = "grep",
		.run = fs_cmd_grep,
		.synopsis = "grep [-c] [-n] [-m N] [-F|-E] PATTERN TRACE PATH",
		.brief = "what GNU grep prints for a file of the virtual tree, from the call "
			"signatures where it can",
		.help = "Prints what `tracefs cat TRACE PATH | LC_ALL=C grep OPTIONS PATTERN` prints. "
			"Over a trace.txt, each call signature is tested once against the pattern (fixed "
			"text or an expression): signatures that cannot match are skipped, those whose "
			"constant text matches are counted from the grammar with -c, and only the "
			"events of the signatures that may match are rendered, in file order. Anything "
			"else reads the file and tests every line.",
		.opts = grep_opts,
		.examples = "tracefs grep -c MPI_Allreduce run.trace ranks/7/trace.txt\n"
			"tracefs grep -n -m 5 -F '</etc/passwd>' run.trace ranks/0/trace.txt",
		.exit_status = "as grep's: 0 a line selected, 1 none, 2 usage or runtime error",
	},
	{
		.name = "help",
		.run = cmd_help,
		.synopsis = "help [COMMAND]",
		.brief = "this text, or a command's help",
		.help = "Prints the list of commands and the tree of a trace, or COMMAND's help (the same as "
			"`tracefs COMMAND --help`).",
		.examples = "tracefs help\ntracefs help record",
	},
	{
		.name = "--version",
		.run = cmd_version,
		.synopsis = "--version",
		.brief = "the tracefs and format versions",
		.help = "Prints the versions of tracefs and of the trace format it writes.",
		.examples = "tracefs --version",
	},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < N_COMMANDS; i++) {
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	}
	return NULL;
}

/* Write @text wrapped at 92 columns, lines after the first indented by @indent. */
static void put_wrapped(const char *text, size_t col, size_t indent)
{
	struct fs_sbuf b = {0};

	fs_sb_wrap(&b, text, col, indent);
	if (b.data)
		fputs(b.data, stdout);
	fs_sb_fini(&b);
}

static void put_option(const char *flags, const char *help)
{
	size_t col = 2 + strlen(flags);

	printf("  %s%*s", flags, col < 26 ? (int)(26 - col) : 1, "");
	put_wrapped(help, col < 26 ? 26 : col + 1, 26);
}

/* The virtual tree, from the declaration it is built from (vlayout.c). */
static void put_layout(void)
{
	char *text;
	size_t len;

	if (fs_vtree_layout_text(&text, &len) == 0) {
		fwrite(text, 1, len, stdout);
		free(text);
	}
}

static int command_help(const struct command *c)
{
	const char *ex = c->examples;

	printf("usage: tracefs %s\n\n", c->synopsis);
	put_wrapped(c->help, 0, 0);
	printf("\noptions:\n");
	for (const struct cmd_opt *o = c->opts; o && o->flags; o++)
		put_option(o->flags, o->help);
	put_option("-h, --help", "this text");
	printf("\nexamples:\n");
	while (ex && *ex) {
		size_t n = strcspn(ex, "\n");

		printf("  %.*s\n", (int)n, ex);
		ex += n + (ex[n] == '\n');
	}
	if (c->shows_tree) {
		printf("\nthe virtual tree (README.txt in it says what each file holds):\n");
		put_layout();
	}
	if (c->exit_status)
		printf("\nexit status: %s\n", c->exit_status);
	else
		printf("\nexit status: 0 ok, 1 runtime error, 2 usage error%s\n",
		       c->runs_command ? "; 126 COMMAND cannot run, 127 not found; otherwise COMMAND's"
				       : "");
	return finish_stdout();
}

static int global_help(void)
{
	printf("usage: tracefs <command> [options] [arguments]\n\ncommands:\n");
	for (size_t i = 0; i < N_COMMANDS; i++) {
		const struct command *c = &commands[i];
		size_t col = 2 + strlen(c->synopsis);

		if (col > 40) {
			printf("  %s\n%*s", c->synopsis, 40, "");
			col = 40;
		} else {
			printf("  %s%*s", c->synopsis, (int)(40 - col), "");
			col = 40;
		}
		put_wrapped(c->brief, col, 40);
	}
	printf("\n`tracefs <command> --help` describes a command, its options and examples.\n\n"
	       "The virtual tree of a trace (README.txt in it says what each file holds):\n");
	put_layout();
	printf("\nexit status: 0 ok, 1 runtime error (bad or corrupt trace, missing path), 2 "
	       "usage error\n");
	return finish_stdout();
}

static int cmd_help(int argc, char **argv)
{
	const struct command *c;

	if (argc < 2)
		return global_help();
	c = find_command(argv[1]);
	if (!c || argc > 2)
		return usage_error("help", "unknown command %s", argv[1]);
	return command_help(c);
}

static int cmd_version(int argc, char **argv)
{
	if (argc > 1)
		return usage_error("--version", "takes no arguments");
	printf("tracefs %s (trace format %d.%d)\n", tfs_version(), TFS_FORMAT_MAJOR,
	       TFS_FORMAT_MINOR);
	return finish_stdout();
}

/* Whether option spelling @flags (as the help lists it) takes a value. */
static bool takes_value(const struct command *c, const char *arg)
{
	size_t n = strcspn(arg, "=");

	if (arg[n] == '=')
		return false; /* --opt=value: the value is in the argument */
	for (const struct cmd_opt *o = c->opts; o && o->flags; o++) {
		const char *f = o->flags;

		while ((f = strstr(f, arg)) != NULL) {
			char next = f[n];

			if ((f == o->flags || f[-1] == ' ') && (next == ' ' || next == '='))
				return true;
			f += n;
		}
	}
	return false;
}

/* Whether the arguments of @c ask for its help: -h or --help among its options. */
static bool wants_help(const struct command *c, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--"))
			return false;
		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			return true;
		if (a[0] != '-' && c->runs_command)
			return false; /* the program to run: its arguments are its own */
		if (a[0] == '-' && takes_value(c, a))
			i++;
	}
	return false;
}

int main(int argc, char **argv)
{
	const struct command *c;

	/* a closed pipe shows up as EPIPE on write and ends output quietly */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2)
		return usage_error(NULL, "missing command");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return global_help();
	c = find_command(argv[1]);
	if (!c)
		return usage_error(NULL, "unknown command %s", argv[1]);
	if (wants_help(c, argc - 1, argv + 1))
		return command_help(c);
	return c->run(argc - 1, argv + 1);
}
