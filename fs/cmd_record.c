/*
 * `tracefs record [options] -- command [args...]`: runs a program with libtfscapture
 * preloaded and attached to a spool this process creates, consumes the spool while the
 * program runs, and after it ends however it ends (exit, abort, a fatal signal, _exit,
 * SIGKILL) takes in what is left and saves one trace. Prints one summary line on stderr and
 * exits with the program's status, or dies of the signal that killed it. --trace selects
 * the categories (cap_parse_trace's words; all by default); --backtrace-depth the frames
 * kept of each allocation's backtrace (64 by default, 0: none); --sample=N and
 * --sample-bytes=N keep the backtrace of one allocation in N, or one per N bytes;
 * --when-full what a thread does when the spool (which grows up to --spool-size) is full:
 * wait for this recorder to free a chunk (the default, bounded: spool_i.h) or drop. Run by
 * an MPI launcher
 * (`mpiexec -n P tracefs record -o run.trace -- ./app`, seen from PMI_RANK/PMI_SIZE or
 * OMPI_COMM_WORLD_RANK/SIZE) it also preloads the PMPI wrappers of that launcher's MPI
 * (libtfsmpi.so for MPICH, libtfsmpi-ompi.so for Open MPI): at
 * MPI_Finalize each rank's wrapper asks for its trace so far (spool_i.h save_req), the ranks
 * merge them and rank 0 writes <out>; a rank that never reaches MPI_Finalize saves its own
 * trace as <out>.<rank>. This file does the command line and process control only; the
 * consumer is capture/consumer.c.
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
#include "consumer_i.h"
#include "cli_i.h"
#include "record_i.h"
#include "record_procs_i.h"

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2
#define IDLE_POLL_NS 2000000 /* consumer poll period while nothing was handed over */
/* new processes' spools are looked for at least this often, however long a poll takes:
 * their producers wait for us once their spool has grown full (spool_i.h) */
#define SCAN_PERIOD_NS 20000000
#define DEFAULT_BT_DEPTH 64

#ifndef TFS_LIBDIR
#define TFS_LIBDIR "/usr/local/lib"
#endif

struct record_opts {
	const char *out;
	struct cap_timing timing;
	uint32_t mask;
	size_t spool_bytes;
	uint32_t bt_depth;
	struct spool_policy policy;
	char **argv; /* the command */
	long mpi_rank, mpi_size; /* from the MPI launcher's environment; size 0: not MPI */
	const char *mpi_impl;	 /* the launcher's MPI: "mpich", "openmpi" (metadata mpi_impl) */
	const char *mpi_out;	 /* the merged trace rank 0 writes at MPI_Finalize */
};

static pid_t g_child;

static int usage(const char *what)
{
	fs_fail("record: %s (try 'tracefs --help')", what);
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
	    {0},
	};
	char *end;
	long mb;
	int c;

	*o = (struct record_opts){.mask = TFS_TRACE_ON | TFS_TRACE_ZONES | TFS_TRACE_MEM |
					  TFS_TRACE_ALLOC | TFS_TRACE_IO | TFS_TRACE_THREADS,
				  .timing = {.timing = TFS_TIMING_LOSSLESS},
				  .spool_bytes = (size_t)SPOOL_DEFAULT_MB << 20,
				  .bt_depth = DEFAULT_BT_DEPTH};
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+o:", lo, NULL)) != -1) {
		switch (c) {
		case 'o':
			o->out = optarg;
			break;
		case 't':
			if (cap_parse_timing(optarg, &o->timing) < 0)
				return usage("--timing must be lossless, none or lossy:ERR "
					     "with 2^-10 <= ERR < 1, the timed ones optionally "
					     "followed by ,fast");
			break;
		case 'T':
			if (cap_parse_trace(optarg, &o->mask) < 0)
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
			if (*end || end == optarg || mb < 0 || mb > (long)SPOOL_MAX_BT_FRAMES)
				return usage("--backtrace-depth takes frames, 0 to 128");
			o->bt_depth = (uint32_t)mb;
			break;
		case 'w':
			if (cap_parse_when_full(optarg, &o->policy.when_full) < 0)
				return usage("--when-full takes wait or drop");
			break;
		case 'n':
		case 'B':
			if (o->policy.sample != SPOOL_SAMPLE_ALL)
				return usage("--sample and --sample-bytes exclude each other");
			if (cap_parse_count(optarg, &o->policy.sample_every) < 0)
				return usage("--sample and --sample-bytes take a count from 1, "
					     "optionally followed by k, m or g");
			o->policy.sample = c == 'n' ? SPOOL_SAMPLE_CALLS : SPOOL_SAMPLE_BYTES;
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

/* The file execvp() would run for @cmd, in @buf. false: not found. */
static bool find_command(const char *cmd, char *buf, size_t cap)
{
	const char *path = getenv("PATH"), *p;

	if (strchr(cmd, '/')) {
		snprintf(buf, cap, "%s", cmd);
		return access(buf, X_OK) == 0;
	}
	for (p = path ? path : "/usr/bin:/bin"; p; p = strchr(p, ':') ? strchr(p, ':') + 1 : NULL) {
		size_t n = strcspn(p, ":");

		snprintf(buf, cap, "%.*s%s%s", (int)n, p, n ? "/" : "", cmd);
		if (access(buf, X_OK) == 0)
			return true;
	}
	return false;
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

/* The first process's spool: it starts small and grows up to --spool-size. */
static int create_spool(struct spool *s, const struct record_opts *o, const char *path)
{
	int rc = cap_spool_create(s, path, o->spool_bytes, SPOOL_START_CHUNKS,
				  (uint32_t)o->timing.timing, o->mask);

	if (rc < 0)
		return rc;
	/* backtraces belong to allocations: none without them */
	if (o->mask & TFS_TRACE_ALLOC)
		s->hdr->bt_depth = o->bt_depth;
	s->hdr->policy = o->policy;
	return 0;
}

#define SPOOL_DIR "/dev/shm"
#define SPOOL_PREFIX "tracefs-spool."
/* younger spools may be a recorder's that has not locked its spool yet */
#define STALE_AFTER_S 10

/*
 * Hold a lock on the spool at @path while we record (the descriptor stays open until we
 * exit): a recorder that finds no lock knows the spool is a dead recorder's.
 */
static void lock_spool(const char *path)
{
	struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0 && fcntl(fd, F_OFD_SETLK, &fl) < 0) {
		close(fd);
		fd = -1;
	}
	(void)fd; /* kept open on purpose: the lock lasts as long as we do */
}

/* @name is a first spool of the default directory, `tracefs-spool.<pid>.<i>`. */
static bool is_first_spool(const char *name)
{
	const char *p = name + strlen(SPOOL_PREFIX);
	size_t d = strspn(p, "0123456789");

	if (strncmp(name, SPOOL_PREFIX, strlen(SPOOL_PREFIX)) != 0 || !d || p[d] != '.')
		return false;
	p += d + 1;
	d = strspn(p, "0123456789");
	return d > 0 && !p[d];
}

/* Whether @path begins with a spool header (a directory of the user's holds other files). */
static bool has_spool_magic(const char *path)
{
	uint32_t magic = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	bool yes;

	if (fd < 0)
		return false;
	yes = pread(fd, &magic, sizeof(magic), 0) == (ssize_t)sizeof(magic) && magic == SPOOL_MAGIC;
	close(fd);
	return yes;
}

/*
 * @name, in @dir, is named after spool @first the way tracefs names files after a spool:
 * its processes' spools, their move-asides and saved traces (`<first>.<n>[.<n>...][.trace]`).
 * In the default directory any `<first>.` name is ours.
 */
static bool named_after(const char *name, const char *first, bool default_dir)
{
	size_t len = strlen(first);
	const char *p = name + len;

	if (strncmp(name, first, len) != 0 || *p != '.')
		return false;
	if (default_dir)
		return true;
	while (*p == '.' && p[1] >= '0' && p[1] <= '9')
		p += 1 + strspn(p + 1, "0123456789");
	return (p > name + len && !*p) || !strcmp(p, ".trace");
}

/*
 * @name is a first spool: in the default directory `tracefs-spool.<pid>.<i>`; in a
 * directory of the user's (TFS_SPOOL's) a file with a spool header that is not named after
 * another such file.
 */
static bool is_first_spool_in(const char *dir, const char *name, const char *path, bool default_dir)
{
	char other[PATH_MAX];
	struct dirent *f;
	bool child = false;
	DIR *d;

	if (default_dir)
		return is_first_spool(name);
	if (name[0] == '.' || !has_spool_magic(path))
		return false;
	d = opendir(dir);
	while (d && !child && (f = readdir(d))) {
		child = strcmp(f->d_name, name) != 0 && named_after(name, f->d_name, false) &&
			(size_t)snprintf(other, sizeof(other), "%s/%s", dir, f->d_name) <
				sizeof(other) &&
			has_spool_magic(other);
	}
	if (d)
		closedir(d);
	return !child;
}

/* Whether first spool @path is a dead recorder's: old enough and nobody holds its lock. */
static bool is_stale(const char *path, const struct stat *st)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	bool stale;
	int fd;

	if (!S_ISREG(st->st_mode) || st->st_mtime > time(NULL) - STALE_AFTER_S)
		return false;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return false;
	stale = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK;
	close(fd);
	return stale;
}

/*
 * Remove what recorders killed before they could clean up left in @dir (the default
 * directory, or TFS_SPOOL's): each first spool nobody holds, with the spools and traces named
 * after it (its processes', its MPI rank's). Says so in one line.
 */
static void sweep_stale_spools(const char *dir)
{
	const bool default_dir = !strcmp(dir, SPOOL_DIR);
	DIR *d = opendir(dir);
	uint64_t bytes = 0;
	uint32_t n = 0;
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[PATH_MAX], other[PATH_MAX];
		struct dirent *f;
		struct stat st;
		DIR *d2;

		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= sizeof(path) ||
		    lstat(path, &st) < 0 || !S_ISREG(st.st_mode) ||
		    !is_first_spool_in(dir, e->d_name, path, default_dir) || !is_stale(path, &st) ||
		    unlink(path) < 0)
			continue;
		n++;
		bytes += (uint64_t)st.st_blocks * 512;
		d2 = opendir(dir);
		while (d2 && (f = readdir(d2))) {
			if (!named_after(f->d_name, e->d_name, default_dir) ||
			    (size_t)snprintf(other, sizeof(other), "%s/%s", dir, f->d_name) >=
				    sizeof(other) ||
			    lstat(other, &st) < 0 || !S_ISREG(st.st_mode) || unlink(other) < 0)
				continue;
			n++;
			bytes += (uint64_t)st.st_blocks * 512;
		}
		if (d2)
			closedir(d2);
	}
	closedir(d);
	/* spools grow as they fill: a killed recording may have left a few hundred KiB */
	if (n)
		fs_fail("removed %" PRIu32 " spool%s (%" PRIu64 " %s) left in %s by recordings "
			"that were killed", n, n == 1 ? "" : "s",
			bytes >= (1u << 20) ? bytes >> 20 : (bytes + 1023) >> 10,
			bytes >= (1u << 20) ? "MiB" : "KiB", dir);
}

/* The directory of spool path @path, into @buf. */
static const char *spool_dir_of(const char *path, char *buf, size_t cap)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return ".";
	if (slash == path)
		return "/";
	snprintf(buf, cap, "%.*s", (int)(slash - path), path);
	return buf;
}

static int make_spool(struct spool *s, const struct record_opts *o, char *path, size_t cap)
{
	const char *env = getenv("TFS_SPOOL");
	int rc;

	if (env && *env) {
		char dir[PATH_MAX];

		sweep_stale_spools(spool_dir_of(env, dir, sizeof(dir)));
		snprintf(path, cap, "%s", env);
		rc = create_spool(s, o, path);
		if (rc == 0)
			lock_spool(path);
		return rc;
	}
	sweep_stale_spools(SPOOL_DIR);
	for (unsigned int i = 0; i < 100; i++) {
		snprintf(path, cap, SPOOL_DIR "/" SPOOL_PREFIX "%ld.%u", (long)getpid(), i);
		rc = create_spool(s, o, path);
		if (rc == 0)
			lock_spool(path);
		if (rc != -EEXIST)
			return rc;
	}
	return -EEXIST;
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
}

static pid_t start_child(const struct record_opts *o, const char *lib, const char *spool)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	signal(SIGINT, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	set_preload(lib);
	setenv("TFS_SPOOL", spool, 1);
	execvp(o->argv[0], o->argv);
	fs_fail("cannot run %s: %s", o->argv[0], fs_strerror(errno));
	_exit(127);
}

static void join_args(char **argv, char *buf, size_t cap);

/*
 * MPI_Finalize asked for the trace (spool_i.h save_req): finish the program's own consumer
 * and save its trace next to the spool for the MPI wrappers to merge (processes the rank
 * started are not in it). @return true once served: the consumer is finished.
 */
static bool serve_save(struct cap_consumer *c, struct spool *s, const struct record_opts *o,
		       pid_t pid, const char *spool_path)
{
	char cmdline[4096], path[PATH_MAX + 8], v[32];
	const char *slash = strrchr(o->argv[0], '/');
	int rc;

	if (atomic_load(&s->hdr->save_req) != 1)
		return false;
	snprintf(path, sizeof(path), "%s.trace", spool_path);
	join_args(o->argv, cmdline, sizeof(cmdline));
	rc = cap_consumer_finish(c);
	if (rc == 0)
		rc = cap_consumer_set_common_meta(c, slash ? slash + 1 : o->argv[0], cmdline,
						  (long)pid, "record");
	if (rc == 0)
		rc = cap_consumer_set_meta(c, "end", "MPI_Finalize");
	snprintf(v, sizeof(v), "%ld", o->mpi_size);
	if (rc == 0)
		rc = cap_consumer_set_meta(c, "mpi_size", v);
	if (rc == 0 && o->mpi_impl)
		rc = cap_consumer_set_meta(c, "mpi_impl", o->mpi_impl);
	if (rc == 0)
		rc = cap_consumer_save(c, path);
	atomic_store(&s->hdr->save_rc, rc < 0 ? rc : 1);
	return true;
}

/* The MPI wrappers' request, when the program runs under an MPI launcher. */
struct mpi_save {
	struct cap_consumer *c;
	struct spool *s;
	const struct record_opts *o;
	const char *spool_path;
	bool saved;
};

/*
 * Consume while the program and every process it started run: the recorder is their
 * subreaper, so once the program has ended and no child is left, every descendant has
 * ended. @return the program's wait status
 */
static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int run_consumer(struct rec_procs *ps, pid_t pid, struct mpi_save *ms, int *consume_err)
{
	const struct timespec idle = {0, IDLE_POLL_NS};
	uint64_t scanned = mono_ns();
	bool ended = false;
	int status = 0;

	for (unsigned int pass = 0;; pass++) {
		int n = *consume_err ? 0 : rec_procs_poll(ps);
		int st;
		pid_t r;

		if (n < 0)
			*consume_err = n;
		if (ms && !ms->saved && !*consume_err && ms->o->mpi_size > 0)
			ms->saved = serve_save(ms->c, ms->s, ms->o, pid, ms->spool_path);
		if (pass % 4 == 0 || mono_ns() - scanned >= SCAN_PERIOD_NS) {
			rec_procs_scan(ps, false);
			scanned = mono_ns();
		}
		while ((r = waitpid(-1, &st, WNOHANG)) > 0 || (r < 0 && errno == EINTR)) {
			if (r == pid) {
				status = st;
				ended = true;
			}
			if (r > 0)
				rec_procs_reaped(ps, r, st);
		}
		if (r < 0 && errno == ECHILD && ended)
			return status;
		if (r < 0 && errno == ECHILD) /* never started: nothing to wait for */
			return status;
		if (n <= 0)
			nanosleep(&idle, NULL);
	}
}

void fs_describe_end(int status, char *buf, size_t cap)
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

static void join_args(char **argv, char *buf, size_t cap)
{
	size_t len = 0;

	buf[0] = '\0';
	for (int i = 0; argv[i] && len < cap; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? " " : "", argv[i]);
}

static void summary(const char *out, const char *how, const struct cap_consumer_stats *st,
		    uint32_t n_procs)
{
	struct tfs_trace_info ti = {0};
	struct tfs_trace *t;
	char rec[256], procs[48] = "", stalls[64] = "", waited[80] = "";

	if (n_procs > 1)
		snprintf(procs, sizeof(procs), " in %" PRIu32 " processes (ranks)", n_procs);
	if (tfs_trace_open(out, &t, NULL) == 0) {
		tfs_trace_get_info(t, &ti);
		tfs_trace_close(t);
	}
	if (st->n_partial_chunks || st->open_zones || st->open_phases)
		snprintf(rec, sizeof(rec),
			 "recovered %" PRIu64 " events, %" PRIu64 " of them from %" PRIu64
			 " chunk%s never handed over, %" PRIu32 " zone%s and %" PRIu32
			 " phase%s left open",
			 st->n_events, st->n_partial_events, st->n_partial_chunks,
			 st->n_partial_chunks == 1 ? "" : "s", st->open_zones,
			 st->open_zones == 1 ? "" : "s", st->open_phases,
			 st->open_phases == 1 ? "" : "s");
	else
		snprintf(rec, sizeof(rec), "recovered all %" PRIu64 " events", st->n_events);
	/* the back-pressure (spool_i.h): how long the program waited for us, whether we stalled */
	if (st->n_stalls)
		snprintf(stalls, sizeof(stalls), ", %" PRIu32 " wait%s for a free chunk gave up",
			 st->n_stalls, st->n_stalls == 1 ? "" : "s");
	if (st->wait_ns >= 1000000u)
		snprintf(waited, sizeof(waited), "; threads waited %.3f s in all for the recorder",
			 (double)st->wait_ns / 1e9);
	fprintf(stderr,
		"tracefs: %s: %" PRIu64 " events, %" PRIu64 " bytes, %.3f bytes/event, "
		"ratio %.1f against the text (%" PRIu64 " bytes), %" PRIu32
		" threads%s; program %s; %s; %" PRIu64 " dropped%s%s\n",
		out, ti.n_events, ti.file_bytes,
		ti.n_events ? (double)ti.file_bytes / (double)ti.n_events : 0.0,
		ti.file_bytes ? (double)ti.text_bytes / (double)ti.file_bytes : 0.0, ti.text_bytes,
		st->n_threads, procs, how, rec, st->dropped_events, stalls, waited);
	if (st->bad_records)
		fs_fail("warning: %" PRIu64 " malformed or unmatched records skipped", st->bad_records);
}

/*
 * Take in what is left, set the metadata and save: one process's trace as it is, several
 * merged with a rank each. @return 0 or -errno
 */
static int finish_trace(struct cap_consumer *c, struct rec_procs *ps,
			const struct record_opts *o, pid_t pid, const char *how, const char *out)
{
	char cmdline[4096];
	const char *slash = strrchr(o->argv[0], '/');
	int rc;

	join_args(o->argv, cmdline, sizeof(cmdline));
	rc = cap_consumer_finish(c);
	if (rc == 0)
		rc = cap_consumer_set_common_meta(c, slash ? slash + 1 : o->argv[0], cmdline,
						  (long)pid, "record");
	if (rc == 0)
		rc = cap_consumer_set_meta(c, "end", how);
	if (rc == 0 && o->mpi_size > 0) {
		char v[32];

		/* the rank is the trace's own: ranks/<r> */
		snprintf(v, sizeof(v), "%ld", o->mpi_size);
		rc = cap_consumer_set_meta(c, "mpi_size", v);
		if (rc == 0 && o->mpi_impl)
			rc = cap_consumer_set_meta(c, "mpi_impl", o->mpi_impl);
	}
	if (rc == 0)
		rc = rec_procs_finish(ps);
	if (rc == 0)
		rc = rec_procs_first_meta(ps);
	if (rc == 0 && rec_procs_count(ps) == 1)
		rc = cap_consumer_save(c, out);
	else if (rc == 0)
		rc = rec_procs_save(ps, out);
	return rc;
}

/* Neither the program nor any process it started loaded the capture library. */
static bool nothing_recorded(const struct spool *s, struct rec_procs *ps)
{
	if (atomic_load(&s->hdr->producer_pid) != 0)
		return false;
	rec_procs_scan(ps, true);
	return rec_procs_count(ps) == 1;
}

static int record(const struct record_opts *o, const char *lib, const char *out)
{
	struct sigaction fwd = {.sa_handler = forward_signal},
			 sent = {.sa_sigaction = forward_sent_signal, .sa_flags = SA_SIGINFO | SA_RESTART};
	struct cap_consumer_stats st;
	struct cap_consumer *c;
	struct rec_procs *ps = NULL;
	struct spool s;
	char spool_path[PATH_MAX], how[96];
	int rc, status, consume_err = 0, exit_status;
	/* handed to the MPI wrappers at MPI_Finalize (ms.saved): they merge and save */
	struct mpi_save ms = {.s = &s, .o = o, .spool_path = spool_path};

	rc = make_spool(&s, o, spool_path, sizeof(spool_path));
	if (rc < 0) {
		fs_fail("cannot create the spool %s: %s", spool_path, fs_strerror(-rc));
		return EXIT_RUNTIME;
	}
	rc = cap_consumer_new(&s, &o->timing, &c);
	if (rc < 0) {
		fs_fail("cannot start the consumer: %s", fs_strerror(-rc));
		goto err_unlink;
	}
	/* the terminal's ^C and ^\ go to the program (not again through us); its end is what
	   we wait for */
	sigaction(SIGINT, &sent, NULL);
	sigaction(SIGQUIT, &sent, NULL);
	sigaction(SIGTERM, &fwd, NULL);
	sigaction(SIGHUP, &fwd, NULL);
	/* processes the program leaves behind become ours: we know when all have ended */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	g_child = start_child(o, lib, spool_path);
	if (g_child < 0) {
		fs_fail("cannot fork: %s", fs_strerror(errno));
		goto err_free_consumer;
	}
	rc = rec_procs_new(&s, c, spool_path, (uint32_t)g_child, &o->timing, &ps);
	if (rc < 0) {
		fs_fail("cannot record %s: %s", o->argv[0], fs_strerror(-rc));
		kill(g_child, SIGKILL);
		waitpid(g_child, NULL, 0);
		goto err_free_consumer;
	}
	ms.c = c;
	status = run_consumer(ps, g_child, &ms, &consume_err);
	fs_describe_end(status, how, sizeof(how));
	exit_status = mirror_status(status);
	if (ms.saved) {
		char path[PATH_MAX + 8];

		/* the wrappers read it (and remove it) unless they failed before */
		snprintf(path, sizeof(path), "%s.trace", spool_path);
		unlink(path);
		if (o->mpi_rank == 0 && exit_status == 0 && access(o->mpi_out, R_OK) == 0) {
			cap_consumer_stats(c, &st);
			summary(o->mpi_out, how, &st, 1);
		}
	} else if (consume_err) {
		fs_fail("cannot record %s: %s", o->argv[0], fs_strerror(-consume_err));
		if (exit_status == 0) /* no trace: the run must not look like a success */
			exit_status = EXIT_RUNTIME;
	} else if (nothing_recorded(&s, ps)) {
		fs_fail("nothing recorded: %s never loaded the capture library (TFS_CAPTURE=0, "
		    "statically linked, or not run); program %s",
		    o->argv[0], how);
	} else if ((rc = finish_trace(c, ps, o, g_child, how, out)) < 0) {
		fs_fail("cannot save %s: %s", out, fs_strerror(-rc));
		if (exit_status == 0)
			exit_status = EXIT_RUNTIME;
	} else {
		rec_procs_stats(ps, &st);
		if (o->mpi_rank == 0) /* one line per job, not per rank */
			summary(out, how, &st, rec_procs_count(ps));
	}
	rec_procs_free(ps);
	cap_consumer_free(c);
	unlink(spool_path);
	cap_spool_unmap(&s);
	if (WIFSIGNALED(status))
		return die_of(WTERMSIG(status));
	return exit_status;

err_free_consumer:
	cap_consumer_free(c);
err_unlink:
	unlink(spool_path);
	cap_spool_unmap(&s);
	return EXIT_RUNTIME;
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
	if (!find_command(o.argv[0], file, sizeof(file))) {
		fs_fail("cannot run %s: command not found", o.argv[0]);
		return 127;
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
