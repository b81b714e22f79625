#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "aggregate/tokens.h"
#include "daemon/aperture.h"
#include "daemon/http.h"
#include "web/http.h"
#include "web/tree_http.h"

struct node_http {
	struct MHD_Daemon *d;
	struct aperture *a;
	struct tree tree;       /* the live tree, as FUSE serves it */
	struct tree_http th;
	struct tokens *tokens;  /* NULL: none asked */
	bool loopback;          /* the listener's address: only local callers reach it */
	char node[256];
};

static enum MHD_Result get_metrics(struct node_http *h, struct MHD_Connection *c)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	if (!out)
		return MHD_NO;
	if (aperture_metrics(h->a, out)) {
		fclose(out);
		free(text);
		return http_answer_error(c, 500, "out of memory");
	}
	fclose(out);
	return http_answer(c, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
}

/* Stack data: any local caller on a loopback listener without tokens; else a token that
 * reads this node. 0, or the HTTP status refusing it. */
static unsigned refusal(struct node_http *h, struct MHD_Connection *c, const char **why)
{
	const char *bearer = http_bearer(c);
	const struct token *k;

	if (!h->tokens) {
		*why = "this listener is not on a loopback address: start the daemon with "
		       "--http-tokens FILE to serve stack data here";
		return h->loopback ? 0 : 403;
	}
	k = bearer ? tokens_find(h->tokens, bearer) : NULL;
	if (!k) {
		*why = "missing or unknown bearer token";
		return 401;
	}
	*why = "this token may not read this node";
	return token_reads_all(k) || token_reads_node(k, h->node) ? 0 : 403;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	struct node_http *h = cls;
	enum MHD_Result ret;
	const char *why;
	unsigned status;

	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return http_answer_error(c, 405, "GET a path of the tree, or /metrics");
	if (!strcmp(url, "/metrics"))
		return get_metrics(h, c);
	if (tree_http_page(c, url, &ret))
		return ret;
	status = refusal(h, c, &why);
	if (status)
		return http_answer_error(c, status, why);
	return tree_http_get(&h->th, NULL, c, url);
}

int node_http_start(struct aperture *a, const struct node_http_options *opt,
		    struct node_http **out, char *why, size_t why_size)
{
	struct node_http *h = calloc(1, sizeof(*h));
	int err = 0;

	if (!h)
		return -ENOMEM;
	if (opt->tokens)
		err = tokens_load(opt->tokens, &h->tokens, why, why_size);
	if (err)
		goto fail;
	if (opt->node)
		snprintf(h->node, sizeof(h->node), "%s", opt->node);
	else if (gethostname(h->node, sizeof(h->node) - 1))
		snprintf(h->node, sizeof(h->node), "localhost");
	h->a = a;
	tree_init_live(&h->tree, a);
	h->th = (struct tree_http){ .tree = &h->tree, .node = h->node };
	/* Two threads: the page asks for a node's targets' status files at once. */
	err = http_start(&(struct http_listener){ .listen = opt->listen, .threads = 2,
						  .timeout_s = 30, .handle = handle, .ctx = h },
			 &h->d, &h->loopback, why, why_size);
	if (err)
		goto fail;
	*out = h;
	return 0;
fail:
	tokens_free(h->tokens);
	free(h);
	return err;
}

void node_http_stop(struct node_http *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->d);
	tokens_free(h->tokens);
	free(h);
}
