/* Finding an ELF file's separate debug file (the one with .symtab, for a stripped binary),
 * on local disks only.
 *
 * libdwfl's dwfl_standard_find_debuginfo ends by asking debuginfod servers when
 * DEBUGINFOD_URLS is set (measured: it connects from inside proc_syms_new), which could
 * stall symbolization on a download of hundreds of megabytes. This searches what the
 * standard one searches locally, and also inside the target's root so containers work. */
#ifndef APERTURE_SYMBOLS_DEBUG_FILE_H
#define APERTURE_SYMBOLS_DEBUG_FILE_H

#include <elfutils/libdwfl.h>

/* Extra directories searched first, ':' between them (copied). They are process-wide, as
 * libdwfl's callbacks get no context of ours. 0 or -ENOMEM. */
int debug_file_set_dirs(const char *dirs);

/* A Dwfl_Callbacks.find_debuginfo. Tries, in order, where root is "/proc/<pid>/root" when
 * file_name starts with it and "" otherwise:
 *   each extra directory DIR: DIR/.build-id/xx/rest.debug, DIR/<.gnu_debuglink NAME>;
 *   /usr/lib/debug/.build-id/xx/rest.debug, then the same under root;
 *   for .gnu_debuglink NAME: the file's directory, its .debug/, root/usr/lib/debug/DIR/.
 * A candidate is taken only if its build-id matches the module's. Returns an fd or -1. */
int debug_file_find(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		    const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
		    char **debuginfo_file_name);

#endif
