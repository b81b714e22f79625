// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/queue.h>
#include <sys/stat.h>

#include "symbols/elf_file.h"
#include "symbols/file_cache.h"

struct cached_file {
	struct elf_file *elf;
	unsigned long refs;		/* under the cache's lock */
	TAILQ_ENTRY(cached_file) all;
	TAILQ_ENTRY(cached_file) idle;	/* linked while refs == 0 */
};

/* Files nothing references are kept in a bounded LRU rather than dropped at once: processes
 * come and go (a build's compilers, a cron job, a target restarted) and map the same libc and
 * friends, which would otherwise be parsed again each time. The bound caps the descriptors
 * and memory held for files no process maps any more. */
struct file_cache {
	pthread_mutex_t lock;
	TAILQ_HEAD(, cached_file) all;
	TAILQ_HEAD(, cached_file) idle;	/* least recently released first */
	size_t count;
	size_t nidle;
	size_t idle_max;
};

int file_cache_new(size_t idle_max, struct file_cache **out)
{
	struct file_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	TAILQ_INIT(&c->all);
	TAILQ_INIT(&c->idle);
	c->idle_max = idle_max;
	*out = c;
	return 0;
}

void file_cache_free(struct file_cache *c)
{
	struct cached_file *cf;

	if (!c)
		return;
	while ((cf = TAILQ_FIRST(&c->all))) {
		TAILQ_REMOVE(&c->all, cf, all);
		elf_file_free(cf->elf);
		free(cf);
	}
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static bool same_file(const struct elf_file_key *a, const struct elf_file_key *b)
{
	if (a->build_id && b->build_id)
		return a->build_id_len == b->build_id_len &&
		       !memcmp(a->build_id, b->build_id, a->build_id_len);
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

static struct cached_file *find_locked(struct file_cache *c, const struct elf_file_key *key)
{
	struct cached_file *cf;

	TAILQ_FOREACH(cf, &c->all, all) {
		if (same_file(elf_file_key(cf->elf), key))
			return cf;
	}
	return NULL;
}

static void ref_locked(struct file_cache *c, struct cached_file *cf)
{
	if (cf->refs++ == 0) {
		TAILQ_REMOVE(&c->idle, cf, idle);
		c->nidle--;
	}
}

/* Looks the key up and takes a reference under the lock. */
static struct cached_file *find_and_ref(struct file_cache *c, const struct elf_file_key *key)
{
	struct cached_file *cf;

	pthread_mutex_lock(&c->lock);
	cf = find_locked(c, key);
	if (cf)
		ref_locked(c, cf);
	pthread_mutex_unlock(&c->lock);
	return cf;
}

int file_cache_get(struct file_cache *c, int fd, const char *debug_path,
		   struct cached_file **out)
{
	struct elf_file_key stat_key = {};
	struct cached_file *cf, *fresh;
	struct elf_file *elf;
	struct stat st;
	int err;

	if (fstat(fd, &st)) {
		err = -errno;
		close(fd);
		return err;
	}
	stat_key.dev = st.st_dev;
	stat_key.ino = st.st_ino;
	stat_key.size = st.st_size;
	stat_key.mtime = st.st_mtim;
	cf = find_and_ref(c, &stat_key);
	if (cf) {
		close(fd);
		*out = cf;
		return 0;
	}

	/* Parsing runs without the lock: a large binary, or a debug file on slow storage, must
	 * not stall every other process's lookups. */
	err = elf_file_open(fd, debug_path, &elf);
	if (err)
		return err;
	if (elf_file_key(elf)->build_id) {
		cf = find_and_ref(c, elf_file_key(elf));
		if (cf) {
			elf_file_free(elf);
			*out = cf;
			return 0;
		}
	}
	err = elf_file_load_symbols(elf);
	if (err)
		goto err_free_elf;
	fresh = calloc(1, sizeof(*fresh));
	if (!fresh) {
		err = -ENOMEM;
		goto err_free_elf;
	}
	fresh->elf = elf;
	fresh->refs = 1;

	pthread_mutex_lock(&c->lock);
	/* Another thread may have parsed the same file meanwhile; one copy is kept. */
	cf = find_locked(c, elf_file_key(elf));
	if (cf) {
		ref_locked(c, cf);
	} else {
		TAILQ_INSERT_TAIL(&c->all, fresh, all);
		c->count++;
		cf = fresh;
		fresh = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	if (fresh) {
		elf_file_free(fresh->elf);
		free(fresh);
	}
	*out = cf;
	return 0;

err_free_elf:
	elf_file_free(elf);
	return err;
}

struct cached_file *file_cache_ref(struct file_cache *c, struct cached_file *cf)
{
	pthread_mutex_lock(&c->lock);
	ref_locked(c, cf);
	pthread_mutex_unlock(&c->lock);
	return cf;
}

void file_cache_put(struct file_cache *c, struct cached_file *cf)
{
	struct cached_file *victim = NULL;

	if (!cf)
		return;
	pthread_mutex_lock(&c->lock);
	if (--cf->refs == 0) {
		TAILQ_INSERT_TAIL(&c->idle, cf, idle);
		c->nidle++;
		/* One put makes at most one more idle file, so one eviction keeps the bound. */
		if (c->nidle > c->idle_max) {
			victim = TAILQ_FIRST(&c->idle);
			TAILQ_REMOVE(&c->idle, victim, idle);
			TAILQ_REMOVE(&c->all, victim, all);
			c->nidle--;
			c->count--;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (victim) {
		elf_file_free(victim->elf);
		free(victim);
	}
}

void file_cache_drop_idle(struct file_cache *c)
{
	TAILQ_HEAD(, cached_file) dropped = TAILQ_HEAD_INITIALIZER(dropped);
	struct cached_file *cf;

	pthread_mutex_lock(&c->lock);
	while ((cf = TAILQ_FIRST(&c->idle))) {
		TAILQ_REMOVE(&c->idle, cf, idle);
		TAILQ_REMOVE(&c->all, cf, all);
		TAILQ_INSERT_TAIL(&dropped, cf, idle);
		c->nidle--;
		c->count--;
	}
	pthread_mutex_unlock(&c->lock);
	/* Freed without the lock, as put frees its victim. */
	while ((cf = TAILQ_FIRST(&dropped))) {
		TAILQ_REMOVE(&dropped, cf, idle);
		elf_file_free(cf->elf);
		free(cf);
	}
}

size_t file_cache_count(struct file_cache *c)
{
	size_t n;

	pthread_mutex_lock(&c->lock);
	n = c->count;
	pthread_mutex_unlock(&c->lock);
	return n;
}

const struct elf_file *cached_file_elf(const struct cached_file *cf)
{
	return cf->elf;
}
