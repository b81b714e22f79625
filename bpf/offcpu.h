/* Types shared by offcpu.bpf.c and collectors/offcpu.c. Stacks and count keys are cpu's
 * (bpf/cpu.h): the same naming code turns both into profile stacks. */
#ifndef APERTURE_BPF_OFFCPU_H
#define APERTURE_BPF_OFFCPU_H

#include "cpu.h"

/* The hints map (offcpu.bpf.c): one slot per value of tgid's low bits. */
#define OFFCPU_HINT_MASK 0xffffu
#define OFFCPU_HINT_SHARED 0xffffffffu

/* Value of the targets map: one entry per enabled tgid. */
struct offcpu_target {
	__u32 exec_gen;
	__u32 pad;
	__u64 drops;     /* waits of this target the kernel side could not keep */
};

/* A thread of an enabled target that is off CPU now: what it looked like at switch-out. */
struct offcpu_start {
	struct cpu_key key; /* counts key: thread, stacks, comm */
	__u64 ts;           /* switch-out, bpf_ktime_get_ns */
	__u32 state;        /* prev_state at switch-out: 0 = still runnable (preempted) */
	__u32 preempt;      /* the switch was a preemption */
	/* The user registers at switch-out when stacks are taken at switch-in (key's stacks
	 * are then the last kept wait's): where a thread off CPU now waits, for threads/dump. */
	__u64 user_ip, user_bp;
};

/* A worker thread was off CPU longer than the blocking threshold: sent at switch-in. */
struct offcpu_event {
	struct cpu_key key;
	__u64 off_ns;       /* switch-out, bpf_ktime_get_ns */
	__u64 dur_ns;
	__u32 state;
	__u32 preempt;
};

enum offcpu_stat {
	OFFCPU_STAT_WAITS,       /* waits of enabled targets at least offcpu_min_us long */
	OFFCPU_STAT_COUNTS_FULL, /* wait dropped: counts map full */
	OFFCPU_STAT_STACKS_FULL, /* stack not stored: stacks map full */
	OFFCPU_STAT_START_FULL,  /* switch-out not recorded: start map full */
	OFFCPU_STAT_EVENTS_LOST, /* blocking event dropped: ring buffer full */
	OFFCPU_STAT_STACK_WALKS, /* waits whose stacks were taken (a user and a kernel walk) */
	OFFCPU_STAT_NR,
};

#endif
