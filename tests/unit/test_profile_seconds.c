/* store/profile.c's profile_seconds: the per-second counts remote sync ships. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <time.h>
#include <cmocka.h>
#include "store/profile.h"

struct fixture {
	struct profile *p;
	uint32_t ab[2], ac[2];
	int64_t t;
};

static int setup(void **state)
{
	static struct fixture f;

	f.p = profile_new("samples");
	assert_non_null(f.p);
	assert_int_equal(profile_frame_id(f.p, "a", &f.ab[0]), 0);
	assert_int_equal(profile_frame_id(f.p, "b", &f.ab[1]), 0);
	f.ac[0] = f.ab[0];
	assert_int_equal(profile_frame_id(f.p, "c", &f.ac[1]), 0);
	f.t = time(NULL) - 100;
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	profile_unref(f->p);
	return 0;
}

static const char *name_of(const struct profile_seconds *s, const struct profile_stack *st)
{
	return s->names[st->frames[st->depth - 1]];
}

/* Counts come out one per (second, stack), ascending by second, only inside [from, until). */
static void test_range(void **state)
{
	struct fixture *f = *state;
	struct profile_seconds *s;
	uint64_t b = 0, c = 0;

	/* second t: b, c, b again (not adjacent: two entries in the bucket) */
	assert_int_equal(profile_add(f->p, f->t, f->ab, 2, 2), 0);
	assert_int_equal(profile_add(f->p, f->t, f->ac, 2, 1), 0);
	assert_int_equal(profile_add(f->p, f->t, f->ab, 2, 3), 0);
	assert_int_equal(profile_add(f->p, f->t + 2, f->ac, 2, 7), 0);
	assert_int_equal(profile_add(f->p, f->t + 5, f->ab, 2, 11), 0);

	assert_int_equal(profile_seconds(f->p, f->t, f->t + 5, &s), 0);
	assert_int_equal(s->ncounts, 3);
	assert_int_equal(s->nstacks, 2);
	assert_true(s->counts[0].sec == f->t && s->counts[1].sec == f->t);
	assert_true(s->counts[2].sec == f->t + 2);
	for (size_t i = 0; i < s->ncounts; i++) {
		const char *leaf = name_of(s, &s->stacks[s->counts[i].stack]);

		*(leaf[0] == 'b' ? &b : &c) += s->counts[i].count;
	}
	assert_int_equal(b, 5);
	assert_int_equal(c, 8);
	for (size_t i = 0; i < s->nstacks; i++)
		assert_int_equal(s->stacks[i].count, name_of(s, &s->stacks[i])[0] == 'b' ? 5 : 8);
	profile_seconds_free(s);

	/* from is inclusive, until exclusive */
	assert_int_equal(profile_seconds(f->p, f->t + 1, f->t + 6, &s), 0);
	assert_int_equal(s->ncounts, 2);
	assert_true(s->counts[0].sec == f->t + 2 && s->counts[0].count == 7);
	assert_true(s->counts[1].sec == f->t + 5 && s->counts[1].count == 11);
	profile_seconds_free(s);

	assert_int_equal(profile_seconds(f->p, f->t + 6, f->t + 100, &s), 0);
	assert_int_equal(s->ncounts, 0);
	assert_int_equal(s->nstacks, 0);
	profile_seconds_free(s);
}

/* After a reset the forgotten seconds are gone; new ones come. */
static void test_reset(void **state)
{
	struct fixture *f = *state;
	struct profile_seconds *s;

	profile_reset(f->p);
	assert_int_equal(profile_seconds(f->p, INT64_MIN, INT64_MAX, &s), 0);
	assert_int_equal(s->ncounts, 0);
	profile_seconds_free(s);
	assert_int_equal(profile_add(f->p, f->t + 10, f->ab, 2, 4), 0);
	assert_int_equal(profile_seconds(f->p, INT64_MIN, INT64_MAX, &s), 0);
	assert_int_equal(s->ncounts, 1);
	assert_int_equal(s->counts[0].count, 4);
	profile_seconds_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_range),
		cmocka_unit_test(test_reset),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
