/* Who may do what. Without default_permissions the kernel checks no mode bits, and with
 * allow_other every user reaches the daemon, so every access is checked here, against the
 * same modes and owners the tree shows. A target's files are owned by the target's uid when
 * its real, effective and saved uids agree, else by root: ptrace's rule, under which a user
 * may not inspect a setuid program they started. */
#ifndef APERTURE_FS_ACCESS_H
#define APERTURE_FS_ACCESS_H

#include <stdbool.h>
#include <sys/types.h>
#include "fs/nodes.h"

struct caller {
	uid_t uid;
	gid_t gid;
	pid_t tid; /* the calling thread, as FUSE reports it */
};

/* Owner of a node, as shown and enforced. -ENOENT if its target is gone. */
int access_owner(const struct node_ref *ref, uid_t *uid, gid_t *gid);

/* want: R_OK, W_OK, X_OK bits. Root may do anything a mode allows anyone. */
bool access_mode_allows(const struct caller *c, mode_t mode, uid_t uid, gid_t gid, int want);

/* 0, -EACCES, or -ENOENT if the node's target is gone. For a node under targets/<pid>/ the
 * caller must also be allowed into the directory. */
int access_check(const struct caller *c, const struct node_ref *ref, int want);

#endif
