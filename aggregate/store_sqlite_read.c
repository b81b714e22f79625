/* The tree's queries of the SQLite store, on its reader connection: profiles are rebuilt as
 * store/profile.h snapshots, so the views render them as they render a node's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "aggregate/store_sqlite.h"

/* Statements are prepared per call on the reader connection, under rlock. */
static int prepare(struct sqlite_store *s, const char *sql, sqlite3_stmt **st)
{
	return sqlite3_prepare_v2(s->r, sql, -1, st, NULL) == SQLITE_OK ? 0 : -EIO;
}

int sqlite_list_scopes(struct agg_store *as, enum agg_scope_kind kind,
			      int (*add)(void *ctx, uint32_t id, const char *name), void *ctx)
{
	struct sqlite_store *s = sqlite_of(as);
	sqlite3_stmt *st;
	int err, rc;

	pthread_mutex_lock(&s->rlock);
	err = prepare(s, kind == AGG_SCOPE_NODE ? "SELECT id, name FROM nodes ORDER BY name" :
			 "SELECT id, name FROM services ORDER BY name", &st);
	while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW)
		err = add(ctx, (uint32_t)sqlite3_column_int64(st, 0) << 1 | kind,
			  (const char *)sqlite3_column_text(st, 1));
	if (!err && rc != SQLITE_DONE)
		err = -EIO;
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->rlock);
	return err;
}

int sqlite_scope_lookup(struct agg_store *as, enum agg_scope_kind kind,
			       const char *name, uint32_t *id)
{
	struct sqlite_store *s = sqlite_of(as);
	sqlite3_stmt *st;
	int64_t v;
	int err;

	pthread_mutex_lock(&s->rlock);
	err = prepare(s, kind == AGG_SCOPE_NODE ? "SELECT id FROM nodes WHERE name = ?1" :
			 "SELECT id FROM services WHERE name = ?1", &st);
	if (!err) {
		sql_bind_text(st, 1, name);
		err = sql_step(st, &v);
		sqlite3_finalize(st);
	}
	pthread_mutex_unlock(&s->rlock);
	if (!err)
		*id = (uint32_t)v << 1 | kind;
	return err;
}

int sqlite_scope_name(struct agg_store *as, enum agg_scope_kind kind, uint32_t id,
			     char *name, size_t size)
{
	struct sqlite_store *s = sqlite_of(as);
	sqlite3_stmt *st;
	int err;

	pthread_mutex_lock(&s->rlock);
	err = prepare(s, kind == AGG_SCOPE_NODE ? "SELECT name FROM nodes WHERE id = ?1" :
			 "SELECT name FROM services WHERE id = ?1", &st);
	if (!err) {
		sqlite3_bind_int64(st, 1, id >> 1);
		if (sqlite3_step(st) == SQLITE_ROW)
			snprintf(name, size, "%s", sqlite3_column_text(st, 0));
		else
			err = -ENOENT;
		sqlite3_finalize(st);
	}
	pthread_mutex_unlock(&s->rlock);
	return err;
}

int sqlite_targets(struct agg_store *as, const char *node, pid_t **pids, size_t *n)
{
	struct sqlite_store *s = sqlite_of(as);
	sqlite3_stmt *st;
	pid_t *v = NULL;
	size_t cap = 0, len = 0;
	int err, rc = SQLITE_DONE;

	pthread_mutex_lock(&s->rlock);
	err = prepare(s, "SELECT DISTINCT pid FROM targets WHERE node_id ="
			 " (SELECT id FROM nodes WHERE name = ?1) ORDER BY pid", &st);
	if (!err)
		sql_bind_text(st, 1, node);
	while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (len == cap) {
			pid_t *bigger = realloc(v, (cap = cap ? cap * 2 : 64) * sizeof(*v));

			if (!bigger) {
				err = -ENOMEM;
				break;
			}
			v = bigger;
		}
		v[len++] = sqlite3_column_int(st, 0);
	}
	if (!err && rc != SQLITE_DONE)
		err = -EIO;
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->rlock);
	if (err) {
		free(v);
		return err;
	}
	*pids = v;
	*n = len;
	return 0;
}

#define NEWEST_TARGET "(SELECT id FROM targets WHERE node_id = (SELECT id FROM nodes WHERE" \
	" name = ?1) AND pid = ?2 ORDER BY id DESC LIMIT 1)"

static void column_str(sqlite3_stmt *st, int i, char *buf, size_t size)
{
	const unsigned char *v = sqlite3_column_text(st, i);

	snprintf(buf, size, "%s", v ? (const char *)v : "");
}

int sqlite_target(struct agg_store *as, const char *node, pid_t pid,
			 struct agg_target *out)
{
	struct sqlite_store *s = sqlite_of(as);
	sqlite3_stmt *st;
	int err;

	pthread_mutex_lock(&s->rlock);
	err = prepare(s, "SELECT comm, state, has_jvm, period_ns, last_seen FROM targets"
			 " WHERE id = " NEWEST_TARGET, &st);
	if (!err) {
		sql_bind_text(st, 1, node);
		sqlite3_bind_int(st, 2, pid);
		if (sqlite3_step(st) == SQLITE_ROW) {
			*out = (struct agg_target){ .has_jvm = sqlite3_column_int(st, 2),
				.period_ns = sqlite3_column_int64(st, 3),
				.last_seen = sqlite3_column_int64(st, 4) };
			column_str(st, 0, out->comm, sizeof(out->comm));
			column_str(st, 1, out->state, sizeof(out->state));
		} else {
			err = -ENOENT;
		}
		sqlite3_finalize(st);
	}
	pthread_mutex_unlock(&s->rlock);
	return err;
}

/* A frame of the db as the profile being built knows it. */
struct frame_map {
	UT_hash_handle hh;
	int64_t db_id;
	uint32_t id;
};

static int frame_of(struct sqlite_store *s, sqlite3_stmt *fq, struct profile *p,
		    struct frame_map **map, int64_t db_id, uint32_t *id)
{
	struct frame_map *m;
	struct frame_info info;
	int err;

	HASH_FIND(hh, *map, &db_id, sizeof(db_id), m);
	if (m) {
		*id = m->id;
		return 0;
	}
	sqlite3_bind_int64(fq, 1, db_id);
	if (sqlite3_step(fq) != SQLITE_ROW) {
		sqlite3_reset(fq);
		return -EIO;
	}
	info = (struct frame_info){
		.file = (const char *)sqlite3_column_text(fq, 1),
		.line = sqlite3_column_int(fq, 2),
		.module = (const char *)sqlite3_column_text(fq, 3),
		.build_id = (const char *)sqlite3_column_text(fq, 4) };
	err = profile_frame_id_info(p, (const char *)sqlite3_column_text(fq, 0), &info, id);
	sqlite3_reset(fq);
	if (err)
		return err;
	m = malloc(sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->db_id = db_id;
	m->id = *id;
	HASH_ADD(hh, *map, db_id, sizeof(m->db_id), m);
	return 0;
}

/* A stack's sum over the rows a query matched. */
struct stack_sum {
	UT_hash_handle hh;
	int64_t hash;
	uint64_t n;
};

/* Sums the matching rows by stack in a hash table: no sort of every (second, stack) row. */
static int sum_by_stack(sqlite3_stmt *st, struct stack_sum **sums)
{
	struct stack_sum *e;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t hash = sqlite3_column_int64(st, 0);

		HASH_FIND(hh, *sums, &hash, sizeof(hash), e);
		if (!e) {
			e = calloc(1, sizeof(*e));
			if (!e)
				return -ENOMEM;
			e->hash = hash;
			HASH_ADD(hh, *sums, hash, sizeof(e->hash), e);
		}
		e->n += (uint64_t)sqlite3_column_int64(st, 1);
	}
	return rc == SQLITE_DONE ? 0 : -EIO;
}

/* Adds the stack of the db in sq's row (its frames blob, its lines blob or NULL) with count
 * n to p. frames: room for the frames, then their lines. */
static int add_stack(struct sqlite_store *s, sqlite3_stmt *fq, struct profile *p,
		     struct frame_map **map, sqlite3_stmt *sq, uint64_t n, uint32_t **frames,
		     size_t *cap)
{
	const void *blob = sqlite3_column_blob(sq, 0), *lines = sqlite3_column_blob(sq, 1);
	size_t depth = sqlite3_column_bytes(sq, 0) / sizeof(uint32_t);
	int err = 0;

	if (!depth)
		return 0;
	if (2 * depth > *cap) {
		uint32_t *bigger = realloc(*frames, 2 * depth * sizeof(**frames));

		if (!bigger)
			return -ENOMEM;
		*frames = bigger;
		*cap = 2 * depth;
	}
	for (size_t i = 0; !err && i < depth; i++) {
		uint32_t db_id;

		memcpy(&db_id, (const char *)blob + i * sizeof(db_id), sizeof(db_id));
		err = frame_of(s, fq, p, map, db_id, &(*frames)[i]);
	}
	/* Lines that are not one per frame (no writer makes them) count as unknown. */
	if (lines && (size_t)sqlite3_column_bytes(sq, 1) == depth * sizeof(uint32_t))
		memcpy(*frames + depth, lines, depth * sizeof(uint32_t));
	else
		lines = NULL;
	return err ? err : profile_add_lines(p, 0, *frames, lines ? *frames + depth : NULL,
					     depth, n);
}

int sqlite_profile(struct agg_store *as, const struct agg_query *q,
			  struct profile_snapshot **out)
{
	/* ?4..?5 the range: its whole minutes ?6..?7 (minute starts) from samples_min, the
	 * seconds before them (?4..?8) and after them (?9..?5) from samples. */
#define RANGE_SQL(targets) \
		"WITH t(id) AS (" targets ")" \
		" SELECT stack, count FROM samples_min WHERE target_id IN t AND type = ?3 AND" \
		" min BETWEEN ?6 AND ?7 UNION ALL" \
		" SELECT stack, count FROM samples WHERE target_id IN t AND type = ?3 AND" \
		" sec BETWEEN ?4 AND ?8 UNION ALL" \
		" SELECT stack, count FROM samples WHERE target_id IN t AND type = ?3 AND" \
		" sec BETWEEN ?9 AND ?5"
	static const char by_target[] = RANGE_SQL("SELECT " NEWEST_TARGET);
	static const char by_service[] = RANGE_SQL("SELECT id FROM targets WHERE service_id ="
						   " (SELECT id FROM services WHERE name = ?1)");
#undef RANGE_SQL
	int64_t first_min = q->from <= 0 ? 0 : (q->from + 59) / 60 * 60;
	int64_t end_min = q->until >= INT64_MAX - 60 ? INT64_MAX / 60 * 60 :
			  (q->until + 1) / 60 * 60; /* past the last whole minute */
	bool whole = end_min - first_min >= 60;
	struct sqlite_store *s = sqlite_of(as);
	struct frame_map *map = NULL, *m, *mtmp;
	struct stack_sum *sums = NULL, *e, *etmp;
	sqlite3_stmt *st = NULL, *fq = NULL, *sq = NULL;
	struct profile *p;
	uint32_t *frames = NULL;
	size_t cap = 0;
	int err;

	p = profile_new(tree_profiles[q->type].unit);
	if (!p)
		return -ENOMEM;
	pthread_mutex_lock(&s->rlock);
	err = prepare(s, q->service ? by_service : by_target, &st);
	if (!err)
		err = prepare(s, "SELECT name, file, line, module, build_id FROM frames"
				 " WHERE id = ?1", &fq);
	if (!err)
		err = prepare(s, "SELECT frames, lines FROM stacks WHERE hash = ?1", &sq);
	if (!err) {
		sql_bind_text(st, 1, q->service ? q->service : q->node);
		sqlite3_bind_int(st, 2, q->pid);
		sqlite3_bind_int(st, 3, q->type);
		sqlite3_bind_int64(st, 4, q->from);
		sqlite3_bind_int64(st, 5, q->until);
		/* no whole minute: every second from samples, once */
		sqlite3_bind_int64(st, 6, whole ? first_min : 1);
		sqlite3_bind_int64(st, 7, whole ? end_min - 60 : 0);
		sqlite3_bind_int64(st, 8, whole ? first_min - 1 : q->until);
		sqlite3_bind_int64(st, 9, whole ? end_min : 1);
		if (!whole)
			sqlite3_bind_int64(st, 9, q->until + (q->until < INT64_MAX));
		err = sum_by_stack(st, &sums);
	}
	HASH_ITER(hh, sums, e, etmp) {
		if (!err) {
			sqlite3_bind_int64(sq, 1, e->hash);
			if (sqlite3_step(sq) == SQLITE_ROW)
				err = add_stack(s, fq, p, &map, sq, e->n, &frames, &cap);
			else
				err = -EIO;
			sqlite3_reset(sq);
		}
		HASH_DEL(sums, e);
		free(e);
	}
	sqlite3_finalize(st);
	sqlite3_finalize(fq);
	sqlite3_finalize(sq);
	pthread_mutex_unlock(&s->rlock);
	HASH_ITER(hh, map, m, mtmp) {
		HASH_DEL(map, m);
		free(m);
	}
	free(frames);
	if (!err)
		err = profile_snapshot(p, 0, out);
	if (!err)
		(*out)->since = q->from;
	profile_unref(p);
	return err;
}

int sqlite_sys(struct agg_store *as, const char *node, pid_t pid,
		      struct sys_snapshot **out)
{
	struct sqlite_store *s = sqlite_of(as);
	struct sys_table *t = sys_table_new();
	sqlite3_stmt *st;
	int err, rc = SQLITE_DONE;

	if (!t)
		return -ENOMEM;
	pthread_mutex_lock(&s->rlock);
	err = prepare(s, "SELECT kind, a, b, addr, holder, stack, count, total_ns, max_ns, hist"
			 " FROM sys_rows WHERE target_id = " NEWEST_TARGET, &st);
	if (!err) {
		sql_bind_text(st, 1, node);
		sqlite3_bind_int(st, 2, pid);
	}
	while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *holder = (const char *)sqlite3_column_text(st, 4);
		const char *stack = (const char *)sqlite3_column_text(st, 5);
		struct sys_row row = { .kind = sqlite3_column_int(st, 0),
				       .a = sqlite3_column_int64(st, 1),
				       .b = sqlite3_column_int64(st, 2),
				       .addr = sqlite3_column_int64(st, 3),
				       .holder = holder && holder[0] ? holder : NULL,
				       .stack = stack && stack[0] ? stack : NULL };
		struct latency lat = { .count = sqlite3_column_int64(st, 6),
				       .total_ns = sqlite3_column_int64(st, 7),
				       .max_ns = sqlite3_column_int64(st, 8) };

		if (sqlite3_column_bytes(st, 9) == sizeof(lat.hist))
			memcpy(lat.hist, sqlite3_column_blob(st, 9), sizeof(lat.hist));
		err = sys_table_add(t, &row, &lat);
	}
	if (!err && rc != SQLITE_DONE)
		err = -EIO;
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->rlock);
	if (!err)
		err = sys_table_snapshot(t, out);
	sys_table_unref(t);
	return err;
}

int sqlite_blocking(struct agg_store *as, const char *node, pid_t pid,
			   struct blocking_snapshot **out)
{
	struct sqlite_store *s = sqlite_of(as);
	struct blocking_log *l = blocking_log_new();
	sqlite3_stmt *st;
	uint64_t total = 0;
	int err, rc = SQLITE_DONE;

	if (!l)
		return -ENOMEM;
	pthread_mutex_lock(&s->rlock);
	/* Every event counts; the log keeps the newest BLOCKING_RING, as the node does. */
	err = prepare(s, "SELECT time_ns, dur_us, tid, thread, preempted, state, stack FROM"
			 " blocking WHERE target_id = " NEWEST_TARGET " ORDER BY time_ns", &st);
	if (!err) {
		sql_bind_text(st, 1, node);
		sqlite3_bind_int(st, 2, pid);
	}
	while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct blocking_event ev = { .time_ns = sqlite3_column_int64(st, 0),
					     .dur_us = sqlite3_column_int64(st, 1),
					     .tid = sqlite3_column_int(st, 2),
					     .preempted = sqlite3_column_int(st, 4),
					     .state = sqlite3_column_int(st, 5),
					     .stack = (char *)sqlite3_column_text(st, 6) };

		column_str(st, 3, ev.thread, sizeof(ev.thread));
		err = blocking_log_add(l, &ev);
		total++;
	}
	if (!err && rc != SQLITE_DONE)
		err = -EIO;
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->rlock);
	if (!err)
		err = blocking_log_snapshot(l, out);
	if (!err)
		(*out)->total = total;
	blocking_log_unref(l);
	return err;
}

int sqlite_text(struct agg_store *as, const char *node, pid_t pid, enum tree_text which,
		       char **out)
{
	struct sqlite_store *s = sqlite_of(as);
	sqlite3_stmt *st;
	int err;

	pthread_mutex_lock(&s->rlock);
	err = prepare(s, "SELECT body FROM texts WHERE kind = ?3 AND target_id = "
			 NEWEST_TARGET, &st);
	if (!err) {
		sql_bind_text(st, 1, node);
		sqlite3_bind_int(st, 2, pid);
		sqlite3_bind_int(st, 3, which);
		*out = strdup(sqlite3_step(st) == SQLITE_ROW ?
			      (const char *)sqlite3_column_text(st, 0) : "");
		if (!*out)
			err = -ENOMEM;
		sqlite3_finalize(st);
	}
	pthread_mutex_unlock(&s->rlock);
	return err;
}

int sqlite_node_status(struct agg_store *as, const char *node,
			      struct agg_node_status *out)
{
	struct sqlite_store *s = sqlite_of(as);
	sqlite3_stmt *st;
	int err;

	pthread_mutex_lock(&s->rlock);
	err = prepare(s, "SELECT name, last_batch, last_created, last_seq, last_boot_id,"
			 " batches, duplicates, samples, spool_bytes, batches_dropped,"
			 " batches_rejected, oldest_dropped, last_success, last_error, version,"
			 " (SELECT COUNT(DISTINCT pid) FROM targets WHERE node_id = nodes.id)"
			 " FROM nodes WHERE name = ?1", &st);
	if (!err) {
		sql_bind_text(st, 1, node);
		if (sqlite3_step(st) == SQLITE_ROW) {
			*out = (struct agg_node_status){
				.last_batch_unix = sqlite3_column_int64(st, 1),
				.last_created_unix = sqlite3_column_int64(st, 2),
				.last_seq = sqlite3_column_int64(st, 3),
				.batches = sqlite3_column_int64(st, 5),
				.duplicates = sqlite3_column_int64(st, 6),
				.samples = sqlite3_column_int64(st, 7),
				.spool_bytes = sqlite3_column_int64(st, 8),
				.batches_dropped = sqlite3_column_int64(st, 9),
				.batches_rejected = sqlite3_column_int64(st, 10),
				.oldest_dropped_unix = sqlite3_column_int64(st, 11),
				.last_success_unix = sqlite3_column_int64(st, 12),
				.targets = sqlite3_column_int(st, 15) };
			column_str(st, 0, out->name, sizeof(out->name));
			column_str(st, 4, out->last_boot_id, sizeof(out->last_boot_id));
			column_str(st, 13, out->last_error, sizeof(out->last_error));
			column_str(st, 14, out->version, sizeof(out->version));
		} else {
			err = -ENOENT;
		}
		sqlite3_finalize(st);
	}
	pthread_mutex_unlock(&s->rlock);
	return err;
}

int sqlite_totals(struct agg_store *as, uint64_t *batches, uint64_t *samples,
			 uint64_t *nodes, uint64_t *targets)
{
	struct sqlite_store *s = sqlite_of(as);
	sqlite3_stmt *st;
	int err;

	pthread_mutex_lock(&s->rlock);
	err = prepare(s, "SELECT COALESCE(SUM(batches), 0), COALESCE(SUM(samples), 0), COUNT(*),"
			 " (SELECT COUNT(*) FROM targets) FROM nodes", &st);
	if (!err) {
		if (sqlite3_step(st) == SQLITE_ROW) {
			*batches = sqlite3_column_int64(st, 0);
			*samples = sqlite3_column_int64(st, 1);
			*nodes = sqlite3_column_int64(st, 2);
			*targets = sqlite3_column_int64(st, 3);
		} else {
			err = -EIO;
		}
		sqlite3_finalize(st);
	}
	pthread_mutex_unlock(&s->rlock);
	return err;
}
