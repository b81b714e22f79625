#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "daemon/value.h"

/* Strips the one optional trailing newline; rejects empty values. */
static int value_body(const char *buf, size_t len, size_t *body_len)
{
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len == 0)
		return -EINVAL;
	*body_len = len;
	return 0;
}

/* Leading decimal digits of buf[0..len) into *out; returns how many, -ERANGE on overflow,
 * or -EINVAL for a leading zero: a number is written as printf writes it, "0" alone or from
 * 1 on, the same rule for every control (5,000 zeros before a 5 are not a 5). */
static int parse_digits(const char *buf, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (len > 1 && buf[0] == '0' && buf[1] >= '0' && buf[1] <= '9')
		return -EINVAL;
	for (i = 0; i < len && buf[i] >= '0' && buf[i] <= '9'; i++) {
		unsigned d = buf[i] - '0';

		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*out = v;
	return (int)i;
}

int value_parse_uint(const char *buf, size_t len, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v;
	size_t n;
	int err, digits;

	err = value_body(buf, len, &n);
	if (err)
		return err;
	digits = parse_digits(buf, n, &v);
	if (digits == -EINVAL)
		return -EINVAL;
	if (digits == -ERANGE) {
		/* An overflowing number is still well-formed if it is all digits. */
		for (size_t i = 0; i < n; i++)
			if (buf[i] < '0' || buf[i] > '9')
				return -EINVAL;
		return -ERANGE;
	}
	if (digits == 0 || (size_t)digits != n)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int value_parse_word(const char *buf, size_t len, const char *const *words, uint64_t *out)
{
	size_t n;
	int err = value_body(buf, len, &n);

	if (err)
		return err;
	for (uint64_t i = 0; words[i]; i++) {
		if (strlen(words[i]) == n && !memcmp(buf, words[i], n)) {
			*out = i;
			return 0;
		}
	}
	return -EINVAL;
}

int value_parse_enable(const char *buf, size_t len, int *on, uint64_t *duration_s)
{
	uint64_t v, unit;
	size_t n;
	int err, digits;

	err = value_body(buf, len, &n);
	if (err)
		return err;
	if (n == 1 && (buf[0] == '0' || buf[0] == '1')) {
		*on = buf[0] == '1';
		*duration_s = 0;
		return 0;
	}
	digits = parse_digits(buf, n, &v);
	if (digits <= 0 || (size_t)digits != n - 1)
		return digits == -ERANGE ? -ERANGE : -EINVAL;
	switch (buf[n - 1]) {
	case 's': unit = 1; break;
	case 'm': unit = 60; break;
	case 'h': unit = 3600; break;
	case 'd': unit = 86400; break;
	default: return -EINVAL;
	}
	if (v == 0 || v > ENABLE_MAX_DURATION_S / unit)
		return -ERANGE;
	*on = 1;
	*duration_s = v * unit;
	return 0;
}

void value_quote(const char *buf, size_t len, char *out, size_t outlen)
{
	size_t i, j = 0;

	if (len > 0 && buf[len - 1] == '\n')
		len--;
	for (i = 0; i < len; i++) {
		unsigned char ch = buf[i];
		char piece[5];
		int n;

		if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\') {
			piece[0] = ch;
			n = 1;
		} else {
			n = snprintf(piece, sizeof(piece), "\\x%02x", ch);
		}
		if (j + n + 4 > outlen)
			break;
		memcpy(out + j, piece, n);
		j += n;
	}
	if (i < len) {
		memcpy(out + j, "...", 3);
		j += 3;
	}
	out[j] = '\0';
}

int value_parse_window(const char *buf, size_t len, uint64_t max, int *global,
		       uint64_t *seconds)
{
	size_t n;
	int err;

	err = value_body(buf, len, &n);
	if (err)
		return err;
	if (n == 6 && !memcmp(buf, "global", 6)) {
		*global = 1;
		return 0;
	}
	err = value_parse_uint(buf, len, 0, max, seconds);
	if (!err)
		*global = 0;
	return err;
}
