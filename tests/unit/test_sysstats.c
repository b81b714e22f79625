/* The sys_table store and the syscalls.json / locks.json views: rows add up by identity,
 * group per call and per lock, errnos are named, and the busiest comes first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <sys/syscall.h>
#include "views/sysstats_json.h"

static struct latency lat(uint64_t count, uint64_t each_ns)
{
	struct latency l = { .count = count, .total_ns = count * each_ns, .max_ns = each_ns };

	l.hist[63 - __builtin_clzll(each_ns)] = count;
	return l;
}

static cJSON *render(struct sys_table *t, int locks, unsigned top)
{
	struct sys_snapshot *s;
	char *buf = NULL;
	size_t size = 0;
	FILE *out = open_memstream(&buf, &size);
	cJSON *doc;

	assert_int_equal(sys_table_snapshot(t, &s), 0);
	assert_int_equal(locks ? view_locks_json(s, top, NULL, out) : view_syscalls_json(s, out),
			 0);
	assert_int_equal(fclose(out), 0);
	sys_snapshot_free(s);
	doc = cJSON_Parse(buf);
	assert_non_null(doc);
	free(buf);
	return doc;
}

static double num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(o, key);

	assert_non_null(v);
	return v->valuedouble;
}

static void test_calls_group_by_number(void **state)
{
	struct sys_table *t = sys_table_new();
	struct sys_row r = { .kind = SYS_ROW_CALL, .a = SYS_getppid };
	struct latency l = lat(1000, 100);
	cJSON *doc, *calls, *openat;

	assert_int_equal(sys_table_add(t, &r, &l), 0);
	assert_int_equal(sys_table_add(t, &r, &l), 0); /* a second drain adds */
	r.a = SYS_openat;
	l = lat(5, 4000);
	assert_int_equal(sys_table_add(t, &r, &l), 0);
	r.b = 2; /* ENOENT */
	l = lat(3, 1000);
	assert_int_equal(sys_table_add(t, &r, &l), 0);
	doc = render(t, 0, 0);
	calls = cJSON_GetObjectItem(doc, "syscalls");
	assert_int_equal(cJSON_GetArraySize(calls), 2);
	/* Busiest first: getppid took 200 us, openat 23 us. */
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 0), "name")->valuestring,
			    "getppid");
	assert_true(num(cJSON_GetArrayItem(calls, 0), "count") == 2000);
	openat = cJSON_GetArrayItem(calls, 1);
	assert_string_equal(cJSON_GetObjectItem(openat, "name")->valuestring, "openat");
	assert_true(num(openat, "count") == 8);
	assert_true(num(openat, "errors") == 3);
	assert_true(num(cJSON_GetObjectItem(openat, "errnos"), "ENOENT") == 3);
	assert_true(num(openat, "total_ns") == 23000);
	assert_true(num(openat, "max_ns") == 4000);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(openat, "histogram")), 2);
	cJSON_Delete(doc);

	sys_table_reset(t);
	doc = render(t, 0, 0);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "syscalls")), 0);
	cJSON_Delete(doc);
	sys_table_unref(t);
}

static void test_locks_holders_and_top_stacks(void **state)
{
	struct sys_table *t = sys_table_new();
	struct sys_row r = { .kind = SYS_ROW_LOCK, .addr = 0x1000, .a = 42, .holder = "holder" };
	struct latency l = lat(5, 100000000);
	cJSON *doc, *locks, *lock, *stacks;
	char name[32];

	r.stack = "waiter;main;lock";
	assert_int_equal(sys_table_add(t, &r, &l), 0);
	for (int i = 0; i < 4; i++) { /* lesser stacks, and lesser holders */
		snprintf(name, sizeof(name), "w%d;f", i);
		r.stack = name;
		r.a = 50 + i;
		r.holder = "other";
		l = lat(1, 1000 + i);
		assert_int_equal(sys_table_add(t, &r, &l), 0);
	}
	r = (struct sys_row){ .kind = SYS_ROW_LOCK, .addr = 0x2000, .stack = "x;y" };
	l = lat(1, 10);
	assert_int_equal(sys_table_add(t, &r, &l), 0);
	doc = render(t, 1, 2);
	locks = cJSON_GetObjectItem(doc, "locks");
	assert_int_equal(cJSON_GetArraySize(locks), 2);
	lock = cJSON_GetArrayItem(locks, 0);
	assert_string_equal(cJSON_GetObjectItem(lock, "address")->valuestring, "0x1000");
	assert_true(num(lock, "waits") == 9);
	assert_true(num(cJSON_GetArrayItem(cJSON_GetObjectItem(lock, "holders"), 0), "tid") == 42);
	stacks = cJSON_GetObjectItem(lock, "stacks");
	assert_int_equal(cJSON_GetArraySize(stacks), 2); /* top 2 of 5 */
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(stacks, 0), "stack")->valuestring,
			    "waiter;main;lock");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(locks, 1),
								 "holders")), 0);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "kernel_locks")), 0);
	cJSON_Delete(doc);
	sys_table_unref(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_calls_group_by_number),
		cmocka_unit_test(test_locks_holders_and_top_stacks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
