// SPDX-License-Identifier: GPL-2.0
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "collectors/unwind_auto.h"

/* A stack copy at SP: a chain of frames, each (saved bp, return address). */
#define SP 0x7ffd0000ULL
#define LEN 256

static uint64_t copy[LEN / 8];

static void frame_at(uint64_t bp, uint64_t next, uint64_t ret)
{
	copy[(bp - SP) / 8] = next;
	copy[(bp - SP) / 8 + 1] = ret;
}

/* ip 0x1000 in a function with a frame at SP+0x20, called from 0x2000, from 0x3000 (main),
 * from three frames of the C library's startup without frame pointers. */
static const uint64_t pcs[] = { 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000 };

static void chain(void)
{
	memset(copy, 0, sizeof(copy));
	frame_at(SP + 0x20, SP + 0x40, 0x2000);
	frame_at(SP + 0x40, SP + 0x60, 0x3000);
	frame_at(SP + 0x60, 0, 0x4000); /* main's caller keeps no frame: the walk ends here */
}

static void test_whole_walk(void **state)
{
	struct unwind_regs regs = { .ip = 0x1000, .sp = SP, .bp = SP + 0x20 };
	struct unwind_stack stack = { .data = copy, .len = LEN };
	int found;

	chain();
	/* Found the program's frames; only the startup frames are missing: the kernel's walk
	 * would have recorded the leafmost four. */
	assert_true(unwind_auto_fp_whole(&regs, &stack, false, pcs, 6, &found));
	assert_int_equal(found, 4);
	assert_true(unwind_auto_fp_whole(&regs, &stack, false, pcs, 4, &found));
	assert_int_equal(found, 4);
	/* The walk stops at the deepest frame the unwinder gave. */
	assert_true(unwind_auto_fp_whole(&regs, &stack, false, pcs, 3, &found));
	assert_int_equal(found, 3);
}

static void test_broken_walks(void **state)
{
	struct unwind_regs regs = { .ip = 0x1000, .sp = SP, .bp = SP + 0x20 };
	struct unwind_stack stack = { .data = copy, .len = LEN };
	int found;

	chain();
	/* A leaf without a frame of its own: bp is its caller's, so the caller vanishes. */
	regs.bp = SP + 0x40;
	assert_false(unwind_auto_fp_whole(&regs, &stack, false, pcs, 6, &found));
	assert_int_equal(found, 1);
	/* However shallow the stack: the caller must be found. */
	assert_false(unwind_auto_fp_whole(&regs, &stack, false, pcs, 4, &found));
	/* bp used as a general register. */
	regs.bp = 12345;
	assert_false(unwind_auto_fp_whole(&regs, &stack, false, pcs, 6, &found));
	assert_int_equal(found, 1);
	regs.bp = SP + LEN - 8; /* a frame cut by the end of the copy */
	assert_false(unwind_auto_fp_whole(&regs, &stack, false, pcs, 6, &found));
	/* Past the end of the whole stack the kernel's walk stops too... */
	regs.bp = SP + LEN + 0x100;
	assert_false(unwind_auto_fp_whole(&regs, &stack, false, pcs, 6, &found));
	assert_int_equal(found, 1);
	/* ...but past a copy cut at its size limit it would go on: all count as found. */
	assert_true(unwind_auto_fp_whole(&regs, &stack, true, pcs, 6, &found));
	assert_int_equal(found, 6);
	/* A sample whose ip is not the unwinder's first pc: nothing found. */
	regs.ip = 0x1001;
	assert_false(unwind_auto_fp_whole(&regs, &stack, false, pcs, 6, &found));
	assert_int_equal(found, 0);
}

static void test_verdict(void **state)
{
	struct unwind_regs good = { .ip = 0x1000, .sp = SP, .bp = SP + 0x20 };
	struct unwind_regs bad = { .ip = 0x1000, .sp = SP, .bp = 1 };
	struct unwind_stack stack = { .data = copy, .len = LEN };
	struct unwind_auto a;
	int i, fp_frames;

	chain();
	unwind_auto_reset(&a);
	for (i = 0; i < UNWIND_AUTO_SAMPLES - 1; i++) {
		assert_int_equal(unwind_auto_judge(&a, &good, &stack, false, pcs, 6, &fp_frames),
				 -1);
		assert_int_equal(fp_frames, 4);
	}
	assert_int_equal(unwind_auto_judge(&a, &good, &stack, false, pcs, 6, &fp_frames), 1);
	/* Decided: later samples change nothing. */
	fp_frames = 99;
	assert_int_equal(unwind_auto_judge(&a, &bad, &stack, false, pcs, 6, &fp_frames), 1);
	assert_int_equal(fp_frames, 99);
	/* A walk that was not whole reports no frames. */
	unwind_auto_reset(&a);
	unwind_auto_judge(&a, &bad, &stack, false, pcs, 6, &fp_frames);
	assert_int_equal(fp_frames, 0);

	/* One sample in eight where the walk breaks is too many; one in twenty is not (the
	 * first samples of a process can land in the dynamic loader). */
	unwind_auto_reset(&a);
	for (i = 0; i < UNWIND_AUTO_SAMPLES; i++)
		unwind_auto_judge(&a, i % 8 ? &good : &bad, &stack, false, pcs, 6, &fp_frames);
	assert_int_equal(a.verdict, 0);
	unwind_auto_reset(&a);
	for (i = 0; i < UNWIND_AUTO_SAMPLES; i++)
		unwind_auto_judge(&a, i % 20 ? &good : &bad, &stack, false, pcs, 6, &fp_frames);
	assert_int_equal(a.verdict, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_walk),
		cmocka_unit_test(test_broken_walks),
		cmocka_unit_test(test_verdict),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
