/* The fleet aggregator: a store, the tokens that may use it, its tree, and its counters.
 * The HTTP server (aggregate/http.c) and the FUSE mount (fs/) are two doors to one of these. */
#ifndef APERTURE_AGGREGATE_AGGREGATOR_H
#define APERTURE_AGGREGATE_AGGREGATOR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
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

/* A time range as the window file and ?last= take it: N seconds (1..604800, into *last_s)
 * or FROM..UNTIL unix seconds (into *r). -EINVAL or -ERANGE. */
int agg_parse_range(const char *s, struct tree_range *r, int64_t *last_s);

extern const char *const agg_reject_names[AGG_REJECT_NR];

#endif
