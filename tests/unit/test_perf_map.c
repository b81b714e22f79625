// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "symbols/perf_map.h"

static char path[64];
static char name[256];

static void append(const char *text)
{
	FILE *f = fopen(path, "a");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static const char *name_at(struct perf_map *m, uint64_t addr)
{
	return perf_map_name(m, addr, name, sizeof(name)) ? NULL : name;
}

static void wait_recheck(void)
{
	struct timespec ts = { 0, (PERF_MAP_RECHECK_MS + 20) * 1000000L };

	nanosleep(&ts, NULL);
}

static int setup(void **state)
{
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	unlink(path);
	return 0;
}

static int teardown(void **state)
{
	unlink(path);
	return 0;
}

static void test_names_and_growth(void **state)
{
	struct perf_map *m;

	/* Opened before the runtime wrote anything. */
	assert_int_equal(perf_map_open(getpid(), &m), 0);
	assert_null(name_at(m, 0x1000));

	append("1000 100 JS:*hot /app/x.js:1:1\n"
	       "2000 10 Stub:CEntry\n"
	       "garbage line\n"
	       "3000 0 zero-sized\n"
	       "4000 20 half a li");
	wait_recheck();
	assert_string_equal(name_at(m, 0x1000), "JS:*hot /app/x.js:1:1");
	assert_string_equal(name_at(m, 0x10ff), "JS:*hot /app/x.js:1:1");
	assert_null(name_at(m, 0x1100));
	assert_string_equal(name_at(m, 0x2009), "Stub:CEntry");
	assert_null(name_at(m, 0x3000));
	assert_int_equal(perf_map_count(m), 2);

	/* The writer finishes its line, and code at 0x1000 is replaced: the later line wins. */
	append("ne\n1000 80 JS:*hot2 /app/x.js:9:1\n");
	wait_recheck();
	assert_string_equal(name_at(m, 0x4010), "half a line");
	assert_string_equal(name_at(m, 0x1000), "JS:*hot2 /app/x.js:9:1");
	assert_int_equal(perf_map_count(m), 3);
	perf_map_free(m);
}

/* A file that is not a regular file of root or the target's user is not read. */
static void test_symlink_ignored(void **state)
{
	char real[64];
	struct perf_map *m;
	FILE *f;

	snprintf(real, sizeof(real), "/tmp/perf-real-%d.map", (int)getpid());
	f = fopen(real, "w");
	assert_non_null(f);
	fputs("1000 100 secret\n", f);
	fclose(f);
	assert_int_equal(symlink(real, path), 0);
	assert_int_equal(perf_map_open(getpid(), &m), 0);
	assert_null(name_at(m, 0x1000));
	perf_map_free(m);
	unlink(real);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_names_and_growth, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_ignored, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
