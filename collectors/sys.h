/* System calls and lock waits, two collectors over one BPF object (bpf/sys.bpf.c): syscalls
 * (raw tracepoints on sys_enter/sys_exit time every system call of its targets) and locks
 * (the futex system calls' own tracepoints time futex waits, contention_begin/end kernel lock
 * waits where the kernel has them). The kernel aggregates; once a second the daemon drains
 * the aggregates into each target's sys_table (syscalls.json, locks.json) and its locks
 * profile (wait microseconds by waiting stack). */
#ifndef APERTURE_COLLECTORS_SYS_H
#define APERTURE_COLLECTORS_SYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "store/profile.h"
#include "store/sysstats.h"
#include "symbols/symbols.h"

struct sys_collector;

struct sys_collector_stats {
	uint64_t calls;        /* system calls of enabled processes timed */
	uint64_t map_full;     /* aggregates dropped: a stats map was full */
	uint64_t stacks_full;  /* lock waits kept without their stack */
	bool syscalls;         /* sys_enter/sys_exit attached (a target has syscalls on) */
	bool locks;            /* the futex tracepoints attached (a target has locks on) */
	bool kernel_locks;     /* contention_begin/end are attached with them */
};

/* Loads and verifies the BPF programs; attaches nothing yet. -errno with a reason. */
int sys_collector_new(struct symbolizer *syms, struct sys_collector **out, char *errbuf,
		      size_t errlen);
void sys_collector_free(struct sys_collector *c);

/* Starts timing what of pid (SYS_TARGET_SYSCALLS: its system calls, SYS_TARGET_LOCKS: its lock
 * waits) into table and locks (both referenced at pid's first add). -ESRCH if gone, -E2BIG if
 * too many targets. */
int sys_collector_add(struct sys_collector *c, pid_t pid, uint32_t what,
		      struct sys_table *table, struct profile *locks, char *errbuf, size_t errlen);

/* Stops timing what of pid, after moving its last aggregates into its table and profile (at
 * second now). */
void sys_collector_remove(struct sys_collector *c, pid_t pid, uint32_t what, int64_t now);

/* Moves the kernel's aggregates into the targets' tables and profiles. */
int sys_collector_drain(struct sys_collector *c, int64_t now);

void sys_collector_get_stats(struct sys_collector *c, struct sys_collector_stats *out);

/* Why kernel lock contention is not collected: "" if it is, or no target has been enabled. */
void sys_collector_kernel_locks_error(struct sys_collector *c, char *buf, size_t len);

#endif
