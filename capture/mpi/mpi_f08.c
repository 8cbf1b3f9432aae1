/*
 * The PMPI_ side of libtfsmpi.so: the wrappers call the MPI library's PMPI_ functions
 * through pointers found with dlsym(RTLD_NEXT), and libtfsmpi.so defines every PMPI_ function
 * too (generated next to the wrappers), because MPICH's bindings of the Fortran module
 * mpi_f08 call PMPI_ functions directly (mpi_barrier_f08_ calls PMPI_Barrier): a PMPI_ call
 * from such an entry point (a function of the Fortran library whose name ends in "_f08_") is
 * routed to the MPI_ wrapper, any other (the MPI library's own, this library's, the
 * program's) goes straight to the MPI library. The f08 bindings' helpers (temporary
 * datatypes of non-contiguous array sections, in functions named *_f08ts_ or without a
 * dynamic symbol) stay untraced. Open MPI's Fortran bindings all call PMPI_ functions (its
 * `use mpi` and `use mpi_f08` modules through its mpif.h library, the object defining
 * ompi_init_f): built against Open MPI, every PMPI_ call from that object is routed, but for
 * the conversions of handles between Fortran and C, which the generator never routes. It
 * does not interpret any MPI argument.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_rt_i.h"

#define SITE_SLOTS 256 /* cached call sites: the f08 entry points a program uses */

/* The loaded object holding the f08 bindings: [f08_lo, f08_hi), or empty; found at the first
   PMPI_ call (a Fortran library dlopen'ed later is not seen). */
static pthread_once_t f08_once = PTHREAD_ONCE_INIT;
static uintptr_t f08_lo, f08_hi;
/* Call sites decided: (return address << 1) | routed, 0 empty; a collision decides again. */
static _Atomic uintptr_t g_sites[SITE_SLOTS];

static int find_segments(struct dl_phdr_info *info, size_t size, void *data)
{
	const uintptr_t base = (uintptr_t)data;

	(void)size;
	if (info->dlpi_addr != base)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && base + ph->p_vaddr + ph->p_memsz > f08_hi)
			f08_hi = base + ph->p_vaddr + ph->p_memsz;
	}
	return 1;
}

#ifdef OPEN_MPI
#define BINDINGS_ANCHOR "ompi_init_f"
#else
#define BINDINGS_ANCHOR "mpi_init_f08_"
#endif

static void find_f08(void)
{
	void *entry = dlsym(RTLD_DEFAULT, BINDINGS_ANCHOR);
	Dl_info di;

	if (!entry || !dladdr(entry, &di) || !di.dli_fbase)
		return;
	f08_lo = (uintptr_t)di.dli_fbase;
	dl_iterate_phdr(find_segments, di.dli_fbase);
	if (f08_hi <= f08_lo)
		f08_lo = f08_hi = 0;
}

static bool is_f08_entry(const void *ra)
{
#ifdef OPEN_MPI
	return ra != NULL; /* every Open MPI binding is an entry point */
#else
	Dl_info di;
	size_t n;

	if (!dladdr(ra, &di) || !di.dli_sname)
		return false;
	n = strlen(di.dli_sname);
	return n > 5 && strcmp(di.dli_sname + n - 5, "_f08_") == 0;
#endif
}

bool mpirt_bypassed(const void *ra)
{
	const uintptr_t a = (uintptr_t)ra;
	_Atomic uintptr_t *slot = &g_sites[(a >> 4) % SITE_SLOTS];
	uintptr_t v;
	bool routed;

	pthread_once(&f08_once, find_f08);
	if (a < f08_lo || a >= f08_hi)
		return false;
	v = atomic_load_explicit(slot, memory_order_relaxed);
	if (v >> 1 == a)
		return v & 1;
	routed = is_f08_entry(ra);
	atomic_store_explicit(slot, a << 1 | routed, memory_order_relaxed);
	return routed;
}

void *mpirt_next(void *_Atomic *slot, const char *name)
{
	void *fn = atomic_load_explicit(slot, memory_order_acquire);

	if (fn)
		return fn;
	fn = dlsym(RTLD_NEXT, name);
	if (!fn) {
		/* only reachable if the MPI library lacks a function its mpi.h declares */
		fprintf(stderr, "tracefs: %s not found after libtfsmpi.so\n", name);
		abort();
	}
	atomic_store_explicit(slot, fn, memory_order_release);
	return fn;
}
