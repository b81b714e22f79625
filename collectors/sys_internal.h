/* State shared by sys.c (BPF programs, attaching, targets) and sys_drain.c (draining the
 * kernel's aggregates, naming threads and stacks). */
#ifndef APERTURE_COLLECTORS_SYS_INTERNAL_H
#define APERTURE_COLLECTORS_SYS_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <uthash.h>
#include <bpf/libbpf.h>
#include "collectors/swap_map.h"
#include "collectors/sys.h"
#include "bpf/sys.h"

#define FRAME_NAME_MAX 512
#define INNER_MAX 16384

enum { KIND_SYS, KIND_LOCK, KIND_KLOCK, KIND_NR };

/* The kernel's per-CPU values are read straight into the store's type. */
_Static_assert(sizeof(struct sys_latency) == sizeof(struct latency) &&
	       SYS_HIST == LATENCY_HIST, "struct sys_latency and struct latency differ");

/* A waiting stack of one target, named once: its frame ids in the locks profile and its
 * folded text for locks.json, both without the thread-name frame. */
struct named_stack {
	uint64_t hash;
	uint32_t depth;
	char *folded;
	UT_hash_handle hh;
	uint32_t ids[];
};

struct thread_name {
	pid_t tid;
	char name[16];
	UT_hash_handle hh;
};

struct sys_target {
	pid_t pid;
	uint32_t what;           /* SYS_TARGET_* */
	struct sys_table *table;
	struct profile *locks;
	struct proc_syms *syms;  /* read at enable; refreshed once per drain when a name misses */
	uint64_t refreshed_drain;
	struct named_stack *named;
	struct thread_name *threads;
	UT_hash_handle hh;
};

struct sys_collector {
	pthread_mutex_t lock;
	struct sys_bpf *skel;
	struct symbolizer *syms;
	int ncpus;
	int refs;               /* the syscalls and locks collectors' */
	struct bpf_link *enter_link, *exit_link; /* while a target has syscalls on */
	struct bpf_link *futex_links[4], *lock_begin_link, *lock_end_link; /* ... locks on */
	char klock_error[160];
	char locks_error[160];  /* why the last attach of the futex tracepoints failed */
	struct swap_map maps[KIND_NR];
	struct sys_target *targets;
	int64_t drained_at;     /* the second last drained: both collectors drain it once */
	uint64_t drain_seq;
	struct latency *percpu; /* ncpus values, for one lookup */
	struct sys_stack raw;
};

/* Learns the names of the target's threads alive now. */
void sys_learn_threads(struct sys_target *t);
/* Drains the kinds of aggregate that what (SYS_TARGET_*) collects. */
int sys_drain_locked(struct sys_collector *c, uint32_t what, int64_t now);

#endif
