/*
 * cap_cxx_inline: allocations from C++ functions inlined into main, for check_symbols.py.
 * Built with -O2, and the functions are forced inline, so each is an inlined instance of an
 * origin that may have no linkage name (gcc gives none to a function with internal linkage
 * that is never emitted out of line): its frame must still be named with its namespaces and
 * classes; and an extern "C" function in a namespace, not inlined, named as its symbol is. Each allocates once with a size of its own; the line of each call that allocates
 * is marked "bt:NAME".
 */
#include <cstdio>
#include <cstdlib>

#define INLINE inline __attribute__((always_inline))

namespace qa {
static INLINE char *risky(int n)
{
	return static_cast<char *>(std::malloc(static_cast<std::size_t>(n))); /* bt:risky */
}

struct Box {
	static INLINE char *fill(int n)
	{
		return risky(n + 1); /* bt:fill */
	}
};

namespace deep {
static INLINE char *dig(int n)
{
	return static_cast<char *>(std::malloc(static_cast<std::size_t>(n))); /* bt:dig */
}
} // namespace deep
} // namespace qa

namespace qa {
/* a C name in a namespace: its symbol, and its frame, are plain "c_alloc" */
extern "C" __attribute__((noinline)) char *c_alloc(int n)
{
	char *p = static_cast<char *>(std::malloc(static_cast<std::size_t>(n))); /* bt:c_alloc */

	__asm__ volatile("" : : "r"(p) : "memory"); /* not a tail call: its frame stays */
	return p;
}
} // namespace qa

namespace {
INLINE char *hidden(int n)
{
	return static_cast<char *>(std::malloc(static_cast<std::size_t>(n))); /* bt:hidden */
}
} // namespace

int main(int argc, char **argv)
{
	(void)argv;
	char *a = qa::Box::fill(argc + 3000); /* bt:main_fill, 3002 bytes */
	char *b = qa::deep::dig(argc + 4000); /* bt:main_dig, 4001 bytes */
	char *c = hidden(argc + 5000);        /* bt:main_hidden, 5001 bytes */
	char *d = qa::c_alloc(argc + 6000);   /* bt:main_c_alloc, 6001 bytes */

	std::printf("%p %p %p %p\n", static_cast<void *>(a), static_cast<void *>(b),
		    static_cast<void *>(c), static_cast<void *>(d));
	std::free(a);
	std::free(b);
	std::free(c);
	std::free(d);
	return 0;
}
