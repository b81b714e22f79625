/* The hsperfdata watch (hsperf_watch.h). One thread waits on an epoll set of: the inotify
 * instance, an eventfd that brings processes noted and the stop, and a pidfd per JVM found, so
 * a JVM killed before it could remove its file leaves the set at once. Once started, only that
 * thread touches the filesystem (a container's root may be slow or hung) and owns roots and
 * folders; the lock covers only what other threads read or hand over, so no reader (a FUSE
 * thread) waits on a filesystem.
 * Roots are reached through /proc/<pid>/root of a process in them, never through an fd of ours:
 * an open fd would keep a dead container's /tmp mounted, while a watch lets it go (IN_IGNORED)
 * and so frees its slot. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uthash.h>
#include "collectors/jvm/hsperf_watch.h"
#include "collectors/jvm/jvm_internal.h"

#define PREFIX "hsperfdata_"
#define TMP_MASK (IN_CREATE | IN_MOVED_TO | IN_ONLYDIR)
/* A JVM creates its file, writes it, then maps it: the write is a second look at a file whose
 * creation was seen before its owner had it open. */
#define FOLDER_MASK (IN_CREATE | IN_MODIFY | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR)
/* pids noted and not yet looked at: more wait for the next listing */
#define MAX_NOTED 65536

/* What an epoll event is, in the low bits of its data; a pidfd's pid above them. */
enum { EV_INOTIFY, EV_WAKE, EV_PIDFD, EV_BITS = 2 };

struct root {
	bool used;
	dev_t dev;
	ino_t ino;                /* its /tmp */
	pid_t ref;                /* a process in it; 0: the daemon itself */
};

/* A watched folder: a root's /tmp, or an hsperfdata folder in it. */
struct folder {
	int wd;
	int root;
	char name[NAME_MAX + 1];  /* under /tmp; "" for /tmp itself */
	UT_hash_handle hh;
};

struct jvm {
	pid_t pid, nspid;         /* on the host; its file's name */
	int wd;                   /* the folder of its file */
	int pidfd;
	unsigned gen;             /* the rescan that last saw its file */
	UT_hash_handle hh;
};

struct hsperf_watch {
	pthread_t thread;
	bool running;
	int ifd, efd, epfd;

	/* The thread's own. */
	struct root roots[HSPERF_MAX_ROOTS];
	struct folder *folders;   /* by wd */
	unsigned nfolders;
	unsigned gen;
	uint64_t rescans, over_limit;

	pthread_mutex_t lock;     /* what follows; jvms changes only in the thread */
	bool stop;
	struct jvm *jvms;         /* by host pid */
	unsigned njvms;
	pid_t *noted;             /* for the thread to look at */
	size_t nnoted;
	struct hsperf_watch_stats shown; /* all but jvms, as of the thread's last round */
};

/* path = root r's /tmp, then /rel if rel is not "". The process r was reached through may be
 * gone and its pid reused: another in the same root takes over; -ESRCH when none is left. */
static int root_path(struct hsperf_watch *w, int r, const char *rel, struct hsperf_procs *procs,
		     char *path, size_t len)
{
	struct root *rt = &w->roots[r];
	const char *sep = *rel ? "/" : "";
	char tmp[64];
	struct stat st;

	if (!rt->ref) {
		snprintf(path, len, "/tmp%s%s", sep, rel);
		return 0;
	}
	snprintf(tmp, sizeof(tmp), "/proc/%d/root/tmp", (int)rt->ref);
	if ((stat(tmp, &st) || st.st_dev != rt->dev || st.st_ino != rt->ino) &&
	    hsperf_procs_find_root(procs, rt->dev, rt->ino, &rt->ref))
		return -ESRCH;
	snprintf(path, len, "/proc/%d/root/tmp%s%s", (int)rt->ref, sep, rel);
	return 0;
}

static struct jvm *jvm_find(struct hsperf_watch *w, int wd, pid_t nspid)
{
	struct jvm *j, *tmp;

	HASH_ITER(hh, w->jvms, j, tmp)
		if (j->wd == wd && j->nspid == nspid)
			return j;
	return NULL;
}

static void jvm_drop(struct hsperf_watch *w, struct jvm *j)
{
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, j->pidfd, NULL);
	close(j->pidfd);
	pthread_mutex_lock(&w->lock);
	HASH_DEL(w->jvms, j);
	w->njvms--;
	pthread_mutex_unlock(&w->lock);
	free(j);
}

/* The file named nspid in folder f: a JVM once its owner is found. */
static int jvm_add(struct hsperf_watch *w, struct folder *f, pid_t nspid,
		   struct hsperf_procs *procs)
{
	struct epoll_event ev = { .events = EPOLLIN };
	char rel[NAME_MAX + 16], path[PATH_MAX];
	struct jvm *j = jvm_find(w, f->wd, nspid);
	struct stat st;
	pid_t pid;
	int err, fd;

	if (j) {
		j->gen = w->gen;
		return 0;
	}
	snprintf(rel, sizeof(rel), "%s/%d", f->name, (int)nspid);
	err = root_path(w, f->root, rel, procs, path, sizeof(path));
	if (err)
		return err;
	if (stat(path, &st))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	err = hsperf_owner(procs, rel, &st, nspid, &pid);
	if (err)
		return err;
	HASH_FIND_INT(w->jvms, &pid, j);
	if (j)
		return 0;
	if (w->njvms >= HSPERF_MAX_JVMS) {
		w->over_limit++;
		return -ENOSPC;
	}
	/* pid owned the file just now: for it to name another process already, the pid space
	 * would have had to wrap around in between. */
	fd = pidfd_open(pid, 0);
	if (fd < 0)
		return -errno;
	j = calloc(1, sizeof(*j));
	if (!j) {
		err = -ENOMEM;
		goto fail;
	}
	ev.data.u64 = (uint64_t)pid << EV_BITS | EV_PIDFD;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		err = -errno;
		goto fail;
	}
	j->pid = pid;
	j->nspid = nspid;
	j->wd = f->wd;
	j->pidfd = fd;
	j->gen = w->gen;
	pthread_mutex_lock(&w->lock);
	HASH_ADD_INT(w->jvms, pid, j);
	w->njvms++;
	pthread_mutex_unlock(&w->lock);
	return 0;
fail:
	free(j);
	close(fd);
	return err;
}

static pid_t parse_pid(const char *name)
{
	char *end;
	long v = strtol(name, &end, 10);

	return *name >= '1' && *name <= '9' && !*end && v <= INT_MAX ? (pid_t)v : 0;
}

/* The JVMs whose files are in folder f already (those made before the watch). */
static int folder_scan(struct hsperf_watch *w, struct folder *f, struct hsperf_procs *procs)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int err;

	err = root_path(w, f->root, f->name, procs, path, sizeof(path));
	if (err)
		return err;
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		pid_t nspid = parse_pid(de->d_name);

		if (nspid)
			jvm_add(w, f, nspid, procs);
	}
	closedir(d);
	return 0;
}

static struct folder *folder_new(struct hsperf_watch *w, int wd, int r, const char *name)
{
	struct folder *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->wd = wd;
	f->root = r;
	snprintf(f->name, sizeof(f->name), "%s", name);
	HASH_ADD_INT(w->folders, wd, f);
	w->nfolders++;
	return f;
}

/* Watches the hsperfdata folder name in root r, then reads what it holds. A folder watched
 * already (a rescan) is read again. */
static int folder_add(struct hsperf_watch *w, int r, const char *name, struct hsperf_procs *procs)
{
	char path[PATH_MAX];
	struct folder *f;
	int err, wd;

	err = root_path(w, r, name, procs, path, sizeof(path));
	if (err)
		return err;
	wd = inotify_add_watch(w->ifd, path, FOLDER_MASK);
	if (wd < 0)
		return -errno;
	HASH_FIND_INT(w->folders, &wd, f);
	if (!f && w->nfolders >= HSPERF_MAX_FOLDERS) {
		inotify_rm_watch(w->ifd, wd);
		w->over_limit++;
		return -ENOSPC;
	}
	if (!f && !(f = folder_new(w, wd, r, name))) {
		inotify_rm_watch(w->ifd, wd);
		return -ENOMEM;
	}
	return folder_scan(w, f, procs);
}

/* The hsperfdata folders in root r's /tmp. */
static int tmp_scan(struct hsperf_watch *w, int r, struct hsperf_procs *procs)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int err;

	err = root_path(w, r, "", procs, path, sizeof(path));
	if (err)
		return err;
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, PREFIX, strlen(PREFIX)) &&
		    (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN))
			folder_add(w, r, de->d_name, procs);
	closedir(d);
	return 0;
}

static void folder_drop(struct hsperf_watch *w, struct folder *f)
{
	struct jvm *j, *tmp;

	HASH_ITER(hh, w->jvms, j, tmp)
		if (j->wd == f->wd)
			jvm_drop(w, j);
	HASH_DEL(w->folders, f);
	free(f);
	w->nfolders--;
}

/* Forgets root r. Its watches may be gone already (its /tmp was unmounted): removing them
 * again fails harmlessly. */
static void root_drop(struct hsperf_watch *w, int r)
{
	struct folder *f, *tmp;

	HASH_ITER(hh, w->folders, f, tmp) {
		if (f->root != r)
			continue;
		inotify_rm_watch(w->ifd, f->wd);
		folder_drop(w, f);
	}
	w->roots[r].used = false;
}

/* Watches the /tmp of ref's root (0: the daemon's own), unless it is watched already. */
static int root_add(struct hsperf_watch *w, pid_t ref, struct hsperf_procs *procs)
{
	char path[64];
	struct folder *f;
	struct stat st;
	int r, wd, err;

	if (ref)
		snprintf(path, sizeof(path), "/proc/%d/root/tmp", (int)ref);
	else
		snprintf(path, sizeof(path), "/tmp");
	for (r = 0; r < HSPERF_MAX_ROOTS && w->roots[r].used; r++)
		;
	if (r == HSPERF_MAX_ROOTS || w->nfolders >= HSPERF_MAX_FOLDERS) {
		w->over_limit++;
		return -ENOSPC;
	}
	wd = inotify_add_watch(w->ifd, path, TMP_MASK);
	if (wd < 0)
		return -errno;
	HASH_FIND_INT(w->folders, &wd, f);
	if (f)
		return 0;
	/* After the watch: what is recorded is what is watched, whatever ref became. */
	if (stat(path, &st)) {
		err = -errno;
		goto fail;
	}
	if (!folder_new(w, wd, r, "")) {
		err = -ENOMEM;
		goto fail;
	}
	w->roots[r] = (struct root){ .used = true, .dev = st.st_dev, .ino = st.st_ino,
				     .ref = ref };
	err = tmp_scan(w, r, procs);
	if (err == -ESRCH)
		root_drop(w, r);
	return err;
fail:
	inotify_rm_watch(w->ifd, wd);
	return err;
}

/* Events were lost: read every root again, and forget the JVMs whose files are gone. */
static void rescan(struct hsperf_watch *w, struct hsperf_procs *procs)
{
	struct jvm *j, *tmp;

	w->gen++;
	w->rescans++;
	for (int r = 0; r < HSPERF_MAX_ROOTS; r++)
		if (w->roots[r].used && tmp_scan(w, r, procs) == -ESRCH)
			root_drop(w, r);
	HASH_ITER(hh, w->jvms, j, tmp)
		if (j->gen != w->gen)
			jvm_drop(w, j);
}

static void handle_event(struct hsperf_watch *w, const struct inotify_event *ev,
			 struct hsperf_procs *procs)
{
	struct folder *f;
	struct jvm *j;
	pid_t nspid;

	if (ev->mask & IN_Q_OVERFLOW) {
		rescan(w, procs);
		return;
	}
	HASH_FIND_INT(w->folders, &ev->wd, f);
	if (!f)
		return;
	if (ev->mask & IN_IGNORED) {
		if (f->name[0])
			folder_drop(w, f);
		else
			root_drop(w, f->root);
		return;
	}
	if (!ev->len)
		return;
	if (!f->name[0]) {
		if ((ev->mask & IN_ISDIR) && !strncmp(ev->name, PREFIX, strlen(PREFIX)))
			folder_add(w, f->root, ev->name, procs);
		return;
	}
	nspid = parse_pid(ev->name);
	if (!nspid || (ev->mask & IN_ISDIR))
		return;
	if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
		j = jvm_find(w, f->wd, nspid);
		if (j)
			jvm_drop(w, j);
	} else {
		jvm_add(w, f, nspid, procs);
	}
}

static void read_events(struct hsperf_watch *w, struct hsperf_procs *procs)
{
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t len = read(w->ifd, buf, sizeof(buf));

	for (char *p = buf; len > 0 && p < buf + len;) {
		const struct inotify_event *ev = (const struct inotify_event *)p;

		handle_event(w, ev, procs);
		p += sizeof(*ev) + ev->len;
	}
}

static bool root_known(struct hsperf_watch *w, const struct stat *st)
{
	for (int r = 0; r < HSPERF_MAX_ROOTS; r++)
		if (w->roots[r].used && w->roots[r].dev == st->st_dev &&
		    w->roots[r].ino == st->st_ino)
			return true;
	return false;
}

/* The roots of the processes noted, those new to the watch added. */
static void take_noted(struct hsperf_watch *w, struct hsperf_procs *procs)
{
	struct stat st, last = {0};
	char path[64];
	eventfd_t v;
	pid_t *pids;
	size_t n;

	eventfd_read(w->efd, &v);
	pthread_mutex_lock(&w->lock);
	pids = w->noted;
	n = w->nnoted;
	w->noted = NULL;
	w->nnoted = 0;
	pthread_mutex_unlock(&w->lock);
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "/proc/%d/root/tmp", (int)pids[i]);
		if (stat(path, &st) || !S_ISDIR(st.st_mode))
			continue;
		/* Most processes share a root: the one just seen needs no second look. */
		if (st.st_dev == last.st_dev && st.st_ino == last.st_ino)
			continue;
		last = st;
		if (!root_known(w, &st))
			root_add(w, pids[i], procs);
	}
	free(pids);
}

/* Makes the thread's figures readable. */
static void publish(struct hsperf_watch *w)
{
	struct hsperf_watch_stats s = {
		.folders = w->nfolders,
		.rescans = w->rescans,
		.over_limit = w->over_limit,
	};

	for (int r = 0; r < HSPERF_MAX_ROOTS; r++)
		s.roots += w->roots[r].used;
	pthread_mutex_lock(&w->lock);
	w->shown = s;
	pthread_mutex_unlock(&w->lock);
}

static void *watch_main(void *arg)
{
	struct hsperf_watch *w = arg;
	struct epoll_event evs[16];
	bool stop = false;

	while (!stop) {
		struct hsperf_procs procs = {0};
		int n = epoll_wait(w->epfd, evs, 16, -1);

		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++) {
			uint64_t data = evs[i].data.u64;

			if ((data & ((1 << EV_BITS) - 1)) == EV_INOTIFY) {
				read_events(w, &procs);
			} else if ((data & ((1 << EV_BITS) - 1)) == EV_WAKE) {
				take_noted(w, &procs);
			} else {
				pid_t pid = data >> EV_BITS;
				struct jvm *j;

				HASH_FIND_INT(w->jvms, &pid, j);
				if (j)
					jvm_drop(w, j);
			}
		}
		hsperf_procs_free(&procs);
		publish(w);
		pthread_mutex_lock(&w->lock);
		stop = w->stop;
		pthread_mutex_unlock(&w->lock);
	}
	return NULL;
}

static int watch_fd(int epfd, int fd, uint64_t data)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = data };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

int hsperf_watch_new(struct hsperf_watch **out, char *why, size_t whylen)
{
	struct hsperf_watch *w = calloc(1, sizeof(*w));
	struct hsperf_procs procs = {0};
	int err;

	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->ifd < 0 || w->efd < 0 || w->epfd < 0) {
		err = -errno;
		snprintf(why, whylen, "%s: %s", w->ifd < 0 ? "inotify_init1" : "epoll/eventfd",
			 strerror(-err));
		goto fail;
	}
	err = watch_fd(w->epfd, w->ifd, EV_INOTIFY);
	if (!err)
		err = watch_fd(w->epfd, w->efd, EV_WAKE);
	if (err) {
		snprintf(why, whylen, "epoll_ctl: %s", strerror(-err));
		goto fail;
	}
	/* The daemon's own root from the start: the host's JVMs need no listing. */
	err = root_add(w, 0, &procs);
	hsperf_procs_free(&procs);
	publish(w);
	if (err) {
		snprintf(why, whylen, "watching /tmp: %s", strerror(-err));
		goto fail;
	}
	err = -pthread_create(&w->thread, NULL, watch_main, w);
	if (err) {
		snprintf(why, whylen, "pthread_create: %s", strerror(-err));
		goto fail;
	}
	w->running = true;
	*out = w;
	return 0;
fail:
	hsperf_watch_free(w);
	return err;
}

void hsperf_watch_free(struct hsperf_watch *w)
{
	struct folder *f, *ftmp;
	struct jvm *j, *jtmp;

	if (!w)
		return;
	if (w->running) {
		pthread_mutex_lock(&w->lock);
		w->stop = true;
		pthread_mutex_unlock(&w->lock);
		eventfd_write(w->efd, 1);
		pthread_join(w->thread, NULL);
	}
	HASH_ITER(hh, w->jvms, j, jtmp)
		jvm_drop(w, j);
	HASH_ITER(hh, w->folders, f, ftmp)
		folder_drop(w, f);
	if (w->ifd >= 0)
		close(w->ifd);
	if (w->efd >= 0)
		close(w->efd);
	if (w->epfd >= 0)
		close(w->epfd);
	free(w->noted);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

void hsperf_watch_note(struct hsperf_watch *w, const pid_t *pids, size_t n)
{
	pid_t *v;

	if (!w || !n)
		return;
	pthread_mutex_lock(&w->lock);
	if (w->nnoted + n <= MAX_NOTED && (v = realloc(w->noted, (w->nnoted + n) * sizeof(*v)))) {
		memcpy(v + w->nnoted, pids, n * sizeof(*v));
		w->noted = v;
		w->nnoted += n;
	}
	pthread_mutex_unlock(&w->lock);
	eventfd_write(w->efd, 1);
}

bool hsperf_watch_has(struct hsperf_watch *w, pid_t pid)
{
	struct jvm *j;

	if (!w)
		return false;
	pthread_mutex_lock(&w->lock);
	HASH_FIND_INT(w->jvms, &pid, j);
	pthread_mutex_unlock(&w->lock);
	return j != NULL;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

int hsperf_watch_snapshot(struct hsperf_watch *w, struct hsperf_watch_stats *s, pid_t **pids)
{
	struct jvm *j, *tmp;
	pid_t *v;

	memset(s, 0, sizeof(*s));
	*pids = NULL;
	if (!w)
		return 0;
	pthread_mutex_lock(&w->lock);
	v = malloc((w->njvms + 1) * sizeof(*v));
	if (!v) {
		pthread_mutex_unlock(&w->lock);
		return -ENOMEM;
	}
	*s = w->shown;
	HASH_ITER(hh, w->jvms, j, tmp)
		v[s->jvms++] = j->pid;
	pthread_mutex_unlock(&w->lock);
	qsort(v, s->jvms, sizeof(*v), cmp_pid);
	*pids = v;
	return 0;
}
