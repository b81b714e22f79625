/* The per-second thread CPU history behind threads/busy: window 0 counts from enable or reset
 * (a thread born since counts all its CPU), window N from the sample nearest N s ago (the
 * oldest kept when there is none older), the ring stays bounded, and the cap holds. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "store/thread_cpu.h"

#define S 1000000ULL

/* Threads tids[i] with cpu[i] microseconds of CPU time each (utime only). */
static void make(struct thread_list *l, struct thread_info *v, const pid_t *tids,
		 const uint64_t *cpu, size_t n)
{
	memset(l, 0, sizeof(*l));
	for (size_t i = 0; i < n; i++) {
		memset(&v[i], 0, sizeof(v[i]));
		v[i].tid = tids[i];
		v[i].utime_us = cpu[i];
	}
	l->v = v;
	l->n = n;
}

static void windows(void **state)
{
	struct thread_cpu *h = thread_cpu_new();
	struct thread_info v[3];
	struct thread_list l;
	pid_t tids[] = { 10, 20, 30 };

	assert_non_null(h);
	make(&l, v, tids, (uint64_t[]){ 0, 0, 0 }, 2);
	assert_int_equal(thread_cpu_apply(h, 0, 0, &l), -ENOENT);
	/* Enabled at t=100 s; thread 10 spins for 5 s, then thread 20 for 3 s. */
	assert_int_equal(thread_cpu_reset(h, &l, 100 * S), 0);
	for (uint64_t sec = 1; sec <= 8; sec++) {
		uint64_t cpu[] = { sec <= 5 ? sec * S : 5 * S, sec <= 5 ? 0 : (sec - 5) * S };

		make(&l, v, tids, cpu, 2);
		assert_int_equal(thread_cpu_record(h, &l, (100 + sec) * S), 0);
	}
	/* Read at 108.4 s; thread 30 was born since the last sample with 0.3 s. */
	make(&l, v, tids, (uint64_t[]){ 5 * S, 3 * S + S / 2, S * 3 / 10 }, 3);
	assert_int_equal(thread_cpu_apply(h, 2, 108 * S + 400000, &l), 0);
	assert_true(l.from_history);
	assert_int_equal(l.window_s, 2);
	assert_int_equal(l.interval_us, 2 * S + 400000); /* the sample at 106 s */
	assert_int_equal(v[0].recent_us, 0);
	assert_int_equal(v[1].recent_us, 2 * S + S / 2);
	assert_int_equal(v[2].recent_us, S * 3 / 10);
	assert_int_equal(thread_cpu_apply(h, 0, 108 * S + 400000, &l), 0);
	assert_int_equal(l.interval_us, 8 * S + 400000);
	assert_int_equal(v[0].recent_us, 5 * S);
	assert_int_equal(v[1].recent_us, 3 * S + S / 2);
	/* Longer than the history: the oldest sample kept. */
	assert_int_equal(thread_cpu_apply(h, 60, 108 * S + 400000, &l), 0);
	assert_int_equal(l.interval_us, 8 * S + 400000);
	/* A reset starts over from now. */
	assert_int_equal(thread_cpu_reset(h, &l, 109 * S), 0);
	assert_int_equal(thread_cpu_apply(h, 0, 110 * S, &l), 0);
	assert_int_equal(l.interval_us, S);
	assert_int_equal(v[0].recent_us, 0);
	thread_cpu_free(h);
}

static void bounded(void **state)
{
	struct thread_info *v = calloc(THREAD_CPU_MAX_THREADS + 5, sizeof(*v));
	struct thread_cpu *h = thread_cpu_new();
	struct thread_list l = { .v = v, .n = THREAD_CPU_MAX_THREADS + 5 };

	assert_non_null(v);
	for (size_t i = 0; i < l.n; i++) {
		v[i].tid = i + 1;
		v[i].utime_us = S;
	}
	assert_int_equal(thread_cpu_reset(h, &l, 0), 0);
	/* Twice the history: the ring drops the oldest, and window 600 still finds 600 s ago. */
	for (uint64_t sec = 1; sec <= 2 * THREAD_CPU_HISTORY_S; sec++)
		assert_int_equal(thread_cpu_record(h, &l, sec * S), 0);
	assert_int_equal(thread_cpu_apply(h, THREAD_CPU_HISTORY_S + 100,
					  2 * THREAD_CPU_HISTORY_S * S, &l), 0);
	assert_int_equal(l.interval_us, THREAD_CPU_HISTORY_S * S);
	/* Threads beyond the cap were not recorded: they count all their CPU time. */
	assert_int_equal(v[0].recent_us, 0);
	assert_int_equal(v[THREAD_CPU_MAX_THREADS].recent_us, S);
	thread_cpu_free(h);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(windows),
		cmocka_unit_test(bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
