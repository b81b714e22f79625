#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <uthash.h>
#include "collectors/sys.h"
#include "bpf/sys.h"
#include "sys.skel.h"

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449 /* the same number on every architecture (asm-generic) */
#endif

#define FRAME_NAME_MAX 512
#define INNER_MAX 16384

enum { KIND_SYS, KIND_LOCK, KIND_KLOCK, KIND_NR };

/* The kernel's per-CPU values are read straight into the store's type. */
_Static_assert(sizeof(struct sys_latency) == sizeof(struct latency) &&
	       SYS_HIST == LATENCY_HIST, "struct sys_latency and struct latency differ");

/* A waiting stack of one target, named once: its frame ids in the locks profile and its
 * folded text for locks.json, both without the thread-name frame. */
struct named_stack {
	uint64_t hash;
	uint32_t depth;
	char *folded;
	UT_hash_handle hh;
	uint32_t ids[];
};

struct thread_name {
	pid_t tid;
	char name[16];
	UT_hash_handle hh;
};

struct sys_target {
	pid_t pid;
	struct sys_table *table;
	struct profile *locks;
	struct proc_syms *syms;  /* read at enable; refreshed once per drain when a name misses */
	uint64_t refreshed_drain;
	struct named_stack *named;
	struct thread_name *threads;
	UT_hash_handle hh;
};

struct sys_collector {
	pthread_mutex_t lock;
	struct sys_bpf *skel;
	struct symbolizer *syms;
	int ncpus;
	struct bpf_link *enter_link, *exit_link, *lock_begin_link, *lock_end_link;
	char klock_error[160];
	int inner_fds[KIND_NR]; /* the maps the kernel writes now */
	struct sys_target *targets;
	uint64_t drain_seq;
	struct latency *percpu; /* ncpus values, for one lookup */
	struct sys_stack raw;
};

static const uint32_t key_sizes[KIND_NR] = {
	sizeof(struct sys_key), sizeof(struct lock_key), sizeof(struct klock_key),
};

static struct bpf_map *outer_map(struct sys_collector *c, int kind)
{
	struct bpf_map *maps[KIND_NR] = { c->skel->maps.sys_stats, c->skel->maps.lock_stats,
					  c->skel->maps.klock_stats };

	return maps[kind];
}

static int create_inner(int kind)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_NO_PREALLOC);
	int fd = bpf_map_create(BPF_MAP_TYPE_PERCPU_HASH, "sys_stats", key_sizes[kind],
				sizeof(struct sys_latency), INNER_MAX, &opts);

	return fd < 0 ? -errno : fd;
}

/* Replacing a map-of-maps slot waits for running programs: the old map is then ours. */
static int install_inner(struct bpf_map *outer, int fd)
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
		c->inner_fds[k] = create_inner(k);
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
		bpf_map__set_inner_map_fd(outer_map(c, k), c->inner_fds[k]);
	err = sys_bpf__load(c->skel);
	if (err) {
		snprintf(errbuf, errlen, "loading BPF programs: %s", strerror(-err));
		goto fail;
	}
	for (int k = 0; k < KIND_NR && !err; k++)
		err = install_inner(outer_map(c, k), c->inner_fds[k]);
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

/* Remembers name (a comm, cut to 15 bytes) as tid's: a holder that exits before the drain
 * that reports its lock keeps the name it had. Returns the name kept ("" if out of memory). */
static const char *remember(struct sys_target *t, pid_t tid, const char *name)
{
	struct thread_name *th;

	HASH_FIND_INT(t->threads, &tid, th);
	if (!th) {
		th = calloc(1, sizeof(*th));
		if (!th)
			return "";
		th->tid = tid;
		HASH_ADD_INT(t->threads, tid, th);
	}
	snprintf(th->name, sizeof(th->name), "%.15s", name);
	return th->name;
}

/* Learns the names of the target's threads alive now (at enable and at each drain), renamed
 * ones included: threads often name themselves after they start. */
static void learn_threads(struct sys_target *t)
{
	char path[64], name[32];
	struct dirent *de;
	ssize_t n;
	DIR *dir;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)t->pid);
	dir = opendir(path);
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		pid_t tid = atoi(de->d_name);

		if (tid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)t->pid, (int)tid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, name, sizeof(name) - 1);
		close(fd);
		if (n <= 0)
			continue;
		name[n] = '\0';
		name[strcspn(name, "\n")] = '\0';
		remember(t, tid, name);
	}
	closedir(dir);
}

static const char *known_name(struct sys_target *t, pid_t tid)
{
	struct thread_name *th;

	HASH_FIND_INT(t->threads, &tid, th);
	return th ? th->name : NULL;
}

/* Whether tid is a known thread of the target: glibc's __owner field is trusted only then,
 * as the futex may not be a mutex at all (a condition variable, a semaphore, ...). */
static bool is_thread_of(struct sys_target *t, pid_t tid)
{
	return tid > 0 && known_name(t, tid);
}

static void name_frame(struct sys_collector *c, struct sys_target *t, uint64_t addr,
		       bool is_return, char *buf)
{
	int err = t->syms ? proc_syms_name(t->syms, addr, is_return, buf, FRAME_NAME_MAX)
			  : -ENOENT;

	if (err == -ENOENT && t->syms && t->refreshed_drain != c->drain_seq) {
		t->refreshed_drain = c->drain_seq;
		if (!proc_syms_refresh(t->syms))
			err = proc_syms_name(t->syms, addr, is_return, buf, FRAME_NAME_MAX);
	}
	if (err)
		snprintf(buf, FRAME_NAME_MAX, "[unknown]");
}

/* The waiting stack with this hash, named in t's locks profile; NULL if lost or no memory. */
static struct named_stack *named_stack(struct sys_collector *c, struct sys_target *t,
				       uint64_t hash)
{
	struct named_stack *n;
	char name[FRAME_NAME_MAX];
	uint32_t depth = 0, j = 0;
	size_t cap = 0;
	FILE *folded;

	HASH_FIND(hh, t->named, &hash, sizeof(hash), n);
	if (n)
		return n;
	if (bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.stacks), &hash, &c->raw))
		return NULL;
	while (depth < SYS_MAX_DEPTH && c->raw.ips[depth])
		depth++;
	n = calloc(1, sizeof(*n) + depth * sizeof(n->ids[0]));
	if (!n)
		return NULL;
	n->hash = hash;
	folded = open_memstream(&n->folded, &cap);
	if (!folded)
		goto fail;
	for (uint32_t i = depth; i-- > 0;) {
		name_frame(c, t, c->raw.ips[i], i > 0, name);
		if (profile_frame_id(t->locks, name, &n->ids[j++]))
			break;
		fprintf(folded, "%s%s", j > 1 ? ";" : "", name);
	}
	if (fclose(folded) || j < depth)
		goto fail;
	n->depth = j;
	HASH_ADD(hh, t->named, hash, sizeof(n->hash), n);
	return n;
fail:
	free(n->folded);
	free(n);
	return NULL;
}

static int add_call(struct sys_target *t, const struct sys_key *k, const struct latency *lat)
{
	struct sys_row row = { .kind = SYS_ROW_CALL, .a = k->nr, .b = k->err };

	return sys_table_add(t->table, &row, lat);
}

static int add_lock(struct sys_collector *c, struct sys_target *t, const struct lock_key *k,
		    const struct latency *lat, int64_t now)
{
	struct sys_row row = { .kind = SYS_ROW_LOCK, .addr = k->uaddr };
	const char *waiter;
	struct named_stack *stack = k->ustack ? named_stack(c, t, k->ustack) : NULL;
	uint32_t ids[SYS_MAX_DEPTH + 2], n = 0;
	char *line = NULL, comm[sizeof(k->comm) + 1];
	int err;

	memcpy(comm, k->comm, sizeof(k->comm));
	comm[sizeof(k->comm)] = '\0';
	waiter = remember(t, k->tid, comm);
	if (is_thread_of(t, k->owner) && k->owner != (pid_t)k->tid) {
		row.a = k->owner;
		row.holder = known_name(t, k->owner);
	}
	if (asprintf(&line, "%s;%s", waiter[0] ? waiter : "[unnamed]",
		     stack ? stack->folded : "[unknown]") < 0)
		return -ENOMEM;
	row.stack = line;
	err = sys_table_add(t->table, &row, lat);
	free(line);
	if (err)
		return err;
	/* locks.folded: whole microseconds; the fraction of each drain's time is dropped. */
	if (lat->total_ns < 1000)
		return 0;
	if (profile_frame_id(t->locks, waiter[0] ? waiter : "[unnamed]", &ids[n++]))
		return -ENOMEM;
	if (stack) {
		memcpy(ids + n, stack->ids, stack->depth * sizeof(ids[0]));
		n += stack->depth;
	} else if (profile_frame_id(t->locks, "[unknown]", &ids[n++])) {
		return -ENOMEM;
	}
	return profile_add(t->locks, now, ids, n, lat->total_ns / 1000);
}

static int add_klock(struct sys_collector *c, struct sys_target *t, const struct klock_key *k,
		     const struct latency *lat)
{
	struct sys_row row = { .kind = SYS_ROW_KLOCK, .a = k->flags, .addr = k->lock };
	char name[FRAME_NAME_MAX];

	/* Static locks have a symbol; one inside a heap object gets [kernel]+0x..., still an id. */
	if (!symbolizer_kernel_name(c->syms, k->lock, name, sizeof(name)))
		row.holder = name;
	return sys_table_add(t->table, &row, lat);
}

/* Sums the per-CPU values of key in map fd. */
static int read_percpu(struct sys_collector *c, int fd, const void *key, struct latency *sum)
{
	if (bpf_map_lookup_elem(fd, key, c->percpu))
		return -errno;
	memset(sum, 0, sizeof(*sum));
	for (int cpu = 0; cpu < c->ncpus; cpu++)
		latency_add(sum, &c->percpu[cpu]);
	return 0;
}

static int dispatch(struct sys_collector *c, int kind, const void *key,
		    const struct latency *lat, int64_t now)
{
	pid_t pid = *(const __u32 *)key; /* every key starts with the pid */
	struct sys_target *t;

	HASH_FIND_INT(c->targets, &pid, t);
	if (!t)
		return 0;
	switch (kind) {
	case KIND_SYS:
		return add_call(t, key, lat);
	case KIND_LOCK:
		return add_lock(c, t, key, lat, now);
	default:
		return add_klock(c, t, key, lat);
	}
}

/* Remembers the name of every thread that waited, before any wait names its holder: the
 * holder of one lock is often a waiter elsewhere, and may have exited since. */
static void learn_waiters(struct sys_collector *c, int fd)
{
	struct lock_key key, next;
	struct sys_target *t;
	void *prev = NULL;
	pid_t pid;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		pid = key.pid;
		HASH_FIND_INT(c->targets, &pid, t);
		if (t) {
			char comm[sizeof(key.comm) + 1];

			memcpy(comm, key.comm, sizeof(key.comm));
			comm[sizeof(key.comm)] = '\0';
			remember(t, key.tid, comm);
		}
	}
}

/* Swaps the kernel onto a fresh map of kind, then reads the old one whole and drops it. */
static int drain_kind(struct sys_collector *c, int kind, int64_t now)
{
	int old = c->inner_fds[kind], fresh = create_inner(kind), err, first_err = 0;
	char key[sizeof(struct lock_key)], next[sizeof(struct lock_key)];
	struct latency lat;
	void *prev = NULL;

	if (fresh < 0)
		return fresh;
	err = install_inner(outer_map(c, kind), fresh);
	if (err) {
		close(fresh);
		return err;
	}
	c->inner_fds[kind] = fresh;
	if (kind == KIND_LOCK) {
		struct sys_target *t, *tmp;

		HASH_ITER(hh, c->targets, t, tmp)
			learn_threads(t);
		learn_waiters(c, old);
	}
	while (!bpf_map_get_next_key(old, prev, next)) {
		memcpy(key, next, key_sizes[kind]);
		prev = key;
		err = read_percpu(c, old, key, &lat);
		if (!err)
			err = dispatch(c, kind, key, &lat, now);
		if (err && !first_err)
			first_err = err;
	}
	close(old);
	return first_err;
}

static int drain_locked(struct sys_collector *c, int64_t now)
{
	int err, first_err = 0;

	c->drain_seq++;
	for (int k = 0; k < KIND_NR; k++) {
		err = drain_kind(c, k, now);
		if (err && !first_err)
			first_err = err;
	}
	return first_err;
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
	learn_threads(t);
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
		drain_locked(c, now);
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
		err = drain_locked(c, now);
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
