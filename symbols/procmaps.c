// SPDX-License-Identifier: GPL-2.0
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbols/procmaps.h"
#include "symbols/read_file.h"

static const char deleted_suffix[] = " (deleted)";

/* Reads one hex or decimal number at *p; the kernel prints these without prefixes. */
static int parse_num(const char **p, const char *end, int base, uint64_t *out)
{
	uint64_t v = 0;
	const char *s = *p;

	if (s == end)
		return -EINVAL;
	for (; s < end; s++) {
		unsigned int d;

		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			break;
		if (v > (UINT64_MAX - d) / base)
			return -EINVAL;
		v = v * base + d;
	}
	if (s == *p)
		return -EINVAL;
	*p = s;
	*out = v;
	return 0;
}

static int expect(const char **p, const char *end, char c)
{
	if (*p == end || **p != c)
		return -EINVAL;
	(*p)++;
	return 0;
}

static void skip_spaces(const char **p, const char *end)
{
	while (*p < end && **p == ' ')
		(*p)++;
}

int procmaps_parse_line(const char *line, size_t len, struct procmap *out)
{
	const char *p = line, *end = line + len;
	uint64_t major, minor;
	size_t path_len;

	memset(out, 0, sizeof(*out));
	if (parse_num(&p, end, 16, &out->start) || expect(&p, end, '-') ||
	    parse_num(&p, end, 16, &out->end) || expect(&p, end, ' '))
		return -EINVAL;
	if (end - p < 5 || p[4] != ' ')
		return -EINVAL;
	memcpy(out->perms, p, 4);
	out->perms[4] = '\0';
	p += 5;
	if (parse_num(&p, end, 16, &out->pgoff) || expect(&p, end, ' ') ||
	    parse_num(&p, end, 16, &major) || expect(&p, end, ':') ||
	    parse_num(&p, end, 16, &minor) || expect(&p, end, ' ') ||
	    parse_num(&p, end, 10, &out->inode))
		return -EINVAL;
	if (out->end < out->start || major > UINT32_MAX || minor > UINT32_MAX)
		return -EINVAL;
	out->dev_major = major;
	out->dev_minor = minor;

	/* The kernel pads to a column before a path; everything after the padding is the path,
	 * spaces included. */
	if (p < end && *p != ' ')
		return -EINVAL;
	skip_spaces(&p, end);
	path_len = end - p;
	if (path_len >= sizeof(deleted_suffix) - 1 &&
	    !memcmp(end - (sizeof(deleted_suffix) - 1), deleted_suffix,
		    sizeof(deleted_suffix) - 1)) {
		out->deleted = true;
		path_len -= sizeof(deleted_suffix) - 1;
	}
	out->path = strndup(p, path_len);
	if (!out->path)
		return -ENOMEM;
	return 0;
}

void procmaps_free(struct procmaps *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->maps[i].path);
	free(m->maps);
	m->maps = NULL;
	m->n = 0;
}

int procmaps_parse(const char *text, size_t len, struct procmaps *out)
{
	const char *p = text, *end = text + len;
	size_t cap = 0, n = 0;
	struct procmap *maps = NULL;
	int err = 0;

	out->maps = NULL;
	out->n = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', end - p);
		const char *line_end = nl ? nl : end;

		if (n == cap) {
			size_t new_cap = cap ? cap * 2 : 64;
			struct procmap *grown = reallocarray(maps, new_cap, sizeof(*maps));

			if (!grown) {
				err = -ENOMEM;
				goto err_free;
			}
			maps = grown;
			cap = new_cap;
		}
		err = procmaps_parse_line(p, line_end - p, &maps[n]);
		if (err)
			goto err_free;
		n++;
		p = nl ? nl + 1 : end;
	}
	out->maps = maps;
	out->n = n;
	return 0;

err_free:
	out->maps = maps;
	out->n = n;
	procmaps_free(out);
	return err;
}

/* Whether pid's thread-group leader has exited (a zombie) or pid does not exist. */
static bool leader_gone(pid_t pid)
{
	char path[64], *text, *state;
	size_t len;
	bool gone;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_file(path, &text, &len))
		return true;
	/* The state follows the last ')': the name may hold one. */
	state = memrchr(text, ')', len);
	gone = !state || text + len - state < 3 || state[2] == 'Z' || state[2] == 'X';
	free(text);
	return gone;
}

/* A live thread of pid other than its leader: 0, or -ESRCH. A thread that dies meanwhile
 * just yields empty maps, as an exiting process does. */
static int live_thread(pid_t pid, pid_t *tid)
{
	char path[64];
	struct dirent *d;
	DIR *tasks;
	int err = -ESRCH;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	tasks = opendir(path);
	if (!tasks)
		return -ESRCH;
	while (err && (d = readdir(tasks))) {
		char *end;
		long id = strtol(d->d_name, &end, 10);

		if (*end || id <= 0 || id == pid || leader_gone(id))
			continue;
		*tid = id;
		err = 0;
	}
	closedir(tasks);
	return err;
}

int procmaps_reader(pid_t pid, pid_t *reader)
{
	*reader = pid;
	return leader_gone(pid) ? live_thread(pid, reader) : 0;
}

int procmaps_check_access(pid_t pid)
{
	char path[64];
	pid_t reader;
	int fd;

	if (procmaps_reader(pid, &reader))
		return 0;
	/* The kernel checks ptrace read access at open. */
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)reader);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == EACCES || errno == EPERM ? -errno : 0;
	close(fd);
	return 0;
}

static int read_maps(pid_t reader, char **text, size_t *len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)reader);
	return read_file(path, text, len);
}

int procmaps_read(pid_t pid, struct procmaps *out)
{
	char *text;
	size_t len;
	int err;

	*out = (struct procmaps){ .reader = pid };
	err = read_maps(pid, &text, &len);
	/* Empty: a kernel thread, a zombie, or a leader that exited while its threads run on,
	 * whose address space only their own directories show. */
	if (!err && len == 0 && leader_gone(pid)) {
		free(text);
		err = live_thread(pid, &out->reader);
		if (!err)
			err = read_maps(out->reader, &text, &len);
	}
	/* A live process whose mappings we may not see (ptrace access refused): it is still
	 * profiled, without names. */
	if (err == -EACCES || err == -EPERM) {
		out->unreadable = err;
		return 0;
	}
	if (err)
		return err == -ENOENT ? -ESRCH : err;
	err = procmaps_parse(text, len, out);
	free(text);
	return err;
}
