/*
 * Internals of the Sequitur builder shared by gbuild.c (the algorithm and the export) and
 * gbuild_check.c (the debug validator): symbol encoding, node and rule layout, the digram
 * index lookup, the loop fast path's state. Nothing else includes it but the builder's own
 * test, which looks at that state.
 */
#ifndef TFS_GBUILD_I_H
#define TFS_GBUILD_I_H

#include <stdbool.h>
#include <stdint.h>

#include "grammar_i.h"

/*
 * Symbols (struct gnode.sym):
 *   terminal id      < 2^30
 *   SYM_RULE  | r    reference to rule r (never the start rule 0)
 *   SYM_GUARD | r    the guard node of rule r, which closes the circular body list
 *   SYM_FREE         node on the free list
 */
#define SYM_RULE (UINT32_C(1) << 30)
#define SYM_GUARD (UINT32_C(1) << 31)
#define SYM_FREE UINT32_MAX
#define SYM_ID_MASK (SYM_RULE - 1)

#define NIL UINT32_MAX
/* Node indices stay below 2^31 so the hash table (2 slots per node) has at most 2^32 slots. */
#define NODE_CAP_MAX (UINT32_C(1) << 31)
#define RULE_CAP_MAX (SYM_ID_MASK - 1)
/*
 * Capacity that gbuild_append reserves before it touches anything. One append allocates one
 * node, and each rule it creates takes one rule, a guard and a reference node (the digram's
 * own two nodes move into the rule); every other step frees at least as much as it takes.
 * A rule created by a cascade is inlined again before the cascade goes on, and over the test
 * streams (random, runs, loops, millions of symbols) no append ever held more than 3 extra
 * nodes and 1 extra rule at once. There is no proof of a bound, hence the tenfold margin; if
 * a cascade ever needs more, new_rule grows mid-append and, should even that fail, leaves
 * the digram unfactored: the grammar stays exact, only less compact (gbuild_check says so).
 */
#define NODE_RESERVE 32
#define RULE_RESERVE 16

/*
 * The loop fast path (gbuild.c): the longest rule expansion a loop is followed through, and
 * how deeply its rules may nest.
 */
#define LP_MAX 1024
#define LP_DEPTH 64

#define SLOT_EMPTY UINT64_MAX

/* One symbol occurrence, or a rule's guard. 24 bytes. */
struct gnode {
	uint64_t count; /* repetitions, 1 .. GRAM_MAX_EVENTS; unused in guards */
	uint32_t prev;
	uint32_t next; /* next free node while on the free list */
	uint32_t sym;
	uint32_t flags; /* NF_* */
};

#define NF_QUEUED 1u  /* the node sits on the work stack */
#define NF_INDEXED 2u /* the digram starting here is the one in the index */

struct grule {
	uint32_t guard; /* guard node, NIL while the rule is free */
	uint32_t refs;  /* nodes referencing the rule (counts ignored); next free rule if free */
};

struct tfs_gbuild {
	struct gnode *nodes;
	uint32_t node_cap;
	uint32_t node_hw;   /* nodes [0, node_hw) have been handed out at least once */
	uint32_t node_free; /* free list head, NIL if empty */
	uint32_t n_free_nodes;

	struct grule *rules; /* rules[0] is the start rule */
	uint32_t rule_cap;
	uint32_t rule_hw;
	uint32_t rule_free;
	uint32_t n_free_rules;

	/*
	 * Digram index, linear probing with backward-shift deletion. A slot holds the digram's
	 * first node in the low 32 bits and its 32-bit hash above (the home slot is the hash's
	 * top bits). Always at least 2 slots per node, so the load stays <= 1/2.
	 */
	uint64_t *slots;
	uint64_t slot_mask;
	unsigned int slot_shift; /* 32 - log2(slots) */
	uint32_t n_digrams;

	/* Nodes whose rule utility and right digram must be checked; capacity node_cap. */
	uint32_t *work;
	uint32_t n_work;

	uint64_t n_events;     /* appended, lp_pos of them still pending */
	uint64_t n_unfactored; /* digrams left duplicated because memory ran out mid-append */
	size_t mem_bytes;      /* gbuild_mem_bytes(), kept as the arrays grow: the writer asks
				  after every event */

	/*
	 * The loop fast path. While the start rule ends with a reference to rule lp_rule (node
	 * lp_node, count >= 2 when it began) and the terminals appended since are the first
	 * lp_pos of its expansion lp_exp, they wait here instead of going through Sequitur;
	 * the whole expansion matched adds one to lp_node's count, which is what the merge of
	 * adjacent equal symbols makes of it. A terminal that breaks the match first sends the
	 * waiting ones through Sequitur, in order; so does an export. lp_exp is kept for the
	 * next time lp_rule ends the start rule (a rule's expansion never changes while it
	 * lives; releasing it forgets lp_exp).
	 */
	uint32_t lp_rule;  /* the rule lp_exp expands, NIL: none */
	uint32_t lp_len;   /* terminals of lp_exp; 0: lp_rule's expansion is too long or deep */
	uint32_t lp_node;  /* while following a loop, the start rule's last node; else NIL */
	uint32_t lp_pos;   /* terminals waiting: lp_exp[0, lp_pos) */
	int lp_err;	   /* a waiting terminal failed to go through Sequitur: sticky */
	uint32_t *lp_exp;  /* [lp_cap <= LP_MAX], grown as loops need */
	uint32_t lp_cap;
};


static inline bool is_guard(const struct tfs_gbuild *g, uint32_t n)
{
	return g->nodes[n].sym & SYM_GUARD;
}

static inline bool is_rule_sym(uint32_t sym)
{
	return (sym & (SYM_RULE | SYM_GUARD)) == SYM_RULE;
}

static inline uint32_t nrule(const struct tfs_gbuild *g, uint32_t n)
{
	return g->nodes[n].sym & SYM_ID_MASK;
}


/* Multiplicative hashing: the top bits of the product are the well-mixed ones. */
static inline uint32_t dg_hash(uint32_t s1, uint64_t c1, uint32_t s2, uint64_t c2)
{
	uint64_t k = ((uint64_t)s1 << 32 | s2) ^ ((c1 - 1) * UINT64_C(0xc2b2ae3d27d4eb4f)) ^
		     ((c2 - 1) * UINT64_C(0x165667b19e3779f9));

	return (uint32_t)((k * UINT64_C(0x9e3779b97f4a7c15)) >> 32);
}

static inline uint32_t dg_tag(const struct tfs_gbuild *g, uint32_t n)
{
	const struct gnode *a = &g->nodes[n], *b = &g->nodes[a->next];

	return dg_hash(a->sym, a->count, b->sym, b->count);
}

/* The home slot is the tag's top bits. */
static inline uint64_t home_slot(const struct tfs_gbuild *g, uint32_t tag)
{
	return tag >> g->slot_shift;
}

/*
 * Slot holding the digram that starts at @n (same symbols and counts), or the empty slot
 * where it would go. @n and its successor are symbols, not guards.
 */
static inline uint64_t dg_probe(const struct tfs_gbuild *g, uint32_t n, uint32_t tag, bool *found)
{
	const struct gnode *a = &g->nodes[n], *b = &g->nodes[a->next];
	uint64_t i = home_slot(g, tag);

	for (;;) {
		uint64_t s = g->slots[i];
		const struct gnode *x, *y;

		if (s == SLOT_EMPTY) {
			*found = false;
			return i;
		}
		if ((uint32_t)(s >> 32) == tag) {
			x = &g->nodes[(uint32_t)s];
			y = &g->nodes[x->next];
			if (x->sym == a->sym && y->sym == b->sym && x->count == a->count &&
			    y->count == b->count) {
				*found = true;
				return i;
			}
		}
		i = (i + 1) & g->slot_mask;
	}
}


#endif
