/* Compare: one profile of a scope and range against another's (two time ranges of a
 * service, or one program on two nodes), rendered by views/diff.c: folded `stack BASE NOW`
 * or a differential flame graph, red grew, blue shrank. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "views/views.h"
#include "web/tree_http.h"

static int profile_at(const struct tree *t, const char *path, struct tree_range r,
		      enum target_profile type, struct profile_snapshot **out,
		      struct view_meta *m, char *title, size_t title_size)
{
	struct node_ref ref;
	int err = tree_walk(t, path, &ref);

	if (err)
		return err;
	if (!S_ISDIR(ref.node->mode) || (!ref.pid && !ref.scope))
		return -ENOENT;
	ref.range = r;
	return t->ops->profile(t, &ref, type, out, m, title, title_size);
}

int tree_compare(const struct tree *t, const struct tree_compare *c, char **data, size_t *len)
{
	struct profile_snapshot *base = NULL, *now = NULL;
	char base_title[256], title[256], both[600];
	struct view_meta bm, m;
	FILE *out = NULL;
	int err;

	*data = NULL;
	*len = 0;
	err = profile_at(t, c->base_path, c->base_range, c->type, &base, &bm, base_title,
			 sizeof(base_title));
	if (!err)
		err = profile_at(t, c->path, c->range, c->type, &now, &m, title, sizeof(title));
	if (err)
		goto out;
	out = open_memstream(data, len);
	if (!out) {
		err = -ENOMEM;
		goto out;
	}
	snprintf(both, sizeof(both), "%s against %s", title, base_title);
	m.title = both;
	err = c->svg ? view_diff_svg(base, now, &m, out) : view_diff_folded(base, now, out);
	if (fclose(out) && !err)
		err = -EIO;
	if (err) {
		free(*data);
		*data = NULL;
	}
out:
	profile_snapshot_free(base);
	profile_snapshot_free(now);
	return err;
}
