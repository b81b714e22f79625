#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "store/blocking.h"

struct blocking_log {
	atomic_int refs;
	pthread_mutex_t lock;
	struct blocking_event ring[BLOCKING_RING];
	size_t next, n;
	uint64_t total;
};

struct blocking_log *blocking_log_new(void)
{
	struct blocking_log *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	atomic_init(&l->refs, 1);
	pthread_mutex_init(&l->lock, NULL);
	return l;
}

struct blocking_log *blocking_log_ref(struct blocking_log *l)
{
	atomic_fetch_add(&l->refs, 1);
	return l;
}

static void clear_locked(struct blocking_log *l)
{
	for (size_t i = 0; i < BLOCKING_RING; i++) {
		free(l->ring[i].stack);
		l->ring[i].stack = NULL;
	}
	l->next = l->n = 0;
	l->total = 0;
}

void blocking_log_unref(struct blocking_log *l)
{
	if (!l || atomic_fetch_sub(&l->refs, 1) != 1)
		return;
	clear_locked(l);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

int blocking_log_add(struct blocking_log *l, const struct blocking_event *ev)
{
	char *stack = strdup(ev->stack ? ev->stack : "");
	struct blocking_event *slot;

	if (!stack)
		return -ENOMEM;
	pthread_mutex_lock(&l->lock);
	slot = &l->ring[l->next];
	free(slot->stack);
	*slot = *ev;
	slot->stack = stack;
	l->next = (l->next + 1) % BLOCKING_RING;
	if (l->n < BLOCKING_RING)
		l->n++;
	l->total++;
	pthread_mutex_unlock(&l->lock);
	return 0;
}

void blocking_log_reset(struct blocking_log *l)
{
	pthread_mutex_lock(&l->lock);
	clear_locked(l);
	pthread_mutex_unlock(&l->lock);
}

void blocking_snapshot_free(struct blocking_snapshot *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->events[i].stack);
	free(s->events);
	free(s);
}

int blocking_log_snapshot(struct blocking_log *l, struct blocking_snapshot **out)
{
	struct blocking_snapshot *s = calloc(1, sizeof(*s));
	int err = 0;

	if (!s)
		return -ENOMEM;
	pthread_mutex_lock(&l->lock);
	s->events = calloc(l->n ? l->n : 1, sizeof(*s->events));
	if (!s->events)
		err = -ENOMEM;
	for (size_t i = 0; !err && i < l->n; i++) {
		const struct blocking_event *ev =
			&l->ring[(l->next + BLOCKING_RING - l->n + i) % BLOCKING_RING];

		s->events[i] = *ev;
		s->events[i].stack = strdup(ev->stack);
		if (!s->events[i].stack)
			err = -ENOMEM;
		s->n = i + 1;
	}
	s->total = l->total;
	pthread_mutex_unlock(&l->lock);
	if (err) {
		blocking_snapshot_free(s);
		return err;
	}
	*out = s;
	return 0;
}
