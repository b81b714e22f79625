/* The agent's thread records (protocol.h) into structures. The text comes from inside the
 * JVM, so every line is checked: a malformed one fails the whole parse with -EPROTO. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "collectors/jvm/jvm_internal.h"

#define MAX_FIELDS 12

static size_t split(char *line, char **f)
{
	size_t n = 0;

	while (n < MAX_FIELDS && line)
		f[n++] = strsep(&line, "\t");
	return line ? MAX_FIELDS + 1 : n;
}

static int parse_ll(const char *s, long long *v)
{
	char *end;

	errno = 0;
	*v = strtoll(s, &end, 10);
	return *s && !*end && !errno ? 0 : -EPROTO;
}

static int push(void **v, size_t *n, size_t size)
{
	void *bigger;

	/* Grows by doubling: at powers of two the array is full. */
	if (*n && (*n & (*n - 1)))
		goto room;
	bigger = realloc(*v, (*n ? 2 * *n : 1) * size);
	if (!bigger)
		return -ENOMEM;
	*v = bigger;
room:
	memset((char *)*v + *n * size, 0, size);
	(*n)++;
	return 0;
}

static int parse_thread(char **f, size_t n, struct jvm_thread *t)
{
	long long v;

	if (n != 11)
		return -EPROTO;
	if (parse_ll(f[1], &t->id))
		return -EPROTO;
	t->name = f[2];
	t->state = f[3];
	if (parse_ll(f[4], &v) || (v != 0 && v != 1))
		return -EPROTO;
	t->daemon = v;
	if (parse_ll(f[5], &v) || (v != 0 && v != 1))
		return -EPROTO;
	t->in_native = v;
	if (parse_ll(f[6], &t->cpu_ns) || parse_ll(f[7], &t->owner_id))
		return -EPROTO;
	t->owner_name = f[8];
	t->lock.hash = f[9];
	t->lock.cls = f[10];
	return 0;
}

static int parse_line(char *line, struct jvm_threads *out)
{
	struct jvm_thread *t = out->n ? &out->v[out->n - 1] : NULL;
	char *f[MAX_FIELDS];
	size_t n = split(line, f);
	long long v;
	int err;

	if (n > MAX_FIELDS || strlen(f[0]) != 1)
		return -EPROTO;
	switch (f[0][0]) {
	case 'T':
		err = push((void **)&out->v, &out->n, sizeof(*out->v));
		return err ? err : parse_thread(f, n, &out->v[out->n - 1]);
	case 'F':
		if (!t || n != 6 || parse_ll(f[4], &v) || v < -2 || v > 1 << 30)
			return -EPROTO;
		err = push((void **)&t->frames, &t->nframes, sizeof(*t->frames));
		if (err)
			return err;
		t->frames[t->nframes - 1] = (struct jvm_frame){ .cls = f[1], .method = f[2],
								.file = f[3], .line = v,
								.native = f[5][0] == '1' };
		return 0;
	case 'M':
		if (!t || n != 4 || parse_ll(f[1], &v) || v < -1 || v > 1 << 20)
			return -EPROTO;
		err = push((void **)&t->monitors, &t->nmonitors, sizeof(*t->monitors));
		if (err)
			return err;
		t->monitors[t->nmonitors - 1] = (struct jvm_lock){ .depth = v, .hash = f[2],
								    .cls = f[3] };
		return 0;
	case 'S':
		if (!t || n != 3)
			return -EPROTO;
		err = push((void **)&t->syncs, &t->nsyncs, sizeof(*t->syncs));
		if (err)
			return err;
		t->syncs[t->nsyncs - 1] = (struct jvm_lock){ .depth = -1, .hash = f[1],
							      .cls = f[2] };
		return 0;
	}
	return -EPROTO;
}

int jvm_threads_parse(char *text, size_t len, struct jvm_threads *out)
{
	char *line, *rest;
	int err = 0;

	memset(out, 0, sizeof(*out));
	out->text = text;
	if (len && text[len - 1] != '\n')
		err = -EPROTO;
	if (memchr(text, 0, len))
		err = -EPROTO;
	text[len] = 0;
	rest = text;
	while (!err && (line = strsep(&rest, "\n")) && *line)
		err = parse_line(line, out);
	if (!err && rest && *rest)
		err = -EPROTO;
	if (err) {
		out->text = NULL;
		jvm_threads_free(out);
	}
	return err;
}

void jvm_threads_free(struct jvm_threads *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->v[i].frames);
		free(t->v[i].monitors);
		free(t->v[i].syncs);
	}
	free(t->v);
	free(t->text);
	memset(t, 0, sizeof(*t));
}
