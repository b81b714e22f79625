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

/* One request being made: its handle and what it owns. */
struct request {
	CURL *c;
	struct chbuf url, answer;
	struct curl_slist *headers;
	char *esc;
};

static void request_free(struct request *q)
{
	curl_free(q->esc);
	curl_slist_free_all(q->headers);
	if (q->c)
		curl_easy_cleanup(q->c);
	chb_free(&q->url);
	chb_free(&q->answer);
}

static int request_init(struct request *q, const struct ch_server *srv, const char *sql,
			const char *settings, const struct chbuf *body)
{
	*q = (struct request){ .c = curl_easy_init() };
	if (!q->c)
		return -ENOMEM;
	chb_printf(&q->url, "%s?database=%s%s", srv->base, srv->db, settings ? settings : "");
	if (body) {
		q->esc = curl_easy_escape(q->c, sql, 0);
		chb_printf(&q->url, "&query=%s", q->esc ? q->esc : "");
	}
	q->headers = curl_slist_append(NULL, "Content-Type: application/octet-stream");
	if (q->headers)
		q->headers = curl_slist_append(q->headers, "Expect:");
	if (q->url.err || (body && !q->esc) || !q->headers)
		return -ENOMEM;
	curl_easy_setopt(q->c, CURLOPT_URL, q->url.data);
	curl_easy_setopt(q->c, CURLOPT_HTTPHEADER, q->headers);
	curl_easy_setopt(q->c, CURLOPT_POST, 1L);
	curl_easy_setopt(q->c, CURLOPT_POSTFIELDS, body ? (body->data ? body->data : "") : sql);
	curl_easy_setopt(q->c, CURLOPT_POSTFIELDSIZE_LARGE,
			 (curl_off_t)(body ? body->len : strlen(sql)));
	curl_easy_setopt(q->c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(q->c, CURLOPT_WRITEDATA, &q->answer);
	curl_easy_setopt(q->c, CURLOPT_TIMEOUT, srv->timeout_s);
	curl_easy_setopt(q->c, CURLOPT_CONNECTTIMEOUT, 5L);
	curl_easy_setopt(q->c, CURLOPT_NOSIGNAL, 1L);
	return 0;
}

/* What a finished request came to: 0 with its answer moved to *out (if out), or an error
 * with why. */
static int request_end(struct request *q, const struct ch_server *srv, CURLcode rc,
		       struct chbuf *out, char *why, size_t why_size)
{
	long status = 0;

	if (rc != CURLE_OK) {
		snprintf(why, why_size, "ClickHouse at %s: %s", srv->base, curl_easy_strerror(rc));
		return rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT :
		       rc == CURLE_COULDNT_CONNECT ? -ECONNREFUSED : -EIO;
	}
	curl_easy_getinfo(q->c, CURLINFO_RESPONSE_CODE, &status);
	if (q->answer.err)
		return q->answer.err;
	if (status != 200) {
		snprintf(why, why_size, "ClickHouse answered %ld: %.300s", status,
			 q->answer.data ? q->answer.data : "");
		return -EIO;
	}
	if (out) {
		*out = q->answer;
		q->answer = (struct chbuf){0};
	}
	return 0;
}

int ch_run(const struct ch_server *srv, const char *sql, const char *settings,
	   const struct chbuf *body, struct chbuf *out, char *why, size_t why_size)
{
	struct request q;
	int err = request_init(&q, srv, sql, settings, body);

	if (!err)
		err = request_end(&q, srv, curl_easy_perform(q.c), out, why, why_size);
	request_free(&q);
	return err;
}

int ch_run_all(const struct ch_server *srv, size_t n, const char *const *sqls,
	       const struct chbuf *const *bodies, char *why, size_t why_size)
{
	struct request *qs = calloc(n ? n : 1, sizeof(*qs));
	CURLM *m = curl_multi_init();
	int running = 0, left, err = 0;
	CURLMsg *msg;

	why[0] = 0;
	if (!qs || !m) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; !err && i < n; i++) {
		err = request_init(&qs[i], srv, sqls[i], NULL, bodies[i]);
		if (!err && curl_multi_add_handle(m, qs[i].c) != CURLM_OK)
			err = -ENOMEM;
	}
	while (!err) {
		if (curl_multi_perform(m, &running) != CURLM_OK)
			err = -EIO;
		else if (!running)
			break;
		else if (curl_multi_poll(m, NULL, 0, 1000, NULL) != CURLM_OK)
			err = -EIO;
	}
	while (!err && (msg = curl_multi_info_read(m, &left)))
		for (size_t i = 0; msg->msg == CURLMSG_DONE && i < n; i++)
			if (qs[i].c == msg->easy_handle) {
				int e = request_end(&qs[i], srv, msg->data.result, NULL, why,
						    why_size);

				err = err ? err : e;
			}
	if (err == -EIO && !why[0])
		snprintf(why, why_size, "ClickHouse at %s: the transfer failed", srv->base);
out:
	for (size_t i = 0; qs && i < n; i++) {
		if (m && qs[i].c)
			curl_multi_remove_handle(m, qs[i].c);
		request_free(&qs[i]);
	}
	if (m)
		curl_multi_cleanup(m);
	free(qs);
	return err;
}
