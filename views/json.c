// SPDX-License-Identifier: GPL-2.0
/* The call tree as JSON in d3-flame-graph's shape, inside an object that says what it is:
 *
 *   {"title":"cpu: app (pid 7)","unit":"samples","total":12,
 *    "window":{"seconds":0,"since":"2026-11-21T14:03:05Z","until":"2026-11-21T14:04:05Z"},
 *    "period":{"type":"cpu","unit":"nanoseconds","value":10101010},
 *    "tree":{"name":"all","value":12,"children":[{"name":"main","value":12,
 *            "file":"app.c","line":3,"children":[...]}]}}
 *
 * Names are escaped by cJSON (after invalid UTF-8 is replaced); the tree's brackets are
 * written here, since a cJSON object per node would cost more memory than the profile. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "views/describe.h"
#include "views/tree.h"
#include "views/views.h"
#include "views/writer.h"

/* s as a JSON string literal, in a new string; NULL when out of memory. */
static char *json_string(const char *s)
{
	char *clean = utf8_clean(s), *quoted = NULL;
	cJSON *str;

	if (!clean)
		return NULL;
	str = cJSON_CreateStringReference(clean);
	if (str)
		quoted = cJSON_PrintUnformatted(str);
	cJSON_Delete(str);
	free(clean);
	return quoted;
}

static int put_string(struct writer *w, const char *s)
{
	char *q = json_string(s ? s : "");

	if (!q)
		return -ENOMEM;
	writer_str(w, q);
	free(q);
	return 0;
}

static int put_header(struct writer *w, const struct profile_snapshot *s,
		      const struct view_meta *m)
{
	char since[32], until[32];

	if (describe_time(s->since, since) || describe_time(m->now, until))
		return -EINVAL;
	writer_str(w, "{\"title\":");
	if (put_string(w, m->title))
		return -ENOMEM;
	writer_str(w, ",\"unit\":");
	if (put_string(w, s->unit))
		return -ENOMEM;
	writer_printf(w, ",\"total\":%" PRIu64 ",\"window\":{\"seconds\":%" PRId64
		      ",\"since\":\"%s\",\"until\":\"%s\"}", s->total, m->window_s, since, until);
	if (m->period_type) {
		writer_str(w, ",\"period\":{\"type\":");
		if (put_string(w, m->period_type))
			return -ENOMEM;
		writer_str(w, ",\"unit\":");
		if (put_string(w, m->period_unit))
			return -ENOMEM;
		writer_printf(w, ",\"value\":%" PRIu64 "}", m->period);
	}
	writer_str(w, ",\"tree\":");
	return 0;
}

static int put_node(struct writer *w, const struct tree *t, const struct tree_node *n,
		    char *const *quoted)
{
	const struct frame_info *info = n->name == TREE_ROOT_NAME ? NULL : t->names[n->name].info;

	writer_str(w, "{\"name\":");
	writer_str(w, n->name == TREE_ROOT_NAME ? "\"all\"" : quoted[n->name]);
	writer_str(w, ",\"value\":");
	writer_u64(w, n->value[0]);
	if (info && info->file) {
		writer_str(w, ",\"file\":");
		if (put_string(w, info->file))
			return -ENOMEM;
		if (info->line)
			writer_printf(w, ",\"line\":%u", info->line);
	}
	writer_str(w, ",\"children\":[");
	return 0;
}

int view_json(const struct profile_snapshot *s, const struct view_meta *m, FILE *out)
{
	char **quoted = NULL;
	struct tree t;
	struct writer *w = NULL;
	uint32_t open = 0;
	size_t i;
	int err;

	err = tree_build(&s, 1, &t);
	if (err)
		return err;
	err = -ENOMEM;
	quoted = calloc(t.nnames ? t.nnames : 1, sizeof(*quoted));
	w = writer_new(out);
	if (!quoted || !w)
		goto out;
	for (i = 0; i < t.nnames; i++)
		if (!(quoted[i] = json_string(t.names[i].name)))
			goto out;
	err = put_header(w, s, m);
	if (err)
		goto out;
	/* Preorder: a node at a depth no deeper than the one before closes the nodes between. */
	for (i = 0; i < t.nnodes; i++) {
		if (i && t.nodes[i].depth <= t.nodes[i - 1].depth) {
			for (; open >= t.nodes[i].depth + 1; open--)
				writer_str(w, "]}");
			writer_str(w, ",");
		}
		err = put_node(w, &t, &t.nodes[i], quoted);
		if (err)
			goto out;
		open = t.nodes[i].depth + 1;
	}
	for (; open; open--)
		writer_str(w, "]}");
	writer_str(w, "}\n");
	err = writer_close(w);
	w = NULL;
out:
	if (w)
		writer_close(w);
	for (i = 0; quoted && i < t.nnames; i++)
		free(quoted[i]);
	free(quoted);
	tree_free(&t);
	return err;
}
