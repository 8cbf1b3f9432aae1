/*
 * Names section payload (FORMAT.md §12), both directions. The decoder parses a payload twice,
 * once to check it and count what it holds and once to fill arrays of exactly that size, so
 * hostile counts never drive an allocation; lookups are binary searches over runs and
 * sorted entries. The encoder keeps each distinct table once (a hash of the names it gives,
 * confirmed entry by entry) and stores a new table as changes to the first table or to the
 * latest one stored whole, whichever needs fewer entries, when that beats storing it whole:
 * the ranks of one job differ in a few pipes and output files. Nothing here compresses.
 */
#include <stdlib.h>
#include <string.h>

#include "names_i.h"
#include "tfs/schema.h"

#define ARENA_BLOCK (64u << 10)

/* ---- shared ---- */

/* A symbol class as FORMAT.md §4 spells them: printable ASCII without space, '"' or '\'. */
static bool class_ok(const char *p, size_t n)
{
	if (n < 1 || n > 255)
		return false;
	for (size_t i = 0; i < n; i++)
		if (p[i] <= 0x20 || p[i] >= 0x7f || p[i] == '"' || p[i] == '\\')
			return false;
	return true;
}

static int cmp_key(const struct name_ent *a, uint32_t cls, uint64_t id)
{
	if (a->cls != cls)
		return a->cls < cls ? -1 : 1;
	return a->id < id ? -1 : a->id > id;
}

static const struct name_ent *find_ent(const struct name_ent *e, uint32_t n, uint32_t cls,
				       uint64_t id)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = cmp_key(&e[mid], cls, id);

		if (c == 0)
			return &e[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

void names_iter_init(struct names_iter *it, const struct name_table *tables, uint32_t table)
{
	const struct name_table *t = &tables[table];

	it->a = t->e;
	it->a_end = t->e + t->n;
	it->b = it->b_end = NULL;
	if (t->base != NAMES_NO_BASE) {
		it->b = tables[t->base].e;
		it->b_end = it->b + tables[t->base].n;
	}
}

const struct name_ent *names_iter_next(struct names_iter *it)
{
	for (;;) {
		const struct name_ent *x;
		int c;

		if (it->a == it->a_end && it->b == it->b_end)
			return NULL;
		if (it->a == it->a_end)
			return it->b++;
		c = it->b == it->b_end ? -1 : cmp_key(it->a, it->b->cls, it->b->id);
		if (c > 0)
			return it->b++;
		if (c == 0)
			it->b++; /* replaced or removed by the table's own entry */
		x = it->a++;
		if (x->len)
			return x;
	}
}

/* ---- decoding ---- */

struct nparse {
	struct tfs_rd r;
	struct names *nm; /* NULL: the counting pass */
	uint32_t n_ranks;
	uint64_t n_classes, n_tables, n_ents, n_runs, arena_len;
	char *arena_at;
};

static const char *keep_str(struct nparse *p, const uint8_t *s, size_t n)
{
	char *d = p->arena_at;

	p->arena_len += n + 1;
	if (!p->nm)
		return NULL;
	memcpy(d, s, n);
	d[n] = 0;
	p->arena_at += n + 1;
	return d;
}

static int parse_classes(struct nparse *p)
{
	int rc = rd_varint_max(&p->r, rd_left(&p->r) / 2, &p->n_classes, "class count");

	if (rc == 0 && p->n_classes == 0)
		rc = rd_fail(&p->r, "names section without classes");
	for (uint32_t i = 0; i < p->n_classes && rc == 0; i++) {
		const uint8_t *s;
		size_t len;
		const char *c;

		rc = rd_str(&p->r, 255, &s, &len);
		if (rc < 0)
			return rc;
		if (!class_ok((const char *)s, len))
			return rd_fail(&p->r, "class %u is empty or not printable ascii", i);
		c = keep_str(p, s, len);
		if (p->nm)
			p->nm->classes[i] = c;
	}
	return rc;
}

/* Base of table @i: 0 none, else 1 + an earlier table without base. */
static int parse_base(struct nparse *p, uint32_t i, uint32_t *base)
{
	uint64_t v;
	int rc = rd_varint_max(&p->r, i, &v, "table base");

	if (rc < 0)
		return rc;
	*base = v ? (uint32_t)(v - 1) : NAMES_NO_BASE;
	if (p->nm && v && p->nm->tables[v - 1].base != NAMES_NO_BASE)
		return rd_fail(&p->r, "table %u is based on table %llu, which has a base itself", i,
			       (unsigned long long)(v - 1));
	return 0;
}

static int parse_entry(struct nparse *p, bool based, const struct name_ent *prev,
		       struct name_ent *e)
{
	uint64_t cls, code, id;
	const uint8_t *s;
	size_t len;
	int rc = rd_varint_max(&p->r, p->n_classes - 1, &cls, "entry class");

	if (rc == 0)
		rc = rd_varint(&p->r, &code);
	if (rc == 0)
		rc = rd_str(&p->r, NAMES_MAX_BYTES, &s, &len);
	if (rc < 0)
		return rc;
	if (prev && cls < prev->cls)
		return rd_fail(&p->r, "entries out of class order");
	id = code;
	if (prev && cls == prev->cls && (!add_u64(prev->id, code, &id) || !add_u64(id, 1, &id)))
		return rd_fail(&p->r, "entry id past 2^64 - 1");
	if (id == TFS_SYM_NONE)
		return rd_fail(&p->r, "a name for id %llu, which names no symbol",
			       (unsigned long long)id);
	if (len == 0 && !based)
		return rd_fail(&p->r, "empty name in a table without base");
	if (memchr(s, 0, len))
		return rd_fail(&p->r, "name holds a NUL byte");
	*e = (struct name_ent){id, NULL, (uint32_t)len, (uint32_t)cls};
	e->name = keep_str(p, s, len);
	return 0;
}

static int parse_tables(struct nparse *p)
{
	struct name_ent tmp, prev;
	uint64_t n_ents;
	int rc = rd_varint_max(&p->r, rd_left(&p->r) / 2, &p->n_tables, "table count");

	if (rc == 0 && p->n_tables == 0)
		rc = rd_fail(&p->r, "names section without tables");
	for (uint32_t i = 0; i < p->n_tables && rc == 0; i++) {
		struct name_table *t = p->nm ? &p->nm->tables[i] : NULL;
		uint32_t base;

		rc = parse_base(p, i, &base);
		if (rc == 0)
			rc = rd_varint_max(&p->r, rd_left(&p->r) / 3, &n_ents, "entry count");
		if (rc < 0)
			return rc;
		if (t)
			*t =
			    (struct name_table){base, (uint32_t)n_ents, p->nm->ents + p->n_ents, 0};
		for (uint32_t j = 0; j < n_ents && rc == 0; j++) {
			struct name_ent *e = t ? &p->nm->ents[p->n_ents] : &tmp;

			rc = parse_entry(p, base != NAMES_NO_BASE, j ? &prev : NULL, e);
			prev = *e;
			p->n_ents++;
		}
	}
	return rc;
}

static int parse_runs(struct nparse *p)
{
	uint64_t end = 0;
	int rc = rd_varint_max(&p->r, rd_left(&p->r) / 3, &p->n_runs, "run count");

	if (rc == 0 && p->n_runs == 0)
		rc = rd_fail(&p->r, "names section without runs");
	for (uint32_t i = 0; i < p->n_runs && rc == 0; i++) {
		uint64_t gap, len, table, first;

		rc = rd_varint_max(&p->r, p->n_ranks, &gap, "run gap");
		if (rc == 0)
			rc = rd_varint_max(&p->r, p->n_ranks, &len, "run length");
		if (rc == 0)
			rc = rd_varint_max(&p->r, p->n_tables - 1, &table, "run table");
		if (rc < 0)
			return rc;
		first = end + gap; /* both <= 2^32: no overflow */
		end = first + len + 1;
		if (end > p->n_ranks)
			return rd_fail(&p->r, "run of ranks %llu to %llu past %u ranks",
				       (unsigned long long)first, (unsigned long long)end - 1,
				       p->n_ranks);
		if (p->nm) {
			p->nm->runs[i] = (struct name_run){(uint32_t)first, (uint32_t)(len + 1),
							   (uint32_t)table};
			p->nm->tables[table].n_ranks += len + 1;
		}
	}
	return rc;
}

static int parse_all(struct nparse *p)
{
	int rc = parse_classes(p);

	if (rc == 0)
		rc = parse_tables(p);
	if (rc == 0)
		rc = parse_runs(p);
	if (rc == 0 && rd_left(&p->r))
		rc = rd_fail(&p->r, "%zu trailing bytes", rd_left(&p->r));
	return rc;
}

static int cmp_class(const void *a, const void *b, void *arg)
{
	const struct names *nm = arg;

	return strcmp(nm->classes[*(const uint32_t *)a], nm->classes[*(const uint32_t *)b]);
}

static int sort_classes(struct nparse *p)
{
	struct names *nm = p->nm;

	for (uint32_t i = 0; i < nm->n_classes; i++)
		nm->class_order[i] = i;
	qsort_r(nm->class_order, nm->n_classes, sizeof(*nm->class_order), cmp_class, nm);
	for (uint32_t i = 1; i < nm->n_classes; i++) {
		if (!strcmp(nm->classes[nm->class_order[i - 1]], nm->classes[nm->class_order[i]]))
			return diag_set(p->r.diag, -TFS_ECORRUPT, p->r.base_off, "names",
					"class %s listed twice", nm->classes[nm->class_order[i]]);
	}
	return 0;
}

int names_decode(struct names *nm, const uint8_t *data, size_t len, uint32_t n_ranks,
		 uint64_t file_off, struct tfs_diag *diag)
{
	struct nparse p = {.n_ranks = n_ranks};
	int rc;

	memset(nm, 0, sizeof(*nm));
	rd_init(&p.r, data, len, file_off, "names", diag);
	rc = parse_all(&p);
	if (rc < 0)
		goto err_offset;
	/* the counting pass succeeded: every count below is bounded by @len */
	nm->classes = calloc(p.n_classes, sizeof(*nm->classes));
	nm->class_order = calloc(p.n_classes, sizeof(*nm->class_order));
	nm->tables = calloc(p.n_tables, sizeof(*nm->tables));
	nm->runs = calloc(p.n_runs, sizeof(*nm->runs));
	nm->ents = calloc(p.n_ents + 1, sizeof(*nm->ents));
	nm->arena = malloc(p.arena_len + 1);
	if (!nm->classes || !nm->class_order || !nm->tables || !nm->runs || !nm->ents ||
	    !nm->arena) {
		rc = -ENOMEM;
		goto err_fini;
	}
	nm->n_classes = (uint32_t)p.n_classes;
	nm->n_tables = (uint32_t)p.n_tables;
	nm->n_runs = (uint32_t)p.n_runs;
	nm->n_ents = p.n_ents;
	p = (struct nparse){.nm = nm, .n_ranks = n_ranks, .arena_at = nm->arena};
	rd_init(&p.r, data, len, file_off, "names", diag);
	rc = parse_all(&p);
	if (rc == 0)
		rc = sort_classes(&p);
	if (rc == 0)
		return 0;
err_offset:
	if (rc == -TFS_ECORRUPT && diag)
		diag->offset = file_off; /* the payload is compressed: what a user can look at */
err_fini:
	names_fini(nm);
	return rc;
}

void names_fini(struct names *nm)
{
	free(nm->classes);
	free(nm->class_order);
	free(nm->tables);
	free(nm->runs);
	free(nm->ents);
	free(nm->arena);
	memset(nm, 0, sizeof(*nm));
}

uint32_t names_class(const struct names *nm, const char *cls)
{
	uint32_t lo = 0, hi = nm->n_classes;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = strcmp(nm->classes[nm->class_order[mid]], cls);

		if (c == 0)
			return nm->class_order[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return UINT32_MAX;
}

const struct name_table *names_table_of(const struct names *nm, uint32_t rank)
{
	uint32_t lo = 0, hi = nm->n_runs;

	/* the last run starting at or before @rank */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (nm->runs[mid].first <= rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || rank - nm->runs[lo - 1].first >= nm->runs[lo - 1].n)
		return NULL;
	return &nm->tables[nm->runs[lo - 1].table];
}

const struct name_ent *names_get(const struct names *nm, const struct name_table *tb, uint32_t cls,
				 uint64_t id)
{
	const struct name_ent *e = find_ent(tb->e, tb->n, cls, id);

	if (!e && tb->base != NAMES_NO_BASE)
		e = find_ent(nm->tables[tb->base].e, nm->tables[tb->base].n, cls, id);
	return e && e->len ? e : NULL;
}

/* ---- encoding ---- */

static char *arena_put(struct name_arena *a, const char *p, size_t n)
{
	char *d;

	if (!a->n_blocks || a->used + n + 1 > ARENA_BLOCK) {
		size_t size = n + 1 > ARENA_BLOCK ? n + 1 : ARENA_BLOCK;

		if (a->n_blocks == a->cap) {
			size_t cap = a->cap ? 2 * a->cap : 16;
			char **b = realloc(a->blocks, cap * sizeof(*b));

			if (!b)
				return NULL;
			a->blocks = b;
			a->cap = cap;
		}
		a->blocks[a->n_blocks] = malloc(size);
		if (!a->blocks[a->n_blocks])
			return NULL;
		a->n_blocks++;
		a->used = 0;
	}
	d = a->blocks[a->n_blocks - 1] + a->used;
	memcpy(d, p, n);
	d[n] = 0;
	a->used += n + 1;
	return d;
}

void names_enc_init(struct names_enc *e)
{
	memset(e, 0, sizeof(*e));
	intern_init(&e->classes);
}

void names_enc_fini(struct names_enc *e)
{
	intern_fini(&e->classes);
	for (uint32_t i = 0; i < e->n_tables; i++)
		free(e->own[i]);
	free(e->own);
	free(e->tables);
	free(e->hash);
	free(e->slots);
	free(e->runs);
	for (size_t i = 0; i < e->arena.n_blocks; i++)
		free(e->arena.blocks[i]);
	free(e->arena.blocks);
	free(e->tmp[0]);
	free(e->tmp[1]);
	memset(e, 0, sizeof(*e));
}

static int grow_tmp(struct names_enc *e, int k, uint64_t need)
{
	struct name_ent *p;
	uint32_t cap;

	if (need <= e->tmp_cap[k])
		return 0;
	if (need > UINT32_MAX / 2)
		return -ENOMEM;
	cap = (uint32_t)need < 64 ? 64 : 2 * (uint32_t)need;
	p = realloc(e->tmp[k], (size_t)cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	e->tmp[k] = p;
	e->tmp_cap[k] = cap;
	return 0;
}

/* The names table @t gives, into e->tmp[@k]. @return their count or -ENOMEM */
static int64_t materialize(struct names_enc *e, uint32_t t, int k)
{
	const struct name_table *tb = &e->tables[t];
	uint64_t most = tb->n + (tb->base != NAMES_NO_BASE ? e->tables[tb->base].n : 0);
	const struct name_ent *x;
	struct names_iter it;
	int64_t n = 0;

	if (grow_tmp(e, k, most) < 0)
		return -ENOMEM;
	names_iter_init(&it, e->tables, t);
	while ((x = names_iter_next(&it)))
		e->tmp[k][n++] = *x;
	return n;
}

static uint64_t hash_names(const struct name_ent *v, uint32_t n)
{
	uint64_t h = UINT64_C(0x243f6a8885a308d3) ^ n;

	for (uint32_t i = 0; i < n; i++) {
		h = (h ^ v[i].cls) * UINT64_C(0x9e3779b97f4a7c15);
		h = (h ^ v[i].id) * UINT64_C(0xc2b2ae3d27d4eb4f);
		h = (h ^ hash_bytes(v[i].name, v[i].len)) * UINT64_C(0x9e3779b97f4a7c15);
	}
	return h ^ (h >> 29);
}

static bool same_name(const struct name_ent *a, const struct name_ent *b)
{
	return a->len == b->len && !memcmp(a->name, b->name, a->len);
}

static bool same_names(const struct name_ent *a, const struct name_ent *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (a[i].cls != b[i].cls || a[i].id != b[i].id || !same_name(&a[i], &b[i]))
			return false;
	return true;
}

/*
 * Walk the names @v (sorted, @n) against a base's @b (@nb): the entries a table based on it
 * stores (@out NULL: only counted). Names are copied into the arena.
 * @return the count, or -ENOMEM
 */
static int64_t delta(struct names_enc *e, const struct name_ent *v, uint32_t n,
		     const struct name_ent *b, uint32_t nb, struct name_ent *out)
{
	uint32_t i = 0, j = 0;
	int64_t k = 0;

	while (i < n || j < nb) {
		int c = i == n ? 1 : j == nb ? -1 : cmp_key(&v[i], b[j].cls, b[j].id);
		struct name_ent x;

		if (c == 0 && same_name(&v[i], &b[j])) {
			i++;
			j++;
			continue;
		}
		if (c > 0) {
			x = (struct name_ent){b[j].id, "", 0, b[j].cls}; /* removed */
			j++;
		} else {
			x = v[i++];
			j += c == 0; /* replaced */
		}
		if (out && x.len && !(x.name = arena_put(&e->arena, x.name, x.len)))
			return -ENOMEM;
		if (out)
			out[k] = x;
		k++;
	}
	return k;
}

static int cmp_ent(const void *a, const void *b)
{
	const struct name_ent *y = b;

	return cmp_key(a, y->cls, y->id);
}

/* The new table's names into e->tmp[0], classes interned, sorted and checked. */
static int take_names(struct names_enc *e, const struct name_in *in, uint32_t n)
{
	int rc = grow_tmp(e, 0, n);

	for (uint32_t i = 0; i < n && rc == 0; i++) {
		const struct name_in *x = &in[i];
		bool is_new;
		uint32_t cls;

		if (!x->cls || !class_ok(x->cls, strlen(x->cls)) || x->id == TFS_SYM_NONE ||
		    !x->name || x->len < 1 || x->len > NAMES_MAX_BYTES ||
		    memchr(x->name, 0, x->len))
			return -EINVAL;
		rc = intern_get(&e->classes, x->cls, strlen(x->cls), &cls, &is_new);
		if (rc == -E2BIG)
			rc = -ENOMEM;
		e->tmp[0][i] = (struct name_ent){x->id, x->name, (uint32_t)x->len, cls};
	}
	if (rc < 0)
		return rc;
	if (n > 1)
		qsort(e->tmp[0], n, sizeof(*e->tmp[0]), cmp_ent);
	for (uint32_t i = 1; i < n; i++)
		if (cmp_key(&e->tmp[0][i - 1], e->tmp[0][i].cls, e->tmp[0][i].id) == 0)
			return -EINVAL;
	return 0;
}

/* An equal table added before, in *@table. Clobbers e->tmp[1]. @return 1, 0 none, -ENOMEM */
static int find_equal(struct names_enc *e, uint32_t n, uint64_t h, uint32_t *table)
{
	for (uint32_t j = e->n_slots ? (uint32_t)h & (e->n_slots - 1) : 0;
	     e->n_slots && e->slots[j]; j = (j + 1) & (e->n_slots - 1)) {
		uint32_t t = e->slots[j] - 1;
		int64_t m;

		if (e->hash[t] != h)
			continue;
		m = materialize(e, t, 1);
		if (m < 0)
			return (int)m;
		if (m == n && same_names(e->tmp[0], e->tmp[1], n)) {
			*table = t;
			return 1;
		}
	}
	return 0;
}

static int grow_tables(struct names_enc *e)
{
	uint32_t cap = e->tables_cap ? 2 * e->tables_cap : 16;
	struct name_table *t;
	struct name_ent **own;
	uint64_t *hash;

	if (e->n_tables < e->tables_cap)
		return 0;
	if (e->tables_cap >= UINT32_MAX / 4)
		return -ENOMEM;
	t = realloc(e->tables, cap * sizeof(*t));
	if (t)
		e->tables = t;
	own = realloc(e->own, cap * sizeof(*own));
	if (own)
		e->own = own;
	hash = realloc(e->hash, cap * sizeof(*hash));
	if (hash)
		e->hash = hash;
	if (!t || !own || !hash)
		return -ENOMEM;
	e->tables_cap = cap;
	return 0;
}

/* Room in the hash slots for one more table. */
static int grow_slots(struct names_enc *e)
{
	uint32_t cap = e->n_slots ? 2 * e->n_slots : 64;
	uint32_t *s;

	if (2 * (e->n_tables + 1) <= e->n_slots)
		return 0;
	s = calloc(cap, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (uint32_t t = 0; t < e->n_tables; t++) {
		uint32_t j = (uint32_t)e->hash[t] & (cap - 1);

		while (s[j])
			j = (j + 1) & (cap - 1);
		s[j] = t + 1;
	}
	free(e->slots);
	e->slots = s;
	e->n_slots = cap;
	return 0;
}

/* The base a new table of @n names (e->tmp[0]) is stored against, and its entry count. */
static int64_t pick_base(struct names_enc *e, uint32_t n, uint32_t *base)
{
	uint32_t cand[2] = {0, e->last_root};
	int64_t best = n;

	*base = NAMES_NO_BASE;
	for (int i = 0; i < 2 && e->n_tables; i++) {
		const struct name_table *b = &e->tables[cand[i]];
		int64_t k;

		if (b->base != NAMES_NO_BASE || (i == 1 && cand[1] == cand[0]))
			continue;
		k = delta(e, e->tmp[0], n, b->e, b->n, NULL);
		if (k < best) {
			best = k;
			*base = cand[i];
		}
	}
	return best;
}

int names_enc_table(struct names_enc *e, const struct name_in *in, uint32_t n, uint32_t *table)
{
	struct name_ent *own;
	uint32_t base, j;
	uint64_t h;
	int64_t k;
	int rc;

	rc = take_names(e, in, n);
	if (rc < 0)
		return rc;
	h = hash_names(e->tmp[0], n);
	rc = find_equal(e, n, h, table);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	rc = grow_tables(e);
	if (rc == 0)
		rc = grow_slots(e);
	if (rc < 0)
		return rc;
	k = pick_base(e, n, &base);
	own = malloc((size_t)(k ? k : 1) * sizeof(*own));
	if (!own)
		return -ENOMEM;
	if (base == NAMES_NO_BASE)
		k = delta(e, e->tmp[0], n, NULL, 0, own);
	else
		k = delta(e, e->tmp[0], n, e->tables[base].e, e->tables[base].n, own);
	if (k < 0) {
		free(own);
		return (int)k;
	}
	*table = e->n_tables;
	e->tables[*table] = (struct name_table){base, (uint32_t)k, own, 0};
	e->own[*table] = own;
	e->hash[*table] = h;
	if (base == NAMES_NO_BASE)
		e->last_root = *table;
	e->n_tables++;
	for (j = (uint32_t)h & (e->n_slots - 1); e->slots[j]; j = (j + 1) & (e->n_slots - 1))
		;
	e->slots[j] = *table + 1;
	return 0;
}

int names_enc_run(struct names_enc *e, uint32_t first, uint32_t n, uint32_t table)
{
	struct name_run *last = e->n_runs ? &e->runs[e->n_runs - 1] : NULL;
	uint64_t end = last ? (uint64_t)last->first + last->n : 0;

	if (n == 0 || table >= e->n_tables || first < end ||
	    (uint64_t)first + n > (UINT64_C(1) << 32))
		return -EINVAL;
	if (last && first == end && last->table == table && (uint64_t)last->n + n <= UINT32_MAX) {
		last->n += n;
		return 0;
	}
	if (e->n_runs == e->runs_cap) {
		uint32_t cap = e->runs_cap ? 2 * e->runs_cap : 16;
		struct name_run *r;

		if (e->runs_cap >= UINT32_MAX / 4)
			return -ENOMEM;
		r = realloc(e->runs, cap * sizeof(*r));
		if (!r)
			return -ENOMEM;
		e->runs = r;
		e->runs_cap = cap;
	}
	e->runs[e->n_runs++] = (struct name_run){first, n, table};
	return 0;
}

static int put_table(const struct name_table *t, struct tfs_buf *out)
{
	int rc = buf_put_varint(out, t->base == NAMES_NO_BASE ? 0 : (uint64_t)t->base + 1);

	if (rc == 0)
		rc = buf_put_varint(out, t->n);
	for (uint32_t i = 0; i < t->n && rc == 0; i++) {
		const struct name_ent *x = &t->e[i];
		bool same_cls = i && t->e[i - 1].cls == x->cls;

		rc = buf_put_varint(out, x->cls);
		if (rc == 0)
			rc = buf_put_varint(out, same_cls ? x->id - t->e[i - 1].id - 1 : x->id);
		if (rc == 0)
			rc = buf_put_str(out, x->name, x->len);
	}
	return rc;
}

int names_enc_finish(const struct names_enc *e, struct tfs_buf *out)
{
	uint64_t end = 0;
	int rc = buf_put_varint(out, e->classes.n);

	for (uint32_t i = 0; i < e->classes.n && rc == 0; i++) {
		size_t n;
		const uint8_t *p = intern_key(&e->classes, i, &n);

		rc = buf_put_str(out, (const char *)p, n);
	}
	if (rc == 0)
		rc = buf_put_varint(out, e->n_tables);
	for (uint32_t i = 0; i < e->n_tables && rc == 0; i++)
		rc = put_table(&e->tables[i], out);
	if (rc == 0)
		rc = buf_put_varint(out, e->n_runs);
	for (uint32_t i = 0; i < e->n_runs && rc == 0; i++) {
		const struct name_run *r = &e->runs[i];

		rc = buf_put_varint(out, r->first - end);
		if (rc == 0)
			rc = buf_put_varint(out, r->n - 1);
		if (rc == 0)
			rc = buf_put_varint(out, r->table);
		end = (uint64_t)r->first + r->n;
	}
	return rc;
}
