#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include "store/profile.h"

/* The store's clock: time() reads the coarse clock, up to a tick behind CLOCK_REALTIME, so
 * at a second's edge a profile made after time() said N could already say N + 1. */
static int64_t now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec;
}

static uint32_t frame(struct profile *p, const char *name)
{
	uint32_t id = UINT32_MAX;

	assert_int_equal(profile_frame_id(p, name, &id), 0);
	return id;
}

/* The count of a stack in a snapshot, 0 when absent; fails if it appears twice. */
static uint64_t count_of(const struct profile_snapshot *s, const uint32_t *frames, size_t depth)
{
	uint64_t count = 0;
	int found = 0;
	size_t i;

	for (i = 0; i < s->nstacks; i++) {
		if (s->stacks[i].depth != depth ||
		    memcmp(s->stacks[i].frames, frames, depth * sizeof(*frames)))
			continue;
		assert_int_equal(found, 0);
		found = 1;
		count = s->stacks[i].count;
	}
	return count;
}

/* Checks what every snapshot promises: positive counts that add up to the total. */
static void check_consistent(const struct profile_snapshot *s)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < s->nstacks; i++) {
		assert_true(s->stacks[i].count > 0);
		assert_true(s->stacks[i].depth >= 1);
		sum += s->stacks[i].count;
	}
	assert_int_equal(sum, s->total);
}

static struct profile_snapshot *snap(struct profile *p, int64_t since)
{
	struct profile_snapshot *s = NULL;

	assert_int_equal(profile_snapshot(p, since, &s), 0);
	assert_non_null(s);
	check_consistent(s);
	return s;
}

static void test_interning(void **state)
{
	struct profile *p = profile_new("samples");
	struct profile_snapshot *s;
	uint32_t a, b, semi, nl, colon;

	assert_non_null(p);
	a = frame(p, "main");
	b = frame(p, "work");
	assert_int_equal(a, 0);
	assert_int_equal(b, 1);
	assert_int_equal(frame(p, "main"), a);

	semi = frame(p, "std::vector<int>;x");
	nl = frame(p, "two\nlines\tand\x7f\x01 \xc3\xa9");
	assert_int_equal(semi, 2);
	assert_int_equal(nl, 3);
	/* the sanitized name is the identity: "a;b" and "a:b" are one frame */
	colon = frame(p, "std::vector<int>:x");
	assert_int_equal(colon, semi);
	assert_int_equal(frame(p, "two lines and   \xc3\xa9"), nl);

	s = snap(p, 0);
	assert_int_equal(s->nnames, 4);
	assert_string_equal(s->names[a], "main");
	assert_string_equal(s->names[b], "work");
	assert_string_equal(s->names[semi], "std::vector<int>:x");
	assert_string_equal(s->names[nl], "two lines and   \xc3\xa9");
	assert_string_equal(s->unit, "samples");
	assert_int_equal(s->nstacks, 0);
	assert_int_equal(s->total, 0);
	profile_snapshot_free(s);
	profile_unref(p);
}

static void test_totals(void **state)
{
	struct profile *p = profile_new("samples");
	struct profile_stats st;
	struct profile_snapshot *s;
	int64_t t = now_sec();
	uint32_t th, a, b, ab[3], abb[4], ta[2], bad[2];

	th = frame(p, "thread");
	a = frame(p, "a");
	b = frame(p, "b");
	ab[0] = th, ab[1] = a, ab[2] = b;
	abb[0] = th, abb[1] = a, abb[2] = b, abb[3] = b;
	ta[0] = th, ta[1] = a;
	assert_int_equal(profile_add(p, t, ab, 3, 5), 0);
	assert_int_equal(profile_add(p, t, ab, 3, 2), 0);
	assert_int_equal(profile_add(p, t + 1, ab, 3, 1), 0);
	assert_int_equal(profile_add(p, t, abb, 4, 7), 0);
	assert_int_equal(profile_add(p, t - 3, ta, 2, 11), 0);
	assert_int_equal(profile_add(p, t, ta, 1, 13), 0); /* the thread alone */

	assert_int_equal(profile_add(p, t, ab, 0, 1), -EINVAL);
	bad[0] = th, bad[1] = 3;
	assert_int_equal(profile_add(p, t, bad, 2, 1), -EINVAL);

	s = snap(p, 0);
	assert_int_equal(s->nstacks, 4);
	assert_int_equal(count_of(s, ab, 3), 8);
	assert_int_equal(count_of(s, abb, 4), 7);
	assert_int_equal(count_of(s, ta, 2), 11);
	assert_int_equal(count_of(s, ta, 1), 13);
	assert_int_equal(s->total, 39);
	assert_true(s->since <= t && s->since >= t - 2);
	profile_snapshot_free(s);

	profile_get_stats(p, &st);
	assert_int_equal(st.frames, 3);
	assert_int_equal(st.stacks, 4);
	assert_int_equal(st.total, 39);
	assert_true(st.bytes > 4 * 3 * sizeof(uint32_t));
	profile_unref(p);
}

static void test_window(void **state)
{
	struct profile *p = profile_new("samples");
	struct profile_snapshot *s;
	int64_t t = now_sec();
	uint32_t x[2], y[2];
	int i;

	x[0] = y[0] = frame(p, "thread");
	x[1] = frame(p, "x");
	y[1] = frame(p, "y");
	for (i = 0; i < 10; i++)
		assert_int_equal(profile_add(p, t + i, x, 2, i + 1), 0);
	assert_int_equal(profile_add(p, t + 2, y, 2, 100), 0);
	/* late data for a kept second, and a repeat in one second: both merge */
	assert_int_equal(profile_add(p, t + 6, x, 2, 1000), 0);
	assert_int_equal(profile_add(p, t + 9, x, 2, 10000), 0);

	s = snap(p, t + 5);
	assert_int_equal(s->since, t + 5);
	assert_int_equal(s->nstacks, 1);
	assert_int_equal(count_of(s, x, 2), 6 + 7 + 8 + 9 + 10 + 1000 + 10000);
	assert_int_equal(count_of(s, y, 2), 0);
	profile_snapshot_free(s);

	s = snap(p, t + 2);
	assert_int_equal(count_of(s, x, 2), 3 + 4 + 5 + 6 + 7 + 8 + 9 + 10 + 11000);
	assert_int_equal(count_of(s, y, 2), 100);
	profile_snapshot_free(s);

	s = snap(p, t + 10);
	assert_int_equal(s->nstacks, 0);
	assert_int_equal(s->total, 0);
	profile_snapshot_free(s);

	s = snap(p, 0);
	assert_int_equal(count_of(s, x, 2), 55 + 11000);
	assert_int_equal(count_of(s, y, 2), 100);
	profile_snapshot_free(s);

	/* x's last entry was first in its bucket; in this one, y is */
	assert_int_equal(profile_add(p, t + 10, y, 2, 1), 0);
	assert_int_equal(profile_add(p, t + 10, x, 2, 2), 0);
	s = snap(p, t + 10);
	assert_int_equal(count_of(s, x, 2), 2);
	assert_int_equal(count_of(s, y, 2), 1);
	profile_snapshot_free(s);
	profile_unref(p);
}

/* A window that reaches back before the profile was made starts when it was made. */
static void test_window_since_clamped(void **state)
{
	int64_t t = now_sec();
	struct profile *p = profile_new("samples");
	struct profile_snapshot *s;

	s = snap(p, t - 3600);
	assert_true(s->since >= t && s->since <= now_sec());
	profile_snapshot_free(s);
	profile_unref(p);
}

/* A second aligned to the history's 10-second groups. */
static int64_t group_sec(void)
{
	return now_sec() / 10 * 10;
}

static void test_expiry(void **state)
{
	struct profile *p = profile_new("samples");
	struct profile_snapshot *s;
	int64_t t = group_sec();
	uint32_t x[1];

	x[0] = frame(p, "x");
	assert_int_equal(profile_add(p, t, x, 1, 1), 0);
	assert_int_equal(profile_add(p, t + 1, x, 1, 2), 0);
	assert_int_equal(profile_add(p, t + PROFILE_HISTORY_S - 1, x, 1, 4), 0);
	s = snap(p, t);
	assert_int_equal(s->total, 1 + 2 + 4); /* t is still the window's first second */
	profile_snapshot_free(s);

	/* second t + H reuses t's slot: t's count must not leak into it; t and t + 1 are one
	 * 10-second bucket by now, which goes with its first second */
	assert_int_equal(profile_add(p, t + PROFILE_HISTORY_S, x, 1, 8), 0);
	s = snap(p, t);
	assert_int_equal(s->total, 4 + 8);
	profile_snapshot_free(s);
	s = snap(p, t + PROFILE_HISTORY_S);
	assert_int_equal(s->total, 8);
	profile_snapshot_free(s);

	/* too late for the window: counted in the totals only */
	assert_int_equal(profile_add(p, t, x, 1, 16), 0);
	s = snap(p, t);
	assert_int_equal(s->total, 4 + 8);
	profile_snapshot_free(s);

	/* a jump far ahead empties every bucket */
	assert_int_equal(profile_add(p, t + 10 * PROFILE_HISTORY_S, x, 1, 32), 0);
	s = snap(p, t);
	assert_int_equal(s->total, 32);
	profile_snapshot_free(s);

	s = snap(p, 0);
	assert_int_equal(s->total, 1 + 2 + 4 + 8 + 16 + 32);
	profile_snapshot_free(s);
	profile_unref(p);
}

static uint64_t window_total(struct profile *p, int64_t since)
{
	struct profile_snapshot *s = snap(p, since);
	uint64_t total = s->total;

	profile_snapshot_free(s);
	return total;
}

/* The last minute second by second, older seconds in whole 10-second buckets. */
static void test_history_coarsens_past_a_minute(void **state)
{
	struct profile *p = profile_new("samples");
	struct profile_stats after;
	int64_t t = group_sec();
	uint32_t x[2];

	x[0] = frame(p, "thread");
	for (int i = 0; i < 100; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", i);
		x[1] = frame(p, name);
		assert_int_equal(profile_add(p, t + i, x, 2, 1), 0);
	}
	/* t + 40 .. t + 99 are seconds still */
	assert_int_equal(window_total(p, t + 40), 60);
	assert_int_equal(window_total(p, t + 45), 55);
	assert_int_equal(window_total(p, t + 99), 1);
	/* t .. t + 39 are 10-second buckets: a window counts those that start in it */
	assert_int_equal(window_total(p, t + 15), 80);
	assert_int_equal(window_total(p, t + 20), 80);
	assert_int_equal(window_total(p, t), 100);
	profile_get_stats(p, &after);
	assert_int_equal(after.total, 100);
	profile_unref(p);
}

/* Past the budget, new stacks are counted in THREAD;[other stacks]: totals stay exact and
 * the memory stops growing. */
static void test_budget_bounds_stacks_and_keeps_totals(void **state)
{
	size_t base = profile_store_bytes();
	struct profile *p = profile_new("samples");
	struct profile_snapshot *s;
	struct profile_stats st;
	int64_t t = now_sec();
	uint32_t x[3];
	uint64_t known = 0;

	profile_set_budget(base + 64 * 1024);
	x[0] = frame(p, "thread");
	x[1] = frame(p, "main");
	for (int i = 0; i < 20000; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", i);
		assert_int_equal(profile_frame_id(p, name, &x[2]), 0);
		assert_int_equal(profile_add(p, t, x, 3, 1), 0);
	}
	profile_get_stats(p, &st);
	assert_int_equal(st.total, 20000);
	assert_true(st.other > 0 && st.other < 20000);
	assert_true(st.stacks < 2000);
	assert_true(profile_store_bytes() < base + 64 * 1024 + 4096);
	/* known stacks keep counting as themselves */
	assert_true(profile_frame_name(p, 5) != NULL);
	s = snap(p, 0);
	assert_int_equal(s->total, 20000);
	for (size_t i = 0; i < s->nstacks; i++) {
		const struct profile_stack *k = &s->stacks[i];

		if (k->depth == 2) {
			assert_string_equal(s->names[k->frames[0]], "thread");
			assert_string_equal(s->names[k->frames[1]], "[other stacks]");
			assert_int_equal(k->count, st.other);
		} else {
			known += k->count;
		}
	}
	assert_int_equal(known + st.other, 20000);
	profile_snapshot_free(s);
	/* a new name past the budget is [other frames] */
	assert_int_equal(profile_frame_id(p, "brand new", &x[2]), 0);
	assert_string_equal(profile_frame_name(p, x[2]), "[other frames]");
	profile_unref(p);
	assert_int_equal(profile_store_bytes(), base);
	profile_set_budget(SIZE_MAX);
}

/* Waits for the clock's next second, so that what happens next has a later time. */
static int64_t next_sec(void)
{
	int64_t t = now_sec();

	while (now_sec() == t)
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
	return now_sec();
}

static void test_reset(void **state)
{
	struct profile *p = profile_new("samples");
	struct profile_snapshot *s;
	struct profile_stats st;
	int64_t t = now_sec();
	uint32_t x[2], y[2];

	x[0] = y[0] = frame(p, "thread");
	x[1] = frame(p, "x");
	y[1] = frame(p, "y");
	assert_int_equal(profile_add(p, t, x, 2, 3), 0);
	assert_int_equal(profile_add(p, t, y, 2, 4), 0);
	t = next_sec();
	profile_reset(p);

	profile_get_stats(p, &st);
	assert_int_equal(st.frames, 3);
	assert_int_equal(st.stacks, 2);
	assert_int_equal(st.total, 0);
	s = snap(p, 0);
	assert_int_equal(s->nstacks, 0);
	assert_int_equal(s->total, 0);
	assert_true(s->since >= t);
	assert_int_equal(s->nnames, 3);
	profile_snapshot_free(s);
	s = snap(p, t);
	assert_int_equal(s->total, 0);
	profile_snapshot_free(s);

	assert_int_equal(frame(p, "y"), y[1]);
	assert_int_equal(profile_add(p, t, x, 2, 5), 0);
	profile_get_stats(p, &st);
	assert_int_equal(st.stacks, 2);
	s = snap(p, 0);
	assert_int_equal(count_of(s, x, 2), 5);
	assert_int_equal(count_of(s, y, 2), 0);
	profile_snapshot_free(s);
	s = snap(p, t);
	assert_int_equal(count_of(s, x, 2), 5);
	profile_snapshot_free(s);
	profile_unref(p);
}

/* The snapshot's pointers must survive the writer growing every table, and the profile's
 * last reference being dropped (ASan reports a use after free otherwise). */
static void test_snapshot_outlives_writes(void **state)
{
	struct profile *p = profile_new("samples");
	struct profile_snapshot *s;
	int64_t t = now_sec();
	uint32_t x[3], y[30];
	char name[32];
	int i, j;

	x[0] = frame(p, "thread");
	x[1] = frame(p, "outer");
	x[2] = frame(p, "inner");
	assert_int_equal(profile_add(p, t, x, 3, 7), 0);
	s = snap(p, 0);

	y[0] = x[0];
	for (i = 0; i < 10000; i++) {
		for (j = 1; j < 30; j++) {
			snprintf(name, sizeof(name), "fn_%d_%d", i % 100, j == 29 ? i : j);
			y[j] = frame(p, name);
		}
		assert_int_equal(profile_add(p, t, y, 30, 1), 0);
	}
	profile_reset(p);
	profile_unref(p);

	assert_int_equal(s->nnames, 3);
	assert_string_equal(s->names[0], "thread");
	assert_string_equal(s->names[1], "outer");
	assert_string_equal(s->names[2], "inner");
	assert_int_equal(s->nstacks, 1);
	assert_int_equal(count_of(s, x, 3), 7);
	assert_int_equal(s->total, 7);
	profile_snapshot_free(s);
}

/* A baseline: a copy that outlives its original, the writes after it, a reset and the
 * profile's last reference, and that holds the same counts, names and infos. */
static void test_snapshot_dup(void **state)
{
	struct frame_info info = { .file = "x.c", .line = 3, .module = "/bin/x" };
	struct profile *p = profile_new("samples");
	struct profile_snapshot *s, *copy = NULL, *empty, *empty_copy = NULL;
	int64_t t = now_sec();
	uint32_t x[2], y[2];

	empty = snap(p, 0);
	assert_int_equal(profile_snapshot_dup(empty, &empty_copy), 0);
	assert_int_equal(empty_copy->nstacks, 0);
	assert_int_equal(empty_copy->total, 0);
	x[0] = frame(p, "thread");
	assert_int_equal(profile_frame_id_info(p, "leaf", &info, &x[1]), 0);
	assert_int_equal(profile_add(p, t, x, 2, 5), 0);
	s = snap(p, 0);
	assert_int_equal(profile_snapshot_dup(s, &copy), 0);
	profile_snapshot_free(s);
	profile_snapshot_free(empty);

	y[0] = x[0];
	y[1] = frame(p, "later");
	assert_int_equal(profile_add(p, t, y, 2, 9), 0);
	profile_reset(p);
	profile_unref(p);

	check_consistent(copy);
	assert_int_equal(copy->total, 5);
	assert_int_equal(copy->nstacks, 1);
	assert_int_equal(count_of(copy, x, 2), 5);
	assert_int_equal(copy->nnames, 2);
	assert_string_equal(copy->names[x[1]], "leaf");
	assert_string_equal(copy->infos[x[1]]->file, "x.c");
	assert_null(copy->infos[x[0]]);
	assert_string_equal(copy->unit, "samples");
	profile_snapshot_free(copy);
	profile_snapshot_free(empty_copy);
}

#define WRITER_ADDS 200000
#define WRITER_STACKS 100

struct writer_arg {
	struct profile *p;
	int64_t t;
	atomic_int done;
	int err; /* cmocka's asserts must not run outside the test's thread */
};

static int write_all(struct writer_arg *w)
{
	uint32_t frames[4];
	char name[16];
	int i, err;

	err = profile_frame_id(w->p, "thread", &frames[0]);
	if (!err)
		err = profile_frame_id(w->p, "root", &frames[1]);
	for (i = 0; !err && i < WRITER_ADDS; i++) {
		snprintf(name, sizeof(name), "leaf%d", i % WRITER_STACKS);
		err = profile_frame_id(w->p, name, &frames[2]);
		frames[3] = frames[2];
		if (!err)
			err = profile_add(w->p, w->t + i / 1000, frames, 3 + i % 2, 1);
	}
	return err;
}

static void *writer(void *arg)
{
	struct writer_arg *w = arg;

	w->err = write_all(w);
	atomic_store(&w->done, 1);
	return NULL;
}

static void test_concurrent(void **state)
{
	struct writer_arg w = { .p = profile_new("samples"), .t = group_sec() };
	struct profile_snapshot *s;
	uint64_t last = 0, last_window = 0;
	int rounds = 0;
	pthread_t tid;

	assert_int_equal(pthread_create(&tid, NULL, writer, &w), 0);
	while (!atomic_load(&w.done)) {
		s = snap(w.p, 0);
		assert_true(s->total >= last && s->total <= WRITER_ADDS);
		assert_true(s->nstacks <= WRITER_STACKS);
		last = s->total;
		profile_snapshot_free(s);

		/* the writer covers 200 seconds, all in the window */
		s = snap(w.p, w.t);
		assert_true(s->total >= last_window && s->total <= WRITER_ADDS);
		last_window = s->total;
		profile_snapshot_free(s);
		rounds++;
	}
	assert_int_equal(pthread_join(tid, NULL), 0);
	assert_int_equal(w.err, 0);
	print_message("reader took %d pairs of snapshots while the writer ran\n", rounds);

	s = snap(w.p, 0);
	assert_int_equal(s->total, WRITER_ADDS);
	assert_int_equal(s->nstacks, WRITER_STACKS);
	profile_snapshot_free(s);
	s = snap(w.p, w.t);
	assert_int_equal(s->total, WRITER_ADDS);
	profile_snapshot_free(s);
	s = snap(w.p, w.t + 100);
	assert_int_equal(s->total, WRITER_ADDS / 2);
	profile_snapshot_free(s);
	profile_unref(w.p);
}

/* The first info given for a name sticks; a name without one reads NULL in snapshots. */
static void test_frame_info(void **state)
{
	struct frame_info first = { .file = "a.c", .line = 12, .module = "/bin/x",
				    .build_id = "abcd" };
	struct frame_info second = { .file = "b.c", .line = 99 };
	struct profile *p = profile_new("samples");
	struct profile_snapshot *s;
	uint32_t a, a2, bare, stack[2];

	assert_int_equal(profile_frame_id_info(p, "f", &first, &a), 0);
	assert_int_equal(profile_frame_id_info(p, "f", &second, &a2), 0);
	assert_int_equal(a, a2);
	bare = frame(p, "g");
	stack[0] = a;
	stack[1] = bare;
	assert_int_equal(profile_add(p, now_sec(), stack, 2, 1), 0);
	assert_int_equal(profile_snapshot(p, 0, &s), 0);
	assert_non_null(s->infos[a]);
	assert_string_equal(s->infos[a]->file, "a.c");
	assert_int_equal(s->infos[a]->line, 12);
	assert_string_equal(s->infos[a]->module, "/bin/x");
	assert_string_equal(s->infos[a]->build_id, "abcd");
	assert_null(s->infos[bare]);
	profile_snapshot_free(s);
	/* Info given to a name that was first interned without one is kept. */
	assert_int_equal(profile_frame_id_info(p, "g", &second, &a2), 0);
	assert_int_equal(a2, bare);
	assert_int_equal(profile_snapshot(p, 0, &s), 0);
	assert_string_equal(s->infos[bare]->file, "b.c");
	assert_null(s->infos[bare]->module);
	profile_snapshot_free(s);
	profile_unref(p);
}

/* The count of the stack frames running lines in a snapshot's lined stacks, 0 if absent;
 * fails if it appears twice. lines NULL: unknown lines, all 0. */
static uint64_t lined_count_of(const struct profile_snapshot *s, const uint32_t *frames,
			       const uint32_t *lines, size_t depth)
{
	static const uint32_t zeros[8];
	uint64_t count = 0;
	int found = 0;

	for (size_t i = 0; i < s->nlined; i++) {
		const struct profile_stack *st = &s->lined[i];

		assert_non_null(st->lines);
		if (st->depth != depth || memcmp(st->frames, frames, depth * sizeof(*frames)) ||
		    memcmp(st->lines, lines ? lines : zeros, depth * sizeof(*lines)))
			continue;
		assert_int_equal(found, 0);
		found = 1;
		count = st->count;
	}
	return count;
}

/* A stack is counted per lines for pprof, and once for every other view: the same totals. */
static void test_line_variants(void **state)
{
	struct profile *p = profile_new("samples");
	struct profile_snapshot *s, *w, *copy = NULL;
	struct profile_seconds *sec;
	int64_t t = now_sec();
	uint32_t work[3], other[3], zeros[3] = {0};
	uint32_t l20[3] = { 0, 10, 20 }, l21[3] = { 0, 10, 21 }, l30[3] = { 0, 11, 30 };
	uint64_t lined_sum = 0;

	work[0] = other[0] = frame(p, "thread");
	work[1] = other[1] = frame(p, "main");
	work[2] = frame(p, "work");
	other[2] = frame(p, "other");
	/* second t - 1 first: a second added after a newer one may go to a coarse bucket */
	assert_int_equal(profile_add_lines(p, t - 1, work, l20, 3, 5), 0);
	/* all lines 0 is unknown lines: the same variant as none told */
	assert_int_equal(profile_add_lines(p, t - 1, work, zeros, 3, 1), 0);
	assert_int_equal(profile_add_lines(p, t, work, l20, 3, 3), 0);
	assert_int_equal(profile_add_lines(p, t, work, l21, 3, 2), 0);
	assert_int_equal(profile_add(p, t, work, 3, 1), 0);
	assert_int_equal(profile_add_lines(p, t, other, l30, 3, 4), 0);

	s = snap(p, 0);
	w = snap(p, t - 5);
	for (int k = 0; k < 2; k++) {
		const struct profile_snapshot *x = k ? w : s;

		assert_int_equal(x->total, 16);
		assert_int_equal(x->nstacks, 2);
		assert_int_equal(count_of(x, work, 3), 12);
		assert_int_equal(count_of(x, other, 3), 4);
		for (size_t i = 0; i < x->nstacks; i++)
			assert_null(x->stacks[i].lines);
		assert_int_equal(x->nlined, 4);
		assert_int_equal(lined_count_of(x, work, l20, 3), 8);
		assert_int_equal(lined_count_of(x, work, l21, 3), 2);
		assert_int_equal(lined_count_of(x, work, NULL, 3), 2);
		assert_int_equal(lined_count_of(x, other, l30, 3), 4);
	}
	for (size_t i = 0; i < s->nlined; i++)
		lined_sum += s->lined[i].count;
	assert_int_equal(lined_sum, s->total);
	/* a window of the last second only: its own lines */
	profile_snapshot_free(w);
	w = snap(p, t);
	assert_int_equal(w->total, 10);
	assert_int_equal(count_of(w, work, 3), 6);
	assert_int_equal(lined_count_of(w, work, l20, 3), 3);
	assert_int_equal(lined_count_of(w, work, NULL, 3), 1);

	assert_int_equal(profile_snapshot_dup(s, &copy), 0);
	assert_int_equal(copy->nlined, 4);
	assert_int_equal(lined_count_of(copy, work, l21, 3), 2);
	assert_int_equal(count_of(copy, work, 3), 12);

	/* sync's seconds: per line variant, lines told */
	assert_int_equal(profile_seconds(p, t, t + 1, &sec), 0);
	assert_int_equal(sec->nstacks, 4);
	for (size_t i = 0; i < sec->nstacks; i++) {
		const struct profile_stack *st = &sec->stacks[i];

		assert_non_null(st->lines);
		if (!memcmp(st->lines, l21, sizeof(l21)))
			assert_int_equal(st->count, 2);
		if (!memcmp(st->lines, l30, sizeof(l30)))
			assert_int_equal(st->count, 4);
	}
	profile_seconds_free(sec);

	profile_reset(p);
	profile_snapshot_free(w);
	w = snap(p, 0);
	assert_int_equal(w->total, 0);
	assert_int_equal(w->nlined, 0);
	profile_snapshot_free(w);
	profile_snapshot_free(copy);
	profile_snapshot_free(s);
	profile_unref(p);
}

/* Past the budget a new line variant is counted in its stack with unknown lines: the stack's
 * count and the total stay exact, known variants go on counting. */
static void test_line_variants_past_the_budget(void **state)
{
	struct profile *p = profile_new("samples");
	uint32_t work[2], l1[2] = { 0, 7 }, l2[2] = { 0, 8 };
	struct profile_snapshot *s;
	int64_t t = now_sec();

	work[0] = frame(p, "thread");
	work[1] = frame(p, "work");
	assert_int_equal(profile_add_lines(p, t, work, l1, 2, 1), 0);
	profile_set_budget(1);
	assert_int_equal(profile_add_lines(p, t, work, l2, 2, 2), 0);
	assert_int_equal(profile_add_lines(p, t, work, l1, 2, 3), 0);
	profile_set_budget(SIZE_MAX);
	s = snap(p, 0);
	assert_int_equal(s->total, 6);
	assert_int_equal(count_of(s, work, 2), 6);
	assert_int_equal(s->nlined, 2);
	assert_int_equal(lined_count_of(s, work, l1, 2), 4);
	assert_int_equal(lined_count_of(s, work, NULL, 2), 2);
	assert_int_equal(lined_count_of(s, work, l2, 2), 0);
	profile_snapshot_free(s);
	profile_unref(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_interning),
		cmocka_unit_test(test_frame_info),
		cmocka_unit_test(test_line_variants),
		cmocka_unit_test(test_line_variants_past_the_budget),
		cmocka_unit_test(test_totals),
		cmocka_unit_test(test_window),
		cmocka_unit_test(test_window_since_clamped),
		cmocka_unit_test(test_expiry),
		cmocka_unit_test(test_history_coarsens_past_a_minute),
		cmocka_unit_test(test_budget_bounds_stacks_and_keeps_totals),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_snapshot_outlives_writes),
		cmocka_unit_test(test_snapshot_dup),
		cmocka_unit_test(test_concurrent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
