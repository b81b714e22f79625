/* Renderers: a profile snapshot in, bytes out. Pure functions: no I/O but writing to `out`
 * (an open_memstream in the daemon, any FILE in tests), no global state. Each returns 0 or a
 * negative errno. */
#ifndef APERTURE_VIEWS_H
#define APERTURE_VIEWS_H

#include <stdio.h>
#include "store/profile.h"

/* Folded stacks, as flamegraph.pl reads them: `thread;root;...;leaf COUNT`, one line per
 * stack, sorted frame by frame (names as strings, a stack before those it is a prefix of) so
 * two renders can be diffed. Nothing for an empty profile. */
int view_folded(const struct profile_snapshot *s, FILE *out);

/* Top functions, like `perf report`: per frame name (the thread-name frame excluded), self
 * count (samples where it is the leaf) and total count (samples where it is anywhere in the
 * stack, counted once per stack however deep it recurses), with their shares of the
 * snapshot's total; sorted by self, then total, then name. Comment lines start with '#'.
 * An empty profile renders nothing. */
int view_top(const struct profile_snapshot *s, FILE *out);

#endif
