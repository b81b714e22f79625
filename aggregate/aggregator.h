/* The fleet aggregator: a store, the tokens that may use it, its tree, and its counters.
 * The HTTP server (aggregate/http.c) and the FUSE mount (fs/) are two doors to one of these. */
#ifndef APERTURE_AGGREGATE_AGGREGATOR_H
#define APERTURE_AGGREGATE_AGGREGATOR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "aggregate/metrics.h"
#include "aggregate/store.h"
#include "aggregate/tokens.h"
#include "fs/tree.h"

#define AGG_RETENTION_DAYS_MAX 7
/* A second more than this far ahead of the aggregator's clock is refused. */
#define AGG_FUTURE_S 3600
/* Largest request body read (compressed), and what it may inflate to: twice what a node
 * puts in one part (8 MiB), well under wire_default_limits' 64 MiB, since a message of tiny
 * strings unpacks to many times its size and four are decoded at once. */
#define AGG_MAX_BODY (32u << 20)
#define AGG_MAX_INFLATED (16u << 20)

/* Why a batch was refused, for metrics and status. */
enum agg_reject {
	AGG_REJECT_MALFORMED,  /* 400 */
	AGG_REJECT_TIME,       /* 400: a second outside retention..now+AGG_FUTURE_S */
	AGG_REJECT_TOO_LARGE,  /* 413 */
	AGG_REJECT_VERSION,    /* 415 */
	AGG_REJECT_AUTH,       /* 401 */
	AGG_REJECT_FORBIDDEN,  /* 403 */
	AGG_REJECT_STORE,      /* 503 */
	AGG_REJECT_UNPROCESSABLE, /* 422: a Pyroscope push whose profile Aperture can't keep */
	AGG_REJECT_NR,
};

struct agg_window;

struct aggregator {
	struct agg_store *store;
	struct tokens *tokens;     /* NULL with --insecure */
	bool insecure;
	unsigned retention_days;
	char listen[128];
	bool tls;
	int64_t started;
	struct tree tree;

	_Atomic uint64_t applied, duplicates, samples, rejected[AGG_REJECT_NR];
	_Atomic uint64_t reads, read_errors;
	_Atomic uint64_t pyroscope_seq;   /* pushes to POST /ingest: their batches' seq */
	/* metrics.c: request to answer, the store's apply, its profile queries */
	struct agg_latency ingest_latency, store_insert, store_query;
	_Atomic uint64_t store_insert_errors, store_query_errors;
	_Atomic uint64_t retain_runs, retain_errors;
	_Atomic int64_t retain_last_unix; /* the last retention pass that succeeded */
	pthread_mutex_t usage_lock;       /* the store's sizes, read at most every 30 s */
	int64_t usage_at;
	char *usage_text;

	pthread_mutex_t windows_lock;  /* the window files' settings */
	struct agg_window *windows;
};

int aggregator_init(struct aggregator *g, struct agg_store *store, struct tokens *tokens,
		    unsigned retention_days);
void aggregator_fini(struct aggregator *g);

/* The first second retention keeps at time now: the start of a day. */
int64_t aggregator_retention_start(const struct aggregator *g, int64_t now);
/* Deletes what is older than retention. */
int aggregator_retain(struct aggregator *g, int64_t now);

/* Decodes, checks and applies one uploaded batch; returns the HTTP status and writes the
 * JSON answer into reply. k: the caller's token (NULL when insecure). */
int aggregator_ingest(struct aggregator *g, const struct token *k, const char *content_type,
		      const char *version, const uint8_t *body, size_t len, char *reply,
		      size_t reply_size);

/* Checks a decoded batch's seconds against retention and the clock and has the store apply
 * it: the HTTP status, and the JSON answer in reply. */
int aggregator_apply(struct aggregator *g, const WireBatch *b, int64_t now, char *reply,
		     size_t reply_size);
/* Counts a refusal for why and writes {"error":reason} into reply: the HTTP status. */
int agg_reject(struct aggregator *g, enum agg_reject why, const char *reason, char *reply,
	       size_t reply_size);
/* A node's or service's name is a directory's: no '/', not . or .., no control characters. */
bool agg_valid_name(const char *s);

/* Pyroscope's POST /ingest (aggregate/pyroscope.c). q: the query's parameters by name;
 * body: the profile, folded text or pprof (gzip'd or not). */
struct agg_pyroscope_query {
	const char *name, *from, *until, *format, *sample_rate, *spy_name, *units;
};
int aggregator_pyroscope(struct aggregator *g, const struct token *k,
			 const struct agg_pyroscope_query *q, const uint8_t *body, size_t len,
			 char *reply, size_t reply_size);
/* Pyroscope's push RPC (POST /push.v1.PusherService/Push): body a PushRequest, inflated
 * first when encoding is gzip. The HTTP status, and the JSON answer as above. */
int aggregator_pyroscope_push(struct aggregator *g, const struct token *k,
			      const char *encoding, const uint8_t *body, size_t len,
			      char *reply, size_t reply_size);

extern const char *const agg_reject_names[AGG_REJECT_NR];

#endif
