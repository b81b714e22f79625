/* Java frames in a JVM's on-CPU stacks.
 *
 * Frame pointers and CFI both stop in JIT-compiled code, which a stock JVM runs without frame
 * pointers or unwind tables. For a JVM whose agent is attached, BPF signals each thread it
 * samples; the agent's handler walks that thread's Java stack with HotSpot's
 * AsyncGetCallTrace, and the agent hands the stacks over once a second. Here each dwarf
 * sample of such a JVM waits for its Java stack: same thread, walked within CPU_JAVA_MATCH_NS
 * after the sample. The Java frames take the place of what the native unwinder could not
 * walk (the root down to the leafmost frame in anonymous memory: JIT code, the interpreter,
 * stubs), under the native frames it did name above them (VM code, JNI libraries, libc) and
 * the kernel's. A sample whose Java stack does not come within CPU_JAVA_WAIT_MS (a VM thread
 * such as the GC's, a signal not taken) goes in as it was unwound. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "collectors/cpu_internal.h"
#include "store/profile.h"
#include "cpu.skel.h"

/* The handler runs when the sampled thread next returns to user mode: at once for a tick in
 * user code, after the system call for one in the kernel. */
#define CPU_JAVA_MATCH_NS (50ULL * 1000 * 1000)
/* The agent is drained once a second: a sample waits up to two drains for its stack. */
#define CPU_JAVA_WAIT_MS 2500
#define CPU_JAVA_WAITS_MAX 65536

struct cpu_java_wait {
	uint32_t tid;
	uint64_t ns;
	int64_t sec;     /* the second it is counted in */
	int64_t came_ms; /* CLOCK_MONOTONIC, for giving up */
	uint32_t nuser;  /* user ids, root first, then nkern kernel ids */
	uint32_t jit_end; /* user ids [0, jit_end) are the frames the Java ones replace */
	uint32_t nkern;
	uint32_t ids[];  /* comm, user, kernel */
};

static int add_wait(struct cpu_target_state *t, struct cpu_java_wait *w, const uint32_t *java,
		    uint32_t njava)
{
	uint32_t ids[2 * CPU_STACK_FRAMES_MAX + 2 + CPU_JAVA_FRAMES_MAX], n = 0;
	const uint32_t *user = w->ids + 1;

	ids[n++] = w->ids[0];
	if (java) {
		memcpy(ids + n, java, njava * sizeof(ids[0]));
		n += njava;
		user += w->jit_end;
	}
	memcpy(ids + n, user, (w->ids + 1 + w->nuser - user) * sizeof(ids[0]));
	n += w->ids + 1 + w->nuser - user;
	memcpy(ids + n, w->ids + 1 + w->nuser, w->nkern * sizeof(ids[0]));
	n += w->nkern;
	if (java)
		t->java_merged++;
	return profile_add(t->profile, w->sec, ids, n, 1);
}

/* Adds the samples that waited long enough (all with force) as they were unwound. */
void cpu_java_flush(struct cpu_target_state *t, bool force)
{
	int64_t now = cpu_mono_ms();
	size_t kept = 0;

	for (size_t i = 0; i < t->java_n; i++) {
		struct cpu_java_wait *w = t->java_waits[i];

		if (!force && now - w->came_ms < CPU_JAVA_WAIT_MS) {
			t->java_waits[kept++] = w;
			continue;
		}
		add_wait(t, w, NULL, 0);
		t->java_alone++;
		free(w);
	}
	t->java_n = kept;
}

int cpu_java_hold(struct cpu_target_state *t, const char *raw_comm, uint32_t tid, uint64_t ns,
		  const struct cpu_named_stack *user, const struct cpu_named_stack *kern,
		  int64_t sec)
{
	uint32_t nuser = user->depth, nkern = kern ? kern->depth : 0;
	char comm[CPU_COMM_LEN + 1];
	struct cpu_java_wait *w;

	if (t->java_n == CPU_JAVA_WAITS_MAX)
		return cpu_add_stacks(t, raw_comm, user, false, kern, 1, sec);
	if (t->java_n == t->java_cap) {
		size_t cap = t->java_cap ? 2 * t->java_cap : 256;
		struct cpu_java_wait **v = realloc(t->java_waits, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		t->java_waits = v;
		t->java_cap = cap;
	}
	w = malloc(sizeof(*w) + (1 + nuser + nkern) * sizeof(w->ids[0]));
	if (!w)
		return -ENOMEM;
	memcpy(comm, raw_comm, CPU_COMM_LEN);
	comm[CPU_COMM_LEN] = '\0';
	if (profile_frame_id(t->profile, comm[0] ? comm : "[unnamed]", &w->ids[0])) {
		free(w);
		return -ENOMEM;
	}
	w->tid = tid;
	w->ns = ns;
	w->sec = sec;
	w->came_ms = cpu_mono_ms();
	w->nuser = nuser;
	w->jit_end = user->jit_end;
	w->nkern = nkern;
	memcpy(w->ids + 1, user->ids, nuser * sizeof(w->ids[0]));
	if (kern)
		memcpy(w->ids + 1 + nuser, kern->ids, nkern * sizeof(w->ids[0]));
	t->java_waits[t->java_n++] = w;
	t->frames_total += user->user_frames;
	t->frames_named += user->named_frames;
	return 0;
}

/* The waiting sample of tid that stack s was walked for: the latest one taken before it,
 * within CPU_JAVA_MATCH_NS. */
static size_t find_wait(const struct cpu_target_state *t, const struct cpu_java_stack *s)
{
	size_t best = t->java_n;

	for (size_t i = 0; i < t->java_n; i++) {
		const struct cpu_java_wait *w = t->java_waits[i];

		if (w->tid != (uint32_t)s->tid || w->ns > s->ns || s->ns - w->ns > CPU_JAVA_MATCH_NS)
			continue;
		if (best == t->java_n || w->ns > t->java_waits[best]->ns)
			best = i;
	}
	return best;
}

static int java_ids(struct cpu_target_state *t, const struct cpu_java_stack *s, uint32_t *ids,
		    uint32_t *n)
{
	*n = 0;
	for (size_t k = 0; k < s->n && *n < CPU_JAVA_FRAMES_MAX; k++)
		if (profile_frame_id(t->profile, s->frames[k], &ids[(*n)++]))
			return -ENOMEM;
	return 0;
}

int cpu_collector_java_stacks(struct cpu_collector *c, pid_t pid,
			      const struct cpu_java_stack *v, size_t n)
{
	uint32_t ids[CPU_JAVA_FRAMES_MAX], nids;
	struct cpu_target_state *t;
	int err = 0;

	pthread_mutex_lock(&c->lock);
	/* Each sample was in the ring before its thread took the signal: hold them all. */
	cpu_follow_install_locked(c);
	cpu_ring_read_locked(c);
	HASH_FIND_INT(c->targets, &pid, t);
	for (size_t i = 0; t && i < n && !err; i++) {
		size_t at = find_wait(t, &v[i]);
		struct cpu_java_wait *w;

		if (at == t->java_n) {
			t->java_unmatched++;
			continue;
		}
		w = t->java_waits[at];
		t->java_waits[at] = t->java_waits[--t->java_n];
		err = java_ids(t, &v[i], ids, &nids);
		if (!err)
			err = add_wait(t, w, ids, nids);
		free(w);
	}
	if (t)
		cpu_java_flush(t, false);
	pthread_mutex_unlock(&c->lock);
	return err;
}

int cpu_collector_java(struct cpu_collector *c, pid_t pid, int signo)
{
	struct cpu_target_state *t;
	__u32 sig = signo;
	int fd, err = 0;

	pthread_mutex_lock(&c->lock);
	HASH_FIND_INT(c->targets, &pid, t);
	if (!t) {
		err = -ENOENT;
		goto out;
	}
	fd = bpf_map__fd(c->skel->maps.java_signals);
	if (signo > 0) {
		t->java_signo = signo;
		cpu_target_apply_unwind(c, t);
		if (!t->dwarf || bpf_map_update_elem(fd, &pid, &sig, BPF_ANY)) {
			t->java_signo = 0;
			cpu_target_apply_unwind(c, t);
			err = -EIO;
		}
	} else if (t->java_signo) {
		bpf_map_delete_elem(fd, &pid);
		t->java_signo = 0;
		cpu_target_apply_unwind(c, t);
		cpu_java_flush(t, true);
	}
out:
	pthread_mutex_unlock(&c->lock);
	return err;
}

void cpu_java_free(struct cpu_target_state *t)
{
	for (size_t i = 0; i < t->java_n; i++)
		free(t->java_waits[i]);
	free(t->java_waits);
	t->java_waits = NULL;
	t->java_n = t->java_cap = 0;
}
