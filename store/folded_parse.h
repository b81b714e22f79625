/* Reads folded stacks (`frame;frame;...;leaf COUNT` per line, as flamegraph.pl reads them)
 * into a profile, so folded files from anywhere can be rendered by the views. */
#ifndef APERTURE_STORE_FOLDED_PARSE_H
#define APERTURE_STORE_FOLDED_PARSE_H

#include <stddef.h>
#include <stdint.h>
#include "store/profile.h"

/* Adds every line of text[0..len) to p at second sec. Empty lines are skipped; a line
 * without a positive integer count after its last space or tab, or with an empty frame, is
 * an error. Returns 0, -EINVAL (and the 1-based number of the bad line in *bad_line),
 * -ERANGE (a count, or the profile's total with it, over UINT64_MAX) or -ENOMEM. On error p holds the lines before it. */
int folded_parse(struct profile *p, const char *text, size_t len, int64_t sec,
		 size_t *bad_line);

#endif
