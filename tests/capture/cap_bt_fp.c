/*
 * Built twice for `cap_bt fplib`: with frame pointers (names cap_bt_fp_*) and without
 * (cap_bt_nofp_*), so that a call from one into the other and back crosses frames of both
 * kinds: CFAs from rbp and from rsp, frames of several sizes, one sized at run time.
 */
#include <alloca.h>
#include <stddef.h>
#include <stdlib.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define FN(x) CAT(PREFIX, x)
#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")

void *FN(alloc)(size_t n);
void *FN(through)(void *(*cb)(size_t), size_t n);

__attribute__((noinline)) static void *sized(void *(*cb)(size_t), size_t n)
{
	char *buf = alloca(n % 64 + 8); /* a frame sized at run time */
	void *p;

	KEEP(buf);
	p = cb(n);
	KEEP(p);
	return p;
}

__attribute__((noinline)) static void *mid(void *(*cb)(size_t), size_t n, int k)
{
	char pad[48];
	void *p;

	pad[k] = (char)n;
	KEEP(pad);
	p = k ? mid(cb, n, k - 1) : sized(cb, n);
	KEEP(p);
	return p;
}

__attribute__((noinline)) void *FN(through)(void *(*cb)(size_t), size_t n)
{
	void *p = mid(cb, n, 2);

	KEEP(p);
	return p;
}

__attribute__((noinline)) void *FN(alloc)(size_t n)
{
	void *p = malloc(n);

	KEEP(p);
	return p;
}
