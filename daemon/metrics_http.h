/* A node's HTTP listener (`aperture mount --http ADDR:PORT`): GET /metrics for Prometheus,
 * the same text as the tree's metrics file. It serves no stack data, so it asks no token. */
#ifndef APERTURE_DAEMON_METRICS_HTTP_H
#define APERTURE_DAEMON_METRICS_HTTP_H

#include <stddef.h>

struct aperture;
struct metrics_http;

/* Starts serving on its own thread; why says what failed. */
int metrics_http_start(struct aperture *a, const char *listen, struct metrics_http **out,
		       char *why, size_t why_size);
void metrics_http_stop(struct metrics_http *h);

#endif
