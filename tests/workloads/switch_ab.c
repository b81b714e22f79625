/* switch_ab [A_SECONDS [TOTAL_SECONDS]]
 *
 * Ground truth: one thread ("switch_ab") burns in main -> a until A_SECONDS have passed or
 * SIGUSR1 arrives, whichever is first (A_SECONDS 0 or absent: only SIGUSR1), then in
 * main -> b until TOTAL_SECONDS (0 or absent: until killed), then exits 0. No sample of b
 * comes before the switch, none of a after it: a window that starts after the switch holds
 * only b; one that covers both holds both. */
#include <signal.h>
#include "burn.h"

static volatile sig_atomic_t switched;

__attribute__((noinline)) void a(void) { burn(burn_chunk); }
__attribute__((noinline)) void b(void) { burn(burn_chunk); }

static void on_usr1(int sig)
{
	switched = 1;
}

int main(int argc, char **argv)
{
	double start = now_s(), a_s = arg_seconds(argc, argv, 1), total = arg_seconds(argc, argv, 2);

	signal(SIGUSR1, on_usr1);
	while (!switched && (!a_s || now_s() < start + a_s))
		a();
	while (!total || now_s() < start + total)
		b();
	return 0;
}
