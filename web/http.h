/* What every HTTP listener of Aperture shares (libmicrohttpd): answers, the listen address,
 * the bearer token of a request. The aggregator (aggregate/http.c) and a node's listener
 * (daemon/http.c) both serve through these. */
#ifndef APERTURE_WEB_HTTP_H
#define APERTURE_WEB_HTTP_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

/* Queues data (malloc'd; freed here, also on failure) as the answer, no-store. */
enum MHD_Result http_answer(struct MHD_Connection *c, unsigned status, const char *type,
			    char *data, size_t len);
/* {"error":why} with status. */
enum MHD_Result http_answer_error(struct MHD_Connection *c, unsigned status, const char *why);
/* A copy of json as the answer. */
enum MHD_Result http_answer_json(struct MHD_Connection *c, unsigned status, const char *json);
/* A listener: libmicrohttpd on its own threads, on ADDR:PORT (numeric, IPv4 or [IPv6]:PORT),
 * with TLS when cert and key (PEM text) are given. */
struct http_listener {
	const char *listen;
	unsigned threads, timeout_s;
	const char *cert, *key;
	MHD_AccessHandlerCallback handle;
	MHD_RequestCompletedCallback completed; /* or NULL */
	void *ctx;
};
/* Starts it into *out; *loopback (if not NULL) says whether only local callers can reach it.
 * -EINVAL (a bad address) or -EADDRINUSE, with why. */
int http_start(const struct http_listener *l, struct MHD_Daemon **out, bool *loopback,
	       char *why, size_t why_size);
/* The value of an `Authorization: Bearer VALUE` header, or NULL. */
const char *http_bearer(struct MHD_Connection *c);

#endif
