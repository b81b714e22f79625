/* futex_storm THREADS ITERS: THREADS threads take one pthread mutex ITERS times each, with a
 * short critical section where the holder yields every 32nd time, so waiters block in futex
 * (the peers' W3 workload). After the gate (bench.h). */
#include <pthread.h>
#include <sched.h>
#include "bench.h"

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long counter;
static long iters;

static void *worker(void *arg)
{
	for (long i = 0; i < iters; i++) {
		pthread_mutex_lock(&mutex);
		counter++;
		if ((i & 31) == 0)
			sched_yield();
		pthread_mutex_unlock(&mutex);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int nt = argc > 1 ? atoi(argv[1]) : 4;
	pthread_t t[64];
	double start;

	iters = argc > 2 ? atol(argv[2]) : 1000000;
	if (nt < 1 || nt > 64)
		return 2;
	wait_gate();
	start = mono_s();
	for (int i = 0; i < nt; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	report(start);
	return 0;
}
