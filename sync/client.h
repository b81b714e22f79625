/* The node's side of remote sync: every config/sync_interval_s a batch of what changed goes
 * into the spool (sync/spool.h), and an uploader thread sends the spool's batches, oldest
 * first, until each is acknowledged. Profiling never waits for either: the builder only reads
 * the store, and the network is the uploader's alone.
 *
 * Exactly once: each batch is (node, boot_id, seq); boot_id is random at each daemon start,
 * seq counts 1, 2, 3... A batch keeps its id on disk, so a resend after a node restart is
 * recognised by the aggregator as the same batch. */
#ifndef APERTURE_SYNC_CLIENT_H
#define APERTURE_SYNC_CLIENT_H

#include <stdio.h>

struct aperture;
struct sync_client;

struct sync_options {
	const char *node;       /* NULL: the host name */
	const char *token_file; /* NULL: no token (an aggregator run with --insecure) */
	const char *spool_dir;  /* NULL: /var/lib/aperture/spool/<node> */
	const char *ca_file;    /* NULL: the system's CAs */
};

#define SYNC_SPOOL_ROOT "/var/lib/aperture/spool"

/* Reads the token. On error why says what failed. */
int sync_client_new(struct aperture *a, const struct sync_options *o, struct sync_client **out,
		    char *why, size_t whylen);
/* Starts the builder and uploader threads; sync itself runs while config/sync holds a URL. */
int sync_client_start(struct sync_client *c);
/* Stops the threads (an upload in flight ends at its timeout) and frees c. */
void sync_client_free(struct sync_client *c);

/* The sync_* lines of the daemon's status. c may be NULL (no sync in this daemon). */
void sync_client_status(struct sync_client *c, FILE *out);

/* config/sync: empty, or an http:// or https:// URL. On error why says what is wrong. */
int sync_check_url(const char *url, char *why, size_t whylen);

#endif
