/* The ClickHouse store: clickhouse://HOST:PORT/DB[?max_rows_to_read=N&max_execution_time=S
 * &max_stacks=N&timeout=S]. Several aggregators may share one database.
 *
 * Exactly once without transactions. Every batch's apply is an attempt with a random id that
 * each of its sample and blocking rows carries; the attempt's row in `batches` is written
 * LAST, once every other insert succeeded, and marks it complete. Readers count only the rows
 * of each batch's winning attempt: the complete one with the earliest mark. So an attempt cut
 * short (ClickHouse down, a crash, a timeout after the server did insert) is never counted,
 * the node's retry is a new attempt, and two aggregators given the same batch at once both
 * complete it but one attempt wins for every reader (the other answers duplicate). A batch
 * already marked complete is answered duplicate before anything is written.
 *
 * Latest-state rows (targets, texts, syscall and lock statistics) carry ver = (boot order,
 * seq), the order the SQLite store keeps them by; readers take the highest. Stacks are keyed
 * by a stable 64-bit hash of their frames' names and infos, written once a day by each
 * aggregator (a ReplacingMergeTree collapses the copies), into the partition of the latest
 * second that uses them, so a stack outlives every sample that names it.
 *
 * Retention drops whole day partitions; reads never look before the retention's start. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <uthash.h>
#include "aggregate/batch_names.h"
#include "aggregate/group_commit.h"
#include "aggregate/store_clickhouse_http.h"
#include "aggregate/store_clickhouse_rollup.h"

#define SCHEMA_VERSION 3     /* 2: the rollups, bucket_marks and its view; 3: stacks.at_lines */
#define GROUP_MAX 64
#define SYS_SET_MARK 255      /* a sys row that only says "a set was sent" (it may be empty) */
#define DAY 86400
#define CACHE_MAX (1u << 20)

/* Every table, created IF NOT EXISTS by each aggregator at start. Times are numeric unix
 * seconds (UInt32): 18.16 stores an unparseable DateTime as junk and answers 200. */
static const struct ch_table {
	const char *name, *columns, *engine;
} tables[] = {
	{ "schema_version", "version UInt32, applied UInt32", "TinyLog" },
	{ "batches", "node String, boot_id String, seq UInt64, attempt UInt64, marked UInt64,"
	  " received UInt32, bord UInt32, created Int64, min_sec UInt32, max_sec UInt32,"
	  " samples UInt64, spool_bytes UInt64, batches_dropped UInt64, oldest_dropped Int64,"
	  " batches_rejected UInt64, last_error String, last_success Int64, version String",
	  "MergeTree PARTITION BY intDiv(max_sec, 86400) ORDER BY (node, boot_id, seq)" },
	{ "boots", "node String, boot_id String, first UInt64",
	  "MergeTree ORDER BY (node, boot_id)" },
	{ "duplicates", "node String, at UInt32",
	  "MergeTree PARTITION BY intDiv(at, 86400) ORDER BY node" },
	/* lines: where each frame's function is defined; at_lines: the line running in each
	 * frame, empty when none is known. */
	{ "stacks", "seen UInt32, hash UInt64, names Array(String), files Array(String),"
	  " lines Array(UInt32), modules Array(String), build_ids Array(String),"
	  " at_lines Array(UInt32)",
	  "ReplacingMergeTree PARTITION BY intDiv(seen, 86400) ORDER BY hash" },
	{ "samples", "sec UInt32, service String, type UInt8, node String, target UInt64,"
	  " stack UInt64, count UInt64, attempt UInt64",
	  "MergeTree PARTITION BY intDiv(sec, 86400) ORDER BY (service, type, sec, node, target,"
	  " stack)" },
	{ "targets", "node String, pid Int32, start_time UInt64, kernel_boot_id String,"
	  " target UInt64, service String, comm String, exe String, cgroup String,"
	  " runtime String, labels String, state String, has_jvm UInt8, period_ns UInt32,"
	  " ver UInt64, last_seen UInt32",
	  "ReplacingMergeTree(ver) PARTITION BY intDiv(last_seen, 86400) ORDER BY (node, pid,"
	  " target)" },
	{ "texts", "node String, target UInt64, kind UInt8, ver UInt64, seen UInt32,"
	  " body String",
	  "MergeTree PARTITION BY intDiv(seen, 86400) ORDER BY (node, target, kind, ver)" },
	{ "sys_rows", "node String, target UInt64, ver UInt64, attempt UInt64, seen UInt32,"
	  " kind UInt8, a UInt32, b UInt32, addr UInt64, holder String, stack String,"
	  " count UInt64, total_ns UInt64, max_ns UInt64, hist Array(UInt64)",
	  "MergeTree PARTITION BY intDiv(seen, 86400) ORDER BY (node, target, ver)" },
	{ "blocking", "node String, target UInt64, sec UInt32, time_ns Int64, dur_us UInt64,"
	  " tid Int32, thread String, preempted UInt8, state UInt32, stack String,"
	  " attempt UInt64",
	  "MergeTree PARTITION BY intDiv(sec, 86400) ORDER BY (node, target, time_ns)" },
	/* Every mark once per minute and hour it touches (filled by bucket_marks_mv). */
	{ "bucket_marks", "res UInt32, bucket UInt32, node String, boot_id String, seq UInt64,"
	  " attempt UInt64, marked UInt64",
	  "MergeTree PARTITION BY intDiv(bucket, 86400) ORDER BY (res, bucket, node)" },
	{ "samples_1m", "bucket UInt32, service String, type UInt8, stack UInt64, count UInt64,"
	  " roll UInt64",
	  "MergeTree PARTITION BY intDiv(bucket, 86400) ORDER BY (service, type, bucket, stack)" },
	{ "samples_1h", "bucket UInt32, service String, type UInt8, stack UInt64, count UInt64,"
	  " roll UInt64",
	  "MergeTree PARTITION BY intDiv(bucket, 86400) ORDER BY (service, type, bucket, stack)" },
	{ "rolls", "res UInt32, bucket UInt32, roll UInt64, marks UInt64, rolled UInt32",
	  "MergeTree PARTITION BY intDiv(bucket, 86400) ORDER BY (res, bucket)" },
};
#define NTABLES (sizeof(tables) / sizeof(tables[0]))

/* The winning attempt of each batch: complete, and marked first. */
#define WINNERS "SELECT argMin(attempt, (marked, attempt)) FROM batches"

/* Caches keyed by a 64-bit hash: a stack written today, a text as last written. */
struct seen {
	UT_hash_handle hh;
	uint64_t key, value;
	uint32_t day;
};

struct boot_ord {
	UT_hash_handle hh;
	uint32_t ord;
	char key[]; /* node '\0' boot_id */
};

struct scope_name {
	UT_hash_handle hh, hh_name;
	uint32_t id;
	char name[];
};

struct ch_store {
	struct agg_store base;
	struct ch_server srv, read_srv;
	struct agg_group group;
	uint64_t max_rows, max_stacks;
	unsigned max_time_s;
	unsigned roll_every_s;      /* 0: no rollups written or read */
	struct ch_rollup *rollup;
	_Atomic int64_t keep_from;  /* retention's start: nothing before it is read */
	pthread_mutex_t lock;       /* the caches */
	struct seen *stacks, *texts;
	size_t nstacks, ntexts;
	struct boot_ord *boots;
	struct scope_name *scopes[2], *by_name[2];  /* by id, by name */
	uint32_t nscopes[2];
};

static struct ch_store *of(struct agg_store *s)
{
	return (struct ch_store *)s;
}

static void seen_clear(struct seen **h, size_t *n)
{
	struct seen *e, *tmp;

	HASH_ITER(hh, *h, e, tmp) {
		HASH_DEL(*h, e);
		free(e);
	}
	*n = 0;
}

static struct seen *seen_find(struct seen *h, uint64_t key)
{
	struct seen *e;

	HASH_FIND(hh, h, &key, sizeof(key), e);
	return e;
}

/* Remembers key; a full cache starts over (it only saves rewrites). */
static void seen_put(struct seen **h, size_t *n, uint64_t key, uint64_t value, uint32_t day)
{
	struct seen *e = seen_find(*h, key);

	if (!e) {
		if (*n >= CACHE_MAX)
			seen_clear(h, n);
		e = calloc(1, sizeof(*e));
		if (!e)
			return;
		e->key = key;
		HASH_ADD(hh, *h, key, sizeof(e->key), e);
		(*n)++;
	}
	e->value = value;
	e->day = day;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- reading answers ---- */

/* A SELECT's answer (JSONCompact): its rows, and whether a limit cut it short. */
struct ch_rows {
	cJSON *root, *data;
	int n;
	bool cut;         /* rows read or time reached their limit */
	uint64_t rows_read;
};

static void rows_free(struct ch_rows *r)
{
	cJSON_Delete(r->root);
	*r = (struct ch_rows){0};
}

static uint64_t jnum(const cJSON *row, int col)
{
	const cJSON *v = cJSON_GetArrayItem(row, col);

	if (cJSON_IsString(v))
		return strtoull(v->valuestring, NULL, 10);
	return cJSON_IsNumber(v) ? (uint64_t)v->valuedouble : 0;
}

static const char *jstr(const cJSON *row, int col)
{
	const cJSON *v = cJSON_GetArrayItem(row, col);

	return cJSON_IsString(v) ? v->valuestring : "";
}

static void log_error(const char *what, const char *why)
{
	fprintf(stderr, "aperture: clickhouse store: %s: %s\n", what, why);
}

/* Runs a SELECT (sql without FORMAT) under the read limits, on srv (its timeout: the
 * reads' or the applies'); -EIO with a clear log line. */
static int ch_select_on(struct ch_store *s, const struct ch_server *srv, struct chbuf *sql,
			struct ch_rows *r)
{
	struct chbuf out = {0};
	char settings[256], why[512];
	const cJSON *stats;
	int err;

	*r = (struct ch_rows){0};
	if (sql->err)
		return sql->err;
	chb_printf(sql, " FORMAT JSONCompact");
	snprintf(settings, sizeof(settings), "&max_rows_to_read=%" PRIu64
		 "&read_overflow_mode=break&max_execution_time=%u&timeout_overflow_mode=break"
		 "&max_query_size=16777216", s->max_rows, s->max_time_s);
	err = ch_run(srv, sql->data, settings, NULL, &out, why, sizeof(why));
	if (err) {
		log_error("read", why);
		return err == -ENOMEM ? err : -EIO;
	}
	r->root = cJSON_ParseWithLength(out.data, out.len);
	chb_free(&out);
	r->data = cJSON_GetObjectItem(r->root, "data");
	if (!cJSON_IsArray(r->data)) {
		log_error("read", "an answer that is not JSONCompact");
		rows_free(r);
		return -EIO;
	}
	r->n = cJSON_GetArraySize(r->data);
	stats = cJSON_GetObjectItem(r->root, "statistics");
	r->rows_read = (uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(stats, "rows_read"));
	r->cut = r->rows_read >= s->max_rows ||
		 cJSON_GetNumberValue(cJSON_GetObjectItem(stats, "elapsed")) >= s->max_time_s;
	return 0;
}

static int ch_select(struct ch_store *s, struct chbuf *sql, struct ch_rows *r)
{
	return ch_select_on(s, &s->read_srv, sql, r);
}

/* A statement without an answer (DDL, ALTER), under the write timeout. */
static int ch_exec(struct ch_store *s, const char *sql, char *why, size_t why_size)
{
	int err = ch_run(&s->srv, sql, NULL, NULL, NULL, why, why_size);

	return err == -ENOMEM ? err : err ? -EIO : 0;
}

static int ch_insert(struct ch_store *s, const char *table, const char *columns,
		     const struct chbuf *rows)
{
	char sql[512], why[512];
	int err;

	if (rows->err)
		return rows->err;
	if (!rows->len)
		return 0;
	snprintf(sql, sizeof(sql), "INSERT INTO %s (%s) FORMAT RowBinary", table, columns);
	err = ch_run(&s->srv, sql, NULL, rows, NULL, why, sizeof(why));
	if (err) {
		log_error(table, why);
		return err == -ENOMEM ? err : -EIO;
	}
	return 0;
}

/* ---- writing a group of batches ---- */

static uint64_t target_key(const char *node, const Aperture__Sync__V1__Target *t)
{
	uint64_t h = agg_fnv1a(AGG_FNV_BASIS, node, strlen(node) + 1);
	int32_t pid = t->pid;
	uint64_t start = t->start_time;

	h = agg_fnv1a(h, &pid, sizeof(pid));
	h = agg_fnv1a(h, &start, sizeof(start));
	return agg_fnv1a(h, t->kernel_boot_id, strlen(t->kernel_boot_id) + 1);
}

static const char *str_at(const WireBatch *b, uint32_t i)
{
	return b->strings[i];
}

static uint64_t stack_hash(const WireBatch *b, const Aperture__Sync__V1__Stack *st)
{
	uint64_t h = AGG_FNV_BASIS;

	for (size_t j = 0; j < st->n_frames; j++) {
		const Aperture__Sync__V1__Frame *f = b->frames[st->frames[j]];
		const char *parts[] = { str_at(b, f->name), str_at(b, f->file),
					str_at(b, f->module), str_at(b, f->build_id) };

		for (size_t k = 0; k < 4; k++)
			h = agg_fnv1a(h, parts[k], strlen(parts[k]) + 1);
		h = agg_fnv1a(h, &f->line, sizeof(f->line));
	}
	return h;
}

static struct boot_ord *boot_find(struct ch_store *s, const char *node, const char *boot_id)
{
	size_t nlen = strlen(node), blen = strlen(boot_id);
	char key[nlen + blen + 2];
	struct boot_ord *e;

	memcpy(key, node, nlen + 1);
	memcpy(key + nlen + 1, boot_id, blen + 1);
	HASH_FIND(hh, s->boots, key, nlen + blen + 1, e);
	return e;
}

static void boot_put(struct ch_store *s, const char *node, const char *boot_id, uint32_t ord)
{
	size_t nlen = strlen(node), blen = strlen(boot_id);
	struct boot_ord *e = boot_find(s, node, boot_id);

	if (e) {
		e->ord = ord;
		return;
	}
	e = malloc(sizeof(*e) + nlen + blen + 2);
	if (!e)
		return;
	e->ord = ord;
	memcpy(e->key, node, nlen + 1);
	memcpy(e->key + nlen + 1, boot_id, blen + 1);
	HASH_ADD(hh, s->boots, key, nlen + blen + 1, e);
}

/* A batch's place in its node's order is its boot's rank by first arrival, then its seq.
 * Boots this aggregator has not seen are written, then every boot of their nodes ranked,
 * so aggregators that raced agree once both rows are in. One insert and one select for the
 * group's new boots. */
static int rank_boots(struct ch_store *s, struct agg_job *group)
{
	struct chbuf rows = {0}, sql = {0};
	struct ch_rows r;
	const char *node = NULL;
	uint32_t ord = 0;
	size_t n = 0;
	int err;

	chb_printf(&sql, "SELECT node, boot_id FROM boots WHERE node IN (");
	pthread_mutex_lock(&s->lock);
	for (struct agg_job *j = group; j; j = j->next)
		if (!j->r->duplicate && !boot_find(s, j->b->node, j->b->boot_id)) {
			chb_str(&rows, j->b->node);
			chb_str(&rows, j->b->boot_id);
			chb_u64(&rows, now_ns());
			chb_printf(&sql, n++ ? ", " : "");
			chb_quote(&sql, j->b->node);
		}
	pthread_mutex_unlock(&s->lock);
	chb_printf(&sql, ") GROUP BY node, boot_id ORDER BY node, min(first), boot_id");
	err = n ? ch_insert(s, "boots", "node, boot_id, first", &rows) : 0;
	if (!err && n)
		err = ch_select_on(s, &s->srv, &sql, &r);
	chb_free(&rows);
	chb_free(&sql);
	if (err || !n)
		return err;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < r.n; i++) {
		const cJSON *row = cJSON_GetArrayItem(r.data, i);

		ord = node && !strcmp(node, jstr(row, 0)) ? ord + 1 : 1;
		node = jstr(row, 0);
		boot_put(s, node, jstr(row, 1), ord);
	}
	pthread_mutex_unlock(&s->lock);
	rows_free(&r);
	return 0;
}

static int boot_ord(struct ch_store *s, const WireBatch *b, uint32_t *ord)
{
	struct boot_ord *e;

	pthread_mutex_lock(&s->lock);
	e = boot_find(s, b->node, b->boot_id);
	*ord = e ? e->ord : 0;
	pthread_mutex_unlock(&s->lock);
	return e ? 0 : -EIO;
}

/* The rows of one group, one body per table. */
struct group_rows {
	struct chbuf stacks, targets, texts, sys, samples, blocking, batches;
	struct seen *new_stacks, *new_texts;   /* cache entries to add once written */
	size_t n_new_stacks, n_new_texts;
};

/* A batch's sample rows, its stacks not yet written today, and its span of seconds. */
static int put_batch(struct ch_store *s, struct group_rows *g, const WireBatch *b, int64_t now,
		     uint64_t attempt, uint64_t ver, uint32_t *min_sec, uint32_t *max_sec,
		     uint64_t *samples)
{
	uint64_t *hashes = calloc(b->n_stacks ? b->n_stacks : 1, sizeof(*hashes));
	uint32_t seen, day;

	if (!hashes)
		return -ENOMEM;
	*min_sec = UINT32_MAX;
	*max_sec = 0;
	for (size_t i = 0; i < b->n_targets; i++)
		for (size_t p = 0; p < b->targets[i]->n_profiles; p++)
			for (size_t k = 0; k < b->targets[i]->profiles[p]->n_seconds; k++) {
				uint32_t sec = b->targets[i]->profiles[p]->seconds[k]->sec;

				*min_sec = sec < *min_sec ? sec : *min_sec;
				*max_sec = sec > *max_sec ? sec : *max_sec;
			}
	if (*min_sec > *max_sec)
		*min_sec = *max_sec = now;
	seen = *max_sec > now ? *max_sec : now;
	day = seen / DAY;
	for (size_t i = 0; i < b->n_stacks; i++) {
		const Aperture__Sync__V1__Stack *st = b->stacks[i];
		struct seen *e;

		hashes[i] = agg_lines_hash(stack_hash(b, st), st);
		pthread_mutex_lock(&s->lock);
		e = seen_find(s->stacks, hashes[i]);
		e = e && e->day == day ? e : NULL;
		pthread_mutex_unlock(&s->lock);
		if (e || seen_find(g->new_stacks, hashes[i]))
			continue;
		seen_put(&g->new_stacks, &g->n_new_stacks, hashes[i], 0, day);
		chb_u32(&g->stacks, seen);
		chb_u64(&g->stacks, hashes[i]);
		chb_varint(&g->stacks, st->n_frames);
		for (size_t j = 0; j < st->n_frames; j++)
			chb_str(&g->stacks, str_at(b, b->frames[st->frames[j]]->name));
		chb_varint(&g->stacks, st->n_frames);
		for (size_t j = 0; j < st->n_frames; j++)
			chb_str(&g->stacks, str_at(b, b->frames[st->frames[j]]->file));
		chb_varint(&g->stacks, st->n_frames);
		for (size_t j = 0; j < st->n_frames; j++)
			chb_u32(&g->stacks, b->frames[st->frames[j]]->line);
		chb_varint(&g->stacks, st->n_frames);
		for (size_t j = 0; j < st->n_frames; j++)
			chb_str(&g->stacks, str_at(b, b->frames[st->frames[j]]->module));
		chb_varint(&g->stacks, st->n_frames);
		for (size_t j = 0; j < st->n_frames; j++)
			chb_str(&g->stacks, str_at(b, b->frames[st->frames[j]]->build_id));
		chb_varint(&g->stacks, agg_has_lines(st) ? st->n_lines : 0);
		for (size_t j = 0; agg_has_lines(st) && j < st->n_lines; j++)
			chb_u32(&g->stacks, st->lines[j]);
	}
	*samples = 0;
	for (size_t i = 0; i < b->n_targets; i++) {
		const Aperture__Sync__V1__Target *t = b->targets[i];
		const char *texts[TREE_TEXT_NR];
		uint64_t key = target_key(b->node, t);
		char service[256], *labels = agg_labels_text(t);
		uint32_t period = 0;

		if (!labels) {
			free(hashes);
			return -ENOMEM;
		}
		agg_target_texts(t, texts);
		agg_service_of(t, service, sizeof(service));
		for (size_t p = 0; p < t->n_profiles; p++)
			if (!strcmp(t->profiles[p]->type, "cpu"))
				period = t->profiles[p]->period_ns;
		chb_str(&g->targets, b->node);
		chb_u32(&g->targets, t->pid);
		chb_u64(&g->targets, t->start_time);
		chb_str(&g->targets, t->kernel_boot_id);
		chb_u64(&g->targets, key);
		chb_str(&g->targets, service);
		chb_str(&g->targets, t->comm);
		chb_str(&g->targets, t->exe);
		chb_str(&g->targets, t->cgroup);
		chb_str(&g->targets, t->runtime);
		chb_str(&g->targets, labels);
		chb_str(&g->targets, t->state);
		chb_u8(&g->targets, t->has_jvm);
		chb_u32(&g->targets, period);
		chb_u64(&g->targets, ver);
		chb_u32(&g->targets, now);
		free(labels);
		/* Texts: a history of changes (empty means unchanged); one copy a day at least,
		 * so dropping old days never takes the current one. */
		for (int k = 0; k < TREE_TEXT_NR; k++) {
			uint64_t tkey = agg_fnv1a(key, &k, sizeof(k)), body;
			struct seen *e;

			if (!texts[k] || !texts[k][0])
				continue;
			body = agg_fnv1a(AGG_FNV_BASIS, texts[k], strlen(texts[k]));
			pthread_mutex_lock(&s->lock);
			e = seen_find(s->texts, tkey);
			e = e && e->value == body && e->day == now / DAY ? e : NULL;
			pthread_mutex_unlock(&s->lock);
			if (e)
				continue;
			seen_put(&g->new_texts, &g->n_new_texts, tkey, body, now / DAY);
			chb_str(&g->texts, b->node);
			chb_u64(&g->texts, key);
			chb_u8(&g->texts, k);
			chb_u64(&g->texts, ver);
			chb_u32(&g->texts, now);
			chb_str(&g->texts, texts[k]);
		}
		/* Syscall and lock statistics: a whole set, opened by a mark row. */
		for (size_t r = 0; t->sys && r <= t->sys->n_rows; r++) {
			const Aperture__Sync__V1__SysRow *row = r ? t->sys->rows[r - 1] : NULL;

			chb_str(&g->sys, b->node);
			chb_u64(&g->sys, key);
			chb_u64(&g->sys, ver);
			chb_u64(&g->sys, attempt);
			chb_u32(&g->sys, now);
			chb_u8(&g->sys, row ? row->kind : SYS_SET_MARK);
			chb_u32(&g->sys, row ? row->a : 0);
			chb_u32(&g->sys, row ? row->b : 0);
			chb_u64(&g->sys, row ? row->addr : 0);
			chb_str(&g->sys, row && row->holder ? str_at(b, row->holder) : "");
			chb_str(&g->sys, row && row->stack ? str_at(b, row->stack) : "");
			chb_u64(&g->sys, row ? row->count : 0);
			chb_u64(&g->sys, row ? row->total_ns : 0);
			chb_u64(&g->sys, row ? row->max_ns : 0);
			chb_varint(&g->sys, LATENCY_HIST);
			for (size_t h = 0; h < LATENCY_HIST; h++)
				chb_u64(&g->sys, row && h < row->n_hist ? row->hist[h] : 0);
		}
		for (size_t p = 0; p < t->n_profiles; p++) {
			const Aperture__Sync__V1__Profile *pr = t->profiles[p];
			int type = tree_profile_by_name(pr->type);

			for (size_t k = 0; k < pr->n_seconds; k++) {
				const Aperture__Sync__V1__Second *sec = pr->seconds[k];

				for (size_t j = 0; j < sec->n_stacks; j++) {
					if (!sec->counts[j])
						continue;
					chb_u32(&g->samples, sec->sec);
					chb_str(&g->samples, service);
					chb_u8(&g->samples, type);
					chb_str(&g->samples, b->node);
					chb_u64(&g->samples, key);
					chb_u64(&g->samples, hashes[sec->stacks[j]]);
					chb_u64(&g->samples, sec->counts[j]);
					chb_u64(&g->samples, attempt);
					*samples += sec->counts[j];
				}
			}
		}
		for (size_t e = 0; e < t->n_blocking; e++) {
			const Aperture__Sync__V1__BlockingEvent *ev = t->blocking[e];
			char *stack = agg_stack_text(b, ev->stack);

			if (!stack) {
				free(hashes);
				return -ENOMEM;
			}
			chb_str(&g->blocking, b->node);
			chb_u64(&g->blocking, key);
			chb_u32(&g->blocking, ev->time_ns / 1000000000);
			chb_u64(&g->blocking, ev->time_ns);
			chb_u64(&g->blocking, ev->dur_us);
			chb_u32(&g->blocking, ev->tid);
			chb_str(&g->blocking, ev->thread);
			chb_u8(&g->blocking, ev->preempted);
			chb_u32(&g->blocking, ev->state);
			chb_str(&g->blocking, stack);
			chb_u64(&g->blocking, attempt);
			free(stack);
		}
	}
	free(hashes);
	return 0;
}

/* The batch's mark, written last: it completes the attempt. */
static void put_mark(struct group_rows *g, const WireBatch *b, int64_t now, uint64_t attempt,
		     uint32_t bord, uint32_t min_sec, uint32_t max_sec, uint64_t samples)
{
	const Aperture__Sync__V1__NodeStatus *ns = b->node_status;

	chb_str(&g->batches, b->node);
	chb_str(&g->batches, b->boot_id);
	chb_u64(&g->batches, b->seq);
	chb_u64(&g->batches, attempt);
	chb_u64(&g->batches, now_ns());
	chb_u32(&g->batches, now);
	chb_u32(&g->batches, bord);
	chb_u64(&g->batches, b->created_unix);
	chb_u32(&g->batches, min_sec);
	chb_u32(&g->batches, max_sec);
	chb_u64(&g->batches, samples);
	chb_u64(&g->batches, ns ? ns->spool_bytes : 0);
	chb_u64(&g->batches, ns ? ns->batches_dropped : 0);
	chb_u64(&g->batches, ns ? ns->oldest_dropped_unix : 0);
	chb_u64(&g->batches, ns ? ns->batches_rejected : 0);
	chb_str(&g->batches, ns ? ns->last_error : "");
	chb_u64(&g->batches, ns ? ns->last_success_unix : 0);
	chb_str(&g->batches, ns ? ns->version : "");
}

/* The (node, boot_id, seq) IN list of a group's batches. */
static void batch_ids(struct chbuf *sql, struct agg_job *group)
{
	chb_printf(sql, "(node, boot_id, seq) IN (");
	for (struct agg_job *j = group; j; j = j->next) {
		chb_printf(sql, "%s(", j == group ? "" : ", ");
		chb_quote(sql, j->b->node);
		chb_printf(sql, ", ");
		chb_quote(sql, j->b->boot_id);
		chb_printf(sql, ", %" PRIu64 ")", j->b->seq);
	}
	chb_printf(sql, ")");
}

static struct agg_job *job_of(struct agg_job *group, const cJSON *row)
{
	for (struct agg_job *j = group; j; j = j->next)
		if (!strcmp(j->b->node, jstr(row, 0)) && !strcmp(j->b->boot_id, jstr(row, 1)) &&
		    j->b->seq == jnum(row, 2))
			return j;
	return NULL;
}

/* Batches of the group already complete answer duplicate; a copy twice in one group too. */
static int mark_duplicates(struct ch_store *s, struct agg_job *group)
{
	struct chbuf sql = {0};
	struct ch_rows r;
	int err;

	for (struct agg_job *j = group; j; j = j->next)
		for (struct agg_job *k = group; k != j; k = k->next)
			if (!k->r->duplicate && !strcmp(j->b->node, k->b->node) &&
			    !strcmp(j->b->boot_id, k->b->boot_id) && j->b->seq == k->b->seq)
				j->r->duplicate = true;
	chb_printf(&sql, "SELECT DISTINCT node, boot_id, seq FROM batches WHERE ");
	batch_ids(&sql, group);
	err = ch_select_on(s, &s->srv, &sql, &r);
	chb_free(&sql);
	if (err)
		return err;
	for (int i = 0; i < r.n; i++) {
		struct agg_job *j = job_of(group, cJSON_GetArrayItem(r.data, i));

		if (j)
			j->r->duplicate = true;
	}
	rows_free(&r);
	return 0;
}

/* After the marks: an attempt another aggregator's beat answers duplicate too. */
static int check_winners(struct ch_store *s, struct agg_job *group, const uint64_t *attempts)
{
	struct chbuf sql = {0};
	struct ch_rows r;
	int err;

	chb_printf(&sql, "SELECT node, boot_id, seq, argMin(attempt, (marked, attempt))"
		   " FROM batches WHERE ");
	batch_ids(&sql, group);
	chb_printf(&sql, " GROUP BY node, boot_id, seq");
	err = ch_select_on(s, &s->srv, &sql, &r);
	chb_free(&sql);
	if (err)
		return err;
	for (int i = 0; i < r.n; i++) {
		const cJSON *row = cJSON_GetArrayItem(r.data, i);
		size_t n = 0;

		for (struct agg_job *j = group; j; j = j->next, n++)
			if (!j->r->duplicate && job_of(j, row) == j && attempts[n] != jnum(row, 3))
				j->r->duplicate = true;
	}
	rows_free(&r);
	return 0;
}

static void merge_cache(struct seen **into, size_t *n, struct seen **from)
{
	struct seen *e, *tmp;

	HASH_ITER(hh, *from, e, tmp) {
		HASH_DEL(*from, e);
		seen_put(into, n, e->key, e->value, e->day);
		free(e);
	}
}

/* The group's rows but the marks, one INSERT per table, sent together. */
static int insert_all(struct ch_store *s, struct group_rows *g)
{
	const struct { const char *table, *columns; const struct chbuf *rows; } ins[] = {
		{ "stacks", "seen, hash, names, files, lines, modules, build_ids, at_lines",
		  &g->stacks },
		{ "targets", "node, pid, start_time, kernel_boot_id, target, service, comm, exe,"
		  " cgroup, runtime, labels, state, has_jvm, period_ns, ver, last_seen",
		  &g->targets },
		{ "texts", "node, target, kind, ver, seen, body", &g->texts },
		{ "sys_rows", "node, target, ver, attempt, seen, kind, a, b, addr, holder, stack,"
		  " count, total_ns, max_ns, hist", &g->sys },
		{ "samples", "sec, service, type, node, target, stack, count, attempt",
		  &g->samples },
		{ "blocking", "node, target, sec, time_ns, dur_us, tid, thread, preempted, state,"
		  " stack, attempt", &g->blocking },
	};
	const size_t max = sizeof(ins) / sizeof(ins[0]);
	char sql[max][512], why[512];
	const char *sqls[max];
	const struct chbuf *bodies[max];
	size_t n = 0;
	int err;

	for (size_t i = 0; i < max; i++) {
		if (ins[i].rows->err)
			return ins[i].rows->err;
		if (!ins[i].rows->len)
			continue;
		snprintf(sql[n], sizeof(sql[n]), "INSERT INTO %s (%s) FORMAT RowBinary",
			 ins[i].table, ins[i].columns);
		sqls[n] = sql[n];
		bodies[n++] = ins[i].rows;
	}
	err = ch_run_all(&s->srv, n, sqls, bodies, why, sizeof(why));
	if (err)
		log_error("insert", why);
	return err == -ENOMEM ? err : err ? -EIO : 0;
}

static void ch_apply_group(void *ctx, struct agg_job *group)
{
	struct ch_store *s = ctx;
	struct group_rows g = {0};
	struct chbuf dup = {0};
	uint64_t *attempts;
	uint32_t (*spans)[2];
	size_t n = 0, i;
	int err;

	for (struct agg_job *j = group; j; j = j->next, n++)
		*j->r = (struct agg_apply_result){0};
	attempts = calloc(n, sizeof(*attempts));
	spans = calloc(n, sizeof(*spans));
	err = attempts && spans ? mark_duplicates(s, group) : -ENOMEM;
	if (!err)
		err = rank_boots(s, group);
	i = 0;
	for (struct agg_job *j = group; !err && j; j = j->next, i++) {
		uint32_t bord = 0, min_sec = 0, max_sec = 0;

		if (j->r->duplicate)
			continue;
		if (getrandom(&attempts[i], sizeof(attempts[i]), 0) != sizeof(attempts[i]))
			err = -EIO;
		if (!err)
			err = boot_ord(s, j->b, &bord);
		if (!err)
			err = put_batch(s, &g, j->b, j->now, attempts[i],
					(uint64_t)bord << 32 | (uint32_t)j->b->seq, &min_sec,
					&max_sec, &j->r->samples);
		if (!err)
			put_mark(&g, j->b, j->now, attempts[i], bord, min_sec, max_sec,
				 j->r->samples);
		spans[i][0] = min_sec;
		spans[i][1] = max_sec;
	}
	/* Everything a batch's readers need, at once, then its mark. */
	if (!err)
		err = insert_all(s, &g);
	if (!err)
		err = ch_insert(s, "batches", "node, boot_id, seq, attempt, marked, received, bord,"
				" created, min_sec, max_sec, samples, spool_bytes, batches_dropped,"
				" oldest_dropped, batches_rejected, last_error, last_success,"
				" version", &g.batches);
	if (!err && g.batches.len)
		err = check_winners(s, group, attempts);
	/* Every mark written, won or lost, changes its buckets: roll them again. */
	for (i = 0; !err && s->rollup && i < n; i++)
		if (attempts[i])
			ch_rollup_touch(s->rollup, spans[i][0], spans[i][1]);
	for (struct agg_job *j = group; !err && j; j = j->next)
		if (j->r->duplicate) {
			j->r->samples = 0;
			chb_str(&dup, j->b->node);
			chb_u32(&dup, j->now);
		}
	if (!err)
		err = ch_insert(s, "duplicates", "node, at", &dup);
	pthread_mutex_lock(&s->lock);
	if (!err) {
		merge_cache(&s->stacks, &s->nstacks, &g.new_stacks);
		merge_cache(&s->texts, &s->ntexts, &g.new_texts);
	}
	pthread_mutex_unlock(&s->lock);
	seen_clear(&g.new_stacks, &g.n_new_stacks);
	seen_clear(&g.new_texts, &g.n_new_texts);
	for (struct agg_job *j = group; j; j = j->next)
		j->err = err;
	chb_free(&g.stacks);
	chb_free(&g.targets);
	chb_free(&g.texts);
	chb_free(&g.sys);
	chb_free(&g.samples);
	chb_free(&g.blocking);
	chb_free(&g.batches);
	chb_free(&dup);
	free(attempts);
	free(spans);
}

static int ch_apply(struct agg_store *as, const WireBatch *b, int64_t now,
		    struct agg_apply_result *r)
{
	return agg_group_apply(&of(as)->group, b, now, r);
}

/* ---- reading ---- */

/* A node's or service's id, this process's own: numbered in the order first listed, so the
 * tree's inode numbers stay small and never collide (they hold 20 bits of scope). */
static uint32_t scope_id_locked(struct ch_store *s, enum agg_scope_kind kind, const char *name)
{
	struct scope_name *e;
	size_t len = strlen(name);

	HASH_FIND(hh_name, s->by_name[kind], name, len, e);
	if (e)
		return e->id;
	e = calloc(1, sizeof(*e) + len + 1);
	if (!e)
		return 0;
	e->id = (uint32_t)++s->nscopes[kind] << 1 | kind;
	memcpy(e->name, name, len + 1);
	HASH_ADD(hh, s->scopes[kind], id, sizeof(e->id), e);
	HASH_ADD_KEYPTR(hh_name, s->by_name[kind], e->name, len, e);
	return e->id;
}

static const char *const scope_sql[] = {
	[AGG_SCOPE_NODE] = "SELECT DISTINCT node AS n FROM batches ORDER BY n",
	[AGG_SCOPE_SERVICE] = "SELECT DISTINCT service AS n FROM targets ORDER BY n",
};

/* Reads the names of a kind, numbering new ones; add(ctx, ...) each if given. */
static int load_scopes(struct ch_store *s, enum agg_scope_kind kind,
		       int (*add)(void *ctx, uint32_t id, const char *name), void *ctx)
{
	struct chbuf sql = {0};
	struct ch_rows r;
	int err;

	chb_printf(&sql, "%s", scope_sql[kind]);
	err = ch_select(s, &sql, &r);
	chb_free(&sql);
	for (int i = 0; !err && i < r.n; i++) {
		const char *name = jstr(cJSON_GetArrayItem(r.data, i), 0);
		uint32_t id;

		pthread_mutex_lock(&s->lock);
		id = scope_id_locked(s, kind, name);
		pthread_mutex_unlock(&s->lock);
		if (!id)
			err = -ENOMEM;
		else if (add)
			err = add(ctx, id, name);
	}
	rows_free(&r);
	return err;
}

static int ch_list_scopes(struct agg_store *as, enum agg_scope_kind kind,
			  int (*add)(void *ctx, uint32_t id, const char *name), void *ctx)
{
	return load_scopes(of(as), kind, add, ctx);
}

static int ch_scope_name(struct agg_store *as, enum agg_scope_kind kind, uint32_t id,
			 char *name, size_t size)
{
	struct ch_store *s = of(as);
	struct scope_name *e;

	pthread_mutex_lock(&s->lock);
	HASH_FIND(hh, s->scopes[kind], &id, sizeof(id), e);
	if (e)
		snprintf(name, size, "%s", e->name);
	pthread_mutex_unlock(&s->lock);
	return e ? 0 : -ENOENT;
}

static int ch_scope_lookup(struct agg_store *as, enum agg_scope_kind kind, const char *name,
			   uint32_t *id)
{
	struct ch_store *s = of(as);
	struct scope_name *e;
	int err;

	pthread_mutex_lock(&s->lock);
	HASH_FIND(hh_name, s->by_name[kind], name, strlen(name), e);
	*id = e ? e->id : 0;
	pthread_mutex_unlock(&s->lock);
	if (e)
		return 0;
	err = load_scopes(s, kind, NULL, NULL);
	pthread_mutex_lock(&s->lock);
	HASH_FIND(hh_name, s->by_name[kind], name, strlen(name), e);
	*id = e ? e->id : 0;
	pthread_mutex_unlock(&s->lock);
	return err ? err : e ? 0 : -ENOENT;
}

static int ch_targets(struct agg_store *as, const char *node, pid_t **pids, size_t *n)
{
	struct chbuf sql = {0};
	struct ch_rows r;
	int err;

	chb_printf(&sql, "SELECT DISTINCT pid FROM targets WHERE node = ");
	chb_quote(&sql, node);
	chb_printf(&sql, " AND last_seen >= %" PRId64 " ORDER BY pid", of(as)->keep_from);
	err = ch_select(of(as), &sql, &r);
	chb_free(&sql);
	if (err)
		return err;
	*n = r.n;
	*pids = calloc(r.n ? r.n : 1, sizeof(**pids));
	for (int i = 0; *pids && i < r.n; i++)
		(*pids)[i] = jnum(cJSON_GetArrayItem(r.data, i), 0);
	rows_free(&r);
	return *pids ? 0 : -ENOMEM;
}

/* The newest incarnation of pid on node (the one seen last): its key and service too. */
static int newest_target(struct ch_store *s, const char *node, pid_t pid, struct agg_target *at,
			 uint64_t *key, char *service, size_t size)
{
	struct chbuf sql = {0};
	struct ch_rows r;
	const cJSON *row;
	int err;

	chb_printf(&sql, "SELECT target, argMax(comm, ver), argMax(state, ver),"
		   " argMax(has_jvm, ver), argMax(period_ns, ver), max(last_seen) AS ls,"
		   " any(start_time) AS st, argMax(service, ver) FROM targets WHERE node = ");
	chb_quote(&sql, node);
	chb_printf(&sql, " AND pid = %d AND last_seen >= %" PRId64 " GROUP BY target"
		   " ORDER BY ls DESC, st DESC LIMIT 1", pid, s->keep_from);
	err = ch_select(s, &sql, &r);
	chb_free(&sql);
	if (err)
		return err;
	if (!r.n) {
		rows_free(&r);
		return -ENOENT;
	}
	row = cJSON_GetArrayItem(r.data, 0);
	if (at) {
		*at = (struct agg_target){ .has_jvm = jnum(row, 3), .period_ns = jnum(row, 4),
					   .last_seen = jnum(row, 5) };
		snprintf(at->comm, sizeof(at->comm), "%s", jstr(row, 1));
		snprintf(at->state, sizeof(at->state), "%s", jstr(row, 2));
	}
	if (key)
		*key = jnum(row, 0);
	if (service)
		snprintf(service, size, "%s", jstr(row, 7));
	rows_free(&r);
	return 0;
}

static int ch_target(struct agg_store *as, const char *node, pid_t pid, struct agg_target *out)
{
	return newest_target(of(as), node, pid, out, NULL, NULL, 0);
}

/* A stack's sum, and the frames it was stored with. */
struct sum {
	UT_hash_handle hh;
	uint64_t hash, n;
	bool found;
};

/* Adds the frames of each summed stack to p; a stack missing is counted in *missing. */
static int add_stacks(struct ch_store *s, struct profile *p, struct sum *sums, uint64_t *missing)
{
	struct chbuf sql = {0};
	struct ch_rows r;
	struct sum *e, *tmp;
	uint32_t *ids = NULL; /* room for the frames, then their lines */
	size_t cap = 0;
	int err = 0;

	if (!sums)
		return 0;
	chb_printf(&sql, "SELECT hash, any(names), any(files), any(lines), any(modules),"
		   " any(build_ids), any(at_lines) FROM stacks WHERE hash IN (");
	HASH_ITER(hh, sums, e, tmp)
		chb_printf(&sql, "%s%" PRIu64, e == sums ? "" : ",", e->hash);
	chb_printf(&sql, ") GROUP BY hash");
	err = ch_select(s, &sql, &r);
	chb_free(&sql);
	if (err)
		return err;
	for (int i = 0; !err && i < r.n; i++) {
		const cJSON *row = cJSON_GetArrayItem(r.data, i);
		uint64_t hash = jnum(row, 0);
		const cJSON *names = cJSON_GetArrayItem(row, 1), *files = cJSON_GetArrayItem(row, 2),
			    *lines = cJSON_GetArrayItem(row, 3), *mods = cJSON_GetArrayItem(row, 4),
			    *bids = cJSON_GetArrayItem(row, 5), *at = cJSON_GetArrayItem(row, 6);
		int depth = cJSON_GetArraySize(names);
		bool has_lines = cJSON_GetArraySize(at) == depth;

		HASH_FIND(hh, sums, &hash, sizeof(hash), e);
		if (!e || e->found || !depth)
			continue;
		e->found = true;
		if (2 * (size_t)depth > cap) {
			uint32_t *bigger = realloc(ids, 2 * depth * sizeof(*ids));

			if (!bigger) {
				err = -ENOMEM;
				break;
			}
			ids = bigger;
			cap = 2 * depth;
		}
		for (int k = 0; !err && k < depth; k++) {
			struct frame_info info = {
				.file = jstr(files, k), .line = jnum(lines, k),
				.module = jstr(mods, k), .build_id = jstr(bids, k) };

			err = profile_frame_id_info(p, jstr(names, k), &info, &ids[k]);
			ids[depth + k] = has_lines ? jnum(at, k) : 0;
		}
		if (!err)
			err = profile_add_lines(p, 0, ids, ids + depth, depth, e->n);
	}
	HASH_ITER(hh, sums, e, tmp)
		if (!e->found)
			*missing += e->n;
	rows_free(&r);
	free(ids);
	return err;
}

/* One frame that says what a limit left out, so every view shows it. */
static int add_partial(struct profile *p, const char *why, uint64_t n)
{
	uint32_t id;
	int err = profile_frame_id(p, why, &id);

	return err ? err : profile_add(p, 0, &id, 1, n ? n : 1);
}

static int ch_profile(struct agg_store *as, const struct agg_query *q,
		      struct profile_snapshot **out)
{
	struct ch_store *s = of(as);
	int64_t from = q->from > s->keep_from ? q->from : s->keep_from;
	struct chbuf sql = {0}, where = {0}, node = {0};
	struct sum *sums = NULL, *e, *tmp;
	struct ch_rows r = {0};
	char service[256], why[160];
	uint64_t key = 0, kept = 0, total, missing = 0;
	struct profile *p;
	bool cut;
	int err = 0;

	if (q->node)
		err = newest_target(s, q->node, q->pid, NULL, &key, service, sizeof(service));
	if (err)
		return err;
	p = profile_new(tree_profiles[q->type].unit);
	if (!p)
		return -ENOMEM;
	/* Summed by stack in ClickHouse, the heaviest max_stacks kept; WITH TOTALS tells
	 * what the others weighed. A service's whole minutes and hours come from the rollups
	 * where they are fresh. */
	chb_printf(&where, "service = ");
	chb_quote(&where, q->node ? service : q->service);
	chb_printf(&where, " AND type = %d", q->type);
	if (q->node) {
		chb_quote(&node, q->node);
		chb_printf(&where, " AND node = %s AND target = %" PRIu64, node.data, key);
	}
	chb_printf(&sql, "SELECT stack, sum(count) AS n FROM (");
	err = where.err ? where.err : node.err;
	if (!err)
		err = ch_rollup_sources(q->node ? NULL : s->rollup, &s->read_srv, &sql, where.data,
					node.data, from, q->until);
	chb_printf(&sql, ") GROUP BY stack WITH TOTALS ORDER BY n DESC LIMIT %" PRIu64,
		   s->max_stacks);
	chb_free(&where);
	chb_free(&node);
	if (err) {
		chb_free(&sql);
		profile_unref(p);
		return err;
	}
	err = ch_select(s, &sql, &r);
	chb_free(&sql);
	for (int i = 0; !err && i < r.n; i++) {
		const cJSON *row = cJSON_GetArrayItem(r.data, i);

		e = calloc(1, sizeof(*e));
		if (!e) {
			err = -ENOMEM;
			break;
		}
		e->hash = jnum(row, 0);
		e->n = jnum(row, 1);
		kept += e->n;
		HASH_ADD(hh, sums, hash, sizeof(e->hash), e);
	}
	total = err ? 0 : jnum(cJSON_GetObjectItem(r.root, "totals"), 1);
	cut = r.cut;
	rows_free(&r);
	if (!err)
		err = add_stacks(s, p, sums, &missing);
	if (!err && total > kept) {
		snprintf(why, sizeof(why), "[partial: only the heaviest %" PRIu64 " stacks]",
			 s->max_stacks);
		err = add_partial(p, why, total - kept);
	}
	if (!err && cut) {
		snprintf(why, sizeof(why), "[partial: the query stopped at its limit of %" PRIu64
			 " rows or %u s]", s->max_rows, s->max_time_s);
		err = add_partial(p, why, 0);
	}
	if (!err && missing)
		err = add_partial(p, "[partial: stacks not found in the store]", missing);
	HASH_ITER(hh, sums, e, tmp) {
		HASH_DEL(sums, e);
		free(e);
	}
	if (!err)
		err = profile_snapshot(p, 0, out);
	if (!err)
		(*out)->since = from;
	profile_unref(p);
	return err;
}

/* " WHERE node = N AND target = K" for pid's newest incarnation. */
static int where_target(struct ch_store *s, struct chbuf *sql, const char *node, pid_t pid)
{
	uint64_t key;
	int err = newest_target(s, node, pid, NULL, &key, NULL, 0);

	if (err)
		return err;
	chb_printf(sql, " WHERE node = ");
	chb_quote(sql, node);
	chb_printf(sql, " AND target = %" PRIu64, key);
	return 0;
}

static int ch_sys(struct agg_store *as, const char *node, pid_t pid, struct sys_snapshot **out)
{
	struct ch_store *s = of(as);
	struct sys_table *t = sys_table_new();
	struct chbuf sql = {0}, where = {0};
	struct ch_rows r = {0};
	int err;

	if (!t)
		return -ENOMEM;
	err = where_target(s, &where, node, pid);
	/* The newest set: its ver, and of the attempts that wrote it, one. */
	chb_printf(&sql, "SELECT kind, a, b, addr, holder, stack, count, total_ns, max_ns, hist"
		   " FROM sys_rows%s AND kind != %d AND (ver, attempt) = (SELECT ver,"
		   " min(attempt) FROM sys_rows%s GROUP BY ver ORDER BY ver DESC LIMIT 1)",
		   where.data ? where.data : "", SYS_SET_MARK, where.data ? where.data : "");
	if (!err)
		err = ch_select(s, &sql, &r);
	for (int i = 0; !err && i < r.n; i++) {
		const cJSON *row = cJSON_GetArrayItem(r.data, i), *hist = cJSON_GetArrayItem(row, 9);
		struct sys_row sr = { .kind = jnum(row, 0), .a = jnum(row, 1), .b = jnum(row, 2),
				      .addr = jnum(row, 3),
				      .holder = jstr(row, 4)[0] ? jstr(row, 4) : NULL,
				      .stack = jstr(row, 5)[0] ? jstr(row, 5) : NULL };
		struct latency lat = { .count = jnum(row, 6), .total_ns = jnum(row, 7),
				       .max_ns = jnum(row, 8) };

		for (int h = 0; h < LATENCY_HIST && h < cJSON_GetArraySize(hist); h++)
			lat.hist[h] = jnum(hist, h);
		err = sys_table_add(t, &sr, &lat);
	}
	rows_free(&r);
	chb_free(&sql);
	chb_free(&where);
	if (!err)
		err = sys_table_snapshot(t, out);
	sys_table_unref(t);
	return err;
}

static int ch_blocking(struct agg_store *as, const char *node, pid_t pid,
		       struct blocking_snapshot **out)
{
	struct ch_store *s = of(as);
	struct blocking_log *l = blocking_log_new();
	struct chbuf sql = {0}, where = {0};
	struct ch_rows r = {0};
	uint64_t total = 0;
	int err;

	if (!l)
		return -ENOMEM;
	err = where_target(s, &where, node, pid);
	/* Every event counts; the log keeps the newest BLOCKING_RING, as the node does. */
	chb_printf(&sql, "SELECT time_ns, dur_us, tid, thread, preempted, state, stack,"
		   " (SELECT count() FROM blocking%s AND sec >= %" PRId64 " AND attempt IN ("
		   WINNERS " WHERE node = ", where.data ? where.data : "", s->keep_from);
	chb_quote(&sql, node);
	chb_printf(&sql, " GROUP BY boot_id, seq)) FROM blocking%s AND sec >= %" PRId64
		   " AND attempt IN (" WINNERS " WHERE node = ", where.data ? where.data : "",
		   s->keep_from);
	chb_quote(&sql, node);
	chb_printf(&sql, " GROUP BY boot_id, seq) ORDER BY time_ns DESC LIMIT %d", BLOCKING_RING);
	if (!err)
		err = ch_select(s, &sql, &r);
	for (int i = r.n - 1; !err && i >= 0; i--) {
		const cJSON *row = cJSON_GetArrayItem(r.data, i);
		struct blocking_event ev = { .time_ns = jnum(row, 0), .dur_us = jnum(row, 1),
					     .tid = jnum(row, 2), .preempted = jnum(row, 4),
					     .state = jnum(row, 5), .stack = (char *)jstr(row, 6) };

		snprintf(ev.thread, sizeof(ev.thread), "%s", jstr(row, 3));
		err = blocking_log_add(l, &ev);
	}
	total = r.n ? jnum(cJSON_GetArrayItem(r.data, 0), 7) : 0;
	rows_free(&r);
	chb_free(&sql);
	chb_free(&where);
	if (!err)
		err = blocking_log_snapshot(l, out);
	if (!err)
		(*out)->total = total;
	blocking_log_unref(l);
	return err;
}

static int ch_text(struct agg_store *as, const char *node, pid_t pid, enum tree_text which,
		   char **out)
{
	struct ch_store *s = of(as);
	struct chbuf sql = {0};
	struct ch_rows r = {0};
	int err;

	chb_printf(&sql, "SELECT argMax(body, ver) FROM texts");
	err = where_target(s, &sql, node, pid);
	chb_printf(&sql, " AND kind = %d", which);
	if (!err)
		err = ch_select(s, &sql, &r);
	chb_free(&sql);
	if (!err) {
		*out = strdup(r.n ? jstr(cJSON_GetArrayItem(r.data, 0), 0) : "");
		err = *out ? 0 : -ENOMEM;
	}
	rows_free(&r);
	return err;
}

static int ch_node_status(struct agg_store *as, const char *node, struct agg_node_status *out)
{
	struct ch_store *s = of(as);
	struct chbuf sql = {0};
	struct ch_rows r = {0};
	const cJSON *row;
	int err;

	/* One row per batch (attempts that raced are one), the latest by (boot order, seq). */
	chb_printf(&sql, "SELECT count(), sum(samples), max(received), argMax(created, v),"
		   " argMax(seq, v), argMax(boot_id, v), argMax(spool_bytes, v),"
		   " argMax(batches_dropped, v), argMax(batches_rejected, v),"
		   " argMax(oldest_dropped, v), argMax(last_success, v), argMax(last_error, v),"
		   " argMax(version, v), (SELECT count() FROM duplicates WHERE node = ");
	chb_quote(&sql, node);
	chb_printf(&sql, "), (SELECT uniqExact(pid) FROM targets WHERE node = ");
	chb_quote(&sql, node);
	chb_printf(&sql, ") FROM (SELECT boot_id, seq, any(samples) AS samples,"
		   " any(received) AS received, any(created) AS created, any(spool_bytes) AS"
		   " spool_bytes, any(batches_dropped) AS batches_dropped, any(batches_rejected)"
		   " AS batches_rejected, any(oldest_dropped) AS oldest_dropped,"
		   " any(last_success) AS last_success, any(last_error) AS last_error,"
		   " any(version) AS version, any(bord) * 4294967296 + seq AS v FROM batches"
		   " WHERE node = ");
	chb_quote(&sql, node);
	chb_printf(&sql, " GROUP BY boot_id, seq)");
	err = ch_select(s, &sql, &r);
	chb_free(&sql);
	if (err)
		return err;
	row = cJSON_GetArrayItem(r.data, 0);
	if (!row || !jnum(row, 0)) {
		rows_free(&r);
		return -ENOENT;
	}
	*out = (struct agg_node_status){
		.batches = jnum(row, 0), .samples = jnum(row, 1), .last_batch_unix = jnum(row, 2),
		.last_created_unix = jnum(row, 3), .last_seq = jnum(row, 4),
		.spool_bytes = jnum(row, 6), .batches_dropped = jnum(row, 7),
		.batches_rejected = jnum(row, 8), .oldest_dropped_unix = jnum(row, 9),
		.last_success_unix = jnum(row, 10), .duplicates = jnum(row, 13),
		.targets = jnum(row, 14) };
	snprintf(out->name, sizeof(out->name), "%s", node);
	snprintf(out->last_boot_id, sizeof(out->last_boot_id), "%s", jstr(row, 5));
	snprintf(out->last_error, sizeof(out->last_error), "%s", jstr(row, 11));
	snprintf(out->version, sizeof(out->version), "%s", jstr(row, 12));
	rows_free(&r);
	return 0;
}

/* Drops every day partition before `before` (a day's start), table by table. */
static int ch_retain(struct agg_store *as, int64_t before)
{
	struct ch_store *s = of(as);
	struct chbuf sql = {0};
	struct ch_rows r = {0};
	char why[512];
	int err;

	s->keep_from = before;
	chb_printf(&sql, "SELECT DISTINCT table, partition FROM system.parts WHERE database = ");
	chb_quote(&sql, s->srv.db);
	chb_printf(&sql, " AND active AND partition != 'tuple()' AND toUInt64OrZero(partition)"
		   " < %" PRId64, before / DAY);
	err = ch_select(s, &sql, &r);
	chb_free(&sql);
	for (int i = 0; !err && i < r.n; i++) {
		const cJSON *row = cJSON_GetArrayItem(r.data, i);

		chb_printf(&sql, "ALTER TABLE %s DROP PARTITION %s", jstr(row, 0), jstr(row, 1));
		err = sql.err ? sql.err : ch_exec(s, sql.data, why, sizeof(why));
		if (err)
			log_error(sql.data, why);
		chb_free(&sql);
	}
	rows_free(&r);
	if (s->rollup)
		ch_rollup_sweep(s->rollup);
	return err;
}

static int ch_totals(struct agg_store *as, uint64_t *batches, uint64_t *samples,
		     uint64_t *nodes, uint64_t *targets)
{
	struct ch_store *s = of(as);
	struct chbuf sql = {0};
	struct ch_rows r = {0};
	int err;

	chb_printf(&sql, "SELECT count(), sum(n), uniqExact(node), (SELECT uniqExact(node,"
		   " target) FROM targets) FROM (SELECT node, any(samples) AS n FROM batches"
		   " GROUP BY node, boot_id, seq)");
	err = ch_select(s, &sql, &r);
	chb_free(&sql);
	if (!err && r.n) {
		const cJSON *row = cJSON_GetArrayItem(r.data, 0);

		*batches = jnum(row, 0);
		*samples = jnum(row, 1);
		*nodes = jnum(row, 2);
		*targets = jnum(row, 3);
	}
	rows_free(&r);
	return err;
}

static int ch_stats(struct agg_store *as, struct agg_store_table *out, size_t max, size_t *n)
{
	static const char *const oldest[] = {
		"batches", "min(received)", "samples", "min(sec)", "stacks", "min(seen)",
		"targets", "min(last_seen)", "texts", "min(seen)", "sys_rows", "min(seen)",
		"blocking", "min(sec)", "duplicates", "min(at)", "bucket_marks", "min(bucket)",
		"samples_1m", "min(bucket)", "samples_1h", "min(bucket)", "rolls", "min(bucket)",
	};
	struct ch_store *s = of(as);
	struct chbuf sql = {0};
	struct ch_rows r = {0};
	int err;

	/* Parts and sizes from system.parts; the oldest row from the oldest partition only. */
	chb_printf(&sql, "SELECT table, sum(rows), sum(bytes_on_disk), count(), min(partition)"
		   " FROM system.parts WHERE active AND database = ");
	chb_quote(&sql, s->srv.db);
	chb_printf(&sql, " GROUP BY table ORDER BY table");
	err = ch_select(s, &sql, &r);
	chb_free(&sql);
	*n = 0;
	for (int i = 0; !err && i < r.n && *n < max; i++) {
		const cJSON *row = cJSON_GetArrayItem(r.data, i);
		struct agg_store_table *t = &out[(*n)++];
		struct ch_rows o = {0};

		*t = (struct agg_store_table){ .rows = jnum(row, 1), .bytes = jnum(row, 2),
					       .parts = jnum(row, 3) };
		snprintf(t->name, sizeof(t->name), "%s", jstr(row, 0));
		for (size_t k = 0; k < sizeof(oldest) / sizeof(oldest[0]); k += 2) {
			if (strcmp(oldest[k], t->name))
				continue;
			chb_printf(&sql, "SELECT %s FROM %s WHERE _partition_id = '%s'",
				   oldest[k + 1], oldest[k], jstr(row, 4));
			if (!ch_select(s, &sql, &o) && o.n)
				t->oldest = jnum(cJSON_GetArrayItem(o.data, 0), 0);
			rows_free(&o);
			chb_free(&sql);
		}
	}
	rows_free(&r);
	return err;
}

static void ch_close(struct agg_store *as)
{
	struct ch_store *s = of(as);
	struct boot_ord *b, *btmp;
	struct scope_name *e, *tmp;

	if (!s)
		return;
	ch_rollup_stop(s->rollup);
	seen_clear(&s->stacks, &s->nstacks);
	seen_clear(&s->texts, &s->ntexts);
	HASH_ITER(hh, s->boots, b, btmp) {
		HASH_DEL(s->boots, b);
		free(b);
	}
	for (int k = 0; k < 2; k++)
		HASH_ITER(hh, s->scopes[k], e, tmp) {
			HASH_DELETE(hh_name, s->by_name[k], e);
			HASH_DEL(s->scopes[k], e);
			free(e);
		}
	agg_group_fini(&s->group);
	pthread_mutex_destroy(&s->lock);
	free(s);
	curl_global_cleanup();
}

static const struct agg_store_ops ch_ops = {
	.apply = ch_apply,
	.list_scopes = ch_list_scopes,
	.scope_lookup = ch_scope_lookup,
	.scope_name = ch_scope_name,
	.targets = ch_targets,
	.target = ch_target,
	.profile = ch_profile,
	.sys = ch_sys,
	.blocking = ch_blocking,
	.text = ch_text,
	.node_status = ch_node_status,
	.retain = ch_retain,
	.totals = ch_totals,
	.stats = ch_stats,
	.close = ch_close,
};

/* ---- opening: URL, server version, schema ---- */

static int parse_url(struct ch_store *s, const char *url, char *why, size_t why_size)
{
	const char *hostport = url + strlen("clickhouse://"), *slash = strchr(hostport, '/');
	const char *q;
	size_t dblen;

	s->max_rows = 1000000000;
	s->max_stacks = 100000;
	s->max_time_s = 10;
	s->roll_every_s = 10;
	s->srv.timeout_s = 10;
	if (!slash || slash == hostport || !slash[1]) {
		snprintf(why, why_size, "%s: expected clickhouse://HOST:PORT/DB", url);
		return -EINVAL;
	}
	q = strchr(slash, '?');
	dblen = q ? (size_t)(q - slash - 1) : strlen(slash + 1);
	if (!dblen || dblen >= sizeof(s->srv.db) ||
	    strspn(slash + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
	    != dblen) {
		snprintf(why, why_size, "%s: a database name is letters, digits and _", url);
		return -EINVAL;
	}
	snprintf(s->srv.base, sizeof(s->srv.base), "http://%.*s/", (int)(slash - hostport),
		 hostport);
	memcpy(s->srv.db, slash + 1, dblen);
	while (q && *q) {
		char name[64];
		unsigned long long v;
		int used = 0;

		if (sscanf(q + 1, "%63[a-z_]=%llu%n", name, &v, &used) != 2 ||
		    (!v && strcmp(name, "roll_every"))) {
			snprintf(why, why_size, "%s: bad option at %s", url, q + 1);
			return -EINVAL;
		}
		if (!strcmp(name, "max_rows_to_read"))
			s->max_rows = v;
		else if (!strcmp(name, "max_execution_time"))
			s->max_time_s = v;
		else if (!strcmp(name, "max_stacks"))
			s->max_stacks = v;
		else if (!strcmp(name, "timeout"))
			s->srv.timeout_s = v;
		else if (!strcmp(name, "roll_every"))
			s->roll_every_s = v;
		else {
			snprintf(why, why_size, "%s: unknown option %s (max_rows_to_read,"
				 " max_execution_time, max_stacks, timeout, roll_every)", url, name);
			return -EINVAL;
		}
		q = strchr(q + 1, '&');
	}
	s->read_srv = s->srv;
	s->read_srv.timeout_s = s->max_time_s + 5;
	return 0;
}

/* stacks.at_lines, unless the table has it: made by this schema, or by another aggregator's
 * upgrade of a shared database. */
static int add_at_lines(struct ch_store *s, char *err_text, size_t err_size)
{
	struct chbuf sql = {0};
	struct ch_rows r;
	int err;

	chb_printf(&sql, "SELECT count() FROM system.columns WHERE database = '%s' AND"
		   " table = 'stacks' AND name = 'at_lines'", s->srv.db);
	err = ch_select(s, &sql, &r);
	chb_free(&sql);
	if (err) {
		snprintf(err_text, err_size, "%s: cannot read system.columns", s->srv.db);
		return err;
	}
	if (!jnum(cJSON_GetArrayItem(r.data, 0), 0))
		err = ch_exec(s, "ALTER TABLE stacks ADD COLUMN at_lines Array(UInt32)", err_text,
			      err_size);
	rows_free(&r);
	return err;
}

/* The server must be 18.16 or newer; the database's schema this aggregator's or older (then
 * upgraded), every table with the columns this code writes. */
static int open_schema(struct ch_store *s, char *why, size_t why_size)
{
	struct ch_server plain = s->srv;
	struct chbuf sql = {0}, out = {0};
	struct ch_rows r = {0};
	unsigned major = 0, minor = 0;
	char err_text[512];
	int err;

	snprintf(plain.db, sizeof(plain.db), "default");
	err = ch_run(&plain, "SELECT version()", NULL, NULL, &out, err_text, sizeof(err_text));
	if (err) {
		snprintf(why, why_size, "%s", err_text);
		return -EIO;
	}
	if (sscanf(out.data, "%u.%u", &major, &minor) != 2 || major < 18 ||
	    (major == 18 && minor < 16)) {
		snprintf(why, why_size, "ClickHouse %.*s at %s: this store needs 18.16 or newer",
			 (int)strcspn(out.data, "\n"), out.data, s->srv.base);
		chb_free(&out);
		return -EPROTONOSUPPORT;
	}
	chb_free(&out);
	chb_printf(&sql, "CREATE DATABASE IF NOT EXISTS %s", s->srv.db);
	err = ch_run(&plain, sql.data, NULL, NULL, NULL, err_text, sizeof(err_text));
	for (size_t i = 0; !err && i < NTABLES; i++) {
		sql.len = 0;
		chb_printf(&sql, "CREATE TABLE IF NOT EXISTS %s (%s) ENGINE = %s", tables[i].name,
			   tables[i].columns, tables[i].engine);
		err = ch_exec(s, sql.data, err_text, sizeof(err_text));
	}
	chb_free(&sql);
	if (!err)
		err = ch_exec(s, CH_BUCKETS_VIEW, err_text, sizeof(err_text));
	if (err) {
		snprintf(why, why_size, "%s", err_text);
		return -EIO;
	}
	chb_printf(&sql, "SELECT max(version), count() FROM schema_version");
	err = ch_select(s, &sql, &r);
	chb_free(&sql);
	if (err) {
		snprintf(why, why_size, "%s: cannot read schema_version", s->srv.db);
		return err;
	}
	if (jnum(cJSON_GetArrayItem(r.data, 0), 0) > SCHEMA_VERSION) {
		snprintf(why, why_size, "database %s has schema version %" PRIu64 ", newer than"
			 " this aggregator's %d: upgrade the aggregator", s->srv.db,
			 jnum(cJSON_GetArrayItem(r.data, 0), 0), SCHEMA_VERSION);
		rows_free(&r);
		return -EPROTONOSUPPORT;
	}
	/* 1 -> 2: the marks already there into bucket_marks (the view has every one since it
	 * was made; a mark counted twice only makes its buckets' rolls look stale once). */
	if (jnum(cJSON_GetArrayItem(r.data, 0), 0) == 1)
		err = ch_exec(s, "INSERT INTO bucket_marks " CH_BUCKETS_SELECT, err_text,
			      sizeof(err_text));
	/* 2 -> 3: stacks.at_lines, empty (no line known) in the stacks already there. */
	if (!err && jnum(cJSON_GetArrayItem(r.data, 0), 0) < 3)
		err = add_at_lines(s, err_text, sizeof(err_text));
	if (!err && jnum(cJSON_GetArrayItem(r.data, 0), 0) < SCHEMA_VERSION) {
		chb_printf(&sql, "INSERT INTO schema_version VALUES (%d, %lld)", SCHEMA_VERSION,
			   (long long)time(NULL));
		err = ch_exec(s, sql.data, err_text, sizeof(err_text));
		chb_free(&sql);
	}
	rows_free(&r);
	/* A table made by someone else under our name is refused here, not at the first insert. */
	for (size_t i = 0; !err && i < NTABLES; i++) {
		char *cols = strdup(tables[i].columns), *c, *save = NULL;

		if (!cols)
			return -ENOMEM;
		chb_printf(&sql, "SELECT ");
		for (c = strtok_r(cols, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
			c += strspn(c, " ");
			chb_printf(&sql, "%.*s, ", (int)strcspn(c, " "), c);
		}
		sql.len -= 2;
		chb_printf(&sql, " FROM %s LIMIT 0", tables[i].name);
		err = ch_exec(s, sql.data, err_text, sizeof(err_text));
		if (err)
			snprintf(why, why_size, "table %s.%s is not this aggregator's (schema %d): %s",
				 s->srv.db, tables[i].name, SCHEMA_VERSION, err_text);
		chb_free(&sql);
		free(cols);
	}
	if (err && !why[0])
		snprintf(why, why_size, "%s", err_text);
	return err ? -EIO : 0;
}

int agg_store_open_clickhouse(const char *url, struct agg_store **out, char *why,
			      size_t why_size)
{
	struct ch_store *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return -ENOMEM;
	/* Before any thread makes a request: libcurl's global state, counted per call. */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	s->base.ops = &ch_ops;
	snprintf(s->base.url, sizeof(s->base.url), "%s", url);
	pthread_mutex_init(&s->lock, NULL);
	agg_group_init(&s->group, GROUP_MAX, ch_apply_group, s);
	why[0] = 0;
	err = parse_url(s, url, why, why_size);
	if (!err)
		err = open_schema(s, why, why_size);
	if (!err && s->roll_every_s)
		err = ch_rollup_start(&s->srv, s->roll_every_s, &s->keep_from, &s->rollup);
	if (err) {
		ch_close(&s->base);
		return err;
	}
	*out = &s->base;
	return 0;
}
