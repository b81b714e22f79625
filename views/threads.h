/* Renderers of a process's threads (store/threads.h): pure, like views.h's. Native processes'
 * formats; a runtime with its own thread model (the JVM) renders its own. */
#ifndef APERTURE_VIEWS_THREADS_H
#define APERTURE_VIEWS_THREADS_H

#include <stdio.h>
#include "store/threads.h"

/* "S (sleeping)" for 'S'. */
const char *view_thread_state(char state);

/* Threads by recent_us, then total CPU time: `cpu% recent_us total_us tid name`, with '#'
 * comment lines saying the interval and the evidence. */
int view_threads_busy(const struct thread_list *l, FILE *out);
/* That order: l's threads, busiest first; the caller frees the array. NULL: no memory. */
const struct thread_info **view_threads_busy_order(const struct thread_list *l);

/* Every thread: name, tid, state, CPU time, system call, the mutex it waits for and its
 * holder, user and kernel stacks leaf first (jstack's order). */
int view_threads_dump(const struct thread_list *l, FILE *out);

/* Each cycle jstack-style ("Found one native deadlock:"); nothing when there is none. */
int view_deadlocks(const struct thread_list *l, const struct deadlock *d, size_t n, FILE *out);
/* The same as JSON; nothing when there is none. */
int view_deadlocks_json(const struct thread_list *l, const struct deadlock *d, size_t n,
			FILE *out);

#endif
