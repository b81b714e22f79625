/* Draining: swap the kernel onto the other counts map, read and empty the old one, and turn
 * each (thread, user stack, kernel stack) count into a profile stack of frame ids. A stack is
 * named once per target and address space; later drains find it in the target's cache, and
 * only new ones are read from the kernel's stacks map. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <unistd.h>
#include "collectors/cpu_internal.h"
#include "cpu.skel.h"

#define FRAME_NAME_MAX 512

struct drain_ctx {
	struct cpu_collector *c;
	int64_t now;
};

/* Reads and deletes every entry of a hash map, cap entries at a time, handing each batch to
 * each(). The map must end up empty whatever each() says, or stale entries would come back
 * two drains later: its first error is returned after the map is emptied. */
static int take_all(int fd, void *keys, void *values, uint32_t cap,
		    int (*each)(struct drain_ctx *ctx, const void *keys, const void *values,
				uint32_t n), struct drain_ctx *ctx)
{
	__u64 in = 0, out = 0;
	bool first = true;
	int err, first_err = 0;

	for (;;) {
		__u32 got = cap;

		err = bpf_map_lookup_and_delete_batch(fd, first ? NULL : &in, &out, keys, values,
						      &got, NULL);
		if (err && err != -ENOENT)
			return err;
		if (got) {
			int cb_err = each(ctx, keys, values, got);

			if (cb_err && !first_err)
				first_err = cb_err;
		}
		if (err == -ENOENT)
			return first_err;
		in = out;
		first = false;
	}
}

/* The addresses of the stack with this hash: in the stacks map the kernel writes now, or in
 * the one this drain retired, where the counts being drained may have put it. */
static const struct cpu_stack *find_raw(struct cpu_collector *c, uint64_t hash)
{
	if (!bpf_map_lookup_elem(c->stacks_fd, &hash, &c->raw))
		return &c->raw;
	if (c->stacks_retired_fd >= 0 &&
	    !bpf_map_lookup_elem(c->stacks_retired_fd, &hash, &c->raw))
		return &c->raw;
	return NULL;
}

/* The newest generation known is the process's current address space: only its mappings
 * may be re-read when an address is not covered (a library loaded since). */
static bool is_newest_gen(const struct cpu_target_state *t, const struct cpu_gen_syms *slot)
{
	for (int i = 0; i < CPU_GENS; i++)
		if (t->gens[i].syms && (int32_t)(t->gens[i].gen - slot->gen) > 0)
			return false;
	return true;
}

static void name_user_frame(struct cpu_collector *c, struct cpu_target_state *t,
			    struct proc_syms *syms, struct cpu_gen_syms *slot, uint64_t addr,
			    bool is_return, char *buf)
{
	int err = syms ? proc_syms_name(syms, addr, is_return, buf, FRAME_NAME_MAX) : -ENOENT;

	if (err == -ENOENT && syms && slot->refreshed_drain != c->drain_seq &&
	    is_newest_gen(t, slot)) {
		slot->refreshed_drain = c->drain_seq;
		if (!proc_syms_refresh(syms))
			err = proc_syms_name(syms, addr, is_return, buf, FRAME_NAME_MAX);
	}
	if (err)
		snprintf(buf, FRAME_NAME_MAX, "[unknown]");
}

static void name_kernel_frame(struct cpu_collector *c, uint64_t addr, char *buf)
{
	size_t n;

	if (symbolizer_kernel_name(c->syms, addr, buf, FRAME_NAME_MAX - 4))
		snprintf(buf, FRAME_NAME_MAX - 4, "[kernel]+0x%llx", (unsigned long long)addr);
	n = strlen(buf);
	memcpy(buf + n, "_[k]", 5);
}

/* Frame ids of a stack, root first, from the target's cache or named now. NULL if the raw
 * stack is not at hand (lost) or memory ran out. */
static struct cpu_named_stack *named_stack(struct cpu_collector *c, struct cpu_target_state *t,
					   uint64_t hash, uint32_t gen, bool kernel)
{
	struct cpu_named_key key = { .hash = hash, .gen = kernel ? 0 : gen, .kernel = kernel };
	struct cpu_gen_syms *slot = NULL;
	struct proc_syms *syms = NULL;
	const struct cpu_stack *raw;
	struct cpu_named_stack *n;
	char name[FRAME_NAME_MAX];
	uint32_t depth = 0, j = 0;

	HASH_FIND(hh, t->named, &key, sizeof(key), n);
	if (n)
		return n;
	raw = find_raw(c, hash);
	if (!raw)
		return NULL;
	while (depth < CPU_MAX_DEPTH && raw->ips[depth])
		depth++;
	n = calloc(1, sizeof(*n) + (depth + 1) * sizeof(n->ids[0]));
	if (!n)
		return NULL;
	n->key = key;
	/* A full buffer means the walk may have stopped early: say so at the root. */
	if (depth == CPU_MAX_DEPTH && profile_frame_id(t->profile, "[truncated]", &n->ids[j++]))
		goto fail;
	if (!kernel)
		syms = cpu_gen_syms(c, t, gen, &slot);
	for (uint32_t i = depth; i-- > 0;) {
		if (kernel)
			name_kernel_frame(c, raw->ips[i], name);
		else
			name_user_frame(c, t, syms, slot, raw->ips[i], i > 0, name);
		if (profile_frame_id(t->profile, name, &n->ids[j++]))
			goto fail;
	}
	n->depth = j;
	HASH_ADD(hh, t->named, key, sizeof(n->key), n);
	return n;
fail:
	free(n);
	return NULL;
}

static int append(uint32_t *ids, uint32_t *n, const struct cpu_named_stack *s)
{
	memcpy(ids + *n, s->ids, s->depth * sizeof(ids[0]));
	*n += s->depth;
	return 0;
}

static int add_count(struct cpu_collector *c, const struct cpu_key *key, uint64_t count,
		     int64_t now)
{
	uint32_t ids[2 * CPU_MAX_DEPTH + 3], n = 0;
	struct cpu_named_stack *user = NULL, *kern = NULL;
	struct cpu_target_state *t;
	char comm[CPU_COMM_LEN + 1];
	pid_t pid = key->pid;

	HASH_FIND_INT(c->targets, &pid, t);
	if (!t)
		t = cpu_follow_adopt(c, pid);
	if (!t)
		goto lost;
	if (key->ustack && !(user = named_stack(c, t, key->ustack, key->exec_gen, false)))
		goto lost;
	if (key->kstack && !(kern = named_stack(c, t, key->kstack, 0, true)))
		goto lost;
	memcpy(comm, key->comm, CPU_COMM_LEN);
	comm[CPU_COMM_LEN] = '\0';
	if (profile_frame_id(t->profile, comm[0] ? comm : "[unnamed]", &ids[n++]))
		return -ENOMEM;
	if (user)
		append(ids, &n, user);
	else if (key->flags & CPU_KEY_USTACK_ERR &&
		 profile_frame_id(t->profile, "[unknown]", &ids[n++]))
		return -ENOMEM;
	if (kern)
		append(ids, &n, kern);
	return profile_add(t->profile, now, ids, n, count);
lost:
	atomic_fetch_add(&c->stacks_lost, count);
	return 0;
}

static int add_counts(struct drain_ctx *ctx, const void *keys, const void *values, uint32_t n)
{
	const struct cpu_key *k = keys;
	const __u64 *counts = values;
	int err, first_err = 0;

	for (uint32_t i = 0; i < n; i++) {
		err = add_count(ctx->c, &k[i], counts[i], ctx->now);
		if (err && !first_err)
			first_err = err;
	}
	return first_err;
}

/* A full stacks map drops samples: before it fills, the kernel is given a fresh one. "Before
 * it fills" allows for twice as many new stacks as the last second brought. Stacks go first,
 * so a sample taken between the two swaps finds its stack in the new map while its count
 * goes to the old counts map, drained now, which then looks in both. */
static int retire_stacks_if_filling(struct cpu_collector *c)
{
	uint64_t stored = c->skel->bss->stacks_stored;
	uint64_t recent = stored - c->stacks_stored_before;
	int err;

	c->stacks_stored_before = stored;
	if (stored + 2 * recent < c->stacks_spec.max_entries / 10 * 9 || c->stacks_spare_fd < 0)
		return 0;
	err = cpu_install_inner(c->skel->maps.stacks, c->stacks_spare_fd);
	if (err)
		return err;
	c->stacks_retired_fd = c->stacks_fd;
	c->stacks_fd = c->stacks_spare_fd;
	c->stacks_spare_fd = -1;
	c->skel->bss->stacks_stored = 0;
	c->stacks_stored_before = 0;
	atomic_fetch_add(&c->stack_maps_renewed, 1);
	return 0;
}

int cpu_drain_locked(struct cpu_collector *c, int64_t now)
{
	struct drain_ctx ctx = { .c = c, .now = now };
	int old = c->counts_live, err, stacks_err;

	c->drain_seq++;
	stacks_err = retire_stacks_if_filling(c);
	err = cpu_install_inner(c->skel->maps.counts, c->counts_fds[!old]);
	if (err)
		return err;
	c->counts_live = !old;
	err = take_all(c->counts_fds[old], c->batch_keys, c->batch_values,
		       c->counts_spec.max_entries, add_counts, &ctx);
	if (c->stacks_retired_fd >= 0) {
		/* Emptying a big map costs more than making a new one. */
		close(c->stacks_retired_fd);
		c->stacks_retired_fd = -1;
		c->stacks_spare_fd = cpu_create_inner(&c->stacks_spec, "cpu_stacks");
		if (c->stacks_spare_fd < 0 && !stacks_err)
			stacks_err = c->stacks_spare_fd;
	}
	return err ? err : stacks_err;
}
