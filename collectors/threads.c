#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include "collectors/threads.h"

/* glibc's pthread_mutex_t (struct __pthread_mutex_s): the futex word __lock at offset 0, and
 * the owner's tid __owner at offset 8, on every 64-bit architecture glibc supports. */
#define MUTEX_OWNER_OFFSET 8

/* Read every second for each thread of each enabled target: no stdio buffer. */
static int read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0;
	ssize_t n = 0;

	if (fd < 0)
		return -errno;
	while (got < len - 1 && (n = read(fd, buf + got, len - 1 - got)) > 0)
		got += n;
	close(fd);
	buf[got] = '\0';
	return n < 0 ? -EIO : 0;
}

int threads_parse_stat(const char *text, long ticks, struct thread_info *t)
{
	unsigned long long utime, stime, start;
	const char *name = strchr(text, '('), *p = strrchr(text, ')');

	/* The name may hold spaces and parentheses: the fields follow the last ')'. */
	if (!name || !p || p < name || ticks <= 0 || !p[1] ||
	    sscanf(p + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
		   "%*d %*d %llu", &t->state, &utime, &stime, &start) != 4)
		return -EINVAL;
	t->utime_us = utime / ticks * 1000000 + utime % ticks * 1000000 / ticks;
	t->stime_us = stime / ticks * 1000000 + stime % ticks * 1000000 / ticks;
	t->started_us = start / ticks * 1000000 + start % ticks * 1000000 / ticks;
	/* The same bytes as the comm file, which is not read as well. */
	snprintf(t->name, sizeof(t->name), "%.*s", (int)(p - name - 1), name + 1);
	return 0;
}

/* Name, state and CPU time from /proc/<pid>/task/<tid>/stat. */
static int read_stat(pid_t pid, struct thread_info *t)
{
	static long ticks;
	char path[64], buf[1024];

	if (!ticks)
		ticks = sysconf(_SC_CLK_TCK);
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)t->tid);
	if (read_small(path, buf, sizeof(buf)))
		return -ENOENT;
	if (threads_parse_stat(buf, ticks, t))
		return -EIO;
	return 0;
}

char *threads_parse_kstack(char *text)
{
	char *frames[64], *out = NULL, *line, *save = NULL;
	size_t n = 0, len = 0;

	for (line = strtok_r(text, "\n", &save); line && n < 64;
	     line = strtok_r(NULL, "\n", &save)) {
		char *name = strstr(line, "] ");

		if (!name)
			continue;
		name += 2;
		name[strcspn(name, "+ ;")] = '\0';
		if (!*name)
			continue;
		frames[n++] = name;
		len += strlen(name) + 5;
	}
	if (n)
		out = calloc(1, len + 1);
	for (size_t i = n; out && i-- > 0;) {
		strcat(out, frames[i]);
		strcat(out, i ? "_[k];" : "_[k]");
	}
	return out;
}

/* /proc/<pid>/task/<tid>/stack (root only), leaf first, into frames root first. */
static char *read_kstack(pid_t pid, pid_t tid)
{
	char path[64], buf[8192];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stack", (int)pid, (int)tid);
	if (read_small(path, buf, sizeof(buf)))
		return NULL;
	return threads_parse_kstack(buf);
}

int threads_parse_syscall(const char *text, uint64_t *nr, uint64_t *arg0, uint64_t *arg1,
			  uint64_t *arg2)
{
	unsigned long long v[4];

	/* "running", or "-1 SP PC" when blocked outside a system call */
	if (sscanf(text, "%llu %llx %llx %llx", &v[0], &v[1], &v[2], &v[3]) != 4 ||
	    v[0] > 100000)
		return -EINVAL;
	*nr = v[0];
	*arg0 = v[1];
	*arg1 = v[2];
	*arg2 = v[3];
	return 0;
}

static int read_mem(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };

	return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
}

/* The system call tid is blocked in and, if it is a wait for a pthread mutex, the mutex and
 * its holder. glibc's normal mutexes wait with FUTEX_WAIT for the value 2 ("locked, with
 * waiters") on __lock and keep the holder in __owner; PI mutexes keep the holder's tid in the
 * futex word itself. Anything else (condition variables, semaphores) is not a mutex wait. */
static void read_lock_wait(pid_t pid, struct thread_info *t)
{
	uint64_t nr, uaddr, op, val;
	char path[64], buf[256];
	int32_t word, owner;

	t->syscall = -1;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)t->tid);
	if (read_small(path, buf, sizeof(buf)) ||
	    threads_parse_syscall(buf, &nr, &uaddr, &op, &val))
		return;
	t->syscall = nr;
	if (nr != SYS_futex || read_mem(pid, uaddr, &word, sizeof(word)))
		return;
	switch (op & FUTEX_CMD_MASK) {
	case FUTEX_WAIT:
	case FUTEX_WAIT_BITSET:
		if (val != 2 || word != 2 ||
		    read_mem(pid, uaddr + MUTEX_OWNER_OFFSET, &owner, sizeof(owner)))
			return;
		break;
	case FUTEX_LOCK_PI:
	case FUTEX_LOCK_PI2:
		owner = word & FUTEX_TID_MASK;
		break;
	default:
		return;
	}
	t->lock_addr = uaddr;
	t->lock_owner = owner > 0 ? owner : 0;
}

static int cmp_tid(const void *a, const void *b)
{
	pid_t x = ((const struct thread_info *)a)->tid, y = ((const struct thread_info *)b)->tid;

	return (x > y) - (x < y);
}

int threads_read(pid_t pid, unsigned detail, struct thread_list *out)
{
	struct dirent *de;
	size_t cap = 0;
	char path[64];
	DIR *dir;

	memset(out, 0, sizeof(*out));
	out->pid = pid;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return errno == ENOENT ? -ESRCH : -errno;
	while ((de = readdir(dir))) {
		struct thread_info *t;
		int tid = atoi(de->d_name);

		if (tid <= 0)
			continue;
		if (out->n == cap) {
			cap = cap ? 2 * cap : 32;
			t = realloc(out->v, cap * sizeof(*t));
			if (!t) {
				closedir(dir);
				threads_free(out);
				return -ENOMEM;
			}
			out->v = t;
		}
		t = &out->v[out->n];
		memset(t, 0, sizeof(*t));
		t->tid = tid;
		t->syscall = -1;
		if (read_stat(pid, t))
			continue; /* exited meanwhile */
		if (detail & THREADS_LOCKS)
			read_lock_wait(pid, t);
		if (detail & THREADS_KSTACKS)
			t->kstack = read_kstack(pid, tid);
		out->n++;
	}
	closedir(dir);
	qsort(out->v, out->n, sizeof(*out->v), cmp_tid);
	return 0;
}

int threads_read_since_start(pid_t pid, struct thread_list *out)
{
	struct timespec ts;
	uint64_t now;
	int err = threads_read(pid, THREADS_BASIC, out);

	if (err)
		return err;
	/* starttime counts from boot, suspend included, as CLOCK_BOOTTIME does. */
	clock_gettime(CLOCK_BOOTTIME, &ts);
	now = ts.tv_sec * 1000000ULL + ts.tv_nsec / 1000;
	for (size_t i = 0; i < out->n; i++) {
		struct thread_info *t = &out->v[i];

		t->recent_us = t->utime_us + t->stime_us;
		t->span_us = now > t->started_us ? now - t->started_us : 1;
	}
	out->interval_us = 0;
	return 0;
}

int threads_read_one(pid_t pid, pid_t tid, struct thread_info *out)
{
	memset(out, 0, sizeof(*out));
	out->tid = tid;
	out->syscall = -1;
	return read_stat(pid, out) ? -ENOENT : 0;
}

void thread_info_fini(struct thread_info *t)
{
	free(t->kstack);
	free(t->ustack);
	t->kstack = t->ustack = NULL;
}

void threads_free(struct thread_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		thread_info_fini(&l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static ssize_t index_of(const struct thread_list *l, pid_t tid)
{
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (l->v[mid].tid == tid)
			return mid;
		if (l->v[mid].tid < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* Each thread waits for at most one lock, held by one thread: the wait-for graph has at most
 * one edge out of each node, so walking from each thread finds every cycle. A cycle is
 * reported from its lowest index, once. */
int threads_find_deadlocks(const struct thread_list *l, struct deadlock **out, size_t *n)
{
	size_t *path = calloc(l->n + 1, sizeof(*path));
	struct deadlock *found = NULL;
	size_t nfound = 0;
	int err = 0;

	*out = NULL;
	*n = 0;
	if (!path)
		return -ENOMEM;
	for (size_t start = 0; !err && start < l->n; start++) {
		size_t len = 0, cur = start;
		ssize_t next;

		for (;;) {
			path[len++] = cur;
			next = l->v[cur].lock_addr ? index_of(l, l->v[cur].lock_owner) : -1;
			if (next < 0 || (size_t)next < start || len > l->n)
				break;
			if ((size_t)next == start) {
				struct deadlock *bigger = realloc(found, (nfound + 1) *
								  sizeof(*found));
				size_t *at = malloc(len * sizeof(*at));

				if (!bigger || !at) {
					free(at);
					if (bigger)
						found = bigger;
					err = -ENOMEM;
					break;
				}
				found = bigger;
				memcpy(at, path, len * sizeof(*at));
				found[nfound++] = (struct deadlock){ .at = at, .n = len };
				break;
			}
			cur = next;
		}
	}
	free(path);
	if (err) {
		deadlocks_free(found, nfound);
		return err;
	}
	*out = found;
	*n = nfound;
	return 0;
}

void deadlocks_free(struct deadlock *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(d[i].at);
	free(d);
}
