/*
 * Event kinds as data (FORMAT.md §4): validation, copying, serialisation and parsing. It
 * knows what an argument's type and encoding mean only as far as validity goes; printing is
 * render.c's job, storing values is the writer's.
 */
#include <stdlib.h>
#include <string.h>

#include "schema_i.h"

void schema_init(struct tfs_schema *s)
{
	memset(s, 0, sizeof(*s));
}

static void kind_fini(struct schema_kind *k)
{
	for (uint32_t i = 0; i < k->n_args; i++) {
		free(k->args[i].name);
		free(k->args[i].sym_class);
	}
	free(k->args);
	free(k->name);
	free(k->category);
}

void schema_fini(struct tfs_schema *s)
{
	for (uint32_t i = 0; i < s->n_kinds; i++)
		kind_fini(&s->kinds[i]);
	free(s->kinds);
	schema_init(s);
}

/* Names print unescaped in the text view: printable ASCII without space, quote or
 * backslash (FORMAT.md §4), so a name can never break a line or a JSON string. */
static bool name_ok(const char *p, size_t n, bool may_be_empty)
{
	if (n > TFS_MAX_NAME || (n == 0 && !may_be_empty))
		return false;
	for (size_t i = 0; i < n; i++)
		if (p[i] <= 0x20 || p[i] >= 0x7f || p[i] == '"' || p[i] == '\\')
			return false;
	return true;
}

/* Flags the schema section stores itself; the others are in the argflags section (§4.1). */
#define SCHEMA_SECTION_FLAGS (TFS_ARG_RESULT | TFS_ARG_BYTES)
#define SYM_FLAGS (TFS_ARG_ATTACH | TFS_ARG_INPUT | TFS_ARG_OUTPUT)

static bool flags_ok(uint8_t enc, uint8_t flags)
{
	if (flags & ~TFS_ARG_FLAGS_ALL)
		return false;
	if ((flags & SYM_FLAGS) && enc != TFS_ENC_SYM)
		return false;
	if ((flags & TFS_ARG_INPUT) && (flags & TFS_ARG_OUTPUT))
		return false;
	return !((flags & TFS_ARG_ATTACH) && (flags & TFS_ARG_RESULT));
}

static bool arg_ok(uint8_t type, uint8_t enc, uint8_t flags)
{
	if (type >= TFS_TYPE_COUNT || enc >= TFS_ENC_COUNT || !flags_ok(enc, flags))
		return false;
	if (enc == TFS_ENC_RVAL && type != TFS_TYPE_I64)
		return false;
	return (type == TFS_TYPE_STR) == (enc == TFS_ENC_STR);
}

/* FORMAT.md §4: an attached argument follows an argument that is not attached itself. */
static bool attach_ok(const uint8_t *flags, uint32_t n_args)
{
	for (uint32_t i = 0; i < n_args; i++) {
		if ((flags[i] & TFS_ARG_ATTACH) && (i == 0 || (flags[i - 1] & TFS_ARG_ATTACH)))
			return false;
	}
	return true;
}

static char *dup_n(const void *p, size_t n)
{
	char *s = malloc(n + 1);

	if (s) {
		memcpy(s, p, n);
		s[n] = 0;
	}
	return s;
}

static int reserve_kind(struct tfs_schema *s)
{
	struct schema_kind *k;
	uint32_t cap;

	if (s->n_kinds < s->cap)
		return 0;
	cap = s->cap ? s->cap * 2 : 16;
	k = realloc(s->kinds, cap * sizeof(*k));
	if (!k)
		return -ENOMEM;
	s->kinds = k;
	s->cap = cap;
	return 0;
}

/* Derive n_vals and result; called once all args are set. */
static void kind_derive(struct schema_kind *k)
{
	k->n_vals = 0;
	k->result = -1;
	k->result_name_taken = false;
	for (uint32_t i = 0; i < k->n_args; i++) {
		k->val_index[i] = (uint8_t)k->n_vals;
		if (k->args[i].enc == TFS_ENC_VAL)
			k->n_vals++;
		if ((k->args[i].flags & TFS_ARG_RESULT) && k->result < 0)
			k->result = (int32_t)i;
	}
	for (uint32_t i = 0; i < k->n_args; i++) {
		if ((int32_t)i != k->result && !strcmp(k->args[i].name, "result"))
			k->result_name_taken = true;
	}
}

/*
 * Number kind @k's VAL classes (FORMAT.md §4, §7.3.1): a name met in an earlier kind of @s
 * keeps its number, a new one takes the next. @return 0, or -E2BIG past
 * SCHEMA_MAX_VCLASSES names (the schema's count is then unchanged)
 */
static int kind_classes(struct tfs_schema *s, struct schema_kind *k)
{
	uint32_t n = s->n_vcls, j = 0;

	memset(k->vcls, 0, sizeof(k->vcls));
	for (uint32_t i = 0; i < k->n_args; i++) {
		const struct schema_arg *a = &k->args[i];
		uint8_t c = 0;

		if (a->enc != TFS_ENC_VAL)
			continue;
		for (uint32_t q = 0; q < s->n_kinds && a->sym_class[0] && !c; q++) {
			const struct schema_kind *o = &s->kinds[q];

			for (uint32_t m = 0, jo = 0; m < o->n_args && !c; m++) {
				if (o->args[m].enc != TFS_ENC_VAL)
					continue;
				if (!strcmp(o->args[m].sym_class, a->sym_class))
					c = o->vcls[jo];
				jo++;
			}
		}
		for (uint32_t m = 0, jm = 0; m < i && a->sym_class[0] && !c; m++) {
			if (k->args[m].enc != TFS_ENC_VAL)
				continue;
			if (!strcmp(k->args[m].sym_class, a->sym_class))
				c = k->vcls[jm];
			jm++;
		}
		if (a->sym_class[0] && !c) {
			if (n == SCHEMA_MAX_VCLASSES)
				return -E2BIG;
			c = (uint8_t)++n;
		}
		k->vcls[j++] = c;
	}
	s->n_vcls = n;
	return 0;
}

int schema_add(struct tfs_schema *s, const struct tfs_kind_desc *d, uint32_t *id)
{
	uint8_t flags[TFS_MAX_ARGS];
	struct schema_kind k;
	int rc;

	if (!d->name || !name_ok(d->name, strlen(d->name), false) || d->n_args > TFS_MAX_ARGS ||
	    (d->n_args && !d->args))
		return -EINVAL;
	if (d->category && strlen(d->category) > TFS_MAX_NAME)
		return -EINVAL;
	for (uint32_t i = 0; i < d->n_args; i++) {
		const struct tfs_arg_desc *a = &d->args[i];

		if (!a->name || !name_ok(a->name, strlen(a->name), false) ||
		    !arg_ok(a->type, a->enc, a->flags))
			return -EINVAL;
		if (a->sym_class && strlen(a->sym_class) > TFS_MAX_NAME)
			return -EINVAL;
		/* a VAL class or a value-name class is stored, so it must be a name (§4) */
		if (a->enc != TFS_ENC_SYM && a->sym_class &&
		    !name_ok(a->sym_class, strlen(a->sym_class), true))
			return -EINVAL;
		flags[i] = a->flags;
	}
	if (!attach_ok(flags, d->n_args))
		return -EINVAL;
	rc = reserve_kind(s);
	if (rc < 0)
		return rc;
	memset(&k, 0, sizeof(k));
	k.name = strdup(d->name);
	k.category = strdup(d->category ? d->category : "");
	k.args = calloc(d->n_args ? d->n_args : 1, sizeof(*k.args));
	rc = -ENOMEM;
	if (!k.name || !k.category || !k.args)
		goto err_free_kind;
	for (uint32_t i = 0; i < d->n_args; i++) {
		const struct tfs_arg_desc *a = &d->args[i];
		const bool named = a->enc != TFS_ENC_STR;
		const char *cls = named && a->sym_class ? a->sym_class : "";

		k.args[i].name = strdup(a->name);
		k.args[i].sym_class = strdup(cls);
		k.n_args = i + 1;
		if (!k.args[i].name || !k.args[i].sym_class)
			goto err_free_kind;
		k.args[i].type = a->type;
		k.args[i].enc = a->enc;
		k.args[i].flags = a->flags;
	}
	kind_derive(&k);
	if (kind_classes(s, &k) < 0) {
		rc = -EINVAL;
		goto err_free_kind;
	}
	*id = s->n_kinds;
	s->kinds[s->n_kinds++] = k;
	return 0;

err_free_kind:
	kind_fini(&k);
	return rc;
}

int schema_write(const struct tfs_schema *s, const uint32_t *map, struct tfs_buf *out)
{
	uint32_t n = 0;
	int rc;

	for (uint32_t i = 0; i < s->n_kinds; i++)
		n += !map || map[i] != UINT32_MAX;
	rc = buf_put_varint(out, n);
	for (uint32_t i = 0; i < s->n_kinds && rc == 0; i++) {
		const struct schema_kind *k = &s->kinds[i];

		if (map && map[i] == UINT32_MAX)
			continue;

		rc = buf_put_str(out, k->name, strlen(k->name));
		if (rc == 0)
			rc = buf_put_str(out, k->category, strlen(k->category));
		if (rc == 0)
			rc = buf_put_varint(out, k->n_args);
		for (uint32_t j = 0; j < k->n_args && rc == 0; j++) {
			const struct schema_arg *a = &k->args[j];
			uint8_t tef[3] = {a->type, a->enc, a->flags & SCHEMA_SECTION_FLAGS};

			rc = buf_put_str(out, a->name, strlen(a->name));
			if (rc == 0)
				rc = buf_put(out, tef, sizeof(tef));
			if (rc == 0)
				rc = buf_put_str(out, a->sym_class, strlen(a->sym_class));
		}
	}
	return rc;
}

/* Read a str into a new NUL-terminated copy; rejects NULs and over-long names. */
static int rd_name(struct tfs_rd *r, bool may_be_empty, char **out, const char *what)
{
	const uint8_t *p;
	size_t n;
	int rc = rd_str(r, TFS_MAX_NAME, &p, &n);

	if (rc < 0)
		return rc;
	if (!name_ok((const char *)p, n, may_be_empty))
		return rd_fail(r, "bad %s: empty or not printable ascii", what);
	*out = dup_n(p, n);
	return *out ? 0 : -ENOMEM;
}

static int parse_arg(struct tfs_rd *r, struct schema_arg *a)
{
	uint8_t tef[3];
	int rc = rd_name(r, false, &a->name, "argument name");

	for (int i = 0; i < 3 && rc == 0; i++)
		rc = rd_u8(r, &tef[i]);
	if (rc < 0)
		return rc;
	if (!arg_ok(tef[0], tef[1], tef[2]) || (tef[2] & ~SCHEMA_SECTION_FLAGS))
		return rd_fail(r, "argument %s has unknown type %u / encoding %u / flags %#x",
			       a->name, tef[0], tef[1], tef[2]);
	a->type = tef[0];
	a->enc = tef[1];
	a->flags = tef[2];
	return rd_name(r, true, &a->sym_class, "symbol class");
}

static int parse_kind(struct tfs_rd *r, struct schema_kind *k)
{
	uint64_t n;
	int rc;

	rc = rd_name(r, false, &k->name, "kind name");
	if (rc == 0)
		rc = rd_name(r, true, &k->category, "category");
	if (rc == 0)
		rc = rd_varint_max(r, TFS_MAX_ARGS, &n, "argument count");
	if (rc < 0)
		return rc;
	k->args = calloc(n ? n : 1, sizeof(*k->args));
	if (!k->args)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		k->n_args = i + 1;
		rc = parse_arg(r, &k->args[i]);
		if (rc < 0)
			return rc;
	}
	kind_derive(k);
	return 0;
}

int schema_parse(struct tfs_rd *r, struct tfs_schema *s)
{
	uint64_t n;
	int rc;

	schema_init(s);
	/* a kind takes at least 3 bytes: this bounds the allocation by the input */
	rc = rd_varint_max(r, rd_left(r) / 3, &n, "kind count");
	if (rc < 0)
		return rc;
	s->kinds = calloc(n ? n : 1, sizeof(*s->kinds));
	if (!s->kinds)
		return -ENOMEM;
	s->cap = (uint32_t)(n ? n : 1);
	for (uint32_t i = 0; i < n; i++) {
		rc = parse_kind(r, &s->kinds[i]);
		s->n_kinds = i + 1;
		if (rc < 0)
			goto err_fini;
		if (kind_classes(s, &s->kinds[i]) < 0) {
			rc = rd_fail(r, "more than %u value classes", SCHEMA_MAX_VCLASSES);
			goto err_fini;
		}
	}
	return 0;

err_fini:
	schema_fini(s);
	return rc;
}

/* Whether kind @id of @s keeps its place in the file (@map as in schema_write). */
static bool kept(const uint32_t *map, uint32_t id)
{
	return !map || map[id] != UINT32_MAX;
}

static uint32_t argflags_count(const struct tfs_schema *s, const uint32_t *map)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->n_kinds; i++) {
		for (uint32_t j = 0; j < s->kinds[i].n_args && kept(map, i); j++)
			n += (s->kinds[i].args[j].flags & ~SCHEMA_SECTION_FLAGS) != 0;
	}
	return n;
}

bool schema_has_argflags(const struct tfs_schema *s, const uint32_t *map)
{
	return argflags_count(s, map) > 0;
}

int schema_write_argflags(const struct tfs_schema *s, const uint32_t *map, struct tfs_buf *out)
{
	uint32_t n = argflags_count(s, map), file_kind = 0;
	int rc;

	if (n == 0)
		return 0;
	rc = buf_put_varint(out, n);
	for (uint32_t i = 0; i < s->n_kinds && rc == 0; i++) {
		const struct schema_kind *k = &s->kinds[i];

		if (!kept(map, i))
			continue;
		for (uint32_t j = 0; j < k->n_args && rc == 0; j++) {
			uint8_t extra = k->args[j].flags & ~SCHEMA_SECTION_FLAGS;

			if (!extra)
				continue;
			rc = buf_put_varint(out, file_kind);
			if (rc == 0)
				rc = buf_put_varint(out, j);
			if (rc == 0)
				rc = buf_put_u8(out, extra);
		}
		file_kind++;
	}
	return rc < 0 ? rc : 1;
}

int schema_parse_argflags(struct tfs_rd *r, struct tfs_schema *s)
{
	uint64_t n, kind, arg, prev = 0;
	uint8_t extra;
	int rc;

	/* an entry takes at least 3 bytes */
	rc = rd_varint_max(r, rd_left(r) / 3, &n, "argflags count");
	if (rc == 0 && n == 0)
		rc = rd_fail(r, "argflags section without entries");
	for (uint64_t i = 0; i < n && rc == 0; i++) {
		struct schema_arg *a;

		rc = rd_varint_max(r, s->n_kinds ? s->n_kinds - 1 : 0, &kind, "argflags kind");
		if (rc == 0)
			rc = rd_varint_max(r, TFS_MAX_ARGS - 1, &arg, "argflags argument");
		if (rc == 0)
			rc = rd_u8(r, &extra);
		if (rc < 0)
			return rc;
		if (!s->n_kinds || arg >= s->kinds[kind].n_args ||
		    (i && kind * TFS_MAX_ARGS + arg <= prev))
			return rd_fail(r, "argflags entry for kind %llu argument %llu out of order "
					  "or out of range",
				       (unsigned long long)kind, (unsigned long long)arg);
		prev = kind * TFS_MAX_ARGS + arg;
		a = &s->kinds[kind].args[arg];
		if (!extra || (extra & SCHEMA_SECTION_FLAGS) || !flags_ok(a->enc, a->flags | extra))
			return rd_fail(r, "argument %s of kind %s: flags %#x not allowed", a->name,
				       s->kinds[kind].name, extra);
		a->flags |= extra;
	}
	for (uint32_t i = 0; i < s->n_kinds && rc == 0; i++) {
		const struct schema_kind *k = &s->kinds[i];
		uint8_t flags[TFS_MAX_ARGS];

		for (uint32_t j = 0; j < k->n_args; j++)
			flags[j] = k->args[j].flags;
		if (!attach_ok(flags, k->n_args))
			rc = rd_fail(r, "kind %s has an attached argument first or after another",
				     k->name);
	}
	return rc;
}

void schema_desc(const struct tfs_schema *s, uint32_t id, struct tfs_kind_desc *d,
		 struct tfs_arg_desc *args)
{
	const struct schema_kind *k = &s->kinds[id];

	d->name = k->name;
	d->category = k->category;
	d->n_args = k->n_args;
	d->args = args;
	for (uint32_t i = 0; i < k->n_args; i++) {
		args[i].name = k->args[i].name;
		args[i].type = k->args[i].type;
		args[i].enc = k->args[i].enc;
		args[i].flags = k->args[i].flags;
		args[i].sym_class = k->args[i].sym_class;
	}
}
