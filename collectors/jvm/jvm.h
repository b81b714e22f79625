/* JVM collection: HotSpot JVMs are recognised by their mappings; enabling one attaches the
 * JVMTI agent (collectors/jvm/agent/) from C, off the caller's thread, and keeps a channel to
 * it for thread snapshots. Everything here fails soft: a JVM that can't be attached keeps its
 * native profile and shows the reason in jvm/status. */
#ifndef APERTURE_COLLECTORS_JVM_H
#define APERTURE_COLLECTORS_JVM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct jvm_collector;
struct cpu_collector;
struct profile;

/* agent_path: the agent .so built by meson, copied into each target. alloc_interval: the
 * live setting of bytes between allocation samples. cpu: where the Java stacks the agent
 * walks for CPU samples go (NULL: they are not walked). */
int jvm_collector_new(const char *agent_path, const _Atomic uint64_t *alloc_interval,
		      struct cpu_collector *cpu, struct jvm_collector **out);
/* Ends every session, waiting for their workers. */
void jvm_collector_free(struct jvm_collector *c);

/* Whether pid runs a HotSpot JVM (libjvm.so mapped). */
bool jvm_is_hotspot(pid_t pid);

/* Starts attaching to pid in a worker thread and returns at once; a session already live is
 * kept. Once attached, the worker adds the agent's events to profiles (referenced) each
 * second. start_time tells the process apart from a later one with its pid. uid/gid: the
 * target's, which the attach and the files it leaves take. -ENOMEM or -EAGAIN. */
struct jvm_profiles {
	struct profile *alloc;         /* bytes allocated, by Java stack */
	struct profile *alloc_objects; /* allocation samples */
	struct profile *monitors;      /* monitor contention, microseconds */
};

int jvm_collector_enable(struct jvm_collector *c, pid_t pid, uint64_t start_time, uid_t uid,
			 gid_t gid, const struct jvm_profiles *profiles);
/* Hands the Java stacks pid's agent walked so far to the cpu collector now, before its
 * samples are final (a disable). Waits for the agent's answer. */
void jvm_collector_drain_java(struct jvm_collector *c, pid_t pid);
/* Asks pid's session to end (its worker hangs up, the agent gives back its capabilities);
 * the session's outcome stays readable until jvm_collector_forget. Never blocks. */
void jvm_collector_disable(struct jvm_collector *c, pid_t pid);
void jvm_collector_forget(struct jvm_collector *c, pid_t pid);

/* One line for the target's status ("attached", "failed: ...", "off"). */
void jvm_collector_state_line(struct jvm_collector *c, pid_t pid, FILE *out);
/* jvm/status: `key: value` lines. */
int jvm_collector_status(struct jvm_collector *c, pid_t pid, const char *off_reason,
			 FILE *out);

enum jvm_threads_view {
	JVM_THREADS_DUMP,           /* JSON snapshot of every thread */
	JVM_THREADS_DEADLOCKS,      /* jstack's "Found one Java-level deadlock:" text */
	JVM_THREADS_DEADLOCKS_JSON,
};

/* Renders a view of pid's threads. -ENODATA when pid is not an attached JVM; -EIO (reason in
 * jvm/status) when the agent failed to answer. */
int jvm_threads_render(struct jvm_collector *c, pid_t pid, enum jvm_threads_view view,
		       FILE *out);
/* threads/busy of an attached JVM: l's threads (with the CPU each used in the target's
 * window, store/threads.h) in order (busiest first), named as Java names them, with the
 * Java stacks of the JVM_BUSY_STACKS busiest Java threads. Errors as jvm_threads_render. */
#define JVM_BUSY_STACKS 5
struct thread_list;
struct thread_info;
int jvm_threads_busy(struct jvm_collector *c, pid_t pid, const struct thread_list *l,
		     const struct thread_info *const *order, FILE *out);

#endif
