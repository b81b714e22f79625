/* Whole-file reads for /proc files, whose size stat reports as 0. */
#ifndef APERTURE_SYMBOLS_READ_FILE_H
#define APERTURE_SYMBOLS_READ_FILE_H

#include <stddef.h>
#include <sys/types.h>

/* Reads all of path into *out (malloc'd, owned by the caller, not NUL-terminated) and its
 * length into *len. Returns 0 or -errno (-ENOENT if there is no such file). */
int read_file(const char *path, char **out, size_t *len);

/* pid's pid in its innermost pid namespace (the last field of NSpid in /proc/<pid>/status):
 * the number it knows itself by, in file names such as /tmp/perf-<pid>.map. Returns 0,
 * -ENOENT without an NSpid line, -EINVAL for a malformed one, or -errno. */
int proc_nspid(pid_t pid, pid_t *nspid);

#endif
