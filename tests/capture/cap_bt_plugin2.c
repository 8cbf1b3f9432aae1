/*
 * A second library for `cap_bt dlcycle`, loaded after cap_bt_plugin was unloaded and so
 * likely where it was: its plugin_alloc lies elsewhere in it and has another frame (sized
 * at run time), so unwind rules cached for the first library's addresses are wrong here.
 */
#include <alloca.h>
#include <stdlib.h>
#include <string.h>

void *plugin_alloc(size_t n);
int plugin_pad(char *buf, size_t n);

__attribute__((noinline)) int plugin_pad(char *buf, size_t n)
{
	int t = 0;

	for (size_t i = 0; i < n; i++)
		t += buf[i] * (int)i ^ (int)(n - i);
	return t;
}

__attribute__((noinline)) void *plugin_alloc(size_t n)
{
	char *buf = alloca(n % 32 + 16);
	void *p;

	memset(buf, 1, n % 32 + 16);
	p = malloc(n + (size_t)(plugin_pad(buf, n % 32 + 16) == -1)); /* bt:plugin2_alloc */
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}
