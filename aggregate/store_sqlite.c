/* The embedded store: one SQLite file (WAL), a writer connection for batches and a reader
 * connection for the tree, so a long read never holds up ingest. This file: the schema,
 * opening and closing, and retention; batches go in through store_sqlite_apply.c, the tree
 * reads through store_sqlite_read.c.
 *
 * Stacks are stored once, by a stable 64-bit hash (FNV-1a) of their frame names and, if they
 * have them, the lines running in their frames; frames once by name, with the first frame
 * info given for it, as store/profile.c does. Samples are keyed (target incarnation, profile
 * type, second, stack) and summed on conflict.
 *
 * The schema's version is PRAGMA user_version: 0 a store made before versions (1), 2 with
 * stacks.lines. A store of a newer version is refused; an older one is upgraded at open. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "aggregate/store_sqlite.h"

static const char schema[] =
	"PRAGMA journal_mode=WAL;"
	"CREATE TABLE IF NOT EXISTS nodes(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
	" last_batch INTEGER DEFAULT 0, last_created INTEGER DEFAULT 0, last_seq INTEGER DEFAULT 0,"
	" last_ord INTEGER DEFAULT 0, last_boot_id TEXT DEFAULT '', batches INTEGER DEFAULT 0,"
	" duplicates INTEGER DEFAULT 0, samples INTEGER DEFAULT 0, spool_bytes INTEGER DEFAULT 0,"
	" batches_dropped INTEGER DEFAULT 0, oldest_dropped INTEGER DEFAULT 0,"
	" batches_rejected INTEGER DEFAULT 0, last_error TEXT DEFAULT '',"
	" last_success INTEGER DEFAULT 0, version TEXT DEFAULT '');"
	"CREATE TABLE IF NOT EXISTS boots(node_id INTEGER, boot_id TEXT, ord INTEGER,"
	" PRIMARY KEY(node_id, boot_id)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS batches(node_id INTEGER, boot_id TEXT, seq INTEGER,"
	" received INTEGER, PRIMARY KEY(node_id, boot_id, seq)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS services(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
	"CREATE TABLE IF NOT EXISTS targets(id INTEGER PRIMARY KEY, node_id INTEGER, pid INTEGER,"
	" start_time INTEGER, kernel_boot_id TEXT, comm TEXT, exe TEXT, cgroup TEXT, runtime TEXT,"
	" labels TEXT, service_id INTEGER, state TEXT, has_jvm INTEGER, period_ns INTEGER,"
	" ord INTEGER, seq INTEGER, first_seen INTEGER, last_seen INTEGER,"
	" UNIQUE(node_id, pid, start_time, kernel_boot_id));"
	"CREATE INDEX IF NOT EXISTS targets_service ON targets(service_id);"
	"CREATE TABLE IF NOT EXISTS frames(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
	" file TEXT, line INTEGER, module TEXT, build_id TEXT);"
	"CREATE TABLE IF NOT EXISTS stacks(hash INTEGER PRIMARY KEY, frames BLOB NOT NULL,"
	" lines BLOB);"
	"CREATE TABLE IF NOT EXISTS samples(target_id INTEGER, type INTEGER, sec INTEGER,"
	" stack INTEGER, count INTEGER, PRIMARY KEY(target_id, type, sec, stack)) WITHOUT ROWID;"
	/* The same counts by minute: a range's whole minutes are read from here, 60 times fewer
	 * rows than seconds (a service's hour of 100 nodes: 16 M rows by second). Filled from
	 * samples once when a store made before it is opened. */
	"CREATE TABLE IF NOT EXISTS samples_min(target_id INTEGER, type INTEGER, min INTEGER,"
	" stack INTEGER, count INTEGER, PRIMARY KEY(target_id, type, min, stack)) WITHOUT ROWID;"
	"INSERT INTO samples_min SELECT target_id, type, sec - sec % 60, stack, SUM(count)"
	" FROM samples WHERE NOT EXISTS (SELECT 1 FROM samples_min) GROUP BY 1, 2, 3, 4;"
	"CREATE TABLE IF NOT EXISTS texts(target_id INTEGER, kind INTEGER, ord INTEGER,"
	" seq INTEGER, body TEXT, PRIMARY KEY(target_id, kind)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS sys_rows(target_id INTEGER, kind INTEGER, a INTEGER,"
	" b INTEGER, addr INTEGER, holder TEXT, stack TEXT, count INTEGER, total_ns INTEGER,"
	" max_ns INTEGER, hist BLOB);"
	"CREATE INDEX IF NOT EXISTS sys_rows_target ON sys_rows(target_id);"
	"CREATE TABLE IF NOT EXISTS blocking(target_id INTEGER, time_ns INTEGER, dur_us INTEGER,"
	" tid INTEGER, thread TEXT, preempted INTEGER, state INTEGER, stack TEXT);"
	"CREATE INDEX IF NOT EXISTS blocking_target ON blocking(target_id, time_ns);";

/* The statements of one batch's apply, prepared once. */
int sql_step(sqlite3_stmt *st, int64_t *val)
{
	int rc = sqlite3_step(st), err = 0;

	if (rc == SQLITE_ROW && val)
		*val = sqlite3_column_int64(st, 0);
	else if (rc == SQLITE_ROW)
		err = 0;
	else if (rc != SQLITE_DONE)
		err = -EIO;
	else if (val)
		err = -ENOENT;
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return err;
}

void sql_bind_text(sqlite3_stmt *st, int i, const char *s)
{
	sqlite3_bind_text(st, i, s ? s : "", -1, SQLITE_STATIC);
}

static int exec(sqlite3 *db, const char *sql)
{
	return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -EIO;
}

/* Runs sql with ?1 = a, ?2 = b, ?3 = c on the writer; adds the rows changed to *changes. */
static int run3(struct sqlite_store *s, const char *sql, int64_t a, int64_t b, int64_t c,
		int64_t *changes)
{
	sqlite3_stmt *st;
	int err = 0;

	if (sqlite3_prepare_v2(s->w, sql, -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_int64(st, 1, a);
	sqlite3_bind_int64(st, 2, b);
	sqlite3_bind_int64(st, 3, c);
	if (sqlite3_step(st) != SQLITE_DONE)
		err = -EIO;
	else if (changes)
		*changes += sqlite3_changes(s->w);
	sqlite3_finalize(st);
	return err;
}

/* The ids of every target, ascending, from after. */
static int target_ids(struct sqlite_store *s, int64_t after, int64_t *ids, size_t max,
		      size_t *n)
{
	sqlite3_stmt *st;
	int rc;

	*n = 0;
	if (sqlite3_prepare_v2(s->w, "SELECT id FROM targets WHERE id > ?1 ORDER BY id LIMIT ?2",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_int64(st, 1, after);
	sqlite3_bind_int64(st, 2, max);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		ids[(*n)++] = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

#define RETAIN_CHUNK 64

/* Old seconds go a few targets per transaction, each delete a range of the primary key, so
 * batches keep being applied between them however much there is to delete. */
static int sqlite_retain(struct agg_store *as, int64_t before)
{
	static const char *const last[] = {
		"DELETE FROM batches WHERE received < ?1",
		"DELETE FROM samples WHERE target_id IN"
		" (SELECT id FROM targets WHERE last_seen < ?1)",
		"DELETE FROM samples_min WHERE target_id IN"
		" (SELECT id FROM targets WHERE last_seen < ?1)",
		"DELETE FROM blocking WHERE target_id IN"
		" (SELECT id FROM targets WHERE last_seen < ?1)",
		"DELETE FROM texts WHERE target_id IN (SELECT id FROM targets WHERE last_seen < ?1)",
		"DELETE FROM sys_rows WHERE target_id IN"
		" (SELECT id FROM targets WHERE last_seen < ?1)",
		"DELETE FROM targets WHERE last_seen < ?1",
	};
	struct sqlite_store *s = sqlite_of(as);
	int64_t ids[RETAIN_CHUNK], after = 0, deleted = 0;
	size_t n;
	int err = 0;

	do {
		pthread_mutex_lock(&s->wlock);
		err = exec(s->w, "BEGIN IMMEDIATE");
		if (!err)
			err = target_ids(s, after, ids, RETAIN_CHUNK, &n);
		for (size_t i = 0; !err && i < n; i++) {
			for (int type = 0; !err && type < TARGET_PROFILE_NR; type++)
				err = run3(s, "DELETE FROM samples WHERE target_id = ?1 AND"
					   " type = ?2 AND sec < ?3", ids[i], type, before,
					   &deleted);
			/* and by minute; a minute cut in two is made again from its seconds */
			for (int type = 0; !err && type < TARGET_PROFILE_NR; type++)
				err = run3(s, "DELETE FROM samples_min WHERE target_id = ?1 AND"
					   " type = ?2 AND min < ?3", ids[i], type, before, NULL);
			if (!err && before % 60)
				err = run3(s, "INSERT INTO samples_min SELECT target_id, type,"
					   " sec - sec % 60, stack, SUM(count) FROM samples WHERE"
					   " target_id = ?1 AND sec >= ?2 AND sec < ?3 GROUP BY 1, 2, 3,"
					   " 4", ids[i], before, before - before % 60 + 60, NULL);
			if (!err)
				err = run3(s, "DELETE FROM blocking WHERE target_id = ?1 AND"
					   " time_ns < ?2 * 1000000000", ids[i], before, 0, NULL);
			after = ids[i];
		}
		if (!err && n == 0) {
			for (size_t i = 0; !err && i < sizeof(last) / sizeof(last[0]); i++)
				err = run3(s, last[i], before, 0, 0, &deleted);
			/* Stacks no second uses any more, once something went. */
			if (!err && deleted)
				err = run3(s, "DELETE FROM stacks WHERE hash NOT IN"
					   " (SELECT stack FROM samples)", 0, 0, 0, NULL);
		}
		err = err ? err : exec(s->w, "COMMIT");
		if (err)
			exec(s->w, "ROLLBACK");
		pthread_mutex_unlock(&s->wlock);
	} while (!err && n);
	return err;
}
/* Rows by COUNT(*) and bytes from dbstat (pages of the table and its indexes): both read
 * every page, so metrics.c asks at most every 30 s. The oldest: batches, by arrival. */
static int sqlite_stats(struct agg_store *as, struct agg_store_table *out, size_t max,
			size_t *n)
{
	static const char *const tables[] = { "nodes", "boots", "batches", "services", "targets",
					      "frames", "stacks", "samples", "samples_min", "texts",
					      "sys_rows", "blocking" };
	struct sqlite_store *s = sqlite_of(as);
	sqlite3_stmt *st;
	char sql[320];
	int err = 0;

	*n = 0;
	pthread_mutex_lock(&s->rlock);
	for (size_t i = 0; !err && i < sizeof(tables) / sizeof(tables[0]) && *n < max; i++) {
		struct agg_store_table *t = &out[(*n)++];

		snprintf(sql, sizeof(sql), "SELECT (SELECT COUNT(*) FROM %s), (SELECT"
			 " COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name = '%s' OR name IN"
			 " (SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name ="
			 " '%s')), %s", tables[i], tables[i], tables[i],
			 strcmp(tables[i], "batches") ? "0" :
			 "(SELECT COALESCE(MIN(received), 0) FROM batches)");
		*t = (struct agg_store_table){0};
		snprintf(t->name, sizeof(t->name), "%s", tables[i]);
		if (sqlite3_prepare_v2(s->r, sql, -1, &st, NULL) != SQLITE_OK) {
			err = -EIO;
			break;
		}
		if (sqlite3_step(st) == SQLITE_ROW) {
			t->rows = sqlite3_column_int64(st, 0);
			t->bytes = sqlite3_column_int64(st, 1);
			t->oldest = sqlite3_column_int64(st, 2);
		} else {
			err = -EIO;
		}
		sqlite3_finalize(st);
	}
	pthread_mutex_unlock(&s->rlock);
	return err;
}

static void sqlite_close(struct agg_store *as)
{
	struct sqlite_store *s = sqlite_of(as);

	if (!s)
		return;
	for (int i = 0; i < Q_NR; i++)
		sqlite3_finalize(s->q[i]);
	sqlite_frame_cache_clear(s);
	sqlite3_close(s->w);
	sqlite3_close(s->r);
	pthread_mutex_destroy(&s->wlock);
	pthread_mutex_destroy(&s->rlock);
	agg_group_fini(&s->group);
	free(s);
}

static const struct agg_store_ops sqlite_ops = {
	.apply = sqlite_apply,
	.list_scopes = sqlite_list_scopes,
	.scope_lookup = sqlite_scope_lookup,
	.scope_name = sqlite_scope_name,
	.targets = sqlite_targets,
	.target = sqlite_target,
	.profile = sqlite_profile,
	.sys = sqlite_sys,
	.blocking = sqlite_blocking,
	.text = sqlite_text,
	.node_status = sqlite_node_status,
	.retain = sqlite_retain,
	.totals = sqlite_totals,
	.stats = sqlite_stats,
	.close = sqlite_close,
};

static int open_db(const char *path, int flags, sqlite3 **db, char *why, size_t why_size)
{
	if (sqlite3_open_v2(path, db, flags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		snprintf(why, why_size, "%s: %s", path, *db ? sqlite3_errmsg(*db) : "no memory");
		return -EIO;
	}
	/* A writer holding the lock a moment (a checkpoint) is waited for, not failed on. */
	sqlite3_busy_timeout(*db, 5000);
	return 0;
}

#define SCHEMA_VERSION 2

/* Brings a store made by an older aggregator to SCHEMA_VERSION, after the schema's CREATE
 * IF NOT EXISTS made what was missing. Version 1 (user_version 0) lacks stacks.lines: its
 * stacks have no lines, NULL. */
static int upgrade(struct sqlite_store *s, const char *path, char *why, size_t why_size)
{
	sqlite3_stmt *st;
	int64_t version = 0;
	char set_version[48];
	bool has_lines;
	int err;

	err = sqlite3_prepare_v2(s->w, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK ?
	      sql_step(st, &version) : -EIO;
	sqlite3_finalize(st);
	if (err)
		goto fail;
	if (version > SCHEMA_VERSION) {
		snprintf(why, why_size, "%s: schema version %lld is newer than this aggregator's"
			 " (%d)", path, (long long)version, SCHEMA_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (version == SCHEMA_VERSION)
		return 0;
	/* A store of version 1 made by this schema just now already has the column. */
	snprintf(set_version, sizeof(set_version), "PRAGMA user_version = %d", SCHEMA_VERSION);
	has_lines = sqlite3_prepare_v2(s->w, "SELECT lines FROM stacks", -1, &st, NULL) ==
		    SQLITE_OK;
	sqlite3_finalize(st);
	err = exec(s->w, "BEGIN IMMEDIATE");
	if (!err && !has_lines)
		err = exec(s->w, "ALTER TABLE stacks ADD COLUMN lines BLOB");
	if (!err)
		err = exec(s->w, set_version);
	err = err ? err : exec(s->w, "COMMIT");
	if (!err)
		return 0;
	exec(s->w, "ROLLBACK");
fail:
	snprintf(why, why_size, "%s: upgrading the schema: %s", path, sqlite3_errmsg(s->w));
	return -EIO;
}

static int sqlite_open(const char *path, struct agg_store **out, char *why, size_t why_size)
{
	struct sqlite_store *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return -ENOMEM;
	s->base.ops = &sqlite_ops;
	snprintf(s->base.url, sizeof(s->base.url), "sqlite:%s", path);
	pthread_mutex_init(&s->wlock, NULL);
	pthread_mutex_init(&s->rlock, NULL);
	agg_group_init(&s->group, GROUP_MAX, sqlite_apply_group, s);
	err = open_db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &s->w, why, why_size);
	/* FULL: a batch acknowledged is on disk, or the node would drop what we then lose. */
	if (!err && (exec(s->w, schema) || exec(s->w, "PRAGMA synchronous=FULL"))) {
		snprintf(why, why_size, "%s: %s", path, sqlite3_errmsg(s->w));
		err = -EIO;
	}
	if (!err)
		err = upgrade(s, path, why, why_size);
	if (!err)
		err = open_db(path, SQLITE_OPEN_READONLY, &s->r, why, why_size);
	for (int i = 0; !err && i < Q_NR; i++)
		if (sqlite3_prepare_v3(s->w, sqlite_apply_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->q[i],
				       NULL) != SQLITE_OK) {
			snprintf(why, why_size, "%s: %s", sqlite_apply_sql[i], sqlite3_errmsg(s->w));
			err = -EIO;
		}
	if (err) {
		sqlite_close(&s->base);
		return err;
	}
	*out = &s->base;
	return 0;
}

int agg_store_open(const char *url, struct agg_store **out, char *why, size_t why_size)
{
	if (!strncmp(url, "sqlite:", 7))
		return sqlite_open(url + 7, out, why, why_size);
	if (!strncmp(url, "clickhouse://", 13))
		return agg_store_open_clickhouse(url, out, why, why_size);
	if (strstr(url, "://")) {
		snprintf(why, why_size, "%s: unknown store (sqlite:PATH and"
			 " clickhouse://HOST:PORT/DB are)", url);
		return -EINVAL;
	}
	return sqlite_open(url, out, why, why_size);
}

