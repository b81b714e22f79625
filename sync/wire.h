/* A sync batch on the wire: sync/batch.proto, protobuf-encoded, then gzip'd.
 *
 * The node encodes; the aggregator decodes, with limits, since a batch is untrusted input:
 * its decompressed size is bounded before it is parsed (a decompression bomb stops at the
 * limit), and every index in it is checked, so code that walks a decoded batch needs no
 * checks of its own. */
#ifndef APERTURE_SYNC_WIRE_H
#define APERTURE_SYNC_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include "sync/batch.pb-c.h"

#define WIRE_VERSION 1

typedef Aperture__Sync__V1__Batch WireBatch;

struct wire_limits {
	size_t max_decompressed; /* bytes of protobuf after gunzip */
	size_t max_stacks;
	size_t max_frames;       /* entries of the frame table */
	size_t max_depth;        /* frames of one stack */
	size_t max_targets;
};

/* What an aggregator accepts by default. */
extern const struct wire_limits wire_default_limits;

/* Packs and gzips b into *out (malloc'd, the caller's). 0 or -ENOMEM. */
int wire_encode(const WireBatch *b, uint8_t **out, size_t *len);

/* Gunzips and unpacks buf and checks it against lim. On error *out is NULL and why says what
 * was wrong, for the HTTP answer: -EINVAL malformed or inconsistent, -EPROTONOSUPPORT another
 * version, -E2BIG past a limit, -ENOMEM. Free *out with wire_free. */
int wire_decode(const uint8_t *buf, size_t len, const struct wire_limits *lim, WireBatch **out,
		char *why, size_t whylen);
void wire_free(WireBatch *b);

/* Gunzips buf into *out (malloc'd, the caller's), at most max bytes: -E2BIG past it, -EINVAL
 * for a corrupt or truncated stream (why says which), -ENOMEM. Also for the aggregator's
 * other gzip'd bodies (Pyroscope's pprof). */
int wire_gunzip(const uint8_t *buf, size_t len, size_t max, uint8_t **out, size_t *outlen,
		char *why, size_t whylen);

#endif
