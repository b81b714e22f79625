/* Shared by the bench workloads: a start gate and one result line.
 *
 * The gate lets the harness attach a profiler to a process that exists but has not started
 * its measured phase, so attach time never counts as slowdown. */
#ifndef BENCH_WORKLOAD_H
#define BENCH_WORKLOAD_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static inline double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* With BENCH_GATE set to a fifo's path: block until the harness writes one byte to it. */
static inline void wait_gate(void)
{
	const char *path = getenv("BENCH_GATE");
	char byte;
	int fd;

	if (!path || !*path)
		return;
	fd = open(path, O_RDONLY);
	if (fd < 0 || read(fd, &byte, 1) != 1) {
		perror("bench gate");
		exit(2);
	}
	close(fd);
}

/* "RESULT wall=<s> user=<s> sys=<s>" on stderr: the measured phase's wall time and this
 * process's own CPU time (where in-kernel sampling cost is charged). */
static inline void report(double start)
{
	double wall = mono_s() - start;
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	fprintf(stderr, "RESULT wall=%.4f user=%.4f sys=%.4f\n", wall,
		ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
		ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
}

#endif
