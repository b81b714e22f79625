/* One batch POSTed to the aggregator (the ingest contract in README.md), with libcurl. */
#ifndef APERTURE_SYNC_UPLOAD_H
#define APERTURE_SYNC_UPLOAD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum upload_outcome {
	UPLOAD_ACKED,     /* 200: applied or duplicate: the batch is delivered */
	UPLOAD_RETRY,     /* no answer, 408, 429, 5xx: send it again later */
	UPLOAD_REJECTED,  /* any other answer (400, 401, 403, 413, 415...): never */
};

struct upload_result {
	enum upload_outcome outcome;
	long http;             /* 0 when no answer came */
	int64_t retry_after_s; /* the server's Retry-After, -1 when absent */
	char reason[200];      /* what went wrong, for status */
};

struct uploader;

/* url: the aggregator's base (http[s]://host:port); ca_file: a CA bundle to trust, or NULL
 * for the system's. token is copied. An upload in flight ends as soon as *stop is true. */
int uploader_new(const char *url, const char *token, const char *ca_file, const atomic_bool *stop,
		 struct uploader **out);
void uploader_free(struct uploader *u);
void uploader_post(struct uploader *u, const uint8_t *body, size_t len,
		   struct upload_result *res);

#endif
