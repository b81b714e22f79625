/* The daemon's core: settings, collectors, targets. The FUSE tree (fs/) reads and controls
 * the daemon only through this header, daemon/targets.h and daemon/config.h. */
#ifndef APERTURE_DAEMON_APERTURE_H
#define APERTURE_DAEMON_APERTURE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "daemon/config.h"

struct symbolizer;
struct collector_ops;
struct cpu_collector;
struct jvm_collector;
struct hsperf_watch;
struct offcpu_collector;
struct sys_collector;
struct targets;
struct sync_client;

/* The collectors, in the order they attach (cpu first: offcpu and jvm name through it); they
 * detach in the reverse order. */
#define APERTURE_COLLECTORS 5

struct aperture_collector {
	const struct collector_ops *ops;
	void *self;            /* NULL when unavailable; error says why */
	char error[256];
	_Atomic uint64_t attach_failures; /* enables and collector writes it failed */
};

struct aperture {
	int64_t started;          /* unix seconds */
	char mountpoint[4096];
	_Atomic uint64_t config[CONFIG_NR];
	pthread_mutex_t config_str_lock; /* config_str */
	char *config_str[CONFIG_NR];      /* values of string settings; NULL = "" */
	struct symbolizer *syms;
	struct aperture_collector collectors[APERTURE_COLLECTORS];
	_Atomic uint32_t default_collectors; /* config/collectors: bit i is collectors[i] */
	/* Typed handles of the collectors whose settings or views reach them alone (NULL when
	 * unavailable). */
	struct cpu_collector *cpu;
	const char *cpu_error;
	struct offcpu_collector *offcpu;
	struct sys_collector *sys;
	struct jvm_collector *jvm;
	struct targets *targets;
	struct hsperf_watch *jvm_watch; /* NULL when unavailable; jvm_watch_error says why */
	char jvm_watch_error[256];

	struct sync_client *sync;  /* remote sync (config/sync); NULL in a daemon without it */
	struct rules *rules;       /* config/rules; NULL in a daemon without them */
	/* The loop's drains are done with every second before this one: no collector adds to
	 * them any more (but the JVM's late Java frames, see sync/client.c). */
	_Atomic int64_t drained_until;

	pthread_mutex_t error_lock;
	char last_error[256];     /* of the daemon-wide files (config/) */

	pthread_t loop_thread;
	pthread_mutex_t loop_lock;
	pthread_cond_t loop_wake;
	bool loop_running, loop_stop;
};

/* Loads what the daemon needs. A collector that can't start (no BPF here, say) leaves the
 * daemon running without it, its reason shown in status. */
int aperture_init(struct aperture *a, const char *mountpoint);
/* Starts the once-a-second loop that drains collectors and ages targets, and the watch for
 * new JVMs. Call after any fork (daemonizing). */
int aperture_start(struct aperture *a);
void aperture_stop(struct aperture *a);
void aperture_fini(struct aperture *a);

/* Daemon-wide `last_error: ...` for status. printf-style. */
void aperture_set_error(struct aperture *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

int aperture_status(struct aperture *a, FILE *out);
/* status's figures in Prometheus text format (daemon/metrics.c). */
int aperture_metrics(struct aperture *a, FILE *out);

/* A set of collectors as written to config/collectors or targets/<pid>/collectors: words
 * (cpu, offcpu, syscalls, locks, jvm, or all) separated by spaces or commas, at least one.
 * -EINVAL with the reason in why. */
int aperture_collectors_parse(const char *buf, size_t len, uint32_t *mask, char *why,
			      size_t whylen);
/* The words of mask, space-separated, and a newline. */
void aperture_collectors_print(uint32_t mask, FILE *out);
int aperture_read_collectors(struct aperture *a, FILE *out);
int aperture_write_collectors(struct aperture *a, const char *buf, size_t len);

/* Why kernel lock contention is not collected, "" when it is (or may be, once enabled). */
void aperture_kernel_locks_error(struct aperture *a, char *buf, size_t len);
int aperture_version(FILE *out);

/* How pid is known to be a HotSpot JVM: "hsperfdata" (its perf data file was seen), "maps"
 * (libjvm.so is mapped: a JVM run with -XX:-UsePerfData), or NULL when it is not one. */
const char *aperture_jvm_found_by(struct aperture *a, pid_t pid);

/* Current unix time in seconds. */
int64_t aperture_now(void);
/* Unix seconds as ISO-8601 UTC, e.g. 2026-11-21T14:03:05Z. */
void aperture_format_time(int64_t t, char *buf, size_t len);

#endif
