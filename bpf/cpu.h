/* Types shared by cpu.bpf.c and collectors/cpu.c. */
#ifndef APERTURE_BPF_CPU_H
#define APERTURE_BPF_CPU_H

#define CPU_MAX_DEPTH 127 /* perf_event_max_stack's default */
#define CPU_COMM_LEN 16

/* Value of the targets map: one entry per enabled tgid. */
struct cpu_target {
	__u32 exec_gen; /* bumped by each exec, so samples are symbolized with the right maps */
	__u32 pad;
	__u64 drops;    /* samples of this target the kernel side could not keep */
	__u32 fork_root; /* 0, or the enabled tgid whose forks are followed: children it and
			    its descendants fork get an entry with the same fork_root */
	__u32 pad2;
};

/* Key of a counts map: samples are aggregated in the kernel by this. */
struct cpu_key {
	__u32 pid;
	__u32 tid;
	__u32 exec_gen;
	__u32 flags;    /* CPU_KEY_* */
	__u64 ustack;   /* hash of the user stack, 0 = none */
	__u64 kstack;   /* hash of the kernel stack, 0 = none */
	char comm[CPU_COMM_LEN];
};

#define CPU_KEY_USTACK_ERR (1u << 0) /* bpf_get_stack failed for the user stack */

/* Value of a stacks map, keyed by the stack's hash. Unused slots are zero. */
struct cpu_stack {
	__u64 ips[CPU_MAX_DEPTH];
};

/* Per-CPU counters, index by enum cpu_stat. */
enum cpu_stat {
	CPU_STAT_SAMPLES,      /* samples of enabled targets */
	CPU_STAT_COUNTS_FULL,  /* sample dropped: counts map full */
	CPU_STAT_STACKS_FULL,  /* stack not stored: stacks map full (sample kept, stack lost) */
	CPU_STAT_USTACK_ERR,   /* bpf_get_stack failed on the user stack */
	CPU_STAT_KSTACK_ERR,   /* bpf_get_stack failed on the kernel stack */
	CPU_STAT_NR,
};

#endif
