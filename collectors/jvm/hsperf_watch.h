/* HotSpot JVMs found as they start, without polling: a JVM keeping perf data (the default,
 * -XX:+UsePerfData) creates /tmp/hsperfdata_<user>/<pid> under its own root, keeps it mapped
 * and removes it at exit. A thread watches, with inotify, the /tmp of each root it is told of
 * (the daemon's own from the start) and the hsperfdata folders in it, and keeps the set of
 * live JVMs so found. Everything is bounded; what is past a bound goes unwatched and is
 * counted. */
#ifndef APERTURE_COLLECTORS_JVM_HSPERF_WATCH_H
#define APERTURE_COLLECTORS_JVM_HSPERF_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HSPERF_MAX_ROOTS 64
#define HSPERF_MAX_FOLDERS 1024
#define HSPERF_MAX_JVMS 1024

struct hsperf_watch;

/* Starts the thread, watching the daemon's own /tmp. why: the reason on error. */
int hsperf_watch_new(struct hsperf_watch **out, char *why, size_t whylen);
void hsperf_watch_free(struct hsperf_watch *w);

/* Tells the watch of processes seen (a listing of targets/, an enable): the /tmp of any of them
 * whose root is new to it gets watched, in the background. Copies pids; never waits on a
 * filesystem. */
void hsperf_watch_note(struct hsperf_watch *w, const pid_t *pids, size_t n);

/* Whether pid is a JVM the watch found. */
bool hsperf_watch_has(struct hsperf_watch *w, pid_t pid);

struct hsperf_watch_stats {
	unsigned jvms, roots, folders;
	uint64_t rescans;    /* after the kernel's event queue overflowed */
	uint64_t over_limit; /* times a root, folder or JVM was left out at a bound */
};

/* The figures, and the JVMs found (s->jvms of them, ascending) in *pids, the caller's to
 * free. */
int hsperf_watch_snapshot(struct hsperf_watch *w, struct hsperf_watch_stats *s, pid_t **pids);

#endif
