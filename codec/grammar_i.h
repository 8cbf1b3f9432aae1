/*
 * Grammars: the online Sequitur builder with repetition counts (encoder side, gbuild.c)
 * and the parsed, read-only form of a grammar block (decoder side, grammar.c).
 * The byte layout of a grammar block is FORMAT.md §6. This header knows nothing of the
 * container, the CST or rendering: symbols are plain terminal ids.
 */
#ifndef TFS_GRAMMAR_I_H
#define TFS_GRAMMAR_I_H

#include <stddef.h>
#include <stdint.h>

#include "bytes_i.h"

/* Largest expanded event count of one grammar block / stream (FORMAT.md §6). */
#define GRAM_MAX_EVENTS (UINT64_C(1) << 62)
/* Largest terminal id a grammar may hold. */
#define GRAM_MAX_TERMINAL (UINT32_C(1) << 30)

/* ---- builder (gbuild.c) ---- */

struct tfs_gbuild;

/* @return a new empty builder, or NULL on ENOMEM */
struct tfs_gbuild *gbuild_new(void);
/* Accepts NULL. */
void gbuild_free(struct tfs_gbuild *g);
/*
 * Append one terminal (< GRAM_MAX_TERMINAL) to the start rule and restore both Sequitur
 * invariants (digram uniqueness, rule utility) with adjacent equal symbols merged into
 * repetition counts. Amortised O(1). A loop (the start rule ending with a repeated rule whose
 * expansion the terminals go on with) is followed without Sequitur's work per terminal: a
 * whole repetition adds one to the count, as Sequitur's merge of equal neighbours would.
 * @return 0, or -ENOMEM with the grammar unchanged (the symbol was not appended)
 */
int gbuild_append(struct tfs_gbuild *g, uint32_t terminal);
/* Bytes of heap the builder holds now (nodes, rules, hash table). */
size_t gbuild_mem_bytes(const struct tfs_gbuild *g);
/* Terminals appended since creation or the last reset. */
uint64_t gbuild_n_events(const struct tfs_gbuild *g);
/*
 * Append the grammar as one FORMAT.md §6 block to @out: rules renumbered in post-order
 * from the start rule so that a rule only references lower-numbered rules; the start rule
 * is last. An empty builder exports a block with one empty start rule. Terminals waiting in
 * a loop being followed go into the grammar first (which is why @g is not const).
 * @return 0 or -ENOMEM (then @out->len is restored)
 */
int gbuild_export(struct tfs_gbuild *g, struct tfs_buf *out);
/* Forget everything; keeps allocated memory for reuse. */
void gbuild_reset(struct tfs_gbuild *g);
/*
 * Debug validator: digram uniqueness, no two adjacent equal symbols (unless a count
 * would overflow), rule utility (every rule referenced twice or once with count >= 2),
 * reference counts, digram index consistency. O(grammar size).
 * @return 0, or -EINVAL with a reason in @why
 */
int gbuild_check(const struct tfs_gbuild *g, char *why, size_t why_cap);

/* ---- parsed grammar block (grammar.c) ---- */

/* One element of a rule body: symbol @id repeated @count (>= 1) times. */
struct gram_elem {
	uint64_t count;
	uint32_t id;	  /* terminal id, or rule index when is_rule */
	uint32_t is_rule; /* 0 or 1 */
};

struct gram_rule {
	uint64_t first_elem; /* index of the body's first element in tfs_grammar.elems */
	uint64_t n_events;   /* terminals in the full expansion, <= GRAM_MAX_EVENTS */
	uint32_t n_elems;    /* body length; 0 only for the empty start rule */
	uint32_t height;     /* 1 for a body of terminals only, else 1 + max child height */
};

struct tfs_grammar {
	uint32_t n_rules; /* >= 1; rules[n_rules - 1] is the start rule */
	struct gram_rule *rules;
	uint64_t n_elems;
	struct gram_elem *elems;
	uint64_t n_events; /* == rules[n_rules - 1].n_events */
	uint32_t height;   /* == rules[n_rules - 1].height */
};

/*
 * Parse one FORMAT.md §6 block from @r. Every terminal id must be < @n_terminals, every
 * rule reference < the referencing rule's index, counts >= 1, no expansion over
 * GRAM_MAX_EVENTS, and no allocation larger than the input can justify.
 * @return 0, -TFS_ECORRUPT (diag filled through @r), or -ENOMEM. On error @g is empty.
 */
int grammar_parse(struct tfs_rd *r, uint32_t n_terminals, struct tfs_grammar *g);

/* Most elements (over all rules) of a block of @n_events events (FORMAT.md §6). */
static inline uint64_t gram_max_elems(uint64_t n_events)
{
	return n_events > (GRAM_MAX_EVENTS >> 1) ? UINT64_MAX : 2 * n_events + 1;
}

/*
 * Most bytes of a grammar section whose stream has @n_events events: what its at most
 * max(1, n_events) blocks of at most gram_max_elems() elements take with every varint at
 * its longest (FORMAT.md §6). A reader checks a section's size against it before it
 * decompresses the section.
 */
static inline uint64_t gram_max_section_bytes(uint64_t n_events)
{
	return n_events >= (UINT64_C(1) << 56) ? UINT64_MAX : 128 * (n_events + 1);
}

/*
 * grammar_parse() for a block declared to hold @n_events events (the varint before it in a
 * grammar section): more rules or elements than gram_max_elems(@n_events) are refused
 * before anything is allocated for them, and so is an expansion of another length.
 * @return 0, -TFS_ECORRUPT (diag filled through @r), or -ENOMEM. On error @g is empty.
 */
int grammar_parse_events(struct tfs_rd *r, uint32_t n_terminals, uint64_t n_events,
			 struct tfs_grammar *g);
/* Accepts a zeroed or parsed grammar. */
void grammar_fini(struct tfs_grammar *g);
/*
 * Write the expansion's terminals [first, first + n) into @out (test and verify helper,
 * O(height + n)). @return 0 or -EINVAL if the range is outside the expansion.
 */
int grammar_expand(const struct tfs_grammar *g, uint64_t first, uint64_t n, uint32_t *out);

#endif
