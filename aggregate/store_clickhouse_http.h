/* Talking to ClickHouse over its HTTP interface (libcurl): a statement with an optional
 * RowBinary body, and the answer's bytes. Inserts are RowBinary, built with chb_*; reads ask
 * for JSONCompact, whose trailer says how many rows the server read and how long it took. */
#ifndef APERTURE_AGGREGATE_STORE_CLICKHOUSE_HTTP_H
#define APERTURE_AGGREGATE_STORE_CLICKHOUSE_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct ch_server {
	char base[512];       /* http://HOST:PORT/ */
	char db[128];
	long timeout_s;       /* of a whole request */
};

/* A growing byte buffer: a RowBinary body being built, or an answer. */
struct chbuf {
	char *data;
	size_t len, cap;
	int err;              /* -ENOMEM once a put failed; the puts then do nothing */
};

void chb_free(struct chbuf *b);
void chb_bytes(struct chbuf *b, const void *p, size_t n);
void chb_u8(struct chbuf *b, uint8_t v);
void chb_u16(struct chbuf *b, uint16_t v);
void chb_u32(struct chbuf *b, uint32_t v);
void chb_u64(struct chbuf *b, uint64_t v);
void chb_varint(struct chbuf *b, uint64_t v);
/* RowBinary String: varint length, bytes (NULL is ""). */
void chb_str(struct chbuf *b, const char *s);
void chb_printf(struct chbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Runs sql (settings: "&name=value..." URL parameters, or NULL) with body as its data, if
 * any; the answer into *out (NUL-terminated, the caller frees) when out is not NULL.
 * -ECONNREFUSED / -ETIMEDOUT / -EIO (a server error: its text in why). */
int ch_run(const struct ch_server *srv, const char *sql, const char *settings,
	   const struct chbuf *body, struct chbuf *out, char *why, size_t why_size);

/* Runs n statements with their bodies at once (inserts into different tables): 0 when every
 * one succeeded, else the first error with its text in why. */
int ch_run_all(const struct ch_server *srv, size_t n, const char *const *sqls,
	       const struct chbuf *const *bodies, char *why, size_t why_size);

/* A SQL string literal of s, quoted and escaped, appended to b. */
void chb_quote(struct chbuf *b, const char *s);

#endif
