#include <cjson/cJSON.h>
#include <errno.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "web/http.h"

enum MHD_Result http_answer(struct MHD_Connection *c, unsigned status, const char *type,
			    char *data, size_t len)
{
	struct MHD_Response *r = data ? MHD_create_response_from_buffer(len, data,
									MHD_RESPMEM_MUST_FREE) : NULL;
	enum MHD_Result ret;

	if (!r) {
		free(data);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	/* The page talks to this server only: the browser enforces it. */
	if (!strncmp(type, "text/html", 9))
		MHD_add_response_header(r, "Content-Security-Policy",
					"default-src 'self'; img-src 'self' data: blob:; "
					"frame-ancestors 'none'");
	if (status == 503 || status == 429)
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "5");
	if (status == 401)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer realm=\"aperture\"");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

enum MHD_Result http_answer_json(struct MHD_Connection *c, unsigned status, const char *json)
{
	char *copy = strdup(json);

	return copy ? http_answer(c, status, "application/json", copy, strlen(copy)) : MHD_NO;
}

enum MHD_Result http_answer_error(struct MHD_Connection *c, unsigned status, const char *why)
{
	cJSON *o = cJSON_CreateObject();
	char *s = NULL;

	if (o && cJSON_AddStringToObject(o, "error", why))
		s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s ? http_answer(c, status, "application/json", s, strlen(s)) : MHD_NO;
}

const char *http_bearer(struct MHD_Connection *c)
{
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_AUTHORIZATION);

	if (!auth || strncasecmp(auth, "Bearer ", 7))
		return NULL;
	auth += 7;
	while (*auth == ' ')
		auth++;
	return auth;
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

static bool is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
	return ss->ss_family == AF_INET6 &&
	       IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
}

int http_start(const struct http_listener *l, struct MHD_Daemon **out, bool *loopback,
	       char *why, size_t why_size)
{
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	struct sockaddr_storage ss = {0};
	int err = parse_listen(l->listen, &ss, why, why_size);

	if (err)
		return err;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (l->cert)
		flags |= MHD_USE_TLS;
	/* Without TLS the certificate option's place ends the list. */
	*out = MHD_start_daemon(flags, 0, NULL, NULL, l->handle, l->ctx,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				MHD_OPTION_THREAD_POOL_SIZE, l->threads,
				MHD_OPTION_CONNECTION_TIMEOUT, l->timeout_s,
				MHD_OPTION_NOTIFY_COMPLETED, l->completed, NULL,
				l->cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, l->cert,
				MHD_OPTION_HTTPS_MEM_KEY, l->key,
				MHD_OPTION_END);
	if (!*out) {
		snprintf(why, why_size, "cannot serve on %s (in use?%s)", l->listen,
			 l->cert ? " TLS files valid?" : "");
		return -EADDRINUSE;
	}
	if (loopback)
		*loopback = is_loopback(&ss);
	return 0;
}
