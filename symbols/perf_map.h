/* perf's map files, for naming JIT-compiled code: /tmp/perf-<pid>.map, which V8
 * (node --perf-basic-prof), .NET (DOTNET_PerfMapEnabled), LuaJIT, Java perf-map agents and
 * Python 3.12 (-X perf) write, one line per function as it is compiled:
 * "START SIZE NAME", START and SIZE in hex.
 *
 * The file is the target's: it is read through /proc/<pid>/root (the target's mount
 * namespace: its /tmp), and named by the pid the target knows itself by (the last NSpid).
 * Only whole lines are read, and only what was appended since the last read, so a file
 * that keeps growing costs its new lines. As perf does, a file owned by neither root nor the
 * target's user is ignored, and so is one that is not a regular file. Thread-safe. */
#ifndef APERTURE_SYMBOLS_PERF_MAP_H
#define APERTURE_SYMBOLS_PERF_MAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A file that grew is read again on a miss at most this often. */
#define PERF_MAP_RECHECK_MS 100

struct perf_map;

/* The map of process pid, read now if the file exists (it need not, yet). 0 or -ENOMEM. */
int perf_map_open(pid_t pid, struct perf_map **out);
/* A map of no process, made of text as if read from a file (whole lines only): for tests.
 * 0 or -ENOMEM. */
int perf_map_from_text(const char *text, size_t len, struct perf_map **out);
void perf_map_free(struct perf_map *m);

/* The name of the function at addr into buf; the file is read again first when addr is
 * not in it and it may have grown. 0, -ENOENT if no line covers addr, -ENOSPC if len is too
 * small. */
int perf_map_name(struct perf_map *m, uint64_t addr, char *buf, size_t len);

/* Functions read so far. */
size_t perf_map_count(struct perf_map *m);

#endif
