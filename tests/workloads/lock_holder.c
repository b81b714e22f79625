/* lock_holder ROUNDS HOLD_MS
 *
 * Ground truth for locks.json: a thread named "holder" takes a pthread mutex and keeps it
 * HOLD_MS milliseconds, ROUNDS times; each time a thread named "waiter" blocks on the mutex
 * (in waiter_main -> contend -> pthread_mutex_lock) until the holder lets go. Prints
 * "mutex 0x<address> holder <tid>", waits for a line on stdin, runs, prints "done <ns>" with
 * the time the waiter spent in pthread_mutex_lock, and exits at end of input. The waiter
 * starts waiting right after the holder took the lock, so its total wait is about ROUNDS *
 * HOLD_MS: more on a loaded machine, where the holder oversleeps, hence the measurement. */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static sem_t go, taken, released, holder_ready;
static int rounds, hold_ms;
static pid_t holder_tid;
static long long waited_ns;

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline)) static void contend(void)
{
	pthread_mutex_lock(&mutex);
	pthread_mutex_unlock(&mutex);
}

static void *waiter_main(void *arg)
{
	pthread_setname_np(pthread_self(), "waiter");
	for (int i = 0; i < rounds; i++) {
		long long t0;

		sem_wait(&taken);
		t0 = now_ns();
		contend();
		waited_ns += now_ns() - t0;
		sem_post(&released);
	}
	return NULL;
}

static void *holder_main(void *arg)
{
	struct timespec hold = { hold_ms / 1000, (hold_ms % 1000) * 1000000L };

	pthread_setname_np(pthread_self(), "holder");
	holder_tid = syscall(SYS_gettid);
	sem_post(&holder_ready);
	sem_wait(&go);
	for (int i = 0; i < rounds; i++) {
		pthread_mutex_lock(&mutex);
		sem_post(&taken);
		/* Give the waiter time to reach the futex: the wait measured starts there. */
		nanosleep(&hold, NULL);
		pthread_mutex_unlock(&mutex);
		sem_wait(&released);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t holder, waiter;
	char line[64];

	if (argc != 3)
		return 2;
	rounds = atoi(argv[1]);
	hold_ms = atoi(argv[2]);
	sem_init(&go, 0, 0);
	sem_init(&taken, 0, 0);
	sem_init(&released, 0, 0);
	sem_init(&holder_ready, 0, 0);
	pthread_create(&holder, NULL, holder_main, NULL);
	sem_wait(&holder_ready);
	printf("mutex %p holder %d\n", (void *)&mutex, (int)holder_tid);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	pthread_create(&waiter, NULL, waiter_main, NULL);
	sem_post(&go);
	pthread_join(holder, NULL);
	pthread_join(waiter, NULL);
	printf("done %lld\n", waited_ns);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}
