/* What targets/<pid>/threads/ and blocking.json show, gathered for the fs nodes: a native
 * process's threads from /proc and its memory, with the user stacks the off-CPU collector
 * recorded. A runtime with its own thread model (the JVM) gets its own functions beside
 * these, chosen per target by the node's caller. */
#ifndef APERTURE_DAEMON_THREADS_H
#define APERTURE_DAEMON_THREADS_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

struct aperture;

enum thread_file {
	THREAD_FILE_NAME,
	THREAD_FILE_STATE,
	THREAD_FILE_CPU_US,
};

/* Each returns 0 (nothing written for a process that is gone) or a negative errno. */
/* threads/busy: CPU used in the target's window (the kernel's per-thread accounting) for
 * every process; an attached JVM's threads named by Java, with stacks. */
int target_threads_busy(struct aperture *a, pid_t pid, FILE *out);
int native_threads_dump(struct aperture *a, pid_t pid, FILE *out);
int native_threads_deadlocks(struct aperture *a, pid_t pid, bool json, FILE *out);
/* threads/<tid>/<file>: -ENOENT if tid is not a thread of pid. */
int native_thread_file(struct aperture *a, pid_t pid, pid_t tid, enum thread_file which,
		       FILE *out);
bool native_thread_exists(pid_t pid, pid_t tid);
/* The tids of pid, ascending; *tids is the caller's to free. */
int native_thread_ids(pid_t pid, pid_t **tids, size_t *n);

int target_blocking_json(struct aperture *a, pid_t pid, FILE *out);

#endif
