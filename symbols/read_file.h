/* Whole-file reads for /proc files, whose size stat reports as 0. */
#ifndef APERTURE_SYMBOLS_READ_FILE_H
#define APERTURE_SYMBOLS_READ_FILE_H

#include <stddef.h>

/* Reads all of path into *out (malloc'd, owned by the caller, not NUL-terminated) and its
 * length into *len. Returns 0 or -errno (-ENOENT if there is no such file). */
int read_file(const char *path, char **out, size_t *len);

#endif
