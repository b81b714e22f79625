/* Who a process is, from /proc: enough to tell a reused pid apart, to apply ptrace's access
 * rule, and to name it in status. */
#ifndef APERTURE_DAEMON_PROC_IDENTITY_H
#define APERTURE_DAEMON_PROC_IDENTITY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct proc_identity {
	uint64_t start_time; /* clock ticks after boot: a reused pid has another */
	uid_t ruid, euid, suid;
	gid_t rgid;
	char comm[16];
};

/* Reads /proc/<pid>/stat and /proc/<pid>/status. -ENOENT if there is no such process, or if
 * pid is a thread other than its process's main thread (/proc resolves those too). */
int proc_identity_read(pid_t pid, struct proc_identity *out);

/* Reads the small file /proc/<pid>/<name> into buf, NUL-terminated. -ENOENT if pid is gone. */
int proc_read_file(pid_t pid, const char *name, char *buf, size_t len);

/* The process (thread group) a thread belongs to. -ENOENT if there is no such thread. */
int proc_tgid(pid_t tid, pid_t *tgid);

/* The pure halves, for tests. */
int proc_identity_parse_stat(const char *text, struct proc_identity *out);
int proc_identity_parse_status(const char *text, pid_t *tgid, struct proc_identity *out);

/* Same process as when `was` was read (same pid assumed)? */
static inline int proc_identity_same(const struct proc_identity *a, const struct proc_identity *b)
{
	return a->start_time == b->start_time;
}

#endif
