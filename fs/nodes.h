/* What the tree holds: every directory and file, its mode, and how it is read and written.
 *
 * Inode numbers are computed, not allocated: a top-level node's is 1 + its index in the
 * tree's root table (fs_nodes for the daemon), and a node under targets/<pid>/ has
 * TARGET_INO_BIT | scope << 41 | pid << 8 | its index in fs_target_nodes (0 being the
 * directory itself). A node under a scope directory (the aggregator's nodes/<node>/) has
 * SCOPE_INO_BIT | scope << 8 | its index in the tree's scope table; scope ids are below 2^20,
 * and 0 for the daemon, whose inode numbers they leave as they were. A node under
 * targets/<pid>/threads/<tid>/ has THREAD_INO_BIT | pid << 30 | tid << 8 | its index in
 * fs_thread_nodes: pids and tids are below 2^22 (the kernel's PID_MAX_LIMIT). So lookups need
 * no table of live inodes.
 *
 * A reader in another PID namespace sees targets/ through a view (daemon/pidns.h): the view id
 * (9 bits, 0 for the daemon's namespace) sits in bits 30.. of a target node's number and 52.. of
 * a thread node's, so the same name under targets/ never resolves to one inode for two readers
 * that mean two processes by it, and one process has a directory of its own in each view. */
#ifndef APERTURE_FS_NODES_H
#define APERTURE_FS_NODES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

struct aperture;

#define TARGET_INO_BIT (1ULL << 40)
#define SCOPE_INO_BIT (1ULL << 61)
#define THREAD_INO_BIT (1ULL << 62)
#define THREAD_ID_BITS 22
#define SCOPE_ID_BITS 20
#define TARGET_SCOPE_SHIFT 41
#define TARGET_VIEW_SHIFT 30
#define THREAD_VIEW_SHIFT 52

struct node_ref;
struct tree;

/* A directory whose entries come from the source rather than from the node tables. */
enum node_dynamic {
	NODE_STATIC,
	NODE_TARGETS, /* targets/: <pid>/ of the directory's scope */
	NODE_SCOPES,  /* e.g. nodes/: a scope directory per name; arg is the scope kind */
};

struct node {
	const char *name;
	mode_t mode;      /* type and the permission bits shown (and enforced) */
	int parent;       /* index of the parent directory: in fs_nodes (-1 for the root), or for
			     a node under targets/<pid>/ in fs_target_nodes (0 for <pid>/) */
	/* Renders the whole content at open; NULL if not readable. */
	int (*render)(struct aperture *a, const struct node_ref *ref, FILE *out);
	/* Takes one value per write(); NULL if not writable. */
	int (*write)(struct aperture *a, const struct node_ref *ref, const char *buf, size_t len);
	bool slow;        /* rendered in the render pool, off the FUSE threads */
	/* Whether a target's node exists for pid (jvm/ only for JVMs); NULL: always. */
	bool (*present)(const struct tree *t, uint32_t scope, pid_t pid);
	bool has_threads; /* a directory that also holds threads/<tid>/ of its target */
	bool live_only;   /* a control of the live daemon: absent from a read-only tree */
	enum node_dynamic dynamic;
	int arg;          /* which setting, profile or view */
};

/* The time range a read asks for (HTTP's ?last= or ?from=&until=); unset: the window's. */
struct tree_range {
	int64_t from, until; /* unix seconds, inclusive */
	bool set;
};

struct node_ref {
	const struct node *node;
	const struct tree *tree;
	uint64_t ino;
	uint32_t scope;   /* the scope directory it is under, 0 for none */
	pid_t pid;        /* for nodes under targets/<pid>/, else 0 */
	pid_t tid;        /* for nodes under targets/<pid>/threads/<tid>/, else 0 */
	uint32_t view;    /* the PID namespace view it is seen through (daemon/pidns.h) */
	uint64_t write_offset; /* of the write being served: > 0 continues an open's text */
	struct tree_range range;
};

extern const struct node fs_nodes[];
extern const int fs_nodes_count;
extern const struct node fs_target_nodes[];
extern const int fs_target_nodes_count;
/* Under targets/<pid>/threads/<tid>/; parent is the index in fs_target_nodes for the
 * directory itself (index 0), else 0. */
extern const struct node fs_thread_nodes[];
extern const int fs_thread_nodes_count;

enum { FS_NODE_ROOT = 0 };

uint64_t node_ino(int index);
uint64_t node_scope_ino(uint32_t scope, int index);
uint64_t node_target_ino(uint32_t scope, pid_t pid, int index);
/* A target node's index in fs_target_nodes. */
int node_target_index(const struct node_ref *ref);
uint64_t node_thread_ino(pid_t pid, pid_t tid, int index);
/* A target's or thread's node number as view shows it (view 0: the daemon's), and the view
 * of a number. */
uint64_t node_in_view(uint64_t ino, uint32_t view);
uint32_t node_view(uint64_t ino);
/* A thread node's index in fs_thread_nodes. */
int node_thread_index(const struct node_ref *ref);

/* The renderings every tree shares, for a source's own tables (services/<s>/cpu.folded). */
int node_render_view(struct aperture *a, const struct node_ref *ref, FILE *out);
int node_render_window(struct aperture *a, const struct node_ref *ref, FILE *out);
int node_write_window(struct aperture *a, const struct node_ref *ref, const char *buf,
		      size_t len);
/* A view node's arg: which profile, which rendering of it. */
enum view_kind { VIEW_FOLDED, VIEW_TOP, VIEW_JSON, VIEW_PPROF, VIEW_SVG };
#define VIEW_ARG(profile, view) ((profile) << 8 | (view))
#define VIEW_ARG_PROFILE(arg) ((arg) >> 8)
#define VIEW_ARG_VIEW(arg) ((arg) & 0xff)
#define VIEW_NODE(n, parent_, profile, view) \
	{ .name = n, .mode = S_IFREG | 0400, .parent = parent_, .render = node_render_view, \
	  .slow = true, .arg = VIEW_ARG(profile, view) }
/* Every rendering of one stack profile, named <prefix>.<format>. */
#define PROFILE_VIEWS(prefix, parent_, profile) \
	VIEW_NODE(prefix ".folded", parent_, profile, VIEW_FOLDED), \
	VIEW_NODE(prefix ".top", parent_, profile, VIEW_TOP), \
	VIEW_NODE(prefix ".json", parent_, profile, VIEW_JSON), \
	VIEW_NODE(prefix ".pprof", parent_, profile, VIEW_PPROF), \
	VIEW_NODE(prefix ".svg", parent_, profile, VIEW_SVG)
#define DIR_NODE(n, m, p) { .name = n, .mode = S_IFDIR | (m), .parent = p }
#define FILE_NODE(n, m, p, r, w) \
	{ .name = n, .mode = S_IFREG | (m), .parent = p, .render = r, .write = w }

#endif
