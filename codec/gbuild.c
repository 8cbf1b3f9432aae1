/*
 * Online Sequitur grammar builder with repetition counts (Pilgrim's variant, FORMAT.md §6):
 * every appended terminal extends the start rule, adjacent equal symbols are merged into
 * one symbol with a count, a digram (two adjacent symbols with their counts) never occurs
 * twice, and every rule is referenced twice or once with a count >= 2. It builds the grammar
 * of one stream in memory and exports it as a block; it does not parse blocks (grammar.c),
 * split streams into blocks, or know what a terminal means.
 */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gbuild_i.h"

/* ---- nodes, rules, work stack ---- */

static inline uint32_t nodes_avail(const struct tfs_gbuild *g)
{
	return g->n_free_nodes + (g->node_cap - g->node_hw);
}

static inline uint32_t rules_avail(const struct tfs_gbuild *g)
{
	return g->n_free_rules + (g->rule_cap - g->rule_hw);
}

/* Callers have made sure capacity is there. */
static uint32_t node_alloc(struct tfs_gbuild *g, uint32_t sym, uint64_t count)
{
	uint32_t n;

	if (g->node_free != NIL) {
		n = g->node_free;
		g->node_free = g->nodes[n].next;
		g->n_free_nodes--;
	} else {
		assert(g->node_hw < g->node_cap);
		n = g->node_hw++;
		g->nodes[n].flags = 0;
	}
	g->nodes[n].sym = sym;
	g->nodes[n].count = count;
	return n;
}

/* A queued node stays queued: its stack entry is still there and will visit whatever the
 * node has become by then. */
static void node_release(struct tfs_gbuild *g, uint32_t n)
{
	assert(!(g->nodes[n].flags & NF_INDEXED));
	g->nodes[n].sym = SYM_FREE;
	g->nodes[n].next = g->node_free;
	g->node_free = n;
	g->n_free_nodes++;
}

static uint32_t rule_alloc(struct tfs_gbuild *g)
{
	uint32_t r;

	if (g->rule_free != NIL) {
		r = g->rule_free;
		g->rule_free = g->rules[r].refs;
		g->n_free_rules--;
	} else {
		assert(g->rule_hw < g->rule_cap);
		r = g->rule_hw++;
	}
	g->rules[r].refs = 0;
	g->rules[r].guard = node_alloc(g, SYM_GUARD | r, 0);
	g->nodes[g->rules[r].guard].prev = g->rules[r].guard;
	g->nodes[g->rules[r].guard].next = g->rules[r].guard;
	return r;
}

static void rule_release(struct tfs_gbuild *g, uint32_t r)
{
	if (r == g->lp_rule)
		g->lp_rule = NIL; /* its number may come back as another rule */
	node_release(g, g->rules[r].guard);
	g->rules[r].guard = NIL;
	g->rules[r].refs = g->rule_free;
	g->rule_free = r;
	g->n_free_rules++;
}

static inline void link2(struct tfs_gbuild *g, uint32_t a, uint32_t b)
{
	g->nodes[a].next = b;
	g->nodes[b].prev = a;
}

static inline void push(struct tfs_gbuild *g, uint32_t n)
{
	if (!(g->nodes[n].flags & NF_QUEUED)) {
		g->nodes[n].flags |= NF_QUEUED;
		g->work[g->n_work++] = n;
	}
}

static inline void unref(struct tfs_gbuild *g, uint32_t sym)
{
	if (is_rule_sym(sym))
		g->rules[sym & SYM_ID_MASK].refs--;
}

/* ---- digram index ---- */

static void slot_remove(struct tfs_gbuild *g, uint64_t i)
{
	uint64_t j = i;

	for (;;) {
		uint64_t s, home;

		j = (j + 1) & g->slot_mask;
		s = g->slots[j];
		if (s == SLOT_EMPTY)
			break;
		home = home_slot(g, (uint32_t)(s >> 32));
		/* The entry may move back to i only if its home is not in (i, j]. */
		if (((j - home) & g->slot_mask) >= ((j - i) & g->slot_mask)) {
			g->slots[i] = s;
			i = j;
		}
	}
	g->slots[i] = SLOT_EMPTY;
	g->n_digrams--;
}

static void dg_unindex(struct tfs_gbuild *g, uint32_t n)
{
	uint64_t i;

	g->nodes[n].flags &= ~NF_INDEXED;
	for (i = home_slot(g, dg_tag(g, n)); (uint32_t)g->slots[i] != n;)
		i = (i + 1) & g->slot_mask;
	slot_remove(g, i);
}

/*
 * Forget the digram starting at @n if the index points at this occurrence. Must run before
 * the digram's symbols, counts or links change: the home slot is hashed from the nodes.
 * (Inline: most digrams asked about are not the indexed occurrence.)
 */
static inline void dg_del(struct tfs_gbuild *g, uint32_t n)
{
	if (g->nodes[n].flags & NF_INDEXED)
		dg_unindex(g, n);
}

/* ---- capacity ---- */

static void count_mem(struct tfs_gbuild *g)
{
	g->mem_bytes = sizeof(*g) + (size_t)g->node_cap * (sizeof(*g->nodes) + sizeof(*g->work)) +
		       (size_t)g->rule_cap * sizeof(*g->rules) +
		       (size_t)(g->slot_mask + 1) * sizeof(*g->slots) +
		       (size_t)g->lp_cap * sizeof(*g->lp_exp);
}

static int grow_nodes(struct tfs_gbuild *g, uint32_t need)
{
	uint64_t cap = g->node_cap, n_slots;
	struct gnode *nodes;
	uint64_t *slots;
	uint32_t *work;

	while (cap - g->node_hw + g->n_free_nodes < need)
		cap *= 2;
	if (cap > NODE_CAP_MAX)
		cap = NODE_CAP_MAX;
	if (cap - g->node_hw + g->n_free_nodes < need)
		return -ENOMEM;
	n_slots = 2 * cap;
	if (n_slots > g->slot_mask + 1) {
		unsigned int shift = g->slot_shift - (unsigned int)__builtin_ctzll(n_slots /
									(g->slot_mask + 1));

		slots = malloc(n_slots * sizeof(*slots));
		if (!slots)
			return -ENOMEM;
		memset(slots, 0xff, n_slots * sizeof(*slots));
		for (uint64_t i = 0; i <= g->slot_mask; i++) {
			uint64_t s = g->slots[i], j;

			if (s == SLOT_EMPTY)
				continue;
			for (j = (uint32_t)(s >> 32) >> shift; slots[j] != SLOT_EMPTY;)
				j = (j + 1) & (n_slots - 1);
			slots[j] = s;
		}
		free(g->slots);
		g->slots = slots;
		g->slot_mask = n_slots - 1;
		g->slot_shift = shift;
		count_mem(g); /* should what follows fail */
	}
	work = realloc(g->work, cap * sizeof(*work));
	if (!work)
		return -ENOMEM;
	g->work = work;
	nodes = realloc(g->nodes, cap * sizeof(*nodes));
	if (!nodes)
		return -ENOMEM;
	g->nodes = nodes;
	g->node_cap = (uint32_t)cap;
	count_mem(g);
	return 0;
}

static int grow_rules(struct tfs_gbuild *g, uint32_t need)
{
	uint64_t cap = g->rule_cap;
	struct grule *rules;

	while (cap - g->rule_hw + g->n_free_rules < need)
		cap *= 2;
	if (cap > RULE_CAP_MAX)
		cap = RULE_CAP_MAX;
	if (cap - g->rule_hw + g->n_free_rules < need)
		return -ENOMEM;
	rules = realloc(g->rules, cap * sizeof(*rules));
	if (!rules)
		return -ENOMEM;
	g->rules = rules;
	g->rule_cap = (uint32_t)cap;
	count_mem(g);
	return 0;
}

/* Every step keeps the builder consistent, so a failure half-way leaves it usable. */
static int reserve(struct tfs_gbuild *g, uint32_t n_nodes, uint32_t n_rules)
{
	int rc;

	if (nodes_avail(g) < n_nodes) {
		rc = grow_nodes(g, n_nodes);
		if (rc < 0)
			return rc;
	}
	if (rules_avail(g) < n_rules) {
		rc = grow_rules(g, n_rules);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- Sequitur operations ---- */

/* A digram starting at @n that is the whole body of a rule other than the start rule. */
static inline uint32_t whole_rule(const struct tfs_gbuild *g, uint32_t n)
{
	uint32_t p = g->nodes[n].prev, q = g->nodes[g->nodes[n].next].next;

	if (p == q && is_guard(g, p) && nrule(g, p) != 0)
		return nrule(g, p);
	return NIL;
}

/*
 * Replace the digram at @a by one reference to rule @r, merge it with equal neighbours, and
 * queue what changed. The caller queues the surviving occurrence, where any rule that just
 * lost its second reference is referenced from.
 */
static void subst(struct tfs_gbuild *g, uint32_t a, uint32_t r)
{
	uint32_t b = g->nodes[a].next;
	uint32_t p = g->nodes[a].prev, q = g->nodes[b].next;
	uint32_t x, sym = SYM_RULE | r;

	dg_del(g, p);
	dg_del(g, a);
	dg_del(g, b);
	unref(g, g->nodes[a].sym);
	unref(g, g->nodes[b].sym);
	node_release(g, a);
	node_release(g, b);
	x = node_alloc(g, sym, 1);
	link2(g, p, x);
	link2(g, x, q);
	g->rules[r].refs++;
	if (!is_guard(g, p) && g->nodes[p].sym == sym) {
		dg_del(g, g->nodes[p].prev);
		g->nodes[p].count++;
		link2(g, p, q);
		node_release(g, x);
		g->rules[r].refs--;
		x = p;
	}
	if (!is_guard(g, q) && g->nodes[q].sym == sym) {
		dg_del(g, g->nodes[x].prev);
		dg_del(g, q);
		g->nodes[x].count += g->nodes[q].count;
		link2(g, x, g->nodes[q].next);
		node_release(g, q);
		g->rules[r].refs--;
	}
	if (!is_guard(g, g->nodes[x].prev))
		push(g, g->nodes[x].prev);
	push(g, x);
}

/*
 * The digram at @m (indexed) occurs again at @n and neither is a whole rule: move @m's two
 * nodes into a new rule, put a reference in their place, and substitute @n as well.
 */
static void new_rule(struct tfs_gbuild *g, uint32_t n, uint32_t m)
{
	uint32_t b = g->nodes[m].next;
	uint32_t p = g->nodes[m].prev, q = g->nodes[b].next;
	uint32_t r, x, guard;

	if ((nodes_avail(g) < 2 || rules_avail(g) < 1) && reserve(g, 2, 1) < 0) {
		/* Out of memory mid-cascade: keep the duplicate, the grammar is still exact. */
		g->n_unfactored++;
		return;
	}
	dg_del(g, p);
	dg_del(g, b);
	r = rule_alloc(g);
	guard = g->rules[r].guard;
	x = node_alloc(g, SYM_RULE | r, 1);
	link2(g, p, x);
	link2(g, x, q);
	link2(g, guard, m);
	link2(g, m, b);
	link2(g, b, guard);
	g->rules[r].refs = 1;
	if (!is_guard(g, p))
		push(g, p);
	push(g, x);
	subst(g, n, r);
	push(g, m);
	push(g, b);
}

/* The digram at @n equals the indexed one at @m (n != m, never overlapping). */
static void match(struct tfs_gbuild *g, uint32_t n, uint32_t m)
{
	uint32_t r;

	r = whole_rule(g, m);
	if (r != NIL) {
		/* When @n is a whole rule too, its rule becomes an alias of r. */
		subst(g, n, r);
		push(g, m);
		push(g, g->nodes[m].next);
		return;
	}
	r = whole_rule(g, n);
	if (r != NIL) {
		subst(g, m, r);
		push(g, n); /* indexes the rule body in place of @m */
		push(g, g->nodes[n].next);
		return;
	}
	new_rule(g, n, m);
}

/* @x is the only reference to its rule and has count 1: splice the body in its place. */
static void inline_rule(struct tfs_gbuild *g, uint32_t x)
{
	uint32_t r = nrule(g, x), guard = g->rules[r].guard;
	uint32_t p = g->nodes[x].prev, q = g->nodes[x].next;
	uint32_t f = g->nodes[guard].next, l = g->nodes[guard].prev;

	dg_del(g, p);
	dg_del(g, x);
	node_release(g, x);
	rule_release(g, r);
	link2(g, p, f);
	link2(g, l, q);
	if (!is_guard(g, p) && g->nodes[p].sym == g->nodes[f].sym) {
		dg_del(g, g->nodes[p].prev);
		dg_del(g, f);
		g->nodes[p].count += g->nodes[f].count;
		unref(g, g->nodes[f].sym);
		link2(g, p, g->nodes[f].next);
		node_release(g, f);
		if (l == f)
			l = p;
		f = p;
	}
	if (!is_guard(g, q) && g->nodes[l].sym == g->nodes[q].sym) {
		dg_del(g, g->nodes[l].prev);
		dg_del(g, q);
		g->nodes[l].count += g->nodes[q].count;
		unref(g, g->nodes[q].sym);
		link2(g, l, g->nodes[q].next);
		node_release(g, q);
	}
	if (!is_guard(g, g->nodes[f].prev))
		push(g, g->nodes[f].prev);
	push(g, f);
	if (!is_guard(g, g->nodes[l].prev))
		push(g, g->nodes[l].prev);
	push(g, l);
}

static void visit(struct tfs_gbuild *g, uint32_t n)
{
	struct gnode *a = &g->nodes[n];
	uint32_t tag, m;
	uint64_t i;
	bool found;

	a->flags &= ~NF_QUEUED;
	if (a->sym & SYM_GUARD) /* also SYM_FREE */
		return;
	if (is_rule_sym(a->sym) && a->count == 1 && g->rules[a->sym & SYM_ID_MASK].refs == 1) {
		inline_rule(g, n);
		return;
	}
	if ((a->flags & NF_INDEXED) || is_guard(g, a->next))
		return;
	tag = dg_tag(g, n);
	i = dg_probe(g, n, tag, &found);
	if (!found) {
		g->slots[i] = (uint64_t)tag << 32 | n;
		g->n_digrams++;
		a->flags |= NF_INDEXED;
		return;
	}
	m = (uint32_t)g->slots[i];
	if (m == n || g->nodes[m].next == n || a->next == m)
		return;
	match(g, n, m);
}

static void drain(struct tfs_gbuild *g)
{
	while (g->n_work)
		visit(g, g->work[--g->n_work]);
}

/* ---- public ---- */

static void start_rule(struct tfs_gbuild *g)
{
	uint32_t r = rule_alloc(g);

	assert(r == 0);
	(void)r;
}

void gbuild_reset(struct tfs_gbuild *g)
{
	g->node_hw = 0;
	g->node_free = NIL;
	g->n_free_nodes = 0;
	g->rule_hw = 0;
	g->rule_free = NIL;
	g->n_free_rules = 0;
	memset(g->slots, 0xff, (g->slot_mask + 1) * sizeof(*g->slots));
	g->n_digrams = 0;
	g->n_work = 0;
	g->n_events = 0;
	g->n_unfactored = 0;
	g->lp_rule = NIL;
	g->lp_len = 0;
	g->lp_node = NIL;
	g->lp_pos = 0;
	g->lp_err = 0;
	start_rule(g);
}

struct tfs_gbuild *gbuild_new(void)
{
	struct tfs_gbuild *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->node_cap = 64;
	g->rule_cap = 16;
	g->slot_mask = 2 * g->node_cap - 1;
	g->slot_shift = 32 - 7; /* 128 slots */
	count_mem(g);
	g->nodes = malloc(g->node_cap * sizeof(*g->nodes));
	if (!g->nodes)
		goto err_free_builder;
	g->work = malloc(g->node_cap * sizeof(*g->work));
	if (!g->work)
		goto err_free_builder;
	g->slots = malloc((g->slot_mask + 1) * sizeof(*g->slots));
	if (!g->slots)
		goto err_free_builder;
	g->rules = malloc(g->rule_cap * sizeof(*g->rules));
	if (!g->rules)
		goto err_free_builder;
	gbuild_reset(g);
	return g;

err_free_builder:
	gbuild_free(g); /* frees what was allocated */
	return NULL;
}

void gbuild_free(struct tfs_gbuild *g)
{
	if (!g)
		return;
	free(g->nodes);
	free(g->work);
	free(g->slots);
	free(g->rules);
	free(g->lp_exp);
	free(g);
}

/* Sequitur's append of @terminal to the start rule. @return 0 or -ENOMEM (nothing done) */
static int seq_append(struct tfs_gbuild *g, uint32_t terminal)
{
	uint32_t guard = g->rules[0].guard, last;
	int rc;

	if (nodes_avail(g) < NODE_RESERVE || rules_avail(g) < RULE_RESERVE) {
		rc = reserve(g, NODE_RESERVE, RULE_RESERVE);
		if (rc < 0)
			return rc;
	}
	last = g->nodes[guard].prev;
	if (last != guard && g->nodes[last].sym == terminal) {
		uint32_t p = g->nodes[last].prev;

		dg_del(g, p);
		g->nodes[last].count++;
		if (p != guard)
			push(g, p);
	} else {
		uint32_t x = node_alloc(g, terminal, 1);

		link2(g, last, x);
		link2(g, x, guard);
		if (last != guard)
			push(g, last);
	}
	drain(g);
	return 0;
}

/* ---- the loop fast path (struct tfs_gbuild, lp_*) ---- */

/* lp_exp grown to hold @need <= LP_MAX terminals. @return false: no memory (none needed) */
static bool lp_room(struct tfs_gbuild *g, uint32_t need)
{
	uint32_t cap = g->lp_cap ? g->lp_cap : 16;
	uint32_t *a;

	if (need <= g->lp_cap)
		return true;
	if (need > LP_MAX)
		return false;
	while (cap < need)
		cap *= 2;
	cap = cap < LP_MAX ? cap : LP_MAX;
	a = realloc(g->lp_exp, (size_t)cap * sizeof(*a));
	if (!a)
		return false;
	g->lp_exp = a;
	g->lp_cap = cap;
	count_mem(g);
	return true;
}

/*
 * Rule @r's expansion into lp_exp, made lp_rule; lp_len 0 when it is longer than LP_MAX or
 * nests deeper than LP_DEPTH. Each element's expansion is made once, then copied for its
 * count.
 */
static void lp_expand(struct tfs_gbuild *g, uint32_t r)
{
	struct {
		uint32_t node;	/* the element being expanded, or the guard at the body's end */
		uint32_t start; /* where that element's expansion began in lp_exp */
	} st[LP_DEPTH];
	uint32_t depth = 0, len = 0;

	g->lp_rule = r;
	g->lp_len = 0;
	st[depth++].node = g->nodes[g->rules[r].guard].next;
	while (depth) {
		const uint32_t n = st[depth - 1].node;
		const struct gnode *a = &g->nodes[n];
		uint64_t piece, more;

		if (is_guard(g, n)) {
			if (--depth == 0)
				break;
			/* the parent's element, a rule, expanded once: copy it for its count */
			a = &g->nodes[st[depth - 1].node];
		} else if (is_rule_sym(a->sym)) {
			if (depth == LP_DEPTH)
				return;
			st[depth - 1].start = len;
			st[depth++].node = g->nodes[g->rules[a->sym & SYM_ID_MASK].guard].next;
			continue;
		} else {
			if (!lp_room(g, len + 1))
				return;
			st[depth - 1].start = len;
			g->lp_exp[len++] = a->sym;
		}
		piece = len - st[depth - 1].start;
		more = a->count - 1;
		if (more > (LP_MAX - len) / piece || !lp_room(g, len + (uint32_t)(more * piece)))
			return;
		for (uint64_t k = 0; k < more; k++, len += (uint32_t)piece)
			memcpy(g->lp_exp + len, g->lp_exp + st[depth - 1].start,
			       (size_t)piece * sizeof(g->lp_exp[0]));
		st[depth - 1].node = a->next;
	}
	g->lp_len = len;
}

/*
 * Start following a loop at @terminal: the start rule ends with a rule repeated (count >= 2,
 * so a loop has begun) whose expansion begins with @terminal. @return whether it did
 */
static bool lp_arm(struct tfs_gbuild *g, uint32_t terminal)
{
	const uint32_t guard = g->rules[0].guard, last = g->nodes[guard].prev;
	const struct gnode *a = &g->nodes[last];

	if (last == guard || !is_rule_sym(a->sym) || a->count < 2)
		return false;
	if ((a->sym & SYM_ID_MASK) != g->lp_rule)
		lp_expand(g, a->sym & SYM_ID_MASK);
	if (g->lp_len == 0 || g->lp_exp[0] != terminal)
		return false;
	g->lp_node = last;
	g->lp_pos = 0;
	return true;
}

/*
 * Stop following the loop: the terminals waiting go through Sequitur. Room for all of them
 * is made first, so that the only failure leaves everything as it was.
 * @return 0 or -ENOMEM (still following, nothing changed)
 */
static int lp_flush(struct tfs_gbuild *g)
{
	const uint32_t n = g->lp_pos;
	int rc;

	if (n) {
		rc = reserve(g, NODE_RESERVE + 2 * n, RULE_RESERVE + n);
		if (rc < 0)
			return rc;
	}
	g->lp_node = NIL;
	g->lp_pos = 0;
	for (uint32_t i = 0; i < n; i++) {
		rc = seq_append(g, g->lp_exp[i]);
		if (rc < 0)
			return g->lp_err = rc; /* never with the room made above */
	}
	return 0;
}

/*
 * The loop's last terminal: one more repetition, as Sequitur merges equal neighbours; then
 * follow on if the start rule still ends with the rule (what precedes it may have been
 * factored with it). @return 0 or -ENOMEM (nothing changed)
 */
static int lp_complete(struct tfs_gbuild *g)
{
	const uint32_t guard = g->rules[0].guard, last = g->lp_node, p = g->nodes[last].prev;
	int rc;

	if (nodes_avail(g) < NODE_RESERVE || rules_avail(g) < RULE_RESERVE) {
		rc = reserve(g, NODE_RESERVE, RULE_RESERVE);
		if (rc < 0)
			return rc;
	}
	dg_del(g, p);
	g->nodes[last].count++;
	if (p != guard)
		push(g, p);
	drain(g);
	g->lp_pos = 0;
	if (g->lp_rule == NIL || g->nodes[guard].prev == guard ||
	    g->nodes[g->nodes[guard].prev].sym != (SYM_RULE | g->lp_rule))
		g->lp_node = NIL;
	else
		g->lp_node = g->nodes[guard].prev;
	return 0;
}

int gbuild_append(struct tfs_gbuild *g, uint32_t terminal)
{
	int rc;

	if (terminal >= GRAM_MAX_TERMINAL)
		return -EINVAL;
	if (g->n_events >= GRAM_MAX_EVENTS)
		return -EOVERFLOW;
	if (g->lp_err)
		return g->lp_err;
	if (g->lp_node != NIL && terminal != g->lp_exp[g->lp_pos]) {
		rc = lp_flush(g);
		if (rc < 0)
			return rc;
	}
	if (g->lp_node == NIL && !lp_arm(g, terminal)) {
		rc = seq_append(g, terminal);
		if (rc < 0)
			return rc;
	} else if (g->lp_pos + 1 == g->lp_len) {
		rc = lp_complete(g);
		if (rc < 0)
			return rc;
	} else {
		g->lp_pos++;
	}
	g->n_events++;
	return 0;
}

size_t gbuild_mem_bytes(const struct tfs_gbuild *g)
{
	return g->mem_bytes;
}

uint64_t gbuild_n_events(const struct tfs_gbuild *g)
{
	return g->n_events;
}

/* ---- export ---- */

/*
 * Post-order of the rules reachable from the start rule, without recursion. @order receives
 * rule numbers (start rule last), @num maps a rule to its position (NIL if unreached).
 * @stack holds one body cursor per open rule. Returns the number of rules.
 */
static uint32_t post_order(const struct tfs_gbuild *g, uint32_t *order, uint32_t *num,
			   uint32_t *stack)
{
	uint32_t depth = 0, n_out = 0;

	for (uint32_t r = 0; r < g->rule_hw; r++)
		num[r] = NIL;
	num[0] = NIL - 1; /* open */
	stack[depth++] = g->nodes[g->rules[0].guard].next;
	while (depth) {
		uint32_t n = stack[depth - 1];

		if (is_guard(g, n)) {
			uint32_t r = nrule(g, n);

			depth--;
			num[r] = n_out;
			order[n_out++] = r;
			continue;
		}
		stack[depth - 1] = g->nodes[n].next;
		if (is_rule_sym(g->nodes[n].sym) && num[nrule(g, n)] == NIL) {
			num[nrule(g, n)] = NIL - 1;
			stack[depth++] = g->nodes[g->rules[nrule(g, n)].guard].next;
		}
	}
	return n_out;
}

static int put_rule(const struct tfs_gbuild *g, uint32_t r, const uint32_t *num,
		    struct tfs_buf *out)
{
	uint32_t guard = g->rules[r].guard;
	uint64_t n_elems = 0;
	int rc;

	for (uint32_t n = g->nodes[guard].next; n != guard; n = g->nodes[n].next)
		n_elems++;
	rc = buf_put_varint(out, n_elems);
	for (uint32_t n = g->nodes[guard].next; rc == 0 && n != guard; n = g->nodes[n].next) {
		const struct gnode *a = &g->nodes[n];
		uint64_t id = is_rule_sym(a->sym) ? num[a->sym & SYM_ID_MASK] : a->sym;
		uint64_t tag = id << 2 | (uint64_t)is_rule_sym(a->sym) << 1 | (a->count >= 2);

		rc = buf_put_varint(out, tag);
		if (rc == 0 && a->count >= 2)
			rc = buf_put_varint(out, a->count - 2);
	}
	return rc;
}

int gbuild_export(struct tfs_gbuild *g, struct tfs_buf *out)
{
	size_t len0 = out->len;
	uint32_t *order, *num, *stack;
	uint32_t n_rules;
	int rc = g->lp_err ? g->lp_err : lp_flush(g);

	if (rc < 0)
		return rc;
	rc = -ENOMEM;
	order = malloc((size_t)g->rule_hw * sizeof(*order));
	if (!order)
		return -ENOMEM;
	num = malloc((size_t)g->rule_hw * sizeof(*num));
	if (!num)
		goto out_free_order;
	stack = malloc((size_t)g->rule_hw * sizeof(*stack));
	if (!stack)
		goto out_free_num;
	n_rules = post_order(g, order, num, stack);
	rc = buf_put_varint(out, n_rules);
	for (uint32_t i = 0; rc == 0 && i < n_rules; i++)
		rc = put_rule(g, order[i], num, out);
	if (rc < 0)
		out->len = len0;
	free(stack);
out_free_num:
	free(num);
out_free_order:
	free(order);
	return rc;
}

