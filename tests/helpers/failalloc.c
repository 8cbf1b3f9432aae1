/*
 * Allocation-failure injection through the linker's --wrap: malloc, calloc and realloc
 * fail once the armed budget is spent. Not thread-aware; single-threaded tests only.
 */
#include <stddef.h>
#include <stdlib.h>

#include "testutil.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);

static long budget = -1;
static long attempts;

void fa_arm(long n)
{
	budget = n;
	attempts = 0;
}

void fa_disarm(void)
{
	budget = -1;
}

long fa_count(void)
{
	return attempts;
}

static int fail_now(void)
{
	if (budget < 0)
		return 0;
	attempts++;
	if (budget == 0)
		return 1;
	budget--;
	return 0;
}

void *__wrap_malloc(size_t n)
{
	return fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	return fail_now() ? NULL : __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
	return fail_now() ? NULL : __real_realloc(p, n);
}
