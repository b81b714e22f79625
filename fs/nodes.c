#include <errno.h>
#include "daemon/aperture.h"
#include "daemon/rules.h"
#include "daemon/pidns.h"
#include "daemon/targets.h"
#include "daemon/threads.h"
#include "fs/fs.h"
#include "fs/nodes.h"
#include "fs/tree.h"
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

static int render_rules(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return a->rules ? rules_read(a->rules, out) : 0;
}

/* An open's writes make the whole set (printf writes a line at a time); a bad one changes
 * nothing and says which line. */
static int write_rules(struct aperture *a, const struct node_ref *ref, const char *buf,
		       size_t len)
{
	char why[256];
	int err = a->rules ? rules_set(a->rules, ref->write_offset > 0, buf, len, why,
				       sizeof(why))
			   : -EOPNOTSUPP;

	if (err && err != -EOPNOTSUPP)
		aperture_set_error(a, "config/rules: %s", why);
	return err;
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

static int render_target_text(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return ref->tree->ops->text(ref->tree, ref, ref->node->arg, out);
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

int node_render_window(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return ref->tree->ops->read_window(ref->tree, ref, out);
}

int node_write_window(struct aperture *a, const struct node_ref *ref, const char *buf,
		      size_t len)
{
	return ref->tree->ops->write_window(ref->tree, ref, buf, len);
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

int node_render_view(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	enum target_profile which = VIEW_ARG_PROFILE(ref->node->arg);
	struct profile_snapshot *snap;
	struct view_meta m;
	char title[256];
	int err;

	err = ref->tree->ops->profile(ref->tree, ref, which, &snap, &m, title, sizeof(title));
	if (err)
		return err;
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
 * empty while there is no baseline. A control of the live daemon. */
enum diff_kind { DIFF_FOLDED, DIFF_SVG };

static int render_diff(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	enum target_profile which = VIEW_ARG_PROFILE(ref->node->arg);
	struct profile_snapshot *base, *now = NULL;
	struct view_meta m;
	char title[256];
	int err;

	err = targets_baseline(a->targets, ref->pid, which, &base);
	if (err || !base)
		return err;
	err = ref->tree->ops->profile(ref->tree, ref, which, &now, &m, title, sizeof(title));
	if (err)
		goto out;
	if (VIEW_ARG_VIEW(ref->node->arg) == DIFF_FOLDED)
		err = view_diff_folded(base, now, out);
	else
		err = view_diff_svg(base, now, &m, out);
out:
	profile_snapshot_free(now);
	profile_snapshot_free(base);
	return err;
}

static bool is_jvm(const struct tree *t, uint32_t scope, pid_t pid)
{
	return t->ops->is_jvm(t, scope, pid);
}

static int render_thread_file(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return native_thread_file(a, ref->pid, ref->tid, ref->node->arg, out);
}

static int render_syscalls(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	struct sys_snapshot *snap;
	bool lock_stacks;
	char why[200];
	int err = ref->tree->ops->sys(ref->tree, ref, &snap, &lock_stacks, why, sizeof(why));

	if (err)
		return err;
	err = view_syscalls_json(snap, out);
	sys_snapshot_free(snap);
	return err;
}

static int render_locks(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	struct sys_snapshot *snap;
	bool lock_stacks;
	char why[200];
	int err = ref->tree->ops->sys(ref->tree, ref, &snap, &lock_stacks, why, sizeof(why));

	if (err)
		return err;
	err = view_locks_json(snap, lock_stacks, why[0] ? why : NULL, out);
	sys_snapshot_free(snap);
	return err;
}

enum { N_ROOT, N_README, N_VERSION, N_STATUS, N_CONFIG, N_FREQUENCY, N_RETAIN, N_TARGETS,
       N_UNWIND, N_DEMANGLE, N_DEBUG_DIRS, N_WINDOW, N_JVM_ALLOC_INTERVAL, N_OFFCPU_MIN,
       N_BLOCKING_THRESHOLD, N_WORKERS, N_LOCK_STACKS, N_JVM_ATTACH, N_MEMORY_MB,
       N_SYNC, N_SYNC_INTERVAL, N_SYNC_SPOOL, N_COLLECTORS, N_RULES, N_MAX_TARGETS, N_LABELS };

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
	[N_TARGETS] = { .name = "targets", .mode = S_IFDIR | 0555, .parent = N_ROOT,
			.dynamic = NODE_TARGETS },
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
	[N_MEMORY_MB] = { .name = "memory_mb", .mode = S_IFREG | 0644, .parent = N_CONFIG,
			  .render = render_config, .write = write_config, .arg = CONFIG_MEMORY_MB },
	[N_SYNC] = { .name = "sync", .mode = S_IFREG | 0644, .parent = N_CONFIG,
		     .render = render_config, .write = write_config, .arg = CONFIG_SYNC },
	[N_SYNC_INTERVAL] = { .name = "sync_interval_s", .mode = S_IFREG | 0644,
			      .parent = N_CONFIG, .render = render_config, .write = write_config,
			      .arg = CONFIG_SYNC_INTERVAL_S },
	[N_SYNC_SPOOL] = { .name = "sync_spool_mb", .mode = S_IFREG | 0644, .parent = N_CONFIG,
			   .render = render_config, .write = write_config,
			   .arg = CONFIG_SYNC_SPOOL_MB },
	[N_COLLECTORS] = { .name = "collectors", .mode = S_IFREG | 0644, .parent = N_CONFIG,
			   .render = render_collectors, .write = write_collectors },
	[N_RULES] = { .name = "rules", .mode = S_IFREG | 0644, .parent = N_CONFIG,
		      .render = render_rules, .write = write_rules },
	[N_MAX_TARGETS] = { .name = "max_targets", .mode = S_IFREG | 0644, .parent = N_CONFIG,
			    .render = render_config, .write = write_config,
			    .arg = CONFIG_MAX_TARGETS },
	[N_LABELS] = { .name = "labels", .mode = S_IFREG | 0644, .parent = N_CONFIG,
		       .render = render_config, .write = write_config, .arg = CONFIG_LABELS },
};
const int fs_nodes_count = sizeof(fs_nodes) / sizeof(fs_nodes[0]);

#define DIFF_NODE(n, parent_, profile, kind) \
	{ .name = n, .mode = S_IFREG | 0400, .parent = parent_, .render = render_diff, \
	  .slow = true, .live_only = true, .arg = VIEW_ARG(profile, kind) }
#define CONTROL_NODE(n, r, w) \
	{ .name = n, .mode = S_IFREG | 0600, .parent = T_DIR, .render = r, .write = w, \
	  .live_only = true }

/* The folders come first, so their indices are fixed while rows are added below them. */
enum { T_DIR, T_JVM, T_THREADS };

#define JVM_DIR_NODE(n) \
	{ .name = n, .mode = S_IFDIR | 0500, .parent = T_DIR, .present = is_jvm }
#define SLOW_NODE(n, parent_, r, arg_) \
	{ .name = n, .mode = S_IFREG | 0400, .parent = parent_, .render = r, .slow = true, \
	  .arg = arg_ }
#define TEXT_NODE(n, parent_, which) SLOW_NODE(n, parent_, render_target_text, which)

/* Owner-only modes: the owner shown is the target's uid (see fs/access.c), which is exactly
 * who besides root may use them. A node's parent is the index of its directory here, T_DIR
 * being targets/<pid>/ itself. */
const struct node fs_target_nodes[] = {
	[T_DIR] = DIR_NODE("", 0500, N_TARGETS),
	[T_JVM] = JVM_DIR_NODE("jvm"),
	[T_THREADS] = { .name = "threads", .mode = S_IFDIR | 0500, .parent = T_DIR,
			.has_threads = true },
	CONTROL_NODE("enable", render_enable, write_enable),
	{ .name = "status", .mode = S_IFREG | 0400, .parent = T_DIR, .render = render_target_text,
	  .arg = TREE_TEXT_STATUS },
	CONTROL_NODE("reset", render_nothing, write_reset),
	PROFILE_VIEWS("cpu", T_DIR, TARGET_PROFILE_CPU),
	/* the flame graph people ask for by this name */
	VIEW_NODE("flame.svg", T_DIR, TARGET_PROFILE_CPU, VIEW_SVG),
	FILE_NODE("window", 0600, T_DIR, node_render_window, node_write_window),
	CONTROL_NODE("collectors", render_collectors, write_collectors),
	CONTROL_NODE("baseline", render_baseline, write_baseline),
	DIFF_NODE("diff.folded", T_DIR, TARGET_PROFILE_CPU, DIFF_FOLDED),
	DIFF_NODE("diff.svg", T_DIR, TARGET_PROFILE_CPU, DIFF_SVG),
	{ .name = "status", .mode = S_IFREG | 0400, .parent = T_JVM, .render = render_target_text,
	  .arg = TREE_TEXT_JVM_STATUS },
	PROFILE_VIEWS("alloc", T_JVM, TARGET_PROFILE_JVM_ALLOC),
	PROFILE_VIEWS("alloc_objects", T_JVM, TARGET_PROFILE_JVM_ALLOC_OBJECTS),
	PROFILE_VIEWS("monitors", T_JVM, TARGET_PROFILE_JVM_MONITORS),
	PROFILE_VIEWS("offcpu", T_DIR, TARGET_PROFILE_OFFCPU),
	TEXT_NODE("blocking.json", T_DIR, TREE_TEXT_BLOCKING_JSON),
	TEXT_NODE("busy", T_THREADS, TREE_TEXT_THREADS_BUSY),
	TEXT_NODE("dump", T_THREADS, TREE_TEXT_THREADS_DUMP),
	TEXT_NODE("deadlocks", T_THREADS, TREE_TEXT_DEADLOCKS),
	TEXT_NODE("deadlocks.json", T_THREADS, TREE_TEXT_DEADLOCKS_JSON),
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

uint64_t node_scope_ino(uint32_t scope, int index)
{
	return SCOPE_INO_BIT | (uint64_t)scope << 8 | (uint64_t)index;
}

uint64_t node_target_ino(uint32_t scope, pid_t pid, int index)
{
	return TARGET_INO_BIT | (uint64_t)scope << TARGET_SCOPE_SHIFT | (uint64_t)pid << 8 |
	       (uint64_t)index;
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

static int view_shift(uint64_t ino)
{
	if (ino & THREAD_INO_BIT)
		return THREAD_VIEW_SHIFT;
	if ((ino & TARGET_INO_BIT) && !(ino & SCOPE_INO_BIT))
		return TARGET_VIEW_SHIFT;
	return -1;
}

uint64_t node_in_view(uint64_t ino, uint32_t view)
{
	int shift = view_shift(ino);

	if (shift < 0)
		return ino;
	return (ino & ~((uint64_t)PIDNS_VIEWS_MAX << shift)) | (uint64_t)view << shift;
}

uint32_t node_view(uint64_t ino)
{
	int shift = view_shift(ino);

	return shift < 0 ? 0 : (ino >> shift) & PIDNS_VIEWS_MAX;
}
