/* Types shared by cpu.bpf.c and collectors/cpu.c. */
#ifndef APERTURE_BPF_CPU_H
#define APERTURE_BPF_CPU_H

#define CPU_MAX_DEPTH 127 /* perf_event_max_stack's default */
#define CPU_COMM_LEN 16
/* User stack bytes copied per sample for targets unwound in userspace (perf's default is
 * 8 KiB; interpreters' frames are big). A multiple of the page size. */
#define CPU_STACK_BYTES 16384

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

/* A sample of a target unwound in userspace (dwarf mode): the user registers the unwinder
 * starts from and the top of the user stack, copied at the tick. Not aggregated in the
 * kernel: each one goes through a ring buffer. */
enum cpu_record_kind {
	CPU_RECORD_DWARF = 1, /* struct cpu_dwarf_hdr + stack bytes */
	CPU_RECORD_STACK,     /* struct cpu_stack_record */
};

struct cpu_dwarf_hdr {
	__u32 kind;      /* CPU_RECORD_DWARF */
	__u32 pid;
	__u32 tid;
	__u32 exec_gen;
	__u32 stack_len; /* bytes of stack[] that follow, copied from sp up */
	__u32 pad;
	__u64 kstack;    /* hash of the kernel stack in the stacks map, 0 = none */
	__u64 ns;        /* CLOCK_MONOTONIC: matches a JVM agent's Java stack of this sample */
	__u64 ip, sp, bp;
	char comm[CPU_COMM_LEN];
};

/* The per-CPU scratch a dwarf sample is built in. The slack after the stack lets the copy
 * loop read a page at any offset below CPU_STACK_BYTES with bounds the verifier can see. */
struct cpu_dwarf_sample {
	struct cpu_dwarf_hdr hdr;
	__u8 stack[CPU_STACK_BYTES + 4096];
};

/* Value of a stacks map, keyed by the stack's hash. Unused slots are zero. */
struct cpu_stack {
	__u64 ips[CPU_MAX_DEPTH];
};

/* A stack the stacks map could not take because the kernel's allocator for it was empty for
 * a moment (-ENOMEM: non-preallocated maps draw from a per-CPU cache refilled
 * asynchronously). It goes to the daemon through the ring buffer instead of being lost. */
struct cpu_stack_record {
	__u32 kind;      /* CPU_RECORD_STACK */
	__u32 pad;
	__u64 hash;
	struct cpu_stack stack;
};

/* Per-CPU counters, index by enum cpu_stat. */
enum cpu_stat {
	CPU_STAT_SAMPLES,      /* samples of enabled targets */
	CPU_STAT_COUNTS_FULL,  /* sample dropped: counts map full */
	CPU_STAT_STACKS_FULL,  /* stack not stored: stacks map full (sample kept, stack lost) */
	CPU_STAT_USTACK_ERR,   /* bpf_get_stack failed on the user stack */
	CPU_STAT_KSTACK_ERR,   /* bpf_get_stack failed on the kernel stack */
	CPU_STAT_STACKS_NOMEM, /* stack not stored: no entry to allocate, nor ring buffer room */
	CPU_STAT_STACKS_SPILLED, /* stack sent through the ring buffer: no entry to allocate */
	CPU_STAT_RINGBUF_FULL, /* dwarf sample dropped: the ring buffer was full */
	CPU_STAT_NR,
};

#endif
