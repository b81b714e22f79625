/* cpu_split [SECONDS [THREADS [DELAY_MS]]]
 *
 * Ground truth: the main thread (named "cpu_split") runs main -> a -> b and main -> c, with
 * b doing 7 and c doing 3 units of the same work per round: b has 70 % and c 30 % of the
 * samples of b + c, and every b stack passes through a. a and main do no work of their own.
 * Runs SECONDS (0 or absent: until killed), then exits 0, so it is also "a program that
 * exits after a known time".
 * With THREADS > 0, that many threads start DELAY_MS after startup, named "split-w0",
 * "split-w1", ... (pthread_setname_np); each burns in worker -> w, for the test that threads
 * created after enable are profiled. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include "burn.h"

__attribute__((noinline)) void b(void) { burn(7 * burn_chunk); }
__attribute__((noinline)) void a(void) { b(); }
__attribute__((noinline)) void c(void) { burn(3 * burn_chunk); }
__attribute__((noinline)) void w(void) { burn(burn_chunk); }

static double deadline;

static void *worker(void *arg)
{
	char name[16];

	snprintf(name, sizeof(name), "split-w%ld", (long)arg);
	pthread_setname_np(pthread_self(), name);
	while (!deadline || now_s() < deadline)
		w();
	return NULL;
}

int main(int argc, char **argv)
{
	double seconds = arg_seconds(argc, argv, 1);
	long threads = argc > 2 ? atol(argv[2]) : 0;
	long delay_ms = argc > 3 ? atol(argv[3]) : 0;
	double start = now_s(), spawn_at = start + delay_ms / 1000.0;
	pthread_t tid;

	deadline = seconds > 0 ? start + seconds : 0;
	for (;;) {
		double t = now_s();

		if (deadline && t >= deadline)
			return 0;
		for (; threads > 0 && t >= spawn_at; threads--)
			pthread_create(&tid, NULL, worker, (void *)(threads - 1));
		a();
		c();
	}
}
