#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include "fs/handles.h"

struct handle_table {
	pthread_mutex_t lock;
	struct handle *by_id;
	uint64_t next_id; /* ids are never reused, so a stale fh finds nothing */
};

int handle_table_new(struct handle_table **out)
{
	struct handle_table *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	t->next_id = 1;
	*out = t;
	return 0;
}

void handle_table_free(struct handle_table *t)
{
	struct handle *h, *tmp;

	if (!t)
		return;
	HASH_ITER(hh, t->by_id, h, tmp) {
		HASH_DEL(t->by_id, h);
		handle_put(h);
	}
	pthread_mutex_destroy(&t->lock);
	free(t);
}

uint64_t handle_add(struct handle_table *t, struct handle *h, void (*destroy)(struct handle *))
{
	atomic_init(&h->refs, 1);
	h->destroy = destroy;
	pthread_mutex_lock(&t->lock);
	h->id = t->next_id++;
	HASH_ADD(hh, t->by_id, id, sizeof(h->id), h);
	pthread_mutex_unlock(&t->lock);
	return h->id;
}

struct handle *handle_get(struct handle_table *t, uint64_t id)
{
	struct handle *h;

	pthread_mutex_lock(&t->lock);
	HASH_FIND(hh, t->by_id, &id, sizeof(id), h);
	if (h)
		atomic_fetch_add(&h->refs, 1);
	pthread_mutex_unlock(&t->lock);
	return h;
}

void handle_put(struct handle *h)
{
	if (h && atomic_fetch_sub(&h->refs, 1) == 1)
		h->destroy(h);
}

void handle_remove(struct handle_table *t, uint64_t id)
{
	struct handle *h;

	pthread_mutex_lock(&t->lock);
	HASH_FIND(hh, t->by_id, &id, sizeof(id), h);
	if (h)
		HASH_DEL(t->by_id, h);
	pthread_mutex_unlock(&t->lock);
	handle_put(h);
}
