/* A node's HTTP listener (`aperture mount --http ADDR:PORT [--http-tokens FILE]`): GET
 * /metrics for Prometheus (the tree's metrics file, no token), and the page (web/page/) over
 * the node's own live tree, shown as the fleet's one node, read-only. Stack data is served
 * without a token on a loopback address only; elsewhere it takes a read token of
 * --http-tokens (the aggregator's tokens file). */
#ifndef APERTURE_DAEMON_HTTP_H
#define APERTURE_DAEMON_HTTP_H

#include <stddef.h>

struct aperture;
struct node_http;

struct node_http_options {
	const char *listen; /* ADDR:PORT */
	const char *tokens; /* a tokens file, or NULL */
	const char *node;   /* the node's name on the page; NULL: the host's */
};

/* Starts serving on its own threads; why says what failed. */
int node_http_start(struct aperture *a, const struct node_http_options *opt,
		    struct node_http **out, char *why, size_t why_size);
void node_http_stop(struct node_http *h);

#endif
