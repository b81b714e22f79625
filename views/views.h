/* Renderers: a profile snapshot in, bytes out. Pure functions: no I/O but writing to `out`
 * (an open_memstream in the daemon, any FILE in tests), no global state. Each returns 0 or a
 * negative errno. */
#ifndef APERTURE_VIEWS_H
#define APERTURE_VIEWS_H

#include <stdio.h>
#include <stdbool.h>
#include <sys/types.h>
#include "store/blocking.h"
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

/* What a view says about the profile besides its stacks. */
struct view_meta {
	const char *title;       /* what it is of, e.g. "cpu: myapp (pid 1234)" */
	int64_t window_s;        /* 0: since enable or reset; else the last window_s seconds */
	int64_t now;             /* unix seconds the render covers up to */
	const char *sample_type; /* pprof sample type, e.g. "samples" (unit "count") */
	const char *period_type; /* e.g. "cpu"; NULL if the profile is not sampled */
	const char *period_unit; /* e.g. "nanoseconds" */
	uint64_t period;         /* what one count stands for, e.g. 1e9/99 ns at 99 Hz */
};

/* The stacks as a tree in d3-flame-graph's shape, {"name","value","children"}, inside a
 * top-level object saying units and window. */
int view_json(const struct profile_snapshot *s, const struct view_meta *m, FILE *out);

/* gzip'd profile.proto (pprof): sample types and units, functions, locations (leaf first),
 * mappings with build ids where the snapshot's infos know them. */
int view_pprof(const struct profile_snapshot *s, const struct view_meta *m, FILE *out);

/* An interactive flame graph: self-contained SVG with inline script (zoom, search, details). */
int view_svg(const struct profile_snapshot *s, const struct view_meta *m, FILE *out);

/* difffolded.pl's format: `stack COUNT_BASE COUNT_NOW`, one line per stack in either. */
int view_diff_folded(const struct profile_snapshot *base, const struct profile_snapshot *now,
		     FILE *out);

/* A differential flame graph of now: red grew, blue shrank, counts normalised by total. */
int view_diff_svg(const struct profile_snapshot *base, const struct profile_snapshot *now,
		  const struct view_meta *m, FILE *out);
/* Which threads the blocking detector watches, and from when on a wait is blocking. */
struct blocking_workers {
	uint64_t threshold_ms;
	bool watching;         /* the target is enabled and these are watched */
	const char *found_by;  /* how they were found */
	const char *pattern;   /* thread-name prefix they share */
	const pid_t *tids;
	size_t ntids;
};

/* blocking.json: the workers, the count of all events, and the kept ones oldest first, each
 * with time, tid, thread, duration_us, reason (slept or preempted) and stack (root first). */
int view_blocking_json(const struct blocking_snapshot *s, const struct blocking_workers *w,
		       FILE *out);

#endif
