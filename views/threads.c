// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "views/frames_json.h"
#include "views/threads.h"
#include "views/views.h"

const char *view_thread_state(char state)
{
	switch (state) {
	case 'R': return "R (running)";
	case 'S': return "S (sleeping)";
	case 'D': return "D (disk sleep)";
	case 'T': return "T (stopped)";
	case 't': return "t (tracing stop)";
	case 'Z': return "Z (zombie)";
	case 'X': return "X (dead)";
	case 'I': return "I (idle)";
	default: return "? (unknown)";
	}
}

static int by_busy(const void *a, const void *b)
{
	const struct thread_info *x = *(const struct thread_info *const *)a;
	const struct thread_info *y = *(const struct thread_info *const *)b;
	uint64_t tx = x->utime_us + x->stime_us, ty = y->utime_us + y->stime_us;

	if (x->recent_us != y->recent_us)
		return x->recent_us < y->recent_us ? 1 : -1;
	if (tx != ty)
		return tx < ty ? 1 : -1;
	return (x->tid > y->tid) - (x->tid < y->tid);
}

const struct thread_info **view_threads_busy_order(const struct thread_list *l)
{
	const struct thread_info **order = calloc(l->n ? l->n : 1, sizeof(*order));

	if (!order)
		return NULL;
	for (size_t i = 0; i < l->n; i++)
		order[i] = &l->v[i];
	qsort(order, l->n, sizeof(*order), by_busy);
	return order;
}

int view_threads_busy(const struct thread_list *l, FILE *out)
{
	const struct thread_info **order = view_threads_busy_order(l);

	if (!order)
		return -ENOMEM;
	if (!l->from_history)
		fprintf(out, "# threads of %d by CPU time since each thread started (never "
			"enabled: no history; enable it for a window)\n", (int)l->pid);
	else if (l->window_s)
		fprintf(out, "# threads of %d by CPU time over the window (window_s %" PRIu64 "): "
			"cpu time over the last %.1f s of history\n", (int)l->pid, l->window_s,
			l->interval_us / 1e6);
	else
		fprintf(out, "# threads of %d by CPU time over the window (window_s 0, since "
			"enable or reset): cpu time over the last %.1f s of history\n", (int)l->pid,
			l->interval_us / 1e6);
	fprintf(out, "# evidence: /proc/%d/task/*/stat utime+stime (clock-tick resolution), %s\n",
		(int)l->pid, l->from_history ? "recorded once a second while enabled; threads that "
		"exited in the window are left out" : "read once at open; cpu% is that time over "
		"the thread's age (starttime)");
	fprintf(out, "# cpu%%  recent_us  total_us  tid  name\n");
	for (size_t i = 0; i < l->n; i++) {
		const struct thread_info *t = order[i];

		uint64_t span = t->span_us ? t->span_us : l->interval_us;

		fprintf(out, "%5.1f %10" PRIu64 " %10" PRIu64 " %d %s\n",
			span ? 100.0 * t->recent_us / span : 0.0, t->recent_us,
			t->utime_us + t->stime_us, (int)t->tid, t->name);
	}
	free(order);
	return 0;
}

/* frames (root first, ';' between them) as `\tat FRAME` lines, leaf first. */
static void print_stack(const char *frames, FILE *out)
{
	const char *end = frames + strlen(frames);

	while (end > frames) {
		const char *start = end;

		while (start > frames && start[-1] != ';')
			start--;
		fprintf(out, "\tat %.*s\n", (int)(end - start), start);
		end = start > frames ? start - 1 : frames;
	}
}

static const struct thread_info *find(const struct thread_list *l, pid_t tid)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].tid == tid)
			return &l->v[i];
	return NULL;
}

static void print_lock_wait(const struct thread_list *l, const struct thread_info *t,
			    const char *indent, FILE *out)
{
	const struct thread_info *holder = find(l, t->lock_owner);

	fprintf(out, "%swaiting to lock mutex 0x%" PRIx64 ", which is held by ", indent,
		t->lock_addr);
	if (holder)
		fprintf(out, "\"%s\" tid=%d\n", holder->name, (int)holder->tid);
	else if (t->lock_owner)
		fprintf(out, "tid=%d\n", (int)t->lock_owner);
	else
		fprintf(out, "an unknown thread\n");
}

static void print_stacks(const struct thread_info *t, FILE *out)
{
	fprintf(out, "   user stack%s:\n", t->ustack ? " (as it went off CPU)" : "");
	if (t->ustack)
		print_stack(t->ustack, out);
	else
		fprintf(out, "\t(not known: enable the target to record it)\n");
	fprintf(out, "   kernel stack:\n");
	if (t->kstack)
		print_stack(t->kstack, out);
	else
		fprintf(out, "\t(not readable)\n");
}

int view_threads_dump(const struct thread_list *l, FILE *out)
{
	fprintf(out, "Native thread dump of process %d: %zu threads\n\n", (int)l->pid, l->n);
	for (size_t i = 0; i < l->n; i++) {
		const struct thread_info *t = &l->v[i];

		fprintf(out, "\"%s\" tid=%d state=%s cpu_us=%" PRIu64 "\n", t->name, (int)t->tid,
			view_thread_state(t->state), t->utime_us + t->stime_us);
		if (t->syscall >= 0)
			fprintf(out, "   in system call number %ld\n", t->syscall);
		if (t->lock_addr)
			print_lock_wait(l, t, "   ", out);
		print_stacks(t, out);
		fputc('\n', out);
	}
	return 0;
}

int view_deadlocks(const struct thread_list *l, const struct deadlock *d, size_t n, FILE *out)
{
	for (size_t k = 0; k < n; k++) {
		fprintf(out, "Found one native deadlock:\n==========================\n");
		for (size_t i = 0; i < d[k].n; i++) {
			const struct thread_info *t = &l->v[d[k].at[i]];

			fprintf(out, "\"%s\" tid=%d:\n", t->name, (int)t->tid);
			print_lock_wait(l, t, "  ", out);
		}
		fprintf(out, "\nStack information for the threads listed above:\n"
			"================================================\n");
		for (size_t i = 0; i < d[k].n; i++) {
			const struct thread_info *t = &l->v[d[k].at[i]];

			fprintf(out, "\"%s\" tid=%d:\n", t->name, (int)t->tid);
			print_stacks(t, out);
		}
		fprintf(out, "\nFound %zu deadlock%s.\n\n", k + 1, k ? "s" : "");
	}
	return 0;
}

int view_json_print(cJSON *root, FILE *out)
{
	char *text = cJSON_Print(root);

	cJSON_Delete(root);
	if (!text)
		return -ENOMEM;
	fprintf(out, "%s\n", text);
	free(text);
	return 0;
}

cJSON *view_frames_json(const char *frames)
{
	cJSON *a;
	const char *p = frames;

	if (!frames)
		return cJSON_CreateNull();
	a = cJSON_CreateArray();
	while (a && *p) {
		size_t len = strcspn(p, ";");
		char *name = strndup(p, len);

		if (!name || !cJSON_AddItemToArray(a, cJSON_CreateString(name))) {
			free(name);
			cJSON_Delete(a);
			return NULL;
		}
		free(name);
		p += len + (p[len] == ';');
	}
	return a;
}

static cJSON *thread_json(const struct thread_list *l, const struct thread_info *t)
{
	const struct thread_info *holder = find(l, t->lock_owner);
	cJSON *o = cJSON_CreateObject(), *w = cJSON_CreateObject();
	char addr[32];

	if (!o || !w) {
		cJSON_Delete(o);
		cJSON_Delete(w);
		return NULL;
	}
	snprintf(addr, sizeof(addr), "0x%" PRIx64, t->lock_addr);
	cJSON_AddNumberToObject(o, "tid", t->tid);
	cJSON_AddStringToObject(o, "name", t->name);
	cJSON_AddStringToObject(w, "mutex", addr);
	cJSON_AddNumberToObject(w, "held_by_tid", t->lock_owner);
	cJSON_AddStringToObject(w, "held_by_name", holder ? holder->name : "");
	cJSON_AddItemToObject(o, "waiting_for", w);
	cJSON_AddItemToObject(o, "user_stack", view_frames_json(t->ustack));
	cJSON_AddItemToObject(o, "kernel_stack", view_frames_json(t->kstack));
	return o;
}

int view_deadlocks_json(const struct thread_list *l, const struct deadlock *d, size_t n,
			FILE *out)
{
	cJSON *root, *cycles;

	if (!n)
		return 0;
	root = cJSON_CreateObject();
	cycles = cJSON_AddArrayToObject(root, "deadlocks");
	if (!root || !cycles)
		goto nomem;
	cJSON_AddNumberToObject(root, "pid", l->pid);
	cJSON_AddStringToObject(root, "stacks", "frames root first; user_stack as the thread "
				"went off CPU (null if the target was not enabled)");
	for (size_t k = 0; k < n; k++) {
		cJSON *cycle = cJSON_CreateArray();

		if (!cycle || !cJSON_AddItemToArray(cycles, cycle))
			goto nomem;
		for (size_t i = 0; i < d[k].n; i++) {
			cJSON *t = thread_json(l, &l->v[d[k].at[i]]);

			if (!t || !cJSON_AddItemToArray(cycle, t))
				goto nomem;
		}
	}
	return view_json_print(root, out);
nomem:
	cJSON_Delete(root);
	return -ENOMEM;
}
