// SPDX-License-Identifier: GPL-2.0
/* Rows in a hash keyed by their identity; strings interned once and never freed before the
 * table, so a snapshot copies rows and shares the strings while it holds a reference. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#include "store/sysstats.h"

struct str {
	UT_hash_handle hh;
	char s[];
};

struct row_key {
	uint32_t kind, a, b, pad;
	uint64_t addr;
	const char *holder; /* interned: equal strings are equal pointers */
	const char *stack;
};

struct row {
	UT_hash_handle hh;
	struct row_key key;
	struct latency lat;
};

struct sys_table {
	atomic_int refs;
	pthread_mutex_t lock;
	struct str *strs;
	struct row *rows;
	size_t nrows;
};

void latency_add(struct latency *into, const struct latency *from)
{
	into->count += from->count;
	into->total_ns += from->total_ns;
	if (from->max_ns > into->max_ns)
		into->max_ns = from->max_ns;
	for (int i = 0; i < LATENCY_HIST; i++)
		into->hist[i] += from->hist[i];
}

struct sys_table *sys_table_new(void)
{
	struct sys_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	atomic_init(&t->refs, 1);
	pthread_mutex_init(&t->lock, NULL);
	return t;
}

struct sys_table *sys_table_ref(struct sys_table *t)
{
	atomic_fetch_add(&t->refs, 1);
	return t;
}

static void free_rows(struct sys_table *t)
{
	struct row *r, *tmp;

	HASH_ITER(hh, t->rows, r, tmp) {
		HASH_DEL(t->rows, r);
		free(r);
	}
	t->nrows = 0;
}

void sys_table_unref(struct sys_table *t)
{
	struct str *s, *tmp;

	if (!t || atomic_fetch_sub(&t->refs, 1) != 1)
		return;
	free_rows(t);
	HASH_ITER(hh, t->strs, s, tmp) {
		HASH_DEL(t->strs, s);
		free(s);
	}
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static const char *intern(struct sys_table *t, const char *s)
{
	struct str *e;
	size_t len;

	if (!s)
		return NULL;
	len = strlen(s);
	HASH_FIND(hh, t->strs, s, len, e);
	if (e)
		return e->s;
	e = malloc(sizeof(*e) + len + 1);
	if (!e)
		return NULL;
	memcpy(e->s, s, len + 1);
	HASH_ADD_KEYPTR(hh, t->strs, e->s, len, e);
	if (!e->hh.tbl) {
		free(e);
		return NULL;
	}
	return e->s;
}

int sys_table_add(struct sys_table *t, const struct sys_row *row, const struct latency *lat)
{
	struct row_key key = { .kind = row->kind, .a = row->a, .b = row->b, .addr = row->addr };
	struct row *r;
	int err = 0;

	pthread_mutex_lock(&t->lock);
	key.holder = intern(t, row->holder);
	key.stack = intern(t, row->stack);
	if ((row->holder && !key.holder) || (row->stack && !key.stack)) {
		err = -ENOMEM;
		goto out;
	}
	HASH_FIND(hh, t->rows, &key, sizeof(key), r);
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r) {
			err = -ENOMEM;
			goto out;
		}
		r->key = key;
		HASH_ADD(hh, t->rows, key, sizeof(r->key), r);
		if (!r->hh.tbl) {
			free(r);
			err = -ENOMEM;
			goto out;
		}
		t->nrows++;
	}
	latency_add(&r->lat, lat);
out:
	pthread_mutex_unlock(&t->lock);
	return err;
}

void sys_table_reset(struct sys_table *t)
{
	pthread_mutex_lock(&t->lock);
	free_rows(t);
	pthread_mutex_unlock(&t->lock);
}

int sys_table_snapshot(struct sys_table *t, struct sys_snapshot **out)
{
	struct sys_snapshot *s = calloc(1, sizeof(*s));
	struct row *r, *tmp;
	size_t i = 0;

	if (!s)
		return -ENOMEM;
	pthread_mutex_lock(&t->lock);
	s->rows = calloc(t->nrows ? t->nrows : 1, sizeof(*s->rows));
	if (!s->rows) {
		pthread_mutex_unlock(&t->lock);
		free(s);
		return -ENOMEM;
	}
	HASH_ITER(hh, t->rows, r, tmp) {
		struct sys_row *o = &s->rows[i++];

		o->kind = r->key.kind;
		o->a = r->key.a;
		o->b = r->key.b;
		o->addr = r->key.addr;
		o->holder = r->key.holder;
		o->stack = r->key.stack;
		o->lat = r->lat;
	}
	s->nrows = i;
	s->owner = sys_table_ref(t);
	pthread_mutex_unlock(&t->lock);
	*out = s;
	return 0;
}

void sys_snapshot_free(struct sys_snapshot *s)
{
	if (!s)
		return;
	sys_table_unref(s->owner);
	free(s->rows);
	free(s);
}
