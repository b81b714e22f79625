/* fs/tree.c's resolution with a fake source: inode numbers round-trip, lookups, listings and
 * parents agree with each other, and the daemon's numbers (scope 0) are what they were. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "fs/tree.h"

/* Scopes: node "a" is 2 (id 1, kind 0), service "s" is 3 (id 1, kind 1). Targets: 7 and 9
 * under node a. */
static int list_targets(const struct tree *t, uint32_t scope, pid_t **pids, size_t *n)
{
	*pids = malloc(2 * sizeof(**pids));
	(*pids)[0] = 7;
	(*pids)[1] = 9;
	*n = scope == 2 ? 2 : 0;
	return 0;
}

static int target_info(const struct tree *t, uint32_t scope, pid_t pid, struct target_info *out)
{
	*out = (struct target_info){0};
	return scope == 2 && (pid == 7 || pid == 9) ? 0 : -ENOENT;
}

static bool is_jvm(const struct tree *t, uint32_t scope, pid_t pid)
{
	return pid == 9;
}

static int list_scopes(const struct tree *t, int kind,
		       int (*add)(void *ctx, uint32_t id, const char *name), void *ctx)
{
	return kind == 0 ? add(ctx, 2, "a") : add(ctx, 3, "s");
}

static int scope_lookup(const struct tree *t, int kind, const char *name, uint32_t *id)
{
	if (kind == 0 && !strcmp(name, "a"))
		*id = 2;
	else if (kind == 1 && !strcmp(name, "s"))
		*id = 3;
	else
		return -ENOENT;
	return 0;
}

static int render_name(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return fprintf(out, "%s %u %d", ref->node->name, ref->scope, ref->pid) < 0 ? -EIO : 0;
}

static const struct tree_source_ops ops = {
	.list_targets = list_targets,
	.target_info = target_info,
	.is_jvm = is_jvm,
	.list_scopes = list_scopes,
	.scope_lookup = scope_lookup,
};

static const struct node root[] = {
	DIR_NODE("/", 0555, -1),
	FILE_NODE("status", 0444, 0, render_name, NULL),
	{ .name = "nodes", .mode = S_IFDIR | 0555, .parent = 0, .dynamic = NODE_SCOPES, .arg = 0 },
	{ .name = "services", .mode = S_IFDIR | 0555, .parent = 0, .dynamic = NODE_SCOPES,
	  .arg = 1 },
};

static const struct node scoped[] = {
	DIR_NODE("", 0555, -1),
	{ .name = "targets", .mode = S_IFDIR | 0555, .parent = 0, .dynamic = NODE_TARGETS },
	DIR_NODE("", 0555, -1),
	FILE_NODE("cpu.folded", 0444, 2, render_name, NULL),
};

static const struct tree tree = { .ops = &ops, .root = root, .nroot = 4, .scope_nodes = scoped,
				  .nscope = 4, .scope_dir = { 0, 2 } };

static void test_walk_render_and_back_up(void **state)
{
	struct node_ref ref, again;
	char *data;
	size_t len;

	assert_int_equal(tree_walk(&tree, "/services/s/cpu.folded", &ref), 0);
	assert_int_equal(tree_render(&tree, &ref, &data, &len), 0);
	assert_string_equal(data, "cpu.folded 3 0");
	free(data);
	assert_int_equal(tree_resolve(&tree, ref.ino, &again), 0);
	assert_ptr_equal(again.node, ref.node);
	assert_int_equal(again.scope, 3);

	assert_int_equal(tree_walk(&tree, "/nodes/a/targets/9/jvm", &ref), 0);
	assert_int_equal(ref.scope, 2);
	assert_int_equal(ref.pid, 9);
	/* .. of jvm/ is the target, of the target targets/, then a/, then nodes/, then / */
	assert_int_equal(tree_resolve(&tree, tree_parent_ino(&tree, &ref), &ref), 0);
	assert_int_equal(ref.pid, 9);
	assert_string_equal(ref.node->name, "");
	assert_int_equal(tree_resolve(&tree, tree_parent_ino(&tree, &ref), &ref), 0);
	assert_string_equal(ref.node->name, "targets");
	assert_int_equal(tree_resolve(&tree, tree_parent_ino(&tree, &ref), &ref), 0);
	assert_int_equal(ref.scope, 2);
	assert_int_equal(tree_resolve(&tree, tree_parent_ino(&tree, &ref), &ref), 0);
	assert_string_equal(ref.node->name, "nodes");
	assert_int_equal(tree_parent_ino(&tree, &ref), node_ino(0));

	assert_int_equal(tree_walk(&tree, "/nodes/a/targets/7/jvm", &ref), -ENOENT); /* no JVM */
	assert_int_equal(tree_walk(&tree, "/nodes/b", &ref), -ENOENT);
	assert_int_equal(tree_walk(&tree, "/nodes/a/targets/8", &ref), -ENOENT);
	assert_int_equal(tree_walk(&tree, "/nodes/a/targets/7/enable", &ref), -ENOENT); /* live */
	assert_int_equal(tree_walk(&tree, "/services/s/../..", &ref), -ENOENT);
	assert_int_equal(tree_walk(&tree, "/status/x", &ref), -ENOTDIR);
}

static int count(void *ctx, const char *name, uint64_t ino, mode_t mode)
{
	struct node_ref ref;

	assert_int_equal(tree_resolve(&tree, ino, &ref), 0);
	++*(int *)ctx;
	return 0;
}

static void test_listings_resolve(void **state)
{
	struct node_ref ref;
	int n = 0;

	assert_int_equal(tree_walk(&tree, "/nodes/a/targets", &ref), 0);
	assert_int_equal(tree_list(&tree, &ref, count, &n), 0);
	assert_int_equal(n, 2);
	n = 0;
	assert_int_equal(tree_walk(&tree, "/nodes", &ref), 0);
	assert_int_equal(tree_list(&tree, &ref, count, &n), 0);
	assert_int_equal(n, 1);
	n = 0;
	assert_int_equal(tree_walk(&tree, "/nodes/a/targets/9", &ref), 0);
	assert_int_equal(tree_list(&tree, &ref, count, &n), 0);
	assert_true(n > 10); /* every target file but the live daemon's controls */
}

/* The daemon's numbers: scope 0 leaves them as they were before scopes. */
static void test_daemon_inode_numbers_unchanged(void **state)
{
	assert_int_equal(node_target_ino(0, 1234, 5), (1ULL << 40) | 1234ULL << 8 | 5);
	assert_int_equal(node_thread_ino(1234, 1240, 2),
			 (1ULL << 62) | 1234ULL << 30 | 1240ULL << 8 | 2);
	assert_int_not_equal(node_target_ino(2, 1234, 5), node_target_ino(0, 1234, 5));
	assert_int_not_equal(node_scope_ino(2, 0), node_target_ino(2, 0, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_walk_render_and_back_up),
		cmocka_unit_test(test_listings_resolve),
		cmocka_unit_test(test_daemon_inode_numbers_unchanged),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
