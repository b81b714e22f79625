// SPDX-License-Identifier: GPL-2.0
/* The parts of one interval's batch: an arena, and per part the hash tables that keep each
 * string, frame and stack once. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>
#include "sync/parts.h"

typedef Aperture__Sync__V1__Frame WireFrame;
typedef Aperture__Sync__V1__Stack WireStack;

#define CHUNK 65536

struct arena_chunk {
	struct arena_chunk *next;
	size_t used, cap;
	_Alignas(16) unsigned char data[];
};

struct str_entry {
	UT_hash_handle hh;
	uint32_t index;
	char *s;
};

struct frame_key {
	uint32_t name, file, line, module, build_id;
};

struct frame_entry {
	UT_hash_handle hh;
	struct frame_key key;
	uint32_t index;
};

struct stack_entry {
	UT_hash_handle hh;
	uint32_t index;
	uint32_t key[]; /* depth, the frames, then the lines if any is known */
};

struct part {
	WireBatch b;
	struct str_entry *strings;
	struct frame_entry *frames;
	struct stack_entry *stacks;
	size_t bytes; /* the protobuf's size, roughly */
};

struct parts {
	struct arena_chunk *arena;
	struct part **v;
	size_t n;
	const char *node, *boot_id;
	int64_t created;
};

void *parts_alloc(struct parts *ps, size_t size)
{
	struct arena_chunk *c = ps->arena;

	size = (size + 15) & ~(size_t)15;
	if (!c || c->cap - c->used < size) {
		size_t cap = size > CHUNK ? size : CHUNK;

		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->next = ps->arena;
		c->used = 0;
		c->cap = cap;
		ps->arena = c;
	}
	c->used += size;
	return memset(c->data + c->used - size, 0, size);
}

char *parts_strdup(struct parts *ps, const char *s)
{
	size_t len = strlen(s) + 1;
	char *copy = parts_alloc(ps, len);

	return copy ? memcpy(copy, s, len) : NULL;
}

int parts_push(struct parts *ps, void ***v, size_t *n, void *item)
{
	/* The capacity follows from n: 16, then doubling at each power of two. The old array
	 * stays in the arena. */
	if (*n == 0 || (*n >= 16 && !(*n & (*n - 1)))) {
		size_t cap = *n ? 2 * *n : 16;
		void **bigger = parts_alloc(ps, cap * sizeof(*bigger));

		if (!bigger)
			return -ENOMEM;
		if (*n)
			memcpy(bigger, *v, *n * sizeof(*bigger));
		*v = bigger;
	}
	(*v)[(*n)++] = item;
	return 0;
}

static struct part *cur(struct parts *ps)
{
	return ps->v[ps->n - 1];
}

static int part_start(struct parts *ps)
{
	struct part *p = parts_alloc(ps, sizeof(*p));

	if (!p || parts_push(ps, (void ***)&ps->v, &ps->n, p))
		return -ENOMEM;
	p->b = (WireBatch)APERTURE__SYNC__V1__BATCH__INIT;
	p->b.version = WIRE_VERSION;
	p->b.node = (char *)ps->node;
	p->b.boot_id = (char *)ps->boot_id;
	p->b.created_unix = ps->created;
	/* strings[0] is "" */
	return parts_push(ps, (void ***)&p->b.strings, &p->b.n_strings, "");
}

int parts_new(const char *node, const char *boot_id, int64_t created, struct parts **out)
{
	struct parts *ps = calloc(1, sizeof(*ps));
	int err;

	if (!ps)
		return -ENOMEM;
	ps->node = node;
	ps->boot_id = boot_id;
	ps->created = created;
	err = part_start(ps);
	if (err) {
		parts_free(ps);
		return err;
	}
	*out = ps;
	return 0;
}

void parts_free(struct parts *ps)
{
	if (!ps)
		return;
	for (size_t i = 0; i < ps->n; i++) {
		HASH_CLEAR(hh, ps->v[i]->strings);
		HASH_CLEAR(hh, ps->v[i]->frames);
		HASH_CLEAR(hh, ps->v[i]->stacks);
	}
	while (ps->arena) {
		struct arena_chunk *next = ps->arena->next;

		free(ps->arena);
		ps->arena = next;
	}
	free(ps);
}

WireBatch *parts_cur(struct parts *ps)
{
	return &cur(ps)->b;
}

size_t parts_number(struct parts *ps)
{
	return ps->n;
}

int parts_room(struct parts *ps, size_t more_bytes)
{
	struct part *p = cur(ps);

	if (p->b.n_stacks < SYNC_PART_MAX_STACKS && p->bytes + more_bytes < SYNC_PART_MAX_BYTES)
		return 0;
	/* Nothing in it yet: whatever comes is its own part. */
	if (!p->b.n_targets)
		return 0;
	return part_start(ps);
}

void parts_grow(struct parts *ps, size_t bytes)
{
	cur(ps)->bytes += bytes;
}

int parts_string(struct parts *ps, const char *s, uint32_t *out)
{
	struct part *p = cur(ps);
	struct str_entry *e;

	if (!s || !*s) {
		*out = 0;
		return 0;
	}
	HASH_FIND_STR(p->strings, s, e);
	if (!e) {
		e = parts_alloc(ps, sizeof(*e));
		if (!e || !(e->s = parts_strdup(ps, s)))
			return -ENOMEM;
		e->index = p->b.n_strings;
		if (parts_push(ps, (void ***)&p->b.strings, &p->b.n_strings, e->s))
			return -ENOMEM;
		HASH_ADD_KEYPTR(hh, p->strings, e->s, strlen(e->s), e);
		if (!e->hh.tbl)
			return -ENOMEM;
		p->bytes += strlen(s) + 3;
	}
	*out = e->index;
	return 0;
}

int parts_frame(struct parts *ps, const char *name, const struct frame_info *info,
		uint32_t *out)
{
	struct frame_key k = {0};
	struct frame_entry *e;
	WireFrame *f;
	int err;

	err = parts_string(ps, name, &k.name);
	if (!err && info) {
		k.line = info->line;
		err = parts_string(ps, info->file, &k.file);
		err = err ?: parts_string(ps, info->module, &k.module);
		err = err ?: parts_string(ps, info->build_id, &k.build_id);
	}
	if (err)
		return err;
	HASH_FIND(hh, cur(ps)->frames, &k, sizeof(k), e);
	if (!e) {
		struct part *p = cur(ps);

		e = parts_alloc(ps, sizeof(*e));
		f = parts_alloc(ps, sizeof(*f));
		if (!e || !f)
			return -ENOMEM;
		*f = (WireFrame)APERTURE__SYNC__V1__FRAME__INIT;
		f->name = k.name;
		f->file = k.file;
		f->line = k.line;
		f->module = k.module;
		f->build_id = k.build_id;
		e->key = k;
		e->index = p->b.n_frames;
		if (parts_push(ps, (void ***)&p->b.frames, &p->b.n_frames, f))
			return -ENOMEM;
		HASH_ADD(hh, p->frames, key, sizeof(k), e);
		if (!e->hh.tbl)
			return -ENOMEM;
		p->bytes += 14;
	}
	*out = e->index;
	return 0;
}

static bool any_line(const uint32_t *lines, uint32_t depth)
{
	for (uint32_t i = 0; lines && i < depth; i++)
		if (lines[i])
			return true;
	return false;
}

int parts_stack(struct parts *ps, const uint32_t *frames, const uint32_t *lines,
		uint32_t depth, uint32_t *out)
{
	uint32_t nlines = any_line(lines, depth) ? depth : 0;
	size_t key_len = (1 + depth + nlines) * sizeof(*frames);
	struct part *p = cur(ps);
	struct stack_entry *e;
	uint32_t key[1 + 2 * 1024];
	WireStack *st;

	if (depth > 1024)
		return -EINVAL;
	key[0] = depth;
	memcpy(key + 1, frames, depth * sizeof(*frames));
	if (nlines)
		memcpy(key + 1 + depth, lines, nlines * sizeof(*lines));
	HASH_FIND(hh, p->stacks, key, key_len, e);
	if (!e) {
		e = parts_alloc(ps, sizeof(*e) + key_len);
		st = parts_alloc(ps, sizeof(*st));
		if (!e || !st)
			return -ENOMEM;
		memcpy(e->key, key, key_len);
		e->index = p->b.n_stacks;
		*st = (WireStack)APERTURE__SYNC__V1__STACK__INIT;
		st->n_frames = depth;
		st->frames = e->key + 1;
		st->n_lines = nlines;
		st->lines = nlines ? e->key + 1 + depth : NULL;
		if (parts_push(ps, (void ***)&p->b.stacks, &p->b.n_stacks, st))
			return -ENOMEM;
		HASH_ADD_KEYPTR(hh, p->stacks, e->key, key_len, e);
		if (!e->hh.tbl)
			return -ENOMEM;
		p->bytes += 4 + 3 * depth + 2 * nlines;
	}
	*out = e->index;
	return 0;
}

void sync_parts_free(struct sync_part *parts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(parts[i].data);
	free(parts);
}

int parts_encode(struct parts *ps, uint64_t first_seq,
		 const Aperture__Sync__V1__NodeStatus *status, struct sync_part **out, size_t *n)
{
	struct sync_part *v = calloc(ps->n, sizeof(*v));
	int err = v ? 0 : -ENOMEM;

	for (size_t i = 0; !err && i < ps->n; i++) {
		WireBatch *b = &ps->v[i]->b;

		b->seq = first_seq + i;
		b->part = i;
		b->parts = ps->n;
		b->node_status = (Aperture__Sync__V1__NodeStatus *)status;
		v[i].seq = b->seq;
		err = wire_encode(b, &v[i].data, &v[i].len);
	}
	if (err) {
		sync_parts_free(v, v ? ps->n : 0);
		return err;
	}
	*out = v;
	*n = ps->n;
	return 0;
}
