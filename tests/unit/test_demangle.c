// SPDX-License-Identifier: GPL-2.0
/* Demangled names against what c++filt and rustfilt print for them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "symbols/demangle.h"

static void expect(const char *mangled, const char *want)
{
	char buf[512];

	memset(buf, 'x', sizeof(buf));
	assert_int_equal(demangle(mangled, buf, sizeof(buf)), 1);
	assert_string_equal(buf, want);
}

static void test_cpp(void **state)
{
	expect("_ZN4work6EngineImE3runEm", "work::Engine<unsigned long>::run(unsigned long)");
	/* A symbol version is not part of the name. */
	expect("_ZNSt6vectorIiSaIiEE9push_backERKi@@GLIBCXX_3.4",
	       "std::vector<int, std::allocator<int> >::push_back(int const&)");
}

static void test_rust_legacy_and_v0(void **state)
{
	/* Legacy: Itanium-shaped, with a hash the demangler drops. */
	expect("_ZN4core3fmt9Formatter3pad17h0123456789abcdefE", "core::fmt::Formatter::pad");
	expect("_RNvCs15kBYyAo9fc_7mycrate7example", "mycrate::example");
}

static void test_not_mangled_or_malformed(void **state)
{
	char buf[64] = "untouched";

	assert_int_equal(demangle("main", buf, sizeof(buf)), 0);
	assert_int_equal(demangle("_Zjunk", buf, sizeof(buf)), 0);
	assert_int_equal(demangle("_start", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "untouched");
}

static void test_cut_to_fit(void **state)
{
	char buf[12];

	assert_int_equal(demangle("_ZN4work6EngineImE3runEm", buf, sizeof(buf)), 1);
	assert_string_equal(buf, "work::En...");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cpp),
		cmocka_unit_test(test_rust_legacy_and_v0),
		cmocka_unit_test(test_not_mangled_or_malformed),
		cmocka_unit_test(test_cut_to_fit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
