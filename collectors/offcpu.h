/* Off-CPU time and blocked workers: a raw tracepoint on sched_switch, attached while a target
 * is enabled, times each thread of an enabled process that leaves the CPU and adds the time
 * it stayed away, in the kernel, to a (thread, stacks) sum; the stacks are taken when it
 * comes back, for waits that are kept, where the kernel allows (bpf/offcpu.bpf.c).
 * Once a second the daemon drains the sums into each target's profile (microseconds), the
 * blocking events of worker threads into its blocking log, and re-discovers its workers. */
#ifndef APERTURE_COLLECTORS_OFFCPU_H
#define APERTURE_COLLECTORS_OFFCPU_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "store/blocking.h"
#include "store/profile.h"
#include "collectors/workers.h"
#include "symbols/symbols.h"

struct offcpu_collector;

struct offcpu_collector_stats {
	uint64_t waits;        /* waits of enabled targets kept (at least offcpu_min_us) */
	uint64_t counts_full;  /* waits dropped: counts map full */
	uint64_t stacks_full;  /* stacks not stored: stacks map full */
	uint64_t start_full;   /* switch-outs not recorded: start map full */
	uint64_t events_lost;  /* blocking events dropped: ring buffer full */
	uint64_t stacks_lost;  /* waits dropped: their stack was gone when drained */
	uint64_t stack_walks;  /* waits whose stacks were taken */
	int running;           /* sched_switch program attached */
	bool at_switch_in;     /* stacks are taken at switch-in, for kept waits only */
};

struct cpu_collector;

/* Loads and verifies the BPF programs; attaches nothing yet. Stacks are named by cpu's
 * naming (its symbolizer, its kind of caches), so both profiles name frames alike. -errno
 * with a reason. */
int offcpu_collector_new(struct cpu_collector *cpu, struct offcpu_collector **out,
			 char *errbuf, size_t errlen);
void offcpu_collector_free(struct offcpu_collector *c);

/* Waits shorter than min_us are dropped in the kernel; a worker off CPU for blocking_ms or
 * longer is a blocking event. */
void offcpu_collector_set_limits(struct offcpu_collector *c, uint64_t min_us,
				 uint64_t blocking_ms);

/* Starts collecting for pid into profile and log (both referenced). -ESRCH if gone. */
int offcpu_collector_add(struct offcpu_collector *c, pid_t pid, struct profile *profile,
			 struct blocking_log *log, char *errbuf, size_t errlen);
/* Stops collecting for pid after draining it (now: the second counted). Returns the waits the
 * kernel dropped during this enable. */
uint64_t offcpu_collector_remove(struct offcpu_collector *c, pid_t pid, int64_t now);

/* Worker threads are those whose name starts with workers (config/workers); "" = discover. */
void offcpu_collector_set_workers(struct offcpu_collector *c, const char *workers);

/* Drains sums and events into the targets' profiles and logs, counted at second now, and
 * re-discovers each target's worker threads. */
int offcpu_collector_drain(struct offcpu_collector *c, int64_t now);

/* The user stack thread tid of enabled target pid went off CPU with, if it is off CPU now
 * (frame pointers, as bpf_get_stack walks them): frames root first, ';' between them, into
 * buf. -ENOENT if not known. */
int offcpu_collector_thread_stack(struct offcpu_collector *c, pid_t pid, pid_t tid, char *buf,
				  size_t len);

/* A copy of the worker threads watched for enabled target pid (workers_fini it); -ENOENT
 * if pid is not enabled. */
int offcpu_collector_workers(struct offcpu_collector *c, pid_t pid, struct workers *out);

void offcpu_collector_get_stats(struct offcpu_collector *c, struct offcpu_collector_stats *out);

#endif
