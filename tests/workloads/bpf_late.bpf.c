// SPDX-License-Identifier: GPL-2.0
/* Burns a few microseconds in the kernel on each system call of one process, so CPU samples of
 * that process land inside this program: tests/e2e/test_names.py loads it after the daemon
 * started and checks its frames are named after it. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

const volatile __u32 target_tgid;
__u64 sink;

/* A raw tracepoint: a classic one (tp/) runs with bpf_prog_active raised, which keeps the
 * cpu-clock sampler's own BPF program from running, so no sample could land in it. */
SEC("raw_tp/sys_enter")
int late_burn(void *ctx)
{
	__u64 x = 0;

	if (bpf_get_current_pid_tgid() >> 32 != target_tgid)
		return 0;
	for (int i = 0; i < 4000; i++)
		x = x * 31 + i;
	sink = x;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
