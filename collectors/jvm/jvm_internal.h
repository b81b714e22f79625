/* What the JVM collector's files share. */
#ifndef APERTURE_COLLECTORS_JVM_INTERNAL_H
#define APERTURE_COLLECTORS_JVM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "collectors/jvm/jvm.h"
#include "store/threads.h"

enum jvm_runtime { JVM_NONE, JVM_HOTSPOT, JVM_OTHER };

/* discover.c */
enum jvm_runtime jvm_runtime_of(pid_t pid);
/* Whether -XX:+DisableAttachMechanism is in effect (command line or JAVA_TOOL_OPTIONS). */
bool jvm_attach_disabled(pid_t pid);

/* hsperf_pid.c: the owners of HotSpot perf data files. */
struct hsperf_proc {
	pid_t pid, nspid;      /* on the host; in its own pid namespace */
};

/* /proc, read at the first need and reused for one batch of files. */
struct hsperf_procs {
	bool read;
	struct hsperf_proc *v;
	size_t n, cap;
};

void hsperf_procs_free(struct hsperf_procs *p);
/* The host pid of the process that named the file rel (under /tmp, e.g. "hsperfdata_u/42")
 * after its pid nspid and has it open or mapped; file: the file's stat. -ESRCH if none. */
struct stat;
int hsperf_owner(struct hsperf_procs *procs, const char *rel, const struct stat *file,
		 pid_t nspid, pid_t *pid);
/* A process whose /tmp is the folder dev/ino. -ESRCH if none. */
int hsperf_procs_find_root(struct hsperf_procs *procs, dev_t dev, ino_t ino, pid_t *pid);

/* attach.c. Each returns 0 or a negative errno with the reason in why. */

/* Copies the agent into the target's /tmp as name (versioned by content), readable by
 * everyone and writable by no one; a copy already there is reused, so a JVM that loaded it
 * before loads the same library again. */
int jvm_agent_install(pid_t pid, const char *agent_path, const char *name, char *why,
		      size_t whylen);
/* Listens on a unix socket in the target's /tmp, owned by uid. *inside: its path as the JVM
 * sees it; *host: as the daemon reaches it (to unlink it). */
int jvm_channel_listen(pid_t pid, uid_t uid, gid_t gid, char *inside, size_t insidelen,
		       char *host, size_t hostlen, int *fd, char *why, size_t whylen);
/* Accepts the agent's connection, from pid only, within timeout_ms. */
int jvm_channel_accept(int lfd, pid_t pid, int timeout_ms, int *fd, char *why, size_t whylen);
/* HotSpot's attach protocol, in a helper process running as uid: `load <agent> true
 * <options>`. Kills the helper past timeout_ms. 0 when Agent_OnAttach returned 0. */
int jvm_attach_load(pid_t pid, pid_t nspid, uid_t uid, gid_t gid, const char *agent_inside,
		    const char *options, int timeout_ms, char *why, size_t whylen);

/* records.c: the agent's thread records (protocol.h), parsed. */
struct jvm_lock {
	char *hash, *cls;
	int depth;             /* monitors: the frame that locked it */
};

struct jvm_frame {
	char *cls, *method, *file;
	int line;
	bool native;
};

struct jvm_thread {
	long long id;
	char *name, *state;
	bool daemon, in_native;
	long long cpu_ns;      /* -1 unknown */
	long long owner_id;    /* -1 none */
	char *owner_name;
	struct jvm_lock lock;  /* what it waits for; hash empty when nothing */
	struct jvm_frame *frames;
	size_t nframes;
	struct jvm_lock *monitors, *syncs;
	size_t nmonitors, nsyncs;
	pid_t tid;             /* matched by the daemon; 0 unknown */
};

struct jvm_threads {
	struct jvm_thread *v;
	size_t n;
	char *text;            /* the records, which the strings point into */
};

int jvm_threads_parse(char *text, size_t len, struct jvm_threads *out);
void jvm_threads_free(struct jvm_threads *t);

/* events.c: a drain reply's records (protocol.h) added to profiles at second sec, and its
 * figures added to d. -EPROTO for a malformed line (the lines before it are kept). */
struct jvm_profiles;
struct cpu_java_stack;
/* The Java stacks walked for CPU samples in a drain reply (frames point into its text), and
 * the agent's counts of walks that failed and stacks it dropped. */
struct jvm_java_stacks {
	struct cpu_java_stack *v;
	size_t n, cap;
	uint64_t failed, dropped;
	int last_error; /* AsyncGetCallTrace's last failure (protocol.h) */
};
struct jvm_drain {
	uint64_t lost;           /* events the agent dropped */
	uint64_t alloc_interval; /* bytes between allocation samples now; 0: not said */
};
int jvm_events_add(char *text, size_t len, const struct jvm_profiles *p, int64_t sec,
		   struct jvm_drain *d, struct jvm_java_stacks *java);
void jvm_java_stacks_free(struct jvm_java_stacks *java);
/* The agent's thread ids are its pid namespace's: makes them the host's, as BPF sees them.
 * -ESRCH if pid is gone. */
int jvm_host_tids(pid_t pid, struct cpu_java_stack *v, size_t n);

/* threads.c: renderers over parsed records. */
struct jvm_task_cpu {
	pid_t tid;
	char comm[16];
	uint64_t cpu_ns;       /* the kernel's sum_exec_runtime */
};

/* Every thread of pid (or of known, whose names are used) with its CPU time; *v is the
 * caller's to free. */
int jvm_tasks_read(pid_t pid, const struct thread_list *known, struct jvm_task_cpu **v,
		   size_t *n);
/* Fills each Java thread's tid: same comm (the first 15 bytes of its name) and the nearest
 * CPU time. */
void jvm_threads_match(struct jvm_threads *t, const struct jvm_task_cpu *tasks, size_t n);

int jvm_render_dump(const struct jvm_threads *t, pid_t pid, FILE *out);
int jvm_render_deadlocks(const struct jvm_threads *t, FILE *out);
int jvm_render_deadlocks_json(const struct jvm_threads *t, pid_t pid, FILE *out);
/* l's threads in order (busiest first) as Java names them (all: "list" records, matched);
 * top: the stacks of the busiest few. */
int jvm_render_busy(const struct jvm_threads *all, const struct jvm_threads *top,
		    const struct thread_list *l, const struct thread_info *const *order,
		    FILE *out);

#endif
