/* Per-minute and per-hour rollups of the ClickHouse store's samples, and the reads that use
 * them: a long range is summed from the coarsest buckets that are exactly the raw table's
 * winning rows, and from raw seconds for the rest.
 *
 * Every complete attempt's mark is copied by a materialized view into bucket_marks, once
 * per minute and per hour it touches. A bucket's roll sums the rows of its batches' winning
 * attempts (from samples for a minute, from the minute rolls for an hour) under a random
 * roll id, and is recorded in `rolls` with the bucket's number of marks it saw, counted
 * before and after (equal, or the roll is not recorded). A roll is fresh while the bucket
 * still has that many marks; a batch arriving late (or a racing attempt's mark) makes it
 * stale and readers fall back to finer buckets until it is rolled again. So a read through
 * the rollups is exactly the read of the raw table, whatever was retried or half written. */
#ifndef APERTURE_AGGREGATE_STORE_CLICKHOUSE_ROLLUP_H
#define APERTURE_AGGREGATE_STORE_CLICKHOUSE_ROLLUP_H

#include <stdatomic.h>
#include <stdint.h>
#include "aggregate/store_clickhouse_http.h"

/* The view filling bucket_marks from batches, and the SELECT it runs (the upgrade from
 * schema 1 runs it over the batches already there). */
#define CH_BUCKETS_SELECT \
	"SELECT tupleElement(r, 1) AS res, tupleElement(r, 2) AS bucket, node, boot_id, seq," \
	" attempt, marked FROM batches ARRAY JOIN arrayConcat(" \
	"arrayMap(i -> (toUInt32(60), toUInt32((intDiv(min_sec, 60) + i) * 60))," \
	" range(toUInt32(intDiv(max_sec, 60) - intDiv(min_sec, 60) + 1)))," \
	" arrayMap(i -> (toUInt32(3600), toUInt32((intDiv(min_sec, 3600) + i) * 3600))," \
	" range(toUInt32(intDiv(max_sec, 3600) - intDiv(min_sec, 3600) + 1)))) AS r"
#define CH_BUCKETS_VIEW \
	"CREATE MATERIALIZED VIEW IF NOT EXISTS bucket_marks_mv TO bucket_marks AS " \
	CH_BUCKETS_SELECT

struct ch_rollup;

/* Starts the roller: every every_s seconds it rolls the closed buckets this process
 * touched, and after ch_rollup_sweep every stale bucket since *keep_from. */
int ch_rollup_start(const struct ch_server *srv, unsigned every_s,
		    const _Atomic int64_t *keep_from, struct ch_rollup **out);
void ch_rollup_stop(struct ch_rollup *r);
/* The minutes and hours an applied batch's seconds touched: to roll once closed. */
void ch_rollup_touch(struct ch_rollup *r, uint32_t min_sec, uint32_t max_sec);
/* The next pass looks for every stale bucket (at start, and with each retention pass). */
void ch_rollup_sweep(struct ch_rollup *r);

/* Appends to sql the rows ("SELECT stack, count FROM ... UNION ALL ...") of the samples
 * matching where (on service and type; node and target too when node is given, quoted
 * already) with sec in [from, until], each batch's winning attempt only. With r (not NULL)
 * whole fresh hours and minutes come from the rollups, the rest from samples. */
int ch_rollup_sources(struct ch_rollup *r, const struct ch_server *srv, struct chbuf *sql,
		      const char *where, const char *node, int64_t from, int64_t until);

#endif
