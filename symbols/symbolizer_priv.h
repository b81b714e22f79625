/* What proc_syms.c needs to see of struct symbolizer. Not for use outside symbols/. */
#ifndef APERTURE_SYMBOLS_SYMBOLIZER_PRIV_H
#define APERTURE_SYMBOLS_SYMBOLIZER_PRIV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "symbols/symbols.h"

struct cached_file;
struct file_cache;
struct kallsyms;

struct symbolizer {
	struct file_cache *files;
	struct kallsyms *kernel;	/* NULL when /proc/kallsyms could not be read */
	struct cached_file *vdso;	/* our vDSO image, referenced; NULL when there is none */
	size_t vdso_size;
	_Atomic bool raw_names;		/* demangling switched off */
};

/* snprintf into a caller's name buffer: 0, or -ENOSPC when the name did not fit. */
int symbols_format(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
