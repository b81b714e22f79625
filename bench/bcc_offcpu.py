#!/usr/bin/python3
"""bcc_offcpu.py PID [MIN_US]: BCC's offcputime method on a kernel without kprobes.

offcputime-bpfcc attaches to finish_task_switch with a kprobe, which this kernel lacks, and
reads task_struct fields at offsets from the kernel headers BCC compiles against (Debian's,
not this kernel's). This is the same method through BCC on the sched_switch tracepoint, whose
fields BCC reads from tracefs, and the current task for prev: at switch-out of a thread
of PID, the time and its user and kernel stack ids (BPF_STACK_TRACE, as offcputime) go into a
start hash; at switch-in the time away is added to a hash keyed by (pid, tgid, stack ids,
comm), as offcputime's counts. On SIGINT it prints folded stacks, as `offcputime -f`."""
import signal
import sys

from bcc import BPF

PROGRAM = r"""
#include <linux/sched.h>

struct key_t {
    u32 pid, tgid;
    int user_stack_id, kernel_stack_id;
    char name[TASK_COMM_LEN];
};

struct start_t {
    u64 ts;
    struct key_t key;
};

BPF_HASH(start, u32, struct start_t);
BPF_HASH(counts, struct key_t);
BPF_STACK_TRACE(stack_traces, 16384);

TRACEPOINT_PROBE(sched, sched_switch)
{
    u64 id = bpf_get_current_pid_tgid(); /* current is prev */
    u32 prev_pid = id, next_pid = args->next_pid;
    u64 now = bpf_ktime_get_ns();
    struct start_t *s;

    if (id >> 32 == TGID) {
        struct start_t st = {};

        st.ts = now;
        st.key.pid = prev_pid;
        st.key.tgid = id >> 32;
        st.key.user_stack_id = stack_traces.get_stackid(args, BPF_F_USER_STACK);
        st.key.kernel_stack_id = stack_traces.get_stackid(args, 0);
        bpf_get_current_comm(&st.key.name, sizeof(st.key.name));
        start.update(&prev_pid, &st);
    }
    s = start.lookup(&next_pid);
    if (!s)
        return 0;
    u64 delta = (now - s->ts) / 1000;
    if (delta >= MIN_US)
        counts.atomic_increment(s->key, delta);
    start.delete(&next_pid);
    return 0;
}
"""


def main():
    tgid = int(sys.argv[1])
    min_us = int(sys.argv[2]) if len(sys.argv) > 2 else 1  # offcputime's -m
    b = BPF(text=PROGRAM.replace("TGID", str(tgid)).replace("MIN_US", str(min_us)))
    # SIGINT (as offcputime) or SIGTERM ends it; a background job may have SIGINT ignored.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    print("attached", flush=True)
    signal.pause()
    stacks = b["stack_traces"]
    for k, v in b["counts"].items():
        user = [] if k.user_stack_id < 0 else \
            [b.sym(a, k.tgid).decode(errors="replace") for a in stacks.walk(k.user_stack_id)]
        kern = [] if k.kernel_stack_id < 0 else \
            [b.ksym(a).decode(errors="replace") for a in stacks.walk(k.kernel_stack_id)]
        frames = [k.name.decode(errors="replace")] + user[::-1] + kern[::-1]
        print(";".join(frames), v.value)


if __name__ == "__main__":
    main()
