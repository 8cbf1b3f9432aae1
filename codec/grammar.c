/*
 * Grammar blocks on the read side: parse one FORMAT.md §6 block from untrusted bytes into
 * flat rule and element arrays, with every rule's expansion length and height, and expand
 * any range of the start rule's events. It checks what safety needs (bounds, references
 * only to earlier rules, no expansion over GRAM_MAX_EVENTS) but not the Sequitur properties
 * writers promise (digram uniqueness, rule utility): readers must not rely on those.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar_i.h"

/*
 * Element array growth, within @max_elems (what the input's bytes and the block's declared
 * events allow: checked by the caller before this is called). Capacity doubles, so it never
 * goes beyond twice the elements present; grammar_parse_events() trims it at the end.
 */
static int reserve_elems(struct tfs_grammar *g, uint64_t *cap, uint64_t extra,
			 uint64_t max_elems)
{
	uint64_t need = g->n_elems + extra, new_cap;
	struct gram_elem *e;

	if (need <= *cap)
		return 0;
	new_cap = *cap ? *cap : 16;
	while (new_cap < need)
		new_cap *= 2;
	if (new_cap > max_elems)
		new_cap = max_elems > need ? max_elems : need;
	if (new_cap > SIZE_MAX / sizeof(*e))
		return -ENOMEM;
	e = realloc(g->elems, new_cap * sizeof(*e));
	if (!e)
		return -ENOMEM;
	g->elems = e;
	*cap = new_cap;
	return 0;
}

static int parse_elem(struct tfs_rd *r, uint32_t n_terminals, uint32_t rule_idx,
		      struct tfs_grammar *g, struct gram_rule *rule)
{
	struct gram_elem *e = &g->elems[g->n_elems];
	size_t at = r->off;
	uint64_t tag, id, count = 1, child_events = 1, ev;
	uint32_t child_height = 0;
	int rc;

	rc = rd_varint(r, &tag);
	if (rc < 0)
		return rc;
	id = tag >> 2;
	if (tag & 2) {
		if (id >= rule_idx) {
			r->off = at;
			return rd_fail(r, "rule %u references rule %llu, not an earlier one",
				       rule_idx, (unsigned long long)id);
		}
		child_events = g->rules[id].n_events;
		child_height = g->rules[id].height;
	} else if (id >= n_terminals) {
		r->off = at;
		return rd_fail(r, "terminal %llu out of range (%u terminals)",
			       (unsigned long long)id, n_terminals);
	}
	if (tag & 1) {
		rc = rd_varint_max(r, GRAM_MAX_EVENTS - 2, &count, "repetition count");
		if (rc < 0)
			return rc;
		count += 2;
	}
	if (!mul_u64(count, child_events, &ev) || !add_u64(rule->n_events, ev, &ev) ||
	    ev > GRAM_MAX_EVENTS) {
		r->off = at;
		return rd_fail(r, "rule %u expands to more than 2^62 events", rule_idx);
	}
	rule->n_events = ev;
	if (child_height + 1 > rule->height)
		rule->height = child_height + 1;
	e->count = count;
	e->id = (uint32_t)id;
	e->is_rule = (uint32_t)(tag >> 1) & 1;
	g->n_elems++;
	return 0;
}

static int parse_rule(struct tfs_rd *r, uint32_t n_terminals, uint32_t idx,
		      struct tfs_grammar *g, uint64_t *elems_cap, uint64_t max_elems)
{
	struct gram_rule *rule = &g->rules[idx];
	uint64_t n_elems, room = max_elems - g->n_elems;
	int rc;

	/* every element takes a byte at least */
	if (rd_left(r) < room)
		room = rd_left(r);
	rc = rd_varint_max(r, room < UINT32_MAX ? room : UINT32_MAX, &n_elems, "rule length");
	if (rc < 0)
		return rc;
	if (n_elems == 0 && g->n_rules > 1)
		return rd_fail(r, "rule %u is empty", idx);
	rc = reserve_elems(g, elems_cap, n_elems, max_elems);
	if (rc < 0)
		return rc;
	rule->first_elem = g->n_elems;
	rule->n_elems = (uint32_t)n_elems;
	rule->n_events = 0;
	rule->height = 1;
	for (uint64_t i = 0; i < n_elems; i++) {
		rc = parse_elem(r, n_terminals, idx, g, rule);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/*
 * Parse a block of at most @max_elems elements in all (its rules: as many at most, since
 * only a lone start rule may be empty), checked before anything is allocated for them.
 */
static int parse_block(struct tfs_rd *r, uint32_t n_terminals, uint64_t max_elems,
		       struct tfs_grammar *g)
{
	uint64_t n_rules, elems_cap = 0;
	struct gram_elem *trimmed;
	int rc;

	memset(g, 0, sizeof(*g));
	rc = rd_varint(r, &n_rules);
	if (rc < 0)
		return rc;
	/* every rule takes at least one byte, and all but a lone empty start rule an element */
	if (n_rules == 0 || n_rules > rd_left(r) || n_rules > UINT32_MAX ||
	    (n_rules > 1 && n_rules > max_elems))
		return rd_fail(r, "bad rule count %llu with %zu bytes left",
			       (unsigned long long)n_rules, rd_left(r));
	g->rules = calloc(n_rules, sizeof(*g->rules));
	if (!g->rules)
		return -ENOMEM;
	g->n_rules = (uint32_t)n_rules;
	for (uint32_t i = 0; i < g->n_rules; i++) {
		rc = parse_rule(r, n_terminals, i, g, &elems_cap, max_elems);
		if (rc < 0)
			goto err_fini;
	}
	if (g->n_elems && g->n_elems < elems_cap) {
		trimmed = realloc(g->elems, g->n_elems * sizeof(*g->elems));
		if (trimmed)
			g->elems = trimmed;
	}
	g->n_events = g->rules[g->n_rules - 1].n_events;
	g->height = g->rules[g->n_rules - 1].height;
	return 0;

err_fini:
	grammar_fini(g);
	return rc;
}

int grammar_parse(struct tfs_rd *r, uint32_t n_terminals, struct tfs_grammar *g)
{
	return parse_block(r, n_terminals, UINT64_MAX, g);
}

int grammar_parse_events(struct tfs_rd *r, uint32_t n_terminals, uint64_t n_events,
			 struct tfs_grammar *g)
{
	size_t at = r->off;
	int rc = parse_block(r, n_terminals, gram_max_elems(n_events), g);

	if (rc == 0 && g->n_events != n_events) {
		r->off = at;
		rc = rd_fail(r, "block declares %llu events but expands to %llu",
			     (unsigned long long)n_events, (unsigned long long)g->n_events);
		grammar_fini(g);
	}
	return rc;
}

void grammar_fini(struct tfs_grammar *g)
{
	free(g->rules);
	free(g->elems);
	memset(g, 0, sizeof(*g));
}

/* One open rule while expanding: element @elem, repetition @rep of it in progress. */
struct xframe {
	uint32_t rule;
	uint32_t elem;
	uint64_t rep;
};

static inline uint64_t elem_events(const struct tfs_grammar *g, const struct gram_elem *e)
{
	return e->is_rule ? g->rules[e->id].n_events : 1;
}

/* Open frames down to the terminal run holding event @first; returns the stack depth. */
static uint32_t seek(const struct tfs_grammar *g, uint64_t first, struct xframe *st)
{
	uint32_t depth = 0, rule = g->n_rules - 1;

	for (;;) {
		const struct gram_rule *ru = &g->rules[rule];
		const struct gram_elem *e = &g->elems[ru->first_elem];
		uint32_t i = 0;
		uint64_t ev = elem_events(g, e);

		/* skipping elements one by one: bodies hold no prefix sums */
		while (first >= e->count * ev) {
			first -= e->count * ev;
			e++;
			i++;
			ev = elem_events(g, e);
		}
		st[depth].rule = rule;
		st[depth].elem = i;
		st[depth++].rep = first / ev;
		if (!e->is_rule)
			return depth;
		first %= ev;
		rule = e->id;
	}
}

/*
 * O(height + n + elements skipped on the way down): bodies carry no prefix sums, so finding
 * @first walks each body on the path element by element. Allocates only for grammars higher
 * than 64 (-ENOMEM then possible).
 */
int grammar_expand(const struct tfs_grammar *g, uint64_t first, uint64_t n, uint32_t *out)
{
	struct xframe small[64], *st = small;
	uint32_t depth;
	uint64_t end;
	int rc = 0;

	if (!add_u64(first, n, &end) || end > g->n_events)
		return -EINVAL;
	if (n == 0)
		return 0;
	if (g->height > sizeof(small) / sizeof(small[0])) {
		st = malloc((size_t)g->height * sizeof(*st));
		if (!st)
			return -ENOMEM;
	}
	depth = seek(g, first, st);
	while (n) {
		struct xframe *f = &st[depth - 1];
		const struct gram_rule *ru = &g->rules[f->rule];
		const struct gram_elem *e;

		if (f->elem == ru->n_elems) {
			if (--depth == 0) { /* only a grammar that grammar_parse did not make */
				rc = -EINVAL;
				break;
			}
			f = &st[depth - 1];
			e = &g->elems[g->rules[f->rule].first_elem + f->elem];
			if (++f->rep == e->count) {
				f->elem++;
				f->rep = 0;
			}
			continue;
		}
		e = &g->elems[ru->first_elem + f->elem];
		if (e->is_rule) {
			st[depth].rule = e->id;
			st[depth].elem = 0;
			st[depth++].rep = 0;
			continue;
		}
		for (; f->rep < e->count && n; f->rep++, n--)
			*out++ = e->id;
		f->elem++;
		f->rep = 0;
	}
	if (st != small)
		free(st);
	return rc;
}
