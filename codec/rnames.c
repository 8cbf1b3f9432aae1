/*
 * Reader side of names (FORMAT.md §4.1, §12): at open it adds the argflags section's flags
 * to the schema, decodes the names section whole (the views' line lengths depend on it),
 * points each stream at its rank's table, and measures, for every (class, id) an attached
 * argument of the CST names, the widest form it prints in over the ranks, in one pass over
 * the tables: a table counts once however many ranks share it, so 10^6 ranks sharing one
 * cost what one rank does. Lookups by rank for the public API are here too. Rendering the
 * names is render.c's job.
 */
#include <stdlib.h>
#include <string.h>

#include "trace_i.h"

/* The one section of @type, or -1 when there is none. */
static int find_optional(const struct tfs_trace *t, uint16_t type, int64_t *idx,
			 struct tfs_diag *diag)
{
	*idx = -1;
	for (uint32_t i = 0; i < t->cf.n; i++) {
		if (t->cf.ents[i].type != type)
			continue;
		if (*idx >= 0)
			return diag_set(diag, -TFS_ECORRUPT, ctr_file_off(&t->cf, i), "table",
					"second %s section", ctr_type_name(type));
		*idx = i;
	}
	return 0;
}

static int parse_argflags(struct tfs_trace *t, struct tfs_rd *r, void *arg)
{
	return schema_parse_argflags(r, &t->schema);
}

static int load_names(struct tfs_trace *t, uint32_t idx, struct tfs_diag *diag)
{
	const uint8_t *data;
	uint8_t *owned;
	size_t len;
	int rc = ctr_load(&t->cf, idx, &owned, &data, &len, diag);

	if (rc < 0)
		return rc;
	rc = names_decode(&t->names, data, len, t->n_ranks, ctr_file_off(&t->cf, idx), diag);
	free(owned);
	return rc;
}

static uint64_t slot_hash(uint32_t cls, uint64_t id)
{
	uint64_t h = (id ^ ((uint64_t)cls << 40)) * UINT64_C(0x9e3779b97f4a7c15);

	return h ^ (h >> 31);
}

/* The slot of (@cls, @id): its entry, or the empty slot where it goes. */
static struct name_width *nw_slot(const struct tfs_trace *t, uint32_t cls, uint64_t id)
{
	uint32_t mask = t->n_nw_slots - 1, j = (uint32_t)slot_hash(cls, id) & mask;

	while (t->nw[j].cls != UINT32_MAX && (t->nw[j].cls != cls || t->nw[j].id != id))
		j = (j + 1) & mask;
	return &t->nw[j];
}

/* The names class of attached argument @a, or UINT32_MAX. */
static uint32_t arg_class(const struct tfs_trace *t, const struct schema_arg *a)
{
	return t->names.n_classes ? names_class(&t->names, a->sym_class) : UINT32_MAX;
}

/* Calls @fn for each (class, id) an attached argument of a terminal names. */
static int each_attached(struct tfs_trace *t, int (*fn)(struct tfs_trace *, uint32_t, uint64_t))
{
	int rc = 0;

	for (uint32_t term = 0; term < t->n_terms && rc == 0; term++) {
		const struct schema_kind *k = &t->schema.kinds[t->term_kind[term]];
		const uint64_t *w = t->term_arg + t->term_argoff[term];

		for (uint32_t i = 0; i < k->n_args && rc == 0; i++) {
			uint32_t cls;

			if (!(k->args[i].flags & TFS_ARG_ATTACH) || w[i] == TFS_SYM_NONE)
				continue;
			cls = arg_class(t, &k->args[i]);
			if (cls != UINT32_MAX)
				rc = fn(t, cls, w[i]);
		}
	}
	return rc;
}

static int count_key(struct tfs_trace *t, uint32_t cls, uint64_t id)
{
	t->n_nw_slots++; /* an upper bound: duplicates counted again */
	return 0;
}

static int add_key(struct tfs_trace *t, uint32_t cls, uint64_t id)
{
	struct name_width *e = nw_slot(t, cls, id);

	e->cls = cls;
	e->id = id;
	return 0;
}

/* Widen @e's widths to fit name @x. */
static void fit(struct name_width *e, const struct name_ent *x)
{
	uint64_t text = render_name_width(x->name, x->len, false);
	uint64_t json = render_name_width(x->name, x->len, true);

	e->text = text > e->text ? (uint32_t)text : e->text;
	e->json = json > e->json ? (uint32_t)json : e->json;
}

/*
 * What the tables based on @root change of the keys of the map: their names are measured
 * and counted for their ranks; a key of @root they replace or remove is counted in ->over,
 * so that @root's name counts only for the ranks of its family that still see it.
 */
static void measure_changes(struct tfs_trace *t, uint32_t root, const uint32_t *kids,
			    uint32_t n_kids)
{
	const struct names *nm = &t->names;
	const struct name_table *r = &nm->tables[root];

	for (uint32_t k = 0; k < n_kids; k++) {
		const struct name_table *x = &nm->tables[kids[k]];

		for (uint32_t i = 0; i < x->n && x->n_ranks; i++) {
			const struct name_ent *n = &x->e[i];
			struct name_width *e = nw_slot(t, n->cls, n->id);

			if (e->cls == UINT32_MAX)
				continue;
			if (names_get(nm, r, n->cls, n->id))
				e->over += x->n_ranks;
			if (n->len) {
				fit(e, n);
				e->n_ranks += x->n_ranks;
			}
		}
	}
}

/*
 * Every name the tables give to a key of the map, with the ranks that see it, table by
 * table stored whole with the tables based on it: the work is the entries stored, not what
 * they expand to, however many ranks share them.
 */
static int measure(struct tfs_trace *t)
{
	const struct names *nm = &t->names;
	uint32_t n = nm->n_tables;
	/* the tables based on root r are kids[first[r] .. first[r + 1]) */
	uint32_t *first = calloc((size_t)n + 1, sizeof(*first));
	uint32_t *fill = calloc((size_t)n + 1, sizeof(*fill));
	uint32_t *kids = calloc((size_t)n + 1, sizeof(*kids));
	uint64_t *family = calloc((size_t)n + 1, sizeof(*family)); /* ranks of a root and kids */
	int rc = first && fill && kids && family ? 0 : -ENOMEM;

	for (uint32_t tb = 0; tb < n && rc == 0; tb++) {
		uint32_t base = nm->tables[tb].base;

		family[base == NAMES_NO_BASE ? tb : base] += nm->tables[tb].n_ranks;
		if (base != NAMES_NO_BASE)
			first[base + 1]++;
	}
	for (uint32_t tb = 0; tb < n && rc == 0; tb++) {
		first[tb + 1] += first[tb];
		fill[tb] = first[tb];
	}
	for (uint32_t tb = 0; tb < n && rc == 0; tb++)
		if (nm->tables[tb].base != NAMES_NO_BASE)
			kids[fill[nm->tables[tb].base]++] = tb;
	for (uint32_t tb = 0; tb < n && rc == 0; tb++) {
		const struct name_table *r = &nm->tables[tb];

		if (r->base != NAMES_NO_BASE)
			continue;
		measure_changes(t, tb, kids + first[tb], first[tb + 1] - first[tb]);
		for (uint32_t i = 0; i < r->n; i++) {
			struct name_width *e = nw_slot(t, r->e[i].cls, r->e[i].id);

			if (e->cls == UINT32_MAX)
				continue;
			if (family[tb] > e->over) {
				fit(e, &r->e[i]);
				e->n_ranks += family[tb] - e->over;
			}
			e->over = 0;
		}
	}
	free(first);
	free(fill);
	free(kids);
	free(family);
	return rc;
}

/* The width map over the keys the CST's attached arguments name. */
static int build_widths(struct tfs_trace *t)
{
	uint64_t n;

	t->n_nw_slots = 0;
	each_attached(t, count_key);
	if (!t->n_nw_slots)
		return 0;
	n = (uint64_t)t->n_nw_slots * 2;
	t->n_nw_slots = 1;
	while (t->n_nw_slots < n)
		t->n_nw_slots *= 2;
	t->nw = malloc((size_t)t->n_nw_slots * sizeof(*t->nw));
	if (!t->nw) {
		t->n_nw_slots = 0;
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < t->n_nw_slots; i++)
		t->nw[i] = (struct name_width){.cls = UINT32_MAX};
	each_attached(t, add_key);
	return measure(t);
}

/*
 * Which classes attached arguments print (FORMAT.md §9.2): the names of the others stand
 * in for their symbols.
 */
static int mark_attached(struct tfs_trace *t)
{
	t->cls_attached = calloc((size_t)t->names.n_classes + 1, 1);
	if (!t->cls_attached)
		return -ENOMEM;
	for (uint32_t k = 0; k < t->schema.n_kinds; k++) {
		const struct schema_kind *kd = &t->schema.kinds[k];

		for (uint32_t i = 0; i < kd->n_args; i++) {
			uint32_t cls;

			if (!(kd->args[i].flags & TFS_ARG_ATTACH))
				continue;
			cls = arg_class(t, &kd->args[i]);
			if (cls != UINT32_MAX)
				t->cls_attached[cls] = 1;
		}
	}
	return 0;
}

int rnames_load(struct tfs_trace *t, struct tfs_diag *diag)
{
	int64_t flags_idx, names_idx;
	int rc = find_optional(t, SEC_ARGFLAGS, &flags_idx, diag);

	if (rc == 0)
		rc = find_optional(t, SEC_NAMES, &names_idx, diag);
	if (rc == 0 && flags_idx >= 0)
		rc = with_section(t, (uint32_t)flags_idx, parse_argflags, NULL, diag);
	if (rc == 0 && names_idx >= 0)
		rc = load_names(t, (uint32_t)names_idx, diag);
	if (rc < 0)
		return rc;
	/* most names need no escape: views copy those as they are */
	t->name_plain = malloc(t->names.n_ents + 1);
	if (!t->name_plain)
		return -ENOMEM;
	for (uint64_t i = 0; i < t->names.n_ents; i++)
		t->name_plain[i] = render_name_plain(t->names.ents[i].name, t->names.ents[i].len);
	rc = mark_attached(t);
	if (rc < 0)
		return rc;
	return t->names.n_runs ? build_widths(t) : 0;
}

void rnames_free(struct tfs_trace *t)
{
	names_fini(&t->names);
	free(t->name_plain);
	t->name_plain = NULL;
	free(t->cls_attached);
	t->cls_attached = NULL;
	free(t->nw);
	t->nw = NULL;
	t->n_nw_slots = 0;
}

uint64_t rnames_width(const struct tfs_trace *t, const struct schema_arg *a, uint64_t id, bool json,
		      size_t flen)
{
	uint64_t fallback = flen + 2, w;
	const struct name_width *e;
	uint32_t cls = arg_class(t, a);

	if (cls == UINT32_MAX || !t->n_nw_slots)
		return fallback;
	e = nw_slot(t, cls, id);
	if (e->cls == UINT32_MAX)
		return fallback;
	w = json ? e->json : e->text;
	return e->n_ranks < t->n_ranks && fallback > w ? fallback : w;
}

/* ---- the public API ---- */

int tfs_trace_name(const struct tfs_trace *t, uint32_t rank, const char *sym_class, uint64_t id,
		   const char **name)
{
	const struct name_table *tb = names_table_of(&t->names, rank);
	const struct name_ent *e;
	uint32_t cls;

	*name = NULL;
	if (!tb || !sym_class)
		return -ENOENT;
	cls = names_class(&t->names, sym_class);
	e = cls == UINT32_MAX ? NULL : names_get(&t->names, tb, cls, id);
	if (!e)
		return -ENOENT;
	*name = e->name;
	return 0;
}

int tfs_trace_names_dup(const struct tfs_trace *t, uint32_t rank, const char *sym_class,
			struct tfs_name **out, size_t *n)
{
	const struct name_table *tb = names_table_of(&t->names, rank);
	const struct name_ent *x;
	struct names_iter it;
	uint32_t cls;
	size_t k = 0;

	*out = NULL;
	*n = 0;
	cls = tb && sym_class ? names_class(&t->names, sym_class) : UINT32_MAX;
	if (cls == UINT32_MAX)
		return 0;
	*out = malloc(
	    ((size_t)tb->n + (tb->base != NAMES_NO_BASE ? t->names.tables[tb->base].n : 0) + 1) *
	    sizeof(**out));
	if (!*out)
		return -ENOMEM;
	names_iter_init(&it, t->names.tables, (uint32_t)(tb - t->names.tables));
	while ((x = names_iter_next(&it)))
		if (x->cls == cls)
			(*out)[k++] = (struct tfs_name){x->id, x->name};
	*n = k;
	return 0;
}
