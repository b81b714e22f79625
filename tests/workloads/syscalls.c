/* syscalls [SECONDS]
 *
 * Ground truth: spends most of its time in the kernel, reading 64 KiB blocks of /dev/zero
 * (the kernel zeroes the buffer), through main -> do_reads -> raw_read. raw_read makes the
 * system call itself rather than through libc, whose read() has no frame pointer and would
 * hide do_reads: its stacks are "syscalls;...;main;do_reads;raw_read;<kernel frames>_[k]". */
#include <fcntl.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "burn.h"

static char buf[65536];

__attribute__((noinline)) long raw_read(int fd, void *p, unsigned long n)
{
#if defined(__x86_64__)
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_read), "D"((long)fd), "S"(p), "d"(n)
			 : "rcx", "r11", "memory");
	return ret;
#else
	return syscall(SYS_read, fd, p, n);
#endif
}

static int zero_fd;

__attribute__((noinline)) void do_reads(void)
{
	for (int i = 0; i < 64; i++)
		raw_read(zero_fd, buf, sizeof(buf));
}

int main(int argc, char **argv)
{
	zero_fd = open("/dev/zero", O_RDONLY);
	if (zero_fd < 0)
		return 1;
	return run_for_seconds(argc, argv, do_reads);
}
