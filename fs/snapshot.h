/* Rendered file contents, and who holds which.
 *
 * A snapshot is one rendering of a file, immutable and refcounted. Each open file reads its
 * own snapshot, so one `cat` sees one consistent state however many reads it takes. For
 * `stat` to report a size that the following reads match (sendfile, tar and rsync trust it),
 * a stat renders a snapshot and keeps it for that same process's next open of the file, and a
 * stat from a process that has the file open reports the size of the snapshot it is reading. */
#ifndef APERTURE_FS_SNAPSHOT_H
#define APERTURE_FS_SNAPSHOT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

struct snapshot {
	char *data;
	size_t len;
	struct timespec when;
	atomic_int refs;
};

/* Takes ownership of data (malloc'd). NULL (and data freed) when out of memory. */
struct snapshot *snapshot_new(char *data, size_t len);
struct snapshot *snapshot_ref(struct snapshot *s);
void snapshot_unref(struct snapshot *s);

struct snapshot_table;

int snapshot_table_new(struct snapshot_table **out);
void snapshot_table_free(struct snapshot_table *t);

/* Keeps s (referenced) as what process pid's next open of ino reads, for a few seconds. */
void snapshot_table_stash(struct snapshot_table *t, uint64_t ino, pid_t pid,
			  struct snapshot *s);
/* The stashed snapshot of (ino, pid) if still fresh, handed over with its reference. */
struct snapshot *snapshot_table_take(struct snapshot_table *t, uint64_t ino, pid_t pid);

/* Process pid opened / closed ino reading snapshot s. */
void snapshot_table_opened(struct snapshot_table *t, uint64_t ino, pid_t pid,
			   struct snapshot *s);
void snapshot_table_closed(struct snapshot_table *t, uint64_t ino, pid_t pid);
/* The snapshot pid reads through its latest open of ino (referenced), or NULL. */
struct snapshot *snapshot_table_reading(struct snapshot_table *t, uint64_t ino, pid_t pid);

#endif
