/*
 * The LD_PRELOAD interposers for processes: fork, vfork (run as fork: a vfork child shares
 * its parent's memory, where the capture could not keep a state of its own, and programs
 * correct under vfork are correct under fork), the exec family and posix_spawn. Under
 * `tracefs record` a forked child records into a spool of its own (capture.c: a new rank);
 * an exec'd image goes on in the spool of its process with new thread ids, so the trace of
 * a rank shows the exec event, then the new image's events. The exec interposers record
 * `exec(path, argv)` when called (argv joined with spaces), hand over the calling thread's
 * chunk, and make sure the new image's environment still names the capture library and the
 * spool (a program may pass its own environment); an exec that returns failed and records
 * `exec_failed`. A spawned child (posix_spawn, which glibc's system() and popen() use)
 * finds its parent's spool taken and makes its own (capture.c). Events are recorded when
 * threads are traced (TFS_TRACE_THREADS); processes are followed whatever is traced.
 *
 * Not done: clone() called directly, and statically linked images (LD_PRELOAD cannot reach
 * them: `tracefs record` warns for the first one only; one exec'd later is named among its
 * process's images, as not traced, by the exec call).
 */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "calls_i.h"
#include "files_i.h"
#include "interpose_i.h"
#include "spool_i.h"

#define MAX_EXEC_ARGS 65536 /* arguments an execl-style call may pass */

extern char **environ;

/* Room for a path and an argv with their cut marks: an exec's or a spawn's strings. */
#define ARGV_MARK_BYTES 32u
#define EXEC_STRS_BYTES (CAP_STR_BYTES + CALL_MAX_ARGV + ARGV_MARK_BYTES)
_Static_assert(2 + 3 + (EXEC_STRS_BYTES + 7) / 8 <= SPOOL_MAX_RECORD_WORDS,
	       "an exec's record fits a spool record");

/*
 * argv[0], argv[1]... joined with spaces at @buf + @len and NUL-terminated: at most
 * CALL_MAX_ARGV bytes, and when longer the first ones and a visible mark `...[+N bytes]`.
 * @buf has CALL_MAX_ARGV + ARGV_MARK_BYTES free at @len. @return the new length
 */
static size_t put_argv(char *buf, size_t len, char *const argv[])
{
	size_t n = 0, total = 0;

	for (size_t i = 0; argv && argv[i]; i++) {
		size_t k = strlen(argv[i]);

		total += k + (i > 0);
		if (n >= CALL_MAX_ARGV)
			continue;
		if (i)
			buf[len + n++] = ' ';
		if (k > CALL_MAX_ARGV - n)
			k = n < CALL_MAX_ARGV ? CALL_MAX_ARGV - n : 0;
		memcpy(buf + len + n, argv[i], k);
		n += k;
	}
	if (total > n)
		n += (size_t)snprintf(buf + len + n, ARGV_MARK_BYTES, "...[+%zu bytes]", total - n);
	buf[len + n] = '\0';
	return len + n + 1;
}

/*
 * The strings of an exec or a spawn: in a mapping of their own, not on the stack of a
 * thread that may have little of it (the call itself costs far more). NULL when none.
 * Mapped by the real functions: through the interposers the mapping was the program's
 * event, an mmap and a munmap before every exec and after every spawn.
 */
static char *strs_new(void)
{
	void *p;

	if (!HAVE(mmap))
		return NULL;
	p = cap_real.mmap(NULL, EXEC_STRS_BYTES, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void strs_free(char *p)
{
	if (p && HAVE(munmap))
		cap_real.munmap(p, EXEC_STRS_BYTES);
}

/*
 * The path and the argv text of an exec or a spawn at @buf: "(bad address)" for what
 * cannot be read (the call then fails with EFAULT; reading it would crash the program).
 * @return their length
 */
static size_t put_cmd(char *buf, const char *path, char *const argv[])
{
	static const char bad[] = "(bad address)";
	const size_t len = cap_put_str(buf, 0, cap_str_readable(path) ? path : bad);

	if (cap_strv_readable(argv))
		return put_argv(buf, len, argv);
	memcpy(buf + len, bad, sizeof(bad));
	return len + sizeof(bad);
}

static void put_exec(const char *path, char *const argv[])
{
	const int saved_errno = errno;
	uint64_t args[1] = {0};
	char *buf;

	if (!tracing(TFS_TRACE_THREADS))
		return;
	buf = strs_new();
	if (buf)
		cap_put_call(CALL_EXEC, cap_now_ns(), args, 1, buf, put_cmd(buf, path, argv));
	strs_free(buf);
	errno = saved_errno;
}

static void put_exec_failed(const char *path, int err)
{
	char buf[CAP_STR_BYTES];
	uint64_t args[2] = {0, (uint64_t)err};

	if (tracing(TFS_TRACE_THREADS))
		cap_put_call(CALL_EXEC_FAILED, cap_now_ns(), args, 2, buf,
			     cap_put_str(buf, 0, err == EFAULT ? cap_str_at(path) : path));
}

static bool starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The file name of this library, for LD_PRELOAD. */
static const char *self_path(void)
{
	Dl_info info;

	if (dladdr((void *)self_path, &info) && info.dli_fname && info.dli_fname[0] == '/')
		return info.dli_fname;
	return NULL;
}

/*
 * @envp with TFS_SPOOL and TFS_SPOOL_ROOT naming this process's spool and LD_PRELOAD naming
 * this library, and for a spawned process (@index > 0) CAP_SPAWN_INDEX_ENV giving it its
 * start_index (capture.c), in a new array (free with free_env()); NULL when the capture follows no
 * processes, memory runs out, or @envp sets a TFS_SPOOL other than the one this process
 * found: a `tracefs record` the program runs starts its own recording, which the image it
 * execs records into (the caller then passes @envp as it is).
 */
static char **capture_env(char *const envp[], uint32_t index)
{
	const char *path = cap_spool_path(), *root = cap_spool_root(), *lib = self_path();
	const char *preload = NULL, *found = cap_spool_env();
	size_t n = 0, k = 0, len;
	char **env, *s[4];

	/* an environment that cannot be read is passed on as it is: the call fails with EFAULT */
	if (!path || !root || !lib || !found || !cap_strv_readable(envp))
		return NULL;
	for (; envp && envp[n]; n++) {
		if (starts(envp[n], "LD_PRELOAD="))
			preload = envp[n] + 11;
		if (starts(envp[n], "TFS_SPOOL=") && strcmp(envp[n] + 10, found))
			return NULL;
	}
	cap_tls_depth++; /* the tracer's own allocations */
	env = malloc((n + 5) * sizeof(*env));
	len = strlen(path) + strlen(root) + strlen(lib) + (preload ? strlen(preload) : 0) + 128;
	s[0] = malloc(len);
	if (!env || !s[0]) {
		free(env);
		free(s[0]);
		cap_tls_depth--;
		return NULL;
	}
	s[1] = s[0] + snprintf(s[0], len, "TFS_SPOOL=%s", path) + 1;
	s[2] = s[1] + snprintf(s[1], len, "TFS_SPOOL_ROOT=%s", root) + 1;
	if (preload && *preload && !strstr(preload, lib))
		snprintf(s[2], len, "LD_PRELOAD=%s:%s", lib, preload);
	else
		snprintf(s[2], len, "LD_PRELOAD=%s", preload && *preload ? preload : lib);
	s[3] = s[2] + strlen(s[2]) + 1;
	snprintf(s[3], len - (size_t)(s[3] - s[0]), "%s=%u:%" PRIu32, CAP_SPAWN_INDEX_ENV,
		 (unsigned int)getpid(), index);
	for (size_t i = 0; i < n; i++)
		if (!starts(envp[i], "TFS_SPOOL=") && !starts(envp[i], "TFS_SPOOL_ROOT=") &&
		    !starts(envp[i], "LD_PRELOAD=") && !starts(envp[i], CAP_SPAWN_INDEX_ENV "="))
			env[k++] = envp[i];
	env[k++] = s[0];
	env[k++] = s[1];
	env[k++] = s[2];
	if (index)
		env[k++] = s[3];
	env[k] = NULL;
	cap_tls_depth--;
	return env;
}

static void free_env(char **env)
{
	if (!env)
		return;
	cap_tls_depth++;
	for (size_t i = 0; env[i]; i++) {
		if (starts(env[i], "TFS_SPOOL=")) {
			free(env[i]); /* the one block of the three strings */
			break;
		}
	}
	free(env);
	cap_tls_depth--;
}

/* ---- fork ---- */

EXPORT pid_t fork(void)
{
	uint64_t t0, args[3];
	pid_t pid;
	int err;

	if (!HAVE(fork))
		return -1;
	if (!tracing(TFS_TRACE_THREADS))
		return cap_real.fork();
	t0 = cap_now_ns();
	pid = cap_real.fork(); /* the child starts a rank of its own in the atfork handler */
	if (pid == 0)
		return 0;
	err = errno;
	args[0] = since(t0);
	args[1] = (uint64_t)(int64_t)pid;
	args[2] = pid < 0 ? (uint64_t)err : 0;
	cap_put_call(CALL_FORK, t0, args, 3, NULL, 0);
	errno = err;
	return pid;
}

EXPORT pid_t vfork(void)
{
	return fork();
}

/* ---- exec ---- */

/* execve, or execvpe when @search, with the capture's environment. */
static int do_exec(const char *file, char *const argv[], char *const envp[], bool search)
{
	char **env;
	int rc, err;

	if (search ? !HAVE(execvpe) : !HAVE(execve))
		return -1;
	put_exec(file, argv);
	env = capture_env(envp, 0);
	cap_before_exec(cap_str_readable(file) ? file : NULL);
	rc = search ? cap_real.execvpe(file, argv, env ? env : envp)
		    : cap_real.execve(file, argv, env ? env : envp);
	err = errno;
	cap_exec_failed();
	free_env(env);
	put_exec_failed(file, err);
	errno = err;
	return rc;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return do_exec(path, argv, envp, false);
}

EXPORT int execv(const char *path, char *const argv[])
{
	return do_exec(path, argv, environ, false);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	return do_exec(file, argv, envp, true);
}

EXPORT int execvp(const char *file, char *const argv[])
{
	return do_exec(file, argv, environ, true);
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	char path[32];
	char **env;
	int rc, err;

	if (!HAVE(fexecve))
		return -1;
	snprintf(path, sizeof(path), "/dev/fd/%d", fd);
	put_exec(path, argv);
	env = capture_env(envp, 0);
	cap_before_exec(path);
	rc = cap_real.fexecve(fd, argv, env ? env : envp);
	err = errno;
	cap_exec_failed();
	free_env(env);
	put_exec_failed(path, err);
	errno = err;
	return rc;
}

/*
 * The execl family: gather the arguments after @arg0 up to the NULL (and, for execle, the
 * environment after it) into an array and exec it.
 */
static int exec_list(const char *file, const char *arg0, va_list ap, bool with_env, bool search)
{
	va_list count;
	char **argv, *const *envp = environ;
	size_t n = 1;
	int rc, err;

	va_copy(count, ap);
	while (va_arg(count, const char *) && n < MAX_EXEC_ARGS)
		n++;
	va_end(count);
	if (n >= MAX_EXEC_ARGS) {
		errno = E2BIG;
		return -1;
	}
	cap_tls_depth++;
	argv = malloc((n + 1) * sizeof(*argv));
	cap_tls_depth--;
	if (!argv) {
		errno = ENOMEM;
		return -1;
	}
	argv[0] = (char *)arg0;
	for (size_t i = 1; i <= n; i++)
		argv[i] = va_arg(ap, char *); /* argv[n] is the terminating NULL */
	if (with_env)
		envp = va_arg(ap, char *const *);
	rc = do_exec(file, argv, envp, search);
	err = errno;
	cap_tls_depth++;
	free(argv);
	cap_tls_depth--;
	errno = err;
	return rc;
}

EXPORT int execl(const char *path, const char *arg0, ...)
{
	va_list ap;
	int rc;

	va_start(ap, arg0);
	rc = exec_list(path, arg0, ap, false, false);
	va_end(ap);
	return rc;
}

EXPORT int execlp(const char *file, const char *arg0, ...)
{
	va_list ap;
	int rc;

	va_start(ap, arg0);
	rc = exec_list(file, arg0, ap, false, true);
	va_end(ap);
	return rc;
}

EXPORT int execle(const char *path, const char *arg0, ...)
{
	va_list ap;
	int rc;

	va_start(ap, arg0);
	rc = exec_list(path, arg0, ap, true, false);
	va_end(ap);
	return rc;
}

/* ---- posix_spawn ---- */

static int spawn(bool search, pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
		 const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	uint64_t t0, args[3];
	char *buf;
	pid_t child = -1;
	char **env;
	int rc;

	if (search ? !HAVE(posix_spawnp) : !HAVE(posix_spawn))
		return ENOSYS;
	env = capture_env(envp, cap_take_start_index());
	t0 = cap_now_ns();
	rc = search ? cap_real.posix_spawnp(&child, file, fa, attr, argv, env ? env : envp)
		    : cap_real.posix_spawn(&child, file, fa, attr, argv, env ? env : envp);
	free_env(env);
	if (pid)
		*pid = child;
	if (tracing(TFS_TRACE_THREADS)) {
		const int saved_errno = errno;

		args[0] = since(t0);
		args[1] = (uint64_t)(int64_t)(rc == 0 ? child : -1);
		args[2] = (uint64_t)(int64_t)rc;
		buf = strs_new();
		if (buf)
			cap_put_call(CALL_POSIX_SPAWN, t0, args, 3, buf, put_cmd(buf, file, argv));
		strs_free(buf);
		errno = saved_errno;
	}
	return rc;
}

EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		       const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return spawn(false, pid, path, fa, attr, argv, envp);
}

EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return spawn(true, pid, file, fa, attr, argv, envp);
}

/* ---- wait ---- */

/*
 * The wait family is recorded (`wait`: what was waited for, the child whose state changed
 * and its wait status) and, under `tracefs record`, the children it reaps are noted in the
 * spool for the recorder, which can reap only its own children and the orphans it inherits
 * (capture.c cap_wait_end). A child reaped inside libc (system(), pclose()), by a raw system
 * call or because SIGCHLD is ignored leaves no note: its rank's end is then unknown.
 */

/* What waitid() reports in @si, as a wait status. */
static int status_of(const siginfo_t *si)
{
	switch (si->si_code) {
	case CLD_EXITED:
		return (si->si_status & 0xff) << 8;
	case CLD_KILLED:
		return si->si_status & 0x7f;
	case CLD_DUMPED:
		return (si->si_status & 0x7f) | 0x80;
	case CLD_STOPPED:
	case CLD_TRAPPED:
		return (si->si_status & 0xff) << 8 | 0x7f;
	case CLD_CONTINUED:
		return 0xffff;
	default:
		return 0;
	}
}

static uint64_t wait_begin(void)
{
	cap_wait_begin();
	return cap_now_ns();
}

/*
 * A wait call for @pid (waitpid's convention) with @options returned @ret, @err its errno,
 * reporting @child (0: none) with wait status @status; @reaped: the child is gone.
 */
static void wait_end(uint64_t t0, int64_t pid, int options, pid_t child, int status, bool reaped,
		     int64_t ret, int err)
{
	uint64_t args[7];

	cap_wait_end(reaped ? child : 0, status);
	if (!tracing(TFS_TRACE_THREADS))
		return;
	args[0] = since(t0);
	args[1] = (uint64_t)pid;
	args[2] = (uint64_t)(unsigned int)options;
	args[3] = (uint64_t)(int64_t)child;
	args[4] = child > 0 ? (uint64_t)(unsigned int)status : 0;
	args[5] = (uint64_t)ret;
	args[6] = ret < 0 ? (uint64_t)err : 0;
	cap_put_call(CALL_WAIT, t0, args, 7, NULL, 0);
}

EXPORT pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru)
{
	uint64_t t0;
	int st = 0, err;
	pid_t r;

	if (!HAVE(wait4))
		return -1;
	t0 = wait_begin();
	r = cap_real.wait4(pid, &st, options, ru);
	err = errno;
	if (r > 0 && status)
		*status = st;
	wait_end(t0, pid, options, r > 0 ? r : 0, st, r > 0, r, err);
	errno = err;
	return r;
}

EXPORT pid_t wait3(int *status, int options, struct rusage *ru)
{
	uint64_t t0;
	int st = 0, err;
	pid_t r;

	if (!HAVE(wait3))
		return -1;
	t0 = wait_begin();
	r = cap_real.wait3(&st, options, ru);
	err = errno;
	if (r > 0 && status)
		*status = st;
	wait_end(t0, -1, options, r > 0 ? r : 0, st, r > 0, r, err);
	errno = err;
	return r;
}

EXPORT pid_t waitpid(pid_t pid, int *status, int options)
{
	uint64_t t0;
	int st = 0, err;
	pid_t r;

	if (!HAVE(waitpid))
		return -1;
	t0 = wait_begin();
	r = cap_real.waitpid(pid, &st, options);
	err = errno;
	if (r > 0 && status)
		*status = st;
	wait_end(t0, pid, options, r > 0 ? r : 0, st, r > 0, r, err);
	errno = err;
	return r;
}

EXPORT pid_t wait(int *status)
{
	uint64_t t0;
	int st = 0, err;
	pid_t r;

	if (!HAVE(wait))
		return -1;
	t0 = wait_begin();
	r = cap_real.wait(&st);
	err = errno;
	if (r > 0 && status)
		*status = st;
	wait_end(t0, -1, 0, r > 0 ? r : 0, st, r > 0, r, err);
	errno = err;
	return r;
}

EXPORT int waitid(idtype_t idtype, id_t id, siginfo_t *info, int options)
{
	siginfo_t own = {0}, *si = info ? info : &own;
	int64_t pid = idtype == P_PID ? (int64_t)id : idtype == P_PGID ? -(int64_t)id : -1;
	uint64_t t0;
	int r, err, st;
	bool reaped;

	if (!HAVE(waitid))
		return -1;
	if (info)
		info->si_pid = 0; /* WNOHANG with nothing to report leaves it as it was */
	t0 = wait_begin();
	r = cap_real.waitid(idtype, id, si, options);
	err = errno;
	st = r == 0 && si->si_pid > 0 ? status_of(si) : 0;
	reaped = r == 0 && si->si_pid > 0 && !(options & WNOWAIT) &&
		 (si->si_code == CLD_EXITED || si->si_code == CLD_KILLED ||
		  si->si_code == CLD_DUMPED);
	wait_end(t0, pid, options, r == 0 ? si->si_pid : 0, st, reaped, r, err);
	errno = err;
	return r;
}

/* ---- thread names ---- */

/* A thread named: recorded as `setname` (the consumer keeps the name for the trace). */
static void put_setname(uint64_t t0, uint32_t thread, const char *name, int rc)
{
	uint64_t args[3] = {since(t0), thread, (uint64_t)(int64_t)rc};
	char buf[CAP_STR_BYTES];

	cap_put_call(CALL_SETNAME, t0, args, 3, buf, cap_put_str(buf, 0, name));
}

EXPORT int pthread_setname_np(pthread_t th, const char *name)
{
	uint64_t t0;
	int rc;

	if (!HAVE(pthread_setname_np))
		return ENOSYS;
	t0 = cap_now_ns();
	rc = cap_real.pthread_setname_np(th, name);
	if (tracing(TFS_TRACE_THREADS))
		put_setname(t0, pthread_equal(th, pthread_self()) ? cap_thread_self()
								   : cap_thread_find(th),
			    rc == 0 ? name : "", rc);
	return rc;
}

/* prctl: recorded for PR_SET_NAME only (it names the calling thread). */
EXPORT int prctl(int option, ...)
{
	unsigned long a2, a3, a4, a5;
	char name[16] = "";
	uint64_t t0;
	va_list ap;
	int rc, err;

	/* as glibc's own: four more words, whatever the option uses */
	va_start(ap, option);
	a2 = va_arg(ap, unsigned long);
	a3 = va_arg(ap, unsigned long);
	a4 = va_arg(ap, unsigned long);
	a5 = va_arg(ap, unsigned long);
	va_end(ap);
	if (!HAVE(prctl))
		return -1;
	t0 = cap_now_ns();
	rc = cap_real.prctl(option, a2, a3, a4, a5);
	err = errno;
	if (option == PR_SET_NAME && tracing(TFS_TRACE_THREADS)) {
		if (rc == 0) /* the kernel keeps 15 bytes */
			snprintf(name, sizeof(name), "%s", (const char *)a2);
		put_setname(t0, cap_thread_self(), name, rc < 0 ? -err : rc);
	}
	errno = err;
	return rc;
}
