/* Draining: swap the kernel onto the other counts map, read and empty the old one, and turn
 * each (thread, user stack, kernel stack) count into a profile stack of frame ids. A stack is
 * named once per target and address space; later drains find it in the target's cache, and
 * only new ones are read from the kernel's stacks map. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "collectors/cpu_internal.h"
#include "symbols/unwind.h"
#include "cpu.skel.h"

#define FRAME_NAME_MAX 512
/* Frames of one named stack: every address with its inlined functions, and [truncated]. */

struct drain_ctx {
	struct cpu_collector *c;
	int64_t now;
};

/* The addresses of the stack with this hash: in the stacks map the kernel writes now, or in
 * the one this drain retired, where the counts being drained may have put it. */
static const struct cpu_stack *find_raw(struct cpu_collector *c, uint64_t hash)
{
	struct cpu_spilled *s;

	if (!bpf_map_lookup_elem(c->stacks_fd, &hash, &c->raw))
		return &c->raw;
	if (c->stacks_retired_fd >= 0 &&
	    !bpf_map_lookup_elem(c->stacks_retired_fd, &hash, &c->raw))
		return &c->raw;
	HASH_FIND(hh, c->spilled, &hash, sizeof(hash), s);
	return s ? &s->stack : NULL;
}

static int add_spilled(struct cpu_collector *c, const struct cpu_stack_record *r)
{
	struct cpu_spilled *s;

	HASH_FIND(hh, c->spilled, &r->hash, sizeof(r->hash), s);
	if (s)
		return 0;
	s = malloc(sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->hash = r->hash;
	s->renewal = atomic_load(&c->stack_maps_renewed);
	s->stack = r->stack;
	HASH_ADD(hh, c->spilled, hash, sizeof(s->hash), s);
	return 0;
}

void cpu_spilled_free(struct cpu_collector *c, uint64_t before_renewal)
{
	struct cpu_spilled *s, *tmp;

	HASH_ITER(hh, c->spilled, s, tmp) {
		if (s->renewal < before_renewal) {
			HASH_DEL(c->spilled, s);
			free(s);
		}
	}
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

static bool may_refresh(const struct cpu_collector *c, const struct cpu_target_state *t,
			const struct cpu_gen_syms *slot)
{
	return (slot->refreshed_drain != c->drain_seq ||
		cpu_mono_ms() - slot->refreshed_ms >= CPU_REFRESH_MS) && is_newest_gen(t, slot);
}

/* The functions at a user address, the out-of-line one first: "[unknown]" if no mapping
 * has it even after re-reading the mappings. */
static void name_user_frame(struct cpu_collector *c, struct cpu_target_state *t,
			    struct proc_syms *syms, struct cpu_gen_syms *slot, uint64_t addr,
			    bool is_return, struct sym_frames *out)
{
	int err = syms ? proc_syms_frames(syms, addr, is_return, out) : -ENOENT;

	if (err == -ENOENT && syms && may_refresh(c, t, slot)) {
		slot->refreshed_ms = cpu_mono_ms();
		slot->refreshed_drain = c->drain_seq;
		if (!proc_syms_refresh(syms))
			err = proc_syms_frames(syms, addr, is_return, out);
	}
	if (err) {
		out->n = 1;
		out->module = NULL;
		out->build_id[0] = '\0';
		out->f[0] = (struct sym_frame){ .name = "[unknown]" };
	}
}

/* Interns the frames of one user address into ids, with where each function is and the
 * line running in it. */
static int intern_user_frames(struct cpu_target_state *t, const struct sym_frames *fr,
			      uint32_t *ids, uint32_t *lines)
{
	for (int k = 0; k < fr->n; k++) {
		struct frame_info info = {
			.file = fr->f[k].file,
			.line = fr->f[k].line,
			.module = fr->module,
			.build_id = fr->build_id[0] ? fr->build_id : NULL,
		};

		if (profile_frame_id_info(t->profile, fr->f[k].name, &info, &ids[k]))
			return -ENOMEM;
		lines[k] = fr->f[k].at_line;
	}
	return 0;
}

static void name_kernel_frame(struct cpu_collector *c, uint64_t addr, char *buf)
{
	size_t n;

	if (symbolizer_kernel_name(c->syms, addr, buf, FRAME_NAME_MAX - 4))
		snprintf(buf, FRAME_NAME_MAX - 4, "[kernel]+0x%llx", (unsigned long long)addr);
	n = strlen(buf);
	memcpy(buf + n, "_[k]", 5);
}

/* Not MODULE+0xOFFSET, [anon]+0xADDRESS or [unknown]. */
static bool is_named(const char *name)
{
	const char *plus = strrchr(name, '+');

	if (name[0] == '[')
		return false;
	return !plus || strncmp(plus, "+0x", 3) || plus[3 + strspn(plus + 3, "0123456789abcdef")];
}

uint64_t cpu_hash_pcs(const uint64_t *pcs, uint32_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (uint32_t i = 0; i < n; i++) {
		h ^= pcs[i];
		h *= 0x100000001b3ULL;
		h ^= h >> 29;
	}
	return h ? h : 1;
}

/* Names a stack of pcs (leaf first, depth of them) into frame ids, root first, and keeps it
 * in the target's cache under key. NULL if memory ran out. */
static struct cpu_named_stack *name_stack(struct cpu_collector *c, struct cpu_target_state *t,
					  const struct cpu_named_key *key, const uint64_t *pcs,
					  uint32_t depth, bool truncated)
{
	uint32_t ids[CPU_STACK_FRAMES_MAX], lines[CPU_STACK_FRAMES_MAX];
	uint32_t j = 0, user_frames = 0, named_frames = 0;
	uint32_t unmapped_frames = 0, jit_end = 0;
	struct cpu_gen_syms *slot = NULL;
	struct proc_syms *syms = NULL;
	bool kernel = key->kind == CPU_STACK_KERNEL;
	struct cpu_named_stack *n;
	char name[FRAME_NAME_MAX];
	struct sym_frames fr;

	/* The walk stopped before the outermost frame: say so at the root. */
	if (truncated) {
		lines[j] = 0;
		if (profile_frame_id(t->profile, "[truncated]", &ids[j++]))
			return NULL;
	}
	if (!kernel)
		syms = cpu_gen_syms(c, t, key->gen, &slot);
	for (uint32_t i = depth; i-- > 0;) {
		if (kernel) {
			name_kernel_frame(c, pcs[i], name);
			lines[j] = 0;
			if (profile_frame_id(t->profile, name, &ids[j++]))
				return NULL;
			continue;
		}
		name_user_frame(c, t, syms, slot, pcs[i], i > 0, &fr);
		if (intern_user_frames(t, &fr, &ids[j], &lines[j]))
			return NULL;
		j += fr.n;
		/* JIT code, the interpreter and stubs: Java frames can stand in for these. */
		if (!strncmp(fr.f[0].name, "[anon]", 6))
			jit_end = j;
		user_frames++;
		named_frames += is_named(fr.f[0].name);
		unmapped_frames += !strcmp(fr.f[0].name, "[unknown]");
	}
	n = malloc(sizeof(*n) + 2 * j * sizeof(n->ids[0]));
	if (!n)
		return NULL;
	memset(n, 0, sizeof(*n));
	n->key = *key;
	n->depth = j;
	n->user_frames = user_frames;
	n->named_frames = named_frames;
	n->unmapped_frames = unmapped_frames;
	n->jit_end = jit_end;
	memcpy(n->ids, ids, j * sizeof(ids[0]));
	memcpy(n->ids + j, lines, j * sizeof(lines[0]));
	HASH_ADD(hh, t->named, key, sizeof(n->key), n);
	return n;
}

/* A stack named before, unless it has addresses no mapping covered and the mappings may be
 * read again now: then it is forgotten, to be named afresh. */
static struct cpu_named_stack *find_named(struct cpu_collector *c, struct cpu_target_state *t,
					  const struct cpu_named_key *key)
{
	struct cpu_gen_syms *slot;
	struct cpu_named_stack *n;

	HASH_FIND(hh, t->named, key, sizeof(*key), n);
	if (!n || !n->unmapped_frames || !cpu_gen_syms(c, t, key->gen, &slot) ||
	    !may_refresh(c, t, slot))
		return n;
	HASH_DEL(t->named, n);
	free(n);
	return NULL;
}

struct cpu_named_stack *cpu_name_pcs(struct cpu_collector *c, struct cpu_target_state *t,
				     const struct cpu_named_key *key, const uint64_t *pcs,
				     uint32_t depth, bool truncated)
{
	struct cpu_named_stack *n = find_named(c, t, key);

	return n ? n : name_stack(c, t, key, pcs, depth, truncated);
}

/* A stack of the kernel's stacks map by its hash. NULL if the raw stack is not at hand
 * (lost) or memory ran out. */
static struct cpu_named_stack *named_stack(struct cpu_collector *c, struct cpu_target_state *t,
					   uint64_t hash, uint32_t gen, bool kernel)
{
	struct cpu_named_key key = {
		.hash = hash,
		.gen = kernel ? 0 : gen,
		.kind = kernel ? CPU_STACK_KERNEL : CPU_STACK_USER,
	};
	const struct cpu_stack *raw;
	struct cpu_named_stack *n;
	uint32_t depth = 0;

	n = find_named(c, t, &key);
	if (n)
		return n;
	raw = find_raw(c, hash);
	if (!raw)
		return NULL;
	while (depth < CPU_MAX_DEPTH && raw->ips[depth])
		depth++;
	/* A full buffer means the walk may have stopped early. The map's __u64 is the same
	 * 64 bits; filled by a call, so no access is reordered. */
	return name_stack(c, t, &key, (const uint64_t *)raw->ips, depth, depth == CPU_MAX_DEPTH);
}

static void append(uint32_t *ids, uint32_t *lines, uint32_t *n,
		   const struct cpu_named_stack *s)
{
	memcpy(ids + *n, s->ids, s->depth * sizeof(ids[0]));
	memcpy(lines + *n, cpu_named_lines(s), s->depth * sizeof(lines[0]));
	*n += s->depth;
}

/* Adds count samples of (comm, user stack, kernel stack) to t's profile. */
int cpu_add_stacks(struct cpu_target_state *t, const char *raw_comm,
		      const struct cpu_named_stack *user, bool user_err,
		      const struct cpu_named_stack *kern, uint64_t count, int64_t now)
{
	uint32_t ids[2 * CPU_STACK_FRAMES_MAX + 2], lines[2 * CPU_STACK_FRAMES_MAX + 2];
	uint32_t n = 0;
	char comm[CPU_COMM_LEN + 1];

	memcpy(comm, raw_comm, CPU_COMM_LEN);
	comm[CPU_COMM_LEN] = '\0';
	lines[n] = 0;
	if (profile_frame_id(t->profile, comm[0] ? comm : "[unnamed]", &ids[n++]))
		return -ENOMEM;
	if (user) {
		append(ids, lines, &n, user);
		t->frames_total += (uint64_t)user->user_frames * count;
		t->frames_named += (uint64_t)user->named_frames * count;
	} else if (user_err) {
		lines[n] = 0;
		if (profile_frame_id(t->profile, "[unknown]", &ids[n++]))
			return -ENOMEM;
	}
	if (kern)
		append(ids, lines, &n, kern);
	return profile_add_lines(t->profile, now, ids, lines, n, count);
}

static int add_count(struct cpu_collector *c, const struct cpu_key *key, uint64_t count,
		     int64_t now)
{
	struct cpu_named_stack *user = NULL, *kern = NULL;
	struct cpu_target_state *t;
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
	return cpu_add_stacks(t, key->comm, user, key->flags & CPU_KEY_USTACK_ERR, kern, count,
			      now);
lost:
	atomic_fetch_add(&c->stacks_lost, count);
	return 0;
}

/* The user stack of a dwarf-mode sample, unwound (into c->dwarf_pcs, *depth of them) and
 * named; *fp_frames: what unwind_auto_judge made of it, -1 if it was not judged. NULL if the
 * sample's address space can't be had any more, or memory ran out. */
static struct cpu_named_stack *dwarf_stack(struct cpu_collector *c, struct cpu_target_state *t,
					   const struct cpu_dwarf_hdr *h, int *depth,
					   bool *truncated, int *fp_frames)
{
	struct unwind_regs regs = { .ip = h->ip, .sp = h->sp, .bp = h->bp };
	struct unwind_stack stack = { .data = h + 1, .len = h->stack_len };
	struct cpu_named_key key = { .gen = h->exec_gen, .kind = CPU_STACK_DWARF };
	struct cpu_gen_syms *slot;
	struct cpu_named_stack *n;

	*fp_frames = -1;
	if (!cpu_gen_syms(c, t, h->exec_gen, &slot))
		return NULL;
	/* Only the current address space can be read: an exec'd one has no maps left. */
	if (!slot->unwinder && (!is_newest_gen(t, slot) ||
				unwinder_new(t->pid, &slot->unwinder)))
		return NULL;
	*depth = unwinder_unwind(slot->unwinder, h->tid, &regs, &stack, c->dwarf_pcs,
				 CPU_MAX_DEPTH, truncated);
	if (c->unwind == CPU_UNWIND_AUTO && is_newest_gen(t, slot)) {
		bool cut = h->stack_len >= CPU_STACK_BYTES;
		int found;

		if (t->unwind_auto.verdict < 0) {
			unwind_auto_judge(&t->unwind_auto, &regs, &stack, cut, c->dwarf_pcs,
					  *depth, fp_frames);
		} else if (!t->dwarf) {
			/* Taken before the verdict moved t to the kernel's walk, still in the
			 * ring then: rooted as that walk roots its stacks. */
			if (!unwind_auto_fp_whole(&regs, &stack, cut, c->dwarf_pcs, *depth, &found))
				found = 0;
			return cpu_auto_fp_rooted(c, t, h->exec_gen, c->dwarf_pcs, *depth,
						  *truncated, found);
		}
	}
	key.hash = cpu_hash_pcs(c->dwarf_pcs, *depth) ^ *truncated;
	n = find_named(c, t, &key);
	if (n)
		return n;
	return name_stack(c, t, &key, c->dwarf_pcs, *depth, *truncated);
}

static int dwarf_sample(struct cpu_collector *c, const struct cpu_dwarf_hdr *h, size_t size)
{
	struct cpu_named_stack *user, *kern = NULL;
	struct cpu_target_state *t;
	int depth, fp_frames;
	int64_t sec = time(NULL);
	bool truncated;
	pid_t pid;

	if (size < sizeof(*h) || h->stack_len > size - sizeof(*h))
		return 0;
	pid = h->pid;
	atomic_fetch_add(&c->dwarf_samples, 1);
	HASH_FIND_INT(c->targets, &pid, t);
	if (!t)
		return 0; /* disabled since */
	user = dwarf_stack(c, t, h, &depth, &truncated, &fp_frames);
	if (!user || (h->kstack && !(kern = named_stack(c, t, h->kstack, 0, true))))
		atomic_fetch_add(&c->stacks_lost, 1);
	else if (t->java_signo)
		cpu_java_hold(t, h->comm, h->tid, h->ns, user, kern, sec);
	/* A judged sample waits for the verdict, so that it roots as the later ones will. */
	else if (fp_frames < 0 || cpu_auto_hold(t, h->comm, sec, h->exec_gen, c->dwarf_pcs, depth,
						truncated, fp_frames, user, kern))
		cpu_add_stacks(t, h->comm, user, false, kern, 1, sec);
	if (fp_frames >= 0 && t->unwind_auto.verdict >= 0) {
		cpu_target_apply_unwind(c, t);
		/* As the target is sampled from now on (a JVM stays in dwarf mode). */
		cpu_auto_release(c, t, !t->dwarf);
	}
	return 0;
}

int cpu_ring_record(void *ctx, void *data, size_t size)
{
	struct cpu_collector *c = ctx;
	const __u32 *kind = data;

	if (size >= sizeof(struct cpu_stack_record) && *kind == CPU_RECORD_STACK)
		add_spilled(c, data);
	else if (*kind == CPU_RECORD_DWARF)
		dwarf_sample(c, data, size);
	return 0;
}

static int add_counts(void *arg, const void *keys, const void *values, uint32_t n)
{
	struct drain_ctx *ctx = arg;
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
 * it fills" allows for twice as many new stacks as the busiest of the last three drain
 * intervals brought: one interval alone misleads when drains run late and then back to back
 * (a slow drain on a loaded machine), leaving a short interval right before a long one.
 * Stacks go first, so a sample taken between the two swaps finds its stack in the new map
 * while its count goes to the old counts map, drained now, which then looks in both. */
static int retire_stacks_if_filling(struct cpu_collector *c)
{
	uint64_t stored = c->skel->bss->stacks_stored;
	uint64_t *r = c->stacks_recent, busiest;
	int err;

	r[2] = r[1];
	r[1] = r[0];
	r[0] = stored - c->stacks_stored_before;
	busiest = r[0] > r[1] ? r[0] : r[1];
	busiest = busiest > r[2] ? busiest : r[2];
	c->stacks_stored_before = stored;
	if (stored + 2 * busiest < c->stacks_spec.max_entries / 10 * 9 || c->stacks_spare_fd < 0)
		return 0;
	err = swap_map_set(c->skel->maps.stacks, c->stacks_spare_fd);
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
	int old, err, stacks_err;
	struct cpu_target_state *t, *tmp;

	c->drain_seq++;
	cpu_follow_install_locked(c);
	stacks_err = retire_stacks_if_filling(c);
	err = swap_map_swap(&c->counts, &old);
	if (err)
		return err;
	/* Every program that counted into the old map has finished, and spilled its stack
	 * first: the ring holds every stack those counts name. Dwarf samples there name kernel
	 * stacks in the retired map, still readable now. */
	cpu_ring_read_locked(c);
	/* Targets that left dwarf mode by going away leave a ring bigger than needed. */
	cpu_ring_fit_locked(c, false);
	HASH_ITER(hh, c->targets, t, tmp) {
		if (t->java_n)
			cpu_java_flush(t, false);
		cpu_auto_deadline(c, t, now);
		/* Its dwarf samples are read: a target walked by frame pointers now (unwind
		 * auto's verdict) needs no unwinder, which holds the CFI of every module it
		 * mapped. */
		for (int i = 0; i < CPU_GENS && !t->dwarf; i++) {
			unwinder_free(t->gens[i].unwinder);
			t->gens[i].unwinder = NULL;
		}
	}
	/* No buffers: no target since the last one went, and nothing counted. */
	if (c->batch_keys)
		err = swap_map_take_all(old, c->batch_keys, c->batch_values,
					c->counts.spec.max_entries, add_counts, &ctx);
	if (c->stacks_retired_fd >= 0) {
		/* Emptying a big map costs more than making a new one. */
		close(c->stacks_retired_fd);
		c->stacks_retired_fd = -1;
		cpu_spilled_free(c, atomic_load(&c->stack_maps_renewed));
		c->stacks_spare_fd = swap_map_create(&c->stacks_spec, "cpu_stacks");
		if (c->stacks_spare_fd < 0 && !stacks_err)
			stacks_err = c->stacks_spare_fd;
	}
	return err ? err : stacks_err;
}
