/* PID namespaces of the tree's readers. A reader in another PID namespace than the daemon's
 * sees targets/ as its own /proc shows processes: only those of its namespace, by the numbers
 * they have there (the last field of /proc/<pid>/status NSpid), threads likewise. Each
 * namespace that reads the tree gets a view id, 1..PIDNS_VIEWS_MAX, which is part of the inode
 * numbers it is shown (fs/nodes.h); 0 is the daemon's own namespace, which sees every process
 * by its own pid. Views are never reused while the daemon runs. */
#ifndef APERTURE_DAEMON_PIDNS_H
#define APERTURE_DAEMON_PIDNS_H

#include <stdint.h>
#include <sys/types.h>

#define PIDNS_VIEW_BITS 9
#define PIDNS_VIEWS_MAX ((1u << PIDNS_VIEW_BITS) - 1)

struct pidns;

int pidns_new(struct pidns **out);
void pidns_free(struct pidns *p);

/* The view of whoever runs as pid (a thread id of the daemon's namespace, as FUSE gives it):
 * 0 for the daemon's namespace, and for 0 (a caller the kernel could not name there, i.e. in
 * an ancestor namespace). -ENOENT if pid is gone, -ENOSPC when the views ran out. */
int pidns_view_of(struct pidns *p, pid_t pid, uint32_t *view);

/* The number host (a process, or with tgid > 0 a thread of tgid, both of the daemon's
 * namespace) has in view: itself in view 0, else the last NSpid of a task of exactly that
 * namespace. -ENOENT if it is not one of view's. */
int pidns_to_view(struct pidns *p, uint32_t view, pid_t tgid, pid_t host, pid_t *out);

/* The pure half: the last NSpid field of a /proc/<pid>/status text; -ENOENT without one. */
int pidns_parse_nspid(const char *status, pid_t *out);

#endif
