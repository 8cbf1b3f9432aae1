/*
 * The single-file container (FORMAT.md §1-§3): file header, section table, per-section
 * compression and checksums. It moves opaque section payloads in and out; it does not know
 * what is inside them.
 */
#ifndef TFS_CONTAINER_I_H
#define TFS_CONTAINER_I_H

#include <stdint.h>

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
	SEC_TYPE_MAX = 10,
};

#define CTR_HEADER_BYTES 40
#define CTR_ENTRY_BYTES 48
#define CTR_MAX_SECTIONS 1000000u
#define CTR_MAX_RAW (UINT64_C(1) << 30)

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
	struct sec_entry *ents;
	uint32_t n, cap;
};

/* Writes the placeholder header. @return 0 or -errno */
int ctr_writer_init(struct ctr_writer *cw, int fd, int zstd_level);
/* Same, into the empty buffer @mem (the caller owns it). @return 0 or -ENOMEM */
int ctr_writer_init_mem(struct ctr_writer *cw, struct tfs_buf *mem, int zstd_level);
void ctr_writer_fini(struct ctr_writer *cw);
/* ctr_add() @compress: one zstd frame unless that is not smaller than the payload. */
#define CTR_ZSTD_IF_SMALLER 2

/*
 * Append a section. @compress: store as one zstd frame (1), or as one unless raw is
 * smaller (CTR_ZSTD_IF_SMALLER, for types whose readers take both, FORMAT.md §3).
 * @head_len: bytes covered by crc_hd (of the stored bytes; must be all of them when
 * compressed). @return 0 or -errno
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
/* Write table and header. @return 0 or -errno */
int ctr_finish(struct ctr_writer *cw);

/* Reader over a mapped file. */
struct ctr_file {
	const uint8_t *map;
	uint64_t size;
	uint16_t major, minor;
	uint32_t n;
	struct sec_entry *ents;
};

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
/* Check crc_all of section @idx. */
int ctr_check(const struct ctr_file *cf, uint32_t idx, struct tfs_diag *diag);
const char *ctr_type_name(uint32_t type);

#endif
