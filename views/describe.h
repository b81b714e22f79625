/* Words the views share for what a profile covers. Internal to views/. */
#ifndef APERTURE_VIEWS_DESCRIBE_H
#define APERTURE_VIEWS_DESCRIBE_H

#include <stddef.h>
#include <stdint.h>
#include "views/views.h"

/* ISO 8601 UTC, "2026-11-21T14:03:05Z". Returns 0 or -EINVAL. */
int describe_time(int64_t sec, char out[32]);
/* "last 30 s" or "since 2026-11-21T14:03:05Z". Returns 0 or -EINVAL. */
int describe_window(const struct view_meta *m, int64_t since, char *out, size_t size);

#endif
