/* The aggregator's metrics in Prometheus text format: what it accepted and refused, how long
 * ingest and the store took, how big the store is, and when each node was last heard of. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "aggregate/aggregator.h"
#include "views/prom.h"

#define AGG_USAGE_EVERY_S 30

static const double bounds_s[AGG_LATENCY_BUCKETS] = {
	0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};

int64_t agg_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void agg_latency_observe(struct agg_latency *h, int64_t start_ns)
{
	int64_t ns = agg_clock_ns() - start_ns;
	int i = 0;

	if (ns < 0)
		ns = 0;
	while (i < AGG_LATENCY_BUCKETS && ns > bounds_s[i] * 1e9)
		i++;
	if (i < AGG_LATENCY_BUCKETS)
		atomic_fetch_add(&h->le[i], 1);
	atomic_fetch_add(&h->count, 1);
	atomic_fetch_add(&h->sum_ns, (uint64_t)ns);
}

static void print_histogram(FILE *out, const char *name, const char *help,
			    struct agg_latency *h)
{
	uint64_t cum = 0;

	prom_family(out, name, "histogram", help);
	for (int i = 0; i < AGG_LATENCY_BUCKETS; i++) {
		cum += atomic_load(&h->le[i]);
		fprintf(out, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name, bounds_s[i], cum);
	}
	fprintf(out, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n%s_sum %.9f\n%s_count %" PRIu64 "\n",
		name, atomic_load(&h->count), name, atomic_load(&h->sum_ns) / 1e9, name,
		atomic_load(&h->count));
}

/* The store's tables: reading them costs a pass over every page, so a scrape reuses the
 * text of the last AGG_USAGE_EVERY_S seconds. */
static int print_usage(struct aggregator *g, FILE *out)
{
	struct agg_store_table t[32];
	int64_t now = time(NULL), oldest = 0;
	size_t n = 0, len = 0;
	char *text = NULL;
	int err = 0;

	if (!g->store->ops->stats)
		return 0;
	pthread_mutex_lock(&g->usage_lock);
	if (!g->usage_text || now - g->usage_at >= AGG_USAGE_EVERY_S) {
		int64_t start = agg_clock_ns();
		FILE *f;

		err = g->store->ops->stats(g->store, t, 32, &n);
		agg_latency_observe(&g->store_query, start);
		f = err ? NULL : open_memstream(&text, &len);
		if (err)
			atomic_fetch_add(&g->store_query_errors, 1);
		else if (!f)
			err = -ENOMEM;
		if (f) {
			prom_family(f, "aperture_aggregate_store_rows", "gauge",
				    "Rows in each table of the store.");
			for (size_t i = 0; i < n; i++)
				fprintf(f, "aperture_aggregate_store_rows{table=\"%s\"} %" PRIu64
					"\n", t[i].name, t[i].rows);
			prom_family(f, "aperture_aggregate_store_bytes", "gauge",
				    "Bytes of each table of the store, with its indexes.");
			for (size_t i = 0; i < n; i++) {
				fprintf(f, "aperture_aggregate_store_bytes{table=\"%s\"} %" PRIu64
					"\n", t[i].name, t[i].bytes);
				if (t[i].oldest && (!oldest || t[i].oldest < oldest))
					oldest = t[i].oldest;
			}
			prom_value(f, "aperture_aggregate_oldest_row_timestamp_seconds", "gauge",
				   "When the oldest row the store keeps was written (0: none).",
				   oldest);
			fclose(f);
			free(g->usage_text);
			g->usage_text = text;
			g->usage_at = now;
		}
	}
	if (g->usage_text)
		fputs(g->usage_text, out);
	pthread_mutex_unlock(&g->usage_lock);
	return err == -ENOMEM ? err : 0;
}

/* Node names, gathered first: the store's list holds its read lock while it calls back. */
struct names {
	char **v;
	size_t n, cap;
};

static int add_name(void *ctx, uint32_t id, const char *name)
{
	struct names *ns = ctx;

	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? ns->cap * 2 : 64;
		char **bigger = realloc(ns->v, cap * sizeof(*bigger));

		if (!bigger)
			return -ENOMEM;
		ns->v = bigger;
		ns->cap = cap;
	}
	ns->v[ns->n] = strdup(name);
	return ns->v[ns->n++] ? 0 : -ENOMEM;
}

static int print_nodes(struct aggregator *g, FILE *out)
{
	struct names ns = {0};
	int err = g->store->ops->list_scopes(g->store, AGG_SCOPE_NODE, add_name, &ns);

	prom_family(out, "aperture_aggregate_node_last_batch_timestamp_seconds", "gauge",
		    "When each node's last batch was received.");
	for (size_t i = 0; !err && i < ns.n; i++) {
		struct agg_node_status st;

		err = g->store->ops->node_status(g->store, ns.v[i], &st);
		if (err)
			break;
		fputs("aperture_aggregate_node_last_batch_timestamp_seconds{node=\"", out);
		prom_label(out, ns.v[i]);
		fprintf(out, "\"} %" PRId64 "\n", st.last_batch_unix);
	}
	for (size_t i = 0; i < ns.n; i++)
		free(ns.v[i]);
	free(ns.v);
	return err;
}

int agg_metrics_render(struct aggregator *g, FILE *out)
{
	uint64_t batches = 0, samples = 0, nodes = 0, targets = 0;
	int err = g->store->ops->totals(g->store, &batches, &samples, &nodes, &targets);

	if (err)
		atomic_fetch_add(&g->store_query_errors, 1);
	prom_family(out, "aperture_aggregate_batches_total", "counter",
		     "Batches received, by result, and refused ones by reason.");
	fprintf(out, "aperture_aggregate_batches_total{result=\"applied\"} %" PRIu64
		"\naperture_aggregate_batches_total{result=\"duplicate\"} %" PRIu64 "\n",
		atomic_load(&g->applied), atomic_load(&g->duplicates));
	for (int i = 0; i < AGG_REJECT_NR; i++)
		fprintf(out, "aperture_aggregate_batches_total{result=\"rejected\",reason=\"%s\"} "
			"%" PRIu64 "\n", agg_reject_names[i], atomic_load(&g->rejected[i]));
	prom_family(out, "aperture_aggregate_samples_total", "counter",
		     "Counts of samples applied (each second's counts summed).");
	fprintf(out, "aperture_aggregate_samples_total %" PRIu64 "\n", atomic_load(&g->samples));
	prom_family(out, "aperture_aggregate_reads_total", "counter", "GET requests of the tree.");
	fprintf(out, "aperture_aggregate_reads_total %" PRIu64 "\n", atomic_load(&g->reads));
	prom_family(out, "aperture_aggregate_read_errors_total", "counter",
		     "GET requests of the tree that failed (not found, store errors).");
	fprintf(out, "aperture_aggregate_read_errors_total %" PRIu64 "\n",
		atomic_load(&g->read_errors));
	print_histogram(out, "aperture_aggregate_ingest_duration_seconds",
			"Time from a batch's body read to its answer.", &g->ingest_latency);
	print_histogram(out, "aperture_aggregate_store_insert_duration_seconds",
			"Time the store took to apply a batch.", &g->store_insert);
	print_histogram(out, "aperture_aggregate_store_query_duration_seconds",
			"Time the store took to answer a profile or size query.", &g->store_query);
	prom_family(out, "aperture_aggregate_store_insert_errors_total", "counter",
		     "Batches the store failed to apply (answered 503).");
	fprintf(out, "aperture_aggregate_store_insert_errors_total %" PRIu64 "\n",
		atomic_load(&g->store_insert_errors));
	prom_family(out, "aperture_aggregate_store_query_errors_total", "counter",
		     "Store queries that failed.");
	fprintf(out, "aperture_aggregate_store_query_errors_total %" PRIu64 "\n",
		atomic_load(&g->store_query_errors));
	prom_family(out, "aperture_aggregate_retention_runs_total", "counter",
		     "Retention passes, by result.");
	fprintf(out, "aperture_aggregate_retention_runs_total{result=\"ok\"} %" PRIu64 "\n"
		"aperture_aggregate_retention_runs_total{result=\"error\"} %" PRIu64 "\n",
		atomic_load(&g->retain_runs), atomic_load(&g->retain_errors));
	prom_family(out, "aperture_aggregate_retention_last_success_timestamp_seconds", "gauge",
		     "When retention last deleted what it no longer keeps (0: never).");
	fprintf(out, "aperture_aggregate_retention_last_success_timestamp_seconds %" PRId64 "\n",
		atomic_load(&g->retain_last_unix));
	prom_family(out, "aperture_aggregate_retention_seconds", "gauge",
		     "How long the store keeps data.");
	fprintf(out, "aperture_aggregate_retention_seconds %u\n", g->retention_days * 86400);
	if (!err) {
		prom_family(out, "aperture_aggregate_nodes", "gauge", "Nodes known to the store.");
		fprintf(out, "aperture_aggregate_nodes %" PRIu64 "\n", nodes);
		prom_family(out, "aperture_aggregate_targets", "gauge",
			     "Target incarnations the store keeps.");
		fprintf(out, "aperture_aggregate_targets %" PRIu64 "\n", targets);
		prom_family(out, "aperture_aggregate_stored_samples", "gauge",
			     "Counts of samples the store holds, summed.");
		fprintf(out, "aperture_aggregate_stored_samples %" PRIu64 "\n", samples);
	}
	err = print_usage(g, out);
	if (err)
		return err;
	err = print_nodes(g, out);
	if (err)
		atomic_fetch_add(&g->store_query_errors, 1);
	return err == -ENOMEM ? err : 0;
}
