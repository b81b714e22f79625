/* The node's metrics file: status's figures in Prometheus text format. Each collector adds
 * its families in a function of its own below; a new collector adds one more. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include "collectors/collector.h"
#include "collectors/cpu.h"
#include "collectors/jvm/hsperf_watch.h"
#include "collectors/offcpu.h"
#include "collectors/sys.h"
#include "daemon/aperture.h"
#include "daemon/targets.h"
#include "symbols/symbols.h"
#include "sync/client.h"
#include "views/prom.h"

/* aperture_collector_active{collector} 1 when it is collecting now (some target has it on);
 * aperture_collector_up comes from the daemon's list of collectors, in aperture_metrics. */
static void collector_active(FILE *active, const char *name, bool on)
{
	fprintf(active, "aperture_collector_active{collector=\"%s\"} %d\n", name, on);
}

static void cpu_metrics(struct aperture *a, FILE *out, FILE *active)
{
	struct cpu_collector_stats cs = {0};

	if (a->cpu)
		cpu_collector_get_stats(a->cpu, &cs);
	collector_active(active, "cpu", cs.running);
	prom_value(out, "aperture_cpu_samples_total", "counter",
		   "CPU samples taken in the kernel for enabled targets.", cs.samples);
	prom_family(out, "aperture_cpu_samples_dropped_total", "counter",
		    "CPU samples dropped, by cause.");
	fprintf(out, "aperture_cpu_samples_dropped_total{cause=\"counts_map_full\"} %llu\n"
		"aperture_cpu_samples_dropped_total{cause=\"stacks_map_full\"} %llu\n"
		"aperture_cpu_samples_dropped_total{cause=\"stack_lost\"} %llu\n"
		"aperture_cpu_samples_dropped_total{cause=\"stacks_nomem\"} %llu\n"
		"aperture_cpu_samples_dropped_total{cause=\"ringbuf_full\"} %llu\n",
		(unsigned long long)cs.counts_full, (unsigned long long)cs.stacks_full,
		(unsigned long long)cs.stacks_lost, (unsigned long long)cs.stacks_nomem,
		(unsigned long long)cs.ringbuf_full);
	prom_family(out, "aperture_cpu_stack_errors_total", "counter",
		    "Samples kept without their user or kernel stack.");
	fprintf(out, "aperture_cpu_stack_errors_total{stack=\"user\"} %llu\n"
		"aperture_cpu_stack_errors_total{stack=\"kernel\"} %llu\n",
		(unsigned long long)cs.ustack_errors, (unsigned long long)cs.kstack_errors);
}

static void offcpu_metrics(struct aperture *a, FILE *out, FILE *active)
{
	struct offcpu_collector_stats os = {0};

	if (a->offcpu)
		offcpu_collector_get_stats(a->offcpu, &os);
	collector_active(active, "offcpu", os.running);
	prom_value(out, "aperture_offcpu_waits_total", "counter",
		   "Off-CPU waits of enabled targets kept.", os.waits);
	prom_family(out, "aperture_offcpu_waits_dropped_total", "counter",
		    "Off-CPU waits dropped, by cause.");
	fprintf(out, "aperture_offcpu_waits_dropped_total{cause=\"counts_map_full\"} %llu\n"
		"aperture_offcpu_waits_dropped_total{cause=\"start_map_full\"} %llu\n"
		"aperture_offcpu_waits_dropped_total{cause=\"stack_lost\"} %llu\n",
		(unsigned long long)os.counts_full, (unsigned long long)os.start_full,
		(unsigned long long)os.stacks_lost);
	prom_value(out, "aperture_blocking_events_lost_total", "counter",
		   "Blocking events dropped: the ring buffer was full.", os.events_lost);
}

static void sys_metrics(struct aperture *a, FILE *out, FILE *active)
{
	struct sys_collector_stats ss = {0};

	if (a->sys)
		sys_collector_get_stats(a->sys, &ss);
	collector_active(active, "syscalls", ss.syscalls);
	collector_active(active, "locks", ss.locks);
	collector_active(active, "kernel_locks", ss.kernel_locks);
	prom_value(out, "aperture_syscalls_timed_total", "counter",
		   "System calls of enabled targets timed.", ss.calls);
	prom_value(out, "aperture_syscalls_dropped_total", "counter",
		   "System call aggregates dropped: a stats map was full.", ss.map_full);
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
	char *up_text = NULL, *active_text = NULL;
	size_t up_len = 0, active_len = 0;
	FILE *up = open_memstream(&up_text, &up_len);
	FILE *active = open_memstream(&active_text, &active_len);
	unsigned enabled, exited;

	if (!up || !active) {
		if (up)
			fclose(up);
		if (active)
			fclose(active);
		free(up_text);
		free(active_text);
		return -ENOMEM;
	}
	targets_count(a->targets, &enabled, &exited);
	prom_family(out, "aperture_targets", "gauge", "Targets by state.");
	fprintf(out, "aperture_targets{state=\"enabled\"} %u\naperture_targets{state=\"exited\"} "
		"%u\n", enabled, exited);
	prom_value(out, "aperture_start_time_seconds", "gauge", "When the daemon started.",
		   a->started);
	prom_value(out, "aperture_sampling_frequency_hertz", "gauge", "config/frequency_hz.",
		   config_get(a, CONFIG_FREQUENCY_HZ));
	/* every collector the daemon lists: loaded, or not (status says why) */
	for (int i = 0; i < APERTURE_COLLECTORS; i++)
		if (a->collectors[i].ops)
			fprintf(up, "aperture_collector_up{collector=\"%s\"} %d\n",
				a->collectors[i].ops->name, a->collectors[i].self != NULL);
	cpu_metrics(a, out, active);
	offcpu_metrics(a, out, active);
	sys_metrics(a, out, active);
	jvm_metrics(a, out);
	fclose(up);
	fclose(active);
	prom_family(out, "aperture_collector_up", "gauge",
		    "1 when the collector loaded; 0: see status for why not.");
	fputs(up_text, out);
	prom_family(out, "aperture_collector_active", "gauge",
		    "1 while the collector is collecting (some target enabled).");
	fputs(active_text, out);
	free(up_text);
	free(active_text);
	prom_value(out, "aperture_symbol_cache_files", "gauge",
		   "Files whose symbols are cached.", symbolizer_cached_files(a->syms));
	sync_metrics(a, out);
	return 0;
}
