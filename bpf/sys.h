/* Types shared by sys.bpf.c and collectors/sys.c: system call latency and lock waits. */
#ifndef APERTURE_BPF_SYS_H
#define APERTURE_BPF_SYS_H

#define SYS_HIST 32          /* log2 buckets of nanoseconds: [2^i, 2^(i+1)), the last open */
#define SYS_MAX_DEPTH 127
#define SYS_NR_UNKNOWN 0xffffffffu

/* Value of the targets map: what is collected of one tgid. */
#define SYS_TARGET_SYSCALLS 1u
#define SYS_TARGET_LOCKS 2u

/* One latency distribution. Per-CPU in the kernel: no atomics, exact counts. */
struct sys_latency {
	__u64 count;
	__u64 total_ns;
	__u64 max_ns;
	__u64 hist[SYS_HIST];
};

/* System calls are aggregated by (process, call, errno): errno 0 is success. */
struct sys_key {
	__u32 pid;
	__u32 nr;
	__u32 err;
	__u32 pad;
};

/* Futex waits, by (process, lock, waiting thread, holder seen at wait start, waiting stack). */
struct lock_key {
	__u32 pid;
	__u32 tid;
	__u64 uaddr;
	__u64 ustack;  /* hash of the user stack, 0 = none */
	__s32 owner;   /* tid that held the lock as the wait began, 0 = unknown */
	__u32 pad;
	char comm[16]; /* the waiting thread's name, which userspace may find gone */
};

/* Kernel lock contention (contention_begin/end), by (process, lock, LCB_F_* flags). */
struct klock_key {
	__u32 pid;
	__u32 flags;
	__u64 lock;
};

struct sys_stack {
	__u64 ips[SYS_MAX_DEPTH];
};

enum sys_stat {
	SYS_STAT_CALLS,      /* system calls of enabled processes seen completing */
	SYS_STAT_FULL,       /* aggregates dropped: a stats map was full */
	SYS_STAT_STACKS_FULL, /* lock waits kept without their stack: stacks map full */
	SYS_STAT_NR,
};

#endif
