/* The FUSE tree: mounts it, serves it until a signal or an unmount, unmounts it. */
#ifndef APERTURE_FS_FS_H
#define APERTURE_FS_FS_H

#include <stdbool.h>
#include <stdio.h>

struct aperture;
struct fs;
struct tree;

struct fs_options {
	const char *mountpoint;
	bool allow_other;
	bool foreground;
};

/* Mounts the live daemon's tree, first recovering a mount point left stale by a killed
 * daemon ("Transport endpoint is not connected") and making the directory if missing.
 * -EBUSY if a live aperture is mounted there already. */
int fs_mount(struct aperture *a, const struct fs_options *opt, struct fs **out);
/* The same for another source's tree (t must outlive the mount). */
int fs_mount_tree(const struct tree *t, const struct fs_options *opt, struct fs **out);
/* Detaches from the terminal unless opt->foreground. Call before starting threads. */
int fs_daemonize(const struct fs_options *opt);
/* Serves requests until SIGINT, SIGTERM or SIGHUP, or an unmount. */
int fs_serve(struct fs *fs);
/* Versions of aperture and the libraries it runs with, as the `version` file shows them. */
int fs_version(FILE *out);
/* Finishes pending renders and unmounts. */
void fs_unmount(struct fs *fs);

#endif
