/*
 * libFuzzer target for the files of symbolised addresses kept between recordings
 * (capture/symdisk.c): the input is a file's bytes. Its checksum is made right first and
 * the identity it names is the one asked for, so that mutations reach the entries. It
 * checks that any bytes are read without a read outside them, a crash, a leak or a hang,
 * that checking alone and reading into a cache agree, and that what was read is written
 * back to a file that reads again the same and is written again byte for byte the same.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "symbols_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cap_symcache *c, *again;
	uint64_t h = 0xcbf29ce484222325u;
	uint8_t *b, *out;
	char id[256];
	uint32_t id_len = 0;
	size_t out_len;
	long n, checked;

	if (size < 24 || size > (1u << 20))
		return 0;
	b = malloc(size);
	if (!b)
		return 0;
	memcpy(b, data, size);
	for (size_t i = 0; i < size - 8; i++)
		h = (h ^ b[i]) * 0x100000001b3u;
	memcpy(b + size - 8, &h, 8);
	memcpy(&id_len, b + 8, 4);
	if (id_len >= sizeof(id) || 12 + (size_t)id_len > size - 8)
		id_len = 0;
	memcpy(id, b + 12, id_len);
	id[id_len] = 0;
	if (strlen(id) != id_len)
		id[0] = 0;
	checked = cap_symdisk_parse(b, size, id, NULL);
	if (cap_symcache_new(&c) == 0) {
		n = cap_symdisk_parse(b, size, id, c);
		if (n != -ENOMEM && (n < 0) != (checked < 0))
			abort(); /* checking and reading disagree */
		if (n >= 0 && cap_symdisk_build(c, id, &out, &out_len) == 0) {
			if (cap_symcache_new(&again) == 0) {
				uint8_t *out2;
				size_t len2;

				if (cap_symdisk_parse(out, out_len, id, again) != n ||
				    cap_symcache_n(again) != cap_symcache_n(c))
					abort(); /* written back, it reads otherwise */
				if (cap_symdisk_build(again, id, &out2, &len2) == 0) {
					if (len2 != out_len || memcmp(out, out2, len2))
						abort(); /* a string, line or frame changed */
					free(out2);
				}
				cap_symcache_free(again);
			}
			free(out);
		}
		cap_symcache_free(c);
	}
	free(b);
	return 0;
}
