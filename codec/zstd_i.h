/*
 * The only place zstd is called and its error codes are translated (zstd_glue.c).
 * Frames always carry zstd's content checksum and content size.
 */
#ifndef TFS_ZSTD_I_H
#define TFS_ZSTD_I_H

#include <stddef.h>
#include <stdint.h>

#include "bytes_i.h"

/* Levels up to this one compress with a context the calling thread keeps. */
#define ZS_KEEP_CTX_LEVEL 3

/* Append one zstd frame of @src to @out. @return 0 or -ENOMEM / -EIO */
int zs_compress(struct tfs_buf *out, const void *src, size_t n, int level);

/*
 * A compression context the caller holds over many frames at a slow level (recompressing a
 * section's blocks at save): made once, its tables are reused, not allocated and cleared
 * again for each frame (which took more instructions than the compression itself). NULL on
 * ENOMEM; zs_cctx_free(NULL) does nothing.
 */
struct ZSTD_CCtx_s;
struct ZSTD_CCtx_s *zs_cctx_new(void);
void zs_cctx_free(struct ZSTD_CCtx_s *c);
/* zs_compress() with context @c. */
int zs_compress_with(struct ZSTD_CCtx_s *c, struct tfs_buf *out, const void *src, size_t n,
		     int level);
/*
 * Decompress exactly one frame @src/@n into @dst, which must receive exactly @raw_len
 * bytes. Errors are reported as corruption of @section at @file_off.
 * @return 0, -TFS_ECORRUPT (diag filled) or -ENOMEM
 */
int zs_decompress(const void *src, size_t n, void *dst, size_t raw_len, uint64_t file_off,
		  const char *section, struct tfs_diag *diag);

#endif
