/*
 * Capturing events from a running program: zones, phases, marks, counters, thread names and
 * memory accesses, each recorded by the calling thread into its own chunk of a shared spool
 * with no lock, and turned into a trace by a consumer (a thread of this process, or
 * `tracefs record` in another process). Usable from C and C++; declares no codec types.
 *
 * Cost: every entry point is an inline test of one global, so a program built with these
 * calls and run with TFS_CAPTURE=0 (or never initialised) pays one predictable branch per
 * call. Traced, an event costs a clock read and a few stores into shared memory.
 *
 * The capture never fails the host program and no entry point changes errno. The spool
 * starts at 256 KiB and grows as the consumer falls behind, up to its size (TFS_SPOOL_MB,
 * `tracefs record --spool-size`). When it is full, a recording thread waits for the
 * consumer to free a chunk (TFS_WHEN_FULL=wait, the default: nothing is lost, the program
 * runs at the consumer's pace) or drops the event (drop); either way dropped events are
 * counted, stored in the trace as metadata `dropped_events`, and the trace's `when_full`
 * says which. Where a thread dropped events, its stream holds a `dropped` mark
 * (`message` "dropped N events", `count` N, its duration from the first to the last of
 * them), and the zones whose end was dropped end there as `zone_unfinished`; drops of a
 * thread that ended before it could say them are counted in metadata `dropped_unplaced`. The wait is bounded: a consumer that frees no chunk for TFS_WAIT_LIMIT_MS
 * (stopped, killed, or not yet aware of a new process) makes the process drop and count,
 * and say so once on stderr, until it frees chunks again.
 *
 * Environment (read once, when the library is loaded):
 *   TFS_CAPTURE=0          capture off: no spool, no consumer, no trace, no events
 *   TFS_OUTPUT=FILE        in-process mode: the trace file (default <program>.<pid>.trace)
 *   TFS_TIMING=MODE        in-process mode: lossless (default), lossy:<rel_err>, none; the
 *                          timed ones may end in ",fast" (timing columns not range-coded:
 *                          larger, read faster)
 *   TFS_TRACE=LIST         in-process mode: categories, comma-separated: zones, mem, alloc,
 *                          io, threads, mpi, nested, all (all but mpi and nested; unset:
 *                          zones, mem; alloc, io and threads need the library preloaded or
 *                          linked: its interposers record them; mpi needs libtfsmpi.so
 *                          preloaded or linked, libtfsmpi-ompi.so under Open MPI; nested:
 *                          also the calls made inside another traced call, see "Layers")
 *   TFS_SPOOL_MB=N         in-process mode: most memory the spool grows to, in MiB
 *                          (default 64)
 *   TFS_WHEN_FULL=wait|drop in-process mode: what a thread does when the spool is full
 *                          (default wait; `tracefs record --when-full=`)
 *   TFS_WAIT_LIMIT_MS=N    either mode: how long threads wait while the consumer frees no
 *                          chunk before they drop instead (default 5000)
 *   TFS_BACKTRACE_DEPTH=N  in-process mode with alloc: frames kept of each allocation's
 *                          backtrace, 0 (none) to 128 (default 64; `tracefs record
 *                          --backtrace-depth=N`)
 *   TFS_SAMPLE=N           in-process mode with alloc and backtraces: only one allocation
 *                          in N of each thread carries its backtrace (`tracefs record
 *                          --sample=N`); N may end in k, m or g (2^10, 2^20, 2^30)
 *   TFS_SAMPLE_BYTES=N     the same, one allocation per N bytes a thread asks for (the one
 *                          whose size takes the thread's total past a multiple of N;
 *                          `--sample-bytes=N`). Off by default; TFS_SAMPLE wins over it
 *   TFS_SPOOL=PATH         set by `tracefs record`: attach to its spool, no consumer here
 *   TFS_ALLOC_IDS=0        no table of live allocations: every allocation id and buffer id
 *                          recorded is 0 (the interposers' cost without it, for comparison)
 *   TFS_MPI_OUTPUT=FILE    set by `tracefs record` under mpiexec: the merged trace rank 0
 *                          writes at MPI_Finalize (libtfsmpi.so, README "MPI programs")
 *   TFS_CLOCK=monotonic|tsc either mode (`tracefs record --clock=...`): the clock that
 *                          stamps events. Unset: on x86-64, the time-stamp counter where it
 *                          is invariant (constant_tsc and nonstop_tsc) and the kernel's own
 *                          clocksource is "tsc", else clock_gettime(CLOCK_MONOTONIC).
 *                          monotonic: clock_gettime; tsc: the counter wherever it is
 *                          invariant. The counter is read fenced (lfence, rdtsc: 15 ns
 *                          against clock_gettime's 21 on this project's machines, 4-5 ns less
 *                          per traced malloc/free) and mapped onto CLOCK_MONOTONIC per thread
 *                          from a (TSC, clock) pair taken every 2^24 ticks at the recording's
 *                          rate (measured over 2 ms by its first process, refined as the
 *                          process runs): the same clock to within tens of ns, never going
 *                          back in a thread. The recording's first process decides; every
 *                          later one follows it whatever its own TFS_CLOCK. The trace's
 *                          `clock` metadata says which ("tsc", with the rate in `tsc_hz`,
 *                          or "monotonic"). Any other TFS_CLOCK is reported on stderr and
 *                          the default taken. A program that forbids itself rdtsc
 *                          (prctl PR_SET_TSC) must be recorded with TFS_CLOCK=monotonic.
 *
 * Interposers (libtfscapture.so only, active for categories alloc, io, threads; `tracefs
 * record` records all categories unless --trace says otherwise): alloc is the malloc family
 * (malloc, calloc, realloc, free, posix_memalign, aligned_alloc, memalign, valloc, pvalloc)
 * and mmap, mmap64, mremap, munmap; io is POSIX I/O (open, read, write, pread, pwrite,
 * readv, writev, lseek, fsync, dup, dup2, dup3, fcntl, pipe, close_range, sendfile, splice,
 * copy_file_range), sockets
 * (socket, socketpair, connect, bind, listen, accept, send, recv and their to/from/msg
 * forms, shutdown), poll, select, the stat family, directories (opendir, readdir,
 * closedir, mkdir, rmdir, chdir) and the whole stdio family for output and input (fopen,
 * fclose, fflush, fseek, fread, fwrite, the printf family, puts, fputs, fputc, putc,
 * putchar, fgets, fgetc, getc, getchar, getline, getdelim, the scanf family on streams,
 * ungetc), with their 64-bit, _unlocked and fortified (__read_chk, __printf_chk...) names;
 * threads is pthread_create, pthread_join, fork, vfork, the exec family and posix_spawn.
 * capture/calls.txt is the list, one declaration per function, with each event's
 * arguments. Every event's category in the trace is the name of the --trace word that
 * records it. A stdio event records the bytes the call gave or took from its stream (libc
 * writes them out through its own descriptor calls, which no preload can see).
 *
 * Descriptors: every call on one records its number and the symbolic file behind it
 * (`fd=3, path=file#2`), one id per path, pipe, socket or device of the process image, its
 * name stored once (the opening call's path, or an `fd_file` event with what /proc/self/fd
 * shows for a descriptor met first; sockets by address: a listener or a bound socket by its
 * own, tcp:127.0.0.1:5432 or unix:/path, a connection by both ends, its own first:
 * tcp:127.0.0.1:40112->127.0.0.1:5432, unix:->/path for a client without a name).
 * The table of descriptors follows dup, dup2, dup3, fcntl(F_DUPFD), close, pipe, socket,
 * accept, connect and bind, so every call names the file really behind its descriptor.
 * Threads created with pthread_create are numbered in creation order. Every heap block and
 * mapping gets an allocation id (1, 2, 3... in allocation order across the process image,
 * `id=` in its allocating event, in free's, realloc's `freed=`), and an I/O call's buffer is
 * recorded as the live allocation holding it and the offset in it (`buf_id=`, `buf_off=`;
 * id 0 and the address itself for a stack or static buffer), so a loop over one buffer
 * compresses to one grammar rule; the table of live allocations is kept while alloc or io
 * is traced. A munmap that cuts a mapping in two leaves two pieces with the mapping's id and
 * offsets from its original start; a mapping mremap resizes or moves keeps its id and its
 * offsets (its pages move with it), one that mremap copies (old size 0, MREMAP_DONTUNMAP)
 * gets a new id. String arguments (paths, argv) and the names of descriptors read from
 * /proc are kept whole up to 900 bytes; a longer one keeps its first 900 and ends in a
 * visible `...[+N bytes]`. The metadata `cmdline` (the program's argv, spaces between) is
 * kept whole.
 *
 * Layers: a call made while the same thread is inside another interposed call (the real
 * function running) or inside an MPI call, and every call on a thread a library started
 * from inside its call (MPICH's and Open MPI's progress threads, started in MPI_Init),
 * belongs to that library's layer, not the program's: it is recorded only with `nested`
 * in the categories, and then with two more arguments, `depth` (how many traced calls it
 * is inside) and `in` (the outermost one: `read(..., depth=1, in="MPI_Init")`). An
 * allocation made inside a libc call on a program's thread is the program's (fopen's FILE,
 * getline's line) and is recorded whatever the categories; with `nested` it is marked too
 * (unless it carries a backtrace, which shows its caller). Inside an MPI call itself the
 * capture is suspended: what the MPI library does on the calling thread is never recorded.
 *
 * Processes under `tracefs record`: every forked or spawned process (fork, vfork run as fork,
 * posix_spawn, system, popen) records into a spool of its own and becomes a rank of the
 * trace (rank 0 the program, then along the fork tree: each process followed by the ones it
 * started, in the order it started them (those of system() and popen() last, in the order
 * they began), each followed by its own, so that two recordings of one program number its
 * processes alike however they race; metadata pid, ppid and end
 * per rank, `<key>.rank<R>`); an exec'd image goes on in its process's rank after an `exec`
 * event, with new thread ids. In-process capture (no `tracefs record`) stops in a forked
 * child. Processes started by clone() directly and statically linked images are not
 * followed (an image exec'd statically linked is named in its rank's `image` and `images`,
 * as not traced).
 *
 * Allocation backtraces (alloc with a depth above 0): malloc, calloc, realloc,
 * posix_memalign, aligned_alloc, memalign, valloc and pvalloc events get a last argument
 * `stack` naming the call's backtrace (stack#N, numbered in order of first use per
 * process; free has none; -1, TFS_SYM_NONE, for an allocation whose backtrace sampling
 * left out: metadata
 * `backtrace_sampling` says the rule, "all" when every allocation has one),
 * unwound with libunwind (libunwind.so.8, opened at start; without it backtraces are empty),
 * the innermost N frames, the capture library's own left out. The trace stores each
 * distinct backtrace once and each distinct code address symbolised once with libdw
 * (function, file, line, inlined functions), so it reads without the program's binaries.
 * Symbols come from the objects' files as they are when the trace is saved (at exit, or
 * when the program ends under `tracefs record`): rebuilding the program before that gives
 * wrong names. libunwind keeps a pipe open; its two descriptors are moved near the top of
 * the descriptor limit (64 below it), where the program's close, close_range, dup2 and
 * dup3 fail with EBADF as on descriptors not open (closefrom leaves them open): the program finds two descriptors fewer
 * under its limit (EMFILE two sooner) and cannot take their numbers. Cost (CPU, tests/bench/run_backtrace): about 0.15 us per
 * allocation from a shallow stack, 0.4 to 0.9 us per allocation of Python (stacks cut at
 * 64 frames), symbolisation included.
 *
 * Not done yet (later): backtraces of calls other than allocations, demangled C++ names in
 * backtraces, symbols of code unloaded by dlclose before the end (an address reused by a
 * later object is named after it) and of an exec'd image's predecessors where their objects
 * overlap its own (only without address randomisation or with non-PIE programs: the latest
 * image's names win), shmat and brk (memory they return has buffer id 0), dup/dup2/fcntl
 * (a duplicated descriptor is declared at first use by an `fd_file` event with the path
 * /proc/self/fd shows, an id of its own unless the original was opened by that same absolute
 * path), *_unlocked and formatted stdio (fprintf, fputs, getline...).
 */
#ifndef TFS_CAPTURE_H
#define TFS_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** tfs_phase_begin() scope: the phase holds the calling thread's events only. */
#define TFS_PHASE_THREAD 0x1u
/** tfs_phase_begin() scope: the phase holds every thread's events in its span. */
#define TFS_PHASE_PROCESS 0x2u

/** Categories (`--trace=` of `tracefs record`, TFS_TRACE). */
#define TFS_TRACE_ON 0x1u    /**< set whenever capture is on: phases and flush */
#define TFS_TRACE_ZONES 0x2u /**< zones, marks, counters, thread names */
#define TFS_TRACE_MEM 0x4u   /**< tfs_mem_access() */
#define TFS_TRACE_ALLOC 0x8u   /**< LD_PRELOAD: the malloc family, mmap, mremap, munmap */
#define TFS_TRACE_IO 0x10u     /**< LD_PRELOAD: POSIX and stdio I/O */
#define TFS_TRACE_THREADS 0x20u /**< LD_PRELOAD: pthread_create, pthread_join, fork, exec */
#define TFS_TRACE_MPI 0x40u     /**< libtfsmpi.so: every MPI function (capture/mpi) */
#define TFS_TRACE_NESTED 0x80u  /**< also calls made inside another traced call (layers) */

/**
 * Implementation: the categories being captured, 0 when capture is off. Written only by the
 * library (at load, and at exit; 0 in a forked child unless `tracefs record` follows it); read
 * through the inline functions.
 */
extern unsigned int tfs_capture_mask_;

/* Implementation entry points: call the inline functions below instead. */
void tfs_cap_zone_begin(const char *name);
void tfs_cap_zone_end(void);
void tfs_cap_phase_begin(const char *name, unsigned int scope);
void tfs_cap_phase_end(void);
void tfs_cap_mark(const char *message);
void tfs_cap_counter(const char *name, int64_t value);
void tfs_cap_thread_name(const char *name);
void tfs_cap_mem_access(const void *addr, size_t size, int is_store, const void *site);

/** True when capture is on in this process. Thread-safe. */
static inline int tfs_capture_enabled(void)
{
	return tfs_capture_mask_ != 0;
}

/**
 * Open a zone on the calling thread: a named region that ends at the matching
 * tfs_zone_end(). Zones nest; each becomes one `zone(name=..., depth=D)` event, whose start
 * time is the begin and whose duration runs to the end (events are stored when the zone
 * ends, so a zone follows the zones nested in it). A zone still open when the program ends
 * becomes `zone_unfinished`.
 * @param name  recorded by address: it must stay valid and unchanged while the process
 *              runs (a string literal). Up to 255 bytes are kept.
 */
static inline void tfs_zone_begin(const char *name)
{
	if (tfs_capture_mask_ & TFS_TRACE_ZONES)
		tfs_cap_zone_begin(name);
}

/** Close the calling thread's innermost open zone. */
static inline void tfs_zone_end(void)
{
	if (tfs_capture_mask_ & TFS_TRACE_ZONES)
		tfs_cap_zone_end();
}

/**
 * Begin a phase: a named span that slices the trace (the virtual tree shows each phase as
 * ranks/<r>/phases/<name>/, with '/', '%', '~' and the bytes that the text views escape as
 * %XX: README.md says how). @scope TFS_PHASE_THREAD: the calling thread's events until the
 * matching tfs_phase_end(); TFS_PHASE_PROCESS: every thread's events from the moment each
 * thread next records an event after the begin until it next records one after the end.
 * Phases nest with each other and with zones. @name is copied (up to 255 bytes).
 */
static inline void tfs_phase_begin(const char *name, unsigned int scope)
{
	if (tfs_capture_mask_)
		tfs_cap_phase_begin(name, scope);
}

/** End the innermost phase the calling thread began. */
static inline void tfs_phase_end(void)
{
	if (tfs_capture_mask_)
		tfs_cap_phase_end();
}

/** An instant `mark(message=...)`. @message is copied (up to 1024 bytes). */
static inline void tfs_mark(const char *message)
{
	if (tfs_capture_mask_ & TFS_TRACE_ZONES)
		tfs_cap_mark(message);
}

/**
 * A counter's value at this instant: `counter(name=..., value=V)`.
 * @param name  recorded by address, like a zone name (a string literal)
 */
static inline void tfs_counter(const char *name, int64_t value)
{
	if (tfs_capture_mask_ & TFS_TRACE_ZONES)
		tfs_cap_counter(name, value);
}

/** Name the calling thread: a `thread_name(name=...)` event. @name is copied (255 bytes). */
static inline void tfs_thread_name(const char *name)
{
	if (tfs_capture_mask_ & TFS_TRACE_ZONES)
		tfs_cap_thread_name(name);
}

/**
 * A memory access at an explicit site: `load(addr=, size=, site=site#N)` or `store(...)`.
 * Events of one site share a call signature, so their addresses and sizes are predicted
 * from that site's previous accesses (stride): a strided loop stores zeros (EPRSD).
 * @param site  any address that identifies the access in the program (same site, same
 *              pointer); the trace numbers sites 0, 1, 2... in order of first use
 */
static inline void tfs_mem_access_site(const void *addr, size_t size, int is_store,
				       const void *site)
{
	if (tfs_capture_mask_ & TFS_TRACE_MEM)
		tfs_cap_mem_access(addr, size, is_store, site);
}

/**
 * A memory access, its site being this place in the source: each use of the macro is its own
 * site, like an instruction address in a binary-instrumentation tracer.
 */
#define tfs_mem_access(addr, size, is_store)                                                       \
	tfs_mem_access_site((addr), (size), (is_store), __extension__({                            \
				    static char tfs_site_;                                   \
				    (const void *)&tfs_site_;                                      \
			    }))

/**
 * Hand the calling thread's recorded events to the consumer now (they are otherwise handed
 * over chunk by chunk) and, in in-process mode, wait up to a second until the consumer has
 * taken in everything handed over so far. Events already survive a crash under
 * `tracefs record` without this; it does not write the trace file (that happens at exit).
 */
void tfs_capture_flush(void);

/**
 * Leave what the calling thread does out of the trace until the matching
 * tfs_capture_resume(): its interposed and MPI calls run untraced, as calls made inside
 * another traced call do (see "Layers" above), and its allocations get no ids. For a tool's
 * own work inside a traced program: a replay proxy's bookkeeping (tracefs's
 * replay/proxy.c finds these two at run time). Pairs nest; each costs two stores and keeps
 * errno; with capture off they are harmless.
 */
void tfs_capture_pause(void);
/** End the innermost tfs_capture_pause() of the calling thread (none: nothing). */
void tfs_capture_resume(void);

/** Events dropped so far because the spool was full (or the thread could not start). */
uint64_t tfs_capture_dropped(void);

/* Scoped zones in C: the zone ends when the enclosing block is left (cleanup attribute). */
static inline void tfs_zone_scope_end_(const char *const *begun)
{
	if (*begun)
		tfs_cap_zone_end();
}

static inline const char *tfs_zone_scope_begin_(const char *name)
{
	if (!(tfs_capture_mask_ & TFS_TRACE_ZONES))
		return NULL;
	tfs_cap_zone_begin(name);
	return name;
}

#define TFS_ZONE_CAT2_(a, b) a##b
#define TFS_ZONE_CAT_(a, b) TFS_ZONE_CAT2_(a, b)
/** A zone from here to the end of the enclosing block: `TFS_ZONE("parse");` */
#define TFS_ZONE(name)                                                                             \
	const char *TFS_ZONE_CAT_(tfs_zone_, __LINE__)                                             \
	    __attribute__((cleanup(tfs_zone_scope_end_), unused)) = tfs_zone_scope_begin_(name)

#ifdef __cplusplus
}

namespace tfs {
/** A zone for the lifetime of the object: `tfs::zone z("parse");` */
class zone {
      public:
	explicit zone(const char *name) : begun_(tfs_zone_scope_begin_(name)) {}
	~zone() { tfs_zone_scope_end_(&begun_); }
	zone(const zone &) = delete;
	zone &operator=(const zone &) = delete;

      private:
	const char *begun_;
};
} // namespace tfs
#endif
#endif
