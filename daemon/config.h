/* Live settings, one per file under config/. */
#ifndef APERTURE_DAEMON_CONFIG_H
#define APERTURE_DAEMON_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum config_key {
	CONFIG_FREQUENCY_HZ,
	CONFIG_RETAIN_EXITED_S,
	CONFIG_LOCK_STACKS,
	CONFIG_NR,
};

struct config_desc {
	const char *name;  /* file name under config/ */
	uint64_t min, max, def;
	const char *unit;  /* for error messages */
};

extern const struct config_desc config_descs[CONFIG_NR];

struct aperture;

void config_init(struct aperture *a);
uint64_t config_get(struct aperture *a, enum config_key key);
int config_read(struct aperture *a, enum config_key key, FILE *out);
/* Validates and applies one value. -EINVAL (malformed), -ERANGE (out of range), or what
 * applying it returned; on error nothing changes and status shows last_error. */
int config_write(struct aperture *a, enum config_key key, const char *buf, size_t len);

#endif
