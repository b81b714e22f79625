/* Following forks (for `aperture record`): the BPF side gives every process a followed one
 * forks its own targets entry naming the followed root (bpf/cpu.bpf.c, cpu_fork). Here a
 * child gets its userspace state, sharing the root's profile, when the kernel says it was
 * forked or exec'd (its mappings are read then, while it surely exists, by a thread that
 * naming under the collector's lock does not hold up, and again soon after), or at the latest
 * when its first samples are drained; its entry goes once the child is gone, so a
 * fork-heavy command does not fill the targets map. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <bpf/bpf.h>
#include "collectors/cpu_internal.h"
#include "cpu.skel.h"

/* The dynamic loader maps an exec'd program's libraries within milliseconds. */
#define FOLLOW_REREAD_MS 20

/* A followed process forked or exec'd: noted, its mappings are read once the ring is read.
 * Only the follow thread. */
static int on_follow_event(void *ctx, void *data, size_t size)
{
	struct cpu_collector *c = ctx;

	if (size < sizeof(__u32))
		return 0;
	if (c->follow_n == c->follow_cap) {
		size_t cap = c->follow_cap ? 2 * c->follow_cap : 64;
		pid_t *bigger = reallocarray(c->follow_pids, cap, sizeof(*bigger));

		if (!bigger)
			return 0;
		c->follow_pids = bigger;
		c->follow_cap = cap;
	}
	c->follow_pids[c->follow_n++] = *(const __u32 *)data;
	return 0;
}

/* Reads the mappings of pid's current address space now, without the collector's lock,
 * into the list cpu_follow_install_locked gives the targets from. Returns whether it did. */
static bool read_follow_maps(struct cpu_collector *c, pid_t pid)
{
	int fd = bpf_map__fd(c->skel->maps.targets);
	struct cpu_target before, after;
	struct cpu_follow_maps *bigger;
	struct proc_syms *syms;

	if (bpf_map_lookup_elem(fd, &pid, &before) || proc_syms_new(c->syms, pid, &syms))
		return false;
	/* Exec'd again meanwhile: its own event follows. */
	if (bpf_map_lookup_elem(fd, &pid, &after) || after.exec_gen != before.exec_gen)
		goto drop;
	pthread_mutex_lock(&c->follow_lock);
	if (c->follow_ready_n == c->follow_ready_cap) {
		size_t cap = c->follow_ready_cap ? 2 * c->follow_ready_cap : 16;

		bigger = reallocarray(c->follow_ready, cap, sizeof(*bigger));
		if (!bigger) {
			pthread_mutex_unlock(&c->follow_lock);
			goto drop;
		}
		c->follow_ready = bigger;
		c->follow_ready_cap = cap;
	}
	c->follow_ready[c->follow_ready_n++] = (struct cpu_follow_maps){
		.pid = pid, .gen = before.exec_gen, .syms = syms };
	pthread_mutex_unlock(&c->follow_lock);
	return true;
drop:
	proc_syms_free(syms);
	return false;
}

void cpu_follow_install_locked(struct cpu_collector *c)
{
	struct cpu_target_state *t;

	if (!c->follow_events)
		return;
	pthread_mutex_lock(&c->follow_lock);
	for (size_t i = 0; i < c->follow_ready_n; i++) {
		struct cpu_follow_maps *m = &c->follow_ready[i];

		HASH_FIND_INT(c->targets, &m->pid, t);
		if (!t)
			t = cpu_follow_adopt(c, m->pid);
		if (t)
			cpu_gen_syms_put(c, t, m->gen, m->syms);
		else
			proc_syms_free(m->syms);
	}
	c->follow_ready_n = 0;
	pthread_mutex_unlock(&c->follow_lock);
}

static void read_again_later(struct cpu_collector *c, pid_t pid)
{
	struct cpu_follow_again *bigger;

	if (c->follow_again_n == c->follow_again_cap) {
		size_t cap = c->follow_again_cap ? 2 * c->follow_again_cap : 16;

		bigger = reallocarray(c->follow_again, cap, sizeof(*bigger));
		if (!bigger)
			return;
		c->follow_again = bigger;
		c->follow_again_cap = cap;
	}
	c->follow_again[c->follow_again_n++] = (struct cpu_follow_again){
		.pid = pid, .due_ms = cpu_mono_ms() + FOLLOW_REREAD_MS };
}

/* Reads the mappings of the processes due again (*ready if any was read); returns the ms
 * until the next is due. */
static int read_again_due(struct cpu_collector *c, bool *ready)
{
	int64_t now = cpu_mono_ms(), next = 200;
	size_t kept = 0;

	for (size_t i = 0; i < c->follow_again_n; i++) {
		struct cpu_follow_again a = c->follow_again[i];

		if (a.due_ms <= now) {
			*ready |= read_follow_maps(c, a.pid);
			continue;
		}
		if (a.due_ms - now < next)
			next = a.due_ms - now;
		c->follow_again[kept++] = a;
	}
	c->follow_again_n = kept;
	return next;
}

/* Reads the follow ring as events come, on a thread of its own that never waits for the
 * collector's lock: a drain or the dwarf thread may hold it for hundreds of ms naming a
 * program's first stacks (parsing its DWARF), and a short-lived process is gone by then.
 * Mappings read are handed over when the lock is free, or by its next holder. Each
 * process's mappings are read again FOLLOW_REREAD_MS after its event, when the dynamic
 * loader has mapped an exec'd program's libraries: no drain need come while it lives. */
static void *follow_main(void *arg)
{
	struct cpu_collector *c = arg;
	bool ready = false, reread = false;
	int timeout = 200;
	uint64_t one = 1;

	while (!atomic_load(&c->follow_stop)) {
		c->follow_n = 0;
		ring_buffer__poll(c->follow_events, ready && timeout > 5 ? 5 : timeout);
		for (size_t i = 0; i < c->follow_n; i++) {
			if (read_follow_maps(c, c->follow_pids[i])) {
				ready = true;
				read_again_later(c, c->follow_pids[i]);
			}
		}
		timeout = read_again_due(c, &reread);
		if ((ready || reread) && !pthread_mutex_trylock(&c->lock)) {
			cpu_follow_install_locked(c);
			pthread_mutex_unlock(&c->lock);
			/* The mappings of a program just exec'd are complete: its stacks can
			 * be named. */
			if (reread)
				(void)!write(c->follow_efd, &one, sizeof(one));
			ready = reread = false;
		}
	}
	return NULL;
}

static int follow_start(struct cpu_collector *c)
{
	int err;

	c->follow_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->follow_efd < 0)
		return -errno;
	pthread_mutex_init(&c->follow_lock, NULL);
	c->follow_events = ring_buffer__new(bpf_map__fd(c->skel->maps.follow_events),
					    on_follow_event, c, NULL);
	if (!c->follow_events) {
		err = -errno;
		goto fail;
	}
	err = -pthread_create(&c->follow_thread, NULL, follow_main, c);
	if (!err)
		return 0;
	ring_buffer__free(c->follow_events);
	c->follow_events = NULL;
fail:
	pthread_mutex_destroy(&c->follow_lock);
	close(c->follow_efd);
	c->follow_efd = -1;
	return err;
}

void cpu_follow_stop(struct cpu_collector *c)
{
	if (!c->follow_events)
		return;
	atomic_store(&c->follow_stop, true);
	pthread_join(c->follow_thread, NULL);
	ring_buffer__free(c->follow_events);
	close(c->follow_efd);
	free(c->follow_pids);
	free(c->follow_again);
	for (size_t i = 0; i < c->follow_ready_n; i++)
		proc_syms_free(c->follow_ready[i].syms);
	free(c->follow_ready);
	pthread_mutex_destroy(&c->follow_lock);
}

int cpu_collector_follow_fd(struct cpu_collector *c)
{
	return c->follow_events ? c->follow_efd : -ENOENT;
}

int cpu_collector_follow_events(struct cpu_collector *c)
{
	uint64_t n;

	if (!c->follow_events)
		return -ENOENT;
	if (read(c->follow_efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return -errno;
	return 0;
}

int cpu_collector_follow_forks(struct cpu_collector *c, pid_t pid)
{
	int fd = bpf_map__fd(c->skel->maps.targets), err = 0;
	struct cpu_target value;
	struct cpu_target_state *t;

	pthread_mutex_lock(&c->lock);
	if (!c->follow_events && (err = follow_start(c)))
		goto out;
	err = -ENOENT;
	HASH_FIND_INT(c->targets, &pid, t);
	if (t && !t->follows_forks && !bpf_map_lookup_elem(fd, &pid, &value)) {
		value.fork_root = pid;
		err = bpf_map_update_elem(fd, &pid, &value, BPF_EXIST) ? -errno : 0;
		t->follows_forks = !err;
		c->following += !err;
	} else if (t && t->follows_forks) {
		err = 0;
	}
out:
	pthread_mutex_unlock(&c->lock);
	return err;
}

struct cpu_target_state *cpu_follow_adopt(struct cpu_collector *c, pid_t pid)
{
	struct cpu_target_state *root, *t;
	struct cpu_target value;

	if (!c->following ||
	    bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.targets), &pid, &value) ||
	    !value.fork_root || value.fork_root == (__u32)pid)
		return NULL;
	HASH_FIND_INT(c->targets, &value.fork_root, root);
	if (!root)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->pid = pid;
	t->fork_root = root->pid;
	t->profile = profile_ref(root->profile);
	HASH_ADD_INT(c->targets, pid, t);
	return t;
}

struct pid_list {
	pid_t *v;
	size_t n, cap;
};

/* The followed children for which pick() says so. */
static void pick_children(struct cpu_collector *c, bool (*pick)(pid_t pid, __u32 root, pid_t arg),
			  pid_t arg, struct pid_list *out)
{
	int fd = bpf_map__fd(c->skel->maps.targets);
	struct cpu_target value;
	__u32 key, next, *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &value) || !value.fork_root ||
		    value.fork_root == key || !pick(key, value.fork_root, arg))
			continue;
		if (out->n == out->cap) {
			size_t cap = out->cap ? 2 * out->cap : 64;
			pid_t *bigger = reallocarray(out->v, cap, sizeof(*out->v));

			if (!bigger)
				return;
			out->v = bigger;
			out->cap = cap;
		}
		out->v[out->n++] = key;
	}
}

/* Forgets the children listed, in the kernel's map and ours. */
static void drop_children(struct cpu_collector *c, struct pid_list *l)
{
	struct cpu_target_state *t;

	for (size_t i = 0; i < l->n; i++) {
		bpf_map_delete_elem(bpf_map__fd(c->skel->maps.targets), &l->v[i]);
		HASH_FIND_INT(c->targets, &l->v[i], t);
		if (t) {
			/* Exited before a verdict: its judged samples go in as unwound. */
			cpu_auto_release(c, t, false);
			HASH_DEL(c->targets, t);
			cpu_target_state_free(t);
		}
	}
	free(l->v);
}

static bool exited(pid_t pid, __u32 root, pid_t arg)
{
	return kill(pid, 0) && errno == ESRCH;
}

static bool of_root(pid_t pid, __u32 root, pid_t arg)
{
	return root == (__u32)arg;
}

int cpu_follow_drain_locked(struct cpu_collector *c, int64_t now)
{
	struct pid_list gone = {0};
	int err;

	/* Children found gone before the drain have all their samples in it: forgetting them
	 * after it loses none. */
	if (c->following)
		pick_children(c, exited, 0, &gone);
	err = cpu_drain_locked(c, now);
	drop_children(c, &gone);
	return err;
}

void cpu_follow_forget(struct cpu_collector *c, pid_t root)
{
	struct pid_list children = {0};
	struct cpu_target_state *t;

	HASH_FIND_INT(c->targets, &root, t);
	if (!t || !t->follows_forks)
		return;
	pick_children(c, of_root, root, &children);
	drop_children(c, &children);
	c->following--;
}
