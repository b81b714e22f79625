// SPDX-License-Identifier: GPL-2.0
#include <string.h>

#include "collectors/unwind_auto.h"

void unwind_auto_reset(struct unwind_auto *a)
{
	*a = (struct unwind_auto){ .verdict = -1 };
}

bool unwind_auto_fp_whole(const struct unwind_regs *regs, const struct unwind_stack *stack,
			  bool copy_cut, const uint64_t *pcs, int depth, int *found)
{
	const uint8_t *data = stack->data;
	uint64_t bp = regs->bp, frame[2];

	*found = depth > 0 && pcs[0] == regs->ip;
	while (*found > 0 && *found < depth) {
		/* Beyond a cut copy the kernel's walk would go on reading the live stack: what
		 * it found there cannot be known, and the frames before all matched. */
		if (bp >= regs->sp + stack->len) {
			if (copy_cut)
				*found = depth;
			break;
		}
		if (bp < regs->sp || regs->sp + stack->len - bp < sizeof(frame))
			break;
		memcpy(frame, data + (bp - regs->sp), sizeof(frame));
		if (frame[1] != pcs[*found])
			break;
		(*found)++;
		bp = frame[0];
	}
	/* The caller is what a walk from a function without a frame of its own loses: it must
	 * be found however shallow the stack (Go's main goroutine is four frames deep). */
	return *found == depth || (*found >= 2 && *found >= depth - UNWIND_AUTO_ROOT_FRAMES);
}

int unwind_auto_decide(struct unwind_auto *a)
{
	if (a->verdict < 0 && a->judged)
		a->verdict = a->whole * 100 >= a->judged * UNWIND_AUTO_WHOLE_PCT;
	return a->verdict;
}

int unwind_auto_judge(struct unwind_auto *a, const struct unwind_regs *regs,
		      const struct unwind_stack *stack, bool copy_cut, const uint64_t *pcs,
		      int depth, int *fp_frames)
{
	bool whole;
	int found;

	if (a->verdict >= 0)
		return a->verdict;
	whole = unwind_auto_fp_whole(regs, stack, copy_cut, pcs, depth, &found);
	*fp_frames = whole ? found : 0;
	a->whole += whole;
	if (++a->judged >= UNWIND_AUTO_SAMPLES)
		a->verdict = a->whole * 100 >= a->judged * UNWIND_AUTO_WHOLE_PCT;
	return a->verdict;
}
