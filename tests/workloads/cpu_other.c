/* cpu_other [SECONDS]
 *
 * Ground truth: one thread ("cpu_other") burning in main -> other_outer -> other_inner, and
 * no function named a, b or c: run beside cpu_split, any of these names in the wrong
 * profile means two targets' samples mixed. */
#include "burn.h"

__attribute__((noinline)) void other_inner(void) { burn(burn_chunk); }
__attribute__((noinline)) void other_outer(void) { other_inner(); }

int main(int argc, char **argv)
{
	return run_for_seconds(argc, argv, other_outer);
}
