/* The embedded store: one SQLite file (WAL), a writer connection for batches and a reader
 * connection for the tree, so a long read never holds up ingest.
 *
 * Batches arriving together are applied in one transaction (group commit), each under its
 * own savepoint with its id, so a batch is still all or nothing and a duplicate changes
 * nothing, while one fsync acknowledges them all.
 *
 * Stacks are stored once, by a stable 64-bit hash (FNV-1a) of their frame names; frames once
 * by name, with the first frame info given for it, as store/profile.c does. Samples are keyed
 * (target incarnation, profile type, second, stack) and summed on conflict. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>
#include "aggregate/batch_names.h"
#include "aggregate/group_commit.h"

#define SYS_MARK 100 /* texts.kind of the sys rows' version */

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
	"CREATE TABLE IF NOT EXISTS stacks(hash INTEGER PRIMARY KEY, frames BLOB NOT NULL);"
	"CREATE TABLE IF NOT EXISTS samples(target_id INTEGER, type INTEGER, sec INTEGER,"
	" stack INTEGER, count INTEGER, PRIMARY KEY(target_id, type, sec, stack)) WITHOUT ROWID;"
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
enum {
	Q_BEGIN, Q_COMMIT, Q_ROLLBACK, Q_SAVEPOINT, Q_ROLLBACK_TO, Q_RELEASE, Q_NODE_ADD, Q_NODE_ID, Q_DUPLICATE, Q_BATCH_ADD,
	Q_BOOT_ADD, Q_BOOT_ORD, Q_NODE_STATUS, Q_NODE_COUNT, Q_SERVICE_ADD, Q_SERVICE_ID,
	Q_TARGET_ADD, Q_TARGET_ID, Q_FRAME_ADD, Q_FRAME_ID, Q_STACK_ADD, Q_SAMPLE_ADD, Q_TEXT_SET,
	Q_SYS_DEL, Q_SYS_ADD, Q_BLOCKING_ADD, Q_NR,
};

static const char *const apply_sql[Q_NR] = {
	[Q_BEGIN] = "BEGIN IMMEDIATE",
	[Q_COMMIT] = "COMMIT",
	[Q_ROLLBACK] = "ROLLBACK",
	[Q_SAVEPOINT] = "SAVEPOINT batch",
	[Q_ROLLBACK_TO] = "ROLLBACK TO batch",
	[Q_RELEASE] = "RELEASE batch",
	[Q_NODE_ADD] = "INSERT OR IGNORE INTO nodes(name) VALUES(?1)",
	[Q_NODE_ID] = "SELECT id FROM nodes WHERE name = ?1",
	[Q_DUPLICATE] = "UPDATE nodes SET duplicates = duplicates + 1 WHERE name = ?1",
	[Q_BATCH_ADD] = "INSERT OR IGNORE INTO batches VALUES(?1, ?2, ?3, ?4)",
	[Q_BOOT_ADD] = "INSERT OR IGNORE INTO boots VALUES(?1, ?2,"
		       " (SELECT COALESCE(MAX(ord), 0) + 1 FROM boots WHERE node_id = ?1))",
	[Q_BOOT_ORD] = "SELECT ord FROM boots WHERE node_id = ?1 AND boot_id = ?2",
	[Q_NODE_STATUS] = "UPDATE nodes SET last_created = ?2, last_seq = ?3, last_ord = ?4,"
			  " last_boot_id = ?5, spool_bytes = ?6, batches_dropped = ?7,"
			  " oldest_dropped = ?8, batches_rejected = ?9, last_error = ?10,"
			  " last_success = ?11, version = ?12 WHERE id = ?1 AND"
			  " (last_ord < ?4 OR (last_ord = ?4 AND last_seq < ?3))",
	[Q_NODE_COUNT] = "UPDATE nodes SET batches = batches + 1, samples = samples + ?2,"
			 " last_batch = ?3 WHERE id = ?1",
	[Q_SERVICE_ADD] = "INSERT OR IGNORE INTO services(name) VALUES(?1)",
	[Q_SERVICE_ID] = "SELECT id FROM services WHERE name = ?1",
	[Q_TARGET_ADD] = "INSERT INTO targets(node_id, pid, start_time, kernel_boot_id, comm, exe,"
			 " cgroup, runtime, labels, service_id, state, has_jvm, period_ns, ord, seq,"
			 " first_seen, last_seen) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,"
			 " ?12, ?13, ?14, ?15, ?16, ?16) ON CONFLICT(node_id, pid, start_time,"
			 " kernel_boot_id) DO UPDATE SET last_seen = excluded.last_seen,"
			 " comm = excluded.comm, exe = excluded.exe, cgroup = excluded.cgroup,"
			 " runtime = excluded.runtime, labels = excluded.labels,"
			 " service_id = excluded.service_id, state = excluded.state,"
			 " has_jvm = excluded.has_jvm, period_ns = excluded.period_ns,"
			 " ord = excluded.ord, seq = excluded.seq WHERE excluded.ord > targets.ord OR"
			 " (excluded.ord = targets.ord AND excluded.seq > targets.seq)",
	[Q_TARGET_ID] = "SELECT id FROM targets WHERE node_id = ?1 AND pid = ?2 AND"
			" start_time = ?3 AND kernel_boot_id = ?4",
	[Q_FRAME_ADD] = "INSERT OR IGNORE INTO frames(name, file, line, module, build_id)"
			" VALUES(?1, ?2, ?3, ?4, ?5)",
	[Q_FRAME_ID] = "SELECT id FROM frames WHERE name = ?1",
	[Q_STACK_ADD] = "INSERT OR IGNORE INTO stacks VALUES(?1, ?2)",
	[Q_SAMPLE_ADD] = "INSERT INTO samples VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT DO UPDATE"
			 " SET count = count + excluded.count",
	[Q_TEXT_SET] = "INSERT INTO texts VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT DO UPDATE SET"
		       " ord = excluded.ord, seq = excluded.seq, body = excluded.body WHERE"
		       " excluded.ord > texts.ord OR (excluded.ord = texts.ord AND"
		       " excluded.seq > texts.seq)",
	[Q_SYS_DEL] = "DELETE FROM sys_rows WHERE target_id = ?1",
	[Q_SYS_ADD] = "INSERT INTO sys_rows VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
	[Q_BLOCKING_ADD] = "INSERT INTO blocking VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
};

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

#define FRAME_CACHE_MAX (1 << 20)

static struct sqlite_store *of(struct agg_store *s)
{
	return (struct sqlite_store *)s;
}

/* Runs a prepared statement to its end; SQLITE_ROW's first column into *val if asked. */
static int step(sqlite3_stmt *st, int64_t *val)
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

static void bind_text(sqlite3_stmt *st, int i, const char *s)
{
	sqlite3_bind_text(st, i, s ? s : "", -1, SQLITE_STATIC);
}

static int name_id(struct sqlite_store *s, int add, int get, const char *name, int64_t *id)
{
	int err;

	bind_text(s->q[add], 1, name);
	err = step(s->q[add], NULL);
	if (err)
		return err;
	bind_text(s->q[get], 1, name);
	return step(s->q[get], id);
}

static const char *str_at(const WireBatch *b, uint32_t i)
{
	return b->strings[i];
}

static int frame_db_id(struct sqlite_store *s, const WireBatch *b, uint32_t fi, int64_t *id)
{
	const Aperture__Sync__V1__Frame *f = b->frames[fi];
	const char *name = str_at(b, f->name);
	struct frame_id *c;
	size_t len = strlen(name);
	sqlite3_stmt *st = s->q[Q_FRAME_ADD];
	int err;

	HASH_FIND(hh, s->frames, name, len, c);
	if (c) {
		*id = c->id;
		return 0;
	}
	bind_text(st, 1, name);
	if (f->file)
		bind_text(st, 2, str_at(b, f->file));
	sqlite3_bind_int64(st, 3, f->line);
	if (f->module)
		bind_text(st, 4, str_at(b, f->module));
	if (f->build_id)
		bind_text(st, 5, str_at(b, f->build_id));
	err = step(st, NULL);
	if (!err) {
		bind_text(s->q[Q_FRAME_ID], 1, name);
		err = step(s->q[Q_FRAME_ID], id);
	}
	if (err || s->nframes >= FRAME_CACHE_MAX)
		return err;
	c = malloc(sizeof(*c) + len + 1);
	if (c) {
		c->id = *id;
		memcpy(c->name, name, len + 1);
		HASH_ADD_KEYPTR(hh, s->frames, c->name, len, c);
		s->nframes++;
	}
	return 0;
}

static void frame_cache_clear(struct sqlite_store *s)
{
	struct frame_id *c, *tmp;

	HASH_ITER(hh, s->frames, c, tmp) {
		HASH_DEL(s->frames, c);
		free(c);
	}
	s->nframes = 0;
}

/* Stores each stack of b once and fills hashes[i] with stack i's key. */
static int put_stacks(struct sqlite_store *s, const WireBatch *b, int64_t *hashes)
{
	int64_t *frame_ids = calloc(b->n_frames ? b->n_frames : 1, sizeof(*frame_ids));
	uint32_t *blob = NULL;
	size_t cap = 0;
	int err = 0;

	if (!frame_ids)
		return -ENOMEM;
	for (size_t i = 0; !err && i < b->n_frames; i++)
		err = frame_db_id(s, b, i, &frame_ids[i]);
	for (size_t i = 0; !err && i < b->n_stacks; i++) {
		const Aperture__Sync__V1__Stack *st = b->stacks[i];
		uint64_t h = AGG_FNV_BASIS;

		if (st->n_frames > cap) {
			uint32_t *bigger = realloc(blob, st->n_frames * sizeof(*blob));

			if (!bigger) {
				err = -ENOMEM;
				break;
			}
			blob = bigger;
			cap = st->n_frames;
		}
		for (size_t j = 0; j < st->n_frames; j++) {
			const char *name = str_at(b, b->frames[st->frames[j]]->name);

			h = agg_fnv1a(h, name, strlen(name) + 1);
			blob[j] = frame_ids[st->frames[j]];
		}
		hashes[i] = (int64_t)h;
		sqlite3_bind_int64(s->q[Q_STACK_ADD], 1, hashes[i]);
		sqlite3_bind_blob(s->q[Q_STACK_ADD], 2, blob, st->n_frames * sizeof(*blob),
				  SQLITE_STATIC);
		err = step(s->q[Q_STACK_ADD], NULL);
	}
	free(blob);
	free(frame_ids);
	return err;
}

static int set_text(struct sqlite_store *s, int64_t target, int kind, int64_t ord,
		    uint64_t seq, const char *body, bool *changed)
{
	sqlite3_stmt *st = s->q[Q_TEXT_SET];
	int err;

	sqlite3_bind_int64(st, 1, target);
	sqlite3_bind_int(st, 2, kind);
	sqlite3_bind_int64(st, 3, ord);
	sqlite3_bind_int64(st, 4, seq);
	bind_text(st, 5, body);
	err = step(st, NULL);
	if (changed)
		*changed = !err && sqlite3_changes(s->w) > 0;
	return err;
}

static int put_sys(struct sqlite_store *s, const WireBatch *b, int64_t target,
		   const Aperture__Sync__V1__SysStats *sys)
{
	int err = 0;

	err = step((sqlite3_bind_int64(s->q[Q_SYS_DEL], 1, target), s->q[Q_SYS_DEL]), NULL);
	for (size_t i = 0; !err && i < sys->n_rows; i++) {
		const Aperture__Sync__V1__SysRow *r = sys->rows[i];
		sqlite3_stmt *st = s->q[Q_SYS_ADD];
		uint64_t hist[LATENCY_HIST] = {0};

		memcpy(hist, r->hist, r->n_hist * sizeof(*hist));
		sqlite3_bind_int64(st, 1, target);
		sqlite3_bind_int(st, 2, r->kind);
		sqlite3_bind_int64(st, 3, r->a);
		sqlite3_bind_int64(st, 4, r->b);
		sqlite3_bind_int64(st, 5, (int64_t)r->addr);
		if (r->holder)
			bind_text(st, 6, str_at(b, r->holder));
		if (r->stack)
			bind_text(st, 7, str_at(b, r->stack));
		sqlite3_bind_int64(st, 8, (int64_t)r->count);
		sqlite3_bind_int64(st, 9, (int64_t)r->total_ns);
		sqlite3_bind_int64(st, 10, (int64_t)r->max_ns);
		sqlite3_bind_blob(st, 11, hist, sizeof(hist), SQLITE_TRANSIENT);
		err = step(st, NULL);
	}
	return err;
}

static int put_target(struct sqlite_store *s, const WireBatch *b, int64_t node, int64_t ord,
		      int64_t now, const Aperture__Sync__V1__Target *t, const int64_t *hashes,
		      uint64_t *samples)
{
	const char *texts[TREE_TEXT_NR] = {
		[TREE_TEXT_STATUS] = t->status,
		[TREE_TEXT_JVM_STATUS] = t->jvm_status,
		[TREE_TEXT_THREADS_DUMP] = t->threads_dump,
		[TREE_TEXT_DEADLOCKS] = t->deadlocks,
		[TREE_TEXT_DEADLOCKS_JSON] = t->deadlocks_json,
		[TREE_TEXT_THREADS_BUSY] = t->threads_busy,
	};
	sqlite3_stmt *st = s->q[Q_TARGET_ADD];
	int64_t service, id;
	char service_name[256];
	uint32_t period = 0;
	char *labels;
	bool changed;
	int err;

	agg_service_of(t, service_name, sizeof(service_name));
	err = name_id(s, Q_SERVICE_ADD, Q_SERVICE_ID, service_name, &service);
	if (err)
		return err;
	for (size_t p = 0; p < t->n_profiles; p++)
		if (!strcmp(t->profiles[p]->type, "cpu"))
			period = t->profiles[p]->period_ns;
	labels = agg_labels_text(t);
	if (!labels)
		return -ENOMEM;
	sqlite3_bind_int64(st, 1, node);
	sqlite3_bind_int(st, 2, t->pid);
	sqlite3_bind_int64(st, 3, (int64_t)t->start_time);
	bind_text(st, 4, t->kernel_boot_id);
	bind_text(st, 5, t->comm);
	bind_text(st, 6, t->exe);
	bind_text(st, 7, t->cgroup);
	bind_text(st, 8, t->runtime);
	bind_text(st, 9, labels);
	sqlite3_bind_int64(st, 10, service);
	bind_text(st, 11, t->state);
	sqlite3_bind_int(st, 12, t->has_jvm);
	sqlite3_bind_int64(st, 13, period);
	sqlite3_bind_int64(st, 14, ord);
	sqlite3_bind_int64(st, 15, (int64_t)b->seq);
	sqlite3_bind_int64(st, 16, now);
	err = step(st, NULL);
	free(labels);
	if (err)
		return err;
	st = s->q[Q_TARGET_ID];
	sqlite3_bind_int64(st, 1, node);
	sqlite3_bind_int(st, 2, t->pid);
	sqlite3_bind_int64(st, 3, (int64_t)t->start_time);
	bind_text(st, 4, t->kernel_boot_id);
	err = step(st, &id);
	for (int k = 0; !err && k < TREE_TEXT_NR; k++)
		if (texts[k] && texts[k][0]) /* empty: unchanged, like an absent sys */
			err = set_text(s, id, k, ord, b->seq, texts[k], NULL);
	if (!err && t->sys) {
		err = set_text(s, id, SYS_MARK, ord, b->seq, "", &changed);
		if (!err && changed)
			err = put_sys(s, b, id, t->sys);
	}
	for (size_t p = 0; !err && p < t->n_profiles; p++) {
		const Aperture__Sync__V1__Profile *pr = t->profiles[p];
		int type = tree_profile_by_name(pr->type);

		for (size_t i = 0; !err && i < pr->n_seconds; i++) {
			const Aperture__Sync__V1__Second *sec = pr->seconds[i];

			for (size_t k = 0; !err && k < sec->n_stacks; k++) {
				if (!sec->counts[k])
					continue;
				st = s->q[Q_SAMPLE_ADD];
				sqlite3_bind_int64(st, 1, id);
				sqlite3_bind_int(st, 2, type);
				sqlite3_bind_int64(st, 3, sec->sec);
				sqlite3_bind_int64(st, 4, hashes[sec->stacks[k]]);
				sqlite3_bind_int64(st, 5, (int64_t)sec->counts[k]);
				err = step(st, NULL);
				*samples += sec->counts[k];
			}
		}
	}
	for (size_t e = 0; !err && e < t->n_blocking; e++) {
		const Aperture__Sync__V1__BlockingEvent *ev = t->blocking[e];
		char *stack = agg_stack_text(b, ev->stack);

		if (!stack)
			return -ENOMEM;
		st = s->q[Q_BLOCKING_ADD];
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_int64(st, 2, ev->time_ns);
		sqlite3_bind_int64(st, 3, (int64_t)ev->dur_us);
		sqlite3_bind_int(st, 4, ev->tid);
		bind_text(st, 5, ev->thread);
		sqlite3_bind_int(st, 6, ev->preempted);
		sqlite3_bind_int(st, 7, ev->state);
		bind_text(st, 8, stack);
		err = step(st, NULL);
		free(stack);
	}
	return err;
}

static int put_node_status(struct sqlite_store *s, const WireBatch *b, int64_t node,
			   int64_t ord)
{
	const Aperture__Sync__V1__NodeStatus *ns = b->node_status;
	sqlite3_stmt *st = s->q[Q_NODE_STATUS];

	sqlite3_bind_int64(st, 1, node);
	sqlite3_bind_int64(st, 2, b->created_unix);
	sqlite3_bind_int64(st, 3, (int64_t)b->seq);
	sqlite3_bind_int64(st, 4, ord);
	bind_text(st, 5, b->boot_id);
	if (ns) {
		sqlite3_bind_int64(st, 6, (int64_t)ns->spool_bytes);
		sqlite3_bind_int64(st, 7, (int64_t)ns->batches_dropped);
		sqlite3_bind_int64(st, 8, ns->oldest_dropped_unix);
		sqlite3_bind_int64(st, 9, (int64_t)ns->batches_rejected);
		bind_text(st, 10, ns->last_error);
		sqlite3_bind_int64(st, 11, ns->last_success_unix);
		bind_text(st, 12, ns->version);
	} else {
		for (int i = 6; i <= 12; i++)
			sqlite3_bind_int(st, i, 0);
		bind_text(st, 10, "");
		bind_text(st, 12, "");
	}
	return step(st, NULL);
}

static int apply_locked(struct sqlite_store *s, const WireBatch *b, int64_t now,
			struct agg_apply_result *r)
{
	int64_t node, ord, *hashes = NULL;
	sqlite3_stmt *st;
	int err;

	err = name_id(s, Q_NODE_ADD, Q_NODE_ID, b->node, &node);
	if (err)
		return err;
	st = s->q[Q_BATCH_ADD];
	sqlite3_bind_int64(st, 1, node);
	bind_text(st, 2, b->boot_id);
	sqlite3_bind_int64(st, 3, (int64_t)b->seq);
	sqlite3_bind_int64(st, 4, now);
	err = step(st, NULL);
	if (err)
		return err;
	if (sqlite3_changes(s->w) == 0) {
		r->duplicate = true;
		return 0;
	}
	st = s->q[Q_BOOT_ADD];
	sqlite3_bind_int64(st, 1, node);
	bind_text(st, 2, b->boot_id);
	err = step(st, NULL);
	if (!err) {
		st = s->q[Q_BOOT_ORD];
		sqlite3_bind_int64(st, 1, node);
		bind_text(st, 2, b->boot_id);
		err = step(st, &ord);
	}
	if (err)
		return err;
	hashes = calloc(b->n_stacks ? b->n_stacks : 1, sizeof(*hashes));
	if (!hashes)
		return -ENOMEM;
	err = put_stacks(s, b, hashes);
	for (size_t i = 0; !err && i < b->n_targets; i++)
		err = put_target(s, b, node, ord, now, b->targets[i], hashes, &r->samples);
	free(hashes);
	if (!err)
		err = put_node_status(s, b, node, ord);
	if (!err) {
		st = s->q[Q_NODE_COUNT];
		sqlite3_bind_int64(st, 1, node);
		sqlite3_bind_int64(st, 2, (int64_t)r->samples);
		sqlite3_bind_int64(st, 3, now);
		err = step(st, NULL);
	}
	return err;
}

/* One batch of a group, under its savepoint: applied whole, or rolled back to nothing. */
static void apply_one(struct sqlite_store *s, struct agg_job *j)
{
	*j->r = (struct agg_apply_result){0};
	j->err = step(s->q[Q_SAVEPOINT], NULL);
	if (j->err)
		return;
	j->err = apply_locked(s, j->b, j->now, j->r);
	if (j->err || j->r->duplicate) {
		step(s->q[Q_ROLLBACK_TO], NULL);
		/* Frames rolled back may be cached with ids that are gone. */
		if (j->err)
			frame_cache_clear(s);
	}
	step(s->q[Q_RELEASE], NULL);
	if (!j->err && j->r->duplicate) {
		bind_text(s->q[Q_DUPLICATE], 1, j->b->node);
		step(s->q[Q_DUPLICATE], NULL);
	}
}

static void apply_group(void *ctx, struct agg_job *group)
{
	struct sqlite_store *s = ctx;
	int err;

	pthread_mutex_lock(&s->wlock);
	err = step(s->q[Q_BEGIN], NULL);
	for (struct agg_job *j = group; !err && j; j = j->next)
		apply_one(s, j);
	if (!err)
		err = step(s->q[Q_COMMIT], NULL);
	if (err) {
		step(s->q[Q_ROLLBACK], NULL);
		frame_cache_clear(s);
		for (struct agg_job *j = group; j; j = j->next)
			j->err = err;
	}
	pthread_mutex_unlock(&s->wlock);
}

static int sqlite_apply(struct agg_store *as, const WireBatch *b, int64_t now,
			struct agg_apply_result *r)
{
	return agg_group_apply(&of(as)->group, b, now, r);
}

/* Read side: statements prepared per call on the reader connection, under rlock. */
static int prepare(struct sqlite_store *s, const char *sql, sqlite3_stmt **st)
{
	return sqlite3_prepare_v2(s->r, sql, -1, st, NULL) == SQLITE_OK ? 0 : -EIO;
}

static int sqlite_list_scopes(struct agg_store *as, enum agg_scope_kind kind,
			      int (*add)(void *ctx, uint32_t id, const char *name), void *ctx)
{
	struct sqlite_store *s = of(as);
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

static int sqlite_scope_lookup(struct agg_store *as, enum agg_scope_kind kind,
			       const char *name, uint32_t *id)
{
	struct sqlite_store *s = of(as);
	sqlite3_stmt *st;
	int64_t v;
	int err;

	pthread_mutex_lock(&s->rlock);
	err = prepare(s, kind == AGG_SCOPE_NODE ? "SELECT id FROM nodes WHERE name = ?1" :
			 "SELECT id FROM services WHERE name = ?1", &st);
	if (!err) {
		bind_text(st, 1, name);
		err = step(st, &v);
		sqlite3_finalize(st);
	}
	pthread_mutex_unlock(&s->rlock);
	if (!err)
		*id = (uint32_t)v << 1 | kind;
	return err;
}

static int sqlite_scope_name(struct agg_store *as, enum agg_scope_kind kind, uint32_t id,
			     char *name, size_t size)
{
	struct sqlite_store *s = of(as);
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

static int sqlite_targets(struct agg_store *as, const char *node, pid_t **pids, size_t *n)
{
	struct sqlite_store *s = of(as);
	sqlite3_stmt *st;
	pid_t *v = NULL;
	size_t cap = 0, len = 0;
	int err, rc = SQLITE_DONE;

	pthread_mutex_lock(&s->rlock);
	err = prepare(s, "SELECT DISTINCT pid FROM targets WHERE node_id ="
			 " (SELECT id FROM nodes WHERE name = ?1) ORDER BY pid", &st);
	if (!err)
		bind_text(st, 1, node);
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

static int sqlite_target(struct agg_store *as, const char *node, pid_t pid,
			 struct agg_target *out)
{
	struct sqlite_store *s = of(as);
	sqlite3_stmt *st;
	int err;

	pthread_mutex_lock(&s->rlock);
	err = prepare(s, "SELECT comm, state, has_jvm, period_ns, last_seen FROM targets"
			 " WHERE id = " NEWEST_TARGET, &st);
	if (!err) {
		bind_text(st, 1, node);
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

/* Adds a stack of the db (its frames blob) with count n to p. */
static int add_stack(struct sqlite_store *s, sqlite3_stmt *fq, struct profile *p,
		     struct frame_map **map, const void *blob, size_t depth, uint64_t n,
		     uint32_t **frames, size_t *cap)
{
	int err = 0;

	if (!depth)
		return 0;
	if (depth > *cap) {
		uint32_t *bigger = realloc(*frames, depth * sizeof(**frames));

		if (!bigger)
			return -ENOMEM;
		*frames = bigger;
		*cap = depth;
	}
	for (size_t i = 0; !err && i < depth; i++) {
		uint32_t db_id;

		memcpy(&db_id, (const char *)blob + i * sizeof(db_id), sizeof(db_id));
		err = frame_of(s, fq, p, map, db_id, &(*frames)[i]);
	}
	return err ? err : profile_add(p, 0, *frames, depth, n);
}

static int sqlite_profile(struct agg_store *as, const struct agg_query *q,
			  struct profile_snapshot **out)
{
	static const char by_target[] =
		"SELECT stack, count FROM samples WHERE target_id = " NEWEST_TARGET
		" AND type = ?3 AND sec BETWEEN ?4 AND ?5";
	static const char by_service[] =
		"SELECT stack, count FROM samples WHERE target_id IN (SELECT id FROM targets"
		" WHERE service_id = (SELECT id FROM services WHERE name = ?1)) AND type = ?3 AND"
		" sec BETWEEN ?4 AND ?5";
	struct sqlite_store *s = of(as);
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
		err = prepare(s, "SELECT frames FROM stacks WHERE hash = ?1", &sq);
	if (!err) {
		bind_text(st, 1, q->service ? q->service : q->node);
		sqlite3_bind_int(st, 2, q->pid);
		sqlite3_bind_int(st, 3, q->type);
		sqlite3_bind_int64(st, 4, q->from);
		sqlite3_bind_int64(st, 5, q->until);
		err = sum_by_stack(st, &sums);
	}
	HASH_ITER(hh, sums, e, etmp) {
		if (!err) {
			sqlite3_bind_int64(sq, 1, e->hash);
			if (sqlite3_step(sq) == SQLITE_ROW)
				err = add_stack(s, fq, p, &map, sqlite3_column_blob(sq, 0),
						sqlite3_column_bytes(sq, 0) / sizeof(uint32_t),
						e->n, &frames, &cap);
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

static int sqlite_sys(struct agg_store *as, const char *node, pid_t pid,
		      struct sys_snapshot **out)
{
	struct sqlite_store *s = of(as);
	struct sys_table *t = sys_table_new();
	sqlite3_stmt *st;
	int err, rc = SQLITE_DONE;

	if (!t)
		return -ENOMEM;
	pthread_mutex_lock(&s->rlock);
	err = prepare(s, "SELECT kind, a, b, addr, holder, stack, count, total_ns, max_ns, hist"
			 " FROM sys_rows WHERE target_id = " NEWEST_TARGET, &st);
	if (!err) {
		bind_text(st, 1, node);
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

static int sqlite_blocking(struct agg_store *as, const char *node, pid_t pid,
			   struct blocking_snapshot **out)
{
	struct sqlite_store *s = of(as);
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
		bind_text(st, 1, node);
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

static int sqlite_text(struct agg_store *as, const char *node, pid_t pid, enum tree_text which,
		       char **out)
{
	struct sqlite_store *s = of(as);
	sqlite3_stmt *st;
	int err;

	pthread_mutex_lock(&s->rlock);
	err = prepare(s, "SELECT body FROM texts WHERE kind = ?3 AND target_id = "
			 NEWEST_TARGET, &st);
	if (!err) {
		bind_text(st, 1, node);
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

static int sqlite_node_status(struct agg_store *as, const char *node,
			      struct agg_node_status *out)
{
	struct sqlite_store *s = of(as);
	sqlite3_stmt *st;
	int err;

	pthread_mutex_lock(&s->rlock);
	err = prepare(s, "SELECT name, last_batch, last_created, last_seq, last_boot_id,"
			 " batches, duplicates, samples, spool_bytes, batches_dropped,"
			 " batches_rejected, oldest_dropped, last_success, last_error, version,"
			 " (SELECT COUNT(DISTINCT pid) FROM targets WHERE node_id = nodes.id)"
			 " FROM nodes WHERE name = ?1", &st);
	if (!err) {
		bind_text(st, 1, node);
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
		"DELETE FROM blocking WHERE target_id IN"
		" (SELECT id FROM targets WHERE last_seen < ?1)",
		"DELETE FROM texts WHERE target_id IN (SELECT id FROM targets WHERE last_seen < ?1)",
		"DELETE FROM sys_rows WHERE target_id IN"
		" (SELECT id FROM targets WHERE last_seen < ?1)",
		"DELETE FROM targets WHERE last_seen < ?1",
	};
	struct sqlite_store *s = of(as);
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

static int sqlite_totals(struct agg_store *as, uint64_t *batches, uint64_t *samples,
			 uint64_t *nodes, uint64_t *targets)
{
	struct sqlite_store *s = of(as);
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

static void sqlite_close(struct agg_store *as)
{
	struct sqlite_store *s = of(as);

	if (!s)
		return;
	for (int i = 0; i < Q_NR; i++)
		sqlite3_finalize(s->q[i]);
	frame_cache_clear(s);
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
	agg_group_init(&s->group, GROUP_MAX, apply_group, s);
	err = open_db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &s->w, why, why_size);
	/* FULL: a batch acknowledged is on disk, or the node would drop what we then lose. */
	if (!err && (exec(s->w, schema) || exec(s->w, "PRAGMA synchronous=FULL"))) {
		snprintf(why, why_size, "%s: %s", path, sqlite3_errmsg(s->w));
		err = -EIO;
	}
	if (!err)
		err = open_db(path, SQLITE_OPEN_READONLY, &s->r, why, why_size);
	for (int i = 0; !err && i < Q_NR; i++)
		if (sqlite3_prepare_v3(s->w, apply_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->q[i],
				       NULL) != SQLITE_OK) {
			snprintf(why, why_size, "%s: %s", apply_sql[i], sqlite3_errmsg(s->w));
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
