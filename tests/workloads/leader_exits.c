/* leader_exits [SECONDS]
 *
 * The main thread starts a worker and leaves with pthread_exit: the process lives on in the
 * worker, which burns in spin_in_worker -> burn for SECONDS (until killed when absent or 0).
 * The leader is then a zombie: /proc/PID/maps, map_files and root show nothing, while
 * /proc/PID/task/TID/ shows the address space. Ground truth: every sample is the worker's,
 * in spin_in_worker. */
#include <pthread.h>
#include "burn.h"

#define NOINLINE __attribute__((noinline))

static double seconds;

NOINLINE static void spin_in_worker(void)
{
	burn(burn_chunk);
}

static void *worker(void *arg)
{
	double deadline = now_s() + seconds;

	while (!seconds || now_s() < deadline)
		spin_in_worker();
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;

	seconds = arg_seconds(argc, argv, 1);
	if (pthread_create(&t, NULL, worker, NULL))
		return 1;
	pthread_exit(NULL);
}
