/*
 * zstd compression and decompression of single frames, and the one translation of zstd
 * errors into tracefs errors. Each thread keeps one decompression context, because readers
 * decompress many small value blocks and creating a context costs about as much as the
 * block, and likewise one compression context for fast levels (values blocks at capture);
 * slower levels, used for whole sections at save, get a context per call, or one their
 * caller holds over many frames (zs_cctx_new: a section's blocks recompressed at save).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "zstd_i.h"

/* This thread's kept contexts, created on first use, freed when the thread ends. */
struct zs_thread {
	ZSTD_CCtx *c; /* for fast levels */
	ZSTD_DCtx *d;
};

static pthread_key_t ctx_key;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;
static int ctx_key_ok;

static void ctx_free(void *p)
{
	struct zs_thread *t = p;

	ZSTD_freeCCtx(t->c);
	ZSTD_freeDCtx(t->d);
	free(t);
}

static void ctx_key_init(void)
{
	ctx_key_ok = pthread_key_create(&ctx_key, ctx_free) == 0;
}

/* NULL on ENOMEM. */
static struct zs_thread *thread_ctx(void)
{
	struct zs_thread *t;

	pthread_once(&ctx_once, ctx_key_init);
	if (!ctx_key_ok)
		return NULL;
	t = pthread_getspecific(ctx_key);
	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (t && pthread_setspecific(ctx_key, t) != 0) {
		free(t);
		return NULL;
	}
	return t;
}

/*
 * This thread's compression context for fast levels, kept: creating one costs more than
 * compressing a 16 KiB values block at level 3. NULL on ENOMEM.
 */
static ZSTD_CCtx *thread_cctx(void)
{
	struct zs_thread *t = thread_ctx();

	if (t && !t->c)
		t->c = ZSTD_createCCtx();
	return t ? t->c : NULL;
}

struct ZSTD_CCtx_s *zs_cctx_new(void)
{
	return ZSTD_createCCtx();
}

void zs_cctx_free(struct ZSTD_CCtx_s *c)
{
	ZSTD_freeCCtx(c);
}

int zs_compress_with(struct ZSTD_CCtx_s *cctx, struct tfs_buf *out, const void *src, size_t n,
		     int level)
{
	size_t bound = ZSTD_compressBound(n);
	size_t got;
	int rc;

	rc = buf_reserve(out, bound);
	if (rc < 0)
		return rc;
	if (!cctx)
		return -ENOMEM;
	ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
	got = ZSTD_compress2(cctx, out->data + out->len, bound, src, n);
	if (ZSTD_isError(got))
		return ZSTD_getErrorCode(got) == ZSTD_error_memory_allocation ? -ENOMEM : -EIO;
	out->len += got;
	return 0;
}

int zs_compress(struct tfs_buf *out, const void *src, size_t n, int level)
{
	/* slow levels get a context of their own: theirs are large, and rare */
	ZSTD_CCtx *cctx;
	int rc;

	if (level <= ZS_KEEP_CTX_LEVEL)
		return zs_compress_with(thread_cctx(), out, src, n, level);
	cctx = zs_cctx_new();
	rc = zs_compress_with(cctx, out, src, n, level);
	zs_cctx_free(cctx);
	return rc;
}

/* This thread's decompression context; NULL on ENOMEM. */
static ZSTD_DCtx *thread_dctx(void)
{
	struct zs_thread *t = thread_ctx();

	if (t && !t->d)
		t->d = ZSTD_createDCtx();
	return t ? t->d : NULL;
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
