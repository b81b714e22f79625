/* A native process's threads, read now from /proc/<pid>/task and the process's memory: names,
 * states, CPU time, kernel stacks, and which pthread mutex each blocked thread waits for and
 * who holds it, so that wait-for cycles (deadlocks) show without instrumenting the program. */
#ifndef APERTURE_COLLECTORS_THREADS_H
#define APERTURE_COLLECTORS_THREADS_H

#include <stdbool.h>
#include "store/threads.h"

enum threads_detail {
	THREADS_BASIC = 0,        /* name, state, CPU time */
	THREADS_LOCKS = 1 << 0,   /* system call, mutex waited for and its holder */
	THREADS_KSTACKS = 1 << 1, /* kernel stacks (needs root) */
};

/* Every thread of pid. -ESRCH if pid is gone, -ENOMEM. */
int threads_read(pid_t pid, unsigned detail, struct thread_list *out);
/* The same, with each thread's CPU time since it started as recent_us, over span_us (its
 * age): one read, no waiting, for a process that has no history. */
int threads_read_since_start(pid_t pid, struct thread_list *out);
/* One thread; -ENOENT if tid is not a thread of pid. */
int threads_read_one(pid_t pid, pid_t tid, struct thread_info *out);
void threads_free(struct thread_list *l);
void thread_info_fini(struct thread_info *t);

/* Parsers of /proc text (exposed for tests/fuzz): 0 or -EINVAL. */
/* /proc/<pid>/task/<tid>/stat: name, state, CPU times and start time (clock ticks of ticks a
 * second). */
int threads_parse_stat(const char *text, long ticks, struct thread_info *t);
/* /proc/<pid>/task/<tid>/syscall: the number and first three arguments. */
int threads_parse_syscall(const char *text, uint64_t *nr, uint64_t *arg0, uint64_t *arg1,
			  uint64_t *arg2);
/* /proc/<pid>/task/<tid>/stack (modified in place) as frames root first, "_[k]" suffixed,
 * ';' between them: malloc'd, NULL if there is none. */
char *threads_parse_kstack(char *text);

/* The wait-for cycles among l's threads (each reported once), into a malloc'd array. */
int threads_find_deadlocks(const struct thread_list *l, struct deadlock **out, size_t *n);
void deadlocks_free(struct deadlock *d, size_t n);

#endif
