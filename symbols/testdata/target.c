// SPDX-License-Identifier: GPL-2.0
/* A process for test_symbols to name: prints the address of one of its own functions, then
 * waits to be killed. Built PIE and non-PIE so both ELF types are covered. */
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) void symbols_target_marker(void)
{
	__asm__ volatile("" ::: "memory");
}

int main(void)
{
	symbols_target_marker();
	printf("%p\n", (void *)symbols_target_marker);
	fflush(stdout);
	for (;;)
		pause();
}
