#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uthash.h>
#include "collectors/cpu.h"
#include "collectors/jvm/hsperf_watch.h"
#include "collectors/jvm/jvm.h"
#include "collectors/offcpu.h"
#include "collectors/sys.h"
#include "collectors/threads.h"
#include "daemon/aperture.h"
#include "daemon/proc_identity.h"
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
	uint64_t offcpu_drops;   /* kernel-side drops of enables that ended */
	bool offcpu_on;          /* the off-CPU collector has this target */
	struct sys_table *sys;   /* system calls and lock waits */
	uint64_t cpu_drops;      /* kernel-side drops of enables that ended */
	bool own_window;         /* window_s set by the target's window file, not config's */
	uint64_t window_s;
	struct profile_snapshot *baselines[TARGET_PROFILE_NR]; /* all NULL: no baseline */
	int64_t baseline_at;
	bool jvm;                /* a HotSpot JVM when last enabled */
	struct thread_cpu *thread_cpu; /* threads' CPU time, once a second while enabled */
	char last_error[256];
	UT_hash_handle hh;
};

struct targets {
	struct aperture *a;
	pthread_mutex_t lock;    /* the table and every record */
	struct target *by_pid;
};

static const char *const state_names[] = {
	[TARGET_DISABLED] = "disabled",
	[TARGET_ENABLED] = "enabled",
	[TARGET_EXPIRED] = "expired",
	[TARGET_EXITED] = "exited",
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

static void target_drop_locked(struct targets *ts, struct target *t)
{
	if (t->state == TARGET_ENABLED && ts->a->cpu)
		cpu_collector_remove(ts->a->cpu, t->pid, aperture_now());
	jvm_collector_forget(ts->a->jvm, t->pid);
	if (t->offcpu_on)
		offcpu_collector_remove(ts->a->offcpu, t->pid, aperture_now());
	if (t->state == TARGET_ENABLED && ts->a->sys)
		sys_collector_remove(ts->a->sys, t->pid, aperture_now());
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
	if (t && *live && !proc_identity_same(&t->id, id)) {
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

static int enable_locked(struct targets *ts, struct target *t, int64_t now, uint64_t duration)
{
	struct aperture *a = ts->a;
	char why[200];
	int err;

	if (t->state != TARGET_ENABLED) {
		if (!a->cpu) {
			target_error(t, "enable: the cpu collector is unavailable: %s", a->cpu_error);
			return -EOPNOTSUPP;
		}
		err = profiles_ensure(t);
		if (err) {
			target_error(t, "enable: out of memory");
			return err;
		}
		err = cpu_collector_add(a->cpu, t->pid, t->profiles[TARGET_PROFILE_CPU], why,
					sizeof(why));
		if (err) {
			target_error(t, "enable: cpu collector: %s", why);
			return err;
		}
		/* Mappings we may not read: profiled all the same, as perf does, unnamed. */
		err = procmaps_check_access(t->pid);
		if (err)
			target_error(t, "enable: /proc/%d/maps: %s (ptrace read access refused): "
				     "frames are [unknown]", (int)t->pid, strerror(-err));
		/* Off-CPU collection is extra: without it, cpu profiling still goes on and status
		 * says why it is missing. */
		if (a->offcpu && !offcpu_collector_add(a->offcpu, t->pid,
						       t->profiles[TARGET_PROFILE_OFFCPU],
						       t->blocking, why, sizeof(why)))
			t->offcpu_on = true;
		else if (a->offcpu)
			target_error(t, "enable: off-CPU collector: %s", why);
		err = a->sys ? sys_collector_add(a->sys, t->pid, t->sys,
						 t->profiles[TARGET_PROFILE_LOCKS], why, sizeof(why))
			     : 0;
		if (err) {
			if (t->offcpu_on)
				offcpu_collector_remove(a->offcpu, t->pid, now);
			t->offcpu_on = false;
			cpu_collector_remove(a->cpu, t->pid, now);
			target_error(t, "enable: sys collector: %s", why);
			return err;
		}
		t->state = TARGET_ENABLED;
		t->since = now;
		/* Like the profiles, the threads' history runs from the first enable or a reset. */
		if (!t->thread_cpu)
			thread_cpu_sample_locked(t, true);
		/* The JVM part attaches in the background; whatever becomes of it, native
		 * profiling goes on, and jvm/status says why. */
		t->jvm = aperture_jvm_found_by(a, t->pid) != NULL;
		/* A container enabled before targets/ was listed gets its /tmp watched too. */
		hsperf_watch_note(a->jvm_watch, &t->pid, 1);
		struct jvm_profiles jp = {
			.alloc = t->profiles[TARGET_PROFILE_JVM_ALLOC],
			.alloc_objects = t->profiles[TARGET_PROFILE_JVM_ALLOC_OBJECTS],
			.monitors = t->profiles[TARGET_PROFILE_JVM_MONITORS],
		};
		if (t->jvm && config_get(a, CONFIG_JVM_ATTACH) &&
		    jvm_collector_enable(a->jvm, t->pid, t->id.start_time, t->id.euid,
					 t->id.rgid, &jp))
			target_error(t, "enable: could not start attaching to the JVM");
	}
	t->expires = duration ? now + (int64_t)duration : 0;
	return 0;
}

static void disable_locked(struct targets *ts, struct target *t, enum target_state to,
			   int64_t now)
{
	if (t->state == TARGET_ENABLED) {
		/* The Java frames of the last samples first: then they are final too. */
		if (t->jvm)
			jvm_collector_drain_java(ts->a->jvm, t->pid);
		if (ts->a->cpu)
			t->cpu_drops += cpu_collector_remove(ts->a->cpu, t->pid, now);
		jvm_collector_disable(ts->a->jvm, t->pid);
		if (t->offcpu_on)
			t->offcpu_drops += offcpu_collector_remove(ts->a->offcpu, t->pid, now);
		t->offcpu_on = false;
		if (ts->a->sys)
			sys_collector_remove(ts->a->sys, t->pid, now);
		t->state = to;
		t->since = now;
	} else if (to == TARGET_EXITED) {
		t->state = to;
		t->since = now;
	}
	t->expires = 0;
}

int targets_write_enable(struct targets *ts, pid_t pid, const char *buf, size_t len)
{
	int64_t now = aperture_now();
	uint64_t duration;
	char shown[64];
	struct target *t;
	int err, on;

	pthread_mutex_lock(&ts->lock);
	err = get_record_locked(ts, pid, &t);
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
	if (on)
		err = enable_locked(ts, t, now, duration);
	else
		disable_locked(ts, t, TARGET_DISABLED, now);
out:
	pthread_mutex_unlock(&ts->lock);
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
	t->cpu_drops = 0;
	t->offcpu_drops = 0;
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

/* How the target's user stacks are walked, and the share of their frames that got a name. */
static void print_cpu_info(FILE *out, struct cpu_collector *cpu, pid_t pid)
{
	struct cpu_target_info info;

	if (cpu_collector_target_info(cpu, pid, &info))
		return;
	fprintf(out, "unwind: %s\n", info.dwarf ? "dwarf" : "fp");
	if (info.frames_total)
		fprintf(out, "frames_named: %.1f%%\n",
			100.0 * info.frames_named / info.frames_total);
	else
		fprintf(out, "frames_named: none yet\n");
}

int targets_status(struct targets *ts, pid_t pid, FILE *out)
{
	struct aperture *a = ts->a;
	struct profile_stats ps = {0};
	struct proc_identity id;
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
	if (t && t->jvm)
		jvm_collector_state_line(a->jvm, pid, out);
	if (!a->cpu)
		fprintf(out, "cpu: unavailable: %s\n", a->cpu_error);
	else if (t && t->state == TARGET_ENABLED)
		fprintf(out, "cpu: running at %llu Hz\n",
			(unsigned long long)config_get(a, CONFIG_FREQUENCY_HZ));
	else
		fprintf(out, "cpu: off\n");
	if (t && t->profiles[TARGET_PROFILE_CPU])
		profile_get_stats(t->profiles[TARGET_PROFILE_CPU], &ps);
	drops = t ? t->cpu_drops : 0;
	if (t && t->state == TARGET_ENABLED && a->cpu)
		drops += cpu_collector_target_drops(a->cpu, pid);
	if (!a->sys)
		fprintf(out, "syscalls: unavailable: %s\n", a->sys_error);
	else
		fprintf(out, "syscalls: %s\n", t && t->state == TARGET_ENABLED ? "tracing" : "off");
	fprintf(out, "samples: %llu\ndrops: %llu\n", (unsigned long long)ps.total,
		(unsigned long long)drops);
	if (t && t->state == TARGET_ENABLED && a->cpu)
		print_cpu_info(out, a->cpu, pid);
	fprintf(out, "window_s: %llu (%s)\n", (unsigned long long)window_locked(ts, t),
		t && t->own_window ? "own" : "global");
	if (t && t->baseline_at) {
		print_time(out, "baseline", t->baseline_at);
		fprintf(out, "baseline_samples: %llu\n",
			(unsigned long long)t->baselines[TARGET_PROFILE_CPU]->total);
	} else {
		fprintf(out, "baseline: none\n");
	}
	if (!a->offcpu)
		fprintf(out, "offcpu: unavailable: %s\n", a->offcpu_error);
	else
		fprintf(out, "offcpu: %s\n", t && t->offcpu_on ? "tracing sched_switch" : "off");
	fprintf(out, "offcpu_drops: %llu\n", (unsigned long long)(t ? t->offcpu_drops : 0));
	fprintf(out, "last_error: %s\n", t && t->last_error[0] ? t->last_error : "none");
out:
	pthread_mutex_unlock(&ts->lock);
	return err;
}

int targets_snapshot(struct targets *ts, pid_t pid, enum target_profile which,
		     struct profile_snapshot **out)
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
	since = window_since(window_locked(ts, t));
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

	if (t->state != TARGET_DISABLED || t->last_error[0] || t->baseline_at || t->own_window)
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

void targets_tick(struct targets *ts, int64_t now)
{
	int64_t retain = config_get(ts->a, CONFIG_RETAIN_EXITED_S);
	struct proc_identity id;
	struct target *t, *tmp;

	pthread_mutex_lock(&ts->lock);
	HASH_ITER(hh, ts->by_pid, t, tmp) {
		if (t->state == TARGET_ENABLED && t->expires && now >= t->expires)
			disable_locked(ts, t, TARGET_EXPIRED, now);
		if (t->state != TARGET_EXITED &&
		    (proc_identity_read(t->pid, &id) || !proc_identity_same(&t->id, &id))) {
			if (!worth_keeping(t)) {
				target_drop_locked(ts, t);
				continue;
			}
			disable_locked(ts, t, TARGET_EXITED, now);
		}
		if (t->state == TARGET_EXITED && now >= t->since + retain) {
			target_drop_locked(ts, t);
			continue;
		}
		if (t->state == TARGET_ENABLED)
			thread_cpu_sample_locked(t, false);
	}
	pthread_mutex_unlock(&ts->lock);
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
