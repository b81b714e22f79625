/* Shared by the workloads: work the optimizer cannot fold away, and a clock. */
#ifndef WORKLOAD_BURN_H
#define WORKLOAD_BURN_H

#include <stdlib.h>
#include <time.h>

/* Read at run time, so no loop count is a compile-time constant. */
static volatile unsigned long burn_chunk = 20000;
static volatile unsigned long burn_sink = 1;

/* n rounds of xorshift on a value the compiler cannot know: the same cost per round
 * wherever it is inlined, which is what makes the shares of the callers exact. */
static inline void burn(unsigned long n)
{
	unsigned long x = burn_sink | 1;

	for (unsigned long i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	burn_sink = x;
}

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* argv[i] as seconds, 0 (run until killed) when absent. */
static inline double arg_seconds(int argc, char **argv, int i)
{
	return argc > i ? atof(argv[i]) : 0;
}

/* The main of a one-loop workload: calls fn for argv[1] seconds (until killed when absent
 * or 0), then returns 0. Always inlined, so fn's caller in every stack is main. */
__attribute__((always_inline)) static inline int run_for_seconds(int argc, char **argv,
								 void (*fn)(void))
{
	double seconds = arg_seconds(argc, argv, 1), deadline = now_s() + seconds;

	while (!seconds || now_s() < deadline)
		fn();
	return 0;
}

#endif
