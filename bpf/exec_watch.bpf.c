// SPDX-License-Identifier: GPL-2.0
/* New processes for the rules (daemon/rules.c): every exec and every fork of a process (not
 * of a thread) on the node goes to the daemon through a small ring buffer, so a rule enables
 * a process from its first milliseconds instead of at the next /proc poll. Attached only
 * while rules can act on new processes; what the ring cannot take is counted, and the daemon
 * rescans /proc when the count moves. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include "exec_watch.h"

char LICENSE[] SEC("license") = "GPL";

/* 1024 events of 24 bytes (+ 8 of header): bursts of a node's execs between two reads. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32768);
} events SEC(".maps");

__u64 lost = 0;

/* A burst of execs wakes the daemon once: an exec within WAKE_GAP_NS of the last wake-up
 * waits for the daemon's read WAKE_GAP_NS after it (daemon/exec_watch.c), so a storm of
 * execs costs a few dozen wake-ups a second rather than one per exec. A fork never wakes it
 * (most are followed by an exec at once, which does): a forked process that runs on without
 * an exec is read with the next exec's, or at the daemon's idle read 200 ms later. */
#define WAKE_GAP_NS (EXEC_WATCH_GAP_MS * 1000 * 1000ULL)
__u64 last_wake = 0;

static __always_inline void send(__u32 pid, __u32 exec)
{
	struct exec_watch_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	__u64 now;

	if (!e) {
		__sync_fetch_and_add(&lost, 1);
		return;
	}
	e->pid = pid;
	e->exec = exec;
	bpf_get_current_comm(e->comm, sizeof(e->comm)); /* a child's is its parent's */
	now = bpf_ktime_get_ns();
	if (!exec || now - last_wake < WAKE_GAP_NS) {
		bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
		return;
	}
	last_wake = now; /* racing CPUs wake it twice: harmless */
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

/* Fires after the new program's comm is set, before it runs its first instruction. */
SEC("raw_tracepoint/sched_process_exec")
int exec_watch_exec(void *ctx)
{
	send(bpf_get_current_pid_tgid() >> 32, 1);
	return 0;
}

/* A forked server worker runs the same program without an exec. */
SEC("raw_tracepoint/sched_process_fork")
int exec_watch_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *child = (struct task_struct *)ctx->args[1];
	__u32 pid = BPF_CORE_READ(child, pid);

	if (pid == BPF_CORE_READ(child, tgid))
		send(pid, 0);
	return 0;
}
