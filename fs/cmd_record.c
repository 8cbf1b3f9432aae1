/*
 * `tracefs record [options] -- command [args...]`: runs a program with libtfscapture
 * preloaded and attached to a spool this process creates, consumes the spool while the
 * program runs, and after it ends however it ends (exit, abort, a fatal signal, _exit,
 * SIGKILL) takes in what is left and saves one trace. Prints one summary line on stderr and
 * exits with the program's status, or dies of the signal that killed it. --trace selects
 * the categories (tfs_recording_parse_trace's words; all by default); --backtrace-depth the
 * frames kept of each allocation's backtrace (64 by default, 0: none); --sample=N and
 * --sample-bytes=N keep the backtrace of one allocation in N, or one per N bytes;
 * --when-full what a thread does when the spool (which grows up to --spool-size) is full:
 * wait for this recorder to free a chunk (the default, bounded: tfs/capture.h) or drop. Run
 * by an MPI launcher (`mpiexec -n P tracefs record -o run.trace -- ./app`, seen from
 * PMI_RANK/PMI_SIZE or OMPI_COMM_WORLD_RANK/SIZE) it also preloads the PMPI wrappers of that
 * launcher's MPI (libtfsmpi.so for MPICH, libtfsmpi-ompi.so for Open MPI): at MPI_Finalize
 * each rank's wrapper asks for its trace so far (tfs/recording.h), the ranks merge them and
 * rank 0 writes <out>; a rank that never reaches MPI_Finalize saves its own trace as
 * <out>.<rank>, through a saver that outlives the launcher's kill of the job. Each rank's
 * <out>.<rank> is reserved (tfs/writer.h tfs_file_reserve()) before its program starts, so
 * before the job can end: once the launcher returns, every rank of a failed job has its file
 * in place, and a reader (`tracefs merge run.trace.*`) waits for those still being saved. A
 * rank whose trace MPI_Finalize took removes its reservation. This file does the command
 * line and process control only; the recording (its spools and their consumers) is
 * capture/'s, through tfs/recording.h.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tfs/capture.h"
#include "tfs/reader.h"
#include "tfs/recording.h"
#include "tfs/writer.h"
#include "cli_i.h"
#include "record_i.h"

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2
#define IDLE_POLL_NS 2000000 /* consumer poll period while nothing was handed over */

#ifndef TFS_LIBDIR
#define TFS_LIBDIR "/usr/local/lib"
#endif

struct record_opts {
	const char *out;
	struct tfs_recording_timing timing;
	uint32_t mask;
	size_t spool_bytes;
	uint32_t bt_depth;
	struct tfs_recording_policy policy;
	char **argv; /* the command */
	long mpi_rank, mpi_size; /* from the MPI launcher's environment; size 0: not MPI */
	const char *mpi_impl;	 /* the launcher's MPI: "mpich", "openmpi" (metadata mpi_impl) */
	const char *mpi_out;	 /* the merged trace rank 0 writes at MPI_Finalize */
	const char *clock;	 /* --clock: TFS_CLOCK for the program, NULL: as it is */
};

static pid_t g_child;
/* signals to stop that reached us (counted by the handlers): once the program has ended,
   one means stop waiting for the processes it left running (run_consumer()) */
static volatile sig_atomic_t g_stops;

static int usage(const char *what)
{
	fs_usage("record", "%s", what);
	return EXIT_USAGE;
}

static int parse_args(int argc, char **argv, struct record_opts *o)
{
	static const struct option lo[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"timing", required_argument, NULL, 't'},
	    {"trace", required_argument, NULL, 'T'},
	    {"spool-size", required_argument, NULL, 's'},
	    {"backtrace-depth", required_argument, NULL, 'b'},
	    {"when-full", required_argument, NULL, 'w'},
	    {"sample", required_argument, NULL, 'n'},
	    {"sample-bytes", required_argument, NULL, 'B'},
	    {"clock", required_argument, NULL, 'c'},
	    {0},
	};
	char *end;
	long mb;
	int c;

	*o = (struct record_opts){.mask = TFS_TRACE_ON | TFS_TRACE_ZONES | TFS_TRACE_MEM |
					  TFS_TRACE_ALLOC | TFS_TRACE_IO | TFS_TRACE_THREADS,
				  .timing = {.timing = TFS_TIMING_LOSSLESS},
				  .spool_bytes = (size_t)TFS_RECORDING_SPOOL_MB_DEFAULT << 20,
				  .bt_depth = TFS_RECORDING_BT_DEPTH_DEFAULT};
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+o:", lo, NULL)) != -1) {
		switch (c) {
		case 'o':
			o->out = optarg;
			break;
		case 't':
			if (tfs_recording_parse_timing(optarg, &o->timing) < 0)
				return usage("--timing must be lossless, none or lossy:ERR "
					     "with 2^-10 <= ERR < 1, the timed ones optionally "
					     "followed by ,fast");
			break;
		case 'T':
			if (tfs_recording_parse_trace(optarg, &o->mask) < 0)
				return usage("--trace takes a list of zones, mem, alloc, io, threads, "
					     "mpi, nested, all");
			break;
		case 's':
			mb = strtol(optarg, &end, 10);
			if (*end || mb < 1 || mb > 65536)
				return usage("--spool-size takes MiB, 1 to 65536");
			o->spool_bytes = (size_t)mb << 20;
			break;
		case 'b':
			mb = strtol(optarg, &end, 10);
			if (*end || end == optarg || mb < 0 ||
			    mb > (long)TFS_RECORDING_BT_DEPTH_MAX)
				return usage("--backtrace-depth takes frames, 0 to 128");
			o->bt_depth = (uint32_t)mb;
			break;
		case 'w':
			if (tfs_recording_parse_when_full(optarg, &o->policy.when_full) < 0)
				return usage("--when-full takes wait or drop");
			break;
		case 'n':
		case 'B':
			if (o->policy.sample != TFS_RECORDING_SAMPLE_ALL)
				return usage("--sample and --sample-bytes exclude each other");
			if (tfs_recording_parse_count(optarg, &o->policy.sample_every) < 0)
				return usage("--sample and --sample-bytes take a count from 1, "
					     "optionally followed by k, m or g");
			o->policy.sample = c == 'n' ? TFS_RECORDING_SAMPLE_CALLS
							 : TFS_RECORDING_SAMPLE_BYTES;
			break;
		case 'c':
			if (strcmp(optarg, "monotonic") && strcmp(optarg, "tsc"))
				return usage("--clock takes monotonic or tsc");
			o->clock = optarg;
			break;
		default:
			return usage("unknown option");
		}
	}
	if (optind >= argc)
		return usage("missing the command to run");
	o->argv = argv + optind;
	return 0;
}

/* Whether execve() may run @file: 0, -ENOENT (no such file) or -EACCES (not executable). */
static int runnable(const char *file)
{
	struct stat st;

	if (stat(file, &st) < 0)
		return -ENOENT;
	return S_ISREG(st.st_mode) && access(file, X_OK) == 0 ? 0 : -EACCES;
}

/*
 * The file execvp() would run for @cmd, in @buf. @return 0, -ENOENT (not found) or -EACCES
 * (found, but none of the files is an executable one: what execvp() would fail with)
 */
static int find_command(const char *cmd, char *buf, size_t cap)
{
	const char *path = getenv("PATH"), *p;
	int rc = -ENOENT;

	if (strchr(cmd, '/')) {
		snprintf(buf, cap, "%s", cmd);
		return runnable(buf);
	}
	for (p = path ? path : "/usr/bin:/bin"; p; p = strchr(p, ':') ? strchr(p, ':') + 1 : NULL) {
		size_t n = strcspn(p, ":");

		snprintf(buf, cap, "%.*s%s%s", (int)n, p, n ? "/" : "", cmd);
		switch (runnable(buf)) {
		case 0:
			return 0;
		case -EACCES:
			rc = -EACCES;
			break;
		}
	}
	return rc;
}

/* An ELF executable without PT_INTERP is statically linked: LD_PRELOAD cannot reach it. */
static bool is_static_elf(const char *file)
{
	unsigned char id[EI_NIDENT];
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	bool is_static = false;
	int fd = open(file, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (pread(fd, id, sizeof(id), 0) != sizeof(id) || memcmp(id, ELFMAG, SELFMAG) != 0 ||
	    id[EI_CLASS] != ELFCLASS64 || pread(fd, &eh, sizeof(eh), 0) != sizeof(eh))
		goto out;
	is_static = eh.e_type == ET_EXEC || eh.e_type == ET_DYN;
	for (uint32_t i = 0; i < eh.e_phnum && is_static; i++) {
		off_t off = (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize);

		if (pread(fd, &ph, sizeof(ph), off) != sizeof(ph))
			break;
		if (ph.p_type == PT_INTERP)
			is_static = false;
	}
out:
	close(fd);
	return is_static;
}

/* The MPI launchers known by the variables they give each process, and their wrappers. */
static const struct mpi_launcher {
	const char *rank_var, *size_var;
	const char *wrappers; /* the PMPI wrappers built against this launcher's MPI */
	const char *impl;     /* metadata mpi_impl: the special ranks' values depend on it */
} mpi_launchers[] = {
	/* MPICH's Hydra */
	{"PMI_RANK", "PMI_SIZE", "libtfsmpi.so", "mpich"},
	/* Open MPI's mpiexec */
	{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "libtfsmpi-ompi.so", "openmpi"},
};

/* The launcher that started this process and the rank and size it gave, or NULL. */
static const struct mpi_launcher *mpi_launch(long *rank, long *size)
{
	*rank = 0;
	*size = 0;
	for (size_t i = 0; i < sizeof(mpi_launchers) / sizeof(mpi_launchers[0]); i++) {
		const char *r = getenv(mpi_launchers[i].rank_var);
		const char *s = getenv(mpi_launchers[i].size_var);

		if (r && s && atol(s) > 0) {
			*rank = atol(r);
			*size = atol(s);
			return &mpi_launchers[i];
		}
	}
	return NULL;
}

/* The wrappers @name (of the launcher's MPI), next to libtfscapture.so @lib (installed) or in
 * mpi/ beside it (build); $TFS_MPI_LIB instead when set. */
static bool find_mpi_library(const char *lib, const char *name, char *buf, size_t cap)
{
	static const char *const rel[] = {"/mpi/", "/"};
	const char *env = getenv("TFS_MPI_LIB");
	const char *slash = strrchr(lib, '/');

	if (env && *env) {
		snprintf(buf, cap, "%s", env);
		return access(buf, R_OK) == 0;
	}
	for (size_t i = 0; slash && i < sizeof(rel) / sizeof(rel[0]); i++) {
		snprintf(buf, cap, "%.*s%s%s", (int)(slash - lib), lib, rel[i], name);
		if (access(buf, R_OK) == 0)
			return true;
	}
	return false;
}

/* libtfscapture.so: $TFS_CAPTURE_LIB, next to this build's tracefs, or installed. */
static bool find_library(char *buf, size_t cap)
{
	static const char *const rel[] = {"/../capture/libtfscapture.so", "/../lib/libtfscapture.so"};
	const char *env = getenv("TFS_CAPTURE_LIB");
	char exe[PATH_MAX], cand[PATH_MAX + 64];
	ssize_t n;

	if (env && *env) {
		snprintf(buf, cap, "%s", env);
		return access(buf, R_OK) == 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		*strrchr(exe, '/') = '\0';
		for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
			snprintf(cand, sizeof(cand), "%s%s", exe, rel[i]);
			if (access(cand, R_OK) == 0 && realpath(cand, exe)) {
				snprintf(buf, cap, "%s", exe);
				return true;
			}
		}
	}
	snprintf(buf, cap, "%s/libtfscapture.so", TFS_LIBDIR);
	return access(buf, R_OK) == 0;
}

static void set_preload(const char *lib)
{
	const char *old = getenv("LD_PRELOAD");
	char buf[16384];

	if (old && *old)
		snprintf(buf, sizeof(buf), "%s:%s", lib, old);
	else
		snprintf(buf, sizeof(buf), "%s", lib);
	setenv("LD_PRELOAD", buf, 1);
}

static void forward_signal(int sig)
{
	g_stops = g_stops + 1;
	if (g_child > 0)
		kill(g_child, sig);
}

/*
 * SIGINT and SIGQUIT: typed at the terminal (^C, ^\) they reach the program directly, as
 * it shares our foreground process group, and passing them on would deliver them twice;
 * sent to tracefs alone by kill() (timeout -s INT, a CI runner cancelling a job) they are
 * passed on, or the program would never hear of them.
 */
static void forward_sent_signal(int sig, siginfo_t *si, void *uctx)
{
	if (si->si_code == SI_USER || si->si_code == SI_QUEUE || si->si_code == SI_TKILL)
		forward_signal(sig);
	else
		g_stops = g_stops + 1;
}

static pid_t start_child(const struct record_opts *o, const char *lib, const char *spool)
{
	pid_t pid = fork();
	int err;

	if (pid != 0)
		return pid;
	signal(SIGINT, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	set_preload(lib);
	setenv("TFS_SPOOL", spool, 1);
	if (o->clock)
		setenv("TFS_CLOCK", o->clock, 1);
	/* run by a traced program: our recording's processes derive their spools from ours,
	   not from the first process of the recording that traces us */
	unsetenv("TFS_SPOOL_ROOT");
	execvp(o->argv[0], o->argv);
	err = errno;
	fs_fail("cannot run %s: %s", o->argv[0], fs_strerror(err));
	_exit(err == ENOENT ? 127 : 126); /* what shells, env and timeout exit with */
}

/*
 * How the consumer learns that processes ended. The recorder reaps them itself: it is
 * their subreaper, so once the program has ended and no child is left, every descendant
 * has ended. The MPI saver (start_saver) reads what the process reaping them says
 * (struct reap_msg on @fd), and once that process is gone without saying that all have
 * ended, asks /proc (tfs_recording_orphaned).
 */
struct ends {
	pid_t pid;	   /* the program */
	const char *argv0; /* its name, for messages */
	int fd;		   /* -1: reap here; else the reaper's messages (non-blocking) */
	int status;	   /* the program's wait status, once @have_status */
	bool have_status;
	bool done;	   /* every process has ended */
	bool orphaned;	   /* the reaper died first: /proc says when the processes end */
};

/* What the reaper tells the saver, in this order: the program started, each process it
 * reaped, and that all have ended. */
enum reap_kind {
	REAP_STARTED, /* the program is @pid */
	REAP_REAPED,  /* @pid was reaped with wait status @status */
	REAP_ENDED,   /* every process has ended */
};

struct reap_msg {
	int32_t kind; /* enum reap_kind */
	int32_t pid;
	int32_t status;
};

static void reaped(struct tfs_recording *r, struct ends *e, pid_t pid, int status)
{
	if (pid == e->pid) {
		e->status = status;
		e->have_status = true;
	}
	tfs_recording_reaped(r, pid, status);
}

/* Reap what has ended, or read what the reaper says; e->done once every process has. */
static void collect_ends(struct tfs_recording *r, struct ends *e)
{
	struct reap_msg m;
	ssize_t n;
	pid_t w;
	int st;

	if (e->fd < 0) {
		while ((w = waitpid(-1, &st, WNOHANG)) > 0 || (w < 0 && errno == EINTR))
			if (w > 0)
				reaped(r, e, w, st);
		/* nothing left to wait for (or the program never started) */
		e->done = w < 0 && errno == ECHILD;
		return;
	}
	if (e->orphaned) {
		e->done = tfs_recording_ended(r);
		return;
	}
	/* whole messages: each is written at once, smaller than PIPE_BUF */
	while ((n = read(e->fd, &m, sizeof(m))) == (ssize_t)sizeof(m)) {
		if (m.kind == REAP_ENDED) {
			e->done = true;
			return;
		}
		if (m.kind == REAP_REAPED)
			reaped(r, e, m.pid, m.status);
	}
	if (n == 0) {
		e->orphaned = true;
		tfs_recording_orphaned(r);
	}
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Consume while the program and every process it started run. Once the program has ended,
 * processes it left running (a daemon, a `setsid cmd &`) are waited for, and said to be after
 * LEFT_SAY_MS; a SIGINT, SIGTERM, SIGHUP or SIGQUIT then stops the wait: the trace is saved
 * with what they did so far, and they run on unrecorded (their spools marked finished, so
 * none waits for a recorder that is gone).
 */
#define LEFT_SAY_MS 1000
static void run_consumer(struct tfs_recording *r, struct ends *e, int *consume_err)
{
	const struct timespec idle = {0, IDLE_POLL_NS};
	sig_atomic_t stops_at_end = 0;
	uint64_t ended_ms = 0;
	bool said = false;

	while (!e->done) {
		int n = tfs_recording_poll(r);

		if (n < 0)
			*consume_err = n;
		collect_ends(r, e);
		if (e->done)
			break;
		if (e->have_status && !ended_ms) {
			ended_ms = mono_ms() | 1;
			stops_at_end = g_stops;
		}
		if (ended_ms && g_stops != stops_at_end) {
			fs_fail("stopped waiting for the processes %s left running: what they do "
				"from now on is not recorded", e->argv0);
			break;
		}
		if (ended_ms && !said && mono_ms() - ended_ms >= LEFT_SAY_MS) {
			fs_fail("%s has ended; waiting for the processes it left running, which are "
				"recorded too (interrupt to stop waiting and save the trace)", e->argv0);
			said = true;
		}
		if (n <= 0)
			nanosleep(&idle, NULL);
	}
}

/* Our exit status for a program that ended with wait status @status (when no signal). */
static int mirror_status(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return EXIT_RUNTIME;
}

/*
 * The program was killed by @sig: die of it too, so that whoever waits for us (a shell's
 * $?, Python's subprocess, make) sees a signal death as it would untraced. The signal is
 * restored to its default action and unblocked first; tracefs itself never dumps core (no
 * core limit, not dumpable: a core_pattern pipe ignores the limit), so the caller sees the
 * signal without the core flag even where the program dumped one. @return 128 + @sig, in
 * case the signal did not end us
 */
static int die_of(int sig)
{
	const struct rlimit no_core = {0, 0};
	sigset_t set;

	fflush(NULL);
	setrlimit(RLIMIT_CORE, &no_core);
	prctl(PR_SET_DUMPABLE, 0);
	signal(sig, SIG_DFL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	return 128 + sig;
}

/*
 * The command line recorded (metadata cmdline): @argv joined with spaces, whole. Its size is
 * bounded by the kernel's limit on an exec's arguments. @return it (free() it), NULL when
 * out of memory
 */
static char *join_args_dup(char *const *argv)
{
	size_t len = 1;
	char *s, *at;

	for (int i = 0; argv[i]; i++)
		len += strlen(argv[i]) + 1;
	s = malloc(len);
	if (!s)
		return NULL;
	at = s;
	*at = '\0';
	for (int i = 0; argv[i]; i++) {
		size_t n = strlen(argv[i]);

		if (i)
			*at++ = ' ';
		memcpy(at, argv[i], n + 1);
		at += n;
	}
	return s;
}

/*
 * The summary line. The trace's sizes are the whole file's; the recording's counts (@st:
 * threads, recovered events, drops, waits) are this recorder's processes'. Under an MPI
 * launcher (@mpi_size ranks) the file is the job's merged trace and @st rank 0's only, and
 * the line says which is which; or, @rank >= 0, the file is that rank's own (it never
 * reached MPI_Finalize), and so are the counts.
 */
static void summary(const char *out, const char *how, const struct tfs_recording_stats *st,
		    uint32_t n_procs, long mpi_size, long rank)
{
	struct tfs_trace_info ti = {0};
	struct tfs_trace *t;
	char rec[256], procs[48] = "", stalls[64] = "", waited[80] = "", job[64] = "";
	char part[96] = "", left[64] = "";
	char scope[32] = "";

	if (n_procs > 1)
		snprintf(procs, sizeof(procs), " in %" PRIu32 " processes (ranks)", n_procs);
	if (mpi_size > 0 && rank >= 0) {
		snprintf(job, sizeof(job), "rank %ld of the job's %ld: ", rank, mpi_size);
	} else if (mpi_size > 0) {
		snprintf(job, sizeof(job), "the job's %ld ranks: ", mpi_size);
		snprintf(scope, sizeof(scope), "rank 0: ");
	}
	if (tfs_trace_open(out, &t, NULL) == 0) {
		tfs_trace_get_info(t, &ti);
		tfs_trace_close(t);
	}
	/* chunks a process had not handed over when it ended (most shells and killed children
	   exit without flushing): recovered all the same, which the words must not hide */
	if (st->n_partial_chunks)
		snprintf(part, sizeof(part),
			 " (%" PRIu64 " of them from %" PRIu64 " chunk%s not handed over at exit)",
			 st->n_partial_events, st->n_partial_chunks,
			 st->n_partial_chunks == 1 ? "" : "s");
	if (st->open_zones || st->open_phases)
		snprintf(left, sizeof(left), ", %" PRIu32 " zone%s and %" PRIu32 " phase%s left open",
			 st->open_zones, st->open_zones == 1 ? "" : "s", st->open_phases,
			 st->open_phases == 1 ? "" : "s");
	snprintf(rec, sizeof(rec), "recovered all %" PRIu64 " events%s%s", st->n_events, part,
		 left);
	/* the back-pressure (tfs/capture.h): how long the program waited, whether waits gave up */
	if (st->n_stalls)
		snprintf(stalls, sizeof(stalls), ", %" PRIu32 " wait%s for a free chunk gave up",
			 st->n_stalls, st->n_stalls == 1 ? "" : "s");
	if (st->wait_ns >= 1000000u)
		snprintf(waited, sizeof(waited), "; threads waited %.3f s in all for the recorder",
			 (double)st->wait_ns / 1e9);
	fprintf(stderr,
		"tracefs: %s: %s%" PRIu64 " events, %" PRIu64 " bytes, %.3f bytes/event, "
		"ratio %.1f against the text (%" PRIu64 " bytes)%s%s%" PRIu32
		" threads%s; program %s; %s; %" PRIu64 " dropped%s%s\n",
		out, job, ti.n_events, ti.file_bytes,
		ti.n_events ? (double)ti.file_bytes / (double)ti.n_events : 0.0,
		ti.file_bytes ? (double)ti.text_bytes / (double)ti.file_bytes : 0.0, ti.text_bytes,
		scope[0] ? "; " : ", ", scope, st->n_threads, procs, how, rec,
		st->dropped_events, stalls, waited);
	if (st->bad_records)
		fs_fail("warning: %" PRIu64 " malformed or unmatched records skipped", st->bad_records);
}

/*
 * Every process has ended: save the trace, or say why there is none, and the summary line
 * (rank 0's only under MPI, one per job; every rank's with @say_all). @how: how the program
 * ended; @ok: it exited with status 0. @return 0 or -errno (a runtime error: no trace)
 */
static int conclude(struct tfs_recording *r, const struct record_opts *o, const char *out,
		    const char *how, bool ok, int consume_err, bool say_all)
{
	struct tfs_recording_stats st;
	uint32_t n;
	int rc;

	if (tfs_recording_served(r)) {
		/* the MPI wrappers took the trace at MPI_Finalize, merged and saved it */
		if (o->mpi_rank == 0 && ok && access(o->mpi_out, R_OK) == 0) {
			tfs_recording_stats(r, &st);
			summary(o->mpi_out, how, &st, 1, o->mpi_size, -1);
		}
		return 0;
	}
	if (consume_err) {
		fs_fail("cannot record %s: %s", o->argv[0], fs_strerror(-consume_err));
		return consume_err;
	}
	if (tfs_recording_nothing(r)) {
		fs_fail("nothing recorded: %s never loaded the capture library (TFS_CAPTURE=0, "
			"statically linked, or not run); program %s",
			o->argv[0], how);
		return 0;
	}
	rc = tfs_recording_save(r, out);
	if (rc < 0) {
		fs_fail("cannot save %s: %s", out, fs_strerror(-rc));
		return rc;
	}
	n = tfs_recording_stats(r, &st);
	if (o->mpi_rank == 0 || say_all) /* one line per job, not per rank */
		summary(out, how, &st, n, o->mpi_size, o->mpi_size > 0 ? o->mpi_rank : -1);
	return 0;
}

/*
 * The MPI saver, a process of its own session that the launcher's kill of the job does
 * not reach: it consumes the spools, learns of the processes' ends from the recorder
 * (@in), saves the trace and tells the recorder whether it did (@out_fd: one int, 0 or 1).
 * A recorder killed before the program's processes have all ended leaves it to learn of
 * them from /proc; it then saves what they recorded up to their end, and says so. It holds
 * @out's reservation (@saving) until then.
 * @return its exit status
 */
static int saver_main(struct tfs_recording *r, const struct record_opts *o, const char *out,
		      int saving, int in, int out_fd)
{
	struct ends e = {.fd = in};
	struct reap_msg m;
	int consume_err = 0, failed, nul;
	char how[96];
	ssize_t n;

	g_child = 0;
	signal(SIGINT, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGPIPE, SIG_IGN); /* the launcher's end of stderr may be gone: messages are lost */
	nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nul >= 0) {
		dup2(nul, STDIN_FILENO);
		dup2(nul, STDOUT_FILENO);
		close(nul);
	}
	while ((n = read(in, &m, sizeof(m))) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(m) || m.kind != REAP_STARTED) { /* the program never started */
		tfs_recording_free(r, true);
		tfs_file_release(saving, out);
		return 1;
	}
	e.pid = m.pid;
	fcntl(in, F_SETFL, fcntl(in, F_GETFL) | O_NONBLOCK);
	failed = tfs_recording_start(r, e.pid);
	if (failed < 0) {
		fs_fail("cannot record %s: %s", o->argv[0], fs_strerror(-failed));
	} else {
		run_consumer(r, &e, &consume_err);
		if (e.have_status)
			tfs_recording_describe_end(e.status, how, sizeof(how));
		else
			snprintf(how, sizeof(how), "%s", "unknown (its recorder was killed first)");
		failed = conclude(r, o, out, how,
				  e.have_status && WIFEXITED(e.status) && !WEXITSTATUS(e.status),
				  consume_err, e.orphaned);
	}
	tfs_recording_free(r, true);
	tfs_file_release(saving, out);
	failed = failed < 0;
	(void)!write(out_fd, &failed, sizeof(failed));
	return failed;
}

/*
 * Under an MPI launcher, hand the recording over to a saver (saver_main): a grandchild in a
 * session of its own, reparented away from this process, so that when the launcher kills
 * the job (MPICH's and Open MPI's mpiexec kill every rank's process group once one rank
 * ends without MPI_Finalize) every rank's trace is still saved. It inherits @saving, the
 * reservation of @out. *@to_saver, *@from_saver: the pipes to it and from it.
 * @return 0, or -errno (no saver: record here)
 */
static int start_saver(struct tfs_recording *r, const struct record_opts *o, const char *out,
		       int saving, int *to_saver, int *from_saver)
{
	int down[2], up[2], st, rc;
	pid_t x;

	if (pipe2(down, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(up, O_CLOEXEC) < 0) {
		rc = -errno;
		goto err_close_down;
	}
	x = fork();
	if (x < 0) {
		rc = -errno;
		goto err_close_up;
	}
	if (x == 0) {
		close(down[1]);
		close(up[0]);
		if (setsid() < 0 || (x = fork()) < 0)
			_exit(1);
		if (x > 0)
			_exit(0);
		_exit(saver_main(r, o, out, saving, down[0], up[1]));
	}
	close(down[0]);
	close(up[1]);
	if (waitpid(x, &st, 0) != x || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		close(down[1]);
		close(up[0]);
		return -ECHILD;
	}
	*to_saver = down[1];
	*from_saver = up[0];
	return 0;

err_close_up:
	close(up[0]);
	close(up[1]);
err_close_down:
	close(down[0]);
	close(down[1]);
	return rc;
}

/*
 * The recorder with a saver: tell it the program started, reap the program and every
 * process it leaves behind, tell the saver of each, and once all have ended wait until it
 * has saved the trace.
 * @return the program's wait status; *@saved: the saver saved it (or had nothing to save)
 */
static int reap_for_saver(int to_saver, int from_saver, bool *saved)
{
	struct reap_msg m = {REAP_STARTED, (int32_t)g_child, 0};
	int status = 0, st, failed = 1;
	ssize_t n;
	pid_t w;

	signal(SIGPIPE, SIG_IGN); /* a saver gone: the trace is lost, the program's status not */
	(void)!write(to_saver, &m, sizeof(m));
	while ((w = waitpid(-1, &st, 0)) > 0 || (w < 0 && errno == EINTR)) {
		if (w <= 0)
			continue;
		if (w == g_child)
			status = st;
		m = (struct reap_msg){REAP_REAPED, (int32_t)w, st};
		(void)!write(to_saver, &m, sizeof(m));
	}
	m = (struct reap_msg){REAP_ENDED, 0, 0};
	(void)!write(to_saver, &m, sizeof(m));
	close(to_saver);
	while ((n = read(from_saver, &failed, sizeof(failed))) < 0 && errno == EINTR)
		;
	close(from_saver);
	if (n != (ssize_t)sizeof(failed))
		fs_fail("the process saving the trace ended before it did");
	*saved = n == (ssize_t)sizeof(failed) && !failed;
	return status;
}

/*
 * Where recordings keep the names they find (tfs_recording_opts.symbol_dir):
 * $TRACEFS_SYMBOL_DIR ("" for nowhere), else $XDG_CACHE_HOME/tracefs/symbols, else
 * $HOME/.cache/tracefs/symbols; NULL without any of them.
 */
static const char *symbol_dir(char *buf, size_t size)
{
	const char *env = getenv("TRACEFS_SYMBOL_DIR"), *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	int n;

	if (env)
		return env;
	if (xdg && xdg[0] == '/')
		n = snprintf(buf, size, "%s/tracefs/symbols", xdg);
	else if (home && home[0] == '/')
		n = snprintf(buf, size, "%s/.cache/tracefs/symbols", home);
	else
		return NULL;
	return n > 0 && (size_t)n < size ? buf : NULL;
}

static int record_as(const struct record_opts *o, const char *lib, const char *out,
		     const char *cmdline)
{
	struct sigaction fwd = {.sa_handler = forward_signal},
			 sent = {.sa_sigaction = forward_sent_signal, .sa_flags = SA_SIGINFO | SA_RESTART};
	char size[32], how[96], sym_dir[PATH_MAX];
	const char *slash = strrchr(o->argv[0], '/');
	/* mpi_impl: the launcher's MPI, whose special ranks a replay proxy maps */
	const char *meta[] = {"mpi_size", size, o->mpi_impl ? "mpi_impl" : NULL, o->mpi_impl, NULL};
	const struct tfs_recording_opts ro = {
	    .timing = o->timing,
	    .mask = o->mask,
	    .spool_bytes = o->spool_bytes,
	    .bt_depth = o->bt_depth,
	    .policy = o->policy,
	    .program = slash ? slash + 1 : o->argv[0],
	    .cmdline = cmdline,
	    /* the rank is the trace's own: ranks/<r> */
	    .meta = o->mpi_size > 0 ? meta : NULL,
	    .mpi = o->mpi_size > 0,
	    .symbol_dir = symbol_dir(sym_dir, sizeof(sym_dir)),
	    .say = fs_fail,
	    .strerr = fs_strerror,
	};
	struct tfs_recording *r;
	struct ends e = {.fd = -1};
	int rc, consume_err = 0, exit_status, to_saver = -1, from_saver = -1, saving = -1;
	bool saved = true, saver;

	snprintf(size, sizeof(size), "%ld", o->mpi_size);
	if (tfs_recording_new(&ro, &r) < 0)
		return EXIT_RUNTIME;
	/* the terminal's ^C and ^\ go to the program (not again through us); its end is what
	   we wait for */
	sigaction(SIGINT, &sent, NULL);
	sigaction(SIGQUIT, &sent, NULL);
	sigaction(SIGTERM, &fwd, NULL);
	sigaction(SIGHUP, &fwd, NULL);
	if (o->mpi_size > 0) {
		/* before the program starts, so before the job can end (the file comment) */
		saving = tfs_file_reserve(out);
		if (saving < 0) {
			fs_fail("cannot save %s: %s", out, fs_strerror(-saving));
			tfs_recording_free(r, true);
			return EXIT_RUNTIME;
		}
	}
	/* before we become a subreaper: the saver must not be reparented to us */
	saver = o->mpi_size > 0 && start_saver(r, o, out, saving, &to_saver, &from_saver) == 0;
	if (saver) {
		close(saving); /* the saver's copy holds the reservation */
		saving = -1;
	}
	/* processes the program leaves behind become ours: we know when all have ended */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	g_child = start_child(o, lib, tfs_recording_spool(r));
	if (g_child < 0) {
		fs_fail("cannot fork: %s", fs_strerror(errno));
		tfs_recording_free(r, !saver); /* a saver told nothing removes it */
		tfs_file_release(saving, out);
		return EXIT_RUNTIME;
	}
	if (saver) {
		tfs_recording_free(r, false); /* the saver's now */
		e.status = reap_for_saver(to_saver, from_saver, &saved);
	} else {
		e.pid = g_child;
		e.argv0 = o->argv[0];
		rc = tfs_recording_start(r, g_child);
		if (rc < 0) {
			fs_fail("cannot record %s: %s", o->argv[0], fs_strerror(-rc));
			kill(g_child, SIGKILL);
			waitpid(g_child, NULL, 0);
			tfs_recording_free(r, true);
			tfs_file_release(saving, out);
			return EXIT_RUNTIME;
		}
		run_consumer(r, &e, &consume_err);
		tfs_recording_describe_end(e.status, how, sizeof(how));
		saved = conclude(r, o, out, how, WIFEXITED(e.status) && !WEXITSTATUS(e.status),
				 consume_err, false) == 0;
		tfs_recording_free(r, true);
		tfs_file_release(saving, out);
	}
	exit_status = mirror_status(e.status);
	if (!saved && exit_status == 0) /* no trace: the run must not look like a success */
		exit_status = EXIT_RUNTIME;
	if (WIFSIGNALED(e.status))
		return die_of(WTERMSIG(e.status));
	return exit_status;
}

static int record(const struct record_opts *o, const char *lib, const char *out)
{
	char *cmdline = join_args_dup(o->argv);
	int rc;

	if (!cmdline) {
		fs_fail("cannot record: %s", fs_strerror(ENOMEM));
		return EXIT_RUNTIME;
	}
	rc = record_as(o, lib, out, cmdline);
	free(cmdline);
	return rc;
}

/*
 * Whether a trace can be saved as @out: it is no directory and a file can be created next
 * to it (the writer saves through a temporary file renamed over @out). Asked before the
 * program runs, so that a long run is not lost to a mistyped path. @return 0 or -errno
 */
static int check_output(const char *out)
{
	char tmp[PATH_MAX + 40];
	struct stat st;
	int fd;

	if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
		return -EISDIR;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", out) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkstemp(tmp);
	if (fd < 0)
		return -errno;
	close(fd);
	unlink(tmp);
	return 0;
}

int fs_cmd_record(int argc, char **argv)
{
	struct record_opts o;
	char file[PATH_MAX], lib[2 * PATH_MAX + 2], out[PATH_MAX + 24], mpi_out[2 * PATH_MAX];
	const struct mpi_launcher *launcher;
	const char *base;
	int rc;

	rc = parse_args(argc, argv, &o);
	if (rc)
		return rc;
	rc = find_command(o.argv[0], file, sizeof(file));
	if (rc == -ENOENT) {
		fs_fail("cannot run %s: command not found", o.argv[0]);
		return 127;
	}
	if (rc < 0) { /* as shells, env and timeout: 126 for a command found but not run */
		fs_fail("cannot run %s: %s", o.argv[0], fs_strerror(-rc));
		return 126;
	}
	if (is_static_elf(file))
		fs_fail("warning: %s is statically linked: LD_PRELOAD cannot reach it, only events of "
		    "the capture API linked into it are recorded",
		    file);
	if (!find_library(lib, sizeof(lib))) {
		fs_fail("cannot find libtfscapture.so (looked next to tracefs and in %s; set "
		    "TFS_CAPTURE_LIB)",
		    TFS_LIBDIR);
		return EXIT_RUNTIME;
	}
	base = strrchr(o.argv[0], '/') ? strrchr(o.argv[0], '/') + 1 : o.argv[0];
	snprintf(out, sizeof(out), "%s", o.out ? o.out : base);
	if (!o.out)
		snprintf(out, sizeof(out), "%s.trace", base);
	launcher = mpi_launch(&o.mpi_rank, &o.mpi_size);
	if (launcher) {
		o.mpi_impl = launcher->impl;
		char mpilib[PATH_MAX];
		size_t n = strlen(lib);

		if (!find_mpi_library(lib, launcher->wrappers, mpilib, sizeof(mpilib))) {
			fs_fail("cannot find %s next to %s (built without this MPI? set TFS_MPI_LIB)",
			    launcher->wrappers, lib);
			return EXIT_RUNTIME;
		}
		snprintf(lib + n, sizeof(lib) - n, ":%s", mpilib);
		o.mask |= TFS_TRACE_MPI;
		if (!realpath(".", mpi_out) ||
		    strlen(mpi_out) + strlen(out) + 2 > sizeof(mpi_out) || out[0] == '/')
			snprintf(mpi_out, sizeof(mpi_out), "%s", out);
		else
			strcat(strcat(mpi_out, "/"), out);
		o.mpi_out = mpi_out;
		setenv("TFS_MPI_OUTPUT", mpi_out, 1);
		n = strlen(out);
		snprintf(out + n, sizeof(out) - n, ".%ld", o.mpi_rank);
	}
	rc = check_output(out);
	if (rc < 0) {
		fs_fail("cannot save %s: %s", out, fs_strerror(-rc));
		return EXIT_RUNTIME;
	}
	return record(&o, lib, out);
}
