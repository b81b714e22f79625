/* forks SECONDS EXIT_CODE
 *
 * Ground truth: forks one child, which names itself "forks-child" and burns in
 * main -> child_work for SECONDS; meanwhile the parent ("forks") burns in main ->
 * parent_work for SECONDS / 2, waits for the child, and exits with EXIT_CODE. Each prints
 * the CPU time it used ("child_cpu_s 1.234", "parent_cpu_s 0.617") to stdout, so its
 * sample count can be checked however much CPU a busy machine left it. */
#include <stdio.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "burn.h"

__attribute__((noinline)) void child_work(void) { burn(burn_chunk); }
__attribute__((noinline)) void parent_work(void) { burn(burn_chunk); }

static void print_cpu_time(const char *who)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	printf("%s_cpu_s %.3f\n", who, ts.tv_sec + ts.tv_nsec / 1e9);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	double seconds, deadline;
	pid_t child;

	if (argc != 3) {
		fprintf(stderr, "usage: forks SECONDS EXIT_CODE\n");
		return 2;
	}
	seconds = atof(argv[1]);
	child = fork();
	if (child < 0) {
		perror("fork");
		return 2;
	}
	if (child == 0) {
		prctl(PR_SET_NAME, "forks-child");
		deadline = now_s() + seconds;
		while (now_s() < deadline)
			child_work();
		print_cpu_time("child");
		_exit(0);
	}
	deadline = now_s() + seconds / 2;
	while (now_s() < deadline)
		parent_work();
	print_cpu_time("parent");
	waitpid(child, NULL, 0);
	return atoi(argv[2]);
}
