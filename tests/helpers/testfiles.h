/*
 * Whole-file helpers of the cmocka tests (include after cmocka.h): read a file into memory,
 * write bytes to a file; any failure fails the test.
 */
#ifndef TFS_TESTFILES_H
#define TFS_TESTFILES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The bytes of @path (one spare byte after them), *@n their count. Caller frees. */
static inline uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p;
	long len;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	assert_true(len >= 0);
	assert_int_equal(fseek(f, 0, SEEK_SET), 0);
	p = malloc((size_t)len + 1);
	assert_non_null(p);
	assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	*n = (size_t)len;
	return p;
}

/* Replace @path with the @n bytes at @p. */
static inline void spit(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, n, f), n);
	fclose(f);
}

#endif
