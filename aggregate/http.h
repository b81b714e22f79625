/* The aggregator's HTTP(S) server (libmicrohttpd): POST /v1/batches, and GET of every path of
 * the tree, answered by fs/tree.c with the same bytes a FUSE read gets. */
#ifndef APERTURE_AGGREGATE_HTTP_H
#define APERTURE_AGGREGATE_HTTP_H

#include <microhttpd.h>
#include <stddef.h>

struct aggregator;
struct agg_http;

struct agg_http_options {
	const char *listen;   /* ADDR:PORT, IPv4 or [IPv6]:PORT */
	const char *tls_cert; /* PEM files; both or neither */
	const char *tls_key;
	unsigned threads;
};

/* Starts serving on its own threads. why says what failed. */
int agg_http_start(struct aggregator *g, const struct agg_http_options *opt,
		   struct agg_http **out, char *why, size_t why_size);
void agg_http_stop(struct agg_http *h);

#endif
