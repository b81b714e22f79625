// SPDX-License-Identifier: GPL-2.0
/* The node's spool of unacknowledged batches. The directory is the truth; the list here is
 * its index, sorted by name, which is oldest first. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "sync/spool.h"
#include "sync/wire.h"

#define NAME_MAX_LEN 96

struct spool_entry {
	char name[NAME_MAX_LEN];
	uint64_t bytes;
	int64_t created;
};

struct spool {
	pthread_mutex_t lock;
	char dir[PATH_MAX];
	int dirfd;
	uint64_t max_bytes;
	struct spool_entry *v;
	size_t n, cap;
	char busy[NAME_MAX_LEN]; /* peeked, being sent: never dropped */
	struct spool_stats stats;
};

static int mkdir_p(const char *path)
{
	char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0700) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct spool_entry *)a)->name, ((const struct spool_entry *)b)->name);
}

static int entry_add(struct spool *s, const char *name, uint64_t bytes, int64_t created)
{
	size_t i;

	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		struct spool_entry *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	/* Usually the newest: found from the end. */
	for (i = s->n; i > 0 && strcmp(s->v[i - 1].name, name) > 0; i--)
		;
	memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof(*s->v));
	snprintf(s->v[i].name, sizeof(s->v[i].name), "%s", name);
	s->v[i].bytes = bytes;
	s->v[i].created = created;
	s->n++;
	s->stats.bytes += bytes;
	s->stats.batches++;
	return 0;
}

static void entry_remove(struct spool *s, size_t i)
{
	s->stats.bytes -= s->v[i].bytes;
	s->stats.batches--;
	memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof(*s->v));
	s->n--;
}

static int read_file(int dirfd, const char *name, uint8_t **data, size_t *len)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint8_t *buf;
	size_t got = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		close(fd);
		return -errno;
	}
	buf = malloc(st.st_size ? st.st_size : 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, st.st_size - got);

		if (n <= 0) {
			free(buf);
			close(fd);
			return n < 0 ? -errno : -EIO;
		}
		got += n;
	}
	close(fd);
	*data = buf;
	*len = got;
	return 0;
}

/* The cpu samples a batch carries: what dropping it loses, for status. */
static uint64_t batch_cpu_samples(const uint8_t *data, size_t len)
{
	WireBatch *b;
	uint64_t sum = 0;
	char why[128];

	if (wire_decode(data, len, &wire_default_limits, &b, why, sizeof(why)))
		return 0;
	for (size_t t = 0; t < b->n_targets; t++)
		for (size_t p = 0; p < b->targets[t]->n_profiles; p++) {
			const Aperture__Sync__V1__Profile *pr = b->targets[t]->profiles[p];

			if (strcmp(pr->type, "cpu"))
				continue;
			for (size_t s = 0; s < pr->n_seconds; s++)
				for (size_t k = 0; k < pr->seconds[s]->n_counts; k++)
					sum += pr->seconds[s]->counts[k];
		}
	wire_free(b);
	return sum;
}

/* Drops the oldest batches (but the one being sent) until more bytes fit. */
static void make_room(struct spool *s, uint64_t more)
{
	size_t i = 0;

	while (s->stats.bytes + more > s->max_bytes && i < s->n) {
		uint8_t *data;
		size_t len;

		if (!strcmp(s->v[i].name, s->busy)) {
			i++;
			continue;
		}
		if (!read_file(s->dirfd, s->v[i].name, &data, &len)) {
			s->stats.dropped_samples += batch_cpu_samples(data, len);
			free(data);
		}
		unlinkat(s->dirfd, s->v[i].name, 0);
		if (!s->stats.oldest_dropped || s->v[i].created < s->stats.oldest_dropped)
			s->stats.oldest_dropped = s->v[i].created;
		s->stats.dropped++;
		entry_remove(s, i);
	}
}

int spool_open(const char *dir, uint64_t max_bytes, struct spool **out, char *why, size_t whylen)
{
	struct spool *s = calloc(1, sizeof(*s));
	struct dirent *de;
	DIR *d;
	int err;

	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	s->max_bytes = max_bytes;
	s->dirfd = -1;
	err = mkdir_p(dir);
	if (!err) {
		s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		err = s->dirfd < 0 ? -errno : 0;
	}
	d = err ? NULL : fdopendir(dup(s->dirfd));
	if (!err && !d)
		err = -errno;
	if (err) {
		snprintf(why, whylen, "spool %s: %s", dir, strerror(-err));
		spool_close(s);
		return err;
	}
	while (!err && (de = readdir(d))) {
		long long created;
		struct stat st;
		size_t len = strlen(de->d_name);

		/* A temporary file is a write that did not finish: not a batch. */
		if (len > 4 && !strcmp(de->d_name + len - 4, ".tmp")) {
			unlinkat(s->dirfd, de->d_name, 0);
			continue;
		}
		if (len < 7 || len >= NAME_MAX_LEN || strcmp(de->d_name + len - 6, ".batch") ||
		    sscanf(de->d_name, "%12lld-", &created) != 1 ||
		    fstatat(s->dirfd, de->d_name, &st, 0))
			continue;
		err = entry_add(s, de->d_name, st.st_size, created);
	}
	closedir(d);
	if (err) {
		snprintf(why, whylen, "spool %s: %s", dir, strerror(-err));
		spool_close(s);
		return err;
	}
	if (s->n)
		qsort(s->v, s->n, sizeof(*s->v), cmp_entry);
	*out = s;
	return 0;
}

void spool_close(struct spool *s)
{
	if (!s)
		return;
	if (s->dirfd >= 0)
		close(s->dirfd);
	free(s->v);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void spool_set_max(struct spool *s, uint64_t max_bytes)
{
	pthread_mutex_lock(&s->lock);
	s->max_bytes = max_bytes;
	make_room(s, 0);
	pthread_mutex_unlock(&s->lock);
}

static int write_all(int fd, const void *data, size_t len)
{
	const uint8_t *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= n;
	}
	return 0;
}

int spool_put(struct spool *s, int64_t created, const char *boot_id, uint64_t seq,
	      const void *data, size_t len)
{
	char name[NAME_MAX_LEN], tmp[NAME_MAX_LEN + 8];
	int fd, err;

	snprintf(name, sizeof(name), "%012lld-%s-%020" PRIu64 ".batch", (long long)created,
		 boot_id, seq);
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	pthread_mutex_lock(&s->lock);
	make_room(s, len);
	fd = openat(s->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	err = write_all(fd, data, len);
	if (!err && fsync(fd))
		err = -errno;
	close(fd);
	if (!err && renameat(s->dirfd, tmp, s->dirfd, name))
		err = -errno;
	/* The rename is durable once the directory is. */
	if (!err && fsync(s->dirfd))
		err = -errno;
	if (err)
		unlinkat(s->dirfd, tmp, 0);
	else
		err = entry_add(s, name, len, created);
out:
	pthread_mutex_unlock(&s->lock);
	return err;
}

int spool_peek(struct spool *s, char *name, size_t namelen, uint8_t **data, size_t *len)
{
	int err = -ENOENT;

	pthread_mutex_lock(&s->lock);
	while (s->n) {
		err = read_file(s->dirfd, s->v[0].name, data, len);
		if (!err) {
			snprintf(name, namelen, "%s", s->v[0].name);
			snprintf(s->busy, sizeof(s->busy), "%s", s->v[0].name);
			break;
		}
		/* Gone or unreadable (someone removed it): not a batch any more. */
		entry_remove(s, 0);
		err = -ENOENT;
	}
	pthread_mutex_unlock(&s->lock);
	return err;
}

void spool_done(struct spool *s, const char *name)
{
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n; i++) {
		if (strcmp(s->v[i].name, name))
			continue;
		unlinkat(s->dirfd, name, 0);
		entry_remove(s, i);
		break;
	}
	s->busy[0] = 0;
	pthread_mutex_unlock(&s->lock);
}

void spool_keep(struct spool *s, const char *name)
{
	pthread_mutex_lock(&s->lock);
	if (!strcmp(s->busy, name))
		s->busy[0] = 0;
	/* A batch kept past the bound while it was being sent goes now, the oldest. */
	make_room(s, 0);
	pthread_mutex_unlock(&s->lock);
}

void spool_get_stats(struct spool *s, struct spool_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->stats;
	out->oldest = s->n ? s->v[0].created : 0;
	pthread_mutex_unlock(&s->lock);
}
