/* Per-minute and per-hour rollups of the ClickHouse store's samples: the roller thread that
 * writes them, and the plan a read follows to use them (see store_clickhouse_rollup.h). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <uthash.h>
#include "aggregate/store_clickhouse_rollup.h"

#define MINUTE 60
#define HOUR 3600
#define GRACE 60               /* a bucket is rolled this long after it closed */
#define TOUCH_MAX (8 * 86400)  /* a batch's seconds further back wait for the sweep */
#define ROLL_TIMEOUT_S 120     /* a roll reads minutes of every service, or an hour of rolls */
#define ROLL_GROUP 60          /* minutes rolled by one statement */

/* A bucket to roll, (res << 32 | start); gen changes when it is touched again. */
struct dirty {
	UT_hash_handle hh;
	uint64_t key, gen;
};

struct ch_rollup {
	struct ch_server srv;
	unsigned every_s;
	const _Atomic int64_t *keep_from;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop, sweep;
	struct dirty *dirty;
	uint64_t gen;
};

static void log_error(const char *what, const char *why)
{
	fprintf(stderr, "aperture: clickhouse rollup: %s: %s\n", what, why);
}

/* Runs sql; its TabSeparated answer of ncols unsigned columns into *rows (malloc'd). */
static int select_u64(const struct ch_server *srv, const char *sql, int ncols,
		      uint64_t **rows, size_t *n)
{
	struct chbuf out = {0};
	char why[512];
	size_t cap = 0;
	char *p;
	int err = ch_run(srv, sql, NULL, NULL, &out, why, sizeof(why));

	*rows = NULL;
	*n = 0;
	if (err) {
		log_error(sql, why);
		return err == -ENOMEM ? err : -EIO;
	}
	for (p = out.data; p && *p; p += strspn(p, "\t\n")) {
		uint64_t *bigger;

		if (*n * ncols + ncols > cap) {
			cap = cap ? cap * 2 : (size_t)64 * ncols;
			bigger = realloc(*rows, cap * sizeof(**rows));
			if (!bigger) {
				err = -ENOMEM;
				break;
			}
			*rows = bigger;
		}
		for (int c = 0; c < ncols; c++) {
			(*rows)[*n * ncols + c] = strtoull(p, &p, 10);
			p += strspn(p, "\t");
		}
		(*n)++;
	}
	chb_free(&out);
	if (err) {
		free(*rows);
		*rows = NULL;
		*n = 0;
	}
	return err;
}

static int exec(const struct ch_server *srv, const char *sql)
{
	char why[512];
	int err = ch_run(srv, sql, NULL, NULL, NULL, why, sizeof(why));

	if (err)
		log_error(sql, why);
	return err == -ENOMEM ? err : err ? -EIO : 0;
}

/* ---- which buckets are fresh ---- */

/* A span of seconds [lo, hi], inclusive. */
struct span {
	int64_t lo, hi;
};

/* A fresh bucket: its start, resolution and roll. */
struct seg {
	int64_t start;
	uint32_t res;
	uint64_t roll;
};

/* " AND (bucket BETWEEN a AND b OR ...)": the buckets of res lying wholly in the spans;
 * false when there is none. */
static bool bucket_ranges(struct chbuf *sql, uint32_t res, const struct span *spans, size_t n)
{
	bool any = false;

	for (size_t i = 0; i < n; i++) {
		int64_t lo = (spans[i].lo + res - 1) / res * res,
			hi = (spans[i].hi + 1) / res * res - res;

		if (lo > hi)
			continue;
		chb_printf(sql, "%s bucket BETWEEN %" PRId64 " AND %" PRId64,
			   any ? " OR" : " AND (", lo, hi);
		any = true;
	}
	if (any)
		chb_printf(sql, ")");
	return any;
}

/* The fresh buckets of res wholly inside the spans, ascending, appended to *segs. */
static int fresh(const struct ch_server *srv, uint32_t res, const struct span *spans,
		 size_t n, struct seg **segs, size_t *nsegs)
{
	struct chbuf where = {0}, sql = {0};
	uint64_t *rows;
	size_t nrows;
	struct seg *bigger;
	int err;

	if (!bucket_ranges(&where, res, spans, n))
		return where.err;
	chb_printf(&sql, "SELECT bucket, min(roll) FROM (SELECT res, bucket, count() AS marks"
		   " FROM bucket_marks WHERE res = %u%s GROUP BY res, bucket) ALL INNER JOIN"
		   " (SELECT res, bucket, marks, roll FROM rolls WHERE res = %u%s) USING (res,"
		   " bucket, marks) GROUP BY bucket ORDER BY bucket", res, where.data, res,
		   where.data);
	chb_free(&where);
	err = sql.err ? sql.err : select_u64(srv, sql.data, 2, &rows, &nrows);
	chb_free(&sql);
	if (err || !nrows)
		return err;
	bigger = realloc(*segs, (*nsegs + nrows) * sizeof(**segs));
	if (!bigger) {
		free(rows);
		return -ENOMEM;
	}
	*segs = bigger;
	for (size_t i = 0; i < nrows; i++)
		(*segs)[(*nsegs)++] = (struct seg){ .start = rows[2 * i], .res = res,
						    .roll = rows[2 * i + 1] };
	free(rows);
	return 0;
}

/* The spans of [from, until] that no seg covers (segs ascending, not overlapping). */
static int gaps(int64_t from, int64_t until, const struct seg *segs, size_t n,
		struct span **out, size_t *nout)
{
	int64_t at = from;

	*out = calloc(n + 1, sizeof(**out));
	*nout = 0;
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i <= n; i++) {
		int64_t end = i < n ? segs[i].start - 1 : until;

		if (end >= at)
			(*out)[(*nout)++] = (struct span){ at, end };
		if (i < n)
			at = segs[i].start + segs[i].res;
	}
	return 0;
}

static int by_start(const void *a, const void *b)
{
	const struct seg *x = a, *y = b;

	return (x->start > y->start) - (x->start < y->start);
}

/* The rows of a rollup table for the segs of res. */
static void rollup_branch(struct chbuf *sql, const char *where, const struct seg *segs,
			  size_t n, uint32_t res, bool *first)
{
	int64_t lo = INT64_MAX, hi = 0;
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (segs[i].res == res) {
			lo = segs[i].start < lo ? segs[i].start : lo;
			hi = segs[i].start > hi ? segs[i].start : hi;
		}
	if (lo > hi)
		return;
	chb_printf(sql, "%sSELECT stack, count FROM %s WHERE %s AND bucket BETWEEN %" PRId64
		   " AND %" PRId64 " AND (bucket, roll) IN (", *first ? "" : " UNION ALL ",
		   res == HOUR ? "samples_1h" : "samples_1m", where, lo, hi);
	for (size_t i = 0; i < n; i++)
		if (segs[i].res == res)
			chb_printf(sql, "%s(%" PRId64 ", %" PRIu64 ")", k++ ? ", " : "",
				   segs[i].start, segs[i].roll);
	chb_printf(sql, ")");
	*first = false;
}

/* The raw rows of the spans, each batch's winning attempt (its marks by minute). */
static void raw_branch(struct chbuf *sql, const char *where, const char *node,
		       const struct span *spans, size_t n, bool *first)
{
	if (!n)
		return;
	chb_printf(sql, "%sSELECT stack, count FROM samples WHERE %s AND (", *first ? "" :
		   " UNION ALL ", where);
	for (size_t i = 0; i < n; i++)
		chb_printf(sql, "%ssec BETWEEN %" PRId64 " AND %" PRId64, i ? " OR " : "",
			   spans[i].lo, spans[i].hi);
	chb_printf(sql, ") AND attempt IN (SELECT argMin(attempt, (marked, attempt)) FROM"
		   " bucket_marks WHERE res = 60 AND (");
	for (size_t i = 0; i < n; i++)
		chb_printf(sql, "%sbucket BETWEEN %" PRId64 " AND %" PRId64, i ? " OR " : "",
			   spans[i].lo / MINUTE * MINUTE, spans[i].hi / MINUTE * MINUTE);
	chb_printf(sql, ")%s%s GROUP BY node, boot_id, seq)", node ? " AND node = " : "",
		   node ? node : "");
	*first = false;
}

int ch_rollup_sources(struct ch_rollup *r, const struct ch_server *srv, struct chbuf *sql,
		      const char *where, const char *node, int64_t from, int64_t until)
{
	struct span whole, *holes = NULL, *raw = NULL;
	struct seg *segs = NULL;
	size_t nsegs = 0, nholes = 0, nraw = 0;
	bool first = true;
	int err = 0;

	/* Seconds are UInt32: nothing lies outside. */
	from = from < 0 ? 0 : from;
	until = until > UINT32_MAX ? UINT32_MAX : until;
	whole = (struct span){ from, until };
	if (r && until - from + 1 >= MINUTE) {
		/* Hours first; minutes in what they leave; raw seconds for the rest. */
		err = fresh(srv, HOUR, &whole, 1, &segs, &nsegs);
		if (!err)
			err = gaps(from, until, segs, nsegs, &holes, &nholes);
		if (!err)
			err = fresh(srv, MINUTE, holes, nholes, &segs, &nsegs);
		if (nsegs) /* qsort's array may not be NULL, even empty */
			qsort(segs, nsegs, sizeof(*segs), by_start);
	}
	if (!err)
		err = gaps(from, until, segs, nsegs, &raw, &nraw);
	if (!err) {
		rollup_branch(sql, where, segs, nsegs, HOUR, &first);
		rollup_branch(sql, where, segs, nsegs, MINUTE, &first);
		raw_branch(sql, where, node, raw, nraw, &first);
		if (first)  /* from > until: no row */
			chb_printf(sql, "SELECT stack, count FROM samples WHERE 0");
	}
	free(segs);
	free(holes);
	free(raw);
	return err ? err : sql->err;
}

/* ---- rolling ---- */

/* The marks of each of n buckets of res (n <= ROLL_GROUP). */
static int marks_of(const struct ch_rollup *r, uint32_t res, const int64_t *buckets, size_t n,
		    uint64_t *marks)
{
	struct chbuf sql = {0};
	uint64_t *rows;
	size_t nrows;
	int err;

	chb_printf(&sql, "SELECT bucket, count() FROM bucket_marks WHERE res = %u AND bucket IN (",
		   res);
	for (size_t i = 0; i < n; i++)
		chb_printf(&sql, "%s%" PRId64, i ? "," : "", buckets[i]);
	chb_printf(&sql, ") GROUP BY bucket");
	err = sql.err ? sql.err : select_u64(&r->srv, sql.data, 2, &rows, &nrows);
	chb_free(&sql);
	for (size_t i = 0; !err && i < n; i++) {
		marks[i] = 0;
		for (size_t k = 0; k < nrows; k++)
			if ((int64_t)rows[2 * k] == buckets[i])
				marks[i] = rows[2 * k + 1];
	}
	if (!err)
		free(rows);
	return err;
}

/* Records the rolls of the buckets whose marks did not change while rolled; done[i] for
 * those (and for buckets with no mark: nothing to roll). */
static int record(const struct ch_rollup *r, uint32_t res, const int64_t *buckets, size_t n,
		  uint64_t id, const uint64_t *before, const uint64_t *after, bool *done)
{
	struct chbuf sql = {0};
	size_t k = 0;
	int err;

	chb_printf(&sql, "INSERT INTO rolls (res, bucket, roll, marks, rolled) VALUES ");
	for (size_t i = 0; i < n; i++) {
		done[i] = before[i] == after[i];
		if (done[i] && before[i])
			chb_printf(&sql, "%s(%u, %" PRId64 ", %" PRIu64 ", %" PRIu64 ", %lld)",
				   k++ ? ", " : "", res, buckets[i], id, before[i],
				   (long long)time(NULL));
	}
	err = sql.err ? sql.err : k ? exec(&r->srv, sql.data) : 0;
	chb_free(&sql);
	for (size_t i = 0; err && i < n; i++)
		done[i] = false;
	return err;
}

/* Rolls n minutes (ascending, within an hour) from the samples of each one's batches'
 * winning attempts, under one roll id. */
static int roll_minutes(struct ch_rollup *r, const int64_t *m, size_t n, bool *done)
{
	struct chbuf sql = {0}, list = {0};
	uint64_t before[ROLL_GROUP], after[ROLL_GROUP], id;
	int err = marks_of(r, MINUTE, m, n, before);

	if (!err && getrandom(&id, sizeof(id), 0) != sizeof(id))
		err = -EIO;
	for (size_t i = 0; i < n; i++)
		chb_printf(&list, "%s%" PRId64, i ? "," : "", m[i]);
	chb_printf(&sql, "INSERT INTO samples_1m (bucket, service, type, stack, count, roll)"
		   " SELECT toUInt32(intDiv(sec, 60) * 60) AS m, service, type, stack, sum(count),"
		   " toUInt64(%" PRIu64 ") FROM samples WHERE sec BETWEEN %" PRId64 " AND %" PRId64
		   " AND m IN (%s) AND attempt IN (SELECT argMin(attempt, (marked, attempt)) FROM"
		   " bucket_marks WHERE res = 60 AND bucket IN (%s) GROUP BY node, boot_id, seq)"
		   " GROUP BY m, service, type, stack", id, m[0], m[n - 1] + MINUTE - 1, list.data,
		   list.data);
	if (!err)
		err = list.err ? list.err : sql.err ? sql.err : exec(&r->srv, sql.data);
	if (!err)
		err = marks_of(r, MINUTE, m, n, after);
	if (!err)
		err = record(r, MINUTE, m, n, id, before, after, done);
	chb_free(&sql);
	chb_free(&list);
	return err;
}

/* Rolls an hour: the sum of its minutes' fresh rolls, once every minute with a mark has
 * one. They are read after the hour's marks are counted (a mark's minute and hour rows
 * arrive in one part), so they hold every mark it counted. */
static int roll_hour(struct ch_rollup *r, int64_t h, bool *done)
{
	struct span hour = { h, h + HOUR - 1 };
	struct chbuf sql = {0};
	struct seg *minutes = NULL;
	size_t nminutes = 0, n = 0;
	uint64_t before, after, id, *marked = NULL;
	int err = marks_of(r, HOUR, &h, 1, &before);

	*done = false;
	if (!err && getrandom(&id, sizeof(id), 0) != sizeof(id))
		err = -EIO;
	if (!err)
		err = fresh(&r->srv, MINUTE, &hour, 1, &minutes, &nminutes);
	chb_printf(&sql, "SELECT uniqExact(bucket) FROM bucket_marks WHERE res = 60 AND bucket"
		   " BETWEEN %" PRId64 " AND %" PRId64, h, h + HOUR - 1);
	if (!err)
		err = sql.err ? sql.err : select_u64(&r->srv, sql.data, 1, &marked, &n);
	if (!err && (!n || marked[0] != nminutes))
		err = -EAGAIN;  /* a minute waits for its roll */
	sql.len = 0;
	chb_printf(&sql, "INSERT INTO samples_1h (bucket, service, type, stack, count, roll)"
		   " SELECT toUInt32(%" PRId64 "), service, type, stack, sum(count), toUInt64(%"
		   PRIu64 ") FROM samples_1m WHERE bucket BETWEEN %" PRId64 " AND %" PRId64 " AND"
		   " (bucket, roll) IN ((0, 0)", h, id, h, h + HOUR - 1);
	for (size_t i = 0; i < nminutes; i++)
		chb_printf(&sql, ", (%" PRId64 ", %" PRIu64 ")", minutes[i].start,
			   minutes[i].roll);
	chb_printf(&sql, ") GROUP BY service, type, stack");
	if (!err)
		err = sql.err ? sql.err : exec(&r->srv, sql.data);
	if (!err)
		err = marks_of(r, HOUR, &h, 1, &after);
	if (!err)
		err = record(r, HOUR, &h, 1, id, &before, &after, done);
	chb_free(&sql);
	free(minutes);
	free(marked);
	return err;
}

static void dirty_put_locked(struct ch_rollup *r, uint64_t key)
{
	struct dirty *e;

	HASH_FIND(hh, r->dirty, &key, sizeof(key), e);
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return;  /* the next sweep finds it */
		e->key = key;
		HASH_ADD(hh, r->dirty, key, sizeof(e->key), e);
	}
	e->gen = ++r->gen;
}

void ch_rollup_touch(struct ch_rollup *r, uint32_t min_sec, uint32_t max_sec)
{
	int64_t lo = min_sec, keep = atomic_load(r->keep_from);

	lo = lo < keep ? keep : lo;
	lo = lo < (int64_t)max_sec - TOUCH_MAX ? (int64_t)max_sec - TOUCH_MAX : lo;
	pthread_mutex_lock(&r->lock);
	for (int64_t m = lo / MINUTE; m <= max_sec / MINUTE; m++)
		dirty_put_locked(r, (uint64_t)MINUTE << 32 | (uint64_t)(m * MINUTE));
	for (int64_t h = lo / HOUR; h <= max_sec / HOUR; h++)
		dirty_put_locked(r, (uint64_t)HOUR << 32 | (uint64_t)(h * HOUR));
	pthread_mutex_unlock(&r->lock);
}

void ch_rollup_sweep(struct ch_rollup *r)
{
	pthread_mutex_lock(&r->lock);
	r->sweep = true;
	pthread_cond_signal(&r->wake);
	pthread_mutex_unlock(&r->lock);
}

/* Every bucket since the retention's start whose marks no roll has seen, made dirty. */
static int sweep(struct ch_rollup *r)
{
	char sql[512];
	uint64_t *rows;
	size_t n;
	int64_t keep = atomic_load(r->keep_from);
	int err;

	snprintf(sql, sizeof(sql), "SELECT res, bucket FROM (SELECT res, bucket, count() AS n"
		 " FROM bucket_marks WHERE bucket >= %" PRId64 " GROUP BY res, bucket) ANY LEFT"
		 " JOIN (SELECT res, bucket, max(marks) AS rolled FROM rolls WHERE bucket >= %"
		 PRId64 " GROUP BY res, bucket) USING (res, bucket) WHERE n != rolled", keep,
		 keep);
	err = select_u64(&r->srv, sql, 2, &rows, &n);
	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < n; i++)
		dirty_put_locked(r, rows[2 * i] << 32 | rows[2 * i + 1]);
	pthread_mutex_unlock(&r->lock);
	free(rows);
	return err;
}

static int by_key(const void *a, const void *b)
{
	const struct dirty *x = a, *y = b;

	return (x->key > y->key) - (x->key < y->key);
}

/* Rolls the closed dirty buckets, minutes first (hours are made of them). */
static void roll_pass(struct ch_rollup *r)
{
	int64_t now = time(NULL);
	struct dirty *e, *tmp, *todo = NULL;
	size_t n = 0;
	int err;

	pthread_mutex_lock(&r->lock);
	todo = calloc(HASH_COUNT(r->dirty) + 1, sizeof(*todo));
	HASH_ITER(hh, r->dirty, e, tmp)
		if (todo && (int64_t)(e->key & UINT32_MAX) + (int64_t)(e->key >> 32) + GRACE <= now)
			todo[n++] = (struct dirty){ .key = e->key, .gen = e->gen };
	pthread_mutex_unlock(&r->lock);
	if (n)
		qsort(todo, n, sizeof(*todo), by_key);
	for (size_t i = 0, k; i < n; i = k) {
		uint32_t res = todo[i].key >> 32;
		int64_t buckets[ROLL_GROUP];
		bool done[ROLL_GROUP], stop;

		/* Minutes go by groups within an hour, hours one by one. */
		for (k = i; k < n && k - i < (res == MINUTE ? ROLL_GROUP : 1) &&
		     todo[k].key >> 32 == res &&
		     (todo[k].key & UINT32_MAX) / HOUR == (todo[i].key & UINT32_MAX) / HOUR; k++)
			buckets[k - i] = todo[k].key & UINT32_MAX;
		pthread_mutex_lock(&r->lock);
		stop = r->stop;
		pthread_mutex_unlock(&r->lock);
		if (stop)
			break;
		err = res == MINUTE ? roll_minutes(r, buckets, k - i, done) :
		      roll_hour(r, buckets[0], done);
		if (err && err != -EAGAIN)
			break;  /* ClickHouse failed: the next pass tries again */
		pthread_mutex_lock(&r->lock);
		for (size_t j = i; !err && j < k; j++) {
			HASH_FIND(hh, r->dirty, &todo[j].key, sizeof(todo[j].key), e);
			if (done[j - i] && e && e->gen == todo[j].gen) {
				HASH_DEL(r->dirty, e);
				free(e);
			}
		}
		pthread_mutex_unlock(&r->lock);
	}
	free(todo);
}

static void *roller(void *arg)
{
	struct ch_rollup *r = arg;

	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		struct timespec until;
		bool sweep_now = r->sweep, failed = false;

		r->sweep = false;
		pthread_mutex_unlock(&r->lock);
		if (sweep_now)
			failed = sweep(r) != 0;
		if (!failed)
			roll_pass(r);
		pthread_mutex_lock(&r->lock);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += r->every_s;
		while (!r->stop && !r->sweep &&
		       pthread_cond_timedwait(&r->wake, &r->lock, &until) != ETIMEDOUT)
			;
		r->sweep |= failed;  /* ClickHouse failed: sweep again next time */
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int ch_rollup_start(const struct ch_server *srv, unsigned every_s,
		    const _Atomic int64_t *keep_from, struct ch_rollup **out)
{
	struct ch_rollup *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return -ENOMEM;
	r->srv = *srv;
	r->srv.timeout_s = ROLL_TIMEOUT_S;
	r->every_s = every_s;
	r->keep_from = keep_from;
	r->sweep = true;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->wake, NULL);
	err = -pthread_create(&r->thread, NULL, roller, r);
	if (err) {
		pthread_cond_destroy(&r->wake);
		pthread_mutex_destroy(&r->lock);
		free(r);
		return err;
	}
	*out = r;
	return 0;
}

void ch_rollup_stop(struct ch_rollup *r)
{
	struct dirty *e, *tmp;

	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = true;
	pthread_cond_signal(&r->wake);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	HASH_ITER(hh, r->dirty, e, tmp) {
		HASH_DEL(r->dirty, e);
		free(e);
	}
	pthread_cond_destroy(&r->wake);
	pthread_mutex_destroy(&r->lock);
	free(r);
}
