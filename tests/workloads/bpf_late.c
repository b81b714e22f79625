// SPDX-License-Identifier: GPL-2.0
/* Loads bpf_late.bpf.c's program (a BPF program that did not exist when the daemon read the
 * kernel's symbols), prints its kallsyms name (bpf_prog_<tag>_late_burn), then calls
 * getppid() in a loop for the given seconds, each call running the program on entry. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "bpf_late.skel.h"

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5;
	struct bpf_prog_info info = {};
	__u32 info_len = sizeof(info);
	struct timespec start, now;
	struct bpf_late *skel;

	skel = bpf_late__open();
	if (!skel)
		return 1;
	skel->rodata->target_tgid = getpid();
	if (bpf_late__load(skel) || bpf_late__attach(skel)) {
		fprintf(stderr, "bpf_late: cannot load or attach\n");
		return 1;
	}
	if (bpf_obj_get_info_by_fd(bpf_program__fd(skel->progs.late_burn), &info, &info_len))
		return 1;
	printf("bpf_prog_");
	for (int i = 0; i < BPF_TAG_SIZE; i++)
		printf("%02x", info.tag[i]);
	printf("_%s\n", info.name);
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		for (int i = 0; i < 1000; i++)
			getppid();
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 < secs);
	bpf_late__destroy(skel);
	return 0;
}
