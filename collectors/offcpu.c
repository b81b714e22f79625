#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/uio.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <uthash.h>
#include "bpf/offcpu.h"
#include "collectors/collector.h"
#include "collectors/cpu_internal.h"
#include "collectors/offcpu.h"
#include "collectors/workers.h"
#include "offcpu.skel.h"

struct offcpu_target_state {
	pid_t pid;
	struct cpu_target_state *names; /* the cpu collector names its stacks */
	struct blocking_log *log;
	struct workers workers;   /* tids in the kernel's workers map */
	UT_hash_handle hh;
};

struct offcpu_collector {
	pthread_mutex_t lock;     /* everything below */
	struct offcpu_bpf *skel;
	struct cpu_collector *cpu; /* whose naming of stacks is shared */
	struct symbolizer *syms;
	struct bpf_link *switch_link, *exec_link, *switched_in_link; /* while a target exists */
	bool at_switch_in;        /* stacks taken at switch-in (sched_exit_tp), for kept waits */
	struct ring_buffer *events;
	struct swap_map counts;
	struct offcpu_target_state *targets;
	int64_t now;              /* second being drained */
	int64_t realtime_offset_ns; /* CLOCK_REALTIME - CLOCK_MONOTONIC, at this drain */
	struct cpu_stack raw;
	void *batch_keys, *batch_values;
	int ncpus;
	char workers_prefix[16];  /* config/workers as of the last drain */
	_Atomic bool running;
	_Atomic uint64_t stacks_lost;
};

static const struct swap_map_spec counts_spec = {
	.type = BPF_MAP_TYPE_HASH,
	.key_size = sizeof(struct cpu_key),
	.value_size = sizeof(__u64),
	.max_entries = 32768,
	.flags = 0,
};

/* Whether this kernel has the tracepoint stacks are taken at, at switch-in, for kept waits
 * only (Linux 6.16+): its BTF declares it. APERTURE_OFFCPU_AT_SWITCH_OUT=1 takes them at
 * switch-out as older kernels do, for tests and benchmarks of that path. */
static bool have_switched_in_tracepoint(void)
{
	const char *force = getenv("APERTURE_OFFCPU_AT_SWITCH_OUT");
	struct btf *vmlinux;
	bool found;

	if (force && strcmp(force, "0"))
		return false;
	vmlinux = btf__load_vmlinux_btf();
	if (!vmlinux)
		return false;
	found = btf__find_by_name_kind(vmlinux, "btf_trace_sched_exit_tp", BTF_KIND_TYPEDEF) > 0;
	btf__free(vmlinux);
	return found;
}

/* Opens and loads the BPF object into c, its stacks taken at switch-in or at switch-out;
 * on failure c holds no object. */
static int load_programs(struct offcpu_collector *c, bool at_switch_in, char *errbuf,
			 size_t errlen)
{
	int err;

	c->skel = offcpu_bpf__open();
	if (!c->skel) {
		err = -errno;
		snprintf(errbuf, errlen, "opening BPF object: %s", strerror(-err));
		return err;
	}
	err = swap_map_init(&c->counts, c->skel->maps.counts, &counts_spec, "offcpu_counts");
	if (err) {
		snprintf(errbuf, errlen, "creating maps: %s", strerror(-err));
		goto fail;
	}
	c->at_switch_in = at_switch_in;
	c->skel->rodata->stacks_at_switch_in = at_switch_in;
	bpf_program__set_autoload(c->skel->progs.offcpu_switched_in, at_switch_in);
	err = offcpu_bpf__load(c->skel);
	if (!err)
		err = swap_map_install(&c->counts);
	if (!err)
		return 0;
	snprintf(errbuf, errlen, "loading BPF programs: %s", strerror(-err));
fail:
	swap_map_fini(&c->counts);
	offcpu_bpf__destroy(c->skel);
	c->skel = NULL;
	return err;
}

int offcpu_collector_new(struct cpu_collector *cpu, struct offcpu_collector **out,
			 char *errbuf, size_t errlen)
{
	struct offcpu_collector *c = calloc(1, sizeof(*c));
	int err;

	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	c->cpu = cpu;
	c->syms = cpu->syms;
	c->counts.fds[0] = c->counts.fds[1] = -1;
	c->ncpus = libbpf_num_possible_cpus();
	if (c->ncpus <= 0) {
		err = -ENOMEM;
		snprintf(errbuf, errlen, "out of memory");
		goto fail;
	}
	err = load_programs(c, have_switched_in_tracepoint(), errbuf, errlen);
	/* A kernel whose BTF declares the tracepoint but that refuses the program: the older
	 * method still works there. */
	if (err && c->at_switch_in)
		err = load_programs(c, false, errbuf, errlen);
	if (err)
		goto fail;
	*out = c;
	return 0;
fail:
	offcpu_collector_free(c);
	return err;
}

/* Also gives back what only targets use: the ring's mapping and the drain's buffers (2.3 MB
 * once written), so the daemon shrinks when the targets go. */
static void detach_locked(struct offcpu_collector *c)
{
	bpf_link__destroy(c->switch_link);
	bpf_link__destroy(c->switched_in_link);
	bpf_link__destroy(c->exec_link);
	c->switch_link = c->switched_in_link = c->exec_link = NULL;
	c->running = false;
	if (c->events)
		ring_buffer__consume(c->events);
	ring_buffer__free(c->events);
	c->events = NULL;
	free(c->batch_keys);
	free(c->batch_values);
	c->batch_keys = c->batch_values = NULL;
}

static void target_state_free(struct offcpu_target_state *t)
{
	if (t->names)
		cpu_target_state_free(t->names);
	blocking_log_unref(t->log);
	workers_fini(&t->workers);
	free(t);
}

void offcpu_collector_free(struct offcpu_collector *c)
{
	struct offcpu_target_state *t, *tmp;

	if (!c)
		return;
	detach_locked(c);
	HASH_ITER(hh, c->targets, t, tmp) {
		HASH_DEL(c->targets, t);
		target_state_free(t);
	}
	offcpu_bpf__destroy(c->skel);
	swap_map_fini(&c->counts);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void offcpu_collector_set_limits(struct offcpu_collector *c, uint64_t min_us,
				 uint64_t blocking_ms)
{
	c->skel->data->min_ns = min_us * 1000;
	c->skel->data->blocking_ns = blocking_ms * 1000000;
}

static int handle_event(void *ctx, void *data, size_t size);

/* A target state of the cpu collector's kind, for naming pid's stacks into profile. Reads
 * the process's mappings now, while it is surely alive: -ESRCH if it is gone. */
static int names_new(struct offcpu_collector *c, pid_t pid, struct profile *profile,
		     struct cpu_target_state **out)
{
	struct cpu_target_state *n = calloc(1, sizeof(*n));
	struct cpu_gen_syms *slot;

	if (!n)
		return -ENOMEM;
	n->pid = pid;
	n->profile = profile_ref(profile);
	if (!cpu_gen_syms(c->cpu, n, 0, &slot)) {
		cpu_target_state_free(n);
		return -ESRCH;
	}
	*out = n;
	return 0;
}

/* Every context switch on the machine runs the program while it is attached: only while
 * some target is enabled. */
static int attach_locked(struct offcpu_collector *c, char *errbuf, size_t errlen)
{
	int err;

	if (c->switch_link)
		return 0;
	c->batch_keys = calloc(counts_spec.max_entries, counts_spec.key_size);
	c->batch_values = calloc(counts_spec.max_entries, sizeof(__u64));
	if (!c->batch_keys || !c->batch_values) {
		snprintf(errbuf, errlen, "out of memory");
		detach_locked(c);
		return -ENOMEM;
	}
	if (!c->events) {
		c->events = ring_buffer__new(bpf_map__fd(c->skel->maps.events), handle_event, c,
					     NULL);
		if (!c->events) {
			err = -errno;
			snprintf(errbuf, errlen, "ring buffer: %s", strerror(-err));
			detach_locked(c);
			return err;
		}
	}
	c->exec_link = bpf_program__attach(c->skel->progs.offcpu_exec);
	if (c->exec_link && c->at_switch_in) {
		/* Before sched_switch: no wait starts that nothing would end. */
		c->switched_in_link = bpf_program__attach(c->skel->progs.offcpu_switched_in);
		if (!c->switched_in_link) {
			err = -errno;
			snprintf(errbuf, errlen, "attaching to sched_exit_tp: %s", strerror(-err));
			detach_locked(c);
			return err;
		}
	}
	c->switch_link = c->exec_link ? bpf_program__attach(c->skel->progs.offcpu_switch) : NULL;
	if (!c->switch_link) {
		err = -errno;
		snprintf(errbuf, errlen, "attaching to sched_switch: %s", strerror(-err));
		detach_locked(c);
		return err;
	}
	c->running = true;
	return 0;
}

/* Sets the kernel's hint for the tgids whose low bits are pid's, from the targets now but
 * leaving (0: none). */
static void update_hint_locked(struct offcpu_collector *c, pid_t pid, pid_t leaving)
{
	__u32 slot = pid & OFFCPU_HINT_MASK, hint = 0;
	struct offcpu_target_state *t, *tmp;

	HASH_ITER(hh, c->targets, t, tmp)
		if (t->pid != leaving && ((__u32)t->pid & OFFCPU_HINT_MASK) == slot)
			hint = hint ? OFFCPU_HINT_SHARED : (__u32)t->pid;
	bpf_map_update_elem(bpf_map__fd(c->skel->maps.hints), &slot, &hint, BPF_ANY);
}

/* Puts t's current worker threads in the kernel's workers map. */
static void update_workers_locked(struct offcpu_collector *c, struct offcpu_target_state *t)
{
	int fd = bpf_map__fd(c->skel->maps.workers);
	struct workers w;
	__u32 one = 1;

	if (workers_find(t->pid, c->workers_prefix, &w))
		return;
	for (size_t i = 0; i < t->workers.n; i++)
		bpf_map_delete_elem(fd, &t->workers.tids[i]);
	for (size_t i = 0; i < w.n; i++)
		bpf_map_update_elem(fd, &w.tids[i], &one, BPF_ANY);
	workers_fini(&t->workers);
	t->workers = w;
}


int offcpu_collector_add(struct offcpu_collector *c, pid_t pid, struct profile *profile,
			 struct blocking_log *log, char *errbuf, size_t errlen)
{
	struct offcpu_target value = {0};
	struct offcpu_target_state *t;
	int err = 0;

	pthread_mutex_lock(&c->lock);
	HASH_FIND_INT(c->targets, &pid, t);
	if (t)
		goto out;
	t = calloc(1, sizeof(*t));
	if (!t) {
		err = -ENOMEM;
		snprintf(errbuf, errlen, "out of memory");
		goto out;
	}
	t->pid = pid;
	t->log = blocking_log_ref(log);
	HASH_ADD_INT(c->targets, pid, t);
	err = names_new(c, pid, profile, &t->names);
	if (err) {
		snprintf(errbuf, errlen, "process %d is gone", (int)pid);
		goto undo;
	}
	err = attach_locked(c, errbuf, errlen);
	if (err)
		goto undo;
	update_workers_locked(c, t);
	if (bpf_map_update_elem(bpf_map__fd(c->skel->maps.targets), &pid, &value, BPF_ANY)) {
		err = -errno;
		snprintf(errbuf, errlen, "%s", err == -E2BIG ? "too many targets enabled at once"
							    : strerror(-err));
		goto undo;
	}
	update_hint_locked(c, pid, 0);
	goto out;
undo:
	HASH_DEL(c->targets, t);
	target_state_free(t);
	if (!c->targets)
		detach_locked(c);
out:
	pthread_mutex_unlock(&c->lock);
	return err;
}

/* The tracing code a sched_switch stack starts with; a program without a kallsyms entry yet
 * is named [kernel]+0x... */
static bool is_tracing_frame(struct offcpu_collector *c, uint64_t addr)
{
	static const char *const prefixes[] = { "bpf_", "__bpf_trace_", "__traceiter_",
						"[kernel]+0x" };
	char name[256];

	if (symbolizer_kernel_name(c->syms, addr, name, sizeof(name)))
		return false;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}

/* The stack with this hash from the kernel's stacks map, named: NULL if it is gone or memory
 * ran out. Kernel stacks lose their leading tracing frames. */
static struct cpu_named_stack *named(struct offcpu_collector *c, struct offcpu_target_state *t,
				     uint64_t hash, uint32_t gen, bool kernel)
{
	struct cpu_named_key key = {
		.hash = hash,
		.gen = kernel ? 0 : gen,
		.kind = kernel ? CPU_STACK_KERNEL : CPU_STACK_USER,
	};
	const uint64_t *pcs = (const uint64_t *)c->raw.ips;
	uint32_t depth = 0, skip = 0;

	if (bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.stacks), &hash, &c->raw))
		return NULL;
	while (depth < CPU_MAX_DEPTH && pcs[depth])
		depth++;
	while (kernel && skip < depth && is_tracing_frame(c, pcs[skip]))
		skip++;
	return cpu_name_pcs(c->cpu, t->names, &key, pcs + skip, depth - skip,
			    depth == CPU_MAX_DEPTH);
}

/* The user and kernel stacks of key: -ENOENT if one is gone (or memory ran out). */
static int named_key(struct offcpu_collector *c, struct offcpu_target_state *t,
		     const struct cpu_key *key, struct cpu_named_stack **user,
		     struct cpu_named_stack **kern)
{
	*user = *kern = NULL;
	if (key->ustack && !(*user = named(c, t, key->ustack, key->exec_gen, false)))
		return -ENOENT;
	if (key->kstack && !(*kern = named(c, t, key->kstack, 0, true)))
		return -ENOENT;
	return 0;
}

/* The frames of stacks (NULL ones skipped) as one string, root first, ';' between them. */
static void join_frames(struct profile *p, const struct cpu_named_stack *const *stacks,
			int nstacks, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (int k = 0; k < nstacks; k++) {
		for (uint32_t i = 0; stacks[k] && i < stacks[k]->depth && at < len; i++) {
			const char *name = profile_frame_name(p, stacks[k]->ids[i]);
			int w = snprintf(buf + at, len - at, "%s%s", at ? ";" : "",
					 name ? name : "?");

			if (w < 0)
				return;
			at += w;
		}
	}
}

static int handle_event(void *ctx, void *data, size_t size)
{
	struct offcpu_collector *c = ctx;
	const struct offcpu_event *ev = data;
	struct cpu_named_stack *stacks[2];
	struct offcpu_target_state *t;
	struct blocking_event be = {0};
	char stack[8192];
	pid_t pid;

	if (size < sizeof(*ev))
		return 0;
	pid = ev->key.pid;
	HASH_FIND_INT(c->targets, &pid, t);
	if (!t)
		return 0;
	if (named_key(c, t, &ev->key, &stacks[0], &stacks[1]))
		snprintf(stack, sizeof(stack), "[lost]");
	else
		join_frames(t->names->profile, (const struct cpu_named_stack *const *)stacks, 2,
			    stack, sizeof(stack));
	be.time_ns = (int64_t)ev->off_ns + c->realtime_offset_ns;
	be.dur_us = ev->dur_ns / 1000;
	be.tid = ev->key.tid;
	memcpy(be.thread, ev->key.comm, sizeof(be.thread) - 1);
	be.state = ev->state;
	be.preempted = ev->preempt || ev->state == 0;
	be.stack = stack;
	return blocking_log_add(t->log, &be);
}

struct drain_ctx {
	struct offcpu_collector *c;
	int first_err;
};

static int add_sums(void *arg, const void *keys, const void *values, uint32_t n)
{
	struct offcpu_collector *c = arg;
	const struct cpu_key *k = keys;
	const __u64 *ns = values;
	struct cpu_named_stack *user, *kern;
	struct offcpu_target_state *t;
	int err, first_err = 0;

	for (uint32_t i = 0; i < n; i++) {
		pid_t pid = k[i].pid;
		uint64_t us = (ns[i] + 500) / 1000;

		HASH_FIND_INT(c->targets, &pid, t);
		if (!t || !us)
			continue;
		if (named_key(c, t, &k[i], &user, &kern)) {
			atomic_fetch_add(&c->stacks_lost, 1);
			continue;
		}
		err = cpu_add_stacks(t->names, k[i].comm, user, k[i].flags & CPU_KEY_USTACK_ERR,
				     kern, us, c->now);
		if (err && !first_err)
			first_err = err;
	}
	return first_err;
}

/* Stacks stay in the kernel's map from drain to drain; when it is filling up it is emptied,
 * after this drain named what it needed. Waits whose thread is off CPU across this lose
 * their stack (counted as stacks_lost). */
static void trim_stacks_locked(struct offcpu_collector *c)
{
	int fd = bpf_map__fd(c->skel->maps.stacks);
	__u64 key, next;

	if (c->skel->bss->stacks_stored < bpf_map__max_entries(c->skel->maps.stacks) / 10 * 8)
		return;
	while (!bpf_map_get_next_key(fd, NULL, &next)) {
		key = next;
		if (bpf_map_delete_elem(fd, &key))
			break;
	}
	c->skel->bss->stacks_stored = 0;
}

static int drain_locked(struct offcpu_collector *c, int64_t now)
{
	int old, err;
	struct timespec rt, mono;

	c->now = now;
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	c->realtime_offset_ns = (rt.tv_sec - mono.tv_sec) * 1000000000LL +
				(rt.tv_nsec - mono.tv_nsec);
	if (c->events)
		ring_buffer__consume(c->events);
	err = swap_map_swap(&c->counts, &old);
	if (err)
		return err;
	/* No buffers: detached, nothing counted since the last drain before. */
	if (c->batch_keys)
		err = swap_map_take_all(old, c->batch_keys, c->batch_values,
					c->counts.spec.max_entries, add_sums, c);
	trim_stacks_locked(c);
	return err;
}

/* Threads of pid still off CPU when it is disabled: their waits must not count from then if
 * it is enabled again. */
static void forget_started_locked(struct offcpu_collector *c, pid_t pid)
{
	int fd = bpf_map__fd(c->skel->maps.start);
	struct offcpu_start st;
	__u32 key, next, *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (!bpf_map_lookup_elem(fd, &key, &st) && st.key.pid == (__u32)pid)
			bpf_map_delete_elem(fd, &key);
	}
}

uint64_t offcpu_collector_remove(struct offcpu_collector *c, pid_t pid, int64_t now)
{
	struct offcpu_target_state *t;
	struct offcpu_target value;
	uint64_t drops = 0;
	int fd;

	pthread_mutex_lock(&c->lock);
	HASH_FIND_INT(c->targets, &pid, t);
	if (t) {
		fd = bpf_map__fd(c->skel->maps.targets);
		if (!bpf_map_lookup_elem(fd, &pid, &value))
			drops = value.drops;
		bpf_map_delete_elem(fd, &pid);
		for (size_t i = 0; i < t->workers.n; i++)
			bpf_map_delete_elem(bpf_map__fd(c->skel->maps.workers),
					    &t->workers.tids[i]);
		/* Unless a target shares its hint, no switch of pid's threads passes it once the
		 * drain's map swap has waited for the programs running: the records forgotten
		 * after it are written to by none. */
		update_hint_locked(c, pid, pid);
		drain_locked(c, now);
		forget_started_locked(c, pid);
		HASH_DEL(c->targets, t);
		target_state_free(t);
		if (!c->targets)
			detach_locked(c);
	}
	pthread_mutex_unlock(&c->lock);
	return drops;
}

void offcpu_collector_set_workers(struct offcpu_collector *c, const char *workers)
{
	pthread_mutex_lock(&c->lock);
	snprintf(c->workers_prefix, sizeof(c->workers_prefix), "%s", workers);
	pthread_mutex_unlock(&c->lock);
}

int offcpu_collector_drain(struct offcpu_collector *c, int64_t now)
{
	struct offcpu_target_state *t, *tmp;
	int err = 0;

	pthread_mutex_lock(&c->lock);
	if (c->targets) {
		HASH_ITER(hh, c->targets, t, tmp)
			update_workers_locked(c, t);
		err = drain_locked(c, now);
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

/* The user stack of a thread of pid that is away now, walked as bpf_get_stack walks it (ip,
 * then the frame-pointer chain) from its registers at switch-out, through its memory: it
 * does not change while the thread waits. Returns how many pcs. */
static uint32_t walk_away_thread(pid_t pid, const struct offcpu_start *st, uint64_t *pcs)
{
	uint64_t frame[2], fp = st->user_bp; /* frame: the caller's fp, the return address */
	uint32_t depth = 0;

	if (!st->user_ip)
		return 0;
	pcs[depth++] = st->user_ip;
	while (depth < CPU_MAX_DEPTH && fp) {
		struct iovec local = { frame, sizeof(frame) };
		struct iovec remote = { (void *)(uintptr_t)fp, sizeof(frame) };

		if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != sizeof(frame) || !frame[1])
			break;
		pcs[depth++] = frame[1];
		fp = frame[0];
	}
	return depth;
}

int offcpu_collector_thread_stack(struct offcpu_collector *c, pid_t pid, pid_t tid, char *buf,
				  size_t len)
{
	struct cpu_named_stack *user = NULL;
	struct offcpu_target_state *t;
	struct offcpu_start st;
	__u32 key = tid;

	pthread_mutex_lock(&c->lock);
	HASH_FIND_INT(c->targets, &pid, t);
	if (!t || bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.start), &key, &st) ||
	    st.key.pid != (__u32)pid || !st.ts)
		goto out;
	if (c->at_switch_in) {
		uint64_t *pcs = (uint64_t *)c->raw.ips;
		uint32_t depth = walk_away_thread(pid, &st, pcs);
		struct cpu_named_key nk = {
			.hash = cpu_hash_pcs(pcs, depth), .gen = st.key.exec_gen,
			.kind = CPU_STACK_USER,
		};

		if (depth)
			user = cpu_name_pcs(c->cpu, t->names, &nk, pcs, depth,
					    depth == CPU_MAX_DEPTH);
	} else if (st.key.ustack) {
		user = named(c, t, st.key.ustack, st.key.exec_gen, false);
	}
	if (user)
		join_frames(t->names->profile, (const struct cpu_named_stack *const *)&user, 1,
			    buf, len);
out:
	pthread_mutex_unlock(&c->lock);
	return user ? 0 : -ENOENT;
}

int offcpu_collector_workers(struct offcpu_collector *c, pid_t pid, struct workers *out)
{
	struct offcpu_target_state *t;
	int err = -ENOENT;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&c->lock);
	HASH_FIND_INT(c->targets, &pid, t);
	if (t) {
		*out = t->workers;
		out->tids = malloc((t->workers.n ? t->workers.n : 1) * sizeof(*out->tids));
		err = out->tids ? 0 : -ENOMEM;
		if (!err)
			memcpy(out->tids, t->workers.tids, t->workers.n * sizeof(*out->tids));
		else
			out->n = 0;
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

void offcpu_collector_get_stats(struct offcpu_collector *c, struct offcpu_collector_stats *out)
{
	__u64 sums[OFFCPU_STAT_NR] = {0};

	cpu_percpu_sums(bpf_map__fd(c->skel->maps.stats), c->ncpus, sums, OFFCPU_STAT_NR);
	out->waits = sums[OFFCPU_STAT_WAITS];
	out->counts_full = sums[OFFCPU_STAT_COUNTS_FULL];
	out->stacks_full = sums[OFFCPU_STAT_STACKS_FULL];
	out->start_full = sums[OFFCPU_STAT_START_FULL];
	out->events_lost = sums[OFFCPU_STAT_EVENTS_LOST];
	out->stacks_lost = atomic_load(&c->stacks_lost);
	out->stack_walks = sums[OFFCPU_STAT_STACK_WALKS];
	out->at_switch_in = c->at_switch_in;
	out->running = c->running;
}

/* The collector interface (collectors/collector.h). */

static int ops_create(struct collector_env *env, void **self, char *errbuf, size_t errlen)
{
	struct offcpu_collector *c;
	int err;

	if (!env->cpu) {
		snprintf(errbuf, errlen, "needs the cpu collector");
		return -EOPNOTSUPP;
	}
	err = offcpu_collector_new(env->cpu, &c, errbuf, errlen);
	if (err)
		return err;
	offcpu_collector_set_limits(c, env->offcpu_min_us, env->blocking_ms);
	*self = c;
	return 0;
}

static void ops_destroy(void *self)
{
	offcpu_collector_free(self);
}

static int ops_attach(void *self, const struct collector_target *t, char *errbuf, size_t errlen)
{
	return offcpu_collector_add(self, t->pid, t->offcpu, t->blocking, errbuf, errlen);
}

static uint64_t ops_detach(void *self, pid_t pid, int64_t now)
{
	return offcpu_collector_remove(self, pid, now);
}

static int ops_drain(void *self, int64_t now)
{
	return offcpu_collector_drain(self, now);
}

static void ops_target_status(void *self, const struct collector_target *t, bool attached,
			      FILE *out)
{
	struct offcpu_collector *c = self;

	if (attached)
		fprintf(out, "offcpu: tracing sched_switch, stacks at %s\n",
			c->at_switch_in ? "switch-in of kept waits" : "switch-out");
}

static void ops_status(void *self, FILE *out)
{
	struct offcpu_collector_stats os = {0};

	offcpu_collector_get_stats(self, &os);
	fprintf(out, "offcpu: %s\n", os.running ? "tracing sched_switch" : "idle");
	fprintf(out, "offcpu_stacks_at: %s\n", os.at_switch_in ? "switch-in" : "switch-out");
	fprintf(out, "offcpu_stack_walks: %llu\n", (unsigned long long)os.stack_walks);
	fprintf(out, "offcpu_waits: %llu\n", (unsigned long long)os.waits);
	fprintf(out, "offcpu_drops: %llu\n", (unsigned long long)(os.counts_full + os.start_full +
								    os.stacks_lost));
	fprintf(out, "offcpu_stacks_map_full: %llu\n", (unsigned long long)os.stacks_full);
	fprintf(out, "blocking_events_lost: %llu\n", (unsigned long long)os.events_lost);
}

static void ops_metrics(void *self, struct collector_metrics *m)
{
	static const char dropped[] = "aperture_offcpu_waits_dropped_total",
			  dropped_help[] = "Off-CPU waits dropped, by cause.";
	struct offcpu_collector_stats os = {0};

	offcpu_collector_get_stats(self, &os);
	m->active = os.running;
	const struct collector_metric rows[] = {
		{ "aperture_offcpu_waits_total", "counter",
		  "Off-CPU waits of enabled targets kept.", .value = os.waits },
		{ dropped, "counter", dropped_help, "cause", "counts_map_full", os.counts_full },
		{ dropped, "counter", dropped_help, "cause", "start_map_full", os.start_full },
		{ dropped, "counter", dropped_help, "cause", "stack_lost", os.stacks_lost },
		{ "aperture_offcpu_stack_walks_total", "counter",
		  "Off-CPU waits whose user and kernel stacks were walked.",
		  .value = os.stack_walks },
		{ "aperture_offcpu_stacks_map_full_total", "counter",
		  "Off-CPU stacks not stored: the stacks map was full.", .value = os.stacks_full },
		{ "aperture_blocking_events_lost_total", "counter",
		  "Blocking events dropped: the ring buffer was full.", .value = os.events_lost },
	};
	collector_metrics_add(m, rows, sizeof(rows) / sizeof(rows[0]));
}

const struct collector_ops offcpu_collector_ops = {
	.name = "offcpu",
	.node_cost = "programs on every context switch of the node",
	.create = ops_create,
	.destroy = ops_destroy,
	.attach = ops_attach,
	.detach = ops_detach,
	.drain = ops_drain,
	.target_status = ops_target_status,
	.status = ops_status,
	.metrics = ops_metrics,
};
