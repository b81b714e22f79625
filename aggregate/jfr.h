/* Java Flight Recorder recordings into profiles (aggregate/jfr.c), for pyroscope-java's
 * POST /ingest?format=jfr: jdk.ExecutionSample -> cpu (one sample each);
 * jdk.ObjectAllocationInNewTLAB (its TLAB's size), jdk.ObjectAllocationOutsideTLAB (the
 * object's size) and jdk.ObjectAllocationSample (its weight) -> alloc bytes, and one
 * alloc_objects sample each. */
#ifndef APERTURE_AGGREGATE_JFR_H
#define APERTURE_AGGREGATE_JFR_H

#include <stddef.h>
#include <stdint.h>
#include "aggregate/pyroscope.h"

/* buf: a whole recording (one chunk or more). Stacks root first under the frame app, frames
 * package.Class.method, at second sec. -EINVAL malformed, -ENOTSUP no event Aperture keeps
 * (why says which), -ENOMEM. */
int jfr_parse(struct pyro_push *ps, const char *app, const uint8_t *buf, size_t len,
	      int64_t sec, char *why, size_t why_size);

#endif
