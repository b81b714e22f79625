#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/libbpf_version.h>
#include <elfutils/version.h>
#include "collectors/cpu.h"
#include "collectors/jvm/hsperf_watch.h"
#include "collectors/jvm/jvm.h"
#include "collectors/offcpu.h"
#include "collectors/sys.h"
#include "daemon/aperture.h"
#include "daemon/targets.h"
#include "symbols/symbols.h"
#include "sync/client.h"

int64_t aperture_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec;
}

void aperture_format_time(int64_t t, char *buf, size_t len)
{
	time_t tt = t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void aperture_set_error(struct aperture *a, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&a->error_lock);
	va_start(ap, fmt);
	vsnprintf(a->last_error, sizeof(a->last_error), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&a->error_lock);
}

int aperture_init(struct aperture *a, const char *mountpoint)
{
	int err;

	memset(a, 0, sizeof(*a));
	a->started = aperture_now();
	snprintf(a->mountpoint, sizeof(a->mountpoint), "%s", mountpoint);
	pthread_mutex_init(&a->error_lock, NULL);
	pthread_mutex_init(&a->loop_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->loop_wake, &ca);
	pthread_condattr_destroy(&ca);
	config_init(a);

	err = symbolizer_new(&a->syms);
	if (err)
		return err;
	err = cpu_collector_new(a->syms, config_get(a, CONFIG_FREQUENCY_HZ), &a->cpu,
				a->cpu_error, sizeof(a->cpu_error));
	if (err)
		a->cpu = NULL;
	/* APERTURE_JVM_AGENT points a test or an installed daemon at another agent build. */
	err = jvm_collector_new(getenv("APERTURE_JVM_AGENT") ?: APERTURE_JVM_AGENT,
				&a->config[CONFIG_JVM_ALLOC_INTERVAL], a->cpu, &a->jvm);
	if (err)
		return err;
	if (!a->cpu)
		snprintf(a->offcpu_error, sizeof(a->offcpu_error), "needs the cpu collector");
	err = a->cpu ? offcpu_collector_new(a->cpu, &a->offcpu, a->offcpu_error,
					    sizeof(a->offcpu_error)) : -EOPNOTSUPP;
	if (err)
		a->offcpu = NULL;
	else
		offcpu_collector_set_limits(a->offcpu, config_get(a, CONFIG_OFFCPU_MIN_US),
					    config_get(a, CONFIG_BLOCKING_THRESHOLD_MS));
	err = sys_collector_new(a->syms, &a->sys, a->sys_error, sizeof(a->sys_error));
	if (err)
		a->sys = NULL;
	return targets_new(a, &a->targets);
}

/* Drains at each whole second, so a bucket holds one second of samples. */
static void *loop_main(void *arg)
{
	struct aperture *a = arg;
	struct timespec next;
	int err;

	clock_gettime(CLOCK_MONOTONIC, &next);
	pthread_mutex_lock(&a->loop_lock);
	while (!a->loop_stop) {
		next.tv_sec++;
		while (!a->loop_stop &&
		       pthread_cond_timedwait(&a->loop_wake, &a->loop_lock, &next) != ETIMEDOUT)
			;
		if (a->loop_stop)
			break;
		pthread_mutex_unlock(&a->loop_lock);
		/* Every drain below adds to this second or a later one. */
		int64_t started = aperture_now();

		if (a->cpu) {
			err = cpu_collector_drain(a->cpu, aperture_now());
			if (err)
				aperture_set_error(a, "draining cpu samples: %s", strerror(-err));
		}
		if (a->offcpu) {
			char workers[CONFIG_WORKERS_LEN];

			config_get_workers(a, workers);
			err = offcpu_collector_drain(a->offcpu, aperture_now(), workers);
			if (err)
				aperture_set_error(a, "draining off-CPU time: %s", strerror(-err));
		}
		if (a->sys) {
			err = sys_collector_drain(a->sys, aperture_now());
			if (err)
				aperture_set_error(a, "draining system calls: %s", strerror(-err));
		}
		targets_tick(a->targets, aperture_now());
		atomic_store(&a->drained_until, started);
		pthread_mutex_lock(&a->loop_lock);
	}
	pthread_mutex_unlock(&a->loop_lock);
	return NULL;
}

int aperture_start(struct aperture *a)
{
	int err;

	/* Without the watch, JVMs are still recognised by their mappings, when asked about. */
	if (hsperf_watch_new(&a->jvm_watch, a->jvm_watch_error, sizeof(a->jvm_watch_error)))
		a->jvm_watch = NULL;
	err = pthread_create(&a->loop_thread, NULL, loop_main, a);
	if (err)
		return -err;
	a->loop_running = true;
	return 0;
}

void aperture_stop(struct aperture *a)
{
	if (!a->loop_running)
		return;
	pthread_mutex_lock(&a->loop_lock);
	a->loop_stop = true;
	pthread_cond_signal(&a->loop_wake);
	pthread_mutex_unlock(&a->loop_lock);
	pthread_join(a->loop_thread, NULL);
	a->loop_running = false;
}

void aperture_fini(struct aperture *a)
{
	aperture_stop(a);
	targets_free(a->targets);
	jvm_collector_free(a->jvm);
	hsperf_watch_free(a->jvm_watch);
	/* Closing the collector's links and perf events detaches every BPF program. */
	/* offcpu names its stacks with cpu's: it goes first. */
	offcpu_collector_free(a->offcpu);
	cpu_collector_free(a->cpu);
	sys_collector_free(a->sys);
	symbolizer_free(a->syms);
	config_fini(a);
	pthread_cond_destroy(&a->loop_wake);
	pthread_mutex_destroy(&a->loop_lock);
	pthread_mutex_destroy(&a->error_lock);
}

static void aperture_status_offcpu(struct aperture *a, FILE *out)
{
	struct offcpu_collector_stats os = {0};

	if (!a->offcpu) {
		fprintf(out, "offcpu: unavailable: %s\n", a->offcpu_error);
		return;
	}
	offcpu_collector_get_stats(a->offcpu, &os);
	fprintf(out, "offcpu: %s\n", os.running ? "tracing sched_switch" : "idle");
	fprintf(out, "offcpu_waits: %llu\n", (unsigned long long)os.waits);
	fprintf(out, "offcpu_drops: %llu\n", (unsigned long long)(os.counts_full + os.start_full +
								    os.stacks_lost));
	fprintf(out, "offcpu_stacks_map_full: %llu\n", (unsigned long long)os.stacks_full);
	fprintf(out, "blocking_events_lost: %llu\n", (unsigned long long)os.events_lost);
}

static void aperture_sys_status(struct aperture *a, FILE *out)
{
	struct sys_collector_stats ss = {0};
	char why[160];

	if (!a->sys) {
		fprintf(out, "syscalls: unavailable: %s\n", a->sys_error);
		return;
	}
	sys_collector_get_stats(a->sys, &ss);
	sys_collector_kernel_locks_error(a->sys, why, sizeof(why));
	fprintf(out, "syscalls: %s\n", ss.attached ? "tracing" : "idle");
	fprintf(out, "syscalls_timed: %llu\n", (unsigned long long)ss.calls);
	fprintf(out, "syscalls_drops_map_full: %llu\n", (unsigned long long)ss.map_full);
	fprintf(out, "lock_stacks_lost: %llu\n", (unsigned long long)ss.stacks_full);
	if (why[0])
		fprintf(out, "kernel_locks: unavailable: %s\n", why);
	else
		fprintf(out, "kernel_locks: %s\n", ss.kernel_locks ? "tracing" : "idle");
}

static void aperture_jvm_status(struct aperture *a, FILE *out)
{
	struct hsperf_watch_stats ws;
	pid_t *pids;

	if (!a->jvm_watch) {
		fprintf(out, "jvms: unavailable: %s (found by their mappings only)\n",
			a->jvm_watch_error);
		return;
	}
	if (hsperf_watch_snapshot(a->jvm_watch, &ws, &pids)) {
		fprintf(out, "jvms: unavailable: out of memory\n");
		return;
	}
	fprintf(out, "jvms: %u (hsperfdata watch on %u root%s)\n", ws.jvms, ws.roots,
		ws.roots == 1 ? "" : "s");
	fprintf(out, "jvm_pids:%s", ws.jvms ? "" : " none");
	for (unsigned i = 0; i < ws.jvms; i++)
		fprintf(out, " %d", (int)pids[i]);
	fprintf(out, "\njvm_watch_folders: %u\n", ws.folders);
	fprintf(out, "jvm_watch_rescans: %llu\n", (unsigned long long)ws.rescans);
	fprintf(out, "jvm_watch_over_limit: %llu\n", (unsigned long long)ws.over_limit);
	free(pids);
}

int aperture_status(struct aperture *a, FILE *out)
{
	struct cpu_collector_stats cs = {0};
	unsigned enabled, exited;
	uint64_t drops;

	targets_count(a->targets, &enabled, &exited);
	if (a->cpu)
		cpu_collector_get_stats(a->cpu, &cs);
	drops = cs.counts_full + cs.stacks_full + cs.stacks_lost + cs.stacks_nomem +
		cs.ringbuf_full;
	fprintf(out, "version: %s\n", APERTURE_VERSION);
	fprintf(out, "uptime_s: %lld\n", (long long)(aperture_now() - a->started));
	fprintf(out, "mountpoint: %s\n", a->mountpoint);
	fprintf(out, "targets_enabled: %u\ntargets_exited: %u\n", enabled, exited);
	fprintf(out, "frequency_hz: %llu\n",
		(unsigned long long)config_get(a, CONFIG_FREQUENCY_HZ));
	if (!a->cpu)
		fprintf(out, "cpu: unavailable: %s\n", a->cpu_error);
	else
		fprintf(out, "cpu: %s\n", cs.running ? "sampling" : "idle");
	fprintf(out, "samples: %llu\n", (unsigned long long)cs.samples);
	fprintf(out, "drops: %llu\n", (unsigned long long)drops);
	fprintf(out, "drops_counts_map_full: %llu\n", (unsigned long long)cs.counts_full);
	fprintf(out, "drops_stacks_map_full: %llu\n", (unsigned long long)cs.stacks_full);
	fprintf(out, "drops_stack_lost: %llu\n", (unsigned long long)cs.stacks_lost);
	fprintf(out, "user_stack_errors: %llu\n", (unsigned long long)cs.ustack_errors);
	fprintf(out, "kernel_stack_errors: %llu\n", (unsigned long long)cs.kstack_errors);
	fprintf(out, "stack_maps_renewed: %llu\n", (unsigned long long)cs.stack_maps_renewed);
	fprintf(out, "drops_stacks_nomem: %llu\n", (unsigned long long)cs.stacks_nomem);
	fprintf(out, "drops_ringbuf_full: %llu\n", (unsigned long long)cs.ringbuf_full);
	fprintf(out, "stacks_spilled: %llu\n", (unsigned long long)cs.stacks_spilled);
	fprintf(out, "dwarf_samples: %llu\n", (unsigned long long)cs.dwarf_samples);
	aperture_status_offcpu(a, out);
	aperture_sys_status(a, out);
	aperture_jvm_status(a, out);
	fprintf(out, "symbol_cache_files: %zu\n", symbolizer_cached_files(a->syms));
	fprintf(out, "store_bytes: %zu\n", profile_store_bytes());
	sync_client_status(a->sync, out);
	pthread_mutex_lock(&a->error_lock);
	fprintf(out, "last_error: %s\n", a->last_error[0] ? a->last_error : "none");
	pthread_mutex_unlock(&a->error_lock);
	return 0;
}

void aperture_kernel_locks_error(struct aperture *a, char *buf, size_t len)
{
	if (!a->sys)
		snprintf(buf, len, "system call tracing is unavailable: %s", a->sys_error);
	else
		sys_collector_kernel_locks_error(a->sys, buf, len);
}

const char *aperture_jvm_found_by(struct aperture *a, pid_t pid)
{
	if (hsperf_watch_has(a->jvm_watch, pid))
		return "hsperfdata";
	return jvm_is_hotspot(pid) ? "maps" : NULL;
}

int aperture_version(FILE *out)
{
	fprintf(out, "aperture %s\n", APERTURE_VERSION);
	fprintf(out, "libbpf %d.%d\n", LIBBPF_MAJOR_VERSION, LIBBPF_MINOR_VERSION);
	fprintf(out, "elfutils 0.%d\n", _ELFUTILS_VERSION);
	return 0;
}
