/*
 * A libFuzzer target as a plain program, for the test suite (and its ASan+UBSan build):
 * each file given runs through LLVMFuzzerTestOneInput() as is, then in MUTATIONS mutants
 * made by a seeded PRNG (bit flips, byte and 64-bit overwrites, truncations, repeated
 * spans), the way libFuzzer would start. It prints the seed so a failure can be replayed.
 * It does not search for coverage: `.ci/test` runs the real fuzzer.
 *
 * Usage: fuzz_<target>_replay SEED MUTATIONS FILE...   (exit 0, or a crash is the finding)
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Mutate @p (@size bytes, room for 2 * @size) in place; @return its new size. */
static size_t mutate(uint8_t *p, size_t size)
{
	size_t at = size ? rnd() % size : 0;

	switch (rnd() % 5) {
	case 0:
		for (int i = 1 + (int)(rnd() % 3); i > 0 && size; i--)
			p[rnd() % size] ^= (uint8_t)(1u << (rnd() % 8));
		return size;
	case 1:
		if (size)
			p[at] = (uint8_t)rnd();
		return size;
	case 2: { /* a large count or offset where one may be */
		uint64_t v = rnd() % 2 ? UINT64_MAX >> (rnd() % 40) : rnd() % 70000;

		for (int i = 0; i < 8 && at + (size_t)i < size; i++)
			p[at + (size_t)i] = (uint8_t)(v >> (8 * i));
		return size;
	}
	case 3:
		return at;
	default: { /* a span repeated after itself */
		size_t len = size - at < 64 ? size - at : 64;

		memmove(p + at + len, p + at, size - at);
		return size + len;
	}
	}
}

int main(int argc, char **argv)
{
	uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 1;
	long mutations = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
	long runs = 0;

	if (argc < 4) {
		fprintf(stderr, "usage: %s SEED MUTATIONS FILE...\n", argv[0]);
		return 2;
	}
	rng_state = seed ? seed : 1;
	printf("# seed %" PRIu64 ", %ld mutants a file\n", seed, mutations);
	for (int a = 3; a < argc; a++) {
		FILE *f = fopen(argv[a], "rb");
		uint8_t *orig, *p;
		long size;

		if (!f || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
		    fseek(f, 0, SEEK_SET) != 0) {
			fprintf(stderr, "cannot read %s\n", argv[a]);
			return 1;
		}
		orig = malloc((size_t)size + 1);
		p = malloc(2 * (size_t)size + 1);
		if (!orig || !p || fread(orig, 1, (size_t)size, f) != (size_t)size) {
			fprintf(stderr, "cannot read %s\n", argv[a]);
			return 1;
		}
		fclose(f);
		LLVMFuzzerTestOneInput(orig, (size_t)size);
		for (long m = 0; m < mutations; m++) {
			memcpy(p, orig, (size_t)size);
			LLVMFuzzerTestOneInput(p, mutate(p, (size_t)size));
		}
		runs += 1 + mutations;
		free(orig);
		free(p);
	}
	printf("ok - %ld inputs ran clean\n1..1\n", runs);
	return 0;
}
