// SPDX-License-Identifier: GPL-2.0
/* Rows of the store are grouped here into what a reader asks about: a system call (its rows
 * by errno) or a lock (its rows by holder and waiting stack). Times are nanoseconds. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "views/sysstats_json.h"
#include "views/syscall_names.h"

#define UNITS_TEXT "times in nanoseconds; histogram bucket {from_ns, to_ns} counts events " \
		   "taking from_ns <= t < to_ns (log2 buckets, the last one open-ended)"

static int cmp_rows(const void *a, const void *b)
{
	const struct sys_row *x = a, *y = b;

	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->kind == SYS_ROW_CALL && x->a != y->a)
		return x->a < y->a ? -1 : 1;
	if (x->kind != SYS_ROW_CALL && x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return 0;
}

static cJSON *histogram(const struct latency *l)
{
	cJSON *arr = cJSON_CreateArray();

	for (int i = 0; arr && i < LATENCY_HIST; i++) {
		cJSON *b;

		if (!l->hist[i])
			continue;
		b = cJSON_CreateObject();
		if (!b || !cJSON_AddItemToArray(arr, b)) {
			cJSON_Delete(b);
			break;
		}
		cJSON_AddNumberToObject(b, "from_ns", i ? (double)(1ull << i) : 0);
		if (i < LATENCY_HIST - 1)
			cJSON_AddNumberToObject(b, "to_ns", (double)(1ull << (i + 1)));
		else
			cJSON_AddNullToObject(b, "to_ns");
		cJSON_AddNumberToObject(b, "count", (double)l->hist[i]);
	}
	return arr;
}

/* count/total/max/mean and the histogram of l, into obj; count named count_name. */
static void add_latency(cJSON *obj, const char *count_name, const struct latency *l)
{
	cJSON_AddNumberToObject(obj, count_name, (double)l->count);
	cJSON_AddNumberToObject(obj, "total_ns", (double)l->total_ns);
	cJSON_AddNumberToObject(obj, "max_ns", (double)l->max_ns);
	cJSON_AddNumberToObject(obj, "mean_ns", l->count ? (double)(l->total_ns / l->count) : 0);
	cJSON_AddItemToObject(obj, "histogram", histogram(l));
}

static int print(cJSON *root, FILE *out)
{
	char *text = root ? cJSON_Print(root) : NULL;
	int err = 0;

	if (!text)
		err = -ENOMEM;
	else if (fputs(text, out) < 0 || fputc('\n', out) < 0)
		err = -EIO;
	free(text);
	cJSON_Delete(root);
	return err;
}

static double total_of(const cJSON *item)
{
	return cJSON_GetObjectItem(item, "total_ns")->valuedouble;
}

static int cmp_total_desc(const void *a, const void *b)
{
	double x = total_of(*(cJSON *const *)a), y = total_of(*(cJSON *const *)b);

	return (x < y) - (x > y);
}

/* Reorders the items of arr by total_ns, largest first. */
static int sort_by_total(cJSON *arr)
{
	int n = cJSON_GetArraySize(arr);
	cJSON **items = malloc((n ? n : 1) * sizeof(*items));

	if (!items)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		items[i] = cJSON_DetachItemFromArray(arr, 0);
	qsort(items, n, sizeof(*items), cmp_total_desc);
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(arr, items[i]);
	free(items);
	return 0;
}

static const char *errno_name(uint32_t e, char *buf, size_t len)
{
	const char *name = strerrorname_np(e);

	if (name)
		return name;
	snprintf(buf, len, "E%u", e);
	return buf;
}

static const char *syscall_name(uint32_t nr, char *buf, size_t len)
{
	if (nr < syscall_names_count && syscall_names[nr])
		return syscall_names[nr];
	snprintf(buf, len, "syscall_%u", nr);
	return buf;
}

int view_syscalls_json(const struct sys_snapshot *s, FILE *out)
{
	cJSON *root = cJSON_CreateObject(), *calls;
	struct sys_row *rows = malloc((s->nrows ? s->nrows : 1) * sizeof(*rows));
	char buf[32];

	cJSON_AddStringToObject(root, "units", UNITS_TEXT);
	calls = cJSON_AddArrayToObject(root, "syscalls");
	if (!rows || !calls) {
		free(rows);
		cJSON_Delete(root);
		return -ENOMEM;
	}
	memcpy(rows, s->rows, s->nrows * sizeof(*rows));
	qsort(rows, s->nrows, sizeof(*rows), cmp_rows);
	for (size_t i = 0; i < s->nrows;) {
		struct latency all = {0};
		uint64_t errors = 0;
		cJSON *call, *errnos;
		size_t j;

		if (rows[i].kind != SYS_ROW_CALL) {
			i++;
			continue;
		}
		call = cJSON_CreateObject();
		cJSON_AddItemToArray(calls, call);
		cJSON_AddStringToObject(call, "name", syscall_name(rows[i].a, buf, sizeof(buf)));
		cJSON_AddNumberToObject(call, "nr", rows[i].a);
		errnos = cJSON_CreateObject();
		for (j = i; j < s->nrows && rows[j].kind == SYS_ROW_CALL && rows[j].a == rows[i].a;
		     j++) {
			latency_add(&all, &rows[j].lat);
			if (!rows[j].b)
				continue;
			errors += rows[j].lat.count;
			cJSON_AddNumberToObject(errnos, errno_name(rows[j].b, buf, sizeof(buf)),
						(double)rows[j].lat.count);
		}
		add_latency(call, "count", &all);
		cJSON_AddNumberToObject(call, "errors", (double)errors);
		cJSON_AddItemToObject(call, "errnos", errnos);
		i = j;
	}
	free(rows);
	if (sort_by_total(calls)) {
		cJSON_Delete(root);
		return -ENOMEM;
	}
	return print(root, out);
}

/* A thread (holder) or a stack of one lock, summed over its rows. */
static void add_part(cJSON *arr, const char *key, const char *name, uint32_t tid,
		     const struct latency *l)
{
	cJSON *it;
	int n = cJSON_GetArraySize(arr);

	for (int i = 0; i < n; i++) {
		it = cJSON_GetArrayItem(arr, i);
		if (strcmp(cJSON_GetObjectItem(it, key)->valuestring, name) ||
		    (tid && cJSON_GetObjectItem(it, "tid")->valuedouble != tid))
			continue;
		cJSON_SetNumberValue(cJSON_GetObjectItem(it, "waits"),
				     cJSON_GetObjectItem(it, "waits")->valuedouble + l->count);
		cJSON_SetNumberValue(cJSON_GetObjectItem(it, "total_ns"),
				     cJSON_GetObjectItem(it, "total_ns")->valuedouble + l->total_ns);
		return;
	}
	it = cJSON_CreateObject();
	cJSON_AddItemToArray(arr, it);
	if (tid)
		cJSON_AddNumberToObject(it, "tid", tid);
	cJSON_AddStringToObject(it, key, name);
	cJSON_AddNumberToObject(it, "waits", (double)l->count);
	cJSON_AddNumberToObject(it, "total_ns", (double)l->total_ns);
}

static void truncate_array(cJSON *arr, unsigned keep)
{
	while ((unsigned)cJSON_GetArraySize(arr) > keep)
		cJSON_DeleteItemFromArray(arr, cJSON_GetArraySize(arr) - 1);
}

static const char *klock_type(uint32_t flags)
{
	/* LCB_F_* of include/trace/events/lock.h */
	if (flags & (1u << 5))
		return "mutex";
	if (flags & (1u << 4))
		return flags & (1u << 2) ? "percpu-rwsem:write" : "percpu-rwsem:read";
	if (flags & (1u << 3))
		return "rtmutex";
	if (flags & (1u << 0))
		return flags & (1u << 1) ? "rwlock:read" : flags & (1u << 2) ? "rwlock:write"
									  : "spinlock";
	if (flags & (1u << 1))
		return "rwsem:read";
	if (flags & (1u << 2))
		return "rwsem:write";
	return "other";
}

int view_locks_json(const struct sys_snapshot *s, unsigned top_stacks, const char *kernel_error,
		    FILE *out)
{
	cJSON *root = cJSON_CreateObject(), *locks, *klocks = NULL;
	struct sys_row *rows = malloc((s->nrows ? s->nrows : 1) * sizeof(*rows));
	char addr[32];

	cJSON_AddStringToObject(root, "units", UNITS_TEXT);
	locks = cJSON_AddArrayToObject(root, "locks");
	if (!rows || !locks) {
		free(rows);
		cJSON_Delete(root);
		return -ENOMEM;
	}
	memcpy(rows, s->rows, s->nrows * sizeof(*rows));
	qsort(rows, s->nrows, sizeof(*rows), cmp_rows);
	if (kernel_error) {
		cJSON_AddNullToObject(root, "kernel_locks");
		cJSON_AddStringToObject(root, "kernel_locks_error", kernel_error);
	} else {
		klocks = cJSON_AddArrayToObject(root, "kernel_locks");
	}
	for (size_t i = 0, j; i < s->nrows; i = j) {
		struct latency all = {0};
		cJSON *lock = cJSON_CreateObject(), *holders = NULL, *stacks = NULL;

		snprintf(addr, sizeof(addr), "0x%llx", (unsigned long long)rows[i].addr);
		cJSON_AddStringToObject(lock, "address", addr);
		if (rows[i].kind == SYS_ROW_LOCK) {
			holders = cJSON_CreateArray();
			stacks = cJSON_CreateArray();
		} else if (rows[i].kind == SYS_ROW_KLOCK) {
			cJSON_AddStringToObject(lock, "symbol", rows[i].holder ? rows[i].holder : "");
			cJSON_AddStringToObject(lock, "type", klock_type(rows[i].a));
		}
		for (j = i; j < s->nrows && !cmp_rows(&rows[i], &rows[j]); j++) {
			latency_add(&all, &rows[j].lat);
			if (holders && rows[j].holder)
				add_part(holders, "name", rows[j].holder, rows[j].a, &rows[j].lat);
			if (stacks && rows[j].stack)
				add_part(stacks, "stack", rows[j].stack, 0, &rows[j].lat);
		}
		add_latency(lock, "waits", &all);
		if (holders) {
			if (sort_by_total(holders) || sort_by_total(stacks)) {
				cJSON_Delete(holders);
				cJSON_Delete(stacks);
				cJSON_Delete(lock);
				cJSON_Delete(root);
				free(rows);
				return -ENOMEM;
			}
			truncate_array(stacks, top_stacks);
			cJSON_AddItemToObject(lock, "holders", holders);
			cJSON_AddItemToObject(lock, "stacks", stacks);
		}
		if (rows[i].kind == SYS_ROW_LOCK)
			cJSON_AddItemToArray(locks, lock);
		else if (rows[i].kind == SYS_ROW_KLOCK && klocks)
			cJSON_AddItemToArray(klocks, lock);
		else
			cJSON_Delete(lock);
	}
	free(rows);
	if (sort_by_total(locks) || (klocks && sort_by_total(klocks))) {
		cJSON_Delete(root);
		return -ENOMEM;
	}
	return print(root, out);
}
