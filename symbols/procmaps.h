/* /proc/<pid>/maps: a pure parser, and a reader that feeds it.
 *
 * The parser takes text rather than a pid so it can be tested on lines no live process
 * produces on demand: paths with spaces, deleted files, huge device numbers. */
#ifndef APERTURE_SYMBOLS_PROCMAPS_H
#define APERTURE_SYMBOLS_PROCMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct procmap {
	uint64_t start;
	uint64_t end;
	uint64_t pgoff;		/* file offset of start, in bytes */
	uint64_t inode;
	unsigned int dev_major;
	unsigned int dev_minor;
	char perms[5];		/* "r-xp", NUL-terminated */
	bool deleted;		/* the path ended in " (deleted)", which is not part of path */
	char *path;		/* owned; "" for an anonymous mapping, "[vdso]" and the like as is */
};

struct procmaps {
	struct procmap *maps;	/* owned, in the kernel's order (ascending start) */
	size_t n;
	/* Set by procmaps_read: the id whose /proc/<id>/ they were read through (see
	 * procmaps_reader), and -EACCES or -EPERM when they could not be read at all. */
	pid_t reader;
	int unreadable;
};

static inline bool procmap_is_exec(const struct procmap *m)
{
	return m->perms[2] == 'x';
}

/* A path the kernel made up ("[vdso]", "[heap]", "[anon:name]") rather than a file's. */
static inline bool procmap_is_pseudo(const struct procmap *m)
{
	return m->path[0] == '[';
}

/* Parses one line (no newline needed; len excludes it). Returns 0, -EINVAL if the line is not
 * a maps line, or -ENOMEM. On success out->path must be freed by the caller. */
int procmaps_parse_line(const char *line, size_t len, struct procmap *out);

/* Parses a whole maps text into *out (emptied first). Returns 0, -EINVAL on the first bad
 * line (out is left empty) or -ENOMEM. */
int procmaps_parse(const char *text, size_t len, struct procmaps *out);

/* The id whose /proc/<id>/ (maps, map_files, root, auxv, mem) shows pid's address space:
 * pid, or, when the thread-group leader has exited while other threads run on (its own
 * directory then shows nothing), a live thread's. 0, or -ESRCH if no thread of pid is
 * alive. */
int procmaps_reader(pid_t pid, pid_t *reader);

/* Reads and parses pid's maps, through procmaps_reader's directory. Returns 0, -ESRCH if there
 * is no such process or all its threads have exited (a zombie), or another -errno. A kernel
 * thread yields zero mappings and 0; so does a process whose maps we may not read, with
 * out->unreadable saying why. */
int procmaps_read(pid_t pid, struct procmaps *out);

/* -EACCES or -EPERM if pid's maps exist but may not be read (ptrace read access refused),
 * else 0. */
int procmaps_check_access(pid_t pid);

void procmaps_free(struct procmaps *m);

#endif
