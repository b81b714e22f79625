/* The cumulative CPU time (utime+stime) of each thread of one process, recorded once a second
 * while the process is enabled: the last THREAD_CPU_HISTORY_S samples, plus the sample taken
 * at enable or reset, so threads/busy can rank threads by CPU used over the target's window
 * rather than over a short look at open. Bounded: a sample keeps at most
 * THREAD_CPU_MAX_THREADS threads (the lowest tids), so a process's history takes at most
 * (THREAD_CPU_HISTORY_S + 2) * THREAD_CPU_MAX_THREADS * 16 bytes (about 10 MB), typically a
 * few kB. Not locked: its owner's lock guards it. */
#ifndef APERTURE_STORE_THREAD_CPU_H
#define APERTURE_STORE_THREAD_CPU_H

#include <stdint.h>
#include "store/threads.h"

#define THREAD_CPU_HISTORY_S 600
#define THREAD_CPU_MAX_THREADS 1024

struct thread_cpu;

struct thread_cpu *thread_cpu_new(void);
void thread_cpu_free(struct thread_cpu *h);

/* Records l's threads' CPU time as read at at_us (CLOCK_MONOTONIC); the oldest sample goes
 * when the ring is full. 0 or -ENOMEM (nothing recorded). */
int thread_cpu_record(struct thread_cpu *h, const struct thread_list *l, uint64_t at_us);
/* Forgets every sample: l, read at at_us, becomes the base window 0 counts from. */
int thread_cpu_reset(struct thread_cpu *h, const struct thread_list *l, uint64_t at_us);

/* Sets each of l's threads' recent_us (l read at at_us) to the CPU it used since the
 * reference sample: the base for window_s 0, else the kept sample nearest to window_s
 * seconds before at_us. A thread absent from the reference (born since, or beyond the cap
 * then) counts all its CPU time. Sets l->interval_us to the span covered and l->window_s.
 * -ENOENT if nothing was recorded. */
int thread_cpu_apply(const struct thread_cpu *h, uint64_t window_s, uint64_t at_us,
		     struct thread_list *l);

#endif
