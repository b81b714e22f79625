// SPDX-License-Identifier: GPL-2.0
/* Top functions, like `perf report --children`. One row per function, the name last so that
 * names with spaces still leave fixed fields for awk and sort:
 *
 *   # 2473 samples since 2026-11-21T14:03:05Z
 *   # self%  total%       self      total  function
 *     70.12   70.12       1734       1734  b
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "views/views.h"

struct top_row {
	uint64_t self;
	uint64_t total;
	size_t seen; /* 1 + index of the last stack counted in total, to count a stack once */
	uint32_t id;
};

static int row_cmp(const void *a, const void *b, void *names_arg)
{
	const struct top_row *x = a, *y = b;
	const char *const *names = names_arg;

	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return strcmp(names[x->id], names[y->id]);
}

/* Fills rows, indexed by frame id, and packs the functions seen to the front; returns how
 * many there are. */
static size_t count_functions(const struct profile_snapshot *s, struct top_row *rows)
{
	const struct profile_stack *st;
	struct top_row *r;
	size_t i, n = 0;
	uint32_t j;

	for (i = 0; i < s->nstacks; i++) {
		st = &s->stacks[i];
		/* frames[0] is the thread's name, not a function */
		for (j = 1; j < st->depth; j++) {
			r = &rows[st->frames[j]];
			if (r->seen == i + 1)
				continue;
			r->seen = i + 1;
			r->total += st->count;
		}
		if (st->depth > 1)
			rows[st->frames[st->depth - 1]].self += st->count;
	}
	for (i = 0; i < s->nnames; i++) {
		if (!rows[i].total)
			continue;
		rows[n] = rows[i];
		rows[n++].id = i;
	}
	return n;
}

static double share(uint64_t part, uint64_t total)
{
	return 100.0 * (double)part / (double)total;
}

int view_top(const struct profile_snapshot *s, FILE *out)
{
	struct top_row *rows = NULL;
	char since[32];
	struct tm tm;
	size_t i, n = 0;

	/* The contract: a file with nothing to report is empty. */
	if (!s->total)
		return 0;
	if (!gmtime_r(&(time_t){ s->since }, &tm) ||
	    !strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", &tm))
		return -EINVAL;
	if (s->nnames) {
		rows = calloc(s->nnames, sizeof(*rows));
		if (!rows)
			return -ENOMEM;
		n = count_functions(s, rows);
		qsort_r(rows, n, sizeof(*rows), row_cmp, (void *)s->names);
	}

	fprintf(out, "# %" PRIu64 " %s since %s\n", s->total, s->unit, since);
	fprintf(out, "#%6s %7s %10s %10s  %s\n", "self%", "total%", "self", "total", "function");
	for (i = 0; i < n; i++)
		fprintf(out, "%7.2f %7.2f %10" PRIu64 " %10" PRIu64 "  %s\n",
			share(rows[i].self, s->total), share(rows[i].total, s->total), rows[i].self,
			rows[i].total, s->names[rows[i].id]);
	free(rows);
	return ferror(out) ? -EIO : 0;
}
