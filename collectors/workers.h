/* Which threads of a process are runtime worker threads (Tokio's, or any pool's): by a
 * configured thread-name prefix, else Tokio's default names, else the largest group of
 * threads named `name-N` (the common way pools number their threads). */
#ifndef APERTURE_COLLECTORS_WORKERS_H
#define APERTURE_COLLECTORS_WORKERS_H

#include <stddef.h>
#include <sys/types.h>

enum workers_found_by {
	WORKERS_NONE,
	WORKERS_BY_CONFIG,   /* config/workers prefix */
	WORKERS_BY_TOKIO,    /* tokio-runtime-w / tokio-rt-worker */
	WORKERS_BY_GROUP,    /* largest name-N group */
};

struct workers {
	enum workers_found_by found_by;
	char pattern[32];    /* the prefix matched, or the group's `name-` */
	pid_t *tids;         /* malloc'd */
	size_t n;
};

/* Finds pid's workers now, from /proc/<pid>/task/<tid>/comm. prefix "" = discover.
 * 0 (maybe with none found), -ESRCH if the process is gone, -ENOMEM. */
int workers_find(pid_t pid, const char *prefix, struct workers *out);
void workers_fini(struct workers *w);
const char *workers_found_by_name(enum workers_found_by by);

#endif
