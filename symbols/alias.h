/* Choosing among several names for one address: getpid and __getpid, clock_gettime and
 * __vdso_clock_gettime, _text and _stext. A reader of a flame graph expects the name they
 * would call, so the name with fewer leading underscores wins, then the more visible
 * binding, then the shorter name. */
#ifndef APERTURE_SYMBOLS_ALIAS_H
#define APERTURE_SYMBOLS_ALIAS_H

#include <string.h>

enum alias_binding {
	ALIAS_GLOBAL,
	ALIAS_WEAK,
	ALIAS_LOCAL,
};

/* < 0 if name a is the better one, > 0 if b is, 0 if neither. */
static inline int alias_cmp(const char *a, enum alias_binding a_bind,
			    const char *b, enum alias_binding b_bind)
{
	size_t a_us = strspn(a, "_"), b_us = strspn(b, "_");
	size_t a_len, b_len;

	if (a_us != b_us)
		return a_us < b_us ? -1 : 1;
	if (a_bind != b_bind)
		return a_bind < b_bind ? -1 : 1;
	a_len = strlen(a);
	b_len = strlen(b);
	if (a_len != b_len)
		return a_len < b_len ? -1 : 1;
	return 0;
}

#endif
