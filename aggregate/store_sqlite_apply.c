/* Batches into the SQLite store. Batches arriving together are applied in one transaction
 * (group commit), each under its own savepoint with its id, so a batch is still all or
 * nothing and a duplicate changes nothing, while one fsync acknowledges them all. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "aggregate/batch_names.h"
#include "aggregate/store_sqlite.h"

const char *const sqlite_apply_sql[Q_NR] = {
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
	[Q_STACK_ADD] = "INSERT OR IGNORE INTO stacks(hash, frames, lines) VALUES(?1, ?2, ?3)",
	[Q_SAMPLE_ADD] = "INSERT INTO samples VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT DO UPDATE"
			 " SET count = count + excluded.count",
	[Q_SAMPLE_MIN_ADD] = "INSERT INTO samples_min VALUES(?1, ?2, ?3 - ?3 % 60, ?4, ?5) ON"
			     " CONFLICT DO UPDATE SET count = count + excluded.count",
	[Q_TEXT_SET] = "INSERT INTO texts VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT DO UPDATE SET"
		       " ord = excluded.ord, seq = excluded.seq, body = excluded.body WHERE"
		       " excluded.ord > texts.ord OR (excluded.ord = texts.ord AND"
		       " excluded.seq > texts.seq)",
	[Q_SYS_DEL] = "DELETE FROM sys_rows WHERE target_id = ?1",
	[Q_SYS_ADD] = "INSERT INTO sys_rows VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
	[Q_BLOCKING_ADD] = "INSERT INTO blocking VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
};

#define FRAME_CACHE_MAX (1 << 20)

static int name_id(struct sqlite_store *s, int add, int get, const char *name, int64_t *id)
{
	int err;

	sql_bind_text(s->q[add], 1, name);
	err = sql_step(s->q[add], NULL);
	if (err)
		return err;
	sql_bind_text(s->q[get], 1, name);
	return sql_step(s->q[get], id);
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
	sql_bind_text(st, 1, name);
	if (f->file)
		sql_bind_text(st, 2, str_at(b, f->file));
	sqlite3_bind_int64(st, 3, f->line);
	if (f->module)
		sql_bind_text(st, 4, str_at(b, f->module));
	if (f->build_id)
		sql_bind_text(st, 5, str_at(b, f->build_id));
	err = sql_step(st, NULL);
	if (!err) {
		sql_bind_text(s->q[Q_FRAME_ID], 1, name);
		err = sql_step(s->q[Q_FRAME_ID], id);
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

void sqlite_frame_cache_clear(struct sqlite_store *s)
{
	struct frame_id *c, *tmp;

	HASH_ITER(hh, s->frames, c, tmp) {
		HASH_DEL(s->frames, c);
		free(c);
	}
	s->nframes = 0;
}

/* Stores each stack of b once, with its lines if it has some, and fills hashes[i] with stack
 * i's key. */
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
		hashes[i] = (int64_t)agg_lines_hash(h, st);
		sqlite3_bind_int64(s->q[Q_STACK_ADD], 1, hashes[i]);
		sqlite3_bind_blob(s->q[Q_STACK_ADD], 2, blob, st->n_frames * sizeof(*blob),
				  SQLITE_STATIC);
		if (agg_has_lines(st))
			sqlite3_bind_blob(s->q[Q_STACK_ADD], 3, st->lines,
					  st->n_lines * sizeof(*st->lines), SQLITE_STATIC);
		err = sql_step(s->q[Q_STACK_ADD], NULL);
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
	sql_bind_text(st, 5, body);
	err = sql_step(st, NULL);
	if (changed)
		*changed = !err && sqlite3_changes(s->w) > 0;
	return err;
}

static int put_sys(struct sqlite_store *s, const WireBatch *b, int64_t target,
		   const Aperture__Sync__V1__SysStats *sys)
{
	int err = 0;

	err = sql_step((sqlite3_bind_int64(s->q[Q_SYS_DEL], 1, target), s->q[Q_SYS_DEL]), NULL);
	for (size_t i = 0; !err && i < sys->n_rows; i++) {
		const Aperture__Sync__V1__SysRow *r = sys->rows[i];
		sqlite3_stmt *st = s->q[Q_SYS_ADD];
		uint64_t hist[LATENCY_HIST] = {0};

		if (r->n_hist) /* none: hist is NULL */
			memcpy(hist, r->hist, r->n_hist * sizeof(*hist));
		sqlite3_bind_int64(st, 1, target);
		sqlite3_bind_int(st, 2, r->kind);
		sqlite3_bind_int64(st, 3, r->a);
		sqlite3_bind_int64(st, 4, r->b);
		sqlite3_bind_int64(st, 5, (int64_t)r->addr);
		if (r->holder)
			sql_bind_text(st, 6, str_at(b, r->holder));
		if (r->stack)
			sql_bind_text(st, 7, str_at(b, r->stack));
		sqlite3_bind_int64(st, 8, (int64_t)r->count);
		sqlite3_bind_int64(st, 9, (int64_t)r->total_ns);
		sqlite3_bind_int64(st, 10, (int64_t)r->max_ns);
		sqlite3_bind_blob(st, 11, hist, sizeof(hist), SQLITE_TRANSIENT);
		err = sql_step(st, NULL);
	}
	return err;
}

static int put_target(struct sqlite_store *s, const WireBatch *b, int64_t node, int64_t ord,
		      int64_t now, const Aperture__Sync__V1__Target *t, const int64_t *hashes,
		      uint64_t *samples)
{
	const char *texts[TREE_TEXT_NR];
	sqlite3_stmt *st = s->q[Q_TARGET_ADD];
	int64_t service, id;
	char service_name[256];
	uint32_t period = 0;
	char *labels;
	bool changed;
	int err;

	agg_target_texts(t, texts);
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
	sql_bind_text(st, 4, t->kernel_boot_id);
	sql_bind_text(st, 5, t->comm);
	sql_bind_text(st, 6, t->exe);
	sql_bind_text(st, 7, t->cgroup);
	sql_bind_text(st, 8, t->runtime);
	sql_bind_text(st, 9, labels);
	sqlite3_bind_int64(st, 10, service);
	sql_bind_text(st, 11, t->state);
	sqlite3_bind_int(st, 12, t->has_jvm);
	sqlite3_bind_int64(st, 13, period);
	sqlite3_bind_int64(st, 14, ord);
	sqlite3_bind_int64(st, 15, (int64_t)b->seq);
	sqlite3_bind_int64(st, 16, now);
	err = sql_step(st, NULL);
	free(labels);
	if (err)
		return err;
	st = s->q[Q_TARGET_ID];
	sqlite3_bind_int64(st, 1, node);
	sqlite3_bind_int(st, 2, t->pid);
	sqlite3_bind_int64(st, 3, (int64_t)t->start_time);
	sql_bind_text(st, 4, t->kernel_boot_id);
	err = sql_step(st, &id);
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
				for (int q = Q_SAMPLE_ADD; !err && q <= Q_SAMPLE_MIN_ADD; q++) {
					st = s->q[q];
					sqlite3_bind_int64(st, 1, id);
					sqlite3_bind_int(st, 2, type);
					sqlite3_bind_int64(st, 3, sec->sec);
					sqlite3_bind_int64(st, 4, hashes[sec->stacks[k]]);
					sqlite3_bind_int64(st, 5, (int64_t)sec->counts[k]);
					err = sql_step(st, NULL);
				}
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
		sql_bind_text(st, 5, ev->thread);
		sqlite3_bind_int(st, 6, ev->preempted);
		sqlite3_bind_int(st, 7, ev->state);
		sql_bind_text(st, 8, stack);
		err = sql_step(st, NULL);
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
	sql_bind_text(st, 5, b->boot_id);
	if (ns) {
		sqlite3_bind_int64(st, 6, (int64_t)ns->spool_bytes);
		sqlite3_bind_int64(st, 7, (int64_t)ns->batches_dropped);
		sqlite3_bind_int64(st, 8, ns->oldest_dropped_unix);
		sqlite3_bind_int64(st, 9, (int64_t)ns->batches_rejected);
		sql_bind_text(st, 10, ns->last_error);
		sqlite3_bind_int64(st, 11, ns->last_success_unix);
		sql_bind_text(st, 12, ns->version);
	} else {
		for (int i = 6; i <= 12; i++)
			sqlite3_bind_int(st, i, 0);
		sql_bind_text(st, 10, "");
		sql_bind_text(st, 12, "");
	}
	return sql_step(st, NULL);
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
	sql_bind_text(st, 2, b->boot_id);
	sqlite3_bind_int64(st, 3, (int64_t)b->seq);
	sqlite3_bind_int64(st, 4, now);
	err = sql_step(st, NULL);
	if (err)
		return err;
	if (sqlite3_changes(s->w) == 0) {
		r->duplicate = true;
		return 0;
	}
	st = s->q[Q_BOOT_ADD];
	sqlite3_bind_int64(st, 1, node);
	sql_bind_text(st, 2, b->boot_id);
	err = sql_step(st, NULL);
	if (!err) {
		st = s->q[Q_BOOT_ORD];
		sqlite3_bind_int64(st, 1, node);
		sql_bind_text(st, 2, b->boot_id);
		err = sql_step(st, &ord);
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
		err = sql_step(st, NULL);
	}
	return err;
}

/* One batch of a group, under its savepoint: applied whole, or rolled back to nothing. */
static void apply_one(struct sqlite_store *s, struct agg_job *j)
{
	*j->r = (struct agg_apply_result){0};
	j->err = sql_step(s->q[Q_SAVEPOINT], NULL);
	if (j->err)
		return;
	j->err = apply_locked(s, j->b, j->now, j->r);
	if (j->err || j->r->duplicate) {
		sql_step(s->q[Q_ROLLBACK_TO], NULL);
		/* Frames rolled back may be cached with ids that are gone. */
		if (j->err)
			sqlite_frame_cache_clear(s);
	}
	sql_step(s->q[Q_RELEASE], NULL);
	if (!j->err && j->r->duplicate) {
		sql_bind_text(s->q[Q_DUPLICATE], 1, j->b->node);
		sql_step(s->q[Q_DUPLICATE], NULL);
	}
}

void sqlite_apply_group(void *ctx, struct agg_job *group)
{
	struct sqlite_store *s = ctx;
	int err;

	pthread_mutex_lock(&s->wlock);
	err = sql_step(s->q[Q_BEGIN], NULL);
	for (struct agg_job *j = group; !err && j; j = j->next)
		apply_one(s, j);
	if (!err)
		err = sql_step(s->q[Q_COMMIT], NULL);
	if (err) {
		sql_step(s->q[Q_ROLLBACK], NULL);
		sqlite_frame_cache_clear(s);
		for (struct agg_job *j = group; j; j = j->next)
			j->err = err;
	}
	pthread_mutex_unlock(&s->wlock);
}

int sqlite_apply(struct agg_store *as, const WireBatch *b, int64_t now,
		 struct agg_apply_result *r)
{
	return agg_group_apply(&sqlite_of(as)->group, b, now, r);
}
