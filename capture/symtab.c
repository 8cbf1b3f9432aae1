/*
 * A module's function symbols sorted by start address, so that naming an address is a
 * binary search. libdwfl's dwfl_module_addrname searches the whole symbol table on every
 * call: 28,902 dynamic symbols of gcc's cc1 made its 5,511 addresses cost 13 s. The
 * symbols are read through libdwfl (dwfl_module_getsym_info), so the table is the one it
 * would search: the file's .symtab, a separate debug file's (libc6-dbg gives libc's static
 * functions their names), .dynsym of a stripped file, and the .gnu_debugdata table of a
 * "minidebuginfo" file. Only symbols in executable sections count: data labels (_end,
 * __bss_start) never name code. It does not read DWARF (symbolize.c does).
 */
#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>

#include "symbols_i.h"

#define MAX_NESTED 8 /* sized symbols looked at below one that ends before the address */

/* One symbol: the addresses [lo, hi) it names. */
struct fsym {
	uint64_t lo, hi;
	const char *name; /* borrowed from the module's string table */
	uint32_t rank;	  /* preference among symbols at one address: lower is better */
	uint32_t index;	  /* in the symbol table: the last tie-break */
	bool sized;	  /* hi is lo + st_size, not yet bounded by the next symbol */
};

struct cap_symtab {
	struct fsym *v; /* by lo, one per distinct lo */
	size_t n, cap;
};

/* The preference of a symbol among those starting at its address (lower wins). */
static uint32_t rank_of(const GElf_Sym *sym, const char *name)
{
	uint32_t bind = GELF_ST_BIND(sym->st_info), type = GELF_ST_TYPE(sym->st_info);
	uint32_t r = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
	uint32_t under = 0;

	while (name[under] == '_' && under < 15)
		under++;
	r = r << 1 | (type == STT_NOTYPE);
	r = r << 1 | (sym->st_size == 0);
	return r << 4 | under;
}

static int by_lo_then_rank(const void *a, const void *b)
{
	const struct fsym *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/* Whether section @shndx of @elf holds code; *@end: its end in the module's addresses. */
static bool code_section(Elf *elf, GElf_Word shndx, Dwarf_Addr bias, uint64_t *end)
{
	GElf_Shdr mem, *sh;
	Elf_Scn *scn;

	if (!elf || shndx == SHN_UNDEF || (shndx >= SHN_LORESERVE && shndx != SHN_XINDEX))
		return false;
	scn = elf_getscn(elf, shndx);
	sh = scn ? gelf_getshdr(scn, &mem) : NULL;
	if (!sh || !(sh->sh_flags & SHF_EXECINSTR))
		return false;
	*end = sh->sh_addr + sh->sh_size + bias;
	return true;
}

static int push(struct cap_symtab *t, const struct fsym *s)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 256;
		struct fsym *v = realloc(t->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		t->v = v;
		t->cap = cap;
	}
	t->v[t->n++] = *s;
	return 0;
}

/* Read @mod's function symbols into @t, unsorted. @return 0 or -ENOMEM */
static int read_symbols(struct cap_symtab *t, Dwfl_Module *mod)
{
	int n = dwfl_module_getsymtab(mod);

	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		Elf *elf = NULL;
		Dwarf_Addr bias = 0;
		const char *name =
		    dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, &elf, &bias);
		uint32_t type = GELF_ST_TYPE(sym.st_info);
		uint64_t end;

		if (!name || !*name ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE) ||
		    !code_section(elf, shndx, bias, &end) || addr >= end)
			continue;
		/* a zero size reaches the section's end until the next symbol bounds it */
		if (push(t, &(struct fsym){addr, sym.st_size ? addr + sym.st_size : end, name,
					   rank_of(&sym, name), (uint32_t)i, sym.st_size != 0}) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Keep the preferred symbol of each address; bound the unsized ones by the next start. */
static void dedup(struct cap_symtab *t)
{
	size_t k = 0;

	for (size_t i = 0; i < t->n; i++)
		if (k == 0 || t->v[k - 1].lo != t->v[i].lo)
			t->v[k++] = t->v[i];
	t->n = k;
	for (size_t i = 0; i + 1 < t->n; i++)
		if (!t->v[i].sized && t->v[i].hi > t->v[i + 1].lo)
			t->v[i].hi = t->v[i + 1].lo;
}

int cap_symtab_new(Dwfl_Module *mod, struct cap_symtab **out)
{
	struct cap_symtab *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t)
		return -ENOMEM;
	if (read_symbols(t, mod) < 0) {
		cap_symtab_free(t);
		return -ENOMEM;
	}
	qsort(t->v, t->n, sizeof(*t->v), by_lo_then_rank);
	dedup(t);
	*out = t;
	return 0;
}

void cap_symtab_free(struct cap_symtab *t)
{
	if (!t)
		return;
	free(t->v);
	free(t);
}

const char *cap_symtab_lookup(const struct cap_symtab *t, uint64_t pc)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) { /* the first symbol starting after pc */
		size_t mid = lo + (hi - lo) / 2;

		if (t->v[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* the nearest one below may end before pc inside a larger one (nested symbols) */
	for (size_t i = lo; i-- > 0 && lo - i <= MAX_NESTED;) {
		if (pc < t->v[i].hi)
			return t->v[i].name;
		if (!t->v[i].sized)
			break; /* it reached the next symbol: nothing below reaches further */
	}
	return NULL;
}

size_t cap_symtab_n(const struct cap_symtab *t)
{
	return t->n;
}
