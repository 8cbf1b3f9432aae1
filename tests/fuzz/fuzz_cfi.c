/*
 * libFuzzer target for the CFI reader of the allocation backtraces (capture/cfi.c): the
 * input is a 2-byte offset of an FDE, an 8-byte code address, then an .eh_frame image. It
 * does not check the rule: only that any bytes are read without a read outside the image,
 * a crash or a hang.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cfi_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint16_t off;
	uint64_t pc;

	if (size < 10)
		return 0;
	memcpy(&off, data, 2);
	memcpy(&pc, data + 2, 8);
	data += 10;
	size -= 10;
	if (off > size)
		return 0;
	(void)cap_cfi_rule_fde(data + off, data, data + size, (uintptr_t)pc);
	return 0;
}
