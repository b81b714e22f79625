// SPDX-License-Identifier: GPL-2.0
/* Folded stacks: `thread;root;...;leaf COUNT` per line, the input of flamegraph.pl. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "views/views.h"
#include "views/writer.h"

/* Stacks are ordered frame by frame, names compared as strings, a stack before those it is
 * a prefix of: the order of their texts if ';' sorted below every character of a name.
 * Names are ranked once, so comparing two stacks compares integers. */
static int name_cmp(const void *a, const void *b, void *names_arg)
{
	const char *const *names = names_arg;

	return strcmp(names[*(const uint32_t *)a], names[*(const uint32_t *)b]);
}

static int stack_cmp(const void *a, const void *b, void *rank_arg)
{
	const struct profile_stack *x = *(const struct profile_stack *const *)a;
	const struct profile_stack *y = *(const struct profile_stack *const *)b;
	const uint32_t *rank = rank_arg;
	uint32_t i, depth = x->depth < y->depth ? x->depth : y->depth;

	for (i = 0; i < depth; i++)
		if (x->frames[i] != y->frames[i])
			return rank[x->frames[i]] < rank[y->frames[i]] ? -1 : 1;
	return (x->depth > y->depth) - (x->depth < y->depth);
}

int view_folded(const struct profile_snapshot *s, FILE *out)
{
	const struct profile_stack **order = NULL;
	const struct profile_stack *st;
	uint32_t *lens = NULL, *by_name = NULL, *rank = NULL, j;
	struct writer *w = NULL;
	int err = -ENOMEM;
	size_t i;

	if (!s->nstacks)
		return 0;
	order = malloc(s->nstacks * sizeof(*order));
	lens = malloc(s->nnames * sizeof(*lens));
	by_name = malloc(s->nnames * sizeof(*by_name));
	rank = malloc(s->nnames * sizeof(*rank));
	w = writer_new(out);
	if (!order || !lens || !by_name || !rank || !w)
		goto out;
	for (i = 0; i < s->nnames; i++)
		by_name[i] = i;
	qsort_r(by_name, s->nnames, sizeof(*by_name), name_cmp, (void *)s->names);
	for (i = 0; i < s->nnames; i++)
		rank[by_name[i]] = i;
	for (i = 0; i < s->nstacks; i++)
		order[i] = &s->stacks[i];
	qsort_r(order, s->nstacks, sizeof(*order), stack_cmp, rank);
	for (i = 0; i < s->nnames; i++)
		lens[i] = strlen(s->names[i]);

	for (i = 0; i < s->nstacks; i++) {
		st = order[i];
		writer_put(w, s->names[st->frames[0]], lens[st->frames[0]]);
		for (j = 1; j < st->depth; j++) {
			writer_put(w, ";", 1);
			writer_put(w, s->names[st->frames[j]], lens[st->frames[j]]);
		}
		writer_put(w, " ", 1);
		writer_u64(w, st->count);
		writer_put(w, "\n", 1);
	}
	err = writer_close(w);
	w = NULL;
out:
	free(w);
	free(rank);
	free(by_name);
	free(lens);
	free(order);
	return err;
}
