// SPDX-License-Identifier: GPL-2.0
/* System call latency and lock waits of enabled processes, aggregated in the kernel. Two
 * collectors share this object, each attached only while some target has it on:
 *
 * syscalls: raw tracepoints on sys_enter/sys_exit time every system call of targets with
 * SYS_TARGET_SYSCALLS; sys_exit adds the elapsed time to per-CPU aggregates, so each call is
 * counted exactly and without atomics.
 *
 * locks: the futex system calls' own tracepoints (syscalls/sys_enter_futex, ...) time futex
 * waits of targets with SYS_TARGET_LOCKS, with the lock's address, the holder glibc wrote
 * into the mutex and the waiting stack; contention_begin/end time kernel lock waits. The
 * program runs for futex calls only, where sys_enter would run for every call on the node.
 * (Both kinds of syscall tracepoint put every system call of the node on the kernel's
 * tracing slow path while attached: that part of the cost is the node's.)
 *
 * Aggregates live in inner maps of one-slot map-of-maps: userspace drains by swapping in an
 * empty map, and the kernel waits for running programs when the slot is replaced, so the old
 * map can then be read race-free (collectors/swap_map.h). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "sys.h"
#include "stack_capture.bpf.h"

/* capture_stack fills and stores struct cpu_stack. */
_Static_assert(sizeof(struct sys_stack) == sizeof(struct cpu_stack), "stack layouts differ");
#define MAX_ERRNO 4095

/* futex(2) operations that wait (FUTEX_CMD_MASK strips PRIVATE and CLOCK_REALTIME). */
#define FUTEX_CMD_MASK 127
#define FUTEX_WAIT 0
#define FUTEX_LOCK_PI 6
#define FUTEX_WAIT_BITSET 9
#define FUTEX_WAIT_REQUEUE_PI 11
#define FUTEX_LOCK_PI2 13
#define FUTEX_TID_MASK 0x3fffffff

char LICENSE[] SEC("license") = "GPL";

/* Enabled tgids: SYS_TARGET_* bits. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} targets SEC(".maps");

struct sys_start {
	__u64 ts;
	__u32 nr;
	__u32 pad;
};

struct lock_start {
	__u64 ts;
	__u64 uaddr;
	__u64 ustack;
	__s32 owner;
	__u32 pad;
};

/* Task-local storage: found through the task itself, far cheaper than a hash keyed by tid on
 * a path every system call takes, and freed with the thread. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sys_start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct lock_start);
} lock_starts SEC(".maps");

struct klock_start {
	__u64 ts;
	__u64 lock;
	__u32 flags;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct klock_start);
} klock_starts SEC(".maps");

struct sys_stats_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(struct sys_key));
	__uint(value_size, sizeof(struct sys_latency));
	__uint(map_flags, BPF_F_NO_PREALLOC);
};

struct lock_stats_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(struct lock_key));
	__uint(value_size, sizeof(struct sys_latency));
	__uint(map_flags, BPF_F_NO_PREALLOC);
};

struct klock_stats_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(struct klock_key));
	__uint(value_size, sizeof(struct sys_latency));
	__uint(map_flags, BPF_F_NO_PREALLOC);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct sys_stats_map);
} sys_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct lock_stats_map);
} lock_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct klock_stats_map);
} klock_stats SEC(".maps");

/* Waiting stacks, keyed by a 64-bit hash of their addresses, kept from drain to drain. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct sys_stack);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sys_stack);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SYS_STAT_NR);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		(*v)++;
}

static __always_inline __u32 log2_bucket(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) r += 1;
	return r < SYS_HIST ? r : SYS_HIST - 1;
}

/* Adds one event of ns to the aggregate of key in the current inner map of outer. */
static __always_inline void account(void *outer, const void *key, __u64 ns)
{
	struct sys_latency *v, zero = {};
	__u32 slot = 0;
	void *inner = bpf_map_lookup_elem(outer, &slot);
	long err;

	if (!inner)
		return;
	v = bpf_map_lookup_elem(inner, key);
	if (!v) {
		err = bpf_map_update_elem(inner, key, &zero, BPF_NOEXIST);
		if (err && err != -EEXIST) {
			stat_inc(SYS_STAT_FULL);
			return;
		}
		v = bpf_map_lookup_elem(inner, key);
		if (!v)
			return;
	}
	/* Per-CPU value: this CPU alone writes it, and a program is not preempted by itself. */
	v->count++;
	v->total_ns += ns;
	if (ns > v->max_ns)
		v->max_ns = ns;
	v->hist[log2_bucket(ns)]++;
}

/* The hash of the current user stack, stored in stacks; 0 if there is none or no room.
 * bpf_get_stack zeroes the buffer past the stack, so a stored stack ends at its first 0. */
static __always_inline __u64 user_stack(void *ctx)
{
	long err;
	__u64 h;

	err = capture_stack(ctx, &scratch, &stacks, BPF_F_USER_STACK, NULL, &h);
	if (err == -E2BIG || err == -ENOMEM)
		stat_inc(SYS_STAT_STACKS_FULL);
	return err ? 0 : h;
}

/* Whether futex(2) operation op waits (FUTEX_CMD_MASK strips PRIVATE and CLOCK_REALTIME), and
 * whether it is a PI one. */
static __always_inline bool futex_op_waits(int op, bool *pi)
{
	op &= FUTEX_CMD_MASK;
	*pi = op == FUTEX_LOCK_PI || op == FUTEX_LOCK_PI2 || op == FUTEX_WAIT_REQUEUE_PI;
	return op == FUTEX_WAIT || op == FUTEX_WAIT_BITSET || *pi;
}

/* The thread holding the lock at uaddr: for PI futexes the kernel's own protocol puts it in
 * the futex word; a glibc pthread mutex keeps it in __data.__owner, the int after __lock and
 * __count. Userspace trusts the latter only if it names a thread of the process. */
static __always_inline __s32 lock_owner(__u64 uaddr, bool pi)
{
	__s32 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (void *)(uaddr + (pi ? 0 : 8))))
		return 0;
	return pi ? v & FUTEX_TID_MASK : v;
}

static __always_inline bool target_has(__u32 tgid, __u32 what)
{
	__u32 *flags = bpf_map_lookup_elem(&targets, &tgid);

	return flags && *flags & what;
}

SEC("raw_tracepoint/sys_enter")
int sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct sys_start *st;

	if (!target_has(tgid, SYS_TARGET_SYSCALLS))
		return 0;
	st = bpf_task_storage_get(&starts, bpf_get_current_task_btf(), NULL,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		return 0;
	st->nr = ctx->args[1];
	st->ts = bpf_ktime_get_ns();
	return 0;
}

SEC("raw_tracepoint/sys_exit")
int sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct sys_start *st;
	struct sys_key key = {};
	long ret = ctx->args[1];
	__u64 ns;

	/* Only threads of targets have a start: no targets lookup for the others. */
	st = bpf_task_storage_get(&starts, bpf_get_current_task_btf(), NULL, 0);
	if (!st || !st->ts)
		return 0;
	ns = bpf_ktime_get_ns() - st->ts;
	st->ts = 0;
	/* A call that began before its process was disabled ends up in a map drained after the
	 * target is gone: userspace drops it there. */
	key.pid = bpf_get_current_pid_tgid() >> 32;
	key.nr = st->nr;
	key.err = ret < 0 && ret >= -MAX_ERRNO ? -ret : 0;
	account(&sys_stats, &key, ns);
	stat_inc(SYS_STAT_CALLS);
	return 0;
}

static __always_inline void lock_wait_begins(void *ctx, __u64 uaddr, bool pi)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct lock_start *st;

	if (!target_has(tgid, SYS_TARGET_LOCKS))
		return;
	st = bpf_task_storage_get(&lock_starts, bpf_get_current_task_btf(), NULL,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		return;
	st->uaddr = uaddr;
	st->owner = lock_owner(uaddr, pi);
	st->ustack = user_stack(ctx);
	st->ts = bpf_ktime_get_ns();
}

static __always_inline void lock_wait_ends(void)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct lock_start *st;
	__u64 ns;

	st = bpf_task_storage_get(&lock_starts, bpf_get_current_task_btf(), NULL, 0);
	if (!st || !st->ts)
		return;
	ns = bpf_ktime_get_ns() - st->ts;
	st->ts = 0;
	struct lock_key lk = {
		.pid = pid_tgid >> 32, .tid = (__u32)pid_tgid, .uaddr = st->uaddr,
		.ustack = st->ustack, .owner = st->owner,
	};

	bpf_get_current_comm(lk.comm, sizeof(lk.comm));
	account(&lock_stats, &lk, ns);
}

/* futex(uaddr, op, ...) */
SEC("tracepoint/syscalls/sys_enter_futex")
int futex_enter(struct trace_event_raw_sys_enter *ctx)
{
	bool pi;

	if (futex_op_waits(ctx->args[1], &pi))
		lock_wait_begins(ctx, ctx->args[0], pi);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex")
int futex_exit(struct trace_event_raw_sys_exit *ctx)
{
	lock_wait_ends();
	return 0;
}

/* futex_waitv(struct futex_waitv { u64 val; u64 uaddr; u32 flags; u32 reserved; } *waiters,
 * ...): the first futex waited on names the wait. */
SEC("tracepoint/syscalls/sys_enter_futex_waitv")
int futex_waitv_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u64 uaddr;

	if (!bpf_probe_read_user(&uaddr, sizeof(uaddr), (void *)ctx->args[0] + 8))
		lock_wait_begins(ctx, uaddr, false);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex_waitv")
int futex_waitv_exit(struct trace_event_raw_sys_exit *ctx)
{
	lock_wait_ends();
	return 0;
}

/* contention_begin(void *lock, unsigned int flags) */
SEC("raw_tracepoint/contention_begin")
int lock_begin(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	struct klock_start st = {};

	if (!target_has(tgid, SYS_TARGET_LOCKS))
		return 0;
	st.lock = ctx->args[0];
	st.flags = ctx->args[1];
	st.ts = bpf_ktime_get_ns();
	bpf_map_update_elem(&klock_starts, &tid, &st, BPF_ANY);
	return 0;
}

/* contention_end(void *lock, int ret) */
SEC("raw_tracepoint/contention_end")
int lock_end(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	struct klock_start *st;
	struct klock_key key = {};

	if (!target_has(tgid, SYS_TARGET_LOCKS))
		return 0;
	st = bpf_map_lookup_elem(&klock_starts, &tid);
	if (!st || !st->ts || st->lock != ctx->args[0])
		return 0;
	key.pid = tgid;
	key.lock = st->lock;
	key.flags = st->flags;
	account(&klock_stats, &key, bpf_ktime_get_ns() - st->ts);
	st->ts = 0;
	return 0;
}
