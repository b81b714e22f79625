// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "symbols/addr_table.h"
#include "symbols/perf_map.h"
#include "symbols/read_file.h"

/* Bounds on what a target's file can make us hold: lines longer than this are skipped
 * (names are cut at SYMS_NAME_MAX anyway), and past this many functions new ones are not
 * kept. */
#define LINE_MAX_BYTES 4096
#define FUNCTIONS_MAX (1u << 20)
/* Read at most this much at once; the rest on the next miss. */
#define READ_MAX (16u << 20)

struct jit_fn {
	uint64_t addr;	/* first: see addr_table.h */
	uint64_t end;
	uint64_t seq;	/* line number: a later line for the same start wins (code reused) */
	char *name;	/* owned */
};

struct perf_map {
	pthread_mutex_t lock; /* everything below */
	pid_t pid;
	char path[96];
	off_t consumed;		/* bytes of whole lines read */
	int64_t checked_ms;	/* CLOCK_MONOTONIC, when the file was last looked at */
	struct jit_fn *fns;	/* sorted by addr, one per addr */
	size_t n, cap;
	uint64_t lines;
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int fn_cmp(const void *pa, const void *pb)
{
	const struct jit_fn *a = pa, *b = pb;

	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	return a->seq > b->seq ? -1 : a->seq < b->seq;
}

static void forget_all(struct perf_map *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->fns[i].name);
	m->n = 0;
	m->consumed = 0;
}

/* A hex number ending in a space, within [*p, end): moves *p past the space. strtoull is not
 * used: the text is not NUL-terminated, and it would read past the line. */
static int parse_hex(const char **p, const char *end, uint64_t *out)
{
	const char *q = *p;
	uint64_t v = 0;
	int digits = 0;

	for (; q < end && *q != ' '; q++, digits++) {
		int d = *q >= '0' && *q <= '9' ? *q - '0' :
			*q >= 'a' && *q <= 'f' ? *q - 'a' + 10 :
			*q >= 'A' && *q <= 'F' ? *q - 'A' + 10 : -1;

		if (d < 0 || digits == 16)
			return -EINVAL;
		v = v << 4 | d;
	}
	if (!digits || q == end)
		return -EINVAL;
	*p = q + 1;
	*out = v;
	return 0;
}

/* "START SIZE NAME" in [p, end): 0, or -EINVAL for a line that is not one. */
static int parse_line(const char *p, const char *end, struct jit_fn *fn)
{
	uint64_t size;

	if (end - p > LINE_MAX_BYTES || parse_hex(&p, end, &fn->addr) ||
	    parse_hex(&p, end, &size) || !size || fn->addr + size < fn->addr || p == end)
		return -EINVAL;
	fn->end = fn->addr + size;
	fn->name = strndup(p, end - p);
	return fn->name ? 0 : -ENOMEM;
}

static int add_lines(struct perf_map *m, const char *text, size_t len, size_t *used)
{
	const char *p = text, *end = text + len;
	size_t before = m->n;

	while (p < end) {
		const char *nl = memchr(p, '\n', end - p);
		struct jit_fn fn;

		if (!nl)
			break; /* the writer is still at it */
		if (m->n == m->cap) {
			size_t cap = m->cap ? 2 * m->cap : 1024;
			struct jit_fn *grown = reallocarray(m->fns, cap, sizeof(*grown));

			if (!grown)
				return -ENOMEM;
			m->fns = grown;
			m->cap = cap;
		}
		if (m->n < FUNCTIONS_MAX && !parse_line(p, nl, &fn)) {
			fn.seq = m->lines;
			m->fns[m->n++] = fn;
		}
		m->lines++;
		p = nl + 1;
	}
	*used = p - text;
	if (m->n == before)
		return 0;
	qsort(m->fns, m->n, sizeof(*m->fns), fn_cmp);
	for (size_t i = 1; i < m->n; i++)
		if (m->fns[i].addr == m->fns[i - 1].addr)
			free(m->fns[i].name);
	m->n = addr_table_dedup(m->fns, m->n, sizeof(*m->fns));
	return 0;
}

/* Whether st may be read as the target's map: a regular file of root or of the target's
 * user (as perf requires of the user running it). */
static bool trusted(const struct perf_map *m, const struct stat *st)
{
	char proc[32];
	struct stat owner;

	if (!S_ISREG(st->st_mode))
		return false;
	if (st->st_uid == 0)
		return true;
	snprintf(proc, sizeof(proc), "/proc/%d", (int)m->pid);
	return !stat(proc, &owner) && owner.st_uid == st->st_uid;
}

/* Reads what was appended since the last read. Under m->lock. */
static int read_more(struct perf_map *m)
{
	struct stat st;
	size_t want, used = 0;
	ssize_t got;
	char *buf;
	int fd, err = 0;

	m->checked_ms = mono_ms();
	fd = open(m->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return -errno; /* not written (yet), or the process is gone: keep what we have */
	if (fstat(fd, &st) || !trusted(m, &st)) {
		err = -EPERM;
		goto out;
	}
	if (st.st_size < m->consumed)
		forget_all(m); /* another file: the pid was reused, or it was rewritten */
	if (st.st_size == m->consumed)
		goto out;
	want = st.st_size - m->consumed;
	if (want > READ_MAX)
		want = READ_MAX;
	buf = malloc(want);
	if (!buf) {
		err = -ENOMEM;
		goto out;
	}
	got = pread(fd, buf, want, m->consumed);
	if (got > 0) {
		err = add_lines(m, buf, got, &used);
		/* A full read without a line end is no perf map: skipped, not read forever. */
		m->consumed += used || (size_t)got < READ_MAX ? used : (size_t)got;
	}
	free(buf);
out:
	close(fd);
	return err;
}

int perf_map_open(pid_t pid, struct perf_map **out)
{
	struct perf_map *m = calloc(1, sizeof(*m));
	pid_t nspid;

	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	m->pid = pid;
	if (proc_nspid(pid, &nspid))
		nspid = pid;
	snprintf(m->path, sizeof(m->path), "/proc/%d/root/tmp/perf-%d.map", (int)pid,
		 (int)nspid);
	read_more(m);
	*out = m;
	return 0;
}

int perf_map_from_text(const char *text, size_t len, struct perf_map **out)
{
	struct perf_map *m = calloc(1, sizeof(*m));
	size_t used;
	int err;

	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	m->checked_ms = mono_ms(); /* path "": nothing to read again */
	err = add_lines(m, text, len, &used);
	if (err) {
		perf_map_free(m);
		return err;
	}
	*out = m;
	return 0;
}

void perf_map_free(struct perf_map *m)
{
	if (!m)
		return;
	forget_all(m);
	free(m->fns);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static const struct jit_fn *find(const struct perf_map *m, uint64_t addr)
{
	size_t lo = addr_table_upper_bound(m->fns, m->n, sizeof(*m->fns), addr);

	return lo && addr < m->fns[lo - 1].end ? &m->fns[lo - 1] : NULL;
}

int perf_map_name(struct perf_map *m, uint64_t addr, char *buf, size_t len)
{
	const struct jit_fn *fn;
	int err = -ENOENT;

	pthread_mutex_lock(&m->lock);
	fn = find(m, addr);
	if (!fn && mono_ms() - m->checked_ms >= PERF_MAP_RECHECK_MS && !read_more(m))
		fn = find(m, addr);
	if (fn)
		err = snprintf(buf, len, "%s", fn->name) < (int)len ? 0 : -ENOSPC;
	pthread_mutex_unlock(&m->lock);
	return err;
}

size_t perf_map_count(struct perf_map *m)
{
	size_t n;

	pthread_mutex_lock(&m->lock);
	n = m->n;
	pthread_mutex_unlock(&m->lock);
	return n;
}
