#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "store/folded_parse.h"

/* The snapshot's stacks as folded text joined in sorted order, for comparing. */
static int parse(const char *text, struct profile_snapshot **s, size_t *bad)
{
	struct profile *p = profile_new("samples");
	int err;

	assert_non_null(p);
	*bad = 0;
	err = folded_parse(p, text, strlen(text), 1000, bad);
	assert_int_equal(profile_snapshot(p, 0, s), 0);
	profile_unref(p);
	return err;
}

static const char *stack_text(const struct profile_snapshot *s, size_t i, char *buf,
			      size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (uint32_t j = 0; j < s->stacks[i].depth; j++)
		len += snprintf(buf + len, size - len, "%s%s", j ? ";" : "",
				s->names[s->stacks[i].frames[j]]);
	snprintf(buf + len, size - len, " %lu", (unsigned long)s->stacks[i].count);
	return buf;
}

static bool has_stack(const struct profile_snapshot *s, const char *want)
{
	char buf[256];

	for (size_t i = 0; i < s->nstacks; i++)
		if (!strcmp(stack_text(s, i, buf, sizeof(buf)), want))
			return true;
	return false;
}

static void test_lines(void **state)
{
	struct profile_snapshot *s;
	size_t bad;

	/* CRLF, a tab before the count, blank lines, a repeated stack adding up, a name with
	 * spaces, UTF-8, no newline at the end */
	assert_int_equal(parse("t;main;a 3\r\n\nt;main;a\t2\nt;f(x, y) 1\n  \nt;\xc3\xa9 7\n"
			       "t;sp  4", &s, &bad), 0);
	assert_int_equal(s->total, 17);
	assert_int_equal(s->nstacks, 4);
	/* one blank separates the count: the rest belongs to the name */
	assert_true(has_stack(s, "t;sp  4"));
	assert_true(has_stack(s, "t;main;a 5"));
	assert_true(has_stack(s, "t;f(x, y) 1"));
	assert_true(has_stack(s, "t;\xc3\xa9 7"));
	profile_snapshot_free(s);
}

static void test_bad_lines(void **state)
{
	static const struct { const char *text; int err; size_t line; } cases[] = {
		{ "a;b 1\nno count\n", -EINVAL, 2 },
		{ "a;b\n", -EINVAL, 1 },
		{ "a;;b 1\n", -EINVAL, 1 },
		{ ";a 1\n", -EINVAL, 1 },
		{ "a; 1\n", -EINVAL, 1 },
		{ "a 0\n", -EINVAL, 1 },
		{ "a -1\n", -EINVAL, 1 },
		{ "a 1.5\n", -EINVAL, 1 },
		{ " 5\n", -EINVAL, 1 },
		{ "a 18446744073709551616\n", -ERANGE, 1 },
		{ "a 18446744073709551615\nb 1\n", -ERANGE, 2 },
	};
	struct profile_snapshot *s;
	size_t bad;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(parse(cases[i].text, &s, &bad), cases[i].err);
		assert_int_equal(bad, cases[i].line);
		profile_snapshot_free(s);
	}
	/* the lines before the bad one are kept */
	assert_int_equal(parse("a;b 4\nx\n", &s, &bad), -EINVAL);
	assert_int_equal(s->total, 4);
	profile_snapshot_free(s);
	/* the largest count parses */
	assert_int_equal(parse("a 18446744073709551615\n", &s, &bad), 0);
	assert_true(s->total == UINT64_MAX);
	profile_snapshot_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_bad_lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
