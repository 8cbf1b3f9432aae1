/*
 * The mapping interposers: mmap (and mmap64, its other name), mremap and munmap, recorded
 * with the malloc family (TFS_TRACE_ALLOC) and keeping the table of live allocations
 * (allocs_i.h): a mapping gets an allocation id, numbered with the heap blocks, keeps it
 * when mremap resizes or moves it, and an unmapped range leaves the table, splitting or
 * trimming the mappings it cuts. A file mapping records its descriptor's symbolic file id,
 * an anonymous one CALL_NO_FILE. Not interposed: shmat/shmdt, brk/sbrk, and the mappings
 * glibc makes for itself (thread stacks, large malloc blocks and their mremap, the dynamic
 * loader's), which never go through these symbols.
 */
#undef _FILE_OFFSET_BITS /* define mmap, not mmap64 under the name mmap */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4 /* Linux 5.7; glibc's headers before 2.32 lack it */
#endif

#include "allocs_i.h"
#include "calls_i.h"
#include "files_i.h"
#include "interpose_i.h"

static void put_mmap(uint64_t t0, void *addr, size_t len, int prot, int flags, int fd, int64_t off,
		     void *p, uint64_t id, int err)
{
	uint32_t file = (flags & MAP_ANONYMOUS) || fd < 0 ? CALL_NO_FILE : cap_fd_file(fd);
	uint64_t args[10] = {since(t0),
			     (uintptr_t)addr,
			     len,
			     (uint64_t)(uint32_t)prot,
			     (uint64_t)(uint32_t)flags,
			     file,
			     (uint64_t)off,
			     id,
			     (uintptr_t)p,
			     p == MAP_FAILED ? (uint64_t)err : 0};

	cap_put_call(CALL_MMAP, t0, args, 10, NULL, 0);
}

/* The value of real mmap-like @fn, recorded and entered in the table: an expression. */
#define MMAP_CALL(fn)                                                                              \
	__extension__({                                                                            \
		void *p_ = MAP_FAILED;                                                             \
		bool keep_ = cap_allocs_keep(), trace_ = tracing_alloc();                 \
		if (!HAVE(fn)) {                                                                   \
		} else if (!keep_ && !trace_) {                                                    \
			p_ = cap_real.fn(addr, len, prot, flags, fd, off);                         \
		} else {                                                                           \
			uint64_t t0_ = cap_now_ns(), id_ = 0;                                      \
			int err_;                                                                  \
			p_ = cap_real.fn(addr, len, prot, flags, fd, off);                         \
			err_ = errno;                                                              \
			if (keep_ && p_ != MAP_FAILED)                                             \
				id_ = cap_map_add(p_, len);                                        \
			if (trace_)                                                                \
				put_mmap(t0_, addr, len, prot, flags, fd, (int64_t)off, p_, id_,   \
					 err_);                                                    \
			errno = err_;                                                              \
		}                                                                                  \
		p_;                                                                                \
	})

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return MMAP_CALL(mmap);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	return MMAP_CALL(mmap64);
}

EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	bool keep = cap_allocs_keep(), trace = tracing_alloc();
	/* the old range goes: the mapping moves or resizes (else a copy is made beside it) */
	const bool moves = old_len && !(flags & MREMAP_DONTUNMAP);
	uint64_t t0, id = 0, off = 0, args[9];
	void *want = NULL, *p;
	va_list ap;
	int err;

	if (flags & MREMAP_FIXED) {
		va_start(ap, flags);
		want = va_arg(ap, void *);
		va_end(ap);
	}
	if (!HAVE(mremap))
		return MAP_FAILED;
	if (!keep && !trace)
		return cap_real.mremap(old, old_len, new_len, flags, want);
	/* out of the table first: once moved, the old range is anyone's to map */
	if (keep && moves)
		id = cap_map_take(old, old_len, &off);
	t0 = cap_now_ns();
	p = cap_real.mremap(old, old_len, new_len, flags, want);
	err = errno;
	if (keep && p != MAP_FAILED)
		id = cap_map_enter(p, new_len, moves ? id : 0, moves ? off : 0);
	else if (keep && id)
		cap_map_enter(old, old_len, id, off); /* failed: the old range is still mapped */
	if (trace) {
		args[0] = since(t0);
		args[1] = (uintptr_t)old;
		args[2] = old_len;
		args[3] = new_len;
		args[4] = (uint64_t)(uint32_t)flags;
		args[5] = (uintptr_t)want;
		args[6] = p == MAP_FAILED ? 0 : id;
		args[7] = (uintptr_t)p;
		args[8] = p == MAP_FAILED ? (uint64_t)err : 0;
		cap_put_call(CALL_MREMAP, t0, args, 9, NULL, 0);
	}
	errno = err;
	return p;
}

EXPORT int munmap(void *addr, size_t len)
{
	bool keep = cap_allocs_keep(), trace = tracing_alloc();
	uint64_t t0, args[5];
	int ret, err;

	if (!HAVE(munmap))
		return -1;
	/* past the thread's end: libunwind's, freeing its per-thread cache in the last round
	 * of TSD destructors, after the capture's own; no event of the program */
	if (trace && cap_thread_ended())
		trace = false;
	if (!keep && !trace)
		return cap_real.munmap(addr, len);
	/* out of the table first: once unmapped, the range is anyone's to map */
	if (keep)
		cap_map_remove(addr, len);
	t0 = cap_now_ns();
	ret = cap_real.munmap(addr, len);
	err = errno;
	if (trace) {
		args[0] = since(t0);
		args[1] = (uintptr_t)addr;
		args[2] = len;
		args[3] = (uint64_t)(int64_t)ret;
		args[4] = ret < 0 ? (uint64_t)err : 0;
		cap_put_call(CALL_MUNMAP, t0, args, 5, NULL, 0);
	}
	errno = err;
	return ret;
}
