/* Pyroscope's push formats into Aperture's profiles, shared by POST /ingest (pyroscope.c:
 * folded and pprof bodies) and the push RPC (pyroscope_push.c: PushRequest, its samples
 * pprof). Decoding needs no aggregator, so the fuzzers run it alone. */
#ifndef APERTURE_AGGREGATE_PYROSCOPE_H
#define APERTURE_AGGREGATE_PYROSCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "daemon/targets.h"
#include "store/profile.h"

#define PYRO_MAX_LABELS 32

/* A series: the app (the service) and its labels; a target of the pushing node. */
struct pyro_series {
	char *buf;                /* what the strings below point into, when they are cut */
	const char *app, *suffix; /* suffix: the name's profile type, "" when none */
	const char *keys[PYRO_MAX_LABELS], *values[PYRO_MAX_LABELS];
	size_t nlabels;
};

/* What one series' push collected, by Aperture profile type. */
struct pyro_push {
	struct profile *p[TARGET_PROFILE_NR];
};

struct profile *pyro_push_profile(struct pyro_push *ps, enum target_profile t);
void pyro_push_free(struct pyro_push *ps);

/* A body gzip'd (by its magic) is inflated, at most max bytes, into *raw (the caller's to
 * free), and *body and *len then name it; else *raw is NULL. wire_gunzip's errors. */
int pyro_gunzip(const uint8_t **body, size_t *len, size_t max, uint8_t **raw, char *why,
		size_t why_size);

/* A pprof profile (gzip'd or not) into ps, each stack under the frame app, at second sec;
 * *time_s: the profile's own time (0: it says none). -EINVAL (not pprof, or a sample naming
 * a location it lacks), -ENOTSUP (no sample type Aperture keeps), -E2BIG, -ENOMEM; why says
 * which. */
int pyro_parse_pprof(struct pyro_push *ps, const char *app, const uint8_t *body, size_t len,
		     int64_t sec, int64_t *time_s, char *why, size_t why_size);

/* A decoded push RPC: every series with its profiles. Bounds: */
#define PYRO_PUSH_MAX_SERIES 4096
#define PYRO_PUSH_MAX_SAMPLES 16384 /* raw profiles, all series together */
struct pyro_push_series {
	struct pyro_series s;     /* app: service_name; labels but __name__ and other __*__ */
	const char *type;         /* __name__ (process_cpu, memory, ...), "" when none */
	struct pyro_push push;
	int64_t time_s;           /* its first profile's time, 0 when it says none */
	bool kept;                /* false: no sample type Aperture keeps (goroutines...) */
};
struct pyro_push_request {
	void *msg;                /* the unpacked PushRequest the strings point into */
	struct pyro_push_series *series;
	size_t n;
};
/* Decodes a PushRequest (not compressed: the caller inflates a Content-Encoding) and its
 * profiles, stacks at second sec. -EINVAL (not a PushRequest, a series without
 * service_name, too many labels, series or samples, a sample that is not pprof), -E2BIG,
 * -ENOMEM; why says which. On success the caller frees out. */
int pyro_push_decode(const uint8_t *body, size_t len, int64_t sec,
		     struct pyro_push_request *out, char *why, size_t why_size);
void pyro_push_request_free(struct pyro_push_request *r);

#endif
