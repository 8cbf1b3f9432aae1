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
 */
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfs/writer.h"
#include "stacks_i.h"

#define MAX_SRC 64	/* source frames of one address (tfs_writer_add_symbol's limit) */
#define PATH_BYTES 1024 /* an absolute source path; longer ones stay as DWARF has them */

/* Room for the absolute source paths of one address's frames. */
struct paths {
	char buf[MAX_SRC][PATH_BYTES];
};

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

/*
 * The source frames of @pc from DWARF, innermost first: the function or inlined instance
 * holding it at the line of @pc, then each function it is inlined into, at the call site.
 * (dwarf_getscopes goes on from an inlined instance to its abstract origin's scopes, so the
 * functions around an instance come from dwarf_getscopes_die.)
 * @return frames, 0 when the module has no DWARF for @pc
 */
static uint32_t from_dwarf(Dwfl_Module *m, Dwarf_Addr pc, struct tfs_src_frame *out,
			   struct paths *paths)
{
	struct tfs_src_frame at = {NULL, "", 0};
	Dwarf_Die *cu, *scopes = NULL, fn;
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
	n_scopes = dwarf_getscopes(cu, pc - bias, &scopes);
	for (i = 0; i < n_scopes && !is_function(&scopes[i]); i++)
		;
	if (i >= n_scopes) {
		free(scopes);
		return 0;
	}
	fn = scopes[i];
	free(scopes);
	if (dwarf_getsrcfiles(cu, &files, &n_files) != 0)
		files = NULL;
	for (;;) {
		out[n] = at;
		out[n].function = die_name(&fn);
		out[n].file = absolute(cu, at.file, paths->buf[n]);
		n++;
		if (dwarf_tag(&fn) == DW_TAG_subprogram || n == MAX_SRC)
			break;
		call_site(&fn, files, n_files, &at);
		if (!outer_function(&fn, &fn))
			break;
	}
	return n;
}

/* Symbolise one address into @w. @return 0 or -errno */
static int symbolize_one(Dwfl *d, const struct cap_stacks *s, struct tfs_writer *w, uint32_t rank,
			 uint64_t addr, struct paths *paths, uint64_t *n_named)
{
	const struct cap_module *mod = cap_stacks_module_of(s, addr);
	struct tfs_src_frame f[MAX_SRC], rev[MAX_SRC];
	Dwfl_Module *m = d ? dwfl_addrmodule(d, addr - 1) : NULL;
	const char *sym = NULL;
	char fallback[300];
	uint32_t n = 0;

	if (m)
		n = from_dwarf(m, addr - 1, f, paths);
	if (m && (n == 0 || !f[n - 1].function))
		sym = dwfl_module_addrname(m, addr - 1);
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
	struct paths *paths = malloc(sizeof(*paths));
	Dwfl *d;
	int rc = 0;

	*n_named = 0;
	if (!paths)
		return -ENOMEM;
	d = dwfl_begin(&offline_callbacks);
	if (d) {
		dwfl_report_begin(d);
		for (uint32_t i = 0; i < cap_stacks_n_modules(s); i++) {
			const struct cap_module *mod = cap_stacks_module(s, i);

			/* the vdso and other objects without a file cannot be read */
			if (mod->path[0] == '/')
				dwfl_report_elf(d, base_name(mod->path), mod->path, -1, mod->bias,
						false);
		}
		dwfl_report_end(d, NULL, NULL);
	}
	for (uint64_t i = 0; i < cap_stacks_n_addrs(s) && rc == 0; i++)
		rc = symbolize_one(d, s, w, rank, cap_stacks_addr(s, i), paths, n_named);
	dwfl_end(d);
	free(paths);
	return rc;
}
