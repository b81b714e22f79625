// SPDX-License-Identifier: GPL-2.0
/* Off-CPU time: at each context switch, a thread of an enabled tgid that leaves the CPU has
 * the time recorded (start map, by tid); when it comes back, the time it was away is added
 * in the kernel to a counts map keyed like cpu's, so userspace reads one entry per (thread,
 * stack) a second however many switches there were. Waits shorter than min_ns are dropped
 * here. A worker thread (workers map, filled by userspace) away longer than blocking_ns also
 * sends an event with its stacks through a ring buffer.
 *
 * Where the stacks are taken: walking them is most of the cost of a target's switch (the
 * kernel stack alone 60-70 %), so they are taken only for waits that are kept, when the
 * thread comes back and the wait's length is known. That needs a program that runs in the
 * woken thread while its kernel stack is still the wait's: sched_exit_tp, a bare tracepoint
 * at the end of __schedule (Linux 6.16+), where BCC's offcputime uses a kprobe on
 * finish_task_switch. Where it is missing (stacks_at_switch_in false, set by userspace
 * before load), the stacks are taken at switch-out, for every wait.
 *
 * sched_switch through a raw tracepoint: tp_btf is not available on every kernel we run on
 * (not on this one), and the raw tracepoint's arguments are the same. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "offcpu.h"
#include "stack_capture.bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct offcpu_target);
} targets SEC(".maps");

/* A first, cheap filter on the path every context switch of the node takes: slot tgid &
 * OFFCPU_HINT_MASK holds 0 when no target has those low bits (the common case: return after
 * one array lookup, inlined by the verifier), the target's tgid, or OFFCPU_HINT_SHARED when
 * several do; only the last two go on to the targets hash. Kept by userspace. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, OFFCPU_HINT_MASK + 1);
	__type(key, __u32);
	__type(value, __u32);
} hints SEC(".maps");

static __always_inline bool may_be_target(__u32 tgid)
{
	__u32 slot = tgid & OFFCPU_HINT_MASK;
	__u32 *hint = bpf_map_lookup_elem(&hints, &slot);

	return hint && (*hint == tgid || *hint == OFFCPU_HINT_SHARED);
}

/* Threads of enabled targets, by tid: what each looked like at its last switch-out, and
 * whether it is off CPU now (ts != 0). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct offcpu_start);
} start SEC(".maps");

/* Worker threads, by tid: their long waits are blocking events. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u32);
} workers SEC(".maps");

struct counts_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__uint(key_size, sizeof(struct cpu_key));
	__uint(value_size, sizeof(__u64));
};

/* Drained by swapping the inner map, as cpu's counts (see cpu.bpf.c). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct counts_map);
} counts SEC(".maps");

/* Stacks stay from drain to drain; userspace empties the map when it is filling up.
 * Preallocated: under the runqueue lock an allocation may fail. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, struct cpu_stack);
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_stack);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OFFCPU_STAT_NR);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

const volatile bool stacks_at_switch_in = false;
__u64 min_ns = 1000;
__u64 blocking_ns = 5000000;
__u64 stacks_stored = 0;

#define TASK_DEAD_STATE 0x80 /* TASK_DEAD, a macro vmlinux.h lacks */

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		(*v)++;
}

/* The record of a target's thread: made at its first switch-out, then reused (a lookup and
 * stores in place, where an update and a delete per switch cost two bucket locks), deleted
 * at its last switch-out, at exec, and by userspace when its target is disabled. */
static __always_inline struct offcpu_start *thread_record(__u32 tgid, __u32 tid)
{
	struct offcpu_start *st = bpf_map_lookup_elem(&start, &tid);
	struct offcpu_start fresh = {};
	struct offcpu_target *target;

	/* A record deleted since this lookup may be another thread's by now: tid says. */
	if (st)
		return st->key.tid == tid ? st : NULL;
	target = bpf_map_lookup_elem(&targets, &tgid);
	if (!target)
		return NULL;
	fresh.key.pid = tgid;
	fresh.key.tid = tid;
	fresh.key.exec_gen = target->exec_gen;
	if (bpf_map_update_elem(&start, &tid, &fresh, BPF_NOEXIST)) {
		stat_inc(OFFCPU_STAT_START_FULL);
		__sync_fetch_and_add(&target->drops, 1);
		return NULL;
	}
	return bpf_map_lookup_elem(&start, &tid);
}

/* prev is the current task: its ids come from the cheap helper, and its stacks are the ones
 * bpf_get_stack reads. */
/* The time of this switch, read once and only for a target's thread: most switches of the
 * node are not a target's and need no clock. */
static __always_inline __u64 switch_time(__u64 *now)
{
	if (!*now)
		*now = bpf_ktime_get_ns();
	return *now;
}

/* The wait's stacks, into the thread's record: at switch-out or at switch-in, the same
 * stacks (the task is inside __schedule either way; userspace drops the tracing frames). */
static __always_inline void take_stacks(void *ctx, struct offcpu_start *st)
{
	long err;

	stat_inc(OFFCPU_STAT_STACK_WALKS);
	st->key.flags = 0;
	bpf_get_current_comm(st->key.comm, sizeof(st->key.comm));
	err = capture_stack(ctx, &scratch, &stacks, BPF_F_USER_STACK, &stacks_stored,
			    &st->key.ustack);
	if (err == -E2BIG || err == -ENOMEM)
		stat_inc(OFFCPU_STAT_STACKS_FULL);
	else if (err < 0 && err != -EFAULT)
		st->key.flags |= CPU_KEY_USTACK_ERR;
	/* Its leaf frames are the tracing machinery, how many depends on how many programs
	 * are attached: userspace drops them by name. */
	err = capture_stack(ctx, &scratch, &stacks, 0, &stacks_stored, &st->key.kstack);
	if (err == -E2BIG || err == -ENOMEM)
		stat_inc(OFFCPU_STAT_STACKS_FULL);
}

static __always_inline void switch_out(void *ctx, bool preempt, unsigned int prev_state,
				       __u64 *now)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = id;
	struct offcpu_start *st;
	struct pt_regs *regs;

	if (!may_be_target(tgid))
		return;
	/* A dead task's last switch-out has no return. */
	if (prev_state & TASK_DEAD_STATE) {
		bpf_map_delete_elem(&start, &tid);
		return;
	}
	st = thread_record(tgid, tid);
	if (!st)
		return;
	if (stacks_at_switch_in) {
		/* Two loads where a walk would be: enough to walk the user stack later, from
		 * userspace, should threads/dump ask while the thread is still away. */
		regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
		st->user_ip = regs ? BPF_CORE_READ(regs, ip) : 0;
		st->user_bp = regs ? BPF_CORE_READ(regs, bp) : 0;
	} else {
		take_stacks(ctx, st);
	}
	st->state = prev_state;
	st->preempt = preempt;
	st->ts = switch_time(now);
}

static __always_inline void add_time(struct offcpu_start *st, __u64 delta)
{
	__u32 zero = 0;
	void *counts_map = bpf_map_lookup_elem(&counts, &zero);
	struct offcpu_target *target;

	if (!counts_map)
		return;
	stat_inc(OFFCPU_STAT_WAITS);
	if (!counts_add(counts_map, &st->key, delta))
		return;
	stat_inc(OFFCPU_STAT_COUNTS_FULL);
	target = bpf_map_lookup_elem(&targets, &st->key.pid);
	if (target)
		__sync_fetch_and_add(&target->drops, 1);
}

static __always_inline void send_event(struct offcpu_start *st, __u64 delta)
{
	struct offcpu_event *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);

	if (!ev) {
		stat_inc(OFFCPU_STAT_EVENTS_LOST);
		return;
	}
	ev->key = st->key;
	ev->off_ns = st->ts;
	ev->dur_ns = delta;
	ev->state = st->state;
	ev->preempt = st->preempt;
	bpf_ringbuf_submit(ev, 0);
}

/* next's pid and tgid, in one read where they sit side by side (every kernel so far). */
static __always_inline void task_ids(struct task_struct *task, __u32 *tid, __u32 *tgid)
{
	__u32 ids[2];

	if (bpf_core_field_offset(struct task_struct, tgid) ==
	    bpf_core_field_offset(struct task_struct, pid) + sizeof(__u32) &&
	    !bpf_core_read(ids, sizeof(ids), &task->pid)) {
		*tid = ids[0];
		*tgid = ids[1];
		return;
	}
	*tid = BPF_CORE_READ(task, pid);
	*tgid = BPF_CORE_READ(task, tgid);
}

/* st's thread is back after delta ns away: counted if it is long enough, a worker's long
 * wait logged. ctx is the woken thread's own when stacks are taken at switch-in. */
static __always_inline void wait_ends(void *ctx, struct offcpu_start *st, __u64 delta)
{
	bool worker_blocked = delta >= blocking_ns && bpf_map_lookup_elem(&workers, &st->key.tid);

	if (stacks_at_switch_in && (delta >= min_ns || worker_blocked))
		take_stacks(ctx, st);
	if (delta >= min_ns)
		add_time(st, delta);
	if (worker_blocked)
		send_event(st, delta);
	st->ts = 0;
}

static __always_inline void switch_in(struct task_struct *next, __u64 *now)
{
	struct offcpu_start *st;
	__u32 tid, tgid;

	task_ids(next, &tid, &tgid);
	/* Only a target's threads have a record; those of a target disabled since were
	 * forgotten with it. */
	if (!may_be_target(tgid))
		return;
	st = bpf_map_lookup_elem(&start, &tid);
	if (!st || !st->ts)
		return;
	wait_ends(NULL, st, switch_time(now) - st->ts);
}

/* TP_PROTO(bool preempt, struct task_struct *prev, struct task_struct *next,
 *          unsigned int prev_state); prev is current. */
SEC("raw_tracepoint/sched_switch")
int offcpu_switch(struct bpf_raw_tracepoint_args *ctx)
{
	bool preempt = ctx->args[0];
	struct task_struct *next = (void *)ctx->args[2];
	unsigned int prev_state = ctx->args[3];
	__u64 now = 0;

	switch_out(ctx, preempt, prev_state, &now);
	if (!stacks_at_switch_in)
		switch_in(next, &now);
	return 0;
}

/* TP_PROTO(bool is_switch): the end of __schedule, in the task now running; is_switch says
 * it is back from a switch-out, with its wait's kernel stack still below. Loaded only where
 * stacks are taken at switch-in. */
SEC("raw_tracepoint/sched_exit_tp")
int offcpu_switched_in(struct bpf_raw_tracepoint_args *ctx)
{
	struct offcpu_start *st;
	__u64 id;
	__u32 tid;

	if (!ctx->args[0]) /* __schedule kept the task on the CPU */
		return 0;
	id = bpf_get_current_pid_tgid();
	if (!may_be_target(id >> 32))
		return 0;
	tid = id;
	st = bpf_map_lookup_elem(&start, &tid);
	if (!st || !st->ts)
		return 0;
	wait_ends(ctx, st, bpf_ktime_get_ns() - st->ts);
	return 0;
}

SEC("raw_tracepoint/sched_process_exec")
int offcpu_exec(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = id;
	struct offcpu_target *target = bpf_map_lookup_elem(&targets, &tgid);

	if (!target)
		return 0;
	__sync_fetch_and_add(&target->exec_gen, 1);
	/* Its record has the old exec_gen: the next switch-out makes a new one. */
	bpf_map_delete_elem(&start, &tid);
	return 0;
}
