/* sys_calls GETPPIDS ENOENTS EBADFS
 *
 * Ground truth for syscalls.json: prints "ready", then for each line read on stdin makes
 * exactly GETPPIDS getppid calls, ENOENTS openat calls failing with ENOENT and EBADFS close
 * calls failing with EBADF, and prints "done". Exits at end of input. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>

int main(int argc, char **argv)
{
	long getppids, enoents, ebadfs;
	char line[64];

	if (argc != 4)
		return 2;
	getppids = atol(argv[1]);
	enoents = atol(argv[2]);
	ebadfs = atol(argv[3]);
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		for (long i = 0; i < getppids; i++)
			syscall(SYS_getppid);
		for (long i = 0; i < enoents; i++)
			syscall(SYS_openat, AT_FDCWD, "/nonexistent/aperture", O_RDONLY);
		for (long i = 0; i < ebadfs; i++)
			syscall(SYS_close, -1);
		printf("done\n");
		fflush(stdout);
	}
	return 0;
}
