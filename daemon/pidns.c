#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "daemon/pidns.h"
#include "daemon/proc_identity.h"

struct pidns {
	pthread_mutex_t lock;
	uint64_t own;                         /* the daemon's namespace (inode of ns/pid) */
	uint64_t ns[PIDNS_VIEWS_MAX + 1];     /* ns[view]; [0] = own */
	uint32_t nviews;
};

static int ns_of(const char *path, uint64_t *ino)
{
	struct stat st;

	if (stat(path, &st))
		return errno == ENOENT || errno == ESRCH ? -ENOENT : -errno;
	*ino = st.st_ino;
	return 0;
}

int pidns_new(struct pidns **out)
{
	struct pidns *p = calloc(1, sizeof(*p));
	int err;

	if (!p)
		return -ENOMEM;
	err = ns_of("/proc/self/ns/pid", &p->own);
	if (err) {
		free(p);
		return err;
	}
	pthread_mutex_init(&p->lock, NULL);
	p->ns[0] = p->own;
	p->nviews = 1;
	*out = p;
	return 0;
}

void pidns_free(struct pidns *p)
{
	if (!p)
		return;
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int pidns_view_of(struct pidns *p, pid_t pid, uint32_t *view)
{
	char path[64];
	uint64_t ino = 0;
	int err;

	*view = 0;
	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	err = ns_of(path, &ino);
	if (err)
		return err;
	pthread_mutex_lock(&p->lock);
	for (uint32_t v = 0; v < p->nviews; v++)
		if (p->ns[v] == ino) {
			*view = v;
			goto out;
		}
	if (p->nviews > PIDNS_VIEWS_MAX) {
		err = -ENOSPC;
		goto out;
	}
	p->ns[p->nviews] = ino;
	*view = p->nviews++;
out:
	pthread_mutex_unlock(&p->lock);
	return err;
}

int pidns_parse_nspid(const char *status, pid_t *out)
{
	const char *line = strstr(status, "\nNSpid:");
	const char *end;
	long last = -1;
	char *next;

	if (!line)
		return -ENOENT;
	line += strlen("\nNSpid:");
	end = strchr(line, '\n');
	for (const char *s = line; !end || s < end;) {
		long v = strtol(s, &next, 10);

		if (next == s)
			break;
		last = v;
		s = next;
	}
	if (last <= 0)
		return -ENOENT;
	*out = last;
	return 0;
}

int pidns_to_view(struct pidns *p, uint32_t view, pid_t tgid, pid_t host, pid_t *out)
{
	char path[64], name[64], status[4096];
	uint64_t want, ino = 0;
	int err;

	if (view == 0) {
		*out = host;
		return 0;
	}
	pthread_mutex_lock(&p->lock);
	want = view < p->nviews ? p->ns[view] : 0;
	pthread_mutex_unlock(&p->lock);
	if (!want)
		return -ENOENT;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)(tgid > 0 ? tgid : host));
	err = ns_of(path, &ino);
	if (err)
		return err;
	if (ino != want)
		return -ENOENT;
	snprintf(name, sizeof(name), "task/%d/status", (int)host);
	err = proc_read_file(tgid > 0 ? tgid : host, tgid > 0 ? name : "status", status,
			     sizeof(status));
	return err ? err : pidns_parse_nspid(status, out);
}
