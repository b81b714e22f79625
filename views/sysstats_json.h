/* syscalls.json and locks.json: sys_table snapshots rendered as JSON (pure, like views.h). */
#ifndef APERTURE_VIEWS_SYSSTATS_JSON_H
#define APERTURE_VIEWS_SYSSTATS_JSON_H

#include <stdio.h>
#include "store/sysstats.h"

/* Per system call by name, busiest (total time) first: count, errors by errno name, total,
 * max and mean latency, and the non-empty log2 buckets of the latency histogram. */
int view_syscalls_json(const struct sys_snapshot *s, FILE *out);

/* Per futex address, most waited-on first: waits, total and max wait, histogram, the threads
 * seen holding it and the top_stacks waiting stacks by wait time; then kernel locks, or why
 * they are not collected (kernel_error, NULL = they are). */
int view_locks_json(const struct sys_snapshot *s, unsigned top_stacks, const char *kernel_error,
		    FILE *out);

#endif
