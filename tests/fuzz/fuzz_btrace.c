/*
 * libFuzzer target for the backtrace stream decoder (FORMAT.md §10): decodes the input as a
 * whole payload, alternating a full and a two-frame caller buffer. It does not check the
 * frames: only that hostile bytes are refused without crashing, leaking or overreading.
 */
#include <stddef.h>
#include <stdint.h>

#include "btrace_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint64_t frames[BT_MAX_FRAMES];
	struct tfs_diag diag = {0};
	struct tfs_btdec d;
	uint64_t i = 0;
	uint32_t n;

	if (btdec_init(&d, data, size, 0, &diag) < 0)
		return 0;
	while (btdec_next(&d, frames, (i++ & 1) ? 2 : BT_MAX_FRAMES, &n) == 1)
		;
	btdec_fini(&d);
	return 0;
}
