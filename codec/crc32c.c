/*
 * CRC-32C (Castagnoli), table driven, slicing by 8 bytes. Used for the header, the section
 * table and every section (FORMAT.md §1, §2). It does not use CPU crc instructions: a
 * portable table is fast enough for the sizes checksummed at open.
 */
#include <pthread.h>

#include "crc32c_i.h"

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82f63b78u & -(c & 1));
		table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int s = 1; s < 8; s++)
			table[s][i] = (table[s - 1][i] >> 8) ^ table[0][table[s - 1][i] & 0xff];
}

uint32_t crc32c_update(uint32_t crc, const void *data, size_t n)
{
	const uint8_t *p = data;
	uint32_t c = ~crc;

	pthread_once(&table_once, table_init);
	while (n >= 8) {
		uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
				   (uint32_t)p[3] << 24);

		c = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^
		    table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^ table[3][p[4]] ^
		    table[2][p[5]] ^ table[1][p[6]] ^ table[0][p[7]];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
	return ~c;
}

uint32_t crc32c(const void *data, size_t n)
{
	return crc32c_update(0, data, n);
}
