/* CRC-32C of FORMAT.md (Castagnoli, reflected, init/xorout 0xffffffff). */
#ifndef TFS_CRC32C_I_H
#define TFS_CRC32C_I_H

#include <stddef.h>
#include <stdint.h>

uint32_t crc32c(const void *data, size_t n);
/* Continue a CRC: crc32c_update(crc32c(a), b) == crc32c(a || b). Start with 0. */
uint32_t crc32c_update(uint32_t crc, const void *data, size_t n);

#endif
