/* The tree over HTTP, for the page (web/page/) and for curl: GET of every path of a tree
 * (fs/tree.h) with the bytes a FUSE read gets, a directory as JSON, ?last= or ?from=&until=
 * for the range, GET /compare, and the page's own files. The aggregator serves its tree of
 * nodes and services through it; a node's daemon its own live tree, shown as the fleet's
 * one node so the same page works on both. */
#ifndef APERTURE_WEB_TREE_HTTP_H
#define APERTURE_WEB_TREE_HTTP_H

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "fs/tree.h"

struct tree_http {
	const struct tree *tree;
	/* A node's own tree, shown as the fleet's one node: /nodes/ lists node alone,
	 * /nodes/<node>/X is the tree's /X, /services/ is empty. NULL: the tree's paths. */
	const char *node;
	/* Whether caller may read a path (the scope it names: nodes/<n>, services/<s>) and
	 * see a scope directory's entry; NULL: everything. */
	bool (*may_read)(void *ctx, const void *caller, const char *path);
	bool (*may_list)(void *ctx, const void *caller, int kind, const char *name);
	void *ctx;
	_Atomic uint64_t *reads, *read_errors; /* counted when set */
};

/* The page's files: / (for a browser), /ui/app.js, /ui/app.css. They hold no data, so they
 * need no token. False when path is none of them. */
bool tree_http_page(struct MHD_Connection *c, const char *path, enum MHD_Result *ret);
/* GET path, or /compare, as caller may see it. */
enum MHD_Result tree_http_get(const struct tree_http *h, const void *caller,
			      struct MHD_Connection *c, const char *path);

/* GET /compare's work: type's profile of path over range against base_path's over
 * base_range (directories of the tree: a target or a service). */
struct tree_compare {
	const char *base_path, *path;
	struct tree_range base_range, range;
	enum target_profile type;
	bool svg; /* else folded: `stack BASE NOW` */
};
int tree_compare(const struct tree *t, const struct tree_compare *c, char **data, size_t *len);

#endif
