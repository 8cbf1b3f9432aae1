/*
 * Reading traces: open a trace file, list its streams (rank, thread) and phases, and read
 * any rendered view of any event range at any byte offset without decoding the rest. A view
 * has an exact size known at open; a read walks the grammar in O(height) and decodes only
 * the events it returns. An opened trace is immutable and may be shared by any number of
 * threads, each with its own cursors. This API knows nothing of FUSE or paths: fs/ maps
 * virtual files onto (stream, view, range).
 */
#ifndef TFS_READER_H
#define TFS_READER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tfs/schema.h"
#include "tfs/tfs.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tfs_trace;
struct tfs_cursor;

/** Rendered views of an event range (FORMAT.md §9 says each line's exact form). */
enum tfs_view {
	TFS_VIEW_TEXT = 0,  /**< trace.txt: fixed columns, one line per event */
	TFS_VIEW_JSONL = 1, /**< events.jsonl: one JSON object per line */
	TFS_VIEW_CHROME = 2, /**< Chrome trace-event "X" objects, one per line, each ending in
			      *   a comma: wrap them in "[" ... "]" with a last object */
	TFS_VIEW_COUNT
};

/**
 * Open a trace: reads the header, section table and every small section, verifies their
 * checksums and structure. Value blocks are checked when first read (and by verify).
 * @param diag  optional; on -TFS_ECORRUPT / -TFS_EFORMAT says which section and offset
 * @return 0, -errno from open/read/mmap, -TFS_ECORRUPT, -TFS_EFORMAT (newer or unknown
 *         major version, or not a tracefs file), -EBUSY (an empty file its writer holds
 *         reserved, tfs/writer.h tfs_file_reserve(): still being saved, try again later) or
 *         -ENOMEM
 */
int tfs_trace_open(const char *path, struct tfs_trace **out, struct tfs_diag *diag);
/** Accepts NULL. All cursors must be freed first. */
void tfs_trace_close(struct tfs_trace *t);

/**
 * Whether the file @t was opened from has changed since (its size or modification time).
 * @t reads the file through a mapping, so a file rewritten in place shows other bytes than
 * those checked at open, and one made shorter faults (SIGBUS) where it ended; a file put in
 * its place by rename is another file and leaves @t as it was.
 * @return 1 changed, 0 not (or @t was opened from memory), or -errno if fstat fails
 */
int tfs_trace_file_changed(const struct tfs_trace *t);

/** The memory @t reads its file through, in *@base and *@len (NULL and 0 when opened from
 *  memory): where a shortened file faults, for a SIGBUS guard. */
void tfs_trace_file_map(const struct tfs_trace *t, const void **base, size_t *len);

/**
 * The cache of decoded value blocks that @t's cursors share. Decoding a timed block costs
 * about 150 ns per event; a cursor that jumps (a random read, a new handle, a merged view
 * placing each thread) into a block another cursor decoded copies it instead. A cursor keeps
 * the block it decoded at a jump into its middle; one reading on sequentially, or starting
 * where a block starts (as decoding ahead does), keeps nothing. The least recently used
 * blocks go first. It holds 32 MiB at most unless set here; @bytes 0 turns it off and
 * empties it. Safe to call while cursors read.
 */
void tfs_trace_set_block_cache(struct tfs_trace *t, size_t bytes);

/** What the block cache did since open, and holds now. */
struct tfs_cache_stats {
	uint64_t hits;	 /**< block loads answered by a copy */
	uint64_t misses; /**< block loads that decoded */
	uint64_t kept;	 /**< blocks it took */
	uint64_t blocks, bytes; /**< blocks and bytes it holds now */
	uint64_t budget; /**< bytes it may hold */
};

void tfs_trace_block_cache_stats(struct tfs_trace *t, struct tfs_cache_stats *st);

/**
 * Check everything: every section checksum, every value block, every rendered line
 * (decodes the whole trace once). @return 0, -TFS_ECORRUPT (diag filled) or -ENOMEM
 */
int tfs_trace_verify(struct tfs_trace *t, struct tfs_diag *diag);

struct tfs_trace_info {
	uint16_t version_major, version_minor;
	int timing;		/**< enum tfs_timing */
	double rel_err;		/**< lossy timing bound */
	uint32_t n_ranks;	/**< 1 + highest rank */
	uint32_t n_streams;
	uint32_t n_phases;
	uint32_t n_kinds;
	uint32_t n_terminals;	/**< CST entries */
	uint32_t n_sections;
	uint64_t n_events;	/**< over all streams */
	uint64_t file_bytes;
	uint64_t text_bytes;	/**< size of all streams' TEXT views (the compression baseline) */
	uint64_t max_ts_ns, max_dur_ns;
	/** The section table: its bytes in the file and decompressed (they include the packed
	 *  sections' bytes, FORMAT.md §2). */
	uint64_t table_bytes, table_raw_bytes;
};

void tfs_trace_get_info(const struct tfs_trace *t, struct tfs_trace_info *info);

struct tfs_section_info {
	const char *type_name; /**< "meta", "schema", "strings", "cst", "streams", "grammar",
				*   "values", "backtraces", "symbols", "vpatch"... */
	uint32_t type;
	uint32_t codec;	       /**< 0 raw, 1 zstd, 2 packed into the section table */
	/** Where its bytes are stored and how many; a packed section's lie compressed in the
	 *  section table: offset is the table's and stored_bytes 0. */
	uint64_t offset, stored_bytes, raw_bytes;
};

/** @return 0 or -ENOENT (idx out of range) */
int tfs_trace_section(const struct tfs_trace *t, uint32_t idx, struct tfs_section_info *info);

/** Metadata value of @key, or NULL. Borrowed from the trace. */
const char *tfs_trace_meta(const struct tfs_trace *t, const char *key);
/**
 * Metadata value of @key for @rank of a merged trace (tfs_merge_traces()): the value of
 * `<key>.rank<R>` for the largest R <= @rank present, else that of @key, else NULL.
 * Borrowed from the trace.
 */
const char *tfs_trace_meta_rank(const struct tfs_trace *t, const char *key, uint32_t rank);
/** Metadata pair @idx (in file order). @return 0 or -ENOENT */
int tfs_trace_meta_at(const struct tfs_trace *t, uint32_t idx, const char **key,
		      const char **value);

/**
 * An event kind as stored in the trace. Strings are borrowed from the trace; desc->args
 * points to storage of the calling thread that the next call replaces.
 * @return 0 or -ENOENT
 */
int tfs_trace_kind(const struct tfs_trace *t, uint32_t kind, struct tfs_kind_desc *desc);

struct tfs_stream_info {
	uint32_t rank, thread;
	uint64_t n_events;
	uint32_t n_blocks;	  /**< grammar blocks */
	uint32_t n_rules;	  /**< over all blocks */
	uint32_t height;	  /**< deepest block */
	uint32_t same_as;	  /**< index of the first stream with identical data (self if none) */
	uint64_t grammar_bytes;	  /**< stored bytes of its grammar section */
	uint64_t values_bytes;	  /**< stored bytes of its values section */
};

/** @return 0 or -ENOENT */
int tfs_trace_stream(const struct tfs_trace *t, uint32_t idx, struct tfs_stream_info *info);
/** Index of the stream of (@rank, @thread), in O(log streams). @return 0 or -ENOENT */
int tfs_trace_find_stream(const struct tfs_trace *t, uint32_t rank, uint32_t thread,
			  uint32_t *idx);

/**
 * The streams of @rank: positions *@first to *@first + *@n - 1 (*@n is 0 for a rank without
 * streams) of the (rank, thread) order that tfs_trace_stream_sorted() walks, so in thread
 * order. O(log streams): a trace of 10^6 ranks finds one rank's streams at once.
 */
void tfs_trace_rank_streams(const struct tfs_trace *t, uint32_t rank, uint32_t *first,
			    uint32_t *n);

/**
 * Index of the stream at position @k of the streams ordered by rank, then thread (the
 * file's order when its writer sorted them, as tracefs writers do). O(1).
 * @return 0 or -ENOENT (@k past the last stream)
 */
int tfs_trace_stream_sorted(const struct tfs_trace *t, uint32_t k, uint32_t *idx);

struct tfs_phase_info {
	const char *name; /**< borrowed */
	uint32_t stream;
	uint64_t first_event, n_events;
};

/** @return 0 or -ENOENT */
int tfs_trace_phase(const struct tfs_trace *t, uint32_t idx, struct tfs_phase_info *info);

/**
 * Exact byte size of @view over events [@first, @first + @n) of @stream, without decoding.
 * @return 0, -ENOENT (stream), -EINVAL (range or view)
 */
int tfs_trace_view_size(const struct tfs_trace *t, uint32_t stream, int view, uint64_t first,
			uint64_t n, uint64_t *bytes);

/**
 * A read position over one view of an event range of one stream. Owned by one thread at a
 * time; any number may exist over the same trace.
 * @return 0, -ENOENT, -EINVAL or -ENOMEM
 */
int tfs_cursor_new(struct tfs_trace *t, uint32_t stream, int view, uint64_t first, uint64_t n,
		   struct tfs_cursor **out);
/**
 * A cursor over the lines of the events of kind @kind only among events [@first, @first +
 * @n) of @stream: the view's lines for those events, byte for byte, one after the other
 * (`calls/pwrite/trace.txt`). Offsets and the size count those lines only; reads seek in
 * O(height) like any cursor's. The first use of a kind over a stream's grammar lays that
 * kind out in O(grammar size) (kept until the trace is closed, shared by every thread);
 * later ones cost as tfs_cursor_new(). tfs_cursor_event() refuses such a cursor (-EINVAL);
 * tfs_cursor_event_offset() gives where the kind's lines after event @index begin.
 * @return 0, -ENOENT (stream or kind), -EINVAL (range or view) or -ENOMEM
 */
int tfs_cursor_new_kind(struct tfs_trace *t, uint32_t stream, uint32_t kind, int view,
			uint64_t first, uint64_t n, struct tfs_cursor **out);
/**
 * A cursor over the lines of the events whose terminal @terms marks (nonzero; @terms holds
 * info.n_terminals entries, copied) among events [@first, @first + @n) of @stream, as
 * tfs_cursor_new_kind() is over one kind's: the lines a search may select, in file order.
 * Lays the set out in O(grammar size) at each call, kept by the cursor alone.
 * @return 0, -ENOENT (stream), -EINVAL (range, view or @terms NULL) or -ENOMEM
 */
int tfs_cursor_new_terms(struct tfs_trace *t, uint32_t stream, const uint8_t *terms, int view,
			 uint64_t first, uint64_t n, struct tfs_cursor **out);
/**
 * How many events of kind @kind lie in events [@first, @first + @n) of @stream, in *@events
 * (NULL: not wanted), and the exact bytes of their lines in @view, in *@bytes: the size of
 * tfs_cursor_new_kind()'s view, without decoding. O(height) once the kind is laid out (see
 * there). Thread-safe. @return 0, -ENOENT (stream or kind), -EINVAL (range or view), -ENOMEM
 */
int tfs_trace_kind_view_size(struct tfs_trace *t, uint32_t stream, uint32_t kind, int view,
			     uint64_t first, uint64_t n, uint64_t *events, uint64_t *bytes);
/** Accepts NULL. */
void tfs_cursor_free(struct tfs_cursor *c);
/** Bytes in the cursor's view. */
uint64_t tfs_cursor_size(const struct tfs_cursor *c);

/**
 * Copy up to @len bytes of the view starting at byte @off into @buf. Reading on from where
 * the previous read ended costs O(1) per event; any other offset costs O(height) to find.
 * @return bytes copied (0 at or past the end), -TFS_ECORRUPT (diag filled) or -ENOMEM
 */
ssize_t tfs_cursor_pread(struct tfs_cursor *c, void *buf, size_t len, uint64_t off,
			 struct tfs_diag *diag);

/** One rendered line (tfs_cursor_next_line()). */
struct tfs_line {
	uint64_t index;	  /**< its event's index in the stream */
	uint32_t term;	  /**< its event's terminal (CST entry) */
	const char *text; /**< the line, newline included; borrowed until the next call */
	size_t len;
};

/**
 * The next line of the cursor's view: the first on the first call, then each after the
 * previous one (tfs_cursor_pread() calls between do not move it). Decodes the value blocks
 * of the lines it returns only.
 * @return 1 (a line in *@line), 0 at the end, -TFS_ECORRUPT (diag filled) or -ENOMEM
 */
int tfs_cursor_next_line(struct tfs_cursor *c, struct tfs_line *line, struct tfs_diag *diag);

/** One decoded event. @args borrowed until the next call on the cursor. */
struct tfs_event {
	uint64_t index;	      /**< within the stream */
	uint32_t kind;
	uint32_t terminal;    /**< CST entry */
	uint64_t ts_ns, dur_ns;
	uint32_t n_args;
	const union tfs_arg *args; /**< ranks and RVAL values absolute, strings NUL-terminated */
};

/**
 * Decode event @index of the cursor's stream (absolute stream index; need not lie in the
 * cursor's range). @return 0, -EINVAL (past the end), -TFS_ECORRUPT or -ENOMEM
 */
int tfs_cursor_event(struct tfs_cursor *c, uint64_t index, struct tfs_event *ev,
		     struct tfs_diag *diag);

/** Byte offset in the cursor's view where event @index (relative to the range) begins. */
int tfs_cursor_event_offset(struct tfs_cursor *c, uint64_t index, uint64_t *off);

/**
 * Where a reader near byte @off of the cursor's view starts cheapest: the offset of the
 * first line of the value block that holds the line at @off (or of the range's first line,
 * when that is later). Reading from there decodes no block twice, so parallel readers split
 * a view at such offsets. A cursor of one kind (tfs_cursor_new_kind()) answers @off itself.
 * O(height); the cursor's read position is forgotten (its next read seeks).
 * @return 0 or -EINVAL (@off at or past the end)
 */
int tfs_cursor_block_start(struct tfs_cursor *c, uint64_t off, uint64_t *start);

/**
 * Occurrences of every terminal in the whole of @stream, from the grammar alone
 * (O(grammar), no decoding). @counts holds info.n_terminals entries.
 * @return 0 or -ENOENT
 */
int tfs_trace_term_counts(const struct tfs_trace *t, uint32_t stream, uint64_t *counts);

/**
 * Occurrences of every terminal among events [@first, @first + @n) of @stream, from the
 * grammar alone (O(grammar), no decoding). @counts holds info.n_terminals entries.
 * @return 0, -ENOENT (stream), -EINVAL (range) or -ENOMEM
 */
int tfs_trace_term_counts_range(const struct tfs_trace *t, uint32_t stream, uint64_t first,
				uint64_t n, uint64_t *counts);

/** Class bytes of tfs_trace_term_shape(): what a hole of a line may print. */
enum {
	TFS_SHAPE_NUM = 1, /**< digits, '.', '-' and spaces (times, threads, numbers, ranks) */
	TFS_SHAPE_HEX = 2, /**< "0x" and lowercase hexadecimal digits */
	TFS_SHAPE_ANY = 3, /**< any text but a newline (names, strings) */
	TFS_SHAPE_PAD = 4, /**< spaces: the padding at the end of every line */
};

/**
 * The shape of terminal @term's trace.txt lines: their constant text, with each part that
 * varies per occurrence (a hole, possibly empty) as one TFS_SHAPE_* byte, ending in
 * TFS_SHAPE_PAD in place of the padding and without the newline. Every line of the
 * terminal is the shape with each hole replaced by zero or more characters of its class.
 * The constant text holds no byte below 0x20 (FORMAT.md §9 escapes them). Always
 * NUL-terminates. @return the full length (like snprintf) or -ENOENT
 */
ssize_t tfs_trace_term_shape(const struct tfs_trace *t, uint32_t term, char *buf, size_t cap);
/**
 * tfs_trace_term_shape() for the lines of @term in the streams of rank @rank: the parts that
 * only the rank decides are its text, not holes. The names attached to ids (`<\/etc/passwd>`
 * or `<file#3>` where the rank names none), the names of values, the rank and ranks printed
 * relative to it. A name holding bytes the view escapes is that escaped text.
 * @return the full length (like snprintf), -ENOENT (terminal, or @rank UINT32_MAX) or -ENOMEM
 */
ssize_t tfs_trace_term_shape_rank(const struct tfs_trace *t, uint32_t term, uint32_t rank,
				  char *buf, size_t cap);

/**
 * Bytes of each line of terminal @term in @view, newline included: the lines of a terminal
 * are all as long (FORMAT.md §9), so counts of terminals (tfs_trace_term_counts_range())
 * give the bytes of any set of lines without decoding.
 * @return 0, -ENOENT (terminal) or -EINVAL (view)
 */
int tfs_trace_term_line_bytes(const struct tfs_trace *t, uint32_t term, int view,
			      uint64_t *bytes);

/** Kind of terminal @term, or -ENOENT. */
int tfs_trace_term_kind(const struct tfs_trace *t, uint32_t term, uint32_t *kind);

/**
 * Print terminal @term's call signature as the text view prints its calls, with "*" for
 * every argument that varies per occurrence: `pwrite(fd=file#3, count=*, offset=*) = *`.
 * Ranks print relative to the caller: `send(dest=r+1)`. Always NUL-terminates.
 * @return the full length (like snprintf), or -ENOENT
 */
ssize_t tfs_trace_signature(const struct tfs_trace *t, uint32_t term, char *buf, size_t cap);

/**
 * Argument @arg of terminal @term printed as a signature prints it (`"a\tb"` for a string,
 * `*` for a value that varies per call). Always NUL-terminates.
 * @return the full length (like snprintf), -ENOENT (no such terminal) or -EINVAL (argument)
 */
ssize_t tfs_trace_term_arg_text(const struct tfs_trace *t, uint32_t term, uint32_t arg,
				char *buf, size_t cap);

/**
 * The values terminal @term fixes: SIG and SYM arguments as given to the writer (i64 in
 * .i), RANK arguments relative to the caller's rank (.i) except special (negative) ranks,
 * which are the same at every rank and come as given (tfs_trace_term_arg_text() tells the
 * two apart: `r-1` against `-1`), RVAL arguments as their literal value or, derived from
 * the rank, their displacement from the caller's rank (.i; `7` against `r+1`), STR
 * arguments as borrowed strings;
 * VAL arguments (which vary per call) are 0. @args holds TFS_MAX_ARGS entries.
 * @return 0 or -ENOENT
 */
int tfs_trace_term_args(const struct tfs_trace *t, uint32_t term, union tfs_arg *args);

/**
 * The grammar of @stream as text, one rule per line (`R7 -> R3^1000 t5 t9`), block by
 * block, start rules named S. @out is a new malloc'ed buffer, NUL-terminated.
 * @return 0, -ENOENT or -ENOMEM
 */
int tfs_trace_grammar_text(const struct tfs_trace *t, uint32_t stream, char **out,
			   size_t *len);

/** The grammar of a stream as a structure (FORMAT.md §6), for walking it rule by rule. */
struct tfs_grammar_info {
	uint32_t n_blocks; /**< the stream is the blocks' start rules one after the other */
	uint32_t same_as;  /**< index of the first stream with this very grammar (self if none):
			    *   streams that differ only in their values share it */
};

/** One grammar block: rules 0 .. n_rules - 1, the last one its start rule. */
struct tfs_block_info {
	uint64_t n_events; /**< the start rule's expansion */
	uint32_t n_rules;
};

/** One rule of a block. */
struct tfs_rule_info {
	uint64_t n_events; /**< terminals in its expansion (at most 2^62) */
	uint32_t n_elems;  /**< body length, >= 1 except for an empty start rule */
	uint32_t height;   /**< 1 for a body of terminals only, else 1 + its highest child's */
};

/** One element of a rule body: @id repeated @count (>= 1) times. */
struct tfs_rule_elem {
	uint64_t count;
	uint32_t id;	  /**< a terminal (CST entry) or, when @is_rule, a lower-numbered rule of
			   *   the same block */
	uint32_t is_rule; /**< 0 or 1 */
};

/**
 * The shape of @stream's grammar; with tfs_trace_block(), tfs_trace_rule() and
 * tfs_trace_rule_elem() a caller walks it without expanding it (a rule becomes a function,
 * a count a loop). Thread-safe; O(1) but for this one, O(streams). @return 0 or -ENOENT
 */
int tfs_trace_grammar_info(const struct tfs_trace *t, uint32_t stream,
			   struct tfs_grammar_info *gi);
/** Block @block of @stream's grammar. @return 0 or -ENOENT (stream or block) */
int tfs_trace_block(const struct tfs_trace *t, uint32_t stream, uint32_t block,
		    struct tfs_block_info *bi);
/** Rule @rule of block @block. @return 0 or -ENOENT (stream, block or rule) */
int tfs_trace_rule(const struct tfs_trace *t, uint32_t stream, uint32_t block, uint32_t rule,
		   struct tfs_rule_info *ri);
/** Element @idx of rule @rule's body. @return 0 or -ENOENT (any index out of range) */
int tfs_trace_rule_elem(const struct tfs_trace *t, uint32_t stream, uint32_t block,
			uint32_t rule, uint32_t idx, struct tfs_rule_elem *e);

/**
 * Open a trace held in memory (@data, @len borrowed: they must outlive the trace).
 * Same checks and errors as tfs_trace_open() apart from file-system errors.
 */
int tfs_trace_open_mem(const void *data, size_t len, struct tfs_trace **out,
		       struct tfs_diag *diag);

/** Number of backtraces (stack#0 .. stack#n-1) stored for @rank; 0 when none. */
uint64_t tfs_trace_n_backtraces(const struct tfs_trace *t, uint32_t rank);

/**
 * Backtrace `stack#@id` of @rank: *@frames points at *@n code addresses, outermost first,
 * borrowed from the trace (valid until it is closed). The rank's backtraces section is
 * decoded whole on first use and kept (8 bytes per frame of every backtrace). Thread-safe.
 * Corruption found then is reported again by every later call; a failed allocation is not.
 * @return 0, -ENOENT (no such rank or id), -TFS_ECORRUPT (diag filled) or -ENOMEM (also
 *         when the rank's backtraces hold more than 2^25 frames in all)
 */
int tfs_trace_backtrace(struct tfs_trace *t, uint32_t rank, uint64_t id, const uint64_t **frames,
			uint32_t *n, struct tfs_diag *diag);

/**
 * Source frames of code address @addr of @rank (see tfs_writer_add_symbol), outermost
 * first, borrowed from the trace (valid until it is closed). The rank's symbols section is
 * decoded whole on first use; lookups are a binary search. Thread-safe.
 * @return 0, -ENOENT (not symbolised, or the rank has no symbols), -TFS_ECORRUPT (diag
 *         filled) or -ENOMEM
 */
int tfs_trace_symbol(struct tfs_trace *t, uint32_t rank, uint64_t addr,
		     const struct tfs_src_frame **frames, uint32_t *n, struct tfs_diag *diag);

/**
 * The name @rank gives symbolic id @id of class @sym_class (FORMAT.md §12,
 * tfs_writer_set_name()): a file id's path. *@name is NUL-terminated, borrowed from the
 * trace (valid until it is closed). Decoded at open: no error but absence. Thread-safe.
 * @return 0 or -ENOENT (the rank has no name for it)
 */
int tfs_trace_name(const struct tfs_trace *t, uint32_t rank, const char *sym_class, uint64_t id,
		   const char **name);

/** One name of a rank (tfs_trace_names_dup()). */
struct tfs_name {
	uint64_t id;
	const char *name; /**< NUL-terminated, borrowed from the trace */
};

/**
 * Every name @rank gives to ids of class @sym_class, in increasing id order.
 * @param out  a new malloc'ed array of *@n entries, the caller frees it (NULL when none)
 * @return 0 or -ENOMEM
 */
int tfs_trace_names_dup(const struct tfs_trace *t, uint32_t rank, const char *sym_class,
			struct tfs_name **out, size_t *n);

/** How tfs_escape() writes a string (FORMAT.md §9.1). */
enum tfs_escape_mode {
	TFS_ESCAPE_TEXT = 0, /**< as trace.txt: \", \\, \n, \t, \r, else \xHH but printable
			      *   ASCII and valid UTF-8 that is no C1 control */
	TFS_ESCAPE_JSON = 1, /**< as the JSON views, string content: \", \\, \n, \t, \r,
			      *   \u00XX, \ufffd for a byte that is no UTF-8 */
	TFS_ESCAPE_UTF8 = 2, /**< the JSON views' string without the escapes, for a JSON
			      *   library to escape: each byte that is no UTF-8 as U+FFFD, the
			      *   rest as it is */
};

/**
 * The @n bytes at @str as the views print a string (FORMAT.md §9.1), without quotes, so
 * that every text or JSON file of the tree writes names and paths one way.
 * @param also  TFS_ESCAPE_TEXT only, may be NULL: ASCII bytes written \xHH too (the
 *              delimiters of a view: ">" for a name in <...>, ";" in folded stacks)
 * @return the length of the whole result, like snprintf: @buf (@cap bytes, may be NULL when
 *         @cap is 0) holds its first @cap - 1 bytes and a NUL. Thread-safe.
 */
size_t tfs_escape(char *buf, size_t cap, const void *str, size_t n, enum tfs_escape_mode mode,
		  const char *also);

/**
 * Where to cut the @n bytes at @str to keep at most @max of them without splitting a valid
 * UTF-8 sequence (FORMAT.md §9.1): a cut name stays UTF-8 where it was, its escape the
 * prefix of the whole name's. Bytes of no UTF-8 are characters of one byte. Thread-safe.
 * @return @n when @n <= @max, else the largest length <= @max (at least @max - 3) that ends
 *         between two characters
 */
size_t tfs_utf8_cut(const void *str, size_t n, size_t max);

#ifdef __cplusplus
}
#endif
#endif
