/* What the tree holds: every directory and file, its mode, and how it is read and written.
 *
 * Inode numbers are computed, not allocated: a daemon-wide node's is 1 + its index in
 * fs_nodes, and a node under targets/<pid>/ has TARGET_INO_BIT | pid << 8 | its index in
 * fs_target_nodes (0 being the directory itself). A node under targets/<pid>/threads/<tid>/
 * has THREAD_INO_BIT | pid << 30 | tid << 8 | its index in fs_thread_nodes: pids and tids are
 * below 2^22 (the kernel's PID_MAX_LIMIT). So lookups need no table of live inodes. */
#ifndef APERTURE_FS_NODES_H
#define APERTURE_FS_NODES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

struct aperture;

#define TARGET_INO_BIT (1ULL << 40)
#define THREAD_INO_BIT (1ULL << 62)
#define THREAD_ID_BITS 22

struct node_ref;

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
	bool (*present)(struct aperture *a, pid_t pid);
	bool has_threads; /* a directory that also holds threads/<tid>/ of its target */
	int arg;          /* which setting, profile or view */
};

struct node_ref {
	const struct node *node;
	uint64_t ino;
	pid_t pid;        /* for nodes under targets/<pid>/, else 0 */
	pid_t tid;        /* for nodes under targets/<pid>/threads/<tid>/, else 0 */
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
extern const int fs_node_targets; /* index of targets/ in fs_nodes */

/* Resolves an inode number; -ENOENT for a number the tree never hands out. */
int node_resolve(uint64_t ino, struct node_ref *out);
uint64_t node_ino(int index);
uint64_t node_target_ino(pid_t pid, int index);
/* A target node's index in fs_target_nodes. */
int node_target_index(const struct node_ref *ref);
uint64_t node_thread_ino(pid_t pid, pid_t tid, int index);
/* A thread node's index in fs_thread_nodes. */
int node_thread_index(const struct node_ref *ref);

#endif
