/* What every HTTP listener of Aperture shares (libmicrohttpd): answers, the listen address,
 * the bearer token of a request. The aggregator (aggregate/http.c) and a node's listener
 * (daemon/http.c) both serve through these. */
#ifndef APERTURE_WEB_HTTP_H
#define APERTURE_WEB_HTTP_H

#include <microhttpd.h>
#include <stddef.h>

struct sockaddr_storage;

/* Queues data (malloc'd; freed here, also on failure) as the answer, no-store. */
enum MHD_Result http_answer(struct MHD_Connection *c, unsigned status, const char *type,
			    char *data, size_t len);
/* {"error":why} with status. */
enum MHD_Result http_answer_error(struct MHD_Connection *c, unsigned status, const char *why);
/* A copy of json as the answer. */
enum MHD_Result http_answer_json(struct MHD_Connection *c, unsigned status, const char *json);
/* ADDR:PORT (numeric, IPv4 or [IPv6]:PORT) into ss; -EINVAL with why. */
int http_parse_listen(const char *listen, struct sockaddr_storage *ss, char *why,
		      size_t why_size);
/* The value of an `Authorization: Bearer VALUE` header, or NULL. */
const char *http_bearer(struct MHD_Connection *c);

#endif
