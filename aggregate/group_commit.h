/* Group commit for a store's apply: batches arriving together are applied by one thread as a
 * group, so a backend pays its commit (an fsync, an INSERT per table) once per group. */
#ifndef APERTURE_AGGREGATE_GROUP_COMMIT_H
#define APERTURE_AGGREGATE_GROUP_COMMIT_H

#include <pthread.h>
#include <stdbool.h>
#include "aggregate/store.h"

/* A batch waiting for the group it is applied with. */
struct agg_job {
	const WireBatch *b;
	int64_t now;
	struct agg_apply_result *r;
	int err;
	bool done;
	struct agg_job *next;
};

struct agg_group {
	pthread_mutex_t lock;
	pthread_cond_t done;
	struct agg_job *queue, **tail;
	bool leading;            /* a thread is applying a group */
	size_t max;              /* batches in one group at most */
	/* Applies every job of the list (each err and r set). */
	void (*apply)(void *ctx, struct agg_job *group);
	void *ctx;
};

void agg_group_init(struct agg_group *g, size_t max, void (*apply)(void *, struct agg_job *),
		    void *ctx);
void agg_group_fini(struct agg_group *g);
/* Queues b and returns when the group holding it was applied: its job's err. */
int agg_group_apply(struct agg_group *g, const WireBatch *b, int64_t now,
		    struct agg_apply_result *r);

#endif
