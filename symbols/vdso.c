// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/auxv.h>
#include <sys/mman.h>

#include "symbols/procmaps.h"
#include "symbols/vdso.h"

/* The ELF header gives no total size; the mapping does. */
static int vdso_size(uint64_t base, size_t *size)
{
	struct procmaps maps;
	int err = procmaps_read(getpid(), &maps);

	if (err)
		return err;
	err = -ENOENT;
	for (size_t i = 0; i < maps.n; i++) {
		if (maps.maps[i].start == base && !strcmp(maps.maps[i].path, "[vdso]")) {
			*size = maps.maps[i].end - maps.maps[i].start;
			err = 0;
			break;
		}
	}
	procmaps_free(&maps);
	return err;
}

int vdso_memfd(int *fd_out, size_t *size_out)
{
	uint64_t base = getauxval(AT_SYSINFO_EHDR);
	const char *image = (const char *)(uintptr_t)base;
	size_t size, done = 0;
	int fd, err;

	if (!base)
		return -ENOENT;
	err = vdso_size(base, &size);
	if (err)
		return err;
	fd = memfd_create("vdso", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (done < size) {
		ssize_t w = write(fd, image + done, size - done);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			goto err_close;
		}
		done += w;
	}
	*fd_out = fd;
	*size_out = size;
	return 0;

err_close:
	close(fd);
	return err;
}
