#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "collectors/cpu.h"
#include "collectors/offcpu.h"
#include "daemon/aperture.h"
#include "daemon/rules.h"
#include "daemon/value.h"
#include "store/profile.h"
#include "symbols/symbols.h"
#include "views/writer.h"
#include "sync/client.h"

#define CONFIG_STRING_MAX 4096

/* Indexed by enum cpu_unwind. */
static const char *const unwind_words[] = { "fp", "dwarf", "auto", NULL };

const struct config_desc config_descs[CONFIG_NR] = {
	/* The kernel's own ceiling (kernel.perf_event_max_sample_rate) may be lower: the
	 * collector's attempt to apply the rate is the final check. */
	[CONFIG_FREQUENCY_HZ] = { "frequency_hz", 1, 10000, 99, "Hz" },
	[CONFIG_RETAIN_EXITED_S] = { "retain_exited_s", 0, 7 * 86400, 300, "seconds" },
	[CONFIG_UNWIND] = { "unwind", 0, CPU_UNWIND_AUTO, CPU_UNWIND_AUTO, "fp, dwarf or auto",
			    unwind_words },
	[CONFIG_DEMANGLE] = { "demangle", 0, 1, 1, "(0 raw names, 1 demangled)" },
	[CONFIG_DEBUG_DIRS] = { "debug_dirs", .unit = "absolute directories separated by ':'",
				.string = true },
	/* A window can't reach further back than the store keeps per-second counts. */
	[CONFIG_WINDOW_S] = { "window_s", 0, PROFILE_HISTORY_S, 0, "seconds" },
	/* JVMTI's default, as async-profiler's: one sample per 512 KiB allocated, on average. */
	[CONFIG_JVM_ALLOC_INTERVAL] = { "jvm_alloc_interval_bytes", 1024, 1ULL << 30, 512 * 1024,
					"bytes" },
	[CONFIG_OFFCPU_MIN_US] = { "offcpu_min_us", 0, 10000000, 1, "microseconds" },
	[CONFIG_BLOCKING_THRESHOLD_MS] = { "blocking_threshold_ms", 1, 3600000, 5,
					   "milliseconds" },
	[CONFIG_WORKERS] = { "workers", .unit = "a thread-name prefix", .string = true },
	/* Waiting stacks listed per lock in locks.json; locks.folded has them all. */
	[CONFIG_LOCK_STACKS] = { "lock_stacks", 1, 100, 5, "stacks" },
	/* For a JVM where no code may be loaded: native profiling only, nothing attached. */
	[CONFIG_JVM_ATTACH] = { "jvm_attach", 0, 1, 1, "(0 native profiling only, 1 attach)" },
	/* What the profiles may hold together: 20 ordinary targets take a few MB, so this is
	 * room for many targets with many stacks, and the daemon stays well under 250 MB. */
	[CONFIG_MEMORY_MB] = { "memory_mb", 1, 1 << 20, 128, "MiB" },
	[CONFIG_SYNC] = { "sync", .unit = "an aggregator's URL, or empty", .string = true },
	/* Each second must be shipped while the store still has it by itself: it keeps
	 * per-second counts for the last minute (then 10-second groups). */
	[CONFIG_SYNC_INTERVAL_S] = { "sync_interval_s", 1, 30, 10, "seconds" },
	/* Unacknowledged batches kept on disk; past it the oldest are dropped, counted. */
	[CONFIG_SYNC_SPOOL_MB] = { "sync_spool_mb", 1, 1 << 20, 64, "MiB" },
	/* Each enabled target costs perf events on every CPU and a profile in memory. */
	[CONFIG_MAX_TARGETS] = { "max_targets", 1, 100000, 256, "targets" },
	[CONFIG_LABELS] = { "labels", .unit = "KEY=VALUE words", .string = true },
};

void config_init(struct aperture *a)
{
	pthread_mutex_init(&a->config_str_lock, NULL);
	for (int k = 0; k < CONFIG_NR; k++)
		atomic_store(&a->config[k], config_descs[k].def);
	profile_set_budget(config_descs[CONFIG_MEMORY_MB].def << 20);
}

void config_fini(struct aperture *a)
{
	for (int k = 0; k < CONFIG_NR; k++)
		free(a->config_str[k]);
	pthread_mutex_destroy(&a->config_str_lock);
}

/* A list of directories: absolute paths of existing directories, ':' between them; empty
 * is an empty list. On error the reason is in why. */
static int check_dirs(const char *v, char *why, size_t whylen)
{
	const char *p = v;
	char dir[PATH_MAX];
	struct stat st;

	if (!*v)
		return 0;
	/* An empty entry is refused wherever it is: "/tmp:" as "/tmp::/usr". */
	for (;;) {
		size_t n = strcspn(p, ":");

		if (n == 0 || p[0] != '/' || n >= sizeof(dir)) {
			snprintf(why, whylen, "each directory must be an absolute path");
			return -EINVAL;
		}
		memcpy(dir, p, n);
		dir[n] = '\0';
		if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
			snprintf(why, whylen, "%.*s is not a directory", (int)(whylen / 2), dir);
			return -EINVAL;
		}
		if (!p[n])
			return 0;
		p += n + 1;
	}
}

/* At most a thread name's length, and no character a thread name can't hold. */
static int check_thread_prefix(const char *v, char *why, size_t whylen)
{
	if (strlen(v) >= CONFIG_WORKERS_LEN) {
		snprintf(why, whylen, "a thread name has at most %d characters",
			 CONFIG_WORKERS_LEN - 1);
		return -EINVAL;
	}
	if (!utf8_valid(v)) {
		snprintf(why, whylen, "not UTF-8");
		return -EINVAL;
	}
	for (const char *p = v; *p; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '/') {
			snprintf(why, whylen, "a thread name has no '/' or control characters");
			return -EINVAL;
		}
	}
	return 0;
}

static int write_string(struct aperture *a, enum config_key key, const char *buf, size_t len)
{
	const struct config_desc *d = &config_descs[key];
	char why[200], *v;
	int err;

	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len >= CONFIG_STRING_MAX) {
		aperture_set_error(a, "config/%s: longer than %d bytes", d->name,
				   CONFIG_STRING_MAX - 1);
		return -ERANGE;
	}
	v = strndup(buf, len);
	if (!v)
		return -ENOMEM;
	err = strlen(v) != len ? -EINVAL : 0; /* a NUL inside */
	if (err)
		snprintf(why, sizeof(why), "contains a NUL byte");
	if (!err && key == CONFIG_DEBUG_DIRS)
		err = check_dirs(v, why, sizeof(why));
	if (!err && key == CONFIG_WORKERS)
		err = check_thread_prefix(v, why, sizeof(why));
	if (!err && key == CONFIG_SYNC)
		err = sync_check_url(v, why, sizeof(why));
	if (!err && key == CONFIG_LABELS)
		err = labels_check(v, why, sizeof(why));
	if (err) {
		aperture_set_error(a, "config/%s: %s", d->name, why);
		free(v);
		return err;
	}
	if (key == CONFIG_DEBUG_DIRS)
		symbolizer_set_debug_dirs(a->syms, v);
	if (key == CONFIG_WORKERS && a->offcpu)
		offcpu_collector_set_workers(a->offcpu, v);
	pthread_mutex_lock(&a->config_str_lock);
	free(a->config_str[key]);
	a->config_str[key] = v;
	pthread_mutex_unlock(&a->config_str_lock);
	return 0;
}

uint64_t config_get(struct aperture *a, enum config_key key)
{
	return atomic_load(&a->config[key]);
}

int config_read(struct aperture *a, enum config_key key, FILE *out)
{
	int n;

	if (config_descs[key].string) {
		pthread_mutex_lock(&a->config_str_lock);
		n = fprintf(out, "%s\n", a->config_str[key] ? a->config_str[key] : "");
		pthread_mutex_unlock(&a->config_str_lock);
		return n < 0 ? -EIO : 0;
	}
	if (config_descs[key].words)
		return fprintf(out, "%s\n", config_descs[key].words[config_get(a, key)]) < 0 ?
			       -EIO : 0;
	return fprintf(out, "%llu\n", (unsigned long long)config_get(a, key)) < 0 ? -EIO : 0;
}

int config_write(struct aperture *a, enum config_key key, const char *buf, size_t len)
{
	const struct config_desc *d = &config_descs[key];
	char shown[64], why[200];
	uint64_t v;
	int err;

	if (d->string)
		return write_string(a, key, buf, len);
	if (d->words)
		err = value_parse_word(buf, len, d->words, &v);
	else
		err = value_parse_uint(buf, len, d->min, d->max, &v);
	if (err == -EINVAL && d->words) {
		value_quote(buf, len, shown, sizeof(shown));
		aperture_set_error(a, "config/%s: \"%s\" is not one of %s", d->name, shown,
				   d->unit);
		return err;
	} else if (err) {
		value_quote(buf, len, shown, sizeof(shown));
		if (err == -ERANGE)
			aperture_set_error(a, "config/%s: \"%s\" is out of range %llu..%llu %s",
					   d->name, shown, (unsigned long long)d->min,
					   (unsigned long long)d->max, d->unit);
		else
			aperture_set_error(a, "config/%s: \"%s\" is not a whole number of %s",
					   d->name, shown, d->unit);
		return err;
	}
	if (key == CONFIG_FREQUENCY_HZ && a->cpu) {
		err = cpu_collector_set_frequency(a->cpu, v, why, sizeof(why));
		if (err) {
			aperture_set_error(a, "config/%s: %llu %s refused: %s", d->name,
					   (unsigned long long)v, d->unit, why);
			return err == -EINVAL ? -ERANGE : err;
		}
	}
	if (key == CONFIG_UNWIND && a->cpu)
		cpu_collector_set_unwind(a->cpu, v);
	if (key == CONFIG_MEMORY_MB)
		profile_set_budget(v << 20);
	if (key == CONFIG_DEMANGLE) {
		symbolizer_set_demangle(a->syms, v);
		if (a->cpu)
			cpu_collector_forget_names(a->cpu);
	}
	atomic_store(&a->config[key], v);
	if ((key == CONFIG_OFFCPU_MIN_US || key == CONFIG_BLOCKING_THRESHOLD_MS) && a->offcpu)
		offcpu_collector_set_limits(a->offcpu, config_get(a, CONFIG_OFFCPU_MIN_US),
					    config_get(a, CONFIG_BLOCKING_THRESHOLD_MS));
	return 0;
}

void config_get_workers(struct aperture *a, char buf[CONFIG_WORKERS_LEN])
{
	pthread_mutex_lock(&a->config_str_lock);
	snprintf(buf, CONFIG_WORKERS_LEN, "%s", a->config_str[CONFIG_WORKERS] ?
		 a->config_str[CONFIG_WORKERS] : "");
	pthread_mutex_unlock(&a->config_str_lock);
}

void config_get_labels(struct aperture *a, char *buf, size_t size)
{
	pthread_mutex_lock(&a->config_str_lock);
	snprintf(buf, size, "%s", a->config_str[CONFIG_LABELS] ? a->config_str[CONFIG_LABELS] : "");
	pthread_mutex_unlock(&a->config_str_lock);
}
