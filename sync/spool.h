/* The node's spool: batches not yet acknowledged, one file each, in a directory on disk, so
 * neither an aggregator outage nor a node restart loses them.
 *
 * A batch file holds exactly the body that is POSTed (wire_encode()'d), written atomically
 * (a temporary file, fsync, rename, fsync of the directory). Its name orders the spool:
 * <created unix seconds, 12 digits>-<boot_id>-<seq, 20 digits>.batch, oldest first. The
 * spool is bounded: adding past the bound drops the oldest batches first, counted. */
#ifndef APERTURE_SYNC_SPOOL_H
#define APERTURE_SYNC_SPOOL_H

#include <stddef.h>
#include <stdint.h>

struct spool;

struct spool_stats {
	uint64_t bytes, batches;      /* held now */
	int64_t oldest;               /* created time of the oldest held, 0 = none */
	uint64_t dropped;             /* batches dropped because the spool was full */
	uint64_t dropped_samples;     /* the cpu samples those carried */
	int64_t oldest_dropped;       /* created time of the oldest batch dropped, 0 = none */
};

/* Opens (making it, with its parents) dir and lists the batches already in it, left by an
 * earlier run. On error why says what failed. */
int spool_open(const char *dir, uint64_t max_bytes, struct spool **out, char *why, size_t whylen);
void spool_close(struct spool *s);
void spool_set_max(struct spool *s, uint64_t max_bytes);

/* Adds a batch. Drops the oldest batches (never the one being sent, see spool_peek) while the
 * spool would exceed its bound. */
int spool_put(struct spool *s, int64_t created, const char *boot_id, uint64_t seq,
	      const void *data, size_t len);

/* The oldest batch: its name (copied into name) and contents (*data malloc'd, the caller's).
 * It stays in the spool, protected from dropping, until spool_done. -ENOENT if empty. */
int spool_peek(struct spool *s, char *name, size_t namelen, uint8_t **data, size_t *len);
/* The batch peeked is acknowledged (or permanently refused): removes it. */
void spool_done(struct spool *s, const char *name);
/* The batch peeked stays, for a later retry. */
void spool_keep(struct spool *s, const char *name);

void spool_get_stats(struct spool *s, struct spool_stats *out);

#endif
