// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "symbols/debug_file.h"
#include "symbols/file_cache.h"
#include "symbols/kernel_syms.h"
#include "symbols/symbolizer_priv.h"
#include "symbols/vdso.h"

/* See file_cache.c for why idle files are kept at all. */
#define IDLE_FILES_MAX 64

int symbols_format(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len)
		return -ENOSPC;
	return 0;
}

int symbolizer_new(struct symbolizer **out)
{
	struct symbolizer *s;
	int fd, err;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	err = file_cache_new(IDLE_FILES_MAX, &s->files);
	if (err)
		goto err_free;
	err = kernel_syms_new(&s->kernel);
	if (err)
		goto err_free_files;
	/* Not fatal: without it vDSO frames keep their addresses. */
	if (!vdso_memfd(&fd, &s->vdso_size) &&
	    file_cache_get(s->files, fd, "[vdso]", &s->vdso))
		s->vdso = NULL;
	*out = s;
	return 0;

err_free_files:
	file_cache_free(s->files);
err_free:
	free(s);
	return err;
}

void symbolizer_free(struct symbolizer *s)
{
	if (!s)
		return;
	file_cache_put(s->files, s->vdso);
	file_cache_free(s->files);
	kernel_syms_free(s->kernel);
	free(s);
}

int symbolizer_kernel_name(struct symbolizer *s, uint64_t addr, char *buf, size_t len)
{
	int err = kernel_syms_name(s->kernel, addr, buf, len);

	if (err != -ENOENT)
		return err;
	return symbols_format(buf, len, "[kernel]+0x%" PRIx64, addr);
}

size_t symbolizer_cached_files(struct symbolizer *s)
{
	return file_cache_count(s->files);
}

void symbolizer_set_demangle(struct symbolizer *s, bool on)
{
	atomic_store(&s->raw_names, !on);
}

int symbolizer_set_debug_dirs(struct symbolizer *s, const char *dirs)
{
	return debug_file_set_dirs(dirs);
}
