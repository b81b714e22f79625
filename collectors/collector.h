/* The one interface the target registry (daemon/targets.c) and the daemon's loop
 * (daemon/aperture.c) drive collectors through. A collector is a .bpf.c and a .c that defines
 * a struct collector_ops; daemon/aperture.c lists it once, and it becomes a word of
 * config/collectors and targets/<pid>/collectors, a `collector_<name>:` line of each target's
 * status, and part of every enable, disable and drain.
 *
 * The registry calls attach and detach under no lock of its own: a detach drains the
 * target's last data, which waits for the kernel (an RCU grace period per swapped map), and
 * must not hold up readers of other targets. A collector's functions are thread-safe. */
#ifndef APERTURE_COLLECTORS_COLLECTOR_H
#define APERTURE_COLLECTORS_COLLECTOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct profile;
struct blocking_log;
struct sys_table;
struct symbolizer;
struct cpu_collector;
struct sys_collector;

/* What the daemon gives collectors when it makes them, in the order it lists them: the
 * cpu collector comes first, and those that name their stacks with it find it here. */
struct collector_env {
	struct symbolizer *syms;
	unsigned frequency_hz;
	uint64_t offcpu_min_us, blocking_ms;
	const _Atomic uint64_t *jvm_alloc_interval; /* live settings */
	const _Atomic uint64_t *jvm_attach;
	const char *jvm_agent;
	struct cpu_collector *cpu;  /* NULL until made, or when BPF is unavailable */
	struct sys_collector *sys;  /* shared by the syscalls and locks collectors */
};

/* One target, as an attach sees it: the process, and where its data goes (referenced by
 * the collector that fills it). */
struct collector_target {
	pid_t pid;
	uint64_t start_time;   /* tells the process apart from a later one with its pid */
	uid_t uid;
	gid_t gid;
	bool jvm;              /* a HotSpot JVM */
	struct profile *cpu, *offcpu, *locks;
	struct profile *jvm_alloc, *jvm_alloc_objects, *jvm_monitors;
	struct blocking_log *blocking;
	struct sys_table *sys;
};

/* One figure of the node's metrics file (daemon/metrics.c) in Prometheus' terms. Rows that
 * share a name are one family (the first row's type and help stand for it); label_key NULL:
 * a family without labels. */
struct collector_metric {
	const char *name, *type, *help;
	const char *label_key, *label_value;
	uint64_t value;
};

#define COLLECTOR_METRICS_MAX 16

/* What a collector reports to the node's metrics: whether it collects now and its own
 * figures (samples, drops by cause, ...). */
struct collector_metrics {
	bool active;           /* some target has it on */
	size_t n;
	struct collector_metric rows[COLLECTOR_METRICS_MAX];
};

/* Adds n rows to m; a collector has a fixed set, within COLLECTOR_METRICS_MAX. */
static inline void collector_metrics_add(struct collector_metrics *m,
					 const struct collector_metric *rows, size_t n)
{
	for (size_t i = 0; i < n && m->n < COLLECTOR_METRICS_MAX; i++)
		m->rows[m->n++] = rows[i];
}

struct collector_ops {
	const char *name;      /* its word in config/collectors */
	/* NULL, or what it costs every process on the node while any target has it on. */
	const char *node_cost;
	/* Loads what it needs, attaches nothing yet. -errno with the reason in errbuf: the
	 * daemon runs without it and says why. */
	int (*create)(struct collector_env *env, void **self, char *errbuf, size_t errlen);
	void (*destroy)(void *self);
	/* Starts collecting t. 0, -EOPNOTSUPP when it does not apply to t (errbuf says why;
	 * not an error: the JVM agent for a native process), or -errno with the reason. */
	int (*attach)(void *self, const struct collector_target *t, char *errbuf,
		      size_t errlen);
	/* Stops collecting pid after adding its last data, counted at second now: what it
	 * collected is final when this returns. Returns what the kernel dropped of pid's data
	 * during this attach. */
	uint64_t (*detach)(void *self, pid_t pid, int64_t now);
	/* Once a second: moves what was collected into the targets' stores. May be NULL. */
	int (*drain)(void *self, int64_t now);
	/* Drops of pid's data during the current attach (NULL: known only at detach). */
	uint64_t (*drops)(void *self, pid_t pid);
	/* Forgets what it kept of pid after a detach (for its status): the record is gone.
	 * May be NULL. */
	void (*forget)(void *self, pid_t pid);
	/* Extra `key: value` lines of a target's status (attached: it collects t now). May be
	 * NULL. */
	void (*target_status)(void *self, const struct collector_target *t, bool attached,
			      FILE *out);
	/* Daemon-wide `key: value` lines of /status. */
	void (*status)(void *self, FILE *out);
	/* Its state and figures for the node's metrics (aperture_<name>_*). May be NULL:
	 * the metrics then say only whether it loaded and how often attaching it failed. */
	void (*metrics)(void *self, struct collector_metrics *m);
};

extern const struct collector_ops cpu_collector_ops, offcpu_collector_ops,
	syscalls_collector_ops, locks_collector_ops, jvm_collector_ops;

/* The JVM collector's sessions (collectors/jvm/jvm.h) behind jvm_collector_ops' self. */
struct jvm_collector *jvm_ops_collector(void *self);

#endif
