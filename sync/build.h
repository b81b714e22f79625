/* Building a node's batches: what changed since the last batch, as sync/batch.proto says.
 *
 * The builder remembers, per process incarnation (pid, start time), the last second it
 * shipped of each profile, the newest blocking event, and what the latest-state texts were,
 * so each second's counts travel once and an unchanged text does not travel at all. */
#ifndef APERTURE_SYNC_BUILD_H
#define APERTURE_SYNC_BUILD_H

#include <stddef.h>
#include <stdint.h>
#include "sync/wire.h"

struct aperture;
struct sync_builder;

/* Bounds of one part; an interval past them is split into several parts (each its own seq). */
#define SYNC_PART_MAX_STACKS 32768
#define SYNC_PART_MAX_BYTES (8u << 20) /* protobuf, before gzip: about 1-3 MiB on the wire */

/* One encoded part, ready for the spool. */
struct sync_part {
	uint64_t seq;
	uint8_t *data; /* wire_encode()'d; the caller's */
	size_t len;
};

/* node and boot_id are copied. */
int sync_builder_new(const char *node, const char *boot_id, struct sync_builder **out);
void sync_builder_free(struct sync_builder *b);

/* Builds the parts of one interval: counts of seconds before until, other changes as of now.
 * Parts get seq *next_seq, *next_seq + 1, ... and *next_seq moves past them. status is
 * copied into each part. *parts (n of them, possibly 0 when nothing changed) is the caller's:
 * free with sync_parts_free. 0 or -ENOMEM. */
int sync_builder_run(struct sync_builder *b, struct aperture *a, int64_t until,
		     const Aperture__Sync__V1__NodeStatus *status, uint64_t *next_seq,
		     struct sync_part **parts, size_t *n);
void sync_parts_free(struct sync_part *parts, size_t n);

#endif
