#include <errno.h>
#include "collectors/jvm/jvm.h"
#include "daemon/aperture.h"
#include "daemon/targets.h"
#include "daemon/threads.h"
#include "fs/fs.h"
#include "fs/nodes.h"
#include "views/views.h"
#include "views/sysstats_json.h"

extern const char fs_tree_readme[];

static int render_readme(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return fputs(fs_tree_readme, out) < 0 ? -EIO : 0;
}

static int render_version(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return fs_version(out);
}

static int render_status(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return aperture_status(a, out);
}

static int render_config(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return config_read(a, ref->node->arg, out);
}

static int write_config(struct aperture *a, const struct node_ref *ref, const char *buf,
			size_t len)
{
	return config_write(a, ref->node->arg, buf, len);
}

static int render_enable(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return targets_read_enable(a->targets, ref->pid, out);
}

static int write_enable(struct aperture *a, const struct node_ref *ref, const char *buf,
			size_t len)
{
	return targets_write_enable(a->targets, ref->pid, buf, len);
}

static int render_target_status(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return targets_status(a->targets, ref->pid, out);
}

/* reset has no state to show; being readable (empty) lets `cp -r`, `tar` and `rsync` copy a
 * target's directory whole. */
static int render_nothing(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return 0;
}

static int write_reset(struct aperture *a, const struct node_ref *ref, const char *buf,
		       size_t len)
{
	return targets_write_reset(a->targets, ref->pid, buf, len);
}

static int render_collectors(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return ref->pid ? targets_read_collectors(a->targets, ref->pid, out)
			: aperture_read_collectors(a, out);
}

static int write_collectors(struct aperture *a, const struct node_ref *ref, const char *buf,
			    size_t len)
{
	return ref->pid ? targets_write_collectors(a->targets, ref->pid, buf, len)
			: aperture_write_collectors(a, buf, len);
}

static int render_window(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return targets_read_window(a->targets, ref->pid, out);
}

static int write_window(struct aperture *a, const struct node_ref *ref, const char *buf,
			size_t len)
{
	return targets_write_window(a->targets, ref->pid, buf, len);
}

static int render_baseline(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return targets_read_baseline(a->targets, ref->pid, out);
}

static int write_baseline(struct aperture *a, const struct node_ref *ref, const char *buf,
			  size_t len)
{
	return targets_write_baseline(a->targets, ref->pid, buf, len);
}

/* A view node's arg: which profile of the target, which rendering of it. */
enum view_kind { VIEW_FOLDED, VIEW_TOP, VIEW_JSON, VIEW_PPROF, VIEW_SVG };
#define VIEW_ARG(profile, view) ((profile) << 8 | (view))
#define VIEW_ARG_PROFILE(arg) ((arg) >> 8)
#define VIEW_ARG_VIEW(arg) ((arg) & 0xff)

/* What the views besides folded and top say about a target's profile. */
static const struct view_profile {
	const char *name, *sample_type, *period_type, *period_unit;
} view_profiles[TARGET_PROFILE_NR] = {
	[TARGET_PROFILE_CPU] = { "cpu", "samples", "cpu", "nanoseconds" },
	[TARGET_PROFILE_OFFCPU] = { "offcpu", "offcpu", NULL, NULL },
};

static void view_meta_fill(struct aperture *a, pid_t pid, enum target_profile which,
			   char *title, size_t size, struct view_meta *m)
{
	const struct view_profile *vp = &view_profiles[which];
	struct target_info info = {0};
	int64_t now = aperture_now();

	if (targets_info(a->targets, pid, &info))
		snprintf(title, size, "%s: pid %d", vp->name, pid);
	else
		snprintf(title, size, "%s: %s (pid %d)", vp->name, info.comm, pid);
	/* A profile that stopped growing ends when it stopped: its renders stay byte-identical,
	 * so cp, tar and rsync copy what cat shows. */
	if (info.state != TARGET_ENABLED && info.since)
		now = info.since;
	*m = (struct view_meta){ .title = title, .now = now, .sample_type = vp->sample_type,
				 .period_type = vp->period_type, .period_unit = vp->period_unit };
	if (which == TARGET_PROFILE_CPU)
		m->period = 1000000000 / config_get(a, CONFIG_FREQUENCY_HZ);
	targets_window_s(a->targets, pid, &m->window_s);
}

static int render_view(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	enum target_profile which = VIEW_ARG_PROFILE(ref->node->arg);
	struct profile_snapshot *snap;
	struct view_meta m;
	char title[64];
	int err;

	err = targets_snapshot(a->targets, ref->pid, which, &snap);
	if (err)
		return err;
	view_meta_fill(a, ref->pid, which, title, sizeof(title), &m);
	if (m.now < snap->since) /* reset after it stopped */
		m.now = snap->since;
	switch (VIEW_ARG_VIEW(ref->node->arg)) {
	case VIEW_FOLDED:
		err = view_folded(snap, out);
		break;
	case VIEW_TOP:
		err = view_top(snap, out);
		break;
	case VIEW_JSON:
		err = view_json(snap, &m, out);
		break;
	case VIEW_PPROF:
		err = view_pprof(snap, &m, out);
		break;
	case VIEW_SVG:
		err = view_svg(snap, &m, out);
		break;
	default:
		err = -EINVAL;
	}
	profile_snapshot_free(snap);
	return err;
}

/* diff.folded and diff.svg: the profile now against its baseline, over the same window;
 * empty while there is no baseline. */
enum diff_kind { DIFF_FOLDED, DIFF_SVG };

static int render_diff(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	enum target_profile which = VIEW_ARG_PROFILE(ref->node->arg);
	struct profile_snapshot *base, *now = NULL;
	struct view_meta m;
	char title[64];
	int err;

	err = targets_baseline(a->targets, ref->pid, which, &base);
	if (err || !base)
		return err;
	err = targets_snapshot(a->targets, ref->pid, which, &now);
	if (err)
		goto out;
	if (VIEW_ARG_VIEW(ref->node->arg) == DIFF_FOLDED) {
		err = view_diff_folded(base, now, out);
	} else {
		view_meta_fill(a, ref->pid, which, title, sizeof(title), &m);
		err = view_diff_svg(base, now, &m, out);
	}
out:
	profile_snapshot_free(now);
	profile_snapshot_free(base);
	return err;
}

static bool is_jvm(struct aperture *a, pid_t pid)
{
	return aperture_jvm_found_by(a, pid) != NULL;
}

static int render_jvm_status(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return jvm_collector_status(a->jvm, ref->pid,
				    config_get(a, CONFIG_JVM_ATTACH) ? NULL :
				    "config/jvm_attach is 0: native profiling only", out);
}

static int render_blocking(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return target_blocking_json(a, ref->pid, out);
}

/* threads/: an attached JVM's own view of its threads (Java names, stacks and locks), else
 * what the kernel and the process's memory show. */
static int render_threads(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	enum jvm_threads_view view = ref->node->arg;
	int err = jvm_threads_render(a->jvm, ref->pid, view, out);

	if (err != -ENODATA)
		return err;
	switch (view) {
	case JVM_THREADS_DUMP:
		return native_threads_dump(a, ref->pid, out);
	case JVM_THREADS_DEADLOCKS:
		return native_threads_deadlocks(a, ref->pid, false, out);
	case JVM_THREADS_DEADLOCKS_JSON:
		return native_threads_deadlocks(a, ref->pid, true, out);
	}
	return -EINVAL;
}

static int render_busy(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return target_threads_busy(a, ref->pid, out);
}

static int render_thread_file(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return native_thread_file(a, ref->pid, ref->tid, ref->node->arg, out);
}

static int render_syscalls(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	struct sys_snapshot *snap;
	int err = targets_sys_snapshot(a->targets, ref->pid, &snap);

	if (err)
		return err;
	err = view_syscalls_json(snap, out);
	sys_snapshot_free(snap);
	return err;
}

static int render_locks(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	struct sys_snapshot *snap;
	char why[200];
	int err = targets_sys_snapshot(a->targets, ref->pid, &snap);

	if (err)
		return err;
	aperture_kernel_locks_error(a, why, sizeof(why));
	err = view_locks_json(snap, config_get(a, CONFIG_LOCK_STACKS), why[0] ? why : NULL, out);
	sys_snapshot_free(snap);
	return err;
}

#define DIR_NODE(n, m, p) { .name = n, .mode = S_IFDIR | (m), .parent = p }
#define FILE_NODE(n, m, p, r, w) \
	{ .name = n, .mode = S_IFREG | (m), .parent = p, .render = r, .write = w }

enum { N_ROOT, N_README, N_VERSION, N_STATUS, N_CONFIG, N_FREQUENCY, N_RETAIN, N_TARGETS,
       N_UNWIND, N_DEMANGLE, N_DEBUG_DIRS, N_WINDOW, N_JVM_ALLOC_INTERVAL, N_OFFCPU_MIN,
       N_BLOCKING_THRESHOLD, N_WORKERS, N_LOCK_STACKS, N_JVM_ATTACH, N_COLLECTORS };

const struct node fs_nodes[] = {
	[N_ROOT] = DIR_NODE("/", 0755, -1),
	[N_README] = FILE_NODE("README", 0444, N_ROOT, render_readme, NULL),
	[N_VERSION] = FILE_NODE("version", 0444, N_ROOT, render_version, NULL),
	[N_STATUS] = FILE_NODE("status", 0444, N_ROOT, render_status, NULL),
	[N_CONFIG] = DIR_NODE("config", 0755, N_ROOT),
	[N_FREQUENCY] = { .name = "frequency_hz", .mode = S_IFREG | 0644, .parent = N_CONFIG,
			  .render = render_config, .write = write_config,
			  .arg = CONFIG_FREQUENCY_HZ },
	[N_RETAIN] = { .name = "retain_exited_s", .mode = S_IFREG | 0644, .parent = N_CONFIG,
		       .render = render_config, .write = write_config,
		       .arg = CONFIG_RETAIN_EXITED_S },
	[N_TARGETS] = DIR_NODE("targets", 0555, N_ROOT),
	[N_UNWIND] = { .name = "unwind", .mode = S_IFREG | 0644, .parent = N_CONFIG,
		       .render = render_config, .write = write_config, .arg = CONFIG_UNWIND },
	[N_DEMANGLE] = { .name = "demangle", .mode = S_IFREG | 0644, .parent = N_CONFIG,
			 .render = render_config, .write = write_config, .arg = CONFIG_DEMANGLE },
	[N_DEBUG_DIRS] = { .name = "debug_dirs", .mode = S_IFREG | 0644, .parent = N_CONFIG,
			   .render = render_config, .write = write_config,
			   .arg = CONFIG_DEBUG_DIRS },
	[N_WINDOW] = { .name = "window_s", .mode = S_IFREG | 0644, .parent = N_CONFIG,
		       .render = render_config, .write = write_config, .arg = CONFIG_WINDOW_S },
	[N_JVM_ALLOC_INTERVAL] = { .name = "jvm_alloc_interval_bytes", .mode = S_IFREG | 0644,
				   .parent = N_CONFIG, .render = render_config,
				   .write = write_config, .arg = CONFIG_JVM_ALLOC_INTERVAL },
	[N_OFFCPU_MIN] = { .name = "offcpu_min_us", .mode = S_IFREG | 0644, .parent = N_CONFIG,
			   .render = render_config, .write = write_config,
			   .arg = CONFIG_OFFCPU_MIN_US },
	[N_BLOCKING_THRESHOLD] = { .name = "blocking_threshold_ms", .mode = S_IFREG | 0644,
				   .parent = N_CONFIG, .render = render_config,
				   .write = write_config, .arg = CONFIG_BLOCKING_THRESHOLD_MS },
	[N_WORKERS] = { .name = "workers", .mode = S_IFREG | 0644, .parent = N_CONFIG,
			.render = render_config, .write = write_config, .arg = CONFIG_WORKERS },
	[N_LOCK_STACKS] = { .name = "lock_stacks", .mode = S_IFREG | 0644, .parent = N_CONFIG,
			    .render = render_config, .write = write_config,
			    .arg = CONFIG_LOCK_STACKS },
	[N_JVM_ATTACH] = { .name = "jvm_attach", .mode = S_IFREG | 0644, .parent = N_CONFIG,
			   .render = render_config, .write = write_config,
			   .arg = CONFIG_JVM_ATTACH },
	[N_COLLECTORS] = { .name = "collectors", .mode = S_IFREG | 0644, .parent = N_CONFIG,
			   .render = render_collectors, .write = write_collectors },
};
const int fs_nodes_count = sizeof(fs_nodes) / sizeof(fs_nodes[0]);
const int fs_node_targets = N_TARGETS;

#define VIEW_NODE(n, parent_, profile, view) \
	{ .name = n, .mode = S_IFREG | 0400, .parent = parent_, .render = render_view, \
	  .slow = true, .arg = VIEW_ARG(profile, view) }
/* Every rendering of one stack profile, named <prefix>.<format>. */
#define PROFILE_VIEWS(prefix, parent_, profile) \
	VIEW_NODE(prefix ".folded", parent_, profile, VIEW_FOLDED), \
	VIEW_NODE(prefix ".top", parent_, profile, VIEW_TOP), \
	VIEW_NODE(prefix ".json", parent_, profile, VIEW_JSON), \
	VIEW_NODE(prefix ".pprof", parent_, profile, VIEW_PPROF), \
	VIEW_NODE(prefix ".svg", parent_, profile, VIEW_SVG)

#define DIFF_NODE(n, parent_, profile, kind) \
	{ .name = n, .mode = S_IFREG | 0400, .parent = parent_, .render = render_diff, \
	  .slow = true, .arg = VIEW_ARG(profile, kind) }

/* The folders come first, so their indices are fixed while rows are added below them. */
enum { T_DIR, T_JVM, T_THREADS };

#define JVM_DIR_NODE(n) \
	{ .name = n, .mode = S_IFDIR | 0500, .parent = T_DIR, .present = is_jvm }
#define SLOW_NODE(n, parent_, r, arg_) \
	{ .name = n, .mode = S_IFREG | 0400, .parent = parent_, .render = r, .slow = true, \
	  .arg = arg_ }

/* Owner-only modes: the owner shown is the target's uid (see fs/access.c), which is exactly
 * who besides root may use them. A node's parent is the index of its directory here, T_DIR
 * being targets/<pid>/ itself. */
const struct node fs_target_nodes[] = {
	[T_DIR] = DIR_NODE("", 0500, N_TARGETS),
	[T_JVM] = JVM_DIR_NODE("jvm"),
	[T_THREADS] = { .name = "threads", .mode = S_IFDIR | 0500, .parent = T_DIR,
			.has_threads = true },
	FILE_NODE("enable", 0600, T_DIR, render_enable, write_enable),
	FILE_NODE("status", 0400, T_DIR, render_target_status, NULL),
	FILE_NODE("reset", 0600, T_DIR, render_nothing, write_reset),
	PROFILE_VIEWS("cpu", T_DIR, TARGET_PROFILE_CPU),
	/* the flame graph people ask for by this name */
	VIEW_NODE("flame.svg", T_DIR, TARGET_PROFILE_CPU, VIEW_SVG),
	FILE_NODE("window", 0600, T_DIR, render_window, write_window),
	FILE_NODE("collectors", 0600, T_DIR, render_collectors, write_collectors),
	FILE_NODE("baseline", 0600, T_DIR, render_baseline, write_baseline),
	DIFF_NODE("diff.folded", T_DIR, TARGET_PROFILE_CPU, DIFF_FOLDED),
	DIFF_NODE("diff.svg", T_DIR, TARGET_PROFILE_CPU, DIFF_SVG),
	FILE_NODE("status", 0400, T_JVM, render_jvm_status, NULL),
	PROFILE_VIEWS("alloc", T_JVM, TARGET_PROFILE_JVM_ALLOC),
	PROFILE_VIEWS("alloc_objects", T_JVM, TARGET_PROFILE_JVM_ALLOC_OBJECTS),
	PROFILE_VIEWS("monitors", T_JVM, TARGET_PROFILE_JVM_MONITORS),
	PROFILE_VIEWS("offcpu", T_DIR, TARGET_PROFILE_OFFCPU),
	SLOW_NODE("blocking.json", T_DIR, render_blocking, 0),
	SLOW_NODE("busy", T_THREADS, render_busy, 0),
	SLOW_NODE("dump", T_THREADS, render_threads, JVM_THREADS_DUMP),
	SLOW_NODE("deadlocks", T_THREADS, render_threads, JVM_THREADS_DEADLOCKS),
	SLOW_NODE("deadlocks.json", T_THREADS, render_threads, JVM_THREADS_DEADLOCKS_JSON),
	/* locks.json is the contract's per-lock statistics, not the generic tree. */
	VIEW_NODE("locks.folded", T_DIR, TARGET_PROFILE_LOCKS, VIEW_FOLDED),
	VIEW_NODE("locks.top", T_DIR, TARGET_PROFILE_LOCKS, VIEW_TOP),
	VIEW_NODE("locks.pprof", T_DIR, TARGET_PROFILE_LOCKS, VIEW_PPROF),
	VIEW_NODE("locks.svg", T_DIR, TARGET_PROFILE_LOCKS, VIEW_SVG),
	{ .name = "syscalls.json", .mode = S_IFREG | 0400, .parent = T_DIR,
	  .render = render_syscalls, .slow = true },
	{ .name = "locks.json", .mode = S_IFREG | 0400, .parent = T_DIR,
	  .render = render_locks, .slow = true },
};
const int fs_target_nodes_count = sizeof(fs_target_nodes) / sizeof(fs_target_nodes[0]);

_Static_assert(sizeof(fs_target_nodes) / sizeof(fs_target_nodes[0]) <= 256,
	       "a target node's index is 8 bits of its inode number");

/* threads/<tid>/: 0 is the directory, its parent being threads/ in fs_target_nodes. */
const struct node fs_thread_nodes[] = {
	DIR_NODE("", 0500, T_THREADS),
	SLOW_NODE("name", 0, render_thread_file, THREAD_FILE_NAME),
	SLOW_NODE("state", 0, render_thread_file, THREAD_FILE_STATE),
	SLOW_NODE("cpu_us", 0, render_thread_file, THREAD_FILE_CPU_US),
};
const int fs_thread_nodes_count = sizeof(fs_thread_nodes) / sizeof(fs_thread_nodes[0]);

uint64_t node_ino(int index)
{
	return (uint64_t)index + 1;
}

uint64_t node_target_ino(pid_t pid, int index)
{
	return TARGET_INO_BIT | (uint64_t)pid << 8 | (uint64_t)index;
}

int node_target_index(const struct node_ref *ref)
{
	return ref->node - fs_target_nodes;
}

uint64_t node_thread_ino(pid_t pid, pid_t tid, int index)
{
	return THREAD_INO_BIT | (uint64_t)pid << (THREAD_ID_BITS + 8) | (uint64_t)tid << 8 |
	       (uint64_t)index;
}

int node_thread_index(const struct node_ref *ref)
{
	return ref->node - fs_thread_nodes;
}

int node_resolve(uint64_t ino, struct node_ref *out)
{
	const uint64_t id_mask = (1ULL << THREAD_ID_BITS) - 1;

	out->tid = 0;
	if (ino & THREAD_INO_BIT) {
		uint64_t index = ino & 0xff, tid = (ino >> 8) & id_mask;
		uint64_t pid = (ino >> (THREAD_ID_BITS + 8)) & id_mask;

		if (index >= (uint64_t)fs_thread_nodes_count || !pid || !tid ||
		    ino != node_thread_ino(pid, tid, index))
			return -ENOENT;
		out->node = &fs_thread_nodes[index];
		out->pid = pid;
		out->tid = tid;
	} else if (ino & TARGET_INO_BIT) {
		uint64_t index = ino & 0xff, pid = (ino & ~TARGET_INO_BIT) >> 8;

		if (index >= (uint64_t)fs_target_nodes_count || pid == 0 || pid > INT32_MAX)
			return -ENOENT;
		out->node = &fs_target_nodes[index];
		out->pid = pid;
	} else {
		if (ino == 0 || ino > (uint64_t)fs_nodes_count)
			return -ENOENT;
		out->node = &fs_nodes[ino - 1];
		out->pid = 0;
	}
	out->ino = ino;
	return 0;
}
