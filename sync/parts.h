/* The parts of one interval's batch while they are built. Each part is a Batch message of its
 * own, with its own string, frame and stack tables holding each entry once; a new part starts
 * when the current one is past its bounds. Everything the messages hold lives in one arena,
 * freed at once with the parts. */
#ifndef APERTURE_SYNC_PARTS_H
#define APERTURE_SYNC_PARTS_H

#include <stddef.h>
#include <stdint.h>
#include "store/profile.h"
#include "sync/build.h"
#include "sync/wire.h"

struct parts;

/* node and boot_id must outlive the parts. The first part is started. 0 or -ENOMEM. */
int parts_new(const char *node, const char *boot_id, int64_t created, struct parts **out);
void parts_free(struct parts *ps);

/* The part being filled, and its number (1, 2, ...): what was put in an earlier part must be
 * put again to be referenced from this one. */
WireBatch *parts_cur(struct parts *ps);
size_t parts_number(struct parts *ps);

/* Starts a new part when the current one holds something and is past its bounds, counting
 * more_bytes about to be added. 0 or -ENOMEM. */
int parts_room(struct parts *ps, size_t more_bytes);
/* Counts bytes added to the current part outside the tables (its size is estimated). */
void parts_grow(struct parts *ps, size_t bytes);

/* Zeroed memory and copies that live as long as the parts; NULL when out of memory. */
void *parts_alloc(struct parts *ps, size_t size);
char *parts_strdup(struct parts *ps, const char *s);
/* Appends item to a repeated field (v, n) whose array only this function grows. */
int parts_push(struct parts *ps, void ***v, size_t *n, void *item);

/* Indexes into the current part's tables, each entry added once. NULL or "" is string 0. */
int parts_string(struct parts *ps, const char *s, uint32_t *out);
int parts_frame(struct parts *ps, const char *name, const struct frame_info *info,
		uint32_t *out);
/* lines: the line running in each frame (0 unknown), NULL for none known. */
int parts_stack(struct parts *ps, const uint32_t *frames, const uint32_t *lines,
		uint32_t depth, uint32_t *out);

/* Numbers the parts first_seq, first_seq + 1, ... and encodes them with status; *out (n of
 * them) is the caller's, freed with sync_parts_free. 0 or -ENOMEM. */
int parts_encode(struct parts *ps, uint64_t first_seq,
		 const Aperture__Sync__V1__NodeStatus *status, struct sync_part **out, size_t *n);

#endif
