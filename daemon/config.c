#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "collectors/cpu.h"
#include "daemon/aperture.h"
#include "daemon/value.h"

const struct config_desc config_descs[CONFIG_NR] = {
	/* The kernel's own ceiling (kernel.perf_event_max_sample_rate) may be lower: the
	 * collector's attempt to apply the rate is the final check. */
	[CONFIG_FREQUENCY_HZ] = { "frequency_hz", 1, 10000, 99, "Hz" },
	[CONFIG_RETAIN_EXITED_S] = { "retain_exited_s", 0, 7 * 86400, 300, "seconds" },
	/* Waiting stacks listed per lock in locks.json; locks.folded has them all. */
	[CONFIG_LOCK_STACKS] = { "lock_stacks", 1, 100, 5, "stacks" },
};

void config_init(struct aperture *a)
{
	for (int k = 0; k < CONFIG_NR; k++)
		atomic_store(&a->config[k], config_descs[k].def);
}

uint64_t config_get(struct aperture *a, enum config_key key)
{
	return atomic_load(&a->config[key]);
}

int config_read(struct aperture *a, enum config_key key, FILE *out)
{
	return fprintf(out, "%llu\n", (unsigned long long)config_get(a, key)) < 0 ? -EIO : 0;
}

int config_write(struct aperture *a, enum config_key key, const char *buf, size_t len)
{
	const struct config_desc *d = &config_descs[key];
	char shown[64], why[200];
	uint64_t v;
	int err;

	err = value_parse_uint(buf, len, d->min, d->max, &v);
	if (err) {
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
	atomic_store(&a->config[key], v);
	return 0;
}
