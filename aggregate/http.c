#include <cjson/cJSON.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "aggregate/aggregator.h"
#include "aggregate/http.h"
#include "fs/tree.h"

struct agg_http {
	struct MHD_Daemon *d;
	char *cert, *key;
};

/* One request's state across libmicrohttpd's calls: the body as it arrives. */
struct request {
	uint8_t *body;
	size_t len, cap;
	bool too_large;
};

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *type,
			      char *data, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, data,
								 MHD_RESPMEM_MUST_FREE);
	enum MHD_Result ret;

	if (!r) {
		free(data);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	if (status == 503 || status == 429)
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "5");
	if (status == 401)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer realm=\"aperture\"");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result answer_json(struct MHD_Connection *c, unsigned status, const char *json)
{
	char *copy = strdup(json);

	return copy ? answer(c, status, "application/json", copy, strlen(copy)) : MHD_NO;
}

static enum MHD_Result answer_error(struct MHD_Connection *c, unsigned status, const char *why)
{
	cJSON *o = cJSON_CreateObject();
	char *s = NULL;

	if (o && cJSON_AddStringToObject(o, "error", why))
		s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s ? answer(c, status, "application/json", s, strlen(s)) : MHD_NO;
}

static const struct token *caller_token(struct aggregator *g, struct MHD_Connection *c)
{
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_AUTHORIZATION);

	if (!auth || strncasecmp(auth, "Bearer ", 7))
		return NULL;
	auth += 7;
	while (*auth == ' ')
		auth++;
	return tokens_find(g->tokens, auth);
}

static enum MHD_Result post_batch(struct aggregator *g, struct MHD_Connection *c,
				  struct request *rq)
{
	const char *enc = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						      MHD_HTTP_HEADER_CONTENT_ENCODING);
	char reply[1024];
	int status;

	if (rq->too_large) {
		atomic_fetch_add(&g->rejected[AGG_REJECT_TOO_LARGE], 1);
		return answer_error(c, 413, "request body larger than the aggregator reads");
	}
	if (enc && strcasecmp(enc, "gzip")) {
		atomic_fetch_add(&g->rejected[AGG_REJECT_VERSION], 1);
		return answer_error(c, 415, "Content-Encoding must be gzip");
	}
	status = aggregator_ingest(g, caller_token(g, c),
				   MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							       MHD_HTTP_HEADER_CONTENT_TYPE),
				   MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							       "X-Aperture-Batch-Version"),
				   rq->body, rq->len, reply, sizeof(reply));
	return answer_json(c, status, reply);
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

/* The scope a path names, "nodes/<n>" or "services/<s>": the token must cover it. */
static bool may_read(struct aggregator *g, const struct token *k, const char *path)
{
	char kind[16], name[256];
	int n = 0;

	if (g->insecure || token_reads_all(k))
		return true;
	if (sscanf(path, "/%15[^/]/%255[^/]%n", kind, name, &n) != 2)
		return true; /* the root and its files: no stack data */
	if (!strcmp(kind, "nodes"))
		return token_reads_node(k, name);
	if (!strcmp(kind, "services"))
		return token_reads_service(k, name);
	return true;
}

struct listing {
	struct aggregator *g;
	const struct token *k;
	int scopes;      /* -1, or the kind of scope directories listed */
	cJSON *entries;
};

static int listing_add(void *ctx, const char *name, uint64_t ino, mode_t mode)
{
	struct listing *l = ctx;
	cJSON *e;

	if (l->scopes >= 0 && !l->g->insecure && !token_reads_all(l->k) &&
	    !(l->scopes == AGG_SCOPE_NODE ? token_reads_node(l->k, name) :
	      token_reads_service(l->k, name)))
		return 0; /* out of the token's scope: not even its name */
	e = cJSON_CreateObject();
	if (!e || !cJSON_AddStringToObject(e, "name", name) ||
	    !cJSON_AddStringToObject(e, "type", S_ISDIR(mode) ? "dir" : "file")) {
		cJSON_Delete(e);
		return -ENOMEM;
	}
	cJSON_AddItemToArray(l->entries, e);
	return 0;
}

static enum MHD_Result get_dir(struct aggregator *g, struct MHD_Connection *c,
			       const struct token *k, const char *path, const struct node_ref *ref)
{
	struct listing l = { .g = g, .k = k, .scopes = -1 };
	cJSON *o = cJSON_CreateObject();
	char *s = NULL;
	int err = -ENOMEM;

	if (ref->node->dynamic == NODE_SCOPES)
		l.scopes = ref->node->arg;
	if (o && cJSON_AddStringToObject(o, "path", path) &&
	    (l.entries = cJSON_AddArrayToObject(o, "entries")))
		err = tree_list(&g->tree, ref, listing_add, &l);
	if (!err)
		s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!s)
		return answer_error(c, err == -EIO ? 503 : 500, strerror(err ? -err : ENOMEM));
	return answer(c, 200, "application/json", s, strlen(s));
}

static int query_range(struct MHD_Connection *c, struct tree_range *r, char *why,
		       size_t why_size)
{
	const char *last = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "last");
	const char *from = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "from");
	const char *until = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "until");
	char spec[64];
	int64_t last_s;
	int err;

	*r = (struct tree_range){0};
	if (!last && !from && !until)
		return 0;
	if (last && (from || until)) {
		snprintf(why, why_size, "give last, or from and until, not both");
		return -EINVAL;
	}
	if (last) {
		err = agg_parse_range(last, r, &last_s);
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
	err = agg_parse_range(spec, r, &last_s);
	if (err || !r->set) {
		snprintf(why, why_size, "from and until: unix seconds, from <= until");
		return -EINVAL;
	}
	return 0;
}

extern const char agg_index_html[];

/* A browser asking for / gets a page over this same API; it holds no data itself. */
static bool wants_page(struct MHD_Connection *c, const char *path)
{
	const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							 MHD_HTTP_HEADER_ACCEPT);

	return !strcmp(path, "/") && accept && strstr(accept, "text/html");
}

static enum MHD_Result get_path(struct aggregator *g, struct MHD_Connection *c,
				const char *path)
{
	const struct token *k = g->insecure ? NULL : caller_token(g, c);
	struct tree_range range;
	struct node_ref ref;
	char why[256], *data;
	size_t len;
	int err;

	atomic_fetch_add(&g->reads, 1);
	if (wants_page(c, path)) {
		data = strdup(agg_index_html);
		return data ? answer(c, 200, "text/html; charset=utf-8", data, strlen(data)) : MHD_NO;
	}
	if (!g->insecure && !k)
		return answer_error(c, 401, "missing or unknown bearer token");
	if (!may_read(g, k, path))
		return answer_error(c, 403, "this token may not read that node or service");
	if (query_range(c, &range, why, sizeof(why)))
		return answer_error(c, 400, why);
	err = tree_walk(&g->tree, path, &ref);
	if (err) {
		atomic_fetch_add(&g->read_errors, 1);
		return answer_error(c, err == -EIO ? 503 : 404,
				    err == -EIO ? "the store failed" : "no such file");
	}
	ref.range = range;
	if (S_ISDIR(ref.node->mode))
		return get_dir(g, c, k, path, &ref);
	err = tree_render(&g->tree, &ref, &data, &len);
	if (err) {
		atomic_fetch_add(&g->read_errors, 1);
		snprintf(why, sizeof(why), "%s: %s", path, err == -EIO ?
			 "the store failed (its error is in the aggregator's log); retry later" :
			 strerror(-err));
		return answer_error(c, err == -ENOENT ? 404 : err == -EIO ? 503 : 500, why);
	}
	/* An empty file is a valid answer; libmicrohttpd wants a buffer all the same. */
	if (!data)
		data = calloc(1, 1);
	return answer(c, 200, content_type(path), data, len);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	struct aggregator *g = cls;
	struct request *rq = *con_cls;
	bool post = !strcmp(method, MHD_HTTP_METHOD_POST);

	if (!rq) {
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							     MHD_HTTP_HEADER_CONTENT_LENGTH);

		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		*con_cls = rq;
		/* Said too long up front: answered before a byte of it is read. */
		if (post && cl && strtoull(cl, NULL, 10) > AGG_MAX_BODY) {
			rq->too_large = true;
			return post_batch(g, c, rq);
		}
		return MHD_YES;
	}
	if (rq->too_large && post && *upload_data_size) {
		*upload_data_size = 0; /* the answer is queued: drop the rest */
		return MHD_YES;
	}
	if (*upload_data_size) {
		/* Past the limit the rest is read and dropped: the node gets its 413. */
		if (!rq->too_large && rq->len + *upload_data_size > AGG_MAX_BODY) {
			rq->too_large = true;
			free(rq->body);
			rq->body = NULL;
			rq->len = rq->cap = 0;
		}
		if (!rq->too_large) {
			if (rq->len + *upload_data_size > rq->cap) {
				size_t cap = (rq->len + *upload_data_size) * 2;
				uint8_t *bigger;

				if (cap > AGG_MAX_BODY)
					cap = AGG_MAX_BODY;
				bigger = realloc(rq->body, cap);
				if (!bigger)
					return MHD_NO;
				rq->body = bigger;
				rq->cap = cap;
			}
			memcpy(rq->body + rq->len, upload_data, *upload_data_size);
			rq->len += *upload_data_size;
		}
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (post && !strcmp(url, "/v1/batches"))
		return post_batch(g, c, rq);
	if (!strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD))
		return get_path(g, c, url);
	return answer_error(c, 405, "GET a path of the tree, or POST /v1/batches");
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	struct request *rq = *con_cls;

	if (rq)
		free(rq->body);
	free(rq);
	*con_cls = NULL;
}

static int parse_listen(const char *listen, struct sockaddr_storage *ss, char *why,
			size_t why_size)
{
	char host[256];
	const char *colon = strrchr(listen, ':');
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM }, *ai;
	size_t hl;

	if (!colon || colon == listen) {
		snprintf(why, why_size, "--listen %s: ADDR:PORT", listen);
		return -EINVAL;
	}
	hl = colon - listen;
	if (listen[0] == '[' && hl >= 2 && listen[hl - 1] == ']') {
		listen++;
		hl -= 2;
	}
	if (hl >= sizeof(host)) {
		snprintf(why, why_size, "--listen %s: address too long", listen);
		return -EINVAL;
	}
	memcpy(host, listen, hl);
	host[hl] = 0;
	if (getaddrinfo(host, colon + 1, &hints, &ai)) {
		snprintf(why, why_size, "--listen: %s is not a numeric ADDR:PORT", listen);
		return -EINVAL;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	return 0;
}

int agg_http_start(struct aggregator *g, const struct agg_http_options *opt,
		   struct agg_http **out, char *why, size_t why_size)
{
	struct agg_http *h = calloc(1, sizeof(*h));
	struct sockaddr_storage ss = {0};
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	int err;

	if (!h)
		return -ENOMEM;
	err = parse_listen(opt->listen, &ss, why, why_size);
	if (err)
		goto fail;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (opt->tls_cert || opt->tls_key) {
		h->cert = opt->tls_cert ? secret_file_read(opt->tls_cert) : NULL;
		h->key = opt->tls_key ? secret_file_read(opt->tls_key) : NULL;
		if (!h->cert || !h->key) {
			snprintf(why, why_size, "--tls-cert and --tls-key: both PEM files, readable");
			err = -EINVAL;
			goto fail;
		}
		flags |= MHD_USE_TLS;
	}
	/* Without TLS the certificate option's place ends the list. */
	h->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, g,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				MHD_OPTION_THREAD_POOL_SIZE, opt->threads ? opt->threads : 4,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60,
				MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
				h->cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, h->cert,
				MHD_OPTION_HTTPS_MEM_KEY, h->key,
				MHD_OPTION_END);
	if (!h->d) {
		snprintf(why, why_size, "cannot serve on %s (in use? TLS files valid?)",
			 opt->listen);
		err = -EADDRINUSE;
		goto fail;
	}
	*out = h;
	return 0;
fail:
	free(h->cert);
	free(h->key);
	free(h);
	return err;
}

void agg_http_stop(struct agg_http *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->d);
	free(h->cert);
	free(h->key);
	free(h);
}
