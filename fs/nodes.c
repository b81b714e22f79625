#include <errno.h>
#include "daemon/aperture.h"
#include "daemon/targets.h"
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

/* A view node's arg: which profile of the target, which rendering of it. */
enum view_kind { VIEW_FOLDED, VIEW_TOP };
#define VIEW_ARG(profile, view) ((profile) << 8 | (view))
#define VIEW_ARG_PROFILE(arg) ((arg) >> 8)
#define VIEW_ARG_VIEW(arg) ((arg) & 0xff)

static int render_view(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	struct profile_snapshot *snap;
	int err;

	err = targets_snapshot(a->targets, ref->pid, VIEW_ARG_PROFILE(ref->node->arg), &snap);
	if (err)
		return err;
	switch (VIEW_ARG_VIEW(ref->node->arg)) {
	case VIEW_FOLDED:
		err = view_folded(snap, out);
		break;
	case VIEW_TOP:
		err = view_top(snap, out);
		break;
	default:
		err = -EINVAL;
	}
	profile_snapshot_free(snap);
	return err;
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
       N_LOCK_STACKS };

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
	[N_LOCK_STACKS] = { .name = "lock_stacks", .mode = S_IFREG | 0644, .parent = N_CONFIG,
			    .render = render_config, .write = write_config,
			    .arg = CONFIG_LOCK_STACKS },
};
const int fs_nodes_count = sizeof(fs_nodes) / sizeof(fs_nodes[0]);
const int fs_node_targets = N_TARGETS;

#define VIEW_NODE(n, parent_, profile, view) \
	{ .name = n, .mode = S_IFREG | 0400, .parent = parent_, .render = render_view, \
	  .slow = true, .arg = VIEW_ARG(profile, view) }
/* Every rendering of one stack profile, named <prefix>.<format>. */
#define PROFILE_VIEWS(prefix, parent_, profile) \
	VIEW_NODE(prefix ".folded", parent_, profile, VIEW_FOLDED), \
	VIEW_NODE(prefix ".top", parent_, profile, VIEW_TOP)

enum { T_DIR };

/* Owner-only modes: the owner shown is the target's uid (see fs/access.c), which is exactly
 * who besides root may use them. A node's parent is the index of its directory here, T_DIR
 * being targets/<pid>/ itself. */
const struct node fs_target_nodes[] = {
	[T_DIR] = DIR_NODE("", 0500, N_TARGETS),
	FILE_NODE("enable", 0600, T_DIR, render_enable, write_enable),
	FILE_NODE("status", 0400, T_DIR, render_target_status, NULL),
	FILE_NODE("reset", 0600, T_DIR, render_nothing, write_reset),
	PROFILE_VIEWS("cpu", T_DIR, TARGET_PROFILE_CPU),
	PROFILE_VIEWS("locks", T_DIR, TARGET_PROFILE_LOCKS),
	{ .name = "syscalls.json", .mode = S_IFREG | 0400, .parent = T_DIR,
	  .render = render_syscalls, .slow = true },
	{ .name = "locks.json", .mode = S_IFREG | 0400, .parent = T_DIR,
	  .render = render_locks, .slow = true },
};
const int fs_target_nodes_count = sizeof(fs_target_nodes) / sizeof(fs_target_nodes[0]);

_Static_assert(sizeof(fs_target_nodes) / sizeof(fs_target_nodes[0]) <= 256,
	       "a target node's index is 8 bits of its inode number");

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

int node_resolve(uint64_t ino, struct node_ref *out)
{
	if (ino & TARGET_INO_BIT) {
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
