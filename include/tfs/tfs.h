/*
 * tracefs common definitions: error codes, the diagnostic record filled by every parser of
 * untrusted bytes, version constants and the source-frame record both sides of backtraces
 * share. Every other public header includes this one. It deliberately declares no objects:
 * see reader.h (reading traces) and writer.h (making them).
 */
#ifndef TFS_TFS_H
#define TFS_TFS_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Corrupt input: a checksum, length, offset or value read from a file is wrong. */
#define TFS_ECORRUPT EBADMSG
/** The file is a tracefs trace of a format version this build does not read. */
#define TFS_EFORMAT ENOTSUP

/** Container format version this build writes (FORMAT.md §1). */
#define TFS_FORMAT_MAJOR 2
#define TFS_FORMAT_MINOR 3

/**
 * Where and why a parser refused its input. Filled only when a function returns
 * -TFS_ECORRUPT or -TFS_EFORMAT and the caller passed a non-NULL pointer.
 *
 * @offset   absolute byte offset in the trace file of the first bad byte (best effort:
 *           inside a compressed section it is the section's offset)
 * @section  name of the section being read ("header", "grammar", "values"...)
 * @reason   one lowercase line without trailing period
 */
struct tfs_diag {
	uint64_t offset;
	char section[32];
	char reason[160];
};

/**
 * Render a diagnostic as one line "section=S offset=N: reason" into @buf.
 * @return @buf
 */
const char *tfs_diag_str(const struct tfs_diag *diag, char *buf, size_t buf_cap);

/**
 * One source location of a code address (a frame of a symbolised backtrace, FORMAT.md §11):
 * given to tfs_writer_add_symbol(), returned by tfs_trace_symbol().
 */
struct tfs_src_frame {
	const char *function; /**< "main", "std::vector<int>::push_back", "libc.so.6+0x2a1b0" */
	const char *file;     /**< source file, "" when unknown */
	uint32_t line;	      /**< 0 when unknown */
};

/** Timing modes (FORMAT.md §7). */
enum tfs_timing {
	TFS_TIMING_NONE = 0,	 /**< no per-event times */
	TFS_TIMING_LOSSLESS = 1, /**< exact nanoseconds (default) */
	TFS_TIMING_LOSSY = 2,	 /**< start gaps and durations within a relative error */
};

/** How timed streams store their timing columns (tfs_writer_opts.timing_coder). */
enum tfs_coder {
	TFS_CODER_AUTO = 0, /**< range-coded where smaller (FORMAT.md §7.4.2): the default */
	TFS_CODER_FAST = 1, /**< never range-coded: larger, but views decode them faster */
};

/** Library version string, e.g. "0.1.0". */
const char *tfs_version(void);

#ifdef __cplusplus
}
#endif
#endif
