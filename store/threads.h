/* A process's threads as seen at one moment: what collectors/threads.c reads from /proc and
 * the process's memory, and what views/threads.c renders. Plain data, no code. */
#ifndef APERTURE_STORE_THREADS_H
#define APERTURE_STORE_THREADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct thread_info {
	pid_t tid;
	char name[16];
	char state;          /* /proc state letter: R, S, D, T, t, Z, X, I */
	uint64_t utime_us, stime_us; /* CPU time used since the thread started */
	uint64_t started_us; /* when the thread started, since boot (CLOCK_BOOTTIME) */
	uint64_t recent_us;  /* CPU time used in the interval busy covers, else 0 */
	uint64_t span_us;    /* that interval when it is the thread's own (since it started),
				else 0: the list's interval_us */
	long syscall;        /* system call it is blocked in, -1 if none or running */
	/* Blocked on a pthread mutex: the lock's address and the thread holding it (0 unknown). */
	uint64_t lock_addr;
	pid_t lock_owner;
	char *kstack;        /* kernel frames root first, ';' between them, "_[k]" suffixed;
			        NULL if unreadable */
	char *ustack;        /* user frames root first, or NULL if not known */
};

struct thread_list {
	pid_t pid;
	struct thread_info *v; /* ascending tid */
	size_t n;
	uint64_t interval_us;  /* of recent_us, 0 if not sampled or per thread (span_us) */
	/* recent_us from the per-second history of an enabled target (store/thread_cpu.h) over
	 * its window (0 = since enable or reset), rather than sampled at open. */
	bool from_history;
	uint64_t window_s;
};

/* A wait-for cycle: thread v[at[0]] waits for a lock held by v[at[1]], ..., and the last
 * waits for a lock held by v[at[0]]. */
struct deadlock {
	size_t *at;
	size_t n;
};

#endif
