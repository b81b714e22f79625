#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>
#include "fs/handles.h"

static int destroyed;

static void count_destroy(struct handle *h)
{
	destroyed++;
	free(h);
}

/* A release while a read still holds the handle: the read keeps using it, and it goes
 * only when the read lets go. */
static void test_release_during_use(void **state)
{
	struct handle_table *t;
	struct handle *h = calloc(1, sizeof(*h)), *got;
	uint64_t id;

	destroyed = 0;
	assert_int_equal(handle_table_new(&t), 0);
	id = handle_add(t, h, count_destroy);
	assert_int_not_equal(id, 0);
	got = handle_get(t, id);
	assert_ptr_equal(got, h);
	handle_remove(t, id);
	assert_int_equal(destroyed, 0);
	assert_null(handle_get(t, id)); /* a later request finds nothing */
	handle_put(got);
	assert_int_equal(destroyed, 1);
	handle_table_free(t);
}

/* Ids are never reused, so a stale fh cannot reach a newer file. */
static void test_ids_not_reused(void **state)
{
	struct handle_table *t;
	uint64_t a, b;

	destroyed = 0;
	assert_int_equal(handle_table_new(&t), 0);
	a = handle_add(t, calloc(1, sizeof(struct handle)), count_destroy);
	handle_remove(t, a);
	b = handle_add(t, calloc(1, sizeof(struct handle)), count_destroy);
	assert_int_not_equal(a, b);
	assert_null(handle_get(t, a));
	handle_remove(t, 12345); /* unknown: nothing happens */
	handle_table_free(t);    /* destroys b */
	assert_int_equal(destroyed, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_release_during_use),
		cmocka_unit_test(test_ids_not_reused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
