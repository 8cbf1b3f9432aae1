/*
 * The single-file container (FORMAT.md §1-§3): file header, section table, per-section
 * compression and checksums. It moves opaque section payloads in and out; it does not know
 * what is inside them.
 */
#ifndef TFS_CONTAINER_I_H
#define TFS_CONTAINER_I_H

#include <stdbool.h>
#include <stdint.h>

#include "tfs/tfs.h"

#include "bytes_i.h"

enum {
	SEC_META = 1,
	SEC_SCHEMA = 2,
	SEC_STRINGS = 3,
	SEC_CST = 4,
	SEC_STREAMS = 5,
	SEC_GRAMMAR = 6,
	SEC_VALUES = 7,
	SEC_BACKTRACES = 8,
	SEC_SYMBOLS = 9,
	SEC_VPATCH = 10,
	SEC_NAMES = 11,	   /* since 2.1 */
	SEC_ARGFLAGS = 12, /* since 2.1 */
	SEC_TYPE_MAX = 12,
};

enum {
	CTR_CODEC_RAW = 0,
	CTR_CODEC_ZSTD = 1,
	CTR_CODEC_PACKED = 2, /* format 2: the bytes lie in the section table (FORMAT.md §2) */
};

#define CTR_HEADER_BYTES 40
#define CTR_ENTRY_BYTES_V1 48 /* format 1.x table entries (FORMAT.md §A) */
#define CTR_MAX_SECTIONS 1000000u
#define CTR_MAX_RAW (UINT64_C(1) << 30)
#define CTR_MAX_TABLE_RAW (UINT64_C(1) << 26) /* FORMAT.md §1: 10^6 entries + packed bytes */
#define CTR_PACK_MAX 65536u	       /* largest packed section (FORMAT.md §2) */
#define CTR_PACK_TOTAL (1u << 20)      /* packed bytes per file (FORMAT.md §2) */

/*
 * A section: for codec 0 and 1 @off is its file offset, for CTR_CODEC_PACKED the offset
 * of its bytes among the packed payloads (then stored = raw = head_len and both crcs are
 * the CRC of the bytes, computed in memory: the table's checksum covers them on disk).
 */
struct sec_entry {
	uint16_t type, codec;
	uint32_t aux;
	uint64_t off, stored, raw;
	uint32_t crc_all, crc_head;
	uint64_t head_len;
};

/*
 * Writer: sections are written sequentially to @fd (or appended to @mem when it is not
 * NULL), then the table and the header.
 */
struct ctr_writer {
	int fd;
	struct tfs_buf *mem;
	uint64_t off;
	int zstd_level;
	size_t large_bytes; /* payloads above: at large_level at most (ctr_level()) */
	int large_level;
	struct sec_entry *ents;
	uint32_t n, cap;
	struct tfs_buf pack; /* payloads of the packed sections, in entry order */
};

/* Writes the placeholder header. @return 0 or -errno */
int ctr_writer_init(struct ctr_writer *cw, int fd, int zstd_level);
/* Same, into the empty buffer @mem (the caller owns it). @return 0 or -ENOMEM */
int ctr_writer_init_mem(struct ctr_writer *cw, struct tfs_buf *mem, int zstd_level);
void ctr_writer_fini(struct ctr_writer *cw);
/*
 * The one rule for how hard a writer compresses: a payload (section or table) of more than
 * cw->large_bytes is compressed at cw->large_level at most, whatever level was asked. A
 * writer starts with CTR_LARGE_BYTES and CTR_LARGE_LEVEL: level 19 runs at about 3 MB/s and
 * level 9 at about 20 MB/s here, and on cc1's 242 KiB grammar 9 was 7% larger (0.2% of the
 * trace) and saved 60 ms, about 2% of recording it (tests/bench/run_recorder). A merge,
 * which runs at MPI_Finalize in log2(P) rounds, sets its own (merge.c). Small payloads,
 * where the last percent is cheap, keep the level asked.
 */
#define CTR_LARGE_BYTES (64u << 10)
#define CTR_LARGE_LEVEL 9
/* The level at which @cw compresses @n bytes (ctr_add(), ctr_finish()). */
int ctr_level(const struct ctr_writer *cw, size_t n);

/* ctr_add() @compress: one zstd frame unless that is not smaller than the payload. */
#define CTR_ZSTD_IF_SMALLER 2

/*
 * Append a section. @compress: store as one zstd frame (1), or as one unless raw is
 * smaller (CTR_ZSTD_IF_SMALLER, for types whose readers take both, FORMAT.md §3); either
 * packs a payload of at most CTR_PACK_MAX bytes into the table instead while the file's
 * packed bytes stay within CTR_PACK_TOTAL. @head_len: bytes covered by crc_hd (of the
 * stored bytes; must be all of them when compressed). @return 0 or -errno
 */
int ctr_add(struct ctr_writer *cw, uint16_t type, int compress, const void *data, size_t n,
	    size_t head_len);
/*
 * Append a section whose stored bytes and entry come from another trace as they are
 * (a merge copies sections it does not change): @e's codec, raw size, checksums and
 * head_len are kept, its offset is replaced. The caller checked crc_all.
 * @return 0 or -errno
 */
int ctr_add_stored(struct ctr_writer *cw, const struct sec_entry *e, const void *stored);
/*
 * The stored bytes of section @idx of @cw (the writer must write to memory, or the
 * section must be packed): for comparing a section with one about to be copied.
 */
const uint8_t *ctr_writer_bytes(const struct ctr_writer *cw, uint32_t idx);
/* Write table and header. @return 0 or -errno */
int ctr_finish(struct ctr_writer *cw);

/* Reader over a mapped file. */
struct ctr_file {
	const uint8_t *map;
	uint64_t size;
	uint16_t major, minor;
	uint32_t n;
	struct sec_entry *ents;
	uint64_t table_off;   /* where the table starts in the file */
	uint64_t table_len, table_raw; /* its stored and decompressed bytes */
	uint8_t *table;	      /* format 2: the decompressed table (owned) */
	const uint8_t *pack;  /* format 2: the packed payloads, inside @table */
};

/* Whether @cf's format is @major.@minor or later. */
static inline bool ctr_at_least(const struct ctr_file *cf, uint16_t major, uint16_t minor)
{
	return cf->major > major || (cf->major == major && cf->minor >= minor);
}

/* Whether @cf is of a newer minor than this build knows (FORMAT.md §1: fields to skip). */
static inline bool ctr_newer_minor(const struct ctr_file *cf)
{
	return cf->major == 1 ? cf->minor > 1 : cf->minor > TFS_FORMAT_MINOR;
}

/* Parse and check header and table (not the sections). @return 0, -TFS_ECORRUPT,
 * -TFS_EFORMAT or -ENOMEM */
int ctr_parse(struct ctr_file *cf, const uint8_t *map, uint64_t size, struct tfs_diag *diag);
void ctr_fini(struct ctr_file *cf);
/*
 * Check section @idx's crc_hd and give its payload: borrowed from the map when stored
 * raw (*owned NULL), else decompressed into *owned (caller frees).
 */
int ctr_load(const struct ctr_file *cf, uint32_t idx, uint8_t **owned, const uint8_t **data,
	     size_t *len, struct tfs_diag *diag);
/* Check crc_all of section @idx (packed sections were checked with the table). */
int ctr_check(const struct ctr_file *cf, uint32_t idx, struct tfs_diag *diag);
/* The stored bytes of section @idx (in the map, or among the packed payloads). */
const uint8_t *ctr_bytes(const struct ctr_file *cf, uint32_t idx);
/*
 * Append section @idx of @cf to @cw as it is (after checking crc_all), or packed again
 * when it is packed in @cf. @return 0 or -errno / -TFS_ECORRUPT (diag filled)
 */
int ctr_copy(struct ctr_writer *cw, const struct ctr_file *cf, uint32_t idx,
	     struct tfs_diag *diag);
/* The file offset a user can look at for section @idx: its own, or the table's. */
uint64_t ctr_file_off(const struct ctr_file *cf, uint32_t idx);
const char *ctr_type_name(uint32_t type);

#endif
