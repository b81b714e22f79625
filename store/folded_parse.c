// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "store/folded_parse.h"

struct parse {
	struct profile *p;
	uint64_t total;
	uint32_t *frames;
	size_t cap;
	/* Every name seen, by a hash of its text (open addressing, at most half full), with
	 * its id: a name repeats on many lines, and this finds it faster than the profile's
	 * own table, which takes a lock and walks chains of separately allocated entries. A
	 * short name is kept in its entry, so checking it reads no other memory; a longer one
	 * points into the input. */
	struct seen {
		const char *s;
		uint32_t hash, len, id;
		char text[20];
	} *seen;
	size_t nseen, seen_mask;
	char *name; /* a frame, NUL-terminated */
	size_t name_cap;
};

static int parse_count(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (!len)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (s[i] - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

static int intern(struct parse *ps, const char *s, size_t len, uint32_t *id)
{
	if (len + 1 > ps->name_cap) {
		char *name = realloc(ps->name, len + 1);

		if (!name)
			return -ENOMEM;
		ps->name = name;
		ps->name_cap = len + 1;
	}
	memcpy(ps->name, s, len);
	ps->name[len] = '\0';
	return profile_frame_id(ps->p, ps->name, id);
}

static int grow(struct parse *ps)
{
	size_t cap = ps->cap ? ps->cap * 2 : 64;
	uint32_t *frames = reallocarray(ps->frames, cap, sizeof(*frames));

	if (!frames)
		return -ENOMEM;
	ps->frames = frames;
	ps->cap = cap;
	return 0;
}

static bool seen_is(const struct seen *e, uint32_t hash, const char *s, size_t len)
{
	return e->hash == hash && e->len == len &&
	       !memcmp(len <= sizeof(e->text) ? e->text : e->s, s, len);
}

static int seen_grow(struct parse *ps)
{
	size_t size = ps->seen ? 2 * (ps->seen_mask + 1) : 4096, i, j;
	struct seen *table = calloc(size, sizeof(*table));

	if (!table)
		return -ENOMEM;
	for (i = 0; ps->seen && i <= ps->seen_mask; i++) {
		if (!ps->seen[i].s)
			continue;
		for (j = ps->seen[i].hash & (size - 1); table[j].s; j = (j + 1) & (size - 1))
			;
		table[j] = ps->seen[i];
	}
	free(ps->seen);
	ps->seen = table;
	ps->seen_mask = size - 1;
	return 0;
}

static int frame_id(struct parse *ps, const char *s, size_t len, uint32_t *id)
{
	uint32_t h = 2166136261u; /* FNV-1a, then murmur3's finalizer to spread it */
	struct seen *e;
	size_t i;
	int err;

	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	for (i = h & ps->seen_mask; ps->seen[i].s; i = (i + 1) & ps->seen_mask) {
		if (seen_is(&ps->seen[i], h, s, len)) {
			*id = ps->seen[i].id;
			return 0;
		}
	}
	err = intern(ps, s, len, id);
	if (err || len > UINT32_MAX)
		return err;
	e = &ps->seen[i];
	*e = (struct seen){ .s = s, .hash = h, .len = len, .id = *id };
	if (len <= sizeof(e->text))
		memcpy(e->text, s, len);
	if (++ps->nseen > ps->seen_mask / 2)
		return seen_grow(ps);
	return 0;
}

static int parse_line(struct parse *ps, const char *line, size_t len, int64_t sec)
{
	const char *stack_end, *frame, *semi;
	size_t depth = 0, stack_len;
	uint64_t count;
	int err;

	while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	if (!len)
		return 0;
	stack_end = line + len;
	while (stack_end > line && stack_end[-1] != ' ' && stack_end[-1] != '\t')
		stack_end--;
	err = parse_count(stack_end, line + len - stack_end, &count);
	if (err)
		return err;
	/* One blank separates the count, as flamegraph.pl reads it: a name may end in spaces
	 * (the store turns control characters into them). */
	stack_len = stack_end > line ? stack_end - line - 1 : 0;
	if (!stack_len || !count)
		return -EINVAL;
	if (count > UINT64_MAX - ps->total)
		return -ERANGE; /* the views divide by the total: it must not wrap */
	for (frame = line; frame <= line + stack_len; frame = semi + 1) {
		semi = memchr(frame, ';', line + stack_len - frame);
		if (!semi)
			semi = line + stack_len;
		if (semi == frame || memchr(frame, '\0', semi - frame))
			return -EINVAL;
		if (depth == ps->cap) {
			err = grow(ps);
			if (err)
				return err;
		}
		err = frame_id(ps, frame, semi - frame, &ps->frames[depth++]);
		if (err)
			return err;
	}
	err = profile_add(ps->p, sec, ps->frames, depth, count);
	if (!err)
		ps->total += count;
	return err;
}

int folded_parse(struct profile *p, const char *text, size_t len, int64_t sec,
		 size_t *bad_line)
{
	struct profile_stats stats;
	struct parse ps = { .p = p };
	const char *line = text, *nl, *end = text + len;
	size_t lineno = 0;
	int err = 0;

	if (seen_grow(&ps))
		return -ENOMEM;
	profile_get_stats(p, &stats);
	ps.total = stats.total;
	while (line < end) {
		nl = memchr(line, '\n', end - line);
		if (!nl)
			nl = end;
		lineno++;
		err = parse_line(&ps, line, nl - line, sec);
		if (err) {
			if (bad_line)
				*bad_line = lineno;
			break;
		}
		line = nl + 1;
	}
	free(ps.frames);
	free(ps.seen);
	free(ps.name);
	return err;
}
