// SPDX-License-Identifier: GPL-2.0
#include <stdlib.h>
#include <string.h>
#include <libiberty/demangle.h>

#include "symbols/demangle.h"

/* Longer mangled names exist (deep templates); they are left as they are. */
#define MANGLED_MAX 4096

int demangle(const char *name, char *buf, size_t len)
{
	char mangled[MANGLED_MAX];
	size_t n = strcspn(name, "@");
	char *out;

	/* _Z: Itanium C++ (and Rust legacy, which wraps it); _R: Rust v0. */
	if (n >= sizeof(mangled) || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return 0;
	memcpy(mangled, name, n);
	mangled[n] = '\0';
	/* AUTO tries Rust first, which rejects C++ names and strips legacy hashes. */
	out = cplus_demangle(mangled, DMGL_PARAMS | DMGL_ANSI | DMGL_AUTO);
	if (!out)
		return 0;
	if (strlen(out) < len) {
		strcpy(buf, out);
	} else {
		memcpy(buf, out, len - 4);
		strcpy(buf + len - 4, "...");
	}
	free(out);
	return 1;
}
