/* The agent's event records into the target's profiles. Text from inside the JVM: each line
 * is checked, and frame names go through the store's interning, which makes them safe for
 * folded output. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "collectors/cpu.h"
#include "collectors/jvm/jvm.h"
#include "collectors/jvm/jvm_internal.h"
#include "store/profile.h"

#define MAX_FRAMES 66 /* the thread and the agent's 64 frames, with room to spare */
#define MAX_JAVA_FRAMES 129 /* the agent's 128 and [truncated] */

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return *s && *s != '-' && !*end && !errno ? 0 : -EPROTO;
}

static int parse_int(const char *s, int *v)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(s, &end, 10);
	if (!*s || *end || errno || n < INT32_MIN || n > INT32_MAX)
		return -EPROTO;
	*v = n;
	return 0;
}

/* Interns names in p and adds count to that stack. */
static int add_stack(struct profile *p, char **names, size_t depth, int64_t sec, uint64_t count)
{
	uint32_t ids[MAX_FRAMES];

	for (size_t i = 0; i < depth; i++) {
		int err = profile_frame_id(p, names[i], &ids[i]);

		if (err)
			return err;
	}
	return profile_add(p, sec, ids, depth, count);
}

/* "C tid ns frame...": a Java stack walked for a CPU sample. */
static int add_java(char *line, struct jvm_java_stacks *java)
{
	struct cpu_java_stack *s;
	uint64_t tid, ns;
	char *f;

	if (!(f = strsep(&line, "\t")) || parse_u64(f, &tid) || !tid || tid > INT32_MAX ||
	    !(f = strsep(&line, "\t")) || parse_u64(f, &ns) || !line)
		return -EPROTO;
	if (java->n == java->cap) {
		size_t cap = java->cap ? 2 * java->cap : 256;
		struct cpu_java_stack *v = realloc(java->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		java->v = v;
		java->cap = cap;
	}
	s = &java->v[java->n];
	*s = (struct cpu_java_stack){ .tid = tid, .ns = ns };
	s->frames = malloc(MAX_JAVA_FRAMES * sizeof(*s->frames));
	if (!s->frames)
		return -ENOMEM;
	java->n++;
	while ((f = strsep(&line, "\t"))) {
		if (!*f || s->n == MAX_JAVA_FRAMES)
			return -EPROTO;
		s->frames[s->n++] = f;
	}
	return 0;
}

void jvm_java_stacks_free(struct jvm_java_stacks *java)
{
	for (size_t i = 0; i < java->n; i++)
		free(java->v[i].frames);
	free(java->v);
	*java = (struct jvm_java_stacks){ 0 };
}

static int add_line(char *line, const struct jvm_profiles *p, int64_t sec,
		    struct jvm_drain *d, struct jvm_java_stacks *java)
{
	char *names[MAX_FRAMES], *kind = strsep(&line, "\t"), *f;
	uint64_t value, count;
	size_t depth = 0;
	int err;

	if (!strcmp(kind, "C"))
		return add_java(line, java);
	if (!strcmp(kind, "E")) {
		if (!(f = strsep(&line, "\t")) || parse_u64(f, &java->failed) ||
		    !(f = strsep(&line, "\t")) || parse_u64(f, &java->dropped) || !line ||
		    parse_int(line, &java->last_error))
			return -EPROTO;
		return 0;
	}
	if (!strcmp(kind, "D")) {
		if (!line || parse_u64(line, &value))
			return -EPROTO;
		d->lost += value;
		return 0;
	}
	if (!strcmp(kind, "I"))
		return line && !parse_u64(line, &d->alloc_interval) ? 0 : -EPROTO;
	if ((strcmp(kind, "A") && strcmp(kind, "M")) || !(f = strsep(&line, "\t")) ||
	    parse_u64(f, &value) || !(f = strsep(&line, "\t")) || parse_u64(f, &count) || !line)
		return -EPROTO;
	while ((f = strsep(&line, "\t"))) {
		if (!*f || depth == MAX_FRAMES)
			return -EPROTO;
		names[depth++] = f;
	}
	/* The thread and at least one frame. */
	if (depth < 2)
		return -EPROTO;
	if (kind[0] == 'M')
		return add_stack(p->monitors, names, depth, sec, value);
	err = add_stack(p->alloc, names, depth, sec, value);
	return err ? err : add_stack(p->alloc_objects, names, depth, sec, count);
}

int jvm_events_add(char *text, size_t len, const struct jvm_profiles *p, int64_t sec,
		   struct jvm_drain *d, struct jvm_java_stacks *java)
{
	char *line, *rest = text;
	int err = 0;

	text[len] = 0;
	while (!err && (line = strsep(&rest, "\n")) && *line)
		err = add_line(line, p, sec, d, java);
	return err;
}
