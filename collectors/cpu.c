#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "collectors/collector.h"
#include "collectors/cpu_internal.h"
#include "symbols/unwind.h"
#include "cpu.skel.h"

/* libbpf reports why a load failed only through its print callback; keep the last line so
 * the reason can reach status instead of a daemon's closed stderr. */
static __thread char libbpf_last[256];

static int libbpf_capture(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_WARN)
		vsnprintf(libbpf_last, sizeof(libbpf_last), fmt, ap);
	if (getenv("APERTURE_DEBUG_BPF"))
		return vfprintf(stderr, fmt, ap);
	return 0;
}

static const struct swap_map_spec counts_spec = {
	.type = BPF_MAP_TYPE_HASH,
	.key_size = sizeof(struct cpu_key),
	.value_size = sizeof(__u64),
	.max_entries = 32768,
	.flags = 0, /* preallocated: emptied and refilled every second */
};

/* Stacks are stored once and kept: allocated as they come where the kernel allows it. */
static const struct swap_map_spec stacks_spec = {
	.type = BPF_MAP_TYPE_HASH,
	.key_size = sizeof(__u64),
	.value_size = sizeof(struct cpu_stack),
	.max_entries = 32768, /* up to ~36 MiB if all are used */
	.flags = BPF_F_NO_PREALLOC,
};

static const struct swap_map_spec stacks_spec_prealloc = {
	.type = BPF_MAP_TYPE_HASH,
	.key_size = sizeof(__u64),
	.value_size = sizeof(struct cpu_stack),
	.max_entries = 4096, /* 4 MiB up front */
	.flags = 0,
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void close_maps(struct cpu_collector *c)
{
	swap_map_fini(&c->counts);
	close_fd(&c->stacks_fd);
	close_fd(&c->stacks_spare_fd);
}

/* Makes the inner maps of shape stacks and loads the programs against them. */
static int load_with(struct cpu_collector *c, const struct swap_map_spec *stacks)
{
	int err;

	c->stacks_spec = *stacks;
	c->skel = cpu_bpf__open();
	if (!c->skel) {
		err = -errno;
		goto fail;
	}
	err = swap_map_init(&c->counts, c->skel->maps.counts, &counts_spec, "cpu_counts");
	if (err)
		goto fail;
	c->stacks_fd = swap_map_create(&c->stacks_spec, "cpu_stacks");
	c->stacks_spare_fd = swap_map_create(&c->stacks_spec, "cpu_stacks");
	if (c->stacks_fd < 0 || c->stacks_spare_fd < 0) {
		err = -ENOMEM;
		goto fail;
	}
	bpf_map__set_inner_map_fd(c->skel->maps.stacks, c->stacks_fd);
	err = cpu_bpf__load(c->skel);
	if (err)
		goto fail;
	return 0;
fail:
	cpu_bpf__destroy(c->skel);
	c->skel = NULL;
	close_maps(c);
	return err;
}

static int perf_open(unsigned hz, int cpu)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.size = sizeof(attr),
		.freq = 1,
		.sample_freq = hz,
	};
	int fd = syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

static void events_close(int n, int *fds, struct bpf_link **links)
{
	for (int i = 0; i < n; i++) {
		bpf_link__destroy(links[i]);
		links[i] = NULL;
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

/* Opens and attaches one event per online CPU at hz. CPUs that are offline are skipped; no
 * CPU at all is an error. On error nothing stays open. */
static int events_open(struct cpu_collector *c, unsigned hz, int *fds, struct bpf_link **links,
		       char *errbuf, size_t errlen)
{
	int opened = 0, err = 0;

	for (int cpu = 0; cpu < c->ncpus; cpu++) {
		fds[cpu] = perf_open(hz, cpu);
		links[cpu] = NULL;
		if (fds[cpu] == -ENODEV)
			continue;
		if (fds[cpu] < 0) {
			err = fds[cpu];
			snprintf(errbuf, errlen, "perf_event_open(cpu-clock, %u Hz, cpu %d): %s", hz,
				 cpu, strerror(-err));
			goto fail;
		}
		links[cpu] = bpf_program__attach_perf_event(c->skel->progs.cpu_sample, fds[cpu]);
		if (!links[cpu]) {
			err = -errno;
			snprintf(errbuf, errlen, "attaching to cpu %d: %s", cpu, strerror(-err));
			goto fail;
		}
		opened++;
	}
	if (opened)
		return 0;
	err = -ENODEV;
	snprintf(errbuf, errlen, "no online CPU accepted a cpu-clock perf event");
fail:
	events_close(c->ncpus, fds, links);
	return err;
}

/* Unwinds dwarf-mode samples as they come, so the ring buffer never holds more than a
 * moment's worth. Under the collector's lock, as drains are: one writer per profile. */
static void *dwarf_main(void *arg)
{
	struct cpu_collector *c = arg;
	struct epoll_event ev;

	while (!atomic_load(&c->dwarf_stop)) {
		if (epoll_wait(c->dwarf_epfd, &ev, 1, 200) <= 0)
			continue;
		pthread_mutex_lock(&c->lock);
		cpu_follow_install_locked(c);
		cpu_ring_read_locked(c);
		pthread_mutex_unlock(&c->lock);
	}
	return NULL;
}

static int dwarf_start(struct cpu_collector *c)
{
	int err;

	err = cpu_ring_start(c);
	if (err)
		return err;
	err = -pthread_create(&c->dwarf_thread, NULL, dwarf_main, c);
	if (!err)
		c->dwarf_thread_running = true;
	return err;
}

int cpu_collector_new(struct symbolizer *syms, unsigned frequency_hz,
		      struct cpu_collector **out, char *errbuf, size_t errlen)
{
	struct cpu_collector *c;
	int err;

	libbpf_set_print(libbpf_capture);
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	c->syms = syms;
	c->hz = frequency_hz;
	c->unwind = CPU_UNWIND_AUTO;
	c->counts.fds[0] = c->counts.fds[1] = -1;
	c->stacks_fd = c->stacks_spare_fd = c->stacks_retired_fd = -1;
	c->dwarf_ring_fd = c->dwarf_epfd = -1;
	c->ncpus = libbpf_num_possible_cpus();
	if (c->ncpus <= 0) {
		err = c->ncpus ? c->ncpus : -ENODEV;
		snprintf(errbuf, errlen, "cannot count CPUs: %s", strerror(-err));
		goto fail;
	}
	libbpf_last[0] = '\0';
	err = load_with(c, &stacks_spec);
	if (err)
		err = load_with(c, &stacks_spec_prealloc);
	if (err) {
		snprintf(errbuf, errlen, "loading BPF programs: %s%s%s", strerror(-err),
			 libbpf_last[0] ? ": " : "", libbpf_last);
		errbuf[strcspn(errbuf, "\n")] = '\0';
		goto fail;
	}
	err = swap_map_install(&c->counts);
	if (!err)
		err = swap_map_set(c->skel->maps.stacks, c->stacks_fd);
	if (err) {
		snprintf(errbuf, errlen, "installing BPF maps: %s", strerror(-err));
		goto fail;
	}
	c->exec_link = bpf_program__attach(c->skel->progs.cpu_exec);
	if (!c->exec_link) {
		err = -errno;
		snprintf(errbuf, errlen, "attaching to sched_process_exec: %s", strerror(-err));
		goto fail;
	}
	err = dwarf_start(c);
	if (err) {
		snprintf(errbuf, errlen, "reading the dwarf samples' ring buffer: %s",
			 strerror(-err));
		goto fail;
	}
	c->fork_link = bpf_program__attach(c->skel->progs.cpu_fork);
	if (!c->fork_link) {
		err = -errno;
		snprintf(errbuf, errlen, "attaching to sched_process_fork: %s", strerror(-err));
		goto fail;
	}
	c->perf_fds = calloc(c->ncpus, sizeof(*c->perf_fds));
	c->perf_links = calloc(c->ncpus, sizeof(*c->perf_links));
	if (!c->perf_fds || !c->perf_links) {
		err = -ENOMEM;
		snprintf(errbuf, errlen, "out of memory");
		goto fail;
	}
	for (int i = 0; i < c->ncpus; i++)
		c->perf_fds[i] = -1;
	*out = c;
	return 0;
fail:
	cpu_collector_free(c);
	return err;
}

void cpu_collector_free(struct cpu_collector *c)
{
	struct cpu_target_state *t, *tmp;

	if (!c)
		return;
	if (c->perf_fds)
		events_close(c->ncpus, c->perf_fds, c->perf_links);
	if (c->dwarf_thread_running) {
		atomic_store(&c->dwarf_stop, true);
		pthread_join(c->dwarf_thread, NULL);
	}
	cpu_ring_stop(c);
	bpf_link__destroy(c->exec_link);
	bpf_link__destroy(c->fork_link);
	cpu_follow_stop(c);
	HASH_ITER(hh, c->targets, t, tmp) {
		HASH_DEL(c->targets, t);
		cpu_target_state_free(t);
	}
	cpu_spilled_free(c, UINT64_MAX);
	cpu_bpf__destroy(c->skel);
	close_maps(c);
	free(c->perf_fds);
	free(c->perf_links);
	free(c->batch_keys);
	free(c->batch_values);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int cpu_collector_set_frequency(struct cpu_collector *c, unsigned hz, char *errbuf,
				size_t errlen)
{
	int *fds = calloc(c->ncpus, sizeof(*fds));
	struct bpf_link **links = calloc(c->ncpus, sizeof(*links));
	int err = -ENOMEM;

	if (!fds || !links) {
		snprintf(errbuf, errlen, "out of memory");
		goto out;
	}
	pthread_mutex_lock(&c->lock);
	/* Open the new events before closing the old ones: if the kernel refuses the rate,
	 * sampling goes on as it was. Idle, one trial open validates the rate. */
	err = events_open(c, hz, fds, links, errbuf, errlen);
	if (!err) {
		if (c->running) {
			events_close(c->ncpus, c->perf_fds, c->perf_links);
			memcpy(c->perf_fds, fds, c->ncpus * sizeof(*fds));
			memcpy(c->perf_links, links, c->ncpus * sizeof(*links));
		} else {
			events_close(c->ncpus, fds, links);
		}
		c->hz = hz;
		cpu_ring_fit_locked(c, false);
	}
	pthread_mutex_unlock(&c->lock);
out:
	free(fds);
	free(links);
	return err;
}

static void forget_named(struct cpu_target_state *t)
{
	struct cpu_named_stack *n, *tmp;

	HASH_ITER(hh, t->named, n, tmp) {
		HASH_DEL(t->named, n);
		free(n);
	}
}

void cpu_collector_forget_names(struct cpu_collector *c)
{
	struct cpu_target_state *t, *tmp;

	pthread_mutex_lock(&c->lock);
	HASH_ITER(hh, c->targets, t, tmp)
		forget_named(t);
	pthread_mutex_unlock(&c->lock);
}

void cpu_target_state_free(struct cpu_target_state *t)
{
	cpu_java_free(t);
	cpu_auto_free(t);
	forget_named(t);
	for (int i = 0; i < CPU_GENS; i++) {
		proc_syms_free(t->gens[i].syms);
		unwinder_free(t->gens[i].unwinder);
	}
	profile_unref(t->profile);
	free(t);
}

int64_t cpu_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The slot of generation gen if its mappings were read. */
static struct cpu_gen_syms *find_gen(struct cpu_collector *c, struct cpu_target_state *t,
				     uint32_t gen)
{
	for (int i = 0; i < CPU_GENS; i++) {
		if (t->gens[i].syms && t->gens[i].gen == gen) {
			t->gens[i].used_drain = c->drain_seq;
			return &t->gens[i];
		}
	}
	return NULL;
}

/* Only a generation newer than every one known is the current address space. */
static bool newer_known(const struct cpu_target_state *t, uint32_t gen)
{
	for (int i = 0; i < CPU_GENS; i++)
		if (t->gens[i].syms && (int32_t)(t->gens[i].gen - gen) > 0)
			return true;
	return false;
}

/* gen's mappings were read again: its stacks with addresses the old read had not are named
 * afresh. */
static void renew_gen(struct cpu_target_state *t, struct cpu_gen_syms *slot,
		      struct proc_syms *syms)
{
	struct cpu_named_stack *n, *tmp;

	proc_syms_free(slot->syms);
	slot->syms = syms;
	HASH_ITER(hh, t->named, n, tmp) {
		if (n->key.gen == slot->gen && n->key.kind != CPU_STACK_KERNEL &&
		    n->unmapped_frames) {
			HASH_DEL(t->named, n);
			free(n);
		}
	}
}

struct cpu_gen_syms *cpu_gen_syms_put(struct cpu_collector *c, struct cpu_target_state *t,
				      uint32_t gen, struct proc_syms *syms)
{
	struct cpu_gen_syms *victim = find_gen(c, t, gen);

	if (victim) {
		renew_gen(t, victim, syms);
		return victim;
	}
	if (newer_known(t, gen)) {
		proc_syms_free(syms);
		return NULL;
	}
	victim = &t->gens[0];
	for (int i = 0; i < CPU_GENS; i++)
		if (!t->gens[i].syms || t->gens[i].used_drain < victim->used_drain)
			victim = &t->gens[i];
	proc_syms_free(victim->syms);
	unwinder_free(victim->unwinder);
	victim->unwinder = NULL;
	victim->syms = syms;
	/* A new executable may keep frame pointers where the old one did not. */
	cpu_auto_reset(c, t);
	cpu_target_apply_unwind(c, t);
	victim->gen = gen;
	/* Maps read while the loader was still mapping libraries miss them: the first address
	 * they miss reads them again at once rather than after CPU_REFRESH_MS, or the first
	 * samples in libc would stay [unknown]. */
	victim->refreshed_ms = cpu_mono_ms() - CPU_REFRESH_MS;
	victim->refreshed_drain = c->drain_seq - 1;
	victim->used_drain = c->drain_seq;
	return victim;
}

/* The slot of generation gen, opening the process's current mappings for a generation seen
 * for the first time (an exec happened). NULL when it can't be had (process gone). */
struct proc_syms *cpu_gen_syms(struct cpu_collector *c, struct cpu_target_state *t,
			       uint32_t gen, struct cpu_gen_syms **slot)
{
	struct proc_syms *syms;

	*slot = find_gen(c, t, gen);
	if (*slot)
		return (*slot)->syms;
	if (newer_known(t, gen) || proc_syms_new(c->syms, t->pid, &syms))
		return NULL;
	*slot = cpu_gen_syms_put(c, t, gen, syms);
	return *slot ? (*slot)->syms : NULL;
}

void cpu_target_apply_unwind(struct cpu_collector *c, struct cpu_target_state *t)
{
	int fd = bpf_map__fd(c->skel->maps.dwarf_targets);
	/* Java stacks are matched to samples by time: only dwarf samples carry it. */
	bool dwarf = c->unwind == CPU_UNWIND_DWARF || t->java_signo > 0 ||
		     (c->unwind == CPU_UNWIND_AUTO && t->unwind_auto.verdict != 1);
	__u8 one = 1;

	if (dwarf == t->dwarf)
		return;
	/* A first dwarf-mode target needs the big ring before its first sample; the last one
	 * leaving makes it small again. */
	if (dwarf)
		cpu_ring_fit_locked(c, true);
	if (dwarf ? bpf_map_update_elem(fd, &t->pid, &one, BPF_ANY)
		  : bpf_map_delete_elem(fd, &t->pid))
		return;
	t->dwarf = dwarf;
	if (!dwarf)
		cpu_ring_fit_locked(c, false);
}

void cpu_collector_set_unwind(struct cpu_collector *c, enum cpu_unwind mode)
{
	struct cpu_target_state *t, *tmp;

	pthread_mutex_lock(&c->lock);
	c->unwind = mode;
	HASH_ITER(hh, c->targets, t, tmp) {
		/* No verdict will come: what waited for one goes in as unwound. */
		if (mode != CPU_UNWIND_AUTO)
			cpu_auto_release(c, t, false);
		cpu_target_apply_unwind(c, t);
	}
	pthread_mutex_unlock(&c->lock);
}

int cpu_collector_target_info(struct cpu_collector *c, pid_t pid, struct cpu_target_info *out)
{
	struct cpu_target_state *t;

	pthread_mutex_lock(&c->lock);
	HASH_FIND_INT(c->targets, &pid, t);
	if (t) {
		out->dwarf = t->dwarf;
		out->frames_named = t->frames_named;
		out->frames_total = t->frames_total;
		out->java_signo = t->java_signo;
		out->java_merged = t->java_merged;
		out->java_alone = t->java_alone;
	}
	pthread_mutex_unlock(&c->lock);
	return t ? 0 : -ENOENT;
}

static int events_start_locked(struct cpu_collector *c, char *errbuf, size_t errlen)
{
	int err;

	if (c->running)
		return 0;
	err = events_open(c, c->hz, c->perf_fds, c->perf_links, errbuf, errlen);
	if (!err)
		c->running = true;
	return err;
}

/* With no target, CPUs take no sampling interrupts at all, and the drain's buffers (1.8 MB
 * once a drain has written them) go back. */
static void events_stop_idle_locked(struct cpu_collector *c)
{
	if (!HASH_COUNT(c->targets) && c->running) {
		events_close(c->ncpus, c->perf_fds, c->perf_links);
		c->running = false;
	}
	if (!HASH_COUNT(c->targets)) {
		free(c->batch_keys);
		free(c->batch_values);
		c->batch_keys = c->batch_values = NULL;
	}
}

static int batch_alloc_locked(struct cpu_collector *c)
{
	if (!c->batch_keys)
		c->batch_keys = calloc(counts_spec.max_entries, counts_spec.key_size);
	if (!c->batch_values)
		c->batch_values = calloc(counts_spec.max_entries, sizeof(__u64));
	return c->batch_keys && c->batch_values ? 0 : -ENOMEM;
}

int cpu_collector_add(struct cpu_collector *c, pid_t pid, struct profile *profile,
		      char *errbuf, size_t errlen)
{
	struct cpu_target value = {0};
	struct cpu_target_state *t;
	struct cpu_gen_syms *slot;
	int err = 0;

	pthread_mutex_lock(&c->lock);
	HASH_FIND_INT(c->targets, &pid, t);
	if (t)
		goto out;
	t = calloc(1, sizeof(*t));
	if (!t || batch_alloc_locked(c)) {
		free(t);
		events_stop_idle_locked(c);
		err = -ENOMEM;
		snprintf(errbuf, errlen, "out of memory");
		goto out;
	}
	t->pid = pid;
	t->profile = profile_ref(profile);
	HASH_ADD_INT(c->targets, pid, t);
	/* Read the mappings now, while the process is surely alive. */
	if (!cpu_gen_syms(c, t, 0, &slot)) {
		err = -ESRCH;
		snprintf(errbuf, errlen, "process %d is gone", (int)pid);
		goto undo;
	}
	err = events_start_locked(c, errbuf, errlen);
	if (err)
		goto undo;
	if (bpf_map_update_elem(bpf_map__fd(c->skel->maps.targets), &pid, &value, BPF_ANY)) {
		err = -errno;
		snprintf(errbuf, errlen, "%s", err == -E2BIG ? "too many targets enabled at once"
							    : strerror(-err));
		goto undo;
	}
	goto out;
undo:
	bpf_map_delete_elem(bpf_map__fd(c->skel->maps.dwarf_targets), &pid);
	HASH_DEL(c->targets, t);
	cpu_target_state_free(t);
	events_stop_idle_locked(c);
out:
	pthread_mutex_unlock(&c->lock);
	return err;
}

/* Kernel-side drops of a target so far. */
static void read_drops(struct cpu_collector *c, struct cpu_target_state *t)
{
	struct cpu_target value;

	if (!bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.targets), &t->pid, &value))
		t->drops = value.drops;
}

uint64_t cpu_collector_remove(struct cpu_collector *c, pid_t pid, int64_t now)
{
	struct cpu_target_state *t;
	uint64_t drops = 0;

	pthread_mutex_lock(&c->lock);
	HASH_FIND_INT(c->targets, &pid, t);
	if (t) {
		read_drops(c, t);
		drops = t->drops;
		bpf_map_delete_elem(bpf_map__fd(c->skel->maps.targets), &pid);
		bpf_map_delete_elem(bpf_map__fd(c->skel->maps.dwarf_targets), &pid);
		bpf_map_delete_elem(bpf_map__fd(c->skel->maps.java_signals), &pid);
		/* Drain now, so the profile is final when disable, expiry or exit is shown. */
		cpu_drain_locked(c, now);
		cpu_java_flush(t, true);
		cpu_auto_release(c, t, false);
		cpu_follow_forget(c, pid);
		HASH_DEL(c->targets, t);
		cpu_target_state_free(t);
		events_stop_idle_locked(c);
	}
	pthread_mutex_unlock(&c->lock);
	return drops;
}

int cpu_collector_drain(struct cpu_collector *c, int64_t now)
{
	struct cpu_target_state *t, *tmp;
	int err;

	pthread_mutex_lock(&c->lock);
	HASH_ITER(hh, c->targets, t, tmp)
		read_drops(c, t);
	err = cpu_follow_drain_locked(c, now);
	pthread_mutex_unlock(&c->lock);
	return err;
}

void cpu_percpu_sums(int fd, int ncpus, __u64 *sums, __u32 n)
{
	__u64 *values = calloc(ncpus, sizeof(*values));

	for (__u32 i = 0; values && i < n; i++) {
		if (bpf_map_lookup_elem(fd, &i, values))
			continue;
		for (int cpu = 0; cpu < ncpus; cpu++)
			sums[i] += values[cpu];
	}
	free(values);
}

void cpu_collector_get_stats(struct cpu_collector *c, struct cpu_collector_stats *out)
{
	__u64 sums[CPU_STAT_NR] = {0};

	cpu_percpu_sums(bpf_map__fd(c->skel->maps.stats), c->ncpus, sums, CPU_STAT_NR);
	out->samples = sums[CPU_STAT_SAMPLES];
	out->counts_full = sums[CPU_STAT_COUNTS_FULL];
	out->stacks_full = sums[CPU_STAT_STACKS_FULL];
	out->ustack_errors = sums[CPU_STAT_USTACK_ERR];
	out->kstack_errors = sums[CPU_STAT_KSTACK_ERR];
	out->stacks_lost = atomic_load(&c->stacks_lost);
	out->stack_maps_renewed = atomic_load(&c->stack_maps_renewed);
	out->stacks_nomem = sums[CPU_STAT_STACKS_NOMEM];
	out->stacks_spilled = sums[CPU_STAT_STACKS_SPILLED];
	out->ringbuf_full = sums[CPU_STAT_RINGBUF_FULL];
	out->dwarf_samples = atomic_load(&c->dwarf_samples);
	out->running = c->running;
}

uint64_t cpu_collector_target_drops(struct cpu_collector *c, pid_t pid)
{
	struct cpu_target_state *t;
	uint64_t drops = 0;

	pthread_mutex_lock(&c->lock);
	HASH_FIND_INT(c->targets, &pid, t);
	if (t)
		drops = t->drops;
	pthread_mutex_unlock(&c->lock);
	return drops;
}

/* The collector interface (collectors/collector.h). */

static int ops_create(struct collector_env *env, void **self, char *errbuf, size_t errlen)
{
	int err = cpu_collector_new(env->syms, env->frequency_hz, &env->cpu, errbuf, errlen);

	if (err)
		env->cpu = NULL;
	*self = env->cpu;
	return err;
}

static void ops_destroy(void *self)
{
	cpu_collector_free(self);
}

static int ops_attach(void *self, const struct collector_target *t, char *errbuf, size_t errlen)
{
	return cpu_collector_add(self, t->pid, t->cpu, errbuf, errlen);
}

static uint64_t ops_detach(void *self, pid_t pid, int64_t now)
{
	return cpu_collector_remove(self, pid, now);
}

static int ops_drain(void *self, int64_t now)
{
	return cpu_collector_drain(self, now);
}

static uint64_t ops_drops(void *self, pid_t pid)
{
	return cpu_collector_target_drops(self, pid);
}

/* How the target is sampled, how its user stacks are walked, and the share of their frames
 * that got a name. */
static void ops_target_status(void *self, const struct collector_target *t, bool attached,
			      FILE *out)
{
	struct cpu_collector *c = self;
	struct cpu_target_info info;

	if (!attached) {
		fprintf(out, "cpu: off\n");
		return;
	}
	fprintf(out, "cpu: running at %u Hz\n", c->hz);
	if (cpu_collector_target_info(c, t->pid, &info))
		return;
	fprintf(out, "unwind: %s\n", info.dwarf ? "dwarf" : "fp");
	if (info.frames_total)
		fprintf(out, "frames_named: %.1f%%\n",
			100.0 * info.frames_named / info.frames_total);
	else
		fprintf(out, "frames_named: none yet\n");
}

static void ops_status(void *self, FILE *out)
{
	struct cpu_collector_stats cs = {0};

	cpu_collector_get_stats(self, &cs);
	fprintf(out, "cpu: %s\n", cs.running ? "sampling" : "idle");
	fprintf(out, "samples: %llu\n", (unsigned long long)cs.samples);
	fprintf(out, "drops: %llu\n", (unsigned long long)(cs.counts_full + cs.stacks_full +
							   cs.stacks_lost + cs.stacks_nomem +
							   cs.ringbuf_full));
	fprintf(out, "drops_counts_map_full: %llu\n", (unsigned long long)cs.counts_full);
	fprintf(out, "drops_stacks_map_full: %llu\n", (unsigned long long)cs.stacks_full);
	fprintf(out, "drops_stack_lost: %llu\n", (unsigned long long)cs.stacks_lost);
	fprintf(out, "user_stack_errors: %llu\n", (unsigned long long)cs.ustack_errors);
	fprintf(out, "kernel_stack_errors: %llu\n", (unsigned long long)cs.kstack_errors);
	fprintf(out, "stack_maps_renewed: %llu\n", (unsigned long long)cs.stack_maps_renewed);
	fprintf(out, "drops_stacks_nomem: %llu\n", (unsigned long long)cs.stacks_nomem);
	fprintf(out, "drops_ringbuf_full: %llu\n", (unsigned long long)cs.ringbuf_full);
	fprintf(out, "stacks_spilled: %llu\n", (unsigned long long)cs.stacks_spilled);
	fprintf(out, "dwarf_samples: %llu\n", (unsigned long long)cs.dwarf_samples);
}

static void ops_metrics(void *self, struct collector_metrics *m)
{
	static const char dropped[] = "aperture_cpu_samples_dropped_total",
			  dropped_help[] = "CPU samples dropped, by cause.",
			  errors[] = "aperture_cpu_stack_errors_total",
			  errors_help[] = "Samples kept without their user or kernel stack.";
	struct cpu_collector_stats cs = {0};

	cpu_collector_get_stats(self, &cs);
	m->active = cs.running;
	const struct collector_metric rows[] = {
		{ "aperture_cpu_samples_total", "counter",
		  "CPU samples taken in the kernel for enabled targets.", .value = cs.samples },
		{ dropped, "counter", dropped_help, "cause", "counts_map_full", cs.counts_full },
		{ dropped, "counter", dropped_help, "cause", "stacks_map_full", cs.stacks_full },
		{ dropped, "counter", dropped_help, "cause", "stack_lost", cs.stacks_lost },
		{ dropped, "counter", dropped_help, "cause", "stacks_nomem", cs.stacks_nomem },
		{ dropped, "counter", dropped_help, "cause", "ringbuf_full", cs.ringbuf_full },
		{ errors, "counter", errors_help, "stack", "user", cs.ustack_errors },
		{ errors, "counter", errors_help, "stack", "kernel", cs.kstack_errors },
	};
	collector_metrics_add(m, rows, sizeof(rows) / sizeof(rows[0]));
}

const struct collector_ops cpu_collector_ops = {
	.name = "cpu",
	.create = ops_create,
	.destroy = ops_destroy,
	.attach = ops_attach,
	.detach = ops_detach,
	.drain = ops_drain,
	.drops = ops_drops,
	.target_status = ops_target_status,
	.status = ops_status,
	.metrics = ops_metrics,
};
