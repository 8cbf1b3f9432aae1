/*
 * The event kinds of the interposed calls: names, categories and argument encodings, as the
 * consumer declares them to the writer. Encodings follow Pilgrim and Recorder: files are
 * symbolic ids (file#N, one per path in the process, its path stored once in the opening
 * event), sizes, offsets, counts, pointers and results vary per occurrence and are stride
 * predicted by the codec, flags and modes belong to the call signature. errno is the value
 * after a failed call and 0 after a successful one. `fd_file` is no call: it gives the path
 * of a descriptor the program did not open through an interposed call, when first used.
 *
 * Allocations (category alloc: the malloc family, mmap, munmap) carry allocation ids, VAL:
 * `id` the block or mapping the call returned (1, 2, 3... in allocation order, process-wide;
 * a block realloc left in place keeps its id), `freed` the block realloc freed when it
 * moved the data, free's `id` the block it freed (0: unknown or NULL). An I/O call with a
 * buffer records it as `buf_id`, `buf_off`: the live allocation holding it and the offset
 * in it, so a loop reading into one buffer, or walking through one, is one terminal with
 * stride-predicted values; `buf_id` 0 means no live heap block or mapping holds it (a stack
 * or static buffer) and `buf_off` is then its address. readv and writev record their first
 * buffer (0, 0 when the call failed). mmap's `file` is CALL_NO_FILE for an anonymous
 * mapping. The allocating kinds get a last argument `stack` (TFS_ENC_SYM, class "stack") when
 * the spool records backtraces: the consumer appends it (consumer.c), free has none.
 * The allocations' addresses share the value class "addr" and their ids the class "alloc"
 * (FORMAT.md §7.3.1): the codec predicts a freed block's address and id from those the
 * allocating calls returned, a reused block's address from those freed before.
 */
#include <stddef.h>

#include "calls_i.h"

#define ARG(n, t, e, f)                                                                            \
	{                                                                                          \
		n, TFS_TYPE_##t, TFS_ENC_##e, f, NULL                                              \
	}
/* A VAL argument of value class @c (FORMAT.md §4, §7.3.1). */
#define VALC(n, t, f, c)                                                                           \
	{                                                                                          \
		n, TFS_TYPE_##t, TFS_ENC_VAL, f, c                                                 \
	}
#define FILE_ARG(n)                                                                                \
	{                                                                                          \
		n, TFS_TYPE_U64, TFS_ENC_SYM, 0, "file"                                            \
	}
#define RET ARG("ret", I64, VAL, TFS_ARG_RESULT)
#define RET_BYTES ARG("ret", I64, VAL, TFS_ARG_RESULT | TFS_ARG_BYTES)
#define ERRNO ARG("errno", U64, VAL, 0)
#define PTR_RET VALC("ret", HEX, TFS_ARG_RESULT, "addr")
#define ADDR(n) VALC(n, HEX, 0, "addr")
#define SIZE_BYTES ARG("size", U64, VAL, TFS_ARG_BYTES)

#define ID VALC("id", U64, 0, "alloc")
#define BUF ARG("buf_id", U64, VAL, 0), ARG("buf_off", U64, VAL, 0)

static const struct tfs_arg_desc malloc_args[] = {SIZE_BYTES, PTR_RET, ID};
static const struct tfs_arg_desc calloc_args[] = {ARG("nmemb", U64, VAL, 0),
						  ARG("size", U64, VAL, 0), PTR_RET, ID};
static const struct tfs_arg_desc realloc_args[] = {ADDR("ptr"), SIZE_BYTES, PTR_RET, ID,
						   VALC("freed", U64, 0, "alloc")};
static const struct tfs_arg_desc free_args[] = {ADDR("ptr"), ID};
static const struct tfs_arg_desc posix_memalign_args[] = {ARG("alignment", U64, VAL, 0), SIZE_BYTES,
							  ADDR("ptr"), RET, ID};
static const struct tfs_arg_desc aligned_args[] = {ARG("alignment", U64, VAL, 0), SIZE_BYTES,
						   PTR_RET, ID};
static const struct tfs_arg_desc mmap_args[] = {ADDR("addr"),
						ARG("length", U64, VAL, TFS_ARG_BYTES),
						ARG("prot", HEX, SIG, 0),
						ARG("flags", HEX, SIG, 0),
						FILE_ARG("file"),
						ARG("offset", I64, VAL, 0),
						ID,
						PTR_RET,
						ERRNO};
static const struct tfs_arg_desc munmap_args[] = {ADDR("addr"),
						  ARG("length", U64, VAL, 0), RET, ERRNO};

static const struct tfs_arg_desc open_args[] = {ARG("path", STR, STR, 0),
						ARG("flags", HEX, SIG, 0),
						ARG("mode", HEX, SIG, 0),
						FILE_ARG("file"),
						RET,
						ERRNO};
static const struct tfs_arg_desc openat_args[] = {ARG("dirfd", I64, SIG, 0),
						  ARG("path", STR, STR, 0),
						  ARG("flags", HEX, SIG, 0),
						  ARG("mode", HEX, SIG, 0),
						  FILE_ARG("file"),
						  RET,
						  ERRNO};
static const struct tfs_arg_desc creat_args[] = {ARG("path", STR, STR, 0), ARG("mode", HEX, SIG, 0),
						 FILE_ARG("file"), RET, ERRNO};
static const struct tfs_arg_desc file_args[] = {FILE_ARG("file"), RET, ERRNO};
static const struct tfs_arg_desc rw_args[] = {FILE_ARG("file"), ARG("count", U64, VAL, 0), BUF,
					      RET_BYTES, ERRNO};
static const struct tfs_arg_desc prw_args[] = {
    FILE_ARG("file"), ARG("count", U64, VAL, 0), ARG("offset", I64, VAL, 0), BUF, RET_BYTES, ERRNO};
static const struct tfs_arg_desc rwv_args[] = {FILE_ARG("file"), ARG("iovcnt", U64, VAL, 0), BUF,
					       RET_BYTES, ERRNO};
static const struct tfs_arg_desc seek_args[] = {FILE_ARG("file"), ARG("offset", I64, VAL, 0),
						ARG("whence", U64, SIG, 0), RET, ERRNO};
static const struct tfs_arg_desc ftruncate_args[] = {FILE_ARG("file"), ARG("length", I64, VAL, 0),
						     RET, ERRNO};
static const struct tfs_arg_desc unlink_args[] = {ARG("path", STR, STR, 0), RET, ERRNO};
static const struct tfs_arg_desc rename_args[] = {ARG("oldpath", STR, STR, 0),
						  ARG("newpath", STR, STR, 0), RET, ERRNO};
static const struct tfs_arg_desc fopen_args[] = {ARG("path", STR, STR, 0), ARG("mode", STR, STR, 0),
						 FILE_ARG("file"), RET, ERRNO};
static const struct tfs_arg_desc fdopen_args[] = {FILE_ARG("file"), ARG("mode", STR, STR, 0), RET,
						  ERRNO};
static const struct tfs_arg_desc frw_args[] = {
    FILE_ARG("file"), ARG("size", U64, VAL, 0), ARG("nmemb", U64, VAL, 0), BUF, RET, ERRNO};
static const struct tfs_arg_desc fd_file_args[] = {ARG("fd", I64, SIG, 0), ARG("path", STR, STR, 0),
						   FILE_ARG("file")};
static const struct tfs_arg_desc thread_args[] = {
    {"thread", TFS_TYPE_U64, TFS_ENC_SYM, 0, "thread"}, RET};

/* exec is recorded when it is called (it returns only when it fails: exec_failed follows) */
static const struct tfs_arg_desc fork_args[] = {ARG("ret", I64, VAL, TFS_ARG_RESULT), ERRNO};
static const struct tfs_arg_desc exec_args[] = {ARG("path", STR, STR, 0), ARG("argv", STR, STR, 0)};
static const struct tfs_arg_desc exec_failed_args[] = {ARG("path", STR, STR, 0), ERRNO};
static const struct tfs_arg_desc spawn_args[] = {ARG("path", STR, STR, 0), ARG("argv", STR, STR, 0),
						 ARG("pid", I64, VAL, 0), RET};

#define N_ARGS(a) (uint32_t)(sizeof(a) / sizeof((a)[0]))
#define KIND(c, n, cat, a) [c] = {n, cat, N_ARGS(a), a}

const struct tfs_kind_desc cap_call_kinds[N_CALLS] = {
    KIND(CALL_MALLOC, "malloc", "alloc", malloc_args),
    KIND(CALL_CALLOC, "calloc", "alloc", calloc_args),
    KIND(CALL_REALLOC, "realloc", "alloc", realloc_args),
    KIND(CALL_FREE, "free", "alloc", free_args),
    KIND(CALL_POSIX_MEMALIGN, "posix_memalign", "alloc", posix_memalign_args),
    KIND(CALL_ALIGNED_ALLOC, "aligned_alloc", "alloc", aligned_args),
    KIND(CALL_MEMALIGN, "memalign", "alloc", aligned_args),
    KIND(CALL_MMAP, "mmap", "alloc", mmap_args),
    KIND(CALL_MUNMAP, "munmap", "alloc", munmap_args),
    KIND(CALL_OPEN, "open", "io", open_args),
    KIND(CALL_OPENAT, "openat", "io", openat_args),
    KIND(CALL_CREAT, "creat", "io", creat_args),
    KIND(CALL_CLOSE, "close", "io", file_args),
    KIND(CALL_READ, "read", "io", rw_args),
    KIND(CALL_WRITE, "write", "io", rw_args),
    KIND(CALL_PREAD, "pread", "io", prw_args),
    KIND(CALL_PWRITE, "pwrite", "io", prw_args),
    KIND(CALL_READV, "readv", "io", rwv_args),
    KIND(CALL_WRITEV, "writev", "io", rwv_args),
    KIND(CALL_LSEEK, "lseek", "io", seek_args),
    KIND(CALL_FSYNC, "fsync", "io", file_args),
    KIND(CALL_FDATASYNC, "fdatasync", "io", file_args),
    KIND(CALL_FTRUNCATE, "ftruncate", "io", ftruncate_args),
    KIND(CALL_UNLINK, "unlink", "io", unlink_args),
    KIND(CALL_RENAME, "rename", "io", rename_args),
    KIND(CALL_FOPEN, "fopen", "io", fopen_args),
    KIND(CALL_FDOPEN, "fdopen", "io", fdopen_args),
    KIND(CALL_FCLOSE, "fclose", "io", file_args),
    KIND(CALL_FREAD, "fread", "io", frw_args),
    KIND(CALL_FWRITE, "fwrite", "io", frw_args),
    KIND(CALL_FSEEK, "fseek", "io", seek_args),
    KIND(CALL_FFLUSH, "fflush", "io", file_args),
    KIND(CALL_FD_FILE, "fd_file", "io", fd_file_args),
    KIND(CALL_PTHREAD_CREATE, "pthread_create", "thread", thread_args),
    KIND(CALL_PTHREAD_JOIN, "pthread_join", "thread", thread_args),
    KIND(CALL_FORK, "fork", "thread", fork_args),
    KIND(CALL_EXEC, "exec", "thread", exec_args),
    KIND(CALL_EXEC_FAILED, "exec_failed", "thread", exec_failed_args),
    KIND(CALL_SPAWN, "posix_spawn", "thread", spawn_args),
};
