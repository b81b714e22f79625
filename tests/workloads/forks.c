/* forks SECONDS EXIT_CODE
 *
 * Ground truth: forks one child, which names itself "forks-child" and burns in
 * main -> child_work for SECONDS; meanwhile the parent ("forks") burns in main ->
 * parent_work for SECONDS / 2, waits for the child, and exits with EXIT_CODE. The child
 * has about twice the parent's samples, all in a process other than the one started. */
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "burn.h"

__attribute__((noinline)) void child_work(void) { burn(burn_chunk); }
__attribute__((noinline)) void parent_work(void) { burn(burn_chunk); }

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
		_exit(0);
	}
	deadline = now_s() + seconds / 2;
	while (now_s() < deadline)
		parent_work();
	waitpid(child, NULL, 0);
	return atoi(argv[2]);
}
