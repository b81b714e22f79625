/* What the parts of the SQLite store share: store_sqlite.c (schema, open, retention),
 * store_sqlite_apply.c (batches in), store_sqlite_read.c (the tree's queries). Internal to
 * aggregate/. */
#ifndef APERTURE_AGGREGATE_STORE_SQLITE_H
#define APERTURE_AGGREGATE_STORE_SQLITE_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <uthash.h>
#include "aggregate/group_commit.h"
#include "aggregate/store.h"

#define SYS_MARK 100 /* texts.kind of the sys rows' version */

/* The statements of one batch's apply, prepared once on the writer. */
enum {
	Q_BEGIN, Q_COMMIT, Q_ROLLBACK, Q_SAVEPOINT, Q_ROLLBACK_TO, Q_RELEASE, Q_NODE_ADD,
	Q_NODE_ID, Q_DUPLICATE, Q_BATCH_ADD, Q_BOOT_ADD, Q_BOOT_ORD, Q_NODE_STATUS, Q_NODE_COUNT, Q_SERVICE_ADD, Q_SERVICE_ID,
	Q_TARGET_ADD, Q_TARGET_ID, Q_FRAME_ADD, Q_FRAME_ID, Q_STACK_ADD, Q_SAMPLE_ADD, Q_TEXT_SET,
	Q_SYS_DEL, Q_SYS_ADD, Q_BLOCKING_ADD, Q_NR,
};

extern const char *const sqlite_apply_sql[Q_NR];

/* A frame name's id in the frames table, cached: a batch's frames are mostly known. */
struct frame_id {
	UT_hash_handle hh;
	int64_t id;
	char name[];
};

#define GROUP_MAX 64

struct sqlite_store {
	struct agg_store base;
	sqlite3 *w, *r;                /* writer, reader */
	pthread_mutex_t wlock, rlock;
	struct agg_group group;
	sqlite3_stmt *q[Q_NR];
	struct frame_id *frames;       /* under wlock */
	size_t nframes;
};

static inline struct sqlite_store *sqlite_of(struct agg_store *s)
{
	return (struct sqlite_store *)s;
}

/* Runs a prepared statement to its end; SQLITE_ROW's first column into *val if asked
 * (-ENOENT if there was no row). Resets it for the next use. */
int sql_step(sqlite3_stmt *st, int64_t *val);
/* Binds s (NULL: "") without copying it. */
void sql_bind_text(sqlite3_stmt *st, int i, const char *s);

int sqlite_apply(struct agg_store *as, const WireBatch *b, int64_t now,
		 struct agg_apply_result *r);
void sqlite_apply_group(void *ctx, struct agg_job *group);
void sqlite_frame_cache_clear(struct sqlite_store *s);

int sqlite_list_scopes(struct agg_store *as, enum agg_scope_kind kind,
		       int (*add)(void *ctx, uint32_t id, const char *name), void *ctx);
int sqlite_scope_lookup(struct agg_store *as, enum agg_scope_kind kind, const char *name,
			uint32_t *id);
int sqlite_scope_name(struct agg_store *as, enum agg_scope_kind kind, uint32_t id, char *name,
		      size_t size);
int sqlite_targets(struct agg_store *as, const char *node, pid_t **pids, size_t *n);
int sqlite_target(struct agg_store *as, const char *node, pid_t pid, struct agg_target *out);
int sqlite_profile(struct agg_store *as, const struct agg_query *q,
		   struct profile_snapshot **out);
int sqlite_sys(struct agg_store *as, const char *node, pid_t pid, struct sys_snapshot **out);
int sqlite_blocking(struct agg_store *as, const char *node, pid_t pid,
		    struct blocking_snapshot **out);
int sqlite_text(struct agg_store *as, const char *node, pid_t pid, enum tree_text which,
		char **out);
int sqlite_node_status(struct agg_store *as, const char *node, struct agg_node_status *out);
int sqlite_totals(struct agg_store *as, uint64_t *batches, uint64_t *samples, uint64_t *nodes,
		  uint64_t *targets);

#endif
