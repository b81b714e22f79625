/* Draining: swap the kernel onto fresh aggregate maps, read the old ones whole, and add
 * each aggregate to its target's table (and, for lock waits, its locks profile), naming the
 * waiting stack once per target and the threads from what the kernel and /proc show. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "collectors/sys_internal.h"
#include "sys.skel.h"

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
void sys_learn_threads(struct sys_target *t)
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
	if (!t || !(t->what & (kind == KIND_SYS ? SYS_TARGET_SYSCALLS : SYS_TARGET_LOCKS)))
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

/* Swaps the kernel onto the spare map of kind, then reads the old one whole, emptying it. */
static int drain_kind(struct sys_collector *c, int kind, int64_t now)
{
	char key[sizeof(struct lock_key)];
	struct latency lat;
	int old, err, first_err = 0;

	err = swap_map_swap(&c->maps[kind], &old);
	if (err)
		return err;
	if (kind == KIND_LOCK) {
		struct sys_target *t, *tmp;

		HASH_ITER(hh, c->targets, t, tmp)
			sys_learn_threads(t);
		learn_waiters(c, old);
	}
	while (!bpf_map_get_next_key(old, NULL, key)) {
		err = read_percpu(c, old, key, &lat);
		if (!err)
			err = dispatch(c, kind, key, &lat, now);
		if (err && !first_err)
			first_err = err;
		if (bpf_map_delete_elem(old, key))
			return first_err ? first_err : -errno;
	}
	return first_err;
}

int sys_drain_locked(struct sys_collector *c, uint32_t what, int64_t now)
{
	int err, first_err = 0;

	c->drain_seq++;
	for (int k = 0; k < KIND_NR; k++) {
		/* A kind no target collects has nothing to drain: each swap waits for the
		 * kernel, and a disable waits for its drain. */
		if (!(what & (k == KIND_SYS ? SYS_TARGET_SYSCALLS : SYS_TARGET_LOCKS)))
			continue;
		err = drain_kind(c, k, now);
		if (err && !first_err)
			first_err = err;
	}
	return first_err;
}
