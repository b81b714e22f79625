/* Renderers of a JVM's threads: the dump as JSON, deadlocks as jstack prints them, and the
 * busiest threads. Locks are named by identity hash code (what ThreadInfo.toString shows),
 * where jstack shows addresses: <0x1b6d3586> is the object whose hash that is. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "collectors/jvm/jvm_internal.h"
#include "symbols/read_file.h"

/* schedstat's first field is the thread's CPU time in ns, as the JVM's thread CPU clock
 * reads it. */
static int read_cpu_ns(pid_t pid, pid_t tid, uint64_t *ns)
{
	char path[96], *text;
	size_t len;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
	if (read_file(path, &text, &len))
		return -ENOENT;
	*ns = strtoull(text, NULL, 10);
	free(text);
	return 0;
}

static int tasks_add(struct jvm_task_cpu **v, size_t *n, size_t *cap,
		     const struct jvm_task_cpu *t)
{
	if (*n == *cap) {
		size_t bigger_cap = *cap ? 2 * *cap : 64;
		struct jvm_task_cpu *bigger = realloc(*v, bigger_cap * sizeof(**v));

		if (!bigger)
			return -ENOMEM;
		*v = bigger;
		*cap = bigger_cap;
	}
	(*v)[(*n)++] = *t;
	return 0;
}

int jvm_tasks_read(pid_t pid, const struct thread_list *known, struct jvm_task_cpu **out,
		   size_t *n)
{
	struct jvm_task_cpu *v = NULL;
	size_t cap = 0;
	struct dirent *de;
	char path[96];
	DIR *d = NULL;
	int err = 0;

	*n = 0;
	/* The caller's list has the names already: only the CPU times are read. */
	for (size_t i = 0; known && i < known->n && !err; i++) {
		struct jvm_task_cpu t = { .tid = known->v[i].tid };

		snprintf(t.comm, sizeof(t.comm), "%s", known->v[i].name);
		if (!read_cpu_ns(pid, t.tid, &t.cpu_ns))
			err = tasks_add(&v, n, &cap, &t);
	}
	if (known)
		goto out;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while (!err && (de = readdir(d))) {
		struct jvm_task_cpu t = { .tid = atoi(de->d_name) };
		char *text;
		size_t len;

		if (t.tid <= 0 || read_cpu_ns(pid, t.tid, &t.cpu_ns))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)t.tid);
		if (read_file(path, &text, &len))
			continue;
		snprintf(t.comm, sizeof(t.comm), "%.*s", (int)(len && text[len - 1] == '\n' ?
							       len - 1 : len), text);
		free(text);
		err = tasks_add(&v, n, &cap, &t);
	}
	closedir(d);
out:
	if (err) {
		free(v);
		v = NULL;
		*n = 0;
	}
	*out = v;
	return err;
}

void jvm_threads_match(struct jvm_threads *t, const struct jvm_task_cpu *tasks, size_t n)
{
	bool *taken = calloc(n ? n : 1, sizeof(*taken));

	if (!taken)
		return;
	for (size_t i = 0; i < t->n; i++) {
		struct jvm_thread *th = &t->v[i];
		/* HotSpot names a thread's OS thread after its first 15 bytes; the launcher's
		 * main thread keeps the process's name. */
		const char *want = strcmp(th->name, "main") ? th->name : "java";
		long long best_diff = -1;
		size_t best = n;

		for (size_t j = 0; j < n; j++) {
			long long diff;

			if (taken[j] || strncmp(tasks[j].comm, want, 15) ||
			    strlen(tasks[j].comm) != (strlen(want) < 15 ? strlen(want) : 15))
				continue;
			diff = th->cpu_ns < 0 ? 0 : llabs((long long)tasks[j].cpu_ns - th->cpu_ns);
			if (best == n || diff < best_diff) {
				best = j;
				best_diff = diff;
			}
		}
		if (best < n) {
			taken[best] = true;
			th->tid = tasks[best].tid;
		}
	}
	free(taken);
}

static cJSON *lock_json(const struct jvm_lock *l)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "class", l->cls);
	cJSON_AddStringToObject(o, "identity_hash", l->hash);
	return o;
}

static cJSON *stack_json(const struct jvm_thread *th)
{
	cJSON *stack = cJSON_CreateArray();

	for (size_t i = 0; i < th->nframes; i++) {
		const struct jvm_frame *f = &th->frames[i];
		cJSON *o = cJSON_CreateObject(), *locked = cJSON_CreateArray();

		cJSON_AddStringToObject(o, "class", f->cls);
		cJSON_AddStringToObject(o, "method", f->method);
		if (*f->file)
			cJSON_AddStringToObject(o, "file", f->file);
		if (f->line > 0)
			cJSON_AddNumberToObject(o, "line", f->line);
		cJSON_AddBoolToObject(o, "native", f->native);
		for (size_t m = 0; m < th->nmonitors; m++)
			if (th->monitors[m].depth == (int)i)
				cJSON_AddItemToArray(locked, lock_json(&th->monitors[m]));
		cJSON_AddItemToObject(o, "locked", locked);
		cJSON_AddItemToArray(stack, o);
	}
	return stack;
}

static cJSON *thread_json(const struct jvm_thread *th)
{
	cJSON *o = cJSON_CreateObject(), *a;

	cJSON_AddNumberToObject(o, "id", th->id);
	if (th->tid)
		cJSON_AddNumberToObject(o, "tid", th->tid);
	else
		cJSON_AddNullToObject(o, "tid");
	cJSON_AddStringToObject(o, "name", th->name);
	cJSON_AddBoolToObject(o, "daemon", th->daemon);
	cJSON_AddStringToObject(o, "state", th->state);
	cJSON_AddBoolToObject(o, "in_native", th->in_native);
	if (th->cpu_ns >= 0)
		cJSON_AddNumberToObject(o, "cpu_time_ns", th->cpu_ns);
	else
		cJSON_AddNullToObject(o, "cpu_time_ns");
	cJSON_AddItemToObject(o, "lock", *th->lock.hash ? lock_json(&th->lock) : cJSON_CreateNull());
	if (th->owner_id >= 0) {
		cJSON *owner = cJSON_CreateObject();

		cJSON_AddNumberToObject(owner, "id", th->owner_id);
		cJSON_AddStringToObject(owner, "name", th->owner_name);
		cJSON_AddItemToObject(o, "lock_owner", owner);
	} else {
		cJSON_AddNullToObject(o, "lock_owner");
	}
	cJSON_AddItemToObject(o, "stack", stack_json(th));
	a = cJSON_AddArrayToObject(o, "locked_monitors");
	for (size_t m = 0; m < th->nmonitors; m++) {
		cJSON *l = lock_json(&th->monitors[m]);

		cJSON_AddNumberToObject(l, "stack_depth", th->monitors[m].depth);
		cJSON_AddItemToArray(a, l);
	}
	a = cJSON_AddArrayToObject(o, "locked_synchronizers");
	for (size_t s = 0; s < th->nsyncs; s++)
		cJSON_AddItemToArray(a, lock_json(&th->syncs[s]));
	return o;
}

static int print_json(cJSON *root, FILE *out)
{
	char *text = cJSON_Print(root);
	int err = 0;

	cJSON_Delete(root);
	if (!text)
		return -ENOMEM;
	if (fprintf(out, "%s\n", text) < 0)
		err = -EIO;
	cJSON_free(text);
	return err;
}

int jvm_render_dump(const struct jvm_threads *t, pid_t pid, FILE *out)
{
	cJSON *root = cJSON_CreateObject(), *threads;

	if (!root)
		return -ENOMEM;
	cJSON_AddNumberToObject(root, "pid", pid);
	cJSON_AddStringToObject(root, "source", "ThreadMXBean.dumpAllThreads");
	cJSON_AddStringToObject(root, "cpu_time_unit", "nanoseconds");
	threads = cJSON_AddArrayToObject(root, "threads");
	for (size_t i = 0; i < t->n; i++)
		cJSON_AddItemToArray(threads, thread_json(&t->v[i]));
	return print_json(root, out);
}

/* Deadlock cycles: the threads findDeadlockedThreads returned, grouped by following each
 * one's lock owner. cycle[i] is the cycle number of thread i; returns how many. */
static size_t find_cycles(const struct jvm_threads *t, int *cycle)
{
	size_t ncycles = 0;

	for (size_t i = 0; i < t->n; i++)
		cycle[i] = -1;
	for (size_t i = 0; i < t->n; i++) {
		size_t j = i;
		int c = -1;

		if (cycle[i] >= 0)
			continue;
		/* Walk owners until a thread already placed (join its cycle) or back to i. */
		for (size_t steps = 0; steps <= t->n; steps++) {
			size_t next = t->n;

			for (size_t k = 0; k < t->n; k++)
				if (t->v[k].id == t->v[j].owner_id)
					next = k;
			if (next == t->n)
				break;
			if (cycle[next] >= 0) {
				c = cycle[next];
				break;
			}
			if (next == i)
				break;
			j = next;
		}
		if (c < 0)
			c = ncycles++;
		for (size_t k = i, steps = 0; steps <= t->n && cycle[k] < 0; steps++) {
			size_t next = t->n;

			cycle[k] = c;
			for (size_t m = 0; m < t->n; m++)
				if (t->v[m].id == t->v[k].owner_id)
					next = m;
			if (next == t->n)
				break;
			k = next;
		}
	}
	return ncycles;
}

static bool is_monitor_wait(const struct jvm_thread *th)
{
	return !strcmp(th->state, "BLOCKED");
}

/* A stack as jstack prints it, with what each frame locked or waits for. */
static void print_stack(const struct jvm_thread *th, FILE *out)
{
	for (size_t i = 0; i < th->nframes; i++) {
		const struct jvm_frame *f = &th->frames[i];

		fprintf(out, "\tat %s.%s(", f->cls, f->method);
		if (f->native)
			fprintf(out, "Native Method)\n");
		else if (*f->file && f->line > 0)
			fprintf(out, "%s:%d)\n", f->file, f->line);
		else
			fprintf(out, "%s)\n", *f->file ? f->file : "Unknown Source");
		if (i == 0 && *th->lock.hash) {
			if (is_monitor_wait(th))
				fprintf(out, "\t- waiting to lock <0x%s> (a %s)\n", th->lock.hash,
					th->lock.cls);
			else if (!strcmp(f->cls, "java.lang.Object") && !strcmp(f->method, "wait"))
				fprintf(out, "\t- waiting on <0x%s> (a %s)\n", th->lock.hash,
					th->lock.cls);
			else
				fprintf(out, "\t- parking to wait for  <0x%s> (a %s)\n",
					th->lock.hash, th->lock.cls);
		}
		for (size_t m = 0; m < th->nmonitors; m++)
			if (th->monitors[m].depth == (int)i)
				fprintf(out, "\t- locked <0x%s> (a %s)\n", th->monitors[m].hash,
					th->monitors[m].cls);
	}
}

int jvm_render_deadlocks(const struct jvm_threads *t, FILE *out)
{
	int *cycle = calloc(t->n ? t->n : 1, sizeof(*cycle));
	size_t ncycles;

	if (!cycle)
		return -ENOMEM;
	ncycles = find_cycles(t, cycle);
	for (size_t c = 0; c < ncycles; c++) {
		fprintf(out, "Found one Java-level deadlock:\n=============================\n");
		for (size_t i = 0; i < t->n; i++) {
			const struct jvm_thread *th = &t->v[i];

			if (cycle[i] != (int)c)
				continue;
			fprintf(out, "\"%s\":\n", th->name);
			if (is_monitor_wait(th))
				fprintf(out, "  waiting to lock monitor <0x%s> (a %s),\n",
					th->lock.hash, th->lock.cls);
			else
				fprintf(out, "  waiting for ownable synchronizer <0x%s>, (a %s),\n",
					th->lock.hash, th->lock.cls);
			fprintf(out, "  which is held by \"%s\"\n\n", th->owner_name);
		}
		fprintf(out, "Java stack information for the threads listed above:\n"
			     "===================================================\n");
		for (size_t i = 0; i < t->n; i++) {
			if (cycle[i] != (int)c)
				continue;
			fprintf(out, "\"%s\":\n", t->v[i].name);
			print_stack(&t->v[i], out);
			fprintf(out, "\n");
		}
	}
	if (ncycles)
		fprintf(out, "Found %zu deadlock%s.\n", ncycles, ncycles == 1 ? "" : "s");
	free(cycle);
	return ferror(out) ? -EIO : 0;
}

int jvm_render_deadlocks_json(const struct jvm_threads *t, pid_t pid, FILE *out)
{
	int *cycle = calloc(t->n ? t->n : 1, sizeof(*cycle));
	cJSON *root = cJSON_CreateObject(), *cycles;
	size_t ncycles;

	if (!cycle || !root) {
		free(cycle);
		cJSON_Delete(root);
		return -ENOMEM;
	}
	ncycles = find_cycles(t, cycle);
	cJSON_AddNumberToObject(root, "pid", pid);
	cycles = cJSON_AddArrayToObject(root, "deadlocks");
	for (size_t c = 0; c < ncycles; c++) {
		cJSON *threads = cJSON_CreateArray();

		for (size_t i = 0; i < t->n; i++) {
			const struct jvm_thread *th = &t->v[i];
			cJSON *o;

			if (cycle[i] != (int)c)
				continue;
			o = thread_json(th);
			cJSON_AddStringToObject(o, "waits_for", is_monitor_wait(th) ? "monitor" :
						"ownable_synchronizer");
			cJSON_AddItemToArray(threads, o);
		}
		cJSON_AddItemToArray(cycles, cJSON_CreateObject());
		cJSON_AddItemToObject(cJSON_GetArrayItem(cycles, c), "threads", threads);
	}
	free(cycle);
	return print_json(root, out);
}

static const struct jvm_thread *by_tid(const struct jvm_threads *t, pid_t tid)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].tid == tid)
			return &t->v[i];
	return NULL;
}

static const struct jvm_thread *by_id(const struct jvm_threads *t, long long id)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].id == id)
			return &t->v[i];
	return NULL;
}

int jvm_render_busy(const struct jvm_threads *all, const struct jvm_threads *top,
		    const struct thread_list *l, const struct thread_info *const *order,
		    FILE *out)
{
	double secs = l->interval_us / 1e6;

	if (!l->from_history)
		fprintf(out, "# threads of %d by CPU time, sampled over %.1f s at open (no history "
			"yet)\n", (int)l->pid, secs);
	else
		fprintf(out, "# threads of %d by CPU time used in the window (window_s %llu%s): "
			"the last %.1f s of history\n", (int)l->pid,
			(unsigned long long)l->window_s,
			l->window_s ? "" : ", since enable or reset", secs);
	fprintf(out, "# tid \"name\" cpu_ms %%_of_one_cpu evidence, then the Java stack of the "
		"%d busiest Java threads\n# evidence thread_cpu: the kernel's CPU time of that "
		"thread (utime+stime, clock ticks), recorded once a second while enabled; threads "
		"that exited in the window are left out\n", JVM_BUSY_STACKS);
	for (size_t i = 0; i < l->n; i++) {
		const struct thread_info *ti = order[i];
		const struct jvm_thread *th = by_tid(all, ti->tid);
		const struct jvm_thread *st = th ? by_id(top, th->id) : NULL;

		fprintf(out, "%d \"%s\" %.1f %.1f thread_cpu\n", (int)ti->tid,
			th ? th->name : ti->name, ti->recent_us / 1e3,
			l->interval_us ? 100.0 * ti->recent_us / l->interval_us : 0.0);
		if (st)
			print_stack(st, out);
	}
	return ferror(out) ? -EIO : 0;
}
