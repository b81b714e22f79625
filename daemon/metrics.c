/* The node's metrics file: status's figures in Prometheus text format. The collectors' come
 * through the collector interface (collectors/collector.h). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "collectors/collector.h"
#include "collectors/jvm/hsperf_watch.h"
#include "daemon/aperture.h"
#include "daemon/targets.h"
#include "symbols/symbols.h"
#include "sync/client.h"
#include "views/prom.h"

/* Every collector the daemon lists, through the collector interface: whether it loaded,
 * collects now and failed to attach, then its own figures. A new collector needs nothing
 * here. */
static void collector_metrics(struct aperture *a, FILE *out)
{
	struct collector_metric rows[APERTURE_COLLECTORS * (COLLECTOR_METRICS_MAX + 3)];
	bool printed[sizeof(rows) / sizeof(rows[0])] = {0};
	size_t n = 0;

	for (int i = 0; i < APERTURE_COLLECTORS; i++) {
		const struct aperture_collector *c = &a->collectors[i];
		struct collector_metrics m = {0};

		rows[n++] = (struct collector_metric){
			"aperture_collector_up", "gauge",
			"1 when the collector loaded; 0: see status for why not.",
			"collector", c->ops->name, c->self != NULL };
		rows[n++] = (struct collector_metric){
			"aperture_collector_attach_failures_total", "counter",
			"Enables and collector choices that failed because of the collector.",
			"collector", c->ops->name, atomic_load(&c->attach_failures) };
		if (!c->self || !c->ops->metrics)
			continue;
		c->ops->metrics(c->self, &m);
		rows[n++] = (struct collector_metric){
			"aperture_collector_active", "gauge",
			"1 while the collector is collecting (some target has it on).",
			"collector", c->ops->name, m.active };
		memcpy(rows + n, m.rows, m.n * sizeof(*rows));
		n += m.n;
	}
	/* The text format wants each family's rows together: print them by family, in the
	 * order families first appear. */
	for (size_t i = 0; i < n; i++) {
		if (printed[i])
			continue;
		prom_family(out, rows[i].name, rows[i].type, rows[i].help);
		for (size_t j = i; j < n; j++) {
			if (printed[j] || strcmp(rows[j].name, rows[i].name))
				continue;
			printed[j] = true;
			fputs(rows[j].name, out);
			if (rows[j].label_key) {
				fprintf(out, "{%s=\"", rows[j].label_key);
				prom_label(out, rows[j].label_value);
				fputs("\"}", out);
			}
			fprintf(out, " %llu\n", (unsigned long long)rows[j].value);
		}
	}
}

static void jvm_metrics(struct aperture *a, FILE *out)
{
	struct hsperf_watch_stats ws = {0};
	pid_t *pids = NULL;

	if (a->jvm_watch && hsperf_watch_snapshot(a->jvm_watch, &ws, &pids))
		ws = (struct hsperf_watch_stats){0};
	free(pids);
	prom_value(out, "aperture_jvms", "gauge", "JVMs found on this machine.", ws.jvms);
}

static void sync_metrics(struct aperture *a, FILE *out)
{
	struct sync_client_stats st;

	sync_client_get_stats(a->sync, &st);
	prom_value(out, "aperture_sync_enabled", "gauge", "1 when remote sync has a URL.", st.on);
	prom_value(out, "aperture_sync_failing", "gauge",
		   "1 while the last upload failed or was refused.", st.failing);
	prom_value(out, "aperture_sync_last_success_timestamp_seconds", "gauge",
		   "When the aggregator last acknowledged a batch (0: never).", st.last_success);
	prom_value(out, "aperture_sync_lag_seconds", "gauge",
		   "Age of the oldest batch not yet acknowledged (0: none waits).", st.lag_s);
	prom_value(out, "aperture_sync_spool_bytes", "gauge", "Bytes of batches in the spool.",
		   st.spool_bytes);
	prom_value(out, "aperture_sync_spool_batches", "gauge", "Batches in the spool.",
		   st.spool_batches);
	prom_value(out, "aperture_sync_batches_sent_total", "counter",
		   "Batches the aggregator acknowledged.", st.sent);
	prom_value(out, "aperture_sync_sent_bytes_total", "counter",
		   "Bytes of the batches acknowledged.", st.bytes_sent);
	prom_value(out, "aperture_sync_batches_dropped_total", "counter",
		   "Batches dropped because the spool was full.", st.dropped);
	prom_value(out, "aperture_sync_dropped_cpu_samples_total", "counter",
		   "CPU samples the dropped batches carried.", st.dropped_samples);
	prom_value(out, "aperture_sync_batches_rejected_total", "counter",
		   "Batches the aggregator refused for good.", st.rejected);
}

int aperture_metrics(struct aperture *a, FILE *out)
{
	unsigned enabled, exited;

	targets_count(a->targets, &enabled, &exited);
	prom_family(out, "aperture_targets", "gauge", "Targets by state.");
	fprintf(out, "aperture_targets{state=\"enabled\"} %u\naperture_targets{state=\"exited\"} "
		"%u\n", enabled, exited);
	prom_value(out, "aperture_start_time_seconds", "gauge", "When the daemon started.",
		   a->started);
	prom_value(out, "aperture_sampling_frequency_hertz", "gauge", "config/frequency_hz.",
		   config_get(a, CONFIG_FREQUENCY_HZ));
	collector_metrics(a, out);
	jvm_metrics(a, out);
	prom_value(out, "aperture_symbol_cache_files", "gauge",
		   "Files whose symbols are cached.", symbolizer_cached_files(a->syms));
	sync_metrics(a, out);
	return 0;
}
