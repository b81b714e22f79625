// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "views/writer.h"

struct writer *writer_new(FILE *out)
{
	struct writer *w = malloc(sizeof(*w));

	if (w) {
		w->out = out;
		w->len = 0;
	}
	return w;
}

static void flush(struct writer *w)
{
	fwrite(w->buf, 1, w->len, w->out);
	w->len = 0;
}

int writer_close(struct writer *w)
{
	int err;

	flush(w);
	err = ferror(w->out) ? -EIO : 0;
	free(w);
	return err;
}

void writer_put(struct writer *w, const char *data, size_t len)
{
	if (w->len + len > sizeof(w->buf)) {
		flush(w);
		if (len > sizeof(w->buf)) {
			fwrite(data, 1, len, w->out);
			return;
		}
	}
	memcpy(w->buf + w->len, data, len);
	w->len += len;
}

void writer_str(struct writer *w, const char *s)
{
	writer_put(w, s, strlen(s));
}

void writer_u64(struct writer *w, uint64_t v)
{
	char digits[24], *p = digits + sizeof(digits);

	do
		*--p = '0' + v % 10;
	while (v /= 10);
	writer_put(w, p, digits + sizeof(digits) - p);
}

void writer_printf(struct writer *w, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0)
		writer_put(w, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if the byte there starts none. */
static size_t utf8_len(const unsigned char *s)
{
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		return (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (s[0] >= 0xe0 && s[0] <= 0xef) {
		if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
			return 0;
		if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f))
			return 0; /* overlong, surrogate */
		return 3;
	}
	if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
			return 0;
		if ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
			return 0;
		return 4;
	}
	return 0;
}

static const char replacement[] = "\xef\xbf\xbd";

void writer_xml(struct writer *w, const char *s, size_t max_chars)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n, chars = 0, total = 0;

	if (max_chars != SIZE_MAX) {
		for (const unsigned char *q = p; *q; q += n ? n : 1, total++)
			n = utf8_len(q);
		if (total > max_chars)
			max_chars = max_chars > 2 ? max_chars - 2 : 0;
	}
	for (; *p && chars < max_chars; p += n ? n : 1, chars++) {
		n = utf8_len(p);
		if (!n)
			writer_put(w, replacement, 3);
		else if (*p == '<')
			writer_put(w, "&lt;", 4);
		else if (*p == '>')
			writer_put(w, "&gt;", 4);
		else if (*p == '&')
			writer_put(w, "&amp;", 5);
		else if (*p == '"')
			writer_put(w, "&quot;", 6);
		else if (*p < 0x20 || *p == 0x7f)
			writer_put(w, " ", 1); /* not allowed in XML 1.0 */
		else
			writer_put(w, (const char *)p, n);
	}
	if (*p)
		writer_put(w, "..", 2);
}

char *utf8_clean(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	char *out = malloc(strlen(s) * 3 + 1), *o = out;
	size_t n;

	if (!out)
		return NULL;
	for (; *p; p += n ? n : 1) {
		n = utf8_len(p);
		memcpy(o, n ? (const char *)p : replacement, n ? n : 3);
		o += n ? n : 3;
	}
	*o = '\0';
	return out;
}
