/* ClickHouse's HTTP interface through libcurl, and the RowBinary encoding of inserts.
 *
 * A request is a POST: an INSERT names itself in the URL (?query=) and sends its rows as
 * the body; anything else sends the statement as the body, so a long IN list is not bound
 * by the URL's length. A non-200 answer carries the server's exception text. */
#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "aggregate/store_clickhouse_http.h"

static void reserve(struct chbuf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 4096;
	char *bigger;

	if (b->err || b->len + more + 1 <= b->cap)
		return;
	while (cap < b->len + more + 1)
		cap *= 2;
	bigger = realloc(b->data, cap);
	if (!bigger) {
		b->err = -ENOMEM;
		return;
	}
	b->data = bigger;
	b->cap = cap;
}

void chb_free(struct chbuf *b)
{
	free(b->data);
	*b = (struct chbuf){0};
}

void chb_bytes(struct chbuf *b, const void *p, size_t n)
{
	reserve(b, n);
	if (b->err)
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = 0;
}

/* RowBinary numbers are little-endian, as this machine's (x86-64, arm64) are. */
void chb_u8(struct chbuf *b, uint8_t v)
{
	chb_bytes(b, &v, sizeof(v));
}

void chb_u16(struct chbuf *b, uint16_t v)
{
	chb_bytes(b, &v, sizeof(v));
}

void chb_u32(struct chbuf *b, uint32_t v)
{
	chb_bytes(b, &v, sizeof(v));
}

void chb_u64(struct chbuf *b, uint64_t v)
{
	chb_bytes(b, &v, sizeof(v));
}

void chb_varint(struct chbuf *b, uint64_t v)
{
	uint8_t out[10];
	size_t n = 0;

	do {
		out[n] = v & 0x7f;
		v >>= 7;
		if (v)
			out[n] |= 0x80;
		n++;
	} while (v);
	chb_bytes(b, out, n);
}

void chb_str(struct chbuf *b, const char *s)
{
	size_t len = s ? strlen(s) : 0;

	chb_varint(b, len);
	chb_bytes(b, s ? s : "", len);
}

void chb_printf(struct chbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->err = -EINVAL;
		return;
	}
	reserve(b, n);
	if (b->err)
		return;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, n + 1, fmt, ap);
	va_end(ap);
	b->len += n;
}

void chb_quote(struct chbuf *b, const char *s)
{
	chb_bytes(b, "'", 1);
	for (; *s; s++) {
		if (*s == '\'' || *s == '\\')
			chb_bytes(b, "\\", 1);
		chb_bytes(b, s, 1);
	}
	chb_bytes(b, "'", 1);
}

static size_t collect(char *data, size_t size, size_t n, void *ctx)
{
	struct chbuf *b = ctx;

	chb_bytes(b, data, size * n);
	return b->err ? 0 : size * n;
}

int ch_run(const struct ch_server *srv, const char *sql, const char *settings,
	   const struct chbuf *body, struct chbuf *out, char *why, size_t why_size)
{
	struct chbuf url = {0}, answer = {0};
	struct curl_slist *headers = NULL;
	CURL *c = curl_easy_init();
	char *esc = NULL;
	long status = 0;
	CURLcode rc;
	int err = 0;

	if (!c)
		return -ENOMEM;
	chb_printf(&url, "%s?database=%s%s", srv->base, srv->db, settings ? settings : "");
	if (body) {
		esc = curl_easy_escape(c, sql, 0);
		chb_printf(&url, "&query=%s", esc ? esc : "");
	}
	if (url.err || (body && !esc)) {
		err = -ENOMEM;
		goto out;
	}
	headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
	headers = curl_slist_append(headers, "Expect:");
	curl_easy_setopt(c, CURLOPT_URL, url.data);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? (body->data ? body->data : "") : sql);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
			 (curl_off_t)(body ? body->len : strlen(sql)));
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &answer);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, srv->timeout_s);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	rc = curl_easy_perform(c);
	if (rc != CURLE_OK) {
		snprintf(why, why_size, "ClickHouse at %s: %s", srv->base, curl_easy_strerror(rc));
		err = rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT :
		      rc == CURLE_COULDNT_CONNECT ? -ECONNREFUSED : -EIO;
		goto out;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (answer.err) {
		err = answer.err;
	} else if (status != 200) {
		snprintf(why, why_size, "ClickHouse answered %ld: %.300s", status,
			 answer.data ? answer.data : "");
		err = -EIO;
	} else if (out) {
		*out = answer;
		answer = (struct chbuf){0};
	}
out:
	curl_free(esc);
	curl_slist_free_all(headers);
	curl_easy_cleanup(c);
	chb_free(&url);
	chb_free(&answer);
	return err;
}
