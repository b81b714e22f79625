/* mmap_contend SECONDS
 *
 * Ground truth for locks.json's kernel section: prints "ready", waits for a line on stdin,
 * then two threads map and unmap memory for SECONDS, which both take the process's mmap_lock
 * for writing: they contend on that rwsem in the kernel. Prints "done". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/mman.h>

static double seconds;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *churn(void *arg)
{
	double end = now() + seconds;

	while (now() < end) {
		for (int i = 0; i < 256; i++) {
			char *p = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (p == MAP_FAILED)
				exit(1);
			p[0] = 1; /* a page fault takes the lock for reading, too */
			munmap(p, 1 << 16);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t a, b;
	char line[64];

	seconds = argc > 1 ? atof(argv[1]) : 1;
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	pthread_create(&a, NULL, churn, NULL);
	pthread_create(&b, NULL, churn, NULL);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("done\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}
