/* Our own vDSO image as a file. The kernel maps one image into every x86_64 process, so ours
 * names the "[vdso]" mapping of any target, and a memfd lets it go through the same ELF path
 * as files on disk. */
#ifndef APERTURE_SYMBOLS_VDSO_H
#define APERTURE_SYMBOLS_VDSO_H

#include <stddef.h>

/* Copies the vDSO mapped into this process into a new memfd. Returns 0 with *fd (owned by the
 * caller) and the image's size in *size, -ENOENT if this process has no vDSO, or -errno. */
int vdso_memfd(int *fd, size_t *size);

#endif
