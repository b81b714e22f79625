/* On-CPU sampling: a software cpu-clock perf event per CPU, shared by all targets, and a BPF
 * program that aggregates samples of enabled processes in the kernel (bpf/cpu.bpf.c). Once a
 * second the daemon drains the kernel's aggregates, symbolizes each new stack once, and adds
 * the counts to each target's profile. */
#ifndef APERTURE_COLLECTORS_CPU_H
#define APERTURE_COLLECTORS_CPU_H

#include <stdint.h>
#include <sys/types.h>
#include "store/profile.h"
#include "symbols/symbols.h"

struct cpu_collector;

/* How user stacks are walked (config/unwind). fp: bpf_get_stack follows frame pointers in the
 * kernel, aggregated there. dwarf: the top of the user stack is copied at each sample and
 * unwound in the daemon with the binaries' CFI. auto: dwarf for a process whose executable
 * does not keep frame pointers (or whose code can't be judged), fp for one that does. */
enum cpu_unwind {
	CPU_UNWIND_FP,
	CPU_UNWIND_DWARF,
	CPU_UNWIND_AUTO,
};

/* What status shows of one target. */
struct cpu_target_info {
	int dwarf;             /* its user stacks are unwound from CFI */
	uint64_t frames_named; /* user frames of its samples that got a function name */
	uint64_t frames_total;
	int java_signo;        /* its JVM's agent walks Java stacks on this signal; 0: not */
	uint64_t java_merged;  /* samples given the Java frames of their thread */
	uint64_t java_alone;   /* samples whose Java stack never came (VM threads, say) */
};

struct cpu_collector_stats {
	uint64_t samples;      /* taken in the kernel for enabled processes */
	uint64_t counts_full;  /* samples dropped: the kernel's counts map was full */
	uint64_t stacks_full;  /* samples dropped: the kernel's stacks map was full */
	uint64_t ustack_errors; /* user stack could not be read (sample kept without it) */
	uint64_t kstack_errors;
	uint64_t stacks_lost;  /* samples dropped: their stack was gone when drained */
	uint64_t stack_maps_renewed; /* times the kernel's stacks map was filling up and replaced */
	uint64_t stacks_nomem; /* samples dropped: no stack entry to allocate, nor ring room */
	uint64_t stacks_spilled; /* stacks sent through the ring buffer: no entry to allocate */
	uint64_t ringbuf_full; /* dwarf-mode samples dropped: the ring buffer was full */
	uint64_t dwarf_samples; /* dwarf-mode samples unwound in userspace */
	int running;           /* perf events open */
};

/* Loads and verifies the BPF programs; opens no perf event yet. -errno (e.g. -EPERM without
 * CAP_BPF/CAP_PERFMON) with a reason in errbuf. */
int cpu_collector_new(struct symbolizer *syms, unsigned frequency_hz,
		      struct cpu_collector **out, char *errbuf, size_t errlen);
void cpu_collector_free(struct cpu_collector *c);

/* Applies a new sampling frequency, re-opening the perf events if they are open.
 * -errno with a reason in errbuf if the kernel refuses it (nothing changes then). */
int cpu_collector_set_frequency(struct cpu_collector *c, unsigned hz, char *errbuf,
				size_t errlen);

/* Starts sampling process pid into profile (referenced). Reads the process's mappings now, so
 * its samples can be named even after it exits. -ESRCH if gone, -E2BIG if too many targets. */
int cpu_collector_add(struct cpu_collector *c, pid_t pid, struct profile *profile,
		      char *errbuf, size_t errlen);

/* Stops sampling pid, after moving its last samples into its profile (at second now): the
 * profile is final when this returns. Returns the samples of pid the kernel dropped during
 * this enable. */
uint64_t cpu_collector_remove(struct cpu_collector *c, pid_t pid, int64_t now);

/* Also samples every process pid (added already) forks from now on, and those they fork,
 * into pid's profile, until pid is removed. -ENOENT if pid was not added. */
int cpu_collector_follow_forks(struct cpu_collector *c, pid_t pid);

/* An fd that polls readable when the collector (on a thread of its own, as the kernel
 * reports them) has read the mappings of followed processes that forked or exec'd, and read
 * them again once their libraries were mapped: then call cpu_collector_follow_events, which
 * clears it. -ENOENT before cpu_collector_follow_forks. */
int cpu_collector_follow_fd(struct cpu_collector *c);
int cpu_collector_follow_events(struct cpu_collector *c);

/* Moves the kernel's aggregates into the profiles, counted at second now. */
int cpu_collector_drain(struct cpu_collector *c, int64_t now);

void cpu_collector_get_stats(struct cpu_collector *c, struct cpu_collector_stats *out);

/* Applies a new unwinding mode to every target, enabled or enabled later. */
void cpu_collector_set_unwind(struct cpu_collector *c, enum cpu_unwind mode);

/* Names stacks afresh from now on (after demangling was switched, say). */
void cpu_collector_forget_names(struct cpu_collector *c);

/* -ENOENT if pid is not enabled. */
int cpu_collector_target_info(struct cpu_collector *c, pid_t pid, struct cpu_target_info *out);

/* Samples of pid dropped in the kernel during the current enable (0 if not enabled). */
uint64_t cpu_collector_target_drops(struct cpu_collector *c, pid_t pid);

/* Java frames for a JVM (collectors/cpu_java.c). signo > 0: BPF sends signo to each thread
 * of pid it samples, whose agent then walks the thread's Java stack; pid's samples are
 * unwound in userspace and wait for their Java stacks. 0 turns it off, adding what waits.
 * -ENOENT if pid is not enabled, -EIO if the kernel refused. */
int cpu_collector_java(struct cpu_collector *c, pid_t pid, int signo);

/* A Java stack the agent walked on thread tid at ns (CLOCK_MONOTONIC), root first. */
struct cpu_java_stack {
	pid_t tid;
	uint64_t ns;
	size_t n;
	char **frames;
};

/* Gives pid's waiting samples the Java stacks walked for them. */
int cpu_collector_java_stacks(struct cpu_collector *c, pid_t pid,
			      const struct cpu_java_stack *v, size_t n);

#endif
