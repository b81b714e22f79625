/* config/unwind auto: whether frame-pointer walks give a target whole stacks, judged where
 * its samples land rather than from how its executable looks.
 *
 * A target under auto starts in dwarf mode. For each of its first samples the judge replays
 * the kernel's frame-pointer walk (ip, then [bp + 8] and bp = [bp] while bp stays in the
 * stack) on the very registers and stack copy the CFI unwinder used, and compares: the walk
 * is whole when it found every frame the unwinder found. A Rust or C++ program whose own code
 * lacks frame pointers but whose precompiled std has them spends its time where the walk
 * breaks, whatever most of its functions look like. Once UNWIND_AUTO_SAMPLES are judged, fp
 * if at least UNWIND_AUTO_WHOLE_PCT % of them were whole, else dwarf, until the next exec.
 * Pure logic: no BPF, no process. */
#ifndef APERTURE_COLLECTORS_UNWIND_AUTO_H
#define APERTURE_COLLECTORS_UNWIND_AUTO_H

#include <stdbool.h>
#include <stdint.h>

#include "symbols/unwind.h"

#define UNWIND_AUTO_SAMPLES 128
#define UNWIND_AUTO_WHOLE_PCT 90
/* The C library's startup frames (_start, __libc_start_main, __libc_start_call_main; clone3,
 * start_thread) have no frame pointers whatever the program was built with, so the walk ends
 * in them: a walk that found all but the outermost this many frames is whole, if it found
 * the sampled function's caller. */
#define UNWIND_AUTO_ROOT_FRAMES 3

struct unwind_auto {
	uint32_t judged, whole;
	int verdict; /* 1 fp, 0 dwarf, -1 still judging */
};

void unwind_auto_reset(struct unwind_auto *a);

/* Whether the frame-pointer walk from regs through stack finds pcs[0..depth) (as the CFI
 * unwinder gave them: the ip, then return addresses), all but UNWIND_AUTO_ROOT_FRAMES; *found
 * is how many it found, leaf first: pcs[0..*found) is the stack the kernel's walk would have
 * recorded. copy_cut: the copy stopped at its size limit, not at the end of the stack;
 * frames past it then count as found when the walk was still going there. */
bool unwind_auto_fp_whole(const struct unwind_regs *regs, const struct unwind_stack *stack,
			  bool copy_cut, const uint64_t *pcs, int depth, int *found);

/* The verdict from the samples judged so far (at least one): for a target that is rarely
 * on CPU, whose held samples must not wait for UNWIND_AUTO_SAMPLES. -1 if none was judged. */
int unwind_auto_decide(struct unwind_auto *a);

/* Judges one sample; returns the verdict, -1 while judging. *fp_frames: the frames the walk
 * found if it was whole, else 0. After the verdict, no-op (*fp_frames untouched). */
int unwind_auto_judge(struct unwind_auto *a, const struct unwind_regs *regs,
		      const struct unwind_stack *stack, bool copy_cut, const uint64_t *pcs,
		      int depth, int *fp_frames);

#endif
