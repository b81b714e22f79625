#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include "daemon/aperture.h"
#include "daemon/pidns.h"
#include "fs/fs.h"
#include "fs/fs_internal.h"

#define RENDER_THREADS 4

/* Is an aperture mount listed at path in /proc/self/mountinfo? */
static bool mounted_at(const char *path)
{
	char line[8192], mnt[PATH_MAX], *sep;
	bool found = false;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	while (f && !found && fgets(line, sizeof(line), f)) {
		/* "id parent major:minor root mountpoint options... - fstype source ..." */
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
			continue;
		sep = strstr(line, " - ");
		found = !strcmp(mnt, path) && sep && !strncmp(sep + 3, "fuse.aperture ", 14);
	}
	if (f)
		fclose(f);
	return found;
}

/* A daemon killed with SIGKILL leaves its mount behind, answering ENOTCONN to everything;
 * a new mount on top would fail. Detach it first. A live one is left alone. */
static int prepare_mountpoint(const char *path)
{
	struct stat st;

	if (stat(path, &st) == 0) {
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
		return mounted_at(path) ? -EBUSY : 0;
	}
	if (errno == ENOTCONN) {
		if (umount2(path, MNT_DETACH) && errno != EINVAL)
			return -errno;
		fprintf(stderr, "aperture: recovered %s, left stale by a daemon that was killed\n",
			path);
		return 0;
	}
	if (errno == ENOENT)
		return mkdir(path, 0755) ? -errno : 0;
	return -errno;
}

/* Mounts t, or the live daemon a's tree when t is NULL. */
static int mount_tree(struct aperture *a, const struct tree *t, const struct fs_options *opt,
		      struct fs **out)
{
	const char *delay = getenv("APERTURE_TEST_RENDER_DELAY_MS");
	char *argv[] = { "aperture", "-o", NULL, NULL };
	char options[256];
	struct fuse_args args;
	struct fs *fs;
	int err;

	err = prepare_mountpoint(opt->mountpoint);
	if (err)
		return err;
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	if (!t) {
		tree_init_live(&fs->live, a);
		t = &fs->live;
		err = pidns_new(&fs->live.pidns);
		if (err)
			goto fail;
	}
	fs->tree = t;
	fs->render_delay_ms = delay ? atoi(delay) : 0;
	err = snapshot_table_new(&fs->snaps);
	if (!err)
		err = handle_table_new(&fs->handles);
	if (err)
		goto fail;
	/* No default_permissions: access is checked in fs/access.c, where the target's uid
	 * is known. */
	snprintf(options, sizeof(options), "fsname=aperture,subtype=aperture,noatime%s",
		 opt->allow_other ? ",allow_other" : "");
	argv[2] = options;
	args = (struct fuse_args)FUSE_ARGS_INIT(3, argv);
	fs->se = fuse_session_new(&args, &fs_ops, sizeof(fs_ops), fs);
	fuse_opt_free_args(&args); /* libfuse may have copied them to add its own */
	if (!fs->se) {
		err = -EINVAL;
		goto fail;
	}
	if (fuse_set_signal_handlers(fs->se)) {
		err = -EIO;
		goto fail;
	}
	if (fuse_session_mount(fs->se, opt->mountpoint)) {
		err = -EIO;
		goto fail;
	}
	*out = fs;
	return 0;
fail:
	if (fs->se) {
		fuse_remove_signal_handlers(fs->se);
		fuse_session_destroy(fs->se);
	}
	handle_table_free(fs->handles);
	snapshot_table_free(fs->snaps);
	pidns_free(fs->live.pidns);
	free(fs);
	return err;
}

int fs_mount(struct aperture *a, const struct fs_options *opt, struct fs **out)
{
	return mount_tree(a, NULL, opt, out);
}

int fs_mount_tree(const struct tree *t, const struct fs_options *opt, struct fs **out)
{
	return mount_tree(NULL, t, opt, out);
}

int fs_version(FILE *out)
{
	int err = aperture_version(out);

	if (!err)
		fprintf(out, "libfuse %s\n", fuse_pkgversion());
	return err;
}

int fs_daemonize(const struct fs_options *opt)
{
	return fuse_daemonize(opt->foreground) ? -EIO : 0;
}

int fs_serve(struct fs *fs)
{
	struct fuse_loop_config *cfg;
	int err;

	err = render_pool_new(RENDER_THREADS, &fs->pool);
	if (err)
		return err;
	cfg = fuse_loop_cfg_create();
	if (!cfg)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(cfg, 0);
	err = fuse_session_loop_mt(fs->se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return err < 0 ? err : 0;
}

void fs_unmount(struct fs *fs)
{
	if (!fs)
		return;
	/* Pending renders answer their requests before the session they belong to goes. */
	render_pool_free(fs->pool);
	fuse_session_unmount(fs->se);
	fuse_remove_signal_handlers(fs->se);
	fuse_session_destroy(fs->se);
	handle_table_free(fs->handles);
	snapshot_table_free(fs->snaps);
	pidns_free(fs->live.pidns);
	free(fs);
}
