/* The profile store: what collectors write and views read.
 *
 * A profile holds the counts of one kind (cpu samples; later off-CPU microseconds, lock waits,
 * ...) of one target, by stack. A stack is a sequence of interned frame names, root first,
 * frame 0 being the thread's name. Counts are kept per stack and the source lines executing
 * in its frames (a stack's line variants), so pprof can tell the lines of a function apart;
 * every other view reads the stacks with their variants' counts merged. Counts are kept twice: a total since the profile was made
 * or reset, and buckets for the last PROFILE_HISTORY_S seconds, one per second for the last
 * minute and one per 10 seconds before, so a view can show "the last N seconds" and remote
 * sync can ship what changed.
 *
 * One writer (a collector) and any number of readers (views, on FUSE threads) may use a
 * profile at once. Profiles are refcounted: a snapshot holds a reference, so a target that is
 * dropped while a view is being rendered stays readable until the render ends. */
#ifndef APERTURE_STORE_PROFILE_H
#define APERTURE_STORE_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#define PROFILE_HISTORY_S 600
/* Distinct stacks one profile tells apart; more are counted in THREAD;[other stacks]. */
#define PROFILE_MAX_STACKS 65536
/* Distinct (stack, lines) it tells apart; more count in their stack with unknown lines. */
#define PROFILE_MAX_VARIANTS (4 * PROFILE_MAX_STACKS)

struct profile;

/* unit: what a count means ("samples", "microseconds"); copied. NULL when out of memory. */
struct profile *profile_new(const char *unit);
struct profile *profile_ref(struct profile *p);
void profile_unref(struct profile *p);

/* Where a frame's function is, for the views that can say (json, pprof). Every field may be
 * unknown: NULL or 0. */
struct frame_info {
	const char *file;     /* source file the function is defined in */
	uint32_t line;        /* line of its definition (the executing line is the stack's) */
	const char *module;   /* path of the mapped file holding its code */
	const char *build_id; /* that file's GNU build id, lowercase hex */
};

/* Interns a frame name and stores its id in *id. ';' becomes ':' and newlines and other
 * control characters become spaces, so every folded line parses. Ids are dense, start at 0,
 * and stay valid for the profile's life, across resets. Returns 0 or -ENOMEM. */
int profile_frame_id(struct profile *p, const char *name, uint32_t *id);
/* The same, and remembers info (copied) for the name if none was known yet: a name has one
 * info, the first one given. */
int profile_frame_id_info(struct profile *p, const char *name, const struct frame_info *info,
			  uint32_t *id);

/* The name of frame id, valid for the profile's life; NULL for an id never interned. */
const char *profile_frame_name(struct profile *p, uint32_t id);

/* Adds count to the stack of frame ids (root first, depth >= 1) at second sec (unix time,
 * CLOCK_REALTIME). Returns 0, -EINVAL (depth 0 or an id that was never interned) or -ENOMEM. */
int profile_add(struct profile *p, int64_t sec, const uint32_t *frames, size_t depth,
		uint64_t count);
/* The same with lines[i] the source line executing in frames[i] (0 unknown; lines NULL:
 * all unknown). Past the budget or PROFILE_MAX_VARIANTS a new variant's lines are unknown. */
int profile_add_lines(struct profile *p, int64_t sec, const uint32_t *frames,
		      const uint32_t *lines, size_t depth, uint64_t count);

/* Forgets every count; interned frames and stacks stay, so collectors' caches of ids do. */
void profile_reset(struct profile *p);

struct profile_stack {
	const uint32_t *frames; /* root first, frames[0] is the thread name */
	uint32_t depth;
	uint64_t count;
	const uint32_t *lines;  /* the line executing in each frame, 0 unknown; NULL: not told */
};

/* A consistent copy of a profile's counts, owned by the caller. */
struct profile_snapshot {
	const char *unit;
	const char *const *names;     /* frame id -> name, nnames of them */
	const struct frame_info *const *infos; /* frame id -> info or NULL, nnames of them */
	size_t nnames;
	struct profile_stack *stacks; /* stacks with a count > 0, in no particular order, each
					 once (lines NULL) */
	size_t nstacks;
	/* The same counts by stack and lines: a stack once per line variant (lines set). nlined
	 * 0 when the snapshot was made without them: then only stacks tell. */
	struct profile_stack *lined;
	size_t nlined;
	uint64_t total;               /* sum of the counts */
	int64_t since;                /* first second covered: the window's start, or the time the
					 profile was made or last reset */
	struct profile *owner;        /* referenced until profile_snapshot_free */
};

/* since_sec <= 0: everything since the profile was made or reset. Otherwise the sum of the
 * buckets from second since_sec on (older than PROFILE_HISTORY_S seconds is not kept; more
 * than a minute back, whole 10-second buckets that start at since_sec or later).
 * Returns 0 or -ENOMEM. */
int profile_snapshot(struct profile *p, int64_t since_sec, struct profile_snapshot **out);
void profile_snapshot_free(struct profile_snapshot *s);
/* A copy of s that outlives it (a kept baseline handed to several readers). 0 or -ENOMEM. */
int profile_snapshot_dup(const struct profile_snapshot *s, struct profile_snapshot **out);

struct profile_stats {
	size_t frames;   /* interned frame names */
	size_t stacks;   /* interned stacks */
	uint64_t total;  /* counts since made or reset */
	uint64_t other;  /* of which in [other stacks]: new stacks past the budget or the cap */
	size_t bytes;    /* memory held, roughly */
};
void profile_get_stats(struct profile *p, struct profile_stats *out);

/* The memory all profiles together may hold, in bytes (default: no limit). Past it, new
 * stacks are counted in THREAD;[other stacks] and new frame names as [other frames]; what
 * is known goes on being counted as itself, and totals stay exact. */
void profile_set_budget(size_t bytes);
/* The memory all profiles hold now, as counted against the budget. */
size_t profile_store_bytes(void);
/* The per-second counts of the seconds in [from, until), for remote sync: what changed since
 * the seconds it shipped last. Only seconds still kept by themselves (the last minute) are
 * there: older ones are merged into groups. */
struct profile_second_count {
	int64_t sec;
	uint32_t stack;  /* index into profile_seconds.stacks */
	uint64_t count;
};
struct profile_seconds {
	const char *unit;
	const char *const *names;     /* frame id -> name, nnames of them */
	const struct frame_info *const *infos; /* frame id -> info or NULL */
	size_t nnames;
	struct profile_stack *stacks; /* the stacks counted, once per line variant (lines set);
					 count: their sum over the range */
	size_t nstacks;
	struct profile_second_count *counts; /* ascending by second */
	size_t ncounts;
	int64_t since;                /* the time the profile was made or last reset */
	struct profile *owner;        /* referenced until profile_seconds_free */
};
int profile_seconds(struct profile *p, int64_t from, int64_t until, struct profile_seconds **out);
void profile_seconds_free(struct profile_seconds *s);

#endif
