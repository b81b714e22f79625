/* The json, pprof, svg and diff renderers on fixed inputs: empty, one stack, odd names,
 * frame infos, narrow frames, 50,000 stacks. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include <zlib.h>
#include "views/profile.pb-c.h"
#include "views/views.h"

#define T0 1795269785 /* 2026-11-21T14:03:05Z */

static const struct view_meta META = {
	.title = "cpu: app (pid 7)", .now = T0 + 60, .sample_type = "samples",
	.period_type = "cpu", .period_unit = "nanoseconds", .period = 10000000,
};

typedef int (*meta_view_fn)(const struct profile_snapshot *s, const struct view_meta *m,
			    FILE *out);

static char *render(meta_view_fn view, const struct profile_snapshot *s, size_t *len)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *out = open_memstream(&buf, &size);

	assert_non_null(out);
	assert_int_equal(view(s, &META, out), 0);
	assert_int_equal(fclose(out), 0);
	if (len)
		*len = size;
	return buf;
}

static uint32_t add_frames(struct profile *p, uint32_t *frames, const char *stack)
{
	char *copy = strdup(stack), *save = NULL, *f;
	uint32_t depth = 0;

	for (f = strtok_r(copy, ";", &save); f; f = strtok_r(NULL, ";", &save))
		assert_int_equal(profile_frame_id(p, f, &frames[depth++]), 0);
	free(copy);
	return depth;
}

/* A profile from `stack COUNT` pairs; frames split at ';'. */
static struct profile_snapshot *make(const char *const *stacks, const uint64_t *counts,
				     size_t n)
{
	struct profile *p = profile_new("samples");
	struct profile_snapshot *s = NULL;
	uint32_t frames[64], depth;

	assert_non_null(p);
	for (size_t i = 0; i < n; i++) {
		depth = add_frames(p, frames, stacks[i]);
		assert_int_equal(profile_add(p, T0, frames, depth, counts[i]), 0);
	}
	assert_int_equal(profile_snapshot(p, 0, &s), 0);
	profile_unref(p);
	s->since = T0; /* made now; the renders must not depend on when the test runs */
	return s;
}

static Perftools__Profiles__Profile *decode_pprof(const char *gz, size_t len)
{
	size_t cap = 1 << 16, n = 0;
	uint8_t *raw = malloc(cap);
	z_stream z = { .next_in = (uint8_t *)gz, .avail_in = len };
	Perftools__Profiles__Profile *p;
	int ret;

	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	do {
		if (n == cap)
			raw = realloc(raw, cap *= 2);
		z.next_out = raw + n;
		z.avail_out = cap - n;
		ret = inflate(&z, Z_NO_FLUSH);
		n = cap - z.avail_out;
	} while (ret == Z_OK);
	assert_int_equal(ret, Z_STREAM_END);
	assert_int_equal(z.avail_in, 0); /* one gzip member, nothing after it */
	inflateEnd(&z);
	p = perftools__profiles__profile__unpack(NULL, n, raw);
	free(raw);
	assert_non_null(p);
	assert_true(p->n_string_table >= 1);
	assert_string_equal(p->string_table[0], "");
	return p;
}

static const char *str(const Perftools__Profiles__Profile *p, int64_t i)
{
	assert_true(i >= 0 && (size_t)i < p->n_string_table);
	return p->string_table[i];
}

static const Perftools__Profiles__Function *function_of(const Perftools__Profiles__Profile *p,
							uint64_t location_id)
{
	for (size_t i = 0; i < p->n_location; i++) {
		if (p->location[i]->id != location_id)
			continue;
		assert_int_equal(p->location[i]->n_line, 1);
		for (size_t j = 0; j < p->n_function; j++)
			if (p->function[j]->id == p->location[i]->line[0]->function_id)
				return p->function[j];
	}
	fail_msg("no location %" PRIu64, location_id);
	return NULL;
}

static void test_empty(void **state)
{
	struct profile_snapshot *s = make(NULL, NULL, 0), *b = make(NULL, NULL, 0);
	Perftools__Profiles__Profile *p;
	char *out;
	size_t len;

	out = render(view_json, s, NULL);
	assert_string_equal(out, "{\"title\":\"cpu: app (pid 7)\",\"unit\":\"samples\",\"total\":0,"
			    "\"window\":{\"seconds\":0,\"since\":\"2026-11-21T14:03:05Z\","
			    "\"until\":\"2026-11-21T14:04:05Z\"},\"period\":{\"type\":\"cpu\","
			    "\"unit\":\"nanoseconds\",\"value\":10000000},"
			    "\"tree\":{\"name\":\"all\",\"value\":0,\"children\":[]}}\n");
	free(out);
	out = render(view_svg, s, NULL);
	assert_non_null(strstr(out, "<g id=\"frames\">\n</g>"));
	assert_non_null(strstr(out, ": 0 samples"));
	assert_non_null(strstr(out, "</svg>\n"));
	free(out);
	out = render(view_pprof, s, &len);
	p = decode_pprof(out, len);
	assert_int_equal(p->n_sample, 0);
	assert_int_equal(p->n_sample_type, 2);
	assert_string_equal(str(p, p->sample_type[0]->type), "samples");
	assert_string_equal(str(p, p->sample_type[0]->unit), "count");
	assert_string_equal(str(p, p->sample_type[1]->type), "cpu");
	assert_string_equal(str(p, p->sample_type[1]->unit), "nanoseconds");
	assert_int_equal(p->period, 10000000);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(out);
	out = NULL;
	{
		FILE *f = open_memstream(&out, &len);

		assert_int_equal(view_diff_folded(b, s, f), 0);
		fclose(f);
		assert_int_equal(len, 0);
		free(out);
	}
	profile_snapshot_free(b);
	profile_snapshot_free(s);
}

static void test_one_stack(void **state)
{
	static const char *const stacks[] = { "t1;main;work" };
	static const uint64_t counts[] = { 5 };
	struct profile_snapshot *s = make(stacks, counts, 1);
	Perftools__Profiles__Profile *p;
	char *out;
	size_t len;

	out = render(view_json, s, NULL);
	assert_non_null(strstr(out, ",\"tree\":{\"name\":\"all\",\"value\":5,\"children\":["
				 "{\"name\":\"t1\",\"value\":5,\"children\":["
				 "{\"name\":\"main\",\"value\":5,\"children\":["
				 "{\"name\":\"work\",\"value\":5,\"children\":[]}]}]}]}}\n"));
	free(out);

	out = render(view_svg, s, NULL);
	/* root at the bottom, each frame a row above its parent, all full width */
	assert_non_null(strstr(out, "<g><title>all (5 samples, 100.00%)</title><rect x=\"10.0\" "
				 "y=\"114\" width=\"1180.0\" height=\"15\""));
	assert_non_null(strstr(out, "<g><title>work (5 samples, 100.00%)</title><rect x=\"10.0\" "
				 "y=\"66\" width=\"1180.0\" height=\"15\""));
	assert_non_null(strstr(out, ">work</text></g>"));
	assert_non_null(strstr(out, "Flame graph: cpu: app (pid 7)"));
	assert_non_null(strstr(out, "since 2026-11-21T14:03:05Z, until 2026-11-21T14:04:05Z: 5 samples"));
	assert_null(strstr(out, "narrower than")); /* nothing was left out */
	free(out);

	out = render(view_pprof, s, &len);
	p = decode_pprof(out, len);
	assert_int_equal(p->n_sample, 1);
	assert_int_equal(p->sample[0]->n_value, 2);
	assert_int_equal(p->sample[0]->value[0], 5);
	assert_int_equal(p->sample[0]->value[1], 50000000);
	/* leaf first; the thread is a label, not a frame */
	assert_int_equal(p->sample[0]->n_location_id, 2);
	assert_string_equal(str(p, function_of(p, p->sample[0]->location_id[0])->name), "work");
	assert_string_equal(str(p, function_of(p, p->sample[0]->location_id[1])->name), "main");
	assert_int_equal(p->sample[0]->n_label, 1);
	assert_string_equal(str(p, p->sample[0]->label[0]->key), "thread");
	assert_string_equal(str(p, p->sample[0]->label[0]->str), "t1");
	assert_int_equal(p->time_nanos, (int64_t)T0 * 1000000000);
	assert_int_equal(p->duration_nanos, 60 * 1000000000LL);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(out);
	profile_snapshot_free(s);
}

static void test_odd_names(void **state)
{
	static const char *const stacks[] = {
		"t<1>;a\"b\\c;x&y<z>'q'", "t<1>;\xc3\xa9t\xc3\xa9;\xe2\x82\xac\xf0\x9f\x94\xa5",
		"t<1>;bad\xff\xc3;]]>",
	};
	static const uint64_t counts[] = { 1, 2, 3 };
	struct profile_snapshot *s = make(stacks, counts, 3);
	Perftools__Profiles__Profile *p;
	char *out;
	size_t len;

	out = render(view_json, s, NULL);
	assert_non_null(strstr(out, "{\"name\":\"a\\\"b\\\\c\",\"value\":1"));
	assert_non_null(strstr(out, "{\"name\":\"x&y<z>'q'\",\"value\":1"));
	assert_non_null(strstr(out, "{\"name\":\"\xc3\xa9t\xc3\xa9\",\"value\":2"));
	assert_non_null(strstr(out, "{\"name\":\"\xe2\x82\xac\xf0\x9f\x94\xa5\",\"value\":2"));
	/* bytes that are not UTF-8 become U+FFFD, so the document stays valid */
	assert_non_null(strstr(out, "{\"name\":\"bad\xef\xbf\xbd\xef\xbf\xbd\",\"value\":3"));
	free(out);

	out = render(view_svg, s, NULL);
	assert_non_null(strstr(out, "<title>t&lt;1&gt; (6 samples"));
	assert_non_null(strstr(out, "<title>a&quot;b\\c (1 samples"));
	assert_non_null(strstr(out, "<title>x&amp;y&lt;z&gt;'q' (1 samples"));
	assert_non_null(strstr(out, "<title>\xe2\x82\xac\xf0\x9f\x94\xa5 (2 samples"));
	assert_non_null(strstr(out, "<title>bad\xef\xbf\xbd\xef\xbf\xbd (3 samples"));
	assert_non_null(strstr(out, "<title>]]&gt; (3 samples"));
	/* the only CDATA end is the script's own */
	assert_ptr_equal(strstr(out, "]]>"), strstr(out, "]]></script>"));
	assert_null(strstr(out, "\xff"));
	free(out);

	out = render(view_pprof, s, &len);
	p = decode_pprof(out, len);
	assert_int_equal(p->n_sample, 3);
	for (size_t i = 0; i < p->n_string_table; i++)
		assert_null(strstr(p->string_table[i], "\xff"));
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(out);
	profile_snapshot_free(s);
}

/* The line of a location, checked to be the only one. */
static uint64_t line_of(const Perftools__Profiles__Profile *p, uint64_t location_id)
{
	for (size_t i = 0; i < p->n_location; i++) {
		if (p->location[i]->id != location_id)
			continue;
		assert_int_equal(p->location[i]->n_line, 1);
		return p->location[i]->line[0]->line;
	}
	fail_msg("no location %" PRIu64, location_id);
	return 0;
}

/* A location per function and line running in it; the function says where it starts; the
 * folded view still has the stack once. */
static void test_pprof_lines(void **state)
{
	struct frame_info hot_info = { "hot.c", 3, "/usr/bin/app", NULL };
	struct frame_info main_info = { "hot.c", 10, "/usr/bin/app", NULL };
	struct profile *pr = profile_new("samples");
	uint32_t frames[3], at4[3] = { 0, 12, 4 }, at5[3] = { 0, 12, 5 };
	struct profile_snapshot *s;
	Perftools__Profiles__Profile *p;
	uint64_t by_line[8] = {0}, total = 0;
	char *out;
	size_t len;

	assert_int_equal(profile_frame_id(pr, "t", &frames[0]), 0);
	assert_int_equal(profile_frame_id_info(pr, "main", &main_info, &frames[1]), 0);
	assert_int_equal(profile_frame_id_info(pr, "hot", &hot_info, &frames[2]), 0);
	assert_int_equal(profile_add_lines(pr, T0, frames, at4, 3, 3), 0);
	assert_int_equal(profile_add_lines(pr, T0, frames, at5, 3, 2), 0);
	assert_int_equal(profile_snapshot(pr, 0, &s), 0);
	profile_unref(pr);
	s->since = T0;

	out = render(view_pprof, s, &len);
	p = decode_pprof(out, len);
	assert_int_equal(p->n_sample, 2);
	assert_int_equal(p->n_function, 2);
	assert_int_equal(p->n_location, 3);
	for (size_t i = 0; i < p->n_sample; i++) {
		const Perftools__Profiles__Sample *sm = p->sample[i];
		const Perftools__Profiles__Function *leaf = function_of(p, sm->location_id[0]);
		const Perftools__Profiles__Function *caller = function_of(p, sm->location_id[1]);

		assert_int_equal(sm->n_location_id, 2);
		assert_string_equal(str(p, leaf->name), "hot");
		assert_int_equal(leaf->start_line, 3);
		assert_string_equal(str(p, caller->name), "main");
		assert_int_equal(caller->start_line, 10);
		assert_int_equal(line_of(p, sm->location_id[1]), 12);
		by_line[line_of(p, sm->location_id[0])] += sm->value[0];
		total += sm->value[0];
	}
	assert_int_equal(by_line[4], 3);
	assert_int_equal(by_line[5], 2);
	assert_int_equal(total, 5);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(out);
	{
		FILE *f = open_memstream(&out, &len);

		assert_int_equal(view_folded(s, f), 0);
		fclose(f);
		assert_string_equal(out, "t;main;hot 5\n");
		free(out);
	}
	profile_snapshot_free(s);
}

static void test_frame_infos(void **state)
{
	struct frame_info info = { "src/app.c", 42, "/usr/bin/app", "0123abcd" };
	struct frame_info lib = { NULL, 0, "/lib/libc.so.6", NULL };
	struct profile *pr = profile_new("samples");
	struct profile_snapshot *s;
	Perftools__Profiles__Profile *p;
	uint32_t frames[3];
	char *out;
	size_t len;

	assert_int_equal(profile_frame_id(pr, "t", &frames[0]), 0);
	assert_int_equal(profile_frame_id_info(pr, "main", &info, &frames[1]), 0);
	assert_int_equal(profile_frame_id_info(pr, "memcpy", &lib, &frames[2]), 0);
	assert_int_equal(profile_add(pr, T0, frames, 3, 4), 0);
	assert_int_equal(profile_snapshot(pr, 0, &s), 0);
	profile_unref(pr);

	out = render(view_json, s, NULL);
	assert_non_null(strstr(out, "{\"name\":\"main\",\"value\":4,\"file\":\"src/app.c\","
				 "\"line\":42,\"children\":["));
	assert_non_null(strstr(out, "{\"name\":\"memcpy\",\"value\":4,\"children\":[]}"));
	free(out);

	out = render(view_pprof, s, &len);
	p = decode_pprof(out, len);
	assert_int_equal(p->n_mapping, 2);
	const Perftools__Profiles__Function *leaf = function_of(p, p->sample[0]->location_id[0]);
	const Perftools__Profiles__Function *caller = function_of(p, p->sample[0]->location_id[1]);
	assert_string_equal(str(p, leaf->name), "memcpy");
	assert_string_equal(str(p, leaf->filename), "");
	assert_string_equal(str(p, caller->name), "main");
	assert_string_equal(str(p, caller->filename), "src/app.c");
	assert_int_equal(caller->start_line, 42);
	for (size_t i = 0; i < p->n_location; i++) {
		const Perftools__Profiles__Location *loc = p->location[i];
		const Perftools__Profiles__Mapping *m = NULL;

		for (size_t j = 0; j < p->n_mapping; j++)
			if (p->mapping[j]->id == loc->mapping_id)
				m = p->mapping[j];
		assert_non_null(m);
		if (loc->id == p->sample[0]->location_id[1]) {
			assert_string_equal(str(p, m->filename), "/usr/bin/app");
			assert_string_equal(str(p, m->build_id), "0123abcd");
		} else {
			assert_string_equal(str(p, m->filename), "/lib/libc.so.6");
			assert_string_equal(str(p, m->build_id), "");
		}
	}
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(out);
	profile_snapshot_free(s);
}

/* The fill of the frame titled name (start of the title) in svg. */
static unsigned fill_of(const char *svg, const char *name, unsigned rgb[3])
{
	char key[128];
	const char *at, *fill;

	snprintf(key, sizeof(key), "<title>%s (", name);
	at = strstr(svg, key);
	assert_non_null(at);
	fill = strstr(at, "fill=\"#");
	assert_non_null(fill);
	assert_int_equal(sscanf(fill, "fill=\"#%2x%2x%2x", &rgb[0], &rgb[1], &rgb[2]), 3);
	return rgb[0] << 16 | rgb[1] << 8 | rgb[2];
}

static void test_colours(void **state)
{
	static const char *const stacks[] = {
		"t;main;work;sys_read_[k]", "t;main;Interp.run_[j]", "t;main;inlined_[i]",
		"t;main;work",
	};
	static const char *const other[] = { "u;other;work;x", "u;main" };
	static const uint64_t counts[] = { 10, 10, 10, 10 };
	struct profile_snapshot *s = make(stacks, counts, 4), *s2 = make(other, counts, 2);
	char *a = render(view_svg, s, NULL), *b = render(view_svg, s2, NULL);
	unsigned k[3], j[3], i[3], n[3], tmp[3];

	fill_of(a, "sys_read_[k]", k);
	fill_of(a, "Interp.run_[j]", j);
	fill_of(a, "inlined_[i]", i);
	fill_of(a, "work", n);
	assert_true(k[2] > k[0] && k[2] > k[1]);     /* kernel: blue */
	assert_true(j[1] > j[0] && j[1] > j[2]);     /* JIT/Java: green */
	assert_true(i[1] > i[0] && i[2] > i[0]);     /* inlined: aqua */
	assert_true(n[0] > n[2] && n[0] >= n[1]);    /* native: red to yellow */
	/* the same function, the same colour, in another profile at another place */
	assert_int_equal(fill_of(a, "work", tmp), fill_of(b, "work", tmp));
	assert_int_equal(fill_of(a, "main", tmp), fill_of(b, "main", tmp));
	assert_int_not_equal(fill_of(a, "main", tmp), fill_of(a, "work", tmp));
	free(a);
	free(b);
	profile_snapshot_free(s2);
	profile_snapshot_free(s);
}

static void test_narrow_frames(void **state)
{
	const char *stacks[1001];
	uint64_t counts[1001];
	char names[1000][32];
	struct profile_snapshot *s;
	char *out, want[160];

	stacks[0] = "t;main;big";
	counts[0] = 10000000;
	for (int i = 0; i < 1000; i++) {
		snprintf(names[i], sizeof(names[i]), "t;main;tiny%03d;deeper", i);
		stacks[i + 1] = names[i];
		counts[i + 1] = i < 500 ? 1 : 50; /* 500 tiny ones, then 500 merged together */
	}
	s = make(stacks, counts, 1001);
	out = render(view_svg, s, NULL);
	/* tiny000..tiny499 precede the rest by name; with big they sit after it */
	assert_null(strstr(out, "<title>tiny000 ("));
	assert_null(strstr(out, "<title>deeper ("));
	snprintf(want, sizeof(want), "<title>[2000 narrow frames] (25500 samples");
	assert_non_null(strstr(out, want));
	assert_non_null(strstr(out, "Frames narrower than 0.1 px: 2000 merged into 1 grey boxes, "
				 "0 left out"));
	free(out);
	profile_snapshot_free(s);
}

static void test_diff(void **state)
{
	static const char *const base_stacks[] = { "t;main;a", "t;main;b", "t;main;gone" };
	static const uint64_t base_counts[] = { 50, 40, 10 };
	static const char *const now_stacks[] = { "t;main;a", "t;main;b", "t;main;new", "t;main" };
	static const uint64_t now_counts[] = { 100, 20, 60, 20 };
	struct profile_snapshot *b = make(base_stacks, base_counts, 3);
	struct profile_snapshot *n = make(now_stacks, now_counts, 4);
	unsigned rgb[3];
	char *out = NULL;
	size_t len;
	FILE *f = open_memstream(&out, &len);

	assert_int_equal(view_diff_folded(b, n, f), 0);
	fclose(f);
	assert_string_equal(out, "t;main 0 20\n"
				 "t;main;a 50 100\n"
				 "t;main;b 40 20\n"
				 "t;main;gone 10 0\n"
				 "t;main;new 0 60\n");
	free(out);
	f = open_memstream(&out, &len);
	assert_int_equal(view_diff_svg(b, n, &META, f), 0);
	fclose(f);
	assert_non_null(strstr(out, "Differential flame graph: cpu: app (pid 7)"));
	/* widths are now's; shares compared with each profile's total: a 50 % -> 50 %,
	 * b 40 % -> 10 %, new 0 -> 30 % */
	assert_non_null(strstr(out, "<title>a (100 samples, 50.00%, base 50, +0.00%)"));
	assert_non_null(strstr(out, "<title>b (20 samples, 10.00%, base 40, -30.00%)"));
	assert_non_null(strstr(out, "<title>new (60 samples, 30.00%, base 0, +30.00%)"));
	assert_null(strstr(out, "<title>gone ("));
	fill_of(out, "new", rgb);
	assert_true(rgb[0] == 255 && rgb[2] < 100);  /* grew: red */
	fill_of(out, "b", rgb);
	assert_true(rgb[2] == 255 && rgb[0] < 100);  /* shrank: blue */
	fill_of(out, "a", rgb);
	assert_true(rgb[0] == 255 && rgb[1] == 255 && rgb[2] == 255); /* same share: white */
	free(out);
	profile_snapshot_free(n);
	profile_snapshot_free(b);
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) + (t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* 50,000 distinct stacks 8 to 40 deep over 2,000 names: every renderer keeps every sample,
 * and the flame graph stays small. */
static void test_50k_stacks(void **state)
{
	struct profile *pr = profile_new("samples");
	struct profile_snapshot *s;
	Perftools__Profiles__Profile *p;
	uint32_t frames[40], names[2000], seed = 1;
	uint64_t total = 0, sum = 0;
	struct timespec t0;
	char name[32], *out;
	size_t len;

	for (int i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), i < 1000 ? "fn_%d" : "sys_%d_[k]", i);
		assert_int_equal(profile_frame_id(pr, name, &names[i]), 0);
	}
	for (int i = 0; i < 50000; i++) {
		uint32_t depth = 8 + i % 33;

		frames[0] = names[i % 4];
		for (uint32_t d = 1; d < depth; d++) {
			seed = seed * 1103515245 + 12345;
			frames[d] = names[(seed >> 8) % (d < 4 ? 8 : 2000)];
		}
		frames[depth - 1] = names[i % 2000]; /* with the random ones, no two alike */
		frames[depth - 2] = names[(i / 2000) % 2000];
		assert_int_equal(profile_add(pr, T0, frames, depth, 1 + i % 7), 0);
		total += 1 + i % 7;
	}
	assert_int_equal(profile_snapshot(pr, 0, &s), 0);
	profile_unref(pr);
	assert_int_equal(s->nstacks, 50000);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	out = render(view_svg, s, &len);
	print_message("      50,000 stacks: svg %zu bytes in %.3f s\n", len, seconds_since(&t0));
	assert_true(len < 4 << 20);
	assert_non_null(strstr(out, "<title>all (")); /* the total is whole */
	{
		char want[64];

		snprintf(want, sizeof(want), "<title>all (%" PRIu64 " samples, 100.00%%)", total);
		assert_non_null(strstr(out, want));
	}
	free(out);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	out = render(view_json, s, &len);
	print_message("      50,000 stacks: json %zu bytes in %.3f s\n", len, seconds_since(&t0));
	{
		char want[64];

		snprintf(want, sizeof(want), ",\"total\":%" PRIu64 ",", total);
		assert_non_null(strstr(out, want));
		snprintf(want, sizeof(want), "\"tree\":{\"name\":\"all\",\"value\":%" PRIu64 ",",
			 total);
		assert_non_null(strstr(out, want));
	}
	free(out);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	out = render(view_pprof, s, &len);
	print_message("      50,000 stacks: pprof %zu bytes in %.3f s\n", len, seconds_since(&t0));
	p = decode_pprof(out, len);
	assert_int_equal(p->n_sample, 50000);
	for (size_t i = 0; i < p->n_sample; i++)
		sum += p->sample[i]->value[0];
	assert_true(sum == total);
	assert_int_equal(p->n_function, 2000);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(out);
	profile_snapshot_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_one_stack),
		cmocka_unit_test(test_odd_names),
		cmocka_unit_test(test_frame_infos),
		cmocka_unit_test(test_pprof_lines),
		cmocka_unit_test(test_colours),
		cmocka_unit_test(test_narrow_frames),
		cmocka_unit_test(test_diff),
		cmocka_unit_test(test_50k_stacks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
