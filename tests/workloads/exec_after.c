/* exec_after [SECONDS]
 *
 * Ground truth: the program exec_before turns into. Burns in main -> y_outer -> y_burn for
 * SECONDS (0 or absent: until killed). */
#include "burn.h"

__attribute__((noinline)) void y_burn(void) { burn(burn_chunk); }
__attribute__((noinline)) void y_outer(void) { y_burn(); }

int main(int argc, char **argv)
{
	return run_for_seconds(argc, argv, y_outer);
}
