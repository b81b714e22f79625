/* Resolution and rendering of the tree, for FUSE (fs/ops.c) and any other reader alike. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "daemon/pidns.h"
#include "daemon/threads.h"
#include "fs/tree.h"

#define SCOPE_MASK ((1ULL << SCOPE_ID_BITS) - 1)
#define ID_MASK ((1ULL << THREAD_ID_BITS) - 1)

const struct tree_profile tree_profiles[TARGET_PROFILE_NR] = {
	[TARGET_PROFILE_CPU] = { "cpu", "samples", "samples", "cpu", "nanoseconds" },
	[TARGET_PROFILE_OFFCPU] = { "offcpu", "microseconds", "offcpu", NULL, NULL },
	[TARGET_PROFILE_LOCKS] = { "locks", "microseconds", NULL, NULL, NULL },
	[TARGET_PROFILE_JVM_ALLOC] = { "alloc", "bytes", NULL, NULL, NULL },
	[TARGET_PROFILE_JVM_ALLOC_OBJECTS] = { "alloc_objects", "samples", NULL, NULL, NULL },
	[TARGET_PROFILE_JVM_MONITORS] = { "monitors", "microseconds", NULL, NULL, NULL },
};

int tree_profile_by_name(const char *name)
{
	for (int i = 0; i < TARGET_PROFILE_NR; i++)
		if (!strcmp(tree_profiles[i].name, name))
			return i;
	return -1;
}

static int scope_kind(uint32_t scope)
{
	return scope & 1;
}

static int resolve(const struct tree *t, uint64_t ino, struct node_ref *out);

int tree_resolve(const struct tree *t, uint64_t ino, struct node_ref *out)
{
	uint32_t view = node_view(ino);
	int err;

	if (view && !t->pidns)
		return -ENOENT;
	err = resolve(t, node_in_view(ino, 0), out);
	if (err)
		return err;
	out->ino = ino;
	out->view = view;
	return 0;
}

int tree_check_view(const struct tree *t, const struct node_ref *ref, uint32_t view)
{
	pid_t shown;

	if (view == 0)
		return 0;
	if (!ref->pid)
		return 0;
	if (ref->view != view)
		return -ENOENT;
	if (ref->tid)
		return pidns_to_view(t->pidns, view, ref->pid, ref->tid, &shown);
	return pidns_to_view(t->pidns, view, 0, ref->pid, &shown);
}

static int resolve(const struct tree *t, uint64_t ino, struct node_ref *out)
{
	*out = (struct node_ref){ .tree = t, .ino = ino };
	if (ino & THREAD_INO_BIT) {
		uint64_t index = ino & 0xff, tid = (ino >> 8) & ID_MASK;
		uint64_t pid = (ino >> (THREAD_ID_BITS + 8)) & ID_MASK;

		if (!t->a || index >= (uint64_t)fs_thread_nodes_count || !pid || !tid ||
		    ino != node_thread_ino(pid, tid, index))
			return -ENOENT;
		out->node = &fs_thread_nodes[index];
		out->pid = pid;
		out->tid = tid;
	} else if (ino & SCOPE_INO_BIT) {
		uint64_t index = ino & 0xff, scope = (ino >> 8) & SCOPE_MASK;

		if (!scope || index >= (uint64_t)t->nscope ||
		    ino != node_scope_ino(scope, index))
			return -ENOENT;
		out->node = &t->scope_nodes[index];
		out->scope = scope;
	} else if (ino & TARGET_INO_BIT) {
		uint64_t index = ino & 0xff, pid = (ino >> 8) & ID_MASK;
		uint64_t scope = (ino >> TARGET_SCOPE_SHIFT) & SCOPE_MASK;

		if (index >= (uint64_t)fs_target_nodes_count || pid == 0 ||
		    ino != node_target_ino(scope, pid, index))
			return -ENOENT;
		out->node = &fs_target_nodes[index];
		out->pid = pid;
		out->scope = scope;
	} else {
		if (ino == 0 || ino > (uint64_t)t->nroot)
			return -ENOENT;
		out->node = &t->root[ino - 1];
	}
	return 0;
}

bool tree_node_present(const struct tree *t, const struct node *n, const struct node_ref *ref)
{
	if (n->live_only && !t->a)
		return false;
	return !n->present || n->present(t, ref->scope, ref->pid);
}

static bool parse_pid(const char *name, pid_t *pid)
{
	long v = 0;

	if (!*name || *name == '0' || strlen(name) > 9)
		return false;
	for (const char *p = name; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + (*p - '0');
	}
	*pid = v;
	return true;
}

static int node_index_in(const struct node *table, int n, const struct node *node)
{
	return node >= table && node < table + n ? node - table : -1;
}

/* Where a directory's static children are: its table and its index there. */
static const struct node *children_table(const struct tree *t, const struct node_ref *dir,
					 int *count, int *index)
{
	if (dir->tid) {
		*count = fs_thread_nodes_count;
		*index = node_thread_index(dir);
		return fs_thread_nodes;
	}
	if (dir->pid) {
		*count = fs_target_nodes_count;
		*index = node_target_index(dir);
		return fs_target_nodes;
	}
	if (dir->scope) {
		*count = t->nscope;
		*index = node_index_in(t->scope_nodes, t->nscope, dir->node);
		return t->scope_nodes;
	}
	*count = t->nroot;
	*index = node_index_in(t->root, t->nroot, dir->node);
	return t->root;
}

static uint64_t child_ino(const struct node_ref *dir, int i)
{
	if (dir->tid)
		return node_in_view(node_thread_ino(dir->pid, dir->tid, i), dir->view);
	if (dir->pid)
		return node_in_view(node_target_ino(dir->scope, dir->pid, i), dir->view);
	if (dir->scope)
		return node_scope_ino(dir->scope, i);
	return node_ino(i);
}

/* The processes (tgid 0) or threads of tgid as view shows them: ids[i] (host numbers) is
 * shown as (*shown)[i]; those view does not hold are dropped from both. */
static int ids_in_view(const struct tree *t, uint32_t view, pid_t tgid, pid_t *ids, size_t *n,
		       pid_t **shown)
{
	size_t kept = 0;

	*shown = malloc((*n ? *n : 1) * sizeof(**shown));
	if (!*shown)
		return -ENOMEM;
	for (size_t i = 0; i < *n; i++) {
		if (pidns_to_view(t->pidns, view, tgid, ids[i], &(*shown)[kept]))
			continue;
		ids[kept++] = ids[i];
	}
	*n = kept;
	return 0;
}

static int list_host_ids(const struct tree *t, const struct node_ref *dir, pid_t tgid,
			 pid_t **ids, size_t *n)
{
	return tgid ? native_thread_ids(tgid, ids, n)
		    : t->ops->list_targets(t, dir->scope, ids, n);
}

/* *id: the number a reader in dir's view named, made the daemon's. -ENOENT if none. */
static int view_lookup(const struct tree *t, const struct node_ref *dir, pid_t tgid, pid_t *id)
{
	pid_t *ids, *shown = NULL;
	size_t n;
	int err = list_host_ids(t, dir, tgid, &ids, &n);

	if (!err)
		err = ids_in_view(t, dir->view, tgid, ids, &n, &shown);
	if (!err) {
		err = -ENOENT;
		for (size_t i = 0; err && i < n; i++)
			if (shown[i] == *id) {
				*id = ids[i];
				err = 0;
			}
	}
	free(shown);
	free(ids);
	return err;
}

int tree_lookup(const struct tree *t, const struct node_ref *dir, const char *name,
		struct node_ref *out)
{
	const struct node *table;
	struct target_info ti;
	int count, index;
	uint32_t scope;
	pid_t pid;
	int err;

	if (!S_ISDIR(dir->node->mode))
		return -ENOTDIR;
	switch (dir->node->dynamic) {
	case NODE_TARGETS:
		if (!parse_pid(name, &pid))
			return -ENOENT;
		if (dir->view && (err = view_lookup(t, dir, 0, &pid)))
			return err;
		if (pid >= (1 << THREAD_ID_BITS) || t->ops->target_info(t, dir->scope, pid, &ti))
			return -ENOENT;
		return tree_resolve(t, node_in_view(node_target_ino(dir->scope, pid, 0), dir->view),
				    out);
	case NODE_SCOPES:
		if (!t->ops->scope_lookup)
			return -ENOENT;
		err = t->ops->scope_lookup(t, dir->node->arg, name, &scope);
		if (err)
			return err;
		return tree_resolve(t, node_scope_ino(scope, t->scope_dir[scope_kind(scope)]), out);
	case NODE_STATIC:
		break;
	}
	if (t->a && dir->pid && !dir->tid && dir->node->has_threads && parse_pid(name, &pid) &&
	    (!dir->view || !view_lookup(t, dir, dir->pid, &pid)) &&
	    native_thread_exists(dir->pid, pid))
		return tree_resolve(t, node_in_view(node_thread_ino(dir->pid, pid, 0), dir->view),
				    out);
	table = children_table(t, dir, &count, &index);
	for (int i = 1; i < count; i++)
		if (table[i].parent == index && !strcmp(table[i].name, name) &&
		    tree_node_present(t, &table[i], dir))
			return tree_resolve(t, child_ino(dir, i), out);
	return -ENOENT;
}

struct scope_adder {
	const struct tree *t;
	int (*add)(void *ctx, const char *name, uint64_t ino, mode_t mode);
	void *ctx;
};

static int add_scope(void *ctx, uint32_t id, const char *name)
{
	struct scope_adder *sa = ctx;

	if (!id || id > SCOPE_MASK)
		return 0; /* past what an inode number holds: not shown */
	return sa->add(sa->ctx, name, node_scope_ino(id, sa->t->scope_dir[scope_kind(id)]),
		       S_IFDIR);
}

/* Lists the processes (tgid 0) or threads of tgid, each under the number dir's view knows
 * it by. */
static int list_ids(const struct tree *t, pid_t tgid,
		    uint64_t (*ino)(const struct node_ref *, pid_t), const struct node_ref *dir,
		    int (*add)(void *ctx, const char *name, uint64_t ino, mode_t mode), void *ctx)
{
	pid_t *ids, *shown = NULL;
	char name[16];
	size_t n;
	int err = list_host_ids(t, dir, tgid, &ids, &n);

	if (!err)
		err = ids_in_view(t, dir->view, tgid, ids, &n, &shown);
	for (size_t i = 0; !err && i < n; i++) {
		snprintf(name, sizeof(name), "%d", (int)shown[i]);
		err = add(ctx, name, node_in_view(ino(dir, ids[i]), dir->view), S_IFDIR);
	}
	free(shown);
	free(ids);
	return err;
}

static uint64_t target_dir_ino(const struct node_ref *dir, pid_t pid)
{
	return node_target_ino(dir->scope, pid, 0);
}

static uint64_t thread_dir_ino(const struct node_ref *dir, pid_t tid)
{
	return node_thread_ino(dir->pid, tid, 0);
}

int tree_list(const struct tree *t, const struct node_ref *dir,
	      int (*add)(void *ctx, const char *name, uint64_t ino, mode_t mode), void *ctx)
{
	const struct node *table;
	int count, index, err;

	if (!S_ISDIR(dir->node->mode))
		return -ENOTDIR;
	if (dir->node->dynamic == NODE_TARGETS)
		return list_ids(t, 0, target_dir_ino, dir, add, ctx);
	if (dir->node->dynamic == NODE_SCOPES) {
		struct scope_adder sa = { .t = t, .add = add, .ctx = ctx };

		return t->ops->list_scopes ? t->ops->list_scopes(t, dir->node->arg, add_scope, &sa)
					   : 0;
	}
	if (t->a && dir->pid && !dir->tid && dir->node->has_threads) {
		err = list_ids(t, dir->pid, thread_dir_ino, dir, add, ctx);
		if (err)
			return err;
	}
	table = children_table(t, dir, &count, &index);
	for (int i = 1; i < count; i++) {
		if (table[i].parent != index || !tree_node_present(t, &table[i], dir))
			continue;
		err = add(ctx, table[i].name, child_ino(dir, i), table[i].mode);
		if (err)
			return err;
	}
	return 0;
}

/* The directory that lists a scope's or a target's directory. */
static uint64_t dynamic_parent(const struct tree *t, const struct node *table, int n,
			       enum node_dynamic kind, int arg, uint32_t scope)
{
	for (int i = 0; i < n; i++)
		if (table[i].dynamic == kind && (kind != NODE_SCOPES || table[i].arg == arg))
			return scope && table != t->root ? node_scope_ino(scope, i) : node_ino(i);
	return node_ino(0);
}

static uint64_t parent_ino(const struct tree *t, const struct node_ref *dir)
{
	if (dir->tid && node_thread_index(dir) == 0)
		return node_target_ino(dir->scope, dir->pid, dir->node->parent);
	if (dir->tid)
		return node_thread_ino(dir->pid, dir->tid, 0);
	if (dir->pid && node_target_index(dir) == 0)
		return dir->scope ? dynamic_parent(t, t->scope_nodes, t->nscope, NODE_TARGETS, 0,
						   dir->scope)
				  : dynamic_parent(t, t->root, t->nroot, NODE_TARGETS, 0, 0);
	if (dir->pid)
		return node_target_ino(dir->scope, dir->pid, dir->node->parent);
	if (dir->scope && dir->node->parent < 0)
		return dynamic_parent(t, t->root, t->nroot, NODE_SCOPES, scope_kind(dir->scope),
				      0);
	if (dir->scope)
		return node_scope_ino(dir->scope, dir->node->parent);
	return dir->node->parent >= 0 ? node_ino(dir->node->parent) : node_ino(0);
}

uint64_t tree_parent_ino(const struct tree *t, const struct node_ref *dir)
{
	return node_in_view(parent_ino(t, dir), dir->view);
}

int tree_walk(const struct tree *t, const char *path, struct node_ref *out)
{
	char name[256];
	int err = tree_resolve(t, node_ino(0), out);

	while (!err && *path) {
		size_t len = strcspn(path, "/");

		if (len >= sizeof(name))
			return -ENAMETOOLONG;
		if (len && !(len == 1 && path[0] == '.')) {
			struct node_ref dir = *out;

			memcpy(name, path, len);
			name[len] = 0;
			if (!strcmp(name, ".."))
				return -ENOENT;
			err = tree_lookup(t, &dir, name, out);
		}
		path += len + (path[len] == '/');
	}
	return err;
}

int tree_render(const struct tree *t, const struct node_ref *ref, char **data, size_t *len)
{
	FILE *f;
	int err;

	*data = NULL;
	*len = 0;
	if (!ref->node->render)
		return -EACCES;
	f = open_memstream(data, len);
	if (!f)
		return -errno;
	err = ref->node->render(t->a, ref, f);
	if (fclose(f) && !err)
		err = -EIO;
	if (err) {
		free(*data);
		*data = NULL;
	}
	return err;
}

int tree_parse_range(const char *s, struct tree_range *r, int64_t *last_s)
{
	long long a, b;
	int n = 0;

	*r = (struct tree_range){0};
	*last_s = 0;
	if (sscanf(s, "%lld..%lld%n", &a, &b, &n) == 2 && !s[n]) {
		if (a < 0 || b < a)
			return -ERANGE;
		*r = (struct tree_range){ .from = a, .until = b, .set = true };
		return 0;
	}
	if (sscanf(s, "%lld%n", &a, &n) == 1 && !s[n]) {
		if (a < 1 || a > 7 * 86400)
			return -ERANGE;
		*last_s = a;
		return 0;
	}
	return -EINVAL;
}
