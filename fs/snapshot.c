#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <uthash.h>
#include "fs/snapshot.h"

/* Long enough for stat-then-open in one program (cp, tar, rsync, shutil), short enough that a
 * program that stats without opening does not see stale sizes for long. */
#define STASH_TTL_NS (3LL * 1000000000)

struct snapshot *snapshot_new(char *data, size_t len)
{
	struct snapshot *s = malloc(sizeof(*s));

	if (!s) {
		free(data);
		return NULL;
	}
	s->data = data;
	s->len = len;
	clock_gettime(CLOCK_REALTIME, &s->when);
	atomic_init(&s->refs, 1);
	return s;
}

struct snapshot *snapshot_ref(struct snapshot *s)
{
	atomic_fetch_add(&s->refs, 1);
	return s;
}

void snapshot_unref(struct snapshot *s)
{
	if (s && atomic_fetch_sub(&s->refs, 1) == 1) {
		free(s->data);
		free(s);
	}
}

struct holder_key {
	uint64_t ino;
	pid_t pid;
	uint32_t pad;
};

struct holder {
	struct holder_key key;
	struct snapshot *stash;
	int64_t stash_deadline;   /* CLOCK_MONOTONIC ns */
	struct snapshot *reading; /* of the latest open */
	unsigned opens;
	UT_hash_handle hh;
};

struct snapshot_table {
	pthread_mutex_t lock;
	struct holder *holders;
};

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int snapshot_table_new(struct snapshot_table **out)
{
	struct snapshot_table *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	*out = t;
	return 0;
}

static void holder_free(struct snapshot_table *t, struct holder *h)
{
	HASH_DEL(t->holders, h);
	snapshot_unref(h->stash);
	snapshot_unref(h->reading);
	free(h);
}

void snapshot_table_free(struct snapshot_table *t)
{
	struct holder *h, *tmp;

	if (!t)
		return;
	HASH_ITER(hh, t->holders, h, tmp)
		holder_free(t, h);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static struct holder *find(struct snapshot_table *t, uint64_t ino, pid_t pid, bool create)
{
	struct holder_key key = { .ino = ino, .pid = pid };
	struct holder *h;

	HASH_FIND(hh, t->holders, &key, sizeof(key), h);
	if (h || !create)
		return h;
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->key = key;
	HASH_ADD(hh, t->holders, key, sizeof(h->key), h);
	return h;
}

/* Drops stashes nobody came back for, and holders left with nothing. */
static void sweep(struct snapshot_table *t, int64_t now)
{
	struct holder *h, *tmp;

	HASH_ITER(hh, t->holders, h, tmp) {
		if (h->stash && now > h->stash_deadline) {
			snapshot_unref(h->stash);
			h->stash = NULL;
		}
		if (!h->stash && !h->opens)
			holder_free(t, h);
	}
}

void snapshot_table_stash(struct snapshot_table *t, uint64_t ino, pid_t pid,
			  struct snapshot *s)
{
	int64_t now = mono_ns();
	struct holder *h;

	pthread_mutex_lock(&t->lock);
	sweep(t, now);
	h = find(t, ino, pid, true);
	if (h) {
		snapshot_unref(h->stash);
		h->stash = snapshot_ref(s);
		h->stash_deadline = now + STASH_TTL_NS;
	}
	pthread_mutex_unlock(&t->lock);
}

struct snapshot *snapshot_table_take(struct snapshot_table *t, uint64_t ino, pid_t pid)
{
	struct snapshot *s = NULL;
	struct holder *h;

	pthread_mutex_lock(&t->lock);
	h = find(t, ino, pid, false);
	if (h && h->stash) {
		if (mono_ns() <= h->stash_deadline)
			s = h->stash;
		else
			snapshot_unref(h->stash);
		h->stash = NULL;
	}
	pthread_mutex_unlock(&t->lock);
	return s;
}

void snapshot_table_opened(struct snapshot_table *t, uint64_t ino, pid_t pid,
			   struct snapshot *s)
{
	struct holder *h;

	pthread_mutex_lock(&t->lock);
	h = find(t, ino, pid, true);
	if (h) {
		snapshot_unref(h->reading);
		h->reading = snapshot_ref(s);
		h->opens++;
	}
	pthread_mutex_unlock(&t->lock);
}

void snapshot_table_closed(struct snapshot_table *t, uint64_t ino, pid_t pid)
{
	struct holder *h;

	pthread_mutex_lock(&t->lock);
	h = find(t, ino, pid, false);
	if (h && h->opens && --h->opens == 0) {
		snapshot_unref(h->reading);
		h->reading = NULL;
		if (!h->stash)
			holder_free(t, h);
	}
	pthread_mutex_unlock(&t->lock);
}

struct snapshot *snapshot_table_reading(struct snapshot_table *t, uint64_t ino, pid_t pid)
{
	struct snapshot *s = NULL;
	struct holder *h;

	pthread_mutex_lock(&t->lock);
	h = find(t, ino, pid, false);
	if (h && h->reading)
		s = snapshot_ref(h->reading);
	pthread_mutex_unlock(&t->lock);
	return s;
}
