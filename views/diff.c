// SPDX-License-Identifier: GPL-2.0
/* Differential views: a base snapshot against a newer one, stacks matched by their names. */
#include <errno.h>
#include <stdlib.h>

#include "views/flame.h"
#include "views/writer.h"

/* `stack BASE NOW` for every stack with samples of its own in either, in folded's order:
 * the tree's preorder, children by name. */
int view_diff_folded(const struct profile_snapshot *base, const struct profile_snapshot *now,
		     FILE *out)
{
	const struct profile_snapshot *snaps[2] = { base, now };
	uint64_t (*self)[2] = NULL;
	uint32_t *path = NULL, d;
	struct writer *w = NULL;
	struct tree t;
	size_t i;
	int err;

	err = tree_build(snaps, 2, &t);
	if (err)
		return err;
	err = -ENOMEM;
	self = malloc(t.nnodes * sizeof(*self));
	path = malloc((t.max_depth + 1) * sizeof(*path));
	w = writer_new(out);
	if (!self || !path || !w)
		goto out;
	for (i = 0; i < t.nnodes; i++) {
		const struct tree_node *n = &t.nodes[i];

		self[i][0] = n->value[0];
		self[i][1] = n->value[1];
		path[n->depth] = i;
		if (n->depth) {
			self[path[n->depth - 1]][0] -= n->value[0];
			self[path[n->depth - 1]][1] -= n->value[1];
		}
	}
	for (i = 1; i < t.nnodes; i++) {
		const struct tree_node *n = &t.nodes[i];

		path[n->depth] = i;
		if (!self[i][0] && !self[i][1])
			continue;
		for (d = 1; d <= n->depth; d++) {
			if (d > 1)
				writer_put(w, ";", 1);
			writer_str(w, tree_node_name(&t, &t.nodes[path[d]]));
		}
		writer_put(w, " ", 1);
		writer_u64(w, self[i][0]);
		writer_put(w, " ", 1);
		writer_u64(w, self[i][1]);
		writer_put(w, "\n", 1);
	}
	err = writer_close(w);
	w = NULL;
out:
	if (w)
		writer_close(w);
	free(path);
	free(self);
	tree_free(&t);
	return err;
}

int view_diff_svg(const struct profile_snapshot *base, const struct profile_snapshot *now,
		  const struct view_meta *m, FILE *out)
{
	const struct profile_snapshot *snaps[2] = { base, now };
	struct flame f = { .m = m, .unit = now->unit, .since = now->since, .slot = 1,
			   .diff = true };

	return flame_draw(snaps, 2, &f, out);
}
