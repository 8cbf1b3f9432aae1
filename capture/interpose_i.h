/*
 * Internal interfaces between the files of LD_PRELOAD interposers. Every interposed function
 * is declared once in calls.txt; gen_calls.py makes its event kind, its entry in struct
 * cap_real and, unless the kind is `custom`, its wrapper (interpose_gen.c). The custom ones
 * are written by hand: interpose.c (the malloc family, threads, the resolution),
 * interpose_mem.c (mmap, mremap, munmap), interpose_proc.c (fork, exec, posix_spawn, the wait
 * family, thread names), interpose_sig.c (signal actions, fatal signals). files.c keeps
 * the descriptors' symbolic files. All are linked into libtfscapture.so only.
 *
 * A call is recorded when it returns, stamped with the time it began and its duration: the
 * calls it makes itself through the dynamic linker (fopen's malloc of its FILE) come before
 * it in the thread's stream. Every wrapper preserves the errno its real function left.
 */
#ifndef TFS_INTERPOSE_I_H
#define TFS_INTERPOSE_I_H

#include <dirent.h>
#include <errno.h>
#include <locale.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <wchar.h>

#include "tfs/capture.h"
#include "capture_i.h"

#define unlikely(x) __builtin_expect(!!(x), 0)
#define EXPORT __attribute__((visibility("default")))

/* Declared by <malloc.h> only: declared here for the definitions. */
void *memalign(size_t alignment, size_t size);
void *pvalloc(size_t size);

#include "interpose_gen.h" /* struct cap_real, from calls.txt */

extern struct cap_real cap_real;

/* Look up every real function (dlsym(RTLD_NEXT)); a no-op while already looking up. */
void cap_resolve(void);
/* The lookup itself, generated from calls.txt (interpose_gen.c). */
void cap_resolve_all(void);

/* The calling thread was started inside an interposed or MPI call: a library's thread. */
extern _Thread_local bool cap_thread_layer __attribute__((tls_model("initial-exec")));

/* Whether calls made inside another traced call are recorded too (cap_call_depth). */
static inline bool cap_call_nested_ok(void)
{
	return tfs_capture_mask_ & TFS_TRACE_NESTED;
}

/* The id of a thread pthread_create made while threads were traced (not yet joined), or
 * UINT32_MAX. */
uint32_t cap_thread_find(pthread_t th);

/* Take and release a spinlock of the interposers; the capture counts as entered meanwhile. */
void cap_lock(atomic_flag *l);
void cap_unlock(atomic_flag *l);

/* Nanoseconds since @t0 on the trace's clock (0 when timing is none). */
static inline uint64_t since(uint64_t t0)
{
	uint64_t t = cap_now_ns();

	return t > t0 ? t - t0 : 0;
}

/* Whether category @cat is traced and the caller is not the capture itself. */
static inline bool tracing(unsigned int cat)
{
	return (tfs_capture_mask_ & cat) && !cap_tls_depth;
}

#define capturing(cat) tracing(cat)

/*
 * Whether allocations are recorded now: at any depth on the program's threads (the heap is
 * the process's: fopen's FILE, getline's line), but on a thread a library started from
 * inside its call (an MPI progress thread) only with nested calls.
 */
static inline bool tracing_alloc(void)
{
	return tracing(TFS_TRACE_ALLOC) && (!cap_thread_layer || cap_call_nested_ok());
}

#define likely(x) __builtin_expect(!!(x), 1)

/*
 * True when the real function @f is known, looking the real functions up now if need be;
 * false (errno ENOSYS) when the next library has none.
 */
#define HAVE(f)                                                                                    \
	(likely(cap_real.f != NULL) || (cap_resolve(), cap_real.f != NULL) ||                      \
	 (errno = ENOSYS, false))

#endif
