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

static __always_inline void send(__u32 pid, __u32 exec)
{
	struct exec_watch_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&lost, 1);
		return;
	}
	e->pid = pid;
	e->exec = exec;
	bpf_get_current_comm(e->comm, sizeof(e->comm)); /* a child's is its parent's */
	bpf_ringbuf_submit(e, 0);
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
