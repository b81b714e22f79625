// SPDX-License-Identifier: GPL-2.0
/* blocking.json: worker threads that stayed off CPU longer than the threshold. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cjson/cJSON.h>
#include "views/frames_json.h"
#include "views/views.h"

static cJSON *event_json(const struct blocking_event *ev)
{
	cJSON *o = cJSON_CreateObject(), *stack;
	time_t sec = ev->time_ns / 1000000000;
	char when[40];
	struct tm tm;

	if (!o)
		return NULL;
	gmtime_r(&sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when + strlen(when), sizeof(when) - strlen(when), ".%06ldZ",
		 (long)(ev->time_ns % 1000000000 / 1000));
	cJSON_AddStringToObject(o, "time", when);
	cJSON_AddNumberToObject(o, "tid", ev->tid);
	cJSON_AddStringToObject(o, "thread", ev->thread);
	cJSON_AddNumberToObject(o, "duration_us", (double)ev->dur_us);
	cJSON_AddStringToObject(o, "reason", ev->preempted ? "preempted" : "slept");
	cJSON_AddNumberToObject(o, "task_state", ev->state);
	stack = view_frames_json(ev->stack);
	if (!stack || !cJSON_AddItemToObject(o, "stack", stack)) {
		cJSON_Delete(stack);
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

int view_blocking_json(const struct blocking_snapshot *s, const struct blocking_workers *w,
		       FILE *out)
{
	cJSON *root = cJSON_CreateObject(), *units, *workers, *tids, *events;

	units = cJSON_AddObjectToObject(root, "units");
	workers = cJSON_AddObjectToObject(root, "workers");
	tids = cJSON_AddArrayToObject(workers, "tids");
	events = NULL;
	if (!root || !units || !workers || !tids)
		goto nomem;
	cJSON_AddStringToObject(units, "time", "UTC, when the thread went off CPU");
	cJSON_AddStringToObject(units, "duration_us", "microseconds");
	cJSON_AddStringToObject(units, "threshold_ms", "milliseconds");
	cJSON_AddNumberToObject(root, "threshold_ms", (double)w->threshold_ms);
	cJSON_AddBoolToObject(workers, "watching", w->watching);
	cJSON_AddStringToObject(workers, "found_by", w->found_by);
	cJSON_AddStringToObject(workers, "name_prefix", w->pattern);
	for (size_t i = 0; i < w->ntids; i++)
		if (!cJSON_AddItemToArray(tids, cJSON_CreateNumber(w->tids[i])))
			goto nomem;
	cJSON_AddNumberToObject(root, "events_total", (double)s->total);
	cJSON_AddNumberToObject(root, "events_kept", (double)s->n);
	events = cJSON_AddArrayToObject(root, "events");
	if (!events)
		goto nomem;
	for (size_t i = 0; i < s->n; i++) {
		cJSON *e = event_json(&s->events[i]);

		if (!e || !cJSON_AddItemToArray(events, e)) {
			cJSON_Delete(e);
			goto nomem;
		}
	}
	return view_json_print(root, out);
nomem:
	cJSON_Delete(root);
	return -ENOMEM;
}
