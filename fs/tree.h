/* One tree, two sources. The live daemon and the fleet aggregator show the same files under
 * targets/<pid>/, rendered by the same views; what differs is where the data comes from. A
 * source is a table of operations (struct tree_source_ops) plus the tree's own top-level
 * nodes: the daemon's config/ and targets/, the aggregator's nodes/<node>/ and services/.
 *
 * Between the root and a target sit optional scopes: directories named by a string (a node,
 * a service) that the source numbers, so their inode numbers are computed like the others
 * (see fs/nodes.h). The daemon has none: its targets hang off the root, scope 0.
 *
 * Resolution (inode -> node, directory + name -> node, listing) and rendering into a buffer
 * need no FUSE: fs/ops.c serves them over FUSE, the aggregator over HTTP, byte for byte the
 * same. */
#ifndef APERTURE_FS_TREE_H
#define APERTURE_FS_TREE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "daemon/targets.h"
#include "fs/nodes.h"
#include "store/sysstats.h"
#include "views/views.h"

struct tree;

/* Latest-state texts of a target, and blocking.json. */
enum tree_text {
	TREE_TEXT_STATUS,
	TREE_TEXT_JVM_STATUS,
	TREE_TEXT_THREADS_DUMP,
	TREE_TEXT_DEADLOCKS,
	TREE_TEXT_DEADLOCKS_JSON,
	TREE_TEXT_THREADS_BUSY,
	TREE_TEXT_BLOCKING_JSON,
	TREE_TEXT_NR,
};

/* Kinds of scope directory, at most 2: a scope id's low bit. */
enum { TREE_SCOPE_KINDS = 2 };

struct tree_source_ops {
	/* Targets of a scope (0: the root's), ascending; *pids is the caller's. */
	int (*list_targets)(const struct tree *t, uint32_t scope, pid_t **pids, size_t *n);
	/* -ENOENT when the scope has no such target. */
	int (*target_info)(const struct tree *t, uint32_t scope, pid_t pid,
			   struct target_info *out);
	bool (*is_jvm)(const struct tree *t, uint32_t scope, pid_t pid);
	/* One stack profile of ref's target or scope, over ref->range (or the window of its
	 * window file), with what its views say about it. title is m->title's storage. */
	int (*profile)(const struct tree *t, const struct node_ref *ref, enum target_profile which,
		       struct profile_snapshot **out, struct view_meta *m, char *title,
		       size_t title_size);
	/* System call and lock statistics; lock_stacks and why as locks.json shows them. */
	int (*sys)(const struct tree *t, const struct node_ref *ref, struct sys_snapshot **out,
		   bool *lock_stacks, char *why, size_t why_size);
	int (*text)(const struct tree *t, const struct node_ref *ref, enum tree_text which,
		    FILE *out);
	/* The window file of ref's directory. */
	int (*read_window)(const struct tree *t, const struct node_ref *ref, FILE *out);
	int (*write_window)(const struct tree *t, const struct node_ref *ref, const char *buf,
			    size_t len);
	/* Scopes (NULL without): each of a kind with its id (> 0, low bit = kind). */
	int (*list_scopes)(const struct tree *t, int kind,
			   int (*add)(void *ctx, uint32_t id, const char *name), void *ctx);
	int (*scope_lookup)(const struct tree *t, int kind, const char *name, uint32_t *id);
};

struct tree {
	const struct tree_source_ops *ops;
	void *ctx;                /* the source's */
	struct aperture *a;       /* the live daemon, or NULL: then no control files */
	struct pidns *pidns;      /* readers' PID namespaces (the live tree), or NULL */
	int64_t started;          /* unix seconds, the directories' times */
	const struct node *root;  /* top-level nodes, [0] the root directory */
	int nroot;
	/* Nodes under scope directories: each kind's directory is scope_dir[kind], the others
	 * hang below them (parent = an index here). */
	const struct node *scope_nodes;
	int nscope;
	int scope_dir[TREE_SCOPE_KINDS];
};

/* What a profile is, for its views' titles and pprof's sample and period types. */
struct tree_profile {
	const char *name, *unit, *sample_type, *period_type, *period_unit;
};
extern const struct tree_profile tree_profiles[TARGET_PROFILE_NR];
/* The profile named name ("cpu", "offcpu", ...); -1 when none is. */
int tree_profile_by_name(const char *name);

/* A time range as a window file and ?last= take it: N seconds (1..604800, into *last_s)
 * or FROM..UNTIL unix seconds (into *r). -EINVAL or -ERANGE. */
int tree_parse_range(const char *s, struct tree_range *r, int64_t *last_s);

/* The daemon's tree (daemon/tree_source.c). */
void tree_init_live(struct tree *t, struct aperture *a);

/* Resolves an inode number; -ENOENT for a number the tree never hands out. A node of
 * targets/ resolved for a reader must also pass tree_check_view. */
int tree_resolve(const struct tree *t, uint64_t ino, struct node_ref *out);
/* The entry name in directory dir: 0, -ENOENT, or -ENOTDIR. */
int tree_lookup(const struct tree *t, const struct node_ref *dir, const char *name,
		struct node_ref *out);
/* Calls add for every entry of dir but . and .., stopping at its first error. */
int tree_list(const struct tree *t, const struct node_ref *dir,
	      int (*add)(void *ctx, const char *name, uint64_t ino, mode_t mode), void *ctx);
uint64_t tree_parent_ino(const struct tree *t, const struct node_ref *dir);
/* Walks a path from the root ("/nodes/a/targets/1/cpu.folded"); empty parts are skipped. */
int tree_walk(const struct tree *t, const char *path, struct node_ref *out);
/* Whether a reader in view (0: the daemon's namespace) may reach ref: the daemon's namespace
 * reaches every node; another reaches only nodes shown through its own view whose process is
 * still in its namespace. -ENOENT otherwise. */
int tree_check_view(const struct tree *t, const struct node_ref *ref, uint32_t view);
/* Renders a readable file into *data (malloc'd, the caller's). */
int tree_render(const struct tree *t, const struct node_ref *ref, char **data, size_t *len);
/* Whether a node is shown for ref's target (jvm/ for JVMs, controls for the live tree). */
bool tree_node_present(const struct tree *t, const struct node *n, const struct node_ref *ref);

#endif
