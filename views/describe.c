// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "views/describe.h"

int describe_time(int64_t sec, char out[32])
{
	struct tm tm;

	if (!gmtime_r(&(time_t){ sec }, &tm) || !strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
		return -EINVAL;
	return 0;
}

int describe_window(const struct view_meta *m, int64_t since, char *out, size_t size)
{
	char when[32];

	if (m->window_s > 0) {
		snprintf(out, size, "last %" PRId64 " s", m->window_s);
		return 0;
	}
	if (describe_time(since, when))
		return -EINVAL;
	snprintf(out, size, "since %s", when);
	return 0;
}
