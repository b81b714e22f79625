/* The aggregator on a real SQLite file: a folded Pyroscope push lands
 * under its service with the app as its first frame, bad pushes get Pyroscope's codes and
 * store nothing, the metrics count what happened, histograms cumulative; and profile ranges
 * add minute and second rows, each second once, also after retention cut a minute. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "aggregate/aggregator.h"

static int push_at(struct aggregator *g, const char *name, const char *body, int64_t sec)
{
	char from[32], reply[512];
	struct agg_pyroscope_query q = { .name = name, .from = from, .format = "folded" };

	snprintf(from, sizeof(from), "%lld", (long long)sec);
	return aggregator_pyroscope(g, NULL, &q, (const uint8_t *)body, strlen(body), reply,
				    sizeof(reply));
}

static int push(struct aggregator *g, const char *name, const char *body)
{
	return push_at(g, name, body, time(NULL));
}

static struct agg_store *open_store(struct aggregator *g, char *dir)
{
	char url[128], why[256];
	struct agg_store *store;

	assert_non_null(mkdtemp(dir));
	snprintf(url, sizeof(url), "sqlite:%s/agg.db", dir);
	assert_int_equal(agg_store_open(url, &store, why, sizeof(why)), 0);
	assert_int_equal(aggregator_init(g, store, NULL, 7), 0);
	return store;
}

static void close_store(struct aggregator *g, struct agg_store *store, const char *dir)
{
	char cmd[128];

	aggregator_fini(g);
	store->ops->close(store);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

static uint64_t service_total(struct agg_store *store, int64_t from, int64_t until)
{
	struct agg_query q = { .service = "tick", .type = TARGET_PROFILE_CPU, .from = from,
			       .until = until };
	struct profile_snapshot *snap;
	uint64_t total;

	assert_int_equal(store->ops->profile(store, &q, &snap), 0);
	total = snap->total;
	profile_snapshot_free(snap);
	return total;
}

/* One sample a second for 300 s: any range, whole minutes or not, counts its seconds, by
 * minute rows and second rows together, each once. */
static void test_ranges_across_minutes(void **state)
{
	char dir[] = "/tmp/aperture-agg-ranges-XXXXXX";
	int64_t base = (time(NULL) - 3600) / 60 * 60 + 17; /* not on a minute */
	static const int64_t ranges[][2] = { { 0, 299 }, { 10, 20 }, { 43, 103 }, { 43, 102 },
					     { 42, 163 }, { 100, 100 }, { 1, 298 }, { 43, 162 } };
	struct aggregator g;
	struct agg_store *store = open_store(&g, dir);

	for (int64_t i = 0; i < 300; i++)
		assert_int_equal(push_at(&g, "tick.cpu", "main 1\n", base + i), 200);
	for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++)
		assert_int_equal(service_total(store, base + ranges[r][0], base + ranges[r][1]),
				 ranges[r][1] - ranges[r][0] + 1);
	assert_int_equal(service_total(store, 0, INT64_MAX), 300);
	/* retention cut inside a minute keeps exactly the seconds after it */
	assert_int_equal(store->ops->retain(store, base + 100), 0);
	assert_int_equal(service_total(store, 0, INT64_MAX), 200);
	assert_int_equal(service_total(store, base + 90, base + 170), 71);
	close_store(&g, store, dir);
}

static void test_pyroscope_push_and_metrics(void **state)
{
	char dir[] = "/tmp/aperture-agg-metrics-XXXXXX", url[128], why[256], *text = NULL;
	struct agg_query q = { .service = "shop", .type = TARGET_PROFILE_CPU, .until = INT64_MAX };
	struct profile_snapshot *snap;
	struct agg_store *store;
	struct aggregator g;
	size_t len = 0;
	FILE *out;

	assert_non_null(mkdtemp(dir));
	snprintf(url, sizeof(url), "sqlite:%s/agg.db", dir);
	assert_int_equal(agg_store_open(url, &store, why, sizeof(why)), 0);
	assert_int_equal(aggregator_init(&g, store, NULL, 7), 0);

	assert_int_equal(push(&g, "shop.cpu{env=prod, region = eu}", "main;hot 70\nmain;cold 30\n"),
			 200);
	assert_int_equal(push(&g, "shop/x.cpu", "main 1\n"), 400);
	assert_int_equal(push(&g, "shop.cpu{env}", "main 1\n"), 400);
	assert_int_equal(push(&g, "shop.inuse_space", "main 1\n"), 422);
	assert_int_equal(push(&g, "shop.cpu", "main;hot\n"), 422);

	assert_int_equal(store->ops->profile(store, &q, &snap), 0);
	assert_int_equal(snap->total, 100);
	assert_int_equal(snap->nstacks, 2);
	for (size_t i = 0; i < snap->nstacks; i++) {
		assert_int_equal(snap->stacks[i].depth, 3);
		assert_string_equal(snap->names[snap->stacks[i].frames[0]], "shop");
	}
	profile_snapshot_free(snap);

	agg_latency_observe(&g.store_query, agg_clock_ns() - 3000000); /* 3 ms */
	out = open_memstream(&text, &len);
	assert_int_equal(agg_metrics_render(&g, out), 0);
	fclose(out);
	assert_non_null(strstr(text, "aperture_aggregate_batches_total{result=\"applied\"} 1\n"));
	assert_non_null(strstr(text, "aperture_aggregate_batches_total{result=\"rejected\","
			       "reason=\"malformed\"} 2\n"));
	assert_non_null(strstr(text, "aperture_aggregate_batches_total{result=\"rejected\","
			       "reason=\"unprocessable\"} 2\n"));
	assert_non_null(strstr(text, "aperture_aggregate_samples_total 100\n"));
	assert_non_null(strstr(text, "aperture_aggregate_node_last_batch_timestamp_seconds"
			       "{node=\"pyroscope\"} "));
	assert_non_null(strstr(text, "aperture_aggregate_store_rows{table=\"samples\"} 2\n"));
	/* 3 ms is past le=0.001 and within le=0.005, and every bucket after it */
	assert_non_null(strstr(text, "aperture_aggregate_store_insert_duration_seconds_count 1\n"));
	assert_non_null(strstr(text, "aperture_aggregate_store_query_duration_seconds_bucket"
			       "{le=\"0.001\"} 0\n"));
	assert_non_null(strstr(text, "aperture_aggregate_store_query_duration_seconds_bucket"
			       "{le=\"0.005\"} 1\n"));
	assert_non_null(strstr(text, "aperture_aggregate_store_query_duration_seconds_bucket"
			       "{le=\"10\"} 1\n"));
	assert_non_null(strstr(text, "aperture_aggregate_store_query_duration_seconds_count 1\n"));
	free(text);

	aggregator_fini(&g);
	store->ops->close(store);
	snprintf(url, sizeof(url), "rm -rf %s", dir);
	assert_int_equal(system(url), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pyroscope_push_and_metrics),
		cmocka_unit_test(test_ranges_across_minutes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
