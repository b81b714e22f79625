/* sync/parts.c: the parts of a batch, each a Batch of its own that the aggregator's decoder
 * accepts, its tables holding each entry once. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "sync/parts.h"

typedef Aperture__Sync__V1__Target WireTarget;

static WireBatch *decode(const struct sync_part *p)
{
	WireBatch *b;
	char why[200];

	assert_int_equal(wire_decode(p->data, p->len, &wire_default_limits, &b, why,
				     sizeof(why)), 0);
	return b;
}

/* A target with one stack of depth frames f0;f1;..., its leaf named leaf. */
static void add_target(struct parts *ps, int pid, int depth, int leaf)
{
	uint32_t frames[8];
	char name[32];
	WireTarget *t = parts_alloc(ps, sizeof(*t));
	WireBatch *b = parts_cur(ps);

	assert_non_null(t);
	*t = (WireTarget)APERTURE__SYNC__V1__TARGET__INIT;
	t->pid = pid;
	for (int i = 0; i < depth; i++) {
		struct frame_info info = { .module = "/usr/bin/app", .line = i };

		snprintf(name, sizeof(name), "f%d", i == depth - 1 ? leaf : i);
		assert_int_equal(parts_frame(ps, name, &info, &frames[i]), 0);
	}
	assert_int_equal(parts_stack(ps, frames, depth, &frames[0]), 0);
	assert_int_equal(parts_push(ps, (void ***)&b->targets, &b->n_targets, t), 0);
}

static void test_tables_hold_each_entry_once(void **state)
{
	struct sync_part *out;
	struct parts *ps;
	uint32_t a, b, c;
	WireBatch *wb;
	size_t n;

	assert_int_equal(parts_new("n1", "0123", 1000, &ps), 0);
	assert_int_equal(parts_string(ps, "x", &a), 0);
	assert_int_equal(parts_string(ps, "x", &b), 0);
	assert_int_equal(parts_string(ps, "", &c), 0);
	assert_int_equal(a, b);
	assert_int_equal(c, 0);
	add_target(ps, 1, 3, 100);
	add_target(ps, 2, 3, 100); /* the same stack */
	add_target(ps, 3, 3, 101);
	/* 40 targets: past the 16 the first array holds */
	for (int i = 4; i < 44; i++)
		add_target(ps, i, 2, 0);
	assert_int_equal(parts_number(ps), 1);
	assert_int_equal(parts_encode(ps, 7, NULL, &out, &n), 0);
	assert_int_equal(n, 1);
	wb = decode(&out[0]);
	assert_int_equal(wb->seq, 7);
	assert_int_equal(wb->parts, 1);
	assert_int_equal(wb->n_targets, 43);
	assert_int_equal(wb->n_stacks, 3); /* f0;f1;f100, f0;f1;f101, f0;f0 */
	/* f0 f1 f100 f101, and f0 at line 1 (the leaf of depth 2): a name with other info */
	assert_int_equal(wb->n_frames, 5);
	assert_string_equal(wb->node, "n1");
	wire_free(wb);
	sync_parts_free(out, n);
	parts_free(ps);
}

/* Past its bounds a part ends and the next starts with tables of its own; an empty part
 * never ends. */
static void test_room_splits(void **state)
{
	struct sync_part *out;
	struct parts *ps;
	size_t n;

	assert_int_equal(parts_new("n1", "0123", 1000, &ps), 0);
	assert_int_equal(parts_room(ps, SYNC_PART_MAX_BYTES), 0);
	assert_int_equal(parts_number(ps), 1);
	add_target(ps, 1, 2, 5);
	assert_int_equal(parts_room(ps, 10), 0);
	assert_int_equal(parts_number(ps), 1);
	assert_int_equal(parts_room(ps, SYNC_PART_MAX_BYTES), 0);
	assert_int_equal(parts_number(ps), 2);
	add_target(ps, 2, 2, 5);
	assert_int_equal(parts_encode(ps, 1, NULL, &out, &n), 0);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++) {
		WireBatch *wb = decode(&out[i]);

		assert_int_equal(wb->seq, 1 + i);
		assert_int_equal(wb->part, i);
		assert_int_equal(wb->parts, 2);
		assert_int_equal(wb->n_stacks, 1);
		assert_int_equal(wb->n_frames, 2);
		wire_free(wb);
	}
	sync_parts_free(out, n);
	parts_free(ps);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tables_hold_each_entry_once),
		cmocka_unit_test(test_room_splits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
