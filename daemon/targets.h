/* The targets: every process the tree shows under targets/<pid>/. A live process that was
 * never enabled needs no record; one is made when a control file of it is written, and kept
 * while it is enabled, holds data, or has an error to show. An exited process's record stays
 * readable for config/retain_exited_s. */
#ifndef APERTURE_DAEMON_TARGETS_H
#define APERTURE_DAEMON_TARGETS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "store/blocking.h"
#include "store/profile.h"
#include "store/sysstats.h"
#include "store/threads.h"

struct aperture;
struct targets;

enum target_state {
	TARGET_DISABLED,
	TARGET_ENABLED,
	TARGET_EXPIRED,  /* a temporary enable ran out */
	TARGET_EXITED,
	/* Its collectors are being detached (a disable, an expiry, an exit): what it collected
	 * is final once it leaves this state for the one it is going to. */
	TARGET_STOPPING,
};

enum target_profile {
	TARGET_PROFILE_CPU,
	TARGET_PROFILE_JVM_ALLOC,         /* bytes, by Java stack (sampled) */
	TARGET_PROFILE_JVM_ALLOC_OBJECTS, /* allocation samples */
	TARGET_PROFILE_JVM_MONITORS,      /* monitor contention, microseconds */
	TARGET_PROFILE_OFFCPU,   /* microseconds off CPU */
	TARGET_PROFILE_LOCKS,  /* futex wait microseconds by waiting stack */
	TARGET_PROFILE_NR,
};

struct target_info {
	uid_t ruid, euid, suid;
	gid_t rgid;
	enum target_state state;
	char comm[16];          /* the process's name, for titles */
	int64_t since;          /* when it entered its state; 0 if it has no record */
};

int targets_new(struct aperture *a, struct targets **out);
void targets_free(struct targets *ts);

/* -ENOENT if pid is neither a live process (not a thread) nor a retained exited one. */
int targets_info(struct targets *ts, pid_t pid, struct target_info *out);

/* Live processes and retained exited ones, ascending. *pids is the caller's to free. */
int targets_list(struct targets *ts, pid_t **pids, size_t *n);

/* Control files. Each returns 0 or a negative errno (-EINVAL, -ERANGE, -ESRCH for an exited
 * process, -ENOENT for no such process, or a collector's error) and, on error, changes
 * nothing and leaves the reason as the target's last_error. */
/* enable: a new enable is a new profile (every profile, syscalls and locks, blocking events and
 * threads' history start empty, `since` is the enable); 1 while enabled keeps the profile and
 * sets no expiry, a duration a new one. */
int targets_write_enable(struct targets *ts, pid_t pid, const char *buf, size_t len);
/* collectors: this target's set (aperture_collectors_parse), applied at once while enabled
 * (what the others collected is kept), and what its next enables get. */
int targets_write_collectors(struct targets *ts, pid_t pid, const char *buf, size_t len);
int targets_read_collectors(struct targets *ts, pid_t pid, FILE *out);
int targets_write_reset(struct targets *ts, pid_t pid, const char *buf, size_t len);
/* window: "global" (follow config/window_s, the default) or 0..PROFILE_HISTORY_S seconds. */
int targets_write_window(struct targets *ts, pid_t pid, const char *buf, size_t len);
/* baseline: "1" keeps a copy of every profile as its views show it now (window applied),
 * replacing any earlier one; "0" drops it. */
int targets_write_baseline(struct targets *ts, pid_t pid, const char *buf, size_t len);

int targets_read_enable(struct targets *ts, pid_t pid, FILE *out);
int targets_status(struct targets *ts, pid_t pid, FILE *out);
int targets_read_window(struct targets *ts, pid_t pid, FILE *out);
int targets_read_baseline(struct targets *ts, pid_t pid, FILE *out);

/* The window pid's views cover: its own, or config/window_s. 0 = since enable or reset. */
int targets_window_s(struct targets *ts, pid_t pid, int64_t *out);

/* A snapshot of one profile of pid (an empty one if it has none), over pid's window. Caller
 * frees it with profile_snapshot_free. */
int targets_snapshot(struct targets *ts, pid_t pid, enum target_profile which,
		     struct profile_snapshot **out);
/* The same from second from on (HTTP's ?last=, ?from=) instead of the window. A from older
 * than the history kept (PROFILE_HISTORY_S) gives everything since enable or reset: the
 * snapshot's since says where it starts. */
int targets_snapshot_from(struct targets *ts, pid_t pid, enum target_profile which,
			  int64_t from, struct profile_snapshot **out);

/* A copy of the baseline of one profile of pid, or *out = NULL when there is none. Caller
 * frees it with profile_snapshot_free. */
int targets_baseline(struct targets *ts, pid_t pid, enum target_profile which,
		     struct profile_snapshot **out);
/* A snapshot of pid's blocking events (an empty one if it has none). Caller frees it with
 * blocking_snapshot_free. */
int targets_blocking(struct targets *ts, pid_t pid, struct blocking_snapshot **out);
/* A snapshot of pid's system call and lock statistics (empty if it has none). Caller frees it
 * with sys_snapshot_free. */
int targets_sys_snapshot(struct targets *ts, pid_t pid, struct sys_snapshot **out);

/* Once a second: temporary enables that ran out, processes that exited, records past their
 * retention. */
void targets_tick(struct targets *ts, int64_t now);

/* Sets the recent_us of l (pid's threads, read just now) to the CPU each used over pid's
 * window, from the history kept once a second while pid is enabled. -ENOENT if pid has no
 * such history (never enabled). */
int targets_threads_busy(struct targets *ts, pid_t pid, struct thread_list *l);

void targets_count(struct targets *ts, unsigned *enabled, unsigned *exited);

/* A record as remote sync reads it: who the process is and what it collected. */
struct target_record {
	pid_t pid;
	uint64_t start_time;     /* with pid, the process incarnation */
	char comm[16];
	enum target_state state;
	const char *state_name;  /* "enabled", ... as status says */
	bool jvm;
	/* Referenced; NULL for what it never collected. */
	struct profile *profiles[TARGET_PROFILE_NR];
	struct blocking_log *blocking;
	struct sys_table *sys;
	char labels[1024];       /* the node's and the rules', "k=v k=v" */
};

/* Every record that collected (has a profile), by pid ascending. Free with
 * targets_records_free. 0 or -ENOMEM. */
int targets_records(struct targets *ts, struct target_record **out, size_t *n);
void targets_records_free(struct target_record *r, size_t n);

/* What the rules decided for a process (daemon/rules.h). */
enum target_rule_decision { TARGET_RULE_NONE, TARGET_RULE_ENABLE, TARGET_RULE_DISABLE };
struct target_rule_outcome {
	enum target_rule_decision decision;
	int rule;             /* the deciding rule's line */
	uint32_t collectors;  /* the set to enable with; 0: the target's own or config's */
	uint64_t duration;    /* seconds; 0: until disabled */
	const char *labels;   /* the labels the rules set, "" for none */
	bool reapply;         /* the rules were rewritten: a rule's enable no rule makes now goes */
};
/* Applies o to pid if it is still the process that started at start_time. An explicit
 * `echo 0 > enable` wins: such a target is not enabled; the user's enables are not undone.
 * -EDQUOT when enabling would pass config/max_targets enabled targets (nothing done). */
int targets_apply_rule(struct targets *ts, pid_t pid, uint64_t start_time,
		       const struct target_rule_outcome *o);

#endif
