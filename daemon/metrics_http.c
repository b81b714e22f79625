#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "aggregate/http.h"
#include "daemon/aperture.h"
#include "daemon/metrics_http.h"

struct metrics_http {
	struct MHD_Daemon *d;
};

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	struct aperture *a = cls;
	char *text = NULL;
	size_t len = 0;
	FILE *out;

	if (strcmp(url, "/metrics") ||
	    (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD)))
		return agg_http_answer(c, 404, "text/plain", strdup("GET /metrics\n"), 13);
	out = open_memstream(&text, &len);
	if (!out)
		return MHD_NO;
	if (aperture_metrics(a, out)) {
		fclose(out);
		free(text);
		return agg_http_answer(c, 500, "text/plain", strdup("out of memory\n"), 14);
	}
	fclose(out);
	return agg_http_answer(c, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
}

int metrics_http_start(struct aperture *a, const char *listen, struct metrics_http **out,
		       char *why, size_t why_size)
{
	struct metrics_http *h = calloc(1, sizeof(*h));
	struct sockaddr_storage ss = {0};
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	int err;

	if (!h)
		return -ENOMEM;
	err = http_parse_listen(listen, &ss, why, why_size);
	if (err)
		goto fail;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	h->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, a,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_END);
	if (!h->d) {
		snprintf(why, why_size, "--http: cannot serve on %s (in use?)", listen);
		err = -EADDRINUSE;
		goto fail;
	}
	*out = h;
	return 0;
fail:
	free(h);
	return err;
}

void metrics_http_stop(struct metrics_http *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->d);
	free(h);
}
