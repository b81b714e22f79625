/* The live daemon as a source of the tree: its target registry, collectors and threads. */
#include <errno.h>
#include "collectors/jvm/jvm.h"
#include "daemon/aperture.h"
#include "daemon/targets.h"
#include "daemon/threads.h"
#include "fs/tree.h"

static struct aperture *live(const struct tree *t)
{
	return t->a;
}

static int list_targets(const struct tree *t, uint32_t scope, pid_t **pids, size_t *n)
{
	return targets_list(live(t)->targets, pids, n);
}

static int target_info(const struct tree *t, uint32_t scope, pid_t pid, struct target_info *out)
{
	return targets_info(live(t)->targets, pid, out);
}

static bool is_jvm(const struct tree *t, uint32_t scope, pid_t pid)
{
	return aperture_jvm_found_by(live(t), pid) != NULL;
}

static int profile(const struct tree *t, const struct node_ref *ref, enum target_profile which,
		   struct profile_snapshot **out, struct view_meta *m, char *title,
		   size_t title_size)
{
	const struct tree_profile *tp = &tree_profiles[which];
	struct aperture *a = live(t);
	struct target_info info = {0};
	int64_t now = aperture_now();
	int err;

	/* The node keeps its last PROFILE_HISTORY_S seconds up to now: a range that ends
	 * earlier than the last drain is not there. */
	if (ref->range.set && ref->range.until < now - 2)
		return -ERANGE;
	err = ref->range.set ? targets_snapshot_from(a->targets, ref->pid, which,
						     ref->range.from, out) :
		targets_snapshot(a->targets, ref->pid, which, out);
	if (err)
		return err;
	if (targets_info(a->targets, ref->pid, &info))
		snprintf(title, title_size, "%s: pid %d", tp->name, ref->pid);
	else
		snprintf(title, title_size, "%s: %s (pid %d)", tp->name, info.comm, ref->pid);
	/* A profile that stopped growing ends when it stopped: its renders stay byte-identical,
	 * so cp, tar and rsync copy what cat shows. */
	if (info.state != TARGET_ENABLED && info.since)
		now = info.since;
	if (now < (*out)->since) /* reset after it stopped */
		now = (*out)->since;
	*m = (struct view_meta){ .title = title, .now = now, .sample_type = tp->sample_type,
				 .period_type = tp->period_type, .period_unit = tp->period_unit };
	if (which == TARGET_PROFILE_CPU)
		m->period = 1000000000 / config_get(a, CONFIG_FREQUENCY_HZ);
	if (ref->range.set) /* the range, or everything kept when it reached past it */
		m->window_s = (*out)->since == ref->range.from ? now - ref->range.from : 0;
	else
		targets_window_s(a->targets, ref->pid, &m->window_s);
	return 0;
}

static int sys(const struct tree *t, const struct node_ref *ref, struct sys_snapshot **out,
	       bool *lock_stacks, char *why, size_t why_size)
{
	struct aperture *a = live(t);

	*lock_stacks = config_get(a, CONFIG_LOCK_STACKS);
	aperture_kernel_locks_error(a, why, why_size);
	return targets_sys_snapshot(a->targets, ref->pid, out);
}

/* threads/: an attached JVM's own view of its threads (Java names, stacks and locks), else
 * what the kernel and the process's memory show. */
static int threads_text(struct aperture *a, pid_t pid, enum jvm_threads_view view, FILE *out)
{
	int err = jvm_threads_render(a->jvm, pid, view, out);

	if (err != -ENODATA)
		return err;
	switch (view) {
	case JVM_THREADS_DUMP:
		return native_threads_dump(a, pid, out);
	case JVM_THREADS_DEADLOCKS:
		return native_threads_deadlocks(a, pid, false, out);
	case JVM_THREADS_DEADLOCKS_JSON:
		return native_threads_deadlocks(a, pid, true, out);
	}
	return -EINVAL;
}

static int text(const struct tree *t, const struct node_ref *ref, enum tree_text which,
		FILE *out)
{
	struct aperture *a = live(t);

	switch (which) {
	case TREE_TEXT_STATUS:
		return targets_status(a->targets, ref->pid, out);
	case TREE_TEXT_JVM_STATUS:
		return jvm_collector_status(a->jvm, ref->pid,
					    config_get(a, CONFIG_JVM_ATTACH) ? NULL :
					    "config/jvm_attach is 0: native profiling only", out);
	case TREE_TEXT_THREADS_DUMP:
		return threads_text(a, ref->pid, JVM_THREADS_DUMP, out);
	case TREE_TEXT_DEADLOCKS:
		return threads_text(a, ref->pid, JVM_THREADS_DEADLOCKS, out);
	case TREE_TEXT_DEADLOCKS_JSON:
		return threads_text(a, ref->pid, JVM_THREADS_DEADLOCKS_JSON, out);
	case TREE_TEXT_THREADS_BUSY:
		return target_threads_busy(a, ref->pid, out);
	case TREE_TEXT_BLOCKING_JSON:
		return target_blocking_json(a, ref->pid, out);
	case TREE_TEXT_NR:
		break;
	}
	return -EINVAL;
}

static int read_window(const struct tree *t, const struct node_ref *ref, FILE *out)
{
	return targets_read_window(live(t)->targets, ref->pid, out);
}

static int write_window(const struct tree *t, const struct node_ref *ref, const char *buf,
			size_t len)
{
	return targets_write_window(live(t)->targets, ref->pid, buf, len);
}

static const struct tree_source_ops live_ops = {
	.list_targets = list_targets,
	.target_info = target_info,
	.is_jvm = is_jvm,
	.profile = profile,
	.sys = sys,
	.text = text,
	.read_window = read_window,
	.write_window = write_window,
};

void tree_init_live(struct tree *t, struct aperture *a)
{
	*t = (struct tree){ .ops = &live_ops, .ctx = a, .a = a, .started = a->started,
			    .root = fs_nodes, .nroot = fs_nodes_count };
}
