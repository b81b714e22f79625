#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include "views/views.h"

#define SINCE 1795269785 /* 2026-11-21T14:03:05Z */

typedef int (*view_fn)(const struct profile_snapshot *s, FILE *out);

/* Renders into a NUL-terminated string the caller frees. */
static char *render(view_fn view, const struct profile_snapshot *s, size_t *len)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *out = open_memstream(&buf, &size);

	assert_non_null(out);
	assert_int_equal(view(s, out), 0);
	assert_int_equal(fclose(out), 0);
	if (len)
		*len = size;
	return buf;
}

static void check_render(view_fn view, const struct profile_snapshot *s, const char *want)
{
	char *got = render(view, s, NULL);

	assert_string_equal(got, want);
	free(got);
}

static void add(struct profile *p, int64_t sec, uint64_t count, int depth, ...)
{
	uint32_t frames[16];
	va_list ap;
	int i;

	va_start(ap, depth);
	for (i = 0; i < depth; i++)
		assert_int_equal(profile_frame_id(p, va_arg(ap, const char *), &frames[i]), 0);
	va_end(ap);
	assert_int_equal(profile_add(p, sec, frames, depth, count), 0);
}

static struct profile_snapshot *snap(struct profile *p, int64_t since)
{
	struct profile_snapshot *s = NULL;

	assert_int_equal(profile_snapshot(p, since, &s), 0);
	return s;
}

static void test_folded(void **state)
{
	struct profile *p = profile_new("samples");
	struct profile_snapshot *s;
	int64_t t = time(NULL);

	add(p, t, 2, 2, "worker\n1", "f(x, y)");
	add(p, t, 1, 3, "t2", "f1", "g");
	add(p, t, 1, 3, "t2", "f12", "g");
	add(p, t, 7, 3, "t1", "main", "\xc3\xa9");
	add(p, t, 2, 4, "t1", "main", "a", "b");
	add(p, t, 5, 3, "t1", "main", "a;b");
	add(p, t, 1, 3, "t1", "main", "a");
	add(p, t, 4, 3, "t1", "main!", "z");
	add(p, t, 1, 2, "t1", "main");
	add(p, t + 1, 2, 3, "t1", "main", "a");
	add(p, t + 2, 4, 2, "worker\n1", "f(x, y)");
	s = snap(p, 0);
	/* Frame by frame, names as strings: a stack before those it is a prefix of, and a name
	 * before the longer names it begins. */
	check_render(view_folded, s,
		     "t1;main 1\n"
		     "t1;main;a 3\n"
		     "t1;main;a;b 2\n"
		     "t1;main;a:b 5\n"
		     "t1;main;\xc3\xa9 7\n"
		     "t1;main!;z 4\n"
		     "t2;f1;g 1\n"
		     "t2;f12;g 1\n"
		     "worker 1;f(x, y) 6\n");
	profile_snapshot_free(s);

	s = snap(p, t + 1);
	check_render(view_folded, s,
		     "t1;main;a 2\n"
		     "worker 1;f(x, y) 4\n");
	profile_snapshot_free(s);

	profile_reset(p);
	s = snap(p, 0);
	check_render(view_folded, s, "");
	profile_snapshot_free(s);
	profile_unref(p);
}

/* A name longer than any buffer the view may assemble lines in. */
static void test_folded_long_name(void **state)
{
	struct profile *p = profile_new("samples");
	size_t len = 200000;
	char *name = malloc(len + 1), *want = malloc(len + 32);
	struct profile_snapshot *s;

	assert_non_null(name);
	assert_non_null(want);
	memset(name, 'x', len);
	name[len] = 0;
	add(p, time(NULL), 3, 3, "t", name, "leaf");
	add(p, time(NULL), 1, 2, "t", "a");
	s = snap(p, 0);
	snprintf(want, len + 32, "t;a 1\nt;%s;leaf 3\n", name);
	check_render(view_folded, s, want);
	profile_snapshot_free(s);
	profile_unref(p);
	free(want);
	free(name);
}

static const char *top_names[] = { "t", "m", "e", "c", "a b", "d", "b" };

static void test_top(void **state)
{
	static const uint32_t recursive[] = { 0, 1, 6, 1, 6 }, tm[] = { 0, 1 },
			      tcm[] = { 0, 3, 1 }, d[] = { 5 }, thread_d[] = { 5, 4 },
			      td[] = { 0, 5 }, te[] = { 0, 2 };
	struct profile_stack stacks[] = {
		{ recursive, 5, 5 }, { tm, 2, 3 }, { tcm, 3, 2 }, { d, 1, 4 },
		{ thread_d, 2, 6 }, { td, 2, 1 }, { te, 2, 5 },
	};
	struct profile_snapshot s = {
		.unit = "samples",
		.names = top_names,
		.nnames = 7,
		.stacks = stacks,
		.nstacks = 7,
		.total = 26,
		.since = SINCE,
	};

	/* m and b recurse: counted once per stack in total. The stack of the thread "d" alone
	 * counts in the total only: a thread's name is not the function of the same name. Ties
	 * break on total, then name, whatever the ids' order. */
	check_render(view_top, &s,
		     "# 26 samples since 2026-11-21T14:03:05Z\n"
		     "# self%  total%       self      total  function\n"
		     "  23.08   23.08          6          6  a b\n"
		     "  19.23   38.46          5         10  m\n"
		     "  19.23   19.23          5          5  b\n"
		     "  19.23   19.23          5          5  e\n"
		     "   3.85    3.85          1          1  d\n"
		     "   0.00    7.69          0          2  c\n");
}

static void test_empty(void **state)
{
	struct profile_snapshot s = { .unit = "microseconds", .since = SINCE };
	struct profile *p = profile_new("samples");
	struct profile_snapshot *ps;

	/* Nothing to report: both files are empty, as the contract asks. */
	check_render(view_folded, &s, "");
	check_render(view_top, &s, "");

	/* through the store: frames interned, nothing counted */
	add(p, time(NULL), 3, 2, "t", "f");
	profile_reset(p);
	ps = snap(p, 0);
	check_render(view_folded, ps, "");
	check_render(view_top, ps, "");
	profile_snapshot_free(ps);
	profile_unref(p);
}

/* A synthetic profile of n distinct stacks of depth 25 to 35 sharing prefixes, as a real
 * program's do; names with digits exercise the ';'-versus-digit order. */
#define BIG_STACKS 50000
#define BIG_MAX_DEPTH 35

struct big_stack {
	uint32_t frames[BIG_MAX_DEPTH];
	uint32_t depth;
	uint64_t count;
	char *text;
};

static uint32_t mix(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352d;
	x ^= x >> 15;
	x *= 0x846ca68b;
	return x ^ (x >> 16);
}

static void big_stack(struct profile *p, uint32_t i, struct big_stack *b)
{
	char name[32], *text;
	size_t len = 0, size = 0;
	FILE *f = open_memstream(&text, &size);
	uint32_t j, tail;

	assert_non_null(f);
	b->depth = 25 + i % 11;
	b->count = i % 97 + 1;
	tail = b->depth - 3;
	for (j = 0; j < b->depth; j++) {
		if (j == 0)
			snprintf(name, sizeof(name), "worker-%u", i % 8);
		else if (j < tail)
			snprintf(name, sizeof(name), "fn%u", mix(i >> (j / 3) ^ j) % 60);
		else /* the last three frames make the stack unique */
			snprintf(name, sizeof(name), "u%u_%u", j - tail,
				 j == tail ? i % 40 : j == tail + 1 ? i / 40 % 40 : i / 1600);
		assert_int_equal(profile_frame_id(p, name, &b->frames[j]), 0);
		len += fprintf(f, "%s%s", j ? ";" : "", name);
	}
	assert_int_equal(fclose(f), 0);
	assert_int_equal(strlen(text), len);
	b->text = text;
	assert_int_equal(profile_add(p, time(NULL), b->frames, b->depth, b->count), 0);
}

/* strcmp with ';' below every other byte: frame-by-frame order, from the text alone. */
static int big_cmp(const void *a, const void *b)
{
	const unsigned char *x = (const void *)((const struct big_stack *)a)->text;
	const unsigned char *y = (const void *)((const struct big_stack *)b)->text;
	int cx, cy;

	for (;; x++, y++) {
		cx = *x == ';' ? 1 : *x;
		cy = *y == ';' ? 1 : *y;
		if (cx != cy || !cx)
			return cx - cy;
	}
}

/* Expected folded text: each stack's text built as a string, sorted by big_cmp. */
static char *big_folded(struct big_stack *stacks, size_t n)
{
	char *text = NULL;
	size_t size = 0, i;
	FILE *f = open_memstream(&text, &size);

	assert_non_null(f);
	qsort(stacks, n, sizeof(*stacks), big_cmp);
	for (i = 0; i < n; i++)
		fprintf(f, "%s %" PRIu64 "\n", stacks[i].text, stacks[i].count);
	assert_int_equal(fclose(f), 0);
	return text;
}

/* A share printed with two decimals is within half a hundredth of the exact one. */
static int near(double printed, double exact)
{
	double d = printed - exact;

	return d <= 0.005 + 1e-9 && d >= -0.005 - 1e-9;
}

struct expect_fn {
	uint64_t self, total;
	size_t seen;
};

static void check_big_top(const struct profile_snapshot *s, const struct big_stack *stacks,
			  size_t n, const char *top)
{
	struct expect_fn *want = calloc(s->nnames, sizeof(*want));
	uint64_t self, total, last_self = UINT64_MAX, last_total = UINT64_MAX, total_all = 0;
	char name[64], last_name[64] = "";
	size_t i, j, rows = 0, want_rows = 0;
	const char *line;
	double pself, ptotal;
	uint32_t id;

	assert_non_null(want);
	for (i = 0; i < n; i++) {
		for (j = 1; j < stacks[i].depth; j++) {
			id = stacks[i].frames[j];
			if (want[id].seen != i + 1)
				want[id].total += stacks[i].count;
			want[id].seen = i + 1;
		}
		want[stacks[i].frames[stacks[i].depth - 1]].self += stacks[i].count;
		total_all += stacks[i].count;
	}
	for (id = 0; id < s->nnames; id++)
		want_rows += want[id].total > 0;

	line = strchr(top, '\n') + 1; /* the summary */
	line = strchr(line, '\n') + 1; /* the column header */
	for (; *line; line = strchr(line, '\n') + 1) {
		assert_int_equal(sscanf(line, "%lf %lf %" SCNu64 " %" SCNu64 " %63s", &pself,
					&ptotal, &self, &total, name),
				 5);
		for (id = 0; id < s->nnames && strcmp(s->names[id], name); id++)
			;
		assert_true(id < s->nnames);
		assert_int_equal(self, want[id].self);
		assert_int_equal(total, want[id].total);
		assert_true(near(pself, 100.0 * self / total_all));
		assert_true(near(ptotal, 100.0 * total / total_all));
		assert_true(self < last_self || (self == last_self && (total < last_total ||
			    (total == last_total && strcmp(last_name, name) < 0))));
		last_self = self;
		last_total = total;
		strcpy(last_name, name);
		rows++;
	}
	assert_int_equal(rows, want_rows);
	free(want);
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) * 1e3 + (t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static void check_big(size_t n)
{
	struct big_stack *stacks = calloc(n, sizeof(*stacks));
	struct profile *p = profile_new("samples");
	double snap_ms, folded_ms, top_ms;
	struct profile_snapshot *s;
	char *folded, *top, *want;
	struct timespec t0;
	size_t i, len;

	assert_non_null(stacks);
	for (i = 0; i < n; i++)
		big_stack(p, i, &stacks[i]);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	s = snap(p, 0);
	snap_ms = ms_since(&t0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	folded = render(view_folded, s, &len);
	folded_ms = ms_since(&t0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	top = render(view_top, s, NULL);
	top_ms = ms_since(&t0);
	print_message("%zu stacks, %zu frames, %zu bytes folded: snapshot %.2f ms, folded %.2f ms, "
		      "top %.2f ms\n", s->nstacks, s->nnames, len, snap_ms, folded_ms, top_ms);

	assert_int_equal(s->nstacks, n);
	check_big_top(s, stacks, n, top);
	want = big_folded(stacks, n);
	assert_int_equal(strlen(want), len);
	assert_string_equal(folded, want);

	free(want);
	free(top);
	free(folded);
	for (i = 0; i < n; i++)
		free(stacks[i].text);
	free(stacks);
	profile_snapshot_free(s);
	profile_unref(p);
}

static void test_big_10k(void **state)
{
	check_big(10000);
}

static void test_big_50k(void **state)
{
	check_big(BIG_STACKS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_folded),
		cmocka_unit_test(test_folded_long_name),
		cmocka_unit_test(test_top),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_big_10k),
		cmocka_unit_test(test_big_50k),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
