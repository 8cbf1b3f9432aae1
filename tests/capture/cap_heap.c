/*
 * A small program of known heap use for check_heaptrack.py: blocks kept and leaked from two
 * call stacks, temporary blocks freed at once, a large block that makes the peak, calloc and
 * realloc. It prints nothing; it does not check anything itself. `cap_heap N` only churns
 * N temporary blocks (enough to fill a small spool).
 */
#include <stdlib.h>
#include <string.h>

static void *__attribute__((noinline)) keep(size_t n)
{
	void *p = malloc(n);

	if (p)
		memset(p, 1, n);
	return p;
}

static void *__attribute__((noinline)) keep_zeroed(size_t n)
{
	return calloc(n, 4);
}

static void __attribute__((noinline)) churn(int n)
{
	for (int i = 0; i < n; i++) {
		char *volatile t = malloc(64 + i % 7);

		if (t)
			t[0] = 1;
		free(t);
	}
}

int main(int argc, char **argv)
{
	void *kept[16], *grown;
	char *volatile big;

	if (argc > 1) {
		churn(atoi(argv[1]));
		return 0;
	}

	for (int i = 0; i < 16; i++)
		kept[i] = i % 2 ? keep(1000 + i) : keep_zeroed(250 + i);
	churn(200);
	big = malloc(100000);
	if (big)
		memset(big, 0, 100000);
	grown = malloc(100);
	grown = realloc(grown, 5000);
	free(big);
	for (int i = 0; i < 16; i += 4)
		free(kept[i]);
	churn(50);
	return grown ? 0 : 1;
}
