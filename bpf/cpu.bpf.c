// SPDX-License-Identifier: GPL-2.0
/* On-CPU sampling: runs on every cpu-clock tick of every CPU, keeps only enabled tgids and
 * aggregates in the kernel by (thread, user stack, kernel stack), so the cost per sample does
 * not depend on how many samples or targets there are.
 *
 * Stacks are keyed by our own 64-bit hash of their addresses rather than a STACK_TRACE map's
 * bucket id: bpf_get_stackid silently loses stacks that collide in a bucket (-EEXIST), while a
 * 64-bit hash makes a collision practically impossible and a full map is counted.
 *
 * Counts and stacks live in inner maps of one-slot map-of-maps. Userspace drains the counts
 * once a second by swapping in an empty inner map: the kernel waits for running programs
 * (synchronize_rcu) when a map-of-maps slot is replaced, so the old map can then be read and
 * emptied race-free. Stacks stay from drain to drain (a stack's hash names its content) and
 * are swapped for a fresh map the same way when the map is filling up.
 *
 * Targets in dwarf mode (code built without frame pointers, where bpf_get_stack's walk stops
 * after a frame or two) are not aggregated here: each sample's user registers and the top of
 * its user stack go through a ring buffer to the daemon, which unwinds them with the
 * binaries' CFI, as perf --call-graph dwarf does. Their kernel stacks still go to the stacks
 * map. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "cpu.h"
#include "stack_capture.bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct cpu_target);
} targets SEC(".maps");

/* Inner map declarations, for the verifier's idea of the maps' shape. Userspace creates the
 * real inner maps (and hands one to libbpf as the template), so it chooses their sizes and
 * flags at run time. Sizes rather than types: clang emits only a forward declaration for a
 * struct reached through __array. */
struct counts_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__uint(key_size, sizeof(struct cpu_key));
	__uint(value_size, sizeof(__u64));
	__uint(map_flags, 0); /* preallocated: refilled every second */
};

struct stacks_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(__u64));
	__uint(value_size, sizeof(struct cpu_stack));
	__uint(map_flags, BPF_F_NO_PREALLOC);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct counts_map);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct stacks_map);
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_stack);
} scratch SEC(".maps");

/* Tgids unwound in userspace: present = dwarf mode. Separate from targets so that switching
 * modes never rewrites a target's counters under the program. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} dwarf_targets SEC(".maps");

/* JVMs whose agent walks the Java stack of each sampled thread: the signal its handler
 * waits for. Dwarf-mode tgids only: their samples carry the time the daemon matches by. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} java_signals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_dwarf_sample);
} dwarf_scratch SEC(".maps");

/* Dwarf samples and spilled stacks go through a ring buffer in a one-slot map-of-maps, so
 * the daemon sizes it for what it carries: a small one for the rare spilled stack while no
 * target is in dwarf mode, one for about a second of dwarf samples of every CPU at the
 * sampling rate while some is (collectors/cpu_ring.c). The daemon reads it continuously.
 * The size here is only the template's: the kernel installs rings of any size. */
struct dwarf_ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct dwarf_ring);
} dwarf_rings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CPU_STAT_NR);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* Followed processes that just forked a child (its tgid) or exec'd (their own): userspace
 * reads their mappings at once, as a short-lived one may be gone by the next drain. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16384);
} follow_events SEC(".maps");

/* Stacks stored in the current stacks map: userspace starts a fresh map before it fills. */
__u64 stacks_stored = 0;

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		(*v)++; /* per-CPU: no atomics needed */
}

/* The stacks map's allocator had nothing at hand this instant: the stack goes through the
 * ring buffer, which is preallocated. 0, or -ENOMEM if that is full too. */
static __always_inline long spill(__u64 hash, const struct cpu_stack *st)
{
	__u32 zero = 0;
	void *ring = bpf_map_lookup_elem(&dwarf_rings, &zero);
	struct cpu_stack_record *r;

	if (!ring)
		return -ENOMEM;
	r = bpf_ringbuf_reserve(ring, sizeof(*r), 0);
	if (!r)
		return -ENOMEM;
	r->kind = CPU_RECORD_STACK;
	r->pad = 0;
	r->hash = hash;
	__builtin_memcpy(&r->stack, st, sizeof(*st));
	bpf_ringbuf_submit(r, 0);
	stat_inc(CPU_STAT_STACKS_SPILLED);
	return 0;
}

/* Captures one stack into the current generation's stacks map; returns its hash, 0 if there
 * is no stack, or a negative errno. */
static __always_inline long capture(void *ctx, void *stacks_map, __u64 flags, __u64 *hash)
{
	long err = capture_stack(ctx, &scratch, stacks_map, flags, &stacks_stored, hash);
	__u32 zero = 0;
	struct cpu_stack *st;

	if (err != -ENOMEM || !(st = bpf_map_lookup_elem(&scratch, &zero)))
		return err;
	return spill(*hash, st);
}

/* Copies the user stack from sp up, a page at a time so that the end of the stack's mapping
 * ends the copy instead of failing it. Returns the bytes copied. */
static __always_inline __u32 copy_user_stack(__u8 *buf, __u64 sp)
{
	__u32 off = 0;

	for (int i = 0; i <= CPU_STACK_BYTES / 4096; i++) {
		__u32 chunk = 4096 - ((sp + off) & 4095);

		if (off >= CPU_STACK_BYTES)
			break;
		if (chunk > CPU_STACK_BYTES - off)
			chunk = CPU_STACK_BYTES - off;
		if (chunk > 4096)
			break;
		if (bpf_probe_read_user(buf + (off & (CPU_STACK_BYTES - 1)), chunk,
					(void *)(sp + off)))
			break;
		off += chunk;
	}
	return off;
}

/* Sends one dwarf-mode sample to the daemon. */
static __always_inline void send_dwarf(struct cpu_target *target, const struct cpu_key *key)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	struct cpu_dwarf_sample *s;
	__u32 zero = 0, len;
	void *ring;

	s = bpf_map_lookup_elem(&dwarf_scratch, &zero);
	ring = bpf_map_lookup_elem(&dwarf_rings, &zero);
	if (!s || !regs)
		return;
	if (!ring) {
		stat_inc(CPU_STAT_RINGBUF_FULL);
		__sync_fetch_and_add(&target->drops, 1);
		return;
	}
	s->hdr.kind = CPU_RECORD_DWARF;
	s->hdr.pid = key->pid;
	s->hdr.tid = key->tid;
	s->hdr.exec_gen = key->exec_gen;
	s->hdr.kstack = key->kstack;
	s->hdr.ns = bpf_ktime_get_ns();
	/* The user registers, saved at entry to the kernel, whichever mode the tick hit. */
	s->hdr.ip = BPF_CORE_READ(regs, ip);
	s->hdr.sp = BPF_CORE_READ(regs, sp);
	s->hdr.bp = BPF_CORE_READ(regs, bp);
	__builtin_memcpy(s->hdr.comm, key->comm, CPU_COMM_LEN);
	len = copy_user_stack(s->stack, s->hdr.sp);
	if (len > CPU_STACK_BYTES)
		len = CPU_STACK_BYTES;
	s->hdr.stack_len = len;
	if (bpf_ringbuf_output(ring, s, sizeof(s->hdr) + len, 0)) {
		stat_inc(CPU_STAT_RINGBUF_FULL);
		__sync_fetch_and_add(&target->drops, 1);
	}
}

SEC("perf_event")
int cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, zero = 0;
	struct cpu_target *target;
	struct cpu_key key = {};
	void *counts_map, *stacks_map;
	bool dwarf;
	long err;

	target = bpf_map_lookup_elem(&targets, &tgid);
	if (!target)
		return 0;
	counts_map = bpf_map_lookup_elem(&counts, &zero);
	stacks_map = bpf_map_lookup_elem(&stacks, &zero);
	if (!counts_map || !stacks_map)
		return 0;
	stat_inc(CPU_STAT_SAMPLES);

	key.pid = tgid;
	key.tid = (__u32)pid_tgid;
	key.exec_gen = target->exec_gen;
	bpf_get_current_comm(key.comm, sizeof(key.comm));

	dwarf = bpf_map_lookup_elem(&dwarf_targets, &tgid) != NULL;
	if (!dwarf) {
		err = capture(ctx, stacks_map, BPF_F_USER_STACK, &key.ustack);
		if (err == -E2BIG || err == -ENOMEM)
			goto stacks_full;
		if (err < 0 && err != -EFAULT) {
			key.flags |= CPU_KEY_USTACK_ERR;
			stat_inc(CPU_STAT_USTACK_ERR);
		}
	}
	/* A tick that interrupted user code has no kernel stack: don't pay for looking. On
	 * 64-bit architectures kernel addresses are the upper half. */
	if ((long)PT_REGS_IP(&ctx->regs) < 0) {
		err = capture(ctx, stacks_map, 0, &key.kstack);
		if (err == -E2BIG || err == -ENOMEM)
			goto stacks_full;
		if (err < 0)
			stat_inc(CPU_STAT_KSTACK_ERR);
	}
	if (dwarf) {
		__u32 *signo = bpf_map_lookup_elem(&java_signals, &tgid);

		send_dwarf(target, &key);
		/* The handler runs on this thread's return to user mode: its Java stack is the
		 * one this tick interrupted. */
		if (signo)
			bpf_send_signal_thread(*signo);
		return 0;
	}

	if (!counts_add(counts_map, &key, 1))
		return 0;
	stat_inc(CPU_STAT_COUNTS_FULL);
	__sync_fetch_and_add(&target->drops, 1);
	return 0;

stacks_full:
	stat_inc(err == -ENOMEM ? CPU_STAT_STACKS_NOMEM : CPU_STAT_STACKS_FULL);
	__sync_fetch_and_add(&target->drops, 1);
	return 0;
}

/* exec replaces the address space: later samples must be symbolized against new mappings. */
SEC("raw_tracepoint/sched_process_exec")
int cpu_exec(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct cpu_target *target = bpf_map_lookup_elem(&targets, &tgid);

	if (target) {
		__sync_fetch_and_add(&target->exec_gen, 1);
		if (target->fork_root)
			bpf_ringbuf_output(&follow_events, &tgid, sizeof(tgid), 0);
	}
	return 0;
}

/* A process forked by a followed one is sampled too, from its first instruction: the
 * targets filter is by tgid, and a new thread shares its process's entry already. */
SEC("raw_tracepoint/sched_process_fork")
int cpu_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *child = (struct task_struct *)ctx->args[1];
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, child_tgid;
	struct cpu_target *parent = bpf_map_lookup_elem(&targets, &tgid);
	struct cpu_target value = {};

	if (!parent || !parent->fork_root)
		return 0;
	child_tgid = BPF_CORE_READ(child, tgid);
	if (child_tgid == tgid)
		return 0;
	value.fork_root = parent->fork_root;
	if (!bpf_map_update_elem(&targets, &child_tgid, &value, BPF_NOEXIST))
		bpf_ringbuf_output(&follow_events, &child_tgid, sizeof(child_tgid), 0);
	return 0;
}
