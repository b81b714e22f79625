/* Values written to control files: exactly one value, one trailing newline optional, nothing
 * else (no spaces, no second value). Pure parsing, no state. */
#ifndef APERTURE_DAEMON_VALUE_H
#define APERTURE_DAEMON_VALUE_H

#include <stddef.h>
#include <stdint.h>

/* Unsigned decimal integer in [min, max], no leading zero ("0" itself is a number).
 * -EINVAL if malformed, -ERANGE if outside. */
int value_parse_uint(const char *buf, size_t len, uint64_t min, uint64_t max, uint64_t *out);

/* One of words (NULL-terminated): *out is its index. -EINVAL if none matches. */
int value_parse_word(const char *buf, size_t len, const char *const *words, uint64_t *out);

#define ENABLE_MAX_DURATION_S (7 * 24 * 3600)

/* What `enable` accepts: "0", "1", or a duration "<N>s|m|h|d" from 1s to 7d, N without a
 * leading zero.
 * *duration_s is 0 for "0" and "1" (no expiry). -EINVAL if malformed, -ERANGE if the
 * duration is 0 or longer than ENABLE_MAX_DURATION_S. */
int value_parse_enable(const char *buf, size_t len, int *on, uint64_t *duration_s);

/* What a target's `window` accepts: "global" (*global = 1, *seconds untouched) or seconds in
 * 0..max. -EINVAL if malformed, -ERANGE above max. */
int value_parse_window(const char *buf, size_t len, uint64_t max, int *global,
		       uint64_t *seconds);

/* A written value made fit for an error message: the trailing newline dropped, other
 * unprintable bytes, '"' and '\\' as \xNN, cut with "..." to fit outlen (>= 4). */
void value_quote(const char *buf, size_t len, char *out, size_t outlen);

#endif
