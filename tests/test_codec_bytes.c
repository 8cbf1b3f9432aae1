/* Varints, little-endian helpers and the bounded reader. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "bytes_i.h"
#include "testutil.h"

static void test_bytes_varint_round_trip(void **state)
{
	uint64_t seed = tu_seed(__func__);
	struct tfs_buf b;
	struct tfs_rd r;
	uint64_t vals[4096];

	buf_init(&b);
	for (size_t i = 0; i < 4096; i++) {
		vals[i] = tu_rand(&seed) >> tu_below(&seed, 64);
		if (i < 3)
			vals[i] = i == 2 ? UINT64_MAX : i;
		assert_int_equal(buf_put_varint(&b, vals[i]), 0);
	}
	rd_init(&r, b.data, b.len, 0, "test", NULL);
	for (size_t i = 0; i < 4096; i++) {
		uint64_t v;

		assert_int_equal(rd_varint(&r, &v), 0);
		assert_true(v == vals[i]);
	}
	assert_int_equal(rd_left(&r), 0);
	buf_fini(&b);
}

static void test_bytes_zigzag_extremes(void **state)
{
	int64_t v[] = {0, -1, 1, INT64_MIN, INT64_MAX, -123456789};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		assert_true(zigzag_dec(zigzag_enc(v[i])) == v[i]);
	assert_true(zigzag_enc(-1) == 1);
	assert_true(zigzag_enc(1) == 2);
}

static void test_bytes_reader_rejects_truncation_with_offset(void **state)
{
	const uint8_t data[] = {0x80, 0x80};
	struct tfs_diag d;
	struct tfs_rd r;
	uint64_t v;
	uint32_t u;

	memset(&d, 0, sizeof(d));
	rd_init(&r, data, sizeof(data), 100, "grammar", &d);
	assert_int_equal(rd_varint(&r, &v), -TFS_ECORRUPT);
	assert_string_equal(d.section, "grammar");
	assert_true(d.offset == 102);
	rd_init(&r, data, sizeof(data), 0, "x", NULL);
	assert_int_equal(rd_u32(&r, &u), -TFS_ECORRUPT);
}

static void test_bytes_reader_rejects_overlong_varint(void **state)
{
	uint8_t data[11];
	struct tfs_rd r;
	uint64_t v;

	memset(data, 0xff, sizeof(data));
	rd_init(&r, data, sizeof(data), 0, "x", NULL);
	assert_int_equal(rd_varint(&r, &v), -TFS_ECORRUPT);
	data[9] = 0x02; /* 10th byte may only carry bit 63 */
	rd_init(&r, data, sizeof(data), 0, "x", NULL);
	assert_int_equal(rd_varint(&r, &v), -TFS_ECORRUPT);
	data[9] = 0x01;
	rd_init(&r, data, sizeof(data), 0, "x", NULL);
	assert_int_equal(rd_varint(&r, &v), 0);
	assert_true(v == UINT64_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bytes_varint_round_trip),
		cmocka_unit_test(test_bytes_zigzag_extremes),
		cmocka_unit_test(test_bytes_reader_rejects_truncation_with_offset),
		cmocka_unit_test(test_bytes_reader_rejects_overlong_varint),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
