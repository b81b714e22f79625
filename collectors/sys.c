/* Loading the BPF programs, attaching them while a target exists, and the targets. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>
#include <bpf/bpf.h>
#include "collectors/collector.h"
#include "collectors/sys_internal.h"
#include "sys.skel.h"

static const struct swap_map_spec map_specs[KIND_NR] = {
	[KIND_SYS] = { BPF_MAP_TYPE_PERCPU_HASH, sizeof(struct sys_key),
		       sizeof(struct sys_latency), INNER_MAX, BPF_F_NO_PREALLOC },
	[KIND_LOCK] = { BPF_MAP_TYPE_PERCPU_HASH, sizeof(struct lock_key),
			sizeof(struct sys_latency), INNER_MAX, BPF_F_NO_PREALLOC },
	[KIND_KLOCK] = { BPF_MAP_TYPE_PERCPU_HASH, sizeof(struct klock_key),
			 sizeof(struct sys_latency), INNER_MAX, BPF_F_NO_PREALLOC },
};

static void links_destroy(struct bpf_link **links, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		bpf_link__destroy(links[i]);
		links[i] = NULL;
	}
}

/* Attaches progs (n of them) into links, all or none. */
static int links_attach(struct bpf_program *const *progs, struct bpf_link **links, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		links[i] = bpf_program__attach(progs[i]);
		if (!links[i]) {
			int err = -errno;

			links_destroy(links, i);
			return err;
		}
	}
	return 0;
}

/* What the targets have on now. */
static uint32_t wanted_locked(struct sys_collector *c)
{
	struct sys_target *t, *tmp;
	uint32_t what = 0;

	HASH_ITER(hh, c->targets, t, tmp)
		what |= t->what;
	return what;
}

/* Each set of programs is attached only while some target has its collector on: otherwise
 * no system call of the node pays for it. */
static int attach_locked(struct sys_collector *c, uint32_t what, char *errbuf, size_t errlen)
{
	struct bpf_program *sys_progs[] = { c->skel->progs.sys_enter, c->skel->progs.sys_exit };
	struct bpf_link *sys_links[2];
	struct bpf_program *futex_progs[] = {
		c->skel->progs.futex_enter, c->skel->progs.futex_exit,
		c->skel->progs.futex_waitv_enter, c->skel->progs.futex_waitv_exit,
	};
	struct bpf_program *klock_progs[] = { c->skel->progs.lock_begin, c->skel->progs.lock_end };
	struct bpf_link *klock_links[2];
	int err;

	if (what & SYS_TARGET_SYSCALLS && !c->enter_link) {
		err = links_attach(sys_progs, sys_links, 2);
		if (err) {
			snprintf(errbuf, errlen, "attaching to sys_enter/sys_exit: %s",
				 strerror(-err));
			return err;
		}
		c->enter_link = sys_links[0];
		c->exit_link = sys_links[1];
	}
	if (what & SYS_TARGET_LOCKS && !c->futex_links[0]) {
		err = links_attach(futex_progs, c->futex_links, 4);
		if (err) {
			snprintf(errbuf, errlen, "attaching to the futex system calls' tracepoints "
				 "(is tracefs mounted?): %s", strerror(-err));
			return err;
		}
		/* The lock tracepoints came in 5.19: older kernels go without that part. */
		err = links_attach(klock_progs, klock_links, 2);
		if (err) {
			snprintf(c->klock_error, sizeof(c->klock_error),
				 "contention_begin/contention_end: %s", strerror(-err));
		} else {
			c->lock_begin_link = klock_links[0];
			c->lock_end_link = klock_links[1];
			c->klock_error[0] = '\0';
		}
	}
	return 0;
}

static void detach_unwanted_locked(struct sys_collector *c)
{
	uint32_t what = wanted_locked(c);

	if (!(what & SYS_TARGET_SYSCALLS)) {
		links_destroy(&c->enter_link, 1);
		links_destroy(&c->exit_link, 1);
	}
	if (!(what & SYS_TARGET_LOCKS)) {
		links_destroy(c->futex_links, 4);
		links_destroy(&c->lock_begin_link, 1);
		links_destroy(&c->lock_end_link, 1);
	}
}

/* libbpf finds a tracepoint's id in tracefs: mount it where it is missing, as perf does. */
static void tracefs_ensure(void)
{
	if (access("/sys/kernel/tracing/events", F_OK) && !access("/sys/kernel/tracing", F_OK))
		mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL);
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
		c->maps[k].fds[0] = c->maps[k].fds[1] = -1;
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
	c->skel = sys_bpf__open();
	if (!c->skel) {
		err = -errno;
		snprintf(errbuf, errlen, "opening BPF object: %s", strerror(-err));
		goto fail;
	}
	err = swap_map_init(&c->maps[KIND_SYS], c->skel->maps.sys_stats, &map_specs[KIND_SYS],
			    "sys_stats");
	if (!err)
		err = swap_map_init(&c->maps[KIND_LOCK], c->skel->maps.lock_stats,
				    &map_specs[KIND_LOCK], "lock_stats");
	if (!err)
		err = swap_map_init(&c->maps[KIND_KLOCK], c->skel->maps.klock_stats,
				    &map_specs[KIND_KLOCK], "klock_stats");
	if (err) {
		snprintf(errbuf, errlen, "creating BPF maps: %s", strerror(-err));
		goto fail;
	}
	err = sys_bpf__load(c->skel);
	if (err) {
		snprintf(errbuf, errlen, "loading BPF programs: %s", strerror(-err));
		goto fail;
	}
	for (int k = 0; k < KIND_NR && !err; k++)
		err = swap_map_install(&c->maps[k]);
	if (err) {
		snprintf(errbuf, errlen, "installing BPF maps: %s", strerror(-err));
		goto fail;
	}
	tracefs_ensure();
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
	HASH_ITER(hh, c->targets, t, tmp) {
		HASH_DEL(c->targets, t);
		target_free(t);
	}
	if (c->skel)
		detach_unwanted_locked(c);
	sys_bpf__destroy(c->skel);
	for (int k = 0; k < KIND_NR; k++)
		swap_map_fini(&c->maps[k]);
	free(c->percpu);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int sys_collector_add(struct sys_collector *c, pid_t pid, uint32_t what,
		      struct sys_table *table, struct profile *locks, char *errbuf, size_t errlen)
{
	struct sys_target *t;
	uint32_t before = 0;
	int err = 0;

	pthread_mutex_lock(&c->lock);
	HASH_FIND_INT(c->targets, &pid, t);
	if (!t) {
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
	}
	before = t->what;
	t->what |= what;
	err = attach_locked(c, t->what, errbuf, errlen);
	if (err)
		goto undo;
	if (bpf_map_update_elem(bpf_map__fd(c->skel->maps.targets), &pid, &t->what, BPF_ANY)) {
		err = -errno;
		snprintf(errbuf, errlen, "%s", err == -E2BIG ? "too many targets enabled at once"
							    : strerror(-err));
		goto undo;
	}
	goto out;
undo:
	t->what = before;
	if (!t->what) {
		HASH_DEL(c->targets, t);
		target_free(t);
	}
	detach_unwanted_locked(c);
out:
	pthread_mutex_unlock(&c->lock);
	return err;
}

void sys_collector_remove(struct sys_collector *c, pid_t pid, uint32_t what, int64_t now)
{
	int fd = bpf_map__fd(c->skel->maps.targets);
	struct sys_target *t;

	pthread_mutex_lock(&c->lock);
	HASH_FIND_INT(c->targets, &pid, t);
	if (t && t->what & what) {
		uint32_t left = t->what & ~what;

		if (left)
			bpf_map_update_elem(fd, &pid, &left, BPF_ANY);
		else
			bpf_map_delete_elem(fd, &pid);
		/* Its last calls or waits go to its table before it stops (only the kinds it
		 * stops: each swap waits for the kernel); a later drain drops what comes after
		 * (no target, or calls of a collector it has off). */
		sys_drain_locked(c, what, now);
		t->what = left;
		if (!t->what) {
			HASH_DEL(c->targets, t);
			target_free(t);
		}
		/* Programs no target needs any more are detached by the next drain: destroying
		 * a tracepoint's link waits for the kernel far longer than a disable should
		 * (0.3 s), and until then they find no target and return. */
	}
	pthread_mutex_unlock(&c->lock);
}

int sys_collector_drain(struct sys_collector *c, int64_t now)
{
	int err = 0;

	pthread_mutex_lock(&c->lock);
	if (c->targets && c->drained_at != now) {
		c->drained_at = now;
		err = sys_drain_locked(c, wanted_locked(c), now);
	}
	detach_unwanted_locked(c);
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
	out->syscalls = c->enter_link != NULL;
	out->locks = c->futex_links[0] != NULL;
	out->kernel_locks = c->lock_end_link != NULL;
	pthread_mutex_unlock(&c->lock);
}

void sys_collector_kernel_locks_error(struct sys_collector *c, char *buf, size_t len)
{
	pthread_mutex_lock(&c->lock);
	snprintf(buf, len, "%s", c->klock_error);
	pthread_mutex_unlock(&c->lock);
}

/* The collector interface (collectors/collector.h): syscalls and locks share one object. */

static int ops_create(struct collector_env *env, void **self, char *errbuf, size_t errlen)
{
	int err = 0;

	if (!env->sys)
		err = sys_collector_new(env->syms, &env->sys, errbuf, errlen);
	if (err) {
		env->sys = NULL;
		return err;
	}
	env->sys->refs++;
	*self = env->sys;
	return 0;
}

static void ops_destroy(void *self)
{
	struct sys_collector *c = self;

	if (--c->refs == 0)
		sys_collector_free(c);
}

static int syscalls_attach(void *self, const struct collector_target *t, char *errbuf,
			   size_t errlen)
{
	return sys_collector_add(self, t->pid, SYS_TARGET_SYSCALLS, t->sys, t->locks, errbuf,
				 errlen);
}

static int locks_attach(void *self, const struct collector_target *t, char *errbuf,
			size_t errlen)
{
	return sys_collector_add(self, t->pid, SYS_TARGET_LOCKS, t->sys, t->locks, errbuf,
				 errlen);
}

static uint64_t syscalls_detach(void *self, pid_t pid, int64_t now)
{
	sys_collector_remove(self, pid, SYS_TARGET_SYSCALLS, now);
	return 0;
}

static uint64_t locks_detach(void *self, pid_t pid, int64_t now)
{
	sys_collector_remove(self, pid, SYS_TARGET_LOCKS, now);
	return 0;
}

static int ops_drain(void *self, int64_t now)
{
	return sys_collector_drain(self, now);
}

static void syscalls_target_status(void *self, const struct collector_target *t,
				   bool attached, FILE *out)
{
	if (attached)
		fprintf(out, "syscalls: tracing\n");
}

static void syscalls_status(void *self, FILE *out)
{
	struct sys_collector_stats ss = {0};

	sys_collector_get_stats(self, &ss);
	fprintf(out, "syscalls: %s\n", ss.syscalls ? "tracing" : "idle");
	fprintf(out, "syscalls_timed: %llu\n", (unsigned long long)ss.calls);
	fprintf(out, "syscalls_drops_map_full: %llu\n", (unsigned long long)ss.map_full);
}

static void locks_status(void *self, FILE *out)
{
	struct sys_collector_stats ss = {0};
	char why[160];

	sys_collector_get_stats(self, &ss);
	sys_collector_kernel_locks_error(self, why, sizeof(why));
	fprintf(out, "locks: %s\n", ss.locks ? "tracing futex waits" : "idle");
	fprintf(out, "lock_stacks_lost: %llu\n", (unsigned long long)ss.stacks_full);
	if (why[0])
		fprintf(out, "kernel_locks: unavailable: %s\n", why);
	else
		fprintf(out, "kernel_locks: %s\n", ss.kernel_locks ? "tracing" : "idle");
}

/* The two collectors share one set of maps: the stats maps' drops are the syscalls
 * collector's figure. */
static void syscalls_metrics(void *self, struct collector_metrics *m)
{
	struct sys_collector_stats ss = {0};

	sys_collector_get_stats(self, &ss);
	m->active = ss.syscalls;
	const struct collector_metric rows[] = {
		{ "aperture_syscalls_timed_total", "counter",
		  "System calls of enabled targets timed.", .value = ss.calls },
		{ "aperture_syscalls_dropped_total", "counter",
		  "System call and lock aggregates dropped: a stats map was full.",
		  .value = ss.map_full },
	};
	collector_metrics_add(m, rows, sizeof(rows) / sizeof(rows[0]));
}

static void locks_metrics(void *self, struct collector_metrics *m)
{
	struct sys_collector_stats ss = {0};

	sys_collector_get_stats(self, &ss);
	m->active = ss.locks;
	const struct collector_metric rows[] = {
		{ "aperture_locks_kernel_tracing", "gauge",
		  "1 while kernel lock contention (contention_begin/end) is traced.",
		  .value = ss.kernel_locks },
		{ "aperture_locks_stacks_lost_total", "counter",
		  "Lock waits kept without their stack.", .value = ss.stacks_full },
	};
	collector_metrics_add(m, rows, sizeof(rows) / sizeof(rows[0]));
}

const struct collector_ops syscalls_collector_ops = {
	.name = "syscalls",
	.node_cost = "sys_enter/sys_exit tracepoints: every system call of the node takes the "
		     "tracing path and runs a program",
	.create = ops_create,
	.destroy = ops_destroy,
	.attach = syscalls_attach,
	.detach = syscalls_detach,
	.drain = ops_drain,
	.target_status = syscalls_target_status,
	.status = syscalls_status,
	.metrics = syscalls_metrics,
};

const struct collector_ops locks_collector_ops = {
	.name = "locks",
	.node_cost = "futex system call tracepoints: every system call of the node takes the "
		     "tracing path; the program runs for futex calls only",
	.create = ops_create,
	.destroy = ops_destroy,
	.attach = locks_attach,
	.detach = locks_detach,
	.drain = ops_drain,
	.status = locks_status,
	.metrics = locks_metrics,
};
