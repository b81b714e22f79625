/* State shared by cpu.c (BPF, perf events, targets) and cpu_drain.c (draining, naming). */
#ifndef APERTURE_COLLECTORS_CPU_INTERNAL_H
#define APERTURE_COLLECTORS_CPU_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <uthash.h>
#include "collectors/cpu.h"
#include "bpf/cpu.h"

/* Each exec bumps a target's generation (from 0 at enable). Stacks are cached by
 * (generation, hash), so an exec'd process never reuses names made for another address
 * space; the mappings of the last CPU_GENS generations are kept. */
#define CPU_GENS 4
#define CPU_STACK_BATCH 256

struct cpu_gen_syms {
	uint32_t gen;
	struct proc_syms *syms;   /* NULL: slot unused */
	uint64_t refreshed_drain; /* maps re-read in this drain already */
	uint64_t used_drain;
};

/* A stack already turned into frame ids of one target's profile. */
struct cpu_named_key {
	uint64_t hash;
	uint32_t gen;    /* 0 for kernel stacks */
	uint32_t kernel;
};

struct cpu_named_stack {
	struct cpu_named_key key;
	uint32_t depth;
	UT_hash_handle hh;
	uint32_t ids[];
};

struct cpu_target_state {
	pid_t pid;
	struct profile *profile;
	struct cpu_gen_syms gens[CPU_GENS];
	struct cpu_named_stack *named;
	uint64_t drops;           /* kernel-side drops, as last read */
	UT_hash_handle hh;
};

/* Raw stacks read from the kernel in one drain, by hash. */
struct cpu_raw_stack {
	uint64_t hash;
	struct cpu_stack st;
	UT_hash_handle hh;
};

/* Parameters of the inner maps, read from the BPF object's templates before load: the kernel
 * only accepts inner maps that match the template. */
struct cpu_inner_spec {
	uint32_t key_size, value_size, max_entries, flags;
};

struct cpu_collector {
	pthread_mutex_t lock; /* everything below */
	struct cpu_bpf *skel;
	struct symbolizer *syms;
	unsigned hz;
	int ncpus;
	int *perf_fds;
	struct bpf_link **perf_links;
	_Atomic bool running;     /* perf events open; read without the lock by status */
	struct bpf_link *exec_link;
	struct cpu_inner_spec counts_spec, stacks_spec;
	int counts_fds[2], stacks_fds[2];
	int live;              /* index of the inner maps the kernel writes now */
	struct cpu_target_state *targets; /* the enabled ones */
	uint64_t drain_seq;
	struct cpu_raw_stack *raw_now, *raw_prev;
	void *batch_keys, *batch_values; /* drain buffers, counts_spec.max_entries long */
	void *stack_batch_keys, *stack_batch_values; /* CPU_STACK_BATCH long */
	_Atomic uint64_t stacks_lost;
};

int cpu_drain_locked(struct cpu_collector *c, int64_t now);
int cpu_install_inner(struct cpu_collector *c, int idx);
void cpu_target_state_free(struct cpu_target_state *t);
struct proc_syms *cpu_gen_syms(struct cpu_collector *c, struct cpu_target_state *t,
			       uint32_t gen, struct cpu_gen_syms **slot);

#endif
