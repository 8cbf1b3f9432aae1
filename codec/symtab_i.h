/*
 * Symbols section payload (FORMAT.md §11): code addresses of one rank mapped to 1..64 source
 * frames {function, file, line}, outermost first. The encoder collects symbols in any order
 * and writes them sorted by address, delta-coded, with every string stored once; the decoder
 * turns a payload into a table searched by address. Compression and the container are not
 * its business, nor are backtraces.
 */
#ifndef TFS_SYMTAB_I_H
#define TFS_SYMTAB_I_H

#include <stddef.h>
#include <stdint.h>

#include "bytes_i.h"
#include "intern_i.h"
#include "tfs/writer.h"

#define SYM_MAX_FRAMES 64u
#define SYM_MAX_STR 65535u

/* One symbolised address, as recorded by symenc_add. */
struct sym_ent {
	uint64_t addr;
	/* in symenc.recs: varint n, then n x (varint function, varint file, varint line) */
	size_t rec_off, rec_len;
};

struct symenc {
	struct intern strs;  /* function and file names */
	struct intern addrs; /* 8-byte keys: the addresses seen, to refuse duplicates */
	struct tfs_buf recs;
	struct sym_ent *ents; /* [n_ents], in the order added */
	uint32_t n_ents, ents_cap;
};

void symenc_init(struct symenc *e);
void symenc_fini(struct symenc *e);
/*
 * Record @n source frames of @addr (strings copied). @return 0, -EEXIST (@addr recorded
 * before), -EINVAL (@n 0 or over 64, a NULL or over-long string) or
 * -ENOMEM (nothing recorded; strings may stay interned, unused)
 */
int symenc_add(struct symenc *e, uint64_t addr, const struct tfs_src_frame *frames, uint32_t n);
/* Append the §11 payload to @out (unchanged on failure). @return 0 or -ENOMEM */
int symenc_finish(struct symenc *e, struct tfs_buf *out);

/* A decoded symbols section: every pointer owned by the table. */
struct symtab {
	uint64_t n_addrs;
	uint64_t *addrs; /* [n_addrs], strictly increasing */
	uint64_t *first; /* [n_addrs + 1]: frames of address i are frames[first[i]..] */
	struct tfs_src_frame *frames;
	char *arena;	   /* the strings, each NUL-terminated */
	const char **strs; /* [n_strings] into arena */
};

/*
 * Decode a whole §11 payload. @file_off is the section's file offset, which every
 * diagnostic reports (the payload is compressed). On error the table is left empty.
 * @return 0, -TFS_ECORRUPT (diag filled, section "symbols") or -ENOMEM
 */
int symtab_decode(struct symtab *st, const uint8_t *data, size_t len, uint64_t file_off,
		  struct tfs_diag *diag);
void symtab_fini(struct symtab *st);
/* Frames of @addr, or 0 frames (and NULL) when it is not in the table. */
uint32_t symtab_find(const struct symtab *st, uint64_t addr, const struct tfs_src_frame **frames);

#endif
