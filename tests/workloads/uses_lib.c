/* uses_lib [SECONDS]
 *
 * Ground truth: a PIE that spends its time in a shared library the tests build:
 * main -> call_lib -> lib_outer -> lib_inner, the last two in libburn.so (lib_inner is
 * static, named only by the library's .symtab). Naming all four proves PIE and shared
 * library addresses are translated through the mappings. */
#include "burn.h"

void lib_outer(void);

__attribute__((noinline)) void call_lib(void) { lib_outer(); }

int main(int argc, char **argv)
{
	return run_for_seconds(argc, argv, call_lib);
}
