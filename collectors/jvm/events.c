/* The agent's event records into the target's profiles. Text from inside the JVM: each line
 * is checked, and frame names go through the store's interning, which makes them safe for
 * folded output. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "collectors/jvm/jvm.h"
#include "collectors/jvm/jvm_internal.h"
#include "store/profile.h"

#define MAX_FRAMES 66 /* the thread and the agent's 64 frames, with room to spare */

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return *s && *s != '-' && !*end && !errno ? 0 : -EPROTO;
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

static int add_line(char *line, const struct jvm_profiles *p, int64_t sec,
		    struct jvm_drain *d)
{
	char *names[MAX_FRAMES], *kind = strsep(&line, "\t"), *f;
	uint64_t value, count;
	size_t depth = 0;
	int err;

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
		   struct jvm_drain *d)
{
	char *line, *rest = text;
	int err = 0;

	text[len] = 0;
	while (!err && (line = strsep(&rest, "\n")) && *line)
		err = add_line(line, p, sec, d);
	return err;
}
