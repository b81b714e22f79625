// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbols/read_file.h"

int read_file(const char *path, char **out, size_t *len)
{
	size_t cap = 16384, used = 0;
	char *buf;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(cap);
	if (!buf) {
		err = -ENOMEM;
		goto err_close;
	}
	for (;;) {
		ssize_t r;

		if (used == cap) {
			char *grown = realloc(buf, cap * 2);

			if (!grown) {
				err = -ENOMEM;
				goto err_free;
			}
			buf = grown;
			cap *= 2;
		}
		r = read(fd, buf + used, cap - used);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			goto err_free;
		}
		if (r == 0)
			break;
		used += r;
	}
	close(fd);
	*out = buf;
	*len = used;
	return 0;

err_free:
	free(buf);
err_close:
	close(fd);
	return err;
}

int proc_nspid(pid_t pid, pid_t *nspid)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	int err = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char *last;

		if (strncmp(line, "NSpid:", 6))
			continue;
		/* The innermost namespace's pid is the last field. */
		last = strrchr(line, '\t');
		*nspid = last ? atoi(last + 1) : 0;
		err = *nspid > 0 ? 0 : -EINVAL;
		break;
	}
	free(line);
	fclose(f);
	return err;
}
