/* sys_storm N: N getppid calls in a tight loop, after the gate (bench.h). The cheapest system
 * call there is, so the per-call cost of any tracer shows at its largest. */
#include <sys/syscall.h>
#include "bench.h"

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000000;
	double start;

	wait_gate();
	start = mono_s();
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
	report(start);
	return 0;
}
