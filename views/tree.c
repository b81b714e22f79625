// SPDX-License-Identifier: GPL-2.0
/* Builds the call tree by sorting stacks frame by frame (names ranked once, as strings, over
 * every snapshot) and walking them in that order: a stack shares with the one before it the
 * nodes of their common prefix and opens new nodes for the rest, so the tree comes out in
 * preorder with children in name order, in one pass. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "views/tree.h"

struct name_ref {
	const char *name;
	const struct frame_info *info;
	uint32_t snap, id;
};

struct entry {
	const uint32_t *ranks;
	uint32_t depth, snap;
	uint64_t count;
};

static int name_ref_cmp(const void *a, const void *b)
{
	const struct name_ref *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return (x->snap > y->snap) - (x->snap < y->snap);
}

static int entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	uint32_t i, depth = x->depth < y->depth ? x->depth : y->depth;

	for (i = 0; i < depth; i++)
		if (x->ranks[i] != y->ranks[i])
			return x->ranks[i] < y->ranks[i] ? -1 : 1;
	return (x->depth > y->depth) - (x->depth < y->depth);
}

/* Ranks every name of every snapshot: rank[snap][id] indexes t->names. */
static int rank_names(const struct profile_snapshot *const *snaps, int nsnaps, struct tree *t,
		      uint32_t **rank)
{
	struct name_ref *refs;
	size_t i, n = 0;
	int k;

	for (k = 0; k < nsnaps; k++)
		n += snaps[k]->nnames;
	refs = malloc((n ? n : 1) * sizeof(*refs));
	t->names = malloc((n ? n : 1) * sizeof(*t->names));
	if (!refs || !t->names) {
		free(refs);
		return -ENOMEM;
	}
	n = 0;
	for (k = 0; k < nsnaps; k++)
		for (i = 0; i < snaps[k]->nnames; i++)
			refs[n++] = (struct name_ref){ snaps[k]->names[i],
						       snaps[k]->infos ? snaps[k]->infos[i] : NULL,
						       k, i };
	qsort(refs, n, sizeof(*refs), name_ref_cmp);
	for (i = 0; i < n; i++) {
		if (!t->nnames || strcmp(t->names[t->nnames - 1].name, refs[i].name))
			t->names[t->nnames++] = (struct tree_name){ refs[i].name, refs[i].info };
		else if (!t->names[t->nnames - 1].info)
			t->names[t->nnames - 1].info = refs[i].info;
		rank[refs[i].snap][refs[i].id] = t->nnames - 1;
	}
	free(refs);
	return 0;
}

static int grow(struct tree *t, size_t *cap)
{
	struct tree_node *nodes;

	if (t->nnodes < *cap)
		return 0;
	*cap = *cap ? *cap * 2 : 1024;
	nodes = realloc(t->nodes, *cap * sizeof(*nodes));
	if (!nodes)
		return -ENOMEM;
	t->nodes = nodes;
	return 0;
}

/* Walks the sorted entries; open[d] is the node at depth d on the current path. */
static int walk(struct tree *t, const struct entry *e, size_t n, uint32_t max_depth)
{
	uint32_t *open = malloc((max_depth + 1) * sizeof(*open));
	uint32_t d, common, nopen = 1;
	size_t i, cap = 0;
	int err = -ENOMEM;

	if (!open || grow(t, &cap))
		goto out;
	t->nodes[0] = (struct tree_node){ .name = TREE_ROOT_NAME };
	t->nnodes = 1;
	open[0] = 0;
	for (i = 0; i < n; i++) {
		common = 0;
		while (common < e[i].depth && common + 1 < nopen &&
		       t->nodes[open[common + 1]].name == e[i].ranks[common])
			common++;
		for (d = common + 1; d < nopen; d++)
			t->nodes[open[d]].end = t->nnodes;
		nopen = common + 1;
		for (d = common; d < e[i].depth; d++) {
			if (grow(t, &cap))
				goto out;
			t->nodes[t->nnodes] = (struct tree_node){ .name = e[i].ranks[d], .depth = d + 1 };
			open[nopen++] = t->nnodes++;
		}
		for (d = 0; d < nopen; d++)
			t->nodes[open[d]].value[e[i].snap] += e[i].count;
	}
	for (d = 0; d < nopen; d++)
		t->nodes[open[d]].end = t->nnodes;
	t->max_depth = max_depth;
	err = 0;
out:
	free(open);
	return err;
}

int tree_build(const struct profile_snapshot *const *snaps, int nsnaps, struct tree *t)
{
	uint32_t *rank[2] = { NULL, NULL }, *ranks = NULL, *r, max_depth = 0, j;
	struct entry *entries = NULL;
	size_t i, n = 0, nframes = 0;
	int k, err = -ENOMEM;

	memset(t, 0, sizeof(*t));
	for (k = 0; k < nsnaps; k++) {
		rank[k] = malloc((snaps[k]->nnames ? snaps[k]->nnames : 1) * sizeof(uint32_t));
		if (!rank[k])
			goto out;
		n += snaps[k]->nstacks;
		for (i = 0; i < snaps[k]->nstacks; i++)
			nframes += snaps[k]->stacks[i].depth;
	}
	if (rank_names(snaps, nsnaps, t, rank))
		goto out;
	entries = malloc((n ? n : 1) * sizeof(*entries));
	ranks = malloc((nframes ? nframes : 1) * sizeof(*ranks));
	if (!entries || !ranks)
		goto out;
	n = 0;
	r = ranks;
	for (k = 0; k < nsnaps; k++) {
		for (i = 0; i < snaps[k]->nstacks; i++) {
			const struct profile_stack *st = &snaps[k]->stacks[i];

			entries[n++] = (struct entry){ r, st->depth, k, st->count };
			for (j = 0; j < st->depth; j++)
				*r++ = rank[k][st->frames[j]];
			if (st->depth > max_depth)
				max_depth = st->depth;
		}
	}
	qsort(entries, n, sizeof(*entries), entry_cmp);
	err = walk(t, entries, n, max_depth);
out:
	if (err)
		tree_free(t);
	free(ranks);
	free(entries);
	free(rank[0]);
	free(rank[1]);
	return err;
}

void tree_free(struct tree *t)
{
	free(t->names);
	free(t->nodes);
	memset(t, 0, sizeof(*t));
}
