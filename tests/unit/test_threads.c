/* The wait-for cycle finder behind threads/deadlocks: each cycle once, chains into a cycle
 * not counted as part of it, waits without a cycle not reported. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "collectors/threads.h"

/* Threads 1..n (tids 10, 20, ...); waits[i] = index of the thread i waits for, or -1. */
static void make(struct thread_list *l, struct thread_info *v, const int *waits, size_t n)
{
	memset(l, 0, sizeof(*l));
	for (size_t i = 0; i < n; i++) {
		memset(&v[i], 0, sizeof(v[i]));
		v[i].tid = 10 * (i + 1);
		if (waits[i] >= 0) {
			v[i].lock_addr = 0x1000 + 8 * i;
			v[i].lock_owner = 10 * (waits[i] + 1);
		}
	}
	l->v = v;
	l->n = n;
}

static void check(const int *waits, size_t n, size_t want_cycles, const size_t *want_lens)
{
	struct thread_info v[8];
	struct thread_list l;
	struct deadlock *d;
	size_t nd;

	make(&l, v, waits, n);
	assert_int_equal(threads_find_deadlocks(&l, &d, &nd), 0);
	assert_int_equal(nd, want_cycles);
	for (size_t k = 0; k < nd; k++) {
		assert_int_equal(d[k].n, want_lens[k]);
		/* each member waits for the next, the last for the first */
		for (size_t i = 0; i < d[k].n; i++)
			assert_int_equal(v[d[k].at[i]].lock_owner, v[d[k].at[(i + 1) % d[k].n]].tid);
	}
	deadlocks_free(d, nd);
}

static void test_two_threads(void **state)
{
	const int waits[] = { 1, 0, -1 };
	const size_t lens[] = { 2 };

	check(waits, 3, 1, lens);
}

static void test_no_cycle(void **state)
{
	const int waits[] = { 1, 2, -1, 2 };

	check(waits, 4, 0, NULL);
}

static void test_chain_into_cycle_and_two_cycles(void **state)
{
	/* 0 -> 1 -> 2 -> 1 (0 only waits on the cycle); 3 -> 4 -> 5 -> 3 */
	const int waits[] = { 1, 2, 1, 4, 5, 3 };
	const size_t lens[] = { 2, 3 };

	check(waits, 6, 2, lens);
}

static void test_owner_not_a_thread(void **state)
{
	struct thread_info v[2];
	struct thread_list l;
	const int waits[] = { 1, 0 };
	struct deadlock *d;
	size_t nd;

	make(&l, v, waits, 2);
	v[1].lock_owner = 999; /* held by a thread that is gone */
	assert_int_equal(threads_find_deadlocks(&l, &d, &nd), 0);
	assert_int_equal(nd, 0);
	deadlocks_free(d, nd);
}

/* The name comes from stat itself, whatever spaces and parentheses it holds. */
static void test_parse_stat_takes_name_state_and_times(void **state)
{
	const char *text = "4243 (a) (b c)) R 1 4242 4242 0 -1 4194368 12 0 0 0 250 50 0 0 "
			   "20 0 1 0 100 0 0";
	struct thread_info t = { 0 };

	assert_int_equal(threads_parse_stat(text, 100, &t), 0);
	assert_string_equal(t.name, "a) (b c)");
	assert_int_equal(t.state, 'R');
	assert_int_equal(t.utime_us, 2500000);
	assert_int_equal(t.stime_us, 500000);
	assert_int_equal(t.started_us, 1000000); /* starttime 100 ticks */
	assert_int_equal(threads_parse_stat("4243 x) R 1", 100, &t), -EINVAL);
	assert_int_equal(threads_parse_stat("4243 ) (x R 1", 100, &t), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_threads),
		cmocka_unit_test(test_no_cycle),
		cmocka_unit_test(test_chain_into_cycle_and_two_cycles),
		cmocka_unit_test(test_owner_not_a_thread),
		cmocka_unit_test(test_parse_stat_takes_name_state_and_times),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
