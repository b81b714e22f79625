/* libcall.so, for dlopen_late: calls back into the program that loaded it. Built without
 * frame pointers, so a walk gets past lib_call only with the library's CFI. */
__attribute__((noinline)) void lib_call(void (*fn)(void))
{
	fn();
	__asm__ volatile("" ::: "memory"); /* not a tail call */
}
