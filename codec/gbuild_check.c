/*
 * The debug validator of the Sequitur builder: walks the whole grammar and checks digram
 * uniqueness, rule utility, reference counts, reachability, acyclicity, the digram index and
 * the expansion length. O(grammar size); tests call it after appends. It changes nothing.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gbuild_i.h"


struct check_ctx {
	const struct tfs_gbuild *g;
	char *why;
	size_t why_cap;
	uint32_t *refs;	    /* computed references per rule */
	uint64_t *one_count; /* count of the last reference seen per rule */
	uint64_t *events;   /* expansion length per rule, UINT64_MAX while open */
	uint32_t n_digrams;
	uint32_t n_nodes;
};

__attribute__((format(printf, 2, 3))) static int bad(struct check_ctx *c, const char *fmt, ...)
{
	va_list ap;

	if (c->why && c->why_cap) {
		va_start(ap, fmt);
		vsnprintf(c->why, c->why_cap, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int check_digram(struct check_ctx *c, uint32_t n)
{
	const struct tfs_gbuild *g = c->g;
	uint32_t tag = dg_tag(g, n);
	uint64_t i;
	bool found;

	i = dg_probe(g, n, tag, &found);
	if (!found)
		return bad(c, "digram at node %u not indexed", n);
	if ((uint32_t)g->slots[i] != n)
		return bad(c, "digram at node %u repeats at node %u", n, (uint32_t)g->slots[i]);
	if (!(g->nodes[n].flags & NF_INDEXED))
		return bad(c, "indexed digram at node %u not flagged", n);
	if ((uint32_t)(g->slots[i] >> 32) != tag)
		return bad(c, "digram at node %u indexed under a stale hash", n);
	c->n_digrams++;
	return 0;
}

static int check_body(struct check_ctx *c, uint32_t r)
{
	const struct tfs_gbuild *g = c->g;
	uint32_t guard = g->rules[r].guard, prev = guard, len = 0;

	if (guard >= g->node_hw || g->nodes[guard].sym != (SYM_GUARD | r))
		return bad(c, "rule %u has a bad guard", r);
	c->n_nodes++;
	for (uint32_t n = g->nodes[guard].next; n != guard; n = g->nodes[n].next) {
		const struct gnode *a = &g->nodes[n];
		int rc;

		if (n >= g->node_hw || ++len > g->node_hw)
			return bad(c, "rule %u: broken list at node %u", r, n);
		if (a->prev != prev)
			return bad(c, "rule %u: node %u has a wrong prev link", r, n);
		if (a->sym & SYM_GUARD)
			return bad(c, "rule %u: node %u is free or a foreign guard", r, n);
		if (a->count < 1 || a->count > g->n_events)
			return bad(c, "rule %u: node %u count %llu", r, n,
				   (unsigned long long)a->count);
		if (a->flags & NF_QUEUED)
			return bad(c, "node %u still queued", n);
		if (is_guard(g, a->next) && (a->flags & NF_INDEXED))
			return bad(c, "rule %u: last node %u flagged as indexed", r, n);
		if (is_rule_sym(a->sym)) {
			uint32_t s = a->sym & SYM_ID_MASK;

			if (s == 0 || s >= g->rule_hw || g->rules[s].guard == NIL)
				return bad(c, "rule %u: node %u references bad rule %u", r, n, s);
			c->refs[s]++;
			c->one_count[s] = a->count;
		} else if (a->sym >= GRAM_MAX_TERMINAL) {
			return bad(c, "rule %u: node %u has bad terminal", r, n);
		}
		if (prev != guard && g->nodes[prev].sym == a->sym)
			return bad(c, "rule %u: adjacent equal symbols at node %u", r, n);
		if (prev != guard) {
			rc = check_digram(c, prev);
			if (rc < 0)
				return rc;
		}
		c->n_nodes++;
		prev = n;
	}
	if (g->nodes[guard].prev != prev)
		return bad(c, "rule %u: guard has a wrong prev link", r);
	if (len == 0 && r != 0)
		return bad(c, "rule %u is empty", r);
	return 0;
}

/*
 * The loop being followed (gbuild.c's fast path): the start rule ends with a reference to
 * the rule whose expansion is kept, which is as long as that rule's, and fewer terminals wait
 * than it holds. Needs c->events.
 */
static int check_loop(struct check_ctx *c)
{
	const struct tfs_gbuild *g = c->g;
	const uint32_t guard = g->rules[0].guard;

	if (g->lp_err)
		return bad(c, "a waiting terminal failed");
	if (g->lp_rule != NIL && (g->lp_rule >= g->rule_hw || g->rules[g->lp_rule].guard == NIL ||
				  (g->lp_len && c->events[g->lp_rule] != g->lp_len)))
		return bad(c, "the loop's kept expansion is not its rule's");
	if (g->lp_node == NIL)
		return g->lp_pos ? bad(c, "%u terminals wait outside a loop", g->lp_pos) : 0;
	if (g->lp_rule == NIL || g->lp_node != g->nodes[guard].prev ||
	    g->nodes[g->lp_node].sym != (SYM_RULE | g->lp_rule))
		return bad(c, "the loop followed does not end the start rule");
	if (g->lp_pos >= g->lp_len)
		return bad(c, "%u terminals wait in a loop of %u", g->lp_pos, g->lp_len);
	return 0;
}

/* Expansion lengths by an iterative post-order walk; also proves acyclicity and reach. */
static int check_events(struct check_ctx *c, uint32_t *stack)
{
	const struct tfs_gbuild *g = c->g;
	uint32_t depth = 0;

	for (uint32_t r = 0; r < g->rule_hw; r++)
		c->events[r] = 0;
	c->events[0] = UINT64_MAX;
	stack[depth++] = g->nodes[g->rules[0].guard].next;
	while (depth) {
		uint32_t n = stack[depth - 1], r;
		uint64_t sum = 0;

		if (is_guard(g, n)) {
			r = nrule(g, n);
			for (uint32_t k = g->nodes[n].next; k != n; k = g->nodes[k].next) {
				const struct gnode *a = &g->nodes[k];
				uint64_t ev = is_rule_sym(a->sym) ? c->events[a->sym & SYM_ID_MASK] : 1;

				if (!mul_u64(ev, a->count, &ev) || !add_u64(sum, ev, &sum))
					return bad(c, "rule %u expansion overflows", r);
			}
			c->events[r] = sum;
			depth--;
			continue;
		}
		stack[depth - 1] = g->nodes[n].next;
		if (!is_rule_sym(g->nodes[n].sym))
			continue;
		r = nrule(g, n);
		if (c->events[r] == UINT64_MAX)
			return bad(c, "rule %u is part of a cycle", r);
		if (c->events[r] == 0) {
			c->events[r] = UINT64_MAX;
			stack[depth++] = g->nodes[g->rules[r].guard].next;
		}
	}
	for (uint32_t r = 0; r < g->rule_hw; r++)
		if (g->rules[r].guard != NIL && c->events[r] == 0 && r != 0)
			return bad(c, "rule %u is unreachable", r);
	if (c->events[0] != g->n_events - g->lp_pos)
		return bad(c, "grammar expands to %llu events, %llu appended, %u waiting",
			   (unsigned long long)c->events[0], (unsigned long long)g->n_events,
			   g->lp_pos);
	return check_loop(c);
}

static int check_rules(struct check_ctx *c)
{
	const struct tfs_gbuild *g = c->g;
	uint32_t n_free = 0;
	int rc;

	for (uint32_t r = 0; r < g->rule_hw; r++) {
		c->refs[r] = 0;
		if (g->rules[r].guard == NIL)
			n_free++;
	}
	if (n_free != g->n_free_rules || g->rules[0].guard == NIL)
		return bad(c, "rule free list out of step");
	for (uint32_t r = 0; r < g->rule_hw; r++) {
		if (g->rules[r].guard == NIL)
			continue;
		rc = check_body(c, r);
		if (rc < 0)
			return rc;
	}
	for (uint32_t r = 0; r < g->rule_hw; r++) {
		if (g->rules[r].guard == NIL)
			continue;
		if (c->refs[r] != g->rules[r].refs)
			return bad(c, "rule %u has refs %u, counted %u", r, g->rules[r].refs,
				   c->refs[r]);
		if (r != 0 && (c->refs[r] == 0 || (c->refs[r] == 1 && c->one_count[r] < 2)))
			return bad(c, "rule %u is underused (refs %u)", r, c->refs[r]);
	}
	return 0;
}

int gbuild_check(const struct tfs_gbuild *g, char *why, size_t why_cap)
{
	struct check_ctx c = {.g = g, .why = why, .why_cap = why_cap};
	uint32_t n_free = 0, n_used = 0;
	int rc = -ENOMEM;

	if (why && why_cap)
		why[0] = '\0';
	if (g->n_work)
		return bad(&c, "work stack not empty");
	for (uint32_t n = g->node_free; n != NIL; n = g->nodes[n].next) {
		if (n >= g->node_hw || g->nodes[n].sym != SYM_FREE || ++n_free > g->node_hw ||
		    (g->nodes[n].flags & NF_INDEXED))
			return bad(&c, "broken node free list at %u", n);
	}
	if (n_free != g->n_free_nodes)
		return bad(&c, "node free list holds %u, expected %u", n_free, g->n_free_nodes);
	for (uint64_t i = 0; i <= g->slot_mask; i++)
		n_used += g->slots[i] != SLOT_EMPTY;
	if (n_used != g->n_digrams)
		return bad(&c, "%u slots used, %u digrams", n_used, g->n_digrams);

	c.refs = malloc((size_t)g->rule_hw * sizeof(*c.refs));
	c.one_count = malloc((size_t)g->rule_hw * sizeof(*c.one_count));
	c.events = malloc((size_t)g->rule_hw * sizeof(*c.events));
	if (!c.refs || !c.one_count || !c.events)
		goto out;
	rc = check_rules(&c);
	if (rc < 0)
		goto out;
	if (c.n_nodes + n_free != g->node_hw) {
		rc = bad(&c, "%u nodes in rules + %u free != %u handed out", c.n_nodes, n_free,
			 g->node_hw);
		goto out;
	}
	if (c.n_digrams != g->n_digrams) {
		rc = bad(&c, "%u digrams in rules, %u indexed", c.n_digrams, g->n_digrams);
		goto out;
	}
	if (g->n_unfactored) {
		rc = bad(&c, "%llu digrams left unfactored", (unsigned long long)g->n_unfactored);
		goto out;
	}
	/* refs is free again: reuse it as the walk stack */
	rc = check_events(&c, c.refs);
out:
	free(c.events);
	free(c.one_count);
	free(c.refs);
	return rc;
}
