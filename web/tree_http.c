#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "web/http.h"
#include "web/tree_http.h"

extern const char web_index_html[], web_app_js[], web_app_css[];

bool tree_http_page(struct MHD_Connection *c, const char *path, enum MHD_Result *ret)
{
	const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							 MHD_HTTP_HEADER_ACCEPT);
	const char *page = NULL, *type = NULL;
	char *data;

	if (!strcmp(path, "/") && accept && strstr(accept, "text/html")) {
		type = "text/html; charset=utf-8";
		page = web_index_html;
	} else if (!strcmp(path, "/ui/app.js")) {
		type = "text/javascript; charset=utf-8";
		page = web_app_js;
	} else if (!strcmp(path, "/ui/app.css")) {
		type = "text/css; charset=utf-8";
		page = web_app_css;
	}
	if (!page)
		return false;
	data = strdup(page);
	*ret = data ? http_answer(c, 200, type, data, strlen(data)) : MHD_NO;
	return true;
}

static void count(_Atomic uint64_t *counter)
{
	if (counter)
		atomic_fetch_add(counter, 1);
}

static const char *content_type(const char *path)
{
	const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');

	if (!dot || (slash && dot < slash))
		return "text/plain; charset=utf-8";
	if (!strcmp(dot, ".json"))
		return "application/json";
	if (!strcmp(dot, ".svg"))
		return "image/svg+xml";
	if (!strcmp(dot, ".pprof"))
		return "application/octet-stream";
	return "text/plain; charset=utf-8";
}

static bool may_read(const struct tree_http *h, const void *caller, const char *path)
{
	return !h->may_read || h->may_read(h->ctx, caller, path);
}

/* A node's tree as the page sees the fleet's: what path (as asked) is in the tree, into
 * out. 1: path is /nodes/ or /services/, listed by the caller; 0: out holds the tree's path;
 * -ENOENT: another node's. */
static int tree_path(const struct tree_http *h, const char *path, char *out, size_t size)
{
	size_t nl;

	if (!h->node || (strncmp(path, "/nodes", 6) && strncmp(path, "/services", 9))) {
		snprintf(out, size, "%s", path);
		return 0;
	}
	if (!strcmp(path, "/nodes") || !strcmp(path, "/nodes/") || !strcmp(path, "/services") ||
	    !strcmp(path, "/services/"))
		return 1;
	nl = strlen(h->node);
	if (strncmp(path, "/nodes/", 7) || strncmp(path + 7, h->node, nl) ||
	    (path[7 + nl] && path[7 + nl] != '/'))
		return -ENOENT;
	snprintf(out, size, "%s", path[7 + nl] ? path + 7 + nl : "/");
	return 0;
}

/* A node's /nodes/ (itself) or /services/ (none: its targets are its own). */
static enum MHD_Result get_node_scopes(const struct tree_http *h, struct MHD_Connection *c,
				       const char *path)
{
	cJSON *o = cJSON_CreateObject(), *entries, *e;
	char *s = NULL;

	if (o && cJSON_AddStringToObject(o, "path", path) &&
	    (entries = cJSON_AddArrayToObject(o, "entries"))) {
		if (strncmp(path, "/nodes", 6) ||
		    ((e = cJSON_CreateObject()) && cJSON_AddStringToObject(e, "name", h->node) &&
		     cJSON_AddStringToObject(e, "type", "dir") &&
		     cJSON_AddItemToArray(entries, e)))
			s = cJSON_PrintUnformatted(o);
	}
	cJSON_Delete(o);
	return s ? http_answer(c, 200, "application/json", s, strlen(s)) : MHD_NO;
}

struct listing {
	const struct tree_http *h;
	const void *caller;
	int scopes;      /* -1, or the kind of scope directories listed */
	bool records;    /* a node's targets/: only processes it profiles or did */
	uint32_t scope;
	cJSON *entries;
};

static int listing_add(void *ctx, const char *name, uint64_t ino, mode_t mode)
{
	struct listing *l = ctx;
	cJSON *e;

	if (l->scopes >= 0 && l->h->may_list &&
	    !l->h->may_list(l->h->ctx, l->caller, l->scopes, name))
		return 0; /* out of the caller's scope: not even its name */
	if (l->records) {
		struct target_info info;

		/* Like the aggregator's: every process of the machine is a page of status
		 * files nobody asked for. */
		if (l->h->tree->ops->target_info(l->h->tree, l->scope, atoi(name), &info) ||
		    !info.since)
			return 0;
	}
	e = cJSON_CreateObject();
	if (!e || !cJSON_AddStringToObject(e, "name", name) ||
	    !cJSON_AddStringToObject(e, "type", S_ISDIR(mode) ? "dir" : "file")) {
		cJSON_Delete(e);
		return -ENOMEM;
	}
	cJSON_AddItemToArray(l->entries, e);
	return 0;
}

static enum MHD_Result get_dir(const struct tree_http *h, const void *caller,
			       struct MHD_Connection *c, const char *path,
			       const struct node_ref *ref)
{
	struct listing l = { .h = h, .caller = caller, .scopes = -1 };
	cJSON *o = cJSON_CreateObject();
	char *s = NULL;
	int err = -ENOMEM;

	if (ref->node->dynamic == NODE_SCOPES)
		l.scopes = ref->node->arg;
	l.records = h->node && ref->node->dynamic == NODE_TARGETS;
	l.scope = ref->scope;
	if (o && cJSON_AddStringToObject(o, "path", path) &&
	    (l.entries = cJSON_AddArrayToObject(o, "entries")))
		err = tree_list(h->tree, ref, listing_add, &l);
	if (!err)
		s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!s)
		return http_answer_error(c, err == -EIO ? 503 : 500,
					 strerror(err ? -err : ENOMEM));
	return http_answer(c, 200, "application/json", s, strlen(s));
}

/* ?last= or ?from=&until= (with a prefix: ?base_last=...): none set is everything kept. */
static int query_range(struct MHD_Connection *c, const char *prefix, struct tree_range *r,
		       char *why, size_t why_size)
{
	char kl[32], kf[32], ku[32];
	const char *last, *from, *until;
	char spec[64];
	int64_t last_s;
	int err;

	snprintf(kl, sizeof(kl), "%slast", prefix);
	snprintf(kf, sizeof(kf), "%sfrom", prefix);
	snprintf(ku, sizeof(ku), "%suntil", prefix);
	last = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, kl);
	from = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, kf);
	until = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, ku);
	*r = (struct tree_range){0};
	if (!last && !from && !until)
		return 0;
	if (last && (from || until)) {
		snprintf(why, why_size, "give last, or from and until, not both");
		return -EINVAL;
	}
	if (last) {
		err = tree_parse_range(last, r, &last_s);
		if (!err && !last_s)
			err = -EINVAL;
		if (err) {
			snprintf(why, why_size, "last=%s: seconds, 1..604800", last);
			return err;
		}
		int64_t now = time(NULL);

		*r = (struct tree_range){ .from = now - last_s + 1, .until = now, .set = true };
		return 0;
	}
	snprintf(spec, sizeof(spec), "%s..%s", from ? from : "0",
		 until ? until : "4102444800"); /* 2100-01-01: no end */
	err = tree_parse_range(spec, r, &last_s);
	if (err || !r->set) {
		snprintf(why, why_size, "from and until: unix seconds, from <= until");
		return -EINVAL;
	}
	return 0;
}

/* A read's error as an answer: -ERANGE is a range the tree does not keep. */
static enum MHD_Result answer_read_error(const struct tree_http *h, struct MHD_Connection *c,
					 const char *path, int err)
{
	char why[512];

	count(h->read_errors);
	snprintf(why, sizeof(why), "%s: %s", path,
		 err == -EIO ? "the store failed (its error is in the server's log); retry later" :
		 err == -ERANGE ? "the range is outside what this server keeps (a node: its "
				  "last 600 s, up to now)" :
		 err == -ENOENT ? "no such file" : strerror(-err));
	return http_answer_error(c, err == -ENOENT ? 404 : err == -EIO ? 503 :
				 err == -ERANGE ? 400 : 500, why);
}

/* GET /compare?type=cpu&base=PATH&path=PATH&format=folded|svg, each range as ?last= or
 * ?from=&until= (the base's prefixed base_): both paths directories of the tree, both
 * readable by the caller. */
static enum MHD_Result get_compare(const struct tree_http *h, const void *caller,
				   struct MHD_Connection *c)
{
#define ARG(name) MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name)
	const char *type = ARG("type"), *format = ARG("format"), *base = ARG("base"),
		   *path = ARG("path");
#undef ARG
	char why[256], base_path[1024], now_path[1024], *data;
	struct tree_compare cmp = { .base_path = base_path, .path = now_path };
	size_t len;
	int t, err;

	t = tree_profile_by_name(type ? type : "cpu");
	if (t < 0 || !base || !path || base[0] != '/' || path[0] != '/' ||
	    (format && strcmp(format, "folded") && strcmp(format, "svg")))
		return http_answer_error(c, 400, "want type=cpu|offcpu|locks|alloc|alloc_objects|"
					 "monitors, base=PATH, path=PATH, format=folded|svg");
	if (!may_read(h, caller, base) || !may_read(h, caller, path))
		return http_answer_error(c, 403, "this token may not read that node or service");
	if (query_range(c, "", &cmp.range, why, sizeof(why)) ||
	    query_range(c, "base_", &cmp.base_range, why, sizeof(why)))
		return http_answer_error(c, 400, why);
	if (tree_path(h, base, base_path, sizeof(base_path)) ||
	    tree_path(h, path, now_path, sizeof(now_path)))
		return http_answer_error(c, 404, "base and path: a target's or a service's "
					 "directory");
	cmp.type = t;
	cmp.svg = format && !strcmp(format, "svg");
	err = tree_compare(h->tree, &cmp, &data, &len);
	if (err == -ENOENT) {
		count(h->read_errors);
		return http_answer_error(c, 404, "base and path: a target's or a service's "
					 "directory");
	}
	if (err)
		return answer_read_error(h, c, "/compare", err);
	if (!data)
		data = calloc(1, 1);
	return http_answer(c, 200, cmp.svg ? "image/svg+xml" : "text/plain; charset=utf-8",
			   data, len);
}

enum MHD_Result tree_http_get(const struct tree_http *h, const void *caller,
			      struct MHD_Connection *c, const char *path)
{
	struct tree_range range;
	struct node_ref ref;
	char why[256], in_tree[1024], *data;
	size_t len;
	int err;

	count(h->reads);
	if (!strcmp(path, "/compare"))
		return get_compare(h, caller, c);
	if (!may_read(h, caller, path))
		return http_answer_error(c, 403, "this token may not read that node or service");
	if (query_range(c, "", &range, why, sizeof(why)))
		return http_answer_error(c, 400, why);
	err = tree_path(h, path, in_tree, sizeof(in_tree));
	if (err > 0)
		return get_node_scopes(h, c, path);
	if (!err)
		err = tree_walk(h->tree, in_tree, &ref);
	if (err)
		return answer_read_error(h, c, path, err == -EIO ? err : -ENOENT);
	ref.range = range;
	if (S_ISDIR(ref.node->mode))
		return get_dir(h, caller, c, path, &ref);
	err = tree_render(h->tree, &ref, &data, &len);
	if (err)
		return answer_read_error(h, c, path, err);
	/* An empty file is a valid answer; libmicrohttpd wants a buffer all the same. */
	if (!data)
		data = calloc(1, 1);
	return http_answer(c, 200, content_type(path), data, len);
}
