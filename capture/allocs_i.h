/*
 * The live allocations of the traced process (allocs.c): every block the malloc family
 * returned and every region mmap mapped (or mremap moved), not yet freed or unmapped, each
 * with an allocation id, unique in the process (mmap regions share the numbering): a thread
 * takes ids ID_BATCH at a time from a process-wide counter, so one thread's ids are 1, 2,
 * 3... in its allocation order, and threads' do not interleave call by call. The
 * interposers keep it up to date; I/O interposers and the MPI wrappers turn a buffer pointer
 * into (allocation id, offset) through cap_alloc_lookup(). Internal to libtfscapture.
 *
 * Thread safety: every function may be called from any thread at any time; none calls the
 * interposed allocator, and none changes errno. A call made while the same thread is inside
 * one of them (a signal handler) does nothing and reports "unknown" (id 0).
 */
#ifndef TFS_ALLOCS_I_H
#define TFS_ALLOCS_I_H

#define ID_BATCH 64 /* allocation ids a thread takes at a time */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfs/capture.h"
#include "capture_i.h"

/*
 * The categories that need allocation ids: the table is kept while any of them is traced
 * (MPI buffers too, where the MPI wrappers exist).
 */
#ifdef TFS_TRACE_MPI
#define CAP_ALLOCS_MASK (TFS_TRACE_ALLOC | TFS_TRACE_IO | TFS_TRACE_MPI)
#else
#define CAP_ALLOCS_MASK (TFS_TRACE_ALLOC | TFS_TRACE_IO)
#endif

/* False when TFS_ALLOC_IDS=0 (ids off: every id recorded is 0). Set once at load. */
extern bool cap_allocs_enabled_;

/*
 * True when the allocation table is to be updated by an interposer running now: capture on
 * for a category in CAP_ALLOCS_MASK, ids enabled, and not a call made by the capture itself.
 */
static inline bool cap_allocs_keep(void)
{
	return (tfs_capture_mask_ & CAP_ALLOCS_MASK) && cap_allocs_enabled_ && !cap_tls_depth;
}

/*
 * A heap block [@p, @p + @size) was returned by the malloc family: enter it under id @id,
 * or under a new id when @id is 0 (a block realloc left in place keeps its id).
 * @return its id, 0 when @p is NULL
 */
uint64_t cap_alloc_add(const void *p, size_t size, uint64_t id);

/*
 * The heap block at @p is about to be freed (or reallocated): take it out before the
 * allocator can hand its memory to another thread. @size (optional) gets its size.
 * @return its id, 0 when no live block starts at @p
 */
uint64_t cap_alloc_remove(const void *p, size_t *size);

/*
 * mmap mapped [@p, @p + @len) (rounded up to whole pages): enter it under a new id after
 * taking out whatever mapped region it replaced (MAP_FIXED). @return its id
 */
uint64_t cap_map_add(const void *p, size_t len);

/*
 * cap_map_add() with a given id and offset: enter [@p, @p + @len) (rounded up to whole pages)
 * under id @id (0: a new one), its offsets counting from @p - @off, after taking out whatever
 * mapped region it replaced. mremap's new range, or its old one back when it failed.
 * @return its id
 */
uint64_t cap_map_enter(const void *p, size_t len, uint64_t id, uint64_t off);

/*
 * mremap is about to move or resize [@p, @p + @len): take the range out as munmap would
 * (cap_map_remove), before another thread can map what the move frees. @off gets the offset
 * of @p in its mapped region (0 when none holds it).
 * @return the id of the mapped region holding @p, 0 when none does (a mapping made before
 * capture or by libc itself), or when @p is not page-aligned or @len is 0
 *
 * A mapping mremap resized or moved keeps its id and its offsets (cap_map_enter() of the new
 * range with this id and @off): its pages are the same pages, wherever they now are, so a
 * buffer in it has the same (id, offset) before and after. Unlike realloc, which copies to
 * a new block with a new id. A call that leaves the old range mapped (old size 0, or
 * MREMAP_DONTUNMAP) makes a second mapping, entered under a new id as mmap's.
 */
uint64_t cap_map_take(const void *p, size_t len, uint64_t *off);

/*
 * munmap is about to unmap [@p, @p + @len) (rounded up to whole pages; nothing when @p is
 * not page-aligned or @len is 0, which munmap refuses): mapped regions inside it go,
 * regions it overlaps are trimmed, a region it cuts in two becomes two regions that keep
 * the id and the base of the original (an offset is always from the original start).
 * Heap blocks are never touched.
 */
void cap_map_remove(const void *p, size_t len);

/*
 * The allocation holding address @p: @id its id and @off the offset of @p from its start.
 * An address in no live heap block or mapped region (the stack, static data, memory the
 * program got before capture started, or any address when ids are off) gives id 0 and
 * @off = @p itself: allocation 0 is the rest of the address space, based at 0, so a loop
 * over a static or stack buffer is still stride-predicted.
 * @return 0 when found, -ENOENT when @id is 0
 */
int cap_alloc_lookup(const void *p, uint64_t *id, uint64_t *off);

/*
 * The next allocation id, and making ids go on from @next (an exec'd image, whose spool and
 * rank are its predecessor's: the ids its blocks had still name them in the trace).
 */
uint64_t cap_alloc_next_id(void);
void cap_alloc_ids_from(uint64_t next);

#endif
