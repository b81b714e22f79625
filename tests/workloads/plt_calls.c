/* Calls memcpy through the PLT in a tight loop for the given seconds (built with
 * -fno-builtin, so every copy is a real call to libc's memcpy through memcpy@plt): samples
 * land in the PLT stub often, and must keep their callers (copy_loop, main). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char src[64], dst[64];

__attribute__((noinline)) static unsigned long copy_loop(size_t rounds)
{
	unsigned long sum = 0;

	for (size_t i = 0; i < rounds; i++) {
		memcpy(dst, src, 1 + (i & 7));
		sum += dst[i & 7];
	}
	return sum;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5;
	struct timespec start, now;
	unsigned long sum = 0;

	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		sum += copy_loop(1000000);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 < secs);
	return sum == 42;
}
