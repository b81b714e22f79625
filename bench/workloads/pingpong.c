/* pingpong [ROUND_TRIPS]: two threads pass one byte back and forth over two pipes, so each
 * round trip is two context switches (on one CPU) or two wake-ups: the worst case for a
 * sched_switch tracer. Measured phase: all the round trips, after the gate (bench.h). */
#include <pthread.h>
#include "bench.h"

static int ping[2], pong[2];
static long trips;

__attribute__((noinline)) static void *ponger(void *arg)
{
	char c;

	for (long i = 0; i < trips; i++)
		if (read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1)
			break;
	return arg;
}

__attribute__((noinline)) static void pinger(void)
{
	char c = 'x';

	for (long i = 0; i < trips; i++)
		if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1)
			break;
}

int main(int argc, char **argv)
{
	pthread_t t;
	double start;

	trips = argc > 1 ? atol(argv[1]) : 100000;
	if (pipe(ping) || pipe(pong))
		return 1;
	wait_gate();
	start = mono_s();
	pthread_create(&t, NULL, ponger, NULL);
	pinger();
	pthread_join(t, NULL);
	report(start);
	return 0;
}
