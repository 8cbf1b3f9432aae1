/*
 * MPI calls in a proxy: each call signature becomes the call with the arguments the
 * wrapper recorded, parameter by parameter as the table generated from mpi.h says
 * (vreplay_mpi_i.h): handles from tables indexed by their symbolic ids (predefined ones by
 * name, the others filled by the calls that make them), ranks relative to the running
 * rank in the call's communicator, group or window, rank-derived tags from the running
 * rank, buffers by (allocation, offset) in memory that never moves, statuses ignored where
 * the program ignored them. What cannot be known from the trace gets scratch memory
 * (output arrays, strings, addresses). It does not decide the order of calls, and it does
 * not make a call completing requests choose the request it chose when recorded.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vreplay_i.h"
#include "vreplay_mpi_i.h"

#define NO_STATUS (-32768)

/* The symbolic id classes of the wrappers (gen_mpi.py HANDLES) and their C types. */
static const struct {
	const char *cls, *ctype;
} classes[] = {
    {"comm", "MPI_Comm"},   {"type", "MPI_Datatype"},	{"op", "MPI_Op"},
    {"group", "MPI_Group"}, {"req", "MPI_Request"},	{"mpifile", "MPI_File"},
    {"win", "MPI_Win"},	    {"info", "MPI_Info"},	{"errh", "MPI_Errhandler"},
    {"msg", "MPI_Message"}, {"session", "MPI_Session"},
};
#define N_CLASSES (sizeof(classes) / sizeof(classes[0]))
#define REQ 4

/* Symbolic ids to dense table indices, in order of first use. */
struct idmap {
	uint64_t *a, *b; /* keys (b: second word of buffer keys) */
	uint32_t n, cap;
	uint32_t *slot;	   /* open addressing over a, b: index + 1, 0 empty */
	uint32_t slot_cap; /* a power of two, at least twice n; 0: no index yet */
	bool dirty;	   /* entries removed: the index is rebuilt at the next lookup */
};

/* A buffer in an allocation: the bytes past the allocation's start a call may touch. */
struct abuf {
	uint32_t term;
	uint64_t alloc, end;
};

struct rp_mpi {
	struct idmap cls[N_CLASSES];
	struct idmap bufs; /* (allocation, offset) of buffers, and scratch keys */
	int impl;
	struct abuf *ab;
	uint32_t n_ab, ab_cap;
	/* steering (steer_plan): the requests some call chooses among, and the channels
	 * (communicator id, tag) whose sends wait for the receiver's word */
	struct idmap chosen;
	struct idmap gates;
};

/* Bytes of one element of predefined datatype @name (16 for another, 64 for a derived one). */
static uint64_t elem_bytes(uint64_t id)
{
	static const struct {
		const char *name;
		uint8_t bytes;
	} sizes[] = {{"MPI_CHAR", 1},
		     {"MPI_SIGNED_CHAR", 1},
		     {"MPI_UNSIGNED_CHAR", 1},
		     {"MPI_BYTE", 1},
		     {"MPI_PACKED", 1},
		     {"MPI_C_BOOL", 1},
		     {"MPI_INT8_T", 1},
		     {"MPI_UINT8_T", 1},
		     {"MPI_SHORT", 2},
		     {"MPI_UNSIGNED_SHORT", 2},
		     {"MPI_INT16_T", 2},
		     {"MPI_UINT16_T", 2},
		     {"MPI_INT", 4},
		     {"MPI_UNSIGNED", 4},
		     {"MPI_FLOAT", 4},
		     {"MPI_INT32_T", 4},
		     {"MPI_UINT32_T", 4},
		     {"MPI_WCHAR", 4},
		     {"MPI_INTEGER", 4},
		     {"MPI_REAL", 4},
		     {"MPI_LOGICAL", 4},
		     {"MPI_LONG", 8},
		     {"MPI_UNSIGNED_LONG", 8},
		     {"MPI_DOUBLE", 8},
		     {"MPI_LONG_LONG_INT", 8},
		     {"MPI_LONG_LONG", 8},
		     {"MPI_UNSIGNED_LONG_LONG", 8},
		     {"MPI_INT64_T", 8},
		     {"MPI_UINT64_T", 8},
		     {"MPI_AINT", 8},
		     {"MPI_OFFSET", 8},
		     {"MPI_COUNT", 8},
		     {"MPI_DOUBLE_PRECISION", 8},
		     {"MPI_2INT", 8},
		     {"MPI_COMPLEX", 8}};

	for (uint32_t p = 0; p < rp_mpi_n_predefs; p++) {
		if (strcmp(rp_mpi_predefs[p].cls, "type") || rp_mpi_predefs[p].id != id)
			continue;
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
			if (!strcmp(sizes[i].name, rp_mpi_predefs[p].name))
				return sizes[i].bytes;
		return 16;
	}
	return 64;
}

static void idmap_fini(struct idmap *m)
{
	free(m->a);
	free(m->b);
	free(m->slot);
}

static uint32_t idmap_hash(uint64_t a, uint64_t b, uint32_t cap)
{
	uint64_t x = (a ^ (b * 0x9e3779b97f4a7c15u)) * 0xbf58476d1ce4e5b9u;

	return (uint32_t)(x >> 32) & (cap - 1);
}

/* Index every entry in a table at least twice their number. @return 0 or -ENOMEM */
static int idmap_reindex(struct idmap *m)
{
	uint32_t cap = 64;

	while (cap < 2 * (m->n + 1))
		cap *= 2;
	if (cap != m->slot_cap) {
		uint32_t *s = realloc(m->slot, cap * sizeof(*s));

		if (!s)
			return -ENOMEM;
		m->slot = s;
		m->slot_cap = cap;
	}
	memset(m->slot, 0, cap * sizeof(*m->slot));
	for (uint32_t i = 0; i < m->n; i++) {
		uint32_t h = idmap_hash(m->a[i], m->b[i], cap);

		while (m->slot[h])
			h = (h + 1) & (cap - 1);
		m->slot[h] = i + 1;
	}
	m->dirty = false;
	return 0;
}

/* The dense index of (@a, @b), given the next one when new. */
static uint32_t idmap_get(struct idmap *m, uint64_t a, uint64_t b, int *err)
{
	uint32_t h;

	if ((m->dirty || m->slot_cap < 2 * (m->n + 1)) && idmap_reindex(m) < 0) {
		*err = -ENOMEM;
		return 0;
	}
	for (h = idmap_hash(a, b, m->slot_cap); m->slot[h]; h = (h + 1) & (m->slot_cap - 1))
		if (m->a[m->slot[h] - 1] == a && m->b[m->slot[h] - 1] == b)
			return m->slot[h] - 1;
	if (m->n == m->cap) {
		uint32_t cap = m->cap ? 2 * m->cap : 16;
		uint64_t *na = realloc(m->a, cap * sizeof(*na)), *nb;

		if (!na) {
			*err = -ENOMEM;
			return 0;
		}
		m->a = na;
		nb = realloc(m->b, cap * sizeof(*nb));
		if (!nb) {
			*err = -ENOMEM;
			return 0;
		}
		m->b = nb;
		m->cap = cap;
	}
	m->a[m->n] = a;
	m->b[m->n] = b;
	m->slot[h] = m->n + 1;
	return m->n++;
}

/* Whether (@a, @b) is in @m, without adding it. */
static bool idmap_has(struct idmap *m, uint64_t a, uint64_t b, int *err)
{
	uint32_t n = m->n;

	idmap_get(m, a, b, err);
	if (m->n == n)
		return true;
	m->n--;
	m->dirty = true;
	return false;
}

/* Drop entry @k (the last one takes its place). */
static void idmap_drop(struct idmap *m, uint32_t k)
{
	m->a[k] = m->a[--m->n];
	m->b[k] = m->b[m->n];
	m->dirty = true;
}

static int class_of(const char *base)
{
	for (uint32_t i = 0; i < N_CLASSES; i++)
		if (!strcmp(classes[i].ctype, base))
			return (int)i;
	return -1;
}

/* ---- steering: the requests a run chooses among complete as recorded ---- */

static bool chooses(const char *name);

static int karg(const struct tfs_kind_desc *kd, const char *name)
{
	for (uint32_t i = 0; i < kd->n_args; i++)
		if (!strcmp(kd->args[i].name, name))
			return (int)i;
	return -1;
}

/* A tag's value at @rank: literal, or derived from the rank (FORMAT.md §5.2 RVAL). */
static int64_t tag_at(struct rp_gen *g, uint32_t term, int a, const union tfs_arg *args,
		      uint32_t rank)
{
	char text[64];

	tfs_trace_term_arg_text(g->t, term, (uint32_t)a, text, sizeof(text));
	return text[0] == 'r' ? (int64_t)rank + args[a].i : args[a].i;
}

/* Whether the RANK argument @a is a special rank (MPI_ANY_SOURCE, MPI_PROC_NULL...). */
static bool special_rank(struct rp_gen *g, uint32_t term, int a)
{
	char text[64];

	tfs_trace_term_arg_text(g->t, term, (uint32_t)a, text, sizeof(text));
	return text[0] != 'r';
}

/*
 * Which channels to steer. A request that a call choosing among requests (MPI_Waitany,
 * MPI_Testsome...) may complete must complete when the trace says, which only its sender
 * can make sure of: a receive posted by MPI_Irecv whose request such a call names puts its
 * channel (communicator id, tag) among the gates; every send on a gate then waits for the
 * receiver's word (a message on a private communicator), which the receiver gives when the
 * trace has the request complete, or at once for receives on a gate no such call chooses
 * among. Channels that some receive matches from any source or with any tag are left out.
 */
static int steer_plan(struct rp_gen *g)
{
	struct rp_mpi *m = g->mpi;
	uint32_t nt = g->ti->n_terminals;
	int err = 0;

	for (int pass = 0; pass < 3 && !err; pass++) {
		for (uint32_t i = 0; i < nt && !err; i++) {
			union tfs_arg args[TFS_MAX_ARGS];
			struct tfs_kind_desc kd;
			uint32_t kind;
			int a, comm, src, tag;

			if (tfs_trace_term_kind(g->t, i, &kind) < 0 ||
			    tfs_trace_kind(g->t, kind, &kd) < 0 || strcmp(kd.category, "mpi") ||
			    tfs_trace_term_args(g->t, i, args) < 0)
				continue;
			if (pass == 0 && chooses(kd.name)) {
				a = karg(&kd, "array_of_requests");
				if (a < 0)
					a = karg(&kd, "request");
				if (a >= 0 && kd.args[a].enc == TFS_ENC_STR && args[a].s) {
					for (const char *p = strstr(args[a].s, "req#"); p;
					     p = strstr(p + 4, "req#"))
						idmap_get(&m->chosen, strtoull(p + 4, NULL, 10), 0,
							  &err);
				} else if (a >= 0 && kd.args[a].enc == TFS_ENC_SYM) {
					idmap_get(&m->chosen, args[a].u, 0, &err);
				}
				continue;
			}
			comm = karg(&kd, "comm");
			src = karg(&kd, "source");
			tag = karg(&kd, "tag");
			if (tag < 0)
				tag = karg(&kd, "recvtag");
			if (comm < 0 || src < 0 || tag < 0 || kd.args[comm].enc != TFS_ENC_SYM)
				continue;
			for (uint32_t s = 0; s < g->ti->n_streams && !err; s++) {
				int64_t t;
				bool any;

				if (!g->counts[(size_t)s * nt + i])
					continue;
				t = tag_at(g, i, tag, args, g->rank_of[s]);
				any = special_rank(g, i, src) || t < 0;
				a = karg(&kd, "request");
				if (pass == 1 && !any && !strcmp(kd.name, "MPI_Irecv") && a >= 0 &&
				    idmap_has(&m->chosen, args[a].u, 0, &err))
					idmap_get(&m->gates, args[comm].u, (uint64_t)t, &err);
				/* a receive from any source or of any tag: no steering there */
				for (uint32_t k = 0; pass == 2 && any && k < m->gates.n; k++) {
					if (m->gates.a[k] != args[comm].u ||
					    (t >= 0 && m->gates.b[k] != (uint64_t)t))
						continue;
					idmap_drop(&m->gates, k--);
				}
			}
		}
	}
	return err;
}

int rp_mpi_new(struct rp_gen *g)
{
	const char *impl = tfs_trace_meta(g->t, "mpi_impl");
	bool any = false;

	for (uint32_t k = 0; k < g->ti->n_kinds && !any; k++) {
		struct tfs_kind_desc kd;

		any = tfs_trace_kind(g->t, k, &kd) == 0 && !strcmp(kd.category, "mpi");
	}
	if (!any)
		return 0;
	g->mpi = calloc(1, sizeof(*g->mpi));
	if (!g->mpi)
		return -ENOMEM;
	g->mpi->impl = impl && !strcmp(impl, "mpich")	  ? 1
		       : impl && !strcmp(impl, "openmpi") ? 2
							  : 0;
	return steer_plan(g);
}

void rp_mpi_free(struct rp_mpi *m)
{
	if (!m)
		return;
	for (uint32_t i = 0; i < N_CLASSES; i++)
		idmap_fini(&m->cls[i]);
	idmap_fini(&m->bufs);
	idmap_fini(&m->chosen);
	idmap_fini(&m->gates);
	free(m->ab);
	free(m);
}

void rp_mpi_allocs(struct rp_gen *g, struct fs_sbuf *b, const uint8_t *used)
{
	struct rp_mpi *m = g->mpi;
	uint64_t top = 0;

	for (uint32_t i = 0; m && i < m->n_ab; i++)
		if (used[m->ab[i].term] && m->ab[i].alloc > top && m->ab[i].alloc < 1u << 20)
			top = m->ab[i].alloc;
	for (uint64_t id = 1; id <= top; id++) {
		uint64_t end = 16;

		for (uint32_t i = 0; i < m->n_ab; i++)
			if (used[m->ab[i].term] && m->ab[i].alloc == id && m->ab[i].end > end)
				end = m->ab[i].end;
		fs_sb_printf(b, "\t\trt_bind(%" PRIu64 ", malloc(%" PRIu64 "));\n", id, end);
	}
}

int rp_mpi_impl(const struct rp_gen *g)
{
	return g->mpi ? g->mpi->impl : 0;
}

static const struct rp_mpi_fn *find_fn(const char *name)
{
	uint32_t lo = 0, hi = rp_mpi_n_fns;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = strcmp(rp_mpi_fns[mid].name, name);

		if (c == 0)
			return &rp_mpi_fns[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* ---- one call ---- */

/* What the code of one call is being built from. */
struct call {
	struct rp_gen *g;
	uint32_t term;
	const struct tfs_kind_desc *kd;
	const struct rp_mpi_fn *fn;
	union tfs_arg args[TFS_MAX_ARGS];
	struct fs_sbuf pre, call, post;
	int err;
	bool approx;
	const char *why;
};

static int rec_arg(const struct call *c, const char *name)
{
	for (uint32_t i = 0; i < c->kd->n_args; i++)
		if (!strcmp(c->kd->args[i].name, name))
			return (int)i;
	return -1;
}

static int rec_arg2(const struct call *c, const char *name, const char *suffix)
{
	char buf[128];

	snprintf(buf, sizeof(buf), "%s%s", name, suffix);
	return rec_arg(c, buf);
}

static const struct rp_mpi_param *param(const struct call *c, const char *name)
{
	for (uint32_t i = 0; name && i < c->fn->n_params; i++)
		if (!strcmp(c->fn->params[i].name, name))
			return &c->fn->params[i];
	return NULL;
}

/* Table entry of handle @id of class @cls, as an lvalue. */
static void put_handle(struct call *c, struct fs_sbuf *b, int cls, uint64_t id)
{
	if (cls == REQ && id == 0) {
		fs_sb_printf(b, "rt_null_req");
		return;
	}
	fs_sb_printf(b, "rt_h_%s[%u]", classes[cls].cls,
		     idmap_get(&c->g->mpi->cls[cls], id, 0, &c->err));
}

/* The running rank in the communicator, group or window ranks of @p are relative to. */
static void put_ctx_rank(struct call *c, struct fs_sbuf *b, const struct rp_mpi_param *p)
{
	const struct rp_mpi_param *q = param(c, p->ctx);
	int a = q ? rec_arg(c, q->name) : -1;
	int cls = q ? class_of(q->base) : -1;

	/* a matched receive's ranks are in its message's communicator, which it does not name */
	if (!q || a < 0 || q->role != RP_HANDLE || cls < 0 || !strcmp(q->base, "MPI_Message")) {
		fs_sb_printf(b, "rt_wrank_world()");
		return;
	}
	fs_sb_printf(b, "%s(",
		     !strcmp(q->base, "MPI_Comm")    ? "rt_crank"
		     : !strcmp(q->base, "MPI_Group") ? "rt_grank"
						     : "rt_wrank");
	put_handle(c, b, cls, c->args[a].u);
	fs_sb_printf(b, ")");
}

/* One element of a recorded integer array: "7", "-2" (special rank), "r", "r+1", "r-3". */
static void put_elem(struct call *c, struct fs_sbuf *b, const struct rp_mpi_param *p, const char *e,
		     size_t n)
{
	char tmp[64];

	snprintf(tmp, sizeof(tmp), "%.*s", (int)(n < 63 ? n : 63), e);
	if (p->rank && tmp[0] == 'r') {
		fs_sb_printf(b, "(");
		put_ctx_rank(c, b, p);
		fs_sb_printf(b, " + (%lld))", tmp[1] ? strtoll(tmp + 1, NULL, 10) : 0LL);
	} else if (p->rank && tmp[0] == '-') {
		/* the number, not the text: a crafted trace's element is no C source */
		fs_sb_printf(b, "rt_special(INT64_C(%lld))", strtoll(tmp, NULL, 10));
	} else {
		fs_sb_printf(b, "(%s)INT64_C(%lld)", p->base, strtoll(tmp, NULL, 10));
	}
}

/* The elements of a recorded array string; a string cut at its end ("...") is flagged. */
static uint32_t split(const char *s, const char **elem, size_t *len, uint32_t cap, bool *cut)
{
	uint32_t n = 0;

	*cut = false;
	while (s && *s && n < cap) {
		size_t k = strcspn(s, ",");

		if (k >= 3 && !strncmp(s, "...", 3)) { /* the wrapper's mark of a cut text */
			*cut = true;
			break;
		}
		elem[n] = s;
		len[n++] = k;
		s += k;
		if (*s == ',')
			s++;
	}
	if (s && *s)
		*cut = true;
	return n;
}

#define MAX_ELEMS 4096

/* A scalar integer parameter's value. */
static void put_int(struct call *c, struct fs_sbuf *b, const struct rp_mpi_param *p, int a)
{
	const struct tfs_arg_desc *d;
	char text[64];

	if (a < 0) {
		fs_sb_printf(b, "(%s)0", p->base);
		return;
	}
	d = &c->kd->args[a];
	if (d->enc == TFS_ENC_VAL) {
		fs_sb_printf(b, "(%s)%s", p->base, rp_val(c->g, c->term, (uint32_t)a));
	} else if (d->enc == TFS_ENC_RANK) {
		tfs_trace_term_arg_text(c->g->t, c->term, (uint32_t)a, text, sizeof(text));
		if (text[0] != 'r') {
			fs_sb_printf(b, "rt_special(INT64_C(%" PRId64 "))", c->args[a].i);
		} else {
			fs_sb_printf(b, "(");
			put_ctx_rank(c, b, p);
			fs_sb_printf(b, " + (%" PRId64 "))", c->args[a].i);
		}
	} else if (d->enc == TFS_ENC_RVAL) {
		tfs_trace_term_arg_text(c->g->t, c->term, (uint32_t)a, text, sizeof(text));
		if (text[0] == 'r')
			fs_sb_printf(b, "(rt_wrank_world() + (%" PRId64 "))", c->args[a].i);
		else
			fs_sb_printf(b, "(int)INT64_C(%" PRId64 ")", c->args[a].i);
	} else if (d->type == TFS_TYPE_I64) {
		fs_sb_printf(b, "(%s)INT64_C(%" PRId64 ")", p->base, c->args[a].i);
	} else {
		fs_sb_printf(b, "(%s)UINT64_C(%" PRIu64 ")", p->base, c->args[a].u);
	}
}

/* The most elements any count of the call names (arrays: the furthest displacement). */
static int64_t max_count(struct call *c, bool *val)
{
	int64_t best = 1, disp[MAX_ELEMS] = {0};
	const char *e[MAX_ELEMS];
	size_t l[MAX_ELEMS];
	uint32_t nd = 0;
	bool cut;

	*val = false;
	for (uint32_t i = 0; i < c->kd->n_args && nd == 0; i++) {
		const char *n = c->kd->args[i].name;

		if (c->kd->args[i].enc == TFS_ENC_STR && strstr(n, "displs") && c->args[i].s)
			nd = split(c->args[i].s, e, l, MAX_ELEMS, &cut);
	}
	for (uint32_t k = 0; k < nd; k++)
		disp[k] = strtoll(e[k], NULL, 10);
	for (uint32_t i = 0; i < c->kd->n_args; i++) {
		const struct tfs_arg_desc *d = &c->kd->args[i];
		int64_t sum = 0;

		if (!strstr(d->name, "count") && !strstr(d->name, "size"))
			continue;
		if (d->enc == TFS_ENC_VAL) {
			*val = true;
		} else if (d->enc == TFS_ENC_STR && c->args[i].s) {
			uint32_t n = split(c->args[i].s, e, l, MAX_ELEMS, &cut);

			for (uint32_t k = 0; k < n; k++) {
				int64_t v = strtoll(e[k], NULL, 10);

				sum += v;
				if (k < nd && disp[k] + v > best)
					best = disp[k] + v;
			}
			if (sum > best)
				best = sum;
		} else if (d->enc == TFS_ENC_SIG && strstr(d->name, "count") &&
			   c->args[i].i > best) {
			best = c->args[i].i;
		}
	}
	return best;
}

/* The datatype a buffer @name holds: NAMEtype, NAME_datatype, then any datatype. */
static int buf_type(const struct call *c, const char *name)
{
	static const char *const prefixes[] = {"send", "recv", "origin", "result", NULL};
	char want[64] = "";
	int a;

	for (int i = 0; prefixes[i]; i++)
		if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
			snprintf(want, sizeof(want), "%s", prefixes[i]);
	if (want[0] &&
	    ((a = rec_arg2(c, want, "type")) >= 0 || (a = rec_arg2(c, want, "_datatype")) >= 0))
		return a;
	if ((a = rec_arg(c, "datatype")) >= 0)
		return a;
	for (uint32_t i = 0; i < c->kd->n_args; i++)
		if (c->kd->args[i].sym_class && !strcmp(c->kd->args[i].sym_class, "type"))
			return (int)i;
	return -1;
}

/* The bytes a buffer needs: its datatype times the most elements the call names, times
 * the communicator's size for collectives that send or receive per rank. */
static void put_buf_bytes(struct call *c, struct fs_sbuf *b, const char *name)
{
	static const char *const per_rank[] = {"gather",	 "scatter",  "alltoall",
					       "reduce_scatter", "neighbor", NULL};
	int t = buf_type(c, name), comm = rec_arg(c, "comm");
	bool val, coll = false;
	int64_t n = max_count(c, &val);
	char low[128];

	snprintf(low, sizeof(low), "%s", c->fn->name);
	for (char *s = low; *s; s++)
		*s = (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
	for (int i = 0; per_rank[i]; i++)
		coll |= strstr(low, per_rank[i]) != NULL;
	if (val)
		n = n > 1 << 20 ? n : 1 << 20; /* a count that varies: room for a large one */
	if (t < 0) {
		fs_sb_printf(b, "UINT64_C(%" PRId64 ") + (1u << 20)", n);
		return;
	}
	fs_sb_printf(b, "rt_tbytes(");
	put_handle(c, b, 1, c->args[t].u);
	fs_sb_printf(b, ", INT64_C(%" PRId64 ")", n);
	if (coll && comm >= 0 && c->kd->args[comm].enc == TFS_ENC_SYM) {
		fs_sb_printf(b, " * rt_csize(");
		put_handle(c, b, 0, c->args[comm].u);
		fs_sb_printf(b, ")");
	}
	fs_sb_printf(b, ")");
}

/*
 * The most the room a buffer guess leaves for the other ranks' data (note_alloc) brings it
 * to: what a proxy reserves for a scratch buffer (proxy_rt.c rt_mreserve). The rank count
 * comes from the file (up to 2^32 - 1): unbounded, the proxy would ask malloc for terabytes.
 */
#define BUF_GUESS_MAX (UINT64_C(1) << 30)

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
	return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/*
 * A buffer in allocation @alloc: how far a call may reach into it (a generous guess: its
 * elements, times the ranks for a collective, at most BUF_GUESS_MAX unless its own elements
 * need more).
 */
static void note_alloc(struct call *c, const char *name, uint64_t alloc, uint64_t off)
{
	struct rp_mpi *m = c->g->mpi;
	int t = buf_type(c, name);
	bool val;
	int64_t count = max_count(c, &val);
	uint64_t own, bytes;

	own = mul_sat(count > 0 ? (uint64_t)count : 0, t >= 0 ? elem_bytes(c->args[t].u) : 64);
	bytes = mul_sat(own, (uint64_t)c->g->ti->n_ranks + 1);
	if (bytes > BUF_GUESS_MAX)
		bytes = own > BUF_GUESS_MAX ? own : BUF_GUESS_MAX;
	bytes = add_sat(bytes, 4096);
	if (m->n_ab == m->ab_cap) {
		uint32_t cap = m->ab_cap ? 2 * m->ab_cap : 16;
		struct abuf *ab = realloc(m->ab, cap * sizeof(*ab));

		if (!ab) {
			c->err = -ENOMEM;
			return;
		}
		m->ab = ab;
		m->ab_cap = cap;
	}
	m->ab[m->n_ab++] = (struct abuf){c->term, alloc, add_sat(off, bytes)};
}

static void p_buf(struct call *c, const struct rp_mpi_param *p)
{
	int a = rec_arg(c, p->name), o = rec_arg2(c, p->name, "_off");
	uint64_t alloc, off;

	if (a < 0 || o < 0 || c->kd->args[o].enc == TFS_ENC_VAL) {
		fs_sb_printf(&c->call, "rt_scratch_get(1u << 20)");
		return;
	}
	alloc = c->args[a].u;
	off = c->args[o].u;
	if (alloc)
		note_alloc(c, p->name, alloc, off);
	fs_sb_printf(&c->call, "rt_mbuf(%u, UINT64_C(%" PRIu64 "), UINT64_C(%" PRIu64 "), ",
		     idmap_get(&c->g->mpi->bufs, alloc, off, &c->err), alloc, off);
	put_buf_bytes(c, &c->call, p->name);
	fs_sb_printf(&c->call, ")");
}

/* A void * the wrapper recorded by address (a window's base...): memory of its own. */
static void p_voidp(struct call *c, const struct rp_mpi_param *p)
{
	int size = rec_arg(c, "size");
	uint32_t key = idmap_get(&c->g->mpi->bufs, UINT64_MAX - 1 - c->term,
				 (uint64_t)(p - c->fn->params), &c->err);

	fs_sb_printf(&c->call, "rt_mbuf(%u, 0, 1, ", key);
	if (size >= 0 && c->kd->args[size].enc != TFS_ENC_STR)
		put_int(c, &c->call, &(struct rp_mpi_param){.base = "uint64_t"}, size);
	else
		fs_sb_printf(&c->call, "4096");
	fs_sb_printf(&c->call, " + 4096)");
}

/* The length annotated for array @p: a parameter's recorded value, a number, the ranks. */
static int64_t array_len(const struct call *c, const struct rp_mpi_param *p)
{
	int a;

	if (!p->len)
		return -1;
	if (p->len[0] >= '0' && p->len[0] <= '9')
		return strtoll(p->len, NULL, 10);
	if (!strcmp(p->len, "commsize"))
		return c->g->ti->n_ranks;
	a = rec_arg(c, p->len);
	if (a >= 0 && c->kd->args[a].enc == TFS_ENC_SIG && c->args[a].i >= 0)
		return c->args[a].i;
	return -1;
}

/* The id of predefined handle @name (@len bytes: MPI_DOUBLE) of C type @base, or -1. */
static int64_t predef_id(const char *base, const char *name, size_t len)
{
	int cls = class_of(base);

	for (uint32_t p = 0; cls >= 0 && p < rp_mpi_n_predefs; p++)
		if (!strcmp(rp_mpi_predefs[p].cls, classes[cls].cls) &&
		    !strncmp(rp_mpi_predefs[p].name, name, len) && !rp_mpi_predefs[p].name[len])
			return rp_mpi_predefs[p].id;
	return -1;
}

/*
 * One element of a recorded array: a number, "r+k" (a relative rank), "cls#id", or the name
 * of a predefined handle (MPI_DOUBLE: the wrappers write those by name, older traces as ids).
 */
struct elem {
	int64_t v;
	uint8_t rel;
};

/*
 * The elements of array @p as recorded; a text cut at 512 bytes goes on as the line its
 * last elements draw (a loop's consecutive requests, displacements 0, 1, 2...) up to the
 * annotated length, flagged approximate when it draws none.
 */
static uint32_t elements(struct call *c, const struct rp_mpi_param *p, int a, struct elem *out,
			 bool extend)
{
	const char *e[MAX_ELEMS];
	size_t l[MAX_ELEMS];
	bool cut;
	uint32_t n = split(c->args[a].s, e, l, MAX_ELEMS, &cut);
	int64_t want = array_len(c, p);

	for (uint32_t k = 0; k < n; k++) {
		const char *h = memchr(e[k], '#', l[k]);
		int64_t id =
		    l[k] > 4 && !memcmp(e[k], "MPI_", 4) ? predef_id(p->base, e[k], l[k]) : -1;

		out[k].rel = e[k][0] == 'r';
		if (id >= 0)
			out[k].v = id;
		else
			out[k].v = h ? strtoll(h + 1, NULL, 10) : strtoll(e[k] + out[k].rel, NULL, 10);
	}
	if (!cut || !extend)
		return n;
	if (want > MAX_ELEMS)
		want = MAX_ELEMS;
	if (n >= 2 && want > n && out[n - 1].rel == out[n - 2].rel) {
		int64_t d = out[n - 1].v - out[n - 2].v;

		for (; n < (uint32_t)want; n++)
			out[n] = (struct elem){out[n - 1].v + d, out[n - 1].rel};
		c->why = "an array longer than its trace keeps (512 bytes of text): continued as "
			 "its last elements go";
		return n;
	}
	c->approx = true;
	c->why = "an array longer than its trace keeps (512 bytes of text)";
	return n;
}

/*
 * Requests the trace cut off a long array (a Waitall of many): the listed ones, then the
 * requests this run has live that are not listed, oldest first, as many as the call's
 * count: what a program passes is most often every request it has pending.
 */
static void p_req_cut(struct call *c, const struct rp_mpi_param *p, uint32_t idx,
		      const struct elem *el, uint32_t n, int64_t want)
{
	fs_sb_printf(&c->pre, "\tMPI_Request a%u[%" PRId64 "];\n\tuint32_t m%u[%" PRId64 "] = {",
		     idx, want, idx, want);
	for (uint32_t k = 0; k < n; k++) {
		fs_sb_printf(&c->pre, "%s%u", k ? ", " : "",
			     el[k].v
				 ? idmap_get(&c->g->mpi->cls[REQ], (uint64_t)el[k].v, 0, &c->err)
				 : UINT32_MAX);
	}
	fs_sb_printf(&c->pre, "};\n\trt_req_fill(a%u, m%u, %u, %" PRId64 ");\n", idx, idx, n, want);
	fs_sb_printf(&c->call, "a%u", idx);
	if (p->dir != RP_IN)
		fs_sb_printf(&c->post, "\trt_req_back(a%u, m%u, %" PRId64 ");\n", idx, idx, want);
	c->why = "a request array longer than its trace keeps (512 bytes of text): the rest "
		 "are the requests pending";
}

static void p_handle_arr(struct call *c, const struct rp_mpi_param *p, uint32_t idx)
{
	struct elem el[MAX_ELEMS];
	int a = rec_arg(c, p->name), cls = class_of(p->base);
	int64_t want = array_len(c, p);
	uint32_t n;

	if (a < 0 || cls < 0 || c->kd->args[a].enc != TFS_ENC_STR) {
		fs_sb_printf(&c->call, "rt_ms(%u * sizeof(%s))", MAX_ELEMS, p->base);
		return;
	}
	n = elements(c, p, a, el, cls != REQ);
	if (cls == REQ && n < want && want <= MAX_ELEMS && p->dir != RP_OUT) {
		p_req_cut(c, p, idx, el, n, want);
		return;
	}
	fs_sb_printf(&c->pre, "\t%s a%u[%u] = {", p->base, idx, n + 1);
	for (uint32_t k = 0; k < n; k++) {
		fs_sb_printf(&c->pre, "%s", k ? ", " : "");
		if (p->dir == RP_OUT)
			fs_sb_printf(&c->pre, "0");
		else
			put_handle(c, &c->pre, cls, (uint64_t)el[k].v);
	}
	fs_sb_printf(&c->pre, "%s};\n", n ? "" : "0");
	fs_sb_printf(&c->call, "a%u", idx);
	for (uint32_t k = 0; p->dir != RP_IN && k < n; k++) {
		if (cls == REQ && el[k].v == 0)
			continue;
		fs_sb_printf(&c->post, "\t");
		put_handle(c, &c->post, cls, (uint64_t)el[k].v);
		fs_sb_printf(&c->post, " = a%u[%u];\n", idx, k);
	}
}

static void p_int_arr(struct call *c, const struct rp_mpi_param *p, uint32_t idx)
{
	struct elem el[MAX_ELEMS];
	int a = rec_arg(c, p->name);
	uint32_t n;

	if (a < 0 || p->dir == RP_OUT || c->kd->args[a].enc != TFS_ENC_STR) {
		fs_sb_printf(&c->call, "rt_ms(%u * sizeof(%s))", MAX_ELEMS, p->base);
		return;
	}
	n = elements(c, p, a, el, true);
	if (n == 0) { /* significant at the root only, or empty */
		fs_sb_printf(&c->call, "rt_ms(%u * sizeof(%s))", MAX_ELEMS, p->base);
		return;
	}
	fs_sb_printf(&c->pre, "\t%s a%u[%u] = {", p->base, idx, c->approx ? MAX_ELEMS : n);
	for (uint32_t k = 0; k < n; k++) {
		char text[32];

		snprintf(text, sizeof(text), "%s%+" PRId64, el[k].rel ? "r" : "", el[k].v);
		fs_sb_printf(&c->pre, "%s", k ? ", " : "");
		put_elem(c, &c->pre, p, text, strlen(text));
	}
	fs_sb_printf(&c->pre, "};\n");
	fs_sb_printf(&c->call, "a%u", idx);
}

static void p_status(struct call *c, const struct rp_mpi_param *p)
{
	static const char *const f[] = {".source", ".tag", ".count", ".cancelled"};
	bool ignored = true;
	int a[4];

	for (int i = 0; i < 4; i++) {
		a[i] = rec_arg2(c, p->name, f[i]);
		ignored &= a[i] >= 0 && c->kd->args[a[i]].enc != TFS_ENC_VAL &&
			   c->args[a[i]].i == NO_STATUS;
	}
	if (p->dir != RP_IN) {
		fs_sb_printf(&c->call, "%s", ignored ? "MPI_STATUS_IGNORE" : "&rt_status");
		return;
	}
	/* a status the call reads (MPI_Get_count): the last one written, with the fields the
	 * trace has of it */
	fs_sb_printf(&c->call, "rt_status_in(");
	for (int i = 0; i < 4; i++) {
		fs_sb_printf(&c->call, "%s", i ? ", " : "");
		if (a[i] < 0 || c->args[a[i]].i == NO_STATUS)
			fs_sb_printf(&c->call, "RT_NO_STATUS");
		else
			put_int(c, &c->call, &(struct rp_mpi_param){.base = "int64_t"}, a[i]);
	}
	fs_sb_printf(&c->call, ")");
}

static void p_statuses(struct call *c, const struct rp_mpi_param *p)
{
	int a = rec_arg(c, p->name);

	if (a >= 0 && c->kd->args[a].enc == TFS_ENC_STR && c->args[a].s && !c->args[a].s[0])
		fs_sb_printf(&c->call, "MPI_STATUSES_IGNORE");
	else
		fs_sb_printf(&c->call, "(MPI_Status *)rt_ms(%u * sizeof(MPI_Status))", MAX_ELEMS);
}

static void p_str(struct call *c, const struct rp_mpi_param *p)
{
	int a = rec_arg(c, p->name);

	if (p->dir != RP_IN || a < 0 || c->kd->args[a].enc != TFS_ENC_STR) {
		fs_sb_printf(&c->call, "(char *)rt_ms(4096)");
		return;
	}
	/* a file of MPI-IO goes under the scratch directory like any other */
	fs_sb_printf(&c->call, "%s", !strcmp(p->name, "filename") ? "rt_wpath(" : "(");
	rp_put_cstr(&c->call, c->args[a].s ? c->args[a].s : "");
	fs_sb_printf(&c->call, ")");
}

/* One parameter's expression; declarations before the call into c->pre, after into post. */
static void p_one(struct call *c, const struct rp_mpi_param *p, uint32_t idx)
{
	int a = rec_arg(c, p->name), cls = class_of(p->base);
	bool init = !strcmp(c->fn->name, "MPI_Init") || !strcmp(c->fn->name, "MPI_Init_thread");

	if (init && !strcmp(p->name, "argc")) {
		fs_sb_printf(&c->pre, "\trt_fake_args(");
		put_int(c, &c->pre, &(struct rp_mpi_param){.base = "int64_t"}, a);
		fs_sb_printf(&c->pre, ", rt_prog);\n");
		fs_sb_printf(&c->call, "&rt_fake_argc");
		return;
	}
	if (init && !strcmp(p->name, "argv")) {
		fs_sb_printf(&c->call, "&rt_fake_argv");
		return;
	}
	switch (p->role) {
	case RP_BUF:
		p_buf(c, p);
		return;
	case RP_VOIDP:
		p_voidp(c, p);
		return;
	case RP_FN:
		if (!strcmp(p->base, "MPI_User_function"))
			fs_sb_printf(&c->call, "rt_user_op");
		else
			fs_sb_printf(&c->call, "(%s *)(void (*)(void))rt_noop_fn", p->base);
		return;
	case RP_OPAQUE:
		fs_sb_printf(&c->pre, "\t%s o%u;\n\tmemset(&o%u, 0, sizeof(o%u));\n", p->base, idx,
			     idx, idx);
		if (a >= 0)
			fs_sb_printf(&c->pre,
				     "\tmemcpy(&o%u, &(uint64_t){UINT64_C(%" PRIu64 ")}, "
				     "sizeof(o%u) < 8 ? sizeof(o%u) : 8);\n",
				     idx, c->args[a].u, idx, idx);
		fs_sb_printf(&c->call, "o%u", idx);
		return;
	case RP_INT:
		put_int(c, &c->call, p, a);
		return;
	case RP_IPTR:
		fs_sb_printf(&c->pre, "\t%s l%u = ", p->base, idx);
		put_int(c, &c->pre, p, a);
		fs_sb_printf(&c->pre, ";\n");
		fs_sb_printf(&c->call, "&l%u", idx);
		return;
	case RP_IARR:
		p_int_arr(c, p, idx);
		return;
	case RP_HANDLE:
		if (cls < 0 || a < 0 || c->kd->args[a].enc != TFS_ENC_SYM)
			break;
		put_handle(c, &c->call, cls, c->args[a].u);
		return;
	case RP_HPTR:
		if (cls < 0 || a < 0 || c->kd->args[a].enc != TFS_ENC_SYM)
			break;
		fs_sb_printf(&c->call, "&");
		put_handle(c, &c->call, cls, c->args[a].u);
		if (cls == REQ && p->dir == RP_OUT && c->args[a].u)
			fs_sb_printf(&c->post, "\trt_req_born(%u);\n",
				     idmap_get(&c->g->mpi->cls[REQ], c->args[a].u, 0, &c->err));
		return;
	case RP_HARR:
		p_handle_arr(c, p, idx);
		return;
	case RP_STATUS:
		p_status(c, p);
		return;
	case RP_STATUSES:
		p_statuses(c, p);
		return;
	case RP_STR:
		p_str(c, p);
		return;
	default:
		break;
	}
	if (p->ptr)
		fs_sb_printf(&c->call, "rt_ms(4096)");
	else
		fs_sb_printf(&c->call, "(%s)0", p->base);
}

/* Calls whose outcome a run chooses: replayed as calls, their choice the run's own. */
static bool chooses(const char *name)
{
	static const char *const names[] = {"MPI_Waitany",  "MPI_Waitsome", "MPI_Testany",
					    "MPI_Testsome", "MPI_Test",	    "MPI_Testall",
					    "MPI_Iprobe",   "MPI_Improbe",  NULL};

	for (int i = 0; names[i]; i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

static bool name_in(const char *name, const char *const *names)
{
	for (int i = 0; names[i]; i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

/* The expression of integer parameter @name of the call (its rank or tag). */
static bool put_named(struct call *c, struct fs_sbuf *b, const char *name)
{
	const struct rp_mpi_param *p = param(c, name);
	int a = rec_arg(c, name);

	if (!p || a < 0)
		return false;
	put_int(c, b, p, a);
	return true;
}

/* rt_gate_*(comm, <comm handle>, <rank>, <tag>) for the call's @rank and @tag parameters. */
static void gate_call(struct call *c, struct fs_sbuf *b, const char *fn, const char *rank,
		      const char *tag, const char *tail)
{
	int comm = rec_arg(c, "comm");
	uint32_t cd;

	if (comm < 0 || c->kd->args[comm].enc != TFS_ENC_SYM || !param(c, rank) || !param(c, tag))
		return;
	cd = idmap_get(&c->g->mpi->cls[0], c->args[comm].u, 0, &c->err);
	fs_sb_printf(b, "\t%s(%u, rt_h_comm[%u], ", fn, cd, cd);
	put_named(c, b, rank);
	fs_sb_printf(b, ", ");
	put_named(c, b, tag);
	fs_sb_printf(b, "%s);\n", tail);
}

/* The dense ids of the requests the call names, and which its recorded outcome completes. */
static uint32_t call_requests(struct call *c, uint32_t *d, bool *done)
{
	int a = rec_arg(c, "array_of_requests"), r = rec_arg(c, "request");
	int flag = rec_arg(c, "flag"), indx = rec_arg(c, "indx"),
	    idx = rec_arg(c, "array_of_indices");
	const char *name = c->kd->name;
	uint32_t n = 0;

	if (a >= 0 && c->kd->args[a].enc == TFS_ENC_STR && c->args[a].s) {
		for (const char *p = c->args[a].s; p && n < MAX_ELEMS; p = strchr(p, ',')) {
			const char *h;

			p += *p == ',';
			h = strstr(p, "req#");
			if (!h || (strchr(p, ',') && h > strchr(p, ',')))
				break;
			d[n] = (uint32_t)strtoull(h + 4, NULL, 10);
			done[n++] = false;
		}
	} else if (r >= 0 && c->kd->args[r].enc == TFS_ENC_SYM) {
		d[0] = (uint32_t)c->args[r].u;
		done[n++] = false;
	}
	if (!chooses(name))
		return n;
	if ((!strcmp(name, "MPI_Waitany") || !strcmp(name, "MPI_Testany")) && indx >= 0 &&
	    (flag < 0 || c->args[flag].i) && c->args[indx].i >= 0 && c->args[indx].i < n)
		done[c->args[indx].i] = true;
	if ((!strcmp(name, "MPI_Test") || !strcmp(name, "MPI_Testall")) && flag >= 0 &&
	    c->args[flag].i)
		for (uint32_t k = 0; k < n; k++)
			done[k] = true;
	if (idx >= 0 && c->kd->args[idx].enc == TFS_ENC_STR && c->args[idx].s)
		for (const char *p = c->args[idx].s; *p;
		     p += strcspn(p, ",") + (p[strcspn(p, ",")] != 0)) {
			int64_t k = strtoll(p, NULL, 10);

			if (k >= 0 && k < n)
				done[k] = true;
		}
	return n;
}

/*
 * The steering of a call (steer_plan()): a send waits for its receiver's word on a gate, a
 * receive gives it (now, or when its request completes in the trace), a call completing
 * requests first lets the ones it completes in the trace complete, and waits for them.
 */
static void steer(struct call *c, struct fs_sbuf *pre, struct fs_sbuf *post)
{
	static const char *const sends[] = {
	    "MPI_Send",	  "MPI_Isend", "MPI_Ssend",  "MPI_Issend",   "MPI_Rsend",
	    "MPI_Irsend", "MPI_Bsend", "MPI_Ibsend", "MPI_Sendrecv", "MPI_Sendrecv_replace",
	    NULL};
	static const char *const recvs[] = {"MPI_Recv", "MPI_Sendrecv", "MPI_Sendrecv_replace",
					    NULL};
	struct rp_mpi *m = c->g->mpi;
	const char *name = c->kd->name;
	uint32_t d[MAX_ELEMS], n;
	bool done[MAX_ELEMS];
	int rq = rec_arg(c, "request");

	if (!m->gates.n)
		return;
	if (!strcmp(name, "MPI_Init") || !strcmp(name, "MPI_Init_thread"))
		fs_sb_printf(post, "\trt_steer_init();\n");
	if (name_in(name, recvs))
		gate_call(c, pre, "rt_gate_go", "source", param(c, "tag") ? "tag" : "recvtag", "");
	if (name_in(name, sends))
		gate_call(c, pre, "rt_gate_send", "dest", param(c, "tag") ? "tag" : "sendtag", "");
	if (!strcmp(name, "MPI_Irecv") && rq >= 0 && c->args[rq].u) {
		bool chosen = idmap_has(&m->chosen, c->args[rq].u, 0, &c->err);
		char tail[64];

		snprintf(tail, sizeof(tail), ", %u, %d",
			 idmap_get(&m->cls[REQ], c->args[rq].u, 0, &c->err), chosen);
		gate_call(c, post, "rt_gate_post", "source", "tag", tail);
		return;
	}
	n = call_requests(c, d, done);
	for (uint32_t k = 0; k < n; k++) {
		uint32_t dd;

		if (!d[k])
			continue;
		dd = idmap_get(&m->cls[REQ], d[k], 0, &c->err);
		/* a call that chooses releases only what the trace has it complete */
		if (!chooses(name) || done[k])
			fs_sb_printf(pre, "\trt_gate_release(%u);\n", dd);
		if (chooses(name) && done[k])
			fs_sb_printf(pre, "\trt_gate_await(%u);\n", dd);
	}
}

int rp_mpi_term(struct rp_gen *g, uint32_t term, const struct tfs_kind_desc *kd)
{
	struct rp_term *t = &g->terms[term];
	struct call c = {.g = g, .term = term, .kd = kd};
	int rc;

	c.fn = find_fn(kd->name);
	if (!c.fn) {
		t->why = rp_mpi_n_fns ? "an MPI function this tracefs was not built with"
				      : "MPI calls: this tracefs was built without MPI";
		return 0;
	}
	rc = tfs_trace_term_args(g->t, term, c.args);
	if (rc < 0)
		return rc;
	for (uint32_t i = 0; i < c.fn->n_params; i++) {
		fs_sb_printf(&c.call, "%s", i ? ", " : "");
		p_one(&c, &c.fn->params[i], i);
	}
	if (chooses(kd->name) && !g->mpi->gates.n) {
		c.approx = true;
		c.why = "which request completes (or whether a message is there) is chosen "
			"by the run";
	} else if (chooses(kd->name)) {
		c.why = "steered: the requests complete as recorded (their senders wait for the "
			"word; after 10 s they do not)";
	}
	t->what = RP_W_CALL;
	t->approx = c.approx;
	t->why = c.why;
	{
		struct fs_sbuf spre = {0}, spost = {0};

		steer(&c, &spre, &spost);
		fs_sb_put(&c.pre, spre.data ? spre.data : "", spre.len);
		fs_sb_put(&c.post, spost.data ? spost.data : "", spost.len);
		c.err = c.err ? c.err : spre.failed || spost.failed ? -ENOMEM : 0;
		free(spre.data);
		free(spost.data);
	}
	fs_sb_printf(&t->code, "{\n%s", c.pre.data ? c.pre.data : "");
	if (!strcmp(kd->name, "MPI_Finalize"))
		fs_sb_printf(&t->code, "\trt_steer_drain();\n");
	fs_sb_printf(&t->code, "\t%s(%s);\n%s\t}", kd->name, c.call.data ? c.call.data : "",
		     c.post.data ? c.post.data : "");
	rc = c.err ? c.err : c.pre.failed || c.call.failed || c.post.failed ? -ENOMEM : 0;
	free(c.pre.data);
	free(c.call.data);
	free(c.post.data);
	return rc;
}

/* ---- tables ---- */

void rp_mpi_tables(struct rp_gen *g, struct fs_sbuf *b)
{
	struct rp_mpi *m = g->mpi;

	fs_sb_printf(b, "/* ---- MPI handles by symbolic id, buffers ---- */\n\n"
			"static MPI_Request rt_null_req = MPI_REQUEST_NULL;\n");
	for (uint32_t i = 0; i < N_CLASSES; i++)
		if (m->cls[i].n)
			fs_sb_printf(b, "static %s rt_h_%s[%u];\n", classes[i].ctype,
				     classes[i].cls, m->cls[i].n);
	fs_sb_printf(b, "\nstatic void rt_mpi_tables_init(void)\n{\n");
	for (uint32_t i = 0; i < N_CLASSES; i++) {
		for (uint32_t k = 0; k < m->cls[i].n; k++) {
			const char *name = NULL;

			for (uint32_t p = 0; p < rp_mpi_n_predefs && !name; p++)
				if (!strcmp(rp_mpi_predefs[p].cls, classes[i].cls) &&
				    rp_mpi_predefs[p].id == m->cls[i].a[k])
					name = rp_mpi_predefs[p].name;
			if (i == REQ)
				fs_sb_printf(b, "\trt_h_req[%u] = MPI_REQUEST_NULL;\n", k);
			if (!name)
				continue;
			fs_sb_printf(
			    b, "#ifdef %s\n\trt_h_%s[%u] = %s; /* %s#%" PRIu64 " */\n#endif\n",
			    name, classes[i].cls, k, name, classes[i].cls, m->cls[i].a[k]);
		}
	}
	if (m->gates.n) {
		fs_sb_printf(b, "\tstatic const struct rt_gate gates[] = {");
		for (uint32_t k = 0; k < m->gates.n; k++)
			fs_sb_printf(b, "%s{%u, %" PRId64 "}", k ? ", " : "",
				     idmap_get(&m->cls[0], m->gates.a[k], 0, &(int){0}),
				     (int64_t)m->gates.b[k]);
		fs_sb_printf(b, "};\n\n\trt_gates = gates;\n\trt_n_gates = %u;\n", m->gates.n);
	}
	fs_sb_printf(b, "\trt_mkeys = rt_mem(%u * sizeof(*rt_mkeys));\n", m->bufs.n + 1);
	if (m->cls[REQ].n)
		fs_sb_printf(b,
			     "\trt_reqs = rt_h_req;\n\trt_n_reqs = %u;\n"
			     "\trt_req_seq = rt_mem(%u * sizeof(*rt_req_seq));\n",
			     m->cls[REQ].n, m->cls[REQ].n);
	if (m->bufs.n > 1024)
		fs_sb_printf(b, "\trt_mreserve = UINT64_C(1) << 26;\n");
	fs_sb_printf(b, "}\n\n");
}
