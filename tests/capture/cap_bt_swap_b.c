/*
 * The other of the two libraries of `cap_bt dlswap` (cap_bt_swap_a.c): the same code with
 * other names.
 */
#include <stdlib.h>

void *banana(size_t n);

__attribute__((noinline)) static void *banana_alloc(size_t n)
{
	void *p = malloc(n); /* bt:banana_alloc */

	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

__attribute__((noinline)) void *banana(size_t n)
{
	void *p = banana_alloc(n); /* bt:banana */

	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}
