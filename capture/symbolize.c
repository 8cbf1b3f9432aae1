/*
 * Symbolisation of the code addresses of a traced process's backtraces, after the process
 * is gone. Each distinct address is looked up once at addr - 1 (frames are return
 * addresses: the call instruction holds the line) in the object file that the process had
 * mapped there: DWARF (libdw) gives the function, file and line and the chain of inlined
 * functions (their call sites give the outer frames' lines); an address DWARF does not name
 * gets its ELF symbol's name from the file's sorted symbol table (symtab.c); nothing at all
 * gives "<object file name>+0x<return address in the file>" (the address addr2line and gdb
 * take for that file, plus one), so two different unnamed frames never print alike. C++ and
 * Rust names are demangled (demangle.c): DWARF's linkage name, else the symbol, as c++filt
 * prints it, with its scope and parameter types; a C function keeps its plain name. A C++
 * function DWARF gives no linkage name and internal linkage (a static one, inlined or not)
 * is named with the namespaces and classes around its declaration, without parameter types
 * ("qa::risky"); an extern "C" one keeps its plain name, its symbol's. This file does not intern backtraces (stacks.c).
 *
 * The work is per object file, not per process: a file is opened once per tracing process
 * (a Dwfl holding that file alone at bias 0, the index of its functions, its symbol table),
 * and each of its addresses is looked up once, its result kept in the file's cache
 * (symcache.c) in the file's own addresses. A file is known by its identity (device, inode,
 * size, mtime), whatever path maps it, so a rebuilt program is read again while the
 * processes of a make that run one cc1 each share its lookups. Reading libc's separate
 * debug file costs some 40 ms of CPU (its sections are compressed), sorting cc1's 28,902
 * dynamic symbols and naming 6,000 addresses with them 11 ms.
 *
 * TFS_SYMBOL_STATS=1 prints to stderr each file opened and, per process (named by its first
 * object: the program), the addresses symbolised, how many came from the cache and the
 * CPU time taken (for benchmarks and tests).
 * TFS_SYMBOL_CACHE=0 looks every address up again in each process and names symbols with
 * libdwfl's own search (dwfl_module_addrname), only where DWARF gives no name at all: the
 * cost before the cache, for benchmarks.
 *
 * With a directory set (cap_symbols_keep_in(): `tracefs record` sets one), a file's results
 * also outlive the recording (symdisk.c): read back when the file is first met, written
 * when a pass found new ones. They are keyed by the rules (SYM_RULES, to be changed
 * whenever a lookup would give other frames, the tracefs version, whether C++ names
 * demangle), the file's identity, ctime and build id, and those of the debug file under
 * /usr/lib/debug/.build-id/ its build id names. Results are kept only when DWARF came from
 * the file or from that debug file, or from none while no debuginfod server is set: a
 * debug file found by .gnu_debuglink or debuginfod is read again each time.
 */
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tfs/writer.h"
#include "spool_i.h"
#include "stacks_i.h"
#include "symbols_i.h"

#define MAX_SRC 64	/* source frames of one address (tfs_writer_add_symbol's limit) */
#define SYM_RULES 2	/* the lookup rules' revision, in the identity of files kept on disk */
#define PATH_BYTES 1024 /* an absolute source path; longer ones stay as DWARF has them */
#define NAME_BYTES 512	/* a function's name with its scopes; longer ones stay unscoped */

/* Room for the absolute source paths and the scoped names of one address's frames. */
struct paths {
	char buf[MAX_SRC][PATH_BYTES];
	char name[MAX_SRC][NAME_BYTES];
};

/* A function declared in a namespace or class without a linkage name, and that scope. */
struct scoped {
	Dwarf_Off off; /* the DIE holding its DW_AT_name */
	size_t prefix; /* in cu_index.pool: "ns::Class" */
};

/* A function's code range in a compilation unit (DWARF addresses, before the bias). */
struct fn_range {
	Dwarf_Addr lo, hi;
	Dwarf_Die die; /* its DW_TAG_subprogram */
};

/*
 * The functions of one compilation unit by address, built on its first lookup: finding an
 * address's function is then a binary search, where dwarf_getscopes walks the unit's whole
 * tree on every call (a third of a millisecond per address in libpython). The same walk
 * notes the scope of each function declared in a namespace or class that has no linkage
 * name (a static or wholly inlined C++ function): libdw has no link from a DIE to its
 * parent, and its name alone ("risky") would not say which function it is ("qa::risky").
 */
struct cu_index {
	const void *cu; /* the unit's Dwarf_Die .cu, its identity while the Dwfl lives */
	struct fn_range *fns;
	size_t n_fns, fns_cap;
	struct scoped *scoped; /* by DIE offset, the walk's order */
	size_t n_scoped, scoped_cap;
	char *pool; /* the scopes' names, each NUL-terminated */
	size_t pool_len, pool_cap;
};

struct sym_ctx {
	struct paths paths;
	struct cu_index *cus;
	size_t n_cus, cus_cap;
};

/* One object file, open for lookups, and what was found in it. */
struct obj {
	char *path; /* as first opened (the statistics) */
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	uint64_t last_use; /* g_use when last looked up: the least recent is evicted */
	uint64_t pass;	   /* g_pass when last looked up: never evicted during that pass */
	Dwfl *dwfl;	   /* NULL: the file could not be read; it gets fallback names */
	Dwfl_Module *mod;
	struct sym_ctx *ctx;
	struct cap_symtab *symtab; /* built when DWARF first leaves a name to it */
	bool symtab_done;
	struct cap_symcache *cache; /* results by address in the file, names demangled */
	char *disk_id;		    /* its identity on disk (symdisk.c), NULL: not kept there */
	char *dbg_path;		    /* the debug file its identity names ("": none) */
	size_t disk_n;		    /* entries of the cache the disk holds */
};

#define MAX_OBJS 64 /* object files kept open, unless one process maps more */

static pthread_mutex_t g_objs_lock = PTHREAD_MUTEX_INITIALIZER; /* everything below */
static struct obj **g_objs;
static size_t g_n_objs, g_objs_cap;
static uint64_t g_use, g_pass;

static char *debuginfo_path;
static char *g_disk_dir; /* cap_symbols_keep_in() */
static bool g_trimmed;	 /* g_disk_dir was trimmed once by this process */

static const Dwfl_Callbacks offline_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

/* One call of cap_stacks_symbolize. */
struct pass {
	const struct cap_stacks *s;
	struct obj **objs; /* by module index, looked up on first use */
	bool *looked;	   /* by module index: objs[i] was looked up */
	bool cached;	   /* results come from and go to the files' caches */
	uint64_t n_hits, n_opened;
};

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* The linkage (mangled) name of @die, else its plain name; *@plain: it was the plain one. */
static const char *die_name(Dwarf_Die *die, bool *plain)
{
	Dwarf_Attribute a;

	*plain = false;
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a))
		return dwarf_formstring(&a);
	*plain = true;
	return dwarf_attr_integrate(die, DW_AT_name, &a) ? dwarf_formstring(&a) : NULL;
}

/* Whether @cu's functions have scoped, mangled names (C++, Rust). */
static bool mangling_language(Dwarf_Die *cu)
{
	switch (dwarf_srclang(cu)) {
	case DW_LANG_C_plus_plus:
	case DW_LANG_C_plus_plus_03:
	case DW_LANG_C_plus_plus_11:
	case DW_LANG_C_plus_plus_14:
	case DW_LANG_Rust:
		return true;
	default:
		return false;
	}
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

static int grow(void **v, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap ? *cap : 64;
	void *n;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	n = realloc(*v, c * size);
	if (!n)
		return -ENOMEM;
	*v = n;
	*cap = c;
	return 0;
}

static int add_ranges(struct cu_index *ix, Dwarf_Die *die)
{
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;

	while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
		if (grow((void **)&ix->fns, &ix->fns_cap, ix->n_fns + 1, sizeof(*ix->fns)) < 0)
			return -ENOMEM;
		ix->fns[ix->n_fns++] = (struct fn_range){lo, hi, *die};
	}
	return 0;
}

/* The scope a walk is in: its name, and where the pool holds it (SIZE_MAX: not yet). */
struct scope {
	const char *name; /* NULL: unknown (inside a function or an unnamed type) */
	size_t pooled;
};

/*
 * Note that function @die, declared in @sc, has no linkage name and internal linkage (an
 * external one without a linkage name is extern "C": its name is its symbol's, unscoped).
 */
static int note_scope(struct cu_index *ix, Dwarf_Die *die, struct scope *sc)
{
	Dwarf_Attribute a;
	size_t len;

	if (!sc->name || !*sc->name || dwarf_attr(die, DW_AT_linkage_name, &a) ||
	    !dwarf_attr(die, DW_AT_name, &a) || dwarf_hasattr(die, DW_AT_external))
		return 0;
	if (sc->pooled == SIZE_MAX) {
		len = strlen(sc->name) + 1;
		if (grow((void **)&ix->pool, &ix->pool_cap, ix->pool_len + len, 1) < 0)
			return -ENOMEM;
		memcpy(ix->pool + ix->pool_len, sc->name, len);
		sc->pooled = ix->pool_len;
		ix->pool_len += len;
	}
	if (grow((void **)&ix->scoped, &ix->scoped_cap, ix->n_scoped + 1, sizeof(*ix->scoped)) < 0)
		return -ENOMEM;
	ix->scoped[ix->n_scoped++] = (struct scoped){dwarf_dieoffset(die), sc->pooled};
	return 0;
}

/*
 * The scope of @child of a walk in @outer, into @buf: its name appended to the outer one's,
 * as c++filt prints them ("(anonymous namespace)" for a namespace without a name).
 */
static struct scope inner_scope(Dwarf_Die *child, const struct scope *outer, char *buf)
{
	struct scope sc = {NULL, SIZE_MAX};
	const char *name = dwarf_diename(child);
	int len;

	if (!name && dwarf_tag(child) == DW_TAG_namespace)
		name = "(anonymous namespace)";
	if (!outer->name || !name)
		return sc;
	len = *outer->name ? snprintf(buf, NAME_BYTES, "%s::%s", outer->name, name)
			   : snprintf(buf, NAME_BYTES, "%s", name);
	if (len > 0 && len < NAME_BYTES)
		sc.name = buf;
	return sc;
}

/*
 * Index the functions among @parent's children, looking into namespaces and types, and
 * into functions and their blocks for local types (a lambda's operator() is a member of a
 * class inside the function that defines it; dwarf_getscopes does not find it). @sc: the
 * scope of @parent's children.
 */
static int index_children(struct cu_index *ix, Dwarf_Die *parent, int depth, struct scope *sc)
{
	struct scope none = {NULL, SIZE_MAX}, inner;
	char buf[NAME_BYTES];
	Dwarf_Die child;
	int rc = 0;

	if (depth > 16 || dwarf_child(parent, &child) != 0)
		return 0;
	do {
		switch (dwarf_tag(&child)) {
		case DW_TAG_subprogram:
			rc = add_ranges(ix, &child);
			if (rc == 0)
				rc = note_scope(ix, &child, sc);
			/* a local type's scope would need the function's parameter types */
			if (rc == 0 && dwarf_haschildren(&child) > 0)
				rc = index_children(ix, &child, depth + 1, &none);
			break;
		case DW_TAG_lexical_block:
			rc = index_children(ix, &child, depth + 1, &none);
			break;
		case DW_TAG_namespace:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
		case DW_TAG_module:
			inner = inner_scope(&child, sc, buf);
			rc = index_children(ix, &child, depth + 1, &inner);
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
	if (grow((void **)&ctx->cus, &ctx->cus_cap, ctx->n_cus + 1, sizeof(*ctx->cus)) < 0)
		return NULL;
	ix = &ctx->cus[ctx->n_cus];
	*ix = (struct cu_index){.cu = cu->cu};
	if (index_children(ix, cu, 0, &(struct scope){"", SIZE_MAX}) < 0) {
		free(ix->fns);
		free(ix->scoped);
		free(ix->pool);
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
 * The name of function or inlined instance @die (die_name()), with its namespaces and
 * classes when it has no linkage name in a language that has scopes (@scopes): "qa::risky",
 * in @buf, from the index of the unit declaring it. The plain name when they are unknown.
 */
static const char *frame_name(struct sym_ctx *ctx, Dwarf_Die *die, bool scopes, char *buf,
			      bool *plain)
{
	const char *name = die_name(die, plain);
	Dwarf_Die cur = *die, cu;
	Dwarf_Attribute a;
	struct cu_index *ix;
	Dwarf_Off off;
	size_t lo = 0, hi;
	int len;

	if (!*plain || !name || !scopes)
		return name;
	/* the DIE holding the name: an instance's origin, a definition's declaration */
	for (int hop = 0; !dwarf_hasattr(&cur, DW_AT_name); hop++) {
		if (hop == 8 ||
		    !(dwarf_attr(&cur, DW_AT_abstract_origin, &a) ||
		      dwarf_attr(&cur, DW_AT_specification, &a)) ||
		    !dwarf_formref_die(&a, &cur))
			return name;
	}
	if (!dwarf_diecu(&cur, &cu, NULL, NULL) || !(ix = cu_index_of(ctx, &cu)))
		return name;
	off = dwarf_dieoffset(&cur);
	hi = ix->n_scoped;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ix->scoped[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == ix->n_scoped || ix->scoped[lo].off != off)
		return name;
	len = snprintf(buf, NAME_BYTES, "%s::%s", ix->pool + ix->scoped[lo].prefix, name);
	return len > 0 && len < NAME_BYTES ? buf : name;
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
 * functions around an instance come from dwarf_getscopes_die.) *@unscoped: the outermost
 * function has only a plain name in a language whose names have scopes (a lambda's
 * "operator()"): its ELF symbol names it better.
 * @return frames, 0 when the module has no DWARF for @pc
 */
static uint32_t from_dwarf(Dwfl_Module *m, Dwarf_Addr pc, struct tfs_src_frame *out,
			   struct sym_ctx *ctx, bool *unscoped)
{
	struct tfs_src_frame at = {NULL, "", 0};
	Dwarf_Die *cu, *scopes = NULL, fn, chain[MAX_SRC];
	Dwarf_Files *files = NULL;
	size_t n_files = 0;
	Dwarf_Addr bias;
	Dwfl_Line *line;
	uint32_t n = 0;
	int n_scopes, lineno = 0, i;
	bool plain = false, scoped;

	*unscoped = false;
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
	scoped = mangling_language(cu);
	if (function_at(ctx, cu, pc - bias, &fn)) {
		uint32_t n_chain = inline_chain(&fn, pc - bias, chain, MAX_SRC);

		for (uint32_t k = n_chain; k-- > 0;) {
			out[n] = at;
			out[n].function =
			    frame_name(ctx, &chain[k], scoped, ctx->paths.name[n], &plain);
			out[n].file = absolute(cu, at.file, ctx->paths.buf[n]);
			n++;
			if (k > 0)
				call_site(&chain[k], files, n_files, &at);
		}
		*unscoped = plain && scoped;
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
		out[n].function = frame_name(ctx, &fn, scoped, ctx->paths.name[n], &plain);
		out[n].file = absolute(cu, at.file, ctx->paths.buf[n]);
		n++;
		if (dwarf_tag(&fn) == DW_TAG_subprogram || n == MAX_SRC)
			break;
		call_site(&fn, files, n_files, &at);
		if (!outer_function(&fn, &fn))
			break;
	}
	*unscoped = plain && scoped;
	return n;
}

static void ctx_free(struct sym_ctx *ctx)
{
	if (!ctx)
		return;
	for (size_t i = 0; i < ctx->n_cus; i++) {
		free(ctx->cus[i].fns);
		free(ctx->cus[i].scoped);
		free(ctx->cus[i].pool);
	}
	free(ctx->cus);
	free(ctx);
}

static void obj_free(struct obj *o)
{
	if (!o)
		return;
	if (o->dwfl)
		dwfl_end(o->dwfl);
	ctx_free(o->ctx);
	cap_symtab_free(o->symtab);
	cap_symcache_free(o->cache);
	free(o->disk_id);
	free(o->dbg_path);
	free(o->path);
	free(o);
}

static bool same_file(const struct obj *o, const struct stat *st)
{
	return o->dev == st->st_dev && o->ino == st->st_ino && o->size == st->st_size &&
	       o->mtime.tv_sec == st->st_mtim.tv_sec && o->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* @path (the file @st) alone in a Dwfl at bias 0. @return a new object, NULL: no memory */
static struct obj *obj_new(const char *path, const struct stat *st)
{
	struct obj *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->path = strdup(path);
	o->ctx = calloc(1, sizeof(*o->ctx));
	if (!o->path || !o->ctx || cap_symcache_new(&o->cache) < 0) {
		obj_free(o);
		return NULL;
	}
	o->dev = st->st_dev;
	o->ino = st->st_ino;
	o->size = st->st_size;
	o->mtime = st->st_mtim;
	o->dwfl = dwfl_begin(&offline_callbacks);
	if (!o->dwfl)
		return o;
	dwfl_report_begin(o->dwfl);
	o->mod = dwfl_report_elf(o->dwfl, base_name(path), path, -1, 0, false);
	dwfl_report_end(o->dwfl, NULL, NULL);
	return o;
}

/*
 * At exit: the cache is no leak (LeakSanitizer, valgrind). Touches nothing when nothing
 * was cached: in a traced program (the preloaded library) its frees would be recorded.
 */
__attribute__((destructor)) static void objs_free(void)
{
	if (!g_objs)
		return;
	pthread_mutex_lock(&g_objs_lock);
	for (size_t i = 0; i < g_n_objs; i++)
		obj_free(g_objs[i]);
	free(g_objs);
	g_objs = NULL;
	g_n_objs = g_objs_cap = 0;
	pthread_mutex_unlock(&g_objs_lock);
}

/* Make room for one more object: evict the least recently used one not used by this pass. */
static int objs_make_room(void)
{
	size_t victim = g_n_objs;

	for (size_t i = 0; g_n_objs >= MAX_OBJS && i < g_n_objs; i++)
		if (g_objs[i]->pass != g_pass &&
		    (victim == g_n_objs || g_objs[i]->last_use < g_objs[victim]->last_use))
			victim = i;
	if (victim < g_n_objs) {
		obj_free(g_objs[victim]);
		g_objs[victim] = g_objs[--g_n_objs];
	}
	if (g_n_objs == g_objs_cap) {
		size_t cap = g_objs_cap ? 2 * g_objs_cap : MAX_OBJS;
		struct obj **v = realloc(g_objs, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		g_objs = v;
		g_objs_cap = cap;
	}
	return 0;
}

/* "dev ino size mtime ctime" of @st into @buf, "-" when @ok is false. */
static void stamp(char *buf, size_t size, bool ok, const struct stat *st)
{
	if (!ok)
		snprintf(buf, size, "-");
	else /* ctime too: a file rewritten in place with its size and mtime kept */
		snprintf(buf, size, "%ju %ju %jd %jd.%09ld %jd.%09ld", (uintmax_t)st->st_dev,
			 (uintmax_t)st->st_ino, (intmax_t)st->st_size, (intmax_t)st->st_mtim.tv_sec,
			 st->st_mtim.tv_nsec, (intmax_t)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
}

/* Whether C++ names demangle here (demangle.c may find no libstdc++): in the identity. */
static bool can_demangle(void)
{
	static int known; /* 0 unknown, 1 no, 2 yes; under g_objs_lock */

	if (!known) {
		char *d = cap_demangle_new("_Z1fv");

		known = d ? 2 : 1;
		free(d);
	}
	return known == 2;
}

/*
 * @o's identity on disk (symdisk.c): what a lookup's answer depends on, the rules
 * (SYM_RULES, the tracefs version, whether names demangle), the file (path, identity,
 * ctime) and its build id, and the debug file under /usr/lib/debug/.build-id it names
 * (whether there is one, and its identity), whose path goes to o->dbg_path. NULL when the
 * file could not be read, out of memory or the path is too long.
 */
static char *disk_id(struct obj *o, const struct stat *st)
{
	char own[160], dbg[160], bid[132] = "-", path[PATH_BYTES] = "", *id;
	const unsigned char *bits;
	GElf_Addr vaddr;
	struct stat dst;
	int n = o->mod ? dwfl_module_build_id(o->mod, &bits, &vaddr) : -1;
	size_t len;

	if (!o->mod)
		return NULL; /* a failure of the moment would be kept */
	if (n >= 2 && n <= 64) {
		int at = snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%02x/", bits[0]);

		for (int i = 1; i < n; i++)
			at += snprintf(path + at, sizeof(path) - (size_t)at, "%02x", bits[i]);
		snprintf(path + at, sizeof(path) - (size_t)at, ".debug");
		for (int i = 0; i < n; i++)
			snprintf(bid + 2 * i, sizeof(bid) - 2 * (size_t)i, "%02x", bits[i]);
	}
	stamp(own, sizeof(own), true, st);
	stamp(dbg, sizeof(dbg), path[0] && stat(path, &dst) == 0, &dst);
	o->dbg_path = strdup(path);
	len = strlen(o->path) + strlen(own) + strlen(dbg) + strlen(bid) + 128;
	id = o->dbg_path ? malloc(len) : NULL;
	if (id)
		snprintf(id, len, "rules %d tracefs %s demangle %d\n%s\n%s\nbuild-id %s\ndebug %s\n",
			 SYM_RULES, tfs_version(), can_demangle(), o->path, own, bid, dbg);
	return id;
}

/* Why cap_symdisk_load() returned @n < 0, for TFS_SYMBOL_STATS. */
static const char *disk_why(long n)
{
	switch (n) {
	case -ENOENT:
		return "none";
	case -TFS_ECORRUPT:
		return "not read: damaged";
	case -ESTALE:
		return "not read: of another identity";
	case -EPERM:
		return "not read: not a regular file of the user's that others cannot write";
	default:
		return n < 0 ? strerror((int)-n) : "";
	}
}

/* Read @o's results kept on disk into its cache. */
static void disk_load(struct obj *o, const struct stat *st)
{
	long n;

	o->disk_id = disk_id(o, st);
	if (!o->disk_id)
		return;
	n = cap_symdisk_load(g_disk_dir, o->disk_id, o->cache);
	o->disk_n = cap_symcache_n(o->cache);
	if (getenv("TFS_SYMBOL_STATS"))
		fprintf(stderr, "tracefs: symbols: %s: %ld kept on disk%s%s%s\n", o->path,
			n < 0 ? 0 : n, n >= 0 ? "" : " (", disk_why(n), n >= 0 ? "" : ")");
	if (n < 0 && n != -ENOENT && n != -TFS_ECORRUPT && n != -ESTALE && n != -EPERM) {
		/* not read for want of memory or an I/O error: its file stays as it is */
		free(o->disk_id);
		o->disk_id = NULL;
	}
}

/*
 * Whether @o's results may be kept: its DWARF came from the file itself or from the debug
 * file its identity names, or it has none and no debuginfod server could bring one later.
 */
static bool keepable(const struct obj *o)
{
	const char *debug = NULL, *urls = getenv("DEBUGINFOD_URLS");

	dwfl_module_info(o->mod, NULL, NULL, NULL, NULL, NULL, NULL, &debug);
	if (debug)
		return !strcmp(debug, o->dbg_path) || !strcmp(debug, o->path);
	return !urls || !urls[0];
}

void cap_symbols_keep_in(const char *dir)
{
	pthread_mutex_lock(&g_objs_lock);
	free(g_disk_dir);
	g_disk_dir = dir && dir[0] ? strdup(dir) : NULL; /* no memory: not kept */
	pthread_mutex_unlock(&g_objs_lock);
}

/* The cached object of file @path, opened now if need be; NULL when it cannot be. */
static struct obj *obj_get(struct pass *p, const char *path)
{
	struct obj *o = NULL;
	struct stat st;

	if (path[0] != '/' || stat(path, &st) < 0) /* the vdso, a file gone since */
		return NULL;
	for (size_t i = 0; i < g_n_objs && !o; i++)
		if (same_file(g_objs[i], &st))
			o = g_objs[i];
	if (!o) {
		if (objs_make_room() < 0)
			return NULL;
		o = obj_new(path, &st);
		if (!o)
			return NULL;
		g_objs[g_n_objs++] = o;
		p->n_opened++;
		if (getenv("TFS_SYMBOL_STATS"))
			fprintf(stderr, "tracefs: symbols: open %s\n", path);
		if (g_disk_dir && p->cached)
			disk_load(o, &st);
	}
	o->last_use = ++g_use;
	o->pass = g_pass;
	return o;
}

/* The load frame @key was recorded in (cap_stacks_module_index), and its file's object. */
static const struct cap_module *module_at(struct pass *p, uint64_t key, struct obj **o)
{
	uint32_t i;

	*o = NULL;
	if (!cap_stacks_module_index(p->s, key, &i))
		return NULL;
	if (!p->looked[i]) {
		p->objs[i] = obj_get(p, cap_stacks_module(p->s, i)->path);
		p->looked[i] = true;
	}
	*o = p->objs[i];
	return cap_stacks_module(p->s, i);
}

/* The ELF symbol naming @pc in @o, or NULL. */
static const char *symbol_name(struct obj *o, uint64_t pc, bool fast)
{
	if (!fast)
		return dwfl_module_addrname(o->mod, pc);
	if (!o->symtab_done) {
		o->symtab_done = true;
		if (cap_symtab_new(o->mod, &o->symtab) < 0)
			o->symtab = NULL; /* out of memory: unnamed, like a stripped file */
	}
	return o->symtab ? cap_symtab_lookup(o->symtab, pc) : NULL;
}

/*
 * Look address @pc of @o up: its source frames, outermost first, into @out, function names
 * demangled; a NULL function in out[0] when nothing names the function.
 * @return frames (0: nothing known), or -ENOMEM
 */
static int look_up(struct obj *o, uint64_t pc, bool fast, struct tfs_src_frame *out)
{
	struct tfs_src_frame f[MAX_SRC];
	bool unscoped;
	uint32_t n = 0;

	if (!o->mod)
		return 0;
	n = from_dwarf(o->mod, pc, f, o->ctx, &unscoped);
	if (n == 0 || !f[n - 1].function || (unscoped && fast)) {
		const char *sym = symbol_name(o, pc, fast);

		if (n == 0 && sym)
			f[n++] = (struct tfs_src_frame){sym, "", 0};
		else if (n > 0 && (!f[n - 1].function || (sym && sym[0] == '_' && sym[1] == 'Z')))
			f[n - 1].function = sym;
	}
	for (uint32_t i = 0; i < n; i++) {
		out[i] = f[n - 1 - i];
		if (!out[i].function && i > 0)
			out[i].function = "?"; /* an inlined instance without a name */
		if (out[i].function) {
			out[i].function = cap_symcache_demangle(o->cache, out[i].function);
			if (!out[i].function)
				return -ENOMEM;
		}
	}
	return (int)n;
}

/*
 * Symbolise one frame into @w, @key its tagged value (spool_i.h), under which it is stored.
 * @return 0 or -errno
 */
static int symbolize_one(struct pass *p, struct tfs_writer *w, uint32_t rank, uint64_t key,
			 uint64_t *n_named)
{
	const uint64_t addr = key & SPOOL_FRAME_ADDR_MASK;
	struct tfs_src_frame mem[MAX_SRC], one;
	const struct tfs_src_frame *f = mem;
	struct obj *o;
	const struct cap_module *mod = module_at(p, key - 1, &o);
	const uint64_t pc = mod ? addr - mod->bias - 1 : 0; /* in the file: the call */
	char fallback[300];
	uint32_t n = 0;
	int rc;

	if (o && p->cached && cap_symcache_get(o->cache, pc, &f, &n)) {
		p->n_hits++;
	} else if (o) {
		rc = look_up(o, pc, p->cached, mem);
		if (rc < 0)
			return rc;
		n = (uint32_t)rc;
		if (p->cached && cap_symcache_put(o->cache, pc, mem, n, &f) < 0)
			return -ENOMEM;
	}
	if (n > 0 && f[0].function) {
		(*n_named)++;
		return tfs_writer_add_symbol(w, rank, key, f, n);
	}
	if (mod)
		snprintf(fallback, sizeof(fallback), "%.200s+0x%" PRIx64, base_name(mod->path),
			 addr - mod->bias);
	else
		snprintf(fallback, sizeof(fallback), "0x%" PRIx64, addr);
	if (n == 0) {
		one = (struct tfs_src_frame){fallback, "", 0};
		return tfs_writer_add_symbol(w, rank, key, &one, 1);
	}
	if (f != mem)
		memcpy(mem, f, n * sizeof(*f));
	mem[0].function = fallback;
	return tfs_writer_add_symbol(w, rank, key, mem, n);
}

/* Write the caches of this pass's files that gained results to disk (failures: not kept). */
static void disk_save_new(struct pass *p)
{
	for (uint32_t i = 0; i < cap_stacks_n_modules(p->s); i++) {
		struct obj *o = p->objs[i];

		if (!o || !o->disk_id || cap_symcache_n(o->cache) == o->disk_n)
			continue;
		if (!keepable(o)) {
			free(o->disk_id); /* names from elsewhere: looked up each time */
			o->disk_id = NULL;
			continue;
		}
		if (cap_symdisk_save(g_disk_dir, o->disk_id, o->cache, !g_trimmed) == 0)
			o->disk_n = cap_symcache_n(o->cache);
		g_trimmed = true; /* a directory read per recording at most */
	}
}

/* CPU time of the calling thread: what symbolisation costs, whatever else runs. */
static uint64_t cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int cap_stacks_symbolize(const struct cap_stacks *s, struct tfs_writer *w, uint32_t rank,
			 uint64_t *n_named)
{
	const char *cache_env = getenv("TFS_SYMBOL_CACHE");
	uint32_t n_mods = cap_stacks_n_modules(s);
	struct pass p = {.s = s, .cached = !cache_env || strcmp(cache_env, "0") != 0};
	uint64_t t0 = cpu_ns();
	int rc = 0;

	*n_named = 0;
	p.objs = calloc(n_mods + 1, sizeof(*p.objs));
	p.looked = calloc(n_mods + 1, sizeof(*p.looked));
	if (!p.objs || !p.looked) {
		rc = -ENOMEM;
		goto out_free;
	}
	pthread_mutex_lock(&g_objs_lock);
	g_pass++;
	for (uint64_t i = 0; i < cap_stacks_n_addrs(s) && rc == 0; i++)
		rc = symbolize_one(&p, w, rank, cap_stacks_addr(s, i), n_named);
	if (rc == 0 && g_disk_dir)
		disk_save_new(&p);
	pthread_mutex_unlock(&g_objs_lock);
	if (getenv("TFS_SYMBOL_STATS"))
		fprintf(stderr,
			"tracefs: symbols: %s: %" PRIu64 " addresses (%" PRIu64 " named, %" PRIu64
			" from the cache), %" PRIu64 " files opened, %.3f ms CPU\n",
			n_mods ? base_name(cap_stacks_module(s, 0)->path) : "?",
			cap_stacks_n_addrs(s), *n_named, p.n_hits, p.n_opened,
			(double)(cpu_ns() - t0) / 1e6);
out_free:
	free(p.objs);
	free(p.looked);
	return rc;
}
