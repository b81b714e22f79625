/* Capturing a stack into a map keyed by our own 64-bit hash of its addresses, shared by the
 * programs that record stacks. bpf_get_stackid's STACK_TRACE map silently loses stacks that
 * collide in a bucket (-EEXIST), while a 64-bit hash makes a collision practically impossible
 * and a full map is counted. And adding to in-kernel sums. Include after vmlinux.h and
 * bpf_helpers.h. */
#ifndef APERTURE_BPF_STACK_CAPTURE_H
#define APERTURE_BPF_STACK_CAPTURE_H

#include "cpu.h"

/* vmlinux.h has no errno macros and the uapi header does not build for the bpf target. */
#define ENOENT 2
#define ENOMEM 12
#define EFAULT 14
#define EEXIST 17
#define E2BIG 7

static __always_inline __u64 hash_ips(const struct cpu_stack *st, long bytes)
{
	__u64 h = 0xcbf29ce484222325ULL;
	long n = bytes / 8;

	for (int i = 0; i < CPU_MAX_DEPTH && i < n; i++) {
		h ^= st->ips[i];
		h *= 0x100000001b3ULL;
		h ^= h >> 29;
	}
	return h ? h : 1; /* 0 means "no stack" */
}

/* Captures one stack (through the per-CPU scratch map) into stacks_map, counting new ones in
 * *stored unless it is NULL; returns its hash in *hash (0 if there is no stack), 0 or a negative errno
 * (-ENOMEM: the map's allocator had nothing at hand; the stack is still in scratch). */
static __always_inline long capture_stack(void *ctx, void *scratch_map, void *stacks_map,
					  __u64 flags, __u64 *stored, __u64 *hash)
{
	__u32 zero = 0;
	struct cpu_stack *st = bpf_map_lookup_elem(scratch_map, &zero);
	long bytes;

	*hash = 0;
	if (!st)
		return -ENOENT;
	bytes = bpf_get_stack(ctx, st->ips, sizeof(st->ips), flags);
	if (bytes <= 0)
		return bytes;
	*hash = hash_ips(st, bytes);
	if (bpf_map_lookup_elem(stacks_map, hash))
		return 0;
	bytes = bpf_map_update_elem(stacks_map, hash, st, BPF_NOEXIST);
	if (bytes == 0 && stored)
		__sync_fetch_and_add(stored, 1);
	return bytes == -EEXIST ? 0 : bytes; /* another CPU stored the same stack first */
}

/* Adds delta to key's sum in counts_map, making the entry if it is new: 0 or -errno (-E2BIG
 * when the map is full). */
static __always_inline long counts_add(void *counts_map, const void *key, __u64 delta)
{
	__u64 *sum = bpf_map_lookup_elem(counts_map, key);
	long err;

	if (sum) {
		__sync_fetch_and_add(sum, delta);
		return 0;
	}
	err = bpf_map_update_elem(counts_map, key, &delta, BPF_NOEXIST);
	if (err != -EEXIST)
		return err;
	/* another CPU made it first */
	sum = bpf_map_lookup_elem(counts_map, key);
	if (sum)
		__sync_fetch_and_add(sum, delta);
	return 0;
}

#endif
