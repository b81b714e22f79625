/* State shared by cpu.c (BPF, perf events, targets) and cpu_drain.c (draining, naming). */
#ifndef APERTURE_COLLECTORS_CPU_INTERNAL_H
#define APERTURE_COLLECTORS_CPU_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <uthash.h>
#include "collectors/cpu.h"
#include "collectors/swap_map.h"
#include "bpf/cpu.h"
#include "collectors/unwind_auto.h"

/* Each exec bumps a target's generation (from 0 at enable). Stacks are cached by
 * (generation, hash), so an exec'd process never reuses names made for another address
 * space; the mappings of the last CPU_GENS generations are kept. */
#define CPU_GENS 4

struct cpu_gen_syms {
	uint32_t gen;
	struct proc_syms *syms;   /* NULL: slot unused */
	struct unwinder *unwinder; /* dwarf mode, made at its first sample; NULL until then */
	int64_t refreshed_ms;     /* CLOCK_MONOTONIC ms the maps were last read */
	uint64_t refreshed_drain; /* drain_seq when they were */
	uint64_t used_drain;
};

enum cpu_stack_kind {
	CPU_STACK_USER,   /* walked by frame pointers in the kernel */
	CPU_STACK_KERNEL,
	CPU_STACK_DWARF,  /* unwound in userspace from a copy of the stack */
};

/* Frame ids a named stack can have: each pc's inlined functions, and [truncated]. */
#define CPU_STACK_FRAMES_MAX (CPU_MAX_DEPTH * SYMS_INLINE_MAX + 1)

/* A stack already turned into frame ids of one target's profile. */
struct cpu_named_key {
	uint64_t hash;
	uint32_t gen;    /* 0 for kernel stacks */
	uint32_t kind;   /* enum cpu_stack_kind */
};

struct cpu_named_stack {
	struct cpu_named_key key;
	uint32_t depth;
	uint32_t user_frames, named_frames; /* for the share of frames named */
	uint32_t unmapped_frames;           /* [unknown]: named again after the maps are re-read */
	uint32_t jit_end;  /* ids [0, jit_end) end at the leafmost frame in anonymous memory */
	UT_hash_handle hh;
	uint32_t ids[]; /* depth frame ids, then the depth source lines running in them */
};

/* The line running in each frame of n, 0 unknown. */
static inline const uint32_t *cpu_named_lines(const struct cpu_named_stack *n)
{
	return n->ids + n->depth;
}

/* The outermost frames of a CFI stack that a whole frame-pointer walk did not find: a
 * thread's start-up in the C library. Few kinds per process (main thread, other threads). */
#define CPU_AUTO_ROOTS 8
struct cpu_auto_root {
	uint32_t n;
	uint64_t pcs[UNWIND_AUTO_ROOT_FRAMES];
};

struct cpu_target_state {
	pid_t pid;
	struct profile *profile;
	struct cpu_gen_syms gens[CPU_GENS];
	struct cpu_named_stack *named;
	uint64_t drops;           /* kernel-side drops, as last read */
	struct unwind_auto unwind_auto; /* config/unwind auto's verdict on its address space */
	struct cpu_auto_held *auto_held[UNWIND_AUTO_SAMPLES]; /* judged, waiting for the verdict */
	uint32_t auto_held_n;
	struct cpu_auto_root auto_roots[CPU_AUTO_ROOTS]; /* start-up frames fp walks don't see */
	uint32_t auto_roots_n;
	bool dwarf;               /* in the kernel's dwarf_targets */
	uint64_t frames_named, frames_total;
	pid_t fork_root;          /* a followed child: the target it descends from, else 0 */
	bool follows_forks;       /* a target whose children are followed */
	int java_signo;           /* collectors/cpu_java.c: the JVM agent's signal, 0 = none */
	struct cpu_java_wait **java_waits; /* samples waiting for their Java stacks */
	size_t java_n, java_cap;
	uint64_t java_merged, java_alone, java_unmatched;
	UT_hash_handle hh;
};

/* A stack spilled through the ring buffer (bpf/cpu.h, struct cpu_stack_record): it stands in
 * for an entry of the stacks map, and goes when the map it stood in for is retired. */
struct cpu_spilled {
	uint64_t hash;
	uint64_t renewal; /* stack_maps_renewed when it came */
	struct cpu_stack stack;
	UT_hash_handle hh;
};

/* Mappings the follow thread read for generation gen of pid. */
struct cpu_follow_maps {
	pid_t pid;
	uint32_t gen;
	struct proc_syms *syms;
};

struct cpu_follow_again {
	pid_t pid;
	int64_t due_ms; /* CLOCK_MONOTONIC */
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
	struct swap_map counts;
	struct swap_map_spec stacks_spec;
	int stacks_fd;         /* the stacks map the kernel writes now */
	int stacks_spare_fd;   /* empty, swapped in when stacks_fd is filling up */
	int stacks_retired_fd; /* during a drain: the map swapped out, still readable */
	uint64_t stacks_stored_before; /* stacks_stored at the previous drain */
	uint64_t stacks_recent[3];     /* stacks stored in each of the last drain intervals */
	struct cpu_spilled *spilled;
	struct cpu_target_state *targets; /* the enabled ones */
	uint64_t drain_seq;
	struct cpu_stack raw;  /* the stack being named */
	void *batch_keys, *batch_values; /* drain buffers, counts.spec.max_entries long, while
					  * there are targets */
	_Atomic uint64_t stacks_lost;
	_Atomic uint64_t stack_maps_renewed;
	_Atomic uint64_t dwarf_samples;
	enum cpu_unwind unwind;
	/* cpu_ring.c: the ring dwarf samples and spilled stacks come through, its map, its size,
	 * and the epoll set the dwarf thread waits on, which holds whichever ring is current. */
	struct ring_buffer *dwarf_rb;
	int dwarf_ring_fd;
	uint32_t dwarf_ring_size;
	int dwarf_epfd;
	bool dwarf_reading; /* in a record's callback: the ring can't be replaced now */
	bool dwarf_refit;   /* a fit waits until the reading is done */
	pthread_t dwarf_thread;
	bool dwarf_thread_running;
	_Atomic bool dwarf_stop;
	uint64_t dwarf_pcs[CPU_MAX_DEPTH];
	struct bpf_link *fork_link;
	unsigned following;    /* targets whose forks are followed */
	/* Made when following starts, with the follow thread that reads it and what follows,
	 * which is not under lock. */
	struct ring_buffer *follow_events;
	pthread_t follow_thread;
	_Atomic bool follow_stop;
	int follow_efd;           /* eventfd the follow thread signals after reading again */
	pid_t *follow_pids;       /* the follow thread's: processes named by the events read */
	size_t follow_n, follow_cap;
	struct cpu_follow_again *follow_again; /* the follow thread's: maps to read again */
	size_t follow_again_n, follow_again_cap;
	pthread_mutex_t follow_lock; /* follow_ready, taken inside lock, never around it */
	struct cpu_follow_maps *follow_ready; /* mappings read, not yet given to their target */
	size_t follow_ready_n, follow_ready_cap;
};

int cpu_drain_locked(struct cpu_collector *c, int64_t now);
/* Naming for collectors that capture stacks of their own (off-CPU) into target states of
 * their own, with this collector's symbolizer: the stack of pcs (leaf first) under key, from
 * t's cache or named now (NULL if memory ran out); and adding count of (comm, user stack or
 * [unknown] if user_err, kernel stack) to t's profile. t's lock is the caller's. */
struct cpu_named_stack *cpu_name_pcs(struct cpu_collector *c, struct cpu_target_state *t,
				     const struct cpu_named_key *key, const uint64_t *pcs,
				     uint32_t depth, bool truncated);
int cpu_add_stacks(struct cpu_target_state *t, const char *raw_comm,
		   const struct cpu_named_stack *user, bool user_err,
		   const struct cpu_named_stack *kern, uint64_t count, int64_t now);
/* The key hash of a stack of depth pcs (leaf first): the BPF programs' (stack_capture.bpf.h). */
uint64_t cpu_hash_pcs(const uint64_t *pcs, uint32_t depth);
/* Sums over the CPUs of entries 0..n-1 of a per-CPU array of __u64 (entries that can't be
 * read stay 0). */
void cpu_percpu_sums(int fd, int ncpus, __u64 *sums, __u32 n);
int cpu_ring_record(void *ctx, void *data, size_t size);
/* cpu_ring.c, all under the lock but start and stop: makes the ring (the small one); reads
 * every record it holds, then fits it if a fit had to wait for that; gives it the size what
 * it must carry now calls for (dwarf-mode targets, and one more about to be if dwarf_coming;
 * the rate), later if a record is being read; frees it. */
int cpu_ring_start(struct cpu_collector *c);
void cpu_ring_read_locked(struct cpu_collector *c);
int cpu_ring_fit_locked(struct cpu_collector *c, bool dwarf_coming);
void cpu_ring_stop(struct cpu_collector *c);
void cpu_spilled_free(struct cpu_collector *c, uint64_t before_renewal);
void cpu_target_apply_unwind(struct cpu_collector *c, struct cpu_target_state *t);
void cpu_target_state_free(struct cpu_target_state *t);
/* Maps are re-read when an address is in none of them (a library loaded since, or mappings
 * read while the dynamic loader was still at work): once per drain, so that the drain right
 * after an exec names a short-lived program's libraries, and between drains (the dwarf
 * thread names samples as they come) this often at most. */
#define CPU_REFRESH_MS 100

int64_t cpu_mono_ms(void);

/* cpu_java.c: a JVM's dwarf sample, held until its Java stack comes; the samples that waited
 * long enough (all with force) added as unwound; and freeing what waits. */
#define CPU_JAVA_FRAMES_MAX 256
int cpu_java_hold(struct cpu_target_state *t, const char *raw_comm, uint32_t tid, uint64_t ns,
		  const struct cpu_named_stack *user, const struct cpu_named_stack *kern,
		  int64_t sec);
void cpu_java_flush(struct cpu_target_state *t, bool force);
void cpu_java_free(struct cpu_target_state *t);
/* cpu_auto_hold.c: a sample judged under config/unwind auto (its CFI pcs, fp_frames of them
 * found by the frame-pointer walk if it was whole, else 0; user and kern copied), held until
 * the verdict, and at most UNWIND_AUTO_SAMPLES of them (else -ENOSPC). */
int cpu_auto_hold(struct cpu_target_state *t, const char *raw_comm, int64_t sec, uint32_t gen,
		  const uint64_t *pcs, uint32_t depth, bool truncated, uint32_t fp_frames,
		  const struct cpu_named_stack *user, const struct cpu_named_stack *kern);
/* A CFI stack cut to what the kernel's walk would show, named (NULL if memory ran out): the
 * fp_frames it found if whole, else all but the start-up frames whole walks of t missed. */
struct cpu_named_stack *cpu_auto_fp_rooted(struct cpu_collector *c, struct cpu_target_state *t,
					   uint32_t gen, const uint64_t *pcs, uint32_t depth,
					   bool truncated, uint32_t fp_frames);
/* Adds what is held, rooted as the kernel's walk roots its stacks (fp) or as unwound. */
void cpu_auto_release(struct cpu_collector *c, struct cpu_target_state *t, bool fp);
/* At a drain: a target whose oldest held sample is two seconds old or more is given its verdict
 * on what was judged, and what it held goes in. */
void cpu_auto_deadline(struct cpu_collector *c, struct cpu_target_state *t, int64_t now);
/* A new address space: what was held goes in as unwound, and judging starts again. */
void cpu_auto_reset(struct cpu_collector *c, struct cpu_target_state *t);
void cpu_auto_free(struct cpu_target_state *t);
struct proc_syms *cpu_gen_syms(struct cpu_collector *c, struct cpu_target_state *t,
			       uint32_t gen, struct cpu_gen_syms **slot);
/* Gives t the mappings syms, read for generation gen: the slot they went to (replacing an
 * earlier read of that generation), or NULL, syms freed, when a newer generation is known. */
struct cpu_gen_syms *cpu_gen_syms_put(struct cpu_collector *c, struct cpu_target_state *t,
				      uint32_t gen, struct proc_syms *syms);
/* The state of pid if it is a followed child not seen before (cpu_follow.c), else NULL. */
struct cpu_target_state *cpu_follow_adopt(struct cpu_collector *c, pid_t pid);
/* cpu_drain_locked, and forgets the followed children that exited. */
int cpu_follow_drain_locked(struct cpu_collector *c, int64_t now);
/* Gives the followed processes the mappings the follow thread read for them: before any
 * of their samples are named. */
void cpu_follow_install_locked(struct cpu_collector *c);
/* Stops the follow thread, if following ever started. */
void cpu_follow_stop(struct cpu_collector *c);
/* Forgets every child followed from root. */
void cpu_follow_forget(struct cpu_collector *c, pid_t root);

#endif
