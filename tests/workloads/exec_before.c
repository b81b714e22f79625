/* exec_before MILLISECONDS PROGRAM [ARGS...]
 *
 * Ground truth: burns in main -> x_burn for MILLISECONDS, then execs PROGRAM (exec_after),
 * keeping its pid. Samples before the exec are "exec_before;...;main;x_burn"; after it the
 * profile must name exec_after's functions from the new binary, never x_burn or an offset
 * into this file. The padding functions make the two binaries' layouts differ, so a
 * post-exec address looked up in these old mappings would give a wrong name. */
#include <stdio.h>
#include <unistd.h>
#include "burn.h"

__attribute__((noinline)) void pad0(void) { burn(burn_chunk + 1); }
__attribute__((noinline)) void pad1(void) { burn(burn_chunk + 2); }
__attribute__((noinline)) void x_burn(void) { burn(burn_chunk); }

int main(int argc, char **argv)
{
	double deadline;

	if (argc < 3) {
		fprintf(stderr, "usage: exec_before MILLISECONDS PROGRAM [ARGS...]\n");
		return 2;
	}
	deadline = now_s() + atof(argv[1]) / 1000;
	while (now_s() < deadline)
		x_burn();
	if (burn_sink == 0) { /* never: keeps the padding linked in */
		pad0();
		pad1();
	}
	execv(argv[2], argv + 2);
	perror("execv");
	return 1;
}
