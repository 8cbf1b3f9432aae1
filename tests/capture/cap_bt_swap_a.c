/*
 * One of two libraries `cap_bt dlswap` loads in turn at one address (cap_bt_swap_b.c is
 * the other): the same size of code laid out alike, other function names, so that a frame
 * of one named after the other would show.
 */
#include <stdlib.h>

void *apple(size_t n);

__attribute__((noinline)) static void *apple_alloc(size_t n)
{
	void *p = malloc(n); /* bt:apple_alloc */

	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

__attribute__((noinline)) void *apple(size_t n)
{
	void *p = apple_alloc(n); /* bt:apple */

	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}
