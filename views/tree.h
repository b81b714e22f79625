/* The call tree the graphical and structured views draw: stacks merged by frame name from the
 * root down, children in name order (as flamegraph.pl sorts them), nodes in preorder. Built
 * from one snapshot, or from two for a differential view, names matched as strings. Internal
 * to views/. */
#ifndef APERTURE_VIEWS_TREE_H
#define APERTURE_VIEWS_TREE_H

#include <stdint.h>
#include "store/profile.h"

#define TREE_ROOT_NAME UINT32_MAX

struct tree_name {
	const char *name;
	const struct frame_info *info; /* of the first snapshot that has one, or NULL */
};

struct tree_node {
	uint32_t name;     /* index into tree.names; TREE_ROOT_NAME for the root */
	uint32_t depth;    /* 0 for the root, 1 for thread names */
	uint32_t end;      /* index after its last descendant: children follow it in preorder */
	uint64_t value[2]; /* samples at or under it, in snapshot 0 and 1 */
};

struct tree {
	struct tree_name *names; /* sorted by strcmp, unique */
	size_t nnames;
	struct tree_node *nodes; /* nodes[0] is the root */
	size_t nnodes;
	uint32_t max_depth;
};

/* nsnaps is 1 or 2. Returns 0 or -ENOMEM; on error *t is empty. */
int tree_build(const struct profile_snapshot *const *snaps, int nsnaps, struct tree *t);
void tree_free(struct tree *t);

/* The name to show for node n: "all" for the root. */
static inline const char *tree_node_name(const struct tree *t, const struct tree_node *n)
{
	return n->name == TREE_ROOT_NAME ? "all" : t->names[n->name].name;
}

#endif
