/* libburn.so, for uses_lib: an exported lib_outer and a static (.symtab only) lib_inner that
 * does all the work. */
#include "burn.h"

__attribute__((noinline)) static void lib_inner(void) { burn(burn_chunk); }

__attribute__((noinline)) void lib_outer(void) { lib_inner(); }
