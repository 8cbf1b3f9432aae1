/*
 * zstd compression and decompression of single frames, and the one translation of zstd
 * errors into tracefs errors. Each thread keeps one decompression context, because readers
 * decompress many small value blocks and creating a context costs about as much as the
 * block, and likewise one compression context for fast levels (values blocks at capture);
 * slower levels, used for whole sections at save, get a context per call.
 */
#include <pthread.h>
#include <stdbool.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "zstd_i.h"

static pthread_key_t cctx_key;
static pthread_once_t cctx_once = PTHREAD_ONCE_INIT;
static int cctx_key_ok;

static void cctx_free(void *p)
{
	ZSTD_freeCCtx(p);
}

static void cctx_key_init(void)
{
	cctx_key_ok = pthread_key_create(&cctx_key, cctx_free) == 0;
}

/*
 * This thread's compression context for fast levels, kept: creating one costs more than
 * compressing a 16 KiB values block at level 3. NULL on ENOMEM.
 */
static ZSTD_CCtx *thread_cctx(void)
{
	ZSTD_CCtx *c;

	pthread_once(&cctx_once, cctx_key_init);
	if (!cctx_key_ok)
		return NULL;
	c = pthread_getspecific(cctx_key);
	if (c)
		return c;
	c = ZSTD_createCCtx();
	if (c && pthread_setspecific(cctx_key, c) != 0) {
		ZSTD_freeCCtx(c);
		return NULL;
	}
	return c;
}

int zs_compress(struct tfs_buf *out, const void *src, size_t n, int level)
{
	/* slow levels get a context of their own: theirs are large, and rare */
	const bool keep = level <= ZS_KEEP_CTX_LEVEL;
	ZSTD_CCtx *cctx;
	size_t bound = ZSTD_compressBound(n);
	size_t got;
	int rc;

	rc = buf_reserve(out, bound);
	if (rc < 0)
		return rc;
	cctx = keep ? thread_cctx() : ZSTD_createCCtx();
	if (!cctx)
		return -ENOMEM;
	ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
	got = ZSTD_compress2(cctx, out->data + out->len, bound, src, n);
	if (!keep)
		ZSTD_freeCCtx(cctx);
	if (ZSTD_isError(got))
		return ZSTD_getErrorCode(got) == ZSTD_error_memory_allocation ? -ENOMEM : -EIO;
	out->len += got;
	return 0;
}

static pthread_key_t dctx_key;
static pthread_once_t dctx_once = PTHREAD_ONCE_INIT;
static int dctx_key_ok;

static void dctx_free(void *p)
{
	ZSTD_freeDCtx(p);
}

static void dctx_key_init(void)
{
	dctx_key_ok = pthread_key_create(&dctx_key, dctx_free) == 0;
}

/* This thread's decompression context; NULL on ENOMEM. */
static ZSTD_DCtx *thread_dctx(void)
{
	ZSTD_DCtx *d;

	pthread_once(&dctx_once, dctx_key_init);
	if (!dctx_key_ok)
		return NULL;
	d = pthread_getspecific(dctx_key);
	if (d)
		return d;
	d = ZSTD_createDCtx();
	if (d && pthread_setspecific(dctx_key, d) != 0) {
		ZSTD_freeDCtx(d);
		return NULL;
	}
	return d;
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
	dctx = thread_dctx();
	if (!dctx)
		return -ENOMEM;
	got = ZSTD_decompressDCtx(dctx, dst, raw_len, src, n);
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
