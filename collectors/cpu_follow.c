/* Following forks (for `aperture record`): the BPF side gives every process a followed one
 * forks its own targets entry naming the followed root (bpf/cpu.bpf.c, cpu_fork). Here a
 * child gets its userspace state, sharing the root's profile, when the kernel says it was
 * forked or exec'd (its mappings are read then, while it surely exists), or at the latest
 * when its first samples are drained; its entry goes once the child is gone, so a
 * fork-heavy command does not fill the targets map. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <bpf/bpf.h>
#include "collectors/cpu_internal.h"
#include "cpu.skel.h"

/* A followed process forked or exec'd: read the mappings of its current address space. */
static int on_follow_event(void *ctx, void *data, size_t size)
{
	struct cpu_collector *c = ctx;
	struct cpu_target_state *t;
	struct cpu_gen_syms *slot;
	struct cpu_target value;
	pid_t pid;

	if (size < sizeof(__u32))
		return 0;
	pid = *(const __u32 *)data;
	if (bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.targets), &pid, &value))
		return 0;
	HASH_FIND_INT(c->targets, &pid, t);
	if (!t)
		t = cpu_follow_adopt(c, pid);
	if (t)
		cpu_gen_syms(c, t, value.exec_gen, &slot);
	return 0;
}

int cpu_collector_follow_fd(struct cpu_collector *c)
{
	return c->follow_events ? ring_buffer__epoll_fd(c->follow_events) : -ENOENT;
}

int cpu_collector_follow_events(struct cpu_collector *c)
{
	int n;

	pthread_mutex_lock(&c->lock);
	n = c->follow_events ? ring_buffer__consume(c->follow_events) : 0;
	pthread_mutex_unlock(&c->lock);
	return n < 0 ? n : 0;
}

int cpu_collector_follow_forks(struct cpu_collector *c, pid_t pid)
{
	int fd = bpf_map__fd(c->skel->maps.targets), err = -ENOENT;
	struct cpu_target value;
	struct cpu_target_state *t;

	pthread_mutex_lock(&c->lock);
	if (!c->follow_events) {
		c->follow_events = ring_buffer__new(bpf_map__fd(c->skel->maps.follow_events),
						    on_follow_event, c, NULL);
		if (!c->follow_events) {
			err = -errno;
			goto out;
		}
	}
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
