/*
 * zstd compression and decompression of single frames, and the one translation of zstd
 * errors into tracefs errors. Contexts are created per call: callers that need speed keep
 * blocks large enough for that not to matter.
 */
#include <zstd.h>
#include <zstd_errors.h>

#include "zstd_i.h"

int zs_compress(struct tfs_buf *out, const void *src, size_t n, int level)
{
	ZSTD_CCtx *cctx;
	size_t bound = ZSTD_compressBound(n);
	size_t got;
	int rc;

	rc = buf_reserve(out, bound);
	if (rc < 0)
		return rc;
	cctx = ZSTD_createCCtx();
	if (!cctx)
		return -ENOMEM;
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
	got = ZSTD_compress2(cctx, out->data + out->len, bound, src, n);
	ZSTD_freeCCtx(cctx);
	if (ZSTD_isError(got))
		return ZSTD_getErrorCode(got) == ZSTD_error_memory_allocation ? -ENOMEM : -EIO;
	out->len += got;
	return 0;
}

int zs_decompress(const void *src, size_t n, void *dst, size_t raw_len, uint64_t file_off,
		  const char *section, struct tfs_diag *diag)
{
	unsigned long long size = ZSTD_getFrameContentSize(src, n);
	ZSTD_DCtx *dctx;
	size_t got;

	if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
		return diag_set(diag, -TFS_ECORRUPT, file_off, section, "bad zstd frame header");
	if (size != raw_len)
		return diag_set(diag, -TFS_ECORRUPT, file_off, section,
				"zstd frame holds %llu bytes, expected %zu", size, raw_len);
	if (ZSTD_findFrameCompressedSize(src, n) != n)
		return diag_set(diag, -TFS_ECORRUPT, file_off, section,
				"zstd frame does not fill its %zu bytes", n);
	dctx = ZSTD_createDCtx();
	if (!dctx)
		return -ENOMEM;
	got = ZSTD_decompressDCtx(dctx, dst, raw_len, src, n);
	ZSTD_freeDCtx(dctx);
	if (ZSTD_isError(got)) {
		if (ZSTD_getErrorCode(got) == ZSTD_error_memory_allocation)
			return -ENOMEM;
		return diag_set(diag, -TFS_ECORRUPT, file_off, section, "zstd: %s",
				ZSTD_getErrorName(got));
	}
	if (got != raw_len)
		return diag_set(diag, -TFS_ECORRUPT, file_off, section,
				"zstd frame decoded to %zu bytes, expected %zu", got, raw_len);
	return 0;
}
