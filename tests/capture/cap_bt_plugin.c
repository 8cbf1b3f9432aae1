/*
 * A library cap_bt loads with dlopen after it started: its allocation's backtrace runs
 * through an object the capture learns of only then.
 */
#include <stdlib.h>

void *plugin_alloc(size_t n);

__attribute__((noinline)) void *plugin_alloc(size_t n)
{
	void *p = malloc(n); /* bt:plugin_alloc */

	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}
