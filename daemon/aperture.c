#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/libbpf_version.h>
#include <elfutils/version.h>
#include "collectors/collector.h"
#include "collectors/cpu.h"
#include "collectors/jvm/hsperf_watch.h"
#include "collectors/jvm/jvm.h"
#include "collectors/offcpu.h"
#include "collectors/sys.h"
#include "daemon/aperture.h"
#include "daemon/rules.h"
#include "daemon/targets.h"
#include "daemon/value.h"
#include "symbols/symbols.h"
#include "sync/client.h"

/* Every collector, in the order they attach. A new one is a line here. */
static const struct collector_ops *const collector_list[APERTURE_COLLECTORS] = {
	&cpu_collector_ops, &offcpu_collector_ops, &syscalls_collector_ops,
	&locks_collector_ops, &jvm_collector_ops,
};

/* What a bare `echo 1 > enable` costs is what perf costs: cpu, and the agent of a JVM. */
#define DEFAULT_COLLECTORS (1u << 0 | 1u << 4)

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
	struct collector_env env = {
		.syms = a->syms,
		.frequency_hz = config_get(a, CONFIG_FREQUENCY_HZ),
		.offcpu_min_us = config_get(a, CONFIG_OFFCPU_MIN_US),
		.blocking_ms = config_get(a, CONFIG_BLOCKING_THRESHOLD_MS),
		/* APERTURE_JVM_AGENT points a test or an installed daemon at another agent. */
		.jvm_agent = getenv("APERTURE_JVM_AGENT") ?: APERTURE_JVM_AGENT,
		.jvm_alloc_interval = &a->config[CONFIG_JVM_ALLOC_INTERVAL],
		.jvm_attach = &a->config[CONFIG_JVM_ATTACH],
	};
	/* A collector that can't start (no BPF here, say) leaves the daemon running without
	 * it, its reason shown in status. */
	for (int i = 0; i < APERTURE_COLLECTORS; i++) {
		struct aperture_collector *c = &a->collectors[i];

		c->ops = collector_list[i];
		if (c->ops->create(&env, &c->self, c->error, sizeof(c->error)))
			c->self = NULL;
	}
	a->cpu = env.cpu;
	a->cpu_error = a->collectors[0].error;
	a->offcpu = a->collectors[1].self;
	a->sys = env.sys;
	/* The JVM views and thread dumps ask its sessions, which only memory can deny. */
	a->jvm = jvm_ops_collector(a->collectors[4].self);
	if (!a->jvm)
		return -ENOMEM;
	atomic_store(&a->default_collectors, DEFAULT_COLLECTORS);
	return targets_new(a, &a->targets);
}

int aperture_collectors_parse(const char *buf, size_t len, uint32_t *mask, char *why,
			      size_t whylen)
{
	char shown[64];
	size_t at = 0;

	*mask = 0;
	if (len && buf[len - 1] == '\n')
		len--;
	while (at < len) {
		size_t n = 0;
		int i;

		while (at < len && (buf[at] == ' ' || buf[at] == ','))
			at++;
		while (at + n < len && buf[at + n] != ' ' && buf[at + n] != ',')
			n++;
		if (!n)
			break;
		for (i = 0; i < APERTURE_COLLECTORS; i++)
			if (strlen(collector_list[i]->name) == n &&
			    !memcmp(collector_list[i]->name, buf + at, n))
				break;
		if (i < APERTURE_COLLECTORS)
			*mask |= 1u << i;
		else if (n == 3 && !memcmp(buf + at, "all", 3))
			*mask |= (1u << APERTURE_COLLECTORS) - 1;
		else
			goto bad;
		at += n;
	}
	if (*mask)
		return 0;
bad:
	value_quote(buf, len, shown, sizeof(shown));
	snprintf(why, whylen, "\"%s\" is not a list of cpu, offcpu, syscalls, locks, jvm or all",
		 shown);
	return -EINVAL;
}

void aperture_collectors_print(uint32_t mask, FILE *out)
{
	const char *sep = "";

	for (int i = 0; i < APERTURE_COLLECTORS; i++) {
		if (mask & 1u << i) {
			fprintf(out, "%s%s", sep, collector_list[i]->name);
			sep = " ";
		}
	}
	fputc('\n', out);
}

int aperture_read_collectors(struct aperture *a, FILE *out)
{
	aperture_collectors_print(atomic_load(&a->default_collectors), out);
	return 0;
}

int aperture_write_collectors(struct aperture *a, const char *buf, size_t len)
{
	char why[160];
	uint32_t mask;
	int err = aperture_collectors_parse(buf, len, &mask, why, sizeof(why));

	if (err) {
		aperture_set_error(a, "config/collectors: %s", why);
		return err;
	}
	atomic_store(&a->default_collectors, mask);
	return 0;
}

/* Moves what every collector gathered into the targets' stores, counted at second now. The
 * syscalls and locks collectors share one object, drained once. */
static void aperture_drain(struct aperture *a, int64_t now)
{
	for (int i = 0; i < APERTURE_COLLECTORS; i++) {
		struct aperture_collector *c = &a->collectors[i];
		int err;

		if (!c->self || !c->ops->drain)
			continue;
		err = c->ops->drain(c->self, now);
		if (err)
			aperture_set_error(a, "draining the %s collector: %s", c->ops->name,
					   strerror(-err));
	}
}

/* Drains at each whole second, so a bucket holds one second of samples. */
static void *loop_main(void *arg)
{
	struct aperture *a = arg;
	struct timespec next;

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

		aperture_drain(a, aperture_now());
		targets_tick(a->targets, aperture_now());
		if (a->rules)
			rules_tick(a->rules);
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
	/* Closing the collectors' links and perf events detaches every BPF program; offcpu and
	 * jvm name their stacks with cpu's: the reverse order of making them. */
	for (int i = APERTURE_COLLECTORS; i-- > 0;)
		if (a->collectors[i].self)
			a->collectors[i].ops->destroy(a->collectors[i].self);
	hsperf_watch_free(a->jvm_watch);
	symbolizer_free(a->syms);
	config_fini(a);
	pthread_cond_destroy(&a->loop_wake);
	pthread_mutex_destroy(&a->loop_lock);
	pthread_mutex_destroy(&a->error_lock);
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
	unsigned enabled, exited;

	targets_count(a->targets, &enabled, &exited);
	fprintf(out, "version: %s\n", APERTURE_VERSION);
	fprintf(out, "uptime_s: %lld\n", (long long)(aperture_now() - a->started));
	fprintf(out, "mountpoint: %s\n", a->mountpoint);
	fprintf(out, "targets_enabled: %u\ntargets_exited: %u\n", enabled, exited);
	fprintf(out, "frequency_hz: %llu\n",
		(unsigned long long)config_get(a, CONFIG_FREQUENCY_HZ));
	for (int i = 0; i < APERTURE_COLLECTORS; i++) {
		struct aperture_collector *c = &a->collectors[i];

		if (!c->self)
			fprintf(out, "%s: unavailable: %s\n", c->ops->name, c->error);
		else if (c->ops->status)
			c->ops->status(c->self, out);
	}
	aperture_jvm_status(a, out);
	if (a->rules)
		rules_status(a->rules, out);
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
		snprintf(buf, len, "the locks collector is unavailable: %s", a->collectors[3].error);
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
