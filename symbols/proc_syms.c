// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/demangle.h"
#include "symbols/elf_file.h"
#include "symbols/kernel_syms.h"
#include "symbols/file_cache.h"
#include "symbols/perf_map.h"
#include "symbols/procmaps.h"
#include "symbols/symbolizer_priv.h"

enum map_kind {
	MAP_FILE,	/* named by symbol, else BASENAME+0xFILEOFFSET */
	MAP_ANON,	/* named LABEL+0xADDRESS: no file offset means anything */
};

struct proc_map {
	uint64_t start;
	uint64_t end;
	uint64_t pgoff;
	unsigned int dev_major;
	unsigned int dev_minor;
	uint64_t inode;
	enum map_kind kind;
	char *path;			/* owned; as in maps, for matching on refresh */
	const char *label;		/* base name in path, or "[anon]" */
	struct cached_file *file;	/* referenced; NULL when not opened or not ELF */
};

struct proc_syms {
	struct symbolizer *s;
	pid_t pid;
	/* Naming reads maps while a refresh swaps in a new table; refreshes are serialized so
	 * one can read the current table to reuse its files without the rwlock. */
	pthread_rwlock_t lock;
	pthread_mutex_t refresh_lock;
	struct proc_map *maps;		/* executable mappings, ascending */
	size_t n;
	struct perf_map *jit;		/* names for anonymous code, from the target's perf map */
};

static void free_table(struct symbolizer *s, struct proc_map *maps, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		file_cache_put(s->files, maps[i].file);
		free(maps[i].path);
	}
	free(maps);
}

static bool same_mapping(const struct proc_map *a, const struct procmap *b)
{
	return a->start == b->start && a->end == b->end && a->pgoff == b->pgoff &&
	       a->dev_major == b->dev_major && a->dev_minor == b->dev_minor &&
	       a->inode == b->inode && !strcmp(a->path, b->path);
}

/* map_files/ reaches the very file that is mapped, even deleted or in another mount
 * namespace; it needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE. root/ reaches the path as
 * the process sees it, which for a deleted file may now be another file. */
static int open_mapped_file(pid_t pid, const struct procmap *m)
{
	char path[PATH_MAX + 64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64,
		 (int)pid, m->start, m->end);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 || m->deleted)
		return fd;
	snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, m->path);
	return open(path, O_RDONLY | O_CLOEXEC);
}

/* reader: whose /proc directory shows m (procmaps_reader). */
static void attach_file(struct proc_syms *ps, pid_t reader, const struct procmap *m,
			struct proc_map *pm)
{
	struct symbolizer *s = ps->s;
	char debug_path[PATH_MAX + 64];
	int fd;

	/* Unchanged since the last read: the file is already ours. */
	for (size_t i = 0; i < ps->n; i++) {
		if (ps->maps[i].file && same_mapping(&ps->maps[i], m)) {
			pm->file = file_cache_ref(s->files, ps->maps[i].file);
			return;
		}
	}
	fd = open_mapped_file(reader, m);
	if (fd < 0)
		return;
	snprintf(debug_path, sizeof(debug_path), "/proc/%d/root%s", (int)reader, m->path);
	/* A file that is not ELF, or cannot be read, is still named by offset. */
	if (file_cache_get(s->files, fd, debug_path, &pm->file))
		pm->file = NULL;
}

static int fill_map(struct proc_syms *ps, pid_t reader, const struct procmap *m,
		    struct proc_map *pm)
{
	struct symbolizer *s = ps->s;
	const char *slash;

	*pm = (struct proc_map){
		.start = m->start,
		.end = m->end,
		.pgoff = m->pgoff,
		.dev_major = m->dev_major,
		.dev_minor = m->dev_minor,
		.inode = m->inode,
	};
	pm->path = strdup(m->path);
	if (!pm->path)
		return -ENOMEM;
	if (!m->path[0]) {
		pm->kind = MAP_ANON;
		pm->label = "[anon]";
	} else if (!strcmp(m->path, "[vdso]")) {
		pm->kind = MAP_FILE;
		pm->label = pm->path;
		/* A 32-bit process has another vDSO; its size tells it apart. */
		if (s->vdso && m->end - m->start == s->vdso_size)
			pm->file = file_cache_ref(s->files, s->vdso);
	} else if (procmap_is_pseudo(m)) {
		pm->kind = MAP_ANON;
		pm->label = pm->path;
	} else {
		pm->kind = MAP_FILE;
		slash = strrchr(pm->path, '/');
		pm->label = slash ? slash + 1 : pm->path;
		attach_file(ps, reader, m, pm);
	}
	return 0;
}

/* Reads the process's maps into a new table, reusing ps's current files where a mapping is
 * unchanged. */
static int read_table(struct proc_syms *ps, struct proc_map **out, size_t *out_n)
{
	struct procmaps pm;
	struct proc_map *maps;
	size_t i, n = 0;
	int err;

	err = procmaps_read(ps->pid, &pm);
	if (err)
		return err;
	maps = calloc(pm.n ? pm.n : 1, sizeof(*maps));
	if (!maps) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; i < pm.n; i++) {
		if (!procmap_is_exec(&pm.maps[i]))
			continue;
		err = fill_map(ps, pm.reader, &pm.maps[i], &maps[n]);
		if (err) {
			free_table(ps->s, maps, n);
			goto out;
		}
		n++;
	}
	*out = maps;
	*out_n = n;
out:
	procmaps_free(&pm);
	return err;
}

int proc_syms_new(struct symbolizer *s, pid_t pid, struct proc_syms **out)
{
	struct proc_syms *ps;
	int err;

	ps = calloc(1, sizeof(*ps));
	if (!ps)
		return -ENOMEM;
	ps->s = s;
	ps->pid = pid;
	atomic_fetch_add(&s->processes, 1);
	pthread_rwlock_init(&ps->lock, NULL);
	pthread_mutex_init(&ps->refresh_lock, NULL);
	err = perf_map_open(pid, &ps->jit);
	if (!err)
		err = read_table(ps, &ps->maps, &ps->n);
	if (err) {
		proc_syms_free(ps);
		return err;
	}
	*out = ps;
	return 0;
}

int proc_syms_refresh(struct proc_syms *ps)
{
	struct proc_map *maps, *old;
	size_t n, old_n;
	int err;

	pthread_mutex_lock(&ps->refresh_lock);
	err = read_table(ps, &maps, &n);
	if (err)
		goto out;
	/* An exited but unreaped process has no mappings left; what we had is better. */
	if (n == 0 && ps->n > 0) {
		free_table(ps->s, maps, n);
		err = -ESRCH;
		goto out;
	}
	pthread_rwlock_wrlock(&ps->lock);
	old = ps->maps;
	old_n = ps->n;
	ps->maps = maps;
	ps->n = n;
	pthread_rwlock_unlock(&ps->lock);
	free_table(ps->s, old, old_n);
out:
	pthread_mutex_unlock(&ps->refresh_lock);
	return err;
}

void proc_syms_free(struct proc_syms *ps)
{
	if (!ps)
		return;
	free_table(ps->s, ps->maps, ps->n);
	perf_map_free(ps->jit);
	pthread_mutex_destroy(&ps->refresh_lock);
	pthread_rwlock_destroy(&ps->lock);
	if (atomic_fetch_sub(&ps->s->processes, 1) == 1) {
		file_cache_drop_idle(ps->s->files);
		kernel_syms_drop(ps->s->kernel);
	}
	free(ps);
}

static const struct proc_map *find_map(const struct proc_syms *ps, uint64_t addr)
{
	size_t lo = 0, hi = ps->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct proc_map *m = &ps->maps[mid];

		if (addr < m->start)
			hi = mid;
		else if (addr >= m->end)
			lo = mid + 1;
		else
			return m;
	}
	return NULL;
}

/* A function name as shown: demangled unless switched off. */
static int format_name(const struct proc_syms *ps, const char *name, char *buf, size_t len)
{
	if (!atomic_load(&ps->s->raw_names) && demangle(name, buf, len))
		return 0;
	return symbols_format(buf, len, "%s", name);
}

/* lookup: the address itself for a leaf, the call instruction's last byte for a caller
 * (return address - 1, as perf does), so an unnamed caller is the call, not what follows. */
static int name_in_map(const struct proc_syms *ps, const struct proc_map *m, uint64_t lookup,
		       char *buf, size_t len)
{
	const char *name = NULL;
	size_t n;

	/* JIT code named by the runtime's perf map: "_[j]", as Java's compiled methods. */
	if (m->kind == MAP_ANON && len > 4 && !perf_map_name(ps->jit, lookup, buf, len - 4)) {
		n = strlen(buf);
		memcpy(buf + n, "_[j]", 5);
		return 0;
	}
	if (m->kind == MAP_ANON)
		return symbols_format(buf, len, "%s+0x%" PRIx64, m->label, lookup);
	if (m->file)
		name = elf_file_lookup(cached_file_elf(m->file), lookup - m->start + m->pgoff);
	if (name)
		return format_name(ps, name, buf, len);
	return symbols_format(buf, len, "%s+0x%" PRIx64, m->label, lookup - m->start + m->pgoff);
}

static void hex(const uint8_t *id, size_t n, char *out, size_t outlen)
{
	size_t i;

	for (i = 0; i < n && 2 * i + 2 < outlen; i++)
		sprintf(out + 2 * i, "%02x", id[i]);
	out[2 * i] = '\0';
}

/* Adds DWARF's view of the function at lookup: where f[0] is defined, the functions
 * inlined there, and the line each runs. */
static void add_scopes(const struct proc_syms *ps, const struct proc_map *m, uint64_t lookup,
		       struct sym_frames *out)
{
	struct elf_scope scopes[SYMS_INLINE_MAX];
	const struct elf_file *f = cached_file_elf(m->file);
	int n = elf_file_scopes(f, lookup - m->start + m->pgoff, scopes, SYMS_INLINE_MAX);
	size_t len;

	if (n == 0)
		return;
	out->f[0].file = scopes[0].file;
	out->f[0].line = scopes[0].line;
	out->f[0].at_line = scopes[0].at_line;
	for (int i = 1; i < n; i++) {
		struct sym_frame *fr = &out->f[out->n];

		if (!scopes[i].name)
			continue;
		/* Room for the suffix: a name cut short still says it was inlined. */
		if (format_name(ps, scopes[i].name, fr->name, sizeof(fr->name) - 4))
			continue;
		len = strlen(fr->name);
		memcpy(fr->name + len, "_[i]", 5);
		fr->file = scopes[i].file;
		fr->line = scopes[i].line;
		fr->at_line = scopes[i].at_line;
		out->n++;
	}
}

int proc_syms_name(struct proc_syms *ps, uint64_t addr, bool is_return, char *buf, size_t len)
{
	/* A return address is the instruction after the call, which may already belong to
	 * the next function when the call was the caller's last instruction. */
	uint64_t lookup = is_return && addr ? addr - 1 : addr;
	const struct proc_map *m;
	int err = -ENOENT;

	pthread_rwlock_rdlock(&ps->lock);
	m = find_map(ps, lookup);
	if (m)
		err = name_in_map(ps, m, lookup, buf, len);
	pthread_rwlock_unlock(&ps->lock);
	return err;
}

int proc_syms_frames(struct proc_syms *ps, uint64_t addr, bool is_return,
		     struct sym_frames *out)
{
	uint64_t lookup = is_return && addr ? addr - 1 : addr;
	const struct elf_file_key *key;
	const struct proc_map *m;
	int err = -ENOENT;

	out->n = 0;
	out->module = NULL;
	out->build_id[0] = '\0';
	pthread_rwlock_rdlock(&ps->lock);
	m = find_map(ps, lookup);
	if (!m)
		goto out;
	out->f[0].file = NULL;
	out->f[0].line = 0;
	out->f[0].at_line = 0;
	err = name_in_map(ps, m, lookup, out->f[0].name, sizeof(out->f[0].name));
	if (err)
		goto out;
	out->n = 1;
	if (m->kind != MAP_FILE)
		goto out;
	out->module = m->path;
	if (!m->file)
		goto out;
	key = elf_file_key(cached_file_elf(m->file));
	if (key->build_id)
		hex(key->build_id, key->build_id_len, out->build_id, sizeof(out->build_id));
	add_scopes(ps, m, lookup, out);
out:
	pthread_rwlock_unlock(&ps->lock);
	return err;
}
