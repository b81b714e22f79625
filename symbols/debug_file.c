// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <elfutils/libdwelf.h>

#include "symbols/debug_file.h"

static pthread_mutex_t dirs_lock = PTHREAD_MUTEX_INITIALIZER;
static char *extra_dirs; /* dirs_lock; NULL = none */

int debug_file_set_dirs(const char *dirs)
{
	char *copy = dirs[0] ? strdup(dirs) : NULL;

	if (dirs[0] && !copy)
		return -ENOMEM;
	pthread_mutex_lock(&dirs_lock);
	free(extra_dirs);
	extra_dirs = copy;
	pthread_mutex_unlock(&dirs_lock);
	return 0;
}

struct want {
	const unsigned char *build_id;
	int build_id_len;
};

static bool build_id_matches(int fd, const struct want *want)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	const void *id;
	ssize_t len;
	bool same;

	if (!elf)
		return false;
	len = dwelf_elf_gnu_build_id(elf, &id);
	same = len == want->build_id_len && !memcmp(id, want->build_id, len);
	elf_end(elf);
	return same;
}

static int try_open(const char *path, const struct want *want, char **found)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (!build_id_matches(fd, want))
		goto err_close;
	*found = strdup(path);
	if (!*found)
		goto err_close;
	return fd;

err_close:
	close(fd);
	return -1;
}

/* Length of a leading "/proc/<pid>/root", 0 if there is none. */
static size_t root_prefix_len(const char *file_name)
{
	const char *p = file_name;

	if (strncmp(p, "/proc/", 6))
		return 0;
	p += 6;
	if (*p < '0' || *p > '9')
		return 0;
	while (*p >= '0' && *p <= '9')
		p++;
	if (strncmp(p, "/root/", 6))
		return 0;
	return p + 5 - file_name;
}

/* DIR/.build-id/xx/rest.debug where DIR is root (root_len bytes) followed by dir. */
static int by_build_id_in(const char *root, int root_len, const char *dir,
			  const struct want *want, char **found)
{
	char path[PATH_MAX];
	int n, i;

	n = snprintf(path, sizeof(path), "%.*s%s/.build-id/%02x/", root_len, root, dir,
		     want->build_id[0]);
	for (i = 1; i < want->build_id_len && n + 3 < (int)sizeof(path); i++)
		n += snprintf(path + n, sizeof(path) - n, "%02x", want->build_id[i]);
	if (n + 7 > (int)sizeof(path))
		return -1;
	strcpy(path + n, ".debug");
	return try_open(path, want, found);
}

static int by_build_id(const char *root, int root_len, const struct want *want, char **found)
{
	return by_build_id_in(root, root_len, "/usr/lib/debug", want, found);
}

/* In each extra directory: the build-id tree, then the debuglink name. */
static int in_extra_dirs(const char *link, const struct want *want, char **found)
{
	char dir[PATH_MAX], path[PATH_MAX];
	const char *p;
	int fd = -1;

	pthread_mutex_lock(&dirs_lock);
	for (p = extra_dirs; p && *p && fd < 0; p += strcspn(p, ":"), p += *p == ':') {
		int n = strcspn(p, ":");

		if (n >= (int)sizeof(dir))
			continue;
		memcpy(dir, p, n);
		dir[n] = '\0';
		fd = by_build_id_in("", 0, dir, want, found);
		if (fd < 0 && link && !strchr(link, '/') &&
		    snprintf(path, sizeof(path), "%s/%s", dir, link) < (int)sizeof(path))
			fd = try_open(path, want, found);
	}
	pthread_mutex_unlock(&dirs_lock);
	return fd;
}

static int by_debuglink(const char *file_name, const char *link, const struct want *want,
			char **found)
{
	size_t root_len = root_prefix_len(file_name);
	const char *slash = strrchr(file_name, '/');
	int dir_len, fd = -1;
	char path[PATH_MAX];

	if (!slash || strchr(link, '/'))
		return -1;
	dir_len = slash - file_name;
	if (snprintf(path, sizeof(path), "%.*s/%s", dir_len, file_name, link) < (int)sizeof(path))
		fd = try_open(path, want, found);
	if (fd < 0 && snprintf(path, sizeof(path), "%.*s/.debug/%s", dir_len, file_name,
			       link) < (int)sizeof(path))
		fd = try_open(path, want, found);
	if (fd < 0 && snprintf(path, sizeof(path), "%.*s/usr/lib/debug%.*s/%s", (int)root_len,
			       file_name, (int)(dir_len - root_len), file_name + root_len,
			       link) < (int)sizeof(path))
		fd = try_open(path, want, found);
	return fd;
}

int debug_file_find(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		    const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
		    char **debuginfo_file_name)
{
	struct want want;
	GElf_Addr note_vaddr;
	size_t root_len;
	int fd;

	/* Without a build-id nothing can prove a candidate belongs to this file. */
	want.build_id_len = dwfl_module_build_id(mod, &want.build_id, &note_vaddr);
	if (want.build_id_len <= 0)
		return -1;
	fd = in_extra_dirs(debuglink_file, &want, debuginfo_file_name);
	if (fd < 0)
		fd = by_build_id("", 0, &want, debuginfo_file_name);
	if (fd >= 0 || !file_name)
		return fd;
	root_len = root_prefix_len(file_name);
	if (root_len)
		fd = by_build_id(file_name, root_len, &want, debuginfo_file_name);
	if (fd < 0 && debuglink_file)
		fd = by_debuglink(file_name, debuglink_file, &want, debuginfo_file_name);
	return fd;
}
