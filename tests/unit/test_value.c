#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "daemon/value.h"

static int uint_of(const char *s, uint64_t min, uint64_t max, uint64_t *v)
{
	return value_parse_uint(s, strlen(s), min, max, v);
}

static void test_uint(void **state)
{
	uint64_t v = 42;

	assert_int_equal(uint_of("99", 1, 1000, &v), 0);
	assert_int_equal(v, 99);
	assert_int_equal(uint_of("99\n", 1, 1000, &v), 0);
	assert_int_equal(v, 99);
	v = 7;
	assert_int_equal(uint_of("", 1, 1000, &v), -EINVAL);
	assert_int_equal(uint_of("\n", 1, 1000, &v), -EINVAL);
	assert_int_equal(uint_of("abc", 1, 1000, &v), -EINVAL);
	assert_int_equal(uint_of("-5", 1, 1000, &v), -EINVAL);
	assert_int_equal(uint_of(" 5", 1, 1000, &v), -EINVAL);
	assert_int_equal(uint_of("5 ", 1, 1000, &v), -EINVAL);
	assert_int_equal(uint_of("5\n\n", 1, 1000, &v), -EINVAL);
	assert_int_equal(uint_of("5 6", 1, 1000, &v), -EINVAL);
	assert_int_equal(uint_of("0x10", 1, 1000, &v), -EINVAL);
	assert_int_equal(uint_of("0", 1, 1000, &v), -ERANGE);
	assert_int_equal(uint_of("1001", 1, 1000, &v), -ERANGE);
	assert_int_equal(uint_of("99999999999999999999999", 1, 1000, &v), -ERANGE);
	assert_int_equal(uint_of("9999999999999999999999x", 1, 1000, &v), -EINVAL);
	assert_int_equal(uint_of("05", 1, 1000, &v), -EINVAL);
	assert_int_equal(uint_of("00", 0, 1000, &v), -EINVAL);
	assert_int_equal(v, 7); /* failures leave the output alone */
	assert_int_equal(uint_of("0", 0, 1000, &v), 0);
	assert_int_equal(v, 0);
}

static int enable_of(const char *s, int *on, uint64_t *d)
{
	return value_parse_enable(s, strlen(s), on, d);
}

static void test_enable(void **state)
{
	uint64_t d;
	int on;

	assert_int_equal(enable_of("1\n", &on, &d), 0);
	assert_true(on);
	assert_int_equal(d, 0);
	assert_int_equal(enable_of("0", &on, &d), 0);
	assert_false(on);
	assert_int_equal(enable_of("30s", &on, &d), 0);
	assert_true(on);
	assert_int_equal(d, 30);
	assert_int_equal(enable_of("5m\n", &on, &d), 0);
	assert_int_equal(d, 300);
	assert_int_equal(enable_of("2h", &on, &d), 0);
	assert_int_equal(d, 7200);
	assert_int_equal(enable_of("7d", &on, &d), 0);
	assert_int_equal(d, 7 * 86400);

	assert_int_equal(enable_of("2", &on, &d), -EINVAL);
	assert_int_equal(enable_of("yes", &on, &d), -EINVAL);
	assert_int_equal(enable_of("10", &on, &d), -EINVAL);
	assert_int_equal(enable_of("1 ", &on, &d), -EINVAL);
	assert_int_equal(enable_of("s", &on, &d), -EINVAL);
	assert_int_equal(enable_of("30x", &on, &d), -EINVAL);
	assert_int_equal(enable_of("-1s", &on, &d), -EINVAL);
	assert_int_equal(enable_of("", &on, &d), -EINVAL);
	assert_int_equal(enable_of("0s", &on, &d), -ERANGE);
	assert_int_equal(enable_of("8d", &on, &d), -ERANGE);
	assert_int_equal(enable_of("99999999999999999999999s", &on, &d), -ERANGE);
}

/* One rule for every number: no leading zero, however many digits follow. */
static void test_leading_zeros(void **state)
{
	char many[5002];
	uint64_t v = 7, d;
	int on;

	memset(many, '0', 5000);
	strcpy(many + 5000, "5");
	assert_int_equal(uint_of(many, 1, 1000, &v), -EINVAL);
	assert_int_equal(enable_of(many, &on, &d), -EINVAL);
	assert_int_equal(enable_of("01", &on, &d), -EINVAL);
	assert_int_equal(enable_of("030s", &on, &d), -EINVAL);
	assert_int_equal(v, 7);
}

static void test_word(void **state)
{
	static const char *const words[] = { "fp", "dwarf", "auto", NULL };
	uint64_t v = 99;

	assert_int_equal(value_parse_word("dwarf", 5, words, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(value_parse_word("auto\n", 5, words, &v), 0);
	assert_int_equal(v, 2);
	assert_int_equal(value_parse_word("fp", 2, words, &v), 0);
	assert_int_equal(v, 0);
	/* Whole words only, one of them, exactly. */
	assert_int_equal(value_parse_word("f", 1, words, &v), -EINVAL);
	assert_int_equal(value_parse_word("fpx", 3, words, &v), -EINVAL);
	assert_int_equal(value_parse_word("FP", 2, words, &v), -EINVAL);
	assert_int_equal(value_parse_word("fp\n\n", 4, words, &v), -EINVAL);
	assert_int_equal(value_parse_word(" fp", 3, words, &v), -EINVAL);
	assert_int_equal(value_parse_word("", 0, words, &v), -EINVAL);
	assert_int_equal(value_parse_word("fp\0", 3, words, &v), -EINVAL);
	assert_int_equal(v, 0);
}

static int window_of(const char *s, int *global, uint64_t *v)
{
	return value_parse_window(s, strlen(s), 600, global, v);
}

static void test_window(void **state)
{
	uint64_t v = 42;
	int global = 7;

	assert_int_equal(window_of("global", &global, &v), 0);
	assert_int_equal(global, 1);
	assert_int_equal(v, 42);
	assert_int_equal(window_of("0\n", &global, &v), 0);
	assert_int_equal(global, 0);
	assert_int_equal(v, 0);
	assert_int_equal(window_of("600", &global, &v), 0);
	assert_int_equal(v, 600);
	global = 7;
	assert_int_equal(window_of("601", &global, &v), -ERANGE);
	assert_int_equal(window_of("-1", &global, &v), -EINVAL);
	assert_int_equal(window_of("globalx", &global, &v), -EINVAL);
	assert_int_equal(window_of("global\n\n", &global, &v), -EINVAL);
	assert_int_equal(window_of("Global", &global, &v), -EINVAL);
	assert_int_equal(window_of("", &global, &v), -EINVAL);
	assert_int_equal(global, 7); /* failures leave the output alone */
	assert_int_equal(v, 600);
}

static void test_quote(void **state)
{
	char out[16];

	value_quote("2\n", 2, out, sizeof(out));
	assert_string_equal(out, "2");
	value_quote("a\"b\tc", 5, out, sizeof(out));
	assert_string_equal(out, "a\\x22b\\x09c");
	value_quote("0123456789abcdefghij", 20, out, sizeof(out));
	assert_string_equal(out, "0123456789ab...");
	value_quote("", 0, out, sizeof(out));
	assert_string_equal(out, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uint),
		cmocka_unit_test(test_enable),
		cmocka_unit_test(test_leading_zeros),
		cmocka_unit_test(test_word),
		cmocka_unit_test(test_window),
		cmocka_unit_test(test_quote),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
