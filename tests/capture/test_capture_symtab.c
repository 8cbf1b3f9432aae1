/*
 * The sorted symbol table (capture/symtab.c) on a shared object of known symbols
 * (symtab_fixture.S): each symbol's address is read through libdwfl's own symbol access,
 * then names are looked up at and around it: a sized function over its bytes, an untyped
 * label up to the next symbol, a nested function and the one around it, the preferred
 * name among four at one address, bytes after a function that no symbol covers, data that
 * never names code, and the last label of the section.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbols_i.h"

static const char *g_fixture;
static char *g_debuginfo_path;

static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &g_debuginfo_path,
};

struct fixture {
	Dwfl *dwfl;
	Dwfl_Module *mod;
	struct cap_symtab *t;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->dwfl = dwfl_begin(&callbacks);
	assert_non_null(f->dwfl);
	dwfl_report_begin(f->dwfl);
	f->mod = dwfl_report_elf(f->dwfl, "fixture", g_fixture, -1, 0, false);
	dwfl_report_end(f->dwfl, NULL, NULL);
	assert_non_null(f->mod);
	assert_int_equal(cap_symtab_new(f->mod, &f->t), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	cap_symtab_free(f->t);
	dwfl_end(f->dwfl);
	free(f);
	return 0;
}

/* The address of symbol @name as libdwfl reads it. */
static uint64_t addr_of(const struct fixture *f, const char *name)
{
	int n = dwfl_module_getsymtab(f->mod);

	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		const char *s = dwfl_module_getsym_info(f->mod, i, &sym, &addr, NULL, NULL, NULL);

		if (s && strcmp(s, name) == 0)
			return addr;
	}
	fail_msg("no symbol %s in %s", name, g_fixture);
	return 0;
}

static void expect(const struct fixture *f, const char *sym, uint64_t off, const char *want)
{
	const char *got = cap_symtab_lookup(f->t, addr_of(f, sym) + off);

	if (want ? !got || strcmp(got, want) : got != NULL)
		fail_msg("%s+%ju: got %s, expected %s", sym, (uintmax_t)off, got ? got : "NULL",
			 want ? want : "NULL");
}

static void test_symtab_sized_function_covers_its_bytes(void **state)
{
	expect(*state, "fx_sized", 0, "fx_sized");
	expect(*state, "fx_sized", 15, "fx_sized");
	expect(*state, "fx_after_gap", 15, "fx_after_gap");
}

static void test_symtab_label_reaches_the_next_symbol(void **state)
{
	expect(*state, "fx_label", 0, "fx_label");
	expect(*state, "fx_label", 15, "fx_label");
	expect(*state, "fx_label", 16, "fx_outer");
	expect(*state, "fx_tail", 7, "fx_tail");
}

static void test_symtab_nested_function_inside_its_outer_one(void **state)
{
	expect(*state, "fx_outer", 7, "fx_outer");
	expect(*state, "fx_inner", 0, "fx_inner");
	expect(*state, "fx_inner", 3, "fx_inner");
	expect(*state, "fx_inner", 4, "fx_outer");
	expect(*state, "fx_outer", 31, "fx_outer");
}

static void test_symtab_prefers_global_then_fewer_underscores(void **state)
{
	expect(*state, "fx_local", 0, "fx_alias");
	expect(*state, "fx_weak", 9, "fx_alias");
}

static void test_symtab_bytes_after_a_function_are_unnamed(void **state)
{
	expect(*state, "fx_gapped", 3, "fx_gapped");
	expect(*state, "fx_gapped", 4, NULL);
	expect(*state, "fx_gapped", 15, NULL);
}

static void test_symtab_data_never_names_code(void **state)
{
	struct fixture *f = *state;

	expect(f, "fx_data", 0, NULL);
	expect(f, "fx_data_label", 0, NULL);
	assert_null(cap_symtab_lookup(f->t, 0)); /* the ELF header */
}

static void test_symtab_one_entry_per_address(void **state)
{
	struct fixture *f = *state;
	/* fx_sized, fx_label, fx_outer, fx_inner, fx_alias, fx_gapped, fx_after_gap, fx_tail,
	   and the C runtime's functions around them */
	assert_true(cap_symtab_n(f->t) >= 8);
	assert_true(cap_symtab_n(f->t) < 64);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_symtab_sized_function_covers_its_bytes),
	    cmocka_unit_test(test_symtab_label_reaches_the_next_symbol),
	    cmocka_unit_test(test_symtab_nested_function_inside_its_outer_one),
	    cmocka_unit_test(test_symtab_prefers_global_then_fewer_underscores),
	    cmocka_unit_test(test_symtab_bytes_after_a_function_are_unnamed),
	    cmocka_unit_test(test_symtab_data_never_names_code),
	    cmocka_unit_test(test_symtab_one_entry_per_address),
	};

	if (argc != 2) {
		fprintf(stderr, "usage: test_capture_symtab FIXTURE.so\n");
		return 2;
	}
	g_fixture = argv[1];
	return cmocka_run_group_tests(tests, setup, teardown);
}
