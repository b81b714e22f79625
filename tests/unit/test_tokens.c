#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>
#include "aggregate/tokens.h"

static struct tokens *load(const char *text, int *err)
{
	char path[] = "/tmp/aperture-tokens-XXXXXX", why[256];
	struct tokens *t = NULL;
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");

	fputs(text, f);
	fclose(f);
	*err = tokens_load(path, &t, why, sizeof(why));
	unlink(path);
	return t;
}

static void test_roles_and_scopes(void **state)
{
	int err;
	struct tokens *t = load("# fleet\n\n  a1 node web-1   # trailing\nro read *\n"
				"sc read node:web-2,service:checkout\n", &err);
	const struct token *k;

	assert_int_equal(err, 0);
	k = tokens_find(t, "a1");
	assert_non_null(k);
	assert_string_equal(token_node(k), "web-1");
	assert_true(token_reads_node(k, "web-1"));
	assert_false(token_reads_node(k, "web-2"));
	assert_false(token_reads_service(k, "checkout"));
	k = tokens_find(t, "ro");
	assert_null(token_node(k));
	assert_true(token_reads_all(k));
	k = tokens_find(t, "sc");
	assert_true(token_reads_node(k, "web-2"));
	assert_false(token_reads_node(k, "web-1"));
	assert_true(token_reads_service(k, "checkout"));
	assert_false(token_reads_service(k, "check"));
	assert_null(tokens_find(t, "a"));   /* a prefix is not the token */
	assert_null(tokens_find(t, "a1 ")); /* nor a longer string */
	assert_null(tokens_find(t, NULL));
	tokens_free(t);
}

static void test_bad_lines(void **state)
{
	int err;

	assert_null(load("tok admin *\n", &err));
	assert_int_equal(err, -EINVAL);
	assert_null(load("tok node\n", &err));
	assert_int_equal(err, -EINVAL);
	assert_null(load("tok read pod:x\n", &err));
	assert_int_equal(err, -EINVAL);
	assert_null(load("tok node a b\n", &err));
	assert_int_equal(err, -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roles_and_scopes),
		cmocka_unit_test(test_bad_lines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
