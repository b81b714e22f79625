/* Live settings, one per file under config/. */
#ifndef APERTURE_DAEMON_CONFIG_H
#define APERTURE_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum config_key {
	CONFIG_FREQUENCY_HZ,
	CONFIG_RETAIN_EXITED_S,
	CONFIG_UNWIND,
	CONFIG_DEMANGLE,
	CONFIG_DEBUG_DIRS,
	CONFIG_WINDOW_S,
	CONFIG_JVM_ALLOC_INTERVAL,
	CONFIG_OFFCPU_MIN_US,
	CONFIG_BLOCKING_THRESHOLD_MS,
	CONFIG_WORKERS,
	CONFIG_LOCK_STACKS,
	CONFIG_JVM_ATTACH,
	CONFIG_MEMORY_MB,
	CONFIG_SYNC,            /* the aggregator's URL, "" = sync off */
	CONFIG_SYNC_INTERVAL_S,
	CONFIG_SYNC_SPOOL_MB,
	CONFIG_MAX_TARGETS,     /* the most targets rules enable */
	CONFIG_LABELS,          /* the node's labels, "k=v k=v" */
	CONFIG_NR,
};

struct config_desc {
	const char *name;  /* file name under config/ */
	uint64_t min, max, def;
	const char *unit;  /* for error messages */
	/* A setting that is one of these words (min..max index them); NULL for a number. */
	const char *const *words;
	bool string;       /* a text value (config_get_string), not a number */
};

extern const struct config_desc config_descs[CONFIG_NR];

struct aperture;

void config_init(struct aperture *a);
void config_fini(struct aperture *a);
uint64_t config_get(struct aperture *a, enum config_key key);
int config_read(struct aperture *a, enum config_key key, FILE *out);
/* Validates and applies one value. -EINVAL (malformed), -ERANGE (out of range), or what
 * applying it returned; on error nothing changes and status shows last_error. */
int config_write(struct aperture *a, enum config_key key, const char *buf, size_t len);

/* config/workers: the thread-name prefix of runtime worker threads, "" = discover. */
#define CONFIG_WORKERS_LEN 16 /* a thread name's length, with its NUL */
void config_get_workers(struct aperture *a, char buf[CONFIG_WORKERS_LEN]);

/* config/labels, "" for none. */
void config_get_labels(struct aperture *a, char *buf, size_t size);

#endif
