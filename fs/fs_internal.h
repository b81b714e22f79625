#ifndef APERTURE_FS_INTERNAL_H
#define APERTURE_FS_INTERNAL_H

#include <fuse3/fuse_lowlevel.h>
#include "fs/access.h"
#include "fs/handles.h"
#include "fs/nodes.h"
#include "fs/render_pool.h"
#include "fs/snapshot.h"
#include "fs/tree.h"

struct fs {
	const struct tree *tree;
	struct tree live;         /* the tree, when it is the daemon's */
	struct fuse_session *se;
	struct render_pool *pool;
	struct snapshot_table *snaps;
	struct handle_table *handles;
	/* APERTURE_TEST_RENDER_DELAY_MS: makes every slow render take this long, so tests can
	 * prove a slow render stalls nothing else. */
	unsigned render_delay_ms;
};

extern const struct fuse_lowlevel_ops fs_ops;

#endif
