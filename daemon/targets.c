#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uthash.h>
#include "collectors/collector.h"
#include "collectors/jvm/hsperf_watch.h"
#include "collectors/threads.h"
#include "daemon/aperture.h"
#include "daemon/cgroup_id.h"
#include "daemon/proc_identity.h"
#include "daemon/rules.h"
#include "daemon/targets.h"
#include "daemon/value.h"
#include "store/thread_cpu.h"
#include "symbols/procmaps.h"

struct target {
	pid_t pid;
	struct proc_identity id;
	enum target_state state;
	int64_t since, expires, exited_at;
	struct profile *profiles[TARGET_PROFILE_NR];
	struct blocking_log *blocking;
	struct sys_table *sys;   /* system calls and lock waits */
	/* Collectors, bit i being a->collectors[i]: the chosen set (its own, written to its
	 * collectors file, or config/collectors' at its last enable), and those attached now. */
	uint32_t collectors, attached;
	bool own_collectors;
	uint64_t drops[APERTURE_COLLECTORS]; /* kernel-side drops of the last attach */
	char collector_error[APERTURE_COLLECTORS][160]; /* why it is not attached */
	/* Its collectors are being attached or detached, outside the registry's lock: the
	 * record stays, and other writes to it wait (targets.idle). */
	bool busy;
	bool own_window;         /* window_s set by the target's window file, not config's */
	uint64_t window_s;
	struct profile_snapshot *baselines[TARGET_PROFILE_NR]; /* all NULL: no baseline */
	int64_t baseline_at;
	bool jvm;                /* a HotSpot JVM when last enabled */
	struct thread_cpu *thread_cpu; /* threads' CPU time, once a second while enabled */
	char last_error[256];
	/* Rules (daemon/rules.h): the rule that enabled it (0: the user did, or nobody), an
	 * explicit `echo 0 > enable` (no rule enables it again), and the labels rules set. */
	int enabled_by_rule;
	bool user_off;
	char labels[1024];
	char cgroup[512];        /* at first sight: an exited process's is gone from /proc */
	UT_hash_handle hh;
};

struct targets {
	struct aperture *a;
	pthread_mutex_t lock;    /* the table and every record */
	pthread_cond_t idle;     /* a record stopped being busy */
	struct target *by_pid;
};

static const char *const state_names[] = {
	[TARGET_DISABLED] = "disabled",
	[TARGET_ENABLED] = "enabled",
	[TARGET_EXPIRED] = "expired",
	[TARGET_EXITED] = "exited",
	[TARGET_STOPPING] = "stopping",
};

static const char *const profile_units[TARGET_PROFILE_NR] = {
	[TARGET_PROFILE_CPU] = "samples",
	[TARGET_PROFILE_JVM_ALLOC] = "bytes",
	[TARGET_PROFILE_JVM_ALLOC_OBJECTS] = "samples",
	[TARGET_PROFILE_JVM_MONITORS] = "microseconds",
	[TARGET_PROFILE_OFFCPU] = "microseconds",
	[TARGET_PROFILE_LOCKS] = "microseconds",
};

int targets_new(struct aperture *a, struct targets **out)
{
	struct targets *ts = calloc(1, sizeof(*ts));

	if (!ts)
		return -ENOMEM;
	ts->a = a;
	pthread_mutex_init(&ts->lock, NULL);
	pthread_cond_init(&ts->idle, NULL);
	*out = ts;
	return 0;
}

static void baselines_drop(struct target *t)
{
	for (int i = 0; i < TARGET_PROFILE_NR; i++) {
		profile_snapshot_free(t->baselines[i]);
		t->baselines[i] = NULL;
	}
}

static void target_free(struct target *t)
{
	baselines_drop(t);
	blocking_log_unref(t->blocking);
	sys_table_unref(t->sys);
	thread_cpu_free(t->thread_cpu);
	/* Last: the store hands freed memory back when the last profile goes. */
	for (int i = 0; i < TARGET_PROFILE_NR; i++)
		profile_unref(t->profiles[i]);
	free(t);
}

/* What an attach or detach outside the registry's lock reports back. */
struct collector_outcome {
	uint32_t attached;        /* attached by it */
	int failed;               /* index of the collector whose error is returned */
	uint64_t drops[APERTURE_COLLECTORS];
	char why[APERTURE_COLLECTORS][160]; /* why not attached ("not a JVM"), or the error */
};

/* Detaches the collectors of mask from pid, last to first (the JVM's Java frames go to cpu
 * before it stops). Called without the registry's lock but where a record goes. */
static void detach_set(struct aperture *a, pid_t pid, uint32_t mask, int64_t now,
		       struct collector_outcome *o)
{
	for (int i = APERTURE_COLLECTORS; i-- > 0;)
		if (mask & 1u << i)
			o->drops[i] = a->collectors[i].ops->detach(a->collectors[i].self, pid, now);
}

/* Only a record that is not busy goes (at shutdown, none is). A record that goes while
 * enabled (its pid was reused before a tick saw the exit) detaches under the lock. */
static void target_drop_locked(struct targets *ts, struct target *t)
{
	struct collector_outcome o;

	detach_set(ts->a, t->pid, t->attached, aperture_now(), &o);
	for (int i = 0; i < APERTURE_COLLECTORS; i++) {
		struct aperture_collector *c = &ts->a->collectors[i];

		if (c->self && c->ops->forget)
			c->ops->forget(c->self, t->pid);
	}
	HASH_DEL(ts->by_pid, t);
	target_free(t);
}

void targets_free(struct targets *ts)
{
	struct target *t, *tmp;

	if (!ts)
		return;
	HASH_ITER(hh, ts->by_pid, t, tmp)
		target_drop_locked(ts, t);
	pthread_cond_destroy(&ts->idle);
	pthread_mutex_destroy(&ts->lock);
	free(ts);
}

/* The record of pid, if it still describes the process that has that pid now: a record of an
 * exited process whose pid was reused is dropped. *live tells whether pid is a live process
 * (its identity in *id). */
static struct target *resolve_locked(struct targets *ts, pid_t pid, struct proc_identity *id,
				     bool *live)
{
	struct target *t;

	*live = proc_identity_read(pid, id) == 0;
	HASH_FIND_INT(ts->by_pid, &pid, t);
	if (t && *live && !proc_identity_same(&t->id, id) && !t->busy) {
		target_drop_locked(ts, t);
		t = NULL;
	}
	return t;
}

/* The record of pid, NULL for a live process without one; -ENOENT if neither. */
static int find_locked(struct targets *ts, pid_t pid, struct target **out)
{
	struct proc_identity id;
	bool live;

	*out = resolve_locked(ts, pid, &id, &live);
	return *out || live ? 0 : -ENOENT;
}

/* The record of pid, made if pid is a live process without one. */
static int get_record_locked(struct targets *ts, pid_t pid, struct target **out)
{
	struct proc_identity id;
	struct target *t;
	bool live;

	t = resolve_locked(ts, pid, &id, &live);
	if (!t) {
		if (!live)
			return -ENOENT;
		t = calloc(1, sizeof(*t));
		if (!t)
			return -ENOMEM;
		t->pid = pid;
		t->id = id;
		t->state = TARGET_DISABLED;
		t->since = aperture_now();
		proc_cgroup_path(pid, t->cgroup, sizeof(t->cgroup));
		HASH_ADD_INT(ts->by_pid, pid, t);
	}
	*out = t;
	return 0;
}

int targets_info(struct targets *ts, pid_t pid, struct target_info *out)
{
	struct proc_identity id;
	struct target *t;
	bool live;
	int err = 0;

	pthread_mutex_lock(&ts->lock);
	t = resolve_locked(ts, pid, &id, &live);
	if (t)
		id = t->id;
	if (!t && !live) {
		err = -ENOENT;
		goto out;
	}
	out->ruid = id.ruid;
	out->euid = id.euid;
	out->suid = id.suid;
	out->rgid = id.rgid;
	out->state = t ? t->state : TARGET_DISABLED;
	memcpy(out->comm, id.comm, sizeof(out->comm));
	out->since = t ? t->since : 0;
out:
	pthread_mutex_unlock(&ts->lock);
	return err;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

struct pid_list {
	pid_t *v;
	size_t len, cap;
};

static int pid_list_push(struct pid_list *l, pid_t pid)
{
	if (l->len == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;
		pid_t *bigger = realloc(l->v, cap * sizeof(*l->v));

		if (!bigger)
			return -ENOMEM;
		l->v = bigger;
		l->cap = cap;
	}
	l->v[l->len++] = pid;
	return 0;
}

int targets_list(struct targets *ts, pid_t **pids, size_t *n)
{
	struct pid_list l = {0};
	struct target *t, *tmp;
	struct dirent *de;
	DIR *proc;
	int err = 0;

	proc = opendir("/proc");
	if (!proc)
		return -errno;
	/* /proc lists each process once, by its main thread: threads are not listed. */
	while (!err && (de = readdir(proc))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (!*end && pid > 0)
			err = pid_list_push(&l, pid);
	}
	closedir(proc);
	/* A listing is where containers come into view: their /tmp gets watched for JVMs. */
	if (!err)
		hsperf_watch_note(ts->a->jvm_watch, l.v, l.len);
	pthread_mutex_lock(&ts->lock);
	HASH_ITER(hh, ts->by_pid, t, tmp)
		if (!err && t->state == TARGET_EXITED)
			err = pid_list_push(&l, t->pid);
	pthread_mutex_unlock(&ts->lock);
	if (err) {
		free(l.v);
		return err;
	}
	if (l.len)
		qsort(l.v, l.len, sizeof(*l.v), cmp_pid);
	*n = 0;
	for (size_t i = 0; i < l.len; i++)
		if (*n == 0 || l.v[*n - 1] != l.v[i])
			l.v[(*n)++] = l.v[i];
	*pids = l.v;
	return 0;
}

static void target_error(struct target *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void target_error(struct target *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t->last_error, sizeof(t->last_error), fmt, ap);
	va_end(ap);
}

static int profiles_ensure(struct target *t)
{
	for (int i = 0; i < TARGET_PROFILE_NR; i++) {
		if (!t->profiles[i])
			t->profiles[i] = profile_new(profile_units[i]);
		if (!t->profiles[i])
			return -ENOMEM;
	}
	if (!t->blocking)
		t->blocking = blocking_log_new();
	if (!t->sys)
		t->sys = sys_table_new();
	return t->blocking && t->sys ? 0 : -ENOMEM;
}

static uint64_t monotonic_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000ULL + ts.tv_nsec / 1000;
}

/* Records t's threads' CPU time now; restart: as the new base of an empty history. A process
 * that cannot be read now just misses a second. */
static void thread_cpu_sample_locked(struct target *t, bool restart)
{
	struct thread_list l;

	if (!t->thread_cpu && !(t->thread_cpu = thread_cpu_new()))
		return;
	if (threads_read(t->pid, THREADS_BASIC, &l))
		return;
	if (restart)
		thread_cpu_reset(t->thread_cpu, &l, monotonic_us());
	else
		thread_cpu_record(t->thread_cpu, &l, monotonic_us());
	threads_free(&l);
}

/* Where one enable's data goes: a new enable is a new profile, so each enable gets new ones,
 * installed only once every collector it chose is attached (a failed enable loses nothing). */
struct sinks {
	struct profile *profiles[TARGET_PROFILE_NR];
	struct blocking_log *blocking;
	struct sys_table *sys;
};

static void sinks_free(struct sinks *s)
{
	for (int i = 0; i < TARGET_PROFILE_NR; i++)
		profile_unref(s->profiles[i]);
	blocking_log_unref(s->blocking);
	sys_table_unref(s->sys);
}

static int sinks_new(struct sinks *s)
{
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < TARGET_PROFILE_NR; i++)
		if (!(s->profiles[i] = profile_new(profile_units[i])))
			goto fail;
	s->blocking = blocking_log_new();
	s->sys = sys_table_new();
	if (s->blocking && s->sys)
		return 0;
fail:
	sinks_free(s);
	return -ENOMEM;
}

/* What a collector's attach gets of t: its identity, and where its data goes. */
static void collector_target_of(const struct target *t, const struct sinks *s, bool jvm,
				struct collector_target *ct)
{
	*ct = (struct collector_target){
		.pid = t->pid,
		.start_time = t->id.start_time,
		.uid = t->id.euid,
		.gid = t->id.rgid,
		.jvm = jvm,
		.cpu = s->profiles[TARGET_PROFILE_CPU],
		.offcpu = s->profiles[TARGET_PROFILE_OFFCPU],
		.locks = s->profiles[TARGET_PROFILE_LOCKS],
		.jvm_alloc = s->profiles[TARGET_PROFILE_JVM_ALLOC],
		.jvm_alloc_objects = s->profiles[TARGET_PROFILE_JVM_ALLOC_OBJECTS],
		.jvm_monitors = s->profiles[TARGET_PROFILE_JVM_MONITORS],
		.blocking = s->blocking,
		.sys = s->sys,
	};
}

/* Attaches the collectors of want to ct, first to last. One that does not apply to ct
 * (-EOPNOTSUPP) is left out with its reason. On an error, detaches what it attached and
 * returns the error, o->failed saying whose. Called without the registry's lock. */
static int attach_set(struct aperture *a, const struct collector_target *ct, uint32_t want,
		      int64_t now, struct collector_outcome *o)
{
	int err;

	for (int i = 0; i < APERTURE_COLLECTORS; i++) {
		struct aperture_collector *c = &a->collectors[i];

		if (!(want & 1u << i))
			continue;
		o->why[i][0] = '\0';
		if (!c->self) {
			snprintf(o->why[i], sizeof(o->why[i]), "unavailable: %s", c->error);
			err = -EOPNOTSUPP;
		} else {
			err = c->ops->attach(c->self, ct, o->why[i], sizeof(o->why[i]));
			if (err == -EOPNOTSUPP)
				continue;
		}
		if (err) {
			atomic_fetch_add(&c->attach_failures, 1);
			o->failed = i;
			for (int j = i; j-- > 0;)
				if (o->attached & 1u << j)
					a->collectors[j].ops->detach(a->collectors[j].self, ct->pid,
								     now);
			o->attached = 0;
			return err;
		}
		o->attached |= 1u << i;
	}
	return 0;
}

/* A record whose collectors are attached or detached is busy: the registry's lock is let
 * go meanwhile, so that a detach, which waits for the kernel, holds up no reader of another
 * target. A busy record stays (nothing drops it) and other writes to it wait. Returns with
 * the lock held again. */
static void busy_begin(struct targets *ts, struct target *t)
{
	t->busy = true;
	pthread_mutex_unlock(&ts->lock);
}

static void busy_end(struct targets *ts, struct target *t)
{
	pthread_mutex_lock(&ts->lock);
	t->busy = false;
	pthread_cond_broadcast(&ts->idle);
}

/* The record of pid, made if needed, once no other write is attaching or detaching its
 * collectors. */
static int writable_record_locked(struct targets *ts, pid_t pid, struct target **out)
{
	int err;

	while (!(err = get_record_locked(ts, pid, out)) && (*out)->busy)
		pthread_cond_wait(&ts->idle, &ts->lock);
	return err;
}

static void collector_error(struct aperture *a, struct target *t, const char *during,
			    const struct collector_outcome *o)
{
	target_error(t, "%s: %s collector: %s", during, a->collectors[o->failed].ops->name,
		     o->why[o->failed]);
}

/* Enables a disabled target: a new profile, with the collectors it chose. */
static int enable_locked(struct targets *ts, struct target *t, uint64_t duration)
{
	struct aperture *a = ts->a;
	struct collector_outcome o = {0};
	struct collector_target ct;
	struct profile_snapshot *empty;
	struct sinks fresh, old;
	uint32_t want;
	int64_t now;
	bool jvm;
	int err;

	if (sinks_new(&fresh)) {
		target_error(t, "enable: out of memory");
		return -ENOMEM;
	}
	want = t->own_collectors ? t->collectors : atomic_load(&a->default_collectors);
	busy_begin(ts, t);
	now = aperture_now();
	jvm = aperture_jvm_found_by(a, t->pid) != NULL;
	/* A container enabled before targets/ was listed gets its /tmp watched too. */
	hsperf_watch_note(a->jvm_watch, &t->pid, 1);
	collector_target_of(t, &fresh, jvm, &ct);
	err = attach_set(a, &ct, want, now, &o);
	busy_end(ts, t);
	if (err) {
		sinks_free(&fresh);
		collector_error(a, t, "enable", &o);
		return err;
	}
	memcpy(old.profiles, t->profiles, sizeof(old.profiles));
	old.blocking = t->blocking;
	old.sys = t->sys;
	memcpy(t->profiles, fresh.profiles, sizeof(t->profiles));
	t->blocking = fresh.blocking;
	t->sys = fresh.sys;
	sinks_free(&old);
	t->collectors = want;
	t->attached = o.attached;
	memcpy(t->collector_error, o.why, sizeof(t->collector_error));
	memset(t->drops, 0, sizeof(t->drops));
	t->jvm = jvm;
	t->state = TARGET_ENABLED;
	/* The second the new profiles begin, so that status and every view say the same. */
	t->since = profile_snapshot(t->profiles[TARGET_PROFILE_CPU], 0, &empty) ? now
										: empty->since;
	profile_snapshot_free(empty);
	t->expires = duration ? now + (int64_t)duration : 0;
	/* Like the profiles, the threads' history runs from the enable or a reset. */
	thread_cpu_sample_locked(t, true);
	/* Mappings we may not read: profiled all the same, as perf does, unnamed. */
	err = procmaps_check_access(t->pid);
	if (err)
		target_error(t, "enable: /proc/%d/maps: %s (ptrace read access refused): "
			     "frames are [unknown]", (int)t->pid, strerror(-err));
	return 0;
}

/* Stops an enabled target's collectors, outside the lock; it is then in state to. */
static void disable_locked(struct targets *ts, struct target *t, enum target_state to)
{
	struct collector_outcome o = {0};
	uint32_t mask = t->attached;
	int64_t now;

	/* Readers see it stop at once (sync ships no more of its live state); the state it
	 * goes to is shown once its data is final. */
	t->state = TARGET_STOPPING;
	busy_begin(ts, t);
	now = aperture_now();
	detach_set(ts->a, t->pid, mask, now, &o);
	busy_end(ts, t);
	for (int i = 0; i < APERTURE_COLLECTORS; i++)
		if (mask & 1u << i)
			t->drops[i] = o.drops[i];
	t->attached = 0;
	t->state = to;
	t->since = now;
	t->expires = 0;
}

int targets_write_enable(struct targets *ts, pid_t pid, const char *buf, size_t len)
{
	uint64_t duration;
	char shown[64];
	struct target *t;
	int err, on;

	pthread_mutex_lock(&ts->lock);
	err = writable_record_locked(ts, pid, &t);
	if (err)
		goto out;
	err = value_parse_enable(buf, len, &on, &duration);
	if (err) {
		value_quote(buf, len, shown, sizeof(shown));
		if (err == -ERANGE)
			target_error(t, "enable: \"%s\": a duration runs from 1s to 7d", shown);
		else
			target_error(t, "enable: \"%s\" is not 0, 1 or a duration (30s, 5m, 2h, 1d)",
				     shown);
		goto out;
	}
	if (t->state == TARGET_EXITED) {
		err = -ESRCH;
		target_error(t, "enable: process %d has exited", (int)pid);
		goto out;
	}
	/* The user's word is final: no rule enables it again, and an enable is the user's. */
	t->user_off = !on;
	t->enabled_by_rule = 0;
	if (!on) {
		if (t->state == TARGET_ENABLED)
			disable_locked(ts, t, TARGET_DISABLED);
		t->expires = 0;
	} else if (t->state == TARGET_ENABLED) {
		/* Enabled already: the same profile goes on, with a new expiry. */
		t->expires = duration ? aperture_now() + (int64_t)duration : 0;
	} else {
		err = enable_locked(ts, t, duration);
	}
out:
	pthread_mutex_unlock(&ts->lock);
	return err;
}

/* t's set (its own, or the one it is enabled with), else what its next enable gets. */
static uint32_t collectors_of(struct targets *ts, const struct target *t)
{
	return t && (t->own_collectors || t->state == TARGET_ENABLED ||
		     t->state == TARGET_STOPPING) ?
		       t->collectors : atomic_load(&ts->a->default_collectors);
}

int targets_write_collectors(struct targets *ts, pid_t pid, const char *buf, size_t len)
{
	struct aperture *a = ts->a;
	struct collector_outcome o = {0};
	struct collector_target ct;
	struct sinks now_sinks;
	uint32_t want, add, remove;
	struct target *t;
	char why[160];
	int64_t now;
	int err;

	pthread_mutex_lock(&ts->lock);
	err = writable_record_locked(ts, pid, &t);
	if (err)
		goto out;
	err = aperture_collectors_parse(buf, len, &want, why, sizeof(why));
	if (err) {
		target_error(t, "collectors: %s", why);
		goto out;
	}
	if (t->state != TARGET_ENABLED) {
		t->collectors = want;
		t->own_collectors = true;
		goto out;
	}
	/* Enabled: the change applies now, to the profile of this enable. */
	add = want & ~t->collectors;
	remove = t->attached & ~want;
	memcpy(now_sinks.profiles, t->profiles, sizeof(now_sinks.profiles));
	now_sinks.blocking = t->blocking;
	now_sinks.sys = t->sys;
	collector_target_of(t, &now_sinks, t->jvm, &ct);
	busy_begin(ts, t);
	now = aperture_now();
	err = attach_set(a, &ct, add, now, &o);
	if (!err)
		detach_set(a, pid, remove, now, &o);
	busy_end(ts, t);
	if (err) {
		collector_error(a, t, "collectors", &o);
		goto out;
	}
	for (int i = 0; i < APERTURE_COLLECTORS; i++) {
		if (add & 1u << i)
			memcpy(t->collector_error[i], o.why[i], sizeof(o.why[i]));
		if (remove & 1u << i)
			t->drops[i] = o.drops[i];
	}
	t->attached = (t->attached & ~remove) | o.attached;
	t->collectors = want;
	t->own_collectors = true;
out:
	pthread_mutex_unlock(&ts->lock);
	return err;
}

int targets_read_collectors(struct targets *ts, pid_t pid, FILE *out)
{
	struct target *t;
	uint32_t mask;
	int err;

	pthread_mutex_lock(&ts->lock);
	err = find_locked(ts, pid, &t);
	mask = collectors_of(ts, t);
	pthread_mutex_unlock(&ts->lock);
	if (!err)
		aperture_collectors_print(mask, out);
	return err;
}

int targets_write_reset(struct targets *ts, pid_t pid, const char *buf, size_t len)
{
	struct target *t;
	uint64_t v;
	char shown[64];
	int err;

	pthread_mutex_lock(&ts->lock);
	err = get_record_locked(ts, pid, &t);
	if (err)
		goto out;
	err = value_parse_uint(buf, len, 1, 1, &v);
	if (err) {
		value_quote(buf, len, shown, sizeof(shown));
		target_error(t, "reset: \"%s\": write 1 to forget what was collected", shown);
		err = -EINVAL;
		goto out;
	}
	for (int i = 0; i < TARGET_PROFILE_NR; i++)
		if (t->profiles[i])
			profile_reset(t->profiles[i]);
	if (t->blocking)
		blocking_log_reset(t->blocking);
	if (t->sys)
		sys_table_reset(t->sys);
	if (t->thread_cpu)
		thread_cpu_sample_locked(t, true);
	memset(t->drops, 0, sizeof(t->drops));
out:
	pthread_mutex_unlock(&ts->lock);
	return err;
}

static uint64_t window_locked(struct targets *ts, const struct target *t)
{
	return t && t->own_window ? t->window_s : config_get(ts->a, CONFIG_WINDOW_S);
}

/* The first second a snapshot over window_s covers: the last window_s whole seconds and
 * the current one, whose samples arrive at its drain (0 = everything kept). */
static int64_t window_since(uint64_t window_s)
{
	return window_s ? aperture_now() - (int64_t)window_s : 0;
}

int targets_write_window(struct targets *ts, pid_t pid, const char *buf, size_t len)
{
	struct target *t;
	uint64_t v = 0;
	char shown[64];
	int global, err;

	pthread_mutex_lock(&ts->lock);
	err = get_record_locked(ts, pid, &t);
	if (err)
		goto out;
	err = value_parse_window(buf, len, PROFILE_HISTORY_S, &global, &v);
	if (err) {
		value_quote(buf, len, shown, sizeof(shown));
		if (err == -ERANGE)
			target_error(t, "window: \"%s\": the store keeps %d seconds", shown,
				     PROFILE_HISTORY_S);
		else
			target_error(t, "window: \"%s\" is not \"global\" or a number of seconds",
				     shown);
		goto out;
	}
	t->own_window = !global;
	t->window_s = v;
out:
	pthread_mutex_unlock(&ts->lock);
	return err;
}

int targets_write_baseline(struct targets *ts, pid_t pid, const char *buf, size_t len)
{
	struct profile_snapshot *copies[TARGET_PROFILE_NR] = {0};
	struct target *t;
	char shown[64];
	int64_t since;
	uint64_t v;
	int err;

	pthread_mutex_lock(&ts->lock);
	err = get_record_locked(ts, pid, &t);
	if (err)
		goto out;
	err = value_parse_uint(buf, len, 0, 1, &v);
	if (err) {
		value_quote(buf, len, shown, sizeof(shown));
		target_error(t, "baseline: \"%s\": write 1 to keep the profile, 0 to drop it",
			     shown);
		err = -EINVAL;
		goto out;
	}
	if (v) {
		err = profiles_ensure(t);
		since = window_since(window_locked(ts, t));
		for (int i = 0; !err && i < TARGET_PROFILE_NR; i++)
			err = profile_snapshot(t->profiles[i], since, &copies[i]);
		if (err) {
			for (int i = 0; i < TARGET_PROFILE_NR; i++)
				profile_snapshot_free(copies[i]);
			target_error(t, "baseline: out of memory");
			goto out;
		}
	}
	baselines_drop(t);
	memcpy(t->baselines, copies, sizeof(copies));
	t->baseline_at = v ? aperture_now() : 0;
out:
	pthread_mutex_unlock(&ts->lock);
	return err;
}

int targets_read_window(struct targets *ts, pid_t pid, FILE *out)
{
	struct target *t;
	int err;

	pthread_mutex_lock(&ts->lock);
	err = find_locked(ts, pid, &t);
	if (!err && t && t->own_window)
		fprintf(out, "%llu\n", (unsigned long long)t->window_s);
	else if (!err)
		fprintf(out, "global\n");
	pthread_mutex_unlock(&ts->lock);
	return err;
}

int targets_read_baseline(struct targets *ts, pid_t pid, FILE *out)
{
	struct target *t;
	int err;

	pthread_mutex_lock(&ts->lock);
	err = find_locked(ts, pid, &t);
	if (!err)
		fprintf(out, "%d\n", t && t->baseline_at);
	pthread_mutex_unlock(&ts->lock);
	return err;
}

int targets_window_s(struct targets *ts, pid_t pid, int64_t *out)
{
	struct target *t;
	int err;

	pthread_mutex_lock(&ts->lock);
	err = find_locked(ts, pid, &t);
	if (!err)
		*out = window_locked(ts, t);
	pthread_mutex_unlock(&ts->lock);
	return err;
}

int targets_read_enable(struct targets *ts, pid_t pid, FILE *out)
{
	struct target_info info;
	int err = targets_info(ts, pid, &info);

	if (err)
		return err;
	fprintf(out, "%d\n", info.state == TARGET_ENABLED);
	return 0;
}

static void print_time(FILE *out, const char *key, int64_t t)
{
	char when[32];

	aperture_format_time(t, when, sizeof(when));
	fprintf(out, "%s: %s\n", key, when);
}

/* One line per collector: on (and what it costs the node), off (and why, when it was
 * chosen but does not apply), or unavailable. */
static void print_collectors(struct aperture *a, const struct target *t, FILE *out)
{
	for (int i = 0; i < APERTURE_COLLECTORS; i++) {
		const struct aperture_collector *c = &a->collectors[i];
		uint32_t bit = 1u << i;

		fprintf(out, "collector_%s: ", c->ops->name);
		if (!c->self)
			fprintf(out, "unavailable: %s\n", c->error);
		else if (t && t->attached & bit && c->ops->node_cost)
			fprintf(out, "on (costs the whole node: %s)\n", c->ops->node_cost);
		else if (t && t->attached & bit)
			fprintf(out, "on\n");
		else if (t && t->state == TARGET_ENABLED && t->collectors & bit &&
			 t->collector_error[i][0])
			fprintf(out, "off: %s\n", t->collector_error[i]);
		else
			fprintf(out, "off\n");
	}
}

static void print_enabled_by(FILE *out, const struct target *t)
{
	if (!t || t->state == TARGET_DISABLED || t->state == TARGET_EXITED)
		fprintf(out, "enabled_by: %s\n", t && t->user_off ? "none (disabled by the user)"
									: "none");
	else if (t->enabled_by_rule)
		fprintf(out, "enabled_by: rule %d\n", t->enabled_by_rule);
	else
		fprintf(out, "enabled_by: user\n");
}

/* The node's labels (config/labels) with those rules set on t over them. */
static void target_labels(struct targets *ts, const struct target *t, char *out, size_t size)
{
	config_get_labels(ts->a, out, size);
	if (t && labels_merge(out, size, t->labels))
		snprintf(out, size, "%s", t->labels);
}

/* Where it runs: its cgroup, and the container and pod the cgroup names. */
static void print_identity(struct targets *ts, FILE *out, pid_t pid, const struct target *t,
			   bool live)
{
	char cgroup[512], labels[1024];
	struct cgroup_id cid;

	if (!live || proc_cgroup_path(pid, cgroup, sizeof(cgroup)))
		snprintf(cgroup, sizeof(cgroup), "%s", t ? t->cgroup : "");
	cgroup_id_parse(cgroup, &cid);
	fprintf(out, "cgroup: %s\n", cgroup[0] ? cgroup : "unknown");
	if (cid.container_id[0])
		fprintf(out, "container_id: %s\n", cid.container_id);
	if (cid.pod_uid[0])
		fprintf(out, "pod_uid: %s\n", cid.pod_uid);
	if (cid.qos_class)
		fprintf(out, "qos_class: %s\n", cid.qos_class);
	target_labels(ts, t, labels, sizeof(labels));
	fprintf(out, "labels: %s\n", labels[0] ? labels : "none");
}

int targets_status(struct targets *ts, pid_t pid, FILE *out)
{
	struct aperture *a = ts->a;
	struct profile_stats ps = {0};
	struct proc_identity id;
	struct collector_target ct;
	struct sinks none = {0};
	const char *found_by;
	struct target *t;
	bool live;
	uint64_t drops;
	int err = 0;

	pthread_mutex_lock(&ts->lock);
	t = resolve_locked(ts, pid, &id, &live);
	if (!t && !live) {
		err = -ENOENT;
		goto out;
	}
	/* A live process's comm is read now: exec changes it. */
	if (t && !live)
		id = t->id;
	fprintf(out, "pid: %d\ncomm: %s\n", (int)pid, id.comm);
	fprintf(out, "state: %s\n", state_names[t ? t->state : TARGET_DISABLED]);
	print_enabled_by(out, t);
	if (t)
		print_time(out, "since", t->since);
	if (t && t->expires)
		print_time(out, "expires", t->expires);
	else
		fprintf(out, "expires: never\n");
	if (t && t->state == TARGET_EXITED)
		print_time(out, "retained_until",
			   t->since + (int64_t)config_get(a, CONFIG_RETAIN_EXITED_S));
	found_by = live ? aperture_jvm_found_by(a, pid) : NULL;
	fprintf(out, "runtime: %s\n", (t && t->jvm) || found_by ? "jvm" : "native");
	if (found_by)
		fprintf(out, "jvm_found_by: %s\n", found_by);
	fprintf(out, "collectors: ");
	aperture_collectors_print(collectors_of(ts, t), out);
	print_collectors(a, t, out);
	if (t)
		collector_target_of(t, &none, t->jvm, &ct);
	else
		ct = (struct collector_target){ .pid = pid };
	for (int i = 0; i < APERTURE_COLLECTORS; i++) {
		struct aperture_collector *c = &a->collectors[i];

		if (c->self && c->ops->target_status)
			c->ops->target_status(c->self, &ct, t && t->attached & 1u << i, out);
	}
	if (t && t->profiles[TARGET_PROFILE_CPU]) {
		struct profile_snapshot *snap;

		profile_get_stats(t->profiles[TARGET_PROFILE_CPU], &ps);
		/* When the profiles begin: the last enable or reset. */
		if (!profile_snapshot(t->profiles[TARGET_PROFILE_CPU], 0, &snap)) {
			print_time(out, "profile_since", snap->since);
			profile_snapshot_free(snap);
		}
	}
	fprintf(out, "samples: %llu\n", (unsigned long long)ps.total);
	for (int i = 0; i < APERTURE_COLLECTORS; i++) {
		struct aperture_collector *c = &a->collectors[i];

		drops = t ? t->drops[i] : 0;
		if (t && t->attached & 1u << i && c->ops->drops)
			drops = c->ops->drops(c->self, pid);
		/* "drops" is cpu's, the first collector's, as it always was. */
		if (i == 0)
			fprintf(out, "drops: %llu\n", (unsigned long long)drops);
		else if (drops)
			fprintf(out, "%s_drops: %llu\n", c->ops->name, (unsigned long long)drops);
	}
	fprintf(out, "window_s: %llu (%s)\n", (unsigned long long)window_locked(ts, t),
		t && t->own_window ? "own" : "global");
	if (t && t->baseline_at) {
		print_time(out, "baseline", t->baseline_at);
		fprintf(out, "baseline_samples: %llu\n",
			(unsigned long long)t->baselines[TARGET_PROFILE_CPU]->total);
	} else {
		fprintf(out, "baseline: none\n");
	}
	print_identity(ts, out, pid, t, live);
	fprintf(out, "last_error: %s\n", t && t->last_error[0] ? t->last_error : "none");
out:
	pthread_mutex_unlock(&ts->lock);
	return err;
}

int targets_snapshot(struct targets *ts, pid_t pid, enum target_profile which,
		     struct profile_snapshot **out)
{
	return targets_snapshot_from(ts, pid, which, -1, out);
}

int targets_snapshot_from(struct targets *ts, pid_t pid, enum target_profile which,
			  int64_t from, struct profile_snapshot **out)
{
	struct proc_identity id;
	struct profile *p = NULL;
	struct target *t;
	int64_t since;
	bool live;
	int err;

	pthread_mutex_lock(&ts->lock);
	t = resolve_locked(ts, pid, &id, &live);
	if (t && t->profiles[which])
		p = profile_ref(t->profiles[which]);
	if (from < 0)
		since = window_since(window_locked(ts, t));
	else
		since = from > aperture_now() - PROFILE_HISTORY_S ? from : 0;
	pthread_mutex_unlock(&ts->lock);
	if (!t && !live)
		return -ENOENT;
	if (!p)
		p = profile_new(profile_units[which]);
	if (!p)
		return -ENOMEM;
	err = profile_snapshot(p, since, out);
	profile_unref(p);
	return err;
}

int targets_baseline(struct targets *ts, pid_t pid, enum target_profile which,
		     struct profile_snapshot **out)
{
	struct target *t;
	int err;

	*out = NULL;
	pthread_mutex_lock(&ts->lock);
	err = find_locked(ts, pid, &t);
	if (!err && t && t->baselines[which])
		err = profile_snapshot_dup(t->baselines[which], out);
	pthread_mutex_unlock(&ts->lock);
	return err;
}

int targets_blocking(struct targets *ts, pid_t pid, struct blocking_snapshot **out)
{
	struct proc_identity id;
	struct blocking_log *l = NULL;
	struct target *t;
	bool live;
	int err;

	pthread_mutex_lock(&ts->lock);
	t = resolve_locked(ts, pid, &id, &live);
	if (t && t->blocking)
		l = blocking_log_ref(t->blocking);
	pthread_mutex_unlock(&ts->lock);
	if (!t && !live)
		return -ENOENT;
	if (!l)
		l = blocking_log_new();
	if (!l)
		return -ENOMEM;
	err = blocking_log_snapshot(l, out);
	blocking_log_unref(l);
	return err;
}

int targets_sys_snapshot(struct targets *ts, pid_t pid, struct sys_snapshot **out)
{
	struct proc_identity id;
	struct sys_table *table = NULL;
	struct target *t;
	bool live;
	int err;

	pthread_mutex_lock(&ts->lock);
	t = resolve_locked(ts, pid, &id, &live);
	if (t && t->sys)
		table = sys_table_ref(t->sys);
	pthread_mutex_unlock(&ts->lock);
	if (!t && !live)
		return -ENOENT;
	if (!table)
		table = sys_table_new();
	if (!table)
		return -ENOMEM;
	err = sys_table_snapshot(table, out);
	sys_table_unref(table);
	return err;
}

/* Whether a record is still worth keeping for a process that is alive. */
static bool worth_keeping(const struct target *t)
{
	struct profile_stats ps = {0};

	if (t->state != TARGET_DISABLED || t->last_error[0] || t->baseline_at || t->own_window ||
	    t->user_off || t->labels[0])
		return true;
	for (int i = 0; i < TARGET_PROFILE_NR; i++) {
		if (!t->profiles[i])
			continue;
		profile_get_stats(t->profiles[i], &ps);
		if (ps.total)
			return true;
	}
	return false;
}

/* One live target a tick looks at: what it reads of the process in /proc, without the
 * registry's lock (200 targets take tens of ms to read), the record busy meanwhile. */
struct tick_item {
	struct target *t;
	uint64_t start_time;
	bool enabled;
	bool gone;                /* exited, or its pid is another process now */
	bool have_threads;
	struct thread_list threads; /* an enabled target's, for its threads' CPU history */
};

static void tick_read(struct tick_item *it)
{
	struct proc_identity id;

	it->gone = proc_identity_read(it->t->pid, &id) || id.start_time != it->start_time;
	it->have_threads = it->enabled && !it->gone &&
			   !threads_read(it->t->pid, THREADS_BASIC, &it->threads);
}

/* Applies what the tick read of it->t (busy until now): expiry, exit, the threads' CPU.
 * Returns the state the target must stop to (its collectors detached by the caller), or
 * TARGET_ENABLED for none; *dropped when the record went. */
static enum target_state tick_apply_locked(struct targets *ts, struct tick_item *it,
					   int64_t now, bool *dropped)
{
	struct target *t = it->t;
	enum target_state to = TARGET_ENABLED;

	*dropped = false;
	t->busy = false;
	if (t->state == TARGET_ENABLED && t->expires && now >= t->expires)
		to = TARGET_EXPIRED;
	if (it->gone) {
		if (!worth_keeping(t)) {
			target_drop_locked(ts, t);
			*dropped = true;
			return TARGET_ENABLED;
		}
		to = TARGET_EXITED;
	}
	if (to != TARGET_ENABLED && t->state == TARGET_ENABLED)
		return to;
	if (to == TARGET_EXITED) {
		t->state = to;
		t->since = now;
		t->expires = 0;
	}
	if (t->state == TARGET_ENABLED && it->have_threads &&
	    (t->thread_cpu || (t->thread_cpu = thread_cpu_new())))
		thread_cpu_record(t->thread_cpu, &it->threads, monotonic_us());
	return TARGET_ENABLED;
}

void targets_tick(struct targets *ts, int64_t now)
{
	int64_t retain = config_get(ts->a, CONFIG_RETAIN_EXITED_S);
	struct tick_item *items = NULL;
	size_t n = 0, cap = 0;
	struct target *t, *tmp;

	pthread_mutex_lock(&ts->lock);
	HASH_ITER(hh, ts->by_pid, t, tmp) {
		if (t->busy)
			continue;
		if (t->state == TARGET_EXITED) {
			if (now >= t->since + retain)
				target_drop_locked(ts, t);
			continue;
		}
		if (n == cap) {
			struct tick_item *bigger;

			cap = cap ? 2 * cap : 64;
			bigger = realloc(items, cap * sizeof(*items));
			if (!bigger)
				break; /* the rest next second */
			items = bigger;
		}
		items[n++] = (struct tick_item){ .t = t, .start_time = t->id.start_time,
						 .enabled = t->state == TARGET_ENABLED };
		t->busy = true;
	}
	pthread_mutex_unlock(&ts->lock);
	for (size_t i = 0; i < n; i++)
		tick_read(&items[i]);
	pthread_mutex_lock(&ts->lock);
	for (size_t i = 0; i < n; i++) {
		enum target_state to;
		bool dropped;

		to = tick_apply_locked(ts, &items[i], now, &dropped);
		if (to != TARGET_ENABLED)
			disable_locked(ts, items[i].t, to); /* lets the lock go around its detach */
		if (items[i].have_threads)
			threads_free(&items[i].threads);
	}
	pthread_cond_broadcast(&ts->idle);
	pthread_mutex_unlock(&ts->lock);
	free(items);
}

int targets_threads_busy(struct targets *ts, pid_t pid, struct thread_list *l)
{
	struct target *t;
	int err;

	pthread_mutex_lock(&ts->lock);
	err = find_locked(ts, pid, &t);
	if (!err)
		err = t && t->thread_cpu ? thread_cpu_apply(t->thread_cpu, window_locked(ts, t),
							    monotonic_us(), l)
					 : -ENOENT;
	pthread_mutex_unlock(&ts->lock);
	return err;
}

void targets_count(struct targets *ts, unsigned *enabled, unsigned *exited)
{
	struct target *t, *tmp;

	*enabled = *exited = 0;
	pthread_mutex_lock(&ts->lock);
	HASH_ITER(hh, ts->by_pid, t, tmp) {
		*enabled += t->state == TARGET_ENABLED;
		*exited += t->state == TARGET_EXITED;
	}
	pthread_mutex_unlock(&ts->lock);
}

static int cmp_record_pid(const void *a, const void *b)
{
	return cmp_pid(&((const struct target_record *)a)->pid,
		       &((const struct target_record *)b)->pid);
}

int targets_records(struct targets *ts, struct target_record **out, size_t *n)
{
	struct target_record *r;
	struct target *t, *tmp;
	size_t len = 0;

	pthread_mutex_lock(&ts->lock);
	r = calloc(HASH_COUNT(ts->by_pid) + 1, sizeof(*r));
	if (!r) {
		pthread_mutex_unlock(&ts->lock);
		return -ENOMEM;
	}
	HASH_ITER(hh, ts->by_pid, t, tmp) {
		bool collected = false;

		for (int i = 0; i < TARGET_PROFILE_NR; i++)
			collected = collected || t->profiles[i];
		if (!collected)
			continue;
		r[len] = (struct target_record){
			.pid = t->pid, .start_time = t->id.start_time, .state = t->state,
			.state_name = state_names[t->state], .jvm = t->jvm,
			.blocking = t->blocking ? blocking_log_ref(t->blocking) : NULL,
			.sys = t->sys ? sys_table_ref(t->sys) : NULL };
		memcpy(r[len].comm, t->id.comm, sizeof(r[len].comm));
		target_labels(ts, t, r[len].labels, sizeof(r[len].labels));
		for (int i = 0; i < TARGET_PROFILE_NR; i++)
			r[len].profiles[i] = t->profiles[i] ? profile_ref(t->profiles[i]) : NULL;
		len++;
	}
	pthread_mutex_unlock(&ts->lock);
	qsort(r, len, sizeof(*r), cmp_record_pid);
	*out = r;
	*n = len;
	return 0;
}

void targets_records_free(struct target_record *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (int j = 0; j < TARGET_PROFILE_NR; j++)
			profile_unref(r[i].profiles[j]);
		blocking_log_unref(r[i].blocking);
		sys_table_unref(r[i].sys);
	}
	free(r);
}

/* Rules come after the user: see daemon/rules.h. */
int targets_apply_rule(struct targets *ts, pid_t pid, uint64_t start_time,
		       const struct target_rule_outcome *o)
{
	uint64_t max = config_get(ts->a, CONFIG_MAX_TARGETS);
	struct target *t, *other, *tmp;
	unsigned enabled = 0;
	int err;

	pthread_mutex_lock(&ts->lock);
	/* A record is made only for something to keep: an enable or labels. */
	if (o->decision == TARGET_RULE_ENABLE || o->labels[0])
		err = writable_record_locked(ts, pid, &t);
	else
		while (!(err = find_locked(ts, pid, &t)) && t && t->busy)
			pthread_cond_wait(&ts->idle, &ts->lock);
	if (err || !t || t->id.start_time != start_time || t->state == TARGET_EXITED)
		goto out;
	snprintf(t->labels, sizeof(t->labels), "%s", o->labels);
	switch (o->decision) {
	case TARGET_RULE_ENABLE:
		if (t->user_off || t->state == TARGET_ENABLED)
			break;
		HASH_ITER(hh, ts->by_pid, other, tmp)
			enabled += other->state == TARGET_ENABLED;
		if (enabled >= max) {
			err = -EDQUOT;
			break;
		}
		if (o->collectors) {
			t->collectors = o->collectors;
			t->own_collectors = true;
		}
		err = enable_locked(ts, t, o->duration);
		if (!err)
			t->enabled_by_rule = o->rule;
		break;
	case TARGET_RULE_DISABLE:
	case TARGET_RULE_NONE:
		/* What a rule enabled, a rule may take back; the user's enables stay. */
		if (t->state != TARGET_ENABLED || !t->enabled_by_rule ||
		    (o->decision == TARGET_RULE_NONE && !o->reapply))
			break;
		disable_locked(ts, t, TARGET_DISABLED);
		t->expires = 0;
		t->enabled_by_rule = 0;
		break;
	}
out:
	pthread_mutex_unlock(&ts->lock);
	return err;
}
