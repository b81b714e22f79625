#include <errno.h>
#include <unistd.h>
#include "fs/access.h"
#include "fs/tree.h"

int access_owner(const struct node_ref *ref, uid_t *uid, gid_t *gid)
{
	struct target_info ti;
	int err;

	if (!ref->pid) {
		*uid = 0;
		*gid = 0;
		return 0;
	}
	err = ref->tree->ops->target_info(ref->tree, ref->scope, ref->pid, &ti);
	if (err)
		return err;
	if (ti.ruid == ti.euid && ti.ruid == ti.suid) {
		*uid = ti.ruid;
		*gid = ti.rgid;
	} else {
		*uid = 0;
		*gid = 0;
	}
	return 0;
}

bool access_mode_allows(const struct caller *c, mode_t mode, uid_t uid, gid_t gid, int want)
{
	unsigned bits;

	if (c->uid == 0) {
		/* Like the kernel: root needs some x bit to execute, nothing else. */
		if (want & X_OK)
			return mode & 0111;
		return (want & W_OK ? mode & 0222 : 1) && (want & R_OK ? mode & 0444 : 1);
	}
	if (c->uid == uid)
		bits = (mode >> 6) & 7;
	else if (c->gid == gid)
		bits = (mode >> 3) & 7;
	else
		bits = mode & 7;
	return (bits & want) == (unsigned)want;
}

int access_check(const struct caller *c, const struct node_ref *ref, int want)
{
	uid_t uid;
	gid_t gid;
	int err = access_owner(ref, &uid, &gid);

	if (err)
		return err;
	/* Reaching a target's files needs search permission on its directory. */
	if (ref->pid && ref->node != &fs_target_nodes[0] &&
	    !access_mode_allows(c, fs_target_nodes[0].mode, uid, gid, X_OK))
		return -EACCES;
	return access_mode_allows(c, ref->node->mode, uid, gid, want) ? 0 : -EACCES;
}
