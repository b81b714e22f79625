/* nofp [SECONDS [DEPTH]]
 *
 * Built by GCC with -O2 -fomit-frame-pointer, as distributions build: frame-pointer walks stop
 * after a frame or two here, and only unwinding from CFI reaches main.
 *
 * Ground truth: main -> outer -> middle -> inner burns 3 units per round and main -> side ->
 * leaf 1 unit, so every sample's stack is one of those two paths (75 % / 25 %). With DEPTH,
 * main -> recurse -> recurse ... (DEPTH calls deep) -> inner instead, for stacks deeper than
 * a walk keeps. Runs SECONDS (0 or absent: until killed). With NOFP_REPORT set in the
 * environment it prints the rounds it did at the end, for the bench's slowdown. */
#include <stdio.h>
#include "burn.h"

#define NOINLINE __attribute__((noinline, noclone))

/* Each level keeps a live local across its call so that it has a frame of its own. */
static volatile unsigned long depth_sink;

NOINLINE void inner(void) { burn(3 * burn_chunk); }
NOINLINE void middle(void) { unsigned long d = depth_sink; inner(); depth_sink = d + 1; }
NOINLINE void outer(void) { unsigned long d = depth_sink; middle(); depth_sink = d + 2; }
NOINLINE void leaf(void) { burn(burn_chunk); }
NOINLINE void side(void) { unsigned long d = depth_sink; leaf(); depth_sink = d + 3; }

NOINLINE unsigned long recurse(unsigned long n)
{
	if (n == 0) {
		inner();
		return depth_sink;
	}
	return recurse(n - 1) + n;
}

int main(int argc, char **argv)
{
	double seconds = arg_seconds(argc, argv, 1);
	unsigned long depth = argc > 2 ? strtoul(argv[2], NULL, 10) : 0;
	double deadline = seconds > 0 ? now_s() + seconds : 0;
	unsigned long rounds = 0;

	for (; !deadline || now_s() < deadline; rounds++) {
		if (depth) {
			depth_sink += recurse(depth - 1);
		} else {
			outer();
			side();
		}
	}
	if (getenv("NOFP_REPORT"))
		printf("rounds=%lu\n", rounds);
	return 0;
}
