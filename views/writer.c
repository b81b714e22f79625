// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <math.h>
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

void writer_fixed(struct writer *w, double v, int decimals)
{
	static const int64_t scale[] = { 1, 10, 100, 1000 };
	int64_t t = llround(fabs(v) * scale[decimals]);
	char frac[4];
	int i;

	if (v < 0 && t)
		writer_put(w, "-", 1);
	writer_u64(w, t / scale[decimals]);
	if (!decimals)
		return;
	t %= scale[decimals];
	for (i = decimals; i-- > 0; t /= 10)
		frac[i] = '0' + t % 10;
	writer_put(w, ".", 1);
	writer_put(w, frac, decimals);
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

static size_t utf8_chars(const unsigned char *p)
{
	size_t n, chars = 0;

	for (; *p; p += n ? n : 1, chars++)
		n = utf8_len(p);
	return chars;
}

void writer_xml(struct writer *w, const char *s, size_t max_chars)
{
	const unsigned char *p = (const unsigned char *)s, *run = p;
	size_t n, chars;

	/* bytes >= characters: only a long name can need cutting */
	if (max_chars != SIZE_MAX && strlen(s) > max_chars && utf8_chars(p) > max_chars)
		max_chars = max_chars > 2 ? max_chars - 2 : 0;
	else
		max_chars = SIZE_MAX;
	/* Runs of bytes that need nothing done are copied whole. */
	for (chars = 0; *p && chars < max_chars; chars++) {
		unsigned char c = *p;

		if (c >= 0x20 && c < 0x7f && c != '<' && c != '>' && c != '&' && c != '"') {
			p++;
			continue;
		}
		if (c >= 0x80 && (n = utf8_len(p))) {
			p += n;
			continue;
		}
		writer_put(w, (const char *)run, p - run);
		if (c == '<')
			writer_put(w, "&lt;", 4);
		else if (c == '>')
			writer_put(w, "&gt;", 4);
		else if (c == '&')
			writer_put(w, "&amp;", 5);
		else if (c == '"')
			writer_put(w, "&quot;", 6);
		else if (c >= 0x80)
			writer_put(w, replacement, 3); /* not UTF-8 */
		else
			writer_put(w, " ", 1); /* not allowed in XML 1.0 */
		run = ++p;
	}
	writer_put(w, (const char *)run, p - run);
	if (*p)
		writer_put(w, "..", 2);
}

bool utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n;

	for (; *p; p += n)
		if (!(n = utf8_len(p)))
			return false;
	return true;
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
