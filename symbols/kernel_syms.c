// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "symbols/addr_table.h"
#include "symbols/kallsyms.h"
#include "symbols/kernel_syms.h"
#include "symbols/ksym_events.h"

/* Code the kernel reported loading, with its extent. */
struct loaded_code {
	uint64_t addr;		/* first: see addr_table.h */
	uint64_t end;
	char *name;
};

struct kernel_syms {
	pthread_mutex_t lock;		/* everything below */
	struct kallsyms *table;		/* NULL when kallsyms could not be read */
	int64_t read_ms;		/* CLOCK_MONOTONIC, when it was */
	bool started;			/* table and events were set up */
	struct ksym_events *events;	/* NULL: nothing reports loads */
	bool lost;			/* reports were lost since table was read */
	struct loaded_code *loaded;	/* sorted by addr, not overlapping */
	size_t nloaded, cap;
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The first entry of loaded that ends past addr: the one holding it, if any. */
static size_t loaded_index(const struct kernel_syms *ks, uint64_t addr)
{
	size_t i = addr_table_upper_bound(ks->loaded, ks->nloaded, sizeof(*ks->loaded), addr);

	return i && ks->loaded[i - 1].end > addr ? i - 1 : i;
}

/* Forgets the code overlapping [addr, end): unloaded, or replaced by what loads there. */
static void forget_range(struct kernel_syms *ks, uint64_t addr, uint64_t end)
{
	size_t i = loaded_index(ks, addr), j = i;

	while (j < ks->nloaded && ks->loaded[j].addr < end)
		free(ks->loaded[j++].name);
	if (j == i)
		return; /* loaded may be NULL */
	memmove(&ks->loaded[i], &ks->loaded[j], (ks->nloaded - j) * sizeof(ks->loaded[0]));
	ks->nloaded -= j - i;
}

static void on_record(void *ctx, const struct ksym_record *r)
{
	struct kernel_syms *ks = ctx;
	uint64_t end = r->addr + r->len;
	struct loaded_code *grown;
	char *name;
	size_t i;

	if (end <= r->addr)
		return;
	forget_range(ks, r->addr, end);
	if (r->unregister)
		return;
	if (ks->nloaded == ks->cap) {
		size_t cap = ks->cap ? 2 * ks->cap : 64;

		grown = reallocarray(ks->loaded, cap, sizeof(*grown));
		if (!grown) {
			ks->lost = true;
			return;
		}
		ks->loaded = grown;
		ks->cap = cap;
	}
	name = strdup(r->name);
	if (!name) {
		ks->lost = true;
		return;
	}
	i = loaded_index(ks, r->addr);
	memmove(&ks->loaded[i + 1], &ks->loaded[i], (ks->nloaded - i) * sizeof(ks->loaded[0]));
	ks->loaded[i] = (struct loaded_code){ .addr = r->addr, .end = end, .name = name };
	ks->nloaded++;
}

int kernel_syms_new(struct kernel_syms **out)
{
	struct kernel_syms *ks = calloc(1, sizeof(*ks));

	if (!ks)
		return -ENOMEM;
	pthread_mutex_init(&ks->lock, NULL);
	*out = ks;
	return 0;
}

/* Under ks->lock, at the first name asked: not at kernel_syms_new, because the daemon forks
 * after it, and the kernel does not copy perf ring mappings (VM_DONTCOPY) into a child. */
static void start(struct kernel_syms *ks)
{
	ks->started = true;
	/* Reports first: code loaded while kallsyms is read is then reported too. */
	if (ksym_events_open(&ks->events))
		ks->events = NULL;
	if (kallsyms_load("/proc/kallsyms", &ks->table))
		ks->table = NULL;
	ks->read_ms = mono_ms();
}

void kernel_syms_free(struct kernel_syms *ks)
{
	if (!ks)
		return;
	forget_range(ks, 0, UINT64_MAX);
	free(ks->loaded);
	ksym_events_free(ks->events);
	kallsyms_free(ks->table);
	pthread_mutex_destroy(&ks->lock);
	free(ks);
}

/* Under ks->lock. */
static void reread(struct kernel_syms *ks, int64_t now)
{
	struct kallsyms *fresh;

	ks->read_ms = now;
	if (kallsyms_load("/proc/kallsyms", &fresh))
		return;
	kallsyms_free(ks->table);
	ks->table = fresh;
	/* After lost reports, what was reported may have been unloaded since and its address
	 * reused: the fresh kallsyms has every program loaded now. */
	if (ks->lost)
		forget_range(ks, 0, UINT64_MAX);
	ks->lost = false;
}

void kernel_syms_drop(struct kernel_syms *ks)
{
	pthread_mutex_lock(&ks->lock);
	forget_range(ks, 0, UINT64_MAX);
	free(ks->loaded);
	ks->loaded = NULL;
	ks->cap = 0;
	ksym_events_free(ks->events);
	ks->events = NULL;
	kallsyms_free(ks->table);
	ks->table = NULL;
	ks->lost = false;
	ks->started = false;
	pthread_mutex_unlock(&ks->lock);
}

/* Under ks->lock: the name into buf, 0, -ENOENT or -ENOSPC; *stale as kallsyms_name's. */
static int lookup(struct kernel_syms *ks, uint64_t addr, char *buf, size_t len, bool *stale)
{
	size_t i = loaded_index(ks, addr);

	*stale = false;
	if (i < ks->nloaded && ks->loaded[i].addr <= addr)
		return snprintf(buf, len, "%s", ks->loaded[i].name) < (int)len ? 0 : -ENOSPC;
	return ks->table ? kallsyms_name(ks->table, addr, buf, len, stale) : -ENOENT;
}

int kernel_syms_name(struct kernel_syms *ks, uint64_t addr, char *buf, size_t len)
{
	bool stale, ring_lost;
	int64_t age;
	int err;

	pthread_mutex_lock(&ks->lock);
	if (!ks->started)
		start(ks);
	ring_lost = ks->events && ksym_events_read(ks->events, on_record, ks);
	if (ring_lost)
		ks->lost = true;
	/* A lost report may be an unload whose address a newer program took, or the load of the
	 * very code being named: nothing reported can be trusted until kallsyms is read again,
	 * whatever the name found, and a wrong name would stay in the collectors' caches of
	 * named stacks. So a ring that overflowed makes the read at once: it held hundreds of
	 * reports since the last read, which bounds how often that happens. */
	if (ks->lost && ks->events && ks->table &&
	    (ring_lost || mono_ms() - ks->read_ms >= KERNEL_SYMS_REREAD_MS))
		reread(ks, mono_ms());
	err = lookup(ks, addr, buf, len, &stale);
	if (stale && ks->table) {
		/* What is reported is known exactly: only what is not (modules, lost reports,
		 * no reports at all) needs kallsyms again. */
		age = mono_ms() - ks->read_ms;
		if ((age >= KERNEL_SYMS_REREAD_MS && (ks->lost || !ks->events)) ||
		    (err == -ENOENT && age >= KERNEL_SYMS_REREAD_GAP_MS)) {
			reread(ks, age + ks->read_ms);
			err = lookup(ks, addr, buf, len, &stale);
		}
	}
	pthread_mutex_unlock(&ks->lock);
	return err;
}
