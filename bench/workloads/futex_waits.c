/* futex_waits N: N futex(FUTEX_WAIT) calls that return at once (the word never holds the
 * value they wait for: EAGAIN), after the gate (bench.h). Every lock tracer counts each as a
 * wait, so N is the count each must report, and the per-call cost of tracing lock waits
 * shows at its largest. */
#include <linux/futex.h>
#include <sys/syscall.h>
#include "bench.h"

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	static int word;
	double start;

	wait_gate();
	start = mono_s();
	for (long i = 0; i < n; i++)
		syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
	report(start);
	return 0;
}
