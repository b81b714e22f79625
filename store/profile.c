// SPDX-License-Identifier: GPL-2.0
/* The profile store.
 *
 * Frame names and stacks are interned into entries that are neither moved nor freed before
 * the profile is, whatever the writer does later. A snapshot can therefore hand out pointers
 * into them: under the lock it copies only the counts and the id -> name pointer array, and
 * it keeps the profile alive with a reference.
 *
 * Second s of the history lives in ring[s % PROFILE_HISTORY_S]. A slot is emptied when the
 * newest second moves past it, so a non-empty slot always holds a second of the window
 * (newest - PROFILE_HISTORY_S, newest] and late data finds its second's slot, or none. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Out of memory must be -ENOMEM, not uthash's default exit(): a failed add leaves the item out
 * of the table and sets its hh.tbl to NULL. */
#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#include "store/profile.h"

#define NO_SEC INT64_MIN

struct frame {
	UT_hash_handle hh;
	uint32_t id;
	struct frame_info *info; /* NULL until known; one block with its strings */
	char name[]; /* sanitized; the key */
};

struct stack {
	UT_hash_handle hh;
	uint32_t id;
	uint32_t depth;
	/* Where this stack was last appended in a bucket: repeated adds within one second then
	 * merge into one entry instead of growing the bucket. Checked before use, never trusted. */
	uint32_t hint;
	uint32_t frames[]; /* the key */
};

struct bucket_entry {
	uint32_t stack;
	uint64_t count;
};

struct bucket {
	int64_t sec; /* meaningful only while n > 0 */
	struct bucket_entry *entries;
	uint32_t n, cap;
};

struct profile {
	atomic_int refs;
	pthread_mutex_t lock;
	char *unit;
	int64_t since; /* second made or last reset */
	uint64_t total;

	struct frame *frame_index;
	const char **names; /* frame id -> name, inside its struct frame */
	const struct frame_info **infos; /* frame id -> info, inside its struct frame */
	size_t nnames, names_cap;

	struct stack *stack_index;
	struct stack **stacks; /* stack id -> stack */
	uint64_t *totals;      /* stack id -> count since made or reset */
	size_t nstacks, stacks_cap;
	size_t interned_bytes; /* of the frames and stacks themselves */

	int64_t newest; /* newest second added since made or reset, or NO_SEC */
	struct bucket ring[PROFILE_HISTORY_S];
};

static int64_t now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec;
}

static size_t next_cap(size_t cap)
{
	return cap ? cap * 2 : 64;
}

struct profile *profile_new(const char *unit)
{
	struct profile *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->unit = strdup(unit);
	if (!p->unit) {
		free(p);
		return NULL;
	}
	atomic_init(&p->refs, 1);
	pthread_mutex_init(&p->lock, NULL);
	p->since = now_sec();
	p->newest = NO_SEC;
	return p;
}

struct profile *profile_ref(struct profile *p)
{
	atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
	return p;
}

static void profile_free(struct profile *p)
{
	struct frame *f, *ftmp;
	struct stack *st, *sttmp;
	size_t i;

	HASH_ITER(hh, p->frame_index, f, ftmp) {
		HASH_DEL(p->frame_index, f);
		free(f->info);
		free(f);
	}
	HASH_ITER(hh, p->stack_index, st, sttmp) {
		HASH_DEL(p->stack_index, st);
		free(st);
	}
	for (i = 0; i < PROFILE_HISTORY_S; i++)
		free(p->ring[i].entries);
	free(p->names);
	free(p->infos);
	free(p->stacks);
	free(p->totals);
	free(p->unit);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

void profile_unref(struct profile *p)
{
	if (p && atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1)
		profile_free(p);
}

static int is_unsafe(unsigned char c)
{
	return c == ';' || c < 0x20 || c == 0x7f;
}

static int frame_insert(struct profile *p, const char *name, size_t len, struct frame **out)
{
	struct frame *f;

	if (p->nnames == UINT32_MAX)
		return -ENOMEM;
	if (p->nnames == p->names_cap) {
		size_t cap = next_cap(p->names_cap);
		const char **names = reallocarray(p->names, cap, sizeof(*names));
		const struct frame_info **infos;

		if (!names)
			return -ENOMEM;
		p->names = names;
		infos = reallocarray(p->infos, cap, sizeof(*infos));
		if (!infos)
			return -ENOMEM;
		p->infos = infos;
		p->names_cap = cap;
	}
	f = malloc(sizeof(*f) + len + 1);
	if (!f)
		return -ENOMEM;
	f->id = p->nnames;
	f->info = NULL;
	memcpy(f->name, name, len + 1);
	HASH_ADD_KEYPTR(hh, p->frame_index, f->name, len, f);
	if (!f->hh.tbl) {
		free(f);
		return -ENOMEM;
	}
	p->infos[p->nnames] = NULL;
	p->names[p->nnames++] = f->name;
	p->interned_bytes += sizeof(*f) + len + 1;
	*out = f;
	return 0;
}

static size_t opt_len(const char *s)
{
	return s ? strlen(s) + 1 : 0;
}

static char *opt_copy(char **dst, const char *s)
{
	char *at = *dst;

	if (!s)
		return NULL;
	*dst = stpcpy(at, s) + 1;
	return at;
}

static struct frame_info *frame_info_dup(const struct frame_info *info)
{
	size_t len = opt_len(info->file) + opt_len(info->module) + opt_len(info->build_id);
	struct frame_info *copy = malloc(sizeof(*copy) + len);
	char *strings = (char *)(copy + 1);

	if (!copy)
		return NULL;
	copy->line = info->line;
	copy->file = opt_copy(&strings, info->file);
	copy->module = opt_copy(&strings, info->module);
	copy->build_id = opt_copy(&strings, info->build_id);
	return copy;
}

int profile_frame_id(struct profile *p, const char *name, uint32_t *id)
{
	return profile_frame_id_info(p, name, NULL, id);
}

int profile_frame_id_info(struct profile *p, const char *name, const struct frame_info *info,
			  uint32_t *id)
{
	size_t len = strlen(name), i;
	struct frame *f;
	char *clean = NULL;
	int err = 0;

	/* uthash key lengths are unsigned ints */
	if (len > UINT_MAX)
		return -ENOMEM;
	/* Most names are clean: look them up without copying. */
	for (i = 0; i < len && !is_unsafe(name[i]); i++)
		;
	if (i < len) {
		clean = strdup(name);
		if (!clean)
			return -ENOMEM;
		for (; i < len; i++) {
			if (clean[i] == ';')
				clean[i] = ':';
			else if (is_unsafe(clean[i]))
				clean[i] = ' ';
		}
		name = clean;
	}

	pthread_mutex_lock(&p->lock);
	HASH_FIND(hh, p->frame_index, name, len, f);
	if (!f)
		err = frame_insert(p, name, len, &f);
	if (!err && info && !f->info) {
		/* Without its info the frame is still usable: only an error if it can't be kept. */
		f->info = frame_info_dup(info);
		if (f->info) {
			p->infos[f->id] = f->info;
			p->interned_bytes += sizeof(*f->info) + opt_len(info->file) +
					     opt_len(info->module) + opt_len(info->build_id);
		} else {
			err = -ENOMEM;
		}
	}
	if (!err)
		*id = f->id;
	pthread_mutex_unlock(&p->lock);
	free(clean);
	return err;
}

const char *profile_frame_name(struct profile *p, uint32_t id)
{
	const char *name = NULL;

	pthread_mutex_lock(&p->lock);
	if (id < p->nnames)
		name = p->names[id];
	pthread_mutex_unlock(&p->lock);
	return name;
}

static int stack_insert(struct profile *p, const uint32_t *frames, size_t depth,
			struct stack **out)
{
	size_t i, key_len = depth * sizeof(*frames);
	struct stack *st;

	for (i = 0; i < depth; i++) {
		if (frames[i] >= p->nnames)
			return -EINVAL;
	}
	if (p->nstacks == UINT32_MAX)
		return -ENOMEM;
	if (p->nstacks == p->stacks_cap) {
		size_t cap = next_cap(p->stacks_cap);
		struct stack **stacks;
		uint64_t *totals;

		stacks = reallocarray(p->stacks, cap, sizeof(*stacks));
		if (!stacks)
			return -ENOMEM;
		p->stacks = stacks;
		totals = reallocarray(p->totals, cap, sizeof(*totals));
		if (!totals)
			return -ENOMEM;
		p->totals = totals;
		p->stacks_cap = cap;
	}
	st = malloc(sizeof(*st) + key_len);
	if (!st)
		return -ENOMEM;
	st->id = p->nstacks;
	st->depth = depth;
	st->hint = UINT32_MAX;
	memcpy(st->frames, frames, key_len);
	HASH_ADD_KEYPTR(hh, p->stack_index, st->frames, key_len, st);
	if (!st->hh.tbl) {
		free(st);
		return -ENOMEM;
	}
	p->stacks[p->nstacks] = st;
	p->totals[p->nstacks] = 0;
	p->nstacks++;
	p->interned_bytes += sizeof(*st) + key_len;
	*out = st;
	return 0;
}

static struct bucket *slot(struct profile *p, int64_t sec)
{
	int64_t i = sec % PROFILE_HISTORY_S;

	return &p->ring[i < 0 ? i + PROFILE_HISTORY_S : i];
}

/* The bucket of second sec, or NULL if sec is already out of the window. */
static struct bucket *bucket_of(struct profile *p, int64_t sec)
{
	uint64_t gap, i;
	struct bucket *b;

	if (p->newest == NO_SEC) {
		p->newest = sec;
	} else if (sec > p->newest) {
		/* The slots of the seconds newest+1..sec hold seconds now out of the window. */
		gap = (uint64_t)sec - (uint64_t)p->newest;
		for (i = 0; i < gap && i < PROFILE_HISTORY_S; i++)
			slot(p, sec - i)->n = 0;
		p->newest = sec;
	} else if ((uint64_t)p->newest - (uint64_t)sec >= PROFILE_HISTORY_S) {
		return NULL;
	}
	b = slot(p, sec);
	if (!b->n)
		b->sec = sec;
	return b;
}

static int bucket_add(struct bucket *b, struct stack *st, uint64_t count)
{
	if (st->hint < b->n && b->entries[st->hint].stack == st->id) {
		b->entries[st->hint].count += count;
		return 0;
	}
	if (b->n == b->cap) {
		size_t cap = next_cap(b->cap);
		struct bucket_entry *entries;

		if (cap > UINT32_MAX)
			return -ENOMEM;
		entries = reallocarray(b->entries, cap, sizeof(*entries));
		if (!entries)
			return -ENOMEM;
		b->entries = entries;
		b->cap = cap;
	}
	st->hint = b->n;
	b->entries[b->n++] = (struct bucket_entry){ .stack = st->id, .count = count };
	return 0;
}

int profile_add(struct profile *p, int64_t sec, const uint32_t *frames, size_t depth,
		uint64_t count)
{
	struct bucket *b;
	struct stack *st;
	int err = 0;

	if (depth == 0 || depth > UINT_MAX / sizeof(*frames))
		return -EINVAL;

	pthread_mutex_lock(&p->lock);
	HASH_FIND(hh, p->stack_index, frames, depth * sizeof(*frames), st);
	if (!st) {
		err = stack_insert(p, frames, depth, &st);
		if (err)
			goto out;
	}
	if (!count)
		goto out;
	b = bucket_of(p, sec);
	if (b) {
		err = bucket_add(b, st, count);
		if (err)
			goto out;
	}
	p->totals[st->id] += count;
	p->total += count;
out:
	pthread_mutex_unlock(&p->lock);
	return err;
}

void profile_reset(struct profile *p)
{
	size_t i;

	pthread_mutex_lock(&p->lock);
	/* A profile that never got a stack has no totals array (memset(NULL) is undefined). */
	if (p->nstacks)
		memset(p->totals, 0, p->nstacks * sizeof(*p->totals));
	p->total = 0;
	for (i = 0; i < PROFILE_HISTORY_S; i++) {
		free(p->ring[i].entries);
		p->ring[i] = (struct bucket){};
	}
	p->newest = NO_SEC;
	p->since = now_sec();
	pthread_mutex_unlock(&p->lock);
}

/* Sums the buckets from second since on into counts, indexed by stack id. */
static void sum_window(struct profile *p, int64_t since, uint64_t *counts)
{
	const struct bucket *b;
	uint32_t j;
	size_t i;

	for (i = 0; i < PROFILE_HISTORY_S; i++) {
		b = &p->ring[i];
		if (!b->n || b->sec < since)
			continue;
		for (j = 0; j < b->n; j++)
			counts[b->entries[j].stack] += b->entries[j].count;
	}
}

int profile_snapshot(struct profile *p, int64_t since_sec, struct profile_snapshot **out)
{
	struct profile_stack *stacks;
	struct profile_snapshot *s;
	uint64_t *window = NULL;
	const uint64_t *counts;
	const char **names;
	const struct frame_info **infos;
	size_t i, n = 0;
	int err = 0;

	pthread_mutex_lock(&p->lock);
	/* One block: the stacks (8-byte aligned after the struct), then the names and infos. */
	s = malloc(sizeof(*s) + p->nstacks * sizeof(*stacks) +
		   p->nnames * (sizeof(*names) + sizeof(*infos)));
	if (!s) {
		err = -ENOMEM;
		goto out;
	}
	stacks = (struct profile_stack *)(s + 1);
	names = (const char **)(stacks + p->nstacks);
	infos = (const struct frame_info **)(names + p->nnames);
	counts = p->totals;
	if (since_sec > 0 && p->nstacks) {
		window = calloc(p->nstacks, sizeof(*window));
		if (!window) {
			free(s);
			err = -ENOMEM;
			goto out;
		}
		sum_window(p, since_sec, window);
		counts = window;
	}

	*s = (struct profile_snapshot){
		.unit = p->unit,
		.names = names,
		.infos = infos,
		.nnames = p->nnames,
		.stacks = stacks,
		/* Buckets were emptied at the last reset: no window starts before it. */
		.since = since_sec > p->since ? since_sec : p->since,
		.owner = profile_ref(p),
	};
	if (p->nnames) {
		memcpy(names, p->names, p->nnames * sizeof(*names));
		memcpy(infos, p->infos, p->nnames * sizeof(*infos));
	}
	for (i = 0; i < p->nstacks; i++) {
		if (!counts[i])
			continue;
		stacks[n++] = (struct profile_stack){
			.frames = p->stacks[i]->frames,
			.depth = p->stacks[i]->depth,
			.count = counts[i],
		};
		s->total += counts[i];
	}
	s->nstacks = n;
	*out = s;
out:
	pthread_mutex_unlock(&p->lock);
	free(window);
	return err;
}

void profile_snapshot_free(struct profile_snapshot *s)
{
	if (!s)
		return;
	profile_unref(s->owner);
	free(s);
}

int profile_snapshot_dup(const struct profile_snapshot *s, struct profile_snapshot **out)
{
	size_t stacks_len = s->nstacks * sizeof(*s->stacks);
	size_t names_len = s->nnames * sizeof(*s->names);
	struct profile_snapshot *copy;
	struct profile_stack *stacks;
	const char **names;
	const struct frame_info **infos;

	/* The same layout as profile_snapshot's block; frames and names stay in the profile. */
	copy = malloc(sizeof(*copy) + stacks_len + names_len + s->nnames * sizeof(*infos));
	if (!copy)
		return -ENOMEM;
	stacks = (struct profile_stack *)(copy + 1);
	names = (const char **)(stacks + s->nstacks);
	infos = (const struct frame_info **)(names + s->nnames);
	if (stacks_len)
		memcpy(stacks, s->stacks, stacks_len);
	if (names_len) {
		memcpy(names, s->names, names_len);
		memcpy(infos, s->infos, s->nnames * sizeof(*infos));
	}
	*copy = *s;
	copy->stacks = stacks;
	copy->names = names;
	copy->infos = infos;
	copy->owner = profile_ref(s->owner);
	*out = copy;
	return 0;
}

static size_t table_bytes(const UT_hash_table *tbl)
{
	return tbl ? sizeof(*tbl) + tbl->num_buckets * sizeof(UT_hash_bucket) : 0;
}

void profile_get_stats(struct profile *p, struct profile_stats *out)
{
	size_t bytes, i;

	pthread_mutex_lock(&p->lock);
	bytes = sizeof(*p) + strlen(p->unit) + 1 + p->interned_bytes;
	bytes += p->names_cap * (sizeof(*p->names) + sizeof(*p->infos));
	bytes += p->stacks_cap * (sizeof(*p->stacks) + sizeof(*p->totals));
	bytes += table_bytes(p->frame_index ? p->frame_index->hh.tbl : NULL);
	bytes += table_bytes(p->stack_index ? p->stack_index->hh.tbl : NULL);
	for (i = 0; i < PROFILE_HISTORY_S; i++)
		bytes += p->ring[i].cap * sizeof(struct bucket_entry);
	*out = (struct profile_stats){
		.frames = p->nnames,
		.stacks = p->nstacks,
		.total = p->total,
		.bytes = bytes,
	};
	pthread_mutex_unlock(&p->lock);
}

static int cmp_bucket_sec(const void *x, const void *y)
{
	int64_t a = (*(const struct bucket *const *)x)->sec;
	int64_t b = (*(const struct bucket *const *)y)->sec;

	return (a > b) - (a < b);
}

int profile_seconds(struct profile *p, int64_t from, int64_t until, struct profile_seconds **out)
{
	struct bucket *used[PROFILE_HISTORY_S];
	struct profile_seconds *s;
	struct profile_second_count *c;
	uint32_t *local = NULL;
	size_t *where = NULL; /* stack id -> index of its count in the latest second */
	size_t nused = 0, nentries = 0, i;
	int err = -ENOMEM;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_lock(&p->lock);
	for (i = 0; i < PROFILE_HISTORY_S; i++) {
		struct bucket *b = &p->ring[i];

		if (b->n && b->sec >= from && b->sec < until) {
			used[nused++] = b;
			nentries += b->n;
		}
	}
	qsort(used, nused, sizeof(*used), cmp_bucket_sec);
	s->names = malloc((p->nnames ? p->nnames : 1) * sizeof(*s->names));
	s->infos = malloc((p->nnames ? p->nnames : 1) * sizeof(*s->infos));
	s->counts = malloc((nentries ? nentries : 1) * sizeof(*s->counts));
	s->stacks = malloc((nentries ? nentries : 1) * sizeof(*s->stacks));
	/* stack id -> its index in s->stacks + 1, 0 = not counted yet */
	local = calloc(p->nstacks ? p->nstacks : 1, sizeof(*local));
	where = calloc(p->nstacks ? p->nstacks : 1, sizeof(*where));
	if (!s->names || !s->infos || !s->counts || !s->stacks || !local || !where)
		goto out;
	if (p->nnames) {
		memcpy((void *)s->names, p->names, p->nnames * sizeof(*s->names));
		memcpy((void *)s->infos, p->infos, p->nnames * sizeof(*s->infos));
	}
	s->nnames = p->nnames;
	for (i = 0; i < nused; i++) {
		for (uint32_t j = 0; j < used[i]->n; j++) {
			const struct bucket_entry *e = &used[i]->entries[j];
			struct stack *st = p->stacks[e->stack];

			if (!e->count)
				continue;
			if (!local[e->stack]) {
				s->stacks[s->nstacks] = (struct profile_stack){
					.frames = st->frames, .depth = st->depth };
				local[e->stack] = ++s->nstacks;
			}
			s->stacks[local[e->stack] - 1].count += e->count;
			/* A stack can have several entries in one bucket: one count per second. */
			c = &s->counts[where[e->stack]];
			if (where[e->stack] < s->ncounts && c->sec == used[i]->sec &&
			    c->stack == local[e->stack] - 1) {
				c->count += e->count;
				continue;
			}
			where[e->stack] = s->ncounts;
			s->counts[s->ncounts++] = (struct profile_second_count){
				.sec = used[i]->sec, .stack = local[e->stack] - 1,
				.count = e->count };
		}
	}
	s->unit = p->unit;
	s->since = p->since;
	s->owner = profile_ref(p);
	*out = s;
	s = NULL;
	err = 0;
out:
	pthread_mutex_unlock(&p->lock);
	free(local);
	free(where);
	profile_seconds_free(s);
	return err;
}

void profile_seconds_free(struct profile_seconds *s)
{
	if (!s)
		return;
	if (s->owner)
		profile_unref(s->owner);
	free((void *)s->names);
	free((void *)s->infos);
	free(s->counts);
	free(s->stacks);
	free(s);
}
