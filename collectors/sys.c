/* Loading the BPF programs, attaching them while a target exists, and the targets. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include "collectors/sys_internal.h"
#include "sys.skel.h"

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449 /* the same number on every architecture (asm-generic) */
#endif

const uint32_t sys_key_sizes[KIND_NR] = {
	sizeof(struct sys_key), sizeof(struct lock_key), sizeof(struct klock_key),
};

struct bpf_map *sys_outer_map(struct sys_collector *c, int kind)
{
	struct bpf_map *maps[KIND_NR] = { c->skel->maps.sys_stats, c->skel->maps.lock_stats,
					  c->skel->maps.klock_stats };

	return maps[kind];
}

int sys_create_inner(int kind)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_NO_PREALLOC);
	int fd = bpf_map_create(BPF_MAP_TYPE_PERCPU_HASH, "sys_stats", sys_key_sizes[kind],
				sizeof(struct sys_latency), INNER_MAX, &opts);

	return fd < 0 ? -errno : fd;
}

/* Replacing a map-of-maps slot waits for running programs: the old map is then ours. */
int sys_install_inner(struct bpf_map *outer, int fd)
{
	__u32 zero = 0;

	return bpf_map_update_elem(bpf_map__fd(outer), &zero, &fd, 0) ? -errno : 0;
}

static void detach_locked(struct sys_collector *c)
{
	struct bpf_link **links[] = { &c->enter_link, &c->exit_link, &c->lock_begin_link,
				      &c->lock_end_link };

	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		bpf_link__destroy(*links[i]);
		*links[i] = NULL;
	}
}

/* Attached only while a target is enabled: otherwise no system call pays for them. */
static int attach_locked(struct sys_collector *c, char *errbuf, size_t errlen)
{
	int err;

	if (c->enter_link)
		return 0;
	c->enter_link = bpf_program__attach(c->skel->progs.sys_enter);
	c->exit_link = c->enter_link ? bpf_program__attach(c->skel->progs.sys_exit) : NULL;
	if (!c->exit_link) {
		err = -errno;
		snprintf(errbuf, errlen, "attaching to sys_enter/sys_exit: %s", strerror(-err));
		detach_locked(c);
		return err;
	}
	/* The lock tracepoints came in 5.19: older kernels go without that section. */
	c->lock_begin_link = bpf_program__attach(c->skel->progs.lock_begin);
	c->lock_end_link = c->lock_begin_link ? bpf_program__attach(c->skel->progs.lock_end)
					      : NULL;
	if (!c->lock_end_link) {
		snprintf(c->klock_error, sizeof(c->klock_error),
			 "contention_begin/contention_end: %s", strerror(errno));
		bpf_link__destroy(c->lock_begin_link);
		c->lock_begin_link = NULL;
	} else {
		c->klock_error[0] = '\0';
	}
	return 0;
}

int sys_collector_new(struct symbolizer *syms, struct sys_collector **out, char *errbuf,
		      size_t errlen)
{
	struct sys_collector *c = calloc(1, sizeof(*c));
	int err;

	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	c->syms = syms;
	for (int k = 0; k < KIND_NR; k++)
		c->inner_fds[k] = -1;
	c->ncpus = libbpf_num_possible_cpus();
	if (c->ncpus <= 0) {
		err = c->ncpus ? c->ncpus : -ENODEV;
		snprintf(errbuf, errlen, "cannot count CPUs: %s", strerror(-err));
		goto fail;
	}
	c->percpu = calloc(c->ncpus, sizeof(*c->percpu));
	if (!c->percpu) {
		err = -ENOMEM;
		snprintf(errbuf, errlen, "out of memory");
		goto fail;
	}
	for (int k = 0; k < KIND_NR; k++) {
		c->inner_fds[k] = sys_create_inner(k);
		if (c->inner_fds[k] < 0) {
			err = c->inner_fds[k];
			snprintf(errbuf, errlen, "creating BPF maps: %s", strerror(-err));
			goto fail;
		}
	}
	c->skel = sys_bpf__open();
	if (!c->skel) {
		err = -errno;
		snprintf(errbuf, errlen, "opening BPF object: %s", strerror(-err));
		goto fail;
	}
	c->skel->rodata->nr_futex = SYS_futex;
	c->skel->rodata->nr_futex_waitv = SYS_futex_waitv;
	for (int k = 0; k < KIND_NR; k++)
		bpf_map__set_inner_map_fd(sys_outer_map(c, k), c->inner_fds[k]);
	err = sys_bpf__load(c->skel);
	if (err) {
		snprintf(errbuf, errlen, "loading BPF programs: %s", strerror(-err));
		goto fail;
	}
	for (int k = 0; k < KIND_NR && !err; k++)
		err = sys_install_inner(sys_outer_map(c, k), c->inner_fds[k]);
	if (err) {
		snprintf(errbuf, errlen, "installing BPF maps: %s", strerror(-err));
		goto fail;
	}
	*out = c;
	return 0;
fail:
	sys_collector_free(c);
	return err;
}

static void target_free(struct sys_target *t)
{
	struct named_stack *n, *ntmp;
	struct thread_name *th, *ttmp;

	HASH_ITER(hh, t->named, n, ntmp) {
		HASH_DEL(t->named, n);
		free(n->folded);
		free(n);
	}
	HASH_ITER(hh, t->threads, th, ttmp) {
		HASH_DEL(t->threads, th);
		free(th);
	}
	proc_syms_free(t->syms);
	sys_table_unref(t->table);
	profile_unref(t->locks);
	free(t);
}

void sys_collector_free(struct sys_collector *c)
{
	struct sys_target *t, *tmp;

	if (!c)
		return;
	if (c->skel)
		detach_locked(c);
	HASH_ITER(hh, c->targets, t, tmp) {
		HASH_DEL(c->targets, t);
		target_free(t);
	}
	sys_bpf__destroy(c->skel);
	for (int k = 0; k < KIND_NR; k++)
		if (c->inner_fds[k] >= 0)
			close(c->inner_fds[k]);
	free(c->percpu);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int sys_collector_add(struct sys_collector *c, pid_t pid, struct sys_table *table,
		      struct profile *locks, char *errbuf, size_t errlen)
{
	struct sys_target *t;
	__u32 one = 1;
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
	t->table = sys_table_ref(table);
	t->locks = profile_ref(locks);
	t->refreshed_drain = c->drain_seq;
	HASH_ADD_INT(c->targets, pid, t);
	err = proc_syms_new(c->syms, pid, &t->syms);
	if (err) {
		snprintf(errbuf, errlen, "process %d is gone", (int)pid);
		goto undo;
	}
	sys_learn_threads(t);
	err = attach_locked(c, errbuf, errlen);
	if (err)
		goto undo;
	if (bpf_map_update_elem(bpf_map__fd(c->skel->maps.targets), &pid, &one, BPF_ANY)) {
		err = -errno;
		snprintf(errbuf, errlen, "%s", err == -E2BIG ? "too many targets enabled at once"
							    : strerror(-err));
		goto undo;
	}
	goto out;
undo:
	HASH_DEL(c->targets, t);
	target_free(t);
	if (!c->targets)
		detach_locked(c);
out:
	pthread_mutex_unlock(&c->lock);
	return err;
}

void sys_collector_remove(struct sys_collector *c, pid_t pid, int64_t now)
{
	struct sys_target *t;

	pthread_mutex_lock(&c->lock);
	HASH_FIND_INT(c->targets, &pid, t);
	if (t) {
		bpf_map_delete_elem(bpf_map__fd(c->skel->maps.targets), &pid);
		sys_drain_locked(c, now);
		HASH_DEL(c->targets, t);
		target_free(t);
		if (!c->targets)
			detach_locked(c);
	}
	pthread_mutex_unlock(&c->lock);
}

int sys_collector_drain(struct sys_collector *c, int64_t now)
{
	int err = 0;

	pthread_mutex_lock(&c->lock);
	if (c->targets)
		err = sys_drain_locked(c, now);
	pthread_mutex_unlock(&c->lock);
	return err;
}

void sys_collector_get_stats(struct sys_collector *c, struct sys_collector_stats *out)
{
	__u64 *values = calloc(c->ncpus, sizeof(*values));
	__u64 sums[SYS_STAT_NR] = {0};

	for (__u32 i = 0; values && i < SYS_STAT_NR; i++) {
		if (bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.stats), &i, values))
			continue;
		for (int cpu = 0; cpu < c->ncpus; cpu++)
			sums[i] += values[cpu];
	}
	free(values);
	out->calls = sums[SYS_STAT_CALLS];
	out->map_full = sums[SYS_STAT_FULL];
	out->stacks_full = sums[SYS_STAT_STACKS_FULL];
	pthread_mutex_lock(&c->lock);
	out->attached = c->enter_link != NULL;
	out->kernel_locks = c->lock_end_link != NULL;
	pthread_mutex_unlock(&c->lock);
}

void sys_collector_kernel_locks_error(struct sys_collector *c, char *buf, size_t len)
{
	pthread_mutex_lock(&c->lock);
	snprintf(buf, len, "%s", c->klock_error);
	pthread_mutex_unlock(&c->lock);
}
