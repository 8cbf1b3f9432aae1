/*
 * Demangling (capture/demangle.c): C++ names as c++filt prints them, Rust legacy names as
 * Rust's own backtraces print them (the expected names below are what rustc 1.8x's
 * std::backtrace printed for these symbols of a test program), names that are not mangled
 * or do not demangle left alone, and 100,000 random names made of mangling's pieces (seeded,
 * the seed printed) never crash and never grow a Rust name.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "symbols_i.h"

static void expect(const char *mangled, const char *want)
{
	char *got = cap_demangle_new(mangled);

	if (want ? !got || strcmp(got, want) : got != NULL)
		fail_msg("%s: got %s, expected %s", mangled, got ? got : "NULL",
			 want ? want : "NULL");
	free(got);
}

static void test_demangle_cxx_as_cxxfilt(void **state)
{
	(void)state;
	expect("_ZN3geo5buildB5cxx11Ei", "geo::build[abi:cxx11](int)");
	expect("_Znwm", "operator new(unsigned long)");
	expect("_ZZ4mainENKUliE_clEi", "main::{lambda(int)#1}::operator()(int) const");
	expect("_ZN3geo4makeIdEEPT_m", "double* geo::make<double>(unsigned long)");
}

static void test_demangle_rust_legacy_without_hash(void **state)
{
	(void)state;
	expect("_ZN1m4main17h4009bc0cd8b193aaE", "m::main");
	expect("_ZN52_$LT$m..W$LT$T$GT$$u20$as$u20$core..fmt..Display$GT$3fmt17h99c7ddb2631c8a3fE",
	       "<m::W<T> as core::fmt::Display>::fmt");
	expect("_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$17h168e94e611939a97E",
	       "std::rt::lang_start::{{closure}}");
	expect("_ZN4core3ptr46drop_in_place$LT$std..backtrace..Backtrace$GT$17hc923373e1c568e55E",
	       "core::ptr::drop_in_place<std::backtrace::Backtrace>");
	/* not a hash: 15 digits, or not hexadecimal: a C++ name like any other */
	expect("_ZN3foo16h0123456789abcdeE", "foo::h0123456789abcde");
	expect("_ZN3foo17h0123456789abcdegE", "foo::h0123456789abcdeg");
}

static void test_demangle_leaves_others_alone(void **state)
{
	(void)state;
	expect("main", NULL);
	expect("", NULL);
	expect("_Z", NULL);
	expect("_Znot_a_name", NULL);
	expect("_RNvCs1234_4main4main", NULL); /* Rust v0: not demangled */
}

static void test_demangle_random_names_never_crash(void **state)
{
	static const char *const pieces[] = {
	    "_ZN",  "3foo", "$LT$", "$GT$", "$u20$", "$u7",
	    "$",    "..",   ".",    "_$",   "17h",   "0123456789abcdef",
	    "E",    "I",    "i",    "S_",   "$C$",   "$u0a$",
	    "$SP$", "9",    "h"};
	uint64_t seed = (uint64_t)time(NULL) | 1, x;

	(void)state;
	if (getenv("TFS_TEST_SEED"))
		seed = strtoull(getenv("TFS_TEST_SEED"), NULL, 0) | 1;
	printf("# seed %" PRIu64 " (TFS_TEST_SEED to repeat)\n", seed);
	x = seed;
	for (int i = 0; i < 100000; i++) {
		char name[256] = "_ZN";
		size_t len = 3;
		int n;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		n = (int)(x % 12);
		for (int k = 0; k < n; k++) {
			const char *p =
			    pieces[(x >> (4 * k % 60)) % (sizeof(pieces) / sizeof(*pieces))];

			if (len + strlen(p) + 1 >= sizeof(name))
				break;
			memcpy(name + len, p, strlen(p) + 1);
			len += strlen(p);
		}
		free(cap_demangle_new(name));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_demangle_cxx_as_cxxfilt),
	    cmocka_unit_test(test_demangle_rust_legacy_without_hash),
	    cmocka_unit_test(test_demangle_leaves_others_alone),
	    cmocka_unit_test(test_demangle_random_names_never_crash),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
