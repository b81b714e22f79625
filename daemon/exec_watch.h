/* New processes as the kernel makes them: a BPF program on the sched_process_exec and
 * sched_process_fork raw tracepoints sends each new program's (or forked process's) pid and
 * comm through a ring buffer, and a thread of the watch calls back with them at once. The
 * rules use it to enable a process at its exec rather than at the next /proc poll. */
#ifndef APERTURE_DAEMON_EXEC_WATCH_H
#define APERTURE_DAEMON_EXEC_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct exec_watch;

/* Called on the watch's thread, for each process in the order the kernel made them. */
typedef void exec_watch_fn(void *ctx, pid_t pid, const char *comm);

/* Loads the program, attaches it and starts the thread: 0, or a negative errno with why (the
 * kernel refused the program or the tracepoint). */
int exec_watch_new(exec_watch_fn *fn, void *ctx, struct exec_watch **out, char *why,
		   size_t why_size);
/* Stops the thread (a callback in progress finishes first) and unloads the program. */
void exec_watch_free(struct exec_watch *w);

/* Events seen, and those the ring buffer could not take (the daemon fell behind). */
void exec_watch_counts(struct exec_watch *w, uint64_t *events, uint64_t *lost);

#endif
