/* sync/parts.c: the parts of a batch, each a Batch of its own that the aggregator's decoder
 * accepts, its tables holding each entry once. */
#include <errno.h>
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
	assert_int_equal(parts_stack(ps, frames, NULL, depth, &frames[0]), 0);
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

/* A stack is its frames and lines: the same frames with other lines is another stack, lines
 * all unknown go as none, and the decoder refuses lines that are not one per frame. */
static void test_stack_lines(void **state)
{
	uint32_t frames[3], l1[3] = { 0, 12, 4 }, l2[3] = { 0, 12, 5 }, zeros[3] = {0};
	uint32_t a, b, c, d, e;
	struct sync_part *out;
	struct parts *ps;
	WireBatch *wb;
	uint8_t *gz;
	size_t n, len;
	char why[200];

	assert_int_equal(parts_new("n1", "0123", 1000, &ps), 0);
	for (int i = 0; i < 3; i++) {
		char name[8];

		snprintf(name, sizeof(name), "f%d", i);
		assert_int_equal(parts_frame(ps, name, NULL, &frames[i]), 0);
	}
	assert_int_equal(parts_stack(ps, frames, l1, 3, &a), 0);
	assert_int_equal(parts_stack(ps, frames, l2, 3, &b), 0);
	assert_int_equal(parts_stack(ps, frames, l1, 3, &c), 0);
	assert_int_equal(parts_stack(ps, frames, NULL, 3, &d), 0);
	assert_int_equal(parts_stack(ps, frames, zeros, 3, &e), 0);
	assert_int_equal(a, c);
	assert_int_equal(d, e);
	assert_true(a != b && a != d && b != d);
	assert_int_equal(parts_encode(ps, 1, NULL, &out, &n), 0);
	wb = decode(&out[0]);
	assert_int_equal(wb->n_stacks, 3);
	assert_int_equal(wb->stacks[a]->n_lines, 3);
	assert_memory_equal(wb->stacks[a]->lines, l1, sizeof(l1));
	assert_memory_equal(wb->stacks[b]->lines, l2, sizeof(l2));
	assert_int_equal(wb->stacks[d]->n_lines, 0);

	/* two lines for three frames: refused, with the reason */
	wb->stacks[b]->n_lines = 2;
	assert_int_equal(wire_encode(wb, &gz, &len), 0);
	wire_free(wb);
	assert_int_equal(wire_decode(gz, len, &wire_default_limits, &wb, why, sizeof(why)),
			 -EINVAL);
	assert_null(wb);
	assert_non_null(strstr(why, "2 lines for 3 frames"));
	free(gz);
	sync_parts_free(out, n);
	parts_free(ps);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tables_hold_each_entry_once),
		cmocka_unit_test(test_room_splits),
		cmocka_unit_test(test_stack_lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
