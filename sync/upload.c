// SPDX-License-Identifier: GPL-2.0
/* POST /v1/batches with libcurl: one easy handle, reused, so a connection (and a TLS session)
 * lives across batches. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include "sync/upload.h"
#include "sync/wire.h"

#define CONNECT_TIMEOUT_S 5
#define TIMEOUT_S 30   /* a whole upload: an aggregator slower than this is down */
#define ANSWER_MAX 1024

struct uploader {
	CURL *curl;
	struct curl_slist *headers;
	char *url;
	char answer[ANSWER_MAX];
	size_t answer_len;
	int64_t retry_after;
	const atomic_bool *stop;
};

/* Ends a transfer when the daemon stops, instead of at its timeout. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct uploader *u = arg;

	return atomic_load(u->stop);
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	struct uploader *u = arg;
	size_t len = size * n, room = sizeof(u->answer) - 1 - u->answer_len;

	memcpy(u->answer + u->answer_len, data, len < room ? len : room);
	u->answer_len += len < room ? len : room;
	u->answer[u->answer_len] = 0;
	return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
	struct uploader *u = arg;
	size_t len = size * n;
	long long v;

	/* Retry-After: <seconds>; the HTTP-date form is treated as absent. */
	if (len > 12 && !strncasecmp(data, "Retry-After:", 12) &&
	    sscanf(data + 12, " %lld", &v) == 1 && v >= 0)
		u->retry_after = v;
	return len;
}

int uploader_new(const char *url, const char *token, const char *ca_file, const atomic_bool *stop,
		 struct uploader **out)
{
	struct uploader *u = calloc(1, sizeof(*u));
	char *auth = NULL;
	int err = -ENOMEM;

	if (!u)
		return -ENOMEM;
	u->stop = stop;
	u->curl = curl_easy_init();
	if (asprintf(&u->url, "%s%sv1/batches", url,
		     url[0] && url[strlen(url) - 1] == '/' ? "" : "/") < 0)
		u->url = NULL;
	if (asprintf(&auth, "Authorization: Bearer %s", token) < 0)
		auth = NULL;
	if (!u->curl || !u->url || !auth)
		goto fail;
	const char *fixed[] = {
		auth,
		"Content-Type: application/x-aperture-batch",
		"Content-Encoding: gzip",
		"X-Aperture-Batch-Version: 1",
		"Expect:", /* no 100-continue round trip */
	};
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		struct curl_slist *l = curl_slist_append(u->headers, fixed[i]);

		if (!l)
			goto fail;
		u->headers = l;
	}
	free(auth);
	auth = NULL;
	curl_easy_setopt(u->curl, CURLOPT_URL, u->url);
	curl_easy_setopt(u->curl, CURLOPT_HTTPHEADER, u->headers);
	curl_easy_setopt(u->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(u->curl, CURLOPT_WRITEDATA, u);
	curl_easy_setopt(u->curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(u->curl, CURLOPT_HEADERDATA, u);
	curl_easy_setopt(u->curl, CURLOPT_CONNECTTIMEOUT, (long)CONNECT_TIMEOUT_S);
	curl_easy_setopt(u->curl, CURLOPT_TIMEOUT, (long)TIMEOUT_S);
	curl_easy_setopt(u->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(u->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(u->curl, CURLOPT_XFERINFODATA, u);
	curl_easy_setopt(u->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(u->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	if (ca_file && *ca_file)
		curl_easy_setopt(u->curl, CURLOPT_CAINFO, ca_file);
	*out = u;
	return 0;
fail:
	free(auth);
	uploader_free(u);
	return err;
}

void uploader_free(struct uploader *u)
{
	if (!u)
		return;
	if (u->curl)
		curl_easy_cleanup(u->curl);
	curl_slist_free_all(u->headers);
	free(u->url);
	free(u);
}

void uploader_post(struct uploader *u, const uint8_t *body, size_t len,
		   struct upload_result *res)
{
	CURLcode rc;
	long http = 0;

	u->answer_len = 0;
	u->answer[0] = 0;
	u->retry_after = -1;
	curl_easy_setopt(u->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(u->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	rc = curl_easy_perform(u->curl);
	if (rc == CURLE_OK)
		curl_easy_getinfo(u->curl, CURLINFO_RESPONSE_CODE, &http);
	*res = (struct upload_result){ .http = http, .retry_after_s = u->retry_after };
	if (rc != CURLE_OK) {
		res->outcome = UPLOAD_RETRY;
		snprintf(res->reason, sizeof(res->reason), "%s", curl_easy_strerror(rc));
		return;
	}
	/* The answer's JSON is short: its text is the reason as it stands. */
	u->answer[strcspn(u->answer, "\r\n")] = 0;
	/* 200 is {"status":"applied"} or {"status":"duplicate"}: delivered either way. */
	if (http == 200) {
		res->outcome = UPLOAD_ACKED;
		return;
	}
	snprintf(res->reason, sizeof(res->reason), "HTTP %ld %.180s", http, u->answer);
	if (http == 408 || http == 429 || http >= 500)
		res->outcome = UPLOAD_RETRY;
	else
		res->outcome = UPLOAD_REJECTED;
}
