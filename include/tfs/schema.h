/*
 * Event schema: every event kind (a zone, a malloc, a pwrite, an MPI_Isend...) is declared
 * once as data: its name and its arguments' names, types and encodings. The encoder, the
 * decoder and every renderer work from this one description, and the schema is stored in
 * each trace so readers render kinds they were not compiled with (FORMAT.md §4).
 */
#ifndef TFS_SCHEMA_H
#define TFS_SCHEMA_H

#include <stdint.h>

#include "tfs/tfs.h"

#ifdef __cplusplus
extern "C" {
#endif

/** How an argument's value is printed. */
enum tfs_arg_type {
	TFS_TYPE_U64 = 0, /**< unsigned decimal */
	TFS_TYPE_I64 = 1, /**< signed decimal (value carried as int64_t in tfs_arg.i) */
	TFS_TYPE_HEX = 2, /**< 0x-prefixed hexadecimal (addresses, flags) */
	TFS_TYPE_STR = 3, /**< string; its encoding must be TFS_ENC_STR */
	TFS_TYPE_COUNT
};

/** Where an argument's value is stored. */
enum tfs_arg_enc {
	TFS_ENC_SIG = 0,  /**< part of the call signature (stored once, in the CST) */
	TFS_ENC_SYM = 1,  /**< symbolic id (file, communicator...), part of the signature */
	TFS_ENC_RANK = 2, /**< a rank, stored relative to the caller's rank in the signature */
	TFS_ENC_VAL = 3,  /**< varies per occurrence: value stream with stride prediction */
	TFS_ENC_STR = 4,  /**< string stored once in the string table, id in the signature */
	TFS_ENC_RVAL = 5, /**< a signed value (an MPI tag), literal or the caller's rank plus a
			       constant: in the signature (tfs_rval()) */
	TFS_ENC_COUNT
};

/** Argument flags (FORMAT.md §4; bits 2 to 4 since format 2.1, stored as §4.1 says). */
#define TFS_ARG_RESULT 0x1u /**< the call's result: rendered after "=" */
#define TFS_ARG_BYTES 0x2u  /**< a byte count the call moved or allocated (profiles sum it) */
/**
 * A TFS_ENC_SYM argument that annotates the argument before it in schema order: its id's
 * name (tfs_writer_set_name()) prints right after that argument's value, as
 * `fd=3</etc/passwd>` or `= 4<pipe:[77]>` (FORMAT.md §9). Not on the first argument, nor on
 * a result, nor after another attached argument.
 */
#define TFS_ARG_ATTACH 0x4u
/**
 * On a TFS_ENC_SYM argument (a file): the call read the bytes it moved (its TFS_ARG_BYTES
 * arguments) from what this argument names, as read() from its descriptor's file.
 */
#define TFS_ARG_INPUT 0x8u
/** On a TFS_ENC_SYM argument: the call wrote its bytes to what it names (write()). */
#define TFS_ARG_OUTPUT 0x10u
/** Every flag above. */
#define TFS_ARG_FLAGS_ALL 0x1fu

/**
 * The symbolic id of no symbol (an anonymous mapping's file): views print it as -1, where
 * another id prints as <sym_class>#<id> (FORMAT.md §9).
 */
#define TFS_SYM_NONE UINT64_C(0xffffffff)

/** Limits a schema must respect (checked by the writer and the reader). */
#define TFS_MAX_ARGS 32
#define TFS_MAX_NAME 255

/** One argument of an event kind. */
struct tfs_arg_desc {
	const char *name;      /**< as printed: "fd", "count", "offset" */
	uint8_t type;	       /**< enum tfs_arg_type */
	uint8_t enc;	       /**< enum tfs_arg_enc */
	uint8_t flags;	       /**< TFS_ARG_* */
	const char *sym_class; /**< TFS_ENC_SYM only: printed prefix, e.g. "file" gives file#3 */
};

/** One event kind. */
struct tfs_kind_desc {
	const char *name;     /**< "pwrite", "zone", "MPI_Isend" */
	const char *category; /**< "io", "alloc", "zone", "mpi"... */
	uint32_t n_args;      /**< <= TFS_MAX_ARGS */
	const struct tfs_arg_desc *args;
};

/** One argument value, interpreted through its tfs_arg_desc. */
union tfs_arg {
	uint64_t u;	/**< TFS_TYPE_U64, TFS_TYPE_HEX; symbolic ids */
	int64_t i;	/**< TFS_TYPE_I64; ranks (absolute, the writer makes them relative) */
	const char *s;	/**< TFS_TYPE_STR: NUL-terminated, borrowed for the call */
};

/** Values of a TFS_ENC_RVAL argument lie in [-TFS_RVAL_LIMIT, TFS_RVAL_LIMIT). */
#define TFS_RVAL_LIMIT (INT64_C(1) << 61)

/**
 * The tfs_arg.u a writer takes for a TFS_ENC_RVAL argument: the absolute value @v, and
 * whether it derives from the caller's rank (@ranked: stored relative to the stream's rank,
 * so that `tag = rank` is one signature at every rank) or is a constant (stored as is).
 * Readers give the absolute value back in tfs_arg.i.
 */
static inline uint64_t tfs_rval(int64_t v, int ranked)
{
	return (uint64_t)v << 1 | (ranked != 0);
}

#ifdef __cplusplus
}
#endif
#endif
