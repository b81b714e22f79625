#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "fs/snapshot.h"

static struct snapshot *make(const char *text)
{
	return snapshot_new(strdup(text), strlen(text));
}

/* stat then open in one process: the open reads what the stat measured. */
static void test_stash_then_take(void **state)
{
	struct snapshot_table *t;
	struct snapshot *s = make("abc\n"), *got;

	assert_int_equal(snapshot_table_new(&t), 0);
	snapshot_table_stash(t, 7, 100, s);
	assert_null(snapshot_table_take(t, 7, 101)); /* another process */
	assert_null(snapshot_table_take(t, 8, 100)); /* another file */
	got = snapshot_table_take(t, 7, 100);
	assert_ptr_equal(got, s);
	assert_null(snapshot_table_take(t, 7, 100)); /* taken once */
	snapshot_unref(got);
	snapshot_unref(s);
	snapshot_table_free(t);
}

/* A newer stat replaces the stash. */
static void test_stash_replaced(void **state)
{
	struct snapshot_table *t;
	struct snapshot *a = make("a\n"), *b = make("bb\n"), *got;

	assert_int_equal(snapshot_table_new(&t), 0);
	snapshot_table_stash(t, 7, 100, a);
	snapshot_table_stash(t, 7, 100, b);
	got = snapshot_table_take(t, 7, 100);
	assert_ptr_equal(got, b);
	snapshot_unref(got);
	snapshot_unref(a);
	snapshot_unref(b);
	snapshot_table_free(t);
}

/* fstat from the opener reports the snapshot it reads, until its last close. */
static void test_reading(void **state)
{
	struct snapshot_table *t;
	struct snapshot *a = make("first\n"), *b = make("second!\n"), *got;

	assert_int_equal(snapshot_table_new(&t), 0);
	assert_null(snapshot_table_reading(t, 7, 100));
	snapshot_table_opened(t, 7, 100, a);
	got = snapshot_table_reading(t, 7, 100);
	assert_ptr_equal(got, a);
	snapshot_unref(got);
	assert_null(snapshot_table_reading(t, 7, 101));
	snapshot_table_opened(t, 7, 100, b);
	got = snapshot_table_reading(t, 7, 100);
	assert_ptr_equal(got, b);
	snapshot_unref(got);
	snapshot_table_closed(t, 7, 100);
	got = snapshot_table_reading(t, 7, 100);
	assert_non_null(got); /* one open is left */
	snapshot_unref(got);
	snapshot_table_closed(t, 7, 100);
	assert_null(snapshot_table_reading(t, 7, 100));
	snapshot_unref(a);
	snapshot_unref(b);
	snapshot_table_free(t);
}

/* The table keeps its own references: the snapshot outlives its maker. */
static void test_refs(void **state)
{
	struct snapshot_table *t;
	struct snapshot *s = make("x\n"), *got;

	assert_int_equal(snapshot_table_new(&t), 0);
	snapshot_table_stash(t, 1, 1, s);
	snapshot_unref(s);
	got = snapshot_table_take(t, 1, 1);
	assert_non_null(got);
	assert_memory_equal(got->data, "x\n", 2);
	snapshot_unref(got);
	snapshot_table_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stash_then_take),
		cmocka_unit_test(test_stash_replaced),
		cmocka_unit_test(test_reading),
		cmocka_unit_test(test_refs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
