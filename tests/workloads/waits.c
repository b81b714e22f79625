#define _GNU_SOURCE
/* waits MODE: threads that wait in ways the test controls, for the off-CPU, blocking and
 * threads/ tests. Each mode prints "ready\n" once its threads exist and are named.
 *
 *   sleep     thread "sleeper" waits for a line on stdin, then sleeps 200 ms five times in
 *             sleeper_main -> sleep_loop -> raw_nanosleep, prints "done MICROSECONDS" (the
 *             five sleeps' wall time, wake-up latency included), waits on.
 *   block     thread "tokio-runtime-w" reads stdin byte by byte in worker_main -> raw_read,
 *             printing "got" after each: the test decides how long each read blocks.
 *   deadlock  on a line on stdin, "locker-a" (a_main) takes m1 then m2 while "locker-b"
 *             (b_main) takes m2 then m1: a deadlock, after "locked" is printed.
 *   contended "holder" takes m1 and sleeps; "waiter" blocks on m1: a wait, no cycle.
 *   busy      "spinner" spins, "idler" sleeps.
 *   switch    "spin-a" spins and "spin-b" waits; on a line on stdin, "spin-b" spins and
 *             "spin-a" stops, after "switched" is printed.
 *   pingpong  on a line on stdin, "pinger" and "ponger" pass a byte back and forth over two
 *             pipes 20000 times (two short waits a round trip), then "done" is printed.
 *
 * System calls the stacks must show are made by raw_* functions of ours: libc's wrappers
 * have no frame pointer and would hide their caller. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

static pthread_mutex_t m1 = PTHREAD_MUTEX_INITIALIZER, m2 = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both_hold;

__attribute__((noinline)) long raw_syscall3(long nr, long a, long b, long c)
{
#if defined(__x86_64__)
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
#else
	return syscall(nr, a, b, c);
#endif
}

__attribute__((noinline)) long raw_nanosleep(const struct timespec *ts)
{
	return raw_syscall3(SYS_nanosleep, (long)ts, 0, 0);
}

__attribute__((noinline)) long raw_read(int fd, void *buf, unsigned long n)
{
	return raw_syscall3(SYS_read, fd, (long)buf, n);
}

static void say(const char *what)
{
	printf("%s\n", what);
	fflush(stdout);
}

static void wait_line(void)
{
	char c;

	while (read(0, &c, 1) == 1 && c != '\n')
		;
}

static void park(void)
{
	for (;;)
		pause();
}

__attribute__((noinline)) void sleep_loop(void)
{
	struct timespec ts = { 0, 200 * 1000 * 1000 };

	for (int i = 0; i < 5; i++)
		raw_nanosleep(&ts);
}

static void *sleeper_main(void *arg)
{
	struct timespec t0, t1;
	char done[64];

	wait_line();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	sleep_loop();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	snprintf(done, sizeof(done), "done %lld", (t1.tv_sec - t0.tv_sec) * 1000000LL +
		 (t1.tv_nsec - t0.tv_nsec) / 1000);
	say(done);
	park();
	return NULL;
}

__attribute__((noinline)) void worker_main(void)
{
	char c;

	while (raw_read(0, &c, 1) == 1)
		say("got");
	park();
}

static void *worker_thread(void *arg)
{
	worker_main();
	return NULL;
}

__attribute__((noinline)) void grab(pthread_mutex_t *first, pthread_mutex_t *second)
{
	pthread_mutex_lock(first);
	pthread_barrier_wait(&both_hold);
	pthread_mutex_lock(second);
	pthread_mutex_unlock(second);
	pthread_mutex_unlock(first);
}

__attribute__((noinline)) void *a_main(void *arg)
{
	grab(&m1, &m2);
	return NULL;
}

__attribute__((noinline)) void *b_main(void *arg)
{
	grab(&m2, &m1);
	return NULL;
}

static void *holder_main(void *arg)
{
	pthread_mutex_lock(&m1);
	park();
	return NULL;
}

static void *waiter_main(void *arg)
{
	usleep(100 * 1000); /* after holder took m1 */
	pthread_mutex_lock(&m1);
	return NULL;
}

static void *spinner_main(void *arg)
{
	for (volatile unsigned long i = 0;; i++)
		;
	return NULL;
}

static volatile int switched;

static void *spin_a_main(void *arg)
{
	for (volatile unsigned long i = 0; !switched; i++)
		;
	park();
	return NULL;
}

static void *spin_b_main(void *arg)
{
	while (!switched)
		usleep(10 * 1000);
	for (volatile unsigned long i = 0;; i++)
		;
	return NULL;
}

static void *idler_main(void *arg)
{
	park();
	return NULL;
}

#define ROUND_TRIPS 20000
static int ping[2], pong[2];

static void *ponger_main(void *arg)
{
	char c;

	for (int i = 0; i < ROUND_TRIPS; i++)
		if (raw_read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1)
			exit(1);
	park();
	return NULL;
}

static void *pinger_main(void *arg)
{
	char c = 'x';

	wait_line();
	for (int i = 0; i < ROUND_TRIPS; i++)
		if (write(ping[1], &c, 1) != 1 || raw_read(pong[0], &c, 1) != 1)
			exit(1);
	say("done");
	park();
	return NULL;
}

static pthread_t start(void *(*fn)(void *), const char *name)
{
	pthread_t t;

	if (pthread_create(&t, NULL, fn, NULL))
		exit(1);
	pthread_setname_np(t, name);
	return t;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (!strcmp(mode, "sleep")) {
		start(sleeper_main, "sleeper");
	} else if (!strcmp(mode, "block")) {
		start(worker_thread, "tokio-runtime-w");
	} else if (!strcmp(mode, "deadlock")) {
		say("ready");
		wait_line();
		pthread_barrier_init(&both_hold, NULL, 2);
		start(a_main, "locker-a");
		start(b_main, "locker-b");
		say("locked");
		park();
	} else if (!strcmp(mode, "contended")) {
		start(holder_main, "holder");
		start(waiter_main, "waiter");
	} else if (!strcmp(mode, "busy")) {
		start(spinner_main, "spinner");
		start(idler_main, "idler");
	} else if (!strcmp(mode, "switch")) {
		start(spin_a_main, "spin-a");
		start(spin_b_main, "spin-b");
		say("ready");
		wait_line();
		switched = 1;
		say("switched");
		park();
	} else if (!strcmp(mode, "pingpong")) {
		if (pipe(ping) || pipe(pong))
			return 1;
		start(ponger_main, "ponger");
		start(pinger_main, "pinger");
	} else {
		fprintf(stderr, "usage: waits sleep|block|deadlock|contended|busy|switch|pingpong\n");
		return 2;
	}
	say("ready");
	park();
	return 0;
}
