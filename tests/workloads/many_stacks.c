/* Ground truth: 2^LEVELS (16384) distinct call paths, visited in turn by every thread.
 *
 * main -> walk(c, 13) -> ... -> walk(c, 0) -> work, where the frame at level i is step0 or
 * step1 as bit i of a counter says. A return address lies in its caller's body, so each path
 * is a distinct stack of addresses: more stacks than the kernel's stacks map is allowed to
 * fill before the daemon gives it a fresh one.
 *
 * usage: many_stacks SECONDS [THREADS [sleep]]
 *
 * With "sleep", work() sleeps a microsecond instead of spinning: every path goes off CPU,
 * thousands of new off-CPU stacks a second whatever CPU the machine spares.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEVELS 14
#define NOINLINE __attribute__((noinline))

static volatile uint64_t sink;
static volatile int spins = 200;
static int sleepy;

NOINLINE static uint64_t work(uint64_t x)
{
	if (sleepy)
		nanosleep(&(struct timespec){ .tv_nsec = 1000 }, NULL);
	for (int i = 0; !sleepy && i < spins; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

NOINLINE static uint64_t step0(uint64_t c, int level);
NOINLINE static uint64_t step1(uint64_t c, int level);

static uint64_t walk(uint64_t c, int level)
{
	if (level < 0)
		return work(c);
	return ((c >> level) & 1 ? step1(c, level - 1) : step0(c, level - 1)) + 1;
}

NOINLINE static uint64_t step0(uint64_t c, int level) { return walk(c, level) + 3; }
NOINLINE static uint64_t step1(uint64_t c, int level) { return walk(c, level) * 5; }

static double deadline;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *run(void *arg)
{
	uint64_t acc = 0;

	for (uint64_t c = (uintptr_t)arg; now() < deadline; c++)
		acc += walk(c, LEVELS - 1);
	sink = acc;
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 2 ? atoi(argv[2]) : 1;

	sleepy = argc > 3 && !strcmp(argv[3], "sleep");
	pthread_t th[16];

	deadline = now() + (argc > 1 ? atof(argv[1]) : 10);
	if (threads < 1 || threads > 16)
		threads = 1;
	for (int i = 1; i < threads; i++)
		pthread_create(&th[i], NULL, run, (void *)(uintptr_t)(i * 7919));
	run(NULL);
	for (int i = 1; i < threads; i++)
		pthread_join(th[i], NULL);
	return 0;
}
