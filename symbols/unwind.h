/* Unwinding a user stack copied at sample time, with the CFI (.eh_frame, .debug_frame) of the
 * process's binaries, as perf --call-graph dwarf does.
 *
 * One struct unwinder per address space: a Dwfl holding the process's modules at their load
 * addresses, kept from sample to sample (perf measured 18x faster unwinding by keeping it per
 * process) and told again about the mappings only when a pc falls outside every module (a
 * dlopen). The unwinder reads memory only from the copy: nothing is read from the live
 * process, so a sample can be unwound after the stack it came from has changed. x86-64 only.
 * Not thread-safe: one caller at a time. */
#ifndef APERTURE_SYMBOLS_UNWIND_H
#define APERTURE_SYMBOLS_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct unwinder;

/* The user registers at the sample. */
struct unwind_regs {
	uint64_t ip, sp, bp;
};

/* A copy of the user stack from regs.sp up. */
struct unwind_stack {
	const void *data;
	size_t len;
};

/* Reads pid's mappings now. -ESRCH if the process is gone, -EOPNOTSUPP on an architecture
 * this does not know the registers of. */
int unwinder_new(pid_t pid, struct unwinder **out);
void unwinder_free(struct unwinder *u);

/* Unwinds from regs through stack: pcs[0] is the interrupted ip, pcs[1..] return addresses.
 * Returns how many (0..max). *truncated: the walk stopped before the outermost frame
 * because max was reached or the stack copy ended, not because the stack did. */
int unwinder_unwind(struct unwinder *u, pid_t tid, const struct unwind_regs *regs,
		    const struct unwind_stack *stack, uint64_t *pcs, int max, bool *truncated);

#endif
