/* Leader and followers: the first batch to find no group being applied applies every batch
 * queued by then (its own included, up to max); the others wait for the group that holds
 * theirs. */
#include "aggregate/group_commit.h"

void agg_group_init(struct agg_group *g, size_t max, void (*apply)(void *, struct agg_job *),
		    void *ctx)
{
	*g = (struct agg_group){ .max = max, .apply = apply, .ctx = ctx };
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->done, NULL);
	g->tail = &g->queue;
}

void agg_group_fini(struct agg_group *g)
{
	pthread_mutex_destroy(&g->lock);
	pthread_cond_destroy(&g->done);
}

int agg_group_apply(struct agg_group *g, const WireBatch *b, int64_t now,
		    struct agg_apply_result *r)
{
	struct agg_job job = { .b = b, .now = now, .r = r }, *group, *j, **cut;
	size_t n;

	pthread_mutex_lock(&g->lock);
	*g->tail = &job;
	g->tail = &job.next;
	while (!job.done) {
		if (g->leading) {
			pthread_cond_wait(&g->done, &g->lock);
			continue;
		}
		g->leading = true;
		group = g->queue;
		for (cut = &g->queue, n = 0; *cut && n < g->max; cut = &(*cut)->next, n++)
			;
		g->queue = *cut;
		*cut = NULL;
		if (!g->queue)
			g->tail = &g->queue;
		pthread_mutex_unlock(&g->lock);
		g->apply(g->ctx, group);
		pthread_mutex_lock(&g->lock);
		for (j = group; j; j = j->next)
			j->done = true;
		g->leading = false;
		pthread_cond_broadcast(&g->done);
	}
	pthread_mutex_unlock(&g->lock);
	return job.err;
}
