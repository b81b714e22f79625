/* What proc_syms.c needs to see of struct symbolizer. Not for use outside symbols/. */
#ifndef APERTURE_SYMBOLS_SYMBOLIZER_PRIV_H
#define APERTURE_SYMBOLS_SYMBOLIZER_PRIV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "symbols/symbols.h"

struct cached_file;
struct file_cache;
struct kernel_syms;

struct symbolizer {
	struct file_cache *files;
	struct kernel_syms *kernel;
	struct cached_file *vdso;	/* our vDSO image, referenced; NULL when there is none */
	size_t vdso_size;
	_Atomic bool raw_names;		/* demangling switched off */
	/* proc_syms alive: when the last goes, no process is named any more and the idle
	 * files and kallsyms are dropped, so a daemon whose targets are gone shrinks back. */
	atomic_size_t processes;
};

/* snprintf into a caller's name buffer: 0, or -ENOSPC when the name did not fit. */
int symbols_format(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
