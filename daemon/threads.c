#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "collectors/jvm/jvm.h"
#include "collectors/offcpu.h"
#include "collectors/threads.h"
#include "collectors/workers.h"
#include "daemon/aperture.h"
#include "daemon/targets.h"
#include "daemon/threads.h"
#include "views/threads.h"
#include "views/views.h"

#define STACK_TEXT_MAX 16384

/* The user stacks of l's threads that are off CPU now, as they went off (enabled targets). */
static void add_user_stacks(struct aperture *a, struct thread_list *l)
{
	char *buf;

	if (!a->offcpu)
		return;
	buf = malloc(STACK_TEXT_MAX);
	for (size_t i = 0; buf && i < l->n; i++)
		if (!offcpu_collector_thread_stack(a->offcpu, l->pid, l->v[i].tid, buf,
						   STACK_TEXT_MAX))
			l->v[i].ustack = strdup(buf);
	free(buf);
}

int target_threads_busy(struct aperture *a, pid_t pid, FILE *out)
{
	const struct thread_info **order;
	struct thread_list l;
	int err = threads_read(pid, THREADS_BASIC, &l);

	if (err)
		return err == -ESRCH ? 0 : err;
	/* The target's window from the history kept while enabled; without one, each thread's
	 * CPU time since it started: a read never waits to sample (grep -r, du, ls -lR stat and
	 * open every file). */
	err = targets_threads_busy(a->targets, pid, &l);
	if (err == -ENOENT) {
		threads_free(&l);
		err = threads_read_since_start(pid, &l);
		if (err)
			return err == -ESRCH ? 0 : err;
	} else if (err) {
		threads_free(&l);
		return err;
	}
	/* The same CPU figures for a JVM; the agent names the threads and gives stacks. */
	order = view_threads_busy_order(&l);
	err = order ? jvm_threads_busy(a->jvm, pid, &l, order, out) : -ENOMEM;
	if (err == -ENODATA)
		err = view_threads_busy(&l, out);
	free(order);
	threads_free(&l);
	return err;
}

int native_threads_dump(struct aperture *a, pid_t pid, FILE *out)
{
	struct thread_list l;
	int err = threads_read(pid, THREADS_LOCKS | THREADS_KSTACKS, &l);

	if (err)
		return err == -ESRCH ? 0 : err;
	add_user_stacks(a, &l);
	err = view_threads_dump(&l, out);
	threads_free(&l);
	return err;
}

int native_threads_deadlocks(struct aperture *a, pid_t pid, bool json, FILE *out)
{
	struct deadlock *d = NULL;
	struct thread_list l;
	size_t n = 0;
	int err = threads_read(pid, THREADS_LOCKS | THREADS_KSTACKS, &l);

	if (err)
		return err == -ESRCH ? 0 : err;
	err = threads_find_deadlocks(&l, &d, &n);
	if (!err && n) {
		add_user_stacks(a, &l);
		err = json ? view_deadlocks_json(&l, d, n, out) : view_deadlocks(&l, d, n, out);
	}
	deadlocks_free(d, n);
	threads_free(&l);
	return err;
}

int native_thread_file(struct aperture *a, pid_t pid, pid_t tid, enum thread_file which,
		       FILE *out)
{
	struct thread_info t;
	int err = threads_read_one(pid, tid, &t);

	if (err)
		return err;
	switch (which) {
	case THREAD_FILE_NAME:
		fprintf(out, "%s\n", t.name);
		break;
	case THREAD_FILE_STATE:
		fprintf(out, "%s\n", view_thread_state(t.state));
		break;
	case THREAD_FILE_CPU_US:
		fprintf(out, "%llu\n", (unsigned long long)(t.utime_us + t.stime_us));
		break;
	}
	thread_info_fini(&t);
	return 0;
}

bool native_thread_exists(pid_t pid, pid_t tid)
{
	struct thread_info t;

	if (threads_read_one(pid, tid, &t))
		return false;
	thread_info_fini(&t);
	return true;
}

int native_thread_ids(pid_t pid, pid_t **tids, size_t *n)
{
	struct thread_list l;
	int err = threads_read(pid, THREADS_BASIC, &l);

	*tids = NULL;
	*n = 0;
	if (err)
		return err == -ESRCH ? 0 : err;
	*tids = malloc((l.n ? l.n : 1) * sizeof(**tids));
	if (!*tids)
		err = -ENOMEM;
	for (size_t i = 0; !err && i < l.n; i++)
		(*tids)[(*n)++] = l.v[i].tid;
	threads_free(&l);
	return err;
}

int target_blocking_json(struct aperture *a, pid_t pid, FILE *out)
{
	char prefix[CONFIG_WORKERS_LEN];
	struct blocking_snapshot *s;
	struct blocking_workers bw;
	struct workers w = {0};
	int err;

	err = targets_blocking(a->targets, pid, &s);
	if (err)
		return err;
	/* The threads watched now; for a target not enabled, those that would be. */
	bw.watching = a->offcpu && !offcpu_collector_workers(a->offcpu, pid, &w);
	if (!bw.watching) {
		config_get_workers(a, prefix);
		workers_find(pid, prefix, &w);
	}
	bw = (struct blocking_workers){
		.watching = bw.watching,
		.threshold_ms = config_get(a, CONFIG_BLOCKING_THRESHOLD_MS),
		.found_by = workers_found_by_name(w.found_by),
		.pattern = w.pattern,
		.tids = w.tids,
		.ntids = w.n,
	};
	err = view_blocking_json(s, &bw, out);
	workers_fini(&w);
	blocking_snapshot_free(s);
	return err;
}
