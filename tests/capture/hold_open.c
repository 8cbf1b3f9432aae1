/*
 * A test shim preloaded into `tracefs record` (check_fork.py open_race): it holds the
 * recorder's first open() of a process's spool, `<TFS_TEST_HOLD_OPEN>.XXXXXX/spool.<pid>`
 * (TFS_TEST_HOLD_OPEN is the recording's TFS_SPOOL) opened without O_CREAT, which the
 * recorder does right after stat()ing it, until the test program has swapped
 * another file in under that name. It says it holds by creating
 * `<TFS_TEST_HOLD_DIR>/held` and lets the open go on once `<TFS_TEST_HOLD_DIR>/go` exists
 * (or after 60 s). It only lives in the recorder: its constructor takes its variables and
 * LD_PRELOAD out of the environment the traced program inherits. Nothing in production
 * code knows about it.
 */
/* open and open64 are both defined here: neither may be the other's alias */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char g_prefix[PATH_MAX];
static char g_held[PATH_MAX], g_go[PATH_MAX];
static atomic_int g_done;

__attribute__((constructor)) static void hold_init(void)
{
	const char *prefix = getenv("TFS_TEST_HOLD_OPEN"), *dir = getenv("TFS_TEST_HOLD_DIR");

	if (prefix && dir) {
		snprintf(g_prefix, sizeof(g_prefix), "%s", prefix);
		snprintf(g_held, sizeof(g_held), "%s/held", dir);
		snprintf(g_go, sizeof(g_go), "%s/go", dir);
	}
	unsetenv("TFS_TEST_HOLD_OPEN");
	unsetenv("TFS_TEST_HOLD_DIR");
	unsetenv("LD_PRELOAD");
}

/* `<prefix>.XXXXXX/spool.<digits>`: a forked process's spool in the recording's directory,
 * not its first spool or an aside name */
static int is_child_spool(const char *path)
{
	static const char alnum[] = "abcdefghijklmnopqrstuvwxyz"
				    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	size_t len = strlen(g_prefix), d;

	if (!g_prefix[0] || strncmp(path, g_prefix, len) != 0 || path[len] != '.' ||
	    strspn(path + len + 1, alnum) != 6 ||
	    strncmp(path + len + 7, "/spool.", 7) != 0)
		return 0;
	path += len + 14;
	d = strspn(path, "0123456789");
	return d > 0 && !path[d];
}

static void hold(int (*real)(const char *, int, ...))
{
	const struct timespec nap = {0, 5000000};
	int fd = real(g_held, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);

	if (fd >= 0)
		close(fd);
	for (int i = 0; i < 12000 && access(g_go, F_OK) != 0; i++)
		nanosleep(&nap, NULL);
}

static int held_open(const char *name, const char *path, int flags, mode_t mode)
{
	int (*real)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT,
										   name);

	if (!(flags & O_CREAT) && is_child_spool(path) && !atomic_exchange(&g_done, 1))
		hold(real);
	return real(path, flags, mode);
}

/* The mode argument of an open() that creates, else 0. */
#define MODE_ARG(flags, mode)                                                                  \
	do {                                                                                   \
		if ((flags) & (O_CREAT | O_TMPFILE)) {                                         \
			va_list ap;                                                            \
                                                                                               \
			va_start(ap, flags);                                                   \
			(mode) = (mode_t)va_arg(ap, int);                                      \
			va_end(ap);                                                            \
		}                                                                              \
	} while (0)

int open(const char *path, int flags, ...)
{
	mode_t mode = 0;

	MODE_ARG(flags, mode);
	return held_open("open", path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
	mode_t mode = 0;

	MODE_ARG(flags, mode);
	return held_open("open64", path, flags, mode);
}
