#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "collectors/threads.h"
#include "collectors/workers.h"

static const char *const tokio_names[] = { "tokio-runtime-w", "tokio-rt-worker" };

/* Length of the `name-` part of a `name-N` thread name, 0 if it is not one. */
static size_t group_prefix(const char *comm)
{
	size_t len = strlen(comm), i = len;

	while (i > 0 && isdigit((unsigned char)comm[i - 1]))
		i--;
	if (i == len || i < 2 || comm[i - 1] != '-')
		return 0;
	return i;
}

/* Threads whose name starts with prefix; numbered: and is exactly prefix followed by N. */
static int collect(struct workers *w, const struct thread_info *tasks, size_t n,
		   const char *prefix, size_t plen, bool numbered)
{
	w->tids = malloc((n ? n : 1) * sizeof(*w->tids));
	if (!w->tids)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!strncmp(tasks[i].name, prefix, plen) &&
		    (!numbered || group_prefix(tasks[i].name) == plen))
			w->tids[w->n++] = tasks[i].tid;
	snprintf(w->pattern, sizeof(w->pattern), "%.*s", (int)plen, prefix);
	return 0;
}

int workers_find(pid_t pid, const char *prefix, struct workers *out)
{
	struct thread_list l;
	const struct thread_info *tasks;
	size_t n, best = 0, best_count = 0;
	int err;

	memset(out, 0, sizeof(*out));
	err = threads_read(pid, THREADS_BASIC, &l);
	if (err)
		return err;
	tasks = l.v;
	n = l.n;
	if (prefix[0]) {
		out->found_by = WORKERS_BY_CONFIG;
		err = collect(out, tasks, n, prefix, strlen(prefix), false);
		goto done;
	}
	for (size_t k = 0; k < sizeof(tokio_names) / sizeof(tokio_names[0]); k++) {
		for (size_t i = 0; i < n; i++) {
			if (!strncmp(tasks[i].name, tokio_names[k], strlen(tokio_names[k]))) {
				out->found_by = WORKERS_BY_TOKIO;
				err = collect(out, tasks, n, tokio_names[k], strlen(tokio_names[k]),
					      false);
				goto done;
			}
		}
	}
	/* Largest `name-N` group; ties go to the first seen. Quadratic, but processes with
	 * thousands of threads are rare and this runs once a second. */
	for (size_t i = 0; i < n; i++) {
		size_t plen = group_prefix(tasks[i].name), count = 0;

		if (!plen)
			continue;
		for (size_t j = 0; j < n; j++)
			count += group_prefix(tasks[j].name) == plen &&
				 !strncmp(tasks[j].name, tasks[i].name, plen);
		if (count > best_count) {
			best_count = count;
			best = i;
		}
	}
	if (best_count >= 2) {
		out->found_by = WORKERS_BY_GROUP;
		err = collect(out, tasks, n, tasks[best].name, group_prefix(tasks[best].name),
			      true);
	}
done:
	threads_free(&l);
	if (err)
		workers_fini(out);
	return err;
}

void workers_fini(struct workers *w)
{
	free(w->tids);
	w->tids = NULL;
	w->n = 0;
}

const char *workers_found_by_name(enum workers_found_by by)
{
	switch (by) {
	case WORKERS_BY_CONFIG:
		return "config/workers prefix";
	case WORKERS_BY_TOKIO:
		return "tokio thread name";
	case WORKERS_BY_GROUP:
		return "largest name-N thread group";
	default:
		return "none found";
	}
}
