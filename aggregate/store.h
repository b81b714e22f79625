/* The aggregator's store: where nodes' batches go and where the tree reads them from.
 *
 * One small interface, so a backend can be swapped by URL: sqlite:PATH is the embedded one
 * (aggregate/store_sqlite.c). Every function returns 0 or a negative errno; -EIO means the
 * backend failed (the HTTP layer answers 503 and the node retries).
 *
 * Exactly once: apply stores a batch's id (node, boot_id, seq) in the same transaction as its
 * data, and a batch whose id is already there changes nothing. Profiles add up per second;
 * texts, syscall and lock statistics are latest state, kept from the batch with the highest
 * (order of its boot_id's first arrival, seq) for each target incarnation. */
#ifndef APERTURE_AGGREGATE_STORE_H
#define APERTURE_AGGREGATE_STORE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "daemon/targets.h"
#include "fs/tree.h"
#include "store/blocking.h"
#include "store/profile.h"
#include "store/sysstats.h"
#include "sync/wire.h"

struct agg_store;

/* Scope kinds, as the tree numbers them: a scope id is (store id << 1 | kind). */
enum agg_scope_kind { AGG_SCOPE_NODE = 0, AGG_SCOPE_SERVICE = 1 };

/* What a query covers: a node's target (node + pid, its newest incarnation) or a service,
 * from..until unix seconds inclusive (0..INT64_MAX for everything kept). */
struct agg_query {
	const char *node;    /* or NULL */
	pid_t pid;
	const char *service; /* or NULL */
	enum target_profile type;
	int64_t from, until;
};

/* What the tree says of a target besides its texts. */
struct agg_target {
	char comm[64], state[16];
	bool has_jvm;
	uint32_t period_ns;  /* of its cpu profile, as last sent */
	int64_t last_seen;   /* unix seconds the aggregator last received it */
};

struct agg_node_status {
	char name[128];
	int64_t last_batch_unix;   /* received */
	int64_t last_created_unix; /* the node's clock when it made that batch */
	uint64_t last_seq;
	char last_boot_id[64];
	uint64_t batches, duplicates, samples;
	/* as the node reported them in its last batch */
	uint64_t spool_bytes, batches_dropped, batches_rejected;
	int64_t oldest_dropped_unix, last_success_unix;
	char last_error[256], version[64];
	unsigned targets;
};

struct agg_apply_result {
	bool duplicate;
	uint64_t samples; /* counts stored (sum of every second's counts) */
};

/* A table of the store, for status and metrics. */
struct agg_store_table {
	char name[32];
	uint64_t rows, bytes, parts;
	int64_t oldest;      /* unix seconds of its oldest row; 0 when unknown or empty */
};

struct agg_store_ops {
	int (*apply)(struct agg_store *s, const WireBatch *b, int64_t now,
		     struct agg_apply_result *r);
	/* Every node or service name with its id, ascending by name. */
	int (*list_scopes)(struct agg_store *s, enum agg_scope_kind kind,
			   int (*add)(void *ctx, uint32_t id, const char *name), void *ctx);
	int (*scope_lookup)(struct agg_store *s, enum agg_scope_kind kind, const char *name,
			    uint32_t *id);
	int (*scope_name)(struct agg_store *s, enum agg_scope_kind kind, uint32_t id, char *name,
			  size_t size);
	/* pids of a node's targets, ascending (the caller frees *pids). */
	int (*targets)(struct agg_store *s, const char *node, pid_t **pids, size_t *n);
	/* The newest incarnation of pid on node; -ENOENT if none. */
	int (*target)(struct agg_store *s, const char *node, pid_t pid, struct agg_target *out);
	int (*profile)(struct agg_store *s, const struct agg_query *q,
		       struct profile_snapshot **out);
	int (*sys)(struct agg_store *s, const char *node, pid_t pid, struct sys_snapshot **out);
	int (*blocking)(struct agg_store *s, const char *node, pid_t pid,
			struct blocking_snapshot **out);
	/* A latest-state text (*out malloc'd, "" when none). */
	int (*text)(struct agg_store *s, const char *node, pid_t pid, enum tree_text which,
		    char **out);
	int (*node_status)(struct agg_store *s, const char *node, struct agg_node_status *out);
	/* Deletes every second before `before` (a day's start) and what only they used. */
	int (*retain)(struct agg_store *s, int64_t before);
	/* Totals for status and metrics. */
	int (*totals)(struct agg_store *s, uint64_t *batches, uint64_t *samples, uint64_t *nodes,
		      uint64_t *targets);
	/* Its tables (up to max; NULL when the store has none to report). */
	int (*stats)(struct agg_store *s, struct agg_store_table *out, size_t max, size_t *n);
	void (*close)(struct agg_store *s);
};

struct agg_store {
	const struct agg_store_ops *ops;
	char url[4096];
};

/* Opens the store a URL names: sqlite:PATH, or a bare path (SQLite), or
 * clickhouse://HOST:PORT/DB (aggregate/store_clickhouse.c). -EINVAL for an unknown scheme,
 * with why filled. */
int agg_store_open(const char *url, struct agg_store **out, char *why, size_t why_size);
int agg_store_open_clickhouse(const char *url, struct agg_store **out, char *why,
			      size_t why_size);

#endif
