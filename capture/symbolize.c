/*
 * Symbolisation of the code addresses of a traced process's backtraces, with elfutils'
 * libdw, after the process is gone: every object it announced is reported to one Dwfl at
 * its load bias (offline: the files on disk, their separate debug files found by build id),
 * and each distinct address is looked up once, at addr - 1 since frames are return
 * addresses (the call instruction holds the line). DWARF gives the function, file and line
 * and the chain of inlined functions (their call sites give the outer frames' lines); an
 * object without DWARF gives its ELF symbol name; nothing at all gives
 * "<object file name>+0x<offset>". C++ names are kept as DWARF or the symbol table spell
 * them (not demangled). This file does not intern backtraces (stacks.c).
 *
 * Each object file is opened once per tracing process, not once per traced process: a
 * Dwfl holding that file alone (at bias 0, looked up at addr - bias) and its functions'
 * index stay cached, keyed by path and checked against the file's identity (device,
 * inode, size, mtime) so that a rebuilt program is read again. Reading libc's separate
 * debug file costs tens of milliseconds, which `tracefs record` of a shell script paid
 * for every process it started.
 */
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tfs/writer.h"
#include "stacks_i.h"

#define MAX_SRC 64	/* source frames of one address (tfs_writer_add_symbol's limit) */
#define PATH_BYTES 1024 /* an absolute source path; longer ones stay as DWARF has them */

/* Room for the absolute source paths of one address's frames. */
struct paths {
	char buf[MAX_SRC][PATH_BYTES];
};

/* A function's code range in a compilation unit (DWARF addresses, before the bias). */
struct fn_range {
	Dwarf_Addr lo, hi;
	Dwarf_Die die; /* its DW_TAG_subprogram */
};

/*
 * The functions of one compilation unit by address, built on its first lookup: finding an
 * address's function is then a binary search, where dwarf_getscopes walks the unit's whole
 * tree on every call (a third of a millisecond per address in libpython).
 */
struct cu_index {
	const void *cu; /* the unit's Dwarf_Die .cu, its identity while the Dwfl lives */
	struct fn_range *fns;
	size_t n_fns, fns_cap;
};

struct sym_ctx {
	struct paths paths;
	struct cu_index *cus;
	size_t n_cus, cus_cap;
};

/* One object file, open for lookups: its Dwfl and the index of its functions. */
struct obj {
	char *path;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	uint64_t last_use; /* g_use when last looked up: the least recent is evicted */
	Dwfl *dwfl;	   /* NULL: the file could not be read; it gets fallback names */
	Dwfl_Module *mod;
	struct sym_ctx *ctx;
};

#define MAX_OBJS 64 /* object files kept open */

static pthread_mutex_t g_objs_lock = PTHREAD_MUTEX_INITIALIZER; /* the cache below */
static struct obj g_objs[MAX_OBJS];
static uint64_t g_use;

static char *debuginfo_path;

static const Dwfl_Callbacks offline_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;

	if (!dwarf_attr_integrate(die, DW_AT_linkage_name, &a) &&
	    !dwarf_attr_integrate(die, DW_AT_name, &a))
		return NULL;
	return dwarf_formstring(&a);
}

/* The call site of inlined instance @die: its file (in @cu's file table) and line. */
static void call_site(Dwarf_Die *die, Dwarf_Files *files, size_t n_files, struct tfs_src_frame *f)
{
	Dwarf_Attribute a;
	Dwarf_Word v;

	f->file = "";
	f->line = 0;
	if (files && dwarf_attr(die, DW_AT_call_file, &a) && dwarf_formudata(&a, &v) == 0 &&
	    v < n_files) {
		const char *s = dwarf_filesrc(files, v, NULL, NULL);

		if (s)
			f->file = s;
	}
	if (dwarf_attr(die, DW_AT_call_line, &a) && dwarf_formudata(&a, &v) == 0 && v <= UINT32_MAX)
		f->line = (uint32_t)v;
}

static bool is_function(Dwarf_Die *die)
{
	int tag = dwarf_tag(die);

	return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine;
}

/* The innermost function or inlined instance around @die, itself excluded. */
static bool outer_function(Dwarf_Die *die, Dwarf_Die *out)
{
	Dwarf_Die *scopes = NULL;
	int n = dwarf_getscopes_die(die, &scopes);
	bool found = false;

	for (int i = 1; i < n && !found; i++) {
		if (is_function(&scopes[i])) {
			*out = scopes[i];
			found = true;
		}
	}
	free(scopes);
	return found;
}

/* @file made absolute against @cu's compilation directory (in @buf) when that is absolute. */
static const char *absolute(Dwarf_Die *cu, const char *file, char *buf)
{
	Dwarf_Attribute a;
	const char *dir;

	if (!*file || *file == '/' || !dwarf_attr(cu, DW_AT_comp_dir, &a))
		return file;
	dir = dwarf_formstring(&a);
	/* a relative one (a build with -fdebug-prefix-map=DIR=.) gives nothing better */
	if (!dir || *dir != '/' ||
	    (size_t)snprintf(buf, PATH_BYTES, "%s/%s", dir, file) >= PATH_BYTES)
		return file;
	return buf;
}

static int add_ranges(struct cu_index *ix, Dwarf_Die *die)
{
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;

	while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
		if (ix->n_fns == ix->fns_cap) {
			size_t cap = ix->fns_cap ? 2 * ix->fns_cap : 64;
			struct fn_range *v = realloc(ix->fns, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			ix->fns = v;
			ix->fns_cap = cap;
		}
		ix->fns[ix->n_fns++] = (struct fn_range){lo, hi, *die};
	}
	return 0;
}

/* Index the functions among @parent's children, looking into namespaces and types. */
static int index_children(struct cu_index *ix, Dwarf_Die *parent, int depth)
{
	Dwarf_Die child;
	int rc = 0;

	if (depth > 16 || dwarf_child(parent, &child) != 0)
		return 0;
	do {
		switch (dwarf_tag(&child)) {
		case DW_TAG_subprogram:
			rc = add_ranges(ix, &child);
			break;
		case DW_TAG_namespace:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
		case DW_TAG_module:
			rc = index_children(ix, &child, depth + 1);
			break;
		default:
			break;
		}
	} while (rc == 0 && dwarf_siblingof(&child, &child) == 0);
	return rc;
}

static int by_lo(const void *a, const void *b)
{
	const struct fn_range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The index of @cu, built now if need be; NULL when out of memory. */
static struct cu_index *cu_index_of(struct sym_ctx *ctx, Dwarf_Die *cu)
{
	struct cu_index *ix;

	for (size_t i = 0; i < ctx->n_cus; i++)
		if (ctx->cus[i].cu == cu->cu)
			return &ctx->cus[i];
	if (ctx->n_cus == ctx->cus_cap) {
		size_t cap = ctx->cus_cap ? 2 * ctx->cus_cap : 64;
		struct cu_index *v = realloc(ctx->cus, cap * sizeof(*v));

		if (!v)
			return NULL;
		ctx->cus = v;
		ctx->cus_cap = cap;
	}
	ix = &ctx->cus[ctx->n_cus];
	*ix = (struct cu_index){cu->cu, NULL, 0, 0};
	if (index_children(ix, cu, 0) < 0) {
		free(ix->fns);
		return NULL;
	}
	qsort(ix->fns, ix->n_fns, sizeof(*ix->fns), by_lo);
	ctx->n_cus++;
	return ix;
}

/* The function of @cu holding DWARF address @pc, from its index. false: none. */
static bool function_at(struct sym_ctx *ctx, Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die *out)
{
	struct cu_index *ix = cu_index_of(ctx, cu);
	size_t lo = 0, hi;

	if (!ix)
		return false;
	hi = ix->n_fns;
	while (lo < hi) { /* the first range starting after pc */
		size_t mid = lo + (hi - lo) / 2;

		if (ix->fns[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || pc >= ix->fns[lo - 1].hi)
		return false;
	*out = ix->fns[lo - 1].die;
	return true;
}

/*
 * The inlined instances holding @pc inside function @fn, outermost first, after @fn itself
 * in @chain[0]. @return entries of @chain used
 */
static uint32_t inline_chain(Dwarf_Die *fn, Dwarf_Addr pc, Dwarf_Die *chain, uint32_t max)
{
	Dwarf_Die cur = *fn, child;
	uint32_t n = 0;
	bool deeper = true;

	chain[n++] = cur;
	for (int depth = 0; deeper && depth < 256; depth++) {
		deeper = false;
		if (dwarf_child(&cur, &child) != 0)
			break;
		do {
			int tag = dwarf_tag(&child);

			if ((tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block) &&
			    dwarf_haspc(&child, pc) == 1) {
				cur = child;
				deeper = true;
				if (tag == DW_TAG_inlined_subroutine && n < max)
					chain[n++] = child;
				break;
			}
		} while (dwarf_siblingof(&child, &child) == 0);
	}
	return n;
}

/*
 * The source frames of @pc from DWARF, innermost first: the function or inlined instance
 * holding it at the line of @pc, then each function it is inlined into, at the call site.
 * (dwarf_getscopes goes on from an inlined instance to its abstract origin's scopes, so the
 * functions around an instance come from dwarf_getscopes_die.)
 * @return frames, 0 when the module has no DWARF for @pc
 */
static uint32_t from_dwarf(Dwfl_Module *m, Dwarf_Addr pc, struct tfs_src_frame *out,
			   struct sym_ctx *ctx)
{
	struct tfs_src_frame at = {NULL, "", 0};
	Dwarf_Die *cu, *scopes = NULL, fn, chain[MAX_SRC];
	Dwarf_Files *files = NULL;
	size_t n_files = 0;
	Dwarf_Addr bias;
	Dwfl_Line *line;
	uint32_t n = 0;
	int n_scopes, lineno = 0, i;

	cu = dwfl_module_addrdie(m, pc, &bias);
	if (!cu)
		return 0;
	line = dwfl_module_getsrc(m, pc);
	if (line) {
		const char *file = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);

		at.file = file ? file : "";
		at.line = lineno > 0 ? (uint32_t)lineno : 0;
	}
	if (dwarf_getsrcfiles(cu, &files, &n_files) != 0)
		files = NULL;
	if (function_at(ctx, cu, pc - bias, &fn)) {
		uint32_t n_chain = inline_chain(&fn, pc - bias, chain, MAX_SRC);

		for (uint32_t k = n_chain; k-- > 0;) {
			out[n] = at;
			out[n].function = die_name(&chain[k]);
			out[n].file = absolute(cu, at.file, ctx->paths.buf[n]);
			n++;
			if (k > 0)
				call_site(&chain[k], files, n_files, &at);
		}
		return n;
	}
	/* no function by the index (no address ranges on it): ask libdw the slow way */
	n_scopes = dwarf_getscopes(cu, pc - bias, &scopes);
	for (i = 0; i < n_scopes && !is_function(&scopes[i]); i++)
		;
	if (i >= n_scopes) {
		free(scopes);
		return 0;
	}
	fn = scopes[i];
	free(scopes);
	for (;;) {
		out[n] = at;
		out[n].function = die_name(&fn);
		out[n].file = absolute(cu, at.file, ctx->paths.buf[n]);
		n++;
		if (dwarf_tag(&fn) == DW_TAG_subprogram || n == MAX_SRC)
			break;
		call_site(&fn, files, n_files, &at);
		if (!outer_function(&fn, &fn))
			break;
	}
	return n;
}

static void ctx_free(struct sym_ctx *ctx)
{
	if (!ctx)
		return;
	for (size_t i = 0; i < ctx->n_cus; i++)
		free(ctx->cus[i].fns);
	free(ctx->cus);
	free(ctx);
}

static void obj_fini(struct obj *o)
{
	if (o->dwfl)
		dwfl_end(o->dwfl);
	ctx_free(o->ctx);
	free(o->path);
	*o = (struct obj){0};
}

static bool same_file(const struct obj *o, const char *path, const struct stat *st)
{
	return o->path && strcmp(o->path, path) == 0 && o->dev == st->st_dev &&
	       o->ino == st->st_ino && o->size == st->st_size &&
	       o->mtime.tv_sec == st->st_mtim.tv_sec && o->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* Open @path alone in a Dwfl at bias 0 into @o (empty). @return 0 or -ENOMEM */
static int obj_open(struct obj *o, const char *path, const struct stat *st)
{
	o->path = strdup(path);
	o->ctx = calloc(1, sizeof(*o->ctx));
	if (!o->path || !o->ctx) {
		obj_fini(o);
		return -ENOMEM;
	}
	o->dev = st->st_dev;
	o->ino = st->st_ino;
	o->size = st->st_size;
	o->mtime = st->st_mtim;
	o->dwfl = dwfl_begin(&offline_callbacks);
	if (!o->dwfl)
		return 0;
	dwfl_report_begin(o->dwfl);
	o->mod = dwfl_report_elf(o->dwfl, base_name(path), path, -1, 0, false);
	dwfl_report_end(o->dwfl, NULL, NULL);
	return 0;
}

/*
 * At exit: the cache is no leak (LeakSanitizer, valgrind). Touches nothing when nothing
 * was cached: in a traced program (the preloaded library) its frees would be recorded.
 */
__attribute__((destructor)) static void objs_free(void)
{
	pthread_mutex_lock(&g_objs_lock);
	for (struct obj *o = g_objs; o < g_objs + MAX_OBJS; o++)
		if (o->path)
			obj_fini(o);
	pthread_mutex_unlock(&g_objs_lock);
}

/* The cached object of file @path, opened now if need be; NULL when it cannot be. */
static struct obj *obj_get(const char *path)
{
	struct obj *o, *victim = &g_objs[0];
	struct stat st;

	if (path[0] != '/' || stat(path, &st) < 0) /* the vdso, a file gone since */
		return NULL;
	for (o = g_objs; o < g_objs + MAX_OBJS; o++) {
		if (o->path && strcmp(o->path, path) == 0 && !same_file(o, path, &st))
			obj_fini(o); /* rebuilt or replaced since it was read */
		if (same_file(o, path, &st)) {
			o->last_use = ++g_use;
			return o;
		}
		if (victim->path && (!o->path || o->last_use < victim->last_use))
			victim = o;
	}
	obj_fini(victim);
	if (obj_open(victim, path, &st) < 0)
		return NULL;
	victim->last_use = ++g_use;
	return victim;
}

/*
 * The process's object that holds @addr, as libdw picks among the objects of @d (which
 * may overlap: images before and after an exec), and the cached one of its file.
 */
static struct obj *obj_at(Dwfl *d, uint64_t addr, const struct cap_module **in)
{
	Dwfl_Module *pm = d ? dwfl_addrmodule(d, addr) : NULL;
	void **ud;

	*in = NULL;
	if (!pm || !dwfl_module_info(pm, &ud, NULL, NULL, NULL, NULL, NULL, NULL) || !*ud)
		return NULL;
	*in = *ud;
	return obj_get((*in)->path);
}

/* Symbolise one address into @w; @d: the process's objects. @return 0 or -errno */
static int symbolize_one(Dwfl *d, const struct cap_stacks *s, struct tfs_writer *w,
			 uint32_t rank, uint64_t addr, uint64_t *n_named)
{
	const struct cap_module *mod = cap_stacks_module_of(s, addr), *in;
	struct obj *o = obj_at(d, addr - 1, &in);
	struct tfs_src_frame f[MAX_SRC], rev[MAX_SRC];
	Dwfl_Module *m = o ? o->mod : NULL;
	const Dwarf_Addr pc = in ? addr - in->bias - 1 : 0; /* in the file: the call */
	const char *sym = NULL;
	char fallback[300];
	uint32_t n = 0;

	if (m)
		n = from_dwarf(m, pc, f, o->ctx);
	if (m && (n == 0 || !f[n - 1].function))
		sym = dwfl_module_addrname(m, pc);
	if (n == 0) {
		f[0] = (struct tfs_src_frame){sym, "", 0};
		n = 1;
	} else if (!f[n - 1].function) {
		f[n - 1].function = sym;
	}
	if (!f[n - 1].function) {
		if (mod)
			snprintf(fallback, sizeof(fallback), "%.200s+0x%" PRIx64,
				 base_name(mod->path), addr - mod->bias);
		else
			snprintf(fallback, sizeof(fallback), "0x%" PRIx64, addr);
		f[n - 1].function = fallback;
	} else {
		(*n_named)++;
	}
	for (uint32_t i = 0; i < n; i++) {
		rev[i] = f[n - 1 - i];
		if (!rev[i].function)
			rev[i].function = "?"; /* an inlined instance without a name */
	}
	return tfs_writer_add_symbol(w, rank, addr, rev, n);
}

int cap_stacks_symbolize(const struct cap_stacks *s, struct tfs_writer *w, uint32_t rank,
			 uint64_t *n_named)
{
	Dwfl *d = dwfl_begin(&offline_callbacks);
	int rc = 0;

	*n_named = 0;
	/* only which object holds an address: their debug information is read through the
	   cache, once */
	if (d) {
		dwfl_report_begin(d);
		/* latest first: where an exec'd image's objects overlap its predecessor's, the
		   later image (the program that was asked for, usually) wins */
		for (uint32_t i = cap_stacks_n_modules(s); i-- > 0;) {
			const struct cap_module *mod = cap_stacks_module(s, i);
			Dwfl_Module *pm;
			void **ud;

			/* the vdso and other objects without a file cannot be read */
			if (mod->path[0] != '/')
				continue;
			pm = dwfl_report_elf(d, base_name(mod->path), mod->path, -1, mod->bias,
					     false);
			if (pm && dwfl_module_info(pm, &ud, NULL, NULL, NULL, NULL, NULL, NULL))
				*ud = (void *)mod;
		}
		dwfl_report_end(d, NULL, NULL);
	}
	pthread_mutex_lock(&g_objs_lock);
	for (uint64_t i = 0; i < cap_stacks_n_addrs(s) && rc == 0; i++)
		rc = symbolize_one(d, s, w, rank, cap_stacks_addr(s, i), n_named);
	pthread_mutex_unlock(&g_objs_lock);
	dwfl_end(d);
	return rc;
}
