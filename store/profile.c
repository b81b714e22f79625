// SPDX-License-Identifier: GPL-2.0
/* The profile store.
 *
 * Frame names and stacks are interned into entries that are neither moved nor freed before
 * the profile is, whatever the writer does later. A snapshot can therefore hand out pointers
 * into them: under the lock it copies only the counts and the id -> name pointer array, and
 * it keeps the profile alive with a reference.
 *
 * What is counted is a variant: a stack with the source lines running in its frames. The
 * variants of a stack hang off it in a short list (a loop spans a few lines), each with the
 * stack's depth of lines; buckets and totals are by variant, and a snapshot sums them by stack
 * for the views that print names, and hands them out as they are for pprof.
 *
 * Second s of the history lives in ring[s % PROFILE_HISTORY_S] while it is one of the last
 * FINE_S seconds. A slot is emptied when the newest second moves past it, so a non-empty slot
 * always holds a second of the window (newest - PROFILE_HISTORY_S, newest] and late data
 * finds its second's slot, or none. Once all of a group of COARSE_S seconds are older than
 * that, they are merged into one bucket of coarse[], and go with the group's first second:
 * the history costs one bucket per COARSE_S seconds beyond the last minute.
 *
 * Memory: every profile counts what it holds in one daemon-wide total. Past the budget
 * (profile_set_budget), or past PROFILE_MAX_STACKS in one profile, a new stack is counted in
 * THREAD;[other stacks] and a new frame name becomes [other frames]: totals stay exact, and
 * only what was known before is told apart. Freed memory goes back to the system
 * (malloc_trim) once enough of it was freed. */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Out of memory must be -ENOMEM, not uthash's default exit(): a failed add leaves the item out
 * of the table and sets its hh.tbl to NULL. */
#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#include "store/profile.h"

#define NO_SEC INT64_MIN
#define FINE_S 60
#define COARSE_S 10
#define COARSE_N (PROFILE_HISTORY_S / COARSE_S)
/* Freed by profiles since the last malloc_trim: trimming walks the heap, so not each time. */
#define TRIM_AFTER_BYTES (1u << 20)

static atomic_size_t store_bytes;
static atomic_size_t store_budget = SIZE_MAX;
static atomic_size_t freed_since_trim;

struct frame {
	UT_hash_handle hh;
	uint32_t id;
	struct frame_info *info; /* NULL until known; one block with its strings */
	char name[]; /* sanitized; the key */
};

/* A sequence of frames, what every view but pprof tells apart. */
struct stack {
	UT_hash_handle hh;
	uint32_t id;
	uint32_t depth;
	struct variant *variants; /* one per distinct lines, the latest first */
	uint32_t frames[]; /* the key */
};

/* A stack with the lines executing in its frames: what is counted. Few per stack (a loop
 * spans a few lines), so a list off the stack rather than a hash of their own. */
struct variant {
	struct variant *next;
	uint32_t id;
	uint32_t stack;
	/* Where this variant was last appended in a bucket: repeated adds within one second then
	 * merge into one entry instead of growing the bucket. Checked before use, never trusted. */
	uint32_t hint;
	bool known;        /* some line is not 0 */
	uint32_t lines[];  /* the stack's depth of them, root first; 0 unknown */
};

struct bucket_entry {
	uint32_t variant;
	uint64_t count;
};

struct bucket {
	int64_t sec; /* meaningful only while n > 0 */
	struct bucket_entry *entries;
	uint32_t n, cap;
};

/* Read, never written: most profiles of a target (a native process's JVM ones) never get a
 * count, and a ring of their own would cost each 14 KiB. */
static struct bucket empty_ring[PROFILE_HISTORY_S];

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
	size_t nstacks, stacks_cap;
	struct variant **variants; /* variant id -> variant */
	uint64_t *totals;      /* variant id -> count since made or reset */
	size_t nvariants, variants_cap;
	size_t interned_bytes; /* of the frames and stacks themselves */
	size_t bytes;          /* counted in store_bytes */
	uint64_t other;        /* counts that went to [other stacks] */

	int64_t newest; /* newest second added since made or reset, or NO_SEC */
	/* Groups of COARSE_S seconds before this one are in coarse[]; NO_SEC with newest. */
	int64_t coarse_until;
	struct bucket *ring; /* PROFILE_HISTORY_S of them, empty_ring until the first count */
	struct bucket coarse[COARSE_N]; /* group g in coarse[g / COARSE_S % COARSE_N] */
};

/* Memory p holds changed by delta bytes. */
static void account(struct profile *p, ssize_t delta)
{
	p->bytes += delta;
	atomic_fetch_add_explicit(&store_bytes, delta, memory_order_relaxed);
}

static bool over_budget(void)
{
	return atomic_load_explicit(&store_bytes, memory_order_relaxed) >=
	       atomic_load_explicit(&store_budget, memory_order_relaxed);
}

void profile_set_budget(size_t bytes)
{
	atomic_store(&store_budget, bytes);
}

size_t profile_store_bytes(void)
{
	return atomic_load(&store_bytes);
}

/* After a large free, or the last profile's: hand the pages back, so the daemon shrinks
 * when targets go. Smaller frees are left for the profiles still there to reuse. */
static void freed(size_t bytes)
{
	if (atomic_fetch_add(&freed_since_trim, bytes) + bytes >= TRIM_AFTER_BYTES ||
	    !atomic_load(&store_bytes)) {
		atomic_store(&freed_since_trim, 0);
		malloc_trim(0);
	}
}

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
	p->coarse_until = NO_SEC;
	p->ring = empty_ring;
	account(p, sizeof(*p));
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
		for (struct variant *v = st->variants, *next; v; v = next) {
			next = v->next;
			free(v);
		}
		free(st);
	}
	for (i = 0; p->ring != empty_ring && i < PROFILE_HISTORY_S; i++)
		free(p->ring[i].entries);
	if (p->ring != empty_ring)
		free(p->ring);
	for (i = 0; i < COARSE_N; i++)
		free(p->coarse[i].entries);
	free(p->names);
	free(p->infos);
	free(p->stacks);
	free(p->variants);
	free(p->totals);
	free(p->unit);
	pthread_mutex_destroy(&p->lock);
	atomic_fetch_sub(&store_bytes, p->bytes);
	freed(p->bytes);
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
		account(p, (cap - p->names_cap) * (sizeof(*names) + sizeof(*infos)));
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
	account(p, sizeof(*f) + len + 1);
	*out = f;
	return 0;
}

static const char other_frames[] = "[other frames]";
static const char other_stacks[] = "[other stacks]";

/* The frame called name, interned now if new: past the budget, a new name is counted as
 * [other frames]. */
static int frame_find_or_insert(struct profile *p, const char *name, size_t len,
				struct frame **out)
{
	HASH_FIND(hh, p->frame_index, name, len, *out);
	if (*out)
		return 0;
	if (over_budget()) {
		name = other_frames;
		len = sizeof(other_frames) - 1;
		HASH_FIND(hh, p->frame_index, name, len, *out);
		if (*out)
			return 0;
	}
	return frame_insert(p, name, len, out);
}

/* A frame of the store's own (a name without unsafe characters), whatever the budget. */
static int frame_insert_once(struct profile *p, const char *name, struct frame **out)
{
	size_t len = strlen(name);

	HASH_FIND(hh, p->frame_index, name, len, *out);
	return *out ? 0 : frame_insert(p, name, len, out);
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
	err = frame_find_or_insert(p, name, len, &f);
	if (!err && info && !f->info) {
		/* Without its info the frame is still usable: only an error if it can't be kept. */
		f->info = frame_info_dup(info);
		if (f->info) {
			size_t len = sizeof(*f->info) + opt_len(info->file) +
				     opt_len(info->module) + opt_len(info->build_id);

			p->infos[f->id] = f->info;
			p->interned_bytes += len;
			account(p, len);
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

		stacks = reallocarray(p->stacks, cap, sizeof(*stacks));
		if (!stacks)
			return -ENOMEM;
		p->stacks = stacks;
		account(p, (cap - p->stacks_cap) * sizeof(*stacks));
		p->stacks_cap = cap;
	}
	st = malloc(sizeof(*st) + key_len);
	if (!st)
		return -ENOMEM;
	st->id = p->nstacks;
	st->depth = depth;
	st->variants = NULL;
	memcpy(st->frames, frames, key_len);
	HASH_ADD_KEYPTR(hh, p->stack_index, st->frames, key_len, st);
	if (!st->hh.tbl) {
		free(st);
		return -ENOMEM;
	}
	p->stacks[p->nstacks++] = st;
	p->interned_bytes += sizeof(*st) + key_len;
	/* and about a hash bucket's share */
	account(p, sizeof(*st) + key_len + sizeof(UT_hash_bucket));
	*out = st;
	return 0;
}

static struct bucket *slot(struct profile *p, int64_t sec)
{
	int64_t i = sec % PROFILE_HISTORY_S;

	return &p->ring[i < 0 ? i + PROFILE_HISTORY_S : i];
}

static int64_t group_of(int64_t sec)
{
	return sec - ((sec % COARSE_S) + COARSE_S) % COARSE_S;
}

static void bucket_free(struct profile *p, struct bucket *b)
{
	account(p, -(ssize_t)(b->cap * sizeof(*b->entries)));
	free(b->entries);
	*b = (struct bucket){0};
}

static int bucket_add(struct profile *p, struct bucket *b, struct variant *v, uint64_t count)
{
	if (v->hint < b->n && b->entries[v->hint].variant == v->id) {
		b->entries[v->hint].count += count;
		return 0;
	}
	if (b->n == b->cap) {
		/* Most seconds of most targets hold a few stacks: start small. */
		size_t cap = b->cap ? 2 * b->cap : 4;
		struct bucket_entry *entries;

		if (cap > UINT32_MAX)
			return -ENOMEM;
		entries = reallocarray(b->entries, cap, sizeof(*entries));
		if (!entries)
			return -ENOMEM;
		account(p, (cap - b->cap) * sizeof(*entries));
		b->entries = entries;
		b->cap = cap;
	}
	v->hint = b->n;
	b->entries[b->n++] = (struct bucket_entry){ .variant = v->id, .count = count };
	return 0;
}

/* The coarse bucket of group g, emptied first if it still holds an older group. */
static struct bucket *coarse_of(struct profile *p, int64_t g)
{
	int64_t i = (g / COARSE_S) % COARSE_N;
	struct bucket *b = &p->coarse[i < 0 ? i + COARSE_N : i];

	if (b->n && b->sec != g)
		b->n = 0;
	if (!b->n)
		b->sec = g;
	return b;
}

/* Merges the seconds of group g into its coarse bucket and frees their buckets. Out of
 * memory, the counts the coarse bucket could not take are lost to windows (not to totals). */
static void coarsen(struct profile *p, int64_t g)
{
	struct bucket *dst = coarse_of(p, g);

	for (int64_t sec = g; sec < g + COARSE_S; sec++) {
		struct bucket *b = slot(p, sec);

		if (!b->n || b->sec != sec) {
			if (!b->n && b->cap)
				bucket_free(p, b);
			continue;
		}
		for (uint32_t j = 0; j < b->n; j++)
			bucket_add(p, dst, p->variants[b->entries[j].variant], b->entries[j].count);
		bucket_free(p, b);
	}
}

/* The newest second is now sec: the slots of newest+1..sec hold seconds now out of the
 * window, and whole groups older than the last FINE_S seconds are merged. */
static void advance(struct profile *p, int64_t sec)
{
	uint64_t gap = (uint64_t)sec - (uint64_t)p->newest, i;
	int64_t oldest = group_of(sec - PROFILE_HISTORY_S + 1);

	for (i = 0; i < gap && i < PROFILE_HISTORY_S; i++)
		slot(p, sec - i)->n = 0;
	p->newest = sec;
	if (p->coarse_until < oldest)
		p->coarse_until = oldest;
	for (; p->coarse_until + COARSE_S <= sec - FINE_S + 1; p->coarse_until += COARSE_S)
		coarsen(p, p->coarse_until);
}

/* The bucket of second sec, or NULL if sec is already out of the window. */
static struct bucket *bucket_of(struct profile *p, int64_t sec)
{
	struct bucket *b;

	if (p->ring == empty_ring) {
		/* Out of memory, the count goes to the totals only. */
		b = calloc(PROFILE_HISTORY_S, sizeof(*b));
		if (!b)
			return NULL;
		p->ring = b;
		account(p, PROFILE_HISTORY_S * sizeof(*b));
	}
	if (p->newest == NO_SEC) {
		p->newest = sec;
		p->coarse_until = group_of(sec);
	} else if (sec > p->newest) {
		advance(p, sec);
	} else if ((uint64_t)p->newest - (uint64_t)sec >= PROFILE_HISTORY_S) {
		return NULL;
	}
	if (sec < p->coarse_until)
		return group_of(sec) > p->newest - PROFILE_HISTORY_S ? coarse_of(p, group_of(sec))
								      : NULL;
	b = slot(p, sec);
	if (!b->n)
		b->sec = sec;
	return b;
}

/* The stack to count frames in: itself, or past the budget or the cap THREAD;[other stacks]
 * (frames[0] being the thread), and then *other is set. */
static int stack_for(struct profile *p, const uint32_t *frames, size_t depth,
		     struct stack **out, bool *other)
{
	uint32_t key[2];
	struct frame *f;
	int err;

	*other = false;
	HASH_FIND(hh, p->stack_index, frames, depth * sizeof(*frames), *out);
	if (*out)
		return 0;
	if (p->nstacks < PROFILE_MAX_STACKS && !over_budget())
		return stack_insert(p, frames, depth, out);
	if (frames[0] >= p->nnames)
		return -EINVAL;
	err = frame_insert_once(p, other_stacks, &f);
	if (err)
		return err;
	key[0] = frames[0];
	key[1] = f->id;
	*other = true;
	HASH_FIND(hh, p->stack_index, key, sizeof(key), *out);
	return *out ? 0 : stack_insert(p, key, 2, out);
}

static bool lines_known(const uint32_t *lines, size_t depth)
{
	for (size_t i = 0; lines && i < depth; i++)
		if (lines[i])
			return true;
	return false;
}

static int variant_insert(struct profile *p, struct stack *st, const uint32_t *lines,
			  struct variant **out)
{
	size_t len = st->depth * sizeof(*lines);
	struct variant *v;

	if (p->nvariants == UINT32_MAX)
		return -ENOMEM;
	if (p->nvariants == p->variants_cap) {
		size_t cap = next_cap(p->variants_cap);
		struct variant **variants;
		uint64_t *totals;

		variants = reallocarray(p->variants, cap, sizeof(*variants));
		if (!variants)
			return -ENOMEM;
		p->variants = variants;
		totals = reallocarray(p->totals, cap, sizeof(*totals));
		if (!totals)
			return -ENOMEM;
		p->totals = totals;
		account(p, (cap - p->variants_cap) * (sizeof(*variants) + sizeof(*totals)));
		p->variants_cap = cap;
	}
	v = malloc(sizeof(*v) + len);
	if (!v)
		return -ENOMEM;
	v->id = p->nvariants;
	v->stack = st->id;
	v->hint = UINT32_MAX;
	v->known = lines_known(lines, st->depth);
	if (v->known)
		memcpy(v->lines, lines, len);
	else
		memset(v->lines, 0, len);
	v->next = st->variants;
	st->variants = v;
	p->variants[p->nvariants] = v;
	p->totals[p->nvariants++] = 0;
	p->interned_bytes += sizeof(*v) + len;
	account(p, sizeof(*v) + len);
	*out = v;
	return 0;
}

static struct variant *variant_find(const struct stack *st, const uint32_t *lines)
{
	bool known = lines_known(lines, st->depth);

	for (struct variant *v = st->variants; v; v = v->next)
		if (v->known == known &&
		    (!known || !memcmp(v->lines, lines, st->depth * sizeof(*lines))))
			return v;
	return NULL;
}

/* The variant of st to count lines in: past the budget or the cap, lines become unknown,
 * so the stack keeps its count and only its lines are lost. */
static int variant_for(struct profile *p, struct stack *st, const uint32_t *lines,
		       struct variant **out)
{
	*out = variant_find(st, lines);
	if (*out)
		return 0;
	if (lines_known(lines, st->depth) &&
	    (p->nvariants >= PROFILE_MAX_VARIANTS || over_budget())) {
		*out = variant_find(st, NULL);
		if (*out)
			return 0;
		lines = NULL;
	}
	return variant_insert(p, st, lines, out);
}

int profile_add(struct profile *p, int64_t sec, const uint32_t *frames, size_t depth,
		uint64_t count)
{
	return profile_add_lines(p, sec, frames, NULL, depth, count);
}

int profile_add_lines(struct profile *p, int64_t sec, const uint32_t *frames,
		      const uint32_t *lines, size_t depth, uint64_t count)
{
	struct variant *v;
	struct bucket *b;
	struct stack *st;
	bool other;
	int err = 0;

	if (depth == 0 || depth > UINT_MAX / sizeof(*frames))
		return -EINVAL;

	pthread_mutex_lock(&p->lock);
	err = stack_for(p, frames, depth, &st, &other);
	if (!err)
		err = variant_for(p, st, other ? NULL : lines, &v);
	if (err || !count)
		goto out;
	b = bucket_of(p, sec);
	if (b) {
		err = bucket_add(p, b, v, count);
		if (err)
			goto out;
	}
	p->totals[v->id] += count;
	p->total += count;
	if (other)
		p->other += count;
out:
	pthread_mutex_unlock(&p->lock);
	return err;
}

void profile_reset(struct profile *p)
{
	size_t i;

	pthread_mutex_lock(&p->lock);
	/* A profile that never got a stack has no totals array (memset(NULL) is undefined). */
	if (p->nvariants)
		memset(p->totals, 0, p->nvariants * sizeof(*p->totals));
	p->total = 0;
	p->other = 0;
	if (p->ring != empty_ring) {
		for (i = 0; i < PROFILE_HISTORY_S; i++)
			bucket_free(p, &p->ring[i]);
		free(p->ring);
		account(p, -(ssize_t)(PROFILE_HISTORY_S * sizeof(*p->ring)));
		p->ring = empty_ring;
	}
	for (i = 0; i < COARSE_N; i++)
		bucket_free(p, &p->coarse[i]);
	p->newest = NO_SEC;
	p->coarse_until = NO_SEC;
	p->since = now_sec();
	pthread_mutex_unlock(&p->lock);
}

static void sum_bucket(const struct bucket *b, int64_t since, int64_t expired,
		       uint64_t *counts)
{
	if (!b->n || b->sec < since || b->sec <= expired)
		return;
	for (uint32_t j = 0; j < b->n; j++)
		counts[b->entries[j].variant] += b->entries[j].count;
}

/* Sums the buckets from second since on into counts, indexed by variant id. A coarse bucket
 * counts if its group starts at since or later. */
static void sum_window(struct profile *p, int64_t since, uint64_t *counts)
{
	int64_t expired = p->newest == NO_SEC ? NO_SEC : p->newest - PROFILE_HISTORY_S;
	size_t i;

	for (i = 0; i < PROFILE_HISTORY_S; i++)
		sum_bucket(&p->ring[i], since, expired, counts);
	for (i = 0; i < COARSE_N; i++)
		sum_bucket(&p->coarse[i], since, expired, counts);
}

int profile_snapshot(struct profile *p, int64_t since_sec, struct profile_snapshot **out)
{
	struct profile_stack *stacks, *lined;
	struct profile_snapshot *s;
	uint64_t *window = NULL, *merged = NULL;
	const uint64_t *counts;
	const char **names;
	const struct frame_info **infos;
	size_t i, n = 0;
	int err = -ENOMEM;

	pthread_mutex_lock(&p->lock);
	/* One block: the stacks and the lined ones (8-byte aligned after the struct), then the
	 * names and infos. */
	s = malloc(sizeof(*s) + (p->nstacks + p->nvariants) * sizeof(*stacks) +
		   p->nnames * (sizeof(*names) + sizeof(*infos)));
	merged = calloc(p->nstacks ? p->nstacks : 1, sizeof(*merged));
	if (!s || !merged)
		goto out;
	stacks = (struct profile_stack *)(s + 1);
	lined = stacks + p->nstacks;
	names = (const char **)(lined + p->nvariants);
	infos = (const struct frame_info **)(names + p->nnames);
	counts = p->totals;
	if (since_sec > 0 && p->nvariants) {
		window = calloc(p->nvariants, sizeof(*window));
		if (!window)
			goto out;
		sum_window(p, since_sec, window);
		counts = window;
	}

	*s = (struct profile_snapshot){
		.unit = p->unit,
		.names = names,
		.infos = infos,
		.nnames = p->nnames,
		.stacks = stacks,
		.lined = lined,
		/* Buckets were emptied at the last reset: no window starts before it. */
		.since = since_sec > p->since ? since_sec : p->since,
		.owner = profile_ref(p),
	};
	if (p->nnames) {
		memcpy(names, p->names, p->nnames * sizeof(*names));
		memcpy(infos, p->infos, p->nnames * sizeof(*infos));
	}
	for (i = 0; i < p->nvariants; i++) {
		const struct variant *v = p->variants[i];
		const struct stack *st = p->stacks[v->stack];

		if (!counts[i])
			continue;
		merged[v->stack] += counts[i];
		lined[s->nlined++] = (struct profile_stack){
			.frames = st->frames,
			.lines = v->lines,
			.depth = st->depth,
			.count = counts[i],
		};
		s->total += counts[i];
	}
	for (i = 0; i < p->nstacks; i++) {
		if (!merged[i])
			continue;
		stacks[n++] = (struct profile_stack){
			.frames = p->stacks[i]->frames,
			.depth = p->stacks[i]->depth,
			.count = merged[i],
		};
	}
	s->nstacks = n;
	*out = s;
	s = NULL;
	err = 0;
out:
	pthread_mutex_unlock(&p->lock);
	free(s);
	free(window);
	free(merged);
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
	size_t lined_len = s->nlined * sizeof(*s->lined);
	size_t names_len = s->nnames * sizeof(*s->names);
	struct profile_snapshot *copy;
	struct profile_stack *stacks, *lined;
	const char **names;
	const struct frame_info **infos;

	/* The same layout as profile_snapshot's block; frames and names stay in the profile. */
	copy = malloc(sizeof(*copy) + stacks_len + lined_len + names_len +
		      s->nnames * sizeof(*infos));
	if (!copy)
		return -ENOMEM;
	stacks = (struct profile_stack *)(copy + 1);
	lined = stacks + s->nstacks;
	names = (const char **)(lined + s->nlined);
	infos = (const struct frame_info **)(names + s->nnames);
	if (stacks_len)
		memcpy(stacks, s->stacks, stacks_len);
	if (lined_len)
		memcpy(lined, s->lined, lined_len);
	if (names_len) {
		memcpy(names, s->names, names_len);
		memcpy(infos, s->infos, s->nnames * sizeof(*infos));
	}
	*copy = *s;
	copy->stacks = stacks;
	copy->lined = lined;
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
	bytes += p->stacks_cap * sizeof(*p->stacks);
	bytes += p->variants_cap * (sizeof(*p->variants) + sizeof(*p->totals));
	bytes += table_bytes(p->frame_index ? p->frame_index->hh.tbl : NULL);
	bytes += table_bytes(p->stack_index ? p->stack_index->hh.tbl : NULL);
	if (p->ring != empty_ring)
		bytes += PROFILE_HISTORY_S * sizeof(*p->ring);
	for (i = 0; i < PROFILE_HISTORY_S; i++)
		bytes += p->ring[i].cap * sizeof(struct bucket_entry);
	for (i = 0; i < COARSE_N; i++)
		bytes += p->coarse[i].cap * sizeof(struct bucket_entry);
	*out = (struct profile_stats){
		.frames = p->nnames,
		.stacks = p->nstacks,
		.total = p->total,
		.other = p->other,
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
	/* variant id -> its index in s->stacks + 1, 0 = not counted yet */
	local = calloc(p->nvariants ? p->nvariants : 1, sizeof(*local));
	where = calloc(p->nvariants ? p->nvariants : 1, sizeof(*where));
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
			const struct variant *v = p->variants[e->variant];
			struct stack *st = p->stacks[v->stack];
			uint32_t k = e->variant;

			if (!e->count)
				continue;
			if (!local[k]) {
				s->stacks[s->nstacks] = (struct profile_stack){
					.frames = st->frames, .lines = v->lines,
					.depth = st->depth };
				local[k] = ++s->nstacks;
			}
			s->stacks[local[k] - 1].count += e->count;
			/* A variant can have several entries in one bucket: one count per second. */
			c = &s->counts[where[k]];
			if (where[k] < s->ncounts && c->sec == used[i]->sec &&
			    c->stack == local[k] - 1) {
				c->count += e->count;
				continue;
			}
			where[k] = s->ncounts;
			s->counts[s->ncounts++] = (struct profile_second_count){
				.sec = used[i]->sec, .stack = local[k] - 1,
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
