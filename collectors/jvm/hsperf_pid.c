/* Which process a HotSpot perf data file (/tmp/hsperfdata_<user>/<pid>) belongs to. The name is
 * the JVM's pid in its own pid namespace, and the JVM keeps the file mapped for its life. But
 * a killed JVM leaves its file behind for a later process to reuse the pid, processes in
 * different pid namespaces can share one /tmp, and anyone may plant a file in a folder of
 * their own; believing a wrong pid would make an `enable` send SIGQUIT (the attach signal) to
 * a process that dies of it. So a process owns the file only if it has that pid in its own
 * namespace, reaches the very file through its own root, and has it open or mapped. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "collectors/jvm/jvm_internal.h"
#include "symbols/read_file.h"

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Whether one of the links in /proc/<pid>/<folder> (fd or map_files) leads to file. */
static bool links_to(pid_t pid, const char *folder, const struct stat *file)
{
	char path[64];
	struct dirent *de;
	struct stat st;
	bool found = false;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, folder);
	d = opendir(path);
	if (!d)
		return false;
	while (!found && (de = readdir(d)))
		found = de->d_name[0] != '.' && !fstatat(dirfd(d), de->d_name, &st, 0) &&
			same_file(&st, file);
	closedir(d);
	return found;
}

/* rel: the file's path under /tmp. A starting JVM has the file open before it maps it; a
 * running one has it mapped and few fds open, a busy one many, so mappings go first. */
static bool owns(pid_t pid, const char *rel, const struct stat *file)
{
	char path[4200];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/root/tmp/%s", (int)pid, rel);
	if (stat(path, &st) || !same_file(&st, file))
		return false;
	return links_to(pid, "map_files", file) || links_to(pid, "fd", file);
}

static int pidns_of(pid_t pid, ino_t *ino)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	if (stat(path, &st))
		return -errno;
	*ino = st.st_ino;
	return 0;
}

static int procs_push(struct hsperf_procs *p, pid_t pid, pid_t nspid)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 256;
		struct hsperf_proc *bigger = realloc(p->v, cap * sizeof(*p->v));

		if (!bigger)
			return -ENOMEM;
		p->v = bigger;
		p->cap = cap;
	}
	p->v[p->n].pid = pid;
	p->v[p->n++].nspid = nspid;
	return 0;
}

/* A process in /proc's own pid namespace is its own nspid, which a stat tells; only the others'
 * status files are read. */
static int procs_read(struct hsperf_procs *p)
{
	struct dirent *de;
	ino_t self, ns;
	int err = 0;
	DIR *d;

	err = pidns_of(getpid(), &self);
	if (err)
		return err;
	d = opendir("/proc");
	if (!d)
		return -errno;
	while (!err && (de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		pid_t nspid;

		if (*end || pid <= 0 || pidns_of(pid, &ns))
			continue;
		if (ns == self)
			nspid = pid;
		else if (proc_nspid(pid, &nspid))
			continue;
		err = procs_push(p, pid, nspid);
	}
	closedir(d);
	if (!err)
		p->read = true;
	return err;
}

void hsperf_procs_free(struct hsperf_procs *p)
{
	free(p->v);
	memset(p, 0, sizeof(*p));
}

int hsperf_owner(struct hsperf_procs *procs, const char *rel, const struct stat *file,
		 pid_t nspid, pid_t *pid)
{
	bool tried = false;
	ino_t self, ns;
	int err;

	/* Most JVMs share the daemon's pid namespace: then the name is the pid. */
	err = pidns_of(getpid(), &self);
	if (err)
		return err;
	if (!pidns_of(nspid, &ns) && ns == self) {
		if (owns(nspid, rel, file)) {
			*pid = nspid;
			return 0;
		}
		tried = true;
	}
	if (!procs->read) {
		err = procs_read(procs);
		if (err)
			return err;
	}
	for (size_t i = 0; i < procs->n; i++) {
		if (procs->v[i].nspid != nspid || (tried && procs->v[i].pid == nspid))
			continue;
		if (owns(procs->v[i].pid, rel, file)) {
			*pid = procs->v[i].pid;
			return 0;
		}
	}
	return -ESRCH;
}

int hsperf_procs_find_root(struct hsperf_procs *procs, dev_t dev, ino_t ino, pid_t *pid)
{
	char path[64];
	struct stat st;
	int err;

	if (!procs->read) {
		err = procs_read(procs);
		if (err)
			return err;
	}
	for (size_t i = 0; i < procs->n; i++) {
		snprintf(path, sizeof(path), "/proc/%d/root/tmp", (int)procs->v[i].pid);
		if (!stat(path, &st) && st.st_dev == dev && st.st_ino == ino) {
			*pid = procs->v[i].pid;
			return 0;
		}
	}
	return -ESRCH;
}
