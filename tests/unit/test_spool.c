/* sync/spool.c: the node's on-disk spool of unacknowledged batches. */
#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "sync/spool.h"

static char dir[] = "/tmp/aperture-test-spool-XXXXXX";

static int setup(void **state)
{
	assert_non_null(mkdtemp(dir));
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static struct spool *open_spool(uint64_t max)
{
	struct spool *s;
	char why[256];

	assert_int_equal(spool_open(dir, max, &s, why, sizeof(why)), 0);
	return s;
}

static void put(struct spool *s, int64_t created, uint64_t seq, size_t len)
{
	char data[4096];

	memset(data, 'x', len);
	assert_int_equal(spool_put(s, created, "b00t", seq, data, len), 0);
}

static uint64_t peek_seq(struct spool *s, char *name, size_t namelen)
{
	uint8_t *data;
	size_t len;

	assert_int_equal(spool_peek(s, name, namelen, &data, &len), 0);
	free(data);
	return strtoull(strrchr(name, '-') + 1, NULL, 10);
}

/* Batches come back oldest first, also after a restart, and a half-written one is ignored. */
static void test_order_and_restart(void **state)
{
	struct spool *s = open_spool(1 << 20);
	struct spool_stats st;
	char name[128], tmp[256];
	FILE *f;

	put(s, 1000, 2, 100);
	put(s, 1000, 1, 100);
	put(s, 999, 7, 100);
	spool_close(s);
	snprintf(tmp, sizeof(tmp), "%s/000000001001-b00t-00000000000000000009.batch.tmp", dir);
	f = fopen(tmp, "w");
	assert_non_null(f);
	fclose(f);

	s = open_spool(1 << 20);
	spool_get_stats(s, &st);
	assert_int_equal(st.batches, 3);
	assert_int_equal(st.bytes, 300);
	assert_int_equal(st.oldest, 999);
	assert_int_not_equal(access(tmp, F_OK), 0);
	assert_int_equal(peek_seq(s, name, sizeof(name)), 7);
	spool_done(s, name);
	assert_int_equal(peek_seq(s, name, sizeof(name)), 1);
	/* kept: the same one again */
	spool_keep(s, name);
	assert_int_equal(peek_seq(s, name, sizeof(name)), 1);
	spool_done(s, name);
	assert_int_equal(peek_seq(s, name, sizeof(name)), 2);
	spool_done(s, name);
	spool_get_stats(s, &st);
	assert_int_equal(st.batches, 0);
	assert_int_equal(st.dropped, 0);
	spool_close(s);
}

/* Past its bound the spool drops its oldest batches, counted, but never the one being sent. */
static void test_bound(void **state)
{
	struct spool *s = open_spool(1000);
	struct spool_stats st;
	char name[128];

	put(s, 2000, 1, 400);
	put(s, 2001, 2, 400);
	assert_int_equal(peek_seq(s, name, sizeof(name)), 1); /* in flight */
	put(s, 2002, 3, 400);                                 /* drops 2, not 1 */
	spool_get_stats(s, &st);
	assert_int_equal(st.batches, 2);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.oldest_dropped, 2001);
	spool_done(s, name);
	assert_int_equal(peek_seq(s, name, sizeof(name)), 3);
	spool_done(s, name);
	put(s, 2003, 4, 400);
	put(s, 2004, 5, 400);
	put(s, 2005, 6, 400);                                 /* drops 4 */
	spool_get_stats(s, &st);
	assert_int_equal(st.dropped, 2);
	assert_int_equal(st.oldest_dropped, 2001);
	assert_int_equal(peek_seq(s, name, sizeof(name)), 5);
	spool_done(s, name);
	spool_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_restart),
		cmocka_unit_test(test_bound),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
