#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include "fs/render_pool.h"

#define RENDER_QUEUE_MAX 1024

struct job {
	void (*fn)(void *arg);
	void *arg;
	struct job *next;
};

struct render_pool {
	pthread_mutex_t lock;
	pthread_cond_t ready;
	struct job *head, *tail;
	unsigned queued;
	bool stopping;
	unsigned nthreads;
	pthread_t threads[];
};

static void *worker(void *arg)
{
	struct render_pool *p = arg;
	struct job *j;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->head && !p->stopping)
			pthread_cond_wait(&p->ready, &p->lock);
		j = p->head;
		if (!j)
			break; /* stopping, queue empty */
		p->head = j->next;
		if (!p->head)
			p->tail = NULL;
		p->queued--;
		pthread_mutex_unlock(&p->lock);
		j->fn(j->arg);
		free(j);
		pthread_mutex_lock(&p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int render_pool_new(unsigned nthreads, struct render_pool **out)
{
	struct render_pool *p = calloc(1, sizeof(*p) + nthreads * sizeof(pthread_t));
	int err;

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->ready, NULL);
	for (; p->nthreads < nthreads; p->nthreads++) {
		err = pthread_create(&p->threads[p->nthreads], NULL, worker, p);
		if (err) {
			render_pool_free(p);
			return -err;
		}
	}
	*out = p;
	return 0;
}

void render_pool_free(struct render_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	pthread_cond_broadcast(&p->ready);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->ready);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int render_pool_submit(struct render_pool *p, void (*fn)(void *arg), void *arg)
{
	struct job *j = malloc(sizeof(*j));
	int err = 0;

	if (!j)
		return -ENOMEM;
	j->fn = fn;
	j->arg = arg;
	j->next = NULL;
	pthread_mutex_lock(&p->lock);
	if (p->queued >= RENDER_QUEUE_MAX || p->stopping) {
		err = -EAGAIN;
		free(j);
	} else {
		if (p->tail)
			p->tail->next = j;
		else
			p->head = j;
		p->tail = j;
		p->queued++;
		pthread_cond_signal(&p->ready);
	}
	pthread_mutex_unlock(&p->lock);
	return err;
}
