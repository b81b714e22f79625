#include <cjson/cJSON.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "aggregate/aggregator.h"
#include "aggregate/http.h"
#include "fs/tree.h"
#include "web/http.h"
#include "web/tree_http.h"

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

static enum MHD_Result answer_too_large(struct aggregator *g, struct MHD_Connection *c)
{
	atomic_fetch_add(&g->rejected[AGG_REJECT_TOO_LARGE], 1);
	return http_answer_error(c, 413, "request body larger than the aggregator reads");
}

static const struct token *caller_token(struct aggregator *g, struct MHD_Connection *c)
{
	const char *bearer = http_bearer(c);

	return bearer ? tokens_find(g->tokens, bearer) : NULL;
}

static enum MHD_Result post_batch(struct aggregator *g, struct MHD_Connection *c,
				  struct request *rq)
{
	const char *enc = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						      MHD_HTTP_HEADER_CONTENT_ENCODING);
	int64_t start = agg_clock_ns();
	char reply[1024];
	int status;

	if (enc && strcasecmp(enc, "gzip")) {
		atomic_fetch_add(&g->rejected[AGG_REJECT_VERSION], 1);
		return http_answer_error(c, 415, "Content-Encoding must be gzip");
	}
	status = aggregator_ingest(g, caller_token(g, c),
				   MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							       MHD_HTTP_HEADER_CONTENT_TYPE),
				   MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							       "X-Aperture-Batch-Version"),
				   rq->body, rq->len, reply, sizeof(reply));
	agg_latency_observe(&g->ingest_latency, start);
	return http_answer_json(c, status, reply);
}

/* A multipart/form-data body's `profile` field, as Pyroscope's agents send pprof (or `jfr`,
 * pyroscope-java's). */
struct form_field {
	uint8_t *data;
	size_t len;
	bool too_large;
};

static enum MHD_Result form_iterate(void *cls, enum MHD_ValueKind kind, const char *key,
				    const char *filename, const char *type,
				    const char *encoding, const char *data, uint64_t off,
				    size_t size)
{
	struct form_field *f = cls;
	uint8_t *bigger;

	/* pyroscope-java's JFR comes as `jfr` (its `labels`, dynamic labels, are not kept) */
	if ((strcmp(key, "profile") && strcmp(key, "jfr")) || !size)
		return MHD_YES;
	if (f->len + size > AGG_MAX_BODY) {
		f->too_large = true;
		return MHD_NO;
	}
	bigger = realloc(f->data, f->len + size);
	if (!bigger)
		return MHD_NO;
	f->data = bigger;
	memcpy(f->data + f->len, data, size);
	f->len += size;
	return MHD_YES;
}

/* The connect protocol's code for an HTTP status (connectrpc.com/docs/protocol). */
static const char *connect_code(int status)
{
	switch (status) {
	case 400: return "invalid_argument";
	case 401: return "unauthenticated";
	case 403: return "permission_denied";
	case 413: return "resource_exhausted";
	case 415: return "unimplemented";
	case 503: return "unavailable";
	}
	return status == 422 ? "invalid_argument" : "internal";
}

/* POST /push.v1.PusherService/Push, as connect's unary call over protobuf: an empty
 * PushResponse (no bytes), or connect's error JSON with its HTTP status. */
static enum MHD_Result post_push(struct aggregator *g, struct MHD_Connection *c,
				 struct request *rq)
{
	const char *type = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_CONTENT_TYPE);
	int64_t start = agg_clock_ns();
	cJSON *o, *e = NULL, *err_json;
	char reply[1024], *s = NULL;
	int status;

	if (!type || (strncasecmp(type, "application/proto", 17) &&
		      strncasecmp(type, "application/x-protobuf", 22))) {
		atomic_fetch_add(&g->rejected[AGG_REJECT_VERSION], 1);
		status = 415;
		snprintf(reply, sizeof(reply), "{\"error\":\"Content-Type: application/proto\"}");
	} else {
		status = aggregator_pyroscope_push(g, g->insecure ? NULL : caller_token(g, c),
			MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_CONTENT_ENCODING),
			rq->body, rq->len, reply, sizeof(reply));
	}
	agg_latency_observe(&g->ingest_latency, start);
	if (status == 200)
		return http_answer(c, 200, "application/proto", calloc(1, 1), 0);
	o = cJSON_Parse(reply);
	err_json = cJSON_CreateObject();
	if (err_json && cJSON_AddStringToObject(err_json, "code", connect_code(status)) &&
	    cJSON_AddStringToObject(err_json, "message",
				    cJSON_GetStringValue(e = cJSON_GetObjectItem(o, "error")) ?
				    e->valuestring : reply))
		s = cJSON_PrintUnformatted(err_json);
	cJSON_Delete(o);
	cJSON_Delete(err_json);
	return s ? http_answer(c, status, "application/json", s, strlen(s)) : MHD_NO;
}

static enum MHD_Result post_pyroscope(struct aggregator *g, struct MHD_Connection *c,
				      struct request *rq)
{
	const char *type = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_CONTENT_TYPE);
	struct agg_pyroscope_query q = {
#define ARG(name) MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name)
		.name = ARG("name"), .from = ARG("from"), .until = ARG("until"),
		.format = ARG("format"), .sample_rate = ARG("sampleRate"),
		.spy_name = ARG("spyName"), .units = ARG("units"),
#undef ARG
	};
	const struct token *k = g->insecure ? NULL : caller_token(g, c);
	struct form_field f = {0};
	const uint8_t *body = rq->body;
	size_t len = rq->len;
	int64_t start = agg_clock_ns();
	char reply[1024];
	int status;

	if (type && !strncasecmp(type, "multipart/form-data", 19)) {
		struct MHD_PostProcessor *pp = MHD_create_post_processor(c, 65536, form_iterate,
									 &f);

		if (!pp || MHD_post_process(pp, (const char *)rq->body, rq->len) != MHD_YES ||
		    !f.data) {
			if (pp)
				MHD_destroy_post_processor(pp);
			free(f.data);
			atomic_fetch_add(&g->rejected[AGG_REJECT_MALFORMED], 1);
			return http_answer_error(c, f.too_large ? 413 : 400,
					    "multipart/form-data without a profile or jfr field");
		}
		MHD_destroy_post_processor(pp);
		body = f.data;
		len = f.len;
		if (!q.format)
			q.format = "pprof";
	}
	status = aggregator_pyroscope(g, k, &q, body, len, reply, sizeof(reply));
	free(f.data);
	agg_latency_observe(&g->ingest_latency, start);
	return http_answer_json(c, status, reply);
}

/* The scope a path names, "nodes/<n>" or "services/<s>": the token must cover it. */
static bool may_read(void *ctx, const void *caller, const char *path)
{
	struct aggregator *g = ctx;
	const struct token *k = caller;
	char kind[16], name[256];

	if (g->insecure || token_reads_all(k))
		return true;
	if (sscanf(path, "/%15[^/]/%255[^/]", kind, name) != 2)
		return true; /* the root and its files: no stack data */
	if (!strcmp(kind, "nodes"))
		return token_reads_node(k, name);
	if (!strcmp(kind, "services"))
		return token_reads_service(k, name);
	return true;
}

static bool may_list(void *ctx, const void *caller, int kind, const char *name)
{
	struct aggregator *g = ctx;
	const struct token *k = caller;

	return g->insecure || token_reads_all(k) ||
	       (kind == AGG_SCOPE_NODE ? token_reads_node(k, name) :
		token_reads_service(k, name));
}

static enum MHD_Result get_path(struct aggregator *g, struct MHD_Connection *c,
				const char *path)
{
	const struct token *k = g->insecure ? NULL : caller_token(g, c);
	const struct tree_http h = { .tree = &g->tree, .may_read = may_read,
				     .may_list = may_list, .ctx = g, .reads = &g->reads,
				     .read_errors = &g->read_errors };
	enum MHD_Result ret;

	if (tree_http_page(c, path, &ret)) {
		atomic_fetch_add(&g->reads, 1);
		return ret;
	}
	if (!g->insecure && !k) {
		atomic_fetch_add(&g->reads, 1);
		return http_answer_error(c, 401, "missing or unknown bearer token");
	}
	return tree_http_get(&h, k, c, path);
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
			return answer_too_large(g, c);
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
	if (post && rq->too_large)
		return answer_too_large(g, c);
	if (post && !strcmp(url, "/v1/batches"))
		return post_batch(g, c, rq);
	if (post && !strcmp(url, "/ingest"))
		return post_pyroscope(g, c, rq);
	if (post && !strcmp(url, "/push.v1.PusherService/Push"))
		return post_push(g, c, rq);
	if (!strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD))
		return get_path(g, c, url);
	return http_answer_error(c, 405, "GET a path of the tree, or POST /v1/batches, /ingest "
				 "or /push.v1.PusherService/Push");
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

int agg_http_start(struct aggregator *g, const struct agg_http_options *opt,
		   struct agg_http **out, char *why, size_t why_size)
{
	struct agg_http *h = calloc(1, sizeof(*h));
	int err;

	if (!h)
		return -ENOMEM;
	if (opt->tls_cert || opt->tls_key) {
		h->cert = opt->tls_cert ? secret_file_read(opt->tls_cert) : NULL;
		h->key = opt->tls_key ? secret_file_read(opt->tls_key) : NULL;
		if (!h->cert || !h->key) {
			snprintf(why, why_size, "--tls-cert and --tls-key: both PEM files, readable");
			err = -EINVAL;
			goto fail;
		}
	}
	err = http_start(&(struct http_listener){
				.listen = opt->listen, .threads = opt->threads ? opt->threads : 4,
				.timeout_s = 60, .cert = h->cert, .key = h->key,
				.handle = handle, .completed = completed, .ctx = g },
			 &h->d, NULL, why, why_size);
	if (err)
		goto fail;
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
