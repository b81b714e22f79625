#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "daemon/proc_identity.h"

int proc_identity_parse_stat(const char *text, struct proc_identity *out)
{
	const char *open = strchr(text, '('), *close = strrchr(text, ')'), *p;
	unsigned long long start;
	size_t n;
	int field;

	/* comm may itself contain ')' or spaces: it runs to the last ')'. */
	if (!open || !close || close < open)
		return -EINVAL;
	n = close - open - 1;
	if (n >= sizeof(out->comm))
		n = sizeof(out->comm) - 1;
	memcpy(out->comm, open + 1, n);
	out->comm[n] = '\0';

	/* starttime is field 22; field 3 (state) follows ") ". Each step moves past one space
	 * onto the next field's first character. */
	p = close + 1;
	for (field = 3; field <= 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EINVAL;
		p++;
	}
	if (sscanf(p, "%llu", &start) != 1)
		return -EINVAL;
	out->start_time = start;
	return 0;
}

int proc_identity_parse_status(const char *text, pid_t *tgid, struct proc_identity *out)
{
	const char *line;
	unsigned r, e, s, g;
	int tg;

	line = strstr(text, "\nTgid:");
	if (!line || sscanf(line, "\nTgid: %d", &tg) != 1)
		return -EINVAL;
	line = strstr(text, "\nUid:");
	if (!line || sscanf(line, "\nUid: %u %u %u", &r, &e, &s) != 3)
		return -EINVAL;
	line = strstr(text, "\nGid:");
	if (!line || sscanf(line, "\nGid: %u", &g) != 1)
		return -EINVAL;
	*tgid = tg;
	out->ruid = r;
	out->euid = e;
	out->suid = s;
	out->rgid = g;
	return 0;
}

int proc_read_file(pid_t pid, const char *name, char *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? -ENOENT : -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return n == 0 ? -ENOENT : (errno == ESRCH ? -ENOENT : -errno);
	buf[n] = '\0';
	return 0;
}

int proc_tgid(pid_t tid, pid_t *tgid)
{
	struct proc_identity unused;
	char buf[4096];
	int err;

	if (tid <= 0)
		return -ENOENT;
	err = proc_read_file(tid, "status", buf, sizeof(buf));
	return err ? err : proc_identity_parse_status(buf, tgid, &unused);
}

int proc_identity_read(pid_t pid, struct proc_identity *out)
{
	char buf[4096];
	pid_t tgid;
	int err;

	if (pid <= 0)
		return -ENOENT;
	err = proc_read_file(pid, "status", buf, sizeof(buf));
	if (err)
		return err;
	err = proc_identity_parse_status(buf, &tgid, out);
	if (err)
		return err;
	if (tgid != pid)
		return -ENOENT;
	err = proc_read_file(pid, "stat", buf, sizeof(buf));
	if (err)
		return err;
	return proc_identity_parse_stat(buf, out);
}
